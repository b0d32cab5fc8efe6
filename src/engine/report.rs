//! A read-only snapshot of the engine's quota state, for metrics and dashboards.
//!
//! The engine never reports anything by itself (it stays pure); shells call
//! [`Engine::snapshot`] when they want gauges, at whatever rate they can afford.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::quota::NodeId;
use super::resources::FrAmounts;
use super::state::WlState;
use super::{
    ClusterQueueReport, Engine, FlavorResourceUsage, LocalQueueReport, Millis, PendingReason,
    WorkloadKey, WorkloadState,
};

/// One (flavor, resource) entry of a ClusterQueue, in the engine's unit for the resource
/// (`api::quantity::resource_value`: milli for cpu, whole units otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaSnapshot {
    pub flavor: String,
    pub resource: String,
    pub nominal: i64,
    /// `None`: unlimited (Kueue's nil).
    pub borrowing_limit: Option<i64>,
    /// `None`: lends everything (Kueue's nil).
    pub lending_limit: Option<i64>,
    /// Quota reserved by the ClusterQueue's admitted (and evicting) workloads.
    pub reserved: i64,
}

/// A ClusterQueue's state as the engine sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterQueueSnapshot {
    pub name: String,
    pub cohort: Option<String>,
    /// Can admit (no missing flavor, no stop policy, no cohort cycle).
    pub active: bool,
    /// Pending workloads the next cycle looks at.
    pub pending_active: usize,
    /// Pending workloads parked until something changes (Kueue's inadmissible).
    pub pending_inadmissible: usize,
    /// Workloads holding quota (admitted or still stopping after an eviction).
    pub reserving: usize,
    /// Kueue's fair-sharing weighted share, in thousandths.
    pub weighted_share: i64,
    pub quotas: Vec<QuotaSnapshot>,
}

/// A Cohort's state: its subtree quota per (flavor, resource).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortSnapshot {
    pub name: String,
    pub parent: Option<String>,
    /// (flavor, resource) -> own nominal quota plus what its members lend to it, in the
    /// engine's unit for the resource.
    pub subtree_quota: BTreeMap<(String, String), i64>,
}

/// GPUs of one topology domain of a TAS flavor (whole devices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuDomainSnapshot {
    pub flavor: String,
    /// The node label of the level (e.g. `cloud.provider.com/topology-rack`).
    pub level: String,
    /// The label's value: the domain's name.
    pub domain: String,
    pub allocatable: i64,
    /// Held by workloads kuota placed.
    pub allocated: i64,
    /// Allocatable minus what kuota placed and what other pods use.
    pub free: i64,
    /// Free GPUs on nodes that already run something: fragments a gang that wants
    /// whole nodes cannot use.
    pub stranded: i64,
}

/// Everything [`Engine::snapshot`] reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineSnapshot {
    pub cluster_queues: Vec<ClusterQueueSnapshot>,
    pub cohorts: Vec<CohortSnapshot>,
    /// Per TAS flavor, topology level (above the node) and domain.
    pub gpu_domains: Vec<GpuDomainSnapshot>,
}

/// The resource whose allocation per topology domain is reported.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

impl Engine {
    /// The quota state of every ClusterQueue and Cohort. Costs O(queues x flavors x
    /// resources), independent of the number of workloads.
    pub fn snapshot(&self) -> EngineSnapshot {
        let mut out = EngineSnapshot::default();
        for c in self.cqs.iter().filter(|c| !c.deleted) {
            let node = c.node;
            let mut frs: Vec<u32> = c
                .spec
                .limits
                .frs()
                .chain(self.tree.nodes[node as usize].usage.iter().map(|(f, _)| f))
                .collect();
            frs.sort_unstable();
            frs.dedup();
            let quotas = frs
                .into_iter()
                .map(|fr| {
                    let (f, r) = self.names.fr_parts(fr);
                    QuotaSnapshot {
                        flavor: self.names.flavor_name(f).to_string(),
                        resource: self.names.resource_name(r).to_string(),
                        nominal: c.spec.limits.nominal.get(fr),
                        borrowing_limit: c.spec.limits.borrowing_limit(fr),
                        lending_limit: c.spec.limits.lending_limit(fr),
                        reserved: self.tree.usage(node, fr),
                    }
                })
                .collect();
            let active_len = c.queue.active_len();
            out.cluster_queues.push(ClusterQueueSnapshot {
                name: c.spec.name.clone(),
                cohort: c.spec.cohort.clone(),
                active: c.inactive.is_none(),
                pending_active: active_len,
                pending_inadmissible: c.queue.len() - active_len,
                reserving: c.admitted.len(),
                weighted_share: super::fair::weighted_share(self, node, &[]),
                quotas,
            });
        }
        out.cluster_queues.sort_by(|a, b| a.name.cmp(&b.name));
        for (name, &node) in &self.cohort_nodes {
            out.cohorts.push(CohortSnapshot {
                name: name.clone(),
                parent: self.parent_name(node),
                subtree_quota: self.subtree_quota_of(node),
            });
        }
        out.gpu_domains = self.gpu_domains();
        out
    }

    /// GPU counts per domain of every TAS flavor's topology, from the nodes' labels.
    fn gpu_domains(&self) -> Vec<GpuDomainSnapshot> {
        let Some(gpu) = self.names.resources.get(&GPU_RESOURCE.to_string()) else {
            return Vec::new();
        };
        let at = |v: &Vec<i64>| v.get(gpu as usize).copied().unwrap_or(0);
        let mut acc: BTreeMap<(String, String, String), [i64; 4]> = BTreeMap::new();
        for (flavor, tree) in &self.inventory.trees {
            // Levels above the node: the hostname level, when present, is the last.
            let levels = if tree.hostname_level {
                &tree.levels[..tree.levels.len().saturating_sub(1)]
            } else {
                &tree.levels[..]
            };
            for idx in 0..tree.leaf_of.len() as u32 {
                if tree.leaf(idx).is_none() {
                    continue;
                }
                let Some(node) = self.inventory.node(idx) else {
                    continue;
                };
                let alloc = at(&node.allocatable);
                if alloc <= 0 {
                    continue;
                }
                let used = at(&node.used);
                let free = node.free(gpu).max(0);
                let busy = used.saturating_add(at(&node.external)) > 0;
                let stranded = if busy { free } else { 0 };
                for level in levels {
                    let Some(domain) = node.labels.get(level) else {
                        continue;
                    };
                    let e = acc
                        .entry((flavor.clone(), level.clone(), domain.clone()))
                        .or_default();
                    for (acc, v) in e.iter_mut().zip([alloc, used, free, stranded]) {
                        *acc = acc.saturating_add(v);
                    }
                }
            }
        }
        acc.into_iter()
            .map(|((flavor, level, domain), v)| GpuDomainSnapshot {
                flavor,
                level,
                domain,
                allocatable: v[0],
                allocated: v[1],
                free: v[2],
                stranded: v[3],
            })
            .collect()
    }

    fn parent_name(&self, node: NodeId) -> Option<String> {
        let p = self.tree.parent(node)?;
        self.node_name.get(p as usize).cloned()
    }

    fn subtree_quota_of(&self, node: NodeId) -> BTreeMap<(String, String), i64> {
        self.tree.nodes[node as usize]
            .subtree_quota
            .iter()
            .filter(|&(_, v)| v != 0)
            .map(|(fr, v)| {
                let (f, r) = self.names.fr_parts(fr);
                (
                    (
                        self.names.flavor_name(f).to_string(),
                        self.names.resource_name(r).to_string(),
                    ),
                    v,
                )
            })
            .collect()
    }
}

/// Where a workload stands and what a ClusterQueue holds, for the shells' status writes.
impl Engine {
    /// Whether the engine holds workload `key` (in any state).
    pub fn has_workload(&self, key: &WorkloadKey) -> bool {
        self.wl_index.contains_key(key)
    }

    /// Where a workload stands.
    pub fn workload_state(&self, key: &WorkloadKey) -> Option<WorkloadState> {
        let w = self.wl(*self.wl_index.get(key)?);
        Some(match &w.state {
            WlState::Pending => {
                let (reason, message) = w.pending.as_ref().map_or(
                    (
                        PendingReason::WaitingForQuota,
                        "The workload has not been evaluated by a scheduling cycle yet",
                    ),
                    |p| (p.reason, &*p.message),
                );
                WorkloadState::Pending {
                    reason,
                    message: message.to_string(),
                }
            }
            WlState::Admitted(a) => WorkloadState::Admitted {
                admission: (*a.admission).clone(),
            },
            WlState::Evicting(a) => WorkloadState::Evicting {
                admission: (*a.admission).clone(),
            },
            WlState::Finished => WorkloadState::Finished,
        })
    }

    /// A ClusterQueue's counts, usage per (flavor, resource) and share.
    pub fn cluster_queue_report(&self, name: &str) -> Option<ClusterQueueReport> {
        let &id = self.cq_index.get(name)?;
        let c = &self.cqs[id as usize];
        if c.deleted {
            return None;
        }
        let mut usage = BTreeMap::new();
        let frs: BTreeSet<u32> = c
            .spec
            .limits
            .frs()
            .chain(
                self.tree.nodes[c.node as usize]
                    .usage
                    .iter()
                    .map(|(f, _)| f),
            )
            .collect();
        for fr in frs {
            let (f, r) = self.names.fr_parts(fr);
            let total = self.tree.usage(c.node, fr);
            let borrowed = total
                .saturating_sub(self.tree.subtree_quota(c.node, fr))
                .max(0);
            usage.insert(
                (
                    self.names.flavor_name(f).to_string(),
                    self.names.resource_name(r).to_string(),
                ),
                FlavorResourceUsage { total, borrowed },
            );
        }
        Some(ClusterQueueReport {
            pending: c.queue.len(),
            admitted: c.admitted.len(),
            usage,
            weighted_share: super::fair::weighted_share(self, c.node, &[]),
            active: c.inactive.is_none(),
            inactive_reason: c.inactive.as_ref().map(|i| i.message.clone()),
            inactive_condition_reason: c.inactive.as_ref().map(|i| i.reason),
            inactive_condition_message: c.inactive.as_ref().and_then(|i| i.condition.clone()),
        })
    }

    /// Every LocalQueue's counts and usage, from the workloads the engine holds (one pass,
    /// no decoding): (namespace, name) -> report. Pending counts every unfinished
    /// workload without quota, admitted (and reserving) every one holding quota, an
    /// evicted one until it gives it back; usage is the quota each admitted one is
    /// charged, as in its ClusterQueue's report. LocalQueues no workload names are absent.
    pub fn local_queue_reports(&self) -> HashMap<(String, String), LocalQueueReport> {
        let mut out: HashMap<(String, String), LocalQueueReport> = HashMap::new();
        let mut usage: HashMap<(String, String), FrAmounts> = HashMap::new();
        for w in self.wls.iter().flatten() {
            if w.spec.queue_name.is_empty() || matches!(w.state, WlState::Finished) {
                continue;
            }
            let key = (w.spec.key.namespace.to_string(), w.spec.queue_name.clone());
            let report = out.entry(key.clone()).or_default();
            match &w.state {
                WlState::Admitted(a) | WlState::Evicting(a) => {
                    report.admitted += 1;
                    let sum = usage.entry(key).or_default();
                    for &(fr, v) in &a.usage {
                        super::resources::add_amount(sum, fr, v);
                    }
                }
                _ => report.pending += 1,
            }
        }
        for (key, amounts) in usage {
            let Some(report) = out.get_mut(&key) else {
                continue;
            };
            for (fr, total) in amounts {
                let (f, r) = self.names.fr_parts(fr);
                report.usage.insert(
                    (
                        self.names.flavor_name(f).to_string(),
                        self.names.resource_name(r).to_string(),
                    ),
                    total,
                );
            }
        }
        out
    }

    /// Number of workloads waiting in queues or for a queue.
    pub fn pending_count(&self) -> usize {
        self.cqs.iter().map(|c| c.queue.len()).sum::<usize>() + self.unqueued.len()
    }
}

/// Where a workload stands, as the start-time forecaster reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FactPhase {
    /// Waiting for quota (queued or parked), or for its queue to exist.
    Pending,
    /// Holding quota since `started` (when its execution time started counting).
    Running { started: Millis },
    /// Preempted or evicted, still holding quota until its pods are gone.
    Evicting,
}

/// What the start-time forecaster needs of one unfinished workload: who it is, where
/// its runtime statistics are kept, and the bound its user declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadFacts {
    pub key: WorkloadKey,
    /// Its LocalQueue (`spec.queueName`).
    pub queue_name: String,
    pub priority: i32,
    pub created: Millis,
    pub phase: FactPhase,
    /// How long its next (or current) admission may last at most, in ms: what
    /// `maximumExecutionTimeSeconds` leaves after the accumulated execution time, or
    /// the pods' `activeDeadlineSeconds`, whichever is shorter. `None`: no bound.
    pub bound: Option<Millis>,
}

impl Engine {
    /// Every unfinished workload's [`WorkloadFacts`], in the order of their keys.
    pub fn workload_facts(&self) -> Vec<WorkloadFacts> {
        let mut out: Vec<WorkloadFacts> = self
            .wls
            .iter()
            .flatten()
            .filter_map(|w| {
                let phase = match &w.state {
                    WlState::Pending => FactPhase::Pending,
                    WlState::Admitted(a) => FactPhase::Running { started: a.started },
                    WlState::Evicting(_) => FactPhase::Evicting,
                    WlState::Finished => return None,
                };
                let execution = w
                    .spec
                    .max_execution
                    .map(|m| m.saturating_sub(w.spec.past_execution).max(0));
                let bound = match (execution, w.spec.pod_deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                Some(WorkloadFacts {
                    key: w.spec.key.clone(),
                    queue_name: w.spec.queue_name.clone(),
                    priority: w.spec.priority,
                    created: w.spec.created,
                    phase,
                    bound,
                })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// The engine's clock: the latest time it was given.
    pub fn now(&self) -> Millis {
        self.now
    }
}
