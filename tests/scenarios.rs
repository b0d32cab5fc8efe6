//! Runs every scenario in tests/scenarios/ against the engine (format: tests/scenarios/README.md).
//! `KUOTA_SCENARIO=name cargo test --test scenarios` runs one.

mod scenario;

use kuota::api;
use kuota::engine::{Decision, Engine, EngineConfig, Event, FairPreemptionStrategy, Millis, WorkloadKey, WorkloadState};
use scenario::{Expect, OneOrMany, Scenario, Step, Strategy};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[test]
fn scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let only = std::env::var("KUOTA_SCENARIO").ok().filter(|s| !s.is_empty());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .map(|e| e.expect("readable dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let (mut ran, mut failures) = (0, Vec::new());
    for path in &files {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if only.as_ref().is_some_and(|o| *o != stem) {
            continue;
        }
        ran += 1;
        let file = format!("tests/scenarios/{stem}.yaml");
        let text = std::fs::read_to_string(path).expect("readable scenario file");
        let sc = match scenario::parse(&text) {
            Ok(sc) if sc.name == stem => sc,
            Ok(sc) => {
                failures.push(format!("{file}: name `{}` must equal the file name `{stem}`", sc.name));
                continue;
            }
            Err(e) => {
                failures.push(format!("{file}: invalid scenario {e}"));
                continue;
            }
        };
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Runner::new(&file, &sc).run(&sc)));
        match run {
            Ok(errs) if errs.is_empty() => {}
            Ok(errs) => failures.push(format!("{file} ({}):\n{}", sc.description.trim(), errs.join("\n"))),
            Err(p) => {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                failures.push(format!("{file}: panicked: {}", msg.unwrap_or_default()));
            }
        }
    }
    if let Some(o) = &only {
        assert!(ran > 0, "KUOTA_SCENARIO={o}: no tests/scenarios/{o}.yaml");
    }
    if !failures.is_empty() {
        eprintln!("\n{}\n", failures.join("\n\n"));
        panic!("{} of {ran} scenarios failed (details above)", failures.len());
    }
    eprintln!("{ran} scenarios passed");
}

struct Runner<'a> {
    file: &'a str,
    engine: Engine,
    now: Millis,
    auto_evict: bool,
    /// Every workload key applied so far, in order.
    workloads: BTreeSet<WorkloadKey>,
    /// `ns/job-name` -> workload key.
    aliases: BTreeMap<String, WorkloadKey>,
    namespaces: BTreeSet<String>,
    preempted: BTreeMap<WorkloadKey, String>,
    evicted: BTreeSet<WorkloadKey>,
    errors: Vec<String>,
}

impl<'a> Runner<'a> {
    fn new(file: &'a str, sc: &Scenario) -> Self {
        let fair_sharing = sc.config.fair_sharing.as_ref().filter(|f| f.enable).map(|f| {
            let strategies = f.preemption_strategies.clone().unwrap_or(vec![
                Strategy::LessThanOrEqualToFinalShare,
                Strategy::LessThanInitialShare,
            ]);
            strategies
                .into_iter()
                .map(|s| match s {
                    Strategy::LessThanOrEqualToFinalShare => FairPreemptionStrategy::LessThanOrEqualToFinalShare,
                    Strategy::LessThanInitialShare => FairPreemptionStrategy::LessThanInitialShare,
                })
                .collect()
        });
        Runner {
            file,
            engine: Engine::new(EngineConfig { fair_sharing, ..Default::default() }),
            now: 0,
            auto_evict: sc.config.auto_complete_evictions.unwrap_or(true),
            workloads: BTreeSet::new(),
            aliases: BTreeMap::new(),
            namespaces: BTreeSet::new(),
            preempted: BTreeMap::new(),
            evicted: BTreeSet::new(),
            errors: Vec::new(),
        }
    }

    fn run(mut self, sc: &Scenario) -> Vec<String> {
        if let Err(e) = self.apply_yaml(&format!("{}: objects", self.file), &sc.objects) {
            self.errors.push(format!("  objects: {e}"));
            return self.errors;
        }
        for (i, step) in sc.steps.iter().enumerate() {
            let mut lines = Vec::new();
            self.step(i, step, &mut lines);
            if !lines.is_empty() {
                self.errors.push(format!("  step {i} ({}):\n{}", step_kind(step), lines.join("\n")));
            }
        }
        self.errors
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
                (Ok(()), Some(_)) => out.push("    - a load error\n    + loaded and applied without error".into()),
                (Err(e), Some(want)) => {
                    let mut needles = want.contains.items();
                    needles.push(self.file.rsplit('/').next().unwrap_or(self.file));
                    if needles.iter().any(|n| !e.contains(n)) {
                        out.push(format!("    - load error containing {needles:?}\n    + {e}"));
                    }
                }
            }
        } else if let Some(n) = step.schedule {
            for _ in 0..n {
                self.cycle(out);
            }
        } else if let Some(keys) = &step.finish {
            self.send_each(keys, Event::WorkloadFinished, out);
        } else if let Some(keys) = &step.evict_complete {
            self.send_each(keys, Event::WorkloadEvicted, out);
        } else if let Some(items) = &step.delete {
            for item in items {
                match self.delete_event(item) {
                    Ok(ev) => self.send(ev, out),
                    Err(e) => out.push(format!("    {e}")),
                }
            }
        } else if let Some(exp) = &step.expect {
            self.check(exp, out);
        }
    }

    fn send(&mut self, ev: Event, out: &mut Vec<String>) {
        if let Err(e) = self.engine.apply(self.now, ev) {
            out.push(format!("    engine rejected event: {e}"));
        }
    }

    fn send_each(&mut self, keys: &[String], f: fn(WorkloadKey) -> Event, out: &mut Vec<String>) {
        for k in keys {
            let key = self.key(k);
            self.send(f(key), out);
        }
    }

    /// Resolves `ns/name` (Workload or Job alias) to a workload key.
    fn key(&self, s: &str) -> WorkloadKey {
        if let Some(k) = self.aliases.get(s) {
            return k.clone();
        }
        let (ns, name) = s.split_once('/').unwrap_or(("default", s));
        WorkloadKey::new(ns, name)
    }

    /// The name to show for a key: the Job alias when there is one.
    fn show(&self, k: &WorkloadKey) -> String {
        self.aliases.iter().find(|(_, v)| *v == k).map(|(a, _)| a.clone()).unwrap_or_else(|| k.to_string())
    }

    fn cycle(&mut self, out: &mut Vec<String>) {
        if self.auto_evict {
            let evicting: Vec<WorkloadKey> = self
                .workloads
                .iter()
                .filter(|k| matches!(self.engine.workload_state(k), Some(WorkloadState::Evicting { .. })))
                .cloned()
                .collect();
            for k in evicting {
                self.send(Event::WorkloadEvicted(k), out);
            }
        }
        let holding: BTreeSet<WorkloadKey> = self
            .workloads
            .iter()
            .filter(|k| matches!(self.engine.workload_state(k), Some(WorkloadState::Admitted { .. } | WorkloadState::Evicting { .. })))
            .cloned()
            .collect();
        for d in self.engine.schedule(self.now) {
            match d {
                Decision::Admit { workload, .. } => {
                    if holding.contains(&workload) {
                        out.push(format!("    {} admitted again while it already held quota", self.show(&workload)));
                    }
                    match self.engine.workload_state(&workload) {
                        Some(WorkloadState::Admitted { .. }) => {}
                        other => out.push(format!("    Admit decision for {} but it is {}", self.show(&workload), render_state(other.as_ref()))),
                    }
                }
                Decision::Preempt { victim, reason, .. } => {
                    self.preempted.insert(victim, reason.as_str().to_string());
                }
                Decision::Evict { workload, .. } => {
                    self.evicted.insert(workload);
                }
                Decision::Pending { .. } => {}
            }
        }
    }

    fn delete_event(&self, item: &str) -> Result<Event, String> {
        let parts: Vec<&str> = item.split('/').collect();
        if !parts[0].starts_with(|c: char| c.is_ascii_uppercase()) {
            return Ok(Event::WorkloadDeleted(self.key(item)));
        }
        let name = || parts.last().map(|s| s.to_string()).unwrap_or_default();
        Ok(match (parts[0], parts.len()) {
            ("ResourceFlavor", 2) => Event::ResourceFlavorDeleted(name()),
            ("ClusterQueue", 2) => Event::ClusterQueueDeleted(name()),
            ("Cohort", 2) => Event::CohortDeleted(name()),
            ("WorkloadPriorityClass", 2) => Event::WorkloadPriorityClassDeleted(name()),
            ("PriorityClass", 2) => Event::PriorityClassDeleted(name()),
            ("Namespace", 2) => Event::NamespaceDeleted(name()),
            ("LocalQueue", 3) => Event::LocalQueueDeleted { namespace: parts[1].into(), name: name() },
            ("Workload" | "Job", 3) => Event::WorkloadDeleted(self.key(&format!("{}/{}", parts[1], parts[2]))),
            _ => return Err(format!("cannot delete `{item}`: use ns/name, Kind/name or Kind/ns/name")),
        })
    }

    /// Loads manifests and applies them as events; the first error stops the apply.
    fn apply_yaml(&mut self, source: &str, yaml: &str) -> Result<(), String> {
        if yaml.trim().is_empty() {
            return Ok(());
        }
        let manifests = api::manifest::load_str(source, yaml).map_err(|e| e.to_string())?;
        for m in manifests {
            for ev in self.events_for(m)? {
                self.engine.apply(self.now, ev).map_err(|e| format!("{source}: engine rejected: {e}"))?;
            }
        }
        Ok(())
    }

    /// Namespaces exist implicitly with the label the API server sets.
    fn namespace(&mut self, ns: &str, labels: Option<BTreeMap<String, String>>) -> Option<Event> {
        let explicit = labels.is_some();
        if !self.namespaces.insert(ns.to_string()) && !explicit {
            return None;
        }
        let mut labels = labels.unwrap_or_default();
        labels.insert("kubernetes.io/metadata.name".into(), ns.to_string());
        Some(Event::NamespaceUpserted { name: ns.to_string(), labels })
    }

    fn workload_events(&mut self, wl: api::Workload) -> Vec<Event> {
        let ns = wl.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        self.workloads.insert(WorkloadKey::new(&ns, wl.metadata.name.clone().unwrap_or_default()));
        self.namespace(&ns, None).into_iter().chain([Event::WorkloadUpserted(wl)]).collect()
    }

    fn events_for(&mut self, m: api::manifest::Manifest) -> Result<Vec<Event>, String> {
        use api::manifest::Manifest as M;
        Ok(match m {
            M::ResourceFlavor(o) => vec![Event::ResourceFlavorUpserted(o)],
            M::ClusterQueue(o) => vec![Event::ClusterQueueUpserted(o)],
            M::Cohort(o) => vec![Event::CohortUpserted(o)],
            M::WorkloadPriorityClass(o) => vec![Event::WorkloadPriorityClassUpserted(o)],
            M::PriorityClass(o) => vec![Event::PriorityClassUpserted {
                name: o.metadata.name.clone().unwrap_or_default(),
                value: o.value,
                global_default: o.global_default.unwrap_or(false),
            }],
            M::Namespace(o) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                self.namespace(&name, Some(o.metadata.labels.clone().unwrap_or_default())).into_iter().collect()
            }
            M::LocalQueue(o) => {
                let ns = o.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                self.namespace(&ns, None).into_iter().chain([Event::LocalQueueUpserted(o)]).collect()
            }
            M::Workload(o) => self.workload_events(*o),
            M::Job(job) => {
                let ns = job.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                let alias = format!("{ns}/{}", job.metadata.name.clone().unwrap_or_default());
                let wl = kuota::integrations::batch_job::workload_for(&job).map_err(|e| format!("{alias}: {e}"))?;
                let key = WorkloadKey::new(&ns, wl.metadata.name.clone().unwrap_or_default());
                self.aliases.insert(alias, key);
                self.workload_events(wl)
            }
            #[allow(unreachable_patterns)]
            _ => vec![],
        })
    }

    fn check(&mut self, exp: &Expect, out: &mut Vec<String>) {
        let states: BTreeMap<WorkloadKey, Option<WorkloadState>> =
            self.workloads.iter().map(|k| (k.clone(), self.engine.workload_state(k))).collect();
        let exact = !exp.partial;
        if let Some(want) = &exp.admitted {
            let want: BTreeMap<WorkloadKey, &scenario::AdmittedFields> = want.iter().map(|(k, v)| (self.key(k), &v.0)).collect();
            let is = |s: &Option<WorkloadState>| matches!(s, Some(WorkloadState::Admitted { .. }));
            self.diff_set("admitted", &states, &want, exact, is, |w| render_admitted_want(w), |w, s| match s {
                Some(WorkloadState::Admitted { admission }) => project_admission(admission, w),
                other => render_state(other.as_ref()),
            }, out);
        }
        if let Some(want) = &exp.pending {
            let wants: BTreeMap<WorkloadKey, &scenario::PendingFields> = want.iter().map(|(k, v)| (self.key(k), &v.0)).collect();
            let is = |s: &Option<WorkloadState>| matches!(s, Some(WorkloadState::Pending { .. }));
            for (k, s) in &states {
                match (wants.get(k), s) {
                    (Some(w), Some(WorkloadState::Pending { reason, message })) => {
                        let reason_ok = w.reason.as_ref().is_none_or(|r| r == reason.as_str());
                        let msg_ok = w.message.as_ref().is_none_or(|m| m.items().iter().all(|n| message.contains(n)));
                        if !reason_ok || !msg_ok {
                            out.push(format!("    pending {}:\n    - {}\n    + {} {message:?}", self.show(k), render_pending_want(w), reason.as_str()));
                        }
                    }
                    (Some(w), other) => out.push(format!("    pending {}:\n    - {}\n    + {}", self.show(k), render_pending_want(w), render_state(other.as_ref()))),
                    (None, other) if exact && is(other) => out.push(format!("    pending {}:\n    - (not pending)\n    + {}", self.show(k), render_state(other.as_ref()))),
                    _ => {}
                }
            }
            for k in wants.keys().filter(|k| !states.contains_key(*k)) {
                out.push(format!("    pending {}:\n    - pending\n    + (no such workload)", self.show(k)));
            }
        }
        if let Some(want) = &exp.evicting {
            let want: BTreeMap<WorkloadKey, ()> = want.iter().map(|k| (self.key(k), ())).collect();
            let is = |s: &Option<WorkloadState>| matches!(s, Some(WorkloadState::Evicting { .. }));
            let got = |_: &(), s: &Option<WorkloadState>| if is(s) { "evicting".into() } else { render_state(s.as_ref()) };
            self.diff_set("evicting", &states, &want, exact, is, |_| "evicting".into(), got, out);
        }
        if let Some(want) = &exp.finished {
            let want: BTreeMap<WorkloadKey, ()> = want.iter().map(|k| (self.key(k), ())).collect();
            self.diff_set("finished", &states, &want, false, |_| false, |_| "finished".into(), |_, s| render_state(s.as_ref()), out);
        }
        let preempted = std::mem::take(&mut self.preempted);
        let evicted = std::mem::take(&mut self.evicted);
        if exp.preempted.is_some() || exact {
            let want: BTreeMap<WorkloadKey, Option<String>> =
                exp.preempted.as_ref().map(|p| p.0.iter().map(|(k, r)| (self.key(k), r.clone())).collect()).unwrap_or_default();
            let keys: BTreeSet<&WorkloadKey> = want.keys().chain(preempted.keys()).collect();
            for k in keys {
                let got = preempted.get(k).cloned().unwrap_or_else(|| "(not preempted)".into());
                let expected = match want.get(k) {
                    None => "(not preempted)".to_string(),
                    Some(None) if preempted.contains_key(k) => got.clone(),
                    Some(None) => "preempted".into(),
                    Some(Some(r)) => r.clone(),
                };
                if got != expected {
                    out.push(format!("    preempted {}:\n    - {expected}\n    + {got}", self.show(k)));
                }
            }
        }
        if exp.evicted.is_some() || exact {
            let want: BTreeSet<WorkloadKey> = exp.evicted.iter().flatten().map(|k| self.key(k)).collect();
            for k in want.symmetric_difference(&evicted) {
                let (e, g) = if want.contains(k) { ("evicted", "(not evicted)") } else { ("(not evicted)", "evicted") };
                out.push(format!("    evicted {}:\n    - {e}\n    + {g}", self.show(k)));
            }
        }
        if let Some(usage) = &exp.usage {
            for (cq, want) in usage {
                self.check_usage(cq, want, exact, out);
            }
        }
    }

    /// One `-`/`+` pair per workload whose rendering differs; with `exact`, also
    /// every workload in the `is` state that the expectation does not list.
    #[allow(clippy::too_many_arguments)]
    fn diff_set<W>(
        &self,
        what: &str,
        states: &BTreeMap<WorkloadKey, Option<WorkloadState>>,
        want: &BTreeMap<WorkloadKey, W>,
        exact: bool,
        is: impl Fn(&Option<WorkloadState>) -> bool,
        render_want: impl Fn(&W) -> String,
        render_got: impl Fn(&W, &Option<WorkloadState>) -> String,
        out: &mut Vec<String>,
    ) {
        for (k, s) in states {
            match want.get(k) {
                Some(w) => {
                    let (w, got) = (render_want(w), render_got(w, s));
                    if w != got {
                        let full = render_state(s.as_ref());
                        let ctx = if full != got { format!("   [{full}]") } else { String::new() };
                        out.push(format!("    {what} {}:\n    - {w}\n    + {got}{ctx}", self.show(k)));
                    }
                }
                None if exact && is(s) => {
                    out.push(format!("    {what} {}:\n    - (not {what})\n    + {}", self.show(k), render_state(s.as_ref())))
                }
                None => {}
            }
        }
        for (k, w) in want.iter().filter(|(k, _)| !states.contains_key(*k)) {
            out.push(format!("    {what} {}:\n    - {}\n    + (no such workload)", self.show(k), render_want(w)));
        }
    }

    fn check_usage(&self, cq: &str, want: &BTreeMap<String, scenario::Usage>, exact: bool, out: &mut Vec<String>) {
        let Some(report) = self.engine.cluster_queue_report(cq) else {
            out.push(format!("    usage {cq}:\n    - a ClusterQueue\n    + (no such ClusterQueue)"));
            return;
        };
        let mut keys: BTreeSet<(String, String)> = BTreeSet::new();
        for fr in want.keys() {
            match fr.split_once('/') {
                Some((f, r)) => _ = keys.insert((f.to_string(), r.to_string())),
                None => out.push(format!("    usage {cq}: key `{fr}` must be flavor/resource")),
            }
        }
        if exact {
            keys.extend(report.usage.iter().filter(|(_, u)| u.total != 0).map(|(k, _)| k.clone()));
        }
        for (f, r) in keys {
            let fr = format!("{f}/{r}");
            let got = report.usage.get(&(f, r)).cloned().unwrap_or_default();
            let w = want.get(&fr).map(|u| &u.0);
            let total = w.and_then(|w| w.total.as_ref()).map(milli).transpose();
            let borrowed = w.and_then(|w| w.borrowed.as_ref()).map(milli).transpose();
            let (total, borrowed) = match (total, borrowed) {
                (Ok(t), Ok(b)) => (t.or(w.is_none().then_some(0)), b),
                (Err(e), _) | (_, Err(e)) => {
                    out.push(format!("    usage {cq} {fr}: {e}"));
                    continue;
                }
            };
            if total.is_some_and(|t| t != got.total) || borrowed.is_some_and(|b| b != got.borrowed) {
                let show = |v: Option<i64>| v.map(api::quantity::format_milli_string).unwrap_or_else(|| "*".into());
                out.push(format!(
                    "    usage {cq} {fr}:\n    - total {} borrowed {}\n    + total {} borrowed {}",
                    show(total),
                    show(borrowed),
                    show(Some(got.total)),
                    show(Some(got.borrowed))
                ));
            }
        }
    }
}

fn milli(v: &serde_yaml::Value) -> Result<i64, String> {
    let s = match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Number(n) => n.to_string(),
        other => return Err(format!("not a quantity: {other:?}")),
    };
    api::quantity::parse_milli_str(&s).map_err(|e| format!("quantity `{s}`: {e}"))
}

fn step_kind(step: &Step) -> String {
    let at = step.at.map(|a| format!("at {a}, ")).unwrap_or_default();
    let kind = if step.apply.is_some() {
        "apply"
    } else if step.schedule.is_some() {
        "schedule"
    } else if step.expect.is_some() {
        "expect"
    } else if step.finish.is_some() {
        "finish"
    } else if step.delete.is_some() {
        "delete"
    } else {
        "evict-complete"
    };
    format!("{at}{kind}")
}

fn render_state(s: Option<&WorkloadState>) -> String {
    match s {
        None => "(no such workload)".into(),
        Some(WorkloadState::Pending { reason, message }) => format!("pending {} {message:?}", reason.as_str()),
        Some(WorkloadState::Admitted { admission }) => format!("admitted {}", render_admission(admission)),
        Some(WorkloadState::Evicting { admission }) => format!("evicting from {}", admission.cluster_queue),
        Some(WorkloadState::Finished) => "finished".into(),
    }
}

fn render_admission(a: &api::Admission) -> String {
    let mut s = a.cluster_queue.clone();
    for ps in &a.pod_set_assignments {
        let flavors: Vec<String> = ps.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
        let _ = write!(s, " {}{{{}}}x{}", ps.name, flavors.join(","), ps.count.map(|c| c.to_string()).unwrap_or("?".into()));
    }
    s
}

/// The expected admission in the same shape `project_admission` renders the actual one.
fn render_admitted_want(w: &scenario::AdmittedFields) -> String {
    let mut s = format!("admitted {}", w.cluster_queue.as_deref().unwrap_or("*"));
    for (ps, fl) in w.flavors.iter().flatten() {
        let flavors: Vec<String> = fl.iter().map(|(r, f)| format!("{r}={f}")).collect();
        let _ = write!(s, " flavors {ps}{{{}}}", flavors.join(","));
    }
    for (ps, c) in w.count.iter().flatten() {
        let _ = write!(s, " count {ps}={c}");
    }
    s
}

/// Renders an actual admission restricted to the fields the expectation names.
fn project_admission(a: &api::Admission, w: &scenario::AdmittedFields) -> String {
    let find = |ps: &str| a.pod_set_assignments.iter().find(|p| p.name == ps);
    let mut s = format!("admitted {}", if w.cluster_queue.is_some() { a.cluster_queue.as_str() } else { "*" });
    for (ps, fl) in w.flavors.iter().flatten() {
        let flavors: Vec<String> = fl
            .keys()
            .map(|r| format!("{r}={}", find(ps).and_then(|p| p.flavors.get(r)).map(String::as_str).unwrap_or("<none>")))
            .collect();
        let _ = write!(s, " flavors {ps}{{{}}}", flavors.join(","));
    }
    for ps in w.count.iter().flatten().map(|(ps, _)| ps) {
        let c = find(ps).and_then(|p| p.count).map(|c| c.to_string()).unwrap_or("<none>".into());
        let _ = write!(s, " count {ps}={c}");
    }
    s
}

fn render_pending_want(w: &scenario::PendingFields) -> String {
    let msg = match &w.message {
        None => String::new(),
        Some(OneOrMany::One(m)) => format!(" message containing {m:?}"),
        Some(OneOrMany::Many(ms)) => format!(" message containing all of {ms:?}"),
    };
    format!("pending {}{msg}", w.reason.as_deref().unwrap_or("*"))
}
