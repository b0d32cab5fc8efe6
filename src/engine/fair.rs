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

/// A head's ancestors from just below the root down to its ClusterQueue node, each
/// with its weighted share once `usage` is admitted to ClusterQueue node `node`:
/// what Kueue compares two heads by, at the level where their paths part.
pub fn share_path(
    eng: &mut Engine,
    node: NodeId,
    usage: &[(FrId, i64)],
) -> smallvec::SmallVec<[(NodeId, i64); 2]> {
    let mut path: smallvec::SmallVec<[(NodeId, i64); 2]> = smallvec::smallvec![(node, 0)];
    let mut n = node;
    while let Some(p) = eng.tree.parent(n) {
        if eng.tree.parent(p).is_none() {
            break;
        }
        path.push((p, 0));
        n = p;
    }
    path.reverse();
    if path.len() == 1 {
        path[0].1 = weighted_share(eng, node, usage);
        return path;
    }
    let amounts: super::resources::FrAmounts = usage.iter().copied().collect();
    eng.tree.add_amounts(node, &amounts);
    for e in path.iter_mut() {
        e.1 = weighted_share(eng, e.0, &[]);
    }
    eng.tree.remove_amounts(node, &amounts);
    path
}

/// The order of a cycle's heads under fair sharing with nested cohorts, as Kueue's
/// tournament: at each level the subtree whose best head leaves it the lowest share
/// goes first (ties by `keys`), and the winner is taken out before the next pick.
/// `paths` come from [`share_path`].
pub fn tournament<K: Ord + Copy>(paths: &[&[(NodeId, i64)]], keys: &[K]) -> Vec<u32> {
    let mut left: Vec<u32> = (0..paths.len() as u32).collect();
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let best = pick(paths, keys, &left, 0);
        out.push(best);
        left.retain(|&i| i != best);
    }
    out
}

fn pick<K: Ord + Copy>(paths: &[&[(NodeId, i64)]], keys: &[K], idx: &[u32], level: usize) -> u32 {
    let at = |i: u32| {
        let p = paths[i as usize];
        p[level.min(p.len() - 1)]
    };
    let mut groups: BTreeMap<NodeId, Vec<u32>> = BTreeMap::new();
    for &i in idx {
        groups.entry(at(i).0).or_default().push(i);
    }
    groups
        .into_values()
        .map(|g| {
            if g.len() == 1 || g.iter().all(|&i| paths[i as usize].len() <= level + 1) {
                *g.iter().min_by_key(|&&i| keys[i as usize]).unwrap_or(&g[0])
            } else {
                pick(paths, keys, &g, level + 1)
            }
        })
        .min_by_key(|&w| (at(w).1, keys[w as usize]))
        .unwrap_or(idx[0])
}

#[cfg(test)]
mod tests {
    use super::tournament;

    /// Heads under one top-level Cohort are compared by their own shares, not by
    /// what each would make that Cohort's share (Kueue compares at the lowest
    /// common ancestor); heads in different top-level subtrees by those subtrees.
    #[test]
    fn tournament_compares_where_paths_part() {
        // Cohort 10 holds ClusterQueues 1 and 2; ClusterQueue 3 sits under the root.
        let a: &[(u32, i64)] = &[(10, 500), (1, 200)];
        let b: &[(u32, i64)] = &[(10, 100), (2, 300)];
        let c: &[(u32, i64)] = &[(3, 400)];
        let keys = [0, 1, 2];
        // a's own share is lower than b's although a leaves Cohort 10 higher; the
        // subtree of 10 (best head a, 500) then loses to 3 (400).
        assert_eq!(tournament(&[a, b, c], &keys), vec![2, 0, 1]);
        // Equal shares fall back to the keys.
        let d: &[(u32, i64)] = &[(4, 400)];
        assert_eq!(tournament(&[d, c], &[1, 0]), vec![1, 0]);
    }
}
