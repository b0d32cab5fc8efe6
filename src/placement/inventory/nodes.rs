//! Node events: a Node added, changed or removed, and the usage of pods kuota does not
//! manage. Each touches only the trees of the flavors the node belongs to.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Taint};

use super::{Inventory, MAX_SLOTS, NodeChange, NodeRec, PlacementError, Tree, add_at, at};
use crate::api::quantity::{MILLI_RESOURCE, resource_value};
use crate::names::{Names, ResourceId};

/// The labels of a node that has none, so every node's labels can be borrowed.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// What placement reads from a Node object.
struct NodeFacts<'a> {
    name: String,
    labels: &'a BTreeMap<String, String>,
    taints: &'a [Taint],
    schedulable: bool,
    /// Allocatable by resource id (dense).
    allocatable: Vec<i64>,
}

impl<'a> NodeFacts<'a> {
    /// Reads a Node; it is schedulable when Ready (or not saying) and not cordoned.
    fn read(names: &mut Names, node: &'a Node) -> Result<Self, PlacementError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let status = node.status.as_ref();
        let mut allocatable = Vec::new();
        for (k, q) in status
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
        {
            let v = resource_value(k, q).map_err(|source| PlacementError::Allocatable {
                node: name.to_string(),
                resource: k.clone(),
                source,
            })?;
            add_at(&mut allocatable, names.resource(k) as usize, v);
        }
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .is_none_or(|c| c.status == "True");
        let spec = node.spec.as_ref();
        Ok(Self {
            name,
            labels: node.metadata.labels.as_ref().unwrap_or(&NO_LABELS),
            taints: spec.and_then(|s| s.taints.as_deref()).unwrap_or_default(),
            schedulable: ready && !spec.and_then(|s| s.unschedulable).unwrap_or(false),
            allocatable,
        })
    }

    /// Whether `old` has the same labels, taints and schedulability: all that decides
    /// which trees hold the node, and where, apart from its allocatable.
    fn same_but_allocatable(&self, old: &NodeRec) -> bool {
        old.schedulable == self.schedulable
            && old.labels == *self.labels
            && old.taints == self.taints
    }
}

impl Inventory {
    /// Adds or replaces a node. A node whose labels, taints, readiness and allocatable
    /// are unchanged (a kubelet heartbeat) changes nothing; a real change marks only the
    /// trees of the flavors the node belongs to, before or after, for a rebuild.
    pub fn upsert_node(
        &mut self,
        names: &mut Names,
        node: &Node,
    ) -> Result<NodeChange, PlacementError> {
        self.exclude_from_histograms(names);
        let seen = NodeFacts::read(names, node)?;
        let idx = self.node_index.get(&seen.name).copied();
        if let Some(i) = idx
            && let Some(old) = self.node(i)
            && seen.same_but_allocatable(old)
        {
            if old.allocatable == seen.allocatable {
                return Ok(NodeChange {
                    lost: self.lost_owners(i, seen.schedulable),
                    flavors: vec![],
                });
            }
            if self.same_tree_shape(i, &old.allocatable, &seen.allocatable) {
                return Ok(self.resize_in_place(i, seen.allocatable, seen.schedulable));
            }
        }
        Ok(self.replace_node(idx, seen))
    }

    /// Records the resources no histogram tracks, interning their names.
    fn exclude_from_histograms(&mut self, names: &mut Names) {
        // A histogram slot is one unit of the engine's amount; cpu counts milli-cores, so
        // its slots would not fit the histogram range: cpu-bound requests walk nodes exactly.
        for r in ["pods", MILLI_RESOURCE] {
            let r = names.resource(r);
            if !self.no_hist.contains(&r) {
                self.no_hist.push(r);
            }
        }
    }

    /// Sets node `i`'s allocatable in its trees' leaves, when that lays out no tree's
    /// histograms differently ([`Inventory::same_tree_shape`]).
    fn resize_in_place(&mut self, i: u32, allocatable: Vec<i64>, schedulable: bool) -> NodeChange {
        // The node keeps its leaf, so updating that leaf and its ancestors (O(depth) per
        // tree) leaves each tree as a rebuild would, at a fraction of the cost.
        let old = self.node(i);
        let grew = old.is_some_and(|o| {
            (0..o.allocatable.len().max(allocatable.len()))
                .any(|r| at(&allocatable, r) > at(&o.allocatable, r))
        });
        // Less room cannot help a parked workload: retry nothing then.
        let flavors = match old {
            Some(o) if grew => self.member_of(o).into_iter().collect(),
            _ => vec![],
        };
        self.change_node(i, |n| n.allocatable = allocatable);
        NodeChange {
            lost: self.lost_owners(i, schedulable),
            flavors,
        }
    }

    /// Stores a new or changed node (keeping what runs on it) and queues the trees it
    /// was or is in for a rebuild.
    fn replace_node(&mut self, idx: Option<u32>, seen: NodeFacts<'_>) -> NodeChange {
        let idx = idx.unwrap_or_else(|| {
            self.nodes.push(None);
            let i = (self.nodes.len() - 1) as u32;
            self.node_index.insert(seen.name.clone(), i);
            i
        });
        let old = self.nodes[idx as usize].take();
        let mut flavors = old.as_ref().map(|o| self.member_of(o)).unwrap_or_default();
        let (used, external) = old.map(|o| (o.used, o.external)).unwrap_or_default();
        let schedulable = seen.schedulable;
        let rec = NodeRec {
            name: seen.name,
            labels: seen.labels.clone(),
            taints: seen.taints.to_vec(),
            schedulable,
            allocatable: seen.allocatable,
            used,
            external,
        };
        flavors.extend(self.member_of(&rec));
        self.nodes[idx as usize] = Some(rec);
        let flavors = self.mark_stale(flavors);
        NodeChange {
            lost: self.lost_owners(idx, schedulable),
            flavors,
        }
    }

    /// The owners to move off node `idx`: those with pods on it, unless it is schedulable.
    fn lost_owners(&self, idx: u32, schedulable: bool) -> Vec<u32> {
        if schedulable {
            vec![]
        } else {
            self.owners_on(idx)
        }
    }

    /// Whether every tree that has node `idx` as a leaf would choose the same histogram
    /// resources and ranges if the node's allocatable went from `old` to `new`, so an
    /// in-place update leaves it exactly as a rebuild would.
    fn same_tree_shape(&self, idx: u32, old: &[i64], new: &[i64]) -> bool {
        let changed: Vec<usize> = (0..old.len().max(new.len()))
            .filter(|&r| at(old, r) != at(new, r))
            .collect();
        self.trees
            .iter()
            .filter(|(name, t)| !self.stale.contains(*name) && t.leaf(idx).is_some())
            .all(|(_, t)| {
                changed.iter().all(|&r| {
                    let (o, n) = (at(old, r), at(new, r));
                    let id = r as ResourceId;
                    match t.hist_res.iter().position(|h| *h == id) {
                        // The range is the largest allocatable of the tree's nodes: it
                        // holds if the node never was the only node at the top.
                        Some(h) => {
                            let max = t.hist_max[h];
                            n <= max && (o < max || self.another_leaf_has(t, idx, r, max))
                        }
                        // Never histogrammed, or out of histogram range before and after.
                        None => self.no_hist.contains(&id) || (o > MAX_SLOTS && n > MAX_SLOTS),
                    }
                })
            })
    }

    /// Whether a leaf of `t` other than node `idx` has `amount` of resource `r`.
    fn another_leaf_has(&self, t: &Tree, idx: u32, r: usize, amount: i64) -> bool {
        t.leaf_of.iter().enumerate().any(|(node, leaf)| {
            *leaf != u32::MAX
                && node as u32 != idx
                && self
                    .node(node as u32)
                    .is_some_and(|n| at(&n.allocatable, r) == amount)
        })
    }

    /// Removes a node; returns the owners that had pods on it and the trees it was in.
    pub fn remove_node(&mut self, name: &str) -> NodeChange {
        let Some(&idx) = self.node_index.get(name) else {
            return NodeChange::default();
        };
        let lost = self.owners_on(idx);
        let flavors = self.nodes[idx as usize]
            .take()
            .map(|o| self.member_of(&o))
            .unwrap_or_default();
        self.node_index.remove(name);
        NodeChange {
            lost,
            flavors: self.mark_stale(flavors),
        }
    }

    /// The TAS flavors whose node labels `n` carries: the trees it is (or would be) in.
    fn member_of(&self, n: &NodeRec) -> BTreeSet<String> {
        self.flavors
            .iter()
            .filter(|(_, f)| {
                f.node_labels
                    .iter()
                    .all(|(k, v)| n.labels.get(k) == Some(v))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Queues the trees of `flavors` for a rebuild and returns them in order.
    fn mark_stale(&mut self, flavors: BTreeSet<String>) -> Vec<String> {
        if !self.dirty {
            self.stale.extend(flavors.iter().cloned());
        }
        flavors.into_iter().collect()
    }

    /// Sets the usage of pods kuota does not manage on a node. Returns the TAS flavors
    /// whose free capacity changed (none when the usage is the same as before).
    pub fn set_external_usage(
        &mut self,
        names: &mut Names,
        node: &str,
        usage: &BTreeMap<String, i64>,
    ) -> Result<Vec<String>, PlacementError> {
        let Some(&idx) = self.node_index.get(node) else {
            return Err(PlacementError::UnknownNode(node.to_string()));
        };
        let mut ext = Vec::new();
        for (k, v) in usage {
            add_at(&mut ext, names.resource(k) as usize, *v);
        }
        let Some(rec) = self.node(idx) else {
            return Ok(vec![]);
        };
        // Trailing zeros are the same usage: compare resource by resource.
        let len = ext.len().max(rec.external.len());
        if (0..len).all(|i| at(&ext, i) == at(&rec.external, i)) {
            return Ok(vec![]);
        }
        let flavors = self.member_of(rec).into_iter().collect();
        self.change_node(idx, |n| n.external = ext);
        Ok(flavors)
    }

    fn owners_on(&self, idx: u32) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .owners
            .iter()
            .filter(|(_, held)| {
                held.iter()
                    .any(|(_, nodes)| nodes.iter().any(|(n, _)| *n == idx))
            })
            .map(|(o, _)| *o)
            .collect();
        v.sort_unstable();
        v
    }
}
