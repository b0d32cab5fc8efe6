use super::*;
use crate::integrations::PatchBuilder;
use serde_json::json;

fn lws(leader: bool) -> Value {
    let mut lwt = json!({
        "size": 3,
        "workerTemplate": {"metadata": {"labels": {"app": "w"}},
            "spec": {"containers": [{"name": "w", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}}
    });
    if leader {
        lwt["leaderTemplate"] = json!({"spec": {"containers": [{"name": "l", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}});
    }
    json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ns", "uid": "u-1",
            "labels": {QUEUE_NAME_LABEL: "lq", PRIORITY_CLASS_LABEL: "high"}},
        "spec": {"replicas": 2, "leaderWorkerTemplate": lwt}
    })
}

fn applied(v: &Value) -> Value {
    let o = JobObject::from_value(v).expect("view");
    let mut p = PatchBuilder::new();
    LeaderWorkerSet.suspend(&o, &mut p);
    let mut doc = v.clone();
    json_patch::patch(&mut doc, &p.into_ops()).expect("applies");
    doc
}

/// A pod the LWS controller would make from `template` for group `group`.
fn pod(set: &Value, template: &str, group: &str, worker: &str) -> Value {
    let t = &set["spec"]["leaderWorkerTemplate"][template];
    let mut meta = t["metadata"].clone();
    meta["name"] = json!(format!("serve-{group}-{worker}"));
    meta["namespace"] = json!("ns");
    meta["labels"][SET_NAME_LABEL] = json!("serve");
    meta["labels"][GROUP_INDEX_LABEL] = json!(group);
    meta["labels"][WORKER_INDEX_LABEL] = json!(worker);
    meta["annotations"][SIZE_ANNOTATION] = json!("3");
    let mut spec = t["spec"].clone();
    spec["schedulingGates"] = json!([{"name": ADMISSION_SCHEDULING_GATE}]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

#[test]
fn the_webhook_marks_both_templates_once() {
    let doc = applied(&lws(true));
    for (t, role) in [("leaderTemplate", "leader"), ("workerTemplate", "worker")] {
        let m = &doc["spec"]["leaderWorkerTemplate"][t]["metadata"];
        assert_eq!(m["labels"][QUEUE_NAME_LABEL], "lq", "{t}");
        assert_eq!(m["labels"][PRIORITY_CLASS_LABEL], "high", "{t}");
        assert_eq!(
            m["annotations"][SUSPENDED_BY_PARENT_ANNOTATION], FRAMEWORK,
            "{t}"
        );
        assert_eq!(
            m["annotations"][POD_GROUP_SERVING_ANNOTATION], "true",
            "{t}"
        );
        assert_eq!(m["annotations"][ROLE_HASH_ANNOTATION], role, "{t}");
    }
    assert_eq!(
        doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["app"],
        "w"
    );
    let o = JobObject::from_value(&doc).expect("view");
    assert!(LeaderWorkerSet.is_suspended(&o));
    let mut again = PatchBuilder::new();
    LeaderWorkerSet.suspend(&o, &mut again);
    assert!(again.is_empty());
    let plain = lws(false);
    assert!(!LeaderWorkerSet.is_suspended(&JobObject::from_value(&plain).expect("view")));
    let doc = applied(&plain);
    assert_eq!(
        doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
            [ROLE_HASH_ANNOTATION],
        "main"
    );
}

#[test]
fn pod_sets_are_kueues() {
    let v = lws(true);
    let o = JobObject::from_value(&v).expect("view");
    let sets: Vec<(String, i32)> = LeaderWorkerSet
        .pod_sets(&o)
        .iter()
        .map(|p| (p.name.to_string(), p.count))
        .collect();
    assert_eq!(sets, [("leader".to_string(), 1), ("worker".to_string(), 2)]);
    let v = lws(false);
    let o = JobObject::from_value(&v).expect("view");
    let sets: Vec<(String, i32)> = LeaderWorkerSet
        .pod_sets(&o)
        .iter()
        .map(|p| (p.name.to_string(), p.count))
        .collect();
    assert_eq!(sets, [("main".to_string(), 3)]);
}

#[test]
fn one_workload_per_group_named_as_kueue() {
    // sha1("LeaderWorkerSet\nleaderworkerset.x-k8s.io\nserve-1\nu-1"), first 5 hex.
    let want = {
        use sha1::Digest;
        let h = sha1::Sha1::digest(b"LeaderWorkerSet\nleaderworkerset.x-k8s.io\nserve-1\nu-1");
        format!("leaderworkerset-serve-1-{}", &format!("{h:x}")[..5])
    };
    let set = applied(&lws(true));
    let leader = pod(&set, "leaderTemplate", "1", "0");
    let worker = pod(&set, "workerTemplate", "1", "1");
    assert_eq!(
        LeaderWorkerSet.parent_name_of(&leader).as_deref(),
        Some("serve")
    );
    assert_eq!(
        LeaderWorkerSet.workload_name_of(&worker, Some(&set)),
        Some(want.clone())
    );
    assert_eq!(LeaderWorkerSet.workload_name_of(&worker, None), None);
    assert_eq!(LeaderWorkerSet.pod_set_of(&leader), "leader");
    assert_eq!(LeaderWorkerSet.pod_set_of(&worker), "worker");
    let wl = LeaderWorkerSet
        .compose(&[&leader, &worker], Some(&set))
        .expect("composed");
    assert_eq!(wl.metadata.name.as_deref(), Some(want.as_str()));
    assert_eq!(wl.spec.queue_name.as_deref(), Some("lq"));
    let sets: Vec<(&str, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("leader", 1), ("worker", 2)]);
    let owner = &wl.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("LeaderWorkerSet", "serve", Some(true))
    );
    let a = wl.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(a[COMPONENT_WORKLOAD_INDEX_ANNOTATION], "1");
    assert_eq!(
        a[JOB_OWNER_GVK_ANNOTATION],
        "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"
    );
    assert_eq!(a[pod_group::IS_GROUP_WORKLOAD_ANNOTATION], "true");
    // A pod the set did not gate is not a member.
    let mut stranger = worker.clone();
    stranger["metadata"]["annotations"] = json!({});
    assert_eq!(LeaderWorkerSet.parent_name_of(&stranger), None);
    assert!(matches!(
        LeaderWorkerSet.compose(&[&leader], None),
        Err(ComposeError::Incomplete(_))
    ));
}

#[test]
fn the_group_reads_as_a_pod_group_of_its_size() {
    let set = applied(&lws(true));
    let mut pods: Vec<Value> = ["0", "1", "2"]
        .iter()
        .map(|w| {
            pod(
                &set,
                if *w == "0" {
                    "leaderTemplate"
                } else {
                    "workerTemplate"
                },
                "0",
                w,
            )
        })
        .collect();
    let refs: Vec<&Value> = pods.iter().collect();
    let s = LeaderWorkerSet.status(&refs);
    assert!(s.any_gated && !s.active && s.finished.is_none());
    for p in &mut pods {
        p["status"] = json!({"phase": "Succeeded"});
    }
    let refs: Vec<&Value> = pods.iter().collect();
    assert_eq!(
        LeaderWorkerSet.status(&refs).finished,
        Some(Outcome::success("Pods succeeded: 3/3."))
    );
    let refs: Vec<&Value> = pods.iter().take(2).collect();
    assert_eq!(LeaderWorkerSet.status(&refs).finished, None);
    assert_eq!(LeaderWorkerSet.status(&[]).finished, None);
}

#[test]
fn a_scaled_down_set_no_longer_wants_its_highest_groups() {
    let set = applied(&lws(true));
    let leader = pod(&set, "leaderTemplate", "1", "0");
    let wl = LeaderWorkerSet
        .compose(&[&leader], Some(&set))
        .expect("composed");
    assert!(LeaderWorkerSet.wants_workload(&wl, &set));
    let mut smaller = set.clone();
    smaller["spec"]["replicas"] = json!(1);
    assert!(!LeaderWorkerSet.wants_workload(&wl, &smaller));
}

#[test]
fn replicas_are_bounded_as_kueue() {
    let mut v = lws(true);
    v["spec"]["replicas"] = json!(-1);
    let o = JobObject::from_value(&v).expect("view");
    let errs: Vec<String> = LeaderWorkerSet
        .validate_create(&o, &RuleOptions::default())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errs,
        [
            "spec.replicas: Invalid value: -1: invalid LeaderWorkerSet replicas: must be >= 0, got -1"
        ]
    );
}

#[test]
fn enabling_it_enables_the_pod_webhook() {
    let config = crate::webhook::WebhookConfig {
        frameworks: vec![FRAMEWORK.to_string()],
        ..Default::default()
    };
    assert!(config.enables(&LeaderWorkerSet));
    assert!(config.enables(&crate::integrations::pod::Pod));
    assert!(!config.enables(&crate::integrations::batch_job::BatchJob));
}
