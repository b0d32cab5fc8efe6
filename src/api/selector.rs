//! Label-selector, node-affinity and toleration matching, with Kubernetes' semantics.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Whether a `LabelSelector` selects `labels`. An empty selector (`{}`) selects
/// everything; for "no selector selects nothing" see [`optional_selector_matches`].
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    sel.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v))
        && sel.match_expressions.iter().flatten().all(|e| expression_matches(e, labels))
}

/// Kueue's reading of an optional namespaceSelector: absent selects nothing.
pub fn optional_selector_matches(sel: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    sel.is_some_and(|s| selector_matches(s, labels))
}

fn expression_matches(e: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = e.values.as_deref().unwrap_or_default();
    let v = labels.get(&e.key);
    match e.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        // An unknown operator is rejected by the API server; select nothing rather than guess.
        _ => false,
    }
}

fn node_requirement_matches(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let v = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => v.is_some_and(|v| values.contains(v)),
        "NotIn" => v.is_none_or(|v| !values.contains(v)),
        "Exists" => v.is_some(),
        "DoesNotExist" => v.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (v.and_then(|v| v.parse::<i64>().ok()), values.first().and_then(|b| b.parse::<i64>().ok()))
            else {
                return false;
            };
            if r.operator == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// Whether a flavor's node labels can satisfy the pod's nodeSelector and required
/// node affinity, looking only at `keys` (the label keys the resource group's
/// flavors use), as Kueue's flavor assigner does: other keys are the
/// kube-scheduler's business, not the flavor's.
pub fn flavor_matches(pod: &PodSpec, flavor_labels: &BTreeMap<String, String>, keys: &BTreeSet<String>) -> bool {
    for (k, v) in pod.node_selector.iter().flatten() {
        if keys.contains(k) && flavor_labels.get(k) != Some(v) {
            return false;
        }
    }
    let terms = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|ns| ns.node_selector_terms.as_slice())
        .unwrap_or_default();
    if terms.is_empty() {
        return true;
    }
    // Terms are OR'ed; the requirements inside a term are AND'ed.
    terms.iter().any(|t| {
        t.match_expressions
            .iter()
            .flatten()
            .filter(|r| keys.contains(&r.key))
            .all(|r| node_requirement_matches(r, flavor_labels))
    })
}

/// The first NoSchedule/NoExecute taint that `tolerations` do not tolerate.
pub fn tolerates_all<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if tol.effect.as_deref().is_some_and(|e| !e.is_empty() && e != taint.effect) {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or_default();
    match tol.operator.as_deref().unwrap_or("Equal") {
        // An empty key with Exists tolerates everything.
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" => key == taint.key && tol.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn empty_selector_selects_all_and_none_selects_nothing() {
        let l = labels(&[("team", "a")]);
        assert!(selector_matches(&LabelSelector::default(), &l));
        assert!(!optional_selector_matches(None, &l));
    }

    #[test]
    fn expressions() {
        let sel: LabelSelector = serde_json::from_str(
            r#"{"matchExpressions":[{"key":"team","operator":"In","values":["a","b"]},{"key":"x","operator":"DoesNotExist"}]}"#,
        )
        .unwrap();
        assert!(selector_matches(&sel, &labels(&[("team", "a")])));
        assert!(!selector_matches(&sel, &labels(&[("team", "c")])));
        assert!(!selector_matches(&sel, &labels(&[("team", "a"), ("x", "1")])));
    }

    #[test]
    fn flavor_matching_only_looks_at_flavor_keys() {
        let pod: PodSpec =
            serde_json::from_str(r#"{"containers":[],"nodeSelector":{"gpu":"a100","zone":"z1"}}"#).unwrap();
        let keys: BTreeSet<String> = ["gpu".to_string()].into();
        assert!(flavor_matches(&pod, &labels(&[("gpu", "a100")]), &keys));
        assert!(!flavor_matches(&pod, &labels(&[("gpu", "h100")]), &keys));
    }

    #[test]
    fn taints_need_matching_tolerations() {
        let taint: Taint = serde_json::from_str(r#"{"key":"spot","value":"true","effect":"NoSchedule"}"#).unwrap();
        let tol: Toleration = serde_json::from_str(r#"{"key":"spot","operator":"Equal","value":"true"}"#).unwrap();
        let taints = [taint];
        assert!(tolerates_all(&taints, &[]).is_some());
        assert!(tolerates_all(&taints, &[tol]).is_none());
    }
}
