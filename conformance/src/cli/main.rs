//! `mlx5-conformance`: run the suite, merge reports, show its coverage of the behaviour
//! checklist, list the simulator's profiles, capture a real card's profile, qualify a card
//! in one bundle and replay that bundle on the simulator.

mod bundle;
mod crash_test;
mod out;
mod peer;
mod qualify;
mod report_cmd;
mod run;
mod trace_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use mlx5_conformance::{Report, coverage, suite};
use mlx5_sim::{Profile, ShippedProfiles};

use out::{NO_DEVICE, USAGE, fail};

#[derive(Parser)]
#[command(name = "mlx5-conformance", version, about = "The mlx5dv conformance suite, on the simulator or on hardware")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which hw device to use.
#[derive(clap::Args, Clone, Default)]
pub struct DeviceArgs {
    /// The mlx5 device to use on hw (`mlx5_0`); the first mlx5 device by default.
    #[arg(long)]
    pub device: Option<String>,
    /// The PCI name of an mlx5 function bound to vfio-pci, for the VFIO cases on hw.
    #[arg(long)]
    pub vfio_device: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the suite and print a report; exits 1 if any case failed.
    Run(run::RunArgs),
    /// Run one case and print its report as JSON (what `run --isolate` runs in each child).
    #[command(hide = true)]
    RunOne(run::RunOneArgs),
    /// Re-execute traces written by `run --record` and report each one's first divergence;
    /// exits 1 if any trace diverges.
    Replay(trace_cmd::ReplayArgs),
    /// Random call sequences against the reference model; exits 1 with the shrunk sequence's
    /// trace when the backend disagrees.
    Discover(trace_cmd::DiscoverArgs),
    /// Qualify a card: probe it, capture its profile, run the suite (each case in a child
    /// process, within a timeout, recording its trace) and write one bundle; exits 3 without a
    /// device, 1 if any case failed.
    Qualify(qualify::QualifyArgs),
    /// Run a bundle's cases and replay its traces on the simulator with the card's profile,
    /// printing case by case where they differ; exits 1 at any difference.
    ReplayBundle(bundle::ReplayBundleArgs),
    /// A simulator on the RoCE v2 fabric that another process drives by the API's calls as
    /// JSON lines on standard input (what `discover --two-processes` runs as its peer).
    #[command(hide = true)]
    Peer(peer::PeerArgs),
    /// Work with reports written by `run --format json` (or the journal of a run cut short).
    Report {
        #[command(subcommand)]
        command: report_cmd::ReportCommand,
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

/// A backend.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// The simulator.
    Sim,
    /// The real device through rdma-core.
    Hw,
}

/// A report format.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// An aligned text table, at most 100 columns wide.
    Table,
    /// JSON: {"meta","runs":[{"backend","profile","facts","summary","cases":[…]}]}.
    Json,
    /// JUnit XML (Jenkins xUnit junit-10.xsd), with skipped cases as <skipped/>.
    Junit,
    /// One self-contained HTML page: cases × runs, each cell opening its detail.
    Html,
}

/// The report in `format`.
pub fn render(report: &Report, format: Format) -> Result<String, String> {
    let text = match format {
        Format::Table => Ok(report.to_table()),
        Format::Json => report.to_json().map(|s| s + "\n").map_err(|e| e.to_string()),
        Format::Junit => report.to_junit(),
        Format::Html => report.to_html(),
    };
    text.map_err(|e| format!("cannot format the report: {e}"))
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run::run(args),
        Command::RunOne(args) => run::run_one(args),
        Command::Replay(args) => trace_cmd::replay(args),
        Command::Discover(args) => trace_cmd::discover(args),
        Command::Peer(args) => peer::serve(args),
        Command::Qualify(args) => qualify::qualify(args),
        Command::ReplayBundle(args) => bundle::replay_bundle(args),
        Command::Report { command } => report_cmd::report(command),
        Command::Coverage { item: None } => out::stdout(&coverage_text()).map(|()| ExitCode::SUCCESS),
        Command::Coverage { item: Some(n) } => match mlx5_conformance::spec::item_text(n) {
            Ok(text) => out::stdout(&format!("{text}\n")).map(|()| ExitCode::SUCCESS),
            Err(e) => Ok(fail(USAGE, e)),
        },
        Command::Profiles => out::stdout(&profiles_text()).map(|()| ExitCode::SUCCESS),
        Command::Profile { backend, device, output } => capture(backend, device, output),
    };
    result.unwrap_or_else(|code| code)
}

fn profiles_text() -> String {
    let mut text = String::new();
    for name in Profile::builtin_names() {
        match Profile::builtin(name) {
            Ok(p) => text.push_str(&format!("{:<22} {}\n", p.name, p.summary)),
            Err(e) => text.push_str(&format!("{name:<22} (broken: {e})\n")),
        }
    }
    text.push_str(&format!("\ndefault: {}\n", mlx5_sim::DEFAULT_PROFILE));
    text
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

fn capture(backend: BackendArg, device: DeviceArgs, output: Option<PathBuf>) -> Result<ExitCode, ExitCode> {
    if backend == BackendArg::Sim {
        return Err(fail(
            USAGE,
            "the simulator's profiles are files already (see `profiles`); capture reads a real device",
        ));
    }
    let text = capture_hw(device).map_err(|e| fail(NO_DEVICE, format!("cannot capture a profile: {e}")))?;
    out::emit(output.as_deref(), &text)?;
    if let Some(path) = output {
        out::warn(format!("profile written to {}", path.display()));
    }
    Ok(ExitCode::SUCCESS)
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
