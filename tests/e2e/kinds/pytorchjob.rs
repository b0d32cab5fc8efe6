//! PyTorchJob (kubeflow.org/v1, CRD from kubeflow/training-operator v1.9.0).

use serde_json::{Value, json};

use super::{KindCase, container, lifecycle, queue_labels};

fn pytorchjob(ns: &str, name: &str, class: &str) -> Value {
    let replicas = |n: i32| {
        json!({"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {
            "containers": [container("pytorch", "200m")]}}})
    };
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"namespace": ns, "name": name, "labels": queue_labels(class)},
        "spec": {"pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(2)}}
    })
}

/// The training operator's status: per replica type pod counts and a condition.
fn status(active: i64, condition: &str) -> Value {
    json!({"status": {
        "replicaStatuses": {"Master": {"active": active.min(1)}, "Worker": {"active": (active - 1).max(0)}},
        "conditions": [{"type": condition, "status": "True", "reason": "PyTorchJob", "message": format!("PyTorchJob is {condition}")}]
    }})
}

#[tokio::test]
async fn a_pytorchjob_is_held_admitted_preempted_only_once_its_pods_stop_and_finished() {
    lifecycle(&KindCase {
        crd: "kubeflow.org_pytorchjobs.yaml",
        api: ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
        framework: "kubeflow.org/pytorchjob",
        object: pytorchjob,
        pod_sets: &[("master", 1), ("worker", 2)],
        templates: |_| {
            vec![
                "/spec/pytorchReplicaSpecs/Master/template".to_string(),
                "/spec/pytorchReplicaSpecs/Worker/template".to_string(),
            ]
        },
        suspended: |o| o["spec"]["runPolicy"]["suspend"] == json!(true),
        running: status(3, "Running"),
        stopped: status(0, "Suspended"),
        finished: Some(status(0, "Succeeded")),
    })
    .await;
}
