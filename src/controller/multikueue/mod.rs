//! Kueue's MultiKueue, as far as kuota runs it: each MultiKueueCluster's connection, kept
//! in its `Active` condition with Kueue's reasons (`BadKubeConfig`, `InsecureKubeConfig`,
//! `ClientConnectionFailed`, or `Active`/"Connected"), from a kubeconfig in a Secret of
//! kuota's namespace (key `kubeconfig`) or a file. Dispatching Workloads to the workers is
//! not implemented: a MultiKueue AdmissionCheck is never made Active, so its ClusterQueues
//! stay inactive.
//!
//! - `kubeconfig`: Kueue's rules for a worker's kubeconfig, pure;
//! - this module: the reconciler, which reads the kubeconfig, connects, and writes the
//!   condition only when it changes.

pub mod kubeconfig;
pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::KubeConfigOptions;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tracing::{debug, info, warn};

use super::actuate::Writer;
use super::conditions::set_condition;
use super::watch::Kind;
use crate::api::{LocationType, MultiKueueCluster};

/// Kueue's `Active` condition of a MultiKueueCluster.
const ACTIVE: &str = "Active";
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a connected worker is checked again (Kueue keeps a watch open instead).
const RECHECK: Duration = Duration::from_secs(60);

/// Why one reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum MultiKueueError {
    #[error("MultiKueueCluster {name} status: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// What the reconciler reads and writes with.
pub struct Ctx {
    client: Client,
    /// Where the kubeconfig Secrets are: kuota's own namespace (Kueue's `namespace`).
    namespace: String,
    writer: Arc<Writer>,
}

/// A worker connection's state: whether it is up, Kueue's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    pub active: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Connection {
    fn down(reason: &'static str, message: String) -> Self {
        Self {
            active: false,
            reason,
            message,
        }
    }
}

/// Runs the MultiKueueCluster reconciler until aborted.
pub async fn run(client: Client, namespace: String, writer: Arc<Writer>) {
    let clusters: Api<MultiKueueCluster> = Api::all(client.clone());
    let served = super::watch::served(&clusters).await;
    if !matches!(served, Ok(true)) {
        let why = served.err().map(|e| e.to_string()).unwrap_or_default();
        info!(error = %why, "MultiKueueClusters are not served: their connections are not kept");
        return;
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let ctx = Arc::new(Ctx {
        client,
        namespace,
        writer,
    });
    let controller = Controller::new(clusters, watcher::Config::default());
    let by_secret = controller.store();
    controller
        .watches(secrets, watcher::Config::default(), move |s: Secret| {
            // A Secret changed: the clusters whose kubeconfig it holds.
            let name = s.name_any();
            by_secret
                .state()
                .iter()
                .filter(|c| secret_of(c).as_deref() == Some(name.as_str()))
                .map(|c| ObjectRef::from_obj(&**c))
                .collect::<Vec<_>>()
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                debug!(error = %e, "multikueue cluster reconcile");
            }
        })
        .await;
}

/// The Secret a cluster's kubeconfig is in, if it is one.
fn secret_of(c: &MultiKueueCluster) -> Option<String> {
    let kc = c.spec.cluster_source.kube_config.as_ref()?;
    (kc.location_type.unwrap_or(LocationType::Secret) == LocationType::Secret)
        .then(|| kc.location.clone())
}

async fn reconcile(c: Arc<MultiKueueCluster>, ctx: Arc<Ctx>) -> Result<Action, MultiKueueError> {
    let state = connect(&ctx, &c).await;
    let again = if state.active { RECHECK } else { RECHECK / 2 };
    write_condition(&ctx, &c, &state).await?;
    Ok(Action::requeue(again))
}

/// Kueue's `loadClientConfig` and connection: the kubeconfig, its validation, and a read
/// of the worker's Workloads (what the manager needs to be allowed there).
async fn connect(ctx: &Ctx, c: &MultiKueueCluster) -> Connection {
    let failed = |e: String| format!("load client config failed: {e}");
    let Some(kc) = &c.spec.cluster_source.kube_config else {
        return Connection::down(
            "MultiKueueClusterProfileFeatureDisabled",
            failed("MultiKueueClusterProfile feature gate is disabled".into()),
        );
    };
    let text = match kc.location_type.unwrap_or(LocationType::Secret) {
        LocationType::Secret => read_secret(ctx, &kc.location).await,
        LocationType::Path => {
            std::fs::read_to_string(&kc.location).map_err(|e| format!("open {}: {e}", kc.location))
        }
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => return Connection::down("BadKubeConfig", failed(e)),
    };
    let config = match kubeconfig::validate(&text) {
        Ok(c) => c,
        Err(e) => return Connection::down("InsecureKubeConfig", failed(e)),
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, probe(config)).await {
        Ok(Ok(())) => Connection {
            active: true,
            reason: "Active",
            message: "Connected".into(),
        },
        Ok(Err(e)) => Connection::down("ClientConnectionFailed", e),
        Err(_) => Connection::down(
            "ClientConnectionFailed",
            format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
        ),
    }
}

/// The kubeconfig in Secret `name` of kuota's namespace, key `kubeconfig`.
async fn read_secret(ctx: &Ctx, name: &str) -> Result<String, String> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let secret = secrets.get(name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => format!("secrets \"{name}\" not found"),
        e => e.to_string(),
    })?;
    let data = secret
        .data
        .and_then(|mut d| d.remove("kubeconfig"))
        .ok_or_else(|| format!("key \"kubeconfig\" not found in secret \"{name}\""))?;
    String::from_utf8(data.0).map_err(|_| format!("secret \"{name}\": kubeconfig is not UTF-8"))
}

/// Connects with `config` and lists one Workload of the worker.
async fn probe(config: kube::config::Kubeconfig) -> Result<(), String> {
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let client = Client::try_from(config).map_err(|e| e.to_string())?;
    let workloads: Api<DynamicObject> = Api::all_with(client, &Kind::Workload.api_resource());
    workloads
        .list_metadata(&ListParams::default().limit(1))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Writes the `Active` condition when its status, reason or message changed (Kueue's
/// `cmpConditionState`).
async fn write_condition(
    ctx: &Ctx,
    c: &MultiKueueCluster,
    state: &Connection,
) -> Result<(), MultiKueueError> {
    let status = if state.active { "True" } else { "False" };
    let mut conditions = c.status.clone().unwrap_or_default().conditions;
    if conditions.iter().any(|x| {
        x.type_ == ACTIVE
            && x.status == status
            && x.reason == state.reason
            && x.message == state.message
    }) {
        return Ok(());
    }
    let now = (ctx.writer.clock)();
    let (reason, message) = (state.reason, state.message.as_str());
    set_condition(
        &mut conditions,
        ACTIVE,
        state.active,
        reason,
        message,
        c.metadata.generation,
        &now,
    );
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": c.resource_version()},
        "status": {"conditions": conditions}
    });
    let name = c.name_any();
    Api::<MultiKueueCluster>::all(ctx.client.clone())
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|source| MultiKueueError::Status {
            name: name.clone(),
            source,
        })?;
    ctx.writer.wrote("MultiKueueCluster status");
    Ok(())
}

fn error_policy(c: Arc<MultiKueueCluster>, e: &MultiKueueError, _: Arc<Ctx>) -> Action {
    warn!(cluster = %c.name_any(), error = %e, "MultiKueueCluster status; retrying");
    Action::requeue(Duration::from_secs(2))
}
