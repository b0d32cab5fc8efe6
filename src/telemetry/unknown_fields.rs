//! The process-wide count of object fields kuota ignored because it does not know them.
//!
//! Decoding happens deep in the webhook's feed and reviews and the controller's watches,
//! none of which holds a [`Metrics`](super::Metrics) handle, so the counter is one shared
//! family that every registry built by `Metrics::new` exposes as
//! `kuota_unknown_fields_total{kind}`.

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::labels::Value;

/// The `kind` label of `kuota_unknown_fields_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: Value,
}

static UNKNOWN_FIELDS: LazyLock<Family<KindLabel, Counter>> = LazyLock::new(Family::default);

/// The shared family (cheap to clone: clones share the counters).
pub fn family() -> Family<KindLabel, Counter> {
    UNKNOWN_FIELDS.clone()
}

/// Counts `n` ignored fields of objects of `kind`.
pub fn record(kind: &str, n: u64) {
    if n > 0 {
        UNKNOWN_FIELDS
            .get_or_create(&KindLabel {
                kind: Value::new(kind),
            })
            .inc_by(n);
    }
}

/// Fields of `kind` ignored so far in this process.
pub fn count(kind: &str) -> u64 {
    UNKNOWN_FIELDS
        .get_or_create(&KindLabel {
            kind: Value::new(kind),
        })
        .get()
}
