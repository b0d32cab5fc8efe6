//! Placement benchmarks.
//!
//! 1. Latency: placing a 64-pod × 8-GPU gang with a required rack or block on
//!    10,240 and 51,200 nodes (zone > block > rack > host), and releasing it.
//!    Baseline in the same run: a naive allocator that rescans every node per
//!    decision (what a tree without aggregates must do).
//! 2. Quality: one stream of gang jobs replayed through kuota's strategy,
//!    Kueue's BestFit and first-fit; GPU allocation, large-gang wait, stranded GPUs.
//!
//! Run: `cargo bench --bench placement` (add `-- --quick` for a shorter run).

use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use kuota::api;
use kuota::names::Names;
use kuota::placement::{
    Inventory, NodePoolSpec, PodSetPlacementRequest, PoolLevel, Strategy, TopologyMode,
};

const GPU: &str = "nvidia.com/gpu";

/// Deterministic pseudo-random numbers (splitmix64), so every run replays the same stream.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn topology(levels: &[&str]) -> api::Topology {
    let levels: Vec<_> = levels
        .iter()
        .map(|l| serde_json::json!({ "nodeLabel": l }))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": { "name": "gpu" },
        "spec": { "levels": levels }
    }))
    .expect("valid topology")
}

fn flavor() -> api::ResourceFlavor {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": { "name": "h100" },
        "spec": { "topologyName": "gpu" }
    }))
    .expect("valid flavor")
}

/// A cluster of `zones × blocks × racks × hosts` 8-GPU nodes.
fn cluster(zones: usize, blocks: usize, racks: usize, hosts: usize) -> (Inventory, Names) {
    let mut inv = Inventory::default();
    let mut names = Names::default();
    inv.upsert_topology(&topology(&[
        "zone",
        "block",
        "rack",
        "kubernetes.io/hostname",
    ]))
    .expect("topology");
    inv.set_flavor(&flavor());
    let pool = NodePoolSpec {
        name: "n".into(),
        nodes: zones * blocks * racks * hosts,
        levels: vec![
            PoolLevel {
                label: "zone".into(),
                count: zones,
            },
            PoolLevel {
                label: "block".into(),
                count: blocks,
            },
            PoolLevel {
                label: "rack".into(),
                count: racks,
            },
        ],
        allocatable: BTreeMap::from([
            (GPU.into(), "8".into()),
            ("cpu".into(), "96".into()),
            ("pods".into(), "110".into()),
        ]),
        labels: BTreeMap::new(),
        clique: None,
    };
    for n in pool.nodes() {
        inv.upsert_node(&mut names, &n).expect("node");
    }
    inv.ensure_trees();
    (inv, names)
}

/// Leaves every third rack free and fragments the rest, so the search has work to do.
fn fragment(inv: &mut Inventory, names: &mut Names, hosts: usize, nodes: usize) -> Vec<i64> {
    let gpu = names.resource(GPU);
    let mut rng = Rng(7);
    let mut used = vec![0i64; nodes];
    for (i, u) in used.iter_mut().enumerate() {
        if (i / hosts).is_multiple_of(3) {
            continue;
        }
        *u = rng.below(9) as i64;
        if *u > 0 {
            inv.assign(1_000_000 + i as u32, &[(gpu, *u * 1000)], &[(i as u32, 1)]);
        }
    }
    used
}

fn gang(names: &mut Names, pods: i32, gpus: i64, mode: TopologyMode) -> PodSetPlacementRequest {
    PodSetPlacementRequest {
        count: pods,
        per_pod: vec![(names.resource(GPU), gpus * 1000)],
        mode,
        slice: None,
        tolerations: vec![],
        node_filter: Default::default(),
    }
}

/// The naive allocator: per decision, rescan every node to total free GPUs per domain,
/// then best-fit the domain and fill its nodes. Same answer shape, no aggregates.
fn naive_required(
    free: &[i64],
    hosts_per_domain: usize,
    pods: i64,
    per_pod: i64,
) -> Option<Vec<(usize, i64)>> {
    let domains = free.len() / hosts_per_domain;
    let mut best: Option<(i64, usize)> = None;
    for d in 0..domains {
        let fit: i64 = free[d * hosts_per_domain..(d + 1) * hosts_per_domain]
            .iter()
            .map(|f| f / per_pod)
            .sum();
        if fit >= pods && best.is_none_or(|(b, _)| fit < b) {
            best = Some((fit, d));
        }
    }
    let (_, d) = best?;
    let mut left = pods;
    let mut out = vec![];
    for (n, f) in free
        .iter()
        .enumerate()
        .skip(d * hosts_per_domain)
        .take(hosts_per_domain)
    {
        let k = (f / per_pod).min(left);
        if k > 0 {
            out.push((n, k));
            left -= k;
        }
        if left == 0 {
            break;
        }
    }
    Some(out)
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// p50/p99 of place (find + assign) and release, against the naive rescan.
fn latency_table(
    label: &str,
    zones: usize,
    blocks: usize,
    racks: usize,
    hosts: usize,
    iters: usize,
) {
    let nodes = zones * blocks * racks * hosts;
    let (mut inv, mut names) = cluster(zones, blocks, racks, hosts);
    let used = fragment(&mut inv, &mut names, hosts, nodes);
    let free: Vec<i64> = used.iter().map(|u| 8 - u).collect();
    for (level, per_domain) in [("rack", hosts), ("block", hosts * racks)] {
        let req = gang(&mut names, 64, 8, TopologyMode::Required(level.into()));
        let (mut place, mut release, mut naive, mut exact) = (vec![], vec![], vec![], vec![]);
        for _ in 0..iters {
            let t = Instant::now();
            let nodes_found = inv
                .find(&names, "h100", &req, Strategy::Kuota)
                .expect("a free domain exists");
            inv.assign(1, &req.per_pod, &nodes_found);
            place.push(t.elapsed());
            let t = Instant::now();
            inv.release(1);
            release.push(t.elapsed());
            let t = Instant::now();
            black_box(naive_required(black_box(&free), per_domain, 64, 8));
            naive.push(t.elapsed());
            let t = Instant::now();
            black_box(
                inv.find_exact(&names, "h100", &req, Strategy::Kuota)
                    .is_ok(),
            );
            exact.push(t.elapsed());
        }
        let (p50, p99) = (percentile(&mut place, 0.5), percentile(&mut place, 0.99));
        let (r50, r99) = (
            percentile(&mut release, 0.5),
            percentile(&mut release, 0.99),
        );
        let (n50, n99) = (percentile(&mut naive, 0.5), percentile(&mut naive, 0.99));
        let (e50, e99) = (percentile(&mut exact, 0.5), percentile(&mut exact, 0.99));
        println!(
            "{label:>6} nodes, required {level:<5}: place (find+assign) p50 {:>6.1} µs p99 {:>6.1} µs | release p50 {:>5.2} µs p99 {:>5.2} µs",
            us(p50),
            us(p99),
            us(r50),
            us(r99)
        );
        println!(
            "{:>27} baselines: same allocator without aggregates (find only) p50 {:>8.1} µs p99 {:>8.1} µs = {:.1}x place p50; flat-array GPU-only rescan p50 {:>6.1} µs p99 {:>6.1} µs = {:.2}x",
            "",
            us(e50),
            us(e99),
            us(e50) / us(p50),
            us(n50),
            us(n99),
            us(n50) / us(p50)
        );
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn criterion_benches(c: &mut Criterion) {
    let (zones, blocks, racks, hosts) = (4, 5, 8, 64);
    let nodes = zones * blocks * racks * hosts;
    let (mut inv, mut names) = cluster(zones, blocks, racks, hosts);
    let used = fragment(&mut inv, &mut names, hosts, nodes);
    let free: Vec<i64> = used.iter().map(|u| 8 - u).collect();
    let req = gang(&mut names, 64, 8, TopologyMode::Required("rack".into()));
    let mut g = c.benchmark_group("placement_10k");
    g.bench_function("find_required_rack_64x8", |b| {
        b.iter(|| {
            black_box(
                inv.find(&names, "h100", black_box(&req), Strategy::Kuota)
                    .is_ok(),
            )
        })
    });
    g.bench_function("naive_rescan_required_rack_64x8", |b| {
        b.iter(|| black_box(naive_required(black_box(&free), hosts, 64, 8)))
    });
    let found = inv
        .find(&names, "h100", &req, Strategy::Kuota)
        .expect("fits");
    g.bench_function("assign_and_release_64x8", |b| {
        b.iter(|| {
            inv.assign(1, &req.per_pod, black_box(&found));
            inv.release(1);
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------
// Quality: the same gang stream through three strategies.

#[derive(Clone, Copy)]
struct Job {
    arrival: u64,
    gpus: i64,
    runtime: u64,
}

/// Gang sizes in GPUs and their share of jobs: mostly small, a few very large.
const SIZES: [(i64, u32); 8] = [
    (1, 30),
    (2, 20),
    (4, 15),
    (8, 12),
    (16, 8),
    (32, 6),
    (64, 5),
    (128, 4),
];

/// The stream: arrivals every 0–9 s (mean 4.5 s: about 110% of the cluster, so a queue forms), runtimes 5–60 min, larger jobs run longer.
fn stream(n: usize, seed: u64) -> Vec<Job> {
    let mut rng = Rng(seed);
    let total: u32 = SIZES.iter().map(|s| s.1).sum();
    let mut t = 0;
    (0..n)
        .map(|_| {
            t += rng.below(9_000);
            let mut pick = rng.below(u64::from(total)) as u32;
            let gpus = SIZES
                .iter()
                .find(|(_, w)| {
                    if pick < *w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .map(|s| s.0)
                .unwrap_or(1);
            let runtime =
                300_000 + (rng.unit() * 3_300_000.0) as u64 * (1 + gpus.ilog2() as u64) / 4;
            Job {
                arrival: t,
                gpus,
                runtime,
            }
        })
        .collect()
}

#[derive(Default)]
struct Quality {
    allocation: f64,
    large_wait_s: f64,
    stranded: f64,
    makespan_s: f64,
}

/// Replays `jobs` on a 1,024-node (8,192-GPU) cluster: 4 blocks × 16 racks × 16 hosts.
/// Gangs up to 8 GPUs are one unconstrained pod; larger ones are 8-GPU pods that
/// must share a rack. The queue is FIFO with backfill, the same for every strategy.
fn replay(jobs: &[Job], strategy: Strategy) -> Quality {
    let (mut inv, mut names) = {
        let mut inv = Inventory::default();
        let mut names = Names::default();
        inv.upsert_topology(&topology(&["block", "rack", "kubernetes.io/hostname"]))
            .expect("topology");
        inv.set_flavor(&flavor());
        let pool = NodePoolSpec {
            name: "q".into(),
            nodes: 1024,
            levels: vec![
                PoolLevel {
                    label: "block".into(),
                    count: 4,
                },
                PoolLevel {
                    label: "rack".into(),
                    count: 16,
                },
            ],
            allocatable: BTreeMap::from([(GPU.into(), "8".into())]),
            labels: BTreeMap::new(),
            clique: None,
        };
        for n in pool.nodes() {
            inv.upsert_node(&mut names, &n).expect("node");
        }
        inv.ensure_trees();
        (inv, names)
    };
    let total_gpus = 8192.0;
    let mut pending: VecDeque<usize> = VecDeque::new();
    let mut ends: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = BinaryHeap::new();
    let (mut next, mut now, mut used) = (0usize, 0u64, 0i64);
    let (mut alloc_area, mut stranded_area) = (0f64, 0f64);
    let (mut large_wait, mut large_n) = (0f64, 0f64);
    let mut done = 0;
    let last_arrival = jobs.last().map(|j| j.arrival).unwrap_or(0);
    while done < jobs.len() {
        let t_arr = jobs.get(next).map(|j| j.arrival).unwrap_or(u64::MAX);
        let t_end = ends.peek().map(|e| e.0.0).unwrap_or(u64::MAX);
        let t = t_arr.min(t_end);
        let dt = (t - now) as f64;
        // Allocation is measured while jobs still arrive: the steady state, not the drain.
        if now < last_arrival {
            alloc_area += dt.min((last_arrival - now) as f64) * used as f64;
        }
        if !pending.is_empty() {
            stranded_area += dt * (total_gpus - used as f64);
        }
        now = t;
        while ends.peek().is_some_and(|e| e.0.0 == now) {
            let std::cmp::Reverse((_, j)) = ends.pop().expect("peeked");
            inv.release(j as u32);
            used -= jobs[j].gpus;
            done += 1;
        }
        while jobs.get(next).is_some_and(|j| j.arrival == now) {
            pending.push_back(next);
            next += 1;
        }
        let mut still = VecDeque::new();
        while let Some(j) = pending.pop_front() {
            let g = jobs[j].gpus;
            let (pods, per, mode) = if g <= 8 {
                (1, g, TopologyMode::Unconstrained)
            } else {
                ((g / 8) as i32, 8, TopologyMode::Required("rack".into()))
            };
            let req = gang(&mut names, pods, per, mode);
            match inv.find(&names, "h100", &req, strategy) {
                Ok(nodes) => {
                    inv.assign(j as u32, &req.per_pod, &nodes);
                    used += g;
                    ends.push(std::cmp::Reverse((now + jobs[j].runtime, j)));
                    if g >= 64 {
                        large_wait += (now - jobs[j].arrival) as f64 / 1000.0;
                        large_n += 1.0;
                    }
                }
                Err(_) => still.push_back(j),
            }
        }
        pending = still;
    }
    Quality {
        allocation: 100.0 * alloc_area / (last_arrival.max(1) as f64 * total_gpus),
        large_wait_s: large_wait / large_n.max(1.0),
        stranded: stranded_area / now as f64,
        makespan_s: now as f64 / 1000.0,
    }
}

fn quality_table(jobs: usize, seeds: u64) {
    println!(
        "\nPlacement quality: {jobs} gang jobs (1–128 GPUs) × {seeds} seeds, 1,024 nodes × 8 GPUs, FIFO with backfill (means over seeds)"
    );
    println!(
        "{:<14} {:>12} {:>22} {:>22} {:>12}",
        "strategy", "GPU alloc %", "mean wait ≥64 GPU (s)", "stranded GPUs (mean)", "makespan (s)"
    );
    for (name, s) in [
        ("kuota", Strategy::Kuota),
        ("kueue-bestfit", Strategy::KueueBestFit),
        ("first-fit", Strategy::FirstFit),
    ] {
        let mut sum = Quality::default();
        for seed in 0..seeds {
            let q = replay(&stream(jobs, 42 + seed), s);
            sum.allocation += q.allocation;
            sum.large_wait_s += q.large_wait_s;
            sum.stranded += q.stranded;
            sum.makespan_s += q.makespan_s;
        }
        let n = seeds as f64;
        println!(
            "{name:<14} {:>12.1} {:>22.0} {:>22.0} {:>12.0}",
            sum.allocation / n,
            sum.large_wait_s / n,
            sum.stranded / n,
            sum.makespan_s / n
        );
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 300 } else { 3000 };
    if std::env::args().any(|a| a == "--quality-only") {
        quality_table(if quick { 1500 } else { 3000 }, if quick { 3 } else { 5 });
        return;
    }
    println!(
        "Placement latency (p50/p99 over {iters} placements; the naive rescan is the in-run baseline)"
    );
    latency_table("10,240", 4, 5, 8, 64, iters);
    latency_table("51,200", 4, 25, 8, 64, iters / 3);
    quality_table(if quick { 1500 } else { 3000 }, if quick { 3 } else { 5 });
    let mut c = Criterion::default().configure_from_args();
    if quick {
        c = c
            .sample_size(10)
            .measurement_time(Duration::from_secs(1))
            .warm_up_time(Duration::from_millis(300));
    }
    criterion_benches(&mut c);
    c.final_summary();
}
