//! Kueue's documented examples apply unchanged (server-side apply) in v1beta2 and v1beta1,
//! and each reads back in the other version through kuota's conversion webhook.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kuota::crds::{self, ConversionWebhook};
use serde_json::{Value, json};

use super::fixtures::{
    LocalWebhook, apply, delete_all, delete_namespace, get_as, namespace, render,
};
use crate::support::{client, ensure_crds, unique_name, wait_until};

const V1BETA2_EXAMPLES: &str = include_str!("kueue-examples/v1beta2.yaml");
const V1BETA1_EXAMPLES: &str = include_str!("kueue-examples/v1beta1.yaml");

/// Points every kuota CRD's conversion at `hook` (or back to `None`). A merge patch, so
/// `ensure_crds`' server-side apply in other tests neither owns nor resets it.
async fn set_conversion(client: &Client, hook: Option<&ConversionWebhook>) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let conversion = match hook {
        Some(h) => {
            let mut c = serde_json::to_value(crds::conversion_spec(h)).expect("conversion JSON");
            // A merge patch keeps keys it does not mention: drop any Service reference
            // and any caBundle left from an earlier run.
            c["webhook"]["clientConfig"]["service"] = Value::Null;
            c["webhook"]["clientConfig"]["caBundle"] = Value::Null;
            c
        }
        None => json!({"strategy": "None", "webhook": null}),
    };
    for crd in crds::all(None).expect("CRDs") {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"conversion": conversion}})),
        )
        .await
        .unwrap_or_else(|e| panic!("set conversion of {name}: {e}"));
    }
}

#[tokio::test]
async fn kueue_examples_apply_in_both_versions_and_read_back_in_the_other() {
    let _conversion = super::CONVERSION_LOCK.lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    let prefix = unique_name("compat");
    let ns = unique_name("compat-ns");
    namespace(&client, &ns).await;
    let hook = LocalWebhook::start().await;
    // No caBundle in the CRDs: `kuota serve --inject-ca-bundle`'s injector writes it.
    let mut conversion =
        ConversionWebhook::at_url(format!("{}/convert", hook.base_url), Vec::new());
    conversion.ca_bundle = None;
    set_conversion(&client, Some(&conversion)).await;
    let injected = kuota::crds::inject::inject_crds(&client, &hook.ca_pem).await;
    let again = kuota::crds::inject::inject_crds(&client, &hook.ca_pem).await;

    let v2 = render(V1BETA2_EXAMPLES, &prefix, &ns);
    let v1 = render(V1BETA1_EXAMPLES, &prefix, &ns);
    let body = {
        let (client, v1, v2, prefix) = (client.clone(), v1.clone(), v2.clone(), prefix.clone());
        tokio::spawn(async move { examples(&client, &v2, &v1, &prefix).await })
    };
    let outcome = body.await;
    let injected = injected.map(|i| i.patched.len());
    let again = again.map(|i| i.patched.len());
    // Restore before asserting: the CRDs are shared with every other test.
    set_conversion(&client, None).await;
    delete_all(&client, &v1).await;
    delete_all(&client, &v2).await;
    delete_namespace(&client, &ns).await;
    drop(hook);
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    assert_eq!(
        injected.expect("inject caBundle"),
        kuota::crds::all(None).expect("the CRDs").len(),
        "every CRD got the caBundle"
    );
    assert_eq!(
        again.expect("inject again"),
        0,
        "a right caBundle is left alone"
    );
}

async fn examples(client: &Client, v2: &[Value], v1: &[Value], prefix: &str) {
    for obj in v2 {
        apply(client, obj).await.unwrap_or_else(|e| {
            panic!(
                "{} {} {}: {e}",
                obj["apiVersion"], obj["kind"], obj["metadata"]["name"]
            )
        });
    }
    // The API server picks up the new conversion settings (and caBundle) asynchronously.
    let team_a = v2
        .iter()
        .find(|o| o["metadata"]["name"] == format!("{prefix}-team-a-cq"))
        .expect("team-a");
    let converted = wait_until(std::time::Duration::from_secs(30), || async {
        get_as(client, team_a, crds::convert::V1BETA1)
            .await
            .is_ok_and(|o| o.data["spec"]["cohort"].is_string())
    })
    .await;
    if converted.is_none() {
        let last = get_as(client, team_a, crds::convert::V1BETA1).await;
        let crd = Api::<CustomResourceDefinition>::all(client.clone())
            .get("clusterqueues.kueue.x-k8s.io")
            .await
            .map(|c| serde_json::to_string(&c.spec.conversion).unwrap_or_default());
        panic!(
            "v1beta2 ClusterQueue never read back through /convert as v1beta1: {last:?}; conversion: {crd:?}"
        );
    }
    for obj in v1 {
        apply(client, obj).await.unwrap_or_else(|e| {
            panic!(
                "{} {} {}: {e}",
                obj["apiVersion"], obj["kind"], obj["metadata"]["name"]
            )
        });
    }

    // v1beta2 → v1beta1: renamed fields and v1beta1 spellings.
    let old = get_as(client, team_a, crds::convert::V1BETA1)
        .await
        .expect("team-a as v1beta1");
    assert_eq!(old.data["spec"]["cohort"], format!("{prefix}-hello-cohort"));
    assert!(old.data["spec"].get("cohortName").is_none());
    // Kueue's conversion keeps v1beta2's MayStopSearch as it is in v1beta1 (it only maps
    // v1beta1's Borrow/Preempt up), so a v1beta1 reader sees the value that is stored.
    assert_eq!(
        old.data["spec"]["flavorFungibility"]["whenCanBorrow"],
        "MayStopSearch"
    );
    assert_eq!(
        old.data["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"],
        "1"
    );
    // Every example reads back in the other version with its spec intact.
    for obj in v2 {
        let back = get_as(client, obj, crds::convert::V1BETA1)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{} {} as v1beta1: {e}",
                    obj["kind"], obj["metadata"]["name"]
                )
            });
        assert_eq!(
            back.types.as_ref().map(|t| t.api_version.as_str()),
            Some(crds::convert::V1BETA1)
        );
    }

    // v1beta1 → v1beta2.
    let v1_cq = v1
        .iter()
        .find(|o| o["kind"] == "ClusterQueue")
        .expect("v1 cq");
    let new = get_as(client, v1_cq, crds::convert::V1BETA2)
        .await
        .expect("v1 cq as v1beta2");
    assert_eq!(
        new.data["spec"]["cohortName"],
        format!("{prefix}-v1-cohort")
    );
    assert!(new.data["spec"].get("cohort").is_none());
    assert_eq!(
        new.data["spec"]["flavorFungibility"]["whenCanBorrow"],
        "MayStopSearch"
    );
    for obj in v1 {
        let back = get_as(client, obj, crds::convert::V1BETA2)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{} {} as v1beta2: {e}",
                    obj["kind"], obj["metadata"]["name"]
                )
            });
        if obj["kind"] == "WorkloadPriorityClass" {
            assert_eq!(back.data["value"], obj["value"]);
        }
    }
    // Re-applying the unchanged v1beta1 examples is a no-op, not a conflict.
    for obj in v1 {
        apply(client, obj)
            .await
            .unwrap_or_else(|e| panic!("re-apply {}: {e}", obj["metadata"]["name"]));
    }
}
