//! `kuota serve --local-webhooks[=HOST]`: kuota run outside the cluster (a developer's or
//! an evaluator's machine) registers itself with the API server for as long as it runs.
//!
//! At start it writes the webhook configurations of the shipped install
//! (`manifests/base/*-webhook.yaml`, compiled in, so every entry and rule is the one users
//! install) under names of their own, each entry's `clientConfig` turned from the
//! in-cluster Service to `https://HOST:PORT<path>` with the local CA as `caBundle`, and
//! points the conversion webhook of every kuota CRD at `https://HOST:PORT/convert`. On
//! exit (SIGINT, SIGTERM, or any other way `kuota serve` stops) it deletes the two
//! configurations it created and puts back each CRD's `spec.conversion` as it found it.
//!
//! It refuses to start beside an installed kuota (the shipped configurations exist): both
//! would admit the same jobs, and the installed one's caBundle injection would take the
//! CRDs' conversion back. It works with the caller's own kubeconfig, which must be allowed
//! to create and delete webhook configurations and patch CRDs (docs/install.md).

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::crds::inject::{MUTATING_CONFIGURATION, VALIDATING_CONFIGURATION};
use crate::webhook::certs::{self, CertsArgs};

/// Name of the local run's MutatingWebhookConfiguration (never the shipped one's).
pub const LOCAL_MUTATING: &str = "kuota-local-mutating-webhook";
/// Name of the local run's ValidatingWebhookConfiguration.
pub const LOCAL_VALIDATING: &str = "kuota-local-validating-webhook";
/// The label that marks both (`app.kubernetes.io/managed-by`).
pub const MANAGED_BY: &str = "kuota-local-webhooks";
/// The annotation on a CRD, while a local run holds its conversion, with the conversion
/// to give back (JSON): what a run killed before it could clean up leaves for the next.
pub const ORIGINAL_CONVERSION: &str = "kuota.dev/local-webhooks-original-conversion";
const ANNOTATION_PATH: &str = "/metadata/annotations/kuota.dev~1local-webhooks-original-conversion";
/// The host the API server dials when `--local-webhooks` names none: a control plane on
/// this machine.
pub const DEFAULT_HOST: &str = "127.0.0.1";

const MUTATING_MANIFEST: &str = include_str!("../../manifests/base/mutating-webhook.yaml");
const VALIDATING_MANIFEST: &str = include_str!("../../manifests/base/validating-webhook.yaml");

/// Why the local registration could not be made (nothing of it is left behind).
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A compiled-in manifest does not decode (a bug caught by the unit tests).
    #[error("manifests/base/{file}: {reason}")]
    Manifest { file: &'static str, reason: String },
    /// The certificates in --cert-dir could not be made or do not fit.
    #[error("--local-webhooks certificates in {dir}: {reason}")]
    Certs { dir: String, reason: String },
    /// kuota is installed in this cluster.
    #[error(
        "kuota is installed in this cluster ({kind} {name} exists): a local kuota beside it would \
         admit the same jobs twice, and the installed one's caBundle injection would take the \
         CRDs' conversion back. Use a cluster without kuota, or uninstall it first \
         (kubectl delete -k manifests/)"
    )]
    Installed { kind: &'static str, name: String },
    /// kuota's CRDs are not installed.
    #[error(
        "kuota's CRDs are not installed ({missing}): install them first with \
         `kubectl apply --server-side -k manifests/crds` (or `kuota crds | kubectl apply --server-side -f -`)"
    )]
    NoCrds { missing: String },
    /// The API server refused a call.
    #[error("{what} {name}: {source}")]
    Api {
        what: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// No Kubernetes client (no kubeconfig).
    #[error("--local-webhooks needs a kubeconfig (KUBECONFIG or ~/.kube/config)")]
    NoClient,
}

/// Where the API server reaches this process.
#[derive(Debug, Clone)]
pub struct Target {
    /// `https://HOST:PORT`, no trailing slash.
    pub base_url: String,
    /// PEM of the CA that signed the serving certificate.
    pub ca_pem: Vec<u8>,
}

impl Target {
    /// The target for `host` (a DNS name or an IP address) and the webhook's `port`.
    pub fn new(host: &str, port: u16, ca_pem: Vec<u8>) -> Self {
        let host = match host.parse::<std::net::Ipv6Addr>() {
            Ok(_) => format!("[{host}]"),
            Err(_) => host.to_string(),
        };
        Self {
            base_url: format!("https://{host}:{port}"),
            ca_pem,
        }
    }
}

/// Makes sure `dir` holds a serving certificate for `host` signed by a CA kept beside it,
/// as `kuota certs --out-dir DIR --extra-san HOST` does (idempotent: a good pair is kept),
/// and returns the CA's PEM. A directory with a certificate but no CA key (a copied
/// Secret) is used as it is, if it covers `host`.
pub fn ensure_certs(dir: &Path, host: &str) -> Result<Vec<u8>, LocalError> {
    let err = |reason: String| LocalError::Certs {
        dir: dir.display().to_string(),
        reason,
    };
    let has_cert = dir.join(crate::webhook::tls::CERT_FILE).exists();
    if has_cert && !dir.join(certs::CA_KEY_FILE).exists() {
        let ca_path = dir.join(crate::webhook::tls::CA_FILE);
        let ca = std::fs::read(&ca_path)
            .map_err(|e| err(format!("{}: {e} (the caBundle)", ca_path.display())))?;
        let pem = std::fs::read_to_string(dir.join(crate::webhook::tls::CERT_FILE))
            .map_err(|e| err(e.to_string()))?;
        let info = certs::PemPair {
            cert_pem: pem,
            key_pem: String::new(),
        }
        .info()
        .map_err(|e| err(e.to_string()))?;
        let covered = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => info.ip_addresses.contains(&ip),
            Err(_) => info.dns_names.iter().any(|n| n == host),
        };
        if !covered {
            return Err(err(format!(
                "tls.crt does not cover {host}; make one with `kuota certs --out-dir DIR --extra-san {host}`"
            )));
        }
        return Ok(ca);
    }
    let mut args = CertsArgs::new(dir);
    args.extra_sans = vec![host.to_string()];
    let outcome = certs::ensure(&args).map_err(|e| err(e.to_string()))?;
    Ok(outcome.ca_pair.cert_pem.into_bytes())
}

/// The shipped webhook configurations, renamed and pointed at `target`.
pub fn configurations(
    target: &Target,
) -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration), LocalError> {
    let mut m: MutatingWebhookConfiguration = manifest("mutating-webhook.yaml", MUTATING_MANIFEST)?;
    let mut v: ValidatingWebhookConfiguration =
        manifest("validating-webhook.yaml", VALIDATING_MANIFEST)?;
    relabel(&mut m.metadata, LOCAL_MUTATING);
    relabel(&mut v.metadata, LOCAL_VALIDATING);
    for w in m.webhooks.iter_mut().flatten() {
        point_at(&mut w.client_config, target, "mutating-webhook.yaml")?;
    }
    for w in v.webhooks.iter_mut().flatten() {
        point_at(&mut w.client_config, target, "validating-webhook.yaml")?;
    }
    Ok((m, v))
}

fn manifest<T: serde::de::DeserializeOwned>(
    file: &'static str,
    text: &str,
) -> Result<T, LocalError> {
    serde_norway::from_str(text).map_err(|e| LocalError::Manifest {
        file,
        reason: e.to_string(),
    })
}

fn relabel(meta: &mut kube::api::ObjectMeta, name: &str) {
    meta.name = Some(name.to_string());
    meta.annotations = None;
    meta.labels
        .get_or_insert_with(Default::default)
        .insert("app.kubernetes.io/managed-by".into(), MANAGED_BY.into());
}

fn point_at(
    config: &mut WebhookClientConfig,
    target: &Target,
    file: &'static str,
) -> Result<(), LocalError> {
    let path = config
        .service
        .take()
        .and_then(|s| s.path)
        .ok_or(LocalError::Manifest {
            file,
            reason: "a webhook entry names no Service path".into(),
        })?;
    config.url = Some(format!("{}{path}", target.base_url));
    config.ca_bundle = Some(ByteString(target.ca_pem.clone()));
    Ok(())
}

/// The CRD conversion the local run sets: `target`'s `/convert` with its CA.
pub fn conversion(target: &Target) -> Value {
    let hook = crate::crds::ConversionWebhook::at_url(
        format!("{}{}", target.base_url, crate::crds::CONVERT_PATH),
        target.ca_pem.clone(),
    );
    serde_json::to_value(crate::crds::conversion_spec(&hook)).unwrap_or(Value::Null)
}

/// What the local run changed in the cluster, to be undone on exit.
pub struct Registered {
    client: Client,
    /// (kind, name, uid) of each configuration created.
    created: Vec<(&'static str, String, Option<String>)>,
    /// Each CRD whose conversion was changed: its name, its conversion as found, and the
    /// URL set (undone only while the CRD still points there).
    crds: Vec<(String, Value, String)>,
}

/// Before anything starts: the client, the checks of [`preflight`], and the certificates
/// of [`ensure_certs`]; returns the CA's PEM.
pub async fn prepare(
    client: Option<&Client>,
    cert_dir: &Path,
    host: &str,
) -> Result<Vec<u8>, LocalError> {
    preflight(client.ok_or(LocalError::NoClient)?).await?;
    ensure_certs(cert_dir, host)
}

/// A registration shared by the stop signal and the server's end: whichever comes first
/// undoes it, the other finds nothing left to do.
#[derive(Clone, Default)]
pub struct Held(Arc<tokio::sync::Mutex<Option<Registered>>>);

impl Held {
    /// Undoes the registration, once.
    pub async fn undo(&self) {
        let taken = self.0.lock().await.take();
        if let Some(done) = taken {
            done.undo().await;
        }
    }
}

/// [`register`], held for [`Held::undo`].
pub async fn hold(client: Option<&Client>, target: &Target) -> Result<Held, LocalError> {
    let done = register(client.ok_or(LocalError::NoClient)?, target).await?;
    Ok(Held(Arc::new(tokio::sync::Mutex::new(Some(done)))))
}

/// Registers the webhooks and the CRDs' conversion at `target` (see the module docs).
/// On an error, whatever was already done is undone before returning it.
pub async fn register(client: &Client, target: &Target) -> Result<Registered, LocalError> {
    preflight(client).await?;
    let mut done = Registered {
        client: client.clone(),
        created: Vec::new(),
        crds: Vec::new(),
    };
    let result = async {
        let (m, v) = configurations(target)?;
        done.created
            .push(create_fresh(client, "MutatingWebhookConfiguration", &m).await?);
        done.created
            .push(create_fresh(client, "ValidatingWebhookConfiguration", &v).await?);
        take_conversion(client, target, &mut done.crds).await
    }
    .await;
    match result {
        Ok(()) => {
            info!(
                url = %target.base_url,
                configurations = ?[LOCAL_MUTATING, LOCAL_VALIDATING],
                crds = done.crds.len(),
                "local webhooks registered; removed again when kuota stops"
            );
            Ok(done)
        }
        Err(e) => {
            done.undo().await;
            Err(e)
        }
    }
}

/// Refuses, before anything starts, a cluster where kuota is installed or its CRDs are
/// not.
pub async fn preflight(client: &Client) -> Result<(), LocalError> {
    refuse_beside_installed(client).await?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut missing = Vec::new();
    for name in crd_names() {
        let found = api.get_opt(&name).await.map_err(|source| LocalError::Api {
            what: "CustomResourceDefinition",
            name: name.clone(),
            source,
        })?;
        if found.is_none() {
            missing.push(name);
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(LocalError::NoCrds {
            missing: missing.join(", "),
        })
    }
}

fn crd_names() -> Vec<String> {
    crate::crds::all(None)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect()
}

async fn refuse_beside_installed(client: &Client) -> Result<(), LocalError> {
    let api_err = |what, name: &str| {
        let name = name.to_string();
        move |source| LocalError::Api { what, name, source }
    };
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone());
    if m.get_opt(MUTATING_CONFIGURATION)
        .await
        .map_err(api_err(
            "MutatingWebhookConfiguration",
            MUTATING_CONFIGURATION,
        ))?
        .is_some()
    {
        return Err(LocalError::Installed {
            kind: "MutatingWebhookConfiguration",
            name: MUTATING_CONFIGURATION.into(),
        });
    }
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    if v.get_opt(VALIDATING_CONFIGURATION)
        .await
        .map_err(api_err(
            "ValidatingWebhookConfiguration",
            VALIDATING_CONFIGURATION,
        ))?
        .is_some()
    {
        return Err(LocalError::Installed {
            kind: "ValidatingWebhookConfiguration",
            name: VALIDATING_CONFIGURATION.into(),
        });
    }
    Ok(())
}

/// Creates `obj`, first deleting one of the same name left by an earlier local run that
/// could not clean up (killed with SIGKILL): its URL may point at nothing.
async fn create_fresh<K>(
    client: &Client,
    what: &'static str,
    obj: &K,
) -> Result<(&'static str, String, Option<String>), LocalError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let api_err = |source| LocalError::Api {
        what,
        name: name.clone(),
        source,
    };
    let api: Api<K> = Api::all(client.clone());
    if api.get_opt(&name).await.map_err(api_err)?.is_some() {
        warn!(%what, %name, "replacing the registration an earlier local run left behind");
        api.delete(&name, &DeleteParams::default())
            .await
            .map_err(api_err)?;
    }
    let created = api
        .create(&PostParams::default(), obj)
        .await
        .map_err(api_err)?;
    Ok((what, name.clone(), created.meta().uid.clone()))
}

/// Points every kuota CRD's conversion at `target`, remembering what each had.
async fn take_conversion(
    client: &Client,
    target: &Target,
    out: &mut Vec<(String, Value, String)>,
) -> Result<(), LocalError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let names = crd_names();
    let mut live = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        let api_err = |source| LocalError::Api {
            what: "CustomResourceDefinition",
            name: name.clone(),
            source,
        };
        match api.get_opt(&name).await.map_err(api_err)? {
            Some(crd) => live.push((name, crd)),
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        return Err(LocalError::NoCrds {
            missing: missing.join(", "),
        });
    }
    let ours = conversion(target);
    let url = ours["webhook"]["clientConfig"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for (name, crd) in live {
        let found = serde_json::to_value(&crd.spec.conversion).unwrap_or(Value::Null);
        // The conversion to give back: the one found, unless an earlier local run that
        // could not clean up (SIGKILL) noted the original on the CRD.
        let original = crd
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ORIGINAL_CONVERSION))
            .and_then(|v| serde_json::from_str::<Value>(v).ok())
            .unwrap_or_else(|| found.clone());
        let note = Value::from(original.to_string());
        let annotate = match crd.metadata.annotations {
            Some(_) => json!({"op": "add", "path": ANNOTATION_PATH, "value": note}),
            None => json!({"op": "add", "path": "/metadata/annotations",
                           "value": {(ORIGINAL_CONVERSION): note}}),
        };
        // Guarded by a test of what was read: a concurrent change fails the patch
        // instead of being overwritten unseen.
        let ops = if found.is_null() {
            json!([{"op": "add", "path": "/spec/conversion", "value": ours}, annotate])
        } else {
            json!([
                {"op": "test", "path": "/spec/conversion", "value": found},
                {"op": "replace", "path": "/spec/conversion", "value": ours},
                annotate,
            ])
        };
        json_patch_crd(&api, &name, ops).await?;
        out.push((name, original, url.clone()));
    }
    Ok(())
}

async fn json_patch_crd(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    ops: Value,
) -> Result<(), LocalError> {
    let api_err = |source| LocalError::Api {
        what: "CustomResourceDefinition",
        name: name.to_string(),
        source,
    };
    let patch: json_patch::Patch =
        serde_json::from_value(ops).map_err(|e| api_err(kube::Error::SerdeError(e)))?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(api_err)?;
    Ok(())
}

impl Registered {
    /// Deletes the configurations created (those still the ones created) and gives each
    /// CRD back the conversion it had (those still pointing at this run). Failures are
    /// logged, with what is left behind, and do not stop the rest.
    pub async fn undo(self) {
        for (what, name, uid) in &self.created {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            let outcome = match *what {
                "MutatingWebhookConfiguration" => {
                    Api::<MutatingWebhookConfiguration>::all(self.client.clone())
                        .delete(name, &dp)
                        .await
                        .map(|_| ())
                }
                _ => Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
                    .delete(name, &dp)
                    .await
                    .map(|_| ()),
            };
            match outcome {
                Ok(()) => info!(%what, %name, "local webhook configuration deleted"),
                Err(e) => {
                    warn!(%what, %name, error = %e, "could not delete the local webhook configuration; delete it by hand")
                }
            }
        }
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for (name, found, url) in &self.crds {
            let restore = if found.is_null() {
                json!({"op": "remove", "path": "/spec/conversion"})
            } else {
                json!({"op": "replace", "path": "/spec/conversion", "value": found})
            };
            let ops = json!([
                {"op": "test", "path": "/spec/conversion/webhook/clientConfig/url", "value": url},
                restore,
                {"op": "remove", "path": ANNOTATION_PATH},
            ]);
            match json_patch_crd(&api, name, ops).await {
                Ok(()) => info!(crd = %name, "conversion restored"),
                Err(e) => {
                    warn!(crd = %name, error = %e, "could not restore the CRD's conversion (changed meanwhile?); check spec.conversion")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD as BASE64;

    use super::*;

    fn target() -> Target {
        Target::new("127.0.0.1", 19443, b"CA".to_vec())
    }

    #[test]
    fn every_shipped_entry_is_registered_at_the_local_url_with_the_ca() {
        let (m, v) = configurations(&target()).expect("configurations");
        let shipped_m: MutatingWebhookConfiguration =
            serde_norway::from_str(MUTATING_MANIFEST).expect("mutating");
        let shipped_v: ValidatingWebhookConfiguration =
            serde_norway::from_str(VALIDATING_MANIFEST).expect("validating");
        assert_eq!(m.metadata.name.as_deref(), Some(LOCAL_MUTATING));
        assert_eq!(v.metadata.name.as_deref(), Some(LOCAL_VALIDATING));
        let (mw, vw) = (m.webhooks.unwrap(), v.webhooks.unwrap());
        let (sm, sv) = (shipped_m.webhooks.unwrap(), shipped_v.webhooks.unwrap());
        assert_eq!(mw.len(), sm.len());
        assert_eq!(vw.len(), sv.len());
        assert!(mw.len() + vw.len() > 30, "every entry of the install");
        for (local, shipped) in mw.iter().zip(&sm) {
            let path = shipped.client_config.service.as_ref().unwrap().path.clone();
            assert_eq!(
                local.client_config.url,
                Some(format!("https://127.0.0.1:19443{}", path.unwrap()))
            );
            assert_eq!(local.client_config.service, None);
            assert_eq!(
                local.client_config.ca_bundle,
                Some(ByteString(b"CA".to_vec()))
            );
            // Everything else is the shipped entry's.
            let mut same = local.clone();
            same.client_config = shipped.client_config.clone();
            assert_eq!(&same, shipped);
        }
        for (local, shipped) in vw.iter().zip(&sv) {
            assert!(
                local
                    .client_config
                    .url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("https://127.0.0.1:19443/"))
            );
            let mut same = local.clone();
            same.client_config = shipped.client_config.clone();
            assert_eq!(&same, shipped);
        }
    }

    #[test]
    fn an_ipv6_host_is_bracketed_and_conversion_goes_to_convert() {
        let t = Target::new("::1", 9443, b"CA".to_vec());
        assert_eq!(t.base_url, "https://[::1]:9443");
        let c = conversion(&t);
        assert_eq!(c["strategy"], "Webhook");
        assert_eq!(
            c["webhook"]["clientConfig"]["url"],
            "https://[::1]:9443/convert"
        );
        assert_eq!(
            c["webhook"]["clientConfig"]["caBundle"],
            BASE64.encode(b"CA")
        );
        assert!(c["webhook"]["clientConfig"].get("service").is_none());
    }

    #[test]
    fn certificates_are_made_for_the_host_and_kept_when_good() {
        let dir = std::env::temp_dir().join(format!("kuota-local-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ca = ensure_certs(&dir, "10.1.2.3").expect("made");
        assert!(String::from_utf8_lossy(&ca).contains("BEGIN CERTIFICATE"));
        assert_eq!(
            ensure_certs(&dir, "10.1.2.3").expect("kept"),
            ca,
            "the same CA"
        );
        // A copied Secret (no CA key) must already cover the host.
        std::fs::remove_file(dir.join(certs::CA_KEY_FILE)).expect("rm ca.key");
        assert_eq!(ensure_certs(&dir, "10.1.2.3").expect("as is"), ca);
        let e = ensure_certs(&dir, "10.9.9.9").expect_err("not covered");
        assert!(e.to_string().contains("does not cover 10.9.9.9"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
