//! Kueue's wording of a preemption: the Evicted and Preempted conditions' message names
//! the preemptor by its UID and its job's UID and shows both ClusterQueues' places in the
//! cohort tree, so a user (or a tool written against Kueue) can tell who took the quota.
//! The engine is pure and knows neither UIDs nor object metadata, so the actuator words
//! the message from the watched objects; the pure builders here are what tests pin.

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

use crate::api::Workload;
use crate::api::constants::JOB_UID_LABEL;
use crate::controller::translate::decode;
use crate::controller::watch::{Kind, Stores};
use crate::engine::{PreemptionReason, WorkloadKey};

/// Cohort trees deeper than this are cut short (a cycle is invalid input, but must not
/// hang the writer).
const MAX_DEPTH: usize = 64;

/// Kueue's `HumanReadablePreemptionReasons`.
pub fn human_reason(reason: PreemptionReason) -> &'static str {
    match reason {
        PreemptionReason::InClusterQueue => "prioritization in the ClusterQueue",
        PreemptionReason::InCohortReclamation => "reclamation within the cohort",
        PreemptionReason::InCohortFairSharing => "Fair Sharing within the cohort",
        PreemptionReason::InCohortReclaimWhileBorrowing => {
            "reclamation within the cohort while borrowing"
        }
    }
}

/// What the message says about the two workloads; `None` is written as Kueue writes an
/// unknown value (`UNKNOWN`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parties {
    pub preemptor_uid: Option<String>,
    pub preemptor_job_uid: Option<String>,
    pub preemptor_path: Option<String>,
    pub preemptee_path: Option<String>,
    pub preemptor_priority: i32,
    pub preemptee_priority: i32,
}

/// Kueue's `preemptionMessage`: the Evicted and Preempted conditions' message.
pub fn condition_message(parties: &Parties, reason: PreemptionReason) -> String {
    let or_unknown = |v: &Option<String>| {
        v.as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("UNKNOWN")
            .to_string()
    };
    format!(
        "Preempted to accommodate a workload (UID: {}, JobUID: {}) due to {}; preemptor path: {}; preemptee path: {}",
        or_unknown(&parties.preemptor_uid),
        or_unknown(&parties.preemptor_job_uid),
        human_reason(reason),
        or_unknown(&parties.preemptor_path),
        or_unknown(&parties.preemptee_path),
    )
}

/// The `Preempted` Event's note: the condition message plus both priorities (kuota has no
/// priority boost, so effective equals base).
pub fn event_message(parties: &Parties, reason: PreemptionReason) -> String {
    let (p, v) = (parties.preemptor_priority, parties.preemptee_priority);
    format!(
        "{}; preemptor effective priority: {p} (base: {p}, boost: 0); preemptee effective priority: {v} (base: {v}, boost: 0)",
        condition_message(parties, reason)
    )
}

/// Kueue's `buildCQPath`: `/root/.../parent/cq`, from the ClusterQueue's cohort up
/// through each Cohort's parent.
pub fn cq_path(
    cq: &str,
    cohort: Option<&str>,
    parent_of: impl Fn(&str) -> Option<String>,
) -> String {
    let mut parts = vec![cq.to_string()];
    let mut next = cohort.filter(|c| !c.is_empty()).map(str::to_string);
    while let Some(c) = next.take() {
        if parts.len() > MAX_DEPTH || parts.contains(&c) {
            break;
        }
        next = parent_of(&c).filter(|p| !p.is_empty());
        parts.push(c);
    }
    parts.reverse();
    format!("/{}", parts.join("/"))
}

fn str_at<'a>(obj: &'a DynamicObject, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(&obj.data, |v, k| v.get(k))
        .and_then(Value::as_str)
}

/// The message's facts, read from the controller's stores: the preemptor's ClusterQueue
/// through its LocalQueue (it is not admitted yet), the victim's from its admission.
pub fn parties(stores: &Stores, victim: &WorkloadKey, preemptor: &WorkloadKey) -> Parties {
    // Decoded whole: a preemption is rare, and the typed form names the fields.
    let workload = |k: &WorkloadKey| {
        let r = ObjectRef::new_with(&k.name, Kind::Workload.api_resource()).within(&k.namespace);
        let stored = stores.workloads.get(&r)?;
        decode::<Workload, _>(Kind::Workload, &*stored).ok()
    };
    let path_of = |cq: &str| {
        let cq_obj = stores
            .cluster_queues
            .get(&ObjectRef::new_with(cq, Kind::ClusterQueue.api_resource()));
        let cohort = cq_obj
            .as_deref()
            .and_then(|o| str_at(o, &["spec", "cohortName"]))
            .map(str::to_string);
        cq_path(cq, cohort.as_deref(), |c| {
            stores
                .cohorts
                .get(&ObjectRef::new_with(c, Kind::Cohort.api_resource()))
                .and_then(|o| str_at(&o, &["spec", "parentName"]).map(str::to_string))
        })
    };
    let priority = |w: Option<&Workload>| w.and_then(|w| w.spec.priority).unwrap_or(0);
    let p = workload(preemptor);
    let v = workload(victim);
    let preemptor_cq = p
        .as_ref()
        .and_then(|w| w.spec.queue_name.as_deref())
        .and_then(|lq| {
            let r = ObjectRef::new_with(lq, Kind::LocalQueue.api_resource())
                .within(&preemptor.namespace);
            let lq = stores.local_queues.get(&r)?;
            str_at(&lq, &["spec", "clusterQueue"]).map(str::to_string)
        });
    let preemptee_cq = v
        .as_ref()
        .and_then(|w| w.status.as_ref()?.admission.as_ref())
        .map(|a| a.cluster_queue.clone());
    Parties {
        preemptor_uid: p.as_ref().and_then(|w| w.metadata.uid.clone()),
        preemptor_job_uid: p
            .as_ref()
            .and_then(|w| w.metadata.labels.as_ref()?.get(JOB_UID_LABEL).cloned()),
        preemptor_path: preemptor_cq.as_deref().map(path_of),
        preemptee_path: preemptee_cq.as_deref().map(path_of),
        preemptor_priority: priority(p.as_ref()),
        preemptee_priority: priority(v.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_kueues_with_uids_reason_and_paths() {
        let parties = Parties {
            preemptor_uid: Some("wl-in".into()),
            preemptor_job_uid: Some("job-in".into()),
            preemptor_path: Some("/r/c/q".into()),
            preemptee_path: Some("/r/q_borrowing".into()),
            preemptor_priority: 100,
            preemptee_priority: 1,
        };
        // Kueue's preemption_hierarchical_test.go expects exactly this text.
        assert_eq!(
            condition_message(&parties, PreemptionReason::InCohortReclamation),
            "Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to \
             reclamation within the cohort; preemptor path: /r/c/q; preemptee path: /r/q_borrowing"
        );
        assert_eq!(
            event_message(&parties, PreemptionReason::InClusterQueue),
            "Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to \
             prioritization in the ClusterQueue; preemptor path: /r/c/q; preemptee path: \
             /r/q_borrowing; preemptor effective priority: 100 (base: 100, boost: 0); \
             preemptee effective priority: 1 (base: 1, boost: 0)"
        );
    }

    #[test]
    fn unknown_facts_read_unknown_as_in_kueue() {
        assert_eq!(
            condition_message(&Parties::default(), PreemptionReason::InClusterQueue),
            "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to \
             prioritization in the ClusterQueue; preemptor path: UNKNOWN; preemptee path: UNKNOWN"
        );
    }

    #[test]
    fn paths_climb_the_cohort_tree_and_stop_at_a_cycle() {
        let parent = |c: &str| match c {
            "c" => Some("r".to_string()),
            "loop-a" => Some("loop-b".to_string()),
            "loop-b" => Some("loop-a".to_string()),
            _ => None,
        };
        assert_eq!(cq_path("q", Some("c"), parent), "/r/c/q");
        assert_eq!(cq_path("q", None, parent), "/q");
        assert_eq!(cq_path("q", Some(""), parent), "/q");
        assert_eq!(cq_path("q", Some("loop-a"), parent), "/loop-b/loop-a/q");
    }
}
