//! kuota's admission policies: the example files in `policies/`, every rule, through the
//! job handlers; and loading errors.

mod webhook_common;

use kuota::policy::PolicyHandle;
use kuota::webhook::{WebhookConfig, WebhookState};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use webhook_common::*;

const VALIDATE_JOB: &str = "/validate-batch-v1-job";
const MUTATE_JOB: &str = "/mutate-batch-v1-job";

fn policies_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies")
}

fn state() -> Arc<WebhookState> {
    let policies = PolicyHandle::load_dir(policies_dir()).expect("example policies load");
    state_with(WebhookConfig::default(), policies)
}

/// A job in the gpu tier that satisfies every gpu-teams rule.
fn gpu_job(pods: i32, gpus: i32) -> Value {
    small_job(
        "gpu-a",
        json!({"kueue.x-k8s.io/queue-name": "gpu-queue", "kuota.dev/team": "a", "kuota.dev/owner": "alice"}),
        pods,
        gpus,
    )
}

async fn validate(state: &Arc<WebhookState>, obj: &Value) -> Value {
    post(state, VALIDATE_JOB, &review(JOB, "CREATE", Some(obj), None)).await
}

fn assert_forbidden(resp: &Value, policy: &str, rule: &str, detail: &str) {
    assert_eq!(resp["allowed"], false, "{resp}");
    assert_eq!(resp["status"]["code"], 403, "{resp}");
    assert_eq!(resp["status"]["reason"], "Forbidden");
    let m = message(resp);
    let file = format!("policies/{policy}");
    assert!(
        m.contains(&format!("({}", policies_dir().join(policy).display())) || m.contains(&file),
        "message names the policy file: {m}"
    );
    assert!(
        m.contains(&format!("rule {rule}:")),
        "message names the rule {rule}: {m}"
    );
    assert!(m.contains(detail), "{m}\nwanted: {detail}");
}

#[test]
fn example_files_load() {
    let set = PolicyHandle::load_dir(policies_dir())
        .expect("valid")
        .current();
    let names: Vec<&str> = set.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["gpu-teams", "research", "owner-label"]);
    assert!(
        set.policies[2].source.line > 20,
        "second document keeps its line"
    );
}

#[tokio::test]
async fn compliant_job_passes() {
    let s = state();
    let resp = validate(&s, &gpu_job(2, 8)).await;
    assert_eq!(resp["allowed"], true, "{resp}");
}

#[tokio::test]
async fn default_local_queue_comes_from_the_policy() {
    let s = state();
    let obj = small_job("gpu-a", json!({"kuota.dev/team": "a"}), 1, 1);
    let resp = post(&s, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    let out = apply(&obj, &resp);
    assert_eq!(
        out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "gpu-queue"
    );
    assert_eq!(out["spec"]["suspend"], true);
    let again = post(&s, MUTATE_JOB, &review(JOB, "CREATE", Some(&out), None)).await;
    assert!(patch_of(&again).0.is_empty());
    // Outside the policy's namespaces nothing is defaulted by it.
    let obj = small_job("team-b", json!({}), 1, 1);
    let resp = post(&s, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert!(patch_of(&resp).0.is_empty());
}

#[tokio::test]
async fn max_gpus_per_job() {
    let s = state();
    let resp = validate(&s, &gpu_job(3, 8)).await;
    assert_forbidden(
        &resp,
        "gpu-teams.yaml",
        "maxGPUsPerJob",
        "requests 24 nvidia.com/gpu (3 × 8 (main)), more than the 16 allowed per job",
    );
}

#[tokio::test]
async fn max_gpus_per_pod_counts_containers_and_init_containers() {
    let s = state();
    let mut obj = gpu_job(1, 6);
    obj["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "side", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "4"}}}));
    let resp = validate(&s, &obj).await;
    assert_forbidden(
        &resp,
        "gpu-teams.yaml",
        "maxGPUsPerPod",
        "pod set \"main\" requests 10 nvidia.com/gpu per pod, more than the 8 allowed per pod",
    );
    let mut obj = gpu_job(1, 1);
    obj["spec"]["template"]["spec"]["initContainers"] =
        json!([{"name": "warm", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "9"}}}]);
    assert_forbidden(
        &validate(&s, &obj).await,
        "gpu-teams.yaml",
        "maxGPUsPerPod",
        "requests 9",
    );
}

/// A request too large for milli-units (Kueue and the API server accept it) must still
/// count: read as "unparsable, ignore", it would slip past every GPU limit.
#[tokio::test]
async fn a_gpu_request_beyond_milli_range_is_still_limited() {
    let s = state();
    let mut obj = gpu_job(1, 1);
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"nvidia.com/gpu": "10P"}, "limits": {"nvidia.com/gpu": "10P"}});
    assert_forbidden(
        &validate(&s, &obj).await,
        "gpu-teams.yaml",
        "maxGPUsPerPod",
        "requests 10000000000000000 nvidia.com/gpu per pod",
    );
}

#[tokio::test]
async fn allowed_flavors() {
    let s = state();
    let mut obj = gpu_job(1, 1);
    obj["metadata"]["annotations"] = json!({"kuota.dev/flavor": "t4"});
    assert_forbidden(
        &validate(&s, &obj).await,
        "gpu-teams.yaml",
        "allowedFlavors",
        "asks for flavor \"t4\" (kuota.dev/flavor); allowed: h100, a100, a100-spot",
    );
    obj["metadata"]["annotations"] = json!({"kuota.dev/flavor": "h100"});
    assert_eq!(validate(&s, &obj).await["allowed"], true);
}

#[tokio::test]
async fn allowed_gpu_products_by_selector_affinity_or_annotation() {
    let s = state();
    let mut obj = gpu_job(1, 1);
    obj["spec"]["template"]["spec"]["nodeSelector"] = json!({"nvidia.com/gpu.product": "Tesla-T4"});
    assert_forbidden(
        &validate(&s, &obj).await,
        "gpu-teams.yaml",
        "allowedGPUProducts",
        "selects GPU product \"Tesla-T4\" (pod set \"main\" node selector/affinity on nvidia.com/gpu.product)",
    );
    let mut obj = gpu_job(1, 1);
    obj["spec"]["template"]["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"]}]}]}}});
    assert_forbidden(
        &validate(&s, &obj).await,
        "gpu-teams.yaml",
        "allowedGPUProducts",
        "\"NVIDIA-L4\"",
    );
    let mut obj = gpu_job(1, 1);
    obj["metadata"]["annotations"] = json!({"kuota.dev/gpu-product": "NVIDIA-L4"});
    assert_forbidden(
        &validate(&s, &obj).await,
        "gpu-teams.yaml",
        "allowedGPUProducts",
        "(annotation kuota.dev/gpu-product)",
    );
    obj["metadata"]["annotations"] = json!({"kuota.dev/gpu-product": "NVIDIA-H100-80GB-HBM3"});
    assert_eq!(validate(&s, &obj).await["allowed"], true);
}

#[tokio::test]
async fn required_labels_with_and_without_values() {
    let s = state();
    let obj = small_job("gpu-a", json!({"kuota.dev/owner": "alice"}), 1, 1);
    assert_forbidden(
        &validate(&s, &obj).await,
        "gpu-teams.yaml",
        "requiredLabels",
        "must carry the label \"kuota.dev/team\"",
    );
    let research = |cost: &str| {
        small_job(
            "research-a",
            json!({"kuota.dev/cost-center": cost, "kuota.dev/owner": "bob"}),
            1,
            1,
        )
    };
    assert_forbidden(
        &validate(&s, &research("marketing")).await,
        "research.yaml",
        "requiredLabels",
        "has label kuota.dev/cost-center=\"marketing\"; allowed values: research, shared",
    );
    assert_eq!(validate(&s, &research("shared")).await["allowed"], true);
    // The second document of research.yaml (owner-label) applies to every tiered namespace.
    let obj = small_job(
        "research-a",
        json!({"kuota.dev/cost-center": "research"}),
        1,
        1,
    );
    let resp = validate(&s, &obj).await;
    assert_eq!(resp["status"]["code"], 403);
    assert!(message(&resp).contains("policy \"owner-label\""), "{resp}");
}

#[tokio::test]
async fn gpu_resources_are_configurable() {
    let s = state();
    let mut obj = small_job(
        "research-a",
        json!({"kuota.dev/cost-center": "research", "kuota.dev/owner": "bob"}),
        1,
        2,
    );
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] =
        json!("3");
    assert_forbidden(
        &validate(&s, &obj).await,
        "research.yaml",
        "maxGPUsPerPod",
        "requests 5 nvidia.com/gpu+amd.com/gpu per pod",
    );
}

#[tokio::test]
async fn updates_only_check_growth() {
    let s = state();
    let path = VALIDATE_JOB;
    let old = gpu_job(3, 8); // already over the limit (say, the policy tightened later)
    let mut new = old.clone();
    new["spec"]["suspend"] = json!(false);
    let resp = post(&s, path, &review(JOB, "UPDATE", Some(&new), Some(&old))).await;
    assert_eq!(
        resp["allowed"], true,
        "unchanged requests are not re-judged: {resp}"
    );
    let grown = gpu_job(4, 8);
    let resp = post(&s, path, &review(JOB, "UPDATE", Some(&grown), Some(&old))).await;
    assert_forbidden(&resp, "gpu-teams.yaml", "maxGPUsPerJob", "requests 32");
}

#[test]
fn invalid_files_are_rejected_with_file_and_line_and_the_last_good_set_stays() {
    let dir = std::env::temp_dir().join(format!("kuota-policy-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for f in ["gpu-teams.yaml", "research.yaml"] {
        std::fs::copy(policies_dir().join(f), dir.join(f)).expect("copy");
    }
    let handle = PolicyHandle::load_dir(&dir).expect("examples load");
    std::fs::write(
        dir.join("zz-bad.yaml"),
        "apiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: bad}\nspec:\n  namespaceSelector: {}\n  maxGPUsPerJob: 2\n  maxGPUsPerPod: 4\n  gpuResources: [nvidia.com/gpu, \"Not A Resource\"]\n",
    )
    .expect("write");
    let err = handle.reload(&dir).expect_err("invalid file");
    let text = err.to_string();
    let bad = dir.join("zz-bad.yaml").display().to_string();
    assert!(
        text.contains(&format!(
            "{bad}:7: spec.maxGPUsPerPod: Invalid value: 4: must not exceed maxGPUsPerJob (2)"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{bad}:8: spec.gpuResources[1]: Invalid value: \"Not A Resource\""
        )),
        "{text}"
    );
    assert_eq!(
        handle.current().policies.len(),
        3,
        "last good set stays in force"
    );
    std::fs::write(dir.join("zz-bad.yaml"), "apiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: bad}\nspec:\n  namespaceSelector: {}\n  maxGPUsPerJob: many\n").expect("write");
    let text = handle.reload(&dir).expect_err("bad type").to_string();
    assert!(
        text.contains(&format!("{bad}:6:"))
            && text.contains("spec.maxGPUsPerJob: invalid type: string \"many\""),
        "{text}"
    );
    std::fs::remove_file(dir.join("zz-bad.yaml")).expect("remove");
    handle.reload(&dir).expect("good again");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A job without a queue name in a namespace not labelled `kuota.dev/managed=true` comes
/// through the fail-open `*-policy.kuota.dev` entries: a policy selecting the namespace
/// polices it (checks and default queue); anywhere else kuota leaves it exactly as an
/// outage would, even with manageJobsWithoutQueueName on.
#[tokio::test]
async fn jobs_without_a_queue_in_unlabelled_namespaces_get_policies_only() {
    let policies = PolicyHandle::load_dir(policies_dir()).expect("example policies load");
    let config = WebhookConfig {
        manage_jobs_without_queue_name: true,
        ..WebhookConfig::default()
    };
    let s = state_with(config, policies);
    let too_big = small_job(
        "gpu-a",
        json!({"kuota.dev/team": "a", "kuota.dev/owner": "alice"}),
        3,
        8,
    );
    assert_forbidden(
        &validate(&s, &too_big).await,
        "gpu-teams.yaml",
        "maxGPUsPerJob",
        "requests 24 nvidia.com/gpu",
    );
    let fits = small_job(
        "gpu-a",
        json!({"kuota.dev/team": "a", "kuota.dev/owner": "alice"}),
        1,
        8,
    );
    assert_eq!(validate(&s, &fits).await["allowed"], true);
    let resp = post(&s, MUTATE_JOB, &review(JOB, "CREATE", Some(&fits), None)).await;
    let out = apply(&fits, &resp);
    assert_eq!(
        out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "gpu-queue"
    );
    assert_eq!(out["spec"]["suspend"], true);

    // No policy selects `plain`: not suspended, whatever manageJobsWithoutQueueName says.
    let elsewhere = small_job("plain", json!({}), 1, 1);
    let resp = post(
        &s,
        MUTATE_JOB,
        &review(JOB, "CREATE", Some(&elsewhere), None),
    )
    .await;
    assert!(patch_of(&resp).0.is_empty(), "{resp}");
    assert_eq!(validate(&s, &elsewhere).await["allowed"], true);
    // In a labelled namespace the same job is kuota's: suspended.
    let managed = small_job("team-b", json!({}), 1, 1);
    let resp = post(&s, MUTATE_JOB, &review(JOB, "CREATE", Some(&managed), None)).await;
    assert_eq!(apply(&managed, &resp)["spec"]["suspend"], true, "{resp}");
}
