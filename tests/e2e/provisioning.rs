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

/// A namespace and ClusterQueue of 1 cpu behind check `check`, with the autoscaler's CRD
/// served.
async fn fixture(prefix: &str, check: &str) -> QueueFixture {
    let fx = QueueFixture::with_queue_spec(
        prefix,
        "1",
        json!({"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}),
    )
    .await;
    install_crd(&fx.client, CRD_FILE).await;
    fx
}

/// AdmissionCheck `check` of the ProvisioningRequest controller, parameters in `config`.
async fn create_check(client: &Client, check: &str, config: &str) {
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
}

async fn create_config(client: &Client, name: &str, spec: Value) {
    let prc: ProvisioningRequestConfig = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("config");
    Api::<ProvisioningRequestConfig>::all(client.clone())
        .create(&PostParams::default(), &prc)
        .await
        .expect("create ProvisioningRequestConfig");
}

/// Submits suspended Job `name` (with a provreq annotation the request must carry), waits
/// for its Workload to reserve quota, and returns the Workload's name.
async fn submit(client: &Client, ns: &str, name: &str) -> String {
    let mut j = job(ns, name, "400m");
    j.spec.get_or_insert_with(Default::default).suspend = Some(true);
    j.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            "provreq.kueue.x-k8s.io/maxRunDurationSeconds".into(),
            "600".into(),
        );
    Api::<Job>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &j)
        .await
        .expect("create Job");
    wait_for_workload(client, ns, name, "reserved, check Pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "True")
    })
    .await;
    workload_of(client, ns, name)
        .await
        .expect("a Workload")
        .name_any()
}

/// Waits for Workload `job`'s Admitted condition and for Job `job` to run, its pods
/// consuming `request`; returns the Job's pod template.
async fn wait_started(
    client: &Client,
    ns: &str,
    job: &str,
    request: &str,
) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    wait_for_workload(client, ns, job, "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let jobs = Api::<Job>::namespaced(client.clone(), ns);
    let running = |spec: &k8s_openapi::api::batch::v1::JobSpec| {
        let consumes = spec.template.metadata.as_ref().and_then(|m| {
            m.annotations
                .as_ref()?
                .get("autoscaling.x-k8s.io/consume-provisioning-request")
                .cloned()
        });
        spec.suspend == Some(false) && consumes.as_deref() == Some(request)
    };
    let started = wait_until(Duration::from_secs(60), || {
        let jobs = jobs.clone();
        async move {
            let spec = jobs.get(job).await.ok().and_then(|j| j.spec);
            spec.is_some_and(|s| running(&s))
        }
    })
    .await;
    let spec = jobs.get(job).await.ok().and_then(|j| j.spec);
    assert!(
        started.is_some(),
        "Job {ns}/{job} did not start consuming {request}: {spec:#?}"
    );
    spec.expect("the Job's spec").template
}

/// Waits until PodTemplate `template` is owned by request `request` (kuota hands it over
/// once the request exists), and returns it.
async fn wait_handed(client: &Client, ns: &str, template: &str, request: &str) -> PodTemplate {
    let pts = Api::<PodTemplate>::namespaced(client.clone(), ns);
    let handed = wait_until(Duration::from_secs(30), || {
        let pts = pts.clone();
        async move {
            let pt = pts.get_opt(template).await.ok().flatten();
            pt.is_some_and(|pt| {
                pt.owner_references()
                    .iter()
                    .any(|o| o.kind == "ProvisioningRequest" && o.name == request)
            })
        }
    })
    .await;
    let pt = pts.get_opt(template).await.ok().flatten();
    assert!(
        handed.is_some(),
        "PodTemplate {ns}/{template} was not handed to request {request}: {pt:?}"
    );
    pt.expect("the PodTemplate")
}

/// Tears down what a test made at cluster scope, then its namespace.
async fn teardown(fx: QueueFixture, check: &str, config: &str) {
    let client = fx.client.clone();
    let _ = Api::<AdmissionCheck>::all(client.clone())
        .delete(check, &Default::default())
        .await;
    let _ = Api::<ProvisioningRequestConfig>::all(client.clone())
        .delete(config, &Default::default())
        .await;
    fx.teardown().await;
}

#[tokio::test]
async fn a_job_starts_on_the_provisioned_pool_after_a_failed_attempt_is_retried() {
    let _only = controller_lock().await;
    let (check, config) = (unique_name("prov"), unique_name("prc"));
    let fx = fixture("prov", &check).await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    // The check names a config that does not exist yet.
    create_check(&client, &check, &config).await;
    let (stop, task) = start_controller(&client);
    let missing = format!("provisioningrequestconfigs.kueue.x-k8s.io \"{config}\" not found");
    wait_active(&client, &check, ("False", "BadParametersRef", &missing)).await;

    create_config(
        &client,
        &config,
        json!({"provisioningClassName": "queued-provisioning.gke.io",
            "parameters": {"ValidUntilSeconds": "300"},
            "retryStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 1, "backoffMaxSeconds": 1},
            "podSetUpdates": {"nodeSelector": [{"key": "cloud.google.com/gke-nodepool",
                "valueFromProvisioningClassDetail": "NodePoolName"}]}}),
    )
    .await;
    wait_active(
        &client,
        &check,
        ("True", "Active", "The admission check is active"),
    )
    .await;

    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let wl_name = submit(&client, &ns, "train").await;

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
    let pt = wait_handed(&client, &ns, &template, &first).await;
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
    let template = wait_started(&client, &ns, "train", &second).await;
    let pool = template
        .spec
        .and_then(|s| s.node_selector)
        .and_then(|n| n.get("cloud.google.com/gke-nodepool").cloned());
    assert_eq!(pool.as_deref(), Some("pool-e2e"));
    let _ = stop.send(());
    let _ = task.await;
    teardown(fx, &check, &config).await;
}

/// Check `prov`'s state and message on the Workload of Job `job`.
async fn check_state(client: &Client, ns: &str, job: &str) -> (String, String) {
    let wl = workload_of(client, ns, job).await.expect("a Workload");
    let status = wl.status.expect("status");
    let state = status.admission_checks.first().expect("a check state");
    (state.state.clone(), state.message.clone())
}

/// A config naming a class that no autoscaler serves. The cluster autoscaler skips such a
/// request (its `SupportedProvisioningClass` filter) and never sets a condition on it, so
/// the check stays Pending with no message, as in Kueue: the quota stays reserved and the
/// Job suspended. Fixing the config's class replaces the request, and the Job starts.
#[tokio::test]
async fn a_class_no_autoscaler_serves_keeps_the_check_pending_until_the_config_is_fixed() {
    let _only = controller_lock().await;
    let (check, config) = (unique_name("prov"), unique_name("prc"));
    let fx = fixture("provclass", &check).await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    create_check(&client, &check, &config).await;
    create_config(
        &client,
        &config,
        json!({"provisioningClassName": "no-such-class.example.com"}),
    )
    .await;
    let (stop, task) = start_controller(&client);
    wait_active(
        &client,
        &check,
        ("True", "Active", "The admission check is active"),
    )
    .await;
    let wl_name = submit(&client, &ns, "train").await;
    let first = format!("{wl_name}-{check}-1");
    let r = wait_request(&client, &ns, &first).await;
    assert_eq!(
        r.data["spec"]["provisioningClassName"],
        "no-such-class.example.com"
    );
    // Once the template is handed to the request, kuota has acted on the request it made.
    wait_handed(&client, &ns, &format!("ppt-{first}-main"), &first).await;
    assert_eq!(
        check_state(&client, &ns, "train").await,
        ("Pending".to_string(), String::new())
    );
    let wl = workload_of(&client, &ns, "train")
        .await
        .expect("a Workload");
    assert!(condition(&wl, "Admitted").is_none_or(|c| c.0 != "True"));
    assert!(condition(&wl, "QuotaReserved").is_some_and(|c| c.0 == "True"));
    let job = Api::<Job>::namespaced(client.clone(), &ns)
        .get("train")
        .await
        .expect("get Job");
    assert_eq!(job.spec.and_then(|s| s.suspend), Some(true));

    // The class is fixed: the request made under the old one is replaced.
    Api::<ProvisioningRequestConfig>::all(client.clone())
        .patch(
            &config,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"}}),
            ),
        )
        .await
        .expect("fix the config's class");
    let old_uid = r.metadata.uid.clone();
    let replaced = wait_until(Duration::from_secs(60), || {
        let (api, first, old_uid) = (requests(&client, &ns), first.clone(), old_uid.clone());
        async move {
            let r = api.get_opt(&first).await.ok().flatten();
            r.is_some_and(|r| {
                r.metadata.uid != old_uid
                    && r.data["spec"]["provisioningClassName"]
                        == "check-capacity.autoscaling.x-k8s.io"
            })
        }
    })
    .await;
    assert!(
        replaced.is_some(),
        "{:?}",
        requests(&client, &ns)
            .get_opt(&first)
            .await
            .map(|r| r.map(|r| r.data))
    );
    autoscaler_says(
        &client,
        &ns,
        &first,
        &[("Provisioned", "capacity is available")],
        json!({}),
    )
    .await;
    wait_started(&client, &ns, "train", &first).await;
    let _ = stop.send(());
    let _ = task.await;
    teardown(fx, &check, &config).await;
}
