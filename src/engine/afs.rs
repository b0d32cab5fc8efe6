//! Admission fair sharing (Kueue's `AdmissionFairSharing` feature): inside a ClusterQueue
//! whose `admissionScope.admissionMode` is `UsageBasedAdmissionFairSharing`, pending
//! workloads are taken from the LocalQueue that consumed least, recently.
//!
//! Each LocalQueue keeps a decayed history of what its admitted workloads used
//! (Kueue's `status.fairSharing.admissionFairSharingStatus.consumedResources`). Every
//! `usageSamplingInterval` the history moves towards the current admitted usage by
//! `alpha = 1 - 0.5^(elapsed / usageHalfLifeTime)`; an admission settles at once, adding
//! its requests times `alpha(usageSamplingInterval)` (Kueue's entry penalty) so the next
//! pick in the same cycle already sees it. The ordering value is the history weighted by
//! `resourceWeights` (1 for unlisted resources) divided by the LocalQueue's
//! `fairSharing.weight`; a weight of 0 sorts last.
//!
//! Samplings are computed lazily: decay composes (`(1-alpha(a))(1-alpha(b)) =
//! 1-alpha(a+b)`), so catching up n missed samplings with the usage that held during them
//! is exact, and a sampling costs nothing until someone looks. Everything here is pure
//! arithmetic on the caller's time.

use std::collections::BTreeMap;

use super::model::ModelError;
use super::queue::{QueueKey, WlId};
use super::resources::{FrAmounts, Names};
use super::state::{CqId, Engine, EngineError, InvalidObject, WlState};
use super::{FastSet, Millis};
use crate::api;

/// Kueue's `admissionFairSharing` configuration, with its defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionFairSharing {
    /// `usageHalfLifeTime` in ms; 0 resets the history at every sampling (Kueue's rule).
    pub usage_half_life: Millis,
    /// `usageSamplingInterval` in ms (Kueue's default 5m); always > 0.
    pub usage_sampling_interval: Millis,
    /// `resourceWeights`: resource name -> weight; unlisted resources weigh 1.
    pub resource_weights: BTreeMap<String, f64>,
}

impl Default for AdmissionFairSharing {
    fn default() -> Self {
        Self {
            usage_half_life: 0,
            usage_sampling_interval: 5 * 60 * 1000,
            resource_weights: BTreeMap::new(),
        }
    }
}

/// A LocalQueue's decayed consumption, as its status reports it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LocalQueueUsage {
    /// Resource name -> amount in Kubernetes units (cpu in cores, memory in bytes).
    pub consumed: BTreeMap<String, f64>,
    /// When `consumed` was last sampled or settled.
    pub last_update: Millis,
}

/// Resource amounts by name, in Kubernetes units (Kueue compares `AsApproximateFloat64`).
pub(crate) type Amounts = BTreeMap<String, f64>;

/// One LocalQueue's ledger entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entry {
    pub usage: LocalQueueUsage,
    /// What its admitted workloads use right now: the target every sampling decays to.
    pub admitted: Amounts,
    /// The persisted status was merged in (once per engine, as Kueue's StatusAccounted).
    pub status_accounted: bool,
}

/// `1 - 0.5^(elapsed / half_life)`; 0 when the half-life is 0 (Kueue's calculateAlphaRate).
pub(crate) fn alpha(elapsed: Millis, half_life: Millis) -> f64 {
    if half_life <= 0 {
        return 0.0;
    }
    1.0 - 0.5f64.powf(elapsed.max(0) as f64 / half_life as f64)
}

/// `old * (1 - alpha) + new * alpha`, over the union of resources.
fn decay(old: &Amounts, new: &Amounts, a: f64) -> Amounts {
    let mut out: Amounts = old
        .iter()
        .map(|(r, v)| (r.clone(), v * (1.0 - a)))
        .collect();
    for (r, v) in new {
        *out.entry(r.clone()).or_default() += v * a;
    }
    out
}

fn add(into: &mut Amounts, amounts: &Amounts, sign: f64) {
    for (r, v) in amounts {
        let e = into.entry(r.clone()).or_default();
        *e += sign * v;
        // Subtraction must not leave float dust that keeps a sampling "due" forever.
        if e.abs() < 1e-9 {
            into.remove(r);
        }
    }
}

impl Entry {
    pub(crate) fn new(now: Millis) -> Self {
        Self {
            usage: LocalQueueUsage {
                consumed: Amounts::new(),
                last_update: now,
            },
            ..Self::default()
        }
    }

    /// Applies the samplings due by `now`, each with the admitted usage that held since
    /// the previous one (the caller calls this before that usage changes).
    pub(crate) fn catch_up(&mut self, now: Millis, cfg: &AdmissionFairSharing) {
        let interval = cfg.usage_sampling_interval.max(1);
        let due = (now - self.usage.last_update) / interval;
        if due <= 0 {
            return;
        }
        let elapsed = due * interval;
        if cfg.usage_half_life == 0 {
            self.usage.consumed.clear();
        } else {
            let a = alpha(elapsed, cfg.usage_half_life);
            self.usage.consumed = decay(&self.usage.consumed, &self.admitted, a);
        }
        self.usage.last_update += elapsed;
    }

    /// A workload of this LocalQueue was admitted at `now` in a ClusterQueue that uses
    /// admission fair sharing: Kueue pushes its entry penalty and settles it into the
    /// history as soon as the admission lands, sampling the new admitted usage.
    pub(crate) fn settle(&mut self, now: Millis, cfg: &AdmissionFairSharing, usage: &Amounts) {
        self.catch_up(now, cfg);
        add(&mut self.admitted, usage, 1.0);
        let elapsed = now - self.usage.last_update;
        let mut consumed = if cfg.usage_half_life == 0 {
            self.usage.consumed.clone()
        } else {
            decay(
                &self.usage.consumed,
                &self.admitted,
                alpha(elapsed, cfg.usage_half_life),
            )
        };
        let penalty = alpha(cfg.usage_sampling_interval, cfg.usage_half_life);
        for (r, v) in usage {
            *consumed.entry(r.clone()).or_default() += v * penalty;
        }
        self.usage.consumed = consumed;
        self.usage.last_update = self.usage.last_update.max(now);
    }

    /// Admitted usage that the next samplings decay towards: +1 admitted or restored,
    /// -1 released.
    pub(crate) fn charge(
        &mut self,
        now: Millis,
        cfg: &AdmissionFairSharing,
        usage: &Amounts,
        sign: f64,
    ) {
        self.catch_up(now, cfg);
        add(&mut self.admitted, usage, sign);
    }

    /// An admission that never landed: its entry penalty comes off again (Kueue's
    /// SubPenalty on a rollback), or retried admissions would pile penalties up.
    pub(crate) fn rollback(&mut self, cfg: &AdmissionFairSharing, usage: &Amounts) {
        let penalty = alpha(cfg.usage_sampling_interval, cfg.usage_half_life);
        for (r, v) in usage {
            if let Some(c) = self.usage.consumed.get_mut(r) {
                *c = (*c - v * penalty).max(0.0);
            }
        }
    }

    /// Merges the history a LocalQueue's status carries (after a restart), once.
    pub(crate) fn seed(&mut self, status: &LocalQueueUsage) {
        if self.status_accounted {
            return;
        }
        self.status_accounted = true;
        add(&mut self.usage.consumed, &status.consumed, 1.0);
    }

    /// Whether a sampling would change nothing: the history already equals the usage.
    pub(crate) fn converged(&self) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0);
        self.usage
            .consumed
            .iter()
            .all(|(r, v)| close(*v, self.admitted.get(r).copied().unwrap_or(0.0)))
            && self
                .admitted
                .iter()
                .all(|(r, v)| close(*v, self.usage.consumed.get(r).copied().unwrap_or(0.0)))
    }
}

/// Kueue's CalculateUsage: the weighted history over the LocalQueue's weight, resources
/// in name order; a weight of 0 or less is infinitely used (its queue goes last).
pub(crate) fn ordering_usage(
    consumed: &Amounts,
    cfg: &AdmissionFairSharing,
    lq_weight: f64,
) -> f64 {
    if lq_weight <= 0.0 {
        return f64::INFINITY;
    }
    let total: f64 = consumed
        .iter()
        .map(|(r, v)| cfg.resource_weights.get(r).copied().unwrap_or(1.0) * v)
        .sum();
    total / lq_weight
}

/// A workload's usage by resource name in Kubernetes units, from its engine amounts
/// (cpu is kept in milli-cores by the engine).
pub(crate) fn by_resource(names: &Names, usage: &FrAmounts) -> Amounts {
    let mut out = Amounts::new();
    for &(fr, v) in usage {
        let (_, r) = names.fr_parts(fr);
        let name = names.resource_name(r);
        let scale = if name == crate::api::quantity::MILLI_RESOURCE {
            1000.0
        } else {
            1.0
        };
        *out.entry(name.to_string()).or_default() += v as f64 / scale;
    }
    out
}

/// Formats a consumed amount as a Kubernetes quantity, rounded down to milli-units as
/// Kueue's MulByFloat rounds: `8`, `1500m`.
pub fn quantity_string(v: f64) -> String {
    let milli = (v * 1000.0).floor().clamp(0.0, i64::MAX as f64) as i64;
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// How an admitted workload's usage reaches its LocalQueue's ledger entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charge {
    /// Admitted by a cycle: settles Kueue's entry penalty in a usage-based ClusterQueue.
    Admit,
    /// Restored as admitted (restart): counts as admitted usage, no penalty.
    Restore,
    /// Finished, evicted or never landed.
    Release,
}

/// A ClusterQueue's pass through its heads in LocalQueue-usage order: which workloads
/// the pass has already looked at, and how many LocalQueues feed the ClusterQueue (a
/// scan can stop once every one of them has its candidate).
pub(crate) struct Cursor {
    seen: FastSet<WlId>,
    local_queues: usize,
}

impl Engine {
    /// Whether ClusterQueue `c` orders its heads by LocalQueue usage.
    pub(crate) fn afs_on(&self, c: CqId) -> bool {
        self.config.admission_fair_sharing.is_some() && self.cqs[c as usize].spec.usage_based_afs
    }

    /// A cursor for one pass over `c`, when it uses admission fair sharing.
    pub(crate) fn afs_cursor(&self, c: CqId) -> Option<Cursor> {
        if !self.afs_on(c) {
            return None;
        }
        let name = &self.cqs[c as usize].spec.name;
        let local_queues = self
            .local_queues
            .values()
            .filter(|lq| lq.cluster_queue == *name)
            .count();
        Some(Cursor {
            seen: FastSet::default(),
            local_queues,
        })
    }

    /// Kueue's queue order under admission fair sharing: the LocalQueue with the lowest
    /// weighted usage first, then priority, creation time and arrival (the plain order).
    /// Each LocalQueue's candidate is its first workload in plain order that this pass
    /// has not looked at yet.
    pub(crate) fn afs_next(&self, c: CqId, cursor: &mut Cursor) -> Option<QueueKey> {
        let cfg = self.config.admission_fair_sharing.as_ref()?;
        let mut candidates: Vec<(&str, &str)> = Vec::new();
        let mut best: Option<(f64, QueueKey)> = None;
        for key in self.cqs[c as usize].queue.active() {
            if cursor.seen.contains(&key.3) {
                continue;
            }
            let spec = &self.wl(key.3).spec;
            let lq = (&*spec.key.namespace, spec.queue_name.as_str());
            if candidates.contains(&lq) {
                continue;
            }
            candidates.push(lq);
            let usage = self.lq_ordering_usage(lq.0, lq.1, cfg);
            if best.is_none_or(|(b, _)| usage < b) {
                best = Some((usage, *key));
            }
            if candidates.len() >= cursor.local_queues {
                break;
            }
        }
        let (_, key) = best?;
        cursor.seen.insert(key.3);
        Some(key)
    }

    pub(crate) fn lq_ordering_usage(
        &self,
        ns: &str,
        name: &str,
        cfg: &AdmissionFairSharing,
    ) -> f64 {
        let key = (ns.to_string(), name.to_string());
        // A LocalQueue that is gone weighs 1, as Kueue's ResolveLQWeight falls back.
        let weight = self.local_queues.get(&key).map_or(1.0, |lq| lq.weight);
        let empty = Amounts::new();
        let consumed = self.afs.get(&key).map_or(&empty, |e| &e.usage.consumed);
        ordering_usage(consumed, cfg, weight)
    }

    /// Records what workload `id` (admitted with `usage`) does to its LocalQueue's history.
    pub(crate) fn afs_charge(&mut self, id: WlId, usage: &FrAmounts, how: Charge) {
        let Some(cfg) = self.config.admission_fair_sharing.clone() else {
            return;
        };
        let amounts = by_resource(&self.names, usage);
        let settle = match (how, &self.wl(id).state) {
            (Charge::Admit, WlState::Admitted(a)) => self.cqs[a.cq as usize].spec.usage_based_afs,
            _ => false,
        };
        let spec = &self.wl(id).spec;
        let key = (spec.key.namespace.to_string(), spec.queue_name.clone());
        let now = self.now;
        let entry = self.afs.entry(key).or_insert_with(|| Entry::new(now));
        match how {
            _ if settle => entry.settle(now, &cfg, &amounts),
            Charge::Release => entry.charge(now, &cfg, &amounts, -1.0),
            Charge::Admit | Charge::Restore => entry.charge(now, &cfg, &amounts, 1.0),
        }
    }

    /// Takes back the entry penalty of admitted workload `id`, whose admission never
    /// landed (the caller releases its usage next).
    pub(crate) fn afs_rollback(&mut self, id: WlId) {
        let Some(cfg) = self.config.admission_fair_sharing.clone() else {
            return;
        };
        let WlState::Admitted(a) = &self.wl(id).state else {
            return;
        };
        if !self.cqs[a.cq as usize].spec.usage_based_afs {
            return;
        }
        let amounts = by_resource(&self.names, &a.usage);
        let spec = &self.wl(id).spec;
        let key = (spec.key.namespace.to_string(), spec.queue_name.clone());
        if let Some(e) = self.afs.get_mut(&key) {
            e.rollback(&cfg, &amounts);
        }
    }

    /// Brings every LocalQueue's history up to `now` before a cycle compares them.
    pub(crate) fn afs_catch_up(&mut self, now: Millis) {
        let Some(cfg) = self.config.admission_fair_sharing.as_ref() else {
            return;
        };
        for e in self.afs.values_mut() {
            e.catch_up(now, cfg);
        }
    }

    /// Merges a LocalQueue's persisted history (`status.fairSharing.
    /// admissionFairSharingStatus.consumedResources`) once, so a restart keeps fairness.
    pub(crate) fn afs_seed(
        &mut self,
        key: &(String, String),
        lq: &api::LocalQueue,
    ) -> Result<(), EngineError> {
        if self.config.admission_fair_sharing.is_none() {
            return Ok(());
        }
        let Some(status) = lq
            .status
            .as_ref()
            .and_then(|s| s.fair_sharing.as_ref())
            .and_then(|f| f.admission_fair_sharing_status.as_ref())
        else {
            return Ok(());
        };
        let mut consumed = Amounts::new();
        for (r, q) in &status.consumed_resources {
            let milli =
                crate::api::quantity::parse_milli(q).map_err(|source| EngineError::Invalid {
                    kind: "LocalQueue",
                    name: format!("{}/{}", key.0, key.1),
                    source: InvalidObject::Model(ModelError::Quantity {
                        field: format!(
                            "status.fairSharing.admissionFairSharingStatus.consumedResources[{r}]"
                        ),
                        source,
                    }),
                })?;
            consumed.insert(r.clone(), milli as f64 / 1000.0);
        }
        let now = self.now;
        self.afs
            .entry(key.clone())
            .or_insert_with(|| Entry::new(now))
            .seed(&LocalQueueUsage {
                consumed,
                last_update: now,
            });
        Ok(())
    }

    /// The next sampling that could change which head a ClusterQueue takes: only for
    /// usage-based ClusterQueues with waiting workloads from two or more LocalQueues, and
    /// only for those LocalQueues whose history has not yet reached their usage.
    pub(crate) fn afs_wakeup(&self) -> Option<Millis> {
        let cfg = self.config.admission_fair_sharing.as_ref()?;
        let mut next: Option<Millis> = None;
        for cq in &self.cqs {
            if cq.deleted || !cq.spec.usage_based_afs || !cq.queue.has_active() {
                continue;
            }
            let mut lqs: Vec<(&str, &str)> = Vec::new();
            for key in cq.queue.active() {
                let spec = &self.wl(key.3).spec;
                let lq = (&*spec.key.namespace, spec.queue_name.as_str());
                if !lqs.contains(&lq) {
                    lqs.push(lq);
                }
            }
            if lqs.len() < 2 {
                continue;
            }
            for (ns, name) in lqs {
                let Some(e) = self.afs.get(&(ns.to_string(), name.to_string())) else {
                    continue;
                };
                if e.converged() {
                    continue;
                }
                let due = e.usage.last_update + cfg.usage_sampling_interval.max(1);
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        next
    }

    /// A LocalQueue's decayed consumption as of the engine's latest time, for its status;
    /// `None` when admission fair sharing is off or the LocalQueue has no history yet.
    pub fn local_queue_usage(&self, namespace: &str, name: &str) -> Option<LocalQueueUsage> {
        let cfg = self.config.admission_fair_sharing.as_ref()?;
        let mut e = self
            .afs
            .get(&(namespace.to_string(), name.to_string()))?
            .clone();
        e.catch_up(self.now, cfg);
        Some(e.usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(half_life: Millis, interval: Millis) -> AdmissionFairSharing {
        AdmissionFairSharing {
            usage_half_life: half_life,
            usage_sampling_interval: interval,
            resource_weights: BTreeMap::new(),
        }
    }

    fn cpu(v: f64) -> Amounts {
        Amounts::from([("cpu".to_string(), v)])
    }

    #[test]
    fn history_halves_every_half_life_once_the_usage_is_gone() {
        let c = cfg(10_000, 1_000);
        let mut e = Entry::new(0);
        e.seed(&LocalQueueUsage {
            consumed: cpu(8.0),
            last_update: 0,
        });
        e.catch_up(10_000, &c);
        assert!((e.usage.consumed["cpu"] - 4.0).abs() < 1e-9);
        e.catch_up(20_000, &c);
        assert!((e.usage.consumed["cpu"] - 2.0).abs() < 1e-9);
        assert_eq!(e.usage.last_update, 20_000);
    }

    #[test]
    fn history_moves_only_at_sampling_points() {
        let c = cfg(10_000, 5_000);
        let mut e = Entry::new(0);
        e.charge(0, &c, &cpu(4.0), 1.0);
        // Before the first sampling nothing has been consumed yet.
        e.catch_up(4_999, &c);
        assert!(e.usage.consumed.is_empty());
        e.catch_up(5_000, &c);
        let one = 4.0 * alpha(5_000, 10_000);
        assert!((e.usage.consumed["cpu"] - one).abs() < 1e-9);
        // Catching up two samplings at once equals taking them one by one.
        let mut stepwise = e.clone();
        stepwise.catch_up(10_000, &c);
        stepwise.catch_up(15_000, &c);
        e.catch_up(15_000, &c);
        assert!((e.usage.consumed["cpu"] - stepwise.usage.consumed["cpu"]).abs() < 1e-9);
    }

    #[test]
    fn an_admission_settles_its_entry_penalty_at_once() {
        let c = cfg(10_000, 1_000);
        let mut e = Entry::new(0);
        e.settle(0, &c, &cpu(8.0));
        // alpha(1s, 10s) of the request, as Kueue's CalculateEntryPenalty.
        let penalty = 8.0 * (1.0 - 0.5f64.powf(0.1));
        assert!((e.usage.consumed["cpu"] - penalty).abs() < 1e-9);
        assert_eq!(e.admitted, cpu(8.0));
        // Released: the history decays towards nothing.
        e.charge(3_000, &c, &cpu(8.0), -1.0);
        assert!(e.admitted.is_empty());
        let before = e.usage.consumed["cpu"];
        e.catch_up(13_000, &c);
        assert!(e.usage.consumed["cpu"] < before);
    }

    #[test]
    fn a_zero_half_life_forgets_at_every_sampling() {
        let c = cfg(0, 1_000);
        let mut e = Entry::new(0);
        e.settle(0, &c, &cpu(8.0));
        assert!(e.usage.consumed.values().all(|v| *v == 0.0));
        e.seed(&LocalQueueUsage {
            consumed: cpu(3.0),
            last_update: 0,
        });
        e.catch_up(1_000, &c);
        assert!(e.usage.consumed.is_empty());
    }

    #[test]
    fn ordering_weighs_resources_and_divides_by_the_queue_weight() {
        let mut c = cfg(10_000, 1_000);
        c.resource_weights.insert("nvidia.com/gpu".into(), 10.0);
        let used = Amounts::from([
            ("cpu".to_string(), 2.0),
            ("nvidia.com/gpu".to_string(), 1.0),
        ]);
        assert_eq!(ordering_usage(&used, &c, 1.0), 12.0);
        assert_eq!(ordering_usage(&used, &c, 2.0), 6.0);
        assert_eq!(ordering_usage(&Amounts::new(), &c, 0.0), f64::INFINITY);
    }

    #[test]
    fn status_is_merged_once() {
        let mut e = Entry::new(0);
        let s = LocalQueueUsage {
            consumed: cpu(5.0),
            last_update: 0,
        };
        e.seed(&s);
        e.seed(&s);
        assert_eq!(e.usage.consumed, cpu(5.0));
    }

    #[test]
    fn quantities_round_down_to_milli() {
        assert_eq!(quantity_string(8.0), "8");
        assert_eq!(quantity_string(1.5), "1500m");
        assert_eq!(quantity_string(0.0718), "71m");
        assert_eq!(quantity_string(-1.0), "0");
    }
}
