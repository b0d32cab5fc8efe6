//! waitForPodsReady in the engine. The cases follow Kueue's `TestReconcile` cases
//! "admitted workload with max execution time" neighbours for PodsReady ("should set
//! the Evicted condition with PodsReadyTimeout", "deactivated ... re-queuing limit") in
//! pkg/controller/core/workload_controller_test.go, `TestGeneratePodsReadyCondition` in
//! pkg/controller/jobframework/reconciler_test.go, `TestUpdateRequeueState` in
//! pkg/workload/workload_test.go, and the scheduler's blockAdmission tests.

use super::super::tests::{admitted, cq, key, obj, pending_message, setup_with, wl};
use super::*;
use crate::engine::{EngineConfig, Event, PendingReason};

const TIMEOUT: Millis = 10_000;

fn config(f: impl FnOnce(&mut PodsReadyConfig)) -> EngineConfig {
    let mut c = PodsReadyConfig {
        timeout: TIMEOUT,
        recovery_timeout: Some(5_000),
        block_admission: false,
        backoff_limit_count: None,
        backoff_base: 60_000,
        backoff_max: 3_600_000,
        requeue_by_creation: false,
    };
    f(&mut c);
    EngineConfig {
        pods_ready: Some(c),
        ..EngineConfig::default()
    }
}

fn engine(f: impl FnOnce(&mut PodsReadyConfig)) -> Engine {
    setup_with(config(f), &[cq("a", None, "4", None, "")])
}

/// The evictions in `d`, as (workload, reason, message).
fn evictions(d: &[Decision]) -> Vec<(String, String, String)> {
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

/// The requeue states in `d`, as (workload, count, requeueAt).
fn requeue_states(d: &[Decision]) -> Vec<(String, u32, Option<Millis>)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::RequeueState {
                workload,
                count,
                requeue_at,
            } => Some((workload.name.to_string(), *count, *requeue_at)),
            _ => None,
        })
        .collect()
}

fn ready(e: &mut Engine, now: Millis, name: &str, ready: bool) {
    e.apply(
        now,
        Event::PodsReady {
            workload: key(name),
            ready,
        },
    )
    .unwrap();
}

/// Kueue's `generatePodsReadyCondition`: every (previous condition, admitted, ready).
#[test]
fn readiness_follows_kueues_condition_rules() {
    use Readiness::*;
    let cases = [
        (None, false, true, WaitForStart),
        (Some(Started), false, true, WaitForStart),
        (None, true, false, WaitForStart),
        (None, true, true, Started),
        (Some(WaitForStart), true, true, Started),
        (Some(WaitForStart), true, false, WaitForStart),
        (Some(Started), true, false, WaitForRecovery),
        (Some(Recovered), true, false, WaitForRecovery),
        (Some(WaitForRecovery), true, false, WaitForRecovery),
        (Some(WaitForRecovery), true, true, Recovered),
        (Some(Recovered), true, true, Recovered),
        (Some(Started), true, true, Started),
    ];
    for (prev, admitted, ready, want) in cases {
        assert_eq!(
            Readiness::next(prev, admitted, ready),
            want,
            "{prev:?} admitted={admitted} ready={ready}"
        );
    }
    assert_eq!(
        Readiness::from_condition("False", "PodsReady"),
        WaitForStart,
        "the older reason reads as waiting for the start"
    );
    assert_eq!(Readiness::from_condition("True", "Recovered"), Recovered);
    assert_eq!(WaitForRecovery.reason(), "WaitForRecovery");
    assert_eq!(
        Started.message(),
        "All pods reached readiness and the workload is running"
    );
}

/// Kueue's `UpdateRequeueState` with `wait.Backoff{base, ×2, cap}`: 60 s, 120 s, 240 s,
/// … up to the cap; the first step is the base even above the cap; the jitter stays
/// under 0.01 % and is the same on every run.
#[test]
fn backoff_doubles_from_the_base_up_to_the_cap_with_a_small_fixed_jitter() {
    let c = config(|_| {}).pods_ready.unwrap();
    let k = key("w");
    let whole = |n| backoff(&c, &k, n) / 1000 * 1000;
    let steps: Vec<Millis> = (1..=8).map(whole).collect();
    assert_eq!(
        steps,
        [
            60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000
        ]
    );
    for n in 1..=8 {
        let d = backoff(&c, &k, n);
        assert!(
            d - whole(n) < whole(n) / 10_000 + 1,
            "jitter of step {n}: {d}"
        );
        assert_eq!(d, backoff(&c, &k, n), "deterministic");
    }
    let capped = PodsReadyConfig {
        backoff_base: 100_000,
        backoff_max: 30_000,
        ..c.clone()
    };
    assert_eq!(backoff(&capped, &k, 1) / 1000, 100);
    assert_eq!(backoff(&capped, &k, 2) / 1000, 30);
    let uncapped = PodsReadyConfig {
        backoff_max: 0,
        ..c
    };
    assert_eq!(backoff(&uncapped, &k, 10) / 1000, 60 * 512);
}

/// A gang that never gets ready is evicted at the timeout (counted from its admission)
/// with Kueue's reason and message, its requeue state says count 1 and when the backoff
/// ends; once its pods are gone it waits out the backoff, then is admitted again, and
/// the second timeout doubles the backoff.
#[test]
fn a_gang_never_ready_is_evicted_at_the_timeout_and_requeued_after_the_backoff() {
    let mut e = engine(|_| {});
    e.apply(0, wl("w", "a", "1", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(1_000)), ["w"]);
    assert_eq!(e.readiness(&key("w")), Some(Readiness::WaitForStart));
    assert_eq!(e.next_wakeup(), Some(11_000));
    assert!(evictions(&e.schedule(10_999)).is_empty());
    let d = e.schedule(11_000);
    assert_eq!(
        evictions(&d),
        [(
            "w".to_string(),
            "PodsReadyTimeout".to_string(),
            "Exceeded the PodsReady timeout ns/w".to_string()
        )]
    );
    let first = backoff(&config(|_| {}).pods_ready.unwrap(), &key("w"), 1);
    assert_eq!(
        requeue_states(&d),
        [("w".to_string(), 1, Some(11_000 + first))]
    );
    assert_eq!(e.requeue_state(&key("w")), Some((1, Some(11_000 + first))));
    // Its quota is held until its pods are gone, then it is not queued until requeueAt.
    e.apply(12_000, Event::WorkloadEvicted(key("w"))).unwrap();
    assert!(e.schedule(12_000).is_empty());
    assert_eq!(e.next_wakeup(), Some(11_000 + first));
    let d = e.schedule(11_000 + first);
    assert_eq!(requeue_states(&d), [("w".to_string(), 1, None)]);
    assert_eq!(admitted(&d), ["w"]);
    let second = backoff(&config(|_| {}).pods_ready.unwrap(), &key("w"), 2);
    assert_eq!(second / 1000, 120);
    let t = 11_000 + first + TIMEOUT;
    let d = e.schedule(t);
    assert_eq!(requeue_states(&d), [("w".to_string(), 2, Some(t + second))]);
}

/// A gang whose pods get ready before the timeout is never evicted, and the engine
/// asks for no wake-up on its account.
#[test]
fn a_ready_gang_is_not_evicted() {
    let mut e = engine(|_| {});
    e.apply(0, wl("w", "a", "1", 0)).unwrap();
    e.schedule(0);
    ready(&mut e, 5_000, "w", true);
    assert_eq!(e.readiness(&key("w")), Some(Readiness::Started));
    assert_eq!(e.next_wakeup(), None);
    assert!(evictions(&e.schedule(60_000)).is_empty());
}

/// Kueue's `triggerDeactivation`: with backoffLimitCount 1, the first timeout requeues
/// (count 1), the second deactivates with Kueue's reason and message, and the count is
/// cleared; once its pods are gone it waits as Inactive.
#[test]
fn after_the_backoff_limit_the_workload_is_deactivated() {
    let mut e = engine(|c| {
        c.backoff_limit_count = Some(1);
        c.backoff_base = 1_000;
    });
    e.apply(0, wl("w", "a", "1", 0)).unwrap();
    e.schedule(0);
    let d = e.schedule(TIMEOUT);
    assert_eq!(evictions(&d)[0].1, REASON_PODS_READY_TIMEOUT);
    e.apply(TIMEOUT, Event::WorkloadEvicted(key("w"))).unwrap();
    let again = TIMEOUT + 2_000;
    assert_eq!(admitted(&e.schedule(again)), ["w"]);
    let d = e.schedule(again + TIMEOUT);
    assert_eq!(
        evictions(&d),
        [(
            "w".to_string(),
            REASON_DEACTIVATED_REQUEUING_LIMIT.to_string(),
            MESSAGE_DEACTIVATED_REQUEUING_LIMIT.to_string()
        )]
    );
    assert!(requeue_states(&d).is_empty());
    assert_eq!(e.requeue_state(&key("w")), None);
    e.apply(again + TIMEOUT, Event::WorkloadEvicted(key("w")))
        .unwrap();
    e.schedule(again + TIMEOUT + 1);
    assert_eq!(pending_message(&e, "w").0, PendingReason::Inactive);
}

/// Kueue's `recoveryTimeout`: pods that fail after the gang was ready get this long from
/// the transition; ready again in time, nothing happens; otherwise it is evicted with
/// `PodsReadyTimeout`. Without a recovery timeout it may stay not ready.
#[test]
fn recovery_timeout_counts_from_the_last_transition_to_not_ready() {
    let mut e = engine(|_| {});
    e.apply(0, wl("w", "a", "1", 0)).unwrap();
    e.schedule(0);
    ready(&mut e, 1_000, "w", true);
    ready(&mut e, 20_000, "w", false);
    assert_eq!(e.readiness(&key("w")), Some(Readiness::WaitForRecovery));
    assert_eq!(e.next_wakeup(), Some(25_000));
    ready(&mut e, 24_000, "w", true);
    assert_eq!(e.readiness(&key("w")), Some(Readiness::Recovered));
    assert_eq!(e.next_wakeup(), None);
    ready(&mut e, 30_000, "w", false);
    assert!(evictions(&e.schedule(34_999)).is_empty());
    assert_eq!(
        evictions(&e.schedule(35_000))[0].1,
        REASON_PODS_READY_TIMEOUT
    );

    let mut e = engine(|c| c.recovery_timeout = None);
    e.apply(0, wl("w", "a", "1", 0)).unwrap();
    e.schedule(0);
    ready(&mut e, 1_000, "w", true);
    ready(&mut e, 2_000, "w", false);
    assert_eq!(e.next_wakeup(), None);
    assert!(evictions(&e.schedule(1_000_000)).is_empty());
}

/// Kueue's `blockAdmission`: while an admitted gang is not ready, a workload that fits
/// waits with `WaitingForPodsReady`; once the gang is ready it is admitted, and then it
/// blocks the next one in turn. A gang evicted at the timeout no longer blocks once its
/// quota is back.
#[test]
fn block_admission_admits_one_gang_at_a_time_until_it_is_ready() {
    let mut e = engine(|c| c.block_admission = true);
    e.apply(0, wl("w1", "a", "1", 0)).unwrap();
    e.apply(0, wl("w2", "a", "1", 0)).unwrap();
    e.apply(0, wl("w3", "a", "1", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(0)), ["w1"]);
    assert_eq!(
        pending_message(&e, "w2"),
        (
            PendingReason::WaitingForPodsReady,
            MESSAGE_WAITING_FOR_PODS_READY.to_string()
        )
    );
    assert!(admitted(&e.schedule(1_000)).is_empty());
    ready(&mut e, 2_000, "w1", true);
    assert_eq!(admitted(&e.schedule(2_000)), ["w2"]);
    // w2 never gets ready: evicted at its timeout, it blocks until its pods are gone.
    assert_eq!(
        evictions(&e.schedule(2_000 + TIMEOUT))[0].1,
        REASON_PODS_READY_TIMEOUT
    );
    assert!(admitted(&e.schedule(2_000 + TIMEOUT)).is_empty());
    e.apply(13_000, Event::WorkloadEvicted(key("w2"))).unwrap();
    assert_eq!(admitted(&e.schedule(13_000)), ["w3"]);
}

/// Without blockAdmission, gangs that are not ready do not hold others back.
#[test]
fn without_block_admission_not_ready_gangs_do_not_block() {
    let mut e = engine(|_| {});
    e.apply(0, wl("w1", "a", "1", 0)).unwrap();
    e.apply(0, wl("w2", "a", "1", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(0)), ["w1", "w2"]);
}

/// A restart rebuilds from the Workloads: an admitted one whose `PodsReady` condition
/// says it is waiting for recovery since a time times out from that time, and the
/// count in `status.requeueState` counts against the limit.
#[test]
fn a_restored_workload_keeps_its_readiness_and_requeue_count() {
    let mut e = engine(|c| c.backoff_limit_count = Some(2));
    let restored: api::Workload = obj(r#"
metadata: { name: w, namespace: ns }
spec:
  queueName: a
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers: [{ name: c, resources: { requests: { cpu: "1" } } }]
status:
  admission:
    clusterQueue: a
    podSetAssignments:
    - name: main
      flavors: { cpu: default }
      resourceUsage: { cpu: "1" }
      count: 1
  requeueState: { count: 2 }
  conditions:
  - { type: QuotaReserved, status: "True", reason: QuotaReserved, message: "", lastTransitionTime: "2026-01-01T00:00:00Z" }
  - { type: Admitted, status: "True", reason: Admitted, message: "", lastTransitionTime: "2026-01-01T00:00:00Z" }
  - { type: PodsReady, status: "False", reason: WaitForRecovery, message: "", lastTransitionTime: "2026-01-01T00:01:00Z" }
"#);
    let base: Millis = 1_767_225_600_000;
    e.apply(base + 61_000, Event::WorkloadUpserted(restored))
        .unwrap();
    assert_eq!(e.readiness(&key("w")), Some(Readiness::WaitForRecovery));
    assert_eq!(e.next_wakeup(), Some(base + 60_000 + 5_000));
    let d = e.schedule(base + 65_000);
    assert_eq!(evictions(&d)[0].1, REASON_DEACTIVATED_REQUEUING_LIMIT);
}

/// Under the `Eviction` requeuing timestamp (Kueue's default) a workload requeued after
/// a timeout queues from its eviction: one created later but waiting goes first. Under
/// `Creation` it keeps its place.
#[test]
fn a_timed_out_workload_queues_from_its_eviction_unless_by_creation() {
    for (by_creation, first) in [(false, "later"), (true, "w")] {
        let mut e = setup_with(
            config(|c| {
                c.requeue_by_creation = by_creation;
                c.backoff_base = 0;
            }),
            &[cq("a", None, "1", None, "")],
        );
        e.apply(0, wl("w", "a", "1", 0)).unwrap();
        e.schedule(0);
        e.apply(1_000, wl("later", "a", "1", 0)).unwrap();
        e.schedule(TIMEOUT);
        e.apply(TIMEOUT, Event::WorkloadEvicted(key("w"))).unwrap();
        assert_eq!(admitted(&e.schedule(TIMEOUT + 1)), [first], "{by_creation}");
    }
}
