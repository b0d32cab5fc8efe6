//! Plain Pod (v1) integration, including pod groups.
//!
//! A pod is "suspended" while it carries the `kueue.x-k8s.io/admission` scheduling gate.
//! Suspending a pod on creation also labels it `kueue.x-k8s.io/managed=true` and adds the
//! `kueue.x-k8s.io/managed` finalizer, like Kueue. Pods join a group with the
//! `kueue.x-k8s.io/pod-group-name` label plus the `kueue.x-k8s.io/pod-group-total-count`
//! annotation; the group's pod sets are assembled by the controller, so a single pod here is
//! one pod set `main` of one pod.

use super::object::JobObject;
use super::pod_group::{self, ComposeError, MembersStatus};
use super::{ComposedJob, JobIntegration, Outcome, PatchBuilder, PodSetRef, RuleOptions, tas};
use crate::api::constants::{
    ADMISSION_SCHEDULING_GATE, MANAGED_LABEL, MANAGED_POD_FINALIZER, POD_GROUP_NAME_LABEL,
    POD_GROUP_POD_INDEX_LABEL, POD_GROUP_POD_INDEX_LABEL_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION, RETRIABLE_IN_GROUP_ANNOTATION, TOPOLOGY_SCHEDULING_GATE,
};
use crate::api::validate::{FieldError, Path, dns1123_subdomain_errors};
use crate::api::{DEFAULT_POD_SET_NAME, Workload};
use json_patch::jsonptr::PointerBuf;
use kube::core::GroupVersionKind;
use serde_json::json;
use std::borrow::Cow;

/// Annotation set by a parent that suspends its pods itself; such pods are gated without
/// namespace or queue checks (Kueue's `SuspendedByParentAnnotation`).
pub const SUSPENDED_BY_PARENT_ANNOTATION: &str = "kueue.x-k8s.io/pod-suspending-parent";
/// Value of the managed label.
pub const MANAGED_LABEL_VALUE: &str = "true";

/// The Pod integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pod;

impl Pod {
    /// Warnings Kueue gives on create and update: a managed label on a pod whose owner
    /// Kueue already manages.
    fn managed_label_warnings(job: &JobObject<'_>) -> Vec<String> {
        let owner_managed = job
            .metadata
            .controller_owner()
            .is_some_and(|o| super::is_managed_owner_kind(&o.api_version, &o.kind));
        if job.label(MANAGED_LABEL) == Some(MANAGED_LABEL_VALUE) && owner_managed {
            vec![format!(
                "pod owner is managed by kueue, label '{MANAGED_LABEL}={MANAGED_LABEL_VALUE}' might lead to unexpected behaviour"
            )]
        } else {
            Vec::new()
        }
    }
}

fn labels_path() -> Path {
    Path::new("metadata").child("labels")
}

fn annotations_path() -> Path {
    Path::new("metadata").child("annotations")
}

fn group_name<'o>(job: &'o JobObject<'_>) -> Option<&'o str> {
    job.label(POD_GROUP_NAME_LABEL).filter(|g| !g.is_empty())
}

/// Kueue's pod-group metadata rules: the group name label and the total count annotation
/// come together, the name is a DNS subdomain, the count a positive integer.
fn group_rules(job: &JobObject<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let gtc = job.annotation(POD_GROUP_TOTAL_COUNT_ANNOTATION);
    let both = format!(
        "both the '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{POD_GROUP_NAME_LABEL}' label should be set"
    );
    match group_name(job) {
        None => {
            if gtc.is_some() {
                errs.push(FieldError::required(
                    &labels_path().key(POD_GROUP_NAME_LABEL),
                    both,
                ));
            }
            return errs;
        }
        Some(name) => {
            let msgs = dns1123_subdomain_errors(name);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    &labels_path().key(POD_GROUP_NAME_LABEL),
                    name,
                    msgs.join(","),
                ));
            }
            if gtc.is_none() {
                errs.push(FieldError::required(
                    &annotations_path().key(POD_GROUP_TOTAL_COUNT_ANNOTATION),
                    both,
                ));
                return errs;
            }
        }
    }
    if let Some(raw) = gtc {
        let p = annotations_path().key(POD_GROUP_TOTAL_COUNT_ANNOTATION);
        match raw.parse::<i32>() {
            Err(e) => errs.push(FieldError::invalid(&p, raw, e.to_string())),
            Ok(n) if n < 1 => errs.push(FieldError::invalid(
                &p,
                raw,
                format!("incorrect annotation value '{raw}': group total count should be greater than zero"),
            )),
            Ok(_) => {}
        }
    }
    errs
}

fn is_unretriable(job: &JobObject<'_>) -> bool {
    job.annotation(RETRIABLE_IN_GROUP_ANNOTATION) == Some("false")
}

impl JobIntegration for Pod {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "Pod")
    }

    fn framework(&self) -> &'static str {
        "pod"
    }

    /// Pods and pod groups run through the composed-job path (see [`super::pod_group`]).
    fn composed(&self) -> Option<&'static dyn ComposedJob> {
        Some(&Pod)
    }

    /// Kueue's: the pod's phase is `Succeeded` or `Failed`.
    fn finished(&self, job: &JobObject<'_>) -> Option<Outcome> {
        match job.status().phase.as_deref() {
            Some("Succeeded") => Some(Outcome::success("")),
            Some("Failed") => Some(Outcome::failure("")),
            _ => None,
        }
    }

    /// Kueue's: the pod is `Running`.
    fn is_active(&self, job: &JobObject<'_>) -> bool {
        job.status().phase.as_deref() == Some("Running")
    }

    /// The pod's `Ready` condition.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        job.status().true_condition("Ready").is_some()
    }

    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        vec![PodSetRef {
            name: Cow::Borrowed(DEFAULT_POD_SET_NAME),
            count: 1,
            pointer: PointerBuf::new(),
            meta_path: Path::new("metadata"),
            meta: Some(&job.metadata),
            spec: job.spec.as_deref(),
            pod_index_label: None,
            min_count: None,
            default_template: None,
        }]
    }

    fn is_suspended(&self, job: &JobObject<'_>) -> bool {
        job.spec().has_gate(ADMISSION_SCHEDULING_GATE)
    }

    fn requires_managed_namespace(&self) -> bool {
        true
    }

    fn suspended_by_parent(&self, job: &JobObject<'_>) -> bool {
        job.annotation(SUSPENDED_BY_PARENT_ANNOTATION).is_some()
    }

    fn warnings(&self, job: &JobObject<'_>) -> Vec<String> {
        if Pod.suspended_by_parent(job) {
            Vec::new()
        } else {
            Self::managed_label_warnings(job)
        }
    }

    /// Pods cannot be suspended after creation; resuming removes the gate, which the
    /// controller does with a JSON patch on `spec.schedulingGates`, not a merge patch.
    fn suspend_patch(&self, _suspend: bool) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Managed label, finalizer, admission gate; the topology gate and the pod-index label
    /// when the pod asks for topology-aware scheduling.
    /// A pod its parent suspends (a LeaderWorkerSet's) is only gated, as Kueue's webhook
    /// does: its parent's integration runs it, so it is no plain pod of kuota's.
    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder) {
        let meta = &job.metadata;
        let labels_exist = meta.labels.is_some();
        let by_parent = self.suspended_by_parent(job);
        if !by_parent && job.label(MANAGED_LABEL) != Some(MANAGED_LABEL_VALUE) {
            patch.set_entry(
                &["metadata", "labels"],
                labels_exist,
                MANAGED_LABEL,
                json!(MANAGED_LABEL_VALUE),
            );
        }
        if !by_parent && !meta.has_finalizer(MANAGED_POD_FINALIZER) {
            patch.push_item(
                &["metadata", "finalizers"],
                meta.finalizers.is_some(),
                json!(MANAGED_POD_FINALIZER),
            );
        }
        let spec = job.spec();
        let gates_exist = spec.scheduling_gates.is_some();
        let spec_exists = job.spec.is_some();
        let gate = |name: &str, patch: &mut PatchBuilder| {
            if spec.has_gate(name) {
                return;
            }
            if spec_exists {
                patch.push_item(
                    &["spec", "schedulingGates"],
                    gates_exist,
                    json!({"name": name}),
                );
            } else {
                patch.set_entry(&["spec"], false, "schedulingGates", json!([{"name": name}]));
            }
        };
        gate(ADMISSION_SCHEDULING_GATE, patch);
        if tas::requests_topology(&meta.annotations.as_ref()) {
            gate(TOPOLOGY_SCHEDULING_GATE, patch);
            if let Some(index_label) = job.annotation(POD_GROUP_POD_INDEX_LABEL_ANNOTATION)
                && job.label(POD_GROUP_POD_INDEX_LABEL).is_none()
            {
                let value = job.label(index_label).unwrap_or_default();
                patch.set_entry(
                    &["metadata", "labels"],
                    labels_exist,
                    POD_GROUP_POD_INDEX_LABEL,
                    json!(value),
                );
            }
        }
    }

    /// Managed label value, pod group metadata, topology annotations on the pod itself.
    fn validate_create(&self, job: &JobObject<'_>, opts: &RuleOptions) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(v) = job.label(MANAGED_LABEL)
            && v != MANAGED_LABEL_VALUE
        {
            errs.push(FieldError::forbidden(
                &labels_path().key(MANAGED_LABEL),
                format!("managed label value can only be '{MANAGED_LABEL_VALUE}'"),
            ));
        }
        errs.extend(group_rules(job));
        if opts.topology_aware_scheduling {
            // Pods have no slice-size upper bound in Kueue: the group size is not known here.
            errs.extend(tas::validate(
                &job.metadata.annotations.as_ref(),
                &Path::new("metadata"),
                i32::MAX,
            ));
        }
        errs
    }

    /// Create rules, plus: the group name is immutable and an unretriable group stays so.
    fn validate_update(
        &self,
        old: &JobObject<'_>,
        new: &JobObject<'_>,
        opts: &RuleOptions,
    ) -> Vec<FieldError> {
        let mut errs = self.validate_create(new, opts);
        if let Some(old_group) = group_name(old)
            && group_name(new) != Some(old_group)
        {
            errs.push(FieldError::invalid(
                &labels_path().key(POD_GROUP_NAME_LABEL),
                group_name(new).unwrap_or_default(),
                "field is immutable",
            ));
        }
        if group_name(new).is_some() && is_unretriable(old) && !is_unretriable(new) {
            errs.push(FieldError::forbidden(
                &annotations_path().key(RETRIABLE_IN_GROUP_ANNOTATION),
                "unretriable pod group can't be converted to retriable",
            ));
        }
        errs
    }
}

impl ComposedJob for Pod {
    fn member_selector(&self) -> &'static str {
        "kueue.x-k8s.io/managed=true"
    }

    fn workload_name_of(
        &self,
        member: &serde_json::Value,
        _parent: Option<&serde_json::Value>,
    ) -> Option<String> {
        Some(pod_group::workload_name_of(member))
    }

    /// A pod alone: the one-object Workload; a group: Kueue's composed one.
    fn compose(
        &self,
        members: &[&serde_json::Value],
        _parent: Option<&serde_json::Value>,
    ) -> Result<Workload, ComposeError> {
        match members {
            [single] if pod_group::group_name(single).is_none() => self
                .workload(single)
                .map_err(|e| ComposeError::Invalid(e.to_string())),
            _ => pod_group::group_workload(members),
        }
    }

    fn status(&self, members: &[&serde_json::Value]) -> MembersStatus {
        pod_group::members_status(members)
    }

    fn pod_set_of(&self, member: &serde_json::Value) -> String {
        pod_group::pod_set_of(member)
    }

    fn gate(&self) -> &'static str {
        ADMISSION_SCHEDULING_GATE
    }

    fn finalizer(&self) -> &'static str {
        MANAGED_POD_FINALIZER
    }

    fn is_gated(&self, member: &serde_json::Value) -> bool {
        pod_group::gated(member)
    }

    fn to_stop(&self, member: &serde_json::Value) -> bool {
        pod_group::to_stop(member)
    }

    fn released(&self, member: &serde_json::Value) -> bool {
        pod_group::released(member)
    }

    fn has_finalizer(&self, member: &serde_json::Value) -> bool {
        pod_group::has_finalizer(member)
    }

    /// A group member's role, recorded from the spec as submitted before the start adds
    /// the flavor's node selector, so the pod stays in its pod set. Kueue's webhook writes
    /// it at creation; kuota's webhook reads too little of a spec to hash it.
    fn start_annotations(&self, member: &serde_json::Value) -> Vec<(String, String)> {
        if pod_group::group_name(member).is_none() {
            return Vec::new();
        }
        vec![(
            pod_group::ROLE_HASH_ANNOTATION.to_string(),
            pod_group::role_of(member),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn suspend_gates_labels_and_finalizes_once() {
        let v = json!({
            "metadata": {"name": "p", "annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        });
        let o = JobObject::from_value(&v).expect("view");
        assert!(!Pod.is_suspended(&o));
        let mut p = PatchBuilder::new();
        Pod.suspend(&o, &mut p);
        let mut doc = v.clone();
        json_patch::patch(&mut doc, &p.into_ops()).expect("applies");
        assert_eq!(doc["metadata"]["labels"][MANAGED_LABEL], "true");
        assert_eq!(doc["metadata"]["finalizers"][0], MANAGED_POD_FINALIZER);
        assert_eq!(
            doc["spec"]["schedulingGates"],
            json!([{"name": ADMISSION_SCHEDULING_GATE}, {"name": TOPOLOGY_SCHEDULING_GATE}])
        );
        let o2 = JobObject::from_value(&doc).expect("view");
        assert!(Pod.is_suspended(&o2));
        let mut again = PatchBuilder::new();
        Pod.suspend(&o2, &mut again);
        assert!(again.is_empty());
    }

    #[test]
    fn group_rules_follow_kueue() {
        let v = json!({"metadata": {"labels": {"kueue.x-k8s.io/pod-group-name": "g"}}});
        let o = JobObject::from_value(&v).expect("view");
        assert_eq!(
            msgs(&Pod.validate_create(&o, &RuleOptions::default())),
            [
                "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: both the 'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' label should be set"
            ]
        );
        let v = json!({"metadata": {"annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}}});
        let o = JobObject::from_value(&v).expect("view");
        assert!(
            msgs(&Pod.validate_create(&o, &RuleOptions::default()))[0]
                .starts_with("metadata.labels[kueue.x-k8s.io/pod-group-name]: Required value")
        );
        let v = json!({"metadata": {"labels": {"kueue.x-k8s.io/pod-group-name": "g", "kueue.x-k8s.io/managed": "yes"}, "annotations": {"kueue.x-k8s.io/pod-group-total-count": "0"}}});
        let o = JobObject::from_value(&v).expect("view");
        let m = msgs(&Pod.validate_create(&o, &RuleOptions::default()));
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].contains("managed label value can only be 'true'"));
        assert!(m[1].contains("group total count should be greater than zero"));
        let old = json!({"metadata": {"labels": {"kueue.x-k8s.io/pod-group-name": "g"}, "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2", "kueue.x-k8s.io/retriable-in-group": "false"}}});
        let new = json!({"metadata": {"labels": {"kueue.x-k8s.io/pod-group-name": "h"}, "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}}});
        let (o, n) = (
            JobObject::from_value(&old).expect("view"),
            JobObject::from_value(&new).expect("view"),
        );
        let m = msgs(&Pod.validate_update(&o, &n, &RuleOptions::default()));
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].ends_with("field is immutable"));
        assert!(m[1].contains("can't be converted to retriable"));
    }
}
