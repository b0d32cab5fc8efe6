//! Each job kind kuota runs, through its whole lifecycle against the real API server with
//! the kind's real CRD (vendored under `tests/fixtures/crds`, see its PROVENANCE.md). No
//! operator runs here: the test plays it, writing the status the operator would write.
//!
//! The lifecycle, the same for every kind:
//! 1. a queue-labelled object, created unsuspended, is stored suspended by kuota's webhook;
//! 2. its Workload has Kueue's pod sets (names and counts);
//! 3. once admitted it is unsuspended with the flavor's nodeSelector and toleration in
//!    every pod template;
//! 4. a higher-priority object of the same kind preempts it: it is suspended again with its
//!    templates restored byte for byte, its Workload carries Evicted and Preempted, and
//!    its quota is released only once its operator reports no pod running;
//! 5. the preemptor's operator reports it finished (a RayCluster, which never finishes,
//!    is deleted): its Workload is Finished (or gone), and the victim is admitted again.

mod jobset;
mod leaderworkerset;
mod mpijob;
mod pod;
mod pytorchjob;
mod raycluster;
mod rayjob;
mod trainjob;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kuota::api::{ResourceFlavor, Workload, WorkloadPriorityClass};
use kuota::controller::ControllerConfig;
use kuota::policy::PolicySet;
use serde_json::{Value, json};

use crate::controller::{condition, start_controller_with};
use crate::preemption::low_and_high_classes;
use crate::support::{QueueFixture, controller_lock, unique_name, wait_until};
use crate::webhook::{Kuota, Registration};

/// What the lifecycle needs to know of one kind.
pub(crate) struct KindCase {
    /// The vendored CRD's file under `tests/fixtures/crds`.
    pub crd: &'static str,
    /// Group, version, kind and plural.
    pub api: (&'static str, &'static str, &'static str, &'static str),
    /// Kueue's framework name.
    pub framework: &'static str,
    /// The object (queue `lq`, WorkloadPriorityClass `class`), created unsuspended.
    pub object: fn(ns: &str, name: &str, class: &str) -> Value,
    /// The pod sets Kueue gives it: (name, count).
    pub pod_sets: &'static [(&'static str, i32)],
    /// JSON pointers of its pod templates.
    pub templates: fn(&Value) -> Vec<String>,
    /// Whether the stored object is suspended.
    pub suspended: fn(&Value) -> bool,
    /// The operator's status while the pods run.
    pub running: Value,
    /// The operator's status once every pod is gone.
    pub stopped: Value,
    /// The operator's finished status (`None`: the kind never finishes; it is deleted).
    pub finished: Option<Value>,
}

impl KindCase {
    fn resource(&self) -> ApiResource {
        let (group, version, kind, plural) = self.api;
        ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(group, version, kind),
            plural,
        )
    }
}

/// Marks a CRD created from a vendored file (its value: the file).
const VENDORED_ANNOTATION: &str = "kuota.dev/e2e-vendored-crd";

/// Creates the vendored CRD unless the API server has it; waits until it is established.
pub(crate) async fn install_crd(client: &Client, file: &str) -> String {
    let path = format!("{}/tests/fixtures/crds/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let crd: CustomResourceDefinition =
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut crd = crd;
    let name = crd.metadata.name.clone().expect("a named CRD");
    crd.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(VENDORED_ANNOTATION.into(), file.into());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.get_opt(&name).await.expect("read CRDs") {
        // Created, not applied: these CRDs are too large for an apply's managed fields.
        None => match crds.create(&Default::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create CRD {name}: {e}"),
        },
        // Another definition of the kind (a schema-less stand-in): replaced by the real one.
        Some(existing) => {
            let vendored = existing
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(VENDORED_ANNOTATION))
                .is_some_and(|f| f == file);
            if !vendored {
                crd.metadata.resource_version = existing.metadata.resource_version.clone();
                crds.replace(&name, &Default::default(), &crd)
                    .await
                    .unwrap_or_else(|e| panic!("replace CRD {name}: {e}"));
            }
        }
    }
    crate::support::wait_established(&crds, &name).await;
    name
}

/// The Workload whose controller owner is the `kind` object `name`.
async fn workload_of(client: &Client, ns: &str, kind: &str, name: &str) -> Option<Workload> {
    let list = Api::<Workload>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .ok()?;
    list.items.into_iter().find(|wl| {
        wl.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == kind && o.name == name && o.controller == Some(true))
    })
}

/// Waits (60 s) until the Workload of `kind` object `name` satisfies `check`.
async fn wait_workload(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Workload) -> bool,
) -> Workload {
    let mut last = None;
    for _ in 0..600 {
        last = workload_of(client, ns, kind, name).await;
        if last.as_ref().is_some_and(&check) {
            return last.expect("checked");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the Workload of {kind} {ns}/{name} never became {what} within 60 s; last seen: {:#?}",
        last.map(|w| w.status)
    );
}

fn is_admitted(wl: &Workload) -> bool {
    condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
}

fn holds_quota(wl: &Workload) -> bool {
    wl.status.as_ref().is_some_and(|s| s.admission.is_some())
}

/// Waits (60 s) until the stored object satisfies `check`; returns it as JSON.
async fn wait_object(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..600 {
        if let Ok(o) = api.get(name).await {
            last = serde_json::to_value(o).expect("json");
            if check(&last) {
                return last;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} never became {what} within 60 s; last seen: {last:#}");
}

/// The object's pod templates, in the kind's order.
fn templates(case: &KindCase, obj: &Value) -> Vec<Value> {
    (case.templates)(obj)
        .iter()
        .map(|p| obj.pointer(p).cloned().unwrap_or(Value::Null))
        .collect()
}

/// Whether every pod template carries flavor `rf`'s node label and toleration.
fn carries_flavor(case: &KindCase, obj: &Value, rf: &str) -> bool {
    let toleration = flavor_toleration(rf);
    templates(case, obj).iter().all(|t| {
        t["spec"]["nodeSelector"]["kuota.dev/e2e-pool"] == json!(rf)
            && t["spec"]["tolerations"]
                .as_array()
                .is_some_and(|ts| ts.contains(&toleration))
    })
}

fn flavor_toleration(rf: &str) -> Value {
    json!({"key": "kuota.dev/e2e-pool", "operator": "Equal", "value": rf, "effect": "NoSchedule"})
}

/// Creates the object unsuspended until kuota's webhook (taking about a second to be in
/// force) stores it suspended; returns it as stored.
async fn create_held(
    api: &Api<DynamicObject>,
    case: &KindCase,
    ns: &str,
    name: &str,
    class: &str,
) -> Value {
    let obj: DynamicObject =
        serde_json::from_value((case.object)(ns, name, class)).expect("an object");
    for _ in 0..40 {
        let created = api
            .create(&Default::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        let created = serde_json::to_value(created).expect("json");
        if (case.suspended)(&created) {
            return created;
        }
        let _ = api.delete(name, &DeleteParams::foreground()).await;
        wait_until(Duration::from_secs(30), || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok().flatten().is_none() }
        })
        .await
        .expect("a deleted object disappears");
    }
    panic!("kuota's webhook never suspended the queue-labelled {name}");
}

/// Writes the status the kind's operator would.
async fn operator_writes(api: &Api<DynamicObject>, name: &str, status: &Value) {
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap_or_else(|e| panic!("write the status of {name}: {e}"));
}

/// The whole lifecycle of one kind (see the module's documentation).
pub(crate) async fn lifecycle(case: &KindCase) {
    let _only = controller_lock().await;
    let kind = case.api.2;
    let fx = QueueFixture::with_queue_spec(
        &kind.to_lowercase(),
        "1",
        json!({"preemption": {"withinClusterQueue": "LowerPriority"}}),
    )
    .await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    install_crd(&client, case.crd).await;
    Api::<ResourceFlavor>::all(client.clone())
        .patch(
            &rf,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tolerations": [flavor_toleration(&rf)]}})),
        )
        .await
        .expect("give the flavor a toleration");
    let (low, high) = low_and_high_classes(&client).await;
    let mut webhook = Kuota::start(&client, PolicySet::default()).await;
    let run_label = unique_name("run");
    let registration =
        Registration::create(&client, webhook.addr, &webhook.ca_pem, &[&ns], &run_label).await;
    let (stop, task) = start_controller_with(
        &client,
        ControllerConfig {
            integrations: vec![case.framework.to_string()],
            ..ControllerConfig::default()
        },
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &case.resource());

    // 1. Stored suspended.
    let held = create_held(&api, case, &ns, "victim", &low).await;
    let submitted = templates(case, &held);

    // 2. Kueue's pod sets.
    let wl = wait_workload(&client, &ns, kind, "victim", "admitted", is_admitted).await;
    let pod_sets: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect();
    let expected: Vec<(String, i32)> = case
        .pod_sets
        .iter()
        .map(|(n, c)| (n.to_string(), *c))
        .collect();
    assert_eq!(pod_sets, expected, "{kind}'s pod sets");
    assert_eq!(wl.spec.priority, Some(10), "the class's value");

    // 3. Started with the flavor in every template; the operator runs its pods.
    let carries = |o: &Value| !(case.suspended)(o) && carries_flavor(case, o, &rf);
    let started = wait_object(&api, "victim", "started with the flavor", carries).await;
    for t in templates(case, &started) {
        // Kueue's AssignQueueLabelsForPods (on by default).
        assert_eq!(
            t["metadata"]["labels"]["kueue.x-k8s.io/local-queue-name"],
            "lq"
        );
        assert_eq!(
            t["metadata"]["labels"]["kueue.x-k8s.io/cluster-queue-name"],
            json!(fx.cq)
        );
    }
    operator_writes(&api, "victim", &case.running).await;

    // 4. The preemptor.
    create_held(&api, case, &ns, "preemptor", &high).await;
    let evicted = wait_workload(&client, &ns, kind, "victim", "evicted", |wl| {
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
    let restored = |o: &Value| (case.suspended)(o) && templates(case, o) == submitted;
    wait_object(
        &api,
        "victim",
        "suspended with its templates restored",
        restored,
    )
    .await;
    // Its operator still reports pods running: the quota stays with it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let victim = workload_of(&client, &ns, kind, "victim")
        .await
        .expect("the victim's Workload");
    assert!(
        holds_quota(&victim),
        "{kind}: the quota went back while its operator reported pods running: {:#?}",
        victim.status
    );
    let preemptor = workload_of(&client, &ns, kind, "preemptor").await;
    assert!(
        !preemptor.as_ref().is_some_and(holds_quota),
        "{kind}: the preemptor was admitted onto quota the victim still holds"
    );
    // Its pods gone, the quota goes to the preemptor.
    operator_writes(&api, "victim", &case.stopped).await;
    let requeued = wait_workload(&client, &ns, kind, "victim", "requeued", |wl| {
        !holds_quota(wl)
    })
    .await;
    assert_eq!(
        condition(&requeued, "Admitted").map(|c| (c.0, c.1)),
        Some(("False", "NoReservation"))
    );
    wait_workload(&client, &ns, kind, "preemptor", "admitted", is_admitted).await;
    wait_object(&api, "preemptor", "started with the flavor", carries).await;
    operator_writes(&api, "preemptor", &case.running).await;

    // 5. The preemptor finishes (or, never finishing, is deleted); the victim follows.
    match &case.finished {
        Some(status) => {
            operator_writes(&api, "preemptor", status).await;
            let done = wait_workload(&client, &ns, kind, "preemptor", "finished", |wl| {
                condition(wl, "Finished").is_some_and(|c| c.0 == "True")
            })
            .await;
            assert_eq!(condition(&done, "Finished").map(|c| c.1), Some("Succeeded"));
        }
        None => {
            api.delete("preemptor", &DeleteParams::background())
                .await
                .expect("delete the preemptor");
            let gone = wait_until(Duration::from_secs(60), || {
                let client = client.clone();
                let ns = ns.clone();
                async move { workload_of(&client, &ns, kind, "preemptor").await.is_none() }
            })
            .await;
            assert!(gone.is_some(), "the deleted preemptor's Workload stayed");
        }
    }
    wait_workload(&client, &ns, kind, "victim", "re-admitted", is_admitted).await;
    wait_object(&api, "victim", "started again", carries).await;

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    registration.delete().await;
    webhook.stop().await;
    for name in [&low, &high] {
        let _ = Api::<WorkloadPriorityClass>::all(client.clone())
            .delete(name, &Default::default())
            .await;
    }
    fx.teardown().await;
}

/// The labels every object of these tests carries: LocalQueue `lq` and a priority class.
pub(crate) fn queue_labels(class: &str) -> Value {
    json!({"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": class})
}

/// A container asking for `cpu`.
pub(crate) fn container(name: &str, cpu: &str) -> Value {
    json!({"name": name, "image": "busybox", "resources": {"requests": {"cpu": cpu}}})
}

/// Writes a pod's status as its kubelet would, binding it to a node first: a kubelet runs
/// only bound pods, and the controller manager's pod GC force-deletes an unbound pod once it
/// is terminating (which would end a preempted pod early). A pod being deleted whose
/// containers have ended then gets its kubelet's confirmation (a delete with grace 0); the
/// API server removes it once its finalizers are gone.
pub(crate) async fn kubelet_writes(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    name: &str,
    status: Value,
) {
    use kube::api::{Patch, PatchParams, PostParams};
    let ended = matches!(status["phase"].as_str(), Some("Succeeded" | "Failed"));
    let pod = pods.get(name).await.expect("the pod");
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_none()
    {
        let node = kubelet_node(&pods.clone().into_client()).await;
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name}, "target": {"kind": "Node", "name": node}});
        pods.create_subresource::<Value, Value>("binding", name, &PostParams::default(), &binding)
            .await
            .unwrap_or_else(|e| panic!("bind pod {name} to {node}: {e}"));
    }
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("write the status of pod {name}: {e}"));
    if ended && pod.metadata.deletion_timestamp.is_some() {
        confirm_deletion(pods, name).await;
    }
}

/// A kubelet's confirmation that a pod being deleted no longer runs (a delete with grace 0).
pub(crate) async fn confirm_deletion(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    name: &str,
) {
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..kube::api::DeleteParams::default()
    };
    let _ = pods.delete(name, &now).await;
}

/// The Node the stand-in kubelet binds pods to, created once (a pod bound to a missing
/// Node would be deleted by the pod GC as orphaned). Without taints and labels, it is
/// no TAS node and no flavor selects it.
pub(crate) async fn kubelet_node(client: &Client) -> &'static str {
    const NODE: &str = "kuota-e2e-pod-kubelet";
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(json!({"metadata": {"name": NODE}})).expect("a Node");
    match kube::Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .create(&kube::api::PostParams::default(), &node)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create Node {NODE}: {e}"),
    }
    NODE
}

/// Waits (60 s) until pod `name` satisfies `check`; returns it as JSON.
pub(crate) async fn wait_pod(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..600 {
        if let Ok(Some(p)) = pods.get_opt(name).await {
            last = serde_json::to_value(p).expect("json");
            if check(&last) {
                return last;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("pod {name} never became {what} within 60 s; last seen: {last:#}");
}

/// Workload `name` in `ns`, if it exists.
pub(crate) async fn named_workload(client: &Client, ns: &str, name: &str) -> Option<Workload> {
    kube::Api::<Workload>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .expect("read Workloads")
}

/// Waits (60 s) until Workload `name` in `ns` satisfies `check`.
pub(crate) async fn wait_named_workload(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Workload) -> bool,
) -> Workload {
    let mut last = None;
    for _ in 0..600 {
        last = named_workload(client, ns, name).await;
        if last.as_ref().is_some_and(&check) {
            return last.expect("checked");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!(
        "Workload {name} never became {what} within 60 s; last seen: {:#?}",
        last.map(|w| w.status)
    );
}
