//! manifests/samples apply to the real API server with kuota's CRDs (server-side apply),
//! as the README's walk-through does. The PyTorchJob and RayJob samples need the Kubeflow
//! and KubeRay CRDs, which are not installed here: stand-ins that check apiVersion, kind and
//! metadata take their place (their specs are not schema-checked).

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

use super::kustomize::{kubectl, stand_in_crd_versioned};
use crate::support::{client, ensure_crds};

#[tokio::test]
async fn the_samples_apply_and_jobs_wait_suspended_on_their_queues() {
    let client = client().await;
    ensure_crds(&client).await;
    stand_in_crd_versioned(&client, "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs").await;
    stand_in_crd_versioned(&client, "ray.io", "v1", "RayJob", "rayjobs").await;
    let (ok, stdout, stderr) = kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "manifests/samples/",
    ]);
    assert!(
        ok,
        "kubectl apply -f manifests/samples/ failed:\n{stderr}\n{stdout}"
    );
    for object in [
        "resourceflavor.kueue.x-k8s.io/h100",
        "resourceflavor.kueue.x-k8s.io/mig-1g-10gb",
        "topology.kueue.x-k8s.io/gpu-fabric",
        "cohort.kueue.x-k8s.io/research",
        "clusterqueue.kueue.x-k8s.io/vision",
        "clusterqueue.kueue.x-k8s.io/batch-inference",
        "localqueue.kueue.x-k8s.io/vision",
        "workloadpriorityclass.kueue.x-k8s.io/production",
        "job.batch/finetune",
        "pytorchjob.kubeflow.org/llm-pretrain",
        "rayjob.ray.io/hparam-sweep",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(object)),
            "{object} not applied:\n{stdout}"
        );
    }
    // `kubectl get cq` shows Kueue's columns through kuota's CRDs.
    let (ok, table, err) = kubectl(&[
        "get",
        "cq",
        "vision",
        "research-does-not-exist",
        "--ignore-not-found",
    ]);
    assert!(ok, "{err}");
    assert!(
        table.starts_with("NAME")
            && table.contains("COHORT")
            && table.contains("PENDING WORKLOADS"),
        "{table}"
    );
    assert!(
        table.contains("vision") && table.contains("research"),
        "{table}"
    );
    // The Job waits suspended with its queue name, for kuota to admit it.
    let gvk = GroupVersionKind::gvk("batch", "v1", "Job");
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "team-vision",
        &ApiResource::from_gvk_with_plural(&gvk, "jobs"),
    );
    let job = jobs.get("finetune").await.expect("finetune Job");
    assert_eq!(job.data["spec"]["suspend"], true);
    assert_eq!(
        job.metadata
            .labels
            .unwrap_or_default()
            .get("kueue.x-k8s.io/queue-name")
            .map(String::as_str),
        Some("vision")
    );
}
