//! ResourceFlavor (kueue.x-k8s.io/v1beta2, cluster-scoped, short names `flavor`, `flavors`, `rf`).

use k8s_openapi::api::core::v1::{Taint, Toleration};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Desired state of a ResourceFlavor: how its nodes are labelled and tainted.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ResourceFlavor",
    plural = "resourceflavors",
    shortname = "flavor",
    shortname = "flavors",
    shortname = "rf",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// Labels of the nodes of this flavor (at most 8); injected into admitted pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_labels: Option<BTreeMap<String, String>>,
    /// Taints of the nodes of this flavor (at most 8); pods must tolerate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints: Option<Vec<Taint>>,
    /// Tolerations added to admitted pods (at most 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Topology used for topology-aware scheduling on this flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn parses_kueue_flavor() {
        let yaml = r#"
nodeLabels: {cloud.provider.com/accelerator: a100}
nodeTaints:
- key: spot
  value: "true"
  effect: NoSchedule
topologyName: default
"#;
        let s: ResourceFlavorSpec = serde_norway::from_str(yaml).expect("valid");
        assert_eq!(s.node_taints.as_ref().map(Vec::len), Some(1));
        assert_eq!(ResourceFlavor::plural(&()), "resourceflavors");
        assert!(
            crate::api::manifest::strict::strict_from_yaml::<ResourceFlavorSpec>("labels: {}")
                .is_none()
        );
    }
}
