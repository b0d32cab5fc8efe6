use super::*;
use serde_json::json;

fn pod(name: &str, group: Option<(&str, &str)>, cpu: &str) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(QUEUE_NAME_LABEL.into(), json!("lq"));
    labels.insert(MANAGED_LABEL.into(), json!("true"));
    let mut annotations = serde_json::Map::new();
    if let Some((g, count)) = group {
        labels.insert(POD_GROUP_NAME_LABEL.into(), json!(g));
        annotations.insert(POD_GROUP_TOTAL_COUNT_ANNOTATION.into(), json!(count));
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "creationTimestamp": format!("2026-01-01T00:00:0{}Z", name.len() % 10),
            "labels": labels, "annotations": annotations,
            "finalizers": [MANAGED_POD_FINALIZER]},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}],
            "schedulingGates": [{"name": ADMISSION_SCHEDULING_GATE}]}
    })
}

#[test]
fn role_hash_is_kueues_spec_shape_digest() {
    // The shape Kueue's GenerateRoleHash marshals for one container requesting 1 CPU:
    // {"spec":{"affinity":null,"containers":[{"ports":null,"resources":{"requests":{"cpu":"1"}}}],
    //  "initContainers":null,"nodeSelector":null,"overhead":null,"priority":null,
    //  "resourceClaims":null,"runtimeClassName":null,"tolerations":null,
    //  "topologySpreadConstraints":null}}
    let shape = r#"{"spec":{"affinity":null,"containers":[{"ports":null,"resources":{"requests":{"cpu":"1"}}}],"initContainers":null,"nodeSelector":null,"overhead":null,"priority":null,"resourceClaims":null,"runtimeClassName":null,"tolerations":null,"topologySpreadConstraints":null}}"#;
    let digest = sha2::Sha256::digest(shape.as_bytes());
    let want: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let spec = json!({"containers": [{"name": "x", "image": "y", "resources": {"requests": {"cpu": "1"}}}]});
    assert_eq!(role_hash(&spec), want);
    // Scheduling gates, names and images are not part of a role; requests are.
    let gated = json!({"containers": [{"name": "z", "image": "w", "resources": {"requests": {"cpu": "1"}}}],
        "schedulingGates": [{"name": ADMISSION_SCHEDULING_GATE}]});
    assert_eq!(role_hash(&gated), want);
    let bigger = json!({"containers": [{"name": "x", "image": "y", "resources": {"requests": {"cpu": "2"}}}]});
    assert_ne!(role_hash(&bigger), want);
}

#[test]
fn a_group_is_composed_only_once_all_its_pods_exist() {
    let a = pod("a", Some(("g", "2")), "1");
    let err = group_workload(&[&a]).expect_err("one pod of two");
    assert_eq!(
        err,
        ComposeError::Incomplete("'g' group has fewer runnable pods than expected".into())
    );
    let b = pod("bb", Some(("g", "2")), "1");
    let wl = group_workload(&[&a, &b]).expect("composed");
    assert_eq!(wl.metadata.name.as_deref(), Some("g"));
    assert_eq!(wl.spec.queue_name.as_deref(), Some("lq"));
    assert_eq!(wl.spec.pod_sets.len(), 1);
    assert_eq!(wl.spec.pod_sets[0].count, 2);
    assert_eq!(wl.spec.pod_sets[0].name, role_of(&a));
    let owners = wl.metadata.owner_references.expect("owners");
    assert_eq!(owners.len(), 2);
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(owners[1].controller, None);
    assert_eq!(
        wl.metadata.annotations.expect("annotations")[IS_GROUP_WORKLOAD_ANNOTATION],
        "true"
    );
}

#[test]
fn roles_become_pod_sets_sorted_by_hash() {
    let a = pod("a", Some(("g", "3")), "1");
    let b = pod("bb", Some(("g", "3")), "2");
    let c = pod("ccc", Some(("g", "3")), "1");
    let wl = group_workload(&[&a, &b, &c]).expect("composed");
    let mut want = vec![(role_of(&a), 2), (role_of(&b), 1)];
    want.sort();
    let got: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn disagreeing_pods_are_refused_with_kueues_messages() {
    let a = pod("a", Some(("g", "2")), "1");
    let b = pod("bb", Some(("g", "3")), "1");
    assert_eq!(
        group_workload(&[&a, &b]),
        Err(ComposeError::Invalid(
            "pods 'a' and 'bb' has different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3"
                .into()
        ))
    );
    let mut other_queue = pod("bb", Some(("g", "2")), "1");
    other_queue["metadata"]["labels"][QUEUE_NAME_LABEL] = json!("other");
    assert_eq!(
        group_workload(&[&a, &other_queue]),
        Err(ComposeError::Invalid(
            "pods 'a' and 'bb' has different queue names: lq!=other".into()
        ))
    );
    let mut nan = pod("a", Some(("g", "2")), "1");
    nan["metadata"]["annotations"][POD_GROUP_TOTAL_COUNT_ANNOTATION] = json!("two");
    let err = group_workload(&[&nan, &a]).expect_err("not a number");
    assert!(
        matches!(&err, ComposeError::Invalid(m) if m.contains("from the pod 'a'") && m.contains("invalid digit")),
        "{err:?}"
    );
    let mut missing = pod("a", Some(("g", "2")), "1");
    missing["metadata"]["annotations"] = json!({});
    let err = group_workload(&[&missing, &a]).expect_err("missing");
    assert!(matches!(err, ComposeError::Invalid(m) if m.contains("failed to extract")));
}

#[test]
fn status_follows_kueues_finished_active_and_ready_rules() {
    let mut a = pod("a", Some(("g", "2")), "1");
    let mut b = pod("bb", Some(("g", "2")), "1");
    let s = members_status(&[&a, &b]);
    assert!(s.any_gated && !s.any_running_free && !s.active && s.finished.is_none());
    for p in [&mut a, &mut b] {
        p["spec"]["schedulingGates"] = json!([]);
        p["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    }
    let s = members_status(&[&a, &b]);
    assert!(!s.any_gated && s.any_running_free && s.active && s.pods_ready);
    a["status"]["phase"] = json!("Succeeded");
    assert!(members_status(&[&a, &b]).finished.is_none());
    b["status"]["phase"] = json!("Succeeded");
    assert_eq!(
        members_status(&[&a, &b]).finished,
        Some(Outcome::success("Pods succeeded: 2/2."))
    );
    // A pod alone: its phase, its message.
    let mut single = pod("s", None, "1");
    single["status"] = json!({"phase": "Failed", "message": "OOMKilled"});
    assert_eq!(
        members_status(&[&single]).finished,
        Some(Outcome::failure("OOMKilled"))
    );
}

#[test]
fn deleted_pods_are_released_unless_running() {
    let mut p = pod("a", None, "1");
    assert!(!released(&p));
    p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(released(&p));
    p["status"] = json!({"phase": "Running"});
    assert!(!released(&p));
    p["status"] = json!({"phase": "Failed"});
    assert!(released(&p));
    assert!(!to_stop(&p));
}

#[test]
fn a_pod_alone_names_kueues_pod_workload() {
    let p = pod("solo", None, "1");
    assert_eq!(
        workload_name_of(&p),
        super::super::workload_name("solo", "uid-solo", &super::super::pod::Pod.gvk())
    );
    assert!(workload_name_of(&p).starts_with("pod-solo-"));
    assert_eq!(workload_name_of(&pod("a", Some(("grp", "2")), "1")), "grp");
}
