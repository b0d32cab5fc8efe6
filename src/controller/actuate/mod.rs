//! The controller's writers: they carry engine decisions and job reconciliation into the
//! API server, each write preconditioned on what it was computed from (a Workload's or
//! pod's resourceVersion; a job's uid and the fields the patch changes, since its operator
//! writes its status all along), retried from fresh state when that moved, and bounded in
//! concurrency.
//!
//! - `workload`: Workload status (admission, pending, eviction, finish, requeue);
//! - `lane`: coalescing write lanes (the newest value per key, a few workers of their own);
//! - `pending`: pending statuses, coalesced per Workload in a lane of their own;
//! - `job`: the job's suspend flag and pod template (flavor node selector, tolerations);
//! - `pod`: the topology ungater's per-pod patches (domain node selector, gate removal);
//! - `queue_status`: ClusterQueue and LocalQueue status, coalesced in a lane of its own;
//! - `events`: Kubernetes Events as Kueue emits them;
//! - `finalizer`: Kueue's `resource-in-use` finalizer on ClusterQueues and ResourceFlavors.

pub mod condition;
pub mod events;
pub mod finalizer;
pub mod job;
pub mod lane;
pub mod pending;
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

use super::watch::Input;
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
    /// Where this writer's writes (and what they complete) are recorded.
    pub fn metrics(&self) -> &crate::telemetry::Metrics {
        &self.metrics
    }

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

    /// A coalescing [`lane::Lane`] of `workers` workers whose `write`s go through a
    /// sibling of this writer with as many permits: the lane's writes never wait for this
    /// writer's permits, nor hold them.
    pub fn lane<K, V, F, Fut>(&self, workers: usize, write: F) -> lane::Lane<K, V>
    where
        K: Clone + Eq + std::hash::Hash + Send + 'static,
        V: Send + 'static,
        F: Fn(Arc<Writer>, K, V) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let writer = Arc::new(self.sibling(workers));
        lane::Lane::start(workers, move |key, value| write(writer.clone(), key, value))
    }

    /// A writer of `concurrency` permits of its own, sharing this one's client, retry
    /// policy, clock and write counts.
    fn sibling(&self, concurrency: usize) -> Self {
        Self {
            client: self.client.clone(),
            permits: Semaphore::new(concurrency.max(1)),
            attempts: self.attempts,
            backoff: self.backoff,
            clock: self.clock.clone(),
            metrics: self.metrics.clone(),
        }
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

/// Whether the API server refused a write as invalid (422), as opposed to a conflict or
/// an outage that a retry may get past.
pub fn is_invalid(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422)
}

/// Whether the API server could not apply a JSON patch to the object as it stands (a
/// `test` operation failed, or a path is gone): the object moved since the patch was
/// computed, so it is computed again from fresh state. The API server answers 422 then
/// too, with its generic message rather than the object's validation errors.
pub fn is_stale_patch(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422
        && s.message == "the server rejected our request due to an error in our request")
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
    pending: Arc<pending::PendingLane>,
}

impl Actuators {
    /// Actuators writing through `writer`, with pending statuses in a lane of their own
    /// (its workers run on the current Tokio runtime until the last clone is dropped).
    pub fn new(writer: Arc<Writer>, recorder: events::Recorder, stores: Stores) -> Self {
        let pending = Arc::new(pending::PendingLane::start(
            &writer,
            recorder.clone(),
            stores.clone(),
            pending::PENDING_WORKERS,
        ));
        Self {
            writer,
            recorder,
            stores,
            pending,
        }
    }

    /// Carries out one cycle's decisions, each as its own task (bounded by the writer's
    /// permits), except pending statuses, which join the pending lane. A failed admission
    /// goes back to the engine as `AdmissionFailed`.
    pub fn dispatch(&self, decisions: Vec<Decision>, engine: &Sender<Input>) {
        for decision in decisions {
            match &decision {
                Decision::Pending {
                    workload,
                    reason,
                    message,
                } => {
                    self.pending
                        .offer(workload.clone(), reason.as_str(), message);
                    continue;
                }
                Decision::Admit { workload, .. } | Decision::Evict { workload, .. } => {
                    self.pending.cancel(workload)
                }
                Decision::RequeueState { .. } => {}
                Decision::Preempt { victim, .. } => self.pending.cancel(victim),
            }
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
                checks,
            } => {
                if let Err(e) = w.admit(&workload, &admission, &checks).await {
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
            Decision::RequeueState {
                workload,
                count,
                requeue_at,
            } => {
                let build = |wl: &crate::api::Workload, now: &Time| {
                    crate::controller::pods_ready::requeue_state_patch(wl, count, requeue_at, now)
                };
                if let Err(e) = w.write(&workload, build).await {
                    warn!(workload = %workload, error = %e, "requeue state not written");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! An API server under load answers 429 or 500: these pin the exact requests of an
    //! admission whose status write is throttled or fails (a mocked API server), so that a
    //! retry lands the same admission and the quota is never handed back to the engine.

    use std::sync::Arc;
    use std::time::Duration;

    use http::{Method, Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;
    use crate::controller::watch;
    use crate::engine::WorkloadKey;

    fn workload() -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-a-1b2c3", "namespace": "team", "resourceVersion": "41"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                     "template": {"spec": {"containers": []}}}]},
            "status": {}
        })
    }

    fn reply(code: u16, body: Value) -> Response<Body> {
        Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(&body).expect("json")))
            .expect("response")
    }

    fn failure(code: u16, reason: &str) -> Response<Body> {
        reply(
            code,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": reason, "reason": reason, "code": code}),
        )
    }

    /// Answers the requests in order with `replies`; returns (method, URI) of each.
    async fn serve(
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
        replies: Vec<Response<Body>>,
    ) -> Vec<(Method, String)> {
        let mut seen = Vec::new();
        for r in replies {
            let (req, send) = handle.next_request().await.expect("a request");
            seen.push((req.method().clone(), req.uri().to_string()));
            send.send_response(r);
        }
        seen
    }

    fn actuators(client: kube::Client, attempts: u32, backoff: Duration) -> Actuators {
        let clock: Clock = Arc::new(|| Time("2026-11-24T00:00:00Z".parse().expect("time")));
        let (stores, _writers) = watch::stores();
        Actuators::new(
            Arc::new(Writer::new(client, 1, attempts).with_clock(clock, backoff)),
            events::Recorder::disabled(),
            stores,
        )
    }

    fn admit() -> Decision {
        let admission = serde_json::from_value(json!({
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"},
                                   "resourceUsage": {"cpu": "1"}, "count": 1}],
        }))
        .expect("admission");
        Decision::Admit {
            workload: WorkloadKey::new("team", "job-a-1b2c3"),
            admission: Arc::new(admission),
            checks: Vec::new(),
        }
    }

    const GET: &str = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1b2c3";
    const PATCH: &str = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1b2c3/status?&fieldManager=kuota";

    /// 429 then 500: each is retried from a fresh read after a growing pause, and when the
    /// attempts run out the admission goes back to the engine (`AdmissionFailed`), which
    /// releases the quota it granted.
    #[tokio::test(start_paused = true)]
    async fn an_admission_refused_with_429_then_500_is_retried_then_handed_back() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let a = actuators(
            kube::Client::new(service, "default"),
            3,
            Duration::from_millis(200),
        );
        let server = tokio::spawn(serve(
            handle,
            vec![
                reply(200, workload()),
                failure(429, "TooManyRequests"),
                reply(200, workload()),
                failure(500, "InternalError"),
            ],
        ));
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let started = tokio::time::Instant::now();
        a.carry_out(admit(), tx).await;
        let requests = server.await.expect("mock server");
        assert_eq!(
            requests,
            [
                (Method::GET, GET.to_string()),
                (Method::PATCH, PATCH.to_string()),
                (Method::GET, GET.to_string()),
                (Method::PATCH, PATCH.to_string()),
            ]
        );
        // Backoff doubles per attempt: 400 ms after the 429, 800 ms after the 500
        // (virtual time: the clock is paused).
        assert!(started.elapsed() >= Duration::from_millis(1200));
        match rx.try_recv() {
            Ok(Input::AdmissionFailed(key)) => assert_eq!(key.to_string(), "team/job-a-1b2c3"),
            other => panic!("expected AdmissionFailed, got {other:?}"),
        }
    }

    /// One transient refusal (`code`, `reason`) followed by success: the admission lands
    /// on the retry, from a fresh read, and keeps its quota.
    async fn a_refused_admission_lands_on_retry(code: u16, reason: &str) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let a = actuators(
            kube::Client::new(service, "default"),
            3,
            Duration::from_millis(200),
        );
        let server = tokio::spawn(serve(
            handle,
            vec![
                reply(200, workload()),
                failure(code, reason),
                reply(200, workload()),
                reply(200, workload()),
            ],
        ));
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        a.carry_out(admit(), tx).await;
        let requests = server.await.expect("mock server");
        let methods: Vec<&Method> = requests.iter().map(|r| &r.0).collect();
        assert_eq!(
            methods,
            [&Method::GET, &Method::PATCH, &Method::GET, &Method::PATCH]
        );
        assert!(rx.try_recv().is_err(), "a landed admission is not released");
    }

    /// A throttled write (429) is retried with backoff, not given up.
    #[tokio::test(start_paused = true)]
    async fn a_throttled_admission_lands_on_retry_and_is_not_handed_back() {
        a_refused_admission_lands_on_retry(429, "TooManyRequests").await;
    }

    /// A server error (500) is retried like a throttle: the write may still land.
    #[tokio::test(start_paused = true)]
    async fn an_admission_answered_500_lands_on_retry_and_is_not_handed_back() {
        a_refused_admission_lands_on_retry(500, "InternalError").await;
    }

    /// The API server's two 422s, as it sent them (kube-apiserver 1.36): a JSON patch
    /// whose `test` failed is stale and computed again; a change Kubernetes refuses is not.
    #[test]
    fn a_failed_patch_test_is_stale_and_a_refused_change_is_not() {
        let api = |message: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure(message, "Invalid").with_code(422),
            ))
        };
        let failed_test = api("the server rejected our request due to an error in our request");
        assert!(is_invalid(&failed_test) && is_stale_patch(&failed_test));
        let refused = api("Job.batch \"small-61\" is invalid: spec.template: field is immutable");
        assert!(is_invalid(&refused) && !is_stale_patch(&refused));
    }
}
