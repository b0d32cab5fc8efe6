//! Label-selector, node-affinity and toleration matching with Kubernetes semantics, plus
//! Kueue's flavor-selection rule (only label keys the flavors use are considered).

use super::resourceflavor::ResourceFlavorSpec;
use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use std::collections::{BTreeMap, BTreeSet};

/// Label map type used throughout (Kubernetes labels are `BTreeMap` in k8s-openapi).
pub type Labels = BTreeMap<String, String>;

/// Whether a metav1 LabelSelector matches `labels` (matchLabels AND matchExpressions).
///
/// An empty selector `{}` matches everything. An unknown operator matches nothing, as
/// Kubernetes refuses to build such a selector.
pub fn label_selector_matches(sel: &LabelSelector, labels: &Labels) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    labels_ok
        && sel
            .match_expressions
            .iter()
            .flatten()
            .all(|r| label_requirement_matches(r, labels))
}

fn label_requirement_matches(r: &LabelSelectorRequirement, labels: &Labels) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let actual = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => actual.is_some_and(|a| values.contains(a)),
        "NotIn" => actual.is_none_or(|a| !values.contains(a)),
        "Exists" => actual.is_some(),
        "DoesNotExist" => actual.is_none(),
        _ => false,
    }
}

/// ClusterQueue `namespaceSelector` semantics: unset (`None`) admits no namespace, `{}` admits all.
pub fn namespace_selector_matches(sel: Option<&LabelSelector>, namespace_labels: &Labels) -> bool {
    sel.is_some_and(|s| label_selector_matches(s, namespace_labels))
}

/// Whether a selector is the match-everything selector `{}` (no labels, no expressions).
pub fn selects_everything(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && sel.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Whether an optional namespace selector admits no namespace at all (it is unset).
pub fn selects_nothing(sel: Option<&LabelSelector>) -> bool {
    sel.is_none()
}

/// The pod's `nodeSelector`, or an empty map.
pub fn node_selector(pod: &PodSpec) -> &Labels {
    static EMPTY: Labels = BTreeMap::new();
    pod.node_selector.as_ref().unwrap_or(&EMPTY)
}

/// The pod's required node-affinity terms (OR'ed); empty when there is no required affinity.
pub fn required_node_affinity_terms(pod: &PodSpec) -> &[NodeSelectorTerm] {
    pod.affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|ns| ns.node_selector_terms.as_slice())
        .unwrap_or_default()
}

/// Whether one node-selector requirement holds for a node's labels (In, NotIn, Exists,
/// DoesNotExist, Gt, Lt); unknown operators never hold.
pub fn node_requirement_matches(r: &NodeSelectorRequirement, labels: &Labels) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let actual = labels.get(&r.key);
    let compare = |want: std::cmp::Ordering| {
        // Kubernetes requires exactly one integer value and an integer label.
        let (Some(a), [v]) = (actual, values) else {
            return false;
        };
        match (a.parse::<i64>(), v.parse::<i64>()) {
            (Ok(a), Ok(v)) => a.cmp(&v) == want,
            _ => false,
        }
    };
    match r.operator.as_str() {
        "In" => actual.is_some_and(|a| values.contains(a)),
        "NotIn" => actual.is_none_or(|a| !values.contains(a)),
        "Exists" => actual.is_some(),
        "DoesNotExist" => actual.is_none(),
        "Gt" => compare(std::cmp::Ordering::Greater),
        "Lt" => compare(std::cmp::Ordering::Less),
        _ => false,
    }
}

/// Whether a node-selector term holds: all expressions match, and all `metadata.name`
/// field requirements match `node_name`. A term with no requirements matches nothing.
pub fn node_term_matches(
    term: &NodeSelectorTerm,
    labels: &Labels,
    node_name: Option<&str>,
) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let field_ok = |r: &NodeSelectorRequirement| {
        if r.key != "metadata.name" {
            return false;
        }
        let mut name_labels = Labels::new();
        if let Some(n) = node_name {
            name_labels.insert(r.key.clone(), n.to_string());
        }
        node_requirement_matches(r, &name_labels)
    };
    exprs.iter().all(|r| node_requirement_matches(r, labels)) && fields.iter().all(field_ok)
}

/// kube-scheduler's NodeAffinity filter: nodeSelector AND (any required affinity term).
pub fn node_matches(pod: &PodSpec, labels: &Labels, node_name: Option<&str>) -> bool {
    let selector_ok = node_selector(pod)
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    let terms = required_node_affinity_terms(pod);
    selector_ok
        && (terms.is_empty()
            || terms
                .iter()
                .any(|t| node_term_matches(t, labels, node_name)))
}

/// Kueue's flavor check: does a pod set fit a flavor's node labels?
///
/// Only keys in `relevant_keys` (the node-label keys used by the flavors of the resource
/// group) are considered. nodeSelector entries are AND'ed; required affinity terms are
/// OR'ed, and if any term has no relevant expression left the affinity is dropped, since an
/// OR with an unconstrained term constrains nothing.
pub fn flavor_matches(
    pod: &PodSpec,
    flavor_node_labels: &Labels,
    relevant_keys: &BTreeSet<String>,
) -> bool {
    flavor_matches_with(pod, flavor_node_labels, |k| relevant_keys.contains(k))
}

/// [`flavor_matches`] with the relevant-key set given as a predicate.
pub fn flavor_matches_with(
    pod: &PodSpec,
    flavor_node_labels: &Labels,
    is_relevant: impl Fn(&str) -> bool,
) -> bool {
    let selector_ok = node_selector(pod)
        .iter()
        .filter(|(k, _)| is_relevant(k))
        .all(|(k, v)| flavor_node_labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    let terms = required_node_affinity_terms(pod);
    let mut filtered: Vec<Vec<&NodeSelectorRequirement>> = Vec::with_capacity(terms.len());
    for t in terms {
        let kept: Vec<_> = t
            .match_expressions
            .iter()
            .flatten()
            .filter(|r| is_relevant(&r.key))
            .collect();
        if kept.is_empty() {
            return true;
        }
        filtered.push(kept);
    }
    filtered.is_empty()
        || filtered.iter().any(|reqs| {
            reqs.iter()
                .all(|r| node_requirement_matches(r, flavor_node_labels))
        })
}

/// Kubernetes `Toleration.ToleratesTaint`.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty())
        && e != taint.effect
    {
        return false;
    }
    if let Some(k) = t.key.as_deref().filter(|k| !k.is_empty())
        && k != taint.key
    {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// The first NoSchedule/NoExecute taint no toleration tolerates; `None` if all are tolerated.
/// PreferNoSchedule taints are ignored, as by the scheduler's filter and Kueue.
pub fn tolerates_all<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Kueue's taint check for a flavor: the pod's tolerations plus the flavor's own
/// `tolerations` against the flavor's `nodeTaints`. Returns the first untolerated taint.
pub fn untolerated_flavor_taint<'a>(
    pod: &PodSpec,
    flavor: &'a ResourceFlavorSpec,
) -> Option<&'a Taint> {
    let taints = flavor.node_taints.as_deref().unwrap_or_default();
    if taints.is_empty() {
        return None;
    }
    let mut tols: Vec<Toleration> = pod.tolerations.clone().unwrap_or_default();
    tols.extend(flavor.tolerations.iter().flatten().cloned());
    tolerates_all(taints, &tols)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(yaml: &str) -> LabelSelector {
        serde_norway::from_str(yaml).expect("valid selector")
    }

    fn pod(yaml: &str) -> PodSpec {
        serde_norway::from_str(yaml).expect("valid pod spec")
    }

    #[test]
    fn label_selector_semantics() {
        let l = labels(&[("team", "a"), ("env", "prod")]);
        assert!(label_selector_matches(&sel("{}"), &l));
        assert!(label_selector_matches(&sel("matchLabels: {team: a}"), &l));
        assert!(!label_selector_matches(&sel("matchLabels: {team: b}"), &l));
        assert!(label_selector_matches(
            &sel("matchExpressions: [{key: team, operator: In, values: [a, b]}]"),
            &l
        ));
        assert!(label_selector_matches(
            &sel("matchExpressions: [{key: x, operator: NotIn, values: [a]}]"),
            &l
        ));
        assert!(!label_selector_matches(
            &sel("matchExpressions: [{key: env, operator: NotIn, values: [prod]}]"),
            &l
        ));
        assert!(label_selector_matches(
            &sel("matchExpressions: [{key: env, operator: Exists}]"),
            &l
        ));
        assert!(label_selector_matches(
            &sel("matchExpressions: [{key: x, operator: DoesNotExist}]"),
            &l
        ));
        assert!(!label_selector_matches(
            &sel("matchExpressions: [{key: env, operator: Bogus}]"),
            &l
        ));
    }

    #[test]
    fn namespace_selector_nil_vs_empty() {
        let l = labels(&[("a", "b")]);
        assert!(!namespace_selector_matches(None, &l));
        assert!(namespace_selector_matches(Some(&sel("{}")), &l));
        assert!(selects_nothing(None));
        assert!(selects_everything(&sel("{}")));
        assert!(!selects_everything(&sel("matchLabels: {a: b}")));
    }

    const AFFINITY: &str = r#"
nodeSelector: {cloud.com/arch: x86, unrelated: foo}
containers: []
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions: [{key: gpu, operator: In, values: [a100]}]
      - matchExpressions: [{key: gpu, operator: In, values: [h100]}, {key: other, operator: Exists}]
"#;

    #[test]
    fn flavor_matching_uses_only_relevant_keys() {
        let p = pod(AFFINITY);
        let keys: BTreeSet<String> = ["cloud.com/arch", "gpu"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(flavor_matches(
            &p,
            &labels(&[("cloud.com/arch", "x86"), ("gpu", "a100")]),
            &keys
        ));
        assert!(flavor_matches(
            &p,
            &labels(&[("cloud.com/arch", "x86"), ("gpu", "h100")]),
            &keys
        ));
        assert!(!flavor_matches(
            &p,
            &labels(&[("cloud.com/arch", "x86"), ("gpu", "t4")]),
            &keys
        ));
        assert!(!flavor_matches(
            &p,
            &labels(&[("cloud.com/arch", "arm"), ("gpu", "a100")]),
            &keys
        ));
        // Missing relevant label: In fails.
        assert!(!flavor_matches(
            &p,
            &labels(&[("cloud.com/arch", "x86")]),
            &keys
        ));
        // Only arch relevant: every affinity term empties, so affinity is ignored.
        let arch: BTreeSet<String> = ["cloud.com/arch".to_string()].into();
        assert!(flavor_matches(
            &p,
            &labels(&[("cloud.com/arch", "x86")]),
            &arch
        ));
    }

    #[test]
    fn node_matching_full_semantics() {
        let p = pod(AFFINITY);
        let n = labels(&[
            ("cloud.com/arch", "x86"),
            ("unrelated", "foo"),
            ("gpu", "h100"),
            ("other", "1"),
        ]);
        assert!(node_matches(&p, &n, None));
        let n = labels(&[("cloud.com/arch", "x86"), ("gpu", "h100"), ("other", "1")]);
        assert!(
            !node_matches(&p, &n, None),
            "nodeSelector key 'unrelated' missing"
        );
        let gt = pod(
            "containers: []\naffinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: cores, operator: Gt, values: ['8']}]}, {matchFields: [{key: metadata.name, operator: In, values: [n1]}]}]}}}",
        );
        assert!(node_matches(&gt, &labels(&[("cores", "16")]), None));
        assert!(!node_matches(&gt, &labels(&[("cores", "4")]), Some("n2")));
        assert!(node_matches(&gt, &labels(&[("cores", "x")]), Some("n1")));
    }

    #[test]
    fn toleration_semantics() {
        let taints: Vec<Taint> = serde_norway::from_str(
            "- {key: spot, value: 'true', effect: NoSchedule}\n- {key: soft, effect: PreferNoSchedule}\n- {key: gpu, effect: NoExecute}\n",
        )
        .expect("valid");
        let tols: Vec<Toleration> =
            serde_norway::from_str("- {key: spot, operator: Equal, value: 'true'}\n")
                .expect("valid");
        assert_eq!(
            tolerates_all(&taints, &tols).map(|t| t.key.as_str()),
            Some("gpu")
        );
        let tols: Vec<Toleration> = serde_norway::from_str(
            "- {key: spot, value: 'true'}\n- {key: gpu, operator: Exists, effect: NoExecute}\n",
        )
        .expect("valid");
        assert!(tolerates_all(&taints, &tols).is_none());
        let all: Vec<Toleration> = serde_norway::from_str("- {operator: Exists}\n").expect("valid");
        assert!(tolerates_all(&taints, &all).is_none());
        let wrong: Vec<Toleration> = serde_norway::from_str(
            "- {key: spot, value: 'false'}\n- {key: gpu, operator: Exists, effect: NoSchedule}\n",
        )
        .expect("valid");
        assert_eq!(
            tolerates_all(&taints, &wrong).map(|t| t.key.as_str()),
            Some("spot")
        );
    }

    #[test]
    fn flavor_tolerations_count() {
        let spec: ResourceFlavorSpec = serde_norway::from_str(
            "nodeTaints: [{key: spot, effect: NoSchedule}]\ntolerations: [{key: spot, operator: Exists}]\n",
        )
        .expect("valid");
        assert!(untolerated_flavor_taint(&PodSpec::default(), &spec).is_none());
        let bare: ResourceFlavorSpec =
            serde_norway::from_str("nodeTaints: [{key: spot, effect: NoSchedule}]\n")
                .expect("valid");
        assert!(untolerated_flavor_taint(&PodSpec::default(), &bare).is_some());
    }
}
