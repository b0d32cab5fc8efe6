//! The webhook's network shell: a TLS listener serving the admission router
//! and a plain-HTTP listener for probes and metrics.
//!
//! ```text
//!  :9443 TLS (rustls, h2 + http/1.1) --> [timeout 504] -> [body limit: 413 review]
//!                                        -> [queue for one of N permits] -> admission router
//!  :8080 plain HTTP                   --> /healthz, /readyz, /metrics
//! ```
//!
//! - Certificates come from a [`CertStore`] polled every few seconds; a
//!   renewed Secret is picked up by new handshakes while open connections
//!   carry on (see `tls`).
//! - Overload queues: at most `max_concurrency` requests run the handlers,
//!   the rest wait for a permit. The request timeout covers the wait, so a
//!   saturated server answers 504 in bounded time instead of piling up work.
//! - Shutdown (SIGTERM / ctrl-c): `/readyz` turns 503, the listener keeps
//!   accepting for `drain_delay` (endpoints take a moment to notice), then
//!   stops accepting; idle keep-alive connections are closed, in-flight
//!   requests finish (HTTP/2 gets GOAWAY), bounded by `shutdown_timeout`.
//!
//! The handlers are not this module's business: any `axum::Router` can be
//! served, and readiness is a caller-supplied predicate (the watch-fed
//! index being synced) combined with "a certificate is loaded, not draining".

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceBuilder};
use tracing::{debug, error, info, warn};

use super::tls::{self, CertStore, PollOutcome};
use crate::duration::parse_flag;

/// An UPDATE review carries the object twice (new and old), each up to the API server's
/// 3 MiB request limit, plus the envelope: 7 MiB, as controller-runtime allows. A 3 MiB
/// limit refused the unsuspend of a Job that was accepted on create.
pub const DEFAULT_MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// Caller-supplied readiness (e.g. "the cluster index has synced").
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// Caller-supplied problems `/readyz` lists: `failing` ones make the server not ready
/// (e.g. a watch that keeps failing), `warnings` are only shown.
pub type Diagnostics = Arc<dyn Fn() -> Diagnosis + Send + Sync>;

/// What [`Diagnostics`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Problems that make the server not ready, one line each.
    pub failing: Vec<String>,
    /// Problems worth showing that do not affect readiness.
    pub warnings: Vec<String>,
}

/// Where `/metrics` is served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MetricsListen {
    /// On the health listener, next to the probes.
    #[default]
    OnHealth,
    /// On a plain-HTTP listener of its own.
    Separate(SocketAddr),
    /// Not served.
    Off,
}

/// The admission listener's address by default.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 9443);
/// The health listener's address by default.
pub const DEFAULT_HEALTH_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 8080);
/// The certificate directory by default.
pub const DEFAULT_CERT_DIR: &str = "/certs";

/// Listener, TLS and limit settings. Also the clap arguments of `kuota serve`, except the
/// listeners and the certificate directory, which `kuota serve` resolves from its flags and
/// the Configuration file.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerConfig {
    /// Address of the TLS admission listener.
    #[arg(skip = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP listener for the probes (and `/metrics`, by default).
    #[arg(skip = DEFAULT_HEALTH_LISTEN)]
    pub health_listen: SocketAddr,
    /// Where `/metrics` is served.
    #[arg(skip)]
    pub metrics: MetricsListen,
    /// Path of the readiness probe (Kueue's `health.readinessEndpointName`).
    #[arg(skip = String::from("/readyz"))]
    pub readiness_path: String,
    /// Path of the liveness probe (Kueue's `health.livenessEndpointName`).
    #[arg(skip = String::from("/healthz"))]
    pub liveness_path: String,
    /// Directory holding tls.crt and tls.key (a mounted kubernetes.io/tls Secret).
    #[arg(skip = PathBuf::from(DEFAULT_CERT_DIR))]
    pub cert_dir: PathBuf,
    /// How often to look for a renewed certificate.
    #[arg(long, default_value = "5s", value_parser = parse_flag)]
    pub cert_reload_interval: Duration,
    /// Report rotation as due (log + metric) when the certificate expires within this window.
    #[arg(long, default_value = "720h", value_parser = parse_flag)]
    pub rotate_before: Duration,
    /// Per-request deadline, including the wait for a concurrency permit.
    /// Keep it below the webhook configurations' timeoutSeconds (3 s in manifests/).
    #[arg(long, default_value = "2s", value_parser = parse_flag)]
    pub request_timeout: Duration,
    /// Largest accepted request body; larger ones are denied with a 413 Status.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Requests handled at once; further requests queue for a slot.
    #[arg(long, default_value_t = 128)]
    pub max_concurrency: usize,
    /// Deadline for a client to finish the TLS handshake.
    #[arg(long, default_value = "10s", value_parser = parse_flag)]
    pub handshake_timeout: Duration,
    /// After SIGTERM, keep accepting (while /readyz reports 503) for this long.
    #[arg(long, default_value = "0s", value_parser = parse_flag)]
    pub drain_delay: Duration,
    /// After accepting stops, how long in-flight requests get to finish.
    #[arg(long, default_value = "20s", value_parser = parse_flag)]
    pub shutdown_timeout: Duration,
}

impl ServerConfig {
    /// Loopback listeners on ephemeral ports and short timeouts: for tests,
    /// examples and the load-test harness.
    pub fn local(cert_dir: impl Into<PathBuf>) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            health_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics: MetricsListen::OnHealth,
            readiness_path: "/readyz".to_string(),
            liveness_path: "/healthz".to_string(),
            cert_dir: cert_dir.into(),
            cert_reload_interval: Duration::from_secs(5),
            rotate_before: Duration::from_secs(720 * 3600),
            request_timeout: Duration::from_secs(5),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_concurrency: 128,
            handshake_timeout: Duration::from_secs(10),
            drain_delay: Duration::ZERO,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A bound, not yet running server. Binding first lets callers (tests, the
/// CLI) learn the actual ports before traffic starts.
pub struct WebhookServer {
    config: ServerConfig,
    listener: TcpListener,
    health_listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    certs: Arc<CertStore>,
    app: Router,
    ready: Readiness,
    metrics: crate::telemetry::Metrics,
    diagnostics: Option<Diagnostics>,
}

/// State shared by the listeners, the reloader and the probes.
struct Shared {
    certs: Arc<CertStore>,
    ready: Readiness,
    metrics: crate::telemetry::Metrics,
    diagnostics: Option<Diagnostics>,
    oversize: Arc<AtomicU64>,
    draining: AtomicBool,
    open_connections: AtomicU64,
    rotate_before: Duration,
}

impl WebhookServer {
    /// Loads the certificate from `config.cert_dir` and binds both listeners.
    pub async fn bind(
        config: ServerConfig,
        app: Router,
        ready: Readiness,
    ) -> Result<Self, ServerError> {
        let certs = Arc::new(CertStore::load_dir(&config.cert_dir)?);
        Self::bind_with_store(config, app, ready, certs).await
    }

    /// Like [`bind`](Self::bind) with an already loaded certificate store.
    pub async fn bind_with_store(
        config: ServerConfig,
        app: Router,
        ready: Readiness,
        certs: Arc<CertStore>,
    ) -> Result<Self, ServerError> {
        let listener = bind(config.listen).await?;
        let health_listener = bind(config.health_listen).await?;
        let metrics_listener = match config.metrics {
            MetricsListen::Separate(addr) => Some(bind(addr).await?),
            MetricsListen::OnHealth | MetricsListen::Off => None,
        };
        Ok(Self {
            config,
            listener,
            health_listener,
            metrics_listener,
            certs,
            app,
            ready,
            metrics: crate::telemetry::Metrics::default(),
            diagnostics: None,
        })
    }

    /// Lists `diagnostics()` in `/readyz`; its failing problems make the server not ready.
    pub fn with_diagnostics(mut self, diagnostics: Diagnostics) -> Self {
        self.diagnostics = Some(diagnostics);
        self
    }

    /// Serves `metrics` (with the server's own) on the health listener's `/metrics`.
    pub fn with_metrics(mut self, metrics: crate::telemetry::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        // A bound listener always has a local address; fall back to the
        // configured one rather than panic if the OS says otherwise.
        self.listener.local_addr().unwrap_or(self.config.listen)
    }

    pub fn health_addr(&self) -> SocketAddr {
        self.health_listener
            .local_addr()
            .unwrap_or(self.config.health_listen)
    }

    /// The address `/metrics` is served on, when it has a listener of its own.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    pub fn cert_store(&self) -> Arc<CertStore> {
        self.certs.clone()
    }

    /// Serves until `shutdown` resolves, then drains as described in the
    /// module docs. Returns once every connection is closed or the deadline
    /// has passed.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServerError> {
        let Self {
            config,
            listener,
            health_listener,
            metrics_listener,
            certs,
            app,
            ready,
            metrics,
            diagnostics,
        } = self;
        let oversize = Arc::new(AtomicU64::new(0));
        let shared = Arc::new(Shared {
            certs: certs.clone(),
            ready,
            metrics,
            diagnostics,
            oversize: oversize.clone(),
            draining: AtomicBool::new(false),
            open_connections: AtomicU64::new(0),
            rotate_before: config.rotate_before,
        });
        let acceptor = TlsAcceptor::from(Arc::new(tls::server_config(certs.clone())?));
        let service = TowerToHyperService::new(harden_counting(app, &config, oversize));
        let builders = Arc::new(ConnBuilders::new());
        let background = Background::spawn(
            Probes {
                listener: health_listener,
                readiness_path: config.readiness_path.clone(),
                liveness_path: config.liveness_path.clone(),
                metrics: config.metrics == MetricsListen::OnHealth,
            },
            metrics_listener,
            &shared,
            config.cert_reload_interval,
        );
        log_listening(&listener, &certs, config.listen);

        let graceful = GracefulShutdown::new();
        let mut conns = JoinSet::new();
        let accept = Acceptor {
            listener: &listener,
            acceptor: &acceptor,
            builders: &builders,
            service: &service,
            shared: &shared,
            handshake_timeout: config.handshake_timeout,
        };
        accept
            .until_drain_delay_passed(shutdown, config.drain_delay, &graceful, &mut conns)
            .await;
        // Closing the listener refuses new connections while the open ones drain.
        drop(listener);
        drain_connections(graceful, &mut conns, &shared, config.shutdown_timeout).await;
        background.stop().await;
        Ok(())
    }
}

/// Logs the TLS listener's address and the certificate it starts with.
fn log_listening(listener: &TcpListener, certs: &CertStore, configured: SocketAddr) {
    let info = certs.info();
    info!(
        addr = %listener.local_addr().unwrap_or(configured),
        serial = %info.serial,
        not_after = tls::unix_seconds(info.not_after),
        "webhook listening (TLS 1.2/1.3, h2 + http/1.1)"
    );
}

/// Waits for open connections to finish after accepting stopped: idle ones close,
/// in-flight requests complete, and whatever is left at `timeout` is aborted.
async fn drain_connections(
    graceful: GracefulShutdown,
    conns: &mut JoinSet<()>,
    shared: &Shared,
    timeout: Duration,
) {
    let open = shared.open_connections.load(Ordering::SeqCst);
    info!(
        open_connections = open,
        "stopped accepting; draining connections"
    );

    let started = Instant::now();
    let drained = async {
        graceful.shutdown().await;
        while conns.join_next().await.is_some() {}
    };
    if tokio::time::timeout(timeout, drained).await.is_err() {
        warn!(
            remaining = shared.open_connections.load(Ordering::SeqCst),
            timeout = ?timeout,
            "shutdown deadline passed; closing remaining connections"
        );
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    } else {
        info!(elapsed = ?started.elapsed(), "all connections drained");
    }
}

/// The tasks serving beside the TLS listener: the probe listener and the certificate
/// reloader, stopped together once the connections are drained.
struct Background {
    stop: watch::Sender<bool>,
    reloader: JoinHandle<()>,
    health: JoinHandle<()>,
    metrics: Option<JoinHandle<()>>,
}

/// The probe listener and what it serves.
struct Probes {
    listener: TcpListener,
    readiness_path: String,
    liveness_path: String,
    /// Whether `/metrics` is served here too.
    metrics: bool,
}

impl Background {
    /// Starts the probe listener, the metrics listener if separate, and the certificate
    /// reloader.
    fn spawn(
        probes: Probes,
        metrics_listener: Option<TcpListener>,
        shared: &Arc<Shared>,
        reload_interval: Duration,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let mut app = Router::new()
            .route(&probes.liveness_path, get(|| async { "ok" }))
            .route(&probes.readiness_path, get(readyz));
        if probes.metrics {
            app = app.route("/metrics", get(metrics));
        }
        let health = tokio::spawn(serve_plain(
            "health",
            probes.listener,
            app.with_state(shared.clone()),
            stop_rx.clone(),
        ));
        let metrics = metrics_listener.map(|listener| {
            let app = Router::new()
                .route("/metrics", get(metrics))
                .with_state(shared.clone());
            tokio::spawn(serve_plain("metrics", listener, app, stop_rx.clone()))
        });
        let reloader = tokio::spawn(reload_loop(shared.clone(), reload_interval, stop_rx));
        Self {
            stop,
            reloader,
            health,
            metrics,
        }
    }

    /// Tells both tasks to stop and waits until they have.
    async fn stop(self) {
        // The receivers may already be gone if those tasks ended; nothing to do then.
        let _ = self.stop.send(true);
        let _ = self.reloader.await;
        let _ = self.health.await;
        if let Some(metrics) = self.metrics {
            let _ = metrics.await;
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

/// Resolves on SIGTERM (Kubernetes) or ctrl-c (a terminal).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            error!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => info!("ctrl-c received"),
        () = term => info!("SIGTERM received"),
    }
}

/// The admission router wrapped in the limits described in the module docs,
/// as one cloneable service. Public so tests and benchmarks can drive the
/// exact production stack with `tower::ServiceExt::oneshot` (any body type).
pub type HardenedService<B> = BoxCloneSyncService<Request<B>, Response, Infallible>;

/// Wraps `app` in: JSON 504 on timeout, a 413 AdmissionReview over
/// `max_body_bytes`, and a queue of at most `max_concurrency` requests in the handlers.
pub fn harden<B>(app: Router, config: &ServerConfig) -> HardenedService<B>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    harden_counting(app, config, Arc::new(AtomicU64::new(0)))
}

/// [`harden`], counting oversize bodies in `oversize`.
pub fn harden_counting<B>(
    app: Router,
    config: &ServerConfig,
    oversize: Arc<AtomicU64>,
) -> HardenedService<B>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let permits = Arc::new(Semaphore::new(config.max_concurrency.max(1)));
    let timeout = config.request_timeout;
    let limit = BodyLimit {
        max: config.max_body_bytes,
        oversize,
    };
    let app = app
        // axum's extractors default to 2 MB; align them with our limit.
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        // Inside the permit, so at most `max_concurrency` bodies are buffered at once.
        .layer(from_fn_with_state(limit, limit_body))
        .layer(from_fn_with_state(permits, queue_for_permit));
    let stack = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(move |err: BoxError| async move {
            request_error(err, timeout)
        }))
        .timeout(timeout)
        .service(app);
    BoxCloneSyncService::new(stack)
}

#[derive(Clone)]
struct BodyLimit {
    max: usize,
    oversize: Arc<AtomicU64>,
}

/// Reads the body up to the limit. An oversize one (by Content-Length, or once it streams
/// past the limit) is not read further and gets an AdmissionReview denying with a 413
/// Status, logged and counted, so the user sees the reason rather than "failed calling
/// webhook".
async fn limit_body(State(limit): State<BodyLimit>, req: Request, next: Next) -> Response {
    use futures::StreamExt;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (parts, body) = req.into_parts();
    let too_big = |n: u64| n > limit.max as u64;
    let mut stream = body.into_data_stream();
    let mut buf = Vec::with_capacity(declared.map_or(0, |n| n.min(limit.max as u64) as usize));
    let mut oversize = declared.is_some_and(too_big);
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                return json_error(StatusCode::BAD_REQUEST, &format!("reading the body: {e}"));
            }
        };
        buf.extend_from_slice(&chunk);
        if oversize && buf.len() >= super::review::UID_SEARCH_BYTES {
            break;
        }
        if too_big(buf.len() as u64) {
            oversize = true;
            break;
        }
    }
    if oversize {
        limit.oversize.fetch_add(1, Ordering::Relaxed);
        warn!(
            path = %parts.uri.path(),
            limit = limit.max,
            content_length = declared,
            "admission review body over the limit; denied with 413"
        );
        let body = super::review::encode_oversize(&buf, limit.max);
        // The rest of the body is not read: close the connection rather than reuse it.
        return (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CONNECTION, "close"),
            ],
            body,
        )
            .into_response();
    }
    next.run(Request::from_parts(parts, Body::from(buf))).await
}

/// Waits for a concurrency slot. Runs inside the timeout, so queueing time
/// counts against the request's deadline.
async fn queue_for_permit(
    State(permits): State<Arc<Semaphore>>,
    req: Request,
    next: Next,
) -> Response {
    match permits.acquire().await {
        Ok(_permit) => next.run(req).await,
        // Only possible if the semaphore were closed, which we never do.
        Err(_) => json_error(StatusCode::SERVICE_UNAVAILABLE, "server is shutting down"),
    }
}

fn request_error(err: BoxError, timeout: Duration) -> Response {
    if err.is::<tower::timeout::error::Elapsed>() {
        json_error(
            StatusCode::GATEWAY_TIMEOUT,
            &format!("request not answered within {timeout:?}"),
        )
    } else {
        json_error(StatusCode::SERVICE_UNAVAILABLE, &err.to_string())
    }
}

fn json_error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "code": status.as_u16(), "error": message });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// hyper connection builders, one per ALPN outcome. ALPN tells us the
/// protocol, so we skip the auto builder's preface sniffing when we can.
struct ConnBuilders {
    auto: auto::Builder<TokioExecutor>,
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
}

impl ConnBuilders {
    fn new() -> Self {
        let mut auto = auto::Builder::new(TokioExecutor::new());
        auto.http1()
            .timer(TokioTimer::new())
            // Slow-loris guard: headers must arrive within this time.
            .header_read_timeout(Duration::from_secs(10))
            .keep_alive(true);
        auto.http2()
            .timer(TokioTimer::new())
            // Detects dead API-server connections (no FIN after a node loss).
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10))
            .max_concurrent_streams(256);
        Self {
            h1: auto.clone().http1_only(),
            h2: auto.clone().http2_only(),
            auto,
        }
    }

    fn for_alpn(&self, alpn: Option<&[u8]>) -> &auto::Builder<TokioExecutor> {
        match alpn {
            Some(tls::ALPN_H2) => &self.h2,
            Some(tls::ALPN_HTTP11) => &self.h1,
            _ => &self.auto,
        }
    }
}

type HyperService = TowerToHyperService<HardenedService<hyper::body::Incoming>>;

struct Acceptor<'a> {
    listener: &'a TcpListener,
    acceptor: &'a TlsAcceptor,
    builders: &'a Arc<ConnBuilders>,
    service: &'a HyperService,
    shared: &'a Arc<Shared>,
    handshake_timeout: Duration,
}

impl Acceptor<'_> {
    /// Accepts connections until `shutdown` resolves, then, reporting not ready, for
    /// `drain_delay` more: endpoints take a moment to stop sending new requests here.
    async fn until_drain_delay_passed(
        &self,
        shutdown: impl Future<Output = ()>,
        drain_delay: Duration,
        graceful: &GracefulShutdown,
        conns: &mut JoinSet<()>,
    ) {
        self.until(shutdown, graceful, conns).await;
        self.shared.draining.store(true, Ordering::SeqCst);
        if !drain_delay.is_zero() {
            info!(delay = ?drain_delay, "shutdown requested: not ready, still accepting");
            self.until(tokio::time::sleep(drain_delay), graceful, conns)
                .await;
        }
    }

    /// Accepts connections until `stop` resolves.
    async fn until(
        &self,
        stop: impl Future<Output = ()>,
        graceful: &GracefulShutdown,
        conns: &mut JoinSet<()>,
    ) {
        let mut stop = pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                accepted = self.listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        // Subscribe before spawning so a shutdown signalled
                        // while this connection handshakes still reaches it.
                        let watcher = graceful.watcher();
                        conns.spawn(serve_connection(
                            tcp,
                            peer,
                            self.acceptor.clone(),
                            self.builders.clone(),
                            self.service.clone(),
                            watcher,
                            self.shared.clone(),
                            self.handshake_timeout,
                        ));
                    }
                    Err(e) => {
                        // Typically EMFILE/ENFILE: back off instead of spinning.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                // Reap finished connection tasks so the set stays small.
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    }
}

#[allow(clippy::too_many_arguments)] // one spawned task's captured context
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    builders: Arc<ConnBuilders>,
    service: HyperService,
    watcher: Watcher,
    shared: Arc<Shared>,
    handshake_timeout: Duration,
) {
    // Reviews are small request/response pairs: don't let Nagle delay them.
    let _ = tcp.set_nodelay(true);
    let stream = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let _open = ConnectionGuard::new(&shared);
    let builder = builders.for_alpn(stream.get_ref().1.alpn_protocol());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    if let Err(e) = watcher.watch(conn).await {
        debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Counts open (post-handshake) connections for logs and metrics.
struct ConnectionGuard(Arc<Shared>);

impl ConnectionGuard {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.open_connections.fetch_add(1, Ordering::SeqCst);
        Self(shared.clone())
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Polls the certificate files and the expiry clock until stopped.
async fn reload_loop(shared: Arc<Shared>, interval: Duration, mut stop: watch::Receiver<bool>) {
    // Remind hourly while rotation is due, not on every poll.
    const EXPIRY_LOG_EVERY: Duration = Duration::from_secs(3600);
    let mut last_expiry_log: Option<Instant> = None;
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(100)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.changed() => return,
        }
        let certs = shared.certs.clone();
        let outcome = match tokio::task::spawn_blocking(move || certs.poll()).await {
            Ok(outcome) => outcome,
            Err(e) => {
                error!(error = %e, "certificate poll task failed");
                continue;
            }
        };
        match outcome {
            PollOutcome::Unchanged => {}
            PollOutcome::Reloaded { serial } => {
                let info = shared.certs.info();
                info!(%serial, not_after = tls::unix_seconds(info.not_after), "serving certificate reloaded");
                last_expiry_log = None;
            }
            PollOutcome::Rejected { error } => {
                warn!(%error, "new certificate files refused; still serving the previous certificate");
            }
        }
        let now = SystemTime::now();
        if shared.certs.check_expiry(now, shared.rotate_before) {
            if last_expiry_log.is_none_or(|t| t.elapsed() >= EXPIRY_LOG_EVERY) {
                let info = shared.certs.info();
                let left = info.remaining(now);
                if left.is_zero() {
                    error!(serial = %info.serial, "serving certificate has EXPIRED; the API server will reject every call");
                } else {
                    warn!(
                        serial = %info.serial,
                        expires_in_hours = left.as_secs() / 3600,
                        "serving certificate rotation due (run `kuota certs --rotate-before ...` or check cert-manager)"
                    );
                }
                last_expiry_log = Some(Instant::now());
            }
        } else {
            last_expiry_log = None;
        }
    }
}

/// A plain-HTTP listener (probes, metrics). Separate from the TLS one so kubelet
/// probes need no certificates and cannot be starved by admission traffic.
async fn serve_plain(
    name: &'static str,
    listener: TcpListener,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    let stopped = async move {
        // Err means the sender is gone, which also means "stop".
        let _ = stop.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stopped)
        .await
    {
        error!(error = %e, listener = name, "plain-HTTP listener failed");
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    let draining = shared.draining.load(Ordering::SeqCst);
    let index_synced = (shared.ready)();
    // The store cannot exist without a loaded pair; an expired one is not ready.
    let cert_valid = !shared.certs.info().remaining(SystemTime::now()).is_zero();
    let diagnosis = shared.diagnostics.as_ref().map(|d| d()).unwrap_or_default();
    let ready = !draining && index_synced && cert_valid && diagnosis.failing.is_empty();
    let body = serde_json::json!({
        "ready": ready,
        "indexSynced": index_synced,
        "certificateLoaded": cert_valid,
        "draining": draining,
        "failing": diagnosis.failing,
        "warnings": diagnosis.warnings,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The process's metrics plus the server's own (certificate, connections), in
/// OpenMetrics text, scraped from the health port.
async fn metrics(State(shared): State<Arc<Shared>>, headers: axum::http::HeaderMap) -> Response {
    use prometheus_client::metrics::{counter::Counter, family::Family, gauge::Gauge};
    use prometheus_client::registry::Registry;

    let role = crate::telemetry::labels::Role {
        replica_role: shared.metrics.replica_role(),
    };
    let info = shared.certs.info();
    let mut own = Registry::default();
    let gauge = |v: i64| {
        let f = Family::<crate::telemetry::labels::Role, Gauge>::default();
        f.get_or_create(&role).set(v);
        f
    };
    let counter = |v: u64| {
        let f = Family::<crate::telemetry::labels::Role, Counter>::default();
        f.get_or_create(&role).inc_by(v);
        f
    };
    own.register(
        "kuota_webhook_cert_expiry_timestamp_seconds",
        "notAfter of the serving certificate",
        gauge(tls::unix_seconds(info.not_after)),
    );
    own.register(
        "kuota_webhook_cert_rotation_due",
        "1 when the serving certificate expires within --rotate-before",
        gauge(i64::from(shared.certs.rotation_due())),
    );
    own.register(
        "kuota_webhook_cert_reloads",
        "Serving certificates swapped in from disk",
        counter(shared.certs.reloads()),
    );
    own.register(
        "kuota_webhook_cert_reload_errors",
        "Changed certificate files that were refused",
        counter(shared.certs.reload_errors()),
    );
    own.register(
        "kuota_webhook_open_connections",
        "TLS connections currently open",
        gauge(shared.open_connections.load(Ordering::Relaxed) as i64),
    );
    own.register(
        "kuota_webhook_oversize_reviews",
        "Review bodies over --max-body-bytes, denied with 413",
        counter(shared.oversize.load(Ordering::Relaxed)),
    );
    let mut text = String::with_capacity(16 * 1024);
    let encoded = prometheus_client::encoding::text::encode_registry(&mut text, &own)
        .and_then(|()| shared.metrics.encode_into(&mut text))
        .and_then(|()| crate::telemetry::Metrics::finish(&mut text));
    if let Err(e) = encoded {
        error!(error = %e, "cannot encode metrics");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, text) = crate::telemetry::metrics::negotiate(accept, text);
    ([(header::CONTENT_TYPE, content_type)], Body::from(text)).into_response()
}
