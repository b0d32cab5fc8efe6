//! Which namespaces' jobs without a queue name the controller manages under Kueue's
//! `manageJobsWithoutQueueName`: those `managedJobsNamespaceSelector` selects, and never
//! kube-system or kuota's own namespace, whatever the selector says (a kuota that suspends
//! the control plane's jobs, or its own, could not recover).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::{Api, Client};

use crate::api::selector::{Labels, label_selector_matches};

/// How long a namespace's answer is trusted (its labels rarely change).
const ANSWER_TTL: Duration = Duration::from_secs(30);

/// The namespaces whose unlabelled jobs are managed.
#[derive(Clone, Debug)]
pub struct ManagedNamespaces {
    /// Kueue's `managedJobsNamespaceSelector`.
    pub selector: LabelSelector,
    /// Never managed for unlabelled jobs: kube-system and kuota's own namespace.
    pub protected: Vec<String>,
}

impl Default for ManagedNamespaces {
    /// Kueue's default: every namespace but kube-system and kuota's own (`kuota-system`).
    fn default() -> Self {
        Self::excluding("kuota-system")
    }
}

impl ManagedNamespaces {
    /// Kueue's default selector for kuota running in `own`.
    pub fn excluding(own: &str) -> Self {
        let protected = vec!["kube-system".to_string(), own.to_string()];
        Self {
            selector: LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "kubernetes.io/metadata.name".to_string(),
                    operator: "NotIn".to_string(),
                    values: Some(protected.clone()),
                }]),
                match_labels: None,
            },
            protected,
        }
    }

    /// Whether unlabelled jobs in namespace `name`, labelled `labels`, are managed.
    pub fn manages(&self, name: &str, labels: &Labels) -> bool {
        !self.protected.iter().any(|p| p == name) && label_selector_matches(&self.selector, labels)
    }
}

/// [`ManagedNamespaces`] answered from the API server, each namespace's answer cached.
#[derive(Clone)]
pub struct NamespaceCheck {
    scope: Arc<ManagedNamespaces>,
    answers: moka::sync::Cache<String, bool>,
}

impl NamespaceCheck {
    /// A check of `scope`.
    pub fn new(scope: ManagedNamespaces) -> Self {
        Self {
            scope: Arc::new(scope),
            answers: moka::sync::Cache::builder()
                .time_to_live(ANSWER_TTL)
                .max_capacity(100_000)
                .build(),
        }
    }

    /// Whether unlabelled jobs in namespace `name` are managed; reads the namespace once
    /// per [`ANSWER_TTL`].
    pub async fn manages(&self, client: &Client, name: &str) -> Result<bool, kube::Error> {
        if self.scope.protected.iter().any(|p| p == name) {
            return Ok(false);
        }
        if let Some(answer) = self.answers.get(name) {
            return Ok(answer);
        }
        let ns = Api::<Namespace>::all(client.clone()).get(name).await?;
        let labels = ns.metadata.labels.unwrap_or_default();
        let answer = self.scope.manages(name, &labels);
        self.answers.insert(name.to_string(), answer);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(name: &str) -> Labels {
        [("kubernetes.io/metadata.name".to_string(), name.to_string())].into()
    }

    #[test]
    fn kube_system_and_kuotas_namespace_are_never_managed_whatever_the_selector() {
        let default = ManagedNamespaces::excluding("kuota");
        assert!(default.manages("team-a", &labels("team-a")));
        assert!(!default.manages("kube-system", &labels("kube-system")));
        assert!(!default.manages("kuota", &labels("kuota")));
        let everything = ManagedNamespaces {
            selector: LabelSelector::default(),
            ..ManagedNamespaces::excluding("kuota")
        };
        assert!(everything.manages("team-a", &labels("team-a")));
        assert!(!everything.manages("kube-system", &labels("kube-system")));
        assert!(!everything.manages("kuota", &labels("kuota")));
        let team = ManagedNamespaces {
            selector: LabelSelector {
                match_labels: Some([("team".to_string(), "a".to_string())].into()),
                match_expressions: None,
            },
            ..ManagedNamespaces::excluding("kuota")
        };
        let mut a = labels("x");
        a.insert("team".into(), "a".into());
        assert!(team.manages("x", &a));
        assert!(!team.manages("y", &labels("y")));
    }
}
