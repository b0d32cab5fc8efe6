//! Builds the state gauges (queue depths, quotas, usage, GPUs per domain) from an
//! engine snapshot and the observer's per-LocalQueue counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::engine::report::{ClusterQueueSnapshot, CohortSnapshot, EngineSnapshot, QuotaSnapshot};

use super::labels::{self, ReplicaRole, Value};
use super::metrics::{Described, GaugeFamily, StateGauges};
use super::observer::gauge;

/// One LocalQueue's counts, borrowed from the observer.
pub(crate) struct LqRow<'a> {
    pub namespace: &'a Arc<str>,
    pub name: &'a Arc<str>,
    pub pending_active: i64,
    pub pending_inadmissible: i64,
    pub reserving: i64,
    pub usage: &'a BTreeMap<(Arc<str>, Arc<str>), i64>,
}

/// Kueue's ClusterQueue statuses; exactly one is 1.
const CQ_STATUSES: [&str; 3] = ["pending", "active", "terminating"];

/// An engine amount as the metric's unit: cores for cpu (counted in milli), else as counted.
fn units(resource: &str, v: i64) -> f64 {
    if resource == crate::api::quantity::MILLI_RESOURCE {
        v as f64 / 1000.0
    } else {
        v as f64
    }
}

pub(crate) fn build(
    snap: &EngineSnapshot,
    lqs: &[LqRow<'_>],
    unadmitted: &super::observer::UnadmittedCounts,
    role: ReplicaRole,
) -> StateGauges {
    let mut s = StateGauges::default();
    cluster_queues(&mut s, snap, role);
    local_queues(&mut s, lqs, role);
    unadmitted_gauges(&mut s, unadmitted, role);
    gpus(&mut s, snap, role);
    s
}

/// Kueue's ClusterQueue and Cohort gauges.
fn cluster_queues(s: &mut StateGauges, snap: &EngineSnapshot, role: ReplicaRole) {
    let g = ClusterQueueGauges::new();
    for cq in &snap.cluster_queues {
        g.record(cq, role);
    }
    s.pending = vec![g.pending];
    s.per_cq = vec![g.reserving, g.admitted];
    s.cq_status = vec![g.status];
    s.cq_resources = vec![g.reservation, g.usage, g.nominal, g.borrowing, g.lending];
    s.weighted_share = vec![g.share];
    s.cohort_quota = vec![cohort_subtree_quota(&snap.cohorts, role)];
}

/// Kueue's per-ClusterQueue gauge families, filled one ClusterQueue at a time.
struct ClusterQueueGauges {
    pending: Described<GaugeFamily<labels::CqStatus>>,
    reserving: Described<GaugeFamily<labels::Cq>>,
    admitted: Described<GaugeFamily<labels::Cq>>,
    status: Described<GaugeFamily<labels::CqStatus>>,
    reservation: Described<GaugeFamily<labels::CqResource>>,
    usage: Described<GaugeFamily<labels::CqResource>>,
    nominal: Described<GaugeFamily<labels::CqResource>>,
    borrowing: Described<GaugeFamily<labels::CqResource>>,
    lending: Described<GaugeFamily<labels::CqResource>>,
    share: Described<GaugeFamily<labels::CqCohort>>,
}

impl ClusterQueueGauges {
    /// The families, empty, under Kueue's names and help.
    fn new() -> Self {
        Self {
            pending: gauge(
                "kueue_pending_workloads",
                "The number of pending workloads, per 'cluster_queue' and 'status' ('active': the next cycle looks at them; 'inadmissible': parked until something changes)",
            ),
            reserving: gauge(
                "kueue_reserving_active_workloads",
                "The number of workloads holding a quota reservation, per 'cluster_queue'",
            ),
            admitted: gauge(
                "kueue_admitted_active_workloads",
                "The number of admitted workloads that are active (unsuspended and not finished), per 'cluster_queue'",
            ),
            status: gauge(
                "kueue_cluster_queue_status",
                "Reports 'cluster_queue' with its 'status' (pending, active or terminating); 1 for the current one",
            ),
            reservation: gauge(
                "kueue_cluster_queue_resource_reservation",
                "Reports the cluster_queue's total resource reservation within all the flavors",
            ),
            usage: gauge(
                "kueue_cluster_queue_resource_usage",
                "Reports the cluster_queue's total resource usage within all the flavors",
            ),
            nominal: gauge(
                "kueue_cluster_queue_nominal_quota",
                "Reports the cluster_queue's resource nominal quota within all the flavors",
            ),
            borrowing: gauge(
                "kueue_cluster_queue_borrowing_limit",
                "Reports the cluster_queue's resource borrowing limit within all the flavors (only where one is set)",
            ),
            lending: gauge(
                "kueue_cluster_queue_lending_limit",
                "Reports the cluster_queue's resource lending limit within all the flavors (only where one is set)",
            ),
            share: gauge(
                "kueue_cluster_queue_weighted_share",
                "The maximum over resources of usage above nominal quota divided by the cohort's lendable resources, divided by the weight (x1000); 0 when not borrowing",
            ),
        }
    }

    /// Sets every series of one ClusterQueue.
    fn record(&self, cq: &ClusterQueueSnapshot, role: ReplicaRole) {
        let name = Value::new(&cq.name);
        let cohort = Value::new(cq.cohort.as_deref().unwrap_or(""));
        self.record_workloads(cq, &name, role);
        self.record_status(cq, &name, role);
        for q in &cq.quotas {
            self.record_flavor_quota(q, &name, &cohort, role);
        }
        self.share
            .2
            .get_or_create(&labels::CqCohort {
                cluster_queue: name.clone(),
                cohort: cohort.clone(),
                replica_role: role,
            })
            .set(cq.weighted_share as f64);
    }

    /// A ClusterQueue's pending workloads by status, and those reserving quota.
    fn record_workloads(&self, cq: &ClusterQueueSnapshot, name: &Value, role: ReplicaRole) {
        for (st, n) in [
            ("active", cq.pending_active),
            ("inadmissible", cq.pending_inadmissible),
        ] {
            self.pending
                .2
                .get_or_create(&labels::CqStatus {
                    cluster_queue: name.clone(),
                    status: Value::new(st),
                    replica_role: role,
                })
                .set(n as f64);
        }
        let cql = labels::Cq {
            cluster_queue: name.clone(),
            replica_role: role,
        };
        // kuota has no admission checks: a workload holding quota is admitted, so both
        // gauges read the same count.
        self.reserving
            .2
            .get_or_create(&cql)
            .set(cq.reserving as f64);
        self.admitted.2.get_or_create(&cql).set(cq.reserving as f64);
    }

    /// A ClusterQueue's status: one series per status Kueue knows, 1 for the current one.
    fn record_status(&self, cq: &ClusterQueueSnapshot, name: &Value, role: ReplicaRole) {
        let current = if cq.active { "active" } else { "pending" };
        for st in CQ_STATUSES {
            self.status
                .2
                .get_or_create(&labels::CqStatus {
                    cluster_queue: name.clone(),
                    status: Value::new(st),
                    replica_role: role,
                })
                .set(if st == current { 1.0 } else { 0.0 });
        }
    }

    /// One (flavor, resource) entry of a ClusterQueue: reservation, usage, quota, limits.
    fn record_flavor_quota(
        &self,
        q: &QuotaSnapshot,
        name: &Value,
        cohort: &Value,
        role: ReplicaRole,
    ) {
        let l = labels::CqResource {
            cohort: cohort.clone(),
            cluster_queue: name.clone(),
            flavor: Value::new(&q.flavor),
            resource: Value::new(&q.resource),
            replica_role: role,
        };
        // Usage is what is reserved: every reservation is admitted (see record_workloads).
        self.reservation
            .2
            .get_or_create(&l)
            .set(units(&q.resource, q.reserved));
        self.usage
            .2
            .get_or_create(&l)
            .set(units(&q.resource, q.reserved));
        self.nominal
            .2
            .get_or_create(&l)
            .set(units(&q.resource, q.nominal));
        if let Some(b) = q.borrowing_limit {
            self.borrowing
                .2
                .get_or_create(&l)
                .set(units(&q.resource, b));
        }
        if let Some(v) = q.lending_limit {
            self.lending.2.get_or_create(&l).set(units(&q.resource, v));
        }
    }
}

/// Each Cohort's subtree quota per (flavor, resource).
fn cohort_subtree_quota(
    cohorts: &[CohortSnapshot],
    role: ReplicaRole,
) -> Described<GaugeFamily<labels::CohortResource>> {
    let cohort_quota = gauge(
        "kueue_cohort_subtree_quota",
        "Reports the cohort's subtree quota (own nominal quota plus what its members lend) within all the flavors",
    );
    for c in cohorts {
        for ((f, r), v) in &c.subtree_quota {
            cohort_quota
                .2
                .get_or_create(&labels::CohortResource {
                    cohort: Value::new(&c.name),
                    flavor: Value::new(f),
                    resource: Value::new(r),
                    replica_role: role,
                })
                .set(units(r, *v));
        }
    }
    cohort_quota
}

fn local_queues(s: &mut StateGauges, lqs: &[LqRow<'_>], role: ReplicaRole) {
    let pending = gauge::<labels::LqStatus>(
        "kueue_local_queue_pending_workloads",
        "The number of pending workloads, per 'local_queue' and 'status' ('inadmissible' once a cycle has said why it waits)",
    );
    let reserving = gauge::<labels::Lq>(
        "kueue_local_queue_reserving_active_workloads",
        "The number of workloads holding a quota reservation, per 'local_queue'",
    );
    let admitted = gauge::<labels::Lq>(
        "kueue_local_queue_admitted_active_workloads",
        "The number of admitted workloads that are active, per 'local_queue'",
    );
    let reservation = gauge::<labels::LqResource>(
        "kueue_local_queue_resource_reservation",
        "Reports the local_queue's total resource reservation within all the flavors",
    );
    let usage = gauge::<labels::LqResource>(
        "kueue_local_queue_resource_usage",
        "Reports the local_queue's total resource usage within all the flavors",
    );
    for row in lqs {
        let name = Value::from(row.name.clone());
        let namespace = Value::from(row.namespace.clone());
        for (st, n) in [
            ("active", row.pending_active),
            ("inadmissible", row.pending_inadmissible),
        ] {
            pending
                .2
                .get_or_create(&labels::LqStatus {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    status: Value::new(st),
                    replica_role: role,
                })
                .set(n as f64);
        }
        let l = labels::Lq {
            name: name.clone(),
            namespace: namespace.clone(),
            replica_role: role,
        };
        reserving.2.get_or_create(&l).set(row.reserving as f64);
        admitted.2.get_or_create(&l).set(row.reserving as f64);
        for ((f, r), v) in row.usage {
            let l = labels::LqResource {
                name: name.clone(),
                namespace: namespace.clone(),
                flavor: Value::from(f.clone()),
                resource: Value::from(r.clone()),
                replica_role: role,
            };
            reservation.2.get_or_create(&l).set(units(r, *v));
            usage.2.get_or_create(&l).set(units(r, *v));
        }
    }
    s.lq_pending = vec![pending];
    s.per_lq = vec![reserving, admitted];
    s.lq_resources = vec![reservation, usage];
}

fn unadmitted_gauges(
    s: &mut StateGauges,
    unadmitted: &super::observer::UnadmittedCounts,
    role: ReplicaRole,
) {
    let per_cq = gauge::<labels::Unadmitted>(
        "kueue_unadmitted_workloads",
        "The number of unadmitted workloads, per 'cluster_queue', 'reason' (NoReservation) and 'underlying_cause' (why the quota is not reserved)",
    );
    let per_lq = gauge::<labels::LqUnadmitted>(
        "kueue_local_queue_unadmitted_workloads",
        "The number of unadmitted workloads, per 'name', 'namespace', 'cluster_queue', 'reason' and 'underlying_cause'",
    );
    let mut by_cq: BTreeMap<(&Arc<str>, &str), i64> = BTreeMap::new();
    for ((cq, ns, lq, cause), n) in unadmitted {
        *by_cq.entry((cq, cause)).or_default() += n;
        per_lq
            .2
            .get_or_create(&labels::LqUnadmitted {
                name: lq.clone().into(),
                namespace: ns.clone().into(),
                cluster_queue: cq.clone().into(),
                reason: Value::new("NoReservation"),
                underlying_cause: Value::new(cause),
                replica_role: role,
            })
            .set(*n as f64);
    }
    for ((cq, cause), n) in by_cq {
        per_cq
            .2
            .get_or_create(&labels::Unadmitted {
                cluster_queue: cq.clone().into(),
                reason: Value::new("NoReservation"),
                underlying_cause: Value::new(cause),
                replica_role: role,
            })
            .set(n as f64);
    }
    s.unadmitted = vec![per_cq];
    s.lq_unadmitted = vec![per_lq];
}

fn gpus(s: &mut StateGauges, snap: &EngineSnapshot, role: ReplicaRole) {
    let allocatable = gauge::<labels::GpuDomain>(
        "kuota_gpus_allocatable",
        "Allocatable GPUs per topology domain of a TAS flavor",
    );
    let allocated = gauge::<labels::GpuDomain>(
        "kuota_gpus_allocated",
        "GPUs held by workloads kuota placed, per topology domain",
    );
    let free = gauge::<labels::GpuDomain>(
        "kuota_gpus_free",
        "Free GPUs per topology domain (allocatable minus kuota's and other pods' use)",
    );
    let stranded = gauge::<labels::GpuDomain>(
        "kuota_gpus_stranded",
        "Free GPUs on nodes that already run something, per topology domain: fragments a gang wanting whole nodes cannot use",
    );
    for d in &snap.gpu_domains {
        let l = labels::GpuDomain {
            flavor: Value::new(&d.flavor),
            level: Value::new(&d.level),
            domain: Value::new(&d.domain),
            replica_role: role,
        };
        allocatable.2.get_or_create(&l).set(d.allocatable as f64);
        allocated.2.get_or_create(&l).set(d.allocated as f64);
        free.2.get_or_create(&l).set(d.free as f64);
        stranded.2.get_or_create(&l).set(d.stranded as f64);
    }
    s.gpus = vec![allocatable, allocated, free, stranded];
}
