//! Workloads whose job is gone: deleted by kuota when the garbage collector leaves them.
//!
//! A job's Workload is owned by the job, so kube-controller-manager's garbage collector
//! deletes it with the job, and its quota goes back. The collector does so only for an
//! owner kind it watches, which it starts doing at its next discovery sync (30 s). A job
//! kind whose CRD is installed and removed within that window, or a collector that is
//! down, leaves an admitted Workload behind, holding quota for pods that can never run.
//! Kueue has the same dependency (its job reconciler only drops the Workload's finalizer
//! when the job is not found, `jobframework/reconciler.go`); kuota closes it: once the
//! collector had its chance, an unfinished Workload whose controlling job was deleted is
//! deleted too, on the condition that it is still the same object.
//!
//! A job's deletion is seen in its watch: a delete event, or, after a watch gap, a job
//! that a re-list no longer returns ([`VanishedJobs`]).

use std::collections::HashMap;
use std::time::Duration;

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event as WatchEvent;
use tracing::{debug, info, warn};

use super::Ctx;
use crate::api::Workload;
use crate::api::constants::WORKLOAD_FINISHED;
use crate::controller::actuate::workload::delete_workload;
use crate::controller::compact::CompactObject;
use crate::controller::translate::decode;
use crate::controller::watch::Kind;
use crate::integrations::{JobIntegration, workload_name};

/// How long the garbage collector is given to delete a deleted job's Workload itself
/// (it usually does within a second), so that kuota writes only when it does not.
pub const COLLECTOR_GRACE: Duration = Duration::from_secs(10);

/// A job that was deleted: enough to find its Workload and to tell it is its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletedJob {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl DeletedJob {
    fn of(job: &CompactObject) -> Option<Self> {
        let m = &job.metadata;
        Some(Self {
            namespace: m.namespace.clone()?,
            name: m.name.clone()?,
            uid: m.uid.clone()?,
        })
    }
}

/// Whether `wl` is the deleted job's own Workload and still matters: controlled by that
/// very job (same uid: a job re-created under the same name is another owner) and not
/// finished (a finished Workload holds nothing, and the collector or its retention
/// policy removes it).
pub fn orphaned_by(wl: &Workload, job: &DeletedJob) -> bool {
    let owned = wl
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == job.uid && o.name == job.name);
    let finished = wl
        .status
        .as_ref()
        .is_some_and(|s| s.is_condition_true(WORKLOAD_FINISHED));
    owned && !finished
}

/// Tracks a job watch's objects across a re-list: the ones the new list does not return
/// were deleted while the watch was down, and no delete event will say so.
#[derive(Default)]
pub struct VanishedJobs {
    /// Between a re-list's start and its end: the jobs known before it, not yet listed.
    unlisted: Option<HashMap<String, DeletedJob>>,
}

impl VanishedJobs {
    /// The jobs an event says are gone (a delete, or the end of a re-list). `known` is
    /// the watch's store before the event is applied.
    pub fn observe(
        &mut self,
        event: &WatchEvent<CompactObject>,
        known: &Store<CompactObject>,
    ) -> Vec<DeletedJob> {
        match event {
            WatchEvent::Delete(job) => DeletedJob::of(job).into_iter().collect(),
            WatchEvent::Init => {
                let before = known
                    .state()
                    .iter()
                    .filter_map(|j| DeletedJob::of(j))
                    .map(|j| (j.uid.clone(), j))
                    .collect();
                self.unlisted = Some(before);
                Vec::new()
            }
            WatchEvent::InitApply(job) => {
                if let (Some(unlisted), Some(uid)) = (&mut self.unlisted, &job.metadata.uid) {
                    unlisted.remove(uid);
                }
                Vec::new()
            }
            WatchEvent::InitDone => self
                .unlisted
                .take()
                .map(|m| m.into_values().collect())
                .unwrap_or_default(),
            WatchEvent::Apply(_) => Vec::new(),
        }
    }
}

/// After [`COLLECTOR_GRACE`], deletes the deleted job's Workload if it is still there,
/// still its own and unfinished.
pub fn collect_later(ctx: Ctx, integration: &'static dyn JobIntegration, job: DeletedJob) {
    tokio::spawn(async move {
        tokio::time::sleep(COLLECTOR_GRACE).await;
        collect(&ctx, integration, &job).await;
    });
}

/// Deletes the deleted job's Workload if the store still shows it as an orphan (see
/// [`orphaned_by`]); the delete is conditional on the Workload's uid.
pub async fn collect(ctx: &Ctx, integration: &'static dyn JobIntegration, job: &DeletedJob) {
    let name = workload_name(&job.name, &job.uid, &integration.gvk());
    let r = ObjectRef::new_with(&name, Kind::Workload.api_resource()).within(&job.namespace);
    let Some(stored) = ctx.stores.workloads.get(&r) else {
        return;
    };
    let wl: Workload = match decode(Kind::Workload, &*stored) {
        Ok(wl) => wl,
        Err(e) => {
            debug!(workload = %name, error = %e, "orphan check: Workload does not decode");
            return;
        }
    };
    if !orphaned_by(&wl, job) {
        return;
    }
    match delete_workload(&ctx.writer, &job.namespace, &name, wl.metadata.uid.clone()).await {
        Ok(true) => {
            info!(namespace = %job.namespace, workload = %name, job = %job.name,
                kind = %integration.kind(),
                "the job is gone and its Workload was left behind: deleted, its quota released");
        }
        Ok(false) => {}
        Err(e) => {
            warn!(namespace = %job.namespace, workload = %name, error = %e,
                "cannot delete the Workload of a deleted job");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(uid: &str) -> DeletedJob {
        DeletedJob {
            namespace: "ns".into(),
            name: "train".into(),
            uid: uid.into(),
        }
    }

    fn workload(owner_uid: &str, finished: bool) -> Workload {
        let mut v = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
                 "uid": owner_uid, "controller": true}]},
            "spec": {"queueName": "q", "podSets": []}
        });
        if finished {
            v["status"] = json!({"conditions": [{"type": "Finished", "status": "True",
                "reason": "Succeeded", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        }
        serde_json::from_value(v).expect("workload")
    }

    #[test]
    fn only_an_unfinished_workload_of_that_very_job_is_an_orphan() {
        assert!(orphaned_by(&workload("u1", false), &job("u1")));
        // A job re-created under the same name is another owner.
        assert!(!orphaned_by(&workload("u1", false), &job("u2")));
        // Finished: it holds nothing.
        assert!(!orphaned_by(&workload("u1", true), &job("u1")));
    }

    fn compact(name: &str, uid: &str) -> CompactObject {
        CompactObject::from_value(json!({"apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet", "metadata": {"name": name, "namespace": "ns", "uid": uid}}))
        .expect("object")
    }

    #[test]
    fn a_delete_or_a_relist_that_misses_a_job_says_it_is_gone() {
        let ar = kube::api::ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&());
        let mut writer = kube::runtime::reflector::store::Writer::new(ar);
        let store = writer.as_reader();
        let mut seen = VanishedJobs::default();
        for j in [compact("a", "ua"), compact("b", "ub")] {
            let ev = WatchEvent::Apply(j);
            assert!(seen.observe(&ev, &store).is_empty());
            writer.apply_watcher_event(&ev);
        }
        let ev = WatchEvent::Delete(compact("a", "ua"));
        let gone = seen.observe(&ev, &store);
        writer.apply_watcher_event(&ev);
        assert_eq!(
            gone,
            vec![DeletedJob {
                namespace: "ns".into(),
                name: "a".into(),
                uid: "ua".into()
            }]
        );
        // A re-list that returns only a re-created "b" (new uid): the old "b" is gone.
        for ev in [WatchEvent::Init, WatchEvent::InitApply(compact("b", "ub2"))] {
            assert!(seen.observe(&ev, &store).is_empty());
        }
        let gone = seen.observe(&WatchEvent::InitDone, &store);
        let uids: Vec<_> = gone.iter().map(|j| j.uid.as_str()).collect();
        assert!(uids.contains(&"ub"), "{uids:?}");
        assert!(!uids.contains(&"ub2"), "{uids:?}");
        // Nothing is reported twice.
        assert!(seen.observe(&WatchEvent::InitDone, &store).is_empty());
    }
}
