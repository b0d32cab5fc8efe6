//! Encodes per-domain pod counts as Kueue's compressed v1beta2 `topologyAssignment`.
//!
//! Kueue writes one slice per (at most) 100,000 domains, and within a slice factors out
//! whatever the domains share: a `universal` value when a level's values all agree, else
//! `individual` roots with the common `prefix` and `suffix` cut off; a `universal` pod count
//! when every domain gets the same number of pods, else `individual` counts. kuota writes the
//! same encoding, so admissions read the same whichever of the two wrote them.

use super::workload_status::{
    TopologyAssignment, TopologyAssignmentSlice, TopologyAssignmentSliceLevelIndividualValues,
    TopologyAssignmentSliceLevelValues, TopologyAssignmentSlicePodCounts,
};

/// Most domains Kueue's schema accepts in one slice (`roots` and `podCounts.individual`).
pub const MAX_DOMAINS_PER_SLICE: usize = 100_000;

/// The assignment of `domains` (label value per level, pod count), in the given order.
///
/// Every domain must carry one value per level; an empty list gives no slices.
pub fn encode(levels: Vec<String>, domains: &[(Vec<String>, i32)]) -> TopologyAssignment {
    let slices = domains
        .chunks(MAX_DOMAINS_PER_SLICE)
        .map(|chunk| encode_slice(levels.len(), chunk))
        .collect();
    TopologyAssignment { levels, slices }
}

fn encode_slice(level_count: usize, domains: &[(Vec<String>, i32)]) -> TopologyAssignmentSlice {
    let values_per_level = (0..level_count)
        .map(|lvl| {
            let values: Vec<&str> = domains
                .iter()
                .map(|(v, _)| v.get(lvl).map_or("", String::as_str))
                .collect();
            compress(&values)
        })
        .collect();
    let counts: Vec<i32> = domains.iter().map(|(_, c)| *c).collect();
    let pod_counts = match counts.first() {
        Some(&first) if counts.iter().all(|&c| c == first) => TopologyAssignmentSlicePodCounts {
            universal: Some(first),
            individual: Vec::new(),
        },
        _ => TopologyAssignmentSlicePodCounts {
            universal: None,
            individual: counts,
        },
    };
    TopologyAssignmentSlice {
        // The chunk size keeps this far below i32::MAX.
        domain_count: i32::try_from(domains.len()).unwrap_or(i32::MAX),
        values_per_level,
        pod_counts,
    }
}

/// One level's values: `universal` when all agree, else roots between the common prefix
/// and suffix (which never overlap, and are only cut at character boundaries).
pub fn compress(values: &[&str]) -> TopologyAssignmentSliceLevelValues {
    let Some(first) = values.first() else {
        return TopologyAssignmentSliceLevelValues::default();
    };
    if values.iter().all(|v| v == first) {
        return TopologyAssignmentSliceLevelValues {
            universal: Some((*first).to_string()),
            individual: None,
        };
    }
    let min_len = values.iter().map(|v| v.len()).min().unwrap_or(0);
    let mut prefix = values
        .iter()
        .map(|v| common_prefix(first, v))
        .min()
        .unwrap_or(0);
    while !first.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let mut suffix = values
        .iter()
        .map(|v| common_suffix(first, v))
        .min()
        .unwrap_or(0);
    while !first.is_char_boundary(first.len() - suffix) {
        suffix -= 1;
    }
    // Like Kueue, give the overlap to the suffix: {"ababa", "aba"} → prefix "", suffix "aba".
    if prefix + suffix > min_len {
        prefix = min_len - suffix;
        while !first.is_char_boundary(prefix) {
            prefix -= 1;
        }
    }
    let cut: Option<Vec<String>> = values
        .iter()
        .map(|v| v.get(prefix..v.len() - suffix).map(str::to_string))
        .collect();
    // Unreachable for valid UTF-8 (the cuts are at boundaries of the shared bytes); should it
    // ever happen, whole values are still a correct encoding.
    let Some(roots) = cut else {
        return TopologyAssignmentSliceLevelValues {
            universal: None,
            individual: Some(TopologyAssignmentSliceLevelIndividualValues {
                roots: values.iter().map(|v| (*v).to_string()).collect(),
                ..Default::default()
            }),
        };
    };
    let part = |s: &str| (!s.is_empty()).then(|| s.to_string());
    TopologyAssignmentSliceLevelValues {
        universal: None,
        individual: Some(TopologyAssignmentSliceLevelIndividualValues {
            prefix: part(&first[..prefix]),
            suffix: part(&first[first.len() - suffix..]),
            roots,
        }),
    }
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn common_suffix(a: &str, b: &str) -> usize {
    a.bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn individual(
        v: &TopologyAssignmentSliceLevelValues,
    ) -> (Option<&str>, Option<&str>, Vec<&str>) {
        let ind = v.individual.as_ref().expect("individual values");
        (
            ind.prefix.as_deref(),
            ind.suffix.as_deref(),
            ind.roots.iter().map(String::as_str).collect(),
        )
    }

    #[test]
    fn factors_out_prefix_and_suffix() {
        let c = compress(&["block-1-rack-1", "block-1-rack-2", "block-1-rack-3"]);
        assert_eq!(
            individual(&c),
            (Some("block-1-rack-"), None, vec!["1", "2", "3"])
        );
        let c = compress(&["a-node-x", "b-node-x"]);
        assert_eq!(individual(&c), (None, Some("-node-x"), vec!["a", "b"]));
        let c = compress(&["n1.zone", "n22.zone"]);
        assert_eq!(individual(&c), (Some("n"), Some(".zone"), vec!["1", "22"]));
    }

    #[test]
    fn overlapping_prefix_and_suffix_leave_valid_roots() {
        // Common prefix "aba" and suffix "aba" overlap in "aba"; Kueue keeps the suffix.
        let c = compress(&["ababa", "aba"]);
        assert_eq!(individual(&c), (None, Some("aba"), vec!["ab", ""]));
    }

    #[test]
    fn equal_values_are_universal() {
        let c = compress(&["b1", "b1"]);
        assert_eq!(c.universal.as_deref(), Some("b1"));
        assert!(c.individual.is_none());
    }

    #[test]
    fn multibyte_values_are_cut_at_char_boundaries() {
        let c = compress(&["zé1", "zè1"]);
        let (p, s, roots) = individual(&c);
        let rebuilt: Vec<String> = roots
            .iter()
            .map(|r| format!("{}{r}{}", p.unwrap_or(""), s.unwrap_or("")))
            .collect();
        assert_eq!(rebuilt, ["zé1", "zè1"]);
    }

    #[test]
    fn encodes_counts_and_round_trips() {
        let levels = vec!["block".to_string(), "rack".to_string()];
        let domains = vec![
            (vec!["b1".to_string(), "rack-1".to_string()], 4),
            (vec!["b1".to_string(), "rack-2".to_string()], 2),
        ];
        let ta = encode(levels, &domains);
        assert_eq!(ta.slices.len(), 1);
        let slice = &ta.slices[0];
        assert_eq!(slice.pod_counts.individual, vec![4, 2]);
        assert_eq!(slice.pod_counts.universal, None);
        assert_eq!(slice.values_per_level[0].universal.as_deref(), Some("b1"));
        assert_eq!(slice.domains(), Some(domains));

        let same = vec![(vec!["h1".to_string()], 1), (vec!["h2".to_string()], 1)];
        let ta = encode(vec!["kubernetes.io/hostname".to_string()], &same);
        assert_eq!(ta.slices[0].pod_counts.universal, Some(1));
        assert!(ta.slices[0].pod_counts.individual.is_empty());
        assert!(encode(Vec::new(), &[]).slices.is_empty());
    }

    #[test]
    fn splits_past_the_slice_limit() {
        let domains: Vec<(Vec<String>, i32)> = (0..MAX_DOMAINS_PER_SLICE + 3)
            .map(|i| (vec![format!("node-{i}")], 1))
            .collect();
        let ta = encode(vec!["kubernetes.io/hostname".to_string()], &domains);
        let counts: Vec<i32> = ta.slices.iter().map(|s| s.domain_count).collect();
        assert_eq!(counts, [100_000, 3]);
        let back: Vec<_> = ta
            .slices
            .iter()
            .flat_map(|s| s.domains().unwrap_or_default())
            .collect();
        assert_eq!(back, domains);
    }
}
