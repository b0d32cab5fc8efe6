//! The simulation the property tests drive: an engine fed a generated tree and stream,
//! with the quota invariants checked after every step.

use crate::strategies::{NS, Op, Tree, workload};
use kuota::api;
use kuota::engine::{ClusterQueueReport, Decision, Engine, Event, WorkloadKey, WorkloadState};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Drives an engine and checks the invariants after every step.
pub struct Sim {
    pub tree: Tree,
    pub engine: Engine,
    pub now: i64,
    pub keys: Vec<WorkloadKey>,
    submitted: usize,
    /// Every admission so far: workload and its flavors per resource.
    admits: Vec<(WorkloadKey, BTreeMap<String, String>)>,
}

impl Sim {
    pub fn new(tree: Tree) -> Self {
        let mut engine = Engine::new(tree.engine_config());
        for ev in tree.events() {
            engine.apply(0, ev).expect("generated objects are valid");
        }
        Sim {
            tree,
            engine,
            now: 0,
            keys: Vec::new(),
            submitted: 0,
            admits: Vec::new(),
        }
    }

    pub fn state(&self, k: &WorkloadKey) -> WorkloadState {
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

    pub fn submit(
        &mut self,
        cq: usize,
        pods: i32,
        cpu: i64,
        gpu: i64,
        priority: i32,
    ) -> WorkloadKey {
        self.now += 10;
        self.submitted += 1;
        let name = format!("w{}", self.submitted);
        self.engine
            .apply(
                self.now,
                Event::WorkloadUpserted(workload(&name, cq, pods, cpu, gpu, priority)),
            )
            .expect("valid workload");
        let key = WorkloadKey::new(NS, name);
        self.keys.push(key.clone());
        key
    }

    pub fn delete(&mut self, k: WorkloadKey) {
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
    pub fn schedule(&mut self) -> Result<usize, TestCaseError> {
        self.now += 10;
        let before: Vec<bool> = self.keys.iter().map(|k| self.holding(k)).collect();
        let mut changes = 0;
        for d in self.engine.schedule(self.now) {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                    ..
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
                    let flavors = admission
                        .pod_set_assignments
                        .iter()
                        .flat_map(|psa| psa.flavors.clone())
                        .collect();
                    self.admits.push((workload.clone(), flavors));
                }
                Decision::Preempt { .. } | Decision::Evict { .. } => changes += 1,
                Decision::Pending { .. } | Decision::RequeueState { .. } => {}
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

    pub fn reports(&self) -> BTreeMap<String, ClusterQueueReport> {
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

    fn usage(r: &ClusterQueueReport, fr: &(String, String)) -> (i64, i64) {
        r.usage
            .get(fr)
            .map(|u| (u.total, u.borrowed))
            .unwrap_or((0, 0))
    }

    /// Per (flavor, resource): (a) per-CQ limits, (b) per cohort subtree and per tree
    /// capacity, and reported usage equals what the admitted (or still evicting)
    /// workloads hold.
    fn check(&self) -> Result<(), TestCaseError> {
        let reports = self.reports();
        for (fi, fr) in self.tree.frs().iter().enumerate() {
            self.check_fr(&reports, fi, fr)?;
        }
        self.check_held(&reports)
    }

    fn check_fr(
        &self,
        reports: &BTreeMap<String, ClusterQueueReport>,
        fi: usize,
        fr: &(String, String),
    ) -> Result<(), TestCaseError> {
        let t = &self.tree;
        let total_of = |i: usize| Self::usage(&reports[&Tree::cq_name(i)], fr).0;
        for (i, cq) in t.cqs.iter().enumerate() {
            let (total, borrowed) = Self::usage(&reports[&Tree::cq_name(i)], fr);
            let q = &cq.quotas[fi];
            let unit = t.unit(fi);
            let nominal = q.nominal * unit;
            prop_assert_eq!(
                borrowed,
                (total - nominal).max(0),
                "cq-{} {:?}: borrowed is usage above nominal",
                i,
                fr
            );
            match (cq.cohort, q.borrowing) {
                (None, _) => prop_assert!(
                    total <= nominal,
                    "cq-{i} {fr:?} has no cohort: {total} > nominal {nominal}"
                ),
                (Some(_), Some(b)) => prop_assert!(
                    total <= nominal + b * unit,
                    "cq-{i} {fr:?}: {total} > nominal {nominal} + borrowingLimit {b}"
                ),
                (Some(_), None) => {}
            }
        }
        let in_cohort = |i: usize, c: usize| t.cqs[i].cohort.is_some_and(|x| t.under(x, c));
        for root in (0..t.cohort_parent.len()).filter(|c| t.cohort_parent[*c].is_none()) {
            // What the tree can lend: every member's lendable part and every cohort's quota.
            let members: Vec<usize> = (0..t.cqs.len()).filter(|&i| in_cohort(i, root)).collect();
            let cohort_quota: i64 = (0..t.cohort_parent.len())
                .filter(|&c| t.under(c, root))
                .map(|c| t.cohort_quota[c][fi] * t.unit(fi))
                .sum();
            let pool: i64 = members
                .iter()
                .map(|&i| t.guaranteed_and_lendable(i, fi).1)
                .sum::<i64>()
                + cohort_quota;
            let borrowed_from_pool: i64 = members
                .iter()
                .map(|&i| (total_of(i) - t.guaranteed_and_lendable(i, fi).0).max(0))
                .sum();
            prop_assert!(
                borrowed_from_pool <= pool,
                "tree co-{root} {fr:?}: used beyond guaranteed quota {borrowed_from_pool} > lendable {pool}"
            );
            // Every cohort subtree: its members use at most their own guaranteed quota
            // plus what the whole tree can lend; never another member's guaranteed part.
            for c in (0..t.cohort_parent.len()).filter(|&c| t.under(c, root)) {
                let sub: Vec<usize> = members
                    .iter()
                    .copied()
                    .filter(|&i| in_cohort(i, c))
                    .collect();
                let used: i64 = sub.iter().map(|&i| total_of(i)).sum();
                let guaranteed: i64 = sub
                    .iter()
                    .map(|&i| t.guaranteed_and_lendable(i, fi).0)
                    .sum();
                prop_assert!(
                    used <= guaranteed + pool,
                    "subtree co-{c} {fr:?}: usage {used} > guaranteed {guaranteed} + lendable {pool}"
                );
            }
        }
        Ok(())
    }

    /// Reported usage is exactly what the workloads holding quota were admitted with.
    fn check_held(
        &self,
        reports: &BTreeMap<String, ClusterQueueReport>,
    ) -> Result<(), TestCaseError> {
        let mut held: BTreeMap<(String, (String, String)), i64> = BTreeMap::new();
        for k in &self.keys {
            if let WorkloadState::Admitted { admission } | WorkloadState::Evicting { admission } =
                self.state(k)
            {
                for psa in &admission.pod_set_assignments {
                    for (res, q) in &psa.resource_usage {
                        let amount = api::quantity::parse_milli(q).expect("valid usage");
                        let flavor = psa.flavors.get(res).cloned().unwrap_or_default();
                        *held
                            .entry((admission.cluster_queue.clone(), (flavor, res.clone())))
                            .or_default() += amount;
                    }
                }
            }
        }
        for (name, r) in reports {
            for fr in self.tree.frs() {
                let want = held.get(&(name.clone(), fr.clone())).copied().unwrap_or(0);
                // Usage is in milli; the engine counts cpu in milli, others in whole units.
                let want = if fr.1 == "cpu" { want } else { want / 1000 };
                let got = Self::usage(r, &fr).0;
                prop_assert_eq!(
                    got,
                    want,
                    "{} {:?} reports usage that its workloads do not hold",
                    name,
                    fr
                );
            }
        }
        Ok(())
    }
}

/// Runs `ops` against `tree`, checking the quota invariants after every step; with
/// `settles`, also that the quiet system settles without ping-pong.
pub fn run_stream(tree: Tree, ops: Vec<Op>, settles: bool) -> Result<(), TestCaseError> {
    let mut sim = Sim::new(tree);
    for op in ops
        .into_iter()
        .chain([Op::Schedule, Op::CompleteEvictions, Op::Schedule])
    {
        match op {
            Op::Submit {
                cq,
                pods,
                cpu,
                gpu,
                priority,
            } => {
                // A gpu request only where the tree covers the resource.
                let gpu = if sim.tree.n_resources > 1 { gpu } else { 0 };
                sim.submit(cq, pods, cpu, gpu, priority);
            }
            Op::Finish(n) => {
                let admitted: Vec<WorkloadKey> = sim
                    .keys
                    .iter()
                    .filter(|k| matches!(sim.state(k), WorkloadState::Admitted { .. }))
                    .cloned()
                    .collect();
                if !admitted.is_empty() {
                    let k = admitted[n % admitted.len()].clone();
                    sim.engine
                        .apply(sim.now, Event::WorkloadFinished(k.clone()))
                        .expect("finish admitted");
                    prop_assert_eq!(sim.state(&k), WorkloadState::Finished);
                }
            }
            Op::Schedule => _ = sim.schedule()?,
            Op::CompleteEvictions => sim.complete_evictions(),
        }
        sim.check()?;
    }
    if !settles {
        return Ok(());
    }
    // (e) With no new events, the system settles: evictions complete, preemptors get in,
    // and nobody is admitted or preempted forever (no ping-pong between workloads).
    // Preemption protection ends for everyone first, so a quiet cycle means settled.
    sim.now += sim.tree.min_runtime;
    sim.admits.clear();
    let bound = 2 * sim.keys.len() + 4;
    let mut cycles = 0;
    loop {
        sim.complete_evictions();
        if sim.schedule()? == 0 {
            break;
        }
        cycles += 1;
        prop_assert!(
            cycles <= bound,
            "still admitting or preempting after {} quiet cycles",
            bound
        );
    }
    // No ping-pong: with nothing else changing, no workload is admitted, preempted
    // and admitted again the same way.
    let mut seen = std::collections::BTreeSet::new();
    for a in &sim.admits {
        prop_assert!(
            seen.insert(a.clone()),
            "{} admitted twice with {:?} while nothing else changed",
            a.0,
            a.1
        );
    }
    Ok(())
}
