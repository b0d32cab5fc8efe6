//! MPIJob (kubeflow.org/v2beta1, CRD from kubeflow/mpi-operator v0.8.0).

use serde_json::{Value, json};

use super::{KindCase, container, lifecycle, queue_labels};

fn mpijob(ns: &str, name: &str, class: &str) -> Value {
    let replicas = |n: i32, cpu: &str| {
        json!({"replicas": n, "restartPolicy": "Never", "template": {"spec": {
            "containers": [container("mpi", cpu)]}}})
    };
    json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"namespace": ns, "name": name, "labels": queue_labels(class)},
        "spec": {
            "slotsPerWorker": 1,
            "runLauncherAsWorker": true,
            "mpiReplicaSpecs": {"Launcher": replicas(1, "100m"), "Worker": replicas(3, "200m")}
        }
    })
}

/// The MPI operator's status: per replica type pod counts and a condition.
fn status(launcher: i64, workers: i64, condition: &str) -> Value {
    json!({"status": {
        "replicaStatuses": {"Launcher": {"active": launcher}, "Worker": {"active": workers}},
        "conditions": [{"type": condition, "status": "True", "reason": format!("MPIJob{condition}"),
            "message": format!("MPIJob is {condition}"),
            "lastTransitionTime": "2026-01-01T00:00:00Z", "lastUpdateTime": "2026-01-01T00:00:00Z"}]
    }})
}

#[tokio::test]
async fn an_mpijob_is_held_admitted_preempted_only_once_its_pods_stop_and_finished() {
    lifecycle(&KindCase {
        crd: "kubeflow.org_mpijobs.yaml",
        api: ("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
        framework: "kubeflow.org/mpijob",
        object: mpijob,
        pod_sets: &[("launcher", 1), ("worker", 3)],
        templates: |_| {
            vec![
                "/spec/mpiReplicaSpecs/Launcher/template".to_string(),
                "/spec/mpiReplicaSpecs/Worker/template".to_string(),
            ]
        },
        suspended: |o| o["spec"]["runPolicy"]["suspend"] == json!(true),
        running: status(1, 3, "Running"),
        stopped: status(0, 0, "Suspended"),
        finished: Some(status(0, 0, "Succeeded")),
    })
    .await;
}
