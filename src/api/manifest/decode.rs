//! Per-document decoding: dispatch, strict typed decode, conversion and validation.

use super::{Manifest, Problem};
use crate::api::v1beta1;
use crate::api::validate::FieldError;
use crate::api::{
    ClusterQueue, ClusterQueueSpec, ClusterQueueStatus, Cohort, CohortSpec, CohortStatus,
    FairSharing, LocalQueue, LocalQueueSpec, LocalQueueStatus, ResourceFlavor, ResourceFlavorSpec,
    ResourceGroup, Topology, TopologySpec, Workload, WorkloadPriorityClass, WorkloadSpec,
    WorkloadStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

const V1BETA2: &str = "kueue.x-k8s.io/v1beta2";
const V1BETA1: &str = "kueue.x-k8s.io/v1beta1";
const V1ALPHA1: &str = "kueue.x-k8s.io/v1alpha1";

/// Kinds we accept, with the apiVersions each is served at.
const KINDS: &[(&str, &[&str])] = &[
    ("ResourceFlavor", &[V1BETA2, V1BETA1]),
    ("ClusterQueue", &[V1BETA2, V1BETA1]),
    ("Cohort", &[V1BETA2, V1BETA1, V1ALPHA1]),
    ("LocalQueue", &[V1BETA2, V1BETA1]),
    ("Workload", &[V1BETA2, V1BETA1]),
    ("WorkloadPriorityClass", &[V1BETA2, V1BETA1]),
    ("Topology", &[V1BETA2, V1BETA1, V1ALPHA1]),
    ("Job", &["batch/v1"]),
    ("PriorityClass", &["scheduling.k8s.io/v1"]),
    ("Namespace", &["v1"]),
    ("Node", &["v1"]),
];

/// Top-level shape of a custom resource with spec and status; unknown top-level keys fail.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(bound(deserialize = "S: Deserialize<'de> + Default, T: Deserialize<'de>"))]
struct Envelope<S, T> {
    #[allow(dead_code)]
    api_version: IgnoredAny,
    #[allow(dead_code)]
    kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: S,
    #[serde(default)]
    status: Option<T>,
}

/// Top-level shape of a custom resource without status.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[serde(bound(deserialize = "S: Deserialize<'de> + Default"))]
struct SpecOnly<S> {
    #[allow(dead_code)]
    api_version: IgnoredAny,
    #[allow(dead_code)]
    kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: S,
}

/// Top-level shape of a WorkloadPriorityClass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WpcEnvelope {
    #[allow(dead_code)]
    api_version: IgnoredAny,
    #[allow(dead_code)]
    kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    value: i32,
    #[serde(default)]
    description: Option<String>,
}

/// v1alpha1 Cohort spec: `parent` was later renamed `parentName`.
#[derive(Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CohortSpecV1alpha1 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    resource_groups: Vec<ResourceGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fair_sharing: Option<FairSharing>,
}

/// Decodes all documents; returns what loaded and every problem found.
pub(super) fn load_documents(source: &str, yaml: &str) -> (Vec<Manifest>, Vec<Problem>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let problem = |doc: Option<usize>,
                   line: Option<usize>,
                   object: Option<String>,
                   message: String| Problem {
        source_name: source.to_string(),
        document: doc,
        line,
        object,
        message,
    };
    // Pass 1: syntax. serde_norway keeps yielding the same error after a syntax error, so stop.
    let mut values = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        match serde_norway::Value::deserialize(doc) {
            Ok(v) => values.push(v),
            Err(e) => {
                let line = e.location().map(|l| l.line());
                problems.push(problem(
                    Some(i + 1),
                    line,
                    None,
                    strip_location(&e.to_string(), &e),
                ));
                return (out, problems);
            }
        }
    }
    // Pass 2: the same documents again, now decoded into the types their kind selects, so
    // that serde errors carry line numbers.
    for ((i, doc), value) in serde_norway::Deserializer::from_str(yaml)
        .enumerate()
        .zip(values)
    {
        let n = i + 1;
        if value.is_null() {
            continue;
        }
        let Some(map) = value.as_mapping() else {
            problems.push(problem(
                Some(n),
                None,
                None,
                "expected a Kubernetes object (a mapping with apiVersion and kind)".into(),
            ));
            continue;
        };
        let get = |k: &str| map.get(k).and_then(serde_norway::Value::as_str);
        let (Some(api_version), Some(kind)) = (get("apiVersion"), get("kind")) else {
            let missing = if get("apiVersion").is_none() {
                "apiVersion"
            } else {
                "kind"
            };
            problems.push(problem(
                Some(n),
                None,
                None,
                format!("{missing}: Required value: every document needs apiVersion and kind"),
            ));
            continue;
        };
        let name = map
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(serde_norway::Value::as_str)
            .unwrap_or("");
        let object = Some(format!("{kind} {name:?}"));
        match decode(api_version, kind, doc, &value) {
            Ok(m) => {
                let errs = m.validate();
                if errs.is_empty() {
                    out.push(m);
                } else {
                    let v1beta1_cq = api_version == V1BETA1 && kind == "ClusterQueue";
                    for e in errs {
                        let msg = field_error_message(&e, v1beta1_cq);
                        let line = find_line(yaml, n, &e.path);
                        problems.push(problem(Some(n), line, object.clone(), msg));
                    }
                }
            }
            Err(DecodeError { line, message }) => {
                problems.push(problem(Some(n), line, object, message))
            }
        }
    }
    (out, problems)
}

struct DecodeError {
    line: Option<usize>,
    message: String,
}

impl DecodeError {
    fn msg(message: String) -> Self {
        Self {
            line: None,
            message,
        }
    }
}

fn decode(
    api_version: &str,
    kind: &str,
    doc: serde_norway::Deserializer<'_>,
    value: &serde_norway::Value,
) -> Result<Manifest, DecodeError> {
    let Some((_, versions)) = KINDS.iter().find(|(k, _)| *k == kind) else {
        let known: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
        return Err(DecodeError::msg(format!(
            "kind: Unsupported value: \"{kind}\" (apiVersion {api_version}): supported kinds: {}",
            known.join(", ")
        )));
    };
    if !versions.contains(&api_version) {
        return Err(DecodeError::msg(format!(
            "apiVersion: Unsupported value: \"{api_version}\": {kind} is served at {}",
            versions.join(", ")
        )));
    }
    let v2 = api_version == V1BETA2;
    Ok(match kind {
        "ResourceFlavor" => {
            let e: SpecOnly<ResourceFlavorSpec> = typed(doc, value)?;
            Manifest::ResourceFlavor(ResourceFlavor {
                metadata: e.metadata,
                spec: e.spec,
            })
        }
        "ClusterQueue" if v2 => {
            let e: Envelope<ClusterQueueSpec, ClusterQueueStatus> = typed(doc, value)?;
            Manifest::ClusterQueue(ClusterQueue {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            })
        }
        "ClusterQueue" => {
            let e: Envelope<v1beta1::ClusterQueueSpec, v1beta1::ClusterQueueStatus> =
                typed(doc, value)?;
            let old = v1beta1::ClusterQueue {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            };
            Manifest::ClusterQueue(old.into())
        }
        "Cohort" if api_version == V1ALPHA1 => {
            let e: SpecOnly<CohortSpecV1alpha1> = typed(doc, value)?;
            if e.spec.parent.is_some() && e.spec.parent_name.is_some() {
                return Err(DecodeError::msg(
                    "spec.parent: Forbidden: set only one of parent and parentName".into(),
                ));
            }
            let spec = CohortSpec {
                parent_name: e.spec.parent_name.or(e.spec.parent),
                resource_groups: e.spec.resource_groups,
                fair_sharing: e.spec.fair_sharing,
            };
            Manifest::Cohort(Cohort {
                metadata: e.metadata,
                spec,
                status: None,
            })
        }
        "Cohort" => {
            let e: Envelope<CohortSpec, CohortStatus> = typed(doc, value)?;
            Manifest::Cohort(Cohort {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            })
        }
        "LocalQueue" if v2 => {
            let e: Envelope<LocalQueueSpec, LocalQueueStatus> = typed(doc, value)?;
            Manifest::LocalQueue(LocalQueue {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            })
        }
        "LocalQueue" => {
            let e: Envelope<v1beta1::LocalQueueSpec, v1beta1::LocalQueueStatus> =
                typed(doc, value)?;
            let old = v1beta1::LocalQueue {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            };
            Manifest::LocalQueue(old.into())
        }
        "Workload" if v2 => {
            let e: Envelope<WorkloadSpec, WorkloadStatus> = typed(doc, value)?;
            Manifest::Workload(Box::new(Workload {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            }))
        }
        "Workload" => {
            let e: Envelope<v1beta1::WorkloadSpec, v1beta1::WorkloadStatus> = typed(doc, value)?;
            let old = v1beta1::Workload {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            };
            Manifest::Workload(Box::new(old.into()))
        }
        "WorkloadPriorityClass" => {
            let e: WpcEnvelope = typed(doc, value)?;
            Manifest::WorkloadPriorityClass(WorkloadPriorityClass {
                metadata: e.metadata,
                value: e.value,
                description: e.description,
            })
        }
        "Topology" => {
            let e: SpecOnly<TopologySpec> = typed(doc, value)?;
            Manifest::Topology(Topology {
                metadata: e.metadata,
                spec: e.spec,
            })
        }
        "Job" => Manifest::Job(Box::new(strict(doc, value)?)),
        "PriorityClass" => Manifest::PriorityClass(strict(doc, value)?),
        "Namespace" => Manifest::Namespace(strict(doc, value)?),
        "Node" => Manifest::Node(Box::new(strict(doc, value)?)),
        // KINDS lists exactly the arms above.
        other => {
            return Err(DecodeError::msg(format!(
                "kind: Unsupported value: {other:?}"
            )));
        }
    })
}

/// Decodes a document into a type of ours whose envelope rejects unknown keys, then checks
/// the nested Kubernetes types (ObjectMeta, PodTemplateSpec, ...) that ignore them.
fn typed<T: DeserializeOwned + RoundTrip>(
    doc: serde_norway::Deserializer<'_>,
    value: &serde_norway::Value,
) -> Result<T, DecodeError> {
    let t: T = serde_path_to_error::deserialize(doc).map_err(|e| {
        let inner = e.inner();
        let line = inner.location().map(|l| l.line());
        let msg = strip_location(&inner.to_string(), inner);
        let path = e.path().to_string();
        let message = if path.is_empty() || path == "." {
            msg
        } else {
            format!("{path}: {msg}")
        };
        DecodeError { line, message }
    })?;
    unknown_fields(value, &t.round_trip())?;
    Ok(t)
}

/// Decodes a Kubernetes built-in type and rejects keys it would silently drop.
fn strict<T: DeserializeOwned + Serialize>(
    doc: serde_norway::Deserializer<'_>,
    value: &serde_norway::Value,
) -> Result<T, DecodeError> {
    struct Plain<T>(T);
    impl<T: Serialize> RoundTrip for Plain<T> {
        fn round_trip(&self) -> serde_json::Value {
            serde_json::to_value(&self.0).unwrap_or_default()
        }
    }
    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Plain<T> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            T::deserialize(d).map(Plain)
        }
    }
    typed::<Plain<T>>(doc, value).map(|p| p.0)
}

/// Re-serialization of a decoded envelope, used to spot input keys that were dropped.
trait RoundTrip {
    fn round_trip(&self) -> serde_json::Value;
}

fn meta_json(m: &ObjectMeta) -> serde_json::Value {
    serde_json::to_value(m).unwrap_or_default()
}

impl<S: Serialize, T: Serialize> RoundTrip for Envelope<S, T> {
    fn round_trip(&self) -> serde_json::Value {
        serde_json::json!({"apiVersion": "", "kind": "", "metadata": meta_json(&self.metadata), "spec": self.spec, "status": self.status})
    }
}

impl<S: Serialize> RoundTrip for SpecOnly<S> {
    fn round_trip(&self) -> serde_json::Value {
        serde_json::json!({"apiVersion": "", "kind": "", "metadata": meta_json(&self.metadata), "spec": self.spec})
    }
}

impl RoundTrip for WpcEnvelope {
    fn round_trip(&self) -> serde_json::Value {
        serde_json::json!({"apiVersion": "", "kind": "", "metadata": meta_json(&self.metadata), "value": self.value, "description": self.description})
    }
}

/// Fails on the first key present (and non-empty) in the input but absent after decoding.
fn unknown_fields(
    input: &serde_norway::Value,
    output: &serde_json::Value,
) -> Result<(), DecodeError> {
    // Non-string keys cannot reach our types; serde already rejected those it saw.
    let Ok(input) = serde_json::to_value(input) else {
        return Ok(());
    };
    let mut path = String::new();
    match first_unknown(&input, output, &mut path) {
        Some(p) => Err(DecodeError::msg(format!("{p}: unknown field"))),
        None => Ok(()),
    }
}

fn first_unknown(
    input: &serde_json::Value,
    output: &serde_json::Value,
    path: &mut String,
) -> Option<String> {
    use serde_json::Value as J;
    let empty = |v: &J| match v {
        J::Null => true,
        J::Array(a) => a.is_empty(),
        J::Object(o) => o.is_empty(),
        _ => false,
    };
    match (input, output) {
        (J::Object(i), J::Object(o)) => {
            for (k, v) in i {
                if empty(v) {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                let found = match o.get(k) {
                    None => Some(path.clone()),
                    Some(ov) => first_unknown(v, ov, path),
                };
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (J::Array(i), J::Array(o)) if i.len() == o.len() => {
            for (idx, (iv, ov)) in i.iter().zip(o).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{idx}]"));
                let found = first_unknown(iv, ov, path);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        _ => None,
    }
}

/// Drops serde_norway's own " at line L column C" suffix and path prefix (we print both our way).
fn strip_location(msg: &str, e: &serde_norway::Error) -> String {
    let mut m = msg.to_string();
    if let Some(l) = e.location() {
        let suffix = format!(" at line {} column {}", l.line(), l.column());
        if let Some(stripped) = m.strip_suffix(&suffix) {
            m = stripped.to_string();
        }
    }
    if let Some((head, tail)) = m.split_once(": ")
        && !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/[]".contains(c))
        && !tail.is_empty()
    {
        m = tail.to_string();
    }
    m
}

fn field_error_message(e: &FieldError, v1beta1_cq: bool) -> String {
    let s = e.to_string();
    if v1beta1_cq && let Some(rest) = s.strip_prefix("spec.cohortName") {
        return format!("spec.cohort{rest}");
    }
    s
}

/// Best-effort line of the last key of `path` within document `doc` (1-based): the line is
/// reported only when that key appears exactly once in the document.
fn find_line(yaml: &str, doc: usize, path: &str) -> Option<usize> {
    let key = path.rsplit('.').next()?.split('[').next()?;
    if key.is_empty() {
        return None;
    }
    let mut current = 1usize;
    let mut hits = Vec::new();
    let mut started = false;
    for (i, line) in yaml.lines().enumerate() {
        if line.starts_with("---") {
            if started {
                current += 1;
            }
            continue;
        }
        if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            started = true;
        }
        if current != doc {
            continue;
        }
        let t = line.trim_start().trim_start_matches("- ");
        if t.starts_with(&format!("{key}:"))
            || t.contains(&format!("{{{key}:"))
            || t.contains(&format!(" {key}:"))
        {
            hits.push(i + 1);
        }
    }
    (hits.len() == 1).then(|| hits[0])
}

#[cfg(test)]
pub(super) fn find_line_for_test(yaml: &str, doc: usize, path: &str) -> Option<usize> {
    find_line(yaml, doc, path)
}
