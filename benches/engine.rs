//! Engine benchmarks. Run: `cargo bench --bench engine` (see docs/performance.md).
//!
//! * `cycle/all-heads-1000cq-50k-pending`: the issue's target. 1,000
//!   ClusterQueues in 10 cohorts with every queue's quota in use and 64,000
//!   workloads pending behind it; one admitted workload per ClusterQueue has just
//!   finished, so the cycle evaluates the heads of all 1,000 queues (every shape's
//!   probe), admits one workload per queue and parks the rest again.
//! * `cycle/cold-1000cq-50k-pending`: the very first cycle over 50,000 workloads
//!   that nothing has looked at yet. Large workloads come first by priority: one
//!   per queue fits its nominal quota, and the cohorts have nothing left to lend,
//!   so it admits 1,000 and records a reason on each of the other 49,000.
//!
//! Each cycle state is built once and cloned outside the timed region, so every
//! iteration schedules from the same state.
//! * `drain/large-scale-50k`: Kueue's "large-scale" performance shape (1, 5
//!   and 20 cpu workloads, nominal 20 / borrowing limit 100 per queue) scaled
//!   to 50,000 workloads over 1,000 ClusterQueues in 10 cohorts, simulated to
//!   completion. Wall time covers the whole simulator; the engine's own time
//!   is printed once before the measurement.
//! * `churn/1000-unchanged-node-updates-50k-pending`: the large-scale 50,000
//!   workloads after their first cycle (49,000 parked with a reason), plus a TAS
//!   flavor over 1,000 GPU nodes; 1,000 kubelet heartbeats that change nothing
//!   the engine reads (one second of a 1,000-node cluster's Node updates), then
//!   the next cycle. Compare with `churn/cycle-only-50k-pending` (the same cycle
//!   without the updates), `churn/one-node-shrinks-in-range-50k-pending` (one
//!   node loses GPUs but the tree's range holds: its leaf and ancestors are updated
//!   in place, nothing is retried) and `churn/one-real-node-change-50k-pending` (one
//!   node grows past the tree's range: its flavor's tree is rebuilt, its
//!   ClusterQueue retried).
//! * `baseline/btreemap-insert-50k-keys`: inserting the same 50,000 workload
//!   keys into a `BTreeMap`, measured in the same run so the cycle can be
//!   quoted as a ratio that does not depend on the machine.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Node;
use kuota::engine::{Decision, Engine, Event, Millis, WorkloadKey};
use kuota::sim::{SIM_EPOCH_MS, SimConfig, Simulation};

#[path = "common/large_scale.rs"]
mod large_scale;
use large_scale::{generator_yaml, large_scale_yaml, pending_engine, plan};

fn admissions(decisions: &[Decision]) -> Vec<WorkloadKey> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Admit { workload, .. } => Some(workload.clone()),
            _ => None,
        })
        .collect()
}

/// The steady state the issue's target describes: quota in use everywhere, at least
/// 50,000 workloads waiting, and one admitted workload per ClusterQueue just finished.
fn all_heads_engine() -> (Engine, Millis) {
    // 65 workloads per queue in the same 33:12:5 proportions: one large one per
    // queue fits at once, 64,000 stay pending.
    let plan = plan("all-heads-65k", generator_yaml(43, 16, 6));
    let mut engine = pending_engine(&plan);
    let now = SIM_EPOCH_MS + plan.workloads.last().map_or(0, |w| w.arrival);
    let admitted = admissions(&engine.schedule(now));
    let mut seen = std::collections::HashSet::new();
    for k in admitted {
        // One finish per ClusterQueue: each queue (one namespace each) gets room.
        if seen.insert(k.namespace.clone())
            && let Err(e) = engine.apply(now + 1, Event::WorkloadFinished(k.clone()))
        {
            panic!("benchmark setup: finish {k}: {e}");
        }
    }
    eprintln!(
        "all-heads: {} pending, {} ClusterQueues with a finished workload",
        engine.pending_count(),
        seen.len()
    );
    (engine, now + 2)
}

fn benches(c: &mut Criterion) {
    let (steady, at) = all_heads_engine();
    let d = steady.clone().schedule(at);
    eprintln!(
        "cycle/all-heads: {} decisions, {} admissions",
        d.len(),
        admissions(&d).len()
    );
    c.bench_function("cycle/all-heads-1000cq-50k-pending", |b| {
        // `iter_batched_ref`: the engine is dropped outside the timed region. Dropping
        // 65,000 workloads costs more than the cycle itself and is not part of it.
        b.iter_batched_ref(
            || steady.clone(),
            |e| black_box(e.schedule(at)),
            BatchSize::PerIteration,
        )
    });
    drop(steady);

    let plan = plan("large-scale-50k", large_scale_yaml());
    assert_eq!(plan.workloads.len(), 50_000);
    let now = SIM_EPOCH_MS + plan.workloads.last().map_or(0, |w| w.arrival);

    let pending = pending_engine(&plan);
    let first = pending.clone().schedule(now);
    eprintln!(
        "cycle/cold: {} decisions, {} admissions from 50,000 pending",
        first.len(),
        admissions(&first).len()
    );
    c.bench_function("cycle/cold-1000cq-50k-pending", |b| {
        b.iter_batched_ref(
            || pending.clone(),
            |e| black_box(e.schedule(now)),
            BatchSize::PerIteration,
        )
    });

    churn_benches(c, &pending, now);
    drop(pending);

    let keys: Vec<WorkloadKey> = plan.workloads.iter().map(|w| w.key.clone()).collect();
    c.bench_function("baseline/btreemap-insert-50k-keys", |b| {
        b.iter_batched(
            || keys.clone(),
            |keys| {
                let mut m = BTreeMap::new();
                for (i, k) in keys.into_iter().enumerate() {
                    m.insert(k, i);
                }
                black_box(m)
            },
            BatchSize::PerIteration,
        )
    });

    // One untimed run to report what criterion cannot see (engine time inside
    // the drain), and to make sure the drain completes before timing it.
    let probe = SimConfig {
        max_batches_per_instant: 200,
        ..SimConfig::default()
    };
    let drains = match Simulation::new(&plan, probe).run() {
        Ok(r) => {
            let t = r.timing.as_ref();
            eprintln!(
                "drain: {} admissions, {} preemptions, {} cycles, makespan {} ms (capacity bound {:?} ms); engine {:.0} ms, {:.0} decisions/s",
                r.totals.admissions,
                r.totals.preemptions,
                r.totals.cycles,
                r.totals.makespan_ms,
                r.totals.capacity_bound_ms,
                t.map_or(0.0, |t| t.engine_ms),
                t.map_or(0.0, |t| t.decisions_per_second),
            );
            if r.totals.truncated || !r.anomalies.is_empty() {
                eprintln!(
                    "drain: NOT timed, the run did not complete: {:?}",
                    r.anomalies
                );
            }
            !r.totals.truncated && r.anomalies.is_empty()
        }
        Err(e) => {
            eprintln!("drain: NOT timed, simulation failed: {e}");
            false
        }
    };
    if drains {
        c.bench_function("drain/large-scale-50k", |b| {
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

/// GPU nodes in the churn benchmarks' TAS flavor.
const CHURN_NODES: usize = 1_000;

/// A GPU node of the churn benchmarks' TAS pool, as its kubelet reports it at `beat`.
fn gpu_node(i: usize, gpus: u32, beat: u32) -> Event {
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("gpu-{i}"), "labels": {
            "pool": "tas", "rack": format!("r{}", i / 16), "kubernetes.io/hostname": format!("gpu-{i}")}},
        "status": {
            "allocatable": {"nvidia.com/gpu": gpus.to_string(), "cpu": "96", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": format!("2026-01-01T00:{:02}:{:02}Z", beat / 60 % 60, beat % 60)}]}
    }))
    .expect("benchmark node is valid");
    Event::NodeUpserted(Box::new(node))
}

/// `pending` after its first cycle, with a TAS flavor over [`CHURN_NODES`] 8-GPU nodes
/// and a ClusterQueue on it whose ten 16-GPU single-pod workloads are parked.
fn churn_engine(pending: &Engine, now: Millis) -> Engine {
    let mut e = pending.clone();
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: gpu-topo}
spec: {levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu-tas}
spec: {nodeLabels: {pool: tas}, topologyName: gpu-topo}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu-tas, resources: [{name: nvidia.com/gpu, nominalQuota: "10000"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: gpu-lq, namespace: gpu}
spec: {clusterQueue: gpu-cq}
"#;
    let docs: Vec<serde_json::Value> = yaml
        .split("\n---\n")
        .map(|d| serde_norway::from_str(d).expect("benchmark object is valid"))
        .collect();
    let events = [
        Event::TopologyUpserted(serde_json::from_value(docs[0].clone()).expect("topology")),
        Event::ResourceFlavorUpserted(serde_json::from_value(docs[1].clone()).expect("flavor")),
        Event::ClusterQueueUpserted(serde_json::from_value(docs[2].clone()).expect("cq")),
        Event::LocalQueueUpserted(serde_json::from_value(docs[3].clone()).expect("lq")),
    ];
    let nodes = (0..CHURN_NODES).map(|i| gpu_node(i, 8, 0));
    let jobs = (0..10).map(|i| {
        Event::WorkloadUpserted(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("big-{i}"), "namespace": "gpu"},
                "spec": {"queueName": "gpu-lq", "podSets": [{"name": "main", "count": 1,
                    "topologyRequest": {"required": "kubernetes.io/hostname"},
                    "template": {"spec": {"containers": [{"name": "c",
                        "resources": {"requests": {"nvidia.com/gpu": "16"}}}]}}}]}
            }))
            .expect("benchmark workload is valid"),
        )
    });
    for ev in events.into_iter().chain(nodes).chain(jobs) {
        if let Err(err) = e.apply(now, ev) {
            panic!("churn setup: {err}");
        }
    }
    e.schedule(now);
    e
}

fn churn_benches(c: &mut Criterion, pending: &Engine, now: Millis) {
    let parked = churn_engine(pending, now);
    let at = now + 1;
    let beats: Vec<Event> = (0..CHURN_NODES).map(|i| gpu_node(i, 8, 1)).collect();
    let mut probe = parked.clone();
    let built = probe.inventory().trees_built();
    for ev in beats.clone() {
        probe.apply(at, ev).expect("heartbeat applies");
    }
    let d = probe.schedule(at);
    eprintln!(
        "churn: {} pending; {} heartbeats then a cycle: {} decisions, {} trees rebuilt",
        probe.pending_count(),
        beats.len(),
        d.len(),
        probe.inventory().trees_built() - built
    );
    let mut g = c.benchmark_group("churn");
    // Each variant applies its Node events, then runs the next cycle.
    let variants = [
        ("1000-unchanged-node-updates-50k-pending", beats),
        ("cycle-only-50k-pending", vec![]),
        (
            "one-node-shrinks-in-range-50k-pending",
            vec![gpu_node(7, 4, 1)],
        ),
        ("one-real-node-change-50k-pending", vec![gpu_node(7, 16, 1)]),
    ];
    for (name, events) in variants {
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || (parked.clone(), events.clone()),
                |(e, events)| {
                    for ev in events.drain(..) {
                        // Valid fixed objects: an error here is a bug, not a measurement.
                        e.apply(at, ev).expect("node event applies");
                    }
                    black_box(e.schedule(at))
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group! {
    name = engine;
    // Each iteration is long (a full cycle or a full drain): few samples suffice.
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(engine);
