//! The manager's side of MultiKueue (Kueue's `wlReconciler`): for each Workload under a
//! MultiKueue check, what [`super::plan`] decides is carried out in the workers and on the
//! Workload. Triggered by the Workload's own changes, by its copies' and their jobs'
//! changes in the workers, and by the checks' and configs' changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::plan::{self, Group, Plan};
use super::remote::{self, RemoteError, Synced, Worker};
use super::workers::{Remote, Workers};
use crate::api::{AdmissionCheck, CheckState, MULTIKUEUE_CONTROLLER, MultiKueueConfig, Workload};
use crate::config::multikueue::MultiKueue;
use crate::controller::actuate::events::{Recorder, workload_ref};
use crate::controller::actuate::workload::{WorkloadWriter, Written, finish_patch, patch_body};
use crate::controller::actuate::{WriteError, Writer};
use crate::controller::compact::CompactObject;
use crate::controller::translate::{TranslateError, decode};
use crate::controller::watch::{Kind, Stores, job_api_resource};
use crate::engine::WorkloadKey;
use crate::integrations::JobIntegration;

/// Kueue's `syncDeferredRequeueAfter`: a job mirror deferred until the manager's job starts.
const DEFERRED: Duration = Duration::from_secs(2);

/// Why one reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    Translate(#[from] TranslateError),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("admission check {check}: {why}")]
    Config { check: String, why: String },
}

/// What the reconciler reads and writes with.
pub struct Ctx {
    pub client: Client,
    pub stores: Stores,
    pub writer: Arc<Writer>,
    pub recorder: Recorder,
    pub checks: Store<AdmissionCheck>,
    pub configs: Store<MultiKueueConfig>,
    pub workers: Workers,
    pub settings: MultiKueue,
    /// The enabled job kinds MultiKueue can dispatch.
    pub kinds: Vec<&'static dyn JobIntegration>,
    /// Incremental dispatcher: when each Workload's current round began.
    pub rounds: Mutex<HashMap<WorkloadKey, Instant>>,
    /// Where Kueue's `multikueue_*` counters are recorded.
    pub metrics: crate::telemetry::Metrics,
}

/// The MultiKueue check among `wl`'s checks, with the clusters of its config (Kueue's
/// `GetMultiKueueAdmissionCheck` and `ConfigForAdmissionCheck`).
fn our_check(ctx: &Ctx, wl: &Workload) -> Option<(String, Result<Vec<String>, String>)> {
    let states = &wl.status.as_ref()?.admission_checks;
    states.iter().find_map(|s| {
        let ac = ctx.checks.get(&ObjectRef::new(&s.name))?;
        (ac.spec.controller_name == MULTIKUEUE_CONTROLLER)
            .then(|| (s.name.clone(), config_clusters(&ctx.configs, &ac)))
    })
}

/// The workers a MultiKueue check's config lists, in its order, or why there are none
/// (Kueue's messages).
pub fn config_clusters(
    configs: &Store<MultiKueueConfig>,
    ac: &AdmissionCheck,
) -> Result<Vec<String>, String> {
    let r = ac
        .spec
        .parameters
        .as_ref()
        .ok_or_else(|| "missing parameters reference".to_string())?;
    if r.api_group != "kueue.x-k8s.io" || r.kind != "MultiKueueConfig" {
        return Err(format!(
            "unsupported parameters reference {}/{}, expecting kueue.x-k8s.io/MultiKueueConfig",
            r.api_group, r.kind
        ));
    }
    configs
        .get(&ObjectRef::new(&r.name))
        .map(|c| c.spec.clusters.clone())
        .ok_or_else(|| format!("multikueueconfigs.kueue.x-k8s.io {:?} not found", r.name))
}

/// The job that owns `wl` (its controller, else its first owner).
struct Owner {
    api_version: String,
    kind: String,
    name: String,
}

/// `wl`'s owning job, and its kind when it is one MultiKueue dispatches.
fn owner_kind<'k>(
    kinds: &'k [&'static dyn JobIntegration],
    wl: &Workload,
) -> (Option<&'k dyn JobIntegration>, Option<Owner>) {
    let owners = wl.metadata.owner_references.as_deref().unwrap_or_default();
    let owner = owners
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| owners.first());
    let Some(owner) = owner else {
        return (None, None);
    };
    let kind = kinds.iter().copied().find(|k| {
        let gvk = k.gvk();
        gvk.api_version() == owner.api_version && gvk.kind == owner.kind
    });
    let owner = Owner {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
    };
    (kind, Some(owner))
}

/// Kueue's `GroupVersionKind.String()`: `batch/v1, Kind=Job`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    format!("{api_version}, Kind={kind}")
}

pub async fn reconcile(obj: Arc<CompactObject>, ctx: Arc<Ctx>) -> Result<Action, DispatchError> {
    let wl: Workload = decode(Kind::Workload, &*obj)?;
    let Some((check, clusters)) = our_check(&ctx, &wl) else {
        return Ok(Action::await_change());
    };
    let clusters = clusters.map_err(|why| DispatchError::Config {
        check: check.clone(),
        why,
    })?;
    let ns = wl.namespace().unwrap_or_default();
    let name = wl.name_any();
    let (kind, owner) = owner_kind(&ctx.kinds, &wl);
    let deleted = wl.metadata.deletion_timestamp.is_some();
    let mut remotes: Vec<(String, Copy)> = Vec::new();
    let mut unavailable = Vec::new();
    for c in &clusters {
        match ctx.workers.connected(c) {
            Some(r) => {
                let copy = r
                    .workloads
                    .get(&ObjectRef::new(&name).within(&ns))
                    .map(|w| (*w).clone());
                remotes.push((c.clone(), Copy { remote: r, copy }));
            }
            None => unavailable.push(c.clone()),
        }
    }
    let job_name = owner.as_ref().map(|o| o.name.clone());
    if deleted {
        // Its copies go with it (Kueue removes them before the Workload goes).
        for (worker, copy) in &remotes {
            if copy.copy.is_some() {
                let w = Worker {
                    name: worker,
                    client: &copy.remote.client,
                };
                let origin = &ctx.settings.origin;
                remote::remove(
                    &w,
                    &ctx.writer,
                    kind,
                    &ns,
                    job_name.as_deref(),
                    &name,
                    origin,
                )
                .await?;
            }
        }
        return Ok(Action::await_change());
    }
    let local_job = match (kind, job_name.as_deref()) {
        (Some(k), Some(j)) => read_job(&ctx, k, &ns, j).await?,
        _ => None,
    };
    let dispatchable = dispatchable(kind, owner.as_ref(), local_job.as_ref());
    let admitting = wl.status.as_ref().and_then(|s| s.cluster_name.clone());
    let key = WorkloadKey::new(ns.as_str(), name.as_str());
    let round_age = ctx
        .rounds
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .map(Instant::elapsed);
    let views: Vec<(String, Option<&Workload>)> = remotes
        .iter()
        .map(|(n, c)| (n.clone(), c.copy.as_ref()))
        .collect();
    let group = Group {
        local: &wl,
        check: &check,
        remotes: views,
        unavailable: unavailable.clone(),
        admitting_lost_for: admitting.map(|a| ctx.workers.lost_for(&a)),
        worker_lost_timeout: ctx.settings.worker_lost_timeout,
        dispatchable,
        dispatcher: &ctx.settings.dispatcher,
        config_order: &clusters,
        round_age,
    };
    let p = plan::plan(&group);
    debug!(workload = %key, ?p, "multikueue plan");
    let target = Target {
        ctx: &ctx,
        wl: &wl,
        key: &key,
        check: &check,
        kind,
        job_name: job_name.as_deref(),
        local_job: local_job.as_ref(),
        remotes: &remotes,
    };
    target.carry_out(p).await
}

/// Kueue's adapter checks: a kind MultiKueue dispatches, and a job it is told to manage.
fn dispatchable(
    kind: Option<&dyn JobIntegration>,
    owner: Option<&Owner>,
    job: Option<&Value>,
) -> Result<(), String> {
    let Some(_) = kind else {
        return Err(match owner {
            Some(o) => format!(
                "No multikueue adapter found for owner kind {:?}",
                gvk_string(&o.api_version, &o.kind)
            ),
            None => "No multikueue adapter found".to_string(),
        });
    };
    let managed_by = job
        .and_then(|j| j.pointer("/spec/managedBy"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if managed_by != MULTIKUEUE_CONTROLLER {
        return Err(format!(
            "The owner is not managed by Kueue: Expecting spec.managedBy to be \
             {MULTIKUEUE_CONTROLLER:?} not {managed_by:?}"
        ));
    }
    Ok(())
}

async fn read_job(
    ctx: &Ctx,
    kind: &dyn JobIntegration,
    ns: &str,
    name: &str,
) -> Result<Option<Value>, DispatchError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), ns, &job_api_resource(&kind.gvk()));
    let job = api
        .get_opt(name)
        .await
        .map_err(|source| DispatchError::Api {
            what: format!("{} {ns}/{name}", kind.kind()),
            source,
        })?;
    Ok(job.and_then(|j| serde_json::to_value(j).ok()))
}

/// A worker's connection and the copy found there.
struct Copy {
    remote: Remote,
    copy: Option<Workload>,
}

/// One Workload under reconciliation, and what carrying out its plan needs.
struct Target<'a> {
    ctx: &'a Ctx,
    wl: &'a Workload,
    key: &'a WorkloadKey,
    check: &'a str,
    kind: Option<&'a dyn JobIntegration>,
    job_name: Option<&'a str>,
    local_job: Option<&'a Value>,
    remotes: &'a [(String, Copy)],
}

impl Target<'_> {
    /// The ClusterQueue the Workload's quota is reserved in.
    fn cluster_queue(&self) -> String {
        let admission = self.wl.status.as_ref().and_then(|s| s.admission.as_ref());
        admission
            .map(|a| a.cluster_queue.clone())
            .unwrap_or_default()
    }

    fn worker(&self, name: &str) -> Option<Worker<'_>> {
        let (n, c) = self.remotes.iter().find(|(n, _)| n == name)?;
        Some(Worker {
            name: n,
            client: &c.remote.client,
        })
    }

    async fn carry_out(&self, p: Plan) -> Result<Action, DispatchError> {
        let ctx = self.ctx;
        let (ns, name) = (&*self.key.namespace, &*self.key.name);
        let origin = ctx.settings.origin.as_str();
        // The check turns Ready only once the job exists in the worker (Kueue's SyncJob
        // before syncAdmittingRemoteState): a worker that refuses the job leaves it Pending.
        let status = p.check.is_some() || p.nominate.is_some();
        if status && p.sync_job.is_none() {
            self.write_status(&p).await?;
        }
        if p.new_round {
            let mut rounds = ctx.rounds.lock().unwrap_or_else(PoisonError::into_inner);
            rounds.insert(self.key.clone(), Instant::now());
        }
        for worker in &p.remove {
            if let Some(w) = self.worker(worker) {
                remote::remove(&w, &ctx.writer, self.kind, ns, self.job_name, name, origin).await?;
                debug!(workload = %self.key, worker = %worker, "copy removed");
            }
        }
        for worker in &p.create {
            if let Some(w) = self.worker(worker)
                && remote::create_workload(&w, &ctx.writer, self.wl, origin).await?
            {
                let cq = self.cluster_queue();
                ctx.metrics.record_multikueue_dispatched(&cq, worker);
                info!(workload = %self.key, worker = %worker, "copied to the worker");
            }
        }
        let mut again = p.requeue;
        if let (Some(worker), Some(kind), Some(job)) = (&p.sync_job, self.kind, self.local_job)
            && let Some(w) = self.worker(worker)
        {
            let synced = remote::sync_job(&w, &ctx.client, &ctx.writer, kind, job, name, origin)
                .await
                .inspect_err(|e| self.cannot_sync(worker, e))?;
            if synced == Synced::Created {
                info!(workload = %self.key, worker = %worker, "job created in the worker");
            }
            if synced == Synced::Deferred {
                again = Some(again.map_or(DEFERRED, |a| a.min(DEFERRED)));
            }
            if status {
                self.write_status(&p).await?;
            }
        }
        if let Some((reason, message)) = &p.finish {
            let writer = WorkloadWriter {
                writer: &ctx.writer,
                stores: &ctx.stores,
                recorder: &ctx.recorder,
            };
            writer
                .write(self.key, |wl, now| finish_patch(wl, reason, message, now))
                .await?;
            info!(workload = %self.key, reason = %reason, "finished in its worker");
        }
        Ok(again.map_or_else(Action::await_change, Action::requeue))
    }

    /// A job the worker cannot take (its CRD missing there, a webhook refusing it): said
    /// on the Workload, and retried.
    fn cannot_sync(&self, worker: &str, e: &RemoteError) {
        let note = format!("The job could not be created in worker cluster {worker:?}: {e}");
        let r = workload_ref(self.key, Some(&self.wl.metadata));
        self.ctx.recorder.workload_warning(r, "MultiKueue", &note);
    }

    /// Writes the check's state, `clusterName` and `nominatedClusterNames`, provided the
    /// check is still in the state the plan was made from (an eviction may have reset it).
    async fn write_status(&self, p: &Plan) -> Result<(), DispatchError> {
        let seen = plan::check_state(self.wl, self.check).map(|s| s.state.clone());
        let check = self.check;
        let build = |wl: &Workload, now: &Time| -> Option<Value> {
            let states = &wl.status.as_ref()?.admission_checks;
            let current = states.iter().find(|s| s.name == check)?;
            if Some(&current.state) != seen.as_ref() {
                return None;
            }
            let mut status = json!({});
            if let Some((state, message)) = &p.check {
                let mut states = states.clone();
                for s in states.iter_mut().filter(|s| s.name == check) {
                    s.state = state.as_str().to_string();
                    s.message = message.clone();
                    s.last_transition_time = now.clone();
                }
                status["admissionChecks"] = json!(states);
                if *state == CheckState::Ready {
                    status["nominatedClusterNames"] = Value::Null;
                }
            }
            if let Some(c) = &p.cluster_name {
                status["clusterName"] = json!(c);
            }
            if let Some(n) = &p.nominate {
                status["nominatedClusterNames"] = json!(n);
            }
            Some(patch_body(wl, status))
        };
        let writer = WorkloadWriter {
            writer: &self.ctx.writer,
            stores: &self.ctx.stores,
            recorder: &self.ctx.recorder,
        };
        // A plan made from a store that lagged this controller's own write finds the
        // check moved on and writes nothing: no second count or Event for it (Kueue counts
        // an admission only when its reconcile turns the check Ready).
        if writer.write(self.key, build).await? == Written::Unchanged {
            return Ok(());
        }
        if let (Some((CheckState::Ready, _)), Some(worker)) = (&p.check, &p.cluster_name) {
            let metrics = &self.ctx.metrics;
            metrics.record_multikueue_admitted(&self.cluster_queue(), worker);
        }
        if let Some((state, message)) = &p.check {
            let r = workload_ref(self.key, Some(&self.wl.metadata));
            self.ctx.recorder.workload_normal(r, "MultiKueue", message);
            info!(workload = %self.key, state = state.as_str(), %message, "MultiKueue check");
        }
        Ok(())
    }
}

pub fn error_policy(wl: Arc<CompactObject>, e: &DispatchError, _: Arc<Ctx>) -> Action {
    warn!(workload = %wl.metadata.name.clone().unwrap_or_default(), error = %e, "MultiKueue dispatch; retrying");
    Action::requeue(Duration::from_secs(5))
}
