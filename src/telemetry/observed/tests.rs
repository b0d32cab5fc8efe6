//! The shared feed: what a shell applies and schedules through it shows up in the
//! metrics, and what the engine rejects does not.

use std::time::Duration;

use super::{apply, schedule};
use crate::engine::{Engine, EngineConfig, Event};
use crate::telemetry::{Metrics, Observer};

fn obj<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_norway::from_str(yaml).expect("test fixture is valid")
}

/// ClusterQueue `cq` with 1 cpu in flavor `default`, LocalQueue `ns/lq` pointing at it.
fn cluster() -> Vec<Event> {
    vec![
        Event::ResourceFlavorUpserted(obj("metadata: {name: default}\nspec: {}")),
        Event::ClusterQueueUpserted(obj(r#"
metadata: { name: cq }
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{ name: cpu, nominalQuota: "1" }]
"#)),
        Event::LocalQueueUpserted(obj(
            "metadata: {name: lq, namespace: ns}\nspec: {clusterQueue: cq}",
        )),
    ]
}

fn workload(name: &str, cpu: &str) -> Event {
    Event::WorkloadUpserted(obj(&format!(
        r#"
metadata: {{ name: {name}, namespace: ns }}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers: [{{ name: c, resources: {{ requests: {{ cpu: "{cpu}" }} }} }}]
"#
    )))
}

/// The value of the sample line starting with `series` (name and labels as encoded).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn applied_and_scheduled_workloads_are_counted_and_rejected_ones_are_not() {
    let metrics = Metrics::default();
    let mut observer = Observer::new(metrics.clone(), Duration::ZERO);
    let mut engine = Engine::new(EngineConfig::default());
    for ev in cluster() {
        apply(&mut engine, Some(&mut observer), 0, ev)
            .0
            .expect("valid");
    }
    for (name, cpu) in [("fits", "600m"), ("waits", "600m")] {
        apply(&mut engine, Some(&mut observer), 1, workload(name, cpu))
            .0
            .expect("valid workload");
    }
    // A request the engine cannot parse: rejected, so never pending in the metrics.
    let rejected = apply(&mut engine, Some(&mut observer), 1, workload("bad", "lots")).0;
    assert!(rejected.is_err(), "the engine accepted cpu: lots");

    let (decisions, _) = schedule(&mut engine, Some(&mut observer), 2_000);
    assert_eq!(decisions.len(), 2, "{decisions:?}");

    let text = metrics.encode();
    let role = r#"replica_role="standalone""#;
    assert_eq!(
        sample(
            &text,
            &format!(
                r#"kueue_admitted_workloads_total{{cluster_queue="cq",priority_class="",{role}}}"#
            )
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(
                r#"kueue_pending_workloads{{cluster_queue="cq",status="inadmissible",{role}}}"#
            )
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"kueue_pending_workloads{{cluster_queue="cq",status="active",{role}}}"#)
        ),
        Some(0.0),
        "the rejected workload is counted as pending: {text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"kuota_engine_decisions_total{{kind="admit",{role}}}"#)
        ),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn without_an_observer_the_engine_is_fed_all_the_same() {
    let mut engine = Engine::new(EngineConfig::default());
    for ev in cluster() {
        apply(&mut engine, None, 0, ev).0.expect("valid");
    }
    apply(&mut engine, None, 1, workload("fits", "600m"))
        .0
        .expect("valid");
    let (decisions, _) = schedule(&mut engine, None, 2_000);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
}
