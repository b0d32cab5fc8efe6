//! Writing placements as Kueue's v1beta2 `topologyAssignment` (levels + slices).

use std::collections::BTreeMap;

use super::inventory::Inventory;
use crate::api::{TopologyAssignment, TopologyAssignmentSlice, TopologyAssignmentSliceLevelValues};

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
    let count = per_domain.len();
    let counts: Vec<i32> = per_domain.values().copied().collect();
    let values_per_level = (0..out_levels.len())
        .map(|i| compress(per_domain.keys().map(|k| k[i].as_str()).collect()))
        .collect();
    let uniform = counts.windows(2).all(|w| w[0] == w[1]);
    TopologyAssignment {
        levels: out_levels,
        slices: vec![TopologyAssignmentSlice {
            domain_count: count as i32,
            values_per_level,
            pod_counts: (!uniform).then(|| counts.clone()),
            universal_pod_count: if uniform {
                counts.first().copied()
            } else {
                None
            },
        }],
    }
}

/// One level's values: a universal value when all agree, else roots with the common prefix cut.
fn compress(values: Vec<&str>) -> TopologyAssignmentSliceLevelValues {
    if let Some(first) = values.first()
        && values.iter().all(|v| v == first)
    {
        return TopologyAssignmentSliceLevelValues {
            universal_value: Some(first.to_string()),
            ..Default::default()
        };
    }
    let prefix_len = values
        .iter()
        .skip(1)
        .fold(values.first().map_or(0, |v| v.len()), |acc, v| {
            values[0]
                .bytes()
                .zip(v.bytes())
                .take(acc)
                .take_while(|(a, b)| a == b)
                .count()
        });
    // Cut only at a char boundary so roots stay valid UTF-8.
    let mut cut = prefix_len;
    while cut > 0 && !values[0].is_char_boundary(cut) {
        cut -= 1;
    }
    TopologyAssignmentSliceLevelValues {
        prefix: (cut > 0).then(|| values[0][..cut].to_string()),
        roots: Some(values.iter().map(|v| v[cut..].to_string()).collect()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::compress;

    #[test]
    fn compresses_prefix_and_universal_values() {
        let c = compress(vec!["rack-1", "rack-2"]);
        assert_eq!(c.prefix.as_deref(), Some("rack-"));
        assert_eq!(c.roots, Some(vec!["1".to_string(), "2".to_string()]));
        let u = compress(vec!["b1", "b1"]);
        assert_eq!(u.universal_value.as_deref(), Some("b1"));
    }
}
