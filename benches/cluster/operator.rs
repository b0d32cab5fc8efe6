//! A stand-in JobSet operator (the real one needs a container engine to run): the few
//! writes of kubernetes-sigs/jobset's controller (`pkg/controllers/jobset_controller.go`)
//! that a JobSet of the bench needs to run and finish.
//!
//! - An unsuspended JobSet without Jobs gets one child Job per replica of each replicated
//!   Job (`constructJob`): named `<jobset>-<replicated job>-<index>`, owned by the
//!   JobSet, with its template's labels and annotations and the JobSet's labels, and
//!   the pod template as the JobSet has it now (kuota's injections included).
//!   kube-controller-manager creates their pods and the stand-in kubelet runs them.
//! - A suspended JobSet's running Jobs are suspended, and a resumed JobSet's suspended
//!   Jobs get its pod templates back and are resumed (`suspendJobs`,
//!   `resumeJobsIfNecessary`).
//! - `status.replicatedJobsStatus` follows the child Jobs (active, ready, succeeded,
//!   failed, suspended per replicated Job), written when it changes; once every Job has
//!   succeeded the JobSet gets `Completed` (reason `AllJobsCompleted`) and
//!   `terminalState: Completed`, once one fails `Failed` (reason `FailedJobs`).
//!
//! Left out: the headless Service for pod DNS, restarts and failure policies, success
//! policies other than "all", startup policies, exclusive placement. The operator runs
//! as its own audit user, so its writes are not counted as kuota's.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::mix::Mix;
use crate::setup::BENCH_LABEL;

/// The user the operator's client impersonates.
pub const OPERATOR_USER: &str = "kuota-bench-jobset-operator";
/// JobSet's labels on its Jobs (jobset's `api/jobset/v1alpha2`).
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
const JOBSET_UID_LABEL: &str = "jobset.sigs.k8s.io/jobset-uid";
const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
const REPLICAS_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-replicas";
const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";

/// What the operator knows of one JobSet.
#[derive(Default)]
struct JobSetState {
    /// Its child Jobs were created.
    created: bool,
    /// Its Jobs were last told to be suspended (true) or to run (false).
    suspended: bool,
    /// Each child Job's counts by name, and its replicated Job.
    jobs: BTreeMap<String, (String, JobCounts)>,
    /// Replicated Jobs in order, and how many Jobs each has.
    replicated: Vec<(String, i64)>,
    /// The status to write and the last one written (one writer at a time).
    status: Arc<StatusSlot>,
}

#[derive(Default)]
struct StatusSlot {
    wanted: Mutex<Option<Value>>,
    writer: tokio::sync::Mutex<Option<Value>>,
}

/// One child Job, as the JobSet controller counts it.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct JobCounts {
    active: bool,
    ready: bool,
    succeeded: bool,
    failed: bool,
    suspended: bool,
}

impl JobCounts {
    fn of(job: &Job) -> Self {
        let status = job.status.clone().unwrap_or_default();
        let condition = |t: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == t && c.status == "True")
        };
        let parallelism = job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
        Self {
            active: status.active.unwrap_or(0) > 0,
            ready: status.ready.unwrap_or(0) + status.succeeded.unwrap_or(0) >= parallelism,
            succeeded: condition("Complete"),
            failed: condition("Failed"),
            suspended: job.spec.as_ref().and_then(|s| s.suspend) == Some(true),
        }
    }
}

/// Runs until aborted: reconciles the run's JobSets and their Jobs.
pub async fn run(client: Client, run: String) {
    let selector = format!("{BENCH_LABEL}={run}");
    let jobsets = crate::applied(Mix::Jobset.api_all(&client), &selector)
        .map(|js| Event::JobSet(Box::new(js)))
        .boxed();
    let children = crate::applied(
        Api::<Job>::all(client.clone()),
        &format!("{selector},{JOBSET_NAME_LABEL}"),
    )
    .map(|job| Event::Child(Box::new(job)))
    .boxed();
    let mut events = futures::stream::select(jobsets, children);
    let mut state: HashMap<(String, String), JobSetState> = HashMap::new();
    while let Some(event) = events.next().await {
        match event {
            Event::JobSet(js) => jobset_changed(&client, &mut state, &js),
            Event::Child(job) => child_changed(&client, &mut state, &job),
        }
    }
}

enum Event {
    JobSet(Box<DynamicObject>),
    Child(Box<Job>),
}

fn key(ns: Option<&String>, name: &str) -> (String, String) {
    (ns.cloned().unwrap_or_default(), name.to_string())
}

/// Creates, suspends or resumes a JobSet's Jobs as its `spec.suspend` says.
fn jobset_changed(
    client: &Client,
    state: &mut HashMap<(String, String), JobSetState>,
    js: &DynamicObject,
) {
    let name = js.metadata.name.clone().unwrap_or_default();
    let k = key(js.metadata.namespace.as_ref(), &name);
    let (running, finished) = Mix::Jobset.state(js);
    let s = state.entry(k.clone()).or_default();
    if finished {
        return;
    }
    let replicated = replicated_jobs(js);
    s.replicated = replicated
        .iter()
        .map(|rj| (rj.0.clone(), rj.1))
        .collect::<Vec<_>>();
    let jobs: Api<Job> = Api::namespaced(client.clone(), &k.0);
    if running && !s.created {
        s.created = true;
        s.suspended = false;
        for (rj, replicas, template) in replicated {
            for idx in 0..replicas {
                let job = child_job(js, &rj, replicas, idx, &template);
                let jobs = jobs.clone();
                tokio::spawn(async move {
                    if let Err(e) = jobs.create(&PostParams::default(), &job).await {
                        let name = job.metadata.name.unwrap_or_default();
                        eprintln!("jobset operator: creating Job {name}: {e}");
                    }
                });
            }
        }
    } else if s.created && running == s.suspended {
        // Suspended after its Jobs started (preempted), or resumed since.
        s.suspended = !running;
        for (job, (rj, _)) in &s.jobs {
            let template = replicated.iter().find(|r| &r.0 == rj).map(|r| &r.2);
            let patch = if running {
                resume_patch(template.map(|t| &t["spec"]["template"]))
            } else {
                json!({"spec": {"suspend": true}})
            };
            let (jobs, job) = (jobs.clone(), job.clone());
            tokio::spawn(async move {
                if let Err(e) = jobs
                    .patch(&job, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    eprintln!("jobset operator: (un)suspending Job {job}: {e}");
                }
            });
        }
    }
}

/// Resumes a Job with its JobSet's pod template's scheduling directives (the Job
/// controller lets a suspended Job's change): labels and annotations merged, node
/// selector and tolerations replaced.
fn resume_patch(pod_template: Option<&Value>) -> Value {
    let t = pod_template.cloned().unwrap_or_default();
    let mut template = json!({"metadata": {}, "spec": {}});
    for (part, field) in [
        ("metadata", "labels"),
        ("metadata", "annotations"),
        ("spec", "nodeSelector"),
        ("spec", "tolerations"),
    ] {
        if !t[part][field].is_null() {
            template[part][field] = t[part][field].clone();
        }
    }
    json!({"spec": {"suspend": false, "template": template}})
}

/// Each replicated Job's name, replicas and Job template.
fn replicated_jobs(js: &DynamicObject) -> Vec<(String, i64, Value)> {
    js.data
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|rj| {
            (
                rj["name"].as_str().unwrap_or_default().to_string(),
                rj["replicas"].as_i64().unwrap_or(1),
                rj["template"].clone(),
            )
        })
        .collect()
}

/// JobSet's `constructJob`: the Job `idx` of replicated Job `rj`.
fn child_job(js: &DynamicObject, rj: &str, replicas: i64, idx: i64, template: &Value) -> Job {
    let js_name = js.metadata.name.clone().unwrap_or_default();
    let uid = js.metadata.uid.clone().unwrap_or_default();
    let name = format!("{js_name}-{rj}-{idx}");
    let ours = json!({
        JOBSET_NAME_LABEL: js_name, JOBSET_UID_LABEL: uid, REPLICATED_JOB_LABEL: rj,
        REPLICAS_LABEL: replicas.to_string(), JOB_INDEX_LABEL: idx.to_string(),
    });
    let merged = |base: &Value| {
        let mut out = base.as_object().cloned().unwrap_or_default();
        out.extend(ours.as_object().cloned().unwrap_or_default());
        Value::Object(out)
    };
    let mut spec = template["spec"].clone();
    spec["suspend"] = json!(false);
    spec["template"]["metadata"]["labels"] = merged(&spec["template"]["metadata"]["labels"]);
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name,
            "labels": merged(&template["metadata"]["labels"]),
            "annotations": merged(&template["metadata"]["annotations"]),
            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "name": js_name, "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
    }))
    .expect("valid Job")
}

/// Counts a child Job and writes its JobSet's status when that changed.
fn child_changed(client: &Client, state: &mut HashMap<(String, String), JobSetState>, job: &Job) {
    let labels = job.metadata.labels.clone().unwrap_or_default();
    let (Some(js), Some(rj)) = (
        labels.get(JOBSET_NAME_LABEL),
        labels.get(REPLICATED_JOB_LABEL),
    ) else {
        return;
    };
    let k = key(job.metadata.namespace.as_ref(), js);
    let Some(s) = state.get_mut(&k) else {
        return;
    };
    let name = job.metadata.name.clone().unwrap_or_default();
    s.jobs.insert(name, (rj.clone(), JobCounts::of(job)));
    let status = status_of(s);
    let slot = s.status.clone();
    {
        let mut wanted = slot.wanted.lock().expect("lock");
        if wanted.as_ref() == Some(&status) {
            return;
        }
        *wanted = Some(status);
    }
    let api = Mix::Jobset.api(client, &k.0);
    tokio::spawn(async move {
        // One write at a time per JobSet, of the newest status, so that an older one
        // never lands last.
        let mut written = slot.writer.lock().await;
        let Some(status) = slot.wanted.lock().expect("lock").clone() else {
            return;
        };
        if written.as_ref() == Some(&status) {
            return;
        }
        let mut body = json!({"status": status});
        if let Some(conditions) = body
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        {
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            for c in conditions {
                c["lastTransitionTime"] = json!(now);
            }
        }
        match api
            .patch_status(&k.1, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => *written = Some(status),
            Err(e) => eprintln!("jobset operator: status of JobSet {}: {e}", k.1),
        }
    });
}

/// The JobSet's status from its Jobs' counts (jobset's `calculateReplicatedJobStatuses`
/// and terminal conditions), without the conditions' time (set when written).
fn status_of(s: &JobSetState) -> Value {
    let mut all_succeeded = true;
    let mut any_failed = false;
    let per: Vec<Value> = s
        .replicated
        .iter()
        .map(|(rj, replicas)| {
            let counts: Vec<JobCounts> = s
                .jobs
                .values()
                .filter(|(r, _)| r == rj)
                .map(|(_, c)| *c)
                .collect();
            let n = |f: fn(&JobCounts) -> bool| counts.iter().filter(|c| f(c)).count();
            let succeeded = n(|c| c.succeeded);
            all_succeeded &= succeeded as i64 == *replicas;
            any_failed |= n(|c| c.failed) > 0;
            json!({"name": rj, "active": n(|c| c.active && !c.succeeded && !c.failed),
                "ready": n(|c| c.ready), "succeeded": succeeded, "failed": n(|c| c.failed),
                "suspended": n(|c| c.suspended)})
        })
        .collect();
    let mut status = json!({"replicatedJobsStatus": per});
    let terminal = if any_failed {
        Some((
            "Failed",
            "FailedJobs",
            "jobset failed due to one or more job failures",
        ))
    } else if all_succeeded {
        Some((
            "Completed",
            "AllJobsCompleted",
            "jobset completed successfully",
        ))
    } else {
        None
    };
    if let Some((state, reason, message)) = terminal {
        status["terminalState"] = json!(state);
        status["conditions"] = json!([{"type": state, "status": "True", "reason": reason,
            "message": message}]);
    }
    status
}
