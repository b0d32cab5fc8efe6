//! Update-time rules: what may not change once an object is in use (Kueue's webhook and CEL
//! `self == oldSelf` rules), reported as `field is immutable` errors.

use super::{FieldError, Path};
use crate::api::constants::WORKLOAD_QUOTA_RESERVED;
use crate::api::localqueue::LocalQueue;
use crate::api::topology::Topology;
use crate::api::workload::Workload;
use crate::api::workload_status::Admission;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

/// Kubernetes' message for a field that may not change.
pub const FIELD_IMMUTABLE_MSG: &str = "field is immutable";

fn immutable(path: &Path, value: &str) -> FieldError {
    FieldError::invalid(path, value, FIELD_IMMUTABLE_MSG)
}

fn immutable_omit(path: &Path) -> FieldError {
    FieldError::invalid_omit(path, FIELD_IMMUTABLE_MSG)
}

fn quota_reserved(wl: &Workload) -> bool {
    wl.status
        .as_ref()
        .is_some_and(|s| s.is_condition_true(WORKLOAD_QUOTA_RESERVED))
}

/// Validates a Workload update: the new object's own rules, plus, while the old object holds
/// a quota reservation, `spec.podSets` and `spec.queueName` are frozen; an admission may be
/// set or cleared but not changed (except its topology assignment, filled in later); and
/// reclaimable pod counts may only grow.
pub fn validate_workload_update(new: &Workload, old: &Workload) -> Vec<FieldError> {
    let mut errs = super::validate_workload(new);
    let spec = Path::new("spec");
    if quota_reserved(old) {
        let ps = spec.child("podSets");
        if new.spec.pod_sets.len() != old.spec.pod_sets.len() {
            errs.push(immutable_omit(&ps));
        } else {
            for (i, (n, o)) in new.spec.pod_sets.iter().zip(&old.spec.pod_sets).enumerate() {
                if n != o {
                    errs.push(immutable_omit(&ps.index(i)));
                }
            }
        }
        if new.spec.queue() != old.spec.queue() {
            errs.push(immutable(
                &spec.child("queueName"),
                new.spec.queue().unwrap_or_default(),
            ));
        }
    }
    let status = Path::new("status");
    let adm = |w: &Workload| w.status.as_ref().and_then(|s| s.admission.clone());
    if let (Some(n), Some(o)) = (adm(new), adm(old))
        && !admission_equal_but_topology(&n, &o)
    {
        errs.push(immutable_omit(&status.child("admission")));
    }
    if quota_reserved(old) && quota_reserved(new) {
        let counts = |w: &Workload| -> BTreeMap<String, i32> {
            w.status
                .iter()
                .flat_map(|s| s.reclaimable_pods.iter())
                .map(|r| (r.name.clone(), r.count))
                .collect()
        };
        let (nc, oc) = (counts(new), counts(old));
        let rp = status.child("reclaimablePods");
        for (name, old_count) in &oc {
            match nc.get(name) {
                None => errs.push(FieldError::required(&rp.key(name), "cannot be removed")),
                Some(c) if c < old_count => errs.push(FieldError::invalid_num(
                    &rp.key(name).child("count"),
                    c,
                    format!("cannot be less than {old_count}"),
                )),
                Some(_) => {}
            }
        }
    }
    errs
}

/// Admissions are equal apart from topology assignments, which are filled in once a delayed
/// topology request becomes ready.
fn admission_equal_but_topology(new: &Admission, old: &Admission) -> bool {
    if new.cluster_queue != old.cluster_queue
        || new.pod_set_assignments.len() != old.pod_set_assignments.len()
    {
        return false;
    }
    new.pod_set_assignments
        .iter()
        .zip(&old.pod_set_assignments)
        .all(|(n, o)| {
            let mut o = o.clone();
            o.topology_assignment.clone_from(&n.topology_assignment);
            o.delayed_topology_request = n.delayed_topology_request;
            *n == o
        })
}

/// Validates a LocalQueue update: its own rules, and `spec.clusterQueue` is immutable.
pub fn validate_local_queue_update(new: &LocalQueue, old: &LocalQueue) -> Vec<FieldError> {
    let mut errs = super::validate_local_queue(new);
    if new.spec.cluster_queue != old.spec.cluster_queue {
        errs.push(immutable(
            &Path::new("spec").child("clusterQueue"),
            &new.spec.cluster_queue,
        ));
    }
    errs
}

/// Validates a Topology update: its own rules, and, like Kueue's CRD rule, `spec.levels`
/// may change only while `kubernetes.io/hostname` is the lowest level before and after
/// (nodes are then still placed by hostname, so admitted workloads keep their meaning).
pub fn validate_topology_update(new: &Topology, old: &Topology) -> Vec<FieldError> {
    let mut errs = super::validate_topology(new);
    let hostname_lowest = |t: &Topology| {
        t.spec
            .levels
            .last()
            .is_some_and(|l| l.node_label == crate::api::constants::HOSTNAME_LABEL)
    };
    if new.spec.levels != old.spec.levels && !(hostname_lowest(new) && hostname_lowest(old)) {
        // Kueue states this rule in CEL; the API server renders such errors with the
        // value's type ("array").
        errs.push(FieldError::invalid(
            &Path::new("spec").child("levels"),
            "array",
            "levels are mutable only when kubernetes.io/hostname is the lowest level both \
             before and after the change",
        ));
    }
    errs
}

/// Validates a metav1 LabelSelector like apimachinery's `ValidateLabelSelector`.
pub fn validate_label_selector(sel: &LabelSelector, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    super::quota::label_selector(&mut errs, sel, path);
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::localqueue::LocalQueueSpec;

    fn wl(yaml: &str) -> Workload {
        let mut w: Workload = serde_norway::from_str(yaml).expect("test workload parses");
        w.metadata.namespace = Some("ns".into());
        w
    }

    const RESERVED: &str = r#"
metadata: {name: w}
spec:
  queueName: a
  podSets: [{name: main, count: 2, template: {}}]
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: "", lastTransitionTime: "2024-01-01T00:00:00Z"}
  admission:
    clusterQueue: cq
    podSetAssignments: [{name: main, count: 2, flavors: {cpu: f}}]
  reclaimablePods: [{name: main, count: 1}]
"#;

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn reserved_workload_freezes_pod_sets_queue_and_admission() {
        let old = wl(RESERVED);
        assert!(validate_workload_update(&old, &old).is_empty());
        let mut new = old.clone();
        new.spec.queue_name = Some("b".into());
        new.spec.pod_sets[0].count = 3;
        if let Some(s) = new.status.as_mut() {
            if let Some(a) = s.admission.as_mut() {
                a.cluster_queue = "other".into();
            }
            s.reclaimable_pods[0].count = 0;
        }
        let m = msgs(&validate_workload_update(&new, &old));
        assert_eq!(
            m,
            [
                "spec.podSets[0]: Invalid value: field is immutable",
                "spec.queueName: Invalid value: \"b\": field is immutable",
                "status.admission: Invalid value: field is immutable",
                "status.reclaimablePods[main].count: Invalid value: 0: cannot be less than 1",
            ]
        );
        let mut pending = old.clone();
        pending.status = None;
        let mut changed = pending.clone();
        changed.spec.queue_name = Some("b".into());
        assert!(validate_workload_update(&changed, &pending).is_empty());
    }

    #[test]
    fn local_queue_and_topology_immutability() {
        let mut old = LocalQueue::new(
            "q",
            LocalQueueSpec {
                cluster_queue: "a".into(),
                ..Default::default()
            },
        );
        old.metadata.namespace = Some("ns".into());
        let mut new = old.clone();
        new.spec.cluster_queue = "b".into();
        assert_eq!(
            msgs(&validate_local_queue_update(&new, &old)),
            ["spec.clusterQueue: Invalid value: \"b\": field is immutable"]
        );
        let t: Topology =
            serde_norway::from_str("metadata: {name: t}\nspec: {levels: [{nodeLabel: rack}]}")
                .expect("valid");
        let mut t2 = t.clone();
        t2.spec.levels[0].node_label = "block".into();
        assert_eq!(
            msgs(&validate_topology_update(&t2, &t)),
            [
                "spec.levels: Invalid value: \"array\": levels are mutable only when \
                 kubernetes.io/hostname is the lowest level both before and after the change"
            ]
        );
        // With the hostname lowest on both sides, levels above it may change.
        let with_host = |levels: &str| -> Topology {
            serde_norway::from_str(&format!(
                "metadata: {{name: t}}\nspec: {{levels: {levels}}}"
            ))
            .expect("valid")
        };
        let old = with_host("[{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]");
        let new = with_host(
            "[{nodeLabel: block}, {nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]",
        );
        assert!(validate_topology_update(&new, &old).is_empty());
        // Dropping the hostname level is a change that loses it: refused.
        let no_host = with_host("[{nodeLabel: block}, {nodeLabel: rack}]");
        assert_eq!(msgs(&validate_topology_update(&no_host, &old)).len(), 1);
        assert_eq!(msgs(&validate_topology_update(&old, &no_host)).len(), 1);
    }
}
