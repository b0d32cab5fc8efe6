//! ClusterQueue (kueue.x-k8s.io/v1beta2, cluster-scoped, short name `cq`).

use super::common::{AdmissionScope, FairSharing, FairSharingStatus, ResourceGroup, StopPolicy};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a ClusterQueue: its quotas, cohort membership and policies.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterQueue",
    plural = "clusterqueues",
    shortname = "cq",
    status = "ClusterQueueStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    /// Groups of resources and the flavors that provide quota for them (at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Cohort this queue borrows from and lends to; `None` means no borrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort_name: Option<String>,
    /// Ordering of pending workloads; Kueue defaults to BestEffortFIFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_strategy: Option<QueueingStrategy>,
    /// Namespaces allowed to submit; `None` admits no namespace, `{}` admits all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Whether to try the next flavor before borrowing or preempting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// Preemption policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<ClusterQueuePreemption>,
    /// Which admission checks apply to which flavors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
    /// Stops new reservations when not `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
    /// Fair-sharing weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// Admission fair sharing mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_scope: Option<AdmissionScope>,
    /// Concurrent admission (flavor migration) configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_admission_policy: Option<ConcurrentAdmissionPolicy>,
}

impl ClusterQueueSpec {
    /// Stop policy with Kueue's default applied.
    pub fn effective_stop_policy(&self) -> StopPolicy {
        self.stop_policy.unwrap_or_default()
    }

    /// Cohort name, treating an empty string like Go's zero value (no cohort).
    pub fn cohort(&self) -> Option<&str> {
        self.cohort_name.as_deref().filter(|c| !c.is_empty())
    }
}

/// How pending workloads of a ClusterQueue are ordered.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QueueingStrategy {
    /// Strictly by priority then creation time; the head blocks the rest.
    #[serde(rename = "StrictFIFO")]
    StrictFifo,
    /// By priority then creation time; inadmissible heads do not block.
    #[default]
    #[serde(rename = "BestEffortFIFO")]
    BestEffortFifo,
}

/// Which workloads may be preempted.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PreemptionPolicy {
    /// Never preempt.
    #[default]
    Never,
    /// Preempt regardless of priority.
    Any,
    /// Preempt only lower-priority workloads.
    LowerPriority,
    /// Preempt lower-priority workloads, or equal-priority ones that are newer.
    LowerOrNewerEqualPriority,
}

/// Whether the flavor search may stop at the current flavor.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlavorFungibilityPolicy {
    /// Stop the search if the workload fits, possibly needing borrowing/preemption.
    #[default]
    MayStopSearch,
    /// Try the next flavor before borrowing/preempting in this one.
    TryNextFlavor,
}

/// Tie-break when every candidate flavor needs borrowing or preemption.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlavorFungibilityPreference {
    /// Prefer borrowing over preempting.
    #[default]
    BorrowingOverPreemption,
    /// Prefer preempting over borrowing.
    PreemptionOverBorrowing,
}

/// Flavor fungibility: when to move on to the next flavor.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FlavorFungibility {
    /// Behaviour when the workload needs borrowing; default MayStopSearch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_borrow: Option<FlavorFungibilityPolicy>,
    /// Behaviour when the workload needs preemption; default TryNextFlavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_preempt: Option<FlavorFungibilityPolicy>,
    /// Preference when all flavors need borrowing or preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<FlavorFungibilityPreference>,
}

impl FlavorFungibility {
    /// `whenCanBorrow` with Kueue's default (MayStopSearch).
    pub fn effective_when_can_borrow(&self) -> FlavorFungibilityPolicy {
        self.when_can_borrow
            .unwrap_or(FlavorFungibilityPolicy::MayStopSearch)
    }

    /// `whenCanPreempt` with Kueue's default (TryNextFlavor).
    pub fn effective_when_can_preempt(&self) -> FlavorFungibilityPolicy {
        self.when_can_preempt
            .unwrap_or(FlavorFungibilityPolicy::TryNextFlavor)
    }
}

/// Preemption policies of a ClusterQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueuePreemption {
    /// Preempt in other queues of the cohort that borrow, to reclaim nominal quota (Never/LowerPriority/Any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<PreemptionPolicy>,
    /// Preempt in the cohort while borrowing (classical preemption only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
    /// Preempt within this ClusterQueue (Never/LowerPriority/LowerOrNewerEqualPriority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_cluster_queue: Option<PreemptionPolicy>,
}

/// Policy for preempting in the cohort while borrowing.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BorrowWithinCohortPolicy {
    /// Never preempt while borrowing.
    #[default]
    Never,
    /// Preempt only lower-priority workloads while borrowing.
    LowerPriority,
}

/// Configuration for preemption in the cohort while borrowing.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    /// Policy; default Never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<BorrowWithinCohortPolicy>,
    /// Only workloads with priority <= this threshold may be preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

/// Strategies selecting which flavors need which AdmissionChecks.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionChecksStrategy {
    /// One rule per AdmissionCheck (1..=64).
    #[serde(default)]
    pub admission_checks: Vec<AdmissionCheckStrategyRule>,
}

/// Flavors a single AdmissionCheck applies to.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStrategyRule {
    /// AdmissionCheck name.
    pub name: String,
    /// Flavors the check runs for; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_flavors: Vec<String>,
}

/// Concurrent admission: pursue several flavors and migrate to a preferred one later.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionPolicy {
    /// Migration constraints.
    pub migration: ConcurrentAdmissionMigration,
}

/// Migration settings of concurrent admission.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionMigration {
    /// Migration mode.
    pub mode: ConcurrentAdmissionMigrationMode,
    /// Optional limits on where a workload may migrate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<ConcurrentAdmissionConstraints>,
}

/// Concurrent admission migration modes.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConcurrentAdmissionMigrationMode {
    /// Keep trying more preferred flavors after admission.
    #[default]
    TryPreferredFlavors,
    /// Stay on the first flavor admitted to.
    RetainFirstAdmission,
}

/// Constraints on concurrent admission migration.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionConstraints {
    /// Least preferred flavor a workload may migrate to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_acceptable_flavor_name: Option<String>,
}

/// Observed state of a ClusterQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Conditions (`Active`, ...), at most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Quota reserved per flavor by workloads holding a reservation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<FlavorUsage>,
    /// Quota used per flavor by admitted workloads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
    /// Workloads waiting for admission.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Workloads holding a quota reservation.
    #[serde(default)]
    pub reserving_workloads: i32,
    /// Admitted, unfinished workloads.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Fair-sharing state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

/// Usage of one flavor.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    /// Flavor name.
    pub name: String,
    /// Usage per resource.
    #[serde(default)]
    pub resources: Vec<ResourceUsage>,
}

/// Usage of one resource in a flavor.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    /// Resource name.
    pub name: String,
    /// Total used, including borrowed.
    #[serde(default = "zero_quantity")]
    pub total: Quantity,
    /// Portion above nominal quota.
    #[serde(default = "zero_quantity")]
    pub borrowed: Quantity,
}

fn zero_quantity() -> Quantity {
    Quantity("0".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn resource_metadata() {
        assert_eq!(ClusterQueue::api_version(&()), "kueue.x-k8s.io/v1beta2");
        assert_eq!(ClusterQueue::plural(&()), "clusterqueues");
    }

    #[test]
    fn enum_strings_match_kueue() {
        let q: QueueingStrategy = serde_json::from_str("\"StrictFIFO\"").expect("valid");
        assert_eq!(q, QueueingStrategy::StrictFifo);
        assert_eq!(
            serde_json::to_string(&QueueingStrategy::BestEffortFifo).expect("serializable"),
            "\"BestEffortFIFO\""
        );
        assert_eq!(
            QueueingStrategy::default(),
            QueueingStrategy::BestEffortFifo
        );
        assert_eq!(PreemptionPolicy::default(), PreemptionPolicy::Never);
        let f = FlavorFungibility::default();
        assert_eq!(
            f.effective_when_can_borrow(),
            FlavorFungibilityPolicy::MayStopSearch
        );
        assert_eq!(
            f.effective_when_can_preempt(),
            FlavorFungibilityPolicy::TryNextFlavor
        );
    }

    #[test]
    fn spec_parses_kueue_yaml() {
        let yaml = r#"
namespaceSelector: {}
cohortName: team
resourceGroups:
- coveredResources: ["cpu", "memory"]
  flavors:
  - name: default-flavor
    resources:
    - name: cpu
      nominalQuota: 9
    - name: memory
      nominalQuota: 36Gi
      lendingLimit: 10Gi
preemption:
  reclaimWithinCohort: Any
  borrowWithinCohort:
    policy: LowerPriority
    maxPriorityThreshold: 100
  withinClusterQueue: LowerOrNewerEqualPriority
"#;
        let spec: ClusterQueueSpec = serde_norway::from_str(yaml).expect("valid spec");
        assert_eq!(spec.cohort(), Some("team"));
        assert_eq!(
            spec.resource_groups[0].flavors[0].resources[0]
                .nominal_quota
                .0,
            "9"
        );
        assert!(
            crate::api::manifest::strict::strict_from_yaml::<ClusterQueueSpec>("cohort: x")
                .is_none()
        );
    }
}
