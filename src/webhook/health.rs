//! How the index's watches are doing, for `/readyz`: pure bookkeeping, the feed reports
//! into it and the probe reads it (the clock is passed in, so tests need no sleeping).
//!
//! After the first sync, a watch whose errors keep coming (at least [`FAILING_AFTER`] in a
//! row, the last one within [`FAILING_WINDOW`]) makes the webhook not ready, naming the kind
//! and the last error: its part of the index is going stale and nobody would notice
//! otherwise. A single blip does not, and neither does a watch that recovered quietly (a
//! restarted watch delivers no event until something changes, so "no new error for a
//! while" is the only recovery signal there is).
//!
//! An object that does not decode is skipped by the feed and listed here with its name and
//! field until it is fixed, deleted or re-listed fine. It does not fail readiness: one bad
//! LocalQueue must not take the webhook out of every Service endpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::server::{Diagnosis, Diagnostics, Readiness};
use super::{IndexKind, WebhookState};

/// Consecutive watch errors that count as "keeps failing".
pub const FAILING_AFTER: u32 = 3;
/// How recent the last error must be. kube-rs's default backoff retries at least every
/// 30 s (plus jitter) while a watch fails, so a failing watch always has an error this
/// recent; a recovered one stops producing them.
pub const FAILING_WINDOW: Duration = Duration::from_secs(90);

#[derive(Debug, Default)]
struct KindHealth {
    consecutive_errors: u32,
    last_error: Option<(Instant, String)>,
    /// `namespace/name` (or `name`) -> why it does not decode.
    undecodable: BTreeMap<String, String>,
}

/// Health of every watch of the index.
#[derive(Debug, Default)]
pub struct WatchHealth {
    kinds: Mutex<BTreeMap<&'static str, KindHealth>>,
}

/// A kind's display name.
pub fn kind_name(kind: IndexKind) -> &'static str {
    match kind {
        IndexKind::Namespace => "Namespace",
        IndexKind::LocalQueue => "LocalQueue",
        IndexKind::PriorityClass => "WorkloadPriorityClass",
        IndexKind::ClusterQueue => "ClusterQueue",
        IndexKind::AdmissionCheck => "AdmissionCheck",
    }
}

impl WatchHealth {
    fn with<T>(&self, kind: IndexKind, f: impl FnOnce(&mut KindHealth) -> T) -> T {
        // Plain counters: a panic elsewhere cannot leave them in a state worth refusing.
        let mut kinds = self.kinds.lock().unwrap_or_else(PoisonError::into_inner);
        f(kinds.entry(kind_name(kind)).or_default())
    }

    /// The watch delivered an event: it works.
    pub fn record_ok(&self, kind: IndexKind) {
        self.with(kind, |h| {
            h.consecutive_errors = 0;
            h.last_error = None;
        });
    }

    /// The watch failed with `error` at `now`.
    pub fn record_error(&self, kind: IndexKind, error: String, now: Instant) {
        self.with(kind, |h| {
            h.consecutive_errors = h.consecutive_errors.saturating_add(1);
            h.last_error = Some((now, error));
        });
    }

    /// `object` does not decode (`error` names the field).
    pub fn record_undecodable(&self, kind: IndexKind, object: String, error: String) {
        self.with(kind, |h| {
            h.undecodable.insert(object, error);
        });
    }

    /// `object` decoded, or was deleted: whatever was wrong with it is gone.
    pub fn record_decoded(&self, kind: IndexKind, object: &str) {
        self.with(kind, |h| {
            h.undecodable.remove(object);
        });
    }

    /// A (re-)list started: objects it does not find undecodable again are fine.
    pub fn relist_started(&self, kind: IndexKind) {
        self.with(kind, |h| h.undecodable.clear());
    }

    /// Watches that keep failing at `now`, one line each: `<Kind>: <last error>`.
    pub fn failing(&self, now: Instant) -> Vec<String> {
        let kinds = self.kinds.lock().unwrap_or_else(PoisonError::into_inner);
        kinds
            .iter()
            .filter_map(|(kind, h)| {
                let (at, error) = h.last_error.as_ref()?;
                let recent = now.saturating_duration_since(*at) <= FAILING_WINDOW;
                (h.consecutive_errors >= FAILING_AFTER && recent).then(|| {
                    format!(
                        "watch of {kind} keeps failing ({} errors in a row): {error}",
                        h.consecutive_errors
                    )
                })
            })
            .collect()
    }

    /// Objects left out of the index because they do not decode, one line each.
    pub fn undecodable(&self) -> Vec<String> {
        let kinds = self.kinds.lock().unwrap_or_else(PoisonError::into_inner);
        kinds
            .iter()
            .flat_map(|(kind, h)| {
                h.undecodable
                    .iter()
                    .map(move |(o, e)| format!("{kind} {o} skipped: {e}"))
            })
            .collect()
    }
}

/// Readiness from the handlers' state: ready once the index has synced, unless a watch
/// keeps failing (listed by kind in `/readyz`). Undecodable objects and namespaces whose
/// unlabelled Jobs the webhook configurations do not route to kuota are listed as warnings.
pub fn index_readiness(
    state: Arc<WebhookState>,
    health: Arc<WatchHealth>,
) -> (Readiness, Diagnostics) {
    let index = state.index.clone();
    let ready: Readiness = Arc::new(move || index.is_synced());
    let diagnostics: Diagnostics = Arc::new(move || {
        let mut warnings = health.undecodable();
        if state.index.is_synced() {
            warnings.extend(super::routing::unrouted_namespaces(
                &state.index,
                &state.config,
            ));
        }
        let mut failing = health.failing(Instant::now());
        // Permissions the API server refused kuota's client (telemetry::forbidden).
        failing.extend(crate::telemetry::forbidden::Forbidden::process().failing());
        Diagnosis { failing, warnings }
    });
    (ready, diagnostics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_that_keeps_failing_is_named_until_it_recovers() {
        let h = WatchHealth::default();
        let t0 = Instant::now();
        h.record_error(IndexKind::LocalQueue, "connection refused".into(), t0);
        assert!(h.failing(t0).is_empty(), "one blip is not failing");
        for i in 1..FAILING_AFTER {
            h.record_error(
                IndexKind::LocalQueue,
                "connection refused".into(),
                t0 + Duration::from_secs(u64::from(i)),
            );
        }
        let now = t0 + Duration::from_secs(5);
        assert_eq!(
            h.failing(now),
            vec!["watch of LocalQueue keeps failing (3 errors in a row): connection refused"]
        );
        // No new error for longer than the backoff ever waits: the watch reconnected.
        assert!(h.failing(now + FAILING_WINDOW).is_empty());
        // An event also proves it works.
        h.record_error(IndexKind::LocalQueue, "x".into(), now);
        h.record_ok(IndexKind::LocalQueue);
        assert!(h.failing(now).is_empty());
    }

    #[test]
    fn undecodable_objects_are_listed_until_fixed_or_relisted() {
        let h = WatchHealth::default();
        h.record_undecodable(
            IndexKind::LocalQueue,
            "team/a".into(),
            "spec.clusterQueue: invalid type".into(),
        );
        h.record_undecodable(IndexKind::ClusterQueue, "cq".into(), "spec: bad".into());
        assert_eq!(
            h.undecodable(),
            vec![
                "ClusterQueue cq skipped: spec: bad",
                "LocalQueue team/a skipped: spec.clusterQueue: invalid type"
            ]
        );
        h.record_decoded(IndexKind::LocalQueue, "team/a");
        h.relist_started(IndexKind::ClusterQueue);
        assert!(h.undecodable().is_empty());
        assert!(
            h.failing(Instant::now()).is_empty(),
            "never fails readiness"
        );
    }
}
