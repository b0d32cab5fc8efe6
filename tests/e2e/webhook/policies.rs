//! A namespace policy holds every Job in the namespaces it selects, labelled for a queue
//! or not: leaving out the queue-name label is no way around it, and neither is leaving
//! the namespace without the `kuota.dev/managed=true` label.

use kuota::api::constants::QUEUE_NAME_LABEL;
use kuota::policy::PolicySet;

use super::{
    Kuota, MANAGED_LABEL, Registration, create_job_until, create_namespace, delete_namespaces,
    denial, job,
};
use crate::support::{client, unique_name};

#[tokio::test]
async fn a_policy_holds_jobs_without_a_queue_name() {
    policy_holds_every_job(true).await;
}

/// Through the shipped `*-policy.kuota.dev` entries, which fail open (the outage side is
/// in outage.rs): the policy holds as well where the namespace is not labelled.
#[tokio::test]
async fn a_policy_holds_jobs_in_a_namespace_not_labelled_managed() {
    policy_holds_every_job(false).await;
}

async fn policy_holds_every_job(managed: bool) {
    let client = client().await;
    let ns = unique_name("wh-policy");
    let policy = format!(
        "apiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {{name: gpu-cap}}\n\
         spec:\n  namespaceSelector: {{matchLabels: {{kuota.dev/e2e-policy: {ns}}}}}\n  maxGPUsPerJob: 1\n"
    );
    let set = PolicySet::from_files([("gpu-cap.yaml", policy.as_str())]).expect("valid policy");
    let mut labels = vec![("kuota.dev/e2e-policy", ns.as_str())];
    if managed {
        labels.push((MANAGED_LABEL, "true"));
    }
    create_namespace(&client, &ns, &labels).await;
    let mut kuota = Kuota::start(&client, set).await;
    kuota
        .wait_for_namespace_label(&ns, "kuota.dev/e2e-policy")
        .await;
    let reg = Registration::create(&client, kuota.addr, &kuota.ca_pem, &[&ns], &ns).await;

    // No queue-name label, two GPUs: the policy refuses it.
    let over = job(&ns, "no-queue-2gpu", &[], 2);
    let outcome = create_job_until(&client, &over, Result::is_err).await;
    let msg = denial(&outcome);
    assert!(
        msg.contains("gpu-cap") && msg.contains("maxGPUsPerJob"),
        "denial names the policy and the rule: {msg}"
    );
    // The same with a queue-name label, for comparison.
    let labelled = job(&ns, "queue-2gpu", &[(QUEUE_NAME_LABEL, "lq")], 2);
    let msg = denial(&create_job_until(&client, &labelled, Result::is_err).await);
    assert!(msg.contains("maxGPUsPerJob"), "{msg}");
    // Within the policy, a Job without a queue name is created.
    let within = job(&ns, "no-queue-1gpu", &[], 1);
    let outcome = create_job_until(&client, &within, Result::is_ok).await;
    assert!(outcome.is_ok(), "a job within the policy: {outcome:?}");

    reg.delete().await;
    kuota.stop().await;
    delete_namespaces(&client, &[&ns]).await;
}
