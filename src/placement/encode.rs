//! Writing placements as Kueue's v1beta2 `topologyAssignment` (levels + slices).

use std::collections::BTreeMap;

use super::inventory::Inventory;
use crate::api::{TopologyAssignment, tas_encoding};

/// Encodes (node, count) pairs for `flavor` as Kueue does: only the hostname level when
/// the topology has it, else every level with pods summed per lowest-level domain.
pub fn topology_assignment(
    inv: &Inventory,
    flavor: &str,
    nodes: &[(u32, i32)],
) -> TopologyAssignment {
    let levels = inv.levels(flavor);
    let hostname_only = levels
        .last()
        .is_some_and(|l| l == crate::api::constants::HOSTNAME_LABEL);
    let mut per_domain: BTreeMap<Vec<String>, i32> = BTreeMap::new();
    for &(n, c) in nodes {
        let path = inv.node_path(flavor, n);
        let key = if hostname_only {
            vec![path.last().cloned().unwrap_or_default()]
        } else {
            path
        };
        *per_domain.entry(key).or_default() += c;
    }
    let out_levels = if hostname_only {
        vec![crate::api::constants::HOSTNAME_LABEL.to_string()]
    } else {
        levels
    };
    let domains: Vec<(Vec<String>, i32)> = per_domain.into_iter().collect();
    tas_encoding::encode(out_levels, &domains)
}
