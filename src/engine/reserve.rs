//! A preemptor's reservation: the quota and the nodes its victims free, held for it
//! during every cycle until its own turn, so that nothing else takes them first.
//!
//! Quota alone is not enough on topology-aware flavors. A gang that preempted to get
//! a node, a rack or a block held only the quota; when its victims stopped, any head
//! looked at before it (a requeued victim among them) could be placed on the nodes
//! they freed, as the quota left room for both. The preemptor then found no room,
//! preempted again, and the victim came back: with victims that stop at once, a
//! loop within one instant. So the reservation also claims, in the placement
//! inventory, the nodes the preemptor gets once its victims are gone.

use std::sync::Arc;

use super::cycle::CycleState;
use super::flavor::Assignment;
use super::queue::WlId;
use super::state::{CqId, Engine, WlState};

/// What a preemptor holds while its victims stop.
#[derive(Clone, Debug)]
pub(crate) struct Reservation {
    pub cq: CqId,
    /// The assignment it preempted for: its usage is the quota held, its PodSets on
    /// topology-aware flavors are the nodes claimed.
    pub assignment: Arc<Assignment>,
}

impl Engine {
    /// Holds the quota and nodes of assignment `a` for preemptor `id` from now on,
    /// this cycle included (it has just issued its preemptions).
    pub(super) fn reserve(&mut self, c: CqId, id: WlId, a: &Assignment, st: &mut CycleState) {
        self.wl_mut(id).reservation = Some(Reservation {
            cq: c,
            assignment: Arc::new(a.clone()),
        });
        self.preemptors.insert(id);
        self.charge(id);
        st.charged.insert(id);
    }

    /// Charges every waiting preemptor's reservation at the start of a cycle: the quota
    /// and nodes its victims are freeing are spoken for, so neither newer workloads nor
    /// the requeued victims take them (which would make the preemptor preempt again,
    /// forever). In id order: claims are placed one after another, and the order must
    /// not depend on anything but the workloads.
    pub(super) fn charge_reservations(&mut self, st: &mut CycleState) {
        let ids: Vec<WlId> = self.preemptors.iter().copied().collect();
        for id in ids {
            let pending = self
                .wls
                .get(id as usize)
                .and_then(|w| w.as_ref())
                .is_some_and(|w| matches!(w.state, WlState::Pending));
            if !pending {
                self.preemptors.remove(&id);
                continue;
            }
            if self.wl(id).reservation.is_some() {
                self.charge(id);
                st.charged.insert(id);
            }
        }
    }

    /// Adds the reservation's quota to the tree and claims its nodes.
    fn charge(&mut self, id: WlId) {
        let Some(r) = self.wl(id).reservation.clone() else {
            return;
        };
        let node = self.cqs[r.cq as usize].node;
        self.tree.add_amounts(node, &r.assignment.usage);
        self.claim_nodes(id, &r.assignment);
    }

    /// Claims the nodes preemptor `id` is placed on once the victims it waits for are
    /// gone: placed as if they had stopped (Kueue's projected state), and charged on
    /// top of them while they still run, so the nodes count as full for everyone else.
    /// Victims chosen for other preemptors stay: their claims come first. When the gang
    /// cannot be placed even so (a node went away), nothing is claimed; the preemptor
    /// finds out at its turn.
    fn claim_nodes(&mut self, id: WlId, a: &Assignment) {
        let needs = super::topology::needs(&self.names, &self.inventory, &self.wl(id).spec, a);
        if needs.is_empty() {
            return;
        }
        let victims: Vec<WlId> = self
            .wl(id)
            .waiting_for
            .iter()
            .copied()
            .filter(|&v| self.is_leaving(v))
            .collect();
        let held: Vec<_> = victims
            .iter()
            .map(|&v| (v, self.inventory.take(v)))
            .collect();
        // On failure place_all leaves nothing charged.
        let _ = super::topology::place_all(
            &self.names,
            &mut self.inventory,
            id,
            &needs,
            self.config.placement,
        );
        for (v, h) in held.into_iter().rev() {
            self.inventory.restore(v, h);
        }
    }

    /// Takes a preemptor's reservation out of the tree and the inventory, before it is
    /// evaluated itself and at the end of a cycle.
    pub(super) fn discharge(&mut self, id: WlId) {
        let Some(w) = self.wls.get(id as usize).and_then(|w| w.as_ref()) else {
            return;
        };
        if let Some(r) = &w.reservation {
            let node = self.cqs[r.cq as usize].node;
            self.tree.remove_amounts(node, &r.assignment.usage);
        }
        // A pending workload holds nodes only through its claim.
        self.inventory.release(id);
    }

    /// Claims a preemptor's nodes again once its assignment is computed (with its
    /// reservation released) until its decision, so the heads assigned after it in the
    /// same round do not count on them. Its quota stays released: it is decided before
    /// them (preemptors go first in a round), as before nodes were claimed.
    pub(super) fn claim_until_decided(&mut self, id: WlId) {
        if let Some(r) = self.wl(id).reservation.clone() {
            self.claim_nodes(id, &r.assignment);
        }
    }

    /// A preemptor whose victims are gone keeps its reservation while its head is
    /// only deferred to the borrowing pass: otherwise its requeued victims, which
    /// fit within nominal quota, would take the quota back in the first pass and it
    /// would preempt again. Once decided otherwise, the reservation ends.
    pub(super) fn settle_reservation(&mut self, id: WlId, deferred: bool, st: &mut CycleState) {
        if st.charged.contains(&id) {
            // Charged again by this very decision (it preempted).
            return;
        }
        let Some(w) = self.wls.get(id as usize).and_then(|w| w.as_ref()) else {
            return;
        };
        if w.reservation.is_none() {
            return;
        }
        if deferred && matches!(w.state, WlState::Pending) {
            self.charge(id);
            st.charged.insert(id);
        } else {
            self.preemptors.remove(&id);
            self.wl_mut(id).reservation = None;
        }
    }

    /// The preemptors of `c` with a charged reservation that head `id` comes before in
    /// the queue's order (priority, then creation), in id order. Kueue would look at `id`
    /// first, and a reservation exists to keep the quota from workloads that come after
    /// its preemptor, not from those before: held against a higher-priority workload of
    /// the same queue, it let that one find no room, the lower one be admitted, and the
    /// higher one then preempt it. So while `id` is assigned and decided, their
    /// reservations are out of the tree ([`Engine::discharge_charged`]).
    pub(super) fn outranked(
        &self,
        c: CqId,
        id: WlId,
        st: &CycleState,
    ) -> smallvec::SmallVec<[WlId; 2]> {
        // Most cycles have no waiting preemptor: nothing to look up per head then.
        let Some(key) = self.wl(id).qkey.filter(|_| !st.charged.is_empty()) else {
            return smallvec::SmallVec::new();
        };
        let mut outranked: smallvec::SmallVec<[WlId; 2]> = st
            .charged
            .iter()
            .copied()
            .filter(|&p| p != id)
            .filter(|&p| {
                let w = self.wl(p);
                w.reservation.as_ref().is_some_and(|r| r.cq == c) && w.qkey.is_some_and(|k| k > key)
            })
            .collect();
        // In id order: no hash order may reach the tree or the inventory.
        outranked.sort_unstable();
        outranked
    }

    /// Takes the reservations of `ids` still charged out of the tree and the inventory;
    /// they stay in `st.charged` for [`Engine::recharge_charged`] to put back.
    pub(super) fn discharge_charged(&mut self, ids: &[WlId], st: &CycleState) {
        for &p in ids {
            if st.charged.contains(&p) {
                self.discharge(p);
            }
        }
    }

    /// Charges again the reservations [`Engine::discharge_charged`] took out, those still
    /// charged: the preemptors they belong to are looked at in their own turn.
    pub(super) fn recharge_charged(&mut self, ids: &[WlId], st: &CycleState) {
        for &p in ids {
            if st.charged.contains(&p) {
                self.charge(p);
            }
        }
    }
}
