//! waitForPodsReady's Workload writes: the `PodsReady` condition the job reconciler
//! keeps from the job's status (Kueue's `generatePodsReadyCondition` in
//! pkg/controller/jobframework/reconciler.go), and `status.requeueState` with the
//! `Requeued` condition once a backoff ends (Kueue's workload controller). The
//! decisions (timeouts, backoffs, deactivation) are the engine's
//! ([`crate::engine::pods_ready`]); these are pure patch builders.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::conditions::set_condition;
use crate::api::Workload;
use crate::api::constants::{WORKLOAD_ADMITTED, WORKLOAD_PODS_READY};
use crate::engine::Millis;
use crate::engine::pods_ready::{REASON_PODS_READY_TIMEOUT, Readiness};

/// The `PodsReady` condition a Workload should carry when its job's pods are `ready` or
/// not; `None` when it already carries that status and reason (Kueue's
/// `HasConditionWithTypeAndReason`: nothing to write).
pub fn condition(wl: &Workload, ready: bool) -> Option<Readiness> {
    let status = wl.status.as_ref();
    let admitted = status.is_some_and(|s| s.is_condition_true(WORKLOAD_ADMITTED));
    let current = status.and_then(|s| s.condition(WORKLOAD_PODS_READY));
    let prev = current.map(|c| Readiness::from_condition(&c.status, &c.reason));
    let next = Readiness::next(prev, admitted, ready);
    let same = current
        .is_some_and(|c| (c.status == "True") == next.is_ready() && c.reason == next.reason());
    (!same).then_some(next)
}

/// The patch that sets the `PodsReady` condition to `readiness`; `None` when unchanged.
pub fn condition_patch(wl: &Workload, readiness: Readiness, now: &Time) -> Option<Value> {
    let mut conds = wl
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    set_condition(
        &mut conds,
        WORKLOAD_PODS_READY,
        readiness.is_ready(),
        readiness.reason(),
        readiness.message(),
        wl.metadata.generation,
        now,
    )
    .then(|| {
        json!({
            "metadata": {"resourceVersion": wl.metadata.resource_version},
            "status": {"conditions": conds},
        })
    })
}

/// The patch for the engine's requeue state: at a `PodsReadyTimeout` eviction the count
/// and `requeueAt` (Kueue's `UpdateRequeueState`); once the backoff ended
/// (`requeue_at: None`), `requeueAt` cleared and `Requeued` true with Kueue's
/// `BackoffFinished` (when it was false for the timeout, as Kueue flips it). `None` when
/// the Workload already says so.
pub fn requeue_state_patch(
    wl: &Workload,
    count: u32,
    requeue_at: Option<Millis>,
    now: &Time,
) -> Option<Value> {
    let status = wl.status.as_ref();
    let state = status.and_then(|s| s.requeue_state.as_ref());
    let written_count = state.and_then(|s| s.count).unwrap_or(0);
    let written_at = state.and_then(|s| s.requeue_at.as_ref());
    let meta = json!({"resourceVersion": wl.metadata.resource_version});
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    match requeue_at {
        Some(at) => {
            let at = Time(k8s_openapi::jiff::Timestamp::from_millisecond(at).ok()?);
            // Conditions keep whole seconds, so does the API's requeueAt.
            let same_at = written_at.is_some_and(|t| t.0.as_second() == at.0.as_second());
            if written_count == count && same_at {
                return None;
            }
            Some(json!({
                "metadata": meta,
                "status": {"requeueState": {"count": count, "requeueAt": at}},
            }))
        }
        None => {
            let mut conds = status.map(|s| s.conditions.clone()).unwrap_or_default();
            let waiting = super::conditions::end_backoff(&mut conds, wl, now);
            if !waiting && written_at.is_none() {
                return None;
            }
            Some(json!({
                "metadata": meta,
                "status": {"requeueState": {"count": count.max(written_count), "requeueAt": null}, "conditions": conds},
            }))
        }
    }
}

#[cfg(test)]
mod tests;

/// Whether a requeue after an eviction for `reason` leaves `Requeued` false: the
/// workload waits for its backoff (`PodsReadyTimeout`, turned true with
/// `BackoffFinished` when it ends) or was deactivated. Kueue's job reconciler sets it
/// true only after a preemption or a node failure.
pub fn requeue_waits(reason: &str) -> bool {
    reason == REASON_PODS_READY_TIMEOUT
        || reason == crate::engine::pods_ready::REASON_DEACTIVATED_REQUEUING_LIMIT
}

/// Once the admission is cleared, a `PodsReady` condition goes back to waiting for the
/// start, as Kueue's job reconciler writes it for a workload that is not admitted:
/// the next admission must not inherit the last one's readiness.
pub fn reset_on_requeue(
    conds: &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    generation: Option<i64>,
    now: &Time,
) {
    if conds.iter().any(|c| c.type_ == WORKLOAD_PODS_READY) {
        let r = Readiness::WaitForStart;
        set_condition(
            conds,
            WORKLOAD_PODS_READY,
            false,
            r.reason(),
            r.message(),
            generation,
            now,
        );
    }
}
