//! Why a generator config cannot produce its objects; every message starts with the
//! config path at fault, and quantity or topology errors stay attached as sources.

use crate::api::quantity::QuantityError;
use crate::placement::TopologyRequestError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum GeneratorError {
    /// The YAML does not match the config's shape at `path`; shared because serde's
    /// error is not `Clone`.
    #[error("{path}: {source}")]
    Yaml {
        path: String,
        #[source]
        source: std::sync::Arc<serde_norway::Error>,
    },
    #[error("the config creates {total} workloads, more than the limit of {limit}")]
    TooManyWorkloads { total: u64, limit: u64 },
    #[error("{path}.className: must not be empty")]
    EmptyClassName { path: String },
    #[error("{path}: count is {count} but {names} names are given")]
    CountMismatch {
        path: String,
        count: u32,
        names: usize,
    },
    #[error("{path}: {name:?} is not a valid name (lowercase DNS label)")]
    InvalidName { path: String, name: String },
    #[error("{path}: set count or names")]
    NoCountOrNames { path: String },
    #[error("{path}: ClusterQueue {cq:?} is generated twice")]
    GeneratedTwice { path: String, cq: String },
    #[error(
        "{path}: ClusterQueue {cq:?} is both in the manifests and generated (drop nominalQuota to use the manifest's)"
    )]
    AlsoInManifests { path: String, cq: String },
    #[error(
        "{path}: LocalQueue {namespace}/{local_queue} points at ClusterQueue {target:?}, expected {cq:?}"
    )]
    LocalQueueElsewhere {
        path: String,
        namespace: String,
        local_queue: String,
        target: String,
        cq: String,
    },
    #[error(
        "{path}: no LocalQueue {namespace}/{local_queue} in the manifests; add it (pointing at ClusterQueue {cq:?}) or set nominalQuota to generate one"
    )]
    NoLocalQueue {
        path: String,
        namespace: String,
        local_queue: String,
        cq: String,
    },
    #[error("{field}: {source}")]
    Quantity {
        field: String,
        #[source]
        source: QuantityError,
    },
    #[error("{field}: must not be negative")]
    Negative { field: String },
    #[error("{field}: must be at least 1")]
    Zero { field: String },
    #[error("{field}: too large")]
    TooLarge { field: String },
    #[error(
        "{path}: requests {resource:?}, but generated ClusterQueues only cover cpu; define the queues in manifests to use other resources"
    )]
    NotCpu { path: String, resource: String },
    #[error("{path}.topologyRequest: {source}")]
    Topology {
        path: String,
        #[source]
        source: TopologyRequestError,
    },
}
