use super::*;
use crate::integrations::JobObject;
use serde_json::json;

fn trainjob(trainer: Value) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns", "uid": "u1", "resourceVersion": "3",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "runtimeRef": {"name": "torch", "kind": "TrainingRuntime"},
            "trainer": trainer,
            "suspend": true,
            "runtimePatches": [{"manager": "someone/else",
                "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": "b"}}}}},
                empty_kueue_patch()]
        }
    })
}

fn runtime() -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
        "metadata": {"name": "torch", "namespace": "ns"},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "template": {"spec": {"replicatedJobs": [
                {"name": "dataset-initializer",
                 "template": {"metadata": {"labels": {ANCESTOR_LABEL: "dataset-initializer"}},
                    "spec": {"template": {"spec": {"containers": [
                        {"name": "dataset-initializer", "image": "init",
                         "resources": {"requests": {"cpu": "1"}}}]}}}}},
                {"name": "node",
                 "template": {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                    "spec": {"template": {"spec": {
                        "priorityClassName": "high",
                        "containers": [
                        {"name": "node", "image": "torch",
                         "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
                        {"name": "sidecar", "image": "s"}]}}}}}
            ]}}
        }
    })
}

fn counts(v: &Value) -> Vec<(String, i32)> {
    let o = JobObject::from_value(v).expect("view");
    TrainJob
        .pod_sets(&o)
        .iter()
        .map(|p| (p.name.to_string(), p.count))
        .collect()
}

#[test]
fn the_runtime_is_a_namespaced_training_runtime_or_by_default_a_cluster_one() {
    let deps = TrainJob
        .dependencies(&trainjob(json!({})))
        .expect("readable");
    assert_eq!(deps.len(), 1);
    assert_eq!(deps[0].resource.plural, "trainingruntimes");
    assert_eq!(
        deps[0].resource.api_version,
        "trainer.kubeflow.org/v1alpha1"
    );
    assert_eq!(deps[0].namespace.as_deref(), Some("ns"));
    assert_eq!(deps[0].name, "torch");

    let mut cluster = trainjob(json!({}));
    cluster["spec"]["runtimeRef"] = json!({"name": "torch"});
    let deps = TrainJob.dependencies(&cluster).expect("readable");
    assert_eq!(deps[0].resource.kind, "ClusterTrainingRuntime");
    assert_eq!(deps[0].resource.plural, "clustertrainingruntimes");
    assert_eq!(deps[0].namespace, None);

    let mut other = trainjob(json!({}));
    other["spec"]["runtimeRef"]["kind"] = json!("Runtime");
    let err = TrainJob.dependencies(&other).expect_err("unsupported");
    assert!(err.to_string().contains("spec.runtimeRef.kind"), "{err}");
}

/// The trainer's replicated job runs the TrainJob's numNodes, over the runtime's; others
/// keep their parallelism; resourcesPerNode lands in the `node` container only.
#[test]
fn pod_sets_from_the_runtime_with_the_trainjob_overrides() {
    let job = trainjob(json!({"numNodes": 4, "image": "mine",
        "resourcesPerNode": {"requests": {"cpu": "8", "nvidia.com/gpu": "1"}}}));
    assert!(
        counts(&job).is_empty(),
        "no pod sets before the runtime is read"
    );
    let resolved = TrainJob
        .resolve(&job, &[Some(runtime())])
        .expect("resolves");
    assert_eq!(
        counts(&resolved),
        [
            ("dataset-initializer".to_string(), 1),
            ("node".to_string(), 4)
        ]
    );
    let wl = TrainJob.workload(&resolved).expect("a workload");
    assert!(
        wl.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("trainjob-tj-"))
    );
    assert_eq!(wl.spec.queue_name.as_deref(), Some("lq"));
    assert_eq!(
        wl.spec.priority_class_ref.as_ref().map(|p| p.name.as_str()),
        Some("high")
    );
    let node = &wl.spec.pod_sets[1]
        .template
        .spec
        .as_ref()
        .expect("spec")
        .containers;
    let requests = node[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .expect("requests");
    assert_eq!(node[0].image.as_deref(), Some("mine"));
    assert_eq!(requests["cpu"].0, "8");
    assert_eq!(requests["memory"].0, "1Gi", "merged key by key");
    assert_eq!(requests["nvidia.com/gpu"].0, "1");
    assert!(node[1].resources.is_none(), "only the node container");

    // Without numNodes on the TrainJob, the runtime's mlPolicy decides.
    let runtime_default = TrainJob
        .resolve(&trainjob(json!({})), &[Some(runtime())])
        .expect("resolves");
    assert_eq!(counts(&runtime_default)[1], ("node".to_string(), 2));
}

#[test]
fn a_missing_or_empty_runtime_gives_no_workload_and_says_why() {
    let err = TrainJob
        .resolve(&trainjob(json!({})), &[None])
        .expect_err("missing");
    assert_eq!(
        err.to_string(),
        "spec.runtimeRef.name: Not found: \"TrainingRuntime ns/torch\""
    );
    let mut empty = runtime();
    empty["spec"]["template"] = json!({"spec": {}});
    let err = TrainJob
        .resolve(&trainjob(json!({})), &[Some(empty)])
        .expect_err("empty");
    assert!(err.to_string().contains("replicatedJobs"), "{err}");
}

/// Ready once every replicated job's Jobs are ready or succeeded (one replica each here).
#[test]
fn active_and_ready_from_the_jobs_status() {
    let mut job = TrainJob
        .resolve(&trainjob(json!({})), &[Some(runtime())])
        .expect("resolves");
    job["status"] = json!({"jobsStatus": [
        {"name": "dataset-initializer", "succeeded": 1},
        {"name": "node", "active": 1, "ready": 0}]});
    let o = JobObject::from_value(&job).expect("view");
    assert!(TrainJob.is_active(&o));
    assert!(!TrainJob.pods_ready(&o));
    job["status"]["jobsStatus"][1] = json!({"name": "node", "active": 1, "ready": 1});
    let o = JobObject::from_value(&job).expect("view");
    assert!(TrainJob.pods_ready(&o));
    let unresolved = trainjob(json!({}));
    let o = JobObject::from_value(&unresolved).expect("view");
    assert!(
        !TrainJob.pods_ready(&o),
        "nothing to be ready without the runtime"
    );
    assert!(!TrainJob.is_active(&o));
}

#[test]
fn finished_from_complete_or_failed() {
    let mut job = trainjob(json!({}));
    job["status"] = json!({"conditions": [
        {"type": "Complete", "status": "True", "message": "done"}]});
    let o = JobObject::from_value(&job).expect("view");
    assert_eq!(TrainJob.finished(&o), Some(Outcome::success("done")));
    job["status"]["conditions"][0]["type"] = json!("Failed");
    let o = JobObject::from_value(&job).expect("view");
    assert_eq!(TrainJob.finished(&o), Some(Outcome::failure("done")));
}

/// The webhook adds Kueue's empty runtime patch once, after the user's.
#[test]
fn the_webhook_adds_kueues_runtime_patch_once() {
    let mut job = trainjob(json!({}));
    let o = JobObject::from_value(&job).expect("view");
    let mut p = PatchBuilder::new();
    TrainJob.default_on_create(&o, &RuleOptions::default(), &mut p);
    assert!(p.is_empty(), "already there");

    job["spec"]["runtimePatches"] = json!([{"manager": "someone/else"}]);
    let o = JobObject::from_value(&job).expect("view");
    let mut p = PatchBuilder::new();
    TrainJob.default_on_create(&o, &RuleOptions::default(), &mut p);
    let ops = json_patch::Patch(p.into_ops());
    let mut patched = job.clone();
    json_patch::patch(&mut patched, &ops).expect("applies");
    assert_eq!(
        patched["spec"]["runtimePatches"],
        json!([{"manager": "someone/else"}, empty_kueue_patch()])
    );

    job["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("runtimePatches");
    let o = JobObject::from_value(&job).expect("view");
    let mut p = PatchBuilder::new();
    TrainJob.default_on_create(&o, &RuleOptions::default(), &mut p);
    let ops = json_patch::Patch(p.into_ops());
    let mut patched = job.clone();
    json_patch::patch(&mut patched, &ops).expect("applies");
    assert_eq!(
        patched["spec"]["runtimePatches"],
        json!([empty_kueue_patch()])
    );
}

/// A start writes each pod set's additions into Kueue's patch only; a restore gives the
/// TrainJob back byte for byte.
#[test]
fn inject_then_restore_is_a_round_trip() {
    let submitted = trainjob(json!({"numNodes": 2}));
    let additions = vec![
        (
            "node".to_string(),
            json!({"metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}},
                   "spec": {"nodeSelector": {"gpu": "a100"},
                            "tolerations": [{"key": "gpu", "operator": "Exists"}]}}),
        ),
        (
            "dataset-initializer".to_string(),
            json!({"metadata": {"labels": {"kueue.x-k8s.io/podset": "dataset-initializer"}}}),
        ),
    ];
    let mut started = submitted.clone();
    RuntimePatchCarrier.inject(&mut started, &additions);
    assert_eq!(
        started["spec"]["runtimePatches"][0],
        submitted["spec"]["runtimePatches"][0]
    );
    assert_eq!(
        started["spec"]["runtimePatches"][1]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
            [0],
        json!({"name": "node", "template": {"spec": {"template": additions[0].1}}})
    );
    let mut again = started.clone();
    RuntimePatchCarrier.inject(&mut again, &additions);
    assert_eq!(again, started, "a second start changes nothing");
    RuntimePatchCarrier.restore(&mut started);
    assert_eq!(started, submitted);

    // A TrainJob created before the webhook ran gets the patch on start.
    let mut bare = submitted.clone();
    bare["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("runtimePatches");
    RuntimePatchCarrier.inject(&mut bare, &additions);
    assert_eq!(
        bare["spec"]["runtimePatches"][0]["manager"],
        RUNTIME_PATCH_MANAGER
    );
}
