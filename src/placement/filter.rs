//! A pod set's own node constraints inside a TAS flavor, and the per-node exclusion
//! counts a placement failure reports.
//!
//! Kueue narrows a pod set's candidate nodes by the pod template's `nodeSelector` and
//! required node affinity, on top of the flavor's `nodeLabels` and the nodes' taints, so
//! a placement never names a node the kube-scheduler would then refuse the pod on.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PodSpec, Taint};

use super::allocator::Ctx;
use super::inventory::NodeRec;
use crate::api::selector::{self, Labels};

/// The pod template's `nodeSelector` and required node-affinity terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFilter {
    pub node_selector: Labels,
    /// OR'ed terms; empty when the pod has no required node affinity.
    pub required_terms: Vec<NodeSelectorTerm>,
}

/// Which of the pod's constraints a node fails, checked in Kueue's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mismatch {
    NodeSelector,
    Affinity,
}

impl NodeFilter {
    pub fn from_pod(spec: &PodSpec) -> Self {
        NodeFilter {
            node_selector: selector::node_selector(spec).clone(),
            required_terms: selector::required_node_affinity_terms(spec).to_vec(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.required_terms.is_empty()
    }

    /// The part of the filter that can tell a flavor's nodes apart. Every node of the
    /// flavor's tree carries its `nodeLabels`, so selector entries they pin hold on all
    /// of them, and so does an affinity one of whose terms they satisfy. A Job's
    /// selector usually repeats its flavor's labels: this keeps such a pod set on the
    /// fast path, with no per-node check at all.
    pub(super) fn narrowed_to(&self, flavor_labels: &Labels) -> NodeFilter {
        let node_selector = self
            .node_selector
            .iter()
            .filter(|(k, v)| flavor_labels.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let always = self.required_terms.iter().any(|t| {
            let exprs = t.match_expressions.as_deref().unwrap_or_default();
            t.match_fields.as_deref().unwrap_or_default().is_empty()
                && !exprs.is_empty()
                && exprs.iter().all(|r| {
                    flavor_labels.contains_key(&r.key)
                        && selector::node_requirement_matches(r, flavor_labels)
                })
        });
        NodeFilter {
            node_selector,
            required_terms: if always {
                vec![]
            } else {
                self.required_terms.clone()
            },
        }
    }

    /// Whether the node may run the pod: the selector first, then the affinity.
    pub(super) fn check(&self, n: &NodeRec) -> Result<(), Mismatch> {
        if !self
            .node_selector
            .iter()
            .all(|(k, v)| n.labels.get(k) == Some(v))
        {
            return Err(Mismatch::NodeSelector);
        }
        if !self.required_terms.is_empty()
            && !self
                .required_terms
                .iter()
                .any(|t| selector::node_term_matches(t, &n.labels, Some(&n.name)))
        {
            return Err(Mismatch::Affinity);
        }
        Ok(())
    }
}

/// Why the nodes of a flavor's tree could take none of a pod set's pods, counted per
/// reason the way Kueue counts them (one reason per node, the first that applies:
/// an untolerated taint, the nodeSelector, the affinity, then the resource that runs
/// out first, ties by name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Exclusions {
    total: usize,
    node_selector: usize,
    affinity: usize,
    taints: BTreeMap<String, usize>,
    resources: BTreeMap<String, usize>,
}

impl Exclusions {
    /// Kueue's suffix to its "doesn't allow to fit" message, or "" when no node was
    /// excluded: `. Total nodes: 4; excluded: nodeSelector: 2, resource "cpu": 1`.
    pub(super) fn suffix(&self) -> String {
        let mut reasons = vec![];
        if self.node_selector > 0 {
            reasons.push(format!("nodeSelector: {}", self.node_selector));
        }
        if self.affinity > 0 {
            reasons.push(format!("affinity: {}", self.affinity));
        }
        for (t, k) in &self.taints {
            reasons.push(format!("taint {t:?}: {k}"));
        }
        for (r, k) in &self.resources {
            reasons.push(format!("resource {r:?}: {k}"));
        }
        if reasons.is_empty() {
            return String::new();
        }
        reasons.sort();
        format!(
            ". Total nodes: {}; excluded: {}",
            self.total,
            reasons.join(", ")
        )
    }
}

/// Kubernetes' `Taint.ToString`: `key=value:Effect`, without the parts that are empty.
fn taint_string(t: &Taint) -> String {
    match (t.value.as_deref().unwrap_or(""), t.effect.as_str()) {
        ("", "") => t.key.clone(),
        (v, "") => format!("{}={v}:", t.key),
        ("", e) => format!("{}:{e}", t.key),
        (v, e) => format!("{}={v}:{e}", t.key),
    }
}

impl Ctx<'_> {
    /// Counts, over the flavor's nodes, why each one that takes no pod is left out.
    /// Walks every node: only called to explain a failure.
    pub(super) fn exclusions(&self) -> Exclusions {
        if !self.t.hostname_level {
            return self.domain_exclusions();
        }
        let mut ex = Exclusions::default();
        let leaves = self
            .t
            .by_level
            .get(self.t.node_level() as usize)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for &d in leaves {
            let Some(n) = self.t.doms[d as usize].node.and_then(|i| self.inv.node(i)) else {
                continue;
            };
            ex.total += 1;
            if let Some(taint) = self.untolerated(n) {
                *ex.taints.entry(taint_string(taint)).or_default() += 1;
                continue;
            }
            match self.filter.check(n) {
                Err(Mismatch::NodeSelector) => ex.node_selector += 1,
                Err(Mismatch::Affinity) => ex.affinity += 1,
                Ok(()) => {
                    if let Some(r) = self.limiting(|r| self.free(n, r)) {
                        *ex.resources.entry(r.to_string()).or_default() += 1;
                    }
                }
            }
        }
        ex
    }

    /// Kueue's count where the topology has no hostname level: it sees the domains of
    /// the lowest level as bins, not their nodes, so it counts those domains, and one
    /// is left out by the resource its nodes together have too little of.
    fn domain_exclusions(&self) -> Exclusions {
        let mut ex = Exclusions::default();
        let lowest = self.t.levels.len().saturating_sub(1);
        for &d in self
            .t
            .by_level
            .get(lowest)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            ex.total += 1;
            let nodes: Vec<&NodeRec> = self.t.doms[d as usize]
                .children
                .iter()
                .filter_map(|&c| self.t.doms[c as usize].node)
                .filter_map(|i| self.inv.node(i))
                .collect();
            let summed = |r| nodes.iter().map(|n| self.free(n, r).max(0)).sum();
            if let Some(r) = self.limiting(summed) {
                *ex.resources.entry(r.to_string()).or_default() += 1;
            }
        }
        ex
    }

    /// The resource of which `free` holds not even one pod's request (the first by
    /// name among those), if any.
    fn limiting(&self, free: impl Fn(crate::names::ResourceId) -> i64) -> Option<&str> {
        self.req
            .per_pod
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|&(r, v)| (free(r).max(0) / v, self.names.resource_name(r)))
            .min()
            .filter(|(k, _)| *k == 0)
            .map(|(_, r)| r)
    }
}
