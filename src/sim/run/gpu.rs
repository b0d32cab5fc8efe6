//! GPU fragmentation over a run: free GPUs per node, and how many of them no pending
//! workload's pod could use (stranded).

use std::collections::{BTreeMap, HashMap};

use crate::api::quantity::resource_value;
use crate::engine::{Event, Millis};
use crate::sim::scenario::Plan;

/// The GPU resource whose fragmentation the report measures.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Free GPUs per node (Node allocatable minus the pods the engine placed
/// there, read from each admission's topology assignment) and the per-pod
/// GPU sizes of pending workloads, for the stranded-GPU measure: free GPUs on
/// nodes where not even one pod of any pending workload fits.
#[derive(Debug, Default)]
pub(super) struct GpuTrack {
    /// Lookup only; never iterated.
    pub(super) node_index: HashMap<String, usize>,
    pub(super) free: Vec<i64>,
    /// Free GPUs → number of nodes with exactly that much free.
    pub(super) hist: BTreeMap<i64, u64>,
    /// Per-pod GPUs of pending workloads → how many such workloads.
    pub(super) pending: BTreeMap<i64, u64>,
    pub(super) total: i64,
    pub(super) free_sum: i64,
    /// Values sampled at the end of the last batch, integrated until the next.
    pub(super) stranded: i64,
    pub(super) sampled_free: i64,
    pub(super) since: Millis,
    pub(super) stranded_area: i128,
    pub(super) free_area: i128,
    pub(super) peak: i64,
}

impl GpuTrack {
    /// Built from the scenario's Node objects; `None` without GPU nodes.
    pub(super) fn from_plan(plan: &Plan) -> Option<Self> {
        let mut t = Self::default();
        for (_, ev) in &plan.setup {
            let Event::NodeUpserted(node) = ev else {
                continue;
            };
            let gpus = node
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get(GPU_RESOURCE))
                .and_then(|q| resource_value(GPU_RESOURCE, q).ok())
                .unwrap_or(0);
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            if gpus <= 0 || t.node_index.contains_key(&name) {
                continue;
            }
            t.node_index.insert(name, t.free.len());
            t.free.push(gpus);
            *t.hist.entry(gpus).or_default() += 1;
            t.total += gpus;
        }
        t.free_sum = t.total;
        t.sampled_free = t.total;
        (t.total > 0).then_some(t)
    }

    pub(super) fn add_free(&mut self, node: usize, delta: i64) {
        let Some(f) = self.free.get_mut(node) else {
            return;
        };
        let old = *f;
        *f += delta;
        let new = *f;
        self.free_sum += delta;
        if let Some(n) = self.hist.get_mut(&old) {
            *n -= 1;
            if *n == 0 {
                self.hist.remove(&old);
            }
        }
        *self.hist.entry(new).or_default() += 1;
    }

    pub(super) fn pending_change(&mut self, per_pod: i64, add: bool) {
        if add {
            *self.pending.entry(per_pod).or_default() += 1;
        } else if let Some(n) = self.pending.get_mut(&per_pod) {
            *n -= 1;
            if *n == 0 {
                self.pending.remove(&per_pod);
            }
        }
    }

    /// Integrates the last sample up to `now`, then samples the current state.
    pub(super) fn sample(&mut self, now: Millis) {
        let dt = i128::from((now - self.since).max(0));
        self.stranded_area += i128::from(self.stranded) * dt;
        self.free_area += i128::from(self.sampled_free) * dt;
        self.since = now;
        self.stranded = match self.pending.keys().next() {
            // Free GPUs below the smallest pending pod: no pending pod fits there.
            Some(&min) => self
                .hist
                .range(1..min)
                .map(|(f, n)| f.saturating_mul(*n as i64))
                .sum(),
            None => 0,
        };
        self.sampled_free = self.free_sum;
        self.peak = self.peak.max(self.stranded);
    }
}

/// Smallest positive per-pod GPU request over a workload's pod sets.
pub(super) fn min_pod_gpu(object: &crate::api::Workload) -> Option<i64> {
    object
        .spec
        .pod_sets
        .iter()
        .filter_map(|ps| {
            let containers = ps.template.spec.as_ref()?.containers.as_slice();
            let per_pod: i64 = containers
                .iter()
                .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get(GPU_RESOURCE))
                .filter_map(|q| resource_value(GPU_RESOURCE, q).ok())
                .fold(0, i64::saturating_add);
            (per_pod > 0).then_some(per_pod)
        })
        .min()
}
