//! `kuota serve` as real processes: two replicas and a leader that dies, a replica killed
//! in the middle of admissions and restarted, and a graceful SIGTERM. Each process gets
//! its own listeners on 127.0.0.1 and a Lease unique to the test (Kueue's
//! `leaderElection.resourceName`/`resourceNamespace` in a `--config` file), in kuota's
//! namespace, where the install's Role grants Leases. Each runs as the install's
//! `kuota-controller` ServiceAccount (a kubeconfig with its token); a permission the API
//! server refuses it fails the test. The webhook is served but not registered: the tests
//! create their Jobs suspended.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use kuota::api::Workload;

use crate::controller::{condition, job};
use crate::rbac::KUOTA_NAMESPACE;
use crate::support::{
    QueueFixture, controller_lock, http_get, try_http_get, unique_name, wait_until,
};

/// Lease timing of these tests (Kueue's defaults are 15 s, 10 s and 2 s).
const LEASE_SECONDS: u64 = 4;

/// One `kuota serve` process; killed when dropped.
struct Serve {
    child: Child,
    health: SocketAddr,
    log: PathBuf,
}

/// A free port on 127.0.0.1 (bound, then released for the process to take).
fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// A directory with a serving certificate, a kubeconfig of the controller's ServiceAccount
/// and a `--config` file whose leader election uses Lease `lease` in kuota's namespace.
async fn serve_dir(lease: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_name("kuota-serve"));
    crate::support::write_serving_certs(&dir, "127.0.0.1");
    crate::rbac::installed().await;
    crate::rbac::write_kubeconfig(
        KUOTA_NAMESPACE,
        crate::rbac::Identity::Controller.service_account(),
        &dir.join("kubeconfig"),
    )
    .await;
    let ns = KUOTA_NAMESPACE;
    let config = format!(
        "apiVersion: config.kueue.x-k8s.io/v1beta1\n\
         kind: Configuration\n\
         leaderElection:\n  \
           leaderElect: true\n  \
           resourceName: {lease}\n  \
           resourceNamespace: {ns}\n  \
           leaseDuration: {LEASE_SECONDS}s\n  \
           renewDeadline: 3s\n  \
           retryPeriod: 1s\n"
    );
    std::fs::write(dir.join("config.yaml"), config).expect("write config");
    dir
}

impl Serve {
    /// Starts `kuota serve` with the certificate and configuration in `dir`; its log goes
    /// to `dir/<name>.log`.
    fn start(dir: &Path, name: &str) -> Self {
        let config = vec![
            "serve".to_string(),
            "--config".to_string(),
            dir.join("config.yaml").display().to_string(),
        ];
        Self::start_with(dir, name, &config)
    }

    /// Starts `kuota <args>` with its own listeners and the certificate in `dir` (flags
    /// that override what a Configuration file says).
    fn start_with(dir: &Path, name: &str, args: &[String]) -> Self {
        let health = free_port();
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kuota"))
            .args(args)
            .arg("--listen")
            .arg(free_port().to_string())
            .arg("--health-listen")
            .arg(health.to_string())
            // /metrics on the probe listener whatever a Configuration says (the
            // shipped one binds metrics.bindAddress :8080 on every interface, which
            // two replicas on one host cannot share).
            .arg("--metrics-listen")
            .arg(health.to_string())
            .arg("--cert-dir")
            .arg(dir)
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("RUST_LOG", "info,kuota=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("start kuota serve");
        Self { child, health, log }
    }

    /// The identity this process writes on the Lease ends in `_<pid in hex>` and eight
    /// hex digits (see `kuota::lease::identity`).
    fn holds(&self, holder: &str) -> bool {
        let pid = format!("{:x}", self.child.id());
        holder
            .rsplit_once('_')
            .is_some_and(|(_, tail)| tail.len() == pid.len() + 8 && tail.starts_with(&pid))
    }

    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {}", self.child.id());
    }

    /// Waits for the process to exit; `None` if it is still running after `timeout`.
    async fn exited(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL, as a crash or an OOM kill would.
    async fn kill9(&mut self) {
        self.signal("KILL");
        self.exited(Duration::from_secs(10))
            .await
            .expect("a SIGKILLed process exits");
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::rbac::assert_log_permitted("kuota serve", &self.log_text());
    }
}

/// The Lease's holder, if anyone holds it.
async fn holder(client: &Client, ns: &str, lease: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(lease)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Waits until one of `replicas` holds the Lease; its index.
async fn leader_of(client: &Client, ns: &str, lease: &str, replicas: &[&Serve]) -> usize {
    let mut last = None;
    for _ in 0..300 {
        last = holder(client, ns, lease).await;
        if let Some(i) = last
            .as_deref()
            .and_then(|h| replicas.iter().position(|r| r.holds(h)))
        {
            return i;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "none of the replicas took Lease {ns}/{lease} within 30 s (holder: {last:?}); logs:\n{}",
        replicas
            .iter()
            .map(|r| r.log_text())
            .collect::<Vec<_>>()
            .join("\n----\n")
    );
}

/// Creates suspended queue-labelled Jobs asking for `cpu` each.
async fn create_jobs(client: &Client, ns: &str, names: &[String], cpu: &str) {
    let jobs = Api::<Job>::namespaced(client.clone(), ns);
    for name in names {
        let mut j = job(ns, name, cpu);
        j.spec.get_or_insert_with(Default::default).suspend = Some(true);
        jobs.create(&PostParams::default(), &j)
            .await
            .unwrap_or_else(|e| panic!("create Job {name}: {e}"));
    }
}

/// The namespace's Workloads by owning Job name.
async fn workloads(client: &Client, ns: &str) -> BTreeMap<String, Workload> {
    Api::<Workload>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list Workloads")
        .items
        .into_iter()
        .filter_map(|wl| {
            let owner = wl
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Job" && o.controller == Some(true))?
                .name
                .clone();
            Some((owner, wl))
        })
        .collect()
}

fn admitted(wl: &Workload) -> bool {
    wl.status.as_ref().is_some_and(|s| s.admission.is_some())
        && condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "True")
}

fn reserved_at(wl: &Workload) -> Option<String> {
    wl.status
        .as_ref()?
        .condition("QuotaReserved")
        .map(|c| c.last_transition_time.0.to_string())
}

/// The cpu the Workload's pod sets request, in millicores (the tests' Jobs ask in `m`
/// or whole cores).
fn cpu_millis(wl: &Workload) -> i64 {
    let v = serde_json::to_value(&wl.spec.pod_sets).expect("json");
    v.as_array()
        .into_iter()
        .flatten()
        .map(|ps| {
            let count = ps["count"].as_i64().unwrap_or(1);
            let req = ps["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                .as_str()
                .unwrap_or("0");
            let m = match req.strip_suffix('m') {
                Some(m) => m.parse::<i64>().expect("millicores"),
                None => req.parse::<i64>().expect("cores") * 1000,
            };
            count * m
        })
        .sum()
}

/// The cpu a ClusterQueue's `status.flavorsReservation` says is reserved, in millicores.
fn reserved_cpu_millis(status: &serde_json::Value) -> Option<i64> {
    let total = status["flavorsReservation"]
        .as_array()?
        .iter()
        .flat_map(|f| f["resources"].as_array().into_iter().flatten())
        .find(|r| r["name"] == "cpu")?["total"]
        .as_str()?
        .to_string();
    match total.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => total.parse::<i64>().ok().map(|c| c * 1000),
    }
}

/// The Jobs' suspend flags by name.
async fn suspended(client: &Client, ns: &str) -> BTreeMap<String, bool> {
    Api::<Job>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list Jobs")
        .items
        .into_iter()
        .map(|j| {
            let name = j.metadata.name.clone().unwrap_or_default();
            (name, j.spec.and_then(|s| s.suspend) == Some(true))
        })
        .collect()
}

/// Waits until `want` Workloads are admitted and their Jobs running, and every other
/// Workload is pending with a reason and its Job suspended: a settled state.
async fn wait_settled(client: &Client, ns: &str, total: usize, want: usize, logs: &Serve) {
    let mut last = String::new();
    for _ in 0..600 {
        let wls = workloads(client, ns).await;
        let jobs = suspended(client, ns).await;
        let admitted_n = wls.values().filter(|w| admitted(w)).count();
        let settled = wls.len() == total
            && admitted_n == want
            && wls.iter().all(|(job, wl)| {
                let held = jobs.get(job).copied().unwrap_or(false);
                if admitted(wl) {
                    !held
                } else {
                    held && condition(wl, "QuotaReserved")
                        .is_some_and(|c| c.0 == "False" && !c.1.is_empty())
                }
            });
        if settled {
            return;
        }
        last = format!(
            "{admitted_n} admitted of {} Workloads; Jobs held: {jobs:?}",
            wls.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "never settled with {want} admitted: {last}\nlog:\n{}",
        logs.log_text()
    );
}

#[tokio::test]
async fn two_replicas_one_leads_and_the_other_takes_over_when_it_is_killed() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("replicas", "3").await;
    let client = fx.client.clone();
    let lease = unique_name("lease");
    let dir = serve_dir(&lease).await;
    let replicas = [Serve::start(&dir, "a"), Serve::start(&dir, "b")];
    let first = leader_of(
        &client,
        KUOTA_NAMESPACE,
        &lease,
        &[&replicas[0], &replicas[1]],
    )
    .await;
    let [a, b] = replicas;
    let (mut leader, follower) = if first == 0 { (a, b) } else { (b, a) };

    let before: Vec<String> = (0..2).map(|i| format!("before-{i}")).collect();
    create_jobs(&client, &fx.ns, &before, "1").await;
    wait_settled(&client, &fx.ns, 2, 2, &leader).await;
    // Only the leader schedules, and its metrics say so; the follower's never do.
    let role = r#"replica_role="leader""#;
    let admissions = wait_until(Duration::from_secs(10), || async {
        try_http_get(leader.health, "/metrics")
            .await
            .is_ok_and(|(_, body)| body.contains(role))
    })
    .await;
    assert!(
        admissions.is_some(),
        "the leader's /metrics never said replica_role=\"leader\""
    );
    let (status, body) = http_get(follower.health, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        !body.contains(role),
        "the follower reports as leader:\n{body}"
    );
    let admitted_before: BTreeMap<String, Option<String>> = workloads(&client, &fx.ns)
        .await
        .iter()
        .map(|(job, wl)| (job.clone(), reserved_at(wl)))
        .collect();

    // The leader dies without releasing the Lease: the follower takes it once it lapses.
    leader.kill9().await;
    let taken = wait_until(Duration::from_secs(LEASE_SECONDS + 10), || async {
        holder(&client, KUOTA_NAMESPACE, &lease)
            .await
            .is_some_and(|h| follower.holds(&h))
    })
    .await;
    assert!(
        taken.is_some(),
        "the follower did not take the Lease within its duration ({LEASE_SECONDS} s) and a \
         margin; holder: {:?}\nlog:\n{}",
        holder(&client, KUOTA_NAMESPACE, &lease).await,
        follower.log_text()
    );

    // The new leader admits new Jobs (one fits, one waits) and nothing twice.
    let after: Vec<String> = (0..2).map(|i| format!("after-{i}")).collect();
    create_jobs(&client, &fx.ns, &after, "1").await;
    wait_settled(&client, &fx.ns, 4, 3, &follower).await;
    let wls = workloads(&client, &fx.ns).await;
    for (job, at) in &admitted_before {
        assert_eq!(
            &reserved_at(&wls[job]),
            at,
            "Workload of {job} was admitted again by the new leader"
        );
    }
    let used: i64 = wls.values().filter(|w| admitted(w)).map(cpu_millis).sum();
    assert_eq!(
        used, 3000,
        "the admitted Workloads use exactly the 3 cpu of quota"
    );
    // The ClusterQueue's status (written by the new leader) counts the same admissions.
    let counted = wait_until(Duration::from_secs(15), || async {
        Api::<kuota::api::ClusterQueue>::all(client.clone())
            .get(&fx.cq)
            .await
            .ok()
            .and_then(|cq| serde_json::to_value(cq.status).ok())
            .is_some_and(|s| {
                s["admittedWorkloads"] == 3
                    && s["pendingWorkloads"] == 1
                    && reserved_cpu_millis(&s) == Some(used)
            })
    })
    .await;
    assert!(
        counted.is_some(),
        "ClusterQueue status does not count 3 admitted, 1 pending and {used}m reserved"
    );

    drop(follower);
    fx.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_replica_killed_mid_stream_restarts_without_double_admission_or_stuck_jobs() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("midstream", "5").await;
    let client = fx.client.clone();
    let lease = unique_name("lease");
    let dir = serve_dir(&lease).await;
    let mut kuota = Serve::start(&dir, "first");
    leader_of(&client, KUOTA_NAMESPACE, &lease, &[&kuota]).await;

    // 20 Jobs of 500m over 5 cpu: 10 fit. Kill as soon as admissions have begun.
    let names: Vec<String> = (0..20).map(|i| format!("job-{i:02}")).collect();
    create_jobs(&client, &fx.ns, &names, "500m").await;
    wait_until(Duration::from_secs(60), || async {
        workloads(&client, &fx.ns).await.values().any(admitted)
    })
    .await
    .expect("nothing admitted within 60 s");
    kuota.kill9().await;
    let at_kill: BTreeMap<String, Option<String>> = workloads(&client, &fx.ns)
        .await
        .iter()
        .filter(|(_, wl)| admitted(wl))
        .map(|(job, wl)| (job.clone(), reserved_at(wl)))
        .collect();
    assert!(
        at_kill.len() <= 10,
        "over-admitted before the kill: {at_kill:?}"
    );
    let held = suspended(&client, &fx.ns).await;
    let stranded = at_kill
        .keys()
        .filter(|j| held.get(*j) == Some(&true))
        .count();
    eprintln!(
        "killed with {} admitted, {stranded} of them not started yet",
        at_kill.len()
    );

    // A fresh process takes the Lease once the dead one's lapses, and finishes the work.
    let restarted = Serve::start(&dir, "second");
    leader_of(&client, KUOTA_NAMESPACE, &lease, &[&restarted]).await;
    wait_settled(&client, &fx.ns, 20, 10, &restarted).await;
    let wls = workloads(&client, &fx.ns).await;
    for (job, at) in &at_kill {
        assert!(
            admitted(&wls[job]),
            "{job} lost its admission across the restart"
        );
        assert_eq!(
            &reserved_at(&wls[job]),
            at,
            "{job} was admitted again after the restart"
        );
    }
    let used: i64 = wls.values().filter(|w| admitted(w)).map(cpu_millis).sum();
    assert!(used <= 5000, "admitted {used}m over 5 cpu of quota");

    drop(restarted);
    fx.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sigterm_releases_the_lease_and_exits_zero() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("sigterm", "1").await;
    let client = fx.client.clone();
    let lease = unique_name("lease");
    let dir = serve_dir(&lease).await;
    let mut kuota = Serve::start(&dir, "only");
    leader_of(&client, KUOTA_NAMESPACE, &lease, &[&kuota]).await;
    // Scheduling works before the signal.
    create_jobs(&client, &fx.ns, &["one".to_string()], "500m").await;
    wait_settled(&client, &fx.ns, 1, 1, &kuota).await;

    kuota.signal("TERM");
    let status = kuota.exited(Duration::from_secs(15)).await;
    let log = kuota.log_text();
    let status = status.unwrap_or_else(|| panic!("still running 15 s after SIGTERM:\n{log}"));
    assert!(
        status.success(),
        "exit status {status} after SIGTERM:\n{log}"
    );
    // Released, not left to expire: a successor may take it at once.
    assert_eq!(
        holder(&client, KUOTA_NAMESPACE, &lease).await,
        None,
        "the Lease still names a holder after SIGTERM:\n{log}"
    );

    drop(kuota);
    fx.teardown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The args of the shipped controller Deployment (manifests/base/controller.yaml), with
/// `--config` pointing at a copy of the shipped ConfigMap's Configuration in `dir`.
fn shipped_controller_args(dir: &Path) -> Vec<String> {
    use k8s_openapi::api::apps::v1::Deployment;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("manifests/base/controller.yaml"))
        .expect("controller.yaml");
    let deployment: Deployment = serde_norway::Deserializer::from_str(&text)
        .find_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .expect("a Deployment");
    let args = deployment
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod spec")
        .containers[0]
        .args
        .clone()
        .expect("args");
    let configmap = std::fs::read_to_string(root.join("manifests/base/configuration.yaml"))
        .expect("configuration.yaml");
    let value: serde_json::Value = serde_norway::from_str(&configmap).expect("a ConfigMap");
    let config = value["data"]["controller_manager_config.yaml"]
        .as_str()
        .expect("the Configuration");
    std::fs::write(dir.join("shipped-config.yaml"), config).expect("write");
    args.into_iter()
        .map(|a| match a.strip_prefix("--config=") {
            Some(_) => format!("--config={}", dir.join("shipped-config.yaml").display()),
            None => a,
        })
        .collect()
}

/// One Lease whichever way kuota starts: a replica started with the shipped Deployment's
/// args (its Configuration, `--config`) and one started with the same args but no
/// `--config` contend for the same Lease, and exactly one of them leads.
#[tokio::test]
async fn replicas_from_the_shipped_args_with_and_without_config_elect_one_leader() {
    let _only = controller_lock().await;
    let client = crate::support::client().await;
    let (ns, lease) = ("kuota-system", kuota::config::DEFAULT_LEASE_NAME);
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    let mut object = k8s_openapi::api::core::v1::Namespace::default();
    object.metadata.name = Some(ns.to_string());
    // Already there when the suite runs after an install: fine.
    let _ = namespaces.create(&PostParams::default(), &object).await;
    let dir = std::env::temp_dir().join(unique_name("kuota-shipped"));
    crate::support::write_serving_certs(&dir, "127.0.0.1");
    // As the shipped Deployment runs: with the controller's ServiceAccount.
    crate::rbac::installed().await;
    crate::rbac::write_kubeconfig(
        KUOTA_NAMESPACE,
        crate::rbac::Identity::Controller.service_account(),
        &dir.join("kubeconfig"),
    )
    .await;
    let with_config = shipped_controller_args(&dir);
    assert!(
        with_config.iter().any(|a| a.starts_with("--config=")),
        "the shipped controller passes --config: {with_config:?}"
    );
    let without: Vec<String> = with_config
        .iter()
        .filter(|a| !a.starts_with("--config"))
        .cloned()
        .collect();
    let replicas = [
        Serve::start_with(&dir, "with-config", &with_config),
        Serve::start_with(&dir, "without-config", &without),
    ];
    let first = leader_of(&client, ns, lease, &[&replicas[0], &replicas[1]]).await;
    let follower = &replicas[1 - first];
    // The other one follows the same Lease: it says so, and keeps saying so.
    let follows = wait_until(Duration::from_secs(20), || async {
        // The follower may still be starting when the leader already holds the Lease.
        try_http_get(follower.health, "/metrics")
            .await
            .is_ok_and(|(_, body)| body.contains(r#"replica_role="follower""#))
    })
    .await;
    assert!(
        follows.is_some(),
        "the second replica never reported itself a follower; its log:\n{}",
        follower.log_text()
    );
    for _ in 0..10 {
        let holder = holder(&client, ns, lease).await.expect("a holder");
        assert!(
            replicas[first].holds(&holder),
            "the Lease changed hands: {holder}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    drop(replicas);
    // Leave no held Lease behind for whatever runs next.
    let _ = Api::<Lease>::namespaced(client.clone(), ns)
        .delete(lease, &Default::default())
        .await;
}
