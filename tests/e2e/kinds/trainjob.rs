//! TrainJob (trainer.kubeflow.org/v1alpha1, CRDs from kubeflow/trainer v2.3.0). Its pod
//! sets come from the runtime it names; its admission goes into Kueue's runtime patch, so
//! its "templates" here are that patch's pod template patches once started, and the patch
//! list as submitted otherwise (restored byte for byte).

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kuota::controller::ControllerConfig;
use kuota::policy::PolicySet;
use serde_json::{Value, json};

use super::{KindCase, container, install_crd, lifecycle, queue_labels, workload_of};
use crate::controller::start_controller_with;
use crate::support::{QueueFixture, controller_lock, unique_name};
use crate::webhook::{Kuota, Registration};

const GROUP: &str = "trainer.kubeflow.org";
const ANCESTOR: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
/// The ClusterTrainingRuntime of the lifecycle test.
const CLUSTER_RUNTIME: &str = "kuota-e2e-torch";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(GROUP, "v1alpha1", kind),
        plural,
    )
}

/// A runtime's spec: a dataset initializer (one pod) and the trainer's nodes (one by
/// default, the TrainJob says how many).
fn runtime_spec() -> Value {
    let job = |ancestor: &str, c: &str, cpu: &str| {
        json!({"metadata": {"labels": {ANCESTOR: ancestor}}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [container(c, cpu)]}}}})
    };
    json!({
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {"spec": {"replicatedJobs": [
            {"name": "dataset-initializer", "replicas": 1,
                "template": job("dataset-initializer", "dataset-initializer", "100m")},
            {"name": "node", "replicas": 1, "template": job("trainer", "node", "100m")},
        ]}}
    })
}

fn trainjob_naming(ns: &str, name: &str, class: &str, runtime: Value) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"namespace": ns, "name": name, "labels": queue_labels(class)},
        "spec": {"runtimeRef": runtime, "trainer": {"numNodes": 3,
            "resourcesPerNode": {"requests": {"cpu": "300m"}}}}
    })
}

/// 100m + 3 × 300m: one fits the 1-CPU queue, two do not.
fn trainjob(ns: &str, name: &str, class: &str) -> Value {
    trainjob_naming(ns, name, class, json!({"name": CLUSTER_RUNTIME}))
}

/// The trainer's copy of its JobSet's per-replicated-job counts.
fn jobs_status(active: [i64; 2]) -> Value {
    json!({"status": {"jobsStatus": [
        {"name": "dataset-initializer", "active": active[0], "ready": active[0],
            "succeeded": 0, "failed": 0, "suspended": 1 - active[0]},
        {"name": "node", "active": active[1], "ready": active[1],
            "succeeded": 0, "failed": 0, "suspended": 1 - active[1]},
    ]}})
}

/// Kueue's runtime patch's pod templates once started, else the whole patch list.
fn templates(o: &Value) -> Vec<String> {
    let kueue = o["spec"]["runtimePatches"].as_array().and_then(|ps| {
        ps.iter()
            .position(|p| p["manager"] == "kueue.x-k8s.io/manager")
    });
    let at = kueue.map(|i| format!("/spec/runtimePatches/{i}/trainingRuntimeSpec/template/spec"));
    match at
        .as_ref()
        .and_then(|p| o.pointer(&format!("{p}/replicatedJobs")))
    {
        Some(rjs) => (0..rjs.as_array().map_or(0, Vec::len))
            .map(|j| {
                format!(
                    "{}/replicatedJobs/{j}/template/spec/template",
                    at.as_deref().unwrap_or_default()
                )
            })
            .collect(),
        None => vec!["/spec/runtimePatches".to_string()],
    }
}

/// Polls `f` every 200 ms until it gives something, at most `timeout`.
async fn poll<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if let Some(v) = f().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

#[tokio::test]
async fn a_trainjob_is_held_admitted_preempted_only_once_its_jobs_stop_and_finished() {
    let client = crate::support::client().await;
    for crd in [
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "trainer.kubeflow.org_trainingruntimes.yaml",
    ] {
        install_crd(&client, crd).await;
    }
    let runtimes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("ClusterTrainingRuntime", "clustertrainingruntimes"),
    );
    let rt: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": CLUSTER_RUNTIME}, "spec": runtime_spec()
    }))
    .expect("a runtime");
    match runtimes.create(&Default::default(), &rt).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create the runtime: {e}"),
    }
    lifecycle(&KindCase {
        crd: "trainer.kubeflow.org_trainjobs.yaml",
        api: (GROUP, "v1alpha1", "TrainJob", "trainjobs"),
        framework: "trainer.kubeflow.org/trainjob",
        object: trainjob,
        pod_sets: &[("dataset-initializer", 1), ("node", 3)],
        templates,
        suspended: |o| o["spec"]["suspend"] == json!(true),
        running: jobs_status([1, 1]),
        stopped: jobs_status([0, 0]),
        finished: Some(json!({"status": {"conditions": [{
            "type": "Complete", "status": "True", "reason": "JobsCompleted",
            "message": "TrainJob is completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
    })
    .await;
}

/// A TrainJob naming a TrainingRuntime that does not exist gets no Workload (so holds no
/// quota) and a Warning ErrWorkloadCompose Event naming it; once the runtime is created in
/// its namespace, its Workload comes with the runtime's pod sets.
#[tokio::test]
async fn a_trainjob_whose_runtime_is_missing_gets_no_workload_until_it_exists() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("trainjob-missing", "1").await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    for crd in [
        "trainer.kubeflow.org_trainjobs.yaml",
        "trainer.kubeflow.org_trainingruntimes.yaml",
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    ] {
        install_crd(&client, crd).await;
    }
    let mut webhook = Kuota::start(&client, PolicySet::default()).await;
    let run_label = unique_name("run");
    let registration =
        Registration::create(&client, webhook.addr, &webhook.ca_pem, &[&ns], &run_label).await;
    let (stop, task) = start_controller_with(
        &client,
        ControllerConfig {
            integrations: vec!["trainer.kubeflow.org/trainjob".to_string()],
            ..ControllerConfig::default()
        },
    );
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &resource("TrainJob", "trainjobs"));
    let mut obj = trainjob_naming(
        &ns,
        "orphan",
        "",
        json!({"name": "later", "kind": "TrainingRuntime"}),
    );
    obj["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "lq"});
    let obj: DynamicObject = serde_json::from_value(obj).expect("a TrainJob");
    let created = poll(Duration::from_secs(30), || {
        let api = api.clone();
        let obj = obj.clone();
        async move {
            let c = api.create(&Default::default(), &obj).await.ok()?;
            let v = serde_json::to_value(c).ok()?;
            if v["spec"]["suspend"] == json!(true) {
                return Some(v);
            }
            let _ = api.delete("orphan", &Default::default()).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            None
        }
    })
    .await
    .expect("stored suspended by kuota's webhook");
    assert_eq!(
        created["spec"]["runtimePatches"],
        json!([{"manager": "kueue.x-k8s.io/manager",
            "trainingRuntimeSpec": {"template": {"spec": {}}}}]),
        "Kueue's empty runtime patch"
    );
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
    let event = poll(Duration::from_secs(60), || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("ErrWorkloadCompose")
                    && e.involved_object.name.as_deref() == Some("orphan")
            })
        }
    })
    .await
    .expect("an ErrWorkloadCompose Event on the TrainJob");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("spec.runtimeRef.name")
            && message.contains(&format!("TrainingRuntime {ns}/later")),
        "{message}"
    );
    assert!(
        workload_of(&client, &ns, "TrainJob", "orphan")
            .await
            .is_none(),
        "no Workload, so no quota, without its runtime"
    );

    let runtimes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &resource("TrainingRuntime", "trainingruntimes"),
    );
    let rt: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
        "metadata": {"name": "later", "namespace": ns}, "spec": runtime_spec()
    }))
    .expect("a runtime");
    runtimes
        .create(&Default::default(), &rt)
        .await
        .expect("create the runtime");
    let wl = poll(Duration::from_secs(60), || {
        let client = client.clone();
        let ns = ns.clone();
        async move { workload_of(&client, &ns, "TrainJob", "orphan").await }
    })
    .await
    .expect("a Workload once the runtime exists");
    let pod_sets: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect();
    assert_eq!(
        pod_sets,
        [
            ("dataset-initializer".to_string(), 1),
            ("node".to_string(), 3)
        ]
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    registration.delete().await;
    webhook.stop().await;
    fx.teardown().await;
}
