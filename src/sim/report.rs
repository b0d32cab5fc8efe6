//! What a simulation run measured: per ClusterQueue, per workload class and in
//! total. Everything here except [`Timing`] is a pure function of the scenario
//! and the seed, so two runs can be compared with [`Report::without_timing`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::api::quantity::resource_quantity_string;
use crate::engine::Millis;

/// Header line of the terminal report (CI looks for it).
pub const REPORT_HEADER: &str = "kuota simulation report";

/// Full result of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub eviction_delay_ms: Millis,
    pub totals: Totals,
    pub cluster_queues: Vec<ClusterQueueStats>,
    pub classes: Vec<ClassStats>,
    /// Workloads still pending at the end, grouped by ClusterQueue and the engine's reason.
    pub never_admitted: Vec<PendingGroup>,
    /// Per (flavor, resource), summed over ClusterQueues.
    pub flavors: Vec<FlavorStats>,
    /// Node GPUs, when the scenario has GPU nodes (topology-aware placement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<GpuStats>,
    /// Usage and queue depth over time (only when requested, e.g. for `--chart`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeseries: Option<TimeSeries>,
    /// Engine behaviour the simulator could not make sense of (see docs/simulator.md).
    pub anomalies: Vec<String>,
    /// Measured, not simulated: varies between runs and machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<Timing>,
}

/// Run-wide numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub workloads: u64,
    /// Admissions, counting re-admissions after preemption.
    pub admissions: u64,
    pub finished: u64,
    pub preemptions: u64,
    /// Evictions that were not preemptions (stop policy, deactivation).
    pub evictions: u64,
    /// Workloads the engine refused to take in (invalid objects).
    pub rejected: u64,
    /// Virtual time of the last completion (ms); the whole run if none finished.
    pub makespan_ms: Millis,
    /// Lower bound on the makespan: total work ÷ total nominal capacity, for the binding resource (ms).
    pub capacity_bound_ms: Option<Millis>,
    /// The resource that sets `capacityBoundMs`.
    pub binding_resource: Option<String>,
    /// Time-weighted used ÷ total nominal quota over the makespan, per resource.
    pub utilization: BTreeMap<String, f64>,
    pub time_to_admission: Distribution,
    /// Per resource: work of runs cut short by preemption or eviction (it is
    /// redone from the start) as a share of the scenario's total work.
    pub redone_work_share: BTreeMap<String, f64>,
    /// All decisions returned by the engine (admit, preempt, evict, pending).
    pub decisions: u64,
    pub cycles: u64,
    /// Events handed to `Engine::apply`, cluster objects included.
    pub events: u64,
    /// The run hit `SimConfig::max_batches` before the queue drained.
    pub truncated: bool,
    /// Workloads whose pods never become ready (`neverReadyFraction`).
    #[serde(skip_serializing_if = "is_zero")]
    pub never_ready: u64,
    /// GPU-hours those workloads held quota for, until waitForPodsReady took it back or
    /// the run ended.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub never_ready_gpu_hours: f64,
    /// Head-gang reservations (`--gang-reservation-horizon-ms`) whose start moved later
    /// because their nodes were lost or taken: an Event on the gang in a cluster.
    #[serde(skip_serializing_if = "is_zero")]
    pub gang_reservations_moved: u64,
    /// Head-gang reservations dropped: no start within the horizon was left.
    #[serde(skip_serializing_if = "is_zero")]
    pub gang_reservations_dropped: u64,
    /// The calibration file the run's actuation latencies came from (`--calibration`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// Job created → first unsuspended, as a cluster shows it: with a calibration, the
    /// wait for admission plus the latencies around it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_to_unsuspend: Option<Latency>,
    /// What the ProvisioningRequest checks the simulator plays cost (or, with them off,
    /// the always-up pool that replaces them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<ProvisioningStats>,
}

/// The cost of capacity that comes and goes (see `sim::provisioning`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningStats {
    /// `provisioned` (nodes per admission, from zero) or `static` (an always-up pool).
    pub mode: String,
    /// Admissions that waited for their nodes.
    pub waits: u64,
    /// Their mean wait from quota reservation to start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_wait_ms: Option<Millis>,
    /// GPU-hours of nodes up and unused: before their gang could start (provisioned), or
    /// not used by any workload over the makespan (static).
    pub idle_gpu_hours: f64,
}

/// The median and the 99th percentile (nearest rank) of a latency, in ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub count: u64,
    pub p50_ms: Millis,
    pub p99_ms: Millis,
}

impl Latency {
    pub fn from_values(mut v: Vec<Millis>) -> Self {
        v.sort_unstable();
        let n = v.len();
        let rank = |p: usize| v.get((n * p).div_ceil(100).clamp(1, n.max(1)) - 1).copied();
        Self {
            count: n as u64,
            p50_ms: rank(50).unwrap_or(0),
            p99_ms: rank(99).unwrap_or(0),
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

/// Mean and percentiles (nearest rank) of a set of durations, in ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Distribution {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: Millis,
    pub p90_ms: Millis,
    pub max_ms: Millis,
}

impl Distribution {
    pub fn from_values(mut v: Vec<Millis>) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_unstable();
        let n = v.len();
        let sum: i128 = v.iter().map(|&x| i128::from(x)).sum();
        // Nearest-rank percentile: the smallest value with at least p% of values <= it.
        let rank = |p: usize| v[(n * p).div_ceil(100).clamp(1, n) - 1];
        Self {
            count: n as u64,
            mean_ms: sum as f64 / n as f64,
            p50_ms: rank(50),
            p90_ms: rank(90),
            max_ms: v[n - 1],
        }
    }
}

/// One ClusterQueue.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStats {
    pub name: String,
    pub cohort: Option<String>,
    /// Workloads submitted to it.
    pub workloads: u64,
    pub admissions: u64,
    pub finished: u64,
    /// Its workloads that were preempted (as victims).
    pub preempted: u64,
    /// Preemptions issued on behalf of its workloads.
    pub preemptions_issued: u64,
    pub evicted: u64,
    pub time_to_admission: Distribution,
    /// Per resource, summed over flavors.
    pub resources: BTreeMap<String, ResourceStats>,
    /// Per `flavor/resource`.
    pub flavors: BTreeMap<String, ResourceStats>,
}

/// One resource of one flavor, over all ClusterQueues.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorStats {
    pub flavor: String,
    pub resource: String,
    /// Sum of the ClusterQueues' nominal quotas, in the engine's unit (milli for cpu).
    pub nominal_milli: i64,
    /// Time-weighted used ÷ nominal over the makespan.
    pub utilization: Option<f64>,
    /// Share of usage that was borrowed.
    pub borrowed_share: Option<f64>,
}

/// Node GPUs over the run (virtual time, time-weighted over the makespan).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuStats {
    pub nodes: u64,
    /// GPUs on those nodes (allocatable).
    pub total: f64,
    /// Mean free GPUs.
    pub mean_free: f64,
    /// Mean stranded GPUs: free GPUs on nodes where not one pod of any
    /// pending workload fits (fragmentation), while something was pending.
    pub mean_stranded: f64,
    pub peak_stranded: f64,
    /// GPU-hours stranded.
    pub stranded_gpu_hours: f64,
}

/// Usage of one resource and queue depth over time, per ClusterQueue (or per
/// cohort for many ClusterQueues).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeSeries {
    pub resource: String,
    /// What a series is: `clusterQueue` or `cohort`.
    pub grouping: String,
    pub names: Vec<String>,
    /// Nominal quota of `resource` per series, in the engine's unit (milli for cpu).
    pub nominal_milli: Vec<i64>,
    /// Minimum spacing of points (ms); grows on long runs.
    pub step_ms: Millis,
    pub points: Vec<SeriesPoint>,
}

/// Values of every series at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeriesPoint {
    pub t_ms: Millis,
    /// Usage per series, in the engine's unit (milli for cpu).
    pub used_milli: Vec<i64>,
    /// Pending workloads per series.
    pub pending: Vec<u64>,
}

/// Quota use of one resource in one ClusterQueue over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStats {
    /// Nominal quota, in the engine's unit (milli for cpu).
    pub nominal_milli: i64,
    /// Time-weighted used ÷ nominal over the makespan (above 1 when borrowing); `None` without nominal quota.
    pub utilization: Option<f64>,
    /// Share of its usage (time-weighted) that was borrowed from the cohort.
    pub borrowed_share: Option<f64>,
    /// Highest usage seen, in the engine's unit (milli for cpu).
    pub peak_milli: i64,
}

/// One workload class (template `className`), across all queues.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassStats {
    pub class: String,
    pub workloads: u64,
    pub admissions: u64,
    pub finished: u64,
    pub preempted: u64,
    pub time_to_admission: Distribution,
}

/// Workloads of one ClusterQueue that ended the run pending for the same reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingGroup {
    pub cluster_queue: String,
    pub reason: String,
    pub count: u64,
    /// The first such workload, `namespace/name`.
    pub example: String,
    /// The engine's message for `example`.
    pub message: String,
}

/// Wall-clock measurements; excluded from determinism comparisons.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    /// Time spent inside `Engine::apply` and `Engine::schedule` only (ms).
    pub engine_ms: f64,
    /// `totals.decisions` ÷ engine time.
    pub decisions_per_second: f64,
    /// Admissions ÷ engine time.
    pub admissions_per_second: f64,
}

impl Report {
    /// The report with measured fields removed: equal for equal inputs.
    pub fn without_timing(&self) -> Self {
        Self {
            timing: None,
            ..self.clone()
        }
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of numbers and strings cannot fail; the
        // fallback keeps that promise without a panic path.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Human-readable tables.
    pub fn render_table(&self) -> String {
        let mut out = String::new();
        self.write_totals(&mut out);
        self.write_quota_use(&mut out);
        self.write_admission_and_engine(&mut out);
        self.write_cluster_queues(&mut out);
        self.write_flavors(&mut out);
        self.write_classes(&mut out);
        self.write_never_admitted(&mut out);
        self.write_anomalies(&mut out);
        out
    }

    /// The header, the run-wide counts and the makespan against its capacity bound.
    fn write_totals(&self, out: &mut String) {
        let t = &self.totals;
        let _ = writeln!(
            out,
            "{REPORT_HEADER}: {} (seed {}, eviction delay {})",
            self.scenario,
            self.seed,
            duration(self.eviction_delay_ms)
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "workloads {}  admissions {}  finished {}  preemptions {}  evictions {}  never admitted {}{}",
            t.workloads,
            t.admissions,
            t.finished,
            t.preemptions,
            t.evictions,
            self.never_admitted.iter().map(|g| g.count).sum::<u64>(),
            if t.rejected > 0 {
                format!("  rejected {}", t.rejected)
            } else {
                String::new()
            }
        );
        if t.never_ready > 0 {
            let _ = writeln!(
                out,
                "never ready {}  GPU-hours they held {:.1}",
                t.never_ready, t.never_ready_gpu_hours
            );
        }
        if let Some(p) = &t.provisioning {
            let wait = p
                .mean_wait_ms
                .map(|w| format!("  mean wait for nodes {}", duration(w)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "provisioning: {}  admissions that waited {}{wait}  idle GPU-hours {:.1}",
                p.mode, p.waits, p.idle_gpu_hours
            );
        }
        match (&t.calibration, &t.create_to_unsuspend) {
            (Some(file), Some(l)) => {
                let _ = writeln!(
                    out,
                    "calibrated by {file}: create→unsuspend p50 {} p99 {}",
                    duration(l.p50_ms),
                    duration(l.p99_ms)
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "no calibration: a cluster's actuation latencies (job → Workload, admission → pods running, pods done → quota back) count as zero"
                );
            }
        }
        if t.gang_reservations_moved + t.gang_reservations_dropped > 0 {
            let _ = writeln!(
                out,
                "gang reservations moved later {}  dropped {}",
                t.gang_reservations_moved, t.gang_reservations_dropped
            );
        }
        let bound = match (t.capacity_bound_ms, &t.binding_resource) {
            (Some(b), Some(r)) if b > 0 => {
                format!(
                    "  capacity bound {} ({r}; makespan is {:.2}x the bound)",
                    duration(b),
                    t.makespan_ms as f64 / b as f64
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(out, "makespan {}{bound}", duration(t.makespan_ms));
    }

    /// Cluster-wide use of nominal quota, work lost to preemption and GPU fragmentation.
    fn write_quota_use(&self, out: &mut String) {
        let t = &self.totals;
        let util: Vec<String> = t
            .utilization
            .iter()
            .map(|(r, u)| format!("{r} {}", pct(Some(*u))))
            .collect();
        if !util.is_empty() {
            let _ = writeln!(
                out,
                "cluster utilization of nominal quota: {}",
                util.join(", ")
            );
        }
        let redone: Vec<String> = t
            .redone_work_share
            .iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(r, v)| format!("{r} {:.1}%", v * 100.0))
            .collect();
        if !redone.is_empty() {
            let _ = writeln!(
                out,
                "work redone after preemption (share of total work): {}",
                redone.join(", ")
            );
        }
        if let Some(g) = &self.gpus {
            let _ = writeln!(
                out,
                "GPUs: {} on {} nodes; mean free {:.1}, mean stranded by fragmentation {:.1} (peak {}, {:.1} GPU-hours)",
                g.total,
                g.nodes,
                g.mean_free,
                g.mean_stranded,
                g.peak_stranded,
                g.stranded_gpu_hours
            );
        }
    }

    /// Time to admission, the engine's work (with its speed when measured) and
    /// the warning for a run cut off at the batch limit.
    fn write_admission_and_engine(&self, out: &mut String) {
        let t = &self.totals;
        let d = &t.time_to_admission;
        let _ = writeln!(
            out,
            "time to admission: mean {}  p50 {}  p90 {}  max {}",
            duration(d.mean_ms.round() as Millis),
            duration(d.p50_ms),
            duration(d.p90_ms),
            duration(d.max_ms)
        );
        match &self.timing {
            Some(tm) => {
                let _ = writeln!(
                    out,
                    "engine: {} decisions in {} cycles, {} events; {:.1} ms engine time, {} decisions/s",
                    t.decisions,
                    t.cycles,
                    t.events,
                    tm.engine_ms,
                    si(tm.decisions_per_second)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "engine: {} decisions in {} cycles, {} events",
                    t.decisions, t.cycles, t.events
                );
            }
        }
        if t.truncated {
            let _ = writeln!(
                out,
                "WARNING: stopped at the batch limit before the run drained; numbers cover the run so far"
            );
        }
    }

    /// One row per ClusterQueue: counts, waits, and per-resource utilization and borrowing.
    fn write_cluster_queues(&self, out: &mut String) {
        let _ = writeln!(out);
        let mut cq = Table::new(&[
            "ClusterQueue",
            "cohort",
            "wl",
            "admit",
            "preempted",
            "wait mean",
            "p50",
            "p90",
            "utilization",
            "borrowed",
        ]);
        for c in &self.cluster_queues {
            let util: Vec<String> = c
                .resources
                .iter()
                .map(|(r, s)| format!("{}={}", short(r), pct(s.utilization)))
                .collect();
            let borrowed: Vec<String> = c
                .resources
                .iter()
                .map(|(r, s)| format!("{}={}", short(r), pct(s.borrowed_share)))
                .collect();
            cq.row(vec![
                c.name.clone(),
                c.cohort.clone().unwrap_or_else(|| "-".into()),
                c.workloads.to_string(),
                c.admissions.to_string(),
                c.preempted.to_string(),
                duration(c.time_to_admission.mean_ms.round() as Millis),
                duration(c.time_to_admission.p50_ms),
                duration(c.time_to_admission.p90_ms),
                util.join(" "),
                borrowed.join(" "),
            ]);
        }
        out.push_str(&cq.render());
    }

    /// One row per (Flavor, resource), summed over ClusterQueues; nothing without flavors.
    fn write_flavors(&self, out: &mut String) {
        if self.flavors.is_empty() {
            return;
        }
        let _ = writeln!(out);
        let mut fl = Table::new(&["flavor", "resource", "nominal", "utilization", "borrowed"]);
        for f in &self.flavors {
            fl.row(vec![
                f.flavor.clone(),
                f.resource.clone(),
                quantity(&f.resource, f.nominal_milli),
                pct(f.utilization),
                pct(f.borrowed_share),
            ]);
        }
        out.push_str(&fl.render());
    }

    /// One row per workload class: counts and time to admission.
    fn write_classes(&self, out: &mut String) {
        let _ = writeln!(out);
        let mut cls = Table::new(&[
            "class",
            "wl",
            "admit",
            "finished",
            "preempted",
            "wait mean",
            "p50",
            "p90",
            "max",
        ]);
        for c in &self.classes {
            let d = &c.time_to_admission;
            cls.row(vec![
                c.class.clone(),
                c.workloads.to_string(),
                c.admissions.to_string(),
                c.finished.to_string(),
                c.preempted.to_string(),
                duration(d.mean_ms.round() as Millis),
                duration(d.p50_ms),
                duration(d.p90_ms),
                duration(d.max_ms),
            ]);
        }
        out.push_str(&cls.render());
    }

    /// Workloads still pending at the end, per ClusterQueue and reason, with an example.
    fn write_never_admitted(&self, out: &mut String) {
        if self.never_admitted.is_empty() {
            return;
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "never admitted:");
        for g in &self.never_admitted {
            let cq = if g.cluster_queue.is_empty() {
                "(no ClusterQueue)"
            } else {
                g.cluster_queue.as_str()
            };
            let _ = writeln!(
                out,
                "  {cq}: {} x {}, e.g. {}: {}",
                g.count, g.reason, g.example, g.message
            );
        }
    }

    /// Engine behaviour the simulator could not make sense of, one per line.
    fn write_anomalies(&self, out: &mut String) {
        if self.anomalies.is_empty() {
            return;
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "engine anomalies ({}):", self.anomalies.len());
        for a in &self.anomalies {
            let _ = writeln!(out, "  {a}");
        }
    }
}

/// Abbreviates well-known resource names so the table stays narrow.
fn short(resource: &str) -> &str {
    match resource {
        "nvidia.com/gpu" => "gpu",
        "memory" => "mem",
        other => other,
    }
}

fn pct(v: Option<f64>) -> String {
    match v {
        Some(x) => format!("{:.0}%", x * 100.0),
        None => "-".into(),
    }
}

/// 1234 -> "1.2k".
fn si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Compact virtual duration: 850ms, 12.5s, 7m05s, 2h03m.
pub fn duration(ms: Millis) -> String {
    if ms < 0 {
        return format!("-{}", duration(ms.saturating_neg()));
    }
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        let s = ms / 1000;
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let m = ms / 60_000;
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

/// An amount of `resource` in the engine's unit (milli for cpu) as a quantity string.
pub fn quantity(resource: &str, amount: i64) -> String {
    resource_quantity_string(resource, amount)
}

/// Left-aligned text columns, right-aligned numbers; widths fit the content.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, r: Vec<String>) {
        self.rows.push(r);
    }

    fn render(&self) -> String {
        let cols = self.header.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        // A column is right-aligned when every cell in it is a number or a duration.
        let numeric =
            |s: &str| s.chars().next().is_some_and(|c| c.is_ascii_digit()) && !s.contains('=');
        let right: Vec<bool> = (0..cols)
            .map(|i| {
                i > 0
                    && !self.rows.is_empty()
                    && self
                        .rows
                        .iter()
                        .all(|r| r.get(i).is_some_and(|c| numeric(c) || c == "-"))
            })
            .collect();
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate().take(cols) {
                if i > 0 {
                    l.push_str("  ");
                }
                let pad = width[i].saturating_sub(c.chars().count());
                if right[i] {
                    l.push_str(&" ".repeat(pad));
                    l.push_str(c);
                } else {
                    l.push_str(c);
                    l.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(l.trim_end());
            out.push('\n');
        };
        line(&self.header, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }
}

/// Two runs side by side (`kuota simulate --compare`): the headline numbers,
/// per-class waits and the difference B − A.
pub fn render_comparison(a_label: &str, a: &Report, b_label: &str, b: &Report) -> String {
    let mut t = Table::new(&["", a_label, b_label, "B - A"]);
    let mut rows = makespan_rows(a, b);
    rows.extend(wait_rows(a, b));
    rows.extend(outcome_rows(a, b));
    rows.extend(engine_rows(a, b));
    for (n, x, y, d) in rows {
        t.row(vec![n, x, y, d]);
    }
    let mut out = format!(
        "{REPORT_HEADER}: comparison\nA = {a_label} ({})\nB = {b_label} ({})\n\n",
        a.scenario, b.scenario
    );
    out.push_str(&t.render());
    for (label, r) in [(a_label, a), (b_label, b)] {
        if !r.anomalies.is_empty() {
            let _ = writeln!(
                out,
                "\n{label}: {} engine anomalies, see its report",
                r.anomalies.len()
            );
        }
    }
    out
}

/// One line of [`render_comparison`]: name, value in A, value in B, and B − A.
type ComparisonRow = (String, String, String, String);

/// A comparison row of two durations; the difference is signed.
fn ms_row(name: &str, x: Millis, y: Millis) -> ComparisonRow {
    (
        name.to_string(),
        duration(x),
        duration(y),
        format!(
            "{}{}",
            if y >= x { "+" } else { "-" },
            duration((y - x).abs())
        ),
    )
}

/// A comparison row of two numbers shown with `fmt`; the difference is signed.
fn num_row(name: &str, x: f64, y: f64, fmt: &dyn Fn(f64) -> String) -> ComparisonRow {
    (
        name.to_string(),
        fmt(x),
        fmt(y),
        format!("{}{}", if y >= x { "+" } else { "-" }, fmt((y - x).abs())),
    )
}

/// Mean time to admission, rounded to whole ms as the tables show it.
fn rounded_mean(d: &Distribution) -> Millis {
    d.mean_ms.round() as Millis
}

/// Makespan, its capacity bound and cluster utilization per resource; a
/// resource missing from one run counts as 0 there.
fn makespan_rows(a: &Report, b: &Report) -> Vec<ComparisonRow> {
    let (ta, tb) = (&a.totals, &b.totals);
    let mut rows = vec![
        ms_row("makespan", ta.makespan_ms, tb.makespan_ms),
        ms_row(
            "capacity bound",
            ta.capacity_bound_ms.unwrap_or(0),
            tb.capacity_bound_ms.unwrap_or(0),
        ),
    ];
    let resources: std::collections::BTreeSet<&String> =
        ta.utilization.keys().chain(tb.utilization.keys()).collect();
    let pct_f = |v: f64| format!("{:.1}%", v * 100.0);
    for r in resources {
        rows.push(num_row(
            &format!("utilization {}", short(r)),
            ta.utilization.get(r).copied().unwrap_or(0.0),
            tb.utilization.get(r).copied().unwrap_or(0.0),
            &pct_f,
        ));
    }
    rows
}

/// Time to admission overall, then its mean per workload class (0 for a
/// class that one run does not have).
fn wait_rows(a: &Report, b: &Report) -> Vec<ComparisonRow> {
    let (da, db) = (&a.totals.time_to_admission, &b.totals.time_to_admission);
    let mut rows = vec![
        ms_row("wait mean", rounded_mean(da), rounded_mean(db)),
        ms_row("wait p50", da.p50_ms, db.p50_ms),
        ms_row("wait p90", da.p90_ms, db.p90_ms),
    ];
    let classes: std::collections::BTreeSet<&String> = a
        .classes
        .iter()
        .chain(&b.classes)
        .map(|c| &c.class)
        .collect();
    for c in classes {
        let find = |r: &Report| {
            r.classes
                .iter()
                .find(|x| &x.class == c)
                .map_or(0, |x| rounded_mean(&x.time_to_admission))
        };
        rows.push(ms_row(&format!("wait mean {c}"), find(a), find(b)));
    }
    rows
}

/// Preemptions, never-admitted workloads and, when either run has GPU nodes,
/// stranded GPUs.
fn outcome_rows(a: &Report, b: &Report) -> Vec<ComparisonRow> {
    let int = |v: f64| format!("{v:.0}");
    let never = |r: &Report| r.never_admitted.iter().map(|g| g.count).sum::<u64>() as f64;
    let mut rows = vec![
        num_row(
            "preemptions",
            a.totals.preemptions as f64,
            b.totals.preemptions as f64,
            &int,
        ),
        num_row("never admitted", never(a), never(b), &int),
    ];
    if a.totals.provisioning.is_some() || b.totals.provisioning.is_some() {
        let wait = |r: &Report| {
            let p = r.totals.provisioning.as_ref();
            p.and_then(|p| p.mean_wait_ms).unwrap_or(0) as f64 / 60_000.0
        };
        let idle = |r: &Report| {
            r.totals
                .provisioning
                .as_ref()
                .map_or(0.0, |p| p.idle_gpu_hours)
        };
        rows.push(num_row(
            "mean wait for nodes (min)",
            wait(a),
            wait(b),
            &|v| format!("{v:.1}"),
        ));
        rows.push(num_row("idle GPU-hours", idle(a), idle(b), &|v| {
            format!("{v:.1}")
        }));
    }
    if a.totals.never_ready + b.totals.never_ready > 0 {
        rows.push(num_row(
            "evictions",
            a.totals.evictions as f64,
            b.totals.evictions as f64,
            &int,
        ));
        rows.push(num_row(
            "GPU-hours held by never-ready gangs",
            a.totals.never_ready_gpu_hours,
            b.totals.never_ready_gpu_hours,
            &|v| format!("{v:.1}"),
        ));
    }
    if a.totals.gang_reservations_moved
        + a.totals.gang_reservations_dropped
        + b.totals.gang_reservations_moved
        + b.totals.gang_reservations_dropped
        > 0
    {
        let moved = |r: &Report| r.totals.gang_reservations_moved as f64;
        let dropped = |r: &Report| r.totals.gang_reservations_dropped as f64;
        rows.push(num_row(
            "gang reservations moved later",
            moved(a),
            moved(b),
            &int,
        ));
        rows.push(num_row(
            "gang reservations dropped",
            dropped(a),
            dropped(b),
            &int,
        ));
    }
    if a.gpus.is_some() || b.gpus.is_some() {
        let st = |r: &Report| r.gpus.as_ref().map_or(0.0, |g| g.mean_stranded);
        rows.push(num_row("GPUs stranded (mean)", st(a), st(b), &|v| {
            format!("{v:.1}")
        }));
    }
    rows
}

/// Engine time and speed, only when both runs were timed: a measurement
/// against a missing one would be a meaningless difference.
fn engine_rows(a: &Report, b: &Report) -> Vec<ComparisonRow> {
    let mut rows = Vec::new();
    if let (Some(x), Some(y)) = (&a.timing, &b.timing) {
        rows.push(num_row("engine ms", x.engine_ms, y.engine_ms, &|v| {
            format!("{v:.1}")
        }));
        rows.push(num_row(
            "decisions/s",
            x.decisions_per_second,
            y.decisions_per_second,
            &si,
        ));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let d = Distribution::from_values((1..=10).collect());
        assert_eq!((d.p50_ms, d.p90_ms, d.max_ms, d.count), (5, 9, 10, 10));
        assert!((d.mean_ms - 5.5).abs() < 1e-9);
        assert_eq!(Distribution::from_values(vec![]).count, 0);
        assert_eq!(Distribution::from_values(vec![7]).p90_ms, 7);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(12_500), "12.5s");
        assert_eq!(duration(425_000), "7m05s");
        assert_eq!(duration(7_380_000), "2h03m");
    }

    #[test]
    fn comparison_shows_both_runs_and_the_difference() {
        let run = |makespan: Millis, wait: Vec<Millis>| Report {
            scenario: "s".into(),
            seed: 1,
            eviction_delay_ms: 0,
            totals: Totals {
                makespan_ms: makespan,
                time_to_admission: Distribution::from_values(wait.clone()),
                ..Default::default()
            },
            cluster_queues: vec![],
            classes: vec![ClassStats {
                class: "small".into(),
                time_to_admission: Distribution::from_values(wait),
                ..Default::default()
            }],
            never_admitted: vec![],
            flavors: vec![],
            gpus: None,
            timeseries: None,
            anomalies: vec![],
            timing: None,
        };
        let out = render_comparison("A", &run(60_000, vec![1_000]), "B", &run(90_000, vec![500]));
        let line = |name: &str| {
            out.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name} in {out}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(line("makespan"), "makespan 1m00s 1m30s +30.0s");
        assert_eq!(line("wait mean small"), "wait mean small 1.0s 500ms -500ms");
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a".into(), "10".into()]);
        t.row(vec!["bbb".into(), "2".into()]);
        assert_eq!(t.render(), "name   n\n----  --\na     10\nbbb    2\n");
    }
}
