//! The batch/v1 Job spec rules of the API server that decide whether a Job can exist at all
//! (non-negative counts, a pod template with containers, a restart policy a Job may use),
//! with the API server's messages, so `kuota check` and the webhook report them too.

use super::names::dns1123_subdomain_errors;
use super::{FieldError, IS_NEGATIVE_MSG, Path, validate_object_meta, validate_pod_template};
use crate::api::constants::{PREBUILT_WORKLOAD_LABEL, QUEUE_NAME_LABEL};
use k8s_openapi::api::batch::v1::Job;

/// Restart policies a Job's pods may use; `Always` would restart a finished pod forever.
pub const JOB_RESTART_POLICIES: [&str; 2] = ["OnFailure", "Never"];

/// The Job spec fields these rules read, from whichever representation holds the Job.
#[derive(Debug, Clone, Copy, Default)]
pub struct JobSpecFields<'a> {
    /// `spec.parallelism`.
    pub parallelism: Option<i32>,
    /// `spec.completions`.
    pub completions: Option<i32>,
    /// Number of `spec.template.spec.containers` (0 when the template is missing).
    pub containers: usize,
    /// `spec.template.spec.restartPolicy`.
    pub restart_policy: Option<&'a str>,
}

/// Validates a batch/v1 Job from a manifest: its metadata, its pod template's quantities and
/// the API server's Job spec rules. An absent spec is checked as an empty one, as the API
/// server would.
pub fn validate_job(job: &Job) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&job.metadata, true);
    let default_spec = Default::default();
    let spec = job.spec.as_ref().unwrap_or(&default_spec);
    let pod = spec.template.spec.as_ref();
    errs.extend(validate_job_spec(&JobSpecFields {
        parallelism: spec.parallelism,
        completions: spec.completions,
        containers: pod.map_or(0, |p| p.containers.len()),
        restart_policy: pod.and_then(|p| p.restart_policy.as_deref()),
    }));
    let path = Path::new("spec").child("template");
    errs.extend(validate_pod_template(&spec.template, &path));
    let labels = job.metadata.labels.as_ref();
    errs.extend(job_name_label_errors(|key| {
        labels.and_then(|l| l.get(key)).map(String::as_str)
    }));
    errs
}

/// Kueue's `ValidateJobOnCreate` rule on a job's labels (any kind): the queue name and
/// the prebuilt Workload's name must be DNS-1123 subdomains, as Kueue's webhook requires
/// and `kuota check` reports. `label` reads one label of the job.
pub fn job_name_label_errors<'a>(label: impl Fn(&str) -> Option<&'a str>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in [QUEUE_NAME_LABEL, PREBUILT_WORKLOAD_LABEL] {
        if let Some(v) = label(key) {
            let msgs = dns1123_subdomain_errors(v);
            if !msgs.is_empty() {
                let path = Path::new("metadata").child("labels").key(key);
                errs.push(FieldError::invalid(&path, v, msgs.join(",")));
            }
        }
    }
    errs
}

/// Validates a Job spec as the API server's batch/v1 validation does for these fields.
pub fn validate_job_spec(job: &JobSpecFields<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = Path::new("spec");
    for (name, value) in [
        ("parallelism", job.parallelism),
        ("completions", job.completions),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errs.push(FieldError::invalid_num(
                &spec.child(name),
                v,
                IS_NEGATIVE_MSG,
            ));
        }
    }
    let pod = spec.child("template").child("spec");
    if job.containers == 0 {
        errs.push(FieldError::required(&pod.child("containers"), ""));
    }
    let rp = pod.child("restartPolicy");
    match job.restart_policy.unwrap_or("") {
        // The API server defaults an absent policy to Always before validating, and says
        // "required" for both, naming the two values a Job accepts.
        "" | "Always" => errs.push(FieldError::required(
            &rp,
            format!(
                "valid values: {:?}, {:?}",
                JOB_RESTART_POLICIES[0], JOB_RESTART_POLICIES[1]
            ),
        )),
        p if JOB_RESTART_POLICIES.contains(&p) => {}
        other => errs.push(FieldError::not_supported(&rp, other, &JOB_RESTART_POLICIES)),
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(job: JobSpecFields<'_>) -> Vec<String> {
        validate_job_spec(&job)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const VALID: JobSpecFields<'static> = JobSpecFields {
        parallelism: Some(2),
        completions: Some(4),
        containers: 1,
        restart_policy: Some("Never"),
    };

    #[test]
    fn manifest_job_without_template_or_with_negative_parallelism() {
        let job: Job =
            serde_norway::from_str("metadata: {name: j, namespace: ns}\nspec: {parallelism: -1}\n")
                .expect("a Job without a template still decodes");
        let m: Vec<String> = validate_job(&job).iter().map(ToString::to_string).collect();
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(
            m[0],
            "spec.parallelism: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(m[1], "spec.template.spec.containers: Required value");
        assert!(m[2].starts_with("spec.template.spec.restartPolicy: Required value"));
        let job: Job = serde_norway::from_str(
            "metadata: {name: j, namespace: ns}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c}]\n",
        )
        .expect("decodes");
        assert!(validate_job(&job).is_empty());
    }

    /// The name the webhook refuses, `kuota check` refuses, with the webhook's message.
    #[test]
    fn a_queue_name_that_is_no_dns_subdomain_is_refused() {
        let job: Job = serde_norway::from_str(
            "metadata: {name: j, namespace: ns, labels: {kueue.x-k8s.io/queue-name: Bad_Name}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c}]\n",
        )
        .expect("decodes");
        let m: Vec<String> = validate_job(&job).iter().map(ToString::to_string).collect();
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].starts_with(
                "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"
            ),
            "{m:?}"
        );
    }

    #[test]
    fn valid_job_passes() {
        assert!(msgs(VALID).is_empty());
        let on_failure = JobSpecFields {
            restart_policy: Some("OnFailure"),
            parallelism: Some(0),
            ..VALID
        };
        assert!(msgs(on_failure).is_empty());
    }

    #[test]
    fn negative_counts() {
        let m = msgs(JobSpecFields {
            parallelism: Some(-1),
            completions: Some(-3),
            ..VALID
        });
        assert_eq!(
            m,
            vec![
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
                "spec.completions: Invalid value: -3: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn missing_template_and_restart_policy() {
        let m = msgs(JobSpecFields::default());
        assert_eq!(
            m,
            vec![
                "spec.template.spec.containers: Required value",
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ]
        );
        let always = msgs(JobSpecFields {
            restart_policy: Some("Always"),
            ..VALID
        });
        assert_eq!(
            always,
            vec![
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
            ]
        );
        let odd = msgs(JobSpecFields {
            restart_policy: Some("Sometimes"),
            ..VALID
        });
        assert_eq!(
            odd,
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\""
            ]
        );
    }
}
