//! `kuota serve --local-webhooks` as a real process: it registers the shipped webhook
//! entries and the CRDs' conversion at its own address, the API server calls it (a
//! queue-labelled Job is stored suspended, a v1beta2 ClusterQueue reads back as v1beta1),
//! its controller admits the Job, and on ctrl-c (SIGINT) it removes its configurations and
//! gives the CRDs back the conversion they had. Beside an installed kuota it refuses to
//! start and changes nothing.
//!
//! This developer mode runs with the developer's own kubeconfig (it creates webhook
//! configurations and patches CRDs, which the install's ServiceAccounts may not do), so
//! here it gets the test's admin kubeconfig; docs/install.md lists what it needs. It
//! registers for the whole cluster, as a developer would, so it holds the controller lock
//! (its controller watches everything) and the conversion lock (the CRDs are shared).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kuota::serve::local::{LOCAL_MUTATING, LOCAL_VALIDATING};
use serde_json::{Value, json};

use crate::support::wait_until;
use crate::support::{QueueFixture, client, controller_lock, kubeconfig_path, unique_name};
use crate::webhook::{create_job_until, webhook_host};

/// One `kuota serve --local-webhooks` process; killed when dropped.
struct LocalKuota {
    child: Child,
    log: PathBuf,
    port: u16,
}

impl LocalKuota {
    /// Starts it with the admin kubeconfig, certificates made in `dir/certs` and a Lease
    /// of its own.
    fn start(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("dir");
        let lease = unique_name("local-lease");
        let config = format!(
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n\
             leaderElection:\n  leaderElect: true\n  resourceName: {lease}\n  \
             resourceNamespace: {}\n",
            crate::rbac::KUOTA_NAMESPACE
        );
        std::fs::write(dir.join("config.yaml"), config).expect("config");
        let host = webhook_host();
        let listen = match host.as_str() {
            "127.0.0.1" => free_port("127.0.0.1"),
            _ => free_port("0.0.0.0"),
        };
        let log = dir.join("kuota.log");
        let child = Command::new(env!("CARGO_BIN_EXE_kuota"))
            .arg("serve")
            .arg(format!("--local-webhooks={host}"))
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--health-listen")
            .arg(free_port("127.0.0.1").to_string())
            .arg("--metrics-listen")
            .arg("0")
            .arg("--cert-dir")
            .arg(dir.join("certs"))
            .env("KUBECONFIG", kubeconfig_path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start kuota serve --local-webhooks");
        Self {
            child,
            log,
            port: listen.port(),
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn interrupt(&self) {
        let ok = Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -INT {}", self.child.id());
    }

    async fn exited(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }
}

impl Drop for LocalKuota {
    /// A failed test still stops it with SIGINT, so it removes what it registered (a
    /// SIGKILL would leave its configurations, with failurePolicy Fail, pointing at
    /// nothing for the next test).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .arg("-INT")
                .arg(self.child.id().to_string())
                .status();
            for _ in 0..200 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port(ip: &str) -> SocketAddr {
    let l = std::net::TcpListener::bind(format!("{ip}:0")).expect("bind");
    l.local_addr().expect("addr")
}

/// Every kuota CRD's `spec.conversion` and the local run's note of the original, by name.
async fn conversions(client: &Client) -> BTreeMap<String, Value> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut out = BTreeMap::new();
    for crd in kuota::crds::all(None).expect("CRDs") {
        let name = crd.metadata.name.expect("named");
        let live = api.get(&name).await.expect("CRD installed");
        let note = live
            .metadata
            .annotations
            .and_then(|a| a.get(kuota::serve::local::ORIGINAL_CONVERSION).cloned());
        let conversion = serde_json::to_value(live.spec.conversion).expect("json");
        out.insert(name, json!({"conversion": conversion, "note": note}));
    }
    out
}

/// Whether the two local configurations exist.
async fn registered(client: &Client) -> (bool, bool) {
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(LOCAL_MUTATING)
        .await
        .expect("get mutating");
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(LOCAL_VALIDATING)
        .await
        .expect("get validating");
    (m.is_some(), v.is_some())
}

fn shipped_entries(file: &str) -> usize {
    let path = format!("{}/manifests/base/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("manifest");
    let v: Value = serde_norway::from_str(&text).expect("yaml");
    v["webhooks"].as_array().expect("webhooks").len()
}

/// An unsuspended Job for LocalQueue `lq` asking for one cpu.
fn labelled_job(ns: &str, name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": name,
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": false,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "1"}}}]
            }}
        }
    }))
    .expect("job")
}

#[tokio::test]
async fn local_webhooks_serve_the_cluster_and_are_removed_on_ctrl_c() {
    let _controller = controller_lock().await;
    let _conversion = crate::install::CONVERSION_LOCK.lock().await;
    crate::rbac::installed().await;
    let cohort = unique_name("local-cohort");
    let fx = QueueFixture::with_queue_spec("local", "2", json!({"cohortName": cohort})).await;
    let admin = client().await;
    let before = conversions(&admin).await;
    assert_eq!(registered(&admin).await, (false, false), "no leftover");

    let dir = std::env::temp_dir().join(unique_name("kuota-local"));
    let mut kuota = LocalKuota::start(&dir);
    let up = wait_until(Duration::from_secs(60), || async {
        kuota.log_text().contains("local webhooks registered")
    })
    .await;
    assert!(up.is_some(), "never registered:\n{}", kuota.log_text());
    assert_eq!(registered(&admin).await, (true, true));
    let base = format!("https://{}:{}/", webhook_host(), kuota.port);
    let m = Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .get(LOCAL_MUTATING)
        .await
        .expect("mutating");
    let v = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .get(LOCAL_VALIDATING)
        .await
        .expect("validating");
    let (mw, vw) = (
        m.webhooks.unwrap_or_default(),
        v.webhooks.unwrap_or_default(),
    );
    assert_eq!(mw.len(), shipped_entries("mutating-webhook.yaml"));
    assert_eq!(vw.len(), shipped_entries("validating-webhook.yaml"));
    let urls: Vec<Option<String>> = mw
        .iter()
        .map(|w| w.client_config.url.clone())
        .chain(vw.iter().map(|w| w.client_config.url.clone()))
        .collect();
    assert!(
        urls.iter()
            .all(|u| u.as_deref().is_some_and(|u| u.starts_with(&base))),
        "every entry at {base}: {urls:?}"
    );
    let during = conversions(&admin).await;
    for (name, c) in &during {
        assert_eq!(
            c["conversion"]["webhook"]["clientConfig"]["url"],
            format!("{base}convert"),
            "{name}'s conversion"
        );
        assert_eq!(
            c["note"]
                .as_str()
                .map(serde_json::from_str::<Value>)
                .and_then(Result::ok),
            Some(before[name]["conversion"].clone()),
            "{name} notes the conversion to give back"
        );
    }

    // The webhook: a queue-labelled Job is stored suspended.
    let created = create_job_until(&admin, &labelled_job(&fx.ns, "local-job"), |o| {
        o.as_ref()
            .is_ok_and(|j| j.spec.as_ref().and_then(|s| s.suspend) == Some(true))
    })
    .await;
    let job = created.unwrap_or_else(|e| panic!("create Job: {e}\n{}", kuota.log_text()));
    assert_eq!(
        job.spec.as_ref().and_then(|s| s.suspend),
        Some(true),
        "stored suspended by the local webhook:\n{}",
        kuota.log_text()
    );
    // The controller: the Job fits its queue and is let run.
    let name = job.metadata.name.clone().expect("named");
    let jobs = Api::<Job>::namespaced(admin.clone(), &fx.ns);
    let started = wait_until(Duration::from_secs(60), || async {
        jobs.get(&name)
            .await
            .is_ok_and(|j| j.spec.and_then(|s| s.suspend) == Some(false))
    })
    .await;
    assert!(
        started.is_some(),
        "Job never admitted:\n{}",
        kuota.log_text()
    );
    // Its LocalQueue's status, from the controller's engine: one admitted, its cpu used.
    let queues = Api::<kuota::api::LocalQueue>::namespaced(admin.clone(), &fx.ns);
    let counted = wait_until(Duration::from_secs(30), || async {
        queues
            .get("lq")
            .await
            .ok()
            .and_then(|lq| serde_json::to_value(lq.status).ok())
            .is_some_and(|s| {
                s["admittedWorkloads"] == 1
                    && s["pendingWorkloads"] == 0
                    && s["flavorsUsage"][0]["resources"][0]["total"] == "1"
            })
    })
    .await;
    assert!(
        counted.is_some(),
        "LocalQueue status: {:?}",
        queues.get("lq").await.map(|lq| lq.status)
    );

    // Conversion: the v1beta2 ClusterQueue reads back as v1beta1 (`cohortName` → `cohort`).
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta1", "ClusterQueue");
    let old = Api::<DynamicObject>::all_with(admin.clone(), &ApiResource::from_gvk(&gvk));
    let converted = wait_until(Duration::from_secs(30), || async {
        old.get(&fx.cq)
            .await
            .is_ok_and(|o| o.data["spec"]["cohort"] == cohort.as_str())
    })
    .await;
    assert!(
        converted.is_some(),
        "ClusterQueue never read as v1beta1 through the local /convert: {:?}\n{}",
        old.get(&fx.cq).await.map(|o| o.data),
        kuota.log_text()
    );

    // ctrl-c: everything it registered is gone, the CRDs are as they were.
    kuota.interrupt();
    let status = kuota.exited(Duration::from_secs(30)).await;
    let log = kuota.log_text();
    let status = status.unwrap_or_else(|| panic!("still running 30 s after SIGINT:\n{log}"));
    assert!(status.success(), "exit status {status}:\n{log}");
    assert_eq!(
        registered(&admin).await,
        (false, false),
        "configurations left:\n{log}"
    );
    assert_eq!(
        conversions(&admin).await,
        before,
        "conversion not restored:\n{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = jobs.delete(&name, &DeleteParams::background()).await;
    fx.teardown().await;
}

#[tokio::test]
async fn local_webhooks_refuse_to_start_beside_an_installed_kuota() {
    let _controller = controller_lock().await;
    let _conversion = crate::install::CONVERSION_LOCK.lock().await;
    let admin = client().await;
    crate::support::ensure_crds(&admin).await;
    let before = conversions(&admin).await;
    // The shipped configuration's name, with an entry that matches nothing.
    let installed: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": kuota::crds::inject::MUTATING_CONFIGURATION},
        "webhooks": [{
            "name": "never.kuota.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "clientConfig": {"url": "https://127.0.0.1:1/never"},
            "objectSelector": {"matchLabels": {"kuota.dev/e2e-never": "x"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["configmaps"]}]
        }]
    }))
    .expect("configuration");
    let api = Api::<MutatingWebhookConfiguration>::all(admin.clone());
    api.create(&PostParams::default(), &installed)
        .await
        .expect("create the stand-in install");

    let dir = std::env::temp_dir().join(unique_name("kuota-local"));
    let mut kuota = LocalKuota::start(&dir);
    let status = kuota.exited(Duration::from_secs(30)).await;
    let log = kuota.log_text();
    let _ = api
        .delete(
            kuota::crds::inject::MUTATING_CONFIGURATION,
            &DeleteParams::default(),
        )
        .await;
    let status = status.unwrap_or_else(|| panic!("still running beside an install:\n{log}"));
    assert!(!status.success(), "refused with a failure status:\n{log}");
    assert!(
        log.contains("kuota is installed in this cluster (MutatingWebhookConfiguration kuota-mutating-webhook exists)"),
        "says why:\n{log}"
    );
    assert_eq!(
        registered(&admin).await,
        (false, false),
        "registered nothing"
    );
    assert_eq!(conversions(&admin).await, before, "changed no CRD");
    let _ = std::fs::remove_dir_all(&dir);
}
