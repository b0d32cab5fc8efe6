//! Kueue's "large-scale" performance shape, shared by the engine and telemetry benches:
//! 1,000 ClusterQueues in 10 cohorts and 50,000 workloads.

#![allow(dead_code)] // each bench uses part of it

use kuota::engine::{Engine, Event};
use kuota::sim::generator::set_creation_time;
use kuota::sim::{Plan, SIM_EPOCH_MS, Scenario, SourceFile};
use kuota::telemetry::{Observer, observed};

const COHORTS: u32 = 10;
const QUEUES_PER_COHORT: u32 = 100;

/// Kueue's large-scale generator shape with 50 workloads per queue
/// (33 small, 12 medium, 5 large): 1,000 queues × 50 = 50,000 workloads.
pub fn large_scale_yaml() -> String {
    generator_yaml(33, 12, 5)
}

/// The same shape with `small`, `medium` and `large` workloads per queue.
pub fn generator_yaml(small: u32, medium: u32, large: u32) -> String {
    format!(
        r#"
cohorts:
- className: cohort
  count: {COHORTS}
  queuesSets:
  - className: cq
    count: {QUEUES_PER_COHORT}
    nominalQuota: 20
    borrowingLimit: 100
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    workloadsSets:
    - count: {small}
      creationIntervalMs: 20
      workloads: [{{className: small, runtimeMs: 50, priority: 50, request: 1}}]
    - count: {medium}
      creationIntervalMs: 50
      workloads: [{{className: medium, runtimeMs: 100, priority: 100, request: 5}}]
    - count: {large}
      creationIntervalMs: 200
      workloads: [{{className: large, runtimeMs: 200, priority: 200, request: 20}}]
"#
    )
}

pub fn plan(name: &str, yaml: String) -> Plan {
    let scenario = Scenario {
        name: name.into(),
        manifests: vec![],
        generator: Some(SourceFile::new("generator.yaml", yaml)),
    };
    // The config above is fixed and valid; failing here is a bug in the generator.
    scenario.plan(1).expect("benchmark scenario plans")
}

/// An engine holding the cluster and every workload of `plan` as pending.
pub fn pending_engine(plan: &Plan) -> Engine {
    observed_pending_engine(plan, None)
}

/// [`pending_engine`], every event also shown to `observer` (through the shells' feed).
pub fn observed_pending_engine(plan: &Plan, mut observer: Option<&mut Observer>) -> Engine {
    let mut engine = Engine::default();
    for (what, ev) in &plan.setup {
        let (r, _) = observed::apply(
            &mut engine,
            observer.as_deref_mut(),
            SIM_EPOCH_MS,
            ev.clone(),
        );
        if let Err(e) = r {
            panic!("benchmark setup: {what}: {e}");
        }
    }
    for w in &plan.workloads {
        let at = SIM_EPOCH_MS + w.arrival;
        let mut obj = w.object.clone();
        set_creation_time(&mut obj, at);
        let ev = Event::WorkloadUpserted(obj);
        if let Err(e) = observed::apply(&mut engine, observer.as_deref_mut(), at, ev).0 {
            panic!("benchmark setup: {}: {e}", w.key);
        }
    }
    engine
}
