//! The queue controller: watches the cluster, feeds one [`Engine`](crate::engine::Engine),
//! and carries its decisions back to the API server with as few writes as possible.
//!
//! - `kind`: the kinds of object the engine reads, and their API resources;
//! - `watch`: kube-rs watchers (with reflector stores) that turn cluster objects into inputs;
//! - `compact`: the small form in which Jobs and Workloads are kept in reflector stores;
//! - `conditions`: setting a Workload condition as apimachinery does, for every writer;
//! - `managed_namespaces`: which namespaces' jobs without a queue name are managed;
//! - `translate`: pure conversion of watched objects into engine events;
//! - `engine_task`: the one task that owns the engine, batches inputs into cycles and
//!   hands decisions to the actuators;
//! - `pending`: reads of the engine's pending queues (the visibility API), answered by the
//!   engine task between cycles;
//! - `ungate`: the topology ungater, giving each gated pod of a TAS-admitted Workload the
//!   node selector of its domain;
//! - `invalid_admission`: pure checks of hand-edited admission states (reported, and a job
//!   whose admission does not hold together is not started);
//! - `pods_ready`: waitForPodsReady's Workload patches (the `PodsReady` condition from the
//!   job's status, the requeue state);
//! - `succeeded_pods`: per job, the pods kuota started that have succeeded, so a job
//!   whose pods already decide its success is waited for, not preempted;
//! - `group_sync`: the same for composed jobs (plain pods and pod groups), keyed by their
//!   Workload's name: gated members are ungated on admission, deleted on eviction, and
//!   lose their finalizer once done;
//! - `workload_sync`: per-job reconciliation (Workload creation, start, stop, finish),
//!   deciding in a pure `plan` what one job needs next;
//! - `provisioning`: Kueue's ProvisioningRequest admission check, run for the checks that
//!   name its controller;
//! - `multikueue`: MultiKueue's manager: worker connections, checks, dispatch;
//! - `actuate`: the writers (Workload status, jobs, queue status, Kubernetes Events).
//!
//! See docs/controller.md for the flows, the writes per admission and the RBAC it needs.

pub mod actuate;
pub mod checks;
pub mod compact;
pub mod conditions;
pub mod engine_task;
pub mod estimates;
pub mod group_sync;
pub mod invalid_admission;
pub mod kind;
pub mod managed_namespaces;
pub mod multikueue;
pub mod pending;
pub mod pods_ready;
pub mod provisioning;
pub mod succeeded_pods;
pub mod translate;
pub mod ungate;
pub mod watch;
pub mod workload_sync;

use std::future::Future;
use std::sync::Arc;

use kube::Client;
use tracing::{error, info, warn};

use crate::engine::EngineConfig;
use crate::integrations::JobIntegration;

/// What the controller manages and how it schedules. `kuota serve` fills it from flags,
/// or from Kueue's `Configuration` file (`--config`).
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Kueue's `integrations.frameworks` (`batch/job`, `jobset.x-k8s.io/jobset`,
    /// `kubeflow.org/pytorchjob`, `kubeflow.org/mpijob`, `ray.io/rayjob`,
    /// `ray.io/raycluster`). Unknown names are logged and skipped; a framework whose CRD is
    /// not installed is skipped with one line.
    pub integrations: Vec<String>,
    /// Kueue's `manageJobsWithoutQueueName`: jobs without a queue name get Workloads too.
    pub manage_jobs_without_queue_name: bool,
    /// Where jobs without a queue name are managed then (Kueue's
    /// `managedJobsNamespaceSelector`; never kube-system nor kuota's own namespace).
    pub managed_namespaces: managed_namespaces::ManagedNamespaces,
    /// Scheduling settings: fair sharing, placement, preemption protection.
    pub engine: EngineConfig,
    /// Queue status (at most one write per ClusterQueue and LocalQueue per interval)
    /// and which Workload Events are published.
    pub api_writes: crate::config::ApiWrites,
    /// API writes in flight at once (Workload status, jobs, queue status).
    pub write_concurrency: usize,
    /// Attempts of one write before it fails for good (conflicts re-read fresh state,
    /// 429 and 5xx back off).
    pub write_attempts: u32,
    /// Where the controller records Kueue's metrics and its API writes (`kuota serve`
    /// passes the registry its `/metrics` serves).
    pub metrics: crate::telemetry::Metrics,
    /// Whether it runs under leader election: its metrics then say `replica_role="leader"`
    /// while it runs and `follower` after; otherwise `standalone`, as Kueue labels them.
    pub leader_elected: bool,
    /// Where a panic of the engine task is reported (`kuota serve` then exits non-zero).
    pub fatal: Fatal,
    /// Where the visibility API finds this controller's engine while it runs.
    pub pending_queries: pending::PendingQueries,
    /// Start-time estimates: whether, how often, at what cost.
    pub estimates: estimates::EstimateConfig,
    /// kuota's own namespace (Kueue's `namespace`): where MultiKueue's kubeconfig Secrets are.
    pub namespace: String,
    /// MultiKueue: the origin, the lost-worker timeout, the dispatcher.
    pub multikueue: crate::config::multikueue::MultiKueue,
}

/// A failure the process must not outlive: the engine task panicked. `kuota serve` waits on
/// it, stops (readiness turns false while it drains, and the Lease is released) and exits
/// non-zero, so that Kubernetes restarts it and the new process rebuilds from API state,
/// instead of serving with a dead controller.
#[derive(Clone)]
pub struct Fatal(Arc<tokio::sync::watch::Sender<Option<String>>>);

impl Default for Fatal {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::channel(None).0))
    }
}

impl std::fmt::Debug for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Fatal").field(&self.reason()).finish()
    }
}

impl Fatal {
    /// Records why the process must stop (the first report wins).
    pub fn report(&self, why: String) {
        self.0.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// Why the process must stop, once reported.
    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Resolves with the reason once one is reported.
    pub async fn wait(&self) -> String {
        let mut rx = self.0.subscribe();
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`: unreachable while this future runs.
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            integrations: vec!["batch/job".to_string()],
            manage_jobs_without_queue_name: false,
            managed_namespaces: managed_namespaces::ManagedNamespaces::default(),
            engine: EngineConfig::default(),
            api_writes: crate::config::ApiWrites::default(),
            write_concurrency: 64,
            write_attempts: 5,
            metrics: crate::telemetry::Metrics::default(),
            leader_elected: false,
            fatal: Fatal::default(),
            pending_queries: pending::PendingQueries::default(),
            estimates: estimates::EstimateConfig::default(),
            namespace: crate::config::DEFAULT_NAMESPACE.to_string(),
            multikueue: crate::config::multikueue::MultiKueue::default(),
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A watch or job-controller task ended abnormally.
    #[error("controller task {task} failed: {source}")]
    Task {
        task: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// The engine task panicked (a bug): reported to [`ControllerConfig::fatal`].
    #[error("the engine task panicked: {message}")]
    EnginePanicked { message: String },
}

/// Waits for the engine task. A panic is logged with its message, reported to `fatal`
/// and returned as [`ControllerError::EnginePanicked`].
pub async fn supervise(
    engine: tokio::task::JoinHandle<Result<(), ControllerError>>,
    fatal: &Fatal,
) -> Result<(), ControllerError> {
    match engine.await {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string());
            error!(
                panic = %message,
                "the engine task panicked: scheduling stops and kuota exits non-zero, to be \
                 restarted from API state"
            );
            fatal.report(format!("the engine task panicked: {message}"));
            Err(ControllerError::EnginePanicked { message })
        }
        Err(source) => Err(ControllerError::Task {
            task: "engine",
            source,
        }),
    }
}

/// The integrations named in `names`, and the names that matched none (to be logged).
pub fn resolve_integrations(names: &[String]) -> (Vec<&'static dyn JobIntegration>, Vec<String>) {
    let mut found = Vec::new();
    let mut unknown = Vec::new();
    for name in names {
        match crate::integrations::for_framework(name).filter(|i| i.controller_runs()) {
            Some(i) => found.push(i),
            None => unknown.push(name.clone()),
        }
    }
    (found, unknown)
}

/// What the watches report besides engine inputs goes to the job reconcilers (a changed
/// Workload's owner, a TAS admission's ungater) and to the Event recorder.
struct ControllerHooks {
    triggers: workload_sync::Triggers,
    recorder: actuate::events::Recorder,
    /// The ProvisioningRequest check's controller: Workloads with admission checks.
    provisioning: futures::channel::mpsc::UnboundedSender<
        kube::runtime::reflector::ObjectRef<compact::CompactObject>,
    >,
    /// MultiKueue's dispatcher: the same Workloads.
    multikueue: futures::channel::mpsc::UnboundedSender<
        kube::runtime::reflector::ObjectRef<compact::CompactObject>,
    >,
}

impl watch::WatchHooks for ControllerHooks {
    fn workload_changed(&self, meta: &kube::api::ObjectMeta) {
        self.triggers.trigger_owner(meta);
    }

    fn workload_upserted(&self, workload: &crate::api::Workload) {
        self.triggers.trigger_ungater(workload);
        let has_checks = workload
            .status
            .as_ref()
            .is_some_and(|s| !s.admission_checks.is_empty());
        if let (true, Some(ns), Some(name)) = (
            has_checks,
            workload.metadata.namespace.as_deref(),
            workload.metadata.name.as_deref(),
        ) {
            let r = kube::runtime::reflector::ObjectRef::new_with(
                name,
                watch::Kind::Workload.api_resource(),
            )
            .within(ns);
            let _ = self.provisioning.unbounded_send(r.clone());
            let _ = self.multikueue.unbounded_send(r);
        }
    }

    fn unreadable(
        &self,
        resource: &kube::core::ApiResource,
        meta: &kube::api::ObjectMeta,
        why: &str,
    ) {
        self.recorder.invalid_object(resource, meta, why);
    }
}

/// Runs the controller until `shutdown` resolves: watches, the engine task, one job
/// controller per enabled integration whose CRD exists, and the actuators.
pub async fn run(
    client: Client,
    config: ControllerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControllerError> {
    let (integrations, unknown) = resolve_integrations(&config.integrations);
    for name in &unknown {
        warn!(
            framework = %name,
            "integrations.frameworks: unknown or unsupported framework, skipped"
        );
    }
    let mut enabled = Vec::new();
    for integration in integrations {
        if watch::integration_installed(&client, integration).await {
            enabled.push(integration);
        } else {
            warn!(
                kind = %integration.gvk().kind,
                api_version = %integration.gvk().api_version(),
                "the CRD of this integration is not installed: its jobs are not managed"
            );
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel(4096);
    let (stores, writers) = watch::stores();
    let _role = config.leader_elected.then(|| config.metrics.lead());
    let recorder = actuate::events::Recorder::new(client.clone(), config.metrics.clone())
        .with_workload_events(config.api_writes.events);
    let writer = Arc::new(
        actuate::Writer::new(
            client.clone(),
            config.write_concurrency,
            config.write_attempts,
        )
        .with_metrics(config.metrics.clone()),
    );
    let (job_triggers, ungate_triggers) = workload_sync::Triggers::new(&enabled).with_ungater();
    let (provisioning_tx, provisioning_rx) = futures::channel::mpsc::unbounded();
    let (multikueue_tx, multikueue_rx) = futures::channel::mpsc::unbounded();
    let hooks = Arc::new(ControllerHooks {
        triggers: job_triggers.clone(),
        recorder: recorder.clone(),
        provisioning: provisioning_tx,
        multikueue: multikueue_tx,
    });
    let mut tasks = watch::spawn(client.clone(), writers, tx.clone(), hooks);
    tasks.push((
        "multikueue",
        tokio::spawn(multikueue::run(
            client.clone(),
            multikueue::Shared {
                stores: stores.clone(),
                writer: writer.clone(),
                recorder: recorder.clone(),
                kinds: enabled.clone(),
                settings: config.multikueue.clone(),
                namespace: config.namespace.clone(),
                metrics: config.metrics.clone(),
            },
            multikueue_rx,
        )),
    ));
    tasks.push((
        "provisioning-check",
        tokio::spawn(provisioning::run(
            client.clone(),
            provisioning::Shared {
                workloads: stores.workloads.clone(),
                flavors: stores.flavors.clone(),
                writer: writer.clone(),
                recorder: recorder.clone(),
            },
            provisioning_rx,
        )),
    ));
    tasks.push((
        "topology-ungater",
        tokio::spawn(ungate::run(
            client.clone(),
            stores.workloads.clone(),
            writer.clone(),
            ungate_triggers,
        )),
    ));
    for integration in &enabled {
        let ctx = workload_sync::Ctx {
            stores: stores.clone(),
            writer: writer.clone(),
            recorder: recorder.clone(),
            engine: tx.clone(),
            manage_without_queue_name: config.manage_jobs_without_queue_name,
            wait_for_pods_ready: config.engine.pods_ready.is_some(),
            namespaces: managed_namespaces::NamespaceCheck::new(config.managed_namespaces.clone()),
            created: workload_sync::created_cache(),
        };
        let triggers = job_triggers.receiver(*integration);
        // A kind made of several objects (plain pods) runs through its own reconciler.
        let task = match integration.composed() {
            Some(composed) => tokio::spawn(group_sync::run(
                client.clone(),
                *integration,
                composed,
                ctx,
                triggers,
            )),
            None => tokio::spawn(workload_sync::run(
                client.clone(),
                *integration,
                ctx,
                triggers,
            )),
        };
        tasks.push(("job-controller", task));
    }
    info!(
        integrations = ?enabled.iter().map(|i| i.kind()).collect::<Vec<_>>(),
        "queue controller started"
    );
    let engine_task = engine_task::EngineTask::new(
        config.engine.clone(),
        config.metrics.clone(),
        rx,
        tx,
        watch::ENGINE_KINDS,
        actuate::Actuators::new(writer, recorder, stores),
        config.api_writes.queue_status_interval,
    )
    .with_pending_queries(config.pending_queries.register())
    .with_estimates(config.estimates.clone());
    // Its own task, so that a panic is seen (and reported) rather than unwinding here.
    let result = supervise(tokio::spawn(engine_task.run(shutdown)), &config.fatal).await;
    for (_, task) in &tasks {
        task.abort();
    }
    for (name, task) in tasks {
        match task.await {
            Ok(()) => {}
            Err(e) if e.is_cancelled() => {}
            Err(source) => return Err(ControllerError::Task { task: name, source }),
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_engine_panic_is_reported_as_fatal_with_its_message() {
        let fatal = Fatal::default();
        let waiting = tokio::spawn({
            let fatal = fatal.clone();
            async move { fatal.wait().await }
        });
        let engine = tokio::spawn(async {
            if std::hint::black_box(true) {
                panic!("cycle invariant broken");
            }
            Ok(())
        });
        match supervise(engine, &fatal).await {
            Err(ControllerError::EnginePanicked { message }) => {
                assert_eq!(message, "cycle invariant broken");
            }
            other => panic!("expected EnginePanicked, got {other:?}"),
        }
        assert_eq!(
            waiting.await.expect("waiter"),
            "the engine task panicked: cycle invariant broken"
        );
        // A clean stop is not fatal.
        let clean = Fatal::default();
        let engine = tokio::spawn(async { Ok(()) });
        assert!(supervise(engine, &clean).await.is_ok());
        assert_eq!(clean.reason(), None);
    }

    #[test]
    fn frameworks_resolve_by_kueue_name_and_unknown_ones_are_reported() {
        let (found, unknown) = resolve_integrations(&[
            "batch/job".to_string(),
            "ray.io/rayjob".to_string(),
            "example.com/widget".to_string(),
            "pod".to_string(),
            "kubeflow.org/mpijob".to_string(),
            "leaderworkerset.x-k8s.io/leaderworkerset".to_string(),
            "trainer.kubeflow.org/trainjob".to_string(),
            "kubeflow.org/tfjob".to_string(),
        ]);
        let kinds: Vec<String> = found.iter().map(|i| i.kind()).collect();
        assert_eq!(
            kinds,
            [
                "Job",
                "RayJob",
                "Pod",
                "MPIJob",
                "LeaderWorkerSet",
                "TrainJob"
            ]
        );
        assert_eq!(unknown, ["example.com/widget", "kubeflow.org/tfjob"]);
    }
}
