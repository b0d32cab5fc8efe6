//! maximumExecutionTimeSeconds across admissions. The cases follow Kueue's
//! `TestReconcile` "admitted workload with max execution time" (and "- expired") in
//! pkg/controller/core/workload_controller_test.go, `TestSyncAdmittedCondition`
//! "reservation lost with past admitted time (set)" and "(add)" in
//! pkg/workload/admissionchecks_test.go, and the integration test "should deactivate
//! the workload when the time expires with multiple admissions"
//! (test/integration/singlecluster/controller/core/workload_controller_test.go).

use super::super::tests::{admitted, cq, key, obj, pending_message, preempted, setup, wl};
use super::*;
use crate::api::constants::{MESSAGE_DEACTIVATED_MAX_EXECUTION, REASON_DEACTIVATED_MAX_EXECUTION};
use crate::engine::{Event, PendingReason};

/// A one-pod workload of 1 cpu in queue `a` with a maximum execution time, and an
/// optional status (YAML, indented under `status:`).
fn limited(name: &str, priority: i32, max: i32, status: &str) -> Event {
    Event::WorkloadUpserted(obj(&format!(
        r#"
metadata: {{ name: {name}, namespace: ns }}
spec:
  queueName: a
  priority: {priority}
  maximumExecutionTimeSeconds: {max}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers: [{{ name: c, resources: {{ requests: {{ cpu: "1" }} }} }}]
status:
  {status}
"#
    )))
}

/// The single `Evict` decision in `d`, as (workload, reason, message).
fn evicted(d: &[Decision]) -> Vec<(String, String, String)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Evict {
                workload,
                reason,
                message,
            } => Some((workload.name.to_string(), reason.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

fn deactivated(name: &str) -> Vec<(String, String, String)> {
    vec![(
        name.to_string(),
        REASON_DEACTIVATED_MAX_EXECUTION.to_string(),
        MESSAGE_DEACTIVATED_MAX_EXECUTION.to_string(),
    )]
}

/// Kueue's "admitted workload with max execution time" and "- expired": the engine
/// asks to be woken at the deadline, does nothing before it, and at it deactivates
/// and evicts the workload with Kueue's reason and message; once its pods are gone it
/// waits as Inactive.
#[test]
fn maximum_execution_time_wakes_the_engine_and_deactivates() {
    let mut e = setup(&[cq("a", None, "4", None, "")]);
    e.apply(0, limited("limited", 0, 30, "{}")).unwrap();
    assert_eq!(admitted(&e.schedule(500)), vec!["limited"]);
    assert_eq!(e.next_wakeup(), Some(30_500));
    assert!(e.schedule(30_499).is_empty());
    assert_eq!(evicted(&e.schedule(30_500)), deactivated("limited"));
    assert_eq!(e.next_wakeup(), None);
    e.apply(30_600, Event::WorkloadEvicted(key("limited")))
        .unwrap();
    e.schedule(30_700);
    assert_eq!(pending_message(&e, "limited").0, PendingReason::Inactive);
}

/// A workload preempted after 12.2 s of its 30 s keeps 12 s (whole seconds, as Kueue
/// counts them) and, admitted again, is deactivated 18 s after the new admission.
#[test]
fn a_readmitted_workload_gets_only_its_remaining_time() {
    let mut e = setup(&[cq(
        "a",
        None,
        "1",
        None,
        "withinClusterQueue: LowerPriority",
    )]);
    e.apply(0, limited("limited", 0, 30, "{}")).unwrap();
    assert_eq!(admitted(&e.schedule(500)), vec!["limited"]);
    e.apply(10_000, wl("urgent", "a", "1", 100)).unwrap();
    assert_eq!(preempted(&e.schedule(10_500)), vec!["limited"]);
    e.apply(12_700, Event::WorkloadEvicted(key("limited")))
        .unwrap();
    assert_eq!(admitted(&e.schedule(12_700)), vec!["urgent"]);
    e.apply(20_000, Event::WorkloadFinished(key("urgent")))
        .unwrap();
    assert_eq!(admitted(&e.schedule(20_000)), vec!["limited"]);
    // 30 s less the 12 s it already ran.
    assert_eq!(e.next_wakeup(), Some(38_000));
    assert!(evicted(&e.schedule(37_999)).is_empty());
    assert_eq!(evicted(&e.schedule(38_000)), deactivated("limited"));
}

/// Kueue's `SyncAdmittedCondition` cases "reservation lost with past admitted time
/// (set)" and "(add)": an admission that lasted 1 s adds 1 s to nothing, and to 1 s
/// already accumulated; what the API says before the admission counts.
#[test]
fn each_requeue_adds_the_admission_to_the_accumulated_time() {
    for (past, want) in [(None, 1_000), (Some(1), 2_000)] {
        let mut e = setup(&[cq("a", None, "4", None, "")]);
        let status = past
            .map(|p| format!("accumulatedPastExecutionTimeSeconds: {p}"))
            .unwrap_or("{}".into());
        e.apply(0, limited("w", 0, 60, &status)).unwrap();
        assert_eq!(admitted(&e.schedule(0)), vec!["w"]);
        let id = e.wl_index[&key("w")];
        e.apply(1_999, Event::WorkloadEvicted(key("w"))).unwrap();
        assert_eq!(e.wl(id).spec.past_execution, want, "past {past:?}");
    }
}

/// A workload whose accumulated time already reaches its maximum is deactivated
/// without being admitted (Kueue would admit it and deactivate it in the same
/// breath); one second short of it, it is admitted for that second.
#[test]
fn a_workload_out_of_time_is_deactivated_without_an_admission() {
    let mut e = setup(&[cq("a", None, "4", None, "")]);
    e.apply(
        0,
        limited("spent", 0, 30, "accumulatedPastExecutionTimeSeconds: 30"),
    )
    .unwrap();
    e.apply(
        0,
        limited("nearly", 0, 30, "accumulatedPastExecutionTimeSeconds: 29"),
    )
    .unwrap();
    let d = e.schedule(1_000);
    assert_eq!(admitted(&d), vec!["nearly"]);
    assert_eq!(evicted(&d), deactivated("spent"));
    assert_eq!(pending_message(&e, "spent").0, PendingReason::Inactive);
    assert_eq!(e.next_wakeup(), Some(2_000));
    // Decided once: the next cycle does not deactivate it again.
    assert!(evicted(&e.schedule(1_200)).is_empty());
}

/// After a restart the deadline counts from the `Admitted` condition, less the
/// accumulated time, so the restart neither forgets nor repeats time.
#[test]
fn a_restored_admission_keeps_its_deadline() {
    let mut e = setup(&[cq("a", None, "4", None, "")]);
    let status = r#"accumulatedPastExecutionTimeSeconds: 10
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: "", lastTransitionTime: "1970-01-01T00:00:05Z"}
  - {type: Admitted, status: "True", reason: Admitted, message: "", lastTransitionTime: "1970-01-01T00:00:05Z"}
  admission:
    clusterQueue: a
    podSetAssignments:
    - {name: main, count: 1, flavors: {cpu: default}, resourceUsage: {cpu: "1"}}"#;
    e.apply(8_000, limited("restored", 0, 30, status)).unwrap();
    // 5 s + (30 s - 10 s), not 8 s + 30 s.
    assert_eq!(e.next_wakeup(), Some(25_000));
    assert_eq!(evicted(&e.schedule(25_000)), deactivated("restored"));
}

/// An object written before the requeue the engine already applied does not undo
/// the time it added; the object the requeue wrote replaces the engine's sum, and
/// an edit of an admitted workload's accumulated time moves its deadline.
#[test]
fn the_current_api_object_is_the_truth_and_a_stale_one_is_not() {
    let mut e = setup(&[cq(
        "a",
        None,
        "1",
        None,
        "withinClusterQueue: LowerPriority",
    )]);
    e.apply(0, limited("w", 0, 60, "{}")).unwrap();
    assert_eq!(admitted(&e.schedule(0)), vec!["w"]);
    e.apply(5_000, wl("urgent", "a", "1", 100)).unwrap();
    assert_eq!(preempted(&e.schedule(5_000)), vec!["w"]);
    e.apply(6_000, Event::WorkloadEvicted(key("w"))).unwrap();
    let id = e.wl_index[&key("w")];
    assert_eq!(e.wl(id).spec.past_execution, 6_000);
    let stale = r#"admission:
    clusterQueue: a
    podSetAssignments:
    - {name: main, count: 1, flavors: {cpu: default}, resourceUsage: {cpu: "1"}}"#;
    e.apply(6_100, limited("w", 0, 60, stale)).unwrap();
    assert_eq!(e.wl(id).spec.past_execution, 6_000, "a stale object");
    e.apply(
        6_200,
        limited("w", 0, 60, "accumulatedPastExecutionTimeSeconds: 7"),
    )
    .unwrap();
    assert_eq!(e.wl(id).spec.past_execution, 7_000, "the requeued object");
    e.apply(7_000, Event::WorkloadFinished(key("urgent")))
        .unwrap();
    assert_eq!(admitted(&e.schedule(7_000)), vec!["w"]);
    assert_eq!(e.next_wakeup(), Some(7_000 + 53_000));
    // Someone sets the accumulated time closer to the maximum (as Kueue's
    // integration test does): the deadline moves.
    let current = r#"accumulatedPastExecutionTimeSeconds: 59
  admission:
    clusterQueue: a
    podSetAssignments:
    - {name: main, count: 1, flavors: {cpu: default}, resourceUsage: {cpu: "1"}}"#;
    e.apply(7_500, limited("w", 0, 60, current)).unwrap();
    assert_eq!(e.next_wakeup(), Some(8_000));
    assert_eq!(evicted(&e.schedule(8_000)), deactivated("w"));
}

/// Kueue's truncation: 1.999 s admitted counts 1 s, a clock going back counts 0.
#[test]
fn whole_seconds_truncate_and_never_go_negative() {
    assert_eq!(whole_seconds(0, 1_999), 1_000);
    assert_eq!(whole_seconds(5_000, 4_000), 0);
}
