//! Kueue's label, annotation, scheduling-gate and condition strings, spelled exactly as Kueue does.

/// API group of all Kueue kinds.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io";
/// Stored (hub) API version.
pub const API_VERSION_V1BETA2: &str = "kueue.x-k8s.io/v1beta2";
/// Older served API version, converted to v1beta2 on read.
pub const API_VERSION_V1BETA1: &str = "kueue.x-k8s.io/v1beta1";
/// Alpha API version that once served Cohort and Topology.
pub const API_VERSION_V1ALPHA1: &str = "kueue.x-k8s.io/v1alpha1";

// ---- labels ----

/// Label on a job (or workload) naming its LocalQueue.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Label on a job naming its WorkloadPriorityClass.
pub const PRIORITY_CLASS_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// Label on a job naming a pre-built Workload to use.
pub const PREBUILT_WORKLOAD_LABEL: &str = "kueue.x-k8s.io/prebuilt-workload-name";
/// Label on a Workload holding the UID of its owner job.
pub const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";
/// Label on a job holding its maximum execution time in seconds.
pub const MAX_EXEC_TIME_SECONDS_LABEL: &str = "kueue.x-k8s.io/max-exec-time-seconds";
/// Label on pods managed by Kueue (value `true`).
pub const MANAGED_LABEL: &str = "kueue.x-k8s.io/managed";
/// Label on pods forming a plain-pod group.
pub const POD_GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// Label with a pod's index inside its pod group.
pub const POD_GROUP_POD_INDEX_LABEL: &str = "kueue.x-k8s.io/pod-group-pod-index";
/// Deprecated label set on TAS-admitted pod templates; kept for reading only.
pub const TAS_LABEL: &str = "kueue.x-k8s.io/tas";

// ---- annotations ----

/// Annotation with the total number of pods of a pod group.
pub const POD_GROUP_TOTAL_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";
/// Annotation enabling fast admission of a pod group.
pub const POD_GROUP_FAST_ADMISSION_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-fast-admission";
/// Annotation marking a pod group as serving (never finishes).
pub const POD_GROUP_SERVING_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-serving";
/// Annotation naming the label that carries a pod's group index.
pub const POD_GROUP_POD_INDEX_LABEL_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-pod-index-label";
/// Annotation (`false`) making a pod group non-retriable.
pub const RETRIABLE_IN_GROUP_ANNOTATION: &str = "kueue.x-k8s.io/retriable-in-group";
/// Annotation with the minimum parallelism accepted under partial admission.
pub const JOB_MIN_PARALLELISM_ANNOTATION: &str = "kueue.x-k8s.io/job-min-parallelism";
/// Annotation (`true`) keeping completions equal to parallelism under partial admission.
pub const JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: &str =
    "kueue.x-k8s.io/job-completions-equal-parallelism";
/// Annotation naming a parent Workload (deprecated upstream).
pub const PARENT_WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/parent-workload";
/// Annotation recording the pod sets' original node selectors and counts.
pub const ORIGINAL_POD_SETS_INFO_ANNOTATION: &str = "kueue.x-k8s.io/original-pod-sets-info";
/// Label on a started job's pod template naming its PodSet (the ungater finds pods by it).
pub const PODSET_LABEL: &str = "kueue.x-k8s.io/podset";
/// Pod label naming the LocalQueue of its admitted workload (Kueue's
/// `AssignQueueLabelsForPods`, beta and on by default).
pub const LOCAL_QUEUE_LABEL: &str = "kueue.x-k8s.io/local-queue-name";
/// Pod label naming the ClusterQueue that admitted its workload (same feature; only when
/// the name is a DNS-1123 label).
pub const CLUSTER_QUEUE_LABEL: &str = "kueue.x-k8s.io/cluster-queue-name";
/// Annotation on a pod template naming the admitted Workload.
pub const WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/workload";
/// Pod-template annotation: all pods in one domain of this level.
pub const PODSET_REQUIRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-required-topology";
/// Pod-template annotation: preferably in one domain of this level.
pub const PODSET_PREFERRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// Pod-template annotation (`true`): TAS without compactness constraints.
pub const PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-unconstrained-topology";
/// Pod-template annotation: each slice in one domain of this level.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-slice-required-topology";
/// Pod-template annotation: pods per slice (required with the slice topology).
pub const PODSET_SLICE_SIZE_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-size";
/// Pod-template annotation: pod sets of a group share flavor and domain.
pub const PODSET_GROUP_NAME_ANNOTATION: &str = "kueue.x-k8s.io/podset-group-name";
/// Pod-template annotation: the first pod index of the pod set, for the topology
/// ungater's ranks (an MPIJob's workers when its launcher runs as a worker).
pub const POD_INDEX_OFFSET_ANNOTATION: &str = "kueue.x-k8s.io/pod-index-offset";
/// Topology annotation naming the node label used for node avoidance.
pub const NODE_AVOIDANCE_LABEL_ANNOTATION: &str = "kueue.x-k8s.io/node-avoidance-label";
/// Prefix of job annotations copied to its Workload and passed to ProvisioningRequests
/// (Kueue's `ProvReqAnnotationPrefix`).
pub const PROVREQ_ANNOTATION_PREFIX: &str = "provreq.kueue.x-k8s.io/";

// ---- gates and finalizers ----

/// Scheduling gate holding plain pods until their workload is admitted.
pub const ADMISSION_SCHEDULING_GATE: &str = "kueue.x-k8s.io/admission";
/// Scheduling gate holding pods until topology node selectors are injected.
pub const TOPOLOGY_SCHEDULING_GATE: &str = "kueue.x-k8s.io/topology";
/// Scheduling gate holding pods of an elastic job slice until admitted.
pub const ELASTIC_JOB_SCHEDULING_GATE: &str = "kueue.x-k8s.io/elastic-job";
/// Kueue's elastic-job annotation (value `"true"`): the job may scale and is admitted
/// in workload slices (ElasticJobsViaWorkloadSlices, on by default since Kueue 0.18).
pub const ELASTIC_JOB_ANNOTATION: &str = "kueue.x-k8s.io/elastic-job";
/// Kueue's value that turns elastic jobs on.
pub const ELASTIC_JOB_ANNOTATION_VALUE: &str = "true";

/// The warning for an object that asks for Kueue's elastic jobs, which kuota does not
/// run: said by `kuota check` and by the job webhook, so nobody relies on it silently.
pub fn elastic_job_warning(kind: &str, namespace: &str, name: &str) -> String {
    format!(
        "{kind} {namespace}/{name}: metadata.annotations[{ELASTIC_JOB_ANNOTATION}]: \"{ELASTIC_JOB_ANNOTATION_VALUE}\" asks for Kueue's elastic jobs (workload slices), which kuota does not support: the job is admitted at its size when created, and scaling it does not resize its admission"
    )
}

/// Finalizer on objects still in use (flavors, queues, workloads).
pub const RESOURCE_IN_USE_FINALIZER: &str = "kueue.x-k8s.io/resource-in-use";
/// Finalizer on pods managed by Kueue.
pub const MANAGED_POD_FINALIZER: &str = "kueue.x-k8s.io/managed";

// ---- well-known values ----

/// Label of the per-node topology level; only allowed as the last level.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Pod index label of batch Jobs.
pub const JOB_COMPLETION_INDEX_LABEL: &str = "batch.kubernetes.io/job-completion-index";
/// Maximum number of pod sets in a Workload. Kueue raised it from 8 to 10 and then to 18
/// (kubernetes-sigs/kueue PR 12819); manifests written for either limit stay valid.
pub const MAX_POD_SETS: usize = 18;
/// Maximum number of resource groups in a ClusterQueue or Cohort.
pub const MAX_RESOURCE_GROUPS: usize = 16;
/// Maximum flavors in one resource group.
pub const MAX_FLAVORS_PER_GROUP: usize = 64;
/// Maximum flavors across all resource groups.
pub const MAX_FLAVORS_TOTAL: usize = 256;
/// Maximum resources covered by one resource group.
pub const MAX_RESOURCES_PER_GROUP: usize = 64;
/// Maximum topology levels.
pub const MAX_TOPOLOGY_LEVELS: usize = 16;

// ---- Workload condition types ----

/// Condition type: quota is reserved in a ClusterQueue.
pub const WORKLOAD_QUOTA_RESERVED: &str = "QuotaReserved";
/// Condition type: quota reserved and all admission checks ready.
pub const WORKLOAD_ADMITTED: &str = "Admitted";
/// Condition type: the workload finished (succeeded or failed).
pub const WORKLOAD_FINISHED: &str = "Finished";
/// Condition type: enough pods are ready.
pub const WORKLOAD_PODS_READY: &str = "PodsReady";
/// Condition type: the workload was evicted.
pub const WORKLOAD_EVICTED: &str = "Evicted";
/// Condition type: the workload was preempted.
pub const WORKLOAD_PREEMPTED: &str = "Preempted";
/// Condition type: the workload was requeued after eviction.
pub const WORKLOAD_REQUEUED: &str = "Requeued";
/// Condition type: the workload should be deactivated.
pub const WORKLOAD_DEACTIVATION_TARGET: &str = "DeactivationTarget";

// ---- Workload condition reasons ----

/// QuotaReserved=False reason: waiting for quota.
pub const REASON_PENDING: &str = "Pending";
/// Admitted=False reason: no quota reserved (Kueue's `WorkloadAdmittedReasonNoReservation`).
pub const REASON_NO_RESERVATION: &str = "NoReservation";
/// QuotaReserved=False reason: queue missing or inactive.
pub const REASON_INADMISSIBLE: &str = "Inadmissible";
/// QuotaReserved=True reason.
pub const REASON_QUOTA_RESERVED: &str = "QuotaReserved";
/// Admitted=True reason.
pub const REASON_ADMITTED: &str = "Admitted";
/// Evicted reason: preempted by a higher-priority workload.
pub const REASON_EVICTED_BY_PREEMPTION: &str = "Preempted";
/// Evicted reason: PodsReady timeout.
pub const REASON_PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";
/// Evicted reason: an admission check failed.
pub const REASON_ADMISSION_CHECK: &str = "AdmissionCheck";
/// Evicted reason: ClusterQueue stopped.
pub const REASON_CLUSTER_QUEUE_STOPPED: &str = "ClusterQueueStopped";
/// Evicted reason: LocalQueue stopped.
pub const REASON_LOCAL_QUEUE_STOPPED: &str = "LocalQueueStopped";
/// Evicted reason: node failures.
pub const REASON_NODE_FAILURES: &str = "NodeFailures";
/// Evicted reason: replaced by a new workload slice.
pub const REASON_WORKLOAD_SLICE_REPLACED: &str = "WorkloadSliceReplaced";
/// Evicted reason: `spec.active` set to false.
pub const REASON_DEACTIVATED: &str = "Deactivated";
/// Requeued reason: reactivated.
pub const REASON_REACTIVATED: &str = "Reactivated";
/// Requeued reason: backoff finished.
pub const REASON_BACKOFF_FINISHED: &str = "BackoffFinished";
/// Requeued reason: ClusterQueue restarted.
pub const REASON_CLUSTER_QUEUE_RESTARTED: &str = "ClusterQueueRestarted";
/// Requeued reason: LocalQueue restarted.
pub const REASON_LOCAL_QUEUE_RESTARTED: &str = "LocalQueueRestarted";
/// Deactivation reason: too many requeues.
pub const REASON_REQUEUING_LIMIT_EXCEEDED: &str = "RequeuingLimitExceeded";
/// Deactivation reason: maximum execution time exceeded.
pub const REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED: &str = "MaximumExecutionTimeExceeded";
/// Evicted reason of a workload out of execution time: `Deactivated` with its underlying
/// cause appended, as Kueue's `ReasonWithCause` joins them.
pub const REASON_DEACTIVATED_MAX_EXECUTION: &str = "DeactivatedDueToMaximumExecutionTimeExceeded";
/// The Evicted message Kueue writes with [`REASON_DEACTIVATED_MAX_EXECUTION`].
pub const MESSAGE_DEACTIVATED_MAX_EXECUTION: &str =
    "The workload is deactivated due to exceeding the maximum execution time";
/// Evicted reason of a workload deactivated by a Rejected admission check: `Deactivated`
/// with the `AdmissionCheck` cause appended (Kueue's `ReasonWithCause`).
pub const REASON_DEACTIVATED_ADMISSION_CHECK: &str = "DeactivatedDueToAdmissionCheck";
/// Admitted=False reason while quota is reserved and not every check is Ready (Kueue's
/// `UnsatisfiedChecks`, its reason without the UnadmittedWorkloadsObservability gate).
pub const REASON_UNSATISFIED_CHECKS: &str = "UnsatisfiedChecks";
/// AdmissionCheck condition type: its controller is ready to evaluate checks.
pub const ADMISSION_CHECK_ACTIVE: &str = "Active";
/// Finished reason: succeeded.
pub const REASON_SUCCEEDED: &str = "Succeeded";
/// Finished reason: failed.
pub const REASON_FAILED: &str = "Failed";
/// PodsReady=False reason: not ready since admission.
pub const REASON_WAIT_FOR_START: &str = "WaitForStart";
/// PodsReady=False reason: a pod failed after start.
pub const REASON_WAIT_FOR_RECOVERY: &str = "WaitForRecovery";
/// PodsReady=True reason: started.
pub const REASON_STARTED: &str = "Started";
/// PodsReady=True reason: recovered.
pub const REASON_RECOVERED: &str = "Recovered";

/// Preempted reason: by priority inside the ClusterQueue.
pub const PREEMPTED_IN_CLUSTER_QUEUE: &str = "InClusterQueue";
/// Preempted reason: a cohort member reclaimed its nominal quota.
pub const PREEMPTED_IN_COHORT_RECLAMATION: &str = "InCohortReclamation";
/// Preempted reason: fair sharing in the cohort.
pub const PREEMPTED_IN_COHORT_FAIR_SHARING: &str = "InCohortFairSharing";
/// Preempted reason: reclaimed by a borrowing workload (borrowWithinCohort).
pub const PREEMPTED_IN_COHORT_RECLAIM_WHILE_BORROWING: &str = "InCohortReclaimWhileBorrowing";

// ---- ClusterQueue / LocalQueue conditions ----

/// ClusterQueue/LocalQueue condition type: active.
pub const QUEUE_ACTIVE: &str = "Active";
/// Active reason: ready.
pub const CQ_REASON_READY: &str = "Ready";
/// Active=False reason: stopped.
pub const CQ_REASON_STOPPED: &str = "Stopped";
/// Active=False reason: being deleted.
pub const CQ_REASON_TERMINATING: &str = "Terminating";
/// Active=False reason: a flavor is missing.
pub const CQ_REASON_FLAVOR_NOT_FOUND: &str = "FlavorNotFound";
/// Active=False reason: a topology is missing.
pub const CQ_REASON_TOPOLOGY_NOT_FOUND: &str = "TopologyNotFound";
/// Active=False reason: an admission check is missing.
pub const CQ_REASON_ADMISSION_CHECK_NOT_FOUND: &str = "AdmissionCheckNotFound";
/// Active=False reason: an admission check is inactive.
pub const CQ_REASON_ADMISSION_CHECK_INACTIVE: &str = "AdmissionCheckInactive";
/// Active reason: unknown.
pub const CQ_REASON_UNKNOWN: &str = "Unknown";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_live_in_the_kueue_domain() {
        for k in [
            QUEUE_NAME_LABEL,
            PRIORITY_CLASS_LABEL,
            POD_GROUP_NAME_LABEL,
            POD_GROUP_TOTAL_COUNT_ANNOTATION,
            JOB_MIN_PARALLELISM_ANNOTATION,
            ADMISSION_SCHEDULING_GATE,
            PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
        ] {
            assert!(k.starts_with("kueue.x-k8s.io/"), "{k}");
        }
    }
}
