//! `run --record DIR` (a trace per case) and `replay FILE...`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mlx5_conformance::trace::{self, Header, Recorder, TraceSlot};
use mlx5_conformance::{CaseReport, Outcome, RunReport, Sink, Target};
use mlx5_dv::{Backend, Wrapped};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

use crate::out::{self, USAGE, fail, warn};
use crate::{BackendArg, DeviceArgs};

/// `replay`'s options.
#[derive(clap::Args)]
pub struct ReplayArgs {
    /// Trace files (JSON lines, as `run --record` writes them).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The backend to replay on.
    #[arg(long, value_enum, default_value_t = BackendArg::Sim)]
    backend: BackendArg,
    /// Simulator only: the profile to replay on [default: the trace's].
    #[arg(long)]
    profile: Option<String>,
    #[command(flatten)]
    device: DeviceArgs,
}

/// A simulator target whose backends record into `slot`.
pub fn sim_recorded(p: Profile, slot: TraceSlot) -> Target {
    let name = p.name.clone();
    Target::new(
        "sim",
        Some(name),
        Box::new(move || {
            let sim = Simulator::new(p.clone()).map_err(|e| e.to_string())?;
            Ok(Box::new(Wrapped::new(Recorder::new(slot.clone()), sim)) as Box<dyn Backend>)
        }),
    )
}

/// The hw target, recording into `slot`.
#[cfg(feature = "hw")]
pub fn hw_recorded(device: &DeviceArgs, slot: TraceSlot) -> Target {
    let config = mlx5_hw::HwConfig { device: device.device.clone(), vfio_pci_name: device.vfio_device.clone() };
    Target::new(
        "hw",
        None,
        Box::new(move || {
            let b = mlx5_hw::HwBackend::open(config.clone()).map_err(|e| e.to_string())?;
            Ok(Box::new(Wrapped::new(Recorder::new(slot.clone()), b)) as Box<dyn Backend>)
        }),
    )
}

/// Writes each case's trace to `DIR/<backend>/<profile or board>/<case>.jsonl`.
pub struct RecordSink {
    pub dir: PathBuf,
    pub slot: TraceSlot,
    pub error: Option<String>,
}

impl RecordSink {
    fn take(&self) -> Vec<String> {
        self.slot.lock().map(|mut s| std::mem::take(&mut *s)).unwrap_or_default()
    }
}

impl Sink for RecordSink {
    fn run_started(&mut self, _run: &RunReport, _total: usize) {
        self.take(); // the probe's calls
    }

    fn case_done(&mut self, run: &RunReport, _i: usize, _total: usize, c: &CaseReport) {
        let path = self.dir.join(run.label()).join(format!("{}.jsonl", c.name));
        self.write(run, c, &path);
    }
}

impl RecordSink {
    /// Write the trace of case `c` of `run` (the slot's lines) to `path`; a skipped case that
    /// made no call has none.
    pub fn write(&mut self, run: &RunReport, c: &CaseReport, path: &Path) {
        let lines = self.take();
        if lines.is_empty() && c.outcome == Outcome::Skip {
            return;
        }
        let header = Header::new(run.backend.clone(), run.profile.clone(), Some(c.name.clone()), run.facts.clone());
        let slot = TraceSlot::new(std::sync::Mutex::new(lines));
        let dir = path.parent().unwrap_or(Path::new("."));
        let text = trace::record_text(&header, &slot);
        // A trace that differs only in the suite's commit is left as committed, so that
        // recording again shows a diff only where behaviour changed; its time is set, as a
        // written one's is (`make traces` removes the traces it did not record).
        if std::fs::read_to_string(path).is_ok_and(|old| same_but_commit(&old, &text)) {
            let touched = std::fs::File::options()
                .write(true)
                .open(path)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            if let Err(e) = touched {
                self.error.get_or_insert(format!("cannot touch {}: {e}", path.display()));
            }
            return;
        }
        let r = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(path, text));
        if let Err(e) = r {
            self.error.get_or_insert(format!("cannot write {}: {e}", path.display()));
        }
    }
}

/// Two trace texts that differ at most in the header's `suite` field.
fn same_but_commit(old: &str, new: &str) -> bool {
    let (Some((h1, b1)), Some((h2, b2))) = (old.split_once('\n'), new.split_once('\n')) else { return false };
    let header = |h: &str| {
        serde_json::from_str::<serde_json::Value>(h).ok().map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("suite");
            }
            v
        })
    };
    b1 == b2 && header(h1).is_some_and(|a| Some(a) == header(h2))
}

fn backend_for(a: &ReplayArgs, header: &Header) -> Result<Box<dyn Backend>, String> {
    match a.backend {
        BackendArg::Sim => {
            let name = a.profile.clone().or(header.profile.clone()).unwrap_or_else(|| mlx5_sim::DEFAULT_PROFILE.into());
            let p = Profile::resolve(&name).map_err(|e| e.to_string())?;
            // A trace a program recorded through the C ABI names its host's GIDs and QPs:
            // replay as that host.
            let host = header.facts.get("host").and_then(|h| h.parse().ok()).unwrap_or(0);
            Ok(Box::new(Simulator::with_host(p, host).map_err(|e| e.to_string())?))
        }
        #[cfg(feature = "hw")]
        BackendArg::Hw => {
            let config =
                mlx5_hw::HwConfig { device: a.device.device.clone(), vfio_pci_name: a.device.vfio_device.clone() };
            Ok(Box::new(mlx5_hw::HwBackend::open(config).map_err(|e| e.to_string())?))
        }
        #[cfg(not(feature = "hw"))]
        BackendArg::Hw => Err("this build has no hw backend (build with --features hw)".into()),
    }
}

/// A trace file's text, read no further than replay's limit on a trace's size: a file past it
/// is refused without reading it whole.
pub fn read_trace(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let max = trace::Limits::default().trace_bytes;
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let mut text = String::new();
    let file = std::fs::File::open(path).map_err(cannot)?;
    file.take(max as u64 + 1).read_to_string(&mut text).map_err(cannot)?;
    if text.len() > max {
        return Err(format!("{}: more than {max} bytes; replay reads traces of at most {max}", path.display()));
    }
    Ok(text)
}

pub fn header_of(path: &Path, text: &str) -> Result<Header, String> {
    let first = text.lines().next().unwrap_or_default();
    serde_json::from_str(first).map_err(|e| format!("{}: line 1 is not a trace header: {e}", path.display()))
}

/// `replay`: exit 0 when every call of every trace matches, 1 at any divergence, 2 when a
/// trace cannot be read or the backend cannot be opened.
pub fn replay(a: ReplayArgs) -> Result<ExitCode, ExitCode> {
    let mut diverged = 0;
    for path in &a.files {
        let text = read_trace(path).map_err(|e| fail(USAGE, e))?;
        let header = header_of(path, &text).map_err(|e| fail(USAGE, e))?;
        let mut b = backend_for(&a, &header).map_err(|e| fail(USAGE, e))?;
        match trace::replay(&text, &mut *b) {
            Err(e) => return Err(fail(USAGE, format!("{}: {e}", path.display()))),
            Ok(trace::Replayed::Matches) => out::stdout(&format!("{}: every call matches\n", path.display()))?,
            Ok(trace::Replayed::NeedsSimControl(i)) => out::stdout(&format!(
                "{}: skipped at call #{i}: it needs simulator control (faults, ports)\n",
                path.display()
            ))?,
            Ok(trace::Replayed::Diverges(d)) => {
                diverged += 1;
                let text = format!(
                    "{}: diverges at {}\n  call:     {}\n  recorded: {}\n  now:      {}\n",
                    path.display(),
                    d.explain(),
                    d.call,
                    d.recorded,
                    d.now
                );
                out::stdout(&text)?;
            }
        }
    }
    if diverged > 0 {
        warn(format!("{diverged} of {} traces diverge", a.files.len()));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `discover`'s options.
#[derive(clap::Args)]
pub struct DiscoverArgs {
    /// The backend to run the sequences on.
    #[arg(long, value_enum, default_value_t = BackendArg::Sim)]
    backend: BackendArg,
    /// Simulator only: the profile [default: cx6dx].
    #[arg(long)]
    profile: Option<String>,
    #[command(flatten)]
    device: DeviceArgs,
    /// How many random sequences.
    #[arg(long, default_value_t = 256)]
    cases: u32,
    /// The longest sequence.
    #[arg(long, default_value_t = 50)]
    len: usize,
    /// The seed: the same seed gives the same sequences.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the shrunk failing sequence's trace goes [default: discover-failure.jsonl].
    #[arg(long)]
    output: Option<PathBuf>,
    /// Network scenarios (traffic between two devices under fault rules; simulator only):
    /// off, only, or mixed among the other ops.
    #[arg(long, value_enum, default_value_t = NetArg::Off)]
    network: NetArg,
    /// Network scenarios only, each across two processes on the RoCE v2 fabric (simulator
    /// only): the requester here, the responder in a child process.
    #[arg(long)]
    two_processes: bool,
    /// With --two-processes: this process's address (127.0.0.0/8); the child takes the next
    /// /24's .1.
    #[arg(long, default_value = "127.0.210.1")]
    address: std::net::Ipv4Addr,
    /// With --two-processes: fault rules on the responder's port that the model is not told
    /// of (`MLX5SIM_NET_FAULTS`'s syntax, docs/network.md), to see a disagreement found and
    /// shrunk.
    #[arg(long)]
    peer_faults: Option<String>,
}

/// `discover --network`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum NetArg {
    /// No network scenarios.
    Off,
    /// Network scenarios only.
    Only,
    /// Network scenarios among the other ops.
    Mixed,
}

impl NetArg {
    fn mode(self) -> mlx5_conformance::NetMode {
        match self {
            NetArg::Off => mlx5_conformance::NetMode::Off,
            NetArg::Only => mlx5_conformance::NetMode::Only,
            NetArg::Mixed => mlx5_conformance::NetMode::Mixed,
        }
    }
}

fn report_discovery(
    found: Result<Option<mlx5_conformance::Failure>, String>,
    a: &DiscoverArgs,
) -> Result<ExitCode, ExitCode> {
    match found {
        Err(e) => Err(fail(USAGE, e)),
        Ok(None) => {
            out::stdout(&format!("{} sequences: the backend agrees with the model\n", a.cases))?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(Some(f)) => {
            let path = a.output.clone().unwrap_or_else(|| PathBuf::from("discover-failure.jsonl"));
            std::fs::write(&path, &f.trace)
                .map_err(|e| fail(USAGE, format!("cannot write {}: {e}", path.display())))?;
            out::stdout(&format!(
                "{}\nshrunk to {} ops: {:?}\ntrace: {}\n",
                f.message,
                f.ops.len(),
                f.ops,
                path.display()
            ))?;
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `discover`: random sequences against the reference model; exit 1 with the shrunk trace
/// when the backend disagrees.
pub fn discover(a: DiscoverArgs) -> Result<ExitCode, ExitCode> {
    match a.backend {
        BackendArg::Sim if a.two_processes => {
            let name = a.profile.clone().unwrap_or_else(|| mlx5_sim::DEFAULT_PROFILE.into());
            let output = a.output.clone().unwrap_or_else(|| PathBuf::from("discover-failure.jsonl"));
            crate::peer::discover_two(&name, a.address, (a.cases, a.seed), a.peer_faults.as_deref(), &output)
        }
        BackendArg::Sim => {
            let name = a.profile.clone().unwrap_or_else(|| mlx5_sim::DEFAULT_PROFILE.into());
            let p = Profile::resolve(&name).map_err(|e| fail(USAGE, e))?;
            let make = || Simulator::new(p.clone()).map_err(|e| e.to_string());
            report_discovery(mlx5_conformance::discover_with(&make, a.cases, a.len, a.seed, a.network.mode()), &a)
        }
        #[cfg(feature = "hw")]
        BackendArg::Hw => {
            let config =
                mlx5_hw::HwConfig { device: a.device.device.clone(), vfio_pci_name: a.device.vfio_device.clone() };
            let make = || mlx5_hw::HwBackend::open(config.clone()).map_err(|e| e.to_string());
            report_discovery(mlx5_conformance::discover_with(&make, a.cases, a.len, a.seed, a.network.mode()), &a)
        }
        #[cfg(not(feature = "hw"))]
        BackendArg::Hw => Err(fail(USAGE, "this build has no hw backend (build with --features hw)")),
    }
}

#[cfg(test)]
mod tests {
    use super::same_but_commit;

    #[test]
    fn only_the_suite_commit_may_differ() {
        let a = "{\"trace\":\"mlx5sim-trace\",\"case\":\"x\",\"suite\":\"0.1.0 aaa\"}\n{\"i\":0}\n";
        let b = "{\"trace\":\"mlx5sim-trace\",\"case\":\"x\",\"suite\":\"0.1.0 bbb\"}\n{\"i\":0}\n";
        assert!(same_but_commit(a, b));
        assert!(!same_but_commit(a, &b.replace("\"i\":0", "\"i\":1")), "a call differs");
        assert!(!same_but_commit(a, &b.replace("\"x\"", "\"y\"")), "the case differs");
        assert!(!same_but_commit(a, "not a trace"));
    }
}
