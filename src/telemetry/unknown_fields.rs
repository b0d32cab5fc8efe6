//! The process-wide count of object fields kuota ignored because it does not know them.
//!
//! Decoding happens deep in the webhook's feed and reviews and the controller's watches,
//! none of which holds a [`Metrics`](super::Metrics) handle, so the counter is one shared
//! count per kind that every registry built by `Metrics::new` exposes as
//! `kuota_unknown_fields_total{kind,replica_role}` (the role is the registry's, added
//! when it is scraped).

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex, PoisonError};

static UNKNOWN_FIELDS: LazyLock<Mutex<BTreeMap<String, u64>>> = LazyLock::new(Mutex::default);

/// Counts `n` ignored fields of objects of `kind`.
pub fn record(kind: &str, n: u64) {
    if n > 0 {
        let mut counts = UNKNOWN_FIELDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *counts.entry(kind.to_string()).or_default() += n;
    }
}

/// Fields of `kind` ignored so far in this process.
pub fn count(kind: &str) -> u64 {
    let counts = UNKNOWN_FIELDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    counts.get(kind).copied().unwrap_or(0)
}

/// Every kind's count so far, by kind.
pub fn snapshot() -> BTreeMap<String, u64> {
    UNKNOWN_FIELDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}
