//! Per-ClusterQueue pending queues: ordered by priority, then creation time,
//! with a parking lot for BestEffortFIFO workloads that cannot be admitted yet.
//!
//! Parked workloads are grouped by *shape* (everything the flavor assigner
//! reads). Workloads of one shape get the same answer in the same quota state,
//! so when quota frees up only the first of each shape is revived as a probe;
//! the next one follows when the probe is admitted. This keeps a cycle's work
//! proportional to the number of distinct shapes, not to the queue length.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
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
    /// Parked workloads by shape.
    parked: BTreeMap<u64, Parked>,
    /// Parked workloads that are not active as a probe.
    parked_len: usize,
}

/// The parked workloads of one shape.
#[derive(Clone, Debug, Default)]
struct Parked {
    /// Every workload of the shape that is parked or out as its probe. The probe stays
    /// in here while it is active: a probe that fails again (the usual case, thousands
    /// per cycle) then goes back by clearing `probe`, without reinserting a key.
    keys: BTreeSet<QueueKey>,
    /// The workload revived to probe for this shape, while it is active. A second
    /// revival (for example many finishes in a cohort before the next cycle) leaves
    /// the group alone: one answer per shape is all a cycle needs.
    probe: Option<QueueKey>,
}

impl ClusterQueueQueue {
    pub fn push(&mut self, key: QueueKey) {
        self.active.insert(key);
    }

    pub fn remove(&mut self, key: &QueueKey, shape: u64) {
        if self.active.remove(key) {
            self.clear_probe(key, shape);
        } else {
            self.unpark(key, shape);
        }
    }

    /// Forgets `key` as its shape's probe, once it has left the active set for good.
    fn clear_probe(&mut self, key: &QueueKey, shape: u64) {
        if let Some(group) = self.parked.get_mut(&shape)
            && group.probe.as_ref() == Some(key)
        {
            group.probe = None;
            group.keys.remove(key);
        }
        self.drop_if_idle(shape);
    }

    /// Forgets a shape's group once it holds nothing and has no probe out.
    fn drop_if_idle(&mut self, shape: u64) {
        if self
            .parked
            .get(&shape)
            .is_some_and(|g| g.keys.is_empty() && g.probe.is_none())
        {
            self.parked.remove(&shape);
        }
    }

    /// Removes a workload that is parked (not active).
    fn unpark(&mut self, key: &QueueKey, shape: u64) -> bool {
        let Some(group) = self.parked.get_mut(&shape) else {
            return false;
        };
        let removed = group.keys.remove(key);
        self.drop_if_idle(shape);
        if removed {
            self.parked_len -= 1;
        }
        removed
    }

    pub fn park(&mut self, key: QueueKey, shape: u64) {
        if self.active.remove(&key) {
            let group = self.parked.entry(shape).or_default();
            let inserted = if group.probe == Some(key) {
                group.probe = None;
                true
            } else {
                group.keys.insert(key)
            };
            if inserted {
                self.parked_len += 1;
            }
        }
    }

    /// Revives the first parked workload of every shape that has no probe out yet.
    /// Returns whether any was parked.
    pub fn revive(&mut self) -> bool {
        let shapes: Vec<u64> = self
            .parked
            .iter()
            .filter(|(_, g)| g.probe.is_none())
            .map(|(s, _)| *s)
            .collect();
        for s in &shapes {
            self.promote(*s);
        }
        !self.parked.is_empty()
    }

    /// Moves every parked workload back, whatever its shape.
    pub fn revive_all(&mut self) {
        for (_, mut group) in std::mem::take(&mut self.parked) {
            // A probe is already active; inserting it again changes nothing.
            self.active.append(&mut group.keys);
        }
        self.parked_len = 0;
    }

    /// Revives the next parked workload of `shape` as its probe, unless one is out.
    pub fn promote(&mut self, shape: u64) {
        let Some(group) = self.parked.get_mut(&shape) else {
            return;
        };
        if group.probe.is_some() {
            return;
        }
        // With no probe out, every key of the group is parked.
        if let Some(&k) = group.keys.first() {
            self.parked_len -= 1;
            self.active.insert(k);
            group.probe = Some(k);
        } else {
            self.parked.remove(&shape);
        }
    }

    /// The first active entry strictly after `after` (or the head).
    pub fn next_after(&self, after: Option<&QueueKey>) -> Option<QueueKey> {
        match after {
            None => self.active.iter().next().copied(),
            Some(k) => self
                .active
                .range((Bound::Excluded(*k), Bound::Unbounded))
                .next()
                .copied(),
        }
    }

    pub fn len(&self) -> usize {
        self.active.len() + self.parked_len
    }

    /// How many entries the next cycle looks at (the rest are parked).
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// The active entries, in order.
    pub fn active(&self) -> impl Iterator<Item = &QueueKey> {
        self.active.iter()
    }

    /// Every entry, active or parked, in queue order: Kueue's queue manager lists its
    /// heap and its inadmissible workloads together (`ClusterQueue.Snapshot`).
    pub fn all(&self) -> Vec<QueueKey> {
        let mut out: Vec<QueueKey> = Vec::with_capacity(self.len());
        out.extend(self.active.iter().copied());
        for group in self.parked.values() {
            // A shape's probe is in its group's keys and in the active set.
            out.extend(
                group
                    .keys
                    .iter()
                    .filter(|k| group.probe != Some(**k))
                    .copied(),
            );
        }
        out.sort_unstable();
        out
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
    fn revival_probes_one_workload_per_shape() {
        let mut q = ClusterQueueQueue::default();
        let (a1, a2, b1) = (
            (Reverse(0), 1, 0, 1),
            (Reverse(0), 2, 1, 2),
            (Reverse(0), 3, 2, 3),
        );
        for k in [a1, a2, b1] {
            q.push(k);
        }
        q.park(a1, 7);
        q.park(a2, 7);
        q.park(b1, 8);
        assert!(q.next_after(None).is_none());
        assert_eq!(q.len(), 3);
        assert!(q.revive());
        assert_eq!(q.active().copied().collect::<Vec<_>>(), vec![a1, b1]);
        q.remove(&a1, 7);
        q.promote(7);
        assert_eq!(q.active().copied().collect::<Vec<_>>(), vec![a2, b1]);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn all_lists_active_and_parked_entries_once_in_order() {
        let (mut q, keys) = parked_queue(3);
        q.revive();
        let urgent = (Reverse(5), 9, 9, 9);
        q.push(urgent);
        assert_eq!(q.all(), vec![urgent, keys[0], keys[1], keys[2]]);
        assert_eq!(q.all().len(), q.len());
    }

    /// A queue with `n` equal-priority workloads of shape 7, all parked, oldest first.
    fn parked_queue(n: i64) -> (ClusterQueueQueue, Vec<QueueKey>) {
        let mut q = ClusterQueueQueue::default();
        let keys: Vec<QueueKey> = (0..n)
            .map(|i| (Reverse(0), i, i as u64, i as u32))
            .collect();
        for &k in &keys {
            q.push(k);
            q.park(k, 7);
        }
        (q, keys)
    }

    #[test]
    fn a_failed_probe_goes_back_in_order_and_is_counted_once() {
        let (mut q, keys) = parked_queue(3);
        assert!(q.revive());
        assert_eq!(q.len(), 3);
        // The probe fails: nothing is active, nothing is lost or counted twice.
        q.park(keys[0], 7);
        assert!(!q.has_active());
        assert_eq!(q.len(), 3);
        // A newer, higher-priority workload of the same shape parks ahead of it.
        let urgent = (Reverse(5), 9, 9, 9);
        q.push(urgent);
        q.park(urgent, 7);
        assert_eq!(q.len(), 4);
        q.revive();
        assert_eq!(q.active().copied().collect::<Vec<_>>(), vec![urgent]);
        // The probe is admitted; the next follows in queue order.
        q.remove(&urgent, 7);
        assert_eq!(q.len(), 3);
        q.promote(7);
        assert_eq!(q.active().copied().collect::<Vec<_>>(), vec![keys[0]]);
        // Moving everything back keeps each workload once.
        q.revive_all();
        assert_eq!(q.active().copied().collect::<Vec<_>>(), keys);
        assert_eq!(q.len(), 3);
    }

    #[test]
    fn repeated_revival_keeps_one_probe_per_shape() {
        // Many finishes in a cohort before the next cycle each revive its queues; the
        // shape still sends one probe, not one per finish.
        let (mut q, keys) = parked_queue(5);
        for _ in 0..4 {
            q.revive();
        }
        assert_eq!(q.active().copied().collect::<Vec<_>>(), vec![keys[0]]);
        // The probe fails again: the next revival sends it (the oldest) once more.
        q.park(keys[0], 7);
        q.revive();
        q.revive();
        assert_eq!(q.active().copied().collect::<Vec<_>>(), vec![keys[0]]);
        // The probe is admitted: the next of its shape follows, and a revival adds no other.
        q.remove(&keys[0], 7);
        q.promote(7);
        q.revive();
        assert_eq!(q.active().copied().collect::<Vec<_>>(), vec![keys[1]]);
        assert_eq!(q.len(), 4);
    }
}
