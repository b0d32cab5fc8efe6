use super::*;
use crate::sim::{Scenario, SourceFile};

/// One ClusterQueue of 1 cpu; `count` one-cpu jobs of 10 minutes, one a minute.
fn plan(count: u32) -> Plan {
    plan_of(&format!(
        "    - count: {count}\n      creationIntervalMs: 60000\n      workloads:\n      - className: job\n        runtimeMs: 600000\n        priority: 0\n        request: 1"
    ))
}

#[test]
fn exact_runtimes_and_bounds_give_exact_estimates_and_the_naive_one_does_not() {
    let cfg = EtaConfig {
        runtime_sigma: 0.0,
        overstatement: (1.0, 1.0),
        ..EtaConfig::default()
    };
    let r = eta_report(&plan(12), &cfg).expect("runs");
    assert_eq!((r.workloads, r.started), (12, 12));
    // Job k arrives at k + 1 min and starts at 1 + 10k min: all but the first wait >= 5 min.
    assert_eq!(r.waited, 11);
    assert!(r.kuota.samples > 10, "{r:?}");
    assert_eq!(r.kuota.without_estimate, 0);
    assert_eq!((r.kuota.median_abs_ms, r.kuota.p90_abs_ms), (0, 0), "{r:?}");
    assert_eq!(r.kuota.in_range, Some(1.0));
    assert_eq!(r.slurm.p90_abs_ms, 0, "bounds equal runtimes here");
    // The naive estimate ignores what the running job has left.
    assert!(r.naive.median_abs_ms > 0, "{r:?}");
}

#[test]
fn learned_runtimes_beat_overstated_bounds() {
    let cfg = EtaConfig {
        runtime_sigma: 0.5,
        overstatement: (2.0, 4.0),
        ..EtaConfig::default()
    };
    let r = eta_report(&plan(40), &cfg).expect("runs");
    assert!(r.kuota.samples > 100, "{r:?}");
    assert!(
        r.kuota.median_abs_ms * 2 < r.slurm.median_abs_ms,
        "{}",
        render(&r)
    );
    assert!(r.sources.contains_key("learned"), "{:?}", r.sources);
}

/// One ClusterQueue of 1 cpu and the given workload sets (YAML list items).
fn plan_of(sets: &str) -> Plan {
    let generator = format!(
        r#"
cohorts:
- className: c
  count: 1
  queuesSets:
  - className: cq
    count: 1
    nominalQuota: 1
    borrowingLimit: 0
    workloadsSets:
{sets}
"#
    );
    Scenario {
        name: "t".into(),
        manifests: vec![],
        generator: Some(SourceFile::new("generator.yaml", generator)),
    }
    .plan(1)
    .expect("plan")
}

#[test]
fn told_the_actual_runtimes_the_forward_run_is_exact_when_no_arrival_is_unknown() {
    // Everything is submitted at once: the only thing an estimate cannot know is how long
    // each job runs. Told that, the same engine on the same clock makes no error.
    let p = plan_of(
        "    - count: 12\n      creationIntervalMs: 0\n      workloads:\n      - className: job\n        runtimeMs: 600000\n        priority: 0\n        request: 1",
    );
    let r = eta_report(&p, &EtaConfig::default()).expect("runs");
    assert!(r.exact.samples > 10, "{}", render(&r));
    assert_eq!(r.exact.without_estimate, 0);
    assert_eq!(
        (r.exact.median_abs_ms, r.exact.p90_abs_ms),
        (0, 0),
        "{}",
        render(&r)
    );
    assert!(r.kuota.median_abs_ms > 0, "{}", render(&r));
}

#[test]
fn probing_goes_on_after_a_spell_with_nobody_waiting() {
    // Two short jobs, then nothing for three hours, then six that queue behind each other:
    // their waits are probed every 10 minutes, not only when they are submitted.
    let sets = "    - count: 2\n      creationIntervalMs: 60000\n      workloads:\n      - className: early\n        runtimeMs: 600000\n        priority: 0\n        request: 1\n    - count: 6\n      creationIntervalMs: 60000\n      startMs: 10800000\n      workloads:\n      - className: late\n        runtimeMs: 600000\n        priority: 0\n        request: 1";
    let cfg = EtaConfig {
        runtime_sigma: 0.0,
        overstatement: (1.0, 1.0),
        ..EtaConfig::default()
    };
    let r = eta_report(&plan_of(sets), &cfg).expect("runs");
    assert_eq!(r.started, 8);
    // Five late jobs wait 9 to 45 minutes: at least one periodic probe each on top of
    // the submission ones.
    assert!(r.kuota.samples > 10, "{}", render(&r));
}
