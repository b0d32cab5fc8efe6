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
