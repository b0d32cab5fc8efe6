//! kuota's admission webhook in front of a real API server.
//!
//! Each test serves the webhook in-process ([`Kuota::start`]) with a fresh ECDSA P-256 CA,
//! on 127.0.0.1, or on the address in `KUOTA_E2E_WEBHOOK_HOST` when the API server
//! reaches this machine elsewhere (kind: the docker network's gateway), and registers kuota's own `manifests/base/*-webhook.yaml` with it
//! ([`Registration`]): `clientConfig.url` instead of the Service, the CA as `caBundle`,
//! unique configuration names, job kinds scoped to the test's namespaces and Kueue kinds to
//! objects carrying the test's label. The selectors and matchConditions of the manifests are
//! otherwise unchanged, so the tests measure what users install.

mod finalizers;
mod index;
mod large;
mod outage;
mod policies;
mod readiness;
mod topology;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kuota::policy::{PolicyHandle, PolicySet};
use kuota::webhook::health::WatchHealth;
use kuota::webhook::index_readiness;
use kuota::webhook::server::{ServerConfig, WebhookServer};
use kuota::webhook::{ClusterIndex, WebhookConfig, WebhookState, feed, router};
use tokio::sync::oneshot;

use crate::support::unique_name;

/// Label that scopes the test's registrations of cluster-scoped Kueue kinds.
pub const E2E_LABEL: &str = "kuota.dev/e2e";
/// Namespace label that sends a namespace's unlabelled jobs to kuota (manifests/).
pub const MANAGED_LABEL: &str = kuota::webhook::routing::MANAGED_NAMESPACE_LABEL;

/// Where the API server reaches this process: `KUOTA_E2E_WEBHOOK_HOST`, else 127.0.0.1
/// (a control plane on this machine).
pub fn webhook_host() -> String {
    std::env::var("KUOTA_E2E_WEBHOOK_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "127.0.0.1".to_string())
}

/// kuota's webhook, served by this test process.
pub struct Kuota {
    /// The TLS listener.
    pub addr: SocketAddr,
    /// The health listener (/readyz, /metrics).
    pub health_addr: SocketAddr,
    /// PEM of the CA that signed the serving certificate (the caBundle).
    pub ca_pem: String,
    /// The watch-fed index the handlers read.
    pub index: Arc<ClusterIndex>,
    /// Health of the index's watches.
    pub watch_health: Arc<WatchHealth>,
    /// Largest review body received, in bytes.
    pub largest_review: Arc<AtomicUsize>,
    /// The registry served on the health listener's `/metrics` (share it with a
    /// controller, as `kuota serve` does).
    pub metrics: kuota::telemetry::Metrics,
    /// Refusals of the ServiceAccount's client, checked when the webhook stops.
    forbidden: Option<kuota::telemetry::forbidden::Forbidden>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    feed: Vec<tokio::task::JoinHandle<()>>,
    dir: PathBuf,
}

impl Kuota {
    /// Serves the webhook with `policies`, its index fed by watches as the install's
    /// `kuota-webhook` ServiceAccount (`client`, the test's admin, only names the
    /// cluster). A permission the API server refuses it fails the test when it stops.
    pub async fn start(client: &Client, policies: PolicySet) -> Self {
        let _cluster = client;
        let (client, record) = crate::rbac::Identity::Webhook.client().await;
        let mut kuota = Self::start_as(&client, policies).await;
        kuota.forbidden = Some(record);
        kuota
    }

    /// [`Kuota::start`] with the index fed through `client` as it is (a test's own
    /// ServiceAccount), refusals unchecked.
    pub async fn start_as(client: &Client, policies: PolicySet) -> Self {
        let dir = std::env::temp_dir().join(unique_name("kuota-e2e-certs"));
        let host = webhook_host();
        let ca_pem = crate::support::write_serving_certs(&dir, &host);

        let index = Arc::new(ClusterIndex::default());
        let watch_health = Arc::new(WatchHealth::default());
        let feed = feed::spawn(client.clone(), index.clone(), watch_health.clone());
        let state = Arc::new(WebhookState::new(
            index.clone(),
            PolicyHandle::new(policies),
            WebhookConfig::default(),
        ));
        let metrics = state.metrics.registry().clone();
        let (ready, diagnostics) = index_readiness(state.clone(), watch_health.clone());
        let largest_review = Arc::new(AtomicUsize::new(0));
        let app = {
            let largest = largest_review.clone();
            router(state).layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let largest = largest.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let bytes = axum::body::to_bytes(body, usize::MAX)
                            .await
                            .unwrap_or_default();
                        largest.fetch_max(bytes.len(), Ordering::Relaxed);
                        next.run(axum::extract::Request::from_parts(parts, bytes.into()))
                            .await
                    }
                },
            ))
        };
        let mut config = ServerConfig::local(&dir);
        if host != "127.0.0.1" {
            config.listen = SocketAddr::from(([0, 0, 0, 0], 0));
        }
        let server = WebhookServer::bind(config, app, ready)
            .await
            .expect("bind the webhook")
            .with_metrics(metrics.clone())
            .with_diagnostics(diagnostics);
        let (addr, health_addr) = (server.local_addr(), server.health_addr());
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = server
                .run(async {
                    let _ = rx.await;
                })
                .await;
        });
        Self {
            addr,
            health_addr,
            ca_pem,
            index,
            watch_health,
            largest_review,
            metrics,
            forbidden: None,
            stop: Some(tx),
            server: Some(server),
            feed,
            dir,
        }
    }

    /// Stops serving (the port closes) and stops the watches.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(20), server).await;
        }
        for t in self.feed.drain(..) {
            t.abort();
        }
        self.check_permitted();
    }

    /// Fails the test if the API server refused the webhook's ServiceAccount anything.
    fn check_permitted(&mut self) {
        if let Some(record) = self.forbidden.take() {
            crate::rbac::assert_permitted(
                "kuota's webhook (ServiceAccount kuota-webhook)",
                &record,
            );
        }
    }

    /// Waits until the index knows namespace `ns` with label `key`.
    pub async fn wait_for_namespace_label(&self, ns: &str, key: &str) {
        let index = self.index.clone();
        crate::support::wait_until(Duration::from_secs(30), || {
            let found = index.namespace_labels(ns).contains_key(key);
            async move { found }
        })
        .await
        .unwrap_or_else(|| panic!("the webhook index never saw namespace {ns} with label {key}"));
    }
}

impl Drop for Kuota {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        for t in self.feed.drain(..) {
            t.abort();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        self.check_permitted();
    }
}

/// kuota's webhook configurations, registered for one test.
pub struct Registration {
    client: Client,
    mutating: String,
    validating: String,
}

fn manifest<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let path = format!("{}/manifests/base/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Points one webhook of the manifests at `base` and scopes it to the test.
fn scope(
    client_config: &mut k8s_openapi::api::admissionregistration::v1::WebhookClientConfig,
    ns_selector: &mut Option<LabelSelector>,
    obj_selector: &mut Option<LabelSelector>,
    base: &str,
    ca_pem: &str,
    namespaces: &[&str],
    run_label: &str,
) {
    let path = client_config
        .service
        .take()
        .and_then(|s| s.path)
        .expect("manifests name a Service path");
    client_config.url = Some(format!("{base}{path}"));
    client_config.ca_bundle = Some(ByteString(ca_pem.as_bytes().to_vec()));
    let ns = ns_selector.get_or_insert_with(LabelSelector::default);
    ns.match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "In".into(),
            values: Some(namespaces.iter().map(|n| n.to_string()).collect()),
        });
    // Cluster-scoped kinds ignore namespaceSelector: only objects with the test's label.
    if obj_selector.is_none() {
        *obj_selector = Some(LabelSelector {
            match_labels: Some([(E2E_LABEL.to_string(), run_label.to_string())].into()),
            ..Default::default()
        });
    }
}

impl Registration {
    /// Registers manifests/base/mutating-webhook.yaml and manifests/base/validating-webhook.yaml for
    /// a webhook at `addr` with `ca_pem`, scoped to `namespaces` and to cluster-scoped
    /// objects labelled `kuota.dev/e2e=<run_label>`; waits until they are in force.
    pub async fn create(
        client: &Client,
        addr: SocketAddr,
        ca_pem: &str,
        namespaces: &[&str],
        run_label: &str,
    ) -> Self {
        let base = format!("https://{}:{}", webhook_host(), addr.port());
        let mut m: MutatingWebhookConfiguration = manifest("mutating-webhook.yaml");
        let mut v: ValidatingWebhookConfiguration = manifest("validating-webhook.yaml");
        let (mname, vname) = (unique_name("kuota-m"), unique_name("kuota-v"));
        m.metadata = kube::api::ObjectMeta {
            name: Some(mname.clone()),
            ..Default::default()
        };
        v.metadata = kube::api::ObjectMeta {
            name: Some(vname.clone()),
            ..Default::default()
        };
        for w in m.webhooks.iter_mut().flatten() {
            scope(
                &mut w.client_config,
                &mut w.namespace_selector,
                &mut w.object_selector,
                &base,
                ca_pem,
                namespaces,
                run_label,
            );
        }
        for w in v.webhooks.iter_mut().flatten() {
            scope(
                &mut w.client_config,
                &mut w.namespace_selector,
                &mut w.object_selector,
                &base,
                ca_pem,
                namespaces,
                run_label,
            );
        }
        let pp = PostParams::default();
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .create(&pp, &m)
            .await
            .expect("create MutatingWebhookConfiguration");
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&pp, &v)
            .await
            .expect("create ValidatingWebhookConfiguration");
        // The API server picks new configurations up within about a second.
        tokio::time::sleep(Duration::from_secs(2)).await;
        Self {
            client: client.clone(),
            mutating: mname,
            validating: vname,
        }
    }

    /// Deletes both configurations (best effort).
    pub async fn delete(self) {
        let dp = DeleteParams::default();
        let _ = Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.mutating, &dp)
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.validating, &dp)
            .await;
    }
}

/// Creates namespace `name` with `labels`.
pub async fn create_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>(),
        }
    }))
    .expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// Deletes namespaces (best effort; deletion is asynchronous).
pub async fn delete_namespaces(client: &Client, names: &[&str]) {
    for n in names {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(n, &DeleteParams::background())
            .await;
    }
}

/// A suspended one-pod Job with `labels`, each pod requesting `gpus` GPUs.
pub fn job(ns: &str, name: &str, labels: &[(&str, &str)], gpus: u32) -> Job {
    let labels: std::collections::BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {
            "suspend": true,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main", "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}
                }]
            }}
        }
    }))
    .expect("job")
}

/// Tries to create `job` until the outcome satisfies `done` (new configurations take about
/// a second to be in force), for at most 20 s; returns the last outcome. Created jobs that
/// do not satisfy `done` are deleted before the next try.
pub async fn create_job_until(
    client: &Client,
    job: &Job,
    done: impl Fn(&Result<Job, kube::Error>) -> bool,
) -> Result<Job, kube::Error> {
    let ns = job.metadata.namespace.clone().expect("namespaced");
    let api = Api::<Job>::namespaced(client.clone(), &ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut j = job.clone();
        let base = j.metadata.name.clone().expect("named");
        j.metadata.name = Some(format!("{base}-{attempt}"));
        let outcome = api.create(&PostParams::default(), &j).await;
        if done(&outcome) || tokio::time::Instant::now() >= deadline {
            return outcome;
        }
        if outcome.is_ok() {
            let _ = api
                .delete(
                    j.metadata.name.as_deref().unwrap_or_default(),
                    &DeleteParams::background(),
                )
                .await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The message of an API error, or a panic saying the call succeeded.
pub fn denial(outcome: &Result<Job, kube::Error>) -> String {
    match outcome {
        Ok(j) => panic!(
            "expected the API server to refuse Job {:?}, it was created",
            j.metadata.name
        ),
        Err(kube::Error::Api(status)) => status.message.clone(),
        Err(e) => e.to_string(),
    }
}
