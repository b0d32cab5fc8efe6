//! Loading plain Kueue/Kubernetes YAML manifests (multi-document) into typed objects.
//!
//! Each document (or each item of a `kind: List`) is dispatched on `apiVersion` + `kind`,
//! decoded strictly (unknown fields are errors, including inside Kubernetes' own types;
//! YAML merge keys and YAML 1.1 booleans are read as kubectl reads them), converted to
//! v1beta2 and validated. Every problem names the file, the document, the line when known,
//! the object and the field path, e.g.
//! `cluster.yaml:14: document 3 (ClusterQueue "team-a"): spec.resourceGroups[0]...: ...`.

mod decode;
mod locate;
pub(crate) mod strict;
mod yaml11;

use super::validate::{self, FieldError};
use super::{
    AdmissionCheck, ClusterQueue, Cohort, LocalQueue, MultiKueueCluster, MultiKueueConfig,
    ProvisioningRequestConfig, ResourceFlavor, Topology, Workload, WorkloadPriorityClass,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use std::fmt;
use std::path::Path;

/// One decoded object.
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    /// kueue.x-k8s.io ResourceFlavor.
    ResourceFlavor(ResourceFlavor),
    /// kueue.x-k8s.io ClusterQueue.
    ClusterQueue(ClusterQueue),
    /// kueue.x-k8s.io AdmissionCheck.
    AdmissionCheck(AdmissionCheck),
    /// kueue.x-k8s.io ProvisioningRequestConfig.
    ProvisioningRequestConfig(ProvisioningRequestConfig),
    /// kueue.x-k8s.io MultiKueueConfig.
    MultiKueueConfig(MultiKueueConfig),
    /// kueue.x-k8s.io MultiKueueCluster.
    MultiKueueCluster(MultiKueueCluster),
    /// kueue.x-k8s.io Cohort.
    Cohort(Cohort),
    /// kueue.x-k8s.io LocalQueue.
    LocalQueue(LocalQueue),
    /// kueue.x-k8s.io Workload.
    Workload(Box<Workload>),
    /// kueue.x-k8s.io WorkloadPriorityClass.
    WorkloadPriorityClass(WorkloadPriorityClass),
    /// kueue.x-k8s.io Topology.
    Topology(Topology),
    /// batch/v1 Job.
    Job(Box<Job>),
    /// scheduling.k8s.io/v1 PriorityClass.
    PriorityClass(PriorityClass),
    /// v1 Namespace.
    Namespace(Namespace),
    /// v1 Node.
    Node(Box<Node>),
    /// An object of a kind the caller's [`ForeignKinds`] accepted (a job kind whose rules
    /// live in a higher layer), kept untyped for the caller to decode.
    Foreign(Box<ForeignObject>),
}

/// An object the loader keeps untyped: its kind's rules belong to the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignObject {
    /// Its `apiVersion`, e.g. `jobset.x-k8s.io/v1alpha2`.
    pub api_version: String,
    /// Its `kind`, e.g. `JobSet`.
    pub kind: String,
    /// Its `metadata`, decoded.
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// The whole object as written (metadata included, before any generated name).
    pub object: serde_json::Value,
}

/// How the loader treats a kind outside its own, as its caller decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForeignKind {
    /// Keep the object as a [`Manifest::Foreign`].
    Accept,
    /// Refuse the object with this reason (it names the kind and why).
    Refuse(String),
    /// Not a kind the caller knows: the loader's own "unsupported kind" problem.
    Unknown,
}

/// The kinds a caller decodes itself, beyond the loader's own.
pub trait ForeignKinds {
    /// What to do with objects of `kind` at `api_version`.
    fn classify(&self, api_version: &str, kind: &str) -> ForeignKind;
}

/// No kinds beyond the loader's own.
pub struct NoForeignKinds;

impl ForeignKinds for NoForeignKinds {
    fn classify(&self, _api_version: &str, _kind: &str) -> ForeignKind {
        ForeignKind::Unknown
    }
}

impl Manifest {
    /// The object's kind, e.g. `ClusterQueue`.
    pub fn kind(&self) -> &str {
        match self {
            Manifest::ResourceFlavor(_) => "ResourceFlavor",
            Manifest::ClusterQueue(_) => "ClusterQueue",
            Manifest::AdmissionCheck(_) => "AdmissionCheck",
            Manifest::ProvisioningRequestConfig(_) => "ProvisioningRequestConfig",
            Manifest::MultiKueueConfig(_) => "MultiKueueConfig",
            Manifest::MultiKueueCluster(_) => "MultiKueueCluster",
            Manifest::Cohort(_) => "Cohort",
            Manifest::LocalQueue(_) => "LocalQueue",
            Manifest::Workload(_) => "Workload",
            Manifest::WorkloadPriorityClass(_) => "WorkloadPriorityClass",
            Manifest::Topology(_) => "Topology",
            Manifest::Job(_) => "Job",
            Manifest::PriorityClass(_) => "PriorityClass",
            Manifest::Namespace(_) => "Namespace",
            Manifest::Node(_) => "Node",
            Manifest::Foreign(o) => &o.kind,
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Manifest::ResourceFlavor(o) => &o.metadata,
            Manifest::ClusterQueue(o) => &o.metadata,
            Manifest::AdmissionCheck(o) => &o.metadata,
            Manifest::ProvisioningRequestConfig(o) => &o.metadata,
            Manifest::MultiKueueConfig(o) => &o.metadata,
            Manifest::MultiKueueCluster(o) => &o.metadata,
            Manifest::Cohort(o) => &o.metadata,
            Manifest::LocalQueue(o) => &o.metadata,
            Manifest::Workload(o) => &o.metadata,
            Manifest::WorkloadPriorityClass(o) => &o.metadata,
            Manifest::Topology(o) => &o.metadata,
            Manifest::Job(o) => &o.metadata,
            Manifest::PriorityClass(o) => &o.metadata,
            Manifest::Namespace(o) => &o.metadata,
            Manifest::Node(o) => &o.metadata,
            Manifest::Foreign(o) => &o.metadata,
        }
    }

    fn metadata_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Manifest::ResourceFlavor(o) => &mut o.metadata,
            Manifest::ClusterQueue(o) => &mut o.metadata,
            Manifest::AdmissionCheck(o) => &mut o.metadata,
            Manifest::ProvisioningRequestConfig(o) => &mut o.metadata,
            Manifest::MultiKueueConfig(o) => &mut o.metadata,
            Manifest::MultiKueueCluster(o) => &mut o.metadata,
            Manifest::Cohort(o) => &mut o.metadata,
            Manifest::LocalQueue(o) => &mut o.metadata,
            Manifest::Workload(o) => &mut o.metadata,
            Manifest::WorkloadPriorityClass(o) => &mut o.metadata,
            Manifest::Topology(o) => &mut o.metadata,
            Manifest::Job(o) => &mut o.metadata,
            Manifest::PriorityClass(o) => &mut o.metadata,
            Manifest::Namespace(o) => &mut o.metadata,
            Manifest::Node(o) => &mut o.metadata,
            Manifest::Foreign(o) => &mut o.metadata,
        }
    }

    /// The API group of the object's apiVersion (empty for the core group).
    pub fn group(&self) -> &str {
        match self {
            Manifest::Foreign(o) => o.api_version.rsplit_once('/').map_or("", |(g, _)| g),
            Manifest::Job(_) => "batch",
            Manifest::PriorityClass(_) => "scheduling.k8s.io",
            Manifest::Namespace(_) | Manifest::Node(_) => "",
            _ => "kueue.x-k8s.io",
        }
    }

    /// `metadata.name`, if set.
    pub fn name(&self) -> Option<&str> {
        self.metadata().name.as_deref()
    }

    /// `metadata.namespace`, if set.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata().namespace.as_deref()
    }

    /// Runs the validation rules for this kind.
    pub fn validate(&self) -> Vec<FieldError> {
        match self {
            Manifest::ResourceFlavor(o) => validate::validate_resource_flavor(o),
            Manifest::ClusterQueue(o) => validate::validate_cluster_queue(o),
            Manifest::AdmissionCheck(o) => validate::validate_admission_check(o),
            Manifest::ProvisioningRequestConfig(o) => {
                validate::validate_provisioning_request_config(o)
            }
            Manifest::MultiKueueConfig(o) => validate::validate_multikueue_config(o),
            Manifest::MultiKueueCluster(o) => validate::validate_multikueue_cluster(o),
            Manifest::Cohort(o) => validate::validate_cohort(o),
            Manifest::LocalQueue(o) => validate::validate_local_queue(o),
            Manifest::Workload(o) => validate::validate_workload(o),
            Manifest::WorkloadPriorityClass(o) => validate::validate_workload_priority_class(o),
            Manifest::Topology(o) => validate::validate_topology(o),
            Manifest::Job(o) => validate::validate_job(o),
            Manifest::PriorityClass(o) => validate::validate_object_meta(&o.metadata, false),
            Manifest::Namespace(o) => validate::validate_object_meta(&o.metadata, false),
            Manifest::Node(o) => validate::validate_object_meta(&o.metadata, false),
            // The kind's own rules are the caller's; the name rules are everyone's.
            Manifest::Foreign(o) => validate::validate_object_meta(&o.metadata, true),
        }
    }
}

/// Where in the input a problem was found, and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file name (or other source label) given to the loader.
    pub source_name: String,
    /// 1-based document index within the stream, when the problem belongs to a document.
    pub document: Option<usize>,
    /// 1-based line number, when known.
    pub line: Option<usize>,
    /// `Kind "name"` of the object, when known.
    pub object: Option<String>,
    /// The problem, starting with the field path when there is one.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source_name)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(d) = self.document {
            write!(f, ": document {d}")?;
        }
        if let Some(o) = &self.object {
            write!(f, " ({o})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every problem found while loading; displayed one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The problems, in input order (never empty).
    pub problems: Vec<Problem>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// An object that loaded, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The object.
    pub manifest: Manifest,
    /// The file name (or other source label) given to the loader.
    pub source_name: String,
    /// 1-based document index within the stream.
    pub document: usize,
    /// 1-based line of its `metadata.name`, when written.
    pub line: Option<usize>,
}

impl Loaded {
    fn place(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}", self.source_name),
            None => format!("{}: document {}", self.source_name, self.document),
        }
    }
}

/// Loads every document of a YAML stream; `source_name` labels errors (usually the file name).
pub fn load_str(source_name: &str, yaml: &str) -> Result<Vec<Manifest>, LoadError> {
    load_str_with(source_name, yaml, &NoForeignKinds)
}

/// [`load_str`], also keeping the objects of the kinds `foreign` accepts.
pub fn load_str_with(
    source_name: &str,
    yaml: &str,
    foreign: &dyn ForeignKinds,
) -> Result<Vec<Manifest>, LoadError> {
    let (loaded, mut problems) = load_partial_with(source_name, yaml, foreign);
    problems.extend(duplicates(&loaded));
    if problems.is_empty() {
        Ok(loaded.into_iter().map(|l| l.manifest).collect())
    } else {
        Err(LoadError { problems })
    }
}

/// Loads what can be loaded of a YAML stream and reports the rest: a document that fails
/// (an unsupported kind, a bad field) does not keep the others from loading, so checks
/// across files still see them. Duplicates are left to [`duplicates`], which the caller
/// runs over everything it loaded.
pub fn load_partial(source_name: &str, yaml: &str) -> (Vec<Loaded>, Vec<Problem>) {
    load_partial_with(source_name, yaml, &NoForeignKinds)
}

/// [`load_partial`], also keeping the objects of the kinds `foreign` accepts.
pub fn load_partial_with(
    source_name: &str,
    yaml: &str,
    foreign: &dyn ForeignKinds,
) -> (Vec<Loaded>, Vec<Problem>) {
    decode::load_documents(source_name, yaml, foreign)
}

/// One problem per object that has the same API group, kind, namespace and name as an
/// earlier one, naming both places.
pub fn duplicates(loaded: &[Loaded]) -> Vec<Problem> {
    let mut first: std::collections::HashMap<_, &Loaded> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for l in loaded {
        let m = &l.manifest;
        let key = (m.group(), m.kind(), m.namespace(), m.name());
        match first.get(&key) {
            Some(earlier) => out.push(Problem {
                source_name: l.source_name.clone(),
                document: Some(l.document),
                line: l.line,
                object: Some(format!("{} {:?}", m.kind(), m.name().unwrap_or(""))),
                message: format!(
                    "metadata.name: Duplicate value: {:?}: the same {} is also defined at {}",
                    m.name().unwrap_or(""),
                    m.kind(),
                    earlier.place()
                ),
            }),
            None => {
                first.insert(key, l);
            }
        }
    }
    out
}

/// Reads and loads a YAML file; errors are labelled with the path as given.
pub fn load_file(path: impl AsRef<Path>) -> Result<Vec<Manifest>, LoadError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(&name, &text),
        Err(e) => Err(LoadError {
            problems: vec![Problem {
                source_name: name,
                document: None,
                line: None,
                object: None,
                message: format!("cannot read file: {e}"),
            }],
        }),
    }
}

#[cfg(test)]
mod forms_tests;
#[cfg(test)]
mod tests;
