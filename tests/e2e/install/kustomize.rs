//! `kubectl apply --server-side -k manifests/` (and its overlays) validated by the real API
//! server with `--dry-run=server`: every object of the install, CRDs included, is admitted
//! as it would be applied. Prometheus Operator and cert-manager are not installed here, so
//! their kinds get minimal stand-in CRDs that check apiVersion, kind and metadata only (the
//! ServiceMonitor, Issuer and Certificate specs are not schema-checked).

use std::process::Command;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::{client, ensure_crds, kubeconfig_path, wait_until};

/// The kubectl to use: `$KUOTA_K8S_KUBECTL` (set by the control plane's `cluster env`) or
/// `kubectl` on the PATH.
pub fn kubectl(args: &[&str]) -> (bool, String, String) {
    let bin = std::env::var("KUOTA_K8S_KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = Command::new(&bin)
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("running {bin} (set KUOTA_K8S_KUBECTL): {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Server-side dry run of a kustomization; returns kubectl's lines.
fn dry_run(dir: &str) -> Vec<String> {
    let (ok, stdout, stderr) = kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-k",
        dir,
    ]);
    assert!(
        ok,
        "kubectl apply --dry-run=server -k {dir} failed:\n{stderr}\n{stdout}"
    );
    stdout.lines().map(str::to_string).collect()
}

/// Namespaced objects are dry-run into kuota-system, which must exist for that.
pub(super) async fn ensure_kuota_system(client: &Client) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "kuota-system"}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .patch(
            "kuota-system",
            &PatchParams::apply("kuota-e2e-install"),
            &Patch::Apply(&ns),
        )
        .await
        .expect("namespace kuota-system");
}

/// A CRD that accepts any spec, standing in for an operator that is not installed.
pub(super) async fn stand_in_crd(client: &Client, group: &str, kind: &str, plural: &str) {
    stand_in_crd_versioned(client, group, "v1", kind, plural).await;
}

/// [`stand_in_crd`] at a given version.
pub async fn stand_in_crd_versioned(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
            "versions": [{"name": version, "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))
    .expect("stand-in CRD");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = format!("{plural}.{group}");
    api.patch(
        &name,
        &PatchParams::apply("kuota-e2e-install").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap_or_else(|e| panic!("stand-in CRD {name}: {e}"));
    let established = wait_until(std::time::Duration::from_secs(30), || {
        let (api, name) = (api.clone(), name.clone());
        async move {
            api.get(&name)
                .await
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        }
    })
    .await;
    assert!(established.is_some(), "{name} not established");
}

pub(super) fn has(lines: &[String], object: &str) -> bool {
    lines
        .iter()
        .any(|l| l.starts_with(object) && l.contains("(server dry run)"))
}

#[tokio::test]
async fn the_kustomize_base_passes_server_side_validation() {
    let client = client().await;
    ensure_crds(&client).await;
    ensure_kuota_system(&client).await;
    let _conversion = super::CONVERSION_LOCK.lock().await;
    let lines = dry_run("manifests");
    for object in [
        "namespace/kuota-system",
        "customresourcedefinition.apiextensions.k8s.io/clusterqueues.kueue.x-k8s.io",
        "customresourcedefinition.apiextensions.k8s.io/workloads.kueue.x-k8s.io",
        "customresourcedefinition.apiextensions.k8s.io/admissionchecks.kueue.x-k8s.io",
        "serviceaccount/kuota-webhook",
        "serviceaccount/kuota-controller",
        "clusterrole.rbac.authorization.k8s.io/kuota-webhook",
        "clusterrole.rbac.authorization.k8s.io/kuota-controller",
        "role.rbac.authorization.k8s.io/kuota-controller-leader-election",
        "configmap/kuota-config",
        "service/kuota-webhook",
        "deployment.apps/kuota-webhook",
        "deployment.apps/kuota-controller",
        "poddisruptionbudget.policy/kuota-webhook",
        "networkpolicy.networking.k8s.io/kuota-webhook",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/kuota-mutating-webhook",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/kuota-validating-webhook",
        "service/kuota-visibility",
        "apiservice.apiregistration.k8s.io/v1beta2.visibility.kueue.x-k8s.io",
        "apiservice.apiregistration.k8s.io/v1beta1.visibility.kueue.x-k8s.io",
        "apiservice.apiregistration.k8s.io/v1alpha1.visibility.kuota.dev",
        "clusterrole.rbac.authorization.k8s.io/kueue-pending-workloads-lq-viewer-role",
        "rolebinding.rbac.authorization.k8s.io/kuota-controller-auth-reader",
    ] {
        assert!(
            has(&lines, object),
            "{object} missing from the dry run:\n{}",
            lines.join("\n")
        );
    }
    assert_eq!(
        lines.len(),
        37,
        "every object of the base:\n{}",
        lines.join("\n")
    );
}

#[tokio::test]
async fn the_overlays_pass_server_side_validation() {
    let client = client().await;
    ensure_crds(&client).await;
    ensure_kuota_system(&client).await;
    stand_in_crd(
        &client,
        "monitoring.coreos.com",
        "ServiceMonitor",
        "servicemonitors",
    )
    .await;
    stand_in_crd(&client, "cert-manager.io", "Issuer", "issuers").await;
    stand_in_crd(&client, "cert-manager.io", "Certificate", "certificates").await;
    let _conversion = super::CONVERSION_LOCK.lock().await;
    let monitoring = dry_run("manifests/overlays/monitoring");
    assert!(
        has(
            &monitoring,
            "servicemonitor.monitoring.coreos.com/kuota-webhook"
        ),
        "{monitoring:?}"
    );
    assert_eq!(monitoring.len(), 38);
    let cert_manager = dry_run("manifests/overlays/cert-manager");
    assert!(
        has(&cert_manager, "certificate.cert-manager.io/kuota-webhook"),
        "{cert_manager:?}"
    );
    assert!(
        has(&cert_manager, "issuer.cert-manager.io/kuota-selfsigned"),
        "{cert_manager:?}"
    );
    // The rendered overlay asks cert-manager for every caBundle and turns kuota's own off.
    let (ok, rendered, err) = kubectl(&["kustomize", "manifests/overlays/cert-manager"]);
    assert!(ok, "{err}");
    assert_eq!(
        rendered
            .matches("cert-manager.io/inject-ca-from: kuota-system/kuota-webhook")
            .count(),
        16
    );
    assert!(!rendered.contains("--inject-ca-bundle"));
}
