//! Recovery. A restart does not depend on the order the watches deliver objects in: an
//! admitted Workload seen before its ClusterQueue, LocalQueue or flavor is charged once
//! they arrive, and any permutation of the same restore events leaves the same state and
//! the same next decisions. An admission whose status write failed gives its quota back.

use kuota::engine::{Engine, EngineConfig, Event, WorkloadKey};
use proptest::prelude::*;
use serde_json::{Value, json};

fn flavor(name: &str) -> Event {
    Event::ResourceFlavorUpserted(
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).expect("flavor"),
    )
}

fn cluster_queue(name: &str, cpu: &str) -> Event {
    Event::ClusterQueueUpserted(
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "cohortName": "all",
                "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                ]}]
            }
        }))
        .expect("cluster queue"),
    )
}

fn local_queue(name: &str, cq: &str) -> Event {
    Event::LocalQueueUpserted(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterQueue": cq}
        }))
        .expect("local queue"),
    )
}

/// A one-pod Workload in `queue` asking for `cpu`; admitted to `admitted_to` if given.
fn workload(name: &str, queue: &str, cpu: &str, admitted_to: Option<&str>) -> Event {
    let status: Value = match admitted_to {
        Some(cq) => json!({
            "admission": {"clusterQueue": cq, "podSetAssignments": [{
                "name": "main", "flavors": {"cpu": "default"},
                "resourceUsage": {"cpu": cpu}, "count": 1
            }]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "", "lastTransitionTime": "2026-11-24T00:00:00Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "", "lastTransitionTime": "2026-11-24T00:00:00Z"}
            ]
        }),
        None => json!({}),
    };
    Event::WorkloadUpserted(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns",
                         "creationTimestamp": "2026-11-24T00:00:00Z"},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1,
                "template": {"spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": cpu}}}]}}}]},
            "status": status,
        }))
        .expect("workload"),
    )
}

/// What a restarted controller sees: two ClusterQueues in a cohort, three admitted
/// workloads (one of them borrowing) and two pending ones.
fn restore_events() -> Vec<Event> {
    vec![
        flavor("default"),
        cluster_queue("a", "4"),
        cluster_queue("b", "4"),
        local_queue("qa", "a"),
        local_queue("qb", "b"),
        workload("a1", "qa", "3", Some("a")),
        workload("a2", "qa", "3", Some("a")),
        workload("b1", "qb", "1", Some("b")),
        workload("a3", "qa", "2", None),
        workload("b2", "qb", "1", None),
    ]
}

/// The observable state: per-ClusterQueue reports, every workload's state, and the
/// decisions of the next cycle.
fn outcome(events: Vec<Event>) -> String {
    let mut engine = Engine::new(EngineConfig::default());
    for e in events {
        engine.apply(0, e).expect("valid restore event");
    }
    let reports: Vec<_> = ["a", "b"]
        .iter()
        .map(|cq| engine.cluster_queue_report(cq))
        .collect();
    let states: Vec<_> = ["a1", "a2", "a3", "b1", "b2"]
        .iter()
        .map(|n| engine.workload_state(&WorkloadKey::new("ns", *n)))
        .collect();
    // The same decisions; their order across ClusterQueues follows the order the
    // ClusterQueues were first seen in, which a shell does not rely on.
    let mut decisions: Vec<String> = engine
        .schedule(0)
        .iter()
        .map(|d| format!("{d:?}"))
        .collect();
    decisions.sort();
    format!("{reports:#?}\n{states:#?}\n{decisions:#?}")
}

#[test]
fn an_admitted_workload_seen_before_its_cluster_queue_is_charged_when_it_arrives() {
    let mut engine = Engine::new(EngineConfig::default());
    engine
        .apply(0, workload("a1", "qa", "3", Some("a")))
        .expect("an early Workload is accepted");
    engine.apply(0, flavor("default")).expect("flavor");
    engine.apply(0, cluster_queue("a", "4")).expect("cq");
    engine.apply(0, local_queue("qa", "a")).expect("lq");
    let report = engine.cluster_queue_report("a").expect("report");
    assert_eq!(report.admitted, 1);
    let used: i64 = report.usage.values().map(|u| u.total).sum();
    assert!(used > 0, "the restored admission holds quota: {report:?}");
    assert!(matches!(
        engine.workload_state(&WorkloadKey::new("ns", "a1")),
        Some(kuota::engine::WorkloadState::Admitted { .. })
    ));
    // And it is never admitted a second time.
    let again = engine.schedule(0);
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn a_parked_admission_cleared_before_its_cluster_queue_arrives_is_queued_instead() {
    let mut engine = Engine::new(EngineConfig::default());
    engine
        .apply(0, workload("a1", "qa", "3", Some("a")))
        .expect("early Workload");
    engine
        .apply(0, workload("a1", "qa", "3", None))
        .expect("its admission cleared");
    for e in [
        flavor("default"),
        cluster_queue("a", "4"),
        local_queue("qa", "a"),
    ] {
        engine.apply(0, e).expect("object");
    }
    assert_eq!(
        engine.cluster_queue_report("a").expect("report").admitted,
        0
    );
    let decisions = engine.schedule(0);
    assert!(
        matches!(
            decisions.as_slice(),
            [kuota::engine::Decision::Admit { .. }]
        ),
        "{decisions:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_order_of_the_same_restore_events_gives_the_same_state_and_decisions(
        order in Just((0..restore_events().len()).collect::<Vec<_>>()).prop_shuffle()
    ) {
        let events = restore_events();
        let shuffled: Vec<Event> = order.iter().map(|&i| events[i].clone()).collect();
        prop_assert_eq!(outcome(shuffled), outcome(restore_events()));
    }
}

#[test]
fn a_failed_admission_write_releases_its_quota_for_the_next_cycle() {
    let mut engine = Engine::new(EngineConfig::default());
    for e in [
        flavor("default"),
        cluster_queue("a", "4"),
        local_queue("qa", "a"),
        workload("first", "qa", "3", None),
    ] {
        engine.apply(0, e).expect("object");
    }
    let admitted = engine.schedule(0);
    assert!(
        matches!(admitted.as_slice(), [kuota::engine::Decision::Admit { workload, .. }] if &*workload.name == "first"),
        "{admitted:?}"
    );
    engine
        .apply(0, workload("second", "qa", "3", None))
        .expect("second");
    let waiting = engine.schedule(1);
    assert!(
        waiting
            .iter()
            .all(|d| !matches!(d, kuota::engine::Decision::Admit { .. })),
        "no room while the first holds its quota: {waiting:?}"
    );

    let first = WorkloadKey::new("ns", "first");
    engine
        .apply(2, Event::AdmissionFailed(first.clone()))
        .expect("released");
    assert_eq!(
        engine.cluster_queue_report("a").expect("report").admitted,
        0
    );
    // Releasing twice, or a workload that is not admitted, changes nothing.
    engine
        .apply(2, Event::AdmissionFailed(first.clone()))
        .expect("no-op");
    engine
        .apply(2, Event::AdmissionFailed(WorkloadKey::new("ns", "second")))
        .expect("no-op");
    let next: Vec<String> = engine
        .schedule(3)
        .iter()
        .filter_map(|d| match d {
            kuota::engine::Decision::Admit { workload, .. } => Some(workload.name.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(next.len(), 1, "exactly one of the two fits: {next:?}");
    assert_eq!(
        engine.cluster_queue_report("a").expect("report").admitted,
        1
    );
}

#[test]
fn a_workload_admitted_to_a_deleted_cluster_queue_finishes_without_harm() {
    let mut engine = Engine::new(EngineConfig::default());
    for e in [
        flavor("default"),
        cluster_queue("a", "4"),
        local_queue("qa", "a"),
        workload("a1", "qa", "3", Some("a")),
    ] {
        engine.apply(0, e).expect("object");
    }
    engine
        .apply(1, Event::ClusterQueueDeleted("a".into()))
        .expect("deleted");
    // Its admitted workload still ends, is deleted, or fails to land: never a panic.
    let key = WorkloadKey::new("ns", "a1");
    engine
        .apply(2, Event::AdmissionFailed(key.clone()))
        .expect("released");
    engine
        .apply(3, Event::WorkloadFinished(key.clone()))
        .expect("finished");
    engine
        .apply(4, Event::WorkloadDeleted(key))
        .expect("deleted");
    engine.schedule(5);
}
