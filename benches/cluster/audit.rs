//! Counts kuota's API writes from the API server's audit log (JSON lines).
//!
//! The benchmark's own client impersonates [`BENCH_USER`], and kube-controller-manager
//! has its own user, so a write by the admin user without impersonation is kuota's.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

/// The user the benchmark's client impersonates.
pub const BENCH_USER: &str = "kuota-bench";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    user: User,
    impersonated_user: Option<User>,
    object_ref: Option<ObjectRef>,
    request_received_timestamp: Timestamp,
}

#[derive(Deserialize)]
struct User {
    username: String,
}

#[derive(Deserialize)]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
}

/// Writes by `user` (not impersonating) received within `[from, to)`, counted by
/// `verb resource[/subresource]`.
pub fn count_writes(
    log: &Path,
    user: &str,
    from: Timestamp,
    to: Timestamp,
) -> std::io::Result<BTreeMap<String, u64>> {
    let file = std::fs::File::open(log)?;
    let mut out = BTreeMap::new();
    for line in std::io::BufReader::new(file).lines() {
        let Ok(e) = serde_json::from_str::<Event>(&line?) else {
            continue;
        };
        if e.stage != "ResponseComplete"
            || e.user.username != user
            || e.impersonated_user.is_some()
            || !matches!(
                e.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
            || e.request_received_timestamp < from
            || e.request_received_timestamp >= to
        {
            continue;
        }
        let obj = e.object_ref.unwrap_or(ObjectRef {
            resource: None,
            subresource: None,
        });
        let mut kind = obj.resource.unwrap_or_default();
        if let Some(sub) = obj.subresource {
            kind = format!("{kind}/{sub}");
        }
        *out.entry(format!("{} {kind}", e.verb)).or_default() += 1;
    }
    Ok(out)
}

/// The admin user of the kubeconfig: the first user the audit log shows writing the
/// benchmark's marker ConfigMap (see main.rs), read from the log itself.
pub fn user_of_marker(log: &Path, marker: &str) -> std::io::Result<Option<String>> {
    let file = std::fs::File::open(log)?;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if !line.contains(marker) {
            continue;
        }
        if let Ok(e) = serde_json::from_str::<Event>(&line)
            && e.impersonated_user.is_none()
        {
            return Ok(Some(e.user.username));
        }
    }
    Ok(None)
}
