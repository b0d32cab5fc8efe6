//! The controller's watches: one kube-rs watcher per kind the engine reads, with
//! reflector stores for the objects the actuators need fresh, turning every change into
//! engine inputs (a re-list's vanished objects become deletes).
//!
//! The bottom of the controller: the watches send [`Input`]s and tell [`WatchHooks`] what
//! else they saw; the engine task, the job reconcilers and the Event recorder above
//! implement those, so nothing here depends on them.

use std::collections::BTreeSet;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::Sender;
use tracing::{debug, warn};

use super::compact::CompactObject;
use super::translate;
use crate::api;
use crate::engine::{Event, WorkloadKey};
use crate::integrations::JobIntegration;

/// What the engine task receives: from the watches, and from the writers above them.
#[derive(Debug)]
pub enum Input {
    /// A cluster change (boxed: a Workload or Node event is large, and most inputs
    /// that queue up in the channel are small).
    Event(Box<Event>),
    /// A watch delivered its first complete list.
    Synced(Kind),
    /// An admission whose status write did not land: release what was granted.
    AdmissionFailed(WorkloadKey),
}

impl Input {
    /// A cluster change as an input.
    pub fn event(event: Event) -> Self {
        Self::Event(Box::new(event))
    }
}

/// What a watch reports besides engine inputs. The controller implements it with the job
/// reconcilers' triggers and its Event recorder.
pub trait WatchHooks: Send + Sync + 'static {
    /// A Workload object changed (whether or not it decodes): its owner job may need
    /// another look.
    fn workload_changed(&self, meta: &kube::api::ObjectMeta);
    /// A Workload decoded and goes to the engine.
    fn workload_upserted(&self, workload: &api::Workload);
    /// An object that does not decode: logged by the watch, reported on the object.
    fn unreadable(&self, resource: &ApiResource, meta: &kube::api::ObjectMeta, why: &str);
}

/// Hooks that do nothing (tests, and watches nobody else listens to).
pub struct NoHooks;

impl WatchHooks for NoHooks {
    fn workload_changed(&self, _: &kube::api::ObjectMeta) {}
    fn workload_upserted(&self, _: &api::Workload) {}
    fn unreadable(&self, _: &ApiResource, _: &kube::api::ObjectMeta, _: &str) {}
}

pub use super::kind::{ENGINE_KINDS, Kind};

/// Reflector stores the actuators read: always the latest object the watch delivered.
#[derive(Clone)]
pub struct Stores {
    /// Every Workload, kept compact: there is one per job in the cluster.
    pub workloads: Store<CompactObject>,
    pub flavors: Store<DynamicObject>,
    pub cluster_queues: Store<DynamicObject>,
    pub local_queues: Store<DynamicObject>,
    /// For the cohort path in a preemption message.
    pub cohorts: Store<DynamicObject>,
    /// For a new Workload's `spec.priority`, read without a request per Workload.
    pub workload_priority_classes: Store<DynamicObject>,
    pub priority_classes: Store<DynamicObject>,
}

/// The writing halves of [`Stores`], consumed by [`spawn`].
pub struct Writers {
    pub(crate) workloads: reflector::store::Writer<CompactObject>,
    flavors: reflector::store::Writer<DynamicObject>,
    cluster_queues: reflector::store::Writer<DynamicObject>,
    local_queues: reflector::store::Writer<DynamicObject>,
    cohorts: reflector::store::Writer<DynamicObject>,
    pub(crate) workload_priority_classes: reflector::store::Writer<DynamicObject>,
    pub(crate) priority_classes: reflector::store::Writer<DynamicObject>,
}

/// Empty stores and the writers that fill them.
pub fn stores() -> (Stores, Writers) {
    let w = |k: Kind| reflector::store::Writer::new(k.api_resource());
    let writers = Writers {
        workloads: reflector::store::Writer::new(Kind::Workload.api_resource()),
        flavors: w(Kind::ResourceFlavor),
        cluster_queues: w(Kind::ClusterQueue),
        local_queues: w(Kind::LocalQueue),
        cohorts: w(Kind::Cohort),
        workload_priority_classes: w(Kind::WorkloadPriorityClass),
        priority_classes: w(Kind::PriorityClass),
    };
    let stores = Stores {
        workloads: writers.workloads.as_reader(),
        flavors: writers.flavors.as_reader(),
        cluster_queues: writers.cluster_queues.as_reader(),
        local_queues: writers.local_queues.as_reader(),
        cohorts: writers.cohorts.as_reader(),
        workload_priority_classes: writers.workload_priority_classes.as_reader(),
        priority_classes: writers.priority_classes.as_reader(),
    };
    (stores, writers)
}

/// A spawned watch task, named for errors.
pub type Task = (&'static str, tokio::task::JoinHandle<()>);

/// Starts one watch per [`ENGINE_KINDS`] entry; they run until aborted.
pub fn spawn(
    client: Client,
    writers: Writers,
    tx: Sender<Input>,
    hooks: std::sync::Arc<dyn WatchHooks>,
) -> Vec<Task> {
    let Writers {
        workloads,
        flavors,
        cluster_queues,
        local_queues,
        cohorts,
        workload_priority_classes,
        priority_classes,
    } = writers;
    let mut workloads = Some(workloads);
    let mut writers = [
        (Kind::ResourceFlavor, Some(flavors)),
        (Kind::ClusterQueue, Some(cluster_queues)),
        (Kind::LocalQueue, Some(local_queues)),
        (Kind::Cohort, Some(cohorts)),
        (Kind::WorkloadPriorityClass, Some(workload_priority_classes)),
        (Kind::PriorityClass, Some(priority_classes)),
    ];
    ENGINE_KINDS
        .iter()
        .map(|&kind| {
            let watch = Watch {
                kind,
                tx: tx.clone(),
                hooks: hooks.clone(),
            };
            let task = if kind == Kind::Workload {
                tokio::spawn(watch.run(client.clone(), workloads.take()))
            } else {
                let writer = writers
                    .iter_mut()
                    .find(|(k, _)| *k == kind)
                    .and_then(|(_, w)| w.take());
                tokio::spawn(watch.run::<DynamicObject>(client.clone(), writer))
            };
            ("watch", task)
        })
        .collect()
}

/// Whether the API server serves the integration's kind (its CRD is installed).
pub async fn integration_installed(client: &Client, integration: &dyn JobIntegration) -> bool {
    let ar = job_api_resource(&integration.gvk());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    served(&api).await.unwrap_or_else(|e| {
        // Not a clear "not found": keep the integration; its watch retries with backoff.
        warn!(kind = %ar.kind, error = %e, "could not check whether the CRD is installed");
        true
    })
}

/// Whether the API server serves `api`'s kind: `Ok(false)` when it answers 404 (its CRD
/// is not installed), `Err` when it gives no clear answer.
pub async fn served<K>(api: &Api<K>) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The API resource of a job kind (plural by Kubernetes' convention).
pub fn job_api_resource(gvk: &GroupVersionKind) -> ApiResource {
    ApiResource::from_gvk(gvk)
}

/// One kind's watch: translates its events and forwards them to the engine task.
struct Watch {
    kind: Kind,
    tx: Sender<Input>,
    hooks: std::sync::Arc<dyn WatchHooks>,
}

impl Watch {
    async fn run<K>(self, client: Client, writer: Option<reflector::store::Writer<K>>)
    where
        K: Resource<DynamicType = ApiResource> + Serialize + DeserializeOwned,
        K: Clone + std::fmt::Debug + Send + Sync + 'static,
    {
        let ar = self.kind.api_resource();
        let api: Api<K> = Api::all_with(client, &ar);
        // managedFields are never read, and on Jobs, Workloads and Pods they are a large
        // share of each stored object.
        let stream = watcher::watcher(api, self.kind.watch_config())
            .default_backoff()
            .modify(|o: &mut K| o.meta_mut().managed_fields = None);
        let mut stream = match writer {
            Some(w) => stream.reflect(w).boxed(),
            None => stream.boxed(),
        };
        let mut relist = Relist::default();
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    for input in relist.handle(self.kind, event, |o| self.upsert(o)) {
                        if self.tx.send(input).await.is_err() {
                            return; // the engine task ended
                        }
                    }
                }
                Err(e) => {
                    warn!(kind = self.kind.name(), error = %e, "watch failed; retrying with backoff")
                }
            }
        }
    }

    /// The engine events of one applied object; a bad object is logged and reported as an
    /// Event on it, and sends nothing (what the engine knew of it stays as it was).
    fn upsert<K: Resource + Serialize>(&self, obj: &K) -> Vec<Input> {
        if self.kind == Kind::Workload {
            self.hooks.workload_changed(obj.meta());
        }
        match translate::upsert(self.kind, obj) {
            Ok(events) => {
                for event in &events {
                    if let Event::WorkloadUpserted(wl) = event {
                        self.hooks.workload_upserted(wl);
                    }
                }
                events.into_iter().map(Input::event).collect()
            }
            Err(e) => {
                warn!(error = %e, "ignoring an object kuota cannot read");
                let ar = self.kind.api_resource();
                self.hooks.unreadable(&ar, obj.meta(), &e.to_string());
                Vec::new()
            }
        }
    }
}

/// Tracks which objects a watch has seen, so that a re-list after a dropped watch turns
/// the objects that vanished meanwhile into deletes.
#[derive(Default)]
struct Relist {
    known: BTreeSet<(Option<String>, String)>,
    seen: BTreeSet<(Option<String>, String)>,
    synced: bool,
}

impl Relist {
    fn handle<K: Resource>(
        &mut self,
        kind: Kind,
        event: WatchEvent<K>,
        mut upsert: impl FnMut(&K) -> Vec<Input>,
    ) -> Vec<Input> {
        match event {
            WatchEvent::Init => {
                self.seen.clear();
                Vec::new()
            }
            WatchEvent::InitApply(o) => {
                self.seen.insert(key_of(&o));
                upsert(&o)
            }
            WatchEvent::InitDone => {
                let mut out = Vec::new();
                for (ns, name) in self.known.difference(&self.seen) {
                    debug!(
                        kind = kind.name(),
                        ?ns,
                        name,
                        "gone while the watch was down"
                    );
                    out.extend(
                        translate::delete(kind, ns.as_deref(), name)
                            .into_iter()
                            .map(Input::event),
                    );
                }
                self.known = std::mem::take(&mut self.seen);
                if !self.synced {
                    self.synced = true;
                    out.push(Input::Synced(kind));
                }
                out
            }
            WatchEvent::Apply(o) => {
                self.known.insert(key_of(&o));
                upsert(&o)
            }
            WatchEvent::Delete(o) => {
                let (ns, name) = key_of(&o);
                self.known.remove(&(ns.clone(), name.clone()));
                translate::delete(kind, ns.as_deref(), &name)
                    .into_iter()
                    .map(Input::event)
                    .collect()
            }
        }
    }
}

fn key_of(o: &impl Resource) -> (Option<String>, String) {
    (
        o.meta().namespace.clone(),
        o.meta().name.clone().unwrap_or_default(),
    )
}

/// Every Workload in `workloads` with a state for a check `ours` accepts: what a check
/// controller looks at again when its checks or their configs change.
pub fn workloads_under(
    workloads: &Store<CompactObject>,
    ours: impl Fn(&str) -> bool,
) -> Vec<ObjectRef<CompactObject>> {
    let ar = Kind::Workload.api_resource();
    workloads
        .state()
        .iter()
        .filter_map(|w| {
            let wl: api::Workload = translate::decode(Kind::Workload, &**w).ok()?;
            let states = &wl.status.as_ref()?.admission_checks;
            states.iter().any(|s| ours(&s.name)).then(|| {
                let name = wl.metadata.name.as_deref().unwrap_or_default();
                let ns = wl.metadata.namespace.as_deref().unwrap_or_default();
                ObjectRef::new_with(name, ar.clone()).within(ns)
            })
        })
        .collect()
}

/// Every object of kind `K` in the cluster, kept in `store`'s reflector: what a check
/// controller watches its AdmissionChecks and configs with.
pub fn reflect_all<K>(
    client: &Client,
    store: reflector::store::Writer<K>,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watcher::watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .reflect(store)
        .touched_objects()
}

/// Adds a check controller's watches to `controller`: a change to one of its
/// AdmissionChecks (those naming `controller_name`) or to any of its configs looks again at
/// every Workload `under` lists, and tells `changed` (the checks' `Active` pass follows).
pub fn on_checks_and_configs<C>(
    controller: kube::runtime::Controller<CompactObject>,
    controller_name: &'static str,
    checks: impl futures::Stream<Item = Result<api::AdmissionCheck, watcher::Error>> + Send + 'static,
    configs: impl futures::Stream<Item = Result<C, watcher::Error>> + Send + 'static,
    changed: futures::channel::mpsc::UnboundedSender<()>,
    under: impl Fn() -> Vec<ObjectRef<CompactObject>> + Clone + Send + Sync + 'static,
) -> kube::runtime::Controller<CompactObject>
where
    C: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (on_check, on_config) = (changed.clone(), changed);
    let under_config = under.clone();
    controller
        .watches_stream_with(
            checks,
            move |ac: api::AdmissionCheck| {
                if ac.spec.controller_name != controller_name {
                    return Vec::new();
                }
                let _ = on_check.unbounded_send(());
                under()
            },
            (),
        )
        .watches_stream_with(
            configs,
            move |_: C| {
                let _ = on_config.unbounded_send(());
                under_config()
            },
            (),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flavor(name: &str) -> DynamicObject {
        DynamicObject::new(name, &Kind::ResourceFlavor.api_resource())
            .data(serde_json::json!({"spec": {}}))
    }

    fn names(inputs: &[Input]) -> Vec<String> {
        inputs
            .iter()
            .map(|i| match i {
                Input::Event(e) => match e.as_ref() {
                    Event::ResourceFlavorUpserted(f) => {
                        format!("up {}", f.metadata.name.clone().unwrap_or_default())
                    }
                    Event::ResourceFlavorDeleted(n) => format!("del {n}"),
                    other => format!("{other:?}"),
                },
                Input::Synced(k) => format!("synced {}", k.name()),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_relist_deletes_what_vanished_and_reports_synced_once() {
        let mut r = Relist::default();
        let up = |o: &DynamicObject| {
            translate::upsert(Kind::ResourceFlavor, o)
                .expect("valid")
                .into_iter()
                .map(Input::event)
                .collect()
        };
        let k = Kind::ResourceFlavor;
        let mut out = Vec::new();
        out.extend(r.handle(k, WatchEvent::Init, up));
        out.extend(r.handle(k, WatchEvent::InitApply(flavor("a")), up));
        out.extend(r.handle(k, WatchEvent::InitApply(flavor("b")), up));
        out.extend(r.handle(k, WatchEvent::InitDone, up));
        assert_eq!(names(&out), ["up a", "up b", "synced ResourceFlavor"]);
        // The watch drops; on the re-list "a" is gone and "c" is new.
        let mut out = Vec::new();
        out.extend(r.handle(k, WatchEvent::Init, up));
        out.extend(r.handle(k, WatchEvent::InitApply(flavor("b")), up));
        out.extend(r.handle(k, WatchEvent::InitApply(flavor("c")), up));
        out.extend(r.handle(k, WatchEvent::InitDone, up));
        assert_eq!(names(&out), ["up b", "up c", "del a"]);
        let out = r.handle(k, WatchEvent::Delete(flavor("b")), up);
        assert_eq!(names(&out), ["del b"]);
    }
    fn flavor_json(name: &str, rv: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": name, "resourceVersion": rv}, "spec": {}})
    }

    fn body(v: &serde_json::Value) -> http::Response<kube::client::Body> {
        http::Response::builder()
            .body(kube::client::Body::from(
                serde_json::to_vec(v).expect("json"),
            ))
            .expect("response")
    }

    /// A watch response: these events, then the end of the stream (the connection drops).
    fn watch_events(events: &[serde_json::Value]) -> http::Response<kube::client::Body> {
        let mut bytes = Vec::new();
        for e in events {
            bytes.extend(serde_json::to_vec(e).expect("json"));
            bytes.push(b'\n');
        }
        http::Response::builder()
            .body(kube::client::Body::from(bytes))
            .expect("response")
    }

    type Mock = tower_test::mock::Handle<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >;

    async fn next(
        handle: &mut Mock,
    ) -> (
        String,
        tower_test::mock::SendResponse<http::Response<kube::client::Body>>,
    ) {
        let (req, send) = handle.next_request().await.expect("a request");
        (req.uri().to_string(), send)
    }

    /// API servers drop long watches (restarts, timeouts, load balancers). A watch whose
    /// connection ends is resumed from the last resourceVersion it saw (nothing is listed again, nothing is
    /// lost); a watch the API server answers with 410 Gone (its resourceVersion is too
    /// old, as after a long outage) lists again, and what vanished meanwhile becomes
    /// deletes. The mocked API server plays both, and the test asserts the requests the
    /// watch makes and the engine inputs it sends.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_watch_resumes_and_an_expired_one_relists() {
        use http::{Request, Response};
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let watch = Watch {
            kind: Kind::ResourceFlavor,
            tx,
            hooks: std::sync::Arc::new(NoHooks),
        };
        let task = tokio::spawn(watch.run::<DynamicObject>(Client::new(service, "default"), None));
        let list = |items: Vec<serde_json::Value>, rv: &str| {
            body(&serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavorList", "metadata": {"resourceVersion": rv}, "items": items}))
        };

        let (uri, send) = next(&mut handle).await;
        assert!(
            uri.starts_with("/apis/kueue.x-k8s.io/v1beta2/resourceflavors?")
                && !uri.contains("watch=true"),
            "{uri}"
        );
        send.send_response(list(vec![flavor_json("a", "5")], "10"));
        let (uri, send) = next(&mut handle).await;
        assert!(
            uri.contains("watch=true") && uri.contains("resourceVersion=10"),
            "{uri}"
        );
        send.send_response(watch_events(&[
            serde_json::json!({"type": "ADDED", "object": flavor_json("b", "11")}),
        ]));
        // The stream ended: the watch resumes where it was, without a list.
        let (uri, send) = next(&mut handle).await;
        assert!(
            uri.contains("watch=true") && uri.contains("resourceVersion=11"),
            "{uri}"
        );
        send.send_response(watch_events(&[
            serde_json::json!({"type": "ADDED", "object": flavor_json("c", "12")}),
        ]));
        let (uri, send) = next(&mut handle).await;
        assert!(
            uri.contains("watch=true") && uri.contains("resourceVersion=12"),
            "{uri}"
        );
        send.send_response(watch_events(&[
            serde_json::json!({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version: 12 (40)", "reason": "Expired", "code": 410}}),
        ]));
        // Expired: listed again (after the backoff); "a" and "b" were deleted meanwhile.
        let (uri, send) = next(&mut handle).await;
        assert!(!uri.contains("watch=true"), "a re-list, not a watch: {uri}");
        send.send_response(list(vec![flavor_json("c", "12")], "40"));

        let mut inputs = Vec::new();
        while inputs.len() < 7 {
            inputs.push(rx.recv().await.expect("an input"));
        }
        task.abort();
        assert_eq!(
            names(&inputs),
            [
                "up a",
                "synced ResourceFlavor",
                "up b",
                "up c",
                "up c",
                "del a",
                "del b"
            ]
        );
    }
}
