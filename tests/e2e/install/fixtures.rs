//! Helpers of the install tests: YAML fixtures applied as dynamic objects, and a kuota
//! conversion webhook served from the test process.

use std::path::PathBuf;
use std::sync::Arc;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

/// The documents of a YAML stream with `__P__` (cluster-wide name prefix) and `__NS__`
/// (the test's namespace) filled in.
pub fn render(yaml: &str, prefix: &str, ns: &str) -> Vec<Value> {
    let text = yaml.replace("__P__", prefix).replace("__NS__", ns);
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            let v: serde_norway::Value =
                serde::Deserialize::deserialize(doc).expect("fixture YAML");
            serde_json::to_value(v).expect("fixture as JSON")
        })
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The dynamic API of an object's apiVersion/kind (kuota's CRDs give plural and scope).
pub fn api_for(client: &Client, obj: &Value) -> Api<DynamicObject> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let crds = kuota::crds::all(None).expect("CRDs");
    let crd = crds.iter().find(|c| c.spec.names.kind == kind);
    // Kinds kuota does not serve get a plausible plural so the API server can say so.
    let plural = crd.map_or_else(
        || format!("{}s", kind.to_lowercase()),
        |c| c.spec.names.plural.clone(),
    );
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
    match (
        crd.map(|c| c.spec.scope.as_str()),
        obj["metadata"]["namespace"].as_str(),
    ) {
        (Some("Namespaced"), Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// Server-side apply with strict field validation, as `kubectl apply --server-side` does.
pub async fn apply(client: &Client, obj: &Value) -> Result<DynamicObject, kube::Error> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let pp = PatchParams::apply("kuota-e2e-install")
        .force()
        .validation_strict();
    api_for(client, obj)
        .patch(name, &pp, &Patch::Apply(obj))
        .await
}

/// Reads an object back in another version of its group.
pub async fn get_as(
    client: &Client,
    obj: &Value,
    api_version: &str,
) -> Result<DynamicObject, kube::Error> {
    let mut probe = obj.clone();
    probe["apiVersion"] = Value::from(api_version);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    api_for(client, &probe).get(name).await
}

/// Best-effort deletion of cluster-wide objects a test made.
pub async fn delete_all(client: &Client, objs: &[Value]) {
    for obj in objs.iter().rev() {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let _ = api_for(client, obj).delete(name, &Default::default()).await;
    }
}

/// Creates a namespace for a test.
pub async fn namespace(client: &Client, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&Default::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// Deletes a test's namespace (best effort).
pub async fn delete_namespace(client: &Client, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &Default::default())
        .await;
}

/// kuota's webhook server (with `/convert`) on 127.0.0.1 in this process, with a fresh CA.
pub struct LocalWebhook {
    /// `https://127.0.0.1:<port>`.
    pub base_url: String,
    /// PEM of the CA that signed the serving certificate.
    pub ca_pem: Vec<u8>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    dir: PathBuf,
}

impl LocalWebhook {
    /// Issues certificates and starts serving.
    pub async fn start() -> Self {
        use kuota::webhook::certs::{self, CertsArgs};
        use kuota::webhook::server::{ServerConfig, WebhookServer};
        let dir = std::env::temp_dir().join(crate::support::unique_name("kuota-conv"));
        let mut args = CertsArgs::new(&dir);
        args.extra_sans = vec!["127.0.0.1".into()];
        certs::ensure(&args).expect("issue certificates");
        let ca_pem = std::fs::read(dir.join(kuota::webhook::tls::CA_FILE)).expect("ca.crt");
        let state = Arc::new(kuota::webhook::WebhookState::for_tests());
        let server = WebhookServer::bind(
            ServerConfig::local(&dir),
            kuota::webhook::router(state),
            Arc::new(|| true),
        )
        .await
        .expect("bind the webhook server");
        let base_url = format!("https://127.0.0.1:{}", server.local_addr().port());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        Self {
            base_url,
            ca_pem,
            stop: Some(tx),
            dir,
        }
    }
}

impl Drop for LocalWebhook {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
