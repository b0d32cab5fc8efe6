//! Lenient decoding of what a cluster sends: a field this kuota does not know (one a
//! newer Kueue added) is ignored and counted in `kuota_unknown_fields_total{kind}`, never
//! an error that would stall a watch or deny a status write. What users write is checked
//! strictly by the manifest loader instead.
//!
//! Lenient also means Kueue's defaults for absent parts: Kueue's Go types decode an absent
//! `spec` as the zero value of its struct (`ResourceFlavor`, `Cohort` and `ClusterQueue`
//! mark it optional, and Kueue's own quick start defines `default-flavor` with none), so
//! an absent or null `spec` reads here as an empty one, whose fields then take their own
//! defaults.

use std::borrow::Cow;

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Kueue's kinds with a `spec` struct, which Go decodes as its zero value when absent.
const KINDS_WITH_SPEC: &[&str] = &[
    "AdmissionCheck",
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "Topology",
    "Workload",
];

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
    value: &Value,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    let value = with_absent_spec(kind, value);
    let mut ignored = 0u64;
    let mut note = |path: serde_ignored::Path<'_>| {
        // apiVersion and kind are read by the caller (or kube), not by the types' fields.
        if !is_type_meta(&path) {
            ignored += 1;
            tracing::debug!(kind, field = %path, "ignored a field this kuota does not know");
        }
    };
    let decoded = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
        value.as_ref(),
        &mut note,
    ));
    record(kind, ignored);
    decoded
}

/// `value` with an empty `spec` in place of an absent or null one, for Kueue's kinds
/// (named by `kind`, or by the object's own `kind` field).
pub fn with_absent_spec<'a>(kind: &str, value: &'a Value) -> Cow<'a, Value> {
    let own_kind = value.get("kind").and_then(Value::as_str);
    let kueue_kind = KINDS_WITH_SPEC
        .iter()
        .any(|k| *k == kind || Some(*k) == own_kind);
    match value {
        Value::Object(m) if kueue_kind && m.get("spec").is_none_or(Value::is_null) => {
            let mut m = m.clone();
            m.insert("spec".into(), Value::Object(serde_json::Map::new()));
            Cow::Owned(Value::Object(m))
        }
        _ => Cow::Borrowed(value),
    }
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

    /// Every example of Kueue's docs (vendored unchanged) that defines a flavor, cohort or
    /// queue, as the API server sends it back: absent parts take Kueue's defaults.
    const KUEUE_DOCS: &[(&str, &str)] = &[
        (
            "admin-concurrent-admission-setup",
            include_str!("../../tests/fixtures/kueue-docs/admin-concurrent-admission-setup.yaml"),
        ),
        (
            "admin-minimal-cq",
            include_str!("../../tests/fixtures/kueue-docs/admin-minimal-cq.yaml"),
        ),
        (
            "admin-resource-flavor-empty",
            include_str!("../../tests/fixtures/kueue-docs/admin-resource-flavor-empty.yaml"),
        ),
        (
            "admin-shared-quota-setup",
            include_str!("../../tests/fixtures/kueue-docs/admin-shared-quota-setup.yaml"),
        ),
        (
            "admin-single-clusterqueue-setup",
            include_str!("../../tests/fixtures/kueue-docs/admin-single-clusterqueue-setup.yaml"),
        ),
        (
            "admission-fs-admission-fair-sharing-setup",
            include_str!(
                "../../tests/fixtures/kueue-docs/admission-fs-admission-fair-sharing-setup.yaml"
            ),
        ),
        (
            "docs-blocks",
            include_str!("../../tests/fixtures/kueue-docs/docs-blocks.yaml"),
        ),
        (
            "dra-sample-dra-capacity-queues",
            include_str!("../../tests/fixtures/kueue-docs/dra-sample-dra-capacity-queues.yaml"),
        ),
        (
            "dra-sample-dra-counter-queues",
            include_str!("../../tests/fixtures/kueue-docs/dra-sample-dra-counter-queues.yaml"),
        ),
        (
            "dra-sample-dra-queues",
            include_str!("../../tests/fixtures/kueue-docs/dra-sample-dra-queues.yaml"),
        ),
        (
            "getting-started-quick-start-setup",
            include_str!("../../tests/fixtures/kueue-docs/getting-started-quick-start-setup.yaml"),
        ),
        (
            "multikueue-multikueue-setup",
            include_str!("../../tests/fixtures/kueue-docs/multikueue-multikueue-setup.yaml"),
        ),
        (
            "provisioning-provisioning-setup",
            include_str!("../../tests/fixtures/kueue-docs/provisioning-provisioning-setup.yaml"),
        ),
    ];

    fn kueue_doc_objects() -> Vec<(String, serde_json::Value)> {
        use serde::Deserialize;
        let mut out = Vec::new();
        for (file, text) in KUEUE_DOCS {
            for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
                let value = serde_json::Value::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{file} document {i}: {e}"));
                if !value.is_null() {
                    out.push((format!("{file} document {i}"), value));
                }
            }
        }
        out
    }

    #[test]
    fn every_kueue_docs_example_decodes_with_kueue_defaults() {
        use crate::api::{ClusterQueue, Cohort, ResourceFlavor};
        let (mut flavors, mut cohorts, mut queues, mut without_spec) = (0, 0, 0, 0);
        for (at, value) in kueue_doc_objects() {
            let kind = value["kind"].as_str().unwrap_or_default().to_string();
            without_spec += usize::from(value.get("spec").is_none());
            match kind.as_str() {
                "ResourceFlavor" => {
                    let rf: ResourceFlavor =
                        from_value(&kind, &value).unwrap_or_else(|e| panic!("{at}: {e}"));
                    if value.get("spec").is_none() {
                        assert_eq!(rf.spec, Default::default(), "{at}");
                    }
                    flavors += 1;
                }
                "Cohort" => {
                    let c: Cohort =
                        from_value(&kind, &value).unwrap_or_else(|e| panic!("{at}: {e}"));
                    if value.get("spec").is_none() {
                        assert_eq!(c.spec.parent(), None, "{at}");
                        assert!(c.spec.resource_groups.is_empty(), "{at}");
                    }
                    cohorts += 1;
                }
                "ClusterQueue" => {
                    let cq: ClusterQueue =
                        from_value(&kind, &value).unwrap_or_else(|e| panic!("{at}: {e}"));
                    if value["spec"].get("resourceGroups").is_none() {
                        assert!(cq.spec.resource_groups.is_empty(), "{at}");
                    }
                    queues += 1;
                }
                "LocalQueue" => {
                    from_value::<LocalQueue>(&kind, &value).unwrap_or_else(|e| panic!("{at}: {e}"));
                }
                _ => {} // AdmissionCheck, MultiKueue…: not counted here
            }
        }
        // The vendored examples as counted when they were copied: a lost file fails here.
        assert_eq!((flavors, cohorts, queues), (17, 4, 16));
        assert_eq!(without_spec, 15 + 2, "flavors and cohorts that omit spec");
    }

    #[test]
    fn a_null_or_absent_spec_reads_as_empty_only_for_kueue_kinds() {
        use crate::api::ResourceFlavor;
        let rf: ResourceFlavor = from_value(
            "ResourceFlavor",
            &serde_json::json!({"metadata": {"name": "f"}, "spec": null}),
        )
        .expect("a null spec is an empty one");
        assert_eq!(rf.spec, Default::default());
        let pc =
            serde_json::json!({"kind": "PriorityClass", "metadata": {"name": "p"}, "value": 1});
        assert!(matches!(
            with_absent_spec("PriorityClass", &pc),
            Cow::Borrowed(_)
        ));
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
