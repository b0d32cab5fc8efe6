//! The pure admission core: it takes timestamped events and returns decisions.
//!
//! Nothing in here does I/O, spawns, sleeps or reads the clock: the shells
//! (simulator, controller, tests) pass time in and carry decisions out, which
//! is what makes the simulator's answers the cluster's answers.

use std::collections::BTreeMap;

use crate::api;

/// Milliseconds since the Unix epoch, on the caller's clock (virtual or wall).
pub type Millis = i64;

/// Identifies a Workload: namespace and name.
///
/// Shared strings: every decision names its workload, and a cycle can emit tens of
/// thousands of decisions, so a clone must not allocate.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadKey {
    pub namespace: std::sync::Arc<str>,
    pub name: std::sync::Arc<str>,
}

impl WorkloadKey {
    pub fn new(
        namespace: impl Into<std::sync::Arc<str>>,
        name: impl Into<std::sync::Arc<str>>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// How fair-sharing preemption decides whether a victim may be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairPreemptionStrategy {
    /// Preemptor's share with the workload <= target's share without the victim.
    LessThanOrEqualToFinalShare,
    /// Preemptor's share with the workload < target's share before preemption.
    LessThanInitialShare,
}

/// Engine-wide configuration (Kueue's Configuration fields that shape scheduling).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// `fairSharing.enable` with its preemption strategies; `None` = classical.
    pub fair_sharing: Option<Vec<FairPreemptionStrategy>>,
    /// How topology placement picks domains (kuota's by default).
    pub placement: crate::placement::Strategy,
    /// kuota's own setting, not Kueue's: a workload admitted less than this long ago
    /// is not a preemption victim (0, the default, keeps Kueue's behaviour). A
    /// preemptor that only such workloads could make room for waits, and is looked
    /// at again when the first of them has run this long ([`Engine::next_wakeup`]).
    /// Like KAI's `preemptMinRuntime` and Kueue's proposed `minAdmitDuration`.
    pub preemption_min_runtime: Millis,
    /// Kueue's `admissionFairSharing` (with the AdmissionFairSharing feature gate on);
    /// `None` = off, and then ClusterQueues' `admissionScope` changes nothing.
    pub admission_fair_sharing: Option<AdmissionFairSharing>,
    /// Kueue's `waitForPodsReady`; `None` = off.
    pub pods_ready: Option<PodsReadyConfig>,
    /// kuota's own rule, not Kueue's: for this long after its job reports success
    /// ([`Event::WorkloadFinishing`]) a workload is waited for, never preempted, as it
    /// frees its quota on its own. After it, a job its controller never completes counts
    /// as running again and may be preempted. 0 turns the rule off (Kueue's behaviour).
    pub finishing_grace: Millis,
    /// kuota's own mechanism, not Kueue's (`gangReservation.horizon`): when a ClusterQueue's
    /// first gang on topology-aware nodes cannot be admitted, the nodes it gets at its
    /// earliest start, from the running workloads' maximumExecutionTimeSeconds, are
    /// held for it if that start is at most this far ahead, and smaller workloads
    /// backfill only where they end before it or stay off those nodes
    /// (`gang_hold.rs`). 0 turns it off (Kueue's admission order).
    pub gang_reservation_horizon: Millis,
}

/// The default [`EngineConfig::finishing_grace`]: a batch Job whose pods succeeded is
/// completed by kube-controller-manager within seconds; a minute covers a busy one.
pub const DEFAULT_FINISHING_GRACE: Millis = 60_000;

/// The default [`EngineConfig::gang_reservation_horizon`]: off, as Kueue.
pub const DEFAULT_GANG_RESERVATION_HORIZON: Millis = 0;

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            fair_sharing: None,
            placement: crate::placement::Strategy::default(),
            preemption_min_runtime: 0,
            admission_fair_sharing: None,
            pods_ready: None,
            finishing_grace: DEFAULT_FINISHING_GRACE,
            gang_reservation_horizon: DEFAULT_GANG_RESERVATION_HORIZON,
        }
    }
}

/// Something that happened in the cluster, fed to [`Engine::apply`].
#[derive(Clone, Debug)]
pub enum Event {
    ResourceFlavorUpserted(api::ResourceFlavor),
    ResourceFlavorDeleted(String),
    ClusterQueueUpserted(api::ClusterQueue),
    ClusterQueueDeleted(String),
    /// An AdmissionCheck appeared or changed (only whether it is `Active` matters).
    AdmissionCheckUpserted(api::AdmissionCheck),
    AdmissionCheckDeleted(String),
    CohortUpserted(api::Cohort),
    CohortDeleted(String),
    LocalQueueUpserted(api::LocalQueue),
    LocalQueueDeleted {
        namespace: String,
        name: String,
    },
    WorkloadPriorityClassUpserted(api::WorkloadPriorityClass),
    WorkloadPriorityClassDeleted(String),
    /// scheduling.k8s.io PriorityClass: name, value, globalDefault.
    PriorityClassUpserted {
        name: String,
        value: i32,
        global_default: bool,
    },
    PriorityClassDeleted(String),
    NamespaceUpserted {
        name: String,
        labels: BTreeMap<String, String>,
    },
    NamespaceDeleted(String),
    /// A new or changed Workload. One that already carries `status.admission`
    /// is restored as admitted (restart recovery) without a decision.
    WorkloadUpserted(api::Workload),
    /// The workload's pods completed: its quota is released.
    WorkloadFinished(WorkloadKey),
    /// The workload object is gone: its quota is released.
    WorkloadDeleted(WorkloadKey),
    /// An evicted or preempted workload has stopped: its quota is released
    /// and it goes back to its queue.
    WorkloadEvicted(WorkloadKey),
    /// The admitted workload's job reported success (a batch Job's
    /// `SuccessCriteriaMet`) while its pods still terminate: its quota is about to be
    /// freed, so a preemptor waits for it instead of preempting it
    /// ([`EngineConfig::finishing_grace`]).
    WorkloadFinishing(WorkloadKey),
    /// The workload's pods became all ready (`true`) or stopped being so (`false`), as
    /// the shell saw them now (waitForPodsReady). The controller feeds the same through
    /// the Workload's `PodsReady` condition.
    PodsReady {
        workload: WorkloadKey,
        ready: bool,
    },
    /// An [`Decision::Admit`] whose status write did not land (the shell gave up on it):
    /// the quota and nodes it granted are released and the workload is queued again. A
    /// no-op for a workload that is not admitted, or whose admission already landed and
    /// is being evicted.
    AdmissionFailed(WorkloadKey),
    TopologyUpserted(api::Topology),
    TopologyDeleted(String),
    /// A Node appeared or changed (labels, allocatable, taints, readiness).
    NodeUpserted(Box<k8s_openapi::api::core::v1::Node>),
    NodeDeleted(String),
    /// What pods kuota does not manage use on a node, by resource.
    NodeExternalUsage {
        node: String,
        usage: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    },
    /// A Pod appeared or changed. One bound to a node, not finished and not asking for
    /// topology-aware scheduling counts as non-TAS usage on that node (the cluster's
    /// feed; the simulator sets node totals with `NodeExternalUsage` instead).
    PodUpserted(Box<k8s_openapi::api::core::v1::Pod>),
    PodDeleted {
        namespace: String,
        name: String,
    },
}

/// Why a workload was preempted; the strings are Kueue's `Preempted` condition reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PreemptionReason {
    InClusterQueue,
    InCohortReclamation,
    InCohortFairSharing,
    InCohortReclaimWhileBorrowing,
}

impl PreemptionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InClusterQueue => "InClusterQueue",
            Self::InCohortReclamation => "InCohortReclamation",
            Self::InCohortFairSharing => "InCohortFairSharing",
            Self::InCohortReclaimWhileBorrowing => "InCohortReclaimWhileBorrowing",
        }
    }
}

/// Why a workload is not admitted. Each maps to the reason a user sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PendingReason {
    /// It would fit the ClusterQueue's maximum, but not the quota unused right now.
    WaitingForQuota,
    /// It asks for more than the ClusterQueue could ever provide.
    ExceedsMaxQuota,
    /// No flavor matches its node selector, affinity or tolerations.
    NoMatchingFlavor,
    /// Its ClusterQueue is inactive, or the namespace is not allowed.
    Inadmissible,
    /// Its LocalQueue, or the LocalQueue's ClusterQueue, does not exist (Kueue's
    /// `Misconfigured`: nothing but a change of the objects can admit it).
    Misconfigured,
    /// It preempted other workloads and waits for them to stop.
    WaitingForPreemption,
    /// Its ClusterQueue or LocalQueue has a stopPolicy.
    Stopped,
    /// `spec.active` is false.
    Inactive,
    /// Quota fits, but waitForPodsReady's `blockAdmission` holds admissions back until
    /// every admitted workload's pods are ready.
    WaitingForPodsReady,
    /// Quota fits, but no set of topology domains has room for the gang.
    TopologyPlacementFailed,
}

impl PendingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WaitingForQuota => "WaitingForQuota",
            Self::ExceedsMaxQuota => "ExceedsMaxQuota",
            Self::NoMatchingFlavor => "NoMatchingFlavor",
            Self::Inadmissible => "Inadmissible",
            Self::Misconfigured => "Misconfigured",
            Self::WaitingForPreemption => "WaitingForPreemption",
            Self::Stopped => "Stopped",
            Self::Inactive => "Inactive",
            Self::WaitingForPodsReady => "WaitingForPodsReady",
            Self::TopologyPlacementFailed => "TopologyPlacementFailed",
        }
    }
}

/// What the engine decided in one cycle; the shell carries it out.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Reserve quota and admit the workload with this assignment.
    Admit {
        workload: WorkloadKey,
        /// Shared with the engine's own record of the admission (no copy per admission).
        admission: std::sync::Arc<api::Admission>,
        /// The AdmissionChecks this admission needs, sorted: with any, the shell reserves
        /// the quota (`QuotaReserved`) and adds each as `Pending`, and the workload is
        /// admitted once every one is `Ready`.
        checks: Vec<String>,
    },
    /// Evict `victim` so that `preemptor` can fit. The shell reports
    /// [`Event::WorkloadEvicted`] once the victim has stopped.
    Preempt {
        victim: WorkloadKey,
        preemptor: WorkloadKey,
        reason: PreemptionReason,
        message: String,
    },
    /// Evict an admitted workload for a reason other than preemption
    /// (stopPolicy HoldAndDrain, deactivation).
    Evict {
        workload: WorkloadKey,
        reason: String,
        message: String,
    },
    /// waitForPodsReady's `status.requeueState`: at a `PodsReadyTimeout` eviction the
    /// new count and when the backoff ends (`requeue_at`); when the backoff has ended,
    /// `requeue_at: None` (the shell clears `requeueAt` and sets `Requeued` to Kueue's
    /// `BackoffFinished`).
    RequeueState {
        workload: WorkloadKey,
        count: u32,
        requeue_at: Option<Millis>,
    },
    /// The workload stays pending; emitted only when reason or message changed.
    Pending {
        workload: WorkloadKey,
        reason: PendingReason,
        /// Shared: every workload of a shape parked in one cycle gets the same message,
        /// so a cycle that leaves thousands pending does not copy it thousands of times.
        message: std::sync::Arc<str>,
    },
}

/// Where a workload stands, for status writers, reports and tests.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadState {
    Pending {
        reason: PendingReason,
        message: String,
    },
    Admitted {
        admission: api::Admission,
    },
    /// Preempted or evicted, still holding quota until it stops.
    Evicting {
        admission: api::Admission,
    },
    Finished,
}

/// Quota use of one (flavor, resource) in a ClusterQueue, in the engine's unit for the
/// resource (`api::quantity::resource_value`: milli for cpu, whole units otherwise).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FlavorResourceUsage {
    pub total: i64,
    pub borrowed: i64,
}

/// A ClusterQueue's observable state.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ClusterQueueReport {
    pub pending: usize,
    pub admitted: usize,
    /// (flavor, resource) -> usage.
    pub usage: BTreeMap<(String, String), FlavorResourceUsage>,
    /// Dominant resource share (Kueue's fair-sharing weightedShare), 0 when not borrowing.
    pub weighted_share: i64,
    pub active: bool,
    /// Why it is inactive, in words (its pending workloads carry the same message).
    pub inactive_reason: Option<String>,
    /// Kueue's reason for its `Active=False` condition.
    pub inactive_condition_reason: Option<&'static str>,
    /// Kueue's whole `Active=False` message, when it is not "Can't admit new workloads: "
    /// followed by `inactive_reason`.
    pub inactive_condition_message: Option<String>,
}

/// A LocalQueue's observable state (see [`Engine::local_queue_reports`]).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LocalQueueReport {
    pub pending: usize,
    pub admitted: usize,
    /// (flavor, resource) -> quota its admitted workloads are charged, in the engine's
    /// unit for the resource.
    pub usage: BTreeMap<(String, String), i64>,
}

/// A hash map for keys the engine makes itself (interned ids, names it interns):
/// foldhash instead of SipHash, which showed in every scheduling-cycle profile.
///
/// For lookups only: nothing iterates one of these into a decision, a message or an
/// output order (where order matters the engine uses BTreeMap or sorts first). The seed
/// is fixed anyway, so even a slip would not make runs differ.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
/// The set counterpart of [`FastMap`], under the same lookup-only rule.
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;

// Internals stay inside the crate: the shells, tests/, benches/ and examples reach the
// engine only through `Engine`, its events, decisions, config and reports.
mod admission;
pub(crate) mod afs;
mod assign;
pub(crate) mod checks;
mod classical;
mod cycle;
mod domain_victims;
mod execution;
pub(crate) mod explain;
pub(crate) mod fair;
mod fair_preempt;
pub(crate) mod flavor;
mod gang_hold;
pub(crate) mod intern;
pub(crate) mod model;
mod nodes;
mod pending;
mod pods;
pub mod pods_ready;
pub(crate) mod preempt;
pub(crate) mod queue;
pub(crate) mod quota;
pub mod report;
mod reserve;
pub(crate) mod resources;
mod state;
mod topology;
mod tree;
mod workloads;

pub use afs::{AdmissionFairSharing, LocalQueueUsage, quantity_string as afs_quantity};
pub use gang_hold::GangReservationNotice;
pub use pending::{PendingLookupError, PendingWorkload};
pub use pods_ready::{PodsReadyConfig, Readiness};
pub use state::{Engine, EngineError, InvalidObject};

#[cfg(test)]
mod checks_tests;
#[cfg(test)]
mod tests;
