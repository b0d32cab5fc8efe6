//! The admission webhook and its watch-fed index against a real API server.

use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kuota::api::LocalQueue;
use kuota::webhook::feed;
use kuota::webhook::index::ClusterIndex;

use crate::support::{client, ensure_crds};

#[tokio::test]
async fn watches_fill_the_webhook_index_with_every_local_queue() {
    let client = client().await;
    ensure_crds(&client).await;
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
    let listed = Api::<LocalQueue>::all(client)
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
    for t in tasks {
        t.abort();
    }
}
