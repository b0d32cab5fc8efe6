//! Per-document decoding: merge keys, `kind: List`, dispatch on kind, strict typed decode,
//! generated names, conversion and validation.

use super::locate::{self, Seg};
use super::strict::{self, FieldProblem};
use super::{ForeignKind, ForeignKinds, ForeignObject, Loaded, Manifest, Problem};
use crate::api::v1beta1;
use crate::api::validate::FieldError;
use crate::api::{
    AdmissionCheck, AdmissionCheckSpec, AdmissionCheckStatus, ClusterQueue, ClusterQueueSpec,
    ClusterQueueStatus, Cohort, CohortSpec, CohortStatus, FairSharing, LocalQueue, LocalQueueSpec,
    LocalQueueStatus, MultiKueueCluster, MultiKueueClusterSpec, MultiKueueClusterStatus,
    MultiKueueConfig, MultiKueueConfigSpec, ProvisioningRequestConfig,
    ProvisioningRequestConfigSpec, ResourceFlavor, ResourceFlavorSpec, ResourceGroup, Topology,
    TopologySpec, Workload, WorkloadPriorityClass, WorkloadSpec, WorkloadStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

const V1BETA2: &str = "kueue.x-k8s.io/v1beta2";
const V1BETA1: &str = "kueue.x-k8s.io/v1beta1";
const V1ALPHA1: &str = "kueue.x-k8s.io/v1alpha1";

/// Kinds we accept, with the apiVersions each is served at.
const KINDS: &[(&str, &[&str])] = &[
    ("ResourceFlavor", &[V1BETA2, V1BETA1]),
    ("ClusterQueue", &[V1BETA2, V1BETA1]),
    ("AdmissionCheck", &[V1BETA2, V1BETA1]),
    ("ProvisioningRequestConfig", &[V1BETA2, V1BETA1]),
    ("MultiKueueConfig", &[V1BETA2, V1BETA1]),
    ("MultiKueueCluster", &[V1BETA2, V1BETA1]),
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
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
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
pub(super) fn load_documents(
    source: &str,
    yaml: &str,
    foreign: &dyn ForeignKinds,
) -> (Vec<Loaded>, Vec<Problem>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    // Syntax first. serde_norway keeps yielding the same error after a syntax error, so stop.
    let mut values = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        match serde_norway::Value::deserialize(doc) {
            Ok(v) => values.push(v),
            Err(e) => {
                problems.push(Problem {
                    source_name: source.to_string(),
                    document: Some(i + 1),
                    line: e.location().map(|l| l.line()),
                    object: None,
                    message: strip_location(&e.to_string(), &e),
                });
                return (out, problems);
            }
        }
    }
    for (i, mut value) in values.into_iter().enumerate() {
        let doc = Doc {
            source,
            yaml,
            number: i + 1,
        };
        if value.is_null() {
            continue;
        }
        // `<<: *anchor` merge keys, as kubectl accepts them.
        if let Err(e) = value.apply_merge() {
            problems.push(doc.problem(&[], None, format!("<<: {e}")));
            continue;
        }
        match list_items(&value) {
            // `kind: List`, as `kubectl get -o yaml` prints several objects.
            Some(items) => {
                for (j, item) in items.iter().enumerate() {
                    let prefix = [Seg::Key("items".into()), Seg::Index(j)];
                    load_object(&doc, &prefix, item, foreign, &mut out, &mut problems);
                }
            }
            None => load_object(&doc, &[], &value, foreign, &mut out, &mut problems),
        }
    }
    (out, problems)
}

/// One document of the input, for locating problems.
struct Doc<'a> {
    source: &'a str,
    yaml: &'a str,
    number: usize,
}

impl Doc<'_> {
    /// A problem at `path` (within this document), whose line is looked up along the path.
    fn problem(&self, path: &[Seg], object: Option<String>, message: String) -> Problem {
        Problem {
            source_name: self.source.to_string(),
            document: Some(self.number),
            line: locate::line_of(self.yaml, self.number, path),
            object,
            message,
        }
    }
}

/// The items of a `v1` `List`, if `value` is one.
fn list_items(value: &serde_norway::Value) -> Option<&[serde_norway::Value]> {
    let map = value.as_mapping()?;
    let is = |k: &str, v: &str| map.get(k).and_then(serde_norway::Value::as_str) == Some(v);
    if !(is("apiVersion", "v1") && is("kind", "List")) {
        return None;
    }
    Some(
        map.get("items")
            .and_then(serde_norway::Value::as_sequence)
            .map_or(&[], Vec::as_slice),
    )
}

/// Decodes, names and validates one object found at `prefix` in `doc`.
fn load_object(
    doc: &Doc<'_>,
    prefix: &[Seg],
    value: &serde_norway::Value,
    foreign: &dyn ForeignKinds,
    out: &mut Vec<Loaded>,
    problems: &mut Vec<Problem>,
) {
    let at = |rel: &[Seg]| [prefix, rel].concat();
    let Some(map) = value.as_mapping() else {
        problems.push(doc.problem(
            prefix,
            None,
            "expected a Kubernetes object (a mapping with apiVersion and kind)".into(),
        ));
        return;
    };
    let get = |k: &str| map.get(k).and_then(serde_norway::Value::as_str);
    let (Some(api_version), Some(kind)) = (get("apiVersion"), get("kind")) else {
        let missing = if get("apiVersion").is_none() {
            "apiVersion"
        } else {
            "kind"
        };
        problems.push(doc.problem(
            prefix,
            None,
            format!("{missing}: Required value: every document needs apiVersion and kind"),
        ));
        return;
    };
    let meta = map.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(serde_norway::Value::as_str)
        .or_else(|| {
            meta.and_then(|m| m.get("generateName"))
                .and_then(serde_norway::Value::as_str)
        })
        .unwrap_or("");
    let object = Some(format!("{kind} {name:?}"));
    let mut m = match decode(api_version, kind, value, foreign) {
        Ok(m) => m,
        Err(errs) => {
            for e in errs {
                let message = if e.path.is_empty() {
                    e.message
                } else {
                    format!("{}: {}", locate::display(&e.path), e.message)
                };
                problems.push(doc.problem(&at(&e.path), object.clone(), message));
            }
            return;
        }
    };
    generate_name(&mut m, doc, prefix);
    let errs = m.validate();
    if !errs.is_empty() {
        let v1beta1_cq = api_version == V1BETA1 && kind == "ClusterQueue";
        for e in errs {
            let path = at(&locate::parse(&e.path.to_string()));
            problems.push(doc.problem(&path, object.clone(), field_error_message(&e, v1beta1_cq)));
        }
        return;
    }
    let name_path = at(&[Seg::Key("metadata".into()), Seg::Key("name".into())]);
    out.push(Loaded {
        manifest: m,
        source_name: doc.source.to_string(),
        document: doc.number,
        line: locate::line_of(doc.yaml, doc.number, &name_path),
    });
}

/// Gives an object with `generateName` and no name the name the API server would: the
/// prefix and five characters from its alphabet. They are derived from the object's place
/// in the input rather than drawn at random, so a simulation stays reproducible.
fn generate_name(m: &mut Manifest, doc: &Doc<'_>, prefix: &[Seg]) {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let meta = m.metadata_mut();
    let Some(base) = meta.generate_name.as_deref() else {
        return;
    };
    if meta.name.as_deref().is_some_and(|n| !n.is_empty()) {
        return;
    }
    use std::hash::BuildHasher;
    let place = (doc.source, doc.number, locate::display(prefix));
    let mut h = foldhash::fast::FixedState::with_seed(0).hash_one(place);
    let mut suffix = String::with_capacity(5);
    for _ in 0..5 {
        suffix.push(char::from(ALPHABET[(h % ALPHABET.len() as u64) as usize]));
        h /= ALPHABET.len() as u64;
    }
    meta.name = Some(format!("{base}{suffix}"));
}

/// Decodes one object into its Manifest; older Kueue apiVersions are converted to v1beta2.
fn decode(
    api_version: &str,
    kind: &str,
    value: &serde_norway::Value,
    foreign: &dyn ForeignKinds,
) -> Result<Manifest, Vec<FieldProblem>> {
    if !KINDS.iter().any(|(k, _)| *k == kind) {
        match foreign.classify(api_version, kind) {
            ForeignKind::Accept => return decode_foreign(api_version, kind, value),
            ForeignKind::Refuse(reason) => return Err(kind_problem(reason)),
            ForeignKind::Unknown => {}
        }
    }
    check_served(api_version, kind)?;
    let v2 = api_version == V1BETA2;
    Ok(match kind {
        "ResourceFlavor" => {
            let e: SpecOnly<ResourceFlavorSpec> = strict::decode(value)?;
            Manifest::ResourceFlavor(ResourceFlavor {
                metadata: e.metadata,
                spec: e.spec,
            })
        }
        "ClusterQueue" => decode_cluster_queue(v2, value)?,
        "AdmissionCheck" => decode_admission_check(v2, value)?,
        "MultiKueueConfig" | "MultiKueueCluster" => decode_multikueue(kind, v2, value)?,
        "ProvisioningRequestConfig" => {
            // v1beta1 has the same fields.
            let e: SpecOnly<ProvisioningRequestConfigSpec> = strict::decode(value)?;
            Manifest::ProvisioningRequestConfig(ProvisioningRequestConfig {
                metadata: e.metadata,
                spec: e.spec,
            })
        }
        "Cohort" => decode_cohort(api_version, value)?,
        "LocalQueue" => decode_local_queue(v2, value)?,
        "Workload" => decode_workload(v2, value)?,
        "WorkloadPriorityClass" => {
            let e: WpcEnvelope = strict::decode(value)?;
            Manifest::WorkloadPriorityClass(WorkloadPriorityClass {
                metadata: e.metadata,
                value: e.value,
                description: e.description,
            })
        }
        "Topology" => {
            let e: SpecOnly<TopologySpec> = strict::decode(value)?;
            Manifest::Topology(Topology {
                metadata: e.metadata,
                spec: e.spec,
            })
        }
        "Job" => Manifest::Job(Box::new(strict::decode(value)?)),
        "PriorityClass" => Manifest::PriorityClass(strict::decode(value)?),
        "Namespace" => Manifest::Namespace(strict::decode(value)?),
        "Node" => Manifest::Node(Box::new(strict::decode(value)?)),
        // KINDS lists exactly the arms above.
        other => {
            return Err(kind_problem(format!("kind: Unsupported value: {other:?}")));
        }
    })
}

/// An object of a kind the caller decodes: kept whole, with its metadata decoded strictly.
fn decode_foreign(
    api_version: &str,
    kind: &str,
    value: &serde_norway::Value,
) -> Result<Manifest, Vec<FieldProblem>> {
    // Only the metadata is typed here, strictly; the rest is the kind's, and its rules run
    // where the kind is known.
    let metadata = match value.get("metadata") {
        Some(m) => strict::decode::<ObjectMeta>(m).map_err(|problems| {
            problems
                .into_iter()
                .map(|p| FieldProblem {
                    path: [vec![Seg::Key("metadata".into())], p.path].concat(),
                    message: p.message,
                })
                .collect::<Vec<_>>()
        })?,
        None => ObjectMeta::default(),
    };
    let object = serde_json::to_value(value).map_err(|e| kind_problem(e.to_string()))?;
    Ok(Manifest::Foreign(Box::new(ForeignObject {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        metadata,
        object,
    })))
}

/// Checks that `kind` is one kuota serves, at `api_version`.
fn check_served(api_version: &str, kind: &str) -> Result<(), Vec<FieldProblem>> {
    let Some((_, versions)) = KINDS.iter().find(|(k, _)| *k == kind) else {
        return Err(unsupported_kind(api_version, kind));
    };
    if !versions.contains(&api_version) {
        return Err(kind_problem(format!(
            "apiVersion: Unsupported value: \"{api_version}\": {kind} is served at {}",
            versions.join(", ")
        )));
    }
    Ok(())
}

/// The problem with a kind kuota does not serve.
fn unsupported_kind(api_version: &str, kind: &str) -> Vec<FieldProblem> {
    let known: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
    kind_problem(format!(
        "kind: Unsupported value: \"{kind}\" (apiVersion {api_version}): supported kinds: {}",
        known.join(", ")
    ))
}

/// A ClusterQueue, converted from v1beta1 unless `v2`.
fn decode_cluster_queue(
    v2: bool,
    value: &serde_norway::Value,
) -> Result<Manifest, Vec<FieldProblem>> {
    if v2 {
        let e: Envelope<ClusterQueueSpec, ClusterQueueStatus> = strict::decode(value)?;
        return Ok(Manifest::ClusterQueue(ClusterQueue {
            metadata: e.metadata,
            spec: e.spec,
            status: e.status,
        }));
    }
    let e: Envelope<v1beta1::ClusterQueueSpec, v1beta1::ClusterQueueStatus> =
        strict::decode(value)?;
    let old = v1beta1::ClusterQueue {
        metadata: e.metadata,
        spec: e.spec,
        status: e.status,
    };
    Ok(Manifest::ClusterQueue(old.into()))
}

/// An AdmissionCheck, converted from v1beta1 (which adds `retryDelayMinutes`) unless `v2`.
fn decode_admission_check(
    v2: bool,
    value: &serde_norway::Value,
) -> Result<Manifest, Vec<FieldProblem>> {
    if v2 {
        let e: Envelope<AdmissionCheckSpec, AdmissionCheckStatus> = strict::decode(value)?;
        return Ok(Manifest::AdmissionCheck(AdmissionCheck {
            metadata: e.metadata,
            spec: e.spec,
            status: e.status,
        }));
    }
    let e: Envelope<v1beta1::AdmissionCheckSpec, AdmissionCheckStatus> = strict::decode(value)?;
    let old = v1beta1::AdmissionCheck {
        metadata: e.metadata,
        spec: e.spec,
        status: e.status,
    };
    Ok(Manifest::AdmissionCheck(old.into()))
}

/// A MultiKueueConfig or MultiKueueCluster, converted from v1beta1 unless `v2`.
fn decode_multikueue(
    kind: &str,
    v2: bool,
    value: &serde_norway::Value,
) -> Result<Manifest, Vec<FieldProblem>> {
    Ok(match (kind, v2) {
        ("MultiKueueConfig", true) => {
            let e: SpecOnly<MultiKueueConfigSpec> = strict::decode(value)?;
            Manifest::MultiKueueConfig(MultiKueueConfig {
                metadata: e.metadata,
                spec: e.spec,
            })
        }
        ("MultiKueueConfig", false) => {
            let e: SpecOnly<v1beta1::MultiKueueConfigSpec> = strict::decode(value)?;
            let old = v1beta1::MultiKueueConfig {
                metadata: e.metadata,
                spec: e.spec,
            };
            Manifest::MultiKueueConfig(old.into())
        }
        (_, true) => {
            let e: Envelope<MultiKueueClusterSpec, MultiKueueClusterStatus> =
                strict::decode(value)?;
            Manifest::MultiKueueCluster(MultiKueueCluster {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            })
        }
        (_, false) => {
            let e: Envelope<v1beta1::MultiKueueClusterSpec, MultiKueueClusterStatus> =
                strict::decode(value)?;
            let old = v1beta1::MultiKueueCluster {
                metadata: e.metadata,
                spec: e.spec,
                status: e.status,
            };
            Manifest::MultiKueueCluster(old.into())
        }
    })
}

/// A Cohort; v1alpha1's spec is converted, v1beta1's and v1beta2's are the same.
fn decode_cohort(
    api_version: &str,
    value: &serde_norway::Value,
) -> Result<Manifest, Vec<FieldProblem>> {
    if api_version == V1ALPHA1 {
        return decode_cohort_v1alpha1(value);
    }
    let e: Envelope<CohortSpec, CohortStatus> = strict::decode(value)?;
    Ok(Manifest::Cohort(Cohort {
        metadata: e.metadata,
        spec: e.spec,
        status: e.status,
    }))
}

/// A v1alpha1 Cohort, whose `parent` became `parentName`.
fn decode_cohort_v1alpha1(value: &serde_norway::Value) -> Result<Manifest, Vec<FieldProblem>> {
    let e: SpecOnly<CohortSpecV1alpha1> = strict::decode(value)?;
    if e.spec.parent.is_some() && e.spec.parent_name.is_some() {
        return Err(kind_problem(
            "spec.parent: Forbidden: set only one of parent and parentName".into(),
        ));
    }
    let spec = CohortSpec {
        parent_name: e.spec.parent_name.or(e.spec.parent),
        resource_groups: e.spec.resource_groups,
        fair_sharing: e.spec.fair_sharing,
    };
    Ok(Manifest::Cohort(Cohort {
        metadata: e.metadata,
        spec,
        status: None,
    }))
}

/// A LocalQueue, converted from v1beta1 unless `v2`.
fn decode_local_queue(
    v2: bool,
    value: &serde_norway::Value,
) -> Result<Manifest, Vec<FieldProblem>> {
    if v2 {
        let e: Envelope<LocalQueueSpec, LocalQueueStatus> = strict::decode(value)?;
        return Ok(Manifest::LocalQueue(LocalQueue {
            metadata: e.metadata,
            spec: e.spec,
            status: e.status,
        }));
    }
    let e: Envelope<v1beta1::LocalQueueSpec, v1beta1::LocalQueueStatus> = strict::decode(value)?;
    let old = v1beta1::LocalQueue {
        metadata: e.metadata,
        spec: e.spec,
        status: e.status,
    };
    Ok(Manifest::LocalQueue(old.into()))
}

/// A Workload, converted from v1beta1 unless `v2`.
fn decode_workload(v2: bool, value: &serde_norway::Value) -> Result<Manifest, Vec<FieldProblem>> {
    if v2 {
        let e: Envelope<WorkloadSpec, WorkloadStatus> = strict::decode(value)?;
        return Ok(Manifest::Workload(Box::new(Workload {
            metadata: e.metadata,
            spec: e.spec,
            status: e.status,
        })));
    }
    let e: Envelope<v1beta1::WorkloadSpec, v1beta1::WorkloadStatus> = strict::decode(value)?;
    let old = v1beta1::Workload {
        metadata: e.metadata,
        spec: e.spec,
        status: e.status,
    };
    Ok(Manifest::Workload(Box::new(old.into())))
}

/// A problem with the object as a whole (its kind or version).
fn kind_problem(message: String) -> Vec<FieldProblem> {
    vec![FieldProblem {
        path: Vec::new(),
        message,
    }]
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
