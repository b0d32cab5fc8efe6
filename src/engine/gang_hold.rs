//! The head gang's reservation (kuota's own, off unless `gang_reservation_horizon` is
//! set): when a ClusterQueue's first gang on topology-aware nodes cannot be placed, the nodes
//! it will get at the earliest time the running workloads' runtime bounds allow are held
//! for it, and smaller workloads backfill only where they cannot delay it.
//!
//! The rule, as in Slurm's backfill:
//! - **Earliest start.** An admitted workload's end is its maximumExecutionTimeSeconds
//!   deadline (a workload being evicted ends now). A workload without a bound never
//!   ends as far as the reservation knows: its nodes are not counted on. The start is
//!   the first end after which the gang can be placed with every workload ending by
//!   then gone; there is none, or it lies beyond the horizon, and the gang gets no
//!   reservation (it waits as without the mechanism, so a missing, zero or absurd
//!   bound never blocks anyone forever).
//! - **Hold.** In every cycle the gang's nodes at that start are claimed in the
//!   placement inventory (charged on top of the workloads still on them), so every
//!   other head stays off them.
//! - **Backfill.** A head whose own bound ends by the start, whose priority is higher
//!   than the gang's, or whose ClusterQueue (another one) is under its nominal quota
//!   does not see the hold: it cannot delay the gang, it comes first in Kueue's order
//!   anyway, or the capacity is its own by right.
//! - **Recomputed every cycle.** The start and the nodes are computed again at the
//!   start of every cycle and after the gang's own turn, so workloads that end early
//!   bring it forward and lost nodes move it; a hold that no longer finds nodes within
//!   the horizon is dropped. Each move later and each drop is a
//!   [`GangReservationNotice`] the shell turns into an Event.
//!
//! Like the preemptor's reservation, the claims live only inside a cycle.

use std::sync::Arc;

use super::cycle::CycleState;
use super::flavor::Assignment;
use super::queue::WlId;
use super::quota::NodeId;
use super::resources::FrAmounts;
use super::state::{CqId, Engine, WlState};
use super::{Millis, WorkloadKey};

/// The gang a ClusterQueue holds nodes for, and when it starts at the earliest.
#[derive(Clone, Debug)]
pub(crate) struct GangHold {
    pub cq: CqId,
    pub id: WlId,
    /// The assignment it could not be placed with: its PodSets on topology-aware
    /// flavors are the nodes held.
    pub assignment: Arc<Assignment>,
    pub start: Millis,
}

/// The quota a held gang needs, and where.
struct Quota {
    node: NodeId,
    usage: FrAmounts,
}

/// A reservation that moved later or was dropped, for the shell to report (an Event
/// on the Workload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangReservationNotice {
    pub workload: WorkloadKey,
    /// Kueue-style Event reason: `GangReservationMoved` or `GangReservationDropped`.
    pub reason: &'static str,
    pub message: String,
}

/// Notices kept for a shell that does not collect them: the oldest go first.
const MAX_NOTICES: usize = 1024;

/// Whole seconds of a duration in ms, never negative (for notices).
fn seconds(ms: Millis) -> Millis {
    ms.max(0) / 1000
}

impl Engine {
    /// What happened to reservations since the last call (see [`GangReservationNotice`]).
    pub fn take_gang_reservation_notices(&mut self) -> Vec<GangReservationNotice> {
        std::mem::take(&mut self.gang_notices)
    }

    /// The start each held gang waits for, by workload: for reports and tests.
    pub fn gang_reservations(&self) -> Vec<(WorkloadKey, Millis)> {
        self.gang_holds
            .values()
            .map(|h| (self.wl(h.id).spec.key.clone(), h.start))
            .collect()
    }

    fn gang_notice(&mut self, id: WlId, reason: &'static str, message: String) {
        if self.gang_notices.len() >= MAX_NOTICES {
            self.gang_notices.remove(0);
        }
        let workload = self.wl(id).spec.key.clone();
        self.gang_notices.push(GangReservationNotice {
            workload,
            reason,
            message,
        });
    }

    /// When admitted workload `v` ends as far as its runtime bound says: its deadline,
    /// now when it is being evicted, `None` without a bound.
    fn bound_end(&self, v: WlId) -> Option<Millis> {
        match &self.wls.get(v as usize)?.as_ref()?.state {
            WlState::Admitted(a) => a.deadline,
            WlState::Evicting(_) => Some(self.now),
            _ => None,
        }
    }

    /// Admitted workloads holding nodes, with a known end, soonest first.
    fn known_ends(&self) -> Vec<(Millis, WlId)> {
        let mut ends: Vec<(Millis, WlId)> = self
            .cqs
            .iter()
            .flat_map(|c| c.admitted.iter().copied())
            .filter(|&v| self.inventory.holds(v))
            .filter_map(|v| self.bound_end(v).map(|e| (e.max(self.now), v)))
            .collect();
        ends.sort_unstable();
        ends
    }

    /// Whether gang `g` (with `needs`) can be placed once the listed workloads are gone;
    /// leaves the inventory as it was.
    fn fits_without(
        &mut self,
        g: WlId,
        quota: &Quota,
        needs: &[super::topology::PlacementNeed],
        gone: &[(Millis, WlId)],
    ) -> bool {
        if !self.quota_fits_without(quota, gone) {
            return false;
        }
        let held: Vec<_> = gone
            .iter()
            .map(|&(_, v)| (v, self.inventory.take(v)))
            .collect();
        let ok = super::topology::feasible(
            &self.names,
            &mut self.inventory,
            g,
            needs,
            self.config.placement,
        )
        .is_ok();
        for (v, h) in held.into_iter().rev() {
            self.inventory.restore(v, h);
        }
        ok
    }

    /// Whether the quota `q` asks for is available once the listed workloads are gone
    /// (their usage taken out of the tree for the check only).
    fn quota_fits_without(&mut self, q: &Quota, gone: &[(Millis, WlId)]) -> bool {
        let usages: Vec<(NodeId, FrAmounts)> = gone
            .iter()
            .filter_map(|&(_, v)| match &self.wl(v).state {
                WlState::Admitted(a) | WlState::Evicting(a) => {
                    Some((self.cqs[a.cq as usize].node, a.usage.clone()))
                }
                _ => None,
            })
            .collect();
        for (node, u) in &usages {
            self.tree.remove_amounts(*node, u);
        }
        let fits = q
            .usage
            .iter()
            .all(|&(fr, v)| v <= self.tree.available(q.node, fr));
        for (node, u) in &usages {
            self.tree.add_amounts(*node, u);
        }
        fits
    }

    /// The earliest time gang `g` of ClusterQueue `c` can be admitted with assignment
    /// `a` (its quota available and its pods placed), within the horizon; `None` when
    /// the known ends do not free enough by then.
    fn earliest_start(&mut self, c: CqId, g: WlId, a: &Assignment) -> Option<Millis> {
        let quota = Quota {
            node: self.cqs[c as usize].node,
            usage: a.usage.clone(),
        };
        let needs = super::topology::needs(&self.names, &self.inventory, &self.wl(g).spec, a);
        if needs.is_empty() {
            return None;
        }
        let latest = self
            .now
            .saturating_add(self.config.gang_reservation_horizon);
        let mut ends = self.known_ends();
        ends.retain(|&(e, _)| e <= latest);
        if self.fits_without(g, &quota, &needs, &[]) {
            return Some(self.now);
        }
        if ends.is_empty() || !self.fits_without(g, &quota, &needs, &ends) {
            return None;
        }
        // Freeing more never hurts a placement: the smallest prefix that places it.
        let (mut lo, mut hi) = (1, ends.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.fits_without(g, &quota, &needs, &ends[..mid]) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(ends[lo - 1].0)
    }

    /// Claims the nodes gang `g` gets at `start`: placed as if every workload ending by
    /// then were gone and charged on top of them. `false` when it cannot be placed so.
    fn claim_gang(&mut self, g: WlId, a: &Assignment, start: Millis) -> bool {
        let needs = super::topology::needs(&self.names, &self.inventory, &self.wl(g).spec, a);
        let gone: Vec<(Millis, WlId)> = self
            .known_ends()
            .into_iter()
            .take_while(|&(e, _)| e <= start)
            .collect();
        let held: Vec<_> = gone
            .iter()
            .map(|&(_, v)| (v, self.inventory.take(v)))
            .collect();
        let placed = super::topology::place_all(
            &self.names,
            &mut self.inventory,
            g,
            &needs,
            self.config.placement,
        )
        .is_ok();
        for (v, h) in held.into_iter().rev() {
            self.inventory.restore(v, h);
        }
        placed
    }

    /// Whether `g` may still hold nodes: pending in a queue, active, and not waiting
    /// for victims of its own (its preemption reservation holds for it then).
    fn may_hold(&self, g: WlId) -> bool {
        self.wls
            .get(g as usize)
            .and_then(|w| w.as_ref())
            .is_some_and(|w| {
                matches!(w.state, WlState::Pending)
                    && w.qkey.is_some()
                    && w.spec.active
                    && w.reservation.is_none()
                    && w.waiting_for.is_empty()
            })
    }

    /// Computes the start of `root`'s hold again and claims its nodes; drops it (with a
    /// notice) when it has none within the horizon.
    fn refresh_hold(&mut self, root: NodeId, st: &mut CycleState) {
        let Some(h) = self.gang_holds.get(&root).cloned() else {
            return;
        };
        if st.gang_claimed.contains(&root) {
            self.inventory.release(h.id);
            st.gang_claimed.retain(|&r| r != root);
        }
        if !self.may_hold(h.id) {
            self.gang_holds.remove(&root);
            return;
        }
        let pods: i64 = self
            .wl(h.id)
            .spec
            .pod_sets
            .iter()
            .map(|p| i64::from(p.count))
            .sum();
        let Some(start) = self.earliest_start(h.cq, h.id, &h.assignment) else {
            self.gang_holds.remove(&root);
            let message = format!(
                "the reservation of nodes for the gang's {pods} pods, due to start in {}s, is dropped: with the nodes left, no start within the {}s reservation horizon places them, given the running workloads' runtime bounds",
                seconds(h.start - self.now),
                seconds(self.config.gang_reservation_horizon),
            );
            self.gang_notice(h.id, "GangReservationDropped", message);
            return;
        };
        if start > h.start && h.start > self.now {
            let message = format!(
                "the reservation of nodes for the gang's {pods} pods moved {}s later, to start in {}s (nodes were lost or taken)",
                seconds(start - h.start),
                seconds(start - self.now),
            );
            self.gang_notice(h.id, "GangReservationMoved", message);
        }
        if self.claim_gang(h.id, &h.assignment, start) {
            if let Some(hold) = self.gang_holds.get_mut(&root) {
                hold.start = start;
            }
            st.gang_claimed.push(root);
        } else {
            self.gang_holds.remove(&root);
        }
    }

    /// At the start of a cycle: every hold's start is computed again and its nodes
    /// claimed, in ClusterQueue order.
    pub(super) fn charge_gang_holds(&mut self, st: &mut CycleState) {
        if self.gang_holds.is_empty() {
            return;
        }
        let roots: Vec<NodeId> = self.gang_holds.keys().copied().collect();
        for root in roots {
            self.refresh_hold(root, st);
        }
    }

    /// Releases the claims that head `id` may ignore (it is the gang itself, it ends by
    /// the start, or it has a higher priority), and returns their ClusterQueues so
    /// [`Engine::reclaim_gang_holds`] puts them back after the head is looked at.
    pub(super) fn lift_gang_holds(&mut self, id: WlId, st: &mut CycleState) -> Vec<NodeId> {
        if st.gang_claimed.is_empty() {
            return Vec::new();
        }
        let w = self.wl(id);
        let end = w.spec.max_execution.map(|m| {
            self.now
                .saturating_add(m.saturating_sub(w.spec.past_execution).max(0))
        });
        let priority = w.spec.priority;
        let own = w.cq.map(|c| self.cqs[c as usize].node);
        let mut lifted = Vec::new();
        for &root in &st.gang_claimed {
            let Some(h) = self.gang_holds.get(&root) else {
                continue;
            };
            let ignores = h.id == id
                || priority > self.wl(h.id).spec.priority
                || end.is_some_and(|e| e <= h.start)
                || own.is_some_and(|n| n != root && self.within_nominal(n, &h.assignment));
            if ignores {
                lifted.push(root);
            }
        }
        for &root in &lifted {
            if let Some(h) = self.gang_holds.get(&root) {
                self.inventory.release(h.id);
            }
        }
        st.gang_claimed.retain(|r| !lifted.contains(r));
        lifted
    }

    /// Whether ClusterQueue node `n` uses less than its nominal quota of every
    /// (flavor, resource) the held gang asks for: its workloads then have a right to
    /// that capacity that another queue's reservation does not override.
    fn within_nominal(&self, n: NodeId, a: &Assignment) -> bool {
        let limits = &self.tree.nodes[n as usize].limits;
        a.usage
            .iter()
            .all(|&(fr, _)| self.tree.usage(n, fr) < limits.nominal.get(fr))
    }

    /// Puts back the claims [`Engine::lift_gang_holds`] released, computing them again
    /// (the head may have been admitted on some of their nodes, ending by the start).
    pub(super) fn reclaim_gang_holds(&mut self, lifted: Vec<NodeId>, st: &mut CycleState) {
        for root in lifted {
            let Some(h) = self.gang_holds.get(&root).cloned() else {
                continue;
            };
            if self.may_hold(h.id) && self.claim_gang(h.id, &h.assignment, h.start) {
                st.gang_claimed.push(root);
            } else {
                self.refresh_hold(root, st);
            }
        }
    }

    /// A head of `c` that stays pending with assignment `a`: when quota is there and
    /// only the nodes are short, it becomes its ClusterQueue's held gang if the queue holds
    /// none yet. The gang's own hold is computed again by the caller after its turn.
    pub(super) fn consider_gang_hold(
        &mut self,
        c: CqId,
        id: WlId,
        a: &Assignment,
        st: &mut CycleState,
    ) {
        if self.config.gang_reservation_horizon <= 0 {
            return;
        }
        let root = self.cqs[c as usize].node;
        if self.gang_holds.contains_key(&root) || !self.may_hold(id) {
            return;
        }
        let Some(start) = self.earliest_start(c, id, a) else {
            return;
        };
        self.gang_holds.insert(
            root,
            GangHold {
                cq: c,
                id,
                assignment: Arc::new(a.clone()),
                start,
            },
        );
        if self.claim_gang(id, a, start) {
            st.gang_claimed.push(root);
        } else {
            self.gang_holds.remove(&root);
        }
    }

    /// At the end of a cycle: claims are released (the inventory holds real usage only
    /// between cycles); holds of gangs that were admitted or preempt are forgotten.
    pub(super) fn discharge_gang_holds(&mut self, st: &mut CycleState) {
        for root in std::mem::take(&mut st.gang_claimed) {
            if let Some(h) = self.gang_holds.get(&root) {
                self.inventory.release(h.id);
            }
        }
        let gone: Vec<NodeId> = self
            .gang_holds
            .iter()
            .filter(|(_, h)| !self.may_hold(h.id))
            .map(|(&r, _)| r)
            .collect();
        for r in gone {
            self.gang_holds.remove(&r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::obj;
    use super::super::{Engine, EngineConfig, Event, WorkloadKey};
    use crate::api;

    const HORIZON: i64 = 3_600_000;

    fn node(name: &str, rack: &str) -> Event {
        Event::NodeUpserted(Box::new(obj(&format!(
            "metadata: {{name: {name}, labels: {{rack: {rack}, kubernetes.io/hostname: {name}}}}}\nstatus: {{allocatable: {{nvidia.com/gpu: '4', pods: '110'}}}}"
        ))))
    }

    fn workload(
        name: &str,
        bound: Option<i32>,
        host: Option<&str>,
        count: i32,
        level: &str,
    ) -> Event {
        let mut w: api::Workload = obj(&format!(
            "metadata: {{namespace: team, name: {name}}}\nspec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: {count}\n    topologyRequest: {{required: {level}}}\n    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '4'}}}}}}]}}}}"
        ));
        w.spec.maximum_execution_time_seconds = bound;
        if let Some(h) = host
            && let Some(spec) = w.spec.pod_sets[0].template.spec.as_mut()
        {
            spec.node_selector =
                Some([("kubernetes.io/hostname".to_string(), h.to_string())].into());
        }
        Event::WorkloadUpserted(w)
    }

    /// Racks r1 (a1, a2) and r2 (c1, c2) of 4-GPU hosts; a1 runs a workload with
    /// bound `a1_bound`, c1 and c2 ones bounded to 10,000 s; a gang needing a rack waits.
    fn engine(a1_bound: Option<i32>) -> Engine {
        engine_with(a1_bound, 10_000)
    }

    /// As [`engine`], with c1's and c2's workloads bounded to `c_bound` seconds.
    fn engine_with(a1_bound: Option<i32>, c_bound: i32) -> Engine {
        let mut e = Engine::new(EngineConfig {
            gang_reservation_horizon: HORIZON,
            ..EngineConfig::default()
        });
        let objects = [
            Event::TopologyUpserted(obj(
                "metadata: {name: t}\nspec: {levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}",
            )),
            Event::ResourceFlavorUpserted(obj("metadata: {name: f}\nspec: {topologyName: t}")),
            Event::ClusterQueueUpserted(obj(
                "metadata: {name: cq}\nspec: {namespaceSelector: {}, resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: f, resources: [{name: nvidia.com/gpu, nominalQuota: '64'}]}]}]}",
            )),
            Event::LocalQueueUpserted(obj(
                "metadata: {namespace: team, name: lq}\nspec: {clusterQueue: cq}",
            )),
            node("a1", "r1"),
            node("a2", "r1"),
            node("c1", "r2"),
            node("c2", "r2"),
            workload("w-a1", a1_bound, Some("a1"), 1, "kubernetes.io/hostname"),
            workload(
                "w-c1",
                Some(c_bound),
                Some("c1"),
                1,
                "kubernetes.io/hostname",
            ),
            workload(
                "w-c2",
                Some(c_bound),
                Some("c2"),
                1,
                "kubernetes.io/hostname",
            ),
        ];
        for ev in objects {
            e.apply(0, ev).unwrap();
        }
        assert_eq!(super::super::tests::admitted(&e.schedule(0)).len(), 3);
        e.apply(1_000, workload("gang", None, None, 2, "rack"))
            .unwrap();
        assert!(super::super::tests::admitted(&e.schedule(1_000)).is_empty());
        e
    }

    fn gang() -> WorkloadKey {
        WorkloadKey::new("team", "gang")
    }

    #[test]
    fn the_gang_holds_its_earliest_rack_and_only_what_ends_before_backfills() {
        let mut e = engine(Some(100));
        assert_eq!(e.gang_reservations(), vec![(gang(), 100_000)]);
        e.apply(
            2_000,
            workload("long", Some(10_000), None, 1, "kubernetes.io/hostname"),
        )
        .unwrap();
        assert!(super::super::tests::admitted(&e.schedule(2_000)).is_empty());
        e.apply(
            3_000,
            workload("short", Some(50), None, 1, "kubernetes.io/hostname"),
        )
        .unwrap();
        assert_eq!(
            super::super::tests::admitted(&e.schedule(3_000)),
            vec!["short"]
        );
        assert!(e.take_gang_reservation_notices().is_empty());
    }

    #[test]
    fn without_runtime_bounds_nothing_is_held() {
        let mut e = engine(None);
        assert!(e.gang_reservations().is_empty());
        e.apply(
            2_000,
            workload("long", Some(10_000), None, 1, "kubernetes.io/hostname"),
        )
        .unwrap();
        assert_eq!(
            super::super::tests::admitted(&e.schedule(2_000)),
            vec!["long"]
        );
    }

    #[test]
    fn a_start_beyond_the_horizon_holds_nothing() {
        // An absurd bound (about three years): the nodes are not counted on.
        let mut e = engine(Some(100_000_000));
        assert!(e.gang_reservations().is_empty());
        e.apply(
            2_000,
            workload("long", Some(10_000), None, 1, "kubernetes.io/hostname"),
        )
        .unwrap();
        assert_eq!(
            super::super::tests::admitted(&e.schedule(2_000)),
            vec!["long"]
        );
    }

    #[test]
    fn losing_a_held_node_drops_the_reservation_with_a_notice() {
        let mut e = engine(Some(100));
        e.apply(2_000, Event::NodeDeleted("a2".to_string()))
            .unwrap();
        e.schedule(2_000);
        assert!(e.gang_reservations().is_empty());
        let notices = e.take_gang_reservation_notices();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].workload, gang());
        assert_eq!(notices[0].reason, "GangReservationDropped");
        assert_eq!(
            notices[0].message,
            "the reservation of nodes for the gang's 2 pods, due to start in 98s, is dropped: with the nodes left, no start within the 3600s reservation horizon places them, given the running workloads' runtime bounds"
        );
        // Nothing holds a2's rack mate any more: a long workload may take a1's place later.
        assert!(e.take_gang_reservation_notices().is_empty());
    }

    #[test]
    fn losing_a_held_node_moves_the_reservation_to_the_next_rack_with_a_notice() {
        // Rack r2 frees at 3,000 s, within the horizon: the hold moves there.
        let mut e = engine_with(Some(100), 3_000);
        assert_eq!(e.gang_reservations(), vec![(gang(), 100_000)]);
        e.apply(2_000, Event::NodeDeleted("a2".to_string()))
            .unwrap();
        e.schedule(2_000);
        assert_eq!(e.gang_reservations(), vec![(gang(), 3_000_000)]);
        let notices = e.take_gang_reservation_notices();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].workload, gang());
        assert_eq!(notices[0].reason, "GangReservationMoved");
        assert_eq!(
            notices[0].message,
            "the reservation of nodes for the gang's 2 pods moved 2900s later, to start in 2998s (nodes were lost or taken)"
        );
    }
}
