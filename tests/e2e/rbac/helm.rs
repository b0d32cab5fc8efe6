//! The Helm chart's RBAC, not only the kustomize install's: `helm template` of the chart,
//! its ServiceAccounts, ClusterRoles, Roles and bindings applied under names of their own
//! (so they live beside the kustomize install's), and a preemption run by kuota's
//! controller and webhook with those accounts' tokens. Helm comes from `.ci/install-helm`
//! (or `$KUOTA_HELM`); without it this test fails and says so.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kuota::controller::{ControllerConfig, run};
use kuota::policy::PolicySet;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{KUOTA_NAMESPACE, apply, assert_permitted, rbac_objects, service_account_client};
use crate::controller::{condition, wait_for_workload};
use crate::preemption::{low_and_high_classes, prioritized_job, wait_pods_gone, wait_started};
use crate::support::{QueueFixture, controller_lock};
use crate::webhook::Kuota;

/// What the chart's object names get appended in this test.
const SUFFIX: &str = "-e2e-helm";

/// `helm template kuota manifests/helm/kuota` (default values): its RBAC objects.
fn chart_rbac() -> Vec<Value> {
    let bin = std::env::var("KUOTA_HELM").unwrap_or_else(|_| "helm".into());
    let out = std::process::Command::new(&bin)
        .args(["template", "kuota", "manifests/helm/kuota"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running {bin}: {e}. This test needs Helm v4 on the PATH: `.ci/install-helm` \
                 installs it (or set KUOTA_HELM)"
            )
        });
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rbac_objects(&String::from_utf8_lossy(&out.stdout))
}

/// The chart's objects renamed `<name><SUFFIX>` (references too); the namespace is the
/// kustomize install's and is left out.
fn renamed(objects: Vec<Value>) -> Vec<Value> {
    let rename = |v: &mut Value| {
        let name = v.as_str().expect("a name").to_string();
        *v = Value::from(format!("{name}{SUFFIX}"));
    };
    objects
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(|mut o| {
            rename(&mut o["metadata"]["name"]);
            if let Some(role_ref) = o.get_mut("roleRef") {
                rename(&mut role_ref["name"]);
            }
            let subjects = o.get_mut("subjects").and_then(Value::as_array_mut);
            for subject in subjects.into_iter().flatten() {
                assert_eq!(subject["kind"], "ServiceAccount", "{subject}");
                assert_eq!(subject["namespace"], KUOTA_NAMESPACE, "{subject}");
                rename(&mut subject["name"]);
            }
            o
        })
        .collect()
}

#[tokio::test]
async fn under_the_helm_charts_rbac_a_higher_priority_job_preempts_a_running_one() {
    let _only = controller_lock().await;
    let objects = renamed(chart_rbac());
    let accounts: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    let (controller_sa, webhook_sa) = (
        format!("kuota-controller{SUFFIX}"),
        format!("kuota-webhook{SUFFIX}"),
    );
    assert!(
        accounts.contains(&controller_sa.as_str()) && accounts.contains(&webhook_sa.as_str()),
        "the chart renders both ServiceAccounts: {accounts:?}"
    );
    let fx = QueueFixture::with_queue_spec(
        "rbac-helm",
        "1",
        json!({"preemption": {"withinClusterQueue": "LowerPriority"}}),
    )
    .await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    // kuota-system exists once the kustomize install's RBAC is in.
    super::installed().await;
    apply(&client, &objects).await;
    let (low, high) = low_and_high_classes(&client).await;

    let (webhook_client, webhook_record) =
        service_account_client(KUOTA_NAMESPACE, &webhook_sa).await;
    let mut webhook = Kuota::start_as(&webhook_client, PolicySet::default()).await;
    let (controller_client, controller_record) =
        service_account_client(KUOTA_NAMESPACE, &controller_sa).await;
    let (stop, stopped) = oneshot::channel::<()>();
    let controller = tokio::spawn(run(controller_client, ControllerConfig::default(), async {
        let _ = stopped.await;
    }));

    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    jobs.create(
        &PostParams::default(),
        &prioritized_job(&ns, "victim", "600m", &low),
    )
    .await
    .expect("create Job victim");
    wait_for_workload(&client, &ns, "victim", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_started(&jobs, &pods, "victim", &rf).await;
    jobs.create(
        &PostParams::default(),
        &prioritized_job(&ns, "preemptor", "600m", &high),
    )
    .await
    .expect("create Job preemptor");
    wait_for_workload(&client, &ns, "victim", "preempted", |wl| {
        condition(wl, "Preempted").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_pods_gone(&pods, "victim").await;
    wait_for_workload(&client, &ns, "preemptor", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    wait_started(&jobs, &pods, "preemptor", &rf).await;
    // A suspended Job that is not admitted must not carry a startTime (Kueue's reconciler
    // clears it, so activeDeadlineSeconds counts from the next start). The Job controller
    // clears it itself when it suspends a Job, which usually wins the race; one it left
    // behind (set here, as a lagging controller would) is kuota's to clear: a jobs/status
    // patch.
    jobs.patch_status(
        "victim",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"startTime": "2026-01-01T00:00:00Z"}})),
    )
    .await
    .expect("a startTime on the suspended victim");
    let cleared = crate::support::wait_until(Duration::from_secs(30), || {
        let jobs = jobs.clone();
        async move {
            jobs.get("victim").await.is_ok_and(|j| {
                j.spec.and_then(|s| s.suspend) == Some(true)
                    && j.status.and_then(|s| s.start_time).is_none()
            })
        }
    })
    .await;
    assert!(
        cleared.is_some(),
        "kuota did not clear the pending victim's status.startTime; refused: {:?}",
        controller_record
            .counts()
            .iter()
            .map(|(access, n)| format!("{access} ({n}x)"))
            .collect::<Vec<_>>()
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), controller).await;
    webhook.stop().await;
    assert_permitted(
        &format!("kuota's controller ({controller_sa}, the chart's RBAC)"),
        &controller_record,
    );
    assert_permitted(
        &format!("kuota's webhook ({webhook_sa}, the chart's RBAC)"),
        &webhook_record,
    );
    for name in [&low, &high] {
        let _ = Api::<kuota::api::WorkloadPriorityClass>::all(client.clone())
            .delete(name, &Default::default())
            .await;
    }
    fx.teardown().await;
}
