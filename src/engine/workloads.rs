//! How Workload events change the engine: a new or changed Workload is queued or
//! restored with its admission, and an admission is released, finished or evicted.

use std::sync::Arc;

use super::model::{PriorityLookup, WorkloadSpec};
use super::queue::WlId;
use super::state::{Admitted, CqId, Engine, EngineError, Wl, WlState, invalid};
use super::{Decision, WorkloadKey};
use crate::api;

impl Engine {
    /// A Workload was created or changed: a new one is queued, or restored with the
    /// admission the API says it holds (restart recovery); a known one is updated.
    pub(crate) fn upsert_workload(&mut self, wl: &api::Workload) -> Result<(), EngineError> {
        let name = format!(
            "{}/{}",
            wl.metadata.namespace.clone().unwrap_or_default(),
            wl.metadata.name.clone().unwrap_or_default()
        );
        let priority = PriorityLookup {
            workload_classes: &self.workload_classes,
            pod_classes: &self.pod_classes,
        }
        .resolve(wl);
        let mut spec = WorkloadSpec::from_api(&mut self.names, wl, priority, self.now)
            .map_err(|e| invalid("Workload", &name, e))?;
        spec.pod_sets = self
            .pod_set_pool
            .share(spec.pod_sets_hash, Arc::clone(&spec.pod_sets));
        let finished = wl.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == api::constants::WORKLOAD_FINISHED && c.status == "True")
        });
        if let Some(&id) = self.wl_index.get(&spec.key) {
            self.pods_ready_status_seen(id, wl);
            self.update_known(id, wl, spec);
            self.pods_ready_condition_seen(id, wl);
            return Ok(());
        }
        self.seq += 1;
        let w = Wl {
            spec,
            state: WlState::Pending,
            cq: None,
            qkey: None,
            seq: self.seq,
            pending: None,
            resume: Default::default(),
            resume_gen: 0,
            waiting_for: vec![],
            reservation: None,
            namespace_ok: None,
        };
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.wls[id as usize] = Some(w);
                id
            }
            None => {
                self.wls.push(Some(w));
                (self.wls.len() - 1) as WlId
            }
        };
        let key = self.wl(id).spec.key.clone();
        self.wl_index.insert(key, id);
        self.pods_ready_status_seen(id, wl);
        if finished {
            self.wl_mut(id).state = WlState::Finished;
            return Ok(());
        }
        let admission = wl.status.as_ref().and_then(|s| s.admission.clone());
        if let Some(adm) = admission {
            // Restart recovery: the API says it holds quota, so it does, even over quota.
            if !self.restore_admitted(id, adm.clone(), &name)? {
                let key = self.wl(id).spec.key.clone();
                self.awaiting_cq.insert(key, adm);
            }
            self.pods_ready_condition_seen(id, wl);
            self.checks_seen(id, wl);
            return Ok(());
        }
        self.enqueue(id);
        Ok(())
    }

    /// A Workload the engine already holds changed: a pending one is re-keyed (or kept
    /// parked for its ClusterQueue), an admitted one deactivated or its execution time
    /// refreshed.
    fn update_known(&mut self, id: WlId, wl: &api::Workload, mut spec: WorkloadSpec) {
        let w = self.wls[id as usize]
            .as_mut()
            .expect("index points at a live slot");
        let parked = self.awaiting_cq.contains_key(&spec.key);
        match &w.state {
            WlState::Pending if parked => {
                // Still waiting for its ClusterQueue: keep it parked with the latest
                // admission, or queue it if the admission was cleared meanwhile.
                let admission = wl.status.as_ref().and_then(|s| s.admission.clone());
                let key = spec.key.clone();
                w.spec = spec;
                match admission {
                    Some(adm) => {
                        self.awaiting_cq.insert(key, adm);
                    }
                    None => {
                        self.awaiting_cq.remove(&key);
                        self.enqueue(id);
                    }
                }
            }
            WlState::Pending => {
                // Priority or activation may change while pending: re-key it.
                self.dequeue(id);
                let w = self.wls[id as usize]
                    .as_mut()
                    .expect("index points at a live slot");
                if wl.status.as_ref().is_some_and(|s| s.admission.is_some()) {
                    // Written before the requeue the engine already applied: its
                    // accumulated time lacks the admission that just ended.
                    spec.past_execution = w.spec.past_execution;
                }
                w.spec = spec;
                self.enqueue(id);
            }
            WlState::Admitted(_) if !spec.active => {
                w.spec.active = false;
                self.evict(id, "Deactivated", "The workload is deactivated");
            }
            WlState::Admitted(_) => {
                self.refresh_past_execution(id, wl, &spec);
                self.checks_seen(id, wl);
            }
            _ => {}
        }
    }

    /// Charges a restored admission to its ClusterQueue; `false` when that ClusterQueue
    /// is not known yet (the caller parks the workload until it is).
    fn restore_admitted(
        &mut self,
        id: WlId,
        adm: api::Admission,
        name: &str,
    ) -> Result<bool, EngineError> {
        let Some(&cq) = self.cq_index.get(&adm.cluster_queue) else {
            return Ok(false);
        };
        let usage = super::model::admission_usage(&mut self.names, &adm)
            .map_err(|e| invalid("Workload", name, e))?;
        // Never in a queue and an admission at once (a parked workload is not queued,
        // but a re-upsert may have queued it meanwhile).
        self.dequeue(id);
        let (placement, complete) = self.restore_placement(id, &adm);
        if !complete {
            self.unresolved_restores.insert(id);
        }
        // Its execution time counts from its Admitted condition, as Kueue counts it,
        // so a restart neither forgets nor repeats the time it has run.
        let started = self
            .wl(id)
            .spec
            .admitted_since
            .map_or(self.now, |t| t.min(self.now));
        let a = Admitted {
            cq,
            usage,
            placement,
            admission: Arc::new(adm),
            // The engine cannot know how long it ran before a restart; counting
            // from now can only protect it longer, never preempt it too early.
            since: self.now,
            started,
            deadline: self.track_deadline(id, started),
            finishing_since: None,
        };
        let node = self.cqs[cq as usize].node;
        self.tree.add_amounts(node, &a.usage);
        self.cqs[cq as usize].admitted.insert(id);
        self.afs_charge(id, &a.usage, super::afs::Charge::Restore);
        self.wl_mut(id).state = WlState::Admitted(a);
        self.pods_ready_admitted(id, started);
        Ok(true)
    }

    /// Charges the admitted workloads parked for ClusterQueue `cq_name`, now that it exists.
    pub(crate) fn restore_awaiting(&mut self, cq_name: &str) -> Result<(), EngineError> {
        if self.awaiting_cq.is_empty() {
            return Ok(());
        }
        let ready: Vec<WorkloadKey> = self
            .awaiting_cq
            .iter()
            .filter(|(_, adm)| adm.cluster_queue == cq_name)
            .map(|(k, _)| k.clone())
            .collect();
        for key in ready {
            let (Some(adm), Some(&id)) = (self.awaiting_cq.remove(&key), self.wl_index.get(&key))
            else {
                continue;
            };
            self.restore_admitted(id, adm, &key.to_string())?;
        }
        Ok(())
    }
    /// The admitted workload's job reported success: it is waited for, not preempted,
    /// until the grace period ends; every ClusterQueue of its cohort looks again then,
    /// in case it is still running and a preemptor needs it.
    pub(crate) fn workload_finishing(&mut self, key: &WorkloadKey) {
        let Some(&id) = self.wl_index.get(key) else {
            return;
        };
        let now = self.now;
        let WlState::Admitted(a) = &mut self.wl_mut(id).state else {
            return;
        };
        if a.finishing_since.is_some() {
            return;
        }
        a.finishing_since = Some(now);
        let cq = a.cq;
        let Some(until) = self.finishing_until(match &self.wl(id).state {
            WlState::Admitted(a) => a,
            _ => return,
        }) else {
            return;
        };
        let root = self.cqs[cq as usize].root;
        let members: Vec<CqId> = self.members_of(root).to_vec();
        self.wakeups.entry(until).or_default().extend(members);
    }

    /// Releases an admitted or evicting workload's quota. `done` = finished or
    /// deleted; otherwise it was evicted and goes back to its queue.
    pub(crate) fn release(&mut self, key: &WorkloadKey, done: bool) {
        let Some(&id) = self.wl_index.get(key) else {
            return;
        };
        let state = std::mem::replace(&mut self.wl_mut(id).state, WlState::Pending);
        match state {
            WlState::Admitted(a) | WlState::Evicting(a) => {
                self.untrack_deadline(id, a.deadline);
                self.pods_ready_released(id);
                self.afs_charge(id, &a.usage, super::afs::Charge::Release);
                let node = self.cqs[a.cq as usize].node;
                self.tree.remove_amounts(node, &a.usage);
                let held_nodes = self.inventory.holds(id);
                self.inventory.release(id);
                self.cqs[a.cq as usize].admitted.remove(&id);
                if held_nodes {
                    // Nodes are shared by every ClusterQueue with a flavor on them, cohort
                    // or not: any parked gang may fit now.
                    self.quota_gen += 1;
                    for c in &mut self.cqs {
                        c.queue.revive();
                    }
                } else {
                    self.revive_cohort_of(a.cq);
                }
                if done {
                    self.wl_mut(id).state = WlState::Finished;
                } else {
                    let w = self.wl_mut(id);
                    w.pending = None;
                    self.enqueue(id);
                }
            }
            WlState::Pending => {
                if done {
                    self.dequeue(id);
                    self.wl_mut(id).state = WlState::Finished;
                }
            }
            WlState::Finished => self.wl_mut(id).state = WlState::Finished,
        }
    }

    /// Marks an admitted workload as evicting; it keeps its quota until the shell
    /// reports [`Event::WorkloadEvicted`].
    pub(crate) fn evict(&mut self, id: WlId, reason: &str, message: &str) {
        let w = self.wl_mut(id);
        if !matches!(w.state, WlState::Admitted(_)) {
            return;
        }
        if let WlState::Admitted(a) = std::mem::replace(&mut w.state, WlState::Finished) {
            w.state = WlState::Evicting(a);
        }
        let key = w.spec.key.clone();
        self.outbox.push(Decision::Evict {
            workload: key,
            reason: reason.into(),
            message: message.into(),
        });
    }

    /// Evicts the workloads that had pods on a node that went away.
    pub(crate) fn evict_owners(&mut self, owners: Vec<WlId>, why: &str) {
        for id in owners {
            if self.wls.get(id as usize).is_some_and(|w| w.is_some()) {
                self.evict(
                    id,
                    "NodeFailures",
                    &format!("Workload was evicted because {why}"),
                );
            }
        }
    }

    /// Re-charges the nodes of a restored admission from its hostname-level topology assignment.
    /// Also returns whether every host was known: a restored workload can arrive before
    /// its Nodes (informers start in any order), and its pods must still be charged.
    fn restore_placement(
        &mut self,
        id: WlId,
        adm: &api::Admission,
    ) -> (Vec<crate::placement::PodSetPlacement>, bool) {
        let mut out = Vec::new();
        let mut complete = true;
        for psa in &adm.pod_set_assignments {
            let Some(ta) = &psa.topology_assignment else {
                continue;
            };
            if ta
                .levels
                .last()
                .is_none_or(|l| l != api::constants::HOSTNAME_LABEL)
            {
                continue;
            }
            let per_pod: Vec<(u32, i64)> = psa
                .resource_usage
                .iter()
                .filter_map(|(r, q)| {
                    let total = api::quantity::resource_value(r, q).ok()?;
                    let count = i64::from(psa.count.unwrap_or(1).max(1));
                    Some((self.names.resource(r), total / count))
                })
                .collect();
            let flavor = psa
                .flavors
                .values()
                .find(|f| self.inventory.is_tas(f))
                .cloned()
                .unwrap_or_default();
            let mut nodes = Vec::new();
            let mut charge = Vec::new();
            for slice in &ta.slices {
                for (values, count) in slice.domains().unwrap_or_default() {
                    let host = values.last().cloned().unwrap_or_default();
                    if let Some(idx) = self.inventory.node_idx(&host) {
                        charge.push((idx, count));
                        nodes.push((self.inventory.node_name(idx).to_string(), count));
                    } else {
                        complete = false;
                    }
                }
            }
            self.inventory.assign(id, &per_pod, &charge);
            out.push(crate::placement::PodSetPlacement { flavor, nodes });
        }
        (out, complete)
    }

    /// Re-charges restored workloads whose hosts were unknown when they were restored.
    pub(crate) fn resolve_restores(&mut self) {
        for id in std::mem::take(&mut self.unresolved_restores) {
            let adm = match self.wls.get(id as usize).and_then(|w| w.as_ref()) {
                Some(Wl {
                    state: WlState::Admitted(a) | WlState::Evicting(a),
                    ..
                }) => Arc::clone(&a.admission),
                _ => continue,
            };
            self.inventory.release(id);
            let (placement, complete) = self.restore_placement(id, &adm);
            if let Some(WlState::Admitted(a) | WlState::Evicting(a)) =
                self.wls[id as usize].as_mut().map(|w| &mut w.state)
            {
                a.placement = placement;
            }
            if !complete {
                self.unresolved_restores.insert(id);
            }
        }
    }
}
