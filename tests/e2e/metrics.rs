//! `kuota serve`'s `/metrics` once the controller schedules: Kueue's workload metrics
//! and kuota's API writes come from the controller, on the registry the health listener
//! serves, labelled `replica_role="leader"`.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use kuota::controller::ControllerConfig;
use kuota::policy::PolicySet;

use crate::controller::{condition, job, start_controller_with, wait_for_workload};
use crate::support::{QueueFixture, controller_lock, http_get};
use crate::webhook::Kuota;

/// The value of the sample whose line starts with `series` (name and labels as encoded).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn serve_reports_the_controllers_admissions_pending_workloads_and_writes() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("ctl-metrics", "1").await;
    let (client, ns, cq) = (fx.client.clone(), fx.ns.clone(), fx.cq.clone());

    let mut kuota = Kuota::start(&client, PolicySet::default()).await;
    let config = ControllerConfig {
        metrics: kuota.metrics.clone(),
        leader_elected: true,
        ..ControllerConfig::default()
    };
    let (stop, controller) = start_controller_with(&client, config);

    // Created suspended with the queue name (no webhook registration needed): one fits
    // the 1 cpu of quota, the other waits.
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    for name in ["first", "second"] {
        let mut j = job(&ns, name, "600m");
        j.spec.get_or_insert_with(Default::default).suspend = Some(true);
        jobs.create(&PostParams::default(), &j)
            .await
            .unwrap_or_else(|e| panic!("create Job {name}: {e}"));
        if name == "first" {
            wait_for_workload(&client, &ns, name, "admitted", |wl| {
                condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
            })
            .await;
        }
    }
    wait_for_workload(&client, &ns, "second", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;

    let leader = r#"replica_role="leader""#;
    let want = [
        (
            format!(
                r#"kueue_admitted_workloads_total{{cluster_queue="{cq}",priority_class="",{leader}}}"#
            ),
            1.0,
        ),
        (
            format!(
                r#"kueue_pending_workloads{{cluster_queue="{cq}",status="inadmissible",{leader}}}"#
            ),
            1.0,
        ),
    ];
    // Writes by kind: at least the admitted Workload's status and Events, the started
    // Job, and the ClusterQueue's status (the counter is process-wide, so at least).
    let writes: Vec<String> = ["Workload", "Job", "ClusterQueue", "Event"]
        .iter()
        .map(|kind| format!(r#"kuota_api_writes_total{{kind="{kind}",{leader}}}"#))
        .collect();
    // Gauges are republished at most every 250 ms and queue status once a second: poll.
    let mut last = String::new();
    let mut ok = false;
    for _ in 0..100 {
        let (status, body) = http_get(kuota.health_addr, "/metrics").await;
        assert_eq!(status, 200, "{body}");
        ok = want.iter().all(|(s, v)| sample(&body, s) == Some(*v))
            && writes
                .iter()
                .all(|s| sample(&body, s).is_some_and(|n| n >= 1.0));
        last = body;
        if ok {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ok,
        "expected {want:?} and {writes:?} >= 1 in /metrics:\n{last}"
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), controller).await;
    let after = kuota.metrics.encode();
    assert!(
        after.contains(r#"replica_role="follower""#) && !after.contains("kueue_pending_workloads{"),
        "after the controller stops the replica is a follower without state gauges:\n{after}"
    );
    kuota.stop().await;
    fx.teardown().await;
}
