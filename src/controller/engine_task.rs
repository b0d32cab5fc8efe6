//! The one task that owns the [`Engine`]: it applies inputs as they arrive, runs one
//! scheduling cycle per batch of inputs (and when the engine asks for a wake-up), hands
//! the decisions to the actuators and publishes queue status at most once per interval.
//! Events and cycles go through [`crate::telemetry::observed`], as in the simulator, so
//! `kuota serve` reports Kueue's workload and quota metrics from the same feed.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc::{Receiver, Sender};
use tracing::{info, warn};

use super::ControllerError;
use super::actuate::Actuators;
use super::actuate::queue_status::QueueStatus;
use super::watch::Kind;
use crate::engine::{Engine, EngineConfig, EngineError, Event, Millis, WorkloadKey};
use crate::telemetry::{Metrics, Observer, observed};

/// How often the state gauges (pending, usage, quota) are rebuilt at most: a busy
/// cluster runs far more cycles than anyone scrapes.
const GAUGE_REFRESH: Duration = Duration::from_millis(250);

/// What the engine task receives.
#[derive(Debug)]
pub enum Input {
    /// A cluster change (boxed: a Workload or Node event is large, and most inputs
    /// that queue up in the channel are small).
    Event(Box<Event>),
    /// A watch delivered its first complete list.
    Synced(Kind),
    /// An admission whose status write did not land: release what was granted.
    AdmissionFailed(WorkloadKey),
}

impl Input {
    /// A cluster change as an input.
    pub fn event(event: Event) -> Self {
        Self::Event(Box::new(event))
    }
}

/// The engine's owner.
pub struct EngineTask {
    engine: Engine,
    observer: Observer,
    rx: Receiver<Input>,
    tx: Sender<Input>,
    unsynced: BTreeSet<Kind>,
    actuators: Actuators,
    queue_status: QueueStatus,
    status_interval: Duration,
}

/// Milliseconds since the Unix epoch on the wall clock.
pub fn now_millis() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

impl EngineTask {
    /// A task that schedules once every kind in `kinds` has been listed, recording
    /// what it does into `metrics`.
    pub fn new(
        config: EngineConfig,
        metrics: Metrics,
        rx: Receiver<Input>,
        tx: Sender<Input>,
        kinds: &[Kind],
        actuators: Actuators,
        status_interval: Duration,
    ) -> Self {
        Self {
            engine: Engine::new(config),
            observer: Observer::new(metrics, GAUGE_REFRESH),
            rx,
            tx,
            unsynced: kinds.iter().copied().collect(),
            queue_status: QueueStatus::new(actuators.writer.clone(), actuators.stores.clone()),
            actuators,
            status_interval,
        }
    }

    /// Runs until `shutdown` resolves or every input sender is gone.
    pub async fn run(
        mut self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ControllerError> {
        tokio::pin!(shutdown);
        let mut tick = tokio::time::interval(self.status_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut cycle = false;
            let wake = self.wakeup_in();
            tokio::select! {
                _ = &mut shutdown => break,
                input = self.rx.recv() => {
                    let Some(input) = input else { break };
                    self.apply(input);
                    // Everything already queued joins this cycle.
                    while let Ok(input) = self.rx.try_recv() {
                        self.apply(input);
                    }
                    cycle = true;
                }
                _ = tokio::time::sleep(wake.unwrap_or(Duration::MAX)), if wake.is_some() => cycle = true,
                _ = tick.tick() => {
                    if self.unsynced.is_empty() {
                        self.queue_status.publish(&self.engine);
                        // Gauges skipped by a burst of cycles catch up here.
                        self.observer.maybe_refresh(&self.engine);
                    }
                }
            }
            if cycle && self.unsynced.is_empty() {
                let (decisions, _) =
                    observed::schedule(&mut self.engine, Some(&mut self.observer), now_millis());
                self.actuators.dispatch(decisions, &self.tx);
            }
        }
        info!("engine task stopped");
        Ok(())
    }

    /// How long until the engine's next requested wake-up.
    fn wakeup_in(&self) -> Option<Duration> {
        let at = self.engine.next_wakeup()?;
        Some(Duration::from_millis(
            at.saturating_sub(now_millis()).max(1) as u64,
        ))
    }

    fn apply(&mut self, input: Input) {
        match input {
            Input::Event(event) => {
                let key = match event.as_ref() {
                    Event::WorkloadUpserted(wl) => Some(super::translate::workload_key(wl)),
                    _ => None,
                };
                let (result, _) = observed::apply(
                    &mut self.engine,
                    Some(&mut self.observer),
                    now_millis(),
                    *event,
                );
                if let Err(e) = result {
                    self.rejected(e, key);
                }
            }
            Input::Synced(kind) => {
                self.unsynced.remove(&kind);
                if self.unsynced.is_empty() {
                    info!("every watch has listed: scheduling starts");
                }
            }
            Input::AdmissionFailed(key) => {
                // The engine holds the admission it decided: release it and queue the
                // workload again (the status write never landed).
                let (result, _) = observed::apply(
                    &mut self.engine,
                    Some(&mut self.observer),
                    now_millis(),
                    Event::AdmissionFailed(key),
                );
                if let Err(e) = result {
                    warn!(error = %e, "releasing a failed admission");
                }
            }
        }
    }

    /// An object the engine cannot use: logged, and reported on the Workload.
    fn rejected(&self, e: EngineError, workload: Option<WorkloadKey>) {
        warn!(error = %e, "the engine rejected an object");
        if let Some(key) = workload {
            self.actuators
                .recorder
                .workload_warning(&key, "InvalidWorkload", &e.to_string());
        }
    }
}
