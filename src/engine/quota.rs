//! The quota tree: ClusterQueues under Cohorts (which may nest), with Kueue's
//! hierarchical formulas for subtree quota, usage, available and potential-available.
//!
//! Every node keeps `usage` = what its subtree uses *beyond* what the nodes below
//! it keep for themselves (their guaranteed quota), so adding or removing one
//! workload touches only its path to the root: O(depth) per (flavor, resource).
//!
//! Amounts reach `i64::MAX` (Kueue clamps huge quotas there), so every formula saturates
//! instead of wrapping: a sum past the limit reads as "unlimited", never as negative.

use super::resources::{FrAmounts, FrId, FrVec};

/// Index of a node (ClusterQueue or Cohort) in the tree arena.
pub type NodeId = u32;

/// Per (flavor, resource) limits of one node, in the engine's unit for the resource.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    pub nominal: FrVec,
    /// `None` = unlimited borrowing (Kueue's nil).
    pub borrowing: Vec<Option<i64>>,
    /// `None` = lends everything (Kueue's nil).
    pub lending: Vec<Option<i64>>,
}

impl Limits {
    pub fn borrowing_limit(&self, fr: FrId) -> Option<i64> {
        self.borrowing.get(fr as usize).copied().flatten()
    }
    pub fn lending_limit(&self, fr: FrId) -> Option<i64> {
        self.lending.get(fr as usize).copied().flatten()
    }
    pub fn set(&mut self, fr: FrId, nominal: i64, borrowing: Option<i64>, lending: Option<i64>) {
        self.nominal.set(fr, nominal);
        let i = fr as usize;
        if self.borrowing.len() <= i {
            self.borrowing.resize(i + 1, None);
            self.lending.resize(i + 1, None);
        }
        self.borrowing[i] = borrowing;
        self.lending[i] = lending;
    }
    /// The (flavor, resource) pairs this node has quota entries for.
    pub fn frs(&self) -> impl Iterator<Item = FrId> + '_ {
        let n = self.borrowing.len().max(
            self.nominal
                .iter()
                .map(|(f, _)| f as usize + 1)
                .max()
                .unwrap_or(0),
        );
        (0..n as FrId).filter(move |&fr| {
            self.nominal.get(fr) != 0
                || self.borrowing.get(fr as usize).is_some_and(|b| b.is_some())
                || self.lending.get(fr as usize).is_some_and(|l| l.is_some())
        })
    }
}

#[derive(Clone, Debug, Default)]
pub struct Node {
    pub parent: Option<NodeId>,
    pub children: Vec<NodeId>,
    /// Levels below it (0 for a ClusterQueue, 1 for a cohort of ClusterQueues):
    /// Kueue's node height, what borrowing "depth" is measured in.
    pub height: u32,
    pub limits: Limits,
    /// Own nominal plus what the children lend up (Kueue's SubtreeQuota).
    pub subtree_quota: FrVec,
    /// Usage charged to this node (see module docs).
    pub usage: FrVec,
}

/// The arena of quota nodes. Structure changes rebuild it; usage moves incrementally.
#[derive(Clone, Debug, Default)]
pub struct QuotaTree {
    pub nodes: Vec<Node>,
}

impl QuotaTree {
    pub fn add_node(&mut self, limits: Limits) -> NodeId {
        self.nodes.push(Node {
            limits,
            ..Node::default()
        });
        (self.nodes.len() - 1) as NodeId
    }

    pub fn set_parent(&mut self, child: NodeId, parent: NodeId) {
        self.nodes[child as usize].parent = Some(parent);
        self.nodes[parent as usize].children.push(child);
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// Recomputes subtree quotas bottom-up. Call after building the structure and
    /// before charging any usage.
    pub fn compute_subtree_quota(&mut self) {
        let order = self.post_order();
        for id in order {
            let mut sq = self.node(id).limits.nominal.clone();
            for c in self.node(id).children.clone() {
                let child = self.node(c);
                for (fr, q) in child.subtree_quota.iter() {
                    sq.add(fr, q.saturating_sub(self.guaranteed(c, fr)));
                }
            }
            let height = self
                .node(id)
                .children
                .iter()
                .map(|&c| self.node(c).height + 1)
                .max()
                .unwrap_or(0);
            self.nodes[id as usize].subtree_quota = sq;
            self.nodes[id as usize].usage = FrVec::default();
            self.nodes[id as usize].height = height;
        }
    }

    /// Children before parents, roots in id order: deterministic.
    fn post_order(&self) -> Vec<NodeId> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack: Vec<(NodeId, bool)> = Vec::new();
        for root in (0..self.nodes.len() as NodeId).filter(|&n| self.node(n).parent.is_none()) {
            stack.push((root, false));
            while let Some((n, expanded)) = stack.pop() {
                if expanded {
                    out.push(n);
                } else {
                    stack.push((n, true));
                    for &c in self.node(n).children.iter().rev() {
                        stack.push((c, false));
                    }
                }
            }
        }
        out
    }

    /// Quota a node keeps for itself and never lends: subtree quota minus lendingLimit.
    #[inline]
    pub fn guaranteed(&self, id: NodeId, fr: FrId) -> i64 {
        let n = self.node(id);
        match n.limits.lending_limit(fr) {
            Some(l) => n.subtree_quota.get(fr).saturating_sub(l).max(0),
            None => 0,
        }
    }

    /// What a workload in this node could use right now, borrowing included.
    ///
    /// Never more than the node's usage counter can still hold: past `i64::MAX` in total,
    /// quota is as good as unlimited, and admitting beyond it would saturate the counter
    /// and under-count what is in use.
    pub fn available(&self, id: NodeId, fr: FrId) -> i64 {
        let n = self.node(id);
        let room = i64::MAX - n.usage.get(fr).max(0);
        let Some(parent) = n.parent else {
            return n
                .subtree_quota
                .get(fr)
                .saturating_sub(n.usage.get(fr))
                .min(room);
        };
        let guaranteed = self.guaranteed(id, fr);
        let local = guaranteed.saturating_sub(n.usage.get(fr)).max(0);
        let mut from_parent = self.available(parent, fr);
        if let Some(bl) = n.limits.borrowing_limit(fr) {
            let stored_in_parent = n.subtree_quota.get(fr).saturating_sub(guaranteed);
            let used_in_parent = n.usage.get(fr).saturating_sub(guaranteed).max(0);
            from_parent = from_parent.min(
                stored_in_parent
                    .saturating_sub(used_in_parent)
                    .saturating_add(bl),
            );
        }
        local.saturating_add(from_parent).min(room)
    }

    /// What a workload in this node could use if nothing else were running.
    pub fn potential_available(&self, id: NodeId, fr: FrId) -> i64 {
        let n = self.node(id);
        let Some(parent) = n.parent else {
            return n.subtree_quota.get(fr);
        };
        let mut avail = self
            .guaranteed(id, fr)
            .saturating_add(self.potential_available(parent, fr));
        if let Some(bl) = n.limits.borrowing_limit(fr) {
            avail = avail.min(n.subtree_quota.get(fr).saturating_add(bl));
        }
        avail
    }

    /// Charges `v` to a node and the part beyond its guarantee to its ancestors.
    pub fn add_usage(&mut self, id: NodeId, fr: FrId, v: i64) {
        let mut id = id;
        let mut v = v;
        loop {
            let local_free = self.local_available(id, fr);
            self.nodes[id as usize].usage.add(fr, v);
            match self.node(id).parent {
                Some(p) if v > local_free => {
                    v -= local_free;
                    id = p;
                }
                _ => return,
            }
        }
    }

    /// Exact inverse of [`QuotaTree::add_usage`].
    pub fn remove_usage(&mut self, id: NodeId, fr: FrId, v: i64) {
        let mut id = id;
        let mut v = v;
        loop {
            let stored_in_parent = self
                .node(id)
                .usage
                .get(fr)
                .saturating_sub(self.guaranteed(id, fr));
            self.nodes[id as usize].usage.add(fr, v.saturating_neg());
            match self.node(id).parent {
                Some(p) if stored_in_parent > 0 => {
                    v = v.min(stored_in_parent);
                    id = p;
                }
                _ => return,
            }
        }
    }

    /// Charges `amounts` to node `id` and its ancestors. A node that is not in the tree
    /// (a deleted ClusterQueue's, `NodeId::MAX`) holds nothing: its admitted workloads
    /// were left out when the tree was rebuilt, so charging or releasing them is a no-op.
    pub fn add_amounts(&mut self, id: NodeId, amounts: &FrAmounts) {
        if id as usize >= self.nodes.len() {
            return;
        }
        for &(fr, v) in amounts {
            self.add_usage(id, fr, v);
        }
    }

    /// Releases what [`Self::add_amounts`] charged; a no-op for a node not in the tree.
    pub fn remove_amounts(&mut self, id: NodeId, amounts: &FrAmounts) {
        if id as usize >= self.nodes.len() {
            return;
        }
        for &(fr, v) in amounts {
            self.remove_usage(id, fr, v);
        }
    }

    pub fn height(&self, id: NodeId) -> u32 {
        self.node(id).height
    }

    /// Unused guaranteed quota: what this node keeps from its parent (Kueue's LocalAvailable).
    pub fn local_available(&self, id: NodeId, fr: FrId) -> i64 {
        self.guaranteed(id, fr)
            .saturating_sub(self.node(id).usage.get(fr))
            .max(0)
    }

    /// Whether using `val` more would take the node beyond its subtree quota.
    pub fn borrowing_with(&self, id: NodeId, fr: FrId, val: i64) -> bool {
        let n = self.node(id);
        n.usage.get(fr).saturating_add(val) > n.subtree_quota.get(fr)
    }

    /// Whether the node uses more than its own subtree quota (it borrows) for `fr`.
    pub fn is_borrowing(&self, id: NodeId, fr: FrId) -> bool {
        let n = self.node(id);
        n.parent.is_some() && n.usage.get(fr) > n.subtree_quota.get(fr)
    }

    /// Usage of the node for `fr` (for a ClusterQueue: everything its workloads use).
    pub fn usage(&self, id: NodeId, fr: FrId) -> i64 {
        self.node(id).usage.get(fr)
    }

    pub fn subtree_quota(&self, id: NodeId, fr: FrId) -> i64 {
        self.node(id).subtree_quota.get(fr)
    }

    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        self.node(id).parent
    }

    pub fn root(&self, mut id: NodeId) -> NodeId {
        while let Some(p) = self.node(id).parent {
            id = p;
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(fr: FrId, nominal: i64, b: Option<i64>, l: Option<i64>) -> Limits {
        let mut lim = Limits::default();
        lim.set(fr, nominal, b, l);
        lim
    }

    /// Kueue's documented lending-limit example: cq-a nominal 10 lends 5; cq-b nominal 0.
    #[test]
    fn lending_limit_keeps_guaranteed_quota() {
        let mut t = QuotaTree::default();
        let cohort = t.add_node(Limits::default());
        let a = t.add_node(limits(0, 10, None, Some(5)));
        let b = t.add_node(limits(0, 0, None, None));
        t.set_parent(a, cohort);
        t.set_parent(b, cohort);
        t.compute_subtree_quota();
        assert_eq!(t.subtree_quota(cohort, 0), 5);
        assert_eq!(t.available(b, 0), 5);
        assert_eq!(t.available(a, 0), 10);
        t.add_usage(b, 0, 5);
        assert_eq!(t.available(a, 0), 5);
        assert_eq!(t.available(b, 0), 0);
        t.remove_usage(b, 0, 5);
        assert_eq!(t.available(a, 0), 10);
    }

    #[test]
    fn borrowing_limit_caps_available_and_potential() {
        let mut t = QuotaTree::default();
        let cohort = t.add_node(Limits::default());
        let a = t.add_node(limits(0, 4, Some(2), None));
        let b = t.add_node(limits(0, 10, None, None));
        t.set_parent(a, cohort);
        t.set_parent(b, cohort);
        t.compute_subtree_quota();
        assert_eq!(t.available(a, 0), 6);
        assert_eq!(t.potential_available(a, 0), 6);
        assert_eq!(t.potential_available(b, 0), 14);
        t.add_usage(b, 0, 9);
        assert_eq!(t.available(a, 0), 5);
    }

    #[test]
    fn add_then_remove_is_identity() {
        let mut t = QuotaTree::default();
        let root = t.add_node(limits(0, 3, None, None));
        let mid = t.add_node(limits(0, 2, Some(1), Some(1)));
        let a = t.add_node(limits(0, 4, None, Some(2)));
        t.set_parent(mid, root);
        t.set_parent(a, mid);
        t.compute_subtree_quota();
        t.add_usage(a, 0, 3);
        let before: Vec<_> = t.nodes.iter().map(|n| n.usage.clone()).collect();
        t.add_usage(a, 0, 4);
        t.remove_usage(a, 0, 4);
        let after: Vec<_> = t.nodes.iter().map(|n| n.usage.clone()).collect();
        assert_eq!(before, after);
    }

    /// An amount: small, near the largest cpu quota in cores (i64::MAX / 1000), or near
    /// i64::MAX (what Kueue clamps huge quotas to).
    fn amount() -> impl proptest::strategy::Strategy<Value = i64> {
        use proptest::prelude::*;
        prop_oneof![
            0..1000i64,
            (i64::MAX / 1000 - 1000)..=(i64::MAX / 1000),
            (i64::MAX - 1000)..=i64::MAX,
        ]
    }

    proptest::proptest! {
        /// Nested cohorts with quotas and limits near the amount limit: admitting only
        /// what `available` allows never commits more than the tree's nominal quotas nor
        /// past a borrowingLimit, nothing panics or wraps negative, and releasing
        /// everything leaves no usage behind.
        #[test]
        fn never_over_committed_near_the_limits(
            parents in proptest::collection::vec(0usize..8, 1..8),
            quotas in proptest::collection::vec(
                (amount(), proptest::option::of(amount()), proptest::option::of(amount())),
                8,
            ),
            requests in proptest::collection::vec((0usize..8, amount()), 1..40),
        ) {
            let n = parents.len() + 1;
            let mut t = QuotaTree::default();
            for &(nominal, b, l) in &quotas[..n] {
                // Validation keeps lendingLimit <= nominalQuota.
                t.add_node(limits(0, nominal, b, l.map(|l| l.min(nominal))));
            }
            for (i, p) in parents.iter().enumerate() {
                t.set_parent(i as NodeId + 1, (p % (i + 1)) as NodeId);
            }
            t.compute_subtree_quota();
            let leaves: Vec<NodeId> = (0..n as NodeId)
                .filter(|&i| t.nodes[i as usize].children.is_empty())
                .collect();
            let nominal_sum: i128 = quotas[..n].iter().map(|q| i128::from(q.0)).sum();
            let mut held: Vec<(NodeId, i64)> = Vec::new();
            for &(leaf, v) in &requests {
                let node = leaves[leaf % leaves.len()];
                if v > 0 && v <= t.available(node, 0) {
                    t.add_usage(node, 0, v);
                    held.push((node, v));
                }
                let total: i128 = held.iter().map(|&(_, v)| i128::from(v)).sum();
                proptest::prop_assert!(total <= nominal_sum, "{total} > {nominal_sum}");
                for &leaf in &leaves {
                    let used: i128 = held.iter().filter(|h| h.0 == leaf).map(|h| i128::from(h.1)).sum();
                    proptest::prop_assert_eq!(i128::from(t.usage(leaf, 0)), used);
                    if let (Some(_), Some(bl)) = (t.parent(leaf), quotas[leaf as usize].1) {
                        let cap = i128::from(t.subtree_quota(leaf, 0)) + i128::from(bl);
                        proptest::prop_assert!(used <= cap, "{used} past borrowingLimit {cap}");
                    }
                }
                for id in 0..n as NodeId {
                    proptest::prop_assert!(t.usage(id, 0) >= 0);
                    proptest::prop_assert!(t.potential_available(id, 0) >= 0);
                    proptest::prop_assert!(t.subtree_quota(id, 0) >= 0);
                }
            }
            for &(node, v) in held.iter().rev() {
                t.remove_usage(node, 0, v);
            }
            for id in 0..n as NodeId {
                proptest::prop_assert_eq!(t.usage(id, 0), 0);
            }
        }
    }
}
