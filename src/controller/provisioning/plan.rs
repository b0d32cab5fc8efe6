//! What one Workload needs from Kueue's ProvisioningRequest admission check, decided
//! without I/O: which requests to delete and create, with their pod templates, and the
//! check states to write. It follows Kueue's `provisioning.Controller.Reconcile`
//! (`pkg/controller/admissionchecks/provisioning/controller.go`) step for step.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::request::{
    self, CLASS_ANNOTATION, CONSUME_ANNOTATION, PARAMETER_ANNOTATION_PREFIX, ProvisioningRequest,
    ProvisioningRequestSpec, RequestPodSet, TemplateRef, condition,
};
use crate::api::constants::{
    WORKLOAD_ADMITTED, WORKLOAD_EVICTED, WORKLOAD_FINISHED, WORKLOAD_QUOTA_RESERVED,
};
use crate::api::{
    AdmissionCheckState, CheckState, PodSet, PodSetMergePolicy, PodSetUpdate,
    ProvisioningRequestConfigSpec, Workload,
};

/// Kueue's message for a check whose configuration cannot be read.
pub const CHECK_INACTIVE: &str = "the check is not active";
/// Kueue's message for a Workload with nothing for the autoscaler to provide.
pub const NO_REQUEST_NEEDED: &str = "the provisioning request is not needed";

/// Why no plan can be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    /// A pod set that needs capacity has no assignment in `status.admission`.
    #[error("inconsistent podSet assignments: missing assignment for PodSet {0:?}")]
    MissingAssignment(String),
}

/// A request to create: its pod templates first, then the request.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRequest {
    /// The request's name (Kueue's `<workload>-<check>-<attempt>`).
    pub name: String,
    /// What it asks for.
    pub spec: ProvisioningRequestSpec,
    /// Each pod template: its name and content.
    pub templates: Vec<(String, PodTemplateSpec)>,
}

/// What one reconcile of a Workload does.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    /// `status.admissionChecks` as they should be, when they change.
    pub states: Option<Vec<AdmissionCheckState>>,
    /// Messages of the `AdmissionCheckUpdated` Events, one per state that changed.
    pub events: Vec<String>,
    /// Owned requests no check uses any more.
    pub delete: Vec<String>,
    /// Requests to make.
    pub create: Vec<NewRequest>,
}

/// One check of this controller's on the Workload, and its configuration (`None` while it
/// cannot be read: the check is inactive).
pub struct Check<'a> {
    /// The AdmissionCheck's name.
    pub name: &'a str,
    /// Its ProvisioningRequestConfig's spec.
    pub config: Option<&'a ProvisioningRequestConfigSpec>,
}

/// The plan for `wl`, whose checks of this controller are `checks` and whose own requests
/// are `owned`. `template_of` gives a pod set's template as the pods would be created:
/// the flavors' node labels and tolerations added.
pub fn plan(
    wl: &Workload,
    checks: &[Check<'_>],
    owned: &[ProvisioningRequest],
    template_of: &dyn Fn(&PodSet) -> PodTemplateSpec,
    now: &Time,
) -> Result<Plan, PlanError> {
    let name = wl.metadata.name.as_deref().unwrap_or_default();
    let status = wl.status.as_ref();
    let is = |c: &str| status.is_some_and(|s| s.is_condition_true(c));
    let (finished, evicted) = (is(WORKLOAD_FINISHED), is(WORKLOAD_EVICTED));
    let mut plan = Plan::default();
    if finished || evicted {
        // Kueue's CleanupProvisioningRequestsOnEviction (on by default): requests go
        // with the admission they were made for.
        plan.delete = owned
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        return Ok(plan);
    }
    if !is(WORKLOAD_QUOTA_RESERVED) {
        return Ok(plan);
    }
    // The checks whose config is readable and whose pod sets ask the autoscaler for
    // something (Kueue's `reqIsNeeded`), decided once.
    let mut needing = BTreeSet::new();
    for check in checks {
        if let Some(config) = check.config
            && needed(wl, config)?
        {
            needing.insert(check.name);
        }
    }
    let mut latest: BTreeMap<&str, &ProvisioningRequest> = BTreeMap::new();
    for check in checks {
        let Some(config) = check.config.filter(|_| needing.contains(check.name)) else {
            continue;
        };
        for r in owned.iter().filter(|r| in_sync(r, config)) {
            let Some(attempt) = request_attempt(r, name, check.name) else {
                continue;
            };
            let newer = latest
                .get(check.name)
                .and_then(|cur| request_attempt(cur, name, check.name))
                .is_none_or(|cur| cur < attempt);
            if newer {
                latest.insert(check.name, r);
            }
        }
    }
    let current = status
        .map(|s| s.admission_checks.clone())
        .unwrap_or_default();
    let mut states = current.clone();
    for check in checks {
        let Some(state) = states.iter_mut().find(|s| s.name == check.name) else {
            continue;
        };
        let before = state.clone();
        let needs_request = needing.contains(check.name);
        sync_state(
            wl,
            state,
            check,
            needs_request,
            latest.get(check.name).copied(),
        );
        if state.state != before.state {
            state.last_transition_time = now.clone();
            let mut msg = format!(
                "Admission check {} updated state from {} to {}",
                state.name, before.state, state.state
            );
            if !state.message.is_empty() {
                msg.push_str(&format!(" with message: {}", state.message));
            }
            plan.events.push(msg);
        }
    }
    if states != current {
        plan.states = Some(states.clone());
    }
    let keep: BTreeSet<&str> = latest
        .values()
        .filter_map(|r| r.metadata.name.as_deref())
        .collect();
    plan.delete = owned
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .filter(|n| !keep.contains(n.as_str()))
        .collect();
    for check in checks {
        let Some(config) = check.config.filter(|_| needing.contains(check.name)) else {
            continue;
        };
        let state = states.iter().find(|s| s.name == check.name);
        if state.is_some_and(|s| s.state == CheckState::Ready.as_str()) {
            continue;
        }
        let last = latest.get(check.name).copied();
        let attempt = match last {
            None => state.and_then(|s| s.retry_count).unwrap_or(0) + 1,
            Some(r) => {
                let pending = state.is_some_and(|s| s.state == CheckState::Pending.as_str());
                let spent = r.true_condition(condition::FAILED).is_some()
                    || (r.true_condition(condition::BOOKING_EXPIRED).is_some()
                        && !is(WORKLOAD_ADMITTED));
                if !(spent && pending) {
                    continue;
                }
                request_attempt(r, name, check.name).unwrap_or(1) + 1
            }
        };
        plan.create
            .push(new_request(wl, check.name, config, attempt, template_of)?);
    }
    Ok(plan)
}

fn request_attempt(r: &ProvisioningRequest, workload: &str, check: &str) -> Option<i32> {
    request::attempt_of(r.metadata.name.as_deref()?, workload, check)
}

/// Kueue's `provReqSyncedWithConfig`: the request was made with the config as it is now.
fn in_sync(r: &ProvisioningRequest, config: &ProvisioningRequestConfigSpec) -> bool {
    r.spec.provisioning_class_name == config.provisioning_class_name
        && config
            .parameters
            .iter()
            .all(|(k, v)| r.spec.parameters.get(k) == Some(v))
}

/// Whether pod set `ps` asks for a resource the autoscaler provides.
fn uses_managed(ps: &PodSet, managed: &[String]) -> bool {
    if managed.is_empty() {
        return true;
    }
    let Some(spec) = &ps.template.spec else {
        return false;
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    containers.into_iter().any(|c| {
        let r = c.resources.as_ref();
        let named = |m: Option<&BTreeMap<String, _>>| {
            m.is_some_and(|m| managed.iter().any(|name| m.contains_key(name)))
        };
        r.is_some_and(|r| named(r.requests.as_ref()) || named(r.limits.as_ref()))
    })
}

/// Kueue's `reqIsNeeded`: some pod set that uses a managed resource is admitted with pods.
fn needed(wl: &Workload, config: &ProvisioningRequestConfigSpec) -> Result<bool, PlanError> {
    Ok(pod_sets_to_provision(wl, config)?
        .iter()
        .any(|(_, count)| *count > 0))
}

/// The pod sets the autoscaler is asked for, with their admitted counts.
fn pod_sets_to_provision<'w>(
    wl: &'w Workload,
    config: &ProvisioningRequestConfigSpec,
) -> Result<Vec<(&'w PodSet, i32)>, PlanError> {
    let assignments = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map(|a| a.pod_set_assignments.as_slice())
        .unwrap_or_default();
    let mut out = Vec::new();
    for ps in &wl.spec.pod_sets {
        if ps.count <= 0 || !uses_managed(ps, &config.managed_resources) {
            continue;
        }
        let psa = assignments
            .iter()
            .find(|a| a.name == ps.name)
            .ok_or_else(|| PlanError::MissingAssignment(ps.name.clone()))?;
        out.push((ps, psa.count.unwrap_or(ps.count)));
    }
    Ok(out)
}

/// Kueue's `syncCheckStates` for one check.
fn sync_state(
    wl: &Workload,
    state: &mut AdmissionCheckState,
    check: &Check<'_>,
    needs_request: bool,
    request: Option<&ProvisioningRequest>,
) {
    let Some(config) = check.config else {
        state.state = CheckState::Pending.as_str().into();
        state.message = CHECK_INACTIVE.into();
        return;
    };
    if !needs_request {
        if state.state != CheckState::Ready.as_str() {
            state.state = CheckState::Ready.as_str().into();
            state.message = NO_REQUEST_NEEDED.into();
            state.pod_set_updates.clear();
        }
        return;
    }
    let Some(r) = request else { return };
    let name = wl.metadata.name.as_deref().unwrap_or_default();
    let attempt = request_attempt(r, name, check.name).unwrap_or(1);
    let retry = config.retry();
    let status = wl.status.as_ref();
    let is = |c: &str| status.is_some_and(|s| s.is_condition_true(c));
    let retry_or_reject = |state: &mut AdmissionCheckState, what: &str, message: &str| {
        if attempt <= retry.limit {
            state.message = format!("Retrying after {what}: {message}");
            if attempt > state.retry_count.unwrap_or(0) {
                state.state = CheckState::Retry.as_str().into();
                let n = state.retry_count.unwrap_or(0).saturating_add(1);
                state.requeue_after_seconds = Some(retry.delay_seconds(n));
            }
        } else {
            state.state = CheckState::Rejected.as_str().into();
            state.message = message.into();
        }
    };
    if let Some(m) = r.true_condition(condition::FAILED) {
        retry_or_reject(state, "failure", m);
    } else if let Some(m) = r.true_condition(condition::CAPACITY_REVOKED) {
        if wl.spec.is_active() && !is(WORKLOAD_FINISHED) {
            // Its nodes are gone: replacement pods would wait for ever.
            state.state = CheckState::Rejected.as_str().into();
            state.message = m.into();
        }
    } else if let Some(m) = r.true_condition(condition::BOOKING_EXPIRED) {
        if !is(WORKLOAD_ADMITTED) {
            retry_or_reject(state, "booking expired", m);
        }
    } else if let Some(m) = r.true_condition(condition::PROVISIONED) {
        if state.state != CheckState::Ready.as_str() {
            state.state = CheckState::Ready.as_str().into();
            state.pod_set_updates = pod_set_updates(wl, r, config);
            state.message = m.into();
        }
    } else if r.true_condition(condition::ACCEPTED).is_some() {
        if let Some(m) = r.condition_message(condition::PROVISIONED) {
            // The autoscaler's progress (an ETA, for example) shown on the Workload.
            state.message = m.into();
            state.state = CheckState::Pending.as_str().into();
        }
    } else {
        state.message.clear();
        state.state = CheckState::Pending.as_str().into();
    }
}

/// Kueue's `podSetUpdates`: the pods consume the request, and get the node selector
/// entries the config takes from the autoscaler's class details.
fn pod_set_updates(
    wl: &Workload,
    r: &ProvisioningRequest,
    config: &ProvisioningRequestConfigSpec,
) -> Vec<PodSetUpdate> {
    let name = r.metadata.name.clone().unwrap_or_default();
    let details = r.status.as_ref().map(|s| &s.provisioning_class_details);
    let node_selector: BTreeMap<String, String> = config
        .pod_set_updates
        .iter()
        .flat_map(|u| &u.node_selector)
        .filter_map(|ns| {
            let value = details?.get(&ns.value_from_provisioning_class_detail)?;
            Some((ns.key.clone(), value.clone()))
        })
        .collect();
    let in_request: BTreeSet<&str> = r
        .spec
        .pod_sets
        .iter()
        .map(|p| p.pod_template_ref.name.as_str())
        .collect();
    wl.spec
        .pod_sets
        .iter()
        .filter(|ps| in_request.contains(request::template_name(&name, &ps.name).as_str()))
        .map(|ps| PodSetUpdate {
            name: ps.name.clone(),
            annotations: BTreeMap::from([
                (CONSUME_ANNOTATION.to_string(), name.clone()),
                (
                    CLASS_ANNOTATION.to_string(),
                    r.spec.provisioning_class_name.clone(),
                ),
            ]),
            node_selector: node_selector.clone(),
            ..PodSetUpdate::default()
        })
        .collect()
}

/// The request of attempt `attempt` for `check`, with its pod templates.
fn new_request(
    wl: &Workload,
    check: &str,
    config: &ProvisioningRequestConfigSpec,
    attempt: i32,
    template_of: &dyn Fn(&PodSet) -> PodTemplateSpec,
) -> Result<NewRequest, PlanError> {
    let workload = wl.metadata.name.as_deref().unwrap_or_default();
    let name = request::request_name(workload, check, attempt);
    let mut parameters = config.parameters.clone();
    for (k, v) in wl.metadata.annotations.iter().flatten() {
        if let Some(param) = k.strip_prefix(PARAMETER_ANNOTATION_PREFIX) {
            parameters.insert(param.to_string(), v.clone());
        }
    }
    let mut merged: Vec<(&PodSet, i32)> = Vec::new();
    for (ps, count) in pod_sets_to_provision(wl, config)? {
        if count <= 0 {
            continue;
        }
        let policy = config.pod_set_merge_policy;
        match merged.iter_mut().find(|(m, _)| mergeable(m, ps, policy)) {
            Some((_, total)) => *total = total.saturating_add(count),
            None => merged.push((ps, count)),
        }
    }
    let mut templates = Vec::with_capacity(merged.len());
    let mut pod_sets = Vec::with_capacity(merged.len());
    for (ps, count) in merged {
        let template_name = request::template_name(&name, &ps.name);
        templates.push((template_name.clone(), limits_as_requests(template_of(ps))));
        pod_sets.push(RequestPodSet {
            pod_template_ref: TemplateRef {
                name: template_name,
            },
            count,
        });
    }
    Ok(NewRequest {
        name,
        spec: ProvisioningRequestSpec {
            provisioning_class_name: config.provisioning_class_name.clone(),
            parameters,
            pod_sets,
        },
        templates,
    })
}

/// Kueue's `canMergePodSets`.
fn mergeable(a: &PodSet, b: &PodSet, policy: Option<PodSetMergePolicy>) -> bool {
    match policy {
        None => false,
        Some(PodSetMergePolicy::IdenticalPodTemplates) => a.template == b.template,
        Some(PodSetMergePolicy::IdenticalWorkloadSchedulingRequirements) => {
            let (Some(x), Some(y)) = (&a.template.spec, &b.template.spec) else {
                return a.template.spec == b.template.spec;
            };
            let resources = |cs: &[k8s_openapi::api::core::v1::Container]| -> Vec<Value> {
                cs.iter()
                    .map(|c| serde_json::to_value(&c.resources).unwrap_or(Value::Null))
                    .collect()
            };
            let init = |s: &k8s_openapi::api::core::v1::PodSpec| {
                resources(s.init_containers.as_deref().unwrap_or_default())
            };
            resources(&x.containers) == resources(&y.containers)
                && init(x) == init(y)
                && x.resources == y.resources
                && x.node_selector == y.node_selector
                && x.tolerations == y.tolerations
                && x.affinity == y.affinity
                && x.resource_claims == y.resource_claims
        }
    }
}

/// Kueue's `UseLimitsAsMissingRequestsInPod`: a container's limit stands for its missing
/// request, as the API server defaults it for a pod.
fn limits_as_requests(mut t: PodTemplateSpec) -> PodTemplateSpec {
    let Some(spec) = t.spec.as_mut() else {
        return t;
    };
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let Some(r) = c.resources.as_mut() else {
            continue;
        };
        let Some(limits) = r.limits.clone() else {
            continue;
        };
        let requests = r.requests.get_or_insert_with(BTreeMap::new);
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
    t
}
