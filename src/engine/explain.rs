//! Pending-reason messages a user can act on: which flavor and resource, how much
//! is short, and which limit binds (nominal quota, borrowingLimit, or what the
//! cohort can lend).

use smallvec::SmallVec;

use super::quota::{NodeId, QuotaTree};
use super::resources::{FrId, Names};

impl super::state::Engine {
    /// `explanation` with the unused quota as it was before the workloads admitted this
    /// cycle (those of `this_cycle` that are admitted) took theirs. Kueue writes a
    /// preemptor's message at its nomination, against the cycle's snapshot, so quota an
    /// earlier head of the same cycle was admitted into still counts as unused there
    /// (scheduler_test.go, "multiple preemptions preemption possible after earlier
    /// workload fits": "1 more needed", not 2). The tree is restored before returning.
    pub(super) fn as_nominated(
        &mut self,
        cq: super::state::CqId,
        explanation: &Explanation,
        this_cycle: &super::FastSet<super::queue::WlId>,
    ) -> Explanation {
        let admitted: Vec<(NodeId, super::resources::FrAmounts)> = this_cycle
            .iter()
            .filter_map(|&id| match &self.wl(id).state {
                super::state::WlState::Admitted(a) => {
                    Some((self.cqs[a.cq as usize].node, a.usage.clone()))
                }
                _ => None,
            })
            .collect();
        if admitted.is_empty() {
            return explanation.clone();
        }
        for (node, usage) in &admitted {
            self.tree.remove_amounts(*node, usage);
        }
        let node = self.cqs[cq as usize].node;
        let out = explanation.with_availability(|fr| self.tree.available(node, fr));
        for (node, usage) in &admitted {
            self.tree.add_amounts(*node, usage);
        }
        out
    }
}

/// Formats an amount of `resource` (milli-units for cpu, whole units otherwise) the
/// way a user wrote it: "2", "500m", "4Gi".
pub fn human(resource: &str, v: i64) -> String {
    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;
    let milli = resource == crate::api::quantity::MILLI_RESOURCE;
    if milli && v % 1000 != 0 {
        return format!("{v}m");
    }
    let n = if milli { v / 1000 } else { v };
    // Binary suffixes only where a plain integer would be unreadable (64Mi and up).
    if n != 0 && (n % GI == 0 || (n % MI == 0 && n.unsigned_abs() >= 64 * MI as u64)) {
        crate::api::quantity::format_units_string(n)
    } else {
        n.to_string()
    }
}

/// One reason a flavor was not chosen for a PodSet, kept as the numbers the message
/// shows. A cycle re-evaluates thousands of parked probes and most end exactly as
/// they did last time; comparing these values is cheap, formatting them is not, so
/// the text is written only when it changed (see [`Explanation::render`]). Only
/// what the message shows is stored, so equal values mean an equal message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// `val` of `fr` does not fit in what is unused right now.
    Shortage {
        fr: FrId,
        val: i64,
        /// Unused quota it may take, never below zero.
        avail: i64,
        nominal: i64,
        used: i64,
        bound: Bound,
    },
    /// `val` of `fr` can never fit in this ClusterQueue: `max` is all it can get.
    /// `earlier` of `val` is what the PodSets before this one request.
    ExceedsMax {
        fr: FrId,
        val: i64,
        earlier: i64,
        max: i64,
        nominal: i64,
        bound: Bound,
    },
    /// The flavor cannot hold the PodSet at all (node selector, affinity, taints,
    /// no topology), already in words.
    Mismatch(String),
    /// Other rarer reasons (missing flavor or quota, topology placement), in words.
    Text(String),
}

/// Which limit binds beyond the ClusterQueue's nominal quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Not in a cohort: nothing to borrow.
    NoCohort,
    /// The borrowingLimit, and what admitting would borrow.
    BorrowingLimit { limit: i64, would_borrow: i64 },
    /// What the cohort can still lend.
    CohortLends(i64),
}

impl Note {
    /// Why `val` of `fr` does not fit in what is unused right now (`avail`).
    pub fn shortage(tree: &QuotaTree, node: NodeId, fr: FrId, val: i64, avail: i64) -> Self {
        let nominal = tree.subtree_quota(node, fr);
        let used = tree.usage(node, fr);
        let over = (used + val - nominal).max(0);
        let bound = match (
            tree.parent(node),
            tree.nodes[node as usize].limits.borrowing_limit(fr),
        ) {
            (None, _) => Bound::NoCohort,
            (Some(_), Some(limit)) if over > limit => Bound::BorrowingLimit {
                limit,
                would_borrow: over,
            },
            (Some(_), _) => Bound::CohortLends((avail - (nominal - used).max(0)).max(0)),
        };
        Note::Shortage {
            fr,
            val,
            avail: avail.max(0),
            nominal,
            used,
            bound,
        }
    }

    /// Why `val` of `fr` can never fit in this ClusterQueue.
    pub fn exceeds_max(tree: &QuotaTree, node: NodeId, fr: FrId, val: i64, earlier: i64) -> Self {
        let max = tree.potential_available(node, fr);
        let nominal = tree.subtree_quota(node, fr);
        let bound = match (
            tree.parent(node),
            tree.nodes[node as usize].limits.borrowing_limit(fr),
        ) {
            (None, _) => Bound::NoCohort,
            (Some(_), Some(limit)) if nominal + limit <= max => Bound::BorrowingLimit {
                limit,
                would_borrow: 0,
            },
            (Some(_), _) => Bound::CohortLends(max - nominal),
        };
        Note::ExceedsMax {
            fr,
            val,
            earlier,
            max,
            nominal,
            bound,
        }
    }

    /// Kueue's own wording, without kuota's explanation of the binding limit: what
    /// the WaitingForPreemption message carries, which tools parse.
    fn write_kueue(&self, names: &Names, out: &mut String) -> std::fmt::Result {
        use std::fmt::Write;
        match self {
            &Note::Shortage { fr, val, avail, .. } => {
                let (f, r) = names.fr_parts(fr);
                write!(
                    out,
                    "insufficient unused quota for {} in flavor {}, {} more needed",
                    names.resource_name(r),
                    names.flavor_name(f),
                    human(names.resource_name(r), val.saturating_sub(avail))
                )
            }
            &Note::ExceedsMax { .. } => {
                let mut full = String::new();
                self.write(names, &mut full)?;
                // The Kueue part ends at the maximum capacity.
                let end = full
                    .find(" > maximum capacity (")
                    .and_then(|i| full[i..].find(')').map(|j| i + j + 1));
                out.write_str(end.map_or(full.as_str(), |e| &full[..e]))
            }
            other => other.write(names, out),
        }
    }

    fn write(&self, names: &Names, out: &mut String) -> std::fmt::Result {
        use std::fmt::Write;
        let fr_names = |fr: FrId| {
            let (f, r) = names.fr_parts(fr);
            (names.flavor_name(f), names.resource_name(r))
        };
        match self {
            Note::Text(t) | Note::Mismatch(t) => out.write_str(t),
            &Note::Shortage {
                fr,
                val,
                avail,
                nominal,
                used,
                bound,
            } => {
                let (fname, rname) = fr_names(fr);
                let human = |v: i64| human(rname, v);
                write!(
                    out,
                    "insufficient unused quota for {rname} in flavor {fname}, {} more needed ({} requested, {} available; nominal quota {}, {} in use",
                    human(val.saturating_sub(avail)),
                    human(val),
                    human(avail),
                    human(nominal),
                    human(used)
                )?;
                match bound {
                    Bound::NoCohort => {
                        out.write_str("; the ClusterQueue is not in a cohort, so it cannot borrow)")
                    }
                    Bound::BorrowingLimit {
                        limit,
                        would_borrow,
                    } => write!(
                        out,
                        "; borrowingLimit {} would be exceeded: it would borrow {})",
                        human(limit),
                        human(would_borrow)
                    ),
                    Bound::CohortLends(lend) => write!(
                        out,
                        "; the cohort can lend only {} more: other ClusterQueues use it or keep it under their lendingLimit)",
                        human(lend)
                    ),
                }
            }
            &Note::ExceedsMax {
                fr,
                val,
                earlier,
                max,
                nominal,
                bound,
            } => {
                let (fname, rname) = fr_names(fr);
                let human = |v: i64| human(rname, v);
                // Kueue's words first (tools parse them), then which limit binds.
                write!(
                    out,
                    "insufficient quota for {rname} in flavor {fname}, previously considered podsets requests ({}) + current podset request ({}) > maximum capacity ({}) (",
                    human(earlier),
                    human(val.saturating_sub(earlier)),
                    human(max),
                )?;
                match bound {
                    Bound::NoCohort => out.write_str("nominal quota, no cohort to borrow from)"),
                    Bound::BorrowingLimit { limit, .. } => write!(
                        out,
                        "nominal quota {} + borrowingLimit {})",
                        human(nominal),
                        human(limit)
                    ),
                    Bound::CohortLends(lend) => write!(
                        out,
                        "nominal quota {} + what the cohort can lend {})",
                        human(nominal),
                        human(lend)
                    ),
                }
            }
        }
    }
}

/// The notes of one PodSet (inline: usually one).
pub type Notes = SmallVec<[Note; 1]>;

/// Why a workload's flavor assignment failed, per PodSet, plus what the cycle added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Explanation {
    /// (PodSet index, the notes of its failing resource groups), in PodSet order.
    pub pod_sets: SmallVec<[(usize, Notes); 1]>,
    /// A closing remark from the cycle (waiting for other preemptions, no victims).
    pub suffix: Option<&'static str>,
}

impl Explanation {
    /// The same notes, each shortage's unused quota as `avail` gives it.
    ///
    /// A shortage that would not have been one then (the quota an earlier head took was
    /// all it lacked: it preempts because of that head, not of what it asked at its
    /// nomination) keeps its availability from the decision: its message never says
    /// "-9 more needed".
    pub fn with_availability(&self, avail: impl Fn(FrId) -> i64) -> Self {
        let mut out = self.clone();
        for (_, notes) in &mut out.pod_sets {
            for note in notes.iter_mut() {
                if let Note::Shortage {
                    fr, val, avail: a, ..
                } = note
                {
                    let then = avail(*fr).max(0);
                    if then < *val {
                        *a = then;
                    }
                }
            }
        }
        out
    }

    /// The message a user reads, naming the workload's `pod_sets` by index.
    pub fn render(&self, names: &Names, pod_sets: &[super::model::PodSetReq]) -> String {
        let mut out = self.render_notes(names, pod_sets, Note::write);
        if let Some(s) = self.suffix {
            out.push_str(s);
        }
        out
    }

    /// Kueue's message for a workload waiting for its victims: the notes in Kueue's
    /// words, then "Pending the preemption of N workload(s)", as Kueue writes it.
    pub fn render_preempting(
        &self,
        names: &Names,
        pod_sets: &[super::model::PodSetReq],
        victims: usize,
    ) -> String {
        let mut out = self.render_notes(names, pod_sets, Note::write_kueue);
        if !out.is_empty() {
            out.push_str(". ");
        }
        out.push_str(&format!("Pending the preemption of {victims} workload(s)"));
        out
    }

    /// Per failing PodSet, "couldn't assign flavors to pod set X: " and its notes,
    /// joined by ", " as Kueue joins them.
    fn render_notes(
        &self,
        names: &Names,
        pod_sets: &[super::model::PodSetReq],
        write: fn(&Note, &Names, &mut String) -> std::fmt::Result,
    ) -> String {
        let mut out = String::new();
        for (i, (ps, notes)) in self.pod_sets.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            out.push_str("couldn't assign flavors to pod set ");
            out.push_str(pod_sets.get(*ps).map_or("", |p| p.name.as_str()));
            out.push_str(": ");
            for (j, n) in notes.iter().enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                // Writing into a String cannot fail.
                let _ = write(n, names, &mut out);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::quota::Limits;

    /// A ClusterQueue (nominal 4 cpu, borrowingLimit 2) in a cohort with a sibling
    /// (nominal 4), both fully used.
    fn full_cohort() -> (QuotaTree, NodeId, Names, FrId) {
        let mut names = Names::default();
        let (f, r) = (names.flavor("default"), names.resource("cpu"));
        let fr = names.fr(f, r);
        let mut t = QuotaTree::default();
        let cohort = t.add_node(Limits::default());
        let mut la = Limits::default();
        la.set(fr, 4000, Some(2000), None);
        let a = t.add_node(la);
        let mut lb = Limits::default();
        lb.set(fr, 4000, None, None);
        let b = t.add_node(lb);
        t.set_parent(a, cohort);
        t.set_parent(b, cohort);
        t.compute_subtree_quota();
        t.add_usage(a, fr, 4000);
        t.add_usage(b, fr, 4000);
        (t, a, names, fr)
    }

    fn render(names: &Names, note: Note) -> String {
        let e = Explanation {
            pod_sets: smallvec::smallvec![(0, smallvec::smallvec![note])],
            suffix: None,
        };
        let main = crate::engine::model::PodSetReq {
            name: "main".into(),
            count: 1,
            min_count: None,
            per_pod: vec![],
            constraints: Default::default(),
            topology: None,
        };
        e.render(names, &[main])
    }

    #[test]
    fn shortage_names_the_binding_limit() {
        let (t, a, names, fr) = full_cohort();
        let avail = t.available(a, fr);
        assert_eq!(
            render(&names, Note::shortage(&t, a, fr, 1000, avail)),
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed (1 requested, 0 available; nominal quota 4, 4 in use; the cohort can lend only 0 more: other ClusterQueues use it or keep it under their lendingLimit)"
        );
        assert_eq!(
            render(&names, Note::shortage(&t, a, fr, 3000, avail)),
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 3 more needed (3 requested, 0 available; nominal quota 4, 4 in use; borrowingLimit 2 would be exceeded: it would borrow 3)"
        );
        assert_eq!(
            render(&names, Note::exceeds_max(&t, a, fr, 7000, 0)),
            "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously considered podsets requests (0) + current podset request (7) > maximum capacity (6) (nominal quota 4 + borrowingLimit 2)"
        );
    }

    #[test]
    fn a_shortage_as_nominated_never_goes_below_one_unit_short() {
        let (t, a, names, fr) = full_cohort();
        let now = Explanation {
            pod_sets: smallvec::smallvec![(
                0,
                smallvec::smallvec![Note::shortage(&t, a, fr, 3000, 1000)]
            )],
            suffix: None,
        };
        let short = |e: &Explanation| match &e.pod_sets[0].1[0] {
            Note::Shortage { val, avail, .. } => val - avail,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            short(&now.with_availability(|_| 2000)),
            1000,
            "short then too"
        );
        assert_eq!(
            short(&now.with_availability(|_| 12_000)),
            2000,
            "it fitted then: the shortage of the decision stays"
        );
        let text = render(
            &names,
            now.with_availability(|_| 12_000).pod_sets[0].1[0].clone(),
        );
        assert!(
            text.contains(", 2 more needed (3 requested, 1 available"),
            "{text}"
        );
    }

    #[test]
    fn equal_notes_mean_equal_messages() {
        // Over-used quota makes `available` negative by different amounts; the message
        // shows 0 either way, so the notes must compare equal (nothing to re-report).
        let (t, a, _, fr) = full_cohort();
        assert_eq!(
            Note::shortage(&t, a, fr, 1000, -2000),
            Note::shortage(&t, a, fr, 1000, -5000)
        );
        assert_ne!(
            Note::shortage(&t, a, fr, 1000, 0),
            Note::shortage(&t, a, fr, 2000, 0)
        );
    }

    #[test]
    fn formats_like_a_user_writes() {
        assert_eq!(human("cpu", 2000), "2");
        assert_eq!(human("cpu", 500), "500m");
        assert_eq!(human("memory", 4 * (1i64 << 30)), "4Gi");
        assert_eq!(human("memory", 9 * (1i64 << 50)), "9Pi");
        assert_eq!(human("memory", 1536), "1536");
        assert_eq!(human("nvidia.com/gpu", 8), "8");
        assert_eq!(human("memory", 0), "0");
    }
}
