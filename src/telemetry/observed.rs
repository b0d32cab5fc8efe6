//! The engine calls of a shell, observed: the one place where the simulator and the
//! controller apply an event or run a cycle, so both feed the [`Observer`] the same way,
//! report the same numbers for the same inputs and log the same lines ([`DECISION_LOG`]).

use std::time::{Duration, Instant};

use crate::engine::{Decision, Engine, EngineError, Event, Millis, WorkloadKey};

use super::Observer;

/// Applies `event` to the engine and shows it to the observer (if any). Returns the
/// engine's verdict and the wall time of the engine call alone.
///
/// A Workload the engine rejects is forgotten by the observer again, so an object the
/// engine never queued is not counted as pending forever.
pub fn apply(
    engine: &mut Engine,
    observer: Option<&mut Observer>,
    now: Millis,
    event: Event,
) -> (Result<(), EngineError>, Duration) {
    let arriving = log_input(engine, now, &event);
    let (result, took) = apply_observed(engine, observer, now, event);
    if let (Ok(()), Some(key)) = (&result, arriving) {
        tracing::debug!(target: DECISION_LOG, now_ms = now, workload = %key, "arrived");
    }
    (result, took)
}

fn apply_observed(
    engine: &mut Engine,
    observer: Option<&mut Observer>,
    now: Millis,
    event: Event,
) -> (Result<(), EngineError>, Duration) {
    let Some(observer) = observer else {
        let start = Instant::now();
        let result = engine.apply(now, event);
        return (result, start.elapsed());
    };
    let new_workload = upserted_key(&event).filter(|key| !observer.tracks(key));
    observer.observe_event(now, &event);
    let start = Instant::now();
    let result = engine.apply(now, event);
    let took = start.elapsed();
    if let (Err(_), Some(key)) = (&result, new_workload) {
        observer.observe_event(now, &Event::WorkloadDeleted(key));
    }
    (result, took)
}

/// Runs one scheduling cycle in a `scheduling_cycle` span, records its decisions as span
/// events and in the observer (if any), which also refreshes its gauges when due.
/// Returns the decisions and the wall time of the engine call alone.
pub fn schedule(
    engine: &mut Engine,
    observer: Option<&mut Observer>,
    now: Millis,
) -> (Vec<Decision>, Duration) {
    let span = super::trace::cycle_span(now);
    let _entered = span.enter();
    let start = Instant::now();
    let decisions = engine.schedule(now);
    let took = start.elapsed();
    super::trace::decision_events(&decisions);
    log_decisions(now, &decisions);
    if let Some(observer) = observer {
        observer.observe_cycle(now, &decisions, took, engine);
    }
    (decisions, took)
}

/// The log target of the engine's inputs and decisions about each workload, at debug
/// level (`RUST_LOG=kuota_engine=debug`): arrived, admit, preempt, finishing, finished,
/// evicted, deleted, each with the engine's clock (`now_ms`), and at trace level each
/// pending reason. The same lines from a cluster and from the simulator's replay of its
/// trace show where the two part.
pub const DECISION_LOG: &str = "kuota_engine";

fn upserted_key(event: &Event) -> Option<WorkloadKey> {
    match event {
        Event::WorkloadUpserted(wl) => Some(WorkloadKey::new(
            wl.metadata.namespace.as_deref().unwrap_or("default"),
            wl.metadata.name.as_deref().unwrap_or_default(),
        )),
        _ => None,
    }
}

/// Logs an input about a workload; returns the key of a workload the engine does not
/// know yet, logged as arrived once the engine has taken it.
fn log_input(engine: &Engine, now: Millis, event: &Event) -> Option<WorkloadKey> {
    if !tracing::enabled!(target: DECISION_LOG, tracing::Level::DEBUG) {
        return None;
    }
    let (what, key) = match event {
        Event::WorkloadUpserted(_) => {
            return upserted_key(event).filter(|key| !engine.has_workload(key));
        }
        Event::WorkloadFinished(k) => ("finished", k),
        Event::WorkloadFinishing(k) => ("finishing", k),
        Event::WorkloadEvicted(k) => ("evicted", k),
        Event::WorkloadDeleted(k) => ("deleted", k),
        _ => return None,
    };
    tracing::debug!(target: DECISION_LOG, now_ms = now, workload = %key, "{what}");
    None
}

fn log_decisions(now: Millis, decisions: &[Decision]) {
    if !tracing::enabled!(target: DECISION_LOG, tracing::Level::DEBUG) {
        return;
    }
    for d in decisions {
        match d {
            Decision::Admit { workload, .. } => {
                tracing::debug!(target: DECISION_LOG, now_ms = now, %workload, "admit");
            }
            Decision::Preempt {
                victim,
                preemptor,
                reason,
                ..
            } => {
                tracing::debug!(target: DECISION_LOG, now_ms = now, workload = %victim,
                    %preemptor, ?reason, "preempt");
            }
            Decision::Pending {
                workload,
                reason,
                message,
            } => {
                tracing::trace!(target: DECISION_LOG, now_ms = now, %workload, ?reason,
                    %message, "pending");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
