//! The committed CRDs in `manifests/crds/` are exactly what `kuota crds` generates, and
//! they carry what Kueue's CRDs do: versions, subresources, names, columns and CEL rules.

use std::collections::BTreeSet;
use std::path::Path;

use kuota::crds::{self, ConversionWebhook};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/crds");

#[test]
fn committed_crds_match_the_generator() {
    let generated = crds::files(Some(&ConversionWebhook::in_cluster())).expect("generate");
    let mut stale = Vec::new();
    for (name, text) in &generated {
        let path = Path::new(DIR).join(name);
        match std::fs::read_to_string(&path) {
            Ok(committed) if &committed == text => {}
            Ok(_) => stale.push(format!("{name} differs")),
            Err(e) => stale.push(format!("{name}: {e}")),
        }
    }
    let expected: BTreeSet<_> = generated.iter().map(|(n, _)| n.clone()).collect();
    for entry in std::fs::read_dir(DIR).expect("manifests/crds exists") {
        let name = entry
            .expect("dir entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".yaml") && !expected.contains(&name) {
            stale.push(format!("{name} is not generated any more"));
        }
    }
    assert!(
        stale.is_empty(),
        "manifests/crds is out of date ({}); regenerate it with \
         `cargo run -- crds --out-dir manifests/crds`",
        stale.join("; ")
    );
}

#[test]
fn every_served_kind_has_kueue_versions_and_names() {
    let all = crds::all(None).expect("generate");
    let kinds: Vec<_> = all.iter().map(|c| c.spec.names.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ResourceFlavor",
            "Cohort",
            "ClusterQueue",
            "AdmissionCheck",
            "ProvisioningRequestConfig",
            "MultiKueueConfig",
            "MultiKueueCluster",
            "LocalQueue",
            "Workload",
            "WorkloadPriorityClass",
            "Topology"
        ]
    );
    let short = |kind: &str| {
        all.iter()
            .find(|c| c.spec.names.kind == kind)
            .and_then(|c| c.spec.names.short_names.clone())
            .unwrap_or_default()
    };
    assert_eq!(short("ClusterQueue"), ["cq"]);
    assert_eq!(short("LocalQueue"), ["queue", "queues", "lq"]);
    assert_eq!(
        short("Workload"),
        ["kwl", "kueueworkload", "kueueworkloads"]
    );
    assert_eq!(short("ResourceFlavor"), ["flavor", "flavors", "rf"]);
    assert_eq!(short("AdmissionCheck"), ["ac"]);
    assert_eq!(short("ProvisioningRequestConfig"), ["prc"]);
    assert_eq!(short("MultiKueueConfig"), ["mkconf"]);
    assert_eq!(short("MultiKueueCluster"), ["mkc"]);
    for crd in &all {
        let kind = &crd.spec.names.kind;
        assert_eq!(crd.spec.group, "kueue.x-k8s.io");
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(
            versions,
            [("v1beta2", true, true), ("v1beta1", true, false)],
            "{kind}"
        );
        let has_status = crd.spec.versions[0]
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some());
        let kueue_has_status = matches!(
            kind.as_str(),
            "AdmissionCheck"
                | "ClusterQueue"
                | "Cohort"
                | "LocalQueue"
                | "MultiKueueCluster"
                | "Workload"
        );
        assert_eq!(has_status, kueue_has_status, "{kind} status subresource");
        assert!(
            crd.spec.conversion.is_none(),
            "{kind}: no conversion asked for"
        );
    }
}

#[test]
fn kueue_cel_rules_and_columns_sit_at_kueue_paths() {
    let all = crds::all(None).expect("generate");
    let cq = all
        .iter()
        .find(|c| c.spec.names.kind == "ClusterQueue")
        .expect("cq");
    let v2 = serde_json::to_value(&cq.spec.versions[0]).expect("json");
    let rg_rules = &v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["resourceGroups"]
        ["items"]["x-kubernetes-validations"];
    assert_eq!(
        rg_rules[0]["message"],
        "flavors must have the same number of resources as the coveredResources"
    );
    let spec_rules =
        &v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"];
    assert!(
        spec_rules[0]["rule"]
            .as_str()
            .unwrap_or_default()
            .contains("cohortName")
    );
    let v1 = serde_json::to_value(&cq.spec.versions[1]).expect("json");
    let v1_rules =
        &v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"];
    assert!(
        v1_rules[0]["rule"]
            .as_str()
            .unwrap_or_default()
            .contains("self.cohort)")
    );
    assert_eq!(
        v2["additionalPrinterColumns"][0]["jsonPath"],
        ".spec.cohortName"
    );
    assert_eq!(
        v1["additionalPrinterColumns"][0]["jsonPath"],
        ".spec.cohort"
    );
    // Kueue's bounds, which the API server needs to price the rules.
    assert_eq!(
        v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["resourceGroups"]["maxItems"],
        16
    );
}

#[test]
fn conversion_points_at_the_webhook_service() {
    let hook = ConversionWebhook {
        ca_bundle: Some(b"PEM".to_vec()),
        ..ConversionWebhook::in_cluster()
    };
    for crd in crds::all(Some(&hook)).expect("generate") {
        let conv = serde_json::to_value(&crd.spec.conversion).expect("json");
        assert_eq!(conv["strategy"], "Webhook");
        let cc = &conv["webhook"]["clientConfig"];
        assert_eq!(cc["service"]["name"], "kuota-webhook");
        assert_eq!(cc["service"]["namespace"], "kuota-system");
        assert_eq!(cc["service"]["path"], "/convert");
        assert_eq!(cc["caBundle"], "UEVN");
        assert_eq!(conv["webhook"]["conversionReviewVersions"][0], "v1");
    }
}

/// The Helm chart cannot read files outside its directory, so it carries a copy of
/// manifests/crds; with `committed_crds_match_the_generator` this keeps the copy generated.
#[test]
fn the_helm_chart_carries_the_committed_crds() {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/helm/kuota/files/crds");
    let names = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| n.starts_with("kueue.x-k8s.io_") && n.ends_with(".yaml"))
            .collect()
    };
    let (committed, copied) = (names(Path::new(DIR)), names(&chart));
    let mut stale: Vec<String> = committed
        .symmetric_difference(&copied)
        .map(|n| format!("{n} is in only one of them"))
        .collect();
    for name in committed.intersection(&copied) {
        let read = |dir: &Path| std::fs::read(dir.join(name)).expect("read CRD");
        if read(Path::new(DIR)) != read(&chart) {
            stale.push(format!("{name} differs"));
        }
    }
    assert!(
        stale.is_empty(),
        "manifests/helm/kuota/files/crds is not a copy of manifests/crds ({}); refresh it with \
         `cp manifests/crds/kueue.x-k8s.io_*.yaml manifests/helm/kuota/files/crds/`",
        stale.join("; ")
    );
}

/// The schema node at a dotted path of a CRD version (`[]` descends into list items).
fn schema_at(crd: &serde_json::Value, path: &str) -> serde_json::Value {
    let mut node = &crd["schema"]["openAPIV3Schema"];
    for seg in path.split('.') {
        let field = seg.trim_end_matches("[]");
        node = &node["properties"][field];
        if seg.ends_with("[]") {
            node = &node["items"];
        }
    }
    node.clone()
}

#[test]
fn workload_schema_has_kueues_current_fields_and_rules() {
    let all = crds::all(None).expect("generate");
    let version = |kind: &str, i: usize| {
        let crd = all
            .iter()
            .find(|c| c.spec.names.kind == kind)
            .expect("kind generated");
        serde_json::to_value(&crd.spec.versions[i]).expect("json")
    };
    let wl = version("Workload", 0);
    assert_eq!(schema_at(&wl, "spec.preemptionGates")["maxItems"], 8);
    assert_eq!(
        schema_at(&wl, "status.preemptionGates[].position")["enum"],
        serde_json::json!(["Closed", "Open"])
    );
    assert_eq!(
        schema_at(
            &wl,
            "spec.podSets[].topologyRequest.podsetSliceRequiredTopologyConstraints"
        )["maxItems"],
        3
    );
    for field in ["retryCount", "requeueAfterSeconds"] {
        let path = format!("status.admissionChecks[].{field}");
        assert_eq!(schema_at(&wl, &path)["type"], "integer", "{field}");
    }
    let slice = "status.admission.podSetAssignments[].topologyAssignment.slices[]";
    assert_eq!(
        schema_at(&wl, &format!("{slice}.podCounts.individual"))["maxItems"],
        100000
    );
    assert_eq!(
        schema_at(&wl, &format!("{slice}.podCounts.universal"))["type"],
        "integer"
    );
    assert_eq!(
        schema_at(&wl, &format!("{slice}.valuesPerLevel[].individual.roots"))["maxItems"],
        100000
    );
    let messages: Vec<String> = schema_at(&wl, slice)["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        messages.contains(&"podCounts.individual must have length equal to domainCount".into()),
        "{messages:?}"
    );
    assert!(
        schema_at(&wl, &format!("{slice}.universalPodCount")).is_null(),
        "the pre-release shape is gone"
    );
    // v1beta1 has neither gates nor multi-layer slices, as in Kueue.
    let wl1 = version("Workload", 1);
    assert!(schema_at(&wl1, "spec.preemptionGates").is_null());
    assert!(schema_at(&version("LocalQueue", 0), "spec.wallTimePolicy").is_null());
    assert!(schema_at(&version("LocalQueue", 0), "status.wallTimeFlavorUsage").is_null());
    assert!(schema_at(&version("ResourceFlavor", 0), "spec.resourceWeights").is_null());
}

/// Kueue's v1beta1 Workload has `podSetSliceRequiredTopology` but not v1beta2's list of
/// slice constraints; a v1beta1 client must not be offered a field its version lacks.
#[test]
fn the_v1beta1_workload_has_no_slice_constraint_list() {
    let all = crds::all(None).expect("generate");
    let workload = all
        .iter()
        .find(|c| c.spec.names.kind == "Workload")
        .expect("Workload CRD");
    let topology_request = |version: &str| {
        let v = workload
            .spec
            .versions
            .iter()
            .find(|v| v.name == version)
            .expect("version served");
        let schema = serde_json::to_value(&v.schema).expect("json");
        schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["podSets"]["items"]
            ["properties"]["topologyRequest"]["properties"]
            .as_object()
            .cloned()
            .expect("topologyRequest properties")
    };
    let v1beta1 = topology_request("v1beta1");
    let v1beta2 = topology_request("v1beta2");
    assert!(v1beta1.contains_key("podSetSliceRequiredTopology"));
    assert!(!v1beta1.contains_key("podsetSliceRequiredTopologyConstraints"));
    assert!(v1beta2.contains_key("podsetSliceRequiredTopologyConstraints"));
}
