//! LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, kubernetes-sigs/lws) integration, after
//! Kueue's `pkg/controller/jobs/leaderworkerset`.
//!
//! A LeaderWorkerSet runs `replicas` groups of `size` pods: a leader (from the leader
//! template, or the workers' when there is none) and `size - 1` workers. As in Kueue, each
//! group is one Workload, named `leaderworkerset-<name>-<index>-<hash>`, with the pod sets
//! `leader` (1) and `worker` (`size - 1`), or `main` (`size`) without a leader template,
//! owned by the LeaderWorkerSet. The set itself is never suspended: its webhook marks both
//! templates so that the pods the LWS controller makes from them are gated by the pod
//! webhook (`kueue.x-k8s.io/pod-suspending-parent`), carry the queue and priority labels,
//! and are served as a group (`kueue.x-k8s.io/pod-group-serving`). Each group's pods then
//! run through the composed-job path (see [`super::pod_group`]): ungated with their pod
//! set's flavor on admission, deleted on eviction, their Workload finished once they all
//! succeeded. A scaled-down set's highest groups' Workloads are deleted once their pods
//! are gone; a deleted set's are collected with it.

use std::borrow::Cow;

use json_patch::jsonptr::PointerBuf;
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use super::object::{JobObject, MetaView, PodTemplateView};
use super::pod::SUSPENDED_BY_PARENT_ANNOTATION;
use super::pod_group::{self, ComposeError, MembersStatus, ROLE_HASH_ANNOTATION};
use super::{
    ComposedJob, JobIntegration, Outcome, PatchBuilder, PodSetRef, RuleOptions, queue_name, tas,
};
use crate::api::constants::{
    ADMISSION_SCHEDULING_GATE, MANAGED_POD_FINALIZER, POD_GROUP_SERVING_ANNOTATION,
    PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL,
};
use crate::api::validate::{FieldError, Path};
use crate::api::{DEFAULT_POD_SET_NAME, Workload};

/// Kueue's framework name.
pub const FRAMEWORK: &str = "leaderworkerset.x-k8s.io/leaderworkerset";
/// The LWS controller's label naming a pod's LeaderWorkerSet.
pub const SET_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
/// The LWS controller's label with a pod's group index.
pub const GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// The LWS controller's label with a pod's index in its group (the leader's is 0).
pub const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// The LWS controller's annotation with a pod's group size.
pub const SIZE_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/size";
/// Kueue's annotation on a component Workload: its index in its owner (the group's).
pub const COMPONENT_WORKLOAD_INDEX_ANNOTATION: &str = "kueue.x-k8s.io/component-workload-index";
/// Kueue's annotation on a Workload: its owner's group/version/kind.
pub const JOB_OWNER_GVK_ANNOTATION: &str = "kueue.x-k8s.io/job-owner-gvk";
/// Kueue's annotation on a Workload: its owner's name.
pub const JOB_OWNER_NAME_ANNOTATION: &str = "kueue.x-k8s.io/job-owner-name";
/// Keys under this prefix (but the set's name) are the LWS controller's per-pod marks,
/// dropped from the Workload's templates as Kueue's `dropLWSPrefixedKeys` does.
const LWS_DOMAIN_PREFIX: &str = "leaderworkerset.sigs.k8s.io";
const LEADER: &str = "leader";
const WORKER: &str = "worker";
/// Kueue's sanity bound on `spec.replicas` (`maxLeaderWorkerSetReplicas`).
const MAX_REPLICAS: i32 = 1_000_000;

/// The LeaderWorkerSet integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeaderWorkerSet;

fn gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet")
}

/// The set's groups (`spec.replicas`, default 1).
fn replicas(job: &JobObject<'_>) -> i32 {
    job.spec().replicas.unwrap_or(1)
}

/// Pods per group (`spec.leaderWorkerTemplate.size`, default 1).
fn size(job: &JobObject<'_>) -> i32 {
    job.spec()
        .leader_worker_template
        .as_ref()
        .and_then(|t| t.size)
        .unwrap_or(1)
}

/// (pod set name, template field, count, template) of the set's pod sets, in Kueue's order.
fn templates<'o>(
    job: &'o JobObject<'o>,
) -> Vec<(
    &'static str,
    &'static str,
    i32,
    Option<&'o PodTemplateView<'o>>,
)> {
    let lwt = job.spec().leader_worker_template.as_ref();
    let worker = lwt.and_then(|t| t.worker_template.as_ref());
    match lwt.and_then(|t| t.leader_template.as_ref()) {
        Some(leader) => vec![
            (LEADER, "leaderTemplate", 1, Some(leader)),
            (
                WORKER,
                "workerTemplate",
                size(job).saturating_sub(1),
                worker,
            ),
        ],
        None => vec![(DEFAULT_POD_SET_NAME, "workerTemplate", size(job), worker)],
    }
}

/// Kueue's `GetWorkloadName`: the group's Workload is named as if owned by `<name>-<index>`.
pub fn group_workload_name(set_name: &str, set_uid: &str, group_index: &str) -> String {
    super::workload_name(&format!("{set_name}-{group_index}"), set_uid, &gvk())
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn label<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get("metadata")?.get("labels")?.get(key)?.as_str()
}

fn annotation<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// Whether a pod was gated for a LeaderWorkerSet (its template carried the mark).
fn is_group_pod(pod: &Value) -> bool {
    annotation(pod, SUSPENDED_BY_PARENT_ANNOTATION) == Some(FRAMEWORK)
}

/// Removes the LWS controller's per-pod keys, but the set's name.
fn drop_lws_keys(map: &mut Option<std::collections::BTreeMap<String, String>>) {
    if let Some(m) = map {
        m.retain(|k, _| !k.starts_with(LWS_DOMAIN_PREFIX) || k == SET_NAME_LABEL);
    }
}

/// (key, value) entries of one metadata map.
type Marks = Vec<(&'static str, String)>;

/// The labels and annotations the webhook puts on one template, as (labels, annotations).
fn template_marks(job: &JobObject<'_>, pod_set: &str) -> (Marks, Marks) {
    let mut labels = Vec::new();
    if let Some(q) = queue_name(job) {
        labels.push((QUEUE_NAME_LABEL, q.to_string()));
    }
    if let Some(p) = job.label(PRIORITY_CLASS_LABEL).filter(|p| !p.is_empty()) {
        labels.push((PRIORITY_CLASS_LABEL, p.to_string()));
    }
    let annotations = vec![
        (SUSPENDED_BY_PARENT_ANNOTATION, FRAMEWORK.to_string()),
        (POD_GROUP_SERVING_ANNOTATION, "true".to_string()),
        // Kueue's reconciler writes the role on each pod once it exists; on the template
        // every pod has it from its start, with no second write.
        (ROLE_HASH_ANNOTATION, pod_set.to_string()),
    ];
    (labels, annotations)
}

/// Records the patch operations that set `marks` in the template's `field` map.
fn mark(
    patch: &mut PatchBuilder,
    template: &[&str],
    meta: Option<&MetaView<'_>>,
    field: &str,
    marks: &[(&'static str, String)],
) {
    let existing = meta.and_then(|m| {
        if field == "labels" {
            m.labels.as_ref()
        } else {
            m.annotations.as_ref()
        }
    });
    let mut path: Vec<&str> = template.to_vec();
    path.push("metadata");
    path.push(field);
    let mut exists = existing.is_some();
    for (k, v) in marks {
        if existing.and_then(|m| m.get(*k)).map(|s| s.as_str()) == Some(v.as_str()) {
            continue;
        }
        patch.set_entry(&path, exists, k, json!(v));
        exists = true;
    }
}

impl JobIntegration for LeaderWorkerSet {
    fn gvk(&self) -> GroupVersionKind {
        gvk()
    }

    fn framework(&self) -> &'static str {
        FRAMEWORK
    }

    /// Kueue's: the pod webhook gates the groups' pods.
    fn implicitly_enables(&self) -> &'static [&'static str] {
        &["pod"]
    }

    /// The groups' pods run through the composed-job path, one Workload per group.
    fn composed(&self) -> Option<&'static dyn ComposedJob> {
        Some(&LeaderWorkerSet)
    }

    /// A serving set never finishes by itself: its groups' pods say when a group did
    /// ([`ComposedJob::status`]).
    fn finished(&self, _job: &JobObject<'_>) -> Option<Outcome> {
        None
    }

    /// The groups' pods say whether a group is active ([`ComposedJob::status`]); the set
    /// reports only ready groups, which is no measure of running pods.
    fn is_active(&self, _job: &JobObject<'_>) -> bool {
        false
    }

    /// Readiness is read per group from its pods ([`ComposedJob::status`]).
    fn pods_ready(&self, _job: &JobObject<'_>) -> bool {
        false
    }

    /// Kueue's `podSets`: `leader` (1) and `worker` (`size - 1`), or `main` (`size`).
    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        templates(job)
            .into_iter()
            .map(|(name, field, count, t)| PodSetRef {
                name: Cow::Borrowed(name),
                count,
                pointer: PointerBuf::from_tokens(["spec", "leaderWorkerTemplate", field]),
                meta_path: Path::new("spec")
                    .child("leaderWorkerTemplate")
                    .child(field)
                    .child("metadata"),
                meta: t.and_then(|t| t.metadata.as_ref()),
                spec: t.and_then(|t| t.spec.as_deref()),
                pod_index_label: (name != LEADER).then_some(WORKER_INDEX_LABEL),
                min_count: None,
                default_template: None,
            })
            .collect()
    }

    /// Managed once every template carries the marks that gate its pods.
    fn is_suspended(&self, job: &JobObject<'_>) -> bool {
        templates(job).iter().all(|(_, _, _, t)| {
            t.and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.annotation(SUSPENDED_BY_PARENT_ANNOTATION))
                == Some(FRAMEWORK)
        })
    }

    /// The set is never suspended; its pods are gated and ungated.
    fn suspend_patch(&self, _suspend: bool) -> Value {
        Value::Null
    }

    /// Kueue's `podTemplateSpecDefault` on each template: the queue and priority-class
    /// labels, the suspending-parent and serving-group annotations, and the pod set's role.
    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder) {
        for (name, field, _, t) in templates(job) {
            let template = ["spec", "leaderWorkerTemplate", field];
            let (labels, annotations) = template_marks(job, name);
            let meta = t.and_then(|t| t.metadata.as_ref());
            if meta.is_none() {
                let l: serde_json::Map<String, Value> = labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                let a: serde_json::Map<String, Value> = annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                let mut m = serde_json::Map::new();
                if !l.is_empty() {
                    m.insert("labels".into(), Value::Object(l));
                }
                m.insert("annotations".into(), Value::Object(a));
                patch.set_entry(&template, t.is_some(), "metadata", Value::Object(m));
                continue;
            }
            mark(patch, &template, meta, "labels", &labels);
            mark(patch, &template, meta, "annotations", &annotations);
        }
    }

    /// Kueue's `validateCreate`: `spec.replicas` within [0, 1,000,000], and the topology
    /// annotations of each template.
    fn validate_create(&self, job: &JobObject<'_>, opts: &RuleOptions) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let n = replicas(job);
        if n < 0 {
            errs.push(FieldError::invalid_num(
                &Path::new("spec").child("replicas"),
                n,
                format!("invalid LeaderWorkerSet replicas: must be >= 0, got {n}"),
            ));
        } else if n > MAX_REPLICAS {
            errs.push(FieldError::invalid_num(
                &Path::new("spec").child("replicas"),
                n,
                format!("invalid LeaderWorkerSet replicas: must be <= {MAX_REPLICAS}, got {n}"),
            ));
        }
        if opts.topology_aware_scheduling {
            for ps in self.pod_sets(job) {
                errs.extend(tas::validate(&ps.annotations(), &ps.meta_path, ps.count));
            }
        }
        errs
    }
}

impl ComposedJob for LeaderWorkerSet {
    fn member_kind(&self) -> Option<GroupVersionKind> {
        Some(GroupVersionKind::gvk("", "v1", "Pod"))
    }

    fn member_selector(&self) -> &'static str {
        SET_NAME_LABEL
    }

    fn parent_kind(&self) -> Option<GroupVersionKind> {
        Some(gvk())
    }

    /// The set a pod gated for a LeaderWorkerSet belongs to.
    fn parent_name_of(&self, member: &Value) -> Option<String> {
        if !is_group_pod(member) {
            return None;
        }
        label(member, SET_NAME_LABEL).map(str::to_string)
    }

    /// The group's Workload, named from the set's uid (so not before the set is read)
    /// and the pod's group index (so not before the LWS controller labelled it).
    fn workload_name_of(&self, member: &Value, parent: Option<&Value>) -> Option<String> {
        let parent = parent?;
        let index = label(member, GROUP_INDEX_LABEL)?;
        Some(group_workload_name(
            str_at(parent, "/metadata/name")?,
            str_at(parent, "/metadata/uid").unwrap_or_default(),
            index,
        ))
    }

    /// Kueue's `constructWorkload`: the set's pod sets, owned by the set, with the
    /// group's index and its owner recorded.
    fn compose(
        &self,
        members: &[&Value],
        parent: Option<&Value>,
    ) -> Result<Workload, ComposeError> {
        let parent = parent.ok_or_else(|| {
            ComposeError::Incomplete("the LeaderWorkerSet is not known yet".into())
        })?;
        let first = members
            .first()
            .ok_or_else(|| ComposeError::Incomplete("the group has no pods".into()))?;
        let name = self
            .workload_name_of(first, Some(parent))
            .ok_or_else(|| ComposeError::Incomplete("the pod has no group index yet".into()))?;
        let index = label(first, GROUP_INDEX_LABEL)
            .unwrap_or_default()
            .to_string();
        let mut wl = self
            .workload(parent)
            .map_err(|e| ComposeError::Invalid(e.to_string()))?;
        wl.metadata.name = Some(name);
        for ps in &mut wl.spec.pod_sets {
            if let Some(m) = ps.template.metadata.as_mut() {
                drop_lws_keys(&mut m.labels);
                drop_lws_keys(&mut m.annotations);
            }
        }
        let gvk = gvk();
        let annotations = wl.metadata.annotations.get_or_insert_with(Default::default);
        annotations.insert(
            pod_group::IS_GROUP_WORKLOAD_ANNOTATION.into(),
            "true".into(),
        );
        annotations.insert(
            JOB_OWNER_GVK_ANNOTATION.into(),
            format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind),
        );
        annotations.insert(
            JOB_OWNER_NAME_ANNOTATION.into(),
            str_at(parent, "/metadata/name").unwrap_or_default().into(),
        );
        annotations.insert(COMPONENT_WORKLOAD_INDEX_ANNOTATION.into(), index);
        Ok(wl)
    }

    /// The group's pods as a pod group of the size the LWS controller wrote on them.
    fn status(&self, members: &[&Value]) -> MembersStatus {
        let total = members
            .first()
            .and_then(|p| annotation(p, SIZE_ANNOTATION))
            .and_then(|s| s.parse::<i32>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(1);
        pod_group::status_of(members, Some(total))
    }

    /// The role the webhook wrote on the pod's template.
    fn pod_set_of(&self, member: &Value) -> String {
        annotation(member, ROLE_HASH_ANNOTATION)
            .unwrap_or(DEFAULT_POD_SET_NAME)
            .to_string()
    }

    fn gate(&self) -> &'static str {
        ADMISSION_SCHEDULING_GATE
    }

    /// Never added to a set's pods (Kueue's pod webhook leaves a parent's pods without
    /// it); one found there is removed once the pod is done.
    fn finalizer(&self) -> &'static str {
        MANAGED_POD_FINALIZER
    }

    fn is_gated(&self, member: &Value) -> bool {
        pod_group::gated(member)
    }

    fn to_stop(&self, member: &Value) -> bool {
        pod_group::to_stop(member)
    }

    fn released(&self, member: &Value) -> bool {
        pod_group::released(member)
    }

    fn has_finalizer(&self, member: &Value) -> bool {
        pod_group::has_finalizer(member)
    }

    /// Kueue's `filterWorkloads`: groups `0..replicas` are wanted.
    fn wants_workload(&self, workload: &Workload, parent: &Value) -> bool {
        let replicas = parent
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        workload
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(COMPONENT_WORKLOAD_INDEX_ANNOTATION))
            .and_then(|i| i.parse::<i64>().ok())
            .is_none_or(|i| i < replicas)
    }
}

#[cfg(test)]
mod tests;
