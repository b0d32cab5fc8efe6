//! Workload conditions, set as apimachinery's `SetStatusCondition` sets them: the one rule
//! every writer of Workload status shares (the actuators and the waitForPodsReady rules).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Kubernetes' limit on a condition message.
pub const MAX_CONDITION_MESSAGE: usize = 32 * 1024;

/// Sets a condition like apimachinery's `SetStatusCondition`: the transition time moves
/// only when the status changes. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    let status = if status { "True" } else { "False" };
    let mut message = message.to_string();
    if message.len() > MAX_CONDITION_MESSAGE {
        let mut cut = MAX_CONDITION_MESSAGE - 3;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...");
    }
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let changed = c.status != status
            || c.reason != reason
            || c.message != message
            || c.observed_generation != generation;
        if c.status != status {
            c.last_transition_time = now.clone();
        }
        c.status = status.to_string();
        c.reason = reason.to_string();
        c.message = message;
        c.observed_generation = generation;
        return changed;
    }
    conditions.push(Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time: now.clone(),
    });
    true
}

/// Ends a waitForPodsReady backoff in `conditions`: a `Requeued` false for
/// `PodsReadyTimeout` turns true with Kueue's `BackoffFinished`. Returns whether it was
/// waiting.
pub fn end_backoff(conditions: &mut Vec<Condition>, wl: &crate::api::Workload, now: &Time) -> bool {
    use crate::api::constants::{REASON_PODS_READY_TIMEOUT, WORKLOAD_REQUEUED};
    use crate::engine::pods_ready::{MESSAGE_BACKOFF_FINISHED, REASON_BACKOFF_FINISHED};
    let waiting = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(WORKLOAD_REQUEUED))
        .is_some_and(|c| c.status == "False" && c.reason == REASON_PODS_READY_TIMEOUT);
    if waiting {
        set_condition(
            conditions,
            WORKLOAD_REQUEUED,
            true,
            REASON_BACKOFF_FINISHED,
            MESSAGE_BACKOFF_FINISHED,
            wl.metadata.generation,
            now,
        );
    }
    waiting
}
