use super::*;
use serde_json::json;

const CHECK: &str = "mk";

/// A Workload with quota reserved (unless `reserved` is false), its MultiKueue check in
/// `state`, and conditions `(type, time in seconds)` true.
fn workload(reserved: bool, state: &str, conditions: &[(&str, i64, &str)]) -> Workload {
    let conds: Vec<Value> = conditions
        .iter()
        .map(|(t, at, reason)| {
            json!({"type": t, "status": "True", "reason": reason, "message": format!("{t} msg"),
                "lastTransitionTime": format!("2026-01-01T00:00:{at:02}Z")})
        })
        .collect();
    let mut status = json!({
        "conditions": conds,
        "admissionChecks": [{"name": CHECK, "state": state, "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    });
    if reserved {
        status["admission"] = json!({"clusterQueue": "cq", "podSetAssignments": []});
    }
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
            "template": {"spec": {"containers": [{"name": "c"}]}}}]},
        "status": status,
    }))
    .expect("a Workload")
}

fn group<'a>(
    local: &'a Workload,
    remotes: Vec<(&str, Option<&'a Workload>)>,
    dispatcher: &'a Dispatcher,
    order: &'a [String],
) -> Group<'a> {
    Group {
        local,
        check: CHECK,
        remotes: remotes
            .into_iter()
            .map(|(n, w)| (n.to_string(), w))
            .collect(),
        unavailable: Vec::new(),
        admitting_lost_for: None,
        worker_lost_timeout: Duration::from_secs(900),
        dispatchable: Ok(()),
        dispatcher,
        config_order: order,
        round_age: None,
    }
}

fn order(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_reserved_workload_is_copied_to_every_connected_worker() {
    let local = workload(true, "Pending", &[]);
    let o = order(&["w1", "w2"]);
    let p = plan(&group(
        &local,
        vec![("w1", None), ("w2", None)],
        &Dispatcher::AllAtOnce,
        &o,
    ));
    assert_eq!(p.create, ["w1", "w2"]);
    assert_eq!(p.nominate, Some(o.clone()));
    assert!(p.check.is_none() && p.remove.is_empty());
}

#[test]
fn the_first_worker_to_admit_wins_and_the_other_copies_go() {
    let local = workload(true, "Pending", &[]);
    let early = workload(
        true,
        "Pending",
        &[("QuotaReserved", 3, "r"), ("Admitted", 4, "Admitted")],
    );
    let late = workload(
        true,
        "Pending",
        &[("QuotaReserved", 5, "r"), ("Admitted", 6, "Admitted")],
    );
    let queued = workload(false, "Pending", &[]);
    let o = order(&["w1", "w2", "w3"]);
    let g = group(
        &local,
        vec![
            ("w1", Some(&late)),
            ("w2", Some(&early)),
            ("w3", Some(&queued)),
        ],
        &Dispatcher::AllAtOnce,
        &o,
    );
    let p = plan(&g);
    assert_eq!(p.remove, ["w1", "w3"]);
    assert_eq!(p.sync_job.as_deref(), Some("w2"));
    assert_eq!(p.cluster_name.as_deref(), Some("w2"));
    assert_eq!(
        p.check,
        Some((
            CheckState::Ready,
            "The workload was admitted on \"w2\"".into()
        ))
    );
    assert!(p.create.is_empty());
}

#[test]
fn a_finished_copy_finishes_the_manager_workload_after_the_job_is_mirrored() {
    let local = workload(true, "Ready", &[("Admitted", 1, "Admitted")]);
    let done = workload(
        true,
        "Ready",
        &[("Admitted", 2, "Admitted"), ("Finished", 9, "Succeeded")],
    );
    let o = order(&["w1"]);
    let p = plan(&group(
        &local,
        vec![("w1", Some(&done))],
        &Dispatcher::AllAtOnce,
        &o,
    ));
    assert_eq!(p.sync_job.as_deref(), Some("w1"));
    assert_eq!(p.finish, Some(("Succeeded".into(), "Finished msg".into())));
}

#[test]
fn without_quota_or_once_finished_every_copy_goes() {
    let local = workload(false, "Pending", &[]);
    let copy = workload(false, "Pending", &[]);
    let o = order(&["w1", "w2"]);
    let mut g = group(
        &local,
        vec![("w1", Some(&copy)), ("w2", None)],
        &Dispatcher::AllAtOnce,
        &o,
    );
    g.unavailable = vec!["w3".into()];
    let p = plan(&g);
    assert_eq!(p.remove, ["w1"]);
    assert_eq!(p.requeue, Some(Duration::from_secs(900)));
    let finished = workload(true, "Ready", &[("Finished", 1, "Succeeded")]);
    let p = plan(&group(
        &finished,
        vec![("w1", Some(&copy))],
        &Dispatcher::AllAtOnce,
        &o,
    ));
    assert_eq!(p.remove, ["w1"]);
}

#[test]
fn a_lost_admitting_worker_is_waited_for_then_the_check_retries() {
    let mut local = workload(true, "Ready", &[("Admitted", 1, "Admitted")]);
    local.status.as_mut().unwrap().cluster_name = Some("w1".into());
    let o = order(&["w1", "w2"]);
    let mut g = group(&local, vec![("w2", None)], &Dispatcher::AllAtOnce, &o);
    g.unavailable = vec!["w1".into()];
    g.admitting_lost_for = Some(Duration::from_secs(600));
    let p = plan(&g);
    assert_eq!(p.check, None);
    assert_eq!(p.requeue, Some(Duration::from_secs(300)));
    g.admitting_lost_for = Some(Duration::from_secs(901));
    assert_eq!(
        plan(&g).check,
        Some((
            CheckState::Retry,
            "Admitting remote lost, Previously: \"Ready\"".into()
        ))
    );
    // Reachable, yet its copy is gone.
    g.unavailable.clear();
    g.remotes = vec![("w1".into(), None), ("w2".into(), None)];
    assert_eq!(
        plan(&g).check,
        Some((
            CheckState::Retry,
            "Admitting remote no longer exists, Previously: \"Ready\"".into()
        ))
    );
}

#[test]
fn an_eviction_in_the_worker_resets_the_check_for_readmission() {
    let mut local = workload(true, "Ready", &[("Admitted", 1, "Admitted")]);
    local.status.as_mut().unwrap().cluster_name = Some("w1".into());
    let evicted = workload(true, "Ready", &[("Evicted", 5, "Preempted")]);
    let o = order(&["w1"]);
    let p = plan(&group(
        &local,
        vec![("w1", Some(&evicted))],
        &Dispatcher::AllAtOnce,
        &o,
    ));
    assert_eq!(
        p.check,
        Some((
            CheckState::Retry,
            "Workload evicted on worker cluster: \"w1\", resetting for re-admission. \
             Previously: \"Ready\""
                .into()
        ))
    );
}

#[test]
fn a_copy_whose_spec_drifted_is_removed_and_made_again() {
    let local = workload(true, "Pending", &[]);
    let mut drifted = workload(false, "Pending", &[]);
    drifted.spec.queue_name = Some("other".into());
    let o = order(&["w1"]);
    let p = plan(&group(
        &local,
        vec![("w1", Some(&drifted))],
        &Dispatcher::AllAtOnce,
        &o,
    ));
    assert_eq!(p.remove, ["w1"]);
    assert_eq!(p.create, ["w1"]);
}

#[test]
fn a_job_that_cannot_be_dispatched_is_rejected_with_kueues_message() {
    let local = workload(true, "Pending", &[]);
    let o = order(&["w1"]);
    let mut g = group(&local, vec![("w1", None)], &Dispatcher::AllAtOnce, &o);
    g.dispatchable = Err("No multikueue adapter found".into());
    assert_eq!(
        plan(&g).check,
        Some((
            CheckState::Rejected,
            "No multikueue adapter found, Previously: \"Pending\"".into()
        ))
    );
}

#[test]
fn nomination_waits_for_the_other_checks() {
    let mut local = workload(true, "Pending", &[]);
    local.status.as_mut().unwrap().admission_checks.push(
        serde_json::from_value(json!({"name": "prov", "state": "Pending", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}))
        .unwrap(),
    );
    let o = order(&["w1"]);
    let p = plan(&group(
        &local,
        vec![("w1", None)],
        &Dispatcher::AllAtOnce,
        &o,
    ));
    assert!(p.create.is_empty() && p.nominate.is_none());
}

#[test]
fn the_incremental_dispatcher_adds_workers_in_config_order_each_round() {
    let mut local = workload(true, "Pending", &[]);
    let o = order(&["w5", "w1", "w4", "w2"]);
    let d = Dispatcher::Incremental { step: 2 };
    let remotes = vec![("w1", None), ("w2", None), ("w4", None), ("w5", None)];
    let p = plan(&group(&local, remotes.clone(), &d, &o));
    assert_eq!(p.nominate, Some(order(&["w5", "w1"])));
    assert!(p.new_round);
    assert_eq!(p.create, ["w1", "w5"]);
    local.status.as_mut().unwrap().nominated_cluster_names = order(&["w5", "w1"]);
    let mut g = group(&local, remotes, &d, &o);
    g.round_age = Some(Duration::from_secs(60));
    let p = plan(&g);
    assert_eq!(p.nominate, None);
    assert_eq!(p.requeue, Some(Duration::from_secs(240)));
    g.round_age = Some(Duration::from_secs(301));
    assert_eq!(plan(&g).nominate, Some(order(&["w5", "w1", "w4", "w2"])));
}

#[test]
fn a_workload_evicted_on_the_manager_has_its_running_copy_removed() {
    let mut local = workload(true, "Pending", &[("Evicted", 7, "Preempted")]);
    local.status.as_mut().unwrap().cluster_name = None;
    let running = workload(true, "Ready", &[("Admitted", 3, "Admitted")]);
    let o = order(&["w1", "w2"]);
    let p = plan(&group(
        &local,
        vec![("w1", Some(&running)), ("w2", None)],
        &Dispatcher::AllAtOnce,
        &o,
    ));
    assert_eq!(p.remove, ["w1"]);
    assert!(
        p.sync_job.is_none() && p.check.is_none() && p.create.is_empty(),
        "{p:?}"
    );
}
