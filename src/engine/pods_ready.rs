//! Kueue's `waitForPodsReady`: an admitted gang must have all its pods ready within a
//! timeout, or it gives its quota back and is requeued after an exponential backoff;
//! after `backoffLimitCount` requeues it is deactivated. With `blockAdmission`, nothing
//! new is admitted while an admitted gang is not ready.
//!
//! Follows Kueue's workload controller (`reconcileNotReadyTimeout`,
//! `admittedNotReadyWorkload`, `triggerDeactivation` in
//! pkg/controller/core/workload_controller.go), `UpdateRequeueState` (pkg/workload),
//! the job reconciler's `generatePodsReadyCondition`
//! (pkg/controller/jobframework/reconciler.go) and the scheduler's
//! `waitForPodsReadyIfNeeded` (pkg/scheduler/scheduler.go).
//!
//! The timeouts and the backoffs are engine state with wake-ups
//! ([`Engine::next_wakeup`]), never timers in a shell: the simulator and the cluster
//! run the same rules on virtual and wall time. Readiness comes in two ways: the
//! `PodsReady` condition of an upserted Workload (the controller writes it from the
//! job's status, as Kueue's job reconciler does; it is also what a restart rebuilds
//! from), or [`super::Event::PodsReady`] (the simulator, which has no Workload objects).

use std::collections::{BTreeMap, BTreeSet};

use super::queue::WlId;
use super::state::{Engine, WlState};
use super::{Decision, Millis, PendingReason, WorkloadKey};
use crate::api;
use crate::api::constants::{WORKLOAD_EVICTED, WORKLOAD_PODS_READY};

/// Kueue's eviction reason at the timeout (`WorkloadEvictedByPodsReadyTimeout`).
pub const REASON_PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";
/// The eviction reason once the requeues ran out: `Deactivated` with Kueue's cause
/// appended (`ReasonWithCause(WorkloadDeactivated, WorkloadRequeuingLimitExceeded)`).
pub const REASON_DEACTIVATED_REQUEUING_LIMIT: &str = "DeactivatedDueToRequeuingLimitExceeded";
/// Kueue's message with [`REASON_DEACTIVATED_REQUEUING_LIMIT`] ("The workload is
/// deactivated" joined with the DeactivationTarget condition's message).
pub const MESSAGE_DEACTIVATED_REQUEUING_LIMIT: &str =
    "The workload is deactivated due to exceeding the maximum number of re-queuing retries";
/// Kueue's `Requeued` reason once the backoff is over.
pub const REASON_BACKOFF_FINISHED: &str = "BackoffFinished";
/// Kueue's `Requeued` message once the backoff is over.
pub const MESSAGE_BACKOFF_FINISHED: &str = "The workload backoff was finished";
/// The pending message while admission is blocked (Kueue's scheduler writes it with
/// the `WaitingForPodsReady` reason).
pub const MESSAGE_WAITING_FOR_PODS_READY: &str =
    "waiting for all admitted workloads to be in PodsReady condition";
/// Kueue's relative jitter of the requeue backoff (`requeuingBackoffJitter`).
const JITTER: f64 = 0.0001;

/// `waitForPodsReady` with Kueue's defaults filled in, in the engine's units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodsReadyConfig {
    /// How long an admitted workload may take to get all its pods ready.
    pub timeout: Millis,
    /// How long a workload whose pods failed after it was ready may take to recover;
    /// `None` (Kueue's "0s") disables it.
    pub recovery_timeout: Option<Millis>,
    /// Nothing is admitted while an admitted workload is not ready.
    pub block_admission: bool,
    /// Requeues before the workload is deactivated; `None`: no limit.
    pub backoff_limit_count: Option<u32>,
    /// `backoffBaseSeconds`, in ms.
    pub backoff_base: Millis,
    /// `backoffMaxSeconds`, in ms.
    pub backoff_max: Millis,
    /// `requeuingStrategy.timestamp: Creation`: a requeued workload keeps its place by
    /// creation time; otherwise (Kueue's default, `Eviction`) it queues from the time
    /// it was evicted.
    pub requeue_by_creation: bool,
}

impl Default for PodsReadyConfig {
    /// Kueue's v1beta2 defaults: 30 minutes, recovery as long, backoff 60 s to 1 h.
    fn default() -> Self {
        Self {
            timeout: 30 * 60_000,
            recovery_timeout: Some(30 * 60_000),
            block_admission: false,
            backoff_limit_count: None,
            backoff_base: 60_000,
            backoff_max: 3_600_000,
            requeue_by_creation: false,
        }
    }
}

/// Where a gang stands on readiness: the reasons of Kueue's `PodsReady` condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Not all pods ready since the admission (`PodsReady=False`, `WaitForStart`).
    WaitForStart,
    /// All pods ready (`PodsReady=True`, `Started`).
    Started,
    /// A pod failed after the gang was ready (`PodsReady=False`, `WaitForRecovery`).
    WaitForRecovery,
    /// Ready again after a failure (`PodsReady=True`, `Recovered`).
    Recovered,
}

impl Readiness {
    /// Kueue's `generatePodsReadyCondition`: the next state, from the last one (`None`
    /// when the Workload has no `PodsReady` condition yet), whether the workload is
    /// admitted, and whether its pods are ready now.
    pub fn next(prev: Option<Readiness>, admitted: bool, ready: bool) -> Readiness {
        if !admitted {
            return Self::WaitForStart;
        }
        match (prev, ready) {
            (Some(Self::WaitForRecovery | Self::Recovered), true) => Self::Recovered,
            (_, true) => Self::Started,
            (Some(Self::Started | Self::Recovered | Self::WaitForRecovery), false) => {
                Self::WaitForRecovery
            }
            (_, false) => Self::WaitForStart,
        }
    }

    /// Whether the condition is true.
    pub fn is_ready(self) -> bool {
        matches!(self, Self::Started | Self::Recovered)
    }

    /// Kueue's condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            Self::WaitForStart => "WaitForStart",
            Self::Started => "Started",
            Self::WaitForRecovery => "WaitForRecovery",
            Self::Recovered => "Recovered",
        }
    }

    /// Kueue's condition message.
    pub fn message(self) -> &'static str {
        match self {
            Self::WaitForStart => "Not all pods are ready or succeeded",
            Self::WaitForRecovery => "At least one pod has failed, waiting for recovery",
            Self::Started | Self::Recovered => {
                "All pods reached readiness and the workload is running"
            }
        }
    }

    /// The state a `PodsReady` condition says; Kueue reads an unknown false reason
    /// (the older `PodsReady`) as waiting for the start.
    pub fn from_condition(status: &str, reason: &str) -> Readiness {
        match (status == "True", reason) {
            (true, "Recovered") => Self::Recovered,
            (true, _) => Self::Started,
            (false, "WaitForRecovery") => Self::WaitForRecovery,
            (false, _) => Self::WaitForStart,
        }
    }
}

/// Kueue's requeue delay before the `count`-th requeue: `backoffBaseSeconds ×
/// 2^(count−1)` up to `backoffMaxSeconds` (apimachinery's `wait.Backoff` as Kueue's
/// `WaitTime` steps it: the first step is the base even above the cap, and a cap of 0
/// means none), plus a jitter below 0.01 % of it. Kueue draws the jitter at random;
/// here it is a hash of the workload and the count, so runs repeat exactly.
pub fn backoff(config: &PodsReadyConfig, key: &WorkloadKey, count: u32) -> Millis {
    let cap = if config.backoff_max > 0 {
        config.backoff_max
    } else {
        i64::MAX / 2
    };
    let mut d = config.backoff_base.max(0);
    for _ in 1..count {
        d = d.saturating_mul(2);
        if d >= cap {
            d = cap;
            break;
        }
    }
    let fraction = (fnv1a(key, count) % 1_000_000) as f64 / 1_000_000.0;
    d.saturating_add((d as f64 * JITTER * fraction) as i64)
}

/// FNV-1a over the workload's namespace, name and the count: a fixed, portable hash.
fn fnv1a(key: &WorkloadKey, count: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = key
        .namespace
        .bytes()
        .chain([b'/'])
        .chain(key.name.bytes())
        .chain(count.to_le_bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One workload's readiness and requeue bookkeeping.
#[derive(Clone, Debug)]
pub(crate) struct Track {
    readiness: Readiness,
    /// When the current readiness began (the admission, or the last transition).
    since: Millis,
    /// When the current admission times out, if it can.
    due: Option<Millis>,
    /// `status.requeueState.count`.
    count: u32,
    /// `status.requeueState.requeueAt` while a backoff runs.
    requeue_at: Option<Millis>,
    /// When it was last evicted at the timeout: its queue order under the `Eviction`
    /// requeuing timestamp.
    evicted_at: Option<Millis>,
}

impl Default for Track {
    fn default() -> Self {
        Self {
            readiness: Readiness::WaitForStart,
            since: 0,
            due: None,
            count: 0,
            requeue_at: None,
            evicted_at: None,
        }
    }
}

/// The engine's waitForPodsReady state (empty when the feature is off).
#[derive(Clone, Debug, Default)]
pub(crate) struct PodsReadyState {
    tracks: BTreeMap<WlId, Track>,
    /// Admissions that time out then (checked against the track when due).
    timeouts: BTreeMap<Millis, BTreeSet<WlId>>,
    /// Backoffs that end then (checked against the track when due).
    backoffs: BTreeMap<Millis, BTreeSet<WlId>>,
    /// Workloads holding quota whose pods are not all ready (Kueue's
    /// `WorkloadsNotReady`): what `blockAdmission` waits for.
    not_ready: BTreeSet<WlId>,
}

impl PodsReadyState {
    /// The earliest timeout or end of a backoff.
    pub(crate) fn next_wakeup(&self) -> Option<Millis> {
        let timeout = self.timeouts.keys().next().copied();
        let backoff = self.backoffs.keys().next().copied();
        timeout.into_iter().chain(backoff).min()
    }

    /// Forgets a deleted workload (its slot id may be reused).
    pub(crate) fn forget(&mut self, id: WlId) {
        self.tracks.remove(&id);
        self.not_ready.remove(&id);
    }

    fn set_due(&mut self, id: WlId, due: Option<Millis>) {
        let Some(t) = self.tracks.get_mut(&id) else {
            return;
        };
        if let Some(old) = t.due.take()
            && let Some(ids) = self.timeouts.get_mut(&old)
        {
            ids.remove(&id);
            if ids.is_empty() {
                self.timeouts.remove(&old);
            }
        }
        t.due = due;
        if let Some(due) = due {
            self.timeouts.entry(due).or_default().insert(id);
        }
    }
}

impl Engine {
    fn pods_ready_config(&self) -> Option<&PodsReadyConfig> {
        self.config.pods_ready.as_ref()
    }

    /// A new admission starts waiting for its pods: the timeout counts from `started`
    /// (Kueue's `Admitted` condition time).
    pub(crate) fn pods_ready_admitted(&mut self, id: WlId, started: Millis) {
        let Some(timeout) = self.pods_ready_config().map(|c| c.timeout) else {
            return;
        };
        let t = self.pods_ready.tracks.entry(id).or_default();
        t.readiness = Readiness::WaitForStart;
        t.since = started;
        self.pods_ready.not_ready.insert(id);
        self.pods_ready
            .set_due(id, Some(started.saturating_add(timeout)));
    }

    /// The admission ended (finished, requeued or deleted): nothing waits for its pods.
    pub(crate) fn pods_ready_released(&mut self, id: WlId) {
        if self.pods_ready_config().is_none() {
            return;
        }
        self.pods_ready.set_due(id, None);
        self.pods_ready.not_ready.remove(&id);
        if let Some(t) = self.pods_ready.tracks.get_mut(&id) {
            t.readiness = Readiness::WaitForStart;
        }
    }

    /// The shell saw the workload's pods become ready or not ready at the engine's now.
    pub(crate) fn pods_ready_observed(&mut self, key: &WorkloadKey, ready: bool) {
        let Some(&id) = self.wl_index.get(key) else {
            return;
        };
        if !matches!(self.wl(id).state, WlState::Admitted(_)) {
            return;
        }
        let prev = self.pods_ready.tracks.get(&id).map(|t| t.readiness);
        let next = Readiness::next(prev, true, ready);
        self.set_readiness(id, next, self.now);
    }

    /// Moves an admitted workload to `readiness` (from `since`), rearming its timeout.
    fn set_readiness(&mut self, id: WlId, readiness: Readiness, since: Millis) {
        let Some(config) = self.pods_ready_config() else {
            return;
        };
        let recovery = config.recovery_timeout;
        let t = self.pods_ready.tracks.entry(id).or_default();
        if t.readiness == readiness {
            return;
        }
        t.readiness = readiness;
        t.since = since;
        let due = match readiness {
            Readiness::Started | Readiness::Recovered => {
                self.pods_ready.not_ready.remove(&id);
                None
            }
            Readiness::WaitForRecovery => {
                self.pods_ready.not_ready.insert(id);
                recovery.map(|r| since.saturating_add(r))
            }
            Readiness::WaitForStart => {
                self.pods_ready.not_ready.insert(id);
                let (started, timeout) = match &self.wl(id).state {
                    WlState::Admitted(a) => {
                        (a.started, self.pods_ready_config().map(|c| c.timeout))
                    }
                    _ => return,
                };
                timeout.map(|t| started.saturating_add(t))
            }
        };
        self.pods_ready.set_due(id, due);
    }

    /// What an upserted Workload says: its `status.requeueState` (the count only grows
    /// while it is active; an inactive Workload's is cleared, as Kueue clears it) and,
    /// under the `Eviction` timestamp, when it was evicted at the timeout. Called before
    /// the engine queues it.
    pub(crate) fn pods_ready_status_seen(&mut self, id: WlId, wl: &api::Workload) {
        if self.pods_ready_config().is_none() {
            return;
        }
        let active = wl.spec.is_active();
        let status = wl.status.as_ref();
        let requeue = status.and_then(|s| s.requeue_state.as_ref());
        let count = requeue
            .and_then(|r| r.count)
            .map_or(0, |c| u32::try_from(c).unwrap_or(0));
        let requeue_at = requeue
            .and_then(|r| r.requeue_at.as_ref())
            .map(|t| t.0.as_millisecond());
        let evicted_at = status
            .and_then(|s| s.condition(WORKLOAD_EVICTED))
            .filter(|c| c.status == "True" && c.reason == REASON_PODS_READY_TIMEOUT)
            .map(|c| c.last_transition_time.0.as_millisecond());
        if !self.pods_ready.tracks.contains_key(&id)
            && (count == 0 || !active)
            && evicted_at.is_none()
        {
            return;
        }
        let t = self.pods_ready.tracks.entry(id).or_default();
        if !active {
            t.count = 0;
            t.requeue_at = None;
            t.evicted_at = None;
            return;
        }
        if count > t.count {
            t.count = count;
            t.requeue_at = requeue_at;
        }
        if t.evicted_at.is_none() {
            t.evicted_at = evicted_at;
        }
    }

    /// The `PodsReady` condition of an upserted Workload that holds the engine's
    /// current admission: the controller writes it from the job's status, and a
    /// restart rebuilds from it. A condition older than the admission (whole seconds,
    /// as conditions keep time) describes an earlier one and is ignored.
    pub(crate) fn pods_ready_condition_seen(&mut self, id: WlId, wl: &api::Workload) {
        if self.pods_ready_config().is_none() {
            return;
        }
        let WlState::Admitted(a) = &self.wl(id).state else {
            return;
        };
        let started_second = a.started - a.started.rem_euclid(1000);
        let Some(status) = wl.status.as_ref() else {
            return;
        };
        if status.admission.is_none() || status.is_condition_true(WORKLOAD_EVICTED) {
            return;
        }
        let Some(c) = status.condition(WORKLOAD_PODS_READY) else {
            return;
        };
        let since = c.last_transition_time.0.as_millisecond();
        let readiness = Readiness::from_condition(&c.status, &c.reason);
        if readiness != Readiness::WaitForStart && since < started_second {
            return;
        }
        self.set_readiness(id, readiness, since.max(started_second));
    }

    /// Whether `blockAdmission` holds admissions back now.
    pub(crate) fn pods_ready_blocks(&self) -> bool {
        self.pods_ready_config()
            .is_some_and(|c| c.block_admission && !self.pods_ready.not_ready.is_empty())
    }

    /// A head that fits while admission is blocked waits, with Kueue's reason.
    pub(crate) fn wait_for_pods_ready(&mut self, id: WlId) {
        self.set_pending(
            id,
            PendingReason::WaitingForPodsReady,
            MESSAGE_WAITING_FOR_PODS_READY,
        );
    }

    /// Holds back a workload whose backoff has not ended (it is queued when it ends);
    /// a backoff that ended is cleared and reported. `true` when held.
    pub(crate) fn pods_ready_hold(&mut self, id: WlId) -> bool {
        let now = self.now;
        let by_creation = match self.pods_ready_config() {
            Some(c) => c.requeue_by_creation,
            None => return false,
        };
        let Some(t) = self.pods_ready.tracks.get_mut(&id) else {
            return false;
        };
        if let (false, Some(at)) = (by_creation, t.evicted_at) {
            // Kueue's `Eviction` requeuing timestamp: it queues from its eviction.
            let w = self.wls[id as usize].as_mut().expect("live workload");
            w.spec.created = w.spec.created.max(at);
        }
        let Some(at) = t.requeue_at else {
            return false;
        };
        if at > now {
            self.pods_ready.backoffs.entry(at).or_default().insert(id);
            return true;
        }
        t.requeue_at = None;
        let count = t.count;
        let workload = self.wl(id).spec.key.clone();
        self.outbox.push(Decision::RequeueState {
            workload,
            count,
            requeue_at: None,
        });
        false
    }

    /// Runs the timeouts and backoffs due by `now`.
    pub(crate) fn pods_ready_tick(&mut self, now: Millis) {
        if self.pods_ready_config().is_none() {
            return;
        }
        while let Some(entry) = self.pods_ready.timeouts.first_entry() {
            if *entry.key() > now {
                break;
            }
            let (due, ids) = entry.remove_entry();
            for id in ids {
                let current = self
                    .pods_ready
                    .tracks
                    .get_mut(&id)
                    .filter(|t| t.due == Some(due));
                let Some(t) = current else { continue };
                t.due = None;
                let admitted = self
                    .wls
                    .get(id as usize)
                    .and_then(|w| w.as_ref())
                    .is_some_and(|w| matches!(w.state, WlState::Admitted(_)));
                if admitted {
                    self.pods_ready_timed_out(id);
                }
            }
        }
        while let Some(entry) = self.pods_ready.backoffs.first_entry() {
            if *entry.key() > now {
                break;
            }
            let (at, ids) = entry.remove_entry();
            for id in ids {
                let waiting = self
                    .wls
                    .get(id as usize)
                    .and_then(|w| w.as_ref())
                    .is_some_and(|w| matches!(w.state, WlState::Pending) && w.cq.is_none())
                    && self
                        .pods_ready
                        .tracks
                        .get(&id)
                        .is_some_and(|t| t.requeue_at == Some(at));
                if waiting {
                    self.enqueue(id);
                }
            }
        }
    }

    /// The timeout passed: Kueue's `triggerDeactivation` once the requeues ran out,
    /// else the eviction with `PodsReadyTimeout` and the next backoff.
    fn pods_ready_timed_out(&mut self, id: WlId) {
        let Some(config) = self.pods_ready_config().cloned() else {
            return;
        };
        let now = self.now;
        let key = self.wl(id).spec.key.clone();
        let t = self.pods_ready.tracks.entry(id).or_default();
        if config
            .backoff_limit_count
            .is_some_and(|limit| t.count.saturating_add(1) > limit)
        {
            t.count = 0;
            t.requeue_at = None;
            t.evicted_at = None;
            self.wl_mut(id).spec.active = false;
            self.evict(
                id,
                REASON_DEACTIVATED_REQUEUING_LIMIT,
                MESSAGE_DEACTIVATED_REQUEUING_LIMIT,
            );
            return;
        }
        t.count = t.count.saturating_add(1);
        let count = t.count;
        let at = now.saturating_add(backoff(&config, &key, count));
        // Kueue's `SetRequeueState` never moves a later requeue time earlier.
        let at = t.requeue_at.map_or(at, |old| old.max(at));
        t.requeue_at = Some(at);
        t.evicted_at = Some(now);
        self.evict(
            id,
            REASON_PODS_READY_TIMEOUT,
            &format!("Exceeded the PodsReady timeout {key}"),
        );
        self.outbox.push(Decision::RequeueState {
            workload: key,
            count,
            requeue_at: Some(at),
        });
    }

    /// The requeue state the engine holds for a workload: (count, requeueAt).
    pub fn requeue_state(&self, key: &WorkloadKey) -> Option<(u32, Option<Millis>)> {
        let id = self.wl_index.get(key)?;
        let t = self.pods_ready.tracks.get(id)?;
        (t.count > 0 || t.requeue_at.is_some()).then_some((t.count, t.requeue_at))
    }

    /// The readiness the engine holds for an admitted workload.
    pub fn readiness(&self, key: &WorkloadKey) -> Option<Readiness> {
        let id = self.wl_index.get(key)?;
        match self.wl(*id).state {
            WlState::Admitted(_) | WlState::Evicting(_) => {
                self.pods_ready.tracks.get(id).map(|t| t.readiness)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
