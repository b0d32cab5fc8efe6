//! Kueue's visibility API (`visibility.kueue.x-k8s.io` v1beta2 and v1beta1), served by
//! kuota as an aggregated API: the pending workloads of a ClusterQueue or a LocalQueue with
//! their positions, read from the engine's own queues (`controller::pending`).
//!
//! - `api`: paths, options, discovery and response bodies (pure);
//! - `auth`: the front proxy's client certificate and headers, and `SubjectAccessReview`;
//! - this module: the TLS listener and the request flow (authenticate, authorize, answer).
//!
//! Only the replica whose engine runs (the Lease holder) has queues to read; another one
//! answers 503 ServiceUnavailable, so the install points the APIService's Service at the
//! controller's single replica.

pub mod api;
pub mod auth;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::controller::pending::{PendingQueries, PendingTarget, QueryError};
use crate::engine::PendingLookupError;
use crate::webhook::tls::{self, CertStore};
use api::{GroupVersion, Route};
use auth::{Authorizer, RequestHeaderConfig};

/// Kueue's default `visibilityServer.bindPort`.
pub const DEFAULT_PORT: u16 = 8082;
/// How often the front proxy's settings are read again (the API server may rotate its CA).
const AUTH_REFRESH: Duration = Duration::from_secs(60);
/// How often the serving certificate files are looked at.
const CERT_RELOAD: Duration = Duration::from_secs(5);
/// Deadline for a client to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum VisibilityError {
    #[error("visibility server: {0}")]
    Auth(#[from] auth::AuthError),
    #[error("visibility server: certificate in {dir}: {source}")]
    Cert {
        dir: String,
        #[source]
        source: tls::TlsError,
    },
    #[error("visibility server: TLS settings: {0}")]
    Tls(#[from] rustls::Error),
    #[error("visibility server: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Bytes of page bodies kept for serving again.
const PAGE_CACHE_BYTES: u64 = 64 << 20;
/// A kept page unread this long is dropped (a newer engine version makes it unreachable
/// at once; this only bounds how long it occupies memory).
const PAGE_CACHE_IDLE: Duration = Duration::from_secs(60);

/// A page body as served: for this engine version, API version, queue and window.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PageKey {
    engine_version: u64,
    api: GroupVersion,
    target: PendingTarget,
    offset: usize,
    limit: usize,
}

/// What the request handlers share.
struct State {
    queries: PendingQueries,
    authorizer: Authorizer,
    headers: RwLock<Arc<RequestHeaderConfig>>,
    /// Pages already built, served again while the engine has not changed: clients that
    /// poll a queue (dashboards, `kubectl kuota pending -w`) then cost no engine read and
    /// no JSON building. Only authorized callers reach it, and a page is the same for
    /// every caller allowed to read its queue.
    pages: moka::sync::Cache<PageKey, Bytes>,
}

/// A running visibility server.
pub struct VisibilityServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl VisibilityServer {
    /// Reads the front proxy's settings, loads the serving certificate from `cert_dir`,
    /// listens on `listen` and serves until [`VisibilityServer::stop`].
    pub async fn start(
        client: kube::Client,
        queries: PendingQueries,
        listen: SocketAddr,
        cert_dir: &Path,
    ) -> Result<Self, VisibilityError> {
        let headers = RequestHeaderConfig::load(&client).await?;
        let certs =
            Arc::new(
                CertStore::load_dir(cert_dir).map_err(|source| VisibilityError::Cert {
                    dir: cert_dir.display().to_string(),
                    source,
                })?,
            );
        let acceptor = Arc::new(RwLock::new(tls_acceptor(&certs, &headers)?));
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| VisibilityError::Bind {
                addr: listen,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| VisibilityError::Bind {
                addr: listen,
                source,
            })?;
        let state = Arc::new(State {
            authorizer: Authorizer::new(client.clone()),
            queries,
            headers: RwLock::new(Arc::new(headers)),
            pages: moka::sync::Cache::builder()
                .max_capacity(PAGE_CACHE_BYTES)
                .weigher(|_, body: &Bytes| u32::try_from(body.len()).unwrap_or(u32::MAX))
                .time_to_idle(PAGE_CACHE_IDLE)
                .build(),
        });
        info!(%addr, "visibility.kueue.x-k8s.io and visibility.kuota.dev served (front-proxy client certificates required)");
        let refresh = tokio::spawn(refresh(client, certs, acceptor.clone(), state.clone()));
        let task = tokio::spawn(async move {
            accept(listener, acceptor, state).await;
            refresh.abort();
        });
        Ok(Self { addr, task })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and drops open connections.
    pub fn stop(self) {
        self.task.abort();
    }
}

/// TLS with kuota's serving certificate, verifying front-proxy client certificates.
fn tls_acceptor(
    certs: &Arc<CertStore>,
    headers: &RequestHeaderConfig,
) -> Result<TlsAcceptor, VisibilityError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_client_cert_verifier(headers.client_verifier()?)
        .with_cert_resolver(certs.clone());
    config.alpn_protocols = vec![tls::ALPN_H2.to_vec(), tls::ALPN_HTTP11.to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Reloads a renewed serving certificate, and the front proxy's settings when they change.
async fn refresh(
    client: kube::Client,
    certs: Arc<CertStore>,
    acceptor: Arc<RwLock<TlsAcceptor>>,
    state: Arc<State>,
) {
    let mut certs_tick = tokio::time::interval(CERT_RELOAD);
    let mut auth_tick = tokio::time::interval(AUTH_REFRESH);
    loop {
        tokio::select! {
            _ = certs_tick.tick() => { let _ = certs.poll(); }
            _ = auth_tick.tick() => match RequestHeaderConfig::load(&client).await {
                Ok(fresh) => {
                    let current = state.headers.read().unwrap_or_else(|e| e.into_inner()).clone();
                    if *current == fresh {
                        continue;
                    }
                    match tls_acceptor(&certs, &fresh) {
                        Ok(a) => {
                            *acceptor.write().unwrap_or_else(|e| e.into_inner()) = a;
                            *state.headers.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
                            info!("front-proxy settings changed: reloaded");
                        }
                        Err(e) => warn!(error = %e, "keeping the previous front-proxy settings"),
                    }
                }
                Err(e) => warn!(error = %e, "keeping the previous front-proxy settings"),
            },
        }
    }
}

async fn accept(listener: TcpListener, acceptor: Arc<RwLock<TlsAcceptor>>, state: Arc<State>) {
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                warn!(error = %e, "visibility server: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let tls = acceptor.read().unwrap_or_else(|e| e.into_inner()).clone();
        let (state, builder) = (state.clone(), builder.clone());
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => return debug!(%peer, "TLS handshake timed out"),
            };
            // rustls verified the chain; only the name is left to check.
            let proxy = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|leaf| common_name(leaf.as_ref()));
            let service = hyper::service::service_fn(move |req| {
                let (state, proxy) = (state.clone(), proxy.clone());
                async move { Ok::<_, std::convert::Infallible>(handle(&state, proxy, req).await) }
            });
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, error = %e, "visibility connection ended with an error");
            }
        });
    }
}

/// The subject common name of a DER certificate.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}

fn respond(code: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    respond_bytes(code, Bytes::from(body.to_string()))
}

fn respond_bytes(code: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    respond(code, &api::status(code.as_u16(), reason, message, None))
}

/// Authenticates the front proxy and its caller, authorizes the caller, then answers.
async fn handle<B>(state: &State, proxy: Option<String>, req: Request<B>) -> Response<Full<Bytes>> {
    let headers = state
        .headers
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    // Only the API server's front proxy may call: no certificate, or one with a name
    // the API server does not publish, is not a caller we can trust to name the user.
    if !proxy.as_deref().is_some_and(|cn| headers.allows(cn)) {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    if req.method() != Method::GET {
        return status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
    }
    let Some(route) = api::route(req.uri().path()) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let (version, target) = match route {
        // Discovery: any caller the front proxy vouches for (the API server's
        // system:discovery role grants it to every authenticated user).
        Route::Group(group) => return respond(StatusCode::OK, &api::group(group)),
        Route::Resources { version } => return respond(StatusCode::OK, &api::resources(version)),
        Route::ClusterQueue { version, name } => (version, PendingTarget::ClusterQueue(name)),
        Route::LocalQueue {
            version,
            namespace,
            name,
        } => (version, PendingTarget::LocalQueue { namespace, name }),
    };
    let Some(who) = headers.identity(req.headers()) else {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    };
    match state
        .authorizer
        .allowed(&who, auth::attributes(version, &target))
        .await
    {
        Ok((true, _)) => {}
        Ok((false, reason)) => {
            return respond(
                StatusCode::FORBIDDEN,
                &api::forbidden(version.group, &who.user, &target, &reason),
            );
        }
        Err(e) => {
            warn!(error = %e, "visibility request not authorized: the review failed");
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &format!("Internal error occurred: {e}"),
            );
        }
    }
    let opts = match api::page_options(req.uri().query()) {
        Ok(o) => o,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", &message),
    };
    // The version is read before the engine is asked: the page it answers is at least
    // that recent, so it may be served again for as long as the version stays.
    let key = PageKey {
        engine_version: state.queries.version(),
        api: version,
        target: target.clone(),
        offset: opts.offset,
        limit: opts.limit,
    };
    if let Some(body) = state.pages.get(&key) {
        return respond_bytes(StatusCode::OK, body);
    }
    match state.queries.ask(target, opts.offset, opts.limit).await {
        Ok(page) => {
            let summary = api::summary(version, &page.items, &page.estimates);
            let body = Bytes::from(summary.to_string());
            state.pages.insert(key, body.clone());
            respond_bytes(StatusCode::OK, body)
        }
        Err(QueryError::Lookup(PendingLookupError::ClusterQueueNotFound(name))) => respond(
            StatusCode::NOT_FOUND,
            &api::not_found(version.group, "clusterqueue", &name),
        ),
        Err(QueryError::Lookup(PendingLookupError::LocalQueueNotFound { name, .. })) => respond(
            StatusCode::NOT_FOUND,
            &api::not_found(version.group, "localqueue", &name),
        ),
        Err(e @ (QueryError::NoEngine | QueryError::NotSynced)) => {
            let mut r = status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                &e.to_string(),
            );
            r.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            r
        }
    }
}
