//! Pending-reason messages a user can act on: which flavor and resource, how much
//! is short, and which limit binds (nominal quota, borrowingLimit, or what the
//! cohort can lend).

use super::quota::{NodeId, QuotaTree};
use super::resources::{FrId, Names};

/// Formats milli-units the way a user wrote them: "2", "500m", "4Gi".
pub fn human(v: i64) -> String {
    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;
    if v % 1000 != 0 {
        return format!("{v}m");
    }
    let n = v / 1000;
    if n != 0 && n % GI == 0 {
        format!("{}Gi", n / GI)
    } else if n != 0 && n % MI == 0 && n >= 64 * MI {
        format!("{}Mi", n / MI)
    } else {
        n.to_string()
    }
}

/// Why `val` of `fr` does not fit in what is unused right now.
pub fn shortage(
    names: &Names,
    tree: &QuotaTree,
    node: NodeId,
    fr: FrId,
    val: i64,
    avail: i64,
) -> String {
    let (f, r) = names.fr_parts(fr);
    let (fname, rname) = (names.flavor_name(f), names.resource_name(r));
    let nominal = tree.subtree_quota(node, fr);
    let used = tree.usage(node, fr);
    let short = val - avail.max(0);
    let mut msg = format!(
        "insufficient unused quota for {rname} in flavor {fname}, {} more needed ({} requested, {} available; nominal quota {}, {} in use",
        human(short),
        human(val),
        human(avail.max(0)),
        human(nominal),
        human(used)
    );
    match tree.parent(node) {
        None => msg.push_str("; the ClusterQueue is not in a cohort, so it cannot borrow)"),
        Some(_) => {
            let over = (used + val - nominal).max(0);
            let limit = tree.nodes[node as usize].limits.borrowing_limit(fr);
            match limit {
                Some(bl) if over > bl => msg.push_str(&format!(
                    "; borrowingLimit {} would be exceeded: it would borrow {})",
                    human(bl),
                    human(over)
                )),
                _ => {
                    let local = (nominal - used).max(0);
                    msg.push_str(&format!(
                        "; the cohort can lend only {} more: other ClusterQueues use it or keep it under their lendingLimit)",
                        human((avail - local).max(0))
                    ));
                }
            }
        }
    }
    msg
}

/// Why `val` of `fr` can never fit in this ClusterQueue.
pub fn exceeds_max(names: &Names, tree: &QuotaTree, node: NodeId, fr: FrId, val: i64) -> String {
    let (f, r) = names.fr_parts(fr);
    let max = tree.potential_available(node, fr);
    let nominal = tree.subtree_quota(node, fr);
    let limit = match (
        tree.parent(node),
        tree.nodes[node as usize].limits.borrowing_limit(fr),
    ) {
        (None, _) => "nominal quota, no cohort to borrow from".to_string(),
        (Some(_), Some(bl)) if nominal + bl <= max => format!(
            "nominal quota {} + borrowingLimit {}",
            human(nominal),
            human(bl)
        ),
        (Some(_), _) => format!(
            "nominal quota {} + what the cohort can lend {}",
            human(nominal),
            human(max - nominal)
        ),
    };
    format!(
        "insufficient quota for {} in flavor {}, request > maximum capacity ({} > {}; {})",
        names.resource_name(r),
        names.flavor_name(f),
        human(val),
        human(max),
        limit
    )
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn formats_like_a_user_writes() {
        assert_eq!(human(2000), "2");
        assert_eq!(human(500), "500m");
        assert_eq!(human(4 * (1i64 << 30) * 1000), "4Gi");
        assert_eq!(human(0), "0");
    }
}
