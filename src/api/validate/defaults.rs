//! Kueue's CRD defaults (`+kubebuilder:default` markers), applied to a copy of an object
//! before it is validated.
//!
//! The API server fills these in before any validation runs, so a rule that reads a defaulted
//! field must see the default, not an absent value: a ClusterQueue with
//! `flavorFungibility: {whenCanBorrow: TryNextFlavor, preference: ...}` is valid in Kueue
//! because `whenCanPreempt` defaults to `TryNextFlavor`.

use crate::api::clusterqueue::{
    BorrowWithinCohortPolicy, ClusterQueue, FlavorFungibilityPolicy, PreemptionPolicy,
    QueueingStrategy,
};
use crate::api::common::{FairSharing, StopPolicy};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The fair-sharing weight Kueue's CRD sets when `fairSharing` is present without one.
const DEFAULT_WEIGHT: &str = "1";

/// A copy of `cq` with Kueue's CRD defaults filled in where fields are absent.
pub fn cluster_queue_with_defaults(cq: &ClusterQueue) -> ClusterQueue {
    let mut cq = cq.clone();
    let spec = &mut cq.spec;
    spec.queueing_strategy
        .get_or_insert(QueueingStrategy::BestEffortFifo);
    spec.stop_policy.get_or_insert(StopPolicy::None);
    let ff = spec.flavor_fungibility.get_or_insert_with(Default::default);
    ff.when_can_borrow
        .get_or_insert(FlavorFungibilityPolicy::MayStopSearch);
    ff.when_can_preempt
        .get_or_insert(FlavorFungibilityPolicy::TryNextFlavor);
    let p = spec.preemption.get_or_insert_with(Default::default);
    p.reclaim_within_cohort
        .get_or_insert(PreemptionPolicy::Never);
    p.within_cluster_queue
        .get_or_insert(PreemptionPolicy::Never);
    p.borrow_within_cohort
        .get_or_insert_with(Default::default)
        .policy
        .get_or_insert(BorrowWithinCohortPolicy::Never);
    fair_sharing_with_defaults(spec.fair_sharing.as_mut());
    cq
}

/// Fills in `fairSharing.weight` (Kueue's CRD default 1) when `fairSharing` is present.
pub fn fair_sharing_with_defaults(fs: Option<&mut FairSharing>) {
    if let Some(fs) = fs {
        fs.weight
            .get_or_insert_with(|| Quantity(DEFAULT_WEIGHT.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_only_absent_fields() {
        let spec = serde_norway::from_str(
            "flavorFungibility: {whenCanBorrow: TryNextFlavor}\npreemption: {withinClusterQueue: LowerPriority}\nfairSharing: {}\n",
        )
        .expect("test spec parses");
        let cq = cluster_queue_with_defaults(&ClusterQueue::new("cq", spec));
        let ff = cq.spec.flavor_fungibility.expect("defaulted");
        assert_eq!(
            ff.when_can_borrow,
            Some(FlavorFungibilityPolicy::TryNextFlavor)
        );
        assert_eq!(
            ff.when_can_preempt,
            Some(FlavorFungibilityPolicy::TryNextFlavor)
        );
        assert_eq!(ff.preference, None, "preference has no CRD default");
        let p = cq.spec.preemption.expect("defaulted");
        assert_eq!(
            p.within_cluster_queue,
            Some(PreemptionPolicy::LowerPriority)
        );
        assert_eq!(p.reclaim_within_cohort, Some(PreemptionPolicy::Never));
        assert_eq!(
            p.borrow_within_cohort.and_then(|b| b.policy),
            Some(BorrowWithinCohortPolicy::Never)
        );
        let weight = cq.spec.fair_sharing.and_then(|f| f.weight);
        assert_eq!(weight, Some(Quantity("1".into())));
    }

    #[test]
    fn absent_fair_sharing_stays_absent() {
        let cq = cluster_queue_with_defaults(&ClusterQueue::new("cq", Default::default()));
        assert!(cq.spec.fair_sharing.is_none());
        assert_eq!(
            cq.spec.flavor_fungibility.and_then(|f| f.when_can_borrow),
            Some(FlavorFungibilityPolicy::MayStopSearch)
        );
    }
}
