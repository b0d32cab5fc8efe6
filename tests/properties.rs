//! Property tests: random quota trees and workload streams must never break the quota
//! invariants a Kueue user relies on.

#[path = "properties/livelock.rs"]
mod livelock;
#[path = "properties/sim.rs"]
mod sim;
#[path = "properties/strategies.rs"]
mod strategies;

use kuota::engine::{Event, WorkloadState};
use proptest::prelude::*;
use sim::{Sim, run_stream};
use strategies::{CqGen, Op, QuotaGen, Tree, ops, tree};

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Over nested cohorts (with their own quota and fair-sharing weights), one or two
    /// flavors and resources, classical or fair-sharing preemption, with or without
    /// preemption protection, per (flavor, resource): (a) usage <= nominal +
    /// borrowingLimit per CQ, (b) no tree or cohort subtree uses more than it has or
    /// borrows another queue's guaranteed (non-lendable) quota, (c) no double admission,
    /// (e) without new events the system settles, with no workload admitted twice the
    /// same way (no ping-pong).
    #[test]
    fn quota_invariants_hold_under_random_streams((tree, ops) in tree().prop_flat_map(|t| { let n = t.cqs.len(); (Just(t), ops(n)) })) {
        run_stream(tree, ops, true)?;
    }

    /// (d) Admitting a workload and then finishing it (or deleting it if it stayed pending)
    /// leaves every ClusterQueue report as it was; an identical workload submitted again is
    /// then admitted exactly when the first one was (no leaked or lost quota).
    #[test]
    fn admit_then_finish_restores_reports(
        tree in tree().prop_map(|mut t| { t.cqs.iter_mut().for_each(|c| c.preempt = false); t }),
        background in prop::collection::vec((0usize..6, 1i32..=3, 1i64..=3), 0..10),
        probe in (0usize..6, 1i32..=3, 1i64..=4),
    ) {
        let mut sim = Sim::new(tree);
        let n = sim.tree.cqs.len();
        for (cq, pods, cpu) in background {
            sim.submit(cq % n, pods, cpu, 0, 0);
        }
        sim.schedule()?;
        sim.schedule()?;
        for k in sim.keys.clone() {
            if matches!(sim.state(&k), WorkloadState::Pending { .. }) {
                sim.delete(k);
            }
        }
        sim.schedule()?;
        let before = sim.reports();

        let (cq, pods, cpu) = probe;
        let first = sim.submit(cq % n, pods, cpu, 0, 0);
        sim.schedule()?;
        let admitted = matches!(sim.state(&first), WorkloadState::Admitted { .. });
        if admitted {
            sim.engine.apply(sim.now, Event::WorkloadFinished(first.clone())).expect("finish the probe");
        } else {
            sim.delete(first.clone());
        }
        prop_assert_eq!(&sim.reports(), &before, "reports changed after the probe {} left (admitted: {})", first, admitted);

        let second = sim.submit(cq % n, pods, cpu, 0, 0);
        sim.schedule()?;
        let again = matches!(sim.state(&second), WorkloadState::Admitted { .. });
        prop_assert_eq!(again, admitted, "identical workload admitted: first {}, second {}", admitted, again);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Preemption never loops on topology-aware clusters, under classical and fair-sharing
    /// preemption and every placement strategy: time always advances within a bounded
    /// number of cycles, no preemptor preempts the same victim twice while it is still
    /// pending, no gang is preempted more than a bounded number of times per hour of
    /// virtual time, and every gang that fits the cluster finishes.
    #[test]
    fn topology_preemption_never_loops(case in livelock::case()) {
        let cycles = livelock::cycle_bound(&case);
        let out = livelock::run(&case, cycles);
        prop_assert!(
            out.max_cycles_at_an_instant <= cycles,
            "more than {} cycles at one instant without time advancing", cycles
        );
        prop_assert!(out.repeated.is_none(), "{}", out.repeated.unwrap_or_default());
        let per_hour = livelock::preemption_bound(&case);
        prop_assert!(
            out.max_preemptions_per_hour() <= per_hour,
            "a gang was preempted {} times within an hour (bound {})",
            out.max_preemptions_per_hour(), per_hour
        );
    }
}

/// Every case the property above once failed on runs clean.
#[test]
fn topology_cases_that_once_looped_run_clean() {
    for (what, case) in livelock::regressions() {
        let cycles = livelock::cycle_bound(&case);
        let out = livelock::run(&case, cycles);
        assert!(
            out.max_cycles_at_an_instant <= cycles,
            "{what}: time stood still"
        );
        assert!(
            out.repeated.is_none(),
            "{what}: {}",
            out.repeated.unwrap_or_default()
        );
        assert!(
            out.max_preemptions_per_hour() <= livelock::preemption_bound(&case),
            "{what}: too many preemptions"
        );
    }
}

/// Every gpu-gangs seed that once livelocked (docs/placement.md, "Preemption never
/// loops"): a gang preempted for a host that its requeued victim took back in the same
/// instant, 10,000 times. Each must drain with no anomaly and few preemptions.
#[test]
fn gpu_gangs_seeds_that_once_looped_drain() {
    use kuota::placement::Strategy;
    use kuota::sim::{Scenario, SimConfig, simulate};
    let looped = [
        (Strategy::Kuota, 6),
        (Strategy::Kuota, 9),
        (Strategy::Kuota, 22),
        (Strategy::KueueBestFit, 6),
        (Strategy::KueueBestFit, 9),
        (Strategy::FirstFit, 1),
        (Strategy::FirstFit, 9),
    ];
    let scenario = Scenario::builtin("gpu-gangs").expect("built in");
    for (placement, seed) in looped {
        let mut cfg = SimConfig {
            seed,
            ..SimConfig::default()
        };
        cfg.engine.placement = placement;
        let r = simulate(&scenario, cfg).expect("runs");
        assert!(
            r.anomalies.is_empty() && !r.totals.truncated,
            "{placement:?} seed {seed}: {:?}",
            r.anomalies
        );
        assert_eq!(
            r.totals.finished, r.totals.workloads,
            "{placement:?} seed {seed}"
        );
        // 7 to 19 with the fix; the loop made 10,000.
        assert!(
            r.totals.preemptions <= 40,
            "{placement:?} seed {seed}: {} preemptions",
            r.totals.preemptions
        );
    }
}

/// The case the generator found (seed kept in properties.proptest-regressions): under
/// fair sharing, in a cohort with a lending limit, a preemptor reclaims quota by
/// preempting a workload, does not get in, and the victim then preempts a lower-priority
/// workload of its own queue, after which both were admitted again: a workload was
/// preempted and re-admitted with nothing else changing. Fixed by hierarchical
/// fair-sharing preemption (shares compared where the paths part, Cohort weights).
#[test]
fn fair_sharing_preemption_cascade_settles() {
    let q = |nominal, lending| QuotaGen {
        nominal,
        borrowing: None,
        lending,
    };
    let cq = |cohort, quota, preempt, weight| CqGen {
        cohort,
        quotas: vec![quota],
        preempt,
        weight,
    };
    let tree = Tree {
        n_flavors: 1,
        n_resources: 1,
        cohort_parent: vec![None, None],
        cohort_quota: vec![vec![0], vec![0]],
        cohort_weight: vec![Some(3), Some(2)],
        cqs: vec![
            cq(Some(0), q(8, Some(7)), true, None),
            cq(Some(0), q(8, None), true, Some(1)),
            cq(Some(1), q(5, None), true, None),
            cq(Some(0), q(5, None), true, None),
            cq(None, q(0, Some(7)), false, None),
        ],
        fair_sharing: true,
        min_runtime: 0,
    };
    let sub = |cq, pods, cpu, gpu, priority| Op::Submit {
        cq,
        pods,
        cpu,
        gpu,
        priority,
    };
    let ops = vec![
        sub(2, 1, 1, 0, 0),
        sub(2, 1, 3, 0, 0),
        sub(2, 2, 4, 0, 1),
        Op::Schedule,
        sub(0, 3, 2, 0, 1),
        Op::CompleteEvictions,
        Op::Schedule,
        sub(4, 2, 3, 1, 1),
        sub(3, 2, 1, 1, 2),
        Op::Schedule,
        Op::Schedule,
        sub(2, 2, 2, 0, 0),
        sub(0, 2, 1, 0, 0),
        Op::CompleteEvictions,
        sub(3, 3, 3, 0, 2),
        sub(4, 3, 4, 0, 0),
        Op::Finish(11935290769801729645),
        Op::Finish(6136387856279922711),
        sub(1, 2, 1, 0, 1),
        sub(2, 1, 2, 0, 1),
        Op::Finish(15142219025077519484),
        sub(1, 1, 3, 1, 1),
        sub(3, 2, 1, 0, 1),
        Op::Schedule,
        sub(0, 3, 3, 1, 0),
        sub(0, 1, 2, 2, 2),
        sub(1, 1, 2, 0, 1),
        Op::Finish(5850923720617382975),
        Op::CompleteEvictions,
    ];
    if let Err(e) = run_stream(tree, ops, true) {
        panic!("{e}");
    }
}

/// The seed d4d030fc in properties.proptest-regressions. Under fair sharing, cq-1
/// (no preemption) is at 5 of its nominal 6 and its head w7 needs 3 more than the
/// cohort can lend: it finds nothing to preempt and holds that quota for the rest
/// of the cycle (Kueue's reserveCapacityForUnreclaimablePreempt). With the hold
/// counted, cq-1 looked like a borrower, so cq-0's w8, within its nominal quota,
/// "reclaimed" w2 and then w3 from it; each victim came back the next cycle under
/// nominal quota and w8 preempted the other one: w2 and w3 took turns forever.
/// Kueue picks victims before any hold, so a hold never makes its queue a
/// reclamation target; kuota's victim search now runs without the holds.
#[test]
fn fair_sharing_held_quota_is_not_reclaimed() {
    let (q, cq) = (fixed_quota, one_quota);
    let tree = Tree {
        n_flavors: 1,
        n_resources: 1,
        cohort_parent: vec![None, None],
        cohort_quota: vec![vec![1], vec![0]],
        cohort_weight: vec![None, None],
        cqs: vec![
            cq(Some(1), q(6, Some(1), Some(4)), true, None),
            cq(Some(1), q(6, Some(5), Some(5)), false, None),
            cq(Some(0), q(0, Some(1), None), true, Some(1)),
            cq(Some(1), q(2, None, None), false, Some(2)),
        ],
        fair_sharing: true,
        min_runtime: 0,
    };
    let sub = cpu_job;
    let ops = vec![
        sub(3, 1, 2, 1),
        sub(1, 2, 2, 0),
        sub(1, 1, 1, 0),
        sub(0, 1, 2, 0),
        sub(0, 3, 1, 0),
        sub(2, 1, 1, 0),
        sub(1, 1, 3, 0),
        Op::Schedule,
        sub(0, 1, 1, 0),
        Op::Finish(2738855261921566305),
        Op::Schedule,
        Op::Finish(9217564250105761840),
        sub(0, 1, 3, 1),
        sub(0, 3, 1, 1),
        sub(3, 1, 1, 0),
    ];
    if let Err(e) = run_stream(tree, ops, true) {
        panic!("{e}");
    }
}

/// The seed e9d36586 in properties.proptest-regressions. cq-1's w2 preempts w8 of
/// its own queue to fit. In the next cycle w2's reservation was released as soon as
/// w2 was picked as cq-1's head, before the round was ordered, so cq-2's w9, ordered
/// first by fair share, took the quota w8 had freed. w2 no longer fit, w8 came back
/// as cq-1's next head within nominal quota and reclaimed cq-2's w5, w5 preempted
/// w9 in its own queue, and w2 preempted w8 again: a loop of three cycles. A
/// preemptor's reservation now stays charged until its own turn in the round.
#[test]
fn preemptor_keeps_its_reservation_until_its_turn() {
    let (q, cq) = (fixed_quota, one_quota);
    let tree = Tree {
        n_flavors: 1,
        n_resources: 1,
        cohort_parent: vec![None],
        cohort_quota: vec![vec![0]],
        cohort_weight: vec![None],
        cqs: vec![
            cq(None, q(0, None, None), false, None),
            cq(Some(0), q(1, Some(3), None), true, None),
            cq(Some(0), q(5, None, Some(1)), true, Some(3)),
            cq(Some(0), q(7, None, Some(5)), false, None),
        ],
        fair_sharing: true,
        min_runtime: 0,
    };
    let sub = cpu_job;
    let ops = vec![
        sub(1, 1, 3, 2),
        sub(1, 2, 1, 1),
        sub(3, 1, 1, 0),
        sub(3, 1, 3, 0),
        sub(2, 1, 3, 2),
        sub(3, 1, 3, 0),
        sub(2, 1, 4, 0),
        sub(1, 1, 1, 0),
        Op::Schedule,
        sub(2, 3, 1, 0),
    ];
    if let Err(e) = run_stream(tree, ops, true) {
        panic!("{e}");
    }
}

/// What the seed e9d36586 shrinks to once preemptors go first. cq-1's w11 was
/// assigned while cq-3's w7 held 4 cpu for the cycle (it found nothing to preempt),
/// so it needed preemption; by its turn that hold was gone (w7's queue had moved on)
/// and it fit, yet it still preempted on the stale assignment, a victim of cq-2 each
/// cycle, and the victim came back before it: w6 and w12 took turns being evicted.
/// A preemptor that fits by its turn is assigned again instead.
#[test]
fn preemptor_that_fits_by_its_turn_preempts_nobody() {
    let (q, cq) = (fixed_quota, one_quota);
    let tree = Tree {
        n_flavors: 1,
        n_resources: 1,
        cohort_parent: vec![None],
        cohort_quota: vec![vec![2]],
        cohort_weight: vec![None],
        cqs: vec![
            cq(Some(0), q(4, None, None), true, None),
            cq(Some(0), q(3, Some(3), None), true, None),
            cq(Some(0), q(5, None, Some(1)), true, Some(3)),
            cq(Some(0), q(7, None, Some(5)), false, None),
        ],
        fair_sharing: true,
        min_runtime: 0,
    };
    let sub = cpu_job;
    let ops = vec![
        sub(0, 1, 1, 0),
        sub(3, 1, 1, 0),
        sub(2, 1, 1, 0),
        sub(0, 1, 1, 0),
        sub(3, 3, 2, 0),
        Op::Schedule,
        Op::Finish(5925272434940175182),
        sub(2, 1, 1, 0),
        sub(3, 2, 2, 2),
        sub(3, 3, 1, 0),
        Op::Finish(449074188141386568),
        Op::Finish(7514371126506061522),
        sub(2, 2, 3, 0),
        sub(1, 3, 2, 1),
        sub(1, 1, 1, 0),
        Op::Schedule,
        sub(2, 2, 2, 0),
    ];
    if let Err(e) = run_stream(tree, ops, true) {
        panic!("{e}");
    }
}

/// The seed f061fc22 in properties.proptest-regressions. cq-2's w11 (12 cpu, more
/// than its nominal 8) preempts w6 of its own queue. The next cycle it was left for
/// the borrowing pass, while its reservation kept cq-4's w12 (within cq-4's nominal
/// quota) from fitting; w12, unable to reclaim, held that nominal quota for the
/// cycle, w11 no longer fit and w6 came back; w12 was parked, so the cycle after
/// nothing held and w11 preempted w6 again, forever. A preemptor whose victims are
/// gone is now decided in the first pass.
#[test]
fn borrowing_preemptor_is_not_blocked_by_a_hold_it_caused() {
    let q = |nominal, borrowing, lending| QuotaGen {
        nominal,
        borrowing,
        lending,
    };
    let cq = |cohort, quotas, preempt, weight| CqGen {
        cohort,
        quotas,
        preempt,
        weight,
    };
    let tree = Tree {
        n_flavors: 2,
        n_resources: 1,
        cohort_parent: vec![None],
        cohort_quota: vec![vec![0, 0]],
        cohort_weight: vec![None],
        cqs: vec![
            cq(None, vec![q(0, None, None), q(0, None, None)], false, None),
            cq(
                None,
                vec![q(7, None, None), q(5, Some(6), None)],
                true,
                Some(3),
            ),
            cq(
                Some(0),
                vec![q(8, None, None), q(4, Some(4), None)],
                true,
                Some(1),
            ),
            cq(
                Some(0),
                vec![q(4, Some(5), None), q(4, Some(2), None)],
                false,
                Some(3),
            ),
            cq(
                Some(0),
                vec![q(8, Some(3), None), q(5, Some(0), Some(1))],
                false,
                None,
            ),
        ],
        fair_sharing: true,
        min_runtime: 0,
    };
    let sub = cpu_job;
    let ops = vec![
        sub(3, 1, 4, 1),
        sub(1, 1, 1, 0),
        sub(2, 1, 1, 0),
        sub(1, 1, 1, 0),
        sub(1, 1, 1, 0),
        sub(2, 2, 3, 0),
        Op::Schedule,
        Op::Finish(280636352160653049),
        sub(0, 1, 1, 0),
        sub(0, 1, 1, 0),
        sub(0, 1, 1, 0),
        sub(0, 1, 1, 0),
        sub(2, 3, 4, 1),
        Op::Schedule,
        sub(4, 3, 2, 0),
    ];
    if let Err(e) = run_stream(tree, ops, true) {
        panic!("{e}");
    }
}

/// A quota for the named regression tests.
fn fixed_quota(nominal: i64, borrowing: Option<i64>, lending: Option<i64>) -> QuotaGen {
    QuotaGen {
        nominal,
        borrowing,
        lending,
    }
}

/// A ClusterQueue of one flavor and one resource, for the named regression tests.
fn one_quota(cohort: Option<usize>, quota: QuotaGen, preempt: bool, weight: Option<u32>) -> CqGen {
    CqGen {
        cohort,
        quotas: vec![quota],
        preempt,
        weight,
    }
}

/// A cpu-only submission, for the named regression tests.
fn cpu_job(cq: usize, pods: i32, cpu: i64, priority: i32) -> Op {
    Op::Submit {
        cq,
        pods,
        cpu,
        gpu: 0,
        priority,
    }
}

/// Found when the flavor assigner started to run the preemption target search per
/// flavor (Kueue's oracle) under fair sharing. cq-2's w17 (9 cpu) finds no victims in
/// f0 and its own w1 and cq-0's w8 in f1; ranking f0 as "no candidates", as Kueue
/// does, sent it to f1, and the requeued workloads then took turns: cq-0's w8
/// (priority 0) preempted cq-2's w14 (priority 1) by fair share, w14 preempted its
/// own queue's w5, w5 preempted cq-0's w15 by fair share, w15 preempted w8, forever
/// (the same-ClusterQueue-target class of kubernetes-sigs/kueue#14543). Under fair
/// sharing a flavor without victims still ranks as a preempting one, so w17 waits.
#[test]
fn fair_sharing_flavor_without_victims_ranks_as_preemption() {
    let q = fixed_quota;
    let cq = |cohort, f0, f1, preempt| CqGen {
        cohort: Some(cohort),
        quotas: vec![f0, f1],
        preempt,
        weight: None,
    };
    let tree = Tree {
        n_flavors: 2,
        n_resources: 1,
        cohort_parent: vec![None, None, Some(0)],
        cohort_quota: vec![vec![0, 4], vec![0, 0], vec![1, 0]],
        cohort_weight: vec![Some(1), Some(0), None],
        cqs: vec![
            cq(2, q(5, Some(4), None), q(2, Some(4), None), true),
            cq(1, q(8, Some(4), Some(1)), q(5, None, None), false),
            cq(2, q(7, None, Some(3)), q(7, None, Some(4)), true),
        ],
        fair_sharing: true,
        min_runtime: 0,
    };
    let s = cpu_job;
    let ops = vec![
        s(2, 2, 4, 0),
        s(1, 1, 3, 1),
        s(1, 3, 2, 0),
        s(0, 1, 4, 1),
        s(2, 1, 4, 0),
        s(0, 1, 3, 0),
        s(0, 1, 3, 0),
        s(0, 1, 2, 0),
        s(0, 1, 2, 0),
        s(1, 1, 1, 0),
        s(0, 2, 1, 0),
        s(0, 3, 1, 0),
        s(0, 1, 2, 0),
        s(2, 1, 4, 1),
        s(0, 2, 2, 1),
        s(0, 1, 3, 1),
        Op::Schedule,
        s(2, 3, 3, 1),
        s(0, 1, 2, 0),
        s(0, 1, 2, 0),
        s(0, 2, 1, 0),
    ];
    if let Err(e) = run_stream(tree, ops, true) {
        panic!("{e}");
    }
}
