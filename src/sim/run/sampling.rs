//! What a run samples as it goes, for its report: each ClusterQueue's usage over time
//! (time-weighted, per resource and per flavor) and the chart's time series.

use std::collections::BTreeMap;

use super::{GPU_RESOURCE, Simulation};
use crate::engine::Millis;
use crate::sim::report::SeriesPoint;

/// Time-weighted accumulator of one ClusterQueue resource.
#[derive(Clone, Debug, Default)]
pub(super) struct UsageTrack {
    pub(super) used: i64,
    pub(super) borrowed: i64,
    pub(super) since: Millis,
    /// amount × ms; i128 because memory in bytes × hours overflows i64.
    pub(super) used_area: i128,
    pub(super) borrowed_area: i128,
    pub(super) peak: i64,
}

impl UsageTrack {
    /// A track that starts at `t`.
    fn starting_at(t: Millis) -> Self {
        Self {
            since: t,
            ..Default::default()
        }
    }

    /// From `t` on, `used` of which `borrowed` is borrowed.
    fn set(&mut self, t: Millis, used: i64, borrowed: i64) {
        self.advance(t);
        self.used = used;
        self.borrowed = borrowed;
        self.peak = self.peak.max(used);
    }

    pub(super) fn advance(&mut self, now: Millis) {
        let dt = i128::from((now - self.since).max(0));
        self.used_area += i128::from(self.used) * dt;
        self.borrowed_area += i128::from(self.borrowed) * dt;
        self.since = now;
    }
}

/// Usage and queue depth over time, per ClusterQueue (or per cohort when
/// there are more than [`MAX_SERIES`] ClusterQueues). Points are at least
/// `step` ms apart; when there are more than [`MAX_POINTS`], the step doubles
/// and every other point is dropped, so memory stays bounded on long runs.
#[derive(Debug)]
pub(super) struct SeriesRecorder {
    pub(super) resource: String,
    pub(super) names: Vec<String>,
    /// ClusterQueue index → series index.
    group_of: Vec<usize>,
    pub(super) capacity: Vec<i64>,
    pub(super) step: Millis,
    pub(super) points: Vec<SeriesPoint>,
}

/// Series per chart: more ClusterQueues than this are grouped by cohort.
pub const MAX_SERIES: usize = 12;
/// Points kept per series before thinning.
pub const MAX_POINTS: usize = 2048;

impl Simulation<'_> {
    pub(super) fn with_series(mut self) -> Self {
        if !self.cfg.timeseries {
            return self;
        }
        // Chart the resource that binds the capacity: GPUs when the cluster has them.
        let resource = if self.plan.capacity.contains_key(GPU_RESOURCE) {
            GPU_RESOURCE.to_string()
        } else {
            self.plan
                .capacity
                .keys()
                .find(|r| *r == "cpu")
                .or_else(|| self.plan.capacity.keys().next())
                .cloned()
                .unwrap_or_else(|| "cpu".to_string())
        };
        let by_cohort = self.cqs.len() > MAX_SERIES;
        let mut names: Vec<String> = Vec::new();
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        let mut group_of = Vec::with_capacity(self.cqs.len());
        let mut capacity = Vec::new();
        for c in &self.cqs {
            let key = if by_cohort {
                c.cohort
                    .clone()
                    .unwrap_or_else(|| "(no cohort)".to_string())
            } else {
                c.name.clone()
            };
            let g = *index.entry(key.clone()).or_insert_with(|| {
                names.push(key);
                capacity.push(0);
                names.len() - 1
            });
            capacity[g] += c.nominal.get(&resource).copied().unwrap_or(0);
            group_of.push(g);
        }
        self.series = Some(SeriesRecorder {
            resource,
            names,
            group_of,
            capacity,
            step: 1,
            points: Vec::new(),
        });
        self
    }

    /// Appends a time-series point (usage is read from the accumulators
    /// `sample_usage` just updated).
    pub(super) fn record_series(&mut self, t: Millis) {
        let Some(s) = &mut self.series else {
            return;
        };
        if s.points.last().is_some_and(|p| t - p.t_ms < s.step) {
            return;
        }
        let mut used = vec![0i64; s.names.len()];
        let mut pending = vec![0u64; s.names.len()];
        for (c, acc) in self.cqs.iter().enumerate() {
            let g = s.group_of[c];
            used[g] += acc.usage.get(&s.resource).map_or(0, |u| u.used);
            pending[g] += acc.pending;
        }
        s.points.push(SeriesPoint {
            t_ms: t,
            used_milli: used,
            pending,
        });
        if s.points.len() > MAX_POINTS {
            s.step = s.step.saturating_mul(2);
            let mut keep = Vec::with_capacity(s.points.len() / 2 + 1);
            for (i, p) in std::mem::take(&mut s.points).into_iter().enumerate() {
                if i % 2 == 0 {
                    keep.push(p);
                }
            }
            s.points = keep;
        }
    }

    /// Reads usage of the ClusterQueues whose usage may have changed. Not
    /// timed: it is observation, not scheduling.
    pub(super) fn sample_usage(&mut self, t: Millis) {
        let touched = std::mem::take(&mut self.touched);
        for c in touched {
            let Some(rep) = self.engine.cluster_queue_report(&self.cqs[c].name) else {
                continue;
            };
            let mut per_resource: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
            for ((_, resource), u) in &rep.usage {
                let e = per_resource.entry(resource.as_str()).or_default();
                e.0 = e.0.saturating_add(u.total);
                e.1 = e.1.saturating_add(u.borrowed);
            }
            let acc = &mut self.cqs[c];
            // Flavors and resources that dropped out of the report are back to zero.
            for (key, track) in acc.flavor_usage.iter_mut() {
                if !rep.usage.contains_key(key) {
                    track.set(t, 0, 0);
                }
            }
            for (key, u) in &rep.usage {
                let track = acc
                    .flavor_usage
                    .entry(key.clone())
                    .or_insert_with(|| UsageTrack::starting_at(t));
                track.set(t, u.total, u.borrowed);
            }
            for (r, track) in acc.usage.iter_mut() {
                if !per_resource.contains_key(r.as_str()) {
                    track.set(t, 0, 0);
                }
            }
            for (r, (used, borrowed)) in per_resource {
                let track = acc
                    .usage
                    .entry(r.to_string())
                    .or_insert_with(|| UsageTrack::starting_at(t));
                track.set(t, used, borrowed);
            }
        }
    }
}
