//! LocalQueue (kueue.x-k8s.io/v1beta2, namespaced, short names `queue`, `queues`, `lq`).

use super::common::{FairSharing, StopPolicy};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Desired state of a LocalQueue: the ClusterQueue it feeds.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "LocalQueue",
    plural = "localqueues",
    namespaced,
    shortname = "queue",
    shortname = "queues",
    shortname = "lq",
    status = "LocalQueueStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// Backing ClusterQueue (immutable).
    #[serde(default)]
    pub cluster_queue: String,
    /// Stops new reservations when not `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
    /// Admission fair sharing weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

impl LocalQueueSpec {
    /// Stop policy with Kueue's default applied.
    pub fn effective_stop_policy(&self) -> StopPolicy {
        self.stop_policy.unwrap_or_default()
    }
}

/// Observed state of a LocalQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// Conditions (`Active`), at most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Workloads not yet admitted.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Workloads holding a reservation.
    #[serde(default)]
    pub reserving_workloads: i32,
    /// Admitted, unfinished workloads.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Reserved quota by flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<LocalQueueFlavorUsage>,
    /// Used quota by flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<LocalQueueFlavorUsage>,
    /// Fair-sharing state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<LocalQueueFairSharingStatus>,
}

/// Usage of one flavor by a LocalQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFlavorUsage {
    /// Flavor name.
    pub name: String,
    /// Usage per resource.
    #[serde(default)]
    pub resources: Vec<LocalQueueResourceUsage>,
}

/// Usage of one resource by a LocalQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueResourceUsage {
    /// Resource name.
    pub name: String,
    /// Total used.
    pub total: Quantity,
}

/// Fair-sharing state of a LocalQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFairSharingStatus {
    /// Weighted share.
    #[serde(default)]
    pub weighted_share: i64,
    /// Admission fair sharing state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_fair_sharing_status: Option<LocalQueueAdmissionFairSharingStatus>,
}

/// Decayed consumption of a LocalQueue for admission fair sharing.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueAdmissionFairSharingStatus {
    /// Aggregated usage over time.
    #[serde(default)]
    pub consumed_resources: BTreeMap<String, Quantity>,
    /// Last update time.
    pub last_update: Time,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn parses_and_is_namespaced() {
        let s: LocalQueueSpec =
            serde_norway::from_str("clusterQueue: cq\nstopPolicy: Hold\n").expect("valid");
        assert_eq!(s.cluster_queue, "cq");
        assert_eq!(s.effective_stop_policy(), StopPolicy::Hold);
        assert_eq!(LocalQueue::plural(&()), "localqueues");
        let lq = LocalQueue::new("q", s);
        assert!(lq.meta().namespace.is_none());
    }
}
