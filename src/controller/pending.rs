//! Reads of the engine's pending queues from outside the engine task (the visibility
//! API): a request goes over a channel to the task that owns the engine, which answers it
//! between two cycles from [`Engine::pending_in_cluster_queue`] and
//! [`Engine::pending_in_local_queue`], so no answer comes from a rescan of the API.
//!
//! [`PendingQueries`] outlives controllers: each term of leadership starts a fresh engine
//! task, which registers its channel here while it runs. A replica without a running
//! engine (a follower, or `--no-controller`) answers [`QueryError::NoEngine`].
//!
//! The engine task also counts its changes ([`Inbox::changed`]): a reader that saw the
//! same [`PendingQueries::version`] before two reads knows the second answer would equal
//! the first, so a page already served can be served again without asking.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};

use crate::engine::{Engine, PendingLookupError, PendingWorkload};
use crate::forecast::Forecast;

/// What the start estimates know when a page is read.
#[derive(Clone, Debug)]
pub enum Estimates {
    /// Turned off (KuotaConfiguration `startEstimates.enabled: false`).
    Off,
    /// No forecast pass has finished yet in this term of leadership.
    NotYet,
    /// The latest forecast.
    Latest(Arc<Forecast>),
}

/// A page of pending workloads, with the estimates known when it was read.
#[derive(Clone, Debug)]
pub struct Page {
    pub items: Vec<PendingWorkload>,
    pub estimates: Estimates,
}

/// Whose pending workloads a query asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PendingTarget {
    ClusterQueue(String),
    LocalQueue { namespace: String, name: String },
}

/// A page request: `limit` workloads from position `offset`.
#[derive(Debug)]
pub struct PendingQuery {
    pub target: PendingTarget,
    pub offset: usize,
    pub limit: usize,
    reply: oneshot::Sender<Option<Result<Page, PendingLookupError>>>,
}

impl PendingQuery {
    /// Answers from `engine` with `estimates`, or, with `None`, says the engine has not
    /// seen every kind yet.
    pub fn answer(self, engine: Option<&Engine>, estimates: Estimates) {
        let answer = engine.map(|e| {
            let items = match &self.target {
                PendingTarget::ClusterQueue(name) => {
                    e.pending_in_cluster_queue(name, self.offset, self.limit)
                }
                PendingTarget::LocalQueue { namespace, name } => {
                    e.pending_in_local_queue(namespace, name, self.offset, self.limit)
                }
            }?;
            Ok(Page { items, estimates })
        });
        // The asker may have given up (its request timed out): nothing to do.
        let _ = self.reply.send(answer);
    }
}

/// Why a query got no page.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueryError {
    /// No engine runs in this replica: it does not hold the Lease, or runs the webhook only.
    #[error("this kuota replica does not run the queue controller (it is not the leader)")]
    NoEngine,
    /// The engine task runs but has not listed every kind yet (start of a term).
    #[error("kuota's queue controller is still loading the cluster's state")]
    NotSynced,
    #[error(transparent)]
    Lookup(#[from] PendingLookupError),
}

/// Queries waiting for the engine task (a few: each answer takes well under a cycle).
const QUEUED_QUERIES: usize = 64;

/// Where readers find the running engine task, if any, and how many times what it
/// answers from has changed.
#[derive(Clone, Debug, Default)]
pub struct PendingQueries {
    inbox: Arc<Mutex<Option<mpsc::Sender<PendingQuery>>>>,
    version: Arc<AtomicU64>,
}

/// An engine task's end of [`PendingQueries`]: the queries, and the change count it bumps.
#[derive(Debug)]
pub struct Inbox {
    queries: mpsc::Receiver<PendingQuery>,
    version: Arc<AtomicU64>,
}

impl Inbox {
    /// The next query; `None` once no reader is left.
    pub async fn recv(&mut self) -> Option<PendingQuery> {
        self.queries.recv().await
    }

    /// Says that the engine's queues or estimates may have changed since the last call:
    /// pages read before are stale.
    pub fn changed(&self) {
        self.version.fetch_add(1, Ordering::Release);
    }
}

impl PendingQueries {
    /// Registers a new engine task's inbox (replacing a stopped one's).
    pub fn register(&self) -> Inbox {
        let (tx, rx) = mpsc::channel(QUEUED_QUERIES);
        *self.inbox.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
        let inbox = Inbox {
            queries: rx,
            version: self.version.clone(),
        };
        // A new term answers from a new engine.
        inbox.changed();
        inbox
    }

    /// How many times the engine's answers may have changed: equal before two reads
    /// means equal answers.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Asks the running engine task for a page.
    pub async fn ask(
        &self,
        target: PendingTarget,
        offset: usize,
        limit: usize,
    ) -> Result<Page, QueryError> {
        let tx = self
            .inbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or(QueryError::NoEngine)?;
        let (reply, answer) = oneshot::channel();
        let query = PendingQuery {
            target,
            offset,
            limit,
            reply,
        };
        tx.send(query).await.map_err(|_| QueryError::NoEngine)?;
        match answer.await {
            Ok(Some(page)) => Ok(page?),
            Ok(None) => Err(QueryError::NotSynced),
            // The task stopped (end of its term) before answering.
            Err(_) => Err(QueryError::NoEngine),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_an_engine_task_the_answer_says_so() {
        let queries = PendingQueries::default();
        let ask = || queries.ask(PendingTarget::ClusterQueue("a".into()), 0, 10);
        assert_eq!(ask().await.unwrap_err(), QueryError::NoEngine);
        let mut inbox = queries.register();
        let task = tokio::spawn(async move {
            inbox.recv().await.unwrap().answer(None, Estimates::Off);
            let engine = Engine::new(Default::default());
            inbox
                .recv()
                .await
                .unwrap()
                .answer(Some(&engine), Estimates::Off);
            // A stopped task: later queries find no engine.
            drop(inbox);
        });
        assert_eq!(ask().await.unwrap_err(), QueryError::NotSynced);
        assert_eq!(
            ask().await.unwrap_err(),
            QueryError::Lookup(PendingLookupError::ClusterQueueNotFound("a".into()))
        );
        task.await.unwrap();
        assert_eq!(ask().await.unwrap_err(), QueryError::NoEngine);
    }

    /// A page may be served again only while the version stays: it moves with each term
    /// of leadership and each change the engine task reports, and with nothing else.
    #[test]
    fn the_version_moves_with_each_term_and_each_change_only() {
        let queries = PendingQueries::default();
        let before = queries.version();
        let inbox = queries.register();
        let term = queries.version();
        assert!(term > before, "a new term");
        assert_eq!(queries.version(), term, "nothing changed");
        inbox.changed();
        assert!(queries.version() > term, "a change");
        let again = queries.register();
        drop(again);
        assert!(queries.version() > term + 1, "another term");
    }
}
