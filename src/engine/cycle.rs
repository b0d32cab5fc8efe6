//! One scheduling cycle: admit everything that fits, in Kueue's order, each
//! candidate checked against the usage already granted earlier in the same cycle.
//!
//! Kueue pops one head per ClusterQueue per cycle, which caps throughput at one
//! admission per queue per cycle (Kueue issue 14477). Here a cycle proceeds in
//! rounds: each round takes the next candidate of every open ClusterQueue, orders
//! them like Kueue orders heads, and admits, preempts or parks them; a queue stays
//! open until it runs out of candidates or, under StrictFIFO, its head blocks.

use super::{FastMap, FastSet};
use std::sync::Arc;

use super::explain::Explanation;
use super::flavor::{Assignment, Mode};
use super::model::Policy;
use super::preempt::{self, Target};
use super::queue::{QueueKey, WlId};
use super::quota::NodeId;
use super::resources::FrAmounts;
use super::state::{Admitted, CqId, Engine, WlState};
use super::{Decision, Millis, PendingReason};
use crate::api;

/// A head being considered in a round.
struct Head {
    cq: CqId,
    id: WlId,
    assignment: Assignment,
    /// Ordering key: (fair share after admission, borrowing level, -priority, created, seq).
    order: (i64, u32, i32, Millis, u64),
    /// Under fair sharing, its ancestors' shares (see [`super::fair::share_path`]).
    fair_path: smallvec::SmallVec<[(NodeId, i64); 2]>,
    /// How many protection wake-ups the cycle had noted before this head was
    /// assigned: any noted after, for its queue, mean protection kept it waiting.
    wake_mark: usize,
    /// It preempted in an earlier cycle and its victims are gone.
    preemptor: bool,
    /// Preemptors of its queue that come after it in the queue's order: their
    /// reservations do not count against it (see [`Engine::outranked`]).
    outranked: smallvec::SmallVec<[WlId; 2]>,
}

/// What happened to a head; decides whether its ClusterQueue stays open.
enum Outcome {
    Admitted,
    /// Not admitted; under StrictFIFO the queue blocks.
    Blocked,
    /// It needs to borrow: left for the borrowing pass.
    Deferred,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Only what fits within the ClusterQueue's nominal quota.
    Nominal,
    Borrowing,
}

/// A pending message: words, or an assigner's explanation rendered only on change.
#[derive(Clone)]
enum Why {
    Text(Arc<str>),
    Explained(Arc<Explanation>),
}

/// A pending message about to be reported for the first time this cycle.
enum Message {
    Text(String),
    Explained(Explanation),
}

/// What one cycle remembers across its passes and rounds.
#[derive(Default)]
pub(super) struct CycleState {
    /// Shapes that already failed in a ClusterQueue this cycle fail again: usage only
    /// grows within a cycle, so there is no need to evaluate them twice.
    failed: FastMap<(CqId, u64), (PendingReason, Why)>,
    /// Victims of the preemptions issued this cycle, per cohort root: later preemptors
    /// in the cohort search as if they were gone (see [`preempt::find_targets`]).
    issued: FastMap<NodeId, Vec<WlId>>,
    /// Quota held for the rest of the cycle by heads that needed preemption but found
    /// nothing to preempt (Kueue's reserveCapacityForUnreclaimablePreempt).
    /// Its ClusterQueue's own next head gets it back: Kueue looks at one head per
    /// ClusterQueue per cycle, so the hold only ever kept other queues out.
    held: Vec<(CqId, NodeId, FrAmounts)>,
    /// Heads that would hold quota while borrowing are deferred to the borrowing pass
    /// (Kueue looks at entries that borrow after those that do not); what the first
    /// look found is what their pending message says, as Kueue's nomination does.
    first_look: FastMap<WlId, Explanation>,
    /// Victims of this cycle and workloads admitted in it: neither is preempted again
    /// in the same cycle (Kueue's rule too).
    untouchable: FastSet<WlId>,
    /// Preemptors whose reservation is charged to the tree (and whose nodes are
    /// claimed) right now.
    pub(super) charged: FastSet<WlId>,
    /// ClusterQueues (quota-tree nodes) whose held gang's nodes are claimed right now (see `gang_hold.rs`).
    pub(super) gang_claimed: Vec<NodeId>,
}

impl Engine {
    /// Runs one scheduling cycle at `now` and returns the decisions to carry out.
    pub fn schedule(&mut self, now: Millis) -> Vec<Decision> {
        self.now = self.now.max(now);
        self.inventory.ensure_trees();
        self.park_inactive();
        self.expire(now);
        self.pods_ready_tick(now);
        self.checks_tick(now);
        self.afs_catch_up(now);
        // Sized for a few failing shapes and one admission per ClusterQueue: growing
        // these maps mid-cycle (rehashing) cost more than filling them.
        let mut st = CycleState {
            failed: FastMap::with_capacity_and_hasher(self.cqs.len() * 4, Default::default()),
            untouchable: FastSet::with_capacity_and_hasher(self.cqs.len(), Default::default()),
            ..CycleState::default()
        };
        self.oracle.get_mut().clear();
        self.wake_protected(now);
        self.charge_reservations(&mut st);
        self.charge_gang_holds(&mut st);
        // Two passes, as Kueue orders heads: first everything that fits within nominal
        // quota, then what needs to borrow. A borrower never takes quota that a
        // non-borrowing workload in the same cohort is about to use, so a preemption
        // victim that requeues cannot take back what its preemptor reclaimed.
        for pass in [Pass::Nominal, Pass::Borrowing] {
            self.run_pass(pass, &mut st);
        }
        // Reservations live only inside cycles: outside, the tree and the inventory hold
        // real usage only.
        // In id order: the set's order must not reach the tree (sums commute, but the
        // rule is that no hash order feeds engine state).
        self.discharge_gang_holds(&mut st);
        let mut charged: Vec<WlId> = std::mem::take(&mut st.charged).into_iter().collect();
        charged.sort_unstable();
        for id in charged {
            self.discharge(id);
        }
        for (_, node, amounts) in std::mem::take(&mut st.held) {
            self.tree.remove_amounts(node, &amounts);
        }
        for (until, cq) in std::mem::take(&mut self.oracle.get_mut().wakeups) {
            self.wakeups.entry(until).or_default().insert(cq);
        }
        let mut decisions = std::mem::take(&mut self.outbox);
        drop_superseded_pending(&mut decisions);
        decisions
    }

    /// Looks again at the ClusterQueues whose workloads waited for a preemption
    /// protection that has ended by `now`: a workload may be preemptible now, and
    /// nothing else would revive what was parked because of it.
    fn wake_protected(&mut self, now: Millis) {
        while let Some(entry) = self.wakeups.first_entry() {
            if *entry.key() > now {
                break;
            }
            for cq in entry.remove() {
                if let Some(c) = self.cqs.get_mut(cq as usize) {
                    c.queue.revive();
                }
            }
            // Flavor searches resume past flavors that could not preempt; start over.
            self.quota_gen += 1;
        }
    }

    fn run_pass(&mut self, pass: Pass, st: &mut CycleState) {
        let n = self.cqs.len();
        let mut cursor: Vec<Option<QueueKey>> = vec![None; n];
        // Queues ordered by LocalQueue usage walk their heads their own way; without
        // admission fair sharing this stays empty and costs nothing.
        let mut afs: Vec<Option<super::afs::Cursor>> =
            if self.config.admission_fair_sharing.is_some() {
                (0..n as CqId).map(|c| self.afs_cursor(c)).collect()
            } else {
                Vec::new()
            };
        let mut open: Vec<CqId> = (0..n as CqId)
            .filter(|&c| !self.cqs[c as usize].deleted && self.cqs[c as usize].queue.has_active())
            .collect();
        while !open.is_empty() {
            let mut heads = Vec::with_capacity(open.len());
            let mut still_open = Vec::with_capacity(open.len());
            for &c in &open {
                let afs_cursor = afs.get_mut(c as usize).and_then(Option::as_mut);
                if let Some(id) = self.next_head(c, &mut cursor[c as usize], afs_cursor, st) {
                    if !st.held.is_empty() {
                        self.release_held(c, st);
                    }
                    let wake_mark = self.oracle.get_mut().wakeups.len();
                    let preemptor = !st.charged.is_empty() && st.charged.remove(&id);
                    if preemptor {
                        // Its victims are gone: it now competes with its own reservation
                        // released (settle_reservation charges it again if the head is
                        // deferred).
                        self.discharge(id);
                    }
                    let lifted = self.lift_gang_holds(id, st);
                    let outranked = self.outranked(c, id, st);
                    self.discharge_charged(&outranked, st);
                    let assignment = self.assign(c, id, None, st);
                    self.recharge_charged(&outranked, st);
                    if !lifted.is_empty() {
                        self.reclaim_gang_holds(lifted, st);
                    }
                    if preemptor {
                        self.claim_until_decided(id);
                    }
                    let mut head = self.head(c, id, assignment, wake_mark);
                    head.preemptor = preemptor;
                    head.outranked = outranked;
                    heads.push(Some(head));
                    still_open.push(c);
                }
            }
            if heads.is_empty() {
                break;
            }
            // Sort positions, not heads: a head carries a whole assignment, and moving
            // a thousand of them around in a sort showed up as memcpy in profiles.
            let nested = heads.iter().flatten().any(|h| h.fair_path.len() > 1);
            let mut order: Vec<u32> = if nested {
                // Kueue compares heads under nested cohorts where their paths part.
                let paths: Vec<&[(NodeId, i64)]> =
                    heads.iter().flatten().map(|h| &h.fair_path[..]).collect();
                let keys: Vec<_> = heads.iter().flatten().map(|h| h.order).collect();
                super::fair::tournament(&paths, &keys)
            } else {
                let mut order: Vec<u32> = (0..heads.len() as u32).collect();
                order.sort_unstable_by_key(|&i| heads[i as usize].as_ref().map(|h| h.order));
                order
            };
            // Preemptors whose victims are gone go first (as Kueue's
            // PrioritizePreemptorWorkloads): a head ordered before one would take the
            // quota its victims freed, which it then preempts for again, forever.
            if heads.iter().flatten().any(|h| h.preemptor) {
                order.sort_by_key(|&i| !heads[i as usize].as_ref().is_some_and(|h| h.preemptor));
            }
            let mut closed: FastSet<CqId> = FastSet::default();
            for i in order {
                // Each position occurs once in `order`.
                let Some(mut h) = heads[i as usize].take() else {
                    continue;
                };
                if h.preemptor {
                    // Its turn: the nodes it claimed are its own to take.
                    self.inventory.release(h.id);
                }
                let lifted = self.lift_gang_holds(h.id, st);
                let outranked = std::mem::take(&mut h.outranked);
                self.discharge_charged(&outranked, st);
                // An earlier admission this round may have used the quota it counted on.
                if h.assignment.mode() == Mode::Fit && !self.fits_now(h.cq, &h.assignment) {
                    h.assignment = self.assign(h.cq, h.id, None, st);
                }
                let (cq, id) = (h.cq, h.id);
                let outcome = self.decide(h, pass, st);
                self.recharge_charged(&outranked, st);
                if !lifted.is_empty() {
                    self.reclaim_gang_holds(lifted, st);
                }
                self.settle_reservation(id, matches!(outcome, Outcome::Deferred), st);
                match outcome {
                    Outcome::Admitted => {}
                    // The rest of this queue waits for the borrowing pass, keeping its order.
                    Outcome::Deferred => {
                        closed.insert(cq);
                    }
                    Outcome::Blocked => {
                        if self.cqs[cq as usize].spec.strict_fifo {
                            closed.insert(cq);
                        }
                    }
                }
            }
            open = still_open
                .into_iter()
                .filter(|c| !closed.contains(c))
                .collect();
        }
    }

    /// Pending workloads of inactive ClusterQueues get the reason and are parked
    /// until a change to queues or quota revives them.
    fn park_inactive(&mut self) {
        for c in 0..self.cqs.len() {
            let cq = &self.cqs[c];
            let Some(msg) = cq.inactive.as_ref().map(|i| i.message.clone()) else {
                continue;
            };
            if cq.deleted || !cq.queue.has_active() {
                continue;
            }
            let reason = if cq.spec.stop != api::StopPolicy::None {
                PendingReason::Stopped
            } else {
                PendingReason::Inadmissible
            };
            let keys: Vec<QueueKey> = cq.queue.active().copied().collect();
            for k in keys {
                self.set_pending(k.3, reason, msg.clone());
                let shape = self.wl(k.3).spec.shape;
                self.cqs[c].queue.park(k, shape);
            }
        }
    }

    /// The next workload of `c` worth evaluating, skipping (or, under StrictFIFO,
    /// stopping at) workloads that wait for their victims.
    fn next_head(
        &mut self,
        c: CqId,
        cursor: &mut Option<QueueKey>,
        mut afs: Option<&mut super::afs::Cursor>,
        st: &mut CycleState,
    ) -> Option<WlId> {
        if let Some(id) = self.ready_preemptor(c, st) {
            return Some(id);
        }
        let strict = self.cqs[c as usize].spec.strict_fifo;
        loop {
            let key = match afs.as_deref_mut() {
                Some(a) => self.afs_next(c, a)?,
                None => {
                    let key = self.cqs[c as usize].queue.next_after(cursor.as_ref())?;
                    *cursor = Some(key);
                    key
                }
            };
            let id = key.3;
            if self.waiting_for_victims(id) {
                if strict {
                    return None;
                }
                continue;
            }
            if let Some(ns_msg) = self.namespace_verdict(c, id) {
                self.set_pending(id, PendingReason::Inadmissible, ns_msg);
                let shape = self.wl(id).spec.shape;
                self.cqs[c as usize].queue.park(key, shape);
                continue;
            }
            if !strict {
                let shape = self.wl(id).spec.shape;
                if let Some((reason, why)) = st.failed.get(&(c, shape)) {
                    let (reason, why) = (*reason, why.clone());
                    self.set_pending_why(id, reason, &why);
                    self.cqs[c as usize].queue.park(key, shape);
                    continue;
                }
            }
            return Some(id);
        }
    }

    /// A preemptor of ClusterQueue `c` whose victims are all gone, with its reservation
    /// charged: it heads its queue before the queue's own order. Otherwise a workload
    /// ahead of it in its queue (one that was parked when it preempted, and came back
    /// when the victims left) heads first, fails against the nodes the preemptor claims,
    /// and by the preemptor's turn other queues' heads have taken the quota it freed;
    /// its victim is then admitted again and preempted again.
    fn ready_preemptor(&mut self, c: CqId, st: &CycleState) -> Option<WlId> {
        if st.charged.is_empty() {
            return None;
        }
        let mut ids: Vec<WlId> = st
            .charged
            .iter()
            .copied()
            .filter(|&id| self.wl(id).reservation.as_ref().is_some_and(|r| r.cq == c))
            .collect();
        // In id order: no hash order may feed a decision.
        ids.sort_unstable();
        ids.into_iter().find(|&id| !self.waiting_for_victims(id))
    }

    /// Whether the workload preempted others that have not stopped yet.
    fn waiting_for_victims(&mut self, id: WlId) -> bool {
        let waiting = std::mem::take(&mut self.wl_mut(id).waiting_for);
        let still: Vec<WlId> = waiting
            .into_iter()
            .filter(|&v| self.is_leaving(v))
            .collect();
        let busy = !still.is_empty();
        self.wl_mut(id).waiting_for = still;
        busy
    }

    /// [`Engine::namespace_mismatch`], remembered on the workload while neither the
    /// namespace's labels nor the selector change: the check allocates, and a cycle
    /// looks at every queued workload.
    fn namespace_verdict(&mut self, c: CqId, id: WlId) -> Option<String> {
        let checked = Some((c, self.selector_gen));
        if self.wl(id).namespace_ok == checked {
            return None;
        }
        let verdict = self.namespace_mismatch(c, id);
        if verdict.is_none() {
            self.wl_mut(id).namespace_ok = checked;
        }
        verdict
    }

    fn namespace_mismatch(&self, c: CqId, id: WlId) -> Option<String> {
        let ns = &self.wl(id).spec.key.namespace;
        let cq = &self.cqs[c as usize].spec;
        // `namespaceSelector: {}` selects every namespace; most ClusterQueues say so.
        if cq
            .namespace_selector
            .as_ref()
            .is_some_and(|s| s.match_labels.is_none() && s.match_expressions.is_none())
        {
            return None;
        }
        let default_labels = std::collections::BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            ns.to_string(),
        )]);
        let labels = self.namespaces.get(&**ns).unwrap_or(&default_labels);
        match &cq.namespace_selector {
            // Kueue reads an absent namespaceSelector as selecting nothing.
            None => Some(format!(
                "Workload namespace doesn't match ClusterQueue selector: ClusterQueue {} has no namespaceSelector, which selects no namespace (set namespaceSelector: {{}} to allow all)",
                cq.name
            )),
            Some(sel) if !api::selector::label_selector_matches(sel, labels) => Some(format!(
                "Workload namespace doesn't match ClusterQueue selector: namespace {ns} is not selected by ClusterQueue {}",
                cq.name
            )),
            _ => None,
        }
    }

    fn head(&mut self, cq: CqId, id: WlId, assignment: Assignment, wake_mark: usize) -> Head {
        let fair_path = if self.config.fair_sharing.is_some() {
            let node = self.cqs[cq as usize].node;
            super::fair::share_path(self, node, &assignment.usage)
        } else {
            smallvec::SmallVec::new()
        };
        let share = fair_path.last().map_or(0, |&(_, s)| s);
        let w = self.wl(id);
        // Kueue admits what borrows from lower in the cohort tree first.
        let level = if assignment.borrows {
            let node = self.cqs[cq as usize].node;
            assignment
                .usage
                .iter()
                .map(|&(fr, v)| super::classical::borrow_level(&self.tree, node, fr, v))
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        let order = (share, level, -w.spec.priority, w.spec.created, w.seq);
        Head {
            cq,
            id,
            assignment,
            order,
            wake_mark,
            preemptor: false,
            outranked: smallvec::SmallVec::new(),
            fair_path,
        }
    }

    fn fits_now(&self, c: CqId, a: &Assignment) -> bool {
        let node = self.cqs[c as usize].node;
        a.usage
            .iter()
            .all(|&(fr, v)| v <= self.tree.available(node, fr))
    }

    /// Admits, preempts for, defers or parks one head.
    fn decide(&mut self, h: Head, pass: Pass, st: &mut CycleState) -> Outcome {
        let (c, id, wake_mark) = (h.cq, h.id, h.wake_mark);
        let mut a = h.assignment;
        // Preemption was left out because of quota other heads hold this cycle.
        let mut held_back = false;
        let mut refreshed = false;
        // Each retry resumes the flavor search after the flavor that could not be
        // preempted for (Kueue's "last tried flavor"), so it ends within the flavor count.
        loop {
            // A preemptor whose victims are gone is not left for the borrowing pass,
            // as Kueue's PrioritizePreemptorWorkloads orders preemptors before the
            // entries that fit within nominal quota: a head of another queue that its
            // reservation keeps out would otherwise hold that quota first and block it.
            if pass == Pass::Nominal && !h.preemptor && self.needs_borrowing(c, &a) {
                return Outcome::Deferred;
            }
            match a.mode() {
                // waitForPodsReady's blockAdmission: Kueue's scheduler stops at the
                // first workload it would admit until every admitted one is ready.
                Mode::Fit if self.pods_ready_blocks() => {
                    self.wait_for_pods_ready(id);
                    return Outcome::Deferred;
                }
                Mode::Fit => {
                    return match self.admit(c, id, &a) {
                        Ok(()) => {
                            st.untouchable.insert(id);
                            Outcome::Admitted
                        }
                        Err(why) => {
                            self.consider_gang_hold(c, id, &a, st);
                            // Each PodSet fits alone but the gang does not fit together.
                            let message = format!("couldn't place the gang: {why}");
                            self.park(
                                c,
                                id,
                                a.last_tried,
                                PendingReason::TopologyPlacementFailed,
                                Message::Text(message),
                                &mut st.failed,
                            )
                        }
                    };
                }
                Mode::Preempt if !refreshed && self.fits_now(c, &a) => {
                    // Quota that other heads held when it was assigned is free again
                    // (their queues moved on): preempting now would evict for nothing.
                    refreshed = true;
                    a = self.assign(c, id, None, st);
                    continue;
                }
                Mode::Preempt => {
                    let (targets, blocked) = self.targets(c, id, &a, st);
                    held_back |= blocked;
                    if !targets.is_empty() {
                        self.preempt_for(c, id, &a, &targets, st);
                        return Outcome::Blocked;
                    }
                    if a.last_tried.iter().flatten().any(|t| t.is_some()) {
                        let resume = a.last_tried.clone();
                        a = self.assign_from(c, id, None, Some(&resume), st);
                        continue;
                    }
                }
                Mode::Wait | Mode::NoFit => {}
            }
            break;
        }
        if let Some((partial, targets)) = self.try_partial(c, id, &a, st) {
            if pass == Pass::Nominal && self.needs_borrowing(c, &partial) {
                return Outcome::Deferred;
            }
            if !targets.is_empty() {
                self.preempt_for(c, id, &partial, &targets, st);
                return Outcome::Blocked;
            }
            if self.pods_ready_blocks() {
                self.wait_for_pods_ready(id);
                return Outcome::Deferred;
            }
            if self.admit(c, id, &partial).is_ok() {
                st.untouchable.insert(id);
                return Outcome::Admitted;
            }
        }
        self.consider_gang_hold(c, id, &a, st);
        let holds = self.holds_unreclaimable(c, &a);
        let mut explanation = a.explanation;
        if holds {
            let node = self.cqs[c as usize].node;
            if pass == Pass::Nominal
                && a.usage
                    .iter()
                    .any(|&(fr, v)| self.tree.borrowing_with(node, fr, v))
            {
                st.first_look.insert(id, explanation);
                return Outcome::Deferred;
            }
            self.hold_unreclaimable(c, &a.usage, st);
            if let Some(first) = st.first_look.remove(&id) {
                explanation = first;
            }
        }
        let reason = a.reason.unwrap_or(PendingReason::WaitingForQuota);
        if let Some(suffix) = self.pending_suffix(c, a.mode, held_back, wake_mark) {
            explanation.suffix = Some(suffix);
        }
        let message = Message::Explained(explanation);
        self.park(c, id, a.last_tried, reason, message, &mut st.failed)
    }

    /// What a head that stays pending waits for beyond quota, if anything: other
    /// queues' holds, preemption protection, or victims the policy does not allow.
    fn pending_suffix(
        &mut self,
        c: CqId,
        mode: Option<Mode>,
        held_back: bool,
        wake_mark: usize,
    ) -> Option<&'static str> {
        let protected = self
            .oracle
            .get_mut()
            .wakeups
            .get(wake_mark..)
            .is_some_and(|w| w.iter().any(|&(_, q)| q == c));
        if held_back {
            // The holds end with this cycle and the holder is parked now: Kueue requeues
            // such an entry at once, so it is looked at again in the next cycle rather
            // than left parked until quota frees.
            self.oracle.get_mut().wakeups.push((self.now + 1, c));
            Some(
                "; the quota it would preempt for is held in this cycle for another ClusterQueue's workload that found nothing to preempt, and it is looked at again in the next cycle",
            )
        } else if protected && matches!(mode, Some(Mode::Preempt | Mode::Wait)) {
            Some(
                "; the workloads it could preempt are protected until they have run for the minimum runtime before preemption, and it is looked at again then",
            )
        } else if mode == Some(Mode::Preempt) {
            Some(
                "; preemption cannot free enough: no admitted workload may be preempted for it under the ClusterQueue's preemption policy",
            )
        } else {
            None
        }
    }

    /// Kueue's reserveCapacityForUnreclaimablePreempt: a head that needs preemption
    /// but found nobody to preempt holds, for the rest of the cycle, the quota it could
    /// take without borrowing (or up to its borrowing limit when it must borrow), so
    /// lower entries in the cohort cannot borrow it away. Unless the ClusterQueue may
    /// reclaim from anyone (reclaimWithinCohort: Any), it could not get that quota back
    /// by preempting later.
    fn holds_unreclaimable(&self, c: CqId, a: &Assignment) -> bool {
        let cq = &self.cqs[c as usize];
        a.mode
            .is_some_and(|m| m == Mode::Preempt || m == Mode::Wait)
            && !a.hard_wait
            && cq.spec.reclaim != Policy::Any
            && self.tree.parent(cq.node).is_some()
    }

    fn hold_unreclaimable(&mut self, c: CqId, usage: &FrAmounts, st: &mut CycleState) {
        let node = self.cqs[c as usize].node;
        let tree = &self.tree;
        let borrows = usage
            .iter()
            .any(|&(fr, v)| tree.borrowing_with(node, fr, v));
        let limits = &tree.nodes[node as usize].limits;
        let mut held = FrAmounts::new();
        for &(fr, v) in usage {
            let nominal = limits.nominal.get(fr);
            let used = tree.usage(node, fr);
            let amount = match (borrows, limits.borrowing_limit(fr)) {
                (true, None) => v,
                (true, Some(limit)) => v.min(nominal.saturating_add(limit).saturating_sub(used)),
                (false, _) => v.min(nominal.saturating_sub(used)),
            };
            if amount > 0 {
                held.push((fr, amount));
            }
        }
        if !held.is_empty() {
            self.tree.add_amounts(node, &held);
            st.held.push((c, node, held));
        }
    }

    /// Gives ClusterQueue `c` back what its earlier heads held this cycle.
    fn release_held(&mut self, c: CqId, st: &mut CycleState) {
        let tree = &mut self.tree;
        st.held.retain(|(q, node, amounts)| {
            if *q == c {
                tree.remove_amounts(*node, amounts);
            }
            *q != c
        });
    }

    /// Whether admitting with `a` (after any preemption) would take the ClusterQueue
    /// over its nominal quota.
    fn needs_borrowing(&self, c: CqId, a: &Assignment) -> bool {
        match a.mode() {
            Mode::Fit => a.borrows,
            Mode::Preempt => {
                let node = self.cqs[c as usize].node;
                a.usage
                    .iter()
                    .any(|&(fr, v)| self.tree.borrowing_with(node, fr, v))
            }
            Mode::Wait | Mode::NoFit => false,
        }
    }

    /// Leaves a workload pending with a reason; BestEffortFIFO parks it until quota frees.
    fn park(
        &mut self,
        c: CqId,
        id: WlId,
        last_tried: super::flavor::Resume,
        reason: PendingReason,
        message: Message,
        failed: &mut FastMap<(CqId, u64), (PendingReason, Why)>,
    ) -> Outcome {
        let gen_now = self.quota_gen;
        let w = self.wl_mut(id);
        w.resume = last_tried;
        w.resume_gen = gen_now;
        let why = match message {
            Message::Text(text) => {
                let text: Arc<str> = text.into();
                self.set_pending(id, reason, Arc::clone(&text));
                Why::Text(text)
            }
            Message::Explained(e) => Why::Explained(self.set_pending_explained(id, reason, e)),
        };
        if !self.cqs[c as usize].spec.strict_fifo {
            let shape = self.wl(id).spec.shape;
            failed.insert((c, shape), (reason, why));
            if let Some(k) = self.wl(id).qkey {
                self.cqs[c as usize].queue.park(k, shape);
            }
        }
        Outcome::Blocked
    }

    fn set_pending_why(&mut self, id: WlId, reason: PendingReason, why: &Why) {
        match why {
            Why::Text(message) => self.set_pending(id, reason, Arc::clone(message)),
            Why::Explained(e) => self.set_pending_shared(id, reason, e),
        }
    }

    /// Victims for `id` with assignment `a`, as if the victims already chosen this
    /// cycle in its cohort were gone, and whether other queues' holds alone left it
    /// without victims (see [`preempt::find_targets_past_holds`]).
    pub(super) fn targets(
        &mut self,
        c: CqId,
        id: WlId,
        a: &Assignment,
        st: &CycleState,
    ) -> (Vec<Target>, bool) {
        let root = self.cqs[c as usize].root;
        let issued = st.issued.get(&root).map(Vec::as_slice).unwrap_or(&[]);
        if st.held.is_empty() {
            let targets = preempt::find_targets(self, id, c, a, &st.untouchable, issued);
            return (targets, false);
        }
        let holds = st.held.iter().map(|(_, node, amounts)| (*node, amounts));
        preempt::find_targets_past_holds(self, id, c, a, &st.untouchable, issued, holds)
    }

    /// Preempts `targets` for `id` and holds the quota of assignment `a` for it from
    /// now on, this cycle included.
    fn preempt_for(
        &mut self,
        c: CqId,
        id: WlId,
        a: &Assignment,
        targets: &[Target],
        st: &mut CycleState,
    ) {
        let root = self.cqs[c as usize].root;
        st.issued
            .entry(root)
            .or_default()
            .extend(targets.iter().filter(|t| !t.by_other).map(|t| t.id));
        // The message in Kueue's words, as at its nomination (see `as_nominated`).
        let explanation = self.as_nominated(c, &a.explanation, &st.untouchable);
        self.issue_preemptions(id, targets, &explanation, &mut st.untouchable);
        self.reserve(c, id, a, st);
    }

    /// With one PodSet carrying minCount, the largest count in [minCount, count) that
    /// fits, outright or by preempting (Kueue's PodSetReducer accepts both), with the
    /// victims it takes (none when it fits outright).
    fn try_partial(
        &mut self,
        c: CqId,
        id: WlId,
        full: &Assignment,
        st: &CycleState,
    ) -> Option<(Assignment, Vec<Target>)> {
        let w = self.wl(id);
        let (pi, ps) = w
            .spec
            .pod_sets
            .iter()
            .enumerate()
            .find(|(_, p)| p.min_count.is_some())?;
        let min = ps.min_count?.max(1);
        if full.mode() == Mode::NoFit && full.reason == Some(PendingReason::NoMatchingFlavor) {
            return None;
        }
        let counts: Vec<i32> = w.spec.pod_sets.iter().map(|p| p.count).collect();
        let (mut lo, mut hi) = (min, ps.count - 1);
        let mut best = None;
        let mut counts_for = counts;
        // Fitting (with or without victims) is monotone in the count, so a binary search
        // finds the largest count that does.
        while lo <= hi {
            let mid = lo + (hi - lo) / 2;
            counts_for[pi] = mid;
            let a = self.assign(c, id, Some(&counts_for), st);
            let found = match a.mode() {
                Mode::Fit => Some(Vec::new()),
                Mode::Preempt => Some(self.targets(c, id, &a, st).0).filter(|t| !t.is_empty()),
                Mode::Wait | Mode::NoFit => None,
            };
            match found {
                Some(targets) => {
                    best = Some((a, targets));
                    lo = mid + 1;
                }
                None => hi = mid - 1,
            }
        }
        best
    }

    fn issue_preemptions(
        &mut self,
        preemptor: WlId,
        targets: &[Target],
        explanation: &super::explain::Explanation,
        victims: &mut FastSet<WlId>,
    ) {
        let pkey = self.wl(preemptor).spec.key.clone();
        let mut waiting = Vec::with_capacity(targets.len());
        let own = targets.iter().filter(|t| !t.by_other).count();
        for t in targets {
            waiting.push(t.id);
            victims.insert(t.id);
            if t.already_evicting {
                continue;
            }
            let w = self.wl_mut(t.id);
            if let WlState::Admitted(a) = std::mem::replace(&mut w.state, WlState::Finished) {
                w.state = WlState::Evicting(a);
            }
            let vkey = w.spec.key.clone();
            let message = format!(
                "Preempted to accommodate a workload ({pkey}) due to {}",
                reason_text(t.reason)
            );
            self.outbox.push(Decision::Preempt {
                victim: vkey,
                preemptor: pkey.clone(),
                reason: t.reason,
                message,
            });
        }
        let message = if own == 0 {
            // Kueue's words for a workload that fits once others' victims are gone.
            "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete".to_string()
        } else {
            explanation.render_preempting(&self.names, &self.wl(preemptor).spec.pod_sets, own)
        };
        self.wl_mut(preemptor).waiting_for = waiting;
        self.set_pending(preemptor, PendingReason::WaitingForPreemption, message);
    }

    /// Places the gang and reserves its quota; on a placement failure nothing is
    /// reserved and the reason is returned.
    fn admit(
        &mut self,
        c: CqId,
        id: WlId,
        a: &Assignment,
    ) -> Result<(), super::topology::GangPlacementError> {
        let needs = super::topology::needs(&self.names, &self.inventory, &self.wl(id).spec, a);
        let placed = super::topology::place_all(
            &self.names,
            &mut self.inventory,
            id,
            &needs,
            self.config.placement,
        )?;
        let node = self.cqs[c as usize].node;
        self.tree.add_amounts(node, &a.usage);
        // The PodSets are shared: holding another reference costs one counter bump
        // and frees the ClusterQueue's cache for a mutable borrow.
        let pod_sets = Arc::clone(&self.wl(id).spec.pod_sets);
        let cq = &mut self.cqs[c as usize];
        let admission = if placed.is_empty() {
            cq.admissions
                .get_or_build(&self.names, &cq.spec.name, &pod_sets, a)
        } else {
            // Topology assignments are per admission: nothing to reuse.
            let mut admission = super::admission::build(&self.names, &cq.spec.name, &pod_sets, a);
            for (ps, p, nodes) in &placed {
                if let Some(psa) = admission.pod_set_assignments.get_mut(*ps) {
                    psa.topology_assignment = Some(crate::placement::topology_assignment(
                        &self.inventory,
                        &p.flavor,
                        nodes,
                    ));
                }
            }
            Arc::new(admission)
        };
        let placement: Vec<_> = placed.into_iter().map(|(_, p, _)| p).collect();
        self.dequeue(id);
        // The next parked workload of the same shape may fit too.
        let shape = self.wl(id).spec.shape;
        self.cqs[c as usize].queue.promote(shape);
        self.cqs[c as usize].admitted.insert(id);
        let since = self.now;
        let deadline = self.track_deadline(id, since);
        let w = self.wl_mut(id);
        w.state = WlState::Admitted(Admitted {
            cq: c,
            usage: a.usage.clone(),
            placement,
            admission: Arc::clone(&admission),
            since,
            started: since,
            deadline,
            finishing_since: None,
        });
        w.pending = None;
        w.resume.clear();
        w.waiting_for.clear();
        w.reservation = None;
        let key = w.spec.key.clone();
        self.pods_ready_admitted(id, since);
        let checks = self.checks_for(c, &admission);
        self.outbox.push(Decision::Admit {
            workload: key,
            admission,
            checks,
        });
        if self.config.admission_fair_sharing.is_some() {
            self.afs_charge(id, &a.usage, super::afs::Charge::Admit);
        }
        preempt::note_admission(self, c, id);
        Ok(())
    }
}

fn reason_text(r: super::PreemptionReason) -> &'static str {
    match r {
        super::PreemptionReason::InClusterQueue => "prioritization in the ClusterQueue",
        super::PreemptionReason::InCohortReclamation => "reclamation within the cohort",
        super::PreemptionReason::InCohortFairSharing => "Fair Sharing within the cohort",
        super::PreemptionReason::InCohortReclaimWhileBorrowing => {
            "reclamation within the cohort while borrowing"
        }
    }
}

/// Drops a `Pending` decision when a later decision of the same batch admits the workload
/// or reports it pending again: the shell would only write a status that is stale before
/// it lands (e.g. "ClusterQueue a doesn't exist" while a restart's objects arrive).
fn drop_superseded_pending(decisions: &mut Vec<Decision>) {
    let mut later = super::FastSet::default();
    let mut keep = vec![true; decisions.len()];
    for (i, d) in decisions.iter().enumerate().rev() {
        match d {
            Decision::Pending { workload, .. } if !later.insert(workload.clone()) => {
                keep[i] = false;
            }
            Decision::Pending { .. } => {}
            Decision::Admit { workload, .. } => {
                later.insert(workload.clone());
            }
            _ => {}
        }
    }
    let mut i = 0;
    decisions.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}
