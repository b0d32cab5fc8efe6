//! Types shared by several kueue.x-k8s.io/v1beta2 kinds (quota groups, fair sharing, stop policy).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether a ClusterQueue or LocalQueue accepts new reservations, and what happens to admitted work.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StopPolicy {
    /// The queue is active.
    #[default]
    None,
    /// No new reservations; admitted workloads run to completion.
    Hold,
    /// No new reservations; admitted workloads are evicted.
    HoldAndDrain,
}

/// A group of resources whose quotas are provided together by a list of flavors.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    /// Resources covered by every flavor of this group, e.g. `cpu`, `nvidia.com/gpu`.
    #[serde(default)]
    pub covered_resources: Vec<String>,
    /// Flavors in preference order; each lists the covered resources in the same order.
    #[serde(default)]
    pub flavors: Vec<FlavorQuotas>,
}

/// The quotas one flavor provides for the covered resources of its group.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// Name of a ResourceFlavor.
    pub name: String,
    /// One quota per covered resource, in the group's order.
    #[serde(default)]
    pub resources: Vec<ResourceQuota>,
}

/// Quota of one (flavor, resource) pair.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    /// Resource name, e.g. `cpu`.
    pub name: String,
    /// Quantity available to this queue (or cohort) at any time.
    pub nominal_quota: Quantity,
    /// Upper bound on what may be borrowed from the cohort; `None` is unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// Upper bound on what may be lent to the cohort; `None` lends everything unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<Quantity>,
}

/// Fair-sharing properties of a ClusterQueue, Cohort or LocalQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FairSharing {
    /// Relative weight when competing for unused quota; Kueue defaults it to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<Quantity>,
}

/// Observed fair-sharing state of a ClusterQueue or Cohort.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FairSharingStatus {
    /// Dominant resource share above nominal quota divided by weight (`i64::MAX` for zero weight).
    #[serde(default)]
    pub weighted_share: i64,
    /// Admission fair sharing state, when usage-based admission fair sharing is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_fair_sharing_status: Option<AdmissionFairSharingStatus>,
}

/// Decayed resource consumption used by admission fair sharing.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionFairSharingStatus {
    /// Aggregated usage over time, with decay applied.
    #[serde(default)]
    pub consumed_resources: BTreeMap<String, Quantity>,
    /// When the consumed resources were last updated.
    pub last_update: Time,
}

/// Which admission fair sharing mode a ClusterQueue uses.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionScope {
    /// The admission fair sharing mode.
    pub admission_mode: AdmissionMode,
}

/// Admission fair sharing modes.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AdmissionMode {
    /// Order admission by decayed historical usage.
    UsageBasedAdmissionFairSharing,
    /// Admission fair sharing disabled for this ClusterQueue.
    #[default]
    NoAdmissionFairSharing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_policy_strings_match_kueue() {
        let s: StopPolicy = serde_json::from_str("\"HoldAndDrain\"").expect("valid enum");
        assert_eq!(s, StopPolicy::HoldAndDrain);
        assert_eq!(StopPolicy::default(), StopPolicy::None);
        assert!(serde_json::from_str::<StopPolicy>("\"Drain\"").is_err());
    }

    #[test]
    fn resource_quota_rejects_unknown_fields() {
        let bad = r#"{"name":"cpu","nominalQuota":"1","bogus":1}"#;
        assert!(crate::api::manifest::strict::strict_from_yaml::<ResourceQuota>(bad).is_none());
    }
}
