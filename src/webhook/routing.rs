//! Whether the webhook configurations send kuota the Jobs it acts on.
//!
//! `manifests/base/*-webhook.yaml` send Jobs without a queue-name label to kuota's full
//! handling (defaulting, suspension) only from namespaces labelled `kuota.dev/managed=true`,
//! so a kuota outage cannot block Jobs elsewhere (docs/webhook.md, "What a kuota outage
//! blocks"). Everywhere else they reach only kuota's admission policies, through entries
//! that fail open, so a namespace a policy selects is policed whatever its labels. A
//! namespace where kuota would default or suspend such Jobs but that lacks the label
//! silently loses that behaviour; [`unrouted_namespaces`] finds them from the index, and
//! `/readyz` lists them as warnings. Pure: no I/O.

use super::{ClusterIndex, WebhookConfig};

/// Namespace label that routes a namespace's Jobs without a queue name to kuota.
pub const MANAGED_NAMESPACE_LABEL: &str = "kuota.dev/managed";

/// At most this many namespaces are named; the rest are counted.
const MAX_LISTED: usize = 20;

/// One line per namespace where kuota acts on Jobs without a queue name but the label
/// that routes them to it is missing, saying why kuota acts there.
pub fn unrouted_namespaces(index: &ClusterIndex, config: &WebhookConfig) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0usize;
    for (ns, labels) in index.namespaces() {
        if labels.get(MANAGED_NAMESPACE_LABEL).map(String::as_str) == Some("true")
            || !index.is_namespace_managed(&ns)
        {
            continue;
        }
        // Policies are not a reason: the `*-policy.kuota.dev` entries bring them every
        // job without a queue name, whatever the namespace's labels.
        let reason = if config.local_queue_defaulting && index.has_default_local_queue(&ns) {
            "it has a LocalQueue named \"default\"".to_string()
        } else if config.manage_jobs_without_queue_name {
            "manageJobsWithoutQueueName is on".to_string()
        } else {
            continue;
        };
        if out.len() == MAX_LISTED {
            more += 1;
            continue;
        }
        out.push(format!(
            "namespace {ns}: {reason}, but it lacks the {MANAGED_NAMESPACE_LABEL}=true label, \
             so its Jobs without a queue name never reach kuota"
        ));
    }
    if more > 0 {
        out.push(format!("... and {more} more namespaces like these"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::selector::Labels;
    use crate::api::{LocalQueue, LocalQueueSpec};
    use crate::webhook::IndexEvent;

    fn ns(index: &ClusterIndex, name: &str, labels: &[(&str, &str)]) {
        let mut l: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.insert("kubernetes.io/metadata.name".into(), name.into());
        index.apply(IndexEvent::NamespaceApplied {
            name: name.into(),
            labels: l,
        });
    }

    #[test]
    fn namespaces_kuota_acts_on_without_the_label_are_named() {
        let index = ClusterIndex::default();
        ns(&index, "team-a", &[]);
        ns(&index, "team-b", &[(MANAGED_NAMESPACE_LABEL, "true")]);
        ns(&index, "gpu", &[("tier", "gpu")]);
        ns(&index, "plain", &[]);
        ns(&index, "kube-system", &[]);
        for n in ["team-a", "team-b", "kube-system"] {
            let mut q = LocalQueue::new("default", LocalQueueSpec::default());
            q.metadata.namespace = Some(n.into());
            index.apply(IndexEvent::LocalQueueApplied(Box::new(q)));
        }
        let config = WebhookConfig::default();
        // gpu, which an admission policy may select, is not named: policies reach kuota
        // in every namespace.
        assert_eq!(
            unrouted_namespaces(&index, &config),
            vec![
                "namespace team-a: it has a LocalQueue named \"default\", but it lacks the \
                 kuota.dev/managed=true label, so its Jobs without a queue name never reach kuota",
            ]
        );
        let everything = WebhookConfig {
            manage_jobs_without_queue_name: true,
            ..WebhookConfig::default()
        };
        let lines = unrouted_namespaces(&index, &everything);
        assert_eq!(lines.len(), 3, "gpu, plain, team-a: {lines:?}");
    }
}
