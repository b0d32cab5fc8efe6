//! kuota: a Kueue-compatible admission, quota and gang-placement engine.
//!
//! The crate is a pure, deterministic engine core (`engine`) wrapped by thin
//! shells (`sim` today; webhook and controller later). See docs/architecture.md.

pub mod api;
pub mod config;
pub mod controller;
pub mod crds;
pub mod duration;
pub mod engine;
pub mod integrations;
pub mod lease;
pub mod memory;
pub mod names;
pub mod placement;
pub mod policy;
pub mod serve;
pub mod sim;
pub mod telemetry;
pub mod webhook;
