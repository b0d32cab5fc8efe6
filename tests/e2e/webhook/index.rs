//! The admission webhook and its watch-fed index against a real API server.

use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kuota::api::LocalQueue;
use kuota::webhook::feed;
use kuota::webhook::index::ClusterIndex;

use super::{create_namespace, delete_namespaces};
use crate::support::{client, ensure_crds, unique_name, wait_until};

#[tokio::test]
async fn watches_fill_the_webhook_index_with_every_local_queue() {
    let client = client().await;
    ensure_crds(&client).await;
    let ns = unique_name("wh-index");
    create_namespace(&client, &ns, &[]).await;
    let lq: LocalQueue = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"namespace": ns, "name": "default"}, "spec": {"clusterQueue": "cq-e2e"}
    }))
    .expect("LocalQueue");
    let queues = Api::<LocalQueue>::namespaced(client.clone(), &ns);
    queues
        .create(&PostParams::default(), &lq)
        .await
        .expect("create LocalQueue");
    let index = Arc::new(ClusterIndex::default());
    let tasks = feed::spawn(client.clone(), index.clone(), Default::default());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !index.is_synced() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cluster index did not sync within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = Api::<LocalQueue>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list LocalQueues");
    for lq in listed {
        let (ns, name) = (
            lq.metadata.namespace.clone().unwrap_or_default(),
            lq.metadata.name.clone().unwrap_or_default(),
        );
        assert_eq!(
            index.cluster_queue_of(&ns, &name).as_deref(),
            Some(lq.spec.cluster_queue.as_str()),
            "LocalQueue {ns}/{name} missing from the index"
        );
    }
    assert!(index.has_default_local_queue(&ns), "the test's LocalQueue");
    // A delete reaches the index through the watch.
    queues
        .delete("default", &DeleteParams::default())
        .await
        .expect("delete LocalQueue");
    let forgotten = wait_until(Duration::from_secs(30), || {
        let gone = !index.local_queue_exists(&ns, "default");
        async move { gone }
    })
    .await;
    assert!(
        forgotten.is_some(),
        "the deleted LocalQueue is still in the index"
    );
    for t in tasks {
        t.abort();
    }
    delete_namespaces(&client, &[&ns]).await;
}
