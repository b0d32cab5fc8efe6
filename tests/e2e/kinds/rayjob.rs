//! RayJob (ray.io/v1, CRD from ray-project/kuberay v1.7.0), in K8sJobMode: Kueue adds a
//! `submitter` pod set for the submitter Job, whose template gets the flavor too.

use serde_json::{Value, json};

use super::{KindCase, container, lifecycle, queue_labels};

fn rayjob(ns: &str, name: &str, class: &str) -> Value {
    let mut cluster = super::raycluster::cluster_spec();
    // The submitter takes the rest of the 600m.
    cluster["workerGroupSpecs"][0]["replicas"] = json!(1);
    cluster["workerGroupSpecs"][0]["minReplicas"] = json!(0);
    cluster["workerGroupSpecs"][0]["maxReplicas"] = json!(1);
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"namespace": ns, "name": name, "labels": queue_labels(class)},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": true,
            "submissionMode": "K8sJobMode",
            "rayClusterSpec": cluster,
            "submitterPodTemplate": {"spec": {"restartPolicy": "Never",
                "containers": [container("ray-job-submitter", "200m")]}}
        }
    })
}

#[tokio::test]
async fn a_rayjob_with_its_submitter_is_held_admitted_preempted_only_once_it_stops_and_finished() {
    lifecycle(&KindCase {
        crd: "ray.io_rayjobs.yaml",
        api: ("ray.io", "v1", "RayJob", "rayjobs"),
        framework: "ray.io/rayjob",
        object: rayjob,
        pod_sets: &[("head", 1), ("workers", 1), ("submitter", 1)],
        templates: |_| {
            vec![
                "/spec/rayClusterSpec/headGroupSpec/template".to_string(),
                "/spec/rayClusterSpec/workerGroupSpecs/0/template".to_string(),
                "/spec/submitterPodTemplate".to_string(),
            ]
        },
        suspended: |o| o["spec"]["suspend"] == json!(true),
        running: json!({"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}}),
        stopped: json!({"status": {"jobDeploymentStatus": "Suspended", "jobStatus": ""}}),
        finished: Some(json!({"status": {"jobDeploymentStatus": "Complete",
            "jobStatus": "SUCCEEDED", "message": "Job finished successfully."}})),
    })
    .await;
}
