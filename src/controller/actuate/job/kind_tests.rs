//! Each kind's start and stop, as the exact JSON patches sent to the API server: the
//! flavor goes into every pod template of the kind, the suspend switch is the kind's own,
//! and a stop followed by a restore gives back the templates as submitted.

use super::*;
use crate::integrations::jobset::JobSet;
use crate::integrations::kubeflow::PyTorchJob;
use crate::integrations::mpijob::MpiJob;
use crate::integrations::ray::{RayCluster, RayJob};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::json;

fn flavors() -> Store<DynamicObject> {
    let mut w = Writer::new(Kind::ResourceFlavor.api_resource());
    let rf: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
        "spec": {"nodeLabels": {"pool": "a100"}}
    }))
    .expect("valid flavor");
    w.apply_watcher_event(&Event::Apply(rf));
    w.as_reader()
}

/// The kind's Workload, admitted with flavor `gpu` for every pod set.
fn admitted(integration: &dyn JobIntegration, job: &Value) -> Workload {
    let mut wl = integration.workload(job).expect("a valid job");
    wl.metadata.name = Some("wl".into());
    let assignments: Vec<Value> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| json!({"name": p.name, "flavors": {"cpu": "gpu"}, "resourceUsage": {"cpu": "1"}, "count": p.count}))
        .collect();
    wl.status = Some(
        serde_json::from_value(
            json!({"admission": {"clusterQueue": "cq", "podSetAssignments": assignments}}),
        )
        .expect("a valid status"),
    );
    wl
}

fn pod() -> Value {
    json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]})
}

fn stamps(pod_set: &str) -> Value {
    json!({
        "labels": {"kueue.x-k8s.io/podset": pod_set, "kueue.x-k8s.io/local-queue-name": "lq",
            "kueue.x-k8s.io/cluster-queue-name": "cq"},
        "annotations": {"kueue.x-k8s.io/workload": "wl"}
    })
}

fn meta() -> Value {
    json!({"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "3",
        "labels": {"kueue.x-k8s.io/queue-name": "lq"}})
}

/// Start, then stop and restore: the job comes back exactly as submitted (the exact
/// requests of each step are pinned in `workload_sync::kind_requests`).
fn round_trip(integration: &dyn JobIntegration, job: Value) {
    let wl = admitted(integration, &job);
    let patch = start_patch(integration, &job, &wl, &flavors())
        .expect("computable")
        .expect("a start");
    let mut started = job.clone();
    json_patch::patch(&mut started, &patch).expect("applies");
    assert_ne!(
        started,
        job,
        "{}: the start changed nothing",
        integration.kind()
    );
    let patch = stop_patch(integration, &started).expect("a stop");
    let mut stopped = started;
    json_patch::patch(&mut stopped, &patch).expect("applies");
    if let Some(restore) = restore_patch(integration, &stopped, &wl).expect("computable") {
        json_patch::patch(&mut stopped, &restore).expect("applies");
    }
    assert_eq!(
        stopped,
        job,
        "{}: restored as submitted",
        integration.kind()
    );
}

#[test]
fn every_kind_is_restored_as_submitted_after_a_start_and_a_stop() {
    let replicas = |n: i32| json!({"replicas": n, "template": {"spec": pod()}});
    let mut ray_cluster = cluster();
    ray_cluster["suspend"] = json!(true);
    let cases: [(&dyn JobIntegration, Value); 5] = [
        (
            &JobSet,
            json!({
                "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta(),
                "spec": {"suspend": true, "replicatedJobs": [
                    {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": pod()}}}},
                    {"name": "workers", "replicas": 2, "template": {"spec": {"template": {"spec": pod()}}}}]}
            }),
        ),
        (
            &PyTorchJob,
            json!({
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta(),
                "spec": {"runPolicy": {"suspend": true},
                    "pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(2)}}
            }),
        ),
        (
            &MpiJob,
            json!({
                "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": meta(),
                "spec": {"runPolicy": {"suspend": true},
                    "mpiReplicaSpecs": {"Launcher": replicas(1), "Worker": replicas(2)}}
            }),
        ),
        (
            &RayCluster,
            json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta(),
            "spec": ray_cluster}),
        ),
        (
            &RayJob,
            json!({
                "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta(),
                "spec": {"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster(),
                    "submitterPodTemplate": {"spec": pod()}}
            }),
        ),
    ];
    for (integration, job) in cases {
        round_trip(integration, job);
    }
}

fn cluster() -> Value {
    json!({
        "headGroupSpec": {"template": {"spec": pod()}},
        "workerGroupSpecs": [{"groupName": "GPU", "replicas": 2, "template": {"spec": pod()}}]
    })
}

#[test]
fn a_rayjob_starts_with_its_submitter_stamped_too() {
    let job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta(),
        "spec": {"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster(),
            "submitterPodTemplate": {"spec": pod()}}
    });
    let wl = admitted(&RayJob, &job);
    let names: Vec<&str> = wl.spec.pod_sets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["head", "gpu", "submitter"]);
    let patch = start_patch(&RayJob, &job, &wl, &flavors())
        .expect("computable")
        .expect("a start");
    let mut started = job.clone();
    json_patch::patch(&mut started, &patch).expect("applies");
    let submitter = &started["spec"]["submitterPodTemplate"];
    assert_eq!(submitter["metadata"], stamps("submitter"));
    assert_eq!(submitter["spec"]["nodeSelector"], json!({"pool": "a100"}));
    assert_eq!(started["spec"]["suspend"], false);
}

/// A RayJob without a submitter template: Kueue's pod set is KubeRay's default submitter
/// (the head's image, 500m / 200Mi), and the start writes it in with the flavor.
#[test]
fn a_rayjob_without_a_submitter_template_gets_kuberays_default_with_the_flavor() {
    let job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta(),
        "spec": {"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster()}
    });
    let wl = admitted(&RayJob, &job);
    let submitter = &wl.spec.pod_sets[2];
    let container = &submitter
        .template
        .spec
        .as_ref()
        .expect("a pod spec")
        .containers[0];
    assert_eq!(
        (container.name.as_str(), container.image.as_deref()),
        ("ray-job-submitter", Some("i"))
    );
    let patch = start_patch(&RayJob, &job, &wl, &flavors())
        .expect("computable")
        .expect("a start");
    let mut started = job.clone();
    json_patch::patch(&mut started, &patch).expect("applies");
    assert_eq!(
        started["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"],
        json!({"pool": "a100"})
    );
    // In HTTPMode there is no submitter Job, and no submitter pod set.
    let mut http = job;
    http["spec"]["submissionMode"] = json!("HTTPMode");
    assert_eq!(admitted(&RayJob, &http).spec.pod_sets.len(), 2);
}
