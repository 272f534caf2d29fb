//! `run` and its per-case child `run-one`.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use mlx5_conformance::harness::divergence::SHIPPED;
use mlx5_conformance::harness::isolate;
use mlx5_conformance::harness::journal::{self, Journal};
use mlx5_conformance::{
    Case, CaseReport, Divergences, Env, Meta, Report, RunReport, Runner, Sink, Target, run_case_within, skip_reason,
    suite,
};
use mlx5_sim::{Profile, ShippedProfiles};

use crate::out::{self, NO_DEVICE, USAGE, fail, warn};
use crate::trace_cmd::RecordSink;
use crate::{BackendArg, DeviceArgs, Format, crash_test, render};
use mlx5_conformance::trace::TraceSlot;

/// What to run on.
#[derive(clap::Args, Clone)]
pub struct TargetArgs {
    /// The backend to run on.
    #[arg(long, value_enum, default_value_t = BackendArg::Sim)]
    backend: BackendArg,
    /// Simulator only: a shipped profile name, a profile file, or `all` [default: cx6dx].
    #[arg(long)]
    profile: Option<String>,
    #[command(flatten)]
    device: DeviceArgs,
}

/// `run`'s options.
#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Exit non-zero if the backend has no device to run on (for qualification runs).
    #[arg(long)]
    require_device: bool,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Write the report to this file instead of standard output; while the run goes, every
    /// finished case is kept in FILE.partial.jsonl (read it with `report merge`).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Run only the cases whose name contains this text (repeatable: any of them).
    #[arg(long, value_name = "PATTERN")]
    filter: Vec<String>,
    /// Leave out the cases whose name contains this text (repeatable).
    #[arg(long, value_name = "PATTERN")]
    exclude: Vec<String>,
    /// Print the cases that would run, with the items they cover, and run nothing.
    #[arg(long)]
    list: bool,
    /// Stop at the first failure.
    #[arg(long)]
    fail_fast: bool,
    /// A line per case on standard error (the default when standard error is a terminal).
    #[arg(long)]
    progress: bool,
    /// Fail a case still running after this many seconds [default: 30].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<Duration>,
    /// Run each case in a child process, so a crash in the backend fails only that case.
    #[arg(long)]
    isolate: bool,
    /// A table of known divergences (TOML) instead of the shipped one.
    #[arg(long)]
    divergences: Option<PathBuf>,
    /// Record a trace of every case into DIR/<backend>/<profile>/<case>.jsonl (replay them
    /// with `replay`).
    #[arg(long, value_name = "DIR", conflicts_with = "isolate")]
    record: Option<PathBuf>,
}

/// `run-one`'s options.
#[derive(clap::Args)]
pub struct RunOneArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The case to run.
    #[arg(long)]
    case: String,
    /// The case's timeout in seconds.
    #[arg(long, value_parser = parse_secs)]
    timeout: Duration,
    /// Record the case's trace into this file (what `qualify` keeps of each case).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

pub fn parse_secs(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1e9 => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

#[cfg(feature = "hw")]
pub fn hw_target(device: &DeviceArgs) -> Target {
    Target::hw(mlx5_hw::HwConfig { device: device.device.clone(), vfio_pci_name: device.vfio_device.clone() })
}

#[cfg(not(feature = "hw"))]
pub fn hw_target(_device: &DeviceArgs) -> Target {
    Target::hw_missing()
}

/// A shipped profile or a profile file; a file name that names no file says so.
pub fn resolve(name: &str) -> Result<Profile, String> {
    if (name.contains('/') || name.ends_with(".toml")) && !Path::new(name).exists() {
        return Err(format!("profile file not found: {name}"));
    }
    Profile::resolve(name).map_err(|e| e.to_string())
}

/// The targets, each with the arguments that make the same target in a `run-one` child.
pub fn targets(args: &TargetArgs) -> Result<Vec<(Target, Vec<String>)>, String> {
    let mut dev = vec![];
    for (flag, v) in [("--device", &args.device.device), ("--vfio-device", &args.device.vfio_device)] {
        if let Some(v) = v {
            dev.extend([flag.to_string(), v.clone()]);
        }
    }
    match args.backend {
        BackendArg::Hw if args.profile.is_some() => Err("--profile is for the simulator; hw runs on the device".into()),
        BackendArg::Hw => Ok(vec![(hw_target(&args.device), [vec!["--backend".into(), "hw".into()], dev].concat())]),
        BackendArg::Sim => {
            let profile = args.profile.clone().unwrap_or_else(|| mlx5_sim::DEFAULT_PROFILE.to_string());
            let names: Vec<String> = if profile == "all" {
                Profile::builtin_names().into_iter().map(String::from).collect()
            } else {
                vec![profile]
            };
            names
                .into_iter()
                .map(|n| {
                    let child = vec!["--backend".into(), "sim".into(), "--profile".into(), n.clone()];
                    resolve(&n).map(|p| (Target::sim(p), child))
                })
                .collect()
        }
    }
}

/// The divergence table from `path`, or the shipped one.
pub fn divergences(path: Option<&PathBuf>, profiles: &[&str]) -> Result<Divergences, String> {
    let names: Vec<&str> = suite().iter().map(|c| c.name).collect();
    match path {
        None => {
            Divergences::parse_for(SHIPPED, &names, profiles).map_err(|e| format!("the shipped divergence table: {e}"))
        }
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            Divergences::parse_for(&text, &names, profiles).map_err(|e| format!("{}: {e}", p.display()))
        }
    }
}

/// The cases `--filter` and `--exclude` select, in suite order; a pattern that matches no
/// case is an error.
pub fn select(filter: &[String], exclude: &[String]) -> Result<Vec<Case>, String> {
    let extra = crash_test::case();
    let all: Vec<Case> = suite().into_iter().chain(extra).collect();
    for (flag, pats) in [("--filter", filter), ("--exclude", exclude)] {
        if let Some(p) = pats.iter().find(|p| !all.iter().any(|c| c.name.contains(p.as_str()))) {
            return Err(format!("{flag} {p} matches no case (`run --list` lists them)"));
        }
    }
    let picked = |c: &Case| {
        (filter.is_empty() || filter.iter().any(|f| c.name.contains(f.as_str())))
            && !exclude.iter().any(|x| c.name.contains(x.as_str()))
    };
    let mut cases: Vec<Case> = suite().into_iter().filter(picked).collect();
    if let Some(c) = extra.filter(picked) {
        cases.insert(cases.len() / 2, c);
    }
    if cases.is_empty() {
        return Err("--exclude leaves no case to run".into());
    }
    Ok(cases)
}

/// A line per case on standard error.
pub struct Progress;

impl Sink for Progress {
    fn run_started(&mut self, run: &RunReport, total: usize) {
        warn(format!("{}: {total} cases", run.label()));
    }

    fn case_done(&mut self, run: &RunReport, i: usize, total: usize, c: &CaseReport) {
        let ms = c.time_us as f64 / 1000.0;
        warn(format!("[{}/{total}] {} {:<5} {} ({ms:.1} ms)", i + 1, run.label(), c.outcome.tag(), c.name));
    }
}

/// The progress lines, the journal and the traces, as one sink.
pub struct Sinks(pub Option<Progress>, pub Option<Journal>, pub Option<RecordSink>);

impl Sink for Sinks {
    fn run_started(&mut self, run: &RunReport, total: usize) {
        self.0.iter_mut().for_each(|s| s.run_started(run, total));
        self.1.iter_mut().for_each(|s| s.run_started(run, total));
        self.2.iter_mut().for_each(|s| s.run_started(run, total));
    }

    fn case_done(&mut self, run: &RunReport, i: usize, total: usize, c: &CaseReport) {
        self.0.iter_mut().for_each(|s| s.case_done(run, i, total, c));
        self.1.iter_mut().for_each(|s| s.case_done(run, i, total, c));
        self.2.iter_mut().for_each(|s| s.case_done(run, i, total, c));
    }
}

fn list_text(cases: &[Case]) -> String {
    let w = cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut text: String = cases
        .iter()
        .map(|c| {
            format!("{:w$}  {}", c.name, mlx5_conformance::harness::report::covers(c.covers)).trim_end().to_string()
                + "\n"
        })
        .collect();
    text.push_str(&format!("{} cases\n", cases.len()));
    text
}

/// The targets again, each recording into `slot`.
pub fn recorded(
    targets: Vec<(Target, Vec<String>)>,
    args: &TargetArgs,
    slot: &TraceSlot,
) -> Result<Vec<(Target, Vec<String>)>, String> {
    targets
        .into_iter()
        .map(|(t, child)| {
            let t = match (&t.profile, args.backend) {
                (Some(p), BackendArg::Sim) => crate::trace_cmd::sim_recorded(resolve(p)?, slot.clone()),
                #[cfg(feature = "hw")]
                (_, BackendArg::Hw) => crate::trace_cmd::hw_recorded(&args.device, slot.clone()),
                _ => t,
            };
            Ok((t, child))
        })
        .collect()
}

/// `run`.
pub fn run(a: RunArgs) -> Result<ExitCode, ExitCode> {
    let slot = TraceSlot::default();
    let targets = targets(&a.target).map_err(|e| fail(USAGE, e))?;
    let targets = match &a.record {
        Some(_) => recorded(targets, &a.target, &slot).map_err(|e| fail(USAGE, e))?,
        None => targets,
    };
    let profiles: Vec<&str> = targets.iter().filter_map(|(t, _)| t.profile.as_deref()).collect();
    let table = divergences(a.divergences.as_ref(), &profiles).map_err(|e| fail(USAGE, e))?;
    let cases = select(&a.filter, &a.exclude).map_err(|e| fail(USAGE, e))?;
    if a.list {
        out::stdout(&list_text(&cases))?;
        return Ok(ExitCode::SUCCESS);
    }
    let meta = Meta::now();
    let journal = match &a.output {
        Some(path) => {
            let jpath = journal::path_for(path);
            let j = Journal::create(&jpath, &meta)
                .map_err(|e| fail(USAGE, format!("cannot write {}: {e}", jpath.display())))?;
            Some(j)
        }
        None => None,
    };
    let progress = (a.progress || std::io::stderr().is_terminal()).then_some(Progress);
    let record = a.record.as_ref().map(|dir| RecordSink { dir: dir.clone(), slot: slot.clone(), error: None });
    let mut sinks = Sinks(progress, journal, record);
    let runner = Runner {
        timeout: a.timeout.unwrap_or(mlx5_conformance::harness::run::DEFAULT_TIMEOUT),
        fail_fast: a.fail_fast,
        divergences: Some(&table),
    };
    let exe = match a.isolate {
        true => Some(
            std::env::current_exe().map_err(|e| fail(USAGE, format!("--isolate: cannot find this program: {e}")))?,
        ),
        false => None,
    };
    let mut runs = Vec::new();
    for (target, child_args) in &targets {
        let in_child = |_: &Target, env: &Env, case: &Case, timeout: Duration| {
            if let Some(why) = skip_reason(case, env) {
                return CaseReport::new(case, mlx5_conformance::Outcome::Skip, why);
            }
            let exe = exe.as_deref().unwrap_or(Path::new("mlx5-conformance"));
            isolate::run_in_child(run_one_command(exe, child_args, case, timeout), case, timeout)
        };
        let run = if exe.is_some() {
            runner.run_target(target, &cases, &in_child, &mut sinks)
        } else {
            runner.run_target(target, &cases, &run_case_within, &mut sinks)
        };
        let stopped = run.stopped.is_some();
        runs.push(run);
        if stopped {
            break;
        }
    }
    let report = Report { meta, runs };
    let text = render(&report, a.format).map_err(|e| fail(USAGE, e))?;
    out::emit(a.output.as_deref(), &text)?;
    if let Some(j) = &sinks.1 {
        if let Some(e) = j.error() {
            warn(format!("the journal {} is incomplete: {e}", j.path().display()));
        }
        let _ = std::fs::remove_file(j.path());
    }
    if let Some(path) = &a.output {
        warn(format!("{}; report in {}", report.summary().line(), path.display()));
    }
    if let Some(r) = &sinks.2 {
        if let Some(e) = &r.error {
            return Err(fail(USAGE, format!("--record: {e}")));
        }
        warn(format!("traces in {}", r.dir.display()));
    }
    for run in &report.runs {
        if let Some(why) = &run.stopped {
            warn(format!("{}: {why}", run.label()));
        }
        if let Some(why) = &run.unavailable {
            warn(format!("backend {} unavailable: {why}; every case was skipped", run.backend));
            if a.require_device {
                return Err(fail(NO_DEVICE, format!("--require-device: no device to qualify ({why})")));
            }
        }
    }
    let failed = report.summary().failed;
    if failed > 0 && a.output.is_some() {
        warn(format!("{failed} failed; the report lists them at the end (table) or with outcome \"fail\""));
    }
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The `run-one` child that runs `case` on the target of `child_args` (from [`targets`]).
pub fn run_one_command(exe: &Path, child_args: &[String], case: &Case, timeout: Duration) -> std::process::Command {
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("run-one").args(child_args).args(["--case", case.name, "--timeout"]);
    cmd.arg(timeout.as_secs_f64().to_string());
    cmd
}

/// `run-one`: one case in this process; its report as JSON on standard output.
pub fn run_one(a: RunOneArgs) -> Result<ExitCode, ExitCode> {
    let slot = TraceSlot::default();
    let mut targets = targets(&a.target).map_err(|e| fail(USAGE, e))?;
    if a.trace.is_some() {
        targets = recorded(targets, &a.target, &slot).map_err(|e| fail(USAGE, e))?;
    }
    if targets.len() != 1 {
        return Err(fail(USAGE, "run-one runs on one target"));
    }
    let (target, _) = targets.remove(0);
    let case = suite()
        .into_iter()
        .chain(crash_test::case())
        .find(|c| c.name == a.case)
        .ok_or_else(|| fail(USAGE, format!("no case {}", a.case)))?;
    let (env, facts) = target.probe();
    let report = run_case_within(&target, &env, &case, a.timeout);
    if let Some(path) = &a.trace {
        let run = RunReport::new(target.backend.clone(), target.profile.clone(), facts, None, vec![]);
        let mut sink = RecordSink { dir: PathBuf::new(), slot, error: None };
        sink.write(&run, &report, path);
        if let Some(e) = sink.error {
            warn(e);
        }
    }
    let text = serde_json::to_string(&report).map_err(|e| fail(USAGE, e))?;
    out::stdout(&format!("{text}\n"))?;
    if report.detail.starts_with("timed out after") {
        // The case's thread is still running: end the process, not just main.
        std::process::exit(0);
    }
    Ok(ExitCode::SUCCESS)
}
