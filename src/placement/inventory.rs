//! Nodes, the per-flavor domain trees over them, and the aggregates those trees
//! keep: free capacity, a per-node histogram of free slots for every small
//! integer resource (GPUs, MIG slices, CPU cores), whole-free node counts.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::api::{self, quantity::QuantityError};
use crate::names::ResourceId;

mod domains;
mod nodes;

pub use domains::DomainOwners;

/// Largest per-node slot count a histogram tracks; resources beyond it (memory) are checked exactly.
const MAX_SLOTS: i64 = 256;
/// Histogram resources per tree: GPUs, a few MIG profiles, CPU.
const MAX_HISTS: usize = 6;

/// A problem with topology or node data, naming the object and field for the user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("Topology {topology}: spec.levels: Required value: at least one level")]
    NoLevels { topology: String },
    #[error("Topology {topology}: spec.levels: Too many: {count} > 16")]
    TooManyLevels { topology: String, count: usize },
    #[error("Topology {topology}: spec.levels[{index}].nodeLabel: Duplicate value: {label:?}")]
    DuplicateLevel {
        topology: String,
        index: usize,
        label: String,
    },
    #[error(
        "Topology {topology}: spec.levels[{index}].nodeLabel: Invalid value: {label:?}: {} must be the lowest level",
        api::constants::HOSTNAME_LABEL
    )]
    HostnameNotLowest {
        topology: String,
        index: usize,
        label: String,
    },
    #[error("Node {node}: status.allocatable[{resource}]: {source}")]
    Allocatable {
        node: String,
        resource: String,
        #[source]
        source: QuantityError,
    },
    #[error("Node {0} is not known")]
    UnknownNode(String),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct NodeRec {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub schedulable: bool,
    /// Allocatable by resource id (dense).
    pub allocatable: Vec<i64>,
    /// Used by workloads kuota placed.
    pub used: Vec<i64>,
    /// Used by pods kuota does not manage.
    pub external: Vec<i64>,
}

impl NodeRec {
    #[inline]
    pub fn free(&self, r: ResourceId) -> i64 {
        let i = r as usize;
        self.allocatable.get(i).copied().unwrap_or(0)
            - self.used.get(i).copied().unwrap_or(0)
            - self.external.get(i).copied().unwrap_or(0)
    }

    fn untouched(&self) -> bool {
        self.used.iter().chain(&self.external).all(|v| *v == 0)
    }
}

/// The amount at resource index `i` (0 past the end: resources a node does not report).
fn at(v: &[i64], i: usize) -> i64 {
    v.get(i).copied().unwrap_or(0)
}

fn add_at(v: &mut Vec<i64>, i: usize, d: i64) {
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v[i] += d;
}

/// A domain: the synthetic root, a topology domain, or a node (leaf).
#[derive(Clone, Debug, Default)]
pub(crate) struct Dom {
    pub parent: Option<u32>,
    pub children: Vec<u32>,
    /// -1 for the root; otherwise the index into `Tree::levels` (the node level for leaves).
    pub level: i32,
    pub node: Option<u32>,
    /// Per histogram resource: number of nodes with k free slots.
    pub hists: Vec<Vec<u32>>,
    pub nodes: u32,
    /// Nodes with nothing running on them.
    pub whole_free: u32,
    /// Per histogram resource: free slots summed over the whole free nodes.
    pub whole_free_slots: Vec<i64>,
}

/// The domain tree of one TAS flavor.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tree {
    pub topology: String,
    pub levels: Vec<String>,
    /// Whether the last level is the hostname (then leaves are that level).
    pub hostname_level: bool,
    pub doms: Vec<Dom>,
    /// Domain ids per level index; the node level is `levels.len()` when hostname is not a level.
    pub by_level: Vec<Vec<u32>>,
    pub root: u32,
    /// Leaf domain per node index (`u32::MAX` when the node is not in this tree).
    pub leaf_of: Vec<u32>,
    pub hist_res: Vec<ResourceId>,
    /// Largest allocatable per histogram resource, to pick the binding one.
    pub hist_max: Vec<i64>,
    pub tolerations: Vec<Toleration>,
    /// The flavor's nodeLabels, which every node of the tree carries.
    pub node_labels: BTreeMap<String, String>,
    /// Nodes of the flavor left out, with why (missing level labels).
    pub excluded: Vec<String>,
}

impl Tree {
    pub fn node_level(&self) -> i32 {
        if self.hostname_level {
            self.levels.len() as i32 - 1
        } else {
            self.levels.len() as i32
        }
    }

    pub fn level_index(&self, label: &str) -> Option<i32> {
        self.levels
            .iter()
            .position(|l| l == label)
            .map(|i| i as i32)
    }

    pub fn leaf(&self, node: u32) -> Option<u32> {
        self.leaf_of
            .get(node as usize)
            .copied()
            .filter(|l| *l != u32::MAX)
    }

    /// Applies a node's slot changes to its leaf and every ancestor: O(depth).
    /// `slots_before`/`slots_after` are the node's slots per histogram resource.
    fn update_leaf(
        &mut self,
        leaf: u32,
        changes: &[(usize, usize, usize)],
        (was_free, is_free): (bool, bool),
        (slots_before, slots_after): (&[i64], &[i64]),
    ) {
        let mut cur = Some(leaf);
        while let Some(d) = cur {
            let dom = &mut self.doms[d as usize];
            for &(h, b, a) in changes {
                dom.hists[h][b] -= 1;
                dom.hists[h][a] += 1;
            }
            if was_free != is_free {
                if is_free {
                    dom.whole_free += 1
                } else {
                    dom.whole_free -= 1
                }
            }
            for h in 0..dom.whole_free_slots.len() {
                if was_free {
                    dom.whole_free_slots[h] -= slots_before[h];
                }
                if is_free {
                    dom.whole_free_slots[h] += slots_after[h];
                }
            }
            cur = dom.parent;
        }
    }
}

#[derive(Clone, Debug)]
struct FlavorTopo {
    topology: String,
    node_labels: BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
}

/// What one owner holds on nodes, moved out by [`Inventory::take`].
#[derive(Clone, Debug, Default)]
pub struct Held(Vec<Charge>);

/// One assign call: the per-pod request and (node, pod count) pairs.
type Charge = (Vec<(ResourceId, i64)>, Vec<(u32, i32)>);

/// Counts for reports: nodes and GPUs known, free and stranded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSummary {
    pub nodes: usize,
    pub schedulable: usize,
}

/// What a Node event changed, for the engine to react to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeChange {
    /// Owners with pods on the node, when it is gone or unusable.
    pub lost: Vec<u32>,
    /// TAS flavors whose domain tree the event touched, sorted. Empty when nothing
    /// placement reads changed (a kubelet heartbeat): nothing to rebuild or retry.
    pub flavors: Vec<String>,
}

/// All nodes, topologies and TAS flavors, with lazily rebuilt domain trees.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub(crate) nodes: Vec<Option<NodeRec>>,
    node_index: HashMap<String, u32>,
    topologies: BTreeMap<String, Vec<String>>,
    flavors: BTreeMap<String, FlavorTopo>,
    pub(crate) trees: BTreeMap<String, Tree>,
    /// Every tree must be rebuilt (a Topology or a flavor changed).
    dirty: bool,
    /// Trees to rebuild because one of their nodes changed; the others stay as they are.
    stale: BTreeSet<String>,
    /// Domain trees built so far, for reports and tests of churn cost.
    trees_built: u64,
    /// What each owner (workload) holds.
    owners: HashMap<u32, Vec<Charge>>,
    /// Resources never histogrammed (`pods`: always plentiful, checked exactly).
    no_hist: Vec<ResourceId>,
}

/// Validates a Topology's levels the way Kueue does.
pub fn validate_levels(name: &str, levels: &[String]) -> Result<(), PlacementError> {
    if levels.is_empty() {
        return Err(PlacementError::NoLevels {
            topology: name.to_string(),
        });
    }
    if levels.len() > 16 {
        return Err(PlacementError::TooManyLevels {
            topology: name.to_string(),
            count: levels.len(),
        });
    }
    for (i, l) in levels.iter().enumerate() {
        if levels[..i].contains(l) {
            return Err(PlacementError::DuplicateLevel {
                topology: name.to_string(),
                index: i,
                label: l.clone(),
            });
        }
        if l == api::constants::HOSTNAME_LABEL && i + 1 != levels.len() {
            return Err(PlacementError::HostnameNotLowest {
                topology: name.to_string(),
                index: i,
                label: l.clone(),
            });
        }
    }
    Ok(())
}

impl Inventory {
    pub fn upsert_topology(&mut self, t: &api::Topology) -> Result<(), PlacementError> {
        let name = t.metadata.name.clone().unwrap_or_default();
        let levels: Vec<String> = t.spec.levels.iter().map(|l| l.node_label.clone()).collect();
        validate_levels(&name, &levels)?;
        self.topologies.insert(name, levels);
        self.dirty = true;
        Ok(())
    }

    pub fn remove_topology(&mut self, name: &str) {
        self.topologies.remove(name);
        self.dirty = true;
    }

    /// Records a flavor's topology (None = not a TAS flavor).
    pub fn set_flavor(&mut self, rf: &api::ResourceFlavor) {
        let name = rf.metadata.name.clone().unwrap_or_default();
        match &rf.spec.topology_name {
            Some(t) => {
                self.flavors.insert(
                    name,
                    FlavorTopo {
                        topology: t.clone(),
                        node_labels: rf.spec.node_labels.clone().unwrap_or_default(),
                        tolerations: rf.spec.tolerations.clone().unwrap_or_default(),
                    },
                );
            }
            None => {
                self.flavors.remove(&name);
            }
        }
        self.dirty = true;
    }

    pub fn remove_flavor(&mut self, name: &str) {
        self.flavors.remove(name);
        self.dirty = true;
    }

    /// Whether `flavor` places pods by topology.
    pub fn is_tas(&self, flavor: &str) -> bool {
        self.flavors.contains_key(flavor)
    }

    /// Why a TAS flavor cannot place anything right now (its Topology is missing), if so.
    pub fn flavor_problem(&self, flavor: &str) -> Option<String> {
        let f = self.flavors.get(flavor)?;
        (!self.topologies.contains_key(&f.topology)).then(|| {
            format!(
                "Topology {} of ResourceFlavor {flavor} doesn't exist",
                f.topology
            )
        })
    }

    /// Domain trees built so far (each flavor's tree counts once per build). Node
    /// heartbeats that change nothing leave it alone; a real change adds only the
    /// trees of the node's flavors, at the next cycle.
    pub fn trees_built(&self) -> u64 {
        self.trees_built
    }

    /// Index of a node by its name or its hostname label.
    pub fn node_idx(&self, name: &str) -> Option<u32> {
        self.node_index.get(name).copied().or_else(|| {
            self.nodes
                .iter()
                .position(|n| {
                    n.as_ref().is_some_and(|n| {
                        n.labels
                            .get(api::constants::HOSTNAME_LABEL)
                            .is_some_and(|h| h == name)
                    })
                })
                .map(|i| i as u32)
        })
    }

    pub(crate) fn node(&self, idx: u32) -> Option<&NodeRec> {
        self.nodes.get(idx as usize).and_then(|n| n.as_ref())
    }

    /// Applies `f` to a node and propagates its slot changes in every tree: O(trees × depth).
    fn change_node(&mut self, idx: u32, f: impl FnOnce(&mut NodeRec)) {
        let Some(node) = self.nodes[idx as usize].as_mut() else {
            return;
        };
        if self.dirty {
            // The next build reads the node as it is; nothing to propagate.
            f(node);
            return;
        }
        let before_free = node.untouched();
        let mut before = [0i64; MAX_HISTS * 4];
        let mut k = 0;
        for t in self.trees.values() {
            for &r in &t.hist_res {
                if k < before.len() {
                    before[k] = slots(node.free(r));
                }
                k += 1;
            }
        }
        f(node);
        let node = self.nodes[idx as usize].as_ref().expect("checked above");
        let after_free = node.untouched();
        let mut k = 0;
        for (name, t) in self.trees.iter_mut() {
            let base = k;
            k += t.hist_res.len();
            if self.stale.contains(name) {
                // Rebuilt from the node as it is before the next placement.
                continue;
            }
            let Some(leaf) = t.leaf(idx) else { continue };
            let mut changes = [(0usize, 0usize, 0usize); MAX_HISTS];
            let (mut sb, mut sa) = ([0i64; MAX_HISTS], [0i64; MAX_HISTS]);
            let mut n = 0;
            for (h, &r) in t.hist_res.iter().enumerate() {
                let b = before.get(base + h).copied().unwrap_or(0);
                let a = slots(node.free(r));
                (sb[h], sa[h]) = (b, a);
                if a != b {
                    changes[n] = (h, b as usize, a as usize);
                    n += 1;
                }
            }
            if n > 0 || before_free != after_free {
                let k = t.hist_res.len();
                t.update_leaf(
                    leaf,
                    &changes[..n],
                    (before_free, after_free),
                    (&sb[..k], &sa[..k]),
                );
            }
        }
    }

    /// Charges `owner` for `count` pods of `per_pod` on each listed node.
    pub fn assign(&mut self, owner: u32, per_pod: &[(ResourceId, i64)], nodes: &[(u32, i32)]) {
        for &(node, count) in nodes {
            self.charge(node, per_pod, i64::from(count));
        }
        self.owners
            .entry(owner)
            .or_default()
            .push((per_pod.to_vec(), nodes.to_vec()));
    }

    fn charge(&mut self, node: u32, per_pod: &[(ResourceId, i64)], count: i64) {
        if self.nodes.get(node as usize).is_some_and(|n| n.is_some()) {
            self.change_node(node, |n| {
                for (r, v) in per_pod {
                    add_at(&mut n.used, *r as usize, v * count);
                }
            });
        }
    }

    /// Releases everything `owner` holds. Exact inverse of [`Inventory::assign`].
    pub fn release(&mut self, owner: u32) {
        self.take(owner);
    }

    /// Releases what `owner` holds and returns it, so [`Inventory::restore`] can put it back.
    pub fn take(&mut self, owner: u32) -> Held {
        let Some(held) = self.owners.remove(&owner) else {
            return Held::default();
        };
        for (per_pod, nodes) in held.iter().rev() {
            for &(node, count) in nodes.iter().rev() {
                self.charge(node, per_pod, -i64::from(count));
            }
        }
        Held(held)
    }

    /// Charges back what [`Inventory::take`] returned.
    pub fn restore(&mut self, owner: u32, held: Held) {
        for (per_pod, nodes) in &held.0 {
            for &(node, count) in nodes {
                self.charge(node, per_pod, i64::from(count));
            }
        }
        if !held.0.is_empty() {
            self.owners.insert(owner, held.0);
        }
    }

    pub fn holds(&self, owner: u32) -> bool {
        self.owners.contains_key(&owner)
    }

    pub fn summary(&self) -> NodeSummary {
        let live = self.nodes.iter().flatten();
        NodeSummary {
            nodes: live.clone().count(),
            schedulable: live.filter(|n| n.schedulable).count(),
        }
    }

    /// Rebuilds every tree if topologies or flavors changed since the last build, and
    /// otherwise only the trees whose nodes changed.
    pub fn ensure_trees(&mut self) {
        if self.dirty {
            self.dirty = false;
            self.stale.clear();
            let mut trees = BTreeMap::new();
            for (fname, f) in &self.flavors {
                let Some(levels) = self.topologies.get(&f.topology) else {
                    continue;
                };
                trees.insert(fname.clone(), self.build_tree(f, levels));
            }
            self.trees_built += trees.len() as u64;
            self.trees = trees;
            return;
        }
        for fname in std::mem::take(&mut self.stale) {
            let tree = self.flavors.get(&fname).and_then(|f| {
                let levels = self.topologies.get(&f.topology)?;
                Some(self.build_tree(f, levels))
            });
            match tree {
                Some(t) => {
                    self.trees_built += 1;
                    self.trees.insert(fname, t);
                }
                None => {
                    self.trees.remove(&fname);
                }
            }
        }
    }

    fn build_tree(&self, f: &FlavorTopo, levels: &[String]) -> Tree {
        let hostname_level = levels
            .last()
            .is_some_and(|l| l == api::constants::HOSTNAME_LABEL);
        let mut t = Tree {
            topology: f.topology.clone(),
            levels: levels.to_vec(),
            hostname_level,
            tolerations: f.tolerations.clone(),
            node_labels: f.node_labels.clone(),
            ..Tree::default()
        };
        let members = self.flavor_members(f);
        self.pick_histograms(&mut t, &members);
        let empty = EmptyDom::of(&t);
        let node_level = t.node_level() as usize;
        t.by_level = vec![vec![]; node_level + 1];
        t.doms.push(Dom {
            level: -1,
            hists: empty.hists.clone(),
            whole_free_slots: empty.slots.clone(),
            ..Dom::default()
        });
        t.root = 0;
        // Domains are keyed by the label values of every level above them, so two racks
        // named "r1" in different blocks stay distinct.
        let mut index: HashMap<Vec<String>, u32> = HashMap::new();
        let mut sorted = members;
        sorted.sort_by(|a, b| {
            let key = |n: &NodeRec| {
                levels
                    .iter()
                    .map(|l| n.labels.get(l).cloned())
                    .collect::<Vec<_>>()
            };
            key(a.1)
                .cmp(&key(b.1))
                .then_with(|| a.1.name.cmp(&b.1.name))
        });
        for (idx, n) in sorted {
            t.insert_node(idx, n, &mut index, &empty);
        }
        t
    }

    /// The schedulable nodes carrying all of the flavor's node labels, by node index.
    fn flavor_members(&self, f: &FlavorTopo) -> Vec<(u32, &NodeRec)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i as u32, n)))
            .filter(|(_, n)| {
                n.schedulable
                    && f.node_labels
                        .iter()
                        .all(|(k, v)| n.labels.get(k) == Some(v))
            })
            .collect()
    }

    /// Histogram resources: small integer resources present on the flavor's nodes.
    fn pick_histograms(&self, t: &mut Tree, members: &[(u32, &NodeRec)]) {
        let mut max: BTreeMap<ResourceId, i64> = BTreeMap::new();
        for (_, n) in members {
            for (r, v) in n.allocatable.iter().enumerate() {
                if *v > 0 {
                    let m = max.entry(r as ResourceId).or_default();
                    *m = (*m).max(*v);
                }
            }
        }
        for (r, m) in max {
            if t.hist_res.len() < MAX_HISTS && !self.no_hist.contains(&r) && m <= MAX_SLOTS {
                t.hist_res.push(r);
                t.hist_max.push(m);
            }
        }
    }
}

/// The histograms and free-slot counts of a domain with no nodes yet.
struct EmptyDom {
    hists: Vec<Vec<u32>>,
    slots: Vec<i64>,
}

impl EmptyDom {
    fn of(t: &Tree) -> Self {
        Self {
            hists: t
                .hist_max
                .iter()
                .map(|m| vec![0; (m + 1) as usize])
                .collect(),
            slots: vec![0i64; t.hist_res.len()],
        }
    }
}

impl Tree {
    /// Adds node `idx` under the domains its labels name (creating them), and counts
    /// its free capacity into every domain up to the root. A node missing a level's
    /// label, or duplicating another's leaf, is excluded with the reason.
    fn insert_node(
        &mut self,
        idx: u32,
        n: &NodeRec,
        index: &mut HashMap<Vec<String>, u32>,
        empty: &EmptyDom,
    ) {
        let mut path = Vec::with_capacity(self.levels.len() + 1);
        for l in &self.levels {
            match n.labels.get(l) {
                Some(v) => path.push(v.clone()),
                None => {
                    self.excluded
                        .push(format!("node {} has no label {l}", n.name));
                    return;
                }
            }
        }
        if !self.hostname_level {
            path.push(n.name.clone());
        }
        let mut parent = self.root;
        for depth in 0..path.len() {
            let key = path[..=depth].to_vec();
            let id = match index.get(&key) {
                Some(&id) => id,
                None => {
                    let id = self.doms.len() as u32;
                    self.doms.push(Dom {
                        parent: Some(parent),
                        level: depth as i32,
                        hists: empty.hists.clone(),
                        whole_free_slots: empty.slots.clone(),
                        ..Dom::default()
                    });
                    self.doms[parent as usize].children.push(id);
                    self.by_level[depth].push(id);
                    index.insert(key, id);
                    id
                }
            };
            parent = id;
        }
        // `parent` is now the leaf for this node.
        let leaf = parent;
        if self.doms[leaf as usize].node.is_some() {
            self.excluded.push(format!(
                "node {} duplicates the {} value of another node",
                n.name,
                self.levels.last().map(String::as_str).unwrap_or("")
            ));
            return;
        }
        self.doms[leaf as usize].node = Some(idx);
        if self.leaf_of.len() <= idx as usize {
            self.leaf_of.resize(idx as usize + 1, u32::MAX);
        }
        self.leaf_of[idx as usize] = leaf;
        let s: Vec<usize> = self
            .hist_res
            .iter()
            .map(|&r| slots(n.free(r)) as usize)
            .collect();
        let free = n.untouched();
        let mut cur = Some(leaf);
        while let Some(d) = cur {
            let dom = &mut self.doms[d as usize];
            for (h, k) in s.iter().enumerate() {
                dom.hists[h][*k] += 1;
            }
            dom.nodes += 1;
            dom.whole_free += u32::from(free);
            if free {
                for (h, k) in s.iter().enumerate() {
                    dom.whole_free_slots[h] += *k as i64;
                }
            }
            cur = dom.parent;
        }
    }
}

/// Free slots (whole units) of an amount, clamped to the histogram range.
#[inline]
pub(crate) fn slots(free: i64) -> i64 {
    free.clamp(0, MAX_SLOTS)
}
