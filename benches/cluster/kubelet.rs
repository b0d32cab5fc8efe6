//! A stand-in kubelet: every benchmark Pod is marked Succeeded after its class's runtime
//! (the control plane has no kubelet, so Pods would stay Pending for ever).

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::setup::{BENCH_LABEL, RUNTIME_LABEL};

/// Runs until aborted.
pub async fn run(client: Client, run: String) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut seen = HashSet::new();
    let mut stream = crate::applied(pods, &format!("{BENCH_LABEL}={run}"));
    while let Some(pod) = stream.next().await {
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some()
            || phase == "Succeeded"
            || phase == "Failed"
            || !seen.insert(uid)
        {
            continue;
        }
        let runtime_ms = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RUNTIME_LABEL))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0u64);
        let (Some(ns), Some(name)) = (pod.metadata.namespace.clone(), pod.metadata.name.clone())
        else {
            continue;
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(runtime_ms)).await;
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let status = json!({"status": {
                "phase": "Succeeded",
                "containerStatuses": [{"name": "c", "image": "registry.invalid/sleep", "imageID": "",
                    "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}}]
            }});
            // A Pod deleted meanwhile (its Job was preempted) is fine to miss.
            let _ = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await;
        });
    }
}
