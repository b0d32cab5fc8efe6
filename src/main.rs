//! `kuota` command line. Argument parsing and printing only; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kuota::sim::{self, Scenario, SimConfig, SourceFile};

#[derive(Parser, Debug)]
#[command(name = "kuota", version, about = "Kueue-compatible admission and quota engine", long_about = None)]
struct Cli {
    /// Without a command, `kuota` runs `simulate` on the built-in demo.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the simulator on a scenario (default: the built-in demo) and print a report.
    Simulate(SimulateArgs),
    /// Load and validate Kueue manifests (and generator.yaml files); exit non-zero on any error.
    Check {
        /// Manifest files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Serve the admission webhook over TLS (see docs/webhook-server.md).
    Serve(kuota::webhook::server::ServeArgs),
    /// Create or rotate the webhook's CA and serving certificate (see webhook-certs/README.md).
    Certs(kuota::webhook::certs::CertsArgs),
}

#[derive(Args, Debug)]
struct SimulateArgs {
    /// Scenario directory: Kueue manifests (*.yaml) plus generator.yaml. Default: the built-in demo.
    #[arg(long, value_name = "DIR")]
    scenario_dir: Option<PathBuf>,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Seed for random arrivals.
    #[arg(long, default_value_t = SimConfig::default().seed)]
    seed: u64,
    /// Virtual time a preempted workload takes to stop and release its quota.
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    eviction_delay_ms: i64,
}

impl Default for SimulateArgs {
    fn default() -> Self {
        Self {
            scenario_dir: None,
            json: false,
            seed: SimConfig::default().seed,
            eviction_delay_ms: 0,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli
        .command
        .unwrap_or(Command::Simulate(SimulateArgs::default()))
    {
        Command::Simulate(args) => simulate(args),
        Command::Check { files } => check(&files),
        Command::Serve(args) => kuota::webhook::server::serve_cli(args),
        Command::Certs(args) => kuota::webhook::certs::run_cli(&args),
    }
}

fn simulate(args: SimulateArgs) -> ExitCode {
    let scenario = match &args.scenario_dir {
        Some(dir) => match Scenario::from_dir(dir) {
            Ok(s) => s,
            Err(e) => return fail(&e),
        },
        None => Scenario::demo(),
    };
    let cfg = SimConfig {
        seed: args.seed,
        eviction_delay_ms: args.eviction_delay_ms,
        ..SimConfig::default()
    };
    match sim::simulate(&scenario, cfg) {
        Ok(report) if args.json => {
            println!("{}", report.to_json());
            ExitCode::SUCCESS
        }
        Ok(report) => {
            print!("{}", report.render_table());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn check(paths: &[PathBuf]) -> ExitCode {
    let mut files = Vec::new();
    let mut errors = 0usize;
    for p in paths {
        match SourceFile::read(p) {
            Ok(f) => files.push(f),
            Err(e) => {
                eprintln!("error: {e}");
                errors += 1;
            }
        }
    }
    let diagnostics = sim::scenario::check(&files);
    for d in &diagnostics {
        eprintln!("{d}");
    }
    errors += diagnostics.iter().filter(|d| d.error).count();
    let warnings = diagnostics.len() - diagnostics.iter().filter(|d| d.error).count();
    if errors > 0 {
        eprintln!(
            "{errors} error(s), {warnings} warning(s) in {} file(s)",
            paths.len()
        );
        ExitCode::FAILURE
    } else {
        println!("{} file(s) OK, {warnings} warning(s)", paths.len());
        ExitCode::SUCCESS
    }
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
        assert!(
            Cli::try_parse_from(["kuota"])
                .expect("parses")
                .command
                .is_none()
        );
    }
}
