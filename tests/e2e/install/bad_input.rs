//! Input Kueue rejects is rejected by kuota's CRDs, with a message naming the object and
//! the field, and nothing is stored.

use kube::Client;
use serde_json::{Value, json};

use super::fixtures::{apply, delete_all, get_as};
use crate::support::{client, ensure_crds, unique_name};

/// Applies `obj`, expects a rejection whose message contains every part of `expect`, and
/// checks that nothing was stored.
async fn rejected(client: &Client, obj: &Value, expect: &[&str]) {
    let what = format!("{} {}", obj["kind"], obj["metadata"]["name"]);
    let err = match apply(client, obj).await {
        Ok(_) => {
            delete_all(client, std::slice::from_ref(obj)).await;
            panic!("{what} was accepted");
        }
        Err(e) => e.to_string(),
    };
    for part in expect {
        assert!(err.contains(part), "{what}: {part:?} not in {err:?}");
    }
    let stored = get_as(client, obj, obj["apiVersion"].as_str().unwrap_or_default()).await;
    assert!(stored.is_err(), "{what} was stored despite the error");
}

fn cq(api_version: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
}

fn cpu_group(borrowing_limit: bool) -> Value {
    let mut r = json!({"name": "cpu", "nominalQuota": 9});
    if borrowing_limit {
        r["borrowingLimit"] = json!(1);
    }
    json!([{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [r]}]}])
}

const V1: &str = "kueue.x-k8s.io/v1beta1";
const V2: &str = "kueue.x-k8s.io/v1beta2";

#[tokio::test]
async fn an_unknown_field_is_refused_by_name() {
    let client = client().await;
    ensure_crds(&client).await;
    let name = unique_name("bad");
    let typo = cq(V2, &name, json!({"resourceGroupz": cpu_group(false)}));
    rejected(
        &client,
        &typo,
        &[&name, ".spec.resourceGroupz: field not declared in schema"],
    )
    .await;
}

#[tokio::test]
async fn a_field_renamed_between_versions_is_refused_by_name() {
    let client = client().await;
    ensure_crds(&client).await;
    let name = unique_name("bad");
    // A v1beta1 object using the field v1beta2 renamed, and the reverse.
    let renamed = cq(V1, &name, json!({"cohortName": "research"}));
    rejected(
        &client,
        &renamed,
        &[&name, ".spec.cohortName: field not declared in schema"],
    )
    .await;
    let old_name = cq(V2, &name, json!({"cohort": "research"}));
    rejected(
        &client,
        &old_name,
        &[&name, ".spec.cohort: field not declared in schema"],
    )
    .await;
}

#[tokio::test]
async fn an_unserved_version_or_kind_is_refused() {
    let client = client().await;
    ensure_crds(&client).await;
    let name = unique_name("bad");
    // A version kuota does not serve (Kueue's long-gone v1alpha1 ClusterQueue).
    let alpha = cq("kueue.x-k8s.io/v1alpha1", &name, json!({}));
    rejected(&client, &alpha, &["404"]).await;
    // A kind Kueue never had in this group.
    let other = json!({"apiVersion": V2, "kind": "ClusterProfile", "metadata": {"name": name},
                       "spec": {}});
    rejected(&client, &other, &["404"]).await;
    // A MultiKueueConfig without clusters, or with one twice: Kueue's schema refuses it.
    let none = json!({"apiVersion": V2, "kind": "MultiKueueConfig", "metadata": {"name": name},
                       "spec": {"clusters": []}});
    rejected(
        &client,
        &none,
        &["spec.clusters", "should have at least 1 items"],
    )
    .await;
    let twice = json!({"apiVersion": V2, "kind": "MultiKueueConfig", "metadata": {"name": name},
                       "spec": {"clusters": ["w1", "w1"]}});
    rejected(&client, &twice, &["spec.clusters", "must be unique"]).await;
    let both = json!({"apiVersion": V2, "kind": "MultiKueueCluster", "metadata": {"name": name},
                       "spec": {"clusterSource": {"kubeConfig": {"location": "s"},
                                "clusterProfileRef": {"name": "p"}}}});
    rejected(
        &client,
        &both,
        &["exactly one of the fields in [kubeConfig clusterProfileRef] must be set"],
    )
    .await;
}

#[tokio::test]
async fn objects_kueue_rejects_are_rejected_with_kueues_messages() {
    let client = client().await;
    ensure_crds(&client).await;
    let name = unique_name("cel");
    let v2 = "kueue.x-k8s.io/v1beta2";
    let no_cohort = cq(v2, &name, json!({"resourceGroups": cpu_group(true)}));
    rejected(
        &client,
        &no_cohort,
        &[
            &name,
            "spec",
            "borrowingLimit must be nil when cohort is empty",
        ],
    )
    .await;
    let v1_no_cohort = cq(
        "kueue.x-k8s.io/v1beta1",
        &name,
        json!({"resourceGroups": cpu_group(true)}),
    );
    rejected(
        &client,
        &v1_no_cohort,
        &[&name, "borrowingLimit must be nil when cohort is empty"],
    )
    .await;
    let uncovered = cq(
        v2,
        &name,
        json!({"resourceGroups": [{"coveredResources": ["cpu", "memory"],
               "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}),
    );
    rejected(
        &client,
        &uncovered,
        &[
            &name,
            "spec.resourceGroups[0]",
            "flavors must have the same number of resources as the coveredResources",
        ],
    )
    .await;
    let topology = json!({"apiVersion": v2, "kind": "Topology", "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]}});
    rejected(
        &client,
        &topology,
        &[
            &name,
            "spec.levels",
            "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        ],
    )
    .await;
    let flavor = json!({"apiVersion": v2, "kind": "ResourceFlavor", "metadata": {"name": name},
        "spec": {"tolerations": [{"key": "spot", "operator": "Equal", "value": "x", "effect": "Sometimes"}]}});
    rejected(
        &client,
        &flavor,
        &[&name, "spec.tolerations", "supported taint effect values"],
    )
    .await;
    let wpc = json!({"apiVersion": v2, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
        "value": "high"});
    rejected(&client, &wpc, &[&name, "value"]).await;
}
