//! The controller's writers: they carry engine decisions and job reconciliation into the
//! API server, each write preconditioned on the resourceVersion it was computed from,
//! retried from fresh state on conflict, and bounded in concurrency.
//!
//! - `workload`: Workload status (admission, pending, eviction, finish, requeue);
//! - `job`: the job's suspend flag and pod template (flavor node selector, tolerations);
//! - `pod`: the topology ungater's per-pod patches (domain node selector, gate removal);
//! - `queue_status`: ClusterQueue and LocalQueue status, coalesced;
//! - `events`: Kubernetes Events as Kueue emits them.

pub mod events;
pub mod job;
pub mod pod;
pub mod preemption;
pub mod queue_status;
pub mod workload;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use tokio::sync::Semaphore;
use tokio::sync::mpsc::Sender;
use tracing::{debug, warn};

use super::engine_task::Input;
use super::watch::Stores;
use crate::engine::Decision;

/// Why a write did not land.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The object is gone.
    #[error("{kind} {name} no longer exists")]
    Gone { kind: &'static str, name: String },
    /// The API server refused the write for good (or kept refusing it).
    #[error("{kind} {name}: {source}")]
    Api {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// Conflicts or throttling outlasted every attempt.
    #[error("{kind} {name}: gave up after {attempts} attempts (last: {source})")]
    Exhausted {
        kind: &'static str,
        name: String,
        attempts: u32,
        #[source]
        source: kube::Error,
    },
    /// The fresh object could not be decoded.
    #[error(transparent)]
    Decode(#[from] super::translate::TranslateError),
}

/// What one write attempt asks the retry loop to do next.
pub enum Attempt<T> {
    /// Done (written, or nothing to write).
    Done(T),
    /// Re-read the object and try again (a conflict, or the store was stale).
    Refetch,
}

/// The wall clock, injectable so tests can assert exact request bodies.
pub type Clock = Arc<dyn Fn() -> Time + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| Time(k8s_openapi::jiff::Timestamp::now()))
}

/// Shared by every writer: the client, the concurrency bound, the retry policy and the
/// count of writes that landed (`kuota_api_writes_total`, by kind).
pub struct Writer {
    pub client: Client,
    permits: Semaphore,
    attempts: u32,
    backoff: Duration,
    pub clock: Clock,
    metrics: crate::telemetry::Metrics,
}

impl Writer {
    /// A writer with `concurrency` writes in flight at most and `attempts` tries each.
    pub fn new(client: Client, concurrency: usize, attempts: u32) -> Self {
        Self {
            client,
            permits: Semaphore::new(concurrency.max(1)),
            attempts: attempts.max(1),
            backoff: Duration::from_millis(200),
            clock: system_clock(),
            metrics: crate::telemetry::Metrics::default(),
        }
    }

    /// The same writer, counting its writes in `metrics`.
    pub fn with_metrics(mut self, metrics: crate::telemetry::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Counts one write of `kind` that the API server accepted.
    pub fn wrote(&self, kind: &str) {
        self.metrics.record_api_write(kind);
    }

    /// The same writer with another clock and retry pause (tests).
    pub fn with_clock(mut self, clock: Clock, backoff: Duration) -> Self {
        self.clock = clock;
        self.backoff = backoff;
        self
    }

    /// Runs `attempt` until it is done: `fresh` is false on the first try (use the
    /// store) and true after a conflict (read from the API server). A 409 refetches;
    /// 429, 5xx and transport errors back off and refetch; other errors end it.
    pub async fn retry<T, F, Fut>(
        &self,
        kind: &'static str,
        name: &str,
        mut attempt: F,
    ) -> Result<T, WriteError>
    where
        F: FnMut(bool) -> Fut,
        Fut: Future<Output = Result<Attempt<T>, WriteError>>,
    {
        let _permit = self.permits.acquire().await.ok();
        let mut fresh = false;
        let mut last: Option<kube::Error> = None;
        for n in 0..self.attempts {
            match attempt(fresh).await {
                Ok(Attempt::Done(t)) => return Ok(t),
                Ok(Attempt::Refetch) => fresh = true,
                Err(WriteError::Api { source, .. }) if retriable(&source) => {
                    debug!(kind, name, error = %source, attempt = n + 1, "write failed; retrying");
                    if !is_conflict(&source) {
                        tokio::time::sleep(self.backoff * 2u32.saturating_pow(n)).await;
                    }
                    fresh = true;
                    last = Some(source);
                }
                Err(e) => return Err(e),
            }
        }
        let source = last.unwrap_or_else(|| {
            kube::Error::Api(
                kube::core::Status::failure("the object kept changing under the write", "Conflict")
                    .with_code(409)
                    .boxed(),
            )
        });
        warn!(kind, name, error = %source, "write failed for good");
        Err(WriteError::Exhausted {
            kind,
            name: name.to_string(),
            attempts: self.attempts,
            source,
        })
    }
}

/// Whether an API error is worth another attempt from fresh state.
pub fn retriable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Whether an API error says the object does not exist.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// What the engine task hands decisions to.
#[derive(Clone)]
pub struct Actuators {
    pub writer: Arc<Writer>,
    pub recorder: events::Recorder,
    pub stores: Stores,
}

impl Actuators {
    /// Carries out one cycle's decisions, each as its own task (bounded by the writer's
    /// permits). A failed admission goes back to the engine as `AdmissionFailed`.
    pub fn dispatch(&self, decisions: Vec<Decision>, engine: &Sender<Input>) {
        for decision in decisions {
            let this = self.clone();
            let engine = engine.clone();
            tokio::spawn(async move { this.carry_out(decision, engine).await });
        }
    }

    async fn carry_out(&self, decision: Decision, engine: Sender<Input>) {
        let w = workload::WorkloadWriter {
            writer: &self.writer,
            stores: &self.stores,
            recorder: &self.recorder,
        };
        match decision {
            Decision::Admit {
                workload,
                admission,
            } => {
                if let Err(e) = w.admit(&workload, &admission).await {
                    warn!(workload = %workload, error = %e, "admission did not land; releasing its quota");
                    let _ = engine.send(Input::AdmissionFailed(workload)).await;
                }
            }
            Decision::Pending {
                workload,
                reason,
                message,
            } => {
                if let Err(e) = w.pending(&workload, reason.as_str(), &message).await {
                    warn!(workload = %workload, error = %e, "pending status not written");
                }
            }
            Decision::Preempt {
                victim,
                preemptor,
                reason,
                message: _,
            } => {
                // Kueue's wording, with the preemptor's UIDs and both queues' paths, in
                // place of the engine's (which knows no object metadata).
                let parties = preemption::parties(&self.stores, &victim, &preemptor);
                let message = preemption::condition_message(&parties, reason);
                let note = preemption::event_message(&parties, reason);
                if let Err(e) = w.preempt(&victim, reason.as_str(), &message, &note).await {
                    warn!(workload = %victim, preemptor = %preemptor, error = %e, "preemption not written");
                }
            }
            Decision::Evict {
                workload,
                reason,
                message,
            } => {
                if let Err(e) = w.evict(&workload, &reason, &message).await {
                    warn!(workload = %workload, error = %e, "eviction not written");
                }
            }
        }
    }
}
