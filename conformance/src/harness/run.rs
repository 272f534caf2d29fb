//! Running the suite on a backend: one fresh backend instance per case, made in the thread
//! that runs the case (backends need not be `Send`), within a per-case timeout.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use mlx5_dv::Backend;
use mlx5_sim::{Profile, Simulator};

use crate::case::{Case, Env, Verdict};
use crate::harness::deadline;
use crate::harness::divergence::Divergences;
use crate::harness::report::{CaseReport, Outcome, RunReport};

/// Makes fresh backend instances of one kind; called from the thread that runs a case.
pub type Factory = Box<dyn Fn() -> Result<Box<dyn Backend>, String> + Send + Sync>;

/// The per-case timeout when none is given, on the simulator and on hardware.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A backend the suite can run on: its name, its profile, and how to make an instance.
pub struct Target {
    /// `"sim"` or `"hw"`.
    pub backend: String,
    /// The simulator profile, for `sim`.
    pub profile: Option<String>,
    /// How long one wait for the device lasts; by default [`deadline::SIM_WAIT`] on a
    /// backend with simulator control, [`deadline::HW_WAIT`] otherwise.
    pub wait: Option<Duration>,
    factory: Arc<dyn Fn() -> Result<Box<dyn Backend>, String> + Send + Sync>,
}

impl Target {
    /// A target from a factory.
    pub fn new(backend: impl Into<String>, profile: Option<String>, factory: Factory) -> Self {
        Target { backend: backend.into(), profile, wait: None, factory: Arc::from(factory) }
    }

    /// The simulator with `profile`.
    pub fn sim(profile: Profile) -> Self {
        let name = profile.name.clone();
        Target::new(
            "sim",
            Some(name),
            Box::new(move || {
                Simulator::new(profile.clone()).map(|s| Box::new(s) as Box<dyn Backend>).map_err(|e| e.to_string())
            }),
        )
    }

    /// The real device through rdma-core.
    #[cfg(feature = "hw")]
    pub fn hw(config: mlx5_hw::HwConfig) -> Self {
        Target::new(
            "hw",
            None,
            Box::new(move || {
                mlx5_hw::HwBackend::open(config.clone())
                    .map(|b| Box::new(b) as Box<dyn Backend>)
                    .map_err(|e| e.to_string())
            }),
        )
    }

    /// The hw backend in a build without it: every case is skipped with that reason.
    #[cfg(not(feature = "hw"))]
    pub fn hw_missing() -> Self {
        Target::new(
            "hw",
            None,
            Box::new(|| Err("this mlx5-conformance was built without the hw backend (cargo feature `hw`)".to_string())),
        )
    }

    /// `sim/cx6dx`, `hw`.
    pub fn label(&self) -> String {
        match &self.profile {
            Some(p) => format!("{}/{p}", self.backend),
            None => self.backend.clone(),
        }
    }

    /// A fresh backend instance.
    pub fn instance(&self) -> Result<Box<dyn Backend>, String> {
        (self.factory)()
    }

    /// Probe the target once: what devices and caps it has, or why it cannot run.
    pub fn probe(&self) -> (Env, BTreeMap<String, String>) {
        match self.instance() {
            Ok(mut b) => {
                let mut facts = b.info().facts;
                let env = Env::probe(b.as_mut());
                let k = env.caps.kernel;
                for (name, fact) in [("devx", k.devx), ("mkey_update_tag", k.mkey_update_tag), ("sqd2rts", k.sqd2rts)] {
                    let said = fact.map_or("unknown", |on| if on { "yes" } else { "no" });
                    facts.insert(format!("kernel.{name}"), said.to_string());
                }
                (env, facts)
            }
            Err(why) => (Env { unavailable: Some(why), ..Env::default() }, Default::default()),
        }
    }
}

/// Why `case` cannot run in `env`, or `None` if it can.
pub fn skip_reason(case: &Case, env: &Env) -> Option<String> {
    if let Some(why) = &env.unavailable {
        return Some(why.clone());
    }
    case.needs.iter().find_map(|n| env.unmet(*n))
}

/// `30 s`, `1.5 s`.
pub fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// Run one case on a fresh instance of `target` within [`DEFAULT_TIMEOUT`].
pub fn run_case(target: &Target, env: &Env, case: &Case) -> CaseReport {
    run_case_within(target, env, case, DEFAULT_TIMEOUT)
}

/// Run one case on a fresh instance of `target`, in a thread of its own; a case still running
/// after `timeout` fails with "timed out after N s" and its thread is abandoned.
pub fn run_case_within(target: &Target, env: &Env, case: &Case, timeout: Duration) -> CaseReport {
    if let Some(why) = skip_reason(case, env) {
        return CaseReport::new(case, Outcome::Skip, why);
    }
    let (tx, rx) = mpsc::channel();
    let (factory, env2, case2, wait) = (Arc::clone(&target.factory), env.clone(), *case, target.wait);
    let start = Instant::now();
    let deadline = start + timeout;
    let spawned = std::thread::Builder::new().name(case.name.to_string()).spawn(move || {
        let report = run_here(&*factory, &env2, &case2, deadline, wait);
        let _ = tx.send(report);
    });
    if let Err(e) = spawned {
        return CaseReport::new(case, Outcome::Fail, format!("cannot start a thread for the case: {e}"));
    }
    let mut report = match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => timed_out(case, timeout),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            CaseReport::new(case, Outcome::Fail, "the case's thread ended without a report".to_string())
        }
    };
    report.time_us = start.elapsed().as_micros().try_into().unwrap_or(u64::MAX);
    report
}

/// The report of a case that did not finish within `timeout`.
pub fn timed_out(case: &Case, timeout: Duration) -> CaseReport {
    let mut r = CaseReport::new(case, Outcome::Fail, format!("timed out after {}", secs(timeout)));
    r.expected = Some(format!("the case ends within {}", secs(timeout)));
    r.actual = Some(format!("still running after {}", secs(timeout)));
    r
}

/// Make the backend and run the case in the calling thread.
fn run_here(
    factory: &(dyn Fn() -> Result<Box<dyn Backend>, String> + Send + Sync),
    env: &Env,
    case: &Case,
    deadline: Instant,
    wait: Option<Duration>,
) -> CaseReport {
    let mut backend = match factory() {
        Ok(b) => b,
        Err(why) => return CaseReport::new(case, Outcome::Skip, why),
    };
    let wait = wait.unwrap_or(if backend.caps().sim_control { deadline::SIM_WAIT } else { deadline::HW_WAIT });
    deadline::set(deadline, wait);
    let result = catch_unwind(AssertUnwindSafe(|| (case.run)(backend.as_mut(), env)));
    match result {
        Ok(Ok(())) => CaseReport::new(case, Outcome::Pass, String::new()),
        Ok(Err(Verdict::Skip(why))) => CaseReport::new(case, Outcome::Skip, why),
        Ok(Err(Verdict::Fail { what, expected, actual })) => {
            let mut r = CaseReport::new(case, Outcome::Fail, format!("{what}: expected {expected}, got {actual}"));
            r.expected = Some(expected);
            r.actual = Some(actual);
            r
        }
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            CaseReport::new(case, Outcome::Fail, format!("the backend or the case panicked: {msg}"))
        }
    }
}

/// Runs one case: [`run_case_within`] in this process, or another way (a child process).
pub type Exec<'a> = &'a dyn Fn(&Target, &Env, &Case, Duration) -> CaseReport;

/// Sees a run as it goes: progress lines, a journal on disk.
pub trait Sink {
    /// A run starts: `run` has its facts and no cases yet; `total` cases will run.
    fn run_started(&mut self, _run: &RunReport, _total: usize) {}
    /// Case number `index` (from 0) of `total` finished, judged by the divergence table.
    fn case_done(&mut self, _run: &RunReport, _index: usize, _total: usize, _case: &CaseReport) {}
}

/// A sink that sees nothing.
pub struct NoSink;
impl Sink for NoSink {}

/// How a run runs.
pub struct Runner<'a> {
    /// The per-case timeout.
    pub timeout: Duration,
    /// Stop at the first failure (after the divergence table judged it).
    pub fail_fast: bool,
    /// The known divergences, applied to each case as it finishes.
    pub divergences: Option<&'a Divergences>,
}

impl Default for Runner<'_> {
    fn default() -> Self {
        Runner { timeout: DEFAULT_TIMEOUT, fail_fast: false, divergences: None }
    }
}

impl Runner<'_> {
    /// Run `cases` on `target`, each through `exec`, telling `sink` as it goes. With
    /// `fail_fast`, the report stops at the first failure and says so in `stopped`.
    pub fn run_target(&self, target: &Target, cases: &[Case], exec: Exec, sink: &mut dyn Sink) -> RunReport {
        let (env, facts) = target.probe();
        let mut run =
            RunReport::new(target.backend.clone(), target.profile.clone(), facts, env.unavailable.clone(), vec![]);
        let on = run.profile.clone().or_else(|| run.facts.get("board_id").cloned());
        sink.run_started(&run, cases.len());
        for (i, case) in cases.iter().enumerate() {
            let mut report = exec(target, &env, case, self.timeout);
            if let Some(table) = self.divergences {
                table.judge(&run.backend, on.as_deref(), &mut report);
            }
            sink.case_done(&run, i, cases.len(), &report);
            let failed = report.outcome == Outcome::Fail;
            run.cases.push(report);
            if failed && self.fail_fast && i + 1 < cases.len() {
                run.stopped =
                    Some(format!("stopped at the first failure (--fail-fast): {} cases not run", cases.len() - i - 1));
                break;
            }
        }
        run.recount();
        run
    }
}

/// Run every case on `target` in this process, with the default timeout.
pub fn run_target(target: &Target, cases: &[Case]) -> RunReport {
    Runner::default().run_target(target, cases, &run_case_within, &mut NoSink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Check;

    fn sleepy(_: &mut dyn Backend, _: &Env) -> Check {
        std::thread::sleep(Duration::from_secs(3));
        Ok(())
    }

    #[test]
    fn a_case_past_its_timeout_fails_and_the_run_goes_on() -> Result<(), Box<dyn std::error::Error>> {
        let target = Target::sim(<Profile as mlx5_sim::ShippedProfiles>::builtin("cx6dx")?);
        let (env, _) = target.probe();
        let slow = Case { name: "test.sleeps", covers: &[], needs: &[], run: sleepy };
        let start = Instant::now();
        let r = run_case_within(&target, &env, &slow, Duration::from_millis(200));
        assert!(start.elapsed() < Duration::from_secs(2), "the harness waited for the case");
        assert_eq!(r.outcome, Outcome::Fail);
        assert_eq!(r.detail, "timed out after 0.2 s");
        assert!(r.expected.is_some() && r.actual.is_some());
        let cases = crate::suite();
        let next = run_case_within(&target, &env, &cases[3], Duration::from_secs(30));
        assert_eq!(next.outcome, Outcome::Pass, "{}", next.detail);
        Ok(())
    }

    #[test]
    fn fail_fast_stops_at_the_first_failure() -> Result<(), Box<dyn std::error::Error>> {
        fn fails(_: &mut dyn Backend, _: &Env) -> Check {
            Err(Verdict::fail("x", 1, 2))
        }
        let target = Target::sim(<Profile as mlx5_sim::ShippedProfiles>::builtin("cx6dx")?);
        let mut cases = crate::suite()[3..6].to_vec();
        cases.insert(1, Case { name: "test.fails", covers: &[], needs: &[], run: fails });
        let runner = Runner { fail_fast: true, ..Runner::default() };
        let run = runner.run_target(&target, &cases, &run_case_within, &mut NoSink);
        assert_eq!(run.cases.len(), 2);
        assert_eq!(run.summary.failed, 1);
        assert!(run.stopped.as_deref().unwrap_or("").contains("2 cases not run"), "{:?}", run.stopped);
        Ok(())
    }
}
