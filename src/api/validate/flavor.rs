//! ResourceFlavor, Topology and WorkloadPriorityClass rules.

use super::names::{labels, name_ref, push_errors, qualified_name_errors};
use super::{FieldError, Path, validate_object_meta};
use crate::api::constants::{HOSTNAME_LABEL, MAX_TOPOLOGY_LEVELS};
use crate::api::priorityclass::WorkloadPriorityClass;
use crate::api::resourceflavor::ResourceFlavor;
use crate::api::topology::Topology;
use k8s_openapi::api::core::v1::{Taint, Toleration};
use std::collections::BTreeSet;

const MAX_FLAVOR_ITEMS: usize = 8;
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Validates a ResourceFlavor like Kueue's webhook and CRD rules.
pub fn validate_resource_flavor(rf: &ResourceFlavor) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&rf.metadata, false);
    let spec = &rf.spec;
    let path = Path::new("spec");
    let node_labels = spec.node_labels.as_ref();
    if let Some(nl) = node_labels {
        let p = path.child("nodeLabels");
        if nl.len() > MAX_FLAVOR_ITEMS {
            errs.push(FieldError::too_many(&p, nl.len(), MAX_FLAVOR_ITEMS));
        }
        labels(&mut errs, &p, nl);
    }
    if let Some(taints) = &spec.node_taints {
        node_taints(&mut errs, taints, &path.child("nodeTaints"));
    }
    if let Some(tols) = &spec.tolerations {
        tolerations(&mut errs, tols, &path.child("tolerations"));
    }
    if let Some(t) = &spec.topology_name {
        name_ref(&mut errs, &path.child("topologyName"), t);
        if node_labels.is_none_or(|l| l.is_empty()) {
            errs.push(FieldError::invalid_omit(
                &path,
                "at least one nodeLabel is required when topology is set",
            ));
        }
    }
    errs
}

fn node_taints(errs: &mut Vec<FieldError>, taints: &[Taint], path: &Path) {
    if taints.len() > MAX_FLAVOR_ITEMS {
        errs.push(FieldError::too_many(path, taints.len(), MAX_FLAVOR_ITEMS));
    }
    let mut seen = BTreeSet::new();
    for (i, t) in taints.iter().enumerate() {
        let p = path.index(i);
        push_errors(errs, &p.child("key"), &t.key, qualified_name_errors(&t.key));
        if let Some(v) = &t.value {
            push_errors(
                errs,
                &p.child("value"),
                v,
                super::names::label_value_errors(v),
            );
        }
        if !EFFECTS.contains(&t.effect.as_str()) {
            errs.push(FieldError::not_supported(
                &p.child("effect"),
                &t.effect,
                &EFFECTS,
            ));
        }
        if !seen.insert((t.key.as_str(), t.effect.as_str())) {
            let mut e = FieldError::duplicate(&p, &format!("{}:{}", t.key, t.effect));
            e.detail = "taints must be unique by key and effect pair".into();
            errs.push(e);
        }
    }
}

fn tolerations(errs: &mut Vec<FieldError>, tols: &[Toleration], path: &Path) {
    if tols.len() > MAX_FLAVOR_ITEMS {
        errs.push(FieldError::too_many(path, tols.len(), MAX_FLAVOR_ITEMS));
    }
    for (i, t) in tols.iter().enumerate() {
        let p = path.index(i);
        let key = t.key.as_deref().unwrap_or("");
        let op = t.operator.as_deref().unwrap_or("Equal");
        if key.is_empty() {
            if op != "Exists" {
                errs.push(FieldError::invalid(&p.child("operator"), op, "operator must be Exists when 'key' is empty, which means 'match all values and all keys'"));
            }
        } else {
            push_errors(errs, &p.child("key"), key, qualified_name_errors(key));
        }
        if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
            errs.push(FieldError::invalid_omit(
                &p.child("effect"),
                "effect must be 'NoExecute' when 'tolerationSeconds' is set",
            ));
        }
        match op {
            "Equal" => {}
            "Exists" => {
                if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                    errs.push(FieldError::invalid_omit(
                        &p.child("value"),
                        "a value must be empty when 'operator' is 'Exists'",
                    ));
                }
            }
            other => {
                // Offer only operators this toleration could use: Equal needs a key,
                // Exists needs an empty value.
                let has_value = t.value.as_deref().is_some_and(|v| !v.is_empty());
                let fitting: Vec<&str> = [("Equal", !key.is_empty()), ("Exists", !has_value)]
                    .into_iter()
                    .filter_map(|(op, fits)| fits.then_some(op))
                    .collect();
                errs.push(FieldError::not_supported_or(
                    &p.child("operator"),
                    other,
                    &fitting,
                    "no operator fits a toleration with a value but no key; set a key",
                ));
            }
        }
        if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty())
            && !EFFECTS.contains(&e)
        {
            // tolerationSeconds only makes sense for NoExecute.
            let fitting: &[&str] = if t.toleration_seconds.is_some() {
                &["NoExecute"]
            } else {
                &EFFECTS
            };
            errs.push(FieldError::not_supported(&p.child("effect"), e, fitting));
        }
    }
}

/// Validates a Topology: 1..=16 unique, well-formed levels; hostname only last.
pub fn validate_topology(t: &Topology) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&t.metadata, false);
    let path = Path::new("spec").child("levels");
    let levels = &t.spec.levels;
    if levels.is_empty() {
        errs.push(FieldError::required(&path, ""));
    } else if levels.len() > MAX_TOPOLOGY_LEVELS {
        errs.push(FieldError::too_many(
            &path,
            levels.len(),
            MAX_TOPOLOGY_LEVELS,
        ));
    }
    let mut seen = BTreeSet::new();
    let mut duplicated = false;
    for (i, l) in levels.iter().enumerate() {
        let p = path.index(i).child("nodeLabel");
        if l.node_label.is_empty() {
            errs.push(FieldError::required(&p, ""));
        } else {
            push_errors(
                &mut errs,
                &p,
                &l.node_label,
                qualified_name_errors(&l.node_label),
            );
        }
        duplicated |= !seen.insert(l.node_label.as_str());
    }
    if duplicated {
        errs.push(FieldError::invalid_omit(&path, "must be unique"));
    }
    let hostname_pos = levels.iter().position(|l| l.node_label == HOSTNAME_LABEL);
    if hostname_pos.is_some_and(|p| p + 1 != levels.len()) {
        errs.push(FieldError::invalid_omit(
            &path,
            "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        ));
    }
    errs
}

/// Validates a WorkloadPriorityClass (name and description length).
pub fn validate_workload_priority_class(w: &WorkloadPriorityClass) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&w.metadata, false);
    if let Some(d) = &w.description
        && d.chars().count() > 2048
    {
        errs.push(FieldError {
            path: "description".into(),
            kind: super::ErrorKind::TooLong,
            value: None,
            detail: "may not be more than 2048 bytes".into(),
        });
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn flavor_rules() {
        let spec = serde_norway::from_str(
            "topologyName: t\nnodeTaints:\n- {key: spot, effect: NoSchedule}\n- {key: spot, effect: NoSchedule}\n- {key: x, effect: Sometimes}\ntolerations:\n- {operator: Equal, value: a}\n",
        )
        .expect("valid");
        let m = msgs(validate_resource_flavor(&ResourceFlavor::new("rf", spec)));
        assert!(
            m.contains(
                &"spec: Invalid value: at least one nodeLabel is required when topology is set"
                    .to_string()
            ),
            "{m:?}"
        );
        assert!(m.contains(&"spec.nodeTaints[1]: Duplicate value: \"spot:NoSchedule\": taints must be unique by key and effect pair".to_string()), "{m:?}");
        assert!(
            m.iter()
                .any(|e| e
                    .starts_with("spec.nodeTaints[2].effect: Unsupported value: \"Sometimes\"")),
            "{m:?}"
        );
        assert!(
            m.iter().any(|e| e.starts_with(
                "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists"
            )),
            "{m:?}"
        );
    }

    #[test]
    fn toleration_valid_values_fit_the_toleration() {
        let spec = serde_norway::from_str(
            "tolerations:\n- {key: a, operator: Near}\n- {operator: Near}\n- {operator: Near, value: v}\n- {key: a, operator: Exists, effect: Soon, tolerationSeconds: 5}\n",
        )
        .expect("valid");
        let m = msgs(validate_resource_flavor(&ResourceFlavor::new("rf", spec)));
        let has = |want: &str| assert!(m.contains(&want.to_string()), "{want}\n{m:?}");
        has(
            "spec.tolerations[0].operator: Unsupported value: \"Near\": supported values: \"Equal\", \"Exists\"",
        );
        has(
            "spec.tolerations[1].operator: Unsupported value: \"Near\": supported values: \"Exists\"",
        );
        has(
            "spec.tolerations[2].operator: Unsupported value: \"Near\": no operator fits a toleration with a value but no key; set a key",
        );
        has(
            "spec.tolerations[3].effect: Unsupported value: \"Soon\": supported values: \"NoExecute\"",
        );
    }

    #[test]
    fn topology_rules() {
        let spec = serde_norway::from_str(
            "levels:\n- nodeLabel: kubernetes.io/hostname\n- nodeLabel: rack\n- nodeLabel: rack\n",
        )
        .expect("valid");
        let m = msgs(validate_topology(&Topology::new("t", spec)));
        assert!(
            m.contains(&"spec.levels: Invalid value: must be unique".to_string()),
            "{m:?}"
        );
        assert!(m.contains(&"spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at the lowest level of topology".to_string()), "{m:?}");
        let empty = Topology::new("t", Default::default());
        assert_eq!(
            msgs(validate_topology(&empty)),
            vec!["spec.levels: Required value".to_string()]
        );
    }
}
