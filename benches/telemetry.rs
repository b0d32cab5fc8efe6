//! What a Prometheus scrape costs during a 50,000-workload run, and whether it stalls
//! the engine. Run: `cargo bench --bench telemetry` (see docs/performance.md).
//!
//! The state is Kueue's large-scale shape (1,000 ClusterQueues, 50,000 workloads) fed
//! through the shells' own feed (`telemetry::observed`), after one cycle (1,000
//! admitted, 49,000 pending with a reason) and a gauge refresh.
//!
//! * `scrape/encode-50k`: one full `/metrics` exposition of that state;
//! * `scrape/encode-empty`: the same for a fresh registry (the baseline of the ratio);
//! * `refresh/gauges-50k`: rebuilding the state gauges from the engine, which the
//!   engine task does at most every 250 ms (a scrape never does it);
//! * `cycle/cold-50k` and `cycle/cold-50k-while-scraping`: the engine's first cycle
//!   over the 50,000 workloads, alone and with another thread encoding scrapes back to
//!   back. A scrape reads the last published gauges under a lock held only to clone
//!   an `Arc`, so the two should differ by CPU contention only.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use kuota::sim::SIM_EPOCH_MS;
use kuota::telemetry::{Metrics, Observer, observed};

#[path = "common/large_scale.rs"]
mod large_scale;
use large_scale::{large_scale_yaml, observed_pending_engine, plan};

fn benches(c: &mut Criterion) {
    let plan = plan("large-scale-50k", large_scale_yaml());
    assert_eq!(plan.workloads.len(), 50_000);
    let now = SIM_EPOCH_MS + plan.workloads.last().map_or(0, |w| w.arrival);

    let metrics = Metrics::default();
    let mut observer = Observer::new(metrics.clone(), Duration::from_millis(250));
    let pending = observed_pending_engine(&plan, Some(&mut observer));
    let mut engine = pending.clone();
    let (decisions, _) = observed::schedule(&mut engine, Some(&mut observer), now);
    observer.refresh(&engine);
    let text = metrics.encode();
    eprintln!(
        "state: {} decisions in the first cycle; exposition {} series, {} bytes",
        decisions.len(),
        text.lines().filter(|l| !l.starts_with('#')).count(),
        text.len()
    );

    c.bench_function("scrape/encode-50k", |b| {
        b.iter(|| black_box(metrics.encode()))
    });
    let empty = Metrics::default();
    c.bench_function("scrape/encode-empty", |b| {
        b.iter(|| black_box(empty.encode()))
    });
    c.bench_function("refresh/gauges-50k", |b| {
        b.iter(|| observer.refresh(&engine))
    });

    c.bench_function("cycle/cold-50k", |b| {
        b.iter_batched_ref(
            || pending.clone(),
            |e| black_box(e.schedule(now)),
            BatchSize::PerIteration,
        )
    });
    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let scraper = {
        let (metrics, stop, scrapes) = (metrics.clone(), stop.clone(), scrapes.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                black_box(metrics.encode());
                scrapes.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    c.bench_function("cycle/cold-50k-while-scraping", |b| {
        b.iter_batched_ref(
            || pending.clone(),
            |e| black_box(e.schedule(now)),
            BatchSize::PerIteration,
        )
    });
    stop.store(true, Ordering::Relaxed);
    let _ = scraper.join();
    eprintln!(
        "scrapes encoded during cycle/cold-50k-while-scraping: {}",
        scrapes.load(Ordering::Relaxed)
    );
}

criterion_group! {
    name = telemetry;
    // The cycles are long (a 50,000-workload cycle): few samples suffice.
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(telemetry);
