//! Topology (kueue.x-k8s.io/v1beta2, cluster-scoped): the node-label hierarchy used by TAS.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a Topology: levels from the highest (e.g. block) to the lowest (e.g. host).
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Topology",
    plural = "topologies",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// Levels, 1..=16, unique; `kubernetes.io/hostname` only as the last one.
    #[serde(default)]
    pub levels: Vec<TopologyLevel>,
}

/// One level of a topology.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    /// Node label key identifying the domain at this level.
    pub node_label: String,
}

impl TopologySpec {
    /// Level label keys in order, highest first.
    pub fn level_keys(&self) -> impl Iterator<Item = &str> {
        self.levels.iter().map(|l| l.node_label.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn parses_levels() {
        let yaml = "levels:\n- nodeLabel: block\n- nodeLabel: kubernetes.io/hostname\n";
        let s: TopologySpec = serde_norway::from_str(yaml).expect("valid");
        assert_eq!(
            s.level_keys().collect::<Vec<_>>(),
            ["block", "kubernetes.io/hostname"]
        );
        assert_eq!(Topology::plural(&()), "topologies");
    }
}
