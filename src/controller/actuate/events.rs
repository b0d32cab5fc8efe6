//! Kubernetes Events as Kueue emits them (QuotaReserved, Admitted, Pending, Preempted, ...),
//! published in the background so that no decision waits on them, each one published
//! counted in `kuota_api_writes_total{kind="Event"}`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, ApiResource, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::debug;

use crate::api::constants::API_VERSION_V1BETA2;
use crate::config::WorkloadEvents;
use crate::engine::WorkloadKey;

/// Kubernetes' limit on an Event note.
const MAX_NOTE: usize = 1024;

/// How many recent Events are remembered for repeats: client-go's event correlator keeps
/// as many, so memory stays bounded however many Workloads a cluster has.
const SERIES_CAPACITY: u64 = 4096;

/// How long a published Event takes repeats as counts (kube-rs's recorder's window).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Publishes Events as controller `kuota`; a no-op recorder for unit tests.
///
/// Not kube-rs's `Recorder`: that one keeps every Event of the last six minutes (tens of
/// thousands in a busy cluster), scans them all on each publish, and turns a new message
/// with an old reason into a count on the old message. Here a repeat is the same reason
/// *and* note on the same object, and the memory of them is bounded.
#[derive(Clone)]
pub struct Recorder {
    inner: Option<Arc<Publisher>>,
    metrics: Option<crate::telemetry::Metrics>,
    workload_events: WorkloadEvents,
}

struct Publisher {
    client: Client,
    /// `reportingInstance`: the pod's name when set.
    instance: String,
    recent: moka::sync::Cache<Said, Arc<Mutex<Series>>>,
}

/// What an Event says, and about what: a repeat of it within the window is counted.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Said {
    regarding: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    type_: &'static str,
    reason: String,
    note: String,
}

/// The Event object a repeat is counted on, and its count so far.
struct Series {
    name: String,
    count: i32,
}

impl Recorder {
    /// A recorder reporting as `kuota` (instance: `POD_NAME` when set), counting the
    /// Events it publishes in `metrics`.
    pub fn new(client: Client, metrics: crate::telemetry::Metrics) -> Self {
        let publisher = Publisher {
            client,
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| CONTROLLER.to_string()),
            recent: moka::sync::Cache::builder()
                .max_capacity(SERIES_CAPACITY)
                .time_to_live(SERIES_WINDOW)
                .build(),
        };
        Self {
            inner: Some(Arc::new(publisher)),
            metrics: Some(metrics),
            workload_events: WorkloadEvents::default(),
        }
    }

    /// The same recorder, publishing the Workload Events `events` asks for.
    pub fn with_workload_events(mut self, events: WorkloadEvents) -> Self {
        self.workload_events = events;
        self
    }

    /// Whether an Event that only repeats what another Event or the Workload's own
    /// condition says is published too (Kueue's `Admitted` in the same write as
    /// `QuotaReserved`, a pending Event for a new message under the same reason).
    pub fn repeats_published(&self) -> bool {
        self.workload_events == WorkloadEvents::Kueue
    }

    /// A recorder that publishes nothing.
    pub fn disabled() -> Self {
        Self {
            inner: None,
            metrics: None,
            workload_events: WorkloadEvents::default(),
        }
    }

    /// A Normal Event on a Workload (see [`workload_ref`]).
    pub fn workload_normal(&self, regarding: ObjectReference, reason: &str, note: &str) {
        self.publish(regarding, NORMAL, reason, note);
    }

    /// A Warning Event on a Workload (see [`workload_ref`]).
    pub fn workload_warning(&self, regarding: ObjectReference, reason: &str, note: &str) {
        self.publish(regarding, WARNING, reason, note);
    }

    /// A Warning Event on any object the controller read.
    pub fn warning(&self, reference: ObjectReference, reason: &str, note: &str) {
        self.publish(reference, WARNING, reason, note);
    }

    /// A Warning `InvalidObject` Event on an object kuota cannot read.
    pub fn invalid_object(&self, ar: &ApiResource, meta: &ObjectMeta, why: &str) {
        let reference = ObjectReference {
            api_version: Some(ar.api_version.clone()),
            kind: Some(ar.kind.clone()),
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            ..ObjectReference::default()
        };
        self.warning(reference, "InvalidObject", why);
    }

    /// Publishes in the background: no decision waits on an Event.
    fn publish(&self, reference: ObjectReference, type_: &'static str, reason: &str, note: &str) {
        let Some(inner) = self.inner.clone() else {
            return;
        };
        let metrics = self.metrics.clone();
        let reason = reason.to_string();
        let note = truncated(note);
        tokio::spawn(async move {
            match inner.deliver(reference, type_, reason.clone(), note).await {
                Ok(()) => {
                    if let Some(m) = metrics {
                        m.record_api_write("Event");
                    }
                }
                Err(e) => debug!(error = %e, %reason, "event not published"),
            }
        });
    }
}

const CONTROLLER: &str = "kuota";
const NORMAL: &str = "Normal";
const WARNING: &str = "Warning";

/// The note cut to Kubernetes' limit, on a character boundary.
fn truncated(note: &str) -> String {
    let mut note = note.to_string();
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    note
}

impl Publisher {
    /// One write: a new Event, or the count of a repeat on the Event it repeats.
    async fn deliver(
        &self,
        regarding: ObjectReference,
        type_: &'static str,
        reason: String,
        note: String,
    ) -> Result<(), kube::Error> {
        // Cluster-scoped objects' Events go to `default`, as kube-rs's recorder does.
        let namespace = regarding.namespace.clone().unwrap_or("default".into());
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let said = Said {
            regarding: (
                regarding.kind.clone(),
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
            ),
            type_,
            reason: reason.clone(),
            note: note.clone(),
        };
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        if let Some(series) = self.recent.get(&said) {
            let (name, count) = {
                let mut s = series.lock().unwrap_or_else(|e| e.into_inner());
                s.count += 1;
                (s.name.clone(), s.count)
            };
            let body = json!({"series": {"count": count, "lastObservedTime": now}});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 404 => {} // expired: a new one
                other => return other.map(drop),
            }
        }
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(CONTROLLER),
            now.0.as_nanosecond()
        );
        let event = K8sEvent {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            action: Some(reason.clone()),
            reason: Some(reason),
            note: Some(note),
            event_time: Some(now),
            regarding: Some(regarding),
            reporting_controller: Some(CONTROLLER.into()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(type_.into()),
            ..K8sEvent::default()
        };
        api.create(&PostParams::default(), &event).await?;
        self.recent
            .insert(said, Arc::new(Mutex::new(Series { name, count: 1 })));
        Ok(())
    }
}

/// The reference of a Workload as `meta` (the object as last read or written) names it:
/// with its `uid` and `resourceVersion`, as client-go's `ref.GetReference` fills the
/// `involvedObject` of Kueue's Events. `kubectl describe` finds Events by that uid, so an
/// Event without it is shown on no object.
pub fn workload_ref(key: &WorkloadKey, meta: Option<&ObjectMeta>) -> ObjectReference {
    ObjectReference {
        api_version: Some(API_VERSION_V1BETA2.to_string()),
        kind: Some("Workload".to_string()),
        name: Some(key.name.to_string()),
        namespace: Some(key.namespace.to_string()),
        uid: meta.and_then(|m| m.uid.clone()),
        resource_version: meta.and_then(|m| m.resource_version.clone()),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Request, Response};
    use kube::client::Body;
    use serde_json::Value;

    /// A repeat of the same reason and note is one PATCH of the first Event's count; a new
    /// note on the same reason is a new Event (the user sees the newest message).
    #[tokio::test]
    async fn a_repeat_is_counted_on_its_event_and_a_new_message_is_a_new_event() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let publisher = Publisher {
            client: Client::new(service, "default"),
            instance: "kuota-0".into(),
            recent: moka::sync::Cache::builder().max_capacity(16).build(),
        };
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let (req, send) = handle.next_request().await.expect("a request");
                let (parts, body) = req.into_parts();
                let body: Value =
                    serde_json::from_slice(&body.collect_bytes().await.expect("body"))
                        .expect("json");
                let reply = if parts.method == Method::POST {
                    body.clone()
                } else {
                    json!({"metadata": {"name": "x"}})
                };
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&reply).expect("json")))
                        .expect("response"),
                );
                seen.push((parts.method, parts.uri.path().to_string(), body));
            }
            seen
        });
        let key = WorkloadKey::new("team", "job-a-1");
        let meta = ObjectMeta {
            uid: Some("6f1c0b1e-uid".into()),
            resource_version: Some("42".into()),
            ..ObjectMeta::default()
        };
        let say = |note: &str| {
            publisher.deliver(
                workload_ref(&key, Some(&meta)),
                NORMAL,
                "Pending".into(),
                note.into(),
            )
        };
        say("quota 1").await.expect("created");
        say("quota 1").await.expect("counted");
        say("quota 2").await.expect("created");
        let seen = server.await.expect("mock server");

        let (method, path, first) = &seen[0];
        assert_eq!(method, Method::POST);
        assert_eq!(path, "/apis/events.k8s.io/v1/namespaces/team/events");
        assert_eq!(first["reason"], "Pending");
        assert_eq!(first["note"], "quota 1");
        assert_eq!(first["type"], "Normal");
        assert_eq!(first["reportingController"], "kuota");
        assert_eq!(first["reportingInstance"], "kuota-0");
        assert_eq!(first["regarding"]["name"], "job-a-1");
        assert_eq!(first["regarding"]["uid"], "6f1c0b1e-uid");
        assert_eq!(first["regarding"]["resourceVersion"], "42");
        assert_eq!(first["regarding"]["apiVersion"], "kueue.x-k8s.io/v1beta2");
        let name = first["metadata"]["name"].as_str().expect("a name");
        assert!(name.starts_with("job-a-1."), "{name}");

        let (method, path, repeat) = &seen[1];
        assert_eq!(method, Method::PATCH);
        assert_eq!(
            path,
            &format!("/apis/events.k8s.io/v1/namespaces/team/events/{name}")
        );
        assert_eq!(repeat["series"]["count"], 2);
        assert!(repeat["series"]["lastObservedTime"].is_string());
        assert_eq!(
            repeat.as_object().map(|o| o.len()),
            Some(1),
            "only the series"
        );

        let (method, _, newer) = &seen[2];
        assert_eq!(method, Method::POST);
        assert_eq!(newer["note"], "quota 2");
    }

    #[test]
    fn a_long_note_is_cut_to_kubernetes_limit_on_a_character_boundary() {
        let note = "é".repeat(MAX_NOTE);
        let cut = truncated(&note);
        assert!(cut.len() <= MAX_NOTE);
        assert!(cut.ends_with("..."));
        assert_eq!(truncated("short"), "short");
    }
}
