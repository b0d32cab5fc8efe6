//! The virtual clock: a time-ordered event queue with a deterministic tie-break.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::engine::Millis;

/// One scheduled event. Ordered by `(at, seq)` only: `seq` is the insertion
/// counter, so events at the same instant pop in the order they were
/// scheduled, independent of the payload and of heap internals.
#[derive(Debug)]
struct Entry<E> {
    at: Millis,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Discrete-event queue on virtual milliseconds.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at virtual time `at`.
    pub fn push(&mut self, at: Millis, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Entry { at, seq, event }));
    }

    /// Time of the earliest event, if any.
    pub fn peek_time(&self) -> Option<Millis> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Moves every event of the earliest instant into `out` (in scheduling
    /// order) and returns that instant. Events pushed while the batch is
    /// being handled, even at the same instant, form the next batch: that is
    /// what gives each cause its own scheduling cycle.
    pub fn pop_batch(&mut self, out: &mut Vec<E>) -> Option<Millis> {
        let at = self.peek_time()?;
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.at != at {
                break;
            }
            if let Some(Reverse(e)) = self.heap.pop() {
                out.push(e.event);
            }
        }
        Some(at)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_by_time_and_keeps_insertion_order() {
        let mut q = EventQueue::new();
        q.push(10, "b1");
        q.push(5, "a1");
        q.push(10, "b2");
        q.push(5, "a2");
        let mut out = Vec::new();
        assert_eq!(q.pop_batch(&mut out), Some(5));
        assert_eq!(out, ["a1", "a2"]);
        out.clear();
        q.push(10, "b3");
        assert_eq!(q.pop_batch(&mut out), Some(10));
        assert_eq!(out, ["b1", "b2", "b3"]);
        out.clear();
        assert_eq!(q.pop_batch(&mut out), None);
        assert!(q.is_empty());
    }
}
