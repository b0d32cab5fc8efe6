//! Plain pods and pod groups (framework `pod`), against the real API server. No kubelet
//! runs: the test plays it, writing each pod's phase. Queue-labelled pods are gated by
//! kuota's webhook, ungated with the flavor on admission, deleted when preempted, and
//! never left stuck behind kuota's finalizer.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kuota::api::{ResourceFlavor, Workload, WorkloadPriorityClass};
use kuota::controller::ControllerConfig;
use kuota::policy::PolicySet;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{container, flavor_toleration, holds_quota, is_admitted};
use crate::controller::{condition, start_controller_with};
use crate::preemption::low_and_high_classes;
use crate::support::{ControllerLock, QueueFixture, controller_lock, unique_name, wait_until};
use crate::webhook::{Kuota, Registration};

const GATE: &str = "kueue.x-k8s.io/admission";
const FINALIZER: &str = "kueue.x-k8s.io/managed";

/// kuota (webhook and controller running `pod`) over one test's namespace and queue.
struct Setup {
    _only: ControllerLock,
    fx: QueueFixture,
    pods: Api<Pod>,
    webhook: Kuota,
    registration: Registration,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Setup {
    async fn new(prefix: &str, cpu: &str) -> Self {
        let only = controller_lock().await;
        let fx = QueueFixture::with_queue_spec(
            prefix,
            cpu,
            json!({"preemption": {"withinClusterQueue": "LowerPriority"}}),
        )
        .await;
        let client = fx.client.clone();
        Api::<ResourceFlavor>::all(client.clone())
            .patch(
                &fx.rf,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"tolerations": [flavor_toleration(&fx.rf)]}})),
            )
            .await
            .expect("give the flavor a toleration");
        let webhook = Kuota::start(&client, PolicySet::default()).await;
        let registration = Registration::create(
            &client,
            webhook.addr,
            &webhook.ca_pem,
            &[&fx.ns],
            &unique_name("run"),
        )
        .await;
        let (stop, task) = start_controller_with(
            &client,
            ControllerConfig {
                integrations: vec!["pod".to_string()],
                ..ControllerConfig::default()
            },
        );
        let pods = Api::<Pod>::namespaced(client, &fx.ns);
        Self {
            _only: only,
            fx,
            pods,
            webhook,
            registration,
            stop,
            task,
        }
    }

    fn client(&self) -> &Client {
        &self.fx.client
    }

    /// Creates a pod until kuota's webhook (about a second to be in force) stores it gated.
    async fn create_gated(&self, pod: Value) -> Value {
        let name = pod["metadata"]["name"].as_str().expect("named").to_string();
        let obj: Pod = serde_json::from_value(pod).expect("a pod");
        for _ in 0..40 {
            let created = self
                .pods
                .create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("create pod {name}: {e}"));
            let created = serde_json::to_value(created).expect("json");
            if gated(&created) {
                return created;
            }
            let _ = self.pods.delete(&name, &DeleteParams::default()).await;
            self.wait_gone(&name).await;
        }
        panic!("kuota's webhook never gated the queue-labelled pod {name}");
    }

    async fn wait_gone(&self, name: &str) {
        let pods = self.pods.clone();
        let gone = wait_until(Duration::from_secs(60), || {
            let pods = pods.clone();
            async move { pods.get_opt(name).await.ok().flatten().is_none() }
        })
        .await;
        if gone.is_none() {
            let left = self.pods.get_opt(name).await.ok().flatten();
            panic!("pod {name} is stuck: {left:#?}");
        }
    }

    /// Waits (60 s) until pod `name` satisfies `check`.
    async fn wait_pod(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        super::wait_pod(&self.pods, name, what, check).await
    }

    /// Writes a pod's status as its kubelet would ([`super::kubelet_writes`]).
    async fn kubelet_writes(&self, name: &str, status: Value) {
        super::kubelet_writes(&self.pods, name, status).await;
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

    /// The name of the Workload whose controller owner is pod `pod`.
    async fn workload_of_pod(&self, pod: &str) -> String {
        let api = Api::<Workload>::namespaced(self.client().clone(), &self.fx.ns);
        for _ in 0..600 {
            let list = api.list(&ListParams::default()).await.expect("list");
            let found = list.items.into_iter().find(|wl| {
                wl.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "Pod" && o.name == pod && o.controller == Some(true))
            });
            if let Some(name) = found.and_then(|w| w.metadata.name) {
                return name;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("pod {pod} never got a Workload");
    }

    /// Waits for a Warning Event `reason` on pod `pod` whose note contains `text`.
    async fn wait_event(&self, pod: &str, reason: &str, text: &str) -> String {
        let events = Api::<K8sEvent>::namespaced(self.client().clone(), &self.fx.ns);
        for _ in 0..300 {
            let list = events.list(&ListParams::default()).await.expect("events");
            let found = list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
                    && e.note.as_deref().is_some_and(|n| n.contains(text))
            });
            if let Some(e) = found {
                return e.note.unwrap_or_default();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no {reason} Event on pod {pod} saying {text:?} within 30 s");
    }

    async fn teardown(mut self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        self.registration.delete().await;
        self.webhook.stop().await;
        // Nothing of a test may be left behind kuota's finalizer.
        if let Ok(list) = self.pods.list(&ListParams::default()).await {
            for p in list {
                let name = p.metadata.name.clone().unwrap_or_default();
                let clear = json!({"metadata": {"finalizers": null}});
                let _ = self
                    .pods
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&clear))
                    .await;
                // Bound pods wait for a kubelet to confirm their deletion.
                super::confirm_deletion(&self.pods, &name).await;
            }
        }
        self.fx.teardown().await;
    }
}

fn gated(pod: &Value) -> bool {
    pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|gs| gs.iter().any(|g| g["name"] == GATE))
}

fn finalized(pod: &Value) -> bool {
    !pod["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|fs| fs.iter().any(|f| f == FINALIZER))
}

/// Ungated with flavor `rf`'s node label and toleration.
fn started_on(pod: &Value, rf: &str) -> bool {
    !gated(pod)
        && pod["spec"]["nodeSelector"]["kuota.dev/e2e-pool"] == json!(rf)
        && pod["spec"]["tolerations"]
            .as_array()
            .is_some_and(|ts| ts.contains(&flavor_toleration(rf)))
}

/// A pod of queue `lq` asking for `cpu`, in group `group` of `total` when given.
fn pod(ns: &str, name: &str, cpu: &str, group: Option<(&str, &str)>, class: Option<&str>) -> Value {
    let mut labels = json!({"kueue.x-k8s.io/queue-name": "lq"});
    let mut annotations = json!({});
    if let Some((g, total)) = group {
        labels["kueue.x-k8s.io/pod-group-name"] = json!(g);
        annotations["kueue.x-k8s.io/pod-group-total-count"] = json!(total);
    }
    if let Some(c) = class {
        labels["kueue.x-k8s.io/priority-class"] = json!(c);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [container("main", cpu)]}
    })
}

fn running() -> Value {
    json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
}

#[tokio::test]
async fn a_single_pod_is_gated_admitted_ungated_with_its_flavor_and_finished() {
    let s = Setup::new("pod-single", "1").await;
    let (ns, rf) = (s.fx.ns.clone(), s.fx.rf.clone());
    let created = s.create_gated(pod(&ns, "solo", "500m", None, None)).await;
    assert_eq!(
        created["metadata"]["labels"]["kueue.x-k8s.io/managed"],
        "true"
    );
    assert!(!finalized(&created), "the webhook adds kuota's finalizer");

    let wl_name = s.workload_of_pod("solo").await;
    assert!(wl_name.starts_with("pod-solo-"), "{wl_name}");
    let wl = s.wait_workload(&wl_name, "admitted", is_admitted).await;
    let sets: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect();
    assert_eq!(sets, [("main".to_string(), 1)]);

    let started = s
        .wait_pod("solo", "ungated with the flavor", |p| started_on(p, &rf))
        .await;
    assert_eq!(
        started["metadata"]["labels"]["kueue.x-k8s.io/local-queue-name"],
        "lq"
    );
    assert_eq!(
        started["metadata"]["labels"]["kueue.x-k8s.io/podset"],
        "main"
    );
    assert!(!finalized(&started), "the finalizer stays while it runs");

    s.kubelet_writes("solo", running()).await;
    s.kubelet_writes("solo", json!({"phase": "Succeeded"}))
        .await;
    let done = s
        .wait_workload(&wl_name, "finished", |wl| {
            condition(wl, "Finished").is_some_and(|c| c.0 == "True")
        })
        .await;
    assert_eq!(condition(&done, "Finished").map(|c| c.1), Some("Succeeded"));
    s.wait_pod("solo", "finalized", finalized).await;
    s.teardown().await;
}

#[tokio::test]
async fn a_pod_group_is_admitted_only_once_its_late_last_pod_arrives() {
    let s = Setup::new("pod-late", "1").await;
    let (ns, rf) = (s.fx.ns.clone(), s.fx.rf.clone());
    for name in ["g-0", "g-1"] {
        s.create_gated(pod(&ns, name, "200m", Some(("trio", "3")), None))
            .await;
    }
    s.wait_event(
        "g-0",
        "ErrWorkloadCompose",
        "'trio' group has fewer runnable pods than expected",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        s.workload("trio").await.is_none(),
        "no Workload before the last pod"
    );
    for name in ["g-0", "g-1"] {
        let p = s.wait_pod(name, "gated", gated).await;
        assert!(gated(&p));
    }

    s.create_gated(pod(&ns, "g-2", "200m", Some(("trio", "3")), None))
        .await;
    let wl = s.wait_workload("trio", "admitted", is_admitted).await;
    assert_eq!(wl.spec.pod_sets.len(), 1, "one role");
    assert_eq!(wl.spec.pod_sets[0].count, 3);
    assert_eq!(
        wl.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kueue.x-k8s.io/is-group-workload"))
            .map(String::as_str),
        Some("true")
    );
    for name in ["g-0", "g-1", "g-2"] {
        let p = s
            .wait_pod(name, "ungated with the flavor", |p| started_on(p, &rf))
            .await;
        assert_eq!(
            p["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"],
            json!(wl.spec.pod_sets[0].name)
        );
        s.kubelet_writes(name, json!({"phase": "Succeeded"})).await;
    }
    let done = s
        .wait_workload("trio", "finished", |wl| {
            condition(wl, "Finished").is_some_and(|c| c.0 == "True")
        })
        .await;
    assert_eq!(
        condition(&done, "Finished").map(|c| c.2),
        Some("Pods succeeded: 3/3.")
    );
    for name in ["g-0", "g-1", "g-2"] {
        s.wait_pod(name, "finalized", finalized).await;
    }
    s.teardown().await;
}

#[tokio::test]
async fn a_pod_group_deleted_midway_leaves_no_stuck_pod_and_gives_its_quota_back() {
    let s = Setup::new("pod-deleted", "1").await;
    let (ns, rf) = (s.fx.ns.clone(), s.fx.rf.clone());
    // A group whose last pod never came: deleting its pods leaves nothing behind.
    s.create_gated(pod(&ns, "lone-0", "200m", Some(("never", "2")), None))
        .await;
    s.pods
        .delete("lone-0", &DeleteParams::default())
        .await
        .expect("delete");
    s.wait_gone("lone-0").await;

    // An admitted group holding all the quota, deleted while its pods run nothing.
    for name in ["d-0", "d-1"] {
        s.create_gated(pod(&ns, name, "500m", Some(("duo", "2")), None))
            .await;
    }
    s.wait_workload("duo", "admitted", is_admitted).await;
    for name in ["d-0", "d-1"] {
        s.wait_pod(name, "ungated", |p| started_on(p, &rf)).await;
    }
    s.pods
        .delete("d-0", &DeleteParams::default())
        .await
        .expect("delete d-0");
    s.wait_gone("d-0").await;
    s.pods
        .delete("d-1", &DeleteParams::default())
        .await
        .expect("delete d-1");
    s.wait_gone("d-1").await;
    // Its Workload goes with its pods (they own it), and with it the quota.
    let gone = wait_until(Duration::from_secs(60), || async {
        s.workload("duo").await.is_none()
    })
    .await;
    assert!(gone.is_some(), "the deleted group's Workload stayed");
    s.create_gated(pod(&ns, "next", "1", None, None)).await;
    let next = s.workload_of_pod("next").await;
    s.wait_workload(&next, "admitted on the freed quota", is_admitted)
        .await;
    s.teardown().await;
}

#[tokio::test]
async fn a_pod_group_is_preempted_by_a_higher_priority_group_and_its_quota_waits_for_its_pods() {
    let s = Setup::new("pod-preempt", "1").await;
    let (ns, rf) = (s.fx.ns.clone(), s.fx.rf.clone());
    let (low, high) = low_and_high_classes(s.client()).await;
    for name in ["v-0", "v-1"] {
        s.create_gated(pod(&ns, name, "500m", Some(("victim", "2")), Some(&low)))
            .await;
    }
    s.wait_workload("victim", "admitted", is_admitted).await;
    for name in ["v-0", "v-1"] {
        s.wait_pod(name, "ungated", |p| started_on(p, &rf)).await;
        s.kubelet_writes(name, running()).await;
    }

    for name in ["p-0", "p-1"] {
        s.create_gated(pod(
            &ns,
            name,
            "500m",
            Some(("preemptor", "2")),
            Some(&high),
        ))
        .await;
    }
    let evicted = s
        .wait_workload("victim", "evicted", |wl| {
            condition(wl, "Evicted").is_some_and(|c| c.0 == "True")
        })
        .await;
    assert_eq!(
        condition(&evicted, "Evicted").map(|c| c.1),
        Some("Preempted")
    );
    assert_eq!(
        condition(&evicted, "Preempted").map(|c| (c.0, c.1)),
        Some(("True", "InClusterQueue"))
    );
    // Stopped by deletion; still Running, they keep the quota and their finalizer.
    for name in ["v-0", "v-1"] {
        s.wait_pod(name, "being deleted", |p| {
            !p["metadata"]["deletionTimestamp"].is_null()
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let victim = s.workload("victim").await.expect("the victim's Workload");
    assert!(
        holds_quota(&victim),
        "quota released while the victim's pods ran"
    );
    assert!(
        !s.workload("preemptor")
            .await
            .as_ref()
            .is_some_and(holds_quota),
        "the preemptor was admitted onto quota the victim still holds"
    );
    for name in ["v-0", "v-1"] {
        let p = s.pods.get(name).await.expect("still there");
        assert!(!finalized(&serde_json::to_value(p).expect("json")));
    }
    // Its pods end: they are let go, and the quota goes to the preemptor.
    for name in ["v-0", "v-1"] {
        s.kubelet_writes(name, json!({"phase": "Failed"})).await;
    }
    for name in ["v-0", "v-1"] {
        s.wait_gone(name).await;
    }
    s.wait_workload("preemptor", "admitted", is_admitted).await;
    for name in ["p-0", "p-1"] {
        s.wait_pod(name, "ungated", |p| started_on(p, &rf)).await;
    }
    for name in [&low, &high] {
        let _ = Api::<WorkloadPriorityClass>::all(s.client().clone())
            .delete(name, &Default::default())
            .await;
    }
    s.teardown().await;
}

#[tokio::test]
async fn pods_of_a_group_that_disagree_get_an_event_hold_no_quota_and_are_never_stuck() {
    let s = Setup::new("pod-bad", "1").await;
    let ns = s.fx.ns.clone();
    // Counts that disagree.
    s.create_gated(pod(&ns, "c-0", "100m", Some(("counts", "2")), None))
        .await;
    s.create_gated(pod(&ns, "c-1", "100m", Some(("counts", "3")), None))
        .await;
    let note = s
        .wait_event(
            "c-0",
            "ErrWorkloadCompose",
            "different 'kueue.x-k8s.io/pod-group-total-count' values",
        )
        .await;
    assert_eq!(
        note,
        "pods 'c-0' and 'c-1' has different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3"
    );
    // Queues that disagree.
    s.create_gated(pod(&ns, "q-0", "100m", Some(("queues", "2")), None))
        .await;
    let mut other = pod(&ns, "q-1", "100m", Some(("queues", "2")), None);
    other["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("other");
    s.create_gated(other).await;
    s.wait_event(
        "q-1",
        "ErrWorkloadCompose",
        "pods 'q-0' and 'q-1' has different queue names: lq!=other",
    )
    .await;
    // Neither group gets a Workload: nothing holds quota.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(s.workload("counts").await.is_none());
    assert!(s.workload("queues").await.is_none());
    // A count that is not a number, or missing, is refused at creation by the webhook.
    for (annotations, want) in [
        (
            json!({"kueue.x-k8s.io/pod-group-total-count": "two"}),
            "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: \"two\"",
        ),
        (
            json!({}),
            "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value",
        ),
    ] {
        let mut bad = pod(&ns, &unique_name("n"), "100m", Some(("nan", "1")), None);
        bad["metadata"]["annotations"] = annotations;
        let obj: Pod = serde_json::from_value(bad).expect("a pod");
        let mut refused = None;
        for _ in 0..40 {
            match s.pods.create(&PostParams::default(), &obj).await {
                Err(e) => {
                    refused = Some(e.to_string());
                    break;
                }
                Ok(p) => {
                    let name = p.metadata.name.unwrap_or_default();
                    let _ = s.pods.delete(&name, &DeleteParams::default()).await;
                    s.wait_gone(&name).await;
                }
            }
        }
        let refused = refused.expect("the webhook refuses the pod");
        assert!(refused.contains(want), "{refused}");
    }
    // Deleted, the pods that never ran go at once.
    for name in ["c-0", "c-1", "q-0", "q-1"] {
        s.pods
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for name in ["c-0", "c-1", "q-0", "q-1"] {
        s.wait_gone(name).await;
    }
    s.teardown().await;
}
