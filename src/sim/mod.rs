//! The simulator shell: drives the pure engine on a virtual clock.
//!
//! A [`Scenario`] (Kueue manifests + a generator in the shape of Kueue's
//! scheduler performance test) is resolved into a [`Plan`] (engine events and
//! workloads with arrival times and runtimes), which a [`Simulation`] runs as
//! a discrete-event loop, producing a [`Report`].
//!
//! Determinism: the event queue breaks ties by insertion order, every map
//! that reaches an output is ordered, and randomness comes from the seed. The
//! only measured (non-virtual) numbers are in [`report::Timing`].

pub mod chart;
pub mod clock;
pub mod generator;
pub mod nodes;
pub mod report;
mod rng;
pub mod run;
pub mod scenario;
pub mod trace;

pub use generator::{GeneratorConfig, SimWorkload};
pub use report::Report;
pub use run::{SIM_EPOCH_MS, SimConfig, Simulation};
pub use scenario::{Plan, Scenario, SourceFile};

/// Why a simulation could not run. Messages name the file (and object) at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{source_name}: {message}")]
    Manifest {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: {source}")]
    Generator {
        source_name: String,
        // Boxed: the variant would otherwise make every `Result<_, SimError>` large.
        #[source]
        source: Box<generator::GeneratorError>,
    },
    #[error("{source_name}: {message}")]
    Scenario {
        source_name: String,
        message: String,
    },
    #[error("the engine rejected {what}: {message}")]
    Engine { what: String, message: String },
}

/// Plans and runs a scenario. The plan is used once, so the run takes the
/// workload objects from it rather than cloning them (half the memory).
pub fn simulate(scenario: &Scenario, cfg: SimConfig) -> Result<Report, SimError> {
    let mut plan = scenario.plan(cfg.seed)?;
    let objects = plan.take_objects();
    Simulation::with_objects(&plan, cfg, objects).run()
}
