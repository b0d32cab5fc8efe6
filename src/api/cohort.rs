//! Cohort (kueue.x-k8s.io/v1beta2, cluster-scoped): a node of the hierarchical cohort tree.

use super::common::{FairSharing, FairSharingStatus, ResourceGroup};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a Cohort: its parent, its own shared quota and fair-sharing weight.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Cohort",
    plural = "cohorts",
    status = "CohortStatus",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    /// Parent cohort; `None` makes this cohort a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_name: Option<String>,
    /// Quota shared by the cohort on top of its members' quotas (at most 16 groups).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Fair-sharing weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

impl CohortSpec {
    /// Parent name, treating an empty string like Go's zero value (root cohort).
    pub fn parent(&self) -> Option<&str> {
        self.parent_name.as_deref().filter(|p| !p.is_empty())
    }
}

/// Observed state of a Cohort.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CohortStatus {
    /// Fair-sharing state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn parses_and_scopes() {
        let s: CohortSpec = serde_norway::from_str("parentName: root\n").expect("valid");
        assert_eq!(s.parent(), Some("root"));
        assert_eq!(Cohort::kind(&()), "Cohort");
        assert!(
            crate::api::manifest::strict::strict_from_yaml::<CohortSpec>("parent: root\n")
                .is_none()
        );
    }
}
