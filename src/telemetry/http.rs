//! A plain-HTTP `/metrics` endpoint on its own thread, for processes without the
//! webhook's health listener (`kuota simulate --metrics-addr`).

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::oneshot;

use super::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum MetricsServerError {
    #[error("cannot start the metrics server's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running `/metrics` server; dropping it stops the server.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (port 0 picks one) and serves `metrics` until dropped.
    pub fn start(addr: SocketAddr, metrics: Metrics) -> Result<Self, MetricsServerError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(MetricsServerError::Runtime)?;
        let std_listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| MetricsServerError::Bind { addr, source })?;
        let bound = std_listener
            .local_addr()
            .map_err(|source| MetricsServerError::Bind { addr, source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let app = Router::new()
            .route("/metrics", get(scrape))
            .with_state(metrics);
        let thread = std::thread::Builder::new()
            .name("metrics-http".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!(error = %e, "metrics listener");
                            return;
                        }
                    };
                    let shutdown = async {
                        let _ = stopped.await;
                    };
                    if let Err(e) = axum::serve(listener, app)
                        .with_graceful_shutdown(shutdown)
                        .await
                    {
                        tracing::error!(error = %e, "metrics server failed");
                    }
                });
            })
            .map_err(MetricsServerError::Runtime)?;
        Ok(Self {
            addr: bound,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Blocks until the server thread ends (it does not by itself: for a process
    /// that serves until it is killed).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn scrape(
    State(metrics): State<Metrics>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
    // Encoding reads counters and an Arc'd snapshot: it never waits for the engine.
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, body) = super::metrics::negotiate(accept, metrics.encode());
    ([(header::CONTENT_TYPE, content_type)], body)
}
