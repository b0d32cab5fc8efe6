//! kuota: a Kueue-compatible admission, quota and gang-placement engine.
//!
//! The crate is a pure, deterministic engine core (`engine`) wrapped by thin
//! shells: the simulator (`sim`), the admission webhook (`webhook`), the queue
//! controller (`controller`) and Kueue's visibility API (`visibility`), which `serve` wires
//! into `kuota serve`. Imports point down
//! the layering docs/architecture.md declares (checked by tests/layering.rs).

pub mod api;
pub mod cli;
pub mod config;
pub mod controller;
pub mod crds;
pub mod duration;
pub mod engine;
pub mod forecast;
pub mod integrations;
pub mod lease;
pub mod memory;
pub mod names;
pub mod placement;
pub mod policy;
pub mod serve;
pub mod sim;
pub mod telemetry;
pub mod visibility;
pub mod webhook;
