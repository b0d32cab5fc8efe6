//! The engine's state and how events change it. Workload events live in `workloads`,
//! the quota tree in `tree`, scheduling in `cycle`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::explain::Explanation;
use super::model::{CohortSpec, CqSpec, Flavor, ModelError, WorkloadSpec};
use super::queue::{ClusterQueueQueue, QueueKey, WlId};
use super::quota::{NodeId, QuotaTree};
use super::resources::{FlavorId, FrAmounts, Names};
use super::{Decision, EngineConfig, Event, Millis, PendingReason, WorkloadKey};
use crate::api::{self, StopPolicy};

/// Dense id of a ClusterQueue; stable for the engine's lifetime (a deleted one keeps its id).
pub type CqId = u32;

/// An engine error: an object the engine cannot use, named with its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("{kind} {name:?}: {source}")]
    Invalid {
        kind: &'static str,
        name: String,
        #[source]
        source: InvalidObject,
    },
}

/// Why the engine cannot use an object; each variant keeps the underlying error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidObject {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Placement(#[from] crate::placement::PlacementError),
    /// A node's externally used amount that is not a quantity.
    #[error("usage[{resource}]: {source}")]
    Usage {
        resource: String,
        #[source]
        source: api::quantity::QuantityError,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct Admitted {
    pub cq: CqId,
    pub usage: FrAmounts,
    /// Where its pods go, for PodSets on TAS flavors.
    pub placement: Vec<crate::placement::PodSetPlacement>,
    pub admission: Arc<api::Admission>,
    /// When it was admitted (for a restored admission: when the engine learnt of it).
    pub since: Millis,
    /// When its execution time started counting: `since`, or for a restored
    /// admission its `Admitted` condition's time (see [`super::execution`]).
    pub started: Millis,
    /// When its maximumExecutionTimeSeconds runs out, if it has one.
    pub deadline: Option<Millis>,
    /// When its job reported success while its pods still terminate.
    pub finishing_since: Option<Millis>,
}

#[derive(Clone, Debug)]
pub(crate) enum WlState {
    Pending,
    Admitted(Admitted),
    Evicting(Admitted),
    Finished,
}

#[derive(Clone, Debug)]
pub(crate) struct Wl {
    pub spec: WorkloadSpec,
    pub state: WlState,
    /// The ClusterQueue it is queued in, while pending.
    pub cq: Option<CqId>,
    pub qkey: Option<QueueKey>,
    pub seq: u64,
    /// Last reported pending reason, to emit `Pending` only on change.
    pub pending: Option<Reported>,
    /// Flavor-search resume points and the quota generation they are valid for.
    pub resume: super::flavor::Resume,
    pub resume_gen: u64,
    /// Victims this workload waits for after preempting them.
    pub waiting_for: Vec<WlId>,
    /// Quota and nodes held for it while its victims stop (see [`super::reserve`]).
    pub reservation: Option<super::reserve::Reservation>,
    /// The ClusterQueue whose namespaceSelector admitted this workload's namespace, and
    /// the selector generation of that verdict: rechecked only after a change.
    pub namespace_ok: Option<(CqId, u64)>,
}

/// The pending reason and message a workload last reported.
#[derive(Clone, Debug)]
pub(crate) struct Reported {
    pub reason: PendingReason,
    pub message: Arc<str>,
    /// The values the message was rendered from, when it came from the flavor
    /// assigner: an equal explanation means an equal message, without rendering.
    pub explained: Option<Arc<Explanation>>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Cq {
    pub spec: CqSpec,
    pub deleted: bool,
    pub node: NodeId,
    /// Root of its cohort tree (itself without a cohort): the scope quota is shared in.
    pub root: NodeId,
    pub queue: ClusterQueueQueue,
    pub admitted: BTreeSet<WlId>,
    /// Why it cannot admit: missing flavor, admission checks, stop policy, cohort cycle.
    pub inactive: Option<Inactive>,
    /// Admissions it built recently, for reuse by workloads of the same shape.
    pub admissions: super::admission::AdmissionCache,
}

/// Why a ClusterQueue cannot admit, as its `Active=False` condition says it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Inactive {
    /// Kueue's condition reason (`FlavorNotFound`, `AdmissionCheckInactive`, ...).
    pub reason: &'static str,
    /// The message its pending workloads and its condition carry.
    pub message: String,
    /// Kueue's whole `Active=False` message, where it differs from "Can't admit new
    /// workloads: " + `message`.
    pub condition: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct LocalQueueInfo {
    pub cluster_queue: String,
    pub stop: StopPolicy,
    /// `spec.fairSharing.weight` as a number (Kueue's AsApproximateFloat64; default 1).
    pub weight: f64,
}

/// The admission engine. See the module docs of [`crate::engine`].
#[derive(Clone, Debug)]
pub struct Engine {
    pub(crate) config: EngineConfig,
    pub(crate) names: Names,
    pub(crate) now: Millis,
    pub(crate) seq: u64,
    pub(crate) flavors: BTreeMap<FlavorId, Flavor>,
    pub(crate) cohort_specs: BTreeMap<String, CohortSpec>,
    pub(crate) local_queues: BTreeMap<(String, String), LocalQueueInfo>,
    /// Lookup-only (by name), like the other `HashMap`s here: never iterated into a decision.
    pub(crate) namespaces: HashMap<String, BTreeMap<String, String>>,
    pub(crate) workload_classes: BTreeMap<String, i32>,
    pub(crate) pod_classes: BTreeMap<String, (i32, bool)>,
    pub(crate) tree: QuotaTree,
    pub(crate) cqs: Vec<Cq>,
    pub(crate) cq_index: HashMap<String, CqId>,
    /// Cohort name -> node, rebuilt with the tree.
    pub(crate) cohort_nodes: BTreeMap<String, NodeId>,
    /// Cohort root -> ClusterQueues under it.
    pub(crate) root_members: HashMap<NodeId, Vec<CqId>>,
    /// Interned id of the `pods` resource.
    pub(crate) pods: super::resources::ResourceId,
    /// Fair-sharing weight (milli) and display name per node.
    pub(crate) node_weight: Vec<i64>,
    pub(crate) node_name: Vec<String>,
    pub(crate) wls: Vec<Option<Wl>>,
    pub(crate) free_ids: Vec<WlId>,
    pub(crate) wl_index: HashMap<WorkloadKey, WlId>,
    /// Pending workloads without a usable ClusterQueue (missing or inactive queue).
    pub(crate) unqueued: BTreeSet<WlId>,
    /// Bumped whenever quota is freed or changed; invalidates flavor-search resume points.
    pub(crate) quota_gen: u64,
    /// Bumped whenever namespace labels or ClusterQueue selectors may have changed.
    pub(crate) selector_gen: u64,
    /// Restored workloads with pods on hosts not (yet) known to the inventory.
    pub(crate) unresolved_restores: BTreeSet<WlId>,
    /// Admitted workloads seen before their ClusterQueue (watches deliver kinds in any
    /// order on a restart): parked, not queued, and charged when the ClusterQueue arrives.
    pub(crate) awaiting_cq: BTreeMap<WorkloadKey, api::Admission>,
    pub(crate) outbox: Vec<Decision>,
    pub(crate) inventory: crate::placement::Inventory,
    /// Workloads holding a preemption reservation.
    pub(crate) preemptors: BTreeSet<WlId>,
    /// Per ClusterQueue (its quota-tree node), the gang whose nodes are held until its earliest start.
    pub(crate) gang_holds: BTreeMap<super::quota::NodeId, super::gang_hold::GangHold>,
    /// Holds that moved later or were dropped, until the shell collects them.
    pub(crate) gang_notices: Vec<super::GangReservationNotice>,
    /// The preemption oracle's per-cycle summaries (see [`super::preempt::Oracle`]).
    pub(crate) oracle: std::cell::RefCell<super::preempt::Oracle>,
    /// When preemption protection ends for workloads that kept a preemptor waiting,
    /// and the ClusterQueues to look at again then.
    pub(crate) wakeups: BTreeMap<Millis, BTreeSet<CqId>>,
    /// When admitted workloads run out of their maximumExecutionTimeSeconds; checked
    /// against the workload's admission when due, so stale entries are harmless.
    pub(crate) expiries: BTreeMap<Millis, Vec<WlId>>,
    /// Every pending or admitted workload's PodSets, one copy per distinct value.
    pub(crate) pod_set_pool: super::intern::Shared<[super::model::PodSetReq]>,
    /// What pods outside the engine's placements use on nodes.
    pub(crate) non_tas: super::pods::NonTasPods,
    /// Admission fair sharing: each LocalQueue's decayed consumption (empty when off).
    pub(crate) afs: BTreeMap<(String, String), super::afs::Entry>,
    /// waitForPodsReady: readiness, timeouts and requeue backoffs (empty when off).
    pub(crate) pods_ready: super::pods_ready::PodsReadyState,
    /// AdmissionChecks and the Retry delays they impose (see [`super::checks`]).
    pub(crate) checks: super::checks::ChecksState,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        let mut names = Names::default();
        let pods = names.resource(super::model::PODS_RESOURCE);
        Self {
            config,
            names,
            pods,
            root_members: HashMap::new(),
            now: 0,
            seq: 0,
            flavors: BTreeMap::new(),
            cohort_specs: BTreeMap::new(),
            local_queues: BTreeMap::new(),
            namespaces: HashMap::new(),
            workload_classes: BTreeMap::new(),
            pod_classes: BTreeMap::new(),
            tree: QuotaTree::default(),
            cqs: Vec::new(),
            cq_index: HashMap::new(),
            cohort_nodes: BTreeMap::new(),
            node_weight: Vec::new(),
            node_name: Vec::new(),
            wls: Vec::new(),
            free_ids: Vec::new(),
            wl_index: HashMap::new(),
            unqueued: BTreeSet::new(),
            quota_gen: 0,
            selector_gen: 0,
            unresolved_restores: BTreeSet::new(),
            awaiting_cq: BTreeMap::new(),
            outbox: Vec::new(),
            inventory: crate::placement::Inventory::default(),
            preemptors: BTreeSet::new(),
            gang_holds: BTreeMap::new(),
            gang_notices: Vec::new(),
            oracle: std::cell::RefCell::default(),
            pod_set_pool: super::intern::Shared::default(),
            non_tas: super::pods::NonTasPods::default(),
            wakeups: BTreeMap::new(),
            expiries: BTreeMap::new(),
            afs: BTreeMap::new(),
            pods_ready: Default::default(),
            checks: Default::default(),
        }
    }

    /// Applies one event observed at `now`.
    pub fn apply(&mut self, now: Millis, event: Event) -> Result<(), EngineError> {
        self.now = self.now.max(now);
        match event {
            Event::ResourceFlavorUpserted(rf) => {
                let id = self
                    .names
                    .flavor(&rf.metadata.name.clone().unwrap_or_default());
                self.flavors.insert(id, Flavor::from_api(&rf));
                self.inventory.set_flavor(&rf);
                self.rebuild();
            }
            Event::ResourceFlavorDeleted(name) => {
                if let Some(id) = self.names.flavors.get(&name) {
                    self.flavors.remove(&id);
                }
                self.inventory.remove_flavor(&name);
                self.rebuild();
            }
            Event::TopologyUpserted(t) => {
                let name = t.metadata.name.clone().unwrap_or_default();
                self.inventory
                    .upsert_topology(&t)
                    .map_err(|e| EngineError::Invalid {
                        kind: "Topology",
                        name,
                        source: e.into(),
                    })?;
                self.revive_all();
            }
            Event::TopologyDeleted(name) => {
                self.inventory.remove_topology(&name);
                self.revive_all();
            }
            Event::NodeUpserted(node) => self.node_upserted(&node)?,
            Event::NodeDeleted(name) => self.node_deleted(&name),
            Event::NodeExternalUsage { node, usage } => self.node_external_usage(&node, &usage)?,
            Event::PodUpserted(pod) => self.pod_upserted(&pod)?,
            Event::PodDeleted { namespace, name } => self.pod_deleted(&namespace, &name)?,
            Event::ClusterQueueUpserted(cq) => self.cluster_queue_upserted(&cq)?,
            Event::AdmissionCheckUpserted(ac) => self.admission_check_upserted(&ac),
            Event::AdmissionCheckDeleted(name) => self.admission_check_deleted(&name),
            Event::ClusterQueueDeleted(name) => {
                if let Some(&id) = self.cq_index.get(&name) {
                    self.cqs[id as usize].deleted = true;
                    self.rebuild();
                }
            }
            Event::CohortUpserted(c) => {
                let name = c.metadata.name.clone().unwrap_or_default();
                let spec = CohortSpec::from_api(&mut self.names, &c)
                    .map_err(|e| invalid("Cohort", &name, e))?;
                self.cohort_specs.insert(name, spec);
                self.rebuild();
            }
            Event::CohortDeleted(name) => {
                self.cohort_specs.remove(&name);
                self.rebuild();
            }
            Event::LocalQueueUpserted(lq) => self.local_queue_upserted(&lq)?,
            Event::LocalQueueDeleted { namespace, name } => {
                self.local_queues.remove(&(namespace, name));
                self.requeue_all();
            }
            Event::WorkloadPriorityClassUpserted(wpc) => {
                self.workload_classes
                    .insert(wpc.metadata.name.clone().unwrap_or_default(), wpc.value);
            }
            Event::WorkloadPriorityClassDeleted(name) => {
                self.workload_classes.remove(&name);
            }
            Event::PriorityClassUpserted {
                name,
                value,
                global_default,
            } => {
                self.pod_classes.insert(name, (value, global_default));
            }
            Event::PriorityClassDeleted(name) => {
                self.pod_classes.remove(&name);
            }
            Event::NamespaceUpserted { name, labels } => {
                self.namespaces.insert(name, labels);
                self.revive_all();
            }
            Event::NamespaceDeleted(name) => {
                self.namespaces.remove(&name);
                self.selector_gen += 1;
            }
            Event::WorkloadUpserted(wl) => self.upsert_workload(&wl)?,
            Event::WorkloadFinished(key) => {
                self.awaiting_cq.remove(&key);
                self.release(&key, true)
            }
            Event::WorkloadDeleted(key) => self.workload_deleted(&key),
            Event::WorkloadEvicted(key) => {
                self.accumulate_execution(&key);
                self.release(&key, false)
            }
            Event::WorkloadFinishing(key) => self.workload_finishing(&key),
            Event::AdmissionFailed(key) => self.admission_failed(&key),
            Event::PodsReady { workload, ready } => self.pods_ready_observed(&workload, ready),
        }
        Ok(())
    }

    /// A ClusterQueue was created or changed: the tree is rebuilt, admissions parked
    /// for it are charged, and a new HoldAndDrain stop evicts what it admitted.
    fn cluster_queue_upserted(&mut self, cq: &api::ClusterQueue) -> Result<(), EngineError> {
        let name = cq.metadata.name.clone().unwrap_or_default();
        let spec =
            CqSpec::from_api(&mut self.names, cq).map_err(|e| invalid("ClusterQueue", &name, e))?;
        let id = match self.cq_index.get(&name) {
            Some(&id) => id,
            None => {
                self.cqs.push(Cq::default());
                let id = (self.cqs.len() - 1) as CqId;
                self.cq_index.insert(name.clone(), id);
                id
            }
        };
        let was_draining = self.cqs[id as usize].spec.stop == StopPolicy::HoldAndDrain;
        let c = &mut self.cqs[id as usize];
        c.spec = spec;
        c.deleted = false;
        self.rebuild();
        self.restore_awaiting(&name)?;
        if !was_draining && self.cqs[id as usize].spec.stop == StopPolicy::HoldAndDrain {
            self.drain(id, "ClusterQueueStopped", "The ClusterQueue is stopped");
        }
        Ok(())
    }

    /// A LocalQueue was created or changed: every pending workload is queued again
    /// (its ClusterQueue may differ), and a new HoldAndDrain stop evicts its workloads.
    fn local_queue_upserted(&mut self, lq: &api::LocalQueue) -> Result<(), EngineError> {
        let key = (
            lq.metadata.namespace.clone().unwrap_or_default(),
            lq.metadata.name.clone().unwrap_or_default(),
        );
        let info = LocalQueueInfo {
            cluster_queue: lq.spec.cluster_queue.clone(),
            stop: lq.spec.stop_policy.unwrap_or_default(),
            weight: super::model::weight(&lq.spec.fair_sharing, "spec")
                .map_err(|e| invalid("LocalQueue", &format!("{}/{}", key.0, key.1), e))?
                as f64
                / 1000.0,
        };
        self.afs_seed(&key, lq)?;
        let draining = info.stop == StopPolicy::HoldAndDrain
            && self
                .local_queues
                .get(&key)
                .is_none_or(|old| old.stop != StopPolicy::HoldAndDrain);
        self.local_queues.insert(key.clone(), info);
        self.requeue_all();
        if draining {
            self.drain_local_queue(&key);
        }
        Ok(())
    }

    /// A Workload is gone: its quota goes back and its slot is freed.
    fn workload_deleted(&mut self, key: &WorkloadKey) {
        self.awaiting_cq.remove(key);
        self.release(key, true);
        if let Some(id) = self.wl_index.remove(key) {
            self.dequeue(id);
            self.preemptors.remove(&id);
            self.pods_ready.forget(id);
            self.checks.forget(id);
            self.wls[id as usize] = None;
            self.free_ids.push(id);
        }
    }

    /// A write that admitted the workload failed for good: its quota goes back.
    fn admission_failed(&mut self, key: &WorkloadKey) {
        let admitted = self
            .wl_index
            .get(key)
            .is_some_and(|&id| matches!(self.wl(id).state, WlState::Admitted(_)));
        if admitted {
            if let Some(&id) = self.wl_index.get(key) {
                self.afs_rollback(id);
            }
            self.release(key, false);
        }
    }

    pub(crate) fn wl(&self, id: WlId) -> &Wl {
        self.wls[id as usize]
            .as_ref()
            .expect("workload ids in queues and sets are live")
    }

    pub(crate) fn wl_mut(&mut self, id: WlId) -> &mut Wl {
        self.wls[id as usize]
            .as_mut()
            .expect("workload ids in queues and sets are live")
    }

    /// Resolves LocalQueue -> ClusterQueue and puts a pending workload in its queue,
    /// or in `unqueued` with the reason it cannot be queued.
    pub(crate) fn enqueue(&mut self, id: WlId) {
        self.deactivate_if_out_of_time(id);
        if self.pods_ready_hold(id) || self.checks_hold(id) {
            return;
        }
        let w = self.wl(id);
        let ns = w.spec.key.namespace.clone();
        let lq_name = w.spec.queue_name.clone();
        let active = w.spec.active;
        let target: Result<CqId, (PendingReason, String)> = if !active {
            Err((
                PendingReason::Inactive,
                "The workload is deactivated (spec.active is false)".into(),
            ))
        } else if lq_name.is_empty() {
            Err((
                PendingReason::Inadmissible,
                "The workload has no queue name (spec.queueName is empty)".into(),
            ))
        } else {
            match self.local_queues.get(&(ns.to_string(), lq_name.clone())) {
                // Kueue's wording and reason (workload_controller.go getQueueBlocker).
                None => Err((
                    PendingReason::Misconfigured,
                    format!("LocalQueue {lq_name} doesn't exist"),
                )),
                Some(lq) if lq.stop != StopPolicy::None => Err((
                    PendingReason::Stopped,
                    format!("LocalQueue {lq_name} is stopped (stopPolicy {:?})", lq.stop),
                )),
                Some(lq) => match self.cq_index.get(&lq.cluster_queue) {
                    Some(&c) if !self.cqs[c as usize].deleted => Ok(c),
                    _ => Err((
                        PendingReason::Misconfigured,
                        format!("ClusterQueue {} doesn't exist", lq.cluster_queue),
                    )),
                },
            }
        };
        match target {
            Ok(c) => {
                let key: QueueKey = (Reverse(w.spec.priority), w.spec.created, w.seq, id);
                self.unqueued.remove(&id);
                self.cqs[c as usize].queue.push(key);
                let w = self.wl_mut(id);
                w.cq = Some(c);
                w.qkey = Some(key);
                // A reason about its queue (missing, stopped, inactive) no longer holds
                // once it is queued: forget it, so the next evaluation reports afresh.
                if w.pending.as_ref().is_some_and(|p| {
                    matches!(
                        p.reason,
                        PendingReason::Inadmissible
                            | PendingReason::Misconfigured
                            | PendingReason::Inactive
                            | PendingReason::Stopped
                    )
                }) {
                    w.pending = None;
                }
            }
            Err((reason, message)) => {
                self.unqueued.insert(id);
                self.set_pending(id, reason, message);
            }
        }
    }

    pub(crate) fn dequeue(&mut self, id: WlId) {
        self.unqueued.remove(&id);
        let w = self.wl_mut(id);
        let (cq, key) = (w.cq.take(), w.qkey.take());
        let shape = w.spec.shape;
        if let (Some(c), Some(k)) = (cq, key) {
            self.cqs[c as usize].queue.remove(&k, shape);
        }
    }

    /// Records a pending reason and emits a decision only when it changed.
    pub(crate) fn set_pending(
        &mut self,
        id: WlId,
        reason: PendingReason,
        message: impl AsRef<str> + Into<Arc<str>>,
    ) {
        let w = self.wl_mut(id);
        if w.pending
            .as_ref()
            .is_some_and(|p| p.reason == reason && *p.message == *message.as_ref())
        {
            return;
        }
        let message: Arc<str> = message.into();
        w.pending = Some(Reported {
            reason,
            message: Arc::clone(&message),
            explained: None,
        });
        let key = w.spec.key.clone();
        self.outbox.push(Decision::Pending {
            workload: key,
            reason,
            message,
        });
    }

    /// [`Engine::set_pending`] for an assigner's explanation: rendered into words only
    /// when it differs from what was last reported. Returns the explanation as stored,
    /// so a caller can share it with other workloads without another allocation.
    pub(crate) fn set_pending_explained(
        &mut self,
        id: WlId,
        reason: PendingReason,
        explanation: Explanation,
    ) -> Arc<Explanation> {
        if let Some(same) = self.unchanged_explanation(id, reason, &explanation) {
            return same;
        }
        let shared = Arc::new(explanation);
        self.report_explained(id, reason, &shared);
        shared
    }

    /// [`Engine::set_pending_explained`] for an explanation already shared.
    pub(crate) fn set_pending_shared(
        &mut self,
        id: WlId,
        reason: PendingReason,
        explanation: &Arc<Explanation>,
    ) {
        if self
            .unchanged_explanation(id, reason, explanation)
            .is_none()
        {
            self.report_explained(id, reason, explanation);
        }
    }

    /// The stored explanation, if the workload last reported this reason and an equal one.
    fn unchanged_explanation(
        &self,
        id: WlId,
        reason: PendingReason,
        explanation: &Explanation,
    ) -> Option<Arc<Explanation>> {
        let p = self.wl(id).pending.as_ref()?;
        p.explained
            .as_ref()
            .filter(|e| p.reason == reason && ***e == *explanation)
            .cloned()
    }

    fn report_explained(
        &mut self,
        id: WlId,
        reason: PendingReason,
        explanation: &Arc<Explanation>,
    ) {
        let message = explanation.render(&self.names, &self.wl(id).spec.pod_sets);
        self.set_pending(id, reason, message);
        if let Some(p) = self.wl_mut(id).pending.as_mut() {
            p.explained = Some(Arc::clone(explanation));
        }
    }

    /// Re-resolves every pending workload's queue: LocalQueues or ClusterQueues changed.
    pub(crate) fn requeue_all(&mut self) {
        let pending: Vec<WlId> = (0..self.wls.len() as WlId)
            .filter(|&id| {
                self.wls[id as usize].as_ref().is_some_and(|w| {
                    matches!(w.state, WlState::Pending)
                        && !self.awaiting_cq.contains_key(&w.spec.key)
                })
            })
            .collect();
        for id in pending {
            self.dequeue(id);
            self.enqueue(id);
        }
    }

    /// When the engine next wants a cycle with no event to prompt it: the earliest
    /// end of a preemption protection that kept a workload waiting, of an admitted
    /// workload's maximum execution time, or an admission fair-sharing sampling
    /// that could reorder heads. Shells run
    /// [`Engine::schedule`] at that time (or earlier).
    pub fn next_wakeup(&self) -> Option<Millis> {
        let protection = self.wakeups.keys().next().copied();
        let expiry = self.expiries.keys().next().copied();
        // Admission fair sharing: a sampling that could reorder a ClusterQueue's heads.
        let sampling = self.afs_wakeup();
        // waitForPodsReady: a timeout, or the end of a requeue backoff.
        let pods_ready = self.pods_ready.next_wakeup();
        // Admission checks: the end of a Retry delay.
        let retry = self.checks.next_wakeup();
        [protection, expiry, sampling, pods_ready, retry]
            .into_iter()
            .flatten()
            .min()
    }

    /// The ClusterQueues under root cohort `root` (one alone when it has no cohort).
    pub(crate) fn members_of(&self, root: NodeId) -> &[CqId] {
        self.root_members
            .get(&root)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Until when an admitted workload whose job reported success is waited for
    /// rather than preempted, if it still is now.
    pub(crate) fn finishing_until(&self, a: &Admitted) -> Option<Millis> {
        let grace = self.config.finishing_grace;
        a.finishing_since
            .filter(|_| grace > 0)
            .map(|since| since.saturating_add(grace))
            .filter(|&until| until > self.now)
    }

    /// Whether the workload is on its way out without a new decision: being evicted,
    /// or finishing within the grace period.
    pub(crate) fn is_leaving(&self, id: super::queue::WlId) -> bool {
        match self
            .wls
            .get(id as usize)
            .and_then(|w| w.as_ref())
            .map(|w| &w.state)
        {
            Some(WlState::Evicting(_)) => true,
            Some(WlState::Admitted(a)) => self.finishing_until(a).is_some(),
            _ => false,
        }
    }

    /// Until when an admitted workload may not be preempted, if it is protected now.
    pub(crate) fn protected_until(&self, a: &Admitted) -> Option<Millis> {
        let t = self.config.preemption_min_runtime;
        (t > 0 && a.since + t > self.now).then_some(a.since + t)
    }

    /// Puts every parked workload back: the configuration changed, so any answer may change.
    pub(crate) fn revive_all(&mut self) {
        self.quota_gen += 1;
        self.selector_gen += 1;
        for c in &mut self.cqs {
            c.queue.revive_all();
        }
    }

    /// Revives parked workloads of every ClusterQueue sharing quota with `cq`:
    /// quota was freed there.
    pub(crate) fn revive_cohort_of(&mut self, cq: CqId) {
        self.quota_gen += 1;
        let root = self.cqs[cq as usize].root;
        let members = self.root_members.get(&root).cloned().unwrap_or_default();
        for c in members {
            self.cqs[c as usize].queue.revive();
        }
    }

    /// Where an admitted workload's pods go (TAS PodSets only).
    pub fn placement(&self, key: &WorkloadKey) -> Option<Vec<crate::placement::PodSetPlacement>> {
        match &self.wl(*self.wl_index.get(key)?).state {
            WlState::Admitted(a) | WlState::Evicting(a) => Some(a.placement.clone()),
            _ => None,
        }
    }

    /// The node inventory, for reports.
    pub fn inventory(&self) -> &crate::placement::Inventory {
        &self.inventory
    }

    fn drain(&mut self, cq: CqId, reason: &str, message: &str) {
        let ids: Vec<WlId> = self.cqs[cq as usize].admitted.iter().copied().collect();
        for id in ids {
            if matches!(self.wl(id).state, WlState::Admitted(_)) {
                self.evict(id, reason, message);
            }
        }
    }

    fn drain_local_queue(&mut self, key: &(String, String)) {
        let ids: Vec<WlId> = self
            .wls
            .iter()
            .enumerate()
            .filter_map(|(i, w)| w.as_ref().map(|w| (i as WlId, w)))
            .filter(|(_, w)| {
                matches!(w.state, WlState::Admitted(_))
                    && *w.spec.key.namespace == *key.0
                    && w.spec.queue_name == key.1
            })
            .map(|(i, _)| i)
            .collect();
        for id in ids {
            self.evict(id, "LocalQueueStopped", "The LocalQueue is stopped");
        }
    }
}

pub(crate) fn invalid(kind: &'static str, name: &str, e: ModelError) -> EngineError {
    EngineError::Invalid {
        kind,
        name: name.to_string(),
        source: e.into(),
    }
}

impl Default for Engine {
    fn default() -> Self {
        Self::new(EngineConfig::default())
    }
}
