//! ClusterQueue and LocalQueue status: counts, flavor usage and the `Active` condition,
//! written only when they changed, and at most once per queue per publishing interval.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};
use tracing::debug;

use super::lane::Lane;
use super::workload::set_condition;
use super::{Attempt, WriteError, Writer};
use crate::api::constants::{
    CQ_REASON_READY, CQ_REASON_TERMINATING, CQ_REASON_UNKNOWN, QUEUE_ACTIVE,
};
use crate::api::quantity::resource_quantity;
use crate::controller::watch::{Kind, Stores};
use crate::engine::{ClusterQueueReport, Engine, LocalQueueReport};

/// What a queue's status says, without timestamps: written only when it changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueView {
    pub pending: usize,
    pub reserving: usize,
    pub admitted: usize,
    /// flavor -> resource -> (total, borrowed) in the engine's unit for the resource.
    pub usage: BTreeMap<String, BTreeMap<String, (i64, i64)>>,
    pub active: (bool, String, String),
    /// A LocalQueue's admission fair sharing history, when the feature is on.
    pub afs: Option<AfsStatus>,
}

/// `status.fairSharing.admissionFairSharingStatus` of a LocalQueue.
#[derive(Clone, Debug)]
pub struct AfsStatus {
    /// Resource -> quantity string, rounded down to milli-units as Kueue does.
    pub consumed: BTreeMap<String, String>,
    /// When the engine last sampled or settled it (ms since the epoch).
    pub last_update: i64,
}

/// Equal when the consumed amounts are: a new `lastUpdate` alone is no reason to write
/// (Kueue reads it back only to anchor the decay, and a restart anchors it anew).
impl PartialEq for AfsStatus {
    fn eq(&self, other: &Self) -> bool {
        self.consumed == other.consumed
    }
}

impl AfsStatus {
    pub fn from_usage(usage: &crate::engine::LocalQueueUsage) -> Self {
        Self {
            consumed: usage
                .consumed
                .iter()
                .map(|(r, v)| (r.clone(), crate::engine::afs_quantity(*v)))
                .collect(),
            last_update: usage.last_update,
        }
    }

    /// The merge-patch value: keys the current status has and this one lacks are
    /// removed (`null`), as a merge patch would otherwise keep them.
    fn patch(&self, current: Option<&Value>) -> Value {
        let mut consumed = serde_json::Map::new();
        if let Some(Value::Object(old)) = current {
            for k in old.keys() {
                consumed.insert(k.clone(), Value::Null);
            }
        }
        for (r, q) in &self.consumed {
            consumed.insert(r.clone(), Value::String(q.clone()));
        }
        let last = k8s_openapi::jiff::Timestamp::from_millisecond(self.last_update)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        json!({"consumedResources": consumed, "lastUpdate": Time(last)})
    }
}

/// The ClusterQueue view of an engine report.
pub fn cluster_queue_view(report: &ClusterQueueReport) -> QueueView {
    let mut usage: BTreeMap<String, BTreeMap<String, (i64, i64)>> = BTreeMap::new();
    for ((flavor, resource), u) in &report.usage {
        usage
            .entry(flavor.clone())
            .or_default()
            .insert(resource.clone(), (u.total, u.borrowed));
    }
    let active = if report.active {
        (
            true,
            CQ_REASON_READY.to_string(),
            "Can admit new workloads".to_string(),
        )
    } else {
        let why = report.inactive_reason.clone().unwrap_or_default();
        let reason = report
            .inactive_condition_reason
            .unwrap_or(CQ_REASON_UNKNOWN);
        let message = report
            .inactive_condition_message
            .clone()
            .unwrap_or_else(|| format!("Can't admit new workloads: {why}"));
        (false, reason.to_string(), message)
    };
    QueueView {
        pending: report.pending,
        reserving: report.admitted,
        admitted: report.admitted,
        usage,
        active,
        afs: None,
    }
}

/// A ClusterQueue being deleted (kept by the `resource-in-use` finalizer while workloads
/// hold quota in it) admits nothing new: Kueue's `Terminating` reason and message.
pub fn terminating(view: &mut QueueView) {
    view.active = (
        false,
        CQ_REASON_TERMINATING.to_string(),
        "Can't admit new workloads; clusterQueue is terminating".to_string(),
    );
}

/// The status merge patch for a view, keeping transition times of unchanged conditions.
/// `current_consumed` is the LocalQueue's current `consumedResources`, if any.
pub fn status_patch(
    view: &QueueView,
    current: &[Condition],
    current_consumed: Option<&Value>,
    local: bool,
    now: &Time,
) -> Value {
    let mut conds = current.to_vec();
    let (status, reason, message) = &view.active;
    set_condition(
        &mut conds,
        QUEUE_ACTIVE,
        *status,
        reason,
        message,
        None,
        now,
    );
    let flavors: Vec<Value> = view
        .usage
        .iter()
        .map(|(flavor, resources)| {
            let resources: Vec<Value> = resources
                .iter()
                .map(|(name, (total, borrowed))| {
                    if local {
                        json!({"name": name, "total": resource_quantity(name, *total)})
                    } else {
                        json!({"name": name, "total": resource_quantity(name, *total), "borrowed": resource_quantity(name, *borrowed)})
                    }
                })
                .collect();
            json!({"name": flavor, "resources": resources})
        })
        .collect();
    let mut patch = json!({"status": {
        "pendingWorkloads": view.pending,
        "reservingWorkloads": view.reserving,
        "admittedWorkloads": view.admitted,
        "flavorsReservation": flavors,
        "flavorsUsage": flavors,
        "conditions": conds,
    }});
    if let Some(afs) = &view.afs {
        patch["status"]["fairSharing"] =
            json!({"admissionFairSharingStatus": afs.patch(current_consumed)});
    }
    patch
}

/// The LocalQueue view of an engine report (its `Active` condition and fair sharing
/// are set by the publisher). A LocalQueue's status carries no borrowing.
pub fn local_queue_view(report: &LocalQueueReport) -> QueueView {
    let mut usage: BTreeMap<String, BTreeMap<String, (i64, i64)>> = BTreeMap::new();
    for ((flavor, resource), total) in &report.usage {
        usage
            .entry(flavor.clone())
            .or_default()
            .insert(resource.clone(), (*total, 0));
    }
    QueueView {
        pending: report.pending,
        reserving: report.admitted,
        admitted: report.admitted,
        usage,
        ..QueueView::default()
    }
}

/// Workers writing queue status at once: the lane's writes never hold the permits of
/// admissions, evictions and finishes, and a busy API server gets fewer of them.
pub const QUEUE_STATUS_WORKERS: usize = 2;

/// A queue: its kind, namespace (LocalQueues) and name.
type QueueKey = (Kind, Option<String>, String);

/// Publishes queue status, remembering what it last wrote per queue.
pub struct QueueStatus {
    stores: Stores,
    written_cq: HashMap<String, QueueView>,
    written_lq: HashMap<(String, String), QueueView>,
    /// The newest view of each queue whose write waits: when the API server is slower
    /// than the publishing interval, an older view still waiting is replaced, not queued.
    lane: Lane<QueueKey, (QueueView, Arc<DynamicObject>)>,
}

impl QueueStatus {
    /// A publisher writing through a lane of [`QUEUE_STATUS_WORKERS`] workers with
    /// permits of their own (sharing `writer`'s client, retry policy and counts).
    pub fn new(writer: &Writer, stores: Stores) -> Self {
        let lane = writer.lane(
            QUEUE_STATUS_WORKERS,
            |writer, key: QueueKey, (view, obj)| write_status(writer, key, view, obj),
        );
        Self {
            stores,
            written_cq: HashMap::new(),
            written_lq: HashMap::new(),
            lane,
        }
    }

    /// Forgets what was written for queues that are gone: a busy cluster creates and
    /// deletes queues all day, and a queue created again under the same name gets its
    /// status written afresh.
    fn forget_gone(
        &mut self,
        cluster_queues: &[Arc<DynamicObject>],
        local_queues: &[Arc<DynamicObject>],
    ) {
        let names: HashSet<&str> = cluster_queues
            .iter()
            .filter_map(|cq| cq.metadata.name.as_deref())
            .collect();
        self.written_cq
            .retain(|name, _| names.contains(name.as_str()));
        let keys: HashSet<(&str, &str)> = local_queues
            .iter()
            .map(|lq| {
                let m = &lq.metadata;
                (
                    m.namespace.as_deref().unwrap_or_default(),
                    m.name.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        self.written_lq
            .retain(|(ns, name), _| keys.contains(&(ns.as_str(), name.as_str())));
    }

    /// Writes the status of every queue whose view changed since its last write.
    pub fn publish(&mut self, engine: &Engine) {
        let cluster_queues = self.stores.cluster_queues.state();
        let local_queues = self.stores.local_queues.state();
        self.forget_gone(&cluster_queues, &local_queues);
        for cq in cluster_queues {
            let name = cq.metadata.name.clone().unwrap_or_default();
            let Some(report) = engine.cluster_queue_report(&name) else {
                continue;
            };
            let mut view = cluster_queue_view(&report);
            if cq.metadata.deletion_timestamp.is_some() {
                terminating(&mut view);
            }
            if self.written_cq.get(&name) == Some(&view) {
                continue;
            }
            self.written_cq.insert(name.clone(), view.clone());
            self.lane
                .offer((Kind::ClusterQueue, None, name), (view, cq));
        }
        let mut reports = engine.local_queue_reports();
        for lq in local_queues {
            let ns = lq.metadata.namespace.clone().unwrap_or_default();
            let name = lq.metadata.name.clone().unwrap_or_default();
            let mut view = reports
                .remove(&(ns.clone(), name.clone()))
                .map(|r| local_queue_view(&r))
                .unwrap_or_default();
            view.afs = engine
                .local_queue_usage(&ns, &name)
                .map(|u| AfsStatus::from_usage(&u));
            let cq = lq
                .data
                .pointer("/spec/clusterQueue")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let exists = self
                .stores
                .cluster_queues
                .get(&ObjectRef::new_with(cq, Kind::ClusterQueue.api_resource()))
                .is_some();
            view.active = if exists {
                (
                    true,
                    CQ_REASON_READY.into(),
                    "Can submit new workloads to localQueue".into(),
                )
            } else {
                // Kueue's reason and message (localqueue_controller.go).
                (
                    false,
                    "ClusterQueueDoesNotExist".into(),
                    "Can't submit new workloads to clusterQueue".into(),
                )
            };
            let key = (ns.clone(), name.clone());
            if self.written_lq.get(&key) == Some(&view) {
                continue;
            }
            self.written_lq.insert(key, view.clone());
            self.lane
                .offer((Kind::LocalQueue, Some(ns), name), (view, lq));
        }
    }
}

/// Writes one queue's status, retried from fresh state as every write is.
async fn write_status(
    writer: Arc<Writer>,
    key: QueueKey,
    view: QueueView,
    obj: Arc<DynamicObject>,
) {
    let (kind, ns, name) = key;
    let ar = kind.api_resource();
    let api: Api<DynamicObject> = match &ns {
        Some(ns) => Api::namespaced_with(writer.client.clone(), ns, &ar),
        None => Api::all_with(writer.client.clone(), &ar),
    };
    let current: Vec<Condition> = obj
        .data
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let local = kind == Kind::LocalQueue;
    let consumed = obj
        .data
        .pointer("/status/fairSharing/admissionFairSharingStatus/consumedResources")
        .cloned();
    let result = writer
        .retry(kind.name(), &name, |_| {
            let body = status_patch(&view, &current, consumed.as_ref(), local, &(writer.clock)());
            let writer = writer.clone();
            let api = api.clone();
            let name = name.clone();
            async move {
                match api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                {
                    Ok(_) => {
                        writer.wrote(kind.name());
                        Ok(Attempt::Done(()))
                    }
                    Err(source) => Err(WriteError::Api {
                        kind: kind.name(),
                        name,
                        source,
                    }),
                }
            }
        })
        .await;
    if let Err(e) = result {
        debug!(error = %e, "queue status not written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deleted queue's last written view is dropped; the queues still there keep theirs.
    #[tokio::test]
    async fn what_was_written_for_deleted_queues_is_forgotten() {
        use kube::client::Body;
        let (service, _handle) =
            tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
        let writer = Writer::new(kube::Client::new(service, "default"), 1, 2);
        let (stores, _writers) = crate::controller::watch::stores();
        let mut status = QueueStatus::new(&writer, stores);
        for name in ["kept", "gone"] {
            status.written_cq.insert(name.into(), QueueView::default());
            status
                .written_lq
                .insert(("team".into(), name.into()), QueueView::default());
        }
        // A LocalQueue of the same name in another namespace is another queue.
        status
            .written_lq
            .insert(("other".into(), "kept".into()), QueueView::default());
        let queue = |kind: Kind, ns: Option<&str>, name: &str| {
            let mut obj = DynamicObject::new(name, &kind.api_resource());
            obj.metadata.namespace = ns.map(String::from);
            Arc::new(obj)
        };
        status.forget_gone(
            &[queue(Kind::ClusterQueue, None, "kept")],
            &[queue(Kind::LocalQueue, Some("team"), "kept")],
        );
        assert_eq!(status.written_cq.keys().collect::<Vec<_>>(), ["kept"]);
        assert_eq!(
            status.written_lq.keys().collect::<Vec<_>>(),
            [&("team".to_string(), "kept".to_string())]
        );
    }

    /// The status a LocalQueue gets from its engine report: its counts, and its usage
    /// per flavor and resource without borrowing (Kueue's LocalQueue has none).
    #[test]
    fn a_local_queue_view_comes_from_its_engine_report() {
        let report = LocalQueueReport {
            pending: 1,
            admitted: 2,
            usage: BTreeMap::from([
                (("default".to_string(), "cpu".to_string()), 3500),
                (("a100".to_string(), "nvidia.com/gpu".to_string()), 4),
            ]),
        };
        let view = local_queue_view(&report);
        assert_eq!((view.pending, view.reserving, view.admitted), (1, 2, 2));
        let now = Time("2026-01-01T00:00:00Z".parse().expect("time"));
        let patch = status_patch(&view, &[], None, true, &now);
        assert_eq!(patch["status"]["pendingWorkloads"], 1);
        assert_eq!(patch["status"]["admittedWorkloads"], 2);
        assert_eq!(
            patch["status"]["flavorsUsage"],
            json!([
                {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]},
                {"name": "default", "resources": [{"name": "cpu", "total": "3500m"}]},
            ])
        );
    }

    #[test]
    fn a_terminating_cluster_queue_is_inactive_with_kueues_reason_and_message() {
        let mut view = QueueView {
            pending: 1,
            reserving: 1,
            admitted: 1,
            usage: BTreeMap::new(),
            active: (
                true,
                CQ_REASON_READY.into(),
                "Can admit new workloads".into(),
            ),
            afs: None,
        };
        terminating(&mut view);
        let now = Time("2026-01-01T00:00:00Z".parse().expect("time"));
        let patch = status_patch(&view, &[], None, false, &now);
        let active = &patch["status"]["conditions"][0];
        assert_eq!(active["type"], "Active");
        assert_eq!(active["status"], "False");
        assert_eq!(active["reason"], "Terminating");
        assert_eq!(
            active["message"],
            "Can't admit new workloads; clusterQueue is terminating"
        );
        assert_eq!(patch["status"]["admittedWorkloads"], 1);
        assert!(patch["status"].get("fairSharing").is_none());
    }

    /// A LocalQueue's admission fair sharing history goes to Kueue's status field, with
    /// `lastUpdate`; a resource that is no longer consumed is removed, not left behind.
    #[test]
    fn a_local_queue_patch_carries_its_consumed_resources() {
        let usage = crate::engine::LocalQueueUsage {
            consumed: BTreeMap::from([
                ("cpu".to_string(), 2.5),
                ("nvidia.com/gpu".to_string(), 1.0),
            ]),
            last_update: 1_700_000_000_000,
        };
        let view = QueueView {
            pending: 0,
            reserving: 1,
            admitted: 1,
            usage: BTreeMap::new(),
            active: (true, CQ_REASON_READY.into(), "ok".into()),
            afs: Some(AfsStatus::from_usage(&usage)),
        };
        let now = Time("2026-01-01T00:00:00Z".parse().expect("time"));
        let current = json!({"memory": "1Gi", "cpu": "3"});
        let patch = status_patch(&view, &[], Some(&current), true, &now);
        let afs = &patch["status"]["fairSharing"]["admissionFairSharingStatus"];
        assert_eq!(
            afs["consumedResources"],
            json!({"cpu": "2500m", "nvidia.com/gpu": "1", "memory": null})
        );
        assert_eq!(afs["lastUpdate"], "2023-11-14T22:13:20Z");
        // Only the amounts decide whether a write is due, not the timestamp.
        let mut later = view.afs.clone().expect("afs");
        later.last_update += 60_000;
        assert_eq!(Some(later), view.afs);
    }
}
