//! The engine calls of a shell, observed: the one place where the simulator and the
//! controller apply an event or run a cycle, so both feed the [`Observer`] the same way
//! and report the same numbers for the same inputs.

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
    let Some(observer) = observer else {
        let start = Instant::now();
        let result = engine.apply(now, event);
        return (result, start.elapsed());
    };
    let new_workload = match &event {
        Event::WorkloadUpserted(wl) => {
            let key = WorkloadKey::new(
                wl.metadata.namespace.as_deref().unwrap_or("default"),
                wl.metadata.name.as_deref().unwrap_or_default(),
            );
            (!observer.tracks(&key)).then_some(key)
        }
        _ => None,
    };
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
    if let Some(observer) = observer {
        observer.observe_cycle(now, &decisions, took, engine);
    }
    (decisions, took)
}

#[cfg(test)]
mod tests;
