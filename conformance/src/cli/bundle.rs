//! A qualification bundle: what `qualify` writes in its directory, and `replay-bundle`, which
//! runs the bundle's cases and replays its traces on the simulator with the card's profile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use mlx5_conformance::harness::journal;
use mlx5_conformance::harness::run::DEFAULT_TIMEOUT;
use mlx5_conformance::trace::{self, Replayed};
use mlx5_conformance::{Divergences, Outcome, Report, Target, run_case_within, suite};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use serde::{Deserialize, Serialize};

use crate::out::{self, USAGE, fail, warn};
use crate::run::parse_secs;
use crate::trace_cmd::{header_of, read_trace};

/// The report as JSON.
pub const REPORT_JSON: &str = "report.json";
/// The report as JUnit XML.
pub const REPORT_JUNIT: &str = "report.xml";
/// The report as one HTML page.
pub const REPORT_HTML: &str = "report.html";
/// The card's profile, as `profile` writes it.
pub const PROFILE: &str = "profile.toml";
/// What ran the qualification: [`Versions`].
pub const VERSIONS: &str = "versions.toml";
/// A trace per case that ran: `traces/<case>.jsonl`.
pub const TRACES: &str = "traces";

/// What ran a qualification, as `versions.toml` keeps it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Versions {
    /// The suite and its version: `mlx5-conformance 0.1.0`.
    pub suite: String,
    /// The suite's git commit, or "unknown".
    pub commit: String,
    /// The mlx5 device qualified.
    pub device: String,
    /// Its board id (PSID).
    pub board_id: String,
    /// Its firmware version, as `ibv_query_device` reports it.
    pub fw_ver: String,
    /// The kernel release.
    pub kernel: String,
    /// rdma-core's release as the loaded libmlx5's file name says (`44.0`), or "unknown".
    pub rdma_core: String,
    /// The installed libibverbs package's version, as dpkg or rpm says, or "unknown".
    pub rdma_core_package: String,
    /// The libibverbs this program loaded (its real path).
    pub libibverbs: String,
    /// The libmlx5 this program loaded (its real path).
    pub libmlx5: String,
}

impl Versions {
    /// This build and host, with the device facts of the hw backend's probe (`facts`).
    pub fn of(facts: &BTreeMap<String, String>) -> Self {
        let fact = |k: &str| facts.get(k).cloned().unwrap_or_else(|| "unknown".into());
        let kernel = facts
            .get("kernel")
            .cloned()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|k| k.trim().to_string()));
        Versions {
            suite: format!("mlx5-conformance {}", mlx5_conformance::harness::meta::VERSION),
            commit: mlx5_conformance::harness::meta::COMMIT.into(),
            device: fact("device"),
            board_id: fact("board_id"),
            fw_ver: fact("fw_ver"),
            kernel: kernel.unwrap_or_else(|| "unknown".into()),
            rdma_core: fact("rdma_core"),
            rdma_core_package: package_version(),
            libibverbs: loaded("libibverbs.so"),
            libmlx5: loaded("libmlx5.so"),
        }
    }

    /// The file's text.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        Ok(format!("# What ran this qualification (mlx5-conformance qualify).\n{}", toml::to_string(self)?))
    }
}

/// The installed libibverbs package's version, from dpkg or rpm.
fn package_version() -> String {
    let asks: [(&str, &str, &[&str]); 2] = [
        ("dpkg", "libibverbs1", &["dpkg-query", "-W", "-f", "${Version}", "libibverbs1"]),
        ("rpm", "libibverbs", &["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", "libibverbs"]),
    ];
    for (manager, package, argv) in asks {
        let out = Command::new(argv[0]).args(&argv[1..]).stdin(Stdio::null()).stderr(Stdio::null()).output();
        if let Some(o) = out.ok().filter(|o| o.status.success()) {
            let v = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if !v.is_empty() {
                return format!("{package} {v} ({manager})");
            }
        }
    }
    "unknown".into()
}

/// The real path of the loaded library whose name contains `name`, or "not loaded".
fn loaded(name: &str) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| Path::new(p).file_name().is_some_and(|f| f.to_string_lossy().starts_with(name)));
    match path {
        Some(p) => std::fs::canonicalize(p).map_or_else(|_| p.to_string(), |r| r.display().to_string()),
        None => "not loaded".into(),
    }
}

/// `replay-bundle`'s options.
#[derive(clap::Args)]
pub struct ReplayBundleArgs {
    /// A bundle's directory, as `qualify` wrote it.
    bundle: PathBuf,
    /// Fail a case still running on the simulator after this many seconds [default: 30].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<Duration>,
}

/// The bundle's report, or the journal of a qualification cut short.
fn read_report(dir: &Path) -> Result<Report, String> {
    let path = dir.join(REPORT_JSON);
    let jpath = journal::path_for(&path);
    let (path, text) = match std::fs::read_to_string(&path) {
        Ok(t) => (path, t),
        Err(_) if jpath.exists() => {
            warn(format!("no {REPORT_JSON}: reading the journal of a qualification cut short"));
            let t = std::fs::read_to_string(&jpath).map_err(|e| format!("cannot read {}: {e}", jpath.display()))?;
            return journal::read(&t).map_err(|e| format!("{}: {e}", jpath.display()));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    serde_json::from_str(&text).map_err(|e| format!("{}: not a JSON report: {e}", path.display()))
}

/// What differs in one case's trace, as lines; `Err` when it cannot be read.
fn trace_difference(path: &Path, profile: &Profile) -> Result<Vec<String>, String> {
    let text = read_trace(path)?;
    let header = header_of(path, &text)?;
    let host = header.facts.get("host").and_then(|h| h.parse().ok()).unwrap_or(0);
    let mut sim = Simulator::with_host(profile.clone(), host).map_err(|e| e.to_string())?;
    Ok(match trace::replay(&text, &mut sim).map_err(|e| format!("{}: {e}", path.display()))? {
        Replayed::Matches | Replayed::NeedsSimControl(_) => vec![],
        Replayed::Diverges(d) => vec![
            format!("  trace: first divergence at {} (\"recorded\": the card)", d.explain()),
            format!("    call:      {}", d.call),
            format!("    card:      {}", d.recorded),
            format!("    simulator: {}", d.now),
        ],
    })
}

/// `PASS`, or `FAIL (why)`.
fn verdict(o: Outcome, detail: &str) -> String {
    if detail.is_empty() { o.tag().to_string() } else { format!("{} ({detail})", o.tag()) }
}

/// `replay-bundle`: exit 0 when the simulator agrees with the card on every case, 1 at any
/// difference, 2 when the bundle cannot be read.
pub fn replay_bundle(a: ReplayBundleArgs) -> Result<ExitCode, ExitCode> {
    let dir = &a.bundle;
    let report = read_report(dir).map_err(|e| fail(USAGE, e))?;
    let [card] = report.runs.as_slice() else {
        return Err(fail(USAGE, format!("{}: {} runs; a bundle holds one", dir.display(), report.runs.len())));
    };
    let ppath = dir.join(PROFILE);
    if !ppath.is_file() {
        return Err(fail(USAGE, format!("{}: no {PROFILE}", dir.display())));
    }
    let profile = Profile::resolve(&ppath.to_string_lossy()).map_err(|e| fail(USAGE, e))?;
    let target = Target::sim(profile.clone());
    let (env, _) = target.probe();
    if let Some(why) = &env.unavailable {
        return Err(fail(USAGE, format!("the simulator with {}: {why}", ppath.display())));
    }
    let timeout = a.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let all = suite();
    let (mut differ, mut traces, mut skipped) = (0, 0, 0);
    for c in &card.cases {
        let mut lines = vec![];
        match all.iter().find(|s| s.name == c.name) {
            None => lines.push(format!(
                "  not a case of this suite (mlx5-conformance {})",
                mlx5_conformance::harness::meta::VERSION
            )),
            Some(case) => {
                // What the card skipped was not qualified (nor is its trace, which ends where
                // it skipped): the simulator, which can do more than a card through rdma-core
                // (fault injection, known KEKs), may well pass it.
                let on_card = Divergences::unjudged(c);
                if on_card == Outcome::Skip {
                    skipped += 1;
                    continue;
                }
                let sim = run_case_within(&target, &env, case, timeout);
                if sim.outcome != on_card {
                    lines.push(format!(
                        "  verdict: card {}, simulator {}",
                        verdict(on_card, &c.detail),
                        verdict(sim.outcome, &sim.detail)
                    ));
                }
                let tpath = dir.join(TRACES).join(format!("{}.jsonl", c.name));
                if tpath.is_file() {
                    traces += 1;
                    lines.extend(trace_difference(&tpath, &profile).map_err(|e| fail(USAGE, e))?);
                }
            }
        }
        if !lines.is_empty() {
            differ += 1;
            out::stdout(&format!("{}\n{}\n", c.name, lines.join("\n")))?;
        }
    }
    let on = format!("the simulator with {PROFILE} ({})", profile.name);
    let ran = card.cases.len() - skipped;
    let not = match skipped {
        0 => String::new(),
        n => format!("; {n} cases the card skipped are not compared"),
    };
    if differ > 0 {
        out::stdout(&format!("{differ} of {} cases differ between the card and {on}{not}\n", card.cases.len()))?;
        return Ok(ExitCode::FAILURE);
    }
    out::stdout(&format!("no difference: {on} agrees with the card on {ran} cases and {traces} traces{not}\n"))?;
    Ok(ExitCode::SUCCESS)
}
