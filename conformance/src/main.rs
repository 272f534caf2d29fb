//! `mlx5-conformance`: run the suite, show its coverage of the behaviour checklist, list the
//! simulator's profiles.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use mlx5_conformance::{Report, Target, coverage, run_target, suite};
use mlx5_sim::Profile;

#[derive(Parser)]
#[command(name = "mlx5-conformance", version, about = "The mlx5dv conformance suite, on the simulator or on hardware")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the suite and print a report; exits 1 if any case failed.
    Run {
        /// The backend to run on.
        #[arg(long, value_enum, default_value_t = BackendArg::Sim)]
        backend: BackendArg,
        /// A shipped profile name, a profile file, or `all` (simulator only).
        #[arg(long, default_value = mlx5_sim::DEFAULT_PROFILE)]
        profile: String,
        /// Report format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the report to this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Run only the cases whose name contains this text.
        #[arg(long)]
        filter: Option<String>,
    },
    /// Show each §12 item with the cases that cover it, and the items nothing covers yet.
    Coverage,
    /// List the simulator's shipped profiles.
    Profiles,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    /// The simulator.
    Sim,
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

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run { backend, profile, format, output, filter } => run(backend, &profile, format, output, filter),
        Command::Coverage => {
            print!("{}", coverage_text());
            ExitCode::SUCCESS
        }
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
    }
}

fn targets(backend: BackendArg, profile: &str) -> Result<Vec<Target>, String> {
    match backend {
        BackendArg::Sim => {
            let names: Vec<String> = if profile == "all" {
                Profile::builtin_names().into_iter().map(String::from).collect()
            } else {
                vec![profile.to_string()]
            };
            names.iter().map(|n| Profile::resolve(n).map(Target::sim).map_err(|e| e.to_string())).collect()
        }
    }
}

fn run(
    backend: BackendArg,
    profile: &str,
    format: Format,
    output: Option<PathBuf>,
    filter: Option<String>,
) -> ExitCode {
    let targets = match targets(backend, profile) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mlx5-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    let cases: Vec<_> = suite().into_iter().filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f))).collect();
    let report = Report { runs: targets.iter().map(|t| run_target(t, &cases)).collect() };
    let text = match format {
        Format::Table => Ok(report.to_table()),
        Format::Json => report.to_json().map_err(|e| e.to_string()),
        Format::Junit => report.to_junit().map_err(|e| e.to_string()),
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mlx5-conformance: cannot format the report: {e}");
            return ExitCode::from(2);
        }
    };
    match output {
        Some(path) => {
            if let Err(e) = std::fs::write(&path, text) {
                eprintln!("mlx5-conformance: cannot write {}: {e}", path.display());
                return ExitCode::from(2);
            }
            let s = report.summary();
            eprintln!("{} passed, {} failed, {} skipped; report in {}", s.passed, s.failed, s.skipped, path.display());
        }
        None => print!("{text}"),
    }
    if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
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
