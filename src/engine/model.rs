//! Translation of API objects into the engine's compact, interned form.
//!
//! This is the only place where Kueue's strings, optionals and quantities are
//! interpreted; everything downstream works on ids and milli-unit integers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::quota::Limits;
use super::resources::{FlavorId, Names, ResourceId};
use super::{Millis, WorkloadKey};
use crate::api::{
    self,
    quantity::{QuantityError, parse_milli, resource_value},
};

/// The resource Kueue counts as one per pod when a ClusterQueue covers it.
pub const PODS_RESOURCE: &str = "pods";

/// A ResourceFlavor as the flavor assigner needs it.
#[derive(Clone, Debug, Default)]
pub struct Flavor {
    pub node_labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub tolerations: Vec<Toleration>,
}

impl Flavor {
    pub fn from_api(rf: &api::ResourceFlavor) -> Self {
        Self {
            node_labels: rf.spec.node_labels.clone().unwrap_or_default(),
            taints: rf.spec.node_taints.clone().unwrap_or_default(),
            tolerations: rf.spec.tolerations.clone().unwrap_or_default(),
        }
    }
}

/// One resource group of a ClusterQueue: resources served by an ordered list of flavors.
#[derive(Clone, Debug, Default)]
pub struct Group {
    pub resources: Vec<ResourceId>,
    pub flavors: Vec<FlavorId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    #[default]
    Never,
    Any,
    LowerPriority,
    LowerOrNewerEqualPriority,
}

impl From<Option<api::PreemptionPolicy>> for Policy {
    fn from(p: Option<api::PreemptionPolicy>) -> Self {
        match p {
            None | Some(api::PreemptionPolicy::Never) => Policy::Never,
            Some(api::PreemptionPolicy::Any) => Policy::Any,
            Some(api::PreemptionPolicy::LowerPriority) => Policy::LowerPriority,
            Some(api::PreemptionPolicy::LowerOrNewerEqualPriority) => {
                Policy::LowerOrNewerEqualPriority
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Preference {
    /// Kueue's behaviour when `preference` is unset.
    #[default]
    Unset,
    BorrowingOverPreemption,
    PreemptionOverBorrowing,
}

/// A ClusterQueue's scheduling parameters.
#[derive(Clone, Debug, Default)]
pub struct CqSpec {
    pub name: String,
    pub cohort: Option<String>,
    pub groups: Vec<Group>,
    pub limits: Limits,
    pub strict_fifo: bool,
    pub namespace_selector: Option<LabelSelector>,
    pub stop_on_borrow: bool,
    pub stop_on_preempt: bool,
    pub preference: Preference,
    pub within_cq: Policy,
    pub reclaim: Policy,
    /// `Some(threshold)` when borrowWithinCohort is LowerPriority (threshold may be i32::MAX).
    pub borrow_within_cohort: Option<i32>,
    pub stop: api::StopPolicy,
    /// Fair-sharing weight in milli (1000 = weight 1).
    pub weight: i64,
    /// Flavors referenced by the resource groups, in order.
    pub flavor_names: Vec<String>,
    /// AdmissionChecks named by `spec.admissionChecksStrategy`, in order, without repeats,
    /// each with the flavors it runs for (empty: every flavor).
    pub admission_checks: Vec<super::checks::CheckRule>,
    /// `admissionScope.admissionMode: UsageBasedAdmissionFairSharing`: its queue is
    /// ordered by LocalQueue usage when admission fair sharing is configured.
    pub usage_based_afs: bool,
}

impl CqSpec {
    /// The resource group serving `r`, if any.
    pub fn group_of(&self, r: ResourceId) -> Option<usize> {
        self.groups.iter().position(|g| g.resources.contains(&r))
    }
}

/// A model-building error; it names the field like the API validation does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("{field}: {source}")]
    Quantity {
        field: String,
        #[source]
        source: QuantityError,
    },
    #[error("{field}: {source}")]
    Topology {
        field: String,
        #[source]
        source: crate::placement::TopologyRequestError,
    },
}

/// An amount of `resource` in the engine's unit for it (milli for cpu, whole units else).
fn quantity(
    resource: &str,
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    field: &str,
) -> Result<i64, ModelError> {
    resource_value(resource, q).map_err(|source| ModelError::Quantity {
        field: field.to_string(),
        source,
    })
}

pub(crate) fn weight(fs: &Option<api::FairSharing>, field: &str) -> Result<i64, ModelError> {
    match fs.as_ref().and_then(|f| f.weight.as_ref()) {
        // A weight is no resource: milli-units, so 0.5 stays distinct from 1.
        Some(w) => parse_milli(w).map_err(|source| ModelError::Quantity {
            field: format!("{field}.fairSharing.weight"),
            source,
        }),
        None => Ok(1000),
    }
}

/// Reads resource groups into groups and per-(flavor, resource) limits.
pub fn read_groups(
    names: &mut Names,
    rgs: &[api::ResourceGroup],
) -> Result<(Vec<Group>, Limits, Vec<String>), ModelError> {
    let mut groups = Vec::with_capacity(rgs.len());
    let mut limits = Limits::default();
    let mut flavor_names = Vec::new();
    for (gi, rg) in rgs.iter().enumerate() {
        let resources: Vec<ResourceId> = rg
            .covered_resources
            .iter()
            .map(|r| names.resource(r))
            .collect();
        let mut flavors = Vec::with_capacity(rg.flavors.len());
        for (fi, fq) in rg.flavors.iter().enumerate() {
            let f = names.flavor(&fq.name);
            flavors.push(f);
            flavor_names.push(fq.name.clone());
            for (ri, rq) in fq.resources.iter().enumerate() {
                let base = format!("spec.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]");
                let r = names.resource(&rq.name);
                let fr = names.fr(f, r);
                let nominal =
                    quantity(&rq.name, &rq.nominal_quota, &format!("{base}.nominalQuota"))?;
                let borrowing = rq
                    .borrowing_limit
                    .as_ref()
                    .map(|q| quantity(&rq.name, q, &format!("{base}.borrowingLimit")))
                    .transpose()?;
                let lending = rq
                    .lending_limit
                    .as_ref()
                    .map(|q| quantity(&rq.name, q, &format!("{base}.lendingLimit")))
                    .transpose()?;
                limits.set(fr, nominal, borrowing, lending);
            }
        }
        groups.push(Group { resources, flavors });
    }
    Ok((groups, limits, flavor_names))
}

impl CqSpec {
    pub fn from_api(names: &mut Names, cq: &api::ClusterQueue) -> Result<Self, ModelError> {
        let name = cq.metadata.name.clone().unwrap_or_default();
        let s = &cq.spec;
        let (groups, limits, flavor_names) = read_groups(names, &s.resource_groups)?;
        let ff = s.flavor_fungibility.clone().unwrap_or_default();
        let pre = s.preemption.clone().unwrap_or_default();
        let borrow_within_cohort = pre
            .borrow_within_cohort
            .as_ref()
            .and_then(|b| match b.policy {
                Some(api::BorrowWithinCohortPolicy::LowerPriority) => {
                    Some(b.max_priority_threshold.unwrap_or(i32::MAX))
                }
                _ => None,
            });
        Ok(Self {
            name,
            cohort: s.cohort_name.clone().filter(|c| !c.is_empty()),
            groups,
            limits,
            strict_fifo: matches!(s.queueing_strategy, Some(api::QueueingStrategy::StrictFifo)),
            namespace_selector: s.namespace_selector.clone(),
            // Kueue's defaults: stop when borrowing fits, try the next flavor before preempting.
            stop_on_borrow: !matches!(
                ff.when_can_borrow,
                Some(api::FlavorFungibilityPolicy::TryNextFlavor)
            ),
            stop_on_preempt: matches!(
                ff.when_can_preempt,
                Some(api::FlavorFungibilityPolicy::MayStopSearch)
            ),
            preference: match ff.preference {
                None => Preference::Unset,
                Some(api::FlavorFungibilityPreference::BorrowingOverPreemption) => {
                    Preference::BorrowingOverPreemption
                }
                Some(api::FlavorFungibilityPreference::PreemptionOverBorrowing) => {
                    Preference::PreemptionOverBorrowing
                }
            },
            within_cq: pre.within_cluster_queue.into(),
            reclaim: pre.reclaim_within_cohort.into(),
            borrow_within_cohort,
            stop: s.stop_policy.unwrap_or_default(),
            weight: weight(&s.fair_sharing, "spec")?,
            flavor_names,
            admission_checks: admission_check_rules(s),
            usage_based_afs: s.admission_scope.as_ref().is_some_and(|a| {
                a.admission_mode == api::AdmissionMode::UsageBasedAdmissionFairSharing
            }),
        })
    }
}

/// The AdmissionCheck rules of a ClusterQueue's strategy (v1beta1's `spec.admissionChecks`
/// arrive here already folded into rules), first mention first; a check named twice runs
/// for the union of its flavors.
fn admission_check_rules(s: &api::ClusterQueueSpec) -> Vec<super::checks::CheckRule> {
    let mut out: Vec<super::checks::CheckRule> = Vec::new();
    let rules = s
        .admission_checks_strategy
        .iter()
        .flat_map(|st| &st.admission_checks);
    for rule in rules {
        match out.iter_mut().find(|r| r.name == rule.name) {
            Some(r) if r.on_flavors.is_empty() || rule.on_flavors.is_empty() => {
                r.on_flavors.clear();
            }
            Some(r) => {
                for f in &rule.on_flavors {
                    if !r.on_flavors.contains(f) {
                        r.on_flavors.push(f.clone());
                    }
                }
            }
            None => out.push(super::checks::CheckRule {
                name: rule.name.clone(),
                on_flavors: rule.on_flavors.clone(),
            }),
        }
    }
    out
}

/// A Cohort object's own quota and parent.
#[derive(Clone, Debug, Default)]
pub struct CohortSpec {
    pub parent: Option<String>,
    pub limits: Limits,
    pub weight: i64,
}

impl CohortSpec {
    pub fn from_api(names: &mut Names, c: &api::Cohort) -> Result<Self, ModelError> {
        let (_, limits, _) = read_groups(names, &c.spec.resource_groups)?;
        Ok(Self {
            parent: c.spec.parent_name.clone().filter(|p| !p.is_empty()),
            limits,
            weight: weight(&c.spec.fair_sharing, "spec")?,
        })
    }
}

/// One PodSet's demand and the scheduling constraints flavors are matched against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSetReq {
    pub name: String,
    pub count: i32,
    pub min_count: Option<i32>,
    /// Per-pod requests in milli-units, by resource, sorted; zero requests dropped.
    pub per_pod: Vec<(ResourceId, i64)>,
    /// Only nodeSelector, affinity and tolerations are kept: what flavor matching reads.
    pub constraints: PodSpec,
    /// The topology request (mode and optional slice), from the PodSet or its annotations.
    pub topology: Option<(crate::placement::TopologyMode, Option<(String, i32)>)>,
}

/// The immutable part of a Workload that scheduling reads.
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    pub key: WorkloadKey,
    pub queue_name: String,
    pub priority: i32,
    pub created: Millis,
    pub active: bool,
    /// `spec.maximumExecutionTimeSeconds`, in ms: how long it may stay admitted,
    /// summed over all its admissions.
    pub max_execution: Option<Millis>,
    /// `status.accumulatedPastExecutionTimeSeconds`, in ms: the time it was admitted
    /// before its current (or next) admission. Status, not spec, but the API object
    /// is its truth, so it comes with every upsert like the spec does.
    pub past_execution: Millis,
    /// When its `Admitted` condition last turned true, if it is true: where a
    /// restored admission's execution time counts from.
    pub admitted_since: Option<Millis>,
    /// The smallest `activeDeadlineSeconds` of its PodSets' pod templates, in ms: the
    /// kubelet stops those pods by then, so the workload runs at most this long.
    pub pod_deadline: Option<Millis>,
    /// Shared by every workload with equal PodSets (see [`super::intern::Shared`]):
    /// thousands of workloads come from a few templates, and a cycle reads these
    /// for every head, so one copy stays in cache where thousands would not.
    pub pod_sets: PodSets,
    /// A hash of `pod_sets` alone, for sharing them.
    pub pod_sets_hash: u64,
    /// Equal for workloads that would get the same flavor-assignment answer.
    pub shape: u64,
}

/// A workload's PodSets, shared between workloads whose PodSets are equal.
pub type PodSets = std::sync::Arc<[PodSetReq]>;

/// Kubernetes' effective pod request: containers summed, init containers maxed, plus overhead.
pub(crate) fn pod_requests(
    spec: &PodSpec,
    field: &str,
) -> Result<BTreeMap<String, i64>, ModelError> {
    fn container_requests(
        c: &k8s_openapi::api::core::v1::Container,
        field: &str,
    ) -> Result<BTreeMap<String, i64>, ModelError> {
        let mut out = BTreeMap::new();
        if let Some(res) = &c.resources {
            // A limit without a request means request == limit, as the API server defaults it.
            if let Some(limits) = &res.limits {
                for (k, q) in limits {
                    out.insert(
                        k.clone(),
                        quantity(k, q, &format!("{field}.resources.limits[{k}]"))?,
                    );
                }
            }
            if let Some(reqs) = &res.requests {
                for (k, q) in reqs {
                    out.insert(
                        k.clone(),
                        quantity(k, q, &format!("{field}.resources.requests[{k}]"))?,
                    );
                }
            }
        }
        Ok(out)
    }
    let mut total: BTreeMap<String, i64> = BTreeMap::new();
    for (i, c) in spec.containers.iter().enumerate() {
        for (k, v) in container_requests(c, &format!("{field}.containers[{i}]"))? {
            let e = total.entry(k).or_default();
            *e = e.saturating_add(v);
        }
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        for (k, v) in container_requests(c, &format!("{field}.initContainers[{i}]"))? {
            let e = total.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        let v = quantity(k, q, &format!("{field}.overhead[{k}]"))?;
        let e = total.entry(k.clone()).or_default();
        *e = e.saturating_add(v);
    }
    Ok(total)
}

/// The priority a workload gets: explicit value, else its class, else the global default.
pub struct PriorityLookup<'a> {
    pub workload_classes: &'a BTreeMap<String, i32>,
    pub pod_classes: &'a BTreeMap<String, (i32, bool)>,
}

impl PriorityLookup<'_> {
    pub fn resolve(&self, wl: &api::Workload) -> i32 {
        if let Some(p) = wl.spec.priority {
            return p;
        }
        if let Some(r) = &wl.spec.priority_class_ref {
            let found = if r.kind == "WorkloadPriorityClass" {
                self.workload_classes.get(&r.name).copied()
            } else {
                self.pod_classes.get(&r.name).map(|(v, _)| *v)
            };
            if let Some(v) = found {
                return v;
            }
        }
        // A PodSet's pod priorityClassName counts when the Workload names none (Kueue does the same).
        for ps in &wl.spec.pod_sets {
            if let Some(name) = ps
                .template
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_ref())
                && let Some((v, _)) = self.pod_classes.get(name)
            {
                return *v;
            }
        }
        self.pod_classes
            .values()
            .find(|(_, global)| *global)
            .map(|(v, _)| *v)
            .unwrap_or(0)
    }
}

impl WorkloadSpec {
    pub fn from_api(
        names: &mut Names,
        wl: &api::Workload,
        priority: i32,
        now: Millis,
    ) -> Result<Self, ModelError> {
        let key = WorkloadKey::new(
            wl.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            wl.metadata.name.clone().unwrap_or_default(),
        );
        let created = wl
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond())
            .unwrap_or(now);
        let mut pod_sets = Vec::with_capacity(wl.spec.pod_sets.len());
        for (i, ps) in wl.spec.pod_sets.iter().enumerate() {
            let field = format!("spec.podSets[{i}].template.spec");
            let spec = ps.template.spec.clone().unwrap_or_default();
            let mut per_pod: Vec<(ResourceId, i64)> = pod_requests(&spec, &field)?
                .into_iter()
                .filter(|(_, v)| *v > 0)
                .map(|(k, v)| (names.resource(&k), v))
                .collect();
            per_pod.push((names.resource(PODS_RESOURCE), 1));
            per_pod.sort_unstable();
            per_pod.dedup_by_key(|(r, _)| *r);
            let constraints = PodSpec {
                node_selector: spec.node_selector.clone(),
                affinity: spec.affinity.clone(),
                tolerations: spec.tolerations.clone(),
                ..PodSpec::default()
            };
            pod_sets.push(PodSetReq {
                name: ps.name.clone(),
                count: ps.count.max(0),
                min_count: ps.min_count,
                per_pod,
                constraints,
                topology: crate::placement::topology_mode(ps).map_err(|source| {
                    ModelError::Topology {
                        field: format!("spec.podSets[{i}]"),
                        source,
                    }
                })?,
            });
        }
        let pod_deadline = wl
            .spec
            .pod_sets
            .iter()
            .filter_map(|ps| ps.template.spec.as_ref()?.active_deadline_seconds)
            .min()
            .map(|s| s.max(0).saturating_mul(1000));
        let pod_sets_hash = pod_sets_hash(&pod_sets);
        let shape = shape_hash(&wl.metadata.namespace, pod_sets_hash);
        Ok(Self {
            key,
            queue_name: wl.spec.queue_name.clone().unwrap_or_default(),
            priority,
            created,
            active: wl.spec.active.unwrap_or(true),
            max_execution: wl
                .spec
                .maximum_execution_time_seconds
                .map(|s| Millis::from(s.max(0)) * 1000),
            past_execution: wl
                .status
                .as_ref()
                .and_then(|s| s.accumulated_past_execution_time_seconds)
                .map_or(0, |s| Millis::from(s.max(0)) * 1000),
            admitted_since: wl
                .status
                .as_ref()
                .and_then(|s| s.condition(crate::api::constants::WORKLOAD_ADMITTED))
                .filter(|c| c.status == "True")
                .map(|c| c.last_transition_time.0.as_millisecond()),
            pod_deadline,
            pod_sets: pod_sets.into(),
            pod_sets_hash,
            shape,
        })
    }
}

/// A hash of everything the flavor assigner reads, so failures can be memoised per
/// cycle: the namespace (namespaceSelector) and the PodSets.
fn shape_hash(namespace: &Option<String>, pod_sets_hash: u64) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    namespace.hash(&mut h);
    pod_sets_hash.hash(&mut h);
    h.finish()
}

/// A hash of everything in the PodSets that scheduling reads.
fn pod_sets_hash(pod_sets: &[PodSetReq]) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    for ps in pod_sets {
        ps.name.hash(&mut h);
        ps.count.hash(&mut h);
        ps.min_count.hash(&mut h);
        ps.per_pod.hash(&mut h);
        // Constraints have no Hash impl; their JSON is a faithful stand-in.
        serde_json::to_string(&ps.constraints)
            .unwrap_or_default()
            .hash(&mut h);
        format!("{:?}", ps.topology).hash(&mut h);
    }
    h.finish()
}

/// The (flavor, resource) amounts in an admission, for restoring usage after a restart.
pub fn admission_usage(
    names: &mut Names,
    admission: &api::Admission,
) -> Result<super::resources::FrAmounts, ModelError> {
    let mut out = super::resources::FrAmounts::new();
    for (i, psa) in admission.pod_set_assignments.iter().enumerate() {
        for (r, q) in &psa.resource_usage {
            let Some(flavor) = psa.flavors.get(r) else {
                continue;
            };
            let (f, res) = (names.flavor(flavor), names.resource(r));
            let fr = names.fr(f, res);
            let v = quantity(
                r,
                q,
                &format!("status.admission.podSetAssignments[{i}].resourceUsage[{r}]"),
            )?;
            super::resources::add_amount(&mut out, fr, v);
        }
    }
    Ok(out)
}
