//! KubeRay RayCluster and RayJob (ray.io/v1) integrations.
//!
//! A RayCluster has a `head` pod set (one pod) and one pod set per worker group, count =
//! replicas × numOfHosts. A RayJob's pod sets are those of its `rayClusterSpec`; Kueue's
//! extra submitter pod set is not modelled (the submitter Job is small and short-lived).
//! Both suspend through `spec.suspend`.

use super::object::{JobObject, SpecView};
use super::{JobIntegration, PatchBuilder, PodSetRef, RuleOptions, tas};
use crate::api::constants::MAX_POD_SETS;
use crate::api::validate::{FieldError, Path};
use json_patch::jsonptr::PointerBuf;
use kube::core::GroupVersionKind;
use std::borrow::Cow;

/// Name of the head group's pod set (reserved: no worker group may use it).
pub const HEAD_POD_SET_NAME: &str = "head";

/// The RayCluster integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct RayCluster;

/// The RayJob integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct RayJob;

/// Pod sets of a RayCluster spec found at `root` (JSON pointer tokens and field path).
fn cluster_pod_sets<'o>(
    spec: &'o SpecView<'o>,
    root_tokens: &[&str],
    root_path: &Path,
) -> Vec<PodSetRef<'o>> {
    let mut out = Vec::new();
    let tokens = |rest: &[&str]| {
        PointerBuf::from_tokens(root_tokens.iter().copied().chain(rest.iter().copied()))
    };
    let head = spec.head_group_spec.as_ref();
    let head_template = head.and_then(|h| h.template.as_ref());
    out.push(PodSetRef {
        name: Cow::Borrowed(HEAD_POD_SET_NAME),
        count: 1,
        pointer: tokens(&["headGroupSpec", "template"]),
        meta_path: root_path
            .child("headGroupSpec")
            .child("template")
            .child("metadata"),
        meta: head_template.and_then(|t| t.metadata.as_ref()),
        spec: head_template.and_then(|t| t.spec.as_deref()),
        pod_index_label: None,
        min_count: None,
    });
    for (i, wg) in spec.worker_group_specs.iter().flatten().enumerate() {
        let template = wg.template.as_ref();
        let idx = i.to_string();
        out.push(PodSetRef {
            name: Cow::Borrowed(wg.group_name.as_deref().unwrap_or_default()),
            count: super::times(wg.replicas, wg.num_of_hosts.unwrap_or(1).max(1)),
            pointer: tokens(&["workerGroupSpecs", &idx, "template"]),
            meta_path: root_path
                .child("workerGroupSpecs")
                .index(i)
                .child("template")
                .child("metadata"),
            meta: template.and_then(|t| t.metadata.as_ref()),
            spec: template.and_then(|t| t.spec.as_deref()),
            pod_index_label: None,
            min_count: None,
        });
    }
    out
}

/// Kueue's RayCluster rules for managed clusters: no autoscaling, at most 17 worker groups
/// (18 pod sets with the head), no worker group named `head`; then topology annotations.
fn cluster_rules(
    spec: &SpecView<'_>,
    path: &Path,
    managed: bool,
    opts: &RuleOptions,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if managed {
        if spec.enable_in_tree_autoscaling == Some(true) {
            errs.push(FieldError::invalid_num(
                &path.child("enableInTreeAutoscaling"),
                true,
                "a kueue managed job can use autoscaling only when the ElasticJobsViaWorkloadSlices feature gate is on and the job is an elastic job",
            ));
        }
        let workers = spec.worker_group_specs.as_deref().unwrap_or_default();
        if workers.len() > MAX_POD_SETS - 1 {
            errs.push(FieldError::too_many(
                &path.child("workerGroupSpecs"),
                workers.len(),
                MAX_POD_SETS - 1,
            ));
        }
        for (i, wg) in workers.iter().enumerate() {
            if wg.group_name.as_deref() == Some(HEAD_POD_SET_NAME) {
                errs.push(FieldError::forbidden(
                    &path.child("workerGroupSpecs").index(i).child("groupName"),
                    format!("{HEAD_POD_SET_NAME:?} is reserved for the head group"),
                ));
            }
        }
    }
    if opts.topology_aware_scheduling {
        for ps in cluster_pod_sets(spec, &[], path) {
            errs.extend(tas::validate(&ps.annotations(), &ps.meta_path, ps.count));
        }
    }
    errs
}

impl JobIntegration for RayCluster {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("ray.io", "v1", "RayCluster")
    }

    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        cluster_pod_sets(job.spec(), &["spec"], &Path::new("spec"))
    }

    /// Kueue's `RayCluster.PodsReady`: the cluster's state is `ready`.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        job.status_str("/state") == Some("ready")
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

    fn validate_create(&self, job: &JobObject<'_>, opts: &RuleOptions) -> Vec<FieldError> {
        cluster_rules(job.spec(), &Path::new("spec"), opts.is_managed(job), opts)
    }
}

impl JobIntegration for RayJob {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("ray.io", "v1", "RayJob")
    }

    /// Kueue's `RayJob.PodsReady`: its cluster's state is `ready`.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        job.status_str("/rayClusterStatus/state") == Some("ready")
    }

    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        match job.spec().ray_cluster_spec.as_deref() {
            Some(cluster) => cluster_pod_sets(
                cluster,
                &["spec", "rayClusterSpec"],
                &Path::new("spec").child("rayClusterSpec"),
            ),
            None => Vec::new(),
        }
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

    /// Kueue's RayJob rules for managed jobs: bring your own cluster spec (not a selector of
    /// an existing cluster), shut the cluster down when done, and the RayCluster rules.
    fn validate_create(&self, job: &JobObject<'_>, opts: &RuleOptions) -> Vec<FieldError> {
        let spec = job.spec();
        let path = Path::new("spec");
        let cluster_path = path.child("rayClusterSpec");
        if !opts.is_managed(job) {
            return match spec.ray_cluster_spec.as_deref() {
                Some(c) if opts.topology_aware_scheduling => {
                    cluster_rules(c, &cluster_path, false, opts)
                }
                _ => Vec::new(),
            };
        }
        let has_selector = spec
            .cluster_selector
            .as_ref()
            .is_some_and(|s| !s.is_empty());
        match (has_selector, spec.ray_cluster_spec.as_deref()) {
            (true, Some(_)) => vec![FieldError::invalid_omit(
                &path.child("clusterSelector"),
                "a kueue managed job should not use an existing cluster",
            )],
            // RayJobs running on an existing cluster are not admitted by Kueue.
            (true, None) => Vec::new(),
            (false, None) => vec![FieldError::required(
                &cluster_path,
                "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector",
            )],
            (false, Some(cluster)) => {
                let mut errs = Vec::new();
                if !spec.shutdown_after_job_finishes.unwrap_or(false) {
                    errs.push(FieldError::invalid_num(
                        &path.child("shutdownAfterJobFinishes"),
                        false,
                        "a kueue managed job should delete the cluster after finishing",
                    ));
                }
                errs.extend(cluster_rules(cluster, &cluster_path, true, opts));
                errs
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn ray_cluster_pod_sets_and_rules() {
        let v = json!({
            "metadata": {"name": "rc", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {"template": {"spec": {"containers": []}}},
                "workerGroupSpecs": [
                    {"groupName": "small", "replicas": 2, "numOfHosts": 2, "template": {}},
                    {"groupName": "head", "template": {}}
                ]
            }
        });
        let o = JobObject::from_value(&v).expect("view");
        let ps = RayCluster.pod_sets(&o);
        assert_eq!(
            ps.iter()
                .map(|p| (p.name.to_string(), p.count))
                .collect::<Vec<_>>(),
            [
                ("head".to_string(), 1),
                ("small".to_string(), 4),
                ("head".to_string(), 1)
            ]
        );
        let m = msgs(&RayCluster.validate_create(&o, &RuleOptions::default()));
        assert!(
            m[0].starts_with("spec.enableInTreeAutoscaling: Invalid value: true"),
            "{m:?}"
        );
        assert_eq!(
            m[1],
            "spec.workerGroupSpecs[1].groupName: Forbidden: \"head\" is reserved for the head group"
        );
    }

    #[test]
    fn ray_job_rules() {
        let v = json!({
            "metadata": {"name": "rj", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {}}}}
        });
        let o = JobObject::from_value(&v).expect("view");
        assert_eq!(
            msgs(&RayJob.validate_create(&o, &RuleOptions::default())),
            [
                "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the cluster after finishing"
            ]
        );
        assert_eq!(
            RayJob.pod_sets(&o)[0].meta_path.to_string(),
            "spec.rayClusterSpec.headGroupSpec.template.metadata"
        );
        let v = json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {}});
        let o = JobObject::from_value(&v).expect("view");
        assert!(
            msgs(&RayJob.validate_create(&o, &RuleOptions::default()))[0]
                .starts_with("spec.rayClusterSpec: Required value")
        );
        let v = json!({"metadata": {}, "spec": {}});
        let o = JobObject::from_value(&v).expect("view");
        assert!(
            RayJob
                .validate_create(&o, &RuleOptions::default())
                .is_empty(),
            "unmanaged"
        );
    }
}
