//! Classical preemption through the cohort tree, as Kueue's `classical` package
//! does it: victims come from the preemptor's own ClusterQueue and from ClusterQueues
//! that borrow somewhere up the tree. A candidate whose lowest common ancestor with
//! the preemptor is a cohort the request fits into (the preemptor's "hierarchical
//! advantage") may be reclaimed whatever its priority; the others follow
//! reclaimWithinCohort and borrowWithinCohort.

use super::FastSet;
use super::flavor::Assignment;
use super::model::{Policy, WorkloadSpec};
use super::preempt::{Candidate, candidate_order, fits, restore, take_out, try_candidate};
use super::queue::WlId;
use super::quota::{NodeId, QuotaTree};
use super::resources::FrId;
use super::state::{CqId, Engine};
use super::{Millis, PreemptionReason};

/// How a candidate may be taken (Kueue's preemption variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    WithinCq,
    /// The preemptor is closer to the quota the candidate uses: any priority goes.
    Hierarchical,
    /// Only while the preemptor then stays within its nominal quota.
    WithoutBorrowing,
    /// borrowWithinCohort: below the threshold, even while the preemptor borrows.
    WhileBorrowing,
}

impl Variant {
    pub(crate) fn reason(self) -> PreemptionReason {
        match self {
            Variant::WithinCq => PreemptionReason::InClusterQueue,
            Variant::Hierarchical | Variant::WithoutBorrowing => {
                PreemptionReason::InCohortReclamation
            }
            Variant::WhileBorrowing => PreemptionReason::InCohortReclaimWhileBorrowing,
        }
    }

    /// How a victim of priority `p` in another ClusterQueue may be taken by a preemptor
    /// of priority `prio`: any priority with a hierarchical advantage (`adv`), else
    /// while borrowing only below the borrowWithinCohort `threshold`.
    fn in_cohort(adv: bool, threshold: Option<i32>, prio: i32, p: i32) -> Variant {
        if adv {
            Variant::Hierarchical
        } else {
            match threshold {
                None => Variant::WithoutBorrowing,
                Some(th) if p >= prio || p > th => Variant::WithoutBorrowing,
                Some(_) => Variant::WhileBorrowing,
            }
        }
    }
}

/// Whether a request of `val` could be reclaimed somewhere below the root: the lowest
/// node on the way up that `val` fits into is not the root (Kueue's
/// FindHeightOfLowestSubtreeThatFits). A request within the ClusterQueue's own
/// quota qualifies whenever it is in a cohort.
pub(crate) fn may_reclaim_in_hierarchy(tree: &QuotaTree, node: NodeId, fr: FrId, val: i64) -> bool {
    let Some(mut t) = tree.parent(node) else {
        return false;
    };
    if !tree.borrowing_with(node, fr, val) {
        return true;
    }
    let mut remaining = val.saturating_sub(tree.local_available(node, fr));
    loop {
        if !tree.borrowing_with(t, fr, remaining) {
            return tree.parent(t).is_some();
        }
        remaining = remaining.saturating_sub(tree.local_available(t, fr));
        match tree.parent(t) {
            Some(p) => t = p,
            None => return false,
        }
    }
}

/// How far up the cohort tree `val` more of `fr` has to borrow: 0 within the
/// ClusterQueue's own quota, else the height of the lowest cohort it fits in (the
/// root's when none). Kueue admits lower levels first (FindHeightOfLowestSubtreeThatFits).
pub(crate) fn borrow_level(tree: &QuotaTree, node: NodeId, fr: FrId, val: i64) -> u32 {
    let Some(mut t) = tree.parent(node) else {
        return 0;
    };
    if !tree.borrowing_with(node, fr, val) {
        return 0;
    }
    let mut remaining = val.saturating_sub(tree.local_available(node, fr));
    loop {
        if !tree.borrowing_with(t, fr, remaining) {
            return tree.height(t);
        }
        remaining = remaining.saturating_sub(tree.local_available(t, fr));
        match tree.parent(t) {
            Some(p) => t = p,
            None => return tree.height(t),
        }
    }
}

/// Whether `requests` fit the node's subtree quota, and what is left of them once
/// the node's own guaranteed quota is used (Kueue's QuantitiesFitInQuota).
fn fits_in_quota(
    tree: &QuotaTree,
    node: NodeId,
    requests: &[(FrId, i64)],
) -> (bool, Vec<(FrId, i64)>) {
    let mut fits = true;
    let mut rest = Vec::with_capacity(requests.len());
    for &(fr, v) in requests {
        if tree.borrowing_with(node, fr, v) {
            fits = false;
        }
        rest.push((fr, v.saturating_sub(tree.local_available(node, fr)).max(0)));
    }
    (fits, rest)
}

fn within_nominal(tree: &QuotaTree, node: NodeId, frs: &[FrId]) -> bool {
    frs.iter().all(|&fr| !tree.borrowing_with(node, fr, 0))
}

/// The candidates in Kueue's order, and whether any came from other ClusterQueues
/// or with a hierarchical advantage, plus the earliest end of a protection that
/// kept one out.
struct Candidates {
    ordered: Vec<Candidate>,
    no_other: bool,
    no_hierarchical: bool,
    protected: Option<Millis>,
}

/// Finds victims for `wl` in `cq` with assignment `a`, trying those in `focus` (sorted)
/// first; returns them (still taken out of the tree) and whether the fit allowed
/// borrowing, plus the protection end.
pub(crate) fn search(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
    focus: &[WlId],
) -> (Option<(Vec<Candidate>, bool)>, Option<Millis>) {
    let mut c = collect(eng, wl, cq, a, excluded);
    super::preempt::focus_first(&mut c.ordered, focus);
    let spec = &eng.cqs[cq as usize].spec;
    let node = eng.cqs[cq as usize].node;
    let forbidden = spec.borrow_within_cohort.is_none();
    let under_nominal = a
        .preempt_frs
        .iter()
        .all(|&fr| eng.tree.usage(node, fr) < eng.tree.subtree_quota(node, fr));
    // Kueue tries without borrowing first only where that keeps its old behaviour.
    let attempts: &[bool] = if c.no_other || (forbidden && !under_nominal) {
        &[true]
    } else if forbidden && c.no_hierarchical {
        &[false, true]
    } else {
        &[true, false]
    };
    for &borrow in attempts {
        let mut removed = Vec::new();
        for cand in &c.ordered {
            if !valid(eng, cq, cand, borrow, &a.preempt_frs) {
                continue;
            }
            let mut cand = cand.clone();
            take_out(eng, &mut cand);
            removed.push(cand);
            if fits(eng, node, wl, a, borrow) {
                return (Some((removed, borrow)), c.protected);
            }
        }
        restore(eng, &mut removed);
    }
    (None, c.protected)
}

/// Whether a candidate still helps: its ClusterQueue, and every cohort between it
/// and the common ancestor, still use more than their quota (after earlier removals).
fn valid(eng: &Engine, cq: CqId, c: &Candidate, borrow: bool, frs: &[FrId]) -> bool {
    if c.cq == cq {
        return true;
    }
    if borrow && c.variant == Variant::WithoutBorrowing {
        return false;
    }
    let tree = &eng.tree;
    if within_nominal(tree, c.node, frs) {
        return false;
    }
    let mut n = c.node;
    while let Some(p) = tree.parent(n) {
        if p == c.lca {
            break;
        }
        if within_nominal(tree, p, frs) {
            return false;
        }
        n = p;
    }
    true
}

/// Every victim candidate for `wl` in `cq`: from its own ClusterQueue and from the
/// ClusterQueues of its cohort tree, in Kueue's order.
fn collect(
    eng: &Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
) -> Candidates {
    let me = &eng.wl(wl).spec;
    let mut protected = None;
    let same = cluster_queue_candidates(eng, me, cq, &a.preempt_frs, excluded, &mut protected);
    let (hier, prio_c) = cohort_candidates(eng, me.priority, cq, a, excluded, &mut protected);
    let no_other = hier.is_empty() && prio_c.is_empty();
    let no_hierarchical = hier.is_empty();
    Candidates {
        ordered: order_candidates(eng, cq, [hier, prio_c, same]),
        no_other,
        no_hierarchical,
        protected,
    }
}

/// Victims in the preemptor's own ClusterQueue, as its withinClusterQueue policy allows.
fn cluster_queue_candidates(
    eng: &Engine,
    preemptor: &WorkloadSpec,
    cq: CqId,
    frs: &[FrId],
    excluded: &FastSet<WlId>,
    protected: &mut Option<Millis>,
) -> Vec<Candidate> {
    let (prio, created) = (preemptor.priority, preemptor.created);
    let queue = &eng.cqs[cq as usize];
    let node = queue.node;
    let mut same = Vec::new();
    let within = queue.spec.within_cq;
    if within == Policy::Never {
        return same;
    }
    let allowed = |p: i32, c: Millis| match within {
        Policy::Never => false,
        Policy::LowerPriority => p < prio,
        Policy::LowerOrNewerEqualPriority => p < prio || (p == prio && c > created),
        Policy::Any => true,
    };
    for &id in &queue.admitted {
        same.extend(try_candidate(
            eng,
            id,
            cq,
            frs,
            excluded,
            &allowed,
            protected,
            |_| (Variant::WithinCq, node),
        ));
    }
    same
}

/// Victims in the other ClusterQueues of the preemptor's cohort tree, as
/// reclaimWithinCohort and borrowWithinCohort allow: those whose lowest common
/// ancestor gives the preemptor a hierarchical advantage, and the others.
fn cohort_candidates(
    eng: &Engine,
    prio: i32,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
    protected: &mut Option<Millis>,
) -> (Vec<Candidate>, Vec<Candidate>) {
    let (mut hier, mut prio_c) = (Vec::new(), Vec::new());
    let queue = &eng.cqs[cq as usize];
    let spec = &queue.spec;
    let tree = &eng.tree;
    if tree.parent(queue.node).is_none() || spec.reclaim == Policy::Never {
        return (hier, prio_c);
    }
    let (path, advantage) = cohort_path(tree, queue.node, &a.usage);
    let frs = &a.preempt_frs;
    let reclaim = spec.reclaim;
    let threshold = spec.borrow_within_cohort;
    let allowed = |p: i32, _c: Millis| reclaim != Policy::LowerPriority || p < prio;
    for &o in eng.members_of(queue.root) {
        let other = &eng.cqs[o as usize];
        if o == cq || other.deleted || within_nominal(tree, other.node, frs) {
            continue;
        }
        let Some(k) = lca_level(tree, other.node, &path, frs) else {
            continue;
        };
        let (lca, adv) = (path[k], advantage[k]);
        let out = if adv { &mut hier } else { &mut prio_c };
        for &id in &other.admitted {
            out.extend(try_candidate(
                eng,
                id,
                o,
                frs,
                excluded,
                &allowed,
                protected,
                |p| (Variant::in_cohort(adv, threshold, prio, p), lca),
            ));
        }
    }
    (hier, prio_c)
}

/// The cohorts from the ClusterQueue's parent up to the root, and for each whether
/// the request has a hierarchical advantage there: it fits in the quota of the
/// ClusterQueue or of a cohort below.
fn cohort_path(tree: &QuotaTree, node: NodeId, usage: &[(FrId, i64)]) -> (Vec<NodeId>, Vec<bool>) {
    let mut path = Vec::new();
    let mut advantage = Vec::new();
    let (mut adv, mut rest) = fits_in_quota(tree, node, usage);
    let mut t = tree.parent(node);
    while let Some(n) = t {
        path.push(n);
        advantage.push(adv);
        let (f, r) = fits_in_quota(tree, n, &rest);
        adv |= f;
        rest = r;
        t = tree.parent(n);
    }
    (path, advantage)
}

/// Where a victim ClusterQueue's way up meets the preemptor's `path` (the lowest
/// common ancestor's index in it); `None` when a cohort on the way stays within its
/// nominal quota, as nothing below it is borrowed from the preemptor's side.
fn lca_level(tree: &QuotaTree, node: NodeId, path: &[NodeId], frs: &[FrId]) -> Option<usize> {
    let mut n = node;
    while let Some(p) = tree.parent(n) {
        if let Some(k) = path.iter().position(|&x| x == p) {
            return Some(k);
        }
        if within_nominal(tree, p, frs) {
            return None;
        }
        n = p;
    }
    None
}

/// Sorts each list (hierarchical, by priority, own ClusterQueue) and chains them,
/// the already evicting candidates of every list before the rest, as Kueue does.
fn order_candidates(eng: &Engine, cq: CqId, mut lists: [Vec<Candidate>; 3]) -> Vec<Candidate> {
    let mut ordered = Vec::with_capacity(lists.iter().map(Vec::len).sum());
    for l in lists.iter_mut() {
        l.sort_by(|x, y| candidate_order(eng, cq, x, y));
    }
    for evicting in [true, false] {
        for l in &lists {
            ordered.extend(l.iter().filter(|c| c.evicting == evicting).cloned());
        }
    }
    ordered
}
