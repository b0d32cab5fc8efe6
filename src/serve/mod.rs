//! `kuota serve`, the composition root: its flags, and the wiring of the webhook server,
//! the cluster index and its watches, the admission policies, CA injection, the metrics
//! registry and the leader-elected queue controller. Nothing below imports it.

pub mod listeners;
pub mod local;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tracing::{error, info, warn};

use crate::duration::parse_flag;
use crate::webhook::health::{WatchHealth, index_readiness};
use crate::webhook::server::{
    Readiness, ServerConfig, ServerError, WebhookServer, shutdown_signal,
};
use crate::webhook::{ClusterIndex, IndexConfig, WebhookConfig, WebhookMetrics, WebhookState};

/// Why `kuota serve` could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("--config: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("policies: {0}")]
    Policies(#[from] crate::policy::PolicyLoadError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Listen(#[from] listeners::ListenError),
    #[error("--local-webhooks: {0}")]
    Local(#[from] local::LocalError),
    /// The process stopped because it must not go on (an engine panic).
    #[error("{0}")]
    Fatal(String),
}

/// Arguments of `kuota serve`: the server settings plus what the handlers need.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub listeners: listeners::ListenerFlags,
    /// Directory of admission policy files (reloaded when it changes).
    #[arg(long, value_name = "DIR")]
    pub policies: Option<PathBuf>,
    /// How often to re-read --policies.
    #[arg(long, default_value = "10s", value_parser = parse_flag)]
    pub policy_reload_interval: Duration,
    /// Report ready without a synced cluster index (local runs and load tests,
    /// where no watch feeds the index).
    #[arg(long)]
    pub ready_without_index: bool,
    /// Serve the webhook only: do not run the queue controller (which turns jobs into
    /// Workloads, admits them and writes their status).
    #[arg(long)]
    pub no_controller: bool,
    /// Write <cert-dir>/ca.crt as the caBundle of kuota's webhook configurations and CRD
    /// conversion webhook, at start and every minute (docs/install.md).
    #[arg(long)]
    pub inject_ca_bundle: bool,
    /// Where Kueue's visibility API (an aggregated API of the API server) is served, with the
    /// webhook's certificate (docs/visibility.md), e.g. `0.0.0.0:8082` (Kueue's port, as the
    /// install sets it); `off` serves none [file: visibilityServer.bindAddress/bindPort;
    /// default off]. Only a replica that runs the queue controller has queues to show.
    #[arg(long, value_parser = parse_visibility_listen)]
    pub visibility_listen: Option<VisibilityListen>,
    /// Run outside the cluster: register kuota's webhooks and its CRDs' conversion at
    /// https://HOST:<--listen port> (default host 127.0.0.1) with the CA in --cert-dir
    /// (made there if absent), using your kubeconfig, and remove them again on exit
    /// (docs/install.md, "Running kuota outside the cluster").
    #[arg(
        long,
        value_name = "HOST",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = local::DEFAULT_HOST,
        conflicts_with = "inject_ca_bundle"
    )]
    pub local_webhooks: Option<String>,
    /// Kueue's `Configuration` and kuota's `KuotaConfiguration` (see docs/configuration.md).
    #[command(flatten)]
    pub config: crate::config::ConfigArgs,
}

/// Where the visibility API listens, if anywhere (`--visibility-listen`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VisibilityListen(pub Option<std::net::SocketAddr>);

/// `--visibility-listen`: an address, or `off`.
fn parse_visibility_listen(s: &str) -> Result<VisibilityListen, String> {
    if s == "off" {
        return Ok(VisibilityListen(None));
    }
    s.parse()
        .map(|a| VisibilityListen(Some(a)))
        .map_err(|e| format!("{s:?} is neither an address (host:port) nor off: {e}"))
}

/// `kuota serve`: logs to stderr (RUST_LOG, default info), runs the
/// webhook until SIGTERM/ctrl-c, and maps errors to the exit code.
pub fn serve_cli(args: ServeArgs) -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Err only if a subscriber is already installed, which is fine.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in pod logs.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    crate::memory::limit_arenas();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)
        .and_then(|rt| {
            rt.block_on(async {
                crate::memory::spawn_trimmer();
                serve(args).await
            })
        });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            error!(error = %e, "kuota serve failed");
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Builds the handlers' state and router and serves them until a signal.
pub async fn serve(mut args: ServeArgs) -> Result<(), ServeError> {
    use crate::policy::PolicyHandle;

    // With --local-webhooks, ctrl-c is caught from the start: one that came while the
    // registration was being written would otherwise end the process with it half done.
    let early_signal = args
        .local_webhooks
        .is_some()
        .then(|| tokio::spawn(shutdown_signal()));

    let policies = match &args.policies {
        Some(dir) => PolicyHandle::load_dir(dir)?,
        None => PolicyHandle::empty(),
    };
    let policy_watch = args
        .policies
        .as_ref()
        .map(|dir| policies.watch(dir.clone(), args.policy_reload_interval));
    let settings = crate::config::Settings::load(&args.config.files)?;
    args.server = listeners::resolve(&args.listeners, &settings.listeners, args.server).await?;
    settings.report();
    let index = Arc::new(ClusterIndex::new(IndexConfig {
        managed_jobs_namespace_selector: Some(settings.managed_jobs_namespace_selector.clone()),
    }));
    let health = Arc::new(WatchHealth::default());
    // In a cluster (service account) or with a kubeconfig, watches feed the index; without
    // either the index stays cold and /readyz says so, unless --ready-without-index.
    let client = match crate::config::client::client(settings.client).await {
        Ok(client) => Some(client),
        Err(e) => {
            warn!(error = %e, "no Kubernetes client: the cluster index stays empty and /readyz fails");
            None
        }
    };
    // Refused before anything starts: beside an installed kuota, or without its CRDs.
    let local_ca = match &args.local_webhooks {
        Some(host) => Some(local::prepare(client.as_ref(), &args.server.cert_dir, host).await?),
        None => None,
    };
    let feed = match &client {
        Some(client) => start_feed(client, &args, &index, &health),
        None => Vec::new(),
    };
    // One registry for the webhook and the controller, served on the health listener.
    let metrics = crate::telemetry::Metrics::default();
    // An engine panic stops the whole process (see `controller::Fatal`).
    let fatal = crate::controller::Fatal::default();
    // The queue controller schedules only on the replica holding the Lease, a fresh one
    // on every term (rebuilt from the API server); every replica serves the webhook.
    let queries = crate::controller::pending::PendingQueries::default();
    let scheduling = match (&client, args.no_controller) {
        (Some(client), false) => {
            Some(start_scheduling(client, &settings, &metrics, &fatal, &queries).await)
        }
        _ => None,
    };
    // Kueue's visibility API, where this replica may run the engine whose queues it shows.
    // Not fatal: without it, scheduling goes on and the APIService reports unavailable.
    let visibility_listen =
        listeners::visibility(args.visibility_listen.map(|v| v.0), &settings.listeners).await?;
    let visibility = match (&client, args.no_controller, visibility_listen) {
        (Some(client), false, Some(listen)) => {
            let cert_dir = &args.server.cert_dir;
            crate::visibility::VisibilityServer::start(
                client.clone(),
                queries.clone(),
                listen,
                cert_dir,
            )
            .await
            .inspect_err(|e| error!(error = %e, "Kueue's visibility API is not served"))
            .ok()
        }
        _ => None,
    };
    let server = bind_webhook(&args, index.clone(), policies, &settings, health, metrics).await?;
    info!(health = %server.health_addr(), "probes on /healthz, /readyz, /metrics");
    // Registered once the listener is bound (its port is in the URLs); taken back by
    // whichever comes first of the stop signal and the server's end.
    let registered = match (&args.local_webhooks, local_ca) {
        (Some(host), Some(ca)) => {
            let target = local::Target::new(host, server.local_addr().port(), ca);
            local::hold(client.as_ref(), &target).await?
        }
        _ => local::Held::default(),
    };
    // On the signal (or a fatal controller error), scheduling stops and the Lease is
    // released while the webhook is still draining, so a successor takes over at once
    // instead of after the drain. The sender is also dropped if the server fails, which
    // stops scheduling just the same.
    let (signalled, on_signal) = tokio::sync::watch::channel(false);
    let stop_scheduling = scheduling.map(|s| s.stop_on(on_signal));
    let stop = {
        let (fatal, registered) = (fatal.clone(), registered.clone());
        async move {
            tokio::select! {
                _ = signal(early_signal) => {}
                why = fatal.wait() => error!(%why, "stopping kuota: it must not serve with a dead controller"),
            }
            // Unregistered while still serving, so no request meets a closed port.
            registered.undo().await;
            let _ = signalled.send(true);
        }
    };
    let result = server.run(stop).await;
    registered.undo().await;
    if let Some(v) = visibility {
        v.stop();
    }
    if let Some(task) = policy_watch {
        task.abort();
    }
    for task in feed {
        task.abort();
    }
    if let Some(task) = stop_scheduling
        && let Err(e) = task.await
    {
        warn!(error = %e, "stopping the scheduler failed");
    }
    match fatal.reason() {
        Some(why) => Err(ServeError::Fatal(why)),
        None => Ok(result?),
    }
}

/// The webhook's handlers (sharing the metrics registry with the controller) bound on
/// their listeners.
async fn bind_webhook(
    args: &ServeArgs,
    index: Arc<ClusterIndex>,
    policies: crate::policy::PolicyHandle,
    settings: &crate::config::Settings,
    health: Arc<WatchHealth>,
    metrics: crate::telemetry::Metrics,
) -> Result<WebhookServer, ServeError> {
    let mut state = WebhookState::new(
        index,
        policies,
        WebhookConfig {
            manage_jobs_without_queue_name: settings.manage_jobs_without_queue_name,
            frameworks: settings.frameworks.clone(),
            ..WebhookConfig::default()
        },
    );
    state.metrics = WebhookMetrics::new(metrics.clone());
    let state = Arc::new(state);
    let (ready, diagnostics) = index_readiness(state.clone(), health);
    let ready: Readiness = if args.ready_without_index {
        warn!("--ready-without-index: reporting ready with a cold cluster index");
        Arc::new(|| true)
    } else {
        ready
    };
    let server = WebhookServer::bind(args.server.clone(), crate::webhook::router(state), ready)
        .await?
        .with_metrics(metrics)
        .with_diagnostics(diagnostics);
    Ok(server)
}

/// SIGINT or SIGTERM: the one a task caught from the start, if there is one.
async fn signal(caught: Option<tokio::task::JoinHandle<()>>) {
    match caught {
        Some(caught) => {
            let _ = caught.await;
        }
        None => shutdown_signal().await,
    }
}

/// The controller's estimator settings from the configuration's `startEstimates`.
fn estimate_config(
    e: &crate::config::StartEstimates,
) -> crate::controller::estimates::EstimateConfig {
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    crate::controller::estimates::EstimateConfig {
        enabled: e.enabled,
        interval: e.interval,
        cpu_share: e.cpu_share,
        forecast: crate::forecast::ForecastConfig {
            horizon: ms(e.horizon),
            default_runtime: e.default_runtime.map(ms),
            ..crate::forecast::ForecastConfig::default()
        },
        write_threshold: e.write_threshold.map(ms),
        ..crate::controller::estimates::EstimateConfig::default()
    }
}

/// Starts the queue controller behind leader election: it schedules only on the replica
/// holding the Lease, a fresh one on every term (rebuilt from the API server).
async fn start_scheduling(
    client: &kube::Client,
    settings: &crate::config::Settings,
    metrics: &crate::telemetry::Metrics,
    fatal: &crate::controller::Fatal,
    queries: &crate::controller::pending::PendingQueries,
) -> crate::lease::Scheduling {
    let leader_elected = settings.leader_election.enabled;
    if leader_elected {
        // Until this replica wins the Lease (Kueue's replicas start as followers).
        metrics.set_replica_role(crate::telemetry::ReplicaRole::Follower);
    }
    let config = crate::controller::ControllerConfig {
        integrations: settings.frameworks.clone(),
        manage_jobs_without_queue_name: settings.manage_jobs_without_queue_name,
        managed_namespaces: crate::controller::managed_namespaces::ManagedNamespaces {
            selector: settings.managed_jobs_namespace_selector.clone(),
            ..crate::controller::managed_namespaces::ManagedNamespaces::excluding(
                &settings.namespace,
            )
        },
        engine: settings.engine.clone(),
        api_writes: settings.api_writes,
        estimates: estimate_config(&settings.start_estimates),
        metrics: metrics.clone(),
        leader_elected,
        fatal: fatal.clone(),
        pending_queries: queries.clone(),
        namespace: settings.namespace.clone(),
        multikueue: settings.multikueue.clone(),
        ..crate::controller::ControllerConfig::default()
    };
    let controller_client = client.clone();
    // The Lease gets a token bucket of its own (as client-go's leader election
    // has its own client): behind thousands of queued Workload writes at
    // `clientConnection.qps`, renewals would miss `renewDeadline` and the leader
    // would step down in the middle of the load it was handling.
    let lease_client = crate::config::client::client(settings.client)
        .await
        .unwrap_or_else(|_| client.clone());
    crate::lease::Scheduling::start(lease_client, &settings.leader_election, move |shutdown| {
        let (client, config) = (controller_client.clone(), config.clone());
        async move {
            if let Err(e) = crate::controller::run(client, config, shutdown).await {
                error!(error = %e, "the queue controller stopped");
            }
        }
    })
}

/// Starts the watches that feed the cluster index (and, with --inject-ca-bundle, the
/// caBundle writer).
fn start_feed(
    client: &kube::Client,
    args: &ServeArgs,
    index: &Arc<ClusterIndex>,
    health: &Arc<WatchHealth>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if args.inject_ca_bundle {
        let ca = args.server.cert_dir.join(crate::webhook::tls::CA_FILE);
        tasks.push(crate::crds::inject::spawn(client.clone(), ca));
    }
    tasks.extend(crate::webhook::feed::spawn(
        client.clone(),
        index.clone(),
        health.clone(),
    ));
    tasks
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    #[test]
    fn serve_flags_and_defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let cli = Cli::try_parse_from(["kuota"]).expect("defaults");
        let c = &cli.serve.server;
        assert_eq!(c.listen, SocketAddr::from(([0, 0, 0, 0], 9443)));
        assert_eq!(c.health_listen, SocketAddr::from(([0, 0, 0, 0], 8080)));
        assert_eq!(c.cert_dir, PathBuf::from("/certs"));
        assert_eq!(c.max_body_bytes, 7 * 1024 * 1024);
        assert_eq!(c.request_timeout, Duration::from_secs(2));
        assert_eq!(c.rotate_before, Duration::from_secs(720 * 3600));
        let cli = Cli::try_parse_from([
            "kuota",
            "--listen=127.0.0.1:1",
            "--cert-dir",
            "/x",
            "--request-timeout=250ms",
            "--ready-without-index",
        ])
        .expect("flags");
        assert_eq!(cli.serve.server.request_timeout, Duration::from_millis(250));
        assert!(cli.serve.ready_without_index);
        // Unset: the Configuration file decides (off without one).
        assert_eq!(cli.serve.visibility_listen, None);
        let on = Cli::try_parse_from(["kuota", "--visibility-listen=0.0.0.0:8082"]).expect("on");
        assert_eq!(
            on.serve.visibility_listen,
            Some(VisibilityListen(Some(SocketAddr::from((
                [0, 0, 0, 0],
                8082
            )))))
        );
        let off = Cli::try_parse_from(["kuota", "--visibility-listen=off"]).expect("off");
        assert_eq!(off.serve.visibility_listen, Some(VisibilityListen(None)));
        assert!(Cli::try_parse_from(["kuota", "--visibility-listen=8082"]).is_err());
        // Listener flags are kept apart, to override the Configuration file's.
        assert_eq!(cli.serve.listeners.listen, "127.0.0.1:1".parse().ok());
        assert_eq!(cli.serve.listeners.cert_dir, Some(PathBuf::from("/x")));
        assert_eq!(cli.serve.listeners.health_listen, None);
        assert!(Cli::try_parse_from(["kuota", "--drain-delay=5"]).is_err());
        // --local-webhooks[=HOST]: off by default, 127.0.0.1 bare, never with the
        // in-cluster caBundle injection.
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|c| c.serve.local_webhooks);
        assert_eq!(parse(&["kuota"]).expect("default"), None);
        assert_eq!(
            parse(&["kuota", "--local-webhooks"])
                .expect("bare")
                .as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            parse(&["kuota", "--local-webhooks=172.18.0.1"])
                .expect("host")
                .as_deref(),
            Some("172.18.0.1")
        );
        assert!(parse(&["kuota", "--local-webhooks", "--inject-ca-bundle"]).is_err());
    }
}
