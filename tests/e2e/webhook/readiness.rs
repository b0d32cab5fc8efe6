//! `/readyz` follows the health of the index's watches: a watch that keeps failing makes
//! the webhook not ready and is named, with the API server's reason.

use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kuota::policy::PolicySet;

use super::{Kuota, create_namespace, delete_namespaces};
use crate::support::{client, http_get, kubeconfig_path, unique_name, wait_until};

/// A client for a ServiceAccount that may watch everything the index needs but
/// LocalQueues.
async fn client_without_local_queues(admin: &Client, ns: &str, name: &str) -> Client {
    let sa: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": ns}}))
            .expect("sa");
    Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("create ServiceAccount");
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["kueue.x-k8s.io"],
             "resources": ["clusterqueues", "workloadpriorityclasses"],
             "verbs": ["get", "list", "watch"]}
        ]
    }))
    .expect("role");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("create ClusterRole");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    }))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("create ClusterRoleBinding");
    let request: TokenRequest =
        serde_json::from_value(serde_json::json!({"spec": {"audiences": []}})).expect("token");
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), ns)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("token request")
        .status
        .expect("token status")
        .token;
    let path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig");
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    config.auth_info = serde_json::from_value(serde_json::json!({"token": token})).expect("auth");
    Client::try_from(config).expect("client")
}

#[tokio::test]
async fn a_watch_that_keeps_failing_turns_readyz_red_and_is_named() {
    let admin = client().await;
    let ns = unique_name("wh-ready");
    create_namespace(&admin, &ns, &[]).await;
    let limited = client_without_local_queues(&admin, &ns, &ns).await;
    let mut kuota = Kuota::start_as(&limited, PolicySet::default()).await;

    // kube-rs backs off 0.8 s, 1.6 s, 3.2 s...: three failures take a few seconds.
    let health = kuota.watch_health.clone();
    let named = wait_until(Duration::from_secs(60), || {
        let failing = health.failing(Instant::now());
        async move { failing.iter().any(|f| f.contains("LocalQueue")) }
    })
    .await;
    assert!(
        named.is_some(),
        "the LocalQueue watch is never reported as failing: {:?}",
        kuota.watch_health.failing(Instant::now())
    );
    let (status, body) = http_get(kuota.health_addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("json");
    let failing = body["failing"].as_array().cloned().unwrap_or_default();
    assert!(
        failing.iter().any(|f| {
            let f = f.as_str().unwrap_or_default();
            f.contains("watch of LocalQueue keeps failing") && f.contains("forbidden")
        }),
        "/readyz names the kind and the reason: {body}"
    );
    // The kinds it may watch are not reported.
    assert!(
        !failing
            .iter()
            .any(|f| f.as_str().unwrap_or_default().contains("Namespace")),
        "{body}"
    );

    kuota.stop().await;
    let _ = Api::<ClusterRoleBinding>::all(admin.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRole>::all(admin.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
    delete_namespaces(&admin, &[&ns]).await;
}
