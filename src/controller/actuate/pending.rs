//! The pending lane: Workload pending-status writes, coalesced per Workload and written
//! by a few workers of their own.
//!
//! A cluster with thousands of pending Workloads re-evaluates them all whenever usage in
//! their cohort changes, and Kueue's pending message ("… N more needed") changes with it.
//! Written one task per decision, those writes queued ahead of admissions, evictions and
//! finishes for minutes (the cluster benchmark saw two-minute waits), and most of them
//! carried a message already superseded. Here only the newest pending status of each
//! Workload waits, an admission or eviction cancels it, and the lane's bounded workers
//! never take the writer's permits from the writes that move quota.

use tracing::warn;

use super::lane::Lane;
use super::workload::WorkloadWriter;
use super::{Writer, events::Recorder};
use crate::controller::watch::Stores;
use crate::engine::WorkloadKey;

/// Workers writing pending status at once.
pub const PENDING_WORKERS: usize = 4;

/// A pending status waiting to be written.
#[derive(Clone, Debug, PartialEq)]
struct Status {
    reason: String,
    message: String,
}

/// The lane. Dropping it stops its workers.
pub struct PendingLane(Lane<WorkloadKey, Status>);

impl PendingLane {
    /// Starts `workers` writers (at least one) on the current Tokio runtime, with a
    /// writer of their own that shares `writer`'s client, retry policy and counts.
    pub fn start(writer: &Writer, recorder: Recorder, stores: Stores, workers: usize) -> Self {
        Self(
            writer.lane(workers, move |writer, key: WorkloadKey, status: Status| {
                let (recorder, stores) = (recorder.clone(), stores.clone());
                async move {
                    let w = WorkloadWriter {
                        writer: &writer,
                        stores: &stores,
                        recorder: &recorder,
                    };
                    if let Err(e) = w.pending(&key, &status.reason, &status.message).await {
                        warn!(workload = %key, error = %e, "pending status not written");
                    }
                }
            }),
        )
    }

    /// Queues `reason` and `message` for `key`, replacing a status still waiting.
    pub fn offer(&self, key: WorkloadKey, reason: &str, message: &str) {
        let status = Status {
            reason: reason.to_string(),
            message: message.to_string(),
        };
        self.0.offer(key, status);
    }

    /// Drops the status still waiting for `key`: a later decision (admission, eviction)
    /// supersedes it.
    pub fn cancel(&self, key: &WorkloadKey) {
        self.0.cancel(key);
    }

    /// Statuses waiting to be written.
    pub fn waiting(&self) -> usize {
        self.0.waiting()
    }
}

#[cfg(test)]
mod tests {
    //! The exact requests of the lane against a mocked API server.

    use std::time::Duration;

    use http::{Method, Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;
    use crate::controller::watch;

    fn workload(name: &str) -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "team", "resourceVersion": "41"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                     "template": {"spec": {"containers": []}}}]},
            "status": {}
        })
    }

    fn ok(body: &Value) -> Response<Body> {
        Response::builder()
            .body(Body::from(serde_json::to_vec(body).expect("json")))
            .expect("response")
    }

    /// Three statuses for one Workload and one for another, the second cancelled (it
    /// was admitted) before a worker ran: one read and one write, carrying the newest
    /// message, and nothing for the admitted Workload.
    #[tokio::test(start_paused = true)]
    async fn only_the_newest_status_of_a_workload_is_written_and_a_cancelled_one_never() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let writer = Writer::new(kube::Client::new(service, "default"), 1, 2);
        let (stores, _writers) = watch::stores();
        let lane = PendingLane::start(&writer, Recorder::disabled(), stores, 1);
        let a = WorkloadKey::new("team", "job-a-1");
        let b = WorkloadKey::new("team", "job-b-2");
        for n in 1..=3 {
            lane.offer(a.clone(), "Pending", &format!("message {n}"));
        }
        lane.offer(b.clone(), "Pending", "never written");
        lane.cancel(&b);
        assert_eq!(lane.waiting(), 1);

        let (req, send) = handle.next_request().await.expect("a read");
        assert_eq!(req.method(), Method::GET);
        assert_eq!(
            req.uri().path(),
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1"
        );
        send.send_response(ok(&workload("job-a-1")));
        let (req, send) = handle.next_request().await.expect("a write");
        assert_eq!(req.method(), Method::PATCH);
        assert_eq!(
            req.uri().path(),
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-a-1/status"
        );
        let body: Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.expect("body"))
                .expect("json");
        let conds = body["status"]["conditions"].as_array().expect("conditions");
        assert_eq!(conds.len(), 1, "{body}");
        assert_eq!(conds[0]["type"], "QuotaReserved");
        assert_eq!(conds[0]["message"], "message 3");
        send.send_response(ok(&workload("job-a-1")));

        let more = tokio::time::timeout(Duration::from_secs(60), handle.next_request()).await;
        assert!(
            more.is_err(),
            "a request after the newest status was written"
        );
        assert_eq!(lane.waiting(), 0);
    }
}
