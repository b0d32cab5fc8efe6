//! batch/v1 Job integration, following Kueue's job controller.

use super::{IntegrationError, JobIntegration};
use crate::api::constants::{
    JOB_COMPLETION_INDEX_LABEL, JOB_MIN_PARALLELISM_ANNOTATION, PODSET_GROUP_NAME_ANNOTATION,
    PODSET_PREFERRED_TOPOLOGY_ANNOTATION, PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
    PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, PODSET_SLICE_SIZE_ANNOTATION,
    PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
};
use crate::api::validate::{FieldError, Path};
use crate::api::{DEFAULT_POD_SET_NAME, PodSet, PodSetTopologyRequest, Workload};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;
use std::collections::BTreeMap;

/// The batch/v1 Job integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchJob;

impl JobIntegration for BatchJob {
    type Object = Job;

    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("batch", "v1", "Job")
    }

    /// One pod set `main`: count = min(parallelism, completions), minCount from
    /// `kueue.x-k8s.io/job-min-parallelism`, topology request from template annotations.
    fn pod_sets(&self, job: &Job) -> Result<Vec<PodSet>, IntegrationError> {
        let spec = job.spec.clone().unwrap_or_default();
        let count = pods_count(job);
        let mut errors = Vec::new();
        let min_count = min_count(job, count).unwrap_or_else(|e| {
            errors.push(e);
            None
        });
        let annotations = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone());
        let path = Path::new("spec")
            .child("template")
            .child("metadata")
            .child("annotations");
        let topology_request =
            topology_request(annotations.as_ref(), &path).unwrap_or_else(|mut e| {
                errors.append(&mut e);
                None
            });
        if !errors.is_empty() {
            return Err(IntegrationError { errors });
        }
        Ok(vec![PodSet {
            name: DEFAULT_POD_SET_NAME.to_string(),
            template: clean_template(spec.template),
            count,
            min_count,
            topology_request,
        }])
    }

    fn is_suspended(&self, job: &Job) -> bool {
        job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
    }

    fn suspend_patch(&self, suspend: bool) -> serde_json::Value {
        serde_json::json!({ "spec": { "suspend": suspend } })
    }
}

/// The Workload Kueue would create for a batch/v1 Job.
pub fn workload_for(job: &Job) -> Result<Workload, IntegrationError> {
    BatchJob.workload(job)
}

/// Pods the job runs at once: parallelism (default 1), capped by completions.
pub fn pods_count(job: &Job) -> i32 {
    let spec = job.spec.as_ref();
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    match spec.and_then(|s| s.completions) {
        Some(c) if c < parallelism => c,
        _ => parallelism,
    }
}

/// `kueue.x-k8s.io/job-min-parallelism`, which must lie in `1..count` (Kueue's webhook rule).
fn min_count(job: &Job, count: i32) -> Result<Option<i32>, FieldError> {
    let Some(raw) = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(JOB_MIN_PARALLELISM_ANNOTATION))
    else {
        return Ok(None);
    };
    let path = Path::new("metadata")
        .child("annotations")
        .key(JOB_MIN_PARALLELISM_ANNOTATION);
    let v: i32 = raw
        .parse()
        .map_err(|e: std::num::ParseIntError| FieldError::invalid(&path, raw, e.to_string()))?;
    if v <= 0 || v >= count {
        let detail = format!("should be between 0 and {}", count - 1);
        return Err(FieldError::invalid_num(&path, v, detail));
    }
    Ok(Some(v))
}

/// Builds the pod set's topology request from the `podset-*` annotations of the template,
/// or `None` when the pod set does not ask for topology-aware scheduling.
pub fn topology_request(
    annotations: Option<&BTreeMap<String, String>>,
    path: &Path,
) -> Result<Option<PodSetTopologyRequest>, Vec<FieldError>> {
    let Some(a) = annotations else {
        return Ok(None);
    };
    let get = |k: &str| a.get(k).cloned();
    let required = get(PODSET_REQUIRED_TOPOLOGY_ANNOTATION);
    let preferred = get(PODSET_PREFERRED_TOPOLOGY_ANNOTATION);
    let unconstrained = get(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION);
    let slice_topology = get(PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION);
    let slice_size = get(PODSET_SLICE_SIZE_ANNOTATION);
    let group = get(PODSET_GROUP_NAME_ANNOTATION);
    let mut errs = Vec::new();
    let modes: Vec<&str> = [
        (PODSET_REQUIRED_TOPOLOGY_ANNOTATION, required.is_some()),
        (PODSET_PREFERRED_TOPOLOGY_ANNOTATION, preferred.is_some()),
        (
            PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
            unconstrained.is_some(),
        ),
    ]
    .into_iter()
    .filter_map(|(k, set)| set.then_some(k))
    .collect();
    if modes.len() > 1 {
        let detail = format!("must not contain more than one topology annotation: {modes:?}");
        errs.push(FieldError::invalid_omit(path, detail));
    }
    let unconstrained = match unconstrained.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            let p = path.key(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION);
            errs.push(FieldError::invalid(
                &p,
                other,
                "must be a boolean (\"true\" or \"false\")",
            ));
            None
        }
    };
    let slice_size = match (&slice_topology, slice_size.as_deref()) {
        (Some(_), None) => {
            let detail =
                format!("must be set when {PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION} is set");
            errs.push(FieldError::required(
                &path.key(PODSET_SLICE_SIZE_ANNOTATION),
                detail,
            ));
            None
        }
        (_, Some(raw)) => match raw.parse::<i32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                let p = path.key(PODSET_SLICE_SIZE_ANNOTATION);
                errs.push(FieldError::invalid(&p, raw, "must be a positive integer"));
                None
            }
        },
        (None, None) => None,
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    let wants_tas = required.is_some()
        || preferred.is_some()
        || unconstrained.is_some()
        || slice_topology.is_some()
        || group.is_some();
    if !wants_tas {
        return Ok(None);
    }
    Ok(Some(PodSetTopologyRequest {
        required,
        preferred,
        unconstrained,
        pod_index_label: Some(JOB_COMPLETION_INDEX_LABEL.to_string()),
        sub_group_index_label: None,
        sub_group_count: None,
        pod_set_group_name: group,
        pod_set_slice_required_topology: slice_topology,
        pod_set_slice_size: slice_size,
    }))
}

/// Workload pod templates may only carry labels and annotations in their metadata.
fn clean_template(t: PodTemplateSpec) -> PodTemplateSpec {
    let metadata = t.metadata.map(|m| ObjectMeta {
        labels: m.labels,
        annotations: m.annotations,
        ..ObjectMeta::default()
    });
    PodTemplateSpec {
        metadata,
        spec: t.spec,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::validate::validate_workload;

    fn job(yaml: &str) -> Job {
        serde_yaml::from_str(yaml).expect("test job parses")
    }

    const JOB: &str = r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: sample-job
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: user-queue
    kueue.x-k8s.io/priority-class: high
  annotations:
    kueue.x-k8s.io/job-min-parallelism: "2"
spec:
  parallelism: 5
  completions: 4
  suspend: true
  template:
    metadata:
      name: ignored
      labels: {app: x}
      annotations:
        kueue.x-k8s.io/podset-required-topology: cloud.com/rack
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources: {requests: {cpu: "1"}}
"#;

    #[test]
    fn builds_the_workload_kueue_would() {
        let j = job(JOB);
        let wl = workload_for(&j).expect("valid job");
        assert_eq!(wl.metadata.name.as_deref(), Some("job-sample-job-4b8c4"));
        assert_eq!(wl.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(wl.spec.queue_name.as_deref(), Some("user-queue"));
        assert_eq!(
            wl.spec.priority_class_ref,
            Some(crate::api::PriorityClassRef::workload("high"))
        );
        let ps = &wl.spec.pod_sets[0];
        assert_eq!(
            (ps.name.as_str(), ps.count, ps.min_count),
            ("main", 4, Some(2))
        );
        let tr = ps.topology_request.as_ref().expect("TAS requested");
        assert_eq!(tr.required.as_deref(), Some("cloud.com/rack"));
        assert_eq!(
            tr.pod_index_label.as_deref(),
            Some(JOB_COMPLETION_INDEX_LABEL)
        );
        assert_eq!(
            ps.template.metadata.as_ref().and_then(|m| m.name.clone()),
            None
        );
        assert!(BatchJob.is_suspended(&j));
        assert_eq!(BatchJob.suspend_patch(false)["spec"]["suspend"], false);
        assert!(BatchJob.queue_name(&j).is_some());
        assert_eq!(BatchJob.kind(), "Job");
        // Missing priority is the engine's to resolve; everything else validates.
        let errs = validate_workload(&wl);
        assert_eq!(errs.len(), 1, "{errs:?}");
    }

    #[test]
    fn uid_feeds_name_label_and_owner() {
        let mut j = job(JOB);
        j.metadata.uid = Some("abc-uid".into());
        let wl = workload_for(&j).expect("valid job");
        assert_eq!(wl.metadata.name.as_deref(), Some("job-sample-job-4586c"));
        let owner = &wl.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.api_version.as_str()),
            ("Job", "batch/v1")
        );
        assert_eq!(
            wl.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kueue.x-k8s.io/job-uid"))
                .map(String::as_str),
            Some("abc-uid")
        );
    }

    #[test]
    fn defaults_and_pod_priority_class() {
        let j = job(
            "metadata: {name: j}\nspec:\n  template:\n    spec:\n      priorityClassName: pod-high\n      containers: []\n",
        );
        let wl = workload_for(&j).expect("valid job");
        let ps = &wl.spec.pod_sets[0];
        assert_eq!(
            (ps.count, ps.min_count, ps.topology_request.is_none()),
            (1, None, true)
        );
        assert_eq!(
            wl.spec.priority_class_ref,
            Some(crate::api::PriorityClassRef::pod("pod-high"))
        );
        assert_eq!(wl.spec.queue_name, None);
    }

    #[test]
    fn bad_annotations_are_field_errors() {
        let j = job(
            "metadata:\n  name: j\n  annotations: {kueue.x-k8s.io/job-min-parallelism: '1'}\nspec: {parallelism: 1, template: {}}\n",
        );
        let e = workload_for(&j).expect_err("min >= count").to_string();
        assert_eq!(
            e,
            "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: 1: should be between 0 and 0"
        );
        let j = job(
            "metadata: {name: j}\nspec:\n  template:\n    metadata:\n      annotations:\n        kueue.x-k8s.io/podset-required-topology: a\n        kueue.x-k8s.io/podset-preferred-topology: b\n        kueue.x-k8s.io/podset-slice-required-topology: c\n",
        );
        let e = workload_for(&j)
            .expect_err("conflicting annotations")
            .to_string();
        assert!(
            e.contains("must not contain more than one topology annotation"),
            "{e}"
        );
        assert!(
            e.contains("kueue.x-k8s.io/podset-slice-size]: Required value"),
            "{e}"
        );
        let j = job(
            "metadata:\n  name: j\n  labels: {kueue.x-k8s.io/max-exec-time-seconds: '0'}\nspec: {template: {}}\n",
        );
        assert!(workload_for(&j).is_err());
    }
}
