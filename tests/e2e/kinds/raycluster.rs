//! RayCluster (ray.io/v1, CRD from ray-project/kuberay v1.7.0). A RayCluster never
//! finishes (Kueue's rule): the preemptor is deleted instead, and its Workload with it.

use serde_json::{Value, json};

use super::{KindCase, container, lifecycle, queue_labels};

/// A head and one worker group named with capitals, which Kueue's pod set lower-cases.
pub(super) fn cluster_spec() -> Value {
    json!({
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
            "containers": [container("ray-head", "200m")]}}},
        "workerGroupSpecs": [{"groupName": "Workers", "replicas": 2, "minReplicas": 0,
            "maxReplicas": 2, "rayStartParams": {}, "template": {"spec": {
                "containers": [container("ray-worker", "200m")]}}}]
    })
}

fn raycluster(ns: &str, name: &str, class: &str) -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"namespace": ns, "name": name, "labels": queue_labels(class)},
        "spec": cluster_spec()
    })
}

#[tokio::test]
async fn a_raycluster_is_held_admitted_preempted_only_once_it_stops_and_released_when_deleted() {
    lifecycle(&KindCase {
        crd: "ray.io_rayclusters.yaml",
        api: ("ray.io", "v1", "RayCluster", "rayclusters"),
        framework: "ray.io/raycluster",
        object: raycluster,
        pod_sets: &[("head", 1), ("workers", 2)],
        templates: |_| {
            vec![
                "/spec/headGroupSpec/template".to_string(),
                "/spec/workerGroupSpecs/0/template".to_string(),
            ]
        },
        suspended: |o| o["spec"]["suspend"] == json!(true),
        running: json!({"status": {"state": "ready"}}),
        stopped: json!({"status": {"state": "suspended"}}),
        finished: None,
    })
    .await;
}
