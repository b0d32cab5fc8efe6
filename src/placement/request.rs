//! What a PodSet asks of the topology, from Kueue's podset fields and annotations
//! plus kuota's spread extension.

use crate::api::{self, constants};

/// Annotation: every pod in a different domain at this level (like Ray's STRICT_SPREAD).
pub const SPREAD_ANNOTATION: &str = "kuota.dev/podset-spread-topology";

/// How a PodSet's pods must be laid over the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyMode {
    /// All pods in one domain of this level.
    Required(String),
    /// In one domain of this level if possible, else climb.
    Preferred(String),
    /// Anywhere, packed.
    Unconstrained,
    /// Every pod in a different domain of `level`, optionally all within one `within` domain.
    Spread {
        level: String,
        within: Option<String>,
    },
}

/// A PodSet placement request.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSetPlacementRequest {
    pub count: i32,
    /// Per-pod requests (milli-units) by interned resource id.
    pub per_pod: Vec<(u32, i64)>,
    pub mode: TopologyMode,
    /// Slices: `size` pods each within one domain of `level`.
    pub slice: Option<(String, i32)>,
    /// Pod tolerations, checked against node taints.
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// The pod template's nodeSelector and required node affinity: only nodes that
    /// satisfy both take pods.
    pub node_filter: super::filter::NodeFilter,
}

/// A PodSet's topology mode and optional slice (level, size).
pub type TopologyRequest = (TopologyMode, Option<(String, i32)>);

/// Why a PodSet's topology request cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyRequestError {
    #[error(
        "annotation {}: {value:?} is not an integer",
        constants::PODSET_SLICE_SIZE_ANNOTATION
    )]
    SliceSizeNotInteger {
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("pod set may have only one of required, preferred or unconstrained topology")]
    ConflictingModes,
    #[error("podset slice size must be at least 1, got {0}")]
    SliceSizeTooSmall(i32),
    #[error(
        "{} requires {}",
        constants::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
        constants::PODSET_SLICE_SIZE_ANNOTATION
    )]
    SliceLevelWithoutSize,
    #[error(
        "{} requires {}",
        constants::PODSET_SLICE_SIZE_ANNOTATION,
        constants::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION
    )]
    SliceSizeWithoutLevel,
    #[error("{SPREAD_ANNOTATION} can only be combined with a required topology")]
    SpreadWithOtherMode,
}

/// Reads the topology request of a PodSet: the Workload's `topologyRequest`, else the
/// pod template's annotations (what a Job carries), else `None` (no TAS request).
pub fn topology_mode(ps: &api::PodSet) -> Result<Option<TopologyRequest>, TopologyRequestError> {
    let ann = ps
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let tr = ps.topology_request.clone().unwrap_or_default();
    let required = tr.required.or_else(|| {
        ann.get(constants::PODSET_REQUIRED_TOPOLOGY_ANNOTATION)
            .cloned()
    });
    let preferred = tr.preferred.or_else(|| {
        ann.get(constants::PODSET_PREFERRED_TOPOLOGY_ANNOTATION)
            .cloned()
    });
    let unconstrained = tr.unconstrained.unwrap_or(false)
        || ann
            .get(constants::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
            .is_some_and(|v| v == "true");
    let spread = ann.get(SPREAD_ANNOTATION).cloned();
    let slice_level = tr.pod_set_slice_required_topology.or_else(|| {
        ann.get(constants::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION)
            .cloned()
    });
    let slice_size = match tr.pod_set_slice_size {
        Some(s) => Some(s),
        None => match ann.get(constants::PODSET_SLICE_SIZE_ANNOTATION) {
            Some(v) => Some(v.parse::<i32>().map_err(|source| {
                TopologyRequestError::SliceSizeNotInteger {
                    value: v.clone(),
                    source,
                }
            })?),
            None => None,
        },
    };
    let set = [required.is_some(), preferred.is_some(), unconstrained]
        .iter()
        .filter(|b| **b)
        .count();
    if set > 1 {
        return Err(TopologyRequestError::ConflictingModes);
    }
    let slice = match (slice_level, slice_size) {
        (Some(l), Some(s)) if s >= 1 => Some((l, s)),
        (Some(_), Some(s)) => return Err(TopologyRequestError::SliceSizeTooSmall(s)),
        (Some(_), None) => return Err(TopologyRequestError::SliceLevelWithoutSize),
        (None, Some(_)) => return Err(TopologyRequestError::SliceSizeWithoutLevel),
        (None, None) => None,
    };
    let mode = match (spread, required, preferred, unconstrained) {
        (Some(level), within, None, false) => Some(TopologyMode::Spread { level, within }),
        (Some(_), _, _, _) => return Err(TopologyRequestError::SpreadWithOtherMode),
        (None, Some(l), _, _) => Some(TopologyMode::Required(l)),
        (None, None, Some(l), _) => Some(TopologyMode::Preferred(l)),
        (None, None, None, true) => Some(TopologyMode::Unconstrained),
        (None, None, None, false) => None,
    };
    match (mode, slice) {
        (None, Some(s)) => Ok(Some((TopologyMode::Unconstrained, Some(s)))),
        (m, s) => Ok(m.map(|m| (m, s))),
    }
}
