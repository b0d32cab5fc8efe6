//! MPIJob (kubeflow.org/v2beta1, CRD from kubeflow/mpi-operator v0.8.0).

use serde_json::{Value, json};

use super::{KindCase, container, lifecycle, queue_labels};

fn mpijob(ns: &str, name: &str, class: &str) -> Value {
    let replicas = |n: i32, cpu: &str| {
        json!({"replicas": n, "restartPolicy": "Never", "template": {"spec": {
            "containers": [container("mpi", cpu)]}}})
    };
    json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"namespace": ns, "name": name, "labels": queue_labels(class)},
        "spec": {
            "slotsPerWorker": 1,
            "runLauncherAsWorker": true,
            "mpiReplicaSpecs": {"Launcher": replicas(1, "100m"), "Worker": replicas(3, "200m")}
        }
    })
}

/// The MPI operator's status: per replica type pod counts and a condition.
fn status(launcher: i64, workers: i64, condition: &str) -> Value {
    json!({"status": {
        "replicaStatuses": {"Launcher": {"active": launcher}, "Worker": {"active": workers}},
        "conditions": [{"type": condition, "status": "True", "reason": format!("MPIJob{condition}"),
            "message": format!("MPIJob is {condition}"),
            "lastTransitionTime": "2026-01-01T00:00:00Z", "lastUpdateTime": "2026-01-01T00:00:00Z"}]
    }})
}

#[tokio::test]
async fn an_mpijob_is_held_admitted_preempted_only_once_its_pods_stop_and_finished() {
    lifecycle(&KindCase {
        crd: "kubeflow.org_mpijobs.yaml",
        api: ("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
        framework: "kubeflow.org/mpijob",
        object: mpijob,
        pod_sets: &[("launcher", 1), ("worker", 3)],
        templates: |_| {
            vec![
                "/spec/mpiReplicaSpecs/Launcher/template".to_string(),
                "/spec/mpiReplicaSpecs/Worker/template".to_string(),
            ]
        },
        suspended: |o| o["spec"]["runPolicy"]["suspend"] == json!(true),
        running: status(1, 3, "Running"),
        stopped: status(0, 0, "Suspended"),
        finished: Some(status(0, 0, "Succeeded")),
    })
    .await;
}

/// Bad input around MPIJobs, with kuota's webhook and controller running (`batch/job`
/// enabled too):
/// - one the MPI operator would refuse to run (no workers) is stored suspended like any
///   queue-labelled MPIJob, but gets no Workload, so it never holds quota, and a Warning
///   `ErrWorkloadCompose` Event names the field;
/// - a Job owned by an admitted MPIJob (an MPI launcher) that carries the MPIJob's queue
///   label is left to its parent: never suspended, no Workload of its own;
/// - an admitted MPIJob whose operator never writes a status holds its quota only until
///   waitForPodsReady's timeout: it is evicted with `PodsReadyTimeout`, stopped, and the
///   quota goes back (no pod reported active).
#[tokio::test]
async fn bad_mpijobs_hold_no_quota_and_their_children_are_left_to_them() {
    use crate::support::{QueueFixture, controller_lock, unique_name};
    use crate::webhook::{Kuota, Registration};
    use k8s_openapi::api::batch::v1::Job;
    use kube::api::{Api, DynamicObject, PostParams};
    use kuota::controller::ControllerConfig;
    use kuota::engine::{EngineConfig, PodsReadyConfig};
    use kuota::policy::PolicySet;
    use std::time::Duration;

    let _only = controller_lock().await;
    let fx = QueueFixture::new("mpi-bad", "2").await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    super::install_crd(&client, "kubeflow.org_mpijobs.yaml").await;
    let mut webhook = Kuota::start(&client, PolicySet::default()).await;
    let run_label = unique_name("run");
    let registration =
        Registration::create(&client, webhook.addr, &webhook.ca_pem, &[&ns], &run_label).await;
    let (stop, task) = crate::controller::start_controller_with(
        &client,
        ControllerConfig {
            integrations: vec!["kubeflow.org/mpijob".into(), "batch/job".into()],
            engine: EngineConfig {
                pods_ready: Some(PodsReadyConfig {
                    timeout: 4_000,
                    recovery_timeout: Some(4_000),
                    block_admission: false,
                    backoff_limit_count: None,
                    backoff_base: 60_000,
                    backoff_max: 60_000,
                    requeue_by_creation: false,
                }),
                ..EngineConfig::default()
            },
            ..ControllerConfig::default()
        },
    );
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("kubeflow.org", "v2beta1", "MPIJob"),
        "mpijobs",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    let create = |name: &str, workers: i32| {
        let mut o = mpijob(&ns, name, "");
        o["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "lq"});
        o["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = json!(workers);
        serde_json::from_value::<DynamicObject>(o).expect("an MPIJob")
    };

    // The operator would refuse it: no Workload, an Event naming the field.
    let stored = api
        .create(&PostParams::default(), &create("no-workers", 0))
        .await
        .expect("created");
    assert_eq!(stored.data["spec"]["runPolicy"]["suspend"], true);
    let note =
        crate::bad_input::warning_about(&client, &ns, "no-workers", "ErrWorkloadCompose").await;
    assert!(
        note.contains("spec.mpiReplicaSpecs[Worker].replicas")
            && note.contains("must be greater than or equal to 1"),
        "{note}"
    );
    assert!(
        super::workload_of(&client, &ns, "MPIJob", "no-workers")
            .await
            .is_none(),
        "an MPIJob its operator refuses got a Workload"
    );

    // A valid one is admitted; its operator never writes a status.
    let parent = api
        .create(&PostParams::default(), &create("silent", 1))
        .await
        .expect("created");
    super::wait_workload(
        &client,
        &ns,
        "MPIJob",
        "silent",
        "admitted",
        super::is_admitted,
    )
    .await;
    // Its launcher Job, with the MPIJob's queue label: left to the MPIJob.
    let launcher: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "silent-launcher", "namespace": ns,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                "name": "silent", "uid": parent.metadata.uid, "controller": true,
                "blockOwnerDeletion": true}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [container("launcher", "100m")]}}}
    }))
    .expect("a Job");
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let created = jobs
        .create(&PostParams::default(), &launcher)
        .await
        .expect("the launcher Job");
    assert_ne!(
        created.spec.and_then(|s| s.suspend),
        Some(true),
        "the webhook suspended a managed MPIJob's child"
    );

    // waitForPodsReady: no Running condition ever, so evicted at the timeout; no pod
    // reported active, so the quota goes back.
    let evicted = super::wait_workload(&client, &ns, "MPIJob", "silent", "evicted", |wl| {
        crate::controller::condition(wl, "Evicted").is_some_and(|c| c.0 == "True")
            && !super::holds_quota(wl)
    })
    .await;
    assert_eq!(
        crate::controller::condition(&evicted, "Evicted").map(|c| c.1),
        Some("PodsReadyTimeout")
    );
    super::wait_object(&api, "silent", "suspended again", |o| {
        o["spec"]["runPolicy"]["suspend"] == json!(true)
    })
    .await;
    // The child never got a Workload, nor was suspended by the controller.
    assert!(
        super::workload_of(&client, &ns, "Job", "silent-launcher")
            .await
            .is_none(),
        "the MPIJob's launcher Job got a Workload of its own"
    );
    let launcher = jobs.get("silent-launcher").await.expect("the launcher Job");
    assert_ne!(launcher.spec.and_then(|s| s.suspend), Some(true));

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    registration.delete().await;
    webhook.stop().await;
    let _ = jobs
        .delete("silent-launcher", &kube::api::DeleteParams::background())
        .await;
    fx.teardown().await;
}
