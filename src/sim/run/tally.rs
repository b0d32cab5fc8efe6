//! The end of a run: its accumulators become the Report (time to admission per class
//! and ClusterQueue, utilization and borrowing per resource and flavor, what never got
//! in and why, GPU fragmentation, timing).

use std::collections::{BTreeMap, BTreeSet};

use super::{CqAcc, MAX_SERIES, Phase, Simulation, UsageTrack};
use crate::engine::{Millis, PendingReason};
use crate::sim::report::{
    ClassStats, ClusterQueueStats, Distribution, FlavorStats, GpuStats, PendingGroup, Report,
    ResourceStats, TimeSeries, Timing,
};

/// Waits to admission and what is still pending, gathered in one pass over the runs.
struct Waits<'p> {
    all: Vec<Millis>,
    per_cq: Vec<Vec<Millis>>,
    classes: BTreeMap<&'p str, (ClassStats, Vec<Millis>)>,
    pending: BTreeMap<(String, String), PendingGroup>,
}

impl<'p> Simulation<'p> {
    /// Closes the accumulators at the current time and builds the Report.
    pub(super) fn finish(mut self) -> Report {
        if let Some(o) = &mut self.observer {
            o.refresh(&self.engine);
        }
        let end = self.now;
        for i in 0..self.runs.len() {
            self.release_never_ready(end, i);
        }
        if self.totals.finished == 0 {
            self.totals.makespan_ms = end;
        }
        let makespan = self.totals.makespan_ms;
        for acc in &mut self.cqs {
            for track in acc.usage.values_mut() {
                track.advance(end);
            }
        }
        let waits = self.waits();
        self.totals.time_to_admission = Distribution::from_values(waits.all);
        if let Some(c) = &self.cfg.calibration {
            self.totals.calibration = Some(c.source.clone());
            let latencies = (self.plan.workloads.iter().zip(&self.runs))
                .filter_map(|(w, r)| Some(r.first_unsuspended? - w.arrival))
                .collect();
            self.totals.create_to_unsuspend =
                Some(crate::sim::report::Latency::from_values(latencies));
        }
        self.totals.provisioning = self.provisioning_stats(makespan);
        let work = self.work();
        self.bound_and_utilization(&work, makespan);
        for (r, lost) in &self.lost_work {
            if let Some(total) = work.get(r.as_str()).filter(|w| **w > 0) {
                self.totals
                    .redone_work_share
                    .insert(r.clone(), *lost as f64 / *total as f64);
            }
        }
        let cluster_queues = self
            .cqs
            .iter()
            .zip(waits.per_cq)
            .map(|(acc, waits)| cluster_queue_stats(acc, waits, makespan))
            .collect();
        let flavors = self.flavor_stats(makespan);
        let gpus = self.gpu_stats(end, makespan);
        let timeseries = self.series.take().map(|s| TimeSeries {
            resource: s.resource,
            grouping: if self.cqs.len() > MAX_SERIES {
                "cohort".to_string()
            } else {
                "clusterQueue".to_string()
            },
            names: s.names,
            nominal_milli: s.capacity,
            step_ms: s.step,
            points: s.points,
        });
        if self.anomaly_count > self.anomalies.len() as u64 {
            let more = self.anomaly_count - self.anomalies.len() as u64;
            self.anomalies.push(format!("... and {more} more"));
        }
        let timing = self.timing();
        Report {
            scenario: self.plan.name.clone(),
            seed: self.cfg.seed,
            eviction_delay_ms: self.cfg.eviction_delay_ms,
            totals: self.totals,
            cluster_queues,
            classes: waits
                .classes
                .into_values()
                .map(|(mut s, waits)| {
                    s.time_to_admission = Distribution::from_values(waits);
                    s
                })
                .collect(),
            never_admitted: waits.pending.into_values().collect(),
            flavors,
            gpus,
            timeseries,
            anomalies: self.anomalies,
            timing: Some(timing),
        }
    }

    /// Time to admission, Kueue's definition: creation to the admission that stuck (the
    /// last one), for workloads that were admitted; and the still-pending ones grouped
    /// by ClusterQueue and reason.
    fn waits(&self) -> Waits<'p> {
        let plan: &'p crate::sim::scenario::Plan = self.plan;
        let mut w = Waits {
            all: Vec::new(),
            per_cq: vec![Vec::new(); self.cqs.len()],
            classes: BTreeMap::new(),
            pending: BTreeMap::new(),
        };
        for (wl, r) in plan.workloads.iter().zip(&self.runs) {
            let class = w.classes.entry(wl.class.as_str()).or_insert_with(|| {
                let stats = ClassStats {
                    class: wl.class.clone(),
                    ..Default::default()
                };
                (stats, Vec::new())
            });
            class.0.workloads += 1;
            class.0.admissions += u64::from(r.admissions);
            class.0.preempted += u64::from(r.preempted);
            if r.phase == Phase::Finished {
                class.0.finished += 1;
            }
            if let Some(a) = r.last_admitted {
                let wait = a - wl.arrival;
                w.all.push(wait);
                class.1.push(wait);
                if let Some(&c) = self.cq_index.get(&wl.cluster_queue) {
                    w.per_cq[c].push(wait);
                }
            }
            if r.phase == Phase::Pending {
                let (reason, message) = r.pending.clone().unwrap_or((
                    PendingReason::WaitingForQuota,
                    "no scheduling cycle reported a reason".into(),
                ));
                let g = w
                    .pending
                    .entry((wl.cluster_queue.clone(), reason.as_str().to_string()))
                    .or_insert_with(|| PendingGroup {
                        cluster_queue: wl.cluster_queue.clone(),
                        reason: reason.as_str().to_string(),
                        message: message.to_string(),
                        count: 0,
                        example: wl.key.to_string(),
                    });
                g.count += 1;
            }
        }
        w
    }

    /// The plan's work per resource: amount × runtime summed over its workloads.
    fn work(&self) -> BTreeMap<&'p str, i128> {
        let plan: &'p crate::sim::scenario::Plan = self.plan;
        let mut work: BTreeMap<&str, i128> = BTreeMap::new();
        for w in &plan.workloads {
            for (r, m) in &w.total_requests {
                *work.entry(r.as_str()).or_default() += i128::from(*m) * i128::from(w.runtime);
            }
        }
        work
    }

    /// The capacity bound (the longest any resource's work takes on the whole cluster)
    /// and each resource's cluster-wide utilization over the makespan.
    fn bound_and_utilization(&mut self, work: &BTreeMap<&str, i128>, makespan: Millis) {
        let mut bound: Option<(Millis, String)> = None;
        for (r, w) in work {
            let cap = self.plan.capacity.get(*r).copied().unwrap_or(0);
            if cap <= 0 || *w <= 0 {
                continue;
            }
            let b = Millis::try_from(w / i128::from(cap)).unwrap_or(Millis::MAX);
            if bound.as_ref().is_none_or(|(best, _)| b > *best) {
                bound = Some((b, r.to_string()));
            }
        }
        self.totals.capacity_bound_ms = bound.as_ref().map(|b| b.0);
        self.totals.binding_resource = bound.map(|b| b.1);
        let mut used_area: BTreeMap<&str, i128> = BTreeMap::new();
        for acc in &self.cqs {
            for (r, t) in &acc.usage {
                *used_area.entry(r.as_str()).or_default() += t.used_area;
            }
        }
        for (r, cap) in &self.plan.capacity {
            if *cap > 0 && makespan > 0 {
                let area = used_area.get(r.as_str()).copied().unwrap_or(0);
                self.totals
                    .utilization
                    .insert(r.clone(), area as f64 / (*cap as f64 * makespan as f64));
            }
        }
    }

    /// Per flavor and resource over all ClusterQueues: nominal quota, utilization and
    /// the borrowed share of what was used.
    fn flavor_stats(&self, makespan: Millis) -> Vec<FlavorStats> {
        let mut per_flavor: BTreeMap<(String, String), (i64, i128, i128)> = BTreeMap::new();
        for acc in &self.cqs {
            for (k, n) in &acc.nominal_by_flavor {
                per_flavor.entry(k.clone()).or_default().0 += n;
            }
            for (k, t) in &acc.flavor_usage {
                let e = per_flavor.entry(k.clone()).or_default();
                e.1 += t.used_area;
                e.2 += t.borrowed_area;
            }
        }
        per_flavor
            .into_iter()
            .map(
                |((flavor, resource), (nominal, used, borrowed))| FlavorStats {
                    flavor,
                    resource,
                    nominal_milli: nominal,
                    utilization: utilization(used, nominal, makespan),
                    borrowed_share: (used > 0).then(|| borrowed as f64 / used as f64),
                },
            )
            .collect()
    }

    fn gpu_stats(&mut self, end: Millis, makespan: Millis) -> Option<GpuStats> {
        self.gpu.as_mut().map(|g| {
            g.sample(end);
            let span = makespan.max(1) as f64;
            GpuStats {
                nodes: g.free.len() as u64,
                total: g.total as f64,
                mean_free: g.free_area as f64 / span,
                mean_stranded: g.stranded_area as f64 / span,
                peak_stranded: g.peak as f64,
                stranded_gpu_hours: g.stranded_area as f64 / 3_600_000.0,
            }
        })
    }

    /// How long the engine itself took, and its rates.
    fn timing(&self) -> Timing {
        let secs = self.engine_time.as_secs_f64();
        let per_sec = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        Timing {
            engine_ms: secs * 1000.0,
            decisions_per_second: per_sec(self.totals.decisions),
            admissions_per_second: per_sec(self.totals.admissions),
        }
    }
}

/// One ClusterQueue's counts, waits and per-resource and per-flavor statistics.
fn cluster_queue_stats(acc: &CqAcc, waits: Vec<Millis>, makespan: Millis) -> ClusterQueueStats {
    let names: BTreeSet<&String> = acc.nominal.keys().chain(acc.usage.keys()).collect();
    let resources = names
        .into_iter()
        .map(|r| {
            let nominal = acc.nominal.get(r).copied().unwrap_or(0);
            (
                r.clone(),
                resource_stats(nominal, acc.usage.get(r), makespan),
            )
        })
        .collect();
    let keys: BTreeSet<&(String, String)> = acc
        .nominal_by_flavor
        .keys()
        .chain(acc.flavor_usage.keys())
        .collect();
    let flavors = keys
        .into_iter()
        .map(|key| {
            let nominal = acc.nominal_by_flavor.get(key).copied().unwrap_or(0);
            let stats = resource_stats(nominal, acc.flavor_usage.get(key), makespan);
            (format!("{}/{}", key.0, key.1), stats)
        })
        .collect();
    ClusterQueueStats {
        name: acc.name.clone(),
        cohort: acc.cohort.clone(),
        workloads: acc.workloads,
        admissions: acc.admissions,
        finished: acc.finished,
        preempted: acc.preempted,
        preemptions_issued: acc.preemptions_issued,
        evicted: acc.evicted,
        time_to_admission: Distribution::from_values(waits),
        resources,
        flavors,
    }
}

/// Utilization against a nominal quota, borrowed share and peak of one usage track.
fn resource_stats(nominal: i64, track: Option<&UsageTrack>, makespan: Millis) -> ResourceStats {
    let used_area = track.map_or(0, |t| t.used_area);
    let borrowed_area = track.map_or(0, |t| t.borrowed_area);
    ResourceStats {
        nominal_milli: nominal,
        utilization: utilization(used_area, nominal, makespan),
        borrowed_share: (used_area > 0).then(|| borrowed_area as f64 / used_area as f64),
        peak_milli: track.map_or(0, |t| t.peak),
    }
}

/// Used area over what the nominal quota offered during the makespan; `None` when
/// either is zero.
fn utilization(used_area: i128, nominal: i64, makespan: Millis) -> Option<f64> {
    (nominal > 0 && makespan > 0).then(|| used_area as f64 / (nominal as f64 * makespan as f64))
}
