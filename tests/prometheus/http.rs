//! Minimal clients for the test: plain HTTP GETs (Prometheus' API, `/metrics`) and
//! admission reviews POSTed over TLS to `kuota serve`.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::net::TcpStream;

/// The serving certificate's DNS name (`kuota certs` defaults).
pub const SERVER_NAME: &str = "kuota-webhook.kuota-system.svc";

/// Percent-encodes a query parameter value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// GET `path` (with query) on `addr`; returns (status, body).
pub async fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let tcp = TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .map_err(std::io::Error::other)?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(std::io::Error::other)?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// POSTs `body` to `path` on the webhook's TLS port; returns the HTTP status.
pub async fn post_tls(addr: SocketAddr, ca_pem: &str, path: &str, body: Vec<u8>) -> u16 {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("ca pem"))
        .expect("ca");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(SERVER_NAME).expect("name");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("tls");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let req = Request::post(path)
        .header("host", SERVER_NAME)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    resp.status().as_u16()
}
