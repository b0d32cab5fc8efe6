//! Job integrations: turning a job-like object into the Workload Kueue would create for it.
//!
//! Each job kind implements [`JobIntegration`]; everything else (queues, admission,
//! suspension) works on the resulting [`Workload`] and never special-cases a kind.

#![warn(missing_docs)]

pub mod batch_job;
mod sha1;

use crate::api::constants::{
    JOB_UID_LABEL, MAX_EXEC_TIME_SECONDS_LABEL, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL,
};
use crate::api::validate::FieldError;
use crate::api::{PodSet, PriorityClassRef, Workload, WorkloadSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::core::GroupVersionKind;
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

/// One job kind Kueue can manage.
pub trait JobIntegration {
    /// The Kubernetes object type of the job.
    type Object: Resource<DynamicType = ()>;

    /// Group/version/kind of the job object, e.g. `batch/v1 Job`.
    fn gvk(&self) -> GroupVersionKind;

    /// Kind name, e.g. `Job`.
    fn kind(&self) -> String {
        self.gvk().kind
    }

    /// The pod sets the job needs admitted together.
    fn pod_sets(&self, obj: &Self::Object) -> Result<Vec<PodSet>, IntegrationError>;

    /// Whether the job is currently suspended (not running pods).
    fn is_suspended(&self, obj: &Self::Object) -> bool;

    /// JSON merge patch that suspends (`true`) or resumes (`false`) the job.
    fn suspend_patch(&self, suspend: bool) -> serde_json::Value;

    /// LocalQueue named by the `kueue.x-k8s.io/queue-name` label.
    fn queue_name(&self, obj: &Self::Object) -> Option<String> {
        obj.meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(QUEUE_NAME_LABEL))
            .filter(|q| !q.is_empty())
            .cloned()
    }

    /// Kueue's workload name for this object: `<kind>-<name>-<5 hex of sha1>`.
    fn workload_name(&self, obj: &Self::Object) -> String {
        let meta = obj.meta();
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
    fn workload(&self, obj: &Self::Object) -> Result<Workload, IntegrationError> {
        let pod_sets = self.pod_sets(obj)?;
        let meta = obj.meta();
        let gvk = self.gvk();
        let labels = meta.labels.clone().unwrap_or_default();
        let max_exec = max_execution_time(&labels)?;
        let priority_class_ref = labels
            .get(PRIORITY_CLASS_LABEL)
            .filter(|p| !p.is_empty())
            .map(|p| PriorityClassRef::workload(p))
            .or_else(|| {
                pod_sets
                    .iter()
                    .filter_map(|ps| ps.template.spec.as_ref()?.priority_class_name.as_deref())
                    .find(|p| !p.is_empty())
                    .map(PriorityClassRef::pod)
            });
        let mut wl_labels = std::collections::BTreeMap::new();
        let owner = meta.uid.as_ref().map(|uid| {
            wl_labels.insert(JOB_UID_LABEL.to_string(), uid.clone());
            OwnerReference {
                api_version: gvk.api_version(),
                kind: gvk.kind.clone(),
                name: meta.name.clone().unwrap_or_default(),
                uid: uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }
        });
        Ok(Workload {
            metadata: ObjectMeta {
                name: Some(self.workload_name(obj)),
                namespace: meta.namespace.clone(),
                labels: (!wl_labels.is_empty()).then_some(wl_labels),
                owner_references: owner.map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            spec: WorkloadSpec {
                pod_sets,
                queue_name: self.queue_name(obj),
                priority_class_ref,
                priority: None,
                active: None,
                maximum_execution_time_seconds: max_exec,
            },
            status: None,
        })
    }
}

/// Kueue's `GetWorkloadNameForOwnerWithGVK`: `lower(kind)-name`, truncated to leave room for
/// `-` and 5 hex characters of SHA-1(`kind\ngroup\nname\nuid`).
pub fn workload_name(owner_name: &str, owner_uid: &str, gvk: &GroupVersionKind) -> String {
    let hash_input = format!("{}\n{}\n{owner_name}\n{owner_uid}", gvk.kind, gvk.group);
    let hash = sha1::hex_digest(hash_input.as_bytes());
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

fn max_execution_time(
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<Option<i32>, IntegrationError> {
    let Some(v) = labels.get(MAX_EXEC_TIME_SECONDS_LABEL) else {
        return Ok(None);
    };
    let path = crate::api::validate::Path::new("metadata")
        .child("labels")
        .key(MAX_EXEC_TIME_SECONDS_LABEL);
    match v.parse::<i32>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        Ok(_) => Err(FieldError::invalid(&path, v, "should be greater than 0").into()),
        Err(e) => Err(FieldError::invalid(&path, v, e.to_string()).into()),
    }
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
}
