//! Mutation and validation of job kinds (Job, JobSet, PyTorchJob, MPIJob, RayJob,
//! RayCluster, Pod), the generic half of Kueue's job framework webhooks plus kuota's
//! policies.
//!
//! Everything kind-specific comes from the [`JobIntegration`] trait; this module never
//! matches on a kind.
//!
//! A kind whose framework is not enabled in `integrations.frameworks` is allowed as it
//! is, never mutated nor validated (Kueue's no-op webhooks for disabled frameworks).
//!
//! Mutation (CREATE only, like Kueue's `mjob.kb.io` family):
//! 1. jobs whose controller owner is itself a managed job kind are left alone (the owner is
//!    admitted, not its children);
//! 2. a job without a queue name gets one: the matching policy's `defaultLocalQueue`, else
//!    `default` when the namespace is managed and has a LocalQueue named `default`;
//! 3. a managed job without a priority class gets `default` when that WorkloadPriorityClass
//!    exists;
//! 4. a managed job (queue name, or `manageJobsWithoutQueueName` in a managed namespace) is
//!    suspended the kind's way (`spec.suspend`, `runPolicy.suspend`, pod scheduling gate),
//!    and gets the kind's own defaults (an MPIJob's worker pod index offset).
//!
//! Every step is a no-op on an object that already has what it would add, so a second pass
//! over the mutated object yields an empty patch (reinvocationPolicy: IfNeeded).
//!
//! Validation (CREATE and UPDATE): Kueue's job-framework rules (queue name and prebuilt
//! workload names are DNS subdomains, max execution time, what may not change on a running
//! job), the kind's own rules, then kuota's policies (403).

use super::WebhookState;
use super::review::{AdmissionRequest, Operation, Verdict};
use super::routing::MANAGED_NAMESPACE_LABEL;
use crate::api::MULTIKUEUE_CONTROLLER;
use crate::api::constants::{
    ELASTIC_JOB_ANNOTATION, ELASTIC_JOB_ANNOTATION_VALUE, MAX_EXEC_TIME_SECONDS_LABEL,
    PREBUILT_WORKLOAD_LABEL, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, elastic_job_warning,
};
use crate::api::quantity::resource_value_str;
use crate::api::validate::{FIELD_IMMUTABLE_MSG, FieldError, Path, job_name_label_errors};
use crate::integrations::object::{ContainerView, SpecView};
use crate::integrations::{
    self, JobIntegration, JobObject, PatchBuilder, RuleOptions, is_managed_owner_kind,
    max_execution_time,
};
use crate::policy::{self, GPU_PRODUCT_ANNOTATION, JobFacts, PodSetFacts};
use std::collections::BTreeMap;

/// Warning added when the index has not synced and a step needing it was skipped.
const NOT_SYNCED: &str = "kuota: the cluster index is not synced yet";

fn labels_path() -> Path {
    Path::new("metadata").child("labels")
}

/// Joins field errors like Kubernetes' aggregate: one error as is, several in brackets.
pub(crate) fn aggregate(errs: &[FieldError]) -> String {
    match errs {
        [one] => one.to_string(),
        many => {
            let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

/// Checks that the object under review is of the kind the route serves.
fn check_kind(integ: &dyn JobIntegration, job: &JobObject<'_>) -> Result<(), Verdict> {
    let (Some(av), Some(kind)) = (&job.api_version, &job.kind) else {
        return Ok(());
    };
    let gvk = integ.gvk();
    if gvk.kind == kind.as_str() && gvk.api_version() == av.as_str() {
        return Ok(());
    }
    Err(Verdict::bad_object(format!(
        "request.object: this endpoint serves {} {}, got {av} {kind}",
        gvk.api_version(),
        gvk.kind
    )))
}

fn owner_is_managed(job: &JobObject<'_>) -> bool {
    job.metadata
        .controller_owner()
        .is_some_and(|o| is_managed_owner_kind(&o.api_version, &o.kind))
}

fn namespace_of<'o>(
    req: &'o AdmissionRequest<'_, JobObject<'_>>,
    job: &'o JobObject<'_>,
) -> &'o str {
    match job.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns,
        _ => req.namespace.as_deref().unwrap_or_default(),
    }
}

/// The mutating handler.
pub fn mutate(
    state: &WebhookState,
    integ: &dyn JobIntegration,
    req: &AdmissionRequest<'_, JobObject<'_>>,
) -> Verdict {
    if req.operation != Operation::Create || !state.config.enables(integ) {
        return Verdict::allow();
    }
    let Some(job) = req.object.as_ref() else {
        return Verdict::bad_object("request.object: required for CREATE");
    };
    if let Err(v) = check_kind(integ, job) {
        return v;
    }
    if !job.metadata.present {
        return Verdict::bad_object("request.object.metadata: Required value");
    }
    let mut patch = PatchBuilder::new();
    if integ.suspended_by_parent(job) {
        integ.suspend(job, &mut patch);
        return Verdict::patched(patch.into_ops(), Vec::new());
    }
    let index = &state.index;
    let config = &state.config;
    let synced = index.is_synced();
    let ns = namespace_of(req, job);
    let ns_managed = index.is_namespace_managed(ns);
    if (integ.requires_managed_namespace() && !ns_managed) || owner_is_managed(job) {
        return Verdict::allow();
    }
    let labels_exist = job.metadata.labels.is_some();
    if policies_only(state, req, job, None) {
        // Only a policy's default LocalQueue applies here (see `policies_only`); a job
        // that gets one is then kuota's like any job naming a queue.
        let policies = state.policies.current();
        if policies
            .default_local_queue(&index.namespace_labels(ns))
            .is_none()
        {
            return Verdict::allow();
        }
    }
    let mut warnings = Vec::new();

    let mut queue = integrations::queue_name(job).map(str::to_string);
    let mut has_queue = queue.is_some();
    if !has_queue {
        let policies = state.policies.current();
        let ns_labels = (!policies.is_empty()).then(|| index.namespace_labels(ns));
        let from_policy = ns_labels
            .as_deref()
            .and_then(|l| policies.default_local_queue(l));
        if let Some((_, from)) = from_policy {
            patch.set_entry(
                &["metadata", "labels"],
                labels_exist,
                QUEUE_NAME_LABEL,
                from.into(),
            );
            queue = Some(from.to_string());
            has_queue = true;
        } else if config.local_queue_defaulting && ns_managed {
            if !synced {
                warnings.push(format!(
                    "{NOT_SYNCED}; the queue-name label was not defaulted"
                ));
            } else if index.has_default_local_queue(ns) {
                patch.set_entry(
                    &["metadata", "labels"],
                    labels_exist,
                    QUEUE_NAME_LABEL,
                    crate::webhook::index::DEFAULT_LOCAL_QUEUE_NAME.into(),
                );
                queue = Some(crate::webhook::index::DEFAULT_LOCAL_QUEUE_NAME.to_string());
                has_queue = true;
            }
        }
    }

    let managed = has_queue || (config.manage_jobs_without_queue_name && ns_managed);
    if managed && config.workload_priority_class_defaulting && ns_managed {
        let has_class = job
            .label(PRIORITY_CLASS_LABEL)
            .is_some_and(|c| !c.is_empty());
        if !has_class {
            if !synced {
                warnings.push(format!(
                    "{NOT_SYNCED}; the priority-class label was not defaulted"
                ));
            } else if index.has_default_priority_class() {
                patch.set_entry(
                    &["metadata", "labels"],
                    labels_exist,
                    PRIORITY_CLASS_LABEL,
                    crate::webhook::index::DEFAULT_PRIORITY_CLASS_NAME.into(),
                );
            }
        }
    }
    if managed {
        integ.suspend(job, &mut patch);
        let opts = RuleOptions {
            manage_jobs_without_queue_name: config.manage_jobs_without_queue_name,
            topology_aware_scheduling: config.topology_aware_scheduling,
        };
        integ.default_on_create(job, &opts, &mut patch);
        // Kueue's `ApplyDefaultForManagedBy`: a job whose queue dispatches through
        // MultiKueue is left to MultiKueue, not to the kind's own controller.
        if let Some(q) = &queue
            && integ.may_default_managed_by(job)
            && index.uses_multikueue(ns, q)
        {
            patch.set_entry(&["spec"], true, "managedBy", MULTIKUEUE_CONTROLLER.into());
        }
    } else if config.manage_jobs_without_queue_name && !synced {
        warnings.push(format!(
            "{NOT_SYNCED}; cannot tell whether namespace {ns:?} is managed, so the job was not suspended"
        ));
    }
    Verdict::patched(patch.into_ops(), warnings)
}

/// The validating handler.
pub fn validate(
    state: &WebhookState,
    integ: &dyn JobIntegration,
    req: &AdmissionRequest<'_, JobObject<'_>>,
) -> Verdict {
    if !state.config.enables(integ) {
        return Verdict::allow();
    }
    let opts = RuleOptions {
        manage_jobs_without_queue_name: state.config.manage_jobs_without_queue_name,
        topology_aware_scheduling: state.config.topology_aware_scheduling,
    };
    let (job, old) = match req.operation {
        Operation::Create => match req.object.as_ref() {
            Some(j) => (j, None),
            None => return Verdict::bad_object("request.object: required for CREATE"),
        },
        Operation::Update => match (req.object.as_ref(), req.old_object.as_ref()) {
            (Some(j), Some(o)) => (j, Some(o)),
            (None, _) => return Verdict::bad_object("request.object: required for UPDATE"),
            (_, None) => return Verdict::bad_object("request.oldObject: required for UPDATE"),
        },
        Operation::Delete | Operation::Connect => return Verdict::allow(),
    };
    if let Err(v) = check_kind(integ, job) {
        return v;
    }
    if policies_only(state, req, job, old) {
        let violations = check_policies(state, integ, req, job, old);
        if violations.is_empty() {
            return Verdict::allow();
        }
        let msgs: Vec<String> = violations.iter().map(ToString::to_string).collect();
        return Verdict::forbidden(msgs.join("; "));
    }
    let mut errs = generic_create_rules(job);
    match old {
        None => errs.extend(integ.validate_create(job, &opts)),
        Some(old) => {
            errs.extend(generic_update_rules(
                state,
                integ,
                old,
                job,
                namespace_of(req, job),
            ));
            errs.extend(integ.validate_update(old, job, &opts));
        }
    }
    let mut warnings = integ.warnings(job);
    if job.metadata.annotation(ELASTIC_JOB_ANNOTATION) == Some(ELASTIC_JOB_ANNOTATION_VALUE) {
        warnings.push(elastic_job_warning(
            req.kind.kind.as_str(),
            namespace_of(req, job),
            job.metadata.name.as_deref().unwrap_or_default(),
        ));
    }
    if !errs.is_empty() {
        return Verdict::invalid(aggregate(&errs)).with_warnings(warnings);
    }
    let violations = check_policies(state, integ, req, job, old);
    if !violations.is_empty() {
        let msgs: Vec<String> = violations.iter().map(ToString::to_string).collect();
        return Verdict::forbidden(msgs.join("; ")).with_warnings(warnings);
    }
    Verdict::patched(Vec::new(), warnings)
}

/// Whether the job is one only the `v<kind>-policy.kuota.dev` entries send: no queue name
/// (before or after an update) in a namespace not labelled `kuota.dev/managed=true`. Those
/// entries fail open (`failurePolicy: Ignore`), so what kuota says about such a job is
/// what its admission policies say and nothing more: an outage then changes nothing but
/// the policing, and a namespace a policy selects is policed whatever its labels. Before
/// the index has synced the namespace's labels are unknown, and the job gets the full
/// validation it would get in a managed namespace.
fn policies_only(
    state: &WebhookState,
    req: &AdmissionRequest<'_, JobObject<'_>>,
    job: &JobObject<'_>,
    old: Option<&JobObject<'_>>,
) -> bool {
    let unlabelled = |j: &JobObject<'_>| j.label(QUEUE_NAME_LABEL).is_none();
    if !unlabelled(job) || !old.is_none_or(unlabelled) || !state.index.is_synced() {
        return false;
    }
    let ns_labels = state.index.namespace_labels(namespace_of(req, job));
    ns_labels.get(MANAGED_NAMESPACE_LABEL).map(String::as_str) != Some("true")
}

/// Kueue's `ValidateJobOnCreate`: queue and prebuilt workload names are DNS subdomains, the
/// max execution time a positive integer.
fn generic_create_rules(job: &JobObject<'_>) -> Vec<FieldError> {
    let mut errs = job_name_label_errors(|key| job.label(key));
    if let Err(e) = max_execution_time(job.label(MAX_EXEC_TIME_SECONDS_LABEL)) {
        errs.push(e);
    }
    errs
}

/// Kueue's `ValidateJobOnUpdate`: what may not change while the job runs.
fn generic_update_rules(
    state: &WebhookState,
    integ: &dyn JobIntegration,
    old: &JobObject<'_>,
    new: &JobObject<'_>,
    ns: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let new_suspended = integ.is_suspended(new);
    let old_suspended = integ.is_suspended(old);
    let label = |j: &JobObject<'_>, k: &str| j.label(k).unwrap_or_default().to_string();
    let immutable = |key: &str, value: &str| {
        FieldError::invalid(&labels_path().key(key), value, FIELD_IMMUTABLE_MSG)
    };
    let (old_q, new_q) = (
        integrations::queue_name(old).unwrap_or_default(),
        integrations::queue_name(new).unwrap_or_default(),
    );
    if !new_suspended && old_q != new_q {
        errs.push(immutable(QUEUE_NAME_LABEL, new_q));
    }
    if new_q.is_empty()
        && !old_q.is_empty()
        && state.index.is_synced()
        && state.index.has_default_local_queue(ns)
    {
        errs.push(FieldError::invalid(
            &labels_path().key(QUEUE_NAME_LABEL),
            "",
            "queue-name must not be empty in namespace with default queue",
        ));
    }
    if !new_suspended && label(old, PREBUILT_WORKLOAD_LABEL) != label(new, PREBUILT_WORKLOAD_LABEL)
    {
        errs.push(immutable(
            PREBUILT_WORKLOAD_LABEL,
            &label(new, PREBUILT_WORKLOAD_LABEL),
        ));
    }
    if (!new_suspended || !old_suspended)
        && label(old, MAX_EXEC_TIME_SECONDS_LABEL) != label(new, MAX_EXEC_TIME_SECONDS_LABEL)
    {
        errs.push(immutable(
            MAX_EXEC_TIME_SECONDS_LABEL,
            &label(new, MAX_EXEC_TIME_SECONDS_LABEL),
        ));
    }
    let (old_pc, new_pc) = (
        label(old, PRIORITY_CLASS_LABEL),
        label(new, PRIORITY_CLASS_LABEL),
    );
    let pc_path = labels_path().key(PRIORITY_CLASS_LABEL);
    if !new_suspended && old_pc.is_empty() && !new_pc.is_empty() {
        errs.push(FieldError::invalid(
            &pc_path,
            &new_pc,
            "WorkloadPriorityClass cannot be added to a non-suspended workload",
        ));
    }
    if new_pc.is_empty() && !old_pc.is_empty() {
        errs.push(FieldError::invalid(
            &pc_path,
            "",
            "WorkloadPriorityClass cannot be removed from a workload",
        ));
    }
    errs
}

fn check_policies(
    state: &WebhookState,
    integ: &dyn JobIntegration,
    req: &AdmissionRequest<'_, JobObject<'_>>,
    job: &JobObject<'_>,
    old: Option<&JobObject<'_>>,
) -> Vec<policy::Violation> {
    let policies = state.policies.current();
    if policies.is_empty() {
        return Vec::new();
    }
    let ns_labels = state.index.namespace_labels(namespace_of(req, job));
    if policies.matching(&ns_labels).next().is_none() {
        return Vec::new();
    }
    let facts = job_facts(integ, job);
    match old {
        None => policy::eval::evaluate(&policies, &ns_labels, &facts),
        Some(o) => {
            policy::eval::evaluate_update(&policies, &ns_labels, &job_facts(integ, o), &facts)
        }
    }
}

/// What policies need to know about a job, read from its pod sets.
pub fn job_facts(integ: &dyn JobIntegration, job: &JobObject<'_>) -> JobFacts {
    let labels = job
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let pod_sets = integ
        .pod_sets(job)
        .into_iter()
        .map(|ps| PodSetFacts {
            name: ps.name.to_string(),
            count: i64::from(ps.count),
            requests: ps.spec.map(pod_requests).unwrap_or_default(),
            node_label_values: ps.spec.map(node_label_values).unwrap_or_default(),
        })
        .collect();
    JobFacts {
        kind: integ.kind(),
        name: job.metadata.display_name(),
        labels,
        flavor: job
            .annotation(policy::FLAVOR_ANNOTATION)
            .map(str::to_string),
        gpu_product: job.annotation(GPU_PRODUCT_ANNOTATION).map(str::to_string),
        pod_sets,
    }
}

/// Effective per-pod requests in Kueue's units (cpu in milli, the rest whole and rounded
/// up, clamped at i64::MAX so a huge request still counts), as the scheduler counts them: the larger of
/// the containers' sum and any one init container, plus overhead. A limit stands in for a
/// missing request (Kubernetes defaults requests to limits). Unparsable quantities are left
/// to the API server's own validation and ignored here.
fn pod_requests(spec: &SpecView<'_>) -> BTreeMap<String, i64> {
    fn container_requests<'c>(c: &'c ContainerView<'_>) -> BTreeMap<&'c str, i64> {
        let mut out = BTreeMap::new();
        let Some(r) = &c.resources else {
            return out;
        };
        for (k, v) in r.requests.iter().flatten() {
            if let Ok(q) = resource_value_str(k, v) {
                out.insert(k.as_str(), q);
            }
        }
        for (k, v) in r.limits.iter().flatten() {
            if !out.contains_key(k.as_str())
                && let Ok(q) = resource_value_str(k, v)
            {
                out.insert(k.as_str(), q);
            }
        }
        out
    }
    let mut sum: BTreeMap<String, i64> = BTreeMap::new();
    for c in spec.containers.iter().flatten() {
        for (k, v) in container_requests(c) {
            let e = sum.entry(k.to_string()).or_insert(0);
            *e = e.saturating_add(v);
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in container_requests(c) {
            let e = sum.entry(k.to_string()).or_insert(0);
            *e = (*e).max(v);
        }
    }
    for (k, v) in spec.overhead.iter().flatten() {
        if let Ok(q) = resource_value_str(k, v) {
            let e = sum.entry(k.to_string()).or_insert(0);
            *e = e.saturating_add(q);
        }
    }
    sum
}

fn node_label_values(spec: &SpecView<'_>) -> BTreeMap<String, Vec<String>> {
    let mut keys: Vec<&str> = spec
        .node_selector
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    for t in terms.iter().flat_map(|t| t.node_selector_terms.iter()) {
        for r in t.match_expressions.iter().flatten() {
            keys.push(r.key.as_str());
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let vals = spec
                .required_node_label_values(k)
                .into_iter()
                .map(str::to_string)
                .collect();
            (k.to_string(), vals)
        })
        .filter(|(_, v): &(String, Vec<String>)| !v.is_empty())
        .collect()
}
