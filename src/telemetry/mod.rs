//! Observability: Kueue's metrics (and kuota's own) fed from the engine's events and
//! decisions, their `/metrics` exposition, and tracing (logs or OTLP spans).
//!
//! The engine stays pure: shells (the simulator, the controller) hand what they give
//! the engine and what it returns to an [`Observer`], which records into [`Metrics`].
//! See docs/observability.md.

pub mod forbidden;
pub mod labels;
pub mod metrics;
pub mod observed;
pub mod observer;
mod state;

pub use labels::ReplicaRole;
pub use metrics::{CONTENT_TYPE, CheckAdmission, Metrics, StateGauges};
pub use observer::Observer;
pub mod http;
pub mod trace;
