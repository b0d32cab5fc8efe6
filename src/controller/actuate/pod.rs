//! Pod writes of the topology ungater, built purely: which gated pods of a TAS-admitted
//! Workload to ungate now and with which node selector (the choice itself is
//! [`crate::placement::ungate`]), and the one JSON patch per pod that gives it that
//! selector and removes the `kueue.x-k8s.io/topology` gate.

use std::collections::BTreeMap;
use std::sync::Arc;

use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation,
};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::api::Workload;
use crate::api::constants::{
    POD_INDEX_OFFSET_ANNOTATION, PODSET_LABEL, PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
    PODSET_REQUIRED_TOPOLOGY_ANNOTATION, PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ADMITTED,
    WORKLOAD_ANNOTATION, WORKLOAD_FINISHED,
};
use crate::placement::ungate::{self, PodView, RankLabels};

/// Whether the Workload is admitted with a topology assignment and not finished
/// (Kueue's `IsAdmittedByTAS`): only then are its pods ungated.
pub fn admitted_by_tas(wl: &Workload) -> bool {
    let Some(status) = wl.status.as_ref() else {
        return false;
    };
    status.is_condition_true(WORKLOAD_ADMITTED)
        && !status.is_condition_true(WORKLOAD_FINISHED)
        && status.admission.as_ref().is_some_and(|a| {
            a.pod_set_assignments
                .iter()
                .any(|p| p.topology_assignment.is_some())
        })
}

/// Whether a pod can be a topology (TAS) pod: it carries the topology gate or a topology
/// request. Job starts stamp a request on every TAS template (an unconstrained one when
/// the user wrote none), so the pods of other Workloads, the bulk of a cluster, are never
/// kept for the ungater.
pub fn topology_pod(pod: &Pod) -> bool {
    const REQUESTS: [&str; 4] = [
        PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
        PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
        PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
        PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    ];
    let requested = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| REQUESTS.iter().any(|k| a.contains_key(*k)));
    requested || gated(pod)
}

/// Keeps only what the ungater reads of a pod: its name, uid, resourceVersion, labels,
/// Workload annotation, gates, node selector and phase.
pub fn slim(pod: &mut Pod) {
    let meta = std::mem::take(&mut pod.metadata);
    let workload = meta
        .annotations
        .and_then(|mut a| a.remove_entry(WORKLOAD_ANNOTATION));
    pod.metadata = ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        labels: meta.labels,
        annotations: workload.map(|(k, v)| BTreeMap::from([(k, v)])),
        ..ObjectMeta::default()
    };
    let spec = pod.spec.take().unwrap_or_default();
    pod.spec = Some(PodSpec {
        scheduling_gates: spec.scheduling_gates,
        node_selector: spec.node_selector,
        ..PodSpec::default()
    });
    let phase = pod.status.take().and_then(|s| s.phase);
    pod.status = phase.map(|phase| PodStatus {
        phase: Some(phase),
        ..PodStatus::default()
    });
}

/// The Workload a pod belongs to (`namespace`, name), from Kueue's annotation.
pub fn workload_of(pod: &Pod) -> Option<(String, String)> {
    let name = pod
        .metadata
        .annotations
        .as_ref()?
        .get(WORKLOAD_ANNOTATION)?;
    Some((pod.metadata.namespace.clone()?, name.clone()))
}

fn gated(pod: &Pod) -> bool {
    gate_index(pod).is_some()
}

fn gate_index(pod: &Pod) -> Option<usize> {
    pod.spec
        .as_ref()?
        .scheduling_gates
        .as_ref()?
        .iter()
        .position(|g| g.name == TOPOLOGY_SCHEDULING_GATE)
}

fn terminated(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// The gated pods of `wl` to ungate now, each with its domain's node selector. `pods` may
/// hold any pods: those of other Workloads, and finished ones (which a replacement will
/// take over, so they hold no room), are skipped.
pub fn ungates(wl: &Workload, pods: &[Arc<Pod>]) -> Vec<(Arc<Pod>, BTreeMap<String, String>)> {
    if !admitted_by_tas(wl) {
        return Vec::new();
    }
    let ns = wl.metadata.namespace.clone().unwrap_or_default();
    let name = wl.metadata.name.clone().unwrap_or_default();
    let Some(admission) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for psa in &admission.pod_set_assignments {
        let Some(ta) = &psa.topology_assignment else {
            continue;
        };
        let Some(domains) = ta
            .slices
            .iter()
            .map(|s| s.domains())
            .collect::<Option<Vec<_>>>()
        else {
            continue; // a malformed assignment: nothing is ungated onto a guess
        };
        let domains: Vec<_> = domains.into_iter().flatten().collect();
        let members: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|p| workload_of(p).is_some_and(|(n, w)| n == ns && w == name))
            .filter(|p| label(p, PODSET_LABEL) == Some(psa.name.as_str()))
            .filter(|p| !terminated(p))
            .collect();
        let views: Vec<PodView> = members.iter().map(|p| view(p)).collect();
        let request = wl
            .spec
            .pod_sets
            .iter()
            .find(|p| p.name == psa.name)
            .and_then(|p| p.topology_request.as_ref());
        let ranks = request.and_then(|r| {
            Some(RankLabels {
                pod_index_label: r.pod_index_label.clone()?,
                sub_group: match (&r.sub_group_index_label, r.sub_group_count) {
                    (Some(l), Some(c)) => Some((l.clone(), c)),
                    (Some(l), None) => Some((l.clone(), 0)),
                    _ => None,
                },
                // Kueue reads it off the first pod, all of a PodSet's pods sharing it; one
                // that is not a number leaves the ranks untrusted (the greedy fill).
                offset: match members
                    .first()
                    .and_then(|p| annotation(p, POD_INDEX_OFFSET_ANNOTATION))
                {
                    None => 0,
                    Some(v) => v.parse().ok()?,
                },
            })
        });
        for (i, selector) in ungate::assign(&ta.levels, &domains, &views, ranks.as_ref()) {
            out.push((members[i].clone(), selector));
        }
    }
    out
}

fn label<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn view(pod: &Pod) -> PodView {
    PodView {
        gated: gated(pod),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        node_selector: pod
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default(),
    }
}

/// One patch: the pod's resourceVersion as a precondition, the gate removed (after a test
/// that it is still the gate at that index) and the domain's labels added to its node
/// selector. `None` when the pod carries no topology gate.
pub fn ungate_patch(pod: &Pod, selector: &BTreeMap<String, String>) -> Option<Patch> {
    let index = gate_index(pod)?;
    let mut ops = Vec::new();
    if let Some(rv) = &pod.metadata.resource_version {
        ops.push(PatchOperation::Replace(ReplaceOperation {
            path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
            value: Value::String(rv.clone()),
        }));
    }
    let gate = index.to_string();
    ops.push(PatchOperation::Test(TestOperation {
        path: PointerBuf::from_tokens(["spec", "schedulingGates", gate.as_str(), "name"]),
        value: Value::String(TOPOLOGY_SCHEDULING_GATE.into()),
    }));
    ops.push(PatchOperation::Remove(RemoveOperation {
        path: PointerBuf::from_tokens(["spec", "schedulingGates", gate.as_str()]),
    }));
    let existing = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref());
    match existing {
        Some(_) => {
            for (k, v) in selector {
                ops.push(PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(["spec", "nodeSelector", k.as_str()]),
                    value: Value::String(v.clone()),
                }));
            }
        }
        None => ops.push(PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["spec", "nodeSelector"]),
            value: serde_json::to_value(selector).unwrap_or(Value::Null),
        })),
    }
    Some(Patch(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload() -> Workload {
        serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-j-1", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": 3,
                "topologyRequest": {"required": "rack",
                    "podIndexLabel": "batch.kubernetes.io/job-completion-index"},
                "template": {"spec": {"containers": []}}}]},
            "status": {
                "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [{
                    "name": "main", "flavors": {"cpu": "tas"}, "count": 3,
                    "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [{
                        "domainCount": 2,
                        "valuesPerLevel": [{"individual": {"prefix": "n", "roots": ["1", "2"]}}],
                        "podCounts": {"individual": [2, 1]}}]}}]}
            }
        }))
        .expect("workload")
    }

    fn pod(name: &str, index: u32, workload: &str, gate: bool) -> Arc<Pod> {
        let gates = if gate {
            json!([{"name": "other"}, {"name": TOPOLOGY_SCHEDULING_GATE}])
        } else {
            json!([])
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "5",
                    "labels": {PODSET_LABEL: "main",
                        "batch.kubernetes.io/job-completion-index": index.to_string()},
                    "annotations": {WORKLOAD_ANNOTATION: workload}},
                "spec": {"containers": [], "schedulingGates": gates}
            }))
            .expect("pod"),
        )
    }

    /// Only topology pods are kept, and only what the ungater reads of them: a slimmed
    /// pod is ungated exactly as the whole one would be.
    #[test]
    fn the_ungater_keeps_topology_pods_only_and_only_what_it_reads() {
        let mut whole: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5",
                "labels": {PODSET_LABEL: "main"},
                "annotations": {WORKLOAD_ANNOTATION: "job-j-1",
                    PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack", "team": "x"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                    "uid": "j-u"}]},
            "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "A"}]}],
                "nodeSelector": {"pool": "tas"},
                "schedulingGates": [{"name": TOPOLOGY_SCHEDULING_GATE}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False"}]}
        }))
        .expect("pod");
        assert!(topology_pod(&whole));
        let selector = BTreeMap::from([("rack".to_string(), "r1".to_string())]);
        let before = ungate_patch(&whole, &selector);
        slim(&mut whole);
        assert_eq!(ungate_patch(&whole, &selector), before);
        assert_eq!(workload_of(&whole), Some(("ns".into(), "job-j-1".into())));
        assert_eq!(
            serde_json::to_value(&whole).expect("json"),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5",
                    "labels": {PODSET_LABEL: "main"},
                    "annotations": {WORKLOAD_ANNOTATION: "job-j-1"}},
                "spec": {"containers": [], "nodeSelector": {"pool": "tas"},
                    "schedulingGates": [{"name": TOPOLOGY_SCHEDULING_GATE}]},
                "status": {"phase": "Pending"}
            })
        );
        let plain = pod("q", 0, "job-k-1", false);
        assert!(!topology_pod(&plain), "no gate and no topology request");
        let mut ungated_tas = (*plain).clone();
        ungated_tas
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(
                PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION.into(),
                "true".into(),
            );
        assert!(topology_pod(&ungated_tas), "ungated, but still a TAS pod");
    }

    fn names(out: &[(Arc<Pod>, BTreeMap<String, String>)]) -> Vec<(String, String)> {
        out.iter()
            .map(|(p, s)| {
                (
                    p.metadata.name.clone().unwrap_or_default(),
                    s["kubernetes.io/hostname"].clone(),
                )
            })
            .collect()
    }

    #[test]
    fn each_gated_pod_of_the_workload_gets_the_domain_of_its_completion_index() {
        let pods = vec![
            pod("p2", 2, "job-j-1", true),
            pod("other", 0, "job-k-9", true),
            pod("p0", 0, "job-j-1", true),
            pod("p1", 1, "job-j-1", true),
        ];
        let out = ungates(&workload(), &pods);
        assert_eq!(
            names(&out),
            [
                ("p2".into(), "n2".into()),
                ("p0".into(), "n1".into()),
                ("p1".into(), "n1".into())
            ]
        );
        let mut unadmitted = workload();
        unadmitted
            .status
            .as_mut()
            .expect("status")
            .conditions
            .clear();
        assert!(ungates(&unadmitted, &pods).is_empty());
    }

    #[test]
    fn the_patch_removes_the_gate_it_tested_and_adds_the_node_selector() {
        let selector: BTreeMap<String, String> =
            [("kubernetes.io/hostname".to_string(), "n1".to_string())].into();
        let patch = ungate_patch(&pod("p0", 0, "job-j-1", true), &selector).expect("gated");
        assert_eq!(
            serde_json::to_value(&patch).expect("json"),
            json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "5"},
                {"op": "test", "path": "/spec/schedulingGates/1/name", "value": TOPOLOGY_SCHEDULING_GATE},
                {"op": "remove", "path": "/spec/schedulingGates/1"},
                {"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": "n1"}},
            ])
        );
        assert!(ungate_patch(&pod("p0", 0, "job-j-1", false), &selector).is_none());
    }
}
