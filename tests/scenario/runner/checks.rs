//! What the runner checks: a step's `expect` against the engine's state, and after
//! every cycle the invariants any scheduling must keep (topology encoding, node capacity).

use super::{Runner, Want, amount};
use crate::scenario::{AdmittedFields, Expect, OneOrMany, Usage};
use kuota::api;
use kuota::engine::{WorkloadKey, WorkloadState};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

impl Runner<'_> {
    /// Checks one `expect` step; an exact one (not `partial`) also flags what it leaves out.
    pub(super) fn check(&mut self, exp: &Expect, out: &mut Vec<String>) {
        let exact = !exp.partial;
        self.check_states(exp, exact, out);
        self.check_finished(exp, out);
        // Decisions are counted from one expect to the next, whether this one lists them or not.
        let preempted = std::mem::take(&mut self.preempted);
        if exp.preempted.is_some() || exact {
            self.check_preempted(exp, &preempted, out);
        }
        let evicted = std::mem::take(&mut self.evicted);
        if exp.evicted.is_some() || exact {
            self.check_evicted(exp, &evicted, out);
        }
        for (cq, want) in exp.usage.iter().flatten() {
            self.check_usage(cq, want, exact, out);
        }
    }

    /// What the expectation wants of each workload it lists as admitted, pending or evicting.
    fn wants<'e>(&self, exp: &'e Expect) -> BTreeMap<WorkloadKey, Want<'e>> {
        let mut wants = BTreeMap::new();
        for (k, v) in exp.admitted.iter().flatten() {
            wants.insert(self.key(k), Want::Admitted(&v.0));
        }
        for (k, v) in exp.pending.iter().flatten() {
            wants.insert(self.key(k), Want::Pending(&v.0));
        }
        for k in exp.evicting.iter().flatten() {
            wants.insert(self.key(k), Want::Evicting);
        }
        wants
    }

    /// The `admitted`, `pending` and `evicting` lists against every known workload's state.
    fn check_states(&self, exp: &Expect, exact: bool, out: &mut Vec<String>) {
        let wants = self.wants(exp);
        for k in self
            .workloads
            .iter()
            .chain(wants.keys())
            .collect::<BTreeSet<_>>()
        {
            let state = self.state(k);
            let (want, got) = match (wants.get(k), &state) {
                (Some(w), s) => {
                    let placed = match w {
                        Want::Admitted(a) => self.got_placement(a, k),
                        _ => String::new(),
                    };
                    (render_want(w), render_got(w, s.as_ref(), &placed))
                }
                // Unlisted: fine unless its state is one the expectation lists exactly.
                (None, Some(s)) if exact => {
                    let listed = match s {
                        WorkloadState::Admitted { .. } => exp.admitted.is_some(),
                        WorkloadState::Pending { .. } => exp.pending.is_some(),
                        WorkloadState::Evicting { .. } => exp.evicting.is_some(),
                        WorkloadState::Finished => false,
                    };
                    if !listed {
                        continue;
                    }
                    ("(not listed)".to_string(), self.full(k, Some(s)))
                }
                _ => continue,
            };
            if want != got {
                let full = self.full(k, state.as_ref());
                let ctx = if full != got {
                    format!("   [{full}]")
                } else {
                    String::new()
                };
                out.push(format!(
                    "    {}:\n    - {want}\n    + {got}{ctx}",
                    self.show(k)
                ));
            }
        }
    }

    /// Every workload the `finished` list names has finished.
    fn check_finished(&self, exp: &Expect, out: &mut Vec<String>) {
        for k in exp.finished.iter().flatten().map(|k| self.key(k)) {
            let state = self.state(&k);
            if state != Some(WorkloadState::Finished) {
                out.push(format!(
                    "    {}:\n    - finished\n    + {}",
                    self.show(&k),
                    render_state(state.as_ref())
                ));
            }
        }
    }

    /// The `preempted` list (with reasons where given) against the Preempt decisions since
    /// the previous expect.
    fn check_preempted(
        &self,
        exp: &Expect,
        preempted: &BTreeMap<WorkloadKey, String>,
        out: &mut Vec<String>,
    ) {
        let want: BTreeMap<WorkloadKey, &Option<String>> = exp
            .preempted
            .iter()
            .flat_map(|p| &p.0)
            .map(|(k, r)| (self.key(k), r))
            .collect();
        for k in want.keys().chain(preempted.keys()).collect::<BTreeSet<_>>() {
            let got = preempted
                .get(k)
                .map(|r| format!("preempted ({r})"))
                .unwrap_or("not preempted".into());
            let expected = match want.get(k) {
                None => "not preempted".to_string(),
                Some(Some(r)) => format!("preempted ({r})"),
                Some(None) if preempted.contains_key(k) => got.clone(),
                Some(None) => "preempted".into(),
            };
            if got != expected {
                out.push(format!(
                    "    {}:\n    - {expected}\n    + {got}",
                    self.show(k)
                ));
            }
        }
    }

    /// The `evicted` list against the Evict decisions since the previous expect.
    fn check_evicted(&self, exp: &Expect, evicted: &BTreeSet<WorkloadKey>, out: &mut Vec<String>) {
        let want: BTreeSet<WorkloadKey> =
            exp.evicted.iter().flatten().map(|k| self.key(k)).collect();
        for k in want.symmetric_difference(evicted) {
            let (e, g) = if want.contains(k) {
                ("evicted", "not evicted")
            } else {
                ("not evicted", "evicted")
            };
            out.push(format!("    {}:\n    - {e}\n    + {g}", self.show(k)));
        }
    }

    /// The full state, with the nodes of every TAS pod set.
    fn full(&self, k: &WorkloadKey, s: Option<&WorkloadState>) -> String {
        let mut out = render_state(s);
        for ps in self.placed(k) {
            let _ = write!(out, " nodes {}{}", ps.name, render_nodes(&ps.nodes));
        }
        out
    }

    /// The actual nodes and domains of the pod sets `a` lists, as `render_want` writes them.
    fn got_placement(&self, a: &AdmittedFields, k: &WorkloadKey) -> String {
        let placed = self.placed(k);
        let find = |ps: &str| placed.iter().find(|p| p.name == ps);
        let mut s = String::new();
        for ps in a.nodes.iter().flatten().map(|(ps, _)| ps) {
            let nodes = find(ps)
                .map(|p| render_nodes(&p.nodes))
                .unwrap_or("<not placed>".into());
            let _ = write!(s, " nodes {ps}{nodes}");
        }
        for (ps, levels) in a.domains.iter().flatten() {
            for level in levels.keys() {
                let values: BTreeSet<String> = find(ps)
                    .map(|p| {
                        p.nodes
                            .keys()
                            .map(|n| {
                                self.nodes
                                    .get(n)
                                    .and_then(|i| i.labels.get(level))
                                    .cloned()
                                    .unwrap_or_else(|| format!("<{n} has no {level}>"))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let _ = write!(s, " domains {ps}{{{level}={values:?}}}");
            }
        }
        s
    }

    /// One ClusterQueue's `usage` entry; an exact expect also wants every unlisted pair unused.
    fn check_usage(
        &self,
        cq: &str,
        want: &BTreeMap<String, Usage>,
        exact: bool,
        out: &mut Vec<String>,
    ) {
        let Some(report) = self.engine.cluster_queue_report(cq) else {
            return out.push(format!(
                "    usage {cq}:\n    - a ClusterQueue\n    + no such ClusterQueue"
            ));
        };
        let mut keys: BTreeSet<String> = want.keys().cloned().collect();
        if exact {
            keys.extend(
                report
                    .usage
                    .iter()
                    .filter(|(_, u)| u.total != 0)
                    .map(|((f, r), _)| format!("{f}/{r}")),
            );
        }
        for fr in keys {
            let Some((f, r)) = fr.split_once('/') else {
                out.push(format!(
                    "    usage {cq}: key `{fr}` must be flavor/resource"
                ));
                continue;
            };
            let got = report
                .usage
                .get(&(f.to_string(), r.to_string()))
                .cloned()
                .unwrap_or_default();
            let w = want.get(&fr).map(|u| &u.0);
            let parse = |v: Option<&serde_norway::Value>| v.map(|v| amount(r, v)).transpose();
            let (total, borrowed) = match (
                parse(w.and_then(|w| w.total.as_ref())),
                parse(w.and_then(|w| w.borrowed.as_ref())),
            ) {
                // An unlisted pair must be unused.
                (Ok(t), Ok(b)) => (t.or(w.is_none().then_some(0)), b),
                (Err(e), _) | (_, Err(e)) => {
                    out.push(format!("    usage {cq} {fr}: {e}"));
                    continue;
                }
            };
            if total.is_some_and(|t| t != got.total) || borrowed.is_some_and(|b| b != got.borrowed)
            {
                let q = |v: Option<i64>| {
                    v.map(|v| api::quantity::resource_quantity_string(r, v))
                        .unwrap_or_else(|| "*".into())
                };
                let expected = if w.is_none() {
                    "unused (not listed)".into()
                } else {
                    format!("total {} borrowed {}", q(total), q(borrowed))
                };
                let (t, b) = (q(Some(got.total)), q(Some(got.borrowed)));
                out.push(format!(
                    "    usage {cq} {fr}:\n    - {expected}\n    + total {t} borrowed {b}"
                ));
            }
        }
    }

    /// A new admission's `topologyAssignment` must decode to the engine's placement: per
    /// domain of its levels (the hostname only, or every level), the same pod counts.
    pub(super) fn check_encoding(
        &self,
        k: &WorkloadKey,
        admission: &api::Admission,
        out: &mut Vec<String>,
    ) {
        let placed = self.placed(k);
        for psa in &admission.pod_set_assignments {
            let Some(ta) = &psa.topology_assignment else {
                continue;
            };
            let mut encoded: BTreeMap<String, i32> = BTreeMap::new();
            for slice in &ta.slices {
                match slice.domains() {
                    Some(doms) => {
                        for (values, c) in doms {
                            *encoded.entry(values.join("/")).or_insert(0) += c;
                        }
                    }
                    None => out.push(format!(
                        "    {}: pod set {}: topologyAssignment slice does not decode: {slice:?}",
                        self.show(k),
                        psa.name
                    )),
                }
            }
            let mut want: BTreeMap<String, i32> = BTreeMap::new();
            for ps in placed.iter().filter(|p| p.name == psa.name) {
                for (n, c) in &ps.nodes {
                    *want.entry(self.domain_path(n, &ta.levels)).or_insert(0) += c;
                }
            }
            if encoded != want {
                out.push(format!(
                    "    {}: pod set {}: topologyAssignment disagrees with the placement\n    - {}\n    + {}",
                    self.show(k),
                    psa.name,
                    render_nodes(&want),
                    render_nodes(&encoded)
                ));
            }
        }
    }

    /// A node's label values for `levels`, joined by `/` (the hostname defaults to the name).
    fn domain_path(&self, node: &str, levels: &[String]) -> String {
        let labels = self.nodes.get(node).map(|n| &n.labels);
        levels
            .iter()
            .map(|l| {
                labels
                    .and_then(|ls| ls.get(l))
                    .cloned()
                    .or_else(|| (l == HOSTNAME).then(|| node.to_string()))
                    .unwrap_or_else(|| format!("<{node} has no {l}>"))
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// No node holds more than its allocatable (for the resources it declares) in pods
    /// of admitted and evicting workloads; nodes that got pods this cycle must also
    /// leave room for the external usage reported on them.
    pub(super) fn check_nodes(&self, touched: &BTreeSet<String>, out: &mut Vec<String>) {
        let mut used: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        let mut who: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for k in &self.workloads {
            for ps in self.placed(k) {
                for (n, c) in &ps.nodes {
                    let u = used.entry(n.clone()).or_default();
                    for (r, v) in &ps.per_pod {
                        *u.entry(r.clone()).or_insert(0) += v * i64::from(*c);
                    }
                    who.entry(n.clone()).or_default().push(format!(
                        "{} {}: {c} pod(s)",
                        self.show(k),
                        ps.name
                    ));
                }
            }
        }
        for (n, u) in &used {
            let Some(info) = self.nodes.get(n) else {
                // Pods on a node that is gone: their workload must be evicting.
                continue;
            };
            for (r, alloc) in &info.allocatable {
                let got = u.get(r).copied().unwrap_or(0);
                let ext = if touched.contains(n) {
                    info.external.get(r).copied().unwrap_or(0)
                } else {
                    0
                };
                if got + ext > *alloc {
                    let q = |v: i64| api::quantity::resource_quantity_string(r, v);
                    out.push(format!(
                        "    node {n} over-committed on {r}: placed {} + external {} > allocatable {} ({})",
                        q(got),
                        q(ext),
                        q(*alloc),
                        who.get(n).map(|w| w.join(", ")).unwrap_or_default()
                    ));
                }
            }
        }
    }
}

const HOSTNAME: &str = "kubernetes.io/hostname";

/// `{node-a=2, node-b=2}`.
fn render_nodes(nodes: &BTreeMap<String, i32>) -> String {
    let parts: Vec<String> = nodes.iter().map(|(n, c)| format!("{n}={c}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// How a workload's state shows in a failure (`-` expected / `+` actual lines).
pub(super) fn render_state(s: Option<&WorkloadState>) -> String {
    match s {
        None => "no such workload".into(),
        Some(WorkloadState::Pending { reason, message }) => {
            format!("pending {} {message:?}", reason.as_str())
        }
        Some(WorkloadState::Admitted { admission }) => {
            let mut s = format!("admitted {}", admission.cluster_queue);
            for ps in &admission.pod_set_assignments {
                let flavors: Vec<String> =
                    ps.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
                let count = ps.count.map(|c| c.to_string()).unwrap_or("?".into());
                let _ = write!(s, " {}{{{}}}x{count}", ps.name, flavors.join(","));
            }
            s
        }
        Some(WorkloadState::Evicting { admission }) => {
            format!("evicting from {}", admission.cluster_queue)
        }
        Some(WorkloadState::Finished) => "finished".into(),
    }
}

/// The expectation, in the shape `render_got` gives the actual state.
fn render_want(w: &Want) -> String {
    match w {
        Want::Admitted(a) => {
            let mut s = format!("admitted {}", a.cluster_queue.as_deref().unwrap_or("*"));
            for (ps, fl) in a.flavors.iter().flatten() {
                let flavors: Vec<String> = fl.iter().map(|(r, f)| format!("{r}={f}")).collect();
                let _ = write!(s, " flavors {ps}{{{}}}", flavors.join(","));
            }
            for (ps, c) in a.count.iter().flatten() {
                let _ = write!(s, " count {ps}={c}");
            }
            for (ps, nodes) in a.nodes.iter().flatten() {
                let _ = write!(s, " nodes {ps}{}", render_nodes(nodes));
            }
            for (ps, levels) in a.domains.iter().flatten() {
                for (level, values) in levels {
                    let values: BTreeSet<&String> = values.iter().collect();
                    let _ = write!(s, " domains {ps}{{{level}={values:?}}}");
                }
            }
            s
        }
        Want::Pending(p) => {
            let msg = match &p.message {
                None => String::new(),
                Some(OneOrMany::One(m)) => format!(" message containing {m:?}"),
                Some(OneOrMany::Many(ms)) => format!(" message containing all of {ms:?}"),
            };
            format!("pending {}{msg}", p.reason.as_deref().unwrap_or("*"))
        }
        Want::Evicting => "evicting".into(),
    }
}

/// The actual state restricted to what the expectation names; equals `render_want` on a match.
/// `placed` is the actual nodes/domains part, from `Runner::got_placement`.
fn render_got(w: &Want, s: Option<&WorkloadState>, placed: &str) -> String {
    match (w, s) {
        (Want::Admitted(a), Some(WorkloadState::Admitted { admission })) => {
            let find = |ps: &str| admission.pod_set_assignments.iter().find(|p| p.name == ps);
            let cq = if a.cluster_queue.is_some() {
                admission.cluster_queue.as_str()
            } else {
                "*"
            };
            let mut s = format!("admitted {cq}");
            for (ps, fl) in a.flavors.iter().flatten() {
                let flavor = |r: &String| {
                    find(ps)
                        .and_then(|p| p.flavors.get(r))
                        .cloned()
                        .unwrap_or("<none>".into())
                };
                let flavors: Vec<String> =
                    fl.keys().map(|r| format!("{r}={}", flavor(r))).collect();
                let _ = write!(s, " flavors {ps}{{{}}}", flavors.join(","));
            }
            for ps in a.count.iter().flatten().map(|(ps, _)| ps) {
                let c = find(ps)
                    .and_then(|p| p.count)
                    .map(|c| c.to_string())
                    .unwrap_or("<none>".into());
                let _ = write!(s, " count {ps}={c}");
            }
            s.push_str(placed);
            s
        }
        (Want::Pending(p), Some(WorkloadState::Pending { reason, message })) => {
            let reason_ok = p.reason.as_ref().is_none_or(|r| r == reason.as_str());
            let msg_ok = p
                .message
                .as_ref()
                .is_none_or(|m| m.items().iter().all(|n| message.contains(n)));
            if reason_ok && msg_ok {
                render_want(w)
            } else {
                render_state(s)
            }
        }
        (Want::Evicting, Some(WorkloadState::Evicting { .. })) => render_want(w),
        _ => render_state(s),
    }
}
