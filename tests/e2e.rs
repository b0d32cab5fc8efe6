//! End-to-end checks against a real cluster with Kueue's CRDs installed.
//!
//! Runs only when `KUOTA_E2E_KUBECONFIG` names a kubeconfig file; otherwise each test
//! prints a notice and passes without touching the network.

use std::sync::Arc;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use kuota::api::LocalQueue;
use kuota::webhook::feed;
use kuota::webhook::index::ClusterIndex;

async fn client() -> Option<Client> {
    let Ok(path) = std::env::var("KUOTA_E2E_KUBECONFIG") else {
        eprintln!("e2e: KUOTA_E2E_KUBECONFIG is not set; skipping the cluster tests");
        return None;
    };
    let kubeconfig =
        Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("KUOTA_E2E_KUBECONFIG={path}: {e}"));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("KUOTA_E2E_KUBECONFIG={path}: {e}"));
    Some(Client::try_from(config).expect("client from kubeconfig"))
}

#[tokio::test]
async fn watches_fill_the_webhook_index_with_every_local_queue() {
    let Some(client) = client().await else {
        return;
    };
    let index = Arc::new(ClusterIndex::default());
    let tasks = feed::spawn(client.clone(), index.clone());
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
