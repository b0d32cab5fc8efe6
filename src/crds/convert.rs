//! v1beta1⇄v1beta2 conversion of kueue.x-k8s.io objects, as the API server asks for it in a
//! ConversionReview (pure: JSON in, JSON out; the HTTP side is `webhook::convert`).
//!
//! Kinds whose shape did not change (ResourceFlavor, Cohort, Topology, WorkloadPriorityClass,
//! ProvisioningRequestConfig) only get their `apiVersion` rewritten, after checking that they decode. AdmissionCheck,
//! MultiKueueConfig, MultiKueueCluster,
//! ClusterQueue, LocalQueue and Workload go through the typed conversions in `api::v1beta1`. `metadata` is
//! copied verbatim: the API server refuses a conversion that changes anything in it but
//! labels and annotations.
//!
//! Fields v1beta1 cannot express (ClusterQueue `concurrentAdmissionPolicy`, Workload
//! `preemptionGates`, …) would be lost on a v1beta2 → v1beta1 → v1beta2 round trip, so the
//! v1beta2 `spec` is kept in the [`STASH_ANNOTATION`] of the v1beta1 object whenever the
//! plain conversion would lose part of it, and restored on the way back as long as the
//! v1beta1 spec was not changed meanwhile (the usual Kubernetes technique).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::api::{self, v1beta1};

/// `kueue.x-k8s.io/v1beta1`.
pub const V1BETA1: &str = "kueue.x-k8s.io/v1beta1";
/// `kueue.x-k8s.io/v1beta2`.
pub const V1BETA2: &str = "kueue.x-k8s.io/v1beta2";
/// Annotation of a v1beta1 object holding the v1beta2 spec v1beta1 cannot express.
pub const STASH_ANNOTATION: &str = "kuota.dev/v1beta2-spec";

/// Why one object could not be converted; the message names the object and the field.
#[derive(Debug, thiserror::Error)]
#[error("{object}: {problem}")]
pub struct ConvertError {
    /// `Kind "name"` or `Kind "namespace/name"` (or `object N` when even that is unknown).
    pub object: String,
    /// What is wrong.
    pub problem: Problem,
}

/// What is wrong with an object.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// Not a JSON object.
    #[error("not a JSON object")]
    NotAnObject,
    /// `apiVersion` or `kind` missing.
    #[error("{0}: required")]
    Missing(&'static str),
    /// A version kuota does not serve.
    #[error("apiVersion: {0:?} is not served by kuota (served: {V1BETA2}, {V1BETA1})")]
    Version(String),
    /// A kind kuota does not serve.
    #[error("kind: {0:?} is not served by kuota")]
    Kind(String),
    /// A field does not decode.
    #[error("{path}: {source}")]
    Field {
        /// The field's path (`spec.resourceGroups[0].flavors`).
        path: String,
        /// serde's message.
        #[source]
        source: serde_json::Error,
    },
    /// The converted object does not encode (a bug, reported rather than panicking).
    #[error("encoding the converted object: {0}")]
    Encode(#[source] serde_json::Error),
}

/// Converts one object to `desired` (`kueue.x-k8s.io/v1beta1` or `…/v1beta2`).
pub fn convert(object: &Value, desired: &str, index: usize) -> Result<Value, ConvertError> {
    let map = object.as_object().ok_or_else(|| ConvertError {
        object: format!("object {index}"),
        problem: Problem::NotAnObject,
    })?;
    let name = describe(map, index);
    let fail = |problem| ConvertError {
        object: name.clone(),
        problem,
    };
    let from = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| fail(Problem::Missing("apiVersion")))?;
    let kind = map
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| fail(Problem::Missing("kind")))?;
    for v in [from, desired] {
        if v != V1BETA1 && v != V1BETA2 {
            return Err(fail(Problem::Version(v.to_string())));
        }
    }
    let converted = match (kind, from == V1BETA1, desired == V1BETA1) {
        (_, a, b) if a == b => Ok(object.clone()),
        ("ResourceFlavor", _, _) => relabel::<api::ResourceFlavor>(map, desired),
        ("Cohort", _, _) => relabel::<api::Cohort>(map, desired),
        ("Topology", _, _) => relabel::<api::Topology>(map, desired),
        ("ProvisioningRequestConfig", _, _) => {
            relabel::<api::ProvisioningRequestConfig>(map, desired)
        }
        ("WorkloadPriorityClass", _, _) => relabel::<api::WorkloadPriorityClass>(map, desired),
        ("ClusterQueue", true, _) => up::<v1beta1::ClusterQueue, api::ClusterQueue>(map),
        ("ClusterQueue", false, _) => down::<api::ClusterQueue, v1beta1::ClusterQueue>(map),
        ("AdmissionCheck", true, _) => up::<v1beta1::AdmissionCheck, api::AdmissionCheck>(map),
        ("AdmissionCheck", false, _) => down::<api::AdmissionCheck, v1beta1::AdmissionCheck>(map),
        ("MultiKueueConfig", true, _) => {
            up::<v1beta1::MultiKueueConfig, api::MultiKueueConfig>(map)
        }
        ("MultiKueueConfig", false, _) => {
            down::<api::MultiKueueConfig, v1beta1::MultiKueueConfig>(map)
        }
        ("MultiKueueCluster", true, _) => {
            up::<v1beta1::MultiKueueCluster, api::MultiKueueCluster>(map)
        }
        ("MultiKueueCluster", false, _) => {
            down::<api::MultiKueueCluster, v1beta1::MultiKueueCluster>(map)
        }
        ("LocalQueue", true, _) => up::<v1beta1::LocalQueue, api::LocalQueue>(map),
        ("LocalQueue", false, _) => down::<api::LocalQueue, v1beta1::LocalQueue>(map),
        ("Workload", true, _) => up::<v1beta1::Workload, api::Workload>(map),
        ("Workload", false, _) => down::<api::Workload, v1beta1::Workload>(map),
        (other, _, _) => Err(Problem::Kind(other.to_string())),
    };
    converted.map_err(fail)
}

/// `Kind "ns/name"` for messages.
fn describe(map: &Map<String, Value>, index: usize) -> String {
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("object");
    let meta = map.get("metadata");
    let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str);
    match (field("namespace"), field("name")) {
        (Some(ns), Some(n)) => format!("{kind} \"{ns}/{n}\""),
        (None, Some(n)) => format!("{kind} \"{n}\""),
        _ => format!("{kind} (object {index})"),
    }
}

/// Decodes with the failing field's path in the error. A missing `spec` reads as empty:
/// Kueue's schemas do not require it, the Rust types do.
fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, Problem> {
    let filled;
    let value = match value {
        Value::Object(m)
            if !m.contains_key("spec")
                && m.get("kind").and_then(Value::as_str) != Some("WorkloadPriorityClass") =>
        {
            let mut m = m.clone();
            m.insert("spec".into(), Value::Object(Map::new()));
            filled = Value::Object(m);
            &filled
        }
        other => other,
    };
    serde_path_to_error::deserialize(value).map_err(|e| Problem::Field {
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

fn encode<T: Serialize>(value: &T) -> Result<Value, Problem> {
    serde_json::to_value(value).map_err(Problem::Encode)
}

/// Same shape in both versions: check it decodes, rewrite `apiVersion`, keep every byte else.
fn relabel<T: DeserializeOwned>(map: &Map<String, Value>, desired: &str) -> Result<Value, Problem> {
    let mut probe = map.clone();
    probe.insert("apiVersion".into(), Value::from(V1BETA2));
    decode::<T>(&Value::Object(probe))?;
    let mut out = map.clone();
    out.insert("apiVersion".into(), Value::from(desired));
    Ok(Value::Object(out))
}

/// v1beta1 → v1beta2, restoring a stashed v1beta2 spec if the v1beta1 spec is unchanged.
fn up<Old, New>(map: &Map<String, Value>) -> Result<Value, Problem>
where
    Old: DeserializeOwned + Serialize + Into<New>,
    New: DeserializeOwned + Serialize + Into<Old>,
{
    let old: Old = decode(&Value::Object(without_stash(map)))?;
    let old_spec = encode(&old)?.get("spec").cloned();
    let mut out = encode(&old.into())?;
    if let Some(stashed) = stash_of(map) {
        // Only when converting the stashed spec down gives today's v1beta1 spec: otherwise
        // someone changed the object through v1beta1 and their change wins.
        let mut candidate = out.clone();
        candidate["spec"] = stashed;
        if let Ok(typed) = serde_json::from_value::<New>(candidate.clone()) {
            let down: Old = typed.into();
            if encode(&down)?.get("spec") == old_spec.as_ref() {
                out = candidate;
            }
        }
    }
    Ok(finish(out, map, V1BETA2, None))
}

/// v1beta2 → v1beta1, stashing the v1beta2 spec when v1beta1 cannot hold all of it.
fn down<New, Old>(map: &Map<String, Value>) -> Result<Value, Problem>
where
    New: DeserializeOwned + Serialize + Clone + Into<Old>,
    Old: Serialize + Clone + Into<New>,
{
    let new: New = decode(&Value::Object(without_stash(map)))?;
    let old: Old = new.clone().into();
    let back: New = old.clone().into();
    let out = encode(&old)?;
    let lossless = encode(&back)?.get("spec") == encode(&new)?.get("spec");
    let stash = (!lossless).then(|| map.get("spec").cloned().unwrap_or(Value::Null));
    Ok(finish(out, map, V1BETA1, stash))
}

/// The converted object with the original `metadata` (stash annotation set or removed) and
/// the desired `apiVersion`.
fn finish(
    mut out: Value,
    original: &Map<String, Value>,
    api_version: &str,
    stash: Option<Value>,
) -> Value {
    let mut metadata = original
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    set_stash(&mut metadata, stash);
    if let Some(obj) = out.as_object_mut() {
        obj.insert("apiVersion".into(), Value::from(api_version));
        obj.insert("metadata".into(), metadata);
    }
    out
}

fn stash_of(map: &Map<String, Value>) -> Option<Value> {
    let text = map
        .get("metadata")?
        .get("annotations")?
        .get(STASH_ANNOTATION)?
        .as_str()?;
    serde_json::from_str(text).ok()
}

fn without_stash(map: &Map<String, Value>) -> Map<String, Value> {
    let mut out = map.clone();
    if let Some(meta) = out.get_mut("metadata") {
        set_stash(meta, None);
    }
    out
}

/// Sets (or with `None` removes) the stash annotation, dropping an emptied annotation map.
fn set_stash(metadata: &mut Value, stash: Option<Value>) {
    let Some(meta) = metadata.as_object_mut() else {
        return;
    };
    match stash {
        Some(spec) => {
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(STASH_ANNOTATION.into(), Value::from(spec.to_string()));
            }
        }
        None => {
            let emptied = meta
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
                .is_some_and(|a| a.remove(STASH_ANNOTATION).is_some() && a.is_empty());
            if emptied {
                meta.remove("annotations");
            }
        }
    }
}

/// Converts every object of a review to `desired`, all or nothing (the API server rejects
/// partial answers); the error names the first object that failed and its field.
pub fn convert_all(objects: &[Value], desired: &str) -> Result<Vec<Value>, ConvertError> {
    objects
        .iter()
        .enumerate()
        .map(|(i, o)| convert(o, desired, i))
        .collect()
}
