//! `kuota check`: loads manifest, node-pool, trace and generator files
//! without running anything, and reports what would stop them from working.

use std::collections::BTreeSet;

use super::{Objects, SourceFile};
use crate::api::manifest::{self, Manifest};
use crate::sim::SimError;
use crate::sim::generator::GeneratorConfig;
use crate::sim::nodes::NodesConfig;
use crate::sim::trace;

/// One finding of [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub error: bool,
    pub file: String,
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = if self.error { "error" } else { "warning" };
        write!(f, "{level}: {}: {}", self.file, self.message)
    }
}

/// A warning for a Job that asks for Kueue's elastic jobs, which kuota does not run.
fn elastic_job_diagnostic(src: &str, job: &k8s_openapi::api::batch::v1::Job) -> Option<Diagnostic> {
    use crate::api::constants::{ELASTIC_JOB_ANNOTATION, ELASTIC_JOB_ANNOTATION_VALUE};
    let meta = &job.metadata;
    let value = meta.annotations.as_ref()?.get(ELASTIC_JOB_ANNOTATION)?;
    (value == ELASTIC_JOB_ANNOTATION_VALUE).then(|| Diagnostic {
        error: false,
        file: src.to_string(),
        message: crate::api::constants::elastic_job_warning(
            "Job",
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or_default(),
        ),
    })
}

/// Loads and validates manifest files (and generator configs, recognised by
/// name). Load errors are errors; references to objects defined in none of
/// the files are warnings, since they may exist in the cluster.
pub fn check(files: &[SourceFile]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut loaded = Vec::new();
    for f in files {
        if f.is_nodes() || f.is_trace() {
            out.extend(nodes_or_trace_diagnostic(f));
            continue;
        }
        if f.is_generator() {
            out.extend(generator_diagnostic(f));
            continue;
        }
        let (ms, problems) =
            manifest::load_partial_with(&f.name, &f.text, &super::job_kinds::JobKinds);
        loaded.extend(ms);
        out.extend(problems.into_iter().map(problem_diagnostic));
    }
    out.extend(
        manifest::duplicates(&loaded)
            .into_iter()
            .map(problem_diagnostic),
    );
    let objs = checked_objects(loaded, &mut out);
    out.extend(cluster_queue_warnings(&objs));
    out.extend(local_queue_warnings(&objs));
    out.extend(workload_warnings(&objs));
    out
}

/// The error, if any, in a node-pool spec or a trace file.
fn nodes_or_trace_diagnostic(f: &SourceFile) -> Option<Diagnostic> {
    let r = if f.is_nodes() {
        NodesConfig::from_yaml(&f.name, &f.text)
            .and_then(|c| c.expand(&f.name))
            .map(|_| ())
    } else {
        trace::parse(&f.name, &f.text).map(|_| ())
    };
    match r {
        // Trace errors carry `file:line` as their source.
        Err(SimError::Scenario {
            source_name,
            message,
        }) => Some(Diagnostic {
            error: true,
            file: source_name,
            message,
        }),
        Err(SimError::Trace { location, source }) => Some(Diagnostic {
            error: true,
            file: location,
            message: source.to_string(),
        }),
        Err(SimError::Field {
            source_name,
            at,
            source,
        }) if source_name != f.name => Some(Diagnostic {
            error: true,
            file: source_name,
            message: format!("{at}: {source}"),
        }),
        Err(e) => Some(Diagnostic {
            error: true,
            file: f.name.clone(),
            message: strip_source(&e.to_string(), &f.name),
        }),
        Ok(()) => None,
    }
}

/// The error, if any, in a generator config.
fn generator_diagnostic(f: &SourceFile) -> Option<Diagnostic> {
    GeneratorConfig::from_yaml(&f.name, &f.text)
        .err()
        .map(|e| Diagnostic {
            error: true,
            file: f.name.clone(),
            message: strip_source(&e.to_string(), &f.name),
        })
}

/// Sorts the loaded manifests into [`Objects`], adding to `out` a warning per
/// elastic Job and an error per Job that yields no Workload.
fn checked_objects(loaded: Vec<manifest::Loaded>, out: &mut Vec<Diagnostic>) -> Objects {
    let mut objs = Objects::default();
    let kinds = loaded.into_iter().map(|l| (l.source_name, l.manifest));
    for (src, m) in kinds {
        if let Manifest::Job(job) = &m {
            out.extend(elastic_job_diagnostic(&src, job));
        }
        // A kind whose Workloads only the cluster can build has had its own rules checked
        // by now; there is nothing more to add.
        if let Manifest::Foreign(obj) = &m
            && let Ok(
                super::job_kinds::Standalone::NeedsCluster(_)
                | super::job_kinds::Standalone::Referenced,
            ) = super::job_kinds::standalone(obj)
        {
            continue;
        }
        // Only jobs can fail here (their Workload is built from the job).
        if let Err(e) = objs.add(src.as_str(), m) {
            out.push(Diagnostic {
                error: true,
                file: src.clone(),
                message: strip_source(&e.to_string(), &src),
            });
        }
    }
    objs
}

/// A `kuota check` warning about `file`.
fn warning(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        error: false,
        file: file.to_string(),
        message,
    }
}

/// ClusterQueues that will not admit as the files suggest: a ResourceFlavor
/// not defined here, admission checks (never run), or a cohort with nothing
/// to borrow from.
fn cluster_queue_warnings(objs: &Objects) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let flavors: BTreeSet<String> = objs
        .flavors
        .iter()
        .filter_map(|(_, f)| f.metadata.name.clone())
        .collect();
    let cohorts: BTreeSet<String> = objs
        .cohorts
        .iter()
        .filter_map(|(_, c)| c.metadata.name.clone())
        .collect();
    for (src, cohort) in &objs.cohorts {
        let name = cohort.metadata.name.as_deref().unwrap_or("");
        for f in cohort.spec.resource_groups.iter().flat_map(|g| &g.flavors) {
            if !flavors.contains(&f.name) {
                out.push(warning(src, format!("Cohort {name}: ResourceFlavor {:?} is not defined in these files; no queue can use this quota until it exists", f.name)));
            }
        }
    }
    for (src, cq) in &objs.cluster_queues {
        let name = cq.metadata.name.as_deref().unwrap_or("");
        for g in &cq.spec.resource_groups {
            for f in &g.flavors {
                if !flavors.contains(&f.name) {
                    out.push(warning(src, format!("ClusterQueue {name}: ResourceFlavor {:?} is not defined in these files; the queue stays inactive until it exists", f.name)));
                }
            }
        }
        let checks: Vec<&str> = cq
            .spec
            .admission_checks_strategy
            .iter()
            .flat_map(|s| &s.admission_checks)
            .map(|r| r.name.as_str())
            // The simulator plays the ProvisioningRequest check's controller.
            .filter(|c| {
                !objs
                    .played_checks
                    .iter()
                    .any(|(_, ac)| ac.metadata.name.as_deref() == Some(*c))
            })
            .collect();
        if !checks.is_empty() {
            let undefined: Vec<&str> = checks
                .iter()
                .copied()
                .filter(|c| !objs.admission_checks.iter().any(|d| d == c))
                .collect();
            let missing = if undefined.is_empty() {
                String::new()
            } else {
                format!(" ({} not defined in these files)", undefined.join(", "))
            };
            out.push(warning(src, format!("ClusterQueue {name}: spec.admissionChecksStrategy names AdmissionCheck(s) {};{missing} the queue stays inactive until each exists and its controller marks it Active, and a simulation, which runs no controller for them (it plays only the ProvisioningRequest check's), admits nothing from it", checks.join(", "))));
        }
        if let Some(c) = cq.spec.cohort()
            && !cohorts.contains(c)
            && !objs.cluster_queues.iter().any(|(_, o)| {
                o.metadata.name.as_deref() != Some(name) && o.spec.cohort() == Some(c)
            })
        {
            out.push(warning(src, format!("ClusterQueue {name}: cohort {c:?} has no other member or Cohort object here, so there is nothing to borrow")));
        }
    }
    out
}

/// LocalQueues pointing at a ClusterQueue not defined in these files.
fn local_queue_warnings(objs: &Objects) -> Vec<Diagnostic> {
    let cqs: BTreeSet<String> = objs
        .cluster_queues
        .iter()
        .filter_map(|(_, c)| c.metadata.name.clone())
        .collect();
    let mut out = Vec::new();
    for (src, lq) in &objs.local_queues {
        if !cqs.contains(&lq.spec.cluster_queue) {
            out.push(warning(
                src,
                format!(
                    "LocalQueue {}/{}: ClusterQueue {:?} is not defined in these files",
                    lq.metadata.namespace.as_deref().unwrap_or(""),
                    lq.metadata.name.as_deref().unwrap_or(""),
                    lq.spec.cluster_queue
                ),
            ));
        }
    }
    out
}

/// Workloads (Jobs included) naming a LocalQueue not defined in their namespace here.
fn workload_warnings(objs: &Objects) -> Vec<Diagnostic> {
    let lqs: BTreeSet<(String, String)> = objs
        .local_queues
        .iter()
        .map(|(_, l)| {
            (
                l.metadata.namespace.clone().unwrap_or_default(),
                l.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for (src, wl) in &objs.workloads {
        let ns = wl
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        if let Some(q) = wl.spec.queue()
            && !lqs.contains(&(ns.clone(), q.to_string()))
        {
            out.push(warning(
                src,
                format!("Workload {ns}/{}: LocalQueue {q:?} is not defined in namespace {ns} in these files", wl.metadata.name.as_deref().unwrap_or("")),
            ));
        }
    }
    out
}

/// Loader errors may already start with the file name; avoid printing it twice.
fn strip_source(msg: &str, file: &str) -> String {
    msg.strip_prefix(file)
        .map(|m| m.trim_start_matches([':', ' ']).to_string())
        .unwrap_or_else(|| msg.to_string())
}

/// A loader problem as a `kuota check` diagnostic (`file:line`, then the document and object).
fn problem_diagnostic(p: manifest::Problem) -> Diagnostic {
    let file = match p.line {
        Some(l) => format!("{}:{l}", p.source_name),
        None => p.source_name,
    };
    let mut message = String::new();
    if let Some(d) = p.document {
        message.push_str(&format!("document {d}"));
    }
    if let Some(o) = &p.object {
        message.push_str(&format!(
            "{}({o})",
            if message.is_empty() { "" } else { " " }
        ));
    }
    if !message.is_empty() {
        message.push_str(": ");
    }
    message.push_str(&p.message);
    Diagnostic {
        error: true,
        file,
        message,
    }
}
