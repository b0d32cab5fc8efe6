//! The YAML schema of `tests/scenarios/*.yaml` (documented in tests/scenarios/README.md).
//!
//! Every struct denies unknown fields, and files are parsed through
//! `serde_path_to_error`, so a typo fails with the file and the path of the field.
//! Shorthands (a bare string instead of a map) go through `TryFrom<Value>` so that
//! a typo inside the long form still names the field.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_norway::Value;
use std::collections::BTreeMap;

pub mod kueue;
pub mod runner;

/// One scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Must equal the file name without `.yaml`.
    pub name: String,
    /// Why the case matters and which Kueue doc or test it mirrors.
    pub description: String,
    /// Kueue suites only: kuota does not match Kueue here yet; says which issue item
    /// is missing. The case must still fail (the runner reports a pending case that
    /// passes, so the marker is removed once the engine is fixed).
    #[serde(default)]
    pub pending: Option<String>,
    #[serde(default)]
    pub config: Config,
    /// Manifests applied at time 0, before the first step.
    #[serde(default)]
    pub objects: String,
    pub steps: Vec<Step>,
}

/// Kueue Configuration fields that shape scheduling, plus runner switches.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    pub fair_sharing: Option<FairSharingConfig>,
    /// Report `WorkloadEvicted` for every evicting workload before each cycle (default true).
    pub auto_complete_evictions: Option<bool>,
    /// kuota's preemption protection (`EngineConfig::preemption_min_runtime`), in ms.
    pub preemption_min_runtime_ms: Option<i64>,
    /// `EngineConfig::finishing_grace` in virtual ms (default: the engine's).
    pub finishing_grace_ms: Option<i64>,
    /// `EngineConfig::gang_reservation_horizon` in virtual ms (default: the engine's).
    pub gang_reservation_horizon_ms: Option<i64>,
    /// Topology placement strategy: `kuota` (default), `kueue-bestfit` or `first-fit`.
    pub placement: Option<Placement>,
    /// Kueue's `admissionFairSharing` (the feature gate on), durations in ms.
    pub admission_fair_sharing: Option<AdmissionFairSharingConfig>,
}

/// Kueue's `admissionFairSharing`, with virtual-time durations.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AdmissionFairSharingConfig {
    /// `usageHalfLifeTime` in ms (Kueue's default 0: history reset at every sampling).
    pub usage_half_life_ms: Option<i64>,
    /// `usageSamplingInterval` in ms (Kueue's default 5 minutes).
    pub usage_sampling_interval_ms: Option<i64>,
    /// `resourceWeights` (1 for unlisted resources).
    #[serde(default)]
    pub resource_weights: std::collections::BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    Kuota,
    KueueBestfit,
    FirstFit,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FairSharingConfig {
    pub enable: bool,
    /// Kueue's default is `[LessThanOrEqualToFinalShare, LessThanInitialShare]`.
    pub preemption_strategies: Option<Vec<Strategy>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub enum Strategy {
    LessThanOrEqualToFinalShare,
    LessThanInitialShare,
}

/// One step: exactly one action (`expect-load-error` goes with `apply`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Step {
    /// Virtual time in ms; defaults to the previous step's time; never goes back.
    pub at: Option<i64>,
    pub apply: Option<String>,
    pub expect_load_error: Option<LoadErrorExpect>,
    /// Number of scheduling cycles to run.
    pub schedule: Option<u32>,
    pub expect: Option<Expect>,
    /// Workloads (or Jobs) whose pods completed.
    pub finish: Option<Vec<String>>,
    /// `ns/name` of a Workload or Job, or `Kind/name`, `Kind/ns/name` for other objects.
    pub delete: Option<Vec<String>>,
    /// Evicted workloads whose pods are gone.
    pub evict_complete: Option<Vec<String>>,
    /// Admitted workloads whose job reported success while its pods still terminate.
    pub finishing: Option<Vec<String>>,
    /// Node -> resource -> quantity used by pods kuota does not manage
    /// (`NodeExternalUsage`; replaces the node's previous external usage).
    pub node_usage: Option<BTreeMap<String, BTreeMap<String, Value>>>,
    /// Workloads in the compact form (kueue suites; see `kueue::WorkloadSpec`).
    pub workloads: Option<Vec<kueue::WorkloadSpec>>,
}

impl Step {
    /// Checks that the step has exactly one action.
    pub fn validate(&self) -> Result<(), String> {
        let actions = [
            self.apply.is_some(),
            self.schedule.is_some(),
            self.expect.is_some(),
            self.finish.is_some(),
            self.delete.is_some(),
            self.evict_complete.is_some(),
            self.finishing.is_some(),
            self.node_usage.is_some(),
            self.workloads.is_some(),
        ];
        match actions.iter().filter(|a| **a).count() {
            1 => {}
            0 => {
                return Err(
                    "step has no action (apply, schedule, expect, finish, finishing, delete, evict-complete, node-usage, workloads)"
                        .into(),
                );
            }
            _ => return Err("step has more than one action; split it".into()),
        }
        if self.expect_load_error.is_some() && self.apply.is_none() {
            return Err("expect-load-error needs an apply in the same step".into());
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadErrorExpect {
    /// Substring(s) the load error must contain (the file name is always required too).
    pub contains: OneOrMany,
}

/// A string or a list of strings; every one must be a substring.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn items(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// What must hold after the previous steps.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Only check the listed workloads / CQ entries, and skip the "nothing else
    /// was preempted or evicted" checks.
    #[serde(default)]
    pub partial: bool,
    /// Checked only when the case runs under this topology strategy (a kueue suite
    /// with `placements` runs each case once per strategy; where they place
    /// differently, each strategy gets its own expect).
    pub placement: Option<Placement>,
    /// Exactly the workloads in state Admitted (not evicting, not finished).
    pub admitted: Option<BTreeMap<String, Admitted>>,
    /// Exactly the workloads in state Pending.
    pub pending: Option<BTreeMap<String, Pending>>,
    /// Exactly the workloads preempted or evicted that still hold quota.
    pub evicting: Option<Vec<String>>,
    /// Workloads whose pods completed.
    pub finished: Option<Vec<String>>,
    /// Victims of `Preempt` decisions since the previous expect (list, or map to reason).
    pub preempted: Option<Preempted>,
    /// Workloads of `Evict` decisions (stopPolicy, deactivation) since the previous expect.
    pub evicted: Option<Vec<String>>,
    /// ClusterQueue -> `flavor/resource` -> usage.
    pub usage: Option<BTreeMap<String, BTreeMap<String, Usage>>>,
}

/// `cq-name` or `{clusterQueue, flavors: {podset: {resource: flavor}}, count: {podset: n},
/// nodes: {podset: {node: pods}}, domains: {podset: {level-label: [values]}}}`.
#[derive(Debug, Deserialize)]
#[serde(try_from = "Value")]
pub struct Admitted(pub AdmittedFields);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AdmittedFields {
    pub cluster_queue: Option<String>,
    pub flavors: Option<BTreeMap<String, BTreeMap<String, String>>>,
    pub count: Option<BTreeMap<String, i32>>,
    /// Pod set -> node name -> pods placed there (exactly these nodes for the listed pod sets).
    pub nodes: Option<BTreeMap<String, BTreeMap<String, i32>>>,
    /// Pod set -> node label (a topology level) -> the set of its values over the
    /// nodes the pod set was placed on.
    pub domains: Option<BTreeMap<String, BTreeMap<String, Vec<String>>>>,
}

impl TryFrom<Value> for Admitted {
    type Error = String;
    fn try_from(v: Value) -> Result<Self, String> {
        str_or(v, |cq| AdmittedFields {
            cluster_queue: Some(cq),
            ..Default::default()
        })
        .map(Admitted)
    }
}

/// `Reason` or `{reason, message}`; `message` is one or several substrings.
#[derive(Debug, Deserialize)]
#[serde(try_from = "Value")]
pub struct Pending(pub PendingFields);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingFields {
    pub reason: Option<String>,
    pub message: Option<OneOrMany>,
}

impl TryFrom<Value> for Pending {
    type Error = String;
    fn try_from(v: Value) -> Result<Self, String> {
        str_or(v, |r| PendingFields {
            reason: Some(r),
            message: None,
        })
        .map(Pending)
    }
}

/// `"6"` (total) or `{total, borrowed}`.
#[derive(Debug, Deserialize)]
#[serde(try_from = "Value")]
pub struct Usage(pub UsageFields);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageFields {
    pub total: Option<Value>,
    pub borrowed: Option<Value>,
}

impl TryFrom<Value> for Usage {
    type Error = String;
    fn try_from(v: Value) -> Result<Self, String> {
        match v {
            v @ (Value::String(_) | Value::Number(_)) => Ok(Usage(UsageFields {
                total: Some(v),
                borrowed: None,
            })),
            other => serde_norway::from_value(other)
                .map(Usage)
                .map_err(|e| e.to_string()),
        }
    }
}

/// `[ns/wl, ...]` or `{ns/wl: Reason, ...}`.
#[derive(Debug, Deserialize)]
#[serde(try_from = "Value")]
pub struct Preempted(pub BTreeMap<String, Option<String>>);

impl TryFrom<Value> for Preempted {
    type Error = String;
    fn try_from(v: Value) -> Result<Self, String> {
        match v {
            Value::Sequence(_) => serde_norway::from_value::<Vec<String>>(v)
                .map(|l| Preempted(l.into_iter().map(|k| (k, None)).collect()))
                .map_err(|e| e.to_string()),
            other => serde_norway::from_value::<BTreeMap<String, String>>(other)
                .map(|m| Preempted(m.into_iter().map(|(k, r)| (k, Some(r))).collect()))
                .map_err(|e| e.to_string()),
        }
    }
}

fn str_or<T: DeserializeOwned>(v: Value, short: impl FnOnce(String) -> T) -> Result<T, String> {
    match v {
        Value::String(s) => Ok(short(s)),
        other => serde_norway::from_value(other).map_err(|e| e.to_string()),
    }
}

/// Parses a scenario file; the error names the path of the offending field.
pub fn parse(text: &str) -> Result<Scenario, String> {
    let de = serde_norway::Deserializer::from_str(text);
    let sc: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        format!("at `{path}`: {}", e.into_inner())
    })?;
    validate(&sc)?;
    Ok(sc)
}

/// Checks what serde cannot: a description, one action per step.
pub fn validate(sc: &Scenario) -> Result<(), String> {
    if sc.description.trim().is_empty() {
        return Err("`description` must say why the case matters".into());
    }
    for (i, step) in sc.steps.iter().enumerate() {
        step.validate()
            .map_err(|e| format!("at `steps[{i}]`: {e}"))?;
    }
    Ok(())
}

impl Placement {
    /// The name used in configuration and in `name@placement` case names.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Kuota => "kuota",
            Placement::KueueBestfit => "kueue-bestfit",
            Placement::FirstFit => "first-fit",
        }
    }
}
