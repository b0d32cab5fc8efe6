//! One forward run: a copy of the engine on virtual time, every runtime at one quantile,
//! until every pending workload is admitted, nothing more can happen, or the budget ends.

use std::collections::{BTreeMap, HashMap};

use super::runtimes::{RuntimeBook, quantile};
use super::{ForecastConfig, RuntimeSource, Unknown};
use crate::engine::report::{FactPhase, WorkloadFacts};
use crate::engine::{Decision, Engine, Event, Millis, WorkloadKey};

/// At most this many cycles at one virtual instant (a preemption cascade) per run.
const MAX_CYCLES_PER_INSTANT: u32 = 100;

/// What one forward run saw.
#[derive(Debug, Default)]
pub(super) struct Run {
    /// The workloads waiting at the start (pending or evicting), in key order.
    pub targets: Vec<WorkloadKey>,
    /// Each target's first admission in the run, and the weakest runtime source among the
    /// workloads that had ended by then (`None`: nobody had).
    pub started: HashMap<WorkloadKey, (Millis, Option<RuntimeSource>)>,
    pub cycles: u64,
    /// Stopped at the horizon or the cycle budget.
    pub truncated: bool,
    /// Some workload held quota with a runtime nothing tells.
    pub unknown_runtime: bool,
}

impl Run {
    /// Why a target the run did not admit has no estimate.
    pub fn why_not(&self) -> Unknown {
        if self.truncated {
            Unknown::BeyondHorizon
        } else if self.unknown_runtime {
            Unknown::NoRuntimeKnowledge
        } else {
            Unknown::NotAdmissible
        }
    }
}

/// Each workload's whole runtime, known exactly: only the accuracy replay's oracle has it.
pub(super) type ExactRuntimes<'a> = &'a dyn Fn(&WorkloadKey) -> Option<Millis>;

/// Runtimes at one quantile, with the learned distributions looked up once per class.
struct Runtimes<'a> {
    book: &'a RuntimeBook,
    cfg: &'a ForecastConfig,
    q: f64,
    learned: HashMap<(std::sync::Arc<str>, String, i32), Option<Vec<Millis>>>,
    exact: Option<ExactRuntimes<'a>>,
}

impl Runtimes<'_> {
    fn learned(&mut self, f: &WorkloadFacts) -> Option<&[Millis]> {
        let key = (f.key.namespace.clone(), f.queue_name.clone(), f.priority);
        let (book, min) = (self.book, self.cfg.min_samples);
        self.learned
            .entry(key)
            .or_insert_with(|| book.sorted(&f.key.namespace, &f.queue_name, f.priority, min))
            .as_deref()
    }

    /// How much longer a workload that has run `elapsed` will run, and why we think so.
    fn remaining(&mut self, f: &WorkloadFacts, elapsed: Millis) -> Option<(Millis, RuntimeSource)> {
        let elapsed = elapsed.max(0);
        if let Some(exact) = self.exact {
            // The oracle's runs report no source of their own.
            let total = exact(&f.key)?;
            return Some((total.saturating_sub(elapsed).max(0), RuntimeSource::Learned));
        }
        let q = self.q;
        // The learned runs longer than what it has already run: its conditional distribution.
        let learned = self.learned(f).and_then(|sorted| {
            let from = sorted.partition_point(|&r| r <= elapsed);
            quantile(&sorted[from..], q).map(|r| r - elapsed)
        });
        let bound = f.bound.map(|b| b.saturating_sub(elapsed).max(0));
        match (learned, bound) {
            (Some(l), Some(b)) if b < l => Some((b, RuntimeSource::JobBound)),
            (Some(l), _) => Some((l, RuntimeSource::Learned)),
            (None, Some(b)) => Some((b, RuntimeSource::JobBound)),
            (None, None) => self
                .cfg
                .default_runtime
                .map(|d| (d.saturating_sub(elapsed).max(0), RuntimeSource::Default)),
        }
    }
}

/// Runs `engine`'s copy forward with every runtime at quantile `q`, or, given `exact`,
/// with every runtime as it says.
pub(super) fn run(
    engine: &Engine,
    facts: &[WorkloadFacts],
    book: &RuntimeBook,
    cfg: &ForecastConfig,
    q: f64,
    exact: Option<ExactRuntimes<'_>>,
) -> Run {
    let mut e = engine.clone();
    let now = e.now();
    let horizon = now.saturating_add(cfg.horizon);
    let by_key: HashMap<&WorkloadKey, &WorkloadFacts> = facts.iter().map(|f| (&f.key, f)).collect();
    let mut rt = Runtimes {
        book,
        cfg,
        q,
        learned: HashMap::new(),
        exact,
    };
    let mut out = Run::default();
    let mut ends = Ends::default();
    for f in facts {
        match f.phase {
            FactPhase::Pending => out.targets.push(f.key.clone()),
            FactPhase::Evicting => {
                let _ = e.apply(now, Event::WorkloadEvicted(f.key.clone()));
                out.targets.push(f.key.clone());
            }
            FactPhase::Running { started } => match rt.remaining(f, now - started) {
                Some((r, source)) => ends.push(now.saturating_add(r), &f.key, source),
                None => out.unknown_runtime = true,
            },
        }
    }
    let mut waiting: std::collections::HashSet<&WorkloadKey> = out.targets.iter().collect();
    let pods_ready = engine.config.pods_ready.is_some();
    let mut t = now;
    let mut ended: Option<RuntimeSource> = None;
    let mut same_instant = 0u32;
    loop {
        let decisions = e.schedule(t);
        out.cycles += 1;
        let mut stopped = false;
        for d in decisions {
            match d {
                Decision::Admit { workload, .. } => {
                    if waiting.remove(&workload) {
                        out.started.insert(workload.clone(), (t, ended));
                    }
                    if pods_ready {
                        let _ = e.apply(
                            t,
                            Event::PodsReady {
                                workload: workload.clone(),
                                ready: true,
                            },
                        );
                    }
                    let runtime = by_key.get(&workload).and_then(|f| rt.remaining(f, 0));
                    match runtime {
                        Some((r, source)) => ends.push(t.saturating_add(r), &workload, source),
                        None => {
                            ends.forget(&workload);
                            out.unknown_runtime = true;
                        }
                    }
                }
                Decision::Preempt { victim: key, .. } | Decision::Evict { workload: key, .. } => {
                    ends.forget(&key);
                    let _ = e.apply(t, Event::WorkloadEvicted(key));
                    stopped = true;
                }
                _ => {}
            }
        }
        if waiting.is_empty() {
            break;
        }
        if out.cycles >= cfg.max_cycles {
            out.truncated = true;
            break;
        }
        let next = if stopped {
            Some(t)
        } else {
            [ends.next(), e.next_wakeup().filter(|&w| w > t)]
                .into_iter()
                .flatten()
                .min()
        };
        let Some(next) = next else {
            break;
        };
        // Stops whose victims are requeued at once can cascade at one instant; past this
        // many cycles without time moving the run is not going anywhere useful.
        same_instant = if next == t { same_instant + 1 } else { 0 };
        if next > horizon || same_instant > MAX_CYCLES_PER_INSTANT {
            out.truncated = true;
            break;
        }
        t = next.max(t);
        for (key, source) in ends.take_due(t) {
            let _ = e.apply(t, Event::WorkloadFinished(key));
            ended = Some(ended.map_or(source, |s| s.min(source)));
        }
    }
    out
}

/// When the admitted workloads end; a workload stopped (or admitted again) drops its
/// earlier end through its epoch.
#[derive(Default)]
struct Ends {
    at: BTreeMap<Millis, Vec<(WorkloadKey, u32, RuntimeSource)>>,
    epoch: HashMap<WorkloadKey, u32>,
}

impl Ends {
    fn push(&mut self, at: Millis, key: &WorkloadKey, source: RuntimeSource) {
        let epoch = self.forget(key);
        self.at
            .entry(at)
            .or_default()
            .push((key.clone(), epoch, source));
    }

    /// Invalidates the key's pending end; returns its new epoch.
    fn forget(&mut self, key: &WorkloadKey) -> u32 {
        let e = self.epoch.entry(key.clone()).or_default();
        *e += 1;
        *e
    }

    fn next(&self) -> Option<Millis> {
        self.at.keys().next().copied()
    }

    /// The ends due by `t` that are still current.
    fn take_due(&mut self, t: Millis) -> Vec<(WorkloadKey, RuntimeSource)> {
        let mut due = Vec::new();
        while let Some(entry) = self.at.first_entry() {
            if *entry.key() > t {
                break;
            }
            for (key, epoch, source) in entry.remove() {
                if self.epoch.get(&key) == Some(&epoch) {
                    due.push((key, source));
                }
            }
        }
        due
    }
}
