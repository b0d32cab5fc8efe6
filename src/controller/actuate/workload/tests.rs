//! Workload status writes: the pure patch builders, and the exact requests an admission
//! makes against a mocked API server.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

use super::*;
use crate::api::constants::MESSAGE_DEACTIVATED_MAX_EXECUTION;
use crate::controller::actuate::Writer;
use crate::controller::watch;

fn workload(status: Value) -> Workload {
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-a-1b2c3", "namespace": "team", "resourceVersion": "41",
                     "generation": 1},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                 "template": {"spec": {"containers": []}}}]},
        "status": status,
    }))
    .expect("workload")
}

fn admission() -> Admission {
    serde_json::from_value(json!({
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"},
                               "resourceUsage": {"cpu": "1"}, "count": 1}],
    }))
    .expect("admission")
}

fn now() -> Time {
    Time("2026-11-24T00:00:00Z".parse().expect("timestamp"))
}

#[test]
fn the_wait_is_counted_from_the_last_requeue_or_else_the_creation_as_kueues() {
    let mut wl = workload(json!({}));
    assert_eq!(
        queued_wait_seconds(&wl, &now()),
        0,
        "no creation time: no wait"
    );
    wl.metadata.creation_timestamp = Some(Time("2026-11-23T23:58:19.6Z".parse().expect("time")));
    assert_eq!(queued_wait_seconds(&wl, &now()), 100);
    let requeued = workload(json!({"conditions": [{"type": "Requeued", "status": "True",
        "reason": "BackoffFinished", "message": "", "lastTransitionTime": "2026-11-23T23:59:30Z"}]}));
    let mut requeued = requeued;
    requeued.metadata.creation_timestamp = wl.metadata.creation_timestamp.clone();
    assert_eq!(queued_wait_seconds(&requeued, &now()), 30);
    // A creation stamped after now (another clock): no wait, never a negative one.
    wl.metadata.creation_timestamp = Some(Time("2026-11-24T00:00:05Z".parse().expect("time")));
    assert_eq!(queued_wait_seconds(&wl, &now()), 0);
}

#[test]
fn an_admission_is_one_patch_with_both_conditions_and_is_never_written_twice() {
    let body = admit_patch(&workload(json!({})), &admission(), &[], &now()).expect("a patch");
    assert_eq!(body["metadata"]["resourceVersion"], "41");
    assert_eq!(body["status"]["admission"]["clusterQueue"], "cq");
    let conds = body["status"]["conditions"].as_array().expect("conditions");
    let status_of = |t: &str| {
        conds
            .iter()
            .find(|c| c["type"] == t)
            .map(|c| (c["status"].clone(), c["reason"].clone()))
    };
    assert_eq!(
        status_of("QuotaReserved"),
        Some((json!("True"), json!("QuotaReserved")))
    );
    assert_eq!(
        status_of("Admitted"),
        Some((json!("True"), json!("Admitted")))
    );

    let admitted = workload(body["status"].clone());
    assert_eq!(admit_patch(&admitted, &admission(), &[], &now()), None);
}

/// Re-admitted after a waitForPodsReady backoff: the one admission patch also flips
/// `Requeued` to Kueue's `BackoffFinished` and clears `requeueAt` (keeping the count), so
/// no reader sees an admitted workload whose backoff seems to run.
#[test]
fn an_admission_after_a_pods_ready_backoff_ends_the_backoff_in_the_same_patch() {
    let waiting = workload(json!({
        "requeueState": {"count": 2, "requeueAt": "2026-11-23T23:59:50Z"},
        "conditions": [{"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout",
            "message": "Exceeded the PodsReady timeout team/job-a-1b2c3",
            "lastTransitionTime": "2026-11-23T23:59:00Z"}]
    }));
    let body = admit_patch(&waiting, &admission(), &[], &now()).expect("a patch");
    assert_eq!(
        body["status"]["requeueState"],
        json!({"count": 2, "requeueAt": null})
    );
    let requeued = body["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["type"] == "Requeued")
        .cloned()
        .expect("Requeued");
    assert_eq!(
        (
            &requeued["status"],
            &requeued["reason"],
            &requeued["message"]
        ),
        (
            &json!("True"),
            &json!("BackoffFinished"),
            &json!("The workload backoff was finished")
        )
    );

    // A first admission, or one after a preemption, writes no requeue state.
    let preempted = workload(json!({
        "conditions": [{"type": "Requeued", "status": "True", "reason": "Preempted",
            "message": "", "lastTransitionTime": "2026-11-23T23:59:00Z"}]
    }));
    let body = admit_patch(&preempted, &admission(), &[], &now()).expect("a patch");
    assert!(body["status"].get("requeueState").is_none(), "{body}");
    assert!(
        body["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .any(|c| c["type"] == "Requeued" && c["reason"] == "Preempted"),
        "{body}"
    );
}

#[test]
fn an_unchanged_pending_reason_writes_nothing_and_a_new_one_writes_once() {
    let first = pending_patch(
        &workload(json!({})),
        "WaitingForQuota",
        "short by 1 cpu",
        &now(),
    )
    .expect("first pending write");
    let pending = workload(first["status"].clone());
    assert_eq!(
        pending_patch(&pending, "WaitingForQuota", "short by 1 cpu", &now()),
        None,
        "an unchanged re-evaluation must not write"
    );
    assert!(pending_patch(&pending, "WaitingForQuota", "short by 2 cpu", &now()).is_some());
}

/// Serves the mock side: the fresh GET of the Workload, then the status patch, whose
/// request is returned for the test to inspect.
async fn serve(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
) -> (Request<Value>, String) {
    let (get, send) = handle.next_request().await.expect("a GET");
    assert_eq!(get.method(), Method::GET);
    let get_uri = get.uri().to_string();
    let body = serde_json::to_vec(&workload(json!({}))).expect("json");
    send.send_response(
        Response::builder()
            .body(Body::from(body))
            .expect("response"),
    );

    let (patch, send) = handle.next_request().await.expect("a PATCH");
    let (parts, body) = patch.into_parts();
    let bytes = body.collect_bytes().await.expect("body");
    let value: Value = serde_json::from_slice(&bytes).expect("json body");
    let reply = serde_json::to_vec(&workload(value["status"].clone())).expect("json");
    send.send_response(
        Response::builder()
            .body(Body::from(reply))
            .expect("response"),
    );
    (Request::from_parts(parts, value), get_uri)
}

#[tokio::test]
async fn admit_reads_the_workload_then_patches_its_status_once_as_kuota() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let writer = Writer::new(client, 1, 2).with_clock(Arc::new(now), Duration::ZERO);
    // An empty store: the writer reads the Workload from the API server.
    let (stores, _writers) = watch::stores();
    let recorder = Recorder::disabled();
    let w = WorkloadWriter {
        writer: &writer,
        stores: &stores,
        recorder: &recorder,
    };
    let key = WorkloadKey::new("team", "job-a-1b2c3");
    let server = tokio::spawn(serve(handle));
    w.admit(&key, &admission(), &[]).await.expect("admitted");
    let (patch, get_uri) = server.await.expect("mock server");

    assert_eq!(
        get_uri,
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1b2c3"
    );
    assert_eq!(patch.method(), Method::PATCH);
    assert_eq!(
        patch.uri().to_string(),
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1b2c3/status?&fieldManager=kuota"
    );
    assert_eq!(
        patch.headers()["content-type"],
        "application/merge-patch+json"
    );
    let body = patch.body();
    assert_eq!(body["metadata"], json!({"resourceVersion": "41"}));
    assert_eq!(body["status"]["admission"], json!(admission()));
    let types: Vec<&str> = body["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert!(
        types.contains(&"QuotaReserved") && types.contains(&"Admitted"),
        "{types:?}"
    );
}

/// Serves `reads` GET-then-PATCH pairs, answering every GET with `current`, and
/// returns each PATCH as (method, URI, body).
async fn serve_patches(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    current: Workload,
    reads: usize,
) -> Vec<(Method, String, Value)> {
    let mut patches = Vec::new();
    for _ in 0..reads {
        let (get, send) = handle.next_request().await.expect("a GET");
        assert_eq!(get.method(), Method::GET);
        let body = serde_json::to_vec(&current).expect("json");
        send.send_response(
            Response::builder()
                .body(Body::from(body))
                .expect("response"),
        );
        let (patch, send) = handle.next_request().await.expect("a PATCH");
        let (parts, body) = patch.into_parts();
        let bytes = body.collect_bytes().await.expect("body");
        let value: Value = serde_json::from_slice(&bytes).expect("json body");
        let reply = serde_json::to_vec(&current).expect("json");
        send.send_response(
            Response::builder()
                .body(Body::from(reply))
                .expect("response"),
        );
        patches.push((parts.method, parts.uri.to_string(), value));
    }
    patches
}

/// Runs `act` against a mocked API server that holds `current`, and returns the
/// `reads` PATCH requests it made.
async fn patches_of(
    current: Workload,
    reads: usize,
    act: impl AsyncFnOnce(WorkloadWriter<'_>),
) -> Vec<(Method, String, Value)> {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let writer = Writer::new(client, 1, 2).with_clock(Arc::new(now), Duration::ZERO);
    // An empty store: the writer reads the Workload from the API server.
    let (stores, _writers) = watch::stores();
    let recorder = Recorder::disabled();
    let server = tokio::spawn(serve_patches(handle, current, reads));
    act(WorkloadWriter {
        writer: &writer,
        stores: &stores,
        recorder: &recorder,
    })
    .await;
    server.await.expect("mock server")
}

const BASE: &str = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1b2c3";

/// A workload whose maximum execution time ran out: `spec.active: false` on the Workload
/// itself (so a restart does not queue it again), then the `Evicted` status patch with
/// Kueue's reason and message, which clears the accumulated time as Kueue's
/// `reconcileMaxExecutionTime` does.
#[tokio::test]
async fn a_deactivation_patches_spec_active_then_evicts_in_status() {
    let admitted = workload(json!({"admission": admission(), "conditions": [],
                                   "accumulatedPastExecutionTimeSeconds": 40}));
    let key = WorkloadKey::new("team", "job-a-1b2c3");
    let patches = patches_of(admitted, 2, async move |w| {
        w.evict(
            &key,
            REASON_DEACTIVATED_MAX_EXECUTION,
            MESSAGE_DEACTIVATED_MAX_EXECUTION,
        )
        .await
        .expect("evicted");
    })
    .await;
    assert_eq!(patches[0].0, Method::PATCH);
    assert_eq!(patches[0].1, format!("{BASE}?&fieldManager=kuota"));
    assert_eq!(
        patches[0].2,
        json!({"metadata": {"resourceVersion": "41"}, "spec": {"active": false}})
    );
    assert_eq!(patches[1].1, format!("{BASE}/status?&fieldManager=kuota"));
    assert_eq!(
        patches[1].2,
        json!({
            "metadata": {"resourceVersion": "41"},
            "status": {
                "accumulatedPastExecutionTimeSeconds": null,
                "conditions": [{
                    "type": "Evicted", "status": "True",
                    "reason": "DeactivatedDueToMaximumExecutionTimeExceeded",
                    "message": "The workload is deactivated due to exceeding the maximum execution time",
                    "observedGeneration": 1, "lastTransitionTime": "2026-11-24T00:00:00Z",
                }],
            },
        })
    );
}

/// A plain deactivation (`spec.active` set false by a user) leaves the accumulated
/// time alone.
#[test]
fn a_user_deactivation_keeps_the_accumulated_time() {
    let wl = workload(json!({"admission": admission(),
                             "accumulatedPastExecutionTimeSeconds": 40}));
    let body = evict_patch(
        &wl,
        REASON_DEACTIVATED,
        None,
        "The workload is deactivated",
        &now(),
    )
    .expect("a patch");
    assert_eq!(body["status"].get(ACCUMULATED_FIELD), None);
    assert!(is_deactivation(REASON_DEACTIVATED));
    assert!(is_deactivation(REASON_DEACTIVATED_MAX_EXECUTION));
    assert!(!is_deactivation("DeactivatedByHand"));
    assert!(!is_deactivation("Preempted"));
}

/// A workload out of time that was never admitted (the engine deactivates it instead
/// of admitting it) is evicted in status as Kueue evicts any inactive Workload.
#[test]
fn a_pending_workload_out_of_time_is_evicted_in_status_without_an_admission() {
    let body = evict_patch(
        &workload(json!({"accumulatedPastExecutionTimeSeconds": 60})),
        REASON_DEACTIVATED_MAX_EXECUTION,
        None,
        MESSAGE_DEACTIVATED_MAX_EXECUTION,
        &now(),
    )
    .expect("a patch");
    assert_eq!(body["status"][ACCUMULATED_FIELD], Value::Null);
    assert_eq!(body["status"]["conditions"][0]["type"], "Evicted");
    // Anything else is evicted only while it holds an admission.
    assert_eq!(
        evict_patch(&workload(json!({})), "NodeFailures", None, "gone", &now()),
        None
    );
}

/// A workload requeued right at its deadline is still `Evicted` (reason `Preempted`)
/// when the engine deactivates it: the condition takes the deactivation's reason and
/// the accumulated time is cleared; once that is written, nothing more is.
#[test]
fn an_evicted_workload_out_of_time_is_marked_deactivated_once() {
    let requeued = workload(json!({
        "accumulatedPastExecutionTimeSeconds": 60,
        "conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted",
                        "message": "m", "lastTransitionTime": "2026-11-23T23:59:55Z"}],
    }));
    let deactivate = |wl: &Workload| {
        evict_patch(
            wl,
            REASON_DEACTIVATED_MAX_EXECUTION,
            None,
            MESSAGE_DEACTIVATED_MAX_EXECUTION,
            &now(),
        )
    };
    let body = deactivate(&requeued).expect("a patch");
    assert_eq!(body["status"][ACCUMULATED_FIELD], Value::Null);
    let evicted = &body["status"]["conditions"][0];
    assert_eq!(
        (
            &evicted["status"],
            &evicted["reason"],
            &evicted["lastTransitionTime"]
        ),
        (
            &json!("True"),
            &json!(REASON_DEACTIVATED_MAX_EXECUTION),
            &json!("2026-11-23T23:59:55Z")
        )
    );
    let mut written = body["status"].clone();
    written
        .as_object_mut()
        .expect("object")
        .remove(ACCUMULATED_FIELD);
    assert_eq!(deactivate(&workload(written)), None);
    // Any other reason leaves an evicted workload alone.
    assert_eq!(
        evict_patch(&requeued, "NodeFailures", None, "gone", &now()),
        None
    );
}

/// An evicted workload admitted at 23:58:30 (90 s before `now`) with 12 s from earlier
/// admissions, its pods gone.
fn evicted_workload(past: Option<i32>) -> Workload {
    let mut status = json!({
        "admission": admission(),
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": "Quota reserved in ClusterQueue cq",
             "lastTransitionTime": "2026-11-23T23:58:30Z"},
            {"type": "Admitted", "status": "True", "reason": "Admitted",
             "message": "The workload is admitted",
             "lastTransitionTime": "2026-11-23T23:58:30Z"},
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m",
             "lastTransitionTime": "2026-11-23T23:59:55Z"},
        ],
    });
    if let Some(p) = past {
        status[ACCUMULATED_FIELD] = json!(p);
    }
    workload(status)
}

/// Kueue's `TestSyncAdmittedCondition` "reservation lost with past admitted time
/// (set)" and "(add)" (pkg/workload/admissionchecks_test.go): the requeue adds the
/// whole seconds of the admission to nothing, or to what was there.
#[test]
fn the_requeue_adds_the_admission_to_the_accumulated_time() {
    for (past, want) in [(None, 90), (Some(12), 102)] {
        let body = requeue_patch(&evicted_workload(past), &now()).expect("a patch");
        assert_eq!(
            body["status"][ACCUMULATED_FIELD],
            json!(want),
            "past {past:?}"
        );
    }
    // Not admitted (it never got past QuotaReserved): nothing to add.
    let mut wl = evicted_workload(Some(12));
    if let Some(s) = wl.status.as_mut() {
        s.conditions.retain(|c| c.type_ != "Admitted");
    }
    let body = requeue_patch(&wl, &now()).expect("a patch");
    assert_eq!(body["status"].get(ACCUMULATED_FIELD), None);
    // A sub-second admission adds nothing, and a clock behind the condition never
    // subtracts.
    let early = Time("2026-11-23T23:58:30.900Z".parse().expect("timestamp"));
    assert_eq!(
        accumulated_after(&evicted_workload(Some(12)), &early),
        Some(12)
    );
    let before = Time("2026-11-23T23:58:00Z".parse().expect("timestamp"));
    assert_eq!(
        accumulated_after(&evicted_workload(Some(12)), &before),
        Some(12)
    );
}

/// The requeue is one status patch carrying the new accumulated time with the
/// conditions: no extra write.
#[tokio::test]
async fn the_requeue_writes_the_accumulated_time_in_its_one_patch() {
    let key = WorkloadKey::new("team", "job-a-1b2c3");
    let patches = patches_of(evicted_workload(Some(12)), 1, async move |w| {
        assert!(matches!(
            w.write(&key, requeue_patch).await.expect("written"),
            Written::Yes(_)
        ));
    })
    .await;
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].0, Method::PATCH);
    assert_eq!(patches[0].1, format!("{BASE}/status?&fieldManager=kuota"));
    let at = "2026-11-24T00:00:00Z";
    assert_eq!(
        patches[0].2,
        json!({
            "metadata": {"resourceVersion": "41"},
            "status": {
                "admission": null,
                "accumulatedPastExecutionTimeSeconds": 102,
                "conditions": [
                    {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                     "message": "m", "observedGeneration": 1, "lastTransitionTime": at},
                    {"type": "Admitted", "status": "False", "reason": "NoReservation",
                     "message": "The workload has no reservation", "observedGeneration": 1,
                     "lastTransitionTime": at},
                    {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m",
                     "lastTransitionTime": "2026-11-23T23:59:55Z"},
                    {"type": "Requeued", "status": "True", "reason": "Preempted",
                     "message": "m", "observedGeneration": 1, "lastTransitionTime": at},
                ],
            },
        })
    );
}

#[test]
fn an_inactive_workload_is_not_deactivated_again() {
    let mut wl = workload(json!({}));
    wl.spec.active = Some(false);
    assert_eq!(deactivate_patch(&wl), None);
}

/// The requeue patch has landed but the watch cache still shows the admission: a
/// pending reason computed now would be dropped as "nothing to write" and, since the
/// engine does not repeat an unchanged reason, never written. The writer confirms
/// against the API server and writes it.
#[tokio::test]
async fn a_pending_reason_a_stale_cache_would_drop_is_confirmed_and_written() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let writer = Writer::new(client, 1, 2).with_clock(Arc::new(now), Duration::ZERO);
    let (stores, mut writers) = watch::stores();
    let stale = workload(json!({"admission": admission()}));
    let stale = crate::controller::compact::CompactObject::from_value(
        serde_json::to_value(&stale).expect("json"),
    )
    .expect("object");
    writers
        .workloads
        .apply_watcher_event(&kube::runtime::watcher::Event::Apply(stale));
    let recorder = Recorder::disabled();
    let w = WorkloadWriter {
        writer: &writer,
        stores: &stores,
        recorder: &recorder,
    };
    let key = WorkloadKey::new("team", "job-a-1b2c3");
    // `serve` answers the GET with the requeued Workload (no admission).
    let server = tokio::spawn(serve(handle));
    w.pending(&key, "WaitingForQuota", "insufficient unused quota for cpu")
        .await
        .expect("written");
    let (patch, _) = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the writer asked the API server instead of trusting the stale cache")
        .expect("mock server");
    assert_eq!(
        patch.uri().to_string(),
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1b2c3/status?&fieldManager=kuota"
    );
    let reserved = &patch.body()["status"]["conditions"][0];
    assert_eq!(reserved["type"], "QuotaReserved");
    assert_eq!(reserved["reason"], "WaitingForQuota");
}

/// Runs `act` with an Event-publishing recorder against a mocked API server holding
/// `current`, and returns the reasons of the Events it posted: those posted once `want`
/// of them are in, and a moment after (a further Event is spawned with the first).
async fn event_reasons(
    current: Workload,
    events: crate::config::WorkloadEvents,
    want: usize,
    act: impl AsyncFnOnce(WorkloadWriter<'_>),
) -> Vec<String> {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let writer = Writer::new(client.clone(), 1, 2).with_clock(Arc::new(now), Duration::ZERO);
    let (stores, _writers) = watch::stores();
    let recorder =
        Recorder::new(client, crate::telemetry::Metrics::default()).with_workload_events(events);
    let reasons = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = reasons.clone();
    let server = tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let is_event = req.uri().path().ends_with("/events");
            let bytes = req.into_body().collect_bytes().await.expect("body");
            let reply = if is_event {
                let body: Value = serde_json::from_slice(&bytes).expect("json");
                let reason = body["reason"].as_str().unwrap_or_default().to_string();
                seen.lock().expect("reasons").push(reason);
                body
            } else {
                serde_json::to_value(&current).expect("json")
            };
            let bytes = serde_json::to_vec(&reply).expect("json");
            send.send_response(Response::new(Body::from(bytes)));
        }
    });
    act(WorkloadWriter {
        writer: &writer,
        stores: &stores,
        recorder: &recorder,
    })
    .await;
    for _ in 0..100 {
        if reasons.lock().expect("reasons").len() >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.abort();
    reasons.lock().expect("reasons").clone()
}

/// Reserved and admitted in one write: one QuotaReserved Event, and Kueue's Admitted
/// Event beside it only when repeats are asked for.
#[tokio::test]
async fn an_admission_without_checks_is_one_event_unless_kueues_repeats_are_asked_for() {
    use crate::config::WorkloadEvents::{Kueue, Lean};
    let key = WorkloadKey::new("team", "job-a-1b2c3");
    let lean = event_reasons(workload(json!({})), Lean, 1, async |w| {
        w.admit(&key, &admission(), &[]).await.expect("admitted");
    })
    .await;
    assert_eq!(lean, ["QuotaReserved"]);
    let mut kueue = event_reasons(workload(json!({})), Kueue, 2, async |w| {
        w.admit(&key, &admission(), &[]).await.expect("admitted");
    })
    .await;
    kueue.sort();
    assert_eq!(kueue, ["Admitted", "QuotaReserved"]);
}

/// A pending Workload whose message changes under the same reason: the condition is
/// written, the Event only when repeats are asked for; a new reason has its Event.
#[tokio::test]
async fn a_pending_event_marks_a_new_reason_not_each_new_message() {
    use crate::config::WorkloadEvents::{Kueue, Lean};
    let key = WorkloadKey::new("team", "job-a-1b2c3");
    let waiting = || {
        workload(
            json!({"conditions": [{"type": "QuotaReserved", "status": "False",
            "reason": "WaitingForQuota", "message": "4 more needed",
            "lastTransitionTime": "2026-11-24T00:00:00Z"}]}),
        )
    };
    let same_reason = async |w: WorkloadWriter<'_>| {
        w.pending(&key, "WaitingForQuota", "2 more needed")
            .await
            .expect("written");
    };
    assert!(
        event_reasons(waiting(), Lean, 0, same_reason)
            .await
            .is_empty()
    );
    let kueue = event_reasons(waiting(), Kueue, 1, same_reason).await;
    assert_eq!(kueue, ["WaitingForQuota"]);
    let new_reason = event_reasons(waiting(), Lean, 1, async |w| {
        w.pending(&key, "TopologyPlacementFailed", "no rack fits")
            .await
            .expect("written");
    })
    .await;
    assert_eq!(new_reason, ["TopologyPlacementFailed"]);
    let first = event_reasons(workload(json!({})), Lean, 1, same_reason).await;
    assert_eq!(first, ["WaitingForQuota"]);
}

/// The opt-in estimate annotation: one merge patch of the Workload itself (not its
/// status) setting `kuota.dev/estimated-start`; none once admitted or when it says so.
#[tokio::test]
async fn an_estimate_is_one_patch_of_its_annotation() {
    let key = WorkloadKey::new("team", "job-a-1b2c3");
    let at = "2026-11-24T01:00:00Z";
    let patches = patches_of(workload(json!({})), 1, async move |w| {
        w.annotate_estimate(&key, at).await.expect("written");
    })
    .await;
    let (method, uri, body) = &patches[0];
    assert_eq!(method, Method::PATCH);
    assert_eq!(uri, &format!("{BASE}?&fieldManager=kuota"));
    assert_eq!(
        body,
        &json!({"metadata": {"annotations": {"kuota.dev/estimated-start": at}}})
    );
    let mut said = workload(json!({}));
    said.metadata.annotations = Some(
        [(ESTIMATED_START_ANNOTATION.to_string(), at.to_string())]
            .into_iter()
            .collect(),
    );
    assert_eq!(estimate_patch(&said, at), None);
    let admitted = workload(json!({"admission": admission()}));
    assert_eq!(estimate_patch(&admitted, at), None);
}
