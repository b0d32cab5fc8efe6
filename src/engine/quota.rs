//! The quota tree: ClusterQueues under Cohorts (which may nest), with Kueue's
//! hierarchical formulas for subtree quota, usage, available and potential-available.
//!
//! Every node keeps `usage` = what its subtree uses *beyond* what the nodes below
//! it keep for themselves (their guaranteed quota), so adding or removing one
//! workload touches only its path to the root: O(depth) per (flavor, resource).

use super::resources::{FrAmounts, FrId, FrVec};

/// Index of a node (ClusterQueue or Cohort) in the tree arena.
pub type NodeId = u32;

/// Per (flavor, resource) limits of one node, in milli-units.
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
                    sq.add(fr, q - self.guaranteed(c, fr));
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
            Some(l) => (n.subtree_quota.get(fr) - l).max(0),
            None => 0,
        }
    }

    /// What a workload in this node could use right now, borrowing included.
    pub fn available(&self, id: NodeId, fr: FrId) -> i64 {
        let n = self.node(id);
        let Some(parent) = n.parent else {
            return n.subtree_quota.get(fr) - n.usage.get(fr);
        };
        let guaranteed = self.guaranteed(id, fr);
        let local = (guaranteed - n.usage.get(fr)).max(0);
        let mut from_parent = self.available(parent, fr);
        if let Some(bl) = n.limits.borrowing_limit(fr) {
            let stored_in_parent = n.subtree_quota.get(fr) - guaranteed;
            let used_in_parent = (n.usage.get(fr) - guaranteed).max(0);
            from_parent = from_parent.min(stored_in_parent - used_in_parent + bl);
        }
        local + from_parent
    }

    /// What a workload in this node could use if nothing else were running.
    pub fn potential_available(&self, id: NodeId, fr: FrId) -> i64 {
        let n = self.node(id);
        let Some(parent) = n.parent else {
            return n.subtree_quota.get(fr);
        };
        let mut avail = self.guaranteed(id, fr) + self.potential_available(parent, fr);
        if let Some(bl) = n.limits.borrowing_limit(fr) {
            avail = avail.min(n.subtree_quota.get(fr) + bl);
        }
        avail
    }

    /// Charges `v` to a node and the part beyond its guarantee to its ancestors.
    pub fn add_usage(&mut self, id: NodeId, fr: FrId, v: i64) {
        let mut id = id;
        let mut v = v;
        loop {
            let local_free = (self.guaranteed(id, fr) - self.node(id).usage.get(fr)).max(0);
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
            let stored_in_parent = self.node(id).usage.get(fr) - self.guaranteed(id, fr);
            self.nodes[id as usize].usage.add(fr, -v);
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
        (self.guaranteed(id, fr) - self.node(id).usage.get(fr)).max(0)
    }

    /// Whether using `val` more would take the node beyond its subtree quota.
    pub fn borrowing_with(&self, id: NodeId, fr: FrId, val: i64) -> bool {
        let n = self.node(id);
        n.usage.get(fr) + val > n.subtree_quota.get(fr)
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

    /// Depth-first, deterministic list of the nodes in `id`'s subtree.
    pub fn subtree(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = vec![];
        let mut stack = vec![id];
        while let Some(n) = stack.pop() {
            out.push(n);
            for &c in self.node(n).children.iter().rev() {
                stack.push(c);
            }
        }
        out
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
}
