//! ProvisioningRequestConfig (kueue.x-k8s.io/v1beta2, cluster-scoped, short name `prc`): the
//! parameters of an AdmissionCheck run by Kueue's ProvisioningRequest controller
//! (`kueue.x-k8s.io/provisioning-request`), which asks the cluster autoscaler for the
//! nodes a Workload needs before it starts. v1beta1 has the same fields.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller name of Kueue's ProvisioningRequest admission check.
pub const PROVISIONING_REQUEST_CONTROLLER: &str = "kueue.x-k8s.io/provisioning-request";

/// How the ProvisioningRequests of a check are made.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ProvisioningRequestConfig",
    plural = "provisioningrequestconfigs",
    shortname = "prc",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestConfigSpec {
    /// The autoscaler's provisioning class (a DNS subdomain, 1..=253 characters), for
    /// example `check-capacity.autoscaling.x-k8s.io` or `queued-provisioning.gke.io`.
    pub provisioning_class_name: String,
    /// Other parameters the class takes (at most 100).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// The resources the autoscaler provides (at most 100). Empty: all of them. Otherwise
    /// only pod sets requesting one of them are in the request, and a Workload with none
    /// needs no request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_resources: Vec<String>,
    /// Retries of a failed or expired request; Kueue's defaults when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_strategy: Option<ProvisioningRequestRetryStrategy>,
    /// Node selector entries taken from the request's `provisioningClassDetails`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_updates: Option<ProvisioningRequestPodSetUpdates>,
    /// Pod sets that match under this policy are sent to the autoscaler as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_merge_policy: Option<PodSetMergePolicy>,
}

/// Retries of a ProvisioningRequest: the `n`-th waits `min(base × 2^(n−1), max)` seconds.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestRetryStrategy {
    /// Retries before the Workload is deactivated (default 3; 0 turns retrying off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit_count: Option<i32>,
    /// The first retry's delay in seconds (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_base_seconds: Option<i32>,
    /// The longest delay in seconds (default 1800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_max_seconds: Option<i32>,
}

/// Updates of the pod sets once their request is provisioned.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestPodSetUpdates {
    /// Node selector entries (at most 8, keys unique).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_selector: Vec<ProvisioningRequestNodeSelector>,
}

/// One node selector entry whose value the autoscaler returns.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestNodeSelector {
    /// The node selector's key (a label key).
    pub key: String,
    /// The key of `status.provisioningClassDetails` holding the value.
    pub value_from_provisioning_class_detail: String,
}

/// Which pod sets one request entry may stand for.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodSetMergePolicy {
    /// Pod sets whose templates are equal.
    IdenticalPodTemplates,
    /// Pod sets equal in what scheduling looks at: their containers' and init containers'
    /// resources, and the pod's resources, node selector, tolerations, affinity and
    /// resource claims.
    IdenticalWorkloadSchedulingRequirements,
}

/// A retry strategy with Kueue's defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryStrategy {
    /// Retries before the Workload is deactivated.
    pub limit: i32,
    /// The first retry's delay, in seconds.
    pub base_seconds: i32,
    /// The longest delay, in seconds.
    pub max_seconds: i32,
}

impl ProvisioningRequestConfigSpec {
    /// The retry strategy, each absent field taking Kueue's CRD default (3, 60 s, 1800 s).
    pub fn retry(&self) -> RetryStrategy {
        let s = self.retry_strategy.clone().unwrap_or_default();
        RetryStrategy {
            limit: s.backoff_limit_count.unwrap_or(3),
            base_seconds: s.backoff_base_seconds.unwrap_or(60),
            max_seconds: s.backoff_max_seconds.unwrap_or(1800),
        }
    }
}

impl RetryStrategy {
    /// Kueue's `UpdateAdmissionCheckRequeueState`: the delay before the `retry`-th retry
    /// (1-based), `base × 2^(retry−1)` capped at the maximum, whole seconds.
    pub fn delay_seconds(&self, retry: i32) -> i32 {
        let base = i64::from(self.base_seconds.max(0));
        let exp = u32::try_from(retry.saturating_sub(1).clamp(0, 40)).unwrap_or(0);
        let delay = base.saturating_mul(1_i64 << exp);
        i32::try_from(delay.min(i64::from(self.max_seconds.max(0)))).unwrap_or(i32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kueue_sample_reads_with_its_defaults() {
        let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ProvisioningRequestConfig\n\
                    metadata: {name: prov-test-config}\nspec:\n  provisioningClassName: \
                    check-capacity.autoscaling.x-k8s.io\n  managedResources: [nvidia.com/gpu]\n";
        let prc: ProvisioningRequestConfig = serde_norway::from_str(yaml).expect("decodes");
        assert_eq!(prc.spec.managed_resources, ["nvidia.com/gpu"]);
        let retry = prc.spec.retry();
        assert_eq!(
            (retry.limit, retry.base_seconds, retry.max_seconds),
            (3, 60, 1800)
        );
    }

    #[test]
    fn retry_delays_double_up_to_the_maximum() {
        let r = RetryStrategy {
            limit: 9,
            base_seconds: 60,
            max_seconds: 1800,
        };
        let delays: Vec<i32> = (1..=7).map(|n| r.delay_seconds(n)).collect();
        assert_eq!(delays, [60, 120, 240, 480, 960, 1800, 1800]);
        let zero = RetryStrategy {
            base_seconds: 0,
            ..r
        };
        assert_eq!(zero.delay_seconds(3), 0);
        assert_eq!(r.delay_seconds(i32::MAX), 1800);
    }
}
