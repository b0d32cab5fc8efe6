//! `kuota serve --config`: Kueue's `Configuration` file, plus kuota's own settings.
//!
//! A configuration file holds YAML documents of two kinds, each at most once:
//! - Kueue's `Configuration` (`config.kueue.x-k8s.io/v1beta2`, or the older `v1beta1`),
//!   unchanged from a Kueue install ([`kueue`]), each version with Kueue's defaults for it;
//! - kuota's `KuotaConfiguration` (`config.kuota.dev/v1alpha1`), for what Kueue has no field
//!   for ([`kuota`]).
//!
//! Loading is strict: an unknown field is an error naming its path, a bad value an error
//! naming the field and the reason. Kueue sections kuota does not act on are accepted and
//! listed in [`Settings::ignored`] so `kuota serve` can report them once. [`Settings`] is the
//! result: what the engine, the controller, the client and leader election need, with
//! Kueue's defaults filled in. See docs/configuration.md.

pub mod client;
pub mod kueue;
pub mod kuota;
pub mod multikueue;
#[cfg(test)]
mod tests;

use std::path::{Path as FsPath, PathBuf};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use serde::de::DeserializeOwned;

use crate::api::validate::{FieldError, IS_NEGATIVE_MSG, Path};
use crate::duration::parse_go;
use crate::engine::{AdmissionFairSharing, EngineConfig, FairPreemptionStrategy};
use crate::placement::Strategy;

/// Namespace kuota runs in when the Configuration names none (its install's namespace).
pub const DEFAULT_NAMESPACE: &str = "kuota-system";
/// Name of the leader-election Lease when `leaderElection.resourceName` is unset, with or
/// without a configuration file, so replicas started either way elect one leader. Kueue's
/// default is `c1f6bfd2.kueue.x-k8s.io`; kuota's own keeps the two from sharing a Lease
/// when both run in one namespace during a switch.
pub const DEFAULT_LEASE_NAME: &str = "c1f6bfd2.kuota.dev";
/// The label every namespace carries with its own name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// `kuota serve --config FILE` (repeatable): the files [`Settings::load`] reads.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfigArgs {
    /// A file with Kueue's Configuration (config.kueue.x-k8s.io/v1beta2 or v1beta1) and/or
    /// kuota's KuotaConfiguration (config.kuota.dev/v1alpha1). Repeatable; each kind at most
    /// once. Its listeners (webhook, metrics, health) apply unless a flag sets them.
    #[arg(long = "config", value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// Why a configuration file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: document {doc}: not YAML: {source}")]
    Yaml {
        file: String,
        doc: usize,
        #[source]
        source: serde_norway::Error,
    },
    #[error(
        "{file}: document {doc}: apiVersion {api_version:?} kind {kind:?} is neither {} {} ({} or {}) nor {} {}",
        kueue::GROUP,
        kueue::KIND,
        "v1beta2",
        "v1beta1",
        kuota::API_VERSION,
        kuota::KIND
    )]
    UnknownDocument {
        file: String,
        doc: usize,
        api_version: String,
        kind: String,
    },
    /// Fields of the other version of Kueue's Configuration.
    #[error(
        "{file}: {api_version} Configuration has no field {}: {} of the other version; fix the field or the apiVersion",
        fields.join(", "),
        if fields.len() == 1 { "it is a field" } else { "they are fields" }
    )]
    WrongVersion {
        file: String,
        api_version: &'static str,
        fields: Vec<&'static str>,
    },
    #[error("{file}: a second {kind} document (each kind may appear once)")]
    Duplicate { file: String, kind: &'static str },
    /// An unknown field or a value of the wrong type, at `path`.
    #[error("{file}: {kind} {path}: {source}")]
    Decode {
        file: String,
        kind: &'static str,
        path: String,
        #[source]
        source: serde_norway::Error,
    },
    /// Values that decode but are not allowed (every problem found, never empty).
    #[error("{file}: {}", join(errors))]
    Invalid {
        file: String,
        errors: Vec<FieldError>,
    },
}

fn join(errors: &[FieldError]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// Kueue's `clientConnection`: the client's sustained requests per second and burst.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientLimits {
    pub qps: f32,
    pub burst: u32,
}

/// Leader election on a `coordination.k8s.io` Lease (Kueue's `leaderElection`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElection {
    /// `leaderElect`: off means this replica schedules without a Lease (one replica only).
    pub enabled: bool,
    pub lease_name: String,
    pub namespace: String,
    /// A holder that stops renewing loses the Lease after this long.
    pub lease_duration: Duration,
    /// The holder renews this long after its last renewal at the latest.
    pub renew_deadline: Duration,
    /// Pause before retrying after an API error.
    pub retry_period: Duration,
}

/// The writes kuota makes for people to read (KuotaConfiguration `apiWrites`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiWrites {
    /// At most one status write per ClusterQueue and LocalQueue per this interval.
    pub queue_status_interval: Duration,
    pub events: WorkloadEvents,
}

/// Start-time estimates (KuotaConfiguration `startEstimates`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartEstimates {
    pub enabled: bool,
    /// At most one forecast pass per this interval.
    pub interval: Duration,
    /// At most this share of one core on passes.
    pub cpu_share: f64,
    /// The runtime of a workload nothing is known about.
    pub default_runtime: Option<Duration>,
    /// How far ahead a start is estimated.
    pub horizon: Duration,
    /// Opt-in annotation writes, when the estimate moves by more than this.
    pub write_threshold: Option<Duration>,
}

impl Default for StartEstimates {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: Duration::from_secs(30),
            cpu_share: 0.1,
            default_runtime: None,
            horizon: Duration::from_secs(7 * 24 * 3600),
            write_threshold: None,
        }
    }
}

/// The default of `apiWrites.queueStatusInterval`.
pub const DEFAULT_QUEUE_STATUS_INTERVAL: Duration = Duration::from_secs(1);

impl Default for ApiWrites {
    fn default() -> Self {
        Self {
            queue_status_interval: DEFAULT_QUEUE_STATUS_INTERVAL,
            events: WorkloadEvents::default(),
        }
    }
}

/// Which of Kueue's Workload Events are published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WorkloadEvents {
    /// Every Event that tells something new: `Admitted` only when it comes after the
    /// quota reservation (admission checks), not in the same write as `QuotaReserved`;
    /// a pending Event when the pending reason changes, not each time its numbers do
    /// (the Workload's condition carries the newest message).
    #[default]
    Lean,
    /// As Kueue's scheduler records them: `Admitted` beside every `QuotaReserved`, and
    /// a pending Event with every new pending message.
    Kueue,
}

/// Kueue's `waitForPodsReady.requeuingStrategy`, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requeuing {
    /// Requeue by `Creation` or `Eviction` time.
    pub timestamp: String,
    /// Requeues before the workload is deactivated (`None`: no limit).
    pub backoff_limit_count: Option<u32>,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
}

/// Kueue's `waitForPodsReady` when enabled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodsReady {
    pub timeout: Duration,
    pub requeuing: Requeuing,
    /// `blockAdmission` (defaults: true in v1beta1 when enabled, false in v1beta2).
    pub block_admission: bool,
    /// `recoveryTimeout` (defaults to `timeout`; `None` when set to 0, which turns the
    /// check off).
    pub recovery_timeout: Option<Duration>,
}

impl PodsReady {
    /// The engine's form of these settings.
    pub fn engine_config(&self) -> crate::engine::PodsReadyConfig {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        crate::engine::PodsReadyConfig {
            timeout: ms(self.timeout),
            recovery_timeout: self.recovery_timeout.map(ms),
            block_admission: self.block_admission,
            backoff_limit_count: self.requeuing.backoff_limit_count,
            backoff_base: ms(self.requeuing.backoff_base),
            backoff_max: ms(self.requeuing.backoff_max),
            requeue_by_creation: self.requeuing.timestamp == "Creation",
        }
    }
}

/// Where a listener of Kueue's `ControllerManager` binds, as the file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bind {
    /// `"0"` (metrics, health) or `""` (health): not served.
    Off,
    /// `host:port`, host possibly empty (every interface) or a name to resolve.
    Addr(String),
}

/// The listeners Kueue's `webhook`, `metrics` and `health` sections set. `None` where the
/// file says nothing: kuota's flag defaults then apply (docs/configuration.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listeners {
    /// `webhook.host` and `webhook.port` as `host:port`.
    pub webhook: Option<String>,
    /// `webhook.certDir`.
    pub cert_dir: Option<PathBuf>,
    /// `metrics.bindAddress`.
    pub metrics: Option<Bind>,
    /// `health.healthProbeBindAddress`.
    pub health: Option<Bind>,
    /// `health.readinessEndpointName` (Kueue's default `readyz`).
    pub readiness_endpoint: Option<String>,
    /// `health.livenessEndpointName` (Kueue's default `healthz`).
    pub liveness_endpoint: Option<String>,
    /// `visibilityServer.bindAddress` and `bindPort` as `host:port` (Kueue's defaults: every
    /// interface, port 8082).
    pub visibility: Option<String>,
}

/// A loaded configuration: Kueue's defaults, the file's values and kuota's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Scheduling: fair sharing, placement strategy, preemption protection.
    pub engine: EngineConfig,
    /// Enabled `integrations.frameworks` that kuota runs, in the file's order.
    pub frameworks: Vec<String>,
    /// Enabled frameworks Kueue knows and kuota does not run (reported, not managed).
    pub unsupported_frameworks: Vec<String>,
    pub manage_jobs_without_queue_name: bool,
    pub managed_jobs_namespace_selector: LabelSelector,
    /// Kueue's `namespace`: where kuota runs (its jobs are never managed unlabelled).
    pub namespace: String,
    /// `None` when off: v1beta1's `waitForPodsReady.enable` false or absent, v1beta2's
    /// `featureGates.DisableWaitForPodsReady` true (v1beta2 turns it on by default).
    pub wait_for_pods_ready: Option<PodsReady>,
    pub client: ClientLimits,
    pub leader_election: LeaderElection,
    /// The listeners the file sets.
    pub listeners: Listeners,
    /// Queue status and Events: how often, and which.
    pub api_writes: ApiWrites,
    /// Start-time estimates: whether, how often, at what cost.
    pub start_estimates: StartEstimates,
    /// MultiKueue: the origin, the lost-worker timeout, the dispatcher.
    pub multikueue: multikueue::MultiKueue,
    /// Field paths present in the file that kuota accepts and does not act on.
    pub ignored: Vec<String>,
}

impl Default for Settings {
    /// kuota without a configuration file: as an empty v1beta1 Configuration (so
    /// waitForPodsReady stays off), kuota's defaults for an empty KuotaConfiguration.
    fn default() -> Self {
        Self::from_documents(
            kueue::Version::V1beta1,
            &kueue::Configuration::default(),
            &kuota::KuotaConfiguration::default(),
        )
        .expect("the default configuration is valid")
    }
}

impl Settings {
    /// Loads and merges the documents of `files` (each kind at most once over all files).
    pub fn load(files: &[PathBuf]) -> Result<Self, ConfigError> {
        let mut docs = Documents::default();
        for file in files {
            let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read {
                file: file.clone(),
                source,
            })?;
            docs.add(&file.display().to_string(), &text)?;
        }
        docs.settings()
    }

    /// Logs, once, what the file asks for that kuota accepts but does not act on.
    pub fn report(&self) {
        for field in &self.ignored {
            tracing::info!(field = %field, "configuration: accepted, not used by kuota");
        }
        for name in &self.unsupported_frameworks {
            tracing::warn!(framework = %name, "configuration: integrations.frameworks names a Kueue framework kuota does not run; its jobs are left alone");
        }
    }

    /// Parses one file's text (`file` names it in errors).
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let mut docs = Documents::default();
        docs.add(file, text)?;
        docs.settings()
    }

    /// Maps the two documents, validating every value; `version` picks Kueue's defaults.
    pub fn from_documents(
        version: kueue::Version,
        cfg: &kueue::Configuration,
        own: &kuota::KuotaConfiguration,
    ) -> Result<Self, Vec<FieldError>> {
        let mut errs = Vec::new();
        let namespace = cfg
            .namespace
            .clone()
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        let (frameworks, unsupported_frameworks) = frameworks(cfg.integrations.as_ref(), &mut errs);
        let wait_for_pods_ready = pods_ready(version, cfg, &mut errs);
        let settings = Self {
            engine: EngineConfig {
                fair_sharing: fair_sharing(version, cfg.fair_sharing.as_ref(), &mut errs),
                placement: placement(own.placement.as_ref(), &mut errs),
                preemption_min_runtime: min_runtime(own.preemption_protection.as_ref(), &mut errs),
                admission_fair_sharing: admission_fair_sharing(cfg, &mut errs),
                pods_ready: wait_for_pods_ready.as_ref().map(PodsReady::engine_config),
                finishing_grace: finishing_grace(own.preemption_protection.as_ref(), &mut errs),
                gang_reservation_horizon: gang_reservation_horizon(
                    own.gang_reservation.as_ref(),
                    &mut errs,
                ),
            },
            frameworks,
            unsupported_frameworks,
            manage_jobs_without_queue_name: cfg.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector: cfg
                .managed_jobs_namespace_selector
                .clone()
                .unwrap_or_else(|| default_namespace_selector(&namespace)),
            namespace: namespace.clone(),
            wait_for_pods_ready,
            client: client_limits(cfg.client_connection.as_ref(), &mut errs),
            leader_election: leader_election(cfg.leader_election.as_ref(), &namespace, &mut errs),
            listeners: listeners(cfg, &mut errs),
            api_writes: api_writes(own.api_writes.as_ref(), &mut errs),
            start_estimates: start_estimates(own.start_estimates.as_ref(), &mut errs),
            multikueue: multikueue::settings(cfg.multi_kueue.as_ref(), duration, &mut errs),
            ignored: cfg.ignored_fields().into_iter().map(String::from).collect(),
        };
        if errs.is_empty() {
            Ok(settings)
        } else {
            Err(errs)
        }
    }
}

/// The documents found so far, and the file the settings are reported against.
#[derive(Default)]
struct Documents {
    kueue: Option<(kueue::Version, kueue::Configuration)>,
    kuota: Option<kuota::KuotaConfiguration>,
    files: Vec<String>,
}

impl Documents {
    fn add(&mut self, file: &str, text: &str) -> Result<(), ConfigError> {
        use serde::Deserialize;
        self.files.push(file.to_string());
        for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
            let doc_no = i + 1;
            let value =
                serde_norway::Value::deserialize(doc).map_err(|source| ConfigError::Yaml {
                    file: file.to_string(),
                    doc: doc_no,
                    source,
                })?;
            if value.is_null() {
                continue; // an empty document, e.g. after a trailing `---`
            }
            let field = |k: &str| {
                value
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            let api_version = field("apiVersion");
            match (kueue::Version::of(&api_version), field("kind").as_str()) {
                (Some(version), kueue::KIND) => {
                    let c: kueue::Configuration = decode(file, version.document(), value)?;
                    let fields = c.fields_not_in(version);
                    if !fields.is_empty() {
                        return Err(ConfigError::WrongVersion {
                            file: file.to_string(),
                            api_version: version.api_version(),
                            fields,
                        });
                    }
                    if self.kueue.replace((version, c)).is_some() {
                        return Err(duplicate(file, kueue::KIND));
                    }
                }
                (None, kuota::KIND) if api_version == kuota::API_VERSION => {
                    let c = decode(file, "config.kuota.dev/v1alpha1 KuotaConfiguration", value)?;
                    if self.kuota.replace(c).is_some() {
                        return Err(duplicate(file, kuota::KIND));
                    }
                }
                (_, kind) => {
                    return Err(ConfigError::UnknownDocument {
                        file: file.to_string(),
                        doc: doc_no,
                        api_version,
                        kind: kind.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    fn settings(self) -> Result<Settings, ConfigError> {
        let (version, kueue) = self
            .kueue
            .unwrap_or((kueue::Version::V1beta1, Default::default()));
        Settings::from_documents(version, &kueue, &self.kuota.unwrap_or_default()).map_err(
            |errors| ConfigError::Invalid {
                file: self.files.join(", "),
                errors,
            },
        )
    }
}

fn duplicate(file: &str, kind: &'static str) -> ConfigError {
    ConfigError::Duplicate {
        file: file.to_string(),
        kind,
    }
}

/// Decodes one document strictly, keeping the path of the first offending field.
fn decode<T: DeserializeOwned>(
    file: &str,
    kind: &'static str,
    value: serde_norway::Value,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| ConfigError::Decode {
        file: file.to_string(),
        kind,
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

/// Kueue's default: every namespace but kube-system and kuota's own.
fn default_namespace_selector(namespace: &str) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.to_string(),
            operator: "NotIn".to_string(),
            values: Some(vec!["kube-system".to_string(), namespace.to_string()]),
        }]),
        match_labels: None,
    }
}

fn frameworks(
    integrations: Option<&kueue::Integrations>,
    errs: &mut Vec<FieldError>,
) -> (Vec<String>, Vec<String>) {
    let path = Path::new("integrations").child("frameworks");
    let names: Vec<String> = match integrations.and_then(|i| i.frameworks.clone()) {
        Some(list) if !list.is_empty() => list,
        // Kueue's default when the list is empty or absent.
        _ => vec!["batch/job".to_string()],
    };
    let mut supported = Vec::new();
    let mut unsupported = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if !kueue::KUEUE_FRAMEWORKS.contains(&name.as_str()) {
            errs.push(FieldError::not_supported(
                &path.index(i),
                name,
                kueue::KUEUE_FRAMEWORKS,
            ));
        } else if names[..i].contains(name) {
            errs.push(FieldError::duplicate(&path.index(i), name));
        } else if crate::integrations::runs_framework(name) {
            supported.push(name.clone());
        } else {
            unsupported.push(name.clone());
        }
    }
    (supported, unsupported)
}

fn fair_sharing(
    version: kueue::Version,
    fs: Option<&kueue::FairSharing>,
    errs: &mut Vec<FieldError>,
) -> Option<Vec<FairPreemptionStrategy>> {
    use FairPreemptionStrategy::{LessThanInitialShare, LessThanOrEqualToFinalShare};
    // v1beta1 turns it on with `enable`; v1beta2 with the section itself.
    let fs = fs.filter(|fs| version == kueue::Version::V1beta2 || fs.enable == Some(true))?;
    let path = Path::new("fairSharing").child("preemptionStrategies");
    let Some(names) = fs.preemption_strategies.as_ref().filter(|s| !s.is_empty()) else {
        return Some(vec![LessThanOrEqualToFinalShare, LessThanInitialShare]);
    };
    // Kueue accepts exactly these three sequences.
    let strategies = match names.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["LessThanOrEqualToFinalShare"] => vec![LessThanOrEqualToFinalShare],
        ["LessThanInitialShare"] => vec![LessThanInitialShare],
        ["LessThanOrEqualToFinalShare", "LessThanInitialShare"] => {
            vec![LessThanOrEqualToFinalShare, LessThanInitialShare]
        }
        _ => {
            errs.push(FieldError::not_supported(
                &path,
                &names.join(","),
                &[
                    "LessThanOrEqualToFinalShare",
                    "LessThanInitialShare",
                    "LessThanOrEqualToFinalShare,LessThanInitialShare",
                ],
            ));
            return None;
        }
    };
    Some(strategies)
}

/// Kueue's `admissionFairSharing` with its defaults and validation (pkg/config
/// validation.go); off when absent or when `featureGates.AdmissionFairSharing` is false
/// (the gate is on by default since Kueue 0.15).
fn admission_fair_sharing(
    cfg: &kueue::Configuration,
    errs: &mut Vec<FieldError>,
) -> Option<AdmissionFairSharing> {
    let afs = cfg.admission_fair_sharing.as_ref()?;
    let path = Path::new("admissionFairSharing");
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let half_life_path = path.child("usageHalfLifeTime");
    let half_life = duration(afs.usage_half_life_time.as_deref(), &half_life_path, errs);
    let interval_path = path.child("usageSamplingInterval");
    let interval = match afs.usage_sampling_interval.as_deref() {
        Some(text) if text.trim_start().starts_with('-') => {
            errs.push(FieldError::invalid(
                &interval_path,
                text,
                "must be greater than 0",
            ));
            None
        }
        text => duration(text, &interval_path, errs),
    };
    let mut resource_weights = std::collections::BTreeMap::new();
    for (name, w) in afs.resource_weights.iter().flatten() {
        if *w < 0.0 || !w.is_finite() {
            let p = path.child("resourceWeights").key(name);
            errs.push(FieldError::invalid_num(&p, w, IS_NEGATIVE_MSG));
        }
        resource_weights.insert(name.clone(), *w);
    }
    let gate = cfg
        .feature_gates
        .as_ref()
        .and_then(|g| g.get("AdmissionFairSharing").copied())
        .unwrap_or(true);
    let defaults = AdmissionFairSharing::default();
    gate.then(|| AdmissionFairSharing {
        usage_half_life: half_life.map_or(defaults.usage_half_life, ms),
        // Kueue defaults a zero or missing interval to 5m.
        usage_sampling_interval: interval
            .filter(|d| !d.is_zero())
            .map_or(defaults.usage_sampling_interval, ms),
        resource_weights,
    })
}

fn placement(p: Option<&kuota::Placement>, errs: &mut Vec<FieldError>) -> Strategy {
    let Some(name) = p.and_then(|p| p.strategy.as_deref()) else {
        return Strategy::default();
    };
    match name {
        "kuota" => Strategy::Kuota,
        "kueue-bestfit" => Strategy::KueueBestFit,
        "first-fit" => Strategy::FirstFit,
        other => {
            errs.push(FieldError::not_supported(
                &Path::new("placement").child("strategy"),
                other,
                &["kuota", "kueue-bestfit", "first-fit"],
            ));
            Strategy::default()
        }
    }
}

fn min_runtime(p: Option<&kuota::PreemptionProtection>, errs: &mut Vec<FieldError>) -> i64 {
    let path = Path::new("preemptionProtection").child("minRuntime");
    let d = duration(p.and_then(|p| p.min_runtime.as_deref()), &path, errs);
    d.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn finishing_grace(p: Option<&kuota::PreemptionProtection>, errs: &mut Vec<FieldError>) -> i64 {
    let path = Path::new("preemptionProtection").child("finishingGrace");
    let d = duration(p.and_then(|p| p.finishing_grace.as_deref()), &path, errs);
    d.map_or(crate::engine::DEFAULT_FINISHING_GRACE, |d| {
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    })
}

fn api_writes(a: Option<&kuota::ApiWrites>, errs: &mut Vec<FieldError>) -> ApiWrites {
    let path = Path::new("apiWrites");
    let interval_path = path.child("queueStatusInterval");
    let text = a.and_then(|a| a.queue_status_interval.as_deref());
    let interval = duration(text, &interval_path, errs);
    if let (Some(text), Some(d)) = (text, interval)
        && d.is_zero()
    {
        errs.push(FieldError::invalid(
            &interval_path,
            text,
            "must be greater than 0",
        ));
    }
    let events = match a.and_then(|a| a.events.as_deref()) {
        None | Some("Lean") => WorkloadEvents::Lean,
        Some("Kueue") => WorkloadEvents::Kueue,
        Some(other) => {
            errs.push(FieldError::not_supported(
                &path.child("events"),
                other,
                &["Lean", "Kueue"],
            ));
            WorkloadEvents::Lean
        }
    };
    ApiWrites {
        queue_status_interval: interval
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_QUEUE_STATUS_INTERVAL),
        events,
    }
}

fn start_estimates(
    e: Option<&kuota::StartEstimates>,
    errs: &mut Vec<FieldError>,
) -> StartEstimates {
    let path = Path::new("startEstimates");
    let d = StartEstimates::default();
    let Some(e) = e else { return d };
    let mut positive = |field: &str, text: Option<&str>, default: Duration| {
        let at = path.child(field);
        match (text, duration(text, &at, errs)) {
            (Some(text), Some(v)) if v.is_zero() => {
                errs.push(FieldError::invalid(&at, text, "must be greater than 0"));
                default
            }
            (_, v) => v.unwrap_or(default),
        }
    };
    let interval = positive("interval", e.interval.as_deref(), d.interval);
    let horizon = positive("horizon", e.horizon.as_deref(), d.horizon);
    let default_runtime = e
        .default_runtime
        .as_deref()
        .map(|text| positive("defaultRuntime", Some(text), Duration::ZERO))
        .filter(|v| !v.is_zero());
    let write_threshold = e
        .write_threshold
        .as_deref()
        .map(|text| duration(Some(text), &path.child("writeThreshold"), errs).unwrap_or_default());
    let cpu_share = match e.cpu_share {
        Some(v) if !(v > 0.0 && v <= 1.0) => {
            errs.push(FieldError::invalid(
                &path.child("cpuShare"),
                &v.to_string(),
                "must be greater than 0 and at most 1",
            ));
            d.cpu_share
        }
        v => v.unwrap_or(d.cpu_share),
    };
    StartEstimates {
        enabled: e.enabled.unwrap_or(true),
        interval,
        cpu_share,
        default_runtime,
        horizon,
        write_threshold,
    }
}

fn gang_reservation_horizon(g: Option<&kuota::GangReservation>, errs: &mut Vec<FieldError>) -> i64 {
    let path = Path::new("gangReservation").child("horizon");
    let d = duration(g.and_then(|g| g.horizon.as_deref()), &path, errs);
    d.map_or(crate::engine::DEFAULT_GANG_RESERVATION_HORIZON, |d| {
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    })
}

/// Parses an optional duration as Go's `time.ParseDuration` does (`15s`, `1.5h`, `1h30m`),
/// recording an error at `path` for text Go refuses or a negative length.
fn duration(text: Option<&str>, path: &Path, errs: &mut Vec<FieldError>) -> Option<Duration> {
    let text = text?;
    match parse_go(text) {
        Ok(nanos) if nanos < 0 => {
            errs.push(FieldError::invalid(path, text, IS_NEGATIVE_MSG));
            None
        }
        Ok(nanos) => Some(Duration::from_nanos(nanos.unsigned_abs())),
        Err(reason) => {
            errs.push(FieldError::invalid(path, text, reason.to_string()));
            None
        }
    }
}

/// Kueue's `waitForPodsReady` with the defaults of `version` (apis/config/*/defaults.go):
/// v1beta1 turns it on with `enable` (timeout 5m, blockAdmission true); v1beta2 turns it on
/// unless `featureGates.DisableWaitForPodsReady` (timeout 30m, also for 0, blockAdmission
/// false). Both default `recoveryTimeout` to the timeout.
fn pods_ready(
    version: kueue::Version,
    cfg: &kueue::Configuration,
    errs: &mut Vec<FieldError>,
) -> Option<PodsReady> {
    let empty = kueue::WaitForPodsReady::default();
    let w = match version {
        kueue::Version::V1beta1 => cfg
            .wait_for_pods_ready
            .as_ref()
            .filter(|w| w.enable == Some(true))?,
        kueue::Version::V1beta2 => {
            let gates = cfg.feature_gates.as_ref();
            if gates.and_then(|g| g.get("DisableWaitForPodsReady")) == Some(&true) {
                return None;
            }
            cfg.wait_for_pods_ready.as_ref().unwrap_or(&empty)
        }
    };
    let path = Path::new("waitForPodsReady");
    let timeout = match (
        version,
        duration(w.timeout.as_deref(), &path.child("timeout"), errs),
    ) {
        (kueue::Version::V1beta2, Some(d)) if d.is_zero() => Duration::from_secs(30 * 60),
        (kueue::Version::V1beta1, Some(d)) if d.is_zero() => {
            errs.push(FieldError::required(
                &path.child("timeout"),
                "must be specified",
            ));
            d
        }
        (_, Some(d)) => d,
        (kueue::Version::V1beta1, None) => Duration::from_secs(5 * 60),
        (kueue::Version::V1beta2, None) => Duration::from_secs(30 * 60),
    };
    let recovery_path = path.child("recoveryTimeout");
    let recovery_timeout = match w.recovery_timeout.as_deref() {
        None => Some(timeout),
        text => duration(text, &recovery_path, errs).filter(|d| !d.is_zero()),
    };
    let block_admission = w
        .block_admission
        .unwrap_or(version == kueue::Version::V1beta1);
    let rpath = path.child("requeuingStrategy");
    let rs = w.requeuing_strategy.as_ref();
    let timestamp = rs
        .and_then(|r| r.timestamp.clone())
        .unwrap_or_else(|| "Eviction".to_string());
    if timestamp != "Eviction" && timestamp != "Creation" {
        errs.push(FieldError::not_supported(
            &rpath.child("timestamp"),
            &timestamp,
            &["Creation", "Eviction"],
        ));
    }
    let mut non_negative = |field: &str, v: Option<i32>, default: i32| -> u32 {
        let v = v.unwrap_or(default);
        u32::try_from(v).unwrap_or_else(|_| {
            errs.push(FieldError::invalid_num(
                &rpath.child(field),
                v,
                IS_NEGATIVE_MSG,
            ));
            0
        })
    };
    let limit = rs.and_then(|r| r.backoff_limit_count);
    let backoff_limit_count = limit.map(|l| non_negative("backoffLimitCount", Some(l), 0));
    let base = non_negative(
        "backoffBaseSeconds",
        rs.and_then(|r| r.backoff_base_seconds),
        60,
    );
    let max = non_negative(
        "backoffMaxSeconds",
        rs.and_then(|r| r.backoff_max_seconds),
        3600,
    );
    Some(PodsReady {
        timeout,
        block_admission,
        recovery_timeout,
        requeuing: Requeuing {
            timestamp,
            backoff_limit_count,
            backoff_base: Duration::from_secs(base.into()),
            backoff_max: Duration::from_secs(max.into()),
        },
    })
}

fn client_limits(c: Option<&kueue::ClientConnection>, errs: &mut Vec<FieldError>) -> ClientLimits {
    let path = Path::new("clientConnection");
    // Kueue's defaults; as in Kueue, an explicit 0 also means "default".
    let qps = c.and_then(|c| c.qps).filter(|q| *q != 0.0).unwrap_or(300.0);
    let burst = c.and_then(|c| c.burst).filter(|b| *b != 0).unwrap_or(500);
    if !qps.is_finite() || qps < 0.0 {
        errs.push(FieldError::invalid_num(
            &path.child("qps"),
            qps,
            "must be a positive number",
        ));
    }
    let burst = u32::try_from(burst).unwrap_or_else(|_| {
        errs.push(FieldError::invalid_num(
            &path.child("burst"),
            burst,
            IS_NEGATIVE_MSG,
        ));
        1
    });
    ClientLimits { qps, burst }
}

/// `port` if it is a TCP port; else `None`, with the error at `section.field`.
fn valid_port(port: i64, section: &str, field: &str, errs: &mut Vec<FieldError>) -> Option<i64> {
    if (1..=65535).contains(&port) {
        return Some(port);
    }
    let path = Path::new(section).child(field);
    errs.push(FieldError::invalid_num(
        &path,
        port,
        "must be between 1 and 65535",
    ));
    None
}

/// The listeners Kueue's `webhook`, `metrics`, `health` and `visibilityServer` sections set.
fn listeners(cfg: &kueue::Configuration, errs: &mut Vec<FieldError>) -> Listeners {
    let mut out = Listeners::default();
    if let Some(w) = &cfg.webhook {
        let port = match w.port {
            Some(p) => valid_port(p, "webhook", "port", errs),
            // Kueue's default port; a host alone still needs one.
            None => w.host.as_ref().map(|_| 9443),
        };
        out.webhook = port.map(|p| host_port(w.host.as_deref().unwrap_or(""), p));
        out.cert_dir = w
            .cert_dir
            .as_deref()
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
    }
    if let Some(m) = &cfg.metrics {
        out.metrics = m.bind_address.as_deref().map(|a| bind(a, &["0"]));
    }
    if let Some(h) = &cfg.health {
        out.health = h
            .health_probe_bind_address
            .as_deref()
            .map(|a| bind(a, &["0", ""]));
        let name = |n: &Option<String>, field: &str, errs: &mut Vec<FieldError>| {
            let n = n.as_deref()?;
            if n.is_empty() || n.contains(['/', '?', '#']) {
                let p = Path::new("health").child(field);
                errs.push(FieldError::invalid(
                    &p,
                    n,
                    "must be a non-empty path segment",
                ));
                return None;
            }
            Some(n.to_string())
        };
        out.readiness_endpoint = name(&h.readiness_endpoint_name, "readinessEndpointName", errs);
        out.liveness_endpoint = name(&h.liveness_endpoint_name, "livenessEndpointName", errs);
    }
    if let Some(v) = &cfg.visibility_server {
        let port = match v.bind_port {
            Some(p) => valid_port(p, "visibilityServer", "bindPort", errs),
            None => Some(i64::from(crate::visibility::DEFAULT_PORT)),
        };
        out.visibility = port.map(|p| host_port(v.bind_address.as_deref().unwrap_or(""), p));
    }
    out
}

/// A Go bind address (`:8080`, `127.0.0.1:8080`, `[::1]:8080`); `off` values disable it.
fn bind(addr: &str, off: &[&str]) -> Bind {
    if off.contains(&addr) {
        Bind::Off
    } else {
        Bind::Addr(addr.to_string())
    }
}

/// `host:port` as Go's net.JoinHostPort writes it (IPv6 hosts in brackets).
fn host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn leader_election(
    le: Option<&kueue::LeaderElection>,
    namespace: &str,
    errs: &mut Vec<FieldError>,
) -> LeaderElection {
    let path = Path::new("leaderElection");
    let get = |f: fn(&kueue::LeaderElection) -> Option<&String>| le.and_then(f).map(String::as_str);
    let mut dur = |field: &str, text: Option<&str>, default: u64| {
        duration(text, &path.child(field), errs).unwrap_or(Duration::from_secs(default))
    };
    let lease_duration = dur("leaseDuration", get(|l| l.lease_duration.as_ref()), 15);
    let renew_deadline = dur("renewDeadline", get(|l| l.renew_deadline.as_ref()), 10);
    let retry_period = dur("retryPeriod", get(|l| l.retry_period.as_ref()), 2);
    // The Lease counts whole seconds, and the holder must renew before it lapses.
    if lease_duration < Duration::from_secs(1) {
        errs.push(FieldError::invalid_omit(
            &path.child("leaseDuration"),
            "must be at least 1s",
        ));
    }
    if renew_deadline.is_zero() || renew_deadline >= lease_duration {
        errs.push(FieldError::invalid_omit(
            &path.child("renewDeadline"),
            "must be greater than 0 and less than leaseDuration",
        ));
    }
    if retry_period.is_zero() {
        errs.push(FieldError::invalid_omit(
            &path.child("retryPeriod"),
            "must be greater than 0",
        ));
    }
    if let Some(lock) = get(|l| l.resource_lock.as_ref())
        && lock != "leases"
    {
        errs.push(FieldError::not_supported(
            &path.child("resourceLock"),
            lock,
            &["leases"],
        ));
    }
    LeaderElection {
        enabled: le.and_then(|l| l.leader_elect).unwrap_or(true),
        lease_name: get(|l| l.resource_name.as_ref())
            .unwrap_or(DEFAULT_LEASE_NAME)
            .to_string(),
        namespace: get(|l| l.resource_namespace.as_ref())
            .unwrap_or(namespace)
            .to_string(),
        lease_duration,
        renew_deadline,
        retry_period,
    }
}

/// Whether `path` holds a configuration document (for `kuota check`): an apiVersion of
/// Kueue's or kuota's configuration group.
pub fn is_config_file(path: &FsPath) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines().any(|l| {
        let l = l.trim();
        l.starts_with("apiVersion:") && (l.contains(kueue::GROUP) || l.contains(kuota::API_VERSION))
    })
}
