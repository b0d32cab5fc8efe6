//! Workload generator in the shape of Kueue's scheduler performance test
//! (`test/performance/scheduler`, `generator.yaml`): cohorts × queue sets ×
//! workload sets, each workload set creating `count` rounds of its templates
//! every `creationIntervalMs`.
//!
//! Field names and naming conventions follow Kueue so its configs load
//! unchanged (TAS/DRA sections excepted). kuota's extensions are marked
//! *extension* below; each one is optional and off by default.
//!
//! Two ways to say where workloads go:
//! * **Kueue mode** (`nominalQuota` set): the generator also creates the
//!   ClusterQueue (cpu only, on flavor `resourceFlavor.name`, default `rf`),
//!   a namespace and a LocalQueue named after it, exactly like Kueue.
//! * **Manifest mode** (no `nominalQuota`): the ClusterQueue comes from the
//!   scenario's manifests, and workloads are submitted to the LocalQueue named
//!   after it in the namespace of the same name (Kueue's convention, so both
//!   modes produce the same object names).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use serde::{Deserialize, Serialize};

use super::SimError;
pub use error::GeneratorError;

mod error;
use super::rng::{SplitMix64, derive_seed};
use crate::api;
use crate::api::quantity::resource_value;
use crate::engine::{Millis, WorkloadKey};

/// Label carrying a generated workload's runtime, as Kueue's runner sets it.
pub const RUNNING_TIME_LABEL: &str = "kueue.x-k8s.io/performance-scheduler-running-ms";
/// Label carrying the workload (or queue) class name, as Kueue's runner sets it.
pub const CLASS_LABEL: &str = "kueue.x-k8s.io/performance-scheduler-class";
/// Kueue's default flavor name for generated ClusterQueues.
pub const DEFAULT_FLAVOR_NAME: &str = "rf";
/// Upper bound on generated workloads, so a typo (`count: 100000000`) is an
/// error message rather than an out-of-memory kill.
pub const MAX_WORKLOADS: u64 = 5_000_000;

/// Top level of `generator.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorConfig {
    /// Flavor used by Kueue-mode ClusterQueues (Kueue: `resourceFlavor.name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_flavor: Option<ResourceFlavorConfig>,
    /// Cohort sets.
    #[serde(default)]
    pub cohorts: Vec<CohortSet>,
}

/// Kueue's `resourceFlavor` section (only the name is used without TAS).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceFlavorConfig {
    pub name: String,
}

/// `count` cohorts named `{className}-{i}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CohortSet {
    pub class_name: String,
    /// Number of cohorts; defaults to `names.len()` when `names` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// *Extension*: explicit cohort names instead of `{className}-{i}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    #[serde(default)]
    pub queues_sets: Vec<QueuesSet>,
}

/// `count` ClusterQueues per cohort, named `{className}-{setIndex}-{i}-{cohort}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueuesSet {
    pub class_name: String,
    /// Queues per cohort; defaults to `names.len()` when `names` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// *Extension*: explicit ClusterQueue names (used in every cohort of the
    /// set, so only meaningful with one cohort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// cpu nominal quota; when set, the generator creates the ClusterQueue (Kueue mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominal_quota: Option<Quantity>,
    /// cpu borrowing limit of generated ClusterQueues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// `preemption.reclaimWithinCohort` of generated ClusterQueues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<api::PreemptionPolicy>,
    /// `preemption.withinClusterQueue` of generated ClusterQueues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_cluster_queue: Option<api::PreemptionPolicy>,
    #[serde(default)]
    pub workloads_sets: Vec<WorkloadsSet>,
}

/// How arrivals of a workload set are spaced (*extension*).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arrival {
    /// Kueue's behaviour: one round every `creationIntervalMs`, the first after one interval.
    #[default]
    Fixed,
    /// Exponential gaps with mean `creationIntervalMs`, drawn from the run's seed.
    Poisson,
}

/// `count` rounds; each round creates one workload per template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadsSet {
    pub count: u32,
    /// Gap before each created workload (ms). Kueue waits this long before
    /// every template of every round, and so does kuota.
    #[serde(default)]
    pub creation_interval_ms: u64,
    /// *Extension*: gap distribution, default `Fixed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// *Extension*: virtual time (ms) at which the set starts creating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<u64>,
    #[serde(default)]
    pub workloads: Vec<WorkloadTemplate>,
}

/// One workload class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadTemplate {
    pub class_name: String,
    /// How long the workload runs once admitted (virtual ms).
    #[serde(default)]
    pub runtime_ms: u64,
    /// `spec.priority` of the generated Workload.
    #[serde(default)]
    pub priority: i32,
    /// Per-pod cpu request (Kueue's only resource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Quantity>,
    /// *Extension*: per-pod requests of any resource (merged with `request`, which wins for cpu).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    /// Pods in the single pod set, default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_count: Option<u32>,
    /// *Extension*: the pod set's topology request, Kueue's
    /// `podSets[].topologyRequest` (`required`, `preferred` or
    /// `unconstrained: true`, plus slice fields). Needs a TAS flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_request: Option<api::PodSetTopologyRequest>,
    /// *Extension*: the share of this class's workloads whose pods never become ready
    /// (a bad image, a missing secret), spread evenly over its rounds; 0 to 1. They
    /// hold their quota until waitForPodsReady takes it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub never_ready_fraction: Option<f64>,
    /// The Workload's `spec.maximumExecutionTimeSeconds`: the runtime bound its user
    /// declares (it must cover the runtime, reruns after preemption included, or the
    /// workload is deactivated when it runs out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_execution_time_seconds: Option<i32>,
}

/// A workload the simulator will submit.
#[derive(Clone, Debug)]
pub struct SimWorkload {
    pub key: WorkloadKey,
    /// Workload class (the template's `className`).
    pub class: String,
    /// ClusterQueue it is submitted to (through its LocalQueue).
    pub cluster_queue: String,
    /// Virtual arrival time, ms since the start of the run.
    pub arrival: Millis,
    /// Runtime once admitted, ms.
    pub runtime: Millis,
    /// Total requests of all pods per resource, in the engine's unit for it.
    pub total_requests: BTreeMap<String, i64>,
    /// The object handed to the engine. Its creation timestamp is set by the
    /// simulator, which owns the mapping from virtual to engine time.
    pub object: api::Workload,
    /// Its pods never become ready: it never finishes, and only waitForPodsReady
    /// takes its quota back.
    pub never_ready: bool,
}

/// Everything the generator creates.
#[derive(Clone, Debug, Default)]
pub struct Generated {
    pub flavors: Vec<api::ResourceFlavor>,
    pub cluster_queues: Vec<api::ClusterQueue>,
    pub local_queues: Vec<api::LocalQueue>,
    /// Namespaces of generated LocalQueues (created like Kueue's runner does).
    pub namespaces: BTreeSet<String>,
    /// Sorted by (arrival, generation order).
    pub workloads: Vec<SimWorkload>,
}

/// What the generator needs to know about the scenario's manifests.
#[derive(Clone, Debug, Default)]
pub struct ExistingObjects {
    /// ClusterQueue names from the manifests.
    pub cluster_queues: BTreeSet<String>,
    /// (namespace, name) -> ClusterQueue, from the manifests' LocalQueues.
    pub local_queues: BTreeMap<(String, String), String>,
    /// ResourceFlavor names from the manifests.
    pub flavors: BTreeSet<String>,
}

impl GeneratorConfig {
    /// Parses `generator.yaml`; `source` names the file in errors.
    pub fn from_yaml(source: &str, yaml: &str) -> Result<Self, SimError> {
        let de = serde_norway::Deserializer::from_str(yaml);
        serde_path_to_error::deserialize(de).map_err(|e| SimError::Generator {
            source_name: source.to_string(),
            source: Box::new(GeneratorError::Yaml {
                path: e.path().to_string(),
                source: std::sync::Arc::new(e.into_inner()),
            }),
        })
    }

    /// Number of workloads this config creates, saturating.
    pub fn workload_count(&self) -> u64 {
        let mut n: u64 = 0;
        for c in &self.cohorts {
            let cohorts =
                u64::from(c.count.unwrap_or(0)).max(c.names.as_ref().map_or(0, |v| v.len() as u64));
            for q in &c.queues_sets {
                let queues = u64::from(q.count.unwrap_or(0))
                    .max(q.names.as_ref().map_or(0, |v| v.len() as u64));
                for s in &q.workloads_sets {
                    let per_queue = u64::from(s.count).saturating_mul(s.workloads.len() as u64);
                    n = n.saturating_add(cohorts.saturating_mul(queues).saturating_mul(per_queue));
                }
            }
        }
        n
    }

    /// Builds the objects and workloads. `seed` only matters for `Poisson` sets.
    pub fn generate(
        &self,
        source: &str,
        existing: &ExistingObjects,
        seed: u64,
    ) -> Result<Generated, SimError> {
        let err = |e: GeneratorError| SimError::Generator {
            source_name: source.to_string(),
            source: Box::new(e),
        };
        let total = self.workload_count();
        if total > MAX_WORKLOADS {
            return Err(err(GeneratorError::TooManyWorkloads {
                total,
                limit: MAX_WORKLOADS,
            }));
        }
        let flavor = self
            .resource_flavor
            .as_ref()
            .map_or(DEFAULT_FLAVOR_NAME, |f| f.name.as_str())
            .to_string();
        let mut generation = Generation::new(existing, flavor, seed, total);
        for (ci, cset) in self.cohorts.iter().enumerate() {
            generation.cohort_set(ci, cset).map_err(&err)?;
        }
        Ok(generation.finish())
    }
}

/// One run of [`GeneratorConfig::generate`]: what it has generated so far.
struct Generation<'e> {
    existing: &'e ExistingObjects,
    /// Flavor of Kueue-mode ClusterQueues.
    flavor: String,
    seed: u64,
    out: Generated,
    /// ClusterQueue names generated so far: a second one of a name is an error.
    seen_cqs: BTreeSet<String>,
    /// (arrival, index into `workloads`), in generation order until [`Generation::finish`].
    seq: Vec<(Millis, usize)>,
    workloads: Vec<SimWorkload>,
}

impl<'e> Generation<'e> {
    /// Nothing generated yet; room for `total` workloads.
    fn new(existing: &'e ExistingObjects, flavor: String, seed: u64, total: u64) -> Self {
        Self {
            existing,
            flavor,
            seed,
            out: Generated::default(),
            seen_cqs: BTreeSet::new(),
            seq: Vec::new(),
            workloads: Vec::with_capacity(usize::try_from(total).unwrap_or(0)),
        }
    }

    /// Every Cohort of cohort set `ci`, with its ClusterQueues and their workloads.
    fn cohort_set(&mut self, ci: usize, cset: &CohortSet) -> Result<(), GeneratorError> {
        let cpath = format!("cohorts[{ci}]");
        let cohort_names = names_of(
            &cpath,
            &cset.class_name,
            cset.count,
            cset.names.as_ref(),
            |i| format!("{}-{i}", cset.class_name),
        )?;
        for (cidx, cohort) in cohort_names.iter().enumerate() {
            for (qsi, qset) in cset.queues_sets.iter().enumerate() {
                let qpath = format!("{cpath}.queuesSets[{qsi}]");
                let queue_names = names_of(
                    &qpath,
                    &qset.class_name,
                    qset.count,
                    qset.names.as_ref(),
                    |i| format!("{}-{qsi}-{i}-{cohort}", qset.class_name),
                )?;
                for (qidx, cq) in queue_names.iter().enumerate() {
                    let position = [ci as u64, cidx as u64, qsi as u64, qidx as u64];
                    self.cluster_queue(cq, cohort, qset, &qpath, position)?;
                }
            }
        }
        Ok(())
    }

    /// ClusterQueue `cq` and its workloads; `position`, its place in the config, seeds them.
    fn cluster_queue(
        &mut self,
        cq: &str,
        cohort: &str,
        qset: &QueuesSet,
        qpath: &str,
        position: [u64; 4],
    ) -> Result<(), GeneratorError> {
        if !self.seen_cqs.insert(cq.to_string()) {
            return Err(GeneratorError::GeneratedTwice {
                path: qpath.to_string(),
                cq: cq.to_string(),
            });
        }
        match &qset.nominal_quota {
            Some(nominal) => self.kueue_queue(cq, cohort, nominal, qset, qpath)?,
            None => check_local_queue(self.existing, cq, qpath)?,
        }
        let kueue_mode = qset.nominal_quota.is_some();
        let [ci, cidx, qsi, qidx] = position;
        for (wsi, wset) in qset.workloads_sets.iter().enumerate() {
            let stream = derive_seed(self.seed, &[ci, cidx, qsi, qidx, wsi as u64]);
            self.workloads_set(cq, wsi, wset, qpath, kueue_mode, stream)?;
        }
        Ok(())
    }

    /// Kueue mode: ClusterQueue `cq` in `cohort`, with its LocalQueue and namespace.
    fn kueue_queue(
        &mut self,
        cq: &str,
        cohort: &str,
        nominal: &Quantity,
        qset: &QueuesSet,
        qpath: &str,
    ) -> Result<(), GeneratorError> {
        if self.existing.cluster_queues.contains(cq) {
            return Err(GeneratorError::AlsoInManifests {
                path: qpath.to_string(),
                cq: cq.to_string(),
            });
        }
        self.out.cluster_queues.push(kueue_cluster_queue(
            cq,
            cohort,
            &self.flavor,
            nominal,
            qset,
            qpath,
        )?);
        // Kueue's convention: namespace and LocalQueue share the ClusterQueue's name.
        let mut local = api::LocalQueue::new(
            cq,
            api::LocalQueueSpec {
                cluster_queue: cq.to_string(),
                ..Default::default()
            },
        );
        local.metadata.namespace = Some(cq.to_string());
        self.out.local_queues.push(local);
        self.out.namespaces.insert(cq.to_string());
        Ok(())
    }

    /// The `count` rounds of workload set `wset` (number `wsi`) for ClusterQueue `cq`.
    fn workloads_set(
        &mut self,
        cq: &str,
        wsi: usize,
        wset: &WorkloadsSet,
        qpath: &str,
        kueue_mode: bool,
        stream: u64,
    ) -> Result<(), GeneratorError> {
        let wpath = format!("{qpath}.workloadsSets[{wsi}]");
        let templates = wset
            .workloads
            .iter()
            .enumerate()
            .map(|(ti, t)| Template::new(t, &format!("{wpath}.workloads[{ti}]"), kueue_mode))
            .collect::<Result<Vec<_>, _>>()?;
        // Kueue's convention: namespace and LocalQueue share the ClusterQueue's name.
        let (namespace, lq) = (cq, cq);
        let mut arrivals = arrival_times(wset, stream).into_iter();
        for round in 0..wset.count {
            for (ti, t) in templates.iter().enumerate() {
                // arrival_times yields exactly count × templates values.
                let at = arrivals.next().unwrap_or(0);
                let name = format!("{}-{wsi}-{round}-{ti}", t.class);
                self.seq.push((at, self.workloads.len()));
                let mut w = t.instantiate(namespace, &name, lq, cq, at);
                // Evenly spread: round r is never ready when the running share crosses
                // a whole workload there.
                let share = |r: u32| (f64::from(r) * t.never_ready).floor();
                w.never_ready = share(round + 1) > share(round);
                self.workloads.push(w);
            }
        }
        Ok(())
    }

    /// Everything generated: the flavor Kueue-mode ClusterQueues use, and workloads by arrival.
    fn finish(self) -> Generated {
        let Self {
            existing,
            flavor,
            mut out,
            mut seq,
            workloads,
            ..
        } = self;
        if !out.cluster_queues.is_empty() && !existing.flavors.contains(&flavor) {
            out.flavors.push(api::ResourceFlavor::new(
                &flavor,
                api::ResourceFlavorSpec::default(),
            ));
        }
        // Stable sort by arrival: ties keep generation order, which is itself
        // fixed by the config's order, so the submission order is reproducible.
        seq.sort_by_key(|&(at, _)| at);
        let mut slots: Vec<Option<SimWorkload>> = workloads.into_iter().map(Some).collect();
        out.workloads = seq
            .into_iter()
            .filter_map(|(_, i)| slots.get_mut(i).and_then(Option::take))
            .collect();
        out
    }
}

/// Manifest mode: the manifests must hold LocalQueue `cq` in namespace `cq`, pointing at `cq`.
fn check_local_queue(
    existing: &ExistingObjects,
    cq: &str,
    qpath: &str,
) -> Result<(), GeneratorError> {
    // Kueue's convention: namespace and LocalQueue share the ClusterQueue's name.
    let (namespace, local_queue) = (cq.to_string(), cq.to_string());
    match existing
        .local_queues
        .get(&(namespace.clone(), local_queue.clone()))
    {
        Some(target) if target == cq => Ok(()),
        Some(target) => Err(GeneratorError::LocalQueueElsewhere {
            path: qpath.to_string(),
            namespace,
            local_queue,
            target: target.clone(),
            cq: cq.to_string(),
        }),
        None => Err(GeneratorError::NoLocalQueue {
            path: qpath.to_string(),
            namespace,
            local_queue,
            cq: cq.to_string(),
        }),
    }
}

/// Resolves `count`/`names` into the list of names.
fn names_of(
    path: &str,
    class: &str,
    count: Option<u32>,
    names: Option<&Vec<String>>,
    generated: impl Fn(u32) -> String,
) -> Result<Vec<String>, GeneratorError> {
    let path = path.to_string();
    if class.is_empty() && names.is_none() {
        return Err(GeneratorError::EmptyClassName { path });
    }
    match (count, names) {
        (Some(c), Some(n)) if c as usize != n.len() => Err(GeneratorError::CountMismatch {
            path,
            count: c,
            names: n.len(),
        }),
        (_, Some(n)) => {
            if let Some(bad) = n.iter().find(|s| !is_dns_label(s)) {
                return Err(GeneratorError::InvalidName {
                    path: format!("{path}.names"),
                    name: bad.clone(),
                });
            }
            Ok(n.clone())
        }
        (Some(c), None) => Ok((0..c).map(generated).collect()),
        (None, None) => Err(GeneratorError::NoCountOrNames { path }),
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A ClusterQueue as Kueue's generator builds it: all namespaces, one cpu
/// quota on one flavor, the set's preemption policies.
fn kueue_cluster_queue(
    name: &str,
    cohort: &str,
    flavor: &str,
    nominal: &Quantity,
    qset: &QueuesSet,
    path: &str,
) -> Result<api::ClusterQueue, GeneratorError> {
    let quantity = |field: &str, q: &Quantity| {
        resource_value("cpu", q).map_err(|source| GeneratorError::Quantity {
            field: format!("{path}.{field}"),
            source,
        })
    };
    quantity("nominalQuota", nominal)?;
    if let Some(b) = &qset.borrowing_limit {
        quantity("borrowingLimit", b)?;
    }
    let spec = api::ClusterQueueSpec {
        resource_groups: vec![api::ResourceGroup {
            covered_resources: vec!["cpu".to_string()],
            flavors: vec![api::FlavorQuotas {
                name: flavor.to_string(),
                resources: vec![api::ResourceQuota {
                    name: "cpu".to_string(),
                    nominal_quota: nominal.clone(),
                    borrowing_limit: qset.borrowing_limit.clone(),
                    lending_limit: None,
                }],
            }],
        }],
        cohort_name: Some(cohort.to_string()),
        namespace_selector: Some(LabelSelector::default()),
        preemption: Some(api::ClusterQueuePreemption {
            reclaim_within_cohort: qset.reclaim_within_cohort,
            borrow_within_cohort: None,
            within_cluster_queue: qset.within_cluster_queue,
        }),
        ..Default::default()
    };
    let mut cq = api::ClusterQueue::new(name, spec);
    cq.metadata.labels = Some(BTreeMap::from([(
        CLASS_LABEL.to_string(),
        qset.class_name.clone(),
    )]));
    Ok(cq)
}

/// Arrival offsets for every (round, template) of a set, in creation order.
fn arrival_times(set: &WorkloadsSet, stream_seed: u64) -> Vec<Millis> {
    let n = (set.count as usize).saturating_mul(set.workloads.len());
    let start = set.start_ms.unwrap_or(0);
    let interval = set.creation_interval_ms;
    let mut rng = SplitMix64::new(stream_seed);
    let mut t = start;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let gap = match set.arrival.unwrap_or_default() {
            Arrival::Fixed => interval,
            Arrival::Poisson => rng.exponential(interval as f64),
        };
        t = t.saturating_add(gap);
        out.push(Millis::try_from(t).unwrap_or(Millis::MAX));
    }
    out
}

/// A validated template.
struct Template {
    class: String,
    runtime: Millis,
    priority: i32,
    pod_count: i32,
    requests: BTreeMap<String, Quantity>,
    /// Per-pod amounts, in the engine's unit for each resource.
    per_pod: BTreeMap<String, i64>,
    topology_request: Option<api::PodSetTopologyRequest>,
    never_ready: f64,
    max_execution: Option<i32>,
}

impl Template {
    fn new(t: &WorkloadTemplate, path: &str, kueue_mode: bool) -> Result<Self, GeneratorError> {
        let field = |f: &str| format!("{path}.{f}");
        if !is_dns_label(&t.class_name) {
            return Err(GeneratorError::InvalidName {
                path: field("className"),
                name: t.class_name.clone(),
            });
        }
        let pod_count = t.pod_count.unwrap_or(1);
        if pod_count == 0 {
            return Err(GeneratorError::Zero {
                field: field("podCount"),
            });
        }
        let pod_count = i32::try_from(pod_count).map_err(|_| GeneratorError::TooLarge {
            field: field("podCount"),
        })?;
        let mut requests = t.requests.clone();
        if let Some(cpu) = &t.request {
            requests.insert("cpu".to_string(), cpu.clone());
        }
        let mut per_pod = BTreeMap::new();
        for (r, q) in &requests {
            let m = resource_value(r, q).map_err(|source| GeneratorError::Quantity {
                field: field(&format!("requests[{r}]")),
                source,
            })?;
            if m < 0 {
                return Err(GeneratorError::Negative {
                    field: field(&format!("requests[{r}]")),
                });
            }
            per_pod.insert(r.clone(), m);
        }
        if kueue_mode && let Some(r) = requests.keys().find(|r| *r != "cpu") {
            return Err(GeneratorError::NotCpu {
                path: path.to_string(),
                resource: r.clone(),
            });
        }
        if let Some(tr) = &t.topology_request {
            // Validate with the engine's own reader so a bad request is a
            // config error here, not a rejected workload mid-run.
            let probe = api::PodSet {
                count: pod_count,
                topology_request: Some(tr.clone()),
                ..Default::default()
            };
            crate::placement::topology_mode(&probe).map_err(|source| GeneratorError::Topology {
                path: path.to_string(),
                source,
            })?;
        }
        let never_ready = t.never_ready_fraction.unwrap_or(0.0);
        if never_ready.is_nan() || never_ready < 0.0 {
            return Err(GeneratorError::Negative {
                field: field("neverReadyFraction"),
            });
        }
        if never_ready > 1.0 {
            return Err(GeneratorError::TooLarge {
                field: field("neverReadyFraction"),
            });
        }
        if t.maximum_execution_time_seconds.is_some_and(|m| m < 1) {
            return Err(GeneratorError::Zero {
                field: field("maximumExecutionTimeSeconds"),
            });
        }
        Ok(Self {
            never_ready,
            max_execution: t.maximum_execution_time_seconds,
            class: t.class_name.clone(),
            runtime: Millis::try_from(t.runtime_ms).map_err(|_| GeneratorError::TooLarge {
                field: field("runtimeMs"),
            })?,
            priority: t.priority,
            pod_count,
            requests,
            per_pod,
            topology_request: t.topology_request.clone(),
        })
    }

    fn instantiate(
        &self,
        namespace: &str,
        name: &str,
        lq: &str,
        cq: &str,
        arrival: Millis,
    ) -> SimWorkload {
        let pod_set = api::PodSet {
            count: self.pod_count,
            template: pod_template(&self.requests),
            topology_request: self.topology_request.clone(),
            ..Default::default()
        };
        let mut object = api::Workload::new(
            name,
            api::WorkloadSpec {
                pod_sets: vec![pod_set],
                queue_name: Some(lq.to_string()),
                priority: Some(self.priority),
                maximum_execution_time_seconds: self.max_execution,
                ..Default::default()
            },
        );
        object.metadata.namespace = Some(namespace.to_string());
        object.metadata.labels = Some(BTreeMap::from([
            (RUNNING_TIME_LABEL.to_string(), self.runtime.to_string()),
            (CLASS_LABEL.to_string(), self.class.clone()),
        ]));
        let total_requests = self
            .per_pod
            .iter()
            .map(|(r, m)| (r.clone(), m.saturating_mul(i64::from(self.pod_count))))
            .collect();
        SimWorkload {
            key: WorkloadKey::new(namespace, name),
            class: self.class.clone(),
            cluster_queue: cq.to_string(),
            arrival,
            runtime: self.runtime,
            total_requests,
            object,
            never_ready: false,
        }
    }
}

/// Sets `metadata.creationTimestamp` from engine time (ms since the epoch).
pub fn set_creation_time(object: &mut api::Workload, at: Millis) {
    if let Ok(ts) = k8s_openapi::jiff::Timestamp::from_millisecond(at) {
        object.metadata.creation_timestamp = Some(Time(ts));
    }
}

/// A pod template of one container `main` with these requests: all a simulated pod
/// needs for quota and placement (generated and traced workloads alike).
pub(crate) fn pod_template(requests: &BTreeMap<String, Quantity>) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".to_string(),
                resources: Some(ResourceRequirements {
                    requests: Some(requests.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUEUE_BASELINE: &str = r#"
cohorts:
  - className: cohort
    count: 2
    queuesSets:
    - className: cq
      count: 3
      nominalQuota: 20
      borrowingLimit: 100
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 4
        creationIntervalMs: 100
        workloads:
        - className: small
          runtimeMs: 200
          priority: 50
          request: 1
      - count: 2
        creationIntervalMs: 500
        workloads:
        - className: large
          runtimeMs: 1000
          priority: 200
          request: 20
"#;

    #[test]
    fn kueue_config_generates_kueue_names() {
        let cfg = GeneratorConfig::from_yaml("g.yaml", KUEUE_BASELINE).expect("parses");
        assert_eq!(cfg.workload_count(), 2 * 3 * (4 + 2));
        let g = cfg
            .generate("g.yaml", &ExistingObjects::default(), 1)
            .expect("generates");
        assert_eq!(g.cluster_queues.len(), 6);
        assert_eq!(g.flavors.len(), 1);
        let cq = &g.cluster_queues[0];
        assert_eq!(cq.metadata.name.as_deref(), Some("cq-0-0-cohort-0"));
        assert_eq!(cq.spec.cohort(), Some("cohort-0"));
        assert_eq!(g.workloads.len(), 36);
        // Fixed arrivals: first after one interval, sorted by time.
        assert_eq!(g.workloads[0].arrival, 100);
        assert!(g.workloads.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        let large = g
            .workloads
            .iter()
            .find(|w| w.class == "large")
            .expect("has large");
        assert_eq!(&*large.key.name, "large-1-0-0");
        assert_eq!(large.total_requests.get("cpu"), Some(&20_000));
        assert_eq!(large.object.spec.priority, Some(200));
    }

    #[test]
    fn manifest_mode_requires_local_queue() {
        let yaml = r#"
cohorts:
- className: org
  names: [org]
  queuesSets:
  - className: team
    names: [team-a]
    workloadsSets:
    - count: 1
      workloads: [{className: small, runtimeMs: 5, requests: {nvidia.com/gpu: 1}}]
"#;
        let cfg = GeneratorConfig::from_yaml("g.yaml", yaml).expect("parses");
        let e = cfg
            .generate("g.yaml", &ExistingObjects::default(), 1)
            .expect_err("no LocalQueue");
        assert!(e.to_string().contains("no LocalQueue team-a/team-a"), "{e}");
        let mut existing = ExistingObjects::default();
        existing
            .local_queues
            .insert(("team-a".into(), "team-a".into()), "team-a".into());
        let g = cfg.generate("g.yaml", &existing, 1).expect("generates");
        assert!(g.cluster_queues.is_empty());
        assert_eq!(g.workloads[0].cluster_queue, "team-a");
    }

    #[test]
    fn poisson_is_seeded() {
        let yaml = r#"
cohorts:
- className: c
  count: 1
  queuesSets:
  - className: q
    count: 1
    nominalQuota: 4
    workloadsSets:
    - count: 50
      creationIntervalMs: 1000
      arrival: Poisson
      workloads: [{className: w, runtimeMs: 5, request: 1}]
"#;
        let cfg = GeneratorConfig::from_yaml("g.yaml", yaml).expect("parses");
        let at = |seed| {
            let g = cfg
                .generate("g", &ExistingObjects::default(), seed)
                .expect("generates");
            g.workloads.iter().map(|w| w.arrival).collect::<Vec<_>>()
        };
        assert_eq!(at(1), at(1));
        assert_ne!(at(1), at(2));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for yaml in [
            "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: 4, workloadsSets: [{count: 1, workloads: [{className: w, request: banana}]}]}]}]",
            "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: 4, workloadsSets: [{count: 4294967295, workloads: [{className: w}, {className: v}]}]}]}]",
            "cohorts: [{className: c, count: 2, names: [a]}]",
            "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: 4, workloadsSets: [{count: 1, workloads: [{className: w, request: 1, requests: {memory: 1Gi}}]}]}]}]",
        ] {
            let r = GeneratorConfig::from_yaml("g", yaml)
                .and_then(|c| c.generate("g", &ExistingObjects::default(), 0));
            assert!(r.is_err(), "{yaml}");
        }
        assert!(GeneratorConfig::from_yaml("g", "cohorts: [{clasName: c}]").is_err());
    }
}
