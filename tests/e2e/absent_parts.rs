//! Objects as Kueue's docs write them, with optional parts left out, through the
//! controller's watches; and kuota's Events found the way `kubectl describe` finds them.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kuota::api::{ClusterQueue, ResourceFlavor};

use crate::controller::{condition, job, start_controller, wait_for_workload};
use crate::support::{
    client, controller_lock, create_cluster_queue, create_local_queue, ensure_crds, unique_name,
};

/// A ResourceFlavor with no `spec` (Kueue's quick start `default-flavor`) is a flavor with
/// no node labels: its ClusterQueue admits a Job on it. The Workload's Events carry its
/// uid, so listing Events by `involvedObject` as `kubectl describe workload` does finds
/// QuotaReserved (and no Admitted Event repeating it in the same write).
#[tokio::test]
async fn a_flavor_with_no_spec_admits_a_job_and_describe_finds_its_events() {
    let _only = controller_lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    let ns = unique_name("absent-spec");
    crate::webhook::create_namespace(&client, &ns, &[]).await;
    let (rf, cq) = (unique_name("rf"), unique_name("cq"));
    // Written as Kueue's docs write it: no spec at all (a typed object would send `{}`).
    let flavor: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": rf}
    }))
    .expect("flavor");
    let ar = ApiResource::erase::<ResourceFlavor>(&());
    let flavors: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let stored = flavors
        .create(&PostParams::default(), &flavor)
        .await
        .expect("create ResourceFlavor");
    assert!(
        stored.data.get("spec").is_none(),
        "stored as sent: {stored:?}"
    );
    create_cluster_queue(&client, &ns, &cq, &rf, "1", serde_json::json!({})).await;
    create_local_queue(&client, &ns, "lq", &cq).await;

    let (stop, task) = start_controller(&client);
    // Created suspended, as a Kueue user does without a webhook in front.
    let mut held = job(&ns, "quick-start", "500m");
    held.spec.get_or_insert_with(Default::default).suspend = Some(true);
    Api::<Job>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &held)
        .await
        .expect("create Job");
    let wl = wait_for_workload(&client, &ns, "quick-start", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let admission = wl.status.as_ref().and_then(|s| s.admission.clone());
    let assigned = serde_json::to_value(admission.map(|a| a.pod_set_assignments)).expect("json");
    assert_eq!(
        assigned[0]["flavors"]["cpu"],
        serde_json::json!(rf),
        "{assigned}"
    );

    // `kubectl describe workload`'s query: core/v1 Events by involvedObject fields.
    let (name, uid) = (
        wl.metadata.name.clone().expect("named"),
        wl.metadata.uid.clone().expect("a uid"),
    );
    let selector = format!(
        "involvedObject.name={name},involvedObject.namespace={ns},involvedObject.kind=Workload,involvedObject.uid={uid}"
    );
    let events = Api::<Event>::namespaced(client.clone(), &ns);
    let mut reasons = Vec::new();
    let mut found = false;
    for _ in 0..300 {
        let list = events
            .list(&ListParams::default().fields(&selector))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        reasons = list.iter().filter_map(|e| e.reason.clone()).collect();
        // Reserved and admitted in one write: one Event (kuota's Lean Workload Events).
        found = reasons.iter().any(|x| x == "QuotaReserved");
        if found {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    crate::webhook::delete_namespaces(&client, &[&ns]).await;
    let _ = Api::<ClusterQueue>::all(client.clone())
        .delete(&cq, &Default::default())
        .await;
    let _ = flavors.delete(&rf, &Default::default()).await;
    assert!(
        found,
        "Events found by involvedObject.uid as describe lists them: {reasons:?}"
    );
    assert!(
        !reasons.iter().any(|x| x == "Admitted"),
        "an Admitted Event repeating the QuotaReserved one: {reasons:?}"
    );
}
