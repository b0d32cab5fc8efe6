//! Admission handler benchmarks. Run: `cargo bench --bench webhook`.
//!
//! The input is a realistic ~4.7 KB AdmissionReview of a batch/v1 training Job (two pods of
//! eight GPUs, init container, sidecar, env, volumes, affinity, tolerations, TAS annotation:
//! `tests/webhook_fixtures/job.json`), against a synced index and the example policies.
//!
//! * `webhook/mutate-job`: `webhook::handle` on `/mutate-batch-v1-job`, end to end (decode →
//!   mutate → encode with a base64 JSON patch). Target: ≤ 20 µs.
//! * `webhook/validate-job`: `/validate-batch-v1-job`; no policy selects the namespace.
//! * `webhook/validate-job-policies`: the same Job in a namespace three policies select, so
//!   the policy facts (GPU counts, node selectors) are computed and checked.
//! * `baseline/serde-value-roundtrip`: `serde_json::from_slice::<Value>` + `to_vec` of the same
//!   review, measured in the same run so the handler can be quoted as a ratio that does not
//!   depend on the machine. The ratio is printed at the end.

use criterion::Criterion;
use kuota::api::selector::Labels;
use kuota::api::{LocalQueue, LocalQueueSpec, WorkloadPriorityClass};
use kuota::policy::PolicyHandle;
use kuota::webhook::{
    ClusterIndex, IndexEvent, Route, WebhookConfig, WebhookState, handle, routes,
};
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::{Duration, Instant};

const JOB: &str = include_str!("../tests/webhook_fixtures/job.json");

fn review(namespace: &str) -> Vec<u8> {
    let mut job: Value = serde_json::from_str(JOB).expect("fixture parses");
    job["metadata"]["namespace"] = json!(namespace);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "4d8f0f5e-3c1b-4bde-9e51-8f1d0a3c9b2e",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
            "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "name": "llm-pretrain-7b",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "alice@example.com", "uid": "a1b2c3",
                         "groups": ["team-a-ml", "system:authenticated"]},
            "object": job,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions",
                        "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}
        }
    });
    serde_json::to_vec(&review).expect("serializable")
}

fn state() -> WebhookState {
    let idx = ClusterIndex::default();
    let ns = |name: &str, tier: Option<&str>| {
        let mut labels =
            Labels::from([("kubernetes.io/metadata.name".to_string(), name.to_string())]);
        if let Some(t) = tier {
            labels.insert("kuota.dev/tier".into(), t.into());
        }
        IndexEvent::NamespaceApplied {
            name: name.into(),
            labels,
        }
    };
    let mut lq = LocalQueue::new(
        "team-a-queue",
        LocalQueueSpec {
            cluster_queue: "cq".into(),
            ..Default::default()
        },
    );
    lq.metadata.namespace = Some("team-a".into());
    for e in [
        ns("team-a", None),
        ns("gpu-a", Some("gpu")),
        IndexEvent::LocalQueueApplied(Box::new(lq)),
        IndexEvent::PriorityClassApplied(Box::new(WorkloadPriorityClass::new("default", 100))),
        IndexEvent::Synced,
    ] {
        idx.apply(e);
    }
    let policies = PolicyHandle::load_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/policies"))
        .expect("example policies load");
    WebhookState::new(std::sync::Arc::new(idx), policies, WebhookConfig::default())
}

fn route(path: &str) -> Route {
    routes()
        .into_iter()
        .find(|r| r.path == path)
        .expect("route exists")
}

fn baseline(body: &[u8]) -> Vec<u8> {
    let v: Value = serde_json::from_slice(body).expect("valid JSON");
    serde_json::to_vec(&v).expect("serializable")
}

/// Mean time per call over a fixed wall-clock budget, for the printed ratio.
fn mean(mut f: impl FnMut()) -> Duration {
    for _ in 0..1_000 {
        f();
    }
    let budget = Duration::from_millis(500);
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < budget {
        for _ in 0..100 {
            f();
        }
        n += 100;
    }
    start.elapsed() / n
}

fn main() {
    let state = state();
    let body = review("team-a");
    let policy_body = review("gpu-a");
    let mutate = route("/mutate-batch-v1-job");
    let validate = route("/validate-batch-v1-job");
    println!("review size: {} bytes", body.len());
    // The answers are what we think they are.
    let out: Value =
        serde_json::from_slice(&handle(&state, &mutate, &body).expect("answered")).expect("JSON");
    assert!(
        out["response"]["patch"].is_string(),
        "mutation patches: {out}"
    );
    let out: Value =
        serde_json::from_slice(&handle(&state, &validate, &policy_body).expect("answered"))
            .expect("JSON");
    assert_eq!(out["response"]["allowed"], true, "{out}");

    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("webhook");
    g.bench_function("mutate-job", |b| {
        b.iter(|| handle(&state, &mutate, black_box(&body)))
    });
    g.bench_function("validate-job", |b| {
        b.iter(|| handle(&state, &validate, black_box(&body)))
    });
    g.bench_function("validate-job-policies", |b| {
        b.iter(|| handle(&state, &validate, black_box(&policy_body)))
    });
    g.finish();
    c.bench_function("baseline/serde-value-roundtrip", |b| {
        b.iter(|| baseline(black_box(&body)))
    });
    c.final_summary();

    let m = mean(|| {
        black_box(handle(&state, &mutate, black_box(&body)).ok());
    });
    let v = mean(|| {
        black_box(handle(&state, &validate, black_box(&policy_body)).ok());
    });
    let base = mean(|| {
        black_box(baseline(black_box(&body)));
    });
    let ratio = |d: Duration| d.as_secs_f64() / base.as_secs_f64();
    println!(
        "ratio to baseline (Value round trip {base:.2?}): mutate-job {m:.2?} = {:.2}x, validate-job-policies {v:.2?} = {:.2}x",
        ratio(m),
        ratio(v)
    );
}
