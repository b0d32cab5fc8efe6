//! `manageJobsWithoutQueueName` as Kueue does it: a job without a queue name is managed
//! (gets a Workload, is held) in the namespaces `managedJobsNamespaceSelector` selects,
//! and never in kube-system, even with a selector that selects every namespace.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, PostParams};
use kuota::controller::ControllerConfig;
use kuota::controller::managed_namespaces::ManagedNamespaces;

use crate::controller::{job, start_controller_with};
use crate::support::{QueueFixture, controller_lock, unique_name, wait_until};

/// A one-pod Job without a queue name, created running.
fn unlabelled(ns: &str, name: &str) -> Job {
    let mut j = job(ns, name, "100m");
    j.metadata.labels = None;
    j
}

#[tokio::test]
async fn unlabelled_jobs_are_held_in_managed_namespaces_and_never_in_kube_system() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("unlabelled", "1").await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    let (stop, task) = start_controller_with(
        &client,
        ControllerConfig {
            manage_jobs_without_queue_name: true,
            // A selector that selects everything: kube-system stays out all the same.
            managed_namespaces: ManagedNamespaces {
                selector: LabelSelector::default(),
                ..ManagedNamespaces::excluding("kuota-system")
            },
            ..ControllerConfig::default()
        },
    );
    let system = unique_name("sys");
    let in_system = Api::<Job>::namespaced(client.clone(), "kube-system");
    in_system
        .create(&PostParams::default(), &unlabelled("kube-system", &system))
        .await
        .expect("create a Job in kube-system");
    let team = Api::<Job>::namespaced(client.clone(), &ns);
    team.create(&PostParams::default(), &unlabelled(&ns, "plain"))
        .await
        .expect("create a Job in the test's namespace");

    // The team's unlabelled Job is managed: held (it names no queue, so it is never
    // admitted).
    let held = wait_until(Duration::from_secs(60), || {
        let team = team.clone();
        async move { team.get("plain").await.ok().and_then(|j| j.spec?.suspend) == Some(true) }
    })
    .await;
    assert!(
        held.is_some(),
        "the unlabelled Job in a managed namespace was not held"
    );
    // By then the kube-system Job has been seen too: it runs, untouched.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sys = in_system.get(&system).await.expect("the kube-system Job");
    assert_ne!(
        sys.spec.and_then(|s| s.suspend),
        Some(true),
        "a kube-system Job was suspended"
    );
    let workloads = Api::<kuota::api::Workload>::namespaced(client.clone(), "kube-system")
        .list(&Default::default())
        .await
        .expect("list kube-system Workloads");
    assert!(
        workloads.items.iter().all(|w| !w
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.name == system)),
        "a kube-system Job got a Workload"
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    let _ = in_system.delete(&system, &DeleteParams::background()).await;
    fx.teardown().await;
}
