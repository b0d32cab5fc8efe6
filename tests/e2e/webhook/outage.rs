//! What a kuota outage blocks, measured against the API server with kuota's manifests:
//! Jobs kuota acts on are refused (failurePolicy: Fail), everything else is created.

use kuota::api::constants::QUEUE_NAME_LABEL;
use kuota::policy::PolicySet;

use super::{
    Kuota, MANAGED_LABEL, Registration, create_job_until, create_namespace, delete_namespaces,
    denial, job,
};
use crate::support::{client, unique_name};

#[tokio::test]
async fn with_kuota_down_only_jobs_it_acts_on_are_refused() {
    let client = client().await;
    let managed = unique_name("wh-managed");
    let unmanaged = unique_name("wh-unmanaged");
    create_namespace(&client, &managed, &[(MANAGED_LABEL, "true")]).await;
    create_namespace(&client, &unmanaged, &[]).await;
    let mut kuota = Kuota::start(&client, PolicySet::default()).await;
    let reg = Registration::create(
        &client,
        kuota.addr,
        &kuota.ca_pem,
        &[&managed, &unmanaged],
        &managed,
    )
    .await;
    // While kuota serves, a labelled Job in an unmanaged namespace is admitted (suspended).
    let labelled = job(&unmanaged, "labelled-up", &[(QUEUE_NAME_LABEL, "lq")], 0);
    let outcome = create_job_until(&client, &labelled, Result::is_ok).await;
    assert!(outcome.is_ok(), "kuota up: {outcome:?}");

    kuota.stop().await;

    // A labelled Job is kuota's business: refused while kuota is down (retried until the
    // closed port is seen, which is immediate).
    let labelled = job(&unmanaged, "labelled-down", &[(QUEUE_NAME_LABEL, "lq")], 0);
    let msg = denial(&create_job_until(&client, &labelled, Result::is_err).await);
    assert!(msg.contains("failed calling webhook"), "{msg}");
    // So is an unlabelled one in a namespace kuota manages (default LocalQueue, policy).
    let in_managed = job(&managed, "unlabelled-managed", &[], 0);
    let msg = denial(&create_job_until(&client, &in_managed, Result::is_err).await);
    assert!(msg.contains("failed calling webhook"), "{msg}");
    // An unlabelled Job anywhere else never reaches kuota: created, outage or not.
    let elsewhere = job(&unmanaged, "unlabelled-elsewhere", &[], 0);
    let outcome = create_job_until(&client, &elsewhere, Result::is_ok).await;
    assert!(
        outcome.is_ok(),
        "an unlabelled Job in an unmanaged namespace must not depend on kuota: {outcome:?}"
    );

    reg.delete().await;
    delete_namespaces(&client, &[&managed, &unmanaged]).await;
}
