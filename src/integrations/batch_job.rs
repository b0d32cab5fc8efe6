//! batch/v1 Job integration, following Kueue's job controller and job webhook.
//!
//! One pod set `main` with count = min(parallelism, completions); suspension is
//! `spec.suspend`; partial admission through `kueue.x-k8s.io/job-min-parallelism`.

use super::object::JobObject;
use super::{IntegrationError, JobIntegration, Outcome, PatchBuilder, PodSetRef, RuleOptions, tas};
use crate::api::constants::{
    JOB_COMPLETION_INDEX_LABEL, JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    JOB_MIN_PARALLELISM_ANNOTATION,
};
use crate::api::validate::{FieldError, JobSpecFields, Path, validate_job_spec};
use crate::api::{DEFAULT_POD_SET_NAME, Workload};
use json_patch::jsonptr::PointerBuf;
use k8s_openapi::api::batch::v1::Job;
use kube::core::GroupVersionKind;
use std::borrow::Cow;

/// The batch/v1 Job integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchJob;

impl JobIntegration for BatchJob {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("batch", "v1", "Job")
    }

    fn framework(&self) -> &'static str {
        "batch/job"
    }

    /// Kueue's: `Complete` or `Failed`, with the condition's message.
    fn finished(&self, job: &JobObject<'_>) -> Option<Outcome> {
        super::outcome_from_conditions(job, "Complete", "Failed")
    }

    /// Kueue's: no `managedBy`, or the Job controller's own.
    fn may_default_managed_by(&self, job: &JobObject<'_>) -> bool {
        job.spec()
            .managed_by
            .as_deref()
            .is_none_or(|m| m == "kubernetes.io/job-controller")
    }

    /// The Job controller's (Kueue's `managedLabels` but `batch.kubernetes.io/job-name`,
    /// which the Workload keeps).
    fn generated_template_labels(&self) -> &'static [&'static str] {
        &[
            "job-name",
            "controller-uid",
            "batch.kubernetes.io/controller-uid",
        ]
    }

    /// Kueue's batch Job adapter: the spec without `managedBy` and without the selector and
    /// pod labels the manager's Job controller generated for the manager's copy (the
    /// worker's API server generates its own; `batch.kubernetes.io/job-name` is kept).
    fn multikueue_spec(&self, spec: &serde_json::Value) -> Option<serde_json::Value> {
        let mut spec = super::spec_without_managed_by(spec);
        if let Some(m) = spec.as_object_mut() {
            m.remove("selector");
        }
        if let Some(labels) = spec
            .pointer_mut("/template/metadata/labels")
            .and_then(serde_json::Value::as_object_mut)
        {
            for generated in self.generated_template_labels() {
                labels.remove(*generated);
            }
        }
        Some(spec)
    }

    /// Kubernetes sets `SuccessCriteriaMet` / `FailureTarget` before `Complete` / `Failed`,
    /// while the pods still terminate.
    fn outcome_decided(&self, job: &JobObject<'_>) -> Option<Outcome> {
        super::outcome_from_conditions(job, "SuccessCriteriaMet", "FailureTarget")
    }

    /// The Job controller's own rule: `completions` pods succeeded (one when it is unset,
    /// for a Job of one pod). A Job of several pods without `completions` succeeds only
    /// once every pod has terminated, which its pods' phases alone do not show; a
    /// `successPolicy` may decide earlier, which `SuccessCriteriaMet` then reports.
    /// Pods counted before (a run cut short) are in `status.succeeded`: the larger of the
    /// two counts is taken, never their sum, as a pod may be in both.
    fn succeeded_by_pods(&self, job: &JobObject<'_>, succeeded: u32) -> bool {
        let spec = job.spec();
        let needed = match spec.completions {
            Some(c) => c,
            None if spec.parallelism.unwrap_or(1) <= 1 => 1,
            None => return false,
        };
        let status = job.status();
        let counted = status.succeeded.unwrap_or(0) + status.uncounted_succeeded() as i64;
        needed > 0 && counted.max(i64::from(succeeded)) >= i64::from(needed)
    }

    fn counts_succeeded_pods(&self) -> bool {
        true
    }

    /// Running or terminating pods: Kueue counts `active` only, but a terminating pod
    /// still holds its node's resources until the kubelet confirms it gone.
    fn is_active(&self, job: &JobObject<'_>) -> bool {
        let status = job.status();
        status.active.unwrap_or(0) + status.terminating.unwrap_or(0) > 0
    }

    /// Kueue's: succeeded + ready pods (counted or not yet) reach the pod count.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        let status = job.status();
        let done = status.succeeded.unwrap_or(0)
            + status.ready.unwrap_or(0)
            + status.uncounted_succeeded() as i64;
        done >= i64::from(super::job_pods_count(job.spec()))
    }

    /// The Job controller keeps `startTime` on a suspended Job until it is cleared, and
    /// Kubernetes refuses template changes while it is set.
    fn stop_status_patch(&self, job: &JobObject<'_>) -> Option<serde_json::Value> {
        job.status()
            .start_time
            .is_some()
            .then(|| serde_json::json!({"status": {"startTime": null}}))
    }

    /// Kubernetes refuses a template change on a suspended Job that still counts pods
    /// active, even once `startTime` is cleared (kube-apiserver 1.36: "spec.template:
    /// field is immutable"); the Job controller's status update that counts them gone
    /// unlocks it.
    fn templates_locked(&self, job: &JobObject<'_>) -> bool {
        self.is_active(job)
    }

    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        let spec = job.spec();
        let count = super::job_pods_count(spec);
        let template = spec.template.as_ref();
        vec![PodSetRef {
            name: Cow::Borrowed(DEFAULT_POD_SET_NAME),
            count,
            pointer: PointerBuf::from_tokens(["spec", "template"]),
            meta_path: Path::new("spec").child("template").child("metadata"),
            meta: template.and_then(|t| t.metadata.as_ref()),
            spec: template.and_then(|t| t.spec.as_deref()),
            pod_index_label: Some(JOB_COMPLETION_INDEX_LABEL),
            min_count: min_count(job, count).ok().flatten(),
            default_template: None,
        }]
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

    /// Kueue's job webhook: partial admission and completions-equal-parallelism annotations,
    /// then topology annotations.
    fn validate_create(&self, job: &JobObject<'_>, opts: &RuleOptions) -> Vec<FieldError> {
        let mut errs = spec_rules(job);
        if let Err(e) = min_count(job, super::job_pods_count(job.spec())) {
            errs.push(e);
        }
        errs.extend(sync_completions(job));
        if opts.topology_aware_scheduling {
            for ps in self.pod_sets(job) {
                errs.extend(tas::validate(&ps.annotations(), &ps.meta_path, ps.count));
            }
        }
        errs
    }

    /// Min-parallelism is re-checked only when it changed; parallelism is frozen while a
    /// partially admissible job runs; completions-equal-parallelism is frozen while running.
    fn validate_update(
        &self,
        old: &JobObject<'_>,
        new: &JobObject<'_>,
        opts: &RuleOptions,
    ) -> Vec<FieldError> {
        let mut errs = spec_rules(new);
        let min_changed = old.annotation(JOB_MIN_PARALLELISM_ANNOTATION)
            != new.annotation(JOB_MIN_PARALLELISM_ANNOTATION);
        if min_changed && let Err(e) = min_count(new, super::job_pods_count(new.spec())) {
            errs.push(e);
        }
        errs.extend(sync_completions(new));
        if opts.topology_aware_scheduling {
            for ps in self.pod_sets(new) {
                errs.extend(tas::validate(&ps.annotations(), &ps.meta_path, ps.count));
            }
        }
        let old_running = !self.is_suspended(old);
        if old.annotation(JOB_MIN_PARALLELISM_ANNOTATION).is_some()
            && old_running
            && old.spec().parallelism.unwrap_or(1) != new.spec().parallelism.unwrap_or(1)
        {
            errs.push(FieldError::forbidden(
                &Path::new("spec").child("parallelism"),
                "cannot change when partial admission is enabled and the job is not suspended",
            ));
        }
        let both_running = !self.is_suspended(old) && !self.is_suspended(new);
        if both_running && sync_enabled(old) != sync_enabled(new) {
            errs.push(FieldError::forbidden(
                &annotation_path(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION),
                "field is immutable while the job is not suspended",
            ));
        }
        errs
    }
}

/// The API server's batch/v1 rules on counts, template and restart policy: a Job sent to the
/// webhook directly (not through an API server, which would have refused it) gets the same
/// answer.
fn spec_rules(job: &JobObject<'_>) -> Vec<FieldError> {
    let spec = job.spec();
    let pod = spec.template.as_ref().and_then(|t| t.spec.as_deref());
    validate_job_spec(&JobSpecFields {
        parallelism: spec.parallelism,
        completions: spec.completions,
        containers: pod.and_then(|p| p.containers.as_ref()).map_or(0, Vec::len),
        restart_policy: pod.and_then(|p| p.restart_policy.as_deref()),
    })
}

/// The Workload Kueue would create for a batch/v1 Job.
pub fn workload_for(job: &Job) -> Result<Workload, IntegrationError> {
    let value = serde_json::to_value(job).map_err(|e| {
        IntegrationError::from(FieldError::invalid_omit(&Path::new(""), e.to_string()))
    })?;
    BatchJob.workload(&value)
}

fn annotation_path(key: &str) -> Path {
    Path::new("metadata").child("annotations").key(key)
}

/// `kueue.x-k8s.io/job-min-parallelism`, which must lie in `1..count` (Kueue's webhook rule).
fn min_count(job: &JobObject<'_>, count: i32) -> Result<Option<i32>, FieldError> {
    let Some(raw) = job.annotation(JOB_MIN_PARALLELISM_ANNOTATION) else {
        return Ok(None);
    };
    let path = annotation_path(JOB_MIN_PARALLELISM_ANNOTATION);
    let v: i32 = raw
        .parse()
        .map_err(|e: std::num::ParseIntError| FieldError::invalid(&path, raw, e.to_string()))?;
    if v <= 0 || v >= count {
        let detail = format!("should be between 0 and {}", count.saturating_sub(1));
        return Err(FieldError::invalid_num(&path, v, detail));
    }
    Ok(Some(v))
}

fn sync_enabled(job: &JobObject<'_>) -> bool {
    job.annotation(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
        .and_then(tas::parse_go_bool)
        .unwrap_or(false)
}

/// `kueue.x-k8s.io/job-completions-equal-parallelism`: a boolean; when true the job must be
/// Indexed and have completions equal to parallelism.
fn sync_completions(job: &JobObject<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(raw) = job.annotation(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION) else {
        return errs;
    };
    let path = annotation_path(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION);
    match tas::parse_go_bool(raw) {
        None => errs.push(FieldError::invalid(
            &path,
            raw,
            format!("strconv.ParseBool: parsing {raw:?}: invalid syntax"),
        )),
        Some(true) => {
            let spec = job.spec();
            if spec.completion_mode.as_deref() != Some("Indexed") {
                errs.push(FieldError::invalid(
                    &path,
                    raw,
                    "should not be enabled for NonIndexed jobs",
                ));
            }
            let (p, c) = (spec.parallelism.unwrap_or(1), spec.completions.unwrap_or(1));
            if p != c {
                errs.push(FieldError::invalid_num(
                    &Path::new("spec").child("completions"),
                    c,
                    format!(
                        "should be equal to parallelism when {JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION} is annotation is true"
                    ),
                ));
            }
        }
        Some(false) => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::validate::validate_workload;

    fn job(yaml: &str) -> Job {
        serde_norway::from_str(yaml).expect("test job parses")
    }

    fn view(yaml: &str) -> serde_json::Value {
        serde_norway::from_str(yaml).expect("test job parses")
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
        let v = view(JOB);
        let o = JobObject::from_value(&v).expect("view");
        assert!(BatchJob.is_suspended(&o));
        assert_eq!(BatchJob.suspend_patch(false)["spec"]["suspend"], false);
        assert!(super::super::queue_name(&o).is_some());
        assert_eq!(BatchJob.kind(), "Job");
        let mut p = PatchBuilder::new();
        BatchJob.suspend(&o, &mut p);
        assert!(p.is_empty(), "already suspended");
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
            "metadata: {name: j}\nspec:\n  template:\n    spec:\n      priorityClassName: pod-high\n      restartPolicy: Never\n      containers: [{name: c}]\n",
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
            "metadata:\n  name: j\n  annotations: {kueue.x-k8s.io/job-min-parallelism: '1'}\nspec: {parallelism: 1, template: {spec: {restartPolicy: Never, containers: [{name: c}]}}}\n",
        );
        let e = workload_for(&j).expect_err("min >= count").to_string();
        assert_eq!(
            e,
            "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: 1: should be between 0 and 0"
        );
        let j = job(
            "metadata: {name: j}\nspec:\n  template:\n    metadata:\n      annotations:\n        kueue.x-k8s.io/podset-required-topology: a\n        kueue.x-k8s.io/podset-preferred-topology: b\n        kueue.x-k8s.io/podset-slice-required-topology: c\n    spec: {restartPolicy: Never, containers: [{name: c}]}\n",
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
            "metadata:\n  name: j\n  labels: {kueue.x-k8s.io/max-exec-time-seconds: '0'}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: c}]}}}\n",
        );
        assert!(workload_for(&j).is_err());
    }

    #[test]
    fn update_rules() {
        let old = view(
            "metadata: {annotations: {kueue.x-k8s.io/job-min-parallelism: '1'}}\nspec: {parallelism: 4, suspend: false, template: {spec: {restartPolicy: Never, containers: [{name: c}]}}}\n",
        );
        let new = view(
            "metadata: {annotations: {kueue.x-k8s.io/job-min-parallelism: '1'}}\nspec: {parallelism: 3, suspend: false, template: {spec: {restartPolicy: Never, containers: [{name: c}]}}}\n",
        );
        let (o, n) = (
            JobObject::from_value(&old).expect("view"),
            JobObject::from_value(&new).expect("view"),
        );
        let errs = BatchJob.validate_update(&o, &n, &RuleOptions::default());
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "spec.parallelism: Forbidden: cannot change when partial admission is enabled and the job is not suspended"
            ]
        );
        let sync = view(
            "metadata: {annotations: {kueue.x-k8s.io/job-completions-equal-parallelism: 'true'}}\nspec: {parallelism: 2, completions: 3, template: {spec: {restartPolicy: Never, containers: [{name: c}]}}}\n",
        );
        let s = JobObject::from_value(&sync).expect("view");
        let errs = BatchJob.validate_create(&s, &RuleOptions::default());
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    #[test]
    fn succeeded_pods_decide_a_job_as_the_job_controller_would() {
        let decided = |yaml: &str, succeeded: u32| {
            let v = view(yaml);
            BatchJob.succeeded_by_pods(&JobObject::from_value(&v).expect("view"), succeeded)
        };
        // One pod, no completions: its success is the Job's.
        assert!(!decided("spec: {}\n", 0));
        assert!(decided("spec: {}\n", 1));
        // completions: that many pods, counted here or already by the Job controller.
        assert!(!decided("spec: {parallelism: 2, completions: 3}\n", 2));
        assert!(decided("spec: {parallelism: 2, completions: 3}\n", 3));
        assert!(decided(
            "spec: {parallelism: 2, completions: 3}\nstatus: {succeeded: 2, uncountedTerminatedPods: {succeeded: [u3]}}\n",
            1
        ));
        // Pods in both counts are not counted twice.
        assert!(!decided(
            "spec: {parallelism: 2, completions: 3}\nstatus: {succeeded: 2}\n",
            2
        ));
        // Several pods without completions: decided only once all have terminated, which
        // the Job controller reports; pod phases alone never decide it.
        assert!(!decided("spec: {parallelism: 3}\n", 3));
        assert!(!decided("spec: {completions: 0}\n", 0));
    }

    #[test]
    fn api_server_job_rules_apply_to_intercepted_jobs() {
        let bad = view("metadata: {name: j}\nspec: {parallelism: -1}\n");
        let b = JobObject::from_value(&bad).expect("view");
        let errs: Vec<String> = BatchJob
            .validate_create(&b, &RuleOptions::default())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.spec.containers: Required value",
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ]
        );
        let always = view(
            "metadata: {name: j}\nspec: {template: {spec: {restartPolicy: Always, containers: [{name: c}]}}}\n",
        );
        let a = JobObject::from_value(&always).expect("view");
        let errs = BatchJob.validate_update(&a, &a, &RuleOptions::default());
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0]
                .to_string()
                .starts_with("spec.template.spec.restartPolicy: Required value")
        );
    }

    #[test]
    fn multikueue_copy_drops_what_the_managers_job_controller_generated() {
        let spec = serde_json::json!({
            "managedBy": "kueue.x-k8s.io/multikueue",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "suspend": true,
            "template": {"metadata": {"labels": {
                "controller-uid": "u", "job-name": "j",
                "batch.kubernetes.io/controller-uid": "u", "batch.kubernetes.io/job-name": "j",
                "app": "x"}},
                "spec": {"containers": [{"name": "c"}]}}
        });
        let copy = BatchJob
            .multikueue_spec(&spec)
            .expect("batch Jobs are dispatched");
        assert_eq!(
            copy,
            serde_json::json!({
                "suspend": true,
                "template": {"metadata": {"labels": {
                    "batch.kubernetes.io/job-name": "j", "app": "x"}},
                    "spec": {"containers": [{"name": "c"}]}}
            })
        );
    }
}
