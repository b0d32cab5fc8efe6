//! Admission checks, as Kueue's cache and workload controller treat them: a ClusterQueue
//! is inactive while a check it names is missing or not `Active`; an admission needs the
//! checks whose flavors it was assigned; and a check's state acts on a workload holding
//! quota: `Retry` evicts it (the quota goes back) and keeps it out of its queue until the
//! check's `requeueAfterSeconds` have passed, `Rejected` deactivates it.
//!
//! `Ready` is not the engine's business: quota is reserved either way, and the shell
//! turns `Admitted` true once every check is Ready (Kueue's `SyncAdmittedCondition`).

use std::collections::BTreeMap;

use super::queue::WlId;
use super::state::{CqId, Engine, WlState};
use crate::api::constants::{
    ADMISSION_CHECK_ACTIVE, REASON_ADMISSION_CHECK, REASON_DEACTIVATED_ADMISSION_CHECK,
    WORKLOAD_EVICTED,
};
use crate::api::{self, AdmissionCheckState, CheckState};

/// One AdmissionCheck of a ClusterQueue and the flavors it runs for (empty: all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckRule {
    pub name: String,
    pub on_flavors: Vec<String>,
}

/// The engine's view of the AdmissionCheck objects and of the workloads a `Retry` keeps
/// out of their queues.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChecksState {
    /// AdmissionCheck name -> whether its controller reports it Active.
    pub active: BTreeMap<String, bool>,
    /// Workload -> when its Retry delay ends.
    holds: BTreeMap<WlId, super::Millis>,
    /// When Retry delays end, and whose (checked against `holds` when due).
    ends: BTreeMap<super::Millis, Vec<WlId>>,
}

impl ChecksState {
    /// The earliest end of a Retry delay.
    pub(crate) fn next_wakeup(&self) -> Option<super::Millis> {
        self.ends.keys().next().copied()
    }

    /// Forgets a deleted workload (its slot id may be reused).
    pub(crate) fn forget(&mut self, id: WlId) {
        self.holds.remove(&id);
    }
}

/// Why a ClusterQueue's checks keep it inactive: Kueue's reason and the part of its
/// condition message after "Can't admit new workloads: " (without the final period).
pub(crate) fn blocking(
    rules: &[CheckRule],
    known: &BTreeMap<String, bool>,
) -> Option<(&'static str, String)> {
    let mut missing: Vec<&str> = Vec::new();
    let mut inactive: Vec<&str> = Vec::new();
    for r in rules {
        match known.get(&r.name) {
            None => missing.push(&r.name),
            Some(false) => inactive.push(&r.name),
            Some(true) => {}
        }
    }
    // Kueue sorts both lists (its checks are a map) and joins them with ",".
    missing.sort_unstable();
    inactive.sort_unstable();
    let mut reasons = Vec::new();
    let mut parts = Vec::new();
    if !missing.is_empty() {
        reasons.push(api::constants::CQ_REASON_ADMISSION_CHECK_NOT_FOUND);
        parts.push(format!(
            "references missing AdmissionCheck(s): {}",
            missing.join(",")
        ));
    }
    if !inactive.is_empty() {
        reasons.push(api::constants::CQ_REASON_ADMISSION_CHECK_INACTIVE);
        parts.push(format!(
            "references inactive AdmissionCheck(s): {}",
            inactive.join(",")
        ));
    }
    reasons.first().map(|r| (*r, parts.join(", ")))
}

/// The checks an admission needs (Kueue's `admissionChecksForAdmission`): those for every
/// flavor, and those whose `onFlavors` meet a flavor the admission assigned; sorted.
pub(crate) fn for_admission(rules: &[CheckRule], admission: &api::Admission) -> Vec<String> {
    let mut out: Vec<String> = rules
        .iter()
        .filter(|r| {
            r.on_flavors.is_empty()
                || admission
                    .pod_set_assignments
                    .iter()
                    .flat_map(|psa| psa.flavors.values())
                    .any(|f| r.on_flavors.contains(f))
        })
        .map(|r| r.name.clone())
        .collect();
    out.sort();
    out
}

/// Kueue's `buildAdmissionChecksMessage`: `AdmissionCheck(s) in <state> state: "a" (msg); "b"`.
fn checks_message(checks: &[&AdmissionCheckState], state: CheckState) -> String {
    let mut sorted = checks.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let parts: Vec<String> = sorted
        .iter()
        .map(|c| {
            if c.message.is_empty() {
                format!("{:?}", c.name)
            } else {
                format!("{:?} ({})", c.name, c.message)
            }
        })
        .collect();
    let noun = if sorted.len() > 1 {
        "AdmissionChecks"
    } else {
        "AdmissionCheck"
    };
    format!("{noun} in {} state: {}", state.as_str(), parts.join("; "))
}

/// When a workload whose checks are in `Retry` may be queued again (Kueue's
/// `GetMaxRetryTime`): the latest `lastTransitionTime + requeueAfterSeconds`.
fn retry_until(checks: &[&AdmissionCheckState]) -> Option<super::Millis> {
    checks
        .iter()
        .filter_map(|c| {
            let after = i64::from(c.requeue_after_seconds?);
            Some(
                c.last_transition_time
                    .0
                    .as_millisecond()
                    .saturating_add(after.saturating_mul(1000)),
            )
        })
        .max()
}

impl Engine {
    /// An AdmissionCheck appeared or changed: the ClusterQueues naming it are looked at
    /// again when whether it exists or is Active changed.
    pub(crate) fn admission_check_upserted(&mut self, ac: &api::AdmissionCheck) {
        let name = ac.metadata.name.clone().unwrap_or_default();
        let active = ac.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == ADMISSION_CHECK_ACTIVE && c.status == "True")
        });
        if self.checks.active.insert(name, active) != Some(active) {
            self.rebuild();
        }
    }

    /// An AdmissionCheck was deleted: the ClusterQueues naming it go inactive.
    pub(crate) fn admission_check_deleted(&mut self, name: &str) {
        if self.checks.active.remove(name).is_some() {
            self.rebuild();
        }
    }

    /// The checks an admission to ClusterQueue `cq` needs.
    pub(crate) fn checks_for(&self, cq: CqId, admission: &api::Admission) -> Vec<String> {
        for_admission(&self.cqs[cq as usize].spec.admission_checks, admission)
    }

    /// What an upserted Workload's check states say while it holds the engine's admission
    /// (a Workload without its admission, or already evicted, describes another moment):
    /// a Rejected check deactivates it, a Retry evicts it and holds it out of its queue
    /// until the latest retry time, as Kueue's workload controller does.
    pub(crate) fn checks_seen(&mut self, id: WlId, wl: &api::Workload) {
        let Some(status) = wl.status.as_ref() else {
            return;
        };
        if status.admission.is_none()
            || status.is_condition_true(WORKLOAD_EVICTED)
            || !matches!(self.wl(id).state, WlState::Admitted(_))
        {
            return;
        }
        let in_state = |s: CheckState| -> Vec<&AdmissionCheckState> {
            status
                .admission_checks
                .iter()
                .filter(|c| CheckState::parse(&c.state) == Some(s))
                .collect()
        };
        let rejected = in_state(CheckState::Rejected);
        if !rejected.is_empty() {
            let message = format!(
                "The workload is deactivated due to {}",
                checks_message(&rejected, CheckState::Rejected)
            );
            self.wl_mut(id).spec.active = false;
            self.evict(id, REASON_DEACTIVATED_ADMISSION_CHECK, &message);
            return;
        }
        let retry = in_state(CheckState::Retry);
        if retry.is_empty() {
            return;
        }
        if let Some(at) = retry_until(&retry).filter(|&at| at > self.now) {
            self.checks.holds.insert(id, at);
        }
        let message = format!(
            "Evicted due to {}",
            checks_message(&retry, CheckState::Retry)
        );
        self.evict(id, REASON_ADMISSION_CHECK, &message);
    }

    /// Holds back a workload whose Retry delay has not ended (it is queued when it ends).
    /// `true` when held.
    pub(crate) fn checks_hold(&mut self, id: WlId) -> bool {
        let Some(&at) = self.checks.holds.get(&id) else {
            return false;
        };
        if at <= self.now {
            self.checks.holds.remove(&id);
            return false;
        }
        self.checks.ends.entry(at).or_default().push(id);
        true
    }

    /// Queues the workloads whose Retry delay ended by `now`.
    pub(crate) fn checks_tick(&mut self, now: super::Millis) {
        while let Some(entry) = self.checks.ends.first_entry() {
            if *entry.key() > now {
                break;
            }
            let (at, ids) = entry.remove_entry();
            for id in ids {
                if self.checks.holds.get(&id) != Some(&at) {
                    continue;
                }
                self.checks.holds.remove(&id);
                let waiting = self
                    .wls
                    .get(id as usize)
                    .and_then(|w| w.as_ref())
                    .is_some_and(|w| matches!(w.state, WlState::Pending) && w.cq.is_none());
                if waiting {
                    self.enqueue(id);
                }
            }
        }
    }
}
