//! Non-TAS usage: what pods the engine does not place take on nodes (Kueue's
//! `nonTasUsageCache`). A pod bound to a node (`spec.nodeName`), not finished, and not
//! asking for topology-aware scheduling (no TAS annotation on it) uses its effective
//! requests plus one `pods` on that node, and placement must not hand that out again.
//! TAS pods are left out: their Workload's placement already holds their room.
//!
//! The engine keeps one entry per pod and a total per node, and hands the inventory a
//! node's total whenever it changes. A total for a node the inventory does not know yet
//! (the Pod watch ran ahead of the Node watch) is kept and applied when the node arrives.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;

use super::model::{PODS_RESOURCE, pod_requests};
use super::state::{Engine, EngineError, InvalidObject};
use crate::api::constants::{
    PODSET_PREFERRED_TOPOLOGY_ANNOTATION, PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
    PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
};
use crate::placement::PlacementError;

/// Per-pod usage and its per-node totals.
#[derive(Clone, Debug, Default)]
pub(crate) struct NonTasPods {
    /// (namespace, name) -> (node, requests in engine units). Lookup only.
    pods: HashMap<(String, String), (String, BTreeMap<String, i64>)>,
    nodes: BTreeMap<String, BTreeMap<String, i64>>,
}

impl NonTasPods {
    /// Records (or, with `None`, forgets) one pod's usage; returns the nodes whose
    /// total changed.
    fn set(
        &mut self,
        key: (String, String),
        usage: Option<(String, BTreeMap<String, i64>)>,
    ) -> Vec<String> {
        let old = match &usage {
            Some(u) => self.pods.insert(key, u.clone()),
            None => self.pods.remove(&key),
        };
        if old == usage {
            return Vec::new();
        }
        let mut changed = Vec::new();
        if let Some((node, reqs)) = old {
            self.add(&node, &reqs, -1);
            changed.push(node);
        }
        if let Some((node, reqs)) = usage {
            self.add(&node, &reqs, 1);
            if !changed.contains(&node) {
                changed.push(node);
            }
        }
        changed
    }

    fn add(&mut self, node: &str, reqs: &BTreeMap<String, i64>, sign: i64) {
        let total = self.nodes.entry(node.to_string()).or_default();
        for (k, v) in reqs {
            let e = total.entry(k.clone()).or_default();
            *e = e.saturating_add(sign.saturating_mul(*v));
        }
        total.retain(|_, v| *v != 0);
        if total.is_empty() {
            self.nodes.remove(node);
        }
    }

    /// Whether any non-TAS pod is bound to `node`.
    pub(crate) fn has_node(&self, node: &str) -> bool {
        self.nodes.contains_key(node)
    }

    /// The non-TAS usage on `node` (empty when none).
    pub(crate) fn on_node(&self, node: &str) -> BTreeMap<String, i64> {
        self.nodes.get(node).cloned().unwrap_or_default()
    }
}

/// Kueue's `IsTAS` for a pod: it carries one of the topology annotations.
fn is_tas(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    [
        PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
        PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
        PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
        PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    ]
    .iter()
    .any(|k| annotations.is_some_and(|a| a.contains_key(*k)))
}

/// The node a pod takes room on, when it counts as non-TAS usage.
fn non_tas_node(pod: &Pod) -> Option<&str> {
    let node = pod
        .spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    (!finished && !is_tas(pod)).then_some(node)
}

impl Engine {
    pub(crate) fn pod_upserted(&mut self, pod: &Pod) -> Result<(), EngineError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let usage = match (non_tas_node(pod), pod.spec.as_ref()) {
            (Some(node), Some(spec)) => {
                let mut reqs = pod_requests(spec, "spec").map_err(|e| EngineError::Invalid {
                    kind: "Pod",
                    name: format!("{ns}/{name}"),
                    source: InvalidObject::Model(e),
                })?;
                reqs.retain(|_, v| *v > 0);
                reqs.insert(PODS_RESOURCE.to_string(), 1);
                Some((node.to_string(), reqs))
            }
            _ => None,
        };
        for node in self.non_tas.set((ns, name), usage) {
            self.push_non_tas_usage(&node)?;
        }
        Ok(())
    }

    pub(crate) fn pod_deleted(&mut self, namespace: &str, name: &str) -> Result<(), EngineError> {
        for node in self
            .non_tas
            .set((namespace.to_string(), name.to_string()), None)
        {
            self.push_non_tas_usage(&node)?;
        }
        Ok(())
    }

    /// Hands the inventory `node`'s non-TAS total. A node it does not know yet gets it
    /// when it arrives (see `node_upserted`).
    pub(crate) fn push_non_tas_usage(&mut self, node: &str) -> Result<(), EngineError> {
        let usage = self.non_tas.on_node(node);
        match self
            .inventory
            .set_external_usage(&mut self.names, node, &usage)
        {
            Ok(flavors) => {
                self.revive_flavors(&flavors);
                Ok(())
            }
            Err(PlacementError::UnknownNode(_)) => Ok(()),
            Err(e) => Err(EngineError::Invalid {
                kind: "Node",
                name: node.to_string(),
                source: e.into(),
            }),
        }
    }
}
