//! The CustomResourceDefinitions kuota serves, generated from the Rust API types.
//!
//! Every `kueue.x-k8s.io` kind kuota implements (ResourceFlavor, Cohort, ClusterQueue,
//! AdmissionCheck, ProvisioningRequestConfig, MultiKueueConfig, MultiKueueCluster, LocalQueue, Workload, WorkloadPriorityClass, Topology) gets one CRD with v1beta2 as the
//! storage version and v1beta1 also served, Kueue's short names and printer columns, and
//! Kueue's CEL rules placed at the same schema paths (see [`kueue`]). Kinds kuota does not
//! implement (MultiKueue*, ProvisioningRequestConfig) are not generated, so
//! the API server refuses them instead of storing objects nothing acts on.
//!
//! `kuota crds` prints or writes these; `manifests/crds/` holds the committed output and
//! `tests/crds.rs` fails when it drifts from the generator.

pub mod bounds;
pub mod convert;
pub mod inject;
pub mod kueue;

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
    JSONSchemaPropsOrBool, ServiceReference, WebhookClientConfig, WebhookConversion,
};
use kube::CustomResourceExt;
use kube::core::crd::{MergeError, merge_crds};

use crate::api::{self, v1beta1};
use kueue::{Column, KindRules};

/// The API group of every CRD here.
pub const GROUP: &str = "kueue.x-k8s.io";
/// The storage (hub) version.
pub const STORAGE_VERSION: &str = "v1beta2";
/// Every version served, storage first.
pub const SERVED_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// Where the API server sends ConversionReviews: kuota's webhook Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversionWebhook {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub service: String,
    /// Service port.
    pub port: i32,
    /// URL path of the conversion endpoint.
    pub path: String,
    /// Call this URL instead of the Service (tests and out-of-cluster runs, where the API
    /// server cannot reach Service endpoints).
    pub url: Option<String>,
    /// PEM CA bundle the API server trusts for the Service; `None` leaves it to be
    /// injected at start (`kuota serve --inject-ca-bundle`) or by cert-manager.
    pub ca_bundle: Option<Vec<u8>>,
}

impl ConversionWebhook {
    /// The in-cluster default: `kuota-webhook.kuota-system:443/convert`, no caBundle yet.
    pub fn in_cluster() -> Self {
        Self {
            namespace: "kuota-system".into(),
            service: "kuota-webhook".into(),
            port: 443,
            path: CONVERT_PATH.into(),
            url: None,
            ca_bundle: None,
        }
    }

    /// A webhook at `url` (for example `https://127.0.0.1:9443/convert`).
    pub fn at_url(url: impl Into<String>, ca_bundle: Vec<u8>) -> Self {
        Self {
            url: Some(url.into()),
            ca_bundle: Some(ca_bundle),
            ..Self::in_cluster()
        }
    }
}

/// The webhook server's path for ConversionReviews.
pub const CONVERT_PATH: &str = "/convert";

/// Why the CRDs could not be generated: a mismatch between the Rust types and the rules
/// layered on them, which is a bug to fix in the source, never a user error.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// Two versions of one kind disagree on group, kind or scope.
    #[error("{kind}: cannot merge versions: {source}")]
    Merge {
        /// The kind.
        kind: &'static str,
        /// What kube reported.
        #[source]
        source: MergeError,
    },
    /// A CEL rule or printer column names a schema path the type does not have.
    #[error("{kind} {version}: no schema at {path} for the rule {rule:?}")]
    MissingPath {
        /// The kind.
        kind: &'static str,
        /// The version.
        version: String,
        /// Dotted path, `[]` for list items.
        path: &'static str,
        /// The rule that needs it.
        rule: &'static str,
    },
    /// The generated schema is missing (kube always emits one; a guard, not a case).
    #[error("{kind} {version}: generated CRD has no schema")]
    NoSchema {
        /// The kind.
        kind: &'static str,
        /// The version.
        version: String,
    },
    /// Writing a CRD file failed.
    #[error("writing {}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Rendering YAML failed.
    #[error("rendering {name} as YAML: {source}")]
    Yaml {
        /// CRD name.
        name: String,
        /// serde_norway's error.
        #[source]
        source: serde_norway::Error,
    },
}

/// Every CRD kuota serves, in a stable order (the order of `manifests/crds/`).
/// With `conversion`, v1beta1⇄v1beta2 goes through kuota's `/convert`; without it the API
/// server only rewrites `apiVersion` (fine for tests that stay within one version).
pub fn all(
    conversion: Option<&ConversionWebhook>,
) -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let per_kind: [(&'static str, Vec<CustomResourceDefinition>); 11] = [
        (
            "ResourceFlavor",
            vec![
                api::ResourceFlavor::crd(),
                as_version(api::ResourceFlavor::crd(), "v1beta1"),
            ],
        ),
        (
            "Cohort",
            vec![
                api::Cohort::crd(),
                as_version(api::Cohort::crd(), "v1beta1"),
            ],
        ),
        (
            "ClusterQueue",
            vec![api::ClusterQueue::crd(), v1beta1::ClusterQueue::crd()],
        ),
        (
            "AdmissionCheck",
            vec![api::AdmissionCheck::crd(), v1beta1::AdmissionCheck::crd()],
        ),
        (
            "ProvisioningRequestConfig",
            vec![
                api::ProvisioningRequestConfig::crd(),
                as_version(api::ProvisioningRequestConfig::crd(), "v1beta1"),
            ],
        ),
        (
            "MultiKueueConfig",
            vec![
                api::MultiKueueConfig::crd(),
                v1beta1::MultiKueueConfig::crd(),
            ],
        ),
        (
            "MultiKueueCluster",
            vec![
                api::MultiKueueCluster::crd(),
                v1beta1::MultiKueueCluster::crd(),
            ],
        ),
        (
            "LocalQueue",
            vec![api::LocalQueue::crd(), v1beta1::LocalQueue::crd()],
        ),
        (
            "Workload",
            vec![
                api::Workload::crd(),
                // v1beta1 shares v1beta2's PodSet type, but Kueue's v1beta1 has no slice
                // constraint list (conversion drops it too).
                without_field(
                    v1beta1::Workload::crd(),
                    "spec.podSets[].topologyRequest",
                    "podsetSliceRequiredTopologyConstraints",
                ),
            ],
        ),
        (
            "WorkloadPriorityClass",
            vec![
                kueue::workload_priority_class("v1beta2"),
                kueue::workload_priority_class("v1beta1"),
            ],
        ),
        (
            "Topology",
            vec![
                api::Topology::crd(),
                as_version(api::Topology::crd(), "v1beta1"),
            ],
        ),
    ];
    per_kind
        .into_iter()
        .map(|(kind, versions)| build(kind, versions, conversion))
        .collect()
}

/// One kind: Kueue's names, columns and rules on each version, then merged.
fn build(
    kind: &'static str,
    versions: Vec<CustomResourceDefinition>,
    conversion: Option<&ConversionWebhook>,
) -> Result<CustomResourceDefinition, CrdError> {
    let rules = kueue::rules(kind);
    let mut dressed = Vec::with_capacity(versions.len());
    for mut crd in versions {
        dress(&mut crd, kind, &rules)?;
        dressed.push(crd);
    }
    let mut crd =
        merge_crds(dressed, STORAGE_VERSION).map_err(|source| CrdError::Merge { kind, source })?;
    // Storage first, like Kueue's files, then by name: a stable order for the drift test.
    crd.spec
        .versions
        .sort_by_key(|v| (!v.storage, v.name.clone()));
    crd.spec.conversion = conversion.map(conversion_spec);
    Ok(crd)
}

/// Applies Kueue's names, columns and CEL rules to a single-version CRD.
fn dress(
    crd: &mut CustomResourceDefinition,
    kind: &'static str,
    rules: &KindRules,
) -> Result<(), CrdError> {
    let names = &mut crd.spec.names;
    names.short_names = (!rules.short_names.is_empty())
        .then(|| rules.short_names.iter().map(|s| s.to_string()).collect());
    names.categories = None;
    names.singular = Some(kind.to_lowercase());
    let version = &mut crd.spec.versions[0];
    let name = version.name.clone();
    version.deprecated = (name != STORAGE_VERSION).then_some(true);
    version.additional_printer_columns = {
        let cols: Vec<_> = rules.columns(&name).iter().map(Column::to_k8s).collect();
        (!cols.is_empty()).then_some(cols)
    };
    let schema = version
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .ok_or_else(|| CrdError::NoSchema {
            kind,
            version: name.clone(),
        })?;
    // Kueue never requires `spec` (`kind: ResourceFlavor` with only a name is its first
    // example); kube's derive does, because the Rust field is not optional.
    if let Some(required) = schema.required.as_mut() {
        required.retain(|r| r != "spec");
        if required.is_empty() {
            schema.required = None;
        }
    }
    make_structural(schema);
    for bound in bounds::bounds(kind) {
        if let Some(node) = at_path(schema, bound.path) {
            bound.apply(node);
        }
    }
    for (path, pattern) in bounds::patterns(kind) {
        if let Some(node) = at_path(schema, path) {
            node.pattern = Some((*pattern).to_string());
        }
    }
    for rule in rules.cel(&name) {
        let node = at_path(schema, rule.path).ok_or_else(|| CrdError::MissingPath {
            kind,
            version: name.clone(),
            path: rule.path,
            rule: rule.rule,
        })?;
        node.x_kubernetes_validations
            .get_or_insert_with(Vec::new)
            .push(rule.to_k8s());
    }
    Ok(())
}

/// Gives every untyped node (an opaque `serde_json::Value` field) `type: object` with
/// `x-kubernetes-preserve-unknown-fields`, as kubebuilder does for raw fields: the API
/// server refuses CRDs with untyped nodes (non-structural schemas).
fn make_structural(node: &mut JSONSchemaProps) {
    let untyped = node.type_.is_none()
        && node.x_kubernetes_int_or_string != Some(true)
        && node.any_of.is_none()
        && node.one_of.is_none()
        && node.all_of.is_none();
    if untyped {
        node.type_ = Some("object".into());
        node.x_kubernetes_preserve_unknown_fields = Some(true);
    }
    for child in node.properties.iter_mut().flat_map(|p| p.values_mut()) {
        make_structural(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = node.items.as_mut() {
        make_structural(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = node.additional_properties.as_mut() {
        make_structural(values);
    }
}

/// The schema node at a dotted path (`spec.resourceGroups[]`, `flavors{}`; `""` is the root).
fn at_path<'a>(root: &'a mut JSONSchemaProps, path: &str) -> Option<&'a mut JSONSchemaProps> {
    let mut node = root;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        let field = seg.trim_end_matches("[]").trim_end_matches("{}");
        node = node.properties.as_mut()?.get_mut(field)?;
        let mut rest = &seg[field.len()..];
        while !rest.is_empty() {
            node = if let Some(r) = rest.strip_prefix("[]") {
                rest = r;
                match node.items.as_mut()? {
                    JSONSchemaPropsOrArray::Schema(s) => s.as_mut(),
                    JSONSchemaPropsOrArray::Schemas(_) => return None,
                }
            } else if let Some(r) = rest.strip_prefix("{}") {
                rest = r;
                match node.additional_properties.as_mut()? {
                    JSONSchemaPropsOrBool::Schema(s) => s.as_mut(),
                    JSONSchemaPropsOrBool::Bool(_) => return None,
                }
            } else {
                return None;
            };
        }
    }
    Some(node)
}

/// `crd` without property `field` of the object at `path` (every version).
fn without_field(
    mut crd: CustomResourceDefinition,
    path: &str,
    field: &str,
) -> CustomResourceDefinition {
    for v in &mut crd.spec.versions {
        let root = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(props) = root
            .and_then(|r| at_path(r, path))
            .and_then(|n| n.properties.as_mut())
        {
            props.remove(field);
        }
    }
    crd
}

/// A v1beta2 CRD relabelled as another version, for kinds whose shape did not change.
fn as_version(mut crd: CustomResourceDefinition, version: &str) -> CustomResourceDefinition {
    for v in &mut crd.spec.versions {
        v.name = version.to_string();
        v.storage = false;
    }
    crd
}

/// The CRD's `spec.conversion` for a webhook.
pub fn conversion_spec(hook: &ConversionWebhook) -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".into()],
            client_config: Some(WebhookClientConfig {
                ca_bundle: hook.ca_bundle.clone().map(ByteString),
                service: hook.url.is_none().then(|| ServiceReference {
                    namespace: hook.namespace.clone(),
                    name: hook.service.clone(),
                    path: Some(hook.path.clone()),
                    port: Some(hook.port),
                }),
                url: hook.url.clone(),
            }),
        }),
    }
}

/// The file name of a CRD in `manifests/crds/` (Kueue's convention: `<group>_<plural>.yaml`).
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document, with a header saying where it comes from.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let body = serde_norway::to_string(crd).map_err(|source| CrdError::Yaml { name, source })?;
    Ok(format!(
        "# Generated by `kuota crds --out-dir manifests/crds` from the Rust API types; do not edit.\n---\n{body}"
    ))
}

/// Every CRD as one YAML stream (`kuota crds`).
pub fn render(conversion: Option<&ConversionWebhook>) -> Result<String, CrdError> {
    let mut out = String::new();
    for crd in all(conversion)? {
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}

/// Every CRD rendered with its file name, in order, plus the `kustomization.yaml` listing
/// them (what `manifests/crds/` holds).
pub fn files(conversion: Option<&ConversionWebhook>) -> Result<Vec<(String, String)>, CrdError> {
    let mut out = all(conversion)?
        .iter()
        .map(|crd| Ok((file_name(crd), to_yaml(crd)?)))
        .collect::<Result<Vec<_>, CrdError>>()?;
    let mut kustomization = String::from(
        "# The kueue.x-k8s.io CRDs kuota serves (generated: `kuota crds --out-dir manifests/crds`).\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for (name, _) in &out {
        kustomization.push_str(&format!("  - {name}\n"));
    }
    out.push(("kustomization.yaml".into(), kustomization));
    Ok(out)
}

/// Writes one file per CRD into `dir` (`kuota crds --out-dir`), returning the paths.
pub fn write_dir(
    dir: &std::path::Path,
    conversion: Option<&ConversionWebhook>,
) -> Result<Vec<std::path::PathBuf>, CrdError> {
    let io = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| CrdError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut written = Vec::new();
    for (name, text) in files(conversion)? {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
        written.push(path);
    }
    Ok(written)
}
