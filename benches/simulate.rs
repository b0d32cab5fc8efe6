//! Whole-simulation benchmarks of the built-in scenarios. Run:
//! `cargo bench --bench simulate` (see docs/performance.md, "Simulator").
//!
//! Criterion times the whole simulator (engine + event loop + bookkeeping).
//! The targets are about the engine's own CPU time and the simulated
//! makespan, which criterion cannot see, so one untimed run per scenario
//! first prints them and checks them against the targets:
//!
//! | scenario | engine CPU | other |
//! |---|---|---|
//! | kueue-baseline | ≤ 1 s | makespan within 10% of the capacity bound (reported, not enforced) |
//! | kueue-large-scale | ≤ 5 s | peak memory ≤ 500 MiB: measured with `/usr/bin/time -v` on the CLI |
//! | kueue-tas | ≤ 2 s | |

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kuota::sim::{Scenario, SimConfig, Simulation};

/// (scenario, engine CPU target in ms).
const SCENARIOS: [(&str, f64); 3] = [
    ("kueue-baseline", 1000.0),
    ("kueue-tas", 2000.0),
    ("kueue-large-scale", 5000.0),
];

fn benches(c: &mut Criterion) {
    for (name, target_ms) in SCENARIOS {
        // Built-in scenarios are embedded and tested to plan; failing here is a bug.
        let plan = Scenario::builtin(name)
            .and_then(|s| s.plan(1).ok())
            .expect("built-in scenario plans");
        match Simulation::new(&plan, SimConfig::default()).run() {
            Ok(r) => {
                let engine_ms = r.timing.as_ref().map_or(0.0, |t| t.engine_ms);
                let bound = r.totals.capacity_bound_ms.unwrap_or(0);
                eprintln!(
                    "{name}: engine {engine_ms:.0} ms (target <= {target_ms:.0} ms: {}), {:.0} decisions/s; makespan {} ms = {:.2}x capacity bound {bound} ms; {} anomalies",
                    if engine_ms <= target_ms {
                        "met"
                    } else {
                        "MISSED"
                    },
                    r.timing.as_ref().map_or(0.0, |t| t.decisions_per_second),
                    r.totals.makespan_ms,
                    r.totals.makespan_ms as f64 / bound.max(1) as f64,
                    r.anomalies.len(),
                );
            }
            Err(e) => {
                eprintln!("{name}: simulation failed, not timed: {e}");
                continue;
            }
        }
        c.bench_function(&format!("simulate/{name}"), |b| {
            b.iter(|| {
                black_box(
                    Simulation::new(&plan, SimConfig::default())
                        .run()
                        .map(|r| r.totals.finished),
                )
            })
        });
    }
}

criterion_group! {
    name = simulate;
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(simulate);
