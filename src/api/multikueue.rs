//! MultiKueueConfig (short name `mkconf`) and MultiKueueCluster (`mkc`), kueue.x-k8s.io
//! v1beta2, cluster-scoped: the parameters of an AdmissionCheck run by Kueue's MultiKueue
//! controller (`kueue.x-k8s.io/multikueue`), which dispatches a manager cluster's
//! Workloads to worker clusters. kuota serves and validates these kinds; it does not run
//! MultiKueue's controller (see docs/admission-checks.md).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller name of Kueue's MultiKueue admission check.
pub const MULTIKUEUE_CONTROLLER: &str = "kueue.x-k8s.io/multikueue";

/// The worker clusters a MultiKueue check dispatches to, in order.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "MultiKueueConfig",
    plural = "multikueueconfigs",
    shortname = "mkconf",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueConfigSpec {
    /// MultiKueueCluster names (1..=20, unique, each at most 256 characters).
    pub clusters: Vec<String>,
    /// `Manual` or `Automated` quota management of the workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_management: Option<QuotaManagement>,
}

/// How the workers' quota is kept.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaManagement {
    /// By the workers' administrators.
    Manual,
    /// By the manager (Kueue's MultiKueueManagerQuotaAutomation feature).
    Automated,
}

/// One worker cluster and how to reach it.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "MultiKueueCluster",
    plural = "multikueueclusters",
    shortname = "mkc",
    status = "MultiKueueClusterStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterSpec {
    /// Where its connection comes from: exactly one of a kubeconfig or a ClusterProfile.
    pub cluster_source: ClusterSource,
}

/// The source of a worker's connection.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSource {
    /// A kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfig>,
    /// A ClusterProfile of the cluster inventory API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_profile_ref: Option<ClusterProfileReference>,
}

/// Where a worker's kubeconfig is.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfig {
    /// A Secret's name (in the controller's namespace, key `kubeconfig`) or a file path
    /// (1..=256 characters).
    pub location: String,
    /// `Secret` (Kueue's default) or `Path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_type: Option<LocationType>,
}

/// What a kubeconfig location names.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocationType {
    /// A Secret in the controller's namespace.
    Secret,
    /// A file on the controller's filesystem.
    Path,
}

/// A ClusterProfile's name.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
pub struct ClusterProfileReference {
    /// The ClusterProfile's name (1..=256 characters).
    pub name: String,
}

/// Observed state of a worker cluster.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterStatus {
    /// Conditions (at most 16), among them `Active` (connected).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kueue_multikueue_sample_reads() {
        let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueCluster\nmetadata: {name: multikueue-test-cluster1}\nspec:\n  clusterSource:\n    kubeConfig:\n      locationType: Secret\n      location: multikueue-test-cluster1\n";
        let mkc: MultiKueueCluster = serde_norway::from_str(yaml).expect("decodes");
        let kc = mkc.spec.cluster_source.kube_config.expect("kubeconfig");
        assert_eq!(
            (kc.location.as_str(), kc.location_type),
            ("multikueue-test-cluster1", Some(LocationType::Secret))
        );
        let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: c}\nspec: {clusters: [a, b]}\n";
        let cfg: MultiKueueConfig = serde_norway::from_str(yaml).expect("decodes");
        assert_eq!(cfg.spec.clusters, ["a", "b"]);
    }
}
