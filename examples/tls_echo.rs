//! Load-test baseline: the smallest axum-over-rustls server we can write,
//! with the same TLS configuration as `kuota serve` (TLS 1.2/1.3, ECDSA
//! P-256 from the same cert directory, ALPN h2 + http/1.1) and the same
//! hyper connection builder, but no limits, no timeouts, no review
//! handling: `POST` any path echoes the body back.
//!
//! benches/load/run.sh drives this and `kuota serve` with the same client
//! and body, so the ratio of the two is the cost of kuota's server stack
//! and handlers over bare TLS + HTTP.
//!
//! ```sh
//! cargo run --release --example tls_echo -- --cert-dir webhook-certs/out --listen 127.0.0.1:9444
//! ```
//!
//! `--stack` instead serves through kuota's own `WebhookServer` (limits,
//! timeout, concurrency queue, cert reload, health listener on
//! `--health-listen`) with a stand-in handler that parses the
//! AdmissionReview and allows it: the server stack without kuota's real
//! handlers, for isolating where time goes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use kuota::webhook::server::{ServerConfig, WebhookServer, shutdown_signal};
use kuota::webhook::tls::{self, CertStore};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

fn usage() -> ! {
    eprintln!(
        "usage: tls_echo --cert-dir DIR [--listen 127.0.0.1:9444] [--stack [--health-listen ADDR]]"
    );
    std::process::exit(2)
}

fn fail(what: impl std::fmt::Display) -> ! {
    eprintln!("tls_echo: {what}");
    std::process::exit(1)
}

/// Stand-in review handler for `--stack`: decode, answer allowed with the uid.
async fn allow_review(body: Bytes) -> axum::response::Response {
    use axum::response::IntoResponse;
    let uid = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["request"]["uid"].as_str().map(str::to_owned))
        .unwrap_or_default();
    axum::Json(serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true},
    }))
    .into_response()
}

async fn run_stack(cert_dir: PathBuf, listen: SocketAddr, health: SocketAddr) {
    let mut config = ServerConfig::local(cert_dir);
    config.listen = listen;
    config.health_listen = health;
    let app = Router::new().fallback(post(allow_review));
    let server = match WebhookServer::bind(config, app, Arc::new(|| true)).await {
        Ok(s) => s,
        Err(e) => fail(e),
    };
    eprintln!("tls_echo --stack listening on {}", server.local_addr());
    if let Err(e) = server.run(shutdown_signal()).await {
        fail(e);
    }
}

#[tokio::main]
async fn main() {
    let mut cert_dir: Option<PathBuf> = None;
    let mut listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9444));
    let mut health: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut stack = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--cert-dir" => cert_dir = args.next().map(PathBuf::from),
            "--listen" => match args.next().and_then(|a| a.parse().ok()) {
                Some(addr) => listen = addr,
                None => usage(),
            },
            "--health-listen" => match args.next().and_then(|a| a.parse().ok()) {
                Some(addr) => health = addr,
                None => usage(),
            },
            "--stack" => stack = true,
            _ => usage(),
        }
    }
    let Some(cert_dir) = cert_dir else { usage() };
    if stack {
        return run_stack(cert_dir, listen, health).await;
    }

    let certs = match CertStore::load_dir(&cert_dir) {
        Ok(c) => Arc::new(c),
        Err(e) => fail(e),
    };
    let config = match tls::server_config(certs) {
        Ok(c) => c,
        Err(e) => fail(e),
    };
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let app = Router::new().fallback(post(|body: Bytes| async move { body }));
    let service = TowerToHyperService::new(app);
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    let listener = match TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => fail(format!("cannot listen on {listen}: {e}")),
    };
    eprintln!("tls_echo listening on {listen}");
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, service, builder) = (acceptor.clone(), service.clone(), builder.clone());
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
