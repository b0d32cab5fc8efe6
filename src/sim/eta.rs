//! How good the start-time estimates are: a replay with noisy runtimes and overstated
//! bounds, the forecaster asked at submissions and every 10 virtual minutes while a
//! workload waits, its answers compared with the start that happened, beside two baselines.
//!
//! The replay keeps what the estimator cannot know out of its reach: actual runtimes are
//! log-normal around the stated ones (mean preserved), each workload's
//! `maximumExecutionTimeSeconds` overstates its stated runtime by a random factor (a job
//! still ends at its bound), and future arrivals are only in the replay's own queue. The
//! forecaster learns runtimes from the workloads the replay has finished, as in a cluster.

use std::collections::{BTreeMap, HashMap};

use super::SimError;
use super::generator::set_creation_time;
use super::rng::{SplitMix64, derive_seed};
use super::run::SIM_EPOCH_MS;
use super::scenario::Plan;
use crate::engine::{Decision, Engine, EngineConfig, Event, Millis, WorkloadKey};
use crate::forecast::{self, ForecastConfig, RuntimeBook, RuntimeSource};

/// The knobs of an accuracy replay.
#[derive(Clone, Debug)]
pub struct EtaConfig {
    pub seed: u64,
    pub engine: EngineConfig,
    pub forecast: ForecastConfig,
    /// σ of the log-normal noise on runtimes (0.5: a quarter of the runs are 40% off).
    pub runtime_sigma: f64,
    /// A workload's bound is its stated runtime times a factor drawn uniformly in this range.
    pub overstatement: (f64, f64),
    /// The estimate is asked again this often while a workload waits.
    pub probe_interval: Millis,
    /// Only workloads that waited at least this long are scored.
    pub min_wait: Millis,
    /// Arrivals and runtimes are multiplied by this (Kueue's perf scenarios count in ms).
    pub time_scale: i64,
    /// At most this many submission instants are probed (evenly spaced among them); the
    /// periodic probes are all kept.
    pub max_submission_probes: usize,
}

impl Default for EtaConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            engine: EngineConfig::default(),
            forecast: ForecastConfig::default(),
            runtime_sigma: 0.5,
            overstatement: (1.5, 4.0),
            probe_interval: 10 * 60_000,
            min_wait: 5 * 60_000,
            time_scale: 1,
            max_submission_probes: 200,
        }
    }
}

/// Errors of one estimator over the scored samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorStats {
    pub estimator: &'static str,
    /// Scored samples that had an estimate.
    pub samples: usize,
    /// Scored samples without one (no runtime knowledge, beyond the horizon).
    pub without_estimate: usize,
    pub median_abs_ms: Millis,
    pub p90_abs_ms: Millis,
    /// |estimate − start| ÷ (start − time of the estimate).
    pub median_rel: f64,
    pub p90_rel: f64,
    /// Share of samples whose start fell inside [low, high] (kuota's range only).
    pub in_range: Option<f64>,
}

/// What an accuracy replay measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EtaReport {
    pub scenario: String,
    pub workloads: usize,
    pub started: usize,
    /// Workloads that started after waiting at least `min_wait`: the scored ones.
    pub waited: usize,
    /// Forecasts made (each: three forward runs, plus one for the Slurm-style baseline).
    pub forecasts: usize,
    pub forecast_cycles: u64,
    pub kuota: ErrorStats,
    pub naive: ErrorStats,
    pub slurm: ErrorStats,
    /// The oracle: kuota's forward run told every workload's actual runtime. The replay
    /// is the same engine on the same clock, so what error it keeps comes only from the
    /// arrivals no estimate can know.
    pub exact: ErrorStats,
    /// How many of kuota's scored estimates rested on each runtime source (weakest used).
    pub sources: BTreeMap<&'static str, usize>,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Arrive(usize),
    Finish(usize, u32),
    Probe,
    Wake,
}

struct Track {
    key: WorkloadKey,
    queue: String,
    priority: i32,
    cluster_queue: String,
    arrival: Millis,
    actual: Millis,
    requests: BTreeMap<String, i64>,
    first_start: Option<Millis>,
    admitted_at: Option<Millis>,
    epoch: u32,
}

/// One estimate of one waiting workload, by the three estimators.
struct Sample {
    wl: usize,
    at: Millis,
    kuota: Option<(Option<Millis>, Millis, Option<Millis>)>,
    source: Option<RuntimeSource>,
    naive: Option<Millis>,
    slurm: Option<Millis>,
    exact: Option<Millis>,
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    let u1 = rng.next_f64().max(f64::MIN_POSITIVE);
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Replays `plan` and scores the estimates.
pub fn eta_report(plan: &Plan, cfg: &EtaConfig) -> Result<EtaReport, SimError> {
    Replay::new(plan, cfg)?.run()
}

struct Replay<'a> {
    plan: &'a Plan,
    cfg: &'a EtaConfig,
    engine: Engine,
    book: RuntimeBook,
    queue: BTreeMap<(Millis, u64), Ev>,
    seq: u64,
    tracks: Vec<Track>,
    objects: Vec<Option<crate::api::Workload>>,
    index: HashMap<WorkloadKey, usize>,
    samples: Vec<Sample>,
    forecasts: usize,
    cycles: u64,
    submission_every: usize,
}

impl<'a> Replay<'a> {
    fn new(plan: &'a Plan, cfg: &'a EtaConfig) -> Result<Self, SimError> {
        let mut engine = Engine::new(cfg.engine.clone());
        for (what, ev) in &plan.setup {
            engine
                .apply(SIM_EPOCH_MS, ev.clone())
                .map_err(|e| SimError::Engine {
                    what: what.clone(),
                    source: Box::new(e),
                })?;
        }
        let scale = cfg.time_scale.max(1);
        let mut rng = SplitMix64::new(derive_seed(cfg.seed, &[0xe7a]));
        let (lo, hi) = cfg.overstatement;
        let sigma = cfg.runtime_sigma;
        let mut tracks = Vec::with_capacity(plan.workloads.len());
        let mut objects = Vec::with_capacity(plan.workloads.len());
        let mut index = HashMap::new();
        let mut arrivals: Vec<Millis> = Vec::new();
        for (i, w) in plan.workloads.iter().enumerate() {
            let stated = w.runtime.saturating_mul(scale).max(1);
            let noise = (sigma * normal(&mut rng) - sigma * sigma / 2.0).exp();
            let factor = lo + (hi - lo) * rng.next_f64();
            let bound_s = ((stated as f64 * factor) / 1000.0).ceil().max(1.0);
            let mut obj = w.object.clone();
            obj.spec.maximum_execution_time_seconds = Some(bound_s.min(f64::from(i32::MAX)) as i32);
            let arrival = SIM_EPOCH_MS + w.arrival.saturating_mul(scale);
            set_creation_time(&mut obj, arrival);
            let actual = ((stated as f64 * noise) as Millis).clamp(1, bound_s as Millis * 1000);
            index.insert(w.key.clone(), i);
            arrivals.push(arrival);
            tracks.push(Track {
                key: w.key.clone(),
                queue: obj.spec.queue_name.clone().unwrap_or_default(),
                priority: obj.spec.priority.unwrap_or(0),
                cluster_queue: w.cluster_queue.clone(),
                arrival,
                actual,
                requests: w.total_requests.clone(),
                first_start: None,
                admitted_at: None,
                epoch: 0,
            });
            objects.push(Some(obj));
        }
        arrivals.dedup();
        let instants = arrivals.len().max(1);
        let mut r = Self {
            plan,
            cfg,
            engine,
            book: RuntimeBook::default(),
            queue: BTreeMap::new(),
            seq: 0,
            tracks,
            objects,
            index,
            samples: Vec::new(),
            forecasts: 0,
            cycles: 0,
            submission_every: instants.div_ceil(cfg.max_submission_probes.max(1)),
        };
        for i in 0..r.tracks.len() {
            r.push(r.tracks[i].arrival, Ev::Arrive(i));
        }
        r.push(SIM_EPOCH_MS + cfg.probe_interval, Ev::Probe);
        Ok(r)
    }

    fn push(&mut self, at: Millis, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at, self.seq), ev);
    }

    fn run(mut self) -> Result<EtaReport, SimError> {
        let mut submission_instants = 0usize;
        let mut wake_at = None;
        while let Some((&(t, _), _)) = self.queue.first_key_value() {
            let mut arrived = Vec::new();
            let mut probe_all = false;
            while let Some(entry) = self.queue.first_entry() {
                if entry.key().0 != t {
                    break;
                }
                match entry.remove() {
                    Ev::Arrive(i) => {
                        if let Some(obj) = self.objects[i].take() {
                            self.apply(t, Event::WorkloadUpserted(obj))?;
                            arrived.push(i);
                        }
                    }
                    Ev::Finish(i, epoch) => self.finish(t, i, epoch)?,
                    Ev::Probe => probe_all = true,
                    Ev::Wake => {}
                }
            }
            self.cycle(t)?;
            if let Some(w) = self.engine.next_wakeup().filter(|&w| w > t)
                && wake_at != Some(w)
            {
                wake_at = Some(w);
                self.push(w, Ev::Wake);
            }
            // Probing goes on while something can still happen, through idle spells too
            // (a probe with nobody waiting costs nothing): with nothing else on the clock,
            // a workload still pending stays so, and the replay ends.
            if probe_all && !self.queue.is_empty() {
                self.push(t + self.cfg.probe_interval, Ev::Probe);
            }
            let mut targets: Vec<usize> = Vec::new();
            if !arrived.is_empty() {
                submission_instants += 1;
                if (submission_instants - 1).is_multiple_of(self.submission_every) {
                    targets = arrived;
                }
            }
            if probe_all {
                targets = (0..self.tracks.len()).collect();
            }
            targets.retain(|&i| self.is_pending(i));
            if !targets.is_empty() {
                self.probe(t, &targets);
            }
        }
        Ok(self.report())
    }

    fn is_pending(&self, i: usize) -> bool {
        let t = &self.tracks[i];
        self.objects[i].is_none() && t.admitted_at.is_none() && t.first_start.is_none()
    }

    fn apply(&mut self, t: Millis, ev: Event) -> Result<(), SimError> {
        self.engine.apply(t, ev).map_err(|e| SimError::Engine {
            what: "a replayed event".into(),
            source: Box::new(e),
        })
    }

    fn finish(&mut self, t: Millis, i: usize, epoch: u32) -> Result<(), SimError> {
        let tr = &mut self.tracks[i];
        let Some(since) = tr.admitted_at.filter(|_| tr.epoch == epoch) else {
            return Ok(());
        };
        tr.admitted_at = None;
        let (key, ns, queue, priority) = (
            tr.key.clone(),
            tr.key.namespace.clone(),
            tr.queue.clone(),
            tr.priority,
        );
        self.book.record(&ns, &queue, priority, t - since);
        self.apply(t, Event::WorkloadFinished(key))
    }

    /// Cycles at `t` until one stops nobody (a stopped victim frees its quota at once).
    fn cycle(&mut self, t: Millis) -> Result<(), SimError> {
        for _ in 0..1_000 {
            let mut stopped = false;
            for d in self.engine.schedule(t) {
                match d {
                    Decision::Admit { workload, .. } => {
                        let Some(&i) = self.index.get(&workload) else {
                            continue;
                        };
                        let tr = &mut self.tracks[i];
                        tr.first_start.get_or_insert(t);
                        tr.admitted_at = Some(t);
                        tr.epoch += 1;
                        let (at, epoch) = (t + tr.actual, tr.epoch);
                        self.push(at, Ev::Finish(i, epoch));
                    }
                    Decision::Preempt { victim: key, .. }
                    | Decision::Evict { workload: key, .. } => {
                        if let Some(&i) = self.index.get(&key) {
                            self.tracks[i].admitted_at = None;
                            self.tracks[i].epoch += 1;
                        }
                        self.apply(t, Event::WorkloadEvicted(key))?;
                        stopped = true;
                    }
                    _ => {}
                }
            }
            if !stopped {
                break;
            }
        }
        Ok(())
    }

    /// Asks the three estimators about the waiting workloads `targets` at `t`.
    fn probe(&mut self, t: Millis, targets: &[usize]) {
        let f = forecast::forecast(&self.engine, &self.book, &self.cfg.forecast);
        let slurm = forecast::forecast_at(
            &self.engine,
            &RuntimeBook::default(),
            &ForecastConfig {
                default_runtime: None,
                ..self.cfg.forecast.clone()
            },
            0.5,
        );
        let tracks = &self.tracks;
        let index = &self.index;
        let actual = |k: &WorkloadKey| index.get(k).map(|&i| tracks[i].actual);
        let exact = forecast::forecast_exact(&self.engine, &actual, &self.cfg.forecast);
        self.forecasts += 1;
        self.cycles += f.cycles;
        let naive = self.naive(t, targets);
        for (&i, naive) in targets.iter().zip(naive) {
            let key = &self.tracks[i].key;
            let est = f.estimates.get(key);
            self.samples.push(Sample {
                wl: i,
                at: t,
                kuota: est.and_then(|e| Some((e.low, e.p50?, e.high))),
                source: est.and_then(|e| e.source),
                naive,
                slurm: slurm.get(key).copied().flatten(),
                exact: exact.get(key).copied().flatten(),
            });
        }
    }

    /// Queue position × mean learned runtime of the LocalQueue ÷ how many such workloads
    /// the ClusterQueue's nominal quota runs at once.
    fn naive(&self, t: Millis, targets: &[usize]) -> Vec<Option<Millis>> {
        let mut positions: HashMap<&str, HashMap<WorkloadKey, u32>> = HashMap::new();
        targets
            .iter()
            .map(|&i| {
                let tr = &self.tracks[i];
                let pos = positions
                    .entry(tr.cluster_queue.as_str())
                    .or_insert_with(|| {
                        self.engine
                            .pending_in_cluster_queue(&tr.cluster_queue, 0, usize::MAX)
                            .map(|page| {
                                page.into_iter()
                                    .map(|p| (p.key, p.position_in_cluster_queue))
                                    .collect()
                            })
                            .unwrap_or_default()
                    })
                    .get(&tr.key)
                    .copied()?;
                let runs = self
                    .book
                    .sorted(&tr.key.namespace, &tr.queue, tr.priority, 1)?;
                let mean = runs.iter().sum::<Millis>() / runs.len() as Millis;
                let nominal = &self.plan.cluster_queues.get(&tr.cluster_queue)?.nominal;
                let slots = tr
                    .requests
                    .iter()
                    .filter(|&(r, &v)| v > 0 && nominal.get(r).is_some_and(|&n| n > 0))
                    .map(|(r, &v)| nominal[r] / v)
                    .min()
                    .unwrap_or(1)
                    .max(1);
                Some(t + Millis::from(pos) * mean / slots)
            })
            .collect()
    }

    fn report(&self) -> EtaReport {
        let scored = |s: &&Sample| {
            let tr = &self.tracks[s.wl];
            tr.first_start
                .is_some_and(|st| st - tr.arrival >= self.cfg.min_wait)
        };
        let samples: Vec<&Sample> = self.samples.iter().filter(scored).collect();
        let start = |s: &Sample| self.tracks[s.wl].first_start.unwrap_or_default();
        let score = |name: &'static str, pick: &dyn Fn(&Sample) -> Option<Millis>| {
            let pairs: Vec<(Millis, Millis, Millis)> = samples
                .iter()
                .filter_map(|s| pick(s).map(|e| (e, start(s), s.at)))
                .collect();
            stats(name, &pairs, samples.len() - pairs.len())
        };
        let mut kuota = score("kuota", &|s| s.kuota.map(|k| k.1));
        let with: Vec<&&Sample> = samples.iter().filter(|s| s.kuota.is_some()).collect();
        if !with.is_empty() {
            let inside = with
                .iter()
                .filter(|s| {
                    let (low, _, high) = s.kuota.unwrap_or_default();
                    let st = start(s);
                    low.is_some_and(|l| l <= st) && high.is_none_or(|h| st <= h)
                })
                .count();
            kuota.in_range = Some(inside as f64 / with.len() as f64);
        }
        let mut sources = BTreeMap::new();
        for s in &with {
            *sources
                .entry(s.source.map_or("none (fits now)", |s| s.as_str()))
                .or_default() += 1;
        }
        let waited = self
            .tracks
            .iter()
            .filter(|t| {
                t.first_start
                    .is_some_and(|st| st - t.arrival >= self.cfg.min_wait)
            })
            .count();
        EtaReport {
            scenario: self.plan.name.clone(),
            workloads: self.tracks.len(),
            started: self
                .tracks
                .iter()
                .filter(|t| t.first_start.is_some())
                .count(),
            waited,
            forecasts: self.forecasts,
            forecast_cycles: self.cycles,
            naive: score("naive", &|s| s.naive),
            slurm: score("slurm-style", &|s| s.slurm),
            exact: score("exact-rt", &|s| s.exact),
            kuota,
            sources,
        }
    }
}

/// Absolute and relative errors of (estimate, start, asked at) triples.
fn stats(name: &'static str, pairs: &[(Millis, Millis, Millis)], missing: usize) -> ErrorStats {
    let mut abs: Vec<Millis> = pairs.iter().map(|(e, s, _)| (e - s).abs()).collect();
    let mut rel: Vec<f64> = pairs
        .iter()
        .map(|(e, s, at)| (e - s).abs() as f64 / (s - at).max(1) as f64)
        .collect();
    abs.sort_unstable();
    rel.sort_by(f64::total_cmp);
    let q = |n: usize, p: f64| (((p * n as f64).ceil() as usize).clamp(1, n.max(1))) - 1;
    ErrorStats {
        estimator: name,
        samples: pairs.len(),
        without_estimate: missing,
        median_abs_ms: abs.get(q(abs.len(), 0.5)).copied().unwrap_or_default(),
        p90_abs_ms: abs.get(q(abs.len(), 0.9)).copied().unwrap_or_default(),
        median_rel: rel.get(q(rel.len(), 0.5)).copied().unwrap_or_default(),
        p90_rel: rel.get(q(rel.len(), 0.9)).copied().unwrap_or_default(),
        in_range: None,
    }
}

/// The report as a plain-text table.
pub fn render(r: &EtaReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} workloads, {} started, {} waited >= 5 min (scored); {} forecasts, {} forward cycles",
        r.scenario, r.workloads, r.started, r.waited, r.forecasts, r.forecast_cycles
    );
    let _ = writeln!(
        out,
        "  {:<12} {:>8} {:>10} {:>12} {:>12} {:>9} {:>9} {:>9}",
        "estimator",
        "samples",
        "no answer",
        "median |e|",
        "p90 |e|",
        "med rel",
        "p90 rel",
        "in range"
    );
    for s in [&r.kuota, &r.naive, &r.slurm, &r.exact] {
        let _ = writeln!(
            out,
            "  {:<12} {:>8} {:>10} {:>11.1}m {:>11.1}m {:>8.0}% {:>8.0}% {:>9}",
            s.estimator,
            s.samples,
            s.without_estimate,
            s.median_abs_ms as f64 / 60_000.0,
            s.p90_abs_ms as f64 / 60_000.0,
            s.median_rel * 100.0,
            s.p90_rel * 100.0,
            s.in_range
                .map_or("-".to_string(), |v| format!("{:.0}%", v * 100.0)),
        );
    }
    let sources: Vec<String> = r.sources.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(out, "  kuota's runtime sources: {}", sources.join(", "));
    let _ = writeln!(
        out,
        "  exact-rt: the same forward run told every actual runtime (no cluster knows them)"
    );
    out
}

#[cfg(test)]
mod tests;
