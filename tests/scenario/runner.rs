//! The scenario runner: drives an engine through a scenario's steps, one event at a
//! time in virtual time, and reports per step what differs from the expectations.

mod checks;

use super::kueue::{self, WorkloadSpec};
use super::{AdmittedFields, PendingFields, Placement, Scenario, Step, Strategy};
use checks::render_state;
use kuota::api;
use kuota::api::manifest::Manifest;
use kuota::engine::{
    Decision, Engine, EngineConfig, Event, FairPreemptionStrategy, Millis, WorkloadKey,
    WorkloadState,
};
use std::collections::{BTreeMap, BTreeSet};

/// One run of one scenario against a fresh engine.
pub struct Runner<'a> {
    file: &'a str,
    engine: Engine,
    /// The topology strategy of this run (selects `expect.placement` expectations).
    placement: Placement,
    now: Millis,
    auto_evict: bool,
    /// Every workload applied so far.
    workloads: BTreeSet<WorkloadKey>,
    /// `ns/job-name` -> the Job's workload.
    aliases: BTreeMap<String, WorkloadKey>,
    /// Decisions since the previous expect.
    preempted: BTreeMap<WorkloadKey, String>,
    evicted: BTreeSet<WorkloadKey>,
    /// Nodes applied so far, for the over-commit check and `domains`.
    nodes: BTreeMap<String, NodeInfo>,
    /// LocalQueues (`ns/name`) created for compact workloads.
    local_queues: BTreeSet<String>,
}

/// What the runner knows of a Node: labels, allocatable and external usage (milli-units).
#[derive(Default)]
struct NodeInfo {
    labels: BTreeMap<String, String>,
    allocatable: BTreeMap<String, i64>,
    external: BTreeMap<String, i64>,
}

/// One TAS pod set of an admission: name, nodes (node -> pods), per-pod requests (milli).
struct PlacedPodSet {
    name: String,
    nodes: BTreeMap<String, i32>,
    per_pod: BTreeMap<String, i64>,
}

/// What an expectation wants of one workload.
enum Want<'a> {
    Admitted(&'a AdmittedFields),
    Pending(&'a PendingFields),
    Evicting,
}

impl<'a> Runner<'a> {
    /// An engine configured as the scenario says, under `run_placement` if the suite sets one.
    pub fn new(file: &'a str, sc: &Scenario, run_placement: Option<Placement>) -> Self {
        let chosen = run_placement
            .or(sc.config.placement)
            .unwrap_or(Placement::Kuota);
        let placement = match chosen {
            Placement::Kuota => kuota::placement::Strategy::Kuota,
            Placement::KueueBestfit => kuota::placement::Strategy::KueueBestFit,
            Placement::FirstFit => kuota::placement::Strategy::FirstFit,
        };
        let fair_sharing = sc
            .config
            .fair_sharing
            .as_ref()
            .filter(|f| f.enable)
            .map(|f| {
                let default = vec![
                    Strategy::LessThanOrEqualToFinalShare,
                    Strategy::LessThanInitialShare,
                ];
                let strategies = f.preemption_strategies.clone().unwrap_or(default);
                strategies
                    .into_iter()
                    .map(|s| match s {
                        Strategy::LessThanOrEqualToFinalShare => {
                            FairPreemptionStrategy::LessThanOrEqualToFinalShare
                        }
                        Strategy::LessThanInitialShare => {
                            FairPreemptionStrategy::LessThanInitialShare
                        }
                    })
                    .collect()
            });
        Runner {
            file,
            engine: Engine::new(EngineConfig {
                fair_sharing,
                preemption_min_runtime: sc.config.preemption_min_runtime_ms.unwrap_or(0),
                placement,
                admission_fair_sharing: sc.config.admission_fair_sharing.as_ref().map(|a| {
                    let defaults = kuota::engine::AdmissionFairSharing::default();
                    kuota::engine::AdmissionFairSharing {
                        usage_half_life: a.usage_half_life_ms.unwrap_or(defaults.usage_half_life),
                        usage_sampling_interval: a
                            .usage_sampling_interval_ms
                            .unwrap_or(defaults.usage_sampling_interval),
                        resource_weights: a.resource_weights.clone(),
                    }
                }),
                pods_ready: None,
                finishing_grace: sc
                    .config
                    .finishing_grace_ms
                    .unwrap_or(kuota::engine::DEFAULT_FINISHING_GRACE),
                gang_reservation_horizon: sc
                    .config
                    .gang_reservation_horizon_ms
                    .unwrap_or(kuota::engine::DEFAULT_GANG_RESERVATION_HORIZON),
            }),
            now: 0,
            placement: chosen,
            auto_evict: sc.config.auto_complete_evictions.unwrap_or(true),
            workloads: BTreeSet::new(),
            aliases: BTreeMap::new(),
            preempted: BTreeMap::new(),
            evicted: BTreeSet::new(),
            nodes: BTreeMap::new(),
            local_queues: BTreeSet::new(),
        }
    }

    /// Runs every step; returns one block per failing step.
    pub fn run(mut self, fixtures: &str, sc: &Scenario) -> Vec<String> {
        if let Err(e) = self.apply_yaml(&format!("{}: fixtures", self.file), fixtures) {
            return vec![format!("  fixtures: {e}")];
        }
        if let Err(e) = self.apply_yaml(&format!("{}: objects", self.file), &sc.objects) {
            return vec![format!("  objects: {e}")];
        }
        let mut errors = Vec::new();
        for (i, step) in sc.steps.iter().enumerate() {
            let mut out = Vec::new();
            self.step(i, step, &mut out);
            if !out.is_empty() {
                errors.push(format!(
                    "  step {i} ({}):\n{}",
                    step_kind(step),
                    out.join("\n")
                ));
            }
        }
        errors
    }

    /// Applies one step's action, writing what differs to `out`.
    fn step(&mut self, i: usize, step: &Step, out: &mut Vec<String>) {
        if let Some(at) = step.at {
            if at < self.now {
                out.push(format!("    at {at} goes back in time (now {})", self.now));
            }
            self.now = self.now.max(at);
        }
        if let Some(yaml) = &step.apply {
            let res = self.apply_yaml(&format!("{}: steps[{i}].apply", self.file), yaml);
            match (res, &step.expect_load_error) {
                (Ok(()), None) => {}
                (Err(e), None) => out.push(format!("    - loads and applies\n    + {e}")),
                (Ok(()), Some(_)) => {
                    out.push("    - a load error\n    + loaded and applied without error".into())
                }
                (Err(e), Some(want)) => {
                    let mut needles = want.contains.items();
                    needles.push(self.file.rsplit('/').next().unwrap_or(self.file));
                    if needles.iter().any(|n| !e.contains(n)) {
                        out.push(format!(
                            "    - load error containing {needles:?}\n    + {e}"
                        ));
                    }
                }
            }
        } else if let Some(n) = step.schedule {
            (0..n).for_each(|_| self.cycle(out));
        } else if let Some(keys) = &step.finish {
            keys.iter()
                .for_each(|k| self.send(Event::WorkloadFinished(self.key(k)), out));
        } else if let Some(keys) = &step.evict_complete {
            keys.iter()
                .for_each(|k| self.send(Event::WorkloadEvicted(self.key(k)), out));
        } else if let Some(keys) = &step.finishing {
            keys.iter()
                .for_each(|k| self.send(Event::WorkloadFinishing(self.key(k)), out));
        } else if let Some(items) = &step.delete {
            for item in items {
                match self.delete_event(item) {
                    Ok(ev) => {
                        if let Event::NodeDeleted(n) = &ev {
                            self.nodes.remove(n);
                        }
                        self.send(ev, out)
                    }
                    Err(e) => out.push(format!("    {e}")),
                }
            }
        } else if let Some(usage) = &step.node_usage {
            self.node_usage(usage, out);
        } else if let Some(exp) = &step.expect {
            if exp.placement.is_none_or(|p| p == self.placement) {
                self.check(exp, out);
            }
        } else if let Some(specs) = &step.workloads {
            for spec in specs {
                if let Err(e) = self.apply_compact(i, spec) {
                    out.push(format!("    workload {}: {e}", spec.name));
                }
            }
        }
    }

    /// Replaces the external usage of each listed node, in the runner's view and the engine's.
    fn node_usage(
        &mut self,
        usage: &BTreeMap<String, BTreeMap<String, serde_norway::Value>>,
        out: &mut Vec<String>,
    ) {
        for (node, res) in usage {
            let mut q = BTreeMap::new();
            let mut milli_usage = BTreeMap::new();
            for (r, v) in res {
                let text = match v {
                    serde_norway::Value::String(s) => s.clone(),
                    other => serde_norway::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                match amount(r, v) {
                    Ok(m) => _ = milli_usage.insert(r.clone(), m),
                    Err(e) => out.push(format!("    node-usage {node} {r}: {e}")),
                }
                q.insert(
                    r.clone(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(text),
                );
            }
            if let Some(n) = self.nodes.get_mut(node) {
                n.external = milli_usage;
            }
            self.send(
                Event::NodeExternalUsage {
                    node: node.clone(),
                    usage: q,
                },
                out,
            );
        }
    }

    /// Applies a compact workload, creating its LocalQueue `<ns>/<cq>` the first time.
    fn apply_compact(&mut self, i: usize, spec: &WorkloadSpec) -> Result<(), String> {
        let source = format!("{}: steps[{i}].workloads", self.file);
        let ns = spec.name.split_once('/').map_or("default", |(ns, _)| ns);
        if let (None, Some(cq)) = (&spec.queue, &spec.cq)
            && self.local_queues.insert(format!("{ns}/{cq}"))
        {
            let lq = format!(
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{namespace: {ns}, name: {cq}}}\nspec: {{clusterQueue: {cq}}}\n"
            );
            self.apply_yaml(&source, &lq)?;
        }
        let manifest = kueue::manifest(spec)?;
        self.apply_yaml(&source, &manifest)
    }

    fn send(&mut self, ev: Event, out: &mut Vec<String>) {
        if let Err(e) = self.engine.apply(self.now, ev) {
            out.push(format!("    engine rejected event: {e}"));
        }
    }

    /// Resolves `ns/name` (a Workload, or a Job alias) to a workload key.
    fn key(&self, s: &str) -> WorkloadKey {
        if let Some(k) = self.aliases.get(s) {
            return k.clone();
        }
        let (ns, name) = s.split_once('/').unwrap_or(("default", s));
        WorkloadKey::new(ns, name)
    }

    /// The name to show for a key: the Job alias when there is one.
    fn show(&self, k: &WorkloadKey) -> String {
        self.aliases
            .iter()
            .find(|(_, v)| *v == k)
            .map(|(a, _)| a.clone())
            .unwrap_or_else(|| k.to_string())
    }

    fn state(&self, k: &WorkloadKey) -> Option<WorkloadState> {
        self.engine.workload_state(k)
    }

    fn in_state(&self, pred: fn(&WorkloadState) -> bool) -> BTreeSet<WorkloadKey> {
        self.workloads
            .iter()
            .filter(|k| self.state(k).as_ref().is_some_and(pred))
            .cloned()
            .collect()
    }

    /// One scheduling cycle, checking that no workload is admitted twice.
    fn cycle(&mut self, out: &mut Vec<String>) {
        if self.auto_evict {
            for k in self.in_state(|s| matches!(s, WorkloadState::Evicting { .. })) {
                self.send(Event::WorkloadEvicted(k), out);
            }
        }
        let holding = self.in_state(|s| {
            matches!(
                s,
                WorkloadState::Admitted { .. } | WorkloadState::Evicting { .. }
            )
        });
        let mut touched = BTreeSet::new();
        for d in self.engine.schedule(self.now) {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                    ..
                } => {
                    for ps in self.placed(&workload) {
                        touched.extend(ps.nodes.keys().cloned());
                    }
                    self.check_encoding(&workload, &admission, out);
                    let name = self.show(&workload);
                    if holding.contains(&workload) {
                        out.push(format!(
                            "    {name} admitted again while it already held quota"
                        ));
                    }
                    let state = self.state(&workload);
                    if !matches!(state, Some(WorkloadState::Admitted { .. })) {
                        out.push(format!(
                            "    Admit decision for {name} but it is {}",
                            render_state(state.as_ref())
                        ));
                    }
                }
                Decision::Preempt { victim, reason, .. } => {
                    _ = self.preempted.insert(victim, reason.as_str().into())
                }
                Decision::Evict { workload, .. } => _ = self.evicted.insert(workload),
                Decision::Pending { .. } | Decision::RequeueState { .. } => {}
            }
        }
        self.check_nodes(&touched, out);
    }

    /// The TAS pod sets of an admitted or evicting workload, with where their pods went.
    fn placed(&self, k: &WorkloadKey) -> Vec<PlacedPodSet> {
        let admission = match self.state(k) {
            Some(WorkloadState::Admitted { admission } | WorkloadState::Evicting { admission }) => {
                admission
            }
            _ => return vec![],
        };
        let placement = self.engine.placement(k).unwrap_or_default();
        // The engine keeps one placement per TAS pod set, in pod set order; those are
        // the pod sets whose assignment carries a topologyAssignment.
        admission
            .pod_set_assignments
            .iter()
            .filter(|psa| psa.topology_assignment.is_some())
            .zip(placement)
            .map(|(psa, p)| {
                let count = i64::from(psa.count.unwrap_or(1).max(1));
                let mut per_pod: BTreeMap<String, i64> = psa
                    .resource_usage
                    .iter()
                    .filter_map(|(r, q)| {
                        api::quantity::resource_value(r, q)
                            .ok()
                            .map(|v| (r.clone(), v / count))
                    })
                    .collect();
                // Every pod takes one of the node's `pods` slots.
                per_pod.entry("pods".into()).or_insert(1);
                let mut nodes = BTreeMap::new();
                for (n, c) in p.nodes {
                    *nodes.entry(n).or_insert(0) += c;
                }
                PlacedPodSet {
                    name: psa.name.clone(),
                    nodes,
                    per_pod,
                }
            })
            .collect()
    }
    fn delete_event(&self, item: &str) -> Result<Event, String> {
        let parts: Vec<&str> = item.split('/').collect();
        if !parts[0].starts_with(|c: char| c.is_ascii_uppercase()) {
            return Ok(Event::WorkloadDeleted(self.key(item)));
        }
        let name = parts.last().map(|s| s.to_string()).unwrap_or_default();
        Ok(match (parts[0], parts.len()) {
            ("ResourceFlavor", 2) => Event::ResourceFlavorDeleted(name),
            ("ClusterQueue", 2) => Event::ClusterQueueDeleted(name),
            ("Cohort", 2) => Event::CohortDeleted(name),
            ("WorkloadPriorityClass", 2) => Event::WorkloadPriorityClassDeleted(name),
            ("PriorityClass", 2) => Event::PriorityClassDeleted(name),
            ("Namespace", 2) => Event::NamespaceDeleted(name),
            ("Node", 2) => Event::NodeDeleted(name),
            ("Topology", 2) => Event::TopologyDeleted(name),
            ("LocalQueue", 3) => Event::LocalQueueDeleted {
                namespace: parts[1].into(),
                name,
            },
            ("Workload" | "Job", 3) => {
                Event::WorkloadDeleted(self.key(&format!("{}/{name}", parts[1])))
            }
            _ => {
                return Err(format!(
                    "cannot delete `{item}`: use ns/name, Kind/name or Kind/ns/name"
                ));
            }
        })
    }

    /// Loads manifests and applies them as events; the first error stops the apply.
    fn apply_yaml(&mut self, source: &str, yaml: &str) -> Result<(), String> {
        if yaml.trim().is_empty() {
            return Ok(());
        }
        for m in api::manifest::load_str(source, yaml).map_err(|e| e.to_string())? {
            let ev = self.event_for(source, m)?;
            self.engine
                .apply(self.now, ev)
                .map_err(|e| format!("{source}: engine rejected: {e}"))?;
        }
        Ok(())
    }

    fn event_for(&mut self, source: &str, m: Manifest) -> Result<Event, String> {
        Ok(match m {
            Manifest::ResourceFlavor(o) => Event::ResourceFlavorUpserted(o),
            Manifest::ClusterQueue(o) => Event::ClusterQueueUpserted(o),
            Manifest::AdmissionCheck(o) => Event::AdmissionCheckUpserted(o),
            Manifest::Cohort(o) => Event::CohortUpserted(o),
            Manifest::LocalQueue(o) => Event::LocalQueueUpserted(o),
            Manifest::WorkloadPriorityClass(o) => Event::WorkloadPriorityClassUpserted(o),
            Manifest::PriorityClass(o) => Event::PriorityClassUpserted {
                name: o.metadata.name.clone().unwrap_or_default(),
                value: o.value,
                global_default: o.global_default.unwrap_or(false),
            },
            // The API server labels every namespace with its name.
            Manifest::Namespace(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                let mut labels = o.metadata.labels.clone().unwrap_or_default();
                labels.insert("kubernetes.io/metadata.name".into(), name.clone());
                Event::NamespaceUpserted { name, labels }
            }
            Manifest::Workload(o) => self.track(*o),
            Manifest::Job(job) => {
                let ns = job
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into());
                let alias = format!("{ns}/{}", job.metadata.name.clone().unwrap_or_default());
                let wl = kuota::integrations::batch_job::workload_for(&job)
                    .map_err(|e| format!("{alias}: {e}"))?;
                self.aliases.insert(
                    alias,
                    WorkloadKey::new(ns.as_str(), wl.metadata.name.clone().unwrap_or_default()),
                );
                self.track(wl)
            }
            Manifest::Topology(t) => Event::TopologyUpserted(t),
            // A check's parameters: the engine does not read them.
            Manifest::ProvisioningRequestConfig(_)
            | Manifest::MultiKueueConfig(_)
            | Manifest::MultiKueueCluster(_) => {
                return Err(format!("{source}: {}: not a scenario kind", m.kind()));
            }
            // `load_str` keeps no kinds beyond its own.
            Manifest::Foreign(o) => {
                return Err(format!("{source}: {}: not a scenario kind", o.kind));
            }
            Manifest::Node(node) => {
                let status = node.status.clone().unwrap_or_default();
                let mut allocatable = BTreeMap::new();
                for (r, q) in status.allocatable.iter().flatten() {
                    let v = api::quantity::resource_value(r, q)
                        .map_err(|e| format!("{source}: Node allocatable {r}: {e}"))?;
                    allocatable.insert(r.clone(), v);
                }
                let name = node.metadata.name.clone().unwrap_or_default();
                let external = self
                    .nodes
                    .remove(&name)
                    .map(|n| n.external)
                    .unwrap_or_default();
                self.nodes.insert(
                    name,
                    NodeInfo {
                        labels: node.metadata.labels.clone().unwrap_or_default(),
                        allocatable,
                        external,
                    },
                );
                Event::NodeUpserted(node)
            }
        })
    }

    fn track(&mut self, wl: api::Workload) -> Event {
        let ns = wl
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        self.workloads.insert(WorkloadKey::new(
            ns,
            wl.metadata.name.clone().unwrap_or_default(),
        ));
        Event::WorkloadUpserted(wl)
    }
}

/// A quantity of `resource` in the engine's unit for it (milli for cpu, whole units else).
fn amount(resource: &str, v: &serde_norway::Value) -> Result<i64, String> {
    let s = match v {
        serde_norway::Value::String(s) => s.clone(),
        serde_norway::Value::Number(n) => n.to_string(),
        other => return Err(format!("not a quantity: {other:?}")),
    };
    api::quantity::resource_value_str(resource, &s).map_err(|e| format!("quantity `{s}`: {e}"))
}

/// How a failing step is named in the report: its action, after its time if it sets one.
fn step_kind(step: &Step) -> String {
    let kind = [
        (step.apply.is_some(), "apply"),
        (step.schedule.is_some(), "schedule"),
        (step.expect.is_some(), "expect"),
        (step.finish.is_some(), "finish"),
        (step.delete.is_some(), "delete"),
        (step.evict_complete.is_some(), "evict-complete"),
        (step.finishing.is_some(), "finishing"),
        (step.node_usage.is_some(), "node-usage"),
        (step.workloads.is_some(), "workloads"),
    ]
    .into_iter()
    .find_map(|(set, k)| set.then_some(k))
    .unwrap_or("?");
    match step.at {
        Some(at) => format!("at {at}, {kind}"),
        None => kind.to_string(),
    }
}
