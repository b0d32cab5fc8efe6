//! Runtimes learned from finished Workloads, per LocalQueue and priority: the last few
//! hundred of each, kept in memory and rebuilt from the Workloads still in the cluster.

use std::collections::{HashMap, VecDeque};

use crate::api;
use crate::api::constants::{WORKLOAD_ADMITTED, WORKLOAD_FINISHED};
use crate::engine::Millis;

/// How many runtimes are kept per (LocalQueue, priority) and per LocalQueue: enough for
/// a stable p90, few enough that a change in what a team runs shows within a day.
pub const DEFAULT_SAMPLES_KEPT: usize = 256;

/// A LocalQueue: (namespace, name).
pub type QueueId = (String, String);

/// The last runtimes seen, oldest first.
#[derive(Clone, Debug, Default)]
struct Window {
    runtimes: VecDeque<Millis>,
}

impl Window {
    fn push(&mut self, runtime: Millis, cap: usize) {
        if self.runtimes.len() == cap {
            self.runtimes.pop_front();
        }
        self.runtimes.push_back(runtime);
    }
}

/// Learned runtimes per (LocalQueue, priority), and per LocalQueue over every priority
/// (what a priority with too few runs of its own falls back to).
#[derive(Clone, Debug)]
pub struct RuntimeBook {
    cap: usize,
    by_class: HashMap<(QueueId, i32), Window>,
    by_queue: HashMap<QueueId, Window>,
}

impl Default for RuntimeBook {
    fn default() -> Self {
        Self::new(DEFAULT_SAMPLES_KEPT)
    }
}

impl RuntimeBook {
    /// A book keeping the last `cap` runtimes (at least 1) of each key.
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            by_class: HashMap::new(),
            by_queue: HashMap::new(),
        }
    }

    /// Records one finished run. Negative runtimes (clock skew) count as 0.
    pub fn record(&mut self, namespace: &str, queue: &str, priority: i32, runtime: Millis) {
        let runtime = runtime.max(0);
        let q: QueueId = (namespace.to_string(), queue.to_string());
        self.by_class
            .entry((q.clone(), priority))
            .or_default()
            .push(runtime, self.cap);
        self.by_queue.entry(q).or_default().push(runtime, self.cap);
    }

    /// Records a finished Workload's last run (from its `Admitted` condition to its
    /// `Finished` condition); returns whether it was one. A Workload that is not finished,
    /// was never admitted, or names no LocalQueue teaches nothing.
    pub fn record_workload(&mut self, wl: &api::Workload) -> bool {
        match finished_run(wl) {
            Some((namespace, queue, priority, runtime)) => {
                self.record(&namespace, &queue, priority, runtime);
                true
            }
            None => false,
        }
    }

    /// A book rebuilt from the Workloads in the cluster (after a restart, finished
    /// Workloads still carry their runs until they are garbage collected).
    pub fn rebuild<'a>(cap: usize, workloads: impl IntoIterator<Item = &'a api::Workload>) -> Self {
        let mut book = Self::new(cap);
        let mut runs: Vec<_> = workloads.into_iter().filter_map(finished_run_at).collect();
        // Oldest first, so the window keeps the most recent runs whatever the list order.
        runs.sort_by_key(|(at, ..)| *at);
        for (_, (namespace, queue, priority, runtime)) in runs {
            book.record(&namespace, &queue, priority, runtime);
        }
        book
    }

    /// The runtimes learned for `(namespace, queue, priority)`, sorted, when at least
    /// `min_samples` are known there; else those of the LocalQueue; else `None`.
    pub fn sorted(
        &self,
        namespace: &str,
        queue: &str,
        priority: i32,
        min_samples: usize,
    ) -> Option<Vec<Millis>> {
        let q: QueueId = (namespace.to_string(), queue.to_string());
        let enough = |w: &&Window| w.runtimes.len() >= min_samples.max(1);
        let w = self
            .by_class
            .get(&(q.clone(), priority))
            .filter(enough)
            .or_else(|| self.by_queue.get(&q).filter(enough))?;
        let mut v: Vec<Millis> = w.runtimes.iter().copied().collect();
        v.sort_unstable();
        Some(v)
    }

    /// Every runtime learned, over all queues (for reports).
    pub fn len(&self) -> usize {
        self.by_queue.values().map(|w| w.runtimes.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `q` quantile (0..=1) of sorted runtimes, by the nearest rank; `None` when empty.
pub fn quantile(sorted: &[Millis], q: f64) -> Option<Millis> {
    if sorted.is_empty() {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

type Run = (String, String, i32, Millis);

fn finished_run(wl: &api::Workload) -> Option<Run> {
    finished_run_at(wl).map(|(_, r)| r)
}

/// A finished Workload's (when it finished, (namespace, LocalQueue, priority, runtime)).
fn finished_run_at(wl: &api::Workload) -> Option<(Millis, Run)> {
    let status = wl.status.as_ref()?;
    let finished = status
        .condition(WORKLOAD_FINISHED)
        .filter(|c| c.status == "True")?;
    let admitted = status.condition(WORKLOAD_ADMITTED)?;
    let queue = wl.spec.queue_name.clone().filter(|q| !q.is_empty())?;
    let end = finished.last_transition_time.0.as_millisecond();
    let start = admitted.last_transition_time.0.as_millisecond();
    let runtime = end.checked_sub(start)?;
    if runtime < 0 {
        return None;
    }
    Some((
        end,
        (
            wl.metadata.namespace.clone().unwrap_or_default(),
            queue,
            wl.spec.priority.unwrap_or(0),
            runtime,
        ),
    ))
}
