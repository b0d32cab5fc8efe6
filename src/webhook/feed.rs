//! Feeds the [`ClusterIndex`] from the API server's watches: the index's only I/O.
//!
//! One kube-rs watcher per kind (Namespaces, LocalQueues, WorkloadPriorityClasses,
//! ClusterQueues) turns list and watch events into [`IndexEvent`]s. A (re-)list starts
//! with `Clear` for its kind, so objects deleted while the watch was down disappear;
//! the index reports synced once every kind has delivered its first full list. The
//! webhook never waits on these watches: until then it answers from what it has and
//! `/readyz` fails (docs/webhook-server.md, "cold index").

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use super::index::{ClusterIndex, IndexEvent, IndexKind};
use crate::api::{ClusterQueue, LocalQueue, WorkloadPriorityClass};

/// How many kinds must finish their first list before the index is synced.
const KINDS: usize = 4;

/// The index events one watcher event stands for. `first_list_done` is true when the
/// event ends a list (the caller counts kinds towards "synced").
pub fn translate<K>(
    kind: IndexKind,
    event: Event<K>,
    to_event: impl Fn(K) -> IndexEvent,
    to_delete: impl Fn(&K) -> IndexEvent,
) -> (Vec<IndexEvent>, bool) {
    match event {
        Event::Init => (vec![IndexEvent::Clear(kind)], false),
        Event::InitApply(o) | Event::Apply(o) => (vec![to_event(o)], false),
        Event::Delete(o) => (vec![to_delete(&o)], false),
        Event::InitDone => (vec![], true),
    }
}

fn name_of<K: Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

/// Index event for an applied Namespace.
pub fn namespace_applied(ns: Namespace) -> IndexEvent {
    IndexEvent::NamespaceApplied {
        name: name_of(&ns),
        labels: ns.metadata.labels.unwrap_or_default(),
    }
}

/// Index event for a deleted Namespace.
pub fn namespace_deleted(ns: &Namespace) -> IndexEvent {
    IndexEvent::NamespaceDeleted { name: name_of(ns) }
}

/// Index event for a deleted LocalQueue.
pub fn local_queue_deleted(lq: &LocalQueue) -> IndexEvent {
    IndexEvent::LocalQueueDeleted {
        namespace: lq.metadata.namespace.clone().unwrap_or_default(),
        name: name_of(lq),
    }
}

/// Starts the four watches on `client`; they run until the returned tasks are aborted.
pub fn spawn(client: Client, index: Arc<ClusterIndex>) -> Vec<tokio::task::JoinHandle<()>> {
    let done = Arc::new(AtomicUsize::new(0));
    vec![
        tokio::spawn(run(
            Api::<Namespace>::all(client.clone()),
            IndexKind::Namespace,
            index.clone(),
            done.clone(),
            namespace_applied,
            namespace_deleted,
        )),
        tokio::spawn(run(
            Api::<LocalQueue>::all(client.clone()),
            IndexKind::LocalQueue,
            index.clone(),
            done.clone(),
            |lq| IndexEvent::LocalQueueApplied(Box::new(lq)),
            local_queue_deleted,
        )),
        tokio::spawn(run(
            Api::<WorkloadPriorityClass>::all(client.clone()),
            IndexKind::PriorityClass,
            index.clone(),
            done.clone(),
            |pc| IndexEvent::PriorityClassApplied(Box::new(pc)),
            |pc| IndexEvent::PriorityClassDeleted { name: name_of(pc) },
        )),
        tokio::spawn(run(
            Api::<ClusterQueue>::all(client),
            IndexKind::ClusterQueue,
            index,
            done,
            |cq| IndexEvent::ClusterQueueApplied(Box::new(cq)),
            |cq| IndexEvent::ClusterQueueDeleted { name: name_of(cq) },
        )),
    ]
}

async fn run<K>(
    api: Api<K>,
    kind: IndexKind,
    index: Arc<ClusterIndex>,
    done: Arc<AtomicUsize>,
    to_event: impl Fn(K) -> IndexEvent,
    to_delete: impl Fn(&K) -> IndexEvent,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut first = true;
    // The watcher re-lists and retries by itself; errors are logged, never fatal,
    // because a webhook that exits on an API hiccup would block every job creation.
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                let (events, list_done) = translate(kind, event, &to_event, &to_delete);
                for e in events {
                    index.apply(e);
                }
                if list_done && first {
                    first = false;
                    info!(?kind, "initial list applied to the cluster index");
                    if done.fetch_add(1, Ordering::AcqRel) + 1 == KINDS {
                        index.apply(IndexEvent::Synced);
                    }
                }
            }
            Err(e) => {
                warn!(?kind, error = %e, "watch failed; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::index::IndexConfig;

    fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
        let mut n = Namespace::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n
    }

    fn lq(ns: &str, name: &str, cq: &str) -> LocalQueue {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"namespace": ns, "name": name}, "spec": {"clusterQueue": cq}
        }))
        .expect("valid LocalQueue")
    }

    #[test]
    fn a_relist_forgets_objects_deleted_while_the_watch_was_down() {
        let index = ClusterIndex::new(IndexConfig {
            managed_jobs_namespace_selector: None,
        });
        let apply = |e: Event<LocalQueue>| {
            let (evs, done) = translate(
                IndexKind::LocalQueue,
                e,
                |lq| IndexEvent::LocalQueueApplied(Box::new(lq)),
                local_queue_deleted,
            );
            for ev in evs {
                index.apply(ev);
            }
            done
        };
        assert!(!apply(Event::Init));
        assert!(!apply(Event::InitApply(lq("team", "default", "cq-a"))));
        assert!(apply(Event::InitDone));
        assert!(index.has_default_local_queue("team"));
        // The watch breaks; the LocalQueue is deleted meanwhile; the re-list does not
        // contain it, so it must be gone afterwards.
        apply(Event::Init);
        apply(Event::InitApply(lq("other", "default", "cq-b")));
        apply(Event::InitDone);
        assert!(!index.has_default_local_queue("team"));
        assert_eq!(
            index.cluster_queue_of("other", "default").as_deref(),
            Some("cq-b")
        );
        // A plain delete removes it too.
        apply(Event::Delete(lq("other", "default", "cq-b")));
        assert!(!index.local_queue_exists("other", "default"));
    }

    #[test]
    fn namespace_labels_reach_the_index() {
        let index = ClusterIndex::new(IndexConfig::default());
        let (evs, _) = translate(
            IndexKind::Namespace,
            Event::Apply(ns(
                "kube-system",
                &[("kubernetes.io/metadata.name", "kube-system")],
            )),
            namespace_applied,
            namespace_deleted,
        );
        for e in evs {
            index.apply(e);
        }
        let (evs, _) = translate(
            IndexKind::Namespace,
            Event::Apply(ns("team", &[("kubernetes.io/metadata.name", "team")])),
            namespace_applied,
            namespace_deleted,
        );
        for e in evs {
            index.apply(e);
        }
        // Kueue's default managedJobsNamespaceSelector leaves kube-system alone.
        assert!(!index.is_namespace_managed("kube-system"));
        assert!(index.is_namespace_managed("team"));
    }
}
