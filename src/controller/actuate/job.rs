//! Job writes: start (unsuspend with the flavors' node labels and tolerations), stop
//! (suspend), and restore (the pod templates as the Workload recorded them). Each is one
//! JSON patch computed as the difference between the job and its desired form, carrying
//! the job's resourceVersion so that a stale job is refused with a conflict.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch, PatchOperation, ReplaceOperation};
use k8s_openapi::api::core::v1::Toleration;
use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use crate::api::{ResourceFlavor, Workload};
use crate::controller::translate::decode;
use crate::controller::watch::Kind;
use crate::integrations::{JobIntegration, JobObject};

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

/// Name and template pointer of each pod set of the job.
fn pod_set_pointers(
    integration: &dyn JobIntegration,
    job: &Value,
) -> Result<Vec<(String, PointerBuf)>, JobPatchError> {
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
        .map(|ps| (ps.name.to_string(), ps.pointer))
        .collect())
}

/// The pod spec at a template pointer, created when missing.
fn pod_spec_mut<'v>(
    job: &'v mut Value,
    pointer: &PointerBuf,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let template = if pointer.is_root() {
        Some(job)
    } else {
        job.pointer_mut(pointer.as_str())
    }?;
    let obj = template.as_object_mut()?;
    obj.entry("spec")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()
}

/// The patch turning `job` into `desired`, preconditioned on `job`'s resourceVersion.
/// `None` when nothing differs.
fn diff_with_precondition(job: &Value, desired: &Value) -> Option<Patch> {
    let diff = json_patch::diff(job, desired);
    if diff.0.is_empty() {
        return None;
    }
    let mut ops = Vec::with_capacity(diff.0.len() + 1);
    if let Some(rv) = job.pointer("/metadata/resourceVersion") {
        // Setting the resourceVersion it already has is a no-op, unless the job changed
        // meanwhile: then the API server refuses the write with a conflict.
        ops.push(PatchOperation::Replace(ReplaceOperation {
            path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
            value: rv.clone(),
        }));
    }
    ops.extend(diff.0);
    Some(Patch(ops))
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
    let assigned = assigned_flavors(wl);
    for (name, pointer) in pod_set_pointers(integration, job)? {
        let Some(spec) = pod_spec_mut(&mut desired, &pointer) else {
            continue;
        };
        for flavor in assigned.get(&name).into_iter().flatten() {
            let r = ObjectRef::new_with(flavor, Kind::ResourceFlavor.api_resource());
            let Some(rf) = flavors.get(&r) else { continue };
            let Ok(rf) = decode::<ResourceFlavor>(Kind::ResourceFlavor, &rf) else {
                continue;
            };
            add_flavor(spec, &rf);
        }
    }
    Ok(diff_with_precondition(job, &desired))
}

fn add_flavor(spec: &mut serde_json::Map<String, Value>, rf: &ResourceFlavor) {
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
    let mut desired = job.clone();
    json_patch::merge(&mut desired, &integration.suspend_patch(true));
    diff_with_precondition(job, &desired)
}

/// Restore: each pod set's nodeSelector and tolerations as the Workload recorded them
/// before admission. `None` when they already match.
pub fn restore_patch(
    integration: &dyn JobIntegration,
    job: &Value,
    wl: &Workload,
) -> Result<Option<Patch>, JobPatchError> {
    let mut desired = job.clone();
    for (name, pointer) in pod_set_pointers(integration, job)? {
        let Some(ps) = wl.spec.pod_sets.iter().find(|p| p.name == name) else {
            continue;
        };
        let Some(spec) = pod_spec_mut(&mut desired, &pointer) else {
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
    Ok(diff_with_precondition(job, &desired))
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
    fn start_unsuspends_and_adds_the_flavor_with_a_resource_version_precondition() {
        let patch = start_patch(&BatchJob, &job(), &admitted_workload(), &flavors())
            .expect("computable")
            .expect("something to change");
        assert_eq!(
            serde_json::to_value(&patch).expect("serializable"),
            json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "replace", "path": "/spec/suspend", "value": false},
                {"op": "add", "path": "/spec/template/spec/nodeSelector/instance-type", "value": "on-demand"},
                {"op": "add", "path": "/spec/template/spec/tolerations",
                 "value": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
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
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "replace", "path": "/spec/suspend", "value": true},
            ])
        );
        let restore = restore_patch(&BatchJob, &running, &admitted_workload())
            .expect("computable")
            .expect("a change");
        assert_eq!(
            serde_json::to_value(&restore).expect("serializable"),
            json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
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
}
