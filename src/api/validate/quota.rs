//! ClusterQueue, Cohort and LocalQueue rules.

use super::names::{
    dns1123_subdomain_errors, labels, name_ref, push_errors, qualified_name_errors,
};
use super::weight::fair_sharing;
use super::{FieldError, Path, non_negative, validate_object_meta};
use crate::api::clusterqueue::BorrowWithinCohortPolicy;
use crate::api::clusterqueue::{
    ClusterQueue, ClusterQueuePreemption, FlavorFungibility, FlavorFungibilityPolicy,
    PreemptionPolicy,
};
use crate::api::cohort::Cohort;
use crate::api::common::ResourceGroup;
use crate::api::constants::{
    MAX_FLAVORS_PER_GROUP, MAX_FLAVORS_TOTAL, MAX_RESOURCE_GROUPS, MAX_RESOURCES_PER_GROUP,
};
use crate::api::localqueue::LocalQueue;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeSet;

const LENDING_LIMIT_MSG: &str = "must be less than or equal to the nominalQuota";
/// Kueue's cap on covered resources summed over a ClusterQueue's resource groups.
const MAX_RESOURCES_TOTAL: usize = 256;
/// Kueue's cap on flavor×resource quota entries in one resource group.
const MAX_FLAVOR_RESOURCE_PAIRS: usize = 512;

/// Validates a ClusterQueue like Kueue's webhook and CRD rules, after Kueue's CRD defaults.
pub fn validate_cluster_queue(cq: &ClusterQueue) -> Vec<FieldError> {
    // The API server defaults before it validates; rules must see what Kueue would see.
    let cq = &super::cluster_queue_with_defaults(cq);
    let mut errs = validate_object_meta(&cq.metadata, false);
    let spec = &cq.spec;
    let path = Path::new("spec");
    if let Some(c) = spec.cohort_name.as_deref().filter(|c| !c.is_empty()) {
        name_ref(&mut errs, &path.child("cohortName"), c);
    }
    let rg_path = path.child("resourceGroups");
    let limits = LimitRule {
        has_parent: spec.cohort().is_some(),
        missing: "cohort",
        lending_le_nominal: true,
    };
    resource_groups(&mut errs, &spec.resource_groups, &rg_path, &limits);
    // Kueue caps these sizes for ClusterQueues only, not for Cohorts.
    group_totals(&mut errs, &spec.resource_groups, &rg_path);
    if let Some(sel) = &spec.namespace_selector {
        label_selector(&mut errs, sel, &path.child("namespaceSelector"));
    }
    if let Some(p) = &spec.preemption {
        preemption(&mut errs, p, &path.child("preemption"));
    }
    if let Some(f) = &spec.flavor_fungibility {
        fungibility(&mut errs, f, &path.child("flavorFungibility"));
    }
    fair_sharing(
        &mut errs,
        spec.fair_sharing.as_ref(),
        &path.child("fairSharing"),
    );
    if let Some(strategy) = &spec.admission_checks_strategy {
        let flavors: BTreeSet<&str> = spec
            .resource_groups
            .iter()
            .flat_map(|rg| rg.flavors.iter().map(|f| f.name.as_str()))
            .collect();
        // Offer only names that could be referenced: a malformed flavor name is reported
        // at its own path and is no better a choice here.
        let allowed: Vec<&str> = flavors
            .iter()
            .copied()
            .filter(|f| dns1123_subdomain_errors(f).is_empty())
            .collect();
        let p = path
            .child("admissionChecksStrategy")
            .child("admissionChecks");
        for (i, rule) in strategy.admission_checks.iter().enumerate() {
            for (j, f) in rule.on_flavors.iter().enumerate() {
                if !flavors.contains(f.as_str()) {
                    let fp = p.index(i).child("onFlavors").index(j);
                    errs.push(FieldError::not_supported_or(
                        &fp,
                        f,
                        &allowed,
                        "spec.resourceGroups defines no flavors to choose from",
                    ));
                }
            }
        }
    }
    errs
}

/// Validates a Cohort: limits need a parent; lendingLimit may exceed nominalQuota.
pub fn validate_cohort(cohort: &Cohort) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&cohort.metadata, false);
    let spec = &cohort.spec;
    let path = Path::new("spec");
    if let Some(p) = spec.parent_name.as_deref().filter(|p| !p.is_empty()) {
        name_ref(&mut errs, &path.child("parentName"), p);
        if cohort.metadata.name.as_deref() == Some(p) {
            errs.push(FieldError::invalid(
                &path.child("parentName"),
                p,
                // Kueue would accept it and then stop admitting in the whole tree (a
                // cycle); rejecting it up front names the mistake instead.
                "a Cohort cannot be its own parent",
            ));
        }
    }
    let limits = LimitRule {
        has_parent: spec.parent().is_some(),
        missing: "parent",
        lending_le_nominal: false,
    };
    resource_groups(
        &mut errs,
        &spec.resource_groups,
        &path.child("resourceGroups"),
        &limits,
    );
    fair_sharing(
        &mut errs,
        spec.fair_sharing.as_ref(),
        &path.child("fairSharing"),
    );
    errs
}

/// Validates a LocalQueue: it must name a ClusterQueue.
pub fn validate_local_queue(lq: &LocalQueue) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&lq.metadata, true);
    let path = Path::new("spec").child("clusterQueue");
    if lq.spec.cluster_queue.is_empty() {
        errs.push(FieldError::required(&path, ""));
    } else {
        name_ref(&mut errs, &path, &lq.spec.cluster_queue);
    }
    fair_sharing(
        &mut errs,
        lq.spec.fair_sharing.as_ref(),
        &Path::new("spec").child("fairSharing"),
    );
    errs
}

struct LimitRule {
    has_parent: bool,
    /// Word in "must be nil when {missing} is empty".
    missing: &'static str,
    lending_le_nominal: bool,
}

fn resource_groups(
    errs: &mut Vec<FieldError>,
    groups: &[ResourceGroup],
    path: &Path,
    rule: &LimitRule,
) {
    if groups.len() > MAX_RESOURCE_GROUPS {
        errs.push(FieldError::too_many(
            path,
            groups.len(),
            MAX_RESOURCE_GROUPS,
        ));
    }
    let mut seen_resources = BTreeSet::new();
    let mut seen_flavors = BTreeSet::new();
    for (i, rg) in groups.iter().enumerate() {
        let path = path.index(i);
        let cr_path = path.child("coveredResources");
        if rg.covered_resources.is_empty() {
            errs.push(FieldError::required(&cr_path, ""));
        } else if rg.covered_resources.len() > MAX_RESOURCES_PER_GROUP {
            errs.push(FieldError::too_many(
                &cr_path,
                rg.covered_resources.len(),
                MAX_RESOURCES_PER_GROUP,
            ));
        }
        for (j, name) in rg.covered_resources.iter().enumerate() {
            let p = cr_path.index(j);
            push_errors(errs, &p, name, qualified_name_errors(name));
            if !seen_resources.insert(name.as_str()) {
                errs.push(FieldError::duplicate(&p, name));
            }
        }
        let fl_path = path.child("flavors");
        if rg.flavors.is_empty() {
            errs.push(FieldError::required(&fl_path, ""));
        } else if rg.flavors.len() > MAX_FLAVORS_PER_GROUP {
            errs.push(FieldError::too_many(
                &fl_path,
                rg.flavors.len(),
                MAX_FLAVORS_PER_GROUP,
            ));
        }
        for (j, fq) in rg.flavors.iter().enumerate() {
            let fp = fl_path.index(j);
            name_ref(errs, &fp.child("name"), &fq.name);
            if !seen_flavors.insert(fq.name.as_str()) {
                errs.push(FieldError::duplicate(&fp.child("name"), &fq.name));
            }
            if fq.resources.len() != rg.covered_resources.len() {
                errs.push(FieldError::invalid_omit(
                    &fp.child("resources"),
                    "must have the same number of resources as the coveredResources",
                ));
            }
            for (k, rq) in fq.resources.iter().enumerate() {
                let rp = fp.child("resources").index(k);
                if let Some(covered) = rg.covered_resources.get(k)
                    && &rq.name != covered
                {
                    errs.push(FieldError::invalid(
                        &rp.child("name"),
                        &rq.name,
                        "must match the name in coveredResources",
                    ));
                }
                let nominal = non_negative(&rq.nominal_quota, &rp.child("nominalQuota"), errs);
                if let Some(b) = &rq.borrowing_limit {
                    let bp = rp.child("borrowingLimit");
                    limit_needs_parent(errs, &bp, &b.0, rule);
                    non_negative(b, &bp, errs);
                }
                if let Some(l) = &rq.lending_limit {
                    let lp = rp.child("lendingLimit");
                    let lend = non_negative(l, &lp, errs);
                    limit_needs_parent(errs, &lp, &l.0, rule);
                    if let (Some(lend), Some(nominal)) = (lend, nominal)
                        && rule.lending_le_nominal
                        && lend > nominal
                    {
                        errs.push(FieldError::invalid(&lp, &l.0, LENDING_LIMIT_MSG));
                    }
                }
            }
        }
    }
}

/// Kueue's webhook limits on sizes summed over groups: flavors and covered resources across
/// all groups, and flavor×resource quota entries within each group (which bound the work
/// of every flavor assignment).
fn group_totals(errs: &mut Vec<FieldError>, groups: &[ResourceGroup], path: &Path) {
    let total_flavors: usize = groups.iter().map(|rg| rg.flavors.len()).sum();
    if total_flavors > MAX_FLAVORS_TOTAL {
        errs.push(FieldError::invalid_num(
            path,
            total_flavors,
            format!("total number of flavors across all resourceGroups must be ≤ {MAX_FLAVORS_TOTAL}, got {total_flavors}"),
        ));
    }
    let total_resources: usize = groups.iter().map(|rg| rg.covered_resources.len()).sum();
    if total_resources > MAX_RESOURCES_TOTAL {
        errs.push(FieldError::invalid_num(
            path,
            total_resources,
            format!("total number of covered resources across all resourceGroups must be ≤ {MAX_RESOURCES_TOTAL}, got {total_resources}"),
        ));
    }
    for (i, rg) in groups.iter().enumerate() {
        let pairs: usize = rg.flavors.iter().map(|f| f.resources.len()).sum();
        if pairs > MAX_FLAVOR_RESOURCE_PAIRS {
            errs.push(FieldError::invalid_num(
                &path.index(i),
                pairs,
                format!("number of flavor-resource combinations in a resourceGroup must be ≤ {MAX_FLAVOR_RESOURCE_PAIRS}, got {pairs}"),
            ));
        }
    }
}

fn limit_needs_parent(errs: &mut Vec<FieldError>, path: &Path, value: &str, rule: &LimitRule) {
    if !rule.has_parent {
        errs.push(FieldError::invalid(
            path,
            value,
            format!("must be nil when {} is empty", rule.missing),
        ));
    }
}

fn preemption(errs: &mut Vec<FieldError>, p: &ClusterQueuePreemption, path: &Path) {
    use PreemptionPolicy as P;
    if let Some(r) = p.reclaim_within_cohort
        && !matches!(r, P::Never | P::LowerPriority | P::Any)
    {
        errs.push(FieldError::not_supported(
            &path.child("reclaimWithinCohort"),
            policy_str(r),
            &["Never", "LowerPriority", "Any"],
        ));
    }
    if let Some(w) = p.within_cluster_queue
        && w == P::Any
    {
        errs.push(FieldError::not_supported(
            &path.child("withinClusterQueue"),
            policy_str(w),
            &["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
        ));
    }
    let reclaim_never = p.reclaim_within_cohort.unwrap_or_default() == P::Never;
    let borrow_preempts = p
        .borrow_within_cohort
        .as_ref()
        .is_some_and(|b| b.policy.unwrap_or_default() != BorrowWithinCohortPolicy::Never);
    if reclaim_never && borrow_preempts {
        errs.push(FieldError::invalid_omit(
            path,
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ));
    }
}

fn policy_str(p: PreemptionPolicy) -> &'static str {
    match p {
        PreemptionPolicy::Never => "Never",
        PreemptionPolicy::Any => "Any",
        PreemptionPolicy::LowerPriority => "LowerPriority",
        PreemptionPolicy::LowerOrNewerEqualPriority => "LowerOrNewerEqualPriority",
    }
}

fn fungibility(errs: &mut Vec<FieldError>, f: &FlavorFungibility, path: &Path) {
    // Absent policies count as their defaults (whenCanPreempt defaults to TryNextFlavor).
    let both_try_next = f.effective_when_can_borrow() == FlavorFungibilityPolicy::TryNextFlavor
        && f.effective_when_can_preempt() == FlavorFungibilityPolicy::TryNextFlavor;
    if let Some(pref) = f.preference
        && !both_try_next
    {
        let name = match pref {
            crate::api::FlavorFungibilityPreference::BorrowingOverPreemption => {
                "BorrowingOverPreemption"
            }
            crate::api::FlavorFungibilityPreference::PreemptionOverBorrowing => {
                "PreemptionOverBorrowing"
            }
        };
        errs.push(FieldError::invalid(
            &path.child("preference"),
            name,
            format!("preference {name:?} requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"),
        ));
    }
}

/// Validates a metav1.LabelSelector like apimachinery's `ValidateLabelSelector`.
pub(super) fn label_selector(errs: &mut Vec<FieldError>, sel: &LabelSelector, path: &Path) {
    if let Some(ml) = &sel.match_labels {
        labels(errs, &path.child("matchLabels"), ml);
    }
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        let rp = path.child("matchExpressions").index(i);
        let has_values = req.values.as_ref().is_some_and(|v| !v.is_empty());
        match req.operator.as_str() {
            "In" | "NotIn" if !has_values => errs.push(FieldError::required(
                &rp.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if has_values => errs.push(FieldError::forbidden(
                &rp.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            // Offer the operators that fit the values as given.
            other => errs.push(FieldError::not_supported(
                &rp.child("operator"),
                other,
                if has_values {
                    &["In", "NotIn"]
                } else {
                    &["Exists", "DoesNotExist"]
                },
            )),
        }
        push_errors(
            errs,
            &rp.child("key"),
            &req.key,
            qualified_name_errors(&req.key),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cq(yaml: &str) -> ClusterQueue {
        let spec = serde_norway::from_str(yaml).expect("test spec parses");
        ClusterQueue::new("cq", spec)
    }

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_queue_has_no_errors() {
        let q = cq(
            "cohortName: c\nnamespaceSelector: {}\nresourceGroups:\n- coveredResources: [cpu, memory]\n  flavors:\n  - name: f\n    resources: [{name: cpu, nominalQuota: 4, lendingLimit: 2}, {name: memory, nominalQuota: 1Gi}]\n",
        );
        assert!(
            validate_cluster_queue(&q).is_empty(),
            "{:?}",
            msgs(&validate_cluster_queue(&q))
        );
    }

    #[test]
    fn lending_and_borrowing_rules() {
        let q = cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n  - name: a\n    resources: [{name: cpu, nominalQuota: 4}]\n  - name: b\n    resources: [{name: cpu, nominalQuota: 4, lendingLimit: 5, borrowingLimit: -1}]\n",
        );
        let m = msgs(&validate_cluster_queue(&q));
        let base = "spec.resourceGroups[0].flavors[1].resources[0]";
        assert!(m.contains(&format!("{base}.lendingLimit: Invalid value: \"5\": must be less than or equal to the nominalQuota")), "{m:?}");
        assert!(
            m.contains(&format!(
                "{base}.lendingLimit: Invalid value: \"5\": must be nil when cohort is empty"
            )),
            "{m:?}"
        );
        assert!(
            m.contains(&format!(
                "{base}.borrowingLimit: Invalid value: \"-1\": must be nil when cohort is empty"
            )),
            "{m:?}"
        );
        assert!(
            m.contains(&format!(
                "{base}.borrowingLimit: Invalid value: \"-1\": must be greater than or equal to 0"
            )),
            "{m:?}"
        );
    }

    #[test]
    fn group_structure_rules() {
        let q = cq(
            "resourceGroups:\n- coveredResources: [cpu, memory]\n  flavors:\n  - name: a\n    resources: [{name: memory, nominalQuota: abc}]\n- coveredResources: [cpu]\n  flavors:\n  - name: a\n    resources: [{name: cpu, nominalQuota: 1}]\n",
        );
        let m = msgs(&validate_cluster_queue(&q));
        assert!(m.contains(&"spec.resourceGroups[0].flavors[0].resources: Invalid value: must have the same number of resources as the coveredResources".to_string()), "{m:?}");
        assert!(m.contains(&"spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: \"memory\": must match the name in coveredResources".to_string()), "{m:?}");
        assert!(m.iter().any(|e| e.starts_with("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"abc\": quantities must match")), "{m:?}");
        assert!(
            m.contains(
                &"spec.resourceGroups[1].coveredResources[0]: Duplicate value: \"cpu\"".to_string()
            ),
            "{m:?}"
        );
        assert!(
            m.contains(
                &"spec.resourceGroups[1].flavors[0].name: Duplicate value: \"a\"".to_string()
            ),
            "{m:?}"
        );
    }

    #[test]
    fn too_many_groups_and_flavors() {
        let mut q = cq("{}");
        let rg = |i: usize| ResourceGroup {
            covered_resources: vec![format!("r{i}")],
            flavors: (0..20)
                .map(|j| crate::api::FlavorQuotas {
                    name: format!("f{i}-{j}"),
                    resources: vec![crate::api::ResourceQuota {
                        name: format!("r{i}"),
                        nominal_quota: crate::api::quantity::format_milli(1000),
                        borrowing_limit: None,
                        lending_limit: None,
                    }],
                })
                .collect(),
        };
        q.spec.resource_groups = (0..17).map(rg).collect();
        let m = msgs(&validate_cluster_queue(&q));
        assert!(
            m.contains(
                &"spec.resourceGroups: Too many: 17: must have at most 16 items".to_string()
            ),
            "{m:?}"
        );
        assert!(
            m.iter().any(|e| e.contains(
                "total number of flavors across all resourceGroups must be ≤ 256, got 340"
            )),
            "{m:?}"
        );
    }

    #[test]
    fn flavor_resource_pairs_per_group_are_capped_at_512() {
        let group = |flavors: usize, resources: usize| ResourceGroup {
            covered_resources: (0..resources).map(|r| format!("r{r}")).collect(),
            flavors: (0..flavors)
                .map(|f| crate::api::FlavorQuotas {
                    name: format!("f{f}"),
                    resources: (0..resources)
                        .map(|r| crate::api::ResourceQuota {
                            name: format!("r{r}"),
                            nominal_quota: crate::api::quantity::format_milli(1000),
                            borrowing_limit: None,
                            lending_limit: None,
                        })
                        .collect(),
                })
                .collect(),
        };
        let mut q = cq("{}");
        q.spec.resource_groups = vec![group(8, 64)];
        assert!(msgs(&validate_cluster_queue(&q)).is_empty());
        q.spec.resource_groups = vec![group(9, 64)];
        assert_eq!(
            msgs(&validate_cluster_queue(&q)),
            vec!["spec.resourceGroups[0]: Invalid value: 576: number of flavor-resource combinations in a resourceGroup must be ≤ 512, got 576".to_string()]
        );
    }

    #[test]
    fn preemption_and_fungibility_combos() {
        let q = cq(
            "preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}, withinClusterQueue: Any}\nflavorFungibility: {whenCanBorrow: MayStopSearch, preference: PreemptionOverBorrowing}\n",
        );
        let m = msgs(&validate_cluster_queue(&q));
        assert!(m.contains(&"spec.preemption: Invalid value: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never".to_string()), "{m:?}");
        assert!(
            m.iter()
                .any(|e| e
                    .starts_with("spec.preemption.withinClusterQueue: Unsupported value: \"Any\"")),
            "{m:?}"
        );
        assert!(m.contains(&"spec.flavorFungibility.preference: Invalid value: \"PreemptionOverBorrowing\": preference \"PreemptionOverBorrowing\" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor".to_string()), "{m:?}");
    }

    #[test]
    fn fungibility_preference_sees_defaults() {
        // whenCanPreempt defaults to TryNextFlavor, so only whenCanBorrow must be set.
        let q = cq(
            "flavorFungibility: {whenCanBorrow: TryNextFlavor, preference: BorrowingOverPreemption}\n",
        );
        assert!(
            validate_cluster_queue(&q).is_empty(),
            "{:?}",
            msgs(&validate_cluster_queue(&q))
        );
        // whenCanBorrow defaults to MayStopSearch, which rules the preference out.
        let q = cq("flavorFungibility: {preference: PreemptionOverBorrowing}\n");
        let m = msgs(&validate_cluster_queue(&q));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].starts_with("spec.flavorFungibility.preference: Invalid value"));
        let q = cq(
            "flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: MayStopSearch, preference: PreemptionOverBorrowing}\n",
        );
        assert_eq!(msgs(&validate_cluster_queue(&q)).len(), 1);
    }

    #[test]
    fn selector_and_names() {
        let q = cq(
            "cohortName: Bad_Name\nnamespaceSelector:\n  matchExpressions:\n  - {key: team, operator: In}\n  - {key: team, operator: Exists, values: [a]}\n  - {key: team, operator: Like, values: [a]}\n",
        );
        let m = msgs(&validate_cluster_queue(&q));
        assert!(
            m.iter()
                .any(|e| e.starts_with("spec.cohortName: Invalid value: \"Bad_Name\"")),
            "{m:?}"
        );
        assert!(
            m.iter().any(|e| e
                .starts_with("spec.namespaceSelector.matchExpressions[0].values: Required value")),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|e| e
                    .starts_with("spec.namespaceSelector.matchExpressions[1].values: Forbidden")),
            "{m:?}"
        );
        // With values given, only the operators that take values are offered.
        assert!(
            m.contains(
                &"spec.namespaceSelector.matchExpressions[2].operator: Unsupported value: \"Like\": supported values: \"In\", \"NotIn\"".to_string()
            ),
            "{m:?}"
        );
    }

    #[test]
    fn on_flavors_offers_only_valid_defined_flavors() {
        let q = cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n  - name: Bad_Name\n    resources: [{name: cpu, nominalQuota: 1}]\n  - name: good\n    resources: [{name: cpu, nominalQuota: 1}]\nadmissionChecksStrategy:\n  admissionChecks:\n  - {name: ac, onFlavors: [other]}\n",
        );
        let m = msgs(&validate_cluster_queue(&q));
        assert!(
            m.contains(&"spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: Unsupported value: \"other\": supported values: \"good\"".to_string()),
            "{m:?}"
        );
        let q = cq(
            "admissionChecksStrategy:\n  admissionChecks:\n  - {name: ac, onFlavors: [other]}\n",
        );
        assert_eq!(
            msgs(&validate_cluster_queue(&q)),
            vec!["spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: Unsupported value: \"other\": spec.resourceGroups defines no flavors to choose from".to_string()]
        );
    }

    #[test]
    fn tiny_fair_sharing_weight_is_rejected_on_every_kind() {
        let want =
            "spec.fairSharing.weight: Invalid value: \"1n\": When not 0, weight must be > 10e-9";
        let q = cq("fairSharing: {weight: 1n}\n");
        assert_eq!(msgs(&validate_cluster_queue(&q)), vec![want.to_string()]);
        let spec = serde_norway::from_str("fairSharing: {weight: 1n}\n").expect("valid");
        let c = Cohort::new("c", spec);
        assert_eq!(msgs(&validate_cohort(&c)), vec![want.to_string()]);
        let spec =
            serde_norway::from_str("clusterQueue: cq\nfairSharing: {weight: 1n}\n").expect("valid");
        let mut lq = LocalQueue::new("q", spec);
        lq.metadata.namespace = Some("ns".into());
        assert_eq!(msgs(&validate_local_queue(&lq)), vec![want.to_string()]);
        // Zero is allowed: it means "always last" in fair sharing.
        assert!(msgs(&validate_cluster_queue(&cq("fairSharing: {weight: 0}\n"))).is_empty());
    }

    #[test]
    fn cohort_cannot_be_its_own_parent() {
        let spec = serde_norway::from_str("parentName: team\n").expect("valid");
        assert_eq!(
            msgs(&validate_cohort(&Cohort::new("team", spec))),
            vec![
                "spec.parentName: Invalid value: \"team\": a Cohort cannot be its own parent"
                    .to_string()
            ]
        );
        let spec = serde_norway::from_str("parentName: org\n").expect("valid");
        assert!(msgs(&validate_cohort(&Cohort::new("team", spec))).is_empty());
    }

    #[test]
    fn cohort_and_local_queue() {
        let spec = serde_norway::from_str("resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n  - name: f\n    resources: [{name: cpu, nominalQuota: 1, lendingLimit: 3}]\n").expect("valid");
        let c = Cohort::new("root", spec);
        let m = msgs(&validate_cohort(&c));
        assert_eq!(m, vec!["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: \"3\": must be nil when parent is empty".to_string()]);
        let mut lq = LocalQueue::new("q", Default::default());
        lq.metadata.namespace = Some("ns".into());
        assert_eq!(
            msgs(&validate_local_queue(&lq)),
            vec!["spec.clusterQueue: Required value".to_string()]
        );
    }
}
