//! The conformance suites of `tests/scenarios/kueue/*.yaml`: Kueue's own unit-test
//! cases, several per file, with a compact workload form (Kueue's tests build their
//! workloads with builders too). Documented in tests/scenarios/README.md.

use super::Scenario;
use serde::Deserialize;
use serde_norway::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One suite file: the Kueue test file it ports, manifests every case shares, the cases.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Must equal the file name without `.yaml`.
    pub suite: String,
    /// The Kueue test file(s) and function(s) the cases come from.
    pub source: String,
    /// Manifests applied before each case's own `objects`.
    #[serde(default)]
    pub fixtures: String,
    /// Topology strategies every case runs under (a case's own `config.placement`
    /// wins); the first keeps the case's name, the others run as `name@strategy`.
    #[serde(default)]
    pub placements: Vec<super::Placement>,
    pub cases: Vec<Scenario>,
}

/// A workload in the compact form of a `workloads:` step.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// `ns/name`, or `name` in namespace `default`.
    pub name: String,
    /// The ClusterQueue; without `queue`, the workload goes to LocalQueue `<ns>/<cq>`,
    /// which the runner creates (pointing at `cq`) the first time it is named.
    #[serde(default)]
    pub cq: Option<String>,
    /// An existing LocalQueue (from the fixtures or objects) instead of `<ns>/<cq>`.
    #[serde(default)]
    pub queue: Option<String>,
    #[serde(default)]
    pub priority: Option<i32>,
    /// Per-pod requests of the single pod set `main` (with `count`, `minCount`).
    #[serde(default)]
    pub requests: BTreeMap<String, Value>,
    #[serde(default)]
    pub count: Option<i32>,
    #[serde(default)]
    pub min_count: Option<i32>,
    /// Several pod sets instead of `requests`/`count`.
    #[serde(default)]
    pub pod_sets: Vec<PodSetSpec>,
    /// Restore as admitted in `cq` (status.admission): one flavor for every
    /// resource, or resource -> flavor; the same for every pod set.
    #[serde(default)]
    pub admitted: Option<FlavorsSpec>,
    /// Extra `metadata.annotations` / `labels`, verbatim.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodSetSpec {
    pub name: String,
    #[serde(default)]
    pub count: Option<i32>,
    #[serde(default)]
    pub min_count: Option<i32>,
    pub requests: BTreeMap<String, Value>,
    /// Extra pod-template annotations (topology requests), verbatim.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The pod template's `nodeSelector`, verbatim.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// The pod template's `affinity`, verbatim.
    #[serde(default)]
    pub affinity: Option<Value>,
    /// Flavors of this pod set when restored as admitted (overrides `admitted`).
    #[serde(default)]
    pub admitted: Option<FlavorsSpec>,
}

/// `flavor` (every resource) or `{resource: flavor}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum FlavorsSpec {
    All(String),
    Each(BTreeMap<String, String>),
}

impl FlavorsSpec {
    fn flavor_of(&self, resource: &str) -> Option<&str> {
        match self {
            FlavorsSpec::All(f) => Some(f),
            FlavorsSpec::Each(m) => m.get(resource).map(String::as_str),
        }
    }
}

/// Parses a suite file; the error names the path of the offending field.
pub fn parse(text: &str) -> Result<Suite, String> {
    let de = serde_norway::Deserializer::from_str(text);
    let suite: Suite = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        format!("at `{path}`: {}", e.into_inner())
    })?;
    if suite.source.trim().is_empty() {
        return Err("`source` must name the Kueue test file and function".into());
    }
    for (i, sc) in suite.cases.iter().enumerate() {
        super::validate(sc).map_err(|e| format!("at `cases[{i}]` ({}): {e}", sc.name))?;
    }
    Ok(suite)
}

fn quantity(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("not a quantity: {other:?}")),
    }
}

/// `count × per-pod` as a quantity string, in milli-units (exact for any quantity).
fn times(per_pod: &str, count: i32) -> Result<String, String> {
    let m = kuota::api::quantity::parse_milli_str(per_pod)
        .map_err(|e| format!("quantity `{per_pod}`: {e}"))?;
    Ok(format!("{}m", m * i64::from(count)))
}

/// The Workload manifest (YAML) of a compact spec, in LocalQueue `<ns>/<cq>`.
pub fn manifest(spec: &WorkloadSpec) -> Result<String, String> {
    let (ns, name) = spec.name.split_once('/').unwrap_or(("default", &spec.name));
    let queue = spec
        .queue
        .as_ref()
        .or(spec.cq.as_ref())
        .ok_or("needs `cq` or `queue`")?;
    let single;
    let pod_sets: &[PodSetSpec] = if spec.pod_sets.is_empty() {
        single = [PodSetSpec {
            name: "main".into(),
            count: spec.count,
            min_count: spec.min_count,
            requests: spec.requests.clone(),
            annotations: BTreeMap::new(),
            node_selector: BTreeMap::new(),
            affinity: None,
            admitted: None,
        }];
        &single
    } else {
        &spec.pod_sets
    };
    let mut y = String::new();
    let _ = writeln!(y, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload");
    let _ = writeln!(y, "metadata:\n  namespace: {ns}\n  name: {name}");
    for (field, map) in [("annotations", &spec.annotations), ("labels", &spec.labels)] {
        if !map.is_empty() {
            let _ = writeln!(y, "  {field}: {}", json(map));
        }
    }
    let _ = writeln!(y, "spec:\n  queueName: {queue}");
    if let Some(p) = spec.priority {
        let _ = writeln!(y, "  priority: {p}");
    }
    let _ = writeln!(y, "  podSets:");
    let mut assignments = String::new();
    for ps in pod_sets {
        let count = ps.count.unwrap_or(1);
        let mut requests = BTreeMap::new();
        for (r, v) in &ps.requests {
            requests.insert(r.clone(), quantity(v)?);
        }
        let _ = writeln!(y, "  - name: {}\n    count: {count}", ps.name);
        if let Some(m) = ps.min_count {
            let _ = writeln!(y, "    minCount: {m}");
        }
        let meta = if ps.annotations.is_empty() {
            String::new()
        } else {
            format!("metadata: {{annotations: {}}}, ", json(&ps.annotations))
        };
        let mut constraints = String::new();
        if !ps.node_selector.is_empty() {
            let _ = write!(constraints, "nodeSelector: {}, ", json(&ps.node_selector));
        }
        if let Some(a) = &ps.affinity {
            let a = serde_json::to_string(a).map_err(|e| format!("affinity: {e}"))?;
            let _ = write!(constraints, "affinity: {a}, ");
        }
        let _ = writeln!(
            y,
            "    template: {{{meta}spec: {{{constraints}containers: [{{name: c, resources: {{requests: {}}}}}]}}}}",
            json(&requests)
        );
        if let Some(fl) = ps.admitted.as_ref().or(spec.admitted.as_ref()) {
            let mut flavors = BTreeMap::new();
            let mut usage = BTreeMap::new();
            for (r, q) in &requests {
                let f = fl
                    .flavor_of(r)
                    .ok_or_else(|| format!("{}: no admitted flavor for {r}", spec.name))?;
                flavors.insert(r.clone(), f.to_string());
                usage.insert(r.clone(), times(q, count)?);
            }
            let _ = writeln!(
                assignments,
                "    - {{name: {}, count: {count}, flavors: {}, resourceUsage: {}}}",
                ps.name,
                json(&flavors),
                json(&usage)
            );
        }
    }
    if !assignments.is_empty() {
        let cq = spec.cq.as_ref().ok_or("`admitted` needs `cq`")?;
        let _ = write!(
            y,
            "status:\n  admission:\n    clusterQueue: {cq}\n    podSetAssignments:\n{assignments}"
        );
    }
    Ok(y)
}

fn json(map: &BTreeMap<String, String>) -> String {
    serde_json::to_string(map).unwrap_or_default()
}
