//! Kubeflow PyTorchJob (kubeflow.org/v1) integration.
//!
//! One pod set per replica type (`Master` first, then `Worker`), named in lower case like
//! Kueue does, count = replicas (default 1); suspension is `spec.runPolicy.suspend`.

use super::object::JobObject;
use super::{JobIntegration, PatchBuilder, PodSetRef};
use crate::api::validate::Path;
use json_patch::jsonptr::PointerBuf;
use kube::core::GroupVersionKind;
use std::borrow::Cow;

/// Label with a pod's index within its replica type, set by the training operator.
pub const REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";

/// Replica types in Kueue's pod set order; other types follow alphabetically.
const ORDER: [&str; 2] = ["Master", "Worker"];

/// The PyTorchJob integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct PyTorchJob;

impl JobIntegration for PyTorchJob {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob")
    }

    /// Kueue's `KubeflowJob.PodsReady`: the job's `Running` condition is true.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        job.status_condition_true("Running")
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
                let template = rs.template.as_ref();
                Some(PodSetRef {
                    name: Cow::Owned(key.to_lowercase()),
                    count: rs.replicas.unwrap_or(1),
                    pointer: PointerBuf::from_tokens([
                        "spec",
                        "pytorchReplicaSpecs",
                        key.as_str(),
                        "template",
                    ]),
                    meta_path: Path::new("spec")
                        .child("pytorchReplicaSpecs")
                        .key(key)
                        .child("template")
                        .child("metadata"),
                    meta: template.and_then(|t| t.metadata.as_ref()),
                    spec: template.and_then(|t| t.spec.as_deref()),
                    pod_index_label: Some(REPLICA_INDEX_LABEL),
                    min_count: None,
                })
            })
            .collect()
    }

    fn is_suspended(&self, job: &JobObject<'_>) -> bool {
        job.spec()
            .run_policy
            .as_ref()
            .and_then(|r| r.suspend)
            .unwrap_or(false)
    }

    fn suspend_patch(&self, suspend: bool) -> serde_json::Value {
        serde_json::json!({ "spec": { "runPolicy": { "suspend": suspend } } })
    }

    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder) {
        if self.is_suspended(job) {
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
