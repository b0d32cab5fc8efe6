//! Lenient decoding of what a cluster sends: fields this version of kuota does not know
//! (a newer Kueue's) are ignored and counted, never an error. What users write is checked
//! strictly elsewhere (the manifest loader behind `kuota check`).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use serde::de::DeserializeOwned;

fn counts() -> &'static Mutex<BTreeMap<&'static str, u64>> {
    static COUNTS: OnceLock<Mutex<BTreeMap<&'static str, u64>>> = OnceLock::new();
    COUNTS.get_or_init(Default::default)
}

/// Decodes `value` as a `kind` object, ignoring (and counting) unknown fields.
/// Errors name the field path (`spec.clusterQueue: invalid type ...`).
pub fn from_value<T: DeserializeOwned>(
    kind: &'static str,
    value: serde_json::Value,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    let mut unknown = 0u64;
    let mut note = |path: serde_ignored::Path<'_>| {
        // The type meta is read by kube, not by the types' own fields.
        if matches!(path.to_string().as_str(), "apiVersion" | "kind") {
            return;
        }
        unknown += 1;
        tracing::debug!(kind, field = %path, "ignored a field this kuota does not know");
    };
    let decoded =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut note))?;
    if unknown > 0 {
        let mut counts = counts().lock().unwrap_or_else(|p| p.into_inner());
        *counts.entry(kind).or_default() += unknown;
    }
    Ok(decoded)
}

/// Unknown fields ignored so far, per kind (exported as `kuota_unknown_fields_total`).
pub fn unknown_field_counts() -> Vec<(&'static str, u64)> {
    let counts = counts().lock().unwrap_or_else(|p| p.into_inner());
    counts.iter().map(|(k, v)| (*k, *v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LocalQueue;

    #[test]
    fn a_field_from_a_newer_kueue_is_ignored_and_counted() {
        let before = unknown_field_counts()
            .into_iter()
            .find(|(k, _)| *k == "LocalQueueLenientTest")
            .map_or(0, |(_, n)| n);
        let lq: LocalQueue = from_value(
            "LocalQueueLenientTest",
            serde_json::json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "ns"},
                "spec": {"clusterQueue": "cq", "futureKnob": {"on": true}},
                "status": {"somethingNew": 3}
            }),
        )
        .expect("unknown fields do not fail a cluster decode");
        assert_eq!(lq.spec.cluster_queue, "cq");
        let after = unknown_field_counts()
            .into_iter()
            .find(|(k, _)| *k == "LocalQueueLenientTest")
            .map_or(0, |(_, n)| n);
        assert_eq!(after - before, 2);
    }

    #[test]
    fn a_wrong_type_is_still_an_error() {
        let err = from_value::<LocalQueue>(
            "LocalQueue",
            serde_json::json!({"metadata": {"name": "lq"}, "spec": {"clusterQueue": 7}}),
        )
        .expect_err("a number is not a ClusterQueue name");
        assert!(err.to_string().contains("invalid type"), "{err}");
        assert_eq!(err.path().to_string(), "spec.clusterQueue");
    }
}
