//! Metric values after simulator runs whose outcomes are known, checked against the
//! exposition text a scraper reads.

use kuota::sim::{Scenario, SimConfig, SourceFile, simulate};
use kuota::telemetry::{Metrics, ReplicaRole};

/// One sample line: metric name, labels (unescaped), value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// Parses the text exposition (either format): enough for these tests, including
/// escaped label values.
fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, rest) = match line.find('{') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => {
                let (n, v) = line.split_once(' ').expect("name value");
                out.push(Sample {
                    name: n.into(),
                    labels: vec![],
                    value: v.parse().expect("value"),
                });
                continue;
            }
        };
        let mut labels = Vec::new();
        let mut chars = rest.chars().peekable();
        loop {
            let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "{line}");
            let mut val = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some('n') => val.push('\n'),
                        Some(c) => val.push(c),
                        None => panic!("dangling escape in {line}"),
                    },
                    '"' => break,
                    c => val.push(c),
                }
            }
            labels.push((key, val));
            match chars.next() {
                Some(',') => continue,
                Some('}') => break,
                other => panic!("unexpected {other:?} in {line}"),
            }
        }
        let value: String = chars.collect();
        out.push(Sample {
            name: name.into(),
            labels,
            value: value.trim().parse().expect("value"),
        });
    }
    out
}

/// The sum of the samples of `name` whose labels include all of `want`.
fn value(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            want.iter()
                .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|s| s.value)
        .sum()
}

fn run(scenario: &Scenario, cfg: SimConfig) -> (kuota::sim::Report, Vec<Sample>, String) {
    let metrics = Metrics::new();
    let report = simulate(
        scenario,
        SimConfig {
            metrics: Some(metrics.clone()),
            ..cfg
        },
    )
    .expect("runs");
    assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
    let text = metrics.encode();
    (report, parse(&text), text)
}

/// One cpu; a low-priority job starts at 100 ms, a high-priority one preempts it at 200.
const PREEMPT: &str = include_str!("fixtures/preempt-generator.yaml");

fn generator_only(yaml: &str) -> Scenario {
    Scenario {
        name: "t".into(),
        manifests: vec![],
        generator: Some(SourceFile::new("generator.yaml", yaml)),
    }
}

#[test]
fn preemption_scenario_counts_admissions_preemptions_and_waits() {
    let cfg = SimConfig {
        eviction_delay_ms: 50,
        ..SimConfig::default()
    };
    let (r, s, _) = run(&generator_only(PREEMPT), cfg);
    let cq = r.cluster_queues[0].name.as_str();
    let on = [("cluster_queue", cq)];
    // low admitted at 100, preempted at 200, stopped at 250; high admitted at 250;
    // low admitted again at 750.
    assert_eq!(value(&s, "kueue_admitted_workloads_total", &on), 3.0);
    assert_eq!(value(&s, "kueue_quota_reserved_workloads_total", &on), 3.0);
    assert_eq!(value(&s, "kueue_finished_workloads_total", &on), 2.0);
    assert_eq!(
        value(
            &s,
            "kueue_preempted_workloads_total",
            &[
                ("preempting_cluster_queue", cq),
                ("reason", "InClusterQueue")
            ]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "kueue_evicted_workloads_total",
            &[("cluster_queue", cq), ("reason", "Preempted")]
        ),
        1.0
    );
    // Waits from creation or requeue: 0 s (low), 0.05 s (high), 0.5 s (low, requeued at 250).
    assert_eq!(
        value(&s, "kueue_admission_wait_time_seconds_count", &on),
        3.0
    );
    let sum = value(&s, "kueue_admission_wait_time_seconds_sum", &on);
    assert!((sum - 0.55).abs() < 1e-9, "{sum}");
    // Kueue's first bucket is 1 s: all three waits are in it.
    assert_eq!(
        value(
            &s,
            "kueue_quota_reserved_wait_time_seconds_bucket",
            &[("cluster_queue", cq), ("le", "1.0")]
        ),
        3.0
    );
    // At the end nothing waits and nothing holds quota.
    assert_eq!(value(&s, "kueue_pending_workloads", &on), 0.0);
    assert_eq!(value(&s, "kueue_reserving_active_workloads", &on), 0.0);
    assert_eq!(
        value(
            &s,
            "kueue_cluster_queue_nominal_quota",
            &[("cluster_queue", cq), ("resource", "cpu")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "kueue_cluster_queue_status",
            &[("cluster_queue", cq), ("status", "active")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "kueue_cluster_queue_status",
            &[("cluster_queue", cq), ("status", "pending")]
        ),
        0.0
    );
    assert_eq!(
        value(&s, "kuota_engine_decisions_total", &[("kind", "admit")]),
        3.0
    );
    assert_eq!(
        value(&s, "kuota_engine_decisions_total", &[("kind", "preempt")]),
        1.0
    );
}

#[test]
fn demo_metrics_agree_with_the_simulator_report() {
    let (r, s, text) = run(&Scenario::demo(), SimConfig::default());
    assert_eq!(
        value(&s, "kueue_admitted_workloads_total", &[]),
        r.totals.admissions as f64
    );
    assert_eq!(
        value(&s, "kueue_preempted_workloads_total", &[]),
        r.totals.preemptions as f64
    );
    assert_eq!(
        value(&s, "kueue_admission_attempts_total", &[]),
        r.totals.cycles as f64
    );
    for cq in &r.cluster_queues {
        let on = [("cluster_queue", cq.name.as_str())];
        assert_eq!(
            value(&s, "kueue_admitted_workloads_total", &on),
            cq.admissions as f64,
            "{}",
            cq.name
        );
        assert_eq!(
            value(&s, "kueue_finished_workloads_total", &on),
            cq.finished as f64,
            "{}",
            cq.name
        );
        assert_eq!(
            value(&s, "kueue_evicted_workloads_total", &on),
            (cq.preempted + cq.evicted) as f64,
            "{}",
            cq.name
        );
        let cohort = cq.cohort.clone().unwrap_or_default();
        assert_eq!(
            value(&s, "kueue_cluster_queue_status", &on),
            1.0,
            "exactly one status is 1"
        );
        assert!(
            s.iter()
                .filter(|x| x.name == "kueue_cluster_queue_nominal_quota")
                .filter(|x| x
                    .labels
                    .contains(&("cluster_queue".into(), cq.name.clone())))
                .all(|x| x.labels.contains(&("cohort".into(), cohort.clone()))),
            "cohort label of {}",
            cq.name
        );
    }
    // Every series carries replica_role; no series names a workload (bounded cardinality).
    assert!(
        s.iter().all(|x| x
            .labels
            .iter()
            .any(|(k, v)| k == "replica_role" && v == "standalone")),
        "a series without replica_role"
    );
    let plan = Scenario::demo()
        .plan(SimConfig::default().seed)
        .expect("plans");
    for w in &plan.workloads {
        let quoted = format!("\"{}\"", w.key.name);
        assert!(!text.contains(&quoted), "{} appears in a label", w.key.name);
    }
}

#[test]
fn gpus_per_domain_add_up_to_the_cluster() {
    let scenario = Scenario::builtin("gpu-gangs").expect("built-in");
    let (r, s, _) = run(&scenario, SimConfig::default());
    let gpus = r.gpus.as_ref().expect("gpu scenario");
    let levels: std::collections::BTreeSet<&str> = s
        .iter()
        .filter(|x| x.name == "kuota_gpus_allocatable")
        .filter_map(|x| x.labels.iter().find(|(k, _)| k == "level"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert!(!levels.is_empty(), "no GPU domains reported");
    for level in levels {
        let on = [("level", level)];
        assert_eq!(
            value(&s, "kuota_gpus_allocatable", &on),
            gpus.total,
            "{level}"
        );
        // Everything finished: all free, nothing allocated or stranded.
        assert_eq!(value(&s, "kuota_gpus_free", &on), gpus.total, "{level}");
        assert_eq!(value(&s, "kuota_gpus_allocated", &on), 0.0, "{level}");
        assert_eq!(value(&s, "kuota_gpus_stranded", &on), 0.0, "{level}");
    }
}

#[test]
fn replica_role_and_escaped_label_values() {
    let m = Metrics::new();
    m.set_replica_role(ReplicaRole::Leader);
    let odd = "we\"ird\\kind\nx";
    m.record_api_write(odd);
    m.record_api_write(odd);
    m.record_api_write("Workload");
    let text = m.encode();
    assert!(text.contains(r#"kind="we\"ird\\kind\nx""#), "{text}");
    let s = parse(&text);
    assert_eq!(
        value(
            &s,
            "kuota_api_writes_total",
            &[("kind", odd), ("replica_role", "leader")]
        ),
        2.0
    );
    assert_eq!(
        value(&s, "kueue_build_info", &[("replica_role", "leader")]),
        1.0
    );
    assert!(
        !text.contains("replica_role=\"standalone\""),
        "build_info follows the role"
    );
    // The classic text format names counters with their suffix, as Kueue's do.
    let classic = kuota::telemetry::metrics::to_prometheus_text(&text);
    assert!(classic.contains("# TYPE kuota_api_writes_total counter"));
    assert!(!classic.contains("# EOF"));
}

/// Every sample of the exposition carries `replica_role` with the registry's current role,
/// as docs/observability.md promises: the families the simulator fills, the state gauges,
/// and the process-wide count of unknown fields.
#[test]
fn every_sample_carries_replica_role() {
    let metrics = Metrics::new();
    metrics.set_replica_role(ReplicaRole::Leader);
    simulate(
        &Scenario::demo(),
        SimConfig {
            metrics: Some(metrics.clone()),
            ..SimConfig::default()
        },
    )
    .expect("runs");
    // A cluster object with a field this kuota does not know is counted on every registry.
    let _: kuota::api::LocalQueue = kuota::api::lenient::from_value(
        "LocalQueue",
        &serde_json::json!({"metadata": {"name": "q", "namespace": "n"},
            "spec": {"clusterQueue": "cq", "newerKnob": 1}}),
    )
    .expect("decodes");
    let text = metrics.encode();
    let samples = parse(&text);
    let names: std::collections::BTreeSet<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains("kuota_unknown_fields_total"), "{names:?}");
    assert!(names.len() > 20, "{names:?}");
    for s in &samples {
        assert!(
            s.labels
                .iter()
                .any(|(k, v)| k == "replica_role" && v == "leader"),
            "{} {:?} has no replica_role=leader",
            s.name,
            s.labels
        );
    }
}
