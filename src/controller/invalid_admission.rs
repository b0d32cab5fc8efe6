//! Workload admission states kuota never writes, found on a Workload someone edited by
//! hand (`kubectl edit --subresource=status`, a script, a restored backup). The API
//! server's CEL rules refuse only some of them, so the controller checks what it reads.
//!
//! What it does with them (see docs/controller.md, "Bad input"): an admission stays
//! charged exactly as written, because admitted Workloads are the truth and counting less
//! than they claim could over-commit quota; but a job whose admission names no
//! ClusterQueue, no PodSet or no flavor of its ClusterQueue is not started, and the
//! Workload gets a Warning Event naming the field and the reason. A `QuotaReserved` or
//! `Admitted` condition without an admission is not quota: the workload is queued and
//! admitted (or reported pending) like any other.
//!
//! Pure: no I/O; the callers read the Workload and its ClusterQueue from the stores.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use kube::api::DynamicObject;
use serde_json::Value;

use crate::api::Workload;
use crate::api::constants::{WORKLOAD_ADMITTED, WORKLOAD_QUOTA_RESERVED};

/// The reason of the Warning Event that reports an invalid Workload.
pub const EVENT_REASON: &str = "InvalidWorkload";

/// One thing wrong with a Workload, named by its field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The field's path, as `kubectl explain` spells it (`status.admission.clusterQueue`).
    pub field: String,
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// The flavors a ClusterQueue offers, per resource (from `spec.resourceGroups`).
pub type Offered = BTreeMap<String, BTreeSet<String>>;

/// What ClusterQueue `cq` offers, read from the watched object without decoding the whole
/// of it (this runs on every change of an admitted Workload).
pub fn offered(cq: &DynamicObject) -> Offered {
    let mut out = Offered::new();
    let groups = cq
        .data
        .pointer("/spec/resourceGroups")
        .and_then(Value::as_array);
    for group in groups.into_iter().flatten() {
        let covered = group
            .get("coveredResources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        let flavors: BTreeSet<String> = group
            .get("flavors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        for resource in covered {
            out.entry(resource.to_string())
                .or_default()
                .extend(flavors.iter().cloned());
        }
    }
    out
}

/// The ClusterQueue a Workload's admission names, if it has one.
pub fn admitted_cluster_queue(wl: &Workload) -> Option<&str> {
    wl.status
        .as_ref()?
        .admission
        .as_ref()
        .map(|a| a.cluster_queue.as_str())
}

/// Everything wrong with the Workload's admission state; empty when it is consistent.
/// `cq` is what the ClusterQueue named in `status.admission` offers (`None`: it does not
/// exist).
pub fn problems(wl: &Workload, cq: Option<&Offered>) -> Vec<Problem> {
    let Some(status) = wl.status.as_ref() else {
        return Vec::new();
    };
    let Some(admission) = status.admission.as_ref() else {
        return [WORKLOAD_QUOTA_RESERVED, WORKLOAD_ADMITTED]
            .into_iter()
            .filter(|c| status.is_condition_true(c))
            .map(|c| Problem {
                field: format!("status.conditions[{c}]"),
                reason: "is True but status.admission is not set: the Workload holds no \
                         quota, so kuota queues it like any pending workload"
                    .to_string(),
            })
            .collect();
    };
    let mut out = Vec::new();
    let cq_name = &admission.cluster_queue;
    if cq.is_none() {
        out.push(Problem {
            field: "status.admission.clusterQueue".to_string(),
            reason: format!("ClusterQueue {cq_name} doesn't exist"),
        });
    }
    let assignments = &admission.pod_set_assignments;
    let pod_sets: BTreeSet<&str> = wl.spec.pod_sets.iter().map(|p| p.name.as_str()).collect();
    if assignments.len() != wl.spec.pod_sets.len() {
        out.push(Problem {
            field: "status.admission.podSetAssignments".to_string(),
            reason: format!(
                "{} assignment(s) for {} PodSet(s) in spec.podSets",
                assignments.len(),
                wl.spec.pod_sets.len()
            ),
        });
    }
    for (i, psa) in assignments.iter().enumerate() {
        if !pod_sets.contains(psa.name.as_str()) {
            out.push(Problem {
                field: format!("status.admission.podSetAssignments[{i}].name"),
                reason: format!("no PodSet {} in spec.podSets", psa.name),
            });
        }
        let Some(offered) = cq else { continue };
        for (resource, flavor) in &psa.flavors {
            if !offered.get(resource).is_some_and(|f| f.contains(flavor)) {
                out.push(Problem {
                    field: format!("status.admission.podSetAssignments[{i}].flavors[{resource}]"),
                    reason: format!(
                        "ClusterQueue {cq_name} has no flavor {flavor} for resource {resource}"
                    ),
                });
            }
        }
    }
    out
}

/// The note of the Warning Event for `problems` (one line per problem).
pub fn note(problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    format!(
        "kuota ignores this state (it was not written by kuota): {}",
        lines.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(status: Value) -> Workload {
        serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-a-1", "namespace": "team"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                     "template": {"spec": {"containers": []}}}]},
            "status": status,
        }))
        .expect("workload")
    }

    fn cq() -> Offered {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {"resourceGroups": [
                {"coveredResources": ["cpu", "memory"],
                 "flavors": [{"name": "default", "resources": []}, {"name": "spot", "resources": []}]},
                {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": []}]}
            ]}
        }))
        .expect("cluster queue");
        offered(&obj)
    }

    fn reserved(admission: Option<Value>) -> Value {
        let cond = |t: &str| {
            json!({"type": t, "status": "True", "reason": t, "message": "",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        let mut status = json!({"conditions": [cond("QuotaReserved"), cond("Admitted")]});
        if let Some(a) = admission {
            status["admission"] = a;
        }
        status
    }

    fn fields(problems: &[Problem]) -> Vec<&str> {
        problems.iter().map(|p| p.field.as_str()).collect()
    }

    #[test]
    fn a_consistent_admission_has_no_problem() {
        let wl = workload(reserved(Some(
            json!({"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "spot", "nvidia.com/gpu": "a100"}, "count": 1}
            ]}),
        )));
        assert_eq!(problems(&wl, Some(&cq())), []);
        assert_eq!(problems(&workload(json!({})), None), []);
    }

    #[test]
    fn a_flavor_the_cluster_queue_does_not_offer_is_named_with_its_resource() {
        let wl = workload(reserved(Some(
            json!({"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "a100"}, "count": 1}
            ]}),
        )));
        let found = problems(&wl, Some(&cq()));
        assert_eq!(
            fields(&found),
            ["status.admission.podSetAssignments[0].flavors[cpu]"]
        );
        assert_eq!(
            found[0].reason,
            "ClusterQueue cq has no flavor a100 for resource cpu"
        );
    }

    #[test]
    fn assignments_must_match_the_pod_sets_by_count_and_name() {
        let wl = workload(
            json!({"admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "count": 1},
                {"name": "workers", "flavors": {"cpu": "default"}, "count": 1}
            ]}}),
        );
        let found = problems(&wl, Some(&cq()));
        assert_eq!(
            fields(&found),
            [
                "status.admission.podSetAssignments",
                "status.admission.podSetAssignments[1].name"
            ]
        );
        assert_eq!(
            found[0].reason,
            "2 assignment(s) for 1 PodSet(s) in spec.podSets"
        );
    }

    #[test]
    fn an_admission_naming_a_missing_cluster_queue_says_so() {
        let wl = workload(reserved(Some(
            json!({"clusterQueue": "gone", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "count": 1}
            ]}),
        )));
        assert_eq!(admitted_cluster_queue(&wl), Some("gone"));
        let found = problems(&wl, None);
        assert_eq!(fields(&found), ["status.admission.clusterQueue"]);
        assert_eq!(found[0].reason, "ClusterQueue gone doesn't exist");
    }

    #[test]
    fn reserved_conditions_without_an_admission_are_named() {
        let found = problems(&workload(reserved(None)), Some(&cq()));
        assert_eq!(
            fields(&found),
            [
                "status.conditions[QuotaReserved]",
                "status.conditions[Admitted]"
            ]
        );
        assert!(note(&found).contains("status.conditions[QuotaReserved]: is True but"));
    }
}
