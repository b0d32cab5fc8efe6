//! Plain pods as Kueue composes them into Workloads (Kueue's `pkg/controller/jobs/pod`):
//! a pod alone is one Workload of one pod set `main`; pods sharing the
//! `kueue.x-k8s.io/pod-group-name` label form one Workload, named after the group, with one
//! pod set per role (the role hash of the pods' specs), built only once the group's
//! `kueue.x-k8s.io/pod-group-total-count` runnable pods exist.
//!
//! Everything here is pure: the controller hands in the members it watches (pods carrying
//! the `kueue.x-k8s.io/managed=true` label the webhook adds) and writes what is decided.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;
use sha2::Digest;

use super::{JobIntegration, JobObject, Outcome, queue_name};
use crate::api::constants::{
    ADMISSION_SCHEDULING_GATE, JOB_UID_LABEL, MANAGED_LABEL, MANAGED_POD_FINALIZER,
    POD_GROUP_NAME_LABEL, POD_GROUP_TOTAL_COUNT_ANNOTATION, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL,
    RETRIABLE_IN_GROUP_ANNOTATION,
};
use crate::api::{PodSet, PriorityClassRef, Workload, WorkloadSpec};

/// Annotation the webhook gives every gated pod: the hash of its role (Kueue's
/// `RoleHashAnnotation`), so later changes to its spec (a flavor's node selector) keep it in
/// its pod set.
pub const ROLE_HASH_ANNOTATION: &str = "kueue.x-k8s.io/role-hash";
/// Annotation on a pod group's Workload (Kueue's `IsGroupWorkloadAnnotationKey`).
pub const IS_GROUP_WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/is-group-workload";
/// Kueue's event reason when a pod group's Workload cannot be built.
pub const REASON_ERR_WORKLOAD_COMPOSE: &str = "ErrWorkloadCompose";
/// Kueue's `jobframework.MaxPodSets`: roles a pod group may have.
const MAX_POD_SETS: usize = 8;

/// Kueue's `GenerateRoleHash`: the first 8 hex characters of the SHA-256 of the JSON of the
/// admission-relevant parts of a pod spec (`SpecShape`), written as Go's `encoding/json`
/// writes them (map keys sorted, struct fields in Go's order, absent ones as `null`).
pub fn role_hash(spec: &Value) -> String {
    let field = |k: &str| spec.get(k).filter(|v| !v.is_null());
    let mut shape: BTreeMap<&str, String> = BTreeMap::new();
    shape.insert("initContainers", containers_shape(field("initContainers")));
    shape.insert("containers", containers_shape(field("containers")));
    for key in [
        "nodeSelector",
        "affinity",
        "runtimeClassName",
        "priority",
        "topologySpreadConstraints",
        "overhead",
        "resourceClaims",
    ] {
        shape.insert(key, json(field(key)));
    }
    shape.insert("tolerations", tolerations_shape(field("tolerations")));
    if let Some(resources) = field("resources") {
        shape.insert("resources", json(resources.get("requests")));
    }
    let mut out = String::from("{\"spec\":{");
    for (i, (k, v)) in shape.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "\"{k}\":{v}");
    }
    out.push_str("}}");
    let digest = sha2::Sha256::digest(out.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex[..8].to_string()
}

/// Compact JSON of a value (maps come out with sorted keys), `null` when absent.
fn json(v: Option<&Value>) -> String {
    v.filter(|v| !v.is_null())
        .map(|v| serde_json::to_string(v).unwrap_or_else(|_| "null".into()))
        .unwrap_or_else(|| "null".into())
}

/// Go's struct order for the fields of `v` named in `order` (absent ones omitted, as
/// `omitempty` does), then any other field.
fn ordered(v: &Value, order: &[&str]) -> String {
    let Some(obj) = v.as_object() else {
        return json(Some(v));
    };
    let mut parts: Vec<String> = Vec::new();
    for k in order {
        if let Some(x) = obj.get(*k).filter(|x| !x.is_null()) {
            parts.push(format!("\"{k}\":{}", json(Some(x))));
        }
    }
    for (k, x) in obj {
        if !order.contains(&k.as_str()) && !x.is_null() {
            parts.push(format!("\"{k}\":{}", json(Some(x))));
        }
    }
    format!("{{{}}}", parts.join(","))
}

/// Kueue's `ContainersShape`: per container, its requests and ports.
fn containers_shape(containers: Option<&Value>) -> String {
    let Some(list) = containers
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    else {
        return "null".into();
    };
    let items: Vec<String> = list
        .iter()
        .map(|c| {
            let ports = match c.get("ports").and_then(Value::as_array) {
                Some(ps) => {
                    let ps: Vec<String> = ps
                        .iter()
                        .map(|p| {
                            ordered(
                                p,
                                &["name", "hostPort", "containerPort", "protocol", "hostIP"],
                            )
                        })
                        .collect();
                    format!("[{}]", ps.join(","))
                }
                None => "null".into(),
            };
            let requests = json(c.pointer("/resources/requests"));
            format!("{{\"ports\":{ports},\"resources\":{{\"requests\":{requests}}}}}")
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn tolerations_shape(tolerations: Option<&Value>) -> String {
    let Some(list) = tolerations.and_then(Value::as_array) else {
        return "null".into();
    };
    let items: Vec<String> = list
        .iter()
        .map(|t| {
            ordered(
                t,
                &["key", "operator", "value", "effect", "tolerationSeconds"],
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn str_at<'v>(pod: &'v Value, pointer: &str) -> Option<&'v str> {
    pod.pointer(pointer).and_then(Value::as_str)
}

fn label<'v>(pod: &'v Value, key: &str) -> Option<&'v str> {
    pod.get("metadata")?.get("labels")?.get(key)?.as_str()
}

fn annotation<'v>(pod: &'v Value, key: &str) -> Option<&'v str> {
    pod.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// The pod's name.
pub fn name(pod: &Value) -> &str {
    str_at(pod, "/metadata/name").unwrap_or_default()
}

/// The pod's group, if it belongs to one.
pub fn group_name(pod: &Value) -> Option<&str> {
    label(pod, POD_GROUP_NAME_LABEL).filter(|g| !g.is_empty())
}

/// The role (pod set name) of a pod: its role-hash annotation, else the hash of its spec.
pub fn role_of(pod: &Value) -> String {
    annotation(pod, ROLE_HASH_ANNOTATION)
        .map(str::to_string)
        .unwrap_or_else(|| role_hash(pod.get("spec").unwrap_or(&Value::Null)))
}

/// The name of the Workload a managed pod belongs to: its group's name, or for a pod
/// alone Kueue's `pod-<name>-<hash>` (Kueue's `workloadName`).
pub fn workload_name_of(pod: &Value) -> String {
    match group_name(pod) {
        Some(g) => g.to_string(),
        None => super::workload_name(
            name(pod),
            str_at(pod, "/metadata/uid").unwrap_or_default(),
            &super::pod::Pod.gvk(),
        ),
    }
}

fn phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase").unwrap_or_default()
}

fn deleting(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// Kueue's `IsTerminated`: the pod's phase is Succeeded or Failed.
pub fn terminated(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Whether the pod still carries the admission scheduling gate.
pub fn gated(pod: &Value) -> bool {
    pod.pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gs| {
            gs.iter()
                .any(|g| g.get("name").and_then(Value::as_str) == Some(ADMISSION_SCHEDULING_GATE))
        })
}

/// Whether the pod carries the finalizer kuota's webhook adds.
pub fn has_finalizer(pod: &Value) -> bool {
    pod.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|fs| fs.iter().any(|f| f.as_str() == Some(MANAGED_POD_FINALIZER)))
}

/// Kueue's `isPodRunnableOrSucceeded`: not Failed, and not deleted before it was bound.
pub fn runnable_or_succeeded(pod: &Value) -> bool {
    if deleting(pod) && str_at(pod, "/spec/nodeName").is_none_or(str::is_empty) {
        return false;
    }
    phase(pod) != "Failed"
}

/// Kueue's `IsActive` of one pod: Running (a pod being deleted counts until its grace
/// period would have ended; without a clock here, until it is no longer Running).
pub fn running(pod: &Value) -> bool {
    phase(pod) == "Running"
}

/// Whether the pod may lose its finalizer now: it is being deleted and does not run (never
/// bound, or terminated), so nothing about it is left to observe.
pub fn released(pod: &Value) -> bool {
    deleting(pod) && !running(pod)
}

/// Whether a stop must delete the pod: it may run (ungated, not terminated) and is not
/// already being deleted (Kueue's `Stop` skips suspended and deleted pods).
pub fn to_stop(pod: &Value) -> bool {
    !deleting(pod) && !gated(pod) && !terminated(pod)
}

fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Why a group's Workload is not built yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ComposeError {
    /// Pods are still missing: waited for, never an error (Kueue's Event says so).
    Incomplete(String),
    /// The pods disagree or carry bad metadata: reported on the pods, nothing admitted.
    Invalid(String),
}

impl ComposeError {
    /// The message, as Kueue words it.
    pub fn message(&self) -> &str {
        match self {
            Self::Incomplete(m) | Self::Invalid(m) => m,
        }
    }
}

/// The group's total count as the pod says (Kueue's `groupTotalCount`).
fn total_count(pod: &Value) -> Result<i32, String> {
    let raw = annotation(pod, POD_GROUP_TOTAL_COUNT_ANNOTATION).ok_or_else(|| {
        format!(
            "pod '{}': failed to extract '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation",
            name(pod)
        )
    })?;
    match raw.parse::<i32>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err(format!(
            "pod '{}': incorrect annotation value '{POD_GROUP_TOTAL_COUNT_ANNOTATION}={raw}': group total count should be greater than zero",
            name(pod)
        )),
        Err(e) => Err(format!(
            "failed to extract '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation from the pod '{}': {e}",
            name(pod)
        )),
    }
}

fn queue_of(pod: &Value) -> &str {
    label(pod, QUEUE_NAME_LABEL).unwrap_or_default()
}

/// Kueue's `validatePodGroupMetadata`: every non-failed pod names the first pod's queue
/// and total count, and the group has that many runnable pods.
fn validate_group(members: &[&Value]) -> Result<i32, ComposeError> {
    let first = members
        .first()
        .ok_or_else(|| ComposeError::Incomplete("the group has no pods".into()))?;
    let total = total_count(first).map_err(ComposeError::Invalid)?;
    let runnable = members.iter().filter(|p| runnable_or_succeeded(p)).count();
    if runnable < total as usize {
        return Err(ComposeError::Incomplete(format!(
            "'{}' group has fewer runnable pods than expected",
            group_name(first).unwrap_or_default()
        )));
    }
    for pod in members.iter().filter(|p| phase(p) != "Failed") {
        if queue_of(pod) != queue_of(first) {
            return Err(ComposeError::Invalid(format!(
                "pods '{}' and '{}' has different queue names: {}!={}",
                name(first),
                name(pod),
                queue_of(first),
                queue_of(pod)
            )));
        }
        let tc = total_count(pod).map_err(ComposeError::Invalid)?;
        if tc != total {
            return Err(ComposeError::Invalid(format!(
                "pods '{}' and '{}' has different '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' values: {total}!={tc}",
                name(first),
                name(pod)
            )));
        }
    }
    Ok(total)
}

fn template(pod: &Value) -> Result<PodTemplateSpec, ComposeError> {
    let spec = pod.get("spec").cloned().unwrap_or(Value::Null);
    let spec = serde_json::from_value(spec)
        .map_err(|e| ComposeError::Invalid(format!("pod '{}': spec: {e}", name(pod))))?;
    Ok(PodTemplateSpec {
        metadata: None,
        spec: Some(spec),
    })
}

fn owner(pod: &Value, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: name(pod).to_string(),
        uid: str_at(pod, "/metadata/uid").unwrap_or_default().to_string(),
        controller: controller.then_some(true),
        block_owner_deletion: Some(true),
    }
}

/// The members kept for the group's Workload: at most `total` runnable ones, those with
/// kuota's finalizer first, then gated ones, then oldest (Kueue's `sortActivePods`).
pub fn kept_members<'a>(members: &[&'a Value], total: usize) -> Vec<&'a Value> {
    let mut active: Vec<&Value> = members
        .iter()
        .copied()
        .filter(|p| runnable_or_succeeded(p))
        .collect();
    active.sort_by(|a, b| {
        has_finalizer(b)
            .cmp(&has_finalizer(a))
            .then(gated(b).cmp(&gated(a)))
            .then(
                str_at(a, "/metadata/creationTimestamp")
                    .cmp(&str_at(b, "/metadata/creationTimestamp")),
            )
    });
    active.truncate(total);
    active
}

/// The Workload of a pod group (Kueue's `ConstructComposableWorkload` and
/// `NewGroupWorkload`): named after the group, one pod set per role sorted by name, owned by
/// every pod (the first as controller), annotated as a group Workload.
pub fn group_workload(members: &[&Value]) -> Result<Workload, ComposeError> {
    let total = validate_group(members)?;
    let kept = kept_members(members, total as usize);
    let mut pod_sets: Vec<PodSet> = Vec::new();
    for pod in &kept {
        let role = role_of(pod);
        match pod_sets.iter_mut().find(|ps| ps.name == role) {
            Some(ps) => ps.count += 1,
            None => pod_sets.push(PodSet {
                name: role,
                template: template(pod)?,
                count: 1,
                min_count: None,
                topology_request: None,
            }),
        }
    }
    if pod_sets.len() > MAX_POD_SETS {
        return Err(ComposeError::Invalid(format!(
            "pod group can't include more than {MAX_POD_SETS} roles"
        )));
    }
    pod_sets.sort_by(|a, b| a.name.cmp(&b.name));
    let first = kept[0];
    let mut owners = vec![owner(first, true)];
    owners.extend(kept[1..].iter().map(|p| owner(p, false)));
    let mut wl = base_workload(first, group_name(first).unwrap_or_default(), pod_sets);
    wl.metadata.owner_references = Some(owners);
    wl.metadata.annotations = Some(BTreeMap::from([(
        IS_GROUP_WORKLOAD_ANNOTATION.to_string(),
        "true".to_string(),
    )]));
    Ok(wl)
}

/// A Workload for `first`'s queue and priority, named `name`, with `pod_sets`.
fn base_workload(first: &Value, name: &str, pod_sets: Vec<PodSet>) -> Workload {
    let priority_class_ref = label(first, PRIORITY_CLASS_LABEL)
        .filter(|p| !p.is_empty())
        .map(PriorityClassRef::workload)
        .or_else(|| {
            str_at(first, "/spec/priorityClassName")
                .filter(|p| !p.is_empty())
                .map(PriorityClassRef::pod)
        });
    let uid = str_at(first, "/metadata/uid").unwrap_or_default();
    let queue = JobObject::from_value(first)
        .ok()
        .and_then(|j| queue_name(&j).map(str::to_string));
    Workload {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: str_at(first, "/metadata/namespace").map(str::to_string),
            labels: (!uid.is_empty())
                .then(|| BTreeMap::from([(JOB_UID_LABEL.to_string(), uid.to_string())])),
            ..ObjectMeta::default()
        },
        spec: WorkloadSpec {
            pod_sets,
            queue_name: queue,
            priority_class_ref,
            priority: None,
            active: None,
            maximum_execution_time_seconds: None,
            preemption_gates: Vec::new(),
        },
        status: None,
    }
}

/// The pod set a member runs in: its role in a group, `main` alone.
pub fn pod_set_of(pod: &Value) -> String {
    if group_name(pod).is_some() {
        role_of(pod)
    } else {
        crate::api::DEFAULT_POD_SET_NAME.to_string()
    }
}

/// What the members of one Workload say, as the job reconciler reads a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MembersStatus {
    /// Some pod still waits behind the admission gate.
    pub any_gated: bool,
    /// Some pod may run and is not being stopped (ungated, not terminated, not deleted).
    pub any_running_free: bool,
    /// How it ended (Kueue's `Finished`).
    pub finished: Option<Outcome>,
    /// Some pod is Running (Kueue's `IsActive`).
    pub active: bool,
    /// Every pod of the group exists and is Ready (Kueue's `PodsReady`).
    pub pods_ready: bool,
}

/// Reads the members of one Workload (all pods of a group, or the one pod).
pub fn members_status(members: &[&Value]) -> MembersStatus {
    let group = members.first().and_then(|p| group_name(p)).is_some();
    let total = members
        .first()
        .and_then(|p| total_count(p).ok())
        .unwrap_or(1);
    status_of(members, group.then_some(total))
}

/// Reads the members of one Workload: a group of `total` pods (`Some`), or one pod.
pub fn status_of(members: &[&Value], group_total: Option<i32>) -> MembersStatus {
    let group = group_total.is_some();
    let total = group_total.unwrap_or(1);
    let finished = if group {
        let succeeded = members.iter().filter(|p| phase(p) == "Succeeded").count();
        let any_active = members.iter().any(|p| !terminated(p));
        let unretriable = members
            .iter()
            .any(|p| annotation(p, RETRIABLE_IN_GROUP_ANNOTATION) == Some("false"));
        (succeeded == total as usize || (!any_active && unretriable))
            .then(|| Outcome::success(format!("Pods succeeded: {succeeded}/{total}.")))
    } else {
        members.first().filter(|p| terminated(p)).map(|p| {
            let message = str_at(p, "/status/message").unwrap_or_default();
            if phase(p) == "Succeeded" {
                Outcome::success(message)
            } else {
                Outcome::failure(message)
            }
        })
    };
    MembersStatus {
        any_gated: members.iter().any(|p| gated(p)),
        any_running_free: members.iter().any(|p| to_stop(p)),
        finished,
        active: members.iter().any(|p| running(p)),
        pods_ready: members.len() >= total as usize && members.iter().all(|p| ready(p)),
    }
}

/// Whether the pod is one kuota manages as a plain pod (the webhook's label).
pub fn managed(pod: &Value) -> bool {
    label(pod, MANAGED_LABEL) == Some(super::pod::MANAGED_LABEL_VALUE)
}

#[cfg(test)]
mod tests;
