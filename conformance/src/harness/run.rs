//! Running the suite on a backend: one fresh backend instance per case.

use std::panic::{AssertUnwindSafe, catch_unwind};

use mlx5_dv::Backend;
use mlx5_sim::{Profile, Simulator};

use crate::case::{Case, Env, Verdict};
use crate::harness::report::{CaseReport, Outcome, RunReport};

/// Makes fresh backend instances of one kind.
pub type Factory = Box<dyn Fn() -> Result<Box<dyn Backend>, String> + Send + Sync>;

/// A backend the suite can run on: its name, its profile, and how to make an instance.
pub struct Target {
    /// `"sim"` or `"hw"`.
    pub backend: String,
    /// The simulator profile, for `sim`.
    pub profile: Option<String>,
    factory: Factory,
}

impl Target {
    /// A target from a factory.
    pub fn new(backend: impl Into<String>, profile: Option<String>, factory: Factory) -> Self {
        Target { backend: backend.into(), profile, factory }
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

    /// `sim/cx6dx`, `hw/mlx5_0`.
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
    pub fn probe(&self) -> (Env, std::collections::BTreeMap<String, String>) {
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

/// Run one case on a fresh instance of `target`.
pub fn run_case(target: &Target, env: &Env, case: &Case) -> CaseReport {
    let mut report = CaseReport {
        name: case.name.to_string(),
        covers: case.covers.to_vec(),
        outcome: Outcome::Skip,
        detail: String::new(),
        expected: None,
        actual: None,
    };
    if let Some(why) = skip_reason(case, env) {
        report.detail = why;
        return report;
    }
    let mut backend = match target.instance() {
        Ok(b) => b,
        Err(why) => {
            report.detail = why;
            return report;
        }
    };
    let result = catch_unwind(AssertUnwindSafe(|| (case.run)(backend.as_mut(), env)));
    match result {
        Ok(Ok(())) => report.outcome = Outcome::Pass,
        Ok(Err(Verdict::Skip(why))) => report.detail = why,
        Ok(Err(Verdict::Fail { what, expected, actual })) => {
            report.outcome = Outcome::Fail;
            report.detail = format!("{what}: expected {expected}, got {actual}");
            report.expected = Some(expected);
            report.actual = Some(actual);
        }
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            report.outcome = Outcome::Fail;
            report.detail = format!("the backend or the case panicked: {msg}");
        }
    }
    report
}

/// Run every case on `target`.
pub fn run_target(target: &Target, cases: &[Case]) -> RunReport {
    let (env, facts) = target.probe();
    let cases: Vec<CaseReport> = cases.iter().map(|c| run_case(target, &env, c)).collect();
    RunReport::new(target.backend.clone(), target.profile.clone(), facts, env.unavailable.clone(), cases)
}
