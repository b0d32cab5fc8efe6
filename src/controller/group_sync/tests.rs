//! The writes of composed jobs, as exact JSON patches, and the plan they follow.

use super::*;
use crate::api::constants::{ADMISSION_SCHEDULING_GATE, MANAGED_POD_FINALIZER};
use crate::integrations::pod::Pod;
use crate::integrations::pod_group::{ROLE_HASH_ANNOTATION, members_status, role_of};
use kube::runtime::reflector::store::Writer as StoreWriter;
use kube::runtime::watcher::Event as WatchEvent;
use serde_json::json;

fn flavors() -> Store<DynamicObject> {
    let mut w = StoreWriter::new(Kind::ResourceFlavor.api_resource());
    let rf: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
        "spec": {"nodeLabels": {"pool": "a100"},
            "tolerations": [{"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}]}
    }))
    .expect("valid flavor");
    w.apply_watcher_event(&WatchEvent::Apply(rf));
    w.as_reader()
}

fn member(name: &str, group: bool) -> Value {
    let mut labels = json!({"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/managed": "true"});
    let mut annotations = json!({});
    if group {
        labels["kueue.x-k8s.io/pod-group-name"] = json!("g");
        annotations["kueue.x-k8s.io/pod-group-total-count"] = json!("2");
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"),
            "resourceVersion": "7", "labels": labels, "annotations": annotations,
            "finalizers": ["example.com/keep", MANAGED_POD_FINALIZER]},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
            "schedulingGates": [{"name": ADMISSION_SCHEDULING_GATE}]}
    })
}

fn admitted(pod_set: &str, count: i32) -> Workload {
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"name": pod_set, "count": count,
            "template": {"spec": {"containers": []}}}]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": pod_set, "flavors": {"cpu": "gpu"}, "resourceUsage": {"cpu": "1"}, "count": count}]},
            "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .expect("a workload")
}

#[test]
fn a_group_member_starts_ungated_with_its_flavor_and_its_role_recorded() {
    let m = member("a", true);
    let role = role_of(&m);
    let patch = member_start_patch(&Pod, &m, &admitted(&role, 2), &flavors()).expect("a patch");
    assert_eq!(
        serde_json::to_value(&patch).expect("json"),
        json!([
            {"op": "test", "path": "/metadata/uid", "value": "u-a"},
            {"op": "test", "path": "/spec/schedulingGates",
             "value": [{"name": ADMISSION_SCHEDULING_GATE}]},
            {"op": "add", "path": "/metadata/annotations/kueue.x-k8s.io~1role-hash", "value": role},
            {"op": "add", "path": "/metadata/annotations/kueue.x-k8s.io~1workload", "value": "g"},
            {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1cluster-queue-name", "value": "cq"},
            {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1local-queue-name", "value": "lq"},
            {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1podset", "value": role},
            {"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "a100"}},
            {"op": "remove", "path": "/spec/schedulingGates/0"},
            {"op": "add", "path": "/spec/tolerations", "value": [
                {"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}]},
        ])
    );
    // A pod set the Workload did not admit gets nothing.
    assert!(member_start_patch(&Pod, &m, &admitted("other", 2), &flavors()).is_none());
}

#[test]
fn a_pod_alone_runs_in_main_and_records_no_role() {
    let m = member("solo", false);
    let patch = member_start_patch(&Pod, &m, &admitted("main", 1), &flavors()).expect("a patch");
    let ops = serde_json::to_value(&patch).expect("json");
    assert!(
        !ops.to_string().contains(ROLE_HASH_ANNOTATION),
        "no role for a pod alone: {ops}"
    );
    assert!(ops.to_string().contains("/spec/schedulingGates/0"));
}

#[test]
fn finalizer_removal_tests_the_entry_it_removes() {
    let m = member("a", true);
    assert_eq!(
        serde_json::to_value(finalizer_removal(&m, MANAGED_POD_FINALIZER)).expect("json"),
        json!([
            {"op": "test", "path": "/metadata/finalizers/1", "value": MANAGED_POD_FINALIZER},
            {"op": "remove", "path": "/metadata/finalizers/1"},
        ])
    );
    let mut done = m.clone();
    done["metadata"]["finalizers"] = json!(["example.com/keep"]);
    assert!(finalizer_removal(&done, MANAGED_POD_FINALIZER).is_none());
}

#[test]
fn the_plan_starts_gated_members_stops_free_ones_and_requeues_once_none_runs() {
    let mut a = member("a", true);
    let b = member("b", true);
    let role = role_of(&a);
    let wl = admitted(&role, 2);
    // Admitted, all gated: start.
    let s = job_state(&members_status(&[&a, &b]), Some(&wl), false);
    assert_eq!(plan(&s, Some(&wl)), Step::Start);
    // One ungated, one still gated: start again (the rest).
    a["spec"]["schedulingGates"] = json!([]);
    let s = job_state(&members_status(&[&a, &b]), Some(&wl), false);
    assert_eq!(plan(&s, Some(&wl)), Step::Start);
    // Evicted while one may run: stop (delete it).
    let mut evicted = wl.clone();
    let conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> = serde_json::from_value(json!([
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]))
    .expect("conditions");
    if let Some(st) = evicted.status.as_mut() {
        st.conditions = conditions;
    }
    let s = job_state(&members_status(&[&a, &b]), Some(&evicted), false);
    assert_eq!(plan(&s, Some(&evicted)), Step::Stop);
    // Being deleted but still Running: the quota stays.
    a["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    a["status"] = json!({"phase": "Running"});
    let s = job_state(&members_status(&[&a, &b]), Some(&evicted), false);
    assert_eq!(plan(&s, Some(&evicted)), Step::Nothing);
    // Nothing runs any more: requeue (the quota goes back).
    a["status"] = json!({"phase": "Failed"});
    let s = job_state(&members_status(&[&a, &b]), Some(&evicted), false);
    assert_eq!(plan(&s, Some(&evicted)), Step::Requeue);
    // No Workload yet: compose one.
    let s = job_state(&members_status(&[&b]), None, false);
    assert_eq!(plan(&s, None), Step::CreateWorkload);
}
