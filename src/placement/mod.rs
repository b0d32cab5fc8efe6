//! Topology-aware gang placement: the hot-path allocator.
//!
//! Nodes are grouped into a tree of domains per TAS flavor (Kueue's Topology
//! levels, e.g. block > rack > host, optionally an NVLink clique level). Every
//! domain carries aggregated free capacity, including a histogram of free
//! accelerator slots per node, so "how many 8-GPU pods fit in this rack" is a
//! few additions, and assigning or releasing a pod updates O(depth) domains.
//! The allocator chooses domains best-fit and breaks ties toward domains that
//! are already fragmented, which keeps whole nodes and racks free for large gangs.

mod allocator;
mod encode;
mod filter;
mod inventory;
mod kueue;
mod pool;
mod request;
pub mod ungate;

pub use allocator::{PlacementFailure, Strategy};
pub use encode::topology_assignment;
pub use filter::NodeFilter;
pub use inventory::{
    DomainOwners, Held, Inventory, NodeChange, NodeSummary, PlacementError, validate_levels,
};
pub use pool::{NodePoolSpec, PoolLevel};
pub use request::{PodSetPlacementRequest, TopologyMode, TopologyRequestError, topology_mode};

/// Where one PodSet's pods go: (node name, pod count), in domain order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSetPlacement {
    pub flavor: String,
    pub nodes: Vec<(String, i32)>,
}

impl PodSetPlacement {
    /// Node name per pod index, for the ungater.
    pub fn per_pod(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|(n, c)| std::iter::repeat_n(n.clone(), (*c).max(0) as usize))
            .collect()
    }
}

#[cfg(test)]
mod tests;
