//! Pure translation of watched objects into engine events (no I/O).

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::kind::Kind;
use crate::api;
use crate::api::constants::WORKLOAD_FINISHED;
use crate::engine::{Event, WorkloadKey};

/// An object the controller cannot read, named with its kind and the decoder's reason.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {name}: {source}")]
pub struct TranslateError {
    pub kind: &'static str,
    /// `namespace/name` or `name`.
    pub name: String,
    #[source]
    pub source: serde_json::Error,
}

/// Decodes a watched object into its typed form, leniently: what fails here is an object
/// whose known fields do not have their types.
pub fn decode<T: DeserializeOwned, O: Serialize + Resource>(
    kind: Kind,
    obj: &O,
) -> Result<T, TranslateError> {
    let named = |source| TranslateError {
        kind: kind.name(),
        name: display_name(obj),
        source,
    };
    let value = serde_json::to_value(obj).map_err(named)?;
    // Lenient: a field a newer Kueue added is ignored (and counted), never an error.
    crate::api::lenient::from_value(kind.name(), &value).map_err(|e| named(e.into_inner()))
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn display_name(obj: &impl Resource) -> String {
    let meta = obj.meta();
    match &meta.namespace {
        Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
        None => meta.name.clone().unwrap_or_default(),
    }
}

/// The engine events an applied object stands for.
pub fn upsert(kind: Kind, obj: &(impl Serialize + Resource)) -> Result<Vec<Event>, TranslateError> {
    Ok(match kind {
        Kind::ResourceFlavor => vec![Event::ResourceFlavorUpserted(decode(kind, obj)?)],
        Kind::Cohort => vec![Event::CohortUpserted(decode(kind, obj)?)],
        Kind::ClusterQueue => vec![Event::ClusterQueueUpserted(terminating_holds(
            obj,
            decode(kind, obj)?,
        ))],
        Kind::AdmissionCheck => vec![Event::AdmissionCheckUpserted(decode(kind, obj)?)],
        Kind::LocalQueue => vec![Event::LocalQueueUpserted(decode(kind, obj)?)],
        Kind::WorkloadPriorityClass => {
            vec![Event::WorkloadPriorityClassUpserted(decode(kind, obj)?)]
        }
        Kind::Topology => vec![Event::TopologyUpserted(decode(kind, obj)?)],
        Kind::Workload => workload_events(decode(kind, obj)?),
        Kind::PriorityClass => {
            let pc: k8s_openapi::api::scheduling::v1::PriorityClass = decode(kind, obj)?;
            vec![Event::PriorityClassUpserted {
                name: pc.metadata.name.unwrap_or_default(),
                value: pc.value,
                global_default: pc.global_default.unwrap_or(false),
            }]
        }
        Kind::Namespace => vec![Event::NamespaceUpserted {
            name: obj.meta().name.clone().unwrap_or_default(),
            labels: obj.meta().labels.clone().unwrap_or_default(),
        }],
        Kind::Node => vec![Event::NodeUpserted(Box::new(decode(kind, obj)?))],
        Kind::Pod => vec![Event::PodUpserted(Box::new(decode(kind, obj)?))],
    })
}

/// A ClusterQueue being deleted (kept by the `resource-in-use` finalizer while workloads
/// hold quota in it) admits nothing new, as Kueue's terminating queues do, while what it
/// admitted runs to completion: to the engine it is held (`stopPolicy: Hold`).
fn terminating_holds(obj: &impl Resource, mut cq: api::ClusterQueue) -> api::ClusterQueue {
    let deleting = obj.meta().deletion_timestamp.is_some();
    if deleting && cq.spec.effective_stop_policy() == api::StopPolicy::None {
        cq.spec.stop_policy = Some(api::StopPolicy::Hold);
    }
    cq
}

/// A Workload's events: a finished one also releases what it held.
pub fn workload_events(wl: api::Workload) -> Vec<Event> {
    let finished = wl
        .status
        .as_ref()
        .is_some_and(|s| s.is_condition_true(WORKLOAD_FINISHED));
    let key = workload_key(&wl);
    let mut events = vec![Event::WorkloadUpserted(wl)];
    if finished {
        events.push(Event::WorkloadFinished(key));
    }
    events
}

/// The engine's key of a Workload.
pub fn workload_key(wl: &api::Workload) -> WorkloadKey {
    WorkloadKey::new(
        wl.metadata.namespace.clone().unwrap_or_default(),
        wl.metadata.name.clone().unwrap_or_default(),
    )
}

/// The engine events a deleted object stands for.
pub fn delete(kind: Kind, namespace: Option<&str>, name: &str) -> Vec<Event> {
    let name = name.to_string();
    vec![match kind {
        Kind::ResourceFlavor => Event::ResourceFlavorDeleted(name),
        Kind::Cohort => Event::CohortDeleted(name),
        Kind::ClusterQueue => Event::ClusterQueueDeleted(name),
        Kind::AdmissionCheck => Event::AdmissionCheckDeleted(name),
        Kind::LocalQueue => Event::LocalQueueDeleted {
            namespace: namespace.unwrap_or_default().to_string(),
            name,
        },
        Kind::Workload => {
            Event::WorkloadDeleted(WorkloadKey::new(namespace.unwrap_or_default(), name))
        }
        Kind::WorkloadPriorityClass => Event::WorkloadPriorityClassDeleted(name),
        Kind::PriorityClass => Event::PriorityClassDeleted(name),
        Kind::Topology => Event::TopologyDeleted(name),
        Kind::Namespace => Event::NamespaceDeleted(name),
        Kind::Node => Event::NodeDeleted(name),
        Kind::Pod => Event::PodDeleted {
            namespace: namespace.unwrap_or_default().to_string(),
            name,
        },
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::DynamicObject;
    use serde_json::json;

    fn dynamic(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).expect("a DynamicObject")
    }

    #[test]
    fn a_finished_workload_is_upserted_and_released() {
        let obj = dynamic(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
            "status": {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }));
        let events = upsert(Kind::Workload, &obj).expect("valid");
        assert!(matches!(&events[0], Event::WorkloadUpserted(_)));
        assert!(matches!(&events[1], Event::WorkloadFinished(k) if k.to_string() == "ns/w"));
    }

    #[test]
    fn an_unreadable_object_names_kind_object_and_field() {
        let obj = dynamic(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": "many", "template": {}}]}
        }));
        let err = upsert(Kind::Workload, &obj).expect_err("count is not a number");
        let text = err.to_string();
        assert!(text.starts_with("Workload ns/w: "), "{text}");
        assert!(text.contains("invalid type"), "{text}");
    }

    #[test]
    fn priority_classes_and_namespaces_carry_what_the_engine_reads() {
        let pc = dynamic(json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high"}, "value": 1000, "globalDefault": true
        }));
        match &upsert(Kind::PriorityClass, &pc).expect("valid")[0] {
            Event::PriorityClassUpserted {
                name,
                value,
                global_default,
            } => {
                assert_eq!(
                    (name.as_str(), *value, *global_default),
                    ("high", 1000, true)
                );
            }
            other => panic!("{other:?}"),
        }
        let ns = dynamic(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "labels": {"tier": "gold"}}
        }));
        match &upsert(Kind::Namespace, &ns).expect("valid")[0] {
            Event::NamespaceUpserted { name, labels } => {
                assert_eq!(name, "team-a");
                assert_eq!(labels.get("tier").map(String::as_str), Some("gold"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &delete(Kind::LocalQueue, Some("ns"), "q")[0],
            Event::LocalQueueDeleted { namespace, name } if namespace == "ns" && name == "q"
        ));
    }
}
