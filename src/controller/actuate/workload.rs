//! Workload status writes: one merge patch per decision, preconditioned on the
//! resourceVersion the patch was computed from, with Kueue's conditions, reasons and
//! messages. The pure `*_patch` builders decide whether anything needs writing at all.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

use super::events::{Recorder, workload_ref};
use super::{Attempt, WriteError, Writer, is_not_found};
use crate::api::constants::{
    REASON_ADMITTED, REASON_DEACTIVATED_MAX_EXECUTION, REASON_EVICTED_BY_PREEMPTION,
    REASON_NO_RESERVATION, REASON_PENDING, REASON_QUOTA_RESERVED, REASON_UNSATISFIED_CHECKS,
    WORKLOAD_ADMITTED, WORKLOAD_EVICTED, WORKLOAD_FINISHED, WORKLOAD_PREEMPTED,
    WORKLOAD_QUOTA_RESERVED, WORKLOAD_REQUEUED,
};
use crate::api::{Admission, Workload};
use crate::controller::checks;
use crate::controller::translate::decode;
use crate::controller::watch::{Kind, Stores};
use crate::engine::WorkloadKey;

/// Field manager of every kuota write.
pub const FIELD_MANAGER: &str = "kuota";

pub use crate::controller::conditions::set_condition;

/// Kueue's `resetActiveCondition`: a true condition turns false with "Previously: ...".
fn reset_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    reason: &str,
    gen_: Option<i64>,
    now: &Time,
) {
    let prev = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.message.clone());
    if let Some(prev) = prev {
        set_condition(
            conditions,
            type_,
            false,
            reason,
            &format!("Previously: {prev}"),
            gen_,
            now,
        );
    }
}

fn conditions_of(wl: &Workload) -> Vec<Condition> {
    wl.status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn is_true(wl: &Workload, type_: &str) -> bool {
    wl.status
        .as_ref()
        .is_some_and(|s| s.is_condition_true(type_))
}

fn has_admission(wl: &Workload) -> bool {
    wl.status.as_ref().is_some_and(|s| s.admission.is_some())
}

pub(crate) fn patch_body(wl: &Workload, status: Value) -> Value {
    json!({
        "metadata": {"resourceVersion": wl.metadata.resource_version},
        "status": status,
    })
}

/// The admission patch: `status.admission` with QuotaReserved and Admitted true, and
/// Evicted/Preempted reset as Kueue's `SetQuotaReservation` does. `None` when the
/// Workload already holds an admission or is finished (never admit twice). With
/// admission `checks`, only the quota is reserved: `Admitted` stays false
/// (`UnsatisfiedChecks`) and each check is listed in `status.admissionChecks`, `Pending`
/// unless its controller already set a state.
pub fn admit_patch(
    wl: &Workload,
    admission: &Admission,
    checks: &[String],
    now: &Time,
) -> Option<Value> {
    if has_admission(wl) || is_true(wl, WORKLOAD_FINISHED) {
        return None;
    }
    let gen_ = wl.metadata.generation;
    let mut conds = conditions_of(wl);
    let cq = &admission.cluster_queue;
    set_condition(
        &mut conds,
        WORKLOAD_QUOTA_RESERVED,
        true,
        REASON_QUOTA_RESERVED,
        &format!("Quota reserved in ClusterQueue {cq}"),
        gen_,
        now,
    );
    reset_condition(
        &mut conds,
        WORKLOAD_EVICTED,
        REASON_QUOTA_RESERVED,
        gen_,
        now,
    );
    reset_condition(
        &mut conds,
        WORKLOAD_PREEMPTED,
        REASON_QUOTA_RESERVED,
        gen_,
        now,
    );
    let current = wl
        .status
        .as_ref()
        .map(|s| s.admission_checks.as_slice())
        .unwrap_or_default();
    let states = checks::sync_states(current, checks, now);
    let ready = states
        .iter()
        .all(|c| c.state == crate::api::CheckState::Ready.as_str());
    if ready {
        set_condition(
            &mut conds,
            WORKLOAD_ADMITTED,
            true,
            REASON_ADMITTED,
            checks::MESSAGE_ADMITTED,
            gen_,
            now,
        );
    } else {
        set_condition(
            &mut conds,
            WORKLOAD_ADMITTED,
            false,
            REASON_UNSATISFIED_CHECKS,
            checks::MESSAGE_UNSATISFIED_CHECKS,
            gen_,
            now,
        );
    }
    let mut status = json!({"admission": admission});
    if !states.is_empty() {
        status["admissionChecks"] = json!(states);
    } else if !current.is_empty() {
        status["admissionChecks"] = Value::Null;
    }
    if let Some(cleared) = backoff_ended(wl, &mut conds, now) {
        status["requeueState"] = cleared;
    }
    status["conditions"] = json!(conds);
    Some(patch_body(wl, status))
}

/// Deletes Workload `ns/name`, on the condition of its `uid` when given; counted when it
/// lands. `Ok(false)`: it was already gone.
pub async fn delete_workload(
    writer: &Writer,
    ns: &str,
    name: &str,
    uid: Option<String>,
) -> Result<bool, kube::Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(writer.client.clone(), ns, &Kind::Workload.api_resource());
    let dp = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => {
            writer.wrote("Workload");
            Ok(true)
        }
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Seconds the Workload waited for this admission, as Kueue's `QueuedWaitTime`: since
/// its last `Requeued` transition, or since it was created (rounded, as Kueue's `%.0f`).
pub fn queued_wait_seconds(wl: &Workload, now: &Time) -> i64 {
    let requeued = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(WORKLOAD_REQUEUED))
        .map(|c| &c.last_transition_time);
    let Some(queued) = requeued.or(wl.metadata.creation_timestamp.as_ref()) else {
        return 0;
    };
    let seconds = now.0.duration_since(queued.0).as_secs_f64().round();
    // A creation stamped after `now` (another clock) reads as no wait.
    if seconds > 0.0 { seconds as i64 } else { 0 }
}

/// An admission ends a waitForPodsReady backoff: `Requeued` flips to true with Kueue's
/// `BackoffFinished` and `requeueAt` is cleared, in the admission's own write. Kueue
/// writes these just before the workload is queued again; written apart, a reader could
/// see the workload admitted while its backoff still seemed to run. Returns the
/// `requeueState` to write, if `requeueAt` was set.
fn backoff_ended(wl: &Workload, conds: &mut Vec<Condition>, now: &Time) -> Option<Value> {
    crate::controller::conditions::end_backoff(conds, wl, now);
    let state = wl.status.as_ref()?.requeue_state.as_ref()?;
    state.requeue_at.as_ref()?;
    Some(json!({"count": state.count, "requeueAt": null}))
}

/// The pending patch: QuotaReserved false with the engine's reason and message. `None`
/// when the Workload already says exactly that (an unchanged re-evaluation writes
/// nothing), holds an admission, or is finished.
pub fn pending_patch(wl: &Workload, reason: &str, message: &str, now: &Time) -> Option<Value> {
    if has_admission(wl) || is_true(wl, WORKLOAD_FINISHED) {
        return None;
    }
    let mut conds = conditions_of(wl);
    set_condition(
        &mut conds,
        WORKLOAD_QUOTA_RESERVED,
        false,
        reason,
        message,
        wl.metadata.generation,
        now,
    )
    .then(|| patch_body(wl, json!({"conditions": conds})))
}

/// The reason of a Workload's `QuotaReserved=False` condition, if it has one.
fn pending_reason(wl: &Workload) -> Option<&str> {
    wl.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == WORKLOAD_QUOTA_RESERVED && c.status == "False")
        .map(|c| c.reason.as_str())
}

/// Whether an eviction reason is a deactivation (`Deactivated`, or Kueue's
/// `DeactivatedDueTo<cause>`): the Workload gets `spec.active: false` first.
pub fn is_deactivation(reason: &str) -> bool {
    reason
        .strip_prefix(REASON_DEACTIVATED)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("DueTo"))
}

/// The eviction patch: Evicted true (reason `Preempted` for a preemption), and for a
/// preemption Preempted true with Kueue's preemption reason. `None` when already
/// evicted, or not admitted (a deactivation is written either way, as Kueue evicts
/// every inactive Workload). A workload out of execution time also has its
/// accumulated time cleared, as Kueue's `reconcileMaxExecutionTime` does: the requeue
/// then leaves only the last admission in it, so a reactivation gets a fresh budget
/// less that admission. That holds for one still `Evicted` from an earlier eviction
/// too (requeued right at its deadline): the condition then says why it is inactive.
pub fn evict_patch(
    wl: &Workload,
    evicted_reason: &str,
    preempted_reason: Option<&str>,
    message: &str,
    now: &Time,
) -> Option<Value> {
    let out_of_time = evicted_reason == REASON_DEACTIVATED_MAX_EXECUTION;
    let admitted_or_deactivated = has_admission(wl) || is_deactivation(evicted_reason);
    let evicted = is_true(wl, WORKLOAD_EVICTED);
    if !admitted_or_deactivated || (evicted && !out_of_time) || is_true(wl, WORKLOAD_FINISHED) {
        return None;
    }
    let gen_ = wl.metadata.generation;
    let mut conds = conditions_of(wl);
    let changed = set_condition(
        &mut conds,
        WORKLOAD_EVICTED,
        true,
        evicted_reason,
        message,
        gen_,
        now,
    );
    if let Some(reason) = preempted_reason {
        set_condition(
            &mut conds,
            WORKLOAD_PREEMPTED,
            true,
            reason,
            message,
            gen_,
            now,
        );
    }
    let mut status = json!({"conditions": conds});
    // Kueue's `prepareForEviction` puts every check back to Pending in the same write.
    if let Some(reset) = wl
        .status
        .as_ref()
        .and_then(|s| checks::reset_on_eviction(&s.admission_checks, now))
    {
        status["admissionChecks"] = json!(reset);
    }
    // ... and forgets the MultiKueue worker it was nominated to or admitted on
    // (`resetClusterNomination`), so that the requeued Workload is dispatched afresh.
    if wl
        .status
        .as_ref()
        .is_some_and(|s| s.cluster_name.is_some() || !s.nominated_cluster_names.is_empty())
    {
        status["clusterName"] = Value::Null;
        status["nominatedClusterNames"] = Value::Null;
    }
    if is_deactivation(evicted_reason)
        && wl
            .status
            .as_ref()
            .is_some_and(|s| s.requeue_state.is_some())
    {
        // Kueue clears the requeue state of an inactive Workload.
        status["requeueState"] = Value::Null;
    }
    if out_of_time {
        let accumulated = wl
            .status
            .as_ref()
            .is_some_and(|s| s.accumulated_past_execution_time_seconds.is_some());
        if !changed && !accumulated {
            return None;
        }
        status[ACCUMULATED_FIELD] = Value::Null;
    }
    Some(patch_body(wl, status))
}

/// `status.accumulatedPastExecutionTimeSeconds` as kuota writes it (v1beta2; the API
/// server converts it to v1beta1's `accumulatedPastExexcutionTimeSeconds`).
pub const ACCUMULATED_FIELD: &str = "accumulatedPastExecutionTimeSeconds";

/// The accumulated execution time once the current admission ends at `now`: what the
/// Workload says plus the whole seconds since its `Admitted` condition turned true
/// (Kueue's `SyncAdmittedCondition`). `None` when it is not admitted: nothing to add.
pub fn accumulated_after(wl: &Workload, now: &Time) -> Option<i32> {
    let status = wl.status.as_ref()?;
    let admitted = status
        .condition(WORKLOAD_ADMITTED)
        .filter(|c| c.status == "True")?;
    let ran = now
        .0
        .as_second()
        .saturating_sub(admitted.last_transition_time.0.as_second())
        .clamp(0, i64::from(i32::MAX));
    let past = status.accumulated_past_execution_time_seconds.unwrap_or(0);
    Some(past.saturating_add(i32::try_from(ran).unwrap_or(i32::MAX)))
}

/// The eviction reason of a workload whose `spec.active` turned false.
pub const REASON_DEACTIVATED: &str = "Deactivated";

/// `spec.active: false`; `None` when the Workload is already inactive.
pub fn deactivate_patch(wl: &Workload) -> Option<Value> {
    wl.spec.is_active().then(|| {
        json!({
            "metadata": {"resourceVersion": wl.metadata.resource_version},
            "spec": {"active": false},
        })
    })
}

/// The annotation a pending Workload's estimated start is written into, when the
/// configuration asks for it (`startEstimates.writeThreshold`).
pub const ESTIMATED_START_ANNOTATION: &str = "kuota.dev/estimated-start";

/// The estimated-start annotation set to `at`; `None` when it already says so, or the
/// workload no longer waits.
pub fn estimate_patch(wl: &Workload, at: &str) -> Option<Value> {
    if has_admission(wl) || is_true(wl, WORKLOAD_FINISHED) {
        return None;
    }
    let current = wl
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ESTIMATED_START_ANNOTATION));
    (current.map(String::as_str) != Some(at))
        .then(|| json!({"metadata": {"annotations": {ESTIMATED_START_ANNOTATION: at}}}))
}

/// Which part of a Workload a write patches.
#[derive(Clone, Copy)]
enum Subresource {
    Main,
    Status,
}

/// The requeue patch once an evicted workload's pods are gone: the admission is cleared,
/// QuotaReserved and Admitted turn false, Requeued true (Kueue's
/// `UnsetQuotaReservationWithCondition` plus `SetRequeuedCondition`), and the time the
/// admission lasted is added to `accumulatedPastExecutionTimeSeconds` in the same
/// patch. It is computed from the Workload read for this write, so a retry or a
/// restart computes it again from the truth and never counts an admission twice (the
/// patch is preconditioned on that read's resourceVersion).
pub fn requeue_patch(wl: &Workload, now: &Time) -> Option<Value> {
    if !has_admission(wl) || !is_true(wl, WORKLOAD_EVICTED) {
        return None;
    }
    let accumulated = accumulated_after(wl, now);
    let gen_ = wl.metadata.generation;
    let evicted = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(WORKLOAD_EVICTED))
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default();
    let mut conds = conditions_of(wl);
    set_condition(
        &mut conds,
        WORKLOAD_QUOTA_RESERVED,
        false,
        REASON_PENDING,
        &evicted.1,
        gen_,
        now,
    );
    set_condition(
        &mut conds,
        WORKLOAD_ADMITTED,
        false,
        // Kueue's SyncAdmittedCondition for a workload without a reservation.
        REASON_NO_RESERVATION,
        "The workload has no reservation",
        gen_,
        now,
    );
    set_condition(
        &mut conds,
        WORKLOAD_REQUEUED,
        !crate::controller::pods_ready::requeue_waits(&evicted.0),
        &evicted.0,
        &evicted.1,
        gen_,
        now,
    );
    crate::controller::pods_ready::reset_on_requeue(&mut conds, gen_, now);
    let mut status = json!({"admission": null, "conditions": conds});
    if let Some(total) = accumulated {
        status[ACCUMULATED_FIELD] = json!(total);
    }
    Some(patch_body(wl, status))
}

/// The finish patch: Finished true with the job's reason and message.
pub fn finish_patch(wl: &Workload, reason: &str, message: &str, now: &Time) -> Option<Value> {
    if is_true(wl, WORKLOAD_FINISHED) {
        return None;
    }
    let mut conds = conditions_of(wl);
    set_condition(
        &mut conds,
        WORKLOAD_FINISHED,
        true,
        reason,
        message,
        wl.metadata.generation,
        now,
    );
    Some(patch_body(wl, json!({"conditions": conds})))
}

/// Writes Workload status for the engine task and the job reconciler.
pub struct WorkloadWriter<'a> {
    pub writer: &'a Writer,
    pub stores: &'a Stores,
    pub recorder: &'a Recorder,
}

/// Whether a write happened; a write carries the reference of the Workload it wrote, for
/// the Events about it.
#[derive(Debug, PartialEq)]
pub enum Written {
    Yes(Box<ObjectReference>),
    Unchanged,
}

impl WorkloadWriter<'_> {
    /// Writes the patch `build` computes from the current Workload, re-reading on conflict.
    pub async fn write(
        &self,
        key: &WorkloadKey,
        build: impl Fn(&Workload, &Time) -> Option<Value>,
    ) -> Result<Written, WriteError> {
        self.write_to(key, Subresource::Status, build).await
    }

    /// As [`Self::write`], patching the Workload itself or its status.
    async fn write_to(
        &self,
        key: &WorkloadKey,
        target: Subresource,
        build: impl Fn(&Workload, &Time) -> Option<Value>,
    ) -> Result<Written, WriteError> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.writer.client.clone(),
            &key.namespace,
            &Kind::Workload.api_resource(),
        );
        let name = key.to_string();
        self.writer
            .retry("Workload", &name, |fresh| {
                let api = api.clone();
                let build = &build;
                let name = name.clone();
                async move {
                    let wl: Option<Workload> = if fresh {
                        match api.get_opt(&key.name).await {
                            Ok(o) => o.map(|o| decode(Kind::Workload, &o)).transpose()?,
                            Err(source) => {
                                return Err(WriteError::Api {
                                    kind: "Workload",
                                    name,
                                    source,
                                });
                            }
                        }
                    } else {
                        let r = ObjectRef::new_with(&key.name, Kind::Workload.api_resource())
                            .within(&key.namespace);
                        let stored = self.stores.workloads.get(&r);
                        stored.map(|o| decode(Kind::Workload, &*o)).transpose()?
                    };
                    let Some(wl) = wl else {
                        return if fresh {
                            Err(WriteError::Gone {
                                kind: "Workload",
                                name,
                            })
                        } else {
                            Ok(Attempt::Refetch)
                        };
                    };
                    let Some(body) = build(&wl, &(self.writer.clock)()) else {
                        // "Nothing to write" from the watch cache may only mean the cache
                        // lags a write of ours (a pending reason computed just after the
                        // requeue patch would see the old admission and be dropped for
                        // good): confirm it against the API server.
                        return Ok(if fresh {
                            Attempt::Done(Written::Unchanged)
                        } else {
                            Attempt::Refetch
                        });
                    };
                    let pp = PatchParams {
                        field_manager: Some(FIELD_MANAGER.to_string()),
                        ..PatchParams::default()
                    };
                    let patched = match target {
                        Subresource::Status => {
                            api.patch_status(&key.name, &pp, &Patch::Merge(&body)).await
                        }
                        Subresource::Main => api.patch(&key.name, &pp, &Patch::Merge(&body)).await,
                    };
                    match patched {
                        Ok(patched) => {
                            self.writer.wrote("Workload");
                            let regarding = workload_ref(key, Some(&patched.metadata));
                            Ok(Attempt::Done(Written::Yes(Box::new(regarding))))
                        }
                        Err(e) if is_not_found(&e) => Err(WriteError::Gone {
                            kind: "Workload",
                            name,
                        }),
                        Err(source) => Err(WriteError::Api {
                            kind: "Workload",
                            name,
                            source,
                        }),
                    }
                }
            })
            .await
    }

    /// Admits: one status patch, then the QuotaReserved and (without checks) Admitted
    /// Events.
    pub async fn admit(
        &self,
        key: &WorkloadKey,
        admission: &Admission,
        checks: &[String],
    ) -> Result<(), WriteError> {
        // The wait is read from the Workload the admission was written to.
        let waited = std::sync::atomic::AtomicI64::new(0);
        let written = self
            .write(key, |wl, now| {
                let patch = admit_patch(wl, admission, checks, now)?;
                waited.store(queued_wait_seconds(wl, now), Ordering::Relaxed);
                Some(patch)
            })
            .await?;
        let Written::Yes(regarding) = written else {
            // Already admitted or finished: this admission did not land.
            return Err(WriteError::Gone {
                kind: "Workload",
                name: key.to_string(),
            });
        };
        let cq = &admission.cluster_queue;
        self.recorder.workload_normal(
            (*regarding).clone(),
            REASON_QUOTA_RESERVED,
            &format!(
                "Quota reserved in ClusterQueue {cq}, wait time since queued was {}s",
                waited.load(Ordering::Relaxed)
            ),
        );
        if !checks.is_empty() {
            // Admitted comes with the last Ready check (the job reconciler writes it).
            return Ok(());
        }
        if !self.recorder.repeats_published() {
            // Reserved and admitted in one write: Kueue's Admitted Event would say "wait
            // time since reservation was 0s" beside the QuotaReserved Event and the
            // Admitted condition, one API write for nothing new.
            return Ok(());
        }
        self.recorder.workload_normal(
            *regarding,
            REASON_ADMITTED,
            &format!("Admitted by ClusterQueue {cq}, wait time since reservation was 0s"),
        );
        Ok(())
    }

    /// Pending: written only when reason or message changed, with a Warning Event when
    /// the reason changed (or, publishing repeats, the message).
    pub async fn pending(
        &self,
        key: &WorkloadKey,
        reason: &str,
        message: &str,
    ) -> Result<(), WriteError> {
        let new_reason = std::sync::atomic::AtomicBool::new(false);
        let build = |wl: &Workload, now: &Time| {
            let patch = pending_patch(wl, reason, message, now)?;
            new_reason.store(pending_reason(wl) != Some(reason), Ordering::Relaxed);
            Some(patch)
        };
        if let Written::Yes(regarding) = self.write(key, build).await?
            && (new_reason.load(Ordering::Relaxed) || self.recorder.repeats_published())
        {
            self.recorder.workload_warning(*regarding, reason, message);
        }
        Ok(())
    }

    /// Preempted: Evicted and Preempted conditions with `message`, and a `Preempted`
    /// Event with `note` (Kueue adds both priorities to the Event only).
    pub async fn preempt(
        &self,
        key: &WorkloadKey,
        reason: &str,
        message: &str,
        note: &str,
    ) -> Result<(), WriteError> {
        let build = |wl: &Workload, now: &Time| {
            evict_patch(wl, REASON_EVICTED_BY_PREEMPTION, Some(reason), message, now)
        };
        if let Written::Yes(regarding) = self.write(key, build).await? {
            self.recorder.workload_normal(*regarding, "Preempted", note);
        }
        Ok(())
    }

    /// Writes a pending workload's estimated start (RFC 3339) into its annotation.
    pub async fn annotate_estimate(&self, key: &WorkloadKey, at: &str) -> Result<(), WriteError> {
        self.write_to(key, Subresource::Main, |wl, _| estimate_patch(wl, at))
            .await
            .map(drop)
    }

    /// Evicted for another reason (stop policy, deactivation, node loss). A workload the
    /// engine deactivated (its maximum execution time ran out) first gets
    /// `spec.active: false`, as Kueue writes it, so a restarted kuota does not queue it
    /// again. As in Kueue, the Event is only for a workload that held an admission.
    pub async fn evict(
        &self,
        key: &WorkloadKey,
        reason: &str,
        message: &str,
    ) -> Result<(), WriteError> {
        if is_deactivation(reason) {
            self.write_to(key, Subresource::Main, |wl, _| deactivate_patch(wl))
                .await?;
        }
        let held = std::sync::atomic::AtomicBool::new(false);
        let build = |wl: &Workload, now: &Time| {
            held.store(has_admission(wl), std::sync::atomic::Ordering::Relaxed);
            evict_patch(wl, reason, None, message, now)
        };
        if let Written::Yes(regarding) = self.write(key, build).await?
            && held.load(std::sync::atomic::Ordering::Relaxed)
        {
            self.recorder
                .workload_normal(*regarding, &format!("EvictedDueTo{reason}"), message);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
