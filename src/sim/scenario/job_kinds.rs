//! The job kinds of kuota's integrations in manifest files: which ones the loader keeps for
//! them, and the Workload each would get, built by the kind's own integration.

use crate::api::Workload;
use crate::api::manifest::{ForeignKind, ForeignKinds, ForeignObject};
use crate::integrations::{self, IntegrationError, JobIntegration, JobObject, RuleOptions};

/// Accepts every kind an integration runs; refuses, with the reason, the kinds of Kueue's
/// frameworks kuota does not run, so a file written for Kueue is not read as if it would.
pub(super) struct JobKinds;

impl ForeignKinds for JobKinds {
    fn classify(&self, api_version: &str, kind: &str) -> ForeignKind {
        if integrations::for_kind(api_version, kind).is_some() || referenced_kind(api_version, kind)
        {
            return ForeignKind::Accept;
        }
        match integrations::not_run_framework(api_version, kind) {
            Some(framework) => ForeignKind::Refuse(format!(
                "kind: Unsupported value: {kind:?}: kuota does not run Kueue's {framework:?} \
                 framework, so it would not queue this {kind} (its queue-name label is \
                 ignored; only pods carrying the label themselves are queued, one by one, \
                 when the \"pod\" framework is enabled)"
            )),
            None => ForeignKind::Unknown,
        }
    }
}

/// What a kind's object yields without a cluster.
pub(super) enum Standalone {
    /// The Workload Kueue would create for it.
    Workload(Box<Workload>),
    /// Its Workloads come from objects only the cluster has (a pod group's other pods, a
    /// LeaderWorkerSet's groups, a TrainJob's runtime): its own rules passed.
    NeedsCluster(&'static str),
    /// An object a job refers to (a TrainJob's runtime): nothing to queue.
    Referenced,
}

/// Whether some kind refers to objects of this kind for its pod sets.
fn referenced_kind(api_version: &str, kind: &str) -> bool {
    integrations::all().into_iter().any(|i| {
        i.dependency_resources()
            .iter()
            .any(|r| r.api_version == api_version && r.kind == kind)
    })
}

/// The kind's webhook rules on the object and, when it alone decides them, its Workload.
pub(super) fn standalone(obj: &ForeignObject) -> Result<Standalone, IntegrationError> {
    let Some(integration) = integrations::for_kind(&obj.api_version, &obj.kind) else {
        if referenced_kind(&obj.api_version, &obj.kind) {
            return Ok(Standalone::Referenced);
        }
        // The loader keeps only kinds `JobKinds` accepts.
        return Err(IntegrationError {
            errors: vec![crate::api::validate::FieldError::not_supported(
                &crate::api::validate::Path::new("kind"),
                &obj.kind,
                &[],
            )],
        });
    };
    let needs_cluster = needs_cluster(integration, &obj.object)?;
    if let Some(why) = needs_cluster {
        let job = JobObject::from_value(&obj.object).map_err(|e| {
            IntegrationError::from(crate::api::validate::FieldError::invalid_omit(
                &crate::api::validate::Path::new(""),
                e.to_string(),
            ))
        })?;
        let errors = integration.validate_create(&job, &RuleOptions::default());
        if !errors.is_empty() {
            return Err(IntegrationError { errors });
        }
        return Ok(Standalone::NeedsCluster(why));
    }
    integration
        .workload(&obj.object)
        .map(|wl| Standalone::Workload(Box::new(wl)))
}

/// Why a kind's Workload cannot be built from the object alone, if it cannot.
fn needs_cluster(
    integration: &dyn JobIntegration,
    object: &serde_json::Value,
) -> Result<Option<&'static str>, IntegrationError> {
    if integration.composed().is_some() {
        return Ok(Some("its Workloads are built from its pods in the cluster"));
    }
    if !integration.dependencies(object)?.is_empty() {
        return Ok(Some(
            "its pod sets come from objects it refers to in the cluster",
        ));
    }
    Ok(None)
}
