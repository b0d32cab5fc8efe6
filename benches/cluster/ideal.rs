//! The ceiling kuota is measured against: the same Jobs admitted by the simplest
//! controller there is. The harness unsuspends each Job the moment its watch shows it:
//! one write per Job (no Workload, no quota, no Events, no status), with the same
//! kube-controller-manager and stand-in kubelet running the Jobs on the same machine. No
//! admission controller can admit faster here, so kuota's rate is reported as a ratio to
//! this one, measured in the same run.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::setup::{self, BENCH_LABEL};
use crate::{BoxError, Observer, Timeline, create_jobs};

/// What the ideal controller achieved.
pub struct Ideal {
    /// Seconds to create the Jobs (the arrival rate under this phase's load).
    pub create_s: f64,
    pub timeline: Timeline,
}

/// Creates `jobs` Jobs of the baseline mix in namespace `{run}-ideal` (no queue label),
/// unsuspends each as soon as it is seen, and waits (up to `timeout`) until all finish.
/// The namespace is left for the run's cleanup: deleting 3,000 Jobs and their pods
/// would load the API server during kuota's phase.
pub async fn run(
    client: &Client,
    run: &str,
    jobs: usize,
    concurrency: usize,
    timeout: Duration,
) -> Result<Ideal, BoxError> {
    let ns = ideal_namespace(run);
    let ns_obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns_obj)
        .await?;
    let selector = format!("{BENCH_LABEL}={run},!kueue.x-k8s.io/queue-name");
    let observer = Observer::spawn(client, selector.clone());
    let controller = tokio::spawn(unsuspend_on_sight(
        Api::namespaced(client.clone(), &ns),
        selector,
    ));
    let plan: Vec<_> = setup::plan(jobs)
        .into_iter()
        .enumerate()
        .map(|(i, (_, class))| {
            let job = setup::job(run, &format!("ideal-{}-{i}", class.name), class, false);
            (ns.clone(), job)
        })
        .collect();
    let start = Instant::now();
    let created = create_jobs(client, plan, concurrency).await?;
    let create_s = start.elapsed().as_secs_f64();
    eprintln!(
        "ideal controller: created {} Jobs in {create_s:.1} s",
        created.len()
    );
    observer.wait_finished(jobs, timeout).await;
    controller.abort();
    Ok(Ideal {
        create_s,
        timeline: observer.stop(start, &created),
    })
}

/// The ideal phase's namespace.
pub fn ideal_namespace(run: &str) -> String {
    format!("{run}-ideal")
}

/// Patches `suspend: false` onto every suspended Job the watch shows, once each.
async fn unsuspend_on_sight(jobs: Api<Job>, selector: String) {
    let mut patched = HashSet::new();
    let cfg = watcher::Config::default().labels(&selector);
    let mut stream = watcher(jobs.clone(), cfg)
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = stream.next().await {
        let Ok(job) = event else { continue };
        let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
        let name = job.metadata.name.unwrap_or_default();
        if !suspended || !patched.insert(name.clone()) {
            continue;
        }
        let jobs = jobs.clone();
        tokio::spawn(async move {
            let patch = json!({"spec": {"suspend": false}});
            let _ = jobs
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        });
    }
}
