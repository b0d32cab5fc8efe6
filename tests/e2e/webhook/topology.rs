//! Topology levels through kuota's webhook: as in current Kueue, they may change while
//! `kubernetes.io/hostname` stays the lowest level, and not otherwise.

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kuota::api::Topology;
use kuota::policy::PolicySet;

use super::{E2E_LABEL, Kuota, Registration};
use crate::support::{client, ensure_crds, unique_name};

fn levels(labels: &[&str]) -> serde_json::Value {
    labels
        .iter()
        .map(|l| serde_json::json!({"nodeLabel": l}))
        .collect()
}

#[tokio::test]
async fn topology_levels_change_only_above_the_hostname_level() {
    let client = client().await;
    ensure_crds(&client).await;
    let run = unique_name("wh-topo");
    let mut kuota = Kuota::start(&client, PolicySet::default()).await;
    let reg = Registration::create(&client, kuota.addr, &kuota.ca_pem, &[&run], &run).await;
    let ar = ApiResource::erase::<Topology>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": run, "labels": {E2E_LABEL: run}},
        "spec": {"levels": levels(&["example.com/rack", "kubernetes.io/hostname"])},
    }))
    .expect("topology");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create Topology");

    let set = |l: serde_json::Value| serde_json::json!({"spec": {"levels": l}});
    let pp = PatchParams::default();
    let added = set(levels(&[
        "example.com/block",
        "example.com/rack",
        "kubernetes.io/hostname",
    ]));
    let outcome = api.patch(&run, &pp, &Patch::Merge(&added)).await;
    assert!(outcome.is_ok(), "a level above the hostname: {outcome:?}");

    let no_host = set(levels(&["example.com/block", "example.com/rack"]));
    match api.patch(&run, &pp, &Patch::Merge(&no_host)).await {
        Ok(_) => panic!("dropping the hostname level must be refused"),
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains(
                "levels are mutable only when kubernetes.io/hostname is the lowest level both \
                 before and after the change"
            ),
            "{}",
            s.message
        ),
        Err(e) => panic!("unexpected error: {e}"),
    }

    let _ = api.delete(&run, &DeleteParams::default()).await;
    reg.delete().await;
    kuota.stop().await;
}
