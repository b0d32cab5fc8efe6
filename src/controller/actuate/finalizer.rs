//! Kueue's `kueue.x-k8s.io/resource-in-use` finalizer on ClusterQueues and ResourceFlavors:
//! added to every live one, and removed from one being deleted once nothing uses it, so
//! that `kubectl delete` waits for admitted work instead of pulling quota out from under
//! it (Kueue's clusterqueue_controller.go and resourceflavor_controller.go; Kueue puts no
//! such finalizer on LocalQueues).
//!
//! - A ClusterQueue is in use while any workload holds quota in it.
//! - A ResourceFlavor is in use while any ClusterQueue (terminating ones included) names
//!   it in `spec.resourceGroups`.
//!
//! The decisions are pure ([`decide`], [`finalizer_patch`], [`flavors_in_use`]); the
//! engine task calls [`Finalizers::reconcile`] at its queue-status tick, which writes one
//! merge patch per object that needs a change, preconditioned on its resourceVersion.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tracing::{debug, info};

use super::{Attempt, WriteError, Writer, is_not_found};
use crate::api::constants::RESOURCE_IN_USE_FINALIZER;
use crate::controller::watch::{Kind, Stores};
use crate::engine::Engine;

/// What an object's finalizer list needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Add,
    Remove,
}

/// The change the finalizer of one object needs: added while it lives, removed once it is
/// being deleted and no longer in use, left alone otherwise.
pub fn decide(obj: &DynamicObject, in_use: bool) -> Option<Change> {
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let has = has_finalizer(obj);
    match (deleting, has) {
        (false, false) => Some(Change::Add),
        (true, true) if !in_use => Some(Change::Remove),
        _ => None,
    }
}

fn has_finalizer(obj: &DynamicObject) -> bool {
    obj.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == RESOURCE_IN_USE_FINALIZER)
}

/// The merge patch applying `change`: the whole finalizer list (a merge patch replaces
/// lists), preconditioned on the resourceVersion it was computed from so that a
/// finalizer another controller added meanwhile is never dropped.
pub fn finalizer_patch(obj: &DynamicObject, change: Change) -> Value {
    let mut finalizers: Vec<String> = obj.metadata.finalizers.clone().unwrap_or_default();
    finalizers.retain(|f| f != RESOURCE_IN_USE_FINALIZER);
    if change == Change::Add {
        finalizers.push(RESOURCE_IN_USE_FINALIZER.to_string());
    }
    json!({"metadata": {
        "resourceVersion": obj.metadata.resource_version,
        "finalizers": finalizers,
    }})
}

/// The flavors any of `cluster_queues` names.
pub fn flavors_in_use(cluster_queues: &[Arc<DynamicObject>]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for cq in cluster_queues {
        let groups = cq
            .data
            .pointer("/spec/resourceGroups")
            .and_then(Value::as_array);
        for group in groups.into_iter().flatten() {
            let flavors = group.get("flavors").and_then(Value::as_array);
            for f in flavors.into_iter().flatten() {
                if let Some(name) = f.get("name").and_then(Value::as_str) {
                    out.insert(name.to_string());
                }
            }
        }
    }
    out
}

/// Whether any workload holds quota in ClusterQueue `name`, as the engine knows it.
pub fn cluster_queue_in_use(engine: &Engine, name: &str) -> bool {
    engine
        .cluster_queue_report(name)
        .is_some_and(|r| r.admitted > 0 || r.usage.values().any(|u| u.total > 0))
}

/// Keeps the finalizers of the watched ClusterQueues and ResourceFlavors.
pub struct Finalizers {
    writer: Arc<Writer>,
    stores: Stores,
}

impl Finalizers {
    pub fn new(writer: Arc<Writer>, stores: Stores) -> Self {
        Self { writer, stores }
    }

    /// Writes every finalizer change the stores and the engine call for (in the
    /// background; a stale store costs one refused patch, then a fresh read).
    pub fn reconcile(&self, engine: &Engine) {
        let cluster_queues = self.stores.cluster_queues.state();
        for cq in &cluster_queues {
            let name = cq.metadata.name.clone().unwrap_or_default();
            let in_use = cluster_queue_in_use(engine, &name);
            if let Some(change) = decide(cq, in_use) {
                self.spawn_write(Kind::ClusterQueue, name, in_use, change);
            }
        }
        let used = flavors_in_use(&cluster_queues);
        for rf in self.stores.flavors.state() {
            let name = rf.metadata.name.clone().unwrap_or_default();
            let in_use = used.contains(&name);
            if let Some(change) = decide(&rf, in_use) {
                self.spawn_write(Kind::ResourceFlavor, name, in_use, change);
            }
        }
    }

    fn spawn_write(&self, kind: Kind, name: String, in_use: bool, change: Change) {
        let writer = self.writer.clone();
        let stores = self.stores.clone();
        tokio::spawn(async move {
            if let Err(e) = write(&writer, &stores, kind, &name, in_use).await {
                debug!(kind = kind.name(), name, error = %e, "finalizer not written");
            } else {
                debug!(kind = kind.name(), name, ?change, "finalizer reconciled");
            }
        });
    }
}

/// Applies the finalizer change `kind` `name` needs, from the store first and from a
/// fresh read after a conflict. Returns whether a patch landed.
pub async fn write(
    writer: &Writer,
    stores: &Stores,
    kind: Kind,
    name: &str,
    in_use: bool,
) -> Result<bool, WriteError> {
    let api: Api<DynamicObject> = Api::all_with(writer.client.clone(), &kind.api_resource());
    let store = match kind {
        Kind::ClusterQueue => &stores.cluster_queues,
        _ => &stores.flavors,
    };
    writer
        .retry(kind.name(), name, |fresh| {
            let api = api.clone();
            async move {
                let obj = if fresh {
                    api.get_opt(name).await.map_err(|source| WriteError::Api {
                        kind: kind.name(),
                        name: name.to_string(),
                        source,
                    })?
                } else {
                    let r =
                        kube::runtime::reflector::ObjectRef::new_with(name, kind.api_resource());
                    store.get(&r).map(|o| (*o).clone())
                };
                let Some(obj) = obj else {
                    // Not in the store yet: read it; gone from the API server: done.
                    return Ok(if fresh {
                        Attempt::Done(false)
                    } else {
                        Attempt::Refetch
                    });
                };
                let Some(change) = decide(&obj, in_use) else {
                    return Ok(Attempt::Done(false));
                };
                let pp = PatchParams {
                    field_manager: Some(super::workload::FIELD_MANAGER.to_string()),
                    ..PatchParams::default()
                };
                let body = finalizer_patch(&obj, change);
                match api.patch(name, &pp, &Patch::Merge(&body)).await {
                    Ok(_) => {
                        writer.wrote(kind.name());
                        if change == Change::Remove {
                            info!(
                                kind = kind.name(),
                                name, "no longer in use: deletion proceeds"
                            );
                        }
                        Ok(Attempt::Done(true))
                    }
                    Err(e) if is_not_found(&e) => Ok(Attempt::Done(false)),
                    Err(source) => Err(WriteError::Api {
                        kind: kind.name(),
                        name: name.to_string(),
                        source,
                    }),
                }
            }
        })
        .await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{Method, Request, Response};
    use kube::client::Body;

    use super::*;
    use crate::controller::watch;

    fn cq(finalizers: &[&str], deleting: bool) -> DynamicObject {
        let mut v = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq", "resourceVersion": "7", "finalizers": finalizers},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": []}]}]}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(v).expect("object")
    }

    #[test]
    fn added_while_live_removed_once_deleting_and_unused() {
        let other = "example.com/keep";
        assert_eq!(decide(&cq(&[], false), false), Some(Change::Add));
        assert_eq!(decide(&cq(&[RESOURCE_IN_USE_FINALIZER], false), true), None);
        assert_eq!(
            decide(&cq(&[RESOURCE_IN_USE_FINALIZER], true), true),
            None,
            "in use: deletion waits"
        );
        assert_eq!(
            decide(&cq(&[other, RESOURCE_IN_USE_FINALIZER], true), false),
            Some(Change::Remove)
        );
        assert_eq!(
            decide(&cq(&[other], true), false),
            None,
            "never added back to an object being deleted"
        );
        assert_eq!(
            finalizer_patch(
                &cq(&[other, RESOURCE_IN_USE_FINALIZER], true),
                Change::Remove
            ),
            json!({"metadata": {"resourceVersion": "7", "finalizers": [other]}})
        );
        let used = flavors_in_use(&[Arc::new(cq(&[], false))]);
        assert_eq!(used.into_iter().collect::<Vec<_>>(), ["default"]);
    }

    /// The exact request that lets a deleted, empty ClusterQueue go: one merge patch of
    /// its finalizers (kuota's kept, Kueue's removed) with the resourceVersion precondition.
    #[tokio::test]
    async fn removing_the_finalizer_is_one_preconditioned_merge_patch() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let writer = Writer::new(kube::Client::new(service, "default"), 1, 2);
        let (stores, _writers) = watch::stores();
        let server = tokio::spawn(async move {
            let (get, send) = handle.next_request().await.expect("a GET");
            assert_eq!(get.method(), Method::GET);
            assert_eq!(
                get.uri().to_string(),
                "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"
            );
            let current = cq(&["example.com/keep", RESOURCE_IN_USE_FINALIZER], true);
            let body = serde_json::to_vec(&current).expect("json");
            send.send_response(Response::builder().body(Body::from(body)).expect("ok"));
            let (patch, send) = handle.next_request().await.expect("a PATCH");
            let (parts, body) = patch.into_parts();
            let bytes = body.collect_bytes().await.expect("body");
            let body: Value = serde_json::from_slice(&bytes).expect("json");
            let reply = serde_json::to_vec(&cq(&["example.com/keep"], true)).expect("json");
            send.send_response(Response::builder().body(Body::from(reply)).expect("ok"));
            (parts, body)
        });
        // Empty store: the writer reads the ClusterQueue from the API server.
        let landed = tokio::time::timeout(
            Duration::from_secs(5),
            write(&writer, &stores, Kind::ClusterQueue, "cq", false),
        )
        .await
        .expect("in time")
        .expect("written");
        assert!(landed);
        let (parts, body) = server.await.expect("mock server");
        assert_eq!(parts.method, Method::PATCH);
        assert_eq!(
            parts.uri.to_string(),
            "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq?&fieldManager=kuota"
        );
        assert_eq!(
            parts.headers["content-type"],
            "application/merge-patch+json"
        );
        assert_eq!(
            body,
            json!({"metadata": {"resourceVersion": "7", "finalizers": ["example.com/keep"]}})
        );
    }
}
