//! kuota runs in these tests with the permissions its install grants, never as admin.
//!
//! [`installed`] builds the kustomize install (`kubectl kustomize manifests`), applies its
//! Namespace, ServiceAccounts, ClusterRoles, Roles and bindings (server-side apply, once
//! per test process), and [`Identity::client`] gives kuota a client with a ServiceAccount
//! token from the TokenRequest API, on the admin kubeconfig's server and CA. The tests
//! themselves stay admin.
//!
//! Every such client records the API server's authorization refusals
//! (`kuota::telemetry::forbidden`); [`assert_permitted`] fails the test that caused one,
//! naming the verb and resource to grant. The in-process controller's records are checked
//! when the test releases [`controller_lock`](crate::support::controller_lock), the
//! webhook's when it stops, a `kuota serve` process's from its log.

mod bad_input;
mod helm;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kuota::telemetry::forbidden::Forbidden;
use serde::Deserialize;
use serde_json::Value;

use crate::support::kubeconfig_path;

/// kuota's namespace in the shipped install (its Roles and ServiceAccounts live there).
pub const KUOTA_NAMESPACE: &str = "kuota-system";

/// The kinds of an install that grant kuota its permissions.
const RBAC_KINDS: [&str; 6] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// Which of the install's ServiceAccounts kuota runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// `kuota-controller`: the queue controller's Deployment (controller and webhook).
    Controller,
    /// `kuota-webhook`: the webhook Deployment (read-only watches, `--no-controller`).
    Webhook,
}

impl Identity {
    /// The ServiceAccount's name in the kustomize install.
    pub fn service_account(self) -> &'static str {
        match self {
            Identity::Controller => "kuota-controller",
            Identity::Webhook => "kuota-webhook",
        }
    }

    /// A client for this ServiceAccount of the kustomize install, recording refusals.
    pub async fn client(self) -> (Client, Forbidden) {
        installed().await;
        service_account_client(KUOTA_NAMESPACE, self.service_account()).await
    }
}

/// The objects of a YAML stream (kubectl kustomize's or helm template's output).
pub fn objects(yaml: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(yaml)
        .map(|doc| {
            let v = serde_norway::Value::deserialize(doc).expect("YAML parses");
            serde_json::to_value(v).expect("YAML is JSON-compatible")
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The objects of `kubectl kustomize manifests` that grant kuota its permissions.
pub fn kustomize_rbac() -> Vec<Value> {
    let bin = std::env::var("KUOTA_K8S_KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = std::process::Command::new(&bin)
        .args(["kustomize", "manifests"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("running {bin} kustomize (set KUOTA_K8S_KUBECTL): {e}"));
    assert!(
        out.status.success(),
        "kubectl kustomize manifests: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rbac_objects(&String::from_utf8_lossy(&out.stdout))
}

/// The RBAC objects (and namespace) of a rendered install.
pub fn rbac_objects(yaml: &str) -> Vec<Value> {
    objects(yaml)
        .into_iter()
        .filter(|o| RBAC_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .collect()
}

/// Server-side applies `objects` as the admin (field manager `kuota-e2e-rbac`).
pub async fn apply(admin: &Client, objects: &[Value]) {
    let pp = PatchParams::apply("kuota-e2e-rbac").force();
    for obj in objects {
        let (api_version, kind) = (
            obj["apiVersion"].as_str().expect("apiVersion"),
            obj["kind"].as_str().expect("kind"),
        );
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let resource = ApiResource::from_gvk(&gvk);
        let name = obj["metadata"]["name"].as_str().expect("named");
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(admin.clone(), ns, &resource),
            None => Api::all_with(admin.clone(), &resource),
        };
        api.patch(name, &pp, &Patch::Apply(obj))
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
    }
}

/// Applies the kustomize install's RBAC once per test process.
pub async fn installed() {
    static ONCE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    ONCE.get_or_init(|| async {
        let admin = crate::support::client().await;
        apply(&admin, &kustomize_rbac()).await;
    })
    .await;
}

/// A token of ServiceAccount `ns/name` (TokenRequest; one per account and test process).
pub async fn token(ns: &str, name: &str) -> String {
    static TOKENS: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);
    let key = format!("{ns}/{name}");
    if let Some(t) = TOKENS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return t.clone();
    }
    let admin = crate::support::client().await;
    // Longer than any test run; the API server caps it at its own maximum.
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"audiences": [], "expirationSeconds": 4 * 3600}
    }))
    .expect("token request");
    let token = Api::<ServiceAccount>::namespaced(admin, ns)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("TokenRequest for ServiceAccount {key}: {e}"))
        .status
        .expect("TokenRequest status")
        .token;
    TOKENS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .insert(key, token.clone());
    token
}

/// A client for ServiceAccount `ns/name` on the e2e cluster (the admin kubeconfig's server
/// and CA, the account's token), recording the refusals it gets.
pub async fn service_account_client(ns: &str, name: &str) -> (Client, Forbidden) {
    let token = token(ns, name).await;
    let path = kubeconfig_path();
    let kubeconfig =
        Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("KUOTA_E2E_KUBECONFIG={path}: {e}"));
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("KUOTA_E2E_KUBECONFIG={path}: {e}"));
    config.auth_info =
        serde_json::from_value(serde_json::json!({"token": token})).expect("auth info");
    let record = Forbidden::default();
    let client = ClientBuilder::try_from(config)
        .expect("client from the ServiceAccount's config")
        .with_layer(&record.layer())
        .build();
    (client, record)
}

/// A fresh token of ServiceAccount `ns/name`, requested by `admin` (any cluster's).
pub async fn token_from(admin: &Client, ns: &str, name: &str) -> String {
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"audiences": [], "expirationSeconds": 4 * 3600}
    }))
    .expect("token request");
    Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("TokenRequest for ServiceAccount {ns}/{name}: {e}"))
        .status
        .expect("TokenRequest status")
        .token
}

/// The admin kubeconfig at `kubeconfig` with its user replaced by `token`: another
/// identity on the same server, trusting the same CA.
pub fn kubeconfig_with_token(kubeconfig: &str, user: &str, token: &str) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap_or_else(|e| panic!("{kubeconfig}: {e}"));
    let mut config: Value =
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{kubeconfig}: {e}"));
    config["users"] = serde_json::json!([{"name": user, "user": {"token": token}}]);
    for context in config["contexts"].as_array_mut().into_iter().flatten() {
        context["context"]["user"] = Value::from(user);
    }
    serde_norway::to_string(&config).expect("kubeconfig YAML")
}

/// A client from kubeconfig text, recording the refusals it gets.
pub async fn recording_client(kubeconfig: &str) -> (Client, Forbidden) {
    let parsed = Kubeconfig::from_yaml(kubeconfig).expect("a kubeconfig");
    let config = Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .expect("a client config");
    let record = Forbidden::default();
    let client = ClientBuilder::try_from(config)
        .expect("client from the config")
        .with_layer(&record.layer())
        .build();
    (client, record)
}

/// Writes a kubeconfig for ServiceAccount `ns/name` to `file` (for `kuota serve`).
pub async fn write_kubeconfig(ns: &str, name: &str, file: &Path) {
    let token = token(ns, name).await;
    let path = kubeconfig_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut config: Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    config["users"] = serde_json::json!([{"name": name, "user": {"token": token}}]);
    for context in config["contexts"].as_array_mut().into_iter().flatten() {
        context["context"]["user"] = Value::from(name);
    }
    let yaml = serde_norway::to_string(&config).expect("kubeconfig YAML");
    std::fs::write(file, yaml).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}

/// The marker of kuota's log line for a refusal (`kuota::telemetry::forbidden`).
pub const REFUSAL_LOG: &str = "kuota is not permitted to";

/// Panics naming every access `record` saw refused, and `who` made the calls. When the
/// test is already failing (a refusal often makes it time out first), prints them
/// instead, beside that failure.
pub fn assert_permitted(who: &str, record: &Forbidden) {
    let refused = record.counts();
    if refused.is_empty() {
        return;
    }
    let message = format!(
        "{who} was refused by the API server under the shipped RBAC (grant it in \
         manifests/base/rbac and the Helm chart, or stop making the call): {}",
        refused
            .iter()
            .map(|(access, n)| format!("{access} ({n}x)"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    if std::thread::panicking() {
        eprintln!("{message}");
    } else {
        panic!("{message}");
    }
}

/// [`assert_permitted`] for the log of a `kuota serve` process: its refusal lines.
pub fn assert_log_permitted(who: &str, log: &str) {
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(REFUSAL_LOG)).collect();
    if lines.is_empty() {
        return;
    }
    let message = format!(
        "{who} was refused by the API server under the shipped RBAC:\n{}",
        lines.join("\n")
    );
    if std::thread::panicking() {
        eprintln!("{message}");
    } else {
        panic!("{message}");
    }
}

/// Records of the in-process controllers started while the current test holds
/// [`controller_lock`](crate::support::controller_lock) (controllers never overlap).
static CONTROLLER_RECORDS: Mutex<Vec<Forbidden>> = Mutex::new(Vec::new());

/// Remembers a controller's record until the lock holder's check.
pub fn watch_controller(record: Forbidden) {
    CONTROLLER_RECORDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(record);
}

/// Takes the records of the controllers started under the current lock.
pub fn take_controller_records() -> Vec<Forbidden> {
    std::mem::take(
        &mut *CONTROLLER_RECORDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    )
}
