//! kuota started without a permission it needs (a hand-trimmed ClusterRole): `kuota serve`
//! says so in one log line naming the verb and resource, counts it in
//! `kuota_api_forbidden_total`, reports not ready (naming it in `/readyz`) and keeps
//! running, live, instead of crash-looping over the cause. Granted again, it is ready and
//! the work it could not do gets done.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{REFUSAL_LOG, kustomize_rbac, write_kubeconfig};
use crate::controller::{condition, job, wait_for_workload};
use crate::support::{QueueFixture, controller_lock, http_get, unique_name, wait_until};

/// The kustomize install's controller rules; `trimmed`: with `patch` and `update` of
/// `workloads/status` taken out (what a hand-trimmed role might lack).
fn controller_rules(trimmed: bool) -> Value {
    let role = kustomize_rbac()
        .into_iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "kuota-controller")
        .expect("the install's kuota-controller ClusterRole");
    let mut rules = role["rules"].as_array().cloned().expect("rules");
    if trimmed {
        let status = Value::from("workloads/status");
        let granting = rules
            .iter_mut()
            .find(|r| {
                r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.contains(&status))
            })
            .expect("the install grants workloads/status");
        if let Some(resources) = granting["resources"].as_array_mut() {
            resources.retain(|r| *r != status);
        }
        rules.push(json!({
            "apiGroups": ["kueue.x-k8s.io"], "resources": [status], "verbs": ["get"]
        }));
    }
    Value::from(rules)
}

/// A `kuota serve` process; killed when dropped.
struct Serve {
    child: Child,
    health: std::net::SocketAddr,
    log: std::path::PathBuf,
}

fn free_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

impl Serve {
    fn start(dir: &Path) -> Self {
        let health = free_port();
        let log = dir.join("kuota.log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kuota"))
            .arg("serve")
            .args(["--listen", &free_port().to_string()])
            .args(["--health-listen", &health.to_string()])
            .arg("--cert-dir")
            .arg(dir)
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("start kuota serve");
        Self { child, health, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn refusal_lines(&self) -> Vec<String> {
        self.log_text()
            .lines()
            .filter(|l| l.contains(REFUSAL_LOG))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of `kuota_api_forbidden_total` for the access, from `/metrics` (whatever the
/// series' `replica_role`).
async fn refused_count(health: std::net::SocketAddr, verb: &str, resource: &str) -> Option<f64> {
    let series = format!(
        "kuota_api_forbidden_total{{verb=\"{verb}\",group=\"kueue.x-k8s.io\",resource=\"{resource}\",replica_role="
    );
    let (_, body) = http_get(health, "/metrics").await;
    body.lines().find_map(|l| {
        let rest = l.strip_prefix(&series)?;
        rest.rsplit_once(' ')?.1.trim().parse().ok()
    })
}

#[tokio::test]
async fn a_kuota_without_a_permission_says_which_is_not_ready_and_recovers_when_granted() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("rbac-trim", "1").await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    let name = unique_name("kuota-trimmed");
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}})).expect("sa");
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("create ServiceAccount");
    let roles = Api::<ClusterRole>::all(client.clone());
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name}, "rules": controller_rules(true)
    }))
    .expect("role");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("create ClusterRole");
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    }))
    .expect("binding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create ClusterRoleBinding");
    // The install's namespaced grant, untrimmed: MultiKueue's kubeconfig Secrets.
    let secrets_role: Role = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "kuota-system"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]
    }))
    .expect("secrets role");
    let ns_roles = Api::<Role>::namespaced(client.clone(), "kuota-system");
    ns_roles
        .create(&PostParams::default(), &secrets_role)
        .await
        .expect("create Role");
    let secrets_binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "kuota-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    }))
    .expect("secrets binding");
    let ns_bindings = Api::<RoleBinding>::namespaced(client.clone(), "kuota-system");
    ns_bindings
        .create(&PostParams::default(), &secrets_binding)
        .await
        .expect("create RoleBinding");

    let dir = std::env::temp_dir().join(unique_name("kuota-trimmed"));
    crate::support::write_serving_certs(&dir, "127.0.0.1");
    write_kubeconfig(&ns, &name, &dir.join("kubeconfig")).await;
    // One replica, no Lease (the trimmed account is not bound to the Lease Role).
    std::fs::write(
        dir.join("config.yaml"),
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n\
         leaderElection:\n  leaderElect: false\n",
    )
    .expect("config");
    let mut kuota = Serve::start(&dir);
    let up = wait_until(Duration::from_secs(30), || async {
        tokio::net::TcpStream::connect(kuota.health).await.is_ok()
    })
    .await;
    assert!(
        up.is_some(),
        "kuota serve never listened; log:\n{}",
        kuota.log_text()
    );

    let mut j = job(&ns, "held", "500m");
    j.spec.get_or_insert_with(Default::default).suspend = Some(true);
    Api::<Job>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &j)
        .await
        .expect("create Job");

    // The admission's status write is refused: counted, and /readyz names it.
    let counted = wait_until(Duration::from_secs(60), || async {
        refused_count(kuota.health, "patch", "workloads/status")
            .await
            .is_some_and(|n| n >= 1.0)
    })
    .await;
    assert!(
        counted.is_some(),
        "kuota_api_forbidden_total never counted the refused workloads/status patch; log:\n{}",
        kuota.log_text()
    );
    let (status, body) = http_get(kuota.health, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let readyz: Value = serde_json::from_str(&body).expect("json");
    assert!(
        readyz["failing"].as_array().into_iter().flatten().any(|f| f
            .as_str()
            .unwrap_or_default()
            .contains("not permitted to patch workloads/status in API group kueue.x-k8s.io")),
        "/readyz names the verb and resource: {body}"
    );
    // Alive (liveness passes, the process runs) and the cause said once, not repeated.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(http_get(kuota.health, "/healthz").await.0, 200);
    assert!(
        kuota.child.try_wait().expect("try_wait").is_none(),
        "kuota exited instead of waiting for the permission; log:\n{}",
        kuota.log_text()
    );
    let lines = kuota.refusal_lines();
    assert_eq!(
        lines.len(),
        1,
        "one log line per refused access: {lines:#?}"
    );
    assert!(
        lines[0].contains("patch workloads/status in API group kueue.x-k8s.io"),
        "{}",
        lines[0]
    );
    assert_eq!(
        condition(
            &wait_for_workload(&client, &ns, "held", "created", |_| true).await,
            "QuotaReserved"
        )
        .map(|c| c.0),
        None,
        "no admission without the status write"
    );

    // Granted again: the admission lands and kuota is ready.
    roles
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": controller_rules(false)})),
        )
        .await
        .expect("grant the full rules");
    wait_for_workload(&client, &ns, "held", "admitted once permitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let ready = wait_until(Duration::from_secs(30), || async {
        http_get(kuota.health, "/readyz").await.0 == 200
    })
    .await;
    assert!(
        ready.is_some(),
        "kuota stayed not ready after the grant: {}\nlog:\n{}",
        http_get(kuota.health, "/readyz").await.1,
        kuota.log_text()
    );

    drop(kuota);
    let _ = bindings.delete(&name, &DeleteParams::default()).await;
    let _ = roles.delete(&name, &DeleteParams::default()).await;
    let _ = ns_bindings.delete(&name, &DeleteParams::default()).await;
    let _ = ns_roles.delete(&name, &DeleteParams::default()).await;
    fx.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
