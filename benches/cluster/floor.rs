//! The write floor: kuota's own per-Job writes, made by a controller that decides
//! nothing. For each queued Job (or JobSet: `--kind`) it sees, the harness makes the writes kuota makes for an
//! admission, built by kuota's own functions: the Workload create
//! (`JobIntegration::workload`), the admitting status patch (`admit_patch`), the
//! QuotaReserved and Admitted Events (kuota's `Recorder`) and the unsuspending Job patch
//! (`start_patch`); when the Job completes, the finishing status patch (`plan` and
//! `finish_patch`). There is no engine, no queueing, no quota and no queue status, and
//! every Job's writes start the moment the Job is seen.
//!
//! An admission controller that keeps Kueue's API (a Workload per job, admitted through
//! its status, with Kueue's Events) cannot admit faster than this on the same machine:
//! the gap between this phase and the ideal controller is what those writes cost the
//! API server, and the gap between this phase and kuota is what kuota's own scheduling
//! costs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::store::Writer as StoreWriter;
use kuota::api::quantity::{format_milli_string, parse_milli_str};
use kuota::api::{Admission, Workload};
use kuota::controller::actuate::events::{Recorder, workload_ref};
use kuota::controller::actuate::job::start_patch;
use kuota::controller::actuate::workload::{FIELD_MANAGER, admit_patch, finish_patch};
use kuota::controller::watch::Kind;
use kuota::controller::workload_sync::{Step, job_state, plan};
use kuota::engine::WorkloadKey;
use kuota::integrations::JobIntegration;
use serde_json::{Value, json};

use crate::mix::Mix;
use crate::setup::{self, BENCH_LABEL};
use crate::{BoxError, PhaseOptions, Reference, applied, reference_phase};

/// Label that keeps this phase's Jobs out of kuota's phase's observer.
pub const PHASE_LABEL: &str = "bench.kuota.dev/phase";

/// What the write-floor controller achieved.
pub struct Floor {
    pub reference: Reference,
    /// Writes that failed (each one is a Job this phase could not admit or finish).
    pub failed: usize,
}

/// Creates `jobs` queued objects of the baseline mix in namespace `{run}-floor`, makes
/// kuota's writes for each as soon as it is seen, and waits (up to the phase's timeout)
/// until all finish. The namespace is left for the run's cleanup, like the ideal
/// phase's.
pub async fn run(
    client: &Client,
    run: &str,
    jobs: usize,
    opts: &PhaseOptions,
) -> Result<Floor, BoxError> {
    let ns = floor_namespace(run);
    setup::create_namespace(client, &ns).await?;
    let selector = format!("{BENCH_LABEL}={run},{PHASE_LABEL}=floor");
    let failed = Arc::new(Mutex::new(0));
    let controller = tokio::spawn(write_on_sight(
        opts.mix,
        client.clone(),
        ns.clone(),
        run.to_string(),
        selector.clone(),
        failed.clone(),
    ));
    let plan: Vec<_> = setup::plan(jobs)
        .into_iter()
        .enumerate()
        .map(|(i, (_, class))| {
            let name = format!("floor-{}-{i}", class.name);
            let mut job = opts.mix.object(run, &name, class, true);
            job.metadata
                .labels
                .get_or_insert_default()
                .insert(PHASE_LABEL.into(), "floor".into());
            (ns.clone(), job)
        })
        .collect();
    let phase = reference_phase(client, "write floor", selector, plan, opts).await;
    controller.abort();
    let reference = phase?;
    let failed = *failed.lock().expect("lock");
    Ok(Floor { reference, failed })
}

/// The write-floor phase's namespace.
pub fn floor_namespace(run: &str) -> String {
    format!("{run}-floor")
}

/// What every write of the phase needs.
struct Ctx {
    client: Client,
    mix: Mix,
    ns: String,
    run: String,
    integration: &'static dyn JobIntegration,
    recorder: Recorder,
    /// The bench's flavor has no node labels or tolerations: an empty store gives
    /// `start_patch` the same result as kuota's watched one.
    flavors: kube::runtime::reflector::Store<DynamicObject>,
    /// Each Job's Workload as its last write returned it, for the finishing patch.
    workloads: Mutex<HashMap<String, Workload>>,
    failed: Arc<Mutex<usize>>,
}

/// Watches the phase's objects: admits each suspended one once, finishes each completed
/// one once.
async fn write_on_sight(
    mix: Mix,
    client: Client,
    ns: String,
    run: String,
    selector: String,
    failed: Arc<Mutex<usize>>,
) {
    let jobs = mix.api(&client, &ns);
    let integration = mix.integration();
    let ctx = Arc::new(Ctx {
        mix,
        recorder: Recorder::new(client.clone(), kuota::telemetry::Metrics::new()),
        flavors: StoreWriter::new(Kind::ResourceFlavor.api_resource()).as_reader(),
        client,
        ns,
        run,
        integration,
        workloads: Mutex::default(),
        failed,
    });
    let (mut admitted, mut finished) = (HashSet::new(), HashSet::new());
    let mut stream = applied(jobs, &selector);
    while let Some(job) = stream.next().await {
        let name = job.metadata.name.clone().unwrap_or_default();
        let Ok(value) = mix.value(&job) else {
            continue;
        };
        let suspended = !mix.state_of(&value).0;
        if suspended && admitted.insert(name.clone()) {
            let ctx = ctx.clone();
            tokio::spawn(async move {
                if let Err(e) = admit(&ctx, &name, &value).await {
                    eprintln!("write floor: admitting {name}: {e}");
                    *ctx.failed.lock().expect("lock") += 1;
                }
            });
        } else if !suspended && !finished.contains(&name) {
            let Some(wl) = ctx.workloads.lock().expect("lock").get(&name).cloned() else {
                continue;
            };
            let Ok(view) = kuota::integrations::JobObject::from_value(&value) else {
                continue;
            };
            let state = job_state(ctx.integration, &view);
            let Step::Finish { reason, message } = plan(&state, Some(&wl)) else {
                continue;
            };
            finished.insert(name.clone());
            let ctx = ctx.clone();
            tokio::spawn(async move {
                if let Err(e) = finish(&ctx, &wl, reason, &message).await {
                    eprintln!("write floor: finishing {name}: {e}");
                    *ctx.failed.lock().expect("lock") += 1;
                }
            });
        }
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn workloads(ctx: &Ctx) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), &ctx.ns, &Kind::Workload.api_resource())
}

/// kuota's admission writes for one Job: Workload create, admitting status patch, two
/// Events, unsuspending Job patch.
async fn admit(ctx: &Ctx, name: &str, job: &Value) -> Result<(), BoxError> {
    let mut wl = ctx.integration.workload(job)?;
    // kuota copies the PriorityClass's value (read from its watch) into the Workload.
    let class = wl.spec.priority_class_ref.as_ref().map(|c| c.name.clone());
    wl.spec.priority = setup::CLASSES
        .iter()
        .find(|c| class == Some(format!("{}-{}", ctx.run, c.name)))
        .map(|c| c.priority);
    let obj: DynamicObject = serde_json::from_value(serde_json::to_value(&wl)?)?;
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let created: Workload = serde_json::from_value(serde_json::to_value(
        workloads(ctx).create(&pp, &obj).await?,
    )?)?;
    let admission = admission(ctx, &created)?;
    let body =
        admit_patch(&created, &admission, &[], &now()).ok_or("admit_patch: nothing to write")?;
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let wl_name = created.metadata.name.clone().unwrap_or_default();
    let admitted: Workload = serde_json::from_value(serde_json::to_value(
        workloads(ctx)
            .patch_status(&wl_name, &pp, &Patch::Merge(&body))
            .await?,
    )?)?;
    let key = WorkloadKey::new(ctx.ns.as_str(), wl_name.as_str());
    let cq = &admission.cluster_queue;
    // As kuota's writer does: the Event names the Workload it wrote, uid included.
    let regarding = workload_ref(&key, Some(&admitted.metadata));
    ctx.recorder.workload_normal(
        regarding.clone(),
        "QuotaReserved",
        &format!("Quota reserved in ClusterQueue {cq}, wait time since queued was 0s"),
    );
    ctx.recorder.workload_normal(
        regarding,
        "Admitted",
        &format!("Admitted by ClusterQueue {cq}, wait time since reservation was 0s"),
    );
    ctx.workloads
        .lock()
        .expect("lock")
        .insert(name.to_string(), admitted.clone());
    start(ctx, name, job.clone(), &admitted).await
}

/// An admission to the run's first ClusterQueue and its flavor: every pod set's count
/// and cpu.
fn admission(ctx: &Ctx, wl: &Workload) -> Result<Admission, BoxError> {
    let assignments: Vec<Value> = wl
        .spec
        .pod_sets
        .iter()
        .map(|ps| {
            let per_pod = ps
                .template
                .spec
                .as_ref()
                .and_then(|s| s.containers.first()?.resources.as_ref()?.requests.as_ref())
                .and_then(|r| parse_milli_str(&r.get("cpu")?.0).ok())
                .unwrap_or(1000);
            json!({"name": ps.name, "flavors": {"cpu": format!("{}-default", ctx.run)},
                "resourceUsage": {"cpu": format_milli_string(per_pod * i64::from(ps.count))},
                "count": ps.count})
        })
        .collect();
    Ok(serde_json::from_value(json!({
        "clusterQueue": format!("{}-cq-0", ctx.run),
        "podSetAssignments": assignments,
    }))?)
}

/// kuota's unsuspending Job patch. Its test-and-set on the resourceVersion fails when
/// kube-controller-manager wrote the Job's status since the watch showed it; like
/// kuota's reconciler, the patch is then recomputed from the Job as it is now.
async fn start(ctx: &Ctx, name: &str, mut job: Value, wl: &Workload) -> Result<(), BoxError> {
    let jobs = ctx.mix.api(&ctx.client, &ctx.ns);
    for _ in 0..5 {
        let patch = start_patch(ctx.integration, &job, wl, &ctx.flavors)?
            .ok_or("start_patch: nothing to write")?;
        match jobs
            .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 => {
                job = ctx.mix.value(&jobs.get(name).await?)?;
            }
            other => return other.map(|_| ()).map_err(Into::into),
        }
    }
    Err(format!("Job {name}: still conflicting after 5 attempts").into())
}

/// kuota's finishing write: Finished true with the Job's outcome.
async fn finish(ctx: &Ctx, wl: &Workload, reason: &str, message: &str) -> Result<(), BoxError> {
    let body = finish_patch(wl, reason, message, &now()).ok_or("finish_patch: nothing to write")?;
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let name = wl.metadata.name.clone().unwrap_or_default();
    workloads(ctx)
        .patch_status(&name, &pp, &Patch::Merge(&body))
        .await?;
    Ok(())
}
