//! Workload (kueue.x-k8s.io/v1beta2, namespaced, short name `wl`): the unit of admission.

use super::workload_status::WorkloadStatus;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Name of the single pod set of single-template jobs.
pub const DEFAULT_POD_SET_NAME: &str = "main";

/// Desired state of a Workload: its pod sets, queue and priority.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
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
    /// Homogeneous sets of pods (1..=8), immutable.
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
    /// LocalQueue in the workload's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
    /// Priority class the priority was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_ref: Option<PriorityClassRef>,
    /// Priority; higher is more important. Required when `priorityClassRef` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `false` deactivates (and evicts) the workload; defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// Admitted time after which the workload is deactivated (>= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_execution_time_seconds: Option<i32>,
    /// Gates (at most 8) that must all open before the workload may preempt others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemption_gates: Vec<PreemptionGate>,
}

impl WorkloadSpec {
    /// `active` with Kueue's default (true).
    pub fn is_active(&self) -> bool {
        self.active.unwrap_or(true)
    }

    /// Queue name, treating an empty string as unset.
    pub fn queue(&self) -> Option<&str> {
        self.queue_name.as_deref().filter(|q| !q.is_empty())
    }
}

/// Reference to a WorkloadPriorityClass or a pod PriorityClass.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClassRef {
    /// `kueue.x-k8s.io` or `scheduling.k8s.io`.
    pub group: String,
    /// `WorkloadPriorityClass` or `PriorityClass`.
    pub kind: String,
    /// Name of the class.
    pub name: String,
}

/// API group of WorkloadPriorityClass references.
pub const WORKLOAD_PRIORITY_CLASS_GROUP: &str = "kueue.x-k8s.io";
/// Kind of WorkloadPriorityClass references.
pub const WORKLOAD_PRIORITY_CLASS_KIND: &str = "WorkloadPriorityClass";
/// API group of pod PriorityClass references.
pub const POD_PRIORITY_CLASS_GROUP: &str = "scheduling.k8s.io";
/// Kind of pod PriorityClass references.
pub const POD_PRIORITY_CLASS_KIND: &str = "PriorityClass";

impl PriorityClassRef {
    /// Reference to a Kueue WorkloadPriorityClass.
    pub fn workload(name: &str) -> Self {
        Self {
            group: WORKLOAD_PRIORITY_CLASS_GROUP.into(),
            kind: WORKLOAD_PRIORITY_CLASS_KIND.into(),
            name: name.into(),
        }
    }

    /// Reference to a core scheduling.k8s.io PriorityClass.
    pub fn pod(name: &str) -> Self {
        Self {
            group: POD_PRIORITY_CLASS_GROUP.into(),
            kind: POD_PRIORITY_CLASS_KIND.into(),
            name: name.into(),
        }
    }

    /// Whether this points at a WorkloadPriorityClass.
    pub fn is_workload_priority_class(&self) -> bool {
        self.group == WORKLOAD_PRIORITY_CLASS_GROUP && self.kind == WORKLOAD_PRIORITY_CLASS_KIND
    }

    /// Whether this points at a pod (scheduling.k8s.io) PriorityClass.
    pub fn is_pod_priority_class(&self) -> bool {
        self.group == POD_PRIORITY_CLASS_GROUP && self.kind == POD_PRIORITY_CLASS_KIND
    }
}

/// A named gate on a workload's ability to preempt; closed until its status says `Open`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGate {
    /// Gate name (1..=63 characters), unique within the workload.
    pub name: String,
}

/// A set of identical pods.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// Pod set name (DNS label), default `main`.
    #[serde(default = "default_pod_set_name")]
    pub name: String,
    /// Pod template; only labels and annotations are allowed in its metadata.
    #[serde(default)]
    pub template: PodTemplateSpec,
    /// Number of pods, default 1.
    #[serde(default = "default_count")]
    pub count: i32,
    /// Minimum acceptable count for partial admission (one pod set at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<i32>,
    /// Topology-aware scheduling request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_request: Option<PodSetTopologyRequest>,
}

impl Default for PodSet {
    fn default() -> Self {
        Self {
            name: default_pod_set_name(),
            template: PodTemplateSpec::default(),
            count: default_count(),
            min_count: None,
            topology_request: None,
        }
    }
}

fn default_pod_set_name() -> String {
    DEFAULT_POD_SET_NAME.to_string()
}

fn default_count() -> i32 {
    1
}

/// Topology request of a pod set (from the `podset-*-topology` annotations).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodSetTopologyRequest {
    /// All pods must land in one domain of this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<String>,
    /// Prefer one domain of this level, climbing up when it does not fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
    /// Use TAS capacity accounting without compactness constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconstrained: Option<bool>,
    /// Label carrying the pod index (e.g. `batch.kubernetes.io/job-completion-index`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_index_label: Option<String>,
    /// Label carrying the index of replicated jobs within the pod set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_index_label: Option<String>,
    /// Number of replicated jobs within the pod set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_count: Option<i32>,
    /// Pod sets sharing a group name get the same flavor and domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_group_name: Option<String>,
    /// Level each slice must fit in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_required_topology: Option<String>,
    /// Number of pods per slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_size: Option<i32>,
    /// Slice layers, coarsest first (at most 3); exclusive with the two fields above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub podset_slice_required_topology_constraints: Vec<PodsetSliceRequiredTopologyConstraint>,
}

/// One layer of slice topology: groups of `size` pods, each inside one `topology` domain.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodsetSliceRequiredTopologyConstraint {
    /// Topology level (node label key) each group must fit in.
    pub topology: String,
    /// Pods per group (>= 1).
    pub size: i32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn pod_set_defaults() {
        let p: PodSet = serde_norway::from_str("template: {}\n").expect("valid");
        assert_eq!(p.name, "main");
        assert_eq!(p.count, 1);
        assert_eq!(PodSet::default().name, "main");
    }

    #[test]
    fn spec_parses_and_defaults() {
        let yaml = r#"
queueName: user-queue
priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
priority: 100
podSets:
- name: workers
  count: 4
  minCount: 2
  topologyRequest: {required: rack}
  template:
    spec:
      containers:
      - name: c
        image: busybox
        resources: {requests: {cpu: "1"}}
"#;
        let s: WorkloadSpec = serde_norway::from_str(yaml).expect("valid");
        assert!(s.is_active());
        assert_eq!(s.queue(), Some("user-queue"));
        assert!(
            s.priority_class_ref
                .as_ref()
                .is_some_and(|r| r.is_workload_priority_class())
        );
        assert_eq!(s.pod_sets[0].min_count, Some(2));
        assert_eq!(Workload::plural(&()), "workloads");
        assert!(
            crate::api::manifest::strict::strict_from_yaml::<WorkloadSpec>("priorityClassName: x")
                .is_none()
        );
    }
}
