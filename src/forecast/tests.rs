//! Forecasts on one small ClusterQueue whose answers can be worked out by hand.

use super::*;
use crate::api;
use crate::engine::{EngineConfig, Event};

const MIN: Millis = 60_000;

fn obj<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_norway::from_str(yaml).expect("test fixture is valid")
}

/// A ClusterQueue `a` of `cpu` cpus with LocalQueue ns/a.
fn engine(cpu: &str) -> Engine {
    let mut e = Engine::new(EngineConfig::default());
    e.apply(
        0,
        Event::ResourceFlavorUpserted(obj("metadata: {name: default}\nspec: {}")),
    )
    .unwrap();
    e.apply(
        0,
        Event::ClusterQueueUpserted(obj(&format!(
            r#"
metadata: {{ name: a }}
spec:
  namespaceSelector: {{}}
  preemption: {{ withinClusterQueue: LowerPriority }}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{{ name: cpu, nominalQuota: "{cpu}" }}]
"#
        ))),
    )
    .unwrap();
    e.apply(
        0,
        Event::LocalQueueUpserted(obj(
            "metadata: {name: a, namespace: ns}\nspec: {clusterQueue: a}",
        )),
    )
    .unwrap();
    e
}

/// A workload of `cpu` cpus in ns/a, with `maximumExecutionTimeSeconds` when given.
fn wl(name: &str, cpu: &str, priority: i32, max_seconds: Option<i32>) -> Event {
    let bound = max_seconds
        .map(|s| format!("maximumExecutionTimeSeconds: {s}"))
        .unwrap_or_default();
    Event::WorkloadUpserted(obj(&format!(
        r#"
metadata: {{ name: {name}, namespace: ns }}
spec:
  queueName: a
  priority: {priority}
  {bound}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers: [{{ name: c, resources: {{ requests: {{ cpu: "{cpu}" }} }} }}]
"#
    )))
}

fn key(name: &str) -> WorkloadKey {
    WorkloadKey::new("ns", name)
}

fn estimate(f: &Forecast, name: &str) -> Estimate {
    f.estimates
        .get(&key(name))
        .unwrap_or_else(|| panic!("no estimate for {name}: {f:?}"))
        .clone()
}

/// `running` admitted at 0 on a 4-cpu queue, then `pending` (4 cpus each) queued at `now`.
fn busy(running_bound: Option<i32>, pending: &[&str], now: Millis) -> Engine {
    let mut e = engine("4");
    e.apply(0, wl("running", "4", 0, running_bound)).unwrap();
    e.schedule(0);
    for p in pending {
        e.apply(now, wl(p, "4", 0, None)).unwrap();
    }
    e.schedule(now);
    e
}

#[test]
fn without_any_runtime_knowledge_there_is_no_estimate() {
    let e = busy(None, &["next"], MIN);
    let f = forecast(&e, &RuntimeBook::default(), &ForecastConfig::default());
    let est = estimate(&f, "next");
    assert_eq!(est.p50, None);
    assert_eq!(est.unknown, Some(Unknown::NoRuntimeKnowledge));
    assert_eq!(f.estimates.len(), 1, "only pending workloads are estimated");
}

#[test]
fn a_job_bound_alone_gives_the_end_of_the_bound() {
    let e = busy(Some(600), &["next"], MIN);
    let f = forecast(&e, &RuntimeBook::default(), &ForecastConfig::default());
    let est = estimate(&f, "next");
    assert_eq!(est.p50, Some(10 * MIN));
    assert_eq!((est.low, est.high), (Some(10 * MIN), Some(10 * MIN)));
    assert_eq!(est.source, Some(RuntimeSource::JobBound));
    assert_eq!(f.at, MIN);
}

/// Ten runs of 1..=10 minutes learned for ns/a at priority 0.
fn book_1_to_10_minutes() -> RuntimeBook {
    let mut book = RuntimeBook::default();
    for m in 1..=10 {
        book.record("ns", "a", 0, m * MIN);
    }
    book
}

#[test]
fn learned_runtimes_queue_workloads_behind_each_other_at_each_quantile() {
    let e = busy(None, &["second", "third"], 0);
    let f = forecast(&e, &book_1_to_10_minutes(), &ForecastConfig::default());
    // Nearest rank over 1..=10 minutes: p10 = 1, p50 = 5, p90 = 9.
    let second = estimate(&f, "second");
    assert_eq!(
        (second.low, second.p50, second.high),
        (Some(MIN), Some(5 * MIN), Some(9 * MIN))
    );
    assert_eq!(second.source, Some(RuntimeSource::Learned));
    let third = estimate(&f, "third");
    assert_eq!(
        (third.low, third.p50, third.high),
        (Some(2 * MIN), Some(10 * MIN), Some(18 * MIN))
    );
}

#[test]
fn a_running_workload_ends_by_the_runs_longer_than_what_it_has_run() {
    // Admitted at 0; at 6 minutes the runs still possible are 7..=10 minutes.
    let e = busy(None, &["next"], 6 * MIN);
    let f = forecast(&e, &book_1_to_10_minutes(), &ForecastConfig::default());
    let est = estimate(&f, "next");
    // Nearest rank over [7, 8, 9, 10]: p10 = 7, p50 = 8, p90 = 10.
    assert_eq!(
        (est.low, est.p50, est.high),
        (Some(7 * MIN), Some(8 * MIN), Some(10 * MIN))
    );
}

#[test]
fn the_bound_caps_a_longer_learned_runtime() {
    let e = busy(Some(4 * 60), &["next"], 0);
    let f = forecast(&e, &book_1_to_10_minutes(), &ForecastConfig::default());
    let est = estimate(&f, "next");
    assert_eq!(
        (est.low, est.p50, est.high),
        (Some(MIN), Some(4 * MIN), Some(4 * MIN))
    );
    assert_eq!(est.source, Some(RuntimeSource::JobBound));
}

#[test]
fn the_default_runtime_is_used_only_when_configured_and_says_so() {
    let e = busy(None, &["next"], 0);
    let cfg = ForecastConfig {
        default_runtime: Some(30 * MIN),
        ..ForecastConfig::default()
    };
    let est = estimate(&forecast(&e, &RuntimeBook::default(), &cfg), "next");
    assert_eq!(est.p50, Some(30 * MIN));
    assert_eq!(est.source, Some(RuntimeSource::Default));
}

#[test]
fn too_few_learned_runs_fall_back_to_the_bound() {
    let e = busy(Some(600), &["next"], 0);
    let mut book = RuntimeBook::default();
    book.record("ns", "a", 0, MIN);
    book.record("ns", "a", 0, MIN);
    let est = estimate(&forecast(&e, &book, &ForecastConfig::default()), "next");
    assert_eq!(est.p50, Some(10 * MIN), "2 runs < min_samples 3");
}

#[test]
fn a_workload_that_fits_now_starts_now_without_a_runtime_source() {
    let mut e = engine("8");
    e.apply(0, wl("running", "4", 0, None)).unwrap();
    e.schedule(0);
    e.apply(MIN, wl("fits", "4", 0, None)).unwrap();
    let est = estimate(
        &forecast(&e, &RuntimeBook::default(), &ForecastConfig::default()),
        "fits",
    );
    assert_eq!(est.p50, Some(MIN));
    assert_eq!(est.source, None);
}

#[test]
fn a_higher_priority_workload_goes_first_and_preemption_counts() {
    // `urgent` (priority 10) arrives after `batch` and preempts `running` (priority 0)
    // at once; `running`, older than `batch`, is queued again ahead of it, so `batch`
    // waits for `urgent`'s 5 minutes and then for `running`'s 5 (p50 of 1..=10).
    let e = {
        let mut e = busy(None, &["batch"], 0);
        e.apply(MIN, wl("urgent", "4", 10, None)).unwrap();
        e
    };
    let mut book = book_1_to_10_minutes();
    for _ in 0..3 {
        book.record("ns", "a", 10, 5 * MIN);
    }
    let f = forecast(&e, &book, &ForecastConfig::default());
    assert_eq!(estimate(&f, "urgent").p50, Some(MIN));
    assert_eq!(estimate(&f, "batch").p50, Some(11 * MIN));
}

#[test]
fn a_workload_larger_than_its_queue_is_not_admissible() {
    let mut e = busy(Some(600), &[], 0);
    e.apply(0, wl("huge", "8", 0, None)).unwrap();
    e.schedule(0);
    let est = estimate(
        &forecast(&e, &RuntimeBook::default(), &ForecastConfig::default()),
        "huge",
    );
    assert_eq!(est.p50, None);
    assert_eq!(est.unknown, Some(Unknown::NotAdmissible));
}

#[test]
fn starts_past_the_horizon_are_not_estimated() {
    let e = busy(Some(600), &["next"], 0);
    let cfg = ForecastConfig {
        horizon: 5 * MIN,
        ..ForecastConfig::default()
    };
    let f = forecast(&e, &RuntimeBook::default(), &cfg);
    assert_eq!(estimate(&f, "next").unknown, Some(Unknown::BeyondHorizon));
    assert!(f.truncated);
}

#[test]
fn the_forecast_leaves_the_live_engine_untouched() {
    let e = busy(Some(600), &["next"], 0);
    let before = format!("{:?}", e.workload_facts());
    forecast(&e, &RuntimeBook::default(), &ForecastConfig::default());
    assert_eq!(format!("{:?}", e.workload_facts()), before);
    assert_eq!(e.pending_count(), 1);
}

fn finished(name: &str, queue: &str, priority: i32, admitted: &str, done: &str) -> api::Workload {
    obj(&format!(
        r#"
metadata: {{ name: {name}, namespace: ns }}
spec:
  queueName: {queue}
  priority: {priority}
  podSets: [{{ name: main, count: 1, template: {{ spec: {{ containers: [{{ name: c }}] }} }} }}]
status:
  conditions:
  - {{ type: Admitted, status: "True", reason: Admitted, message: "", lastTransitionTime: "{admitted}" }}
  - {{ type: Finished, status: "True", reason: Succeeded, message: "", lastTransitionTime: "{done}" }}
"#
    ))
}

#[test]
fn a_book_is_rebuilt_from_finished_workloads_keeping_the_latest_runs() {
    let wls = [
        // Listed out of order: the window keeps the two that finished last.
        finished("c", "a", 0, "2026-01-01T02:00:00Z", "2026-01-01T02:03:00Z"),
        finished("a", "a", 0, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"),
        finished("b", "a", 0, "2026-01-01T01:00:00Z", "2026-01-01T01:02:00Z"),
        finished("x", "", 0, "2026-01-01T00:00:00Z", "2026-01-01T00:09:00Z"),
    ];
    let mut pending = finished("p", "a", 0, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z");
    pending.status.as_mut().unwrap().conditions.pop();
    let book = RuntimeBook::rebuild(2, wls.iter().chain([&pending]));
    assert_eq!(book.len(), 2);
    assert_eq!(book.sorted("ns", "a", 0, 1), Some(vec![2 * MIN, 3 * MIN]));
}

#[test]
fn a_priority_with_too_few_runs_uses_its_local_queues() {
    let mut book = RuntimeBook::default();
    book.record("ns", "a", 0, MIN);
    book.record("ns", "a", 0, 2 * MIN);
    book.record("ns", "a", 5, 9 * MIN);
    assert_eq!(
        book.sorted("ns", "a", 5, 2),
        Some(vec![MIN, 2 * MIN, 9 * MIN])
    );
    assert_eq!(book.sorted("ns", "a", 5, 1), Some(vec![9 * MIN]));
    assert_eq!(book.sorted("ns", "a", 5, 4), None);
    assert_eq!(book.sorted("ns", "other", 0, 1), None);
}

#[test]
fn quantiles_are_nearest_rank() {
    let v: Vec<Millis> = (1..=10).collect();
    assert_eq!(runtimes::quantile(&v, 0.1), Some(1));
    assert_eq!(runtimes::quantile(&v, 0.5), Some(5));
    assert_eq!(runtimes::quantile(&v, 0.9), Some(9));
    assert_eq!(runtimes::quantile(&v, 1.0), Some(10));
    assert_eq!(runtimes::quantile(&v, 0.0), Some(1));
    assert_eq!(runtimes::quantile(&[], 0.5), None);
}
