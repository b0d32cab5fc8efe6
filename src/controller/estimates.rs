//! Start-time estimates, live: the engine task forecasts a copy of its own state on a
//! blocking thread, at most every `interval` and within a share of one core, learns
//! runtimes from the Workloads that finish, and keeps the latest forecast for the
//! visibility API to serve.
//!
//! Estimates are served, never written: an unchanged estimate costs no API write.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::api::Workload;
use crate::engine::{Engine, Millis, WorkloadKey};
use crate::forecast::{Estimate, Forecast, ForecastConfig, RuntimeBook};
use crate::telemetry::Metrics;

/// When and how much the controller forecasts (KuotaConfiguration `startEstimates`).
#[derive(Clone, Debug, PartialEq)]
pub struct EstimateConfig {
    /// Off: no forecast runs, and the estimates API answers without estimates.
    pub enabled: bool,
    /// At most one pass per this interval.
    pub interval: Duration,
    /// At most this share of one core on passes: after a pass of `d`, the next starts no
    /// sooner than `d / cpu_share` after this one began.
    pub cpu_share: f64,
    /// After this many admissions, evictions or new workloads since the last pass, the
    /// next one starts as soon as the share allows ("a big event").
    pub changes_for_early_pass: usize,
    pub forecast: ForecastConfig,
    /// Opt-in: write each pending workload's estimate into its annotation when it moves
    /// by more than this (ms) from the one written; `None`: estimates are only served.
    pub write_threshold: Option<Millis>,
}

impl Default for EstimateConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: Duration::from_secs(30),
            cpu_share: 0.1,
            changes_for_early_pass: 100,
            forecast: ForecastConfig::default(),
            write_threshold: None,
        }
    }
}

/// A forecast with the wall-clock instant it describes.
pub type Latest = Arc<Forecast>;

/// The engine task's estimator.
pub struct Estimator {
    cfg: EstimateConfig,
    metrics: Metrics,
    book: RuntimeBook,
    /// Finished Workloads already learned from, with their finish (a re-list shows them
    /// again).
    learned: HashMap<WorkloadKey, Millis>,
    latest: Option<Latest>,
    /// The estimate last written into each workload's annotation (opt-in).
    written: HashMap<WorkloadKey, Millis>,
    running: Option<oneshot::Receiver<(Forecast, Duration)>>,
    /// When the running (or last) pass began.
    began: Option<Instant>,
    /// No pass starts before this.
    not_before: Instant,
    changes: usize,
}

impl Estimator {
    pub fn new(cfg: EstimateConfig, metrics: Metrics) -> Self {
        Self {
            cfg,
            metrics,
            book: RuntimeBook::default(),
            learned: HashMap::new(),
            latest: None,
            written: HashMap::new(),
            running: None,
            began: None,
            not_before: Instant::now(),
            changes: 0,
        }
    }

    /// Whether estimates are computed at all.
    pub fn enabled(&self) -> bool {
        self.cfg.enabled
    }

    /// Learns from a Workload the watch shows: a finished run teaches its runtime once.
    pub fn observe(&mut self, key: &WorkloadKey, wl: &Workload) {
        if !self.cfg.enabled {
            return;
        }
        let Some(finished) = finished_at(wl) else {
            return;
        };
        if self.learned.insert(key.clone(), finished) != Some(finished) {
            self.book.record_workload(wl);
        }
    }

    /// Counts a change that moves estimates (an admission, an eviction, a new workload).
    pub fn changed(&mut self, n: usize) {
        self.changes = self.changes.saturating_add(n);
    }

    /// Forgets a deleted Workload's learned-run marker (its run stays in the book).
    pub fn forget(&mut self, key: &WorkloadKey) {
        self.learned.remove(key);
    }

    /// The latest forecast, if a pass has finished.
    pub fn latest(&self) -> Option<Latest> {
        self.latest.clone()
    }

    /// The latest middle estimate for `key`, if any.
    pub fn estimate(&self, key: &WorkloadKey) -> Option<&Estimate> {
        self.latest.as_ref()?.estimates.get(key)
    }

    /// How long until a pass may start (`None`: one runs, or estimates are off).
    pub fn due_in(&self, now: Instant) -> Option<Duration> {
        if !self.cfg.enabled || self.running.is_some() {
            return None;
        }
        let regular = self
            .began
            .map_or(now, |b| b + self.cfg.interval)
            .max(self.not_before);
        let at = if self.changes >= self.cfg.changes_for_early_pass {
            self.not_before
        } else {
            regular
        };
        Some(at.saturating_duration_since(now))
    }

    /// Starts a pass over a copy of `engine` on a blocking thread.
    pub fn start(&mut self, engine: &Engine) {
        if !self.cfg.enabled || self.running.is_some() {
            return;
        }
        // The copy is made on the engine task (it must see one consistent state); its time
        // counts in the pass's cost.
        let began = Instant::now();
        let (engine, book, cfg) = (engine.clone(), self.book.clone(), self.cfg.forecast.clone());
        let copied = began.elapsed();
        let (tx, rx) = oneshot::channel();
        tokio::task::spawn_blocking(move || {
            let ran = Instant::now();
            let forecast = crate::forecast::forecast(&engine, &book, &cfg);
            let _ = tx.send((forecast, copied + ran.elapsed()));
        });
        self.running = Some(rx);
        self.began = Some(began);
        self.changes = 0;
    }

    /// Resolves when the running pass ends; never while none runs.
    pub async fn finished(&mut self) -> Option<(Forecast, Duration)> {
        match &mut self.running {
            Some(rx) => rx.await.ok(),
            None => std::future::pending().await,
        }
    }

    /// Takes in a finished pass: it becomes the latest, the next pass waits out the CPU
    /// share, and the metrics record its cost and the estimated waits.
    pub fn complete(&mut self, engine: &Engine, pass: Option<(Forecast, Duration)>) {
        self.running = None;
        let Some((forecast, took)) = pass else {
            return;
        };
        let began = self.began.unwrap_or_else(Instant::now);
        let share = self.cfg.cpu_share.clamp(0.001, 1.0);
        self.not_before = began + took.div_f64(share);
        let span = began.elapsed().max(self.cfg.interval).as_secs_f64();
        let waits: Vec<(&str, f64)> = engine
            .workload_facts()
            .iter()
            .filter_map(|f| {
                let p50 = forecast.estimates.get(&f.key)?.p50?;
                let cq = engine.cluster_queue_of(&f.key.namespace, &f.queue_name)?;
                Some((cq, (p50 - forecast.at) as f64 / 1000.0))
            })
            .collect();
        self.metrics
            .record_forecast_pass(took, took.as_secs_f64() / span, waits);
        self.latest = Some(Arc::new(forecast));
    }

    /// The estimates to write into annotations after the latest pass (opt-in): those
    /// never written, or moved by more than the threshold since. Workloads that no
    /// longer wait are forgotten.
    pub fn to_write(&mut self) -> Vec<(WorkloadKey, Millis)> {
        let (Some(threshold), Some(latest)) = (self.cfg.write_threshold, self.latest.as_ref())
        else {
            return Vec::new();
        };
        self.written.retain(|k, _| latest.estimates.contains_key(k));
        let mut out = Vec::new();
        for (key, e) in &latest.estimates {
            let Some(p50) = e.p50 else { continue };
            let moved = self
                .written
                .get(key)
                .is_none_or(|w| (p50 - w).abs() > threshold);
            if moved {
                self.written.insert(key.clone(), p50);
                out.push((key.clone(), p50));
            }
        }
        out
    }

    /// Records how far an admission at `now` in `cluster_queue` was from its estimate.
    pub fn admitted(&self, key: &WorkloadKey, cluster_queue: &str, now: Millis) {
        if let Some(p50) = self.estimate(key).and_then(|e| e.p50) {
            self.metrics
                .record_estimate_error(cluster_queue, (now - p50) as f64 / 1000.0);
        }
    }
}

/// When a Workload's `Finished` condition became true (ms), if it did.
fn finished_at(wl: &Workload) -> Option<Millis> {
    let c = wl
        .status
        .as_ref()?
        .condition(crate::api::constants::WORKLOAD_FINISHED)?;
    (c.status == "True").then(|| c.last_transition_time.0.as_millisecond())
}

#[cfg(test)]
mod tests {
    //! A pass over a small engine: its estimate, its metrics, its pacing.

    use super::*;
    use crate::engine::{EngineConfig, Event};

    fn obj<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        serde_norway::from_str(yaml).expect("test fixture is valid")
    }

    /// ClusterQueue `a` (1 cpu): `run` admitted with a 600 s bound, `next` waiting.
    fn engine() -> Engine {
        let mut e = Engine::new(EngineConfig::default());
        let setup = [
            "{metadata: {name: default}, spec: {}}",
            "{metadata: {name: a}, spec: {namespaceSelector: {}, resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: '1'}]}]}]}}",
            "{metadata: {name: a, namespace: ns}, spec: {clusterQueue: a}}",
        ];
        e.apply(0, Event::ResourceFlavorUpserted(obj(setup[0])))
            .unwrap();
        e.apply(0, Event::ClusterQueueUpserted(obj(setup[1])))
            .unwrap();
        e.apply(0, Event::LocalQueueUpserted(obj(setup[2])))
            .unwrap();
        let wl = |name: &str, bound: &str| {
            Event::WorkloadUpserted(obj(&format!(
                "{{metadata: {{name: {name}, namespace: ns}}, spec: {{queueName: a, {bound} podSets: [{{name: main, count: 1, template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '1'}}}}}}]}}}}}}]}}}}"
            )))
        };
        e.apply(0, wl("run", "maximumExecutionTimeSeconds: 600,"))
            .unwrap();
        e.schedule(0);
        e.apply(1_000, wl("next", "")).unwrap();
        e.schedule(1_000);
        e
    }

    #[tokio::test]
    async fn a_pass_estimates_from_the_bound_records_its_cost_and_paces_the_next() {
        let metrics = Metrics::new();
        let cfg = EstimateConfig {
            interval: Duration::from_secs(3600),
            ..EstimateConfig::default()
        };
        let mut est = Estimator::new(cfg, metrics.clone());
        let engine = engine();
        let now = Instant::now();
        assert_eq!(
            est.due_in(now),
            Some(Duration::ZERO),
            "the first pass is due at once"
        );
        est.start(&engine);
        assert_eq!(est.due_in(now), None, "one pass at a time");
        let pass = est.finished().await;
        est.complete(&engine, pass);
        let next = WorkloadKey::new("ns", "next");
        let e = est
            .estimate(&next)
            .expect("an estimate for the waiting workload");
        assert_eq!(
            e.p50,
            Some(600_000),
            "it starts when `run` reaches its bound"
        );
        assert_eq!(e.source, Some(crate::forecast::RuntimeSource::JobBound));
        let text = metrics.encode();
        assert!(
            text.contains("kuota_start_estimate_wait_seconds_count{cluster_queue=\"a\""),
            "{text}"
        );
        assert!(
            text.contains("kuota_start_estimate_pass_duration_seconds_count"),
            "{text}"
        );
        // The next regular pass waits out the interval; 100 changes bring it forward to
        // what the CPU share allows.
        let wait = est.due_in(Instant::now()).expect("due later");
        assert!(wait > Duration::from_secs(3000), "{wait:?}");
        est.changed(100);
        assert!(est.due_in(Instant::now()).expect("due") < Duration::from_secs(60));
        // Scored once admitted: 10 s after the estimate.
        est.admitted(&next, "a", 610_000);
        assert!(
            metrics
                .encode()
                .contains("kuota_start_estimate_error_seconds_sum{cluster_queue=\"a\",replica_role=\"standalone\"} 10.0"),
            "{}",
            metrics.encode()
        );
    }

    /// Opt-in annotations: written once, again only when the estimate moves by more than
    /// the threshold; nothing without a threshold.
    #[tokio::test]
    async fn estimates_are_written_once_and_again_only_past_the_threshold() {
        let engine = engine();
        let cfg = EstimateConfig {
            write_threshold: Some(300_000),
            ..EstimateConfig::default()
        };
        let mut est = Estimator::new(cfg, Metrics::new());
        assert!(est.to_write().is_empty(), "nothing before a pass");
        est.start(&engine);
        let pass = est.finished().await;
        est.complete(&engine, pass);
        let next = WorkloadKey::new("ns", "next");
        assert_eq!(est.to_write(), vec![(next.clone(), 600_000)]);
        assert!(est.to_write().is_empty(), "unchanged: no write");
        let moved = |est: &mut Estimator, p50: Millis| {
            let mut f = (*est.latest().expect("a forecast")).clone();
            f.estimates.get_mut(&next).expect("estimated").p50 = Some(p50);
            est.latest = Some(Arc::new(f));
        };
        moved(&mut est, 800_000);
        assert!(
            est.to_write().is_empty(),
            "moved 200 s, under the 300 s threshold"
        );
        moved(&mut est, 1_000_000);
        assert_eq!(est.to_write(), vec![(next.clone(), 1_000_000)]);
        let mut off = Estimator::new(EstimateConfig::default(), Metrics::new());
        off.latest = est.latest();
        assert!(off.to_write().is_empty(), "served only, by default");
    }

    #[tokio::test]
    async fn finished_runs_are_learned_once_and_nothing_runs_when_off() {
        let wl: Workload = obj(
            "{metadata: {name: w, namespace: ns}, spec: {queueName: a, podSets: []}, status: {conditions: [
               {type: Admitted, status: 'True', reason: Admitted, message: '', lastTransitionTime: '2026-01-01T00:00:00Z'},
               {type: Finished, status: 'True', reason: Succeeded, message: '', lastTransitionTime: '2026-01-01T00:10:00Z'}]}}",
        );
        let key = WorkloadKey::new("ns", "w");
        let mut est = Estimator::new(EstimateConfig::default(), Metrics::new());
        est.observe(&key, &wl);
        est.observe(&key, &wl);
        assert_eq!(
            est.book.len(),
            1,
            "a re-listed finished Workload teaches once"
        );
        let off = EstimateConfig {
            enabled: false,
            ..EstimateConfig::default()
        };
        let mut est = Estimator::new(off, Metrics::new());
        est.observe(&key, &wl);
        assert!(est.book.is_empty());
        assert_eq!(est.due_in(Instant::now()), None);
        est.start(&engine());
        assert!(est.running.is_none());
    }
}
