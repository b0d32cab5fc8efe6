//! Job reconciliation (one kube-rs `Controller` per integration): each job gets its
//! Workload, is started once the Workload is admitted, stopped and restored when it is
//! evicted, and its Workload is finished when it completes. A pure [`plan`] picks the one
//! step a job needs next; the job's and its Workload's next events bring the step after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde_json::Value;
use tokio::sync::mpsc::Sender;
use tracing::{debug, info, warn};

use super::actuate::events::Recorder;
use super::actuate::job::{self, JobPatchError};
use super::actuate::workload::{WorkloadWriter, Written, finish_patch, requeue_patch};
use super::actuate::{WriteError, Writer, is_invalid, is_stale_patch};
use super::compact::CompactObject;
use super::invalid_admission;
use super::translate::{TranslateError, decode};
use super::watch::Input;
use super::watch::{Kind, Stores, job_api_resource};
use crate::api::constants::{
    PREBUILT_WORKLOAD_LABEL, QUEUE_NAME_LABEL, REASON_FAILED, REASON_SUCCEEDED, WORKLOAD_EVICTED,
    WORKLOAD_FINISHED,
};
use crate::api::{WORKLOAD_PRIORITY_CLASS_KIND, Workload, WorkloadPriorityClass};
use crate::engine::{Event, WorkloadKey};
use crate::integrations::{
    IntegrationError, JobIntegration, JobObject, Outcome, RuleOptions, is_managed_owner_kind,
};

/// Kueue's Event reason for a job no Workload can be built for (`ErrWorkloadCompose`).
const REASON_ERR_WORKLOAD_COMPOSE: &str = "ErrWorkloadCompose";

/// How soon a job whose Workload cannot be built for want of another object (a
/// TrainJob's runtime) is looked at again.
const DEPENDENCY_RECHECK: Duration = Duration::from_secs(30);

/// How soon a job whose prebuilt Workload does not exist yet is looked at again.
const PREBUILT_RECHECK: Duration = Duration::from_secs(5);

/// How soon a job held back by an invalid admission is looked at again.
const INVALID_ADMISSION_RECHECK: Duration = Duration::from_secs(5);
/// When a job whose store copy predates kuota's own last write is looked at again if its
/// watch event has not come by then.
const OWN_WRITE_RECHECK: Duration = Duration::from_secs(5);

/// Why one reconciliation of a job failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("job {name}: {source}")]
    Decode {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("job {name}: cannot build its Workload: {source}")]
    Integration {
        name: String,
        #[source]
        source: IntegrationError,
    },
    #[error(transparent)]
    Patch(#[from] JobPatchError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Translate(#[from] TranslateError),
    #[error("job {name}: cannot read {kind} {class} for its Workload's priority: {source}")]
    Priority {
        name: String,
        kind: String,
        class: String,
        #[source]
        source: kube::Error,
    },
    #[error("job {name}: {source}")]
    Api {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// What the job's state says, as far as admission cares (read through its integration).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobState {
    pub suspended: bool,
    /// How the job ended, once its operator says it finished.
    pub finished: Option<Outcome>,
    /// The job's outcome is decided but not yet final: a batch Job with
    /// `SuccessCriteriaMet` or `FailureTarget` whose pods are still terminating. It is
    /// neither stopped nor restored then: it is about to finish.
    pub finishing: bool,
    /// Suspended after its outcome was decided (preempted in the window above): the Job
    /// controller never completes a suspended Job, so it stays incomplete until resumed.
    pub decided_while_suspended: bool,
    /// Some of its pods may still run (Kueue's `IsActive`): its quota stays held.
    pub active: bool,
    /// The status write a stopped job needs before its templates may change.
    pub status_reset: Option<Value>,
    /// The pod templates differ from what the Workload recorded.
    pub needs_restore: bool,
    /// The kind refuses template changes in the job's present state.
    pub templates_locked: bool,
    /// Whether all its pods are ready, when waitForPodsReady is on (`None`: off).
    pub pods_ready: Option<bool>,
}

/// The one step a job needs next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Nothing,
    CreateWorkload,
    Finish {
        reason: &'static str,
        message: String,
    },
    Start,
    /// Unsuspend a job whose Workload finished while it was suspended with its outcome
    /// decided, so that the Job controller completes it (it creates no pods then).
    Resume,
    Stop,
    /// The stopped job's status write (a batch Job's `startTime` cleared).
    ResetStatus(Value),
    Restore,
    /// Evicted and stopped, with no pods left: release the admission and requeue.
    Requeue,
    /// waitForPodsReady: the Workload's `PodsReady` condition changes to this.
    PodsReady(crate::engine::Readiness),
    /// Quota is reserved and every admission check is Ready: `Admitted` turns true
    /// (Kueue's workload controller; the start follows).
    ChecksReady,
}

/// Picks the next step for a job and its Workload (none yet: `None`).
pub fn plan(job: &JobState, wl: Option<&Workload>) -> Step {
    let Some(wl) = wl else {
        return if job.finished.is_some() {
            Step::Nothing
        } else {
            Step::CreateWorkload
        };
    };
    let status = wl.status.as_ref();
    if status.is_some_and(|s| s.is_condition_true(WORKLOAD_FINISHED)) {
        return if job.decided_while_suspended {
            Step::Resume
        } else {
            Step::Nothing
        };
    }
    if let Some(outcome) = &job.finished {
        let reason = if outcome.succeeded {
            REASON_SUCCEEDED
        } else {
            REASON_FAILED
        };
        return Step::Finish {
            reason,
            message: outcome.message.clone(),
        };
    }
    if job.finishing {
        // Suspending it now would leave it suspended with its outcome decided: the Job
        // controller then never completes it, the template cannot be restored, and the
        // quota would stay held. Its Complete or Failed condition comes next.
        return Step::Nothing;
    }
    // Kueue's job reconciler keeps the PodsReady condition before it handles an
    // eviction or a start.
    if let Some(readiness) = job
        .pods_ready
        .and_then(|ready| super::pods_ready::condition(wl, ready))
    {
        return Step::PodsReady(readiness);
    }
    let admitted = status.is_some_and(|s| s.admission.is_some());
    let evicted = status.is_some_and(|s| s.is_condition_true(WORKLOAD_EVICTED));
    if admitted && !evicted && super::checks::awaiting_checks(wl) {
        // Quota reserved, admission checks not all Ready yet: the job waits suspended.
        return if super::checks::all_ready(wl) {
            Step::ChecksReady
        } else {
            Step::Nothing
        };
    }
    if admitted && !evicted {
        return if job.suspended {
            Step::Start
        } else {
            Step::Nothing
        };
    }
    // Evicted, or never admitted: the job must not run, and must look as submitted.
    // Its quota goes back as soon as its operator reports no pod running (Kueue's
    // reconciler waits until the job is inactive), before the template is restored: a
    // start rebuilds the template from the Workload's copy anyway. A template the kind
    // will not let change yet (a batch Job that still reports active pods) is left until
    // the operator's status update that unlocks it wakes the job again.
    if !job.suspended {
        Step::Stop
    } else if let Some(reset) = &job.status_reset {
        Step::ResetStatus(reset.clone())
    } else if admitted && !job.active {
        Step::Requeue
    } else if job.needs_restore && !job.templates_locked {
        Step::Restore
    } else {
        Step::Nothing
    }
}

/// Reads the admission-relevant state of a job through its integration.
pub fn job_state(integration: &dyn JobIntegration, job: &JobObject<'_>) -> JobState {
    let suspended = integration.is_suspended(job);
    let mut finished = integration.finished(job);
    // Kubernetes decides a batch Job's outcome before Complete / Failed, while pods still
    // terminate. A Job suspended in that window (its workload preempted at that moment)
    // keeps its outcome but is never completed by the Job controller: finished then.
    let decided = match finished {
        None => integration.outcome_decided(job),
        Some(_) => None,
    };
    let finishing = decided.is_some() && !suspended;
    let decided_while_suspended = suspended && decided.is_some();
    if suspended && finished.is_none() {
        finished = decided;
    }
    // A job MultiKueue dispatched runs its pods in a worker cluster; its status is the
    // worker's copy's, mirrored. Once suspended here it is stopped there by the
    // dispatcher, and its quota may go back even while the mirrored status (or a lost
    // worker's last word) still counts pods.
    let dispatched = job.spec().managed_by.as_deref() == Some(crate::api::MULTIKUEUE_CONTROLLER);
    JobState {
        suspended,
        finished,
        finishing,
        decided_while_suspended,
        active: integration.is_active(job) && !(suspended && dispatched),
        status_reset: integration.stop_status_patch(job),
        needs_restore: false,
        templates_locked: integration.templates_locked(job),
        pods_ready: None,
    }
}

/// An integration's (apiVersion, kind).
type GvkKey = (String, String);
/// A job to reconcile again, named by reference.
type JobRef = ObjectRef<CompactObject>;

/// Routes Workload changes to the reconciler of the job that owns them.
///
/// The channels are unbounded on purpose. They are fed from the watches' synchronous
/// hooks, where a full bounded channel would leave two bad choices: block the watch (and
/// with it every engine input behind it) or drop the trigger (and miss the reconcile of a
/// job whose Workload just changed). They do not grow without bound in practice: each
/// message is one job (for the topology ungater, one Workload) reference, and every
/// receiving end is a kube controller's scheduler (`reconcile_on`), which drains its
/// trigger streams whenever it is polled, independently of reconciles in flight, into a
/// map keyed by object, so what is queued is at most one entry per object.
#[derive(Clone, Default)]
pub struct Triggers {
    /// Per integration: its channel, and whether it is a composed kind (its reconciler
    /// is keyed by Workload name, so it is sent the Workload's reference).
    senders: Arc<HashMap<GvkKey, (UnboundedSender<JobRef>, bool)>>,
    receivers: Arc<Mutex<HashMap<GvkKey, UnboundedReceiver<JobRef>>>>,
    /// The topology ungater's trigger: Workloads admitted with a topology assignment.
    ungater: Option<UnboundedSender<JobRef>>,
}

fn gvk_key(integration: &dyn JobIntegration) -> (String, String) {
    let gvk = integration.gvk();
    (gvk.api_version(), gvk.kind)
}

impl Triggers {
    /// One channel per enabled integration.
    pub fn new(integrations: &[&'static dyn JobIntegration]) -> Self {
        let mut senders = HashMap::new();
        let mut receivers = HashMap::new();
        for i in integrations {
            let (tx, rx) = unbounded();
            senders.insert(gvk_key(*i), (tx, i.composed().is_some()));
            receivers.insert(gvk_key(*i), rx);
        }
        Self {
            senders: Arc::new(senders),
            receivers: Arc::new(Mutex::new(receivers)),
            ungater: None,
        }
    }

    /// The same triggers, also routing TAS-admitted Workloads to the topology ungater;
    /// returns the ungater's trigger stream.
    pub fn with_ungater(mut self) -> (Self, UnboundedReceiver<ObjectRef<CompactObject>>) {
        let (tx, rx) = unbounded();
        self.ungater = Some(tx);
        (self, rx)
    }

    /// Asks the topology ungater to look at a Workload admitted with a topology
    /// assignment (any other Workload has no pods to ungate).
    pub fn trigger_ungater(&self, wl: &Workload) {
        let Some(tx) = &self.ungater else { return };
        let tas = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .is_some_and(|a| {
                a.pod_set_assignments
                    .iter()
                    .any(|p| p.topology_assignment.is_some())
            });
        if let (true, Some(ns), Some(name)) = (
            tas,
            wl.metadata.namespace.as_deref(),
            wl.metadata.name.as_deref(),
        ) {
            let r = ObjectRef::new_with(name, Kind::Workload.api_resource()).within(ns);
            let _ = tx.unbounded_send(r);
        }
    }

    /// The trigger stream of an integration (taken once).
    pub fn receiver(
        &self,
        integration: &dyn JobIntegration,
    ) -> UnboundedReceiver<ObjectRef<CompactObject>> {
        let taken = self
            .receivers
            .lock()
            .ok()
            .and_then(|mut r| r.remove(&gvk_key(integration)));
        taken.unwrap_or_else(|| unbounded().1)
    }

    /// Asks the reconciler of the Workload's owning job to look at that job again.
    pub fn trigger_owner(&self, wl: &ObjectMeta) {
        let Some(ns) = wl.namespace.as_deref() else {
            return;
        };
        for owner in wl.owner_references.iter().flatten() {
            if owner.controller != Some(true) {
                continue;
            }
            let key = (owner.api_version.clone(), owner.kind.clone());
            if let Some((tx, true)) = self.senders.get(&key) {
                if let Some(name) = wl.name.as_deref() {
                    let r = ObjectRef::new_with(name, Kind::Workload.api_resource()).within(ns);
                    let _ = tx.unbounded_send(r);
                }
                continue;
            }
            if let Some((tx, _)) = self.senders.get(&key) {
                let gvk = kube::core::GroupVersionKind::try_from(&kube::core::TypeMeta {
                    api_version: owner.api_version.clone(),
                    kind: owner.kind.clone(),
                });
                if let Ok(gvk) = gvk {
                    let r = ObjectRef::new_with(&owner.name, job_api_resource(&gvk)).within(ns);
                    let _ = tx.unbounded_send(r);
                }
            }
        }
    }
}

/// What a job reconciler needs.
#[derive(Clone)]
pub struct Ctx {
    pub stores: Stores,
    pub writer: Arc<Writer>,
    pub recorder: Recorder,
    pub engine: Sender<Input>,
    pub manage_without_queue_name: bool,
    /// waitForPodsReady is on: the job's Workload carries the `PodsReady` condition.
    pub wait_for_pods_ready: bool,
    /// Where jobs without a queue name are managed (with `manage_without_queue_name`).
    pub namespaces: super::managed_namespaces::NamespaceCheck,
    /// Workloads this controller created that its watch may not show yet: a reconcile
    /// in that window would otherwise create them again (a write the API server refuses
    /// with a conflict; one job in ten did so in the cluster benchmark).
    pub created: moka::sync::Cache<WorkloadKey, ()>,
}

/// How long a created Workload is trusted to exist before the watch shows it.
pub const CREATED_GRACE: Duration = Duration::from_secs(30);

/// The cache of just-created Workloads for [`Ctx::created`].
pub fn created_cache() -> moka::sync::Cache<WorkloadKey, ()> {
    moka::sync::Cache::builder()
        .time_to_live(CREATED_GRACE)
        .build()
}

struct JobCtx {
    integration: &'static dyn JobIntegration,
    ctx: Ctx,
    /// The kind's succeeded pods, for kinds whose pods alone may decide their success.
    pods: Option<Arc<super::succeeded_pods::SucceededPods>>,
    retries: RetryBackoff,
    own_writes: own_writes::OwnWrites,
}

/// Per-job delays before reconciling again after a failure, in the shape of kube's
/// `default_backoff` (800 ms, doubling, at most 30 s), reset by a clean reconcile: a job
/// that fails every time (a 403, a webhook that refuses the write) is retried ever more
/// slowly rather than every second, while one blip costs under a second.
#[derive(Default)]
struct RetryBackoff(Mutex<HashMap<(Option<String>, String), u32>>);

impl RetryBackoff {
    /// Records one more failure of `meta`'s job; the delay before its next attempt.
    fn failed(&self, meta: &ObjectMeta) -> Duration {
        let mut failures = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = failures.entry(job_key(meta)).or_insert(0);
        *n = n.saturating_add(1);
        retry_delay(*n)
    }

    /// The job reconciled cleanly: its next failure starts from the shortest delay.
    fn succeeded(&self, meta: &ObjectMeta) {
        let mut failures = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.remove(&job_key(meta));
    }
}

fn job_key(meta: &ObjectMeta) -> (Option<String>, String) {
    (
        meta.namespace.clone(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// 800 ms after the first failure, doubling with each one after, at most 30 s.
fn retry_delay(failures: u32) -> Duration {
    const FIRST: Duration = Duration::from_millis(800);
    const MAX: Duration = Duration::from_secs(30);
    let doublings = failures.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(MAX)
}

/// Runs the job controller of one integration until aborted.
pub async fn run(
    client: Client,
    integration: &'static dyn JobIntegration,
    ctx: Ctx,
    triggers: UnboundedReceiver<ObjectRef<CompactObject>>,
) {
    // A job is looked at only once the Workloads are listed: before, every job whose
    // Workload is not in the store yet would get a create the API server refuses (after
    // a restart or a new term of leadership, one per job in the cluster).
    // Polled again and again: kube's store readiness wakes only the last task that
    // waited on it, and the topology ungater's controller waits on the same store.
    loop {
        let ready = ctx.stores.workloads.wait_until_ready();
        match tokio::time::timeout(Duration::from_millis(200), ready).await {
            Ok(Ok(())) => break,
            Ok(Err(_)) => return, // the Workload watch ended: so does the controller
            Err(_) => {}
        }
    }
    let ar = job_api_resource(&integration.gvk());
    let (pods, pod_triggers) = if integration.counts_succeeded_pods() {
        let (pods, triggers) =
            super::succeeded_pods::watch(client.clone(), integration.gvk(), ar.clone());
        (Some(pods), Some(triggers))
    } else {
        (None, None)
    };
    let api: Api<CompactObject> = Api::all_with(client, &ar);
    let mut wc = watcher::Config::default();
    if !ctx.manage_without_queue_name {
        // Only queue-labelled jobs are managed: the cache holds nothing else.
        wc = wc.labels(QUEUE_NAME_LABEL);
    }
    let jctx = Arc::new(JobCtx {
        integration,
        ctx,
        pods,
        retries: RetryBackoff::default(),
        own_writes: own_writes::OwnWrites::default(),
    });
    // Every managed job is kept in memory: compact, and without its managedFields.
    let writer = reflector::store::Writer::new(ar.clone());
    let jobs = writer.as_reader();
    let (known, mut vanished) = (jobs.clone(), orphans::VanishedJobs::default());
    let orphan_ctx = jctx.ctx.clone();
    let stream = watcher::watcher(api, wc)
        .default_backoff()
        .modify(|j: &mut CompactObject| j.metadata.managed_fields = None)
        .inspect(move |event| {
            let Ok(event) = event else { return };
            for job in vanished.observe(event, &known) {
                orphans::collect_later(orphan_ctx.clone(), integration, job);
            }
        })
        .reflect(writer)
        .applied_objects();
    let mut controller = Controller::for_stream_with(stream, jobs, ar).reconcile_on(triggers);
    if let Some(pod_triggers) = pod_triggers {
        controller = controller.reconcile_on(pod_triggers);
    }
    controller
        .run(reconcile, error_policy, jctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                debug!(error = %e, "job reconcile");
            }
        })
        .await;
}

fn error_policy(job: Arc<CompactObject>, e: &SyncError, jctx: Arc<JobCtx>) -> Action {
    let delay = jctx.retries.failed(job.meta());
    warn!(job = %job.meta().name.clone().unwrap_or_default(), error = %e, ?delay, "job reconcile failed; retrying");
    Action::requeue(delay)
}

async fn reconcile(job: Arc<CompactObject>, jctx: Arc<JobCtx>) -> Result<Action, SyncError> {
    let meta = job.meta().clone();
    let result = reconcile_job(job, jctx.clone()).await;
    if result.is_ok() {
        jctx.retries.succeeded(&meta);
    }
    result
}

async fn reconcile_job(job: Arc<CompactObject>, jctx: Arc<JobCtx>) -> Result<Action, SyncError> {
    let JobCtx {
        integration,
        ctx,
        own_writes,
        pods,
        ..
    } = &*jctx;
    let integration = *integration;
    let name = job.meta().name.clone().unwrap_or_default();
    let ns = job.meta().namespace.clone().unwrap_or_default();
    if job.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if own_writes.predates_own_write(job.meta()) {
        // The watch has not delivered kuota's own last write yet; its event reconciles
        // the job again (and the requeue, should it never come).
        return Ok(Action::requeue(OWN_WRITE_RECHECK));
    }
    let value = serde_json::to_value(&*job).map_err(|source| SyncError::Decode {
        name: name.clone(),
        source,
    })?;
    let view = JobObject::from_value(&value).map_err(|source| SyncError::Decode {
        name: name.clone(),
        source,
    })?;
    let opts = RuleOptions {
        manage_jobs_without_queue_name: ctx.manage_without_queue_name,
        ..RuleOptions::default()
    };
    // A managed parent's child (a JobSet's Jobs, a RayJob's RayCluster) is admitted
    // through its parent, never on its own (Kueue's IsOwnerManagedByKueue).
    let owned_by_managed_job = view
        .metadata
        .controller_owner()
        .is_some_and(|o| is_managed_owner_kind(&o.api_version, &o.kind));
    if !opts.is_managed(&view) || owned_by_managed_job {
        return Ok(Action::await_change());
    }
    if crate::integrations::queue_name(&view).is_none() {
        // Managed only for manageJobsWithoutQueueName, and only where
        // managedJobsNamespaceSelector says (never kube-system nor kuota's namespace).
        let client = &ctx.writer.client;
        let managed = ctx.namespaces.manages(client, &ns).await;
        if !managed.map_err(|source| SyncError::Api {
            name: name.clone(),
            source,
        })? {
            return Ok(Action::await_change());
        }
    }
    // A job naming a prebuilt Workload (a MultiKueue worker's copy of a manager's job) is
    // admitted as that Workload, never as one of its own (Kueue's `PrebuiltWorkloadFor`).
    let prebuilt = view
        .metadata
        .label(PREBUILT_WORKLOAD_LABEL)
        .map(str::to_string);
    let wl_name = prebuilt
        .clone()
        .unwrap_or_else(|| integration.workload_name(&view));
    let key = WorkloadKey::new(ns.as_str(), wl_name);
    let r = ObjectRef::new_with(&key.name, Kind::Workload.api_resource()).within(&ns);
    let wl: Option<Workload> = match ctx.stores.workloads.get(&r) {
        Some(o) => Some(decode(Kind::Workload, &*o)?),
        None => None,
    };
    if prebuilt.is_some() {
        let uid = view.metadata.uid.as_deref().unwrap_or_default();
        match &wl {
            // Kueue waits for it: the job stays suspended, and nothing is created.
            None => return Ok(Action::requeue(PREBUILT_RECHECK)),
            Some(wl) if !prebuilt::owned_by(wl, uid) => {
                let gvk = integration.gvk();
                prebuilt::adopt(ctx, wl, &gvk, &name, uid).await?;
                return Ok(Action::await_change());
            }
            Some(_) => {}
        }
    }
    let mut state = job_state(integration, &view);
    if let Some(wl) = &wl {
        state.needs_restore = job::restore_patch(integration, &value, wl)?.is_some();
    }
    // What its pod sets are built from besides itself (a TrainJob's runtime), read only
    // when it matters: to build its Workload, or to tell whether its pods are ready.
    let resolved = if wl.is_none() || ctx.wait_for_pods_ready {
        dependencies::resolve(&ctx.writer.client, integration, &value, &name).await?
    } else {
        None
    };
    if ctx.wait_for_pods_ready {
        let ready = match &resolved {
            Some(Ok(r)) => JobObject::from_value(r).is_ok_and(|r| integration.pods_ready(&r)),
            _ => integration.pods_ready(&view),
        };
        state.pods_ready = Some(ready);
    }
    let step = plan(&state, wl.as_ref());
    debug!(job = %name, namespace = %ns, ?step, "job reconcile");
    if let (Step::Start, Some(wl)) = (&step, &wl)
        && !admission_usable(ctx, wl)
    {
        // Not an admission kuota can stand behind: the job stays suspended (the engine
        // task reports the Workload). Looked at again in case the ClusterQueue was only
        // late to arrive, or the Workload is fixed.
        debug!(job = %name, namespace = %ns, "not started: its Workload's admission is invalid");
        return Ok(Action::requeue(INVALID_ADMISSION_RECHECK));
    }
    // Its pods' success may be seen seconds before its operator counts it: under load,
    // a batch Job's Job controller writes `SuccessCriteriaMet` long after the pods end.
    let succeeded_by_pods = !state.suspended
        && pods.as_ref().is_some_and(|pods| {
            let uid = view.metadata.uid.as_deref().unwrap_or_default();
            integration.succeeded_by_pods(&view, pods.succeeded(uid))
        });
    let decided_success = state.finishing
        && integration
            .outcome_decided(&view)
            .is_some_and(|o| o.succeeded);
    if (decided_success || succeeded_by_pods) && wl.as_ref().is_some_and(holds_quota) {
        // Its quota frees itself shortly: the engine waits for it rather than picking
        // it as a preemption victim (sent on every reconcile; the engine keeps the first).
        let _ = ctx
            .engine
            .send(Input::event(Event::WorkloadFinishing(key.clone())))
            .await;
    }
    let target = Target {
        integration,
        ctx,
        own_writes,
        name,
        ns,
        value,
        resolved,
        key,
    };
    target.carry_out(step, wl).await
}

/// Whether the Workload holds quota and is neither evicted nor finished.
fn holds_quota(wl: &Workload) -> bool {
    wl.status.as_ref().is_some_and(|s| {
        s.admission.is_some()
            && !s.is_condition_true(WORKLOAD_EVICTED)
            && !s.is_condition_true(WORKLOAD_FINISHED)
    })
}

/// Whether a Workload's admission names a ClusterQueue that exists and offers what it
/// assigned.
pub(super) fn admission_usable(ctx: &Ctx, wl: &Workload) -> bool {
    let cq = invalid_admission::admitted_cluster_queue(wl).and_then(|cq| {
        ctx.stores
            .cluster_queues
            .get(&ObjectRef::new_with(cq, Kind::ClusterQueue.api_resource()))
    });
    let offered = cq.map(|cq| invalid_admission::offered(&cq));
    invalid_admission::problems(wl, offered.as_ref()).is_empty()
}

/// One job under reconciliation, and what writing to it and its Workload needs.
struct Target<'a> {
    integration: &'static dyn JobIntegration,
    ctx: &'a Ctx,
    own_writes: &'a own_writes::OwnWrites,
    name: String,
    ns: String,
    value: Value,
    /// The job as its pod-set rules read it, when they read more than the job.
    resolved: Option<Result<Value, IntegrationError>>,
    key: WorkloadKey,
}

impl Target<'_> {
    fn api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.ctx.writer.client.clone(),
            &self.ns,
            &job_api_resource(&self.integration.gvk()),
        )
    }

    /// Applies a JSON patch to the job (nothing when there is none).
    async fn patch_job(&self, p: Option<json_patch::Patch>) -> Result<(), SyncError> {
        let Some(p) = p else {
            return Ok(());
        };
        let pp = PatchParams::default();
        let api = self.api();
        self.landed(api.patch(&self.name, &pp, &Patch::<()>::Json(p)))
            .await
    }

    /// Makes a write to the job: counted when it lands, named with the job when it
    /// fails.
    async fn landed(
        &self,
        write: impl Future<Output = Result<DynamicObject, kube::Error>>,
    ) -> Result<(), SyncError> {
        let answered = write.await.map_err(|source| SyncError::Api {
            name: self.name.clone(),
            source,
        })?;
        self.ctx.writer.wrote(&self.integration.kind());
        self.own_writes.wrote(&answered.metadata);
        Ok(())
    }

    /// Says on the job, in a Warning Event with Kueue's reason, why it gets no Workload.
    fn cannot_compose(&self, why: &IntegrationError) {
        let gvk = self.integration.gvk();
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(gvk.api_version()),
            kind: Some(gvk.kind.clone()),
            name: Some(self.name.clone()),
            namespace: Some(self.ns.clone()),
            uid: self
                .value
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..Default::default()
        };
        let note = format!(
            "{} {}/{} gets no Workload: {why}",
            gvk.kind, self.ns, self.name
        );
        warn!(job = %self.name, namespace = %self.ns, error = %why, "no Workload can be built for the job");
        self.ctx
            .recorder
            .warning(reference, REASON_ERR_WORKLOAD_COMPOSE, &note);
    }

    /// Makes the writes of one step.
    async fn carry_out(&self, step: Step, wl: Option<Workload>) -> Result<Action, SyncError> {
        let Target {
            integration,
            ctx,
            name,
            ns,
            value,
            resolved,
            key,
            ..
        } = self;
        let wl_writer = WorkloadWriter {
            writer: &ctx.writer,
            stores: &ctx.stores,
            recorder: &ctx.recorder,
        };
        match (step, wl) {
            (Step::Nothing, _) => {}
            (Step::CreateWorkload, _) if ctx.created.contains_key(key) => {
                // Created moments ago; the Workload watch wakes this job when it arrives.
                return Ok(Action::requeue(Duration::from_secs(5)));
            }
            (Step::CreateWorkload, _) => {
                let job = match resolved {
                    Some(Err(why)) => {
                        // What it depends on is missing or unusable: no Workload, so no
                        // quota; looked at again, as the object it names may yet come.
                        self.cannot_compose(why);
                        return Ok(Action::requeue(DEPENDENCY_RECHECK));
                    }
                    Some(Ok(resolved)) => resolved,
                    None => value,
                };
                match create_workload(ctx, *integration, job, name, ns).await {
                    Err(SyncError::Integration { source, .. }) => {
                        // Nothing it could be admitted as: no Workload, so no quota, and
                        // no retry until the object changes.
                        self.cannot_compose(&source);
                        return Ok(Action::await_change());
                    }
                    other => other?,
                }
                ctx.created.insert(key.clone(), ());
            }
            (Step::Finish { reason, message }, _) => {
                wl_writer
                    .write(key, |wl, now| finish_patch(wl, reason, &message, now))
                    .await?;
            }
            (Step::Start, Some(wl)) => {
                let flavors = &ctx.stores.flavors;
                self.patch_job(job::start_patch(*integration, value, &wl, flavors)?)
                    .await?;
                info!(job = %name, namespace = %ns, "job started");
            }
            (Step::Stop, _) => self.patch_job(job::stop_patch(*integration, value)).await?,
            (Step::Resume, _) => {
                self.patch_job(job::resume_patch(*integration, value))
                    .await?
            }
            (Step::ResetStatus(body), _) => {
                let pp = PatchParams::default();
                let api = self.api();
                self.landed(api.patch_status(name, &pp, &Patch::Merge(&body)))
                    .await?;
            }
            (Step::Restore, Some(wl)) => {
                match self
                    .patch_job(job::restore_patch(*integration, value, &wl)?)
                    .await
                {
                    // Kubernetes may refuse a template change (a Job whose pods it still
                    // counts active). Nothing waits on the restore (the quota is already
                    // back, and a start rebuilds the template from the Workload), so it is
                    // not retried until the job changes again.
                    Err(SyncError::Api { source, .. })
                        if is_invalid(&source) && !is_stale_patch(&source) =>
                    {
                        info!(job = %name, namespace = %ns, error = %source,
                            "pod template not restored: Kubernetes refuses the change");
                    }
                    other => other?,
                }
            }
            (Step::Requeue, _) => {
                wl_writer.write(key, requeue_patch).await?;
                let _ = ctx
                    .engine
                    .send(Input::event(Event::WorkloadEvicted(key.clone())))
                    .await;
            }
            (Step::PodsReady(readiness), _) => {
                let build =
                    |wl: &Workload, now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| {
                        super::pods_ready::condition_patch(wl, readiness, now)
                    };
                wl_writer.write(key, build).await?;
            }
            (Step::ChecksReady, wl) => {
                let written = wl_writer.write(key, super::checks::admitted_patch).await?;
                if let (Written::Yes(_), Some(wl)) = (written, wl) {
                    let now = (ctx.writer.clock)();
                    super::checks::record_admission(ctx.writer.metrics(), &wl, &now);
                }
                info!(job = %name, namespace = %ns, "every admission check is Ready: admitted");
            }
            (Step::Start | Step::Restore, None) => {}
        }
        Ok(Action::await_change())
    }
}

/// Creates the job's Workload (an existing one is fine: a reconcile raced the watch).
async fn create_workload(
    ctx: &Ctx,
    integration: &dyn JobIntegration,
    job: &Value,
    name: &str,
    ns: &str,
) -> Result<(), SyncError> {
    let integration_error = |source| SyncError::Integration {
        name: format!("{ns}/{name}"),
        source,
    };
    let view = JobObject::from_value(job).map_err(|source| SyncError::Decode {
        name: name.to_string(),
        source,
    })?;
    let unrunnable = integration.unrunnable(&view);
    if !unrunnable.is_empty() {
        return Err(integration_error(IntegrationError { errors: unrunnable }));
    }
    let wl = integration.workload(job).map_err(integration_error)?;
    create_built_workload(ctx, wl, name, ns).await
}

/// Creates a Workload built for job `name`, with its class's priority.
pub(super) async fn create_built_workload(
    ctx: &Ctx,
    mut wl: Workload,
    name: &str,
    ns: &str,
) -> Result<(), SyncError> {
    wl.spec.priority = class_priority(ctx, &wl, &format!("{ns}/{name}")).await?;
    let obj: DynamicObject = serde_json::to_value(&wl)
        .and_then(serde_json::from_value)
        .map_err(|source| SyncError::Decode {
            name: name.to_string(),
            source,
        })?;
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.writer.client.clone(),
        ns,
        &Kind::Workload.api_resource(),
    );
    let pp = PostParams {
        field_manager: Some("kuota".to_string()),
        ..PostParams::default()
    };
    match api.create(&pp, &obj).await {
        Ok(_) => {
            ctx.writer.wrote("Workload");
            info!(job = %name, namespace = %ns, workload = ?wl.metadata.name, "workload created");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(SyncError::Api {
            name: name.to_string(),
            source,
        }),
    }
}

/// The value of the priority class a new Workload references, as Kueue's job framework
/// copies it into `spec.priority` (the Workload CRD rejects a class reference without
/// it). A class that does not exist yet is an error, retried like Kueue's.
async fn class_priority(ctx: &Ctx, wl: &Workload, job: &str) -> Result<Option<i32>, SyncError> {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let Some(class) = &wl.spec.priority_class_ref else {
        return Ok(wl.spec.priority);
    };
    let workload_class = class.kind == WORKLOAD_PRIORITY_CLASS_KIND;
    // The watched classes answer without a request per Workload; a class created moments
    // ago may not be in the store yet, and is read from the API server.
    let (store, kind) = if workload_class {
        (
            &ctx.stores.workload_priority_classes,
            Kind::WorkloadPriorityClass,
        )
    } else {
        (&ctx.stores.priority_classes, Kind::PriorityClass)
    };
    let stored = store
        .get(&ObjectRef::new_with(&class.name, kind.api_resource()))
        .and_then(|c| c.data.get("value").and_then(Value::as_i64))
        .and_then(|v| i32::try_from(v).ok());
    if let Some(value) = stored {
        return Ok(Some(value));
    }
    let client = ctx.writer.client.clone();
    let found = if workload_class {
        Api::<WorkloadPriorityClass>::all(client)
            .get(&class.name)
            .await
            .map(|c| c.value)
    } else {
        Api::<PriorityClass>::all(client)
            .get(&class.name)
            .await
            .map(|c| c.value)
    };
    found.map(Some).map_err(|source| SyncError::Priority {
        name: job.to_string(),
        kind: class.kind.clone(),
        class: class.name.clone(),
        source,
    })
}

mod dependencies;
pub mod orphans;
mod own_writes;
mod prebuilt;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod kind_requests;
