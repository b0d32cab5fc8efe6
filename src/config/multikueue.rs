//! Kueue's `multiKueue` section: the manager's origin label, how long a lost worker is
//! waited for, and which dispatcher nominates workers, with Kueue's defaults
//! (`apis/config/v1beta2/defaults.go`) and validation (`pkg/config/validation.go`).

use std::time::Duration;

use serde::Deserialize;

use super::kueue::Ignored;
use crate::api::validate::{FieldError, Path};

/// Kueue's `MultiKueueDispatcherModeAllAtOnce`: every worker gets a copy at once.
pub const ALL_AT_ONCE: &str = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once";
/// Kueue's `MultiKueueDispatcherModeIncremental`: a few more workers each round.
pub const INCREMENTAL: &str = "kueue.x-k8s.io/multikueue-dispatcher-incremental";

/// The section as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MultiKueueSection {
    pub gc_interval: Option<String>,
    pub origin: Option<String>,
    pub worker_lost_timeout: Option<String>,
    pub dispatcher_name: Option<String>,
    pub external_frameworks: Option<Ignored>,
    pub cluster_profile: Option<Ignored>,
    pub incremental_dispatcher_config: Option<IncrementalDispatcherConfig>,
}

/// Kueue's `incrementalDispatcherConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IncrementalDispatcherConfig {
    pub step_size: Option<i32>,
}

/// Who nominates the worker clusters a Workload is copied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatcher {
    /// Every connected worker of the config at once.
    AllAtOnce,
    /// `step` more workers, in the config's order, every round of five minutes.
    Incremental { step: usize },
    /// Another controller writes `status.nominatedClusterNames` (any other name).
    External(String),
}

/// The MultiKueue settings kuota runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiKueue {
    /// The value of `kueue.x-k8s.io/multikueue-origin` on what this manager creates in
    /// its workers: several managers can share a worker.
    pub origin: String,
    /// How long the worker a Workload was admitted on may stay unreachable before the
    /// Workload is requeued elsewhere.
    pub worker_lost_timeout: Duration,
    pub dispatcher: Dispatcher,
}

impl Default for MultiKueue {
    fn default() -> Self {
        Self {
            origin: "multikueue".into(),
            worker_lost_timeout: Duration::from_secs(15 * 60),
            dispatcher: Dispatcher::AllAtOnce,
        }
    }
}

/// Kueue's defaults for the section, and its rules; errors go to `errs`.
pub fn settings(
    section: Option<&MultiKueueSection>,
    duration: impl Fn(Option<&str>, &Path, &mut Vec<FieldError>) -> Option<Duration>,
    errs: &mut Vec<FieldError>,
) -> MultiKueue {
    let mut out = MultiKueue::default();
    let Some(s) = section else { return out };
    let path = Path::new("multiKueue");
    // Kueue reads `gcInterval` for its garbage collector of orphaned remote objects;
    // kuota removes them while reconciling each Workload, but the value must still parse.
    let _ = duration(s.gc_interval.as_deref(), &path.child("gcInterval"), errs);
    if let Some(origin) = s.origin.as_deref().filter(|o| !o.is_empty()) {
        let problems = crate::api::validate::label_value_errors(origin);
        if problems.is_empty() {
            out.origin = origin.to_string();
        } else {
            errs.push(FieldError::invalid(
                &path.child("origin"),
                origin,
                problems.join("; "),
            ));
        }
    }
    let lost = path.child("workerLostTimeout");
    if let Some(d) = duration(s.worker_lost_timeout.as_deref(), &lost, errs) {
        out.worker_lost_timeout = d;
    }
    let step = s
        .incremental_dispatcher_config
        .as_ref()
        .and_then(|c| c.step_size);
    out.dispatcher = match s.dispatcher_name.as_deref() {
        None | Some("") | Some(ALL_AT_ONCE) => Dispatcher::AllAtOnce,
        Some(INCREMENTAL) => Dispatcher::Incremental {
            step: step
                .and_then(|s| usize::try_from(s).ok())
                .unwrap_or(3)
                .max(1),
        },
        Some(other) => Dispatcher::External(other.to_string()),
    };
    if let Some(idc) = &s.incremental_dispatcher_config {
        let idc_path = path.child("incrementalDispatcherConfig");
        if !matches!(out.dispatcher, Dispatcher::Incremental { .. }) {
            errs.push(FieldError::invalid(
                &idc_path,
                &format!("{idc:?}"),
                "incrementalDispatcherConfig is only valid when dispatcherName is set to the \
                 incremental dispatcher",
            ));
        }
        if let Some(s) = idc.step_size.filter(|s| *s < 1) {
            errs.push(FieldError::invalid(
                &idc_path.child("stepSize"),
                &s.to_string(),
                "must be greater than or equal to 1",
            ));
        }
    }
    out
}
