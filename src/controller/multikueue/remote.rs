//! What the manager writes in a worker, and what it mirrors back, as Kueue's MultiKueue
//! adapters do: the Workload's copy (`cloneForCreate`), the job's copy bound to it as a
//! prebuilt Workload (`SyncJob`), the job's status mirrored to the manager's job, and both
//! copies removed (`RemoveRemoteObjects`: the job first, then the Workload).

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::workers::ORIGIN_LABEL;
use crate::api::Workload;
use crate::api::constants::{JOB_UID_LABEL, PREBUILT_WORKLOAD_LABEL};
use crate::controller::actuate::{Writer, is_not_found};
use crate::controller::watch::{Kind, job_api_resource};
use crate::integrations::{JobIntegration, JobObject};

/// Why a write in a worker, or a mirror back, failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{what} in worker {worker}: {source}")]
    Worker {
        what: String,
        worker: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: {source}")]
    Manager {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// A worker to write in: its name (for errors) and client.
pub struct Worker<'a> {
    pub name: &'a str,
    pub client: &'a Client,
}

impl Worker<'_> {
    fn failed(&self, what: impl Into<String>) -> impl FnOnce(kube::Error) -> RemoteError {
        let (what, worker) = (what.into(), self.name.to_string());
        move |source| RemoteError::Worker {
            what,
            worker,
            source,
        }
    }
}

/// Kueue's `cloneForCreate`: the manager's Workload with its name, namespace, labels
/// (without the job's uid, which means nothing there, and with this manager's origin),
/// annotations and spec.
pub fn workload_copy(local: &Workload, origin: &str) -> Value {
    let mut labels = local.metadata.labels.clone().unwrap_or_default();
    labels.remove(JOB_UID_LABEL);
    labels.insert(ORIGIN_LABEL.into(), origin.into());
    json!({
        "apiVersion": Kind::Workload.api_resource().api_version,
        "kind": "Workload",
        "metadata": {
            "name": local.metadata.name,
            "namespace": local.metadata.namespace,
            "labels": labels,
            "annotations": local.metadata.annotations,
        },
        "spec": local.spec,
    })
}

/// The worker's copy of job `local`: its name, namespace, labels (with the origin and
/// the prebuilt Workload's name) and annotations, and the kind's MultiKueue spec.
pub fn job_copy(
    kind: &dyn JobIntegration,
    local: &Value,
    workload: &str,
    origin: &str,
) -> Option<Value> {
    let spec = kind.multikueue_spec(local.get("spec")?)?;
    let meta = &local["metadata"];
    let mut labels = meta.get("labels").cloned().unwrap_or_else(|| json!({}));
    labels[ORIGIN_LABEL] = json!(origin);
    labels[PREBUILT_WORKLOAD_LABEL] = json!(workload);
    let gvk = kind.gvk();
    Some(json!({
        "apiVersion": gvk.api_version(),
        "kind": gvk.kind,
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": meta.get("annotations").cloned().unwrap_or(Value::Null),
        },
        "spec": spec,
    }))
}

/// Creates the Workload's copy in `worker` (one made already is fine); whether this call
/// made it.
pub async fn create_workload(
    w: &Worker<'_>,
    writer: &Writer,
    local: &Workload,
    origin: &str,
) -> Result<bool, RemoteError> {
    let ns = local.namespace().unwrap_or_default();
    let what = format!("create Workload {ns}/{}", local.name_any());
    let obj: DynamicObject = serde_json::from_value(workload_copy(local, origin))
        .map_err(|e| w.failed(what.clone())(kube::Error::SerdeError(e)))?;
    let api: Api<DynamicObject> =
        Api::namespaced_with(w.client.clone(), &ns, &Kind::Workload.api_resource());
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => {
            writer.wrote("remote Workload");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(w.failed(what)(e)),
    }
}

/// Kueue's `RemoveRemoteObjects`: the job this manager made in `worker` (its origin
/// label says so), then the Workload's copy, freed of its finalizers first.
pub async fn remove(
    w: &Worker<'_>,
    writer: &Writer,
    kind: Option<&dyn JobIntegration>,
    ns: &str,
    job: Option<&str>,
    workload: &str,
    origin: &str,
) -> Result<(), RemoteError> {
    if let (Some(kind), Some(job)) = (kind, job) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(w.client.clone(), ns, &job_api_resource(&kind.gvk()));
        let what = format!("delete {} {ns}/{job}", kind.kind());
        match api.get_opt(job).await {
            Ok(Some(j)) if j.labels().get(ORIGIN_LABEL).map(String::as_str) == Some(origin) => {
                match api.delete(job, &DeleteParams::background()).await {
                    Ok(_) => writer.wrote("remote job"),
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(w.failed(what)(e)),
                }
            }
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(w.failed(what)(e)),
        }
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(w.client.clone(), ns, &Kind::Workload.api_resource());
    let what = format!("delete Workload {ns}/{workload}");
    let unfinalized = json!({"metadata": {"finalizers": null}});
    match api
        .patch(
            workload,
            &PatchParams::default(),
            &Patch::Merge(&unfinalized),
        )
        .await
    {
        Ok(_) => writer.wrote("remote Workload"),
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(w.failed(what)(e)),
    }
    match api.delete(workload, &DeleteParams::default()).await {
        Ok(_) => writer.wrote("remote Workload"),
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(w.failed(what)(e)),
    }
    Ok(())
}

/// What a job sync did.
#[derive(Debug, PartialEq, Eq)]
pub enum Synced {
    /// The job's copy was created in the worker.
    Created,
    /// The copy's status is the manager job's now (or was already).
    Mirrored,
    /// Not mirrored yet: the manager's job is still suspended while the copy runs
    /// (Kueue's deferred sync); looked at again shortly.
    Deferred,
}

/// Kueue's `SyncJob`: creates the job's copy in `worker` bound to Workload `workload`, or
/// mirrors the copy's status to the manager's job.
pub async fn sync_job(
    w: &Worker<'_>,
    local_client: &Client,
    writer: &Writer,
    kind: &dyn JobIntegration,
    local: &Value,
    workload: &str,
    origin: &str,
) -> Result<Synced, RemoteError> {
    let ar: ApiResource = job_api_resource(&kind.gvk());
    let ns = local["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = local["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(w.client.clone(), ns, &ar);
    let what = format!("{} {ns}/{name}", kind.kind());
    let remote = api.get_opt(name).await.map_err(w.failed(what.clone()))?;
    let Some(remote) = remote else {
        let Some(copy) = job_copy(kind, local, workload, origin) else {
            return Ok(Synced::Deferred);
        };
        let obj: DynamicObject = serde_json::from_value(copy)
            .map_err(|e| w.failed(what.clone())(kube::Error::SerdeError(e)))?;
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => writer.wrote("remote job"),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(w.failed(format!("create {what}"))(e)),
        }
        return Ok(Synced::Created);
    };
    let remote = serde_json::to_value(&remote).unwrap_or_default();
    let status = remote.get("status").cloned().unwrap_or_else(|| json!({}));
    if local.get("status") == Some(&status) {
        return Ok(Synced::Mirrored);
    }
    let (local_view, remote_view) = (JobObject::from_value(local), JobObject::from_value(&remote));
    let (Ok(lv), Ok(rv)) = (local_view, remote_view) else {
        return Ok(Synced::Deferred);
    };
    // Kueue's `determineStatusUpdate`: a running copy's status does not fit a suspended
    // job (Kubernetes refuses it); it is mirrored once the manager's job is started.
    if kind.is_suspended(&lv) && !kind.is_suspended(&rv) && kind.finished(&rv).is_none() {
        return Ok(Synced::Deferred);
    }
    let local_api: Api<DynamicObject> = Api::namespaced_with(local_client.clone(), ns, &ar);
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/status", "value": status}]))
            .map_err(|e| RemoteError::Manager {
                what: format!("mirror {what}"),
                source: kube::Error::SerdeError(e),
            })?;
    local_api
        .patch_status(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(|source| RemoteError::Manager {
            what: format!("mirror the status of {what}"),
            source,
        })?;
    writer.wrote(&kind.kind());
    Ok(Synced::Mirrored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrations::batch_job::BatchJob;

    #[test]
    fn the_copies_carry_the_origin_and_the_prebuilt_workload() {
        let local: Workload = serde_json::from_value(json!({
            "metadata": {"name": "job-j-1", "namespace": "ns", "uid": "u",
                "labels": {"kueue.x-k8s.io/job-uid": "x", "team": "a"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                    "uid": "x", "controller": true}]},
            "spec": {"queueName": "lq", "podSets": []}
        }))
        .expect("a Workload");
        let copy = workload_copy(&local, "mgr");
        assert_eq!(
            copy["metadata"]["labels"],
            json!({"team": "a", ORIGIN_LABEL: "mgr"})
        );
        assert!(copy["metadata"].get("ownerReferences").is_none());
        assert!(copy["metadata"].get("uid").is_none());
        assert_eq!(copy["spec"]["queueName"], "lq");
        let job = json!({"metadata": {"name": "j", "namespace": "ns", "uid": "x",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "suspend": true,
                "template": {"spec": {"containers": []}}},
            "status": {"active": 1}});
        let copy = job_copy(&BatchJob, &job, "job-j-1", "mgr").expect("a batch Job copy");
        assert_eq!(
            copy["metadata"]["labels"],
            json!({"kueue.x-k8s.io/queue-name": "lq", ORIGIN_LABEL: "mgr",
                PREBUILT_WORKLOAD_LABEL: "job-j-1"})
        );
        assert!(copy["spec"].get("managedBy").is_none());
        assert!(copy.get("status").is_none() && copy["metadata"].get("uid").is_none());
    }
}
