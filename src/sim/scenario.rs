//! A scenario: Kueue manifests for the cluster plus a generator config for the
//! workloads, loaded from a directory or from the built-in demo.
//!
//! Directory layout: `generator.yaml` (or `.yml`) is the workload generator;
//! every other `*.yaml`/`*.yml` file holds manifests, read in file-name order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use super::SimError;
use super::generator::{
    CLASS_LABEL, ExistingObjects, GeneratorConfig, RUNNING_TIME_LABEL, SimWorkload,
};
use super::nodes::{NODES_FILES, NodesConfig};
use super::trace;
use crate::api;
use crate::api::manifest::{self, Manifest};
use crate::api::quantity::{QuantityError, resource_value};
use crate::engine::{Event, Millis, WorkloadKey};
use crate::integrations::batch_job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

mod check;
mod job_kinds;
#[cfg(test)]
mod job_tests;
#[cfg(test)]
mod tests;

pub use self::check::{Diagnostic, check};

/// The built-in demo, embedded so `kuota` works from any directory.
const DEMO_CLUSTER: &str = include_str!("../../examples/demo/cluster.yaml");
const DEMO_GENERATOR: &str = include_str!("../../examples/demo/generator.yaml");

/// Built-in scenarios: (name, files as (file name, text)). Each is the
/// directory `examples/<name>/`, embedded so the binary works anywhere; a test
/// checks every embedded copy against the files.
pub const BUILTIN: &[(&str, &[(&str, &str)])] = &[
    (
        "demo",
        &[
            ("cluster.yaml", DEMO_CLUSTER),
            ("generator.yaml", DEMO_GENERATOR),
        ],
    ),
    (
        "gpu-gangs",
        &[
            (
                "cluster.yaml",
                include_str!("../../examples/gpu-gangs/cluster.yaml"),
            ),
            (
                "generator.yaml",
                include_str!("../../examples/gpu-gangs/generator.yaml"),
            ),
            (
                "nodes.yaml",
                include_str!("../../examples/gpu-gangs/nodes.yaml"),
            ),
        ],
    ),
    (
        "kueue-baseline",
        &[(
            "generator.yaml",
            include_str!("../../examples/kueue-baseline/generator.yaml"),
        )],
    ),
    (
        "kueue-large-scale",
        &[(
            "generator.yaml",
            include_str!("../../examples/kueue-large-scale/generator.yaml"),
        )],
    ),
    (
        "kueue-tas",
        &[
            (
                "cluster.yaml",
                include_str!("../../examples/kueue-tas/cluster.yaml"),
            ),
            (
                "generator.yaml",
                include_str!("../../examples/kueue-tas/generator.yaml"),
            ),
            (
                "nodes.yaml",
                include_str!("../../examples/kueue-tas/nodes.yaml"),
            ),
        ],
    ),
];

/// File names recognised as the generator config.
const GENERATOR_FILES: [&str; 2] = ["generator.yaml", "generator.yml"];

/// Kubernetes sets this label on every namespace; selectors may use it.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A named YAML text (a file, or an embedded one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }

    pub fn read(path: &Path) -> Result<Self, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::Io {
            path: path.display().to_string(),
            source: Arc::new(e),
        })?;
        Ok(Self::new(path.display().to_string(), text))
    }

    fn base_name(&self) -> &str {
        Path::new(&self.name)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
    }

    fn is_generator(&self) -> bool {
        GENERATOR_FILES.contains(&self.base_name())
    }

    /// A node-pool spec (`nodes.yaml`), see [`super::nodes`].
    fn is_nodes(&self) -> bool {
        NODES_FILES.contains(&self.base_name())
    }

    /// A trace (`*.csv`, `*.jsonl`), see [`super::trace`].
    fn is_trace(&self) -> bool {
        trace::is_trace_name(self.base_name())
    }
}

/// Cluster manifests and an optional generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    /// Every input except the generator, told apart by file name: Kueue /
    /// Kubernetes manifests, `nodes.yaml` node-pool specs, and `*.csv` /
    /// `*.jsonl` traces.
    pub manifests: Vec<SourceFile>,
    pub generator: Option<SourceFile>,
}

/// What the simulator needs to know about a ClusterQueue up front.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CqInfo {
    pub cohort: Option<String>,
    /// Nominal quota per resource (in the engine's unit for it), summed over flavors.
    pub nominal: BTreeMap<String, i64>,
    /// Nominal quota per (flavor, resource), in the engine's unit for the resource.
    pub nominal_by_flavor: BTreeMap<(String, String), i64>,
}

/// A scenario resolved into engine events and workloads.
#[derive(Clone, Debug)]
pub struct Plan {
    pub name: String,
    /// Cluster objects in dependency order, each with a label for errors.
    pub setup: Vec<(String, Event)>,
    /// Sorted by arrival.
    pub workloads: Vec<SimWorkload>,
    pub cluster_queues: BTreeMap<String, CqInfo>,
    /// Total nominal quota per resource (ClusterQueues and Cohorts), in the engine's unit.
    pub capacity: BTreeMap<String, i64>,
    /// The ProvisioningRequest checks the simulator plays, with their node delays.
    pub provisioning: BTreeMap<String, super::provisioning::Delay>,
}

impl Scenario {
    /// The built-in demo (`examples/demo/`).
    pub fn demo() -> Self {
        Self {
            name: "demo".to_string(),
            manifests: vec![SourceFile::new("examples/demo/cluster.yaml", DEMO_CLUSTER)],
            generator: Some(SourceFile::new(
                "examples/demo/generator.yaml",
                DEMO_GENERATOR,
            )),
        }
    }

    /// A built-in scenario by name (see [`BUILTIN`]).
    pub fn builtin(name: &str) -> Option<Self> {
        let (n, files) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        let mut s = Self {
            name: n.to_string(),
            manifests: Vec::new(),
            generator: None,
        };
        for (file, text) in *files {
            let f = SourceFile::new(format!("examples/{n}/{file}"), *text);
            if f.is_generator() {
                s.generator = Some(f);
            } else {
                s.manifests.push(f);
            }
        }
        Some(s)
    }

    /// Names of the built-in scenarios.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    /// Adds a trace file (CSV or JSONL) to the scenario.
    pub fn with_trace(mut self, trace: SourceFile) -> Result<Self, SimError> {
        if !trace.is_trace() {
            return Err(SimError::Scenario {
                source_name: trace.name,
                message: "a trace must be a .csv or .jsonl file".to_string(),
            });
        }
        self.manifests.push(trace);
        Ok(self)
    }

    /// Loads a scenario directory.
    pub fn from_dir(dir: &Path) -> Result<Self, SimError> {
        let io = |e: std::io::Error| SimError::Io {
            path: dir.display().to_string(),
            source: Arc::new(e),
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let known = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "yaml" | "yml" | "csv" | "jsonl"));
            if known && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        let mut scenario = Self {
            name: dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("scenario")
                .to_string(),
            manifests: Vec::new(),
            generator: None,
        };
        for p in paths {
            let f = SourceFile::read(&p)?;
            if f.is_generator() {
                scenario.generator = Some(f);
            } else {
                scenario.manifests.push(f);
            }
        }
        if scenario.manifests.is_empty() && scenario.generator.is_none() {
            return Err(SimError::Scenario {
                source_name: dir.display().to_string(),
                message: "no .yaml files (expected manifests and a generator.yaml)".to_string(),
            });
        }
        Ok(scenario)
    }

    /// Loads every manifest, generates the workloads and orders the cluster
    /// objects so that references resolve (flavors, classes, namespaces,
    /// cohorts, ClusterQueues, LocalQueues).
    pub fn plan(&self, seed: u64) -> Result<Plan, SimError> {
        let (mut objs, traces) = self.load_inputs()?;
        let existing = objs.existing();
        let mut workloads = objs.manifest_workloads(&existing)?;
        for (f, rows) in &traces {
            workloads.extend(trace::workloads(&f.name, rows, &existing.local_queues)?);
        }
        if let Some(g) = &self.generator {
            workloads.extend(objs.add_generated(g, &existing, seed)?);
        }
        // Stable: manifest workloads (arrival 0) stay ahead of generated ones at 0.
        workloads.sort_by_key(|w| w.arrival);
        self.add_workload_namespaces(&mut objs, &workloads)?;
        let (cluster_queues, capacity) = objs.nominal_capacity()?;
        let provisioning = objs.provisioning()?;
        Ok(Plan {
            name: self.name.clone(),
            setup: objs.into_events(),
            workloads,
            cluster_queues,
            capacity,
            provisioning,
        })
    }

    /// Reads every input but the generator: node pools (topologies and nodes)
    /// and manifests into cluster objects, traces into rows for later, since
    /// their LocalQueues may be defined in any file.
    fn load_inputs(&self) -> Result<(Objects, Vec<ParsedTrace<'_>>), SimError> {
        let mut objs = Objects::default();
        let mut traces = Vec::new();
        for f in &self.manifests {
            if f.is_trace() {
                traces.push((f, trace::parse(&f.name, &f.text)?));
                continue;
            }
            if f.is_nodes() {
                let expanded = NodesConfig::from_yaml(&f.name, &f.text)?.expand(&f.name)?;
                objs.topologies
                    .extend(expanded.topology.map(|t| (f.name.clone(), t)));
                objs.nodes.extend(
                    expanded
                        .nodes
                        .into_iter()
                        .map(|n| (f.name.clone(), Box::new(n))),
                );
                continue;
            }
            let loaded = manifest::load_str_with(&f.name, &f.text, &job_kinds::JobKinds).map_err(
                |source| SimError::Manifest {
                    source_name: f.name.clone(),
                    source: Box::new(source),
                },
            )?;
            for m in loaded {
                objs.add(&f.name, m)?;
            }
        }
        Ok((objs, traces))
    }

    /// Rejects a workload key defined twice and creates the namespace of every
    /// workload, which Kueue's namespace selectors need to see.
    fn add_workload_namespaces(
        &self,
        objs: &mut Objects,
        workloads: &[SimWorkload],
    ) -> Result<(), SimError> {
        let mut seen = BTreeSet::new();
        for w in workloads {
            if !seen.insert(&w.key) {
                return Err(SimError::Scenario {
                    source_name: self.name.clone(),
                    message: format!("workload {} is defined twice", w.key),
                });
            }
            objs.namespaces
                .entry(w.key.namespace.to_string())
                .or_default();
        }
        Ok(())
    }
}

/// A trace file with its parsed rows (line number, row).
type ParsedTrace<'a> = (&'a SourceFile, Vec<(usize, trace::TraceRow)>);

impl Plan {
    /// Moves the workload objects out (leaving empty ones), for
    /// [`super::Simulation::with_objects`]: a one-shot run then holds each
    /// object once. The plan can no longer be run by itself afterwards.
    pub fn take_objects(&mut self) -> Vec<api::Workload> {
        self.workloads
            .iter_mut()
            .map(|w| std::mem::take(&mut w.object))
            .collect()
    }
}

/// A nominal quota that is not a quantity, with the flavor and resource it is for.
struct NominalError {
    flavor: String,
    resource: String,
    source: QuantityError,
}

impl NominalError {
    fn into_sim_error(self, file: &str, kind: &str, name: &str) -> SimError {
        let at = format!(
            "{kind} {name}: flavor {} resource {}: nominalQuota",
            self.flavor, self.resource
        );
        SimError::field(file, at, self.source)
    }
}

/// Every nominal quota of `groups` as (flavor, resource, value).
fn nominal_quotas(
    groups: &[api::ResourceGroup],
) -> impl Iterator<Item = Result<(&str, &str, i64), NominalError>> {
    groups.iter().flat_map(|g| {
        g.flavors.iter().flat_map(|f| {
            f.resources.iter().map(|r| {
                resource_value(&r.name, &r.nominal_quota)
                    .map(|m| (f.name.as_str(), r.name.as_str(), m))
                    .map_err(|source| NominalError {
                        flavor: f.name.clone(),
                        resource: r.name.clone(),
                        source,
                    })
            })
        })
    })
}

/// Sums nominal quotas per resource over all flavors.
fn nominal_per_resource(
    groups: &[api::ResourceGroup],
) -> Result<BTreeMap<String, i64>, NominalError> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for quota in nominal_quotas(groups) {
        let (_, resource, m) = quota?;
        let e = out.entry(resource.to_string()).or_default();
        *e = e.saturating_add(m);
    }
    Ok(out)
}

/// Nominal quota per (flavor, resource).
fn nominal_per_flavor(
    groups: &[api::ResourceGroup],
) -> Result<BTreeMap<(String, String), i64>, NominalError> {
    nominal_quotas(groups)
        .map(|q| q.map(|(f, r, m)| ((f.to_string(), r.to_string()), m)))
        .collect()
}

/// Nominal quota per resource, in the engine's unit for it (see [`Plan::capacity`]).
type Capacity = BTreeMap<String, i64>;

/// Cluster objects by kind, each with the file it came from.
#[derive(Default)]
struct Objects {
    flavors: Vec<(String, api::ResourceFlavor)>,
    priority_classes: Vec<(String, api::WorkloadPriorityClass)>,
    cohorts: Vec<(String, api::Cohort)>,
    cluster_queues: Vec<(String, api::ClusterQueue)>,
    local_queues: Vec<(String, api::LocalQueue)>,
    workloads: Vec<(String, api::Workload)>,
    topologies: Vec<(String, api::Topology)>,
    /// AdmissionCheck names (read for `kuota check`).
    admission_checks: Vec<String>,
    /// The AdmissionChecks the simulator plays (the ProvisioningRequest check's), with
    /// their files.
    played_checks: Vec<(String, api::AdmissionCheck)>,
    nodes: Vec<(String, Box<k8s_openapi::api::core::v1::Node>)>,
    /// scheduling.k8s.io PriorityClasses: (file, name, value, globalDefault).
    pod_priority_classes: Vec<(String, String, i32, bool)>,
    /// name -> labels.
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

/// `Kind namespace/name` of a job, for errors.
fn job_at(kind: &str, meta: &ObjectMeta) -> String {
    format!(
        "{kind} {}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or("")
    )
}

impl Objects {
    fn add(&mut self, src: &str, m: Manifest) -> Result<(), SimError> {
        let s = src.to_string();
        match m {
            Manifest::ResourceFlavor(o) => self.flavors.push((s, o)),
            Manifest::WorkloadPriorityClass(o) => self.priority_classes.push((s, o)),
            Manifest::Cohort(o) => self.cohorts.push((s, o)),
            Manifest::ClusterQueue(o) => self.cluster_queues.push((s, o)),
            // The simulator plays the ProvisioningRequest check's controller; no other
            // check's: the engine never learns of those, so a ClusterQueue naming one stays
            // inactive (`kuota check` warns).
            Manifest::AdmissionCheck(o) => {
                self.admission_checks
                    .push(o.metadata.name.clone().unwrap_or_default());
                if super::provisioning::Delay::of_check(&o).is_some() {
                    self.played_checks.push((s, o));
                }
            }
            // A check's parameters: nothing in a simulation reads them.
            Manifest::ProvisioningRequestConfig(_)
            | Manifest::MultiKueueConfig(_)
            | Manifest::MultiKueueCluster(_) => {}
            Manifest::LocalQueue(o) => {
                if let Some(ns) = &o.metadata.namespace {
                    self.namespaces.entry(ns.clone()).or_default();
                }
                self.local_queues.push((s, o));
            }
            Manifest::Workload(o) => self.workloads.push((s, *o)),
            Manifest::Job(job) => {
                // The Workload Kueue would create for the Job; the simulator's
                // labels (runtime, class) are read from the Job itself.
                let wl = batch_job::workload_for(&job)
                    .map_err(|e| SimError::field(&s, job_at("Job", &job.metadata), e))?;
                self.add_job_workload(s, wl, &job.metadata);
            }
            Manifest::Foreign(obj) => {
                let at = job_at(&obj.kind, &obj.metadata);
                match job_kinds::standalone(&obj).map_err(|e| SimError::field(&s, &at, e))? {
                    job_kinds::Standalone::Workload(wl) => {
                        self.add_job_workload(s, *wl, &obj.metadata);
                    }
                    // What a job refers to is read with the job, in the cluster.
                    job_kinds::Standalone::Referenced => {}
                    job_kinds::Standalone::NeedsCluster(why) => {
                        return Err(SimError::Scenario {
                            source_name: s,
                            message: format!(
                                "{at}: the simulator cannot run a {} from its manifest alone: \
                                 {why}; give its Workload instead",
                                obj.kind
                            ),
                        });
                    }
                }
            }
            Manifest::PriorityClass(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                self.pod_priority_classes.push((
                    s,
                    name,
                    o.value,
                    o.global_default.unwrap_or(false),
                ));
            }
            Manifest::Namespace(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                let labels = o.metadata.labels.clone().unwrap_or_default();
                self.namespaces.entry(name).or_default().extend(labels);
            }
            // Topology-aware placement: the engine places on these nodes.
            Manifest::Topology(o) => self.topologies.push((s, o)),
            Manifest::Node(o) => self.nodes.push((s, o)),
        }
        Ok(())
    }

    /// A job's Workload, with the simulator's labels (runtime, class) taken from the job.
    fn add_job_workload(&mut self, src: String, mut wl: api::Workload, job: &ObjectMeta) {
        let job_labels = job.labels.clone().unwrap_or_default();
        let labels = wl.metadata.labels.get_or_insert_with(BTreeMap::new);
        for key in [RUNNING_TIME_LABEL, CLASS_LABEL] {
            if let Some(v) = job_labels.get(key) {
                labels.entry(key.to_string()).or_insert_with(|| v.clone());
            }
        }
        self.workloads.push((src, wl));
    }

    /// What the generator may refer to instead of creating: the manifests'
    /// ClusterQueues, LocalQueues (with their ClusterQueue) and ResourceFlavors.
    fn existing(&self) -> ExistingObjects {
        ExistingObjects {
            cluster_queues: self
                .cluster_queues
                .iter()
                .filter_map(|(_, c)| c.metadata.name.clone())
                .collect(),
            local_queues: self
                .local_queues
                .iter()
                .map(|(_, lq)| {
                    (
                        (
                            lq.metadata.namespace.clone().unwrap_or_default(),
                            lq.metadata.name.clone().unwrap_or_default(),
                        ),
                        lq.spec.cluster_queue.clone(),
                    )
                })
                .collect(),
            flavors: self
                .flavors
                .iter()
                .filter_map(|(_, f)| f.metadata.name.clone())
                .collect(),
        }
    }

    /// Runs the generator `g`, adds the ResourceFlavors, ClusterQueues,
    /// LocalQueues and namespaces it creates, and returns its workloads.
    fn add_generated(
        &mut self,
        g: &SourceFile,
        existing: &ExistingObjects,
        seed: u64,
    ) -> Result<Vec<SimWorkload>, SimError> {
        let cfg = GeneratorConfig::from_yaml(&g.name, &g.text)?;
        let generated = cfg.generate(&g.name, existing, seed)?;
        let src = || format!("{} (generated)", g.name);
        self.flavors
            .extend(generated.flavors.into_iter().map(|o| (src(), o)));
        self.cluster_queues
            .extend(generated.cluster_queues.into_iter().map(|o| (src(), o)));
        self.local_queues
            .extend(generated.local_queues.into_iter().map(|o| (src(), o)));
        self.namespaces.extend(
            generated
                .namespaces
                .into_iter()
                .map(|n| (n, BTreeMap::new())),
        );
        Ok(generated.workloads)
    }

    /// Nominal quota per ClusterQueue (with its cohort), and the cluster's
    /// total per resource: ClusterQueues' quotas plus Cohorts' own.
    fn nominal_capacity(&self) -> Result<(BTreeMap<String, CqInfo>, Capacity), SimError> {
        let mut cluster_queues = BTreeMap::new();
        let mut capacity = Capacity::new();
        for (src, cq) in &self.cluster_queues {
            let name = cq.metadata.name.clone().unwrap_or_default();
            let nominal = nominal_per_resource(&cq.spec.resource_groups)
                .map_err(|e| e.into_sim_error(src, "ClusterQueue", &name))?;
            for (r, m) in &nominal {
                *capacity.entry(r.clone()).or_default() += m;
            }
            // Already parsed above, so this cannot fail; keep the error path anyway.
            let nominal_by_flavor = nominal_per_flavor(&cq.spec.resource_groups)
                .map_err(|e| e.into_sim_error(src, "ClusterQueue", &name))?;
            cluster_queues.insert(
                name,
                CqInfo {
                    cohort: cq.spec.cohort().map(str::to_string),
                    nominal,
                    nominal_by_flavor,
                },
            );
        }
        for (src, c) in &self.cohorts {
            let name = c.metadata.name.clone().unwrap_or_default();
            let nominal = nominal_per_resource(&c.spec.resource_groups)
                .map_err(|e| e.into_sim_error(src, "Cohort", &name))?;
            for (r, m) in nominal {
                *capacity.entry(r).or_default() += m;
            }
        }
        Ok((cluster_queues, capacity))
    }

    /// Workloads written as manifests: they arrive at time 0 and run for the
    /// time in their runtime label (the label Kueue's perf runner uses).
    fn manifest_workloads(&self, existing: &ExistingObjects) -> Result<Vec<SimWorkload>, SimError> {
        let mut out = Vec::new();
        for (src, wl) in &self.workloads {
            let namespace = wl
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_string());
            let name = wl.metadata.name.clone().unwrap_or_default();
            let object = format!("Workload {namespace}/{name}");
            let err = |message: String| SimError::Scenario {
                source_name: src.clone(),
                message: format!("{object}: {message}"),
            };
            let labels = wl.metadata.labels.clone().unwrap_or_default();
            let runtime: Millis = labels
                .get(RUNNING_TIME_LABEL)
                .ok_or_else(|| {
                    err(format!(
                        "set label {RUNNING_TIME_LABEL} to its runtime in ms"
                    ))
                })?
                .parse()
                .map_err(|e| {
                    SimError::field(src, format!("{object}: label {RUNNING_TIME_LABEL}"), e)
                })?;
            if runtime < 0 {
                return Err(err(format!(
                    "label {RUNNING_TIME_LABEL}: must not be negative"
                )));
            }
            let cluster_queue = wl
                .spec
                .queue()
                .and_then(|q| {
                    existing
                        .local_queues
                        .get(&(namespace.clone(), q.to_string()))
                })
                .cloned()
                .unwrap_or_default();
            let mut total_requests: BTreeMap<String, i64> = BTreeMap::new();
            for ps in &wl.spec.pod_sets {
                let containers = ps
                    .template
                    .spec
                    .as_ref()
                    .map(|s| s.containers.as_slice())
                    .unwrap_or_default();
                for c in containers {
                    let reqs = c.resources.as_ref().and_then(|r| r.requests.as_ref());
                    for (r, q) in reqs.into_iter().flatten() {
                        let m = resource_value(r, q).map_err(|e| {
                            let at = format!("{object}: pod set {} request {r}", ps.name);
                            SimError::field(src, at, e)
                        })?;
                        let e = total_requests.entry(r.clone()).or_default();
                        *e = e.saturating_add(m.saturating_mul(i64::from(ps.count)));
                    }
                }
            }
            let mut object = wl.clone();
            object.metadata.namespace = Some(namespace.clone());
            out.push(SimWorkload {
                key: WorkloadKey::new(namespace, name),
                class: labels
                    .get(CLASS_LABEL)
                    .cloned()
                    .unwrap_or_else(|| "manifest".to_string()),
                cluster_queue,
                arrival: 0,
                runtime,
                total_requests,
                object,
                never_ready: false,
            });
        }
        Ok(out)
    }

    /// The played checks' delays; a bad delay annotation is an error naming the file and
    /// the check.
    fn provisioning(&self) -> Result<BTreeMap<String, super::provisioning::Delay>, SimError> {
        let mut out = BTreeMap::new();
        for (src, ac) in &self.played_checks {
            let name = ac.metadata.name.clone().unwrap_or_default();
            if let Some(delay) = super::provisioning::Delay::of_check(ac) {
                let delay = delay.map_err(|message| SimError::Scenario {
                    source_name: src.clone(),
                    message: format!("AdmissionCheck {name}: {message}"),
                })?;
                out.insert(name, delay);
            }
        }
        Ok(out)
    }

    fn into_events(self) -> Vec<(String, Event)> {
        let mut ev = Vec::new();
        let label = |src: &str, kind: &str, name: &Option<String>| {
            format!("{kind} {} ({src})", name.as_deref().unwrap_or(""))
        };
        // Topologies and nodes first: flavors refer to topologies by name.
        for (s, o) in self.topologies {
            ev.push((
                label(&s, "Topology", &o.metadata.name),
                Event::TopologyUpserted(o),
            ));
        }
        for (s, o) in self.nodes {
            ev.push((label(&s, "Node", &o.metadata.name), Event::NodeUpserted(o)));
        }
        for (s, o) in self.flavors {
            ev.push((
                label(&s, "ResourceFlavor", &o.metadata.name),
                Event::ResourceFlavorUpserted(o),
            ));
        }
        for (s, o) in self.priority_classes {
            ev.push((
                label(&s, "WorkloadPriorityClass", &o.metadata.name),
                Event::WorkloadPriorityClassUpserted(o),
            ));
        }
        for (s, name, value, global_default) in self.pod_priority_classes {
            ev.push((
                format!("PriorityClass {name} ({s})"),
                Event::PriorityClassUpserted {
                    name,
                    value,
                    global_default,
                },
            ));
        }
        for (name, mut labels) in self.namespaces {
            labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.clone());
            ev.push((
                format!("Namespace {name}"),
                Event::NamespaceUpserted { name, labels },
            ));
        }
        for (s, o) in self.cohorts {
            ev.push((
                label(&s, "Cohort", &o.metadata.name),
                Event::CohortUpserted(o),
            ));
        }
        // Active, as the check's controller reports it once its config is there.
        for (s, mut o) in self.played_checks {
            o.status = Some(api::AdmissionCheckStatus {
                conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                    type_: crate::api::constants::ADMISSION_CHECK_ACTIVE.into(),
                    status: "True".into(),
                    reason: "Active".into(),
                    message: "The admission check is active".into(),
                    observed_generation: None,
                    last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ),
                }],
            });
            ev.push((
                label(&s, "AdmissionCheck", &o.metadata.name),
                Event::AdmissionCheckUpserted(o),
            ));
        }
        for (s, o) in self.cluster_queues {
            ev.push((
                label(&s, "ClusterQueue", &o.metadata.name),
                Event::ClusterQueueUpserted(o),
            ));
        }
        for (s, o) in self.local_queues {
            ev.push((
                label(&s, "LocalQueue", &o.metadata.name),
                Event::LocalQueueUpserted(o),
            ));
        }
        ev
    }
}
