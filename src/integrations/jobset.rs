//! JobSet (jobset.x-k8s.io/v1alpha2) integration.
//!
//! One pod set per replicated job, named after it, with count = replicas × pods per Job;
//! suspension is `spec.suspend`. Topology annotations live on each Job's pod template.

use super::object::JobObject;
use super::{JobIntegration, Outcome, PatchBuilder, PodSetRef};
use crate::api::constants::JOB_COMPLETION_INDEX_LABEL;
use crate::api::validate::Path;
use json_patch::jsonptr::PointerBuf;
use kube::core::GroupVersionKind;
use std::borrow::Cow;

/// The JobSet integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct JobSet;

impl JobIntegration for JobSet {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet")
    }

    fn framework(&self) -> &'static str {
        "jobset.x-k8s.io/jobset"
    }

    /// Kueue's: the `Completed` or `Failed` condition, with its message.
    fn finished(&self, job: &JobObject<'_>) -> Option<Outcome> {
        super::outcome_from_conditions(job, "Completed", "Failed")
    }

    /// Kueue's: no `managedBy`, or the JobSet controller's own.
    fn may_default_managed_by(&self, job: &JobObject<'_>) -> bool {
        job.spec()
            .managed_by
            .as_deref()
            .is_none_or(|m| m == "jobset.sigs.k8s.io/jobset-controller")
    }

    /// Kueue's JobSet adapter copies the spec as it is, without `managedBy`.
    fn multikueue_spec(&self, spec: &serde_json::Value) -> Option<serde_json::Value> {
        Some(super::spec_without_managed_by(spec))
    }

    /// Kueue's: some replicated job still has an active Job.
    fn is_active(&self, job: &JobObject<'_>) -> bool {
        job.status()
            .replicated_jobs_status
            .iter()
            .any(|r| r.active > 0)
    }

    /// Kueue's: every Job of every replicated job is ready or succeeded.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        let replicas: i64 = job
            .spec()
            .replicated_jobs
            .iter()
            .flatten()
            .map(|r| i64::from(r.replicas.unwrap_or(1)))
            .sum();
        let ready: i64 = job
            .status()
            .replicated_jobs_status
            .iter()
            .map(|r| r.ready + r.succeeded)
            .sum();
        replicas == ready
    }

    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        let rjs = job.spec().replicated_jobs.as_deref().unwrap_or_default();
        rjs.iter()
            .enumerate()
            .map(|(i, rj)| {
                let job_spec = rj.template.as_ref().and_then(|t| t.spec.as_deref());
                let pod_template = job_spec.and_then(|s| s.template.as_ref());
                let per_job = job_spec.map_or(1, super::job_pods_count);
                PodSetRef {
                    name: Cow::Borrowed(rj.name.as_str()),
                    count: super::times(rj.replicas, per_job),
                    pointer: PointerBuf::from_tokens([
                        "spec",
                        "replicatedJobs",
                        &i.to_string(),
                        "template",
                        "spec",
                        "template",
                    ]),
                    meta_path: Path::new("spec")
                        .child("replicatedJobs")
                        .index(i)
                        .child("template")
                        .child("spec")
                        .child("template")
                        .child("metadata"),
                    meta: pod_template.and_then(|t| t.metadata.as_ref()),
                    spec: pod_template.and_then(|t| t.spec.as_deref()),
                    pod_index_label: Some(JOB_COMPLETION_INDEX_LABEL),
                    min_count: None,
                    default_template: None,
                }
            })
            .collect()
    }

    fn is_suspended(&self, job: &JobObject<'_>) -> bool {
        super::spec_suspended(job)
    }

    fn suspend_patch(&self, suspend: bool) -> serde_json::Value {
        super::spec_suspend_patch(suspend)
    }

    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder) {
        super::suspend_via_spec(job, patch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrations::RuleOptions;

    /// A replicated job with no replicas is a pod set of count 0 (Kueue's
    /// `PodsCount`), which reserves no quota: nothing is held for pods that never run.
    #[test]
    fn a_replicated_job_without_replicas_reserves_nothing() {
        let v = serde_json::json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "ns", "uid": "u1"},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 0, "template": {"spec": {
                "parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "1"}}}]}}}}}]}});
        let wl = JobSet.workload(&v).expect("workload");
        assert_eq!(wl.spec.pod_sets.len(), 1);
        assert_eq!(wl.spec.pod_sets[0].count, 0);
    }

    #[test]
    fn pod_sets_per_replicated_job() {
        let v: serde_json::Value = serde_norway::from_str(
            r#"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: ns, uid: u1}
spec:
  replicatedJobs:
  - name: leader
    template:
      spec:
        template:
          spec: {containers: [{name: c, image: i}]}
  - name: workers
    replicas: 3
    template:
      spec:
        parallelism: 4
        completions: 4
        template:
          metadata:
            annotations: {kueue.x-k8s.io/podset-required-topology: rack}
          spec: {containers: [{name: c, image: i}]}
"#,
        )
        .expect("yaml");
        let o = JobObject::from_value(&v).expect("view");
        let ps = JobSet.pod_sets(&o);
        assert_eq!(
            ps.iter()
                .map(|p| (p.name.to_string(), p.count))
                .collect::<Vec<_>>(),
            [("leader".to_string(), 1), ("workers".to_string(), 12)]
        );
        assert_eq!(
            ps[1].meta_path.to_string(),
            "spec.replicatedJobs[1].template.spec.template.metadata"
        );
        assert!(
            JobSet
                .validate_create(&o, &RuleOptions::default())
                .is_empty()
        );
        let wl = JobSet.workload(&v).expect("workload");
        assert_eq!(wl.spec.pod_sets.len(), 2);
        assert_eq!(
            wl.spec.pod_sets[1]
                .topology_request
                .as_ref()
                .and_then(|t| t.required.as_deref()),
            Some("rack")
        );
        assert!(
            wl.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("jobset-js-"))
        );
        let mut p = PatchBuilder::new();
        JobSet.suspend(&o, &mut p);
        assert_eq!(p.into_ops().len(), 1);
    }
}
