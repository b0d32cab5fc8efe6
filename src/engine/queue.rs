//! Per-ClusterQueue pending queues: ordered by priority, then creation time,
//! with a parking lot for BestEffortFIFO workloads that cannot be admitted yet.

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::ops::Bound;

use super::Millis;

/// Index of a workload in the engine's slab.
pub type WlId = u32;

/// Queue order: higher priority first, then older, then arrival order.
pub type QueueKey = (Reverse<i32>, Millis, u64, WlId);

#[derive(Clone, Debug, Default)]
pub struct ClusterQueueQueue {
    /// Workloads the next cycle will look at.
    active: BTreeSet<QueueKey>,
    /// BestEffortFIFO workloads that did not fit; revived by events that free
    /// or add quota, so they are not re-evaluated every cycle for nothing.
    parked: BTreeSet<QueueKey>,
}

impl ClusterQueueQueue {
    pub fn push(&mut self, key: QueueKey) {
        self.parked.remove(&key);
        self.active.insert(key);
    }

    pub fn remove(&mut self, key: &QueueKey) {
        self.active.remove(key);
        self.parked.remove(key);
    }

    pub fn park(&mut self, key: QueueKey) {
        if self.active.remove(&key) {
            self.parked.insert(key);
        }
    }

    /// Moves every parked workload back into the active queue.
    pub fn revive(&mut self) -> bool {
        if self.parked.is_empty() {
            return false;
        }
        self.active.append(&mut self.parked);
        true
    }

    /// The first active entry strictly after `after` (or the head).
    pub fn next_after(&self, after: Option<&QueueKey>) -> Option<QueueKey> {
        match after {
            None => self.active.iter().next().copied(),
            Some(k) => self.active.range((Bound::Excluded(*k), Bound::Unbounded)).next().copied(),
        }
    }

    pub fn len(&self) -> usize {
        self.active.len() + self.parked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.parked.is_empty()
    }

    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// Every queued workload, active then parked.
    pub fn iter(&self) -> impl Iterator<Item = &QueueKey> {
        self.active.iter().chain(self.parked.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_priority_then_time() {
        let mut q = ClusterQueueQueue::default();
        q.push((Reverse(0), 5, 0, 1));
        q.push((Reverse(10), 9, 1, 2));
        q.push((Reverse(0), 1, 2, 3));
        let head = q.next_after(None).unwrap();
        assert_eq!(head.3, 2);
        let second = q.next_after(Some(&head)).unwrap();
        assert_eq!(second.3, 3);
    }

    #[test]
    fn parked_entries_wait_for_revival() {
        let mut q = ClusterQueueQueue::default();
        let k = (Reverse(0), 1, 0, 7);
        q.push(k);
        q.park(k);
        assert!(q.next_after(None).is_none());
        assert_eq!(q.len(), 1);
        assert!(q.revive());
        assert_eq!(q.next_after(None), Some(k));
    }
}
