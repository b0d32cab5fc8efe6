//! Actuation latencies measured in a real cluster, so that the simulator predicts it: the
//! calibration file `benches/cluster --calibration-out` writes from its audit log, its
//! distributions computed, loaded, checked and sampled.
//!
//! Four latencies surround each of kuota's decisions in a cluster, and none exists on
//! the simulator's clock without this file:
//! - `workloadCreated`: a job is created → its Workload exists (the engine sees it);
//! - `unsuspended`: the admission is written → the job is unsuspended;
//! - `podsRunning`: the job is unsuspended → its pods are created and run;
//! - `workloadFinished`: its pods are done → its Workload is `Finished` and the quota
//!   is back (the job controller's completion, then kuota's finish);
//! - `evictionStopped` (optional): a preemption is written → the victim is stopped and
//!   requeued, its quota back (replaces `--eviction-delay-ms`).
//!
//! `workloadCreateService` (optional) replaces `workloadCreated` with a queue. kuota
//! creates Workloads as fast as it and the API server can, and while jobs are created
//! by the hundred a second they wait for each other: a job's wait then follows the jobs
//! before it, not a distribution of its own. With it, Workloads are created one after
//! another in the order their jobs came, each taking a service time drawn from it after
//! its job's creation or the Workload before it, whichever is later (a FIFO queue with
//! one server: Lindley's recursion). [`fifo_service_times`] measures those service
//! times from a run's creations.
//!
//! Each is a distribution given as 101 quantiles (p0 … p100, milliseconds); a sample is
//! read at a uniform random quantile, interpolated between neighbours.
//!
//! The two latencies after the unsuspend grow with load: the job controller and the
//! kubelets queue their work, and a cluster with 400 jobs in flight (admitted, not
//! finished) takes several times longer to run and complete each one than a cluster with
//! 25. So `byInFlight` may give them per load: each entry applies from `atLeast` jobs in
//! flight at the admission up to the next entry's, in place of the global ones.
//!
//! The job controller also syncs every job created, suspended or not: while jobs are
//! created by the hundred a second, a cluster with 50 in flight is as slow as one with
//! 100 or 200 after the creations end. With `loadWindowMs` set, the load an entry is
//! looked up by is the jobs in flight plus the jobs created in that window before the
//! admission (`benches/cluster` measures with 1 s).
//!
//! A job's completion waits behind what the cluster is doing once its pods are done,
//! not when it was unsuspended: a job started in a quiet first second and completed
//! while hundreds more were being created takes as long as those. With
//! `finishedLoadAt: PodsDone`, `workloadFinished` is looked up by the load when its pods
//! are done (`benches/cluster` measures it so: in its runs this halves the spread of a
//! completion's latency within a band against the load at the unsuspend); without it,
//! by the load at the unsuspend, as `podsRunning` always is.

use std::path::Path;

use serde::Deserialize;

use super::SimError;
use super::rng::SplitMix64;
use crate::engine::Millis;

/// The `apiVersion` and `kind` of a calibration file.
pub const API_VERSION: &str = "kuota.dev/v1alpha1";
pub const KIND: &str = "Calibration";

/// A loaded calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The file it came from, for the report.
    pub source: String,
    /// The ClusterQueues of the shape it was measured on.
    pub cluster_queues: usize,
    pub workload_created: Quantiles,
    /// Empty: each Workload appears `workload_created` after its job, independently.
    pub workload_create_service: Quantiles,
    pub unsuspended: Quantiles,
    pub pods_running: Quantiles,
    pub workload_finished: Quantiles,
    /// Empty: `--eviction-delay-ms` applies.
    pub eviction_stopped: Quantiles,
    /// `podsRunning` and `workloadFinished` by load, ascending `at_least`.
    pub by_in_flight: Vec<LoadBand>,
    /// Jobs created within this many ms before an admission count in its load (0: the
    /// load is the jobs in flight alone).
    pub load_window_ms: Millis,
    /// When `workloadFinished` is looked up by load.
    pub finished_load_at: LoadPoint,
}

/// The moment a latency after the unsuspend is looked up by the load at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum LoadPoint {
    /// When the job is unsuspended.
    #[default]
    Unsuspend,
    /// When the job's pods are done.
    PodsDone,
}

/// The latencies after an unsuspend when at least `at_least` jobs are in flight.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadBand {
    pub at_least: usize,
    /// How many jobs the band was measured on.
    pub jobs: usize,
    /// How many jobs its `workload_finished` was measured on, when they are counted at
    /// another moment ([`LoadPoint::PodsDone`]); 0 when not given.
    pub finished_jobs: usize,
    pub pods_running: Quantiles,
    pub workload_finished: Quantiles,
}

/// A latency distribution as 101 non-decreasing quantiles in ms (empty: always 0).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Quantiles(Vec<f64>);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    api_version: String,
    kind: String,
    cluster_queues: usize,
    #[serde(default)]
    measured_jobs: usize,
    latency_quantiles_ms: Latencies,
    #[serde(default)]
    by_in_flight: Vec<Band>,
    #[serde(default)]
    load_window_ms: Option<serde_json::Value>,
    #[serde(default)]
    finished_load_at: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Band {
    at_least: usize,
    #[serde(default)]
    jobs: usize,
    /// How many jobs `workloadFinished` was measured on, when they are counted at
    /// another moment than `podsRunning`'s.
    #[serde(default)]
    finished_jobs: usize,
    pods_running: Vec<f64>,
    workload_finished: Vec<f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Latencies {
    workload_created: Vec<f64>,
    #[serde(default)]
    workload_create_service: Vec<f64>,
    unsuspended: Vec<f64>,
    pods_running: Vec<f64>,
    workload_finished: Vec<f64>,
    #[serde(default)]
    eviction_stopped: Vec<f64>,
}

impl Calibration {
    /// Reads `path`: an error names the file and the field when it cannot be read, is
    /// not a calibration, or holds a distribution that is not 101 non-decreasing
    /// quantiles.
    pub fn load(path: &Path) -> Result<Self, SimError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SimError::Io {
            path: name.clone(),
            source: std::sync::Arc::new(e),
        })?;
        Self::parse(&name, &text)
    }

    /// Refuses a calibration measured on a shape with another number of ClusterQueues
    /// than the scenario's `cluster_queues`.
    pub fn check_shape(&self, cluster_queues: usize) -> Result<(), SimError> {
        if self.cluster_queues == cluster_queues {
            return Ok(());
        }
        Err(SimError::Scenario {
            source_name: self.source.clone(),
            message: format!(
                "clusterQueues: measured on {} ClusterQueues, the scenario has {cluster_queues}: a calibration is only valid for the shape it was measured on",
                self.cluster_queues
            ),
        })
    }

    /// [`Calibration::load`] on text already read (`name` names it in errors).
    pub fn parse(name: &str, text: &str) -> Result<Self, SimError> {
        let file: File = serde_json::from_str(text)
            .map_err(|e| SimError::field(name, "calibration", std::sync::Arc::new(e)))?;
        let wrong = |message: String| SimError::Scenario {
            source_name: name.to_string(),
            message,
        };
        if file.api_version != API_VERSION || file.kind != KIND {
            return Err(wrong(format!(
                "apiVersion/kind: expected {API_VERSION} {KIND}, found {} {}",
                file.api_version, file.kind
            )));
        }
        if file.measured_jobs == 0 {
            return Err(wrong("measuredJobs: no finished job was measured".into()));
        }
        let l = file.latency_quantiles_ms;
        let check = |field: &str, q: Vec<f64>| -> Result<Quantiles, SimError> {
            let at = if field.starts_with("byInFlight") {
                field.to_string()
            } else {
                format!("latencyQuantilesMs.{field}")
            };
            if !q.is_empty() && q.len() != 101 {
                return Err(wrong(format!(
                    "{at}: {} values, expected 101 quantiles (p0 to p100) or none",
                    q.len()
                )));
            }
            if let Some(i) = q.iter().position(|v| !v.is_finite() || *v < 0.0) {
                return Err(wrong(format!(
                    "{at}[{i}]: {} is not a latency (a finite number of ms, at least 0)",
                    q[i]
                )));
            }
            if let Some(i) = q.windows(2).position(|w| w[1] < w[0]) {
                return Err(wrong(format!(
                    "{at}[{}]: {} is below the quantile before it ({}); quantiles never decrease",
                    i + 1,
                    q[i + 1],
                    q[i]
                )));
            }
            Ok(Quantiles(q))
        };
        let load_window_ms = match &file.load_window_ms {
            None => 0,
            Some(v) => match v.as_i64().filter(|ms| (0..=3_600_000).contains(ms)) {
                Some(ms) => ms,
                None => {
                    return Err(wrong(format!(
                        "loadWindowMs: {v} is not a window (whole ms from 0 to 3600000)"
                    )));
                }
            },
        };
        let finished_load_at = match &file.finished_load_at {
            None => LoadPoint::Unsuspend,
            Some(v) => LoadPoint::deserialize(v).map_err(|_| {
                wrong(format!(
                    "finishedLoadAt: {v} is not a moment (Unsuspend or PodsDone)"
                ))
            })?,
        };
        let mut by_in_flight = Vec::with_capacity(file.by_in_flight.len());
        for (i, b) in file.by_in_flight.into_iter().enumerate() {
            if by_in_flight
                .last()
                .is_some_and(|prev: &LoadBand| prev.at_least >= b.at_least)
            {
                return Err(wrong(format!(
                    "byInFlight[{i}].atLeast: {} is not above the entry before it; entries go up",
                    b.at_least
                )));
            }
            by_in_flight.push(LoadBand {
                at_least: b.at_least,
                jobs: b.jobs,
                finished_jobs: b.finished_jobs,
                pods_running: check(&format!("byInFlight[{i}].podsRunning"), b.pods_running)?,
                workload_finished: check(
                    &format!("byInFlight[{i}].workloadFinished"),
                    b.workload_finished,
                )?,
            });
        }
        Ok(Self {
            by_in_flight,
            load_window_ms,
            finished_load_at,
            source: name.to_string(),
            cluster_queues: file.cluster_queues,
            workload_created: check("workloadCreated", l.workload_created)?,
            workload_create_service: check("workloadCreateService", l.workload_create_service)?,
            unsuspended: check("unsuspended", l.unsuspended)?,
            pods_running: check("podsRunning", l.pods_running)?,
            workload_finished: check("workloadFinished", l.workload_finished)?,
            eviction_stopped: check("evictionStopped", l.eviction_stopped)?,
        })
    }
}

impl Calibration {
    /// `podsRunning` at `load` (the jobs admitted and not finished, plus those created
    /// within `load_window_ms`) at the unsuspend.
    pub fn pods_running_at(&self, load: usize) -> &Quantiles {
        self.band(load)
            .map_or(&self.pods_running, |b| &b.pods_running)
    }

    /// `workloadFinished` at `load`, taken at [`Calibration::finished_load_at`].
    pub fn workload_finished_at(&self, load: usize) -> &Quantiles {
        self.band(load)
            .map_or(&self.workload_finished, |b| &b.workload_finished)
    }

    /// When each job's Workload is seen, for jobs created at `created` (ms, in any
    /// order): through kuota's creation queue when `workloadCreateService` is given,
    /// else `workloadCreated` after each job on its own.
    pub(crate) fn workloads_seen(&self, created: &[Millis], rng: &mut SplitMix64) -> Vec<Millis> {
        if self.workload_create_service.is_empty() {
            return created
                .iter()
                .map(|c| c.saturating_add(self.workload_created.sample(rng)))
                .collect();
        }
        let mut order: Vec<usize> = (0..created.len()).collect();
        order.sort_by_key(|&i| (created[i], i));
        let mut seen = vec![0; created.len()];
        // Kept in fractions of a ms: service times under load are a few ms each, and
        // rounding each one would bias the queue's rate.
        let mut free_at = f64::NEG_INFINITY;
        for i in order {
            let start = free_at.max(created[i] as f64);
            free_at = start + self.workload_create_service.sample_ms(rng);
            seen[i] = free_at.round() as Millis;
        }
        seen
    }

    fn band(&self, load: usize) -> Option<&LoadBand> {
        self.by_in_flight.iter().rev().find(|b| b.at_least <= load)
    }
}

impl Quantiles {
    /// A sample: the distribution read at a uniform random quantile, in whole ms.
    pub(crate) fn sample(&self, rng: &mut SplitMix64) -> Millis {
        self.sample_ms(rng).round() as Millis
    }

    /// A sample in fractional ms.
    fn sample_ms(&self, rng: &mut SplitMix64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let x = rng.next_f64() * 100.0;
        let i = (x.floor() as usize).min(99);
        let (lo, hi) = (self.0[i], self.0[i + 1]);
        lo + (hi - lo) * (x - i as f64)
    }

    /// A distribution that is always `ms`.
    #[cfg(test)]
    pub(crate) fn constant(ms: f64) -> Self {
        Self(vec![ms; 101])
    }

    /// Whether it has no samples (always 0).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The median, in ms.
    pub fn median(&self) -> f64 {
        self.0.get(50).copied().unwrap_or(0.0)
    }
}

/// 101 quantiles (p0, p1, ..., p100) of `samples`, in ms to a tenth; empty without
/// samples. Negative and non-finite samples are left out.
pub fn quantiles(samples: Vec<f64>) -> Vec<f64> {
    quantiles_of_sorted(&usable(samples))
}

/// [`quantiles`], with the last one set so that a sample drawn from them (interpolated
/// between neighbours) has the samples' mean. A queue's rate is its service times'
/// mean, and a single stall as the maximum would otherwise stand for the whole top
/// percent: on `benches/cluster`'s runs the Workload creation queue came out 25–50 %
/// slower than measured. Never below the quantile before it.
pub fn quantiles_keeping_mean(samples: Vec<f64>) -> Vec<f64> {
    let kept = usable(samples);
    let mut q = quantiles_of_sorted(&kept);
    if q.len() == 101 {
        let mean = kept.iter().sum::<f64>() / kept.len() as f64;
        // The interpolated mean is Σ (q[i] + q[i+1]) / 200 over i in 0..100.
        let inner: f64 = q[1..100].iter().sum();
        let last = 200.0 * mean - q[0] - 2.0 * inner;
        q[100] = ((last * 10.0).round() / 10.0).max(q[99]);
    }
    q
}

/// The samples that are latencies (finite, at least 0), in ascending order.
fn usable(mut samples: Vec<f64>) -> Vec<f64> {
    samples.retain(|s| s.is_finite() && *s >= 0.0);
    samples.sort_by(f64::total_cmp);
    samples
}

fn quantiles_of_sorted(sorted: &[f64]) -> Vec<f64> {
    if sorted.is_empty() {
        return vec![];
    }
    (0..=100)
        .map(|p| {
            let i = (p as f64 / 100.0 * (sorted.len() - 1) as f64).round() as usize;
            (sorted[i] * 10.0).round() / 10.0
        })
        .collect()
}

/// The service times of a FIFO queue with one server, from the moments its items
/// arrived and left (any order each): the k-th departure served the k-th arrival, and
/// began when that item arrived or the departure before it left, whichever was later.
/// Each is at least 0: the k-th departure never precedes the k-th arrival when no item
/// leaves before it came.
pub fn fifo_service_times(arrivals: &[f64], departures: &[f64]) -> Vec<f64> {
    let sorted = |v: &[f64]| {
        let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (arrivals, departures) = (sorted(arrivals), sorted(departures));
    let mut free_at = f64::NEG_INFINITY;
    arrivals
        .iter()
        .zip(&departures)
        .map(|(a, d)| {
            let service = (d - free_at.max(*a)).max(0.0);
            free_at = *d;
            service
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(created: &str, cqs: usize) -> String {
        let ramp: Vec<String> = (0..=100).map(|i| (i * 10).to_string()).collect();
        let ramp = format!("[{}]", ramp.join(","));
        format!(
            r#"{{"apiVersion":"kuota.dev/v1alpha1","kind":"Calibration","clusterQueues":{cqs},"measuredJobs":3000,
               "latencyQuantilesMs":{{"workloadCreated":{created},"unsuspended":[],"podsRunning":{ramp},"workloadFinished":{ramp}}}}}"#
        )
    }

    #[test]
    fn a_calibration_loads_and_samples_within_its_quantiles() {
        let c = Calibration::parse("c.json", &file("[]", 30)).expect("valid");
        assert!(c.check_shape(30).is_ok());
        let mut rng = SplitMix64::new(7);
        let samples: Vec<Millis> = (0..1000).map(|_| c.pods_running.sample(&mut rng)).collect();
        assert!(samples.iter().all(|s| (0..=1000).contains(s)));
        let mean = samples.iter().sum::<Millis>() as f64 / 1000.0;
        assert!((400.0..600.0).contains(&mean), "mean {mean}");
        assert_eq!(c.workload_created.sample(&mut rng), 0);
        assert_eq!(c.pods_running.median(), 500.0);
    }

    #[test]
    fn workloads_are_created_one_after_another_through_the_creation_queue() {
        let mut doc: serde_json::Value =
            serde_json::from_str(&file(&format!("{:?}", vec![500.0; 101]), 30)).expect("json");
        doc["latencyQuantilesMs"]["workloadCreateService"] = serde_json::json!(vec![10.0; 101]);
        let c = Calibration::parse("c.json", &doc.to_string()).expect("valid");
        // Three jobs at once queue behind each other; the one at 50 finds the queue
        // empty again (the third left at 30); the one at 105 waits for the one at 100.
        // Given out of order, answered in the order given.
        let created = [0, 100, 0, 50, 105, 0];
        let seen = c.workloads_seen(&created, &mut SplitMix64::new(3));
        assert_eq!(seen, vec![10, 110, 20, 60, 120, 30]);
        // Without the queue each job waits `workloadCreated` on its own.
        doc["latencyQuantilesMs"]["workloadCreateService"] = serde_json::json!([]);
        let c = Calibration::parse("c.json", &doc.to_string()).expect("valid");
        let seen = c.workloads_seen(&created, &mut SplitMix64::new(3));
        assert_eq!(seen, vec![500, 600, 500, 550, 605, 500]);
    }

    #[test]
    fn a_queues_service_times_are_recovered_from_its_arrivals_and_departures() {
        // Served in turn, 10 ms each, from arrivals at 0, 0, 0, 50 and 100 (given in
        // any order): departures 10, 20, 30, 60, 110.
        let service = fifo_service_times(
            &[50.0, 0.0, 100.0, 0.0, 0.0],
            &[110.0, 10.0, 20.0, 30.0, 60.0],
        );
        assert_eq!(service, vec![10.0; 5]);
        // A departure recorded before its arrival (clocks apart) counts as no wait, and
        // an item that never left is not counted.
        assert_eq!(fifo_service_times(&[5.0, 6.0], &[4.0]), vec![0.0]);
        // And back: the queue replayed with what it measured leaves when it left.
        let mut doc: serde_json::Value = serde_json::from_str(&file("[]", 30)).expect("json");
        doc["latencyQuantilesMs"]["workloadCreateService"] = serde_json::json!(vec![10.0; 101]);
        let c = Calibration::parse("c.json", &doc.to_string()).expect("valid");
        let seen = c.workloads_seen(&[50, 0, 100, 0, 0], &mut SplitMix64::new(1));
        assert_eq!(seen, vec![60, 10, 110, 20, 30]);
    }

    #[test]
    fn service_quantiles_keep_the_mean_that_sets_a_queues_rate() {
        // Quick services and one stall: with the plain maximum as p100, the top
        // percent's draws would average (2 + 10,000) / 2, against a mean of 11.
        let mut samples = vec![1.0; 990];
        samples.extend(vec![2.0; 9]);
        samples.push(10_000.0);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let plain = quantiles(samples.clone());
        assert_eq!(plain[100], 10_000.0);
        let q = quantiles_keeping_mean(samples);
        assert_eq!(q[..100], plain[..100]);
        let drawn: f64 = q.windows(2).map(|w| (w[0] + w[1]) / 200.0).sum();
        assert!((drawn - mean).abs() < 0.01, "{drawn} against {mean}");
        // Samples whose top is already light keep a last quantile at least the one
        // before it.
        let q = quantiles_keeping_mean((0..1000).map(|i| (i / 10) as f64).collect());
        assert!(q[100] >= q[99]);
        assert!(quantiles_keeping_mean(vec![]).is_empty());
    }

    #[test]
    fn latencies_after_the_unsuspend_follow_the_load() {
        let constant = |ms: u32| vec![ms; 101];
        let mut doc: serde_json::Value = serde_json::from_str(&file("[]", 30)).expect("json");
        doc["byInFlight"] = serde_json::json!([
            {"atLeast": 0, "podsRunning": constant(1), "workloadFinished": constant(2)},
            {"atLeast": 100, "jobs": 40, "podsRunning": constant(30), "workloadFinished": constant(40)},
        ]);
        let text = doc.to_string();
        let c = Calibration::parse("c.json", &text).expect("valid");
        let mut rng = SplitMix64::new(1);
        let at = |load| (c.pods_running_at(load), c.workload_finished_at(load));
        let (p, f) = at(99);
        assert_eq!((p.sample(&mut rng), f.sample(&mut rng)), (1, 2));
        let (p, f) = at(100);
        assert_eq!((p.sample(&mut rng), f.sample(&mut rng)), (30, 40));
        let down = text.replace("\"atLeast\":100", "\"atLeast\":0");
        assert_ne!(down, text);
        let e = Calibration::parse("c.json", &down)
            .expect_err("refused")
            .to_string();
        assert!(
            e.starts_with("c.json: byInFlight[1].atLeast: 0 is not above the entry before it"),
            "{e}"
        );
    }

    #[test]
    fn a_load_window_is_read_and_checked() {
        let mut doc: serde_json::Value = serde_json::from_str(&file("[]", 30)).expect("json");
        assert_eq!(
            Calibration::parse("c.json", &doc.to_string())
                .expect("valid")
                .load_window_ms,
            0,
            "without one, the load is the jobs in flight alone"
        );
        doc["loadWindowMs"] = serde_json::json!(1000);
        let c = Calibration::parse("c.json", &doc.to_string()).expect("valid");
        assert_eq!(c.load_window_ms, 1000);
        for bad in [
            serde_json::json!(-1),
            serde_json::json!(1.5),
            serde_json::json!("1s"),
        ] {
            doc["loadWindowMs"] = bad.clone();
            let e = Calibration::parse("c.json", &doc.to_string())
                .expect_err("refused")
                .to_string();
            assert_eq!(
                e,
                format!("c.json: loadWindowMs: {bad} is not a window (whole ms from 0 to 3600000)")
            );
        }
    }

    #[test]
    fn the_moment_a_completion_is_looked_up_by_is_read_and_checked() {
        let mut doc: serde_json::Value = serde_json::from_str(&file("[]", 30)).expect("json");
        let at = |doc: &serde_json::Value| Calibration::parse("c.json", &doc.to_string());
        assert_eq!(
            at(&doc).expect("valid").finished_load_at,
            LoadPoint::Unsuspend,
            "files written before it look up both latencies at the unsuspend"
        );
        doc["finishedLoadAt"] = serde_json::json!("PodsDone");
        doc["byInFlight"] = serde_json::json!([{"atLeast": 0, "jobs": 30, "finishedJobs": 28,
            "podsRunning": [], "workloadFinished": []}]);
        assert_eq!(
            at(&doc).expect("valid").finished_load_at,
            LoadPoint::PodsDone
        );
        for bad in [serde_json::json!("podsDone"), serde_json::json!(1)] {
            doc["finishedLoadAt"] = bad.clone();
            assert_eq!(
                at(&doc).expect_err("refused").to_string(),
                format!("c.json: finishedLoadAt: {bad} is not a moment (Unsuspend or PodsDone)")
            );
        }
    }

    #[test]
    fn a_missing_calibration_file_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("kuota-no-calibration-{}", std::process::id()));
        let path = dir.join("calibration.json");
        let e = Calibration::load(&path).expect_err("missing").to_string();
        assert!(e.starts_with(&format!("{}: ", path.display())), "{e}");
        assert!(e.contains("No such file"), "{e}");
    }

    #[test]
    fn bad_calibrations_name_the_file_and_the_field() {
        let err = |text: &str, cqs| match Calibration::parse("c.json", text) {
            Ok(c) => c.check_shape(cqs).expect_err("refused").to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err(&file("[]", 30), 60).starts_with(
            "c.json: clusterQueues: measured on 30 ClusterQueues, the scenario has 60"
        ));
        assert!(
            err(&file("[1,2]", 30), 30)
                .starts_with("c.json: latencyQuantilesMs.workloadCreated: 2 values, expected 101")
        );
        let mut down: Vec<String> = (0..=100).map(|i| i.to_string()).collect();
        down[7] = "1".into();
        let e = err(&file(&format!("[{}]", down.join(",")), 30), 30);
        assert!(
            e.starts_with("c.json: latencyQuantilesMs.workloadCreated[7]: 1 is below the quantile before it (6)"),
            "{e}"
        );
        let e = err(&file("[-1]", 30), 30);
        assert!(e.contains("workloadCreated"), "{e}");
        let service = file("[]", 30).replace(
            "\"workloadCreated\"",
            "\"workloadCreateService\":[1,2,3],\"workloadCreated\"",
        );
        let e = err(&service, 30);
        assert!(
            e.starts_with(
                "c.json: latencyQuantilesMs.workloadCreateService: 3 values, expected 101"
            ),
            "{e}"
        );
        let e = err("{\"apiVersion\":\"v1\"}", 30);
        assert!(e.starts_with("c.json: calibration: missing field"), "{e}");
        let e = err(&file("[]", 30).replace("Calibration", "Scenario"), 30);
        assert!(
            e.starts_with("c.json: apiVersion/kind: expected kuota.dev/v1alpha1 Calibration"),
            "{e}"
        );
    }
}
