//! Defaulting and validation of Kueue's own kinds (ClusterQueue, Cohort, ResourceFlavor,
//! LocalQueue, Workload, Topology, WorkloadPriorityClass).
//!
//! Validation reuses `api::validate` (one validator for the webhook, the manifest loader and
//! the simulator). Requests may carry v1beta1 or v1beta2 objects: the object is decoded in
//! its own version, converted to v1beta2 through `api::v1beta1`, checked, and the answer is
//! phrased in the request's version (v1beta1 field names in messages, patches against the
//! v1beta1 object).
//!
//! Defaulting is done on the JSON of the object, not by round-tripping typed values, so the
//! patch only adds what is missing and never rewrites fields the types would normalize
//! (timestamps, quantities, field order). The defaults are those of Kueue's CRD schemas and
//! mutating webhooks: ClusterQueue `queueingStrategy`, `stopPolicy`, `flavorFungibility`,
//! `preemption`; LocalQueue `stopPolicy`; Workload pod set `name: main`, `count: 1`, `active: true` (and no
//! `minCount` when partial admission is off).

use super::WebhookState;
use super::jobs::aggregate;
use super::review::{AdmissionRequest, DecodeFailure, Operation, Verdict};
use crate::api::constants::{API_VERSION_V1BETA1, API_VERSION_V1BETA2};
use crate::api::validate::{self, FieldError};
use crate::api::{
    ClusterQueue, ClusterQueueSpec, ClusterQueueStatus, Cohort, CohortSpec, CohortStatus,
    DEFAULT_POD_SET_NAME, LocalQueue, LocalQueueSpec, LocalQueueStatus, ResourceFlavor,
    ResourceFlavorSpec, Topology, TopologySpec, Workload, WorkloadPriorityClass, WorkloadSpec,
    WorkloadStatus, v1beta1,
};
use crate::integrations::patch::pointer;
use json_patch::{AddOperation, PatchOperation, RemoveOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The Kueue kinds this module serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrdKind {
    /// ClusterQueue.
    ClusterQueue,
    /// Cohort.
    Cohort,
    /// ResourceFlavor.
    ResourceFlavor,
    /// LocalQueue.
    LocalQueue,
    /// Workload.
    Workload,
    /// Topology.
    Topology,
    /// WorkloadPriorityClass.
    WorkloadPriorityClass,
}

impl CrdKind {
    /// Every kind.
    pub const ALL: [CrdKind; 7] = [
        CrdKind::ClusterQueue,
        CrdKind::Cohort,
        CrdKind::ResourceFlavor,
        CrdKind::LocalQueue,
        CrdKind::Workload,
        CrdKind::Topology,
        CrdKind::WorkloadPriorityClass,
    ];

    /// Kind name.
    pub fn name(self) -> &'static str {
        match self {
            CrdKind::ClusterQueue => "ClusterQueue",
            CrdKind::Cohort => "Cohort",
            CrdKind::ResourceFlavor => "ResourceFlavor",
            CrdKind::LocalQueue => "LocalQueue",
            CrdKind::Workload => "Workload",
            CrdKind::Topology => "Topology",
            CrdKind::WorkloadPriorityClass => "WorkloadPriorityClass",
        }
    }

    /// Whether a mutating (defaulting) webhook exists for the kind.
    pub fn has_defaults(self) -> bool {
        matches!(
            self,
            CrdKind::ClusterQueue
                | CrdKind::ResourceFlavor
                | CrdKind::LocalQueue
                | CrdKind::Workload
        )
    }
}

/// Served versions of the Kueue kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1beta1,
    V1beta2,
}

fn version_of(req: &AdmissionRequest<'_, Value>, obj: &Value) -> Result<Version, Verdict> {
    // Derived struct decoding would also accept an array of field values.
    if !obj.is_object() {
        return Err(Verdict::bad_object(
            "request.object: invalid type: expected an object",
        ));
    }
    let av = obj.get("apiVersion").and_then(Value::as_str).map_or_else(
        || format!("{}/{}", req.kind.group, req.kind.version),
        str::to_string,
    );
    match av.as_str() {
        API_VERSION_V1BETA2 => Ok(Version::V1beta2),
        API_VERSION_V1BETA1 => Ok(Version::V1beta1),
        other => Err(Verdict::bad_object(format!(
            "request.object.apiVersion: Unsupported value: {other:?}: supported values: {API_VERSION_V1BETA2:?}, {API_VERSION_V1BETA1:?}"
        ))),
    }
}

/// Top-level shape of a Kueue object: metadata, spec, status (apiVersion/kind skipped).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "S: Deserialize<'de> + Default, T: Deserialize<'de>"))]
struct Obj<S, T> {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: S,
    #[serde(default = "Option::default")]
    status: Option<T>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WpcObj {
    #[serde(default)]
    metadata: ObjectMeta,
    value: i32,
    #[serde(default)]
    description: Option<String>,
}

/// A Kueue object in its v1beta2 (hub) form.
enum Hub {
    ClusterQueue(Box<ClusterQueue>),
    Cohort(Box<Cohort>),
    ResourceFlavor(Box<ResourceFlavor>),
    LocalQueue(Box<LocalQueue>),
    Workload(Box<Workload>),
    Topology(Box<Topology>),
    WorkloadPriorityClass(Box<WorkloadPriorityClass>),
}

fn obj<S, T>(kind: CrdKind, value: &Value, prefix: &str) -> Result<Obj<S, T>, DecodeFailure>
where
    S: DeserializeOwned + Default,
    T: DeserializeOwned,
{
    lenient(kind, value, prefix)
}

/// Decodes a reviewed object leniently: the API server has already pruned or refused
/// what the installed CRD lacks, so a field kuota does not know comes from a newer Kueue's
/// CRDs and is ignored (and counted), never a reason to deny.
fn lenient<T: DeserializeOwned>(
    kind: CrdKind,
    value: &Value,
    prefix: &str,
) -> Result<T, DecodeFailure> {
    crate::api::lenient::from_value(kind.name(), value).map_err(|e| DecodeFailure::under(prefix, e))
}

fn to_hub(
    kind: CrdKind,
    version: Version,
    value: &Value,
    prefix: &str,
) -> Result<Hub, DecodeFailure> {
    Ok(match (kind, version) {
        (CrdKind::ClusterQueue, Version::V1beta2) => {
            let o: Obj<ClusterQueueSpec, ClusterQueueStatus> = obj(kind, value, prefix)?;
            Hub::ClusterQueue(Box::new(ClusterQueue {
                metadata: o.metadata,
                spec: o.spec,
                status: o.status,
            }))
        }
        (CrdKind::ClusterQueue, Version::V1beta1) => {
            let o: Obj<v1beta1::ClusterQueueSpec, v1beta1::ClusterQueueStatus> =
                obj(kind, value, prefix)?;
            let old = v1beta1::ClusterQueue {
                metadata: o.metadata,
                spec: o.spec,
                status: o.status,
            };
            Hub::ClusterQueue(Box::new(old.into()))
        }
        (CrdKind::LocalQueue, Version::V1beta2) => {
            let o: Obj<LocalQueueSpec, LocalQueueStatus> = obj(kind, value, prefix)?;
            Hub::LocalQueue(Box::new(LocalQueue {
                metadata: o.metadata,
                spec: o.spec,
                status: o.status,
            }))
        }
        (CrdKind::LocalQueue, Version::V1beta1) => {
            let o: Obj<v1beta1::LocalQueueSpec, v1beta1::LocalQueueStatus> =
                obj(kind, value, prefix)?;
            let old = v1beta1::LocalQueue {
                metadata: o.metadata,
                spec: o.spec,
                status: o.status,
            };
            Hub::LocalQueue(Box::new(old.into()))
        }
        (CrdKind::Workload, Version::V1beta2) => {
            let o: Obj<WorkloadSpec, WorkloadStatus> = obj(kind, value, prefix)?;
            Hub::Workload(Box::new(Workload {
                metadata: o.metadata,
                spec: o.spec,
                status: o.status,
            }))
        }
        (CrdKind::Workload, Version::V1beta1) => {
            let o: Obj<v1beta1::WorkloadSpec, v1beta1::WorkloadStatus> = obj(kind, value, prefix)?;
            let old = v1beta1::Workload {
                metadata: o.metadata,
                spec: o.spec,
                status: o.status,
            };
            Hub::Workload(Box::new(old.into()))
        }
        // The remaining kinds have the same shape in v1beta1 and v1beta2.
        (CrdKind::Cohort, _) => {
            let o: Obj<CohortSpec, CohortStatus> = obj(kind, value, prefix)?;
            Hub::Cohort(Box::new(Cohort {
                metadata: o.metadata,
                spec: o.spec,
                status: o.status,
            }))
        }
        (CrdKind::ResourceFlavor, _) => {
            let o: Obj<ResourceFlavorSpec, serde::de::IgnoredAny> = obj(kind, value, prefix)?;
            Hub::ResourceFlavor(Box::new(ResourceFlavor {
                metadata: o.metadata,
                spec: o.spec,
            }))
        }
        (CrdKind::Topology, _) => {
            let o: Obj<TopologySpec, serde::de::IgnoredAny> = obj(kind, value, prefix)?;
            Hub::Topology(Box::new(Topology {
                metadata: o.metadata,
                spec: o.spec,
            }))
        }
        (CrdKind::WorkloadPriorityClass, _) => {
            let o: WpcObj = lenient(kind, value, prefix)?;
            Hub::WorkloadPriorityClass(Box::new(WorkloadPriorityClass {
                metadata: o.metadata,
                value: o.value,
                description: o.description,
            }))
        }
    })
}

fn validate_hub(new: &Hub, old: Option<&Hub>) -> Vec<FieldError> {
    match (new, old) {
        (Hub::ClusterQueue(n), _) => validate::validate_cluster_queue(n),
        (Hub::Cohort(n), _) => validate::validate_cohort(n),
        (Hub::ResourceFlavor(n), _) => validate::validate_resource_flavor(n),
        (Hub::LocalQueue(n), Some(Hub::LocalQueue(o))) => {
            validate::validate_local_queue_update(n, o)
        }
        (Hub::LocalQueue(n), _) => validate::validate_local_queue(n),
        (Hub::Workload(n), Some(Hub::Workload(o))) => validate::validate_workload_update(n, o),
        (Hub::Workload(n), _) => validate::validate_workload(n),
        (Hub::Topology(n), Some(Hub::Topology(o))) => validate::validate_topology_update(n, o),
        (Hub::Topology(n), _) => validate::validate_topology(n),
        (Hub::WorkloadPriorityClass(n), _) => validate::validate_workload_priority_class(n),
    }
}

/// Field names that differ in v1beta1, so messages speak the request's version.
fn v1beta1_message(kind: CrdKind, msg: &str) -> String {
    let renames: &[(&str, &str)] = match kind {
        CrdKind::ClusterQueue => &[("spec.cohortName", "spec.cohort")],
        CrdKind::Workload => &[
            ("spec.priorityClassRef.name", "spec.priorityClassName"),
            ("spec.priorityClassRef", "spec.priorityClassSource"),
        ],
        CrdKind::LocalQueue => &[("status.flavorsUsage", "status.flavorUsage")],
        _ => &[],
    };
    let mut out = msg.to_string();
    for (from, to) in renames {
        out = out.replace(from, to);
    }
    out
}

/// The validating handler.
pub fn validate(
    _state: &WebhookState,
    kind: CrdKind,
    req: &AdmissionRequest<'_, Value>,
) -> Verdict {
    let (new, old) = match req.operation {
        Operation::Create => match &req.object {
            Some(o) => (o, None),
            None => return Verdict::bad_object("request.object: required for CREATE"),
        },
        Operation::Update => match (&req.object, &req.old_object) {
            (Some(n), Some(o)) => (n, Some(o)),
            (None, _) => return Verdict::bad_object("request.object: required for UPDATE"),
            (_, None) => return Verdict::bad_object("request.oldObject: required for UPDATE"),
        },
        Operation::Delete | Operation::Connect => return Verdict::allow(),
    };
    let version = match version_of(req, new) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let new_hub = match to_hub(kind, version, new, "request.object") {
        Ok(h) => h,
        Err(m) => return Verdict::bad_object(m.to_string()),
    };
    let old_hub = match old {
        Some(o) => {
            let old_version = version_of(req, o).unwrap_or(version);
            match to_hub(kind, old_version, o, "request.oldObject") {
                Ok(h) => Some(h),
                Err(m) => return Verdict::bad_object(m.to_string()),
            }
        }
        None => None,
    };
    let errs = validate_hub(&new_hub, old_hub.as_ref());
    if errs.is_empty() {
        return Verdict::allow();
    }
    let msg = aggregate(&errs);
    match version {
        Version::V1beta2 => Verdict::invalid(msg),
        Version::V1beta1 => Verdict::invalid(v1beta1_message(kind, &msg)),
    }
}

/// The defaulting handler.
pub fn mutate(state: &WebhookState, kind: CrdKind, req: &AdmissionRequest<'_, Value>) -> Verdict {
    if req.operation != Operation::Create {
        return Verdict::allow();
    }
    let Some(obj) = &req.object else {
        return Verdict::bad_object("request.object: required for CREATE");
    };
    let version = match version_of(req, obj) {
        Ok(v) => v,
        Err(v) => return v,
    };
    // Reject shapes the validator would reject anyway, rather than patching garbage.
    if let Err(m) = to_hub(kind, version, obj, "request.object") {
        return Verdict::bad_object(m.to_string());
    }
    let mut d = Defaulter::new(obj);
    match kind {
        CrdKind::ClusterQueue => {
            d.ensure(&["spec", "queueingStrategy"], json!("BestEffortFIFO"));
            d.ensure(&["spec", "stopPolicy"], json!("None"));
            let borrow = match version {
                Version::V1beta2 => "MayStopSearch",
                Version::V1beta1 => "Borrow",
            };
            d.ensure(
                &["spec", "flavorFungibility", "whenCanBorrow"],
                json!(borrow),
            );
            d.ensure(
                &["spec", "flavorFungibility", "whenCanPreempt"],
                json!("TryNextFlavor"),
            );
            d.ensure(
                &["spec", "preemption", "reclaimWithinCohort"],
                json!("Never"),
            );
            d.ensure(
                &["spec", "preemption", "withinClusterQueue"],
                json!("Never"),
            );
            d.ensure(
                &["spec", "preemption", "borrowWithinCohort", "policy"],
                json!("Never"),
            );
        }
        // Kueue's webhook adds the `resource-in-use` finalizer to ClusterQueues and
        // ResourceFlavors. kuota leaves that to the controller, which also removes it:
        // a finalizer nobody removes makes `kubectl delete` hang forever. The route stays
        // (Kueue's manifests call it) and answers without a patch.
        CrdKind::ResourceFlavor => {}
        CrdKind::LocalQueue => d.ensure(&["spec", "stopPolicy"], json!("None")),
        CrdKind::Workload => {
            d.ensure(&["spec", "active"], json!(true));
            let n = obj
                .pointer("/spec/podSets")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            for i in 0..n {
                let idx = i.to_string();
                d.ensure(
                    &["spec", "podSets", &idx, "name"],
                    json!(DEFAULT_POD_SET_NAME),
                );
                d.ensure(&["spec", "podSets", &idx, "count"], json!(1));
                if !state.config.partial_admission {
                    d.remove(&["spec", "podSets", &idx, "minCount"]);
                }
            }
        }
        CrdKind::Cohort | CrdKind::Topology | CrdKind::WorkloadPriorityClass => {}
    }
    Verdict::patched(d.ops, Vec::new())
}

/// Records JSON patch operations that fill in missing fields of a JSON object, creating
/// missing parent objects first. Works on a copy so later checks see earlier defaults.
struct Defaulter {
    doc: Value,
    ops: Vec<PatchOperation>,
}

impl Defaulter {
    fn new(obj: &Value) -> Self {
        Self {
            doc: obj.clone(),
            ops: Vec::new(),
        }
    }

    /// Sets the field at `tokens` to `value` when it is missing or null. Parents that are
    /// missing or null become `{}`; a parent of another type (a list index past the end, a
    /// scalar) stops the walk: the validator reports such objects.
    fn ensure(&mut self, tokens: &[&str], value: Value) {
        let Some((last, parents)) = tokens.split_last() else {
            return;
        };
        let mut cur = &mut self.doc;
        for (i, t) in parents.iter().enumerate() {
            let next = match cur {
                Value::Object(m) => {
                    let missing = m.get(*t).is_none_or(Value::is_null);
                    if missing {
                        m.insert((*t).to_string(), json!({}));
                        self.ops.push(PatchOperation::Add(AddOperation {
                            path: pointer(tokens[..=i].iter().copied()),
                            value: json!({}),
                        }));
                    }
                    m.get_mut(*t)
                }
                Value::Array(a) => t.parse::<usize>().ok().and_then(|idx| a.get_mut(idx)),
                _ => None,
            };
            match next {
                Some(n) => cur = n,
                None => return,
            }
        }
        if let Value::Object(m) = cur
            && m.get(*last).is_none_or(Value::is_null)
        {
            m.insert((*last).to_string(), value.clone());
            self.ops.push(PatchOperation::Add(AddOperation {
                path: pointer(tokens.iter().copied()),
                value,
            }));
        }
    }

    /// Removes the field at `tokens` if present.
    fn remove(&mut self, tokens: &[&str]) {
        let path = pointer(tokens.iter().copied());
        if self.doc.pointer(path.as_str()).is_some() {
            if let Some((last, parents)) = tokens.split_last()
                && let Some(Value::Object(m)) = self
                    .doc
                    .pointer_mut(pointer(parents.iter().copied()).as_str())
            {
                m.remove(*last);
            }
            self.ops
                .push(PatchOperation::Remove(RemoveOperation { path }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaulter_creates_parents_once_and_is_idempotent() {
        let obj = json!({"metadata": {"name": "cq"}, "spec": {"preemption": null}});
        let mut d = Defaulter::new(&obj);
        d.ensure(
            &["spec", "preemption", "reclaimWithinCohort"],
            json!("Never"),
        );
        d.ensure(
            &["spec", "preemption", "borrowWithinCohort", "policy"],
            json!("Never"),
        );
        let mut doc = obj.clone();
        json_patch::patch(&mut doc, &d.ops).expect("applies");
        assert_eq!(doc, d.doc);
        assert_eq!(
            doc["spec"]["preemption"]["borrowWithinCohort"]["policy"],
            "Never"
        );
        let mut again = Defaulter::new(&doc);
        again.ensure(
            &["spec", "preemption", "reclaimWithinCohort"],
            json!("Never"),
        );
        assert!(again.ops.is_empty());
    }
}
