//! Kueue's admission-webhook and CRD (CEL/OpenAPI) validation rules, with Kueue's and
//! Kubernetes' messages, reported as Kubernetes-style field errors.
//!
//! Every function is pure and total: it inspects an object and returns every problem found,
//! in field order, never stopping at the first one.

mod admission_check;
mod defaults;
mod flavor;
mod job;
mod names;
mod quota;
mod update;
mod weight;
mod workload;

pub use admission_check::{
    validate_admission_check, validate_multikueue_cluster, validate_multikueue_config,
    validate_provisioning_request_config,
};
pub use defaults::{cluster_queue_with_defaults, fair_sharing_with_defaults};
pub use flavor::{validate_resource_flavor, validate_topology, validate_workload_priority_class};
pub use job::{
    JOB_RESTART_POLICIES, JobSpecFields, job_name_label_errors, validate_job, validate_job_spec,
};
pub use names::{
    dns1123_label_errors, dns1123_subdomain_errors, label_value_errors, qualified_name_errors,
};
pub use quota::{validate_cluster_queue, validate_cohort, validate_local_queue};
pub use update::{
    FIELD_IMMUTABLE_MSG, validate_label_selector, validate_local_queue_update,
    validate_topology_update, validate_workload_update,
};
pub use weight::WEIGHT_TOO_SMALL_MSG;
pub use workload::{validate_pod_template, validate_workload};

use super::quantity::{QuantityError, parse_milli_wide};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::fmt;

/// Category of a field error, printed like Kubernetes' `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The value is not acceptable.
    Invalid,
    /// A required value is missing.
    Required,
    /// The value duplicates another entry.
    Duplicate,
    /// A referenced entry does not exist.
    NotFound,
    /// The value is not one of the allowed values.
    NotSupported,
    /// The list has too many entries.
    TooMany,
    /// The value is too long.
    TooLong,
    /// The field may not be set.
    Forbidden,
}

impl ErrorKind {
    /// Kubernetes' wording for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::Required => "Required value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::NotFound => "Not found",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::TooMany => "Too many",
            ErrorKind::TooLong => "Too long",
            ErrorKind::Forbidden => "Forbidden",
        }
    }
}

/// One validation failure at a field path, displayed as
/// `spec.x[0].y: Invalid value: "5": must be less than or equal to the nominalQuota`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted field path with `[i]` indices and `[key]` map keys.
    pub path: String,
    /// Error category.
    pub kind: ErrorKind,
    /// The offending value, already rendered (strings quoted), if shown.
    pub value: Option<String>,
    /// Human-readable explanation; may be empty.
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind.as_str())?;
        if let Some(v) = &self.value {
            write!(f, ": {v}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    /// `Invalid value` with a string value (rendered quoted).
    pub fn invalid(path: &Path, value: &str, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, Some(quote(value)), detail)
    }

    /// `Invalid value` with a number value (rendered bare).
    pub fn invalid_num(path: &Path, value: impl fmt::Display, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, Some(value.to_string()), detail)
    }

    /// `Invalid value` without showing the value.
    pub fn invalid_omit(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, None, detail)
    }

    /// `Required value`.
    pub fn required(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Required, None, detail)
    }

    /// `Duplicate value` of a string.
    pub fn duplicate(path: &Path, value: &str) -> Self {
        Self::new(path, ErrorKind::Duplicate, Some(quote(value)), "")
    }

    /// `Not found` for a string reference.
    pub fn not_found(path: &Path, value: &str) -> Self {
        Self::new(path, ErrorKind::NotFound, Some(quote(value)), "")
    }

    /// `Unsupported value` listing the supported ones. Callers pass only values that are
    /// valid for this field in this object; an empty list gets a generic explanation rather
    /// than an empty `supported values:` (see [`FieldError::not_supported_or`]).
    pub fn not_supported(path: &Path, value: &str, supported: &[&str]) -> Self {
        Self::not_supported_or(path, value, supported, "no value is supported here")
    }

    /// `Unsupported value` listing the supported ones, or, when there are none (a list
    /// derived from the object came out empty), explaining why with `if_none`.
    pub fn not_supported_or(path: &Path, value: &str, supported: &[&str], if_none: &str) -> Self {
        let detail = if supported.is_empty() {
            if_none.to_string()
        } else {
            let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
            format!("supported values: {}", list.join(", "))
        };
        Self::new(path, ErrorKind::NotSupported, Some(quote(value)), detail)
    }

    /// `Too many` entries in a list.
    pub fn too_many(path: &Path, actual: usize, max: usize) -> Self {
        let detail = format!("must have at most {max} items");
        Self::new(path, ErrorKind::TooMany, Some(actual.to_string()), detail)
    }

    /// `Forbidden`.
    pub fn forbidden(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Forbidden, None, detail)
    }

    fn new(path: &Path, kind: ErrorKind, value: Option<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.to_string(),
            kind,
            value,
            detail: detail.into(),
        }
    }
}

/// Renders a string like Go's `%q` for the common (printable) case.
fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// A field path under construction, e.g. `spec.podSets[0].template`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Path(String);

impl Path {
    /// A root path such as `spec` or `metadata`.
    pub fn new(root: &str) -> Self {
        Self(root.to_string())
    }

    /// `self.name`.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_string())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// `self[i]`.
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// `self[key]`.
    pub fn key(&self, key: &str) -> Self {
        Self(format!("{}[{key}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Kubernetes' message for negative quantities.
pub const IS_NEGATIVE_MSG: &str = "must be greater than or equal to 0";

/// Parses a quantity for validation (milli-units, wide enough for any quota Kueue accepts),
/// recording a field error when it is malformed.
pub(crate) fn quantity(q: &Quantity, path: &Path, errs: &mut Vec<FieldError>) -> Option<i128> {
    match parse_milli_wide(q) {
        Ok(v) => Some(v),
        Err(e) => {
            let detail = match e {
                QuantityError::Format(_) => {
                    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTPE]*[-+]?[0-9]*)$'"
                }
                QuantityError::Overflow(_) => "quantity is out of range",
                QuantityError::Precision(_) => "quantity has too many significant digits",
            };
            errs.push(FieldError::invalid(path, &q.0, detail));
            None
        }
    }
}

/// Parses a quantity and also requires it to be non-negative.
pub(crate) fn non_negative(q: &Quantity, path: &Path, errs: &mut Vec<FieldError>) -> Option<i128> {
    let v = quantity(q, path, errs)?;
    if v < 0 {
        errs.push(FieldError::invalid(path, &q.0, IS_NEGATIVE_MSG));
    }
    Some(v)
}

/// Validates `metadata.name` (DNS-1123 subdomain) and, when required, `metadata.namespace`.
pub fn validate_object_meta(meta: &ObjectMeta, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::new("metadata");
    match meta.name.as_deref() {
        None | Some("") if meta.generate_name.is_none() => {
            errs.push(FieldError::required(
                &path.child("name"),
                "name or generateName is required",
            ));
        }
        Some(name) if !name.is_empty() => {
            names::push_errors(
                &mut errs,
                &path.child("name"),
                name,
                dns1123_subdomain_errors(name),
            );
        }
        _ => {}
    }
    if let Some(ns) = meta.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        if namespaced {
            names::push_errors(
                &mut errs,
                &path.child("namespace"),
                ns,
                dns1123_label_errors(ns),
            );
        } else {
            errs.push(FieldError::forbidden(
                &path.child("namespace"),
                "not allowed on this type",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_kubernetes() {
        let p = Path::new("spec")
            .child("resourceGroups")
            .index(0)
            .child("flavors")
            .index(1);
        let e = FieldError::invalid(
            &p.child("lendingLimit"),
            "5",
            "must be less than or equal to the nominalQuota",
        );
        assert_eq!(
            e.to_string(),
            "spec.resourceGroups[0].flavors[1].lendingLimit: Invalid value: \"5\": must be less than or equal to the nominalQuota"
        );
        let e = FieldError::too_many(&Path::new("spec").child("podSets"), 19, 18);
        assert_eq!(
            e.to_string(),
            "spec.podSets: Too many: 19: must have at most 18 items"
        );
        let e = FieldError::required(&Path::new("spec").child("x"), "");
        assert_eq!(e.to_string(), "spec.x: Required value");
        let e = FieldError::not_supported(&Path::new("a").key("k"), "x", &["y", "z"]);
        assert_eq!(
            e.to_string(),
            "a[k]: Unsupported value: \"x\": supported values: \"y\", \"z\""
        );
        let e = FieldError::not_supported_or(&Path::new("a"), "x", &[], "a has no values");
        assert_eq!(
            e.to_string(),
            "a: Unsupported value: \"x\": a has no values"
        );
    }

    #[test]
    fn metadata_rules() {
        let meta = ObjectMeta {
            name: Some("Team_A".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        let errs = validate_object_meta(&meta, false);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].to_string().starts_with(
            "metadata.name: Invalid value: \"Team_A\": a lowercase RFC 1123 subdomain"
        ));
        assert!(
            validate_object_meta(&ObjectMeta::default(), true)[0]
                .to_string()
                .contains("Required value")
        );
    }
}
