//! The pure step planner: what a job needs next, given its state and its Workload.

use serde_json::json;

use super::*;

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
        finished: Some((true, "done".into())),
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
        finished: Some((true, "Job finished successfully".into())),
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
        active: 1,
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
/// not have its template restored (Kubernetes refuses template changes on a Job with
/// finished pods), and its quota waited on that restore for ever. The quota now goes
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
        active: 1,
        ..stamped
    };
    assert_eq!(plan(&terminating, Some(&evicted)), Step::Restore);
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

    let running = job_state(
        "Job",
        &job(false, vec![condition("SuccessCriteriaMet")]),
        false,
    );
    assert!(
        running.finishing && running.finished.is_none(),
        "{running:?}"
    );
    assert_eq!(plan(&running, Some(&evicted)), Step::Nothing);

    let suspended = job_state(
        "Job",
        &job(true, vec![condition("SuccessCriteriaMet")]),
        true,
    );
    assert_eq!(
        plan(&suspended, Some(&evicted)),
        Step::Finish {
            reason: REASON_SUCCEEDED,
            message: "Reached expected number of succeeded pods".into()
        }
    );
    let failing = job_state("Job", &job(true, vec![condition("FailureTarget")]), true);
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
    let complete = job_state(
        "Job",
        &job(
            true,
            vec![condition("SuccessCriteriaMet"), condition("Complete")],
        ),
        true,
    );
    assert_eq!(plan(&complete, Some(&workload(finished))), Step::Nothing);

    // Without the condition an evicted running Job is stopped as before.
    let plain = job_state("Job", &job(false, vec![]), false);
    assert_eq!(plan(&plain, Some(&evicted)), Step::Stop);
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
