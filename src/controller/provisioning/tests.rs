//! The ProvisioningRequest check's plan, case by case as Kueue's controller tests them.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::plan::{CHECK_INACTIVE, Check, NO_REQUEST_NEEDED, Plan, plan};
use super::request::ProvisioningRequest;
use crate::api::{PodSet, ProvisioningRequestConfigSpec, Workload};

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).expect("time"))
}

/// A Workload of two pod sets (`main` asks for a GPU, `driver` only for cpu), quota
/// reserved, with check `prov` in `state` (and `retry` retries counted).
fn workload(state: &str, retry: Option<i32>, extra_conditions: &[(&str, &str)]) -> Workload {
    let mut conditions = vec![
        json!({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    ];
    for (t, s) in extra_conditions {
        conditions.push(
            json!({"type": t, "status": s, "reason": "Test", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        );
    }
    let mut check = json!({"name": "prov", "state": state, "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"});
    if let Some(n) = retry {
        check["retryCount"] = json!(n);
    }
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-train-abc12", "namespace": "team", "uid": "wl-uid",
            "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600"}},
        "spec": {"queueName": "q", "podSets": [
            {"name": "main", "count": 4, "template": {"spec": {"containers": [{"name": "c",
                "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}}]}}},
            {"name": "driver", "count": 1, "template": {"spec": {"containers": [{"name": "d",
                "resources": {"requests": {"cpu": "1"}}}]}}}
        ]},
        "status": {
            "conditions": conditions,
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"nvidia.com/gpu": "a100", "cpu": "a100"}, "count": 4},
                {"name": "driver", "flavors": {"cpu": "a100"}, "count": 1}
            ]},
            "admissionChecks": [check]
        }
    }))
    .expect("workload")
}

fn config(extra: serde_json::Value) -> ProvisioningRequestConfigSpec {
    let mut v = json!({"provisioningClassName": "queued-provisioning.gke.io",
        "parameters": {"ValidUntilSeconds": "300"}, "managedResources": ["nvidia.com/gpu"],
        "podSetUpdates": {"nodeSelector": [{"key": "cloud.google.com/gke-nodepool",
            "valueFromProvisioningClassDetail": "NodePoolName"}]}});
    if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    serde_json::from_value(v).expect("config")
}

/// Request `attempt` of the workload's check, with `conditions` (type, status, message).
fn request(attempt: i32, conditions: &[(&str, &str, &str)]) -> ProvisioningRequest {
    let conditions: Vec<_> = conditions
        .iter()
        .map(|(t, s, m)| {
            json!({"type": t, "status": s, "reason": "R", "message": m,
            "lastTransitionTime": "2026-01-01T00:00:00Z"})
        })
        .collect();
    let name = format!("job-train-abc12-prov-{attempt}");
    serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "team",
            "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "name": "job-train-abc12", "uid": "wl-uid", "controller": true}]},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io",
            "parameters": {"ValidUntilSeconds": "300", "maxRunDurationSeconds": "600"},
            "podSets": [{"podTemplateRef": {"name": format!("ppt-{name}-main")}, "count": 4}]},
        "status": {"conditions": conditions,
            "provisioningClassDetails": {"NodePoolName": "pool-7"}}
    }))
    .expect("request")
}

fn template_of(ps: &PodSet) -> PodTemplateSpec {
    ps.template.clone()
}

fn run(
    wl: &Workload,
    config: Option<&ProvisioningRequestConfigSpec>,
    owned: &[ProvisioningRequest],
) -> Plan {
    let checks = [Check {
        name: "prov",
        config,
    }];
    plan(wl, &checks, owned, &template_of, &now()).expect("plan")
}

#[test]
fn a_reserved_workload_gets_its_first_request_for_the_managed_pod_sets_only() {
    let c = config(json!({}));
    let p = run(&workload("Pending", None, &[]), Some(&c), &[]);
    assert_eq!((p.states.clone(), p.delete.clone()), (None, vec![]));
    let [new] = p.create.as_slice() else {
        panic!("one request: {p:?}")
    };
    assert_eq!(new.name, "job-train-abc12-prov-1");
    assert_eq!(
        new.spec.provisioning_class_name,
        "queued-provisioning.gke.io"
    );
    // The config's parameters and the Workload's provreq annotations.
    assert_eq!(
        serde_json::to_value(&new.spec.parameters).expect("json"),
        json!({"ValidUntilSeconds": "300", "maxRunDurationSeconds": "600"})
    );
    assert_eq!(
        serde_json::to_value(&new.spec.pod_sets).expect("json"),
        json!([{"podTemplateRef": {"name": "ppt-job-train-abc12-prov-1-main"}, "count": 4}])
    );
    let [(name, template)] = new.templates.as_slice() else {
        panic!("one template")
    };
    assert_eq!(name, "ppt-job-train-abc12-prov-1-main");
    // The GPU limit stands for the missing request, as in the pods.
    let requests =
        serde_json::to_value(&template.spec.as_ref().expect("spec").containers[0].resources)
            .expect("json");
    assert_eq!(
        requests["requests"],
        json!({"cpu": "1", "nvidia.com/gpu": "1"})
    );
}

#[test]
fn provisioned_makes_the_check_ready_with_the_pool_and_the_request_to_consume() {
    let c = config(json!({}));
    let owned = [request(
        1,
        &[
            ("Accepted", "True", ""),
            ("Provisioned", "True", "ready in pool-7"),
        ],
    )];
    let p = run(&workload("Pending", None, &[]), Some(&c), &owned);
    let states = p.states.expect("a state change");
    assert_eq!(states[0].state, "Ready");
    assert_eq!(states[0].message, "ready in pool-7");
    assert_eq!(states[0].last_transition_time, now());
    assert_eq!(
        serde_json::to_value(&states[0].pod_set_updates).expect("json"),
        json!([{"name": "main",
            "annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": "job-train-abc12-prov-1",
                "autoscaling.x-k8s.io/provisioning-class-name": "queued-provisioning.gke.io"},
            "nodeSelector": {"cloud.google.com/gke-nodepool": "pool-7"}}])
    );
    assert_eq!(
        p.events,
        ["Admission check prov updated state from Pending to Ready with message: ready in pool-7"]
    );
    assert!(p.create.is_empty() && p.delete.is_empty());
    // Once Ready, nothing more is written.
    let ready = workload_with_states(states);
    assert_eq!(run(&ready, Some(&c), &owned), Plan::default());
}

fn workload_with_states(states: Vec<crate::api::AdmissionCheckState>) -> Workload {
    let mut wl = workload("Pending", None, &[]);
    wl.status.as_mut().expect("status").admission_checks = states;
    wl
}

#[test]
fn a_failed_request_is_retried_with_backoff_then_rejected_past_the_limit() {
    let c = config(json!({"retryStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 30}}));
    let failed = [request(1, &[("Failed", "True", "no capacity")])];
    let p = run(&workload("Pending", None, &[]), Some(&c), &failed);
    let states = p.states.expect("a state change");
    assert_eq!(
        (
            states[0].state.as_str(),
            states[0].message.as_str(),
            states[0].requeue_after_seconds
        ),
        ("Retry", "Retrying after failure: no capacity", Some(30))
    );
    assert!(
        p.create.is_empty(),
        "no new request while the check is in Retry"
    );
    // The engine evicts: the request goes with the admission.
    let evicted = workload("Pending", Some(1), &[("Evicted", "True")]);
    let p = run(&evicted, Some(&c), &failed);
    assert_eq!(p.delete, ["job-train-abc12-prov-1"]);
    assert!(p.states.is_none() && p.create.is_empty());
    // Reserved again, Pending with one retry counted, the old request gone: attempt 2.
    let again = workload("Pending", Some(1), &[("Evicted", "False")]);
    let p = run(&again, Some(&c), &[]);
    assert_eq!(p.create[0].name, "job-train-abc12-prov-2");
    // Attempt 2 fails too: past the limit of 1, the check is Rejected.
    let p = run(
        &again,
        Some(&c),
        &[request(2, &[("Failed", "True", "still none")])],
    );
    let states = p.states.expect("a state change");
    assert_eq!(
        (states[0].state.as_str(), states[0].message.as_str()),
        ("Rejected", "still none")
    );
}

#[test]
fn a_failed_request_still_listed_after_requeue_is_replaced_by_the_next_attempt() {
    let c = config(json!({}));
    let again = workload("Pending", Some(1), &[]);
    let p = run(
        &again,
        Some(&c),
        &[request(1, &[("Failed", "True", "no capacity")])],
    );
    assert_eq!(p.create[0].name, "job-train-abc12-prov-2");
    // Attempt 1 is older than the retry count: only its message is shown, no new Retry.
    assert_eq!(p.states.expect("message")[0].state, "Pending");
}

#[test]
fn booking_expired_retries_only_before_admission_and_capacity_revoked_rejects() {
    let c = config(json!({}));
    let expired = [request(
        1,
        &[
            ("Provisioned", "True", ""),
            ("BookingExpired", "True", "too late"),
        ],
    )];
    let p = run(&workload("Pending", None, &[]), Some(&c), &expired);
    assert_eq!(p.states.expect("change")[0].state, "Retry");
    let admitted = workload("Ready", None, &[("Admitted", "True")]);
    assert_eq!(run(&admitted, Some(&c), &expired), Plan::default());
    let revoked = [request(
        1,
        &[
            ("Provisioned", "True", ""),
            ("CapacityRevoked", "True", "nodes gone"),
        ],
    )];
    let states = run(&admitted, Some(&c), &revoked).states.expect("change");
    assert_eq!(
        (states[0].state.as_str(), states[0].message.as_str()),
        ("Rejected", "nodes gone")
    );
}

#[test]
fn no_managed_resource_needs_no_request_and_an_unreadable_config_keeps_the_check_pending() {
    let c = config(json!({"managedResources": ["example.com/tpu"]}));
    let p = run(&workload("Pending", None, &[]), Some(&c), &[]);
    let states = p.states.expect("change");
    assert_eq!(
        (states[0].state.as_str(), states[0].message.as_str()),
        ("Ready", NO_REQUEST_NEEDED)
    );
    assert!(p.create.is_empty());
    let p = run(&workload("Pending", None, &[]), None, &[]);
    let states = p.states.expect("change");
    assert_eq!(
        (states[0].state.as_str(), states[0].message.as_str()),
        ("Pending", CHECK_INACTIVE)
    );
    assert!(p.create.is_empty());
}

#[test]
fn a_finished_workload_deletes_its_requests_and_one_without_quota_does_nothing() {
    let c = config(json!({}));
    let owned = [request(1, &[])];
    let p = run(
        &workload("Ready", None, &[("Finished", "True")]),
        Some(&c),
        &owned,
    );
    assert_eq!(p.delete, ["job-train-abc12-prov-1"]);
    let mut pending = workload("Pending", None, &[]);
    pending.status.as_mut().expect("status").conditions.clear();
    assert_eq!(run(&pending, Some(&c), &owned), Plan::default());
}

#[test]
fn a_request_made_under_another_class_is_replaced() {
    let c = config(json!({"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"}));
    let p = run(
        &workload("Pending", None, &[]),
        Some(&c),
        &[request(1, &[])],
    );
    assert_eq!(p.delete, ["job-train-abc12-prov-1"]);
    assert_eq!(
        p.create[0].spec.provisioning_class_name,
        "check-capacity.autoscaling.x-k8s.io"
    );
}

#[test]
fn pod_sets_merge_under_the_configs_policy() {
    let c = config(
        json!({"managedResources": [], "podSetMergePolicy": "IdenticalWorkloadSchedulingRequirements"}),
    );
    let mut wl = workload("Pending", None, &[]);
    // Two cpu-only pod sets that differ only in their image merge into one entry.
    wl.spec.pod_sets[0] = wl.spec.pod_sets[1].clone();
    wl.spec.pod_sets[0].name = "workers".into();
    if let Some(spec) = wl.spec.pod_sets[0].template.spec.as_mut() {
        spec.containers[0].image = Some("other".into());
    }
    wl.status
        .as_mut()
        .expect("status")
        .admission
        .as_mut()
        .expect("admission")
        .pod_set_assignments[0]
        .name = "workers".into();
    let p = run(&wl, Some(&c), &[]);
    assert_eq!(
        serde_json::to_value(&p.create[0].spec.pod_sets).expect("json"),
        json!([{"podTemplateRef": {"name": "ppt-job-train-abc12-prov-1-workers"}, "count": 5}])
    );
    let c = config(json!({"managedResources": [], "podSetMergePolicy": "IdenticalPodTemplates"}));
    assert_eq!(run(&wl, Some(&c), &[]).create[0].spec.pod_sets.len(), 2);
}

#[test]
fn a_request_the_autoscaler_ignores_keeps_the_check_pending_without_a_message() {
    // The cluster autoscaler skips a request whose class it does not serve and sets no
    // condition on it: like Kueue, the check waits, and a stale message is cleared.
    let c = config(json!({"provisioningClassName": "no-such-class.example.com"}));
    let mut ignored = request(1, &[]);
    ignored.spec.provisioning_class_name = "no-such-class.example.com".into();
    let mut wl = workload("Pending", None, &[]);
    wl.status.as_mut().expect("status").admission_checks[0].message =
        "Retrying after failure: old".into();
    let p = run(&wl, Some(&c), std::slice::from_ref(&ignored));
    assert_eq!((p.create.len(), p.delete.clone()), (0, vec![]));
    let states = p.states.expect("the stale message is cleared");
    assert_eq!(
        (states[0].state.as_str(), states[0].message.as_str()),
        ("Pending", "")
    );
    assert!(p.events.is_empty(), "no state change: {:?}", p.events);
    // Nothing more is written while the autoscaler stays silent.
    let mut settled = workload("Pending", None, &[]);
    settled.status.as_mut().expect("status").admission_checks = states;
    assert_eq!(run(&settled, Some(&c), &[ignored]), Plan::default());
}
