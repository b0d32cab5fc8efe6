//! Turns what a shell feeds the engine (events) and what the engine returns
//! (decisions, snapshots) into metrics, the same way for the simulator and the
//! controller: both apply events and run cycles through [`super::observed`], which calls
//! [`Observer::observe_event`] next to `Engine::apply` and [`Observer::observe_cycle`]
//! after `Engine::schedule`, so they report the same numbers.
//!
//! Labels are queues, namespaces, priority classes and flavors: bounded by the
//! cluster's configuration, never by its number of workloads.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api;
use crate::engine::{Decision, Engine, Event, Millis, PendingReason, WorkloadKey};

use super::labels::{self, ReplicaRole, Value};
use super::metrics::{GaugeFamily, Metrics, StateGauges};

/// Where a workload stands, as far as metrics care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// `None` until a cycle reports why it waits.
    Pending(Option<PendingReason>),
    /// Holds quota: admitted, or evicted and still stopping.
    Reserving,
}

#[derive(Clone, Debug)]
struct WlRec {
    namespace: Arc<str>,
    local_queue: Arc<str>,
    /// The ClusterQueue it is queued in or admitted to ("" when its LocalQueue is unknown).
    cluster_queue: Arc<str>,
    priority_class: Arc<str>,
    /// Created or last requeued: where Kueue's wait times start.
    queued_since: Millis,
    status: Status,
    /// (flavor, resource, amount in the engine's unit) while reserving.
    usage: Vec<(Arc<str>, Arc<str>, i64)>,
}

type LqKey = (Arc<str>, Arc<str>);

/// (ClusterQueue, namespace, LocalQueue, underlying cause) -> pending workloads.
pub(crate) type UnadmittedCounts = BTreeMap<(Arc<str>, Arc<str>, Arc<str>, &'static str), i64>;

/// Per LocalQueue counts and reserved usage.
#[derive(Clone, Debug, Default)]
struct LqAgg {
    pending_active: i64,
    pending_inadmissible: i64,
    reserving: i64,
    usage: BTreeMap<(Arc<str>, Arc<str>), i64>,
}

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The observer. One per engine; not shared between threads (the [`Metrics`] it
/// records into are).
#[derive(Debug)]
pub struct Observer {
    metrics: Metrics,
    /// (namespace, LocalQueue) -> ClusterQueue.
    local_queues: BTreeMap<LqKey, Arc<str>>,
    workloads: FastMap<WorkloadKey, WlRec>,
    lqs: BTreeMap<LqKey, LqAgg>,
    unadmitted: UnadmittedCounts,
    last_refresh: Option<Instant>,
    refresh_every: Duration,
}

/// Kueue's underlying cause before any cycle has looked at a workload.
const PENDING_EVALUATION: &str = "PendingEvaluation";

impl Observer {
    /// Gauges are rebuilt at most once per `refresh_every` by [`Observer::maybe_refresh`].
    pub fn new(metrics: Metrics, refresh_every: Duration) -> Self {
        Self {
            metrics,
            local_queues: BTreeMap::new(),
            workloads: FastMap::default(),
            lqs: BTreeMap::new(),
            unadmitted: BTreeMap::new(),
            last_refresh: None,
            refresh_every,
        }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether the observer counts this workload (it saw it upserted and not gone).
    pub fn tracks(&self, key: &WorkloadKey) -> bool {
        self.workloads.contains_key(key)
    }

    fn role(&self) -> ReplicaRole {
        self.metrics.replica_role()
    }

    /// Call with every event given to `Engine::apply`, at the same `now`.
    pub fn observe_event(&mut self, now: Millis, event: &Event) {
        match event {
            Event::LocalQueueUpserted(lq) => {
                let ns = lq.metadata.namespace.as_deref().unwrap_or("default");
                let name = lq.metadata.name.as_deref().unwrap_or_default();
                let key: LqKey = (Arc::from(ns), Arc::from(name));
                self.lqs.entry(key.clone()).or_default();
                self.local_queues
                    .insert(key, Arc::from(lq.spec.cluster_queue.as_str()));
            }
            Event::LocalQueueDeleted { namespace, name } => {
                let key: LqKey = (Arc::from(namespace.as_str()), Arc::from(name.as_str()));
                self.local_queues.remove(&key);
                if self.lqs.get(&key).is_some_and(|a| a.is_empty()) {
                    self.lqs.remove(&key);
                }
            }
            Event::WorkloadUpserted(wl) => self.upserted(now, wl),
            Event::WorkloadFinished(key) => {
                if let Some(rec) = self.remove(key) {
                    self.count_finished(&rec);
                }
            }
            Event::WorkloadDeleted(key) => {
                self.remove(key);
            }
            Event::WorkloadEvicted(key) => self.requeued(key, Some(now)),
            // The admission never reached the API server: the workload waits again, still
            // since it was queued (the admission counters cannot be taken back).
            Event::AdmissionFailed(key) => self.requeued(key, None),
            _ => {}
        }
    }

    fn upserted(&mut self, now: Millis, wl: &api::Workload) {
        let key = WorkloadKey::new(
            wl.metadata.namespace.as_deref().unwrap_or("default"),
            wl.metadata.name.as_deref().unwrap_or_default(),
        );
        if self.workloads.contains_key(&key) {
            return;
        }
        let local_queue: Arc<str> = Arc::from(wl.spec.queue_name.as_deref().unwrap_or_default());
        let mut rec = WlRec {
            namespace: key.namespace.clone(),
            cluster_queue: Arc::from(""),
            local_queue,
            priority_class: Arc::from(
                wl.spec
                    .priority_class_ref
                    .as_ref()
                    .map_or("", |p| p.name.as_str()),
            ),
            queued_since: wl
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(now, |t| t.0.as_millisecond()),
            status: Status::Pending(None),
            usage: Vec::new(),
        };
        rec.cluster_queue = self.queue_cq(&rec);
        // A workload that already carries an admission is restored as admitted by the
        // engine (no decision follows): count its reservation, not an admission.
        if let Some(adm) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) {
            rec.status = Status::Reserving;
            rec.cluster_queue = Arc::from(adm.cluster_queue.as_str());
            rec.usage = usage_of(adm);
        }
        self.account(&rec, 1);
        self.workloads.insert(key, rec);
    }

    /// Back in its LocalQueue's ClusterQueue, pending; waiting since `since` if given.
    fn requeued(&mut self, key: &WorkloadKey, since: Option<Millis>) {
        let Some(cq) = self.workloads.get(key).map(|r| self.queue_cq(r)) else {
            return;
        };
        self.change(key, |r| {
            r.status = Status::Pending(None);
            r.queued_since = since.unwrap_or(r.queued_since);
            r.cluster_queue = cq;
            r.usage.clear();
        });
    }

    fn queue_cq(&self, rec: &WlRec) -> Arc<str> {
        self.local_queues
            .get(&(rec.namespace.clone(), rec.local_queue.clone()))
            .cloned()
            .unwrap_or_else(|| Arc::from(""))
    }

    fn remove(&mut self, key: &WorkloadKey) -> Option<WlRec> {
        let rec = self.workloads.remove(key)?;
        self.account(&rec, -1);
        Some(rec)
    }

    /// Applies `f` to a workload's record, keeping the aggregates in step.
    fn change(&mut self, key: &WorkloadKey, f: impl FnOnce(&mut WlRec)) -> Option<WlRec> {
        let mut rec = self.workloads.remove(key)?;
        self.account(&rec, -1);
        f(&mut rec);
        self.account(&rec, 1);
        self.workloads.insert(key.clone(), rec.clone());
        Some(rec)
    }

    /// Adds (`sign` = 1) or removes (-1) a workload's contribution to the aggregates.
    fn account(&mut self, rec: &WlRec, sign: i64) {
        let lq_key: LqKey = (rec.namespace.clone(), rec.local_queue.clone());
        let agg = self.lqs.entry(lq_key.clone()).or_default();
        match rec.status {
            Status::Pending(reason) => {
                if reason.is_some() {
                    agg.pending_inadmissible += sign;
                } else {
                    agg.pending_active += sign;
                }
                let cause = reason.map_or(PENDING_EVALUATION, PendingReason::as_str);
                let k = (
                    rec.cluster_queue.clone(),
                    rec.namespace.clone(),
                    rec.local_queue.clone(),
                    cause,
                );
                let n = self.unadmitted.entry(k.clone()).or_default();
                *n += sign;
                if *n == 0 {
                    self.unadmitted.remove(&k);
                }
            }
            Status::Reserving => {
                agg.reserving += sign;
                for (f, r, v) in &rec.usage {
                    let u = agg.usage.entry((f.clone(), r.clone())).or_default();
                    *u = u.saturating_add(sign.saturating_mul(*v));
                }
                agg.usage.retain(|_, v| *v != 0);
            }
        }
        // LocalQueues that exist keep their (zero) series; others go when empty.
        if self.lqs.get(&lq_key).is_some_and(LqAgg::is_empty)
            && !self.local_queues.contains_key(&lq_key)
        {
            self.lqs.remove(&lq_key);
        }
    }

    fn count_finished(&self, rec: &WlRec) {
        let f = self.metrics.families();
        let role = self.role();
        f.finished.get_or_create(&cq_priority(rec, role)).inc();
        f.lq_finished.get_or_create(&lq_priority(rec, role)).inc();
    }

    /// Call with the decisions of every `Engine::schedule` call, at the same `now`,
    /// with the wall time the call took. Refreshes the state gauges when due.
    pub fn observe_cycle(
        &mut self,
        now: Millis,
        decisions: &[Decision],
        took: Duration,
        engine: &Engine,
    ) {
        self.record_decisions(now, decisions, took);
        self.maybe_refresh(engine);
    }

    /// The counters and histograms of one cycle's decisions (no gauges).
    pub fn record_decisions(&mut self, now: Millis, decisions: &[Decision], took: Duration) {
        let role = self.role();
        let metrics = self.metrics.clone();
        let f = metrics.families();
        let mut kinds = [0u64; 4];
        for d in decisions {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                    checks,
                } => {
                    kinds[0] += 1;
                    self.admitted(now, workload, admission, checks.is_empty());
                }
                Decision::Preempt {
                    victim,
                    preemptor,
                    reason,
                    ..
                } => {
                    kinds[1] += 1;
                    let by = self
                        .workloads
                        .get(preemptor)
                        .map_or_else(|| Arc::from(""), |r| r.cluster_queue.clone());
                    f.preempted
                        .get_or_create(&labels::Preemption {
                            preempting_cluster_queue: by.into(),
                            reason: Value::new(reason.as_str()),
                            replica_role: role,
                        })
                        .inc();
                    self.evicted(victim, "Preempted");
                }
                Decision::Evict {
                    workload, reason, ..
                } => {
                    kinds[2] += 1;
                    self.evicted(workload, reason);
                }
                // Bookkeeping of an eviction already counted.
                Decision::RequeueState { .. } => {}
                Decision::Pending {
                    workload, reason, ..
                } => {
                    kinds[3] += 1;
                    let reason = *reason;
                    self.change(workload, |r| {
                        if matches!(r.status, Status::Pending(_)) {
                            r.status = Status::Pending(Some(reason));
                        }
                    });
                }
            }
        }
        let result = if kinds[0] + kinds[1] > 0 {
            "success"
        } else {
            "inadmissible"
        };
        let result = labels::Result_ {
            result: Value::new(result),
            replica_role: role,
        };
        f.admission_attempts.get_or_create(&result).inc();
        f.admission_attempt_duration
            .get_or_create(&result)
            .observe(took.as_secs_f64());
        let r = labels::Role { replica_role: role };
        f.cycle_duration
            .get_or_create(&r)
            .observe(took.as_secs_f64());
        f.decisions_per_cycle
            .get_or_create(&r)
            .observe(decisions.len() as f64);
        for (kind, n) in ["admit", "preempt", "evict", "pending"].iter().zip(kinds) {
            if n > 0 {
                f.decisions
                    .get_or_create(&labels::Kind {
                        kind: Value::new(kind),
                        replica_role: role,
                    })
                    .inc_by(n);
            }
        }
    }

    /// A quota reservation; the admission too when no check stands between them (with
    /// checks, `Metrics::record_admitted_by_checks` counts it once they pass, as Kueue's
    /// workload controller does).
    fn admitted(
        &mut self,
        now: Millis,
        key: &WorkloadKey,
        admission: &api::Admission,
        without_checks: bool,
    ) {
        let cq: Arc<str> = Arc::from(admission.cluster_queue.as_str());
        let usage = usage_of(admission);
        let Some(rec) = self.change(key, |r| {
            r.status = Status::Reserving;
            r.cluster_queue = cq;
            r.usage = usage;
        }) else {
            return;
        };
        let role = self.role();
        let f = self.metrics.families();
        let wait = (now - rec.queued_since).max(0) as f64 / 1000.0;
        let cqp = cq_priority(&rec, role);
        let lqp = lq_priority(&rec, role);
        f.quota_reserved.get_or_create(&cqp).inc();
        f.lq_quota_reserved.get_or_create(&lqp).inc();
        f.quota_reserved_wait.get_or_create(&cqp).observe(wait);
        f.lq_quota_reserved_wait.get_or_create(&lqp).observe(wait);
        if without_checks {
            f.admitted.get_or_create(&cqp).inc();
            f.lq_admitted.get_or_create(&lqp).inc();
            f.admission_wait.get_or_create(&cqp).observe(wait);
            f.lq_admission_wait.get_or_create(&lqp).observe(wait);
        }
    }

    fn evicted(&mut self, key: &WorkloadKey, reason: &str) {
        let Some(rec) = self.workloads.get(key) else {
            return;
        };
        let role = self.role();
        let f = self.metrics.families();
        f.evicted
            .get_or_create(&labels::CqEviction {
                cluster_queue: rec.cluster_queue.clone().into(),
                reason: Value::new(reason),
                underlying_cause: Value::new(""),
                priority_class: rec.priority_class.clone().into(),
                replica_role: role,
            })
            .inc();
        f.lq_evicted
            .get_or_create(&labels::LqEviction {
                name: rec.local_queue.clone().into(),
                namespace: rec.namespace.clone().into(),
                reason: Value::new(reason),
                underlying_cause: Value::new(""),
                priority_class: rec.priority_class.clone().into(),
                replica_role: role,
            })
            .inc();
    }

    /// Rebuilds the state gauges if `refresh_every` has passed since the last time.
    pub fn maybe_refresh(&mut self, engine: &Engine) {
        if self
            .last_refresh
            .is_some_and(|t| t.elapsed() < self.refresh_every)
        {
            return;
        }
        self.refresh(engine);
    }

    /// Rebuilds the state gauges from the engine's snapshot and the observer's counts.
    pub fn refresh(&mut self, engine: &Engine) {
        self.last_refresh = Some(Instant::now());
        let state = super::state::build(
            &engine.snapshot(),
            &self.lq_rows(),
            &self.unadmitted,
            self.role(),
        );
        self.metrics.set_state(state);
    }

    fn lq_rows(&self) -> Vec<super::state::LqRow<'_>> {
        self.lqs
            .iter()
            .map(|((ns, name), a)| super::state::LqRow {
                namespace: ns,
                name,
                pending_active: a.pending_active,
                pending_inadmissible: a.pending_inadmissible,
                reserving: a.reserving,
                usage: &a.usage,
            })
            .collect()
    }
}

impl LqAgg {
    fn is_empty(&self) -> bool {
        self.pending_active == 0
            && self.pending_inadmissible == 0
            && self.reserving == 0
            && self.usage.is_empty()
    }
}

fn cq_priority(rec: &WlRec, role: ReplicaRole) -> labels::CqPriority {
    labels::CqPriority {
        cluster_queue: rec.cluster_queue.clone().into(),
        priority_class: rec.priority_class.clone().into(),
        replica_role: role,
    }
}

fn lq_priority(rec: &WlRec, role: ReplicaRole) -> labels::LqPriority {
    labels::LqPriority {
        name: rec.local_queue.clone().into(),
        namespace: rec.namespace.clone().into(),
        priority_class: rec.priority_class.clone().into(),
        replica_role: role,
    }
}

/// (flavor, resource, amount in the engine's unit) an admission reserves, summed over its
/// PodSets.
fn usage_of(admission: &api::Admission) -> Vec<(Arc<str>, Arc<str>, i64)> {
    let mut sum: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for ps in &admission.pod_set_assignments {
        for (resource, q) in &ps.resource_usage {
            let Some(flavor) = ps.flavors.get(resource) else {
                continue;
            };
            if let Ok(v) = api::quantity::resource_value(resource, q) {
                let e = sum.entry((flavor, resource)).or_default();
                *e = e.saturating_add(v);
            }
        }
    }
    sum.into_iter()
        .map(|((f, r), v)| (Arc::from(f), Arc::from(r), v))
        .collect()
}

/// A gauge family with its name and help, empty.
pub(crate) fn gauge<L>(
    name: &'static str,
    help: &'static str,
) -> (&'static str, &'static str, GaugeFamily<L>)
where
    L: prometheus_client::encoding::EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug,
{
    (name, help, GaugeFamily::default())
}

impl StateGauges {
    /// Whether nothing has been built yet.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.cq_resources.is_empty() && self.gpus.is_empty()
    }
}
