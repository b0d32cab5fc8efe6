//! Workload rules (webhook + CRD).

use super::names::{dns1123_label_errors, name_ref, push_errors};
use super::{FieldError, Path, quantity, validate_object_meta};
use crate::api::constants::{MAX_POD_SETS, WORKLOAD_QUOTA_RESERVED};
use crate::api::workload::{
    POD_PRIORITY_CLASS_GROUP, POD_PRIORITY_CLASS_KIND, PodSet, PriorityClassRef,
    WORKLOAD_PRIORITY_CLASS_GROUP, WORKLOAD_PRIORITY_CLASS_KIND, Workload, WorkloadSpec,
};
use crate::api::workload_status::WorkloadStatus;
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use std::collections::BTreeSet;

/// Validates a Workload like Kueue's webhook and CRD rules.
pub fn validate_workload(wl: &Workload) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&wl.metadata, true);
    let spec = &wl.spec;
    let path = Path::new("spec");
    let names = pod_sets(&mut errs, &spec.pod_sets, &path.child("podSets"));
    queue_and_priority(&mut errs, spec, &path);
    if let Some(t) = spec.maximum_execution_time_seconds
        && t < 1
    {
        errs.push(FieldError::invalid_num(
            &path.child("maximumExecutionTimeSeconds"),
            t,
            "spec.maximumExecutionTimeSeconds in body should be greater than or equal to 1",
        ));
    }
    if let Some(status) = &wl.status {
        let sp = Path::new("status");
        admitted_pod_sets(&mut errs, status, &names, &sp);
        reclaimable_pods(&mut errs, status, &spec.pod_sets, &sp);
    }
    errs
}

/// `spec.podSets`: how many, each one, unique names and at most one `minCount`.
/// Returns the pod set names, which the status must refer to.
fn pod_sets<'a>(
    errs: &mut Vec<FieldError>,
    pod_sets: &'a [PodSet],
    ps_path: &Path,
) -> BTreeSet<&'a str> {
    if pod_sets.is_empty() {
        errs.push(FieldError::invalid_num(
            ps_path,
            0,
            "spec.podSets in body should have at least 1 items",
        ));
    } else if pod_sets.len() > MAX_POD_SETS {
        errs.push(FieldError::too_many(ps_path, pod_sets.len(), MAX_POD_SETS));
    }
    let mut names = BTreeSet::new();
    for (i, ps) in pod_sets.iter().enumerate() {
        let p = ps_path.index(i);
        pod_set(errs, ps, &p);
        if !names.insert(ps.name.as_str()) {
            errs.push(FieldError::duplicate(&p.child("name"), &ps.name));
        }
    }
    let with_min = pod_sets.iter().filter(|p| p.min_count.is_some()).count();
    if with_min > 1 {
        errs.push(FieldError::invalid_num(
            ps_path,
            with_min,
            "at most one podSet can use minCount",
        ));
    }
    names
}

/// `spec.queueName` and `spec.priorityClassRef`, which needs `spec.priority` beside it.
fn queue_and_priority(errs: &mut Vec<FieldError>, spec: &WorkloadSpec, path: &Path) {
    if let Some(q) = spec.queue_name.as_deref().filter(|q| !q.is_empty()) {
        name_ref(errs, &path.child("queueName"), q);
    }
    if let Some(r) = &spec.priority_class_ref {
        priority_class_ref(errs, r, &path.child("priorityClassRef"));
        if spec.priority.is_none() {
            errs.push(FieldError::invalid_omit(
                path,
                "priority should not be nil when priorityClassRef is set",
            ));
        }
    }
}

/// `status.admission.podSetAssignments`: once quota is reserved, each names a pod set.
fn admitted_pod_sets(
    errs: &mut Vec<FieldError>,
    status: &WorkloadStatus,
    names: &BTreeSet<&str>,
    sp: &Path,
) {
    if status.is_condition_true(WORKLOAD_QUOTA_RESERVED)
        && let Some(adm) = &status.admission
    {
        let ap = sp.child("admission").child("podSetAssignments");
        for (i, psa) in adm.pod_set_assignments.iter().enumerate() {
            if !names.contains(psa.name.as_str()) {
                errs.push(FieldError::not_found(&ap.index(i).child("name"), &psa.name));
            }
        }
    }
}

/// `status.reclaimablePods`: each names a pod set and reclaims no more than its count.
fn reclaimable_pods(
    errs: &mut Vec<FieldError>,
    status: &WorkloadStatus,
    pod_sets: &[PodSet],
    sp: &Path,
) {
    for rp in &status.reclaimable_pods {
        let p = sp.child("reclaimablePods").key(&rp.name);
        match pod_sets.iter().find(|ps| ps.name == rp.name) {
            None => {
                // Each valid pod set name once: malformed names are reported at their
                // own path and cannot be referenced.
                let known: BTreeSet<&str> = pod_sets
                    .iter()
                    .map(|p| p.name.as_str())
                    .filter(|n| dns1123_label_errors(n).is_empty())
                    .collect();
                let known: Vec<&str> = known.into_iter().collect();
                errs.push(FieldError::not_supported_or(
                    &p.child("name"),
                    &rp.name,
                    &known,
                    "spec.podSets has no pod set to reclaim pods from",
                ));
            }
            Some(ps) if rp.count > ps.count => errs.push(FieldError::invalid_num(
                &p.child("count"),
                rp.count,
                format!("should be less or equal to {}", ps.count),
            )),
            Some(_) => {}
        }
    }
}

fn pod_set(errs: &mut Vec<FieldError>, ps: &PodSet, path: &Path) {
    push_errors(
        errs,
        &path.child("name"),
        &ps.name,
        dns1123_label_errors(&ps.name),
    );
    if ps.count < 0 {
        errs.push(FieldError::invalid_num(
            &path.child("count"),
            ps.count,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(min) = ps.min_count
        && (min < 1 || min > ps.count)
    {
        errs.push(FieldError::invalid_omit(
            path,
            "minCount should be positive and less or equal to count",
        ));
    }
    if let Some(tr) = &ps.topology_request
        && let Some(size) = tr.pod_set_slice_size
        && size < 1
    {
        let p = path.child("topologyRequest").child("podSetSliceSize");
        errs.push(FieldError::invalid_num(
            &p,
            size,
            "must be greater than or equal to 1",
        ));
    }
    errs.extend(validate_pod_template(&ps.template, &path.child("template")));
}

/// Checks a pod template's resource quantities (requests, limits, overhead) and that no
/// container requests the `pods` resource, which Kueue reserves.
pub fn validate_pod_template(t: &PodTemplateSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(pod) = &t.spec else {
        return errs;
    };
    let sp = path.child("spec");
    for (i, c) in pod.init_containers.iter().flatten().enumerate() {
        container(&mut errs, c, &sp.child("initContainers").index(i));
    }
    for (i, c) in pod.containers.iter().enumerate() {
        container(&mut errs, c, &sp.child("containers").index(i));
    }
    for (name, q) in pod.overhead.iter().flatten() {
        quantity(q, &sp.child("overhead").key(name), &mut errs);
    }
    errs
}

fn container(errs: &mut Vec<FieldError>, c: &Container, path: &Path) {
    let Some(res) = &c.resources else {
        return;
    };
    let rp = path.child("resources");
    for (name, q) in res.requests.iter().flatten() {
        let p = rp.child("requests").key(name);
        if name == "pods" {
            errs.push(FieldError::invalid(
                &p,
                "pods",
                "the key is reserved for internal kueue use",
            ));
        }
        quantity(q, &p, errs);
    }
    for (name, q) in res.limits.iter().flatten() {
        quantity(q, &rp.child("limits").key(name), errs);
    }
}

fn priority_class_ref(errs: &mut Vec<FieldError>, r: &PriorityClassRef, path: &Path) {
    let groups = [WORKLOAD_PRIORITY_CLASS_GROUP, POD_PRIORITY_CLASS_GROUP];
    let kinds = [WORKLOAD_PRIORITY_CLASS_KIND, POD_PRIORITY_CLASS_KIND];
    if !groups.contains(&r.group.as_str()) {
        errs.push(FieldError::not_supported(
            &path.child("group"),
            &r.group,
            &groups,
        ));
    }
    if !kinds.contains(&r.kind.as_str()) {
        // A known group allows exactly one kind; offer only that one.
        let fitting: &[&str] = match r.group.as_str() {
            WORKLOAD_PRIORITY_CLASS_GROUP => &[WORKLOAD_PRIORITY_CLASS_KIND],
            POD_PRIORITY_CLASS_GROUP => &[POD_PRIORITY_CLASS_KIND],
            _ => &kinds,
        };
        errs.push(FieldError::not_supported(
            &path.child("kind"),
            &r.kind,
            fitting,
        ));
    }
    if r.group == POD_PRIORITY_CLASS_GROUP && r.kind != POD_PRIORITY_CLASS_KIND {
        errs.push(FieldError::invalid_omit(
            path,
            "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
        ));
    }
    if r.group == WORKLOAD_PRIORITY_CLASS_GROUP && r.kind != WORKLOAD_PRIORITY_CLASS_KIND {
        errs.push(FieldError::invalid_omit(
            path,
            "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
        ));
    }
    if r.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else {
        name_ref(errs, &path.child("name"), &r.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(yaml: &str) -> Workload {
        let spec = serde_norway::from_str(yaml).expect("test spec parses");
        let mut w = Workload::new("wl", spec);
        w.metadata.namespace = Some("default".into());
        w
    }

    fn msgs(w: &Workload) -> Vec<String> {
        validate_workload(w)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn valid_workload() {
        let w = wl(
            "queueName: q\npodSets:\n- count: 2\n  template:\n    spec:\n      containers: [{name: c, resources: {requests: {cpu: 500m}}}]\n",
        );
        assert!(msgs(&w).is_empty(), "{:?}", msgs(&w));
    }

    #[test]
    fn pod_set_rules() {
        let mut yaml = String::from("podSets:\n");
        for i in 0..19 {
            yaml.push_str(&format!(
                "- {{name: p{i}, count: 2, minCount: 1, template: {{}}}}\n"
            ));
        }
        let m = msgs(&wl(&yaml));
        assert!(
            m.contains(&"spec.podSets: Too many: 19: must have at most 18 items".to_string()),
            "{m:?}"
        );
        assert!(
            m.contains(
                &"spec.podSets: Invalid value: 19: at most one podSet can use minCount".to_string()
            ),
            "{m:?}"
        );

        let m = msgs(&wl(
            "podSets:\n- {count: 2, minCount: 3, template: {}}\n- {count: -1, template: {}}\n",
        ));
        assert!(m.contains(&"spec.podSets[0]: Invalid value: minCount should be positive and less or equal to count".to_string()), "{m:?}");
        assert!(
            m.contains(
                &"spec.podSets[1].count: Invalid value: -1: must be greater than or equal to 0"
                    .to_string()
            ),
            "{m:?}"
        );
        assert!(
            m.contains(&"spec.podSets[1].name: Duplicate value: \"main\"".to_string()),
            "{m:?}"
        );
        assert!(
            msgs(&wl("podSets: []"))
                .iter()
                .any(|e| e.contains("should have at least 1 items"))
        );
    }

    #[test]
    fn reserved_pods_resource_and_bad_quantity() {
        let w = wl(
            "podSets:\n- template:\n    spec:\n      containers: [{name: c, resources: {requests: {pods: '1', cpu: lots}}}]\n",
        );
        let m = msgs(&w);
        assert!(m.contains(&"spec.podSets[0].template.spec.containers[0].resources.requests[pods]: Invalid value: \"pods\": the key is reserved for internal kueue use".to_string()), "{m:?}");
        assert!(m.iter().any(|e| e.starts_with("spec.podSets[0].template.spec.containers[0].resources.requests[cpu]: Invalid value: \"lots\"")), "{m:?}");
    }

    #[test]
    fn valid_values_fit_the_field() {
        let m = msgs(&wl(
            "podSets: [{template: {}}]\npriority: 1\npriorityClassRef: {group: scheduling.k8s.io, kind: Klass, name: p}\n",
        ));
        assert!(
            m.contains(&"spec.priorityClassRef.kind: Unsupported value: \"Klass\": supported values: \"PriorityClass\"".to_string()),
            "{m:?}"
        );
        let mut w = wl("podSets: [{name: Bad_Name, template: {}}, {name: ok, template: {}}]\n");
        w.status = Some(
            serde_norway::from_str("reclaimablePods: [{name: gone, count: 1}]\n").expect("valid"),
        );
        let m = msgs(&w);
        assert!(
            m.contains(&"status.reclaimablePods[gone].name: Unsupported value: \"gone\": supported values: \"ok\"".to_string()),
            "{m:?}"
        );
        let mut w = wl("podSets: []\n");
        w.status = Some(
            serde_norway::from_str("reclaimablePods: [{name: gone, count: 1}]\n").expect("valid"),
        );
        let m = msgs(&w);
        assert!(
            m.contains(&"status.reclaimablePods[gone].name: Unsupported value: \"gone\": spec.podSets has no pod set to reclaim pods from".to_string()),
            "{m:?}"
        );
    }

    #[test]
    fn priority_ref_rules() {
        let m = msgs(&wl(
            "podSets: [{template: {}}]\npriorityClassRef: {group: scheduling.k8s.io, kind: WorkloadPriorityClass, name: p}\n",
        ));
        assert!(
            m.contains(
                &"spec: Invalid value: priority should not be nil when priorityClassRef is set"
                    .to_string()
            ),
            "{m:?}"
        );
        assert!(m.contains(&"spec.priorityClassRef: Invalid value: only the PriorityClass kind is allowed for the scheduling.k8s.io group".to_string()), "{m:?}");
    }
}
