//! Fair sharing: Kueue's dominant resource share (DRS), weighted.
//!
//! A node's share is the largest, over resources, of what it borrows beyond its
//! own quota divided by what its parent cohort could lend, scaled to 1000 and
//! divided by the node's weight. Zero when it does not borrow.
//!
//! With nested cohorts Kueue compares two ClusterQueues by the shares of their
//! ancestors just below their lowest common ancestor (preemption: `fair_preempt`);
//! [`ordering_shares`] approximates that for ordering a cycle's heads.

use std::collections::BTreeMap;

use super::quota::NodeId;
use super::resources::{FrId, ResourceId};
use super::state::Engine;

/// Weighted share of `node` if `delta` (signed amounts) were added to its usage.
pub fn weighted_share(eng: &Engine, node: NodeId, delta: &[(FrId, i64)]) -> i64 {
    let tree = &eng.tree;
    let Some(parent) = tree.parent(node) else {
        return 0;
    };
    let n = &tree.nodes[node as usize];
    let mut borrowing: BTreeMap<ResourceId, i64> = BTreeMap::new();
    let mut frs: Vec<FrId> = n
        .usage
        .iter()
        .map(|(f, _)| f)
        .chain(delta.iter().map(|(f, _)| *f))
        .collect();
    frs.sort_unstable();
    frs.dedup();
    for fr in frs {
        let extra: i64 = delta
            .iter()
            .filter(|(f, _)| *f == fr)
            .map(|(_, v)| *v)
            .fold(0, i64::saturating_add);
        let b = n
            .usage
            .get(fr)
            .saturating_add(extra)
            .saturating_sub(n.subtree_quota.get(fr));
        if b > 0 {
            let e = borrowing.entry(eng.names.fr_parts(fr).1).or_default();
            *e = e.saturating_add(b);
        }
    }
    if borrowing.is_empty() {
        return 0;
    }
    let mut lendable: BTreeMap<ResourceId, i64> = BTreeMap::new();
    for (fr, _) in tree.nodes[parent as usize].subtree_quota.iter() {
        let e = lendable.entry(eng.names.fr_parts(fr).1).or_default();
        *e = e.saturating_add(tree.potential_available(parent, fr));
    }
    let drs = borrowing
        .iter()
        .map(|(r, b)| match lendable.get(r).copied().unwrap_or(0) {
            // Borrowing something the cohort cannot lend at all is the worst share.
            l if l <= 0 => i64::MAX / 4,
            l => ratio_milli(*b, l),
        })
        .max()
        .unwrap_or(0);
    let weight = eng.node_weight.get(node as usize).copied().unwrap_or(1000);
    if weight <= 0 {
        // A zero weight that borrows ranks above every weighted share; two of them
        // compare by their unweighted shares (Kueue's CompareDRS).
        return if drs > 0 {
            (i64::MAX / 4).saturating_add(drs.min(i64::MAX / 4))
        } else {
            0
        };
    }
    ratio_milli(drs, weight)
}

/// `a * 1000 / b` for `b > 0`, exact in i128 and clamped to `i64`: a share near the amount
/// limit must neither wrap nor lose its ordering to an early saturation.
fn ratio_milli(a: i64, b: i64) -> i64 {
    let r = i128::from(a) * 1000 / i128::from(b);
    i64::try_from(r).unwrap_or(if r < 0 { i64::MIN } else { i64::MAX })
}

/// The shares a head is ordered by under fair sharing, once `usage` is admitted to
/// ClusterQueue node `node`: that of its ancestor just below the root (where Kueue
/// compares heads of different top-level subtrees), then its own (where it compares
/// heads of the same cohort). Both are the ClusterQueue's own in a flat cohort.
pub fn ordering_shares(eng: &mut Engine, node: NodeId, usage: &[(FrId, i64)]) -> (i64, i64) {
    let own = weighted_share(eng, node, usage);
    let mut top = node;
    while let Some(p) = eng.tree.parent(top) {
        if eng.tree.parent(p).is_none() {
            break;
        }
        top = p;
    }
    if top == node {
        return (own, own);
    }
    let amounts: super::resources::FrAmounts = usage.iter().copied().collect();
    eng.tree.add_amounts(node, &amounts);
    let top_share = weighted_share(eng, top, &[]);
    eng.tree.remove_amounts(node, &amounts);
    (top_share, own)
}
