//! MultiKueue's worker connections against the real API server: kuota, under its shipped
//! RBAC, reads each MultiKueueCluster's kubeconfig from a Secret in its namespace and
//! keeps the cluster's `Active` condition with Kueue's reasons. The worker here is the
//! test's own API server: reached with the test's kubeconfig it is `Connected`; a missing
//! Secret, an unparsable or insecure kubeconfig, a bad token and an unreachable server each
//! get their reason; a Secret created later connects the cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kuota::api::MultiKueueCluster;
use serde_json::json;

use crate::controller::start_controller;
use crate::support::{
    client, controller_lock, ensure_crds, kubeconfig_path, unique_name, wait_until,
};

const NAMESPACE: &str = "kuota-system";

async fn secret(client: &Client, name: &str, kubeconfig: &str) {
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "kubeconfig".to_string(),
            ByteString(kubeconfig.as_bytes().to_vec()),
        )])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &s)
        .await
        .unwrap_or_else(|e| panic!("create Secret {name}: {e}"));
}

async fn cluster(client: &Client, name: &str, secret: &str) {
    let c: MultiKueueCluster = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}
    }))
    .expect("cluster");
    Api::<MultiKueueCluster>::all(client.clone())
        .create(&PostParams::default(), &c)
        .await
        .unwrap_or_else(|e| panic!("create MultiKueueCluster {name}: {e}"));
}

/// The `Active` condition: status, reason, message.
pub(crate) async fn active(client: &Client, name: &str) -> Option<(String, String, String)> {
    let c = Api::<MultiKueueCluster>::all(client.clone())
        .get(name)
        .await
        .ok()?;
    let a = c
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Active")?;
    Some((a.status, a.reason, a.message))
}

/// Waits until the condition is `(status, reason)` with a message containing `part`.
async fn wait_for(client: &Client, name: &str, status: &str, reason: &str, part: &str) {
    let seen = wait_until(Duration::from_secs(60), || async {
        active(client, name)
            .await
            .is_some_and(|(s, r, m)| s == status && r == reason && m.contains(part))
    })
    .await;
    assert!(
        seen.is_some(),
        "MultiKueueCluster {name}: want {status} {reason} {part:?}, have {:?}",
        active(client, name).await
    );
}

#[tokio::test]
async fn worker_connections_get_kueues_conditions() {
    let _only = controller_lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace");
    match Api::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) | Err(kube::Error::Api(_)) => {} // made already (409), as the install does
        Err(e) => panic!("create namespace {NAMESPACE}: {e}"),
    }
    let own = std::fs::read_to_string(kubeconfig_path()).expect("the test's kubeconfig");
    let names: Vec<String> = (0..6).map(|i| unique_name(&format!("mkc{i}"))).collect();
    let [good, missing, garbage, insecure, token, down] = names.as_slice() else {
        unreachable!()
    };
    secret(&client, good, &own).await;
    secret(&client, garbage, "clusters: [oops").await;
    let insecure_text = own.replace(
        "certificate-authority-data:",
        "insecure-skip-tls-verify: true\n    x-ca:",
    );
    secret(&client, insecure, &insecure_text).await;
    let server = own
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("a server")
        .to_string();
    let bad_token = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: w\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: u\n  user: {{token: not-a-token}}\ncontexts:\n- name: c\n  context: {{cluster: w, user: u}}\ncurrent-context: c\n",
        own.lines()
            .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
            .expect("CA data")
    );
    secret(&client, token, &bad_token).await;
    let unreachable = bad_token.replace(&server, "https://127.0.0.1:1");
    secret(&client, down, &unreachable).await;
    for name in &names {
        cluster(&client, name, name).await;
    }
    let (stop, task) = start_controller(&client);
    wait_for(&client, good, "True", "Active", "Connected").await;
    wait_for(
        &client,
        missing,
        "False",
        "BadKubeConfig",
        &format!("load client config failed: secrets \"{missing}\" not found"),
    )
    .await;
    wait_for(
        &client,
        garbage,
        "False",
        "InsecureKubeConfig",
        "load client config failed: failed to parse kubeconfig(apiconfig)",
    )
    .await;
    wait_for(
        &client,
        insecure,
        "False",
        "InsecureKubeConfig",
        "insecure TLS verification is not allowed for cluster",
    )
    .await;
    wait_for(&client, token, "False", "ClientConnectionFailed", "401").await;
    wait_for(&client, down, "False", "ClientConnectionFailed", "").await;
    // The missing Secret appears: the cluster connects.
    secret(&client, missing, &own).await;
    wait_for(&client, missing, "True", "Active", "Connected").await;
    let _ = stop.send(());
    let _ = task.await;
    for name in &names {
        let _ = Api::<MultiKueueCluster>::all(client.clone())
            .delete(name, &DeleteParams::default())
            .await;
        let _ = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
            .delete(name, &DeleteParams::default())
            .await;
    }
}
