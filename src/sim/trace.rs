//! Trace files: recorded arrivals, one workload per row, instead of (or next
//! to) a generator. CSV (`*.csv`) or JSON Lines (`*.jsonl`); the format is
//! documented in docs/simulator.md ("Traces").
//!
//! Every error names the file, the 1-based line and the field.

use std::collections::BTreeMap;
use std::sync::Arc;

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
    let err = |line: usize, e: TraceError| SimError::Trace {
        location: format!("{source}:{line}"),
        source: Arc::new(e),
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
            let row: TraceRow = serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let at = e.path().to_string();
                SimError::field(format!("{source}:{line}"), at, Arc::new(e.into_inner()))
            })?;
            rows.push((line, row));
        }
    } else {
        rows = parse_csv(text, &err)?;
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

/// The CSV form: a header row naming the columns, then one row per workload.
/// Blank lines and lines starting with `#` are skipped; fields may be quoted
/// (a quoted field does not span lines).
fn parse_csv(
    text: &str,
    err: &impl Fn(usize, TraceError) -> SimError,
) -> Result<Vec<(usize, TraceRow)>, SimError> {
    let mut header: Option<csv::StringRecord> = None;
    let mut rows = Vec::new();
    // One physical line per record: the reader's own line count leaves out blank and
    // comment lines, and every error must name the line as the file has it.
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .trim(csv::Trim::All)
            .flexible(true)
            .from_reader(l.as_bytes());
        let record = match reader.records().next() {
            Some(r) => r.map_err(|e| err(line, TraceError::Csv(e)))?,
            None => continue,
        };
        let Some(h) = &header else {
            check_header(&record).map_err(|e| err(line, e))?;
            header = Some(record);
            continue;
        };
        if record.len() != h.len() {
            let (fields, header) = (record.len(), h.len());
            return Err(err(line, TraceError::FieldCount { fields, header }));
        }
        let row = csv_row(h, &record).map_err(|e| err(line, e.into()))?;
        rows.push((line, row));
    }
    if header.is_none() {
        return Err(err(1, TraceError::NoHeader));
    }
    Ok(rows)
}

/// Why a line of a trace file cannot be read; shown after the file and line.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("not valid CSV: {0}")]
    Csv(#[source] csv::Error),
    #[error(
        "header: unknown column {0:?} (columns: {required}, optional {optional})",
        required = CSV_REQUIRED.join(", "),
        optional = CSV_OPTIONAL.join(", ")
    )]
    UnknownColumn(String),
    #[error("header: missing column {0}")]
    MissingColumn(&'static str),
    #[error("no header row")]
    NoHeader,
    #[error("{fields} fields, the header has {header}")]
    FieldCount { fields: usize, header: usize },
    #[error(transparent)]
    Field(#[from] CsvFieldError),
}

/// Every column known and every required one present.
fn check_header(cells: &csv::StringRecord) -> Result<(), TraceError> {
    if let Some(c) = cells
        .iter()
        .find(|c| !CSV_REQUIRED.contains(c) && !CSV_OPTIONAL.contains(c))
    {
        return Err(TraceError::UnknownColumn(c.to_string()));
    }
    match CSV_REQUIRED
        .iter()
        .find(|r| !cells.iter().any(|c| c == **r))
    {
        Some(missing) => Err(TraceError::MissingColumn(missing)),
        None => Ok(()),
    }
}

/// What is wrong with one field of a CSV row; shown after the file and line.
#[derive(Debug, thiserror::Error)]
pub enum CsvFieldError {
    #[error("{0}: missing")]
    Missing(&'static str),
    #[error("{0}: {1}")]
    Number(&'static str, #[source] std::num::ParseIntError),
    #[error("podsets: {0}")]
    PodSets(#[source] TraceSyntaxError),
    #[error("topology: {0}")]
    Topology(#[source] TraceSyntaxError),
}

/// A pod-set list or topology cell that does not follow its mini-syntax.
#[derive(Debug, thiserror::Error)]
pub enum TraceSyntaxError {
    #[error("pod set {index} {text:?}: expected COUNT:resource=qty;...")]
    PodSetShape { index: usize, text: String },
    #[error("pod set {index} count {text:?}: {source}")]
    PodSetCount {
        index: usize,
        text: String,
        source: std::num::ParseIntError,
    },
    #[error("pod set {index} {text:?}: expected resource=quantity")]
    Request { index: usize, text: String },
    #[error("{0:?}: expected required:LEVEL, preferred:LEVEL or unconstrained")]
    TopologyMode(String),
}

/// One data row, read by column name.
fn csv_row(h: &csv::StringRecord, cells: &csv::StringRecord) -> Result<TraceRow, CsvFieldError> {
    let get = |col: &str| {
        h.iter()
            .position(|c| c == col)
            .and_then(|i| cells.get(i))
            .filter(|v| !v.is_empty())
    };
    let req = |col: &'static str| get(col).ok_or(CsvFieldError::Missing(col));
    let num = |col: &'static str| -> Result<u64, CsvFieldError> {
        req(col)?.parse().map_err(|e| CsvFieldError::Number(col, e))
    };
    Ok(TraceRow {
        submit_ms: num("submit_ms")?,
        namespace: req("namespace")?.to_string(),
        queue: req("queue")?.to_string(),
        name: get("name").map(str::to_string),
        class: get("class").map(str::to_string),
        priority: match get("priority") {
            Some(p) => p
                .parse()
                .map_err(|e| CsvFieldError::Number("priority", e))?,
            None => 0,
        },
        runtime_ms: num("runtime_ms")?,
        pod_sets: parse_pod_sets(req("podsets")?).map_err(CsvFieldError::PodSets)?,
        topology: get("topology")
            .map(parse_topology)
            .transpose()
            .map_err(CsvFieldError::Topology)?,
    })
}

/// `16:nvidia.com/gpu=8;cpu=96|1:cpu=4` — pod sets separated by `|`, each
/// `COUNT:` then `resource=quantity` pairs separated by `;`.
fn parse_pod_sets(s: &str) -> Result<Vec<TracePodSet>, TraceSyntaxError> {
    s.split('|')
        .enumerate()
        .map(|(index, ps)| {
            let (count, reqs) =
                ps.split_once(':')
                    .ok_or_else(|| TraceSyntaxError::PodSetShape {
                        index,
                        text: ps.to_string(),
                    })?;
            let count = count
                .trim()
                .parse()
                .map_err(|source| TraceSyntaxError::PodSetCount {
                    index,
                    text: count.to_string(),
                    source,
                })?;
            let mut requests = BTreeMap::new();
            for kv in reqs.split(';').filter(|kv| !kv.trim().is_empty()) {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| TraceSyntaxError::Request {
                        index,
                        text: kv.to_string(),
                    })?;
                requests.insert(k.trim().to_string(), Quantity(v.trim().to_string()));
            }
            Ok(TracePodSet { count, requests })
        })
        .collect()
}

/// `required:LEVEL`, `preferred:LEVEL` or `unconstrained`.
fn parse_topology(s: &str) -> Result<TraceTopology, TraceSyntaxError> {
    let (mode, level) = match s.split_once(':') {
        Some((m, l)) => (m, Some(l.to_string())),
        None => (s, None),
    };
    let mode = match mode {
        "required" => TraceTopologyMode::Required,
        "preferred" => TraceTopologyMode::Preferred,
        "unconstrained" => TraceTopologyMode::Unconstrained,
        other => return Err(TraceSyntaxError::TopologyMode(other.to_string())),
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
        out.push(row_workload(source, *line, row, local_queues)?);
    }
    Ok(out)
}

/// The workload of the row on `line` of trace file `source`.
fn row_workload(
    source: &str,
    line: usize,
    row: &TraceRow,
    local_queues: &BTreeMap<(String, String), String>,
) -> Result<SimWorkload, SimError> {
    let location = format!("{source}:{line}");
    let cq = local_queues
        .get(&(row.namespace.clone(), row.queue.clone()))
        .ok_or_else(|| {
            row_error(
                &location,
                format!(
                    "queue: no LocalQueue {}/{} in the scenario",
                    row.namespace, row.queue
                ),
            )
        })?;
    if row.pod_sets.is_empty() {
        return Err(row_error(
            &location,
            "podsets: at least one pod set is required".to_string(),
        ));
    }
    let class = row.class.clone().unwrap_or_else(|| "trace".to_string());
    let name = row
        .name
        .clone()
        .unwrap_or_else(|| format!("{class}-{line}"));
    let topology_request = row
        .topology
        .as_ref()
        .map(|t| topology_request(&location, t))
        .transpose()?;
    let (pod_sets, total_requests) = row_pod_sets(&location, row, topology_request.as_ref())?;
    if let Some(ps) = pod_sets.first() {
        crate::placement::topology_mode(ps)
            .map_err(|e| SimError::field(&location, "topology", e))?;
    }
    let runtime = Millis::try_from(row.runtime_ms)
        .map_err(|e| SimError::field(&location, "runtime_ms", e))?;
    let arrival =
        Millis::try_from(row.submit_ms).map_err(|e| SimError::field(&location, "submit_ms", e))?;
    let object = row_object(row, &name, &class, runtime, pod_sets);
    Ok(SimWorkload {
        key: WorkloadKey::new(row.namespace.as_str(), name.as_str()),
        class,
        cluster_queue: cq.clone(),
        arrival,
        runtime,
        total_requests,
        object,
        never_ready: false,
    })
}

/// The pod sets' topology request for a row's `topology` (at `location`).
fn topology_request(
    location: &str,
    t: &TraceTopology,
) -> Result<api::PodSetTopologyRequest, SimError> {
    let level = || {
        t.level.clone().filter(|l| !l.is_empty()).ok_or_else(|| {
            row_error(
                location,
                format!("topology: mode {:?} needs a level", t.mode),
            )
        })
    };
    Ok(match t.mode {
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

/// A row's PodSets, each with `topology_request`, and the requests of all their pods per resource.
fn row_pod_sets(
    location: &str,
    row: &TraceRow,
    topology_request: Option<&api::PodSetTopologyRequest>,
) -> Result<(Vec<api::PodSet>, BTreeMap<String, i64>), SimError> {
    let mut total_requests: BTreeMap<String, i64> = BTreeMap::new();
    let mut pod_sets = Vec::with_capacity(row.pod_sets.len());
    for (i, ps) in row.pod_sets.iter().enumerate() {
        if ps.count == 0 {
            return Err(row_error(
                location,
                format!("podSets[{i}].count: must be at least 1"),
            ));
        }
        let count = i32::try_from(ps.count)
            .map_err(|e| SimError::field(location, format!("podSets[{i}].count"), e))?;
        for (r, q) in &ps.requests {
            let m = resource_value(r, q)
                .map_err(|e| SimError::field(location, format!("podSets[{i}].requests[{r}]"), e))?;
            if m < 0 {
                return Err(row_error(
                    location,
                    format!("podSets[{i}].requests[{r}]: must not be negative"),
                ));
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
            topology_request: topology_request.cloned(),
            ..Default::default()
        });
    }
    Ok((pod_sets, total_requests))
}

/// The Workload object of a row, labelled like a generated one (runtime and class).
fn row_object(
    row: &TraceRow,
    name: &str,
    class: &str,
    runtime: Millis,
    pod_sets: Vec<api::PodSet>,
) -> api::Workload {
    let mut object = api::Workload::new(
        name,
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
        (CLASS_LABEL.to_string(), class.to_string()),
    ]));
    object
}

/// A broken rule of the trace format at `location` (`file:line`).
fn row_error(location: &str, message: String) -> SimError {
    SimError::Scenario {
        source_name: location.to_string(),
        message,
    }
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
    fn quoted_csv_fields_and_comments_keep_line_numbers() {
        let csv = "# recorded 2026-01-01\n\nsubmit_ms,namespace,queue,name,runtime_ms,podsets\n\
                   1,ml,train,\"a, the first\",5,\"1:cpu=1|2:cpu=2\"\n\
                   # a comment between rows\n\
                   2,ml,train,b,5,1:cpu\n";
        let e = parse("t.csv", csv).expect_err("bad request on line 6");
        assert!(e.to_string().starts_with("t.csv:6: podsets"), "{e}");
        let rows = parse("t.csv", &csv.replace("1:cpu\n", "1:cpu=1\n")).expect("parses");
        assert_eq!(rows[0].0, 4);
        assert_eq!(rows[0].1.name.as_deref(), Some("a, the first"));
        assert_eq!(rows[0].1.pod_sets.len(), 2);
        assert_eq!(rows[1].0, 6);
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
        assert!(e.to_string().starts_with("t.csv:1: header"), "{e}");
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

    /// Callers (and `kuota check`) can walk to the error underneath, not just its text.
    #[test]
    fn errors_keep_their_sources() {
        use std::error::Error as _;
        let head = "submit_ms,namespace,queue,runtime_ms,podsets\n";
        let rows = parse("t.csv", &format!("{head}0,ml,train,5,1:cpu=lots")).expect("parses");
        let e = workloads("t.csv", &rows, &lqs()).expect_err("bad quantity");
        assert!(e.source().is_some(), "{e:?}");
        assert!(
            matches!(e.cause(), Some(crate::sim::Cause::Quantity(_))),
            "{e:?}"
        );
        let e = parse("t.csv", "submit_ms,bogus\n").expect_err("bad header");
        let SimError::Trace { location, source } = &e else {
            panic!("a trace error: {e:?}");
        };
        assert_eq!(location, "t.csv:1");
        assert!(matches!(**source, TraceError::UnknownColumn(ref c) if c == "bogus"));
        let e = crate::sim::SourceFile::read(std::path::Path::new("/nonexistent/kuota.csv"))
            .expect_err("missing file");
        let io = e
            .source()
            .and_then(|s| s.downcast_ref::<Arc<std::io::Error>>());
        assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
    }
}
