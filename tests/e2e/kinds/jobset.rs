//! JobSet (jobset.x-k8s.io/v1alpha2, CRD from kubernetes-sigs/jobset v0.12.0).

use serde_json::{Value, json};

use super::{KindCase, container, lifecycle, queue_labels};

fn jobset(ns: &str, name: &str, class: &str) -> Value {
    let job = |pods: i32, cpu: &str| {
        json!({"spec": {"parallelism": pods, "completions": pods, "template": {"spec": {
            "restartPolicy": "Never", "containers": [container("main", cpu)]}}}})
    };
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"namespace": ns, "name": name, "labels": queue_labels(class)},
        "spec": {"replicatedJobs": [
            {"name": "leader", "replicas": 1, "template": job(1, "100m")},
            {"name": "workers", "replicas": 2, "template": job(2, "125m")},
        ]}
    })
}

/// The JobSet controller's per-replicated-job counts.
fn replicated_jobs(active: [i64; 2], suspended: [i64; 2]) -> Value {
    json!({"status": {"replicatedJobsStatus": [
        {"name": "leader", "active": active[0], "ready": active[0], "succeeded": 0, "failed": 0, "suspended": suspended[0]},
        {"name": "workers", "active": active[1], "ready": active[1], "succeeded": 0, "failed": 0, "suspended": suspended[1]},
    ]}})
}

#[tokio::test]
async fn a_jobset_is_held_admitted_preempted_only_once_its_jobs_stop_and_finished() {
    lifecycle(&KindCase {
        crd: "jobset.x-k8s.io_jobsets.yaml",
        api: ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
        framework: "jobset.x-k8s.io/jobset",
        object: jobset,
        pod_sets: &[("leader", 1), ("workers", 4)],
        templates: |o| {
            let n = o["spec"]["replicatedJobs"].as_array().map_or(0, Vec::len);
            (0..n)
                .map(|i| format!("/spec/replicatedJobs/{i}/template/spec/template"))
                .collect()
        },
        suspended: |o| o["spec"]["suspend"] == json!(true),
        running: replicated_jobs([1, 2], [0, 0]),
        stopped: replicated_jobs([0, 0], [1, 2]),
        finished: Some(
            json!({"status": {"terminalState": "Completed", "conditions": [{
            "type": "Completed", "status": "True", "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        ),
    })
    .await;
}
