//! v1beta1 AdmissionCheck: v1beta2's fields plus the deprecated `retryDelayMinutes`, which
//! v1beta2 dropped (Kueue's conversion drops it too; nothing reads it since Kueue v0.8).

use crate::api::admissioncheck::{self as v2ac, AdmissionCheckParametersReference};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// v1beta1 AdmissionCheck spec.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "AdmissionCheck",
    plural = "admissionchecks",
    shortname = "ac",
    status = "v2ac::AdmissionCheckStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// The controller that processes the check (immutable).
    pub controller_name: String,
    /// Deprecated and unused; Kueue's v1beta1 CRD defaults it to 15.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_delay_minutes: Option<i64>,
    /// A configuration object with the check's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AdmissionCheckParametersReference>,
}

impl From<AdmissionCheck> for v2ac::AdmissionCheck {
    fn from(o: AdmissionCheck) -> Self {
        Self {
            metadata: o.metadata,
            spec: v2ac::AdmissionCheckSpec {
                controller_name: o.spec.controller_name,
                parameters: o.spec.parameters,
            },
            status: o.status,
        }
    }
}

impl From<v2ac::AdmissionCheck> for AdmissionCheck {
    fn from(o: v2ac::AdmissionCheck) -> Self {
        Self {
            metadata: o.metadata,
            spec: AdmissionCheckSpec {
                controller_name: o.spec.controller_name,
                retry_delay_minutes: None,
                parameters: o.spec.parameters,
            },
            status: o.status,
        }
    }
}
