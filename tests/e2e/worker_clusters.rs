//! Worker control planes for the MultiKueue tests: the `cluster` script of the control
//! plane the e2e suite runs on, started again with a state directory and ports of its own
//! per worker, so that a test can stop one mid-run and start it again.
//!
//! The script is `KUOTA_K8S_CLUSTER`, else `../shared/k8s/cluster` beside the checkout;
//! without it the tests that need workers fail and say so (they never skip).

use std::path::PathBuf;
use std::process::Command;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// One worker control plane: its number picks its state directory and ports.
pub struct WorkerCluster {
    pub n: u16,
}

impl WorkerCluster {
    fn script() -> PathBuf {
        let path = std::env::var("KUOTA_K8S_CLUSTER")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/k8s/cluster")
            });
        assert!(
            path.exists(),
            "the MultiKueue tests start worker control planes with {}: set KUOTA_K8S_CLUSTER \
             to the control plane's `cluster` script (see the README)",
            path.display()
        );
        path
    }

    /// The state directory and ports of worker `n` (37nnn for worker 1, 38nnn for 2...).
    fn env(&self) -> Vec<(String, String)> {
        let base = 36 + self.n;
        let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
        vec![
            (
                "KUOTA_K8S_DIR".into(),
                format!("{tmp}/kuota-k8s-worker{}", self.n),
            ),
            ("KUOTA_K8S_APISERVER_PORT".into(), format!("{base}443")),
            ("KUOTA_K8S_ETCD_PORT".into(), format!("{base}379")),
            ("KUOTA_K8S_ETCD_PEER_PORT".into(), format!("{base}380")),
            ("KUOTA_K8S_ETCD_METRICS_PORT".into(), format!("{base}381")),
            ("KUOTA_K8S_KCM_PORT".into(), format!("{base}257")),
        ]
    }

    fn run(&self, args: &[&str]) -> String {
        let script = Self::script();
        let mut cmd = Command::new(&script);
        cmd.args(args);
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{} {args:?}: {e}", script.display()));
        assert!(
            out.status.success(),
            "worker {}: cluster {args:?} failed: {}",
            self.n,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts it (a quick no-op when it runs already); its admin kubeconfig's path.
    pub async fn up(&self) -> String {
        let me = WorkerCluster { n: self.n };
        tokio::task::spawn_blocking(move || me.run(&["up"]))
            .await
            .expect("cluster up");
        self.kubeconfig()
    }

    /// Stops it (its etcd data stays: `up` brings the same cluster back).
    pub async fn down(&self) {
        let me = WorkerCluster { n: self.n };
        tokio::task::spawn_blocking(move || me.run(&["down"]))
            .await
            .expect("cluster down");
    }

    /// Its admin kubeconfig's path.
    pub fn kubeconfig(&self) -> String {
        let dir = self
            .env()
            .into_iter()
            .find(|(k, _)| k == "KUOTA_K8S_DIR")
            .map(|(_, v)| v)
            .expect("a state directory");
        format!("{dir}/kubeconfig")
    }

    /// An admin client for it.
    pub async fn admin(&self) -> Client {
        let path = self.kubeconfig();
        let kc = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        Client::try_from(config).expect("a client")
    }
}
