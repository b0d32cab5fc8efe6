//! The job kind a run measures (`--kind`): batch Jobs of Kueue's baseline mix, or
//! JobSets of two replicated Jobs × 4 pods, sized so that each JobSet asks for its
//! class's cpu. Every phase builds, creates, watches and admits its objects through
//! [`Mix`], and reads them through kuota's own integration for the kind, so the phases
//! are one code path for both kinds.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kuota::integrations::{JobIntegration, JobObject};
use serde_json::{Value, json};

use crate::BoxError;
use crate::setup::{self, BENCH_LABEL, Class};

/// JobSet's CRD, vendored for the e2e tests (tests/fixtures/crds/PROVENANCE.md).
const JOBSET_CRD: &str = include_str!("../../tests/fixtures/crds/jobset.x-k8s.io_jobsets.yaml");

/// Replicated Jobs per JobSet, and pods per replicated Job.
pub const JOBSET_REPLICATED_JOBS: usize = 2;
pub const JOBSET_PODS_PER_JOB: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// batch/v1 Jobs, one pod each.
    Job,
    /// jobset.x-k8s.io/v1alpha2 JobSets, 2 replicated Jobs × 4 pods; the harness plays
    /// the JobSet operator (operator.rs).
    Jobset,
}

impl Mix {
    /// kuota's integration for the kind.
    pub fn integration(self) -> &'static dyn JobIntegration {
        let (api_version, kind) = match self {
            Self::Job => ("batch/v1", "Job"),
            Self::Jobset => ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        };
        kuota::integrations::for_kind(api_version, kind).expect("kuota integrates the kind")
    }

    pub fn api_resource(self) -> ApiResource {
        let gvk: GroupVersionKind = self.integration().gvk();
        ApiResource::from_gvk(&gvk)
    }

    /// The kind's objects in `ns`.
    pub fn api(self, client: &Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, &self.api_resource())
    }

    /// The kind's objects in every namespace.
    pub fn api_all(self, client: &Client) -> Api<DynamicObject> {
        Api::all_with(client.clone(), &self.api_resource())
    }

    /// The kind's plural, as the audit log names its resource.
    pub fn resource(self) -> String {
        self.api_resource().plural
    }

    /// The kind's name in the tables, plural.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Job => "Jobs",
            Self::Jobset => "JobSets",
        }
    }

    /// The frameworks kuota runs with: batch/job always (as Kueue's default
    /// configuration), and the kind's own.
    pub fn frameworks(self) -> Vec<&'static str> {
        let own = self.integration().framework();
        let mut out = vec!["batch/job"];
        if own != "batch/job" {
            out.push(own);
        }
        out
    }

    /// The kind's CRD, when it is not built in.
    pub fn crd(self) -> Result<Option<CustomResourceDefinition>, BoxError> {
        Ok(match self {
            Self::Job => None,
            Self::Jobset => Some(serde_norway::from_str(JOBSET_CRD)?),
        })
    }

    /// A suspended object of `class`: queue-labelled for kuota, or plain for the raw
    /// baseline and the ideal controller.
    pub fn object(self, run: &str, name: &str, class: Class, queued: bool) -> DynamicObject {
        let mut labels = json!({BENCH_LABEL: run});
        if queued {
            labels["kueue.x-k8s.io/queue-name"] = json!("lq");
        }
        let ar = self.api_resource();
        let spec = match self {
            Self::Job => {
                let mut spec = job_spec(run, class, &class.cpu.to_string(), 1);
                spec["suspend"] = json!(true);
                spec
            }
            Self::Jobset => {
                // The JobSet asks for its class's cpu in all, spread over its pods.
                let pods = JOBSET_REPLICATED_JOBS as u32 * JOBSET_PODS_PER_JOB;
                let cpu = format!("{}m", class.cpu * 1000 / pods);
                let replicated: Vec<Value> = (0..JOBSET_REPLICATED_JOBS)
                    .map(|i| {
                        json!({"name": format!("rj{i}"), "replicas": 1, "template": {
                            "metadata": {"labels": {BENCH_LABEL: run}},
                            "spec": job_spec(run, class, &cpu, JOBSET_PODS_PER_JOB)}})
                    })
                    .collect();
                json!({"suspend": true, "replicatedJobs": replicated})
            }
        };
        serde_json::from_value(json!({
            "apiVersion": ar.api_version, "kind": ar.kind,
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }))
        .expect("valid object")
    }

    /// A watched object as the JSON kuota's functions take: a list's items of a
    /// built-in kind come without their apiVersion and kind.
    pub fn value(self, obj: &DynamicObject) -> Result<Value, serde_json::Error> {
        let mut value = serde_json::to_value(obj)?;
        let ar = self.api_resource();
        value["apiVersion"] = json!(ar.api_version);
        value["kind"] = json!(ar.kind);
        Ok(value)
    }

    /// Whether the watched object is unsuspended, and whether it finished (kuota's own
    /// reading of the kind).
    pub fn state(self, obj: &DynamicObject) -> (bool, bool) {
        self.value(obj)
            .map_or((false, false), |value| self.state_of(&value))
    }

    /// [`Mix::state`] of an object already read as JSON ([`Mix::value`]).
    pub fn state_of(self, value: &Value) -> (bool, bool) {
        let Ok(view) = JobObject::from_value(value) else {
            return (false, false);
        };
        let integration = self.integration();
        (
            !integration.is_suspended(&view),
            integration.finished(&view).is_some(),
        )
    }
}

/// A Job's spec of `class` with `pods` pods of `cpu` each (a batch Job's, or a JobSet's
/// replicated Job template's).
fn job_spec(run: &str, class: Class, cpu: &str, pods: u32) -> Value {
    json!({
        "parallelism": pods, "completions": pods, "backoffLimit": 0,
        "template": {
            "metadata": {"labels": {BENCH_LABEL: run, setup::RUNTIME_LABEL: class.runtime_ms.to_string()}},
            "spec": {
                "restartPolicy": "Never",
                "priorityClassName": format!("{run}-{}", class.name),
                "containers": [{"name": "c", "image": "registry.invalid/sleep",
                    "resources": {"requests": {"cpu": cpu}}}]
            }
        }
    })
}
