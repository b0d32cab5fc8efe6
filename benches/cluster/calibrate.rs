//! From the audit log, what one kuota run shows of each Job's life: the latencies a
//! real cluster adds around kuota's decisions, written as the simulator's calibration
//! file, and the run's own trace and queues, written as a scenario the simulator
//! replays (docs/simulator.md, "Calibration").

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::setup::{self, CLASSES};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    object_ref: Option<ObjectRef>,
    request_received_timestamp: Timestamp,
    request_object: Option<Value>,
}

#[derive(Deserialize, Default)]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
}

/// One Job's life as the API server saw it.
#[derive(Default)]
struct Life {
    created: Option<Timestamp>,
    workload_created: Option<Timestamp>,
    admitted: Option<Timestamp>,
    unsuspends: Vec<Timestamp>,
    pods_created: Vec<Timestamp>,
    pods_succeeded: Vec<Timestamp>,
    finished: Option<Timestamp>,
}

fn ms(from: Option<&Timestamp>, to: Option<&Timestamp>) -> Option<f64> {
    Some(to?.duration_since(*from?).as_secs_f64() * 1000.0)
}

/// The object a name with a generated suffix (`<owner>-<suffix>`) belongs to.
fn owner_of(name: &str, suffix_len: usize) -> Option<&str> {
    let (owner, suffix) = name.rsplit_once('-')?;
    (suffix.len() == suffix_len).then_some(owner)
}

fn read(log: &Path, namespace_prefix: &str) -> std::io::Result<HashMap<String, Life>> {
    let mut lives: HashMap<String, Life> = HashMap::new();
    let file = std::fs::File::open(log)?;
    for line in std::io::BufReader::new(file).lines() {
        let Ok(e) = serde_json::from_str::<Event>(&line?) else {
            continue;
        };
        let obj = e.object_ref.unwrap_or_default();
        let ns = obj.namespace.unwrap_or_default();
        if e.stage != "ResponseComplete" || !ns.starts_with(namespace_prefix) {
            continue;
        }
        let name = obj.name.unwrap_or_default();
        let at = e.request_received_timestamp;
        let body = e.request_object.as_ref();
        let key = |job: &str| format!("{ns}/{job}");
        match (
            e.verb.as_str(),
            obj.resource.as_deref().unwrap_or_default(),
            obj.subresource.as_deref().unwrap_or_default(),
        ) {
            ("create", "jobs", "") => {
                lives.entry(key(&name)).or_default().created.get_or_insert(at);
            }
            ("patch", "jobs", "") if unsuspends(body) => {
                lives.entry(key(&name)).or_default().unsuspends.push(at);
            }
            ("create", "workloads", "") => {
                if let Some(job) = name.strip_prefix("job-").and_then(|n| owner_of(n, 5)) {
                    lives.entry(key(job)).or_default().workload_created.get_or_insert(at);
                }
            }
            ("patch", "workloads", "status") => {
                let Some(job) = name.strip_prefix("job-").and_then(|n| owner_of(n, 5)) else {
                    continue;
                };
                let life = lives.entry(key(job)).or_default();
                if body.and_then(|b| b.pointer("/status/admission")).is_some_and(Value::is_object) {
                    life.admitted.get_or_insert(at);
                }
                if sets_true(body, "Finished") {
                    life.finished.get_or_insert(at);
                }
            }
            ("create", "pods", "") => {
                if let Some(job) = owner_of(&name, 5) {
                    lives.entry(key(job)).or_default().pods_created.push(at);
                }
            }
            ("patch", "pods", "status") => {
                if let Some(job) = owner_of(&name, 5) {
                    lives.entry(key(job)).or_default().pods_succeeded.push(at);
                }
            }
            _ => {}
        }
    }
    Ok(lives)
}

fn unsuspends(body: Option<&Value>) -> bool {
    body.and_then(Value::as_array).is_some_and(|ops| {
        ops.iter().any(|op| {
            op.get("path").and_then(Value::as_str) == Some("/spec/suspend")
                && op.get("value") == Some(&Value::Bool(false))
        })
    })
}

fn sets_true(body: Option<&Value>, type_: &str) -> bool {
    body.and_then(|b| b.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(type_)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// 101 quantiles (p0, p1, ..., p100) of `samples`, in ms; empty without samples.
fn quantiles(mut samples: Vec<f64>) -> Vec<f64> {
    samples.retain(|s| s.is_finite() && *s >= 0.0);
    samples.sort_by(f64::total_cmp);
    if samples.is_empty() {
        return vec![];
    }
    (0..=100)
        .map(|p| {
            let i = (p as f64 / 100.0 * (samples.len() - 1) as f64).round() as usize;
            (samples[i] * 10.0).round() / 10.0
        })
        .collect()
}

/// Writes `calibration.json` and the scenario (`queues.yaml`, `trace.csv`) of the run
/// `run` into `dir`: the Jobs of its kuota phase, as the audit log saw them.
pub fn write(log: &Path, run: &str, nominal_cpu: u32, dir: &Path) -> Result<(), crate::BoxError> {
    let lives = read(log, &format!("{run}-q"))?;
    let mut latency: [Vec<f64>; 4] = Default::default();
    for life in lives.values() {
        let last_on = life.unsuspends.last();
        let pods_after = life.pods_created.iter().filter(|p| Some(*p) >= last_on).min();
        let steps = [
            ms(life.created.as_ref(), life.workload_created.as_ref()),
            ms(life.admitted.as_ref(), life.unsuspends.first()),
            ms(last_on, pods_after),
            ms(life.pods_succeeded.last(), life.finished.as_ref()),
        ];
        for (samples, step) in latency.iter_mut().zip(steps) {
            samples.extend(step);
        }
    }
    let [workload_created, unsuspended, pods_running, workload_finished] =
        latency.map(quantiles);
    std::fs::create_dir_all(dir)?;
    let calibration = json!({
        "apiVersion": "kuota.dev/v1alpha1", "kind": "Calibration",
        "clusterQueues": setup::COHORTS * setup::QUEUES_PER_COHORT,
        "measuredJobs": lives.values().filter(|l| l.finished.is_some()).count(),
        "latencyQuantilesMs": {
            "workloadCreated": workload_created,
            "unsuspended": unsuspended,
            "podsRunning": pods_running,
            "workloadFinished": workload_finished,
        }
    });
    std::fs::write(
        dir.join("calibration.json"),
        serde_json::to_string_pretty(&calibration)?,
    )?;
    let scenario = dir.join("scenario");
    std::fs::create_dir_all(&scenario)?;
    let docs: Vec<String> = setup::queue_objects(run, nominal_cpu)
        .iter()
        .map(|o| serde_json::to_string(o).expect("json"))
        .collect();
    std::fs::write(scenario.join("queues.yaml"), docs.join("\n---\n") + "\n")?;
    std::fs::write(scenario.join("trace.csv"), trace(&lives))?;
    Ok(())
}

/// The run's Jobs as a simulator trace, submitted when the API server received each
/// create, relative to the first.
fn trace(lives: &HashMap<String, Life>) -> String {
    let mut rows: Vec<(Timestamp, &str, &str)> = lives
        .iter()
        .filter_map(|(key, l)| {
            let (ns, job) = key.split_once('/')?;
            Some((l.created?, ns, job))
        })
        .collect();
    rows.sort();
    let first = rows.first().map(|r| r.0);
    let mut out = String::from("submit_ms,namespace,queue,priority,runtime_ms,podsets,name,class\n");
    for (at, ns, job) in rows {
        let class_name = job.split('-').next().unwrap_or_default();
        let Some(class) = CLASSES.iter().find(|c| c.name == class_name) else {
            continue;
        };
        let submit = first.map_or(0, |f| at.duration_since(f).as_millis().max(0));
        out.push_str(&format!(
            "{submit},{ns},lq,{},{},1:cpu={},{job},{}\n",
            class.priority, class.runtime_ms, class.cpu, class.name
        ));
    }
    out
}
