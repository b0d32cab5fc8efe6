//! `kuota serve` as the process under test: its certificates and Kueue Configuration in
//! the run's temp directory, the marker write that names its user in the audit log, and
//! its CPU and peak RSS when it stops.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::{BoxError, setup};

/// A running `kuota serve`.
pub struct Kuota {
    child: std::process::Child,
    /// The run's temp directory (certificates, configuration, kuota's log).
    pub dir: PathBuf,
    /// The ConfigMap whose create names kuota's user in the audit log.
    pub marker: String,
}

/// kuota's client settings for the run.
pub struct Options<'a> {
    pub binary: &'a Path,
    pub log_filter: &'a str,
    pub qps: f32,
    pub burst: u32,
    /// `integrations.frameworks`.
    pub frameworks: Vec<&'static str>,
    /// A KuotaConfiguration document appended to the configuration file.
    pub own_config: Option<String>,
}

impl Kuota {
    /// Writes kuota's certificates and configuration, makes the marker write with the
    /// admin client (the user kuota runs as), and starts `kuota serve`.
    pub async fn start(opts: Options<'_>, admin: &Client, run: &str) -> Result<Self, BoxError> {
        let dir = std::env::temp_dir().join(run);
        std::fs::create_dir_all(&dir)?;
        let certs = std::process::Command::new(opts.binary)
            .args(["certs", "--extra-san=127.0.0.1", "--out-dir"])
            .arg(dir.join("certs"))
            .output()?;
        if !certs.status.success() {
            return Err(format!("kuota certs: {}", String::from_utf8_lossy(&certs.stderr)).into());
        }
        let mut config = format!(
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nnamespace: {run}-q0\n\
             clientConnection:\n  qps: {}\n  burst: {}\nintegrations:\n  frameworks: [{}]\n",
            opts.qps,
            opts.burst,
            opts.frameworks.join(", ")
        );
        if let Some(own) = &opts.own_config {
            config.push_str("---\n");
            config.push_str(own);
        }
        std::fs::write(dir.join("config.yaml"), config)?;
        let marker = format!("{run}-marker");
        let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &setup::namespace(run, 0));
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": marker}}))?;
        cms.create(&PostParams::default(), &cm).await?;
        let log = std::fs::File::create(dir.join("kuota.log"))?;
        let child = std::process::Command::new(opts.binary)
            .args([
                "serve",
                "--listen=127.0.0.1:0",
                "--health-listen=127.0.0.1:0",
                "--ready-without-index",
            ])
            .arg("--cert-dir")
            .arg(dir.join("certs"))
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .env("RUST_LOG", opts.log_filter)
            .stderr(log)
            .spawn()?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        Ok(Self { child, dir, marker })
    }

    /// Stops kuota with SIGTERM; its CPU seconds and peak RSS (MiB), read just before.
    pub fn stop(&mut self) -> Option<(f64, f64)> {
        let stats = proc_stats(self.child.id());
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        stats
    }
}

/// A process's CPU seconds (user + system) and peak RSS in MiB, from /proc.
fn proc_stats(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm_kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((ticks / 100.0, hwm_kb / 1024.0))
}
