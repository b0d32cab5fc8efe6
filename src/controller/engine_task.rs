//! The one task that owns the [`Engine`]: it applies inputs as they arrive, runs one
//! scheduling cycle per batch of inputs (and when the engine asks for a wake-up), hands
//! the decisions to the actuators and publishes queue status at most once per interval.
//! Events and cycles go through [`crate::telemetry::observed`], as in the simulator, so
//! `kuota serve` reports Kueue's workload and quota metrics from the same feed.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::{Receiver, Sender};
use tracing::{info, warn};

use super::ControllerError;
use super::actuate::Actuators;
use super::actuate::events::workload_ref;
use super::actuate::finalizer::Finalizers;
use super::actuate::queue_status::QueueStatus;
use super::invalid_admission;
use super::translate::{decode, workload_key};
use super::watch::Kind;
use crate::api::Workload;
use crate::api::constants::WORKLOAD_FINISHED;
use crate::engine::{Engine, EngineConfig, EngineError, Event, Millis, WorkloadKey};
use crate::telemetry::{Metrics, Observer, observed};

/// How often the state gauges (pending, usage, quota) are rebuilt at most: a busy
/// cluster runs far more cycles than anyone scrapes.
const GAUGE_REFRESH: Duration = Duration::from_millis(250);

pub use super::watch::Input;

/// The engine's owner.
pub struct EngineTask {
    engine: Engine,
    observer: Observer,
    rx: Receiver<Input>,
    tx: Sender<Input>,
    unsynced: BTreeSet<Kind>,
    actuators: Actuators,
    queue_status: QueueStatus,
    finalizers: Finalizers,
    status_interval: Duration,
    /// Workloads that changed before every watch had listed: their admission is checked
    /// once the ClusterQueues are known (a missing one may only be late).
    to_check: BTreeSet<WorkloadKey>,
    /// Reads of the pending queues (the visibility API), answered between cycles.
    queries: Option<super::pending::Inbox>,
    /// The last invalid-state note published per Workload, so that one hand edit gives
    /// one Warning Event, not one per status change.
    warned: HashMap<WorkloadKey, String>,
    /// Start-time estimates of the pending workloads, recomputed in the background.
    estimator: super::estimates::Estimator,
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
        let off = super::estimates::EstimateConfig {
            enabled: false,
            ..Default::default()
        };
        Self {
            engine: Engine::new(config),
            estimator: super::estimates::Estimator::new(off, metrics.clone()),
            observer: Observer::new(metrics, GAUGE_REFRESH),
            rx,
            tx,
            unsynced: kinds.iter().copied().collect(),
            queue_status: QueueStatus::new(&actuators.writer, actuators.stores.clone()),
            finalizers: Finalizers::new(actuators.writer.clone(), actuators.stores.clone()),
            actuators,
            status_interval,
            to_check: BTreeSet::new(),
            warned: HashMap::new(),
            queries: None,
        }
    }

    /// Forecasts start times as `cfg` says (off unless set here).
    pub fn with_estimates(mut self, cfg: super::estimates::EstimateConfig) -> Self {
        self.estimator = super::estimates::Estimator::new(cfg, self.observer.metrics().clone());
        self
    }

    /// What the estimates know now, for a page of the pending queues.
    fn estimates(&self) -> super::pending::Estimates {
        use super::pending::Estimates;
        if !self.estimator.enabled() {
            return Estimates::Off;
        }
        self.estimator
            .latest()
            .map_or(Estimates::NotYet, Estimates::Latest)
    }

    /// Answers the reads of the pending queues that arrive on `queries`.
    pub fn with_pending_queries(mut self, queries: super::pending::Inbox) -> Self {
        self.queries = Some(queries);
        self
    }

    /// The next read of the pending queues, never if nobody asks.
    async fn next_query(
        queries: &mut Option<super::pending::Inbox>,
    ) -> Option<super::pending::PendingQuery> {
        match queries {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
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
            // Whether what a page shows (queues, positions, estimates) may have changed.
            let mut changed = false;
            let wake = self.wakeup_in();
            let forecast_in = self
                .unsynced
                .is_empty()
                .then(|| self.estimator.due_in(std::time::Instant::now()))
                .flatten();
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
                query = Self::next_query(&mut self.queries) => match query {
                    // Until every kind is listed, a page would miss workloads.
                    Some(q) => {
                        let estimates = self.estimates();
                        q.answer(self.unsynced.is_empty().then_some(&self.engine), estimates)
                    }
                    None => self.queries = None,
                },
                _ = tokio::time::sleep(forecast_in.unwrap_or(Duration::MAX)), if forecast_in.is_some() => {
                    self.estimator.start(&self.engine);
                }
                pass = self.estimator.finished() => {
                    self.estimator.complete(&self.engine, pass);
                    self.write_estimates();
                    changed = true;
                }
                _ = tick.tick() => {
                    if self.unsynced.is_empty() {
                        self.queue_status.publish(&self.engine);
                        self.finalizers.reconcile(&self.engine);
                        // Gauges skipped by a burst of cycles catch up here.
                        self.observer.maybe_refresh(&self.engine);
                    }
                }
            }
            if cycle && self.unsynced.is_empty() {
                let now = now_millis();
                let (decisions, _) =
                    observed::schedule(&mut self.engine, Some(&mut self.observer), now);
                self.estimate_outcomes(&decisions, now);
                self.actuators.dispatch(decisions, &self.tx);
                self.report_gang_reservations();
            }
            if (changed || cycle)
                && let Some(queries) = &self.queries
            {
                queries.changed();
            }
        }
        info!("engine task stopped");
        Ok(())
    }

    /// Writes the estimates that moved into their Workloads' annotation (opt-in), each
    /// its own task bounded by the writer's permits.
    fn write_estimates(&mut self) {
        for (key, p50) in self.estimator.to_write() {
            let Ok(at) = k8s_openapi::jiff::Timestamp::from_millisecond(p50) else {
                continue;
            };
            let at = at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            let actuators = self.actuators.clone();
            tokio::spawn(async move {
                let w = super::actuate::workload::WorkloadWriter {
                    writer: &actuators.writer,
                    stores: &actuators.stores,
                    recorder: &actuators.recorder,
                };
                if let Err(e) = w.annotate_estimate(&key, &at).await {
                    tracing::debug!(workload = %key, error = %e, "estimate not written");
                }
            });
        }
    }

    /// Scores the estimates of the workloads a cycle admitted, and counts the decisions
    /// that move the other estimates.
    fn estimate_outcomes(&mut self, decisions: &[crate::engine::Decision], now: Millis) {
        use crate::engine::Decision;
        let mut moved = 0;
        for d in decisions {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                    ..
                } => {
                    self.estimator
                        .admitted(workload, &admission.cluster_queue, now);
                    moved += 1;
                }
                Decision::Preempt { .. } | Decision::Evict { .. } => moved += 1,
                Decision::Pending { .. } | Decision::RequeueState { .. } => {}
            }
        }
        self.estimator.changed(moved);
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
                    Event::WorkloadUpserted(wl) => {
                        let key = workload_key(wl);
                        self.estimator.observe(&key, wl);
                        if !self.engine.has_workload(&key) {
                            self.estimator.changed(1);
                        }
                        if self.unsynced.is_empty() {
                            self.check_workload(&key, wl);
                        } else {
                            self.to_check.insert(key.clone());
                        }
                        Some(key)
                    }
                    Event::WorkloadDeleted(key) => {
                        self.warned.remove(key);
                        self.estimator.forget(key);
                        None
                    }
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
                    self.check_listed_workloads();
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

    /// Reports a Workload whose admission state kuota never writes (edited by hand): one
    /// warning and one Warning Event per distinct problem, naming field and reason.
    fn check_workload(&mut self, key: &WorkloadKey, wl: &Workload) {
        let finished = wl
            .status
            .as_ref()
            .is_some_and(|s| s.is_condition_true(WORKLOAD_FINISHED));
        let offered = invalid_admission::admitted_cluster_queue(wl).and_then(|cq| {
            let r = ObjectRef::new_with(cq, Kind::ClusterQueue.api_resource());
            self.actuators.stores.cluster_queues.get(&r)
        });
        let offered = offered.map(|cq| invalid_admission::offered(&cq));
        let problems = if finished {
            Vec::new()
        } else {
            invalid_admission::problems(wl, offered.as_ref())
        };
        if problems.is_empty() {
            self.warned.remove(key);
            return;
        }
        let note = invalid_admission::note(&problems);
        if self.warned.get(key) == Some(&note) {
            return;
        }
        warn!(workload = %key, problems = %note, "a Workload is in a state kuota never writes");
        self.actuators.recorder.workload_warning(
            workload_ref(key, Some(&wl.metadata)),
            invalid_admission::EVENT_REASON,
            &note,
        );
        self.warned.insert(key.clone(), note);
    }

    /// Checks the Workloads that changed while the watches were still listing.
    fn check_listed_workloads(&mut self) {
        for key in std::mem::take(&mut self.to_check) {
            let r = ObjectRef::new_with(&key.name, Kind::Workload.api_resource())
                .within(&key.namespace);
            let Some(obj) = self.actuators.stores.workloads.get(&r) else {
                continue;
            };
            // An undecodable one was reported by its watch already.
            if let Ok(wl) = decode::<Workload, _>(Kind::Workload, &*obj) {
                self.check_workload(&key, &wl);
            }
        }
    }

    /// A Normal Event on the gang's Workload for each head-gang reservation that moved
    /// later or was dropped since the last cycle (the engine's numbers in the note).
    fn report_gang_reservations(&mut self) {
        for notice in self.engine.take_gang_reservation_notices() {
            let key = &notice.workload;
            let r = ObjectRef::new_with(&key.name, Kind::Workload.api_resource())
                .within(&key.namespace);
            let stored = self.actuators.stores.workloads.get(&r);
            let regarding = workload_ref(key, stored.as_ref().map(|o| &o.metadata));
            info!(workload = %key, reason = notice.reason, message = %notice.message, "gang reservation");
            self.actuators
                .recorder
                .workload_normal(regarding, notice.reason, &notice.message);
        }
    }

    /// An object the engine cannot use: logged, and reported on the Workload.
    fn rejected(&self, e: EngineError, workload: Option<WorkloadKey>) {
        warn!(error = %e, "the engine rejected an object");
        if let Some(key) = workload {
            let r = ObjectRef::new_with(&key.name, Kind::Workload.api_resource())
                .within(&key.namespace);
            let stored = self.actuators.stores.workloads.get(&r);
            let regarding = workload_ref(&key, stored.as_ref().map(|o| &o.metadata));
            self.actuators
                .recorder
                .workload_warning(regarding, "InvalidWorkload", &e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    //! Queue status coalescing, against a mocked API server on a paused clock.

    use std::sync::{Arc, Mutex};

    use http::{Method, Request, Response};
    use kube::api::DynamicObject;
    use kube::client::Body;
    use kube::runtime::{reflector, watcher};
    use serde_json::{Value, json};
    use tokio::time::Instant;

    use super::*;
    use crate::controller::actuate::{Writer, events::Recorder};
    use crate::controller::watch;

    fn object<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("object")
    }

    fn cluster_queue() -> Value {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq", "resourceVersion": "1"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "0"}]}]}]}})
    }

    /// Stops the engine task, checks that it ended cleanly, and stops its mocked server.
    async fn stop_all<E: std::fmt::Debug>(
        stop: tokio::sync::oneshot::Sender<()>,
        running: tokio::task::JoinHandle<Result<(), E>>,
        server: tokio::task::JoinHandle<()>,
    ) {
        let _ = stop.send(());
        running
            .await
            .expect("engine task")
            .expect("stopped cleanly");
        server.abort();
    }

    /// Runs an engine task (status written every second) until `stop` is sent.
    fn start(
        config: EngineConfig,
        actuators: Actuators,
    ) -> (
        Sender<Input>,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<Result<(), ControllerError>>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let task = EngineTask::new(
            config,
            Metrics::default(),
            rx,
            tx.clone(),
            &[],
            actuators,
            Duration::from_secs(1),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(task.run(async {
            let _ = stopped.await;
        }));
        (tx, stop, running)
    }

    fn workload(i: usize) -> Value {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": format!("w{i}"), "namespace": "team",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                "template": {"spec": {"containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    }

    /// Records every ClusterQueue status patch (virtual time, body) and answers the rest
    /// (the pending workloads' status writes) with 404.
    async fn serve(
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
        writes: Arc<Mutex<Vec<(Instant, Value)>>>,
    ) {
        while let Some((req, send)) = handle.next_request().await {
            let is_cq_status = req.method() == Method::PATCH
                && req.uri().path() == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq/status";
            if is_cq_status {
                let bytes = req.into_body().collect_bytes().await.expect("body");
                let body: Value = serde_json::from_slice(&bytes).expect("json");
                writes.lock().expect("writes").push((Instant::now(), body));
                let reply = serde_json::to_vec(&cluster_queue()).expect("json");
                send.send_response(Response::builder().body(Body::from(reply)).expect("ok"));
            } else {
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "reason": "NotFound", "code": 404});
                let reply = serde_json::to_vec(&status).expect("json");
                send.send_response(
                    Response::builder()
                        .status(404)
                        .body(Body::from(reply))
                        .expect("404"),
                );
            }
        }
    }

    /// Twenty workloads join one ClusterQueue 50 ms apart: its status (the pending count)
    /// changes twenty times within a second, yet it is written at most once per second,
    /// the last write carries the final count, and the five quiet seconds after it (an
    /// unchanged status at every tick) write nothing.
    #[tokio::test(start_paused = true)]
    async fn queue_status_is_written_at_most_once_per_second_and_never_unchanged() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let writes = Arc::new(Mutex::new(Vec::new()));
        let server = tokio::spawn(serve(handle, writes.clone()));

        let mut cq_store = reflector::store::Writer::new(Kind::ClusterQueue.api_resource());
        cq_store.apply_watcher_event(&watcher::Event::Apply(object::<DynamicObject>(
            cluster_queue(),
        )));
        let (mut stores, _writers) = watch::stores();
        stores.cluster_queues = cq_store.as_reader();
        let actuators = Actuators::new(
            Arc::new(Writer::new(client, 4, 1)),
            Recorder::disabled(),
            stores,
        );
        let (tx, stop, running) = start(EngineConfig::default(), actuators);

        let setup = [
            Event::ResourceFlavorUpserted(object(
                json!({"metadata": {"name": "default"}, "spec": {}}),
            )),
            Event::ClusterQueueUpserted(object(cluster_queue())),
            Event::LocalQueueUpserted(object(
                json!({"metadata": {"name": "lq", "namespace": "team"},
                "spec": {"clusterQueue": "cq"}}),
            )),
            Event::NamespaceUpserted {
                name: "team".into(),
                labels: Default::default(),
            },
        ];
        for e in setup {
            tx.send(Input::event(e)).await.expect("engine task");
        }
        for i in 0..20 {
            tx.send(Input::event(Event::WorkloadUpserted(object(workload(i)))))
                .await
                .expect("engine task");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let last_change = Instant::now();
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop_all(stop, running, server).await;

        let writes = writes.lock().expect("writes").clone();
        assert!(
            !writes.is_empty(),
            "the ClusterQueue status was never written"
        );
        for pair in writes.windows(2) {
            assert!(
                pair[1].0 - pair[0].0 >= Duration::from_secs(1),
                "two writes {:?} apart",
                pair[1].0 - pair[0].0
            );
        }
        let (at, body) = writes.last().expect("a write");
        assert_eq!(body["status"]["pendingWorkloads"], 20, "{body}");
        assert!(
            *at <= last_change + Duration::from_secs(1),
            "a write {:?} after the last change: nothing had changed",
            *at - last_change
        );
    }

    /// Answers the LocalQueue's status patches (recorded) and every request about
    /// Workload w0 (its admission lands); anything else gets 404.
    async fn serve_local_queue(
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
        writes: Arc<Mutex<Vec<Value>>>,
    ) {
        while let Some((req, send)) = handle.next_request().await {
            let path = req.uri().path().to_string();
            let reply =
                if path == "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/localqueues/lq/status" {
                    let bytes = req.into_body().collect_bytes().await.expect("body");
                    writes
                        .lock()
                        .expect("writes")
                        .push(serde_json::from_slice(&bytes).expect("json"));
                    Some(local_queue())
                } else if path.contains("/workloads/w0") {
                    let mut w = workload(0);
                    w["metadata"]["resourceVersion"] = json!("2");
                    Some(w)
                } else {
                    None
                };
            send.send_response(reply_or_not_found(reply));
        }
    }

    fn local_queue() -> Value {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "team", "resourceVersion": "1"},
            "spec": {"clusterQueue": "cq"}})
    }

    /// Admission fair sharing: once a workload of the LocalQueue is admitted in a
    /// usage-based ClusterQueue, the queue status writer puts the LocalQueue's consumed
    /// resources (its entry penalty: 1 cpu x (1 - 0.5^(1s/10s)) = 66m, rounded down as
    /// Kueue rounds) in `status.fairSharing.admissionFairSharingStatus`, with
    /// `lastUpdate`, once: nothing changes afterwards, so nothing more is written.
    #[tokio::test(start_paused = true)]
    async fn local_queue_status_carries_admission_fair_sharing_usage() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let writes = Arc::new(Mutex::new(Vec::new()));
        let server = tokio::spawn(serve_local_queue(handle, writes.clone()));

        let mut cq = cluster_queue();
        cq["spec"]["admissionScope"] = json!({"admissionMode": "UsageBasedAdmissionFairSharing"});
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = json!("4");
        let mut cq_store = reflector::store::Writer::new(Kind::ClusterQueue.api_resource());
        cq_store.apply_watcher_event(&watcher::Event::Apply(object::<DynamicObject>(cq.clone())));
        let mut lq_store = reflector::store::Writer::new(Kind::LocalQueue.api_resource());
        lq_store.apply_watcher_event(&watcher::Event::Apply(object::<DynamicObject>(
            local_queue(),
        )));
        let (mut stores, _writers) = watch::stores();
        stores.cluster_queues = cq_store.as_reader();
        stores.local_queues = lq_store.as_reader();
        // Three attempts: the first finds the Workload missing from the (empty) watch
        // cache and the second reads it from the API server.
        let actuators = Actuators::new(
            Arc::new(Writer::new(client, 4, 3)),
            Recorder::disabled(),
            stores,
        );
        let config = EngineConfig {
            admission_fair_sharing: Some(crate::engine::AdmissionFairSharing {
                usage_half_life: 10_000,
                usage_sampling_interval: 1_000,
                resource_weights: Default::default(),
            }),
            ..EngineConfig::default()
        };
        let (tx, stop, running) = start(config, actuators);
        let setup = [
            Event::ResourceFlavorUpserted(object(
                json!({"metadata": {"name": "default"}, "spec": {}}),
            )),
            Event::ClusterQueueUpserted(object(cq)),
            Event::LocalQueueUpserted(object(local_queue())),
            Event::NamespaceUpserted {
                name: "team".into(),
                labels: Default::default(),
            },
            Event::WorkloadUpserted(object(workload(0))),
        ];
        for e in setup {
            tx.send(Input::event(e)).await.expect("engine task");
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop_all(stop, running, server).await;

        let writes = writes.lock().expect("writes").clone();
        let with_usage: Vec<&Value> = writes
            .iter()
            .filter(|b| b["status"]["fairSharing"].is_object())
            .collect();
        assert_eq!(with_usage.len(), 1, "{writes:?}");
        let afs = &with_usage[0]["status"]["fairSharing"]["admissionFairSharingStatus"];
        assert_eq!(afs["consumedResources"], json!({"cpu": "66m"}), "{afs}");
        assert!(afs["lastUpdate"].is_string(), "{afs}");
    }

    /// Answers every request about a Workload with that Workload (admissions and
    /// pending statuses land), records every Event created and answers the rest 404.
    async fn serve_workloads_and_events(
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
        events: Arc<Mutex<Vec<Value>>>,
    ) {
        while let Some((req, send)) = handle.next_request().await {
            let path = req.uri().path().to_string();
            let method = req.method().clone();
            let bytes = req.into_body().collect_bytes().await.expect("body");
            let reply = if path.ends_with("/events") && method == Method::POST {
                let body: Value = serde_json::from_slice(&bytes).expect("json");
                events.lock().expect("events").push(body.clone());
                Some(body)
            } else if let Some(rest) = path.split("/workloads/").nth(1) {
                let name = rest.trim_end_matches("/status");
                Some(
                    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                    "metadata": {"name": name, "namespace": "team", "resourceVersion": "7"},
                    "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                        "template": {"spec": {"containers": []}}}]}}),
                )
            } else {
                None
            };
            send.send_response(reply_or_not_found(reply));
        }
    }

    fn gpu_node(name: &str, rack: &str) -> Event {
        Event::NodeUpserted(Box::new(object(json!({"metadata": {"name": name,
            "labels": {"rack": rack, "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"nvidia.com/gpu": "4", "pods": "110"}}}))))
    }

    /// A Workload of `count` 4-GPU pods in one `level` domain, on host `host` if given.
    fn gpu_workload(
        name: &str,
        bound: Option<i32>,
        host: Option<&str>,
        count: i32,
        level: &str,
    ) -> Event {
        let mut spec = json!({"containers": [{"name": "c",
            "resources": {"requests": {"nvidia.com/gpu": "4"}}}]});
        if let Some(h) = host {
            spec["nodeSelector"] = json!({"kubernetes.io/hostname": h});
        }
        let mut w = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "team",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": count,
                "topologyRequest": {"required": level}, "template": {"spec": spec}}]}});
        if let Some(b) = bound {
            w["spec"]["maximumExecutionTimeSeconds"] = json!(b);
        }
        Event::WorkloadUpserted(object(w))
    }

    /// A gang needing a whole rack holds rack r1 (free once a1's 100 s workload ends);
    /// r1's other host disappears and r2 frees only after the horizon: the engine drops
    /// the reservation, and the task publishes one Normal `GangReservationDropped` Event
    /// on the gang's Workload (with the uid the watch cache has), with the numbers.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_gang_reservation_is_an_event_on_the_gang() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let events = Arc::new(Mutex::new(Vec::new()));
        let server = tokio::spawn(serve_workloads_and_events(handle, events.clone()));

        let (stores, mut writers) = watch::stores();
        let cached = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "gang", "namespace": "team", "uid": "gang-uid",
                         "resourceVersion": "3"}});
        writers
            .workloads
            .apply_watcher_event(&watcher::Event::Apply(
                crate::controller::compact::CompactObject::from_value(cached).expect("cached"),
            ));
        let actuators = Actuators::new(
            Arc::new(Writer::new(client.clone(), 4, 3)),
            Recorder::new(client, Metrics::default()),
            stores,
        );
        let config = EngineConfig {
            gang_reservation_horizon: 3_600_000,
            ..EngineConfig::default()
        };
        let (tx, stop, running) = start(config, actuators);
        let setup = [
            Event::TopologyUpserted(object(json!({"metadata": {"name": "t"},
                "spec": {"levels": [{"nodeLabel": "rack"},
                                    {"nodeLabel": "kubernetes.io/hostname"}]}}))),
            Event::ResourceFlavorUpserted(object(
                json!({"metadata": {"name": "f"}, "spec": {"topologyName": "t"}}),
            )),
            Event::ClusterQueueUpserted(object(json!({"metadata": {"name": "cq"},
                "spec": {"namespaceSelector": {}, "resourceGroups": [{
                    "coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f",
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "64"}]}]}]}}))),
            Event::LocalQueueUpserted(object(local_queue())),
            Event::NamespaceUpserted {
                name: "team".into(),
                labels: Default::default(),
            },
            gpu_node("a1", "r1"),
            gpu_node("a2", "r1"),
            gpu_node("c1", "r2"),
            gpu_node("c2", "r2"),
            gpu_workload("w-a1", Some(100), Some("a1"), 1, "kubernetes.io/hostname"),
            gpu_workload(
                "w-c1",
                Some(10_000),
                Some("c1"),
                1,
                "kubernetes.io/hostname",
            ),
            gpu_workload(
                "w-c2",
                Some(10_000),
                Some("c2"),
                1,
                "kubernetes.io/hostname",
            ),
        ];
        for e in setup {
            tx.send(Input::event(e)).await.expect("engine task");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        tx.send(Input::event(gpu_workload("gang", None, None, 2, "rack")))
            .await
            .expect("engine task");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let held = |events: &Arc<Mutex<Vec<Value>>>| {
            events
                .lock()
                .expect("events")
                .iter()
                .filter(|e| {
                    e["reason"]
                        .as_str()
                        .is_some_and(|r| r.starts_with("GangReservation"))
                })
                .cloned()
                .collect::<Vec<Value>>()
        };
        assert!(held(&events).is_empty(), "nothing moved yet");
        tx.send(Input::event(Event::NodeDeleted("a2".into())))
            .await
            .expect("engine task");
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop_all(stop, running, server).await;

        let said = held(&events);
        assert_eq!(said.len(), 1, "{said:?}");
        let e = &said[0];
        assert_eq!(e["reason"], "GangReservationDropped");
        assert_eq!(e["type"], "Normal");
        assert_eq!(e["regarding"]["kind"], "Workload");
        assert_eq!(e["regarding"]["name"], "gang");
        assert_eq!(e["regarding"]["namespace"], "team");
        assert_eq!(e["regarding"]["uid"], "gang-uid");
        let note = e["note"].as_str().expect("a note");
        assert!(
            note.starts_with("the reservation of nodes for the gang's 2 pods, due to start in ")
                && note.contains("within the 3600s reservation horizon"),
            "{note}"
        );
    }

    /// The mocked API server's answer: `reply` as 200, or Kubernetes' 404 Status.
    fn reply_or_not_found(reply: Option<serde_json::Value>) -> Response<Body> {
        match reply {
            Some(v) => Response::builder()
                .body(Body::from(serde_json::to_vec(&v).expect("json")))
                .expect("ok"),
            None => {
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "reason": "NotFound", "code": 404});
                Response::builder()
                    .status(404)
                    .body(Body::from(serde_json::to_vec(&status).expect("json")))
                    .expect("404")
            }
        }
    }
}
