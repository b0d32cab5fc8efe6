//! Job handlers and the review codec, driven through the router like the API server does.

mod webhook_common;

use axum::http::StatusCode;
use kuota::policy::PolicyHandle;
use kuota::webhook::{WebhookConfig, WebhookState};
use serde_json::{Value, json};
use std::sync::Arc;
use webhook_common::*;

const MUTATE_JOB: &str = "/mutate-batch-v1-job";
const VALIDATE_JOB: &str = "/validate-batch-v1-job";

/// Mutates, applies the patch, and checks that a second pass changes nothing.
async fn mutate_twice(
    state: &Arc<WebhookState>,
    path: &str,
    kind: (&str, &str, &str),
    obj: &Value,
) -> (Value, Value) {
    let resp = post(state, path, &review(kind, "CREATE", Some(obj), None)).await;
    assert_eq!(resp["allowed"], true, "{resp}");
    let mutated = apply(obj, &resp);
    let again = post(state, path, &review(kind, "CREATE", Some(&mutated), None)).await;
    assert!(
        patch_of(&again).0.is_empty(),
        "second pass must be a no-op (reinvocationPolicy IfNeeded): {again}"
    );
    (resp, mutated)
}

#[tokio::test]
async fn job_with_queue_is_suspended_and_gets_the_default_priority_class() {
    let state = synced_state();
    let (resp, mutated) = mutate_twice(&state, MUTATE_JOB, JOB, &job()).await;
    assert_eq!(mutated["spec"]["suspend"], true);
    assert_eq!(
        mutated["metadata"]["labels"]["kueue.x-k8s.io/priority-class"],
        "default"
    );
    assert_eq!(
        mutated["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "team-a-queue"
    );
    let ops = serde_json::to_value(patch_of(&resp)).expect("json");
    assert_eq!(
        ops,
        json!([
            {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "default"},
            {"op": "add", "path": "/spec/suspend", "value": true}
        ])
    );
}

#[tokio::test]
async fn job_without_queue_gets_the_namespace_default_queue() {
    let state = synced_state();
    let obj = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "team-a"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let (_, mutated) = mutate_twice(&state, MUTATE_JOB, JOB, &obj).await;
    assert_eq!(
        mutated["metadata"]["labels"],
        json!({"kueue.x-k8s.io/queue-name": "default", "kueue.x-k8s.io/priority-class": "default"})
    );
    assert_eq!(mutated["spec"]["suspend"], true);
}

#[tokio::test]
async fn unmanaged_jobs_are_left_alone() {
    let state = synced_state();
    // No default queue in team-b, no queue name: not Kueue's job.
    let obj = small_job("team-b", json!({}), 1, 0);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert!(patch_of(&resp).0.is_empty(), "{resp}");
    // kube-system is outside the managed namespaces: no defaulting.
    let obj = small_job("kube-system", json!({}), 1, 0);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert!(patch_of(&resp).0.is_empty(), "{resp}");
    // A Job owned by a JobSet is admitted through its owner.
    let mut obj = small_job("team-a", json!({"kueue.x-k8s.io/queue-name": "q"}), 1, 0);
    obj["metadata"]["ownerReferences"] = json!([{"apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet", "name": "js", "uid": "u", "controller": true}]);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert!(patch_of(&resp).0.is_empty(), "{resp}");
    // Updates are not mutated.
    let obj = small_job("team-a", json!({"kueue.x-k8s.io/queue-name": "q"}), 1, 0);
    let resp = post(
        &state,
        MUTATE_JOB,
        &review(JOB, "UPDATE", Some(&obj), Some(&obj)),
    )
    .await;
    assert!(patch_of(&resp).0.is_empty(), "{resp}");
}

#[tokio::test]
async fn manage_jobs_without_queue_name_suspends_everything_in_managed_namespaces() {
    let config = WebhookConfig {
        manage_jobs_without_queue_name: true,
        workload_priority_class_defaulting: false,
        ..WebhookConfig::default()
    };
    let state = state_with(config, PolicyHandle::empty());
    let obj = small_job("team-b", json!({}), 1, 0);
    let (_, mutated) = mutate_twice(&state, MUTATE_JOB, JOB, &obj).await;
    assert_eq!(mutated["spec"]["suspend"], true);
    let obj = small_job("kube-system", json!({}), 1, 0);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert!(patch_of(&resp).0.is_empty(), "kube-system is not managed");
}

#[tokio::test]
async fn cold_index_still_suspends_named_jobs_and_warns() {
    let state = Arc::new(WebhookState::for_tests());
    let obj = small_job("team-a", json!({"kueue.x-k8s.io/queue-name": "q"}), 1, 0);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert_eq!(apply(&obj, &resp)["spec"]["suspend"], true);
    let warnings = resp["warnings"].to_string();
    assert!(
        warnings.contains("not synced") && warnings.contains("priority-class"),
        "{resp}"
    );
    let obj = small_job("team-a", json!({}), 1, 0);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert!(patch_of(&resp).0.is_empty());
    assert!(
        resp["warnings"]
            .to_string()
            .contains("queue-name label was not defaulted"),
        "{resp}"
    );
}

#[tokio::test]
async fn already_suspended_job_needs_no_patch() {
    let state = synced_state();
    let mut obj = small_job(
        "team-a",
        json!({"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "high"}),
        1,
        0,
    );
    obj["spec"]["suspend"] = json!(true);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&obj), None)).await;
    assert_eq!(resp["allowed"], true);
    assert!(
        resp.get("patch").is_none() && resp.get("patchType").is_none(),
        "{resp}"
    );
}

#[tokio::test]
async fn other_job_kinds_suspend_their_own_way() {
    let state = synced_state();
    let labels = json!({"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "p"});
    let cases = [
        (
            "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
            ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": "js", "namespace": "team-a", "labels": labels},
                "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"containers": []}}}}}]}}),
            "/spec/suspend",
        ),
        (
            "/mutate-kubeflow-org-v1-pytorchjob",
            ("kubeflow.org", "v1", "PyTorchJob"),
            json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "pt", "namespace": "team-a", "labels": labels},
                "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {}}}}}),
            "/spec/runPolicy/suspend",
        ),
        (
            "/mutate-kubeflow-org-v2beta1-mpijob",
            ("kubeflow.org", "v2beta1", "MPIJob"),
            json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                "metadata": {"name": "mpi", "namespace": "team-a", "labels": labels},
                "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": {}},
                    "Worker": {"replicas": 2, "template": {}}}}}),
            "/spec/runPolicy/suspend",
        ),
        (
            "/mutate-ray-io-v1-rayjob",
            ("ray.io", "v1", "RayJob"),
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": "rj", "namespace": "team-a", "labels": labels},
                "spec": {"shutdownAfterJobFinishes": true, "rayClusterSpec": {"headGroupSpec": {"template": {}}}}}),
            "/spec/suspend",
        ),
        (
            "/mutate-ray-io-v1-raycluster",
            ("ray.io", "v1", "RayCluster"),
            json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": "rc", "namespace": "team-a", "labels": labels},
                "spec": {"headGroupSpec": {"template": {}}}}),
            "/spec/suspend",
        ),
    ];
    for (path, kind, obj, pointer) in cases {
        let (_, mutated) = mutate_twice(&state, path, kind, &obj).await;
        assert_eq!(
            mutated.pointer(pointer),
            Some(&json!(true)),
            "{path}: {mutated}"
        );
        let validate = path.replacen("/mutate-", "/validate-", 1);
        let resp = post(
            &state,
            &validate,
            &review(kind, "CREATE", Some(&mutated), None),
        )
        .await;
        assert_eq!(resp["allowed"], true, "{validate}: {resp}");
    }
}

/// An MPIJob whose launcher runs as a worker: the webhook suspends it and, topology-aware
/// scheduling being on, gives its workers' template Kueue's pod index offset (their
/// replica indexes start after the launcher's), once.
#[tokio::test]
async fn an_mpijob_launcher_running_as_worker_offsets_its_workers() {
    let state = synced_state();
    let obj = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "mpi", "namespace": "team-a",
            "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "p"}},
        "spec": {"runLauncherAsWorker": true, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": []}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": []}}}}}});
    let (_, mutated) = mutate_twice(
        &state,
        "/mutate-kubeflow-org-v2beta1-mpijob",
        ("kubeflow.org", "v2beta1", "MPIJob"),
        &obj,
    )
    .await;
    assert_eq!(mutated["spec"]["runPolicy"]["suspend"], true, "{mutated}");
    assert_eq!(
        mutated["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"],
        json!({"kueue.x-k8s.io/pod-index-offset": "1"}),
        "{mutated}"
    );
    assert!(
        mutated["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
            .get("metadata")
            .is_none(),
        "{mutated}"
    );
}

/// A configuration that leaves `pod` out: a queue-labelled Pod is then left exactly as it
/// was (no gate, no finalizer), as Kueue's no-op webhook for a disabled framework does.
#[tokio::test]
async fn a_kind_whose_framework_is_not_enabled_is_never_mutated_or_validated() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "q",
            "kueue.x-k8s.io/pod-group-name": "g"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let no_pods = WebhookConfig {
        frameworks: vec!["batch/job".into()],
        ..WebhookConfig::default()
    };
    let state = state_with(no_pods, PolicyHandle::empty());
    let resp = post(
        &state,
        "/mutate--v1-pod",
        &review(POD, "CREATE", Some(&pod), None),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(patch_of(&resp).0.is_empty(), "{resp}");
    let resp = post(
        &state,
        "/validate--v1-pod",
        &review(POD, "CREATE", Some(&pod), None),
    )
    .await;
    assert_eq!(
        resp["allowed"], true,
        "an incomplete group is not judged: {resp}"
    );
    // The same for a job kind left out of the configuration.
    let only_jobsets = WebhookConfig {
        frameworks: vec!["jobset.x-k8s.io/jobset".into()],
        ..WebhookConfig::default()
    };
    let state = state_with(only_jobsets, PolicyHandle::empty());
    let job = small_job("team-a", json!({"kueue.x-k8s.io/queue-name": "q"}), 1, 0);
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&job), None)).await;
    assert!(
        patch_of(&resp).0.is_empty(),
        "batch/job is not enabled: {resp}"
    );
}

#[tokio::test]
async fn pods_are_gated_labelled_and_finalized() {
    // The pod webhook's rules, `pod` enabled.
    let with_pods = WebhookConfig {
        frameworks: vec!["pod".into()],
        ..WebhookConfig::default()
    };
    let state = state_with(with_pods, PolicyHandle::empty());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"schedulingGates": [{"name": "other"}], "containers": [{"name": "c", "image": "i"}]}});
    let (_, mutated) = mutate_twice(&state, "/mutate--v1-pod", POD, &pod).await;
    assert_eq!(
        mutated["metadata"]["labels"]["kueue.x-k8s.io/managed"],
        "true"
    );
    assert_eq!(
        mutated["metadata"]["finalizers"],
        json!(["kueue.x-k8s.io/managed"])
    );
    assert_eq!(
        mutated["spec"]["schedulingGates"],
        json!([{"name": "other"}, {"name": "kueue.x-k8s.io/admission"}])
    );
    // Pods in unmanaged namespaces are never touched, even with a queue name.
    let mut sys = pod.clone();
    sys["metadata"]["namespace"] = json!("kube-system");
    let resp = post(
        &state,
        "/mutate--v1-pod",
        &review(POD, "CREATE", Some(&sys), None),
    )
    .await;
    assert!(patch_of(&resp).0.is_empty());
    // Pod group metadata must be complete.
    let mut grouped = mutated.clone();
    grouped["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = json!("g");
    let resp = post(
        &state,
        "/validate--v1-pod",
        &review(POD, "CREATE", Some(&grouped), None),
    )
    .await;
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 422);
    assert!(
        message(&resp).contains("pod-group-total-count]: Required value"),
        "{resp}"
    );
}

#[tokio::test]
async fn invalid_jobs_are_denied_with_kueue_paths() {
    let state = synced_state();
    let deny = |labels: Value, annotations: Value| {
        let mut j = small_job("team-a", labels, 4, 0);
        j["metadata"]["annotations"] = annotations;
        j
    };
    let cases = [
        (
            deny(json!({"kueue.x-k8s.io/queue-name": "Bad_Queue"}), json!({})),
            "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"Bad_Queue\": a lowercase RFC 1123 subdomain",
        ),
        (
            deny(
                json!({"kueue.x-k8s.io/max-exec-time-seconds": "-5"}),
                json!({}),
            ),
            "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: -5: should be greater than 0",
        ),
        (
            deny(
                json!({}),
                json!({"kueue.x-k8s.io/job-min-parallelism": "4"}),
            ),
            "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: 4: should be between 0 and 3",
        ),
        (
            deny(
                json!({}),
                json!({"kueue.x-k8s.io/job-min-parallelism": "x"}),
            ),
            "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: \"x\": invalid digit",
        ),
    ];
    for (obj, want) in cases {
        let resp = post(
            &state,
            VALIDATE_JOB,
            &review(JOB, "CREATE", Some(&obj), None),
        )
        .await;
        assert_eq!(resp["allowed"], false, "{resp}");
        assert_eq!(resp["status"]["code"], 422);
        assert_eq!(resp["status"]["reason"], "Invalid");
        assert!(
            message(&resp).starts_with(want),
            "{}\nwanted: {want}",
            message(&resp)
        );
    }
    // Topology annotations on the template.
    let mut obj = small_job("team-a", json!({}), 4, 0);
    obj["spec"]["template"]["metadata"] = json!({"annotations": {
        "kueue.x-k8s.io/podset-required-topology": "rack",
        "kueue.x-k8s.io/podset-unconstrained-topology": "true",
        "kueue.x-k8s.io/podset-slice-required-topology": "rack",
        "kueue.x-k8s.io/podset-slice-size": "8"}});
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "CREATE", Some(&obj), None),
    )
    .await;
    let m = message(&resp);
    assert!(
        m.starts_with('[') && m.contains("must not contain more than one topology annotation"),
        "{m}"
    );
    assert!(m.contains("spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: \"8\": must not be greater than pod set count 4"), "{m}");
    // The realistic fixture is valid.
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "CREATE", Some(&job()), None),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
}

#[tokio::test]
async fn elastic_jobs_are_admitted_with_a_warning_that_kuota_does_not_scale_them() {
    let state = synced_state();
    let mut obj = small_job(
        "team-a",
        json!({"kueue.x-k8s.io/queue-name": "team-a-queue"}),
        4,
        0,
    );
    obj["metadata"]["annotations"] = json!({"kueue.x-k8s.io/elastic-job": "true"});
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "CREATE", Some(&obj), None),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    let warnings: Vec<&str> = resp["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        warnings,
        vec![
            "Job team-a/train: metadata.annotations[kueue.x-k8s.io/elastic-job]: \"true\" asks for Kueue's elastic jobs (workload slices), which kuota does not support: the job is admitted at its size when created, and scaling it does not resize its admission"
        ],
        "{resp}"
    );
    // Kueue turns elastic jobs on only for "true"; other values say nothing.
    obj["metadata"]["annotations"] = json!({"kueue.x-k8s.io/elastic-job": "false"});
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "CREATE", Some(&obj), None),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(
        !resp["warnings"].to_string().contains("elastic-job"),
        "{resp}"
    );
}

#[tokio::test]
async fn running_jobs_keep_their_queue_and_priority_class() {
    let state = synced_state();
    let running = |labels: Value| {
        let mut j = small_job("team-a", labels, 1, 0);
        j["spec"]["suspend"] = json!(false);
        j
    };
    let old = running(json!({"kueue.x-k8s.io/queue-name": "a"}));
    let new = running(json!({"kueue.x-k8s.io/queue-name": "b"}));
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "UPDATE", Some(&new), Some(&old)),
    )
    .await;
    assert_eq!(
        message(&resp),
        "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"b\": field is immutable"
    );
    // While suspended the queue may change.
    let mut new_s = new.clone();
    new_s["spec"]["suspend"] = json!(true);
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "UPDATE", Some(&new_s), Some(&old)),
    )
    .await;
    assert_eq!(resp["allowed"], true, "{resp}");
    // A priority class cannot be added to a running job, nor removed.
    let added =
        running(json!({"kueue.x-k8s.io/queue-name": "a", "kueue.x-k8s.io/priority-class": "high"}));
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "UPDATE", Some(&added), Some(&old)),
    )
    .await;
    assert!(
        message(&resp)
            .ends_with("WorkloadPriorityClass cannot be added to a non-suspended workload"),
        "{resp}"
    );
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "UPDATE", Some(&old), Some(&added)),
    )
    .await;
    assert!(
        message(&resp).ends_with("WorkloadPriorityClass cannot be removed from a workload"),
        "{resp}"
    );
    // In a namespace with a default queue, the queue name cannot be dropped.
    let mut dropped = old.clone();
    dropped["metadata"]["labels"] = json!({});
    dropped["spec"]["suspend"] = json!(true);
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "UPDATE", Some(&dropped), Some(&old)),
    )
    .await;
    assert!(
        message(&resp).contains("queue-name must not be empty in namespace with default queue"),
        "{resp}"
    );
}

#[tokio::test]
async fn malformed_bodies_get_400_with_a_json_error() {
    let state = synced_state();
    let cases: [(&[u8], &str); 5] = [
        (b"not json", "expected ident"),
        (b"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}", "kind: expected \"AdmissionReview\""),
        (b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", "request: missing"),
        (b"{\"apiVersion\":\"admission.k8s.io/v2\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":{},\"operation\":\"CREATE\"}}", "apiVersion: expected"),
        (b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}", "request.uid: invalid type: integer `7`"),
    ];
    for (body, want) in cases {
        let (status, v) = post_raw(&state, VALIDATE_JOB, body.to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(v["code"], 400);
        assert!(
            v["message"].as_str().unwrap_or_default().contains(want),
            "{v}\nwanted: {want}"
        );
    }
    assert_eq!(state.metrics.snapshot().bad_requests, 5);
}

#[tokio::test]
async fn undecodable_objects_are_denied_with_the_field_path() {
    let state = synced_state();
    let mut obj = small_job("team-a", json!({}), 1, 0);
    obj["spec"]["parallelism"] = json!("lots");
    let resp = post(
        &state,
        VALIDATE_JOB,
        &review(JOB, "CREATE", Some(&obj), None),
    )
    .await;
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["code"], 400);
    assert!(
        message(&resp).starts_with(
            "request.object.spec.parallelism: invalid type: string \"lots\", expected i32"
        ),
        "{resp}"
    );
    // A Pod sent to the Job endpoint.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}});
    let resp = post(&state, MUTATE_JOB, &review(JOB, "CREATE", Some(&pod), None)).await;
    assert!(
        message(&resp).contains("this endpoint serves batch/v1 Job, got v1 Pod"),
        "{resp}"
    );
}

#[tokio::test]
async fn dry_run_gets_the_same_answer_and_only_counts() {
    let state = synced_state();
    let mut r = review(JOB, "CREATE", Some(&job()), None);
    let wet = post(&state, MUTATE_JOB, &r).await;
    r["request"]["dryRun"] = json!(true);
    let dry = post(&state, MUTATE_JOB, &r).await;
    assert_eq!(wet, dry);
    let m = state.metrics.snapshot();
    assert_eq!((m.patched, m.dry_run), (2, 1));
}

#[tokio::test]
async fn v1beta1_reviews_are_answered_in_v1beta1_and_unknown_paths_404() {
    let state = synced_state();
    let mut r = review(JOB, "CREATE", Some(&job()), None);
    r["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let resp = post(&state, MUTATE_JOB, &r).await;
    assert_eq!(resp["allowed"], true);
    let (status, _) = post_raw(&state, "/mutate-batch-v2-job", b"{}".to_vec()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_job_whose_queue_dispatches_through_multikueue_is_managed_by_multikueue() {
    use kuota::api::{AdmissionCheck, ClusterQueue};
    use kuota::webhook::index::IndexEvent;
    let state = synced_state();
    let apply = |e| state.index.apply(e);
    let cq: ClusterQueue = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "mk"}]}}
    }))
    .expect("a ClusterQueue");
    apply(IndexEvent::ClusterQueueApplied(Box::new(cq)));
    let obj = job();
    // The check exists but is not MultiKueue's yet: nothing set.
    let other: AdmissionCheck = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "mk"}, "spec": {"controllerName": "example.com/other"}
    }))
    .expect("a check");
    apply(IndexEvent::AdmissionCheckApplied(Box::new(other)));
    let (_, mutated) = mutate_twice(&state, MUTATE_JOB, JOB, &obj).await;
    assert!(mutated["spec"].get("managedBy").is_none(), "{mutated}");
    let mk: AdmissionCheck = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "mk"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}
    }))
    .expect("a check");
    apply(IndexEvent::AdmissionCheckApplied(Box::new(mk)));
    let (_, mutated) = mutate_twice(&state, MUTATE_JOB, JOB, &obj).await;
    assert_eq!(mutated["spec"]["managedBy"], "kueue.x-k8s.io/multikueue");
    // A job that names another controller keeps it.
    let mut other_controller = obj.clone();
    other_controller["spec"]["managedBy"] = json!("example.com/mine");
    let (_, mutated) = mutate_twice(&state, MUTATE_JOB, JOB, &other_controller).await;
    assert_eq!(mutated["spec"]["managedBy"], "example.com/mine");
    // The check gone: nothing set.
    apply(IndexEvent::AdmissionCheckDeleted { name: "mk".into() });
    let (_, mutated) = mutate_twice(&state, MUTATE_JOB, JOB, &obj).await;
    assert!(mutated["spec"].get("managedBy").is_none(), "{mutated}");
}
