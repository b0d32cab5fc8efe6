//! A partial, borrowing view of any job-like object (Job, JobSet, PyTorchJob, MPIJob,
//! RayJob, RayCluster, Pod): only the fields admission and the integrations read.
//!
//! Why a view instead of k8s-openapi types or `serde_json::Value`: the job CRDs are not in
//! k8s-openapi, and building a full `Value` (or a typed Job) costs several times more than
//! skipping the fields nobody reads. Unknown fields are skipped without allocation; strings
//! borrow from the request body when they contain no escapes.
//!
//! The spec is one union struct ([`SpecView`]) holding every spec field any supported kind
//! uses; the field names of the kinds do not collide, so one type decodes them all, and each
//! kind's module picks its own fields (see the kind modules' accessors). The same view
//! decodes from request bytes (webhook) and from a `&serde_json::Value` (controller).

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

/// A string borrowed from the input when possible (no escapes), owned otherwise.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    /// The string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An owned copy that no longer borrows from the input.
    pub fn into_owned(self) -> Str<'static> {
        Str(Cow::Owned(self.0.into_owned()))
    }
}

impl Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Str<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'a> From<&'a str> for Str<'a> {
    fn from(s: &'a str) -> Self {
        Str(Cow::Borrowed(s))
    }
}

impl Serialize for Str<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// A string map (labels, annotations, node selectors, resource lists).
pub type StrMap<'a> = BTreeMap<Str<'a>, Str<'a>>;

/// The parts of a job-like object admission reads.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct JobObject<'a> {
    /// `apiVersion`, e.g. `batch/v1`.
    #[serde(borrow, default)]
    pub api_version: Option<Str<'a>>,
    /// `kind`, e.g. `Job`.
    #[serde(borrow, default)]
    pub kind: Option<Str<'a>>,
    /// Object metadata (`metadata.present` tells whether the object had any).
    #[serde(borrow, default, deserialize_with = "present_meta")]
    pub metadata: MetaView<'a>,
    /// The spec; its shape depends on the kind (see [`SpecView`]).
    #[serde(borrow, default, deserialize_with = "opt_map_only")]
    pub spec: Option<Box<SpecView<'a>>>,
    /// The status the kind's operator writes; its shape depends on the kind (see
    /// [`StatusView`]). A status that is not an object reads as none.
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<Box<StatusView>>,
}

/// Decodes a member leniently: a status is what a cluster sends, and a field of an
/// unexpected type reads as unset instead of making the whole job unreadable.
fn lenient<'de, D: Deserializer<'de>, T: de::DeserializeOwned + Default>(
    d: D,
) -> Result<T, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// Decodes `metadata` and records that it was there, so patches never add below a
/// missing `/metadata`.
fn present_meta<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<MetaView<'a>, D::Error> {
    let mut m: MetaView<'a> = map_only(d)?;
    m.present = true;
    Ok(m)
}

/// Decodes a struct from a JSON object only. Derived struct decoding also accepts an array
/// of field values (`"spec": []` would become an empty spec), and patches that add below
/// such a member would not apply.
fn map_only<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    struct V<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_map(V(PhantomData))
}

/// [`map_only`] for an optional member (`null` is `None`). The webhook decodes a review's
/// objects with it too: an object sent as an array must be refused, not read field by field.
pub(crate) fn opt_map_only<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    struct V<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Option<T>, D2::Error> {
            map_only(d).map(Some)
        }
    }
    d.deserialize_option(V(PhantomData))
}

/// Object metadata fields admission reads.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct MetaView<'a> {
    /// Whether the object had a `metadata` member (set by [`JobObject`] decoding).
    #[serde(skip)]
    pub present: bool,
    /// Name (may be empty with `generateName` on CREATE).
    #[serde(borrow, default)]
    pub name: Option<Str<'a>>,
    /// Name prefix the API server completes.
    #[serde(borrow, default)]
    pub generate_name: Option<Str<'a>>,
    /// Namespace.
    #[serde(borrow, default)]
    pub namespace: Option<Str<'a>>,
    /// UID (empty on CREATE).
    #[serde(borrow, default)]
    pub uid: Option<Str<'a>>,
    /// Labels; `None` when the object has no `labels` map.
    #[serde(borrow, default)]
    pub labels: Option<StrMap<'a>>,
    /// Annotations; `None` when the object has no `annotations` map.
    #[serde(borrow, default)]
    pub annotations: Option<StrMap<'a>>,
    /// Owner references.
    #[serde(borrow, default)]
    pub owner_references: Option<Vec<OwnerRefView<'a>>>,
    /// Finalizers; `None` when absent.
    #[serde(borrow, default)]
    pub finalizers: Option<Vec<Str<'a>>>,
}

impl MetaView<'_> {
    /// A label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(Str::as_str)
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(Str::as_str)
    }

    /// Whether the finalizer is present.
    pub fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers
            .as_ref()
            .is_some_and(|fs| fs.iter().any(|x| x.as_str() == f))
    }

    /// The controller owner reference (`controller: true`), like `metav1.GetControllerOf`.
    pub fn controller_owner(&self) -> Option<&OwnerRefView<'_>> {
        self.owner_references
            .as_ref()?
            .iter()
            .find(|o| o.controller == Some(true))
    }

    /// Name, or `generateName` followed by `*` when the name is not yet assigned.
    pub fn display_name(&self) -> String {
        match (&self.name, &self.generate_name) {
            (Some(n), _) if !n.is_empty() => n.to_string(),
            (_, Some(g)) => format!("{g}*"),
            _ => String::new(),
        }
    }
}

/// An owner reference.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRefView<'a> {
    /// Owner API version, e.g. `jobset.x-k8s.io/v1alpha2`.
    #[serde(borrow, default)]
    pub api_version: Str<'a>,
    /// Owner kind.
    #[serde(borrow, default)]
    pub kind: Str<'a>,
    /// Owner name.
    #[serde(borrow, default)]
    pub name: Str<'a>,
    /// Whether this owner is the managing controller.
    #[serde(default)]
    pub controller: Option<bool>,
}

/// Every spec field any supported kind reads, in one struct.
///
/// - batch/v1 Job: `suspend`, `parallelism`, `completions`, `completionMode`, `template`.
/// - JobSet: `suspend`, `replicatedJobs`, `managedBy`.
/// - PyTorchJob: `pytorchReplicaSpecs`, `runPolicy`.
/// - MPIJob: `mpiReplicaSpecs`, `runPolicy`, `runLauncherAsWorker`.
/// - RayJob: `suspend`, `rayClusterSpec` (itself a RayCluster spec), `clusterSelector`,
///   `shutdownAfterJobFinishes`.
/// - RayCluster: `suspend`, `headGroupSpec`, `workerGroupSpecs`, `enableInTreeAutoscaling`.
/// - Pod (and pod templates): `containers`, `initContainers`, `overhead`, `nodeSelector`,
///   `affinity`, `schedulingGates`, `priorityClassName`, `restartPolicy`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct SpecView<'a> {
    /// Job/JobSet/RayJob/RayCluster suspension flag.
    #[serde(default)]
    pub suspend: Option<bool>,
    /// Job parallelism.
    #[serde(default)]
    pub parallelism: Option<i32>,
    /// Job completions.
    #[serde(default)]
    pub completions: Option<i32>,
    /// Job completion mode (`Indexed`/`NonIndexed`).
    #[serde(borrow, default)]
    pub completion_mode: Option<Str<'a>>,
    /// Job pod template.
    #[serde(borrow, default)]
    pub template: Option<PodTemplateView<'a>>,
    /// JobSet replicated jobs.
    #[serde(borrow, default)]
    pub replicated_jobs: Option<Vec<ReplicatedJobView<'a>>>,
    /// Controller managing the object (JobSet, Job).
    #[serde(borrow, default)]
    pub managed_by: Option<Str<'a>>,
    /// PyTorchJob replica specs by replica type (`Master`, `Worker`).
    #[serde(borrow, default)]
    pub pytorch_replica_specs: Option<BTreeMap<Str<'a>, ReplicaSpecView<'a>>>,
    /// MPIJob replica specs by replica type (`Launcher`, `Worker`).
    #[serde(borrow, default)]
    pub mpi_replica_specs: Option<BTreeMap<Str<'a>, ReplicaSpecView<'a>>>,
    /// MPIJob: the launcher runs a worker process too.
    #[serde(default)]
    pub run_launcher_as_worker: Option<bool>,
    /// Kubeflow run policy.
    #[serde(default, deserialize_with = "opt_map_only")]
    pub run_policy: Option<RunPolicyView>,
    /// RayJob: the cluster to create.
    #[serde(borrow, default)]
    pub ray_cluster_spec: Option<Box<SpecView<'a>>>,
    /// RayJob: use an existing cluster instead.
    #[serde(borrow, default)]
    pub cluster_selector: Option<StrMap<'a>>,
    /// RayJob: delete the cluster when the job ends.
    #[serde(default)]
    pub shutdown_after_job_finishes: Option<bool>,
    /// RayJob: how the job is submitted (`K8sJobMode`, the default, `HTTPMode`, ...).
    #[serde(borrow, default)]
    pub submission_mode: Option<Str<'a>>,
    /// RayJob: the submitter Job's pod template (K8sJobMode).
    #[serde(borrow, default)]
    pub submitter_pod_template: Option<PodTemplateView<'a>>,
    /// RayCluster head group.
    #[serde(borrow, default)]
    pub head_group_spec: Option<GroupSpecView<'a>>,
    /// RayCluster worker groups.
    #[serde(borrow, default)]
    pub worker_group_specs: Option<Vec<GroupSpecView<'a>>>,
    /// RayCluster autoscaling.
    #[serde(default)]
    pub enable_in_tree_autoscaling: Option<bool>,
    /// TrainJob: patches other controllers keep on its runtime, each named by its manager.
    #[serde(default, deserialize_with = "lenient")]
    pub runtime_patches: Vec<RuntimePatchView>,
    /// LeaderWorkerSet: groups (default 1).
    #[serde(default)]
    pub replicas: Option<i32>,
    /// LeaderWorkerSet: one group's templates and size.
    #[serde(borrow, default)]
    pub leader_worker_template: Option<LeaderWorkerTemplateView<'a>>,
    /// Pod containers.
    #[serde(borrow, default)]
    pub containers: Option<Vec<ContainerView<'a>>>,
    /// Pod init containers.
    #[serde(borrow, default)]
    pub init_containers: Option<Vec<ContainerView<'a>>>,
    /// Pod overhead.
    #[serde(borrow, default)]
    pub overhead: Option<StrMap<'a>>,
    /// Pod node selector.
    #[serde(borrow, default)]
    pub node_selector: Option<StrMap<'a>>,
    /// Pod affinity (node affinity only).
    #[serde(borrow, default)]
    pub affinity: Option<AffinityView<'a>>,
    /// Pod scheduling gates.
    #[serde(borrow, default)]
    pub scheduling_gates: Option<Vec<GateView<'a>>>,
    /// Pod priority class.
    #[serde(borrow, default)]
    pub priority_class_name: Option<Str<'a>>,
    /// Pod restart policy (a Job's pods may not use `Always`).
    #[serde(borrow, default)]
    pub restart_policy: Option<Str<'a>>,
}

/// A pod template (`metadata` + pod `spec`).
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateView<'a> {
    /// Template metadata (TAS annotations live here).
    #[serde(borrow, default)]
    pub metadata: Option<MetaView<'a>>,
    /// Pod spec.
    #[serde(borrow, default)]
    pub spec: Option<Box<SpecView<'a>>>,
}

/// A LeaderWorkerSet's group: its size and its leader's and workers' templates.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplateView<'a> {
    /// Pods per group, leader included (default 1).
    #[serde(default)]
    pub size: Option<i32>,
    /// The leader's template; absent: the leader runs the workers' template.
    #[serde(borrow, default)]
    pub leader_template: Option<PodTemplateView<'a>>,
    /// The workers' template.
    #[serde(borrow, default)]
    pub worker_template: Option<PodTemplateView<'a>>,
}

/// A JobSet replicated job.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJobView<'a> {
    /// Replicated job name (the pod set name).
    #[serde(borrow, default)]
    pub name: Str<'a>,
    /// Number of Job copies, default 1.
    #[serde(default)]
    pub replicas: Option<i32>,
    /// The Job template (`metadata` + Job `spec`).
    #[serde(borrow, default)]
    pub template: Option<PodTemplateView<'a>>,
}

/// A Kubeflow replica spec.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpecView<'a> {
    /// Replicas, default 1.
    #[serde(default)]
    pub replicas: Option<i32>,
    /// Pod template.
    #[serde(borrow, default)]
    pub template: Option<PodTemplateView<'a>>,
}

/// Kubeflow run policy (`suspend` and the gang scheduler's priority class).
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicyView {
    /// Suspension flag.
    #[serde(default)]
    pub suspend: Option<bool>,
    /// Gang-scheduling settings.
    #[serde(default, deserialize_with = "opt_map_only")]
    pub scheduling_policy: Option<SchedulingPolicyView>,
}

/// A Kubeflow run policy's gang-scheduling settings (only the priority class).
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicyView {
    /// Priority class of the job's pod group.
    #[serde(default)]
    pub priority_class: Option<String>,
}

/// A Ray head or worker group.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct GroupSpecView<'a> {
    /// Worker group name (empty for the head group).
    #[serde(borrow, default)]
    pub group_name: Option<Str<'a>>,
    /// Worker replicas, default 1.
    #[serde(default)]
    pub replicas: Option<i32>,
    /// Hosts per replica (multi-host workers), default 1.
    #[serde(default)]
    pub num_of_hosts: Option<i32>,
    /// Pod template.
    #[serde(borrow, default)]
    pub template: Option<PodTemplateView<'a>>,
}

/// A container's resources.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView<'a> {
    /// Container name.
    #[serde(borrow, default)]
    pub name: Option<Str<'a>>,
    /// Container image.
    #[serde(borrow, default)]
    pub image: Option<Str<'a>>,
    /// Requests and limits.
    #[serde(borrow, default)]
    pub resources: Option<ResourcesView<'a>>,
}

/// Resource requests and limits (quantity strings).
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesView<'a> {
    /// Requests.
    #[serde(borrow, default)]
    pub requests: Option<StrMap<'a>>,
    /// Limits.
    #[serde(borrow, default)]
    pub limits: Option<StrMap<'a>>,
}

/// Pod affinity; only node affinity is read.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct AffinityView<'a> {
    /// Node affinity.
    #[serde(borrow, default)]
    pub node_affinity: Option<NodeAffinityView<'a>>,
}

/// Node affinity; only the required terms are read.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinityView<'a> {
    /// Required node selector.
    #[serde(borrow, default)]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelectorView<'a>>,
}

/// A node selector (OR of terms).
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorView<'a> {
    /// Terms, OR'ed.
    #[serde(borrow, default)]
    pub node_selector_terms: Vec<NodeSelectorTermView<'a>>,
}

/// A node selector term (AND of expressions).
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTermView<'a> {
    /// Label expressions.
    #[serde(borrow, default)]
    pub match_expressions: Option<Vec<RequirementView<'a>>>,
}

/// A node selector requirement.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct RequirementView<'a> {
    /// Label key.
    #[serde(borrow, default)]
    pub key: Str<'a>,
    /// Operator (`In`, `NotIn`, ...).
    #[serde(borrow, default)]
    pub operator: Str<'a>,
    /// Values.
    #[serde(borrow, default)]
    pub values: Option<Vec<Str<'a>>>,
}

/// A pod scheduling gate.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct GateView<'a> {
    /// Gate name.
    #[serde(borrow, default)]
    pub name: Str<'a>,
}

/// Every status field any supported kind's operator writes that admission reads, in one
/// struct (the kinds' field names do not collide). Owned: statuses are small, and only the
/// controller reads them.
///
/// - batch/v1 Job: `conditions`, `active`, `terminating`, `ready`, `succeeded`, `startTime`.
/// - JobSet: `conditions`, `replicatedJobsStatus`.
/// - PyTorchJob, MPIJob: `conditions`, `replicaStatuses`.
/// - RayCluster: `state`, `reason`.
/// - RayJob: `jobDeploymentStatus`, `jobStatus`, `message`, `rayClusterStatus`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    /// Conditions (Job, JobSet, Kubeflow jobs).
    #[serde(default, deserialize_with = "lenient")]
    pub conditions: Vec<ConditionView>,
    /// Job: pods running.
    #[serde(default, deserialize_with = "lenient")]
    pub active: Option<i64>,
    /// Job: pods terminating.
    #[serde(default, deserialize_with = "lenient")]
    pub terminating: Option<i64>,
    /// Job: pods ready.
    #[serde(default, deserialize_with = "lenient")]
    pub ready: Option<i64>,
    /// Job: pods succeeded.
    #[serde(default, deserialize_with = "lenient")]
    pub succeeded: Option<i64>,
    /// Job: when the Job controller started it (cleared once suspended).
    #[serde(default, deserialize_with = "lenient")]
    pub start_time: Option<String>,
    /// Job: finished pods not yet counted in `succeeded` / `failed`.
    #[serde(default, deserialize_with = "lenient")]
    pub uncounted_terminated_pods: Option<UncountedView>,
    /// Pod: `Pending`, `Running`, `Succeeded`, `Failed`.
    #[serde(default, deserialize_with = "lenient")]
    pub phase: Option<String>,
    /// JobSet: per replicated job Job counts.
    #[serde(default, deserialize_with = "lenient")]
    pub replicated_jobs_status: Vec<ReplicatedJobStatusView>,
    /// TrainJob: per replicated job of its JobSet, Job counts (as a JobSet reports them).
    #[serde(default, deserialize_with = "lenient")]
    pub jobs_status: Vec<ReplicatedJobStatusView>,
    /// Kubeflow jobs: pod counts per replica type.
    #[serde(default, deserialize_with = "lenient")]
    pub replica_statuses: BTreeMap<String, ReplicaStatusView>,
    /// RayCluster: `ready`, `suspended`, `failed`, ...
    #[serde(default, deserialize_with = "lenient")]
    pub state: Option<String>,
    /// RayCluster: why it is in its state.
    #[serde(default, deserialize_with = "lenient")]
    pub reason: Option<String>,
    /// RayJob: `New`, `Initializing`, `Running`, `Suspended`, `Complete`, `Failed`, ...
    #[serde(default, deserialize_with = "lenient")]
    pub job_deployment_status: Option<String>,
    /// RayJob: the Ray job's own status (`SUCCEEDED`, `FAILED`, ...).
    #[serde(default, deserialize_with = "lenient")]
    pub job_status: Option<String>,
    /// RayJob: a human-readable message.
    #[serde(default, deserialize_with = "lenient")]
    pub message: Option<String>,
    /// RayJob: the status of the RayCluster it created.
    #[serde(default, deserialize_with = "lenient")]
    pub ray_cluster_status: Option<RayClusterStatusView>,
}

/// A status condition.
#[derive(Deserialize, Debug, Default, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    /// Condition type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: Option<String>,
}

/// A Job's finished pods not yet counted.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct UncountedView {
    /// UIDs of succeeded pods.
    #[serde(default)]
    pub succeeded: Vec<String>,
}

/// A TrainJob's runtime patch, as far as admission cares: who manages it.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct RuntimePatchView {
    /// The controller that owns the patch.
    #[serde(default)]
    pub manager: String,
}

/// A JobSet replicated job's status: how many of its Jobs are in each state.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJobStatusView {
    /// Replicated job name.
    #[serde(default)]
    pub name: String,
    /// Jobs with at least one running pod.
    #[serde(default)]
    pub active: i64,
    /// Jobs whose pods are all ready.
    #[serde(default)]
    pub ready: i64,
    /// Jobs that succeeded.
    #[serde(default)]
    pub succeeded: i64,
}

/// A Kubeflow replica type's pod counts.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatusView {
    /// Pods running.
    #[serde(default)]
    pub active: i64,
}

/// The RayCluster status inside a RayJob's status.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterStatusView {
    /// The cluster's state (`ready`, ...).
    #[serde(default)]
    pub state: Option<String>,
}

impl StatusView {
    /// A status with every field unset (usable in statics).
    pub const EMPTY: StatusView = StatusView {
        conditions: Vec::new(),
        active: None,
        terminating: None,
        ready: None,
        succeeded: None,
        start_time: None,
        uncounted_terminated_pods: None,
        phase: None,
        replicated_jobs_status: Vec::new(),
        jobs_status: Vec::new(),
        replica_statuses: BTreeMap::new(),
        state: None,
        reason: None,
        job_deployment_status: None,
        job_status: None,
        message: None,
        ray_cluster_status: None,
    };

    /// Succeeded pods a Job has not counted yet.
    pub fn uncounted_succeeded(&self) -> usize {
        self.uncounted_terminated_pods
            .as_ref()
            .map_or(0, |u| u.succeeded.len())
    }

    /// The condition of this type when its status is `True`.
    pub fn true_condition(&self, type_: &str) -> Option<&ConditionView> {
        self.conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    }
}

impl SpecView<'_> {
    /// Whether the pod spec carries the scheduling gate.
    pub fn has_gate(&self, gate: &str) -> bool {
        self.scheduling_gates
            .as_ref()
            .is_some_and(|g| g.iter().any(|x| x.name.as_str() == gate))
    }

    /// Values a pod spec requires for a node label: the `nodeSelector` value and the `In`
    /// values of required node-affinity expressions on that key.
    pub fn required_node_label_values(&self, key: &str) -> Vec<&str> {
        let mut out = Vec::new();
        if let Some(v) = self.node_selector.as_ref().and_then(|m| m.get(key)) {
            out.push(v.as_str());
        }
        let terms = self
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        for term in terms.iter().flat_map(|t| t.node_selector_terms.iter()) {
            for r in term.match_expressions.iter().flatten() {
                if r.key.as_str() == key && r.operator.as_str() == "In" {
                    out.extend(r.values.iter().flatten().map(Str::as_str));
                }
            }
        }
        out
    }
}

impl<'a> JobObject<'a> {
    /// Decodes the view from the raw JSON of an object.
    pub fn from_slice(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Decodes the view from a JSON value (borrowing its strings).
    pub fn from_value(value: &'a serde_json::Value) -> Result<Self, serde_json::Error> {
        Self::deserialize(value)
    }

    /// The status, or an empty one.
    pub fn status(&self) -> &StatusView {
        static EMPTY: StatusView = StatusView::EMPTY;
        self.status.as_deref().unwrap_or(&EMPTY)
    }

    /// The spec, or an empty one.
    pub fn spec(&self) -> &SpecView<'a> {
        static EMPTY: SpecView<'static> = SpecView::EMPTY;
        self.spec.as_deref().unwrap_or(&EMPTY)
    }

    /// A label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.label(key)
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotation(key)
    }

    /// The namespace (empty if unset).
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }
}

impl SpecView<'static> {
    /// A spec with every field unset (usable in statics).
    pub const EMPTY: SpecView<'static> = SpecView {
        suspend: None,
        parallelism: None,
        completions: None,
        completion_mode: None,
        template: None,
        replicated_jobs: None,
        managed_by: None,
        pytorch_replica_specs: None,
        mpi_replica_specs: None,
        run_launcher_as_worker: None,
        run_policy: None,
        ray_cluster_spec: None,
        cluster_selector: None,
        shutdown_after_job_finishes: None,
        submission_mode: None,
        submitter_pod_template: None,
        head_group_spec: None,
        worker_group_specs: None,
        enable_in_tree_autoscaling: None,
        runtime_patches: Vec::new(),
        replicas: None,
        leader_worker_template: None,
        containers: None,
        init_containers: None,
        overhead: None,
        node_selector: None,
        affinity: None,
        scheduling_gates: None,
        priority_class_name: None,
        restart_policy: None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrows_unescaped_strings_and_owns_escaped_ones() {
        let raw = br#"{"metadata":{"name":"a","labels":{"k":"v\u0041"}},"spec":{"parallelism":2}}"#;
        let o = JobObject::from_slice(raw).expect("valid");
        assert!(matches!(
            o.metadata.name.as_ref().map(|s| &s.0),
            Some(Cow::Borrowed("a"))
        ));
        assert_eq!(o.label("k"), Some("vA"));
        assert_eq!(o.spec().parallelism, Some(2));
        let v: serde_json::Value = serde_json::from_slice(raw).expect("valid");
        let o2 = JobObject::from_value(&v).expect("valid");
        assert_eq!(o2.label("k"), Some("vA"));
        assert_eq!(JobObject::default().spec().suspend, None);
    }

    #[test]
    fn patched_members_must_be_objects() {
        assert!(JobObject::from_slice(br#"{"metadata":{},"spec":[]}"#).is_err());
        assert!(JobObject::from_slice(br#"{"metadata":[]}"#).is_err());
        let o = JobObject::from_slice(br#"{"metadata":{},"spec":null}"#).expect("null spec");
        assert!(o.spec.is_none() && o.metadata.present);
        assert!(
            !JobObject::from_slice(b"{}")
                .expect("empty")
                .metadata
                .present
        );
    }

    #[test]
    fn node_label_values_come_from_selector_and_affinity() {
        let raw = br#"{"spec":{"nodeSelector":{"gpu":"a100"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"gpu","operator":"In","values":["h100"]},{"key":"gpu","operator":"NotIn","values":["t4"]}]}]}}}}}"#;
        let o = JobObject::from_slice(raw).expect("valid");
        assert_eq!(o.spec().required_node_label_values("gpu"), ["a100", "h100"]);
    }
}
