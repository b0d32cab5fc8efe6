//! `nodes.yaml` in a scenario directory: node pools written compactly ("64
//! nodes of 8×H100 in 2 blocks × 4 racks, one NVLink clique per node")
//! and expanded into Node objects plus the Topology the flavors refer to.
//!
//! ```yaml
//! topology:
//!   name: gpu-topology            # the name ResourceFlavors use in topologyName
//!   # levels: [...]               # optional; default: the pools' level labels + kubernetes.io/hostname
//! pools:
//! - name: h100                    # nodes are h100-0 .. h100-63
//!   nodes: 64
//!   levels:                       # highest first; count = domains per parent domain
//!   - {label: cloud.provider.com/topology-block, count: 2}
//!   - {label: cloud.provider.com/topology-rack, count: 4}
//!   allocatable: {nvidia.com/gpu: "8", cpu: "192", memory: 2Ti, pods: "110"}
//!   labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
//!   clique: {label: nvidia.com/gpu.clique, count: 1}
//! ```
//!
//! The expansion itself is [`NodePoolSpec::nodes`], shared with the
//! placement benchmarks; this module adds the file format and validation.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::SimError;
use crate::api;
use crate::api::constants::HOSTNAME_LABEL;
use crate::api::quantity::resource_value;
use crate::placement::NodePoolSpec;

/// File names recognised as a node-pool spec.
pub const NODES_FILES: [&str; 2] = ["nodes.yaml", "nodes.yml"];

/// `pods` allocatable of nodes whose pool does not set it (kubelet's default).
pub const DEFAULT_MAX_PODS: &str = "110";

/// Upper bound on expanded nodes, so a typo is an error rather than an OOM kill.
pub const MAX_NODES: usize = 200_000;

/// Top level of `nodes.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodesConfig {
    /// The Topology to create; optional when the flavors need none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyConfig>,
    pub pools: Vec<NodePoolSpec>,
}

/// The Topology object written compactly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyConfig {
    pub name: String,
    /// Node labels from the highest level down. Default: the pools' level
    /// labels followed by `kubernetes.io/hostname`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<String>>,
}

/// Nodes and topology built from a `nodes.yaml`.
#[derive(Clone, Debug, Default)]
pub struct ExpandedNodes {
    pub topology: Option<api::Topology>,
    pub nodes: Vec<Node>,
}

impl NodesConfig {
    /// Parses a `nodes.yaml`; errors name the file and the field path.
    pub fn from_yaml(source: &str, yaml: &str) -> Result<Self, SimError> {
        let de = serde_norway::Deserializer::from_str(yaml);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let at = e.path().to_string();
            SimError::field(source, at, std::sync::Arc::new(e.into_inner()))
        })
    }

    /// Validates and expands the pools.
    pub fn expand(&self, source: &str) -> Result<ExpandedNodes, SimError> {
        let total = self.check_pools(source)?;
        let topology = self.build_topology(source)?;
        let nodes = self.pool_nodes(total);
        Ok(ExpandedNodes { topology, nodes })
    }

    /// Checks every node pool; returns how many Nodes they expand to.
    fn check_pools(&self, source: &str) -> Result<usize, SimError> {
        if self.pools.is_empty() {
            return Err(scenario_error(
                source,
                "pools: at least one pool is required".to_string(),
            ));
        }
        let mut names = BTreeSet::new();
        let mut total: usize = 0;
        for (i, p) in self.pools.iter().enumerate() {
            let path = format!("pools[{i}]");
            if p.name.is_empty() || !names.insert(p.name.as_str()) {
                return Err(scenario_error(
                    source,
                    format!(
                        "{path}.name: {:?} is empty or used by another pool (node names would clash)",
                        p.name
                    ),
                ));
            }
            check_pool(source, &path, p)?;
            total = total.saturating_add(p.nodes);
        }
        if total > MAX_NODES {
            return Err(scenario_error(
                source,
                format!("pools: {total} nodes in total, more than the limit of {MAX_NODES}"),
            ));
        }
        Ok(total)
    }

    /// The Topology object the flavors refer to, if the file asks for one.
    fn build_topology(&self, source: &str) -> Result<Option<api::Topology>, SimError> {
        let Some(t) = &self.topology else {
            return Ok(None);
        };
        if t.name.is_empty() {
            return Err(scenario_error(
                source,
                "topology.name: must not be empty".to_string(),
            ));
        }
        let levels = match &t.levels {
            Some(l) => l.clone(),
            None => self.default_levels(source)?,
        };
        crate::placement::validate_levels(&t.name, &levels)
            .map_err(|e| SimError::field(source, "topology.levels", e))?;
        Ok(Some(api::Topology::new(
            &t.name,
            api::TopologySpec {
                levels: levels
                    .into_iter()
                    .map(|node_label| api::TopologyLevel { node_label })
                    .collect(),
            },
        )))
    }

    /// Topology levels when none are listed: the pools' level labels, then the hostname.
    fn default_levels(&self, source: &str) -> Result<Vec<String>, SimError> {
        // Every pool must be laid out over the same labels, or the default
        // would fit only some of them.
        let labels = |p: &NodePoolSpec| -> Vec<String> {
            p.levels.iter().map(|l| l.label.clone()).collect()
        };
        let first = labels(&self.pools[0]);
        if let Some((i, _)) = self
            .pools
            .iter()
            .enumerate()
            .find(|(_, p)| labels(p) != first)
        {
            return Err(scenario_error(
                source,
                format!(
                    "topology.levels: pools[{i}] uses different level labels from pools[0]; list topology.levels explicitly"
                ),
            ));
        }
        let mut levels = first;
        levels.push(HOSTNAME_LABEL.to_string());
        Ok(levels)
    }

    /// Expands every pool into its Nodes (`total` of them), with a default pod capacity.
    fn pool_nodes(&self, total: usize) -> Vec<Node> {
        let mut nodes = Vec::with_capacity(total);
        for p in &self.pools {
            // Every real node has a pod capacity (kubelet's default max-pods is
            // 110) and TAS counts pods against it; without it nothing fits.
            let mut p = p.clone();
            p.allocatable
                .entry("pods".to_string())
                .or_insert_with(|| DEFAULT_MAX_PODS.to_string());
            nodes.extend(p.nodes());
        }
        nodes
    }
}

/// Checks one node pool (at `path`) past its name: node count, allocatable, levels, clique.
fn check_pool(source: &str, path: &str, p: &NodePoolSpec) -> Result<(), SimError> {
    let err = |message: String| scenario_error(source, message);
    if p.nodes == 0 {
        return Err(err(format!("{path}.nodes: must be at least 1")));
    }
    if p.allocatable.is_empty() {
        return Err(err(format!(
            "{path}.allocatable: must list at least one resource"
        )));
    }
    for (r, q) in &p.allocatable {
        let m = resource_value(r, &Quantity(q.clone()))
            .map_err(|e| SimError::field(source, format!("{path}.allocatable[{r}]"), e))?;
        if m < 0 {
            return Err(err(format!(
                "{path}.allocatable[{r}]: must not be negative"
            )));
        }
    }
    for (j, l) in p.levels.iter().enumerate() {
        if l.count == 0 {
            return Err(err(format!("{path}.levels[{j}].count: must be at least 1")));
        }
        if l.label == HOSTNAME_LABEL {
            return Err(err(format!(
                "{path}.levels[{j}].label: {HOSTNAME_LABEL} is added for every node; list only the levels above it"
            )));
        }
    }
    if let Some(c) = &p.clique
        && c.count == 0
    {
        return Err(err(format!("{path}.clique.count: must be at least 1")));
    }
    Ok(())
}

/// A broken rule of `nodes.yaml` in file `source`.
fn scenario_error(source: &str, message: String) -> SimError {
    SimError::Scenario {
        source_name: source.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = r#"
topology: {name: gpu-topology}
pools:
- name: h100
  nodes: 64
  levels:
  - {label: cloud.provider.com/topology-block, count: 2}
  - {label: cloud.provider.com/topology-rack, count: 4}
  allocatable: {nvidia.com/gpu: "8", cpu: "192"}
  labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  clique: {label: nvidia.com/gpu.clique, count: 1}
"#;

    #[test]
    fn expands_pools_and_topology() {
        let e = NodesConfig::from_yaml("nodes.yaml", H100)
            .and_then(|c| c.expand("nodes.yaml"))
            .expect("valid");
        assert_eq!(e.nodes.len(), 64);
        let t = e.topology.expect("has topology");
        assert_eq!(
            t.spec.level_keys().collect::<Vec<_>>(),
            [
                "cloud.provider.com/topology-block",
                "cloud.provider.com/topology-rack",
                HOSTNAME_LABEL
            ]
        );
        let racks: BTreeSet<String> = e
            .nodes
            .iter()
            .filter_map(|n| n.metadata.labels.as_ref())
            .map(|l| l["cloud.provider.com/topology-rack"].clone())
            .collect();
        assert_eq!(racks.len(), 8);
        let n0 = e.nodes[0].metadata.labels.as_ref().expect("labels");
        assert_eq!(n0["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
        let alloc = e.nodes[0]
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .expect("allocatable");
        assert_eq!(alloc["pods"].0, DEFAULT_MAX_PODS, "kubelet default added");
    }

    #[test]
    fn unknown_field_names_file_and_field() {
        let bad = H100.replace("nodes: 64", "nodes: 64\n  gpusPerNode: 8");
        let e = NodesConfig::from_yaml("x/nodes.yaml", &bad).expect_err("unknown field");
        let s = e.to_string();
        assert!(s.starts_with("x/nodes.yaml: pools[0]"), "{s}");
        assert!(s.contains("gpusPerNode"), "{s}");
    }

    #[test]
    fn invalid_values_are_errors() {
        for (from, to, needle) in [
            ("nodes: 64", "nodes: 0", "pools[0].nodes"),
            ("\"8\", cpu", "banana, cpu", "allocatable[nvidia.com/gpu]"),
            ("count: 4}", "count: 0}", "levels[1].count"),
            ("name: gpu-topology", "name: \"\"", "topology.name"),
        ] {
            let e = NodesConfig::from_yaml("n.yaml", &H100.replace(from, to))
                .and_then(|c| c.expand("n.yaml"))
                .expect_err(needle);
            assert!(e.to_string().contains(needle), "{needle}: {e}");
        }
    }
}
