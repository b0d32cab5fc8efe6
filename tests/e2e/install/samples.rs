//! The README's walk-through, replayed against the real API server: manifests/samples apply
//! with kuota's CRDs (server-side apply), the Jobs wait suspended on their queues, then
//! kuota's controller (in-process, with the controller tests' harness) admits `finetune`
//! and leaves `too-big` pending with a message saying why. The JobSet, PyTorchJob, MPIJob,
//! RayJob, RayCluster, TrainJob and LeaderWorkerSet samples are checked against their projects' real CRDs (the
//! vendored ones of `tests/fixtures/crds`).
//!
//! No Nodes are created: `finetune` requests no topology, and whichever flavor kuota picks
//! (the TAS flavor h100 needs Nodes to place on, a100 does not), the test checks the Job is
//! pinned to that flavor's node labels, as the README shows.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kuota::api::{ResourceFlavor, Workload};

use super::kustomize::kubectl;
use crate::controller::{condition, start_controller, wait_for_workload};
use crate::support::{client, ensure_crds, wait_until};

/// The samples' namespaces and the Jobs they create there.
const SAMPLE_JOBS: [(&str, &str); 3] = [
    ("team-vision", "finetune"),
    ("team-vision", "too-big"),
    ("inference", "score"),
];

fn jobs_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("batch", "v1", "Job");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "jobs"),
    )
}

/// Removes the sample Jobs and Workloads an earlier run left (admitted, unsuspended), so
/// the replay starts from what a user applying the samples the first time has.
async fn forget_earlier_runs(client: &Client) {
    for (ns, name) in SAMPLE_JOBS {
        let jobs = jobs_api(client, ns);
        let _ = jobs.delete(name, &DeleteParams::foreground()).await;
        wait_until(Duration::from_secs(60), || {
            let jobs = jobs.clone();
            async move { jobs.get_opt(name).await.is_ok_and(|j| j.is_none()) }
        })
        .await
        .unwrap_or_else(|| panic!("Job {ns}/{name} from an earlier run was not deleted"));
    }
    // The other kinds' samples too: a queue-labelled JobSet left behind would get a
    // Workload from the next test's controller (and, admitted but never ready, hold
    // waitForPodsReady's blockAdmission for the whole cluster). Kinds whose CRD is not
    // installed yet have nothing to delete.
    let _ = crate::install::kustomize::kubectl(&[
        "delete",
        "--ignore-not-found",
        "--wait=false",
        "-f",
        "manifests/samples/65-jobset.yaml",
        "-f",
        "manifests/samples/70-pytorchjob.yaml",
        "-f",
        "manifests/samples/75-mpijob.yaml",
        "-f",
        "manifests/samples/78-trainjob.yaml",
        "-f",
        "manifests/samples/80-rayjob.yaml",
        "-f",
        "manifests/samples/90-raycluster.yaml",
        "-f",
        "manifests/samples/95-pod-group.yaml",
        "-f",
        "manifests/samples/97-leaderworkerset.yaml",
    ]);
    for ns in ["team-vision", "team-language", "inference"] {
        let workloads = Api::<Workload>::namespaced(client.clone(), ns);
        // No controller runs between tests to take Kueue's finalizer off: without this an
        // admitted sample Workload would stay, and be counted, in the next test's cluster.
        let clear = serde_json::json!({"metadata": {"finalizers": null}});
        for wl in workloads
            .list(&ListParams::default())
            .await
            .into_iter()
            .flatten()
        {
            if let Some(name) = wl.metadata.name.as_deref() {
                let _ = workloads
                    .patch(name, &PatchParams::default(), &Patch::Merge(&clear))
                    .await;
            }
        }
        let _ = workloads
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
    }
}

#[tokio::test]
async fn the_walk_through_applies_the_samples_admits_finetune_and_says_why_too_big_waits() {
    // No other test's controller may admit finetune before this one checks it waits.
    let _only = crate::support::controller_lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    forget_earlier_runs(&client).await;
    for crd in [
        "kubeflow.org_pytorchjobs.yaml",
        "kubeflow.org_mpijobs.yaml",
        "trainer.kubeflow.org_trainjobs.yaml",
        "trainer.kubeflow.org_trainingruntimes.yaml",
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "ray.io_rayjobs.yaml",
        "ray.io_rayclusters.yaml",
        "jobset.x-k8s.io_jobsets.yaml",
        "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    ] {
        crate::kinds::install_crd(&client, crd).await;
    }
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
        "mpijob.kubeflow.org/allreduce-bench",
        "trainingruntime.trainer.kubeflow.org/torch-distributed",
        "trainjob.trainer.kubeflow.org/llm-finetune",
        "rayjob.ray.io/hparam-sweep",
        "leaderworkerset.leaderworkerset.x-k8s.io/llm-serve",
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
    let jobs = jobs_api(&client, "team-vision");
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

    admitted_as_the_readme_shows(&client, &jobs).await;
}

/// The walk-through's last steps, with kuota's controller running: finetune Admitted and
/// unsuspended on its flavor's nodes, too-big pending with a reason naming the GPUs.
async fn admitted_as_the_readme_shows(client: &Client, jobs: &Api<DynamicObject>) {
    let (stop, task) = start_controller(client);
    let finetune = wait_for_workload(client, "team-vision", "finetune", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let admission = finetune
        .status
        .as_ref()
        .and_then(|s| s.admission.clone())
        .expect("an admitted Workload has status.admission");
    assert_eq!(admission.cluster_queue, "vision");
    let assigned = serde_json::to_value(&admission.pod_set_assignments).expect("json");
    let flavor = assigned[0]["flavors"]["nvidia.com/gpu"]
        .as_str()
        .unwrap_or_else(|| panic!("no GPU flavor assigned: {assigned}"))
        .to_string();
    let labels = Api::<ResourceFlavor>::all(client.clone())
        .get(&flavor)
        .await
        .unwrap_or_else(|e| panic!("ResourceFlavor {flavor}: {e}"))
        .spec
        .node_labels
        .unwrap_or_default();
    assert!(
        !labels.is_empty(),
        "the sample flavor {flavor} has node labels"
    );
    // `kubectl -n team-vision get job finetune -o jsonpath='{.spec.suspend}'` says false,
    // and its pods go to the admitted flavor's nodes.
    let started = wait_until(Duration::from_secs(30), || {
        let (jobs, labels) = (jobs.clone(), labels.clone());
        async move {
            jobs.get("finetune").await.ok().is_some_and(|j| {
                let selector = &j.data["spec"]["template"]["spec"]["nodeSelector"];
                j.data["spec"]["suspend"] == false
                    && labels.iter().all(|(k, v)| selector[k].as_str() == Some(v))
            })
        }
    })
    .await;

    // too-big asks for 64 GPUs, more than the vision queue can ever get: the
    // QuotaReserved column of the README's custom-columns command says why.
    let too_big = wait_for_workload(client, "team-vision", "too-big", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    let still_suspended = jobs
        .get("too-big")
        .await
        .map(|j| j.data["spec"]["suspend"] == true);
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    // Leave no admitted sample behind for the tests that run next.
    forget_earlier_runs(client).await;

    assert!(
        started.is_some(),
        "finetune was not unsuspended with flavor {flavor}'s node labels {labels:?}: {:?}",
        jobs.get("finetune").await.map(|j| j.data["spec"].clone())
    );
    let (_, reason, message) = condition(&too_big, "QuotaReserved").expect("condition");
    assert!(
        message.contains("insufficient") && message.contains("nvidia.com/gpu"),
        "too-big's pending message ({reason}) does not say which quota it lacks: {message}"
    );
    assert!(matches!(still_suspended, Ok(true)), "{still_suspended:?}");
}
