//! Start-time forecasts: a copy of the engine, run forward on virtual time with the
//! runtimes the forecaster knows, says when each pending workload would be admitted.
//!
//! Pure, like the engine: the shells pass in the engine and the learned runtimes and time
//! the call themselves. The forward run is the production engine's own cycle (quota,
//! cohorts, borrowing, preemption, fair sharing, topology), fed the ends of the admitted
//! workloads it expects and nothing else: arrivals it cannot know are not invented.
//!
//! **Runtimes.** A workload's runtime in the forward run is, in this order:
//! 1. learned (`runtimes`): a quantile of the last runs of its LocalQueue and priority
//!    (or of its LocalQueue when that priority has too few), capped by the workload's own
//!    bound (`maximumExecutionTimeSeconds` left, or its pods' `activeDeadlineSeconds`),
//!    since nothing runs past its bound;
//! 2. its bound alone, when nothing is learned (users overstate bounds, so this leans late);
//! 3. the configured default runtime.
//!
//! Without any of them its runtime is unknown: it never ends in the forward run, and a
//! workload that needed its quota gets no estimate ([`Unknown::NoRuntimeKnowledge`]).
//! An admitted workload's remaining time is the quantile of the learned runtimes longer than
//! the time it has already run, less that time.
//!
//! **Range.** The forward run is made three times, with every runtime at the low, middle and
//! high quantile of its distribution ([`ForecastConfig::quantiles`], p10/p50/p90 by
//! default). Start times grow with runtimes, so the three starts order the same way; they
//! are reported as the estimate's `low`, `p50` and `high`.

mod forward;
pub mod runtimes;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::engine::{Engine, Millis, WorkloadKey};
pub use runtimes::RuntimeBook;

/// The knobs of a forecast.
#[derive(Clone, Debug, PartialEq)]
pub struct ForecastConfig {
    /// How far ahead the forward run looks; a start later than this is not estimated.
    pub horizon: Millis,
    /// At most this many engine cycles per forward run (each run is one of three).
    pub max_cycles: u64,
    /// The runtime of a workload nothing is known about; `None`: unknown.
    pub default_runtime: Option<Millis>,
    /// Learned runtimes are used for a (LocalQueue, priority) once it has this many.
    pub min_samples: usize,
    /// The runtime quantiles of the low, middle and high forward runs.
    pub quantiles: [f64; 3],
}

/// One week: further than anyone plans a GPU job's start.
pub const DEFAULT_HORIZON: Millis = 7 * 24 * 3_600_000;
/// Enough for every queue to turn over many times at 1,000 ClusterQueues.
pub const DEFAULT_MAX_CYCLES: u64 = 20_000;

impl Default for ForecastConfig {
    fn default() -> Self {
        Self {
            horizon: DEFAULT_HORIZON,
            max_cycles: DEFAULT_MAX_CYCLES,
            default_runtime: None,
            min_samples: 3,
            quantiles: [0.1, 0.5, 0.9],
        }
    }
}

/// Where a runtime in the forward run came from, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuntimeSource {
    /// [`ForecastConfig::default_runtime`].
    Default,
    /// The workload's own bound: maximumExecutionTimeSeconds or activeDeadlineSeconds.
    JobBound,
    /// Runs learned from finished Workloads of its LocalQueue.
    Learned,
}

impl RuntimeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::JobBound => "job-bound",
            Self::Learned => "learned",
        }
    }
}

/// Why a workload has no estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unknown {
    /// It waits for a workload whose runtime nothing tells (no bound, no learned runs,
    /// no default).
    NoRuntimeKnowledge,
    /// It would not start within the horizon or the cycle budget.
    BeyondHorizon,
    /// Once everything known has ended it is still not admitted (it exceeds its
    /// queue's quota, its queue is stopped or missing, or it is inactive).
    NotAdmissible,
}

impl Unknown {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoRuntimeKnowledge => "no runtime knowledge",
            Self::BeyondHorizon => "beyond the forecast horizon",
            Self::NotAdmissible => "not admissible as things stand",
        }
    }
}

/// One pending workload's estimated admission time (engine time, ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Admission with every runtime at the low quantile.
    pub low: Option<Millis>,
    /// Admission with every runtime at the middle quantile: the point estimate.
    pub p50: Option<Millis>,
    /// Admission with every runtime at the high quantile.
    pub high: Option<Millis>,
    /// The weakest runtime source among the workloads that ended before its middle-run
    /// admission; `None` when it is admitted without waiting for anyone to end.
    pub source: Option<RuntimeSource>,
    /// Why `p50` is `None`.
    pub unknown: Option<Unknown>,
}

/// A forecast: estimates for every pending workload, and what it cost.
#[derive(Clone, Debug, Default)]
pub struct Forecast {
    /// When it was made (the engine's clock).
    pub at: Millis,
    pub estimates: BTreeMap<WorkloadKey, Estimate>,
    /// Engine cycles run over the three forward runs.
    pub cycles: u64,
    /// Whether a forward run stopped at the horizon or the cycle budget.
    pub truncated: bool,
}

/// Forecasts every pending (and evicting) workload of `engine` from its clock on.
pub fn forecast(engine: &Engine, book: &RuntimeBook, cfg: &ForecastConfig) -> Forecast {
    let facts = engine.workload_facts();
    let runs: Vec<forward::Run> = cfg
        .quantiles
        .iter()
        .map(|&q| forward::run(engine, &facts, book, cfg, q, None))
        .collect();
    let mut out = Forecast {
        at: engine.now(),
        cycles: runs.iter().map(|r| r.cycles).sum(),
        truncated: runs.iter().any(|r| r.truncated),
        ..Forecast::default()
    };
    let [low, mid, high] = [&runs[0], &runs[1], &runs[2]];
    for key in &mid.targets {
        let started = mid.started.get(key);
        out.estimates.insert(
            key.clone(),
            Estimate {
                low: low.started.get(key).map(|s| s.0),
                p50: started.map(|s| s.0),
                high: high.started.get(key).map(|s| s.0),
                source: started.and_then(|s| s.1),
                unknown: started.is_none().then(|| why_not(engine, key, mid)),
            },
        );
    }
    out
}

/// Why a workload the middle run did not admit has no estimate: a pending reason that no
/// workload's end can lift comes first.
fn why_not(engine: &Engine, key: &WorkloadKey, run: &forward::Run) -> Unknown {
    use crate::engine::{PendingReason as R, WorkloadState};
    match engine.workload_state(key) {
        Some(WorkloadState::Pending {
            reason:
                R::ExceedsMaxQuota
                | R::NoMatchingFlavor
                | R::Inadmissible
                | R::Misconfigured
                | R::Stopped
                | R::Inactive,
            ..
        }) => Unknown::NotAdmissible,
        _ => run.why_not(),
    }
}

/// One forward run with every runtime at quantile `q`: each pending (and evicting)
/// workload's admission time, `None` where the run did not admit it. With an empty book and
/// no default this is the classic backfill estimate from stated time limits alone.
pub fn forecast_at(
    engine: &Engine,
    book: &RuntimeBook,
    cfg: &ForecastConfig,
    q: f64,
) -> BTreeMap<WorkloadKey, Option<Millis>> {
    let facts = engine.workload_facts();
    starts(&forward::run(engine, &facts, book, cfg, q, None))
}

/// One forward run in which every workload runs exactly as long as `runtime_of` says (its
/// whole runtime; `None`: unknown). No cluster knows this: it is the accuracy replay's
/// oracle, which shows how much of an estimate's error comes from runtimes and how much
/// from the arrivals that no forward run can know.
pub fn forecast_exact(
    engine: &Engine,
    runtime_of: &dyn Fn(&WorkloadKey) -> Option<Millis>,
    cfg: &ForecastConfig,
) -> BTreeMap<WorkloadKey, Option<Millis>> {
    let facts = engine.workload_facts();
    let book = RuntimeBook::default();
    starts(&forward::run(
        engine,
        &facts,
        &book,
        cfg,
        0.5,
        Some(runtime_of),
    ))
}

fn starts(run: &forward::Run) -> BTreeMap<WorkloadKey, Option<Millis>> {
    run.targets
        .iter()
        .map(|k| (k.clone(), run.started.get(k).map(|s| s.0)))
        .collect()
}
