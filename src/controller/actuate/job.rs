//! Job writes: start (unsuspend with the flavors' node labels and tolerations), stop
//! (suspend), and restore (the pod templates as the Workload recorded them). Each is one
//! JSON patch computed as the difference between the job and its desired form, guarded by
//! `test` operations on the fields it changes so that a decision made on a stale job is
//! refused.
//!
//! Start also stamps each admitted pod template as Kueue does: the `kueue.x-k8s.io/podset`
//! label and the `kueue.x-k8s.io/workload` annotation, and for a PodSet with a
//! `topologyAssignment` the `kueue.x-k8s.io/topology` scheduling gate (plus the
//! unconstrained-topology annotation when the PodSet asked for no topology itself), so the
//! pods wait for the ungater to give each its domain. Restore takes all of it off again.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch, PatchOperation, TestOperation};
use k8s_openapi::api::core::v1::{PodTemplateSpec, Toleration};
use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use crate::api::constants::{
    CLUSTER_QUEUE_LABEL, LOCAL_QUEUE_LABEL, PODSET_LABEL, PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ANNOTATION,
};
use crate::api::validate::dns1123_label_errors;
use crate::api::{PodSetAssignment, ResourceFlavor, Workload};
use crate::controller::translate::decode;
use crate::controller::watch::Kind;
use crate::integrations::{ComposedJob, JobIntegration, JobObject};

/// Why a job patch could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum JobPatchError {
    #[error("job {name}: {source}")]
    Decode {
        name: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Name, template pointer and (for a template the object may lack) the operator's default
/// template of each pod set of the job.
type PodSetPointer = (String, PointerBuf, Option<Value>);

/// [`PodSetPointer`]s of the job's pod sets.
fn pod_set_pointers(
    integration: &dyn JobIntegration,
    job: &Value,
) -> Result<Vec<PodSetPointer>, JobPatchError> {
    let view = JobObject::from_value(job).map_err(|source| JobPatchError::Decode {
        name: job
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        source,
    })?;
    Ok(integration
        .pod_sets(&view)
        .into_iter()
        .map(|ps| (ps.name.to_string(), ps.pointer, ps.default_template))
        .collect())
}

/// Writes `default` at `pointer` when the job has no template there, so the admission can
/// be injected into it (Kueue sets a RayJob's submitter template so on start).
fn ensure_template(job: &mut Value, pointer: &PointerBuf, default: &Value) {
    if pointer.is_root() || job.pointer(pointer.as_str()).is_some() {
        return;
    }
    let Some((parent, last)) = pointer.as_str().rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    if let Some(obj) = job.pointer_mut(parent).and_then(Value::as_object_mut) {
        obj.insert(last, default.clone());
    }
}

/// The pod template a pointer names (the root: the job itself is a pod template).
fn template_at<'v>(job: &'v mut Value, pointer: &PointerBuf) -> Option<&'v mut Value> {
    if pointer.is_root() {
        Some(job)
    } else {
        job.pointer_mut(pointer.as_str())
    }
}

/// The pod spec at a template pointer, created when missing.
fn pod_spec_mut<'v>(
    job: &'v mut Value,
    pointer: &PointerBuf,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let obj = template_at(job, pointer)?.as_object_mut()?;
    obj.entry("spec")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
}

/// The pod template's metadata map `field` (`labels` or `annotations`) at a template
/// pointer; created when missing if `create`, else `None` then.
fn template_map_mut<'v>(
    job: &'v mut Value,
    pointer: &PointerBuf,
    field: &str,
    create: bool,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let object = template_at(job, pointer)?.as_object_mut()?;
    if !create {
        return object.get_mut("metadata")?.get_mut(field)?.as_object_mut();
    }
    object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()?
        .entry(field)
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
}

/// The patch turning `job` into `desired`, guarded by `test` operations on what it was
/// computed from: the object's uid, and the old value of each field it changes (the
/// nearest enclosing array for a change inside one, since indices shift). `None` when
/// nothing differs.
///
/// Not a resourceVersion precondition: the job's operator writes its status all along
/// (Kubernetes' Job controller several times per Job), and each of those writes would
/// refuse a patch computed a moment before with a conflict although nothing it depends
/// on moved. The API server applies a JSON patch to the object as it stands, retrying
/// its own storage conflicts, and refuses it (422) only if a `test` fails: when a field
/// the patch changes, such as `suspend`, is no longer what the decision saw.
fn diff_with_precondition(job: &Value, desired: &Value) -> Option<Patch> {
    let diff = json_patch::diff(job, desired);
    if diff.0.is_empty() {
        return None;
    }
    let mut guards: Vec<PointerBuf> = Vec::new();
    for op in &diff.0 {
        if let Some(guard) = guard_of(job, op)
            && !guards.iter().any(|g| guard.starts_with(g))
        {
            guards.retain(|g| !g.starts_with(&guard));
            guards.push(guard);
        }
    }
    let mut ops = Vec::with_capacity(diff.0.len() + guards.len() + 1);
    if let Some(uid) = job.pointer("/metadata/uid") {
        ops.push(PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["metadata", "uid"]),
            value: uid.clone(),
        }));
    }
    for path in guards {
        if let Some(value) = job.pointer(path.as_str()) {
            ops.push(PatchOperation::Test(TestOperation {
                path,
                value: value.clone(),
            }));
        }
    }
    ops.extend(diff.0);
    Some(Patch(ops))
}

/// What must be unchanged for `op` (computed against `job`) to do what it meant: the
/// outermost array on its path, else the value it replaces or removes; `None` for a new
/// member of an object (adding it is right whatever else changed).
fn guard_of(job: &Value, op: &PatchOperation) -> Option<PointerBuf> {
    let (path, adds) = match op {
        PatchOperation::Add(a) => (&a.path, true),
        PatchOperation::Replace(r) => (&r.path, false),
        PatchOperation::Remove(r) => (&r.path, false),
        _ => return None,
    };
    let mut at = job;
    let mut prefix = PointerBuf::new();
    for token in path.tokens() {
        if at.is_array() {
            return Some(prefix);
        }
        at = at.get(token.decoded().as_ref())?;
        prefix.push_back(token);
    }
    Some(prefix).filter(|_| !adds)
}

/// The flavors assigned to each pod set of the Workload's admission.
fn assigned_flavors(wl: &Workload) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(adm) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) {
        for psa in &adm.pod_set_assignments {
            let e = out.entry(psa.name.clone()).or_default();
            for f in psa.flavors.values() {
                if !e.contains(f) {
                    e.push(f.clone());
                }
            }
        }
    }
    out
}

/// Start: resume the job and give each admitted pod set its flavors' node labels (as
/// nodeSelector entries) and tolerations. The Workload's pod sets keep the original
/// templates, which is what a later restore puts back.
pub fn start_patch(
    integration: &dyn JobIntegration,
    job: &Value,
    wl: &Workload,
    flavors: &Store<DynamicObject>,
) -> Result<Option<Patch>, JobPatchError> {
    let mut desired = job.clone();
    json_patch::merge(&mut desired, &integration.suspend_patch(false));
    if let Some(carrier) = integration.admission_carrier() {
        carrier.restore(&mut desired);
        carrier.inject(&mut desired, &admission_additions(wl, flavors));
        return Ok(diff_with_precondition(job, &desired));
    }
    // From the template as submitted: a job requeued before its restore landed (or one
    // Kubernetes would not let restore) must not keep the last admission's flavor.
    restore_templates(integration, &mut desired, wl)?;
    let assigned = assigned_flavors(wl);
    for (name, pointer, default) in pod_set_pointers(integration, job)? {
        let Some(psa) = assignment_of(wl, &name) else {
            continue;
        };
        if let Some(default) = &default {
            ensure_template(&mut desired, &pointer, default);
        }
        stamp_template(&mut desired, &pointer, wl, psa);
        let Some(spec) = pod_spec_mut(&mut desired, &pointer) else {
            continue;
        };
        for flavor in assigned.get(&name).into_iter().flatten() {
            let r = ObjectRef::new_with(flavor, Kind::ResourceFlavor.api_resource());
            let Some(rf) = flavors.get(&r) else { continue };
            let Ok(rf) = decode::<ResourceFlavor, _>(Kind::ResourceFlavor, &*rf) else {
                continue;
            };
            add_flavor(spec, &rf);
        }
    }
    Ok(diff_with_precondition(job, &desired))
}

/// What the Workload's admission adds to each admitted pod set's template, alone in an
/// otherwise empty template (Kueue's `PodSetInfo`): the stamps and the flavors' node
/// labels and tolerations, for a kind that carries them outside its templates.
fn admission_additions(wl: &Workload, flavors: &Store<DynamicObject>) -> Vec<(String, Value)> {
    let Some(adm) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return Vec::new();
    };
    let assigned = assigned_flavors(wl);
    let root = PointerBuf::new();
    let mut out = Vec::with_capacity(adm.pod_set_assignments.len());
    for psa in &adm.pod_set_assignments {
        let mut template = Value::Object(Default::default());
        stamp_template(&mut template, &root, wl, psa);
        if let Some(spec) = pod_spec_mut(&mut template, &root) {
            for flavor in assigned.get(&psa.name).into_iter().flatten() {
                let r = ObjectRef::new_with(flavor, Kind::ResourceFlavor.api_resource());
                let Some(rf) = flavors.get(&r) else { continue };
                let Ok(rf) = decode::<ResourceFlavor, _>(Kind::ResourceFlavor, &*rf) else {
                    continue;
                };
                add_flavor(spec, &rf);
            }
            if spec.is_empty()
                && let Some(t) = template.as_object_mut()
            {
                t.remove("spec");
            }
        }
        out.push((psa.name.clone(), template));
    }
    out
}

/// Start of one member of a composed job (a gated pod): the admission gate removed, and
/// its pod set's flavors and Kueue's stamps written into it as [`start_patch`] writes them
/// into a template (Kueue's `prepare`). The topology gate is kept only for a pod set
/// admitted with a topology assignment (the ungater removes it then). `None` when the
/// Workload admitted no pod set of the member's, or nothing changes.
pub fn member_start_patch(
    composed: &dyn ComposedJob,
    member: &Value,
    wl: &Workload,
    flavors: &Store<DynamicObject>,
) -> Option<Patch> {
    let pod_set = composed.pod_set_of(member);
    let psa = assignment_of(wl, &pod_set)?;
    let root = PointerBuf::new();
    let mut desired = member.clone();
    let recorded = composed.start_annotations(member);
    if !recorded.is_empty()
        && let Some(annotations) = template_map_mut(&mut desired, &root, "annotations", true)
    {
        for (k, v) in recorded {
            annotations.entry(k).or_insert(Value::String(v));
        }
    }
    let had = |gate: &str| {
        member
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|gs| gs.iter().any(|g| g["name"] == gate))
    };
    let keep_topology = psa.topology_assignment.is_some() && had(TOPOLOGY_SCHEDULING_GATE);
    stamp_template(&mut desired, &root, wl, psa);
    let assigned = assigned_flavors(wl);
    let spec = pod_spec_mut(&mut desired, &root)?;
    if let Some(gates) = spec
        .get_mut("schedulingGates")
        .and_then(Value::as_array_mut)
    {
        // A pod's gates can only be removed: the topology gate stays only if it was there.
        gates.retain(|g| {
            g["name"] != composed.gate() && (keep_topology || g["name"] != TOPOLOGY_SCHEDULING_GATE)
        });
    }
    for flavor in assigned.get(&pod_set).into_iter().flatten() {
        let r = ObjectRef::new_with(flavor, Kind::ResourceFlavor.api_resource());
        let Some(rf) = flavors.get(&r) else { continue };
        let Ok(rf) = decode::<ResourceFlavor, _>(Kind::ResourceFlavor, &*rf) else {
            continue;
        };
        add_flavor(spec, &rf);
    }
    diff_with_precondition(member, &desired)
}

fn assignment_of<'w>(wl: &'w Workload, pod_set: &str) -> Option<&'w PodSetAssignment> {
    let adm = wl.status.as_ref()?.admission.as_ref()?;
    adm.pod_set_assignments.iter().find(|p| p.name == pod_set)
}

/// Kueue's pod-template stamps for an admitted PodSet (`getPodSetsInfoFromStatus` and
/// `podset.FromAssignment`): the PodSet label and Workload annotation always; for a
/// topology assignment, the topology gate, and the unconstrained annotation when the
/// PodSet asked for no topology (implicit TAS), so its pods read as TAS pods.
fn stamp_template(job: &mut Value, pointer: &PointerBuf, wl: &Workload, psa: &PodSetAssignment) {
    apply_check_updates(job, pointer, wl, &psa.name);
    let wl_name = wl.metadata.name.clone().unwrap_or_default();
    if let Some(labels) = template_map_mut(job, pointer, "labels", true) {
        labels.insert(PODSET_LABEL.into(), Value::String(psa.name.clone()));
        // Kueue's assignQueueLabels (AssignQueueLabelsForPods, on by default).
        if let Some(queue) = &wl.spec.queue_name {
            labels.insert(LOCAL_QUEUE_LABEL.into(), Value::String(queue.clone()));
        }
        let cq = wl.status.as_ref().and_then(|s| s.admission.as_ref());
        if let Some(cq) = cq.map(|a| &a.cluster_queue)
            && dns1123_label_errors(cq).is_empty()
        {
            labels.insert(CLUSTER_QUEUE_LABEL.into(), Value::String(cq.clone()));
        }
    }
    let tas = psa.topology_assignment.is_some();
    let explicit = wl
        .spec
        .pod_sets
        .iter()
        .find(|p| p.name == psa.name)
        .and_then(|p| p.topology_request.as_ref())
        .is_some_and(|r| {
            r.required.is_some() || r.preferred.is_some() || r.unconstrained.is_some()
        });
    if let Some(annotations) = template_map_mut(job, pointer, "annotations", true) {
        annotations.insert(WORKLOAD_ANNOTATION.into(), Value::String(wl_name));
        if tas && !explicit {
            annotations.insert(
                PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION.into(),
                Value::String("true".into()),
            );
        }
    }
    if !tas {
        return;
    }
    if let Some(spec) = pod_spec_mut(job, pointer) {
        let gates = spec
            .entry("schedulingGates")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(gates) = gates.as_array_mut() {
            let gate = serde_json::json!({"name": TOPOLOGY_SCHEDULING_GATE});
            if !gates.contains(&gate) {
                gates.push(gate);
            }
        }
    }
}

/// The pod set updates of the Workload's Ready admission checks for `pod_set` (Kueue's
/// `podset.Merge` of `PodSetUpdates` on start): labels, annotations and nodeSelector
/// entries set, tolerations added. Only what the Workload's copy of the template lacks is
/// ever written, so a restore takes them off with the rest of the admission.
fn apply_check_updates(job: &mut Value, pointer: &PointerBuf, wl: &Workload, pod_set: &str) {
    let updates = crate::controller::checks::pod_set_updates(wl);
    for u in updates.into_iter().filter(|u| u.name == pod_set) {
        for (field, entries) in [("labels", &u.labels), ("annotations", &u.annotations)] {
            if entries.is_empty() {
                continue;
            }
            if let Some(map) = template_map_mut(job, pointer, field, true) {
                for (k, v) in entries {
                    map.insert(k.clone(), Value::String(v.clone()));
                }
            }
        }
        if u.node_selector.is_empty() && u.tolerations.is_empty() {
            continue;
        }
        let Some(spec) = pod_spec_mut(job, pointer) else {
            continue;
        };
        if !u.node_selector.is_empty()
            && let Some(sel) = spec
                .entry("nodeSelector")
                .or_insert_with(|| Value::Object(Default::default()))
                .as_object_mut()
        {
            for (k, v) in &u.node_selector {
                sel.insert(k.clone(), Value::String(v.clone()));
            }
        }
        if let Some(list) = spec
            .entry("tolerations")
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
        {
            for t in &u.tolerations {
                let v = serde_json::to_value(t).unwrap_or(Value::Null);
                if !list.contains(&v) {
                    list.push(v);
                }
            }
        }
    }
}

/// Puts back what [`stamp_template`] added: each stamped label and annotation as the
/// Workload recorded it (or gone), and the topology gate unless it was there before.
fn unstamp_template(
    job: &mut Value,
    pointer: &PointerBuf,
    original: &PodTemplateSpec,
    generated: &[&str],
) {
    // The labels the kind's controller generated stay (Kueue's batch Job restore keeps its
    // `managedLabels`): the Job's selector matches them.
    let kept: Vec<(String, Value)> = template_at(job, pointer)
        .and_then(|t| t.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|l| {
            generated
                .iter()
                .filter_map(|k| Some((k.to_string(), l.get(*k)?.clone())))
                .collect()
        })
        .unwrap_or_default();
    let meta = original.metadata.as_ref();
    // Kueue's `RestorePodSpec`: the labels and annotations as the Workload recorded them,
    // whole, which takes off Kueue's stamps and what admission checks' pod set updates
    // added alike.
    for (field, recorded) in [
        ("labels", meta.and_then(|m| m.labels.as_ref())),
        ("annotations", meta.and_then(|m| m.annotations.as_ref())),
    ] {
        match recorded {
            Some(r) => {
                if let Some(map) = template_map_mut(job, pointer, field, true) {
                    *map = r
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect();
                }
            }
            // A map the stamps created goes with them: the template comes back byte for
            // byte (a custom resource keeps an empty map where a typed Job would drop it).
            None => remove_template_member(job, pointer, &["metadata", field]),
        }
    }
    if !kept.is_empty()
        && let Some(labels) = template_map_mut(job, pointer, "labels", true)
    {
        labels.extend(kept);
    }
    if meta.is_none() {
        let empty = template_at(job, pointer)
            .and_then(|t| t.get("metadata"))
            .and_then(Value::as_object)
            .is_some_and(serde_json::Map::is_empty);
        if empty {
            remove_template_member(job, pointer, &["metadata"]);
        }
    }
    let had_gate = original
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == TOPOLOGY_SCHEDULING_GATE));
    if had_gate {
        return;
    }
    if let Some(spec) = pod_spec_mut(job, pointer) {
        let empty = match spec
            .get_mut("schedulingGates")
            .and_then(Value::as_array_mut)
        {
            Some(gates) => {
                gates.retain(|g| {
                    g.get("name").and_then(Value::as_str) != Some(TOPOLOGY_SCHEDULING_GATE)
                });
                gates.is_empty()
            }
            None => false,
        };
        if empty {
            spec.remove("schedulingGates");
        }
    }
}

/// Removes the member at `path` below the template at `pointer` (nothing if absent).
fn remove_template_member(job: &mut Value, pointer: &PointerBuf, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = template_at(job, pointer);
    for p in parents {
        at = at.and_then(|v| v.get_mut(*p));
    }
    if let Some(obj) = at.and_then(Value::as_object_mut) {
        obj.remove(*last);
    }
}

pub(crate) fn add_flavor(spec: &mut serde_json::Map<String, Value>, rf: &ResourceFlavor) {
    if let Some(labels) = rf.spec.node_labels.as_ref().filter(|l| !l.is_empty()) {
        let sel = spec
            .entry("nodeSelector")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(sel) = sel.as_object_mut() {
            for (k, v) in labels {
                sel.insert(k.clone(), Value::String(v.clone()));
            }
        }
    }
    if let Some(tols) = rf.spec.tolerations.as_ref().filter(|t| !t.is_empty()) {
        let list = spec
            .entry("tolerations")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(list) = list.as_array_mut() {
            for t in tols {
                let v = serde_json::to_value(t).unwrap_or(Value::Null);
                if !list.contains(&v) {
                    list.push(v);
                }
            }
        }
    }
}

/// Stop: suspend the job (its template is restored once the job controller lets it).
pub fn stop_patch(integration: &dyn JobIntegration, job: &Value) -> Option<Patch> {
    suspend_only(integration, job, true)
}

/// Only the job's suspend flag set to `suspend`; `None` when it already is.
fn suspend_only(integration: &dyn JobIntegration, job: &Value, suspend: bool) -> Option<Patch> {
    let mut desired = job.clone();
    json_patch::merge(&mut desired, &integration.suspend_patch(suspend));
    diff_with_precondition(job, &desired)
}

/// Resume: only `suspend: false`, for a job whose outcome is already decided (its
/// Workload finished); the template stays as it is.
pub fn resume_patch(integration: &dyn JobIntegration, job: &Value) -> Option<Patch> {
    suspend_only(integration, job, false)
}

/// Restore: each pod set's nodeSelector and tolerations as the Workload recorded them
/// before admission. `None` when they already match.
pub fn restore_patch(
    integration: &dyn JobIntegration,
    job: &Value,
    wl: &Workload,
) -> Result<Option<Patch>, JobPatchError> {
    let mut desired = job.clone();
    match integration.admission_carrier() {
        Some(carrier) => carrier.restore(&mut desired),
        None => restore_templates(integration, &mut desired, wl)?,
    }
    Ok(diff_with_precondition(job, &desired))
}

/// Puts each pod set's template of `job` back as the Workload recorded it: kuota's stamps
/// removed, nodeSelector and tolerations as submitted.
fn restore_templates(
    integration: &dyn JobIntegration,
    job: &mut Value,
    wl: &Workload,
) -> Result<(), JobPatchError> {
    for (name, pointer, _) in pod_set_pointers(integration, job)? {
        let Some(ps) = wl.spec.pod_sets.iter().find(|p| p.name == name) else {
            continue;
        };
        let generated = integration.generated_template_labels();
        unstamp_template(job, &pointer, &ps.template, generated);
        let Some(spec) = pod_spec_mut(job, &pointer) else {
            continue;
        };
        let original = ps.template.spec.as_ref();
        let selector = original
            .and_then(|s| s.node_selector.clone())
            .filter(|s| !s.is_empty());
        let tolerations: Option<Vec<Toleration>> = original
            .and_then(|s| s.tolerations.clone())
            .filter(|t| !t.is_empty());
        match selector {
            Some(s) => spec.insert(
                "nodeSelector".into(),
                serde_json::to_value(s).unwrap_or(Value::Null),
            ),
            None => spec.remove("nodeSelector"),
        };
        match tolerations {
            Some(t) => spec.insert(
                "tolerations".into(),
                serde_json::to_value(t).unwrap_or(Value::Null),
            ),
            None => spec.remove("tolerations"),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrations::batch_job::BatchJob;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn job() -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": true, "parallelism": 2, "template": {"spec": {
                "nodeSelector": {"team": "a"},
                "containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}
        })
    }

    fn admitted_workload() -> Workload {
        let mut wl = BatchJob.workload(&job()).expect("valid job");
        wl.status = Some(serde_json::from_value(json!({
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "2"}, "count": 2}]}
        })).expect("valid status"));
        wl
    }

    fn flavors() -> Store<DynamicObject> {
        let mut w = Writer::new(Kind::ResourceFlavor.api_resource());
        let rf: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "on-demand"},
            "spec": {"nodeLabels": {"instance-type": "on-demand"},
                     "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}
        }))
        .expect("valid flavor");
        w.apply_watcher_event(&Event::Apply(rf));
        w.as_reader()
    }

    #[test]
    fn start_unsuspends_and_adds_the_flavor_guarded_by_what_it_changes() {
        let patch = start_patch(&BatchJob, &job(), &admitted_workload(), &flavors())
            .expect("computable")
            .expect("something to change");
        assert_eq!(
            serde_json::to_value(&patch).expect("serializable"),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/spec/suspend", "value": true},
                {"op": "replace", "path": "/spec/suspend", "value": false},
                // Kueue stamps every admitted template with its PodSet, Workload and
                // queues.
                {"op": "add", "path": "/spec/template/metadata", "value": {
                    "labels": {"kueue.x-k8s.io/podset": "main",
                        "kueue.x-k8s.io/local-queue-name": "lq",
                        "kueue.x-k8s.io/cluster-queue-name": "cq"},
                    "annotations": {"kueue.x-k8s.io/workload": admitted_workload().metadata.name}}},
                {"op": "add", "path": "/spec/template/spec/nodeSelector/instance-type", "value": "on-demand"},
                {"op": "add", "path": "/spec/template/spec/tolerations",
                 "value": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
            ])
        );
    }

    /// A job requeued before its template was restored (or whose restore Kubernetes
    /// refused) still carries the last admission's flavor: a start to another flavor
    /// replaces it rather than adding to it; a start to the same flavor changes only
    /// `suspend`, which Kubernetes allows even on a Job with finished pods.
    #[test]
    fn a_start_rebuilds_the_template_from_the_workload_not_from_the_last_admission() {
        let mut stale = job();
        json_patch::merge(
            &mut stale,
            &json!({"spec": {"template": {
                "metadata": {"labels": {"kueue.x-k8s.io/podset": "main",
                        "kueue.x-k8s.io/local-queue-name": "lq",
                        "kueue.x-k8s.io/cluster-queue-name": "cq"},
                    "annotations": {"kueue.x-k8s.io/workload": admitted_workload().metadata.name}},
                "spec": {"nodeSelector": {"team": "a", "instance-type": "spot"}}}}}),
        );
        let patch = start_patch(&BatchJob, &stale, &admitted_workload(), &flavors())
            .expect("computable")
            .expect("something to change");
        assert_eq!(
            serde_json::to_value(&patch).expect("serializable"),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/spec/suspend", "value": true},
                {"op": "test", "path": "/spec/template/spec/nodeSelector/instance-type", "value": "spot"},
                {"op": "replace", "path": "/spec/suspend", "value": false},
                {"op": "replace", "path": "/spec/template/spec/nodeSelector/instance-type", "value": "on-demand"},
                {"op": "add", "path": "/spec/template/spec/tolerations",
                 "value": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
            ])
        );

        let mut same = stale.clone();
        json_patch::merge(
            &mut same,
            &json!({"spec": {"template": {"spec": {
                "nodeSelector": {"team": "a", "instance-type": "on-demand"},
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}}}}),
        );
        let patch = start_patch(&BatchJob, &same, &admitted_workload(), &flavors())
            .expect("computable")
            .expect("something to change");
        assert_eq!(
            serde_json::to_value(&patch).expect("serializable"),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/spec/suspend", "value": true},
                {"op": "replace", "path": "/spec/suspend", "value": false},
            ])
        );
    }

    #[test]
    fn stop_suspends_and_restore_puts_back_what_the_workload_recorded() {
        let mut running = job();
        json_patch::merge(
            &mut running,
            &json!({"spec": {"suspend": false, "template": {"spec": {
            "nodeSelector": {"team": "a", "instance-type": "on-demand"},
            "tolerations": [{"key": "spot", "operator": "Exists"}]}}}}),
        );
        let stop = stop_patch(&BatchJob, &running).expect("a change");
        assert_eq!(
            serde_json::to_value(&stop).expect("serializable"),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/spec/suspend", "value": false},
                {"op": "replace", "path": "/spec/suspend", "value": true},
            ])
        );
        let restore = restore_patch(&BatchJob, &running, &admitted_workload())
            .expect("computable")
            .expect("a change");
        assert_eq!(
            serde_json::to_value(&restore).expect("serializable"),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/spec/template/spec/nodeSelector/instance-type", "value": "on-demand"},
                {"op": "test", "path": "/spec/template/spec/tolerations",
                 "value": [{"key": "spot", "operator": "Exists"}]},
                {"op": "remove", "path": "/spec/template/spec/nodeSelector/instance-type"},
                {"op": "remove", "path": "/spec/template/spec/tolerations"},
            ])
        );
        assert!(
            restore_patch(&BatchJob, &job(), &admitted_workload())
                .expect("ok")
                .is_none()
        );
        assert!(stop_patch(&BatchJob, &job()).is_none(), "already suspended");
    }

    #[test]
    fn a_tas_start_gates_and_stamps_the_template_and_restore_takes_it_all_off() {
        let mut wl = admitted_workload();
        wl.spec.pod_sets[0].topology_request = Some(crate::api::PodSetTopologyRequest {
            required: Some("rack".into()),
            ..Default::default()
        });
        let status = wl.status.as_mut().expect("status");
        let psa = &mut status
            .admission
            .as_mut()
            .expect("admission")
            .pod_set_assignments[0];
        psa.topology_assignment = Some(crate::api::tas_encoding::encode(
            vec!["kubernetes.io/hostname".into()],
            &[(vec!["n1".into()], 2)],
        ));
        let patch = start_patch(&BatchJob, &job(), &wl, &flavors())
            .expect("computable")
            .expect("something to change");
        let mut started = job();
        json_patch::patch(&mut started, &patch).expect("applies");
        let template = &started["spec"]["template"];
        assert_eq!(template["metadata"]["labels"][PODSET_LABEL], "main");
        assert_eq!(
            template["metadata"]["annotations"][WORKLOAD_ANNOTATION],
            json!(wl.metadata.name)
        );
        assert!(
            template["metadata"]["annotations"]
                .get(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
                .is_none(),
            "the PodSet asked for a topology itself"
        );
        assert_eq!(
            template["spec"]["schedulingGates"],
            json!([{"name": TOPOLOGY_SCHEDULING_GATE}])
        );
        assert!(
            start_patch(&BatchJob, &started, &wl, &flavors())
                .expect("computable")
                .is_none(),
            "a started job needs no second start"
        );
        // Implicit TAS (no topology asked for): the pods are marked unconstrained.
        wl.spec.pod_sets[0].topology_request = None;
        let implicit = start_patch(&BatchJob, &job(), &wl, &flavors())
            .expect("computable")
            .expect("a change");
        let mut implicit_job = job();
        json_patch::patch(&mut implicit_job, &implicit).expect("applies");
        assert_eq!(
            implicit_job["spec"]["template"]["metadata"]["annotations"]
                [PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION],
            "true"
        );

        let mut stopped = started.clone();
        json_patch::patch(
            &mut stopped,
            &stop_patch(&BatchJob, &started).expect("a change"),
        )
        .expect("applies");
        let restore = restore_patch(&BatchJob, &stopped, &wl)
            .expect("computable")
            .expect("a change");
        json_patch::patch(&mut stopped, &restore).expect("applies");
        let t = &stopped["spec"]["template"];
        assert_eq!(t, &job()["spec"]["template"], "restored byte for byte");
        assert!(t["spec"].get("schedulingGates").is_none(), "{t}");
        assert_eq!(t["spec"]["nodeSelector"], json!({"team": "a"}));
        assert!(
            restore_patch(&BatchJob, &stopped, &wl)
                .expect("ok")
                .is_none()
        );
    }

    /// A Ready check's pod set update goes into the started template with the flavor, a
    /// Pending check's does not, and the restore gives back the submitted job byte for byte.
    #[test]
    fn ready_checks_pod_set_updates_are_applied_on_start_and_restored_on_stop() {
        let mut wl = admitted_workload();
        let status = wl.status.as_mut().expect("status");
        status.admission_checks = serde_json::from_value(json!([
            {"name": "prov", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "",
             "podSetUpdates": [{"name": "main", "labels": {"l": "1"}, "annotations": {"a": "2"},
                "nodeSelector": {"pool": "p1"},
                "tolerations": [{"key": "prov", "operator": "Exists", "effect": "NoSchedule"}]}]},
            {"name": "later", "state": "Pending", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "",
             "podSetUpdates": [{"name": "main", "nodeSelector": {"never": "x"}}]}
        ]))
        .expect("checks");
        let submitted = job();
        let patch = start_patch(&BatchJob, &submitted, &wl, &flavors())
            .expect("computable")
            .expect("a change");
        let mut started = submitted.clone();
        json_patch::patch(&mut started, &patch).expect("applies");
        let template = &started["spec"]["template"];
        assert_eq!(template["metadata"]["labels"]["l"], "1");
        assert_eq!(template["metadata"]["annotations"]["a"], "2");
        assert_eq!(
            template["spec"]["nodeSelector"],
            json!({"team": "a", "instance-type": "on-demand", "pool": "p1"})
        );
        assert_eq!(
            template["spec"]["tolerations"],
            json!([{"key": "prov", "operator": "Exists", "effect": "NoSchedule"},
                   {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}])
        );
        let mut stopped = started.clone();
        json_patch::patch(
            &mut stopped,
            &stop_patch(&BatchJob, &started).expect("a change"),
        )
        .expect("applies");
        let restore = restore_patch(&BatchJob, &stopped, &wl)
            .expect("computable")
            .expect("a change");
        json_patch::patch(&mut stopped, &restore).expect("applies");
        assert_eq!(stopped, submitted);
    }
}
