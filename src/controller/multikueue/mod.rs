//! Kueue's MultiKueue on the manager: each MultiKueueCluster's connection, kept in its
//! `Active` condition with Kueue's reasons (`BadKubeConfig`, `InsecureKubeConfig`,
//! `ClientConnectionFailed`, or `Active`/"Connected"), from a kubeconfig in a Secret of
//! kuota's namespace (key `kubeconfig`) or a file; each MultiKueue AdmissionCheck's
//! `Active` condition; and the Workloads under such a check, dispatched to the workers.
//!
//! - `kubeconfig`: Kueue's rules for a worker's kubeconfig, pure;
//! - `workers`: the connected workers' clients and watches;
//! - `plan`: what one Workload needs next, pure;
//! - `remote`: the writes in a worker and the mirror back;
//! - `dispatch`: the Workload reconciler;
//! - `activity`: the checks' `Active` condition;
//! - this module: the connection reconciler, which reads the kubeconfig, connects, and
//!   writes the condition only when it changes, and the wiring of the rest.

pub mod activity;
pub mod dispatch;
pub mod kubeconfig;
pub mod plan;
pub mod remote;
pub mod workers;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::KubeConfigOptions;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tracing::{debug, info, warn};

use super::actuate::events::Recorder;
use super::actuate::{Writer, condition};
use super::compact::CompactObject;
use super::watch::{Kind, Stores, job_api_resource};
use crate::api::{
    AdmissionCheck, LocationType, MULTIKUEUE_CONTROLLER, MultiKueueCluster, MultiKueueConfig,
};
use crate::config::multikueue::MultiKueue;
use crate::integrations::JobIntegration;

/// Kueue's `Active` condition of a MultiKueueCluster.
const ACTIVE: &str = "Active";
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a connected worker is checked again (its watches notice a loss sooner).
const RECHECK: Duration = Duration::from_secs(60);
/// How often an unusable worker is tried again.
const RECHECK_DOWN: Duration = Duration::from_secs(10);

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

/// What the connection reconciler reads and writes with.
pub struct Ctx {
    client: Client,
    /// Where the kubeconfig Secrets are: kuota's own namespace (Kueue's `namespace`).
    namespace: String,
    writer: Arc<Writer>,
    workers: workers::Workers,
    wakers: workers::Wakers,
    origin: String,
    kinds: Vec<&'static dyn JobIntegration>,
    /// Told when a connection's state changed (the checks' `Active` follows).
    changed: UnboundedSender<()>,
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

/// What MultiKueue shares with the rest of the controller.
pub struct Shared {
    pub stores: Stores,
    pub writer: Arc<Writer>,
    pub recorder: Recorder,
    /// The enabled job kinds; those with a MultiKueue copy are dispatched.
    pub kinds: Vec<&'static dyn JobIntegration>,
    pub settings: MultiKueue,
    /// kuota's namespace, where the kubeconfig Secrets are.
    pub namespace: String,
    pub metrics: crate::telemetry::Metrics,
}

/// Runs MultiKueue until aborted: the connections, the checks' `Active` condition and the
/// dispatch of the Workloads `triggers` names (those with admission checks that changed).
pub async fn run(
    client: Client,
    shared: Shared,
    triggers: UnboundedReceiver<ObjectRef<CompactObject>>,
) {
    let clusters: Api<MultiKueueCluster> = Api::all(client.clone());
    let served = super::watch::served(&clusters).await;
    if !matches!(served, Ok(true)) {
        let why = served.err().map(|e| e.to_string()).unwrap_or_default();
        info!(error = %why, "MultiKueueClusters are not served: MultiKueue does not run");
        return;
    }
    let kinds: Vec<_> = shared
        .kinds
        .iter()
        .copied()
        .filter(|k| k.multikueue_spec(&serde_json::json!({})).is_some())
        .collect();
    let (to_workloads, from_workers) = unbounded();
    // Any change a check's `Active` condition may follow: checks, configs, connections.
    let (changed, changes) = unbounded::<()>();
    let activity_writer = shared.writer.clone();
    let (to_clusters, cluster_wakes) = unbounded();
    let wakers = workers::Wakers {
        workloads: to_workloads,
        clusters: to_clusters,
    };
    let workers = workers::Workers::default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &shared.namespace);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        namespace: shared.namespace.clone(),
        writer: shared.writer.clone(),
        workers: workers.clone(),
        wakers,
        origin: shared.settings.origin.clone(),
        kinds: kinds.clone(),
        changed: changed.clone(),
    });
    let controller = Controller::new(clusters, watcher::Config::default());
    let cluster_store = controller.store();
    let by_secret = cluster_store.clone();
    let connections = controller
        .reconcile_on(cluster_wakes)
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
        });
    let (checks, check_writer) = reflector::store::<AdmissionCheck>();
    let (configs, config_writer) = reflector::store::<MultiKueueConfig>();
    let dispatch_ctx = Arc::new(dispatch::Ctx {
        client: client.clone(),
        stores: shared.stores.clone(),
        writer: shared.writer,
        recorder: shared.recorder,
        checks: checks.clone(),
        configs: configs.clone(),
        workers,
        settings: shared.settings,
        kinds,
        rounds: Default::default(),
        metrics: shared.metrics,
    });
    let check_stream = super::watch::reflect_all(&client, check_writer);
    let config_stream = super::watch::reflect_all(&client, config_writer);
    let ar = Kind::Workload.api_resource();
    let by_checks = dispatch_ctx.clone();
    let workloads = Controller::for_stream_with(
        futures::stream::pending(),
        shared.stores.workloads.clone(),
        ar,
    )
    .reconcile_on(triggers)
    .reconcile_on(from_workers);
    let workloads = super::watch::on_checks_and_configs(
        workloads,
        MULTIKUEUE_CONTROLLER,
        check_stream,
        config_stream,
        changed.clone(),
        move || under_checks(&by_checks),
    )
    .run(dispatch::reconcile, dispatch::error_policy, dispatch_ctx)
    .for_each(|r| async move {
        if let Err(e) = r {
            debug!(error = %e, "multikueue dispatch");
        }
    });
    let checks_active = activity::run(
        activity::Ctx {
            writer: activity_writer,
            checks,
            configs,
            clusters: cluster_store,
        },
        changes,
    );
    info!("MultiKueue started");
    tokio::join!(connections, workloads, checks_active);
}

/// Every Workload with a state for a MultiKueue check.
fn under_checks(ctx: &dispatch::Ctx) -> Vec<ObjectRef<CompactObject>> {
    let checks = ctx.checks.state();
    let ours = |name: &str| {
        checks
            .iter()
            .any(|ac| ac.name_any() == name && ac.spec.controller_name == MULTIKUEUE_CONTROLLER)
    };
    super::watch::workloads_under(&ctx.stores.workloads, ours)
}

/// The Secret a cluster's kubeconfig is in, if it is one.
fn secret_of(c: &MultiKueueCluster) -> Option<String> {
    let kc = c.spec.cluster_source.kube_config.as_ref()?;
    (kc.location_type.unwrap_or(LocationType::Secret) == LocationType::Secret)
        .then(|| kc.location.clone())
}

async fn reconcile(c: Arc<MultiKueueCluster>, ctx: Arc<Ctx>) -> Result<Action, MultiKueueError> {
    let name = c.name_any();
    let (state, reached) = connect(&ctx, &c).await;
    match reached {
        Some((kubeconfig, client)) => {
            let (origin, wakers) = (&ctx.origin, &ctx.wakers);
            ctx.workers
                .up(&name, &kubeconfig, client, origin, &ctx.kinds, wakers);
        }
        None => ctx.workers.down(&name),
    }
    let again = if state.active { RECHECK } else { RECHECK_DOWN };
    if write_condition(&ctx, &c, &state).await? {
        let _ = ctx.changed.unbounded_send(());
    }
    Ok(Action::requeue(again))
}

/// Kueue's `loadClientConfig` and connection: the kubeconfig, its validation, and a read
/// of the worker's Workloads (what the manager needs to be allowed there).
async fn connect(ctx: &Ctx, c: &MultiKueueCluster) -> (Connection, Option<(String, Client)>) {
    let failed = |e: String| format!("load client config failed: {e}");
    let Some(kc) = &c.spec.cluster_source.kube_config else {
        let why = failed("MultiKueueClusterProfile feature gate is disabled".into());
        return (
            Connection::down("MultiKueueClusterProfileFeatureDisabled", why),
            None,
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
        Err(e) => return (Connection::down("BadKubeConfig", failed(e)), None),
    };
    let config = match kubeconfig::validate(&text) {
        Ok(c) => c,
        Err(e) => return (Connection::down("InsecureKubeConfig", failed(e)), None),
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, probe(config, &ctx.kinds)).await {
        Ok(Ok(client)) => {
            let up = Connection {
                active: true,
                reason: "Active",
                message: "Connected".into(),
            };
            (up, Some((text, client)))
        }
        Ok(Err(e)) => (Connection::down("ClientConnectionFailed", e), None),
        Err(_) => {
            let why = format!("no answer within {}s", CONNECT_TIMEOUT.as_secs());
            (Connection::down("ClientConnectionFailed", why), None)
        }
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

/// Connects with `config`, lists one Workload of the worker and one object of each kind
/// this manager dispatches: the client, once it works. A worker without a kind's CRD is not
/// connected, as Kueue cannot watch the kind there (its message: `no matches for kind`).
async fn probe(
    config: kube::config::Kubeconfig,
    kinds: &[&'static dyn JobIntegration],
) -> Result<Client, String> {
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let client = Client::try_from(config).map_err(|e| e.to_string())?;
    let one = ListParams::default().limit(1);
    let workloads: Api<DynamicObject> =
        Api::all_with(client.clone(), &Kind::Workload.api_resource());
    workloads
        .list_metadata(&one)
        .await
        .map_err(|e| e.to_string())?;
    for kind in kinds {
        let gvk = kind.gvk();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &job_api_resource(&gvk));
        match api.list_metadata(&one).await {
            Ok(_) => {}
            Err(e) if super::actuate::is_not_found(&e) => return Err(no_matches(&gvk)),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(client)
}

/// client-go's message for a kind the API server does not serve.
fn no_matches(gvk: &kube::core::GroupVersionKind) -> String {
    let version = gvk.api_version();
    format!("no matches for kind {:?} in version {version:?}", gvk.kind)
}

/// Writes the `Active` condition when its status, reason or message changed (Kueue's
/// `cmpConditionState`); whether it wrote.
async fn write_condition(
    ctx: &Ctx,
    c: &MultiKueueCluster,
    state: &Connection,
) -> Result<bool, MultiKueueError> {
    let current = c.status.as_ref().map(|s| s.conditions.as_slice());
    let wanted = condition::Wanted {
        type_: ACTIVE,
        active: state.active,
        reason: state.reason,
        message: &state.message,
    };
    let (change, kind) = (condition::Change::State, "MultiKueueCluster status");
    let current = current.unwrap_or_default();
    condition::write(&ctx.writer, c, current, &wanted, change, kind)
        .await
        .map_err(|source| MultiKueueError::Status {
            name: c.name_any(),
            source,
        })
}

fn error_policy(c: Arc<MultiKueueCluster>, e: &MultiKueueError, _: Arc<Ctx>) -> Action {
    warn!(cluster = %c.name_any(), error = %e, "MultiKueueCluster status; retrying");
    Action::requeue(Duration::from_secs(2))
}
