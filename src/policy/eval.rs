//! Pure policy evaluation: which policies apply to a namespace, the default LocalQueue they
//! give, and which rules a job breaks. No I/O, no clock.

use super::spec::{Policy, PolicySet};
use crate::api::selector::{Labels, label_selector_matches};
use std::collections::BTreeMap;
use std::fmt;

/// Job annotation naming the ResourceFlavor the job wants (checked by `allowedFlavors`).
pub const FLAVOR_ANNOTATION: &str = "kuota.dev/flavor";
/// Job annotation naming the GPU model the job wants (checked by `allowedGPUProducts`).
pub const GPU_PRODUCT_ANNOTATION: &str = "kuota.dev/gpu-product";

/// What policies need to know about a job; built by the webhook from the object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFacts {
    /// Kind, e.g. `Job`.
    pub kind: String,
    /// Name (or `generateName*`).
    pub name: String,
    /// Job labels.
    pub labels: BTreeMap<String, String>,
    /// The `kuota.dev/flavor` annotation.
    pub flavor: Option<String>,
    /// The `kuota.dev/gpu-product` annotation.
    pub gpu_product: Option<String>,
    /// Pod sets.
    pub pod_sets: Vec<PodSetFacts>,
}

/// What policies need to know about one pod set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSetFacts {
    /// Pod set name.
    pub name: String,
    /// Pods.
    pub count: i64,
    /// Effective requests of one pod in Kueue's units: cpu in milli, the rest whole (max of
    /// init containers and the sum of containers, plus overhead; a limit stands in for a
    /// missing request).
    pub requests: BTreeMap<String, i64>,
    /// Values the pod requires for node labels: `nodeSelector` and required `In` affinity.
    pub node_label_values: BTreeMap<String, Vec<String>>,
}

impl PodSetFacts {
    /// Whole GPUs one pod of this set requests, counting `resources`.
    pub fn gpus_per_pod(&self, resources: &[String]) -> i64 {
        resources
            .iter()
            .filter_map(|r| self.requests.get(r))
            .fold(0i64, |a, b| a.saturating_add(*b))
    }
}

impl JobFacts {
    /// GPUs over all pods: sum of count × per-pod GPUs.
    pub fn total_gpus(&self, resources: &[String]) -> i64 {
        self.pod_sets
            .iter()
            .map(|ps| ps.count.saturating_mul(ps.gpus_per_pod(resources)))
            .fold(0i64, i64::saturating_add)
    }

    /// Most GPUs any one pod requests.
    pub fn max_gpus_per_pod(&self, resources: &[String]) -> i64 {
        self.pod_sets
            .iter()
            .map(|ps| ps.gpus_per_pod(resources))
            .max()
            .unwrap_or(0)
    }
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Policy name.
    pub policy: String,
    /// Where the policy was defined (`file:line`).
    pub source: String,
    /// Rule name as written in the file, e.g. `maxGPUsPerJob`.
    pub rule: &'static str,
    /// What the job does wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "policy {:?} ({}) rule {}: {}",
            self.policy, self.source, self.rule, self.message
        )
    }
}

/// Which rules to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every rule (job creation).
    All,
    /// Only GPU limits, and only if the job now asks for more than before (job updates, so
    /// a running job is not stopped by a policy tightened after it was admitted).
    GrowthSince,
}

impl PolicySet {
    /// Policies whose namespace selector matches the namespace's labels, in order.
    pub fn matching<'a>(&'a self, ns_labels: &'a Labels) -> impl Iterator<Item = &'a Policy> + 'a {
        self.policies
            .iter()
            .filter(move |p| label_selector_matches(p.selector(), ns_labels))
    }

    /// The first matching policy's default LocalQueue.
    pub fn default_local_queue<'a>(
        &'a self,
        ns_labels: &'a Labels,
    ) -> Option<(&'a Policy, &'a str)> {
        self.matching(ns_labels)
            .find_map(|p| Some((p, p.spec.default_local_queue.as_deref()?)))
    }
}

/// Checks a job being created against every matching policy.
pub fn evaluate(set: &PolicySet, ns_labels: &Labels, job: &JobFacts) -> Vec<Violation> {
    set.matching(ns_labels)
        .flat_map(|p| check(p, job, None))
        .collect()
}

/// Checks a job update: only GPU limits, only when the job grew.
pub fn evaluate_update(
    set: &PolicySet,
    ns_labels: &Labels,
    old: &JobFacts,
    new: &JobFacts,
) -> Vec<Violation> {
    set.matching(ns_labels)
        .flat_map(|p| check(p, new, Some(old)))
        .collect()
}

fn violation(p: &Policy, rule: &'static str, message: String) -> Violation {
    Violation {
        policy: p.name.clone(),
        source: p.source.to_string(),
        rule,
        message,
    }
}

fn resources_label(resources: &[String]) -> String {
    resources.join("+")
}

/// The rules of `p` that `job` breaks; with `old` (an update) only the GPU limits.
fn check(p: &Policy, job: &JobFacts, old: Option<&JobFacts>) -> Vec<Violation> {
    let mut out = Vec::new();
    let what = format!("{} {:?}", job.kind, job.name);
    check_max_gpus_per_job(p, job, old, &what, &mut out);
    check_max_gpus_per_pod(p, job, old, &what, &mut out);
    // An update is judged on GPU growth alone: the other rules held when the job was
    // created, and re-checking them could stop a running job after a policy changed.
    if old.is_some() {
        return out;
    }
    check_allowed_flavors(p, job, &what, &mut out);
    check_allowed_gpu_products(p, job, &what, &mut out);
    check_required_labels(p, job, &what, &mut out);
    out
}

/// `maxGPUsPerJob`: the job's GPUs over all pods, when new or grown since `old`.
fn check_max_gpus_per_job(
    p: &Policy,
    job: &JobFacts,
    old: Option<&JobFacts>,
    what: &str,
    out: &mut Vec<Violation>,
) {
    let Some(max) = p.spec.max_gpus_per_job else {
        return;
    };
    let res = &p.spec.gpu_resources;
    let total = job.total_gpus(res);
    let grew = old.is_none_or(|o| total > o.total_gpus(res));
    if total > i64::from(max) && grew {
        let parts: Vec<String> = job
            .pod_sets
            .iter()
            .filter(|ps| ps.gpus_per_pod(res) > 0)
            .map(|ps| format!("{} × {} ({})", ps.count, ps.gpus_per_pod(res), ps.name))
            .collect();
        out.push(violation(
            p,
            "maxGPUsPerJob",
            format!(
                "{what} requests {total} {} ({}), more than the {max} allowed per job",
                resources_label(res),
                parts.join(" + ")
            ),
        ));
    }
}

/// `maxGPUsPerPod`: each pod set's per-pod GPUs, when new or above `old`'s largest pod.
fn check_max_gpus_per_pod(
    p: &Policy,
    job: &JobFacts,
    old: Option<&JobFacts>,
    what: &str,
    out: &mut Vec<Violation>,
) {
    let Some(max) = p.spec.max_gpus_per_pod else {
        return;
    };
    let res = &p.spec.gpu_resources;
    for ps in &job.pod_sets {
        let per_pod = ps.gpus_per_pod(res);
        let grew = old.is_none_or(|o| per_pod > o.max_gpus_per_pod(res));
        if per_pod > i64::from(max) && grew {
            out.push(violation(
                p,
                "maxGPUsPerPod",
                format!(
                    "{what} pod set {:?} requests {per_pod} {} per pod, more than the {max} allowed per pod",
                    ps.name,
                    resources_label(res)
                ),
            ));
        }
    }
}

/// `allowedFlavors`: the flavor the job's annotation asks for, if any.
fn check_allowed_flavors(p: &Policy, job: &JobFacts, what: &str, out: &mut Vec<Violation>) {
    if let (Some(allowed), Some(flavor)) = (&p.spec.allowed_flavors, &job.flavor)
        && !allowed.contains(flavor)
    {
        out.push(violation(
            p,
            "allowedFlavors",
            format!(
                "{what} asks for flavor {flavor:?} ({FLAVOR_ANNOTATION}); allowed: {}",
                allowed.join(", ")
            ),
        ));
    }
}

/// `allowedGPUProducts`: every GPU model the job selects, wherever it selects it.
fn check_allowed_gpu_products(p: &Policy, job: &JobFacts, what: &str, out: &mut Vec<Violation>) {
    let Some(allowed) = &p.spec.allowed_gpu_products else {
        return;
    };
    for (product, from) in requested_gpu_products(p, job) {
        if !allowed.iter().any(|a| a == product) {
            out.push(violation(
                p,
                "allowedGPUProducts",
                format!(
                    "{what} selects GPU product {product:?} ({from}); allowed: {}",
                    allowed.join(", ")
                ),
            ));
        }
    }
}

/// The GPU models a job selects, each with where it said so: the annotation first,
/// then each pod set's node selector or required affinity on the policy's product label.
fn requested_gpu_products<'a>(p: &Policy, job: &'a JobFacts) -> Vec<(&'a str, String)> {
    let label = &p.spec.gpu_product_label;
    let mut asked: Vec<(&str, String)> = Vec::new();
    if let Some(g) = &job.gpu_product {
        asked.push((g, format!("annotation {GPU_PRODUCT_ANNOTATION}")));
    }
    for ps in &job.pod_sets {
        for v in ps.node_label_values.get(label).into_iter().flatten() {
            asked.push((
                v,
                format!("pod set {:?} node selector/affinity on {label}", ps.name),
            ));
        }
    }
    asked
}

/// `requiredLabels`: each label present, and with an allowed value when values are listed.
fn check_required_labels(p: &Policy, job: &JobFacts, what: &str, out: &mut Vec<Violation>) {
    for r in &p.spec.required_labels {
        match (job.labels.get(&r.key), &r.values) {
            (None, _) => out.push(violation(
                p,
                "requiredLabels",
                format!("{what} must carry the label {:?}", r.key),
            )),
            (Some(v), Some(allowed)) if !allowed.contains(v) => out.push(violation(
                p,
                "requiredLabels",
                format!(
                    "{what} has label {}={v:?}; allowed values: {}",
                    r.key,
                    allowed.join(", ")
                ),
            )),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(yaml: &str) -> PolicySet {
        PolicySet::from_files([("p.yaml", yaml)]).expect("valid policy")
    }

    fn job(gpus_per_pod: i64, pods: i64) -> JobFacts {
        JobFacts {
            kind: "Job".into(),
            name: "train".into(),
            pod_sets: vec![PodSetFacts {
                name: "main".into(),
                count: pods,
                requests: BTreeMap::from([("nvidia.com/gpu".into(), gpus_per_pod)]),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn gpu_limits_and_growth() {
        let s = set(
            "apiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: g}\nspec:\n  namespaceSelector: {}\n  maxGPUsPerJob: 16\n  maxGPUsPerPod: 8\n",
        );
        let ns = Labels::new();
        assert!(evaluate(&s, &ns, &job(8, 2)).is_empty());
        let v = evaluate(&s, &ns, &job(8, 4));
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].to_string(),
            "policy \"g\" (p.yaml:1) rule maxGPUsPerJob: Job \"train\" requests 32 nvidia.com/gpu (4 × 8 (main)), more than the 16 allowed per job"
        );
        assert_eq!(evaluate(&s, &ns, &job(9, 1))[0].rule, "maxGPUsPerPod");
        // Updates: only growth is checked.
        assert!(evaluate_update(&s, &ns, &job(8, 4), &job(8, 4)).is_empty());
        assert!(evaluate_update(&s, &ns, &job(8, 4), &job(8, 3)).is_empty());
        assert_eq!(evaluate_update(&s, &ns, &job(8, 2), &job(8, 3)).len(), 1);
    }
}
