//! A Workload's `status.admissionChecks`, as Kueue's workload controller keeps them: the
//! checks an admission needs added as `Pending`, every check reset to `Pending` when the
//! workload is evicted, `Admitted` true once quota is reserved and every check is
//! `Ready`, and the pod set updates Ready checks ask for. Pure; the writers use these.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

use super::conditions::set_condition;
use crate::api::constants::{
    REASON_ADMITTED, WORKLOAD_ADMITTED, WORKLOAD_EVICTED, WORKLOAD_FINISHED,
    WORKLOAD_QUOTA_RESERVED,
};
use crate::api::{AdmissionCheckState, CheckState, PodSetUpdate, Workload};

/// Kueue's `Admitted` message.
pub const MESSAGE_ADMITTED: &str = "The workload is admitted";
/// Kueue's `Admitted=False` message while a check is not Ready.
pub const MESSAGE_UNSATISFIED_CHECKS: &str = "The workload has not all checks ready";

/// Kueue's `syncAdmissionCheckConditions`: the states of the checks `names` (the ones an
/// admission needs), keeping the state of each already listed and adding the others as
/// `Pending`; checks no longer needed are dropped. Sorted by name.
pub fn sync_states(
    current: &[AdmissionCheckState],
    names: &[String],
    now: &Time,
) -> Vec<AdmissionCheckState> {
    let mut out: Vec<AdmissionCheckState> = names
        .iter()
        .map(|name| {
            current
                .iter()
                .find(|c| &c.name == name)
                .cloned()
                .unwrap_or_else(|| AdmissionCheckState {
                    name: name.clone(),
                    state: CheckState::Pending.as_str().into(),
                    last_transition_time: now.clone(),
                    message: String::new(),
                    requeue_after_seconds: None,
                    retry_count: None,
                    pod_set_updates: Vec::new(),
                })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Kueue's `resetChecksOnEviction`: every check not `Pending` goes back to `Pending`, a
/// `Retry` counting one more retry; `requeueAfterSeconds` is kept. `None` when none
/// changes.
pub fn reset_on_eviction(
    current: &[AdmissionCheckState],
    now: &Time,
) -> Option<Vec<AdmissionCheckState>> {
    let pending = CheckState::Pending.as_str();
    if current.iter().all(|c| c.state == pending) {
        return None;
    }
    Some(
        current
            .iter()
            .map(|c| {
                if c.state == pending {
                    return c.clone();
                }
                let retry_count = (c.state == CheckState::Retry.as_str())
                    .then(|| c.retry_count.unwrap_or(0).saturating_add(1));
                AdmissionCheckState {
                    name: c.name.clone(),
                    state: pending.into(),
                    last_transition_time: now.clone(),
                    message: format!("Reset to Pending after eviction. Previously: {}", c.state),
                    requeue_after_seconds: c.requeue_after_seconds,
                    retry_count,
                    pod_set_updates: Vec::new(),
                }
            })
            .collect(),
    )
}

/// Whether every check of the Workload is `Ready` (Kueue's `HasAllChecksReady`; true
/// with none).
pub fn all_ready(wl: &Workload) -> bool {
    wl.status.as_ref().is_none_or(|s| {
        s.admission_checks
            .iter()
            .all(|c| c.state == CheckState::Ready.as_str())
    })
}

/// Whether the Workload holds quota whose admission still waits for its checks: quota
/// reserved, not evicted, `Admitted` not true.
pub fn awaiting_checks(wl: &Workload) -> bool {
    wl.status.as_ref().is_some_and(|s| {
        s.admission.is_some()
            && s.is_condition_true(WORKLOAD_QUOTA_RESERVED)
            && !s.is_condition_true(WORKLOAD_ADMITTED)
            && !s.is_condition_true(WORKLOAD_EVICTED)
            && !s.is_condition_true(WORKLOAD_FINISHED)
    })
}

/// The status patch admitting a Workload whose checks all turned Ready (Kueue's
/// `SyncAdmittedCondition`), preconditioned on its resourceVersion; `None` unless it
/// [`awaiting_checks`] and they are [`all_ready`].
pub fn admitted_patch(wl: &Workload, now: &Time) -> Option<Value> {
    if !awaiting_checks(wl) || !all_ready(wl) {
        return None;
    }
    let mut conds: Vec<Condition> = wl
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    set_condition(
        &mut conds,
        WORKLOAD_ADMITTED,
        true,
        REASON_ADMITTED,
        MESSAGE_ADMITTED,
        wl.metadata.generation,
        now,
    );
    Some(json!({
        "metadata": {"resourceVersion": wl.metadata.resource_version},
        "status": {"conditions": conds},
    }))
}

/// The pod set updates of the Workload's Ready checks, in check order (Kueue applies
/// them on start; a restore takes them off with everything else admission added).
pub fn pod_set_updates(wl: &Workload) -> Vec<&PodSetUpdate> {
    wl.status
        .iter()
        .flat_map(|s| &s.admission_checks)
        .filter(|c| c.state == CheckState::Ready.as_str())
        .flat_map(|c| &c.pod_set_updates)
        .collect()
}

/// Records an admission its checks completed (`wl` as read before `Admitted` was written),
/// as Kueue's workload controller does then: the admitted counters, the wait since it was
/// created or requeued (Kueue's `QueuedWaitTime`) and the wait since its quota was reserved.
pub fn record_admission(metrics: &crate::telemetry::Metrics, wl: &Workload, now: &Time) {
    let Some(status) = wl.status.as_ref() else {
        return;
    };
    let Some(admission) = status.admission.as_ref() else {
        return;
    };
    let since = |t: &Time| (now.0.as_millisecond() - t.0.as_millisecond()).max(0) as f64 / 1000.0;
    let queued = status
        .condition(crate::api::constants::WORKLOAD_REQUEUED)
        .map(|c| &c.last_transition_time)
        .or(wl.metadata.creation_timestamp.as_ref());
    let reserved = status
        .condition(crate::api::constants::WORKLOAD_QUOTA_RESERVED)
        .map(|c| &c.last_transition_time);
    let class = wl.spec.priority_class_ref.as_ref().map(|c| c.name.as_str());
    metrics.record_admitted_by_checks(&crate::telemetry::CheckAdmission {
        cluster_queue: &admission.cluster_queue,
        priority_class: class.unwrap_or_default(),
        namespace: wl.metadata.namespace.as_deref().unwrap_or_default(),
        local_queue: wl.spec.queue_name.as_deref().unwrap_or_default(),
        queued_wait_s: queued.map_or(0.0, since),
        reserved_wait_s: reserved.map_or(0.0, since),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(s: &str) -> Time {
        serde_json::from_value(json!(s)).expect("time")
    }

    fn state(name: &str, state: &str) -> AdmissionCheckState {
        serde_json::from_value(json!({"name": name, "state": state,
            "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "m"}))
        .expect("state")
    }

    fn workload(status: Value) -> Workload {
        serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "7", "generation": 1},
            "spec": {"podSets": []},
            "status": status,
        }))
        .expect("workload")
    }

    #[test]
    fn an_admission_adds_missing_checks_as_pending_keeps_known_ones_and_drops_the_rest() {
        let now = time("2026-02-02T00:00:00Z");
        let current = [state("b", "Ready"), state("gone", "Pending")];
        let synced = sync_states(&current, &["c".into(), "b".into()], &now);
        let got: Vec<(&str, &str)> = synced
            .iter()
            .map(|c| (c.name.as_str(), c.state.as_str()))
            .collect();
        assert_eq!(got, [("b", "Ready"), ("c", "Pending")]);
        assert_eq!(synced[1].last_transition_time, now);
    }

    #[test]
    fn an_eviction_resets_checks_to_pending_counting_retries() {
        let now = time("2026-02-02T00:00:00Z");
        let mut retry = state("r", "Retry");
        retry.requeue_after_seconds = Some(30);
        retry.retry_count = Some(2);
        let reset = reset_on_eviction(&[state("p", "Pending"), retry, state("y", "Ready")], &now)
            .expect("changed");
        assert_eq!(reset[0], state("p", "Pending"));
        assert_eq!(reset[1].state, "Pending");
        assert_eq!(reset[1].retry_count, Some(3));
        assert_eq!(reset[1].requeue_after_seconds, Some(30));
        assert_eq!(
            reset[1].message,
            "Reset to Pending after eviction. Previously: Retry"
        );
        assert_eq!(reset[2].retry_count, None);
        assert_eq!(reset_on_eviction(&[state("p", "Pending")], &now), None);
    }

    #[test]
    fn admitted_turns_true_only_with_quota_reserved_and_every_check_ready() {
        let now = time("2026-02-02T00:00:00Z");
        let reserved = |checks: Value| {
            workload(json!({
                "admission": {"clusterQueue": "cq", "podSetAssignments": []},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Admitted", "status": "False", "reason": "UnsatisfiedChecks", "message": MESSAGE_UNSATISFIED_CHECKS, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "admissionChecks": checks,
            }))
        };
        let waiting = reserved(json!([
            {"name": "a", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""},
            {"name": "b", "state": "Pending", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]));
        assert_eq!(admitted_patch(&waiting, &now), None);
        let ready = reserved(json!([
            {"name": "a", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "",
             "podSetUpdates": [{"name": "main", "nodeSelector": {"pool": "p1"}}]}]));
        let patch = admitted_patch(&ready, &now).expect("admits");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let admitted = &patch["status"]["conditions"][1];
        assert_eq!(
            (admitted["type"].as_str(), admitted["status"].as_str()),
            (Some("Admitted"), Some("True"))
        );
        assert_eq!(pod_set_updates(&ready)[0].node_selector["pool"], "p1");
        assert!(pod_set_updates(&waiting).is_empty());
        // Not reserved: nothing to admit.
        assert_eq!(admitted_patch(&workload(json!({})), &now), None);
    }

    #[test]
    fn an_admission_by_checks_counts_as_admitted_with_kueues_two_waits() {
        let mut wl = workload(json!({
            "admission": {"clusterQueue": "cq", "podSetAssignments": []},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                "message": "", "lastTransitionTime": "2026-02-02T00:00:10Z"}],
        }));
        wl.metadata.creation_timestamp = Some(time("2026-02-02T00:00:00Z"));
        wl.spec.queue_name = Some("lq".into());
        let metrics = crate::telemetry::Metrics::new();
        record_admission(&metrics, &wl, &time("2026-02-02T00:00:25Z"));
        let text = metrics.encode();
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
                .to_string()
        };
        assert!(line("kueue_admitted_workloads_total{cluster_queue=\"cq\"").ends_with(" 1"));
        // 25 s since it was created; 15 s since its quota was reserved.
        assert!(
            line("kueue_admission_wait_time_seconds_sum{cluster_queue=\"cq\"").ends_with(" 25.0")
        );
        assert!(
            line("kueue_admission_checks_wait_time_seconds_sum{cluster_queue=\"cq\"")
                .ends_with(" 15.0")
        );
        assert!(
            line("kueue_local_queue_admission_checks_wait_time_seconds_sum{name=\"lq\"")
                .ends_with(" 15.0")
        );
    }
}
