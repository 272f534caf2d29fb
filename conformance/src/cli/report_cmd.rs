//! `report merge`: several reports (or journals of runs cut short) as one.

use std::path::PathBuf;
use std::process::ExitCode;

use mlx5_conformance::Report;
use mlx5_conformance::harness::journal;

use crate::out::{self, USAGE, fail};
use crate::{Format, render};

/// `report`'s subcommands.
#[derive(clap::Subcommand)]
pub enum ReportCommand {
    /// Merge JSON reports (sim profiles, hw cards) into one report, e.g. one HTML matrix.
    Merge {
        /// JSON reports written by `run --format json`, or `.partial.jsonl` journals.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Report format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
        /// Write the report to this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
    },
}

/// A report file: a JSON report, or a journal.
fn read(path: &PathBuf) -> Result<Report, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("file not found: {}", path.display()));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    match serde_json::from_str::<Report>(&text) {
        Ok(r) => Ok(r),
        Err(json) => {
            journal::read(&text).map_err(|_| format!("{}: neither a JSON report nor a journal: {json}", path.display()))
        }
    }
}

/// `report`.
pub fn report(cmd: ReportCommand) -> Result<ExitCode, ExitCode> {
    let ReportCommand::Merge { files, format, output } = cmd;
    let reports = files.iter().map(read).collect::<Result<Vec<_>, _>>().map_err(|e| fail(USAGE, e))?;
    let merged = Report::merge(reports);
    let text = render(&merged, format).map_err(|e| fail(USAGE, e))?;
    out::emit(output.as_deref(), &text)?;
    Ok(if merged.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
