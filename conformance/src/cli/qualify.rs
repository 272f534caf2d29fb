//! `qualify`: a card's qualification in one command (probe, profile, the suite with a trace
//! per case), written as one bundle that `replay-bundle` reads.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use mlx5_conformance::harness::isolate;
use mlx5_conformance::harness::journal::{self, Journal};
use mlx5_conformance::harness::run::DEFAULT_TIMEOUT;
use mlx5_conformance::{Case, CaseReport, Env, Meta, Outcome, Report, Runner, Target, skip_reason};

use crate::bundle::{self, Versions};
use crate::out::{self, NO_DEVICE, USAGE, fail, warn};
use crate::run::{Progress, Sinks, divergences, hw_target, parse_secs, run_one_command, select};
use crate::{DeviceArgs, Format, capture_hw, render};

/// `qualify`'s options.
#[derive(clap::Args)]
pub struct QualifyArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// The bundle's directory; it must not exist yet, or be empty.
    #[arg(long, value_name = "DIR", default_value = "qualification")]
    output: PathBuf,
    /// Fail a case still running after this many seconds [default: 30].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<Duration>,
    /// Run only the cases whose name contains this text (repeatable: any of them).
    #[arg(long, value_name = "PATTERN")]
    filter: Vec<String>,
    /// Leave out the cases whose name contains this text (repeatable).
    #[arg(long, value_name = "PATTERN")]
    exclude: Vec<String>,
    /// A line per case on standard error (the default when standard error is a terminal).
    #[arg(long)]
    progress: bool,
}

/// The bundle's directory, made empty: an existing bundle is never overwritten.
fn make_dir(dir: &Path) -> Result<(), String> {
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!("{} exists and is not empty; qualify writes a new bundle", dir.display()));
    }
    std::fs::create_dir_all(dir.join(bundle::TRACES)).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// `qualify`: exit 3 without a device, 2 when the bundle cannot be written, 1 when a case
/// failed, 0 otherwise.
pub fn qualify(a: QualifyArgs) -> Result<ExitCode, ExitCode> {
    let cases = select(&a.filter, &a.exclude).map_err(|e| fail(USAGE, e))?;
    let table = divergences(None, &[]).map_err(|e| fail(USAGE, e))?;
    let target = hw_target(&a.device);
    let (env, facts) = target.probe();
    if let Some(why) = &env.unavailable {
        return Err(fail(NO_DEVICE, format!("qualify: no device to qualify ({why})")));
    }
    let profile =
        capture_hw(a.device.clone()).map_err(|e| fail(NO_DEVICE, format!("cannot capture a profile: {e}")))?;
    // An instance holds libmlx5 loaded while the versions read which one it is.
    let held = target.instance();
    let versions = Versions::of(&facts);
    drop(held);
    let dir = &a.output;
    make_dir(dir).map_err(|e| fail(USAGE, e))?;
    out::file(&dir.join(bundle::PROFILE), &profile)?;
    let exe = std::env::current_exe().map_err(|e| fail(USAGE, format!("cannot find this program: {e}")))?;
    let meta = Meta::now();
    let jpath = journal::path_for(&dir.join(bundle::REPORT_JSON));
    let journal =
        Journal::create(&jpath, &meta).map_err(|e| fail(USAGE, format!("cannot write {}: {e}", jpath.display())))?;
    let progress = (a.progress || std::io::stderr().is_terminal()).then_some(Progress);
    let mut sinks = Sinks(progress, Some(journal), None);
    let runner = Runner { timeout: a.timeout.unwrap_or(DEFAULT_TIMEOUT), fail_fast: false, divergences: Some(&table) };
    let mut child_args = vec!["--backend".to_string(), "hw".to_string()];
    for (flag, v) in [("--device", &a.device.device), ("--vfio-device", &a.device.vfio_device)] {
        if let Some(v) = v {
            child_args.extend([flag.to_string(), v.clone()]);
        }
    }
    let traces = dir.join(bundle::TRACES);
    let in_child = |_: &Target, env: &Env, case: &Case, timeout: Duration| {
        if let Some(why) = skip_reason(case, env) {
            return CaseReport::new(case, Outcome::Skip, why);
        }
        let mut cmd = run_one_command(&exe, &child_args, case, timeout);
        cmd.arg("--trace").arg(traces.join(format!("{}.jsonl", case.name)));
        isolate::run_in_child(cmd, case, timeout)
    };
    let run = runner.run_target(&target, &cases, &in_child, &mut sinks);
    let report = Report { meta, runs: vec![run] };
    for (name, format) in [
        (bundle::REPORT_JSON, Format::Json),
        (bundle::REPORT_JUNIT, Format::Junit),
        (bundle::REPORT_HTML, Format::Html),
    ] {
        let text = render(&report, format).map_err(|e| fail(USAGE, e))?;
        out::file(&dir.join(name), &text)?;
    }
    let text = versions.to_toml().map_err(|e| fail(USAGE, format!("cannot write the versions: {e}")))?;
    out::file(&dir.join(bundle::VERSIONS), &text)?;
    if let Some(j) = &sinks.1 {
        if let Some(e) = j.error() {
            warn(format!("the journal {} is incomplete: {e}", j.path().display()));
        }
        let _ = std::fs::remove_file(j.path());
    }
    let traced = std::fs::read_dir(&traces).map(|d| d.count()).unwrap_or(0);
    warn(format!(
        "qualified {} (board {}, firmware {}): {}; {traced} traces; bundle in {}",
        versions.device,
        versions.board_id,
        versions.fw_ver,
        report.summary().line(),
        dir.display()
    ));
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
