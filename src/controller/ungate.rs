//! The topology ungater (Kueue's `topologyUngater`): a kube-rs `Controller` over Workloads
//! that, for each Workload admitted with a topology assignment, gives each of its gated
//! pods the node selector of a domain and removes the `kueue.x-k8s.io/topology` gate, in
//! one patch per pod. Which pod goes where is decided purely
//! ([`super::actuate::pod::ungates`]); this module only watches and writes.
//!
//! Its Workloads come from the controller's Workload store (triggered by the Workload
//! watch); its pods from a watch of pods carrying the `kueue.x-k8s.io/podset` label,
//! which job starts stamp on every admitted template, keeping only topology pods, slim. After ungating, a Workload is not
//! looked at again until the pod store shows every pod it patched as ungated (Kueue's
//! expectations): a stale store would otherwise hand a domain's room out twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use tracing::{debug, info, warn};

use super::actuate::Writer;
use super::actuate::pod::{slim, topology_pod, ungate_patch, ungates, workload_of};
use super::compact::CompactObject;
use super::translate::{TranslateError, decode};
use super::watch::Kind;
use crate::api::Workload;
use crate::api::constants::{PODSET_LABEL, TOPOLOGY_SCHEDULING_GATE};

/// Why one ungating pass failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum UngateError {
    #[error(transparent)]
    Translate(#[from] TranslateError),
    #[error("pod {namespace}/{name}: cannot remove the {TOPOLOGY_SCHEDULING_GATE} gate: {source}")]
    Patch {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// (namespace, name) of a Workload.
type Key = (String, String);
/// (namespace, name, uid) of a Pod: a pod recreated under the same name is another pod.
type PodKey = (String, String, String);

/// What the reconciler reads and writes with.
pub struct Ctx {
    pub writer: Arc<Writer>,
    pub pods: Store<Pod>,
    /// Pods patched per Workload that the pod store does not show ungated yet.
    expected: Mutex<BTreeMap<Key, BTreeSet<PodKey>>>,
}

impl Ctx {
    pub fn new(writer: Arc<Writer>, pods: Store<Pod>) -> Self {
        Self {
            writer,
            pods,
            expected: Mutex::new(BTreeMap::new()),
        }
    }

    /// Whether every pod patched for `wl` shows ungated (or gone) in the store.
    fn observed(&self, wl: &Key) -> bool {
        let mut expected = self.expected.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pods) = expected.get_mut(wl) else {
            return true;
        };
        pods.retain(|(ns, name, uid)| {
            let r = ObjectRef::<Pod>::new(name).within(ns);
            self.pods.get(&r).is_some_and(|p| {
                p.metadata.uid.as_deref() == Some(uid.as_str())
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.scheduling_gates.as_ref())
                        .is_some_and(|g| g.iter().any(|g| g.name == TOPOLOGY_SCHEDULING_GATE))
            })
        });
        let done = pods.is_empty();
        if done {
            expected.remove(wl);
        }
        done
    }

    fn expect(&self, wl: &Key, pod: PodKey) {
        let mut expected = self.expected.lock().unwrap_or_else(|e| e.into_inner());
        expected.entry(wl.clone()).or_default().insert(pod);
    }
}

/// Runs the ungater until aborted. `workloads` is the controller's Workload store;
/// `triggers` names Workloads whose admission changed.
pub async fn run(
    client: Client,
    workloads: Store<CompactObject>,
    writer: Arc<Writer>,
    triggers: UnboundedReceiver<ObjectRef<CompactObject>>,
) {
    let (pods, pod_writer) = reflector::store::<Pod>();
    let pod_stream = watcher::watcher(
        Api::<Pod>::all(client),
        watcher::Config::default().labels(PODSET_LABEL),
    )
    .default_backoff()
    // Only topology pods are kept, and slim: a cluster's other pods are no business of
    // the ungater, and would be most of kuota's memory.
    .filter(|event| futures::future::ready(keep(event)))
    .modify(slim)
    .reflect(pod_writer)
    .touched_objects();
    let ar = Kind::Workload.api_resource();
    let owner = ar.clone();
    let ctx = Arc::new(Ctx::new(writer, pods));
    info!("topology ungater started");
    Controller::for_stream_with(futures::stream::pending(), workloads, ar)
        .reconcile_on(triggers)
        .watches_stream_with(
            pod_stream,
            move |pod: Pod| {
                workload_of(&pod)
                    .map(|(ns, name)| ObjectRef::new_with(&name, owner.clone()).within(&ns))
            },
            (),
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                debug!(error = %e, "ungater reconcile");
            }
        })
        .await;
}

/// Whether the pod store takes a watch event: deletes always (the store may hold the pod).
fn keep(event: &Result<watcher::Event<Pod>, watcher::Error>) -> bool {
    match event {
        Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => topology_pod(p),
        _ => true,
    }
}

fn error_policy(wl: Arc<CompactObject>, e: &UngateError, _: Arc<Ctx>) -> Action {
    warn!(workload = %wl.meta().name.clone().unwrap_or_default(), error = %e, "ungating failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

/// Ungates what [`ungates`] picks for one Workload, one patch per pod.
pub async fn reconcile(obj: Arc<CompactObject>, ctx: Arc<Ctx>) -> Result<Action, UngateError> {
    let wl: Workload = decode(Kind::Workload, &*obj)?;
    let key: Key = (
        wl.metadata.namespace.clone().unwrap_or_default(),
        wl.metadata.name.clone().unwrap_or_default(),
    );
    if !ctx.observed(&key) {
        // The pods just patched have not shown up ungated: their watch events bring
        // the next pass; the requeue is only a fallback.
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    if ctx.pods.wait_until_ready().await.is_err() {
        return Ok(Action::await_change());
    }
    let pods: Vec<Arc<Pod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(key.0.as_str()))
        .collect();
    for (pod, selector) in ungates(&wl, &pods) {
        let Some(patch) = ungate_patch(&pod, &selector) else {
            continue;
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(ctx.writer.client.clone(), &key.0);
        let params = PatchParams {
            field_manager: Some("kuota".into()),
            ..PatchParams::default()
        };
        match api.patch(&name, &params, &Patch::<()>::Json(patch)).await {
            Ok(_) => {
                ctx.writer.wrote("Pod");
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                ctx.expect(&key, (key.0.clone(), name.clone(), uid));
                debug!(pod = %name, workload = %key.1, ?selector, "ungated");
            }
            Err(source) => {
                return Err(UngateError::Patch {
                    namespace: key.0.clone(),
                    name,
                    source,
                });
            }
        }
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Request, Response};
    use kube::client::Body;
    use kube::runtime::watcher::Event;
    use serde_json::{Value, json};

    fn workload() -> CompactObject {
        CompactObject::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-j-1", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": 1,
                "topologyRequest": {"required": "rack"},
                "template": {"spec": {"containers": []}}}]},
            "status": {
                "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [{
                    "name": "main", "flavors": {"cpu": "tas"}, "count": 1,
                    "topologyAssignment": {"levels": ["rack", "kubernetes.io/hostname"],
                        "slices": [{"domainCount": 1,
                            "valuesPerLevel": [{"universal": "r1"}, {"universal": "n1"}],
                            "podCounts": {"universal": 1}}]}}]}
            }
        }))
        .expect("workload")
    }

    fn gated_pod() -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "j-0-abc", "namespace": "ns", "resourceVersion": "12", "uid": "u-1",
                "labels": {PODSET_LABEL: "main"},
                "annotations": {"kueue.x-k8s.io/workload": "job-j-1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                "nodeSelector": {"pool": "tas"},
                "schedulingGates": [{"name": TOPOLOGY_SCHEDULING_GATE}]}
        }))
        .expect("pod")
    }

    #[tokio::test]
    async fn a_gated_pod_gets_its_domain_and_loses_the_gate_in_one_patch_then_nothing_more() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let writer = Arc::new(Writer::new(client, 1, 1));
        let mut pods = reflector::store::Writer::<Pod>::default();
        pods.apply_watcher_event(&Event::Init);
        pods.apply_watcher_event(&Event::InitApply(gated_pod()));
        pods.apply_watcher_event(&Event::InitDone);
        let ctx = Arc::new(Ctx::new(writer, pods.as_reader()));

        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.expect("a PATCH");
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.expect("body");
            let body: Value = serde_json::from_slice(&bytes).expect("json");
            let reply = serde_json::to_vec(&gated_pod()).expect("json");
            send.send_response(
                Response::builder()
                    .body(Body::from(reply))
                    .expect("response"),
            );
            (parts, body)
        });
        let action = reconcile(Arc::new(workload()), ctx.clone())
            .await
            .expect("ungated");
        assert_eq!(action, Action::await_change());
        let (parts, body) = server.await.expect("mock server");
        assert_eq!(parts.method, Method::PATCH);
        assert_eq!(
            parts.uri.to_string(),
            "/api/v1/namespaces/ns/pods/j-0-abc?&fieldManager=kuota"
        );
        assert_eq!(parts.headers["content-type"], "application/json-patch+json");
        assert_eq!(
            body,
            json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "12"},
                {"op": "test", "path": "/spec/schedulingGates/0/name", "value": TOPOLOGY_SCHEDULING_GATE},
                {"op": "remove", "path": "/spec/schedulingGates/0"},
                {"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1hostname", "value": "n1"},
                {"op": "add", "path": "/spec/nodeSelector/rack", "value": "r1"},
            ])
        );
        // The store still shows the pod gated: no second patch until it shows the change.
        let again = reconcile(Arc::new(workload()), ctx.clone())
            .await
            .expect("waits");
        assert_eq!(again, Action::requeue(Duration::from_millis(500)));
        let mut ungated = gated_pod();
        if let Some(spec) = ungated.spec.as_mut() {
            spec.scheduling_gates = None;
        }
        pods.apply_watcher_event(&Event::Apply(ungated));
        let done = reconcile(Arc::new(workload()), ctx)
            .await
            .expect("nothing to do");
        assert_eq!(done, Action::await_change());
    }
}
