//! Kueue's `status.admission` for an assignment, reusing the one a ClusterQueue last
//! built for the same PodSets and flavors.
//!
//! A ClusterQueue admits the same few shapes over and over, and building the
//! admission (a string map of flavors and one of formatted quantities per PodSet)
//! was a third of an admission's cost. The engine's usage accounting never reads
//! it: it is the record the shells write back to the Workload.

use std::collections::BTreeMap;
use std::sync::Arc;

use smallvec::SmallVec;

use super::FastMap;
use super::flavor::Assignment;
use super::model::{PodSetReq, PodSets};
use super::resources::{FlavorId, Names, ResourceId};
use crate::api;

/// Entries kept per ClusterQueue before the cache starts over. A queue sees a
/// handful of shapes; the bound only keeps a queue with endless distinct shapes
/// from growing without limit.
const MAX_ENTRIES: usize = 32;

/// A PodSet's flavor per resource, as the assigner chose them.
type Flavors = SmallVec<[(ResourceId, FlavorId); 2]>;

/// What an admission is built from besides the ClusterQueue's name (fixed per queue).
#[derive(Clone, Debug)]
struct Entry {
    /// The workload's PodSets. They are shared between workloads with equal PodSets,
    /// so the same allocation means the same PodSets; holding it keeps the address
    /// from being reused for different ones.
    pod_sets: PodSets,
    /// Per PodSet: the admitted count and the flavor of each resource.
    assigned: SmallVec<[(i32, Flavors); 1]>,
    admission: Arc<api::Admission>,
}

/// One ClusterQueue's recently built admissions, by the address of the shared PodSets
/// they were built for (each entry holds those PodSets, so the address stays theirs).
#[derive(Clone, Debug, Default)]
pub(crate) struct AdmissionCache {
    entries: FastMap<usize, Vec<Entry>>,
    len: usize,
}

impl AdmissionCache {
    /// The admission of `pod_sets` with assignment `a` in ClusterQueue `cluster_queue`,
    /// built or reused.
    pub fn get_or_build(
        &mut self,
        names: &Names,
        cluster_queue: &str,
        pod_sets: &PodSets,
        a: &Assignment,
    ) -> Arc<api::Admission> {
        let key = Arc::as_ptr(pod_sets) as *const PodSetReq as usize;
        if let Some(hit) = self.entries.get(&key).and_then(|list| {
            list.iter()
                .find(|e| Arc::ptr_eq(&e.pod_sets, pod_sets) && same_assignment(e, a))
                .map(|e| Arc::clone(&e.admission))
        }) {
            return hit;
        }
        let admission = Arc::new(build(names, cluster_queue, pod_sets, a));
        if self.len >= MAX_ENTRIES {
            self.entries.clear();
            self.len = 0;
        }
        self.entries.entry(key).or_default().push(Entry {
            pod_sets: Arc::clone(pod_sets),
            assigned: a
                .pod_sets
                .iter()
                .map(|psa| (psa.count, psa.flavors.clone()))
                .collect(),
            admission: Arc::clone(&admission),
        });
        self.len += 1;
        admission
    }
}

fn same_assignment(e: &Entry, a: &Assignment) -> bool {
    e.assigned.len() == a.pod_sets.len()
        && e.assigned
            .iter()
            .zip(&a.pod_sets)
            .all(|((count, flavors), psa)| *count == psa.count && *flavors == psa.flavors)
}

/// Kueue's `status.admission`: per PodSet, the flavor of each resource and the
/// total usage of its pods.
pub fn build(
    names: &Names,
    cluster_queue: &str,
    pod_sets: &[PodSetReq],
    a: &Assignment,
) -> api::Admission {
    let pod_set_assignments = pod_sets
        .iter()
        .zip(&a.pod_sets)
        .map(|(ps, psa)| {
            let mut usage = BTreeMap::new();
            for &(r, per) in &ps.per_pod {
                if psa.flavors.iter().any(|(fr, _)| *fr == r) {
                    usage.insert(
                        names.resource_name(r).to_string(),
                        api::quantity::resource_quantity(
                            names.resource_name(r),
                            per.saturating_mul(i64::from(psa.count)),
                        ),
                    );
                }
            }
            api::PodSetAssignment {
                name: ps.name.clone(),
                flavors: psa
                    .flavors
                    .iter()
                    .map(|(r, f)| {
                        (
                            names.resource_name(*r).to_string(),
                            names.flavor_name(*f).to_string(),
                        )
                    })
                    .collect(),
                resource_usage: usage,
                count: Some(psa.count),
                // Spelled out: `..Default::default()` would allocate a name only to drop it.
                topology_assignment: None,
                delayed_topology_request: None,
            }
        })
        .collect();
    api::Admission {
        cluster_queue: cluster_queue.to_string(),
        pod_set_assignments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::flavor::PodSetAssignment;

    fn pod_sets(name: &str, cpu: ResourceId, milli: i64) -> PodSets {
        Arc::from(vec![PodSetReq {
            name: name.into(),
            count: 2,
            per_pod: vec![(cpu, milli)],
            ..PodSetReq::default()
        }])
    }

    fn assignment(cpu: ResourceId, flavor: FlavorId, count: i32) -> Assignment {
        let mut a = Assignment::default();
        a.pod_sets.push(PodSetAssignment {
            count,
            flavors: smallvec::smallvec![(cpu, flavor)],
            ..PodSetAssignment::default()
        });
        a
    }

    fn usage(a: &api::Admission) -> Option<&str> {
        a.pod_set_assignments[0]
            .resource_usage
            .get("cpu")
            .map(|q| q.0.as_str())
    }

    #[test]
    fn reuses_an_admission_only_for_the_same_pod_sets_and_assignment() {
        let mut names = Names::default();
        let cpu = names.resource("cpu");
        let (on_demand, spot) = (names.flavor("on-demand"), names.flavor("spot"));
        let mut cache = AdmissionCache::default();
        let ps = pod_sets("main", cpu, 1500);
        let first = cache.get_or_build(&names, "team-a", &ps, &assignment(cpu, on_demand, 2));
        let psa = &first.pod_set_assignments[0];
        assert_eq!(first.cluster_queue, "team-a");
        assert_eq!(psa.name, "main");
        assert_eq!(
            psa.flavors.get("cpu").map(String::as_str),
            Some("on-demand")
        );
        assert_eq!(usage(&first), Some("3"));
        assert_eq!(psa.count, Some(2));

        let again = cache.get_or_build(&names, "team-a", &ps, &assignment(cpu, on_demand, 2));
        assert!(
            Arc::ptr_eq(&first, &again),
            "same inputs reuse the admission"
        );

        // Another flavor, count or PodSets: a fresh admission.
        let other = cache.get_or_build(&names, "team-a", &ps, &assignment(cpu, spot, 2));
        let flavor = other.pod_set_assignments[0].flavors.get("cpu");
        assert_eq!(flavor.map(String::as_str), Some("spot"));
        let partial = cache.get_or_build(&names, "team-a", &ps, &assignment(cpu, on_demand, 1));
        assert_eq!(usage(&partial), Some("1500m"));
        let bigger = pod_sets("main", cpu, 2000);
        let b = cache.get_or_build(&names, "team-a", &bigger, &assignment(cpu, on_demand, 2));
        assert_eq!(usage(&b), Some("4"));
        // Equal content in another allocation is not trusted as the same PodSets
        // (the engine shares equal PodSets, so this only costs a rebuild).
        let copy = pod_sets("main", cpu, 1500);
        let c = cache.get_or_build(&names, "team-a", &copy, &assignment(cpu, on_demand, 2));
        assert!(!Arc::ptr_eq(&first, &c));
        assert_eq!(*first, *c);
    }

    #[test]
    fn stays_bounded() {
        let mut names = Names::default();
        let cpu = names.resource("cpu");
        let f = names.flavor("default");
        let mut cache = AdmissionCache::default();
        for i in 0..(MAX_ENTRIES as i64 * 3) {
            let ps = pod_sets("main", cpu, 1000 + i);
            cache.get_or_build(&names, "q", &ps, &assignment(cpu, f, 2));
            assert!(cache.len <= MAX_ENTRIES);
        }
    }
}
