//! `kuota explain NAMESPACE/NAME` (and `kubectl kuota explain`): where one workload stands,
//! in a few lines a person can act on: its state, its positions in its LocalQueue and
//! ClusterQueue, what holds it back with the engine's numbers, and what would make it start
//! sooner. NAME is a Workload or the job that owns one. Everything is read through the API
//! server with the user's kubeconfig, so the user's RBAC decides what is shown.

use std::fmt::Write as _;

use kube::api::{Api, ListParams};
use serde::Serialize;

use super::pending::{Estimate, PendingError, Queue, client, fetch, items};
use crate::api::constants::{
    WORKLOAD_ADMITTED, WORKLOAD_EVICTED, WORKLOAD_FINISHED, WORKLOAD_QUOTA_RESERVED,
    WORKLOAD_REQUEUED,
};
use crate::api::{LocalQueue, Workload};

/// Output formats for `explain`: the explanation as an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainOutput {
    Json,
    Yaml,
}

/// `kuota explain NAMESPACE/NAME`.
#[derive(Clone, Debug, clap::Args)]
pub struct ExplainArgs {
    /// The Workload, or the job (of any enabled kind) that owns one.
    #[arg(value_name = "NAMESPACE/NAME")]
    pub target: String,
    /// Print the explanation as an object instead of lines.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ExplainOutput>,
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// Why `kuota explain` explained nothing.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{0:?}: expected NAMESPACE/NAME")]
    Name(String),
    #[error(transparent)]
    Cluster(#[from] PendingError),
    #[error(
        "{target}: no Workload of that name, and no Workload in namespace {namespace} is owned \
         by an object of that name (is the job labelled kueue.x-k8s.io/queue-name, and is its \
         framework enabled?)"
    )]
    NotManaged { target: String, namespace: String },
    #[error("{target}: {source}")]
    Request {
        target: String,
        #[source]
        source: kube::Error,
    },
}

/// What `explain` says about one workload.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub workload: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub state: String,
    pub local_queue: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_in_local_queue: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_in_cluster_queue: Option<i64>,
    /// Why a position is missing (not visible to the user, or beyond the first page).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub position_notes: Vec<String>,
    /// The start estimate, from kuota's visibility group: when, its range, and the
    /// runtimes it rests on (or why there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub to_start_sooner: Vec<String>,
}

/// Whether the workload waits for quota (so queue positions mean something).
fn is_pending(wl: &Workload) -> bool {
    let s = wl.status.as_ref();
    wl.spec.active != Some(false)
        && s.is_none_or(|s| s.admission.is_none() && !s.is_condition_true(WORKLOAD_FINISHED))
}

/// The state line, the reason and the message, from the Workload alone.
pub fn state_of(wl: &Workload) -> (String, Option<String>, Option<String>) {
    let Some(s) = wl.status.as_ref() else {
        return ("Pending (not looked at yet)".into(), None, None);
    };
    let cond = |t: &str| s.condition(t).filter(|c| c.status == "True");
    if let Some(c) = cond(WORKLOAD_FINISHED) {
        return (
            format!("Finished ({})", c.reason),
            Some(c.reason.clone()),
            Some(c.message.clone()),
        );
    }
    if wl.spec.active == Some(false) {
        let evicted = s.condition(WORKLOAD_EVICTED);
        return (
            "Inactive (deactivated: nothing admits it until spec.active is true again)".into(),
            evicted.map(|c| c.reason.clone()),
            evicted.map(|c| c.message.clone()),
        );
    }
    if let Some(a) = s.admission.as_ref() {
        if let Some(c) = cond(WORKLOAD_EVICTED) {
            return (
                format!(
                    "Evicted from ClusterQueue {} ({}), stopping",
                    a.cluster_queue, c.reason
                ),
                Some(c.reason.clone()),
                Some(c.message.clone()),
            );
        }
        let admitted = cond(WORKLOAD_ADMITTED).is_some();
        let flavors: Vec<String> = a
            .pod_set_assignments
            .iter()
            .map(|p| {
                let f: Vec<String> = p.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
                format!("{}: {}", p.name, f.join(","))
            })
            .collect();
        let what = if admitted {
            "Admitted"
        } else {
            "Quota reserved"
        };
        return (
            format!(
                "{what} to ClusterQueue {} ({})",
                a.cluster_queue,
                flavors.join("; ")
            ),
            None,
            None,
        );
    }
    let waiting = s
        .condition(WORKLOAD_QUOTA_RESERVED)
        .filter(|c| c.status == "False");
    let backoff = s
        .requeue_state
        .as_ref()
        .and_then(|r| r.requeue_at.as_ref())
        .filter(|_| {
            s.condition(WORKLOAD_REQUEUED)
                .is_some_and(|c| c.status == "False")
        });
    let state = match backoff {
        Some(at) => format!("Pending (requeued after a backoff, not before {})", at.0),
        None => "Pending".into(),
    };
    (
        state,
        waiting.map(|c| c.reason.clone()),
        waiting.map(|c| c.message.clone()),
    )
}

/// What would make a pending workload start sooner, from what holds it back.
pub fn hints(reason: Option<&str>, message: Option<&str>, cluster_queue: &str) -> Vec<String> {
    let m = message.unwrap_or_default();
    let mut out = Vec::new();
    if reason == Some("Inadmissible") || m.contains("doesn't exist") || m.contains("is inactive") {
        out.push(
            "Fix what the message names (the LocalQueue, the ClusterQueue or its flavors): \
             nothing admits it until then."
                .into(),
        );
        return out;
    }
    if m.contains("Pending the preemption") {
        out.push(
            "Nothing: room is being made for it; it starts once the workloads it preempted \
             have stopped."
                .into(),
        );
        return out;
    }
    if reason == Some("ExceedsMaxQuota") || m.contains("exceeds") && m.contains("maximum") {
        out.push(format!(
            "It asks for more than ClusterQueue {cluster_queue} can ever have: lower its \
             requests, or raise the quota."
        ));
        return out;
    }
    if m.contains("topology") {
        out.push(
            "No topology domain has room for the gang: a looser topology request (preferred \
             instead of required, or a wider level) lets it spread; otherwise it starts when \
             a domain that large frees up."
                .into(),
        );
    }
    if m.contains("quota") {
        out.push(format!(
            "It starts when that much quota is free in ClusterQueue {cluster_queue} or lent \
             by its cohort, as running workloads finish; sooner with more nominal quota there, \
             or with a higher priority class where the ClusterQueue's preemption policy lets \
             it preempt."
        ));
    }
    if m.contains("WaitingForPodsReady") || reason == Some("WaitingForPodsReady") {
        out.push(
            "Admission waits until the admitted gangs' pods are ready (waitForPodsReady's \
             blockAdmission)."
                .into(),
        );
    }
    out
}

/// The explanation as lines, kubectl-describe style.
pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = write!(out, "Workload:  {}", e.workload);
    if let Some(owner) = &e.owner {
        let _ = write!(out, " (of {owner})");
    }
    out.push('\n');
    let _ = writeln!(out, "State:     {}", e.state);
    let mut queue = format!("LocalQueue {}", e.local_queue);
    if let Some(cq) = &e.cluster_queue {
        let _ = write!(queue, " -> ClusterQueue {cq}");
    }
    let _ = writeln!(out, "Queue:     {queue}");
    if let Some(p) = e.priority {
        let _ = writeln!(out, "Priority:  {p}");
    }
    let mut positions = Vec::new();
    if let Some(p) = e.position_in_local_queue {
        positions.push(format!("{p} in its LocalQueue"));
    }
    if let Some(p) = e.position_in_cluster_queue {
        positions.push(format!("{p} in its ClusterQueue"));
    }
    positions.extend(e.position_notes.iter().cloned());
    if !positions.is_empty() {
        let _ = writeln!(out, "Position:  {} (0 is next)", positions.join(", "));
    }
    if let Some(estimate) = &e.estimate {
        let _ = writeln!(out, "Estimate:  {estimate}");
    }
    if let Some(m) = e.message.as_ref().filter(|m| !m.is_empty()) {
        let reason = e.reason.as_deref().unwrap_or_default();
        let _ = writeln!(out, "Why:       {reason}: {m}");
    }
    for (i, h) in e.to_start_sooner.iter().enumerate() {
        let label = if i == 0 { "Sooner:" } else { "" };
        let _ = writeln!(out, "{label:<10} {h}");
    }
    out
}

/// The Workload `name` in `ns`, or the one owned by an object named `name`.
async fn find_workload(
    client: &kube::Client,
    ns: &str,
    name: &str,
    target: &str,
) -> Result<Workload, ExplainError> {
    let api = Api::<Workload>::namespaced(client.clone(), ns);
    let request = |source| ExplainError::Request {
        target: target.to_string(),
        source,
    };
    if let Some(wl) = api.get_opt(name).await.map_err(request)? {
        return Ok(wl);
    }
    let owned = api
        .list(&ListParams::default())
        .await
        .map_err(request)?
        .items
        .into_iter()
        .filter(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == name)
        })
        .min_by_key(|w| w.metadata.name.clone());
    owned.ok_or_else(|| ExplainError::NotManaged {
        target: target.to_string(),
        namespace: ns.to_string(),
    })
}

/// The workload's item in `queue`'s first page, or why there is none.
async fn listed(
    client: &kube::Client,
    queue: &Queue,
    ns: &str,
    name: &str,
) -> Result<serde_json::Value, String> {
    match fetch(client, queue, 0, None).await {
        Ok(summary) => items(&summary)
            .iter()
            .find(|i| i["metadata"]["namespace"] == ns && i["metadata"]["name"] == name)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "not in the first {} listed in {}",
                    items(&summary).len(),
                    queue.describe()
                )
            }),
        Err(e) => Err(format!("{}: {e}", queue.describe())),
    }
}

/// The estimate line for a listed item of kuota's group; `None` from Kueue's group.
fn estimate_line(item: &serde_json::Value) -> Option<String> {
    item.get("startEstimate")?;
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let e = Estimate::of(item, now);
    Some(if e.start == "<unknown>" {
        format!("unknown: {}", e.source)
    } else if e.source == "none" {
        format!("{}: nothing running has to end first", e.start)
    } else if e.range == "<none>" {
        format!("{}, from {} runtimes", e.start, e.source)
    } else {
        format!(
            "{} (between {} from now), from {} runtimes",
            e.start, e.range, e.source
        )
    })
}

/// Runs `kuota explain`; what to print on stdout, or the error.
pub async fn run(args: &ExplainArgs) -> Result<String, ExplainError> {
    let target = args.target.as_str();
    let (ns, name) = match target.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => (ns, name),
        _ => return Err(ExplainError::Name(target.to_string())),
    };
    let client = client(&args.cluster).await?;
    let wl = find_workload(&client, ns, name, target).await?;
    let wl_name = wl.metadata.name.clone().unwrap_or_default();
    let (state, reason, message) = state_of(&wl);
    let owner = wl
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| format!("{} {ns}/{}", o.kind, o.name));
    let admitted_cq = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map(|a| a.cluster_queue.clone());
    let lq = wl.spec.queue_name.clone().unwrap_or_default();
    let lq_cq = Api::<LocalQueue>::namespaced(client.clone(), ns)
        .get_opt(&lq)
        .await
        .ok()
        .flatten()
        .map(|q| q.spec.cluster_queue.clone());
    let cluster_queue = admitted_cq.or(lq_cq);
    let mut e = Explanation {
        workload: format!("{ns}/{wl_name}"),
        owner,
        state,
        local_queue: format!("{ns}/{lq}"),
        cluster_queue: cluster_queue.clone(),
        priority: wl.spec.priority,
        ..Explanation::default()
    };
    if is_pending(&wl) {
        let local = Queue::Local {
            namespace: ns.to_string(),
            name: lq.clone(),
        };
        match listed(&client, &local, ns, &wl_name).await {
            Ok(item) => {
                e.position_in_local_queue = item["positionInLocalQueue"].as_i64();
                e.estimate = estimate_line(&item);
            }
            Err(note) => e.position_notes.push(note),
        }
        if let Some(cq) = &cluster_queue {
            let cluster = Queue::Cluster(cq.clone());
            match listed(&client, &cluster, ns, &wl_name).await {
                Ok(item) => e.position_in_cluster_queue = item["positionInClusterQueue"].as_i64(),
                Err(note) => e.position_notes.push(note),
            }
        }
        e.to_start_sooner = hints(
            reason.as_deref(),
            message.as_deref(),
            cluster_queue.as_deref().unwrap_or("(unknown)"),
        );
    }
    e.reason = reason;
    e.message = message;
    Ok(match args.output {
        Some(ExplainOutput::Json) => {
            format!("{}\n", serde_json::to_string_pretty(&e).unwrap_or_default())
        }
        Some(ExplainOutput::Yaml) => serde_norway::to_string(&e).unwrap_or_default(),
        None => render(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn workload(spec_extra: Value, status: Value) -> Workload {
        let mut spec = json!({"queueName": "lq", "priority": 100, "podSets": [{"name": "main",
            "count": 1, "template": {"spec": {"containers": []}}}]});
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
            s.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-train-1", "namespace": "team"},
            "spec": spec, "status": status,
        }))
        .expect("a workload")
    }

    fn cond(t: &str, status: &str, reason: &str, message: &str) -> Value {
        json!({"type": t, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-11-28T00:00:00Z"})
    }

    #[test]
    fn a_pending_workload_says_why_with_the_engines_numbers_and_what_would_help() {
        let why = "couldn't assign flavors to pod set main: insufficient unused quota for cpu \
                   in flavor default, 1 more needed (2 requested, 1 available; nominal quota 1)";
        let wl = workload(
            json!({}),
            json!({"conditions": [cond("QuotaReserved", "False", "Pending", why)]}),
        );
        assert!(is_pending(&wl));
        let (state, reason, message) = state_of(&wl);
        assert_eq!(state, "Pending");
        let hints = hints(reason.as_deref(), message.as_deref(), "cq");
        assert_eq!(hints.len(), 1, "{hints:?}");
        assert!(hints[0].contains("ClusterQueue cq"), "{hints:?}");
        let text = render(&Explanation {
            workload: "team/job-train-1".into(),
            owner: Some("Job team/train".into()),
            state,
            local_queue: "team/lq".into(),
            cluster_queue: Some("cq".into()),
            priority: Some(100),
            position_in_local_queue: Some(0),
            position_in_cluster_queue: Some(3),
            reason,
            message,
            to_start_sooner: hints,
            ..Explanation::default()
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Workload:  team/job-train-1 (of Job team/train)");
        assert_eq!(lines[1], "State:     Pending");
        assert_eq!(lines[2], "Queue:     LocalQueue team/lq -> ClusterQueue cq");
        assert_eq!(lines[3], "Priority:  100");
        assert_eq!(
            lines[4],
            "Position:  0 in its LocalQueue, 3 in its ClusterQueue (0 is next)"
        );
        assert!(lines[5].starts_with("Why:       Pending: couldn't assign flavors"));
        assert!(lines[6].starts_with("Sooner:    It starts when"), "{text}");
    }

    #[test]
    fn admitted_finished_evicted_and_inactive_workloads_are_named_so() {
        let admission = json!({"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
            "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]});
        let admitted = workload(
            json!({}),
            json!({"admission": admission, "conditions": [cond("Admitted", "True", "Admitted", "")]}),
        );
        assert!(!is_pending(&admitted));
        assert_eq!(
            state_of(&admitted).0,
            "Admitted to ClusterQueue cq (main: cpu=default)"
        );
        let evicted = workload(
            json!({}),
            json!({"admission": admission, "conditions": [
                cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload")]}),
        );
        assert_eq!(
            state_of(&evicted).0,
            "Evicted from ClusterQueue cq (Preempted), stopping"
        );
        let finished = workload(
            json!({}),
            json!({"conditions": [cond("Finished", "True", "Succeeded", "done")]}),
        );
        assert_eq!(state_of(&finished).0, "Finished (Succeeded)");
        assert!(!is_pending(&finished));
        let inactive = workload(json!({"active": false}), json!({}));
        assert!(state_of(&inactive).0.starts_with("Inactive"));
        assert!(!is_pending(&inactive));
    }

    #[test]
    fn hints_follow_what_holds_the_workload_back() {
        let h = |reason: &str, m: &str| hints(Some(reason), Some(m), "cq");
        assert!(h("Inadmissible", "LocalQueue lq doesn't exist")[0].starts_with("Fix what"));
        assert!(
            h(
                "Pending",
                "insufficient quota. Pending the preemption of 1 workload(s)"
            )[0]
            .starts_with("Nothing")
        );
        let topo = h(
            "Pending",
            "topology \"t\": required rack: the largest free rack has 4 of the 8 gpu needed",
        );
        assert!(topo[0].contains("topology domain"), "{topo:?}");
        assert!(h("Pending", "").is_empty());
    }

    #[test]
    fn a_target_needs_a_namespace_and_a_name() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        for bad in ["train", "team/", "/train", "a/b/c"] {
            let args = ExplainArgs {
                target: bad.into(),
                output: None,
                cluster: crate::cli::ClusterArgs::default(),
            };
            let err = rt.block_on(run(&args)).expect_err("refused");
            assert!(matches!(err, ExplainError::Name(_)), "{bad}: {err}");
        }
    }
}
