//! Runs the scheduler only while this replica leads, and a fresh one on every gain.
//!
//! A scheduler is started by a factory, so each term of leadership starts from nothing
//! and rebuilds its state from the API server (nothing survives from an earlier term that
//! another leader may have made stale). It is told to stop through its shutdown future
//! when leadership is lost or the process stops, and aborted if it does not stop in time.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tracing::{info, warn};

/// Resolves when the scheduler must stop (leadership lost or process stopping).
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Pause before a scheduler that ended on its own is started again.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// Runs `start(shutdown)` whenever `leader` is true, until `stop` becomes true (or the
/// leadership channel closes). Returns once the last scheduler has ended.
pub async fn run<F, Fut>(
    mut leader: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
    stop_timeout: Duration,
    mut start: F,
) where
    F: FnMut(Shutdown) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let leading = tokio::select! {
            ok = async { leader.wait_for(|l| *l).await.is_ok() } => ok,
            _ = async { stop.wait_for(|s| *s).await.is_ok() } => false,
        };
        if !leading {
            return;
        }
        info!("leading: starting the scheduler (its state is rebuilt from the API server)");
        let (tell, told) = oneshot::channel::<()>();
        let mut task = tokio::spawn(start(Box::pin(async move {
            let _ = told.await;
        })));
        let (reason, last) = tokio::select! {
            closed = async { leader.wait_for(|l| !*l).await.is_err() } => {
                ("leadership lost", closed)
            }
            _ = async { stop.wait_for(|s| *s).await.is_ok() } => ("stopping", true),
            _ = &mut task => {
                warn!("the scheduler ended on its own; starting a new one if still leading");
                tokio::time::sleep(RESTART_PAUSE).await;
                continue;
            }
        };
        info!(reason, "leading: stopping the scheduler");
        let _ = tell.send(());
        if tokio::time::timeout(stop_timeout, &mut task).await.is_err() {
            warn!(?stop_timeout, "the scheduler did not stop in time: aborted");
            task.abort();
            let _ = task.await;
        }
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::mpsc;

    /// A factory whose schedulers report "started N" and "stopped N" on a channel.
    fn factory(
        events: mpsc::UnboundedSender<String>,
        ignore_shutdown: bool,
    ) -> impl FnMut(Shutdown) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let n = Arc::new(AtomicUsize::new(0));
        move |shutdown| {
            let id = n.fetch_add(1, Ordering::SeqCst) + 1;
            let events = events.clone();
            Box::pin(async move {
                let _ = events.send(format!("started {id}"));
                shutdown.await;
                if ignore_shutdown {
                    std::future::pending::<()>().await;
                }
                let _ = events.send(format!("stopped {id}"));
            })
        }
    }

    #[tokio::test]
    async fn schedules_only_while_leading_and_fresh_on_every_gain() {
        let (leader_tx, leader_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = watch::channel(false);
        let (ev_tx, mut ev) = mpsc::unbounded_channel();
        let runner = tokio::spawn(run(
            leader_rx,
            stop_rx,
            Duration::from_secs(5),
            factory(ev_tx, false),
        ));
        tokio::task::yield_now().await;
        assert!(ev.try_recv().is_err(), "a follower runs no scheduler");
        leader_tx.send(true).unwrap();
        assert_eq!(ev.recv().await.unwrap(), "started 1");
        leader_tx.send(false).unwrap();
        assert_eq!(ev.recv().await.unwrap(), "stopped 1");
        leader_tx.send(true).unwrap();
        assert_eq!(
            ev.recv().await.unwrap(),
            "started 2",
            "a new term starts afresh"
        );
        stop_tx.send(true).unwrap();
        assert_eq!(ev.recv().await.unwrap(), "stopped 2");
        runner.await.unwrap();
    }

    #[tokio::test]
    async fn stop_while_following_returns_without_scheduling() {
        let (_leader_tx, leader_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = watch::channel(false);
        let (ev_tx, mut ev) = mpsc::unbounded_channel();
        let runner = tokio::spawn(run(
            leader_rx,
            stop_rx,
            Duration::from_secs(5),
            factory(ev_tx, false),
        ));
        stop_tx.send(true).unwrap();
        runner.await.unwrap();
        assert!(ev.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_scheduler_that_ignores_shutdown_is_aborted() {
        let (leader_tx, leader_rx) = watch::channel(true);
        let (stop_tx, stop_rx) = watch::channel(false);
        let (ev_tx, mut ev) = mpsc::unbounded_channel();
        let runner = tokio::spawn(run(
            leader_rx,
            stop_rx,
            Duration::from_millis(200),
            factory(ev_tx, true),
        ));
        assert_eq!(ev.recv().await.unwrap(), "started 1");
        stop_tx.send(true).unwrap();
        runner.await.unwrap();
        drop(leader_tx);
        // The aborted scheduler never reached "stopped"; its sender is dropped with it.
        assert!(ev.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_closed_leadership_channel_ends_the_run() {
        let (leader_tx, leader_rx) = watch::channel(true);
        let (_stop_tx, stop_rx) = watch::channel(false);
        let (ev_tx, mut ev) = mpsc::unbounded_channel();
        let runner = tokio::spawn(run(
            leader_rx,
            stop_rx,
            Duration::from_secs(5),
            factory(ev_tx, false),
        ));
        assert_eq!(ev.recv().await.unwrap(), "started 1");
        drop(leader_tx);
        assert_eq!(ev.recv().await.unwrap(), "stopped 1");
        runner.await.unwrap();
    }
}
