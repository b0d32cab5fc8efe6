//! Hot reload: poll the policy directory and swap in the new set when the files change.
//!
//! Polling (rather than inotify) works the same for ConfigMap volumes, whose updates are
//! symlink swaps, and costs a directory read per interval. A changed directory that fails
//! to load is logged once with every `file:line: reason`, and the last good set stays.

use super::PolicyHandle;
use super::load::{parse_files, read_dir};
use std::path::PathBuf;
use std::time::Duration;

impl PolicyHandle {
    /// Spawns a task that re-reads `dir` every `interval` and swaps in the policies when the
    /// file contents change and load cleanly. Needs a running tokio runtime.
    pub fn watch(
        &self,
        dir: impl Into<PathBuf>,
        interval: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let handle = self.clone();
        let dir = dir.into();
        tokio::spawn(async move {
            let mut last: Option<Vec<(PathBuf, String)>> = None;
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let d = dir.clone();
                let read = tokio::task::spawn_blocking(move || read_dir(&d)).await;
                let files = match read {
                    Ok(Ok(f)) => f,
                    Ok(Err(e)) => {
                        tracing::warn!(dir = %dir.display(), error = %e, "cannot read policy directory; keeping current policies");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "policy directory read task failed");
                        continue;
                    }
                };
                if last.as_ref() == Some(&files) {
                    continue;
                }
                match parse_files(&files) {
                    Ok(set) => {
                        tracing::info!(dir = %dir.display(), policies = set.policies.len(), "policies reloaded");
                        handle.replace(set);
                    }
                    Err(e) => {
                        for err in &e.errors {
                            tracing::warn!(error = %err, "invalid policy file; keeping the last good policies");
                        }
                    }
                }
                last = Some(files);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, max: u32) -> String {
        format!(
            "apiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n  namespaceSelector: {{}}\n  maxGPUsPerJob: {max}\n"
        )
    }

    #[tokio::test]
    async fn reloads_changes_and_keeps_last_good_set() {
        let dir = std::env::temp_dir().join(format!("kuota-policy-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("a.yaml"), policy("a", 4)).expect("write");
        let h = PolicyHandle::load_dir(&dir).expect("valid");
        assert_eq!(h.current().policies[0].spec.max_gpus_per_job, Some(4));
        let task = h.watch(&dir, Duration::from_millis(20));
        std::fs::write(dir.join("a.yaml"), policy("a", 8)).expect("write");
        let mut ok = false;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if h.current().policies[0].spec.max_gpus_per_job == Some(8) {
                ok = true;
                break;
            }
        }
        assert!(ok, "reloaded");
        std::fs::write(dir.join("b.yaml"), "spec: [").expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(h.current().policies.len(), 1, "invalid file rejected");
        assert!(h.reload(&dir).is_err());
        task.abort();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
