//! Counts, per job, the pods kuota started that have succeeded, from one watch of the
//! pods carrying Kueue's pod-set label, and wakes the job's reconciler when one succeeds:
//! under load a job's operator counts its pods seconds after they end, and a job whose
//! success they already decide is finishing, not a preemption victim.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::api::constants::PODSET_LABEL;
use crate::controller::compact::CompactObject;

/// One pod: the uid of the job that controls it, and whether it succeeded.
type Entry = (String, bool);

/// The succeeded pods of each job of one kind, by the job's uid.
#[derive(Default)]
pub struct SucceededPods {
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    by_pod: HashMap<String, Entry>,
    succeeded: HashMap<String, u32>,
    /// A relist in progress: the pods listed so far, swapped in when it ends.
    relist: Option<HashMap<String, Entry>>,
}

impl Index {
    fn set(&mut self, pod: String, entry: Option<Entry>) {
        if let Some((owner, true)) = self.by_pod.remove(&pod) {
            self.count(&owner, false);
        }
        if let Some(entry) = entry {
            if entry.1 {
                self.count(&entry.0, true);
            }
            self.by_pod.insert(pod, entry);
        }
    }

    fn count(&mut self, owner: &str, up: bool) {
        if up {
            *self.succeeded.entry(owner.to_string()).or_default() += 1;
        } else if let Some(n) = self.succeeded.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.succeeded.remove(owner);
            }
        }
    }

    fn replace(&mut self, pods: HashMap<String, Entry>) {
        self.by_pod.clear();
        self.succeeded.clear();
        for (pod, entry) in pods {
            self.set(pod, Some(entry));
        }
    }
}

impl SucceededPods {
    /// Pods of the job with this uid seen `Succeeded`.
    pub fn succeeded(&self, job_uid: &str) -> u32 {
        self.lock().succeeded.get(job_uid).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Applies one watch event about pods controlled by jobs of `kind`.
    fn observe(&self, event: &watcher::Event<Pod>, kind: &GroupVersionKind) {
        let mut index = self.lock();
        match event {
            watcher::Event::Apply(pod) => {
                let uid = pod.uid().unwrap_or_default();
                index.set(uid, entry(pod, kind));
            }
            watcher::Event::Delete(pod) => index.set(pod.uid().unwrap_or_default(), None),
            watcher::Event::Init => index.relist = Some(HashMap::new()),
            watcher::Event::InitApply(pod) => {
                if let (Some(relist), Some(e)) = (index.relist.as_mut(), entry(pod, kind)) {
                    relist.insert(pod.uid().unwrap_or_default(), e);
                }
            }
            watcher::Event::InitDone => {
                let pods = index.relist.take().unwrap_or_default();
                index.replace(pods);
            }
        }
    }
}

/// The pod's controlling job of `kind` (its uid) and whether the pod succeeded; `None`
/// for a pod no such job controls.
fn entry(pod: &Pod, kind: &GroupVersionKind) -> Option<Entry> {
    let owner = controlling_job(pod, kind)?;
    Some((owner.uid.clone(), succeeded(pod)))
}

fn succeeded(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
}

fn controlling_job<'p>(
    pod: &'p Pod,
    kind: &GroupVersionKind,
) -> Option<&'p k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    pod.owner_references().iter().find(|o| {
        o.controller == Some(true) && o.kind == kind.kind && o.api_version == kind.api_version()
    })
}

/// Watches the pods kuota started for jobs of `kind` (their template carries the pod-set
/// label from the start): the counts, and a stream of the jobs (as `resource`) one of
/// whose pods is seen `Succeeded`.
pub fn watch(
    client: Client,
    kind: GroupVersionKind,
    resource: ApiResource,
) -> (
    std::sync::Arc<SucceededPods>,
    impl Stream<Item = ObjectRef<CompactObject>> + Send + 'static,
) {
    let pods = std::sync::Arc::new(SucceededPods::default());
    let counts = pods.clone();
    let kind_of_event = kind.clone();
    let stream = watcher::watcher(
        Api::<Pod>::all(client),
        watcher::Config::default().labels(PODSET_LABEL),
    )
    .default_backoff()
    .inspect(move |event| {
        if let Ok(event) = event {
            counts.observe(event, &kind_of_event);
        }
    })
    .touched_objects()
    .filter_map(move |pod| {
        let job = pod.ok().filter(succeeded).and_then(|pod| {
            let owner = controlling_job(&pod, &kind)?;
            let ns = pod.namespace()?;
            Some(ObjectRef::new_with(&owner.name, resource.clone()).within(&ns))
        });
        futures::future::ready(job)
    });
    (pods, stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job_kind() -> GroupVersionKind {
        GroupVersionKind::gvk("batch", "v1", "Job")
    }

    fn pod(uid: &str, owner: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": uid, "namespace": "ns", "uid": uid, "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": owner, "controller": true}]},
            "status": {"phase": phase}
        }))
        .expect("pod")
    }

    #[test]
    fn counts_follow_pods_through_changes_deletes_and_relists() {
        let pods = SucceededPods::default();
        let kind = job_kind();
        pods.observe(&watcher::Event::Apply(pod("p1", "j1", "Running")), &kind);
        assert_eq!(pods.succeeded("j1"), 0);
        pods.observe(&watcher::Event::Apply(pod("p1", "j1", "Succeeded")), &kind);
        pods.observe(&watcher::Event::Apply(pod("p1", "j1", "Succeeded")), &kind);
        pods.observe(&watcher::Event::Apply(pod("p2", "j1", "Succeeded")), &kind);
        pods.observe(&watcher::Event::Apply(pod("p3", "j2", "Failed")), &kind);
        assert_eq!((pods.succeeded("j1"), pods.succeeded("j2")), (2, 0));
        pods.observe(&watcher::Event::Delete(pod("p2", "j1", "Succeeded")), &kind);
        assert_eq!(pods.succeeded("j1"), 1);
        // A relist replaces everything once it is complete, not before.
        pods.observe(&watcher::Event::Init, &kind);
        pods.observe(
            &watcher::Event::InitApply(pod("p4", "j2", "Succeeded")),
            &kind,
        );
        assert_eq!((pods.succeeded("j1"), pods.succeeded("j2")), (1, 0));
        pods.observe(&watcher::Event::InitDone, &kind);
        assert_eq!((pods.succeeded("j1"), pods.succeeded("j2")), (0, 1));
    }

    #[test]
    fn pods_no_job_of_the_kind_controls_are_not_counted() {
        let pods = SucceededPods::default();
        let mut other = pod("p1", "j1", "Succeeded");
        other.metadata.owner_references.as_mut().expect("owners")[0].kind = "JobSet".into();
        let mut not_controller = pod("p2", "j1", "Succeeded");
        not_controller
            .metadata
            .owner_references
            .as_mut()
            .expect("owners")[0]
            .controller = None;
        for p in [other, not_controller] {
            pods.observe(&watcher::Event::Apply(p), &job_kind());
        }
        assert_eq!(pods.succeeded("j1"), 0);
    }
}
