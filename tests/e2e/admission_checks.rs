//! Admission checks against the real API server, the test playing the check's controller
//! (as Kueue's integration tests for admission checks do): it creates an AdmissionCheck
//! with a controller name of its own and marks it Active, then sets each Workload's check
//! state. Covered: a ClusterQueue stays inactive while its check is not Active; a Job gets
//! its quota reserved with the check Pending and stays suspended; Ready with a pod set
//! update admits it and starts it with the update's nodeSelector; Retry gives the quota
//! back and requeues it with the retry counted; Rejected deactivates it.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kuota::api::{AdmissionCheck, ClusterQueue, Workload};
use serde_json::json;

use crate::controller::{condition, job, start_controller, wait_for_workload, workload_of};
use crate::support::{QueueFixture, controller_lock, unique_name, wait_until};

/// The controller name the test's checks carry: nothing in kuota acts for it.
const CONTROLLER: &str = "kuota.dev/e2e-check";

/// Creates AdmissionCheck `name` and sets its `Active` condition to `active`.
async fn create_check(client: &Client, name: &str, active: bool) {
    let checks = Api::<AdmissionCheck>::all(client.clone());
    let ac: AdmissionCheck = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": name}, "spec": {"controllerName": CONTROLLER}
    }))
    .expect("admission check");
    checks
        .create(&PostParams::default(), &ac)
        .await
        .unwrap_or_else(|e| panic!("create AdmissionCheck {name}: {e}"));
    set_active(client, name, active).await;
}

async fn set_active(client: &Client, name: &str, active: bool) {
    let status = if active { "True" } else { "False" };
    Api::<AdmissionCheck>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"conditions": [{"type": "Active", "status": status,
                "reason": "ByTest", "message": "set by the test",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("set AdmissionCheck {name} Active={status}: {e}"));
}

/// Sets the Workload of Job `job`'s only check to `state`, as a check controller does.
async fn set_check(client: &Client, ns: &str, job: &str, check: serde_json::Value) {
    let wl = workload_of(client, ns, job).await.expect("a Workload");
    let name = wl.metadata.name.clone().expect("named");
    Api::<Workload>::namespaced(client.clone(), ns)
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"admissionChecks": [check]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("set the check of Workload {ns}/{name}: {e}"));
}

/// Now, as the API writes times.
fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

fn check_state(wl: &Workload) -> Option<(String, Option<i32>)> {
    let c = wl.status.as_ref()?.admission_checks.first()?;
    Some((c.state.clone(), c.retry_count))
}

/// The ClusterQueue's `Active` condition: status, reason, message.
async fn cq_active(client: &Client, cq: &str) -> Option<(String, String, String)> {
    let q = Api::<ClusterQueue>::all(client.clone())
        .get(cq)
        .await
        .ok()?;
    let c = q
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Active")?;
    Some((c.status, c.reason, c.message))
}

fn suspended_job(ns: &str, name: &str) -> Job {
    let mut j = job(ns, name, "400m");
    j.spec.get_or_insert_with(Default::default).suspend = Some(true);
    j
}

async fn reserved_and_pending(client: &Client, ns: &str, name: &str) -> Workload {
    wait_for_workload(client, ns, name, "reserved with its check Pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "True")
            && condition(wl, "Admitted").is_some_and(|c| c.0 == "False")
            && check_state(wl).is_some_and(|(s, _)| s == "Pending")
    })
    .await
}

#[tokio::test]
async fn a_job_waits_for_its_check_and_starts_with_the_pod_set_update_once_ready() {
    let _only = controller_lock().await;
    let check = unique_name("ac");
    let fx = QueueFixture::with_queue_spec(
        "ac-ready",
        "1",
        json!({"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}),
    )
    .await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    let (stop, task) = start_controller(&client);

    // Missing, then not Active: the ClusterQueue stays inactive with Kueue's reasons.
    let cq = fx.cq.clone();
    let missing = (
        "False".to_string(),
        "AdmissionCheckNotFound".to_string(),
        format!("Can't admit new workloads: references missing AdmissionCheck(s): {check}."),
    );
    let seen = wait_until(Duration::from_secs(30), || {
        let (client, cq, missing) = (client.clone(), cq.clone(), missing.clone());
        async move { cq_active(&client, &cq).await == Some(missing) }
    })
    .await;
    assert!(seen.is_some(), "{:?}", cq_active(&client, &cq).await);
    create_check(&client, &check, false).await;
    let inactive = (
        "False".to_string(),
        "AdmissionCheckInactive".to_string(),
        format!("Can't admit new workloads: references inactive AdmissionCheck(s): {check}."),
    );
    let seen = wait_until(Duration::from_secs(30), || {
        let (client, cq, inactive) = (client.clone(), cq.clone(), inactive.clone());
        async move { cq_active(&client, &cq).await == Some(inactive) }
    })
    .await;
    assert!(seen.is_some(), "{:?}", cq_active(&client, &cq).await);

    // Active: the Job's quota is reserved, its check Pending, and it stays suspended.
    set_active(&client, &check, true).await;
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &suspended_job(&ns, "gated"))
        .await
        .expect("create Job gated");
    let wl = reserved_and_pending(&client, &ns, "gated").await;
    assert_eq!(
        condition(&wl, "Admitted"),
        Some((
            "False",
            "UnsatisfiedChecks",
            "The workload has not all checks ready"
        ))
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let j = jobs.get("gated").await.expect("get Job");
    assert_eq!(j.spec.as_ref().and_then(|s| s.suspend), Some(true));

    // Ready with a pod set update: admitted, started with the update's nodeSelector.
    set_check(
        &client,
        &ns,
        "gated",
        json!({"name": check, "state": "Ready", "message": "provisioned",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "podSetUpdates": [{"name": "main", "nodeSelector": {"kuota.dev/e2e-provisioned": "yes"}}]}),
    )
    .await;
    wait_for_workload(&client, &ns, "gated", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let started = wait_until(Duration::from_secs(60), || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("gated").await.expect("get Job");
            let spec = j.spec.unwrap_or_default();
            spec.suspend == Some(false)
                && spec
                    .template
                    .spec
                    .and_then(|p| p.node_selector)
                    .is_some_and(|s| {
                        s.get("kuota.dev/e2e-provisioned").map(String::as_str) == Some("yes")
                    })
        }
    })
    .await;
    assert!(
        started.is_some(),
        "{:#?}",
        jobs.get("gated").await.map(|j| j.spec)
    );
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    let _ = Api::<AdmissionCheck>::all(client.clone())
        .delete(&check, &Default::default())
        .await;
    fx.teardown().await;
}

#[tokio::test]
async fn retry_gives_the_quota_back_and_rejected_deactivates() {
    let _only = controller_lock().await;
    let check = unique_name("ac");
    let fx = QueueFixture::with_queue_spec(
        "ac-retry",
        "1",
        json!({"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}),
    )
    .await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    create_check(&client, &check, true).await;
    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    for name in ["retried", "rejected"] {
        jobs.create(&PostParams::default(), &suspended_job(&ns, name))
            .await
            .unwrap_or_else(|e| panic!("create Job {name}: {e}"));
        reserved_and_pending(&client, &ns, name).await;
    }
    // Both hold 400m of the 1-CPU quota: a third does not fit meanwhile.
    jobs.create(&PostParams::default(), &suspended_job(&ns, "third"))
        .await
        .expect("create Job third");
    wait_for_workload(&client, &ns, "third", "pending for quota", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;

    // Retry: evicted with Kueue's reason, its quota goes back (the third gets it while
    // the retry waits out its 30 s), and it is requeued with its check Pending and the
    // retry counted.
    set_check(
        &client,
        &ns,
        "retried",
        json!({"name": check, "state": "Retry", "message": "no capacity",
            "lastTransitionTime": now(), "requeueAfterSeconds": 30}),
    )
    .await;
    let evicted = wait_for_workload(&client, &ns, "retried", "evicted", |wl| {
        condition(wl, "Evicted").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&evicted, "Evicted"),
        Some((
            "True",
            "AdmissionCheck",
            format!("Evicted due to AdmissionCheck in Retry state: {check:?} (no capacity)")
                .as_str()
        ))
    );
    reserved_and_pending(&client, &ns, "third").await;
    wait_for_workload(&client, &ns, "retried", "requeued with one retry", |wl| {
        check_state(wl) == Some(("Pending".into(), Some(1)))
    })
    .await;

    // Rejected: deactivated, with Kueue's reason.
    set_check(
        &client,
        &ns,
        "rejected",
        json!({"name": check, "state": "Rejected", "message": "never",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    )
    .await;
    let deactivated = wait_for_workload(&client, &ns, "rejected", "deactivated", |wl| {
        wl.spec.active == Some(false) && condition(wl, "Evicted").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&deactivated, "Evicted"),
        Some((
            "True",
            "DeactivatedDueToAdmissionCheck",
            format!(
                "The workload is deactivated due to AdmissionCheck in Rejected state: {check:?} (never)"
            )
            .as_str()
        ))
    );
    let j = jobs.get("rejected").await.expect("get Job");
    assert_eq!(j.spec.as_ref().and_then(|s| s.suspend), Some(true));
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    let _ = Api::<AdmissionCheck>::all(client.clone())
        .delete(&check, &Default::default())
        .await;
    fx.teardown().await;
}
