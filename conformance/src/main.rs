//! `mlx5-conformance`: run the suite, show its coverage of the behaviour checklist, list the
//! simulator's profiles, capture a real card's profile.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use mlx5_conformance::harness::divergence::SHIPPED;
use mlx5_conformance::{Divergences, Report, Target, coverage, run_target, suite};
use mlx5_sim::{Profile, ShippedProfiles};

#[derive(Parser)]
#[command(name = "mlx5-conformance", version, about = "The mlx5dv conformance suite, on the simulator or on hardware")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone, Default)]
struct DeviceArgs {
    /// The mlx5 device to use on hw (`mlx5_0`); the first mlx5 device by default.
    #[arg(long)]
    device: Option<String>,
    /// The PCI name of an mlx5 function bound to vfio-pci, for the VFIO cases on hw.
    #[arg(long)]
    vfio_device: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the suite and print a report; exits 1 if any case failed.
    Run {
        /// The backend to run on.
        #[arg(long, value_enum, default_value_t = BackendArg::Sim)]
        backend: BackendArg,
        /// Simulator only: a shipped profile name, a profile file, or `all` [default: cx6dx].
        #[arg(long)]
        profile: Option<String>,
        #[command(flatten)]
        device: DeviceArgs,
        /// Exit non-zero if the backend has no device to run on (for qualification runs).
        #[arg(long)]
        require_device: bool,
        /// Report format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the report to this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Run only the cases whose name contains this text.
        #[arg(long)]
        filter: Option<String>,
        /// A table of known divergences (TOML) instead of the shipped one.
        #[arg(long)]
        divergences: Option<PathBuf>,
    },
    /// Show each checklist item of docs/behaviour.md with the cases that cover it, and the
    /// items nothing covers yet.
    Coverage {
        /// Print this item's full text from docs/behaviour.md instead.
        #[arg(long, value_name = "N")]
        item: Option<u16>,
    },
    /// List the simulator's shipped profiles.
    Profiles,
    /// Write a real device's caps and kernel features as a simulator profile.
    Profile {
        /// The backend to read from (only hw has a device to capture).
        #[arg(long, value_enum, default_value_t = BackendArg::Hw)]
        backend: BackendArg,
        #[command(flatten)]
        device: DeviceArgs,
        /// Write the profile here instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// The simulator.
    Sim,
    /// The real device through rdma-core.
    Hw,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// An aligned text table.
    Table,
    /// JSON: {"runs":[{"backend","profile","cases":[{"name","covers","outcome","detail"}]}]}.
    Json,
    /// JUnit XML, with skipped cases as <skipped/>.
    Junit,
}

/// Exit status for usage errors (unknown profile, unwritable file).
const USAGE: u8 = 2;
/// Exit status when `--require-device` finds no device.
const NO_DEVICE: u8 = 3;

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run { backend, profile, device, require_device, format, output, filter, divergences } => {
            let opts = RunOpts { require_device, format, output, filter, divergences };
            run(backend, profile, device, opts)
        }
        Command::Coverage { item: None } => {
            print!("{}", coverage_text());
            ExitCode::SUCCESS
        }
        Command::Coverage { item: Some(n) } => match mlx5_conformance::spec::item_text(n) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(USAGE, e),
        },
        Command::Profiles => {
            for name in Profile::builtin_names() {
                match Profile::builtin(name) {
                    Ok(p) => println!("{:<22} {}", p.name, p.summary),
                    Err(e) => println!("{name:<22} (broken: {e})"),
                }
            }
            println!("\ndefault: {}", mlx5_sim::DEFAULT_PROFILE);
            ExitCode::SUCCESS
        }
        Command::Profile { backend, device, output } => capture(backend, device, output),
    }
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("mlx5-conformance: {msg}");
    ExitCode::from(code)
}

#[cfg(feature = "hw")]
fn hw_target(device: DeviceArgs) -> Target {
    Target::hw(mlx5_hw::HwConfig { device: device.device, vfio_pci_name: device.vfio_device })
}

#[cfg(not(feature = "hw"))]
fn hw_target(_device: DeviceArgs) -> Target {
    Target::hw_missing()
}

fn targets(backend: BackendArg, profile: Option<String>, device: DeviceArgs) -> Result<Vec<Target>, String> {
    match backend {
        BackendArg::Hw if profile.is_some() => Err("--profile is for the simulator; hw runs on the device".into()),
        BackendArg::Hw => Ok(vec![hw_target(device)]),
        BackendArg::Sim => {
            let profile = profile.unwrap_or_else(|| mlx5_sim::DEFAULT_PROFILE.to_string());
            let names: Vec<String> = if profile == "all" {
                Profile::builtin_names().into_iter().map(String::from).collect()
            } else {
                vec![profile]
            };
            names.iter().map(|n| Profile::resolve(n).map(Target::sim).map_err(|e| e.to_string())).collect()
        }
    }
}

/// How `run` runs and reports.
struct RunOpts {
    require_device: bool,
    format: Format,
    output: Option<PathBuf>,
    filter: Option<String>,
    divergences: Option<PathBuf>,
}

/// The divergence table from `path`, or the shipped one.
fn divergences(path: Option<&PathBuf>) -> Result<Divergences, String> {
    let names: Vec<&str> = suite().iter().map(|c| c.name).collect();
    match path {
        None => Divergences::parse(SHIPPED, &names).map_err(|e| format!("the shipped divergence table: {e}")),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            Divergences::parse(&text, &names).map_err(|e| format!("{}: {e}", p.display()))
        }
    }
}

fn run(backend: BackendArg, profile: Option<String>, device: DeviceArgs, opts: RunOpts) -> ExitCode {
    let RunOpts { require_device, format, output, filter, divergences: table } = opts;
    let targets = match targets(backend, profile, device) {
        Ok(t) => t,
        Err(e) => return fail(USAGE, e),
    };
    let table = match divergences(table.as_ref()) {
        Ok(t) => t,
        Err(e) => return fail(USAGE, e),
    };
    let cases: Vec<_> = suite().into_iter().filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f))).collect();
    let mut report = Report { runs: targets.iter().map(|t| run_target(t, &cases)).collect() };
    report.runs.iter_mut().for_each(|run| table.apply(run));
    let text = match format {
        Format::Table => Ok(report.to_table()),
        Format::Json => report.to_json().map_err(|e| e.to_string()),
        Format::Junit => report.to_junit().map_err(|e| e.to_string()),
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => return fail(USAGE, format!("cannot format the report: {e}")),
    };
    match output {
        Some(path) => {
            if let Err(e) = std::fs::write(&path, text) {
                return fail(USAGE, format!("cannot write {}: {e}", path.display()));
            }
            eprintln!("{}; report in {}", report.summary().line(), path.display());
        }
        None => print!("{text}"),
    }
    for run in &report.runs {
        if let Some(why) = &run.unavailable {
            eprintln!("mlx5-conformance: backend {} unavailable: {why}; every case was skipped", run.backend);
            if require_device {
                return fail(NO_DEVICE, format!("--require-device: no device to qualify ({why})"));
            }
        }
    }
    if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

#[cfg(feature = "hw")]
fn capture_hw(device: DeviceArgs) -> Result<String, String> {
    let mut b =
        mlx5_hw::HwBackend::open(mlx5_hw::HwConfig { device: device.device, vfio_pci_name: device.vfio_device })
            .map_err(|e| e.to_string())?;
    let p = mlx5_hw::capture::capture(&mut b).map_err(|e| e.to_string())?;
    p.to_toml_string().map_err(|e| e.to_string())
}

#[cfg(not(feature = "hw"))]
fn capture_hw(_device: DeviceArgs) -> Result<String, String> {
    Err("this mlx5-conformance was built without the hw backend (cargo feature `hw`)".into())
}

fn capture(backend: BackendArg, device: DeviceArgs, output: Option<PathBuf>) -> ExitCode {
    if backend == BackendArg::Sim {
        return fail(USAGE, "the simulator's profiles are files already (see `profiles`); capture reads a real device");
    }
    let text = match capture_hw(device) {
        Ok(t) => t,
        Err(e) => return fail(NO_DEVICE, format!("cannot capture a profile: {e}")),
    };
    match output {
        Some(path) => match std::fs::write(&path, text) {
            Ok(()) => {
                eprintln!("profile written to {}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(USAGE, format!("cannot write {}: {e}", path.display())),
        },
        None => {
            print!("{text}");
            ExitCode::SUCCESS
        }
    }
}

fn coverage_text() -> String {
    let cases = suite();
    let rows = coverage(&cases);
    let mut out = String::from("§12 item  covered by\n");
    let mut missing = Vec::new();
    for (n, title, by) in &rows {
        out.push_str(&format!("{n:>8}  {title}\n"));
        if by.is_empty() {
            out.push_str("          -- not covered yet\n");
            missing.push(n.to_string());
        }
        for c in by {
            out.push_str(&format!("          {c}\n"));
        }
    }
    let unnumbered: Vec<_> = cases.iter().filter(|c| c.covers.is_empty()).map(|c| c.name).collect();
    out.push_str(&format!(
        "\n{} of {} items covered; not covered yet: {}\n",
        rows.len() - missing.len(),
        rows.len(),
        if missing.is_empty() { "none".to_string() } else { missing.join(", ") }
    ));
    out.push_str(&format!("cases outside the numbered checklist: {}\n", unnumbered.join(", ")));
    out
}
