//! This replica's claim on the leader Lease, published as a `watch::Receiver<bool>`.
//!
//! kube-lease-manager does the locking (server-side apply with a field manager per
//! identity, so two replicas can never both take the Lease). Around it, a watch on the
//! Lease object:
//! - a follower that sees the Lease released starts a fresh claim at once (the crate alone
//!   would sleep until the released Lease's old expiry);
//! - a leader that sees another holder, or sees none of its own renewals for
//!   `renewDeadline`, steps down at once, before the Lease could pass to someone else.
//!
//! An API error also steps the leader down: scheduling without knowing that the Lease is
//! still ours could admit twice.

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseParams};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{LeaseChange, LeaseTiming, RenewWatchdog, classify};
use crate::config::LeaderElection;

/// How long [`Election::release`] waits for the Lease to be released.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// A running election; [`Election::release`] ends it and frees the Lease.
pub struct Election {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Election {
    /// Steps down and releases the Lease (if held), so another replica takes over now
    /// rather than when the Lease would expire.
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(RELEASE_TIMEOUT, &mut self.task)
            .await
            .is_err()
        {
            warn!("the leader Lease was not released in time; it will expire instead");
            self.task.abort();
        }
    }
}

/// Leadership that never changes (`leaderElect: false`): keep the sender alive as long as
/// the receiver is used, since `leading::run` treats a closed channel as "stop".
pub fn always_leader() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    watch::channel(true)
}

/// Starts competing for the Lease of `cfg` as `identity`.
pub fn spawn(
    client: Client,
    cfg: LeaderElection,
    identity: String,
) -> (watch::Receiver<bool>, Election) {
    let (tx, rx) = watch::channel(false);
    let (stop_tx, stop_rx) = oneshot::channel();
    let task = tokio::spawn(run(client, cfg, identity, tx, stop_rx));
    (
        rx,
        Election {
            stop: Some(stop_tx),
            task,
        },
    )
}

/// Why one claim on the Lease ended.
enum Outcome {
    /// Process stopping: release the Lease.
    Stop,
    /// The Lease is free: claim again now.
    ClaimNow,
    /// Stepped down or failed: claim again after `retryPeriod`.
    ClaimLater,
}

async fn run(
    client: Client,
    cfg: LeaderElection,
    identity: String,
    leader: watch::Sender<bool>,
    mut stop: oneshot::Receiver<()>,
) {
    let timing = LeaseTiming::for_config(&cfg);
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let fields = format!("metadata.name={}", cfg.lease_name);
    let mut lease_events = watcher(api, watcher::Config::default().fields(&fields))
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut watchdog = RenewWatchdog::new(cfg.renew_deadline);
    info!(lease = %cfg.lease_name, namespace = %cfg.namespace, %identity, "leader election: competing for the Lease");
    loop {
        let built = LeaseManagerBuilder::new(client.clone(), &cfg.lease_name)
            .with_namespace(&cfg.namespace)
            .with_parameters(LeaseParams::new(
                identity.clone(),
                timing.duration_secs,
                timing.grace_secs,
            ))
            .build()
            .await;
        let outcome = match built {
            Ok(manager) => {
                let outcome = hold(
                    &manager,
                    &identity,
                    &leader,
                    &mut watchdog,
                    &mut lease_events,
                    &mut stop,
                )
                .await;
                if matches!(outcome, Outcome::Stop) {
                    set(&leader, false);
                    match manager.release().await {
                        Ok(()) => info!(lease = %cfg.lease_name, "leader election: Lease released"),
                        Err(e) => {
                            warn!(error = %e, "leader election: could not release the Lease; it will expire")
                        }
                    }
                    return;
                }
                outcome
            }
            Err(e) => {
                warn!(error = %e, lease = %cfg.lease_name, "leader election: cannot read or create the Lease");
                Outcome::ClaimLater
            }
        };
        set(&leader, false);
        if matches!(outcome, Outcome::ClaimLater) {
            tokio::select! {
                _ = &mut stop => return,
                () = tokio::time::sleep(cfg.retry_period) => {}
            }
        }
    }
}

/// Keeps one claim going until it must be restarted or the process stops.
async fn hold(
    manager: &LeaseManager,
    identity: &str,
    leader: &watch::Sender<bool>,
    watchdog: &mut RenewWatchdog,
    lease_events: &mut (impl Stream<Item = Result<Lease, watcher::Error>> + Unpin),
    stop: &mut oneshot::Receiver<()>,
) -> Outcome {
    let mut changed = Box::pin(manager.changed());
    loop {
        let leading = *leader.borrow();
        let deadline = leading.then(|| watchdog.deadline()).flatten();
        tokio::select! {
            _ = &mut *stop => return Outcome::Stop,
            result = &mut changed => {
                match result {
                    Ok(true) => {
                        info!(%identity, "leader election: this replica is the leader");
                        watchdog.reset(Instant::now());
                        set(leader, true);
                    }
                    Ok(false) => {
                        info!(%identity, "leader election: this replica lost the Lease");
                        return Outcome::ClaimLater;
                    }
                    Err(e) => {
                        warn!(error = %e, "leader election: Lease update failed; stepping down");
                        return Outcome::ClaimLater;
                    }
                }
                changed = Box::pin(manager.changed());
            }
            event = lease_events.next() => match event {
                Some(Ok(lease)) => match classify(&lease, identity) {
                    LeaseChange::Free if !leading => {
                        debug!("leader election: the Lease was released; claiming it now");
                        return Outcome::ClaimNow;
                    }
                    LeaseChange::HeldByOther if leading => {
                        warn!("leader election: another replica holds the Lease; stepping down");
                        return Outcome::ClaimLater;
                    }
                    LeaseChange::RenewedByUs(at) => watchdog.observe(at, Instant::now()),
                    _ => {}
                },
                Some(Err(e)) => debug!(error = %e, "leader election: Lease watch error (retrying)"),
                None => return Outcome::ClaimLater,
            },
            () = sleep_until(deadline) => {
                warn!("leader election: no renewal seen within renewDeadline; stepping down");
                return Outcome::ClaimLater;
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn set(leader: &watch::Sender<bool>, value: bool) {
    leader.send_if_modified(|current| {
        let changed = *current != value;
        *current = value;
        changed
    });
}
