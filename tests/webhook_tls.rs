//! End-to-end tests of the webhook server over real TLS on 127.0.0.1:
//! protocol negotiation, limits, certificate hot reload with open
//! connections, graceful shutdown, and the plain-HTTP probe listener.
//!
//! The client is hyper's connection API over tokio-rustls (ring provider),
//! so each test controls exactly which connection a request travels on.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kuota::webhook::WebhookState;
use kuota::webhook::certs::{self, CertsArgs};
use kuota::webhook::server::{Readiness, ServerConfig, ServerError, WebhookServer};
use kuota::webhook::tls::{self, CertStore, TlsError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The name the API server dials (`<svc>.<ns>.svc`); SNI and verification use it.
const SERVER_NAME: &str = "kuota-webhook.kuota-system.svc";
const REVIEW_PATH: &str = "/validate-batch-v1-job";
const MUTATE_PATH: &str = "/mutate-batch-v1-job";
/// A 5 KB Job AdmissionReview, the same one the load test sends.
const JOB_REVIEW: &str = include_str!("../benches/load/job-review.json");
const TEST_DEADLINE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- fixtures

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!(
            "kuota-webhook-tls-{tag}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The real admission router (cold index, no policies) plus `/test/slow`,
/// which holds a request open to exercise timeouts, queueing and shutdown.
fn app() -> Router {
    kuota::webhook::router(Arc::new(WebhookState::for_tests())).route(
        "/test/slow",
        post(|| async {
            tokio::time::sleep(Duration::from_millis(600)).await;
            "slow done"
        }),
    )
}

struct Running {
    addr: SocketAddr,
    health: SocketAddr,
    certs: Arc<CertStore>,
    ca_pem: String,
    dir: TempDir,
    ready: Arc<AtomicBool>,
    shutdown: Option<oneshot::Sender<()>>,
    handle: JoinHandle<Result<(), ServerError>>,
}

impl Running {
    /// Signals shutdown and waits for `run` to return.
    async fn stop(mut self) -> Duration {
        let started = Instant::now();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(TEST_DEADLINE, &mut self.handle)
            .await
            .expect("server stops in time")
            .expect("server task")
            .expect("server run");
        started.elapsed()
    }
}

fn cert_args(dir: &Path) -> CertsArgs {
    CertsArgs::new(dir)
}

async fn start(tune: impl FnOnce(&mut ServerConfig)) -> Running {
    let dir = TempDir::new("srv");
    let outcome = certs::ensure(&cert_args(&dir.0)).expect("certs");
    let mut config = ServerConfig::local(&dir.0);
    config.cert_reload_interval = Duration::from_millis(100);
    tune(&mut config);
    let ready = Arc::new(AtomicBool::new(true));
    let ready_fn: Readiness = {
        let ready = ready.clone();
        Arc::new(move || ready.load(Ordering::SeqCst))
    };
    let server = WebhookServer::bind(config, app(), ready_fn)
        .await
        .expect("bind");
    let (tx, rx) = oneshot::channel::<()>();
    let (addr, health, certs) = (
        server.local_addr(),
        server.health_addr(),
        server.cert_store(),
    );
    let handle = tokio::spawn(server.run(async {
        let _ = rx.await;
    }));
    Running {
        addr,
        health,
        certs,
        ca_pem: outcome.ca_pair.cert_pem,
        dir,
        ready,
        shutdown: Some(tx),
        handle,
    }
}

// ---------------------------------------------------------------- client

fn client_config(
    ca_pem: &str,
    alpn: &[&[u8]],
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("ca pem"))
        .expect("ca");
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

async fn tls_connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(SERVER_NAME).expect("server name");
    TlsConnector::from(config).connect(name, tcp).await
}

fn peer_serial(stream: &TlsStream<TcpStream>) -> String {
    let certs = stream.get_ref().1.peer_certificates().expect("peer certs");
    tls::CertInfo::from_der(&certs[0]).expect("cert").serial
}

/// A keep-alive HTTP/1.1 connection; requests go out one after another on it.
struct H1 {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    conn: JoinHandle<Result<(), hyper::Error>>,
}

impl H1 {
    async fn open(addr: SocketAddr, ca_pem: &str) -> (Self, String) {
        let config = client_config(ca_pem, &[b"http/1.1"], rustls::DEFAULT_VERSIONS);
        let stream = tls_connect(addr, config).await.expect("tls connect");
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        let serial = peer_serial(&stream);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("h1 handshake");
        (
            Self {
                sender,
                conn: tokio::spawn(conn),
            },
            serial,
        )
    }

    async fn post(&mut self, path: &str, body: impl Into<Bytes>) -> (StatusCode, Bytes) {
        self.sender.ready().await.expect("connection usable");
        let req = Request::post(path)
            .header("host", SERVER_NAME)
            .header("content-type", "application/json")
            .body(Full::new(body.into()))
            .expect("request");
        let resp = self.sender.send_request(req).await.expect("response");
        let status = resp.status();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        (status, body)
    }
}

async fn h2_connect(
    addr: SocketAddr,
    ca_pem: &str,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let config = client_config(ca_pem, &[b"h2"], rustls::DEFAULT_VERSIONS);
    let stream = tls_connect(addr, config).await.expect("tls connect");
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    sender
}

async fn h2_post(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    path: &str,
    body: impl Into<Bytes>,
) -> (StatusCode, Bytes) {
    let req = Request::post(format!("https://{SERVER_NAME}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let status = resp.status();
    (
        status,
        resp.into_body().collect().await.expect("body").to_bytes(),
    )
}

/// Plain HTTP/1.1 GET on the health listener.
async fn http_get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let tcp = TcpStream::connect(addr).await.expect("connect health");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn assert_review_allowed(status: StatusCode, body: &[u8]) {
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(body));
    let review: Value = serde_json::from_slice(body).expect("json response");
    let request: Value = serde_json::from_str(JOB_REVIEW).expect("fixture");
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(review["response"]["uid"], request["request"]["uid"]);
    assert!(review["response"]["allowed"].is_boolean(), "{review}");
}

/// Polls `cond` every 20 ms until it holds or `within` passes.
async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

async fn with_deadline<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_DEADLINE, f)
        .await
        .expect("test deadline")
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn review_over_http1_keep_alive_and_http2() {
    with_deadline(async {
        let srv = start(|_| {}).await;

        let (mut h1, _) = H1::open(srv.addr, &srv.ca_pem).await;
        for _ in 0..3 {
            let (status, body) = h1.post(REVIEW_PATH, JOB_REVIEW).await;
            assert_review_allowed(status, &body);
        }
        assert!(!h1.conn.is_finished(), "keep-alive connection stays open");
        // The mutating path suspends the (unsuspended, queue-labelled) Job.
        let (status, body) = h1.post(MUTATE_PATH, JOB_REVIEW).await;
        assert_review_allowed(status, &body);
        let review: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(review["response"]["patchType"], "JSONPatch", "{review}");
        assert!(review["response"]["patch"].is_string(), "{review}");

        let mut h2 = h2_connect(srv.addr, &srv.ca_pem).await;
        // Several streams at once on the one HTTP/2 connection.
        let mut streams = Vec::new();
        for _ in 0..4 {
            let mut sender = h2.clone();
            streams.push(tokio::spawn(async move {
                h2_post(&mut sender, REVIEW_PATH, JOB_REVIEW).await
            }));
        }
        for s in streams {
            let (status, body) = s.await.expect("stream");
            assert_review_allowed(status, &body);
        }
        let (status, body) = h2_post(&mut h2, REVIEW_PATH, JOB_REVIEW).await;
        assert_review_allowed(status, &body);
        srv.stop().await;
    })
    .await;
}

#[tokio::test]
async fn oversized_body_gets_a_413_review_and_slow_handler_gets_json_504() {
    with_deadline(async {
        const LIMIT: usize = 1024 * 1024;
        let srv = start(|c| {
            c.request_timeout = Duration::from_millis(500);
            c.max_body_bytes = LIMIT;
        })
        .await;
        // A review over the limit: answered as a review that denies with 413, under the
        // request's own uid, so the API server shows the user the reason.
        let mut big = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-413","object":{"x":""#.to_vec();
        big.resize(LIMIT + 4096, b'x');
        let (mut h1, _) = H1::open(srv.addr, &srv.ca_pem).await;
        let (status, body) = h1.post(REVIEW_PATH, big.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let review: Value = serde_json::from_slice(&body).expect("review");
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(review["response"]["uid"], "u-413");
        assert_eq!(review["response"]["allowed"], false);
        assert_eq!(review["response"]["status"]["code"], 413);

        // Over HTTP/2 too; just under the limit is still read (then refused by the
        // handler as not JSON).
        let mut h2 = h2_connect(srv.addr, &srv.ca_pem).await;
        let (status, _) = h2_post(&mut h2, REVIEW_PATH, vec![b'x'; LIMIT - 16]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, body) = h2_post(&mut h2, REVIEW_PATH, big).await;
        assert_eq!(status, StatusCode::OK);
        let review: Value = serde_json::from_slice(&body).expect("review");
        assert_eq!(review["response"]["status"]["code"], 413);
        let (_, metrics) = http_get(srv.health, "/metrics").await;
        assert!(
            metrics.contains("kuota_webhook_oversize_reviews_total 2"),
            "{metrics}"
        );

        let (status, body) = h2_post(&mut h2, "/test/slow", "").await;
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        let err: Value = serde_json::from_slice(&body).expect("json error body");
        assert_eq!(err["code"], 504);
        srv.stop().await;
    })
    .await;
}

#[tokio::test]
async fn only_tls12_and_tls13_are_negotiated() {
    with_deadline(async {
        let srv = start(|_| {}).await;
        for (version, expect) in [
            (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
            (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
        ] {
            let config = client_config(&srv.ca_pem, &[b"http/1.1"], &[version]);
            let stream = tls_connect(srv.addr, config).await.expect("handshake");
            assert_eq!(stream.get_ref().1.protocol_version(), Some(expect));
        }

        // A TLS 1.1 ClientHello (no supported_versions extension) gets an alert.
        let mut tcp = TcpStream::connect(srv.addr).await.expect("connect");
        tcp.write_all(&tls11_client_hello())
            .await
            .expect("write hello");
        let mut reply = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut reply)).await;
        // Alert record (0x15), fatal (2), protocol_version (70).
        assert!(
            reply.len() >= 7,
            "server closed without an alert: {reply:02x?}"
        );
        assert_eq!(
            (reply[0], reply[5], reply[6]),
            (0x15, 2, 70),
            "{reply:02x?}"
        );

        // Garbage instead of a handshake: dropped, and the server keeps serving.
        let mut tcp = TcpStream::connect(srv.addr).await.expect("connect");
        tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut buf = [0u8; 64];
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
        let (mut h1, _) = H1::open(srv.addr, &srv.ca_pem).await;
        let (status, body) = h1.post(REVIEW_PATH, JOB_REVIEW).await;
        assert_review_allowed(status, &body);
        srv.stop().await;
    })
    .await;
}

/// A minimal TLS 1.1 ClientHello (no supported_versions extension) that
/// would otherwise be acceptable: a suite and signature scheme the server has.
fn tls11_client_hello() -> Vec<u8> {
    let mut hello = vec![0x03, 0x02]; // client_version TLS 1.1
    hello.extend_from_slice(&[0x42; 32]); // random
    hello.push(0); // session id
    hello.extend_from_slice(&[0x00, 0x02, 0xc0, 0x2b]); // ECDHE-ECDSA-AES128-GCM, which the server has
    hello.extend_from_slice(&[0x01, 0x00]); // compression: null
    // signature_algorithms: ecdsa_secp256r1_sha256 (rustls requires the
    // extension before it looks at the version).
    hello.extend_from_slice(&[0x00, 0x08, 0x00, 0x0d, 0x00, 0x04, 0x00, 0x02, 0x04, 0x03]);
    let mut handshake = vec![0x01, 0x00];
    handshake.extend_from_slice(&u16::try_from(hello.len()).expect("small").to_be_bytes());
    handshake.extend_from_slice(&hello);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&u16::try_from(handshake.len()).expect("small").to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

#[test]
fn non_p256_keys_and_bad_files_are_refused_with_clear_errors() {
    let dir = TempDir::new("keys");
    let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
    let write = |c: &str, k: &str| {
        std::fs::write(&cert, c).expect("write");
        std::fs::write(&key, k).expect("write");
    };

    for (alg, name) in [
        (
            &rcgen::PKCS_ECDSA_P384_SHA384,
            "ECDSA on curve 1.3.132.0.34",
        ),
        (&rcgen::PKCS_ED25519, "Ed25519"),
    ] {
        let key_pair = rcgen::KeyPair::generate_for(alg).expect("key");
        let c = rcgen::CertificateParams::new(vec![SERVER_NAME.to_string()])
            .expect("params")
            .self_signed(&key_pair)
            .expect("cert");
        write(&c.pem(), &key_pair.serialize_pem());
        let err = tls::load_key_pair(&cert, &key).err().expect("refused");
        assert!(
            matches!(&err, TlsError::UnsupportedCertificateKey { found, .. } if found == name),
            "{err}"
        );
        assert!(err.to_string().contains("ECDSA P-256"), "{err}");
    }

    // An RSA private key (PKCS#1 PEM) is refused before it is parsed.
    let good = certs::ensure(&cert_args(&dir.0.join("good"))).expect("certs");
    write(
        &good.serving_pair.cert_pem,
        "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK==\n-----END RSA PRIVATE KEY-----\n",
    );
    let err = tls::load_key_pair(&cert, &key).err().expect("refused");
    assert!(
        matches!(&err, TlsError::UnsupportedKey { found, .. } if found.contains("RSA")),
        "{err}"
    );
    assert!(err.to_string().contains("ECDSA P-256"), "{err}");

    // A P-256 key from another pair.
    let other = certs::ensure(&cert_args(&dir.0.join("other"))).expect("certs");
    write(&good.serving_pair.cert_pem, &other.serving_pair.key_pem);
    assert!(matches!(
        tls::load_key_pair(&cert, &key),
        Err(TlsError::KeyMismatch { .. })
    ));

    // Garbage, empty and missing files.
    write("not a pem", &good.serving_pair.key_pem);
    assert!(matches!(
        tls::load_key_pair(&cert, &key),
        Err(TlsError::NoCertificate { .. })
    ));
    write(&good.serving_pair.cert_pem, "");
    assert!(matches!(
        tls::load_key_pair(&cert, &key),
        Err(TlsError::Pem { .. })
    ));
    let err = tls::load_key_pair(&dir.0.join("missing.crt"), &key)
        .err()
        .expect("missing");
    assert!(err.to_string().contains("missing.crt"), "{err}");

    // And the good pair loads.
    write(&good.serving_pair.cert_pem, &good.serving_pair.key_pem);
    tls::load_key_pair(&cert, &key).expect("P-256 pair loads");
}

#[tokio::test]
async fn cert_reload_keeps_open_connections_and_new_ones_see_new_serial() {
    with_deadline(async {
        let srv = start(|_| {}).await;
        let (mut h1, old_serial) = H1::open(srv.addr, &srv.ca_pem).await;
        let (status, body) = h1.post(REVIEW_PATH, JOB_REVIEW).await;
        assert_review_allowed(status, &body);
        assert_eq!(old_serial, srv.certs.info().serial);

        // Renew the serving certificate with the same CA, as `kuota certs
        // --rotate-before` does when the old one is inside the window.
        let mut args = cert_args(&srv.dir.0);
        args.rotate_before = Duration::from_secs(400 * 86_400);
        let renewed = certs::ensure(&args).expect("rotate");
        assert_eq!(renewed.serving, certs::Action::Renewed);
        let new_serial = renewed.serving_info.serial.clone();
        assert_ne!(new_serial, old_serial);
        assert!(
            eventually(Duration::from_secs(5), || srv.certs.info().serial
                == new_serial)
            .await,
            "reloaded"
        );

        // The open connection carries on, on the same TLS session.
        for _ in 0..2 {
            let (status, body) = h1.post(REVIEW_PATH, JOB_REVIEW).await;
            assert_review_allowed(status, &body);
        }
        assert!(!h1.conn.is_finished());
        // A new connection is served the new certificate.
        let (mut fresh, serial) = H1::open(srv.addr, &srv.ca_pem).await;
        assert_eq!(serial, new_serial);
        let (status, body) = fresh.post(REVIEW_PATH, JOB_REVIEW).await;
        assert_review_allowed(status, &body);

        // Broken new files are refused and the current certificate stays.
        let errors = srv.certs.reload_errors();
        std::fs::write(
            srv.dir.0.join("tls.crt"),
            "-----BEGIN CERTIFICATE-----\nbroken\n",
        )
        .expect("write");
        assert!(
            eventually(Duration::from_secs(5), || srv.certs.reload_errors()
                > errors)
            .await,
            "bad file noticed"
        );
        let (_, serial) = H1::open(srv.addr, &srv.ca_pem).await;
        assert_eq!(serial, new_serial);
        let (_, metrics) = http_get(srv.health, "/metrics").await;
        assert!(
            metrics.contains("kuota_webhook_cert_reloads_total 1"),
            "{metrics}"
        );
        srv.stop().await;
    })
    .await;
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_and_closes_idle() {
    with_deadline(async {
        let srv = start(|c| c.shutdown_timeout = Duration::from_secs(5)).await;
        let (mut busy, _) = H1::open(srv.addr, &srv.ca_pem).await;
        let (mut idle, _) = H1::open(srv.addr, &srv.ca_pem).await;
        let (status, _) = idle.post(REVIEW_PATH, JOB_REVIEW).await;
        assert_eq!(status, StatusCode::OK);
        let mut h2 = h2_connect(srv.addr, &srv.ca_pem).await;

        let in_flight = tokio::spawn(async move { busy.post("/test/slow", "").await });
        let in_flight_h2 = tokio::spawn(async move { h2_post(&mut h2, "/test/slow", "").await });
        // Let both requests reach the handler before signalling.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let (addr, health) = (srv.addr, srv.health);
        let stopping = tokio::spawn(srv.stop());

        let (status, body) = in_flight.await.expect("task");
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"slow done"[..]));
        let (status, body) = in_flight_h2.await.expect("task");
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"slow done"[..]));
        // The idle keep-alive connection is closed by the server.
        let closed = tokio::time::timeout(Duration::from_secs(5), idle.conn).await;
        assert!(closed.is_ok(), "idle connection closed");

        let took = stopping.await.expect("stop");
        assert!(took < Duration::from_secs(4), "drained promptly: {took:?}");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "no longer accepting"
        );
        assert!(
            TcpStream::connect(health).await.is_err(),
            "health listener stopped"
        );
    })
    .await;
}

#[tokio::test]
async fn health_and_readiness_on_the_plain_listener() {
    with_deadline(async {
        let srv = start(|_| {}).await;
        let (status, body) = http_get(srv.health, "/healthz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
        let (status, body) = http_get(srv.health, "/readyz").await;
        assert_eq!(status, StatusCode::OK, "{body}");

        srv.ready.store(false, Ordering::SeqCst);
        let (status, body) = http_get(srv.health, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let ready: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(ready["indexSynced"], false);
        assert_eq!(ready["certificateLoaded"], true);
        // Liveness does not depend on readiness.
        assert_eq!(http_get(srv.health, "/healthz").await.0, StatusCode::OK);

        let (_, metrics) = http_get(srv.health, "/metrics").await;
        assert!(
            metrics.contains("kuota_webhook_cert_expiry_timestamp_seconds "),
            "{metrics}"
        );
        assert!(
            metrics.contains("kuota_webhook_cert_rotation_due 0"),
            "{metrics}"
        );
        // The TLS port does not speak plain HTTP, and the health port not TLS.
        assert!(
            tls_connect(
                srv.health,
                client_config(&srv.ca_pem, &[b"h2"], rustls::DEFAULT_VERSIONS)
            )
            .await
            .is_err()
        );
        srv.stop().await;
    })
    .await;
}

#[tokio::test]
async fn readiness_turns_off_while_draining() {
    with_deadline(async {
        let srv = start(|c| c.drain_delay = Duration::from_millis(400)).await;
        let (addr, health, ca) = (srv.addr, srv.health, srv.ca_pem.clone());
        let stopping = tokio::spawn(srv.stop());
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, body) = http_get(health, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        // Still accepting during the drain delay (endpoints lag behind readiness).
        let (mut h1, _) = H1::open(addr, &ca).await;
        let (status, body) = h1.post(REVIEW_PATH, JOB_REVIEW).await;
        assert_review_allowed(status, &body);
        stopping.await.expect("stopped");
    })
    .await;
}

#[tokio::test]
async fn overload_queues_for_a_slot_instead_of_failing() {
    with_deadline(async {
        let srv = start(|c| c.max_concurrency = 2).await;
        let h2 = h2_connect(srv.addr, &srv.ca_pem).await;
        let started = Instant::now();
        let mut calls = Vec::new();
        for _ in 0..4 {
            let mut sender = h2.clone();
            calls.push(tokio::spawn(async move {
                h2_post(&mut sender, "/test/slow", "").await
            }));
        }
        for call in calls {
            assert_eq!(call.await.expect("task").0, StatusCode::OK);
        }
        // Two at a time, 600 ms each: the second pair waited for the first.
        assert!(
            started.elapsed() >= Duration::from_millis(1150),
            "{:?}",
            started.elapsed()
        );
        srv.stop().await;
    })
    .await;
}
