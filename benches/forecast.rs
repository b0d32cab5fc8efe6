//! Start-time forecasts at the scale: 1,000 ClusterQueues and 50,000 workloads
//! (Kueue's large-scale shape; after a first cycle 1,000 run and 49,000 are pending).
//!
//! * `forecast/full-pass-1000cq-49k-pending`: `forecast::forecast`, the three forward
//!   runs (p10, p50, p90 runtimes) until every pending workload has a start.
//! * `forecast/one-run-1000cq-49k-pending`: one forward run (`forecast_at`).
//! * `forecast/baseline-one-cycle`: one scheduling cycle of a copy of the same state,
//!   measured in the same run, so a pass can be quoted as a number of cycles.
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

criterion_group! {
    name = forecast_benches;
    // Each iteration is a full drain three times over: few samples suffice.
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(forecast_benches);
