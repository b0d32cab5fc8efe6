//! The cluster autoscaler's `autoscaling.x-k8s.io/v1` ProvisioningRequest as this controller
//! reads and writes it, and the names Kueue gives the requests and pod templates it makes
//! (`pkg/controller/admissionchecks/provisioning/provisioning.go`), so that a request made
//! by Kueue is found by kuota after a migration, and the other way round.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

/// What to provision: pod templates and how many pods of each.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "autoscaling.x-k8s.io",
    version = "v1",
    kind = "ProvisioningRequest",
    plural = "provisioningrequests",
    namespaced,
    status = "ProvisioningRequestStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestSpec {
    /// The provisioning class (immutable).
    pub provisioning_class_name: String,
    /// The class's parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// The pods to make room for (1..=32 entries).
    #[serde(default)]
    pub pod_sets: Vec<RequestPodSet>,
}

/// One group of identical pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestPodSet {
    /// The PodTemplate, in the request's namespace.
    pub pod_template_ref: TemplateRef,
    /// How many pods.
    pub count: i32,
}

/// A PodTemplate's name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TemplateRef {
    /// The PodTemplate's name.
    #[serde(default)]
    pub name: String,
}

/// What the autoscaler reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestStatus {
    /// `Accepted`, `Provisioned`, `Failed`, `BookingExpired`, `CapacityRevoked`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Class-specific details, such as the node pool the capacity is in.
    #[serde(default)]
    pub provisioning_class_details: BTreeMap<String, String>,
}

/// The autoscaler's conditions.
pub mod condition {
    /// The request was accepted.
    pub const ACCEPTED: &str = "Accepted";
    /// The capacity is there.
    pub const PROVISIONED: &str = "Provisioned";
    /// The capacity could not be provided.
    pub const FAILED: &str = "Failed";
    /// The capacity was held for the request, and the hold has run out.
    pub const BOOKING_EXPIRED: &str = "BookingExpired";
    /// The capacity was taken back.
    pub const CAPACITY_REVOKED: &str = "CapacityRevoked";
}

/// The pod annotation naming the request a pod consumes.
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// The pod annotation naming the request's provisioning class.
pub const CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
/// Kueue's label on the requests and templates it makes.
pub const MANAGED_LABEL: &str = "kueue.x-k8s.io/managed";
/// Workload annotations with this prefix become request parameters.
pub use crate::api::constants::PROVREQ_ANNOTATION_PREFIX as PARAMETER_ANNOTATION_PREFIX;

impl ProvisioningRequest {
    /// The message of condition `type_` when it is `True`.
    pub fn true_condition(&self, type_: &str) -> Option<&str> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| c.message.as_str())
    }

    /// The message of condition `type_`, whatever its status.
    pub fn condition_message(&self, type_: &str) -> Option<&str> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.message.as_str())
    }
}

/// Kueue's longest name before a hash is appended (253 − '-' − 5 hash characters).
const MAX_PREFIX: usize = 252 - 5;

/// Kueue's `limitObjectName`: names over the limit are cut and suffixed with 5 hex digits
/// of their SHA-1.
fn limit(full: String) -> String {
    if full.len() <= MAX_PREFIX {
        return full;
    }
    let hash = Sha1::digest(full.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    // Kubernetes names are ASCII, so a byte cut is a character cut.
    format!("{}-{}", &full[..MAX_PREFIX], &hex[..5])
}

/// The request for `workload`'s check `check`, attempt `attempt`.
pub fn request_name(workload: &str, check: &str, attempt: i32) -> String {
    limit(format!("{workload}-{check}-{attempt}"))
}

/// The pod template of `pod_set` in request `request`.
pub fn template_name(request: &str, pod_set: &str) -> String {
    limit(format!("ppt-{request}-{pod_set}"))
}

/// The attempt a request of `workload`'s check `check` is, if its name is one of theirs.
pub fn attempt_of(request: &str, workload: &str, check: &str) -> Option<i32> {
    let prefix = limit(format!("{workload}-{check}-"));
    let digits = request.strip_prefix(&prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Kueue reads an unparsable number as attempt 1.
    Some(digits.parse().unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kueues() {
        assert_eq!(request_name("job-a-1b2c3", "prov", 2), "job-a-1b2c3-prov-2");
        assert_eq!(
            template_name("job-a-1b2c3-prov-2", "main"),
            "ppt-job-a-1b2c3-prov-2-main"
        );
        assert_eq!(
            attempt_of("job-a-1b2c3-prov-12", "job-a-1b2c3", "prov"),
            Some(12)
        );
        assert_eq!(
            attempt_of("job-a-1b2c3-prov2-1", "job-a-1b2c3", "prov"),
            None
        );
        assert_eq!(attempt_of("job-a-1b2c3-prov-", "job-a-1b2c3", "prov"), None);
    }

    #[test]
    fn long_names_are_cut_and_hashed() {
        let wl = "w".repeat(250);
        let name = request_name(&wl, "prov", 1);
        assert_eq!(name.len(), 253);
        assert!(name.starts_with(&"w".repeat(247)));
        // The same input always gives the same name, and its attempt reads back.
        assert_eq!(name, request_name(&wl, "prov", 1));
        assert_ne!(name, request_name(&wl, "prov", 2));
    }
}
