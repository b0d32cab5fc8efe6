//! A read-only page of a queue's pending workloads, in the order the engine will look at
//! them, with their positions: what Kueue's visibility API serves (`pendingworkloads` of a
//! ClusterQueue or a LocalQueue), answered from the engine's own queues.
//!
//! The order is Kueue's `ClusterQueue.Snapshot` (pkg/cache/queue/cluster_queue.go): every
//! pending workload, those the next cycle looks at and those parked as inadmissible alike,
//! by priority (highest first), then creation time, then arrival (Kueue breaks that last tie
//! by UID); under admission fair sharing, by the LocalQueue's weighted usage first. The
//! queueing strategy decides which workloads are parked, not where they stand, so StrictFIFO
//! and BestEffortFIFO list in the same order.

use super::Millis;
use super::WorkloadKey;
use super::queue::QueueKey;
use super::state::Engine;

/// One pending workload of a page, as the visibility API reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingWorkload {
    pub key: WorkloadKey,
    /// `spec.queueName`.
    pub local_queue: String,
    /// The priority it is queued with.
    pub priority: i32,
    /// `metadata.creationTimestamp`, in ms.
    pub created: Millis,
    /// From 0, among every pending workload of its ClusterQueue.
    pub position_in_cluster_queue: u32,
    /// From 0, among the pending workloads of its LocalQueue.
    pub position_in_local_queue: u32,
}

/// Why a page cannot be given: the queue it names is not known to the engine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PendingLookupError {
    #[error("ClusterQueue {0:?} not found")]
    ClusterQueueNotFound(String),
    #[error("LocalQueue {namespace}/{name} not found")]
    LocalQueueNotFound { namespace: String, name: String },
}

impl Engine {
    /// Every pending workload of ClusterQueue `c`, in queue order.
    fn pending_order(&self, c: super::state::CqId) -> Vec<QueueKey> {
        let mut keys = self.cqs[c as usize].queue.all();
        if self.afs_on(c)
            && let Some(cfg) = self.config.admission_fair_sharing.as_ref()
        {
            let mut usage: std::collections::HashMap<(&str, &str), f64> = Default::default();
            let mut ranked: Vec<(f64, QueueKey)> = keys
                .iter()
                .map(|k| {
                    let spec = &self.wl(k.3).spec;
                    let lq = (&*spec.key.namespace, spec.queue_name.as_str());
                    let u = *usage
                        .entry(lq)
                        .or_insert_with(|| self.lq_ordering_usage(lq.0, lq.1, cfg));
                    (u, *k)
                })
                .collect();
            // Stable: equal usage keeps the plain order `keys` came in.
            ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
            keys = ranked.into_iter().map(|(_, k)| k).collect();
        }
        keys
    }

    fn view(&self, key: &QueueKey, in_cq: usize, in_lq: usize) -> PendingWorkload {
        let spec = &self.wl(key.3).spec;
        PendingWorkload {
            key: spec.key.clone(),
            local_queue: spec.queue_name.clone(),
            priority: spec.priority,
            created: spec.created,
            position_in_cluster_queue: u32::try_from(in_cq).unwrap_or(u32::MAX),
            position_in_local_queue: u32::try_from(in_lq).unwrap_or(u32::MAX),
        }
    }

    /// The ClusterQueue LocalQueue `namespace/name` points at, if the LocalQueue is known.
    pub fn cluster_queue_of(&self, namespace: &str, name: &str) -> Option<&str> {
        self.local_queues
            .get(&(namespace.to_string(), name.to_string()))
            .map(|lq| lq.cluster_queue.as_str())
    }

    /// `limit` pending workloads of ClusterQueue `name` from position `offset`, as Kueue's
    /// `clusterqueues/<name>/pendingworkloads` lists them.
    pub fn pending_in_cluster_queue(
        &self,
        name: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PendingWorkload>, PendingLookupError> {
        let c = match self.cq_index.get(name) {
            Some(&c) if !self.cqs[c as usize].deleted => c,
            _ => return Err(PendingLookupError::ClusterQueueNotFound(name.into())),
        };
        let keys = self.pending_order(c);
        let end = offset.saturating_add(limit).min(keys.len());
        let mut in_lq: std::collections::HashMap<(&str, &str), usize> = Default::default();
        let mut out = Vec::with_capacity(end.saturating_sub(offset));
        for (i, k) in keys.iter().enumerate().take(end) {
            let spec = &self.wl(k.3).spec;
            let slot = in_lq
                .entry((&*spec.key.namespace, spec.queue_name.as_str()))
                .or_default();
            let position = *slot;
            *slot += 1;
            if i >= offset {
                out.push(self.view(k, i, position));
            }
        }
        Ok(out)
    }

    /// `limit` pending workloads of LocalQueue `namespace/name` from its position `offset`,
    /// as Kueue's `namespaces/<ns>/localqueues/<name>/pendingworkloads` lists them. A
    /// LocalQueue whose ClusterQueue does not exist has none (Kueue answers an empty list).
    pub fn pending_in_local_queue(
        &self,
        namespace: &str,
        name: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<PendingWorkload>, PendingLookupError> {
        let Some(lq) = self
            .local_queues
            .get(&(namespace.to_string(), name.to_string()))
        else {
            return Err(PendingLookupError::LocalQueueNotFound {
                namespace: namespace.into(),
                name: name.into(),
            });
        };
        let c = match self.cq_index.get(&lq.cluster_queue) {
            Some(&c) if !self.cqs[c as usize].deleted => c,
            _ => return Ok(Vec::new()),
        };
        let mut out = Vec::new();
        let mut seen = 0usize;
        for (i, k) in self.pending_order(c).iter().enumerate() {
            if out.len() >= limit {
                break;
            }
            let spec = &self.wl(k.3).spec;
            if &*spec.key.namespace != namespace || spec.queue_name != name {
                continue;
            }
            if seen >= offset {
                out.push(self.view(k, i, seen));
            }
            seen += 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cq, obj, setup, wl};
    use super::*;
    use crate::engine::Event;

    /// (name, local queue, position in ClusterQueue, position in LocalQueue) of a page.
    fn rows(page: &[PendingWorkload]) -> Vec<(String, String, u32, u32)> {
        page.iter()
            .map(|p| {
                (
                    p.key.name.to_string(),
                    p.local_queue.clone(),
                    p.position_in_cluster_queue,
                    p.position_in_local_queue,
                )
            })
            .collect()
    }

    fn row(name: &str, lq: &str, cq: u32, lq_pos: u32) -> (String, String, u32, u32) {
        (name.into(), lq.into(), cq, lq_pos)
    }

    /// ClusterQueue `a` (4 cpu, BestEffortFIFO) full, fed by LocalQueues `a` and `b`, with
    /// four workloads waiting: one parked as inadmissible (it exceeds the quota).
    fn waiting() -> Engine {
        let mut e = setup(&[cq("a", None, "4", None, "")]);
        e.apply(
            0,
            Event::LocalQueueUpserted(obj(
                "metadata: {name: b, namespace: ns}\nspec: {clusterQueue: a}",
            )),
        )
        .unwrap();
        e.apply(0, wl("hold", "a", "4", 0)).unwrap();
        e.schedule(1);
        e.apply(2, wl("big", "a", "8", 0)).unwrap();
        e.apply(3, wl("x", "b", "1", 0)).unwrap();
        e.apply(4, wl("y", "a", "1", 0)).unwrap();
        e.apply(5, wl("p", "a", "1", 5)).unwrap();
        e.schedule(6);
        e
    }

    #[test]
    fn cluster_queue_page_lists_parked_workloads_in_priority_then_creation_order() {
        let e = waiting();
        let c = e.cq_index["a"] as usize;
        assert!(
            e.cqs[c].queue.active_len() < e.cqs[c].queue.len(),
            "the oversized workload is parked"
        );
        let all = e.pending_in_cluster_queue("a", 0, 1000).unwrap();
        assert_eq!(
            rows(&all),
            vec![
                row("p", "a", 0, 0),
                row("big", "a", 1, 1),
                row("x", "b", 2, 0),
                row("y", "a", 3, 2),
            ]
        );
        assert_eq!(all[0].priority, 5);
        assert_eq!(all[1].created, 2);
        let page = e.pending_in_cluster_queue("a", 1, 2).unwrap();
        assert_eq!(
            rows(&page),
            vec![row("big", "a", 1, 1), row("x", "b", 2, 0)]
        );
        assert!(e.pending_in_cluster_queue("a", 4, 10).unwrap().is_empty());
        assert!(e.pending_in_cluster_queue("a", 0, 0).unwrap().is_empty());
        assert_eq!(
            e.pending_in_cluster_queue("nope", 0, 10),
            Err(PendingLookupError::ClusterQueueNotFound("nope".into()))
        );
    }

    #[test]
    fn local_queue_page_counts_positions_within_the_local_queue() {
        let e = waiting();
        let page = e.pending_in_local_queue("ns", "a", 1, 5).unwrap();
        assert_eq!(
            rows(&page),
            vec![row("big", "a", 1, 1), row("y", "a", 3, 2)]
        );
        let page = e.pending_in_local_queue("ns", "b", 0, 5).unwrap();
        assert_eq!(rows(&page), vec![row("x", "b", 2, 0)]);
        assert!(
            e.pending_in_local_queue("ns", "a", 0, 0)
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            e.pending_in_local_queue("other", "a", 0, 5),
            Err(PendingLookupError::LocalQueueNotFound { .. })
        ));
    }

    #[test]
    fn strict_fifo_lists_the_same_order() {
        let mut e = waiting();
        let mut strict = cq("a", None, "4", None, "");
        strict.spec.queueing_strategy = Some(crate::api::QueueingStrategy::StrictFifo);
        e.apply(7, Event::ClusterQueueUpserted(strict)).unwrap();
        e.schedule(8);
        let names: Vec<_> = e
            .pending_in_cluster_queue("a", 0, 10)
            .unwrap()
            .iter()
            .map(|p| p.key.name.to_string())
            .collect();
        assert_eq!(names, ["p", "big", "x", "y"]);
    }
}
