//! `kuota serve` as the queue controller: jobs held, admitted, left pending and finished,
//! against the real API server and kube-controller-manager.
//!
//! The webhook is served by the test process and registered with kuota's own manifests
//! (as in the webhook tests), and the controller runs in-process beside it, exactly as
//! `kuota serve` composes them. The ClusterQueue, flavor and namespace are the test's own.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kuota::api::{ClusterQueue, ResourceFlavor, Workload};
use kuota::controller::{ControllerConfig, run};
use kuota::policy::PolicySet;
use serde_json::json;
use tokio::sync::oneshot;

use crate::support::{QueueFixture, client, controller_lock, ensure_crds, unique_name, wait_until};
use crate::webhook::{Kuota, Registration};

/// A one-pod Job in LocalQueue `lq` requesting `cpu`, created NOT suspended: kuota's
/// webhook is what holds it.
pub(crate) fn job(ns: &str, name: &str, cpu: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": name,
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": cpu}}
                }]
            }}
        }
    }))
    .expect("job")
}

/// The Workload whose controller owner is Job `job`.
pub(crate) async fn workload_of(client: &Client, ns: &str, job: &str) -> Option<Workload> {
    let list = Api::<Workload>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .ok()?;
    list.items.into_iter().find(|wl| {
        wl.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Job" && o.name == job && o.controller == Some(true))
    })
}

pub(crate) fn condition<'a>(wl: &'a Workload, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    wl.status
        .as_ref()?
        .condition(type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

pub(crate) async fn wait_for_workload(
    client: &Client,
    ns: &str,
    job: &str,
    what: &str,
    check: impl Fn(&Workload) -> bool,
) -> Workload {
    let mut last = None;
    for _ in 0..600 {
        last = workload_of(client, ns, job).await;
        if last.as_ref().is_some_and(&check) {
            return last.expect("checked");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the Workload of Job {ns}/{job} never became {what} within 60 s; last seen: {:#?}",
        last.map(|w| w.status)
    );
}

/// Marks every Pod of Job `job` Succeeded, as a kubelet would once they ran.
pub(crate) async fn finish_pods(client: &Client, ns: &str, job: &str) -> usize {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("list pods");
    for pod in &list.items {
        let name = pod.metadata.name.clone().expect("named");
        pods.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .unwrap_or_else(|e| panic!("mark pod {name} Succeeded: {e}"));
    }
    list.items.len()
}

#[tokio::test]
async fn a_queued_job_is_held_admitted_started_and_finished_and_the_next_one_follows() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("ctl-admit", "1").await;
    let (client, ns, rf, cq) = (
        fx.client.clone(),
        fx.ns.clone(),
        fx.rf.clone(),
        fx.cq.clone(),
    );

    let mut webhook = Kuota::start(&client, PolicySet::default()).await;
    let run_label = unique_name("run");
    let registration =
        Registration::create(&client, webhook.addr, &webhook.ca_pem, &[&ns], &run_label).await;
    let (stop, controller) = start_controller(&client);

    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    // The webhook configuration takes about a second to be in force: retry until the
    // Job comes back suspended (created unsuspended, so only kuota can have held it).
    let first = "first";
    let mut held = false;
    for _ in 0..40 {
        let created = jobs
            .create(&PostParams::default(), &job(&ns, first, "600m"))
            .await
            .unwrap_or_else(|e| panic!("create Job {first}: {e}"));
        if created.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
            held = true;
            break;
        }
        // Not yet in force: remove the Job (and any Pod it made) and try again.
        let _ = jobs.delete(first, &DeleteParams::foreground()).await;
        wait_until(Duration::from_secs(30), || {
            let jobs = jobs.clone();
            async move { jobs.get_opt(first).await.ok().flatten().is_none() }
        })
        .await
        .expect("a deleted Job disappears");
    }
    assert!(held, "kuota's webhook never suspended a queue-labelled Job");

    // Admitted: one Workload, owned by the Job, with the admission and both conditions.
    let wl = wait_for_workload(&client, &ns, first, "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let name = wl.metadata.name.clone().expect("named");
    assert!(
        name.starts_with("job-first-"),
        "Kueue's Workload name: {name}"
    );
    assert_eq!(condition(&wl, "QuotaReserved").map(|c| c.0), Some("True"));
    let admission = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.clone())
        .expect("admission");
    assert_eq!(admission.cluster_queue, cq);
    let assigned = serde_json::to_value(&admission.pod_set_assignments).expect("json");
    assert_eq!(assigned[0]["flavors"]["cpu"], json!(rf), "{assigned}");

    // Started: unsuspended with the flavor's node labels, and its Pod exists.
    let started = wait_until(Duration::from_secs(30), || {
        let (jobs, rf) = (jobs.clone(), rf.clone());
        async move {
            jobs.get(first).await.ok().is_some_and(|j| {
                let spec = j.spec.unwrap_or_default();
                let selector = spec.template.spec.and_then(|p| p.node_selector);
                spec.suspend == Some(false)
                    && selector.unwrap_or_default().get("kuota.dev/e2e-pool") == Some(&rf)
            })
        }
    })
    .await;
    assert!(
        started.is_some(),
        "Job {first} was not unsuspended with the flavor's nodeSelector"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    wait_until(Duration::from_secs(60), || {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default().labels(&format!("job-name={first}")))
                .await
                .is_ok_and(|l| !l.items.is_empty())
        }
    })
    .await
    .expect("kube-controller-manager created no Pod for the admitted Job");

    // Over quota: the second Job waits, and its Workload says why.
    jobs.create(&PostParams::default(), &job(&ns, "second", "600m"))
        .await
        .expect("create Job second");
    let pending = wait_for_workload(&client, &ns, "second", "pending with a reason", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, reason, message) = condition(&pending, "QuotaReserved").expect("condition");
    // Kueue's granular reason (UnadmittedWorkloadsObservability, on by default since 0.19).
    assert_eq!(reason, "WaitingForQuota");
    assert!(
        message.contains("insufficient unused quota for cpu"),
        "kuota's pending message: {message}"
    );
    assert_eq!(
        jobs.get("second")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.suspend),
        Some(true)
    );

    // Finished: the Pod succeeds, the Job completes, the Workload is Finished and the
    // quota it held goes to the second Job.
    assert!(finish_pods(&client, &ns, first).await >= 1);
    wait_for_workload(&client, &ns, first, "finished", |wl| {
        condition(wl, "Finished").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_for_workload(&client, &ns, "second", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), controller).await;
    registration.delete().await;
    webhook.stop().await;
    fx.teardown().await;
}

/// Runs the controller in this process, as the install's `kuota-controller`
/// ServiceAccount, until the returned sender is used or dropped.
pub(crate) fn start_controller(
    client: &Client,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    start_controller_with(client, ControllerConfig::default())
}

/// [`start_controller`] with a configuration of the test's own.
pub(crate) fn start_controller_with(
    client: &Client,
    config: ControllerConfig,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    // kuota runs as the install's controller ServiceAccount; `client` (the test's admin)
    // only says which cluster. Its refusals fail the test (see `support::controller_lock`).
    let _cluster = client;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let (client, record) = crate::rbac::Identity::Controller.client().await;
        crate::rbac::watch_controller(record);
        let _ = run(client, config, async {
            let _ = stopped.await;
        })
        .await;
    });
    (stop, task)
}

#[tokio::test]
async fn a_restarted_controller_restores_admissions_and_never_admits_twice() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("ctl-restart", "1").await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    // Created suspended with the queue name, as a user may: no webhook involved here.
    let suspended = |name: &str| {
        let mut j = job(&ns, name, "600m");
        j.spec.get_or_insert_with(Default::default).suspend = Some(true);
        j
    };

    let (stop, task) = start_controller(&client);
    jobs.create(&PostParams::default(), &suspended("first"))
        .await
        .expect("create Job first");
    let before = wait_for_workload(&client, &ns, "first", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    // Jobs that wait: each has a Workload the restarted controller must find, not create.
    const WAITING: usize = 12;
    for i in 0..WAITING {
        jobs.create(&PostParams::default(), &suspended(&format!("waits-{i}")))
            .await
            .expect("create a waiting Job");
    }
    let all_have_workloads = wait_until(Duration::from_secs(60), || async {
        Api::<Workload>::namespaced(client.clone(), &ns)
            .list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.len() == WAITING + 1)
    })
    .await;
    assert!(
        all_have_workloads.is_some(),
        "the waiting Jobs never got their Workloads"
    );
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    let refused_before = refused_workload_creates(&client).await;

    // While kuota is down a second Job arrives; the restarted controller must count the
    // first admission (it holds 600m of the 1 cpu) and keep the second waiting.
    jobs.create(&PostParams::default(), &suspended("second"))
        .await
        .expect("create Job second");
    let (stop, task) = start_controller(&client);
    let pending = wait_for_workload(&client, &ns, "second", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&pending, "QuotaReserved").map(|c| c.1),
        Some("WaitingForQuota")
    );
    let after = workload_of(&client, &ns, "first")
        .await
        .expect("first's Workload");
    let reserved_at = |wl: &Workload| {
        wl.status
            .as_ref()
            .and_then(|s| s.condition("QuotaReserved"))
            .map(|c| c.last_transition_time.clone())
    };
    assert_eq!(
        reserved_at(&after),
        reserved_at(&before),
        "the first admission was written again after the restart"
    );
    assert_eq!(
        after.status.as_ref().and_then(|s| s.admission.clone()),
        before.status.as_ref().and_then(|s| s.admission.clone())
    );
    let admitted = Api::<Workload>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list Workloads")
        .items
        .iter()
        .filter(|wl| condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "True"))
        .count();
    assert_eq!(admitted, 1, "usage must equal the admitted Workloads' sum");
    // The restarted controller listed the Workloads before looking at a job: not one
    // create of a Workload that already existed (the API server counts refused ones).
    assert_eq!(
        refused_workload_creates(&client).await,
        refused_before,
        "the restarted controller created Workloads that already existed"
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    fx.teardown().await;
}

/// Workload creates the API server refused with 409 Conflict (AlreadyExists) since it
/// started, from its own `apiserver_request_total`.
async fn refused_workload_creates(client: &Client) -> u64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client
        .request_text(request)
        .await
        .expect("the API server's metrics");
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            l.contains(r#"resource="workloads""#)
                && l.contains(r#"verb="POST""#)
                && l.contains(r#"code="409""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// kuota runs no admission checks: a ClusterQueue naming one says so in its `Active`
/// condition, with Kueue's reason, instead of admitting without the check.
#[tokio::test]
async fn a_cluster_queue_naming_admission_checks_reports_itself_inactive() {
    let _only = controller_lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    let (name, rf) = (unique_name("cq-gated"), unique_name("rf"));
    let queue: ClusterQueue = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "admissionChecksStrategy": {"admissionChecks": [{"name": "prov-req"}]},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": rf, "resources": [{"name": "cpu", "nominalQuota": "1"}]}]
            }]
        }
    }))
    .expect("cluster queue");
    let queues = Api::<ClusterQueue>::all(client.clone());
    queues
        .create(&PostParams::default(), &queue)
        .await
        .expect("create ClusterQueue");
    // The flavor must exist, or the queue is inactive for that reason instead.
    let flavors = Api::<ResourceFlavor>::all(client.clone());
    let flavor: ResourceFlavor = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": rf}, "spec": {}
    }))
    .expect("flavor");
    flavors
        .create(&PostParams::default(), &flavor)
        .await
        .expect("create ResourceFlavor");

    let (stop, task) = start_controller(&client);
    let active = |cq: &ClusterQueue| {
        cq.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Active"))
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    let mut last = None;
    for _ in 0..300 {
        last = queues.get(&name).await.ok().as_ref().and_then(active);
        if last.as_ref().is_some_and(|c| c.0 == "False") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    let _ = queues.delete(&name, &Default::default()).await;
    let _ = flavors.delete(&rf, &Default::default()).await;
    let (status, reason, message) = last.expect("an Active condition within 30 s");
    assert_eq!(status, "False", "{reason}: {message}");
    assert_eq!(reason, "AdmissionCheckNotFound", "{message}");
    assert_eq!(
        message,
        "Can't admit new workloads: references missing AdmissionCheck(s): prov-req."
    );
}

/// A LocalQueue's admission fair sharing history: consumed cpu in milli, and lastUpdate.
async fn afs_history(
    api: &Api<kuota::api::LocalQueue>,
) -> Option<(i64, k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)> {
    let lq = api.get("lq").await.ok()?;
    let afs = lq.status?.fair_sharing?.admission_fair_sharing_status?;
    let cpu = afs.consumed_resources.get("cpu")?;
    let milli = kuota::api::quantity::parse_milli(cpu).ok()?;
    Some((milli, afs.last_update))
}

/// Admission fair sharing end to end: in a ClusterQueue with `admissionScope:
/// UsageBasedAdmissionFairSharing`, an admission shows up in its LocalQueue's
/// `status.fairSharing.admissionFairSharingStatus`, and a restarted controller carries that
/// history on (it reads the status back) instead of starting from nothing.
#[tokio::test]
async fn a_local_queue_reports_its_admission_fair_sharing_usage_across_a_restart() {
    let _only = controller_lock().await;
    let scope = json!({"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}});
    let fx = QueueFixture::with_queue_spec("ctl-afs", "1", scope).await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    let config = || ControllerConfig {
        engine: kuota::engine::EngineConfig {
            admission_fair_sharing: Some(kuota::engine::AdmissionFairSharing {
                usage_half_life: 10_000,
                usage_sampling_interval: 1_000,
                resource_weights: Default::default(),
            }),
            ..Default::default()
        },
        ..ControllerConfig::default()
    };
    let local_queues = Api::<kuota::api::LocalQueue>::namespaced(client.clone(), &ns);

    let (stop, task) = start_controller_with(&client, config());
    let mut first = job(&ns, "first", "600m");
    first.spec.get_or_insert_with(Default::default).suspend = Some(true);
    Api::<Job>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &first)
        .await
        .expect("create Job first");
    wait_for_workload(&client, &ns, "first", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    // Its entry penalty: 600m x (1 - 0.5^(1s/10s)) = 40m, then growing towards 600m.
    let mut before = None;
    for _ in 0..300 {
        before = afs_history(&local_queues).await.filter(|(m, _)| *m >= 40);
        if before.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (before_milli, before_update) =
        before.expect("the LocalQueue's consumedResources never showed the admission");
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    // lastUpdate has second precision: let the restart fall in a later second.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let (stop, task) = start_controller_with(&client, config());
    // The new controller writes the history it restored (anchored at its own start, as
    // Kueue anchors it): never less than what the status said.
    let mut after = None;
    for _ in 0..300 {
        after = afs_history(&local_queues)
            .await
            .filter(|(_, at)| *at != before_update);
        if after.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (after_milli, _) =
        after.expect("the restarted controller never wrote the LocalQueue's history");
    assert!(
        after_milli >= before_milli,
        "the history went from {before_milli}m to {after_milli}m across the restart"
    );
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    fx.teardown().await;
}
