//! Start-time forecasts at the scale: 1,000 ClusterQueues and 50,000 workloads
//! (Kueue's large-scale shape; after a first cycle 1,000 run and 49,000 are pending).
//!
//! * `forecast/full-pass-1000cq-49k-pending`: `forecast::forecast`, the three forward
//!   runs (p10, p50, p90 runtimes) until every pending workload has a start.
//! * `forecast/one-run-1000cq-49k-pending`: one forward run (`forecast_at`).
//! * `forecast/baseline-one-cycle`: one scheduling cycle of a copy of the same state,
//!   measured in the same run, so a pass can be quoted as a number of cycles.
//! * `visibility/page-1000-of-50k-pending` (and `…-last-page…`): what kuota does to answer
//!   `clusterqueues/<cq>/pendingworkloads?limit=1000` for one ClusterQueue with 50,000
//!   pending workloads: the engine's ordered page and the JSON body of kuota's group
//!   (Kueue's fields and each item's start estimate); `visibility/baseline-page-1000-of-1000`
//!   is the same page from a queue of 1,000, measured in the same run.
//!
//! Runtimes are learned for every LocalQueue and priority: three runs per class around
//! the generator's runtime (0.8×, 1×, 1.2×).
//!
//!   cargo bench --bench forecast

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use kuota::forecast::{self, ForecastConfig, RuntimeBook};
use kuota::sim::SIM_EPOCH_MS;

#[path = "common/large_scale.rs"]
mod large_scale;
use large_scale::{large_scale_yaml, pending_engine, plan};

fn benches(c: &mut Criterion) {
    let plan = plan("large-scale-50k", large_scale_yaml());
    let now = SIM_EPOCH_MS + plan.workloads.last().map_or(0, |w| w.arrival);
    let mut engine = pending_engine(&plan);
    engine.schedule(now);
    let mut book = RuntimeBook::default();
    for w in &plan.workloads {
        let ns = &w.key.namespace;
        let queue = w.object.spec.queue_name.clone().unwrap_or_default();
        let priority = w.object.spec.priority.unwrap_or(0);
        if book.sorted(ns, &queue, priority, 3).is_none() {
            for f in [8, 10, 12] {
                book.record(ns, &queue, priority, w.runtime * f / 10);
            }
        }
    }
    let cfg = ForecastConfig::default();
    let f = forecast::forecast(&engine, &book, &cfg);
    let estimated = f.estimates.values().filter(|e| e.p50.is_some()).count();
    eprintln!(
        "forecast: {} pending, {} with a p50, {} cycles over three runs, truncated: {}",
        engine.pending_count(),
        estimated,
        f.cycles,
        f.truncated
    );
    c.bench_function("forecast/full-pass-1000cq-49k-pending", |b| {
        b.iter(|| black_box(forecast::forecast(&engine, &book, &cfg)))
    });
    c.bench_function("forecast/one-run-1000cq-49k-pending", |b| {
        b.iter(|| black_box(forecast::forecast_at(&engine, &book, &cfg, 0.5)))
    });
    c.bench_function("forecast/baseline-one-cycle", |b| {
        b.iter_batched_ref(
            || engine.clone(),
            |e| black_box(e.schedule(now + 1)),
            BatchSize::PerIteration,
        )
    });
}

/// One ClusterQueue (1 cpu) with one workload admitted and `pending` more waiting, 1 cpu
/// each, a second apart.
fn one_queue(pending: usize) -> kuota::engine::Engine {
    use kuota::engine::{Engine, EngineConfig, Event};
    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("fixture")
    }
    let mut e = Engine::new(EngineConfig::default());
    e.apply(
        0,
        Event::ResourceFlavorUpserted(obj(
            serde_json::json!({"metadata": {"name": "f"}, "spec": {}}),
        )),
    )
    .expect("flavor");
    e.apply(
        0,
        Event::ClusterQueueUpserted(obj(serde_json::json!({"metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}}))),
    )
    .expect("cq");
    e.apply(
        0,
        Event::LocalQueueUpserted(obj(
            serde_json::json!({"metadata": {"name": "lq", "namespace": "ns"},
        "spec": {"clusterQueue": "cq"}}),
        )),
    )
    .expect("lq");
    for i in 0..=pending {
        let wl = serde_json::json!({"metadata": {"name": format!("w{i}"), "namespace": "ns",
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "priority": (i % 3) as i32, "podSets": [{"name": "main", "count": 1,
                "template": {"spec": {"containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]}}}]}});
        e.apply(i as i64 * 1000, Event::WorkloadUpserted(obj(wl)))
            .expect("workload");
    }
    e.schedule(pending as i64 * 1000);
    e
}

/// The page kuota's group answers: the engine's page, then the body with estimates.
fn page(
    engine: &kuota::engine::Engine,
    estimates: &kuota::controller::pending::Estimates,
    offset: usize,
) -> Vec<u8> {
    use kuota::visibility::api::{GroupVersion, KUOTA};
    let items = engine
        .pending_in_cluster_queue("cq", offset, 1000)
        .expect("the queue exists");
    let version = GroupVersion {
        group: KUOTA,
        version: "v1alpha1",
    };
    kuota::visibility::api::summary(version, &items, estimates)
        .to_string()
        .into_bytes()
}

fn visibility(c: &mut Criterion) {
    use kuota::controller::pending::Estimates;
    for (name, pending, offset) in [
        ("visibility/baseline-page-1000-of-1000", 1_000, 0),
        ("visibility/page-1000-of-50k-pending", 50_000, 0),
        ("visibility/last-page-1000-of-50k-pending", 50_000, 49_000),
    ] {
        let engine = one_queue(pending);
        let book = RuntimeBook::default();
        let cfg = ForecastConfig {
            default_runtime: Some(60_000),
            ..ForecastConfig::default()
        };
        let estimates = Estimates::Latest(std::sync::Arc::new(forecast::forecast(
            &engine, &book, &cfg,
        )));
        assert!(!page(&engine, &estimates, offset).is_empty());
        c.bench_function(name, |b| {
            b.iter(|| black_box(page(&engine, &estimates, offset)))
        });
    }
}

criterion_group! {
    name = visibility_benches;
    config = Criterion::default().sample_size(20);
    targets = visibility
}

criterion_group! {
    name = forecast_benches;
    // Each iteration is a full drain three times over: few samples suffice.
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(visibility_benches, forecast_benches);
