//! Kueue's `Configuration` (`config.kueue.x-k8s.io/v1beta2` and `v1beta1`) as a strict
//! serde schema.
//!
//! Field names follow Kueue's apis/config/v1beta2 and v1beta1. One schema holds the fields
//! of both versions; [`Configuration::fields_not_in`] lists those a document uses that its
//! own version does not have (v1beta1's `waitForPodsReady.enable` in a v1beta2 file), so a
//! mixed-up version is refused as Kueue's strict decoder refuses it. Every struct denies
//! unknown fields, so a typo is an error naming its path. Sections kuota does not act on
//! are kept as raw values ([`Ignored`]): they are accepted (a Kueue file applies unchanged)
//! and reported once as ignored, but their contents are not checked, since Kueue's own
//! loader owns them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

/// The API version of Kueue's current Configuration.
pub const API_VERSION: &str = "config.kueue.x-k8s.io/v1beta2";
/// The API version of Kueue's previous Configuration, still read by Kueue and kuota.
pub const API_VERSION_V1BETA1: &str = "config.kueue.x-k8s.io/v1beta1";
/// The API group both versions belong to.
pub const GROUP: &str = "config.kueue.x-k8s.io";
/// The kind of the Kueue document kuota reads.
pub const KIND: &str = "Configuration";

/// Which version a document declares: defaults and allowed fields differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1beta1,
    V1beta2,
}

impl Version {
    /// The version an `apiVersion` names, if it is one of Kueue's.
    pub fn of(api_version: &str) -> Option<Self> {
        match api_version {
            API_VERSION => Some(Self::V1beta2),
            API_VERSION_V1BETA1 => Some(Self::V1beta1),
            _ => None,
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            Self::V1beta1 => API_VERSION_V1BETA1,
            Self::V1beta2 => API_VERSION,
        }
    }

    /// `apiVersion kind`, for errors.
    pub fn document(self) -> &'static str {
        match self {
            Self::V1beta1 => "config.kueue.x-k8s.io/v1beta1 Configuration",
            Self::V1beta2 => "config.kueue.x-k8s.io/v1beta2 Configuration",
        }
    }
}

/// A section kuota accepts but does not act on.
pub type Ignored = serde_json::Value;

/// Kueue's `Configuration` (the inline `ControllerManager` fields are listed directly).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Configuration {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    /// Kueue's own namespace: the default namespace of the leader-election Lease and a
    /// member of the default `managedJobsNamespaceSelector`'s exclusions.
    pub namespace: Option<String>,
    // ControllerManager (inline in Kueue's type).
    pub webhook: Option<Webhook>,
    pub leader_election: Option<LeaderElection>,
    pub metrics: Option<Metrics>,
    pub health: Option<Health>,
    pub pprof_bind_address: Option<Ignored>,
    pub controller: Option<Ignored>,
    pub tls: Option<Ignored>,
    // Configuration's own fields.
    #[serde(default)]
    pub manage_jobs_without_queue_name: bool,
    pub managed_jobs_namespace_selector: Option<LabelSelector>,
    pub internal_cert_management: Option<Ignored>,
    pub wait_for_pods_ready: Option<WaitForPodsReady>,
    pub client_connection: Option<ClientConnection>,
    pub integrations: Option<Integrations>,
    pub queue_visibility: Option<Ignored>,
    pub multi_kueue: Option<super::multikueue::MultiKueueSection>,
    pub fair_sharing: Option<FairSharing>,
    pub admission_fair_sharing: Option<AdmissionFairSharing>,
    pub resources: Option<Ignored>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub object_retention_policies: Option<Ignored>,
    /// v1beta2 only.
    pub visibility_server: Option<VisibilityServer>,
}

/// Kueue's `visibilityServer` (v1beta2): where the visibility API listens.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VisibilityServer {
    pub bind_address: Option<String>,
    pub bind_port: Option<i64>,
}

/// Kueue's `webhook`: where the admission server listens and finds its certificate.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Webhook {
    pub port: Option<i64>,
    pub host: Option<String>,
    pub cert_dir: Option<String>,
}

/// Kueue's `metrics`: `bindAddress` is honoured, the rest accepted and reported.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metrics {
    pub bind_address: Option<String>,
    pub enable_cluster_queue_resources: Option<bool>,
    pub custom_labels: Option<Ignored>,
    pub local_queue_metrics: Option<Ignored>,
}

/// Kueue's `health`: the probe listener and its endpoint names.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Health {
    pub health_probe_bind_address: Option<String>,
    pub readiness_endpoint_name: Option<String>,
    pub liveness_endpoint_name: Option<String>,
}

impl Configuration {
    /// Paths of the sections present in the file that kuota accepts and does not act on.
    pub fn ignored_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut note = |present: bool, path: &'static str| {
            if present {
                out.push(path);
            }
        };
        if let Some(m) = &self.metrics {
            note(
                m.enable_cluster_queue_resources.is_some(),
                "metrics.enableClusterQueueResources",
            );
            note(m.custom_labels.is_some(), "metrics.customLabels");
            note(m.local_queue_metrics.is_some(), "metrics.localQueueMetrics");
        }
        note(self.pprof_bind_address.is_some(), "pprofBindAddress");
        note(self.controller.is_some(), "controller");
        note(self.tls.is_some(), "tls");
        note(
            self.internal_cert_management.is_some(),
            "internalCertManagement",
        );
        note(self.queue_visibility.is_some(), "queueVisibility");
        if let Some(m) = &self.multi_kueue {
            note(
                m.external_frameworks.is_some(),
                "multiKueue.externalFrameworks",
            );
            note(m.cluster_profile.is_some(), "multiKueue.clusterProfile");
        }
        note(self.resources.is_some(), "resources");
        note(self.feature_gates.is_some(), "featureGates");
        note(
            self.object_retention_policies.is_some(),
            "objectRetentionPolicies",
        );
        if let Some(i) = &self.integrations {
            note(
                i.external_frameworks.is_some(),
                "integrations.externalFrameworks",
            );
            note(i.pod_options.is_some(), "integrations.podOptions");
            note(
                i.label_keys_to_copy.is_some(),
                "integrations.labelKeysToCopy",
            );
        }
        out
    }
}

impl Configuration {
    /// Paths of the fields present that `version` does not have: a v1beta1 field in a
    /// v1beta2 document or the reverse (Kueue's strict decoder refuses both).
    pub fn fields_not_in(&self, version: Version) -> Vec<&'static str> {
        let mut out = Vec::new();
        match version {
            Version::V1beta2 => {
                // Removed in v1beta2: presence enables waitForPodsReady and fairSharing.
                if self
                    .wait_for_pods_ready
                    .as_ref()
                    .is_some_and(|w| w.enable.is_some())
                {
                    out.push("waitForPodsReady.enable");
                }
                if self
                    .fair_sharing
                    .as_ref()
                    .is_some_and(|f| f.enable.is_some())
                {
                    out.push("fairSharing.enable");
                }
                if self.queue_visibility.is_some() {
                    out.push("queueVisibility");
                }
                if self
                    .integrations
                    .as_ref()
                    .is_some_and(|i| i.pod_options.is_some())
                {
                    out.push("integrations.podOptions");
                }
            }
            Version::V1beta1 => {
                if self.visibility_server.is_some() {
                    out.push("visibilityServer");
                }
            }
        }
        out
    }
}

/// component-base's `LeaderElectionConfiguration`, as Kueue embeds it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaderElection {
    pub leader_elect: Option<bool>,
    pub lease_duration: Option<String>,
    pub renew_deadline: Option<String>,
    pub retry_period: Option<String>,
    /// Only `leases` is meaningful today; kuota always uses a Lease.
    pub resource_lock: Option<String>,
    pub resource_name: Option<String>,
    pub resource_namespace: Option<String>,
}

/// Kueue's `waitForPodsReady`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WaitForPodsReady {
    /// v1beta1 only (in v1beta2 the section's presence, or its default, enables it).
    pub enable: Option<bool>,
    pub timeout: Option<String>,
    pub block_admission: Option<bool>,
    pub requeuing_strategy: Option<RequeuingStrategy>,
    pub recovery_timeout: Option<String>,
}

/// Kueue's `waitForPodsReady.requeuingStrategy`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequeuingStrategy {
    pub timestamp: Option<String>,
    pub backoff_limit_count: Option<i32>,
    pub backoff_base_seconds: Option<i32>,
    pub backoff_max_seconds: Option<i32>,
}

/// Kueue's `clientConnection`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClientConnection {
    pub qps: Option<f32>,
    pub burst: Option<i32>,
}

/// Kueue's `integrations`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Integrations {
    pub frameworks: Option<Vec<String>>,
    pub external_frameworks: Option<Ignored>,
    pub pod_options: Option<Ignored>,
    pub label_keys_to_copy: Option<Ignored>,
}

/// Kueue's `fairSharing`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FairSharing {
    /// v1beta1 only (in v1beta2 the section's presence enables fair sharing).
    pub enable: Option<bool>,
    pub preemption_strategies: Option<Vec<String>>,
}

/// Kueue's `admissionFairSharing` (durations as Go duration strings).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AdmissionFairSharing {
    pub usage_half_life_time: Option<String>,
    pub usage_sampling_interval: Option<String>,
    pub resource_weights: Option<BTreeMap<String, f64>>,
}

/// Every framework name Kueue's v1beta1 `integrations.frameworks` accepts.
pub const KUEUE_FRAMEWORKS: &[&str] = &[
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/jaxjob",
    "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "sparkoperator.k8s.io/sparkapplication",
];
