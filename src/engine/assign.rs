//! Running the flavor assigner for a head: the engine's side of it, which feeds the
//! assigner what it reads (quota tree, preemption oracle) and runs the victim searches
//! it asks for between its passes.

use super::cycle::CycleState;
use super::flavor::{Assigner, Assignment};
use super::model::Policy;
use super::preempt;
use super::queue::WlId;
use super::state::{CqId, Engine};

impl Engine {
    /// Runs the flavor assigner for `id` in `c`, resuming where the last attempt stopped.
    pub(super) fn assign(
        &mut self,
        c: CqId,
        id: WlId,
        counts: Option<&[i32]>,
        st: &CycleState,
    ) -> Assignment {
        let w = self.wl(id);
        // A copy (inline for the usual one or two PodSets and groups): the searches the
        // assigner asks for need the engine mutably.
        let resume =
            (w.resume_gen == self.quota_gen && !w.resume.is_empty()).then(|| w.resume.clone());
        self.assign_from(c, id, counts, resume.as_deref(), st)
    }

    /// [`Engine::assign`] with explicit flavor-search resume points.
    ///
    /// Where flavors compete on how they would preempt, the assigner asks for the
    /// preemption target search per flavor (Kueue's oracle). The search needs the live
    /// quota tree, which the assigner only reads, so the asked searches run between
    /// passes and the assigner runs again with their outcomes; a pass that asks for
    /// nothing new is final. Most assignments ask for nothing and run once. Each search
    /// is the one that picks victims (`targets`, with this cycle's admissions,
    /// holds and issued preemptions), so the flavor's rank agrees with what it finds.
    pub(super) fn assign_from(
        &mut self,
        c: CqId,
        id: WlId,
        counts: Option<&[i32]>,
        resume: Option<&[super::flavor::Tried]>,
        st: &CycleState,
    ) -> Assignment {
        let oracle = self.oracle.get_mut();
        oracle.simulated.clear();
        oracle.asked.clear();
        loop {
            let a = self.assign_pass(c, id, counts, resume);
            let mut asked = std::mem::take(&mut self.oracle.get_mut().asked);
            if asked.is_empty() {
                self.oracle.get_mut().asked = asked;
                return a;
            }
            for &(fr, val) in &asked {
                let need = preempt::single_need(fr, val);
                let (targets, _) = self.targets(c, id, &need, st);
                let outcome = preempt::outcome(self, c, &targets);
                self.oracle.get_mut().simulated.push((fr, val, outcome));
            }
            asked.clear();
            self.oracle.get_mut().asked = asked;
        }
    }

    /// One run of the flavor assigner, reading the searches run so far.
    fn assign_pass(
        &self,
        c: CqId,
        id: WlId,
        counts: Option<&[i32]>,
        resume: Option<&[super::flavor::Tried]>,
    ) -> Assignment {
        let cq = &self.cqs[c as usize];
        let w = self.wl(id);
        let has_cohort = self.tree.parent(cq.node).is_some();
        let can_preempt = cq.spec.within_cq != Policy::Never
            || (has_cohort
                && (cq.spec.reclaim != Policy::Never
                    || cq.spec.borrow_within_cohort.is_some()
                    || self.config.fair_sharing.is_some()));
        let preemptible = |fr| can_preempt && preempt::has_candidates(self, id, c, fr);
        let simulate = |fr, val| self.oracle.borrow_mut().simulated(fr, val);
        // Kueue lets a request beyond nominal quota preempt only through these.
        let preempt_while_borrowing = has_cohort
            && (cq.spec.borrow_within_cohort.is_some()
                || (self.config.fair_sharing.is_some() && cq.spec.reclaim != Policy::Never));
        let assigner = Assigner {
            preempt_while_borrowing,
            preemptible: &preemptible,
            simulate: &simulate,
            fair_sharing: self.config.fair_sharing.is_some(),
            names: &self.names,
            pods: self.pods,
            flavors: &self.flavors,
            tree: &self.tree,
            cq: &cq.spec,
            node: cq.node,
            can_preempt,
            inventory: &self.inventory,
            strategy: self.config.placement,
        };
        assigner.assign(&w.spec, counts, resume)
    }
}
