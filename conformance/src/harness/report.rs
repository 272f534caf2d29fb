//! Reports: what a run found, as a table for people ([`table`](super::table)), JSON for
//! tools, JUnit for CI ([`junit`](super::junit)) and one HTML page ([`html`](super::html)).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::case::Case;
use crate::harness::meta::Meta;

/// A case's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every check held.
    Pass,
    /// A check failed, the case timed out or crashed.
    Fail,
    /// The case could not run here; `detail` says why.
    Skip,
    /// A check failed, as the divergence table says it does on this backend; `detail` says why.
    Xfail,
}

impl Outcome {
    /// `PASS`, `FAIL`, `SKIP`, `XFAIL`.
    pub fn tag(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Skip => "SKIP",
            Outcome::Xfail => "XFAIL",
        }
    }
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
    /// How long the case ran, in microseconds (0 for a case skipped before it started).
    #[serde(default)]
    pub time_us: u64,
}

impl CaseReport {
    /// A report for `case` with `outcome` and `detail`, nothing else.
    pub fn new(case: &Case, outcome: Outcome, detail: String) -> Self {
        CaseReport {
            name: case.name.to_string(),
            covers: case.covers.to_vec(),
            outcome,
            detail,
            expected: None,
            actual: None,
            time_us: 0,
        }
    }
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
    /// Why the run ended before its last case (`--fail-fast`), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// In a merged report: where and when this run was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Meta>,
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
        RunReport {
            backend,
            profile,
            facts,
            unavailable,
            stopped: None,
            origin: None,
            summary: Summary::of(&cases),
            cases,
        }
    }

    /// Count the summary again after outcomes changed.
    pub fn recount(&mut self) {
        self.summary = Summary::of(&self.cases);
    }

    /// `sim/cx6dx`, or `hw` with its board id when the facts have one.
    pub fn label(&self) -> String {
        match (&self.profile, self.facts.get("board_id")) {
            (Some(p), _) => format!("{}/{p}", self.backend),
            (None, Some(b)) if self.backend == "hw" => format!("hw/{b}"),
            (None, _) => self.backend.clone(),
        }
    }
}

/// Every run of one invocation. This JSON shape is read by tools outside the project.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Where and when the report was made.
    #[serde(default)]
    pub meta: Meta,
    /// One entry per backend (and simulator profile).
    pub runs: Vec<RunReport>,
}

/// `§12.7,8,11`: the §12 items a case covers, compactly.
pub fn covers(c: &[u16]) -> String {
    if c.is_empty() {
        return String::new();
    }
    let nums: Vec<String> = c.iter().map(u16::to_string).collect();
    format!("§12.{}", nums.join(","))
}

impl Report {
    /// A report of `runs`, made on this host now.
    pub fn new(runs: Vec<RunReport>) -> Self {
        Report { meta: Meta::now(), runs }
    }

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

    /// The report as pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// Reports of several invocations as one: every run, each with its origin.
    pub fn merge(reports: Vec<Report>) -> Report {
        let mut out = Report::new(vec![]);
        for r in reports {
            for mut run in r.runs {
                run.origin.get_or_insert_with(|| r.meta.clone());
                out.runs.push(run);
            }
        }
        out
    }
}
