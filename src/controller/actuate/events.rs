//! Kubernetes Events as Kueue emits them (QuotaReserved, Admitted, Pending, Preempted, ...),
//! published in the background so that no decision waits on them, each one published
//! counted in `kuota_api_writes_total{kind="Event"}`.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Client, Resource};
use tracing::debug;

use crate::api::constants::API_VERSION_V1BETA2;
use crate::engine::WorkloadKey;

/// Kubernetes' limit on an Event note.
const MAX_NOTE: usize = 1024;

/// Publishes Events as controller `kuota`; a no-op recorder for unit tests.
#[derive(Clone)]
pub struct Recorder {
    inner: Option<kube::runtime::events::Recorder>,
    metrics: Option<crate::telemetry::Metrics>,
}

impl Recorder {
    /// A recorder reporting as `kuota` (instance: `POD_NAME` when set), counting the
    /// Events it publishes in `metrics`.
    pub fn new(client: Client, metrics: crate::telemetry::Metrics) -> Self {
        let reporter = Reporter {
            controller: "kuota".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            inner: Some(kube::runtime::events::Recorder::new(client, reporter)),
            metrics: Some(metrics),
        }
    }

    /// A recorder that publishes nothing.
    pub fn disabled() -> Self {
        Self {
            inner: None,
            metrics: None,
        }
    }

    /// A Normal Event on a Workload.
    pub fn workload_normal(&self, key: &WorkloadKey, reason: &str, note: &str) {
        self.publish(workload_ref(key), EventType::Normal, reason, note);
    }

    /// A Warning Event on a Workload.
    pub fn workload_warning(&self, key: &WorkloadKey, reason: &str, note: &str) {
        self.publish(workload_ref(key), EventType::Warning, reason, note);
    }

    /// A Warning Event on any object the controller read.
    pub fn warning(&self, reference: ObjectReference, reason: &str, note: &str) {
        self.publish(reference, EventType::Warning, reason, note);
    }

    /// A Warning `InvalidObject` Event on an object kuota cannot read.
    pub fn invalid_object(&self, obj: &DynamicObject, why: &str) {
        let reference = ObjectReference {
            api_version: obj.types.as_ref().map(|t| t.api_version.clone()),
            kind: obj.types.as_ref().map(|t| t.kind.clone()),
            name: obj.meta().name.clone(),
            namespace: obj.meta().namespace.clone(),
            uid: obj.meta().uid.clone(),
            ..ObjectReference::default()
        };
        self.warning(reference, "InvalidObject", why);
    }

    fn publish(&self, reference: ObjectReference, type_: EventType, reason: &str, note: &str) {
        let Some(inner) = self.inner.clone() else {
            return;
        };
        let mut note = note.to_string();
        if note.len() > MAX_NOTE {
            let mut cut = MAX_NOTE - 3;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            match inner.publish(&event, &reference).await {
                Ok(()) => {
                    if let Some(m) = metrics {
                        m.record_api_write("Event");
                    }
                }
                Err(e) => debug!(error = %e, reason = %event.reason, "event not published"),
            }
        });
    }
}

/// The reference of a Workload.
pub fn workload_ref(key: &WorkloadKey) -> ObjectReference {
    ObjectReference {
        api_version: Some(API_VERSION_V1BETA2.to_string()),
        kind: Some("Workload".to_string()),
        name: Some(key.name.to_string()),
        namespace: Some(key.namespace.to_string()),
        ..ObjectReference::default()
    }
}
