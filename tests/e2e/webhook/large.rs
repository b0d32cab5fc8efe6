//! A large Job through the webhook: a 3,000-container Job is created, and the review of an
//! unsuspend that also adds scheduling directives (what an admission does) is larger than
//! the 3 MiB the webhook used to accept, and passes.

use std::sync::atomic::Ordering;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kuota::api::constants::QUEUE_NAME_LABEL;
use kuota::policy::PolicySet;

use super::{Kuota, Registration, create_namespace, delete_namespaces};
use crate::support::{client, unique_name};

const CONTAINERS: usize = 3_000;

/// 3,000 hardened containers: about 1 MB as JSON once defaulted, as large as an API
/// server with etcd's default 1.5 MiB request limit stores.
fn big_job(ns: &str) -> Job {
    let containers: Vec<serde_json::Value> = (0..CONTAINERS)
        .map(|i| {
            serde_json::json!({
                "name": format!("c{i}"), "image": "busybox",
                "resources": {"requests": {"cpu": "1m"}, "limits": {"cpu": "1m"}},
                "securityContext": {
                    "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true, "privileged": false, "runAsUser": 1000, "runAsGroup": 1000
                }
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": "big", "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {"suspend": true, "template": {"spec": {
            "restartPolicy": "Never", "containers": containers
        }}}
    }))
    .expect("job")
}

#[tokio::test]
async fn a_3000_container_job_is_created_and_unsuspended() {
    let client = client().await;
    let ns = unique_name("wh-large");
    create_namespace(&client, &ns, &[]).await;
    let mut kuota = Kuota::start(&client, PolicySet::default()).await;
    let reg = Registration::create(&client, kuota.addr, &kuota.ca_pem, &[&ns], &ns).await;
    let api = Api::<Job>::namespaced(client.clone(), &ns);

    let created = api.create(&PostParams::default(), &big_job(&ns)).await;
    assert!(created.is_ok(), "create: {:?}", created.err());
    assert!(
        kuota.largest_review.load(Ordering::Relaxed) > 1_000_000,
        "the CREATE review went through kuota"
    );

    // Unsuspend while adding 15,000 tolerations, as a dry run: the API server runs
    // admission (object and old object in one review, well over 3 MiB) but stores nothing,
    // so etcd's request limit does not get in the way.
    let tolerations: Vec<serde_json::Value> = (0..15_000)
        .map(|i| {
            serde_json::json!({"key": format!("kuota.dev/pad-{i:05}"), "operator": "Equal",
                "value": "v", "effect": "NoSchedule"})
        })
        .collect();
    let patch = serde_json::json!({"spec": {"suspend": false,
        "template": {"spec": {"tolerations": tolerations}}}});
    let dry = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let outcome = api.patch("big", &dry, &Patch::Merge(&patch)).await;
    assert!(outcome.is_ok(), "dry-run unsuspend: {:?}", outcome.err());
    let largest = kuota.largest_review.load(Ordering::Relaxed);
    assert!(
        largest > 3 * 1024 * 1024,
        "the UPDATE review was {largest} bytes; it should exceed the old 3 MiB limit"
    );

    // And the real unsuspend.
    let patch = serde_json::json!({"spec": {"suspend": false}});
    let outcome = api
        .patch("big", &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    assert!(outcome.is_ok(), "unsuspend: {:?}", outcome.err());

    reg.delete().await;
    kuota.stop().await;
    delete_namespaces(&client, &[&ns]).await;
}
