//! Flavor assignment: for each PodSet and resource group, pick a ResourceFlavor
//! following the ClusterQueue's order, the pod's node constraints, taints and
//! flavorFungibility, and classify the result as Fit, Preempt, Wait or NoFit.

use std::collections::BTreeMap;

use super::PendingReason;
use smallvec::SmallVec;

use super::explain::{Explanation, Note, Notes};
use super::model::{CqSpec, Flavor, PodSetReq, Preference, WorkloadSpec};
use super::quota::{NodeId, QuotaTree};
use super::resources::{FlavorId, FrAmounts, FrId, Names, ResourceId, add_amount};
use crate::api::selector;

/// How well a request fits, worst first: the derived order is the preference order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// More than the ClusterQueue can ever get, or no flavor matches.
    NoFit,
    /// Fits the maximum but not what is unused, and preemption cannot help.
    Wait,
    /// Fits if some admitted workloads are preempted.
    Preempt,
    /// Fits in unused quota (possibly borrowing).
    Fit,
}

/// Per resource group, the index of the last flavor tried.
pub type Tried = SmallVec<[Option<usize>; 2]>;
/// Per PodSet, the last flavors tried: where the next search resumes.
pub type Resume = SmallVec<[Tried; 1]>;

/// The flavors chosen for one PodSet.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSetAssignment {
    pub count: i32,
    /// resource -> flavor, in resource-id order.
    pub flavors: SmallVec<[(ResourceId, FlavorId); 2]>,
    pub usage: FrAmounts,
}

/// The outcome of assigning flavors to a whole workload.
#[derive(Clone, Debug, Default)]
pub struct Assignment {
    pub pod_sets: SmallVec<[PodSetAssignment; 1]>,
    /// Total usage, sorted by fr.
    pub usage: FrAmounts,
    /// Worst mode over every PodSet and group.
    pub mode: Option<Mode>,
    /// Whether admitting it makes the ClusterQueue borrow.
    pub borrows: bool,
    /// Some resource waits where Kueue would not even look for victims (beyond nominal
    /// quota with no way to preempt while borrowing; a topology without room): Kueue's
    /// NoFit, for which no capacity is held (see `Engine::hold_unreclaimable`).
    pub hard_wait: bool,
    /// (flavor, resource) pairs where preemption would be needed.
    pub preempt_frs: Vec<FrId>,
    /// Why it does not fit, when mode is not Fit.
    pub reason: Option<PendingReason>,
    /// The pending message, as values; rendered only when it changed.
    pub explanation: Explanation,
    /// Per PodSet, per group: the last flavor index tried, for resuming next time.
    pub last_tried: Resume,
}

impl Assignment {
    pub fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::NoFit)
    }

    /// PodSet `pi` asks for resources no resource group of ClusterQueue `cq` covers:
    /// no flavor can match.
    fn reject_uncovered(&mut self, pi: usize, uncovered: &[String], cq: &str) {
        self.mode = Some(Mode::NoFit);
        self.reason = Some(PendingReason::NoMatchingFlavor);
        self.explanation.pod_sets.push((
            pi,
            smallvec::smallvec![Note::Mismatch(format!(
                "resource {} unavailable in ClusterQueue {cq} (no resource group covers it)",
                uncovered.join(", "),
            ))],
        ));
    }

    /// No flavor of a group of PodSet `pi` fits: NoMatchingFlavor when every flavor
    /// mismatched, else ExceedsMaxQuota, unless an earlier group already gave one of those.
    fn no_flavor_fits(&mut self, pi: usize, notes: Notes) {
        self.mode = Some(Mode::NoFit);
        let reason = if notes.iter().all(|n| matches!(n, Note::Mismatch(_))) {
            PendingReason::NoMatchingFlavor
        } else {
            PendingReason::ExceedsMaxQuota
        };
        self.reason = Some(match self.reason {
            Some(r)
                if r == PendingReason::NoMatchingFlavor || r == PendingReason::ExceedsMaxQuota =>
            {
                r
            }
            _ => reason,
        });
        self.explanation.pod_sets.push((pi, notes));
    }

    /// The workload's pending reason from its worst mode: none once everything fits,
    /// WaitingForQuota for a wait or preemption unless the topology had no room.
    fn settle_reason(&mut self) {
        if self.mode() == Mode::Fit {
            self.reason = None;
        } else if self.mode() != Mode::NoFit
            && self.reason != Some(PendingReason::TopologyPlacementFailed)
        {
            self.reason = Some(PendingReason::WaitingForQuota);
        }
    }
}

/// Everything the assigner reads, borrowed from the engine for one call.
pub struct Assigner<'a> {
    pub names: &'a Names,
    pub pods: ResourceId,
    pub flavors: &'a BTreeMap<FlavorId, Flavor>,
    pub tree: &'a QuotaTree,
    pub cq: &'a CqSpec,
    pub node: NodeId,
    /// Whether any preemption policy could free quota for this ClusterQueue.
    pub can_preempt: bool,
    /// borrowWithinCohort, or fair sharing with reclaimWithinCohort: preemption may
    /// help a request beyond the ClusterQueue's nominal quota.
    pub preempt_while_borrowing: bool,
    pub inventory: &'a crate::placement::Inventory,
    pub strategy: crate::placement::Strategy,
    /// Whether some admitted workload could be preempted for this one in a (flavor, resource).
    pub preemptible: &'a dyn Fn(FrId) -> bool,
    /// The preemption target search run for `amount` of one (flavor, resource) alone,
    /// as Kueue's flavor assigner asks its oracle; `None` while the engine has not run
    /// it yet (it runs the asked searches, then assigns again).
    pub simulate: &'a dyn Fn(FrId, i64) -> Option<Simulated>,
    /// Fair-sharing preemption: a flavor where the search finds nobody still ranks as
    /// one that preempts (see `rank`).
    pub fair_sharing: bool,
}

/// What the preemption target search finds for one (flavor, resource), worst first:
/// Kueue's noPreemptionCandidates, preempt and reclaim modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Simulated {
    /// Nobody to preempt: no better than waiting.
    NoCandidates,
    /// Some victim is in the workload's own ClusterQueue.
    Preempt,
    /// Every victim is in another ClusterQueue that borrows: Kueue ranks this above
    /// preemption in the workload's own ClusterQueue (Kueue PR 2811).
    Reclaim,
}

struct Candidate {
    flavor: FlavorId,
    mode: Mode,
    borrows: bool,
    /// How far up the cohort tree its fitting resources borrow (the height of the
    /// lowest cohort they fit in, 0 without borrowing): Kueue's borrowing level.
    borrow_level: u32,
    preempt_frs: Vec<FrId>,
    /// Quota fits but the topology has no room.
    topology_failed: bool,
    /// See [`Assignment::hard_wait`].
    hard_wait: bool,
    /// The (flavor, resource) amounts whose preemption mode the target search decides
    /// when this flavor competes with another (empty when nothing is worth simulating).
    to_simulate: SmallVec<[(FrId, i64); 2]>,
    /// Their outcome, once searched: the worst over them.
    simulated: Option<Simulated>,
}

impl Assigner<'_> {
    /// Assigns flavors with the given per-PodSet counts (`None` = the spec's counts),
    /// resuming each group's search after `resume[ps][group]` when given.
    pub fn assign(
        &self,
        wl: &WorkloadSpec,
        counts: Option<&[i32]>,
        resume: Option<&[Tried]>,
    ) -> Assignment {
        let mut out = Assignment {
            mode: Some(Mode::Fit),
            ..Assignment::default()
        };
        for (pi, ps) in wl.pod_sets.iter().enumerate() {
            let count = counts.and_then(|c| c.get(pi).copied()).unwrap_or(ps.count);
            let resume = resume.and_then(|r| r.get(pi));
            self.assign_pod_set(&mut out, pi, ps, count, resume);
        }
        out.preempt_frs.sort_unstable();
        out.preempt_frs.dedup();
        out.settle_reason();
        out
    }

    /// Picks a flavor in every resource group PodSet `pi` asks for, and adds the
    /// choices, their usage and their notes to `out`.
    fn assign_pod_set(
        &self,
        out: &mut Assignment,
        pi: usize,
        ps: &PodSetReq,
        count: i32,
        resume: Option<&Tried>,
    ) {
        let mut psa = PodSetAssignment {
            count,
            ..PodSetAssignment::default()
        };
        let mut tried: Tried = smallvec::smallvec![None; self.cq.groups.len()];
        // (group, resource, amount), grouped below; resources no group covers fail
        // the PodSet outright. One flat vector: this runs for every head of a cycle.
        let mut requests: SmallVec<[(usize, ResourceId, i64); 4]> = SmallVec::new();
        let mut uncovered = Vec::new();
        for &(r, per_pod) in &ps.per_pod {
            match self.cq.group_of(r) {
                Some(g) => requests.push((g, r, per_pod.saturating_mul(i64::from(count)))),
                None if r == self.pods => {}
                None => uncovered.push(self.names.resource_name(r).to_string()),
            }
        }
        if !uncovered.is_empty() {
            out.reject_uncovered(pi, &uncovered, &self.cq.name);
            out.pod_sets.push(psa);
            out.last_tried.push(tried);
            return;
        }
        requests.sort_by_key(|&(g, _, _)| g);
        for requests in requests.chunk_by(|a, b| a.0 == b.0) {
            let g = requests[0].0;
            let start = self.resume_start(resume, g);
            let (chosen, last, notes) = self.pick_flavor(ps, count, g, requests, &out.usage, start);
            tried[g] = last;
            match chosen {
                Some(c) => self.take_flavor(out, &mut psa, pi, requests, c, notes),
                None => out.no_flavor_fits(pi, notes),
            }
        }
        psa.flavors.sort_unstable();
        out.pod_sets.push(psa);
        out.last_tried.push(tried);
    }

    /// Where group `g`'s flavor search starts: after the flavor tried last time, or
    /// from the first when that was the group's last flavor (or there is none).
    fn resume_start(&self, resume: Option<&Tried>, g: usize) -> usize {
        resume
            .and_then(|r| r.get(g).copied().flatten())
            .map(|i| i + 1)
            .filter(|&i| i < self.cq.groups[g].flavors.len())
            .unwrap_or(0)
    }

    /// Records flavor candidate `c` as the choice for one group's `requests` of PodSet
    /// `pi`: its resources, usage, borrowing and preemptions, and why it does not fit.
    fn take_flavor(
        &self,
        out: &mut Assignment,
        psa: &mut PodSetAssignment,
        pi: usize,
        requests: &[(usize, ResourceId, i64)],
        c: Candidate,
        notes: Notes,
    ) {
        for &(_, r, v) in requests {
            psa.flavors.push((r, c.flavor));
            if let Some(fr) = self.names.frs.get(&(c.flavor, r)) {
                add_amount(&mut psa.usage, fr, v);
                add_amount(&mut out.usage, fr, v);
            }
        }
        out.borrows |= c.borrows;
        out.hard_wait |= c.hard_wait && c.mode == Mode::Wait;
        out.preempt_frs.extend(c.preempt_frs);
        if c.mode < out.mode() {
            out.mode = Some(c.mode);
        }
        if c.mode != Mode::Fit {
            out.explanation.pod_sets.push((pi, notes));
            let r = if c.topology_failed {
                PendingReason::TopologyPlacementFailed
            } else {
                PendingReason::WaitingForQuota
            };
            out.reason = out.reason.or(Some(r));
        }
    }

    /// Walks one group's flavors from `start`; returns the choice, the last index tried,
    /// and a note per rejected or non-fitting flavor.
    fn pick_flavor(
        &self,
        ps: &PodSetReq,
        count: i32,
        g: usize,
        requests: &[(usize, ResourceId, i64)],
        earlier: &FrAmounts,
        start: usize,
    ) -> (Option<Candidate>, Option<usize>, Notes) {
        let group = &self.cq.groups[g];
        let mut best: Option<Candidate> = None;
        let mut notes = Notes::new();
        let mut last = None;
        for idx in start..group.flavors.len() {
            last = Some(idx);
            let f = group.flavors[idx];
            let fname = self.names.flavor_name(f);
            let tas = match self.match_flavor(ps, f, fname) {
                Ok(tas) => tas,
                Err(note) => {
                    notes.push(note);
                    continue;
                }
            };
            let searchable = group.flavors.len() > 1 && !self.cq.stop_on_preempt;
            let mut cand =
                self.quota_candidate(f, fname, requests, earlier, searchable, &mut notes);
            if cand.mode == Mode::Fit && tas {
                self.check_topology_room(&mut cand, ps, count, fname, requests, &mut notes);
            }
            let stop = self.ends_search(&cand);
            let wins = cand.mode != Mode::NoFit
                && match best.as_mut() {
                    None => true,
                    Some(b) => self.better(&mut cand, b),
                };
            if wins {
                best = Some(cand);
            }
            if stop {
                break;
            }
        }
        // Having tried everything, start from the first flavor next time.
        if last == Some(group.flavors.len().saturating_sub(1)) {
            last = None;
        }
        (best, last, notes)
    }

    /// Whether flavor `f` can serve the PodSet at all: it exists, supports the
    /// topology the PodSet asks for, matches its node affinity and has no taint it
    /// does not tolerate. `Ok` says whether it is topology-aware; `Err` why not.
    fn match_flavor(&self, ps: &PodSetReq, f: FlavorId, fname: &str) -> Result<bool, Note> {
        let Some(flavor) = self.flavors.get(&f) else {
            return Err(Note::Text(format!("flavor {fname} not found")));
        };
        let tas = self.inventory.is_tas(fname);
        if ps.topology.is_some() && !tas {
            return Err(Note::Mismatch(format!(
                "flavor {fname} doesn't match: it does not support topology-aware scheduling (no topologyName)"
            )));
        }
        // Kueue matches each flavor against the selector terms on its own label keys
        // only: a term on another flavor's key says nothing about this one.
        let own_keys = |k: &str| flavor.node_labels.contains_key(k);
        if !(flavor.node_labels.is_empty()
            || selector::flavor_matches_with(&ps.constraints, &flavor.node_labels, own_keys))
        {
            return Err(Note::Mismatch(format!(
                "flavor {fname} doesn't match node affinity"
            )));
        }
        // The pod's tolerations and the flavor's own both count against the flavor's taints.
        let untolerated = if flavor.taints.is_empty() {
            None
        } else {
            let mut tolerations = ps.constraints.tolerations.clone().unwrap_or_default();
            tolerations.extend(flavor.tolerations.iter().cloned());
            selector::tolerates_all(&flavor.taints, &tolerations).cloned()
        };
        if let Some(t) = untolerated {
            return Err(Note::Mismatch(format!(
                "untolerated taint {}={}:{} in flavor {fname}",
                t.key,
                t.value.clone().unwrap_or_default(),
                t.effect
            )));
        }
        Ok(tas)
    }

    /// A quota fit on a topology-aware flavor whose nodes have no room for the PodSet
    /// right now becomes a preemption (when some policy could free nodes) or a wait.
    fn check_topology_room(
        &self,
        cand: &mut Candidate,
        ps: &PodSetReq,
        count: i32,
        fname: &str,
        requests: &[(usize, ResourceId, i64)],
        notes: &mut Notes,
    ) {
        let Err(why) = self.place_alone(ps, count, fname) else {
            return;
        };
        // Kueue's words, without the flavor's name (scheduler_tas_test.go): `topology
        // "tas-single-level" allows to fit only 1 out of 2 pod(s)`.
        notes.push(Note::Text(why.to_string()));
        // Kueue's reason: TopologyPlacementFailed only when the pods would not
        // fit even with every placed workload gone; when only other workloads
        // are in the way it is WaitingForQuota (the message still says why).
        cand.topology_failed = !self.fits_when_empty(ps, count, fname);
        if self.can_preempt {
            cand.mode = Mode::Preempt;
            // Quota fits and only the nodes are short: Kueue chooses the flavor
            // by quota (a fit), so it ranks just below a fit, as reclaiming does.
            cand.simulated = Some(Simulated::Reclaim);
            cand.preempt_frs = requests
                .iter()
                .filter_map(|&(_, r, _)| self.names.frs.get(&(cand.flavor, r)))
                .collect();
        } else {
            cand.mode = Mode::Wait;
            cand.hard_wait = true;
        }
    }

    /// flavorFungibility: whether the flavor search stops at this candidate rather
    /// than trying the group's next flavor.
    fn ends_search(&self, cand: &Candidate) -> bool {
        match cand.mode {
            Mode::Fit => !cand.borrows || self.cq.stop_on_borrow,
            Mode::Preempt => self.cq.stop_on_preempt,
            _ => false,
        }
    }

    /// Flavor `f` judged on quota alone for one group's `requests` (on top of what
    /// `earlier` PodSets take from it). `searchable`: another flavor could be chosen
    /// instead, so the preemptions it needs are worth a victim search each.
    fn quota_candidate(
        &self,
        f: FlavorId,
        fname: &str,
        requests: &[(usize, ResourceId, i64)],
        earlier: &FrAmounts,
        searchable: bool,
        notes: &mut Notes,
    ) -> Candidate {
        let mut cand = Candidate {
            flavor: f,
            mode: Mode::Fit,
            borrows: false,
            borrow_level: 0,
            preempt_frs: vec![],
            topology_failed: false,
            hard_wait: false,
            to_simulate: SmallVec::new(),
            simulated: None,
        };
        for &(_, r, v) in requests {
            let Some(fr) = self.names.frs.get(&(f, r)) else {
                cand.mode = Mode::NoFit;
                let rname = self.names.resource_name(r);
                notes.push(Note::Text(format!(
                    "flavor {fname} has no quota for {rname}"
                )));
                continue;
            };
            let before = earlier
                .iter()
                .find(|(x, _)| *x == fr)
                .map(|(_, v)| *v)
                .unwrap_or(0);
            let val = before.saturating_add(v);
            let avail = self.tree.available(self.node, fr);
            let mode = if val <= avail {
                if self.tree.borrowing_with(self.node, fr, val) {
                    cand.borrows = true;
                    let level = super::classical::borrow_level(self.tree, self.node, fr, val);
                    cand.borrow_level = cand.borrow_level.max(level);
                }
                Mode::Fit
            } else if val <= self.tree.potential_available(self.node, fr) {
                notes.push(Note::shortage(self.tree, self.node, fr, val, avail));
                // Kueue preempts for a request within nominal quota, one that can be
                // reclaimed through the cohort tree, or one that may borrow while
                // preempting; anything else waits for quota.
                let may_preempt = val <= self.tree.subtree_quota(self.node, fr)
                    || super::classical::may_reclaim_in_hierarchy(self.tree, self.node, fr, val)
                    || self.preempt_while_borrowing;
                if self.can_preempt && may_preempt && (self.preemptible)(fr) {
                    cand.preempt_frs.push(fr);
                    if searchable {
                        cand.to_simulate.push((fr, val));
                    }
                    Mode::Preempt
                } else {
                    cand.hard_wait |= !may_preempt;
                    Mode::Wait
                }
            } else {
                notes.push(Note::exceeds_max(self.tree, self.node, fr, val, before));
                Mode::NoFit
            };
            cand.mode = cand.mode.min(mode);
        }
        cand
    }

    /// Whether this PodSet alone has room in the flavor's topology right now.
    fn place_alone(
        &self,
        ps: &PodSetReq,
        count: i32,
        flavor: &str,
    ) -> Result<(), crate::placement::PlacementFailure> {
        let req = placement_request(ps, count);
        self.inventory
            .find(self.names, flavor, &req, self.strategy)
            .map(|_| ())
    }

    /// Whether the pod set would fit on `flavor`'s nodes if nothing placed held them.
    fn fits_when_empty(&self, ps: &PodSetReq, count: i32, flavor: &str) -> bool {
        let req = placement_request(ps, count);
        self.inventory
            .fits_when_empty(self.names, flavor, &req, self.strategy)
    }

    /// Whether `a` is a better choice than the earlier candidate `b`. The target search
    /// decides a Preempt candidate's rank (no candidates, preempt, reclaim); it runs
    /// only when the answer could change the choice.
    fn better(&self, a: &mut Candidate, b: &mut Candidate) -> bool {
        use Simulated::{NoCandidates, Reclaim};
        if self.rank(a, NoCandidates) > self.rank(b, Reclaim) {
            return true;
        }
        if self.rank(a, Reclaim) <= self.rank(b, NoCandidates) {
            return false;
        }
        // Until the engine has run a search, assume what the preemption oracle said
        // (someone may be preempted); the engine assigns again with the answer.
        let sa = self.resolve(a).unwrap_or(Simulated::Preempt);
        let sb = self.resolve(b).unwrap_or(Simulated::Preempt);
        self.rank(a, sa) > self.rank(b, sb)
    }

    /// The worst outcome of the target search over the candidate's preemptions;
    /// `None` while some search has not run.
    fn resolve(&self, c: &mut Candidate) -> Option<Simulated> {
        if c.simulated.is_none() && !c.to_simulate.is_empty() {
            let mut worst = Some(Simulated::Reclaim);
            for &(fr, val) in &c.to_simulate {
                worst = match ((self.simulate)(fr, val), worst) {
                    (Some(s), Some(w)) => Some(s.min(w)),
                    _ => None,
                };
            }
            c.simulated = worst;
        }
        c.simulated
    }

    /// A candidate's rank, higher is better, with `assumed` as the target search's
    /// outcome when it has not run (a flavor whose preemptions it never weighs
    /// ranks as plain preemption).
    fn rank(&self, c: &Candidate, assumed: Simulated) -> (bool, u8, u8) {
        let searched = match c.simulated {
            Some(s) => s,
            None if c.to_simulate.is_empty() => Simulated::Preempt,
            None => assumed,
        };
        let mode = match c.mode {
            Mode::Preempt => match searched {
                // Kueue ranks a flavor without victims with those that must wait. Not
                // under fair sharing: there, heads that turned to a flavor where they
                // could preempt started a fair-sharing preemption cycle between two
                // ClusterQueues' priorities (property test
                // `fair_sharing_flavor_without_victims_ranks_as_preemption`).
                Simulated::NoCandidates if !self.fair_sharing => 2 * (Mode::Wait as u8),
                Simulated::NoCandidates | Simulated::Preempt => 2 * (Mode::Preempt as u8),
                // Reclaiming ranks between preempting in the own ClusterQueue and fitting.
                Simulated::Reclaim => 2 * (Mode::Preempt as u8) + 1,
            },
            m => 2 * (m as u8),
        };
        // A flavor that can neither fit nor preempt never wins over one that can.
        let usable = mode >= 2 * (Mode::Preempt as u8);
        // Borrowing from lower in the cohort tree beats borrowing from higher up
        // (Kueue compares borrowing levels, not only whether a flavor borrows).
        let borrow = u8::MAX - c.borrow_level.min(u32::from(u8::MAX)) as u8;
        match self.cq.preference {
            // Not borrowing beats fitting: a preempting, non-borrowing flavor wins.
            Preference::PreemptionOverBorrowing => (usable, borrow, mode),
            Preference::BorrowingOverPreemption | Preference::Unset => (usable, mode, borrow),
        }
    }
}

/// The placement request of `count` pods of a pod set (unconstrained when it asks for
/// no topology).
pub(super) fn placement_request(
    ps: &PodSetReq,
    count: i32,
) -> crate::placement::PodSetPlacementRequest {
    let (mode, slice) = ps
        .topology
        .clone()
        .unwrap_or((crate::placement::TopologyMode::Unconstrained, None));
    crate::placement::PodSetPlacementRequest {
        count,
        per_pod: ps.per_pod.clone(),
        mode,
        slice,
        tolerations: ps.constraints.tolerations.clone().unwrap_or_default(),
        node_filter: crate::placement::NodeFilter::from_pod(&ps.constraints),
    }
}
