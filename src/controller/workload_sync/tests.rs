//! The pure step planner: what a job needs next, given its state and its Workload.

use serde_json::json;

use super::*;
use crate::integrations::batch_job::BatchJob;

fn workload(status: serde_json::Value) -> Workload {
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-a-1b2c3", "namespace": "team"},
        "spec": {"queueName": "lq", "podSets": []},
        "status": status,
    }))
    .expect("workload")
}

fn cond(type_: &str, status: &str) -> serde_json::Value {
    json!({"type": type_, "status": status, "reason": "R", "message": "",
           "lastTransitionTime": "2026-11-24T00:00:00Z"})
}

/// An admitted Workload with `Evicted=True`.
fn evicted() -> Workload {
    let mut status = admitted();
    status["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(cond("Evicted", "True"));
    workload(status)
}

fn admitted() -> serde_json::Value {
    json!({"admission": {"clusterQueue": "cq", "podSetAssignments": []},
           "conditions": [cond("QuotaReserved", "True"), cond("Admitted", "True")]})
}

#[test]
fn a_job_without_a_workload_gets_one_unless_it_already_finished() {
    let job = JobState {
        suspended: true,
        ..JobState::default()
    };
    assert_eq!(plan(&job, None), Step::CreateWorkload);
    let done = JobState {
        finished: Some(Outcome::success("done")),
        ..job
    };
    assert_eq!(plan(&done, None), Step::Nothing);
}

#[test]
fn an_admitted_suspended_job_starts_and_a_pending_running_one_stops() {
    let suspended = JobState {
        suspended: true,
        ..JobState::default()
    };
    assert_eq!(plan(&suspended, Some(&workload(admitted()))), Step::Start);
    let running = JobState::default();
    assert_eq!(plan(&running, Some(&workload(admitted()))), Step::Nothing);
    assert_eq!(plan(&running, Some(&workload(json!({})))), Step::Stop);
}

#[test]
fn a_finished_job_finishes_its_workload_once() {
    let job = JobState {
        finished: Some(Outcome::success("Job finished successfully")),
        ..JobState::default()
    };
    assert_eq!(
        plan(&job, Some(&workload(admitted()))),
        Step::Finish {
            reason: REASON_SUCCEEDED,
            message: "Job finished successfully".into()
        }
    );
    let finished = workload(json!({"conditions": [cond("Finished", "True")]}));
    assert_eq!(plan(&job, Some(&finished)), Step::Nothing);
}

#[test]
fn an_evicted_job_is_stopped_then_requeued_once_its_pods_are_gone() {
    let evicted = evicted();
    assert_eq!(plan(&JobState::default(), Some(&evicted)), Step::Stop);
    let stopping = JobState {
        suspended: true,
        active: true,
        ..JobState::default()
    };
    assert_eq!(plan(&stopping, Some(&evicted)), Step::Nothing);
    let stopped = JobState {
        suspended: true,
        ..JobState::default()
    };
    assert_eq!(plan(&stopped, Some(&evicted)), Step::Requeue);
}

/// The cluster benchmark's stall: a preempted Job whose pod had already succeeded could
/// not have its template restored (Kubernetes refuses template changes on a Job that
/// reports active pods), and its quota waited on that restore for ever. The quota now goes
/// back once the pods are gone; the template is restored after, when it can be.
#[test]
fn an_evicted_job_gives_its_quota_back_before_its_template_is_restored() {
    let evicted = evicted();
    let stamped = JobState {
        suspended: true,
        needs_restore: true,
        ..JobState::default()
    };
    assert_eq!(plan(&stamped, Some(&evicted)), Step::Requeue);
    let requeued = workload(json!({"conditions": [cond("Evicted", "True")]}));
    assert_eq!(plan(&stamped, Some(&requeued)), Step::Restore);
    let terminating = JobState {
        active: true,
        ..stamped
    };
    assert_eq!(plan(&terminating, Some(&evicted)), Step::Restore);
    // Not while the kind refuses it (a batch Job still counting active pods).
    let locked = JobState {
        templates_locked: true,
        ..terminating
    };
    assert_eq!(plan(&locked, Some(&evicted)), Step::Nothing);
    assert_eq!(plan(&locked, Some(&requeued)), Step::Nothing);
}

/// A Job whose pods reached their completions has `SuccessCriteriaMet` before
/// `Complete`. Preempted in that window it must not be suspended (the Job controller
/// would never complete it, its template could not be restored and its quota would stay
/// held); one suspended anyway is finished with its outcome.
#[test]
fn a_job_whose_outcome_is_decided_is_not_stopped_and_finishes_even_if_suspended() {
    let condition = |t: &str| json!({"type": t, "status": "True", "message": "Reached expected number of succeeded pods"});
    let job = |suspend: bool, conds: Vec<serde_json::Value>| json!({"spec": {"suspend": suspend}, "status": {"conditions": conds, "succeeded": 1}});
    let evicted = evicted();

    let state = |v: serde_json::Value| {
        let view = JobObject::from_value(&v).expect("a job");
        job_state(&BatchJob, &view)
    };
    let running = state(job(false, vec![condition("SuccessCriteriaMet")]));
    assert!(
        running.finishing && running.finished.is_none(),
        "{running:?}"
    );
    assert_eq!(plan(&running, Some(&evicted)), Step::Nothing);

    let suspended = state(job(true, vec![condition("SuccessCriteriaMet")]));
    assert_eq!(
        plan(&suspended, Some(&evicted)),
        Step::Finish {
            reason: REASON_SUCCEEDED,
            message: "Reached expected number of succeeded pods".into()
        }
    );
    let failing = state(job(true, vec![condition("FailureTarget")]));
    assert!(
        matches!(plan(&failing, Some(&evicted)), Step::Finish { reason, .. } if reason == REASON_FAILED)
    );

    // Once its Workload is finished it is resumed, so the Job controller completes it
    // (a suspended Job never gets `Complete`: the cluster benchmark left 98 of 3,000 so).
    let mut finished = admitted();
    finished["conditions"]
        .as_array_mut()
        .expect("conditions")
        .extend([cond("Evicted", "True"), cond("Finished", "True")]);
    assert_eq!(
        plan(&suspended, Some(&workload(finished.clone()))),
        Step::Resume
    );
    let complete = state(job(
        true,
        vec![condition("SuccessCriteriaMet"), condition("Complete")],
    ));
    assert_eq!(plan(&complete, Some(&workload(finished))), Step::Nothing);

    // Without the condition an evicted running Job is stopped as before.
    let plain = state(job(false, vec![]));
    assert_eq!(plan(&plain, Some(&evicted)), Step::Stop);
}

/// The bug this interface fixes: a preempted JobSet, PyTorchJob or RayCluster whose
/// operator still reports it running keeps its quota; it goes back once the operator
/// reports nothing running, read each kind's way.
#[test]
fn a_stopped_job_keeps_its_quota_while_its_operator_reports_it_running() {
    use crate::integrations::{
        jobset::JobSet, kubeflow::PyTorchJob, mpijob::MpiJob, ray::RayCluster, ray::RayJob,
    };
    let evicted = evicted();
    let cases: [(&dyn JobIntegration, serde_json::Value, serde_json::Value); 5] = [
        (
            &JobSet,
            json!({"spec": {"suspend": true}, "status": {"replicatedJobsStatus": [
                {"name": "w", "active": 2, "ready": 0, "succeeded": 0}]}}),
            json!({"spec": {"suspend": true}, "status": {"replicatedJobsStatus": [
                {"name": "w", "active": 0, "ready": 0, "succeeded": 0}]}}),
        ),
        (
            &PyTorchJob,
            json!({"spec": {"runPolicy": {"suspend": true}}, "status": {"replicaStatuses": {"Worker": {"active": 1}}}}),
            json!({"spec": {"runPolicy": {"suspend": true}}, "status": {"replicaStatuses": {"Worker": {}}}}),
        ),
        (
            &MpiJob,
            json!({"spec": {"runPolicy": {"suspend": true}}, "status": {"replicaStatuses": {"Launcher": {"active": 0}, "Worker": {"active": 2}}}}),
            json!({"spec": {"runPolicy": {"suspend": true}}, "status": {"replicaStatuses": {"Launcher": {"active": 0}, "Worker": {"active": 0}}}}),
        ),
        (
            &RayCluster,
            json!({"spec": {"suspend": true}, "status": {"state": "ready"}}),
            json!({"spec": {"suspend": true}, "status": {"state": "suspended"}}),
        ),
        (
            &RayJob,
            json!({"spec": {"suspend": true}, "status": {"jobDeploymentStatus": "Suspending"}}),
            json!({"spec": {"suspend": true}, "status": {"jobDeploymentStatus": "Suspended"}}),
        ),
    ];
    for (integration, running, gone) in cases {
        let kind = integration.kind();
        let state = |v: &serde_json::Value| {
            let view = JobObject::from_value(v).expect("a job");
            job_state(integration, &view)
        };
        assert_eq!(
            plan(&state(&running), Some(&evicted)),
            Step::Nothing,
            "{kind}"
        );
        assert_eq!(plan(&state(&gone), Some(&evicted)), Step::Requeue, "{kind}");
    }
}

/// A stopped batch Job clears its `startTime` (a status write) before anything else.
#[test]
fn a_stopped_batch_job_resets_its_start_time_first() {
    let v = json!({"spec": {"suspend": true}, "status": {"startTime": "2026-11-24T00:00:00Z"}});
    let view = JobObject::from_value(&v).expect("a job");
    assert_eq!(
        plan(&job_state(&BatchJob, &view), Some(&evicted())),
        Step::ResetStatus(json!({"status": {"startTime": null}}))
    );
}

/// A new Workload's priority comes from the watched class without a request; a class
/// the store does not hold yet (created moments ago) is read from the API server.
#[tokio::test]
async fn a_watched_priority_class_is_read_from_the_store_and_an_unseen_one_from_the_api() {
    use http::{Request, Response};
    use kube::client::Body;
    use kube::runtime::watcher;

    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let (stores, mut writers) = super::super::watch::stores();
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 1000,
    }))
    .expect("class");
    writers
        .priority_classes
        .apply_watcher_event(&watcher::Event::Apply(class));
    let (engine, _rx) = tokio::sync::mpsc::channel(1);
    let ctx = Ctx {
        stores,
        writer: Arc::new(Writer::new(kube::Client::new(service, "default"), 1, 1)),
        recorder: Recorder::disabled(),
        engine,
        manage_without_queue_name: false,
        wait_for_pods_ready: false,
        namespaces: crate::controller::managed_namespaces::NamespaceCheck::new(Default::default()),
        created: created_cache(),
    };
    let with_class = |name: &str| -> Workload {
        let mut wl = workload(json!({}));
        wl.spec.priority_class_ref = Some(crate::api::PriorityClassRef {
            group: "scheduling.k8s.io".into(),
            kind: "PriorityClass".into(),
            name: name.into(),
        });
        wl
    };
    let watched = class_priority(&ctx, &with_class("high"), "team/a").await;
    assert_eq!(watched.expect("from the store"), Some(1000));

    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.expect("a read");
        let path = req.uri().path().to_string();
        let body = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": "fresh"}, "value": 7});
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&body).expect("json")))
                .expect("response"),
        );
        assert!(
            handle.next_request().await.is_none(),
            "one read, nothing else"
        );
        path
    });
    let unseen = class_priority(&ctx, &with_class("fresh"), "team/b").await;
    assert_eq!(unseen.expect("from the API server"), Some(7));
    drop(ctx);
    assert_eq!(
        server.await.expect("mock server"),
        "/apis/scheduling.k8s.io/v1/priorityclasses/fresh"
    );
}

#[test]
fn a_failing_job_is_retried_ever_more_slowly_until_it_reconciles() {
    assert_eq!(retry_delay(1), Duration::from_millis(800));
    assert_eq!(retry_delay(2), Duration::from_millis(1600));
    assert_eq!(retry_delay(4), Duration::from_millis(6400));
    assert_eq!(
        retry_delay(6),
        Duration::from_secs(25) + Duration::from_millis(600)
    );
    assert_eq!(retry_delay(7), Duration::from_secs(30));
    assert_eq!(retry_delay(u32::MAX), Duration::from_secs(30));
    let retries = RetryBackoff::default();
    let job = |name: &str| ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some("team".to_string()),
        ..ObjectMeta::default()
    };
    assert_eq!(retries.failed(&job("a")), Duration::from_millis(800));
    assert_eq!(retries.failed(&job("a")), Duration::from_millis(1600));
    // Another job keeps its own count.
    assert_eq!(retries.failed(&job("b")), Duration::from_millis(800));
    retries.succeeded(&job("a"));
    assert_eq!(retries.failed(&job("a")), Duration::from_millis(800));
}

/// Each kind's finished status, read its operator's way, finishes its Workload with
/// Kueue's reason and the operator's message; a RayCluster never finishes.
#[test]
fn each_kind_finishes_its_workload_from_its_operators_status() {
    use crate::integrations::{
        jobset::JobSet, kubeflow::PyTorchJob, mpijob::MpiJob, ray::RayCluster, ray::RayJob,
    };
    let admitted = workload(admitted());
    let cond = |t: &str, m: &str| json!({"type": t, "status": "True", "message": m});
    /// A kind, its operator's status, and the Finished reason and message expected.
    type Case<'a> = (
        &'a dyn JobIntegration,
        serde_json::Value,
        Option<(&'a str, &'a str)>,
    );
    let cases: [Case; 9] = [
        (
            &BatchJob,
            json!({"conditions": [cond("Complete", "done")]}),
            Some((REASON_SUCCEEDED, "done")),
        ),
        (
            &BatchJob,
            json!({"conditions": [cond("Failed", "BackoffLimitExceeded")]}),
            Some((REASON_FAILED, "BackoffLimitExceeded")),
        ),
        (
            &JobSet,
            json!({"conditions": [cond("Completed", "jobset completed")]}),
            Some((REASON_SUCCEEDED, "jobset completed")),
        ),
        (
            &PyTorchJob,
            json!({"conditions": [cond("Running", ""), cond("Failed", "oom")]}),
            Some((REASON_FAILED, "oom")),
        ),
        (
            &MpiJob,
            json!({"conditions": [cond("Running", ""), cond("Succeeded", "MPIJob pi successfully completed.")]}),
            Some((REASON_SUCCEEDED, "MPIJob pi successfully completed.")),
        ),
        (
            &MpiJob,
            json!({"conditions": [cond("Failed", "launcher failed")]}),
            Some((REASON_FAILED, "launcher failed")),
        ),
        (
            &RayJob,
            json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "ok"}),
            Some((REASON_SUCCEEDED, "ok")),
        ),
        (
            &RayJob,
            json!({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "boom"}),
            Some((REASON_FAILED, "boom")),
        ),
        (
            &RayCluster,
            json!({"state": "failed", "reason": "head crashed"}),
            None,
        ),
    ];
    for (integration, status, expected) in cases {
        let v = json!({"spec": {}, "status": status});
        let view = JobObject::from_value(&v).expect("a job");
        let step = plan(&job_state(integration, &view), Some(&admitted));
        let want = match expected {
            Some((reason, message)) => Step::Finish {
                reason,
                message: message.into(),
            },
            // Admitted and running: nothing to do.
            None => Step::Nothing,
        };
        assert_eq!(step, want, "{} {status}", integration.kind());
    }
}

/// Quota reserved with admission checks: the job stays suspended while one is not Ready,
/// `Admitted` is written once all are, and only then does the job start.
#[test]
fn a_job_with_reserved_quota_waits_for_every_admission_check() {
    let suspended = JobState {
        suspended: true,
        ..JobState::default()
    };
    let reserved = |states: [&str; 2], admitted: &str| {
        workload(json!({
            "admission": {"clusterQueue": "cq", "podSetAssignments": []},
            "conditions": [cond("QuotaReserved", "True"), cond("Admitted", admitted)],
            "admissionChecks": states.iter().enumerate().map(|(i, s)| json!({
                "name": format!("c{i}"), "state": s, "message": "",
                "lastTransitionTime": "2026-11-24T00:00:00Z"})).collect::<Vec<_>>(),
        }))
    };
    assert_eq!(
        plan(&suspended, Some(&reserved(["Ready", "Pending"], "False"))),
        Step::Nothing
    );
    assert_eq!(
        plan(&suspended, Some(&reserved(["Ready", "Ready"], "False"))),
        Step::ChecksReady
    );
    assert_eq!(
        plan(&suspended, Some(&reserved(["Ready", "Ready"], "True"))),
        Step::Start
    );
}
