//! Preemption: choosing the fewest, least valuable admitted workloads whose
//! removal lets a pending workload fit. Classical (Kueue's withinClusterQueue,
//! reclaimWithinCohort, borrowWithinCohort) and fair-sharing strategies.
//!
//! Candidates are removed from the live quota tree while searching and put back
//! afterwards; add/remove are exact inverses, so the tree ends as it started.

use super::{FastMap, FastSet};

use super::classical::Variant;
use super::flavor::{Assignment, Simulated};
use super::model::Policy;
use super::queue::WlId;
use super::quota::NodeId;
use super::resources::{FrAmounts, FrId};
use super::state::{CqId, Engine, WlState};
use super::{Millis, PreemptionReason};

/// A chosen victim. `already_evicting` victims are waited for, not preempted again.
#[derive(Clone, Debug)]
pub struct Target {
    pub id: WlId,
    pub reason: PreemptionReason,
    pub already_evicting: bool,
    /// Another preemptor chose it earlier in this cycle: this one waits for it too,
    /// but it is not this preemptor's preemption (Kueue does not count it either).
    pub by_other: bool,
}

#[derive(Clone)]
pub(crate) struct Candidate {
    /// Its nodes while it is taken out of the inventory during the search.
    held: Option<crate::placement::Held>,
    pub(crate) id: WlId,
    pub(crate) cq: CqId,
    pub(crate) node: NodeId,
    pub(crate) usage: FrAmounts,
    pub(crate) priority: i32,
    pub(crate) evicting: bool,
    /// When its quota was reserved: Kueue prefers the most recently admitted victims.
    pub(crate) admitted_at: Millis,
    pub(crate) reason: PreemptionReason,
    /// How it may be taken, and its lowest common ancestor with the preemptor
    /// (classical preemption through the cohort tree).
    pub(crate) variant: Variant,
    pub(crate) lca: NodeId,
}

/// Admitted (or evicting) workload `id` of ClusterQueue `c` as a candidate: it uses
/// one of `frs`, is not excluded, passes `allowed` (one already evicting always
/// does) and is not protected by the minimum runtime (the earliest end of such a
/// protection goes to `protected`). `kind` gives its variant and common ancestor
/// from its priority.
#[allow(clippy::too_many_arguments)]
pub(crate) fn try_candidate(
    eng: &Engine,
    id: WlId,
    c: CqId,
    frs: &[FrId],
    excluded: &FastSet<WlId>,
    allowed: &dyn Fn(i32, Millis) -> bool,
    protected: &mut Option<Millis>,
    kind: impl Fn(i32) -> (Variant, NodeId),
) -> Option<Candidate> {
    if excluded.contains(&id) {
        return None;
    }
    let w = eng.wl(id);
    let (adm, evicting) = match &w.state {
        WlState::Admitted(adm) => (adm, false),
        WlState::Evicting(adm) => (adm, true),
        _ => return None,
    };
    if !adm.usage.iter().any(|(fr, _)| frs.contains(fr)) {
        return None;
    }
    if !evicting && !allowed(w.spec.priority, w.spec.created) {
        return None;
    }
    // A victim it may take whose job already succeeded frees its quota on its own:
    // waited for like one being evicted, never preempted.
    let evicting = evicting || eng.finishing_until(adm).is_some();
    if !evicting && let Some(until) = eng.protected_until(adm) {
        *protected = earliest(*protected, Some(until));
        return None;
    }
    let (variant, lca) = kind(w.spec.priority);
    Some(Candidate {
        held: None,
        id,
        cq: c,
        node: eng.cqs[c as usize].node,
        usage: adm.usage.clone(),
        priority: w.spec.priority,
        evicting,
        admitted_at: adm.since,
        reason: variant.reason(),
        variant,
        lca,
    })
}

/// Kueue's candidate order (`CandidatesOrdering`): already evicting first, other
/// ClusterQueues before the preemptor's own, lower priority first, most recently
/// admitted first, then by name (Kueue breaks the last tie by UID; names keep it
/// deterministic).
pub(crate) fn candidate_order(
    eng: &Engine,
    cq: CqId,
    a: &Candidate,
    b: &Candidate,
) -> std::cmp::Ordering {
    let key = |c: &Candidate| {
        (
            !c.evicting,
            c.cq == cq,
            c.priority,
            std::cmp::Reverse(c.admitted_at),
        )
    };
    key(a)
        .cmp(&key(b))
        .then_with(|| eng.wl(a.id).spec.key.cmp(&eng.wl(b.id).spec.key))
}

/// Finds victims for workload `wl` pending in `cq` with flavor assignment `a`.
/// Workloads in `excluded` (victims of earlier preemptors, and workloads admitted
/// in this cycle) are not taken. `issued` are the victims other preemptors chose
/// earlier in this cycle in the same cohort: the search runs as if they were gone,
/// with those preemptors' reservations still charged (Kueue's projected state), so
/// a preemptor whose own victims do not overlap theirs preempts in the same cycle,
/// and one that fits once they are gone waits for them (Kueue's DeferredFit).
pub fn find_targets(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
    issued: &[WlId],
) -> Vec<Target> {
    let node = eng.cqs[cq as usize].node;
    let mut gone: Vec<Candidate> = issued.iter().filter_map(|&id| leaving(eng, id)).collect();
    for g in gone.iter_mut() {
        take_out(eng, g);
    }
    let (found, protected) = if !gone.is_empty() && fits(eng, node, wl, a, true) {
        (Some((Vec::new(), true)), None)
    } else {
        search(eng, wl, cq, a, excluded, &[])
    };
    let searched_alone = gone.is_empty();
    let mut targets = match found {
        Some((removed, allow_borrowing)) => {
            // The others' victims first: fill_back then keeps only those the fit needs.
            let mut all = std::mem::take(&mut gone);
            all.extend(removed);
            fill_back(eng, node, wl, a, Some(all), allow_borrowing)
        }
        None => vec![],
    };
    if searched_alone && !targets.is_empty() {
        targets = super::domain_victims::cheapest(eng, wl, cq, a, excluded, targets);
    }
    // Restore the state: the caller decides what actually happens.
    for t in targets.iter_mut() {
        put_back(eng, t);
    }
    restore(eng, &mut gone);
    if targets.is_empty()
        && let Some(until) = protected
    {
        // Protected workloads may be what it takes: look again when the first is free.
        eng.oracle.get_mut().wakeups.push((until, cq));
    }
    targets
        .into_iter()
        .map(|c| Target {
            id: c.id,
            reason: c.reason,
            already_evicting: c.evicting,
            by_other: issued.contains(&c.id),
        })
        .collect()
}

/// One victim search under the configured strategy: the victims (still taken out of
/// the tree) and whether the fit allowed borrowing, plus the earliest protection end.
/// Candidates in `focus` (sorted) are tried before the others, keeping Kueue's order
/// within each group and already evicting ones first.
pub(crate) fn search(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
    focus: &[WlId],
) -> (Option<(Vec<Candidate>, bool)>, Option<Millis>) {
    match &eng.config.fair_sharing {
        Some(strategies) => {
            let strategies = strategies.clone();
            let (mut cands, protected) = candidates(eng, wl, cq, a, excluded);
            cands.sort_by(|x, y| candidate_order(eng, cq, x, y));
            focus_first(&mut cands, focus);
            (
                super::fair_preempt::search(eng, wl, cq, a, cands, &strategies).map(|r| (r, true)),
                protected,
            )
        }
        None => super::classical::search(eng, wl, cq, a, excluded, focus),
    }
}

/// Moves the candidates in `focus` (sorted) ahead of the others, a stable reorder
/// that keeps already evicting candidates first. An empty focus changes nothing.
pub(crate) fn focus_first(cands: &mut [Candidate], focus: &[WlId]) {
    if !focus.is_empty() {
        cands.sort_by_key(|c| (!c.evicting, focus.binary_search(&c.id).is_err()));
    }
}

/// [`find_targets`] while other queues' heads hold quota for the cycle (`holds`:
/// node and amounts) without having found victims.
///
/// A hold is not usage of any workload: the search runs without it, as Kueue picks
/// victims at nomination, before any hold. Counted in the search, a hold made its
/// ClusterQueue look like a borrower, so a later preemptor reclaimed that queue's
/// real workloads, which came back the next cycle under nominal quota: a preemption
/// loop. As in Kueue, the victims found must still make room with the holds counted,
/// or the head waits (Kueue: "no longer fits after processing another workload");
/// the flag says so.
pub fn find_targets_past_holds<'a>(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
    issued: &[WlId],
    holds: impl Iterator<Item = (NodeId, &'a FrAmounts)> + Clone,
) -> (Vec<Target>, bool) {
    for (node, amounts) in holds.clone() {
        eng.tree.remove_amounts(node, amounts);
    }
    let node = eng.cqs[cq as usize].node;
    // Fitting once the holds are lifted is Kueue's nominated Fit that a hold then
    // blocks: nothing to preempt.
    let fits_unheld = issued.is_empty() && fits(eng, node, wl, a, true);
    let targets = if fits_unheld {
        Vec::new()
    } else {
        find_targets(eng, wl, cq, a, excluded, issued)
    };
    for (node, amounts) in holds {
        eng.tree.add_amounts(node, amounts);
    }
    if fits_unheld {
        (targets, true)
    } else if targets.is_empty() || fits_after(eng, wl, cq, a, &targets, issued) {
        (targets, false)
    } else {
        (Vec::new(), true)
    }
}

/// An evicting workload as a candidate that is only ever taken out of the tree for
/// a search (see `issued` in [`find_targets`]).
fn leaving(eng: &Engine, id: WlId) -> Option<Candidate> {
    if eng.is_leaving(id) {
        holding(eng, id)
    } else {
        None
    }
}

/// A workload that holds quota (admitted or evicting) as a candidate that is only
/// ever taken out of the tree for a check.
fn holding(eng: &Engine, id: WlId) -> Option<Candidate> {
    let w = eng.wl(id);
    let (WlState::Admitted(adm) | WlState::Evicting(adm)) = &w.state else {
        return None;
    };
    let node = eng.cqs[adm.cq as usize].node;
    Some(Candidate {
        held: None,
        id,
        cq: adm.cq,
        node,
        usage: adm.usage.clone(),
        priority: w.spec.priority,
        evicting: true,
        admitted_at: adm.since,
        reason: PreemptionReason::InClusterQueue,
        variant: Variant::WithinCq,
        lca: node,
    })
}

/// Whether `a` fits ClusterQueue `cq` once `targets` and the victims `issued` earlier
/// this cycle are gone: Kueue's last check before it issues a preemption, against
/// the cycle's state with every earlier entry's usage and holds counted.
pub fn fits_after(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    targets: &[Target],
    issued: &[WlId],
) -> bool {
    let node = eng.cqs[cq as usize].node;
    let mut gone: Vec<Candidate> = issued
        .iter()
        .copied()
        .chain(targets.iter().filter(|t| !t.by_other).map(|t| t.id))
        .filter_map(|id| holding(eng, id))
        .collect();
    for g in gone.iter_mut() {
        take_out(eng, g);
    }
    let f = fits(eng, node, wl, a, true);
    restore(eng, &mut gone);
    f
}

/// The lowest priorities among admitted workloads using one (flavor, resource), at
/// most one entry per ClusterQueue: what the preemption oracle needs to answer "is
/// anyone preemptible for priority p" without scanning every admitted workload.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lowest {
    /// Any workload using it is already being evicted (always a candidate).
    evicting: bool,
    /// The two lowest (priority, ClusterQueue) pairs from distinct ClusterQueues, so
    /// a query can leave out its own ClusterQueue.
    first: Option<(i32, CqId)>,
    second: Option<(i32, CqId)>,
    /// Left out because they have not run for the minimum runtime yet: the earliest
    /// time one of them stops being protected.
    protected_until: Option<Millis>,
}

impl Lowest {
    fn protect(&mut self, until: Millis) {
        self.protected_until = earliest(self.protected_until, Some(until));
    }

    fn add(&mut self, prio: i32, cq: CqId) {
        let e = Some((prio, cq));
        match (self.first, self.second) {
            (None, _) => self.first = e,
            (Some(f), _) if f.1 == cq => self.first = Some((f.0.min(prio), cq)),
            (Some(f), _) if prio < f.0 => {
                self.second = self.first;
                self.first = e;
            }
            (Some(_), Some(s)) if s.1 == cq => self.second = Some((s.0.min(prio), cq)),
            (Some(_), Some(s)) if prio < s.0 => self.second = e,
            (Some(_), None) => self.second = e,
            _ => {}
        }
    }

    /// The lowest priority outside ClusterQueue `cq`.
    fn lowest_except(&self, cq: CqId) -> Option<i32> {
        match self.first {
            Some((_, c)) if c == cq => self.second.map(|s| s.0),
            f => f.map(|f| f.0),
        }
    }
}

/// Per-cycle summaries behind the preemption oracle, built on first use: the flavor
/// assigner asks it for every flavor needing preemption of every head, and a cohort
/// can hold hundreds of ClusterQueues. Like Kueue's snapshot, it is taken once per
/// cycle; the victim search itself ([`find_targets`]) always reads live state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Oracle {
    /// (ClusterQueue, fr) -> its own admitted workloads using fr.
    own: FastMap<(CqId, FrId), Lowest>,
    /// (cohort root, fr) -> admitted workloads using fr in members borrowing fr.
    borrowers: FastMap<(NodeId, FrId), Lowest>,
    /// (protection end, ClusterQueue): a workload of that queue found nobody to
    /// preempt because the candidates were protected; look at the queue again then.
    pub wakeups: Vec<(Millis, CqId)>,
    /// The target searches ([`simulate`]) run for the workload being assigned:
    /// (fr, amount, outcome). Kept only for one assignment; the buffers are reused.
    pub(crate) simulated: Vec<(FrId, i64, Simulated)>,
    /// The searches the flavor assigner asked for and that have not run yet.
    pub(crate) asked: Vec<(FrId, i64)>,
}

impl Oracle {
    pub fn clear(&mut self) {
        self.own.clear();
        self.borrowers.clear();
        self.wakeups.clear();
        self.simulated.clear();
        self.asked.clear();
    }

    /// The outcome of the search for `val` of `fr`, or `None` after noting that the
    /// flavor assigner wants it.
    pub(crate) fn simulated(&mut self, fr: FrId, val: i64) -> Option<Simulated> {
        if let Some(&(_, _, s)) = self.simulated.iter().find(|x| x.0 == fr && x.1 == val) {
            return Some(s);
        }
        if !self.asked.contains(&(fr, val)) {
            self.asked.push((fr, val));
        }
        None
    }
}

/// Keeps the oracle's summaries true when `id` is admitted to `cq` mid-cycle: it is a
/// candidate from now on, and if `cq` now borrows, every workload of `cq` is one for
/// reclaim. (Victims stay admitted until they stop, so nothing else changes in a cycle.)
pub(crate) fn note_admission(eng: &Engine, cq: CqId, id: WlId) {
    let mut oracle = eng.oracle.borrow_mut();
    if oracle.own.is_empty() && oracle.borrowers.is_empty() {
        return;
    }
    let w = eng.wl(id);
    let (WlState::Admitted(a) | WlState::Evicting(a)) = &w.state else {
        return;
    };
    let q = &eng.cqs[cq as usize];
    let protected = eng.protected_until(a);
    for &(fr, _) in &a.usage {
        if let Some(low) = oracle.own.get_mut(&(cq, fr)) {
            match protected {
                Some(until) => low.protect(until),
                None => low.add(w.spec.priority, cq),
            }
        }
        if eng.tree.is_borrowing(q.node, fr)
            && let Some(low) = oracle.borrowers.get_mut(&(q.root, fr))
            && let Some((p, _)) = summarize(eng, &[cq], fr, false).first
        {
            low.add(p, cq);
        }
    }
}

fn uses(eng: &Engine, id: WlId, fr: FrId) -> bool {
    match &eng.wl(id).state {
        WlState::Admitted(a) | WlState::Evicting(a) => a.usage.iter().any(|(f, _)| *f == fr),
        _ => false,
    }
}

fn summarize(eng: &Engine, members: &[CqId], fr: FrId, only_borrowing: bool) -> Lowest {
    let mut low = Lowest::default();
    for &c in members {
        let q = &eng.cqs[c as usize];
        if q.deleted || (only_borrowing && !eng.tree.is_borrowing(q.node, fr)) {
            continue;
        }
        for &id in &q.admitted {
            if uses(eng, id, fr) {
                let w = eng.wl(id);
                if let WlState::Admitted(a) = &w.state
                    && let Some(until) = eng.protected_until(a)
                {
                    low.protect(until);
                    continue;
                }
                low.evicting |= matches!(w.state, WlState::Evicting(_));
                low.add(w.spec.priority, c);
            }
        }
    }
    low
}

/// Whether any admitted workload could be a victim for `wl` in `fr` under the
/// ClusterQueue's policies: the flavor assigner's preemption oracle. A flavor where
/// nobody can be preempted is no better than one where the workload must wait.
pub fn has_candidates(eng: &Engine, wl: WlId, cq: CqId, fr: FrId) -> bool {
    let me = &eng.wl(wl).spec;
    let (prio, created) = (me.priority, me.created);
    let spec = &eng.cqs[cq as usize].spec;
    let own = match spec.within_cq {
        // The only policy that reads creation times: scan, it is not summarized.
        Policy::LowerOrNewerEqualPriority => {
            let mut protected = None;
            let found = eng.cqs[cq as usize].admitted.iter().any(|&id| {
                let w = eng.wl(id);
                let eligible = (matches!(w.state, WlState::Evicting(_))
                    || w.spec.priority < prio
                    || (w.spec.priority == prio && w.spec.created > created))
                    && uses(eng, id, fr);
                if let (true, WlState::Admitted(a)) = (eligible, &w.state)
                    && let Some(until) = eng.protected_until(a)
                {
                    protected = earliest(protected, Some(until));
                    return false;
                }
                eligible
            });
            (found, protected)
        }
        within => {
            let low = *eng
                .oracle
                .borrow_mut()
                .own
                .entry((cq, fr))
                .or_insert_with(|| summarize(eng, &[cq], fr, false));
            let found = low.evicting
                || match within {
                    Policy::Never => false,
                    Policy::Any => low.first.is_some(),
                    _ => low.first.is_some_and(|(p, _)| p < prio),
                };
            (
                found,
                low.protected_until.filter(|_| within != Policy::Never),
            )
        }
    };
    let (own, own_protected) = own;
    if own {
        return true;
    }
    // Nobody to preempt right now: if protected workloads are why, look again when
    // the first of them is free.
    let wake = |until: Option<Millis>| {
        if let Some(until) = until {
            eng.oracle.borrow_mut().wakeups.push((until, cq));
        }
    };
    let node = eng.cqs[cq as usize].node;
    if eng.tree.parent(node).is_none() || spec.reclaim == Policy::Never {
        wake(own_protected);
        return false;
    }
    let root = eng.cqs[cq as usize].root;
    let low = *eng
        .oracle
        .borrow_mut()
        .borrowers
        .entry((root, fr))
        .or_insert_with(|| {
            let members = eng.members_of(root);
            summarize(eng, members, fr, true)
        });
    let found = low
        .lowest_except(cq)
        .is_some_and(|p| spec.reclaim != Policy::LowerPriority || p < prio);
    if !found {
        wake(earliest(own_protected, low.protected_until));
    }
    found
}

/// What Kueue's preemption oracle (`SimulatePreemption`) searches for: `val` of `fr`
/// alone, as if the workload needed nothing else.
pub fn single_need(fr: FrId, val: i64) -> Assignment {
    let mut a = Assignment::default();
    a.usage.push((fr, val));
    a.preempt_frs.push(fr);
    a
}

/// The oracle's answer from the victims the search found for [`single_need`]: none
/// is Kueue's noPreemptionCandidates; victims only in other ClusterQueues (after the
/// search put back those the fit does not need) a reclaim; any in the workload's own
/// ClusterQueue a priority preemption. The same search later picks the victims, so a
/// flavor ranked for reclaiming is one where they are indeed all borrowers, however
/// deep the cohort tree.
pub fn outcome(eng: &Engine, cq: CqId, targets: &[Target]) -> Simulated {
    let own = &eng.cqs[cq as usize].admitted;
    if targets.is_empty() {
        Simulated::NoCandidates
    } else if targets.iter().any(|t| own.contains(&t.id)) {
        Simulated::Preempt
    } else {
        Simulated::Reclaim
    }
}

/// The earlier of two optional times.
fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Fair sharing's candidates: the ClusterQueue's own under withinClusterQueue and
/// those of ClusterQueues in the cohort tree that borrow in a needed resource.
fn candidates(
    eng: &Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
) -> (Vec<Candidate>, Option<Millis>) {
    let me = &eng.wl(wl).spec;
    let (prio, created) = (me.priority, me.created);
    let spec = &eng.cqs[cq as usize].spec;
    let node = eng.cqs[cq as usize].node;
    let needed = &a.preempt_frs;
    let mut out = Vec::new();
    let mut protected: Option<Millis> = None;
    let within = spec.within_cq;
    let own = |p: i32, c: Millis| match within {
        Policy::Never => false,
        Policy::LowerPriority => p < prio,
        Policy::LowerOrNewerEqualPriority => p < prio || (p == prio && c > created),
        Policy::Any => true,
    };
    for &id in &eng.cqs[cq as usize].admitted {
        if let Some(c) = try_candidate(eng, id, cq, needed, excluded, &own, &mut protected, |_| {
            (Variant::WithinCq, node)
        }) {
            out.push(c);
        }
    }
    if eng.tree.parent(node).is_none() {
        return (out, protected);
    }
    let root = eng.tree.root(node);
    let reclaim = spec.reclaim;
    let allowed = move |p: i32, _c: Millis| match reclaim {
        Policy::Never => false,
        Policy::LowerPriority => p < prio,
        _ => true,
    };
    for &c in eng.members_of(root) {
        let other = &eng.cqs[c as usize];
        // Only quota a ClusterQueue borrows can be reclaimed from it.
        if c == cq
            || other.deleted
            || !needed
                .iter()
                .any(|&fr| eng.tree.is_borrowing(other.node, fr))
        {
            continue;
        }
        for &id in &other.admitted {
            if let Some(mut cand) = try_candidate(
                eng,
                id,
                c,
                needed,
                excluded,
                &allowed,
                &mut protected,
                |_| (Variant::WithoutBorrowing, root),
            ) {
                cand.reason = PreemptionReason::InCohortFairSharing;
                out.push(cand);
            }
        }
    }
    (out, protected)
}

/// Whether the assignment fits `node` now (without `allow_borrowing`, within nominal)
/// and, for PodSets on TAS flavors, whether the topology has room for the gang.
pub(crate) fn fits(
    eng: &mut Engine,
    node: NodeId,
    wl: WlId,
    a: &Assignment,
    allow_borrowing: bool,
) -> bool {
    let quota = a.usage.iter().all(|&(fr, v)| {
        v <= eng.tree.available(node, fr)
            && (allow_borrowing || !eng.tree.borrowing_with(node, fr, v))
    });
    if !quota {
        return false;
    }
    let needs = super::topology::needs(&eng.names, &eng.inventory, &eng.wl(wl).spec, a);
    super::topology::feasible(
        &eng.names,
        &mut eng.inventory,
        wl,
        &needs,
        eng.config.placement,
    )
    .is_ok()
}

/// Takes a candidate's quota and nodes out of the live state.
pub(crate) fn take_out(eng: &mut Engine, c: &mut Candidate) {
    eng.tree.remove_amounts(c.node, &c.usage);
    c.held = Some(eng.inventory.take(c.id));
}

/// Exact inverse of [`take_out`].
fn put_back(eng: &mut Engine, c: &mut Candidate) {
    eng.tree.add_amounts(c.node, &c.usage);
    if let Some(h) = c.held.take() {
        eng.inventory.restore(c.id, h);
    }
}

pub(crate) fn restore(eng: &mut Engine, removed: &mut [Candidate]) {
    for c in removed.iter_mut().rev() {
        put_back(eng, c);
    }
}

/// Puts back every victim, newest choice first, that is not needed for the fit.
/// Returns the victims still removed from the tree.
pub(crate) fn fill_back(
    eng: &mut Engine,
    node: NodeId,
    wl: WlId,
    a: &Assignment,
    removed: Option<Vec<Candidate>>,
    allow_borrowing: bool,
) -> Vec<Candidate> {
    let Some(mut removed) = removed else {
        return vec![];
    };
    if removed.len() > 1 {
        let last = removed.len() - 1;
        let mut keep = vec![true; removed.len()];
        for i in (0..last).rev() {
            put_back(eng, &mut removed[i]);
            if fits(eng, node, wl, a, allow_borrowing) {
                keep[i] = false;
            } else {
                take_out(eng, &mut removed[i]);
            }
        }
        let mut it = keep.into_iter();
        removed.retain(|_| it.next().unwrap_or(true));
    }
    // The tree still lacks the kept victims; find_targets adds them back.
    removed
}

#[cfg(test)]
mod tests {
    use super::Lowest;

    #[test]
    fn lowest_priority_outside_a_queue() {
        let mut low = Lowest::default();
        assert_eq!(low.lowest_except(0), None);
        low.add(100, 1);
        low.add(50, 1);
        assert_eq!(low.lowest_except(2), Some(50));
        // Queue 1 holds the only workloads: nothing outside it.
        assert_eq!(low.lowest_except(1), None);
        low.add(70, 2);
        low.add(90, 3);
        assert_eq!(low.lowest_except(1), Some(70));
        assert_eq!(low.lowest_except(2), Some(50));
        // A lower priority in queue 2 replaces its own entry, not queue 1's.
        low.add(10, 2);
        assert_eq!(low.lowest_except(2), Some(50));
        assert_eq!(low.lowest_except(1), Some(10));
        assert_eq!(low.lowest_except(3), Some(10));
    }
}
