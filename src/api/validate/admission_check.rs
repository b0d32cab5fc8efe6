//! AdmissionCheck rules. Kueue has no webhook for this kind: its CRD's OpenAPI bounds,
//! patterns and CEL rule are the whole validation, and these are they, with the API
//! server's messages.

use super::{ErrorKind, FieldError, Path, validate_object_meta};
use crate::api::admissioncheck::AdmissionCheck;

/// Validates an AdmissionCheck as Kueue's v1beta2 CRD schema does.
pub fn validate_admission_check(ac: &AdmissionCheck) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&ac.metadata, false);
    let spec = Path::new("spec");
    let controller = spec.child("controllerName");
    if ac.spec.controller_name.is_empty() {
        errs.push(FieldError::required(&controller, ""));
    }
    too_long(&mut errs, &controller, &ac.spec.controller_name, 253);
    if let Some(p) = &ac.spec.parameters {
        let path = spec.child("parameters");
        let fields: [ReferenceField<'_>; 3] = [
            (
                "apiGroup",
                &p.api_group,
                253,
                is_dns_subdomain,
                DNS_SUBDOMAIN,
            ),
            ("kind", &p.kind, 63, is_kind, KIND),
            ("name", &p.name, 63, is_dns_label, DNS_LABEL),
        ];
        for (field, value, max, ok, pattern) in fields {
            let fp = path.child(field);
            if value.is_empty() {
                errs.push(FieldError::required(&fp, ""));
                continue;
            }
            too_long(&mut errs, &fp, value, max);
            if !ok(value) {
                errs.push(FieldError::invalid(
                    &fp,
                    value,
                    format!("{fp} in body should match '{pattern}'"),
                ));
            }
        }
    }
    errs
}

/// One field of a parameters reference: name, value, maximum length, syntax check and
/// the pattern Kueue's schema states it with.
type ReferenceField<'a> = (&'static str, &'a str, usize, fn(&str) -> bool, &'static str);

const DNS_SUBDOMAIN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const KIND: &str = "^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$";
const DNS_LABEL: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

fn too_long(errs: &mut Vec<FieldError>, path: &Path, value: &str, max: usize) {
    if value.len() > max {
        errs.push(FieldError {
            path: path.to_string(),
            kind: ErrorKind::TooLong,
            value: None,
            detail: format!("may not be more than {max} bytes"),
        });
    }
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.split('.').all(is_dns_label)
}

/// `^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$`.
fn is_kind(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ac(yaml: &str) -> AdmissionCheck {
        serde_norway::from_str(yaml).expect("valid yaml")
    }

    #[test]
    fn kueue_sample_is_valid() {
        let ok = ac(
            "metadata: {name: prov-test}\nspec:\n  controllerName: kueue.x-k8s.io/provisioning-request\n  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: prov-test-config}\n",
        );
        assert_eq!(validate_admission_check(&ok), vec![]);
    }

    #[test]
    fn empty_controller_and_bad_parameters_are_named() {
        let bad = ac(
            "metadata: {name: bad}\nspec:\n  controllerName: ''\n  parameters: {apiGroup: Kueue_X, kind: 9bad, name: ''}\n",
        );
        let msgs: Vec<String> = validate_admission_check(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.controllerName: Required value",
                "spec.parameters.apiGroup: Invalid value: \"Kueue_X\": spec.parameters.apiGroup in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
                "spec.parameters.kind: Invalid value: \"9bad\": spec.parameters.kind in body should match '^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$'",
                "spec.parameters.name: Required value",
            ]
        );
        let long = ac(&format!(
            "metadata: {{name: long}}\nspec: {{controllerName: {}}}\n",
            "c".repeat(254)
        ));
        assert_eq!(
            validate_admission_check(&long)[0].to_string(),
            "spec.controllerName: Too long: may not be more than 253 bytes"
        );
    }
}
