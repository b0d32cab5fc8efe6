//! Kueue kinds: defaulting and validation in v1beta2 and v1beta1.

mod webhook_common;

use serde_json::{Value, json};
use webhook_common::*;

fn cq(api_version: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "ClusterQueue",
           "metadata": {"name": "cq", "creationTimestamp": null}, "spec": spec})
}

const CQ_V2: (&str, &str, &str) = ("kueue.x-k8s.io", "v1beta2", "ClusterQueue");
const CQ_V1: (&str, &str, &str) = ("kueue.x-k8s.io", "v1beta1", "ClusterQueue");

#[tokio::test]
async fn cluster_queue_defaults_v1beta2() {
    let state = synced_state();
    let obj = cq("kueue.x-k8s.io/v1beta2", json!({"namespaceSelector": {}}));
    let path = "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue";
    let resp = post(&state, path, &review(CQ_V2, "CREATE", Some(&obj), None)).await;
    let out = apply(&obj, &resp);
    assert_eq!(out["spec"]["queueingStrategy"], "BestEffortFIFO");
    assert_eq!(out["spec"]["stopPolicy"], "None");
    assert_eq!(
        out["spec"]["flavorFungibility"],
        json!({"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"})
    );
    assert_eq!(
        out["spec"]["preemption"],
        json!({"reclaimWithinCohort": "Never", "withinClusterQueue": "Never", "borrowWithinCohort": {"policy": "Never"}})
    );
    // No `resource-in-use` finalizer from the webhook: the controller adds it together with
    // the code that removes it, so a delete never hangs on it.
    assert_eq!(out["metadata"]["finalizers"], Value::Null);
    // Untouched fields stay as they were (no typed round trip).
    assert_eq!(out["metadata"]["creationTimestamp"], Value::Null);
    let again = post(&state, path, &review(CQ_V2, "CREATE", Some(&out), None)).await;
    assert!(patch_of(&again).0.is_empty(), "idempotent: {again}");
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        &review(CQ_V2, "CREATE", Some(&out), None),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
}

#[tokio::test]
async fn v1beta1_objects_are_answered_in_v1beta1() {
    let state = synced_state();
    let obj = cq("kueue.x-k8s.io/v1beta1", json!({"cohort": "Bad_Cohort"}));
    let mut r = review(CQ_V1, "CREATE", Some(&obj), None);
    r["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let resp = post(&state, "/mutate-kueue-x-k8s-io-v1beta1-clusterqueue", &r).await;
    let out = apply(&obj, &resp);
    // v1beta1 spelling of the fungibility default.
    assert_eq!(out["spec"]["flavorFungibility"]["whenCanBorrow"], "Borrow");
    assert_eq!(out["spec"]["cohort"], "Bad_Cohort");
    assert!(out["spec"].get("cohortName").is_none());
    let mut v = review(CQ_V1, "CREATE", Some(&out), None);
    v["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let resp = post(&state, "/validate-kueue-x-k8s-io-v1beta1-clusterqueue", &v).await;
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 422);
    assert!(
        message(&resp).starts_with("spec.cohort: Invalid value: \"Bad_Cohort\""),
        "{resp}"
    );
    // The same object sent to the v1beta2 path is still read as v1beta1.
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        &review(CQ_V1, "CREATE", Some(&out), None),
    )
    .await;
    assert!(message(&resp).starts_with("spec.cohort:"), "{resp}");
}

#[tokio::test]
async fn invalid_cluster_queue_lists_every_problem() {
    let state = synced_state();
    let obj = cq(
        "kueue.x-k8s.io/v1beta2",
        json!({"resourceGroups": [{"coveredResources": ["cpu"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4", "lendingLimit": "5"}]}]}]}),
    );
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        &review(CQ_V2, "CREATE", Some(&obj), None),
    )
    .await;
    let m = message(&resp);
    assert!(m.starts_with('['), "{m}");
    assert!(m.contains("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: \"5\": must be less than or equal to the nominalQuota"), "{m}");
    assert!(m.contains("must be nil when cohort is empty"), "{m}");
    // A field kuota does not know comes from a newer Kueue's CRDs (the API server has
    // already pruned or refused what the installed CRD lacks): ignored and counted, and
    // the object is judged on what kuota knows.
    let before = kuota::api::lenient::unknown_fields("ClusterQueue");
    let newer = cq(
        "kueue.x-k8s.io/v1beta2",
        json!({"resourceGroups": [], "aFieldFromANewerKueue": {"on": true}}),
    );
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        &review(CQ_V2, "CREATE", Some(&newer), None),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(
        kuota::api::lenient::unknown_fields("ClusterQueue") - before,
        1
    );
    // A known field of the wrong type is still refused by name.
    let bad = cq("kueue.x-k8s.io/v1beta2", json!({"cohortName": 7}));
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        &review(CQ_V2, "CREATE", Some(&bad), None),
    )
    .await;
    assert_eq!(resp["status"]["code"], 400);
    assert!(
        message(&resp).starts_with("request.object.spec.cohortName: invalid type"),
        "{resp}"
    );
}

#[tokio::test]
async fn workload_defaults_and_update_rules() {
    let state = synced_state();
    let kind = ("kueue.x-k8s.io", "v1beta2", "Workload");
    let wl = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {"queueName": "a", "podSets": [{"template": {"spec": {"containers": []}}}]}});
    let resp = post(
        &state,
        "/mutate-kueue-x-k8s-io-v1beta2-workload",
        &review(kind, "CREATE", Some(&wl), None),
    )
    .await;
    let wl = apply(&wl, &resp);
    assert_eq!(wl["spec"]["podSets"][0]["name"], "main");
    assert_eq!(wl["spec"]["podSets"][0]["count"], 1);
    assert_eq!(wl["spec"]["active"], true);

    let mut reserved = wl.clone();
    reserved["status"] = json!({"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
        "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]}});
    let mut moved = reserved.clone();
    moved["spec"]["queueName"] = json!("b");
    moved["spec"]["podSets"][0]["count"] = json!(2);
    let path = "/validate-kueue-x-k8s-io-v1beta2-workload";
    let resp = post(
        &state,
        path,
        &review(kind, "UPDATE", Some(&moved), Some(&reserved)),
    )
    .await;
    assert_eq!(
        message(&resp),
        "[spec.podSets[0]: Invalid value: field is immutable, spec.queueName: Invalid value: \"b\": field is immutable]"
    );
    let resp = post(
        &state,
        path,
        &review(kind, "UPDATE", Some(&moved), Some(&wl)),
    )
    .await;
    assert_eq!(resp["allowed"], true, "pending workloads may move: {resp}");
    // v1beta1 workloads convert (priorityClassName/Source) and validate the same way.
    let mut v1 = reserved.clone();
    v1["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
    v1["spec"]["priorityClassName"] = json!("Bad Class");
    v1["spec"]["priorityClassSource"] = json!("kueue.x-k8s.io/workloadpriorityclass");
    v1["spec"]["priority"] = json!(5);
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta1-workload",
        &review(
            ("kueue.x-k8s.io", "v1beta1", "Workload"),
            "CREATE",
            Some(&v1),
            None,
        ),
    )
    .await;
    assert!(
        message(&resp).starts_with("spec.priorityClassName: Invalid value: \"Bad Class\""),
        "{resp}"
    );
}

#[tokio::test]
async fn local_queue_topology_cohort_flavor_and_priority_class() {
    let state = synced_state();
    let lq = |cq: &str| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": cq}})
    };
    let kind = ("kueue.x-k8s.io", "v1beta2", "LocalQueue");
    let resp = post(
        &state,
        "/mutate-kueue-x-k8s-io-v1beta2-localqueue",
        &review(kind, "CREATE", Some(&lq("a")), None),
    )
    .await;
    assert_eq!(apply(&lq("a"), &resp)["spec"]["stopPolicy"], "None");
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-localqueue",
        &review(kind, "UPDATE", Some(&lq("b")), Some(&lq("a"))),
    )
    .await;
    assert_eq!(
        message(&resp),
        "spec.clusterQueue: Invalid value: \"b\": field is immutable"
    );

    let topo = |l: &str| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": l}]}})
    };
    let kind = ("kueue.x-k8s.io", "v1beta2", "Topology");
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-topology",
        &review(kind, "UPDATE", Some(&topo("b")), Some(&topo("a"))),
    )
    .await;
    assert_eq!(
        message(&resp),
        "spec.levels: Invalid value: \"array\": levels are mutable only when \
         kubernetes.io/hostname is the lowest level both before and after the change"
    );
    // Kueue allows new levels above the hostname level.
    let topo_levels = |levels: &[&str]| {
        let levels: Vec<Value> = levels.iter().map(|l| json!({"nodeLabel": l})).collect();
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": "t"}, "spec": {"levels": levels}})
    };
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-topology",
        &review(
            kind,
            "UPDATE",
            Some(&topo_levels(&["block", "rack", "kubernetes.io/hostname"])),
            Some(&topo_levels(&["rack", "kubernetes.io/hostname"])),
        ),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");

    let cohort = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
        "metadata": {"name": "root"}, "spec": {"parentName": "root"}});
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-cohort",
        &review(
            ("kueue.x-k8s.io", "v1beta2", "Cohort"),
            "CREATE",
            Some(&cohort),
            None,
        ),
    )
    .await;
    assert_eq!(
        message(&resp),
        "spec.parentName: Invalid value: \"root\": a Cohort cannot be its own parent"
    );

    let rf = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "f", "finalizers": ["other"]}, "spec": {"topologyName": "t"}});
    let kind = ("kueue.x-k8s.io", "v1beta2", "ResourceFlavor");
    let resp = post(
        &state,
        "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
        &review(kind, "CREATE", Some(&rf), None),
    )
    .await;
    assert_eq!(
        apply(&rf, &resp)["metadata"]["finalizers"],
        json!(["other"]),
        "finalizers left as they were"
    );
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
        &review(kind, "CREATE", Some(&rf), None),
    )
    .await;
    assert_eq!(
        message(&resp),
        "spec: Invalid value: at least one nodeLabel is required when topology is set"
    );

    let wpc = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"}, "value": 1000});
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-workloadpriorityclass",
        &review(
            ("kueue.x-k8s.io", "v1beta2", "WorkloadPriorityClass"),
            "CREATE",
            Some(&wpc),
            None,
        ),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    // Deletes are always allowed.
    let resp = post(
        &state,
        "/validate-kueue-x-k8s-io-v1beta2-topology",
        &review(
            ("kueue.x-k8s.io", "v1beta2", "Topology"),
            "DELETE",
            None,
            Some(&topo("a")),
        ),
    )
    .await;
    assert_eq!(resp["allowed"], true);
}
