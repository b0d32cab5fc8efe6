//! Kueue's ProvisioningRequest admission check against the real API server, with the
//! cluster autoscaler's own CRD (vendored, see tests/fixtures/crds/PROVENANCE.md) and the
//! test playing the autoscaler: kuota makes the check Active once its config exists,
//! creates a ProvisioningRequest and its PodTemplate for the reserved Workload, retries
//! after the autoscaler reports `Failed` (a new attempt, the old request deleted), and
//! starts the Job once the request is `Provisioned`, on the node pool the autoscaler names
//! and with the annotations that make its pods consume the request.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplate;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::ApiResource;
use kube::{Client, ResourceExt};
use kuota::api::{AdmissionCheck, ProvisioningRequestConfig};
use serde_json::{Value, json};

use crate::controller::{condition, job, start_controller, wait_for_workload, workload_of};
use crate::kinds::install_crd;
use crate::support::{QueueFixture, controller_lock, unique_name, wait_until};

const CRD_FILE: &str = "autoscaling.x-k8s.io_provisioningrequests.yaml";

fn requests(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "autoscaling.x-k8s.io",
        "v1",
        "ProvisioningRequest",
    ));
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The `Active` condition of AdmissionCheck `name`: status, reason, message.
async fn active(client: &Client, name: &str) -> Option<(String, String, String)> {
    let ac = Api::<AdmissionCheck>::all(client.clone())
        .get(name)
        .await
        .ok()?;
    let c = ac
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Active")?;
    Some((c.status, c.reason, c.message))
}

async fn wait_active(client: &Client, name: &str, want: (&str, &str, &str)) {
    let want = (want.0.to_string(), want.1.to_string(), want.2.to_string());
    let seen = wait_until(Duration::from_secs(30), || {
        let (client, want) = (client.clone(), want.clone());
        async move { active(&client, name).await == Some(want) }
    })
    .await;
    assert!(
        seen.is_some(),
        "AdmissionCheck {name}: {:?}",
        active(client, name).await
    );
}

/// Waits for request `name` and returns it.
async fn wait_request(client: &Client, ns: &str, name: &str) -> DynamicObject {
    let api = requests(client, ns);
    let found = wait_until(Duration::from_secs(60), || {
        let api = api.clone();
        async move { api.get_opt(name).await.ok().flatten().is_some() }
    })
    .await;
    assert!(found.is_some(), "no ProvisioningRequest {ns}/{name}");
    api.get(name).await.expect("the ProvisioningRequest")
}

/// Sets the request's conditions and class details, as the autoscaler does.
async fn autoscaler_says(
    client: &Client,
    ns: &str,
    name: &str,
    conditions: &[(&str, &str)],
    details: Value,
) {
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|(t, m)| {
            json!({"type": t, "status": "True", "reason": "ByTest", "message": m,
            "lastTransitionTime": "2026-01-01T00:00:00Z"})
        })
        .collect();
    requests(client, ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"conditions": conditions, "provisioningClassDetails": details}}),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("set the status of ProvisioningRequest {ns}/{name}: {e}"));
}

#[tokio::test]
async fn a_job_starts_on_the_provisioned_pool_after_a_failed_attempt_is_retried() {
    let _only = controller_lock().await;
    let (check, config) = (unique_name("prov"), unique_name("prc"));
    let fx = QueueFixture::with_queue_spec(
        "prov",
        "1",
        json!({"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}),
    )
    .await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    install_crd(&client, CRD_FILE).await;
    // The check names a config that does not exist yet.
    let ac: AdmissionCheck = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": check},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": config}}
    }))
    .expect("check");
    Api::<AdmissionCheck>::all(client.clone())
        .create(&PostParams::default(), &ac)
        .await
        .expect("create AdmissionCheck");
    let (stop, task) = start_controller(&client);
    let missing = format!("provisioningrequestconfigs.kueue.x-k8s.io \"{config}\" not found");
    wait_active(&client, &check, ("False", "BadParametersRef", &missing)).await;

    let prc: ProvisioningRequestConfig = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig",
        "metadata": {"name": config},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io",
            "parameters": {"ValidUntilSeconds": "300"},
            "retryStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 1, "backoffMaxSeconds": 1},
            "podSetUpdates": {"nodeSelector": [{"key": "cloud.google.com/gke-nodepool",
                "valueFromProvisioningClassDetail": "NodePoolName"}]}}
    }))
    .expect("config");
    Api::<ProvisioningRequestConfig>::all(client.clone())
        .create(&PostParams::default(), &prc)
        .await
        .expect("create ProvisioningRequestConfig");
    wait_active(
        &client,
        &check,
        ("True", "Active", "The admission check is active"),
    )
    .await;

    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let mut j = job(&ns, "train", "400m");
    j.spec.get_or_insert_with(Default::default).suspend = Some(true);
    j.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            "provreq.kueue.x-k8s.io/maxRunDurationSeconds".into(),
            "600".into(),
        );
    jobs.create(&PostParams::default(), &j)
        .await
        .expect("create Job");
    wait_for_workload(&client, &ns, "train", "reserved, check Pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "True")
    })
    .await;
    let wl = workload_of(&client, &ns, "train")
        .await
        .expect("a Workload");
    let wl_name = wl.name_any();

    // Attempt 1: the request, owned by the Workload, and its template, owned by the request.
    let first = format!("{wl_name}-{check}-1");
    let r = wait_request(&client, &ns, &first).await;
    assert_eq!(
        r.data["spec"]["provisioningClassName"],
        "queued-provisioning.gke.io"
    );
    assert_eq!(
        r.data["spec"]["parameters"],
        json!({"ValidUntilSeconds": "300", "maxRunDurationSeconds": "600"})
    );
    let template = format!("ppt-{first}-main");
    assert_eq!(
        r.data["spec"]["podSets"],
        json!([{"podTemplateRef": {"name": template}, "count": 1}])
    );
    let owner = &r.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Workload", wl_name.as_str())
    );
    let pts = Api::<PodTemplate>::namespaced(client.clone(), &ns);
    let handed = wait_until(Duration::from_secs(30), || {
        let (pts, template) = (pts.clone(), template.clone());
        async move {
            let pt = pts.get_opt(&template).await.ok().flatten();
            pt.is_some_and(|pt| {
                pt.owner_references()
                    .first()
                    .is_some_and(|o| o.kind == "ProvisioningRequest")
            })
        }
    })
    .await;
    assert!(
        handed.is_some(),
        "the PodTemplate was not handed to the request"
    );
    let pt = pts.get(&template).await.expect("the PodTemplate");
    assert_eq!(
        pt.labels()
            .get("kueue.x-k8s.io/managed")
            .map(String::as_str),
        Some("true")
    );

    // The autoscaler fails it: the check is retried, and attempt 2 replaces attempt 1.
    autoscaler_says(
        &client,
        &ns,
        &first,
        &[("Failed", "no capacity in the zone")],
        json!({}),
    )
    .await;
    let second = format!("{wl_name}-{check}-2");
    wait_request(&client, &ns, &second).await;
    let wl = workload_of(&client, &ns, "train")
        .await
        .expect("a Workload");
    let state = &wl.status.as_ref().expect("status").admission_checks[0];
    assert_eq!(state.retry_count, Some(1), "{state:?}");
    let gone = wait_until(Duration::from_secs(30), || {
        let (api, first) = (requests(&client, &ns), first.clone());
        async move { api.get_opt(&first).await.is_ok_and(|r| r.is_none()) }
    })
    .await;
    assert!(gone.is_some(), "attempt 1 was not deleted");
    let suspended = jobs
        .get("train")
        .await
        .expect("get Job")
        .spec
        .and_then(|s| s.suspend);
    assert_eq!(suspended, Some(true));

    // Provisioned: the check is Ready, and the Job starts on the pool, consuming the request.
    autoscaler_says(
        &client,
        &ns,
        &second,
        &[("Accepted", ""), ("Provisioned", "capacity is ready")],
        json!({"NodePoolName": "pool-e2e"}),
    )
    .await;
    wait_for_workload(&client, &ns, "train", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let started = wait_until(Duration::from_secs(60), || {
        let (jobs, second) = (jobs.clone(), second.clone());
        async move {
            let Some(spec) = jobs.get("train").await.ok().and_then(|j| j.spec) else {
                return false;
            };
            let t = spec.template;
            let pool = t
                .spec
                .and_then(|s| s.node_selector)
                .and_then(|n| n.get("cloud.google.com/gke-nodepool").cloned());
            let consumes = t.metadata.and_then(|m| m.annotations).and_then(|a| {
                a.get("autoscaling.x-k8s.io/consume-provisioning-request")
                    .cloned()
            });
            spec.suspend == Some(false)
                && pool.as_deref() == Some("pool-e2e")
                && consumes.as_deref() == Some(second.as_str())
        }
    })
    .await;
    assert!(
        started.is_some(),
        "{:#?}",
        jobs.get("train").await.map(|j| j.spec)
    );
    let _ = stop.send(());
    let _ = task.await;
    let _ = Api::<AdmissionCheck>::all(client.clone())
        .delete(&check, &Default::default())
        .await;
    let _ = Api::<ProvisioningRequestConfig>::all(client.clone())
        .delete(&config, &Default::default())
        .await;
    fx.teardown().await;
}
