//! Job integrations: what each job kind Kueue can manage looks like to admission.
//!
//! Every kind implements [`JobIntegration`] over the kind-agnostic [`JobObject`] view, so the
//! webhook, the controller and the simulator share one code path and nothing outside a
//! kind's module special-cases a kind. The trait answers: which pod sets the job has (names,
//! counts, templates), whether it is suspended, how to suspend it (a JSON patch for the
//! mutating webhook, a merge patch for the controller), which kind-specific rules its
//! webhook enforces, and the Workload Kueue would create for it.

#![warn(missing_docs)]

pub mod batch_job;
pub mod jobset;
pub mod kubeflow;
pub mod leaderworkerset;
pub mod mpijob;
pub mod object;
pub mod patch;
pub mod pod;
pub mod pod_group;
pub mod ray;
pub mod tas;
pub mod trainjob;

pub use object::{JobObject, MetaView, SpecView, Str};
pub use patch::PatchBuilder;

use crate::api::constants::{
    JOB_UID_LABEL, MAX_EXEC_TIME_SECONDS_LABEL, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL,
};
use crate::api::validate::{FieldError, Path};
use crate::api::{PodSet, PriorityClassRef, Workload, WorkloadSpec};
use json_patch::jsonptr::PointerBuf;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::GroupVersionKind;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// Characters of the SHA-1 kept in a workload name.
const HASH_LENGTH: usize = 5;
/// Longest workload name (a DNS subdomain).
const MAX_WORKLOAD_NAME_LENGTH: usize = 253;

/// Why a job object cannot be turned into a Workload; carries Kubernetes-style field errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrationError {
    /// The problems found, never empty.
    pub errors: Vec<FieldError>,
}

impl fmt::Display for IntegrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msgs: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        f.write_str(&msgs.join("; "))
    }
}

impl std::error::Error for IntegrationError {}

impl From<FieldError> for IntegrationError {
    fn from(e: FieldError) -> Self {
        Self { errors: vec![e] }
    }
}

/// Settings that change which kind-specific rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleOptions {
    /// Kueue's `manageJobsWithoutQueueName`: jobs without a queue name are managed too.
    pub manage_jobs_without_queue_name: bool,
    /// Whether topology-aware scheduling annotations are validated.
    pub topology_aware_scheduling: bool,
}

impl Default for RuleOptions {
    fn default() -> Self {
        Self {
            manage_jobs_without_queue_name: false,
            topology_aware_scheduling: true,
        }
    }
}

impl RuleOptions {
    /// Whether Kueue manages this job (it names a queue, or every job is managed).
    pub fn is_managed(&self, job: &JobObject<'_>) -> bool {
        self.manage_jobs_without_queue_name || queue_name(job).is_some()
    }
}

/// One pod set of a job, located inside the job object.
#[derive(Debug, Clone)]
pub struct PodSetRef<'o> {
    /// Pod set name (`main`, a replicated job name, `head`, a worker group, ...).
    pub name: Cow<'o, str>,
    /// Pods in the pod set.
    pub count: i32,
    /// JSON pointer to the pod template (empty: the object itself is the pod).
    pub pointer: PointerBuf,
    /// Field path of the template's metadata, for error messages.
    pub meta_path: Path,
    /// Template metadata, if present.
    pub meta: Option<&'o MetaView<'o>>,
    /// Pod spec, if present.
    pub spec: Option<&'o SpecView<'o>>,
    /// Label carrying the pod index, used by topology-aware scheduling.
    pub pod_index_label: Option<&'static str>,
    /// Minimum count under partial admission.
    pub min_count: Option<i32>,
    /// The template the kind's operator uses when the object has none at `pointer` (a
    /// RayJob's submitter); admission records it and a start writes it in.
    pub default_template: Option<serde_json::Value>,
}

impl<'o> PodSetRef<'o> {
    /// The template's annotations, if any.
    pub fn annotations(&self) -> Option<&'o object::StrMap<'o>> {
        self.meta.and_then(|m| m.annotations.as_ref())
    }
}

/// How a finished job ended (Kueue's `Finished`: success and the operator's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the job succeeded.
    pub succeeded: bool,
    /// The operator's message.
    pub message: String,
}

impl Outcome {
    /// A success with `message`.
    pub fn success(message: impl Into<String>) -> Self {
        Self {
            succeeded: true,
            message: message.into(),
        }
    }

    /// A failure with `message`.
    pub fn failure(message: impl Into<String>) -> Self {
        Self {
            succeeded: false,
            message: message.into(),
        }
    }
}

/// A job kind whose jobs are made of several API objects, its members, which are neither
/// suspended nor resumed but gated, ungated and deleted one by one (Kueue's
/// `ComposableJob`: plain pods and pod groups). The controller runs such a kind through
/// [`ComposedJob`] instead of the one-object path; the rules stay in the kind's module.
pub trait ComposedJob: Send + Sync + fmt::Debug {
    /// Label selector of the members the controller watches (those the webhook marked).
    fn member_selector(&self) -> &'static str;

    /// The kind of the members when it is not the integration's own (a LeaderWorkerSet's
    /// members are its pods); `None`: the integration's kind.
    fn member_kind(&self) -> Option<GroupVersionKind> {
        None
    }

    /// The kind of the object the members were made from, when that object names and
    /// shapes their Workload (a LeaderWorkerSet for its groups' pods), so the controller
    /// reads it too; `None`: the members alone say everything.
    fn parent_kind(&self) -> Option<GroupVersionKind> {
        None
    }

    /// The name of a member's parent (in the member's namespace), for kinds with one.
    fn parent_name_of(&self, _member: &serde_json::Value) -> Option<String> {
        None
    }

    /// The name of the Workload a member belongs to, given its parent when the kind has
    /// one; `None`: not a member (yet).
    fn workload_name_of(
        &self,
        member: &serde_json::Value,
        parent: Option<&serde_json::Value>,
    ) -> Option<String>;

    /// The Workload of these members (all that exist of one Workload), from their parent
    /// when the kind has one, or why there is none yet.
    fn compose(
        &self,
        members: &[&serde_json::Value],
        parent: Option<&serde_json::Value>,
    ) -> Result<Workload, ComposeError>;

    /// Whether a Workload named `workload` is still wanted by `parent` (a LeaderWorkerSet
    /// scaled down no longer wants its highest groups'); an unwanted Workload whose
    /// members are gone is deleted. Kinds without a parent leave their Workloads to the
    /// garbage collector (the members own them).
    fn wants_workload(&self, _workload: &Workload, _parent: &serde_json::Value) -> bool {
        true
    }

    /// What the members say, as a job's status does.
    fn status(&self, members: &[&serde_json::Value]) -> MembersStatus;

    /// The pod set a member runs in.
    fn pod_set_of(&self, member: &serde_json::Value) -> String;

    /// The scheduling gate a start removes.
    fn gate(&self) -> &'static str;

    /// The finalizer that keeps a member until the controller has seen its end.
    fn finalizer(&self) -> &'static str;

    /// Whether a member still waits for admission behind the gate.
    fn is_gated(&self, member: &serde_json::Value) -> bool;

    /// Whether a stop deletes this member.
    fn to_stop(&self, member: &serde_json::Value) -> bool;

    /// Whether a member may lose its finalizer now (being deleted, running nothing).
    fn released(&self, member: &serde_json::Value) -> bool;

    /// Whether a member carries the finalizer.
    fn has_finalizer(&self, member: &serde_json::Value) -> bool;

    /// Annotations a start records on a member (none by default).
    fn start_annotations(&self, _member: &serde_json::Value) -> Vec<(String, String)> {
        Vec::new()
    }
}

pub use pod_group::{ComposeError, MembersStatus};

/// Another object a job's pod sets are built from (a TrainJob's training runtime): the
/// controller reads it and hands it to [`JobIntegration::resolve`], so the kind's rules stay
/// pure and the controller stays kind-agnostic.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    /// The object's API resource.
    pub resource: kube::core::ApiResource,
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// A kind that is started with its admission written somewhere other than its pod
/// templates (Kueue's `RunWithPodSetsInfo` / `RestorePodSetsInfo` of a TrainJob, which
/// keeps it in a runtime patch of its own). The controller computes each admitted pod
/// set's additions; the kind says where they go and how they are taken off again.
pub trait AdmissionCarrier: Send + Sync + fmt::Debug {
    /// Writes each pod set's additions into `job`: `(pod set name, template)`, the template
    /// holding only what admission adds (`metadata.labels`, `metadata.annotations`,
    /// `spec.nodeSelector`, `spec.tolerations`, `spec.schedulingGates`).
    fn inject(&self, job: &mut serde_json::Value, pod_sets: &[(String, serde_json::Value)]);

    /// Takes off everything [`AdmissionCarrier::inject`] wrote, leaving the job as submitted.
    fn restore(&self, job: &mut serde_json::Value);
}

/// One job kind Kueue can manage (Kueue's `jobframework.GenericJob`).
pub trait JobIntegration: Send + Sync + fmt::Debug {
    /// Group/version/kind of the job object, e.g. `batch/v1 Job`.
    fn gvk(&self) -> GroupVersionKind;

    /// Kueue's name for the kind in `integrations.frameworks`, e.g. `batch/job`.
    fn framework(&self) -> &'static str;

    /// Whether kuota's job controller runs the kind end to end (creates its Workloads,
    /// starts, stops and finishes its objects). A kind it does not run is never enabled:
    /// its webhook leaves objects alone, as Kueue's does for a disabled framework.
    fn controller_runs(&self) -> bool {
        true
    }

    /// Frameworks whose webhooks this one needs, enabled with it (Kueue's
    /// `ImplicitlyEnabledFrameworkNames`).
    fn implicitly_enables(&self) -> &'static [&'static str] {
        &[]
    }

    /// The kind's jobs are made of several objects run through [`ComposedJob`] (plain
    /// pods); `None` for kinds whose job is one object.
    fn composed(&self) -> Option<&'static dyn ComposedJob> {
        None
    }

    /// Where the kind keeps a start's admission, when not in its pod templates; `None`:
    /// the templates at [`PodSetRef::pointer`] receive it.
    fn admission_carrier(&self) -> Option<&'static dyn AdmissionCarrier> {
        None
    }

    /// Other objects the job's pod sets are built from (none by default), or why the job
    /// names none that can be read.
    fn dependencies(&self, _job: &serde_json::Value) -> Result<Vec<Dependency>, IntegrationError> {
        Ok(Vec::new())
    }

    /// Every kind of object [`JobIntegration::dependencies`] may name (what the controller
    /// must be allowed to read).
    fn dependency_resources(&self) -> Vec<kube::core::ApiResource> {
        Vec::new()
    }

    /// The object [`JobIntegration::pod_sets`] and [`JobIntegration::workload`] read: the
    /// job with what its [`JobIntegration::dependencies`] contribute (`found`, in their
    /// order; `None` for one that does not exist). Errors say why no Workload can be
    /// built. The default: the job as it is.
    fn resolve(
        &self,
        job: &serde_json::Value,
        _found: &[Option<serde_json::Value>],
    ) -> Result<serde_json::Value, IntegrationError> {
        Ok(job.clone())
    }

    /// How the job ended once its operator reports it finished (Kueue's `Finished`).
    fn finished(&self, job: &JobObject<'_>) -> Option<Outcome>;

    /// An outcome the operator decided while the job's pods still terminate (a batch Job's
    /// `SuccessCriteriaMet` / `FailureTarget`); `None` for kinds without that window.
    fn outcome_decided(&self, _job: &JobObject<'_>) -> Option<Outcome> {
        None
    }

    /// Whether `succeeded` pods of the job, seen Succeeded by kuota's own pod watch before
    /// its operator has counted them, already meet its success criteria: the job then
    /// finishes on its own. `false` for kinds whose success pods alone do not decide.
    fn succeeded_by_pods(&self, _job: &JobObject<'_>, _succeeded: u32) -> bool {
        false
    }

    /// Whether [`Self::succeeded_by_pods`] can say yes: kuota then watches the pods it
    /// started for jobs of this kind, each controlled by its job.
    fn counts_succeeded_pods(&self) -> bool {
        false
    }

    /// Whether any of the job's pods may still be running (Kueue's `IsActive`): a stopped
    /// job gives its quota back only once this is false.
    fn is_active(&self, job: &JobObject<'_>) -> bool;

    /// Whether all the job's pods are ready (Kueue's `PodsReady`).
    fn pods_ready(&self, job: &JobObject<'_>) -> bool;

    /// A priority class the kind names outside its pod templates, which Kueue prefers to
    /// theirs (its `JobWithPriorityClass`: a Kubeflow job's
    /// `runPolicy.schedulingPolicy.priorityClass`); `None` falls back to the first pod set
    /// whose template names one.
    fn scheduling_priority_class<'o>(&self, _job: &'o JobObject<'o>) -> Option<&'o str> {
        None
    }

    /// A status merge patch a stopped job needs before its templates may change (a batch
    /// Job keeps `startTime` until it is cleared); `None` when it needs none.
    fn stop_status_patch(&self, _job: &JobObject<'_>) -> Option<serde_json::Value> {
        None
    }

    /// Whether the kind refuses changes to the job's pod templates in its present state
    /// (its API server validation, not a rule of Kueue's), so that a restore would only
    /// be refused.
    fn templates_locked(&self, _job: &JobObject<'_>) -> bool {
        false
    }

    /// Pod template labels the kind's own controller generates from the job's uid (Kueue's
    /// `cleanLabels`): left out of the Workload's pod sets, which mean the same in any
    /// cluster, and kept on the job when its templates are restored.
    fn generated_template_labels(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether the webhook may set `spec.managedBy` to MultiKueue's controller (Kueue's
    /// `CanDefaultManagedBy`): the kind has a MultiKueue adapter and the job names no
    /// controller but the kind's own.
    fn may_default_managed_by(&self, _job: &JobObject<'_>) -> bool {
        false
    }

    /// MultiKueue (Kueue's `MultiKueueAdapter`): the spec of the copy of this job to create
    /// in a worker cluster, from the manager's spec; `None` for a kind MultiKueue does not
    /// dispatch (its Workloads are rejected by the check). The copy is run by the worker's
    /// own operator, so the manager's `managedBy` is never carried over.
    fn multikueue_spec(&self, _spec: &serde_json::Value) -> Option<serde_json::Value> {
        None
    }

    /// Kind name, e.g. `Job`.
    fn kind(&self) -> String {
        self.gvk().kind
    }

    /// The pod sets the job needs admitted together, in Kueue's order.
    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>>;

    /// Whether the job is currently suspended (runs no pods).
    fn is_suspended(&self, job: &JobObject<'_>) -> bool;

    /// JSON merge patch that suspends (`true`) or resumes (`false`) the job.
    fn suspend_patch(&self, suspend: bool) -> serde_json::Value;

    /// Records the JSON patch operations that suspend a job being created (nothing when it
    /// is already suspended, so a second pass adds nothing).
    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder);

    /// Whether jobs of this kind are only managed inside managed namespaces even when they
    /// name a queue (Kueue's pod webhook skips pods outside `managedJobsNamespaceSelector`).
    fn requires_managed_namespace(&self) -> bool {
        false
    }

    /// Whether a parent suspends this object itself, so it is suspended unconditionally.
    fn suspended_by_parent(&self, _job: &JobObject<'_>) -> bool {
        false
    }

    /// Kind-specific defaults Kueue's webhook writes into a managed object on create,
    /// beyond the queue name, the priority class and the suspension (its `Default`); the
    /// default writes none. A second pass must add nothing.
    fn default_on_create(
        &self,
        _job: &JobObject<'_>,
        _opts: &RuleOptions,
        _patch: &mut PatchBuilder,
    ) {
    }

    /// Why the kind's operator will never run this object whatever admission does (the
    /// operator's own validation, after its defaults). Kueue's webhook accepts such an
    /// object, so kuota's does too; its controller creates no Workload for it, so it never
    /// holds quota, and says why in a Warning Event on the object. Empty: runnable.
    fn unrunnable(&self, _job: &JobObject<'_>) -> Vec<FieldError> {
        Vec::new()
    }

    /// Warnings the kind's webhook gives (not errors).
    fn warnings(&self, _job: &JobObject<'_>) -> Vec<String> {
        Vec::new()
    }

    /// The kind's own webhook rules on create (Kueue's `ValidateOnCreate` of the kind).
    /// The default checks the topology annotations of every pod set.
    fn validate_create(&self, job: &JobObject<'_>, opts: &RuleOptions) -> Vec<FieldError> {
        if !opts.topology_aware_scheduling {
            return Vec::new();
        }
        let mut errs = Vec::new();
        for ps in self.pod_sets(job) {
            errs.extend(tas::validate(&ps.annotations(), &ps.meta_path, ps.count));
        }
        errs
    }

    /// The kind's own webhook rules on update; the default re-runs the create rules.
    fn validate_update(
        &self,
        _old: &JobObject<'_>,
        new: &JobObject<'_>,
        opts: &RuleOptions,
    ) -> Vec<FieldError> {
        self.validate_create(new, opts)
    }

    /// Kueue's workload name for this object: `<kind>-<name>-<5 hex of sha1>`.
    fn workload_name(&self, job: &JobObject<'_>) -> String {
        let meta = &job.metadata;
        workload_name(
            meta.name.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default(),
            &self.gvk(),
        )
    }

    /// The Workload Kueue's job framework would create for this object.
    ///
    /// `spec.priority` is left unset: the referenced class lives elsewhere and is resolved
    /// by whoever holds the priority classes (the engine or the controller).
    fn workload(&self, obj: &serde_json::Value) -> Result<Workload, IntegrationError> {
        let job = JobObject::from_value(obj).map_err(|e| {
            IntegrationError::from(FieldError::invalid_omit(&Path::new(""), e.to_string()))
        })?;
        let mut errors = self.validate_create(&job, &RuleOptions::default());
        let labels = &job.metadata;
        let max_exec = max_execution_time(labels.label(MAX_EXEC_TIME_SECONDS_LABEL))
            .unwrap_or_else(|e| {
                errors.push(e);
                None
            });
        if !errors.is_empty() {
            return Err(IntegrationError { errors });
        }
        let refs = self.pod_sets(&job);
        let mut pod_sets = Vec::with_capacity(refs.len());
        for ps in &refs {
            let mut template = full_template(obj, &ps.pointer, ps.default_template.as_ref())
                .map_err(|e| {
                    let p = ps.meta_path.to_string();
                    let path = Path::new(p.strip_suffix(".metadata").unwrap_or(&p));
                    IntegrationError::from(FieldError::invalid_omit(&path, e.to_string()))
                })?;
            if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
                for generated in self.generated_template_labels() {
                    labels.remove(*generated);
                }
            }
            let topology_request = ps
                .meta
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| tas::topology_request(a, ps.pod_index_label));
            pod_sets.push(PodSet {
                name: ps.name.to_string(),
                template,
                count: ps.count,
                min_count: ps.min_count,
                topology_request,
            });
        }
        let priority_class_ref = job
            .label(PRIORITY_CLASS_LABEL)
            .filter(|p| !p.is_empty())
            .map(PriorityClassRef::workload)
            .or_else(|| {
                self.scheduling_priority_class(&job)
                    .map(PriorityClassRef::pod)
            })
            .or_else(|| {
                pod_sets
                    .iter()
                    .filter_map(|ps| ps.template.spec.as_ref()?.priority_class_name.as_deref())
                    .find(|p| !p.is_empty())
                    .map(PriorityClassRef::pod)
            });
        let gvk = self.gvk();
        let meta = &job.metadata;
        let mut wl_labels = BTreeMap::new();
        let owner = meta.uid.as_ref().map(|uid| {
            wl_labels.insert(JOB_UID_LABEL.to_string(), uid.to_string());
            OwnerReference {
                api_version: gvk.api_version(),
                kind: gvk.kind.clone(),
                name: meta.name.as_deref().unwrap_or_default().to_string(),
                uid: uid.to_string(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }
        });
        Ok(Workload {
            metadata: ObjectMeta {
                name: Some(self.workload_name(&job)),
                namespace: meta.namespace.as_ref().map(ToString::to_string),
                labels: (!wl_labels.is_empty()).then_some(wl_labels),
                annotations: provreq_annotations(meta.annotations.as_ref()),
                owner_references: owner.map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            spec: WorkloadSpec {
                pod_sets,
                queue_name: queue_name(&job).map(str::to_string),
                priority_class_ref,
                priority: None,
                active: None,
                maximum_execution_time_seconds: max_exec,
                preemption_gates: Vec::new(),
            },
            status: None,
        })
    }
}

/// LocalQueue named by the `kueue.x-k8s.io/queue-name` label (empty counts as unset).
pub fn queue_name<'o>(job: &'o JobObject<'_>) -> Option<&'o str> {
    job.label(QUEUE_NAME_LABEL).filter(|q| !q.is_empty())
}

/// Whether kuota runs the framework of this Kueue name (some integration's
/// [`JobIntegration::framework`] that the controller runs): the one list the
/// configuration, the webhook, the controller and the manifests derive from.
pub fn runs_framework(name: &str) -> bool {
    all()
        .into_iter()
        .any(|i| i.controller_runs() && i.framework() == name)
}

/// The frameworks kuota runs, in [`all`]'s order.
pub fn run_frameworks() -> Vec<&'static str> {
    all()
        .into_iter()
        .filter(|i| i.controller_runs())
        .map(|i| i.framework())
        .collect()
}

/// The integration Kueue names `framework` in `integrations.frameworks`.
pub fn for_framework(framework: &str) -> Option<&'static dyn JobIntegration> {
    all().into_iter().find(|i| i.framework() == framework)
}

/// Every integration kuota supports, in a fixed order.
pub fn all() -> [&'static dyn JobIntegration; 9] {
    [
        &batch_job::BatchJob,
        &jobset::JobSet,
        &kubeflow::PyTorchJob,
        &mpijob::MpiJob,
        &trainjob::TrainJob,
        &ray::RayJob,
        &ray::RayCluster,
        &leaderworkerset::LeaderWorkerSet,
        &pod::Pod,
    ]
}

/// Kueue's frameworks kuota does not run, with the kind each manages (group, kind):
/// what `kuota check` names when it meets one of their objects.
const NOT_RUN: &[(&str, &str, &str)] = &[
    ("deployment", "apps", "Deployment"),
    ("statefulset", "apps", "StatefulSet"),
    ("ray.io/rayservice", "ray.io", "RayService"),
    ("kubeflow.org/tfjob", "kubeflow.org", "TFJob"),
    ("kubeflow.org/paddlejob", "kubeflow.org", "PaddleJob"),
    ("kubeflow.org/xgboostjob", "kubeflow.org", "XGBoostJob"),
    ("kubeflow.org/jaxjob", "kubeflow.org", "JAXJob"),
    (
        "workload.codeflare.dev/appwrapper",
        "workload.codeflare.dev",
        "AppWrapper",
    ),
    (
        "sparkoperator.k8s.io/sparkapplication",
        "sparkoperator.k8s.io",
        "SparkApplication",
    ),
];

/// The Kueue framework that manages objects of this `apiVersion` and `kind` when kuota
/// does not run it (any version of the group).
pub fn not_run_framework(api_version: &str, kind: &str) -> Option<&'static str> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    NOT_RUN
        .iter()
        .find(|(_, g, k)| *g == group && *k == kind)
        .map(|(framework, _, _)| *framework)
}

/// The integration for an object's `apiVersion` and `kind`.
pub fn for_kind(api_version: &str, kind: &str) -> Option<&'static dyn JobIntegration> {
    all().into_iter().find(|i| {
        let gvk = i.gvk();
        gvk.kind == kind && gvk.api_version() == api_version
    })
}

/// Whether an owner of this type is a job Kueue manages, so its children are left alone
/// (Kueue's `IsOwnerManagedByKueue`). Pods are never owners of managed jobs.
pub fn is_managed_owner_kind(api_version: &str, kind: &str) -> bool {
    for_kind(api_version, kind).is_some_and(|i| i.gvk().kind != "Pod")
}

/// Kueue's `GetWorkloadNameForOwnerWithGVK`: `lower(kind)-name`, truncated to leave room for
/// `-` and 5 hex characters of SHA-1(`kind\ngroup\nname\nuid`).
pub fn workload_name(owner_name: &str, owner_uid: &str, gvk: &GroupVersionKind) -> String {
    let hash_input = format!("{}\n{}\n{owner_name}\n{owner_uid}", gvk.kind, gvk.group);
    let hash = {
        use sha1::Digest;
        format!("{:x}", sha1::Sha1::digest(hash_input.as_bytes()))
    };
    let mut prefix = format!("{}-{owner_name}", gvk.kind.to_lowercase());
    let max_prefix = MAX_WORKLOAD_NAME_LENGTH - 1 - HASH_LENGTH;
    if prefix.len() > max_prefix {
        // Names are ASCII (DNS subdomains); find a char boundary anyway so odd input cannot panic.
        let mut cut = max_prefix;
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        prefix.truncate(cut);
    }
    format!("{prefix}-{}", &hash[..HASH_LENGTH])
}

/// The `kueue.x-k8s.io/max-exec-time-seconds` label: a positive integer (Kueue's rule).
pub fn max_execution_time(value: Option<&str>) -> Result<Option<i32>, FieldError> {
    let Some(v) = value else {
        return Ok(None);
    };
    let path = Path::new("metadata")
        .child("labels")
        .key(MAX_EXEC_TIME_SECONDS_LABEL);
    match v.parse::<i32>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        Ok(n) => Err(FieldError::invalid_num(
            &path,
            n,
            "should be greater than 0",
        )),
        Err(e) => Err(FieldError::invalid(&path, v, e.to_string())),
    }
}

/// The full pod template at `pointer` (the object itself when empty), with its metadata
/// reduced to labels and annotations as Workload pod templates require.
fn full_template(
    obj: &serde_json::Value,
    pointer: &PointerBuf,
    default: Option<&serde_json::Value>,
) -> Result<PodTemplateSpec, serde_json::Error> {
    let at = if pointer.is_root() {
        Some(obj)
    } else {
        obj.pointer(pointer.as_str()).or(default)
    };
    let Some(at) = at else {
        return Ok(PodTemplateSpec::default());
    };
    let t = PodTemplateSpec::deserialize_from(at)?;
    let metadata = t.metadata.map(|m| ObjectMeta {
        labels: m.labels,
        annotations: m.annotations,
        ..ObjectMeta::default()
    });
    Ok(PodTemplateSpec {
        metadata,
        spec: t.spec,
    })
}

/// Deserializes only the `metadata` and `spec` members, so a whole Pod can be read as a
/// template without tripping over `status`.
trait DeserializeTemplate: Sized {
    fn deserialize_from(v: &serde_json::Value) -> Result<Self, serde_json::Error>;
}

impl DeserializeTemplate for PodTemplateSpec {
    fn deserialize_from(v: &serde_json::Value) -> Result<Self, serde_json::Error> {
        use serde::Deserialize;
        let metadata = match v.get("metadata") {
            Some(m) if !m.is_null() => Some(ObjectMeta::deserialize(m)?),
            _ => None,
        };
        let spec = match v.get("spec") {
            Some(s) if !s.is_null() => Some(k8s_openapi::api::core::v1::PodSpec::deserialize(s)?),
            _ => None,
        };
        Ok(PodTemplateSpec { metadata, spec })
    }
}

/// Pods per Job: parallelism (default 1), capped by completions.
pub(crate) fn job_pods_count(spec: &SpecView<'_>) -> i32 {
    let parallelism = spec.parallelism.unwrap_or(1);
    match spec.completions {
        Some(c) if c < parallelism => c,
        _ => parallelism,
    }
}

/// `replicas * per_replica`, saturating so absurd input cannot overflow.
pub(crate) fn times(replicas: Option<i32>, per_replica: i32) -> i32 {
    replicas.unwrap_or(1).saturating_mul(per_replica)
}

/// `suspend` for kinds switched by `spec.suspend` (Job, JobSet, RayJob, RayCluster):
/// adds `spec.suspend: true` unless already set, so a second pass adds nothing.
pub(crate) fn suspend_via_spec(job: &JobObject<'_>, patch: &mut PatchBuilder) {
    if !spec_suspended(job) {
        patch.set_entry(&["spec"], job.spec.is_some(), "suspend", true.into());
    }
}

/// The outcome of kinds whose operator reports success and failure as `True` conditions.
pub(crate) fn outcome_from_conditions(
    job: &JobObject<'_>,
    succeeded: &str,
    failed: &str,
) -> Option<Outcome> {
    let status = job.status();
    let message = |c: &object::ConditionView| c.message.clone().unwrap_or_default();
    if let Some(c) = status.true_condition(succeeded) {
        return Some(Outcome::success(message(c)));
    }
    status
        .true_condition(failed)
        .map(|c| Outcome::failure(message(c)))
}

/// `is_suspended` for kinds switched by `spec.suspend`.
/// A spec without `managedBy`: the base of every kind's MultiKueue copy.
pub(crate) fn spec_without_managed_by(spec: &serde_json::Value) -> serde_json::Value {
    let mut spec = spec.clone();
    if let Some(m) = spec.as_object_mut() {
        m.remove("managedBy");
    }
    spec
}

pub(crate) fn spec_suspended(job: &JobObject<'_>) -> bool {
    job.spec().suspend.unwrap_or(false)
}

/// `suspend_patch` for kinds switched by `spec.suspend`.
pub(crate) fn spec_suspend_patch(suspend: bool) -> serde_json::Value {
    serde_json::json!({ "spec": { "suspend": suspend } })
}

/// Kueue's `FilterProvReqAnnotations`: the job's annotations a new Workload carries, for
/// the ProvisioningRequests made for it.
fn provreq_annotations(
    annotations: Option<&object::StrMap<'_>>,
) -> Option<BTreeMap<String, String>> {
    let out: BTreeMap<String, String> = annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(crate::api::constants::PROVREQ_ANNOTATION_PREFIX))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_matches_kueue_scheme() {
        let gvk = GroupVersionKind::gvk("batch", "v1", "Job");
        // sha1("Job\nbatch\nsample-job\n") starts with 4b8c4.
        assert_eq!(
            workload_name("sample-job", "", &gvk),
            "job-sample-job-4b8c4"
        );
        assert_eq!(
            workload_name("sample-job", "abc-uid", &gvk),
            "job-sample-job-4586c"
        );
        let long = "a".repeat(300);
        let n = workload_name(&long, "", &gvk);
        assert_eq!(n.len(), 253);
        assert!(n.starts_with("job-aaa"));
    }

    #[test]
    fn registry_finds_kinds_and_managed_owners() {
        assert_eq!(
            for_kind("jobset.x-k8s.io/v1alpha2", "JobSet").map(|i| i.kind()),
            Some("JobSet".to_string())
        );
        assert!(for_kind("batch/v1", "CronJob").is_none());
        assert!(is_managed_owner_kind("batch/v1", "Job"));
        assert!(is_managed_owner_kind("ray.io/v1", "RayJob"));
        assert!(!is_managed_owner_kind("v1", "Pod"));
        assert!(!is_managed_owner_kind("apps/v1", "ReplicaSet"));
        let kinds: Vec<String> = all().iter().map(|i| i.kind()).collect();
        assert_eq!(
            kinds,
            [
                "Job",
                "JobSet",
                "PyTorchJob",
                "MPIJob",
                "TrainJob",
                "RayJob",
                "RayCluster",
                "LeaderWorkerSet",
                "Pod"
            ]
        );
    }

    #[test]
    fn max_exec_time_rules() {
        assert_eq!(max_execution_time(Some("30")), Ok(Some(30)));
        assert_eq!(max_execution_time(None), Ok(None));
        assert_eq!(
            max_execution_time(Some("0")).map_err(|e| e.to_string()),
            Err("metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: should be greater than 0".to_string())
        );
        assert!(max_execution_time(Some("x")).is_err());
    }
}
