//! Commands for people at a terminal (`kuota pending`, `kuota explain`), also run as the kubectl plugin
//! `kubectl kuota` (the same binary named `kubectl-kuota`): they read the cluster through the
//! API server with the user's kubeconfig, as kubectl does.

pub mod explain;
pub mod pending;

/// Which cluster a command talks to, chosen as kubectl chooses it.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClusterArgs {
    /// The kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config, as kubectl).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

/// The name the binary answers to: `kubectl kuota` when kubectl runs it as its plugin
/// `kubectl-kuota`, `kuota` otherwise (usage lines and errors then say what the user typed).
pub fn invoked_as(argv0: &str) -> &'static str {
    let file = std::path::Path::new(argv0)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if file == "kubectl-kuota" {
        "kubectl kuota"
    } else {
        "kuota"
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_plugin_name_is_recognised() {
        assert_eq!(
            super::invoked_as("/usr/local/bin/kubectl-kuota"),
            "kubectl kuota"
        );
        assert_eq!(super::invoked_as("kubectl-kuota.exe"), "kubectl kuota");
        assert_eq!(super::invoked_as("./target/debug/kuota"), "kuota");
    }
}
