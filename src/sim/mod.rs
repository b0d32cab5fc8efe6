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

pub mod calibration;
pub mod chart;
pub mod clock;
pub mod eta;
pub mod generator;
pub mod nodes;
pub mod provisioning;
pub mod repeats;
pub mod report;
mod rng;
pub mod run;
pub mod scenario;
pub mod trace;

pub use generator::{GeneratorConfig, SimWorkload};
pub use report::Report;
pub use run::{SIM_EPOCH_MS, SimConfig, Simulation};
pub use scenario::{Plan, Scenario, SourceFile};

use std::sync::Arc;

/// Why a simulation could not run. Messages name the file (and object) at fault,
/// and an underlying error stays attached as the source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SimError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        // Shared: `io::Error` is not `Clone`, and a report may hold the error twice.
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("{source_name}: {source}")]
    Manifest {
        source_name: String,
        #[source]
        source: Box<crate::api::manifest::LoadError>,
    },
    #[error("{source_name}: {source}")]
    Generator {
        source_name: String,
        // Boxed: the variant would otherwise make every `Result<_, SimError>` large.
        #[source]
        source: Box<generator::GeneratorError>,
    },
    /// A rule of the scenario format is broken; nothing underneath failed.
    #[error("{source_name}: {message}")]
    Scenario {
        source_name: String,
        message: String,
    },
    /// One field (`at`) of a file could not be read because of `source`.
    #[error("{source_name}: {at}: {source}")]
    Field {
        source_name: String,
        at: String,
        // Boxed, like the other large sources: every `Result<_, SimError>` stays small.
        #[source]
        source: Box<Cause>,
    },
    /// A line of a trace file (`location` is `file:line`) cannot be read.
    #[error("{location}: {source}")]
    Trace {
        location: String,
        #[source]
        source: Arc<trace::TraceError>,
    },
    #[error("the engine rejected {what}: {source}")]
    Engine {
        what: String,
        #[source]
        source: Box<crate::engine::EngineError>,
    },
}

/// The error underneath a [`SimError::Field`]. Errors that are not `Clone` are shared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Cause {
    #[error(transparent)]
    Quantity(#[from] crate::api::quantity::QuantityError),
    #[error(transparent)]
    Integration(#[from] crate::integrations::IntegrationError),
    #[error(transparent)]
    Topology(#[from] crate::placement::TopologyRequestError),
    #[error(transparent)]
    Placement(#[from] crate::placement::PlacementError),
    #[error(transparent)]
    Yaml(#[from] Arc<serde_norway::Error>),
    #[error(transparent)]
    Json(#[from] Arc<serde_json::Error>),
    #[error(transparent)]
    Number(#[from] std::num::ParseIntError),
    #[error("too large")]
    TooLarge(#[from] std::num::TryFromIntError),
}

impl SimError {
    /// The error underneath a field that could not be read.
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            Self::Field { source, .. } => Some(source),
            _ => None,
        }
    }

    /// A [`SimError::Field`] of file `source_name`.
    pub(crate) fn field(
        source_name: impl Into<String>,
        at: impl Into<String>,
        source: impl Into<Cause>,
    ) -> Self {
        Self::Field {
            source_name: source_name.into(),
            at: at.into(),
            source: Box::new(source.into()),
        }
    }
}

/// Plans and runs a scenario. The plan is used once, so the run takes the
/// workload objects from it rather than cloning them (half the memory).
pub fn simulate(scenario: &Scenario, cfg: SimConfig) -> Result<Report, SimError> {
    let mut plan = scenario.plan(cfg.seed)?;
    if let Some(c) = &cfg.calibration {
        c.check_shape(plan.cluster_queues.len())?;
    }
    let objects = plan.take_objects();
    Simulation::with_objects(&plan, cfg, objects).run()
}
