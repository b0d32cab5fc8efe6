//! kuota's own settings (`config.kuota.dev/v1alpha1`, kind `KuotaConfiguration`).
//!
//! They live in a document of their own, never inside Kueue's `Configuration`, so a Kueue
//! configuration file stays exactly what Kueue's strict loader accepts.

use serde::Deserialize;

/// The API version of kuota's configuration document.
pub const API_VERSION: &str = "config.kuota.dev/v1alpha1";
/// The kind of kuota's configuration document.
pub const KIND: &str = "KuotaConfiguration";

/// kuota's additions to Kueue's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KuotaConfiguration {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub preemption_protection: Option<PreemptionProtection>,
    pub placement: Option<Placement>,
    pub gang_reservation: Option<GangReservation>,
    pub api_writes: Option<ApiWrites>,
    pub start_estimates: Option<StartEstimates>,
}

/// Start-time estimates of pending workloads (docs/visibility.md, "Start-time estimates").
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartEstimates {
    /// Default true.
    pub enabled: Option<bool>,
    /// At most one forecast pass per this long (default `30s`).
    pub interval: Option<String>,
    /// At most this share of one core on forecast passes, above 0 and at most 1
    /// (default 0.1).
    pub cpu_share: Option<f64>,
    /// The runtime assumed for a workload with no bound and no learned runs (default:
    /// none, and estimates that need it say so).
    pub default_runtime: Option<String>,
    /// How far ahead a start is estimated (default `168h`).
    pub horizon: Option<String>,
    /// Opt-in: write each pending workload's estimate into its `kuota.dev/estimated-start`
    /// annotation when it moves by more than this (e.g. `10m`); absent: served only.
    pub write_threshold: Option<String>,
}

/// The writes kuota makes for people to read rather than to schedule: queue status and
/// Events.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiWrites {
    /// At most one status write per ClusterQueue and LocalQueue per this long, a
    /// duration such as `5s` (default `1s`).
    pub queue_status_interval: Option<String>,
    /// `Lean` (default) or `Kueue`: whether the Workload Events that only repeat another
    /// Event or the Workload's own condition are published too.
    pub events: Option<String>,
}

/// The head gang's reservation with backfill (docs/placement.md, "Head-gang
/// reservation").
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GangReservation {
    /// How far ahead a gang's earliest start may lie for its nodes to be held, a
    /// duration such as `24h`; `0s` turns the reservation off.
    pub horizon: Option<String>,
}

/// Workloads that have run for less than `minRuntime` are not preemption victims.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreemptionProtection {
    /// A duration such as `5m` (`0s`, the default, keeps Kueue's behaviour).
    pub min_runtime: Option<String>,
    /// How long a workload whose job reported success is waited for instead of
    /// preempted (default `1m`; `0s` keeps Kueue's behaviour).
    pub finishing_grace: Option<String>,
}

/// How topology-aware placement chooses domains.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Placement {
    /// `kuota` (default), `kueue-bestfit` or `first-fit`.
    pub strategy: Option<String>,
}
