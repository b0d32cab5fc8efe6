//! From the audit log, what one kuota run shows of each Job's life: the latencies a
//! real cluster adds around kuota's decisions, written as the simulator's calibration
//! file, and the run's own trace and queues, written as a scenario the simulator
//! replays (docs/simulator.md, "Calibration").

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use k8s_openapi::jiff::Timestamp;
use kuota::sim::calibration::{fifo_service_times, quantiles, quantiles_keeping_mean};
use serde_json::{Value, json};

use crate::audit::{Event, sets_true, unsuspends};
use crate::setup::{self, CLASSES};

/// One Job's life as the API server saw it.
#[derive(Default)]
struct Life {
    created: Option<Timestamp>,
    workload_created: Option<Timestamp>,
    admitted: Option<Timestamp>,
    unsuspends: Vec<Timestamp>,
    /// When the stand-in kubelet marked a pod Succeeded: its class's runtime after it
    /// saw the pod (the audit log does not name a pod created with `generateName`).
    pods_succeeded: Vec<Timestamp>,
    finished: Option<Timestamp>,
    /// Each preemption written (its `Preempted` condition set true), and each requeue
    /// (the admission cleared) that gave the quota back.
    preempted: Vec<Timestamp>,
    requeued: Vec<Timestamp>,
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
                lives
                    .entry(key(&name))
                    .or_default()
                    .created
                    .get_or_insert(at);
            }
            ("patch", "jobs", "") if unsuspends(body) => {
                lives.entry(key(&name)).or_default().unsuspends.push(at);
            }
            ("create", "workloads", "") => {
                if let Some(job) = name.strip_prefix("job-").and_then(|n| owner_of(n, 5)) {
                    lives
                        .entry(key(job))
                        .or_default()
                        .workload_created
                        .get_or_insert(at);
                }
            }
            ("patch", "workloads", "status") => {
                let Some(job) = name.strip_prefix("job-").and_then(|n| owner_of(n, 5)) else {
                    continue;
                };
                let life = lives.entry(key(job)).or_default();
                if body
                    .and_then(|b| b.pointer("/status/admission"))
                    .is_some_and(Value::is_object)
                {
                    life.admitted.get_or_insert(at);
                }
                if sets_true(body, "Finished") {
                    life.finished.get_or_insert(at);
                }
                // The requeue clears the admission (its conditions still say Preempted).
                if body
                    .and_then(|b| b.pointer("/status/admission"))
                    .is_some_and(Value::is_null)
                {
                    life.requeued.push(at);
                } else if sets_true(body, "Preempted") && sets_true(body, "Evicted") {
                    life.preempted.push(at);
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

/// Writes `calibration.json` and the scenario (`queues.yaml`, `trace.csv`) of the run
/// `run` into `dir`: the Jobs of its kuota phase, as the audit log saw them.
pub fn write(log: &Path, run: &str, nominal_cpu: u32, dir: &Path) -> Result<(), crate::BoxError> {
    let lives = read(log, &format!("{run}-q"))?;
    let mut latency: [Vec<f64>; 4] = Default::default();
    let mut eviction = Vec::new();
    for (key, life) in &lives {
        let last_on = life.unsuspends.last();
        let done = life
            .pods_succeeded
            .iter()
            .filter(|p| Some(*p) >= last_on)
            .min();
        let runtime_ms = class_of(key).map_or(0.0, |c| c.runtime_ms as f64);
        let steps = [
            ms(life.created.as_ref(), life.workload_created.as_ref()),
            ms(life.admitted.as_ref(), life.unsuspends.first()),
            ms(last_on, done).map(|d| d - runtime_ms),
            ms(life.pods_succeeded.last(), life.finished.as_ref()),
        ];
        for (samples, step) in latency.iter_mut().zip(steps) {
            samples.extend(step);
        }
        // From a preemption's first write (its condition stays true through later
        // patches) to the requeue that follows it.
        let mut marks: Vec<(Timestamp, bool)> = life.preempted.iter().map(|t| (*t, true)).collect();
        marks.extend(life.requeued.iter().map(|t| (*t, false)));
        marks.sort();
        let mut open = None;
        for (t, is_preemption) in marks {
            match (is_preemption, open) {
                (true, None) => open = Some(t),
                (false, Some(from)) => {
                    eviction.extend(ms(Some(&from), Some(&t)));
                    open = None;
                }
                _ => {}
            }
        }
    }
    let by_in_flight = load_bands(&lives);
    let workload_create_service = quantiles_keeping_mean(creation_service_times(&lives));
    let [
        workload_created,
        unsuspended,
        pods_running,
        workload_finished,
    ] = latency.map(quantiles);
    std::fs::create_dir_all(dir)?;
    let calibration = json!({
        "apiVersion": "kuota.dev/v1alpha1", "kind": "Calibration",
        "clusterQueues": setup::COHORTS * setup::QUEUES_PER_COHORT,
        "measuredJobs": lives.values().filter(|l| l.finished.is_some()).count(),
        "latencyQuantilesMs": {
            "workloadCreated": workload_created,
            "workloadCreateService": workload_create_service,
            "unsuspended": unsuspended,
            "podsRunning": pods_running,
            "workloadFinished": workload_finished,
            "evictionStopped": quantiles(eviction),
        },
        "byInFlight": by_in_flight,
        "loadWindowMs": LOAD_WINDOW_MS,
        "finishedLoadAt": "PodsDone",
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

/// What each Workload's creation took in kuota's creation queue (simulator.md,
/// "Calibration"): Jobs and their Workloads' creations, in ms from the first Job, as
/// the arrivals and departures of one FIFO queue.
fn creation_service_times(lives: &HashMap<String, Life>) -> Vec<f64> {
    let both: Vec<(Timestamp, Timestamp)> = lives
        .values()
        .filter_map(|l| Some((l.created?, l.workload_created?)))
        .collect();
    let Some(first) = both.iter().map(|b| b.0).min() else {
        return vec![];
    };
    let (created, seen): (Vec<f64>, Vec<f64>) = both
        .iter()
        .map(|(c, w)| {
            let at = |t: &Timestamp| t.duration_since(first).as_secs_f64() * 1000.0;
            (at(c), at(w))
        })
        .unzip();
    fifo_service_times(&created, &seen)
}

/// Lower bounds of the load bands: Jobs in flight (unsuspended, not finished) plus Jobs
/// created within [`LOAD_WINDOW_MS`] before.
const BANDS: [usize; 8] = [0, 25, 50, 100, 200, 300, 400, 600];
/// The Job controller syncs every Job created, suspended or not: in the bench's first
/// 30 s, while 3,000 Jobs are created, 50 in flight run as slowly as 100 or 200 do once
/// the creations end, and Jobs created in the last second put both on one scale.
const LOAD_WINDOW_MS: i64 = 1000;
/// A band needs this many Jobs to be given; a thinner one is left to the band below.
const BAND_SAMPLES: usize = 20;

/// `podsRunning` by the load at each Job's (last) unsuspend, and `workloadFinished` by
/// the load when its pods are done (`finishedLoadAt: PodsDone`): the job controller and
/// the kubelet queue their work, so both grow with the load when each wait begins.
fn load_bands(lives: &HashMap<String, Life>) -> Vec<Value> {
    let runs: Vec<(&String, &Life, Timestamp, Timestamp)> = lives
        .iter()
        .filter_map(|(k, l)| Some((k, l, *l.unsuspends.last()?, l.finished?)))
        .collect();
    let mut starts: Vec<Timestamp> = runs.iter().map(|r| r.2).collect();
    let mut ends: Vec<Timestamp> = runs.iter().map(|r| r.3).collect();
    let mut creates: Vec<Timestamp> = lives.values().filter_map(|l| l.created).collect();
    starts.sort();
    ends.sort();
    creates.sort();
    let window = k8s_openapi::jiff::SignedDuration::from_millis(LOAD_WINDOW_MS);
    // The band of the load at `at`: Jobs in flight plus Jobs created in the window.
    let band_at = |at: &Timestamp| {
        let in_flight = starts
            .partition_point(|s| s <= at)
            .saturating_sub(ends.partition_point(|e| e <= at));
        let since = at.checked_sub(window).unwrap_or(*at);
        let created = creates
            .partition_point(|c| c <= at)
            .saturating_sub(creates.partition_point(|c| *c <= since));
        BANDS
            .iter()
            .rposition(|b| *b <= in_flight + created)
            .unwrap_or(0)
    };
    let mut bands: Vec<[Vec<f64>; 2]> = vec![Default::default(); BANDS.len()];
    for (key, life, on, finished) in &runs {
        let done = life.pods_succeeded.iter().filter(|p| *p >= on).min();
        let runtime_ms = class_of(key).map_or(0.0, |c| c.runtime_ms as f64);
        if let (Some(run), Some(last_done)) = (
            ms(Some(on), done).map(|d| d - runtime_ms),
            life.pods_succeeded.last().filter(|_| done.is_some()),
        ) {
            bands[band_at(on)][0].push(run);
            bands[band_at(last_done)][1].extend(ms(Some(last_done), Some(finished)));
        }
    }
    BANDS
        .iter()
        .zip(bands)
        .filter(|(_, [run, fin])| run.len() >= BAND_SAMPLES && fin.len() >= BAND_SAMPLES)
        .map(|(at_least, [run, fin])| {
            json!({"atLeast": at_least, "jobs": run.len(), "finishedJobs": fin.len(),
                   "podsRunning": quantiles(run), "workloadFinished": quantiles(fin)})
        })
        .collect()
}

/// The class of a Job (`namespace/<class>-<i>`).
fn class_of(key: &str) -> Option<&'static setup::Class> {
    let job = key.rsplit('/').next()?;
    let class = job.split('-').next()?;
    CLASSES.iter().find(|c| c.name == class)
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
    let mut out =
        String::from("submit_ms,namespace,queue,priority,runtime_ms,podsets,name,class\n");
    for (at, ns, job) in rows {
        let Some(class) = class_of(job) else {
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
