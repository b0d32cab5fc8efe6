//! Kueue's `kueue.x-k8s.io/resource-in-use` finalizer, kept by the queue controller against
//! the real API server: a ClusterQueue (and the ResourceFlavor it names) being deleted
//! stays until the work it admitted is done, then goes.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, Resource};
use kuota::api::{ClusterQueue, ResourceFlavor};

use crate::controller::{condition, finish_pods, job, start_controller, wait_for_workload};
use crate::support::{client, controller_lock, ensure_crds, quota, unique_name, wait_until};
use crate::webhook::{create_namespace, delete_namespaces};

const FINALIZER: &str = "kueue.x-k8s.io/resource-in-use";

fn has_finalizer<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_until(Duration::from_secs(30), || async move {
        api.get_opt(name).await.is_ok_and(|o| o.is_none())
    })
    .await
    .unwrap_or_else(|| panic!("{what} {name} was not deleted within 30 s"));
}

#[tokio::test]
async fn a_cluster_queue_in_use_is_deleted_only_once_its_workload_finished() {
    let _only = controller_lock().await;
    let client: &Client = &client().await;
    ensure_crds(client).await;
    let ns = &unique_name("in-use");
    create_namespace(client, ns, &[]).await;
    let (rf, cq) = quota(client, ns, "1").await;
    let (stop, task) = start_controller(client);
    let (cqs, rfs) = (
        &Api::<ClusterQueue>::all(client.clone()),
        &Api::<ResourceFlavor>::all(client.clone()),
    );
    let (cq, rf) = (&cq, &rf);
    wait_until(Duration::from_secs(30), || async move {
        let cq_has = cqs.get(cq).await.is_ok_and(|o| has_finalizer(&o));
        let rf_has = rfs.get(rf).await.is_ok_and(|o| has_finalizer(&o));
        cq_has && rf_has
    })
    .await
    .expect("the controller adds the finalizer to the ClusterQueue and its flavor");

    let mut holds = job(ns, "holds", "600m");
    holds.spec.get_or_insert_with(Default::default).suspend = Some(true);
    Api::<Job>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &holds)
        .await
        .expect("create Job");
    wait_for_workload(client, ns, "holds", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let pods = &Api::<Pod>::namespaced(client.clone(), ns);
    wait_until(Duration::from_secs(60), || async move {
        pods.list(&ListParams::default().labels("job-name=holds"))
            .await
            .is_ok_and(|l| !l.items.is_empty())
    })
    .await
    .expect("kube-controller-manager creates the admitted Job's Pod");

    // Deleted while a workload holds quota in it: both stay, marked for deletion.
    let _ = rfs
        .delete(rf, &Default::default())
        .await
        .expect("delete flavor");
    let _ = cqs
        .delete(cq, &Default::default())
        .await
        .expect("delete ClusterQueue");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let terminating = cqs.get(cq).await.expect("the ClusterQueue is still there");
    assert!(terminating.metadata.deletion_timestamp.is_some() && has_finalizer(&terminating));
    // Kueue's Active condition of a terminating ClusterQueue (published on the next tick).
    wait_until(Duration::from_secs(10), || async move {
        cqs.get(cq)
            .await
            .ok()
            .and_then(|q| q.status)
            .is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Active"
                        && c.status == "False"
                        && c.reason == "Terminating"
                        && c.message == "Can't admit new workloads; clusterQueue is terminating"
                })
            })
    })
    .await
    .expect("the terminating ClusterQueue says so in its Active condition");
    let terminating = rfs.get(rf).await.expect("the flavor is still there");
    assert!(terminating.metadata.deletion_timestamp.is_some() && has_finalizer(&terminating));

    // The workload finishes: nothing holds quota any more, and both go.
    assert!(finish_pods(client, ns, "holds").await >= 1);
    wait_for_workload(client, ns, "holds", "finished", |wl| {
        condition(wl, "Finished").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_gone(cqs, cq, "ClusterQueue").await;
    wait_gone(rfs, rf, "ResourceFlavor").await;

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    delete_namespaces(client, &[ns]).await;
}
