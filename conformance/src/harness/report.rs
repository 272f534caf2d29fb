//! Reports: what a run found, as a table for people, JSON for tools, JUnit for CI.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// A case's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every check held.
    Pass,
    /// A check failed.
    Fail,
    /// The case could not run here; `detail` says why.
    Skip,
    /// A check failed, as the divergence table says it does on this backend; `detail` says why.
    Xfail,
}

/// One case on one backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseReport {
    /// Case name.
    pub name: String,
    /// §12 items covered.
    pub covers: Vec<u16>,
    /// pass, fail, skip or xfail.
    pub outcome: Outcome,
    /// Why it failed or was skipped; empty on a pass.
    pub detail: String,
    /// For a failure: what the spec says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// For a failure: what the backend did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
}

/// Counts of outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Cases passed.
    pub passed: usize,
    /// Cases failed.
    pub failed: usize,
    /// Cases skipped.
    pub skipped: usize,
    /// Cases that failed as the divergence table expects.
    #[serde(default)]
    pub xfailed: usize,
}

impl Summary {
    fn of<'a>(cases: impl IntoIterator<Item = &'a CaseReport>) -> Self {
        let mut s = Summary::default();
        for c in cases {
            match c.outcome {
                Outcome::Pass => s.passed += 1,
                Outcome::Fail => s.failed += 1,
                Outcome::Skip => s.skipped += 1,
                Outcome::Xfail => s.xfailed += 1,
            }
        }
        s
    }

    fn add(&mut self, o: Summary) {
        self.passed += o.passed;
        self.failed += o.failed;
        self.skipped += o.skipped;
        self.xfailed += o.xfailed;
    }

    /// `3 passed, 0 failed, 1 skipped`, and the expected failures if there are any.
    pub fn line(&self) -> String {
        let mut line = format!("{} passed, {} failed, {} skipped", self.passed, self.failed, self.skipped);
        if self.xfailed > 0 {
            let _ = write!(line, ", {} known divergences", self.xfailed);
        }
        line
    }
}

/// The suite on one backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// `sim` or `hw`.
    pub backend: String,
    /// The simulator profile, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Device and software facts.
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
    /// Why the backend could run no case, if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Outcome counts.
    pub summary: Summary,
    /// Every case, in suite order.
    pub cases: Vec<CaseReport>,
}

impl RunReport {
    /// Build a run report; the summary is counted from the cases.
    pub fn new(
        backend: String,
        profile: Option<String>,
        facts: BTreeMap<String, String>,
        unavailable: Option<String>,
        cases: Vec<CaseReport>,
    ) -> Self {
        RunReport { backend, profile, facts, unavailable, summary: Summary::of(&cases), cases }
    }

    /// Count the summary again after outcomes changed.
    pub fn recount(&mut self) {
        self.summary = Summary::of(&self.cases);
    }

    fn label(&self) -> String {
        match &self.profile {
            Some(p) => format!("{}/{p}", self.backend),
            None => self.backend.clone(),
        }
    }
}

/// Every run of one invocation. This JSON shape is read by tools outside the project.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// One entry per backend (and simulator profile).
    pub runs: Vec<RunReport>,
}

/// `§12.7,8,11`: the §12 items a case covers, compactly.
fn covers(c: &[u16]) -> String {
    if c.is_empty() {
        return String::new();
    }
    let nums: Vec<String> = c.iter().map(u16::to_string).collect();
    format!("§12.{}", nums.join(","))
}

impl Report {
    /// Totals over every run.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        self.runs.iter().for_each(|r| s.add(r.summary));
        s
    }

    /// True if no case failed.
    pub fn passed(&self) -> bool {
        self.summary().failed == 0
    }

    /// The report as an aligned text table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let name_w = self.runs.iter().flat_map(|r| &r.cases).map(|c| c.name.len()).max().unwrap_or(0);
        let cov_w = self.runs.iter().flat_map(|r| &r.cases).map(|c| covers(&c.covers).len()).max().unwrap_or(0);
        for run in &self.runs {
            let facts: Vec<String> =
                ["device", "fw_ver"].iter().filter_map(|k| run.facts.get(*k).map(|v| format!("{k} {v}"))).collect();
            let _ = writeln!(out, "== {} == {}", run.label(), facts.join(", "));
            if let Some(why) = &run.unavailable {
                let _ = writeln!(out, "   backend unavailable: {why}");
            }
            for c in &run.cases {
                let tag = match c.outcome {
                    Outcome::Pass => "PASS",
                    Outcome::Fail => "FAIL",
                    Outcome::Skip => "SKIP",
                    Outcome::Xfail => "XFAIL",
                };
                let line = format!("{tag}  {:name_w$}  {:cov_w$}  {}", c.name, covers(&c.covers), c.detail);
                let _ = writeln!(out, "   {}", line.trim_end());
            }
            let _ = writeln!(out, "   {}\n", run.summary.line());
        }
        let _ = writeln!(out, "total: {}", self.summary().line());
        out
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The report as JUnit XML: one test suite per run, skips and expected failures as
    /// `<skipped/>` with their reason.
    pub fn to_junit(&self) -> Result<String, quick_junit::SerializeError> {
        use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
        let mut report = quick_junit::Report::new("mlx5-conformance");
        for run in &self.runs {
            let mut suite = TestSuite::new(run.label());
            for (k, v) in &run.facts {
                suite.add_property(quick_junit::Property::new(k.as_str(), v.as_str()));
            }
            for c in &run.cases {
                let mut status = match c.outcome {
                    Outcome::Pass => TestCaseStatus::success(),
                    Outcome::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
                    Outcome::Skip | Outcome::Xfail => TestCaseStatus::skipped(),
                };
                if c.outcome != Outcome::Pass {
                    status.set_message(c.detail.as_str());
                }
                let mut case = TestCase::new(c.name.as_str(), status);
                case.set_classname(run.label());
                if !c.covers.is_empty() {
                    case.properties.push(quick_junit::Property::new("covers", covers(&c.covers)));
                }
                suite.add_test_case(case);
            }
            report.add_test_suite(suite);
        }
        report.to_string()
    }
}
