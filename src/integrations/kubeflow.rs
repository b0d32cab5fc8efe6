//! Kubeflow PyTorchJob (kubeflow.org/v1) integration, and the run-policy rules every
//! Kubeflow job kind shares (Kueue's `kubeflowjob`).
//!
//! One pod set per replica type (`Master` first, then `Worker`), named in lower case like
//! Kueue does, count = replicas (default 1); suspension is `spec.runPolicy.suspend`.

use super::object::{JobObject, ReplicaSpecView, Str};
use super::{JobIntegration, Outcome, PatchBuilder, PodSetRef};
use crate::api::validate::Path;
use json_patch::jsonptr::PointerBuf;
use kube::core::GroupVersionKind;
use std::borrow::Cow;

/// Label with a pod's index within its replica type, set by the training operator.
pub const REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";

/// The pod set of one Kubeflow replica type (Kueue's kubeflowjob `PodSets`): named after
/// the type in lower case, `replicas` pods (1 when unset), ranked by the replica index.
pub(crate) fn replica_pod_set<'o>(
    field: &'static str,
    key: &'o Str<'o>,
    rs: &'o ReplicaSpecView<'o>,
) -> PodSetRef<'o> {
    let template = rs.template.as_ref();
    PodSetRef {
        name: Cow::Owned(key.to_lowercase()),
        count: rs.replicas.unwrap_or(1),
        pointer: PointerBuf::from_tokens(["spec", field, key.as_str(), "template"]),
        meta_path: Path::new("spec")
            .child(field)
            .key(key)
            .child("template")
            .child("metadata"),
        meta: template.and_then(|t| t.metadata.as_ref()),
        spec: template.and_then(|t| t.spec.as_deref()),
        pod_index_label: Some(REPLICA_INDEX_LABEL),
        min_count: None,
        default_template: None,
    }
}

/// Replica types in Kueue's pod set order; other types follow alphabetically.
const ORDER: [&str; 2] = ["Master", "Worker"];

/// The PyTorchJob integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct PyTorchJob;

impl JobIntegration for PyTorchJob {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob")
    }

    fn framework(&self) -> &'static str {
        "kubeflow.org/pytorchjob"
    }

    /// Kueue's (kubeflowjob): the `Succeeded` or `Failed` condition, with its message.
    fn finished(&self, job: &JobObject<'_>) -> Option<Outcome> {
        finished(job)
    }

    /// Kueue's: some replica type still has active pods.
    fn is_active(&self, job: &JobObject<'_>) -> bool {
        replicas_active(job)
    }

    /// Kueue's: the `Running` condition.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        running(job)
    }

    /// Kueue's (kubeflowjob `PriorityClass`): the run policy's before the templates'.
    fn scheduling_priority_class<'o>(&self, job: &'o JobObject<'o>) -> Option<&'o str> {
        run_policy_priority_class(job)
    }

    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        let Some(specs) = job.spec().pytorch_replica_specs.as_ref() else {
            return Vec::new();
        };
        let mut types: Vec<&str> = specs.keys().map(|k| k.as_str()).collect();
        types.sort_by_key(|t| (ORDER.iter().position(|o| o == t).unwrap_or(ORDER.len()), *t));
        types
            .into_iter()
            .filter_map(|t| {
                let (key, rs) = specs.get_key_value(t)?;
                Some(replica_pod_set("pytorchReplicaSpecs", key, rs))
            })
            .collect()
    }

    fn is_suspended(&self, job: &JobObject<'_>) -> bool {
        run_policy_suspended(job)
    }

    fn suspend_patch(&self, suspend: bool) -> serde_json::Value {
        run_policy_suspend_patch(suspend)
    }

    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder) {
        suspend_via_run_policy(job, patch);
    }
}

/// Kueue's (kubeflowjob, mpijob) `Finished`: the `Succeeded` or `Failed` condition, with
/// its message.
pub(crate) fn finished(job: &JobObject<'_>) -> Option<Outcome> {
    super::outcome_from_conditions(job, "Succeeded", "Failed")
}

/// Kueue's `IsActive` for Kubeflow jobs: some replica type still has active pods.
pub(crate) fn replicas_active(job: &JobObject<'_>) -> bool {
    job.status()
        .replica_statuses
        .values()
        .any(|r| r.active != 0)
}

/// Kueue's `PodsReady` for Kubeflow jobs: the operator's `Running` condition.
pub(crate) fn running(job: &JobObject<'_>) -> bool {
    job.status().true_condition("Running").is_some()
}

/// `spec.runPolicy.schedulingPolicy.priorityClass`, when set and not empty.
pub(crate) fn run_policy_priority_class<'o>(job: &'o JobObject<'o>) -> Option<&'o str> {
    job.spec()
        .run_policy
        .as_ref()
        .and_then(|r| r.scheduling_policy.as_ref())
        .and_then(|s| s.priority_class.as_deref())
        .filter(|p| !p.is_empty())
}

/// `spec.runPolicy.suspend`.
pub(crate) fn run_policy_suspended(job: &JobObject<'_>) -> bool {
    job.spec()
        .run_policy
        .as_ref()
        .and_then(|r| r.suspend)
        .unwrap_or(false)
}

/// The merge patch setting `spec.runPolicy.suspend`.
pub(crate) fn run_policy_suspend_patch(suspend: bool) -> serde_json::Value {
    serde_json::json!({ "spec": { "runPolicy": { "suspend": suspend } } })
}

/// Adds `spec.runPolicy.suspend: true` unless already set, creating the parents a job
/// lacks, so a second pass adds nothing.
pub(crate) fn suspend_via_run_policy(job: &JobObject<'_>, patch: &mut PatchBuilder) {
    if run_policy_suspended(job) {
        return;
    }
    let spec_exists = job.spec.is_some();
    let run_policy_exists = job.spec().run_policy.is_some();
    if spec_exists {
        patch.set_entry(
            &["spec", "runPolicy"],
            run_policy_exists,
            "suspend",
            true.into(),
        );
    } else {
        patch.set_entry(
            &["spec"],
            false,
            "runPolicy",
            serde_json::json!({"suspend": true}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn master_before_worker_and_run_policy_suspend() {
        let v = json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": "ns"},
            "spec": {"pytorchReplicaSpecs": {
                "Worker": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            }}
        });
        let o = JobObject::from_value(&v).expect("view");
        let ps = PyTorchJob.pod_sets(&o);
        assert_eq!(
            ps.iter()
                .map(|p| (p.name.to_string(), p.count))
                .collect::<Vec<_>>(),
            [("master".to_string(), 1), ("worker".to_string(), 3)]
        );
        assert!(!PyTorchJob.is_suspended(&o));
        let mut p = PatchBuilder::new();
        PyTorchJob.suspend(&o, &mut p);
        let mut doc = v.clone();
        json_patch::patch(&mut doc, &p.into_ops()).expect("applies");
        assert_eq!(doc["spec"]["runPolicy"]["suspend"], true);
        let o2 = JobObject::from_value(&doc).expect("view");
        assert!(PyTorchJob.is_suspended(&o2));
        let wl = PyTorchJob.workload(&v).expect("workload");
        assert_eq!(wl.spec.pod_sets[1].name, "worker");
    }
}
