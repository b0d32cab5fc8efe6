//! maximumExecutionTimeSeconds across admissions against the real API server: a Job
//! with Kueue's `kueue.x-k8s.io/max-exec-time-seconds` label is preempted, its requeue
//! records the time it ran in `status.accumulatedPastExecutionTimeSeconds`, and once
//! admitted again it is deactivated after only the time it had left (Kueue's
//! integration test "should deactivate the workload when the time expires with
//! multiple admissions", test/integration/singlecluster/controller/core), across a
//! restart of kuota.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kuota::api::Workload;

use crate::controller::{condition, finish_pods, start_controller, wait_for_workload};
use crate::preemption::{
    job_state, low_and_high_classes, prioritized_job, priority_queue, stop_and_clean,
    wait_pods_gone, wait_started,
};
use crate::support::{controller_lock, wait_until};

/// The workload's maximum, in seconds.
const MAX_SECONDS: i64 = 20;

/// When condition `type_` last changed, in Unix seconds (the API keeps seconds).
fn changed_at(wl: &Workload, type_: &str) -> i64 {
    wl.status
        .as_ref()
        .and_then(|s| s.condition(type_))
        .map(|c| c.last_transition_time.0.as_second())
        .unwrap_or_else(|| panic!("no {type_} condition: {:#?}", wl.status))
}

fn is_true(wl: &Workload, type_: &str) -> bool {
    condition(wl, type_).is_some_and(|c| c.0 == "True")
}

#[tokio::test]
async fn a_preempted_job_readmitted_is_deactivated_after_only_its_remaining_time() {
    let _only = controller_lock().await;
    let fx = priority_queue("exectime").await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    let (low, high) = low_and_high_classes(&client).await;
    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);

    // The limited Job runs for a while in its first admission.
    let mut limited = prioritized_job(&ns, "limited", "600m", &low);
    limited
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(
            "kueue.x-k8s.io/max-exec-time-seconds".into(),
            MAX_SECONDS.to_string(),
        );
    jobs.create(&PostParams::default(), &limited)
        .await
        .expect("create Job limited");
    let first = wait_for_workload(&client, &ns, "limited", "admitted", |wl| {
        is_true(wl, "Admitted")
    })
    .await;
    assert_eq!(
        first.spec.maximum_execution_time_seconds,
        Some(MAX_SECONDS as i32)
    );
    wait_started(&jobs, &pods, "limited", &rf).await;
    tokio::time::sleep(Duration::from_secs(6)).await;

    // Preempted; once its Pod is gone the requeue records the time it ran.
    jobs.create(
        &PostParams::default(),
        &prioritized_job(&ns, "urgent", "600m", &high),
    )
    .await
    .expect("create Job urgent");
    wait_for_workload(&client, &ns, "limited", "evicted", |wl| {
        is_true(wl, "Evicted")
    })
    .await;
    wait_pods_gone(&pods, "limited").await;
    let requeued = wait_for_workload(&client, &ns, "limited", "requeued", |wl| {
        wl.status.as_ref().is_some_and(|s| s.admission.is_none())
            && condition(wl, "Requeued").is_some_and(|c| c.0 == "True")
    })
    .await;
    let status = requeued.status.as_ref().expect("status");
    let ran = i64::from(
        status
            .accumulated_past_execution_time_seconds
            .expect("the requeue recorded the time admitted"),
    );
    // Whole seconds from the Admitted condition to the requeue.
    assert_eq!(
        ran,
        changed_at(&requeued, "Admitted") - changed_at(&first, "Admitted"),
        "{status:#?}"
    );
    assert!((6..MAX_SECONDS).contains(&ran), "ran {ran} s");

    // The preemptor finishes; admitted again, the Job gets only what it had left.
    wait_started(&jobs, &pods, "urgent", &rf).await;
    assert!(finish_pods(&client, &ns, "urgent").await >= 1);
    let second = wait_for_workload(&client, &ns, "limited", "re-admitted", |wl| {
        is_true(wl, "Admitted")
    })
    .await;
    // kuota restarts during the second admission and is down for 4 s: the new process
    // counts from the Admitted condition and the accumulated time in the API, so the
    // deadline neither moves by the time it was down nor forgets the first admission.
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (stop, task) = start_controller(&client);
    let deactivated = wait_for_workload(&client, &ns, "limited", "deactivated", |wl| {
        wl.spec.active == Some(false) && is_true(wl, "Evicted")
    })
    .await;
    assert_eq!(
        condition(&deactivated, "Evicted"),
        Some((
            "True",
            "DeactivatedDueToMaximumExecutionTimeExceeded",
            "The workload is deactivated due to exceeding the maximum execution time"
        ))
    );
    // Condition times are whole seconds and the writes lag the engine a little.
    let second_run = changed_at(&deactivated, "Evicted") - changed_at(&second, "Admitted");
    let left = MAX_SECONDS - ran;
    assert!(
        (left - 1..=left + 2).contains(&second_run),
        "deactivated {second_run} s after the re-admission, {left} s were left"
    );
    let suspended = wait_until(Duration::from_secs(60), || {
        let jobs = jobs.clone();
        async move { job_state(&jobs, "limited").await.0 == Some(true) }
    })
    .await;
    assert!(suspended.is_some(), "the deactivated Job was not suspended");

    stop_and_clean(stop, task, fx, [&low, &high]).await;
}
