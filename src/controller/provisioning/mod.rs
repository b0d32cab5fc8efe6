//! Kueue's ProvisioningRequest admission check (`kueue.x-k8s.io/provisioning-request`): for
//! each Workload whose quota is reserved under such a check, a cluster-autoscaler
//! `ProvisioningRequest` with its PodTemplates; the request's conditions become the check's
//! state, which the engine then acts on like any check's (Ready admits, Retry requeues,
//! Rejected deactivates).
//!
//! - `request`: the ProvisioningRequest type and Kueue's names for requests and templates;
//! - `plan`: what one Workload needs, decided without I/O;
//! - this module: the watches, the reconcilers (one per Workload, one for the checks'
//!   `Active` condition) and their writes.
//!
//! It runs only where the ProvisioningRequest CRD is served, as Kueue's controller does;
//! elsewhere its checks are never made Active, and their ClusterQueues stay inactive.

pub mod plan;
pub mod request;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use k8s_openapi::api::core::v1::{ObjectReference, PodTemplate, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use self::plan::{Check, NewRequest, Plan};
use self::request::{MANAGED_LABEL, ProvisioningRequest};
use super::actuate::events::Recorder;
use super::actuate::{Writer, condition, is_not_found};
use super::compact::CompactObject;
use super::translate::{TranslateError, decode};
use super::watch::Kind;
use crate::api::constants::API_VERSION_V1BETA2;
use crate::api::{
    AdmissionCheck, AdmissionCheckParametersReference, PROVISIONING_REQUEST_CONTROLLER, PodSet,
    ProvisioningRequestConfig, ResourceFlavor, Workload,
};

/// Why one reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum ProvisioningError {
    #[error(transparent)]
    Translate(#[from] TranslateError),
    #[error("Workload {namespace}/{name}: {source}")]
    Plan {
        namespace: String,
        name: String,
        #[source]
        source: plan::PlanError,
    },
    #[error("a JSON patch: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ProvisioningError {
    let what = what.into();
    move |source| ProvisioningError::Api { what, source }
}

/// What the reconcilers read and write with.
pub struct Ctx {
    client: Client,
    writer: Arc<Writer>,
    recorder: Recorder,
    workloads: Store<CompactObject>,
    flavors: Store<DynamicObject>,
    checks: Store<AdmissionCheck>,
    configs: Store<ProvisioningRequestConfig>,
    requests: Store<ProvisioningRequest>,
}

/// Whether the API server serves ProvisioningRequests (the CRD is installed).
pub async fn served(client: &Client) -> bool {
    let api: Api<ProvisioningRequest> = Api::all(client.clone());
    super::watch::served(&api).await.unwrap_or_else(|e| {
        warn!(error = %e, "could not check whether ProvisioningRequests are served");
        true
    })
}

/// The stores a run shares with the rest of the controller.
pub struct Shared {
    pub workloads: Store<CompactObject>,
    pub flavors: Store<DynamicObject>,
    pub writer: Arc<Writer>,
    pub recorder: Recorder,
}

/// Runs the check's controller until aborted. `triggers` names Workloads that have
/// admission checks and changed.
pub async fn run(
    client: Client,
    shared: Shared,
    triggers: UnboundedReceiver<ObjectRef<CompactObject>>,
) {
    if !served(&client).await {
        info!(
            "ProvisioningRequests are not served (the autoscaler's CRD is not installed): \
             AdmissionChecks of kueue.x-k8s.io/provisioning-request stay inactive"
        );
        return;
    }
    let (checks, check_writer) = reflector::store::<AdmissionCheck>();
    let (configs, config_writer) = reflector::store::<ProvisioningRequestConfig>();
    let (requests, request_writer) = reflector::store::<ProvisioningRequest>();
    let check_stream = super::watch::reflect_all(&client, check_writer);
    let config_stream = super::watch::reflect_all(&client, config_writer);
    let request_stream = watcher::watcher(
        Api::<ProvisioningRequest>::all(client.clone()),
        watcher::Config::default().labels(MANAGED_LABEL),
    )
    .default_backoff()
    .reflect(request_writer)
    .touched_objects();
    let ctx = Arc::new(Ctx {
        client,
        writer: shared.writer,
        recorder: shared.recorder,
        workloads: shared.workloads,
        flavors: shared.flavors,
        checks,
        configs,
        requests,
    });
    info!("ProvisioningRequest admission check controller started");
    let ar = Kind::Workload.api_resource();
    let owner = ar.clone();
    let by_checks = ctx.clone();
    // A check or config changed: every Workload of this controller's checks is looked at
    // again, and so is every check's `Active` condition.
    let (checks_changed, rx) = futures::channel::mpsc::unbounded::<()>();
    let workloads =
        Controller::for_stream_with(futures::stream::pending(), ctx.workloads.clone(), ar)
            .reconcile_on(triggers)
            .watches_stream_with(
                request_stream,
                move |r: ProvisioningRequest| owner_workload(&r, &owner),
                (),
            );
    let workloads = super::watch::on_checks_and_configs(
        workloads,
        PROVISIONING_REQUEST_CONTROLLER,
        check_stream,
        config_stream,
        checks_changed,
        move || with_checks(&by_checks),
    )
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|r| async move {
        if let Err(e) = r {
            debug!(error = %e, "provisioning reconcile");
        }
    });
    tokio::join!(workloads, activity(ctx, rx));
}

/// The Workload owning request `r`.
fn owner_workload(
    r: &ProvisioningRequest,
    ar: &kube::api::ApiResource,
) -> Option<ObjectRef<CompactObject>> {
    let owner = r
        .owner_references()
        .iter()
        .find(|o| o.kind == "Workload" && o.api_version.starts_with("kueue.x-k8s.io/"))?;
    Some(ObjectRef::new_with(&owner.name, ar.clone()).within(r.namespace().as_deref()?))
}

/// Every Workload with a state for one of this controller's checks.
fn with_checks(ctx: &Ctx) -> Vec<ObjectRef<CompactObject>> {
    let ours = our_checks(ctx);
    super::watch::workloads_under(&ctx.workloads, |c| ours.contains_key(c))
}

/// This controller's checks by name, each with its config's spec when it can be read.
fn our_checks(ctx: &Ctx) -> BTreeMap<String, Result<ProvisioningRequestConfig, String>> {
    ctx.checks
        .state()
        .iter()
        .filter(|ac| ac.spec.controller_name == PROVISIONING_REQUEST_CONTROLLER)
        .map(|ac| (ac.name_any(), config_of(ctx, ac.spec.parameters.as_ref())))
        .collect()
}

/// Kueue's `ConfigFromRef`: the config a check's parameters name, or why there is none
/// (Kueue's messages).
fn config_of(
    ctx: &Ctx,
    reference: Option<&AdmissionCheckParametersReference>,
) -> Result<ProvisioningRequestConfig, String> {
    let bad = "bad parameters reference";
    let r = reference.ok_or_else(|| "missing parameters reference".to_string())?;
    if r.name.is_empty() {
        return Err(format!("empty name: {bad}"));
    }
    if r.api_group != "kueue.x-k8s.io" {
        return Err(format!(
            "wrong group {:?}, expecting \"kueue.x-k8s.io\": {bad}",
            r.api_group
        ));
    }
    if r.kind != "ProvisioningRequestConfig" {
        return Err(format!(
            "wrong kind {:?}, expecting \"ProvisioningRequestConfig\": {bad}",
            r.kind
        ));
    }
    ctx.configs
        .get(&ObjectRef::new(&r.name))
        .map(|c| (*c).clone())
        .ok_or_else(|| {
            format!(
                "provisioningrequestconfigs.kueue.x-k8s.io {:?} not found",
                r.name
            )
        })
}

/// Keeps each check's `Active` condition as Kueue's `acReconciler` does: True while its
/// config can be read, False with reason `BadParametersRef` and the reason otherwise.
async fn activity(ctx: Arc<Ctx>, mut changed: futures::channel::mpsc::UnboundedReceiver<()>) {
    loop {
        // Batches a burst of changes into one pass.
        tokio::time::sleep(Duration::from_millis(100)).await;
        while changed.try_recv().is_ok() {}
        for ac in ctx.checks.state() {
            if ac.spec.controller_name != PROVISIONING_REQUEST_CONTROLLER {
                continue;
            }
            if let Err(e) = set_active(&ctx, &ac).await {
                warn!(admission_check = %ac.name_any(), error = %e, "setting Active failed");
            }
        }
        if changed.next().await.is_none() {
            return;
        }
    }
}

async fn set_active(ctx: &Ctx, ac: &AdmissionCheck) -> Result<(), kube::Error> {
    let (active, reason, message) = match config_of(ctx, ac.spec.parameters.as_ref()) {
        Ok(_) => (true, "Active", "The admission check is active".to_string()),
        Err(why) => (false, "BadParametersRef", why),
    };
    // Kueue writes only when the status flips.
    let wanted = (active, reason, message.as_str());
    condition::write_check_active(&ctx.writer, ac, wanted, condition::Change::Status).await?;
    Ok(())
}

async fn reconcile(obj: Arc<CompactObject>, ctx: Arc<Ctx>) -> Result<Action, ProvisioningError> {
    let wl: Workload = decode(Kind::Workload, &*obj)?;
    let ours = our_checks(&ctx);
    let states = wl
        .status
        .as_ref()
        .map(|s| s.admission_checks.as_slice())
        .unwrap_or_default();
    let configs: Vec<(String, Option<ProvisioningRequestConfig>)> = states
        .iter()
        .filter_map(|s| Some((s.name.clone(), ours.get(&s.name)?.clone().ok())))
        .collect();
    let owned = owned_requests(&ctx, &wl);
    if configs.is_empty() && owned.is_empty() {
        return Ok(Action::await_change());
    }
    let checks: Vec<Check<'_>> = configs
        .iter()
        .map(|(name, config)| Check {
            name,
            config: config.as_ref().map(|c| &c.spec),
        })
        .collect();
    let template_of = |ps: &PodSet| flavored_template(&ctx, &wl, ps);
    let now = (ctx.writer.clock)();
    let p = plan::plan(&wl, &checks, &owned, &template_of, &now).map_err(|source| {
        ProvisioningError::Plan {
            namespace: wl.namespace().unwrap_or_default(),
            name: wl.name_any(),
            source,
        }
    })?;
    carry_out(&ctx, &wl, p).await?;
    Ok(Action::await_change())
}

/// The requests in the store that `wl` (this very object, by uid) owns.
fn owned_requests(ctx: &Ctx, wl: &Workload) -> Vec<ProvisioningRequest> {
    let uid = wl.metadata.uid.as_deref();
    ctx.requests
        .state()
        .iter()
        .filter(|r| r.namespace() == wl.namespace())
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| Some(o.uid.as_str()) == uid)
        })
        .map(|r| (**r).clone())
        .collect()
}

/// Pod set `ps`'s template with its assigned flavors' node labels and tolerations, as
/// Kueue's `podset.FromAssignment` merges them.
fn flavored_template(ctx: &Ctx, wl: &Workload, ps: &PodSet) -> PodTemplateSpec {
    let mut template = serde_json::to_value(&ps.template).unwrap_or(Value::Null);
    let flavors: Vec<String> = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .and_then(|a| a.pod_set_assignments.iter().find(|a| a.name == ps.name))
        .map(|a| a.flavors.values().cloned().collect())
        .unwrap_or_default();
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        for flavor in flavors {
            let r = ObjectRef::new_with(&flavor, Kind::ResourceFlavor.api_resource());
            let Some(rf) = ctx.flavors.get(&r) else {
                continue;
            };
            if let Ok(rf) = decode::<ResourceFlavor, _>(Kind::ResourceFlavor, &*rf) {
                super::actuate::job::add_flavor(spec, &rf);
            }
        }
    }
    serde_json::from_value(template).unwrap_or_else(|_| ps.template.clone())
}

/// Carries out a plan: the check states first (as Kueue does), then deletes, then each new
/// request after its templates, whose ownership passes to the request once it exists.
async fn carry_out(ctx: &Ctx, wl: &Workload, p: Plan) -> Result<(), ProvisioningError> {
    let ns = wl.namespace().unwrap_or_default();
    let name = wl.name_any();
    if let Some(states) = &p.states {
        write_states(ctx, wl, states).await?;
        for message in &p.events {
            ctx.recorder
                .workload_normal(reference(wl), "AdmissionCheckUpdated", message);
        }
    }
    let requests: Api<ProvisioningRequest> = Api::namespaced(ctx.client.clone(), &ns);
    for r in &p.delete {
        match requests.delete(r, &DeleteParams::background()).await {
            Ok(_) => ctx.writer.wrote("ProvisioningRequest"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(api(format!("delete ProvisioningRequest {ns}/{r}"))(e)),
        }
    }
    for new in p.create {
        if let Err(e) = create(ctx, wl, &new).await {
            ctx.recorder.workload_warning(
                reference(wl),
                "FailedCreate",
                &format!("Error creating ProvisioningRequest {:?}: {e}", new.name),
            );
            return Err(e);
        }
        ctx.recorder.workload_normal(
            reference(wl),
            "ProvisioningRequestCreated",
            &format!("Created ProvisioningRequest: {:?}", new.name),
        );
        debug!(workload = %format!("{ns}/{name}"), request = %new.name, "ProvisioningRequest created");
    }
    Ok(())
}

fn reference(wl: &Workload) -> ObjectReference {
    let key = crate::engine::WorkloadKey::new(wl.namespace().unwrap_or_default(), wl.name_any());
    super::actuate::events::workload_ref(&key, Some(&wl.metadata))
}

fn owner(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Writes `status.admissionChecks`, on the condition that nobody changed them since `wl`
/// was read (a JSON patch `test`): the engine writes them too.
async fn write_states(
    ctx: &Ctx,
    wl: &Workload,
    states: &[crate::api::AdmissionCheckState],
) -> Result<(), ProvisioningError> {
    let ns = wl.namespace().unwrap_or_default();
    let name = wl.name_any();
    let current = wl.status.as_ref().map(|s| s.admission_checks.as_slice());
    let before = serde_json::to_value(current.unwrap_or_default())?;
    let after = serde_json::to_value(states)?;
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/uid", "value": wl.metadata.uid},
        {"op": "test", "path": "/status/admissionChecks", "value": before},
        {"op": "replace", "path": "/status/admissionChecks", "value": after},
    ]))?;
    Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ns, &Kind::Workload.api_resource())
        .patch_status(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(api(format!("Workload {ns}/{name} status")))?;
    ctx.writer.wrote("Workload status");
    Ok(())
}

/// Creates one request: its templates (owned by the Workload until the request exists, so
/// that none is left behind if the request cannot be made), the request, then the
/// templates' ownership moved to it (Kueue's order).
async fn create(ctx: &Ctx, wl: &Workload, new: &NewRequest) -> Result<(), ProvisioningError> {
    let ns = wl.namespace().unwrap_or_default();
    let wl_uid = wl.metadata.uid.clone().unwrap_or_default();
    let wl_owner = owner("Workload", API_VERSION_V1BETA2, &wl.name_any(), &wl_uid);
    let templates: Api<PodTemplate> = Api::namespaced(ctx.client.clone(), &ns);
    let managed = BTreeMap::from([(MANAGED_LABEL.to_string(), "true".to_string())]);
    for (name, template) in &new.templates {
        let pt = PodTemplate {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.clone()),
                labels: Some(managed.clone()),
                owner_references: Some(vec![wl_owner.clone()]),
                ..Default::default()
            },
            template: Some(template.clone()),
        };
        match templates.create(&PostParams::default(), &pt).await {
            Ok(_) => ctx.writer.wrote("PodTemplate"),
            Err(kube::Error::Api(s)) if s.code == 409 => {} // made by an earlier attempt
            Err(e) => return Err(api(format!("Error creating PodTemplate {name:?}"))(e)),
        }
    }
    let mut request = ProvisioningRequest::new(&new.name, new.spec.clone());
    request.metadata.namespace = Some(ns.clone());
    request.metadata.labels = Some(managed);
    request.metadata.owner_references = Some(vec![wl_owner]);
    let requests: Api<ProvisioningRequest> = Api::namespaced(ctx.client.clone(), &ns);
    let made = match requests.create(&PostParams::default(), &request).await {
        Ok(made) => {
            ctx.writer.wrote("ProvisioningRequest");
            made
        }
        Err(kube::Error::Api(s)) if s.code == 409 => requests
            .get(&new.name)
            .await
            .map_err(api(format!("ProvisioningRequest {ns}/{}", new.name)))?,
        Err(e) => {
            return Err(api(format!(
                "Error creating ProvisioningRequest {:?}",
                new.name
            ))(e));
        }
    };
    let request_owner = owner(
        "ProvisioningRequest",
        "autoscaling.x-k8s.io/v1",
        &new.name,
        made.metadata.uid.as_deref().unwrap_or_default(),
    );
    for (name, _) in &new.templates {
        let patch = json!({"metadata": {"ownerReferences": [request_owner]}});
        templates
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api(format!("PodTemplate {ns}/{name}")))?;
        ctx.writer.wrote("PodTemplate");
    }
    Ok(())
}

fn error_policy(wl: Arc<CompactObject>, e: &ProvisioningError, _: Arc<Ctx>) -> Action {
    warn!(workload = %wl.metadata.name.clone().unwrap_or_default(), error = %e, "provisioning check; retrying");
    Action::requeue(Duration::from_secs(2))
}
