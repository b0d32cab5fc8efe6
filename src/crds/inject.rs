//! caBundle injection at start (`kuota serve --inject-ca-bundle`): writes the CA that signed
//! the serving certificate into the webhook configurations, into the conversion webhook
//! of kuota's CRDs and into the visibility API's APIServices, so a plain `kubectl apply -k manifests/` needs no certificate step
//! beyond the Secret. The cert-manager overlay does the same with its CA injector instead.
//!
//! Only objects kuota ships are touched (by name, matching the RBAC's resourceNames), and
//! only their caBundle fields; a value that is already right is left alone, so the loop
//! costs one GET per object per round.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use serde_json::json;

/// The webhook configurations kuota ships (manifests/base/*-webhook.yaml).
pub const MUTATING_CONFIGURATION: &str = "kuota-mutating-webhook";
/// See [`MUTATING_CONFIGURATION`].
pub const VALIDATING_CONFIGURATION: &str = "kuota-validating-webhook";

/// The APIServices of Kueue's visibility API, and of kuota's beside it, that kuota serves
/// (manifests/base/visibility.yaml).
pub const API_SERVICES: [&str; 3] = [
    "v1beta2.visibility.kueue.x-k8s.io",
    "v1beta1.visibility.kueue.x-k8s.io",
    "v1alpha1.visibility.kuota.dev",
];

/// How often the injector checks that the caBundles are still right (a re-applied manifest
/// or a rotated CA are healed within this).
pub const RECHECK: Duration = Duration::from_secs(60);

/// Why a round of injection failed (the loop logs it and tries again).
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The CA file could not be read.
    #[error("reading the CA {}: {source}", path.display())]
    Ca {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The JSON patch did not build (a bug, reported rather than panicking).
    #[error("building the caBundle patch: {0}")]
    Patch(#[source] serde_json::Error),
    /// The API server refused a read or a patch.
    #[error("{what} {name}: {source}")]
    Api {
        /// Kind of object.
        what: &'static str,
        /// Its name.
        name: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
}

/// What one round changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Injected {
    /// Objects whose caBundle was written.
    pub patched: Vec<String>,
    /// Objects not found (not installed, e.g. local runs); nothing to do for them.
    pub missing: Vec<String>,
}

/// One round: sets the caBundle (PEM `ca`) wherever it differs.
pub async fn inject_once(client: &Client, ca: &[u8]) -> Result<Injected, InjectError> {
    let mut out = inject_crds(client, ca).await?;
    for more in [
        inject_configurations(client, ca).await?,
        inject_api_services(client, ca).await?,
    ] {
        out.patched.extend(more.patched);
        out.missing.extend(more.missing);
    }
    Ok(out)
}

/// The conversion webhook's caBundle of every kuota CRD that has one.
pub async fn inject_crds(client: &Client, ca: &[u8]) -> Result<Injected, InjectError> {
    let mut out = Injected::default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in super::all(None).unwrap_or_default() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let api_err = |source| InjectError::Api {
            what: "CustomResourceDefinition",
            name: name.clone(),
            source,
        };
        let Some(live) = crds.get_opt(&name).await.map_err(api_err)? else {
            out.missing.push(name);
            continue;
        };
        let webhook = live
            .spec
            .conversion
            .as_ref()
            .and_then(|c| c.webhook.as_ref());
        let current = webhook
            .and_then(|w| w.client_config.as_ref())
            .and_then(|c| c.ca_bundle.as_ref());
        if webhook.is_none() || current.is_some_and(|b| b.0 == ca) {
            continue;
        }
        let patch = json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": BASE64.encode(ca)}}}}});
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api_err)?;
        out.patched.push(name);
    }
    Ok(out)
}

/// The caBundle of every webhook in kuota's two webhook configurations.
pub async fn inject_configurations(client: &Client, ca: &[u8]) -> Result<Injected, InjectError> {
    let mut out = Injected::default();
    inject_webhooks::<MutatingWebhookConfiguration>(
        client,
        MUTATING_CONFIGURATION,
        ca,
        &mut out,
        |c| {
            c.webhooks
                .iter()
                .flatten()
                .map(|w| w.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()))
                .collect()
        },
    )
    .await?;
    inject_webhooks::<ValidatingWebhookConfiguration>(
        client,
        VALIDATING_CONFIGURATION,
        ca,
        &mut out,
        |c| {
            c.webhooks
                .iter()
                .flatten()
                .map(|w| w.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()))
                .collect()
        },
    )
    .await?;
    Ok(out)
}

/// The caBundle of the visibility API's APIServices, with which the API server checks the
/// serving certificate of the aggregated API.
pub async fn inject_api_services(client: &Client, ca: &[u8]) -> Result<Injected, InjectError> {
    let mut out = Injected::default();
    let api: Api<APIService> = Api::all(client.clone());
    for name in API_SERVICES {
        let api_err = |source| InjectError::Api {
            what: "APIService",
            name: name.to_string(),
            source,
        };
        let Some(live) = api.get_opt(name).await.map_err(api_err)? else {
            out.missing.push(name.to_string());
            continue;
        };
        let current = live.spec.as_ref().and_then(|s| s.ca_bundle.as_ref());
        if current.is_some_and(|b| b.0 == ca) {
            continue;
        }
        let patch = json!({"spec": {"caBundle": BASE64.encode(ca)}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api_err)?;
        out.patched.push(name.to_string());
    }
    Ok(out)
}

/// Sets every webhook's caBundle in one configuration with a JSON patch by index, each
/// guarded by a `test` of the current bundle so a concurrent edit fails rather than lands
/// on the wrong entry.
async fn inject_webhooks<K>(
    client: &Client,
    name: &str,
    ca: &[u8],
    out: &mut Injected,
    bundles: impl Fn(&K) -> Vec<Option<&[u8]>>,
) -> Result<(), InjectError>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let what = if K::kind(&()) == "MutatingWebhookConfiguration" {
        "MutatingWebhookConfiguration"
    } else {
        "ValidatingWebhookConfiguration"
    };
    let api_err = |source| InjectError::Api {
        what,
        name: name.to_string(),
        source,
    };
    let Some(live) = api.get_opt(name).await.map_err(api_err)? else {
        out.missing.push(name.to_string());
        return Ok(());
    };
    let encoded = BASE64.encode(ca);
    let mut ops = Vec::new();
    for (i, current) in bundles(&live).into_iter().enumerate() {
        if current == Some(ca) {
            continue;
        }
        let path = format!("/webhooks/{i}/clientConfig/caBundle");
        if let Some(old) = current {
            ops.push(json!({"op": "test", "path": path, "value": BASE64.encode(old)}));
        }
        ops.push(json!({"op": "add", "path": path, "value": encoded}));
    }
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(ops)).map_err(InjectError::Patch)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(api_err)?;
    out.patched.push(name.to_string());
    Ok(())
}

/// Runs injection rounds until the task is aborted: reads `ca_file` each round (a rotated
/// CA is picked up), logs what changed and retries failures at the next round.
pub fn spawn(client: Client, ca_file: PathBuf) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let round = match std::fs::read(&ca_file) {
                Ok(ca) => inject_once(&client, &ca).await,
                Err(source) => Err(InjectError::Ca {
                    path: ca_file.clone(),
                    source,
                }),
            };
            match round {
                Ok(done) if !done.patched.is_empty() => {
                    tracing::info!(patched = ?done.patched, "caBundle injected");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "caBundle injection failed; retrying"),
            }
            tokio::time::sleep(RECHECK).await;
        }
    })
}
