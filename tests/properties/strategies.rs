//! The generated side of the property tests: quota trees (cohorts, ClusterQueues,
//! flavors) as engine events, workload streams as operations, and their proptest strategies.

use kuota::api;
use kuota::engine::{EngineConfig, Event, FairPreemptionStrategy};
use proptest::prelude::*;
use serde_json::json;

/// The namespace of every generated LocalQueue and workload.
pub const NS: &str = "ns";
/// Resources a generated tree may cover; the first `n_resources` are used.
const RESOURCES: [&str; 2] = ["cpu", "example.com/gpu"];

/// Quota of one (flavor, resource) in a ClusterQueue, in whole units.
#[derive(Debug, Clone)]
pub struct QuotaGen {
    pub nominal: i64,
    pub borrowing: Option<i64>,
    pub lending: Option<i64>,
}

/// One ClusterQueue of a generated tree.
#[derive(Debug, Clone)]
pub struct CqGen {
    pub cohort: Option<usize>,
    /// Per flavor, per resource (flavor-major), `n_flavors * n_resources` entries.
    pub quotas: Vec<QuotaGen>,
    pub preempt: bool,
    /// `spec.fairSharing.weight` (used when the tree enables fair sharing).
    pub weight: Option<u32>,
}

/// A generated quota tree: cohorts (possibly nested), ClusterQueues and engine config.
#[derive(Debug, Clone)]
pub struct Tree {
    pub n_flavors: usize,
    pub n_resources: usize,
    /// Parent of each cohort; always an earlier index, so no cycles.
    pub cohort_parent: Vec<Option<usize>>,
    /// Per cohort, per (flavor, resource): its own nominal quota.
    pub cohort_quota: Vec<Vec<i64>>,
    pub cohort_weight: Vec<Option<u32>>,
    pub cqs: Vec<CqGen>,
    /// Fair sharing in the engine config (Kueue's `fairSharing.enable`).
    pub fair_sharing: bool,
    /// kuota's preemption protection (`preemptionMinRuntime`), in ms; 0 = off.
    pub min_runtime: i64,
}

impl Tree {
    pub fn cq_name(i: usize) -> String {
        format!("cq-{i}")
    }

    fn flavor(f: usize) -> String {
        format!("f{f}")
    }

    /// The (flavor, resource) pairs, in `quotas` order.
    pub fn frs(&self) -> Vec<(String, String)> {
        (0..self.n_flavors)
            .flat_map(|f| {
                (0..self.n_resources).map(move |r| (Self::flavor(f), RESOURCES[r].to_string()))
            })
            .collect()
    }

    /// Whether cohort `c` is `ancestor` or below it.
    pub fn under(&self, mut c: usize, ancestor: usize) -> bool {
        loop {
            if c == ancestor {
                return true;
            }
            match self.cohort_parent[c] {
                Some(p) => c = p,
                None => return false,
            }
        }
    }

    /// What a CQ keeps for itself (nominal minus what it lends) and what it lends, in
    /// the engine's units (Kueue's: milli for cpu, whole units otherwise), for
    /// (flavor, resource) index `fr`.
    pub fn guaranteed_and_lendable(&self, i: usize, fr: usize) -> (i64, i64) {
        let cq = &self.cqs[i];
        let q = &cq.quotas[fr];
        let unit = self.unit(fr);
        if cq.cohort.is_none() {
            return (q.nominal * unit, 0);
        }
        let lend = q.lending.unwrap_or(q.nominal).min(q.nominal);
        ((q.nominal - lend) * unit, lend * unit)
    }

    /// One whole unit of (flavor, resource) index `fr` in the engine's units.
    pub fn unit(&self, fr: usize) -> i64 {
        if fr.is_multiple_of(self.n_resources) {
            1000
        } else {
            1
        }
    }

    fn resource_groups(
        &self,
        quota: impl Fn(usize) -> Option<serde_json::Value>,
    ) -> serde_json::Value {
        let covered: Vec<&str> = RESOURCES[..self.n_resources].to_vec();
        let flavors: Vec<serde_json::Value> = (0..self.n_flavors)
            .map(|f| {
                let resources: Vec<serde_json::Value> = (0..self.n_resources)
                    .map(|r| {
                        quota(f * self.n_resources + r)
                            .unwrap_or_else(|| json!({"name": RESOURCES[r], "nominalQuota": "0"}))
                    })
                    .collect();
                json!({"name": Self::flavor(f), "resources": resources})
            })
            .collect();
        json!([{"coveredResources": covered, "flavors": flavors}])
    }

    pub fn events(&self) -> Vec<Event> {
        let mut evs: Vec<Event> = (0..self.n_flavors)
            .map(|f| {
                Event::ResourceFlavorUpserted(from_json(json!({
                    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                    "metadata": {"name": Self::flavor(f)}, "spec": {}
                })))
            })
            .collect();
        for (i, parent) in self.cohort_parent.iter().enumerate() {
            let mut spec = json!({});
            if let Some(p) = parent {
                spec["parentName"] = json!(format!("co-{p}"));
            }
            if self.cohort_quota[i].iter().any(|q| *q > 0) {
                let r = self.n_resources;
                spec["resourceGroups"] = self.resource_groups(|fr| {
                    Some(json!({"name": RESOURCES[fr % r], "nominalQuota": self.cohort_quota[i][fr].to_string()}))
                });
            }
            if let Some(w) = self.cohort_weight[i] {
                spec["fairSharing"] = json!({"weight": w.to_string()});
            }
            evs.push(Event::CohortUpserted(from_json(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": format!("co-{i}")}, "spec": spec
            }))));
        }
        for (i, cq) in self.cqs.iter().enumerate() {
            let mut spec = json!({"namespaceSelector": {}});
            let r = self.n_resources;
            spec["resourceGroups"] = self.resource_groups(|fr| {
                let q = &cq.quotas[fr];
                let mut quota =
                    json!({"name": RESOURCES[fr % r], "nominalQuota": q.nominal.to_string()});
                if cq.cohort.is_some() {
                    if let Some(b) = q.borrowing {
                        quota["borrowingLimit"] = json!(b.to_string());
                    }
                    if let Some(l) = q.lending {
                        quota["lendingLimit"] = json!(l.min(q.nominal).to_string());
                    }
                }
                Some(quota)
            });
            if let Some(c) = cq.cohort {
                spec["cohortName"] = json!(format!("co-{c}"));
            }
            if cq.preempt {
                spec["preemption"] =
                    json!({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"});
            }
            if let Some(w) = cq.weight {
                spec["fairSharing"] = json!({"weight": w.to_string()});
            }
            evs.push(Event::ClusterQueueUpserted(from_json(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": Self::cq_name(i)}, "spec": spec
            }))));
            evs.push(Event::LocalQueueUpserted(from_json(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"namespace": NS, "name": format!("lq-{i}")}, "spec": {"clusterQueue": Self::cq_name(i)}
            }))));
        }
        evs
    }

    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            fair_sharing: self.fair_sharing.then(|| {
                vec![
                    FairPreemptionStrategy::LessThanOrEqualToFinalShare,
                    FairPreemptionStrategy::LessThanInitialShare,
                ]
            }),
            preemption_min_runtime: self.min_runtime,
            ..EngineConfig::default()
        }
    }
}

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("test manifest does not parse: {e}\n{v}"))
}

/// A Workload of `pods` pods with per-pod requests, queued to `lq-<cq>`.
pub fn workload(
    name: &str,
    cq: usize,
    pods: i32,
    cpu: i64,
    gpu: i64,
    priority: i32,
) -> api::Workload {
    let mut requests = json!({"cpu": cpu.to_string()});
    if gpu > 0 {
        requests[RESOURCES[1]] = json!(gpu.to_string());
    }
    from_json(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": NS, "name": name},
        "spec": {"queueName": format!("lq-{cq}"), "priority": priority, "podSets": [{"name": "main", "count": pods,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}}]}
    }))
}

fn quota() -> impl Strategy<Value = QuotaGen> {
    (
        0i64..=8,
        prop::option::weighted(0.4, 0i64..=6),
        prop::option::weighted(0.4, 0i64..=8),
    )
        .prop_map(|(nominal, borrowing, lending)| QuotaGen {
            nominal,
            borrowing,
            lending,
        })
}

/// Trees of 1-3 cohorts, 1-6 ClusterQueues, 1-2 flavors and 1-2 resources.
pub fn tree() -> impl Strategy<Value = Tree> {
    (1usize..=3, 1usize..=6, 1usize..=2, 1usize..=2).prop_flat_map(
        |(n_cohorts, n_cqs, n_flavors, n_resources)| {
            let frs = n_flavors * n_resources;
            let parents = (0..n_cohorts)
                .map(|i| {
                    if i == 0 {
                        Just(None).boxed()
                    } else {
                        prop::option::weighted(0.6, 0..i).boxed()
                    }
                })
                .collect::<Vec<_>>();
            let cohort_quota = prop::collection::vec(
                prop::collection::vec(prop_oneof![3 => Just(0i64), 1 => 1i64..=4], frs),
                n_cohorts,
            );
            let weight = || prop::option::weighted(0.5, 0u32..=3);
            let cq = (
                prop::option::weighted(0.85, 0..n_cohorts),
                prop::collection::vec(quota(), frs),
                prop::bool::weighted(0.5),
                weight(),
            )
                .prop_map(|(cohort, quotas, preempt, weight)| CqGen {
                    cohort,
                    quotas,
                    preempt,
                    weight,
                });
            (
                parents,
                cohort_quota,
                prop::collection::vec(weight(), n_cohorts),
                prop::collection::vec(cq, n_cqs),
                prop::bool::weighted(0.4),
                prop_oneof![2 => Just(0i64), 1 => 15i64..=60],
            )
                .prop_map(
                    move |(
                        cohort_parent,
                        cohort_quota,
                        cohort_weight,
                        cqs,
                        fair_sharing,
                        min_runtime,
                    )| Tree {
                        n_flavors,
                        n_resources,
                        cohort_parent,
                        cohort_quota,
                        cohort_weight,
                        cqs,
                        fair_sharing,
                        min_runtime,
                    },
                )
        },
    )
}

/// One step of a generated workload stream.
#[derive(Debug, Clone)]
pub enum Op {
    Submit {
        cq: usize,
        pods: i32,
        cpu: i64,
        gpu: i64,
        priority: i32,
    },
    Finish(usize),
    Schedule,
    CompleteEvictions,
}

/// Streams of 1-39 operations over `n_cqs` ClusterQueues.
pub fn ops(n_cqs: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (0..n_cqs, 1i32..=3, 1i64..=4, prop_oneof![2 => Just(0i64), 1 => 1i64..=2], 0i32..=2)
            .prop_map(|(cq, pods, cpu, gpu, priority)| Op::Submit { cq, pods, cpu, gpu, priority }),
        2 => any::<usize>().prop_map(Op::Finish),
        3 => Just(Op::Schedule),
        1 => Just(Op::CompleteEvictions),
    ];
    prop::collection::vec(op, 1..40)
}
