//! Compact node-pool specs ("2048 nodes of 8 GPUs in 4 zones × 4 blocks × 8 racks")
//! expanded into Node objects, for the simulator, benchmarks and tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// A homogeneous group of nodes laid out over topology levels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    /// Node names are `<name>-<index>`.
    pub name: String,
    pub nodes: usize,
    /// Levels above the host, highest first, with how many domains each parent has.
    /// Nodes fill the domains in order; the hostname level is always added.
    #[serde(default)]
    pub levels: Vec<PoolLevel>,
    /// Per-node allocatable, e.g. `{nvidia.com/gpu: "8", cpu: "96", memory: 1Ti}`.
    pub allocatable: BTreeMap<String, String>,
    /// Extra labels on every node (what ResourceFlavors select on).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// An interconnect clique label (e.g. NVLink domain) grouping this many consecutive nodes.
    #[serde(default)]
    pub clique: Option<PoolLevel>,
}

/// One level of a pool: a node label and a fan-out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolLevel {
    pub label: String,
    /// Domains per parent domain (for `clique`: nodes per clique).
    pub count: usize,
}

impl NodePoolSpec {
    /// Expands the pool into Node objects with topology labels and allocatable.
    pub fn nodes(&self) -> Vec<Node> {
        let per_domain: Vec<usize> = {
            // Nodes under one domain of each level: nodes / product of fan-outs above and at it.
            let mut v = Vec::with_capacity(self.levels.len());
            let mut domains = 1usize;
            for l in &self.levels {
                domains = domains.saturating_mul(l.count.max(1));
                v.push(self.nodes.div_ceil(domains).max(1));
            }
            v
        };
        let allocatable: BTreeMap<String, Quantity> = self
            .allocatable
            .iter()
            .map(|(k, v)| (k.clone(), Quantity(v.clone())))
            .collect();
        (0..self.nodes)
            .map(|i| {
                let name = format!("{}-{i}", self.name);
                let mut labels = self.labels.clone();
                for (l, size) in self.levels.iter().zip(&per_domain) {
                    // Domain values name the whole path so they are unique cluster-wide.
                    labels.insert(
                        l.label.clone(),
                        format!("{}-{}-{}", self.name, short(&l.label), i / size),
                    );
                }
                if let Some(c) = &self.clique {
                    labels.insert(
                        c.label.clone(),
                        format!("{}-clique-{}", self.name, i / c.count.max(1)),
                    );
                }
                labels.insert(
                    crate::api::constants::HOSTNAME_LABEL.to_string(),
                    name.clone(),
                );
                Node {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    },
                    spec: Some(NodeSpec::default()),
                    status: Some(NodeStatus {
                        allocatable: Some(allocatable.clone()),
                        ..NodeStatus::default()
                    }),
                }
            })
            .collect()
    }
}

/// The last path segment of a label key, for readable domain names.
fn short(label: &str) -> &str {
    label.rsplit('/').next().unwrap_or(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lays_nodes_out_over_levels() {
        let spec = NodePoolSpec {
            name: "h100".into(),
            nodes: 8,
            levels: vec![
                PoolLevel {
                    label: "block".into(),
                    count: 2,
                },
                PoolLevel {
                    label: "rack".into(),
                    count: 2,
                },
            ],
            allocatable: BTreeMap::from([("nvidia.com/gpu".into(), "8".into())]),
            labels: BTreeMap::new(),
            clique: Some(PoolLevel {
                label: "nvidia.com/gpu.clique".into(),
                count: 2,
            }),
        };
        let nodes = spec.nodes();
        assert_eq!(nodes.len(), 8);
        let l = |i: usize, k: &str| nodes[i].metadata.labels.as_ref().unwrap()[k].clone();
        assert_eq!(l(0, "block"), l(3, "block"));
        assert_ne!(l(3, "block"), l(4, "block"));
        assert_eq!(l(2, "rack"), l(3, "rack"));
        assert_ne!(l(1, "rack"), l(2, "rack"));
        assert_eq!(l(6, "nvidia.com/gpu.clique"), l(7, "nvidia.com/gpu.clique"));
    }
}
