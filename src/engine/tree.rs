//! Rebuilding the quota tree: Cohorts and ClusterQueues become nodes, ClusterQueues
//! that cannot admit are marked inactive with Kueue's reasons, and every admitted
//! workload's usage is charged again.

use std::collections::{BTreeMap, BTreeSet};

use super::model::CohortSpec;
use super::quota::{NodeId, QuotaTree};
use super::state::{Cq, CqId, Engine, Inactive, WlState};
use crate::api::StopPolicy;
use crate::api::constants::{CQ_REASON_FLAVOR_NOT_FOUND, CQ_REASON_STOPPED, CQ_REASON_UNKNOWN};

/// The tree under construction, with each node's fair-sharing weight and name.
#[derive(Default)]
struct Building {
    tree: QuotaTree,
    weights: Vec<i64>,
    names: Vec<String>,
}

impl Building {
    fn add(&mut self, limits: super::quota::Limits, weight: i64, name: &str) -> NodeId {
        let id = self.tree.add_node(limits);
        self.weights.push(weight);
        self.names.push(name.to_string());
        id
    }
}

impl Engine {
    /// Rebuilds the quota tree from the current ClusterQueues and Cohorts and
    /// re-charges the usage of every admitted workload.
    pub(crate) fn rebuild(&mut self) {
        let mut b = Building::default();
        let (cohort_nodes, in_cycle) = self.add_cohorts(&mut b);
        let flavors_known: BTreeSet<String> = self
            .flavors
            .keys()
            .map(|id| self.names.flavor_name(*id).to_string())
            .collect();
        for c in &mut self.cqs {
            if c.deleted {
                c.node = NodeId::MAX;
                continue;
            }
            c.node = b.add(c.spec.limits.clone(), c.spec.weight, &c.spec.name);
            if let Some(cohort) = &c.spec.cohort {
                b.tree.set_parent(c.node, cohort_nodes[cohort]);
            }
            c.inactive = inactive(
                c,
                &flavors_known,
                &self.checks.active,
                &self.cohort_specs,
                &in_cycle,
            );
        }
        b.tree.compute_subtree_quota();
        self.root_members.clear();
        for (i, c) in self.cqs.iter_mut().enumerate() {
            if c.deleted {
                continue;
            }
            c.root = b.tree.root(c.node);
            self.root_members.entry(c.root).or_default().push(i as CqId);
        }
        self.tree = b.tree;
        self.cohort_nodes = cohort_nodes;
        self.node_weight = b.weights;
        self.node_name = b.names;
        self.recharge();
        self.requeue_all();
        self.revive_all();
    }

    /// Adds a node for every cohort named by a Cohort object, a parent reference or a
    /// ClusterQueue, linked to its parent unless the parent chain is a cycle. Returns
    /// the nodes by name and the cohorts on a cycle.
    fn add_cohorts(&self, b: &mut Building) -> (BTreeMap<String, NodeId>, BTreeSet<String>) {
        let mut names: BTreeSet<String> = self.cohort_specs.keys().cloned().collect();
        names.extend(self.cohort_specs.values().filter_map(|c| c.parent.clone()));
        names.extend(
            self.cqs
                .iter()
                .filter(|c| !c.deleted)
                .filter_map(|c| c.spec.cohort.clone()),
        );
        let mut nodes = BTreeMap::new();
        for n in &names {
            let spec = self.cohort_specs.get(n);
            let limits = spec.map(|s| s.limits.clone()).unwrap_or_default();
            let id = b.add(limits, spec.map(|s| s.weight).unwrap_or(1000), n);
            nodes.insert(n.clone(), id);
        }
        let mut in_cycle = BTreeSet::new();
        for n in &names {
            let Some(parent) = self.cohort_specs.get(n).and_then(|s| s.parent.clone()) else {
                continue;
            };
            // Kueue marks the ClusterQueues of a cohort whose parent chain returns to
            // it inactive, and so do we.
            if returns_to(&self.cohort_specs, n, &parent) {
                in_cycle.insert(n.clone());
            } else {
                b.tree.set_parent(nodes[n], nodes[&parent]);
            }
        }
        (nodes, in_cycle)
    }

    /// Charges every admitted workload's usage to its ClusterQueue; a workload whose
    /// ClusterQueue is gone keeps running uncounted.
    fn recharge(&mut self) {
        for id in 0..self.wls.len() {
            let Some(w) = &self.wls[id] else { continue };
            if let WlState::Admitted(a) | WlState::Evicting(a) = &w.state {
                let c = &self.cqs[a.cq as usize];
                if !c.deleted {
                    let node = c.node;
                    let usage = a.usage.clone();
                    self.tree.add_amounts(node, &usage);
                }
            }
        }
    }
}

/// Whether following `cohort`'s parent chain from `parent` comes back to a cohort
/// already seen.
fn returns_to(specs: &BTreeMap<String, CohortSpec>, cohort: &str, parent: &str) -> bool {
    let mut seen = BTreeSet::from([cohort.to_string()]);
    let mut cur = Some(parent.to_string());
    while let Some(c) = cur {
        if !seen.insert(c.clone()) {
            return true;
        }
        cur = specs.get(&c).and_then(|s| s.parent.clone());
    }
    false
}

/// Why a ClusterQueue cannot admit, with Kueue's reason; `None` when it can.
fn inactive(
    c: &Cq,
    flavors_known: &BTreeSet<String>,
    checks_known: &BTreeMap<String, bool>,
    cohort_specs: &BTreeMap<String, CohortSpec>,
    in_cycle: &BTreeSet<String>,
) -> Option<Inactive> {
    let name = &c.spec.name;
    let missing: Vec<&str> = c
        .spec
        .flavor_names
        .iter()
        .filter(|f| !flavors_known.contains(*f))
        .map(String::as_str)
        .collect();
    let (reason, message) = if !missing.is_empty() {
        (
            CQ_REASON_FLAVOR_NOT_FOUND,
            format!(
                "ClusterQueue {name} is inactive: ResourceFlavor {} not found",
                missing.join(", ")
            ),
        )
    } else if let Some((reason, why)) =
        super::checks::blocking(&c.spec.admission_checks, checks_known)
    {
        // Kueue's condition message; its pending workloads say which queue and why.
        return Some(Inactive {
            reason,
            message: format!("ClusterQueue {name} is inactive: it {why}"),
            condition: Some(format!("Can't admit new workloads: {why}.")),
        });
    } else if c.spec.stop != StopPolicy::None {
        (
            CQ_REASON_STOPPED,
            format!(
                "ClusterQueue {name} is stopped (stopPolicy {:?})",
                c.spec.stop
            ),
        )
    } else if c
        .spec
        .cohort
        .as_ref()
        .is_some_and(|co| cohort_in_cycle(cohort_specs, co, in_cycle))
    {
        (
            CQ_REASON_UNKNOWN,
            format!("ClusterQueue {name} is inactive: its cohort is part of a cycle"),
        )
    } else {
        return None;
    };
    Some(Inactive {
        reason,
        message,
        condition: None,
    })
}

/// Whether `cohort` or one of its ancestors sits on a parent cycle.
fn cohort_in_cycle(
    specs: &BTreeMap<String, CohortSpec>,
    cohort: &str,
    in_cycle: &BTreeSet<String>,
) -> bool {
    let mut seen = BTreeSet::new();
    let mut cur = Some(cohort.to_string());
    while let Some(c) = cur {
        if in_cycle.contains(&c) || !seen.insert(c.clone()) {
            return true;
        }
        cur = specs.get(&c).and_then(|s| s.parent.clone());
    }
    false
}
