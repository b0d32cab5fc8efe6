//! The run's side of `sim::provisioning`: the ClusterQueues' ProvisioningRequest checks
//! played (each admission waits for its nodes) or taken out (an always-up pool), and
//! what either costs.

use std::collections::BTreeSet;

use super::Simulation;
use crate::engine::{Event, Millis};
use crate::sim::provisioning::{self, Tally};
use crate::sim::report::ProvisioningStats;
use crate::sim::rng::SplitMix64;

/// The simulated autoscaler's state over a run.
pub(super) struct Provisioning {
    /// Draws the node delays (seeded apart from the other draws).
    rng: SplitMix64,
    tally: Tally,
    /// ClusterQueues whose checks were taken out: they run on an always-up pool.
    static_pool: BTreeSet<String>,
    /// GPU-ms their finished workloads used.
    static_used_gpu_ms: f64,
    /// Pods per workload (each on a node of its own), by plan index: kept here because a
    /// run may own the workload objects and hand them to the engine on arrival.
    pods: Vec<u32>,
}

impl Provisioning {
    pub(super) fn new<'w>(
        seed: u64,
        workloads: impl Iterator<Item = &'w crate::api::Workload>,
    ) -> Self {
        Self {
            rng: SplitMix64::new(seed ^ 0x7072_6f76_6973_696f),
            tally: Tally::default(),
            static_pool: BTreeSet::new(),
            static_used_gpu_ms: 0.0,
            pods: workloads.map(pod_count).collect(),
        }
    }

    /// The pod counts of `workloads`, when the run takes them over.
    pub(super) fn count_pods(&mut self, workloads: &[crate::api::Workload]) {
        self.pods = workloads.iter().map(pod_count).collect();
    }
}

fn pod_count(w: &crate::api::Workload) -> u32 {
    let pods: i64 = w
        .spec
        .pod_sets
        .iter()
        .map(|p| i64::from(p.count.max(0)))
        .sum();
    u32::try_from(pods).unwrap_or(u32::MAX)
}

impl Simulation<'_> {
    /// A setup event as this run applies it: with provisioning off, a ClusterQueue loses
    /// its ProvisioningRequest checks and is remembered as running on a static pool.
    pub(super) fn without_provisioning(&mut self, ev: &Event) -> Event {
        let Event::ClusterQueueUpserted(cq) = ev else {
            return ev.clone();
        };
        if self.cfg.provisioning || self.plan.provisioning.is_empty() {
            return ev.clone();
        }
        let mut cq = cq.clone();
        let Some(strategy) = cq.spec.admission_checks_strategy.as_mut() else {
            return Event::ClusterQueueUpserted(cq);
        };
        let before = strategy.admission_checks.len();
        let played = &self.plan.provisioning;
        strategy
            .admission_checks
            .retain(|r| !played.contains_key(&r.name));
        if strategy.admission_checks.len() != before {
            let name = cq.metadata.name.clone().unwrap_or_default();
            self.provisioning.static_pool.insert(name);
        }
        Event::ClusterQueueUpserted(cq)
    }

    /// How long workload `i`, reserved with `checks`, waits for its nodes: the longest of
    /// its played checks' waits (0 without one).
    pub(super) fn provisioning_wait(&mut self, i: usize, checks: &[String]) -> Millis {
        let w = &self.plan.workloads[i];
        let pods = self.provisioning.pods.get(i).copied().unwrap_or(1);
        let gpus = w
            .total_requests
            .get(super::gpu::GPU_RESOURCE)
            .copied()
            .unwrap_or(0);
        let per_pod = if pods > 0 {
            gpus as f64 / f64::from(pods)
        } else {
            0.0
        };
        let mut wait = 0;
        for delay in checks.iter().filter_map(|c| self.plan.provisioning.get(c)) {
            let p = &mut self.provisioning;
            wait = wait.max(provisioning::wait(
                delay,
                pods,
                per_pod,
                &mut p.rng,
                &mut p.tally,
            ));
        }
        wait
    }

    /// Workload `wl` finished: on a static pool, its GPU time counts as used.
    pub(super) fn used_static_pool(&mut self, wl: usize) {
        let w = &self.plan.workloads[wl];
        if !self.provisioning.static_pool.contains(&w.cluster_queue) {
            return;
        }
        let gpus = w
            .total_requests
            .get(super::gpu::GPU_RESOURCE)
            .copied()
            .unwrap_or(0);
        self.provisioning.static_used_gpu_ms += gpus as f64 * w.runtime as f64;
    }

    /// What provisioning cost over the run (`None` when the scenario plays no check).
    pub(super) fn provisioning_stats(&self, makespan: Millis) -> Option<ProvisioningStats> {
        if self.plan.provisioning.is_empty() {
            return None;
        }
        let t = &self.provisioning.tally;
        if self.cfg.provisioning {
            return Some(ProvisioningStats {
                mode: "provisioned".into(),
                waits: t.waits,
                mean_wait_ms: (t.waits > 0).then(|| t.wait_ms / t.waits as i64),
                idle_gpu_hours: t.idle_gpu_hours,
            });
        }
        let pool_gpus: i64 = self
            .provisioning
            .static_pool
            .iter()
            .filter_map(|cq| self.plan.cluster_queues.get(cq))
            .filter_map(|info| info.nominal.get(super::gpu::GPU_RESOURCE))
            .sum();
        let pool_ms = pool_gpus as f64 * makespan.max(0) as f64;
        Some(ProvisioningStats {
            mode: "static".into(),
            waits: 0,
            mean_wait_ms: None,
            idle_gpu_hours: (pool_ms - self.provisioning.static_used_gpu_ms).max(0.0) / 3_600_000.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::run::SimConfig;
    use crate::sim::{Scenario, SourceFile, simulate};

    /// 16 GPUs of quota behind a played check whose nodes take exactly 60 s; two gangs of
    /// 2 pods × 8 GPUs, each running 100 s, arriving at 1,000 s and 2,000 s.
    fn scenario(delay: &str) -> Scenario {
        let cluster = format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: gpu}}\n---\n\
             apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata:\n  name: prov\n  \
             annotations: {{simulator.kuota.dev/provisioning-delay: \"{delay}\"}}\n\
             spec: {{controllerName: kueue.x-k8s.io/provisioning-request}}\n---\n\
             apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: cq}}\nspec:\n  \
             namespaceSelector: {{}}\n  admissionChecksStrategy: {{admissionChecks: [{{name: prov}}]}}\n  \
             resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: gpu\n      \
             resources: [{{name: nvidia.com/gpu, nominalQuota: 16}}]\n---\n\
             apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: cq, namespace: cq}}\n\
             spec: {{clusterQueue: cq}}\n"
        );
        let generator = "cohorts:\n- className: c\n  names: [cq]\n  queuesSets:\n  - className: q\n    \
             names: [cq]\n    workloadsSets:\n    - count: 2\n      creationIntervalMs: 1000000\n      \
             workloads:\n      - className: gang\n        runtimeMs: 100000\n        priority: 1\n        \
             podCount: 2\n        requests: {nvidia.com/gpu: \"8\"}\n";
        Scenario {
            name: "provisioning".into(),
            manifests: vec![SourceFile::new("cluster.yaml", cluster)],
            generator: Some(SourceFile::new("generator.yaml", generator)),
        }
    }

    #[test]
    fn a_played_check_starts_each_gang_once_its_nodes_are_up() {
        let r = simulate(&scenario("60s"), SimConfig::default()).expect("runs");
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        assert_eq!(
            r.totals.finished, 2,
            "the check is Active: its queue admits"
        );
        // The second gang: arrives at 2,000 s, nodes up 60 s later, runs 100 s.
        assert_eq!(r.totals.makespan_ms, 2_160_000);
        let p = r.totals.provisioning.expect("provisioning stats");
        assert_eq!(
            (p.mode.as_str(), p.waits, p.mean_wait_ms),
            ("provisioned", 2, Some(60_000))
        );
        assert_eq!(
            p.idle_gpu_hours, 0.0,
            "equal delays: no node waits for another"
        );
    }

    #[test]
    fn without_the_check_the_always_up_pool_idles_between_gangs() {
        let cfg = SimConfig {
            provisioning: false,
            ..SimConfig::default()
        };
        let r = simulate(&scenario("60s"), cfg).expect("runs");
        assert_eq!(r.totals.makespan_ms, 2_100_000);
        let p = r.totals.provisioning.expect("provisioning stats");
        assert_eq!(
            (p.mode.as_str(), p.waits, p.mean_wait_ms),
            ("static", 0, None)
        );
        // 16 GPUs × 2,100 s up, 2 gangs × 16 GPUs × 100 s used.
        let idle = (16.0 * 2_100.0 - 2.0 * 16.0 * 100.0) / 3_600.0;
        assert!(
            (p.idle_gpu_hours - idle).abs() < 1e-9,
            "{}",
            p.idle_gpu_hours
        );
    }

    #[test]
    fn a_bad_delay_is_an_error_naming_the_check_and_the_annotation() {
        let e = simulate(&scenario("median=1m,p90=soon"), SimConfig::default())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("AdmissionCheck prov: annotation simulator.kuota.dev/provisioning-delay"),
            "{e}"
        );
    }
}
