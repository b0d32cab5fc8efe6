//! The kinds of object the engine reads: their API resources, what their watches ask
//! for, and the ones the engine must have listed before its first cycle.

use kube::core::ApiResource;
use kube::runtime::watcher;

use crate::api;

/// A kind of object the engine reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    ResourceFlavor,
    Cohort,
    ClusterQueue,
    AdmissionCheck,
    LocalQueue,
    Workload,
    WorkloadPriorityClass,
    PriorityClass,
    Topology,
    Namespace,
    Node,
    /// Pods bound to a node, for non-TAS usage (the engine skips TAS and finished pods).
    Pod,
}

/// Every kind the engine must have listed before its first cycle: admitted Workloads
/// are the truth, so nothing is admitted before all of them (and their queues) are known.
pub const ENGINE_KINDS: &[Kind] = &[
    Kind::ResourceFlavor,
    Kind::Cohort,
    Kind::ClusterQueue,
    Kind::AdmissionCheck,
    Kind::LocalQueue,
    Kind::Workload,
    Kind::WorkloadPriorityClass,
    Kind::PriorityClass,
    Kind::Topology,
    Kind::Namespace,
    Kind::Node,
    Kind::Pod,
];

impl Kind {
    /// The API resource watched for this kind.
    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::ResourceFlavor => ApiResource::erase::<api::ResourceFlavor>(&()),
            Kind::Cohort => ApiResource::erase::<api::Cohort>(&()),
            Kind::ClusterQueue => ApiResource::erase::<api::ClusterQueue>(&()),
            Kind::AdmissionCheck => ApiResource::erase::<api::AdmissionCheck>(&()),
            Kind::LocalQueue => ApiResource::erase::<api::LocalQueue>(&()),
            Kind::Workload => ApiResource::erase::<api::Workload>(&()),
            Kind::WorkloadPriorityClass => ApiResource::erase::<api::WorkloadPriorityClass>(&()),
            Kind::PriorityClass => {
                ApiResource::erase::<k8s_openapi::api::scheduling::v1::PriorityClass>(&())
            }
            Kind::Topology => ApiResource::erase::<api::Topology>(&()),
            Kind::Namespace => ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
            Kind::Node => ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
            Kind::Pod => ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
        }
    }

    /// What the watch asks for: every object, except for Pods, where only those bound to
    /// a node can take room on it (pending pods, the bulk of a busy cluster, are left out).
    pub fn watch_config(self) -> watcher::Config {
        match self {
            Kind::Pod => watcher::Config::default().fields("spec.nodeName!="),
            _ => watcher::Config::default(),
        }
    }

    /// The kind's name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ResourceFlavor => "ResourceFlavor",
            Kind::Cohort => "Cohort",
            Kind::ClusterQueue => "ClusterQueue",
            Kind::AdmissionCheck => "AdmissionCheck",
            Kind::LocalQueue => "LocalQueue",
            Kind::Workload => "Workload",
            Kind::WorkloadPriorityClass => "WorkloadPriorityClass",
            Kind::PriorityClass => "PriorityClass",
            Kind::Topology => "Topology",
            Kind::Namespace => "Namespace",
            Kind::Node => "Node",
            Kind::Pod => "Pod",
        }
    }
}
