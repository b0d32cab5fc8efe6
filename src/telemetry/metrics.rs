//! The metric registry: Kueue's metric families under Kueue's names, types, labels
//! and buckets, kuota's own under `kuota_`, and the text exposition of all of them.
//!
//! Counters and histograms are recorded as things happen. Gauges that describe the
//! engine's state are rebuilt as one [`StateGauges`] value by the
//! [`Observer`](super::Observer) and swapped in whole, so a scrape reads one
//! consistent picture and never waits for the engine (it only clones an `Arc`).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::labels::{self, ReplicaRole, Value};

pub type CounterFamily<L> = Family<L, Counter>;
pub type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;
pub type GaugeFamily<L> = Family<L, Gauge<f64, std::sync::atomic::AtomicU64>>;

/// Kueue's wait-time buckets: 1 s, then 2.5 s doubling (`generateExponentialBuckets`).
fn kueue_buckets(count: u16) -> impl Iterator<Item = f64> {
    std::iter::once(1.0).chain(exponential_buckets(2.5, 2.0, count - 1))
}

fn wait_14() -> Histogram {
    Histogram::new(kueue_buckets(14))
}

fn wait_16() -> Histogram {
    Histogram::new(kueue_buckets(16))
}

/// client_golang's default buckets, which Kueue's attempt-duration histogram uses.
fn default_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// 100 µs to ~13 s: engine cycles and placements are fast, webhook calls faster.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// 1 to 32768 decisions.
fn count_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

fn hist<L: Clone + std::hash::Hash + Eq>(buckets: fn() -> Histogram) -> HistogramFamily<L> {
    HistogramFamily::new_with_constructor(buckets)
}

/// The families the [`Observer`](super::Observer) records into.
#[derive(Debug)]
pub(crate) struct Families {
    pub admission_attempts: CounterFamily<labels::Result_>,
    pub admission_attempt_duration: HistogramFamily<labels::Result_>,
    pub quota_reserved: CounterFamily<labels::CqPriority>,
    pub admitted: CounterFamily<labels::CqPriority>,
    pub finished: CounterFamily<labels::CqPriority>,
    pub lq_quota_reserved: CounterFamily<labels::LqPriority>,
    pub lq_admitted: CounterFamily<labels::LqPriority>,
    pub lq_finished: CounterFamily<labels::LqPriority>,
    pub quota_reserved_wait: HistogramFamily<labels::CqPriority>,
    pub admission_wait: HistogramFamily<labels::CqPriority>,
    pub lq_quota_reserved_wait: HistogramFamily<labels::LqPriority>,
    pub lq_admission_wait: HistogramFamily<labels::LqPriority>,
    pub evicted: CounterFamily<labels::CqEviction>,
    pub lq_evicted: CounterFamily<labels::LqEviction>,
    pub preempted: CounterFamily<labels::Preemption>,
    pub cycle_duration: HistogramFamily<labels::Role>,
    pub decisions_per_cycle: HistogramFamily<labels::Role>,
    pub decisions: CounterFamily<labels::Kind>,
    pub api_writes: CounterFamily<labels::Kind>,
    pub placement_duration: HistogramFamily<labels::Role>,
    pub webhook_duration: HistogramFamily<labels::WebhookRequest>,
    pub webhook_reviews: CounterFamily<labels::Result_>,
    pub webhook_dry_run: CounterFamily<labels::Role>,
    pub checks_wait: HistogramFamily<labels::CqPriority>,
    pub lq_checks_wait: HistogramFamily<labels::LqPriority>,
    pub multikueue_dispatched: CounterFamily<labels::CqCluster>,
    pub multikueue_admitted: CounterFamily<labels::CqCluster>,
    pub build_info: GaugeFamily<labels::BuildInfo>,
    pub estimates: EstimateFamilies,
}

/// kuota's start-time estimates: what they say, how wrong they were, what they cost.
#[derive(Debug)]
pub(crate) struct EstimateFamilies {
    pub wait: HistogramFamily<labels::Cq>,
    pub error: HistogramFamily<labels::Cq>,
    pub pass_duration: HistogramFamily<labels::Role>,
    pub cpu_share: GaugeFamily<labels::Role>,
}

/// 1 s to ~5.7 days: a GPU job's wait, or an estimate's error on it.
fn estimate_buckets() -> Histogram {
    Histogram::new(kueue_buckets(19))
}

/// 1 ms to ~33 s: one forecast pass.
fn pass_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// A metric family of the engine's state, with its name and help.
pub(crate) type Described<F> = (&'static str, &'static str, F);

/// Gauges describing the engine's state at one moment; built whole and swapped in.
#[derive(Debug, Default)]
pub struct StateGauges {
    pub(crate) pending: Vec<Described<GaugeFamily<labels::CqStatus>>>,
    pub(crate) per_cq: Vec<Described<GaugeFamily<labels::Cq>>>,
    pub(crate) cq_status: Vec<Described<GaugeFamily<labels::CqStatus>>>,
    pub(crate) cq_resources: Vec<Described<GaugeFamily<labels::CqResource>>>,
    pub(crate) weighted_share: Vec<Described<GaugeFamily<labels::CqCohort>>>,
    pub(crate) cohort_quota: Vec<Described<GaugeFamily<labels::CohortResource>>>,
    pub(crate) lq_pending: Vec<Described<GaugeFamily<labels::LqStatus>>>,
    pub(crate) per_lq: Vec<Described<GaugeFamily<labels::Lq>>>,
    pub(crate) lq_resources: Vec<Described<GaugeFamily<labels::LqResource>>>,
    pub(crate) unadmitted: Vec<Described<GaugeFamily<labels::Unadmitted>>>,
    pub(crate) lq_unadmitted: Vec<Described<GaugeFamily<labels::LqUnadmitted>>>,
    pub(crate) gpus: Vec<Described<GaugeFamily<labels::GpuDomain>>>,
}

impl StateGauges {
    fn encode_all(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        fn one<L>(
            encoder: &mut DescriptorEncoder,
            (name, help, family): &Described<GaugeFamily<L>>,
        ) -> Result<(), std::fmt::Error>
        where
            L: prometheus_client::encoding::EncodeLabelSet
                + Clone
                + std::hash::Hash
                + Eq
                + std::fmt::Debug,
        {
            let m = encoder.encode_descriptor(name, help, None, family.metric_type())?;
            family.encode(m)
        }
        for d in &self.pending {
            one(encoder, d)?;
        }
        for d in &self.per_cq {
            one(encoder, d)?;
        }
        for d in &self.cq_status {
            one(encoder, d)?;
        }
        for d in &self.cq_resources {
            one(encoder, d)?;
        }
        for d in &self.weighted_share {
            one(encoder, d)?;
        }
        for d in &self.cohort_quota {
            one(encoder, d)?;
        }
        for d in &self.lq_pending {
            one(encoder, d)?;
        }
        for d in &self.per_lq {
            one(encoder, d)?;
        }
        for d in &self.lq_resources {
            one(encoder, d)?;
        }
        for d in &self.unadmitted {
            one(encoder, d)?;
        }
        for d in &self.lq_unadmitted {
            one(encoder, d)?;
        }
        for d in &self.gpus {
            one(encoder, d)?;
        }
        Ok(())
    }
}

/// Encodes the latest [`StateGauges`] on each scrape.
#[derive(Debug, Default)]
struct StateCollector(Arc<Mutex<Arc<StateGauges>>>);

impl Collector for StateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Hold the lock only to clone the Arc: the engine thread swaps in a new value
        // without waiting for a slow scrape.
        let state = match self.0.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        state.encode_all(&mut encoder)
    }
}

/// `kuota_unknown_fields_total{kind,replica_role}` from the process-wide counts, labelled
/// with this registry's role when scraped (the counts are kept where decoding happens,
/// which holds no registry).
#[derive(Debug)]
struct UnknownFieldsCollector(Arc<AtomicU8>);

impl Collector for UnknownFieldsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let replica_role = ReplicaRole::from_u8(self.0.load(Ordering::Relaxed));
        let family = CounterFamily::<labels::Kind>::default();
        for (kind, n) in crate::api::lenient::unknown_fields_by_kind() {
            let label = labels::Kind {
                kind: Value::new(&kind),
                replica_role,
            };
            family.get_or_create(&label).inc_by(n);
        }
        let m = encoder.encode_descriptor(
            "kuota_unknown_fields",
            "Fields of objects read from the cluster that this kuota does not know (a newer Kueue's), ignored while decoding, by kind",
            None,
            family.metric_type(),
        )?;
        family.encode(m)
    }
}

/// `kuota_api_forbidden_total{verb,group,resource,replica_role}`: the process's refused
/// API calls ([`super::forbidden`]), labelled with this registry's role when scraped.
#[derive(Debug)]
struct ForbiddenCollector(Arc<AtomicU8>);

impl Collector for ForbiddenCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let replica_role = ReplicaRole::from_u8(self.0.load(Ordering::Relaxed));
        let family = CounterFamily::<labels::Access>::default();
        for (access, n) in super::forbidden::Forbidden::process().counts() {
            let label = labels::Access {
                verb: Value::new(&access.verb),
                group: Value::new(&access.group),
                resource: Value::new(&access.resource),
                replica_role,
            };
            family.get_or_create(&label).inc_by(n);
        }
        let m = encoder.encode_descriptor(
            "kuota_api_forbidden",
            "API calls of this process the API server's authorizer refused, by RBAC verb, API group and resource (grant them in kuota's ClusterRole)",
            None,
            family.metric_type(),
        )?;
        family.encode(m)
    }
}

struct Inner {
    registry: Registry,
    families: Families,
    state: Arc<Mutex<Arc<StateGauges>>>,
    /// Shared with the collectors that label their series at scrape time.
    role: Arc<AtomicU8>,
}

/// kuota's metrics. Cheap to clone (shared); every method takes `&self` and is
/// safe to call from any thread.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("replica_role", &self.replica_role())
            .finish_non_exhaustive()
    }
}

/// This replica leads while it lives (see [`Metrics::lead`]).
#[derive(Debug)]
#[must_use = "the replica stops being the leader when this is dropped"]
pub struct Leading(Metrics);

impl Drop for Leading {
    fn drop(&mut self) {
        self.0.set_replica_role(ReplicaRole::Follower);
        self.0.set_state(StateGauges::default());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

macro_rules! register {
    ($reg:expr, $name:expr, $help:expr, $fam:expr) => {{
        let f = $fam;
        $reg.register($name, $help, f.clone());
        f
    }};
}

/// Kueue's per-ClusterQueue and per-LocalQueue workload counters: quota reserved,
/// admitted, finished.
type WorkloadCounters<L> = (CounterFamily<L>, CounterFamily<L>, CounterFamily<L>);

/// Kueue's wait times of one queue kind: until quota reservation, until admission.
type WaitTimes<L> = (HistogramFamily<L>, HistogramFamily<L>);

impl Families {
    /// Registers every family in `r`, in the order the exposition lists them.
    fn register(r: &mut Registry) -> Self {
        // The registry encodes in registration order: these calls fix the order of
        // `/metrics`, so a new family goes where it should appear.
        let (admission_attempts, admission_attempt_duration) = register_admission_attempts(r);
        let (quota_reserved, admitted, finished) = register_cluster_queue_workloads(r);
        let (lq_quota_reserved, lq_admitted, lq_finished) = register_local_queue_workloads(r);
        let (quota_reserved_wait, admission_wait) = register_cluster_queue_wait_times(r);
        let (lq_quota_reserved_wait, lq_admission_wait) = register_local_queue_wait_times(r);
        let (evicted, lq_evicted, preempted) = register_evictions(r);
        let (cycle_duration, decisions_per_cycle, decisions) = register_engine_cycles(r);
        let (api_writes, placement_duration) = register_carrying_out(r);
        let (webhook_duration, webhook_reviews, webhook_dry_run) = register_webhook(r);
        let estimates = register_estimates(r);
        let (checks_wait, lq_checks_wait) = register_admission_checks_wait(r);
        let (multikueue_dispatched, multikueue_admitted) = register_multikueue(r);
        let build_info = register!(
            r,
            "kueue_build_info",
            "kuota build information: 1, labelled by version, commit, build date, compiler and platform (Kueue's label names; go_version holds the Rust version)",
            GaugeFamily::default()
        );
        Self {
            admission_attempts,
            admission_attempt_duration,
            quota_reserved,
            admitted,
            finished,
            lq_quota_reserved,
            lq_admitted,
            lq_finished,
            quota_reserved_wait,
            admission_wait,
            lq_quota_reserved_wait,
            lq_admission_wait,
            evicted,
            lq_evicted,
            preempted,
            cycle_duration,
            decisions_per_cycle,
            decisions,
            api_writes,
            placement_duration,
            webhook_duration,
            webhook_reviews,
            webhook_dry_run,
            checks_wait,
            lq_checks_wait,
            multikueue_dispatched,
            multikueue_admitted,
            build_info,
            estimates,
        }
    }
}

/// kuota's start-time estimate families.
fn register_estimates(r: &mut Registry) -> EstimateFamilies {
    EstimateFamilies {
        wait: register!(
            r,
            "kuota_start_estimate_wait_seconds",
            "Estimated wait until admission (the middle estimate) of each pending workload at each forecast pass, by ClusterQueue",
            hist(estimate_buckets)
        ),
        error: register!(
            r,
            "kuota_start_estimate_error_seconds",
            "How far a workload's admission was from the last middle estimate made for it, either way, by ClusterQueue",
            hist(estimate_buckets)
        ),
        pass_duration: register!(
            r,
            "kuota_start_estimate_pass_duration_seconds",
            "Time of one forecast pass over every pending workload (three forward runs of the engine)",
            hist(pass_buckets)
        ),
        cpu_share: register!(
            r,
            "kuota_start_estimate_cpu_share",
            "Share of one core the forecast passes took since the previous pass started (bounded by startEstimates.cpuShare)",
            GaugeFamily::default()
        ),
    }
}

/// Kueue's scheduling-cycle families: attempts and their duration, by result.
fn register_admission_attempts(
    r: &mut Registry,
) -> (
    CounterFamily<labels::Result_>,
    HistogramFamily<labels::Result_>,
) {
    let attempts = register!(
        r,
        "kueue_admission_attempts",
        "The total number of scheduling cycles (attempts to admit workloads), by result: 'success' if the cycle admitted or preempted anything, otherwise 'inadmissible'",
        CounterFamily::default()
    );
    let duration = register!(
        r,
        "kueue_admission_attempt_duration_seconds",
        "The latency of an admission attempt (one scheduling cycle), by result",
        hist(default_buckets)
    );
    (attempts, duration)
}

/// Kueue's workload counters per ClusterQueue.
fn register_cluster_queue_workloads(r: &mut Registry) -> WorkloadCounters<labels::CqPriority> {
    let quota_reserved = register!(
        r,
        "kueue_quota_reserved_workloads",
        "The total number of quota reserved workloads per 'cluster_queue'",
        CounterFamily::default()
    );
    let admitted = register!(
        r,
        "kueue_admitted_workloads",
        "The total number of admitted workloads per 'cluster_queue'",
        CounterFamily::default()
    );
    let finished = register!(
        r,
        "kueue_finished_workloads",
        "The total number of finished workloads per 'cluster_queue'",
        CounterFamily::default()
    );
    (quota_reserved, admitted, finished)
}

/// Kueue's workload counters per LocalQueue.
fn register_local_queue_workloads(r: &mut Registry) -> WorkloadCounters<labels::LqPriority> {
    let quota_reserved = register!(
        r,
        "kueue_local_queue_quota_reserved_workloads",
        "The total number of quota reserved workloads per 'local_queue'",
        CounterFamily::default()
    );
    let admitted = register!(
        r,
        "kueue_local_queue_admitted_workloads",
        "The total number of admitted workloads per 'local_queue'",
        CounterFamily::default()
    );
    let finished = register!(
        r,
        "kueue_local_queue_finished_workloads",
        "The total number of finished workloads per 'local_queue'",
        CounterFamily::default()
    );
    (quota_reserved, admitted, finished)
}

/// Kueue's wait-time histograms per ClusterQueue.
fn register_cluster_queue_wait_times(r: &mut Registry) -> WaitTimes<labels::CqPriority> {
    let quota_reserved = register!(
        r,
        "kueue_quota_reserved_wait_time_seconds",
        "The time between a workload was created or requeued until it got quota reservation, per 'cluster_queue'",
        hist(wait_14)
    );
    // 16 buckets where the other wait times have 14, as in Kueue.
    let admission = register!(
        r,
        "kueue_admission_wait_time_seconds",
        "The time between a workload was created or requeued until admission, per 'cluster_queue'",
        hist(wait_16)
    );
    (quota_reserved, admission)
}

/// Kueue's wait-time histograms per LocalQueue.
fn register_local_queue_wait_times(r: &mut Registry) -> WaitTimes<labels::LqPriority> {
    let quota_reserved = register!(
        r,
        "kueue_local_queue_quota_reserved_wait_time_seconds",
        "The time between a workload was created or requeued until it got quota reservation, per 'local_queue'",
        hist(wait_14)
    );
    let admission = register!(
        r,
        "kueue_local_queue_admission_wait_time_seconds",
        "The time between a workload was created or requeued until admission, per 'local_queue'",
        hist(wait_14)
    );
    (quota_reserved, admission)
}

/// Kueue's eviction counters (per ClusterQueue and LocalQueue) and preemption counter.
fn register_evictions(
    r: &mut Registry,
) -> (
    CounterFamily<labels::CqEviction>,
    CounterFamily<labels::LqEviction>,
    CounterFamily<labels::Preemption>,
) {
    let evicted = register!(
        r,
        "kueue_evicted_workloads",
        "The number of evicted workloads per 'cluster_queue', by 'reason' (Preempted, ClusterQueueStopped, LocalQueueStopped, Deactivated, ...) and 'underlying_cause'",
        CounterFamily::default()
    );
    let lq_evicted = register!(
        r,
        "kueue_local_queue_evicted_workloads",
        "The number of evicted workloads per 'local_queue', by 'reason' and 'underlying_cause'",
        CounterFamily::default()
    );
    let preempted = register!(
        r,
        "kueue_preempted_workloads",
        "The number of preempted workloads per 'preempting_cluster_queue', by 'reason' (InClusterQueue, InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing)",
        CounterFamily::default()
    );
    (evicted, lq_evicted, preempted)
}

/// kuota's own scheduling-cycle families: cycle time and the decisions returned.
fn register_engine_cycles(
    r: &mut Registry,
) -> (
    HistogramFamily<labels::Role>,
    HistogramFamily<labels::Role>,
    CounterFamily<labels::Kind>,
) {
    let cycle_duration = register!(
        r,
        "kuota_engine_cycle_duration_seconds",
        "Wall time of one engine scheduling cycle",
        hist(latency_buckets)
    );
    let decisions_per_cycle = register!(
        r,
        "kuota_engine_decisions_per_cycle",
        "Decisions (admit, preempt, evict, pending) one scheduling cycle returned",
        hist(count_buckets)
    );
    let decisions = register!(
        r,
        "kuota_engine_decisions",
        "Decisions returned by scheduling cycles, by kind (admit, preempt, evict, pending)",
        CounterFamily::default()
    );
    (cycle_duration, decisions_per_cycle, decisions)
}

/// kuota's own families for carrying out decisions: API writes and topology placement.
fn register_carrying_out(
    r: &mut Registry,
) -> (CounterFamily<labels::Kind>, HistogramFamily<labels::Role>) {
    let api_writes = register!(
        r,
        "kuota_api_writes",
        "Writes to the Kubernetes API carrying out engine decisions, by kind of object written",
        CounterFamily::default()
    );
    let placement_duration = register!(
        r,
        "kuota_placement_duration_seconds",
        "Time to carry out the topology placement of one admitted workload",
        hist(latency_buckets)
    );
    (api_writes, placement_duration)
}

/// kuota's own admission webhook families: request latency, reviews, dry runs.
fn register_webhook(
    r: &mut Registry,
) -> (
    HistogramFamily<labels::WebhookRequest>,
    CounterFamily<labels::Result_>,
    CounterFamily<labels::Role>,
) {
    let duration = register!(
        r,
        "kuota_webhook_request_duration_seconds",
        "Admission webhook request latency, by path and result",
        hist(latency_buckets)
    );
    let reviews = register!(
        r,
        "kuota_webhook_reviews",
        "Admission reviews answered, by result (allowed, patched, denied, bad_request)",
        CounterFamily::default()
    );
    let dry_run = register!(
        r,
        "kuota_webhook_dry_run_reviews",
        "Dry-run admission reviews answered (also counted in kuota_webhook_reviews_total)",
        CounterFamily::default()
    );
    (duration, reviews, dry_run)
}

/// Kueue's wait from quota reservation to admission, for workloads with admission checks.
fn register_admission_checks_wait(
    r: &mut Registry,
) -> (
    HistogramFamily<labels::CqPriority>,
    HistogramFamily<labels::LqPriority>,
) {
    let cq = register!(
        r,
        "kueue_admission_checks_wait_time_seconds",
        "The time from when a workload got the quota reservation until admission, per 'cluster_queue'",
        hist(wait_14)
    );
    let lq = register!(
        r,
        "kueue_local_queue_admission_checks_wait_time_seconds",
        "The time from when a workload got the quota reservation until admission, per 'local_queue'",
        hist(wait_14)
    );
    (cq, lq)
}

/// Kueue's MultiKueue counters (subsystem `multikueue`, no `kueue_` prefix, as Kueue names
/// them): copies made in workers, and admissions there.
fn register_multikueue(
    r: &mut Registry,
) -> (
    CounterFamily<labels::CqCluster>,
    CounterFamily<labels::CqCluster>,
) {
    let dispatched = register!(
        r,
        "multikueue_workloads_dispatched",
        "The total number of remote workloads created by the MultiKueue manager on a worker cluster, per 'cluster_queue' and 'cluster'.",
        CounterFamily::default()
    );
    let admitted = register!(
        r,
        "multikueue_workloads_admitted",
        "The total number of remote workload admissions on a worker cluster, per 'cluster_queue' and 'cluster'. A workload may be counted more than once if it is evicted and re-admitted.",
        CounterFamily::default()
    );
    (dispatched, admitted)
}

/// One admission completed by its admission checks.
pub struct CheckAdmission<'a> {
    pub cluster_queue: &'a str,
    pub priority_class: &'a str,
    pub namespace: &'a str,
    pub local_queue: &'a str,
    /// Seconds since it was created or requeued.
    pub queued_wait_s: f64,
    /// Seconds since its quota was reserved.
    pub reserved_wait_s: f64,
}

impl Metrics {
    /// A registry with every family registered and `kueue_build_info` set.
    pub fn new() -> Self {
        let mut r = Registry::default();
        let families = Families::register(&mut r);
        let role = Arc::new(AtomicU8::new(ReplicaRole::Standalone.to_u8()));
        r.register_collector(Box::new(UnknownFieldsCollector(role.clone())));
        r.register_collector(Box::new(ForbiddenCollector(role.clone())));
        let state = Arc::new(Mutex::new(Arc::new(StateGauges::default())));
        r.register_collector(Box::new(StateCollector(state.clone())));
        let m = Self(Arc::new(Inner {
            registry: r,
            families,
            state,
            role,
        }));
        m.set_build_info();
        m
    }

    fn set_build_info(&self) {
        let role = self.replica_role();
        self.0.families.build_info.clear();
        self.0
            .families
            .build_info
            .get_or_create(&labels::BuildInfo {
                git_version: Value::new(env!("CARGO_PKG_VERSION")),
                git_commit: Value::new(option_env!("KUOTA_GIT_COMMIT").unwrap_or("")),
                build_date: Value::new(option_env!("KUOTA_BUILD_DATE").unwrap_or("")),
                go_version: Value::new(option_env!("CARGO_PKG_RUST_VERSION").unwrap_or("")),
                compiler: Value::new("rustc"),
                platform: Value::new(&format!(
                    "{}/{}",
                    std::env::consts::OS,
                    std::env::consts::ARCH
                )),
                replica_role: role,
            })
            .set(1.0);
    }

    pub(crate) fn families(&self) -> &Families {
        &self.0.families
    }

    /// The role every series is labelled with from now on (leader election calls this).
    pub fn set_replica_role(&self, role: ReplicaRole) {
        self.0.role.store(role.to_u8(), Ordering::Relaxed);
        self.set_build_info();
    }

    pub fn replica_role(&self) -> ReplicaRole {
        ReplicaRole::from_u8(self.0.role.load(Ordering::Relaxed))
    }

    /// Labels every series `leader` until the returned guard is dropped (the scheduler
    /// stopped or was aborted), then `follower`, and empties the state gauges: a follower
    /// no longer knows the cluster's state, and the new leader reports it.
    pub fn lead(&self) -> Leading {
        self.set_replica_role(ReplicaRole::Leader);
        Leading(self.clone())
    }

    /// A Workload whose admission waited for its checks was admitted (Kueue's workload
    /// controller reports it then, not at the quota reservation): the admitted counters,
    /// the wait since it was queued, and the wait since its quota was reserved.
    pub fn record_admitted_by_checks(&self, at: &CheckAdmission<'_>) {
        let f = &self.0.families;
        let role = self.replica_role();
        let cqp = labels::CqPriority {
            cluster_queue: Value::new(at.cluster_queue),
            priority_class: Value::new(at.priority_class),
            replica_role: role,
        };
        let lqp = labels::LqPriority {
            name: Value::new(at.local_queue),
            namespace: Value::new(at.namespace),
            priority_class: Value::new(at.priority_class),
            replica_role: role,
        };
        f.admitted.get_or_create(&cqp).inc();
        f.lq_admitted.get_or_create(&lqp).inc();
        f.admission_wait
            .get_or_create(&cqp)
            .observe(at.queued_wait_s);
        f.lq_admission_wait
            .get_or_create(&lqp)
            .observe(at.queued_wait_s);
        f.checks_wait
            .get_or_create(&cqp)
            .observe(at.reserved_wait_s);
        f.lq_checks_wait
            .get_or_create(&lqp)
            .observe(at.reserved_wait_s);
    }

    /// MultiKueue made a copy of a Workload of ClusterQueue `cq` in worker `cluster`.
    pub fn record_multikueue_dispatched(&self, cq: &str, cluster: &str) {
        self.multikueue_counter(&self.0.families.multikueue_dispatched, cq, cluster);
    }

    /// A Workload of ClusterQueue `cq` was admitted in worker `cluster` (its check Ready).
    pub fn record_multikueue_admitted(&self, cq: &str, cluster: &str) {
        self.multikueue_counter(&self.0.families.multikueue_admitted, cq, cluster);
    }

    fn multikueue_counter(
        &self,
        family: &CounterFamily<labels::CqCluster>,
        cq: &str,
        cluster: &str,
    ) {
        family
            .get_or_create(&labels::CqCluster {
                cluster_queue: Value::new(cq),
                cluster: Value::new(cluster),
                replica_role: self.replica_role(),
            })
            .inc();
    }

    /// One write to the Kubernetes API made to carry out a decision, by the kind of
    /// object written (e.g. `Workload`, `Job`, `Pod`, `Event`).
    pub fn record_api_write(&self, kind: &str) {
        self.record_api_writes(kind, 1);
    }

    /// One forecast pass: how long it took, the share of one core it used since the
    /// last pass began, and each pending workload's estimated wait (ClusterQueue,
    /// seconds).
    pub fn record_forecast_pass<'a>(
        &self,
        took: Duration,
        cpu_share: f64,
        waits: impl IntoIterator<Item = (&'a str, f64)>,
    ) {
        let role = labels::Role {
            replica_role: self.replica_role(),
        };
        let e = &self.0.families.estimates;
        e.pass_duration
            .get_or_create(&role)
            .observe(took.as_secs_f64());
        e.cpu_share.get_or_create(&role).set(cpu_share);
        for (cq, wait) in waits {
            e.wait
                .get_or_create(&self.cq_label(cq))
                .observe(wait.max(0.0));
        }
    }

    /// How far an admission in ClusterQueue `cq` was from its last estimate (seconds).
    pub fn record_estimate_error(&self, cq: &str, error_s: f64) {
        let e = &self.0.families.estimates;
        e.error
            .get_or_create(&self.cq_label(cq))
            .observe(error_s.abs());
    }

    fn cq_label(&self, cq: &str) -> labels::Cq {
        labels::Cq {
            cluster_queue: Value::new(cq),
            replica_role: self.replica_role(),
        }
    }

    /// `n` writes of one kind (a batch).
    pub fn record_api_writes(&self, kind: &str, n: u64) {
        self.0
            .families
            .api_writes
            .get_or_create(&labels::Kind {
                kind: Value::new(kind),
                replica_role: self.replica_role(),
            })
            .inc_by(n);
    }

    /// Time spent carrying out one admitted workload's topology placement.
    pub fn record_placement(&self, took: Duration) {
        self.0
            .families
            .placement_duration
            .get_or_create(&labels::Role {
                replica_role: self.replica_role(),
            })
            .observe(took.as_secs_f64());
    }

    /// One webhook HTTP request: its path (a fixed route, never a user's URL), its
    /// result, and how long it took.
    pub fn record_webhook_request(&self, path: &str, result: &str, took: Duration) {
        self.0
            .families
            .webhook_duration
            .get_or_create(&labels::WebhookRequest {
                path: Value::new(path),
                result: Value::new(result),
                replica_role: self.replica_role(),
            })
            .observe(took.as_secs_f64());
    }

    /// One answered admission review (`allowed`, `patched`, `denied`, `bad_request`).
    pub fn record_webhook_review(&self, result: &'static str, dry_run: bool) {
        let role = self.replica_role();
        self.0
            .families
            .webhook_reviews
            .get_or_create(&labels::Result_ {
                result: Value::new(result),
                replica_role: role,
            })
            .inc();
        if dry_run {
            self.0
                .families
                .webhook_dry_run
                .get_or_create(&labels::Role { replica_role: role })
                .inc();
        }
    }

    /// How many reviews of `result` were counted.
    pub fn webhook_reviews(&self, result: &'static str) -> u64 {
        self.0
            .families
            .webhook_reviews
            .get(&labels::Result_ {
                result: Value::new(result),
                replica_role: self.replica_role(),
            })
            .map_or(0, |c| c.get())
    }

    /// How many dry-run reviews were counted.
    pub fn webhook_dry_run_reviews(&self) -> u64 {
        self.0
            .families
            .webhook_dry_run
            .get(&labels::Role {
                replica_role: self.replica_role(),
            })
            .map_or(0, |c| c.get())
    }

    /// Replaces the state gauges (the [`Observer`](super::Observer) builds them).
    pub fn set_state(&self, state: StateGauges) {
        let state = Arc::new(state);
        match self.0.state.lock() {
            Ok(mut g) => *g = state,
            Err(poisoned) => *poisoned.into_inner() = state,
        }
    }

    /// Appends every family in OpenMetrics text, without the closing `# EOF`, so a
    /// caller can add families of its own before [`Metrics::finish`].
    pub fn encode_into(&self, out: &mut String) -> Result<(), std::fmt::Error> {
        prometheus_client::encoding::text::encode_registry(out, &self.0.registry)
    }

    /// Closes an exposition started with [`Metrics::encode_into`].
    pub fn finish(out: &mut String) -> Result<(), std::fmt::Error> {
        prometheus_client::encoding::text::encode_eof(out)
    }

    /// The whole exposition, as `/metrics` serves it.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing into a String cannot fail.
        let _ = self
            .encode_into(&mut out)
            .and_then(|()| Self::finish(&mut out));
        out
    }
}

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of [`to_prometheus_text`]'s output.
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Rewrites an OpenMetrics exposition into Prometheus' classic text format (what
/// client_golang, and so Kueue, serves by default): counter families are named with
/// their `_total` suffix in HELP and TYPE, and there are no `# UNIT` or `# EOF` lines.
/// For scrapers and tools (promtool) that do not negotiate OpenMetrics.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + counters.len() * 16);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                if !tail.is_empty() {
                    out.push(' ');
                    out.push_str(tail);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Picks the format a scraper asked for: OpenMetrics when its `Accept` header names
/// it (Prometheus does), the classic text format otherwise. Returns (content type, body).
pub fn negotiate(accept: Option<&str>, openmetrics: String) -> (&'static str, String) {
    if accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
        (CONTENT_TYPE, openmetrics)
    } else {
        (
            PROMETHEUS_TEXT_CONTENT_TYPE,
            to_prometheus_text(&openmetrics),
        )
    }
}
