//! AdmissionCheck (kueue.x-k8s.io/v1beta2, cluster-scoped, short name `ac`): a gate a
//! ClusterQueue puts between quota reservation and admission, run by another controller.
//!
//! kuota only reads these: the controller named in `spec.controllerName` sets the `Active`
//! condition and each Workload's check state; kuota keeps a ClusterQueue inactive while
//! one of its checks is missing or not `Active`, as Kueue's cache does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of an AdmissionCheck: which controller runs it, with which parameters.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "AdmissionCheck",
    plural = "admissionchecks",
    shortname = "ac",
    status = "AdmissionCheckStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// The controller that processes the check (1..=253 characters; immutable).
    pub controller_name: String,
    /// A configuration object with the check's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AdmissionCheckParametersReference>,
}

/// The object holding an AdmissionCheck's parameters.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckParametersReference {
    /// API group of the referenced object (a DNS subdomain).
    pub api_group: String,
    /// Kind of the referenced object.
    pub kind: String,
    /// Name of the referenced object.
    pub name: String,
}

/// Observed state of an AdmissionCheck, written by its controller.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStatus {
    /// Conditions (at most 16), among them `Active`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl AdmissionCheck {
    /// Whether its controller reports it `Active=True` (Kueue's cache reads only that).
    pub fn is_active(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == super::constants::ADMISSION_CHECK_ACTIVE && c.status == "True")
        })
    }
}

/// A Workload's check states, as Kueue's `CheckState` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckState {
    /// Not evaluated yet, or reset after an eviction.
    Pending,
    /// Passed: with quota reserved and every check Ready the workload is admitted.
    Ready,
    /// Cannot pass now: the quota is released and the workload requeued.
    Retry,
    /// Will not pass: the workload is deactivated.
    Rejected,
}

impl CheckState {
    /// Kueue's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Ready => "Ready",
            Self::Retry => "Retry",
            Self::Rejected => "Rejected",
        }
    }

    /// The state a Workload's `status.admissionChecks[].state` names; `None` for anything
    /// else (the CRD enum refuses other values, so only a hand-edited object has one).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Pending" => Self::Pending,
            "Ready" => Self::Ready,
            "Retry" => Self::Retry,
            "Rejected" => Self::Rejected,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn parses_kueue_admission_check_and_its_active_condition() {
        let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: prov-test}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: prov-test-config}
status:
  conditions:
  - {type: Active, status: "True", reason: Active, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
"#;
        let ac: AdmissionCheck = serde_norway::from_str(yaml).expect("valid");
        assert_eq!(AdmissionCheck::plural(&()), "admissionchecks");
        assert_eq!(
            ac.spec.parameters.as_ref().map(|p| p.kind.as_str()),
            Some("ProvisioningRequestConfig")
        );
        assert!(ac.is_active());
        let mut inactive = ac.clone();
        if let Some(s) = inactive.status.as_mut() {
            s.conditions[0].status = "False".into();
        }
        assert!(!inactive.is_active());
        inactive.status = None;
        assert!(!inactive.is_active());
    }

    #[test]
    fn check_states_round_trip_kueue_spelling() {
        for s in [
            CheckState::Pending,
            CheckState::Ready,
            CheckState::Retry,
            CheckState::Rejected,
        ] {
            assert_eq!(CheckState::parse(s.as_str()), Some(s));
        }
        assert_eq!(CheckState::parse("ready"), None);
    }
}
