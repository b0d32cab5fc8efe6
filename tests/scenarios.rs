//! Runs every scenario in tests/scenarios/ against the engine (format: tests/scenarios/README.md).
//! `KUOTA_SCENARIO=name cargo test --test scenarios` runs one.

mod scenario;

use kuota::api;
use kuota::api::manifest::Manifest;
use kuota::engine::{
    Decision, Engine, EngineConfig, Event, FairPreemptionStrategy, Millis, WorkloadKey,
    WorkloadState,
};
use scenario::{
    AdmittedFields, Expect, OneOrMany, PendingFields, Placement, Scenario, Step, Strategy,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;

#[test]
fn scenarios() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let only = std::env::var("KUOTA_SCENARIO")
        .ok()
        .filter(|s| !s.is_empty());
    let (mut cases, mut failures) = load_cases(&root);
    let mut names = BTreeSet::new();
    for c in &cases {
        if !names.insert(c.name.clone()) {
            failures.push(format!("{}: duplicate scenario name `{}`", c.file, c.name));
        }
    }
    // `KUOTA_SCENARIO` names one scenario, one kueue case, or a whole kueue suite.
    cases.retain(|c| {
        only.as_ref().is_none_or(|o| {
            *o == c.name || *o == c.suite || c.name.split('@').next() == Some(o.as_str())
        })
    });
    if let Some(o) = &only {
        failures.retain(|f| f.contains(o.as_str()));
        assert!(
            !cases.is_empty() || !failures.is_empty(),
            "KUOTA_SCENARIO={o}: no such scenario or kueue suite"
        );
    }
    let ran = cases.len() + failures.len();
    let mut pending = 0;
    for c in &cases {
        // A panic in one scenario must not hide the others.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Runner::new(&c.file, &c.sc, c.placement).run(&c.fixtures, &c.sc)
        })) {
            Ok(errs) if errs.is_empty() && c.sc.pending.is_some() => failures.push(format!(
                "{}: marked pending ({}) but passes: remove `pending`",
                c.file,
                c.sc.pending.as_deref().unwrap_or_default()
            )),
            Ok(errs) if errs.is_empty() => {}
            Ok(_) if c.sc.pending.is_some() => pending += 1,
            Ok(errs) => failures.push(format!("{}:\n{}", c.file, errs.join("\n"))),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                failures.push(format!("{}: panicked: {}", c.file, msg.unwrap_or_default()));
            }
        }
    }
    if !failures.is_empty() {
        eprintln!("\n{}\n", failures.join("\n\n"));
        panic!(
            "{} of {ran} scenarios failed (details above)",
            failures.len()
        );
    }
    eprintln!(
        "{} scenarios passed, {pending} kueue cases pending (they still fail, as marked)",
        ran - pending
    );
}

/// One runnable scenario: a file of tests/scenarios/, or one case of a kueue suite.
struct Case {
    /// What failures are reported under (`tests/scenarios/kueue/suite.yaml#case`).
    file: String,
    name: String,
    /// The kueue suite it belongs to (empty for a plain scenario).
    suite: String,
    /// The suite's shared manifests, applied before the case's `objects`.
    fixtures: String,
    /// The suite's strategy for this run, unless the case sets its own.
    placement: Option<Placement>,
    sc: Rc<Scenario>,
}

/// Every scenario of tests/scenarios/*.yaml and every case of tests/scenarios/kueue/*.yaml,
/// in file order, plus one failure per file that does not parse.
fn load_cases(root: &Path) -> (Vec<Case>, Vec<String>) {
    let (mut cases, mut failures) = (Vec::new(), Vec::new());
    for (dir, is_suite) in [(root.to_path_buf(), false), (root.join("kueue"), true)] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("tests/scenarios and tests/scenarios/kueue exist")
            .map(|e| e.expect("readable dir entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for path in files {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let file = if is_suite {
                format!("tests/scenarios/kueue/{stem}.yaml")
            } else {
                format!("tests/scenarios/{stem}.yaml")
            };
            let text = std::fs::read_to_string(&path).expect("readable scenario file");
            if !is_suite {
                match scenario::parse(&text) {
                    Ok(sc) if sc.name == stem => cases.push(Case {
                        file,
                        name: stem,
                        suite: String::new(),
                        fixtures: String::new(),
                        placement: None,
                        sc: Rc::new(sc),
                    }),
                    Ok(sc) => failures.push(format!(
                        "{file}: name `{}` must equal the file name `{stem}`",
                        sc.name
                    )),
                    Err(e) => failures.push(format!("{file}: invalid scenario {e}")),
                }
                continue;
            }
            match scenario::kueue::parse(&text) {
                Ok(s) if s.suite == stem => {
                    for sc in s.cases {
                        let sc = Rc::new(sc);
                        let runs: Vec<Option<Placement>> =
                            if s.placements.is_empty() || sc.config.placement.is_some() {
                                vec![None]
                            } else {
                                s.placements.iter().copied().map(Some).collect()
                            };
                        for (i, placement) in runs.into_iter().enumerate() {
                            let name = match placement {
                                Some(p) if i > 0 => format!("{}@{}", sc.name, p.as_str()),
                                _ => sc.name.clone(),
                            };
                            cases.push(Case {
                                file: format!("{file}#{name}"),
                                name,
                                suite: stem.clone(),
                                fixtures: s.fixtures.clone(),
                                placement,
                                sc: Rc::clone(&sc),
                            });
                        }
                    }
                }
                Ok(s) => failures.push(format!(
                    "{file}: suite `{}` must equal the file name `{stem}`",
                    s.suite
                )),
                Err(e) => failures.push(format!("{file}: invalid suite {e}")),
            }
        }
    }
    (cases, failures)
}

struct Runner<'a> {
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
    fn new(file: &'a str, sc: &Scenario, run_placement: Option<Placement>) -> Self {
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
    fn run(mut self, fixtures: &str, sc: &Scenario) -> Vec<String> {
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

    /// Applies a compact workload, creating its LocalQueue `<ns>/<cq>` the first time.
    fn apply_compact(
        &mut self,
        i: usize,
        spec: &scenario::kueue::WorkloadSpec,
    ) -> Result<(), String> {
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
        let manifest = scenario::kueue::manifest(spec)?;
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
                Decision::Pending { .. } => {}
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

    /// A new admission's `topologyAssignment` must decode to the engine's placement: per
    /// domain of its levels (the hostname only, or every level), the same pod counts.
    fn check_encoding(&self, k: &WorkloadKey, admission: &api::Admission, out: &mut Vec<String>) {
        let placed = self.placed(k);
        for psa in &admission.pod_set_assignments {
            let Some(ta) = &psa.topology_assignment else {
                continue;
            };
            let mut encoded: BTreeMap<String, i32> = BTreeMap::new();
            for slice in &ta.slices {
                match slice.domains() {
                    Some(doms) => {
                        for (values, c) in doms {
                            *encoded.entry(values.join("/")).or_insert(0) += c;
                        }
                    }
                    None => out.push(format!(
                        "    {}: pod set {}: topologyAssignment slice does not decode: {slice:?}",
                        self.show(k),
                        psa.name
                    )),
                }
            }
            let mut want: BTreeMap<String, i32> = BTreeMap::new();
            for ps in placed.iter().filter(|p| p.name == psa.name) {
                for (n, c) in &ps.nodes {
                    *want.entry(self.domain_path(n, &ta.levels)).or_insert(0) += c;
                }
            }
            if encoded != want {
                out.push(format!(
                    "    {}: pod set {}: topologyAssignment disagrees with the placement\n    - {}\n    + {}",
                    self.show(k),
                    psa.name,
                    render_nodes(&want),
                    render_nodes(&encoded)
                ));
            }
        }
    }

    /// A node's label values for `levels`, joined by `/` (the hostname defaults to the name).
    fn domain_path(&self, node: &str, levels: &[String]) -> String {
        let labels = self.nodes.get(node).map(|n| &n.labels);
        levels
            .iter()
            .map(|l| {
                labels
                    .and_then(|ls| ls.get(l))
                    .cloned()
                    .or_else(|| (l == HOSTNAME).then(|| node.to_string()))
                    .unwrap_or_else(|| format!("<{node} has no {l}>"))
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// No node holds more than its allocatable (for the resources it declares) in pods
    /// of admitted and evicting workloads; nodes that got pods this cycle must also
    /// leave room for the external usage reported on them.
    fn check_nodes(&self, touched: &BTreeSet<String>, out: &mut Vec<String>) {
        let mut used: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        let mut who: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for k in &self.workloads {
            for ps in self.placed(k) {
                for (n, c) in &ps.nodes {
                    let u = used.entry(n.clone()).or_default();
                    for (r, v) in &ps.per_pod {
                        *u.entry(r.clone()).or_insert(0) += v * i64::from(*c);
                    }
                    who.entry(n.clone()).or_default().push(format!(
                        "{} {}: {c} pod(s)",
                        self.show(k),
                        ps.name
                    ));
                }
            }
        }
        for (n, u) in &used {
            let Some(info) = self.nodes.get(n) else {
                // Pods on a node that is gone: their workload must be evicting.
                continue;
            };
            for (r, alloc) in &info.allocatable {
                let got = u.get(r).copied().unwrap_or(0);
                let ext = if touched.contains(n) {
                    info.external.get(r).copied().unwrap_or(0)
                } else {
                    0
                };
                if got + ext > *alloc {
                    let q = |v: i64| api::quantity::resource_quantity_string(r, v);
                    out.push(format!(
                        "    node {n} over-committed on {r}: placed {} + external {} > allocatable {} ({})",
                        q(got),
                        q(ext),
                        q(*alloc),
                        who.get(n).map(|w| w.join(", ")).unwrap_or_default()
                    ));
                }
            }
        }
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

    fn check(&mut self, exp: &Expect, out: &mut Vec<String>) {
        let exact = !exp.partial;
        let mut wants: BTreeMap<WorkloadKey, Want> = BTreeMap::new();
        for (k, v) in exp.admitted.iter().flatten() {
            wants.insert(self.key(k), Want::Admitted(&v.0));
        }
        for (k, v) in exp.pending.iter().flatten() {
            wants.insert(self.key(k), Want::Pending(&v.0));
        }
        for k in exp.evicting.iter().flatten() {
            wants.insert(self.key(k), Want::Evicting);
        }
        for k in self
            .workloads
            .iter()
            .chain(wants.keys())
            .collect::<BTreeSet<_>>()
        {
            let state = self.state(k);
            let (want, got) = match (wants.get(k), &state) {
                (Some(w), s) => {
                    let placed = match w {
                        Want::Admitted(a) => self.got_placement(a, k),
                        _ => String::new(),
                    };
                    (render_want(w), render_got(w, s.as_ref(), &placed))
                }
                // Unlisted: fine unless its state is one the expectation lists exactly.
                (None, Some(s)) if exact => {
                    let listed = match s {
                        WorkloadState::Admitted { .. } => exp.admitted.is_some(),
                        WorkloadState::Pending { .. } => exp.pending.is_some(),
                        WorkloadState::Evicting { .. } => exp.evicting.is_some(),
                        WorkloadState::Finished => false,
                    };
                    if !listed {
                        continue;
                    }
                    ("(not listed)".to_string(), self.full(k, Some(s)))
                }
                _ => continue,
            };
            if want != got {
                let full = self.full(k, state.as_ref());
                let ctx = if full != got {
                    format!("   [{full}]")
                } else {
                    String::new()
                };
                out.push(format!(
                    "    {}:\n    - {want}\n    + {got}{ctx}",
                    self.show(k)
                ));
            }
        }
        for k in exp.finished.iter().flatten().map(|k| self.key(k)) {
            let state = self.state(&k);
            if state != Some(WorkloadState::Finished) {
                out.push(format!(
                    "    {}:\n    - finished\n    + {}",
                    self.show(&k),
                    render_state(state.as_ref())
                ));
            }
        }
        let preempted = std::mem::take(&mut self.preempted);
        if exp.preempted.is_some() || exact {
            let want: BTreeMap<WorkloadKey, &Option<String>> = exp
                .preempted
                .iter()
                .flat_map(|p| &p.0)
                .map(|(k, r)| (self.key(k), r))
                .collect();
            for k in want.keys().chain(preempted.keys()).collect::<BTreeSet<_>>() {
                let got = preempted
                    .get(k)
                    .map(|r| format!("preempted ({r})"))
                    .unwrap_or("not preempted".into());
                let expected = match want.get(k) {
                    None => "not preempted".to_string(),
                    Some(Some(r)) => format!("preempted ({r})"),
                    Some(None) if preempted.contains_key(k) => got.clone(),
                    Some(None) => "preempted".into(),
                };
                if got != expected {
                    out.push(format!(
                        "    {}:\n    - {expected}\n    + {got}",
                        self.show(k)
                    ));
                }
            }
        }
        let evicted = std::mem::take(&mut self.evicted);
        if exp.evicted.is_some() || exact {
            let want: BTreeSet<WorkloadKey> =
                exp.evicted.iter().flatten().map(|k| self.key(k)).collect();
            for k in want.symmetric_difference(&evicted) {
                let (e, g) = if want.contains(k) {
                    ("evicted", "not evicted")
                } else {
                    ("not evicted", "evicted")
                };
                out.push(format!("    {}:\n    - {e}\n    + {g}", self.show(k)));
            }
        }
        for (cq, want) in exp.usage.iter().flatten() {
            self.check_usage(cq, want, exact, out);
        }
    }

    /// The full state, with the nodes of every TAS pod set.
    fn full(&self, k: &WorkloadKey, s: Option<&WorkloadState>) -> String {
        let mut out = render_state(s);
        for ps in self.placed(k) {
            let _ = write!(out, " nodes {}{}", ps.name, render_nodes(&ps.nodes));
        }
        out
    }

    /// The actual nodes and domains of the pod sets `a` lists, as `render_want` writes them.
    fn got_placement(&self, a: &AdmittedFields, k: &WorkloadKey) -> String {
        let placed = self.placed(k);
        let find = |ps: &str| placed.iter().find(|p| p.name == ps);
        let mut s = String::new();
        for ps in a.nodes.iter().flatten().map(|(ps, _)| ps) {
            let nodes = find(ps)
                .map(|p| render_nodes(&p.nodes))
                .unwrap_or("<not placed>".into());
            let _ = write!(s, " nodes {ps}{nodes}");
        }
        for (ps, levels) in a.domains.iter().flatten() {
            for level in levels.keys() {
                let values: BTreeSet<String> = find(ps)
                    .map(|p| {
                        p.nodes
                            .keys()
                            .map(|n| {
                                self.nodes
                                    .get(n)
                                    .and_then(|i| i.labels.get(level))
                                    .cloned()
                                    .unwrap_or_else(|| format!("<{n} has no {level}>"))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let _ = write!(s, " domains {ps}{{{level}={values:?}}}");
            }
        }
        s
    }

    fn check_usage(
        &self,
        cq: &str,
        want: &BTreeMap<String, scenario::Usage>,
        exact: bool,
        out: &mut Vec<String>,
    ) {
        let Some(report) = self.engine.cluster_queue_report(cq) else {
            return out.push(format!(
                "    usage {cq}:\n    - a ClusterQueue\n    + no such ClusterQueue"
            ));
        };
        let mut keys: BTreeSet<String> = want.keys().cloned().collect();
        if exact {
            keys.extend(
                report
                    .usage
                    .iter()
                    .filter(|(_, u)| u.total != 0)
                    .map(|((f, r), _)| format!("{f}/{r}")),
            );
        }
        for fr in keys {
            let Some((f, r)) = fr.split_once('/') else {
                out.push(format!(
                    "    usage {cq}: key `{fr}` must be flavor/resource"
                ));
                continue;
            };
            let got = report
                .usage
                .get(&(f.to_string(), r.to_string()))
                .cloned()
                .unwrap_or_default();
            let w = want.get(&fr).map(|u| &u.0);
            let parse = |v: Option<&serde_norway::Value>| v.map(|v| amount(r, v)).transpose();
            let (total, borrowed) = match (
                parse(w.and_then(|w| w.total.as_ref())),
                parse(w.and_then(|w| w.borrowed.as_ref())),
            ) {
                // An unlisted pair must be unused.
                (Ok(t), Ok(b)) => (t.or(w.is_none().then_some(0)), b),
                (Err(e), _) | (_, Err(e)) => {
                    out.push(format!("    usage {cq} {fr}: {e}"));
                    continue;
                }
            };
            if total.is_some_and(|t| t != got.total) || borrowed.is_some_and(|b| b != got.borrowed)
            {
                let q = |v: Option<i64>| {
                    v.map(|v| api::quantity::resource_quantity_string(r, v))
                        .unwrap_or_else(|| "*".into())
                };
                let expected = if w.is_none() {
                    "unused (not listed)".into()
                } else {
                    format!("total {} borrowed {}", q(total), q(borrowed))
                };
                let (t, b) = (q(Some(got.total)), q(Some(got.borrowed)));
                out.push(format!(
                    "    usage {cq} {fr}:\n    - {expected}\n    + total {t} borrowed {b}"
                ));
            }
        }
    }
}

const HOSTNAME: &str = "kubernetes.io/hostname";

/// `{node-a=2, node-b=2}`.
fn render_nodes(nodes: &BTreeMap<String, i32>) -> String {
    let parts: Vec<String> = nodes.iter().map(|(n, c)| format!("{n}={c}")).collect();
    format!("{{{}}}", parts.join(", "))
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

fn step_kind(step: &Step) -> String {
    let kind = [
        (step.apply.is_some(), "apply"),
        (step.schedule.is_some(), "schedule"),
        (step.expect.is_some(), "expect"),
        (step.finish.is_some(), "finish"),
        (step.delete.is_some(), "delete"),
        (step.evict_complete.is_some(), "evict-complete"),
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

fn render_state(s: Option<&WorkloadState>) -> String {
    match s {
        None => "no such workload".into(),
        Some(WorkloadState::Pending { reason, message }) => {
            format!("pending {} {message:?}", reason.as_str())
        }
        Some(WorkloadState::Admitted { admission }) => {
            let mut s = format!("admitted {}", admission.cluster_queue);
            for ps in &admission.pod_set_assignments {
                let flavors: Vec<String> =
                    ps.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
                let count = ps.count.map(|c| c.to_string()).unwrap_or("?".into());
                let _ = write!(s, " {}{{{}}}x{count}", ps.name, flavors.join(","));
            }
            s
        }
        Some(WorkloadState::Evicting { admission }) => {
            format!("evicting from {}", admission.cluster_queue)
        }
        Some(WorkloadState::Finished) => "finished".into(),
    }
}

/// The expectation, in the shape `render_got` gives the actual state.
fn render_want(w: &Want) -> String {
    match w {
        Want::Admitted(a) => {
            let mut s = format!("admitted {}", a.cluster_queue.as_deref().unwrap_or("*"));
            for (ps, fl) in a.flavors.iter().flatten() {
                let flavors: Vec<String> = fl.iter().map(|(r, f)| format!("{r}={f}")).collect();
                let _ = write!(s, " flavors {ps}{{{}}}", flavors.join(","));
            }
            for (ps, c) in a.count.iter().flatten() {
                let _ = write!(s, " count {ps}={c}");
            }
            for (ps, nodes) in a.nodes.iter().flatten() {
                let _ = write!(s, " nodes {ps}{}", render_nodes(nodes));
            }
            for (ps, levels) in a.domains.iter().flatten() {
                for (level, values) in levels {
                    let values: BTreeSet<&String> = values.iter().collect();
                    let _ = write!(s, " domains {ps}{{{level}={values:?}}}");
                }
            }
            s
        }
        Want::Pending(p) => {
            let msg = match &p.message {
                None => String::new(),
                Some(OneOrMany::One(m)) => format!(" message containing {m:?}"),
                Some(OneOrMany::Many(ms)) => format!(" message containing all of {ms:?}"),
            };
            format!("pending {}{msg}", p.reason.as_deref().unwrap_or("*"))
        }
        Want::Evicting => "evicting".into(),
    }
}

/// The actual state restricted to what the expectation names; equals `render_want` on a match.
/// `placed` is the actual nodes/domains part, from `Runner::got_placement`.
fn render_got(w: &Want, s: Option<&WorkloadState>, placed: &str) -> String {
    match (w, s) {
        (Want::Admitted(a), Some(WorkloadState::Admitted { admission })) => {
            let find = |ps: &str| admission.pod_set_assignments.iter().find(|p| p.name == ps);
            let cq = if a.cluster_queue.is_some() {
                admission.cluster_queue.as_str()
            } else {
                "*"
            };
            let mut s = format!("admitted {cq}");
            for (ps, fl) in a.flavors.iter().flatten() {
                let flavor = |r: &String| {
                    find(ps)
                        .and_then(|p| p.flavors.get(r))
                        .cloned()
                        .unwrap_or("<none>".into())
                };
                let flavors: Vec<String> =
                    fl.keys().map(|r| format!("{r}={}", flavor(r))).collect();
                let _ = write!(s, " flavors {ps}{{{}}}", flavors.join(","));
            }
            for ps in a.count.iter().flatten().map(|(ps, _)| ps) {
                let c = find(ps)
                    .and_then(|p| p.count)
                    .map(|c| c.to_string())
                    .unwrap_or("<none>".into());
                let _ = write!(s, " count {ps}={c}");
            }
            s.push_str(placed);
            s
        }
        (Want::Pending(p), Some(WorkloadState::Pending { reason, message })) => {
            let reason_ok = p.reason.as_ref().is_none_or(|r| r == reason.as_str());
            let msg_ok = p
                .message
                .as_ref()
                .is_none_or(|m| m.items().iter().all(|n| message.contains(n)));
            if reason_ok && msg_ok {
                render_want(w)
            } else {
                render_state(s)
            }
        }
        (Want::Evicting, Some(WorkloadState::Evicting { .. })) => render_want(w),
        _ => render_state(s),
    }
}
