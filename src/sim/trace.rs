//! Trace files: recorded arrivals, one workload per row, instead of (or next
//! to) a generator. CSV (`*.csv`) or JSON Lines (`*.jsonl`); the format is
//! documented in docs/simulator.md ("Traces").
//!
//! Every error names the file, the 1-based line and the field.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use super::SimError;
use super::generator::{CLASS_LABEL, MAX_WORKLOADS, RUNNING_TIME_LABEL, SimWorkload, pod_template};
use crate::api;
use crate::api::quantity::resource_value;
use crate::engine::{Millis, WorkloadKey};

/// Is this file name a trace (by extension)?
pub fn is_trace_name(name: &str) -> bool {
    name.ends_with(".csv") || name.ends_with(".jsonl")
}

/// Topology request of every pod set of a row.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceTopology {
    pub mode: TraceTopologyMode,
    /// Node label of the level; required for `Required` and `Preferred`.
    #[serde(default)]
    pub level: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum TraceTopologyMode {
    Required,
    Preferred,
    Unconstrained,
}

/// One pod set of a row.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TracePodSet {
    pub count: u32,
    /// Per-pod requests.
    pub requests: BTreeMap<String, Quantity>,
}

/// One row (a JSONL line; CSV rows are parsed into the same shape).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceRow {
    pub submit_ms: u64,
    pub namespace: String,
    /// LocalQueue name in `namespace`.
    pub queue: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub class: Option<String>,
    #[serde(default)]
    pub priority: i32,
    pub runtime_ms: u64,
    pub pod_sets: Vec<TracePodSet>,
    #[serde(default)]
    pub topology: Option<TraceTopology>,
}

/// CSV columns; `name`, `class`, `priority` and `topology` are optional.
const CSV_REQUIRED: [&str; 5] = ["submit_ms", "namespace", "queue", "runtime_ms", "podsets"];
const CSV_OPTIONAL: [&str; 4] = ["name", "class", "priority", "topology"];

/// Parses a trace file into rows with their line numbers.
pub fn parse(source: &str, text: &str) -> Result<Vec<(usize, TraceRow)>, SimError> {
    let err = |line: usize, message: String| SimError::Scenario {
        source_name: format!("{source}:{line}"),
        message,
    };
    let mut rows = Vec::new();
    if source.ends_with(".jsonl") {
        for (i, l) in text.lines().enumerate() {
            let line = i + 1;
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let mut de = serde_json::Deserializer::from_str(l);
            let row: TraceRow = serde_path_to_error::deserialize(&mut de)
                .map_err(|e| err(line, format!("{}: {}", e.path(), e.inner())))?;
            rows.push((line, row));
        }
    } else {
        let mut header: Option<Vec<String>> = None;
        for (i, l) in text.lines().enumerate() {
            let line = i + 1;
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            if l.contains('"') {
                return Err(err(
                    line,
                    "quoted CSV fields are not supported (no field needs a comma)".to_string(),
                ));
            }
            let cells: Vec<&str> = l.split(',').map(str::trim).collect();
            let Some(h) = &header else {
                for c in &cells {
                    if !CSV_REQUIRED.contains(c) && !CSV_OPTIONAL.contains(c) {
                        return Err(err(
                            line,
                            format!(
                                "header: unknown column {c:?} (columns: {}, optional {})",
                                CSV_REQUIRED.join(", "),
                                CSV_OPTIONAL.join(", ")
                            ),
                        ));
                    }
                }
                if let Some(missing) = CSV_REQUIRED.iter().find(|r| !cells.contains(r)) {
                    return Err(err(line, format!("header: missing column {missing}")));
                }
                header = Some(cells.iter().map(|c| c.to_string()).collect());
                continue;
            };
            if cells.len() != h.len() {
                return Err(err(
                    line,
                    format!("{} fields, the header has {}", cells.len(), h.len()),
                ));
            }
            let get = |col: &str| {
                h.iter()
                    .position(|c| c == col)
                    .map(|i| cells[i])
                    .filter(|v| !v.is_empty())
            };
            let req = |col: &str| get(col).ok_or_else(|| err(line, format!("{col}: missing")));
            let num = |col: &str| -> Result<u64, SimError> {
                req(col)?
                    .parse()
                    .map_err(|e| err(line, format!("{col}: {e}")))
            };
            let row = TraceRow {
                submit_ms: num("submit_ms")?,
                namespace: req("namespace")?.to_string(),
                queue: req("queue")?.to_string(),
                name: get("name").map(str::to_string),
                class: get("class").map(str::to_string),
                priority: match get("priority") {
                    Some(p) => p.parse().map_err(|e| err(line, format!("priority: {e}")))?,
                    None => 0,
                },
                runtime_ms: num("runtime_ms")?,
                pod_sets: parse_pod_sets(req("podsets")?)
                    .map_err(|m| err(line, format!("podsets: {m}")))?,
                topology: get("topology")
                    .map(parse_topology)
                    .transpose()
                    .map_err(|m| err(line, format!("topology: {m}")))?,
            };
            rows.push((line, row));
        }
        if header.is_none() {
            return Err(err(1, "no header row".to_string()));
        }
    }
    if rows.len() as u64 > MAX_WORKLOADS {
        return Err(SimError::Scenario {
            source_name: source.to_string(),
            message: format!(
                "{} rows, more than the limit of {MAX_WORKLOADS}",
                rows.len()
            ),
        });
    }
    Ok(rows)
}

/// `16:nvidia.com/gpu=8;cpu=96|1:cpu=4` — pod sets separated by `|`, each
/// `COUNT:` then `resource=quantity` pairs separated by `;`.
fn parse_pod_sets(s: &str) -> Result<Vec<TracePodSet>, String> {
    s.split('|')
        .enumerate()
        .map(|(i, ps)| {
            let (count, reqs) = ps
                .split_once(':')
                .ok_or_else(|| format!("pod set {i} {ps:?}: expected COUNT:resource=qty;..."))?;
            let count = count
                .trim()
                .parse()
                .map_err(|e| format!("pod set {i} count {count:?}: {e}"))?;
            let mut requests = BTreeMap::new();
            for kv in reqs.split(';').filter(|kv| !kv.trim().is_empty()) {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("pod set {i} {kv:?}: expected resource=quantity"))?;
                requests.insert(k.trim().to_string(), Quantity(v.trim().to_string()));
            }
            Ok(TracePodSet { count, requests })
        })
        .collect()
}

/// `required:LEVEL`, `preferred:LEVEL` or `unconstrained`.
fn parse_topology(s: &str) -> Result<TraceTopology, String> {
    let (mode, level) = match s.split_once(':') {
        Some((m, l)) => (m, Some(l.to_string())),
        None => (s, None),
    };
    let mode = match mode {
        "required" => TraceTopologyMode::Required,
        "preferred" => TraceTopologyMode::Preferred,
        "unconstrained" => TraceTopologyMode::Unconstrained,
        other => {
            return Err(format!(
                "{other:?}: expected required:LEVEL, preferred:LEVEL or unconstrained"
            ));
        }
    };
    Ok(TraceTopology { mode, level })
}

/// Turns rows into workloads. `local_queues` maps (namespace, LocalQueue) to
/// its ClusterQueue; a row naming an unknown queue is an error.
pub fn workloads(
    source: &str,
    rows: &[(usize, TraceRow)],
    local_queues: &BTreeMap<(String, String), String>,
) -> Result<Vec<SimWorkload>, SimError> {
    let mut out = Vec::with_capacity(rows.len());
    for (line, row) in rows {
        let err = |message: String| SimError::Scenario {
            source_name: format!("{source}:{line}"),
            message,
        };
        let cq = local_queues
            .get(&(row.namespace.clone(), row.queue.clone()))
            .ok_or_else(|| {
                err(format!(
                    "queue: no LocalQueue {}/{} in the scenario",
                    row.namespace, row.queue
                ))
            })?;
        if row.pod_sets.is_empty() {
            return Err(err("podsets: at least one pod set is required".to_string()));
        }
        let class = row.class.clone().unwrap_or_else(|| "trace".to_string());
        let name = row
            .name
            .clone()
            .unwrap_or_else(|| format!("{class}-{line}"));
        let topology_request = match &row.topology {
            None => None,
            Some(t) => {
                let level = || {
                    t.level
                        .clone()
                        .filter(|l| !l.is_empty())
                        .ok_or_else(|| err(format!("topology: mode {:?} needs a level", t.mode)))
                };
                Some(match t.mode {
                    TraceTopologyMode::Required => api::PodSetTopologyRequest {
                        required: Some(level()?),
                        ..Default::default()
                    },
                    TraceTopologyMode::Preferred => api::PodSetTopologyRequest {
                        preferred: Some(level()?),
                        ..Default::default()
                    },
                    TraceTopologyMode::Unconstrained => api::PodSetTopologyRequest {
                        unconstrained: Some(true),
                        ..Default::default()
                    },
                })
            }
        };
        let mut total_requests: BTreeMap<String, i64> = BTreeMap::new();
        let mut pod_sets = Vec::with_capacity(row.pod_sets.len());
        for (i, ps) in row.pod_sets.iter().enumerate() {
            if ps.count == 0 {
                return Err(err(format!("podSets[{i}].count: must be at least 1")));
            }
            let count = i32::try_from(ps.count)
                .map_err(|_| err(format!("podSets[{i}].count: too large")))?;
            for (r, q) in &ps.requests {
                let m = resource_value(r, q)
                    .map_err(|e| err(format!("podSets[{i}].requests[{r}]: {e}")))?;
                if m < 0 {
                    return Err(err(format!(
                        "podSets[{i}].requests[{r}]: must not be negative"
                    )));
                }
                let e = total_requests.entry(r.clone()).or_default();
                *e = e.saturating_add(m.saturating_mul(i64::from(count)));
            }
            pod_sets.push(api::PodSet {
                // Kueue needs unique pod set names; a single one is `main` like Kueue's default.
                name: if row.pod_sets.len() == 1 {
                    "main".to_string()
                } else {
                    format!("ps{i}")
                },
                count,
                template: pod_template(&ps.requests),
                topology_request: topology_request.clone(),
                ..Default::default()
            });
        }
        if let Some(ps) = pod_sets.first() {
            crate::placement::topology_mode(ps).map_err(|e| err(format!("topology: {e}")))?;
        }
        let runtime =
            Millis::try_from(row.runtime_ms).map_err(|_| err("runtime_ms: too large".into()))?;
        let arrival =
            Millis::try_from(row.submit_ms).map_err(|_| err("submit_ms: too large".into()))?;
        let mut object = api::Workload::new(
            &name,
            api::WorkloadSpec {
                pod_sets,
                queue_name: Some(row.queue.clone()),
                priority: Some(row.priority),
                ..Default::default()
            },
        );
        object.metadata.namespace = Some(row.namespace.clone());
        object.metadata.labels = Some(BTreeMap::from([
            (RUNNING_TIME_LABEL.to_string(), runtime.to_string()),
            (CLASS_LABEL.to_string(), class.clone()),
        ]));
        out.push(SimWorkload {
            key: WorkloadKey::new(row.namespace.as_str(), name.as_str()),
            class,
            cluster_queue: cq.clone(),
            arrival,
            runtime,
            total_requests,
            object,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lqs() -> BTreeMap<(String, String), String> {
        BTreeMap::from([(("ml".to_string(), "train".to_string()), "cq".to_string())])
    }

    #[test]
    fn csv_and_jsonl_agree() {
        let csv = "# comment\nsubmit_ms,namespace,queue,name,priority,runtime_ms,podsets,topology\n\
                   1000,ml,train,a,5,60000,16:nvidia.com/gpu=8;cpu=96,required:rack\n\
                   2000,ml,train,b,0,1000,1:cpu=4|2:cpu=1,\n";
        let jsonl = r#"{"submitMs":1000,"namespace":"ml","queue":"train","name":"a","priority":5,"runtimeMs":60000,"podSets":[{"count":16,"requests":{"nvidia.com/gpu":"8","cpu":"96"}}],"topology":{"mode":"Required","level":"rack"}}
{"submitMs":2000,"namespace":"ml","queue":"train","name":"b","runtimeMs":1000,"podSets":[{"count":1,"requests":{"cpu":"4"}},{"count":2,"requests":{"cpu":"1"}}]}
"#;
        let a = parse("t.csv", csv).expect("csv");
        let b = parse("t.jsonl", jsonl).expect("jsonl");
        assert_eq!(a.len(), 2);
        assert_eq!(
            a.iter().map(|r| &r.1).collect::<Vec<_>>(),
            b.iter().map(|r| &r.1).collect::<Vec<_>>()
        );
        let w = workloads("t.csv", &a, &lqs()).expect("resolves");
        assert_eq!(w[0].total_requests["nvidia.com/gpu"], 128);
        assert_eq!(w[0].cluster_queue, "cq");
        assert_eq!(
            w[0].object.spec.pod_sets[0]
                .topology_request
                .as_ref()
                .and_then(|t| t.required.as_deref()),
            Some("rack")
        );
        assert_eq!(w[1].total_requests["cpu"], 6_000);
        assert_eq!(w[1].object.spec.pod_sets.len(), 2);
    }

    #[test]
    fn malformed_rows_name_line_and_field() {
        let head = "submit_ms,namespace,queue,runtime_ms,podsets\n";
        for (body, needle) in [
            ("x,ml,train,5,1:cpu=1", "t.csv:2: submit_ms"),
            (
                "0,ml,train,5,1:cpu=1\n0,ml,train,5,cpu=1",
                "t.csv:3: podsets",
            ),
            ("0,ml,train,5", "t.csv:2: 4 fields"),
        ] {
            let e = parse("t.csv", &format!("{head}{body}")).expect_err(needle);
            assert!(e.to_string().starts_with(needle), "{needle}: {e}");
        }
        let e = parse("t.csv", "submit_ms,bogus\n").expect_err("bad header");
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = parse(
            "t.jsonl",
            "\n{\"submitMs\":0,\"namespace\":\"ml\",\"queue\":\"train\",\"runtimeMs\":1,\"podSets\":[{\"count\":1,\"requests\":{},\"gpus\":1}]}",
        )
        .expect_err("unknown field");
        assert!(e.to_string().starts_with("t.jsonl:2: podSets[0]"), "{e}");
        let rows = parse("t.csv", &format!("{head}0,ml,nope,5,1:cpu=1")).expect("parses");
        let e = workloads("t.csv", &rows, &lqs()).expect_err("unknown queue");
        assert!(e.to_string().starts_with("t.csv:2: queue"), "{e}");
        let rows = parse("t.csv", &format!("{head}0,ml,train,5,1:cpu=lots")).expect("parses");
        let e = workloads("t.csv", &rows, &lqs()).expect_err("bad quantity");
        assert!(e.to_string().contains("requests[cpu]"), "{e}");
    }
}
