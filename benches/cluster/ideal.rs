//! The ceiling kuota is measured against: the same Jobs admitted by the simplest
//! controller there is. The harness unsuspends each Job the moment its watch shows it:
//! one write per Job (no Workload, no quota, no Events, no status), with the same
//! kube-controller-manager and stand-in kubelet running the Jobs on the same machine. No
//! admission controller can admit faster here, so kuota's rate is reported as a ratio to
//! this one, measured in the same run.

use std::collections::HashSet;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::mix::Mix;
use crate::setup::{self, BENCH_LABEL};
use crate::{BoxError, PhaseOptions, Reference, applied, reference_phase};

/// Creates `jobs` objects of the baseline mix in namespace `{run}-ideal` (no queue
/// label), unsuspends each as soon as it is seen, and waits (up to the phase's timeout)
/// until all finish. The namespace is left for the run's cleanup: deleting 3,000 Jobs
/// and their pods would load the API server during kuota's phase.
pub async fn run(
    client: &Client,
    run: &str,
    jobs: usize,
    opts: &PhaseOptions,
) -> Result<Reference, BoxError> {
    let ns = ideal_namespace(run);
    setup::create_namespace(client, &ns).await?;
    let selector = format!("{BENCH_LABEL}={run},!kueue.x-k8s.io/queue-name");
    let controller = tokio::spawn(unsuspend_on_sight(
        opts.mix,
        opts.mix.api(client, &ns),
        selector.clone(),
    ));
    let plan: Vec<_> = setup::plan(jobs)
        .into_iter()
        .enumerate()
        .map(|(i, (_, class))| {
            let name = format!("ideal-{}-{i}", class.name);
            (ns.clone(), opts.mix.object(run, &name, class, false))
        })
        .collect();
    let phase = reference_phase(client, "ideal controller", selector, plan, opts).await;
    controller.abort();
    phase
}

/// The ideal phase's namespace.
pub fn ideal_namespace(run: &str) -> String {
    format!("{run}-ideal")
}

/// Patches `suspend: false` onto every suspended object the watch shows, once each.
async fn unsuspend_on_sight(mix: Mix, jobs: Api<DynamicObject>, selector: String) {
    let mut patched = HashSet::new();
    let mut stream = applied(jobs.clone(), &selector);
    while let Some(job) = stream.next().await {
        let suspended = !mix.state(&job).0;
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
