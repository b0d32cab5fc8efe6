//! Reconciliation of composed jobs (Kueue's pod controller over `ComposableJob`): plain
//! pods and pod groups, whose members are gated by the webhook rather than suspended.
//!
//! The unit of work is one Workload, named by [`ComposedJob::workload_name_of`] (a group's
//! name, or `pod-<name>-<hash>` for a pod alone): its members are the watched pods that
//! map to that name. The same pure [`plan`] as for one-object jobs picks the next step;
//! here a start ungates each gated member with its pod set's flavors, a stop deletes the
//! members that may run (Kueue stops pod groups by deleting them), and members lose their
//! finalizer once their Workload is finished, once they are done, or once they are being
//! deleted and run nothing, so that no queue-labelled pod is ever left stuck.
//!
//! A Workload whose members are all gone is left to the garbage collector (the members
//! own it), which gives its quota back when it is deleted.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use futures::channel::mpsc::UnboundedReceiver;
use futures::{FutureExt, StreamExt};
use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch as JsonPatch, PatchOperation, RemoveOperation, TestOperation};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::core::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use serde_json::Value;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::actuate::job::member_start_patch;
use super::actuate::workload::{
    WorkloadWriter, Written, delete_workload, finish_patch, requeue_patch,
};
use super::actuate::{Writer, is_not_found};
use super::compact::CompactObject;
use super::translate::decode;
use super::watch::{Input, Kind, job_api_resource};
use super::workload_sync::{
    Ctx, JobState, Step, SyncError, admission_usable, create_built_workload, plan,
};
use crate::api::Workload;
use crate::api::constants::{WORKLOAD_EVICTED, WORKLOAD_FINISHED};
use crate::engine::{Event, WorkloadKey};
use crate::integrations::pod_group::REASON_ERR_WORKLOAD_COMPOSE;
use crate::integrations::{ComposeError, ComposedJob, JobIntegration};

/// Every Workload with members is looked at again this often, whatever the watches said
/// (a Workload deleted by hand sends no trigger; its members must not stay stuck).
const RESYNC: Duration = Duration::from_secs(15);
/// The longest delay before a failed reconcile is retried.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// (namespace, Workload name).
type Key = (String, String);

/// What one reconcile of a composed job reads and writes with.
struct GroupCtx {
    integration: &'static dyn JobIntegration,
    composed: &'static dyn ComposedJob,
    ctx: Ctx,
    members: Store<DynamicObject>,
    resource: ApiResource,
    /// The members' parents, for kinds whose Workloads their parent names and shapes.
    parents: Option<Parents>,
}

/// The watched parents of a composed kind's members.
#[derive(Clone)]
struct Parents {
    store: Store<DynamicObject>,
    resource: ApiResource,
}

impl Parents {
    /// The parent of `member`, as JSON.
    fn of(&self, composed: &dyn ComposedJob, ns: &str, member: &Value) -> Option<Value> {
        let name = composed.parent_name_of(member)?;
        let r = ObjectRef::new_with(&name, self.resource.clone()).within(ns);
        let p = self.store.get(&r)?;
        serde_json::to_value(&*p).ok()
    }
}

/// The Workload a member belongs to, with its parent read from `parents`.
fn workload_of(
    composed: &dyn ComposedJob,
    parents: Option<&Parents>,
    member: &DynamicObject,
) -> Option<Key> {
    let ns = member.metadata.namespace.clone()?;
    let v = serde_json::to_value(member).ok()?;
    let parent = parents.and_then(|p| p.of(composed, &ns, &v));
    let name = composed.workload_name_of(&v, parent.as_ref())?;
    Some((ns, name))
}

/// Runs the controller of a composed kind until aborted.
pub async fn run(
    client: Client,
    integration: &'static dyn JobIntegration,
    composed: &'static dyn ComposedJob,
    ctx: Ctx,
    triggers: UnboundedReceiver<ObjectRef<CompactObject>>,
) {
    let ar = job_api_resource(&composed.member_kind().unwrap_or_else(|| integration.gvk()));
    let writer = reflector::store::Writer::new(ar.clone());
    let members = writer.as_reader();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let config = watcher::Config::default().labels(composed.member_selector());
    // A parent's change (its queue, a scale-down) is seen at the next resync or member
    // change; its Workloads' changes reach the reconciler through `triggers`.
    let (parents, parent_watch) = match composed.parent_kind() {
        Some(gvk) => {
            let par = job_api_resource(&gvk);
            let pw = reflector::store::Writer::new(par.clone());
            let store = pw.as_reader();
            let api: Api<DynamicObject> = Api::all_with(client, &par);
            let watch = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|m: &mut DynamicObject| m.metadata.managed_fields = None)
                .reflect(pw)
                .for_each(|_| futures::future::ready(()));
            let parents = Parents {
                store,
                resource: par,
            };
            (Some(parents), Some(tokio::spawn(watch)))
        }
        None => (None, None),
    };
    let _parent_watch = parent_watch.map(AbortOnDrop);
    let key_parents = parents.clone();
    let member_keys = watcher::watcher(api, config)
        .default_backoff()
        .modify(|m: &mut DynamicObject| m.metadata.managed_fields = None)
        .reflect(writer)
        .touched_objects()
        .filter_map(move |r| {
            let key = r
                .ok()
                .and_then(|m| workload_of(composed, key_parents.as_ref(), &m));
            futures::future::ready(key)
        });
    let workload_keys = triggers.map(|r| (r.namespace.unwrap_or_default(), r.name));
    let mut keys = Box::pin(futures::stream::select(member_keys, workload_keys));
    let gctx = GroupCtx {
        integration,
        composed,
        ctx,
        members,
        resource: ar,
        parents,
    };
    let mut due: HashMap<Key, Instant> = HashMap::new();
    let mut failures: HashMap<Key, u32> = HashMap::new();
    let mut resync = tokio::time::interval(RESYNC);
    info!(kind = %integration.kind(), "composed job controller started");
    loop {
        let next = due.values().min().copied();
        tokio::select! {
            key = keys.next() => match key {
                Some(k) => { due.insert(k, Instant::now()); }
                None => return,
            },
            _ = sleep_until(next) => {}
            _ = resync.tick() => {
                for k in gctx.all_keys() {
                    due.entry(k).or_insert_with(Instant::now);
                }
            }
        }
        if !gctx.synced() {
            continue;
        }
        let now = Instant::now();
        let ready: Vec<Key> = due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in ready {
            due.remove(&key);
            match gctx.reconcile(&key).await {
                Ok(again) => {
                    failures.remove(&key);
                    if let Some(after) = again {
                        due.insert(key, Instant::now() + after);
                    }
                }
                Err(e) => {
                    let n = failures.entry(key.clone()).or_insert(0);
                    *n = n.saturating_add(1);
                    let delay = Duration::from_millis(500)
                        .saturating_mul(1 << (*n).min(6))
                        .min(MAX_RETRY);
                    warn!(namespace = %key.0, workload = %key.1, error = %e, ?delay,
                        "composed job reconcile failed; retrying");
                    due.insert(key, Instant::now() + delay);
                }
            }
        }
    }
}

/// Stops the parents' watch when the controller stops.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl GroupCtx {
    /// Whether the member and Workload stores hold their first complete lists.
    fn synced(&self) -> bool {
        self.members.wait_until_ready().now_or_never().is_some()
            && self
                .parents
                .as_ref()
                .is_none_or(|p| p.store.wait_until_ready().now_or_never().is_some())
            && self
                .ctx
                .stores
                .workloads
                .wait_until_ready()
                .now_or_never()
                .is_some()
    }

    /// The Workload of every member in the store.
    fn all_keys(&self) -> BTreeSet<Key> {
        self.members
            .state()
            .iter()
            .filter_map(|m| workload_of(self.composed, self.parents.as_ref(), m))
            .collect()
    }

    /// The members of one Workload, as JSON, oldest first.
    fn members_of(&self, key: &Key) -> Vec<Value> {
        let mut out: Vec<Value> = self
            .members
            .state()
            .iter()
            .filter(|m| m.metadata.namespace.as_deref() == Some(key.0.as_str()))
            .filter(|m| workload_of(self.composed, self.parents.as_ref(), m).as_ref() == Some(key))
            .filter_map(|m| serde_json::to_value(&**m).ok())
            .collect();
        out.sort_by(|a, b| {
            let at = |v: &Value| {
                (
                    v.pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    v.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                )
            };
            at(a).cmp(&at(b))
        });
        out
    }

    fn api(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.writer().client.clone(), ns, &self.resource)
    }

    fn writer(&self) -> &Writer {
        &self.ctx.writer
    }

    /// One pass over one Workload and its members; `Some(delay)` to look again then.
    async fn reconcile(&self, key: &Key) -> Result<Option<Duration>, SyncError> {
        let all = self.members_of(key);
        // Members being deleted that run nothing are let go first: nothing is left to see.
        let mut members = Vec::with_capacity(all.len());
        for m in all {
            if self.composed.released(&m) {
                self.finalize(&key.0, &m).await?;
            } else {
                members.push(m);
            }
        }
        let r = ObjectRef::new_with(&key.1, Kind::Workload.api_resource()).within(&key.0);
        let wl: Option<Workload> = match self.ctx.stores.workloads.get(&r) {
            Some(o) => Some(decode(Kind::Workload, &*o)?),
            None => None,
        };
        let parent = match members.first() {
            Some(m) => self
                .parents
                .as_ref()
                .and_then(|p| p.of(self.composed, &key.0, m)),
            None => wl.as_ref().and_then(|w| self.parent_of_workload(w)),
        };
        if members.is_empty() {
            // Kinds without a parent: the members own the Workload, the garbage collector
            // deletes it with the last one. With a parent, the parent owns it: it is
            // deleted here once the parent no longer wants it, else it lives on without
            // pods (evicted ones are requeued, so their quota comes back).
            let (Some(wl), Some(parent)) = (wl, parent) else {
                return Ok(None);
            };
            if !self.composed.wants_workload(&wl, &parent) {
                self.delete_workload(&key.0, &key.1).await?;
                return Ok(None);
            }
            let state = job_state(&self.composed.status(&[]), Some(&wl), false);
            let step = plan(&state, Some(&wl));
            debug!(namespace = %key.0, workload = %key.1, ?step, "composed job without members");
            let wk = WorkloadKey::new(key.0.as_str(), key.1.as_str());
            return match step {
                Step::Requeue | Step::Finish { .. } => {
                    self.carry_out(step, Some(wl), &wk, &[], None).await
                }
                _ => Ok(None),
            };
        }
        let refs: Vec<&Value> = members.iter().collect();
        let status = self.composed.status(&refs);
        let finished_wl = wl
            .as_ref()
            .and_then(|w| w.status.as_ref())
            .is_some_and(|s| s.is_condition_true(WORKLOAD_FINISHED));
        if finished_wl || (wl.is_none() && status.finished.is_some()) {
            // Kueue's finalizeJob: the members' end has been seen.
            for m in &members {
                self.finalize(&key.0, m).await?;
            }
            return Ok(None);
        }
        let state = job_state(&status, wl.as_ref(), self.ctx.wait_for_pods_ready);
        let step = plan(&state, wl.as_ref());
        debug!(namespace = %key.0, workload = %key.1, ?step, "composed job reconcile");
        let wk = WorkloadKey::new(key.0.as_str(), key.1.as_str());
        self.carry_out(step, wl, &wk, &refs, parent.as_ref()).await
    }

    /// The parent owning a Workload (its controller owner of the parent's kind).
    fn parent_of_workload(&self, wl: &Workload) -> Option<Value> {
        let parents = self.parents.as_ref()?;
        let gvk = self.composed.parent_kind()?;
        let owner = wl.metadata.owner_references.iter().flatten().find(|o| {
            o.controller == Some(true) && o.kind == gvk.kind && o.api_version == gvk.api_version()
        })?;
        let ns = wl.metadata.namespace.as_deref()?;
        let r = ObjectRef::new_with(&owner.name, parents.resource.clone()).within(ns);
        let p = parents.store.get(&r)?;
        serde_json::to_value(&*p).ok()
    }

    /// Deletes a Workload its parent no longer wants (one already gone is fine).
    async fn delete_workload(&self, ns: &str, name: &str) -> Result<(), SyncError> {
        match delete_workload(self.writer(), ns, name, None).await {
            Ok(deleted) => {
                if deleted {
                    info!(namespace = %ns, workload = %name, "workload no longer wanted: deleted");
                }
                Ok(())
            }
            Err(source) => Err(api_error(ns, name, source)),
        }
    }

    async fn carry_out(
        &self,
        step: Step,
        wl: Option<Workload>,
        key: &WorkloadKey,
        members: &[&Value],
        parent: Option<&Value>,
    ) -> Result<Option<Duration>, SyncError> {
        let ctx = &self.ctx;
        let ns = key.namespace.to_string();
        let wl_writer = WorkloadWriter {
            writer: &ctx.writer,
            stores: &ctx.stores,
            recorder: &ctx.recorder,
        };
        match (step, wl) {
            (Step::CreateWorkload, _) if ctx.created.contains_key(key) => {
                return Ok(Some(Duration::from_secs(5)));
            }
            (Step::CreateWorkload, _) => match self.composed.compose(members, parent) {
                Ok(wl) => {
                    let first = members.first().map(|m| member_name(m)).unwrap_or_default();
                    create_built_workload(ctx, wl, first, &ns).await?;
                    ctx.created.insert(key.clone(), ());
                }
                Err(e) => self.report_compose(&ns, members, &e),
            },
            (Step::Finish { reason, message }, _) => {
                wl_writer
                    .write(key, |wl, now| finish_patch(wl, reason, &message, now))
                    .await?;
            }
            (Step::Start, Some(wl)) => {
                if !admission_usable(ctx, &wl) {
                    return Ok(Some(Duration::from_secs(5)));
                }
                self.start(&ns, &wl, members).await?;
            }
            (Step::Stop, _) => {
                for m in members.iter().filter(|m| self.composed.to_stop(m)) {
                    self.delete(&ns, m).await?;
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
            }
            // Pods are neither resumed nor restored: they are gated once, ungated once.
            (Step::Nothing | Step::Resume | Step::ResetStatus(_) | Step::Restore, _)
            | (Step::Start, None) => {}
        }
        Ok(None)
    }

    /// Ungates every gated member with its pod set's admission, one patch each.
    async fn start(&self, ns: &str, wl: &Workload, members: &[&Value]) -> Result<(), SyncError> {
        let flavors = &self.ctx.stores.flavors;
        let mut started = 0;
        for m in members.iter().filter(|m| self.composed.is_gated(m)) {
            let Some(patch) = member_start_patch(self.composed, m, wl, flavors) else {
                continue;
            };
            let name = member_name(m);
            let pp = PatchParams {
                field_manager: Some("kuota".into()),
                ..PatchParams::default()
            };
            self.api(ns)
                .patch(name, &pp, &Patch::<()>::Json(patch))
                .await
                .map_err(|source| api_error(ns, name, source))?;
            self.writer().wrote(&self.integration.kind());
            started += 1;
        }
        if started > 0 {
            info!(namespace = %ns, workload = ?wl.metadata.name, pods = started, "pods ungated");
        }
        Ok(())
    }

    /// Deletes one member (a stop); one already gone is fine.
    async fn delete(&self, ns: &str, member: &Value) -> Result<(), SyncError> {
        let name = member_name(member);
        let dp = DeleteParams {
            preconditions: member
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(|uid| Preconditions {
                    uid: Some(uid.to_string()),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        match self.api(ns).delete(name, &dp).await {
            Ok(_) => {
                self.writer().wrote(&self.integration.kind());
                info!(namespace = %ns, pod = %name, "stopped: deleted");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(source) => Err(api_error(ns, name, source)),
        }
    }

    /// Removes the member's finalizer, if it has it (a JSON patch that tests the entry
    /// it removes, so another controller's finalizer is never dropped).
    async fn finalize(&self, ns: &str, member: &Value) -> Result<(), SyncError> {
        let Some(patch) = finalizer_removal(member, self.composed.finalizer()) else {
            return Ok(());
        };
        let name = member_name(member);
        let pp = PatchParams::default();
        match self
            .api(ns)
            .patch(name, &pp, &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => {
                self.writer().wrote(&self.integration.kind());
                debug!(namespace = %ns, pod = %name, "finalizer removed");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(source) => Err(api_error(ns, name, source)),
        }
    }

    /// Kueue's `ErrWorkloadCompose` Warning on the members; nothing is created, so no
    /// quota is held by pods that cannot run together.
    fn report_compose(&self, ns: &str, members: &[&Value], e: &ComposeError) {
        let invalid = matches!(e, ComposeError::Invalid(_));
        if invalid {
            warn!(namespace = %ns, error = %e.message(), "pods cannot form a Workload");
        } else {
            debug!(namespace = %ns, reason = %e.message(), "waiting for the group's pods");
        }
        let gvk = self.integration.gvk();
        let targets: Vec<&&Value> = if invalid {
            members.iter().collect()
        } else {
            members.iter().take(1).collect()
        };
        for m in targets {
            let reference = ObjectReference {
                api_version: Some(gvk.api_version()),
                kind: Some(gvk.kind.clone()),
                name: Some(member_name(m).to_string()),
                namespace: Some(ns.to_string()),
                uid: m
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                ..ObjectReference::default()
            };
            self.ctx
                .recorder
                .warning(reference, REASON_ERR_WORKLOAD_COMPOSE, e.message());
        }
    }
}

/// The job state [`plan`] reads, from what the members say. A composed job counts as
/// suspended when admitted while some member is still gated (so the start ungates the
/// rest), and otherwise when no member may run any more (so a stop deletes any that may).
pub fn job_state(
    status: &crate::integrations::MembersStatus,
    wl: Option<&Workload>,
    wait_for_pods_ready: bool,
) -> JobState {
    let s = wl.and_then(|w| w.status.as_ref());
    // As `plan` reads an admission: quota reserved and not evicted.
    let running_admission =
        s.is_some_and(|s| s.admission.is_some() && !s.is_condition_true(WORKLOAD_EVICTED));
    let suspended = if running_admission {
        status.any_gated
    } else {
        !status.any_running_free
    };
    JobState {
        suspended,
        finished: status.finished.clone(),
        active: status.active,
        pods_ready: wait_for_pods_ready.then_some(status.pods_ready),
        ..JobState::default()
    }
}

/// The JSON patch removing `finalizer` from a member, `None` when it has none.
pub fn finalizer_removal(member: &Value, finalizer: &str) -> Option<JsonPatch> {
    let index = member
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)?
        .iter()
        .position(|f| f.as_str() == Some(finalizer))?;
    let path = PointerBuf::from_tokens(["metadata", "finalizers", &index.to_string()]);
    Some(JsonPatch(vec![
        PatchOperation::Test(TestOperation {
            path: path.clone(),
            value: Value::String(finalizer.to_string()),
        }),
        PatchOperation::Remove(RemoveOperation { path }),
    ]))
}

fn member_name(m: &Value) -> &str {
    m.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn api_error(ns: &str, name: &str, source: kube::Error) -> SyncError {
    SyncError::Api {
        name: format!("{ns}/{name}"),
        source,
    }
}

#[cfg(test)]
mod tests;
