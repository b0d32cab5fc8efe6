//! Shared helpers for the e2e tests: the cluster client and per-test namespaces.

use std::sync::OnceLock;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The kubeconfig the e2e tests run against, or a panic that says how to set one.
pub fn kubeconfig_path() -> String {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| match std::env::var("KUOTA_E2E_KUBECONFIG") {
        Ok(p) if !p.trim().is_empty() => p,
        _ => panic!(
            "the e2e tests need a Kubernetes cluster: set KUOTA_E2E_KUBECONFIG to a kubeconfig \
             file with cluster-admin rights (for kind: `kind get kubeconfig > /tmp/kc && \
             KUOTA_E2E_KUBECONFIG=/tmp/kc cargo test --features e2e --test e2e`); see the README"
        ),
    })
    .clone()
}

/// A client for the e2e cluster.
pub async fn client() -> Client {
    let path = kubeconfig_path();
    let kubeconfig =
        Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("KUOTA_E2E_KUBECONFIG={path}: {e}"));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("KUOTA_E2E_KUBECONFIG={path}: {e}"));
    Client::try_from(config).expect("client from kubeconfig")
}

/// A fresh name for a test's namespace or cluster-wide object: a DNS-1123 label,
/// never reused (namespace deletion is asynchronous).
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("t-{prefix}-{:x}{nanos:x}{seq:x}", std::process::id())
}

/// Installs (server-side apply) the kueue.x-k8s.io CRDs kuota serves and waits until the
/// API server serves them. Idempotent: every test calls it.
pub async fn ensure_crds(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, Patch, PatchParams};

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("kuota-e2e").force();
    // No conversion webhook: tests that need one install the CRDs themselves.
    for crd in kuota::crds::all(None).expect("kuota generates its CRDs") {
        let name = crd.metadata.name.clone().expect("generated CRDs are named");
        crds.patch(&name, &pp, &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
        wait_established(&crds, &name).await;
    }
}

/// Waits until the API server serves CRD `name` (its `Established` condition), or panics
/// after 30 s.
pub(crate) async fn wait_established(
    crds: &kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >,
    name: &str,
) {
    wait_until(std::time::Duration::from_secs(30), || async {
        crds.get(name).await.ok().is_some_and(|c| {
            c.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
    })
    .await
    .unwrap_or_else(|| panic!("CRD {name} not established within 30 s"));
}

/// Polls `check` every 100 ms until it returns true; `None` on timeout.
pub async fn wait_until<F, Fut>(timeout: std::time::Duration, mut check: F) -> Option<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return Some(());
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A plain HTTP/1.1 GET of `path` on `addr` (the health listener): status and body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    try_http_get(addr, path)
        .await
        .unwrap_or_else(|e| panic!("GET {path} on {addr}: {e}"))
}

/// [`http_get`] for a poll: a process that is still starting (or has died) refuses the
/// connection, which a caller waiting for it must take as "not yet", not as a failure.
pub async fn try_http_get(
    addr: std::net::SocketAddr,
    path: &str,
) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await?;
    let mut out = String::new();
    tcp.read_to_string(&mut out).await?;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    Ok((status, body))
}

/// Every test that runs a queue controller (in this process or as `kuota serve`) holds
/// this for its whole run: a controller watches the whole cluster, so two running at once
/// would both act on each other's Workloads (each test's own ClusterQueue does not keep
/// the other controller away), and the double-admission and usage checks would be void.
///
/// When the test releases it (returns), the in-process controllers it started must not
/// have been refused anything by the API server: kuota runs under the shipped RBAC
/// (`crate::rbac`), and a refusal fails the test, naming the verb and resource.
pub(crate) async fn controller_lock() -> ControllerLock {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let guard = LOCK.lock().await;
    // Records left by a controller started without the lock are not this test's.
    crate::rbac::take_controller_records();
    ControllerLock { _guard: guard }
}

/// The guard of [`controller_lock`]; checks the controllers' refusals when dropped.
pub(crate) struct ControllerLock {
    _guard: tokio::sync::MutexGuard<'static, ()>,
}

impl Drop for ControllerLock {
    fn drop(&mut self) {
        for record in crate::rbac::take_controller_records() {
            crate::rbac::assert_permitted(
                "kuota's controller (ServiceAccount kuota-controller)",
                &record,
            );
        }
    }
}

/// A test's namespace, with a ResourceFlavor of its own and a ClusterQueue selecting only
/// that namespace, and LocalQueue `lq` in it: the setup of every controller test.
pub(crate) struct QueueFixture {
    pub client: kube::Client,
    pub ns: String,
    /// The ResourceFlavor (its nodeLabels: `kuota.dev/e2e-pool: <rf>`).
    pub rf: String,
    /// The ClusterQueue.
    pub cq: String,
}

impl QueueFixture {
    /// A namespace named after `prefix` and a ClusterQueue with `cpu` of nominal quota.
    pub async fn new(prefix: &str, cpu: &str) -> Self {
        Self::with_queue_spec(prefix, cpu, serde_json::json!({})).await
    }

    /// As [`QueueFixture::new`], with `extra` merged into the ClusterQueue's spec (for
    /// example a `preemption` policy).
    pub async fn with_queue_spec(prefix: &str, cpu: &str, extra: serde_json::Value) -> Self {
        let client = client().await;
        ensure_crds(&client).await;
        let ns = unique_name(prefix);
        crate::webhook::create_namespace(&client, &ns, &[]).await;
        let (rf, cq) = (unique_name("rf"), unique_name("cq"));
        create_flavor(&client, &rf).await;
        create_cluster_queue(&client, &ns, &cq, &rf, cpu, extra).await;
        create_local_queue(&client, &ns, "lq", &cq).await;
        Self { client, ns, rf, cq }
    }

    /// Deletes the namespace, the ClusterQueue and the flavor (best effort).
    pub async fn teardown(self) {
        use kube::api::{Api, ListParams, Patch, PatchParams};
        use kuota::api::{ClusterQueue, ResourceFlavor, Workload};
        // The test's controller has stopped, so nothing would take the resource-in-use
        // finalizers off its Workloads: left in a terminating namespace they would stay
        // admitted in the next test's cache (and hold, for example, waitForPodsReady's
        // blockAdmission for the whole cluster).
        let workloads = Api::<Workload>::namespaced(self.client.clone(), &self.ns);
        if let Ok(list) = workloads.list(&ListParams::default()).await {
            let clear = serde_json::json!({"metadata": {"finalizers": null}});
            for wl in list {
                if let Some(name) = wl.metadata.name.as_deref() {
                    let _ = workloads
                        .patch(name, &PatchParams::default(), &Patch::Merge(&clear))
                        .await;
                }
            }
        }
        crate::webhook::delete_namespaces(&self.client, &[&self.ns]).await;
        let _ = Api::<ClusterQueue>::all(self.client.clone())
            .delete(&self.cq, &Default::default())
            .await;
        let _ = Api::<ResourceFlavor>::all(self.client.clone())
            .delete(&self.rf, &Default::default())
            .await;
    }
}

/// A serving certificate for 127.0.0.1 in `dir` (tls.crt, tls.key), as `kuota serve
/// --cert-dir` reads it; returns the CA's PEM (the caBundle).
pub(crate) fn write_serving_certs(dir: &std::path::Path, host: &str) -> String {
    use kuota::webhook::{certs, tls};
    use std::time::Duration;
    std::fs::create_dir_all(dir).expect("cert dir");
    let ca = certs::generate_ca(Duration::from_secs(86_400)).expect("CA");
    let serving = certs::issue_serving(&ca, &[host.to_string()], Duration::from_secs(86_400))
        .expect("serving certificate");
    std::fs::write(dir.join(tls::CERT_FILE), &serving.cert_pem).expect("write cert");
    std::fs::write(dir.join(tls::KEY_FILE), &serving.key_pem).expect("write key");
    ca.cert_pem.clone()
}

/// In existing namespace `ns`: a ResourceFlavor and a ClusterQueue with `cpu` of nominal
/// quota in it, and LocalQueue `lq` pointing at it. Returns (flavor, cluster queue).
pub(crate) async fn quota(client: &kube::Client, ns: &str, cpu: &str) -> (String, String) {
    let (rf, cq) = (unique_name("rf"), unique_name("cq"));
    create_flavor(client, &rf).await;
    create_cluster_queue(client, ns, &cq, &rf, cpu, serde_json::json!({})).await;
    create_local_queue(client, ns, "lq", &cq).await;
    (rf, cq)
}

/// ResourceFlavor `rf`, whose node label `kuota.dev/e2e-pool=<rf>` admitted Jobs get.
pub(crate) async fn create_flavor(client: &kube::Client, rf: &str) {
    let flavor: kuota::api::ResourceFlavor = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": rf},
        "spec": {"nodeLabels": {"kuota.dev/e2e-pool": rf}}
    }))
    .expect("flavor");
    kube::Api::<kuota::api::ResourceFlavor>::all(client.clone())
        .create(&Default::default(), &flavor)
        .await
        .expect("create ResourceFlavor");
}

/// ClusterQueue `cq` for namespace `ns` with `cpu` of nominal quota in flavor `rf`, and
/// `extra` merged into its spec (for example a `preemption` policy).
pub(crate) async fn create_cluster_queue(
    client: &kube::Client,
    ns: &str,
    cq: &str,
    rf: &str,
    cpu: &str,
    extra: serde_json::Value,
) {
    let mut spec = serde_json::json!({
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": rf, "resources": [{"name": "cpu", "nominalQuota": cpu}]}]
        }]
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let queue: kuota::api::ClusterQueue = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": cq}, "spec": spec
    }))
    .expect("cluster queue");
    kube::Api::<kuota::api::ClusterQueue>::all(client.clone())
        .create(&Default::default(), &queue)
        .await
        .expect("create ClusterQueue");
}

/// LocalQueue `name` in `ns`, pointing at ClusterQueue `cq`.
pub(crate) async fn create_local_queue(client: &kube::Client, ns: &str, name: &str, cq: &str) {
    let local: kuota::api::LocalQueue = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq}
    }))
    .expect("local queue");
    kube::Api::<kuota::api::LocalQueue>::namespaced(client.clone(), ns)
        .create(&Default::default(), &local)
        .await
        .expect("create LocalQueue");
}
