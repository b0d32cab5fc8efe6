//! ClusterQueues and ResourceFlavors admitted through kuota's webhook can be deleted: the
//! webhook adds no `kueue.x-k8s.io/resource-in-use` finalizer that nothing would remove.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kuota::api::{ClusterQueue, ResourceFlavor};
use kuota::policy::PolicySet;

use super::{E2E_LABEL, Kuota, Registration};
use crate::support::{client, ensure_crds, unique_name, wait_until};

#[tokio::test]
async fn a_cluster_queue_and_a_flavor_created_through_kuota_can_be_deleted() {
    let client = client().await;
    ensure_crds(&client).await;
    let run = unique_name("wh-fin");
    let mut kuota = Kuota::start(&client, PolicySet::default()).await;
    let reg = Registration::create(&client, kuota.addr, &kuota.ca_pem, &[&run], &run).await;

    let cases = [
        (
            ApiResource::erase::<ResourceFlavor>(&()),
            serde_json::json!({"spec": {}}),
        ),
        (
            ApiResource::erase::<ClusterQueue>(&()),
            serde_json::json!({"spec": {"namespaceSelector": {}}}),
        ),
    ];
    for (ar, body) in cases {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": ar.api_version, "kind": ar.kind,
            "metadata": {"name": run, "labels": {E2E_LABEL: run}},
            "spec": body["spec"],
        }))
        .expect("object");
        obj.types = Some(kube::api::TypeMeta {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
        });
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {} {run}: {e}", ar.kind));
        assert!(
            kuota.largest_review.load(Ordering::Relaxed) > 0,
            "the {} went through kuota's webhooks",
            ar.kind
        );
        let finalizers = created.metadata.finalizers.clone().unwrap_or_default();
        assert!(
            !finalizers
                .iter()
                .any(|f| f == "kueue.x-k8s.io/resource-in-use"),
            "{} {run} got {finalizers:?}",
            ar.kind
        );
        api.delete(&run, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete {} {run}: {e}", ar.kind));
        let gone = wait_until(Duration::from_secs(30), || {
            let api = api.clone();
            let run = run.clone();
            async move { matches!(api.get_opt(&run).await, Ok(None)) }
        })
        .await;
        assert!(
            gone.is_some(),
            "{} {run} still exists 30 s after delete",
            ar.kind
        );
    }

    reg.delete().await;
    kuota.stop().await;
}
