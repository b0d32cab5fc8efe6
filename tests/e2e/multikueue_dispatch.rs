//! MultiKueue between real control planes: the e2e cluster is the manager, and two more
//! control planes (`worker_clusters`) are its workers, each running its own kuota. Every
//! kuota runs as its install's ServiceAccount; the manager reaches each worker as the
//! ServiceAccount `manifests/multikueue` makes there.
//!
//! The main story, in order: a job is dispatched to the only worker and its completion is
//! mirrored back; a second worker joins and takes the job the first has no room for; that
//! worker is stopped mid-run, and after `workerLostTimeout` the workload is requeued and
//! runs on the first; when the stopped worker comes back, its stale copies are removed.
//! Then a worker whose own admission policy refuses the job.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kuota::api::{AdmissionCheck, MultiKueueCluster, MultiKueueConfig, Workload};
use kuota::config::multikueue::MultiKueue;
use kuota::controller::ControllerConfig;
use serde_json::{Value, json};

use crate::controller::{finish_pods, start_controller_with, workload_of};
use crate::kinds::install_crd;
use crate::multikueue::active as connection;
use crate::rbac::{self, KUOTA_NAMESPACE};
use crate::support::{
    QueueFixture, controller_lock, create_cluster_queue, create_flavor, create_local_queue,
    ensure_crds, unique_name, wait_until,
};
use crate::worker_clusters::WorkerCluster;

const ORIGIN: &str = "e2e-manager";
const JOBSET_CRD: &str = "jobset.x-k8s.io_jobsets.yaml";
const MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";
/// How long a lost worker is waited for here (Kueue's default is 15 minutes).
const LOST_AFTER: Duration = Duration::from_secs(10);

/// A worker: its control plane, an admin client, its own kuota, and the kubeconfig the
/// manager reaches it with.
struct Worker {
    cluster: WorkerCluster,
    admin: Client,
    kuota: Option<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )>,
    access: String,
}

impl Worker {
    /// Starts control plane `n`, installs kuota's CRDs and RBAC (and JobSet's CRD with
    /// `jobsets`), the worker role, the test's namespace with a ClusterQueue of `cpu`, and
    /// runs kuota there.
    async fn start(n: u16, ns: &str, cpu: &str, jobsets: bool) -> Self {
        let cluster = WorkerCluster { n };
        let path = cluster.up().await;
        let admin = cluster.admin().await;
        ensure_crds(&admin).await;
        if jobsets {
            install_crd(&admin, JOBSET_CRD).await;
        } else {
            // A worker kept from an earlier run may have it.
            use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
            let crds = Api::<CustomResourceDefinition>::all(admin.clone());
            let _ = crds
                .delete("jobsets.jobset.x-k8s.io", &Default::default())
                .await;
            let gone = wait_until(Duration::from_secs(30), || async {
                crds.get_opt("jobsets.jobset.x-k8s.io")
                    .await
                    .ok()
                    .flatten()
                    .is_none()
            })
            .await;
            assert!(gone.is_some(), "worker {n} keeps JobSet's CRD");
        }
        rbac::apply(&admin, &rbac::kustomize_rbac()).await;
        let role = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("manifests/multikueue/worker.yaml"),
        )
        .expect("manifests/multikueue/worker.yaml");
        rbac::apply(&admin, &rbac::objects(&role)).await;
        crate::webhook::create_namespace(&admin, ns, &[]).await;
        let (rf, cq) = (unique_name("rf"), unique_name("cq"));
        create_flavor(&admin, &rf).await;
        create_cluster_queue(&admin, ns, &cq, &rf, cpu, json!({})).await;
        create_local_queue(&admin, ns, "lq", &cq).await;
        let token = rbac::token_from(&admin, KUOTA_NAMESPACE, "kuota-multikueue").await;
        let access = rbac::kubeconfig_with_token(&path, "kuota-multikueue", &token);
        let mut w = Worker {
            cluster,
            admin,
            kuota: None,
            access,
        };
        w.run_kuota().await;
        w
    }

    /// Runs the worker's kuota, as its install's controller ServiceAccount.
    async fn run_kuota(&mut self) {
        let token = rbac::token_from(&self.admin, KUOTA_NAMESPACE, "kuota-controller").await;
        let text = rbac::kubeconfig_with_token(&self.cluster.kubeconfig(), "kuota", &token);
        let (client, record) = rbac::recording_client(&text).await;
        crate::rbac::watch_controller(record);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ =
                kuota::controller::run(client, with_jobsets(ControllerConfig::default()), async {
                    let _ = stopped.await;
                })
                .await;
        });
        self.kuota = Some((stop, task));
    }

    async fn stop_kuota(&mut self) {
        if let Some((stop, task)) = self.kuota.take() {
            let _ = stop.send(());
            let _ = task.await;
        }
    }

    async fn workload(&self, ns: &str, name: &str) -> Option<Workload> {
        Api::<Workload>::namespaced(self.admin.clone(), ns)
            .get_opt(name)
            .await
            .ok()
            .flatten()
    }

    async fn job(&self, ns: &str, name: &str) -> Option<Job> {
        Api::<Job>::namespaced(self.admin.clone(), ns)
            .get_opt(name)
            .await
            .ok()
            .flatten()
    }
}

/// The manager's kuota: batch Jobs and JobSets, this test's origin and lost-worker timeout.
fn manager_config(metrics: &kuota::telemetry::Metrics) -> ControllerConfig {
    let settings = MultiKueue {
        origin: ORIGIN.into(),
        worker_lost_timeout: LOST_AFTER,
        ..MultiKueue::default()
    };
    with_jobsets(ControllerConfig {
        multikueue: settings,
        namespace: KUOTA_NAMESPACE.into(),
        metrics: metrics.clone(),
        ..ControllerConfig::default()
    })
}

/// `config` running batch Jobs and JobSets.
fn with_jobsets(config: ControllerConfig) -> ControllerConfig {
    ControllerConfig {
        integrations: vec!["batch/job".into(), "jobset.x-k8s.io/jobset".into()],
        ..config
    }
}

/// A manager JobSet of one pod: suspended, in queue `lq`, dispatched by MultiKueue.
fn dispatched_jobset(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"namespace": ns, "name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": true, "managedBy": MULTIKUEUE, "replicatedJobs": [{"name": "main",
            "replicas": 1, "template": {"spec": {"parallelism": 1, "completions": 1,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main",
                    "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}}}}]}
    })
}

fn jobsets(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet");
    Api::namespaced_with(client.clone(), ns, &kube::api::ApiResource::from_gvk(&gvk))
}

/// A manager job: suspended, in queue `lq`, dispatched by MultiKueue.
fn dispatched_job(ns: &str, name: &str, cpu: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": true,
            "managedBy": MULTIKUEUE,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": cpu}}}]}}
        }
    }))
    .expect("a Job")
}

/// The manager's MultiKueueCluster `name`, reaching its worker with `kubeconfig`.
async fn add_cluster(client: &Client, name: &str, kubeconfig: &str) {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(KUOTA_NAMESPACE.into()),
            ..Default::default()
        },
        data: Some(
            [(
                "kubeconfig".to_string(),
                ByteString(kubeconfig.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), KUOTA_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the kubeconfig Secret");
    let c: MultiKueueCluster = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": name}}}
    }))
    .expect("a cluster");
    Api::<MultiKueueCluster>::all(client.clone())
        .create(&PostParams::default(), &c)
        .await
        .expect("create MultiKueueCluster");
}

/// The manager's namespace and ClusterQueue of 8 cpu behind check `check`, with kuota's
/// RBAC installed and JobSet's CRD served.
async fn manager_fixture(prefix: &str, check: &str) -> QueueFixture {
    let fx = QueueFixture::with_queue_spec(
        prefix,
        "8",
        json!({"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}),
    )
    .await;
    rbac::installed().await;
    install_crd(&fx.client, JOBSET_CRD).await;
    fx
}

/// The manager's MultiKueueConfig `config` over `clusters`, and AdmissionCheck `check` of it.
async fn create_dispatch_check(client: &Client, check: &str, config: &str, clusters: &[&str]) {
    let conf: MultiKueueConfig = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
        "metadata": {"name": config}, "spec": {"clusters": clusters}
    }))
    .expect("a config");
    Api::<MultiKueueConfig>::all(client.clone())
        .create(&PostParams::default(), &conf)
        .await
        .expect("create MultiKueueConfig");
    let ac: AdmissionCheck = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": check},
        "spec": {"controllerName": MULTIKUEUE,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config}}
    }))
    .expect("a check");
    Api::<AdmissionCheck>::all(client.clone())
        .create(&PostParams::default(), &ac)
        .await
        .expect("create AdmissionCheck");
}

async fn wait_check_active(client: &Client, check: &str) {
    let checks = Api::<AdmissionCheck>::all(client.clone());
    let active = wait_until(Duration::from_secs(60), || async {
        checks.get(check).await.ok().is_some_and(|ac| {
            ac.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Active" && c.status == "True" && c.reason == "Active")
            })
        })
    })
    .await;
    assert!(
        active.is_some(),
        "the MultiKueue check never became Active: {:#?}",
        checks.get(check).await.map(|a| a.status)
    );
}

/// Deletes what a test made at cluster scope in the manager: the check, the config, and
/// each cluster with its Secret.
async fn remove_dispatch_check(client: &Client, check: &str, config: &str, clusters: &[&str]) {
    Api::<AdmissionCheck>::all(client.clone())
        .delete(check, &Default::default())
        .await
        .expect("delete the check");
    Api::<MultiKueueConfig>::all(client.clone())
        .delete(config, &Default::default())
        .await
        .expect("delete the config");
    for c in clusters {
        Api::<MultiKueueCluster>::all(client.clone())
            .delete(c, &Default::default())
            .await
            .expect("delete a cluster");
        Api::<Secret>::namespaced(client.clone(), KUOTA_NAMESPACE)
            .delete(c, &Default::default())
            .await
            .expect("delete a Secret");
    }
}

/// Waits up to `secs` for `check` on the manager's Workload of Job `job`.
async fn wait_manager(
    client: &Client,
    ns: &str,
    job: &str,
    secs: u64,
    what: &str,
    check: impl Fn(&Workload) -> bool,
) -> Workload {
    let seen = wait_until(Duration::from_secs(secs), || async {
        workload_of(client, ns, job)
            .await
            .is_some_and(|w| check(&w))
    })
    .await;
    let last = workload_of(client, ns, job).await;
    assert!(
        seen.is_some(),
        "the manager's Workload of Job {ns}/{job} never became {what}; last seen: {:#?}",
        last.as_ref().map(|w| &w.status)
    );
    last.expect("seen")
}

/// As [`wait_manager`], for a job of another kind.
async fn wait_manager_kind(
    client: &Client,
    ns: &str,
    kind: &str,
    job: &str,
    secs: u64,
    what: &str,
    check: impl Fn(&Workload) -> bool,
) -> Workload {
    let find = || async {
        let list = Api::<Workload>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .ok()?;
        list.items.into_iter().find(|wl| {
            wl.owner_references()
                .iter()
                .any(|o| o.kind == kind && o.name == job)
        })
    };
    let seen = wait_until(Duration::from_secs(secs), || async {
        find().await.is_some_and(|w| check(&w))
    })
    .await;
    let last = find().await;
    assert!(
        seen.is_some(),
        "the manager's Workload of {kind} {ns}/{job} never became {what}; last seen: {:#?}",
        last.as_ref().map(|w| &w.status)
    );
    last.expect("seen")
}

fn check_state(wl: &Workload, check: &str) -> Option<(String, String)> {
    let s = wl.status.as_ref()?;
    let c = s.admission_checks.iter().find(|c| c.name == check)?;
    Some((c.state.clone(), c.message.clone()))
}

fn cluster_name(wl: &Workload) -> Option<&str> {
    wl.status.as_ref()?.cluster_name.as_deref()
}

fn is_true(wl: &Workload, type_: &str) -> bool {
    wl.status
        .as_ref()
        .is_some_and(|s| s.is_condition_true(type_))
}

/// Waits for Job `job`'s copy in `w`, then plays the kubelet: its pods succeed.
async fn run_to_completion(w: &Worker, ns: &str, job: &str) {
    let started = wait_until(Duration::from_secs(60), || async {
        let pods = finish_pods(&w.admin, ns, job).await;
        pods > 0
    })
    .await;
    assert!(
        started.is_some(),
        "Job {ns}/{job} never got a pod in worker {}: {:#?}",
        w.cluster.n,
        w.job(ns, job)
            .await
            .map(|j| (j.spec.and_then(|s| s.suspend), j.status))
    );
}

#[tokio::test]
async fn jobs_are_dispatched_mirrored_moved_off_a_lost_worker_and_never_run_twice() {
    let _only = controller_lock().await;
    let check = unique_name("mk");
    let fx = manager_fixture("mk", &check).await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    // Worker 2 starts without JobSet's CRD: it cannot take this manager's JobSets.
    let (mut w1, mut w2) = tokio::join!(
        Worker::start(1, &ns, "1", true),
        Worker::start(2, &ns, "1", false)
    );
    let (c1, c2, config) = (unique_name("w1"), unique_name("w2"), unique_name("mkconf"));
    add_cluster(&client, &c1, &w1.access).await;
    create_dispatch_check(&client, &check, &config, &[&c1]).await;
    let configs = Api::<MultiKueueConfig>::all(client.clone());
    let metrics = kuota::telemetry::Metrics::new();
    let (stop, task) = start_controller_with(&client, manager_config(&metrics));
    let checks = Api::<AdmissionCheck>::all(client.clone());
    wait_check_active(&client, &check).await;
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);

    // 1. Dispatched to the only worker, run there, its completion mirrored back.
    jobs.create(
        &PostParams::default(),
        &dispatched_job(&ns, "first", "600m"),
    )
    .await
    .expect("create Job first");
    let wl = wait_manager(&client, &ns, "first", 60, "admitted on worker 1", |wl| {
        cluster_name(wl) == Some(c1.as_str()) && is_true(wl, "Admitted")
    })
    .await;
    assert_eq!(
        check_state(&wl, &check),
        Some((
            "Ready".into(),
            format!("The workload was admitted on {c1:?}")
        ))
    );
    let copy = w1
        .workload(&ns, &wl.name_any())
        .await
        .expect("a copy in worker 1");
    assert_eq!(
        copy.labels()
            .get("kueue.x-k8s.io/multikueue-origin")
            .map(String::as_str),
        Some(ORIGIN)
    );
    assert_eq!(copy.spec, wl.spec, "the copy's spec is the manager's");
    run_to_completion(&w1, &ns, "first").await;
    let wl = wait_manager(&client, &ns, "first", 60, "finished", |wl| {
        is_true(wl, "Finished")
    })
    .await;
    assert_eq!(
        wl.status
            .as_ref()
            .and_then(|s| s.condition("Finished"))
            .map(|c| c.reason.as_str()),
        Some("Succeeded")
    );
    let mirrored = wait_until(Duration::from_secs(30), || async {
        jobs.get("first")
            .await
            .ok()
            .and_then(|j| j.status)
            .is_some_and(|s| s.succeeded == Some(1))
    })
    .await;
    assert!(
        mirrored.is_some(),
        "the manager's Job never showed the worker's success: {:#?}",
        jobs.get("first").await.map(|j| j.status)
    );
    let gone = wait_until(Duration::from_secs(30), || async {
        w1.workload(&ns, &wl.name_any()).await.is_none() && w1.job(&ns, "first").await.is_none()
    })
    .await;
    assert!(gone.is_some(), "the finished copies stayed in worker 1");
    let local_pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list pods");
    assert!(
        local_pods.items.is_empty(),
        "a dispatched job made pods in the manager"
    );

    // A JobSet goes the same way; the test plays JobSet's operator in the worker.
    jobsets(&client, &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(dispatched_jobset(&ns, "js")).expect("a JobSet"),
        )
        .await
        .expect("create JobSet js");
    let js_wl = wait_manager_kind(
        &client,
        &ns,
        "JobSet",
        "js",
        60,
        "admitted on worker 1",
        |wl| cluster_name(wl) == Some(c1.as_str()) && is_true(wl, "Admitted"),
    )
    .await;
    let remote_js = jobsets(&w1.admin, &ns);
    let started = wait_until(Duration::from_secs(60), || async {
        remote_js
            .get("js")
            .await
            .ok()
            .is_some_and(|j| j.data["spec"]["suspend"] == json!(false))
    })
    .await;
    assert!(started.is_some(), "JobSet js never started in worker 1");
    let done = json!({"status": {"terminalState": "Completed", "conditions": [{
        "type": "Completed", "status": "True", "reason": "AllJobsCompleted",
        "message": "jobset completed successfully", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    remote_js
        .patch_status("js", &PatchParams::default(), &Patch::Merge(&done))
        .await
        .expect("complete JobSet js in worker 1");
    let wl = wait_manager_kind(&client, &ns, "JobSet", "js", 60, "finished", |wl| {
        is_true(wl, "Finished")
    })
    .await;
    assert_eq!(wl.name_any(), js_wl.name_any());
    let local_js = jobsets(&client, &ns).get("js").await.expect("JobSet js");
    assert_eq!(
        local_js.data["status"]["terminalState"], "Completed",
        "the JobSet's status is mirrored"
    );

    // 2. A second worker joins and takes what the first has no room for. It lacks
    // JobSet's CRD at first: not connected, with Kueue's reason, until it has it.
    jobs.create(
        &PostParams::default(),
        &dispatched_job(&ns, "blocker", "600m"),
    )
    .await
    .expect("create Job blocker");
    wait_manager(&client, &ns, "blocker", 60, "admitted on worker 1", |wl| {
        cluster_name(wl) == Some(c1.as_str()) && is_true(wl, "Admitted")
    })
    .await;
    add_cluster(&client, &c2, &w2.access).await;
    let lacking = wait_until(Duration::from_secs(60), || async {
        connection(&client, &c2).await.is_some_and(|(s, r, m)| {
            s == "False"
                && r == "ClientConnectionFailed"
                && m == "no matches for kind \"JobSet\" in version \"jobset.x-k8s.io/v1alpha2\""
        })
    })
    .await;
    assert!(
        lacking.is_some(),
        "worker 2 without JobSet's CRD: {:?}",
        connection(&client, &c2).await
    );
    install_crd(&w2.admin, JOBSET_CRD).await;
    let connected = wait_until(Duration::from_secs(60), || async {
        connection(&client, &c2)
            .await
            .is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    assert!(
        connected.is_some(),
        "worker 2 never connected: {:?}",
        connection(&client, &c2).await
    );
    configs
        .patch(
            &config,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusters": [c1, c2]}})),
        )
        .await
        .expect("add worker 2 to the config");
    jobs.create(
        &PostParams::default(),
        &dispatched_job(&ns, "second", "600m"),
    )
    .await
    .expect("create Job second");
    let second = wait_manager(&client, &ns, "second", 90, "admitted on worker 2", |wl| {
        cluster_name(wl) == Some(c2.as_str()) && is_true(wl, "Admitted")
    })
    .await;
    let second_name = second.name_any();
    let only_w2 = wait_until(Duration::from_secs(30), || async {
        w1.workload(&ns, &second_name).await.is_none()
    })
    .await;
    assert!(
        only_w2.is_some(),
        "the copy worker 1 could not admit was not removed"
    );
    let started = wait_until(Duration::from_secs(60), || async {
        w2.job(&ns, "second")
            .await
            .and_then(|j| j.spec)
            .is_some_and(|s| s.suspend == Some(false))
    })
    .await;
    assert!(started.is_some(), "Job second never started in worker 2");
    // The manager restarts: it finds what it made from the API, and makes nothing twice.
    let _ = stop.send(());
    let _ = task.await;
    let (stop, task) = start_controller_with(&client, manager_config(&metrics));
    let settled = wait_until(Duration::from_secs(30), || async {
        let active = checks.get(&check).await.ok().is_some_and(|ac| {
            ac.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Active" && c.status == "True")
            })
        });
        active && workload_of(&client, &ns, "second").await.is_some()
    })
    .await;
    assert!(settled.is_some(), "the restarted manager never settled");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = workload_of(&client, &ns, "second")
        .await
        .expect("Workload of second");
    assert_eq!(
        cluster_name(&after),
        Some(c2.as_str()),
        "{:#?}",
        after.status
    );
    assert!(is_true(&after, "Admitted"), "{:#?}", after.status);
    assert_eq!(after.metadata.uid, second.metadata.uid);
    assert!(
        w1.workload(&ns, &second_name).await.is_none() && w1.job(&ns, "second").await.is_none(),
        "after the manager's restart, worker 1 got a copy of what runs in worker 2"
    );
    assert!(
        w2.job(&ns, "second").await.is_some(),
        "the running copy was removed"
    );
    run_to_completion(&w1, &ns, "blocker").await;
    wait_manager(&client, &ns, "blocker", 60, "finished", |wl| {
        is_true(wl, "Finished")
    })
    .await;

    // 3. Worker 2 stops mid-run: after workerLostTimeout the workload is requeued and
    // runs on worker 1.
    w2.stop_kuota().await;
    w2.cluster.down().await;
    let moved = wait_manager(&client, &ns, "second", 120, "admitted on worker 1", |wl| {
        cluster_name(wl) == Some(c1.as_str()) && is_true(wl, "Admitted")
    })
    .await;
    let requeued = moved
        .status
        .as_ref()
        .and_then(|s| s.condition("Requeued"))
        .map(|c| c.reason.clone());
    assert_eq!(
        requeued.as_deref(),
        Some("AdmissionCheck"),
        "{:#?}",
        moved.status
    );
    run_to_completion(&w1, &ns, "second").await;
    wait_manager(&client, &ns, "second", 60, "finished", |wl| {
        is_true(wl, "Finished")
    })
    .await;

    // 4. Worker 2 comes back: its stale copies go, so the job never runs twice.
    w2.cluster.up().await;
    w2.run_kuota().await;
    let cleaned = wait_until(Duration::from_secs(120), || async {
        w2.workload(&ns, &second_name).await.is_none() && w2.job(&ns, "second").await.is_none()
    })
    .await;
    assert!(
        cleaned.is_some(),
        "worker 2 kept its stale copies after it came back: {:#?}",
        w2.workload(&ns, &second_name).await.map(|w| w.status)
    );

    // Kueue's counters: every copy made, every admission in a worker.
    let text = metrics.encode();
    let count = |name: &str, cluster: &str| {
        let prefix = format!("{name}{{cluster_queue=\"{}\",cluster=\"{cluster}\"", fx.cq);
        text.lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let dispatched = "multikueue_workloads_dispatched_total";
    let admitted = "multikueue_workloads_admitted_total";
    // first, js, blocker, second (then again after the loss), each copied to worker 1.
    assert!(count(dispatched, &c1) >= 5.0, "{text}");
    assert!(count(dispatched, &c2) >= 1.0, "{text}");
    assert_eq!(count(admitted, &c1), 4.0, "{text}");
    assert!(count(admitted, &c2) >= 1.0, "{text}");
    let _ = stop.send(());
    let _ = task.await;
    w1.stop_kuota().await;
    w2.stop_kuota().await;
    remove_dispatch_check(&client, &check, &config, &[&c1, &c2]).await;
    fx.teardown().await;
}

/// Makes worker `w` refuse batch Jobs in namespace `ns`, as a cluster's own policy may,
/// with a ValidatingAdmissionPolicy and its binding, both named `name`; waits until the
/// API server enforces it.
async fn refuse_jobs(w: &Worker, ns: &str, name: &str, message: &str) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["jobs"]}]},
            "validations": [{"expression": "false", "message": message}]}
    }))
    .expect("a policy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": ns}}}}
    }))
    .expect("a binding");
    Api::<ValidatingAdmissionPolicy>::all(w.admin.clone())
        .create(&PostParams::default(), &policy)
        .await
        .expect("create the ValidatingAdmissionPolicy");
    Api::<ValidatingAdmissionPolicyBinding>::all(w.admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("create the ValidatingAdmissionPolicyBinding");
    let jobs = Api::<Job>::namespaced(w.admin.clone(), ns);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let probe = dispatched_job(ns, "probe", "100m");
    let enforced = wait_until(Duration::from_secs(30), || async {
        jobs.create(&dry_run, &probe).await.is_err()
    })
    .await;
    assert!(
        enforced.is_some(),
        "worker {} never enforced the policy",
        w.cluster.n
    );
}

/// Warning Events of reason `MultiKueue` on the manager's Workload `name`.
async fn multikueue_warnings(client: &Client, ns: &str, name: &str) -> Vec<String> {
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), ns);
    let listed = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("list Events");
    listed
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("MultiKueue") && e.type_.as_deref() == Some("Warning")
        })
        .filter_map(|e| e.message)
        .collect()
}

/// A worker whose own admission refuses the job: its Workload copy is admitted there, but
/// the job cannot be made. As in Kueue, the manager's check stays Pending (it turns Ready
/// only once the job exists in the worker), so nothing is admitted at home; kuota says why
/// on the manager's Workload, with the worker's answer, and tries again. Once the worker
/// takes jobs, the job is created, admitted and run there.
#[tokio::test]
async fn a_job_its_worker_refuses_stays_pending_with_the_workers_answer_until_it_is_taken() {
    let _only = controller_lock().await;
    let check = unique_name("mkref");
    let fx = manager_fixture("mkref", &check).await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    let mut w1 = Worker::start(1, &ns, "1", true).await;
    let policy = unique_name("no-jobs");
    let refusal = format!("namespace {ns} takes no jobs in this cluster");
    refuse_jobs(&w1, &ns, &policy, &refusal).await;
    let (c1, config) = (unique_name("w1"), unique_name("mkconf"));
    add_cluster(&client, &c1, &w1.access).await;
    create_dispatch_check(&client, &check, &config, &[&c1]).await;
    let metrics = kuota::telemetry::Metrics::new();
    let (stop, task) = start_controller_with(&client, manager_config(&metrics));
    wait_check_active(&client, &check).await;
    Api::<Job>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &dispatched_job(&ns, "refused", "500m"),
        )
        .await
        .expect("create Job refused");
    let wl = wait_manager(&client, &ns, "refused", 60, "reserved", |wl| {
        is_true(wl, "QuotaReserved")
    })
    .await;
    let name = wl.name_any();
    let told = wait_until(Duration::from_secs(60), || async {
        multikueue_warnings(&client, &ns, &name)
            .await
            .iter()
            .any(|m| {
                m.starts_with(&format!(
                    "The job could not be created in worker cluster {c1:?}"
                )) && m.contains(&refusal)
            })
    })
    .await;
    assert!(
        told.is_some(),
        "no Warning with the worker's answer: {:?}",
        multikueue_warnings(&client, &ns, &name).await
    );
    let wl = workload_of(&client, &ns, "refused")
        .await
        .expect("the Workload");
    assert_eq!(
        check_state(&wl, &check).map(|s| s.0),
        Some("Pending".into()),
        "{:#?}",
        wl.status
    );
    assert!(!is_true(&wl, "Admitted"), "{:#?}", wl.status);
    assert_eq!(cluster_name(&wl), None);
    assert!(w1.job(&ns, "refused").await.is_none());

    // The worker takes jobs again: the next try creates it, and it runs there.
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
    Api::<ValidatingAdmissionPolicyBinding>::all(w1.admin.clone())
        .delete(&policy, &Default::default())
        .await
        .expect("delete the binding");
    wait_manager(&client, &ns, "refused", 90, "admitted on worker 1", |wl| {
        cluster_name(wl) == Some(c1.as_str()) && is_true(wl, "Admitted")
    })
    .await;
    run_to_completion(&w1, &ns, "refused").await;
    wait_manager(&client, &ns, "refused", 60, "finished", |wl| {
        is_true(wl, "Finished")
    })
    .await;
    let _ = stop.send(());
    let _ = task.await;
    w1.stop_kuota().await;
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
    let _ = Api::<ValidatingAdmissionPolicy>::all(w1.admin.clone())
        .delete(&policy, &Default::default())
        .await;
    remove_dispatch_check(&client, &check, &config, &[&c1]).await;
    fx.teardown().await;
}
