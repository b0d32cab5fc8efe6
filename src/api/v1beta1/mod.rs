//! kueue.x-k8s.io/v1beta1 shapes that differ from v1beta2, and conversion both ways.
//!
//! Kinds whose v1beta1 shape equals v1beta2 (ResourceFlavor, Topology, WorkloadPriorityClass,
//! and Cohort apart from v1alpha1's `parent`) are read straight into the v1beta2 types by
//! the manifest loader. Differences handled here:
//! - ClusterQueue: `spec.cohort` (v1beta2 `cohortName`); `spec.admissionChecks` (folded into
//!   `admissionChecksStrategy`); fungibility `Borrow`/`Preempt` (v1beta2 `MayStopSearch`);
//!   status `pendingWorkloadsStatus` (dropped in v1beta2).
//! - AdmissionCheck: the deprecated `spec.retryDelayMinutes` (dropped in v1beta2).
//! - MultiKueueCluster: `spec.kubeConfig` and `spec.clusterProfileRef` (v1beta2
//!   `spec.clusterSource`); MultiKueueConfig: no `quotaManagement`.
//! - LocalQueue: status `flavorUsage` (v1beta2 `flavorsUsage`) and deprecated `flavors`.
//! - Workload: `priorityClassName` + `priorityClassSource` (v1beta2 `priorityClassRef`);
//!   status `accumulatedPastExexcutionTimeSeconds` (sic); topology assignment as a flat
//!   `domains` list (v1beta2 compressed `slices`).

mod admissioncheck;
mod multikueue;
mod workload;

pub use admissioncheck::*;
pub use multikueue::*;
pub use workload::*;

use super::clusterqueue::{
    self as v2cq, AdmissionCheckStrategyRule, AdmissionChecksStrategy, ClusterQueuePreemption,
    QueueingStrategy,
};
use super::common::{AdmissionScope, FairSharing, FairSharingStatus, ResourceGroup, StopPolicy};
use super::localqueue::{self as v2lq, LocalQueueFairSharingStatus, LocalQueueFlavorUsage};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// v1beta1 ClusterQueue spec.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "ClusterQueue",
    plural = "clusterqueues",
    shortname = "cq",
    status = "ClusterQueueStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    /// Resource groups (same shape as v1beta2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Cohort name (v1beta2 `cohortName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// Queueing strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_strategy: Option<QueueingStrategy>,
    /// Namespace selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Flavor fungibility with v1beta1 values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// Preemption (same shape as v1beta2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<ClusterQueuePreemption>,
    /// AdmissionChecks applying to every flavor (removed in v1beta2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<String>,
    /// Per-flavor AdmissionCheck rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
    /// Stop policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
    /// Fair sharing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// Admission fair sharing scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_scope: Option<AdmissionScope>,
}

/// v1beta1 `whenCanBorrow` values.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenCanBorrow {
    /// Deprecated spelling of MayStopSearch.
    Borrow,
    /// Stop the search when borrowing fits.
    MayStopSearch,
    /// Try the next flavor before borrowing.
    TryNextFlavor,
}

/// v1beta1 `whenCanPreempt` values.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenCanPreempt {
    /// Deprecated spelling of MayStopSearch.
    Preempt,
    /// Stop the search when preemption fits.
    MayStopSearch,
    /// Try the next flavor before preempting.
    TryNextFlavor,
}

/// v1beta1 flavor fungibility.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FlavorFungibility {
    /// Behaviour when borrowing is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_borrow: Option<WhenCanBorrow>,
    /// Behaviour when preemption is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_can_preempt: Option<WhenCanPreempt>,
    /// Preference when all flavors need borrowing or preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<v2cq::FlavorFungibilityPreference>,
}

/// v1beta1 ClusterQueue status.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Reserved quota by flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<v2cq::FlavorUsage>,
    /// Used quota by flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<v2cq::FlavorUsage>,
    /// Pending workloads.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Reserving workloads.
    #[serde(default)]
    pub reserving_workloads: i32,
    /// Admitted workloads.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Deprecated head-of-queue listing; not carried into v1beta2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads_status: Option<serde_json::Value>,
    /// Fair-sharing state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

/// v1beta1 LocalQueue spec (same fields as v1beta2).
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
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
    /// Backing ClusterQueue.
    #[serde(default)]
    pub cluster_queue: String,
    /// Stop policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_policy: Option<StopPolicy>,
    /// Admission fair sharing weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

/// v1beta1 LocalQueue status.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Pending workloads.
    #[serde(default)]
    pub pending_workloads: i32,
    /// Reserving workloads.
    #[serde(default)]
    pub reserving_workloads: i32,
    /// Admitted workloads.
    #[serde(default)]
    pub admitted_workloads: i32,
    /// Reserved quota by flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<LocalQueueFlavorUsage>,
    /// Used quota by flavor (v1beta2 `flavorsUsage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavor_usage: Vec<LocalQueueFlavorUsage>,
    /// Deprecated flavor listing; not carried into v1beta2.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<serde_json::Value>,
    /// Fair-sharing state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<LocalQueueFairSharingStatus>,
}

// ---------------------------------------------------------------- conversion to v1beta2

impl From<WhenCanBorrow> for v2cq::FlavorFungibilityPolicy {
    fn from(v: WhenCanBorrow) -> Self {
        match v {
            WhenCanBorrow::Borrow | WhenCanBorrow::MayStopSearch => Self::MayStopSearch,
            WhenCanBorrow::TryNextFlavor => Self::TryNextFlavor,
        }
    }
}

impl From<WhenCanPreempt> for v2cq::FlavorFungibilityPolicy {
    fn from(v: WhenCanPreempt) -> Self {
        match v {
            WhenCanPreempt::Preempt | WhenCanPreempt::MayStopSearch => Self::MayStopSearch,
            WhenCanPreempt::TryNextFlavor => Self::TryNextFlavor,
        }
    }
}

impl From<FlavorFungibility> for v2cq::FlavorFungibility {
    fn from(f: FlavorFungibility) -> Self {
        Self {
            when_can_borrow: f.when_can_borrow.map(Into::into),
            when_can_preempt: f.when_can_preempt.map(Into::into),
            preference: f.preference,
        }
    }
}

impl From<v2cq::FlavorFungibility> for FlavorFungibility {
    /// v1beta1 accepts the v1beta2 values too, so they are written unchanged, as Kueue does.
    fn from(f: v2cq::FlavorFungibility) -> Self {
        use v2cq::FlavorFungibilityPolicy as P;
        Self {
            when_can_borrow: f.when_can_borrow.map(|p| match p {
                P::MayStopSearch => WhenCanBorrow::MayStopSearch,
                P::TryNextFlavor => WhenCanBorrow::TryNextFlavor,
            }),
            when_can_preempt: f.when_can_preempt.map(|p| match p {
                P::MayStopSearch => WhenCanPreempt::MayStopSearch,
                P::TryNextFlavor => WhenCanPreempt::TryNextFlavor,
            }),
            preference: f.preference,
        }
    }
}

impl From<ClusterQueueSpec> for v2cq::ClusterQueueSpec {
    /// Non-empty `admissionChecks` become strategy rules without `onFlavors` (which Kueue
    /// treats alike) and, as in Kueue, replace any `admissionChecksStrategy` given alongside.
    fn from(s: ClusterQueueSpec) -> Self {
        let strategy = if s.admission_checks.is_empty() {
            s.admission_checks_strategy
        } else {
            Some(AdmissionChecksStrategy {
                admission_checks: s
                    .admission_checks
                    .into_iter()
                    .map(|name| AdmissionCheckStrategyRule {
                        name,
                        on_flavors: Vec::new(),
                    })
                    .collect(),
            })
        };
        Self {
            resource_groups: s.resource_groups,
            cohort_name: s.cohort,
            queueing_strategy: s.queueing_strategy,
            namespace_selector: s.namespace_selector,
            flavor_fungibility: s.flavor_fungibility.map(Into::into),
            preemption: s.preemption,
            admission_checks_strategy: strategy,
            stop_policy: s.stop_policy,
            fair_sharing: s.fair_sharing,
            admission_scope: s.admission_scope,
            concurrent_admission_policy: None,
        }
    }
}

impl From<v2cq::ClusterQueueSpec> for ClusterQueueSpec {
    /// `concurrentAdmissionPolicy` has no v1beta1 field and is dropped.
    fn from(s: v2cq::ClusterQueueSpec) -> Self {
        Self {
            resource_groups: s.resource_groups,
            cohort: s.cohort_name,
            queueing_strategy: s.queueing_strategy,
            namespace_selector: s.namespace_selector,
            flavor_fungibility: s.flavor_fungibility.map(Into::into),
            preemption: s.preemption,
            admission_checks: Vec::new(),
            admission_checks_strategy: s.admission_checks_strategy,
            stop_policy: s.stop_policy,
            fair_sharing: s.fair_sharing,
            admission_scope: s.admission_scope,
        }
    }
}

impl From<ClusterQueueStatus> for v2cq::ClusterQueueStatus {
    fn from(s: ClusterQueueStatus) -> Self {
        Self {
            conditions: s.conditions,
            flavors_reservation: s.flavors_reservation,
            flavors_usage: s.flavors_usage,
            pending_workloads: s.pending_workloads,
            reserving_workloads: s.reserving_workloads,
            admitted_workloads: s.admitted_workloads,
            fair_sharing: s.fair_sharing,
        }
    }
}

impl From<v2cq::ClusterQueueStatus> for ClusterQueueStatus {
    fn from(s: v2cq::ClusterQueueStatus) -> Self {
        Self {
            conditions: s.conditions,
            flavors_reservation: s.flavors_reservation,
            flavors_usage: s.flavors_usage,
            pending_workloads: s.pending_workloads,
            reserving_workloads: s.reserving_workloads,
            admitted_workloads: s.admitted_workloads,
            pending_workloads_status: None,
            fair_sharing: s.fair_sharing,
        }
    }
}

impl From<ClusterQueue> for v2cq::ClusterQueue {
    fn from(o: ClusterQueue) -> Self {
        Self {
            metadata: o.metadata,
            spec: o.spec.into(),
            status: o.status.map(Into::into),
        }
    }
}

impl From<v2cq::ClusterQueue> for ClusterQueue {
    fn from(o: v2cq::ClusterQueue) -> Self {
        Self {
            metadata: o.metadata,
            spec: o.spec.into(),
            status: o.status.map(Into::into),
        }
    }
}

impl From<LocalQueue> for v2lq::LocalQueue {
    fn from(o: LocalQueue) -> Self {
        Self {
            metadata: o.metadata,
            spec: v2lq::LocalQueueSpec {
                cluster_queue: o.spec.cluster_queue,
                stop_policy: o.spec.stop_policy,
                fair_sharing: o.spec.fair_sharing,
            },
            status: o.status.map(|s| v2lq::LocalQueueStatus {
                conditions: s.conditions,
                pending_workloads: s.pending_workloads,
                reserving_workloads: s.reserving_workloads,
                admitted_workloads: s.admitted_workloads,
                flavors_reservation: s.flavors_reservation,
                flavors_usage: s.flavor_usage,
                fair_sharing: s.fair_sharing,
            }),
        }
    }
}

impl From<v2lq::LocalQueue> for LocalQueue {
    fn from(o: v2lq::LocalQueue) -> Self {
        Self {
            metadata: o.metadata,
            spec: LocalQueueSpec {
                cluster_queue: o.spec.cluster_queue,
                stop_policy: o.spec.stop_policy,
                fair_sharing: o.spec.fair_sharing,
            },
            status: o.status.map(|s| LocalQueueStatus {
                conditions: s.conditions,
                pending_workloads: s.pending_workloads,
                reserving_workloads: s.reserving_workloads,
                admitted_workloads: s.admitted_workloads,
                flavors_reservation: s.flavors_reservation,
                flavor_usage: s.flavors_usage,
                flavors: Vec::new(),
                fair_sharing: s.fair_sharing,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clusterqueue::FlavorFungibilityPolicy;

    const CQ: &str = r#"
cohort: team
admissionChecks: [prov]
flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}
resourceGroups:
- coveredResources: [cpu]
  flavors:
  - name: default
    resources: [{name: cpu, nominalQuota: 4}]
"#;

    #[test]
    fn cluster_queue_converts_to_v1beta2() {
        let v1: ClusterQueueSpec = serde_norway::from_str(CQ).expect("valid");
        let v2: v2cq::ClusterQueueSpec = v1.clone().into();
        assert_eq!(v2.cohort(), Some("team"));
        let f = v2.flavor_fungibility.clone().unwrap_or_default();
        assert_eq!(
            f.when_can_borrow,
            Some(FlavorFungibilityPolicy::MayStopSearch)
        );
        assert_eq!(
            f.when_can_preempt,
            Some(FlavorFungibilityPolicy::MayStopSearch)
        );
        let rules = v2.admission_checks_strategy.clone().unwrap_or_default();
        assert_eq!(rules.admission_checks[0].name, "prov");
        let back: ClusterQueueSpec = v2.into();
        assert_eq!(back.cohort, v1.cohort);
        // Kueue writes the v1beta2 spelling back, which v1beta1 also accepts.
        assert_eq!(
            back.flavor_fungibility,
            Some(FlavorFungibility {
                when_can_borrow: Some(WhenCanBorrow::MayStopSearch),
                when_can_preempt: Some(WhenCanPreempt::MayStopSearch),
                preference: None,
            })
        );
    }

    #[test]
    fn admission_checks_replace_a_strategy_given_alongside() {
        let yaml = "admissionChecks: [prov, mk]\nadmissionChecksStrategy:\n  admissionChecks:\n  - {name: other, onFlavors: [gpu]}\n";
        let v1: ClusterQueueSpec = serde_norway::from_str(yaml).expect("valid");
        let v2: v2cq::ClusterQueueSpec = v1.into();
        let rules = v2
            .admission_checks_strategy
            .unwrap_or_default()
            .admission_checks;
        let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["prov", "mk"],
            "the strategy's own rules are dropped"
        );
        assert!(rules.iter().all(|r| r.on_flavors.is_empty()));

        let only: ClusterQueueSpec = serde_norway::from_str(
            "admissionChecks: []\nadmissionChecksStrategy: {admissionChecks: [{name: other, onFlavors: [gpu]}]}\n",
        )
        .expect("valid");
        let v2: v2cq::ClusterQueueSpec = only.into();
        let rules = v2
            .admission_checks_strategy
            .unwrap_or_default()
            .admission_checks;
        assert_eq!(
            rules.len(),
            1,
            "an empty admissionChecks keeps the strategy"
        );
        assert_eq!(rules[0].on_flavors, ["gpu"]);
    }

    #[test]
    fn fungibility_values_are_per_field() {
        assert!(
            serde_norway::from_str::<FlavorFungibility>("whenCanBorrow: Preempt").is_err(),
            "Preempt is not a whenCanBorrow value"
        );
        assert!(
            crate::api::manifest::strict::strict_from_yaml::<ClusterQueueSpec>("cohortName: x")
                .is_none()
        );
    }

    #[test]
    fn local_queue_status_renames_usage() {
        let y = "flavorUsage: [{name: f, resources: [{name: cpu, total: '1'}]}]\n";
        let s: LocalQueueStatus = serde_norway::from_str(y).expect("valid");
        let lq = LocalQueue {
            metadata: Default::default(),
            spec: LocalQueueSpec::default(),
            status: Some(s),
        };
        let v2: v2lq::LocalQueue = lq.into();
        assert_eq!(v2.status.map(|s| s.flavors_usage.len()), Some(1));
    }
}
