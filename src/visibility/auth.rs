//! Delegated authentication and authorization, as Kubernetes aggregated API servers do it:
//! the API server's front proxy presents a client certificate signed by the request-header
//! CA (with a name from `requestheader-allowed-names`) and names the caller in
//! `X-Remote-User`, `X-Remote-Group` and `X-Remote-Extra-*`; the caller's rights are then
//! asked of the API server with a `SubjectAccessReview`, and its answer kept for a few
//! seconds, as the generic API server's delegating authorizer does.
//!
//! The CA, the allowed names and the header names come from the ConfigMap the API server
//! publishes for aggregated servers, `kube-system/extension-apiserver-authentication`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;

use super::api::GroupVersion;
use crate::controller::pending::PendingTarget;

/// The ConfigMap that carries the front proxy's settings, and its namespace.
pub const AUTH_CONFIG_MAP: (&str, &str) = ("kube-system", "extension-apiserver-authentication");

/// How long an authorization answer is reused (the generic API server's default for both
/// allowed and denied answers).
const DECISION_TTL: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read ConfigMap kube-system/extension-apiserver-authentication: {0}")]
    Read(#[source] kube::Error),
    #[error(
        "ConfigMap kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: \
         the API server runs without --requestheader-client-ca-file, so it has no front proxy to trust"
    )]
    NoClientCa,
    #[error("ConfigMap kube-system/extension-apiserver-authentication: {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error("the request-header client CA cannot verify client certificates: {0}")]
    Verifier(String),
    #[error("SubjectAccessReview failed: {0}")]
    Review(#[source] kube::Error),
}

/// The front proxy's settings (the API server's `--requestheader-*` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    pub client_ca_pem: String,
    /// Common names a front-proxy certificate may carry; empty means any the CA signed.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// Reads the ConfigMap's data (its lists are JSON arrays of strings).
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, AuthError> {
        let list = |key: &'static str, default: &[&str]| -> Result<Vec<String>, AuthError> {
            match data.get(key) {
                None => Ok(default.iter().map(|s| s.to_string()).collect()),
                Some(v) if v.trim().is_empty() => Ok(Vec::new()),
                Some(v) => serde_json::from_str(v).map_err(|e| AuthError::Invalid {
                    key,
                    reason: format!("not a JSON list of strings: {e}"),
                }),
            }
        };
        let client_ca_pem = data
            .get("requestheader-client-ca-file")
            .filter(|v| !v.trim().is_empty())
            .ok_or(AuthError::NoClientCa)?
            .clone();
        Ok(Self {
            client_ca_pem,
            allowed_names: list("requestheader-allowed-names", &[])?,
            username_headers: list("requestheader-username-headers", &["X-Remote-User"])?,
            uid_headers: list("requestheader-uid-headers", &[])?,
            group_headers: list("requestheader-group-headers", &["X-Remote-Group"])?,
            extra_prefixes: list("requestheader-extra-headers-prefix", &["X-Remote-Extra-"])?,
        })
    }

    /// Reads the API server's published settings.
    pub async fn load(client: &kube::Client) -> Result<Self, AuthError> {
        let (ns, name) = AUTH_CONFIG_MAP;
        let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .map_err(AuthError::Read)?;
        Self::from_data(&cm.data.unwrap_or_default())
    }

    /// A verifier that accepts certificates the request-header CA signed, and lets a
    /// connection without one through (it is refused per request, with a Status).
    pub fn client_verifier(&self) -> Result<Arc<dyn ClientCertVerifier>, AuthError> {
        let mut roots = rustls::RootCertStore::empty();
        let mut reader = std::io::BufReader::new(self.client_ca_pem.as_bytes());
        for cert in rustls_pemfile_certs(&mut reader)? {
            roots
                .add(cert)
                .map_err(|e| AuthError::Verifier(e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| AuthError::Verifier(e.to_string()))
    }

    /// Whether a verified front-proxy certificate with common name `cn` may name callers.
    pub fn allows(&self, cn: &str) -> bool {
        self.allowed_names.is_empty() || self.allowed_names.iter().any(|n| n == cn)
    }

    /// The caller the front proxy names, if it names one.
    pub fn identity(&self, headers: &HeaderMap) -> Option<Identity> {
        let first = |names: &[String]| {
            names.iter().find_map(|h| {
                headers
                    .get(h.as_str())
                    .and_then(|v| v.to_str().ok())
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
            })
        };
        let user = first(&self.username_headers)?;
        let uid = first(&self.uid_headers);
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let lower = name.as_str();
            let key = self.extra_prefixes.iter().find_map(|p| {
                lower
                    .strip_prefix(p.to_ascii_lowercase().as_str())
                    .filter(|k| !k.is_empty())
            });
            if let (Some(key), Ok(v)) = (key, value.to_str()) {
                extra
                    .entry(unescape_extra_key(key))
                    .or_default()
                    .push(v.to_string());
            }
        }
        Some(Identity {
            user,
            uid,
            groups,
            extra,
        })
    }
}

/// The certificates of a PEM bundle (through rustls-pki-types' PEM reader).
fn rustls_pemfile_certs(
    reader: &mut dyn std::io::BufRead,
) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, AuthError> {
    use rustls_pki_types::pem::PemObject;
    let mut pem = Vec::new();
    reader
        .read_to_end(&mut pem)
        .map_err(|e| AuthError::Verifier(e.to_string()))?;
    let certs: Vec<_> = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| AuthError::Invalid {
            key: "requestheader-client-ca-file",
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(AuthError::Invalid {
            key: "requestheader-client-ca-file",
            reason: "no certificate in it".into(),
        });
    }
    Ok(certs)
}

/// Extra keys travel percent-encoded in header names (apiserver's requestheader
/// `unescapeExtraKey`).
fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
        match (bytes[i], hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Who the front proxy says is asking.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub user: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The resource attributes a page is authorized with: verb `get` on the queue's
/// `pendingworkloads` subresource, as Kueue's viewer ClusterRoles grant it.
pub fn attributes(version: GroupVersion, target: &PendingTarget) -> ResourceAttributes {
    let (resource, namespace, name) = match target {
        PendingTarget::ClusterQueue(name) => ("clusterqueues", None, name),
        PendingTarget::LocalQueue { namespace, name } => {
            ("localqueues", Some(namespace.clone()), name)
        }
    };
    ResourceAttributes {
        verb: Some("get".into()),
        group: Some(version.group.name.into()),
        version: Some(version.version.to_string()),
        resource: Some(resource.into()),
        subresource: Some("pendingworkloads".into()),
        namespace,
        name: Some(name.clone()),
        ..Default::default()
    }
}

/// Asks the API server whether a caller may do something, reusing recent answers.
#[derive(Clone)]
pub struct Authorizer {
    client: kube::Client,
    /// (caller, attributes as JSON) -> (allowed, reason).
    decisions: moka::sync::Cache<(Identity, String), (bool, String)>,
}

impl Authorizer {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            decisions: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(DECISION_TTL)
                .build(),
        }
    }

    /// Whether `who` may do `attrs`, and the authorizer's reason.
    pub async fn allowed(
        &self,
        who: &Identity,
        attrs: ResourceAttributes,
    ) -> Result<(bool, String), AuthError> {
        let key = (
            who.clone(),
            serde_json::to_string(&attrs).unwrap_or_default(),
        );
        if let Some(hit) = self.decisions.get(&key) {
            return Ok(hit);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(who.user.clone()),
                uid: who.uid.clone(),
                groups: Some(who.groups.clone()),
                extra: Some(who.extra.clone()),
                resource_attributes: Some(attrs),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(AuthError::Review)?;
        let status = answer.status.unwrap_or_default();
        let decision = (
            status.allowed && !status.denied.unwrap_or(false),
            status.reason.unwrap_or_default(),
        );
        self.decisions.insert(key, decision.clone());
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_the_published_front_proxy_settings() {
        let c = RequestHeaderConfig::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
            ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#,
            ),
        ]))
        .unwrap();
        assert!(c.allows("front-proxy-client"));
        assert!(!c.allows("someone-else"));
        assert!(matches!(
            RequestHeaderConfig::from_data(&data(&[])),
            Err(AuthError::NoClientCa)
        ));
        let bad = RequestHeaderConfig::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "front-proxy-client"),
        ]));
        assert!(
            matches!(
                bad,
                Err(AuthError::Invalid {
                    key: "requestheader-allowed-names",
                    ..
                })
            ),
            "{bad:?}"
        );
        let c = c.clone();
        assert!(matches!(
            c.client_verifier(),
            Err(AuthError::Invalid { .. })
        ));
    }

    #[test]
    fn the_caller_comes_from_the_request_headers() {
        let c = RequestHeaderConfig::from_data(&data(&[("requestheader-client-ca-file", "PEM")]))
            .unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(c.identity(&h), None);
        h.insert("x-remote-user", "alice".parse().unwrap());
        h.append("x-remote-group", "team-a".parse().unwrap());
        h.append("x-remote-group", "system:authenticated".parse().unwrap());
        h.append("x-remote-extra-scopes%2fa", "x".parse().unwrap());
        let who = c.identity(&h).unwrap();
        assert_eq!(who.user, "alice");
        assert_eq!(who.groups, ["team-a", "system:authenticated"]);
        assert_eq!(who.extra["scopes/a"], ["x"]);
    }
}
