//! The exact API requests a job reconciler makes to start, stop and finish a job of a
//! given kind, against a mocked API server: the method, the path, the content type and
//! the body of each, and nothing else.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use kube::runtime::reflector::store::Writer as StoreWriter;
use kube::runtime::watcher::Event as WatchEvent;
use serde_json::{Value, json};

use super::*;
use crate::controller::actuate::Clock;
use crate::integrations::jobset::JobSet;
use crate::integrations::kubeflow::PyTorchJob;
use crate::integrations::mpijob::MpiJob;
use crate::integrations::ray::{RayCluster, RayJob};
use crate::integrations::trainjob::TrainJob;

/// One request as the API server saw it: method, path and query, content type, body.
#[derive(Debug, PartialEq)]
struct Seen {
    method: String,
    uri: String,
    content_type: String,
    body: Value,
}

/// Serves exactly one request, answering `reply`; returns what it saw.
async fn serve_one(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    reply: Value,
) -> Seen {
    let (req, send) = handle.next_request().await.expect("a request");
    let (parts, body) = req.into_parts();
    let bytes = body.collect_bytes().await.expect("a body");
    send.send_response(
        Response::builder()
            .body(Body::from(serde_json::to_vec(&reply).expect("json")))
            .expect("response"),
    );
    assert!(
        handle.next_request().await.is_none(),
        "one request, nothing else"
    );
    Seen {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        content_type: parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        body: serde_json::from_slice(&bytes).expect("a JSON body"),
    }
}

/// The Workload `wl` of job `j`, admitted with flavor `gpu` (node label `pool: a100`) for
/// every pod set.
fn admitted(integration: &dyn JobIntegration, job: &Value) -> Workload {
    let mut wl = integration.workload(job).expect("a valid job");
    wl.metadata.name = Some("wl".into());
    wl.metadata.resource_version = Some("7".into());
    let assignments: Vec<Value> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| json!({"name": p.name, "flavors": {"cpu": "gpu"}, "resourceUsage": {"cpu": "1"}, "count": p.count}))
        .collect();
    wl.status = Some(
        serde_json::from_value(json!({
            "admission": {"clusterQueue": "cq", "podSetAssignments": assignments},
            "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                "message": "", "lastTransitionTime": "2026-11-24T00:00:00Z"}]
        }))
        .expect("a valid status"),
    );
    wl
}

/// A reconciler context on a mocked client, its stores holding the flavor and `wl`.
fn ctx(client: kube::Client, wl: &Workload) -> Ctx {
    let (mut stores, mut writers) = super::super::watch::stores();
    let mut flavors = StoreWriter::new(Kind::ResourceFlavor.api_resource());
    let rf: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"}, "spec": {"nodeLabels": {"pool": "a100"}}
    }))
    .expect("a flavor");
    flavors.apply_watcher_event(&WatchEvent::Apply(rf));
    stores.flavors = flavors.as_reader();
    let mut compact = serde_json::to_value(wl).expect("json");
    compact["metadata"]["namespace"] = json!("ns");
    writers.workloads.apply_watcher_event(&WatchEvent::Apply(
        CompactObject::from_value(compact).expect("a workload"),
    ));
    let clock: Clock = Arc::new(|| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-24T01:00:00Z".parse().expect("time"),
        )
    });
    let (engine, _rx) = tokio::sync::mpsc::channel(1);
    Ctx {
        stores,
        writer: Arc::new(Writer::new(client, 1, 1).with_clock(clock, Duration::from_millis(1))),
        recorder: Recorder::disabled(),
        engine,
        manage_without_queue_name: false,
        wait_for_pods_ready: false,
        namespaces: crate::controller::managed_namespaces::NamespaceCheck::new(Default::default()),
        created: created_cache(),
    }
}

/// Carries out `step` for `job` and returns the one request it made.
async fn request_of(
    integration: &'static dyn JobIntegration,
    job: &Value,
    wl: &Workload,
    step: Step,
) -> Seen {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let ctx = ctx(kube::Client::new(service, "default"), wl);
    let server = tokio::spawn(serve_one(handle, job.clone()));
    let own_writes = super::own_writes::OwnWrites::default();
    let target = Target {
        integration,
        ctx: &ctx,
        own_writes: &own_writes,
        name: "j".into(),
        ns: "ns".into(),
        value: job.clone(),
        resolved: None,
        key: WorkloadKey::new("ns", "wl"),
    };
    target
        .carry_out(step, Some(wl.clone()))
        .await
        .expect("the step's write lands");
    drop(target);
    drop(ctx);
    server.await.expect("mock server")
}

/// The labels and annotation a start stamps on a pod set's template.
fn stamps(pod_set: &str) -> Value {
    json!({
        "labels": {"kueue.x-k8s.io/podset": pod_set, "kueue.x-k8s.io/local-queue-name": "lq",
            "kueue.x-k8s.io/cluster-queue-name": "cq"},
        "annotations": {"kueue.x-k8s.io/workload": "wl"}
    })
}

fn meta() -> Value {
    json!({"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "3",
        "labels": {"kueue.x-k8s.io/queue-name": "lq"}})
}

fn pod() -> Value {
    json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]})
}

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const UID: &str = "/metadata/uid";

/// The finish request: the Workload's status gets `Finished` with Kueue's reason and the
/// operator's message, preconditioned on the Workload's resourceVersion.
fn finish_request() -> Seen {
    Seen {
        method: "PATCH".into(),
        uri: "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl/status?&fieldManager=kuota"
            .into(),
        content_type: MERGE_PATCH.into(),
        body: json!({
            "metadata": {"resourceVersion": "7"},
            "status": {"conditions": [
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                    "lastTransitionTime": "2026-11-24T00:00:00Z"},
                {"type": "Finished", "status": "True", "reason": "Succeeded",
                    "message": "done", "lastTransitionTime": "2026-11-24T01:00:00Z"}
            ]}
        }),
    }
}

/// Start, stop and finish of `job`: one request each, exactly as given.
async fn check(integration: &'static dyn JobIntegration, job: Value, start: Seen, stop: Seen) {
    let kind = integration.kind();
    let wl = admitted(integration, &job);
    let seen = request_of(integration, &job, &wl, Step::Start).await;
    assert_eq!(seen, start, "{kind}: start");
    let mut started = job.clone();
    let ops: json_patch::Patch = serde_json::from_value(seen.body).expect("a JSON patch");
    json_patch::patch(&mut started, &ops).expect("applies");
    assert_eq!(
        request_of(integration, &started, &wl, Step::Stop).await,
        stop,
        "{kind}: stop"
    );
    let finish = Step::Finish {
        reason: REASON_SUCCEEDED,
        message: "done".into(),
    };
    assert_eq!(
        request_of(integration, &started, &wl, finish).await,
        finish_request(),
        "{kind}: finish"
    );
}

#[tokio::test]
async fn an_mpijob_is_started_stopped_and_finished_with_exactly_these_requests() {
    let replicas = |n: i32| json!({"replicas": n, "template": {"spec": pod()}});
    let job = json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": meta(),
        "spec": {"runPolicy": {"suspend": true}, "slotsPerWorker": 1,
            "mpiReplicaSpecs": {"Launcher": replicas(1), "Worker": replicas(2)}}
    });
    let uri = "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/j?";
    let t = |r: &str| format!("/spec/mpiReplicaSpecs/{r}/template");
    let mut start: Vec<Value> = stamped(&t("Launcher"), "launcher").into();
    start.extend(stamped(&t("Worker"), "worker"));
    start.push(suspend_op("/spec/runPolicy/suspend", false));
    check(
        &MpiJob,
        job,
        json_patch_of(uri, vec![("/spec/runPolicy/suspend", json!(true))], start),
        stop_of(uri, "/spec/runPolicy/suspend"),
    )
    .await;
}

#[tokio::test]
async fn a_jobset_is_started_stopped_and_finished_with_exactly_these_requests() {
    let job = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta(),
        "spec": {"suspend": true, "replicatedJobs": [
            {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": pod()}}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {"template": {"spec": pod()}}}}]}
    });
    let uri = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/j?";
    let t = |i: usize| format!("/spec/replicatedJobs/{i}/template/spec/template");
    let mut start: Vec<Value> = stamped(&t(0), "leader").into();
    start.extend(stamped(&t(1), "workers"));
    start.push(suspend_op("/spec/suspend", false));
    let replicated = job["spec"]["replicatedJobs"].clone();
    check(
        &JobSet,
        job,
        json_patch_of(
            uri,
            vec![
                ("/spec/replicatedJobs", replicated),
                ("/spec/suspend", json!(true)),
            ],
            start,
        ),
        stop_of(uri, "/spec/suspend"),
    )
    .await;
}

/// One JSON patch of `job`'s object at `uri`: `test`s of its uid and of each `(path,
/// value)` in `guards`, then `ops`.
fn json_patch_of(uri: &str, guards: Vec<(&str, Value)>, ops: Vec<Value>) -> Seen {
    let mut body = vec![json!({"op": "test", "path": UID, "value": "u"})];
    body.extend(
        guards
            .into_iter()
            .map(|(path, value)| json!({"op": "test", "path": path, "value": value})),
    );
    body.extend(ops);
    Seen {
        method: "PATCH".into(),
        uri: uri.into(),
        content_type: JSON_PATCH.into(),
        body: Value::Array(body),
    }
}

/// The stop of a job whose suspend flag is at `path`: tested unsuspended, then set.
fn stop_of(uri: &str, path: &str) -> Seen {
    json_patch_of(
        uri,
        vec![(path, json!(false))],
        vec![suspend_op(path, true)],
    )
}

/// The ops that stamp pod set `pod_set` with its flavor into the template at `template`.
fn stamped(template: &str, pod_set: &str) -> [Value; 2] {
    [
        json!({"op": "add", "path": format!("{template}/metadata"), "value": stamps(pod_set)}),
        json!({"op": "add", "path": format!("{template}/spec/nodeSelector"), "value": {"pool": "a100"}}),
    ]
}

fn suspend_op(path: &str, value: bool) -> Value {
    json!({"op": "replace", "path": path, "value": value})
}

#[tokio::test]
async fn a_pytorchjob_is_started_stopped_and_finished_with_exactly_these_requests() {
    let replicas = |n: i32| json!({"replicas": n, "template": {"spec": pod()}});
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta(),
        "spec": {"runPolicy": {"suspend": true},
            "pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(2)}}
    });
    let uri = "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/j?";
    let t = |r: &str| format!("/spec/pytorchReplicaSpecs/{r}/template");
    let mut start: Vec<Value> = stamped(&t("Master"), "master").into();
    start.extend(stamped(&t("Worker"), "worker"));
    start.push(suspend_op("/spec/runPolicy/suspend", false));
    check(
        &PyTorchJob,
        job,
        json_patch_of(uri, vec![("/spec/runPolicy/suspend", json!(true))], start),
        stop_of(uri, "/spec/runPolicy/suspend"),
    )
    .await;
}

fn ray_cluster() -> Value {
    json!({
        "headGroupSpec": {"template": {"spec": pod()}},
        "workerGroupSpecs": [{"groupName": "GPU", "replicas": 2, "template": {"spec": pod()}}]
    })
}

#[tokio::test]
async fn a_raycluster_is_started_stopped_and_finished_with_exactly_these_requests() {
    let mut spec = ray_cluster();
    spec["suspend"] = json!(true);
    let job =
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta(), "spec": spec});
    let uri = "/apis/ray.io/v1/namespaces/ns/rayclusters/j?";
    let mut start: Vec<Value> = stamped("/spec/headGroupSpec/template", "head").into();
    start.push(suspend_op("/spec/suspend", false));
    start.extend(stamped("/spec/workerGroupSpecs/0/template", "gpu"));
    let groups = job["spec"]["workerGroupSpecs"].clone();
    check(
        &RayCluster,
        job,
        json_patch_of(
            uri,
            vec![
                ("/spec/suspend", json!(true)),
                ("/spec/workerGroupSpecs", groups),
            ],
            start,
        ),
        stop_of(uri, "/spec/suspend"),
    )
    .await;
}

#[tokio::test]
async fn a_rayjob_is_started_stopped_and_finished_with_exactly_these_requests() {
    let job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta(),
        "spec": {"suspend": true, "shutdownAfterJobFinishes": true,
            "rayClusterSpec": ray_cluster(), "submitterPodTemplate": {"spec": pod()}}
    });
    let uri = "/apis/ray.io/v1/namespaces/ns/rayjobs/j?";
    let mut start: Vec<Value> =
        stamped("/spec/rayClusterSpec/headGroupSpec/template", "head").into();
    start.extend(stamped(
        "/spec/rayClusterSpec/workerGroupSpecs/0/template",
        "gpu",
    ));
    start.extend(stamped("/spec/submitterPodTemplate", "submitter"));
    start.push(suspend_op("/spec/suspend", false));
    let groups = job["spec"]["rayClusterSpec"]["workerGroupSpecs"].clone();
    check(
        &RayJob,
        job,
        json_patch_of(
            uri,
            vec![
                ("/spec/rayClusterSpec/workerGroupSpecs", groups),
                ("/spec/suspend", json!(true)),
            ],
            start,
        ),
        stop_of(uri, "/spec/suspend"),
    )
    .await;
}

/// A TrainJob's start writes the admission into Kueue's runtime patch only (its pod sets
/// come from the runtime, read when its Workload was built); a restore empties that patch
/// again, leaving the TrainJob as submitted.
#[tokio::test]
async fn a_trainjob_is_started_and_restored_through_kueues_runtime_patch() {
    let kueue_patch = json!({"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}});
    let job = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta(),
        "spec": {"suspend": true, "runtimeRef": {"name": "rt"}, "trainer": {"numNodes": 2},
            "runtimePatches": [kueue_patch]}
    });
    let runtime = json!({"spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": pod()}}}}]}}}});
    let resolved = TrainJob.resolve(&job, &[Some(runtime)]).expect("resolves");
    let wl = admitted(&TrainJob, &resolved);
    assert_eq!(wl.spec.pod_sets[0].count, 2);
    let uri = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/j?";
    let at = "/spec/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs";
    let start = request_of(&TrainJob, &job, &wl, Step::Start).await;
    assert_eq!(
        start,
        Seen {
            method: "PATCH".into(),
            uri: uri.into(),
            content_type: JSON_PATCH.into(),
            body: json!([
                {"op": "test", "path": UID, "value": "u"},
                {"op": "test", "path": "/spec/runtimePatches", "value": [kueue_patch]},
                {"op": "test", "path": "/spec/suspend", "value": true},
                {"op": "add", "path": at, "value": [{"name": "node", "template": {"spec": {"template": {
                    "metadata": stamps("node"), "spec": {"nodeSelector": {"pool": "a100"}}}}}}]},
                {"op": "replace", "path": "/spec/suspend", "value": false},
            ]),
        }
    );
    let mut started = job.clone();
    let ops: json_patch::Patch = serde_json::from_value(start.body).expect("a JSON patch");
    json_patch::patch(&mut started, &ops).expect("applies");
    started["spec"]["suspend"] = json!(true);
    let restore = request_of(&TrainJob, &started, &wl, Step::Restore).await;
    assert_eq!(
        restore.body,
        json!([
            {"op": "test", "path": UID, "value": "u"},
            {"op": "test", "path": "/spec/runtimePatches", "value": started["spec"]["runtimePatches"]},
            {"op": "remove", "path": at},
        ])
    );
    let mut restored = started;
    let ops: json_patch::Patch = serde_json::from_value(restore.body).expect("a JSON patch");
    json_patch::patch(&mut restored, &ops).expect("applies");
    assert_eq!(restored, job, "byte for byte");
}

/// A JobSet that was deleted and the Workload the garbage collector left behind, named as
/// Kueue names it after the JobSet's uid; `finished` marks the Workload finished.
fn left_behind(finished: bool) -> (orphans::DeletedJob, Workload) {
    let job = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta(),
        "spec": {"suspend": true, "replicatedJobs": [
            {"name": "workers", "replicas": 1, "template": {"spec": {"template": {"spec": pod()}}}}]}
    });
    let mut wl = admitted(&JobSet, &job);
    let uid = job["metadata"]["uid"].as_str().expect("a uid").to_string();
    wl.metadata.name = Some(crate::integrations::workload_name("j", &uid, &JobSet.gvk()));
    wl.metadata.uid = Some("wl-uid".into());
    if finished {
        let status = wl.status.as_mut().expect("a status");
        status.conditions.push(
            serde_json::from_value(json!({"type": "Finished", "status": "True",
                "reason": "Succeeded", "message": "", "lastTransitionTime": "2026-11-24T00:00:00Z"}))
            .expect("a condition"),
        );
    }
    let deleted = orphans::DeletedJob {
        namespace: "ns".into(),
        name: "j".into(),
        uid,
    };
    (deleted, wl)
}

#[tokio::test]
async fn a_deleted_jobs_left_over_workload_is_deleted_on_its_uid_and_a_finished_one_is_not() {
    let (job, wl) = left_behind(false);
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let c = ctx(kube::Client::new(service, "default"), &wl);
    let server = tokio::spawn(serve_one(
        handle,
        json!({"kind": "Status", "status": "Success"}),
    ));
    orphans::collect(&c, &JobSet, &job).await;
    drop(c);
    let seen = server.await.expect("mock server");
    let name = wl.metadata.name.as_deref().expect("a name");
    assert_eq!(
        seen,
        Seen {
            method: "DELETE".into(),
            uri: format!("/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/{name}?"),
            content_type: "application/json".into(),
            body: json!({"preconditions": {"uid": "wl-uid"}}),
        }
    );

    // Finished: it holds nothing, and no request is made.
    let (job, wl) = left_behind(true);
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let c = ctx(kube::Client::new(service, "default"), &wl);
    orphans::collect(&c, &JobSet, &job).await;
    drop(c);
    assert!(
        handle.next_request().await.is_none(),
        "no request for a finished Workload"
    );
}
