//! A coalescing write lane: only the newest value of each key waits, keys are written in
//! the order they first arrived, and a few workers of the lane's own do the writing.
//!
//! Status that is superseded as fast as it changes (a pending Workload's message, a
//! queue's counts) must neither pile up behind a slow API server nor take the permits of
//! the writes that move quota. A lane bounds both: what waits is at most one value per
//! key, and what is in flight is at most one write per worker.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::task::AbortHandle;

struct Queue<K, V> {
    /// Keys in the order their first waiting value arrived.
    order: VecDeque<K>,
    /// The newest value of each waiting key.
    latest: HashMap<K, V>,
}

struct Shared<K, V> {
    queue: Mutex<Queue<K, V>>,
    ready: Notify,
}

impl<K: Eq + Hash, V> Shared<K, V> {
    fn lock(&self) -> MutexGuard<'_, Queue<K, V>> {
        // A worker that panicked mid-write left the queue consistent: each update is
        // one insert or remove.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take(&self) -> Option<(K, V)> {
        let mut q = self.lock();
        while let Some(key) = q.order.pop_front() {
            // A key whose value was cancelled (or already taken) is skipped.
            if let Some(value) = q.latest.remove(&key) {
                return Some((key, value));
            }
        }
        None
    }
}

/// The lane. Dropping it stops its workers (a write in flight is abandoned).
pub struct Lane<K, V> {
    shared: Arc<Shared<K, V>>,
    workers: Vec<AbortHandle>,
}

impl<K, V> Lane<K, V>
where
    K: Clone + Eq + Hash + Send + 'static,
    V: Send + 'static,
{
    /// Starts `workers` workers (at least one) on the current Tokio runtime, each
    /// writing one value at a time with `write`.
    pub fn start<F, Fut>(workers: usize, write: F) -> Self
    where
        F: Fn(K, V) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                order: VecDeque::new(),
                latest: HashMap::new(),
            }),
            ready: Notify::new(),
        });
        let write = Arc::new(write);
        let workers = (0..workers.max(1))
            .map(|_| {
                let (shared, write) = (shared.clone(), write.clone());
                tokio::spawn(async move {
                    loop {
                        match shared.take() {
                            Some((key, value)) => write(key, value).await,
                            // `notify_one` keeps a permit when no worker waits, so an
                            // offer made while every worker wrote is not missed.
                            None => shared.ready.notified().await,
                        }
                    }
                })
                .abort_handle()
            })
            .collect();
        Self { shared, workers }
    }

    /// Queues `value` for `key`, replacing a value still waiting (which keeps its place).
    pub fn offer(&self, key: K, value: V) {
        {
            let mut q = self.shared.lock();
            if q.latest.insert(key.clone(), value).is_none() {
                q.order.push_back(key);
            }
        }
        self.shared.ready.notify_one();
    }

    /// Drops the value still waiting for `key`: a later decision supersedes it.
    pub fn cancel(&self, key: &K) {
        self.shared.lock().latest.remove(key);
    }

    /// Values waiting to be written.
    pub fn waiting(&self) -> usize {
        self.shared.lock().latest.len()
    }
}

impl<K, V> Drop for Lane<K, V> {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;

    /// One worker blocked on its first write: the values offered meanwhile coalesce per
    /// key, keep their first-arrival order, and a cancelled key is never written.
    #[tokio::test(start_paused = true)]
    async fn waiting_values_coalesce_per_key_in_arrival_order() {
        let (gate_tx, gate_rx) = tokio::sync::watch::channel(false);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let lane = Lane::start(1, move |key: &'static str, value: u32| {
            let (tx, mut gate) = (tx.clone(), gate_rx.clone());
            async move {
                let _ = gate.wait_for(|open| *open).await;
                let _ = tx.send((key, value));
            }
        });
        lane.offer("a", 1);
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The worker holds ("a", 1); these wait.
        lane.offer("b", 1);
        lane.offer("a", 2);
        lane.offer("c", 1);
        lane.offer("b", 2);
        lane.offer("a", 3);
        lane.cancel(&"c");
        assert_eq!(lane.waiting(), 2);
        gate_tx.send(true).expect("gate");
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(rx.recv().await.expect("a write"));
        }
        assert_eq!(seen, [("a", 1), ("b", 2), ("a", 3)]);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(rx.try_recv().is_err(), "the cancelled key was written");
        assert_eq!(lane.waiting(), 0);
    }

    /// No more writes are in flight than the lane has workers.
    #[tokio::test(start_paused = true)]
    async fn writes_in_flight_never_exceed_the_workers() {
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let lane = {
            let (in_flight, most) = (in_flight.clone(), most.clone());
            Lane::start(3, move |key: u32, _: ()| {
                let (in_flight, most, tx) = (in_flight.clone(), most.clone(), tx.clone());
                async move {
                    use std::sync::atomic::Ordering::SeqCst;
                    let now = in_flight.fetch_add(1, SeqCst) + 1;
                    most.fetch_max(now, SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    in_flight.fetch_sub(1, SeqCst);
                    let _ = tx.send(key);
                }
            })
        };
        for key in 0..20 {
            lane.offer(key, ());
        }
        for _ in 0..20 {
            rx.recv().await.expect("a write");
        }
        assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}
