//! Leader election for `kuota serve`: only the replica holding a `coordination.k8s.io`
//! Lease schedules; every replica serves the webhook.
//!
//! - [`elect`] keeps this replica's claim on the Lease with kube-lease-manager and
//!   publishes "am I the leader" on a watch channel. A watch on the Lease adds what the
//!   crate alone does not do: a follower takes over as soon as the holder releases the Lease
//!   (on SIGTERM) instead of waiting for it to expire, and a leader that has not seen its
//!   own renewal within `renewDeadline` steps down before another replica can take over.
//! - [`leading`] runs the scheduler (the controller) while leadership lasts, and a fresh one
//!   on every gain, so a new leader rebuilds its engine from API state.
//!
//! This module holds the pure timing rules; the two submodules do the I/O.

pub mod elect;
pub mod leading;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;

use crate::config::LeaderElection;

/// Scheduling as `kuota serve` runs it: leader election (unless `leaderElect: false`) and
/// a scheduler started afresh on every term of leadership.
pub struct Scheduling {
    stop: tokio::sync::watch::Sender<bool>,
    runner: tokio::task::JoinHandle<()>,
    election: Option<elect::Election>,
    /// Without election: the sender of the constant "leader" value.
    _always: Option<tokio::sync::watch::Sender<bool>>,
}

impl Scheduling {
    /// Starts competing for leadership, and `start(shutdown)` whenever this replica leads.
    pub fn start<F, Fut>(client: kube::Client, cfg: &LeaderElection, start: F) -> Self
    where
        F: FnMut(leading::Shutdown) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (leader, election, always) = if cfg.enabled {
            let (rx, election) = elect::spawn(client, cfg.clone(), identity());
            (rx, Some(election), None)
        } else {
            tracing::warn!(
                "leaderElection.leaderElect is false: this replica schedules without a Lease; run only one"
            );
            let (tx, rx) = elect::always_leader();
            (rx, None, Some(tx))
        };
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        // Long enough for the controller to finish writes in flight, short of the
        // Lease duration so a successor never overlaps with it.
        let stop_timeout = cfg.renew_deadline.min(Duration::from_secs(10));
        let runner = tokio::spawn(leading::run(leader, stop_rx, stop_timeout, start));
        Self {
            stop,
            runner,
            election,
            _always: always,
        }
    }

    /// Stops (as [`Scheduling::stop`]) once `signalled` turns true, or once its sender is
    /// dropped: `kuota serve` hands it the SIGTERM signal so scheduling stops and the Lease
    /// is released while the webhook drains, not after the drain.
    pub fn stop_on(
        self,
        mut signalled: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let _ = signalled.wait_for(|s| *s).await;
            self.stop().await;
        })
    }

    /// SIGTERM: stop scheduling, then release the Lease so another replica takes over now.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.runner.await {
            tracing::warn!(error = %e, "the scheduling task failed");
        }
        if let Some(election) = self.election {
            election.release().await;
        }
    }
}

/// kube-lease-manager's timing for a [`LeaderElection`]: whole seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// `leaseDurationSeconds` written on the Lease.
    pub duration_secs: u64,
    /// How long before expiry the holder renews: the holder renews every
    /// `duration_secs - grace_secs` seconds.
    pub grace_secs: u64,
}

impl LeaseTiming {
    /// The holder renews every `retryPeriod` (as client-go's elector does), so a few missed
    /// renewals still leave it the Lease; never less than a second apart, and always
    /// before the Lease lapses.
    pub fn for_config(cfg: &LeaderElection) -> Self {
        let duration_secs = cfg.lease_duration.as_secs_f64().ceil().max(2.0) as u64;
        let renew_every =
            (cfg.retry_period.as_secs_f64().round() as u64).clamp(1, duration_secs - 1);
        Self {
            duration_secs,
            grace_secs: duration_secs - renew_every,
        }
    }
}

/// What a change of the Lease means to this replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseChange {
    /// Nobody holds the Lease (released or never held): a follower should try now.
    Free,
    /// This replica's own renewal landed, at this `renewTime`.
    RenewedByUs(String),
    /// Someone else holds it.
    HeldByOther,
}

/// Classifies an observed Lease for replica `identity`.
pub fn classify(lease: &Lease, identity: &str) -> LeaseChange {
    let spec = lease.spec.as_ref();
    match spec.and_then(|s| s.holder_identity.as_deref()) {
        None | Some("") => LeaseChange::Free,
        Some(holder) if holder == identity => LeaseChange::RenewedByUs(
            spec.and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        ),
        Some(_) => LeaseChange::HeldByOther,
    }
}

/// A leader's check that its renewals still land: it must step down once `renew_deadline`
/// has passed since the last renewal it saw, which is before the Lease (longer) can lapse
/// and be taken by another replica.
#[derive(Clone, Debug)]
pub struct RenewWatchdog {
    renew_deadline: Duration,
    last_seen: Option<(String, tokio::time::Instant)>,
}

impl RenewWatchdog {
    pub fn new(renew_deadline: Duration) -> Self {
        Self {
            renew_deadline,
            last_seen: None,
        }
    }

    /// Leadership was (re)gained now: the acquisition counts as a renewal.
    pub fn reset(&mut self, now: tokio::time::Instant) {
        self.last_seen = Some((String::new(), now));
    }

    /// A renewal with this `renewTime` was observed at `now`.
    pub fn observe(&mut self, renew_time: String, now: tokio::time::Instant) {
        if self
            .last_seen
            .as_ref()
            .is_none_or(|(t, _)| *t != renew_time)
        {
            self.last_seen = Some((renew_time, now));
        }
    }

    /// When the leader must step down unless another renewal is seen first.
    pub fn deadline(&self) -> Option<tokio::time::Instant> {
        self.last_seen
            .as_ref()
            .map(|(_, at)| *at + self.renew_deadline)
    }
}

/// This replica's identity on the Lease: the pod name when in a cluster, else the host
/// name, plus a random suffix so two processes on one host never share an identity.
pub fn identity() -> String {
    let base = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "kuota".to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{base}_{:x}{nanos:08x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn cfg(duration: u64, renew: u64, retry: u64) -> LeaderElection {
        LeaderElection {
            enabled: true,
            lease_name: "l".into(),
            namespace: "n".into(),
            lease_duration: Duration::from_secs(duration),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        }
    }

    #[test]
    fn timing_renews_every_retry_period() {
        // Kueue's defaults: a 15 s Lease renewed every 2 s.
        assert_eq!(
            LeaseTiming::for_config(&cfg(15, 10, 2)),
            LeaseTiming {
                duration_secs: 15,
                grace_secs: 13
            }
        );
        // A retry period as long as the Lease still renews a second before it lapses.
        assert_eq!(
            LeaseTiming::for_config(&cfg(4, 3, 10)),
            LeaseTiming {
                duration_secs: 4,
                grace_secs: 1
            }
        );
        // Sub-second settings round to what a Lease can say (whole seconds).
        let mut c = cfg(1, 0, 0);
        c.retry_period = Duration::from_millis(200);
        let t = LeaseTiming::for_config(&c);
        assert!(t.grace_secs >= 1 && t.grace_secs < t.duration_secs, "{t:?}");
    }

    fn lease(holder: Option<&str>, renew: Option<&str>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(String::from),
                renew_time: renew.map(|r| MicroTime(r.parse().unwrap())),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn classify_lease_changes() {
        assert_eq!(classify(&lease(None, None), "me"), LeaseChange::Free);
        assert_eq!(classify(&lease(Some(""), None), "me"), LeaseChange::Free);
        assert_eq!(classify(&Lease::default(), "me"), LeaseChange::Free);
        assert_eq!(
            classify(&lease(Some("other"), Some("2026-01-01T00:00:00Z")), "me"),
            LeaseChange::HeldByOther
        );
        match classify(&lease(Some("me"), Some("2026-01-01T00:00:01Z")), "me") {
            LeaseChange::RenewedByUs(t) => assert!(t.starts_with("2026-01-01T00:00:01")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn watchdog_moves_only_on_a_new_renewal() {
        let t0 = tokio::time::Instant::now();
        let mut w = RenewWatchdog::new(Duration::from_secs(10));
        assert_eq!(w.deadline(), None, "a follower has no deadline");
        w.reset(t0);
        assert_eq!(w.deadline(), Some(t0 + Duration::from_secs(10)));
        w.observe("a".into(), t0 + Duration::from_secs(2));
        assert_eq!(w.deadline(), Some(t0 + Duration::from_secs(12)));
        // The same renewTime seen again (a re-list) is not a new renewal.
        w.observe("a".into(), t0 + Duration::from_secs(5));
        assert_eq!(w.deadline(), Some(t0 + Duration::from_secs(12)));
        w.observe("b".into(), t0 + Duration::from_secs(6));
        assert_eq!(w.deadline(), Some(t0 + Duration::from_secs(16)));
    }

    /// Scheduling without election (no API calls), its scheduler reporting on `events`.
    fn unelected(events: tokio::sync::mpsc::UnboundedSender<&'static str>) -> Scheduling {
        use http::{Request, Response};
        use kube::client::Body;
        let (service, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let mut c = cfg(15, 10, 2);
        c.enabled = false;
        Scheduling::start(kube::Client::new(service, "default"), &c, move |shutdown| {
            let events = events.clone();
            async move {
                let _ = events.send("started");
                shutdown.await;
                let _ = events.send("stopped");
            }
        })
    }

    #[tokio::test]
    async fn the_signal_stops_scheduling_without_waiting_for_anything_else() {
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let (signal, signalled) = tokio::sync::watch::channel(false);
        let stopping = unelected(tx).stop_on(signalled);
        assert_eq!(events.recv().await, Some("started"));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(events.try_recv().is_err(), "no stop before the signal");
        signal.send(true).unwrap();
        assert_eq!(events.recv().await, Some("stopped"));
        stopping.await.unwrap();
        // The sender is still alive: the signal alone stopped it.
        drop(signal);
    }

    #[tokio::test]
    async fn a_server_that_ends_without_a_signal_stops_scheduling_too() {
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let (signal, signalled) = tokio::sync::watch::channel(false);
        let stopping = unelected(tx).stop_on(signalled);
        assert_eq!(events.recv().await, Some("started"));
        drop(signal);
        assert_eq!(events.recv().await, Some("stopped"));
        stopping.await.unwrap();
    }

    #[test]
    fn identities_differ_between_calls() {
        let a = identity();
        std::thread::sleep(Duration::from_millis(1));
        assert_ne!(a, identity());
    }
}
