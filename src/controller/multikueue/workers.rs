//! The worker clusters this manager can reach: one client per connected MultiKueueCluster,
//! with a watch on the Workloads and jobs this manager created there (its origin label).
//! The watches wake the manager's Workloads when their copies change, and a failing
//! watch marks its worker lost (since when) and asks for its connection to be checked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use futures::{FutureExt, StreamExt};
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tracing::debug;

use crate::api::constants::PREBUILT_WORKLOAD_LABEL;
use crate::api::{MultiKueueCluster, Workload};
use crate::controller::compact::CompactObject;
use crate::controller::watch::{Kind, job_api_resource};
use crate::integrations::JobIntegration;

/// Kueue's `kueue.x-k8s.io/multikueue-origin`: which manager made an object in a worker.
pub const ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";

/// A reachable worker: the client, and the copies of this manager's Workloads there.
#[derive(Clone)]
pub struct Remote {
    pub client: Client,
    pub workloads: Store<Workload>,
}

struct Worker {
    /// The kubeconfig the client was made from: a new one makes a new client.
    kubeconfig: String,
    remote: Option<Remote>,
    /// Since when it has been unreachable; `None` while connected.
    lost_since: Option<Instant>,
    watch: Option<tokio::task::AbortHandle>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(w) = &self.watch {
            w.abort();
        }
    }
}

/// Where a worker's watches send what they see.
#[derive(Clone)]
pub struct Wakers {
    /// A manager Workload whose copy (or its job) changed.
    pub workloads: UnboundedSender<ObjectRef<CompactObject>>,
    /// A worker whose watch failed or recovered: its connection is checked again.
    pub clusters: UnboundedSender<ObjectRef<MultiKueueCluster>>,
}

/// The workers by MultiKueueCluster name.
#[derive(Clone, Default)]
pub struct Workers(Arc<Mutex<HashMap<String, Worker>>>);

impl Workers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Worker>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The worker `name`, when it is connected and its copies are listed: until then its
    /// store would say it holds none, and an admitted copy would look gone.
    pub fn connected(&self, name: &str) -> Option<Remote> {
        let workers = self.lock();
        let w = workers.get(name)?;
        if w.lost_since.is_some() {
            return None;
        }
        let remote = w.remote.clone()?;
        let listed = remote.workloads.wait_until_ready().now_or_never();
        matches!(listed, Some(Ok(()))).then_some(remote)
    }

    /// How long worker `name` has been unreachable: zero for one never seen (a manager
    /// that restarts while a worker is down waits the whole timeout, as Kueue's does).
    pub fn lost_for(&self, name: &str) -> Duration {
        self.lock()
            .get(name)
            .and_then(|w| w.lost_since)
            .map(|t| t.elapsed())
            .unwrap_or_default()
    }

    /// Worker `name` answered with `kubeconfig`: a client and watches are made unless
    /// the same kubeconfig's are up already.
    pub fn up(
        &self,
        name: &str,
        kubeconfig: &str,
        client: Client,
        origin: &str,
        kinds: &[&'static dyn JobIntegration],
        wakers: &Wakers,
    ) {
        let mut workers = self.lock();
        if let Some(w) = workers.get_mut(name)
            && w.kubeconfig == kubeconfig
            && w.remote.is_some()
        {
            w.lost_since = None;
            return;
        }
        let (store, writer) = reflector::store::<Workload>();
        let watch = tokio::spawn(watch_worker(
            name.to_string(),
            client.clone(),
            origin.to_string(),
            kinds.to_vec(),
            writer,
            wakers.clone(),
        ));
        workers.insert(
            name.to_string(),
            Worker {
                kubeconfig: kubeconfig.to_string(),
                remote: Some(Remote {
                    client,
                    workloads: store,
                }),
                lost_since: None,
                watch: Some(watch.abort_handle()),
            },
        );
    }

    /// Worker `name` could not be reached (or is not usable): lost from now on, unless it
    /// was already. Its client and watches are kept, to notice its return.
    pub fn down(&self, name: &str) {
        let mut workers = self.lock();
        let w = workers.entry(name.to_string()).or_insert_with(|| Worker {
            kubeconfig: String::new(),
            remote: None,
            lost_since: None,
            watch: None,
        });
        w.lost_since.get_or_insert_with(Instant::now);
    }

    /// The MultiKueueCluster is gone: so are its client and watches.
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }
}

/// A manager Workload's reference.
fn workload_ref(ns: &str, name: &str) -> ObjectRef<CompactObject> {
    ObjectRef::new_with(name, Kind::Workload.api_resource()).within(ns)
}

/// The manager Workload a remote job stands for: the prebuilt Workload it names.
fn job_workload(job: &DynamicObject) -> Option<ObjectRef<CompactObject>> {
    let ns = job.namespace()?;
    Some(workload_ref(
        &ns,
        job.labels().get(PREBUILT_WORKLOAD_LABEL)?,
    ))
}

/// Watches one worker until aborted: the copies of this manager's Workloads (kept in
/// `writer`'s store) and the jobs it created there.
async fn watch_worker(
    name: String,
    client: Client,
    origin: String,
    kinds: Vec<&'static dyn JobIntegration>,
    writer: reflector::store::Writer<Workload>,
    wakers: Wakers,
) {
    let config = watcher::Config::default().labels(&format!("{ORIGIN_LABEL}={origin}"));
    let cluster = ObjectRef::<MultiKueueCluster>::new(&name);
    let (to_local, to_cluster) = (wakers.workloads.clone(), wakers.clusters.clone());
    let workloads = watcher::watcher(Api::<Workload>::all(client.clone()), config.clone())
        .default_backoff()
        .reflect(writer)
        .for_each(move |event| {
            match event {
                Ok(
                    watcher::Event::Apply(wl)
                    | watcher::Event::InitApply(wl)
                    | watcher::Event::Delete(wl),
                ) => {
                    if let Some(ns) = wl.namespace() {
                        let _ = to_local.unbounded_send(workload_ref(&ns, &wl.name_any()));
                    }
                }
                // Back after a failure (or started): the connection is checked again.
                Ok(watcher::Event::InitDone) => {
                    let _ = to_cluster.unbounded_send(cluster.clone());
                }
                Ok(watcher::Event::Init) => {}
                Err(e) => {
                    debug!(worker = %name, error = %e, "MultiKueue worker watch failed");
                    let _ = to_cluster.unbounded_send(cluster.clone());
                }
            }
            futures::future::ready(())
        });
    let jobs = kinds.into_iter().map(|kind| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &job_api_resource(&kind.gvk()));
        let to_local = wakers.workloads.clone();
        // A worker without the kind's CRD fails this watch only; it is retried with
        // backoff, and the job's creation there says why.
        watcher::watcher(api, config.clone())
            .default_backoff()
            .applied_objects()
            .for_each(move |job| {
                if let Some(r) = job.ok().as_ref().and_then(job_workload) {
                    let _ = to_local.unbounded_send(r);
                }
                futures::future::ready(())
            })
    });
    futures::join!(workloads, futures::future::join_all(jobs));
}
