//! Fair sharing: Kueue's dominant resource share (DRS), weighted.
//!
//! A node's share is the largest, over resources, of what it borrows beyond its
//! own quota divided by what its parent cohort could lend, scaled to 1000 and
//! divided by the node's weight. Zero when it does not borrow.

use std::collections::BTreeMap;

use super::quota::NodeId;
use super::resources::{FrId, ResourceId};
use super::state::Engine;

/// Weighted share of `node` if `delta` (signed milli-units) were added to its usage.
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
            .sum();
        let b = n.usage.get(fr) + extra - n.subtree_quota.get(fr);
        if b > 0 {
            *borrowing.entry(eng.names.fr_parts(fr).1).or_default() += b;
        }
    }
    if borrowing.is_empty() {
        return 0;
    }
    let mut lendable: BTreeMap<ResourceId, i64> = BTreeMap::new();
    for (fr, _) in tree.nodes[parent as usize].subtree_quota.iter() {
        *lendable.entry(eng.names.fr_parts(fr).1).or_default() +=
            tree.potential_available(parent, fr);
    }
    let drs = borrowing
        .iter()
        .map(|(r, b)| match lendable.get(r).copied().unwrap_or(0) {
            // Borrowing something the cohort cannot lend at all is the worst share.
            l if l <= 0 => i64::MAX / 4,
            l => b.saturating_mul(1000) / l,
        })
        .max()
        .unwrap_or(0);
    let weight = eng.node_weight.get(node as usize).copied().unwrap_or(1000);
    if weight <= 0 {
        return if drs > 0 { i64::MAX / 4 } else { 0 };
    }
    drs.saturating_mul(1000) / weight
}
