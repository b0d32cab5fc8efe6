//! LeaderWorkerSets (framework `leaderworkerset.x-k8s.io/leaderworkerset`) against the real
//! API server with the real lws CRD. Neither the LWS controller nor a kubelet runs: the
//! test plays both, creating each group's pods from the stored templates with the labels
//! and annotations the LWS controller puts on them, and writing their phases. One
//! Workload per group; the group's pods are gated by the pod webhook, ungated with the
//! flavor on admission, deleted when preempted, and nothing is left stuck.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kuota::api::{ResourceFlavor, Workload, WorkloadPriorityClass};
use kuota::controller::ControllerConfig;
use kuota::integrations::leaderworkerset::{
    FRAMEWORK, GROUP_INDEX_LABEL, SET_NAME_LABEL, SIZE_ANNOTATION, WORKER_INDEX_LABEL,
    group_workload_name,
};
use kuota::policy::PolicySet;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{container, flavor_toleration, holds_quota, install_crd, is_admitted, queue_labels};
use crate::controller::{condition, start_controller_with};
use crate::preemption::low_and_high_classes;
use crate::support::{ControllerLock, QueueFixture, controller_lock, unique_name, wait_until};
use crate::webhook::{Kuota, Registration};

const GATE: &str = "kueue.x-k8s.io/admission";
/// The test's own finalizer: keeps a deleted pod Terminating, as a kubelet would while
/// its containers stop.
const HOLD: &str = "kuota.dev/e2e-hold";
const LEADER_NAME_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/leader-name";

/// kuota (webhook, and the controller running only LeaderWorkerSets) over one namespace.
struct Setup {
    _only: ControllerLock,
    fx: QueueFixture,
    sets: Api<DynamicObject>,
    pods: Api<Pod>,
    classes: (String, String),
    webhook: Kuota,
    registration: Registration,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Setup {
    /// `cpu`: the queue's nominal quota.
    async fn new(prefix: &str, cpu: &str) -> Self {
        let only = controller_lock().await;
        let fx = QueueFixture::with_queue_spec(
            prefix,
            cpu,
            json!({"preemption": {"withinClusterQueue": "LowerPriority"}}),
        )
        .await;
        let client = fx.client.clone();
        install_crd(&client, "leaderworkerset.x-k8s.io_leaderworkersets.yaml").await;
        Api::<ResourceFlavor>::all(client.clone())
            .patch(
                &fx.rf,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"tolerations": [flavor_toleration(&fx.rf)]}})),
            )
            .await
            .expect("give the flavor a toleration");
        let classes = low_and_high_classes(&client).await;
        let webhook = Kuota::start(&client, PolicySet::default()).await;
        let registration = Registration::create(
            &client,
            webhook.addr,
            &webhook.ca_pem,
            &[&fx.ns],
            &unique_name("run"),
        )
        .await;
        // Only the LeaderWorkerSet framework: its pods are gated by the pod webhook it
        // enables implicitly, and run by its own controller.
        let (stop, task) = start_controller_with(
            &client,
            ControllerConfig {
                integrations: vec![FRAMEWORK.to_string()],
                ..ControllerConfig::default()
            },
        );
        let ar = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
            "leaderworkersets",
        );
        let sets = Api::namespaced_with(client.clone(), &fx.ns, &ar);
        let pods = Api::<Pod>::namespaced(client, &fx.ns);
        Self {
            _only: only,
            fx,
            sets,
            pods,
            classes,
            webhook,
            registration,
            stop,
            task,
        }
    }

    fn client(&self) -> &Client {
        &self.fx.client
    }

    /// Creates a LeaderWorkerSet until kuota's webhook (about a second to be in force)
    /// stores it with both templates marked; returns it as stored.
    async fn create_set(&self, name: &str, class: &str, replicas: i32) -> Value {
        let obj: DynamicObject =
            serde_json::from_value(set(&self.fx.ns, name, class, replicas)).expect("an LWS");
        for _ in 0..40 {
            let created = self
                .sets
                .create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("create LeaderWorkerSet {name}: {e}"));
            let created = serde_json::to_value(created).expect("json");
            if marked(&created) {
                return created;
            }
            let _ = self.sets.delete(name, &DeleteParams::default()).await;
            wait_until(Duration::from_secs(30), || {
                let sets = self.sets.clone();
                async move { sets.get_opt(name).await.ok().flatten().is_none() }
            })
            .await
            .expect("a deleted LeaderWorkerSet disappears");
        }
        panic!("kuota's webhook never marked the templates of {name}");
    }

    /// Plays the LWS controller: creates group `group`'s pods (leader `<set>-<group>`,
    /// workers `<set>-<group>-<i>`) from the stored templates, each owned by the set and
    /// held by the test's finalizer; checks the pod webhook gated them.
    async fn create_group(&self, set: &Value, group: &str) -> Vec<String> {
        let set_name = set["metadata"]["name"].as_str().expect("named");
        let leader = format!("{set_name}-{group}");
        let mut names = Vec::new();
        for worker in 0..2 {
            let (name, template) = if worker == 0 {
                (leader.clone(), "leaderTemplate")
            } else {
                (format!("{leader}-{worker}"), "workerTemplate")
            };
            let t = &set["spec"]["leaderWorkerTemplate"][template];
            let mut meta = t["metadata"].clone();
            meta["name"] = json!(name);
            meta["labels"][SET_NAME_LABEL] = json!(set_name);
            meta["labels"][GROUP_INDEX_LABEL] = json!(group);
            meta["labels"][WORKER_INDEX_LABEL] = json!(worker.to_string());
            meta["annotations"][SIZE_ANNOTATION] = json!("2");
            if worker > 0 {
                meta["annotations"][LEADER_NAME_ANNOTATION] = json!(leader);
            }
            meta["finalizers"] = json!([HOLD]);
            meta["ownerReferences"] = json!([{
                "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "name": set_name, "uid": set["metadata"]["uid"],
            }]);
            let pod: Pod = serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]}),
            )
            .expect("a pod");
            let created = self
                .pods
                .create(&PostParams::default(), &pod)
                .await
                .unwrap_or_else(|e| panic!("create pod {name}: {e}"));
            let created = serde_json::to_value(created).expect("json");
            assert!(gated(&created), "the pod webhook gated {name}: {created:#}");
            assert!(
                created["metadata"]["labels"]["kueue.x-k8s.io/managed"].is_null(),
                "a parent's pod is not a plain pod of kuota's"
            );
            names.push(name);
        }
        names
    }

    /// Waits (60 s) until pod `name` satisfies `check`.
    async fn wait_pod(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        super::wait_pod(&self.pods, name, what, check).await
    }

    /// Writes a pod's status as its kubelet would ([`super::kubelet_writes`]).
    async fn kubelet_writes(&self, name: &str, status: Value) {
        super::kubelet_writes(&self.pods, name, status).await;
    }

    /// Lets the pod go: removes the test's finalizer; waits until it is gone if deleted.
    async fn release(&self, name: &str) {
        let _ = self
            .pods
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await;
        // A bound pod being deleted also waits for its kubelet's confirmation.
        let deleting = self
            .pods
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some());
        if deleting {
            super::confirm_deletion(&self.pods, name).await;
        }
    }

    async fn wait_pod_gone(&self, name: &str) {
        let gone = wait_until(Duration::from_secs(60), || {
            let pods = self.pods.clone();
            async move { pods.get_opt(name).await.ok().flatten().is_none() }
        })
        .await;
        assert!(gone.is_some(), "pod {name} is stuck");
    }

    async fn workload(&self, name: &str) -> Option<Workload> {
        super::named_workload(self.client(), &self.fx.ns, name).await
    }

    /// Waits (60 s) until Workload `name` satisfies `check`.
    async fn wait_workload(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Workload) -> bool,
    ) -> Workload {
        super::wait_named_workload(self.client(), &self.fx.ns, name, what, check).await
    }

    async fn wait_workload_gone(&self, name: &str) {
        let gone = wait_until(Duration::from_secs(60), || async {
            self.workload(name).await.is_none()
        })
        .await;
        assert!(gone.is_some(), "Workload {name} stayed");
    }

    async fn teardown(mut self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        self.webhook.stop().await;
        if let Ok(list) = self.pods.list(&ListParams::default()).await {
            let clear = json!({"metadata": {"finalizers": null}});
            for p in list {
                let name = p.metadata.name.unwrap_or_default();
                let _ = self
                    .pods
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&clear))
                    .await;
            }
        }
        self.registration.delete().await;
        for name in [&self.classes.0, &self.classes.1] {
            let _ = Api::<WorkloadPriorityClass>::all(self.fx.client.clone())
                .delete(name, &Default::default())
                .await;
        }
        self.fx.teardown().await;
    }
}

/// A LeaderWorkerSet of queue `lq` and class `class`: `replicas` groups of a leader asking
/// for 200m and one worker asking for 300m.
fn set(ns: &str, name: &str, class: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns, "labels": queue_labels(class)},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"spec": {"containers": [container("leader", "200m")]}},
                "workerTemplate": {"metadata": {"labels": {"app": "serve"}},
                    "spec": {"containers": [container("worker", "300m")]}}
            }
        }
    })
}

/// Both templates carry the marks Kueue's webhook writes.
fn marked(set: &Value) -> bool {
    ["leaderTemplate", "workerTemplate"].iter().all(|t| {
        let m = &set["spec"]["leaderWorkerTemplate"][t]["metadata"];
        m["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == FRAMEWORK
            && m["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"
            && m["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    })
}

fn gated(pod: &Value) -> bool {
    pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|gs| gs.iter().any(|g| g["name"] == GATE))
}

/// Ungated with flavor `rf`'s node label and toleration.
fn started_on(pod: &Value, rf: &str) -> bool {
    !gated(pod)
        && pod["spec"]["nodeSelector"]["kuota.dev/e2e-pool"] == json!(rf)
        && pod["spec"]["tolerations"]
            .as_array()
            .is_some_and(|ts| ts.contains(&flavor_toleration(rf)))
}

fn running() -> Value {
    json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
}

fn group_of(set: &Value, group: &str) -> String {
    group_workload_name(
        set["metadata"]["name"].as_str().unwrap_or_default(),
        set["metadata"]["uid"].as_str().unwrap_or_default(),
        group,
    )
}

#[tokio::test]
async fn a_leaderworkerset_group_is_gated_admitted_preempted_finished_and_deleted_cleanly() {
    let s = Setup::new("lws", "800m").await;
    let rf = s.fx.rf.clone();
    let (low, high) = s.classes.clone();

    // 1. The set's templates are marked; the group's pods are gated.
    let victim = s.create_set("victim", &low, 1).await;
    let victim_pods = s.create_group(&victim, "0").await;

    // 2. One Workload for the group, with Kueue's name and pod sets, owned by the set.
    let wl_name = group_of(&victim, "0");
    let wl = s.wait_workload(&wl_name, "admitted", is_admitted).await;
    let sets: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect();
    assert_eq!(sets, [("leader".to_string(), 1), ("worker".to_string(), 1)]);
    assert_eq!(wl.spec.priority, Some(10), "the class's value");
    let owner = &wl.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("LeaderWorkerSet", "victim")
    );
    assert_eq!(
        wl.metadata.annotations.as_ref().expect("annotations")["kueue.x-k8s.io/component-workload-index"],
        "0"
    );

    // 3. Admission ungates every pod with the flavor, each in its pod set.
    for (name, pod_set) in victim_pods.iter().zip(["leader", "worker"]) {
        let p = s
            .wait_pod(name, "ungated with the flavor", |p| started_on(p, &rf))
            .await;
        assert_eq!(p["metadata"]["labels"]["kueue.x-k8s.io/podset"], pod_set);
        s.kubelet_writes(name, running()).await;
    }

    // 4. A higher-priority set needs the room the victim holds (two groups of 500m do not
    // fit in 800m): the victim's pods are deleted, and
    // its quota stays with it while they still run.
    let preemptor = s.create_set("preemptor", &high, 1).await;
    let preemptor_pods = s.create_group(&preemptor, "0").await;
    let pre_name = group_of(&preemptor, "0");
    let evicted = s
        .wait_workload(&wl_name, "evicted", |wl| {
            condition(wl, "Evicted").is_some_and(|c| c.0 == "True")
        })
        .await;
    assert_eq!(
        condition(&evicted, "Preempted").map(|c| (c.0, c.1)),
        Some(("True", "InClusterQueue"))
    );
    for name in &victim_pods {
        s.wait_pod(name, "deleted", |p| {
            !p["metadata"]["deletionTimestamp"].is_null()
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = s.workload(&wl_name).await.expect("the victim's Workload");
    assert!(
        holds_quota(&held),
        "the quota went back while the victim's pods still ran: {:#?}",
        held.status
    );
    assert!(
        !s.workload(&pre_name)
            .await
            .as_ref()
            .is_some_and(holds_quota),
        "the preemptor was admitted onto quota the victim still holds"
    );
    for name in &victim_pods {
        s.release(name).await;
        s.wait_pod_gone(name).await;
    }
    let requeued = s
        .wait_workload(&wl_name, "requeued", |wl| !holds_quota(wl))
        .await;
    assert_eq!(
        condition(&requeued, "Admitted").map(|c| (c.0, c.1)),
        Some(("False", "NoReservation"))
    );
    s.wait_workload(&pre_name, "admitted", is_admitted).await;

    // 5. The preemptor's group finishes; the LWS controller recreates the victim's pods,
    // gated, and they are admitted again.
    for name in &preemptor_pods {
        s.wait_pod(name, "ungated with the flavor", |p| started_on(p, &rf))
            .await;
        s.kubelet_writes(name, json!({"phase": "Succeeded"})).await;
    }
    let done = s
        .wait_workload(&pre_name, "finished", |wl| {
            condition(wl, "Finished").is_some_and(|c| c.0 == "True")
        })
        .await;
    assert_eq!(
        condition(&done, "Finished").map(|c| c.2),
        Some("Pods succeeded: 2/2.")
    );
    let victim_pods = s.create_group(&victim, "0").await;
    s.wait_workload(&wl_name, "re-admitted", is_admitted).await;
    for name in &victim_pods {
        s.wait_pod(name, "ungated again", |p| started_on(p, &rf))
            .await;
        s.release(name).await;
    }

    // Deleting the sets takes their pods and Workloads with them: nothing is stuck.
    for name in ["victim", "preemptor"] {
        s.sets
            .delete(name, &DeleteParams::background())
            .await
            .expect("delete the LeaderWorkerSet");
    }
    for name in preemptor_pods.iter().chain(&victim_pods) {
        s.release(name).await;
        s.wait_pod_gone(name).await;
    }
    s.wait_workload_gone(&wl_name).await;
    s.wait_workload_gone(&pre_name).await;
    s.teardown().await;
}

#[tokio::test]
async fn a_scaled_down_leaderworkerset_gives_its_highest_groups_quota_back() {
    let s = Setup::new("lws-scale", "1").await;
    let low = s.classes.0.clone();
    let set = s.create_set("serve", &low, 2).await;
    let first = s.create_group(&set, "0").await;
    let second = s.create_group(&set, "1").await;
    let (wl0, wl1) = (group_of(&set, "0"), group_of(&set, "1"));
    s.wait_workload(&wl0, "admitted", is_admitted).await;
    s.wait_workload(&wl1, "admitted", is_admitted).await;

    // Scale to one group: the LWS controller deletes the second group's pods.
    s.sets
        .patch(
            "serve",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale down");
    for name in &second {
        s.pods
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        s.release(name).await;
        s.wait_pod_gone(name).await;
    }
    s.wait_workload_gone(&wl1).await;
    let kept = s.workload(&wl0).await.expect("the first group's Workload");
    assert!(is_admitted(&kept), "the first group keeps running");

    s.sets
        .delete("serve", &DeleteParams::background())
        .await
        .expect("delete the LeaderWorkerSet");
    for name in &first {
        s.release(name).await;
        s.wait_pod_gone(name).await;
    }
    s.wait_workload_gone(&wl0).await;
    s.teardown().await;
}
