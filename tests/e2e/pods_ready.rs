//! waitForPodsReady against the real API server and kube-controller-manager: the test
//! plays the kubelet (it marks Pods Ready, or never does) and kuota runs with timeouts
//! of seconds. Kueue's integration tests "Should requeue a workload which exceeded the
//! timeout to reach PodsReady=True", "Should re-admit a timed-out workload and
//! deactivate a workload exceeded the re-queue count limit" and "Should block admission
//! of one new workload if two are considered in the same scheduling cycle"
//! (test/integration/singlecluster/scheduler/podsready/scheduler_test.go).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kuota::api::Workload;
use kuota::controller::ControllerConfig;
use kuota::engine::{EngineConfig, PodsReadyConfig};
use serde_json::json;

use crate::controller::{condition, finish_pods, job, start_controller_with, wait_for_workload};
use crate::preemption::{wait_pods_gone, wait_started};
use crate::support::{QueueFixture, controller_lock, wait_until};

/// The timeout and the backoff base the tests run with (ms).
const TIMEOUT_MS: i64 = 4_000;
const BACKOFF_BASE_MS: i64 = 2_000;

fn config(limit: Option<u32>, block_admission: bool, timeout: i64) -> ControllerConfig {
    ControllerConfig {
        engine: EngineConfig {
            pods_ready: Some(PodsReadyConfig {
                timeout,
                recovery_timeout: Some(timeout),
                block_admission,
                backoff_limit_count: limit,
                backoff_base: BACKOFF_BASE_MS,
                backoff_max: 60_000,
                requeue_by_creation: false,
            }),
            ..EngineConfig::default()
        },
        ..ControllerConfig::default()
    }
}

/// A one-pod Job in LocalQueue `lq`, created suspended with its queue name (no webhook).
fn suspended_job(ns: &str, name: &str, cpu: &str) -> Job {
    let mut j = job(ns, name, cpu);
    j.spec.get_or_insert_with(Default::default).suspend = Some(true);
    j
}

fn is_true(wl: &Workload, type_: &str) -> bool {
    condition(wl, type_).is_some_and(|c| c.0 == "True")
}

fn requeue_state(wl: &Workload) -> (Option<i32>, Option<i64>) {
    let rs = wl.status.as_ref().and_then(|s| s.requeue_state.as_ref());
    (
        rs.and_then(|r| r.count),
        rs.and_then(|r| r.requeue_at.as_ref())
            .map(|t| t.0.as_second()),
    )
}

/// Marks every Pod of Job `job` Running and Ready, as a kubelet would.
async fn make_pods_ready(pods: &Api<Pod>, job: &str) -> usize {
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("list pods");
    for pod in &list.items {
        let name = pod.metadata.name.clone().expect("named");
        pods.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}
            ]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("mark pod {name} Ready: {e}"));
    }
    list.items.len()
}

/// (a) A Job whose Pod never becomes ready is evicted at the timeout with Kueue's reason
/// and message, its requeue state says count 1 and a requeueAt one backoff after the
/// eviction; once its Pod is gone it waits (`Requeued=False`, `PodsReadyTimeout`), then
/// the backoff ends (`Requeued=True`, `BackoffFinished`, requeueAt cleared) and it is
/// admitted again.
#[tokio::test]
async fn a_gang_never_ready_is_evicted_at_the_timeout_and_requeued_after_the_backoff() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("podsready-timeout", "1").await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    let (stop, task) = start_controller_with(&client, config(None, false, TIMEOUT_MS));
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &suspended_job(&ns, "stuck", "600m"))
        .await
        .expect("create Job stuck");
    let admitted = wait_for_workload(&client, &ns, "stuck", "admitted", |wl| {
        is_true(wl, "Admitted")
    })
    .await;
    wait_started(&jobs, &pods, "stuck", &rf).await;
    let waiting = wait_for_workload(&client, &ns, "stuck", "waiting for its pods", |wl| {
        condition(wl, "PodsReady").is_some()
    })
    .await;
    assert_eq!(
        condition(&waiting, "PodsReady"),
        Some((
            "False",
            "WaitForStart",
            "Not all pods are ready or succeeded"
        ))
    );

    let evicted = wait_for_workload(&client, &ns, "stuck", "evicted", |wl| {
        is_true(wl, "Evicted") && requeue_state(wl).0 == Some(1)
    })
    .await;
    let name = admitted.metadata.name.clone().expect("named");
    assert_eq!(
        condition(&evicted, "Evicted"),
        Some((
            "True",
            "PodsReadyTimeout",
            format!("Exceeded the PodsReady timeout {ns}/{name}").as_str()
        ))
    );
    let at = |wl: &Workload, t: &str| {
        wl.status
            .as_ref()
            .and_then(|s| s.condition(t))
            .map(|c| c.last_transition_time.0.as_second())
            .expect("condition")
    };
    let waited = at(&evicted, "Evicted") - at(&admitted, "Admitted");
    assert!(
        (TIMEOUT_MS / 1000 - 1..=TIMEOUT_MS / 1000 + 2).contains(&waited),
        "evicted {waited} s after the admission"
    );
    let requeue_at = requeue_state(&evicted).1.expect("requeueAt");
    let backoff = requeue_at - at(&evicted, "Evicted");
    assert!(
        (BACKOFF_BASE_MS / 1000 - 1..=BACKOFF_BASE_MS / 1000 + 1).contains(&backoff),
        "requeueAt {backoff} s after the eviction"
    );
    let (suspend, ..) = crate::preemption::job_state(&jobs, "stuck").await;
    assert_eq!(suspend, Some(true), "the evicted Job is suspended again");

    wait_pods_gone(&pods, "stuck").await;
    let requeued = wait_for_workload(&client, &ns, "stuck", "requeued", |wl| {
        wl.status.as_ref().is_some_and(|s| s.admission.is_none())
    })
    .await;
    // Seen before the backoff ended, it waits for it; either way it is then finished.
    if requeue_state(&requeued).1.is_some() {
        assert_eq!(
            condition(&requeued, "Requeued").map(|c| (c.0, c.1)),
            Some(("False", "PodsReadyTimeout"))
        );
    }
    let again = wait_for_workload(&client, &ns, "stuck", "admitted again", |wl| {
        is_true(wl, "Admitted")
    })
    .await;
    assert_eq!(
        condition(&again, "Requeued").map(|c| (c.0, c.1, c.2)),
        Some((
            "True",
            "BackoffFinished",
            "The workload backoff was finished"
        ))
    );
    assert_eq!(requeue_state(&again), (Some(1), None));
    assert!(
        at(&again, "Admitted") >= requeue_at,
        "admitted again before its backoff ended"
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    fx.teardown().await;
}

/// (b) A Job whose Pod becomes ready gets `PodsReady=True` with Kueue's reason and
/// message, and is not evicted when the timeout passes.
#[tokio::test]
async fn a_gang_whose_pods_become_ready_gets_pods_ready_true() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("podsready-ready", "1").await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    let (stop, task) = start_controller_with(&client, config(None, false, TIMEOUT_MS));
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    jobs.create(
        &PostParams::default(),
        &suspended_job(&ns, "healthy", "600m"),
    )
    .await
    .expect("create Job healthy");
    wait_started(&jobs, &pods, "healthy", &rf).await;
    assert_eq!(make_pods_ready(&pods, "healthy").await, 1);
    let ready = wait_for_workload(&client, &ns, "healthy", "PodsReady", |wl| {
        is_true(wl, "PodsReady")
    })
    .await;
    assert_eq!(
        condition(&ready, "PodsReady"),
        Some((
            "True",
            "Started",
            "All pods reached readiness and the workload is running"
        ))
    );
    tokio::time::sleep(Duration::from_millis(TIMEOUT_MS as u64 + 2_000)).await;
    let later = crate::controller::workload_of(&client, &ns, "healthy")
        .await
        .expect("workload");
    assert!(!is_true(&later, "Evicted"), "{:#?}", later.status);
    assert!(is_true(&later, "Admitted"));
    assert_eq!(finish_pods(&client, &ns, "healthy").await, 1);
    wait_for_workload(&client, &ns, "healthy", "finished", |wl| {
        is_true(wl, "Finished")
    })
    .await;

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    fx.teardown().await;
}

/// (c) With backoffLimitCount 1, the second timeout deactivates the Workload:
/// `spec.active: false`, Evicted with Kueue's reason and message, requeue state cleared.
#[tokio::test]
async fn after_the_backoff_limit_the_workload_is_deactivated() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("podsready-limit", "1").await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    let (stop, task) = start_controller_with(&client, config(Some(1), false, TIMEOUT_MS));
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    jobs.create(
        &PostParams::default(),
        &suspended_job(&ns, "doomed", "600m"),
    )
    .await
    .expect("create Job doomed");
    wait_for_workload(&client, &ns, "doomed", "requeued once", |wl| {
        requeue_state(wl).0 == Some(1)
    })
    .await;
    wait_pods_gone(&pods, "doomed").await;
    let deactivated = wait_for_workload(&client, &ns, "doomed", "deactivated", |wl| {
        !wl.spec.is_active()
            && condition(wl, "Evicted")
                .is_some_and(|c| c.1 == "DeactivatedDueToRequeuingLimitExceeded")
    })
    .await;
    assert_eq!(
        condition(&deactivated, "Evicted"),
        Some((
            "True",
            "DeactivatedDueToRequeuingLimitExceeded",
            "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
        ))
    );
    let cleared = wait_for_workload(&client, &ns, "doomed", "without requeue state", |wl| {
        wl.status
            .as_ref()
            .is_some_and(|s| s.requeue_state.is_none())
    })
    .await;
    assert!(!cleared.spec.is_active());
    wait_pods_gone(&pods, "doomed").await;
    let inactive = wait_until(Duration::from_secs(30), || {
        let client = client.clone();
        let ns = ns.clone();
        async move {
            crate::controller::workload_of(&client, &ns, "doomed")
                .await
                .is_some_and(|wl| {
                    wl.status.as_ref().is_some_and(|s| s.admission.is_none())
                        && condition(&wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
                })
        }
    })
    .await;
    assert!(
        inactive.is_some(),
        "the deactivated Workload kept its quota"
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    fx.teardown().await;
}

/// (d) With blockAdmission, a second Job that fits waits with Kueue's
/// `WaitingForPodsReady` while the first is not ready, and is admitted once it is.
#[tokio::test]
async fn with_block_admission_nothing_else_is_admitted_while_a_gang_is_not_ready() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("podsready-block", "2").await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    // blockAdmission is cluster-wide, as in Kueue: an unfinished admitted gang an earlier test left
    // (its namespace still terminating) would block this one, so wait until none is left.
    let all = Api::<kuota::api::Workload>::all(client.clone());
    let others_admitted = || async {
        all.list(&Default::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    // A finished Workload keeps its admission but holds nothing.
                    .filter(|w| {
                        w.status.as_ref().is_some_and(|s| {
                            s.admission.is_some() && !s.is_condition_true("Finished")
                        })
                    })
                    .map(|w| {
                        format!(
                            "{}/{}",
                            w.metadata.namespace.as_deref().unwrap_or(""),
                            w.metadata.name.as_deref().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    if crate::support::wait_until(Duration::from_secs(90), || async {
        others_admitted().await.is_empty()
    })
    .await
    .is_none()
    {
        panic!(
            "admitted Workloads from elsewhere would block admission: {:?}",
            others_admitted().await
        );
    }
    let (stop, task) = start_controller_with(&client, config(None, true, 120_000));
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &suspended_job(&ns, "first", "600m"))
        .await
        .expect("create Job first");
    wait_started(&jobs, &pods, "first", &rf).await;
    jobs.create(
        &PostParams::default(),
        &suspended_job(&ns, "second", "600m"),
    )
    .await
    .expect("create Job second");
    let blocked = wait_for_workload(&client, &ns, "second", "blocked", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&blocked, "QuotaReserved"),
        Some((
            "False",
            "WaitingForPodsReady",
            "waiting for all admitted workloads to be in PodsReady condition"
        ))
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = crate::controller::workload_of(&client, &ns, "second")
        .await
        .expect("workload");
    assert!(!is_true(&still, "Admitted"), "admitted while blocked");

    assert_eq!(make_pods_ready(&pods, "first").await, 1);
    wait_for_workload(&client, &ns, "second", "admitted", |wl| {
        is_true(wl, "Admitted")
    })
    .await;
    let first = crate::controller::workload_of(&client, &ns, "first")
        .await
        .expect("workload");
    assert!(is_true(&first, "PodsReady"));

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    fx.teardown().await;
}
