//! v1beta1 Workload and its conversion to and from v1beta2.

use crate::api::tas_encoding;
use crate::api::workload::{self as v2wl, PodSet, PriorityClassRef};
use crate::api::workload_status::{self as v2ws, DelayedTopologyRequestState};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// v1beta1 `priorityClassSource` naming a Kueue WorkloadPriorityClass.
pub const WORKLOAD_PRIORITY_CLASS_SOURCE: &str = "kueue.x-k8s.io/workloadpriorityclass";
/// v1beta1 `priorityClassSource` naming a pod PriorityClass.
pub const POD_PRIORITY_CLASS_SOURCE: &str = "scheduling.k8s.io/priorityclass";

/// v1beta1 Workload spec.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "Workload",
    plural = "workloads",
    namespaced,
    shortname = "wl",
    status = "WorkloadStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// Pod sets (same shape as v1beta2).
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
    /// LocalQueue name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
    /// Priority class name; its kind is given by `priorityClassSource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Priority value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `kueue.x-k8s.io/workloadpriorityclass`, `scheduling.k8s.io/priorityclass` or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_source: Option<String>,
    /// Active flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// Maximum execution time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_execution_time_seconds: Option<i32>,
}

/// v1beta1 Workload status.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Admission with v1beta1 topology assignments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Requeue state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<v2ws::RequeueState>,
    /// Reclaimable pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reclaimable_pods: Vec<v2ws::ReclaimablePod>,
    /// Admission check states.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<v2ws::AdmissionCheckState>,
    /// Resource requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_requests: Vec<v2ws::PodSetRequest>,
    /// Accumulated admitted time, under Kueue's misspelt v1beta1 name.
    #[serde(
        default,
        rename = "accumulatedPastExexcutionTimeSeconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub accumulated_past_execution_time_seconds: Option<i32>,
    /// Scheduling statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_stats: Option<v2ws::SchedulingStats>,
    /// Nominated clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nominated_cluster_names: Vec<String>,
    /// Assigned cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Unhealthy nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_nodes: Vec<v2ws::UnhealthyNode>,
}

/// v1beta1 admission.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// ClusterQueue.
    pub cluster_queue: String,
    /// Per-pod-set assignments.
    #[serde(default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// v1beta1 pod set assignment.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// Pod set name.
    #[serde(default)]
    pub name: String,
    /// Flavor per resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
    /// Resource usage.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_usage: BTreeMap<String, Quantity>,
    /// Admitted count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Uncompressed topology assignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_assignment: Option<TopologyAssignment>,
    /// Delayed topology request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_topology_request: Option<DelayedTopologyRequestState>,
}

/// v1beta1 topology assignment: one entry per domain.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    /// Level keys.
    #[serde(default)]
    pub levels: Vec<String>,
    /// Domains.
    #[serde(default)]
    pub domains: Vec<TopologyDomainAssignment>,
}

/// Pods assigned to one domain.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyDomainAssignment {
    /// Label value per level.
    #[serde(default)]
    pub values: Vec<String>,
    /// Pod count.
    pub count: i32,
}

impl From<WorkloadSpec> for v2wl::WorkloadSpec {
    /// As in Kueue, a `priorityClassName` becomes a `priorityClassRef` only when
    /// `priorityClassSource` says which kind of class it names; without a (known) source the
    /// name is dropped and only `priority` carries over.
    fn from(s: WorkloadSpec) -> Self {
        let name = s.priority_class_name.unwrap_or_default();
        let priority_class_ref = match s.priority_class_source.as_deref() {
            Some(WORKLOAD_PRIORITY_CLASS_SOURCE) => Some(PriorityClassRef::workload(&name)),
            Some(POD_PRIORITY_CLASS_SOURCE) => Some(PriorityClassRef::pod(&name)),
            _ => None,
        };
        Self {
            pod_sets: s.pod_sets,
            queue_name: s.queue_name,
            priority_class_ref,
            priority: s.priority,
            active: s.active,
            maximum_execution_time_seconds: s.maximum_execution_time_seconds,
            preemption_gates: Vec::new(),
        }
    }
}

impl From<v2wl::WorkloadSpec> for WorkloadSpec {
    /// `preemptionGates` and the pod sets' `podsetSliceRequiredTopologyConstraints` have no
    /// v1beta1 field and are dropped, as in Kueue.
    fn from(s: v2wl::WorkloadSpec) -> Self {
        let (name, source) = match s.priority_class_ref {
            Some(r) if r.is_workload_priority_class() => (
                Some(r.name),
                Some(WORKLOAD_PRIORITY_CLASS_SOURCE.to_string()),
            ),
            Some(r) if r.is_pod_priority_class() => {
                (Some(r.name), Some(POD_PRIORITY_CLASS_SOURCE.to_string()))
            }
            _ => (None, None),
        };
        let mut pod_sets = s.pod_sets;
        for ps in &mut pod_sets {
            if let Some(tr) = ps.topology_request.as_mut() {
                tr.podset_slice_required_topology_constraints.clear();
            }
        }
        Self {
            pod_sets,
            queue_name: s.queue_name,
            priority_class_name: name,
            priority: s.priority,
            priority_class_source: source,
            active: s.active,
            maximum_execution_time_seconds: s.maximum_execution_time_seconds,
        }
    }
}

impl From<TopologyAssignment> for v2ws::TopologyAssignment {
    /// Kueue's encoding: one compressed slice per 100,000 domains, in the listed order.
    fn from(t: TopologyAssignment) -> Self {
        let level_count = t.levels.len();
        let domains: Vec<(Vec<String>, i32)> = t
            .domains
            .into_iter()
            .map(|d| {
                let mut values = d.values;
                values.resize(level_count, String::new());
                (values, d.count)
            })
            .collect();
        tas_encoding::encode(t.levels, &domains)
    }
}

impl From<v2ws::TopologyAssignment> for TopologyAssignment {
    /// Malformed slices (lengths that disagree) are skipped rather than guessed at.
    fn from(t: v2ws::TopologyAssignment) -> Self {
        let domains = t
            .slices
            .iter()
            .filter_map(v2ws::TopologyAssignmentSlice::domains)
            .flatten()
            .map(|(values, count)| TopologyDomainAssignment { values, count })
            .collect();
        Self {
            levels: t.levels,
            domains,
        }
    }
}

impl From<PodSetAssignment> for v2ws::PodSetAssignment {
    fn from(a: PodSetAssignment) -> Self {
        Self {
            name: if a.name.is_empty() {
                v2wl::DEFAULT_POD_SET_NAME.to_string()
            } else {
                a.name
            },
            flavors: a.flavors,
            resource_usage: a.resource_usage,
            count: a.count,
            topology_assignment: a.topology_assignment.map(Into::into),
            delayed_topology_request: a.delayed_topology_request,
        }
    }
}

impl From<v2ws::PodSetAssignment> for PodSetAssignment {
    fn from(a: v2ws::PodSetAssignment) -> Self {
        Self {
            name: a.name,
            flavors: a.flavors,
            resource_usage: a.resource_usage,
            count: a.count,
            topology_assignment: a.topology_assignment.map(Into::into),
            delayed_topology_request: a.delayed_topology_request,
        }
    }
}

impl From<WorkloadStatus> for v2ws::WorkloadStatus {
    fn from(s: WorkloadStatus) -> Self {
        Self {
            conditions: s.conditions,
            admission: s.admission.map(|a| v2ws::Admission {
                cluster_queue: a.cluster_queue,
                pod_set_assignments: a.pod_set_assignments.into_iter().map(Into::into).collect(),
            }),
            requeue_state: s.requeue_state,
            reclaimable_pods: s.reclaimable_pods,
            admission_checks: s.admission_checks,
            resource_requests: s.resource_requests,
            accumulated_past_execution_time_seconds: s.accumulated_past_execution_time_seconds,
            scheduling_stats: s.scheduling_stats,
            nominated_cluster_names: s.nominated_cluster_names,
            cluster_name: s.cluster_name,
            unhealthy_nodes: s.unhealthy_nodes,
            preemption_gates: Vec::new(),
        }
    }
}

impl From<v2ws::WorkloadStatus> for WorkloadStatus {
    /// `preemptionGates` has no v1beta1 field and is dropped, as in Kueue.
    fn from(s: v2ws::WorkloadStatus) -> Self {
        Self {
            conditions: s.conditions,
            admission: s.admission.map(|a| Admission {
                cluster_queue: a.cluster_queue,
                pod_set_assignments: a.pod_set_assignments.into_iter().map(Into::into).collect(),
            }),
            requeue_state: s.requeue_state,
            reclaimable_pods: s.reclaimable_pods,
            admission_checks: s.admission_checks,
            resource_requests: s.resource_requests,
            accumulated_past_execution_time_seconds: s.accumulated_past_execution_time_seconds,
            scheduling_stats: s.scheduling_stats,
            nominated_cluster_names: s.nominated_cluster_names,
            cluster_name: s.cluster_name,
            unhealthy_nodes: s.unhealthy_nodes,
        }
    }
}

impl From<Workload> for v2wl::Workload {
    fn from(o: Workload) -> Self {
        Self {
            metadata: o.metadata,
            spec: o.spec.into(),
            status: o.status.map(Into::into),
        }
    }
}

impl From<v2wl::Workload> for Workload {
    fn from(o: v2wl::Workload) -> Self {
        Self {
            metadata: o.metadata,
            spec: o.spec.into(),
            status: o.status.map(Into::into),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_class_source_maps_to_ref_and_back() {
        let yaml = "priorityClassName: high\npriorityClassSource: kueue.x-k8s.io/workloadpriorityclass\npriority: 10\npodSets: []\n";
        let v1: WorkloadSpec = serde_norway::from_str(yaml).expect("valid");
        let v2: v2wl::WorkloadSpec = v1.clone().into();
        assert_eq!(
            v2.priority_class_ref,
            Some(PriorityClassRef::workload("high"))
        );
        let back: WorkloadSpec = v2.into();
        assert_eq!(back, v1);

        let pod: WorkloadSpec = serde_norway::from_str(
            "priorityClassName: p\npriorityClassSource: scheduling.k8s.io/priorityclass\n",
        )
        .expect("valid");
        let v2: v2wl::WorkloadSpec = pod.into();
        assert_eq!(v2.priority_class_ref, Some(PriorityClassRef::pod("p")));
    }

    #[test]
    fn priority_class_name_without_source_is_dropped() {
        // Kueue converts the name only when priorityClassSource names its kind.
        for source in [
            "",
            "priorityClassSource: ''\n",
            "priorityClassSource: other/kind\n",
        ] {
            let yaml = format!("priorityClassName: p\npriority: 5\n{source}");
            let v1: WorkloadSpec = serde_norway::from_str(&yaml).expect("valid");
            let v2: v2wl::WorkloadSpec = v1.into();
            assert_eq!(v2.priority_class_ref, None, "{yaml}");
            assert_eq!(v2.priority, Some(5), "the priority value is kept");
        }
    }

    #[test]
    fn v1beta2_only_workload_fields_are_dropped_going_down() {
        let yaml = r#"
preemptionGates: [{name: quota-check}]
podSets:
- name: main
  count: 4
  topologyRequest:
    podsetSliceRequiredTopologyConstraints: [{topology: rack, size: 2}]
"#;
        let v2: v2wl::WorkloadSpec = serde_norway::from_str(yaml).expect("valid");
        assert_eq!(v2.preemption_gates[0].name, "quota-check");
        let v1: WorkloadSpec = v2.into();
        let json = serde_json::to_value(&v1).expect("encodes");
        assert!(json.get("preemptionGates").is_none());
        assert_eq!(json["podSets"][0]["topologyRequest"], serde_json::json!({}));
    }

    #[test]
    fn v1beta1_domains_get_kueue_compression() {
        let yaml = "levels: [kubernetes.io/hostname]\ndomains:\n- {values: [pool-a-node-1], count: 1}\n- {values: [pool-a-node-2], count: 1}\n";
        let v1: TopologyAssignment = serde_norway::from_str(yaml).expect("valid");
        let v2: v2ws::TopologyAssignment = v1.into();
        let json = serde_json::to_value(&v2).expect("encodes");
        assert_eq!(
            json["slices"],
            serde_json::json!([{
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "pool-a-node-", "roots": ["1", "2"]}}],
                "podCounts": {"universal": 1},
            }])
        );
    }

    #[test]
    fn topology_domains_round_trip() {
        let yaml = "levels: [block, rack]\ndomains:\n- {values: [b1, r1], count: 4}\n- {values: [b1, r2], count: 2}\n";
        let v1: TopologyAssignment = serde_norway::from_str(yaml).expect("valid");
        let v2: v2ws::TopologyAssignment = v1.clone().into();
        assert_eq!(v2.slices.len(), 1);
        assert_eq!(v2.slices[0].domain_count, 2);
        let back: TopologyAssignment = v2.into();
        assert_eq!(back, v1);
    }

    #[test]
    fn misspelt_status_field_is_read() {
        let s: WorkloadStatus =
            serde_norway::from_str("accumulatedPastExexcutionTimeSeconds: 7\n").expect("valid");
        let v2: v2ws::WorkloadStatus = s.into();
        assert_eq!(v2.accumulated_past_execution_time_seconds, Some(7));
    }
}
