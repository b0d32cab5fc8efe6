//! Kubeflow MPIJob (kubeflow.org/v2beta1, kubeflow/mpi-operator) integration, after
//! Kueue's `pkg/controller/jobs/mpijob`.
//!
//! Two pod sets at most, in Kueue's order: `launcher` then `worker` (the replica types
//! lower-cased, as Kueue's `NewPodSetReference` does), each counting its replicas (default
//! 1). Other replica types are not the operator's and are ignored, as Kueue does. With
//! `runLauncherAsWorker` the launcher also runs a worker process, but it is still one pod
//! of its own pod set, so the counts do not change; with topology-aware scheduling the
//! webhook then marks the workers' template with `kueue.x-k8s.io/pod-index-offset: "1"`
//! (their replica indexes start after the launcher's), so the topology ungater ranks them
//! from 0, as Kueue's `Default` does. Suspension, finish, readiness and activity are the
//! Kubeflow run-policy rules shared with PyTorchJob.

use super::kubeflow;
use super::object::{JobObject, ReplicaSpecView, Str};
use super::{JobIntegration, Outcome, PatchBuilder, PodSetRef, RuleOptions};
use crate::api::constants::{POD_INDEX_OFFSET_ANNOTATION, PODSET_GROUP_NAME_ANNOTATION};
use crate::api::validate::{FieldError, Path};
use kube::core::GroupVersionKind;
use std::collections::BTreeMap;

/// Label with a pod's index within its replica type, set by the MPI operator
/// (`kfmpi.ReplicaIndexLabel`), the pod index label of both pod sets.
pub use super::kubeflow::REPLICA_INDEX_LABEL;

/// The replica types Kueue makes pod sets of, in its order (`orderedReplicaTypes`).
const REPLICA_TYPES: [&str; 2] = ["Launcher", "Worker"];

/// The MPIJob integration.
#[derive(Debug, Clone, Copy, Default)]
pub struct MpiJob;

/// The replica specs, by type.
fn replica_specs<'o>(job: &'o JobObject<'o>) -> Option<&'o BTreeMap<Str<'o>, ReplicaSpecView<'o>>> {
    job.spec().mpi_replica_specs.as_ref()
}

impl JobIntegration for MpiJob {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("kubeflow.org", "v2beta1", "MPIJob")
    }

    fn framework(&self) -> &'static str {
        "kubeflow.org/mpijob"
    }

    /// Kueue's: the `Succeeded` or `Failed` condition, with its message.
    fn finished(&self, job: &JobObject<'_>) -> Option<Outcome> {
        kubeflow::finished(job)
    }

    /// Kueue's: some replica type still has active pods.
    fn is_active(&self, job: &JobObject<'_>) -> bool {
        kubeflow::replicas_active(job)
    }

    /// Kueue's: the `Running` condition.
    fn pods_ready(&self, job: &JobObject<'_>) -> bool {
        kubeflow::running(job)
    }

    /// Kueue's `PriorityClass`: `runPolicy.schedulingPolicy.priorityClass` first; the
    /// launcher's then the worker's template otherwise, which is the generic fallback
    /// over the pod sets in their order.
    fn scheduling_priority_class<'o>(&self, job: &'o JobObject<'o>) -> Option<&'o str> {
        kubeflow::run_policy_priority_class(job)
    }

    fn pod_sets<'o>(&self, job: &'o JobObject<'o>) -> Vec<PodSetRef<'o>> {
        let Some(specs) = replica_specs(job) else {
            return Vec::new();
        };
        REPLICA_TYPES
            .iter()
            .filter_map(|t| {
                let (key, rs) = specs.get_key_value(*t)?;
                Some(kubeflow::replica_pod_set("mpiReplicaSpecs", key, rs))
            })
            .collect()
    }

    fn is_suspended(&self, job: &JobObject<'_>) -> bool {
        kubeflow::run_policy_suspended(job)
    }

    fn suspend_patch(&self, suspend: bool) -> serde_json::Value {
        kubeflow::run_policy_suspend_patch(suspend)
    }

    fn suspend(&self, job: &JobObject<'_>, patch: &mut PatchBuilder) {
        kubeflow::suspend_via_run_policy(job, patch);
    }

    /// mpi-operator's own replica rules (`validateMPIReplicaSpecs`, after its defaults):
    /// one launcher, at least one worker (an unset worker count defaults to 0 there), and
    /// a container in each template. The operator refuses anything else with a
    /// `ValidationError` Event and never runs it.
    fn unrunnable(&self, job: &JobObject<'_>) -> Vec<FieldError> {
        let path = Path::new("spec").child("mpiReplicaSpecs");
        let Some(specs) = replica_specs(job) else {
            return vec![FieldError::required(&path, "must have replica specs")];
        };
        let mut errs = Vec::new();
        let no_containers = |rs: &ReplicaSpecView<'_>| {
            let spec = rs.template.as_ref().and_then(|t| t.spec.as_deref());
            spec.and_then(|s| s.containers.as_ref())
                .is_none_or(Vec::is_empty)
        };
        let containers = |t: &str| {
            path.key(t)
                .child("template")
                .child("spec")
                .child("containers")
        };
        match specs.get("Launcher") {
            None => errs.push(FieldError::required(
                &path.key("Launcher"),
                "must have Launcher replica spec",
            )),
            Some(rs) => {
                if let Some(n) = rs.replicas.filter(|n| *n != 1) {
                    errs.push(FieldError::invalid_num(
                        &path.key("Launcher").child("replicas"),
                        n,
                        "must be 1",
                    ));
                }
                if no_containers(rs) {
                    errs.push(FieldError::required(
                        &containers("Launcher"),
                        "must define at least one container",
                    ));
                }
            }
        }
        if let Some(rs) = specs.get("Worker") {
            let n = rs.replicas.unwrap_or(0);
            if n <= 0 {
                errs.push(FieldError::invalid_num(
                    &path.key("Worker").child("replicas"),
                    n,
                    "must be greater than or equal to 1",
                ));
            }
            if no_containers(rs) {
                errs.push(FieldError::required(
                    &containers("Worker"),
                    "must define at least one container",
                ));
            }
        }
        errs
    }

    /// Kueue's `Default`: with topology-aware scheduling and `runLauncherAsWorker`, the
    /// workers' template gets the pod index offset 1, unless the launcher is in a pod set
    /// group (the ungater then ranks the group as a whole).
    fn default_on_create(&self, job: &JobObject<'_>, opts: &RuleOptions, patch: &mut PatchBuilder) {
        if !opts.topology_aware_scheduling || job.spec().run_launcher_as_worker != Some(true) {
            return;
        }
        let Some(specs) = replica_specs(job) else {
            return;
        };
        let (Some(launcher), Some(worker)) = (specs.get("Launcher"), specs.get("Worker")) else {
            return;
        };
        let launcher_meta = launcher.template.as_ref().and_then(|t| t.metadata.as_ref());
        if launcher_meta.is_some_and(|m| m.annotation(PODSET_GROUP_NAME_ANNOTATION).is_some()) {
            return;
        }
        let worker_meta = worker.template.as_ref().and_then(|t| t.metadata.as_ref());
        if worker_meta.and_then(|m| m.annotation(POD_INDEX_OFFSET_ANNOTATION)) == Some("1") {
            return;
        }
        let offset = serde_json::json!({ POD_INDEX_OFFSET_ANNOTATION: "1" });
        let template = ["spec", "mpiReplicaSpecs", "Worker", "template"];
        let metadata = ["spec", "mpiReplicaSpecs", "Worker", "template", "metadata"];
        let annotations = worker_meta.and_then(|m| m.annotations.as_ref());
        match (worker.template.as_ref(), worker_meta, annotations) {
            (None, _, _) => patch.set_entry(
                &template[..3],
                true,
                "template",
                serde_json::json!({"metadata": {"annotations": offset}}),
            ),
            (Some(_), None, _) => patch.set_entry(
                &template,
                true,
                "metadata",
                serde_json::json!({"annotations": offset}),
            ),
            (Some(_), Some(_), exists) => patch.set_entry(
                &[&metadata[..], &["annotations"]].concat(),
                exists.is_some(),
                POD_INDEX_OFFSET_ANNOTATION,
                "1".into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PriorityClassRef;
    use serde_json::{Value, json};

    fn mpijob(specs: Value) -> Value {
        json!({
            "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "ns", "uid": "u1",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"slotsPerWorker": 1, "runLauncherAsWorker": true, "mpiReplicaSpecs": specs}
        })
    }

    fn replica(n: Option<i32>, class: Option<&str>) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "mpi"}]});
        if let Some(c) = class {
            spec["priorityClassName"] = json!(c);
        }
        let mut r = json!({"template": {"spec": spec}});
        if let Some(n) = n {
            r["replicas"] = json!(n);
        }
        r
    }

    fn names_and_counts(v: &Value) -> Vec<(String, i32)> {
        let o = JobObject::from_value(v).expect("view");
        MpiJob
            .pod_sets(&o)
            .iter()
            .map(|p| (p.name.to_string(), p.count))
            .collect()
    }

    /// Kueue's order and names whatever the map order, default counts of 1, and a replica
    /// type the operator does not know left out.
    #[test]
    fn launcher_then_worker_lower_cased_with_their_replicas() {
        let v = mpijob(json!({
            "Worker": replica(Some(4), None),
            "Launcher": replica(None, None),
            "Extra": replica(Some(9), None),
        }));
        assert_eq!(
            names_and_counts(&v),
            [("launcher".to_string(), 1), ("worker".to_string(), 4)]
        );
        let o = JobObject::from_value(&v).expect("view");
        let ps = MpiJob.pod_sets(&o);
        assert_eq!(
            ps[1].pointer.as_str(),
            "/spec/mpiReplicaSpecs/Worker/template"
        );
        assert_eq!(
            ps[1].meta_path.to_string(),
            "spec.mpiReplicaSpecs[Worker].template.metadata"
        );
        assert_eq!(ps[0].pod_index_label, Some(REPLICA_INDEX_LABEL));
        // Worker only (no launcher spec): one pod set.
        let worker_only = mpijob(json!({"Worker": replica(Some(2), None)}));
        assert_eq!(names_and_counts(&worker_only), [("worker".to_string(), 2)]);
        let wl = MpiJob.workload(&v).expect("workload");
        assert_eq!(wl.spec.pod_sets.len(), 2);
        assert!(
            wl.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("mpijob-pi-"))
        );
        assert_eq!(wl.spec.queue_name.as_deref(), Some("lq"));
    }

    /// Suspended through `runPolicy.suspend`, whether the run policy exists or not, and a
    /// second pass adds nothing.
    #[test]
    fn suspended_through_the_run_policy() {
        for spec in [
            json!({"mpiReplicaSpecs": {}}),
            json!({"mpiReplicaSpecs": {}, "runPolicy": {"cleanPodPolicy": "Running"}}),
        ] {
            let v = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                "metadata": {"name": "a"}, "spec": spec});
            let o = JobObject::from_value(&v).expect("view");
            assert!(!MpiJob.is_suspended(&o));
            let mut p = PatchBuilder::new();
            MpiJob.suspend(&o, &mut p);
            let mut doc = v.clone();
            json_patch::patch(&mut doc, &p.into_ops()).expect("applies");
            assert_eq!(doc["spec"]["runPolicy"]["suspend"], true);
            let o2 = JobObject::from_value(&doc).expect("view");
            assert!(MpiJob.is_suspended(&o2));
            let mut again = PatchBuilder::new();
            MpiJob.suspend(&o2, &mut again);
            assert!(again.into_ops().is_empty());
        }
        assert_eq!(
            MpiJob.suspend_patch(false),
            json!({"spec": {"runPolicy": {"suspend": false}}})
        );
    }

    /// Finished from the operator's `Succeeded` / `Failed` conditions; ready once
    /// `Running`; active while a replica type has active pods.
    #[test]
    fn status_is_read_from_conditions_and_replica_statuses() {
        let with_status = |status: Value| {
            let mut v = mpijob(json!({}));
            v["status"] = status;
            v
        };
        let cond = |t: &str, s: &str, m: &str| json!({"type": t, "status": s, "message": m});
        let running = with_status(json!({
            "conditions": [cond("Created", "True", ""), cond("Running", "True", "")],
            "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 0}}}));
        let o = JobObject::from_value(&running).expect("view");
        assert!(MpiJob.pods_ready(&o) && MpiJob.is_active(&o));
        assert_eq!(MpiJob.finished(&o), None);
        let failed = with_status(json!({
            "conditions": [cond("Running", "False", ""), cond("Failed", "True", "launcher failed")],
            "replicaStatuses": {"Launcher": {"failed": 1}, "Worker": {}}}));
        let o = JobObject::from_value(&failed).expect("view");
        assert!(!MpiJob.pods_ready(&o) && !MpiJob.is_active(&o));
        assert_eq!(
            MpiJob.finished(&o),
            Some(Outcome::failure("launcher failed"))
        );
        let succeeded = with_status(json!({"conditions": [cond("Succeeded", "True", "done")]}));
        let o = JobObject::from_value(&succeeded).expect("view");
        assert_eq!(MpiJob.finished(&o), Some(Outcome::success("done")));
    }

    /// Kueue's `Default` with TAS: the workers of a launcher that runs as a worker count
    /// from index 1; nothing without `runLauncherAsWorker`, without TAS, without a
    /// launcher, or with the launcher in a pod set group; a second pass adds nothing.
    #[test]
    fn a_launcher_running_as_worker_offsets_the_workers_indexes() {
        let opts = RuleOptions::default();
        let defaulted = |v: &Value, opts: &RuleOptions| {
            let o = JobObject::from_value(v).expect("view");
            let mut p = PatchBuilder::new();
            MpiJob.default_on_create(&o, opts, &mut p);
            let mut doc = v.clone();
            json_patch::patch(&mut doc, &p.into_ops()).expect("applies");
            doc
        };
        let offset = |v: &Value| {
            v.pointer("/spec/mpiReplicaSpecs/Worker/template/metadata/annotations")
                .and_then(|a| a.get(POD_INDEX_OFFSET_ANNOTATION))
                .cloned()
        };
        let mut with_annotations = mpijob(json!({
            "Launcher": replica(None, None), "Worker": replica(Some(2), None)}));
        with_annotations["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] =
            json!({"annotations": {"a": "b"}});
        let bare = mpijob(json!({"Launcher": {}, "Worker": {"replicas": 2}}));
        let no_annotations =
            mpijob(json!({"Launcher": {}, "Worker": {"template": {"metadata": {}}}}));
        for v in [
            mpijob(json!({"Launcher": replica(None, None), "Worker": replica(Some(2), None)})),
            with_annotations,
            bare,
            no_annotations,
        ] {
            let once = defaulted(&v, &opts);
            assert_eq!(offset(&once), Some(json!("1")), "{v}");
            assert_eq!(defaulted(&once, &opts), once, "a second pass adds nothing");
        }
        let two = json!({"Launcher": replica(None, None), "Worker": replica(Some(2), None)});
        let mut not_as_worker = mpijob(two.clone());
        not_as_worker["spec"]["runLauncherAsWorker"] = json!(false);
        let no_launcher = mpijob(json!({"Worker": replica(Some(2), None)}));
        let mut grouped = mpijob(two.clone());
        grouped["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] =
            json!({"annotations": {PODSET_GROUP_NAME_ANNOTATION: "g"}});
        for v in [not_as_worker, no_launcher, grouped] {
            assert_eq!(offset(&defaulted(&v, &opts)), None, "{v}");
        }
        let no_tas = RuleOptions {
            topology_aware_scheduling: false,
            ..opts
        };
        assert_eq!(offset(&defaulted(&mpijob(two), &no_tas)), None);
    }

    /// The operator's replica rules: what it refuses to run is named field by field.
    #[test]
    fn what_the_operator_refuses_is_named() {
        let unrunnable = |v: &Value| -> Vec<String> {
            let o = JobObject::from_value(v).expect("view");
            MpiJob
                .unrunnable(&o)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        let ok =
            mpijob(json!({"Launcher": replica(Some(1), None), "Worker": replica(Some(2), None)}));
        assert!(unrunnable(&ok).is_empty());
        let launcher_only = mpijob(json!({"Launcher": replica(None, None)}));
        assert!(unrunnable(&launcher_only).is_empty());
        let zero =
            mpijob(json!({"Launcher": replica(Some(1), None), "Worker": replica(Some(0), None)}));
        assert_eq!(
            unrunnable(&zero),
            [
                "spec.mpiReplicaSpecs[Worker].replicas: Invalid value: 0: must be greater than or equal to 1"
            ]
        );
        let unset =
            mpijob(json!({"Launcher": replica(Some(1), None), "Worker": replica(None, None)}));
        assert_eq!(unrunnable(&unset).len(), 1, "the operator defaults it to 0");
        let bad = mpijob(
            json!({"Launcher": {"replicas": 2, "template": {"spec": {}}},
            "Worker": replica(Some(1), None)}),
        );
        assert_eq!(
            unrunnable(&bad),
            [
                "spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: must be 1",
                "spec.mpiReplicaSpecs[Launcher].template.spec.containers: Required value: must define at least one container"
            ]
        );
        let workers_only = mpijob(json!({"Worker": replica(Some(1), None)}));
        assert_eq!(
            unrunnable(&workers_only),
            ["spec.mpiReplicaSpecs[Launcher]: Required value: must have Launcher replica spec"]
        );
    }

    /// Kueue's `PriorityClass`: the run policy's, then the launcher's, then the worker's.
    #[test]
    fn priority_class_from_the_run_policy_then_the_templates() {
        let mut v = mpijob(json!({
            "Launcher": replica(None, None),
            "Worker": replica(Some(2), Some("worker-class")),
        }));
        let class = |v: &Value| {
            MpiJob
                .workload(v)
                .expect("workload")
                .spec
                .priority_class_ref
        };
        assert_eq!(class(&v), Some(PriorityClassRef::pod("worker-class")));
        v["spec"]["mpiReplicaSpecs"]["Launcher"] = replica(None, Some("launcher-class"));
        assert_eq!(class(&v), Some(PriorityClassRef::pod("launcher-class")));
        v["spec"]["runPolicy"] = json!({"schedulingPolicy": {"priorityClass": "gang"}});
        assert_eq!(class(&v), Some(PriorityClassRef::pod("gang")));
        // The WorkloadPriorityClass label still comes first.
        v["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = json!("wpc");
        assert_eq!(class(&v), Some(PriorityClassRef::workload("wpc")));
    }
}
