//! Jobs that name a prebuilt Workload (`kueue.x-k8s.io/prebuilt-workload-name`), as a
//! MultiKueue manager creates them in a worker next to their Workload: the job becomes
//! the Workload's controlling owner (Kueue's `EnsurePrebuiltWorkloadOwnership`), so that
//! the Workload's changes reach the job and the Workload goes when the job does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::json;
use tracing::info;

use super::{Ctx, SyncError};
use crate::api::Workload;
use crate::controller::watch::Kind;

/// Whether the job with `uid` already owns `wl`.
pub fn owned_by(wl: &Workload, uid: &str) -> bool {
    wl.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid)
}

/// `wl`'s owner references with the job's added as the controller (an existing
/// controller reference is kept: Kubernetes allows one, and the job is then a plain owner).
pub fn with_owner(
    wl: &Workload,
    gvk: &GroupVersionKind,
    job: &str,
    uid: &str,
) -> Vec<OwnerReference> {
    let mut owners = wl.metadata.owner_references.clone().unwrap_or_default();
    let controlled = owners.iter().any(|o| o.controller == Some(true));
    owners.push(OwnerReference {
        api_version: gvk.api_version(),
        kind: gvk.kind.clone(),
        name: job.to_string(),
        uid: uid.to_string(),
        controller: Some(!controlled),
        block_owner_deletion: Some(true),
    });
    owners
}

/// Makes job `job` (with `uid`) an owner of its prebuilt Workload `wl`.
pub async fn adopt(
    ctx: &Ctx,
    wl: &Workload,
    gvk: &GroupVersionKind,
    job: &str,
    uid: &str,
) -> Result<(), SyncError> {
    let ns = wl.metadata.namespace.clone().unwrap_or_default();
    let name = wl.metadata.name.clone().unwrap_or_default();
    let patch = json!({
        "metadata": {
            "resourceVersion": wl.metadata.resource_version,
            "ownerReferences": with_owner(wl, gvk, job, uid),
        }
    });
    Api::<DynamicObject>::namespaced_with(
        ctx.writer.client.clone(),
        &ns,
        &Kind::Workload.api_resource(),
    )
    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
    .await
    .map_err(|source| SyncError::Api {
        name: job.to_string(),
        source,
    })?;
    ctx.writer.wrote("Workload");
    info!(job = %job, namespace = %ns, workload = %name, "prebuilt Workload adopted");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_becomes_the_controller_unless_there_is_one() {
        let gvk = GroupVersionKind::gvk("batch", "v1", "Job");
        let mut wl = Workload::default();
        assert!(!owned_by(&wl, "u1"));
        let owners = with_owner(&wl, &gvk, "j", "u1");
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[0].api_version, "batch/v1");
        wl.metadata.owner_references = Some(owners);
        assert!(owned_by(&wl, "u1"));
        let second = with_owner(&wl, &gvk, "k", "u2");
        assert_eq!(second[1].controller, Some(false));
    }
}
