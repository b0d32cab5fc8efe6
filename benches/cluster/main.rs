//! kuota against a real API server, run by hand (not in CI): see docs/performance.md.
//!
//! `benches/cluster/run.sh` starts a control plane with an audit log, builds kuota and this
//! harness in one release build and runs it with `--bench ARGS`. In one run and
//! with one client (impersonating `kuota-bench`, so the audit log tells its writes from
//! kuota's):
//! `--kind` picks the measured kind (mix.rs): batch Jobs, or JobSets whose operator the
//! harness plays (operator.rs); every phase below runs that kind.
//! 1. the raw Job-create rate, no webhook and no kuota (plain suspended Jobs);
//! 2. the ideal controller (`ideal`): the same mix unsuspended on sight, the ceiling;
//! 3. the write floor (`floor`): kuota's own writes for each Job, made on sight by a
//!    controller that decides nothing;
//! 4. kuota (`kuota serve`, a separate process) on Kueue's baseline shape: create→unsuspend
//!    latency and where it waits, admissions/s (also as ratios to the ideal controller and
//!    the write floor),
//!    kuota's writes per admitted Job by kind, CPU and peak RSS;
//! 5. unchanged re-evaluations: blocked Jobs, then ClusterQueue touches that change
//!    nothing; kuota's writes meanwhile should be 0.

mod audit;
mod calibrate;
mod floor;
mod ideal;
mod kubelet;
mod kuota;
mod mix;
mod operator;
mod report;
mod setup;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config};
use serde_json::json;

use crate::mix::Mix;

#[derive(Parser, Debug)]
struct Args {
    /// The kuota binary to measure (build it with --release).
    #[arg(long, default_value = "target/release/kuota")]
    kuota: PathBuf,
    /// The API server's audit log (JSON lines, Metadata level), for kuota's writes.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// The kind measured: batch Jobs, or JobSets (2 replicated Jobs × 4 pods, the
    /// harness playing the JobSet operator). The counts below are of that kind.
    #[arg(long, value_enum, default_value_t = Mix::Job)]
    kind: Mix,
    /// Queue-labelled Jobs in the baseline mix.
    #[arg(long, default_value_t = 3000)]
    jobs: usize,
    /// Plain Jobs created for the raw create-rate baseline.
    #[arg(long, default_value_t = 1000)]
    raw_jobs: usize,
    /// Jobs admitted by the ideal controller (the harness unsuspends each on sight), the
    /// ceiling kuota's rate is compared with; 0 skips that phase.
    #[arg(long, default_value_t = 3000)]
    ideal_jobs: usize,
    /// Jobs admitted by the write floor (the harness makes kuota's own writes for each on
    /// sight, deciding nothing); 0 skips that phase.
    #[arg(long, default_value_t = 3000)]
    floor_jobs: usize,
    /// Creates in flight at once (every phase).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// kuota's clientConnection.qps and burst (Kueue's published baseline ran at QPS 50).
    #[arg(long, default_value_t = 50.0)]
    kuota_qps: f32,
    #[arg(long, default_value_t = 100)]
    kuota_burst: u32,
    /// Give up waiting for admissions after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout_s: u64,
    /// Each ClusterQueue's nominal cpu quota: 20 is Kueue's baseline, where Jobs wait for
    /// quota; a large value (e.g. 100000) admits each Job as soon as kuota gets to it,
    /// so the admission rate measures kuota and the API server rather than the quota.
    #[arg(long, default_value_t = 20)]
    nominal_cpu: u32,
    /// Run nothing: write the calibration and scenario of this earlier run (its name, as
    /// `run NAME:` printed it) from `--audit-log`, kept with KUOTA_BENCH_KEEP_AUDIT=1.
    #[arg(long, value_name = "RUN")]
    calibrate_run: Option<String>,
    /// Where to write the simulator's calibration (`calibration.json`) and this run's
    /// trace and queues (`scenario/`), from the audit log (batch Jobs only).
    #[arg(long)]
    calibration_out: Option<PathBuf>,
    /// A KuotaConfiguration document (YAML) to run kuota with, beside the run's Kueue
    /// Configuration, e.g. one setting `apiWrites.queueStatusInterval`.
    #[arg(long)]
    kuota_config: Option<PathBuf>,
    /// kuota's RUST_LOG (its log is kept in the run's temp directory if the run stalls).
    #[arg(long, default_value = "warn")]
    kuota_log: String,
    /// Cargo passes --bench; without it (cargo test --benches) nothing runs.
    #[arg(long)]
    bench: bool,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if !args.bench {
        eprintln!(
            "cluster bench: run with `cargo bench --bench cluster -- ...` (see docs/performance.md)"
        );
        return;
    }
    if let (Some(log), Some(run)) = (&args.audit_log, &args.calibrate_run) {
        // No run: the calibration and scenario of an earlier one, from its kept audit log.
        let dir = args
            .calibration_out
            .clone()
            .unwrap_or_else(|| PathBuf::from(run));
        if let Err(e) = calibrate::write(log, run, args.nominal_cpu, &dir) {
            eprintln!("cluster bench: calibration from {}: {e}", log.display());
            std::process::exit(1);
        }
        println!(
            "calibration and scenario of run {run} written to {}",
            dir.display()
        );
        return;
    }
    if let Err(e) = bench(args).await {
        eprintln!("cluster bench failed: {e}");
        std::process::exit(1);
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The admin client (kuota's user), and one impersonating `user`.
async fn clients(user: &str) -> Result<(Client, Client), BoxError> {
    let admin = Client::try_default().await?;
    Ok((admin, impersonating(user).await?))
}

/// A client whose writes the audit log shows as `user`'s.
async fn impersonating(user: &str) -> Result<Client, BoxError> {
    let mut cfg = Config::infer().await?;
    cfg.auth_info.impersonate = Some(user.to_string());
    cfg.auth_info.impersonate_groups = Some(vec!["system:masters".to_string()]);
    Ok(Client::try_from(cfg)?)
}

/// Creates `jobs` (objects of `mix`'s kind) with `concurrency` in flight; returns each
/// one's create instant.
async fn create_jobs(
    client: &Client,
    mix: Mix,
    jobs: Vec<(String, DynamicObject)>,
    concurrency: usize,
) -> Result<HashMap<String, Instant>, BoxError> {
    let created = Arc::new(Mutex::new(HashMap::new()));
    stream::iter(jobs)
        .map(|(ns, job)| {
            let api = mix.api(client, &ns);
            let created = created.clone();
            async move {
                let name = job.metadata.name.clone().unwrap_or_default();
                let at = Instant::now();
                api.create(&PostParams::default(), &job).await?;
                created
                    .lock()
                    .expect("lock")
                    .insert(format!("{ns}/{name}"), at);
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(Arc::try_unwrap(created)
        .map_err(|_| "create map still shared")?
        .into_inner()?)
}

/// When a phase's Jobs were created and admitted (unsuspended), in seconds.
pub struct Timeline {
    /// Create → unsuspend per admitted Job, sorted.
    pub latencies: Vec<f64>,
    /// Each unsuspend since the phase's start, sorted.
    admitted_at: Vec<f64>,
    pub finished: usize,
}

impl Timeline {
    pub fn new(
        start: Instant,
        created: &HashMap<String, Instant>,
        unsuspended: &HashMap<String, Instant>,
        finished: usize,
    ) -> Self {
        let mut latencies: Vec<f64> = unsuspended
            .iter()
            .filter_map(|(k, at)| {
                let c = created.get(k)?;
                Some(at.saturating_duration_since(*c).as_secs_f64())
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        let mut admitted_at: Vec<f64> = unsuspended
            .values()
            .map(|at| at.saturating_duration_since(start).as_secs_f64())
            .collect();
        admitted_at.sort_by(f64::total_cmp);
        Self {
            latencies,
            admitted_at,
            finished,
        }
    }

    pub fn admitted(&self) -> usize {
        self.admitted_at.len()
    }

    /// Admissions per second from the phase's start to its last admission.
    pub fn overall(&self) -> f64 {
        self.admitted() as f64 / self.admitted_at.last().copied().unwrap_or(f64::NAN)
    }

    /// Admissions per second between the 10th and 90th percentile admissions (the ramp
    /// up and the tail left out).
    pub fn sustained(&self) -> f64 {
        let (p10, p90) = (
            percentile(&self.admitted_at, 0.1),
            percentile(&self.admitted_at, 0.9),
        );
        (0.8 * self.admitted() as f64) / (p90 - p10)
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn bench(args: Args) -> Result<(), BoxError> {
    let (admin, client) = clients(audit::BENCH_USER).await?;
    let run = format!("kb{}", Timestamp::now().as_second() % 100_000);
    let mix = args.kind;
    eprintln!("run {run}: installing CRDs and the baseline queues");
    setup::crds(&admin, mix.crd()?).await?;
    setup::queues(&client, &run, args.nominal_cpu).await?;

    // 1. Raw create rate: plain suspended Jobs, no webhook, kuota not running.
    let raw_rate = raw_rate(&client, &run, &args).await?;
    eprintln!("raw create rate: {raw_rate:.1} {}/s", mix.noun());

    // The stand-in kubelet runs the pods of every phase's Jobs; for JobSets, the
    // stand-in operator (its own audit user) creates their Jobs and writes their status.
    let kubelet = tokio::spawn(kubelet::run(client.clone(), run.clone()));
    let operator = match mix {
        Mix::Job => None,
        Mix::Jobset => {
            let as_operator = impersonating(operator::OPERATOR_USER).await?;
            Some(tokio::spawn(operator::run(as_operator, run.clone())))
        }
    };
    let timeout = Duration::from_secs(args.timeout_s);
    let phase = PhaseOptions {
        mix,
        concurrency: args.concurrency,
        timeout,
    };

    // 2. The ceiling: the same mix admitted by a controller that only unsuspends.
    let ideal = if args.ideal_jobs > 0 {
        Some(ideal::run(&client, &run, args.ideal_jobs, &phase).await?)
    } else {
        None
    };

    // 3. The write floor: kuota's writes for the same mix, with no scheduling.
    let floor = if args.floor_jobs > 0 {
        let f = floor::run(&client, &run, args.floor_jobs, &phase).await?;
        // Its Events and last finishes land before kuota's phase starts.
        tokio::time::sleep(Duration::from_secs(3)).await;
        Some(f)
    } else {
        None
    };

    // 4. kuota on the baseline.
    let opts = kuota::Options {
        binary: &args.kuota,
        log_filter: &args.kuota_log,
        qps: args.kuota_qps,
        burst: args.kuota_burst,
        frameworks: mix.frameworks(),
        own_config: match &args.kuota_config {
            Some(path) => Some(std::fs::read_to_string(path)?),
            None => None,
        },
    };
    let mut kuota = kuota::Kuota::start(opts, &admin, &run).await?;
    let main = kuota_phase(&client, &run, &args).await?;

    // 5. Unchanged re-evaluations.
    let idle = idle_phase(&client, &run, &args).await?;
    let stats = kuota.stop();
    kubelet.abort();
    if let Some(operator) = operator {
        operator.abort();
    }

    let summary = report::Summary {
        args: &args,
        raw_rate,
        main: &main,
        ideal: ideal.as_ref(),
        floor: floor.as_ref(),
        stats,
    };
    summary.print();
    if let Some(log) = &args.audit_log {
        summary.writes(log, &kuota.marker, idle)?;
        if let (Some(dir), Mix::Job) = (&args.calibration_out, mix) {
            calibrate::write(log, &run, args.nominal_cpu, dir)?;
            println!(
                "\ncalibration and scenario of this run written to {}",
                dir.display()
            );
        }
    } else {
        println!("\n(no --audit-log: kuota's writes were not counted)");
    }
    cleanup(&client, &run).await;
    if main.timeline.finished < args.jobs {
        eprintln!(
            "not every {} finished: kuota's log is kept in {}",
            mix.integration().gvk().kind,
            kuota.dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&kuota.dir);
    }
    Ok(())
}

/// What every phase that creates the mix needs.
pub struct PhaseOptions {
    pub mix: Mix,
    /// Creates in flight at once.
    pub concurrency: usize,
    /// How long to wait for the phase's objects to finish.
    pub timeout: Duration,
}

/// Objects per second created by the harness with no webhook and no controller.
async fn raw_rate(client: &Client, run: &str, args: &Args) -> Result<f64, BoxError> {
    let raw_ns = format!("{run}-raw");
    setup::create_namespace(client, &raw_ns).await?;
    let raw: Vec<_> = setup::plan(args.raw_jobs)
        .into_iter()
        .enumerate()
        .map(|(i, (_, class))| {
            let job = args.kind.object(run, &format!("raw-{i}"), class, false);
            (raw_ns.clone(), job)
        })
        .collect();
    let t = Instant::now();
    create_jobs(client, args.kind, raw, args.concurrency).await?;
    let rate = args.raw_jobs as f64 / t.elapsed().as_secs_f64();
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss.delete(&raw_ns, &DeleteParams::background()).await;
    Ok(rate)
}

/// kuota's phase: its timeline, and the audit-log window of its writes.
pub struct KuotaPhase {
    pub timeline: Timeline,
    pub create_s: f64,
    pub wall_s: f64,
    pub window: (Timestamp, Timestamp),
}

/// Creates the baseline's queued Jobs, waits until they finish, then until their
/// Workloads' finishes and the queue status after them have landed.
async fn kuota_phase(client: &Client, run: &str, args: &Args) -> Result<KuotaPhase, BoxError> {
    let observer = Observer::spawn(
        client,
        args.kind,
        format!(
            "{}={run},kueue.x-k8s.io/queue-name,!{}",
            setup::BENCH_LABEL,
            floor::PHASE_LABEL
        ),
    );
    let t0 = Timestamp::now();
    let start = Instant::now();
    let jobs: Vec<_> = setup::plan(args.jobs)
        .into_iter()
        .enumerate()
        .map(|(i, (cq, class))| {
            let job = args
                .kind
                .object(run, &format!("{}-{i}", class.name), class, true);
            (setup::namespace(run, cq), job)
        })
        .collect();
    let created = create_jobs(client, args.kind, jobs, args.concurrency).await?;
    let create_s = start.elapsed().as_secs_f64();
    eprintln!(
        "created {} queued {} in {create_s:.1} s",
        created.len(),
        args.kind.noun()
    );
    observer
        .wait_finished(args.jobs, Duration::from_secs(args.timeout_s))
        .await;
    let wall_s = start.elapsed().as_secs_f64();
    // Finishing a Job's Workload and the queue status that follows come after the Job
    // completes: let them land, so that they are not counted as re-evaluation writes.
    let unfinished = settle(client, run, Duration::from_secs(60)).await?;
    if unfinished > 0 {
        eprintln!("{unfinished} Workloads still not Finished after 60 s");
    }
    Ok(KuotaPhase {
        timeline: observer.stop(start, &created),
        create_s,
        wall_s,
        window: (t0, Timestamp::now()),
    })
}

/// Unchanged re-evaluations: one blocked Job per queue (more cpu than the queue can
/// ever borrow), then ClusterQueue touches that change nothing about them. Returns the
/// audit-log window of the touches.
async fn idle_phase(
    client: &Client,
    run: &str,
    args: &Args,
) -> Result<(Timestamp, Timestamp), BoxError> {
    let blocked: Vec<_> = (0..setup::COHORTS * setup::QUEUES_PER_COHORT)
        .map(|cq| {
            let mut big = setup::CLASSES[2];
            big.cpu = args.nominal_cpu.saturating_add(500);
            let job = args.kind.object(run, &format!("blocked-{cq}"), big, true);
            (setup::namespace(run, cq), job)
        })
        .collect();
    create_jobs(client, args.kind, blocked, args.concurrency).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let t2 = Timestamp::now();
    let cqs = kueue_api(client, "ClusterQueue");
    for round in 0..report::TOUCHES {
        for cq in 0..setup::COHORTS * setup::QUEUES_PER_COHORT {
            let patch =
                json!({"metadata": {"annotations": {"bench.kuota.dev/touch": round.to_string()}}});
            cqs.patch(
                &format!("{run}-cq-{cq}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok((t2, Timestamp::now()))
}

/// Deletes the run's namespaces (their Jobs and Workloads go with them) and
/// ClusterQueues, best effort.
async fn cleanup(client: &Client, run: &str) {
    let nss: Api<Namespace> = Api::all(client.clone());
    let cqs = kueue_api(client, "ClusterQueue");
    for ns in [ideal::ideal_namespace(run), floor::floor_namespace(run)] {
        let _ = nss.delete(&ns, &DeleteParams::background()).await;
    }
    for cq in 0..setup::COHORTS * setup::QUEUES_PER_COHORT {
        let _ = nss
            .delete(&setup::namespace(run, cq), &DeleteParams::background())
            .await;
        let _ = cqs
            .delete(&format!("{run}-cq-{cq}"), &DeleteParams::background())
            .await;
    }
}

/// All objects of a `kueue.x-k8s.io/v1beta2` kind.
fn kueue_api(client: &Client, kind: &str) -> Api<kube::core::DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind);
    Api::all_with(client.clone(), &kube::core::ApiResource::from_gvk(&gvk))
}

/// Waits (up to `limit`) until every Workload in the run's namespaces is `Finished`,
/// then two queue-status intervals; returns how many were still not finished.
async fn settle(client: &Client, run: &str, limit: Duration) -> Result<usize, BoxError> {
    let workloads = kueue_api(client, "Workload");
    let prefix = format!("{run}-q");
    let deadline = Instant::now() + limit;
    loop {
        let list = workloads.list(&Default::default()).await?;
        let unfinished = list
            .items
            .iter()
            .filter(|w| {
                w.metadata
                    .namespace
                    .as_deref()
                    .is_some_and(|ns| ns.starts_with(&prefix))
            })
            .filter(|w| {
                !w.data
                    .pointer("/status/conditions")
                    .and_then(|c| c.as_array())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Finished" && c["status"] == "True")
                    })
            })
            .count();
        if unfinished == 0 || Instant::now() >= deadline {
            tokio::time::sleep(Duration::from_secs(2)).await;
            return Ok(unfinished);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A watch of the benchmark's objects matching a label selector: when each is first
/// seen unsuspended, and when it completes.
struct Observer {
    unsuspended: Arc<Mutex<HashMap<String, Instant>>>,
    finished: Arc<Mutex<HashMap<String, Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    fn spawn(client: &Client, mix: Mix, selector: String) -> Self {
        let unsuspended: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let finished: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let task = tokio::spawn(observe(
            mix.api_all(client),
            mix,
            selector,
            unsuspended.clone(),
            finished.clone(),
        ));
        Self {
            unsuspended,
            finished,
            task,
        }
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.unsuspended.lock().expect("lock").len(),
            self.finished.lock().expect("lock").len(),
        )
    }

    /// Waits until `jobs` Jobs have completed or `timeout` has passed, with progress on
    /// stderr.
    async fn wait_finished(&self, jobs: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline && self.counts().1 < jobs {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (u, f) = self.counts();
            eprint!("\radmitted {u}/{jobs}  finished {f}   ");
        }
        eprintln!();
    }

    /// Stops watching; the phase's timeline from its `start` and the Jobs' creates.
    fn stop(self, start: Instant, created: &HashMap<String, Instant>) -> Timeline {
        self.task.abort();
        let finished = self.counts().1;
        let unsuspended = self.unsuspended.lock().expect("lock");
        Timeline::new(start, created, &unsuspended, finished)
    }
}

/// Records when each benchmark object matching `selector` is first seen unsuspended,
/// and when it finishes (as kuota reads the kind).
async fn observe(
    api: Api<DynamicObject>,
    mix: Mix,
    selector: String,
    unsuspended: Arc<Mutex<HashMap<String, Instant>>>,
    finished: Arc<Mutex<HashMap<String, Instant>>>,
) {
    let mut stream = applied(api, &selector);
    while let Some(job) = stream.next().await {
        let key = format!(
            "{}/{}",
            job.metadata.namespace.clone().unwrap_or_default(),
            job.metadata.name.clone().unwrap_or_default()
        );
        let now = Instant::now();
        let (running, complete) = mix.state(&job);
        if running {
            unsuspended
                .lock()
                .expect("lock")
                .entry(key.clone())
                .or_insert(now);
        }
        if complete {
            finished.lock().expect("lock").entry(key).or_insert(now);
        }
    }
}

/// The objects matching a label selector, each time the watch applies one (a failed
/// watch backs off and resumes; its errors are skipped).
pub fn applied<K>(api: Api<K>, selector: &str) -> BoxStream<'static, K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let cfg = watcher::Config::default().labels(selector);
    watcher(api, cfg)
        .default_backoff()
        .applied_objects()
        .filter_map(|r| futures::future::ready(r.ok()))
        .boxed()
}

/// A reference controller's phase, its controller already watching: creates `jobs`,
/// waits (up to `timeout`) until those matching `selector` have finished, and returns
/// how long the creates took and the timeline.
pub async fn reference_phase(
    client: &Client,
    name: &str,
    selector: String,
    jobs: Vec<(String, DynamicObject)>,
    opts: &PhaseOptions,
) -> Result<Reference, BoxError> {
    let n = jobs.len();
    let observer = Observer::spawn(client, opts.mix, selector);
    let t0 = Timestamp::now();
    let start = Instant::now();
    let created = create_jobs(client, opts.mix, jobs, opts.concurrency).await?;
    let create_s = start.elapsed().as_secs_f64();
    eprintln!(
        "{name}: created {} {} in {create_s:.1} s",
        created.len(),
        opts.mix.noun()
    );
    observer.wait_finished(n, opts.timeout).await;
    Ok(Reference {
        create_s,
        timeline: observer.stop(start, &created),
        window: (t0, Timestamp::now()),
    })
}

/// What a reference controller (the ideal one, the write floor) achieved.
pub struct Reference {
    /// Seconds to create the Jobs (the arrival rate under the phase's load).
    pub create_s: f64,
    pub timeline: Timeline,
    /// The audit-log window of the phase (for the JobSet operator's writes).
    pub window: (Timestamp, Timestamp),
}
