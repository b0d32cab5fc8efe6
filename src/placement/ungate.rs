//! Which gated pod of a topology-aware PodSet goes to which domain of its admission
//! (Kueue's topology ungater, `pkg/controller/tas/topology_ungater.go`). Pure: the
//! controller lists the pods, calls [`assign`] and writes one patch per chosen pod.
//!
//! Two ways, as in Kueue:
//! - **by rank**, when the PodSet names a pod index label (a batch Job's completion
//!   index) and every live pod carries a valid, distinct index: rank `r` goes to the
//!   domain holding the `r`-th pod of the assignment, so neighbouring ranks share a
//!   domain. Pods already ungated must sit where their rank says, else ranks are not
//!   trusted;
//! - **greedily** otherwise: pods already ungated count against the domain their node
//!   selector names (so a restart never over-fills a domain), and the gated pods fill
//!   the remaining room domain by domain, in the assignment's order.

use std::collections::{BTreeMap, BTreeSet};

/// What the ungater reads of one live (not terminated) pod of the PodSet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    /// Still carries the `kueue.x-k8s.io/topology` scheduling gate.
    pub gated: bool,
    pub labels: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
}

/// The labels that give a pod its rank: the pod index label, and for a PodSet made of
/// several replicated jobs (a JobSet), the job index label and the number of jobs.
/// `offset` is the PodSet's first pod index (Kueue's `kueue.x-k8s.io/pod-index-offset`
/// pod annotation: an MPIJob's workers count from 1 when its launcher runs as worker 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankLabels {
    pub pod_index_label: String,
    pub sub_group: Option<(String, i32)>,
    pub offset: usize,
}

/// One domain of an admission: its label value per level, and its pod count.
pub type Domain = (Vec<String>, i32);

/// The gated pods to ungate now, by index into `pods`, each with the node selector of
/// its domain (one entry per topology level). Pods are returned in ascending index.
pub fn assign(
    levels: &[String],
    domains: &[Domain],
    pods: &[PodView],
    ranks: Option<&RankLabels>,
) -> Vec<(usize, BTreeMap<String, String>)> {
    let selector = |values: &[String]| -> BTreeMap<String, String> {
        levels.iter().cloned().zip(values.iter().cloned()).collect()
    };
    let rank_domains: Vec<usize> = domains
        .iter()
        .enumerate()
        .flat_map(|(i, (_, c))| std::iter::repeat_n(i, (*c).max(0) as usize))
        .collect();
    let chosen = match ranks.and_then(|r| by_rank(levels, domains, &rank_domains, pods, r)) {
        Some(chosen) => chosen,
        None => greedy(levels, domains, pods),
    };
    chosen
        .into_iter()
        .map(|(pod, domain)| (pod, selector(&domains[domain].0)))
        .collect()
}

/// The label values of `levels` in a pod's node selector (empty where unset).
fn domain_of(levels: &[String], pod: &PodView) -> Vec<String> {
    levels
        .iter()
        .map(|l| pod.node_selector.get(l).cloned().unwrap_or_default())
        .collect()
}

/// Rank-based choice, or `None` when the ranks cannot be trusted (a missing, invalid or
/// duplicate index, a rank past the assignment, or an ungated pod off its rank's domain).
fn by_rank(
    levels: &[String],
    domains: &[Domain],
    rank_domains: &[usize],
    pods: &[PodView],
    ranks: &RankLabels,
) -> Option<Vec<(usize, usize)>> {
    let size = rank_domains.len();
    let per_job = match &ranks.sub_group {
        Some((_, jobs)) if *jobs > 0 => size / (*jobs as usize),
        Some(_) => return None,
        None => size,
    };
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        let index = read_index(pod, &ranks.pod_index_label, size.checked_add(ranks.offset)?)?
            .checked_sub(ranks.offset)?;
        let rank = match &ranks.sub_group {
            Some((label, jobs)) => {
                let job = read_index(pod, label, (*jobs).max(0) as usize)?;
                if index >= per_job {
                    return None;
                }
                index + job * per_job
            }
            None => index,
        };
        if rank >= size || !seen.insert(rank) {
            return None;
        }
        let domain = rank_domains[rank];
        if pod.gated {
            out.push((i, domain));
        } else if domain_of(levels, pod) != domains[domain].0 {
            return None;
        }
    }
    Some(out)
}

/// A non-negative integer label below `bound`.
fn read_index(pod: &PodView, label: &str, bound: usize) -> Option<usize> {
    pod.labels
        .get(label)?
        .parse::<usize>()
        .ok()
        .filter(|v| *v < bound)
}

/// Greedy choice: the room left in each domain, filled in order by the gated pods.
fn greedy(levels: &[String], domains: &[Domain], pods: &[PodView]) -> Vec<(usize, usize)> {
    let mut ungated: BTreeMap<Vec<String>, i32> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !p.gated) {
        *ungated.entry(domain_of(levels, pod)).or_default() += 1;
    }
    let mut gated = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.gated)
        .map(|(i, _)| i);
    let mut out = Vec::new();
    for (d, (values, count)) in domains.iter().enumerate() {
        let room = (count - ungated.get(values).copied().unwrap_or(0)).max(0);
        for _ in 0..room {
            match gated.next() {
                Some(pod) => out.push((pod, d)),
                None => return out,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "kubernetes.io/hostname";
    const INDEX: &str = "batch.kubernetes.io/job-completion-index";

    fn levels() -> Vec<String> {
        vec!["rack".into(), HOST.into()]
    }

    fn domains() -> Vec<Domain> {
        vec![
            (vec!["r1".into(), "n1".into()], 2),
            (vec!["r1".into(), "n2".into()], 1),
        ]
    }

    fn gated(index: Option<usize>) -> PodView {
        PodView {
            gated: true,
            labels: index
                .map(|i| (INDEX.to_string(), i.to_string()))
                .into_iter()
                .collect(),
            node_selector: BTreeMap::new(),
        }
    }

    fn ungated_on(host: &str, index: Option<usize>) -> PodView {
        let mut p = gated(index);
        p.gated = false;
        p.node_selector = [("rack", "r1"), (HOST, host)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p
    }

    fn hosts(out: &[(usize, BTreeMap<String, String>)]) -> Vec<(usize, String)> {
        out.iter()
            .map(|(i, sel)| {
                assert_eq!(sel.get("rack").map(String::as_str), Some("r1"));
                (*i, sel[HOST].clone())
            })
            .collect()
    }

    fn ranks() -> RankLabels {
        RankLabels {
            pod_index_label: INDEX.into(),
            sub_group: None,
            offset: 0,
        }
    }

    /// Workers indexed from 1 (an MPIJob whose launcher runs as worker 0): with the offset
    /// their ranks start at 0; without it index 3 is past the assignment and the ranks are
    /// not trusted.
    #[test]
    fn an_index_offset_shifts_the_ranks() {
        let pods = vec![gated(Some(3)), gated(Some(1)), gated(Some(2))];
        let offset = RankLabels {
            offset: 1,
            ..ranks()
        };
        let out = assign(&levels(), &domains(), &pods, Some(&offset));
        assert_eq!(
            hosts(&out),
            [(0, "n2".into()), (1, "n1".into()), (2, "n1".into())]
        );
        // Index 0 is below the offset: not a rank of this PodSet, so the greedy fill.
        let pods = vec![gated(Some(0)), gated(Some(1)), gated(Some(2))];
        let out = assign(&levels(), &domains(), &pods, Some(&offset));
        assert_eq!(
            hosts(&out),
            [(0, "n1".into()), (1, "n1".into()), (2, "n2".into())]
        );
    }

    #[test]
    fn ranks_put_neighbouring_indexes_in_one_domain_whatever_the_pod_order() {
        let pods = vec![gated(Some(2)), gated(Some(0)), gated(Some(1))];
        let out = assign(&levels(), &domains(), &pods, Some(&ranks()));
        assert_eq!(
            hosts(&out),
            [(0, "n2".into()), (1, "n1".into()), (2, "n1".into())]
        );
    }

    #[test]
    fn pods_already_ungated_keep_their_room_after_a_restart() {
        // Index 0 was ungated onto n1 before the restart; the rest follow their ranks.
        let pods = vec![ungated_on("n1", Some(0)), gated(Some(1)), gated(Some(2))];
        let out = assign(&levels(), &domains(), &pods, Some(&ranks()));
        assert_eq!(hosts(&out), [(1, "n1".into()), (2, "n2".into())]);
        // Without indexes the greedy fill counts the ungated pod against n1 too.
        let pods = vec![
            ungated_on("n1", None),
            gated(None),
            gated(None),
            gated(None),
        ];
        let out = assign(&levels(), &domains(), &pods, Some(&ranks()));
        assert_eq!(hosts(&out), [(1, "n1".into()), (2, "n2".into())]);
    }

    #[test]
    fn untrusted_ranks_fall_back_to_the_greedy_fill_which_never_overfills() {
        // Two pods claim index 0: ranks are ambiguous.
        let pods = vec![gated(Some(0)), gated(Some(0)), gated(Some(1))];
        let out = assign(&levels(), &domains(), &pods, Some(&ranks()));
        assert_eq!(
            hosts(&out),
            [(0, "n1".into()), (1, "n1".into()), (2, "n2".into())]
        );
        // An ungated pod sits on n2 although rank 0 belongs to n1.
        let pods = vec![ungated_on("n2", Some(0)), gated(Some(1)), gated(Some(2))];
        let out = assign(&levels(), &domains(), &pods, Some(&ranks()));
        assert_eq!(hosts(&out), [(1, "n1".into()), (2, "n1".into())]);
        // More gated pods than the assignment holds: the extra one stays gated.
        let pods = vec![gated(None), gated(None), gated(None), gated(None)];
        let out = assign(&levels(), &domains(), &pods, None);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn sub_groups_rank_pods_by_job_then_index() {
        let jobs = RankLabels {
            pod_index_label: INDEX.into(),
            sub_group: Some(("job-index".into(), 2)),
            offset: 0,
        };
        let domains = vec![
            (vec!["r1".into(), "n1".into()], 2),
            (vec!["r1".into(), "n2".into()], 2),
        ];
        let pod = |job: usize, index: usize| {
            let mut p = gated(Some(index));
            p.labels.insert("job-index".into(), job.to_string());
            p
        };
        // Job 1's pods are ranks 2 and 3: both on n2.
        let pods = vec![pod(1, 0), pod(0, 1), pod(1, 1), pod(0, 0)];
        let out = assign(&levels(), &domains, &pods, Some(&jobs));
        assert_eq!(
            hosts(&out),
            [
                (0, "n2".into()),
                (1, "n1".into()),
                (2, "n2".into()),
                (3, "n1".into())
            ]
        );
    }
}
