//! `Strategy::KueueBestFit`: Kueue's own domain search (pkg/cache/scheduler,
//! `findTopologyAssignment` with its default feature gates), reproduced step for
//! step so a user who switches from Kueue gets the same nodes.
//!
//! Kueue works on exact per-domain pod capacities: it sorts the domains of a level,
//! picks the level and domains that hold the pod set, then walks down level by level,
//! at each level filling the children of every chosen domain greedily from one
//! sorted list. Required and preferred requests use BestFit (most room first, but
//! the last domain is the smallest that holds the rest); unconstrained requests use
//! LeastFreeCapacity (TASProfileMixed, on by default since Kueue 0.15): the single
//! least-free domain that holds everything, else the least-free domains first.

use super::allocator::{Ctx, PlacementFailure};
use super::request::TopologyMode;
use std::cmp::Ordering;

/// Per-request working state: exact pod capacity and the pods assigned, per domain.
struct Search<'c, 'a> {
    ctx: &'c Ctx<'a>,
    cap: Vec<i64>,
    /// Label values from the top level down to the domain, for Kueue's tie break.
    path: Vec<Vec<String>>,
    least_free: bool,
}

impl Ctx<'_> {
    /// Kueue's placement for a required, preferred or unconstrained request without slices.
    pub(super) fn place_kueue(&self) -> Result<Vec<(u32, i32)>, PlacementFailure> {
        let n = i64::from(self.req.count);
        let unconstrained = matches!(self.req.mode, TopologyMode::Unconstrained);
        let mut s = Search {
            ctx: self,
            cap: vec![0; self.t.doms.len()],
            path: vec![vec![]; self.t.doms.len()],
            least_free: unconstrained,
        };
        s.fill(self.t.root);
        let node_level = self.t.node_level();
        // Kueue's lowest level: the hostname when it is a level, else the last label;
        // below that kuota's tree still has the nodes, which get the same descent.
        let lowest = self.t.levels.len() as i32 - 1;
        let (level, required) = match &self.req.mode {
            TopologyMode::Required(l) => (self.level(l)?, true),
            TopologyMode::Preferred(l) => (self.level(l)?, false),
            _ => (lowest, false),
        };
        let (mut level, mut chosen) = s.fit_level(level, required, n)?;
        let mut assigned = s.to_minimum(&chosen, n);
        while level < node_level {
            let mut children: Vec<u32> = chosen
                .iter()
                .flat_map(|&d| self.t.doms[d as usize].children.iter().copied())
                .collect();
            s.sort(&mut children);
            assigned = s.to_minimum(&children, n);
            chosen = assigned.iter().map(|(d, _)| *d).collect();
            level += 1;
        }
        Ok(assigned
            .into_iter()
            .filter(|(_, k)| *k > 0)
            .filter_map(|(d, k)| self.t.doms[d as usize].node.map(|n| (n, k as i32)))
            .collect())
    }
}

impl Search<'_, '_> {
    /// Exact capacities (pods per node, summed up the tree) and label paths
    /// (an inner domain's path is its first node's, cut at the domain's level).
    fn fill(&mut self, d: u32) -> i64 {
        let t = self.ctx.t;
        let dom = &t.doms[d as usize];
        let keep = (dom.level + 1).max(0) as usize;
        let (cap, mut path) = match dom.node.and_then(|i| self.ctx.inv.node(i).map(|n| (i, n))) {
            Some((idx, node)) => {
                let mut path: Vec<String> = t
                    .levels
                    .iter()
                    .map(|l| node.labels.get(l).cloned().unwrap_or_default())
                    .collect();
                if !t.hostname_level {
                    path.push(node.name.clone());
                }
                (self.ctx.node_fit_at(idx), path)
            }
            None if dom.node.is_some() => (0, vec![]),
            None => {
                let cap = dom.children.iter().map(|&c| self.fill(c)).sum();
                let first = dom.children.first().map(|&c| self.path[c as usize].clone());
                (cap, first.unwrap_or_default())
            }
        };
        path.truncate(keep);
        self.cap[d as usize] = cap;
        self.path[d as usize] = path;
        cap
    }

    /// Kueue's `sortedDomains`: most capacity first (least first for LeastFreeCapacity),
    /// then by label values.
    fn sort(&self, doms: &mut [u32]) {
        doms.sort_by(|&a, &b| {
            let (ca, cb) = (self.cap[a as usize], self.cap[b as usize]);
            let by_cap = if self.least_free {
                ca.cmp(&cb)
            } else {
                cb.cmp(&ca)
            };
            by_cap.then_with(|| self.order(a, b))
        });
    }

    fn order(&self, a: u32, b: u32) -> Ordering {
        self.path[a as usize].cmp(&self.path[b as usize])
    }

    /// Kueue's `findBestFitDomain`: the first of `doms` with the smallest capacity that
    /// still holds `want`; the first one when none does.
    fn best_fit(&self, doms: &[u32], want: i64) -> u32 {
        doms.iter()
            .copied()
            .filter(|&d| self.cap[d as usize] >= want)
            .min_by_key(|&d| self.cap[d as usize])
            .unwrap_or(doms[0])
    }

    /// Kueue's `findLevelWithFitDomains`: the level and domains to place at.
    fn fit_level(
        &self,
        level: i32,
        required: bool,
        n: i64,
    ) -> Result<(i32, Vec<u32>), PlacementFailure> {
        let t = self.ctx.t;
        let mut doms = t.by_level.get(level as usize).cloned().unwrap_or_default();
        if doms.is_empty() {
            return Err(self.fail(format!(
                "no topology domains at level: {}",
                t.levels.get(level as usize).map_or("", String::as_str)
            )));
        }
        self.sort(&mut doms);
        if self.least_free {
            if let Some(&d) = doms.iter().find(|&&d| self.cap[d as usize] >= n) {
                return Ok((level, vec![d]));
            }
        } else if self.cap[doms[0] as usize] >= n {
            return Ok((level, vec![self.best_fit(&doms, n)]));
        }
        if required {
            return Err(self.not_fit(self.cap[doms[0] as usize], n));
        }
        if level > 0 && !self.least_free {
            return self.fit_level(level - 1, required, n);
        }
        let picked = self.to_minimum(&doms, n);
        let fitted: i64 = picked.iter().map(|&(_, k)| k).sum();
        if fitted < n {
            return Err(self.not_fit(fitted, n));
        }
        Ok((level, picked.into_iter().map(|(d, _)| d).collect()))
    }

    /// Kueue's `updateCountsToMinimum`: fill `doms` in order, the last one best fit.
    fn to_minimum(&self, doms: &[u32], n: i64) -> Vec<(u32, i64)> {
        let mut out = vec![];
        let mut left = n;
        for i in 0..doms.len() {
            if left <= 0 {
                break;
            }
            let mut d = doms[i];
            if !self.least_free && self.cap[d as usize] >= left {
                d = self.best_fit(&doms[i..], left);
            }
            let k = self.cap[d as usize].min(left);
            out.push((d, k));
            left -= k;
        }
        out
    }

    fn fail(&self, what: String) -> PlacementFailure {
        PlacementFailure {
            message: format!("topology {:?} {what}", self.ctx.t.topology),
        }
    }

    /// Kueue's wording, which tooling and users of Kueue already know, with its count
    /// of the nodes left out and why.
    fn not_fit(&self, fit: i64, n: i64) -> PlacementFailure {
        let excluded = self.ctx.exclusions().suffix();
        if fit <= 0 {
            self.fail(format!("doesn't allow to fit any of {n} pod(s){excluded}"))
        } else {
            self.fail(format!(
                "allows to fit only {fit} out of {n} pod(s){excluded}"
            ))
        }
    }
}
