//! Feeds the [`ClusterIndex`] from the API server's watches: the index's only I/O.
//!
//! One kube-rs watcher per kind (Namespaces, LocalQueues, WorkloadPriorityClasses,
//! ClusterQueues, AdmissionChecks) turns list and watch events into [`IndexEvent`]s. A (re-)list is held back
//! by [`Relist`] until it is complete and then handed over as one [`IndexEvent::Replace`], so
//! lookups keep answering from the previous complete set meanwhile, and objects deleted
//! while the watch was down disappear. The index reports synced once every kind has
//! delivered its first full list. The webhook never waits on these watches: until then it
//! answers from what it has and `/readyz` fails (docs/webhook-server.md, "cold index").
//!
//! Objects are watched untyped and decoded one by one, so an object that does not decode is
//! skipped and reported with its name and field ([`WatchHealth`]) instead of failing the
//! whole watch with an anonymous error. Watch errors back off with kube-rs's
//! `default_backoff` and are reported to [`WatchHealth`], which `/readyz` reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use super::health::{WatchHealth, kind_name};
use super::index::{ClusterIndex, IndexEvent, IndexKind};
use crate::api::{AdmissionCheck, ClusterQueue, LocalQueue, WorkloadPriorityClass};

/// How many kinds must finish their first list before the index is synced.
const KINDS: usize = 5;

/// An object a watch delivered that does not decode as its kind.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {object}: {source}")]
pub struct UndecodableObject {
    /// The kind, e.g. `LocalQueue`.
    pub kind: &'static str,
    /// `namespace/name`, or `name` for cluster-scoped kinds.
    pub object: String,
    /// The failing field and why.
    #[source]
    pub source: serde_path_to_error::Error<serde_json::Error>,
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn object_key(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// Decodes a watched object as `K`, naming the object and the field when it does not fit.
pub fn decode<K: DeserializeOwned>(
    kind: IndexKind,
    obj: DynamicObject,
) -> Result<K, UndecodableObject> {
    let object = object_key(&obj.metadata);
    let value = serde_json::to_value(obj).unwrap_or_default();
    // Lenient: a field a newer Kueue added is ignored (and counted), so it cannot keep the
    // index from syncing.
    crate::api::lenient::from_value(kind_name(kind), &value).map_err(|source| UndecodableObject {
        kind: kind_name(kind),
        object,
        source,
    })
}

/// One kind's watch events, turned into index events. A list (`Init`, `InitApply`...,
/// `InitDone`) is collected and released as one [`IndexEvent::Replace`] at `InitDone`.
#[derive(Debug)]
pub struct Relist {
    kind: IndexKind,
    pending: Option<Vec<IndexEvent>>,
}

impl Relist {
    /// No list in progress.
    pub fn new(kind: IndexKind) -> Self {
        Self {
            kind,
            pending: None,
        }
    }

    /// The index event to apply now, if any, and whether it completes a list. Objects are
    /// already index events (`*Applied` for applies, `*Deleted` for deletes).
    pub fn step(&mut self, event: Event<IndexEvent>) -> Option<(IndexEvent, bool)> {
        match event {
            Event::Init => {
                self.pending = Some(Vec::new());
                None
            }
            Event::InitApply(e) => match &mut self.pending {
                Some(list) => {
                    list.push(e);
                    None
                }
                // kube-rs always starts a list with Init; apply directly if it ever does not.
                None => Some((e, false)),
            },
            Event::InitDone => {
                let list = self.pending.take().unwrap_or_default();
                Some((IndexEvent::Replace(self.kind, list), true))
            }
            Event::Apply(e) | Event::Delete(e) => Some((e, false)),
        }
    }
}

/// How one kind's objects become index events.
struct KindFeed {
    kind: IndexKind,
    applied: fn(DynamicObject) -> Result<IndexEvent, UndecodableObject>,
    deleted: fn(&ObjectMeta) -> IndexEvent,
}

impl KindFeed {
    /// The watcher event with its object turned into an index event; `None` when the
    /// object does not decode (reported to `health` and left out).
    fn convert(
        &self,
        event: Event<DynamicObject>,
        health: &WatchHealth,
    ) -> Option<Event<IndexEvent>> {
        let applied = |o: DynamicObject| {
            let key = object_key(&o.metadata);
            match (self.applied)(o) {
                Ok(e) => {
                    health.record_decoded(self.kind, &key);
                    Some(e)
                }
                Err(e) => {
                    warn!(error = %e, "watched object does not decode; left out of the index");
                    health.record_undecodable(self.kind, e.object.clone(), e.source.to_string());
                    None
                }
            }
        };
        Some(match event {
            Event::Init => {
                health.relist_started(self.kind);
                Event::Init
            }
            Event::InitDone => Event::InitDone,
            Event::InitApply(o) => Event::InitApply(applied(o)?),
            Event::Apply(o) => Event::Apply(applied(o)?),
            Event::Delete(o) => {
                health.record_decoded(self.kind, &object_key(&o.metadata));
                Event::Delete((self.deleted)(&o.metadata))
            }
        })
    }
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Index event for an applied Namespace.
pub fn namespace_applied(ns: Namespace) -> IndexEvent {
    IndexEvent::NamespaceApplied {
        name: name_of(&ns.metadata),
        labels: ns.metadata.labels.unwrap_or_default(),
    }
}

/// Index event for a deleted LocalQueue.
pub fn local_queue_deleted(meta: &ObjectMeta) -> IndexEvent {
    IndexEvent::LocalQueueDeleted {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: name_of(meta),
    }
}

fn feeds() -> [KindFeed; KINDS] {
    [
        KindFeed {
            kind: IndexKind::Namespace,
            applied: |o| decode(IndexKind::Namespace, o).map(namespace_applied),
            deleted: |m| IndexEvent::NamespaceDeleted { name: name_of(m) },
        },
        KindFeed {
            kind: IndexKind::LocalQueue,
            applied: |o| {
                decode(IndexKind::LocalQueue, o)
                    .map(|lq| IndexEvent::LocalQueueApplied(Box::new(lq)))
            },
            deleted: local_queue_deleted,
        },
        KindFeed {
            kind: IndexKind::PriorityClass,
            applied: |o| {
                decode(IndexKind::PriorityClass, o)
                    .map(|pc| IndexEvent::PriorityClassApplied(Box::new(pc)))
            },
            deleted: |m| IndexEvent::PriorityClassDeleted { name: name_of(m) },
        },
        KindFeed {
            kind: IndexKind::ClusterQueue,
            applied: |o| {
                decode(IndexKind::ClusterQueue, o)
                    .map(|cq| IndexEvent::ClusterQueueApplied(Box::new(cq)))
            },
            deleted: |m| IndexEvent::ClusterQueueDeleted { name: name_of(m) },
        },
        KindFeed {
            kind: IndexKind::AdmissionCheck,
            applied: |o| {
                decode(IndexKind::AdmissionCheck, o)
                    .map(|ac| IndexEvent::AdmissionCheckApplied(Box::new(ac)))
            },
            deleted: |m| IndexEvent::AdmissionCheckDeleted { name: name_of(m) },
        },
    ]
}

fn api_for(kind: IndexKind, client: &Client) -> Api<DynamicObject> {
    fn erase<K: Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
        Api::all_with(client.clone(), &ApiResource::erase::<K>(&()))
    }
    match kind {
        IndexKind::Namespace => erase::<Namespace>(client),
        IndexKind::LocalQueue => erase::<LocalQueue>(client),
        IndexKind::PriorityClass => erase::<WorkloadPriorityClass>(client),
        IndexKind::ClusterQueue => erase::<ClusterQueue>(client),
        IndexKind::AdmissionCheck => erase::<AdmissionCheck>(client),
    }
}

/// Starts the five watches on `client`; they run until the returned tasks are aborted.
pub fn spawn(
    client: Client,
    index: Arc<ClusterIndex>,
    health: Arc<WatchHealth>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let done = Arc::new(AtomicUsize::new(0));
    feeds()
        .into_iter()
        .map(|feed| {
            let api = api_for(feed.kind, &client);
            tokio::spawn(run(api, feed, index.clone(), health.clone(), done.clone()))
        })
        .collect()
}

/// One kind's watch: its feed, the list in progress and the shared state it reports to.
struct KindWatch {
    feed: KindFeed,
    relist: Relist,
    index: Arc<ClusterIndex>,
    health: Arc<WatchHealth>,
}

impl KindWatch {
    /// Handles one item of the watch stream at `now`; true when it completed a list.
    fn handle(&mut self, item: watcher::Result<Event<DynamicObject>>, now: Instant) -> bool {
        let kind = self.feed.kind;
        let event = match item {
            Ok(event) => event,
            Err(e) => {
                warn!(kind = kind_name(kind), error = %e, "watch failed; retrying with backoff");
                self.health.record_error(kind, e.to_string(), now);
                return false;
            }
        };
        // Only a completed list or a watch event proves the watch works: `Init` comes before
        // the list request is even sent, and a paged list can deliver objects and still fail
        // (Init, InitApply..., error, again and again).
        if matches!(event, Event::InitDone | Event::Apply(_) | Event::Delete(_)) {
            self.health.record_ok(kind);
        }
        let Some(event) = self.feed.convert(event, &self.health) else {
            return false;
        };
        let Some((e, list_done)) = self.relist.step(event) else {
            return false;
        };
        self.index.apply(e);
        list_done
    }
}

async fn run(
    api: Api<DynamicObject>,
    feed: KindFeed,
    index: Arc<ClusterIndex>,
    health: Arc<WatchHealth>,
    done: Arc<AtomicUsize>,
) {
    let kind = feed.kind;
    let mut first = true;
    let mut watch = KindWatch {
        relist: Relist::new(kind),
        feed,
        index: index.clone(),
        health,
    };
    // The watcher re-lists and retries by itself, backing off between failures; errors are
    // reported, never fatal, because a webhook that exits on an API hiccup would block
    // every job creation.
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(item) = stream.next().await {
        if watch.handle(item, Instant::now()) && first {
            first = false;
            info!(
                kind = kind_name(kind),
                "initial list applied to the cluster index"
            );
            if done.fetch_add(1, Ordering::AcqRel) + 1 == KINDS {
                index.apply(IndexEvent::Synced);
            }
        }
    }
}

#[cfg(test)]
mod tests;
