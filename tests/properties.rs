//! Property tests: random quota trees and workload streams must never break the quota
//! invariants a Kueue user relies on.

use kuota::api;
use kuota::engine::{
    ClusterQueueReport, Decision, Engine, EngineConfig, Event, WorkloadKey, WorkloadState,
};
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

const FLAVOR: &str = "f";
const NS: &str = "ns";

#[derive(Debug, Clone)]
struct CqGen {
    cohort: Option<usize>,
    nominal: i64,
    borrowing: Option<i64>,
    lending: Option<i64>,
    preempt: bool,
}

#[derive(Debug, Clone)]
struct Tree {
    /// Parent of each cohort; always an earlier index, so no cycles.
    cohort_parent: Vec<Option<usize>>,
    cohort_quota: Vec<i64>,
    cqs: Vec<CqGen>,
}

impl Tree {
    fn cq_name(i: usize) -> String {
        format!("cq-{i}")
    }

    fn root_of(&self, mut c: usize) -> usize {
        while let Some(p) = self.cohort_parent[c] {
            c = p;
        }
        c
    }

    /// What a CQ keeps for itself (nominal minus what it lends) and what it lends, in milli.
    fn guaranteed_and_lendable(&self, i: usize) -> (i64, i64) {
        let cq = &self.cqs[i];
        if cq.cohort.is_none() {
            return (cq.nominal * 1000, 0);
        }
        let lend = cq.lending.unwrap_or(cq.nominal).min(cq.nominal);
        ((cq.nominal - lend) * 1000, lend * 1000)
    }

    fn events(&self) -> Vec<Event> {
        let mut evs = vec![Event::ResourceFlavorUpserted(from_json(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}
        })))];
        for (i, parent) in self.cohort_parent.iter().enumerate() {
            let mut spec = json!({});
            if let Some(p) = parent {
                spec["parentName"] = json!(format!("co-{p}"));
            }
            if self.cohort_quota[i] > 0 {
                spec["resourceGroups"] = json!([{"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [
                    {"name": "cpu", "nominalQuota": self.cohort_quota[i].to_string()}]}]}]);
            }
            evs.push(Event::CohortUpserted(from_json(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": format!("co-{i}")}, "spec": spec
            }))));
        }
        for (i, cq) in self.cqs.iter().enumerate() {
            let mut quota = json!({"name": "cpu", "nominalQuota": cq.nominal.to_string()});
            let mut spec = json!({"namespaceSelector": {}});
            if let Some(c) = cq.cohort {
                spec["cohortName"] = json!(format!("co-{c}"));
                if let Some(b) = cq.borrowing {
                    quota["borrowingLimit"] = json!(b.to_string());
                }
                if let Some(l) = cq.lending {
                    quota["lendingLimit"] = json!(l.min(cq.nominal).to_string());
                }
            }
            if cq.preempt {
                spec["preemption"] =
                    json!({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"});
            }
            spec["resourceGroups"] = json!([{"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [quota]}]}]);
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
}

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("test manifest does not parse: {e}\n{v}"))
}

fn workload(name: &str, cq: usize, pods: i32, cpu: i64, priority: i32) -> api::Workload {
    from_json(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": NS, "name": name},
        "spec": {"queueName": format!("lq-{cq}"), "priority": priority, "podSets": [{"name": "main", "count": pods,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu.to_string()}}}]}}}]}
    }))
}

fn tree() -> impl Strategy<Value = Tree> {
    (1usize..=3, 1usize..=6).prop_flat_map(|(n_cohorts, n_cqs)| {
        let parents = (0..n_cohorts)
            .map(|i| {
                if i == 0 {
                    Just(None).boxed()
                } else {
                    prop::option::weighted(0.6, 0..i).boxed()
                }
            })
            .collect::<Vec<_>>();
        let quotas = prop::collection::vec(prop_oneof![3 => Just(0i64), 1 => 1i64..=4], n_cohorts);
        let cq = (
            prop::option::weighted(0.85, 0..n_cohorts),
            0i64..=8,
            prop::option::weighted(0.4, 0i64..=6),
            prop::option::weighted(0.4, 0i64..=8),
            prop::bool::weighted(0.5),
        )
            .prop_map(|(cohort, nominal, borrowing, lending, preempt)| CqGen {
                cohort,
                nominal,
                borrowing,
                lending,
                preempt,
            });
        (parents, quotas, prop::collection::vec(cq, n_cqs)).prop_map(
            |(cohort_parent, cohort_quota, cqs)| Tree {
                cohort_parent,
                cohort_quota,
                cqs,
            },
        )
    })
}

#[derive(Debug, Clone)]
enum Op {
    Submit {
        cq: usize,
        pods: i32,
        cpu: i64,
        priority: i32,
    },
    Finish(usize),
    Schedule,
    CompleteEvictions,
}

fn ops(n_cqs: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (0..n_cqs, 1i32..=3, 1i64..=4, 0i32..=2).prop_map(|(cq, pods, cpu, priority)| Op::Submit { cq, pods, cpu, priority }),
        2 => any::<usize>().prop_map(Op::Finish),
        3 => Just(Op::Schedule),
        1 => Just(Op::CompleteEvictions),
    ];
    prop::collection::vec(op, 1..40)
}

/// Drives an engine and checks the invariants after every step.
struct Sim {
    tree: Tree,
    engine: Engine,
    now: i64,
    keys: Vec<WorkloadKey>,
    submitted: usize,
}

impl Sim {
    fn new(tree: Tree) -> Self {
        let mut engine = Engine::new(EngineConfig::default());
        for ev in tree.events() {
            engine.apply(0, ev).expect("generated objects are valid");
        }
        Sim {
            tree,
            engine,
            now: 0,
            keys: Vec::new(),
            submitted: 0,
        }
    }

    fn state(&self, k: &WorkloadKey) -> WorkloadState {
        self.engine
            .workload_state(k)
            .unwrap_or_else(|| panic!("{k} vanished"))
    }

    fn holding(&self, k: &WorkloadKey) -> bool {
        matches!(
            self.state(k),
            WorkloadState::Admitted { .. } | WorkloadState::Evicting { .. }
        )
    }

    fn submit(&mut self, cq: usize, pods: i32, cpu: i64, priority: i32) -> WorkloadKey {
        self.now += 10;
        self.submitted += 1;
        let name = format!("w{}", self.submitted);
        self.engine
            .apply(
                self.now,
                Event::WorkloadUpserted(workload(&name, cq, pods, cpu, priority)),
            )
            .expect("valid workload");
        let key = WorkloadKey::new(NS, name);
        self.keys.push(key.clone());
        key
    }

    fn delete(&mut self, k: WorkloadKey) {
        self.engine
            .apply(self.now, Event::WorkloadDeleted(k.clone()))
            .expect("delete a known workload");
        assert!(
            self.engine.workload_state(&k).is_none(),
            "{k} still known after deletion"
        );
        self.keys.retain(|x| *x != k);
    }

    /// One cycle; returns how many workloads were admitted or preempted.
    fn schedule(&mut self) -> Result<usize, TestCaseError> {
        self.now += 10;
        let before: Vec<bool> = self.keys.iter().map(|k| self.holding(k)).collect();
        let mut changes = 0;
        for d in self.engine.schedule(self.now) {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                } => {
                    changes += 1;
                    let i = self
                        .keys
                        .iter()
                        .position(|k| *k == workload)
                        .expect("admitted workload is known");
                    prop_assert!(
                        !before[i],
                        "{workload} admitted while it already held quota"
                    );
                    let now = self.state(&workload);
                    prop_assert!(
                        matches!(now, WorkloadState::Admitted { .. }),
                        "Admit for {} but after the cycle it is {:?}",
                        workload,
                        now
                    );
                    prop_assert!(admission.cluster_queue.starts_with("cq-"));
                }
                Decision::Preempt { .. } | Decision::Evict { .. } => changes += 1,
                Decision::Pending { .. } => {}
            }
        }
        self.check()?;
        Ok(changes)
    }

    fn complete_evictions(&mut self) {
        for k in self.keys.clone() {
            if matches!(self.state(&k), WorkloadState::Evicting { .. }) {
                self.engine
                    .apply(self.now, Event::WorkloadEvicted(k))
                    .expect("evicted workload is known");
            }
        }
    }

    fn reports(&self) -> BTreeMap<String, ClusterQueueReport> {
        (0..self.tree.cqs.len())
            .map(|i| {
                let name = Tree::cq_name(i);
                let r = self
                    .engine
                    .cluster_queue_report(&name)
                    .unwrap_or_else(|| panic!("no report for {name}"));
                (name, r)
            })
            .collect()
    }

    fn usage(r: &ClusterQueueReport) -> (i64, i64) {
        r.usage
            .get(&(FLAVOR.to_string(), "cpu".to_string()))
            .map(|u| (u.total, u.borrowed))
            .unwrap_or((0, 0))
    }

    /// (a) per-CQ limits, (b) per-tree capacity, and reported usage equals what the admitted
    /// (or still evicting) workloads hold.
    fn check(&self) -> Result<(), TestCaseError> {
        let reports = self.reports();
        let mut pool_used: BTreeMap<usize, i64> = BTreeMap::new();
        let mut used_by_root: BTreeMap<usize, i64> = BTreeMap::new();
        for (i, cq) in self.tree.cqs.iter().enumerate() {
            let (total, borrowed) = Self::usage(&reports[&Tree::cq_name(i)]);
            let nominal = cq.nominal * 1000;
            prop_assert_eq!(
                borrowed,
                (total - nominal).max(0),
                "cq-{} borrowed is usage above nominal",
                i
            );
            match cq.cohort {
                None => prop_assert!(
                    total <= nominal,
                    "cq-{i} has no cohort: {total} > nominal {nominal}"
                ),
                Some(c) => {
                    if let Some(b) = cq.borrowing {
                        prop_assert!(
                            total <= nominal + b * 1000,
                            "cq-{i}: {total} > nominal {nominal} + borrowingLimit {b}"
                        );
                    }
                    let (guaranteed, _) = self.tree.guaranteed_and_lendable(i);
                    let root = self.tree.root_of(c);
                    *pool_used.entry(root).or_default() += (total - guaranteed).max(0);
                    *used_by_root.entry(root).or_default() += total;
                }
            }
        }
        for (root, used) in &pool_used {
            let mut capacity = 0;
            let mut nominal = 0;
            for (i, cq) in self.tree.cqs.iter().enumerate() {
                if cq.cohort.is_some_and(|c| self.tree.root_of(c) == *root) {
                    capacity += self.tree.guaranteed_and_lendable(i).1;
                    nominal += cq.nominal * 1000;
                }
            }
            for c in (0..self.tree.cohort_parent.len()).filter(|c| self.tree.root_of(*c) == *root) {
                capacity += self.tree.cohort_quota[c] * 1000;
                nominal += self.tree.cohort_quota[c] * 1000;
            }
            prop_assert!(
                *used <= capacity,
                "tree co-{root}: borrowed from the shared pool {used} > lendable {capacity}"
            );
            prop_assert!(
                used_by_root[root] <= nominal,
                "tree co-{root}: usage {} > capacity {nominal}",
                used_by_root[root]
            );
        }
        // Reported usage is exactly what the workloads holding quota were admitted with.
        let mut held: BTreeMap<String, i64> = BTreeMap::new();
        for k in &self.keys {
            if let WorkloadState::Admitted { admission } | WorkloadState::Evicting { admission } =
                self.state(k)
            {
                for psa in &admission.pod_set_assignments {
                    let cpu = psa
                        .resource_usage
                        .get("cpu")
                        .map(|q| api::quantity::parse_milli(q).expect("valid usage"))
                        .unwrap_or(0);
                    *held.entry(admission.cluster_queue.clone()).or_default() += cpu;
                }
            }
        }
        for (name, r) in &reports {
            let held = held.get(name).copied().unwrap_or(0);
            prop_assert_eq!(
                Self::usage(r).0,
                held,
                "{} reports usage that its workloads do not hold",
                name
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// (a) usage <= nominal + borrowingLimit per CQ, (b) no tree uses more than it has or
    /// borrows another queue's guaranteed (non-lendable) quota, (c) no double admission,
    /// (e) without new events the system settles.
    #[test]
    fn quota_invariants_hold_under_random_streams((tree, ops) in tree().prop_flat_map(|t| { let n = t.cqs.len(); (Just(t), ops(n)) })) {
        let mut sim = Sim::new(tree);
        for op in ops.into_iter().chain([Op::Schedule, Op::CompleteEvictions, Op::Schedule]) {
            match op {
                Op::Submit { cq, pods, cpu, priority } => { sim.submit(cq, pods, cpu, priority); }
                Op::Finish(n) => {
                    let admitted: Vec<WorkloadKey> = sim.keys.iter()
                        .filter(|k| matches!(sim.state(k), WorkloadState::Admitted { .. })).cloned().collect();
                    if !admitted.is_empty() {
                        let k = admitted[n % admitted.len()].clone();
                        sim.engine.apply(sim.now, Event::WorkloadFinished(k.clone())).expect("finish admitted");
                        prop_assert_eq!(sim.state(&k), WorkloadState::Finished);
                    }
                }
                Op::Schedule => _ = sim.schedule()?,
                Op::CompleteEvictions => sim.complete_evictions(),
            }
            sim.check()?;
        }
        // (e) With no new events, the system settles: evictions complete, preemptors get in,
        // and nobody is admitted or preempted forever (no ping-pong between workloads).
        let bound = 2 * sim.keys.len() + 4;
        let mut cycles = 0;
        loop {
            sim.complete_evictions();
            if sim.schedule()? == 0 {
                break;
            }
            cycles += 1;
            prop_assert!(cycles <= bound, "still admitting or preempting after {} quiet cycles", bound);
        }
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
            sim.submit(cq % n, pods, cpu, 0);
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
        let first = sim.submit(cq % n, pods, cpu, 0);
        sim.schedule()?;
        let admitted = matches!(sim.state(&first), WorkloadState::Admitted { .. });
        if admitted {
            sim.engine.apply(sim.now, Event::WorkloadFinished(first.clone())).expect("finish the probe");
        } else {
            sim.delete(first.clone());
        }
        prop_assert_eq!(&sim.reports(), &before, "reports changed after the probe {} left (admitted: {})", first, admitted);

        let second = sim.submit(cq % n, pods, cpu, 0);
        sim.schedule()?;
        let again = matches!(sim.state(&second), WorkloadState::Admitted { .. });
        prop_assert_eq!(again, admitted, "identical workload admitted: first {}, second {}", admitted, again);
    }
}
