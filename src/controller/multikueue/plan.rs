//! What one manager Workload under a MultiKueue check needs next, decided without I/O from
//! the Workload, its copies in the connected workers and the dispatcher's settings, in the
//! order of Kueue's `wlReconciler.reconcileGroup` (`pkg/controller/admissionchecks/
//! multikueue/workload.go`):
//!
//! 1. without quota, or finished: every copy goes;
//! 2. a copy finished: the job's status is mirrored and the Workload finished like it;
//! 3. a copy evicted in its worker: the check goes to `Retry`;
//! 4. copies whose spec no longer matches go;
//! 5. a copy admitted: the others go, the job is created there (or its status mirrored)
//!    and the check turns `Ready`; an admitting worker lost for longer than
//!    `workerLostTimeout` turns it to `Retry`;
//! 6. otherwise the dispatcher nominates workers, and each nominated worker gets a copy.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;

use crate::api::constants::{WORKLOAD_ADMITTED, WORKLOAD_EVICTED, WORKLOAD_FINISHED};
use crate::api::{AdmissionCheckState, CheckState, Workload};
use crate::config::multikueue::Dispatcher;

/// Kueue's `incrementalDispatcherRoundTimeout`: how long a round of nominations runs.
pub const INCREMENTAL_ROUND: Duration = Duration::from_secs(5 * 60);
/// Kueue's `WorkloadFinishedReasonOutOfSync`: a worker's copy no longer matched its job.
const OUT_OF_SYNC: &str = "OutOfSync";

/// One manager Workload and what is known of its copies.
pub struct Group<'a> {
    pub local: &'a Workload,
    /// The name of its MultiKueue check.
    pub check: &'a str,
    /// Connected workers, in the config's order, each with its copy when it has one.
    pub remotes: Vec<(String, Option<&'a Workload>)>,
    /// The config's workers that are not connected.
    pub unavailable: Vec<String>,
    /// How long the worker the Workload was admitted on has been unreachable.
    pub admitting_lost_for: Option<Duration>,
    pub worker_lost_timeout: Duration,
    /// Whether the owning job can be dispatched: why not, in Kueue's words.
    pub dispatchable: Result<(), String>,
    pub dispatcher: &'a Dispatcher,
    /// The config's workers, in its order (the incremental dispatcher follows it).
    pub config_order: &'a [String],
    /// Incremental dispatcher: how long ago the current round began.
    pub round_age: Option<Duration>,
}

/// What to do, in the order the fields are listed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    /// The check's new state and message.
    pub check: Option<(CheckState, String)>,
    /// `status.clusterName`, set with the check turning Ready.
    pub cluster_name: Option<String>,
    /// A new `status.nominatedClusterNames`.
    pub nominate: Option<Vec<String>>,
    /// The incremental dispatcher began a round.
    pub new_round: bool,
    /// Workers whose copies (the job first, then the Workload) are removed.
    pub remove: Vec<String>,
    /// Workers that get a copy of the Workload.
    pub create: Vec<String>,
    /// The worker whose job is created from the manager's, or mirrored back to it.
    pub sync_job: Option<String>,
    /// Finish the manager's Workload with this reason and message (after the mirror).
    pub finish: Option<(String, String)>,
    /// Look again after this long.
    pub requeue: Option<Duration>,
}

/// The check's state on `wl`.
pub fn check_state<'w>(wl: &'w Workload, check: &str) -> Option<&'w AdmissionCheckState> {
    wl.status
        .as_ref()?
        .admission_checks
        .iter()
        .find(|s| s.name == check)
}

fn true_condition<'w>(wl: &'w Workload, type_: &str) -> Option<&'w Condition> {
    wl.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Kueue's `bestMatchByCondition`: the copy that turned `type_` true first.
fn first_with<'a>(
    remotes: &[(String, Option<&'a Workload>)],
    type_: &str,
) -> Option<(String, &'a Condition)> {
    let mut best: Option<(String, &Condition)> = None;
    for (name, wl) in remotes {
        let Some(c) = wl.and_then(|w| true_condition(w, type_)) else {
            continue;
        };
        let earlier = |b: &Time| c.last_transition_time.0 < b.0;
        if best
            .as_ref()
            .is_none_or(|(_, b)| earlier(&b.last_transition_time))
        {
            best = Some((name.clone(), c));
        }
    }
    best
}

/// Kueue's `updateACS` message: the new one, then the state it leaves.
fn moved(message: &str, from: &str) -> String {
    format!("{message}, Previously: {from:?}")
}

/// Kueue's `isRemoteSpecOutOfSync`: the specs differ beyond their preemption gates.
fn out_of_sync(local: &Workload, remote: &Workload) -> bool {
    let spec = |w: &Workload| {
        let mut v = serde_json::to_value(&w.spec).unwrap_or(Value::Null);
        if let Some(m) = v.as_object_mut() {
            m.remove("preemptionGates");
        }
        v
    };
    spec(local) != spec(remote)
}

/// Decides the next steps for `g`.
pub fn plan(g: &Group<'_>) -> Plan {
    let mut p = Plan::default();
    let Some(acs) = check_state(g.local, g.check) else {
        return p;
    };
    let state = acs.state.as_str();
    if state == CheckState::Rejected.as_str() {
        return p;
    }
    if let Err(why) = &g.dispatchable {
        p.check = Some((CheckState::Rejected, moved(why, state)));
        return p;
    }
    let status = g.local.status.as_ref();
    let reserved = status.is_some_and(|s| s.admission.is_some());
    let finished = true_condition(g.local, WORKLOAD_FINISHED).is_some();
    let existing = |remotes: &[(String, Option<&Workload>)]| -> Vec<String> {
        remotes
            .iter()
            .filter(|(_, w)| w.is_some())
            .map(|(n, _)| n.clone())
            .collect()
    };
    if finished || !reserved {
        p.remove = existing(&g.remotes);
        if !g.unavailable.is_empty() {
            // Copies in unreachable workers go once they are back.
            p.requeue = Some(g.worker_lost_timeout);
        }
        return p;
    }
    let ready = state == CheckState::Ready.as_str();
    if let Some((worker, c)) = first_with(&g.remotes, WORKLOAD_FINISHED) {
        if c.reason == OUT_OF_SYNC {
            // A copy that lost track of its job has not run it: dispatched again.
            if ready {
                let why = format!(
                    "Remote workload on worker cluster {worker:?} is out of sync with its user \
                     job, resetting for re-dispatch"
                );
                p.check = Some((CheckState::Retry, moved(&why, state)));
            }
            return p;
        }
        p.sync_job = Some(worker);
        p.finish = Some((c.reason.clone(), c.message.clone()));
        return p;
    }
    let local_evicted = true_condition(g.local, WORKLOAD_EVICTED).is_some();
    if let Some((worker, _)) = first_with(&g.remotes, WORKLOAD_EVICTED) {
        if local_evicted {
            p.sync_job = Some(worker);
            return p;
        }
        if ready {
            let admitted_on = status
                .and_then(|s| s.cluster_name.clone())
                .unwrap_or_default();
            let why = format!(
                "Workload evicted on worker cluster: {admitted_on:?}, resetting for \
                 re-admission. Previously: {state:?}"
            );
            p.check = Some((CheckState::Retry, why));
            return p;
        }
    }
    let mut remotes = g.remotes.clone();
    for (name, wl) in &mut remotes {
        if wl.is_some_and(|w| out_of_sync(g.local, w)) {
            p.remove.push(name.clone());
            *wl = None;
        }
    }
    match first_with(&remotes, WORKLOAD_ADMITTED) {
        None if ready => {
            admitting_gone(g, state, &mut p);
            return p;
        }
        Some((worker, _)) => {
            for (name, wl) in &remotes {
                if wl.is_some() && *name != worker {
                    p.remove.push(name.clone());
                }
            }
            if local_evicted {
                // Evicted here: its copy there must not run on (Kueue deactivates it).
                p.remove.push(worker);
                return p;
            }
            p.sync_job = Some(worker.clone());
            if state != CheckState::Retry.as_str() && !ready {
                let why = format!("The workload was admitted on {worker:?}");
                p.check = Some((CheckState::Ready, why));
                p.cluster_name = Some(worker);
            }
            p.requeue = Some(g.worker_lost_timeout);
            return p;
        }
        None => {}
    }
    let nominating = state == CheckState::Pending.as_str()
        && status.is_none_or(|s| s.cluster_name.is_none())
        && !local_evicted
        && others_ready(g.local, g.check);
    if nominating {
        nominate(g, &remotes, &mut p);
    }
    p
}

/// Step 5's other half: the check is Ready, yet no copy is admitted.
fn admitting_gone(g: &Group<'_>, state: &str, p: &mut Plan) {
    let admitting = g
        .local
        .status
        .as_ref()
        .and_then(|s| s.cluster_name.clone())
        .unwrap_or_default();
    let why = if admitting.is_empty() {
        "Admission check is Ready but no admitting cluster is recorded; this is unexpected, \
         please report it"
    } else if g.unavailable.contains(&admitting) {
        let lost = g.admitting_lost_for.unwrap_or_default();
        if lost < g.worker_lost_timeout {
            // Likely still running there: waited for, up to the timeout.
            p.requeue = Some(g.worker_lost_timeout - lost);
            return;
        }
        "Admitting remote lost"
    } else {
        "Admitting remote no longer exists"
    };
    p.check = Some((CheckState::Retry, moved(why, state)));
}

/// Kueue's `allNonMKAdmissionChecksReady`: workers are nominated only once every other
/// check passed.
fn others_ready(wl: &Workload, check: &str) -> bool {
    wl.status.as_ref().is_none_or(|s| {
        s.admission_checks
            .iter()
            .all(|c| c.name == check || c.state == CheckState::Ready.as_str())
    })
}

/// Step 6: the nominated workers get copies, the others lose theirs.
fn nominate(g: &Group<'_>, remotes: &[(String, Option<&Workload>)], p: &mut Plan) {
    let current: Vec<String> = g
        .local
        .status
        .as_ref()
        .map(|s| s.nominated_cluster_names.clone())
        .unwrap_or_default();
    let nominated = match g.dispatcher {
        Dispatcher::AllAtOnce => {
            let mut all: Vec<String> = remotes.iter().map(|(n, _)| n.clone()).collect();
            all.sort();
            let mut have = current.clone();
            have.sort();
            if all != have {
                p.nominate = Some(all.clone());
            }
            all
        }
        Dispatcher::Incremental { step } => {
            let due = g.round_age.is_none_or(|age| age > INCREMENTAL_ROUND);
            let next: Vec<String> = g
                .config_order
                .iter()
                .filter(|n| !current.contains(n))
                .take(*step)
                .cloned()
                .collect();
            if due && !next.is_empty() {
                let mut all = current.clone();
                all.extend(next);
                p.nominate = Some(all.clone());
                p.new_round = true;
                p.requeue = Some(INCREMENTAL_ROUND);
                all
            } else {
                if let Some(age) = g.round_age.filter(|_| !next.is_empty()) {
                    p.requeue = Some(INCREMENTAL_ROUND.saturating_sub(age));
                }
                current
            }
        }
        Dispatcher::External(_) => current,
    };
    for (name, wl) in remotes {
        match (nominated.contains(name), wl.is_some()) {
            (true, false) => p.create.push(name.clone()),
            (false, true) => p.remove.push(name.clone()),
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
