//! The deployment manifests parse into the Kubernetes API types, carry no
//! field those types do not know (typos would be silently dropped by the
//! API server), and agree with what `kuota serve` and `kuota certs` expect.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuota::webhook::certs;
use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        // Helm templates are not YAML until rendered (tests/e2e/install checks the chart).
        if p.is_dir() && p.file_name().is_some_and(|n| n == "helm") {
            continue;
        }
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// Every non-empty YAML document under `dir`, with its file for messages.
fn documents(dir: &Path) -> Vec<(PathBuf, Value)> {
    let mut files = Vec::new();
    yaml_files(dir, &mut files);
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read manifest");
        for de in serde_norway::Deserializer::from_str(&text) {
            let value = serde_norway::Value::deserialize(de)
                .unwrap_or_else(|e| panic!("{}: YAML does not parse: {e}", file.display()));
            if value.is_null() {
                continue;
            }
            let json = serde_json::to_value(&value)
                .unwrap_or_else(|e| panic!("{}: not JSON-compatible: {e}", file.display()));
            docs.push((file.clone(), json));
        }
    }
    docs
}

/// Paths present in `original` but absent from `typed`: fields the API type
/// does not have (a typo, or the wrong nesting level).
fn unknown_fields(original: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (original, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (k, v) in o {
                match t.get(k) {
                    Some(tv) => unknown_fields(v, tv, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k}")),
                }
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            for (i, (ov, tv)) in o.iter().zip(t).enumerate() {
                unknown_fields(ov, tv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn typed<T: DeserializeOwned + Serialize>(file: &Path, doc: &Value) -> T {
    let value: T = serde_path_to_error::deserialize(doc.clone())
        .unwrap_or_else(|e| panic!("{}: {} at {}", file.display(), e.inner(), e.path()));
    let back = serde_json::to_value(&value).expect("serialize");
    let mut unknown = Vec::new();
    unknown_fields(doc, &back, "", &mut unknown);
    assert!(
        unknown.is_empty(),
        "{}: unknown fields {unknown:?}",
        file.display()
    );
    value
}

#[derive(Default)]
struct Parsed {
    services: Vec<Service>,
    deployments: Vec<Deployment>,
    mutating: Vec<MutatingWebhookConfiguration>,
    validating: Vec<ValidatingWebhookConfiguration>,
    cluster_roles: Vec<ClusterRole>,
    namespaces: Vec<Namespace>,
    kinds: BTreeSet<String>,
}

fn parse_all() -> Parsed {
    let mut p = Parsed::default();
    let docs = documents(&root().join("manifests"));
    assert!(!docs.is_empty(), "no manifests found");
    for (file, doc) in &docs {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default();
        // kustomize's own files name no object.
        if api_version.starts_with("kustomize.config.k8s.io/") {
            continue;
        }
        assert!(
            !api_version.is_empty() && !kind.is_empty(),
            "{}: apiVersion/kind missing",
            file.display()
        );
        assert!(
            doc["metadata"]["name"].is_string(),
            "{}: metadata.name missing",
            file.display()
        );
        p.kinds.insert(kind.to_string());
        match (api_version, kind) {
            ("v1", "Namespace") => p.namespaces.push(typed(file, doc)),
            ("v1", "ServiceAccount") => drop(typed::<ServiceAccount>(file, doc)),
            ("v1", "Service") => p.services.push(typed(file, doc)),
            ("v1", "Secret") => drop(typed::<Secret>(file, doc)),
            ("v1", "ConfigMap") => drop(typed::<ConfigMap>(file, doc)),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                p.cluster_roles.push(typed(file, doc))
            }
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                drop(typed::<ClusterRoleBinding>(file, doc))
            }
            ("rbac.authorization.k8s.io/v1", "Role") => drop(typed::<Role>(file, doc)),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                drop(typed::<RoleBinding>(file, doc))
            }
            ("apps/v1", "Deployment") => p.deployments.push(typed(file, doc)),
            ("policy/v1", "PodDisruptionBudget") => drop(typed::<PodDisruptionBudget>(file, doc)),
            ("networking.k8s.io/v1", "NetworkPolicy") => drop(typed::<
                k8s_openapi::api::networking::v1::NetworkPolicy,
            >(file, doc)),
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                p.mutating.push(typed(file, doc))
            }
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                p.validating.push(typed(file, doc))
            }
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                drop(typed::<CustomResourceDefinition>(file, doc))
            }
            // Other kinds (kueue samples, ...) only need to be well-formed.
            _ => {}
        }
    }
    p
}

fn webhook_container(p: &Parsed) -> Container {
    let deployment = p
        .deployments
        .iter()
        .find(|d| d.metadata.name.as_deref() == Some(certs::DEFAULT_SERVICE))
        .expect("webhook Deployment");
    let spec = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("pod spec");
    spec.containers.into_iter().next().expect("container")
}

#[test]
fn every_manifest_parses_into_api_types_without_unknown_fields() {
    let p = parse_all();
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(p.kinds.contains(kind), "no {kind} in manifests/");
    }
    // cert-manager resources are CRDs without k8s-openapi types: YAML only.
    let cm = documents(&root().join("webhook-certs"));
    assert!(cm.iter().any(|(_, d)| d["kind"] == "Certificate"));
}

/// What an outage of kuota can block (docs/webhook.md, "What a kuota outage blocks"): at
/// most 3 s per call; job kinds and Pods never in kube-system or kuota-system; objects
/// without a queue name only in namespaces labelled `kuota.dev/managed=true`, except the
/// policy entries, which fail open.
fn check_blast_radius(
    name: &str,
    timeout: Option<i32>,
    ns: &Option<LabelSelector>,
    obj: &Option<LabelSelector>,
    rules: &Option<Vec<k8s_openapi::api::admissionregistration::v1::RuleWithOperations>>,
    failure_policy: Option<&str>,
) {
    assert!(
        timeout.is_some_and(|t| (1..=3).contains(&t)),
        "{name}: timeoutSeconds"
    );
    let kueue_kind = rules
        .iter()
        .flatten()
        .all(|r| r.api_groups.iter().flatten().all(|g| g == "kueue.x-k8s.io"));
    if kueue_kind {
        return;
    }
    let ns = ns
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: namespaceSelector"));
    let excludes_system = ns.match_expressions.iter().flatten().any(|e| {
        e.key == "kubernetes.io/metadata.name"
            && e.operator == "NotIn"
            && e.values.iter().flatten().any(|v| v == "kube-system")
            && e.values.iter().flatten().any(|v| v == "kuota-system")
    });
    assert!(
        excludes_system,
        "{name}: must exclude kube-system and kuota-system"
    );
    let on_queue_label = |op: &str| {
        obj.as_ref()
            .and_then(|o| o.match_expressions.as_ref())
            .is_some_and(|es| {
                es.iter()
                    .any(|e| e.key == "kueue.x-k8s.io/queue-name" && e.operator == op)
            })
    };
    if on_queue_label("DoesNotExist") && failure_policy == Some("Ignore") {
        // Policies only, failing open: an outage blocks nothing here, and the entry
        // leaves the labelled namespaces to the entry below.
        assert!(
            name.ends_with("-policy.kuota.dev"),
            "{name}: only the policy entries fail open"
        );
        let skips_managed = ns.match_expressions.iter().flatten().any(|e| {
            e.key == "kuota.dev/managed"
                && e.operator == "NotIn"
                && e.values.iter().flatten().any(|v| v == "true")
        });
        assert!(
            skips_managed,
            "{name}: namespaces not labelled kuota.dev/managed=true"
        );
    } else if on_queue_label("DoesNotExist") {
        assert_eq!(
            ns.match_labels
                .as_ref()
                .and_then(|l| l.get("kuota.dev/managed"))
                .map(String::as_str),
            Some("true"),
            "{name}: unlabelled objects only in namespaces kuota manages"
        );
    } else {
        assert!(
            on_queue_label("Exists"),
            "{name}: objectSelector on the queue-name label"
        );
    }
}

#[test]
fn webhooks_point_at_the_service_with_kueue_paths_and_safe_settings() {
    let p = parse_all();
    let service = p
        .services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(certs::DEFAULT_SERVICE))
        .expect("webhook Service");
    assert_eq!(
        service.metadata.namespace.as_deref(),
        Some(certs::DEFAULT_NAMESPACE)
    );
    assert!(
        p.namespaces
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some(certs::DEFAULT_NAMESPACE))
    );
    let port = &service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .expect("ports")[0];
    assert_eq!(port.port, 443);

    let mut paths = BTreeSet::new();
    let mutating = p
        .mutating
        .iter()
        .flat_map(|m| m.webhooks.clone().unwrap_or_default());
    for w in mutating {
        let svc = w.client_config.service.as_ref().expect("service ref");
        assert_eq!(
            (svc.name.as_str(), svc.namespace.as_str()),
            (certs::DEFAULT_SERVICE, certs::DEFAULT_NAMESPACE)
        );
        let path = svc.path.clone().expect("path");
        assert!(path.starts_with("/mutate-"), "{path}");
        // A job kind's labelled and unlabelled entries share the path.
        assert!(
            paths.insert(path) || w.name.contains("-unlabelled.") || w.name.contains("-policy."),
            "duplicate path in {}",
            w.name
        );
        check_blast_radius(
            &w.name,
            w.timeout_seconds,
            &w.namespace_selector,
            &w.object_selector,
            &w.rules,
            w.failure_policy.as_deref(),
        );
        assert_eq!(w.side_effects, "None");
        assert_eq!(w.admission_review_versions, vec!["v1".to_string()]);
        let fail_open = w.name.ends_with("-policy.kuota.dev");
        assert_eq!(
            w.failure_policy.as_deref(),
            Some(if fail_open { "Ignore" } else { "Fail" }),
            "{}",
            w.name
        );
        assert_eq!(
            w.reinvocation_policy.as_deref(),
            Some("IfNeeded"),
            "{}",
            w.name
        );
        assert!(w.timeout_seconds.is_some_and(|t| (1..=10).contains(&t)));
        assert!(
            w.client_config.ca_bundle.is_none(),
            "caBundle must not be checked in"
        );
    }
    let validating = p
        .validating
        .iter()
        .flat_map(|v| v.webhooks.clone().unwrap_or_default());
    for w in validating {
        let svc = w.client_config.service.as_ref().expect("service ref");
        assert_eq!(
            (svc.name.as_str(), svc.namespace.as_str()),
            (certs::DEFAULT_SERVICE, certs::DEFAULT_NAMESPACE)
        );
        let path = svc.path.clone().expect("path");
        assert!(path.starts_with("/validate-"), "{path}");
        // A job kind's labelled and unlabelled entries share the path.
        assert!(
            paths.insert(path) || w.name.contains("-unlabelled.") || w.name.contains("-policy."),
            "duplicate path in {}",
            w.name
        );
        check_blast_radius(
            &w.name,
            w.timeout_seconds,
            &w.namespace_selector,
            &w.object_selector,
            &w.rules,
            w.failure_policy.as_deref(),
        );
        assert_eq!(w.side_effects, "None");
        assert_eq!(w.admission_review_versions, vec!["v1".to_string()]);
        let fail_open = w.name.ends_with("-policy.kuota.dev");
        assert_eq!(
            w.failure_policy.as_deref(),
            Some(if fail_open { "Ignore" } else { "Fail" }),
            "{}",
            w.name
        );
        assert!(w.timeout_seconds.is_some_and(|t| (1..=10).contains(&t)));
        assert!(
            w.client_config.ca_bundle.is_none(),
            "caBundle must not be checked in"
        );
    }
    // Kueue's paths for the core kinds.
    for path in [
        "/mutate-batch-v1-job",
        "/validate-batch-v1-job",
        "/mutate-kueue-x-k8s-io-v1beta2-workload",
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
    ] {
        assert!(paths.contains(path), "missing {path}");
    }
}

#[test]
fn deployment_runs_kuota_serve_hardened_with_probes_and_cert_secret() {
    let p = parse_all();
    let c = webhook_container(&p);
    let args = c.args.clone().unwrap_or_default();
    assert_eq!(args.first().map(String::as_str), Some("serve"));
    // The listeners and certDir come from Kueue's Configuration, which both Deployments pass.
    assert!(args.contains(&"--config=/etc/kuota/config.yaml".to_string()));
    let sc = c
        .security_context
        .clone()
        .expect("container securityContext");
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        sc.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_string()])
    );

    let deployment = p
        .deployments
        .iter()
        .find(|d| d.metadata.name.as_deref() == Some(certs::DEFAULT_SERVICE))
        .expect("deployment");
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("pod spec");
    let psc = pod.security_context.clone().expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.run_as_user, Some(65532));
    assert_eq!(
        psc.seccomp_profile.map(|s| s.type_),
        Some("RuntimeDefault".to_string())
    );

    // Probes hit the plain health port; the Service targets the TLS port.
    let ports = c.ports.clone().unwrap_or_default();
    let port_named = |name: &str| {
        ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port)
    };
    assert_eq!(port_named("webhook"), Some(9443));
    assert_eq!(port_named("health"), Some(8080));
    for (probe, path) in [
        (c.readiness_probe.clone(), "/readyz"),
        (c.liveness_probe.clone(), "/healthz"),
    ] {
        let get = probe.and_then(|p| p.http_get).expect("httpGet probe");
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(get.port, IntOrString::String("health".into()));
        assert!(get.scheme.is_none() || get.scheme.as_deref() == Some("HTTP"));
    }
    let service = p
        .services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(certs::DEFAULT_SERVICE))
        .expect("svc");
    let target = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .expect("ports")[0]
        .target_port
        .clone();
    assert_eq!(target, Some(IntOrString::String("webhook".into())));

    // The cert volume is the Secret `kuota certs` / cert-manager write, not via subPath.
    let volumes = pod.volumes.clone().unwrap_or_default();
    let secret = volumes
        .iter()
        .find_map(|v| v.secret.clone())
        .expect("secret volume");
    assert_eq!(secret.secret_name.as_deref(), Some(certs::DEFAULT_SECRET));
    assert_eq!(secret.default_mode, Some(0o440));
    for m in c.volume_mounts.clone().unwrap_or_default() {
        assert!(
            m.sub_path.is_none(),
            "subPath mounts never see Secret updates"
        );
    }
}

#[test]
fn webhook_role_is_read_only_but_for_its_own_ca_bundles() {
    let p = parse_all();
    let role = p
        .cluster_roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("kuota-webhook"))
        .expect("kuota-webhook ClusterRole");
    for rule in role.rules.clone().unwrap_or_default() {
        let names = rule.resource_names.clone().unwrap_or_default();
        for verb in &rule.verbs {
            if verb == "patch" {
                // caBundle injection: only kuota's own CRDs, webhook configurations and
                // visibility APIServices (Kueue's group and kuota's).
                assert!(
                    !names.is_empty(),
                    "webhook role may patch only named objects: {rule:?}"
                );
                assert!(
                    names.iter().all(|n| n.ends_with(".kueue.x-k8s.io")
                        || n.ends_with(".visibility.kuota.dev")
                        || n.starts_with("kuota-")),
                    "webhook role may patch only kuota's objects: {names:?}"
                );
                continue;
            }
            assert!(
                ["get", "list", "watch"].contains(&verb.as_str()),
                "webhook role may not {verb}"
            );
        }
    }
}

#[test]
fn ca_bundle_patching_covers_every_webhook_in_the_real_manifests() {
    let out = std::env::temp_dir().join(format!("kuota-manifests-patch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let ca_b64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";
    let written =
        certs::patch_manifest_dir(&root().join("manifests/base"), &out, ca_b64).expect("patch");
    assert_eq!(written.len(), 2, "{written:?}");
    let mut seen = 0;
    for (file, doc) in documents(&out) {
        for w in doc["webhooks"].as_array().expect("webhooks") {
            assert_eq!(w["clientConfig"]["caBundle"], ca_b64, "{}", file.display());
            seen += 1;
        }
        match doc["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => {
                drop(typed::<MutatingWebhookConfiguration>(&file, &doc))
            }
            _ => drop(typed::<ValidatingWebhookConfiguration>(&file, &doc)),
        }
    }
    let p = parse_all();
    let total: usize = p
        .mutating
        .iter()
        .map(|m| m.webhooks.as_ref().map_or(0, Vec::len))
        .sum::<usize>()
        + p.validating
            .iter()
            .map(|v| v.webhooks.as_ref().map_or(0, Vec::len))
            .sum::<usize>();
    assert_eq!(seen, total);
    // And the kubectl form names both configurations.
    let cmds = certs::kubectl_patches(&root().join("manifests/base"), ca_b64).expect("patches");
    assert_eq!(cmds.len(), 2);
    assert!(cmds[0].starts_with(
        "kubectl patch mutatingwebhookconfiguration kuota-mutating-webhook --type=json"
    ));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn registered_paths_are_exactly_the_served_v1beta2_and_job_routes() {
    let p = parse_all();
    let registered: BTreeSet<String> = p
        .mutating
        .iter()
        .flat_map(|m| m.webhooks.clone().unwrap_or_default())
        .filter_map(|w| w.client_config.service.and_then(|s| s.path))
        .chain(
            p.validating
                .iter()
                .flat_map(|v| v.webhooks.clone().unwrap_or_default())
                .filter_map(|w| w.client_config.service.and_then(|s| s.path)),
        )
        .collect();
    let served: BTreeSet<String> = kuota::webhook::routes()
        .into_iter()
        .map(|r| r.path)
        .collect();
    for path in &registered {
        assert!(served.contains(path), "{path} is registered but not served");
    }
    // v1beta1 paths are served for old configurations; the API server converts
    // v1beta1 requests to v1beta2 (matchPolicy: Equivalent), so they need no entry.
    // A kind kuota does not run would be served (as a no-op) but never registered.
    let not_run: BTreeSet<String> = kuota::webhook::routes()
        .into_iter()
        .filter(|r| match r.target {
            kuota::webhook::Target::Job(i) => !i.controller_runs(),
            kuota::webhook::Target::Crd(_) => false,
        })
        .map(|r| r.path)
        .collect();
    for path in &not_run {
        assert!(
            !registered.contains(path),
            "{path} is registered but not run"
        );
    }
    for path in served
        .iter()
        .filter(|p| !p.contains("-v1beta1-") && !not_run.contains(*p))
    {
        assert!(
            registered.contains(path),
            "{path} is served but not registered"
        );
    }
}

/// The shipped configuration enables exactly the frameworks kuota runs, each has its
/// webhooks registered, and the controller may read and suspend each one's kind.
#[test]
fn configuration_webhooks_and_rbac_follow_the_one_list_of_frameworks() {
    let run = kuota::integrations::run_frameworks();
    let config_map: ConfigMap = documents(&root().join("manifests").join("base"))
        .into_iter()
        .find(|(_, d)| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "kuota-config")
        .map(|(f, d)| typed(&f, &d))
        .expect("the kuota-config ConfigMap");
    let text = config_map
        .data
        .and_then(|d| d.get("controller_manager_config.yaml").cloned())
        .expect("the Configuration");
    let config: Value = serde_norway::from_str(&text).expect("Configuration YAML");
    let enabled: Vec<&str> = config["integrations"]["frameworks"]
        .as_array()
        .expect("frameworks")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(enabled, run, "configuration.yaml's frameworks");

    let values: Value = serde_norway::from_str(
        &std::fs::read_to_string(root().join("manifests/helm/kuota/values.yaml"))
            .expect("values.yaml"),
    )
    .expect("values YAML");
    let helm: Vec<&str> = values["integrations"]["frameworks"]
        .as_array()
        .expect("helm frameworks")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(helm, run, "the Helm values' frameworks");

    let p = parse_all();
    let role = p
        .cluster_roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("kuota-controller"))
        .expect("the controller's ClusterRole");
    let rules = role.rules.clone().unwrap_or_default();
    let grants = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    };
    let registered: BTreeSet<String> = p
        .mutating
        .iter()
        .flat_map(|m| m.webhooks.clone().unwrap_or_default())
        .filter_map(|w| w.client_config.service.and_then(|s| s.path))
        .collect();
    for framework in run {
        let integration = kuota::integrations::for_framework(framework).expect("known");
        let gvk = integration.gvk();
        let plural = kube::core::ApiResource::from_gvk(&gvk).plural;
        // Every write to a job kind is a patch (plain pods are never updated); a kind
        // whose members are other objects (a LeaderWorkerSet's pods) is only read.
        let writes_itself = integration
            .composed()
            .is_none_or(|c| c.member_kind().is_none());
        let verbs: &[&str] = if writes_itself {
            &["get", "list", "watch", "patch"]
        } else {
            &["get", "list", "watch"]
        };
        for verb in verbs.iter().copied() {
            assert!(
                grants(&gvk.group, &plural, verb),
                "{framework}: {verb} {plural} not granted"
            );
        }
        // The objects its pod sets are built from (a TrainJob's runtimes) are read.
        for dep in integration.dependency_resources() {
            for verb in ["get", "list", "watch"] {
                assert!(
                    grants(&dep.group, &dep.plural, verb),
                    "{framework}: {verb} {} not granted",
                    dep.plural
                );
            }
        }
        let path = kuota::webhook::webhook_path(
            kuota::webhook::Op::Mutate,
            &gvk.group,
            &gvk.version,
            &gvk.kind,
        );
        assert!(
            registered.contains(&path),
            "{framework}: {path} not registered"
        );
    }
}
