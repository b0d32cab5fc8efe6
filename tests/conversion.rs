//! The conversion webhook's logic (`/convert`): v1beta1⇄v1beta2 for every served kind,
//! round trips that lose nothing, and clear failures for malformed reviews.

use kuota::crds::convert::{self, STASH_ANNOTATION, V1BETA1, V1BETA2};
use kuota::webhook::convert::handle;
use proptest::prelude::*;
use serde_json::{Value, json};

fn cq(api_version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": "team-a", "uid": "1", "resourceVersion": "7", "labels": {"team": "a"}},
        "spec": spec,
    })
}

fn round_trip(object: &Value, via: &str) -> Value {
    let start = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let there = convert::convert(object, via, 0).expect("convert there");
    assert_eq!(there["apiVersion"], via);
    assert_eq!(
        there["metadata"]["uid"], object["metadata"]["uid"],
        "metadata is kept"
    );
    convert::convert(&there, &start, 0).expect("convert back")
}

#[test]
fn v1beta1_cluster_queue_reads_back_as_v1beta2() {
    let old = cq(
        V1BETA1,
        json!({
            "cohort": "research",
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "9"}]}]}],
        }),
    );
    let new = convert::convert(&old, V1BETA2, 0).expect("convert");
    assert_eq!(new["apiVersion"], V1BETA2);
    assert_eq!(new["spec"]["cohortName"], "research");
    assert!(new["spec"].get("cohort").is_none());
    assert_eq!(
        new["spec"]["flavorFungibility"]["whenCanBorrow"],
        "MayStopSearch"
    );
    assert_eq!(new["metadata"], old["metadata"], "metadata copied verbatim");
    assert_eq!(round_trip(&old, V1BETA2)["spec"]["cohort"], "research");
}

#[test]
fn v1beta2_only_fields_survive_a_trip_through_v1beta1() {
    let new = cq(
        V1BETA2,
        json!({
            "cohortName": "research",
            "concurrentAdmissionPolicy": {"migration": {"mode": "RetainFirstAdmission"}},
        }),
    );
    let old = convert::convert(&new, V1BETA1, 0).expect("down");
    assert!(
        old["metadata"]["annotations"][STASH_ANNOTATION].is_string(),
        "the v1beta2 spec is stashed: {old}"
    );
    let back = convert::convert(&old, V1BETA2, 0).expect("up");
    assert_eq!(back["spec"], new["spec"]);
    assert_eq!(back["metadata"], new["metadata"], "stash removed again");

    // Changed through v1beta1 meanwhile: the change wins over the stash.
    let mut edited = old.clone();
    edited["spec"]["cohort"] = json!("other");
    let back = convert::convert(&edited, V1BETA2, 0).expect("up");
    assert_eq!(back["spec"]["cohortName"], "other");
    assert!(back["spec"].get("concurrentAdmissionPolicy").is_none());
}

#[test]
fn same_shape_kinds_only_change_api_version() {
    let rf = json!({
        "apiVersion": V1BETA1, "kind": "ResourceFlavor",
        "metadata": {"name": "h100"},
        "spec": {"nodeLabels": {"gpu": "h100"}, "topologyName": "default"},
    });
    let new = convert::convert(&rf, V1BETA2, 0).expect("convert");
    let mut expected = rf.clone();
    expected["apiVersion"] = json!(V1BETA2);
    assert_eq!(new, expected);
}

#[test]
fn objects_without_spec_convert() {
    for kind in ["ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"] {
        let bare = json!({"apiVersion": V1BETA1, "kind": kind, "metadata": {"name": "bare"}});
        let new = convert::convert(&bare, V1BETA2, 0).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(new["apiVersion"], V1BETA2, "{kind}");
    }
}

#[test]
fn malformed_object_fails_naming_object_and_field() {
    let bad = cq(V1BETA1, json!({"cohort": 3}));
    let err = convert::convert(&bad, V1BETA2, 0).expect_err("must fail");
    let msg = err.to_string();
    assert!(
        msg.starts_with("ClusterQueue \"team-a\": spec.cohort: invalid type"),
        "{msg}"
    );

    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u-1", "desiredAPIVersion": V1BETA2, "objects": [
            cq(V1BETA1, json!({"cohort": "ok"})),
            {"apiVersion": V1BETA1, "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"}, "spec": {"podSets": "many"}},
        ]},
    });
    let (code, out) = handle(review.to_string().as_bytes());
    assert_eq!(code, 200);
    let out = serde_json::to_value(out).expect("json");
    let resp = &out["response"];
    assert_eq!(resp["uid"], "u-1");
    assert_eq!(resp["result"]["status"], "Failure");
    let msg = resp["result"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("Workload \"ns/w\": spec.podSets: invalid type"),
        "{msg}"
    );
    assert!(
        resp.get("convertedObjects")
            .is_none_or(|o| o.as_array().is_some_and(Vec::is_empty)),
        "nothing half-converted: {resp}"
    );
}

#[test]
fn unserved_version_and_kind_and_garbage_are_refused() {
    let alpha = cq("kueue.x-k8s.io/v1alpha1", json!({}));
    let msg = convert::convert(&alpha, V1BETA2, 0)
        .expect_err("v1alpha1")
        .to_string();
    assert!(
        msg.contains("apiVersion: \"kueue.x-k8s.io/v1alpha1\" is not served"),
        "{msg}"
    );
    let other = json!({"apiVersion": V1BETA1, "kind": "ClusterProfile", "metadata": {"name": "p"}});
    let msg = convert::convert(&other, V1BETA2, 0)
        .expect_err("ClusterProfile")
        .to_string();
    assert_eq!(
        msg,
        "ClusterProfile \"p\": kind: \"ClusterProfile\" is not served by kuota"
    );
    // An AdmissionCheck without its required controllerName names the field.
    let ac = json!({"apiVersion": V1BETA1, "kind": "AdmissionCheck", "metadata": {"name": "prov"}});
    let msg = convert::convert(&ac, V1BETA2, 0)
        .expect_err("AdmissionCheck")
        .to_string();
    assert_eq!(
        msg,
        "AdmissionCheck \"prov\": spec: missing field `controllerName`"
    );
    let (code, out) = handle(b"{not json");
    assert_eq!(code, 400);
    let out = serde_json::to_value(out).expect("json");
    let msg = out["response"]["result"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        msg.starts_with("the body is not a ConversionReview"),
        "{msg}"
    );
}

#[test]
fn successful_review_answers_every_object_in_order() {
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u-2", "desiredAPIVersion": V1BETA2, "objects": [
            cq(V1BETA1, json!({"cohort": "a"})),
            {"apiVersion": V1BETA1, "kind": "Topology", "metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
        ]},
    });
    let (_, out) = handle(review.to_string().as_bytes());
    let out = serde_json::to_value(out).expect("json");
    let objs = &out["response"]["convertedObjects"];
    assert_eq!(out["response"]["result"]["status"], "Success");
    assert_eq!(objs[0]["spec"]["cohortName"], "a");
    assert_eq!(objs[1]["kind"], "Topology");
    assert_eq!(objs[1]["apiVersion"], V1BETA2);
}

fn workload(api_version: &str, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": api_version, "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "uid": "9"},
        "spec": spec, "status": status,
    })
}

#[test]
fn v1beta1_admission_checks_replace_a_strategy_given_alongside() {
    let old = cq(
        V1BETA1,
        json!({
            "admissionChecks": ["prov"],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "mk", "onFlavors": ["gpu"]}]},
        }),
    );
    let new = convert::convert(&old, V1BETA2, 0).expect("convert");
    assert_eq!(
        new["spec"]["admissionChecksStrategy"],
        json!({"admissionChecks": [{"name": "prov"}]}),
        "Kueue keeps only admissionChecks"
    );
    assert!(new["spec"].get("admissionChecks").is_none());
}

#[test]
fn may_stop_search_is_written_unchanged_to_v1beta1() {
    let new = cq(
        V1BETA2,
        json!({"flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}}),
    );
    let old = convert::convert(&new, V1BETA1, 0).expect("down");
    assert_eq!(
        old["spec"]["flavorFungibility"],
        json!({"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"})
    );
}

#[test]
fn v1beta1_priority_class_name_without_source_is_dropped() {
    let old = workload(
        V1BETA1,
        json!({"priorityClassName": "high", "priority": 7, "podSets": []}),
        json!({}),
    );
    let new = convert::convert(&old, V1BETA2, 0).expect("convert");
    assert!(new["spec"].get("priorityClassRef").is_none(), "{new}");
    assert_eq!(new["spec"]["priority"], 7);
    let with_source = workload(
        V1BETA1,
        json!({"priorityClassName": "high", "priorityClassSource": "scheduling.k8s.io/priorityclass", "priority": 7, "podSets": []}),
        json!({}),
    );
    let new = convert::convert(&with_source, V1BETA2, 0).expect("convert");
    assert_eq!(
        new["spec"]["priorityClassRef"],
        json!({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"})
    );
}

#[test]
fn v1beta2_only_workload_fields_go_down_as_in_kueue() {
    let spec = json!({
        "preemptionGates": [{"name": "quota-check"}],
        "podSets": [{"name": "main", "count": 4, "template": {},
            "topologyRequest": {"podsetSliceRequiredTopologyConstraints": [{"topology": "rack", "size": 2}]}}],
    });
    let status = json!({
        "preemptionGates": [{"name": "quota-check", "position": "Open", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "admissionChecks": [{"name": "prov", "state": "Retry", "lastTransitionTime": "2026-01-01T00:00:00Z",
            "message": "", "retryCount": 3, "requeueAfterSeconds": 60}],
    });
    let new = workload(V1BETA2, spec.clone(), status);
    let old = convert::convert(&new, V1BETA1, 0).expect("down");
    assert!(old["spec"].get("preemptionGates").is_none());
    assert!(
        old["spec"]["podSets"][0]["topologyRequest"]
            .get("podsetSliceRequiredTopologyConstraints")
            .is_none()
    );
    assert!(
        old["status"].get("preemptionGates").is_none(),
        "v1beta1 has no gate states"
    );
    assert_eq!(old["status"]["admissionChecks"][0]["retryCount"], 3);
    assert_eq!(
        old["status"]["admissionChecks"][0]["requeueAfterSeconds"],
        60
    );
    // kuota's stash brings the spec back whole.
    let back = convert::convert(&old, V1BETA2, 0).expect("up");
    assert_eq!(back["spec"]["preemptionGates"], spec["preemptionGates"]);
    assert_eq!(
        back["spec"]["podSets"][0]["topologyRequest"],
        spec["podSets"][0]["topologyRequest"]
    );
    assert_eq!(back["status"]["admissionChecks"][0]["retryCount"], 3);
}

#[test]
fn v1beta1_topology_domains_convert_to_kueues_slices() {
    let status = json!({"admission": {"clusterQueue": "cq", "podSetAssignments": [{
        "name": "main", "count": 3,
        "topologyAssignment": {"levels": ["block", "rack"], "domains": [
            {"values": ["b1", "rack-1"], "count": 2},
            {"values": ["b1", "rack-2"], "count": 1},
        ]},
    }]}});
    let old = workload(V1BETA1, json!({"podSets": []}), status);
    let new = convert::convert(&old, V1BETA2, 0).expect("up");
    let ta = &new["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"];
    assert_eq!(
        ta["slices"],
        json!([{"domainCount": 2,
            "valuesPerLevel": [{"universal": "b1"}, {"individual": {"prefix": "rack-", "roots": ["1", "2"]}}],
            "podCounts": {"individual": [2, 1]}}])
    );
    let down = convert::convert(&new, V1BETA1, 0).expect("down");
    assert_eq!(down["status"], old["status"]);
}

// ------------------------------------------------------------------ properties

fn opt<T: Clone + std::fmt::Debug + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![Just(None), s.prop_map(Some)].boxed()
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,10}"
}

fn quantity() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..1000).prop_map(|n| n.to_string()),
        (1u32..64).prop_map(|n| format!("{n}Gi"))
    ]
}

fn resource_groups() -> impl Strategy<Value = Value> {
    prop::collection::vec((name(), quantity(), opt(quantity()), opt(quantity())), 1..3).prop_map(
        |flavors| {
            let flavors: Vec<Value> = flavors
                .into_iter()
                .map(|(n, q, b, l)| {
                    let mut r = json!({"name": "cpu", "nominalQuota": q});
                    if let Some(b) = b {
                        r["borrowingLimit"] = json!(b);
                    }
                    if let Some(l) = l {
                        r["lendingLimit"] = json!(l);
                    }
                    json!({"name": n, "resources": [r]})
                })
                .collect();
            json!([{"coveredResources": ["cpu"], "flavors": flavors}])
        },
    )
}

/// A v1beta2 ClusterQueue spec over the fields whose shape differs between versions.
fn cq_spec_v1beta2() -> impl Strategy<Value = Value> {
    let policy = || prop_oneof![Just("MayStopSearch"), Just("TryNextFlavor")];
    (
        opt(name()),
        opt(prop_oneof![Just("StrictFIFO"), Just("BestEffortFIFO")]),
        opt(prop_oneof![
            Just("None"),
            Just("Hold"),
            Just("HoldAndDrain")
        ]),
        opt((opt(policy()), opt(policy()))),
        opt(prop::collection::vec(
            (name(), prop::collection::vec(name(), 0..2)),
            1..3,
        )),
        opt(prop_oneof![
            Just("TryPreferredFlavors"),
            Just("RetainFirstAdmission")
        ]),
        resource_groups(),
    )
        .prop_map(|(cohort, qs, stop, fung, checks, concurrent, groups)| {
            let mut spec = json!({"resourceGroups": groups});
            if let Some(c) = cohort {
                spec["cohortName"] = json!(c);
            }
            if let Some(q) = qs {
                spec["queueingStrategy"] = json!(q);
            }
            if let Some(s) = stop {
                spec["stopPolicy"] = json!(s);
            }
            if let Some((b, p)) = fung {
                let mut f = json!({});
                if let Some(b) = b {
                    f["whenCanBorrow"] = json!(b);
                }
                if let Some(p) = p {
                    f["whenCanPreempt"] = json!(p);
                }
                spec["flavorFungibility"] = f;
            }
            if let Some(checks) = checks {
                let rules: Vec<Value> = checks
                    .into_iter()
                    .map(|(n, on)| {
                        if on.is_empty() {
                            json!({"name": n})
                        } else {
                            json!({"name": n, "onFlavors": on})
                        }
                    })
                    .collect();
                spec["admissionChecksStrategy"] = json!({"admissionChecks": rules});
            }
            if let Some(mode) = concurrent {
                spec["concurrentAdmissionPolicy"] = json!({"migration": {"mode": mode}});
            }
            spec
        })
}

/// A v1beta2 pod set, with or without a multi-layer slice topology request.
fn pod_set() -> impl Strategy<Value = Value> {
    (
        1i32..8,
        opt(prop::collection::vec((name(), 1i32..8), 1..4)),
    )
        .prop_map(|(count, layers)| {
            let mut ps = json!({"name": "main", "count": count, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}});
            if let Some(layers) = layers {
                let c: Vec<Value> = layers
                    .into_iter()
                    .map(|(t, n)| json!({"topology": t, "size": n}))
                    .collect();
                ps["topologyRequest"] = json!({"podsetSliceRequiredTopologyConstraints": c});
            }
            ps
        })
}

/// A v1beta2 admission status: Kueue-encoded topology assignment and admission checks
/// with the retry fields (all of which v1beta1 can hold).
fn status_v1beta2() -> impl Strategy<Value = Value> {
    let domain = (0u8..3, 0u8..12, 1i32..4);
    (
        prop::collection::vec(domain, 0..6),
        opt((opt(0i32..10), opt(0i32..600))),
    )
        .prop_map(|(domains, check)| {
            let domains: Vec<(Vec<String>, i32)> = domains
                .into_iter()
                .map(|(b, h, c)| (vec![format!("block-{b}"), format!("node-{h}.z")], c))
                .collect();
            let ta = kuota::api::tas_encoding::encode(vec!["block".into(), "host".into()], &domains);
            let mut status = json!({"admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "topologyAssignment": ta}]}});
            if let Some((retry, after)) = check {
                let mut c = json!({"name": "prov", "state": "Retry", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "m"});
                if let Some(r) = retry {
                    c["retryCount"] = json!(r);
                }
                if let Some(a) = after {
                    c["requeueAfterSeconds"] = json!(a);
                }
                status["admissionChecks"] = json!([c]);
            }
            status
        })
}

/// A v1beta2 Workload over the fields whose shape differs between versions.
fn workload_v1beta2() -> impl Strategy<Value = Value> {
    (
        opt(name()),
        opt((prop_oneof![Just(true), Just(false)], name())),
        opt(-100i32..100),
        opt(1i32..100000),
        pod_set(),
        opt(prop::collection::btree_set(name(), 1..4)),
        status_v1beta2(),
    )
        .prop_map(|(queue, class, priority, max_exec, pod_set, gates, status)| {
            let mut spec = json!({"podSets": [pod_set]});
            if let Some(q) = queue {
                spec["queueName"] = json!(q);
            }
            if let Some((workload_class, n)) = class {
                spec["priorityClassRef"] = if workload_class {
                    json!({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": n})
                } else {
                    json!({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": n})
                };
            }
            if let Some(p) = priority {
                spec["priority"] = json!(p);
            }
            if let Some(m) = max_exec {
                spec["maximumExecutionTimeSeconds"] = json!(m);
            }
            if let Some(gates) = gates {
                let g: Vec<Value> = gates.into_iter().map(|n| json!({"name": n})).collect();
                spec["preemptionGates"] = json!(g);
            }
            workload(V1BETA2, spec, status)
        })
}

/// Normal form of an object (through the typed v1beta2 decoder), so `"9"` and `9` compare equal.
fn normal_cq(v: &Value) -> Value {
    let typed: kuota::api::ClusterQueue = serde_json::from_value(v.clone()).expect("decodes");
    serde_json::to_value(typed).expect("encodes")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn cluster_queue_v1beta2_round_trip_through_v1beta1_loses_nothing(spec in cq_spec_v1beta2()) {
        let object = cq(V1BETA2, spec);
        let back = round_trip(&object, V1BETA1);
        prop_assert_eq!(normal_cq(&back), normal_cq(&object));
        prop_assert_eq!(&back["metadata"], &object["metadata"]);
    }

    #[test]
    fn cluster_queue_v1beta1_round_trip_through_v1beta2_loses_nothing(spec in cq_spec_v1beta2()) {
        // Start from what a v1beta1 client would have written.
        let v1 = convert::convert(&cq(V1BETA2, spec), V1BETA1, 0).expect("down");
        let mut plain = v1.clone();
        plain["metadata"] = cq(V1BETA1, json!({}))["metadata"].clone();
        let back = round_trip(&plain, V1BETA2);
        prop_assert_eq!(&back["spec"], &plain["spec"]);
    }

    #[test]
    fn workload_round_trips_lose_nothing(object in workload_v1beta2()) {
        let back = round_trip(&object, V1BETA1);
        let norm = |v: &Value| -> Value {
            let typed: kuota::api::Workload = serde_json::from_value(v.clone()).expect("decodes");
            serde_json::to_value(typed).expect("encodes")
        };
        prop_assert_eq!(norm(&back), norm(&object));
        let v1 = convert::convert(&object, V1BETA1, 0).expect("down");
        prop_assert_eq!(&round_trip(&v1, V1BETA2)["spec"], &v1["spec"]);
    }
}

/// AdmissionCheck: v1beta1's deprecated `retryDelayMinutes` is dropped on the way up, as
/// Kueue's conversion drops it; the rest, status included, goes both ways unchanged.
#[test]
fn admission_checks_convert_both_ways() {
    let old = json!({"apiVersion": V1BETA1, "kind": "AdmissionCheck", "metadata": {"name": "prov"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request", "retryDelayMinutes": 15,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "cfg"}},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let up = convert::convert(&old, V1BETA2, 0).expect("up");
    assert_eq!(up["apiVersion"], V1BETA2);
    assert_eq!(up["spec"].get("retryDelayMinutes"), None);
    assert_eq!(up["spec"]["parameters"], old["spec"]["parameters"]);
    assert_eq!(up["status"], old["status"]);
    let down = convert::convert(&up, V1BETA1, 0).expect("down");
    assert_eq!(
        down["spec"]["controllerName"],
        old["spec"]["controllerName"]
    );
    assert_eq!(down["status"], old["status"]);
}

#[test]
fn multikueue_clusters_move_their_connection_between_versions_and_configs_keep_v1beta2_fields() {
    let old = json!({"apiVersion": V1BETA1, "kind": "MultiKueueCluster", "metadata": {"name": "w1"},
        "spec": {"kubeConfig": {"location": "w1-secret", "locationType": "Secret"}}});
    let new = convert::convert(&old, V1BETA2, 0).expect("up");
    assert_eq!(
        new["spec"],
        json!({"clusterSource": {"kubeConfig": {"location": "w1-secret", "locationType": "Secret"}}})
    );
    let back = convert::convert(&new, V1BETA1, 0).expect("down");
    assert_eq!(back["spec"], old["spec"]);
    // quotaManagement has no v1beta1 field: it survives a round trip through v1beta1.
    let cfg = json!({"apiVersion": V1BETA2, "kind": "MultiKueueConfig", "metadata": {"name": "c"},
        "spec": {"clusters": ["w1", "w2"], "quotaManagement": "Manual"}});
    let down = convert::convert(&cfg, V1BETA1, 0).expect("down");
    assert_eq!(down["spec"], json!({"clusters": ["w1", "w2"]}));
    let up = convert::convert(&down, V1BETA2, 0).expect("up");
    assert_eq!(up["spec"], cfg["spec"]);
}
