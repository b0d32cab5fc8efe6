//! Admission checks in the engine: a ClusterQueue's activity follows its checks, an
//! admission lists the checks it needs and holds its quota meanwhile, Retry gives the
//! quota back and waits out `requeueAfterSeconds`, Rejected deactivates.

use super::tests::{admitted, cq, key, obj, setup, wl};
use super::*;

fn check(name: &str, active: Option<bool>) -> Event {
    let status = match active {
        Some(a) => format!(
            "status: {{conditions: [{{type: Active, status: \"{}\", reason: R, message: m, lastTransitionTime: \"2026-01-01T00:00:00Z\"}}]}}",
            if a { "True" } else { "False" }
        ),
        None => String::new(),
    };
    Event::AdmissionCheckUpserted(obj(&format!(
        "metadata: {{name: {name}}}\nspec: {{controllerName: example.com/{name}}}\n{status}"
    )))
}

fn gated(checks: &str) -> api::ClusterQueue {
    let mut q = cq("a", None, "4", None, "");
    q.spec.admission_checks_strategy = Some(obj(checks));
    q
}

/// The Workload `name` as the API shows it once its quota is reserved with `admission`
/// and its checks are in `states` (name, state, requeueAfterSeconds, lastTransitionTime).
fn reserved(
    name: &str,
    cpu: &str,
    admission: &api::Admission,
    states: &[(&str, &str, Option<i32>, &str)],
) -> Event {
    let Event::WorkloadUpserted(mut w) = wl(name, "a", cpu, 0) else {
        unreachable!()
    };
    let checks: Vec<serde_json::Value> = states
        .iter()
        .map(|(n, s, after, at)| {
            serde_json::json!({"name": n, "state": s, "lastTransitionTime": at,
                "message": format!("{n} says {s}"), "requeueAfterSeconds": after})
        })
        .collect();
    w.status = Some(
        serde_json::from_value(serde_json::json!({
            "admission": admission,
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "admissionChecks": checks,
        }))
        .expect("status"),
    );
    Event::WorkloadUpserted(w)
}

fn admission_of(d: &[Decision], name: &str) -> (api::Admission, Vec<String>) {
    d.iter()
        .find_map(|d| match d {
            Decision::Admit {
                workload,
                admission,
                checks,
            } if &*workload.name == name => Some(((**admission).clone(), checks.clone())),
            _ => None,
        })
        .expect("admitted")
}

#[test]
fn a_cluster_queue_is_inactive_while_a_check_is_missing_or_not_active() {
    let mut e = setup(&[gated(
        "admissionChecks: [{name: prov}, {name: other, onFlavors: [default]}]",
    )]);
    e.apply(0, wl("w", "a", "1", 0)).unwrap();
    assert!(admitted(&e.schedule(1)).is_empty());
    let r = e.cluster_queue_report("a").unwrap();
    assert!(!r.active);
    assert_eq!(r.inactive_condition_reason, Some("AdmissionCheckNotFound"));
    assert_eq!(
        r.inactive_condition_message.as_deref(),
        Some("Can't admit new workloads: references missing AdmissionCheck(s): other,prov.")
    );
    match e.workload_state(&key("w")).unwrap() {
        WorkloadState::Pending { reason, message } => {
            assert_eq!(reason, PendingReason::Inadmissible);
            assert!(
                message.starts_with("ClusterQueue a is inactive"),
                "{message}"
            );
        }
        s => panic!("unexpected {s:?}"),
    }

    e.apply(2, check("prov", None)).unwrap();
    e.apply(2, check("other", Some(false))).unwrap();
    assert!(admitted(&e.schedule(3)).is_empty());
    let r = e.cluster_queue_report("a").unwrap();
    assert_eq!(r.inactive_condition_reason, Some("AdmissionCheckInactive"));
    assert_eq!(
        r.inactive_condition_message.as_deref(),
        Some("Can't admit new workloads: references inactive AdmissionCheck(s): other,prov.")
    );

    e.apply(4, check("prov", Some(true))).unwrap();
    e.apply(4, check("other", Some(true))).unwrap();
    let d = e.schedule(5);
    assert_eq!(admitted(&d), vec!["w"]);
    assert_eq!(admission_of(&d, "w").1, vec!["other", "prov"]);
    assert!(e.cluster_queue_report("a").unwrap().active);

    e.apply(6, Event::AdmissionCheckDeleted("prov".into()))
        .unwrap();
    let r = e.cluster_queue_report("a").unwrap();
    assert_eq!(r.inactive_condition_reason, Some("AdmissionCheckNotFound"));
}

#[test]
fn an_admission_needs_only_the_checks_of_its_flavors_and_holds_its_quota_meanwhile() {
    let mut e = setup(&[gated(
        "admissionChecks: [{name: all}, {name: elsewhere, onFlavors: [other]}]",
    )]);
    e.apply(0, check("all", Some(true))).unwrap();
    e.apply(0, check("elsewhere", Some(true))).unwrap();
    e.apply(0, wl("first", "a", "3", 0)).unwrap();
    let d = e.schedule(1);
    assert_eq!(admission_of(&d, "first").1, vec!["all"]);
    // Its checks are pending: the quota is still its own.
    let (adm, _) = admission_of(&d, "first");
    e.apply(
        2,
        reserved(
            "first",
            "3",
            &adm,
            &[("all", "Pending", None, "2026-01-01T00:00:00Z")],
        ),
    )
    .unwrap();
    e.apply(2, wl("second", "a", "3", 0)).unwrap();
    assert!(admitted(&e.schedule(3)).is_empty());
    let r = e.cluster_queue_report("a").unwrap();
    assert_eq!(r.admitted, 1);
}

#[test]
fn retry_gives_the_quota_back_and_requeues_after_the_delay() {
    let mut e = setup(&[gated("admissionChecks: [{name: prov}]")]);
    e.apply(0, check("prov", Some(true))).unwrap();
    e.apply(0, wl("w", "a", "4", 0)).unwrap();
    let (adm, _) = admission_of(&e.schedule(1), "w");
    // 1_800_000_000_000 ms is 2027-01-15T08:00:00Z; the check retries 30 s after it.
    let now: Millis = 1_800_000_000_000;
    e.apply(
        now,
        reserved(
            "w",
            "4",
            &adm,
            &[("prov", "Retry", Some(30), "2027-01-15T08:00:00Z")],
        ),
    )
    .unwrap();
    let d = e.schedule(now);
    let evict = d.iter().find_map(|d| match d {
        Decision::Evict {
            workload,
            reason,
            message,
        } if &*workload.name == "w" => Some((reason.clone(), message.clone())),
        _ => None,
    });
    assert_eq!(
        evict,
        Some((
            "AdmissionCheck".to_string(),
            "Evicted due to AdmissionCheck in Retry state: \"prov\" (prov says Retry)".to_string()
        ))
    );
    // The job stopped: the quota goes back, and the workload waits out the delay.
    e.apply(now + 1_000, Event::WorkloadEvicted(key("w")))
        .unwrap();
    e.apply(now + 1_000, wl("small", "a", "1", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(now + 1_000)), vec!["small"]);
    assert_eq!(e.next_wakeup(), Some(now + 30_000));
    assert!(admitted(&e.schedule(now + 29_999)).is_empty());
    e.apply(now + 29_999, Event::WorkloadFinished(key("small")))
        .unwrap();
    assert_eq!(admitted(&e.schedule(now + 30_000)), vec!["w"]);
}

#[test]
fn rejected_deactivates_the_workload() {
    let mut e = setup(&[gated("admissionChecks: [{name: prov}, {name: b}]")]);
    e.apply(0, check("prov", Some(true))).unwrap();
    e.apply(0, check("b", Some(true))).unwrap();
    e.apply(0, wl("w", "a", "4", 0)).unwrap();
    let (adm, _) = admission_of(&e.schedule(1), "w");
    e.apply(
        2,
        reserved(
            "w",
            "4",
            &adm,
            &[
                ("prov", "Rejected", None, "2026-01-01T00:00:00Z"),
                ("b", "Ready", None, "2026-01-01T00:00:00Z"),
            ],
        ),
    )
    .unwrap();
    let d = e.schedule(3);
    assert!(
        d.iter().any(|d| matches!(d, Decision::Evict { workload, reason, message }
            if &*workload.name == "w"
                && reason == "DeactivatedDueToAdmissionCheck"
                && message == "The workload is deactivated due to AdmissionCheck in Rejected state: \"prov\" (prov says Rejected)")),
        "{d:?}"
    );
    e.apply(4, Event::WorkloadEvicted(key("w"))).unwrap();
    assert!(admitted(&e.schedule(5)).is_empty());
    match e.workload_state(&key("w")).unwrap() {
        WorkloadState::Pending { reason, .. } => assert_eq!(reason, PendingReason::Inactive),
        s => panic!("unexpected {s:?}"),
    }
}
