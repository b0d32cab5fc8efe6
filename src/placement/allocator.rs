//! The placement algorithms: required, preferred, unconstrained, sliced and
//! spread requests over a flavor's domain tree.
//!
//! Estimates come from the domain histograms (O(slots) per domain); the final
//! node choice is always checked exactly against every requested resource and
//! the node's taints, so an estimate can only cost a retry, never a double booking.

use super::filter::{Mismatch, NodeFilter};
use super::inventory::{Dom, Inventory, NodeRec, Tree};
use super::request::{PodSetPlacementRequest, TopologyMode};
use crate::api::selector;
use crate::names::{Names, ResourceId};

/// How domains and nodes are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strategy {
    /// Best fit, ties broken toward already-fragmented domains and partly used nodes.
    #[default]
    Kuota,
    /// Kueue's BestFit: the smallest domain that fits, no fragmentation scoring.
    KueueBestFit,
    /// The first domain (in name order) that fits.
    FirstFit,
}

/// Why a PodSet cannot be placed, for the user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlacementFailure {
    pub message: String,
}

/// Everything the search reads, borrowed for one request.
pub(super) struct Ctx<'a> {
    /// The pod's tolerations plus the flavor's, computed once per request.
    tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    pub(super) inv: &'a Inventory,
    pub(super) names: &'a Names,
    /// The pod set's nodeSelector and required affinity, less what the flavor's
    /// nodeLabels already guarantee.
    pub(super) filter: NodeFilter,
    /// Per node index, whether `filter` lets the pods on it: computed once per request
    /// so the search checks a flag per node, not labels. `None` when it excludes none
    /// of the flavor's nodes.
    allowed: Option<Vec<bool>>,
    /// Flavor nodes, and how many of them the nodeSelector and the affinity exclude.
    filtered_out: (usize, usize, usize),
    pub(super) t: &'a Tree,
    pub(super) req: &'a PodSetPlacementRequest,
    /// Index into `t.hist_res` of the binding histogram resource, if any.
    primary: Option<(usize, i64)>,
    strategy: Strategy,
    /// Count only allocatable minus external usage: "would it fit if no workload
    /// kuota placed were running" (Kueue's `simulateEmpty`).
    ignore_placed: bool,
}

impl Ctx<'_> {
    /// Pods that fit on node `idx`, checking the pod's node filter, every resource and taint.
    pub(super) fn node_fit_at(&self, idx: u32) -> i64 {
        if let Some(allowed) = &self.allowed
            && !allowed.get(idx as usize).copied().unwrap_or(false)
        {
            return 0;
        }
        self.inv.node(idx).map(|n| self.node_fit(n)).unwrap_or(0)
    }

    /// The first taint of the node that the pod and flavor tolerations do not tolerate.
    pub(super) fn untolerated<'n>(
        &self,
        n: &'n NodeRec,
    ) -> Option<&'n k8s_openapi::api::core::v1::Taint> {
        if n.taints.is_empty() {
            return None;
        }
        selector::tolerates_all(&n.taints, &self.tolerations)
    }

    /// Free amount of `r` on the node, as this request counts it.
    pub(super) fn free(&self, n: &NodeRec, r: ResourceId) -> i64 {
        if self.ignore_placed {
            n.free(r) + n.used.get(r as usize).copied().unwrap_or(0)
        } else {
            n.free(r)
        }
    }

    /// Pods that fit on one node, checking every resource and taint (not the node filter).
    fn node_fit(&self, n: &NodeRec) -> i64 {
        if self.untolerated(n).is_some() {
            return 0;
        }
        let mut fit = i64::MAX;
        for &(r, v) in &self.req.per_pod {
            if v <= 0 {
                continue;
            }
            fit = fit.min(self.free(n, r).max(0) / v);
        }
        if fit == i64::MAX {
            i64::from(self.req.count)
        } else {
            fit
        }
    }

    /// Estimated pods that fit in a domain: from the histogram of the binding resource,
    /// or an exact walk when the request has no histogram resource.
    fn est(&self, d: u32) -> i64 {
        let dom = &self.t.doms[d as usize];
        if let Some(n) = dom.node {
            return self.node_fit_at(n);
        }
        match self.primary {
            Some((h, per)) => dom.hists[h]
                .iter()
                .enumerate()
                .map(|(k, c)| i64::from(*c).saturating_mul(k as i64 / per))
                .sum(),
            None => dom.children.iter().map(|&c| self.est(c)).sum(),
        }
    }

    fn dom(&self, d: u32) -> &Dom {
        &self.t.doms[d as usize]
    }

    /// Fewest nodes that can hold `want` pods in a domain, filling the roomiest nodes
    /// first (from the histogram; 0 when the request has no histogram resource).
    fn nodes_needed(&self, d: u32, want: i64) -> i64 {
        let dom = self.dom(d);
        if dom.node.is_some() {
            return 1;
        }
        let Some((h, per)) = self.primary else {
            return 0;
        };
        let mut left = want;
        let mut used = 0;
        for (k, &count) in dom.hists[h].iter().enumerate().rev() {
            let cap = k as i64 / per;
            if cap == 0 || left <= 0 {
                break;
            }
            let take = ((left + cap - 1) / cap).min(i64::from(count));
            used += take;
            left -= take * cap;
        }
        used
    }

    /// Pods that fit on nodes that already run something: placing there breaks no
    /// whole free node. From the histogram, all buckets but the full-node one.
    fn partial_fit(&self, d: u32) -> i64 {
        let dom = self.dom(d);
        match (dom.node, self.primary) {
            (Some(_), _) => {
                if dom.whole_free > 0 {
                    0
                } else {
                    self.est(d)
                }
            }
            (None, Some((h, per))) => (self.est(d) - dom.whole_free_slots[h] / per).max(0),
            (None, None) => 0,
        }
    }

    /// Picks the next child to fill when `want` pods remain, from `cands` (domain, estimate).
    fn pick(&self, cands: &[(u32, i64)], want: i64) -> usize {
        match self.strategy {
            Strategy::FirstFit => 0,
            Strategy::KueueBestFit => {
                // Kueue: the smallest domain that holds all the rest (fewest nodes first);
                // otherwise the largest one.
                let fitting = cands
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, e))| *e >= want)
                    .min_by_key(|(i, (d, e))| (self.nodes_needed(*d, want), *e, *i));
                fitting
                    .map(|(i, _)| i)
                    .unwrap_or_else(|| largest(cands, |_| 0))
            }
            Strategy::Kuota => {
                // First, wherever the pods fit on nodes already running something, so no
                // whole free node is broken. Then nodes: best fit. Domains above nodes: the
                // fewest nodes (Kueue's rule for a gang), then domains already in use, then
                // topology order. Concentrating new work where work already runs, in a
                // stable order, keeps untouched racks and blocks whole for large gangs, and
                // work placed together tends to finish together. Ordering domains by free
                // capacity instead (best fit, Kueue's rule) scatters small jobs into the
                // holes of nearly free racks; the quality benchmark measured both
                // (docs/placement.md).
                let fitting = cands
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, e))| *e >= want)
                    .min_by_key(|(i, (d, e))| {
                        let dom = self.dom(*d);
                        let breaks_whole = self.partial_fit(*d) < want;
                        if dom.node.is_some() {
                            (breaks_whole, 0, false, *e, *i)
                        } else {
                            let untouched = dom.whole_free == dom.nodes;
                            (breaks_whole, self.nodes_needed(*d, want), untouched, 0, *i)
                        }
                    });
                fitting
                    .map(|(i, _)| i)
                    .unwrap_or_else(|| largest(cands, |d| self.dom(d).whole_free))
            }
        }
    }

    /// Places up to `want` pods in domain `d`, appending (node, count); returns how many.
    fn take(&self, d: u32, want: i64, out: &mut Vec<(u32, i32)>) -> i64 {
        if want <= 0 {
            return 0;
        }
        let dom = self.dom(d);
        if let Some(n) = dom.node {
            let k = self.node_fit_at(n).min(want);
            if k > 0 {
                out.push((n, k as i32));
            }
            return k;
        }
        let mut cands: Vec<(u32, i64)> = dom
            .children
            .iter()
            .map(|&c| (c, self.est(c)))
            .filter(|(_, e)| *e > 0)
            .collect();
        let mut left = want;
        while left > 0 && !cands.is_empty() {
            let i = self.pick(&cands, left);
            let (c, _) = cands.remove(i);
            left -= self.take(c, left, out);
        }
        want - left
    }

    /// Domains of `level` under `within` (the root when None).
    fn domains_at(&self, level: i32, within: u32) -> Vec<u32> {
        let mut out = vec![];
        let mut stack = vec![within];
        while let Some(d) = stack.pop() {
            let dom = self.dom(d);
            if dom.level == level {
                out.push(d);
            } else if dom.level < level {
                stack.extend(dom.children.iter().rev());
            }
        }
        out
    }

    /// Tries the domains of `level` (within `within`) best-first for `n` pods.
    fn place_in_one(&self, level: i32, within: u32, n: i64) -> Result<Vec<(u32, i32)>, i64> {
        let mut cands: Vec<(u32, i64)> = self
            .domains_at(level, within)
            .into_iter()
            .map(|d| (d, self.est(d)))
            .collect();
        let best_est = cands.iter().map(|(_, e)| *e).max().unwrap_or(0);
        cands.retain(|(_, e)| *e >= n);
        while !cands.is_empty() {
            let i = self.pick(&cands, n);
            let (d, _) = cands.remove(i);
            let mut out = vec![];
            if self.take(d, n, &mut out) == n {
                return Ok(out);
            }
        }
        Err(best_est)
    }

    pub(super) fn level(&self, label: &str) -> Result<i32, PlacementFailure> {
        self.t.level_index(label).ok_or_else(|| PlacementFailure {
            message: format!(
                "topology {} has no level {label:?} (levels: {})",
                self.t.topology,
                self.t.levels.join(", ")
            ),
        })
    }

    fn fail(&self, what: String) -> PlacementFailure {
        let mut message = format!("topology {:?}: {what}", self.t.topology);
        let (total, by_selector, by_affinity) = self.filtered_out;
        let mut parts = vec![];
        if by_selector > 0 {
            parts.push(format!("nodeSelector excludes {by_selector}"));
        }
        if by_affinity > 0 {
            parts.push(format!("required node affinity excludes {by_affinity}"));
        }
        if !parts.is_empty() {
            message.push_str(&format!(
                "; of the flavor's {total} node(s), the pod set's {}",
                parts.join(" and its ")
            ));
        }
        if !self.t.excluded.is_empty() {
            message.push_str(&format!(
                "; {} node(s) are not used because they lack topology labels (first: {})",
                self.t.excluded.len(),
                self.t.excluded[0]
            ));
        }
        PlacementFailure { message }
    }

    fn place(&self) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        let n = i64::from(self.req.count);
        if n == 0 {
            return Ok(vec![]);
        }
        if let Some((level, size)) = &self.req.slice {
            return self.place_slices(level, i64::from(*size));
        }
        if self.strategy == Strategy::KueueBestFit
            && !matches!(self.req.mode, TopologyMode::Spread { .. })
        {
            return self.place_kueue();
        }
        match &self.req.mode {
            TopologyMode::Required(label) => {
                let level = self.level(label)?;
                self.place_in_one(level, self.t.root, n).map_err(|best| {
                    let mut what =
                        format!("required {label}: allows to fit only {best} out of {n} pod(s)");
                    if let Some((h, per)) = self.primary {
                        let most = self
                            .domains_at(level, self.t.root)
                            .iter()
                            .map(|&d| {
                                self.dom(d).hists[h]
                                    .iter()
                                    .enumerate()
                                    .map(|(k, c)| k as i64 * i64::from(*c))
                                    .sum::<i64>()
                            })
                            .max()
                            .unwrap_or(0);
                        let rname = self.names.resource_name(self.t.hist_res[h]);
                        what.push_str(&format!(
                            "; the largest free {label} has {most} of the {} {rname} needed",
                            per.saturating_mul(n)
                        ));
                    }
                    self.fail(what)
                })
            }
            TopologyMode::Preferred(label) => {
                let mut level = self.level(label)?;
                while level >= 0 {
                    if let Ok(p) = self.place_in_one(level, self.t.root, n) {
                        return Ok(p);
                    }
                    level -= 1;
                }
                self.anywhere(n)
            }
            TopologyMode::Unconstrained => self.anywhere(n),
            TopologyMode::Spread { level, within } => {
                self.place_spread(level, within.as_deref(), n)
            }
        }
    }

    fn anywhere(&self, n: i64) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        let mut out = vec![];
        let got = self.take(self.t.root, n, &mut out);
        if got == n {
            Ok(out)
        } else {
            Err(self.fail(format!(
                "allows to fit only {got} out of {n} pod(s) in the whole topology"
            )))
        }
    }

    /// `n / size` slices, each within one domain of `level`, all within one domain of
    /// the required level when there is one.
    fn place_slices(&self, level: &str, size: i64) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        let n = i64::from(self.req.count);
        if size <= 0 || n % size != 0 {
            return Err(self.fail(format!(
                "pod count {n} is not a multiple of the slice size {size}"
            )));
        }
        let slices = n / size;
        let slice_level = self.level(level)?;
        let outer = match &self.req.mode {
            TopologyMode::Required(l) => {
                let lv = self.level(l)?;
                if lv > slice_level {
                    return Err(self.fail(format!(
                        "slice level {level} must not be above the required level {l}"
                    )));
                }
                self.domains_at(lv, self.t.root)
            }
            _ => vec![self.t.root],
        };
        let slice_fit = |d: u32| -> i64 {
            self.domains_at(slice_level, d)
                .iter()
                .map(|&c| self.est(c) / size)
                .sum()
        };
        let mut cands: Vec<(u32, i64)> = outer.iter().map(|&d| (d, slice_fit(d))).collect();
        let best = cands.iter().map(|(_, e)| *e).max().unwrap_or(0);
        cands.retain(|(_, e)| *e >= slices);
        while !cands.is_empty() {
            let i = self.pick(&cands, slices);
            let (d, _) = cands.remove(i);
            let mut inner: Vec<(u32, i64)> = self
                .domains_at(slice_level, d)
                .into_iter()
                .map(|c| (c, self.est(c) / size))
                .filter(|(_, e)| *e > 0)
                .collect();
            let mut out = vec![];
            let mut left = slices;
            while left > 0 && !inner.is_empty() {
                let i = self.pick(&inner, left);
                let (c, k) = inner.remove(i);
                let want = k.min(left);
                let mut part = vec![];
                let got = self.take(c, want * size, &mut part);
                // Only whole slices count; a partial slice would break the guarantee.
                let whole = got / size;
                if whole == want {
                    out.extend(part);
                    left -= want;
                } else if whole > 0 {
                    let mut part = vec![];
                    self.take(c, whole * size, &mut part);
                    out.extend(part);
                    left -= whole;
                }
            }
            if left == 0 {
                return Ok(out);
            }
        }
        Err(self.fail(format!(
            "allows to fit only {best} out of {slices} slice(s) of {size} pod(s) at level {level}"
        )))
    }

    /// One pod per domain of `level`, optionally all within one domain of `within`.
    fn place_spread(
        &self,
        level: &str,
        within: Option<&str>,
        n: i64,
    ) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        let lv = self.level(level)?;
        let outer = match within {
            Some(w) => {
                let wl = self.level(w)?;
                if wl >= lv {
                    return Err(self.fail(format!(
                        "spread level {level} must be below the required level {w}"
                    )));
                }
                self.domains_at(wl, self.t.root)
            }
            None => vec![self.t.root],
        };
        let usable = |d: u32| -> Vec<(u32, i64)> {
            self.domains_at(lv, d)
                .into_iter()
                .map(|c| (c, self.est(c)))
                .filter(|(_, e)| *e > 0)
                .collect()
        };
        let mut cands: Vec<(u32, i64)> =
            outer.iter().map(|&d| (d, usable(d).len() as i64)).collect();
        let best = cands.iter().map(|(_, e)| *e).max().unwrap_or(0);
        cands.retain(|(_, e)| *e >= n);
        while !cands.is_empty() {
            let i = self.pick(&cands, n);
            let (d, _) = cands.remove(i);
            let mut doms = usable(d);
            let mut out = vec![];
            let mut left = n;
            while left > 0 && !doms.is_empty() {
                // One pod each: prefer the emptiest-fitting domains so roomy ones stay whole.
                let i = self.pick(&doms, 1);
                let (c, _) = doms.remove(i);
                left -= self.take(c, 1, &mut out);
            }
            if left == 0 {
                return Ok(out);
            }
        }
        Err(self.fail(format!(
            "spread over {level}: only {best} {level} domain(s) have room for a pod, {n} needed"
        )))
    }
}

/// The largest candidate; ties go to the one with the smaller `tie` (then the first).
fn largest(cands: &[(u32, i64)], tie: impl Fn(u32) -> u32) -> usize {
    cands
        .iter()
        .enumerate()
        .max_by_key(|(i, (d, e))| (*e, std::cmp::Reverse(tie(*d)), std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
        .unwrap_or(0)
}

impl Inventory {
    /// Finds nodes for one PodSet on `flavor`'s tree without changing anything.
    /// Returns (node index, pod count) pairs.
    /// Trees must be current: call [`Inventory::ensure_trees`] after node or topology changes.
    pub fn find(
        &self,
        names: &Names,
        flavor: &str,
        req: &PodSetPlacementRequest,
        strategy: Strategy,
    ) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        self.find_with(names, flavor, req, strategy, true)
    }

    /// [`Inventory::find`] without the histograms: every estimate walks the nodes.
    /// Same answers, slower; the in-run baseline of the placement benchmark.
    pub fn find_exact(
        &self,
        names: &Names,
        flavor: &str,
        req: &PodSetPlacementRequest,
        strategy: Strategy,
    ) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        self.find_with(names, flavor, req, strategy, false)
    }

    /// Whether the PodSet could be placed if no workload kuota placed held any node
    /// (nodes, taints and external usage as they are). Decides Kueue's pending reason:
    /// `WaitingForQuota` when only other workloads are in the way, else
    /// `TopologyPlacementFailed`. Exact walk, no histograms (they count placed usage).
    pub fn fits_when_empty(
        &self,
        names: &Names,
        flavor: &str,
        req: &PodSetPlacementRequest,
        strategy: Strategy,
    ) -> bool {
        self.search(names, flavor, req, strategy, false, true)
            .is_ok()
    }

    fn find_with(
        &self,
        names: &Names,
        flavor: &str,
        req: &PodSetPlacementRequest,
        strategy: Strategy,
        aggregates: bool,
    ) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        self.search(names, flavor, req, strategy, aggregates, false)
    }

    fn search(
        &self,
        names: &Names,
        flavor: &str,
        req: &PodSetPlacementRequest,
        strategy: Strategy,
        aggregates: bool,
        ignore_placed: bool,
    ) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        let Some(t) = self.trees.get(flavor) else {
            return Err(PlacementFailure {
                message: self
                    .flavor_problem(flavor)
                    .unwrap_or_else(|| format!("ResourceFlavor {flavor} has no topology")),
            });
        };
        let primary = t
            .hist_res
            .iter()
            .enumerate()
            .filter_map(|(h, r)| {
                req.per_pod
                    .iter()
                    .find(|(pr, v)| pr == r && *v > 0)
                    .map(|(_, v)| (h, *v))
            })
            .max_by_key(|(h, v)| v.saturating_mul(1_000_000) / t.hist_max[*h].max(1))
            .filter(|_| aggregates);
        let mut tolerations = req.tolerations.clone();
        tolerations.extend(t.tolerations.iter().cloned());
        let filter = req.node_filter.narrowed_to(&t.node_labels);
        let (allowed, filtered_out) = self.allowed_nodes(t, &filter);
        // The histograms count every node of the flavor; with some of them filtered out
        // they would overstate the room, so the search walks the allowed nodes exactly.
        let primary = primary.filter(|_| allowed.is_none());
        let ctx = Ctx {
            tolerations,
            inv: self,
            names,
            filter,
            allowed,
            filtered_out,
            t,
            req,
            primary,
            strategy,
            ignore_placed,
        };
        ctx.place()
    }

    /// Which nodes of the tree `filter` lets a pod on (by node index), and how many it
    /// excludes (total, by nodeSelector, by affinity); `None` when it excludes none.
    pub(super) fn allowed_nodes(
        &self,
        t: &Tree,
        filter: &NodeFilter,
    ) -> (Option<Vec<bool>>, (usize, usize, usize)) {
        if filter.is_empty() {
            return (None, (0, 0, 0));
        }
        let mut allowed = vec![false; t.leaf_of.len()];
        let (mut total, mut by_selector, mut by_affinity) = (0, 0, 0);
        for (i, slot) in allowed.iter_mut().enumerate() {
            if t.leaf(i as u32).is_none() {
                continue;
            }
            let Some(n) = self.node(i as u32) else {
                continue;
            };
            total += 1;
            match filter.check(n) {
                Ok(()) => *slot = true,
                Err(Mismatch::NodeSelector) => by_selector += 1,
                Err(Mismatch::Affinity) => by_affinity += 1,
            }
        }
        let counts = (total, by_selector, by_affinity);
        if by_selector + by_affinity == 0 {
            (None, counts)
        } else {
            (Some(allowed), counts)
        }
    }

    /// Node name for an index (for encoding assignments).
    pub fn node_name(&self, idx: u32) -> &str {
        self.node(idx).map(|n| n.name.as_str()).unwrap_or("")
    }

    /// Label values of a node's domains at each topology level of `flavor`'s tree.
    pub fn node_path(&self, flavor: &str, idx: u32) -> Vec<String> {
        let (Some(t), Some(n)) = (self.trees.get(flavor), self.node(idx)) else {
            return vec![];
        };
        t.levels
            .iter()
            .map(|l| n.labels.get(l).cloned().unwrap_or_default())
            .collect()
    }

    /// Level labels of `flavor`'s topology.
    pub fn levels(&self, flavor: &str) -> Vec<String> {
        self.trees
            .get(flavor)
            .map(|t| t.levels.clone())
            .unwrap_or_default()
    }
}
