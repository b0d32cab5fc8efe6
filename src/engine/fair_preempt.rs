//! Fair-sharing preemption through the cohort tree, as Kueue's `fairPreemptions`
//! (pkg/scheduler/preemption/preemption.go and its `fairsharing` package).
//!
//! Targets are taken from the ClusterQueue reached by walking down from the root,
//! always into the child (ClusterQueue or Cohort) with the highest weighted dominant
//! resource share that borrows (or leads to the preemptor). A target outside the
//! preemptor's ClusterQueue is taken only if the fair-sharing strategy holds for the
//! shares of the two subtrees that meet at their lowest common ancestor (the
//! "almost-LCAs"), so Cohort weights count where Cohorts compete.

use std::collections::{BTreeMap, VecDeque};

use super::flavor::Assignment;
use super::preempt::{Candidate, candidate_order, fits, restore, take_out};
use super::queue::WlId;
use super::quota::NodeId;
use super::state::{CqId, Engine};
use super::{FairPreemptionStrategy, FastMap, FastSet, PreemptionReason};

/// Kueue's TargetClusterQueueOrdering: candidates per ClusterQueue, in candidate
/// order, and what has been pruned from the walk.
struct Ordering {
    by_cq: BTreeMap<CqId, VecDeque<Candidate>>,
    cq_of_node: FastMap<NodeId, CqId>,
    pruned_cqs: FastSet<CqId>,
    pruned_cohorts: FastSet<NodeId>,
    /// The preemptor's ancestors, parent first.
    path: Vec<NodeId>,
    preemptor: CqId,
    preemptor_node: NodeId,
}

/// Whether the node borrows any resource, and its weighted share.
fn share(eng: &Engine, node: NodeId) -> (bool, i64) {
    let tree = &eng.tree;
    let borrowing = tree.parent(node).is_some()
        && tree.nodes[node as usize]
            .usage
            .iter()
            .any(|(fr, _)| tree.is_borrowing(node, fr));
    (borrowing, super::fair::weighted_share(eng, node, &[]))
}

impl Ordering {
    fn new(eng: &Engine, cq: CqId, cands: Vec<Candidate>) -> Self {
        let preemptor_node = eng.cqs[cq as usize].node;
        let mut path = Vec::new();
        let mut n = eng.tree.parent(preemptor_node);
        while let Some(p) = n {
            path.push(p);
            n = eng.tree.parent(p);
        }
        let mut by_cq: BTreeMap<CqId, VecDeque<Candidate>> = BTreeMap::new();
        let mut cq_of_node = FastMap::default();
        cq_of_node.insert(preemptor_node, cq);
        for c in cands {
            cq_of_node.insert(c.node, c.cq);
            by_cq.entry(c.cq).or_default().push_back(c);
        }
        Ordering {
            by_cq,
            cq_of_node,
            pruned_cqs: FastSet::default(),
            pruned_cohorts: FastSet::default(),
            path,
            preemptor: cq,
            preemptor_node,
        }
    }

    fn has(&self, cq: CqId) -> bool {
        self.by_cq.get(&cq).is_some_and(|q| !q.is_empty())
    }

    fn pop(&mut self, cq: CqId) -> Option<Candidate> {
        self.by_cq.get_mut(&cq).and_then(VecDeque::pop_front)
    }

    fn drop_queue(&mut self, cq: CqId) {
        self.pruned_cqs.insert(cq);
    }

    /// The next ClusterQueue to take a target from, or `None` when none is left.
    fn next(&mut self, eng: &Engine) -> Option<CqId> {
        let Some(&root) = self.path.last() else {
            let own = self.preemptor;
            return (!self.pruned_cqs.contains(&own) && self.has(own)).then_some(own);
        };
        while !self.pruned_cohorts.contains(&root) {
            if let Some(cq) = self.next_target(eng, root) {
                return Some(cq);
            }
        }
        None
    }

    fn next_target(&mut self, eng: &Engine, cohort: NodeId) -> Option<CqId> {
        let mut best_cq: Option<(i64, CqId)> = None;
        let mut best_cohort: Option<(i64, NodeId)> = None;
        for &child in &eng.tree.nodes[cohort as usize].children {
            if let Some(&c) = self.cq_of_node.get(&child) {
                if self.pruned_cqs.contains(&c) {
                    continue;
                }
                let (borrowing, drs) = share(eng, child);
                if (!borrowing && c != self.preemptor) || !self.has(c) {
                    self.pruned_cqs.insert(c);
                    continue;
                }
                let better = match best_cq {
                    None => true,
                    Some((d, _)) if drs != d => drs > d,
                    Some((_, b)) => match (self.first(c), self.first(b)) {
                        (Some(x), Some(y)) => candidate_order(eng, self.preemptor, x, y).is_lt(),
                        _ => false,
                    },
                };
                if better {
                    best_cq = Some((drs, c));
                }
            } else if !eng.tree.nodes[child as usize].children.is_empty() {
                if self.pruned_cohorts.contains(&child) {
                    continue;
                }
                let (borrowing, drs) = share(eng, child);
                if !borrowing && !self.path.contains(&child) {
                    self.pruned_cohorts.insert(child);
                } else if best_cohort.is_none_or(|(d, _)| drs >= d) {
                    best_cohort = Some((drs, child));
                }
            }
        }
        match (best_cq, best_cohort) {
            (None, None) => {
                self.pruned_cohorts.insert(cohort);
                None
            }
            (cq, Some((d, sub))) if cq.is_none_or(|(q, _)| d >= q) => self.next_target(eng, sub),
            (Some((_, c)), _) => Some(c),
            (None, Some(_)) => None,
        }
    }

    fn first(&self, cq: CqId) -> Option<&Candidate> {
        self.by_cq.get(&cq).and_then(|q| q.front())
    }

    /// The children of the lowest common ancestor on the preemptor's side and on
    /// the target's side.
    fn almost_lcas(&self, eng: &Engine, target_node: NodeId) -> (NodeId, NodeId) {
        let mut below = target_node;
        let mut n = eng.tree.parent(target_node);
        while let Some(p) = n {
            if let Some(k) = self.path.iter().position(|&x| x == p) {
                let own = if k == 0 {
                    self.preemptor_node
                } else {
                    self.path[k - 1]
                };
                return (own, below);
            }
            below = p;
            n = eng.tree.parent(p);
        }
        (self.preemptor_node, target_node)
    }
}

/// Kueue's fairPreemptions: the victims that let `wl` fit, removed from the tree,
/// or `None` (tree untouched).
pub(crate) fn search(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    cands: Vec<Candidate>,
    strategies: &[FairPreemptionStrategy],
) -> Option<Vec<Candidate>> {
    let node = eng.cqs[cq as usize].node;
    let mut removed = Vec::new();
    let (evicting, pool): (Vec<Candidate>, Vec<Candidate>) =
        cands.into_iter().partition(|c| c.evicting);
    for mut c in evicting {
        take_out(eng, &mut c);
        removed.push(c);
        if fits(eng, node, wl, a, true) {
            return Some(removed);
        }
    }
    // Whether the preemptor, once admitted, stays within its nominal quota in every
    // resource that needs preemption (Kueue's FairSharingPreemptWithinNominal).
    let within_nominal = a.preempt_frs.iter().all(|&fr| {
        let v = a
            .usage
            .iter()
            .find(|(f, _)| *f == fr)
            .map_or(0, |&(_, v)| v);
        !eng.tree.borrowing_with(node, fr, v)
    });
    // Shares are compared with the incoming workload counted, fits without it.
    eng.tree.add_amounts(node, &a.usage);
    let fits_now = |eng: &mut Engine| fits_without_incoming(eng, node, wl, a);
    let first = strategies
        .first()
        .copied()
        .unwrap_or(FairPreemptionStrategy::LessThanOrEqualToFinalShare);
    let mut order = Ordering::new(eng, cq, pool);
    let mut retry = Vec::new();
    let mut done = false;
    'walk: while let Some(t) = order.next(eng) {
        if t == cq || within_nominal {
            let Some(mut c) = order.pop(t) else { continue };
            if t != cq {
                c.reason = PreemptionReason::InCohortReclamation;
            }
            take_out(eng, &mut c);
            removed.push(c);
            if fits_now(eng) {
                done = true;
                break;
            }
            continue;
        }
        let t_node = eng.cqs[t as usize].node;
        let (own_alca, target_alca) = order.almost_lcas(eng, t_node);
        let preemptor_new = super::fair::weighted_share(eng, own_alca, &[]);
        let target_old = super::fair::weighted_share(eng, target_alca, &[]);
        while let Some(mut c) = order.pop(t) {
            let passed = match first {
                FairPreemptionStrategy::LessThanInitialShare => preemptor_new < target_old,
                FairPreemptionStrategy::LessThanOrEqualToFinalShare => {
                    eng.tree.remove_amounts(c.node, &c.usage);
                    let target_new = super::fair::weighted_share(eng, target_alca, &[]);
                    eng.tree.add_amounts(c.node, &c.usage);
                    preemptor_new <= target_new
                }
            };
            if !passed {
                retry.push(c);
                continue;
            }
            take_out(eng, &mut c);
            removed.push(c);
            if fits_now(eng) {
                done = true;
                break 'walk;
            }
            // The shares changed: pick the ClusterQueue again.
            break;
        }
    }
    if !done && strategies.len() > 1 {
        done = second_strategy(eng, wl, cq, a, retry, &mut removed);
    }
    eng.tree.remove_amounts(node, &a.usage);
    if done {
        Some(removed)
    } else {
        restore(eng, &mut removed);
        None
    }
}

/// Whether `a` fits ClusterQueue node `node` once the incoming usage, counted in the
/// tree for the shares, is taken out again.
fn fits_without_incoming(eng: &mut Engine, node: NodeId, wl: WlId, a: &Assignment) -> bool {
    eng.tree.remove_amounts(node, &a.usage);
    let f = fits(eng, node, wl, a, true);
    eng.tree.add_amounts(node, &a.usage);
    f
}

/// Kueue's rule S2-b: one more candidate per ClusterQueue, taken if the preemptor's
/// share stays below the target's initial share (LessThanInitialShare). Returns
/// whether the workload then fits; victims are added to `removed`.
fn second_strategy(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    retry: Vec<Candidate>,
    removed: &mut Vec<Candidate>,
) -> bool {
    let node = eng.cqs[cq as usize].node;
    let mut order = Ordering::new(eng, cq, retry);
    while let Some(t) = order.next(eng) {
        let t_node = eng.cqs[t as usize].node;
        let (own_alca, target_alca) = order.almost_lcas(eng, t_node);
        let passed = super::fair::weighted_share(eng, own_alca, &[])
            < super::fair::weighted_share(eng, target_alca, &[]);
        if let (true, Some(mut c)) = (passed, order.pop(t)) {
            take_out(eng, &mut c);
            removed.push(c);
            if fits_without_incoming(eng, node, wl, a) {
                return true;
            }
        }
        order.drop_queue(t);
    }
    false
}
