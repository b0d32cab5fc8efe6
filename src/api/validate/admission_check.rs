//! AdmissionCheck, ProvisioningRequestConfig, MultiKueueConfig and MultiKueueCluster rules.
//! Kueue has no webhook for these kinds: their CRDs' OpenAPI bounds, patterns and CEL rule are the whole validation, and
//! these are they, with the API server's messages.

use super::{ErrorKind, FieldError, Path, validate_object_meta};
use crate::api::admissioncheck::AdmissionCheck;
use crate::api::multikueue::{MultiKueueCluster, MultiKueueConfig};
use crate::api::provisioning::ProvisioningRequestConfig;

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
                errs.push(pattern_error(&fp, value, pattern));
            }
        }
    }
    errs
}

/// Validates a ProvisioningRequestConfig as Kueue's v1beta2 CRD schema does.
pub fn validate_provisioning_request_config(prc: &ProvisioningRequestConfig) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&prc.metadata, false);
    let spec = Path::new("spec");
    let class = spec.child("provisioningClassName");
    let name = &prc.spec.provisioning_class_name;
    if name.is_empty() {
        errs.push(FieldError::required(&class, ""));
    } else {
        too_long(&mut errs, &class, name, 253);
        if !is_dns_subdomain(name) {
            errs.push(pattern_error(&class, name, DNS_SUBDOMAIN));
        }
    }
    let params = spec.child("parameters");
    if prc.spec.parameters.len() > 100 {
        errs.push(FieldError::too_many(
            &params,
            prc.spec.parameters.len(),
            100,
        ));
    }
    for (key, value) in &prc.spec.parameters {
        too_long(&mut errs, &params.key(key), value, 255);
    }
    let managed = spec.child("managedResources");
    if prc.spec.managed_resources.len() > 100 {
        errs.push(FieldError::too_many(
            &managed,
            prc.spec.managed_resources.len(),
            100,
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, r) in prc.spec.managed_resources.iter().enumerate() {
        if !seen.insert(r) {
            errs.push(FieldError::duplicate(&managed.index(i), r));
        }
    }
    let retry = spec.child("retryStrategy");
    if let Some(r) = &prc.spec.retry_strategy {
        for (field, v) in [
            ("backoffLimitCount", r.backoff_limit_count),
            ("backoffBaseSeconds", r.backoff_base_seconds),
            ("backoffMaxSeconds", r.backoff_max_seconds),
        ] {
            // Kueue's schema leaves these unbounded, but a negative count or delay has
            // no meaning: kuota reads it as 0, and `kuota check` says so.
            if let Some(v) = v.filter(|v| *v < 0) {
                errs.push(FieldError::invalid_num(
                    &retry.child(field),
                    v,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    if let Some(u) = &prc.spec.pod_set_updates {
        let list = spec.child("podSetUpdates").child("nodeSelector");
        if u.node_selector.len() > 8 {
            errs.push(FieldError::too_many(&list, u.node_selector.len(), 8));
        }
        let mut keys = std::collections::BTreeSet::new();
        for (i, ns) in u.node_selector.iter().enumerate() {
            let at = list.index(i);
            let key = at.child("key");
            if ns.key.is_empty() {
                errs.push(FieldError::required(&key, ""));
            } else {
                too_long(&mut errs, &key, &ns.key, 317);
                if !super::qualified_name_errors(&ns.key).is_empty() {
                    errs.push(pattern_error(&key, &ns.key, LABEL_KEY));
                }
                if !keys.insert(&ns.key) {
                    errs.push(FieldError::duplicate(&key, &ns.key));
                }
            }
            let detail = at.child("valueFromProvisioningClassDetail");
            if ns.value_from_provisioning_class_detail.is_empty() {
                errs.push(FieldError::required(&detail, ""));
            }
            too_long(
                &mut errs,
                &detail,
                &ns.value_from_provisioning_class_detail,
                32768,
            );
        }
    }
    errs
}

/// Validates a MultiKueueConfig as Kueue's v1beta2 CRD schema does.
pub fn validate_multikueue_config(c: &MultiKueueConfig) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&c.metadata, false);
    let clusters = Path::new("spec").child("clusters");
    let n = c.spec.clusters.len();
    if n == 0 {
        errs.push(FieldError::invalid_num(
            &clusters,
            n,
            "spec.clusters in body should have at least 1 items",
        ));
    }
    if n > 20 {
        errs.push(FieldError::too_many(&clusters, n, 20));
    }
    for (i, name) in c.spec.clusters.iter().enumerate() {
        too_long(&mut errs, &clusters.index(i), name, 256);
    }
    let mut seen = std::collections::BTreeSet::new();
    if !c.spec.clusters.iter().all(|name| seen.insert(name)) {
        errs.push(FieldError::invalid_omit(&clusters, "must be unique"));
    }
    errs
}

/// Validates a MultiKueueCluster as Kueue's v1beta2 CRD schema does.
pub fn validate_multikueue_cluster(c: &MultiKueueCluster) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&c.metadata, false);
    let source = Path::new("spec").child("clusterSource");
    let s = &c.spec.cluster_source;
    if s.kube_config.is_some() == s.cluster_profile_ref.is_some() {
        errs.push(FieldError::invalid_omit(
            &source,
            "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
        ));
    }
    if let Some(k) = &s.kube_config {
        let at = source.child("kubeConfig").child("location");
        if k.location.is_empty() {
            errs.push(FieldError::required(&at, ""));
        }
        too_long(&mut errs, &at, &k.location, 256);
    }
    if let Some(p) = &s.cluster_profile_ref {
        let at = source.child("clusterProfileRef").child("name");
        if p.name.is_empty() {
            errs.push(FieldError::required(&at, ""));
        }
        too_long(&mut errs, &at, &p.name, 256);
    }
    errs
}

const LABEL_KEY: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

fn pattern_error(path: &Path, value: &str, pattern: &str) -> FieldError {
    FieldError::invalid(
        path,
        value,
        format!("{path} in body should match '{pattern}'"),
    )
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

    fn prc(yaml: &str) -> ProvisioningRequestConfig {
        serde_norway::from_str(yaml).expect("valid yaml")
    }

    #[test]
    fn kueue_provisioning_sample_is_valid() {
        let ok = prc(
            "metadata: {name: prov-test-config}\nspec:\n  provisioningClassName: check-capacity.autoscaling.x-k8s.io\n  managedResources: [nvidia.com/gpu]\n  retryStrategy: {backoffLimitCount: 2, backoffBaseSeconds: 0, backoffMaxSeconds: 1800}\n  podSetUpdates:\n    nodeSelector: [{key: cloud.google.com/gke-nodepool, valueFromProvisioningClassDetail: NodePoolName}]\n",
        );
        assert_eq!(validate_provisioning_request_config(&ok), []);
    }

    #[test]
    fn provisioning_config_errors_name_the_field_as_the_api_server_does() {
        let bad = prc(
            "metadata: {name: bad}\nspec:\n  provisioningClassName: Check_Capacity\n  managedResources: [nvidia.com/gpu, nvidia.com/gpu]\n  retryStrategy: {backoffLimitCount: -1}\n  podSetUpdates:\n    nodeSelector: [{key: 'bad key', valueFromProvisioningClassDetail: ''}, {key: pool, valueFromProvisioningClassDetail: a}, {key: pool, valueFromProvisioningClassDetail: b}]\n",
        );
        let msgs: Vec<String> = validate_provisioning_request_config(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.provisioningClassName: Invalid value: \"Check_Capacity\": spec.provisioningClassName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
                "spec.managedResources[1]: Duplicate value: \"nvidia.com/gpu\"",
                "spec.retryStrategy.backoffLimitCount: Invalid value: -1: must be greater than or equal to 0",
                "spec.podSetUpdates.nodeSelector[0].key: Invalid value: \"bad key\": spec.podSetUpdates.nodeSelector[0].key in body should match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'",
                "spec.podSetUpdates.nodeSelector[0].valueFromProvisioningClassDetail: Required value",
                "spec.podSetUpdates.nodeSelector[2].key: Duplicate value: \"pool\"",
            ]
        );
        let missing = prc("metadata: {name: empty}\nspec: {provisioningClassName: ''}\n");
        assert_eq!(
            validate_provisioning_request_config(&missing)[0].to_string(),
            "spec.provisioningClassName: Required value"
        );
    }

    #[test]
    fn multikueue_objects_are_checked_as_kueues_schema_does() {
        let ok: MultiKueueConfig =
            serde_norway::from_str("metadata: {name: c}\nspec: {clusters: [w1, w2]}\n")
                .expect("yaml");
        assert_eq!(validate_multikueue_config(&ok), []);
        let dup: MultiKueueConfig =
            serde_norway::from_str("metadata: {name: c}\nspec: {clusters: [w1, w1]}\n")
                .expect("yaml");
        assert_eq!(
            validate_multikueue_config(&dup)[0].to_string(),
            "spec.clusters: Invalid value: must be unique"
        );
        let empty: MultiKueueConfig =
            serde_norway::from_str("metadata: {name: c}\nspec: {clusters: []}\n").expect("yaml");
        assert_eq!(
            validate_multikueue_config(&empty)[0].to_string(),
            "spec.clusters: Invalid value: 0: spec.clusters in body should have at least 1 items"
        );
        let both: MultiKueueCluster = serde_norway::from_str(
            "metadata: {name: w1}\nspec:\n  clusterSource:\n    kubeConfig: {location: ''}\n    clusterProfileRef: {name: p}\n",
        )
        .expect("yaml");
        let msgs: Vec<String> = validate_multikueue_cluster(&both)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.clusterSource: Invalid value: exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
                "spec.clusterSource.kubeConfig.location: Required value",
            ]
        );
    }
}
