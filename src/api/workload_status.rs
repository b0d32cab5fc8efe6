//! Status side of the v1beta2 Workload: admission, topology assignment and bookkeeping.

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Observed state of a Workload.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// Conditions (`QuotaReserved`, `Admitted`, `Evicted`, `Preempted`, `Finished`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Where and how the workload was admitted; `None` while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Requeue backoff state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<RequeueState>,
    /// Pods per pod set whose reservation is no longer needed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reclaimable_pods: Vec<ReclaimablePod>,
    /// State of each admission check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheckState>,
    /// Requests considered for a not-yet-admitted workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_requests: Vec<PodSetRequest>,
    /// Seconds spent admitted in earlier admit/evict cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulated_past_execution_time_seconds: Option<i32>,
    /// Scheduling statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_stats: Option<SchedulingStats>,
    /// MultiKueue: clusters nominated for the workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nominated_cluster_names: Vec<String>,
    /// MultiKueue: cluster the workload runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Failed nodes being replaced under TAS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_nodes: Vec<UnhealthyNode>,
    /// Observed position of each preemption gate named in the spec (at most 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemption_gates: Vec<PreemptionGateState>,
}

impl WorkloadStatus {
    /// The condition of the given type, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of the given type is present with status `True`.
    pub fn is_condition_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }
}

/// Result of admitting a workload into a ClusterQueue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// ClusterQueue holding the reservation.
    pub cluster_queue: String,
    /// One assignment per pod set, by name.
    #[serde(default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// Flavors, usage and placement assigned to one pod set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// Pod set name, default `main`.
    #[serde(default = "default_name")]
    pub name: String,
    /// Flavor per resource name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
    /// Total resources of all pods of the pod set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_usage: BTreeMap<String, Quantity>,
    /// Pods counted at admission (may be below spec count under partial admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Placement per topology domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_assignment: Option<TopologyAssignment>,
    /// Topology assignment postponed until admission checks finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_topology_request: Option<DelayedTopologyRequestState>,
}

impl Default for PodSetAssignment {
    fn default() -> Self {
        Self {
            name: default_name(),
            flavors: BTreeMap::new(),
            resource_usage: BTreeMap::new(),
            count: None,
            topology_assignment: None,
            delayed_topology_request: None,
        }
    }
}

fn default_name() -> String {
    super::workload::DEFAULT_POD_SET_NAME.to_string()
}

/// State of a delayed topology request.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DelayedTopologyRequestState {
    /// Waiting to be computed.
    Pending,
    /// Computed.
    Ready,
}

/// Pods per topology domain, compressed as in Kueue v1beta2.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    /// Node label keys, highest level first (only the hostname when it is a level).
    #[serde(default)]
    pub levels: Vec<String>,
    /// Slices whose union is the full assignment.
    #[serde(default)]
    pub slices: Vec<TopologyAssignmentSlice>,
}

/// A run of domains sharing compression parameters.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSlice {
    /// Number of domains in the slice (>= 1).
    pub domain_count: i32,
    /// One entry per level.
    #[serde(default)]
    pub values_per_level: Vec<TopologyAssignmentSliceLevelValues>,
    /// Pods per domain; required, as in Kueue (a schema default of `{}` would break its
    /// own exactly-one-of rule, and the API server refuses such a CRD).
    pub pod_counts: TopologyAssignmentSlicePodCounts,
}

/// Label values of one level across the domains of a slice; exactly one field is set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSliceLevelValues {
    /// One value for every domain of the slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<String>,
    /// One value per domain, with common prefix and suffix factored out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub individual: Option<TopologyAssignmentSliceLevelIndividualValues>,
}

/// Per-domain label values of one level: each is `prefix + root + suffix`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSliceLevelIndividualValues {
    /// Common prefix of all values (unset rather than empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Common suffix of all values (unset rather than empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// What remains of each value, one per domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
}

/// Pods per domain of a slice; exactly one field is set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSlicePodCounts {
    /// The same count in every domain (>= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<i32>,
    /// One count per domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub individual: Vec<i32>,
}

impl TopologyAssignmentSlice {
    /// Expands the slice into `(label values per level, pod count)` per domain.
    ///
    /// Returns `None` when the slice is malformed (lengths disagree, or neither or both of the
    /// exclusive fields are set), so callers never index out of bounds.
    pub fn domains(&self) -> Option<Vec<(Vec<String>, i32)>> {
        let n = usize::try_from(self.domain_count).ok()?;
        let pc = &self.pod_counts;
        let counts: Vec<i32> = match (pc.universal, pc.individual.is_empty()) {
            (None, false) if pc.individual.len() == n => pc.individual.clone(),
            (Some(u), true) => vec![u; n],
            _ => return None,
        };
        let mut per_level: Vec<Vec<String>> = Vec::with_capacity(self.values_per_level.len());
        for lv in &self.values_per_level {
            let vals = match (&lv.universal, &lv.individual) {
                (None, Some(ind)) if ind.roots.len() == n => {
                    let p = ind.prefix.as_deref().unwrap_or("");
                    let s = ind.suffix.as_deref().unwrap_or("");
                    ind.roots
                        .iter()
                        .map(|root| format!("{p}{root}{s}"))
                        .collect()
                }
                (Some(u), None) => vec![u.clone(); n],
                _ => return None,
            };
            per_level.push(vals);
        }
        Some(
            (0..n)
                .map(|i| (per_level.iter().map(|l| l[i].clone()).collect(), counts[i]))
                .collect(),
        )
    }
}

/// Requeue backoff state.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequeueState {
    /// Times requeued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// When the workload will be requeued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}

/// Pods of a pod set whose reservation can be released.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReclaimablePod {
    /// Pod set name.
    pub name: String,
    /// Reclaimable pods.
    pub count: i32,
}

/// State of one admission check.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    /// Check name.
    pub name: String,
    /// `Pending`, `Ready`, `Retry` or `Rejected`.
    pub state: String,
    /// Last transition.
    pub last_transition_time: Time,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// With state `Retry`: seconds after `lastTransitionTime` before the workload is
    /// requeued (`None` requeues at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<i32>,
    /// Times the check has moved to `Retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<i32>,
    /// Pod set changes suggested by the check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_set_updates: Vec<PodSetUpdate>,
}

/// Whether a preemption gate blocks preemption.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PreemptionGatePosition {
    /// The gate blocks the workload from preempting.
    Closed,
    /// The gate no longer blocks preemption.
    Open,
}

/// Observed state of one preemption gate.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGateState {
    /// Gate name, as in `spec.preemptionGates`.
    pub name: String,
    /// `Closed` or `Open`.
    pub position: PreemptionGatePosition,
    /// When the position last changed.
    pub last_transition_time: Time,
}

/// Additive changes to a pod set suggested by an admission check.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSetUpdate {
    /// Pod set name.
    pub name: String,
    /// Labels to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Node selector entries to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// Resources requested by one pod set when considered for admission.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSetRequest {
    /// Pod set name.
    pub name: String,
    /// Total resources.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
}

/// Scheduling statistics.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingStats {
    /// Eviction counts by reason and cause.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<WorkloadSchedulingStatsEviction>,
}

/// Eviction count for one reason/cause pair.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSchedulingStatsEviction {
    /// Eviction reason.
    pub reason: String,
    /// Finer-grained cause, may be empty.
    #[serde(default)]
    pub underlying_cause: String,
    /// Number of evictions.
    pub count: i32,
}

/// A failed node running pods of the workload.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyNode {
    /// Node name.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_kueue_v1beta2_slices() {
        // Example 2 of Kueue's topologyAssignment documentation.
        let yaml = r#"
domainCount: 2
valuesPerLevel:
- universal: block-1
- individual:
    prefix: rack-
    roots: ["1", "2"]
podCounts:
  individual: [4, 2]
"#;
        let s: TopologyAssignmentSlice = serde_norway::from_str(yaml).expect("valid");
        let d = s.domains().expect("well formed");
        assert_eq!(d[1], (vec!["block-1".to_string(), "rack-2".to_string()], 2));
        let json = serde_json::to_value(&s).expect("encodes");
        assert_eq!(json["podCounts"], serde_json::json!({"individual": [4, 2]}));
        assert_eq!(
            json["valuesPerLevel"][0],
            serde_json::json!({"universal": "block-1"})
        );
        let universal: TopologyAssignmentSlice = serde_norway::from_str(
            "domainCount: 3\nvaluesPerLevel: [{individual: {suffix: .n, roots: [a, b, c]}}]\npodCounts: {universal: 2}\n",
        )
        .expect("valid");
        let d = universal.domains().expect("well formed");
        assert_eq!(d[2], (vec!["c.n".to_string()], 2));
    }

    #[test]
    fn pre_release_shape_is_refused() {
        let old = "domainCount: 1\nvaluesPerLevel: [{universalValue: n1}]\nuniversalPodCount: 1\n";
        assert!(serde_norway::from_str::<TopologyAssignmentSlice>(old).is_err());
    }

    #[test]
    fn malformed_slice_is_none() {
        let s = TopologyAssignmentSlice {
            domain_count: 3,
            values_per_level: vec![],
            pod_counts: TopologyAssignmentSlicePodCounts {
                universal: None,
                individual: vec![1],
            },
        };
        assert!(s.domains().is_none());
        let both = TopologyAssignmentSlice {
            domain_count: 1,
            values_per_level: vec![TopologyAssignmentSliceLevelValues {
                universal: Some("a".into()),
                individual: Some(TopologyAssignmentSliceLevelIndividualValues {
                    roots: vec!["b".into()],
                    ..Default::default()
                }),
            }],
            pod_counts: TopologyAssignmentSlicePodCounts {
                universal: Some(1),
                individual: Vec::new(),
            },
        };
        assert!(
            both.domains().is_none(),
            "universal and individual are exclusive"
        );
    }

    #[test]
    fn admission_check_retry_fields_and_gate_states_parse() {
        let yaml = "name: prov\nstate: Retry\nlastTransitionTime: 2026-01-01T00:00:00Z\nmessage: ''\nretryCount: 2\nrequeueAfterSeconds: 30\n";
        let c: AdmissionCheckState = serde_norway::from_str(yaml).expect("valid");
        assert_eq!(
            (c.retry_count, c.requeue_after_seconds),
            (Some(2), Some(30))
        );
        let g: PreemptionGateState = serde_norway::from_str(
            "name: g\nposition: Open\nlastTransitionTime: 2026-01-01T00:00:00Z\n",
        )
        .expect("valid");
        assert_eq!(g.position, PreemptionGatePosition::Open);
        assert!(
            serde_norway::from_str::<PreemptionGateState>(
                "name: g\nposition: Ajar\nlastTransitionTime: 2026-01-01T00:00:00Z\n"
            )
            .is_err()
        );
    }
}
