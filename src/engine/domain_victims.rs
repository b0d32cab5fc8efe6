//! Topology-aware victim choice: when a gang must land in one domain of a level, the
//! victim search is also aimed at each domain in turn, and the cheapest victim set
//! that lets the gang be placed wins.
//!
//! Kueue takes candidates in its order until the preemptor fits, so under
//! topology-aware scheduling the domain it frees is whichever one its order happens to
//! complete first, and the victims may be dearer than those of another domain. Each
//! aimed search here is the same search (same candidates, same rules, same placement
//! check) with one domain's workloads tried first, so every set it returns is one the
//! strategy allows; only the choice between them differs from Kueue's.

use super::FastSet;
use super::flavor::Assignment;
use super::preempt::{Candidate, fill_back, restore, search, take_out};
use super::queue::WlId;
use super::state::{CqId, Engine};
use crate::placement::TopologyMode;

/// At most this many domains are tried per search, fewest resident workloads first:
/// a bound on the cost of one preemption search in a cluster with thousands of racks.
const MAX_DOMAINS: usize = 32;

/// How much a victim set costs, compared in this order: the highest priority it
/// preempts, how many workloads it preempts, and the work they lose (each victim's
/// usage of the contested resources times how long it has held them). Victims already
/// being evicted cost nothing: they leave anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Cost {
    highest_priority: i32,
    victims: usize,
    lost_work: u128,
}

pub(crate) fn cost(eng: &Engine, a: &Assignment, set: &[Candidate]) -> Cost {
    let mut c = Cost {
        highest_priority: i32::MIN,
        victims: 0,
        lost_work: 0,
    };
    for v in set.iter().filter(|v| !v.evicting) {
        c.highest_priority = c.highest_priority.max(v.priority);
        c.victims += 1;
        let held_for = u128::try_from(eng.now.saturating_sub(v.admitted_at).max(0)).unwrap_or(0);
        let amount: u128 = v
            .usage
            .iter()
            .filter(|(fr, _)| a.preempt_frs.contains(fr))
            .map(|&(_, amount)| u128::try_from(amount.max(0)).unwrap_or(0))
            .sum();
        c.lost_work = c.lost_work.saturating_add(amount.saturating_mul(held_for));
    }
    c
}

/// The TAS flavor and level of the first PodSet of `a` that must (or prefers to)
/// land in one domain.
fn domain_need(eng: &Engine, wl: WlId, a: &Assignment) -> Option<(String, String)> {
    let needs = super::topology::needs(&eng.names, &eng.inventory, &eng.wl(wl).spec, a);
    needs.into_iter().find_map(|n| match n.request.mode {
        TopologyMode::Required(level) | TopologyMode::Preferred(level) => Some((n.flavor, level)),
        _ => None,
    })
}

/// `base` (victims found in Kueue's order, still taken out of the live state) or, when
/// the gang needs one topology domain, a cheaper set found by aiming the search at a
/// single domain. The returned victims are taken out, as `base` was.
pub(crate) fn cheapest(
    eng: &mut Engine,
    wl: WlId,
    cq: CqId,
    a: &Assignment,
    excluded: &FastSet<WlId>,
    mut base: Vec<Candidate>,
) -> Vec<Candidate> {
    let Some((flavor, level)) = domain_need(eng, wl, a) else {
        return base;
    };
    let best_cost = cost(eng, a, &base);
    // Aimed searches start from the live state, with every candidate in place.
    restore(eng, &mut base);
    let domains = eng
        .inventory
        .owners_by_domain(&flavor, &level)
        .unwrap_or_default();
    let node = eng.cqs[cq as usize].node;
    let mut best: Option<(Cost, Vec<Candidate>)> = None;
    for domain in domains.iter().take(MAX_DOMAINS) {
        let (found, _) = search(eng, wl, cq, a, excluded, &domain.owners);
        let Some((removed, allow_borrowing)) = found else {
            continue;
        };
        let mut kept = fill_back(eng, node, wl, a, Some(removed), allow_borrowing);
        let c = cost(eng, a, &kept);
        restore(eng, &mut kept);
        let bar = best.as_ref().map_or(best_cost, |(b, _)| *b);
        if c < bar {
            best = Some((c, kept));
        }
    }
    let mut chosen = best.map_or(base, |(_, kept)| kept);
    for v in chosen.iter_mut() {
        take_out(eng, v);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::Cost;

    #[test]
    fn a_lower_highest_priority_beats_fewer_victims_and_fewer_victims_beat_less_lost_work() {
        let cheap_prio = Cost {
            highest_priority: 0,
            victims: 4,
            lost_work: 900,
        };
        let few = Cost {
            highest_priority: 10,
            victims: 1,
            lost_work: 1,
        };
        assert!(cheap_prio < few);
        let fewer = Cost {
            highest_priority: 0,
            victims: 2,
            lost_work: 5_000,
        };
        assert!(fewer < cheap_prio);
    }
}
