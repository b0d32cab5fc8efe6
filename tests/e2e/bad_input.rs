//! The queue controller fed bad input, against the real API server: none of it crashes
//! the controller or admits over quota, and each case is logged and shows on the object
//! (a condition or an Event). The controller runs in-process as in `controller.rs`; no
//! webhook is registered, so what reaches the controller is only what the API server's
//! own schema and CEL rules let through (as with a Workload edited by hand).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kuota::api::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use kuota::controller::ControllerConfig;
use serde_json::{Value, json};

use crate::controller::{
    condition, job, start_controller, start_controller_with, wait_for_workload,
};
use crate::support::{
    client, controller_lock, create_cluster_queue, create_flavor, create_local_queue, ensure_crds,
    quota, unique_name, wait_until,
};
use crate::webhook::{create_namespace, delete_namespaces};

/// A one-pod Job in LocalQueue `lq`, created suspended (no webhook holds it here).
fn suspended_job(ns: &str, name: &str, cpu: &str) -> Job {
    let mut j = job(ns, name, cpu);
    j.spec.get_or_insert_with(Default::default).suspend = Some(true);
    j
}

async fn create_jobs(client: &Client, ns: &str, names: &[&str]) {
    let jobs = Api::<Job>::namespaced(client.clone(), ns);
    for name in names {
        jobs.create(&PostParams::default(), &suspended_job(ns, name, "600m"))
            .await
            .unwrap_or_else(|e| panic!("create Job {name}: {e}"));
    }
}

async fn suspended(client: &Client, ns: &str, name: &str) -> Option<bool> {
    let job = Api::<Job>::namespaced(client.clone(), ns).get(name).await;
    job.ok()?.spec?.suspend
}

/// Waits for a Warning Event with `reason` about object `name` in `ns`; returns its note.
pub(crate) async fn warning_about(client: &Client, ns: &str, name: &str, reason: &str) -> String {
    let events = Api::<Event>::namespaced(client.clone(), ns);
    let mut seen = Vec::new();
    for _ in 0..300 {
        let list = events
            .list(&ListParams::default())
            .await
            .expect("list Events");
        seen = list
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| (e.type_, e.reason, e.note))
            .collect();
        let found = seen
            .iter()
            .find(|(t, r, _)| t.as_deref() == Some("Warning") && r.as_deref() == Some(reason));
        if let Some((_, _, note)) = found {
            return note.clone().unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no Warning Event {reason} about {ns}/{name} within 30 s; its Events: {seen:?}");
}

/// Log lines written by this test's thread (the e2e tests run on current-thread runtimes,
/// so the controller's tasks log through the test's own subscriber).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Logs {
    fn lines_with(&self, parts: &[&str]) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.0.lock().expect("logs")).to_string();
        text.lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_string)
            .collect()
    }
}

async fn cleanup(client: &Client, ns: &str, cq: &str, rf: &str) {
    delete_namespaces(client, &[ns]).await;
    let _ = Api::<ClusterQueue>::all(client.clone())
        .delete(cq, &Default::default())
        .await;
    let _ = Api::<ResourceFlavor>::all(client.clone())
        .delete(rf, &Default::default())
        .await;
}

/// Runs a controller with `batch/job` plus `extra` frameworks, checks that a batch Job is
/// still admitted and started, and returns what the controller logged at WARN.
async fn batch_jobs_admitted_beside(extra: &[&str]) -> Logs {
    let client = &client().await;
    ensure_crds(client).await;
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);

    let ns = &unique_name("bad-frameworks");
    create_namespace(client, ns, &[]).await;
    let (rf, cq) = quota(client, ns, "1").await;
    let mut integrations = vec!["batch/job".to_string()];
    integrations.extend(extra.iter().map(|f| f.to_string()));
    let config = ControllerConfig {
        integrations,
        ..ControllerConfig::default()
    };
    let (stop, task) = start_controller_with(client, config);
    create_jobs(client, ns, &["runs"]).await;
    wait_for_workload(client, ns, "runs", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_until(Duration::from_secs(30), || async move {
        suspended(client, ns, "runs").await == Some(false)
    })
    .await
    .expect("the admitted Job is started");
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    cleanup(client, ns, &cq, &rf).await;
    logs
}

/// An unknown integration: `integrations.frameworks` names a framework kuota
/// does not know. One warning line at start, and batch Jobs are admitted as usual.
#[tokio::test]
async fn an_unknown_framework_is_logged_once_and_jobs_are_still_admitted() {
    let _only = controller_lock().await;
    let logs = batch_jobs_admitted_beside(&["example.com/nope"]).await;
    let unknown = logs.lines_with(&["WARN", "example.com/nope", "unknown or unsupported"]);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
}

/// A missing CRD: two enabled frameworks whose CRDs this cluster does not
/// have. One warning line each, and batch Jobs are admitted as usual.
#[tokio::test]
async fn a_framework_without_its_crd_is_logged_once_and_jobs_are_still_admitted() {
    let _only = controller_lock().await;
    let crds = Api::<CustomResourceDefinition>::all(client().await);
    // The kinds' lifecycle tests and install::samples install these CRDs, always while
    // holding the controller lock this test holds: remove them (they reinstall their own).
    for crd in ["jobsets.jobset.x-k8s.io", "rayclusters.ray.io"] {
        let _ = crds.delete(crd, &Default::default()).await;
        let gone = crate::support::wait_until(std::time::Duration::from_secs(60), || {
            let crds = crds.clone();
            async move { crds.get_opt(crd).await.ok().is_some_and(|c| c.is_none()) }
        })
        .await;
        assert!(gone.is_some(), "the {crd} CRD was not removed within 60 s");
    }
    let logs = batch_jobs_admitted_beside(&["jobset.x-k8s.io/jobset", "ray.io/raycluster"]).await;
    for kind in ["kind=JobSet", "kind=RayCluster"] {
        let missing = logs.lines_with(&["WARN", kind, "CRD of this integration is not installed"]);
        assert_eq!(missing.len(), 1, "{kind}: {missing:?}");
    }
}

/// Creates the Workload kuota would create for Job `job` (same name and owner), then sets
/// its status to `status` through the status subresource, as a hand edit would.
async fn hand_made_workload(client: &Client, ns: &str, job: &str, status: Value) -> Workload {
    let created = Api::<Job>::namespaced(client.clone(), ns)
        .get(job)
        .await
        .expect("get Job");
    let batch = kuota::integrations::all()
        .into_iter()
        .find(|i| i.kind() == "Job")
        .expect("the batch Job integration");
    let wl = batch
        .workload(&serde_json::to_value(&created).expect("json"))
        .expect("a Workload for the Job");
    let name = wl.metadata.name.clone().expect("named");
    let workloads = Api::<Workload>::namespaced(client.clone(), ns);
    workloads
        .create(&PostParams::default(), &wl)
        .await
        .unwrap_or_else(|e| panic!("create Workload {name}: {e}"));
    workloads
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("the API server refused the hand edit of {name}: {e}"))
}

fn true_condition(type_: &str) -> Value {
    json!({"type": type_, "status": "True", "reason": type_, "message": "edited by hand",
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// A Workload edited by hand into an invalid state, in two states the API
/// server accepts: an admission naming a flavor its ClusterQueue does not have, and
/// `QuotaReserved=True`/`Admitted=True` with no admission at all. Neither crashes the
/// controller; each gets a Warning Event naming the field; the first's Job is not started
/// (its usage stays charged as written), the second is queued and admitted properly, and
/// the quota (1 cpu) is never exceeded: a third 600m Job waits.
#[tokio::test]
async fn workloads_edited_into_invalid_admissions_are_reported_and_never_over_commit() {
    let _only = controller_lock().await;
    let client = &client().await;
    ensure_crds(client).await;
    let ns = &unique_name("bad-edit");
    create_namespace(client, ns, &[]).await;
    let (rf, cq) = quota(client, ns, "1").await;
    create_jobs(client, ns, &["bad-flavor", "no-admission"]).await;
    let reserved = [true_condition("QuotaReserved"), true_condition("Admitted")];
    let bad_flavor = hand_made_workload(
        client,
        ns,
        "bad-flavor",
        json!({
            "conditions": reserved,
            "admission": {"clusterQueue": cq, "podSetAssignments": [{
                "name": "main", "count": 1,
                "flavors": {"cpu": "no-such-flavor"}, "resourceUsage": {"cpu": "600m"}
            }]}
        }),
    )
    .await;
    let no_admission =
        hand_made_workload(client, ns, "no-admission", json!({"conditions": reserved})).await;

    let (stop, task) = start_controller(client);
    create_jobs(client, ns, &["third"]).await;

    let repaired = wait_for_workload(client, ns, "no-admission", "given an admission", |wl| {
        wl.status.as_ref().is_some_and(|s| s.admission.is_some())
    })
    .await;
    let admission = repaired
        .status
        .and_then(|s| s.admission)
        .expect("admission");
    assert_eq!(admission.cluster_queue, cq);
    assert_eq!(admission.pod_set_assignments[0].flavors["cpu"], rf);
    wait_until(Duration::from_secs(30), || async move {
        suspended(client, ns, "no-admission").await == Some(false)
    })
    .await
    .expect("the repaired Workload's Job is started");
    let third = wait_for_workload(client, ns, "third", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&third, "QuotaReserved").map(|c| c.1),
        Some("WaitingForQuota")
    );

    let note = warning_about(
        client,
        ns,
        bad_flavor.metadata.name.as_deref().expect("named"),
        "InvalidWorkload",
    )
    .await;
    assert!(
        note.contains("status.admission.podSetAssignments[0].flavors[cpu]")
            && note.contains(&format!(
                "ClusterQueue {cq} has no flavor no-such-flavor for resource cpu"
            )),
        "{note}"
    );
    let note = warning_about(
        client,
        ns,
        no_admission.metadata.name.as_deref().expect("named"),
        "InvalidWorkload",
    )
    .await;
    assert!(
        note.contains("status.conditions[QuotaReserved]: is True but status.admission is not set"),
        "{note}"
    );
    // The Job behind the foreign flavor was looked at (the other one started meanwhile)
    // and stays suspended: its admission is not one kuota can stand behind.
    assert_eq!(suspended(client, ns, "bad-flavor").await, Some(true));
    assert!(!task.is_finished(), "the controller stopped on bad input");

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    cleanup(client, ns, &cq, &rf).await;
}

/// The `Active` condition of LocalQueue `lq` in `ns`: (status, reason, message).
async fn local_queue_active(client: &Client, ns: &str) -> Option<(String, String, String)> {
    let lq = Api::<LocalQueue>::namespaced(client.clone(), ns)
        .get("lq")
        .await
        .ok()?;
    let c = lq
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Active")?;
    Some((c.status, c.reason, c.message))
}

/// A LocalQueue pointing at a missing ClusterQueue: the LocalQueue is
/// `Active=False` with Kueue's reason `ClusterQueueDoesNotExist`, the job's Workload is
/// pending with Kueue's reason `Misconfigured` and message, and both recover once the
/// ClusterQueue is created.
#[tokio::test]
async fn a_local_queue_naming_a_missing_cluster_queue_holds_jobs_until_it_exists() {
    let _only = controller_lock().await;
    let client = &client().await;
    ensure_crds(client).await;
    let ns = &unique_name("bad-lq");
    create_namespace(client, ns, &[]).await;
    let (rf, cq) = (unique_name("rf"), unique_name("cq-later"));
    create_flavor(client, &rf).await;
    create_local_queue(client, ns, "lq", &cq).await;
    let (stop, task) = start_controller(client);
    create_jobs(client, ns, &["waits"]).await;

    let pending = wait_for_workload(client, ns, "waits", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, reason, message) = condition(&pending, "QuotaReserved").expect("condition");
    assert_eq!(
        (reason, message),
        (
            "Misconfigured",
            format!("ClusterQueue {cq} doesn't exist").as_str()
        )
    );
    let inactive = &(
        "False".to_string(),
        "ClusterQueueDoesNotExist".to_string(),
        "Can't submit new workloads to clusterQueue".to_string(),
    );
    wait_until(Duration::from_secs(30), || async move {
        local_queue_active(client, ns).await.as_ref() == Some(inactive)
    })
    .await
    .unwrap_or_else(|| {
        panic!("LocalQueue lq never said its ClusterQueue is missing: {inactive:?}")
    });
    assert_eq!(suspended(client, ns, "waits").await, Some(true));

    create_cluster_queue(client, ns, &cq, &rf, "1", json!({})).await;
    wait_for_workload(client, ns, "waits", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_until(Duration::from_secs(30), || async move {
        local_queue_active(client, ns)
            .await
            .is_some_and(|c| c.0 == "True")
    })
    .await
    .expect("the LocalQueue is active once its ClusterQueue exists");

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    cleanup(client, ns, &cq, &rf).await;
}

/// A job whose queue-name names no LocalQueue: its Workload is created and
/// pending with Kueue's reason `Misconfigured` and message `LocalQueue lq doesn't exist`
/// (and a Warning Event saying so), and it is admitted once the LocalQueue exists.
#[tokio::test]
async fn a_job_naming_a_missing_local_queue_waits_until_it_exists() {
    let _only = controller_lock().await;
    let client = &client().await;
    ensure_crds(client).await;
    let ns = &unique_name("bad-queue-name");
    create_namespace(client, ns, &[]).await;
    let (rf, cq) = (unique_name("rf"), unique_name("cq"));
    create_flavor(client, &rf).await;
    create_cluster_queue(client, ns, &cq, &rf, "1", json!({})).await;
    let (stop, task) = start_controller(client);
    create_jobs(client, ns, &["orphan"]).await;

    let pending = wait_for_workload(client, ns, "orphan", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, reason, message) = condition(&pending, "QuotaReserved").expect("condition");
    assert_eq!(
        (reason, message),
        ("Misconfigured", "LocalQueue lq doesn't exist")
    );
    let name = pending.metadata.name.clone().expect("named");
    let note = warning_about(client, ns, &name, "Misconfigured").await;
    assert_eq!(note, "LocalQueue lq doesn't exist");
    assert_eq!(suspended(client, ns, "orphan").await, Some(true));

    create_local_queue(client, ns, "lq", &cq).await;
    wait_for_workload(client, ns, "orphan", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_until(Duration::from_secs(30), || async move {
        suspended(client, ns, "orphan").await == Some(false)
    })
    .await
    .expect("the admitted Job is started");

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    cleanup(client, ns, &cq, &rf).await;
}

/// A kind whose CRD is removed while one of its objects is admitted: the API server
/// deletes the object with its CRD, and its Workload gives the quota back (a Job that
/// waited for that quota is admitted), while the controller keeps running the other
/// kinds. Nothing is left holding quota for an object that can no longer exist.
#[tokio::test]
async fn a_kind_whose_crd_is_removed_while_admitted_gives_its_quota_back() {
    let _only = controller_lock().await;
    let client = &client().await;
    ensure_crds(client).await;
    let crd = crate::kinds::install_crd(client, "jobset.x-k8s.io_jobsets.yaml").await;
    // The CRD goes within a minute of its install: kube-controller-manager's garbage
    // collector, which starts watching a new resource only at its next discovery sync
    // (every 30 s), may never see the JobSet go, and then leaves its Workload. kuota must
    // not depend on it: it deletes a deleted job's Workload that the collector left.
    let ns = &unique_name("crd-removed");
    create_namespace(client, ns, &[]).await;
    let (rf, cq) = quota(client, ns, "1").await;
    let (stop, task) = start_controller_with(
        client,
        ControllerConfig {
            integrations: vec!["batch/job".into(), "jobset.x-k8s.io/jobset".into()],
            ..ControllerConfig::default()
        },
    );
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        "jobsets",
    );
    let jobsets: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &resource);
    let jobset: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "trainer", "namespace": ns,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": true, "replicatedJobs": [{"name": "workers", "replicas": 1,
            "template": {"spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "600m"}}}]}}}}}]}
    }))
    .expect("a JobSet");
    jobsets
        .create(&PostParams::default(), &jobset)
        .await
        .expect("create the JobSet");
    let workloads = Api::<Workload>::namespaced(client.clone(), ns);
    let jobset_workload = || async {
        workloads
            .list(&ListParams::default())
            .await
            .expect("list Workloads")
            .items
            .into_iter()
            .find(|w| {
                w.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "JobSet")
            })
    };
    let admitted = wait_until(Duration::from_secs(60), || async {
        jobset_workload()
            .await
            .is_some_and(|w| condition(&w, "Admitted").is_some_and(|c| c.0 == "True"))
    })
    .await;
    assert!(admitted.is_some(), "the JobSet was never admitted");
    // A Job that needs the JobSet's quota waits for it.
    create_jobs(client, ns, &["waits"]).await;
    let pending = wait_for_workload(client, ns, "waits", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert!(condition(&pending, "Admitted").is_none_or(|c| c.0 != "True"));

    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.delete(&crd, &Default::default())
        .await
        .expect("delete the JobSet CRD");
    let gone = wait_until(Duration::from_secs(60), || {
        let crds = crds.clone();
        let crd = crd.clone();
        async move { crds.get_opt(&crd).await.ok().is_some_and(|c| c.is_none()) }
    })
    .await;
    assert!(gone.is_some(), "the JobSet CRD was not removed within 60 s");

    // The JobSet's Workload goes, by the garbage collector or, once that had its
    // chance, by kuota; under a busy test suite either took longer than the usual minute.
    let readmitted = wait_until(Duration::from_secs(180), || async {
        crate::controller::workload_of(client, ns, "waits")
            .await
            .is_some_and(|wl| condition(&wl, "Admitted").is_some_and(|c| c.0 == "True"))
    })
    .await;
    assert!(
        readmitted.is_some(),
        "the Job waiting for the removed JobSet's quota was never admitted (JobSet Workload: {:?})",
        jobset_workload().await.map(|w| w.status)
    );
    assert!(
        jobset_workload().await.is_none(),
        "the removed JobSet's Workload is still there"
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    cleanup(client, ns, &cq, &rf).await;
}
