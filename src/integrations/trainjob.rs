//! Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1) integration, after Kueue's
//! `pkg/controller/jobs/trainjob`.
//!
//! A TrainJob holds no pod template: the trainer builds a JobSet from the runtime its
//! `spec.runtimeRef` names (a TrainingRuntime in its namespace, or a ClusterTrainingRuntime,
//! the default kind) with the TrainJob's overrides applied. Its pod sets are that JobSet's:
//! one per replicated job of the runtime's template, named after it, counting replicas ×
//! pods per Job. [`TrainJob::resolve`] builds the replicated jobs as the trainer would
//! (Kueue's `getChildJobSet`), so the JobSet rules apply unchanged. The runtime is a
//! [`Dependency`] the controller reads.
//!
//! Suspension is `spec.suspend`. Admission is not written into a template: as Kueue does,
//! the webhook gives every managed TrainJob a runtime patch of Kueue's own
//! (`manager: kueue.x-k8s.io/manager`), a start fills its `replicatedJobs` with each pod
//! set's labels, annotations, nodeSelector, tolerations and scheduling gates, and a stop
//! empties it again, so the TrainJob comes back byte for byte. Finish is its `Complete` or
//! `Failed` condition; activity and readiness come from `status.jobsStatus`, which the
//! trainer copies from its JobSet. The JobSet it owns is never managed on its own (its
//! controller owner is a managed kind).

use super::object::JobObject;
use super::{
    AdmissionCarrier, Dependency, IntegrationError, JobIntegration, Outcome, PatchBuilder,
    PodSetRef, RuleOptions,
};
use crate::api::validate::{FieldError, Path};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

/// The manager name of Kueue's own runtime patch (Kueue's `runtimePatchManagerName`).
pub const RUNTIME_PATCH_MANAGER: &str = "kueue.x-k8s.io/manager";
/// The label a runtime's replicated job carries to say which step it runs.
pub const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
/// The [`ANCESTOR_LABEL`] value of the trainer's nodes.
const ANCESTOR_TRAINER: &str = "trainer";
/// The container of a trainer node the TrainJob's `spec.trainer` overrides.
const NODE_CONTAINER: &str = "node";
const GROUP: &str = "trainer.kubeflow.org";
const VERSION: &str = "v1alpha1";
const TRAINING_RUNTIME: &str = "TrainingRuntime";
const CLUSTER_TRAINING_RUNTIME: &str = "ClusterTrainingRuntime";

/// The TrainJob integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrainJob;

/// The runtime a TrainJob names, or why it names none kuota can read.
fn runtime_ref(job: &Value) -> Result<Dependency, FieldError> {
    let path = Path::new("spec").child("runtimeRef");
    let r = job.pointer("/spec/runtimeRef");
    let text = |k: &str| r.and_then(|r| r.get(k)).and_then(Value::as_str);
    let name = text("name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::required(&path.child("name"), "must name a training runtime"))?;
    let group = text("apiGroup").unwrap_or(GROUP);
    let kind = text("kind").unwrap_or(CLUSTER_TRAINING_RUNTIME);
    let (plural, namespace) = match (group, kind) {
        (GROUP, CLUSTER_TRAINING_RUNTIME) => ("clustertrainingruntimes", None),
        (GROUP, TRAINING_RUNTIME) => (
            "trainingruntimes",
            job.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
        _ => {
            return Err(FieldError::invalid(
                &path.child("kind"),
                &format!("{group}/{kind}"),
                "unsupported runtime: only trainer.kubeflow.org TrainingRuntime and ClusterTrainingRuntime",
            ));
        }
    };
    let gvk = GroupVersionKind::gvk(group, VERSION, kind);
    Ok(Dependency {
        resource: ApiResource::from_gvk_with_plural(&gvk, plural),
        namespace,
        name: name.to_string(),
    })
}

/// The replicated jobs of the JobSet the trainer builds for `job` from the runtime's spec
/// (Kueue's `getChildJobSet`, as far as pod sets go): the runtime template's replicated
/// jobs; the trainer's (labelled [`ANCESTOR_LABEL`]`: trainer`) runs the runtime's
/// `mlPolicy.numNodes` pods (default 1), or the TrainJob's `spec.trainer.numNodes`, and its
/// `node` container takes the TrainJob's image, command, args, env and resources per node;
/// every replicated job's parallelism and completions are set to its pod count.
pub fn replicated_jobs(job: &Value, runtime_spec: &Value) -> Result<Vec<Value>, FieldError> {
    let Some(rjs) = runtime_spec
        .pointer("/template/spec/replicatedJobs")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
    else {
        return Err(FieldError::required(
            &Path::new("spec").child("runtimeRef").child("name"),
            "the runtime has no spec.template.spec.replicatedJobs",
        ));
    };
    let trainer = job.pointer("/spec/trainer");
    let ml_policy = runtime_spec.get("mlPolicy").filter(|p| !p.is_null());
    let mut out = Vec::with_capacity(rjs.len());
    for rj in rjs {
        let mut rj = rj.clone();
        let ancestor = rj
            .pointer("/template/metadata/labels")
            .and_then(|l| l.get(ANCESTOR_LABEL))
            .and_then(Value::as_str);
        let is_trainer = ancestor == Some(ANCESTOR_TRAINER);
        let mut count = int_at(&rj, "/template/spec/parallelism").unwrap_or(1);
        if is_trainer {
            if let Some(policy) = ml_policy {
                count = int_at(policy, "/numNodes").unwrap_or(1);
            }
            if let Some(n) = trainer.and_then(|t| int_at(t, "/numNodes")) {
                count = n;
            }
            if let Some(t) = trainer {
                override_node_container(&mut rj, t);
            }
        }
        let count = count.max(1);
        if let Some(spec) = rj
            .pointer_mut("/template/spec")
            .and_then(Value::as_object_mut)
        {
            spec.insert("parallelism".into(), count.into());
            spec.insert("completions".into(), count.into());
        }
        out.push(rj);
    }
    Ok(out)
}

fn int_at(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_i64)
}

/// The trainer node container with the TrainJob's `spec.trainer` overrides (the trainer's
/// `newRuntimeInfo` and its ML policy plugins): image, command and args replaced, env
/// entries upserted by name, and `resourcesPerNode` merged key by key over its resources.
fn override_node_container(rj: &mut Value, trainer: &Value) {
    let Some(containers) = rj
        .pointer_mut("/template/spec/template/spec/containers")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let Some(node) = containers
        .iter_mut()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(NODE_CONTAINER))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for field in ["image", "command", "args"] {
        if let Some(v) = trainer.get(field).filter(|v| !v.is_null()) {
            node.insert(field.into(), v.clone());
        }
    }
    if let Some(env) = trainer.get("env").and_then(Value::as_array) {
        let list = node.entry("env").or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            for e in env {
                match list.iter_mut().find(|x| x.get("name") == e.get("name")) {
                    Some(x) => *x = e.clone(),
                    None => list.push(e.clone()),
                }
            }
        }
    }
    if let Some(res) = trainer.get("resourcesPerNode").filter(|r| r.is_object()) {
        let base = node.entry("resources").or_insert_with(|| json!({}));
        json_patch::merge(base, res);
    }
}

/// Index of Kueue's runtime patch in the TrainJob's `spec.runtimePatches`.
fn kueue_patch_index(job: &Value) -> Option<usize> {
    job.pointer("/spec/runtimePatches")
        .and_then(Value::as_array)?
        .iter()
        .position(|p| p.get("manager").and_then(Value::as_str) == Some(RUNTIME_PATCH_MANAGER))
}

/// Kueue's runtime patch as its webhook adds it: nothing in it yet.
fn empty_kueue_patch() -> Value {
    json!({
        "manager": RUNTIME_PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {}}}
    })
}

impl JobIntegration for TrainJob {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(GROUP, VERSION, "TrainJob")
    }

    fn framework(&self) -> &'static str {
        "trainer.kubeflow.org/trainjob"
    }

    fn admission_carrier(&self) -> Option<&'static dyn AdmissionCarrier> {
        Some(&RuntimePatchCarrier)
    }

    /// The runtime `spec.runtimeRef` names.
    fn dependencies(&self, job: &Value) -> Result<Vec<Dependency>, IntegrationError> {
        Ok(vec![runtime_ref(job)?])
    }

    fn dependency_resources(&self) -> Vec<ApiResource> {
        [
            (TRAINING_RUNTIME, "trainingruntimes"),
            (CLUSTER_TRAINING_RUNTIME, "clustertrainingruntimes"),
        ]
        .into_iter()
        .map(|(kind, plural)| {
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural)
        })
        .collect()
    }

    /// The TrainJob with `spec.replicatedJobs` set to its JobSet's, built from the runtime.
    fn resolve(&self, job: &Value, found: &[Option<Value>]) -> Result<Value, IntegrationError> {
        let dep = runtime_ref(job)?;
        let Some(runtime) = found.first().and_then(Option::as_ref) else {
            let at = dep
                .namespace
                .as_ref()
                .map_or(String::new(), |ns| format!("{ns}/"));
            return Err(FieldError::not_found(
                &Path::new("spec").child("runtimeRef").child("name"),
                &format!("{} {at}{}", dep.resource.kind, dep.name),
            )
            .into());
        };
        let spec = runtime.get("spec").cloned().unwrap_or_else(|| json!({}));
        let rjs = replicated_jobs(job, &spec)?;
        let mut resolved = job.clone();
        if let Some(s) = resolved.get_mut("spec").and_then(Value::as_object_mut) {
            s.insert("replicatedJobs".into(), Value::Array(rjs));
        }
        Ok(resolved)
    }

    /// Kueue's: the `Complete` or `Failed` condition, with its message.
    fn finished(&self, job: &JobObject<'_>) -> Option<Outcome> {
        super::outcome_from_conditions(job, "Complete", "Failed")
    }

    /// Kueue's: some Job of its JobSet is still active.
    fn is_active(&self, job: &JobObject<'_>) -> bool {
        job.status().jobs_status.iter().any(|j| j.active > 0)
    }

    /// Kueue's: the JobSet's replicas (read from the resolved job) all ready or succeeded.
    /// A TrainJob not resolved against its runtime is never ready.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        let Some(rjs) = job.spec().replicated_jobs.as_deref() else {
            return false;
        };
        let replicas: i64 = rjs.iter().map(|r| i64::from(r.replicas.unwrap_or(1))).sum();
        let ready: i64 = job
            .status()
            .jobs_status
            .iter()
            .map(|j| j.ready + j.succeeded)
            .sum();
        replicas == ready
    }

    /// The JobSet's pod sets, once [`JobIntegration::resolve`] has put its replicated jobs
    /// in; none before.
    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        super::jobset::JobSet.pod_sets(job)
    }

    fn is_suspended(&self, job: &JobObject<'_>) -> bool {
        super::spec_suspended(job)
    }

    fn suspend_patch(&self, suspend: bool) -> Value {
        super::spec_suspend_patch(suspend)
    }

    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder) {
        super::suspend_via_spec(job, patch);
    }

    /// Kueue's `Default`: a managed TrainJob gets Kueue's empty runtime patch, which a
    /// start fills (added once).
    fn default_on_create(
        &self,
        job: &JobObject<'_>,
        _opts: &RuleOptions,
        patch: &mut PatchBuilder,
    ) {
        let patches = &job.spec().runtime_patches;
        if patches.iter().any(|p| p.manager == RUNTIME_PATCH_MANAGER) {
            return;
        }
        patch.push_item(
            &["spec", "runtimePatches"],
            !patches.is_empty(),
            empty_kueue_patch(),
        );
    }
}

/// Kueue's TrainJob start and stop: the admission lives in Kueue's runtime patch.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimePatchCarrier;

impl AdmissionCarrier for RuntimePatchCarrier {
    /// Kueue's `RunWithPodSetsInfo`: one replicated job patch per pod set, named after it,
    /// its pod template holding the pod set's additions; the patch is added if missing.
    fn inject(&self, job: &mut Value, pod_sets: &[(String, Value)]) {
        let replicated: Vec<Value> = pod_sets
            .iter()
            .map(|(name, template)| {
                json!({"name": name, "template": {"spec": {"template": template}}})
            })
            .collect();
        let index = match kueue_patch_index(job) {
            Some(i) => i,
            None => {
                let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
                    return;
                };
                let list = spec.entry("runtimePatches").or_insert_with(|| json!([]));
                let Some(list) = list.as_array_mut() else {
                    return;
                };
                list.push(empty_kueue_patch());
                list.len() - 1
            }
        };
        let at = format!("/spec/runtimePatches/{index}");
        let Some(p) = job.pointer_mut(&at).and_then(Value::as_object_mut) else {
            return;
        };
        let spec = p
            .entry("trainingRuntimeSpec")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|s| s.entry("template").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
            .map(|t| t.entry("spec").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut);
        if let Some(spec) = spec {
            spec.insert("replicatedJobs".into(), Value::Array(replicated));
        }
    }

    /// Kueue's `RestorePodSetsInfo`: Kueue's patch loses its replicated jobs.
    fn restore(&self, job: &mut Value) {
        let Some(index) = kueue_patch_index(job) else {
            return;
        };
        let at = format!("/spec/runtimePatches/{index}/trainingRuntimeSpec/template/spec");
        if let Some(spec) = job.pointer_mut(&at).and_then(Value::as_object_mut) {
            spec.remove("replicatedJobs");
        }
    }
}

#[cfg(test)]
mod tests;
