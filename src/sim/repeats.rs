//! One scenario run under consecutive seeds, its chance-driven figures summarized as a
//! median and a range.
//!
//! With calibrated latencies a run is one draw: which first-wave jobs are finishing when
//! a high-priority one arrives turns on the latencies drawn, and with them how many jobs
//! it preempts. On `benches/cluster`'s traces one seed's preemption count ranged from
//! 174 to 495 over seven seeds; the median is what a prediction should be read from.

use serde::Serialize;

use super::report::{Report, duration};
use super::{Scenario, SimConfig, SimError, simulate};
use crate::engine::Millis;

/// Runs at once at most: each holds its scenario's workloads (kueue-large-scale's
/// 50,000 take some 450 MiB).
const MAX_AT_ONCE: usize = 4;

/// The figures of several runs of one scenario.
#[derive(Debug)]
pub struct Repeats {
    /// The seeds run, in order.
    pub seeds: Vec<u64>,
    /// The first seed's report, in full.
    pub first: Report,
    /// Each figure over all runs.
    pub figures: Vec<Figure>,
}

/// One figure over all runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    pub name: &'static str,
    /// How the table names it.
    #[serde(skip)]
    pub label: &'static str,
    /// Whether it is a duration in ms (else a count).
    #[serde(skip)]
    pub is_duration: bool,
    #[serde(flatten)]
    pub spread: Spread,
}

/// The median and range of one figure's values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// A figure summarized: its JSON name, its table label, whether it is a duration, and
/// how it is read from a run's report (`None`: not measured in it).
struct Reading {
    name: &'static str,
    label: &'static str,
    is_duration: bool,
    read: fn(&Report) -> Option<Millis>,
}

const READINGS: [Reading; 6] = [
    Reading {
        name: "preemptions",
        label: "preemptions",
        is_duration: false,
        read: |r| Some(r.totals.preemptions as Millis),
    },
    Reading {
        name: "admissions",
        label: "admissions",
        is_duration: false,
        read: |r| Some(r.totals.admissions as Millis),
    },
    Reading {
        name: "makespan",
        label: "makespan",
        is_duration: true,
        read: |r| Some(r.totals.makespan_ms),
    },
    Reading {
        name: "timeToAdmissionP50",
        label: "time to admission p50",
        is_duration: true,
        read: |r| Some(r.totals.time_to_admission.p50_ms),
    },
    Reading {
        name: "createToUnsuspendP50",
        label: "create→unsuspend p50",
        is_duration: true,
        read: |r| r.totals.create_to_unsuspend.as_ref().map(|l| l.p50_ms),
    },
    Reading {
        name: "createToUnsuspendP99",
        label: "create→unsuspend p99",
        is_duration: true,
        read: |r| r.totals.create_to_unsuspend.as_ref().map(|l| l.p99_ms),
    },
];

/// Runs `scenario` under `runs` seeds from `cfg.seed` on, as many at a time as the
/// machine has cores, up to [`MAX_AT_ONCE`].
pub fn repeat(scenario: &Scenario, cfg: &SimConfig, runs: u64) -> Result<Repeats, SimError> {
    let seeds: Vec<u64> = (0..runs.max(1)).map(|i| cfg.seed.wrapping_add(i)).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_AT_ONCE));
    let mut reports: Vec<Report> = Vec::with_capacity(seeds.len());
    for chunk in seeds.chunks(threads.max(1)) {
        let results: Vec<Result<Report, SimError>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&seed| {
                    let cfg = SimConfig {
                        seed,
                        ..cfg.clone()
                    };
                    s.spawn(move || simulate(scenario, cfg))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for r in results {
            reports.push(r?);
        }
    }
    let figures = READINGS
        .iter()
        .filter_map(|reading| {
            let values: Option<Vec<Millis>> = reports.iter().map(reading.read).collect();
            Some(Figure {
                name: reading.name,
                label: reading.label,
                is_duration: reading.is_duration,
                spread: spread(values?),
            })
        })
        .collect();
    Ok(Repeats {
        seeds,
        first: reports.swap_remove(0),
        figures,
    })
}

/// The median (of the middle two when even), least and greatest of `values`.
fn spread(mut values: Vec<Millis>) -> Spread {
    values.sort_unstable();
    let n = values.len();
    let median = if n == 0 {
        0.0
    } else if n % 2 == 1 {
        values[n / 2] as f64
    } else {
        (values[n / 2 - 1] + values[n / 2]) as f64 / 2.0
    };
    Spread {
        median,
        min: values.first().copied().unwrap_or(0) as f64,
        max: values.last().copied().unwrap_or(0) as f64,
    }
}

impl Repeats {
    /// The summary as a table, after the first seed's report.
    pub fn render_table(&self) -> String {
        let mut out = self.first.render_table();
        let (first, last) = (self.seeds[0], self.seeds[self.seeds.len() - 1]);
        out.push_str(&format!(
            "\nover {} seeds ({first} to {last}): median (least to greatest)\n",
            self.seeds.len()
        ));
        for f in &self.figures {
            let show = |v: f64| {
                if f.is_duration {
                    duration(v.round() as Millis)
                } else if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.1}")
                }
            };
            out.push_str(&format!(
                "  {:<22} {} ({} to {})\n",
                f.label,
                show(f.spread.median),
                show(f.spread.min),
                show(f.spread.max)
            ));
        }
        out
    }

    /// The first seed's report and the summary, as JSON.
    pub fn to_json(&self) -> String {
        let doc = serde_json::json!({
            "seeds": self.seeds,
            "figures": self.figures,
            "first": self.first,
        });
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_is_read_as_its_median_and_range() {
        let odd = spread(vec![495, 174, 216, 206, 211]);
        assert_eq!((odd.median, odd.min, odd.max), (211.0, 174.0, 495.0));
        let even = spread(vec![4, 1, 3, 2]);
        assert_eq!((even.median, even.min, even.max), (2.5, 1.0, 4.0));
    }

    #[test]
    fn seeds_draw_different_latencies_and_the_summary_spans_them() {
        let scenario = Scenario {
            name: "t".into(),
            manifests: vec![],
            generator: Some(crate::sim::SourceFile::new(
                "generator.yaml",
                include_str!("../../tests/fixtures/preempt-generator.yaml"),
            )),
        };
        let ramp: Vec<String> = (0..=100).map(|i| (i * 20).to_string()).collect();
        let ramp = format!("[{}]", ramp.join(","));
        let text = format!(
            r#"{{"apiVersion":"kuota.dev/v1alpha1","kind":"Calibration","clusterQueues":1,"measuredJobs":2,
               "latencyQuantilesMs":{{"workloadCreated":{ramp},"unsuspended":[],"podsRunning":{ramp},"workloadFinished":{ramp}}}}}"#
        );
        let cfg = SimConfig {
            seed: 11,
            calibration: Some(
                crate::sim::calibration::Calibration::parse("c.json", &text).expect("valid"),
            ),
            ..SimConfig::default()
        };
        let r = repeat(&scenario, &cfg, 5).expect("runs");
        assert_eq!(r.seeds, vec![11, 12, 13, 14, 15]);
        let one = simulate(&scenario, cfg.clone()).expect("runs");
        assert_eq!(r.first.totals.makespan_ms, one.totals.makespan_ms);
        let makespan = r
            .figures
            .iter()
            .find(|f| f.name == "makespan")
            .expect("makespan")
            .spread;
        assert!(makespan.min < makespan.max, "{makespan:?}");
        assert!((makespan.min..=makespan.max).contains(&makespan.median));
        let names: Vec<&str> = r.figures.iter().map(|f| f.name).collect();
        assert!(names.contains(&"createToUnsuspendP99"), "{names:?}");
        let table = r.render_table();
        assert!(table.contains("over 5 seeds (11 to 15)"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
        assert_eq!(json["figures"][0]["name"], "preemptions");
        assert_eq!(
            json["first"]["totals"]["makespanMs"],
            one.totals.makespan_ms
        );
    }
}
