//! `kuota` command line. Argument parsing and printing only; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kuota::engine::{AdmissionFairSharing, EngineConfig, FairPreemptionStrategy};
use kuota::placement::Strategy;
use kuota::sim::{self, Scenario, SimConfig, SourceFile};

#[derive(Parser, Debug)]
#[command(name = "kuota", version, about = "Kueue-compatible admission and quota engine", long_about = None)]
struct Cli {
    /// Without a command, `kuota` runs `simulate` on the built-in demo.
    #[command(subcommand)]
    command: Option<Command>,
    /// Log lines as text or JSON (levels from RUST_LOG). With OTEL_EXPORTER_OTLP_ENDPOINT
    /// set, spans are also exported over OTLP (see docs/observability.md).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: kuota::telemetry::trace::LogFormat,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the simulator on a scenario (default: the built-in demo) and print a report.
    Simulate(SimulateArgs),
    /// Load and validate Kueue manifests (and generator.yaml, nodes.yaml, trace files and
    /// `kuota serve --config` files); exit non-zero on any error.
    Check {
        /// Manifest files to check; a directory stands for every *.yaml, *.yml and *.json
        /// under it.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Serve the admission webhook over TLS (see docs/webhook-server.md).
    Serve(Box<kuota::serve::ServeArgs>),
    /// Create or rotate the webhook's CA and serving certificate (see webhook-certs/README.md).
    Certs(kuota::webhook::certs::CertsArgs),
    /// Print the kueue.x-k8s.io CRDs kuota serves (or write one file per CRD with --out-dir).
    Crds(CrdsArgs),
    /// List a queue's pending workloads in queue order, from Kueue's visibility API through
    /// the API server, with your kubeconfig (docs/visibility.md).
    Pending(kuota::cli::pending::PendingArgs),
    /// Explain where one workload (or the job that owns it) stands: state, queue positions,
    /// what holds it back and what would make it start sooner (docs/visibility.md).
    Explain(kuota::cli::explain::ExplainArgs),
}

#[derive(Args, Debug)]
struct CrdsArgs {
    /// Write `<group>_<plural>.yaml` files here instead of printing one stream to stdout.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Leave out `spec.conversion` (the API server then only rewrites apiVersion between
    /// v1beta1 and v1beta2; for clusters without the webhook).
    #[arg(long)]
    no_conversion: bool,
    /// Namespace of the webhook Service the API server sends ConversionReviews to.
    #[arg(long, default_value = "kuota-system")]
    service_namespace: String,
    /// Name of that Service.
    #[arg(long, default_value = "kuota-webhook")]
    service_name: String,
    /// PEM CA bundle to set as the conversion webhook's caBundle (default: injected at start).
    #[arg(long, value_name = "FILE")]
    ca_bundle: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct SimulateArgs {
    /// Scenario directory: Kueue manifests (*.yaml), generator.yaml, nodes.yaml, traces. Default: the built-in demo.
    #[arg(long, value_name = "DIR", conflicts_with = "scenario")]
    scenario_dir: Option<PathBuf>,
    /// A built-in scenario: demo, gpu-gangs, kueue-baseline, kueue-large-scale, kueue-tas.
    #[arg(long, value_name = "NAME")]
    scenario: Option<String>,
    /// A trace of recorded arrivals (.csv or .jsonl, see docs/simulator.md), added to the scenario.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// A real cluster's actuation latencies (`benches/cluster --calibration-out`), so that
    /// the run predicts that cluster (docs/simulator.md, "Calibration").
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Seed for random arrivals.
    #[arg(long, default_value_t = SimConfig::default().seed)]
    seed: u64,
    /// Run N times, with seeds --seed to --seed + N - 1, and print the first run's
    /// report and each headline figure's median and range: with --calibration one run
    /// is one draw of the latencies (docs/simulator.md, "Calibration").
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000), conflicts_with_all = ["compare", "chart", "metrics_addr", "eta_report"])]
    repeats: u64,
    /// Virtual time a preempted workload takes to stop and release its quota.
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    eviction_delay_ms: i64,
    /// Topology placement strategy: kuota, kueue-bestfit or first-fit.
    #[arg(long, value_name = "STRATEGY", default_value = "kuota", value_parser = parse_strategy)]
    placement: Strategy,
    /// Enable fair sharing (Kueue's fairSharing.enable with its default preemption strategies).
    #[arg(long)]
    fair_sharing: bool,
    /// kuota's preemption protection: a workload that has run less than this is not
    /// preempted (0 = Kueue's behaviour). See docs/simulator.md.
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    preemption_min_runtime_ms: i64,
    /// Turn on Kueue's admission fair sharing with this usageHalfLifeTime (and Kueue's
    /// default 5 min usageSamplingInterval): ClusterQueues whose admissionScope says
    /// UsageBasedAdmissionFairSharing take heads from their least-used LocalQueue.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(0..))]
    admission_fair_sharing_half_life_ms: Option<i64>,
    /// Turn on Kueue's waitForPodsReady with this timeout (and Kueue's defaults
    /// otherwise: recovery as long, backoff from 60 s to 1 h): a gang whose pods never
    /// get ready (`neverReadyFraction` in a generator) gives its quota back.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..))]
    pods_ready_timeout_ms: Option<i64>,
    /// waitForPodsReady's backoffLimitCount: requeues before a gang is deactivated.
    /// Without one, a gang that never gets ready is retried for ever.
    #[arg(long, value_name = "N", requires = "pods_ready_timeout_ms")]
    pods_ready_backoff_limit: Option<u32>,
    /// kuota's head-gang reservation with backfill: hold a gang's nodes when its
    /// earliest start (from the running workloads' maximumExecutionTimeSeconds) is at
    /// most this far ahead; 0 = off. See docs/placement.md.
    #[arg(long, value_name = "MS", default_value_t = kuota::engine::DEFAULT_GANG_RESERVATION_HORIZON, value_parser = clap::value_parser!(i64).range(0..))]
    gang_reservation_horizon_ms: i64,
    /// Write an SVG chart of usage and queue depth over time per ClusterQueue (or cohort).
    #[arg(long, value_name = "FILE.svg")]
    chart: Option<PathBuf>,
    /// Run a second configuration over the same workload and print both side by side:
    /// placement=STRATEGY, fair-sharing=true|false, eviction-delay-ms=MS,
    /// gang-reservation-horizon-ms=MS, admission-fair-sharing-half-life-ms=MS|off, pods-ready-timeout-ms=MS|off,
    /// provisioning=true|false (run the scenario's ProvisioningRequest checks, or an always-up pool),
    /// pods-ready-backoff-limit=N, scenario=NAME or scenario-dir=DIR (repeatable: all apply to run B).
    #[arg(long, value_name = "KEY=VALUE")]
    compare: Vec<String>,
    /// Serve Kueue's metrics of the run on http://ADDR/metrics, and keep serving
    /// after the run until interrupted.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Pace the run: N virtual seconds per wall-clock second (needs --metrics-addr).
    #[arg(long, value_name = "N", requires = "metrics_addr", value_parser = parse_factor)]
    realtime_factor: Option<f64>,
    /// Instead of the usual report, measure the start-time estimates: replay with
    /// log-normal runtimes and overstated bounds, estimate at every submission and every
    /// 10 virtual minutes, and compare with the actual starts (docs/simulator.md).
    #[arg(long, conflicts_with_all = ["compare", "chart", "metrics_addr"])]
    eta_report: bool,
    /// With --eta-report: multiply arrivals and runtimes by N (Kueue's perf scenarios
    /// count in milliseconds; 1000 makes them seconds).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "eta_report", value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
    eta_time_scale: i64,
}

impl Default for SimulateArgs {
    fn default() -> Self {
        Self {
            scenario_dir: None,
            scenario: None,
            trace: None,
            calibration: None,
            json: false,
            seed: SimConfig::default().seed,
            repeats: 1,
            eviction_delay_ms: 0,
            placement: Strategy::Kuota,
            fair_sharing: false,
            preemption_min_runtime_ms: 0,
            admission_fair_sharing_half_life_ms: None,
            pods_ready_timeout_ms: None,
            pods_ready_backoff_limit: None,
            gang_reservation_horizon_ms: kuota::engine::DEFAULT_GANG_RESERVATION_HORIZON,
            chart: None,
            compare: Vec::new(),
            metrics_addr: None,
            realtime_factor: None,
            eta_report: false,
            eta_time_scale: 1,
        }
    }
}

/// Why `kuota simulate` cannot run with the flags given; shown after `error: `.
#[derive(Debug, thiserror::Error)]
enum SimulateError {
    #[error("{0:?}: expected a positive number")]
    NotPositive(String),
    #[error("{0:?}: expected kuota, kueue-bestfit or first-fit")]
    UnknownStrategy(String),
    #[error("--compare {0:?}: expected KEY=VALUE")]
    CompareSyntax(String),
    #[error("--compare {item:?}: {source}")]
    Compare {
        item: String,
        #[source]
        source: Box<SimulateError>,
    },
    #[error("expected true or false")]
    NotABool(#[source] std::str::ParseBoolError),
    #[error("{0}")]
    NotAnInteger(#[source] std::num::ParseIntError),
    #[error(
        "unknown key {0:?} (placement, fair-sharing, eviction-delay-ms, preemption-min-runtime-ms, gang-reservation-horizon-ms, admission-fair-sharing-half-life-ms, pods-ready-timeout-ms, pods-ready-backoff-limit, scenario, scenario-dir)"
    )]
    UnknownCompareKey(String),
    #[error("--scenario {name:?}: no such built-in scenario (built-in: {builtin})")]
    NoSuchScenario { name: String, builtin: String },
    #[error("{0}")]
    Sim(#[from] sim::SimError),
    #[error("the run recorded no time series")]
    NoTimeSeries,
    #[error("{0}")]
    Chart(#[from] sim::chart::ChartError),
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn parse_factor(s: &str) -> Result<f64, SimulateError> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(f),
        _ => Err(SimulateError::NotPositive(s.to_string())),
    }
}

fn parse_strategy(s: &str) -> Result<Strategy, SimulateError> {
    match s {
        "kuota" => Ok(Strategy::Kuota),
        "kueue-bestfit" => Ok(Strategy::KueueBestFit),
        "first-fit" => Ok(Strategy::FirstFit),
        other => Err(SimulateError::UnknownStrategy(other.to_string())),
    }
}

fn strategy_name(s: Strategy) -> &'static str {
    match s {
        Strategy::Kuota => "kuota",
        Strategy::KueueBestFit => "kueue-bestfit",
        Strategy::FirstFit => "first-fit",
    }
}

/// `--admission-fair-sharing-half-life-ms`: Kueue's admissionFairSharing with that
/// half-life and its other defaults.
fn admission_fair_sharing(half_life_ms: Option<i64>) -> Option<AdmissionFairSharing> {
    half_life_ms.map(|ms| AdmissionFairSharing {
        usage_half_life: ms,
        ..AdmissionFairSharing::default()
    })
}

/// `--fair-sharing`: Kueue's `fairSharing.enable` with its default preemption strategies.
fn fair_sharing(on: bool) -> Option<Vec<FairPreemptionStrategy>> {
    on.then(|| {
        vec![
            FairPreemptionStrategy::LessThanOrEqualToFinalShare,
            FairPreemptionStrategy::LessThanInitialShare,
        ]
    })
}

fn main() -> ExitCode {
    // As kubectl's plugin `kubectl-kuota`, usage and errors name `kubectl kuota`.
    let argv0 = std::env::args().next().unwrap_or_default();
    let name = kuota::cli::invoked_as(&argv0);
    let matches = <Cli as clap::CommandFactory>::command()
        .name(name)
        .bin_name(name)
        .get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Logs (and OTLP spans) for the server by default; the simulator prints a report
    // and logs only warnings unless RUST_LOG asks for more.
    let default_level = match cli.command {
        Some(Command::Serve(_)) => "info",
        _ => "warn",
    };
    let _trace = match kuota::telemetry::trace::init(
        cli.log_format,
        kuota::telemetry::trace::Otlp::from_env(),
        default_level,
    ) {
        Ok(guard) => guard,
        Err(e) => return fail(&e),
    };
    match cli
        .command
        .unwrap_or(Command::Simulate(SimulateArgs::default()))
    {
        Command::Simulate(args) => simulate(args),
        Command::Check { files } => check(&files),
        Command::Serve(args) => kuota::serve::serve_cli(*args),
        Command::Certs(args) => kuota::webhook::certs::run_cli(&args),
        Command::Crds(args) => crds(&args),
        Command::Pending(args) => terminal(kuota::cli::pending::run(&args)),
        Command::Explain(args) => terminal(kuota::cli::explain::run(&args)),
    }
}

/// Runs a terminal command on a one-thread runtime: its text on stdout, or its error.
fn terminal<E: std::fmt::Display>(
    command: impl std::future::Future<Output = Result<String, E>>,
) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&e),
    };
    match rt.block_on(command) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn crds(args: &CrdsArgs) -> ExitCode {
    let ca_bundle = match &args.ca_bundle {
        Some(path) => match std::fs::read(path) {
            Ok(pem) => Some(pem),
            Err(e) => return fail(&format!("--ca-bundle {}: {e}", path.display())),
        },
        None => None,
    };
    let hook = kuota::crds::ConversionWebhook {
        namespace: args.service_namespace.clone(),
        service: args.service_name.clone(),
        ca_bundle,
        ..kuota::crds::ConversionWebhook::in_cluster()
    };
    let conversion = (!args.no_conversion).then_some(&hook);
    let result = match &args.out_dir {
        Some(dir) => kuota::crds::write_dir(dir, conversion).map(|files| {
            for f in files {
                eprintln!("wrote {}", f.display());
            }
        }),
        None => kuota::crds::render(conversion).map(|text| print!("{text}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

/// `kuota simulate --eta-report`: the accuracy of the start-time estimates on `scenario`.
fn eta_report(scenario: &Scenario, args: &SimulateArgs, cfg: SimConfig) -> ExitCode {
    let plan = match scenario.plan(args.seed) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let eta = sim::eta::EtaConfig {
        seed: args.seed,
        engine: cfg.engine,
        time_scale: args.eta_time_scale,
        ..sim::eta::EtaConfig::default()
    };
    let started = std::time::Instant::now();
    match sim::eta::eta_report(&plan, &eta) {
        Ok(r) => {
            print!("{}", sim::eta::render(&r));
            eprintln!("replayed in {:.1} s", started.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn simulate(args: SimulateArgs) -> ExitCode {
    let scenario = match load_scenario(&args) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let cfg = SimConfig {
        seed: args.seed,
        eviction_delay_ms: args.eviction_delay_ms,
        engine: EngineConfig {
            fair_sharing: fair_sharing(args.fair_sharing),
            placement: args.placement,
            preemption_min_runtime: args.preemption_min_runtime_ms,
            admission_fair_sharing: admission_fair_sharing(
                args.admission_fair_sharing_half_life_ms,
            ),
            pods_ready: pods_ready(args.pods_ready_timeout_ms, args.pods_ready_backoff_limit),
            gang_reservation_horizon: args.gang_reservation_horizon_ms,
            // Uncalibrated, a workload's quota comes back the moment its pods are done,
            // so nothing is ever finishing; calibrated, it comes back a measured
            // latency later, and the grace applies as in a cluster.
            ..EngineConfig::default()
        },
        timeseries: args.chart.is_some(),
        metrics: args.metrics_addr.map(|_| kuota::telemetry::Metrics::new()),
        realtime_factor: args.realtime_factor,
        calibration: match args
            .calibration
            .as_deref()
            .map(sim::calibration::Calibration::load)
        {
            None => None,
            Some(Ok(c)) => Some(c),
            Some(Err(e)) => return fail(&e),
        },
        ..SimConfig::default()
    };
    if args.eta_report {
        return eta_report(&scenario, &args, cfg);
    }
    if args.repeats > 1 {
        return match sim::repeats::repeat(&scenario, &cfg, args.repeats) {
            Ok(r) if args.json => {
                println!("{}", r.to_json());
                ExitCode::SUCCESS
            }
            Ok(r) => {
                print!("{}", r.render_table());
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    }
    let server = match (args.metrics_addr, &cfg.metrics) {
        (Some(addr), Some(m)) => {
            match kuota::telemetry::http::MetricsServer::start(addr, m.clone()) {
                Ok(s) => {
                    eprintln!("serving metrics on http://{}/metrics", s.addr());
                    Some(s)
                }
                Err(e) => return fail(&e),
            }
        }
        _ => None,
    };
    let mut label_a = format!("placement={}", strategy_name(args.placement));
    if args.fair_sharing {
        label_a.push_str(",fair-sharing");
    }
    if let Some(ms) = args.admission_fair_sharing_half_life_ms {
        label_a.push_str(&format!(",admission-fair-sharing-half-life-ms={ms}"));
    }
    if let Some(ms) = args.pods_ready_timeout_ms {
        label_a.push_str(&format!(",pods-ready-timeout-ms={ms}"));
    }
    if args.gang_reservation_horizon_ms > 0 {
        label_a.push_str(&format!(
            ",gang-reservation-horizon-ms={}",
            args.gang_reservation_horizon_ms
        ));
    }
    if args.preemption_min_runtime_ms > 0 {
        label_a.push_str(&format!(
            ",preemption-min-runtime-ms={}",
            args.preemption_min_runtime_ms
        ));
    }
    let report = match sim::simulate(&scenario, cfg.clone()) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if let Some(path) = &args.chart
        && let Err(e) = write_chart(path, &report)
    {
        return fail(&e);
    }
    if args.compare.is_empty() {
        if args.json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.render_table());
        }
        if let Some(server) = server {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            eprintln!(
                "run finished; still serving metrics on http://{}/metrics (interrupt to stop)",
                server.addr()
            );
            server.wait();
        }
        return ExitCode::SUCCESS;
    }
    let (scenario_b, cfg_b) = match compare_config(&args, &scenario, &cfg) {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let report_b = match sim::simulate(&scenario_b, cfg_b) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let label_b = args.compare.join(",");
    if args.json {
        let both = serde_json::json!({
            "a": {"label": label_a, "report": report},
            "b": {"label": label_b, "report": report_b},
        });
        match serde_json::to_string_pretty(&both) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(&e),
        }
    } else {
        print!(
            "{}",
            sim::report::render_comparison(&label_a, &report, &label_b, &report_b)
        );
    }
    ExitCode::SUCCESS
}

fn write_chart(path: &std::path::Path, report: &sim::Report) -> Result<(), SimulateError> {
    let ts = report
        .timeseries
        .as_ref()
        .ok_or(SimulateError::NoTimeSeries)?;
    let svg = sim::chart::svg(&report.scenario, ts)?;
    std::fs::write(path, svg).map_err(|source| SimulateError::Write {
        path: path.to_owned(),
        source,
    })
}

/// waitForPodsReady with `timeout` (ms) and Kueue's other defaults; `None` when off.
fn pods_ready(timeout: Option<i64>, limit: Option<u32>) -> Option<kuota::engine::PodsReadyConfig> {
    timeout.map(|t| kuota::engine::PodsReadyConfig {
        timeout: t,
        recovery_timeout: Some(t),
        backoff_limit_count: limit,
        ..kuota::engine::PodsReadyConfig::default()
    })
}

/// Run B of `--compare`: run A's scenario and configuration with the overrides applied.
fn compare_config(
    args: &SimulateArgs,
    scenario: &Scenario,
    cfg: &SimConfig,
) -> Result<(Scenario, SimConfig), SimulateError> {
    let mut scenario = scenario.clone();
    let mut cfg = SimConfig {
        timeseries: false,
        metrics: None,
        realtime_factor: None,
        ..cfg.clone()
    };
    for item in &args.compare {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| SimulateError::CompareSyntax(item.clone()))?;
        let bad = |e: SimulateError| SimulateError::Compare {
            item: item.clone(),
            source: Box::new(e),
        };
        match k {
            "placement" => cfg.engine.placement = parse_strategy(v).map_err(bad)?,
            "fair-sharing" => {
                let on: bool = v.parse().map_err(|e| bad(SimulateError::NotABool(e)))?;
                cfg.engine.fair_sharing = fair_sharing(on);
            }
            "provisioning" => {
                cfg.provisioning = v.parse().map_err(|e| bad(SimulateError::NotABool(e)))?;
            }
            "preemption-min-runtime-ms" => {
                cfg.engine.preemption_min_runtime = v
                    .parse::<u32>()
                    .map_err(|e| bad(SimulateError::NotAnInteger(e)))?
                    .into();
            }
            "gang-reservation-horizon-ms" => {
                cfg.engine.gang_reservation_horizon = v
                    .parse::<u32>()
                    .map_err(|e| bad(SimulateError::NotAnInteger(e)))?
                    .into();
            }
            "eviction-delay-ms" => {
                cfg.eviction_delay_ms = v
                    .parse::<u32>()
                    .map_err(|e| bad(SimulateError::NotAnInteger(e)))?
                    .into();
            }
            "admission-fair-sharing-half-life-ms" => {
                cfg.engine.admission_fair_sharing = if v == "off" {
                    None
                } else {
                    let ms = v
                        .parse::<u32>()
                        .map_err(|e| bad(SimulateError::NotAnInteger(e)))?;
                    admission_fair_sharing(Some(ms.into()))
                };
            }
            "pods-ready-timeout-ms" => {
                let limit = cfg
                    .engine
                    .pods_ready
                    .as_ref()
                    .and_then(|p| p.backoff_limit_count)
                    .or(args.pods_ready_backoff_limit);
                cfg.engine.pods_ready = if v == "off" {
                    None
                } else {
                    let ms = v
                        .parse::<u32>()
                        .map_err(|e| bad(SimulateError::NotAnInteger(e)))?;
                    pods_ready(Some(ms.into()), limit)
                };
            }
            "pods-ready-backoff-limit" => {
                let n = v
                    .parse::<u32>()
                    .map_err(|e| bad(SimulateError::NotAnInteger(e)))?;
                if let Some(p) = cfg.engine.pods_ready.as_mut() {
                    p.backoff_limit_count = Some(n);
                }
            }
            "scenario" | "scenario-dir" => {
                let b = SimulateArgs {
                    scenario: (k == "scenario").then(|| v.to_string()),
                    scenario_dir: (k == "scenario-dir").then(|| PathBuf::from(v)),
                    trace: args.trace.clone(),
                    ..SimulateArgs::default()
                };
                scenario = load_scenario(&b).map_err(bad)?;
            }
            other => {
                return Err(bad(SimulateError::UnknownCompareKey(other.to_string())));
            }
        }
    }
    Ok((scenario, cfg))
}

/// The scenario the flags name: a directory, a built-in, or the demo; plus the trace.
fn load_scenario(args: &SimulateArgs) -> Result<Scenario, SimulateError> {
    let scenario = match (&args.scenario_dir, &args.scenario) {
        (Some(dir), _) => Scenario::from_dir(dir)?,
        (None, Some(name)) => {
            Scenario::builtin(name).ok_or_else(|| SimulateError::NoSuchScenario {
                name: name.clone(),
                builtin: Scenario::builtin_names().join(", "),
            })?
        }
        (None, None) => Scenario::demo(),
    };
    match &args.trace {
        Some(path) => {
            let f = SourceFile::read(path)?;
            Ok(scenario.with_trace(f)?)
        }
        None => Ok(scenario),
    }
}

fn check(paths: &[PathBuf]) -> ExitCode {
    let report = check_report(paths);
    for line in &report.lines {
        eprintln!("{line}");
    }
    let (errors, warnings, files) = (report.errors, report.warnings, report.files);
    if errors > 0 {
        eprintln!("{errors} error(s), {warnings} warning(s) in {files} file(s)");
        ExitCode::FAILURE
    } else {
        println!("{files} file(s) OK, {warnings} warning(s)");
        ExitCode::SUCCESS
    }
}

/// What `kuota check` reports: its lines, and the errors and warnings among them.
#[derive(Debug, Default)]
struct CheckReport {
    lines: Vec<String>,
    errors: usize,
    warnings: usize,
    files: usize,
}

impl CheckReport {
    fn error(&mut self, line: String) {
        self.lines.push(format!("error: {line}"));
        self.errors += 1;
    }

    fn warning(&mut self, line: String) {
        self.lines.push(line);
        self.warnings += 1;
    }
}

/// Checks `paths` (files, or directories standing for the files under them).
fn check_report(paths: &[PathBuf]) -> CheckReport {
    let mut report = CheckReport::default();
    let mut listed = Vec::new();
    for p in paths {
        match checked_files(p) {
            Ok(found) => listed.extend(found),
            Err(e) => report.error(format!("{}: {e}", p.display())),
        }
    }
    report.files = listed.len();
    let mut files = Vec::new();
    // Kueue/kuota configuration files (`kuota serve --config`) are checked as such.
    let (configs, rest): (Vec<&PathBuf>, Vec<&PathBuf>) = listed
        .iter()
        .partition(|p| kuota::config::is_config_file(p));
    for p in configs {
        match kuota::config::Settings::load(std::slice::from_ref(p)) {
            Ok(settings) => {
                for field in &settings.ignored {
                    report.warning(format!(
                        "{}: warning: {field}: accepted, not used by kuota",
                        p.display()
                    ));
                }
                for name in &settings.unsupported_frameworks {
                    report.warning(format!("{}: warning: integrations.frameworks: {name:?} is a Kueue framework kuota does not run", p.display()));
                }
            }
            Err(e) => report.error(e.to_string()),
        }
    }
    for p in rest {
        match SourceFile::read(p) {
            Ok(f) => files.push(f),
            Err(e) => report.error(e.to_string()),
        }
    }
    for d in sim::scenario::check(&files) {
        if d.error {
            report.lines.push(d.to_string());
            report.errors += 1;
        } else {
            report.warning(d.to_string());
        }
    }
    report
}

/// The files `kuota check` reads for `path`: the file itself, or every `*.yaml`, `*.yml`
/// and `*.json` under a directory, recursively, in name order (as `kubectl apply -R -f`
/// reads a directory).
fn checked_files(path: &std::path::Path) -> std::io::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    let mut out = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            out.extend(checked_files(&entry)?);
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            out.push(entry);
        }
    }
    Ok(out)
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// A directory is read recursively (YAML and JSON only); every warning is counted,
    /// the configuration file's as well as the manifests'; a queue name the webhook
    /// refuses is an error.
    #[test]
    fn check_reads_a_directory_and_counts_every_warning() {
        let dir = std::env::temp_dir().join(format!("kuota-check-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("queues/nested")).expect("mkdir");
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect("write");
        write(
            "config.yaml",
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\npprofBindAddress: :8082\nqueueVisibility: {}\n",
        );
        write(
            "queues/cq.yaml",
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: nowhere\n      resources: [{name: cpu, nominalQuota: 1}]\n",
        );
        write(
            "queues/nested/lq.json",
            r#"{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}"#,
        );
        write("queues/notes.txt", "not a manifest");
        let report = check_report(std::slice::from_ref(&dir));
        assert_eq!((report.files, report.errors), (3, 0), "{:?}", report.lines);
        assert_eq!(report.warnings, 3, "{:?}", report.lines);
        assert!(
            report
                .lines
                .iter()
                .any(|l| l.contains("ResourceFlavor \"nowhere\" is not defined")),
            "{:?}",
            report.lines
        );

        write(
            "queues/job.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: default, labels: {kueue.x-k8s.io/queue-name: Bad_Name}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n",
        );
        let report = check_report(std::slice::from_ref(&dir));
        assert_eq!((report.files, report.errors), (4, 1), "{:?}", report.lines);
        assert!(
            report.lines.iter().any(|l| l.contains(
                "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"Bad_Name\""
            )),
            "{:?}",
            report.lines
        );
        let missing = check_report(&[dir.join("absent")]);
        assert_eq!(missing.errors, 1, "{:?}", missing.lines);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
        let c =
            Cli::try_parse_from(["kuota", "simulate", "--json", "--seed", "7"]).expect("parses");
        assert!(matches!(
            c.command,
            Some(Command::Simulate(SimulateArgs {
                json: true,
                seed: 7,
                ..
            }))
        ));
        assert!(Cli::try_parse_from(["kuota", "check"]).is_err());
        assert!(Cli::try_parse_from(["kuota", "simulate", "--eviction-delay-ms", "-5"]).is_err());
        for bad in [
            &["--repeats", "0"][..],
            &["--repeats", "x"],
            &["--repeats", "3", "--compare", "fair-sharing=true"],
        ] {
            let argv = [&["kuota", "simulate"][..], bad].concat();
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
        assert!(
            Cli::try_parse_from(["kuota"])
                .expect("parses")
                .command
                .is_none()
        );
        let c = Cli::try_parse_from([
            "kuota",
            "simulate",
            "--scenario",
            "gpu-gangs",
            "--placement",
            "first-fit",
            "--compare",
            "placement=kueue-bestfit",
        ])
        .expect("parses");
        let Some(Command::Simulate(args)) = c.command else {
            panic!("simulate");
        };
        assert_eq!(args.placement, Strategy::FirstFit);
        assert_eq!(args.compare, ["placement=kueue-bestfit"]);
        assert!(Cli::try_parse_from(["kuota", "simulate", "--placement", "best"]).is_err());
        assert!(
            Cli::try_parse_from([
                "kuota",
                "simulate",
                "--scenario",
                "a",
                "--scenario-dir",
                "b"
            ])
            .is_err()
        );
    }

    #[test]
    fn compare_overrides_apply_to_run_b_only() {
        let args = SimulateArgs {
            compare: vec![
                "placement=kueue-bestfit".into(),
                "fair-sharing=true".into(),
                "eviction-delay-ms=500".into(),
                "admission-fair-sharing-half-life-ms=60000".into(),
                "scenario=kueue-tas".into(),
            ],
            ..SimulateArgs::default()
        };
        let a = Scenario::demo();
        let cfg = SimConfig::default();
        let (s, b) = compare_config(&args, &a, &cfg).expect("valid");
        assert_eq!(s.name, "kueue-tas");
        assert_eq!(b.engine.placement, Strategy::KueueBestFit);
        assert!(b.engine.fair_sharing.is_some());
        assert_eq!(b.eviction_delay_ms, 500);
        let afs = b
            .engine
            .admission_fair_sharing
            .expect("admission fair sharing on");
        assert_eq!(afs.usage_half_life, 60_000);
        // Kueue's default sampling interval, 5 minutes.
        assert_eq!(afs.usage_sampling_interval, 300_000);
        assert_eq!(cfg.engine.placement, Strategy::Kuota);
        assert!(cfg.engine.admission_fair_sharing.is_none());
        for bad in [
            "placement",
            "placement=best",
            "seed=1",
            "scenario=nope",
            "admission-fair-sharing-half-life-ms=soon",
        ] {
            let args = SimulateArgs {
                compare: vec![bad.into()],
                ..SimulateArgs::default()
            };
            let e = compare_config(&args, &a, &cfg).expect_err(bad).to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
