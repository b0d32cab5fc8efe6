//! v1beta1 MultiKueueCluster and MultiKueueConfig: the connection at `spec.kubeConfig` and
//! `spec.clusterProfileRef` (v1beta2 groups them under `spec.clusterSource`), and no
//! `quotaManagement` (v1beta2 only; kept through a round trip by the conversion's stash).

use crate::api::multikueue::{
    self as v2, ClusterProfileReference, KubeConfig, MultiKueueClusterStatus,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// v1beta1 MultiKueueCluster spec.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "MultiKueueCluster",
    plural = "multikueueclusters",
    shortname = "mkc",
    status = "MultiKueueClusterStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterSpec {
    /// The worker's kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfig>,
    /// A ClusterProfile of the cluster inventory API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_profile_ref: Option<ClusterProfileReference>,
}

/// v1beta1 MultiKueueConfig spec.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "MultiKueueConfig",
    plural = "multikueueconfigs",
    shortname = "mkconf",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueConfigSpec {
    /// MultiKueueCluster names.
    pub clusters: Vec<String>,
}

impl From<MultiKueueCluster> for v2::MultiKueueCluster {
    fn from(o: MultiKueueCluster) -> Self {
        Self {
            metadata: o.metadata,
            spec: v2::MultiKueueClusterSpec {
                cluster_source: v2::ClusterSource {
                    kube_config: o.spec.kube_config,
                    cluster_profile_ref: o.spec.cluster_profile_ref,
                },
            },
            status: o.status,
        }
    }
}

impl From<v2::MultiKueueCluster> for MultiKueueCluster {
    fn from(o: v2::MultiKueueCluster) -> Self {
        Self {
            metadata: o.metadata,
            spec: MultiKueueClusterSpec {
                kube_config: o.spec.cluster_source.kube_config,
                cluster_profile_ref: o.spec.cluster_source.cluster_profile_ref,
            },
            status: o.status,
        }
    }
}

impl From<MultiKueueConfig> for v2::MultiKueueConfig {
    fn from(o: MultiKueueConfig) -> Self {
        Self {
            metadata: o.metadata,
            spec: v2::MultiKueueConfigSpec {
                clusters: o.spec.clusters,
                quota_management: None,
            },
        }
    }
}

impl From<v2::MultiKueueConfig> for MultiKueueConfig {
    fn from(o: v2::MultiKueueConfig) -> Self {
        Self {
            metadata: o.metadata,
            spec: MultiKueueConfigSpec {
                clusters: o.spec.clusters,
            },
        }
    }
}
