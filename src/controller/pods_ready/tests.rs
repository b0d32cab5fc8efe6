//! The exact waitForPodsReady patches, from Workloads as the API server stores them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::*;
use crate::controller::actuate::workload::{evict_patch, requeue_patch};
use crate::controller::workload_sync::{JobState, Step, plan};

fn now() -> Time {
    Time("2026-11-24T00:00:10Z".parse().expect("time"))
}

fn workload(status: Value) -> Workload {
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-a-1b2c3", "namespace": "team", "resourceVersion": "7",
                     "generation": 1},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                 "template": {"spec": {"containers": []}}}]},
        "status": status,
    }))
    .expect("workload")
}

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "observedGeneration": 1, "lastTransitionTime": "2026-11-24T00:00:00Z"})
}

fn admitted(extra: &[Value]) -> Workload {
    let mut conds = vec![cond(
        "Admitted",
        "True",
        "Admitted",
        "The workload is admitted",
    )];
    conds.extend(extra.iter().cloned());
    workload(json!({
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
            "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
        "conditions": conds,
    }))
}

/// Kueue's job reconciler: an admitted workload without the condition waits for its
/// start; ready pods make it `Started`; a failure after that `WaitForRecovery`; ready
/// again `Recovered`; and an unchanged state writes nothing.
#[test]
fn the_condition_follows_the_pods_and_is_written_only_on_change() {
    let fresh = admitted(&[]);
    assert_eq!(condition(&fresh, false), Some(Readiness::WaitForStart));
    assert_eq!(condition(&fresh, true), Some(Readiness::Started));
    let waiting = admitted(&[cond(
        "PodsReady",
        "False",
        "WaitForStart",
        "Not all pods are ready or succeeded",
    )]);
    assert_eq!(condition(&waiting, false), None);
    let started = admitted(&[cond("PodsReady", "True", "Started", "x")]);
    assert_eq!(condition(&started, true), None);
    assert_eq!(condition(&started, false), Some(Readiness::WaitForRecovery));
    let recovering = admitted(&[cond("PodsReady", "False", "WaitForRecovery", "x")]);
    assert_eq!(condition(&recovering, true), Some(Readiness::Recovered));
    // Pending: waiting for the start, whatever the pods say.
    let pending = workload(json!({}));
    assert_eq!(condition(&pending, true), Some(Readiness::WaitForStart));

    let body = condition_patch(&started, Readiness::WaitForRecovery, &now()).expect("a change");
    assert_eq!(
        body["status"]["conditions"][1],
        json!({"type": "PodsReady", "status": "False", "reason": "WaitForRecovery",
               "message": "At least one pod has failed, waiting for recovery",
               "observedGeneration": 1, "lastTransitionTime": "2026-11-24T00:00:10Z"})
    );
    assert_eq!(body["metadata"], json!({"resourceVersion": "7"}));
}

/// The job reconciler writes the condition before it starts or stops the job, as
/// Kueue's reconciler does, and only when waitForPodsReady is on.
#[test]
fn the_plan_keeps_the_condition_before_starting_the_job() {
    let job = JobState {
        suspended: true,
        pods_ready: Some(false),
        ..JobState::default()
    };
    assert_eq!(
        plan(&job, Some(&admitted(&[]))),
        Step::PodsReady(Readiness::WaitForStart)
    );
    let off = JobState {
        pods_ready: None,
        ..job.clone()
    };
    assert_eq!(plan(&off, Some(&admitted(&[]))), Step::Start);
    let written = admitted(&[cond("PodsReady", "False", "WaitForStart", "x")]);
    assert_eq!(plan(&job, Some(&written)), Step::Start);
}

/// At a timeout eviction the engine's count and requeueAt are written (Kueue's
/// `UpdateRequeueState`); when the backoff ends requeueAt is cleared and `Requeued`
/// turns true with `BackoffFinished`; written state is not written again.
#[test]
fn the_requeue_state_is_written_at_the_eviction_and_cleared_when_the_backoff_ends() {
    let wl = admitted(&[]);
    let at = 1_795_478_470_000; // 2026-11-24T00:01:10Z
    let body = requeue_state_patch(&wl, 1, Some(at), &now()).expect("a change");
    assert_eq!(
        body,
        json!({"metadata": {"resourceVersion": "7"},
               "status": {"requeueState": {"count": 1, "requeueAt": "2026-11-24T00:01:10Z"}}})
    );
    let written = workload(json!({
        "requeueState": {"count": 1, "requeueAt": "2026-11-24T00:01:10Z"},
        "conditions": [cond("Requeued", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout team/job-a-1b2c3")],
    }));
    assert_eq!(
        requeue_state_patch(&written, 1, Some(at + 400), &now()),
        None
    );
    let body = requeue_state_patch(&written, 1, None, &now()).expect("a change");
    assert_eq!(
        body["status"]["requeueState"],
        json!({"count": 1, "requeueAt": null})
    );
    assert_eq!(
        body["status"]["conditions"][0],
        json!({"type": "Requeued", "status": "True", "reason": "BackoffFinished",
               "message": "The workload backoff was finished", "observedGeneration": 1,
               "lastTransitionTime": "2026-11-24T00:00:10Z"})
    );
    let done = workload(json!({"requeueState": {"count": 1},
        "conditions": [cond("Requeued", "True", "BackoffFinished", "x")]}));
    assert_eq!(requeue_state_patch(&done, 1, None, &now()), None);
}

/// The requeue after a timeout leaves `Requeued` false (the backoff runs) and the
/// `PodsReady` condition back at `WaitForStart`; a deactivation clears the requeue
/// state, as Kueue does for an inactive Workload.
#[test]
fn requeue_and_deactivation_patches_follow_kueue() {
    let evicted = admitted(&[
        cond(
            "Evicted",
            "True",
            "PodsReadyTimeout",
            "Exceeded the PodsReady timeout team/job-a-1b2c3",
        ),
        cond(
            "PodsReady",
            "True",
            "Started",
            "All pods reached readiness and the workload is running",
        ),
    ]);
    let body = requeue_patch(&evicted, &now()).expect("a change");
    let conds = body["status"]["conditions"].as_array().expect("conditions");
    let find = |t: &str| conds.iter().find(|c| c["type"] == t).expect(t).clone();
    assert_eq!(find("Requeued")["status"], "False");
    assert_eq!(find("Requeued")["reason"], "PodsReadyTimeout");
    assert_eq!(find("PodsReady")["status"], "False");
    assert_eq!(find("PodsReady")["reason"], "WaitForStart");

    let mut with_state = admitted(&[]);
    with_state.status.as_mut().expect("status").requeue_state = Some(crate::api::RequeueState {
        count: Some(1),
        requeue_at: None,
    });
    let body = evict_patch(
        &with_state,
        crate::engine::pods_ready::REASON_DEACTIVATED_REQUEUING_LIMIT,
        None,
        crate::engine::pods_ready::MESSAGE_DEACTIVATED_REQUEUING_LIMIT,
        &now(),
    )
    .expect("a change");
    assert_eq!(body["status"]["requeueState"], Value::Null);
    assert!(body["status"].get("requeueState").is_some());
}
