//! Helpers shared by the webhook tests: review builders, a synced index, and a way to drive
//! the router like the API server does.

// Each test binary uses a different subset of the helpers.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use kuota::api::selector::Labels;
use kuota::api::{LocalQueue, LocalQueueSpec, WorkloadPriorityClass};
use kuota::policy::PolicyHandle;
use kuota::webhook::{ClusterIndex, IndexEvent, WebhookConfig, WebhookState, router};
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

/// The realistic ~5 KB training Job used by tests and the benchmark.
pub const JOB_JSON: &str = include_str!("../webhook_fixtures/job.json");

pub fn job() -> Value {
    serde_json::from_str(JOB_JSON).expect("fixture parses")
}

/// An admission.k8s.io/v1 review of `object` (and `old`) for `kind` = (group, version, kind).
pub fn review(
    kind: (&str, &str, &str),
    op: &str,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let ns = object
        .or(old)
        .and_then(|o| o.pointer("/metadata/namespace"))
        .cloned()
        .unwrap_or(json!("team-a"));
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b1c2d3e-0000-4000-8000-000000000001",
            "kind": {"group": kind.0, "version": kind.1, "kind": kind.2},
            "resource": {"group": kind.0, "version": kind.1, "resource": format!("{}s", kind.2.to_lowercase())},
            "namespace": ns,
            "operation": op,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
}

pub const JOB: (&str, &str, &str) = ("batch", "v1", "Job");
pub const POD: (&str, &str, &str) = ("", "v1", "Pod");

/// A minimal batch Job in `ns`, with `labels`, running `gpus` GPUs per pod on `pods` pods.
pub fn small_job(ns: &str, labels: Value, pods: i32, gpus: i32) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": ns, "labels": labels},
        "spec": {
            "parallelism": pods, "completions": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}
            ]}}
        }
    })
}

/// Index events for a namespace with labels.
pub fn namespace(name: &str, labels: &[(&str, &str)]) -> IndexEvent {
    let mut l: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.insert("kubernetes.io/metadata.name".into(), name.into());
    IndexEvent::NamespaceApplied {
        name: name.into(),
        labels: l,
    }
}

pub fn local_queue(ns: &str, name: &str) -> IndexEvent {
    let mut q = LocalQueue::new(
        name,
        LocalQueueSpec {
            cluster_queue: "cq".into(),
            ..Default::default()
        },
    );
    q.metadata.namespace = Some(ns.into());
    IndexEvent::LocalQueueApplied(Box::new(q))
}

/// An index that has synced: team-a (LocalQueue `default`) and team-b (no default queue),
/// both labelled `kuota.dev/managed=true` as namespaces whose jobs without a queue name
/// kuota handles; gpu-a (tier gpu), research-a (tier research) and plain, not labelled so;
/// kube-system; and WorkloadPriorityClass `default`.
pub fn synced_index() -> Arc<ClusterIndex> {
    let idx = ClusterIndex::default();
    for e in [
        namespace("team-a", &[("kuota.dev/managed", "true")]),
        namespace("team-b", &[("kuota.dev/managed", "true")]),
        namespace("plain", &[]),
        namespace("gpu-a", &[("kuota.dev/tier", "gpu")]),
        namespace("research-a", &[("kuota.dev/tier", "research")]),
        namespace("kube-system", &[]),
        local_queue("team-a", "default"),
        local_queue("team-a", "team-a-queue"),
        IndexEvent::PriorityClassApplied(Box::new(WorkloadPriorityClass::new("default", 100))),
        IndexEvent::Synced,
    ] {
        idx.apply(e);
    }
    Arc::new(idx)
}

pub fn state_with(config: WebhookConfig, policies: PolicyHandle) -> Arc<WebhookState> {
    Arc::new(WebhookState::new(synced_index(), policies, config))
}

pub fn synced_state() -> Arc<WebhookState> {
    state_with(WebhookConfig::default(), PolicyHandle::empty())
}

/// POSTs `body` to `path` through the router; returns the status and the JSON body.
pub async fn post_raw(state: &Arc<WebhookState>, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let resp = router(state.clone())
        .oneshot(
            Request::post(path)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .expect("request builds"),
        )
        .await
        .expect("router answers");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body reads");
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v)
}

/// POSTs a review and returns its `response` (asserting HTTP 200 and the echoed uid).
pub async fn post(state: &Arc<WebhookState>, path: &str, review: &Value) -> Value {
    let (status, body) = post_raw(state, path, serde_json::to_vec(review).expect("json")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["kind"], "AdmissionReview");
    assert_eq!(body["apiVersion"], review["apiVersion"]);
    assert_eq!(body["response"]["uid"], review["request"]["uid"]);
    body["response"].clone()
}

/// The decoded JSON patch of a response (empty when there is none).
pub fn patch_of(response: &Value) -> json_patch::Patch {
    match response.get("patch").and_then(Value::as_str) {
        None => json_patch::Patch(Vec::new()),
        Some(b64) => {
            assert_eq!(response["patchType"], "JSONPatch");
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("patch is base64");
            serde_json::from_slice(&raw).expect("patch is a JSON patch")
        }
    }
}

/// Applies a response's patch to `object`.
pub fn apply(object: &Value, response: &Value) -> Value {
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch_of(response)).expect("patch applies");
    out
}

/// The denial message.
pub fn message(response: &Value) -> String {
    response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
