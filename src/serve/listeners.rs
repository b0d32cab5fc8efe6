//! Where `kuota serve` listens: each listener from its flag, else from the Configuration
//! file (Kueue's `webhook`, `metrics` and `health` sections), else kuota's default.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::{Bind, Listeners};
use crate::webhook::server::{
    DEFAULT_CERT_DIR, DEFAULT_HEALTH_LISTEN, DEFAULT_LISTEN, MetricsListen, ServerConfig,
};

/// The listener flags of `kuota serve`; each overrides the Configuration's field.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ListenerFlags {
    /// Address of the TLS admission listener [file: webhook.host/port; default 0.0.0.0:9443].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Address of the plain-HTTP probe listener [file: health.healthProbeBindAddress;
    /// default 0.0.0.0:8080].
    #[arg(long)]
    pub health_listen: Option<SocketAddr>,
    /// Address of a plain-HTTP listener for /metrics alone [file: metrics.bindAddress;
    /// default: /metrics on the probe listener]. `0` turns /metrics off.
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Directory holding tls.crt and tls.key (a mounted kubernetes.io/tls Secret)
    /// [file: webhook.certDir; default /certs].
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,
}

/// Where the visibility API listens: `flag` (`--visibility-listen`, an address or `off`),
/// else the Configuration's `visibilityServer`, else nowhere.
pub async fn visibility(
    flag: Option<Option<SocketAddr>>,
    file: &Listeners,
) -> Result<Option<SocketAddr>, ListenError> {
    match (flag, &file.visibility) {
        (Some(flag), _) => Ok(flag),
        (None, Some(addr)) => lookup("visibilityServer.bindAddress/bindPort", addr)
            .await
            .map(Some),
        (None, None) => Ok(None),
    }
}

/// Why a listener address is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("{what} {addr:?}: cannot resolve to an address: {reason}")]
    Resolve {
        what: &'static str,
        addr: String,
        reason: String,
    },
    #[error(
        "health.healthProbeBindAddress turns the probe listener off, which kuota needs: its readiness gates the webhook Service; set --health-listen or an address"
    )]
    HealthOff,
}

/// `config` with its listeners and certificate directory set from `flags`, then `file`,
/// then kuota's defaults.
pub async fn resolve(
    flags: &ListenerFlags,
    file: &Listeners,
    mut config: ServerConfig,
) -> Result<ServerConfig, ListenError> {
    config.listen = match (flags.listen, &file.webhook) {
        (Some(addr), _) => addr,
        (None, Some(addr)) => lookup("webhook.host/port", addr).await?,
        (None, None) => DEFAULT_LISTEN,
    };
    config.health_listen = match (flags.health_listen, &file.health) {
        (Some(addr), _) => addr,
        (None, Some(Bind::Off)) => return Err(ListenError::HealthOff),
        (None, Some(Bind::Addr(addr))) => lookup("health.healthProbeBindAddress", addr).await?,
        (None, None) => DEFAULT_HEALTH_LISTEN,
    };
    let metrics = match (&flags.metrics_listen, &file.metrics) {
        (Some(flag), _) if flag == "0" => Bind::Off,
        (Some(flag), _) => Bind::Addr(flag.clone()),
        (None, Some(bind)) => bind.clone(),
        (None, None) => Bind::Addr(String::new()),
    };
    config.metrics = match metrics {
        Bind::Off => MetricsListen::Off,
        Bind::Addr(a) if a.is_empty() => MetricsListen::OnHealth,
        Bind::Addr(a) => match lookup("metrics.bindAddress", &a).await? {
            addr if addr == config.health_listen => MetricsListen::OnHealth,
            addr => MetricsListen::Separate(addr),
        },
    };
    config.cert_dir = flags
        .cert_dir
        .clone()
        .or_else(|| file.cert_dir.clone())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CERT_DIR));
    let path =
        |name: &Option<String>, default: &str| format!("/{}", name.as_deref().unwrap_or(default));
    config.readiness_path = path(&file.readiness_endpoint, "readyz");
    config.liveness_path = path(&file.liveness_endpoint, "healthz");
    Ok(config)
}

/// A Go bind address as a socket address: an empty host (`:8080`) is every interface.
async fn lookup(what: &'static str, addr: &str) -> Result<SocketAddr, ListenError> {
    let full = match addr.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => addr.to_string(),
    };
    let err = |reason: String| ListenError::Resolve {
        what,
        addr: addr.to_string(),
        reason,
    };
    let mut found = tokio::net::lookup_host(full.as_str())
        .await
        .map_err(|e| err(e.to_string()))?;
    found.next().ok_or_else(|| err("no address".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ServerConfig {
        ServerConfig::local("/unused")
    }

    #[tokio::test]
    async fn flags_override_the_file_which_overrides_the_defaults() {
        let file = Listeners {
            webhook: Some(":9444".to_string()),
            cert_dir: Some(PathBuf::from("/etc/kuota/certs")),
            metrics: Some(Bind::Addr("127.0.0.1:8443".to_string())),
            health: Some(Bind::Addr(":8081".to_string())),
            readiness_endpoint: Some("ready".to_string()),
            liveness_endpoint: None,
            visibility: Some("127.0.0.1:9082".to_string()),
        };
        let c = resolve(&ListenerFlags::default(), &file, base())
            .await
            .unwrap();
        assert_eq!(c.listen, "0.0.0.0:9444".parse().unwrap());
        assert_eq!(c.health_listen, "0.0.0.0:8081".parse().unwrap());
        assert_eq!(
            c.metrics,
            MetricsListen::Separate("127.0.0.1:8443".parse().unwrap())
        );
        assert_eq!(c.cert_dir, PathBuf::from("/etc/kuota/certs"));
        assert_eq!(
            (c.readiness_path.as_str(), c.liveness_path.as_str()),
            ("/ready", "/healthz")
        );

        let flags = ListenerFlags {
            listen: Some("127.0.0.1:1".parse().unwrap()),
            health_listen: Some("127.0.0.1:2".parse().unwrap()),
            metrics_listen: Some("0".to_string()),
            cert_dir: Some(PathBuf::from("/x")),
        };
        let c = resolve(&flags, &file, base()).await.unwrap();
        assert_eq!(c.listen, "127.0.0.1:1".parse().unwrap());
        assert_eq!(c.health_listen, "127.0.0.1:2".parse().unwrap());
        assert_eq!(c.metrics, MetricsListen::Off);
        assert_eq!(c.cert_dir, PathBuf::from("/x"));

        let c = resolve(&ListenerFlags::default(), &Listeners::default(), base())
            .await
            .unwrap();
        assert_eq!(c.listen, DEFAULT_LISTEN);
        assert_eq!(c.health_listen, DEFAULT_HEALTH_LISTEN);
        assert_eq!(c.metrics, MetricsListen::OnHealth);
        assert_eq!(c.cert_dir, PathBuf::from("/certs"));
        assert_eq!(
            (c.readiness_path.as_str(), c.liveness_path.as_str()),
            ("/readyz", "/healthz")
        );
    }

    #[tokio::test]
    async fn metrics_on_the_probe_address_share_its_listener_and_health_cannot_be_off() {
        let file = Listeners {
            metrics: Some(Bind::Addr(":8080".to_string())),
            health: Some(Bind::Addr(":8080".to_string())),
            ..Listeners::default()
        };
        let c = resolve(&ListenerFlags::default(), &file, base())
            .await
            .unwrap();
        assert_eq!(c.metrics, MetricsListen::OnHealth);
        let off = Listeners {
            health: Some(Bind::Off),
            ..Listeners::default()
        };
        let e = resolve(&ListenerFlags::default(), &off, base())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("healthProbeBindAddress"), "{e}");
        let bad = Listeners {
            webhook: Some("no such host.invalid:1".to_string()),
            ..Listeners::default()
        };
        let e = resolve(&ListenerFlags::default(), &bad, base())
            .await
            .unwrap_err();
        assert!(e.to_string().starts_with("webhook.host/port"), "{e}");
    }

    #[tokio::test]
    async fn the_visibility_listener_comes_from_the_flag_then_the_file_and_is_off_without() {
        let file = Listeners {
            visibility: Some(":8082".to_string()),
            ..Listeners::default()
        };
        let at = |a: &str| Some(a.parse::<SocketAddr>().expect("addr"));
        assert_eq!(visibility(None, &file).await.unwrap(), at("0.0.0.0:8082"));
        let flag = at("127.0.0.1:9");
        assert_eq!(visibility(Some(flag), &file).await.unwrap(), flag);
        assert_eq!(
            visibility(Some(None), &file).await.unwrap(),
            None,
            "--visibility-listen=off"
        );
        assert_eq!(visibility(None, &Listeners::default()).await.unwrap(), None);
        let bad = Listeners {
            visibility: Some("no such host.invalid:1".to_string()),
            ..Listeners::default()
        };
        let e = visibility(None, &bad).await.unwrap_err();
        assert!(e.to_string().starts_with("visibilityServer."), "{e}");
    }
}
