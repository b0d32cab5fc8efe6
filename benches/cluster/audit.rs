//! Counts kuota's API writes from the API server's audit log (JSON lines).
//!
//! The benchmark's own client impersonates [`BENCH_USER`], its stand-in JobSet operator
//! another user, and kube-controller-manager has its own user, so a write by the admin
//! user without impersonation is kuota's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use crate::mix::Mix;

/// The user the benchmark's client impersonates.
pub const BENCH_USER: &str = "kuota-bench";

/// One line of the audit log, with the fields the bench reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event {
    pub stage: String,
    pub verb: String,
    user: User,
    impersonated_user: Option<User>,
    pub object_ref: Option<ObjectRef>,
    pub request_received_timestamp: Timestamp,
    /// The request body: logged (audit-policy.yaml) for the patches that can be on the
    /// admission path.
    pub request_object: Option<serde_json::Value>,
    response_status: Option<ResponseStatus>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    code: Option<u16>,
}

#[derive(Deserialize)]
struct User {
    username: String,
}

#[derive(Deserialize, Default)]
pub(crate) struct ObjectRef {
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// Whether a job patch `body` sets `spec.suspend` to false.
pub(crate) fn unsuspends(body: Option<&serde_json::Value>) -> bool {
    // A stop carries `{"op": "test", "path": "/spec/suspend", "value": false}` before
    // its `replace` with true: only an operation that writes the value counts.
    body.and_then(|b| b.as_array()).is_some_and(|ops| {
        ops.iter().any(|op| {
            op.get("path").and_then(|p| p.as_str()) == Some("/spec/suspend")
                && op.get("op").and_then(|o| o.as_str()) != Some("test")
                && op.get("value") == Some(&serde_json::Value::Bool(false))
        })
    })
}

/// Whether a Workload status patch `body` sets condition `type_` true.
pub(crate) fn sets_true(body: Option<&serde_json::Value>, type_: &str) -> bool {
    body.and_then(|b| b.pointer("/status/conditions"))
        .and_then(|c| c.as_array())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(|t| t.as_str()) == Some(type_)
                    && c.get("status").and_then(|s| s.as_str()) == Some("True")
            })
        })
}

/// Writes counted by `verb resource[/subresource]`, and how many of them were on the
/// admission path.
#[derive(Default)]
pub struct Writes {
    pub by_kind: BTreeMap<String, u64>,
    /// The Workload's create, the status patch that carries its admission, and the job
    /// patch that unsuspends it: the writes an admission itself costs.
    pub admission_path: u64,
    /// Per Job (`namespace/name`): when the API server received its create, its
    /// Workload's create, the admitting status patch and the unsuspending patch.
    pub stages: HashMap<String, [Option<Timestamp>; 4]>,
    /// Per Job: its last unsuspend, and when its Workload's `Finished` condition was
    /// written; from one to the other is the Job's hold on its quota in its last run.
    pub holds: HashMap<String, (Option<Timestamp>, Option<Timestamp>)>,
    /// Preemptions: each (Workload, `Preempted` transition time) written true.
    pub preemptions: HashSet<(String, String)>,
    /// Writes the API server refused (a status of 400 or more), by `verb resource`.
    pub failed: BTreeMap<String, u64>,
}

/// The stages of [`Writes::stages`], in order (`{}`: the kind).
pub const STAGES: [&str; 4] = [
    "{} created",
    "Workload created",
    "admission written",
    "{} unsuspended",
];

/// Whose writes to count.
#[derive(Clone, Copy)]
pub enum Writer<'a> {
    /// This user's own writes (kuota's: the admin user, not impersonating).
    User(&'a str),
    /// The writes made impersonating this user (the stand-in JobSet operator).
    Impersonating(&'a str),
}

impl Writes {
    /// Records the first time `job` (in `namespace`) reached `stage`.
    fn reached(&mut self, namespace: Option<&str>, job: &str, stage: usize, at: Timestamp) {
        let key = format!("{}/{job}", namespace.unwrap_or_default());
        self.stages.entry(key).or_default()[stage].get_or_insert(at);
    }

    /// Seconds from each stage to the next, over the objects that reached both: the
    /// pairs' names (for objects of `kind`) and their sorted durations.
    pub fn stage_gaps(&self, kind: &str) -> Vec<(String, Vec<f64>)> {
        let stage = |i: usize| STAGES[i].replace("{}", kind);
        (0..STAGES.len() - 1)
            .map(|i| {
                let mut gaps: Vec<f64> = self
                    .stages
                    .values()
                    .filter_map(|s| Some(s[i + 1]?.duration_since(s[i]?).as_secs_f64()))
                    .collect();
                gaps.sort_by(f64::total_cmp);
                (format!("{} → {}", stage(i), stage(i + 1)), gaps)
            })
            .collect()
    }
}

/// The object a Workload named by Kueue (`<kind>-<name>-<5 hex digits>`) belongs to.
fn job_of_workload<'w>(workload: &'w str, kind: &str) -> Option<&'w str> {
    let rest = workload.strip_prefix(kind)?.strip_prefix('-')?;
    let (job, hash) = rest.rsplit_once('-')?;
    (hash.len() == 5).then_some(job)
}

/// Writes by `writer` received within `[from, to)`, the admission path's for objects of
/// `mix`.
pub fn count_writes(
    log: &Path,
    writer: Writer<'_>,
    mix: Mix,
    from: Timestamp,
    to: Timestamp,
) -> std::io::Result<Writes> {
    let file = std::fs::File::open(log)?;
    let mut out = Writes::default();
    let resource = mix.resource();
    let kind = mix.integration().gvk().kind.to_lowercase();
    for line in std::io::BufReader::new(file).lines() {
        let Ok(e) = serde_json::from_str::<Event>(&line?) else {
            continue;
        };
        if e.stage != "ResponseComplete" {
            continue;
        }
        let obj = e.object_ref.unwrap_or_default();
        let bench = e
            .impersonated_user
            .as_ref()
            .is_some_and(|u| u.username == BENCH_USER);
        if bench && e.verb == "create" && obj.resource.as_deref() == Some(resource.as_str()) {
            let job = obj.name.as_deref().unwrap_or_default();
            out.reached(
                obj.namespace.as_deref(),
                job,
                0,
                e.request_received_timestamp,
            );
            continue;
        }
        let impersonated = e.impersonated_user.as_ref().map(|u| u.username.as_str());
        let theirs = match writer {
            Writer::User(user) => e.user.username == user && impersonated.is_none(),
            Writer::Impersonating(user) => impersonated == Some(user),
        };
        if !theirs
            || !matches!(
                e.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
            || e.request_received_timestamp < from
            || e.request_received_timestamp >= to
        {
            continue;
        }
        let mut written = obj.resource.unwrap_or_default();
        if let Some(sub) = obj.subresource {
            written = format!("{written}/{sub}");
        }
        let name = obj.name.as_deref().unwrap_or_default();
        out.record_outcomes(
            obj.namespace.as_deref(),
            name,
            &written,
            &resource,
            &kind,
            e.request_object.as_ref(),
            e.request_received_timestamp,
        );
        if let Some(stage) =
            admission_stage(&e.verb, &written, &resource, e.request_object.as_ref())
        {
            out.admission_path += 1;
            let job = if written == resource {
                Some(name)
            } else {
                job_of_workload(name, &kind)
            };
            if let Some(job) = job {
                out.reached(
                    obj.namespace.as_deref(),
                    job,
                    stage,
                    e.request_received_timestamp,
                );
            }
        }
        if e.response_status
            .as_ref()
            .and_then(|r| r.code)
            .is_some_and(|c| c >= 400)
        {
            *out.failed
                .entry(format!("{} {written}", e.verb))
                .or_default() += 1;
        }
        *out.by_kind
            .entry(format!("{} {written}", e.verb))
            .or_default() += 1;
    }
    Ok(out)
}

impl Writes {
    /// Records what a patch `body` of `written` says about its Job's hold and its
    /// Workload's preemptions: an unsuspend of the job, a `Finished` or a `Preempted`
    /// condition written true on the Workload.
    #[allow(clippy::too_many_arguments)]
    fn record_outcomes(
        &mut self,
        namespace: Option<&str>,
        name: &str,
        written: &str,
        resource: &str,
        kind: &str,
        body: Option<&serde_json::Value>,
        at: Timestamp,
    ) {
        let Some(body) = body else { return };
        let key = |job: &str| format!("{}/{job}", namespace.unwrap_or_default());
        if written == resource && unsuspends(Some(body)) {
            self.holds.entry(key(name)).or_default().0 = Some(at);
            return;
        }
        if written != "workloads/status" {
            return;
        }
        let conditions = body
            .pointer("/status/conditions")
            .and_then(|c| c.as_array());
        for c in conditions.into_iter().flatten() {
            let is_true = c.get("status").and_then(|s| s.as_str()) == Some("True");
            match c.get("type").and_then(|t| t.as_str()) {
                Some("Finished") if is_true => {
                    if let Some(job) = job_of_workload(name, kind) {
                        self.holds.entry(key(job)).or_default().1.get_or_insert(at);
                    }
                }
                Some("Preempted") if is_true => {
                    let when = c.get("lastTransitionTime").and_then(|t| t.as_str());
                    self.preemptions
                        .insert((key(name), when.unwrap_or_default().to_string()));
                }
                _ => {}
            }
        }
    }

    /// Seconds from each Job's last unsuspend to its Workload's finish, by Job.
    pub fn hold_seconds(&self) -> HashMap<&str, f64> {
        self.holds
            .iter()
            .filter_map(|(job, (on, done))| {
                let s = (*done)?.duration_since((*on)?).as_secs_f64();
                Some((job.as_str(), s.max(0.0)))
            })
            .collect()
    }
}

/// Which of an admission's own writes this is, as its index in [`STAGES`]: the
/// Workload's create, a status patch that sets `status.admission`, or a patch of the
/// job (`resource`) that sets `spec.suspend` to false.
fn admission_stage(
    verb: &str,
    written: &str,
    resource: &str,
    body: Option<&serde_json::Value>,
) -> Option<usize> {
    match (verb, written) {
        ("create", "workloads") => Some(1),
        ("patch", "workloads/status") => body
            .and_then(|b| b.pointer("/status/admission"))
            .is_some_and(serde_json::Value::is_object)
            .then_some(2),
        ("patch", r) if r == resource => unsuspends(body).then_some(3),
        _ => None,
    }
}

/// The admin user of the kubeconfig: the first user the audit log shows writing the
/// benchmark's marker ConfigMap (see main.rs), read from the log itself.
pub fn user_of_marker(log: &Path, marker: &str) -> std::io::Result<Option<String>> {
    let file = std::fs::File::open(log)?;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if !line.contains(marker) {
            continue;
        }
        if let Ok(e) = serde_json::from_str::<Event>(&line)
            && e.impersonated_user.is_none()
        {
            return Ok(Some(e.user.username));
        }
    }
    Ok(None)
}
