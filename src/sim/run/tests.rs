use super::*;
use crate::sim::generator::RUNNING_TIME_LABEL;
use crate::sim::{Scenario, SourceFile, simulate};

fn generator_only(yaml: &str) -> Scenario {
    Scenario {
        name: "t".into(),
        manifests: vec![],
        generator: Some(SourceFile::new("generator.yaml", yaml)),
    }
}

/// One cohort with one ClusterQueue of 1 cpu, and `workloads_sets` (its
/// `workloadsSets` entries, indented as they stand under it).
fn one_cpu_queue(workloads_sets: &str) -> Scenario {
    generator_only(&format!("{ONE_CPU_QUEUE}{workloads_sets}"))
}

const ONE_CPU_QUEUE: &str = "
cohorts:
- className: c
  count: 1
  queuesSets:
  - className: q
    count: 1
    nominalQuota: 1
    workloadsSets:
";

/// One cpu; a low-priority job starts, a high-priority one preempts it.
const PREEMPT: &str = include_str!("../../../tests/fixtures/preempt-generator.yaml");

fn class<'r>(r: &'r Report, name: &str) -> &'r crate::sim::report::ClassStats {
    r.classes
        .iter()
        .find(|c| c.class == name)
        .expect("class present")
}

#[test]
fn preempted_workload_requeues_and_runs_its_full_runtime() {
    let cfg = SimConfig {
        eviction_delay_ms: 50,
        ..SimConfig::default()
    };
    let r = simulate(&generator_only(PREEMPT), cfg).expect("runs");
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.totals.preemptions, 1);
    assert_eq!(r.totals.admissions, 3);
    assert_eq!(r.totals.finished, 2);
    // low: 100 admitted, 200 preempted, 250 stopped; high: 250..750; low again: 750..1750.
    assert_eq!(r.totals.makespan_ms, 1750);
    assert_eq!(class(&r, "high").time_to_admission.max_ms, 50);
    assert_eq!(class(&r, "low").time_to_admission.max_ms, 650);
    assert_eq!(class(&r, "low").preempted, 1);
    let cq = &r.cluster_queues[0];
    assert_eq!((cq.preempted, cq.preemptions_issued), (1, 1));
    // Busy from 100 to 1750 except nothing idles: 1650 of 1750 ms at 1 cpu.
    let u = cq.resources["cpu"].utilization.expect("has nominal");
    assert!((u - 1650.0 / 1750.0).abs() < 1e-9, "{u}");
}

#[test]
fn a_preemptor_kept_waiting_by_protection_is_admitted_when_it_ends() {
    let cfg = SimConfig {
        engine: EngineConfig {
            preemption_min_runtime: 500,
            ..EngineConfig::default()
        },
        ..SimConfig::default()
    };
    let r = simulate(&generator_only(PREEMPT), cfg).expect("runs");
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    // low runs from 100 and is protected until 600. No event happens between 200
    // (high arrives) and 1100 (low would finish): the simulator must run the cycle
    // the engine asks for at 600, where high preempts low.
    assert_eq!(r.totals.preemptions, 1);
    assert_eq!(class(&r, "high").time_to_admission.max_ms, 400);
    // high 600..1100, low again 1100..2100.
    assert_eq!(r.totals.makespan_ms, 2100);
}

/// maximumExecutionTimeSeconds under virtual time: a workload allowed 10 s with
/// 4 s already accumulated runs 6 s of its 60 s and is deactivated (the simulator
/// wakes for it, as nothing else happens); one with its 10 s spent never runs.
#[test]
fn maximum_execution_time_counts_the_accumulated_time_in_virtual_time() {
    let workload = |name: &str, past: i32| {
        format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: {name}\n  \
             namespace: ns\n  labels: {{{RUNNING_TIME_LABEL}: \"60000\"}}\nspec:\n  queueName: lq\n  \
             maximumExecutionTimeSeconds: 10\n  podSets: [{{name: main, count: 1, template: {{spec: \
             {{containers: [{{name: c, resources: {{requests: {{cpu: \"1\"}}}}}}]}}}}}}]\nstatus:\n  \
             accumulatedPastExecutionTimeSeconds: {past}\n---\n"
        )
    };
    let manifests = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: default}}\n---\n\
         apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: cq}}\nspec:\n  \
         namespaceSelector: {{}}\n  resourceGroups: [{{coveredResources: [cpu], flavors: [{{name: \
         default, resources: [{{name: cpu, nominalQuota: 2}}]}}]}}]\n---\n\
         apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: lq, namespace: ns}}\n\
         spec: {{clusterQueue: cq}}\n---\n{}{}",
        workload("limited", 4),
        workload("spent", 10)
    );
    let s = Scenario {
        name: "t".into(),
        manifests: vec![SourceFile::new("objects.yaml", &manifests)],
        generator: None,
    };
    let r = simulate(&s, SimConfig::default()).expect("runs");
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(
        (r.totals.admissions, r.totals.evictions, r.totals.finished),
        (1, 1, 0)
    );
    // 6 s of limited's 60 s, out of 120 s of work in all.
    let redone = r.totals.redone_work_share["cpu"];
    assert!((redone - 6.0 / 120.0).abs() < 1e-9, "{redone}");
}

#[test]
fn zero_eviction_delay_requeues_in_the_same_instant() {
    let r = simulate(&generator_only(PREEMPT), SimConfig::default()).expect("runs");
    // high runs 200..700, low 700..1700.
    assert_eq!(r.totals.makespan_ms, 1700);
    assert_eq!(class(&r, "high").time_to_admission.max_ms, 0);
}

#[test]
fn demo_is_deterministic_and_seed_sensitive() {
    let a = simulate(&Scenario::demo(), SimConfig::default()).expect("runs");
    let b = simulate(&Scenario::demo(), SimConfig::default()).expect("runs");
    assert_eq!(a.without_timing(), b.without_timing());
    assert_eq!(a.without_timing().to_json(), b.without_timing().to_json());
    assert!(a.timing.is_some());
    let c = simulate(
        &Scenario::demo(),
        SimConfig {
            seed: 5,
            ..SimConfig::default()
        },
    )
    .expect("runs");
    assert_ne!(a.without_timing().totals, c.without_timing().totals);
}

/// Seeds 2-4 once hit an engine livelock (a workload admitted and preempted
/// again in the same cycle); keep a spread of seeds clean.
#[test]
fn demo_runs_clean_for_many_seeds() {
    for seed in 1..=8 {
        let r = simulate(
            &Scenario::demo(),
            SimConfig {
                seed,
                ..SimConfig::default()
            },
        )
        .expect("runs");
        assert!(
            r.anomalies.is_empty() && !r.totals.truncated,
            "seed {seed}: {:?}",
            r.anomalies
        );
        assert_eq!(r.totals.finished, r.totals.workloads, "seed {seed}");
    }
}

/// The topology scenarios must drain: every workload finishes, no engine
/// anomaly (a placement change once made gpu-gangs livelock).
#[test]
fn topology_scenarios_run_clean() {
    for name in ["gpu-gangs", "kueue-tas"] {
        let r = simulate(
            &Scenario::builtin(name).expect("built in"),
            SimConfig::default(),
        )
        .expect("runs");
        assert!(
            r.anomalies.is_empty() && !r.totals.truncated,
            "{name}: {:?}",
            r.anomalies
        );
        assert_eq!(r.totals.finished, r.totals.workloads, "{name}");
        assert!(r.gpus.is_some() == (name == "gpu-gangs"), "{name}");
    }
}

/// The reservation's notices (an Event each in a cluster) are counted in the report:
/// on gpu-gangs, backfill by higher-priority heads and by queues under their nominal
/// quota takes held nodes, so holds move later; without the reservation there are none.
#[test]
fn gang_reservation_moves_are_reported() {
    let scenario = Scenario::builtin("gpu-gangs").expect("built in");
    let mut cfg = SimConfig::default();
    let off = simulate(&scenario, cfg.clone()).expect("runs");
    assert_eq!(
        (
            off.totals.gang_reservations_moved,
            off.totals.gang_reservations_dropped
        ),
        (0, 0)
    );
    assert!(!off.to_json().contains("gangReservations"));
    cfg.engine.gang_reservation_horizon = 86_400_000;
    let on = simulate(&scenario, cfg).expect("runs");
    let t = &on.totals;
    assert!(t.gang_reservations_moved > 0, "{t:?}");
    let line = format!(
        "gang reservations moved later {}  dropped {}",
        t.gang_reservations_moved, t.gang_reservations_dropped
    );
    assert!(on.render_table().contains(&line), "{}", on.render_table());
    assert!(on.to_json().contains("\"gangReservationsMoved\""));
}

#[test]
fn livelock_guard_stops_the_run() {
    // A preemption with no eviction delay needs a second batch at the same
    // instant; a budget of one batch per instant must stop the run there.
    let cfg = SimConfig {
        max_batches_per_instant: 1,
        ..SimConfig::default()
    };
    let r = simulate(&generator_only(PREEMPT), cfg).expect("runs");
    assert!(r.totals.truncated);
    assert!(
        r.anomalies.iter().any(|a| a.contains("same instant")),
        "{:?}",
        r.anomalies
    );
}

#[test]
fn oversized_workload_is_reported_not_looped_on() {
    let scenario = one_cpu_queue(
        "    - count: 2
      creationIntervalMs: 10
      workloads: [{className: huge, runtimeMs: 5, request: 4}]
",
    );
    let r = simulate(&scenario, SimConfig::default()).expect("runs");
    assert_eq!(r.totals.admissions, 0);
    assert_eq!(r.never_admitted.iter().map(|g| g.count).sum::<u64>(), 2);
    assert!(!r.totals.truncated);
}

#[test]
fn absurd_times_do_not_overflow() {
    let scenario = one_cpu_queue(
        "    - count: 2
      startMs: 18446744073709551000
      creationIntervalMs: 18446744073709551000
      workloads: [{className: w, runtimeMs: 9223372036854775000, request: 1}]
",
    );
    let r = simulate(&scenario, SimConfig::default()).expect("runs");
    assert_eq!(r.totals.workloads, 2);
}

/// Two 8-GPU nodes. Two 6-GPU pods land on different nodes (2 free on
/// each); a 4-GPU pod arriving at 100 ms fits nowhere, so 4 GPUs are
/// stranded from 100 ms until the first two finish at 1000 ms. It then
/// runs 1000..1100.
#[test]
fn stranded_gpus_are_measured_from_node_placements() {
    let cluster = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
spec: {topologyName: topo, nodeLabels: {pool: gpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 16}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: cq}
"#;
    let nodes = r#"
topology: {name: topo}
pools:
- name: n
  nodes: 2
  levels: [{label: rack, count: 1}]
  allocatable: {nvidia.com/gpu: "8"}
  labels: {pool: gpu}
"#;
    let trace = "submit_ms,namespace,queue,name,runtime_ms,podsets,topology
                 0,ml,lq,a,1000,1:nvidia.com/gpu=6,required:kubernetes.io/hostname
                 0,ml,lq,c,1000,1:nvidia.com/gpu=6,required:kubernetes.io/hostname
                 100,ml,lq,b,100,1:nvidia.com/gpu=4,required:kubernetes.io/hostname
";
    let s = Scenario {
        name: "frag".into(),
        manifests: vec![
            SourceFile::new("cluster.yaml", cluster),
            SourceFile::new("nodes.yaml", nodes),
            SourceFile::new("trace.csv", trace),
        ],
        generator: None,
    };
    let cfg = SimConfig {
        timeseries: true,
        ..SimConfig::default()
    };
    let r = simulate(&s, cfg).expect("runs");
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(r.totals.makespan_ms, 1100);
    assert_eq!(class(&r, "trace").time_to_admission.max_ms, 900);
    let g = r.gpus.as_ref().expect("GPU nodes");
    assert_eq!((g.nodes, g.total, g.peak_stranded), (2, 16.0, 4.0));
    assert!(
        (g.mean_stranded - 4.0 * 900.0 / 1100.0).abs() < 1e-9,
        "{g:?}"
    );
    // Free: 4 GPUs over 0..1000, 12 over 1000..1100, 16 never (all in the makespan).
    let free = (4.0 * 1000.0 + 12.0 * 100.0) / 1100.0;
    assert!((g.mean_free - free).abs() < 1e-9, "{g:?}");
    let f = &r.flavors[0];
    assert_eq!(
        (f.flavor.as_str(), f.resource.as_str()),
        ("gpu", "nvidia.com/gpu")
    );
    let ts = r.timeseries.as_ref().expect("requested");
    assert_eq!(ts.names, ["cq"]);
    // At 100 ms: 12 GPUs in use and one workload waiting.
    let at100 = ts.points.iter().find(|p| p.t_ms == 100).expect("sampled");
    assert_eq!((at100.used_milli[0], at100.pending[0]), (12, 1));
}

#[test]
fn timeseries_stays_bounded() {
    let cfg = SimConfig {
        timeseries: true,
        ..SimConfig::default()
    };
    let r = simulate(&Scenario::demo(), cfg).expect("runs");
    let ts = r.timeseries.expect("requested");
    assert!(ts.points.len() <= MAX_POINTS && !ts.points.is_empty());
    assert!(ts.points.windows(2).all(|w| w[0].t_ms < w[1].t_ms));
    assert!(
        simulate(&Scenario::demo(), SimConfig::default())
            .expect("runs")
            .timeseries
            .is_none()
    );
}

#[test]
fn batch_limit_truncates() {
    let cfg = SimConfig {
        max_batches: 2,
        ..SimConfig::default()
    };
    let r = simulate(&generator_only(PREEMPT), cfg).expect("runs");
    assert!(r.totals.truncated);
}

/// A calibration whose latencies are constants: a workload is seen 10 ms after its
/// submission, unsuspended 5 ms after its admission, its pods start 20 ms later, its quota
/// is back 300 ms after they end, and a preemption stops its victim `eviction_stopped` ms
/// after it is decided.
fn constant_calibration(eviction_stopped: f64) -> crate::sim::calibration::Calibration {
    calibration_of(eviction_stopped, 300.0)
}

fn calibration_of(
    eviction_stopped: f64,
    workload_finished: f64,
) -> crate::sim::calibration::Calibration {
    let constant = |ms: f64| format!("[{}]", vec![ms.to_string(); 101].join(","));
    let text = format!(
        r#"{{"apiVersion":"kuota.dev/v1alpha1","kind":"Calibration","clusterQueues":1,"measuredJobs":2,
           "latencyQuantilesMs":{{"workloadCreated":{},"unsuspended":{},"podsRunning":{},"workloadFinished":{},"evictionStopped":{}}}}}"#,
        constant(10.0),
        constant(5.0),
        constant(20.0),
        constant(workload_finished),
        constant(eviction_stopped)
    );
    crate::sim::calibration::Calibration::parse("t.json", &text).expect("calibration")
}

/// The preemption fixture run under `calibration`, without anomalies.
fn preempt_calibrated(calibration: crate::sim::calibration::Calibration) -> Report {
    let cfg = SimConfig {
        calibration: Some(calibration),
        ..SimConfig::default()
    };
    let r = simulate(&generator_only(PREEMPT), cfg).expect("runs");
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    r
}

#[test]
fn calibrated_latencies_delay_arrival_start_and_the_quota_coming_back() {
    let r = preempt_calibrated(constant_calibration(50.0));
    // low seen at 110 and admitted; high seen at 210 preempts it (low's pods still run),
    // low stops at 260; high admitted at 260, unsuspended 265, runs 285..785, its quota
    // back at 1085; low again: admitted 1085, running 1110..2110, quota back at 2410.
    assert_eq!(r.totals.preemptions, 1);
    assert_eq!(r.totals.makespan_ms, 2410);
    assert_eq!(class(&r, "low").time_to_admission.max_ms, 985);
    assert_eq!(r.totals.calibration.as_deref(), Some("t.json"));
    let l = r.totals.create_to_unsuspend.expect("measured");
    assert_eq!((l.count, l.p50_ms, l.p99_ms), (2, 15, 65));
}

#[test]
fn workloads_reach_the_engine_through_the_calibrated_creation_queue() {
    let mut calibration = constant_calibration(50.0);
    calibration.workload_create_service = crate::sim::calibration::Quantiles::constant(150.0);
    let r = preempt_calibrated(calibration);
    // low (submitted at 100) is seen at 250, not 110; high (200) waits for it in the
    // queue and is seen at 400, not 210. low admitted at 250, runs 275..1275; high
    // preempts it at 400, low stops at 450; high admitted at 450, runs 475..975, its
    // quota back at 1275; low admitted again at 1275, runs 1300..2300, back at 2600.
    assert_eq!(r.totals.preemptions, 1);
    assert_eq!(r.totals.makespan_ms, 2600);
    assert_eq!(class(&r, "high").time_to_admission.max_ms, 250);
    assert_eq!(class(&r, "low").time_to_admission.max_ms, 1175);
}

/// Runs the preemption scenario under `calibration`, in which the victim's pods complete
/// before its stop: it is preempted once, never admitted again, and both finish.
fn victim_finished_without_running_again(
    calibration: crate::sim::calibration::Calibration,
) -> Report {
    let r = preempt_calibrated(calibration);
    assert_eq!(r.totals.preemptions, 1);
    assert_eq!(r.totals.admissions, 2, "low is not admitted again");
    assert_eq!(r.totals.finished, 2);
    r
}

/// As in a cluster, where a Job that succeeds while it is being suspended is finished,
/// not run again: a victim whose pods complete before the stop reaches them finishes, and
/// its quota comes back when its Workload is finished.
#[test]
fn a_victim_whose_pods_complete_before_the_stop_finishes_instead_of_running_again() {
    // low admitted at 110, its pods run 135..1135; high (submitted at 200) seen at 210
    // preempts it, but the stop would land at 2210: low finishes, its quota back at 1435.
    // high admitted at 1435, unsuspended 1440, runs 1460..1960, its quota back at 2260.
    let r = victim_finished_without_running_again(constant_calibration(2000.0));
    assert_eq!(r.totals.makespan_ms, 2260);
    assert_eq!(class(&r, "high").time_to_admission.max_ms, 1235);
}

/// As in a cluster, where a stopped Job with no pod left is requeued (its quota back)
/// before the Job controller has counted the pod that succeeded and kuota finishes the
/// Workload: the quota of a victim whose pods completed comes back at the stop when the
/// stop comes first, and the victim is then finished without running again.
#[test]
fn a_finished_victims_quota_comes_back_at_the_stop_when_the_stop_comes_first() {
    // low admitted at 110, its pods run 135..1135; high seen at 210 preempts it; the stop
    // lands at 1410, after low's pods ended: its quota is back then, and it is finished
    // at 4135 while still waiting. high admitted at 1410, runs 1435..1935, back at 4935.
    let r = victim_finished_without_running_again(calibration_of(1200.0, 3000.0));
    assert_eq!(r.totals.makespan_ms, 4935);
    assert_eq!(class(&r, "high").time_to_admission.max_ms, 1210);
    assert_eq!(r.cluster_queues[0].finished, 2);
}

/// Jobs created just before an admission load the cluster as much as jobs in flight:
/// with `loadWindowMs`, the latencies are looked up by both.
#[test]
fn jobs_created_within_the_load_window_count_in_the_load() {
    let run = |window: Option<i64>| {
        let base = calibration_of(50.0, 300.0);
        let mut c = base.clone();
        let slow = crate::sim::calibration::LoadBand {
            at_least: 2,
            jobs: 20,
            finished_jobs: 0,
            pods_running: base.pods_running.clone(),
            workload_finished: calibration_of(50.0, 5000.0).workload_finished,
        };
        let fast = crate::sim::calibration::LoadBand {
            at_least: 0,
            jobs: 20,
            finished_jobs: 0,
            pods_running: base.pods_running.clone(),
            workload_finished: base.workload_finished.clone(),
        };
        c.by_in_flight = vec![fast, slow];
        c.load_window_ms = window.unwrap_or(0);
        let cfg = SimConfig {
            calibration: Some(c),
            ..SimConfig::default()
        };
        let r = simulate(&generator_only(PREEMPT), cfg).expect("runs");
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        r.totals.makespan_ms
    };
    // In flight alone, nobody reaches the slow band: as with the global latencies.
    assert_eq!(run(None), 2410);
    // Each admission also counts its own job's creation (within 1 s): the slow band.
    assert!(run(Some(1000)) > 2410 + 4000, "{}", run(Some(1000)));
}

/// A job's completion waits behind what the cluster is doing when its pods are done:
/// with `finishedLoadAt: PodsDone`, `workloadFinished` is looked up by the load then,
/// not at the unsuspend.
#[test]
fn a_completion_is_looked_up_by_the_load_when_the_pods_are_done() {
    // One cpu: `a` (at 100 ms) runs first, three `w` (at 300, 600, 900) wait for it.
    const SETS: &str = "    - count: 1
      creationIntervalMs: 100
      workloads: [{className: a, runtimeMs: 1000, priority: 0, request: 1}]
    - count: 3
      creationIntervalMs: 300
      workloads: [{className: w, runtimeMs: 100, priority: 0, request: 1}]
";
    let run = |at: crate::sim::calibration::LoadPoint| {
        let mut c = calibration_of(50.0, 300.0);
        let band = |at_least, finished| crate::sim::calibration::LoadBand {
            at_least,
            jobs: 20,
            finished_jobs: 20,
            pods_running: c.pods_running.clone(),
            workload_finished: calibration_of(50.0, finished).workload_finished,
        };
        c.by_in_flight = vec![band(0, 300.0), band(3, 5000.0)];
        c.load_window_ms = 1000;
        c.finished_load_at = at;
        let cfg = SimConfig {
            calibration: Some(c),
            ..SimConfig::default()
        };
        let r = simulate(&one_cpu_queue(SETS), cfg).expect("runs");
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        class(&r, "w").time_to_admission.clone()
    };
    // At the unsuspend (110 ms) the load is `a` and its own creation: 2, the fast band;
    // `a` is finished at 1135 + 300, and the first `w` waits 1135 ms. (That `w`, started
    // at 1435 with the two others created in the second before, is slow: 5000.)
    let at_unsuspend = run(crate::sim::calibration::LoadPoint::Unsuspend);
    // When `a`'s pods are done (1135 ms), the three `w` created in the second before
    // load the cluster too: 4, the slow band; `a` is finished at 6135.
    let at_pods_done = run(crate::sim::calibration::LoadPoint::PodsDone);
    assert_eq!(
        (at_unsuspend.count, at_unsuspend.max_ms),
        (3, at_pods_done.max_ms)
    );
    assert_eq!(
        (at_unsuspend.mean_ms * 3.0).round(),
        (1135 + 5960 + 6085) as f64
    );
    assert_eq!(
        (at_pods_done.mean_ms * 3.0).round(),
        (5835 + 5960 + 6085) as f64
    );
}

/// Without a calibration the simulator runs as before and its report says that the
/// cluster's latencies count as zero; with one, it names the file.
#[test]
fn the_report_says_whether_a_calibration_was_given() {
    let report = |calibration| {
        let cfg = SimConfig {
            calibration,
            ..SimConfig::default()
        };
        simulate(&generator_only(PREEMPT), cfg)
            .expect("runs")
            .render_table()
    };
    let bare = report(None);
    assert!(
        bare.contains("no calibration: a cluster's actuation latencies"),
        "{bare}"
    );
    let calibrated = report(Some(constant_calibration(50.0)));
    assert!(
        calibrated.contains("calibrated by t.json: create→unsuspend p50"),
        "{calibrated}"
    );
    assert!(!calibrated.contains("no calibration"), "{calibrated}");
}
