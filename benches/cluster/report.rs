//! The run's tables, printed as Markdown: the summary (rates, latencies, the reference
//! controllers, kuota's CPU and memory) and, from the audit log, kuota's writes by kind,
//! where each admission waited, the writes during unchanged re-evaluations, and the rate
//! target.

use std::path::Path;

use k8s_openapi::jiff::Timestamp;

use crate::audit::Writer;
use crate::floor::Floor;
use crate::mix::Mix;
use crate::{Args, BoxError, KuotaPhase, Reference, audit, operator, percentile, setup};

/// ClusterQueue touches per queue in the re-evaluation phase.
pub const TOUCHES: usize = 5;
/// kuota's sustained admission rate, as a share of the write floor's, it should reach.
pub const FLOOR_TARGET: f64 = 0.9;

/// What the run measured.
pub struct Summary<'a> {
    pub args: &'a Args,
    pub raw_rate: f64,
    pub main: &'a KuotaPhase,
    pub ideal: Option<&'a Reference>,
    pub floor: Option<&'a Floor>,
    /// kuota's CPU seconds and peak RSS (MiB).
    pub stats: Option<(f64, f64)>,
}

impl Summary<'_> {
    /// The summary table.
    pub fn print(&self) {
        let (args, t) = (self.args, &self.main.timeline);
        let (noun, kind) = (args.kind.noun(), args.kind.integration().gvk().kind);
        let shape = match args.kind {
            Mix::Job => String::new(),
            Mix::Jobset => format!(
                " of {} replicated Jobs × {} pods",
                crate::mix::JOBSET_REPLICATED_JOBS,
                crate::mix::JOBSET_PODS_PER_JOB
            ),
        };
        println!(
            "\n## kuota on Kueue's baseline shape ({} {noun}{shape}, 5 cohorts x 6 ClusterQueues, kuota QPS {} burst {})\n",
            args.jobs, args.kuota_qps, args.kuota_burst
        );
        println!("| measure | value |\n|---|---|");
        println!(
            "| raw {kind}-create rate (no webhook, no kuota, {} in flight) | {:.1} {noun}/s |",
            args.concurrency, self.raw_rate
        );
        println!("| queued {noun} created in | {:.1} s |", self.main.create_s);
        println!(
            "| admitted (unsuspended) | {} of {} |",
            t.admitted(),
            args.jobs
        );
        println!("| finished | {} |", t.finished);
        println!(
            "| wall time, first create to last finish | {:.1} s |",
            self.main.wall_s
        );
        println!("| admissions/s, overall | {:.1} |", t.overall());
        println!(
            "| admissions/s, sustained (10th to 90th percentile) | {:.1} |",
            t.sustained()
        );
        println!(
            "| create→unsuspend p50 / p99 | {:.2} s / {:.2} s |",
            percentile(&t.latencies, 0.5),
            percentile(&t.latencies, 0.99)
        );
        if let Some(r) = self.ideal {
            let how = format!("unsuspends on sight: 1 write per {kind}");
            self.reference("ideal controller", &how, r, None);
        }
        if let Some(f) = self.floor {
            let how = format!("kuota's own writes for each {kind} on sight, no scheduling");
            self.reference("write floor", &how, &f.reference, Some(f.failed));
            let ratio = t.sustained() / f.reference.timeline.sustained();
            println!(
                "| kuota ÷ write floor vs target {FLOOR_TARGET} | {ratio:.2}: {} |",
                if ratio >= FLOOR_TARGET {
                    "met"
                } else {
                    "NOT met"
                }
            );
        }
        if let Some((cpu, rss)) = self.stats {
            println!("| kuota CPU | {cpu:.1} s |");
            println!("| kuota peak RSS | {rss:.1} MiB |");
        }
    }

    /// A reference controller's run (with its failed writes, if it counts them), its
    /// rate and latency, and kuota's rate as a ratio to it.
    fn reference(&self, name: &str, how: &str, r: &Reference, failed: Option<usize>) {
        let t = &r.timeline;
        let (failed_head, failed_value) = match failed {
            Some(n) => (" / failed writes", format!(" / {n}")),
            None => ("", String::new()),
        };
        println!(
            "| {name}, same mix and run ({how}): created in / admitted / finished{failed_head} | {:.1} s / {} / {}{failed_value} |",
            r.create_s,
            t.admitted(),
            t.finished
        );
        println!(
            "| {name}: admissions/s sustained, create→unsuspend p50 / p99 | {:.1}, {:.2} s / {:.2} s |",
            t.sustained(),
            percentile(&t.latencies, 0.5),
            percentile(&t.latencies, 0.99)
        );
        println!(
            "| **kuota ÷ {name}**, sustained admissions/s | **{:.2}** |",
            self.main.timeline.sustained() / t.sustained()
        );
    }

    /// The audit log's tables: kuota's writes (its user is the one that wrote
    /// `marker`), where admissions waited, the writes in the `idle` window, the target.
    pub fn writes(
        &self,
        log: &Path,
        marker: &str,
        idle: (Timestamp, Timestamp),
    ) -> Result<(), BoxError> {
        let user = audit::user_of_marker(log, marker)?
            .ok_or("the audit log has no write of the marker ConfigMap")?;
        let mix = self.args.kind;
        let kind = mix.integration().gvk().kind;
        let (from, to) = self.main.window;
        let writes = audit::count_writes(log, Writer::User(&user), mix, from, to)?;
        let jobs = self.main.timeline.admitted().max(1) as f64;
        let total: u64 = writes.by_kind.values().sum();
        println!("\n### kuota's API writes per admitted {kind} (audit log, user {user})\n");
        println!("| write | count | per admitted {kind} |\n|---|---|---|");
        for (kind, count) in &writes.by_kind {
            println!("| {kind} | {count} | {:.2} |", *count as f64 / jobs);
        }
        println!("| total | {total} | {:.2} |", total as f64 / jobs);
        let failed: u64 = writes.failed.values().sum();
        let detail: Vec<String> = writes
            .failed
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        println!(
            "| failed (refused by the API server) | {failed} | {:.2}% of writes (target < 1%){} |",
            failed as f64 * 100.0 / total.max(1) as f64,
            if detail.is_empty() {
                String::new()
            } else {
                format!(": {}", detail.join(", "))
            }
        );
        let per = writes.admission_path as f64 / jobs;
        println!(
            "| **admission path** (Workload create, admitting status patch, unsuspending {kind} patch) | {} | **{per:.2}** (target ≤ 3) |",
            writes.admission_path
        );
        println!(
            "\n### Where a {kind}'s admission waits (audit log: when the API server received each write)\n"
        );
        println!(
            "| from → to | {} | p50 | p90 | p99 |\n|---|---|---|---|---|",
            mix.noun()
        );
        for (stage, gaps) in writes.stage_gaps(&kind) {
            println!(
                "| {stage} | {} | {:.2} s | {:.2} s | {:.2} s |",
                gaps.len(),
                percentile(&gaps, 0.5),
                percentile(&gaps, 0.9),
                percentile(&gaps, 0.99)
            );
        }
        self.makespan(&writes);
        idle_writes(log, &user, mix, idle)?;
        if mix == Mix::Jobset {
            self.operator_writes(log)?;
        }
        let t = &self.main.timeline;
        let rate = t.overall().max(t.sustained());
        let bound = 0.8 * self.raw_rate / (1.0 + per);
        println!(
            "\nadmissions/s {rate:.1} vs target 0.8 × raw create rate ÷ (1 + writes per admission) = {bound:.1}: {}",
            if rate >= bound { "met" } else { "NOT met" }
        );
        Ok(())
    }
}

impl Summary<'_> {
    /// The makespan against two capacity bounds, and the preemptions: the bound is the
    /// work (cpu × time) of every Job over the cohorts' whole nominal cpu, with each
    /// Job's time its class's runtime, or the hold on its quota the audit log shows
    /// (last unsuspend → Workload `Finished`, which adds the pods' start, the Job
    /// controller's completion and kuota's finish to the runtime).
    fn makespan(&self, writes: &audit::Writes) {
        let capacity =
            (setup::COHORTS * setup::QUEUES_PER_COHORT) as f64 * f64::from(self.args.nominal_cpu);
        let class_of = |job: &str| {
            let name = job.rsplit('/').next().unwrap_or(job);
            let class = name.split('-').next().unwrap_or(name);
            setup::CLASSES.iter().find(|c| c.name == class)
        };
        let planned: f64 = setup::plan(self.args.jobs)
            .iter()
            .map(|(_, c)| f64::from(c.cpu) * c.runtime_ms as f64 / 1000.0)
            .sum();
        let holds = writes.hold_seconds();
        let held: f64 = holds
            .iter()
            .filter_map(|(job, s)| Some(f64::from(class_of(job)?.cpu) * s))
            .sum();
        let mut hold_s: Vec<f64> = holds.values().copied().collect();
        hold_s.sort_by(f64::total_cmp);
        let wall = self.main.wall_s;
        let jobs = self.args.jobs.max(1) as f64;
        println!("\n### Makespan and preemptions (audit log)\n");
        println!("| measure | value |\n|---|---|");
        println!("| makespan (first create to last finish) | {wall:.1} s |");
        println!(
            "| capacity bound: Σ cpu × runtime ÷ {capacity} cpu | {:.1} s; makespan ÷ bound **{:.1}** |",
            planned / capacity,
            wall / (planned / capacity)
        );
        println!(
            "| hold time (last unsuspend → Workload Finished), {} Jobs: p50 / p90 / p99 | {:.2} s / {:.2} s / {:.2} s |",
            hold_s.len(),
            percentile(&hold_s, 0.5),
            percentile(&hold_s, 0.9),
            percentile(&hold_s, 0.99)
        );
        println!(
            "| hold-time bound: Σ cpu × hold ÷ {capacity} cpu | {:.1} s; makespan ÷ bound **{:.2}** (target ≤ 1.5) |",
            held / capacity,
            wall / (held / capacity).max(f64::EPSILON)
        );
        println!(
            "| preemptions | {} (**{:.0} per 1,000 Jobs**) |",
            writes.preemptions.len(),
            writes.preemptions.len() as f64 * 1000.0 / jobs
        );
    }

    /// The stand-in JobSet operator's writes in each phase (its own audit user, not
    /// counted as kuota's): the same work in every phase, so it loads each alike.
    fn operator_writes(&self, log: &Path) -> Result<(), BoxError> {
        let mut phases = vec![];
        if let Some(r) = self.ideal {
            phases.push(("ideal controller", r.window, r.timeline.admitted()));
        }
        if let Some(f) = self.floor {
            let r = &f.reference;
            phases.push(("write floor", r.window, r.timeline.admitted()));
        }
        phases.push(("kuota", self.main.window, self.main.timeline.admitted()));
        println!(
            "\n### The stand-in JobSet operator's writes (audit log, user {}), not kuota's\n",
            operator::OPERATOR_USER
        );
        println!("| phase | write | count | per admitted JobSet |\n|---|---|---|---|");
        for (phase, (from, to), admitted) in phases {
            let by = Writer::Impersonating(operator::OPERATOR_USER);
            let writes = audit::count_writes(log, by, self.args.kind, from, to)?.by_kind;
            let n = admitted.max(1) as f64;
            for (kind, count) in &writes {
                println!("| {phase} | {kind} | {count} | {:.2} |", *count as f64 / n);
            }
            let total: u64 = writes.values().sum();
            println!("| {phase} | total | {total} | {:.2} |", total as f64 / n);
        }
        Ok(())
    }
}

/// kuota's writes while nothing changed for its blocked Jobs; the leader's Lease
/// renewals go on whatever the engine does, so they are counted apart.
fn idle_writes(
    log: &Path,
    user: &str,
    mix: Mix,
    idle: (Timestamp, Timestamp),
) -> Result<(), BoxError> {
    let idle = audit::count_writes(log, Writer::User(user), mix, idle.0, idle.1)?.by_kind;
    let renewals: u64 = idle
        .iter()
        .filter(|(k, _)| k.ends_with(" leases"))
        .map(|(_, n)| n)
        .sum();
    let writes = idle.values().sum::<u64>() - renewals;
    let queues = setup::COHORTS * setup::QUEUES_PER_COHORT;
    println!(
        "\nkuota's writes during {} unchanged re-evaluations ({queues} blocked {}, {TOUCHES} ClusterQueue touches each): {writes} (target 0; {renewals} Lease renewals besides)",
        queues * TOUCHES,
        mix.noun()
    );
    for (kind, count) in idle.iter().filter(|(k, _)| !k.ends_with(" leases")) {
        println!("  {kind}: {count}");
    }
    Ok(())
}
