//! Each MultiKueue AdmissionCheck's `Active` condition, as Kueue's `ACReconciler` keeps it
//! (`pkg/controller/admissionchecks/multikueue/admissioncheck.go`): active while some of
//! its config's workers are connected (`SomeActiveClusters` when not all are), inactive with
//! `BadConfig` when the config cannot be read and `NoUsableClusters` when none is up.

use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::warn;

use crate::api::{AdmissionCheck, MULTIKUEUE_CONTROLLER, MultiKueueCluster, MultiKueueConfig};
use crate::controller::actuate::{Writer, condition};

/// How often every check is looked at even without a change (the stores may lag the
/// change that woke the pass).
const RECHECK: Duration = Duration::from_secs(10);

/// What the pass reads and writes with.
pub struct Ctx {
    pub writer: std::sync::Arc<Writer>,
    pub checks: Store<AdmissionCheck>,
    pub configs: Store<MultiKueueConfig>,
    pub clusters: Store<MultiKueueCluster>,
}

/// The condition Kueue gives a check: active, reason, message.
pub fn condition(
    clusters: Result<&[String], String>,
    cluster: impl Fn(&str) -> Option<bool>,
) -> (bool, &'static str, String) {
    let names = match clusters {
        Ok(names) => names,
        Err(why) => {
            let message = format!("Cannot load the AdmissionChecks parameters: {why}");
            return (false, "BadConfig", message);
        }
    };
    let (mut missing, mut inactive) = (Vec::new(), Vec::new());
    for name in names {
        match cluster(name) {
            None => missing.push(name.as_str()),
            Some(false) => inactive.push(name.as_str()),
            Some(true) => {}
        }
    }
    let unusable = missing.len() + inactive.len();
    if unusable == 0 {
        return (true, "Active", "The admission check is active".into());
    }
    // Go's `%v` of a string slice.
    let list = |v: &[&str]| format!("[{}]", v.join(" "));
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("Missing clusters: {}", list(&missing)));
    }
    if !inactive.is_empty() {
        parts.push(format!("Inactive clusters: {}", list(&inactive)));
    }
    let (active, reason) = if unusable < names.len() {
        (true, "SomeActiveClusters")
    } else {
        (false, "NoUsableClusters")
    };
    (active, reason, parts.join(", "))
}

/// Runs until `changes` ends: a pass over every MultiKueue check after each burst of
/// changes, and every ten seconds.
pub async fn run(ctx: Ctx, mut changes: UnboundedReceiver<()>) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        while changes.try_recv().is_ok() {}
        for ac in ctx.checks.state() {
            if ac.spec.controller_name != MULTIKUEUE_CONTROLLER {
                continue;
            }
            if let Err(e) = set_active(&ctx, &ac).await {
                warn!(admission_check = %ac.name_any(), error = %e, "setting Active failed");
            }
        }
        if let Ok(None) = tokio::time::timeout(RECHECK, changes.next()).await {
            return;
        }
    }
}

async fn set_active(ctx: &Ctx, ac: &AdmissionCheck) -> Result<(), kube::Error> {
    let clusters = super::dispatch::config_clusters(&ctx.configs, ac);
    let (active, reason, message) = condition(clusters.as_deref().map_err(Clone::clone), |n| {
        let c = ctx.clusters.get(&ObjectRef::new(n))?;
        let conditions = c.status.as_ref().map(|s| s.conditions.as_slice());
        Some(
            conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Active" && c.status == "True"),
        )
    });
    let wanted = (active, reason, message.as_str());
    condition::write_check_active(&ctx.writer, ac, wanted, condition::Change::State).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kueues_reasons_and_messages() {
        let names = ["a".to_string(), "b".to_string(), "c".to_string()];
        let up = |n: &str| match n {
            "a" => Some(true),
            "b" => Some(false),
            _ => None,
        };
        assert_eq!(
            condition(Ok(&names), up),
            (
                true,
                "SomeActiveClusters",
                "Missing clusters: [c], Inactive clusters: [b]".into()
            )
        );
        assert_eq!(
            condition(Ok(&names[..1]), up),
            (true, "Active", "The admission check is active".into())
        );
        assert_eq!(
            condition(Ok(&names[1..]), up),
            (
                false,
                "NoUsableClusters",
                "Missing clusters: [c], Inactive clusters: [b]".into()
            )
        );
        let (active, reason, message) = condition(Err("x not found".into()), up);
        assert!(!active);
        assert_eq!(reason, "BadConfig");
        assert_eq!(
            message,
            "Cannot load the AdmissionChecks parameters: x not found"
        );
    }
}
