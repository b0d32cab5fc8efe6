//! Lenient decoding of what a cluster sends: a field this kuota does not know (one a
//! newer Kueue added) is ignored and counted in `kuota_unknown_fields_total{kind}`, never
//! an error that would stall a watch or deny a status write. What users write is checked
//! strictly by the manifest loader instead.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use serde::de::DeserializeOwned;

/// Fields ignored so far in this process, by kind. Decoding happens deep in watches and
/// reviews that hold no metrics handle, so the count is kept here, and telemetry reads it
/// when it serves `kuota_unknown_fields_total{kind}` (it is above this module).
static UNKNOWN_FIELDS: LazyLock<Mutex<BTreeMap<String, u64>>> = LazyLock::new(Default::default);

fn record(kind: &str, n: u64) {
    if n == 0 {
        return;
    }
    let mut counts = UNKNOWN_FIELDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    match counts.get_mut(kind) {
        Some(total) => *total += n,
        None => {
            counts.insert(kind.to_string(), n);
        }
    }
}

/// Fields of objects of `kind` ignored so far in this process.
pub fn unknown_fields(kind: &str) -> u64 {
    let counts = UNKNOWN_FIELDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    counts.get(kind).copied().unwrap_or(0)
}

/// Every kind with ignored fields, and how many, in kind order.
pub fn unknown_fields_by_kind() -> Vec<(String, u64)> {
    let counts = UNKNOWN_FIELDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    counts.iter().map(|(k, n)| (k.clone(), *n)).collect()
}

/// Decodes `value` as an object of `kind`, ignoring and counting fields unknown to `T`.
/// A known field with the wrong type is still an error, naming its path.
pub fn from_value<T: DeserializeOwned>(
    kind: &str,
    value: &serde_json::Value,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    let mut ignored = 0u64;
    let mut note = |path: serde_ignored::Path<'_>| {
        // apiVersion and kind are read by the caller (or kube), not by the types' fields.
        if !is_type_meta(&path) {
            ignored += 1;
            tracing::debug!(kind, field = %path, "ignored a field this kuota does not know");
        }
    };
    let decoded =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut note));
    record(kind, ignored);
    decoded
}

/// Whether `path` is the top-level `apiVersion` or `kind`.
pub(crate) fn is_type_meta(path: &serde_ignored::Path<'_>) -> bool {
    matches!(path, serde_ignored::Path::Map { parent: serde_ignored::Path::Root, key }
        if key == "apiVersion" || key == "kind")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LocalQueue;

    #[test]
    fn a_field_from_a_newer_kueue_is_ignored_and_counted() {
        let kind = "LocalQueueLenientTest";
        let before = unknown_fields(kind);
        let lq: LocalQueue = from_value(
            kind,
            &serde_json::json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "ns"},
                "spec": {"clusterQueue": "cq", "futureKnob": {"on": true}},
                "status": {"somethingNew": 3}
            }),
        )
        .expect("unknown fields do not fail a cluster decode");
        assert_eq!(lq.spec.cluster_queue, "cq");
        assert_eq!(unknown_fields(kind) - before, 2);
    }

    #[test]
    fn a_wrong_type_is_still_an_error_with_its_path() {
        let err = from_value::<LocalQueue>(
            "LocalQueue",
            &serde_json::json!({"metadata": {"name": "lq"}, "spec": {"clusterQueue": 7}}),
        )
        .expect_err("a number is not a ClusterQueue name");
        assert!(err.to_string().contains("invalid type"), "{err}");
        assert_eq!(err.path().to_string(), "spec.clusterQueue");
    }
}
