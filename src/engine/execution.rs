//! Kueue's `spec.maximumExecutionTimeSeconds`: how long a workload may be admitted,
//! summed over all its admissions (Kueue's workload controller,
//! `reconcileMaxExecutionTime`, and `SyncAdmittedCondition` in pkg/workload).
//!
//! The time of the admissions that ended is `status.accumulatedPastExecutionTimeSeconds`
//! (`accumulatedPastExexcutionTimeSeconds` in v1beta1): each requeue adds the whole
//! seconds the ended admission lasted, and an admission's deadline is its start plus
//! the maximum minus that sum. The engine keeps its own copy, so a re-admission right
//! after a requeue uses the new sum before the shell's status write comes back; the
//! API object's value replaces it whenever the object is current.

use super::state::{Engine, WlState};
use super::{Decision, Millis, WorkloadKey};
use crate::api;
use crate::api::constants::{MESSAGE_DEACTIVATED_MAX_EXECUTION, REASON_DEACTIVATED_MAX_EXECUTION};

/// What an ended admission adds to the accumulated time: whole seconds, as Kueue's
/// `int32(now.Sub(admitted).Seconds())` truncates them.
pub(crate) fn whole_seconds(from: Millis, to: Millis) -> Millis {
    (to.saturating_sub(from).max(0) / 1000) * 1000
}

impl Engine {
    /// The deadline of an admission whose execution time counts from `started`,
    /// registered for [`Engine::expire`]; `None` without a maximum.
    pub(crate) fn track_deadline(
        &mut self,
        id: super::queue::WlId,
        started: Millis,
    ) -> Option<Millis> {
        let spec = &self.wl(id).spec;
        let max = spec.max_execution?;
        let due = started.saturating_add(max.saturating_sub(spec.past_execution));
        self.expiries.entry(due).or_default().push(id);
        Some(due)
    }

    /// Forgets the deadline of an admission that ended or moved, so that
    /// [`Engine::next_wakeup`] does not ask for a cycle nobody needs.
    pub(crate) fn untrack_deadline(&mut self, id: super::queue::WlId, due: Option<Millis>) {
        let Some(due) = due else {
            return;
        };
        if let Some(ids) = self.expiries.get_mut(&due) {
            ids.retain(|&i| i != id);
            if ids.is_empty() {
                self.expiries.remove(&due);
            }
        }
    }

    /// Deactivates the admitted workloads whose maximum execution time has run out
    /// by `now`, as Kueue's workload controller does: `spec.active` becomes false and
    /// the workload is evicted (Kueue's reason and message); it keeps its quota until
    /// its pods are gone. Kueue also clears the accumulated time then, so the
    /// requeue leaves only the last admission's time in it.
    pub(crate) fn expire(&mut self, now: Millis) {
        while let Some(entry) = self.expiries.first_entry() {
            if *entry.key() > now {
                break;
            }
            let (due, ids) = entry.remove_entry();
            for id in ids {
                let Some(w) = self.wls.get(id as usize).and_then(|w| w.as_ref()) else {
                    continue;
                };
                // Only the admission this entry was made for: a readmitted workload, or
                // one whose accumulated time changed, has an entry of its own.
                if !matches!(&w.state, WlState::Admitted(a) if a.deadline == Some(due)) {
                    continue;
                }
                let w = self.wl_mut(id);
                w.spec.active = false;
                w.spec.past_execution = 0;
                self.evict(
                    id,
                    REASON_DEACTIVATED_MAX_EXECUTION,
                    MESSAGE_DEACTIVATED_MAX_EXECUTION,
                );
            }
        }
    }

    /// On a requeue (the evicted workload's pods are gone), adds the time its
    /// admission lasted to its accumulated execution time, as Kueue's
    /// `SyncAdmittedCondition` does when `Admitted` turns false.
    pub(crate) fn accumulate_execution(&mut self, key: &WorkloadKey) {
        let Some(&id) = self.wl_index.get(key) else {
            return;
        };
        let now = self.now;
        let w = self.wl_mut(id);
        if let WlState::Admitted(a) | WlState::Evicting(a) = &w.state {
            let ran = whole_seconds(a.started, now);
            w.spec.past_execution = w.spec.past_execution.saturating_add(ran);
        }
    }

    /// Takes the accumulated time of an admitted workload from its API object, which
    /// is the truth when it describes the current admission (it holds an admission
    /// and is not evicted: an older object would undo a requeue the engine applied),
    /// and moves the deadline if it changed.
    pub(crate) fn refresh_past_execution(
        &mut self,
        id: super::queue::WlId,
        wl: &api::Workload,
        spec: &super::model::WorkloadSpec,
    ) {
        let current = wl.status.as_ref().is_some_and(|s| {
            s.admission.is_some() && !s.is_condition_true(api::constants::WORKLOAD_EVICTED)
        });
        if !current || self.wl(id).spec.past_execution == spec.past_execution {
            return;
        }
        self.wl_mut(id).spec.past_execution = spec.past_execution;
        let WlState::Admitted(a) = &self.wl(id).state else {
            return;
        };
        let (started, old) = (a.started, a.deadline);
        self.untrack_deadline(id, old);
        let deadline = self.track_deadline(id, started);
        if let WlState::Admitted(a) = &mut self.wl_mut(id).state {
            a.deadline = deadline;
        }
    }

    /// A pending workload whose accumulated time already reaches its maximum would
    /// only be admitted to be deactivated at once (what Kueue does); it is
    /// deactivated without the admission. The shell writes `spec.active: false` for
    /// the `Evict` decision, and the workload then waits as `Inactive`.
    pub(crate) fn deactivate_if_out_of_time(&mut self, id: super::queue::WlId) {
        let spec = &self.wl(id).spec;
        let out_of_time = spec.active
            && matches!(self.wl(id).state, WlState::Pending)
            && spec.max_execution.is_some_and(|m| spec.past_execution >= m);
        if !out_of_time {
            return;
        }
        let w = self.wl_mut(id);
        w.spec.active = false;
        w.spec.past_execution = 0;
        let workload = w.spec.key.clone();
        self.outbox.push(Decision::Evict {
            workload,
            reason: REASON_DEACTIVATED_MAX_EXECUTION.into(),
            message: MESSAGE_DEACTIVATED_MAX_EXECUTION.into(),
        });
    }
}

#[cfg(test)]
mod tests;
