//! Topology-aware scheduling annotations on pod templates: Kueue's validation rules and the
//! pod set topology request they describe.

use crate::api::PodSetTopologyRequest;
use crate::api::constants::{
    PODSET_GROUP_NAME_ANNOTATION, PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
    PODSET_REQUIRED_TOPOLOGY_ANNOTATION, PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    PODSET_SLICE_SIZE_ANNOTATION, PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
};
use crate::api::validate::{FieldError, Path, qualified_name_errors};

/// Read access to an annotation map, whatever its string type.
pub trait Annotations {
    /// The value of `key`, if present.
    fn get_annotation(&self, key: &str) -> Option<&str>;
}

impl Annotations for std::collections::BTreeMap<String, String> {
    fn get_annotation(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Annotations for super::object::StrMap<'_> {
    fn get_annotation(&self, key: &str) -> Option<&str> {
        self.get(key).map(|s| s.as_str())
    }
}

impl<T: Annotations> Annotations for Option<&T> {
    fn get_annotation(&self, key: &str) -> Option<&str> {
        self.and_then(|a| a.get_annotation(key))
    }
}

/// Whether the annotations ask for topology-aware scheduling at all.
pub fn requests_topology(a: &impl Annotations) -> bool {
    [
        PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
        PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
        PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
        PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
        PODSET_GROUP_NAME_ANNOTATION,
    ]
    .iter()
    .any(|k| a.get_annotation(k).is_some())
}

/// Kueue's `ValidateTASPodSetRequest` plus the slice-size upper bound: at most one of
/// required/preferred/unconstrained; level values are label keys; unconstrained is a
/// boolean; slice size and slice topology come together; 1 <= slice size <= `pod_count`.
///
/// `meta_path` is the template's metadata path (e.g. `spec.template.metadata`).
pub fn validate(a: &impl Annotations, meta_path: &Path, pod_count: i32) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = meta_path.child("annotations");
    let required = a.get_annotation(PODSET_REQUIRED_TOPOLOGY_ANNOTATION);
    let preferred = a.get_annotation(PODSET_PREFERRED_TOPOLOGY_ANNOTATION);
    let unconstrained = a.get_annotation(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION);
    let slice_topology = a.get_annotation(PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION);
    let slice_size = a.get_annotation(PODSET_SLICE_SIZE_ANNOTATION);

    let modes = [required, preferred, unconstrained]
        .iter()
        .filter(|v| v.is_some())
        .count();
    if modes > 1 {
        errs.push(FieldError::invalid_omit(
            &path,
            format!(
                "must not contain more than one topology annotation: [{PODSET_REQUIRED_TOPOLOGY_ANNOTATION:?}, {PODSET_PREFERRED_TOPOLOGY_ANNOTATION:?}, {PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION:?}]"
            ),
        ));
    }
    for (key, value) in [
        (PODSET_REQUIRED_TOPOLOGY_ANNOTATION, required),
        (PODSET_PREFERRED_TOPOLOGY_ANNOTATION, preferred),
        (PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, slice_topology),
    ] {
        if let Some(v) = value {
            let p = path.key(key);
            errs.extend(
                qualified_name_errors(v)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p, v, m)),
            );
        }
    }
    if let Some(v) = unconstrained
        && parse_go_bool(v).is_none()
    {
        errs.push(FieldError::invalid(
            &path.key(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION),
            v,
            "must be a boolean value",
        ));
    }
    if let Some(raw) = slice_size {
        let p = path.key(PODSET_SLICE_SIZE_ANNOTATION);
        match raw.parse::<i32>() {
            Err(_) => errs.push(FieldError::invalid(&p, raw, "must be a numeric value")),
            Ok(n) if n < 1 => errs.push(FieldError::invalid(
                &p,
                raw,
                "must be greater than or equal to 1",
            )),
            Ok(n) if n > pod_count => errs.push(FieldError::invalid(
                &p,
                raw,
                format!("must not be greater than pod set count {pod_count}"),
            )),
            Ok(_) => {}
        }
    }
    match (slice_topology.is_some(), slice_size.is_some()) {
        (true, false) => errs.push(FieldError::required(
            &path.key(PODSET_SLICE_SIZE_ANNOTATION),
            "slice size is required if slice topology is requested",
        )),
        (false, true) => errs.push(FieldError::forbidden(
            &path.key(PODSET_SLICE_SIZE_ANNOTATION),
            format!(
                "cannot be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION}' is not present"
            ),
        )),
        _ => {}
    }
    errs
}

/// The pod set's topology request, or `None` when the template asks for no TAS.
/// Call [`validate`] first: malformed numbers and booleans are dropped here.
pub fn topology_request(
    a: &impl Annotations,
    pod_index_label: Option<&str>,
) -> Option<PodSetTopologyRequest> {
    if !requests_topology(a) {
        return None;
    }
    let get = |k: &str| a.get_annotation(k).map(str::to_string);
    Some(PodSetTopologyRequest {
        required: get(PODSET_REQUIRED_TOPOLOGY_ANNOTATION),
        preferred: get(PODSET_PREFERRED_TOPOLOGY_ANNOTATION),
        unconstrained: a
            .get_annotation(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
            .and_then(parse_go_bool),
        pod_index_label: pod_index_label.map(str::to_string),
        sub_group_index_label: None,
        sub_group_count: None,
        pod_set_group_name: get(PODSET_GROUP_NAME_ANNOTATION),
        pod_set_slice_required_topology: get(PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION),
        pod_set_slice_size: a
            .get_annotation(PODSET_SLICE_SIZE_ANNOTATION)
            .and_then(|s| s.parse().ok()),
        podset_slice_required_topology_constraints: Vec::new(),
    })
}

/// Go's `strconv.ParseBool`, which Kueue uses for boolean annotations.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn msgs(a: &BTreeMap<String, String>, count: i32) -> Vec<String> {
        let p = Path::new("spec").child("template").child("metadata");
        validate(a, &p, count)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn kueue_rules() {
        let a = ann(&[
            (PODSET_REQUIRED_TOPOLOGY_ANNOTATION, "rack"),
            (PODSET_PREFERRED_TOPOLOGY_ANNOTATION, "block"),
        ]);
        let m = msgs(&a, 4);
        assert!(
            m[0].starts_with("spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation"),
            "{m:?}"
        );
        let a = ann(&[(PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "rack")]);
        assert_eq!(
            msgs(&a, 4),
            [
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: slice size is required if slice topology is requested"
            ]
        );
        let a = ann(&[(PODSET_SLICE_SIZE_ANNOTATION, "2")]);
        assert!(msgs(&a, 4)[0].contains("Forbidden: cannot be set when"));
        let a = ann(&[
            (PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "rack"),
            (PODSET_SLICE_SIZE_ANNOTATION, "5"),
        ]);
        assert_eq!(
            msgs(&a, 4),
            [
                "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"5\": must not be greater than pod set count 4"
            ]
        );
        let a = ann(&[
            (PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "rack"),
            (PODSET_SLICE_SIZE_ANNOTATION, "0"),
        ]);
        assert!(msgs(&a, 4)[0].ends_with("must be greater than or equal to 1"));
        let a = ann(&[(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, "yes")]);
        assert!(msgs(&a, 4)[0].ends_with("must be a boolean value"));
        let a = ann(&[(PODSET_REQUIRED_TOPOLOGY_ANNOTATION, "Bad Key")]);
        assert!(
            msgs(&a, 4)[0]
                .contains("[kueue.x-k8s.io/podset-required-topology]: Invalid value: \"Bad Key\"")
        );
        let a = ann(&[
            (PODSET_REQUIRED_TOPOLOGY_ANNOTATION, "cloud.com/rack"),
            (PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, "True"),
        ]);
        assert_eq!(msgs(&a, 4).len(), 1);
        let tr = topology_request(&a, Some("idx")).expect("requested");
        assert_eq!(tr.unconstrained, Some(true));
        assert_eq!(tr.pod_index_label.as_deref(), Some("idx"));
        assert!(topology_request(&ann(&[]), None).is_none());
    }
}
