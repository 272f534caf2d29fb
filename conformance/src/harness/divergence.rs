//! Known divergences: cases a backend is known to fail, each with its reason. A listed case
//! that fails is reported as [`Outcome::Xfail`]; a listed case that passes is a failure, so
//! that the table stays true.

use mlx5_sim::{Profile, ShippedProfiles};
use serde::{Deserialize, Serialize};

use crate::harness::report::{CaseReport, Outcome, RunReport};

/// The table shipped with the suite (`conformance/divergences.toml`).
pub const SHIPPED: &str = include_str!("../../divergences.toml");

/// What a listed case that passed was expected to do.
const LISTED_BUT_PASSED: &str = "a failure (known divergence)";

/// One case a backend is known to fail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Divergence {
    /// `"sim"` or `"hw"`.
    pub backend: String,
    /// The simulator profile or, on hw, the board id; `None` matches every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The case's name.
    pub case: String,
    /// What differs, and what would fix it.
    pub reason: String,
}

/// A table of known divergences.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Divergences {
    /// The entries, `[[divergence]]` in TOML.
    #[serde(default, rename = "divergence")]
    pub list: Vec<Divergence>,
}

impl Divergences {
    /// Parse a table; every entry must name a backend and a case of `known_cases`, and a sim
    /// entry's profile must be a shipped profile.
    pub fn parse(text: &str, known_cases: &[&str]) -> Result<Self, String> {
        Self::parse_for(text, known_cases, &[])
    }

    /// [`parse`](Self::parse), where a sim entry may also name one of `more_profiles` (the
    /// profile files of this run).
    pub fn parse_for(text: &str, known_cases: &[&str], more_profiles: &[&str]) -> Result<Self, String> {
        let table: Divergences = toml::from_str(text).map_err(|e| e.to_string())?;
        let shipped = Profile::builtin_names();
        for d in &table.list {
            if d.backend != "sim" && d.backend != "hw" {
                return Err(format!("divergence for `{}`: backend `{}` is neither sim nor hw", d.case, d.backend));
            }
            if !known_cases.contains(&d.case.as_str()) {
                return Err(format!("divergence for `{}`: the suite has no such case", d.case));
            }
            if let (Some(p), "sim") = (&d.profile, d.backend.as_str())
                && !shipped.contains(&p.as_str())
                && !more_profiles.contains(&p.as_str())
            {
                return Err(format!(
                    "divergence for `{}`: profile `{p}` is no shipped profile (the shipped ones are {})",
                    d.case,
                    shipped.join(", ")
                ));
            }
            if d.reason.trim().is_empty() {
                return Err(format!("divergence for `{}`: the reason is empty", d.case));
            }
        }
        Ok(table)
    }

    /// The entry for `case` on `backend` with profile or board `on`, if any.
    pub fn find(&self, backend: &str, on: Option<&str>, case: &str) -> Option<&Divergence> {
        self.list
            .iter()
            .find(|d| d.backend == backend && d.case == case && d.profile.as_deref().is_none_or(|p| Some(p) == on))
    }

    /// Turn a listed failure into an expected failure, and a listed pass into a failure.
    pub fn judge(&self, backend: &str, on: Option<&str>, report: &mut CaseReport) {
        let Some(d) = self.find(backend, on, &report.name) else { return };
        match report.outcome {
            Outcome::Fail => {
                report.outcome = Outcome::Xfail;
                report.detail = format!("known divergence ({}): {}", d.reason, report.detail);
            }
            Outcome::Pass => {
                report.outcome = Outcome::Fail;
                report.detail = format!(
                    "listed as a known divergence ({}) but passed: remove it from the divergence table",
                    d.reason
                );
                report.expected = Some(LISTED_BUT_PASSED.into());
                report.actual = Some("pass".into());
            }
            Outcome::Skip | Outcome::Xfail => {}
        }
    }

    /// The outcome `report` had before [`judge`](Self::judge) saw it: a known divergence
    /// failed, and a listed case that failed for passing passed.
    pub fn unjudged(report: &CaseReport) -> Outcome {
        match report.outcome {
            Outcome::Xfail => Outcome::Fail,
            Outcome::Fail
                if report.expected.as_deref() == Some(LISTED_BUT_PASSED)
                    && report.actual.as_deref() == Some("pass") =>
            {
                Outcome::Pass
            }
            o => o,
        }
    }

    /// [`judge`](Self::judge) every case of a run: `on` is the simulator profile, or on hw the
    /// board id from the run's facts.
    pub fn apply(&self, run: &mut RunReport) {
        let on = run.profile.clone().or_else(|| run.facts.get("board_id").cloned());
        for case in &mut run.cases {
            self.judge(&run.backend, on.as_deref(), case);
        }
        run.recount();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CASES: &[&str] = &["mkey.zero_create_flags", "mkey.unknown_create_flag"];

    fn report(outcome: Outcome) -> CaseReport {
        CaseReport {
            name: "mkey.zero_create_flags".into(),
            covers: vec![7],
            outcome,
            detail: "errno: expected 95, got 22".into(),
            expected: None,
            actual: None,
            time_us: 0,
        }
    }

    fn table(profile: Option<&str>) -> Divergences {
        Divergences {
            list: vec![Divergence {
                backend: "hw".into(),
                profile: profile.map(String::from),
                case: "mkey.zero_create_flags".into(),
                reason: "firmware 22.x answers EINVAL".into(),
            }],
        }
    }

    #[test]
    fn the_shipped_table_parses() {
        let names: Vec<&str> = crate::suite().iter().map(|c| c.name).collect();
        assert!(Divergences::parse(SHIPPED, &names).is_ok());
    }

    #[test]
    fn a_listed_failure_is_an_expected_failure() {
        let mut r = report(Outcome::Fail);
        table(None).judge("hw", Some("MT_0000000436"), &mut r);
        assert_eq!(r.outcome, Outcome::Xfail);
        assert_eq!(r.detail, "known divergence (firmware 22.x answers EINVAL): errno: expected 95, got 22");
        assert_eq!(Divergences::unjudged(&r), Outcome::Fail);
    }

    #[test]
    fn a_listed_pass_fails() {
        let mut r = report(Outcome::Pass);
        table(None).judge("hw", None, &mut r);
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(r.detail.contains("remove it from the divergence table"), "{}", r.detail);
        assert_eq!(Divergences::unjudged(&r), Outcome::Pass);
        assert_eq!(Divergences::unjudged(&report(Outcome::Fail)), Outcome::Fail, "an unlisted failure");
    }

    #[test]
    fn entries_match_backend_case_and_profile_only() {
        let t = table(Some("MT_0000000436"));
        for (backend, on, case) in [
            ("sim", Some("MT_0000000436"), "mkey.zero_create_flags"),
            ("hw", Some("MT_0000000359"), "mkey.zero_create_flags"),
            ("hw", None, "mkey.zero_create_flags"),
            ("hw", Some("MT_0000000436"), "mkey.unknown_create_flag"),
        ] {
            assert_eq!(t.find(backend, on, case), None, "{backend} {on:?} {case}");
        }
        assert!(t.find("hw", Some("MT_0000000436"), "mkey.zero_create_flags").is_some());
        let mut skipped = report(Outcome::Skip);
        t.judge("hw", Some("MT_0000000436"), &mut skipped);
        assert_eq!(skipped.outcome, Outcome::Skip);
    }

    #[test]
    fn bad_tables_are_clear_errors() {
        for (text, want) in [
            ("[[divergence]]\nbackend = \"hw\"\ncase = \"nope\"\nreason = \"r\"\n", "no such case"),
            (
                "[[divergence]]\nbackend = \"fpga\"\ncase = \"mkey.zero_create_flags\"\nreason = \"r\"\n",
                "neither sim nor hw",
            ),
            (
                "[[divergence]]\nbackend = \"hw\"\ncase = \"mkey.zero_create_flags\"\nreason = \" \"\n",
                "reason is empty",
            ),
            (
                "[[divergence]]\nbackend = \"hw\"\ncase = \"mkey.zero_create_flags\"\nreason = \"r\"\nboard = \"x\"\n",
                "board",
            ),
            (
                "[[divergence]]\nbackend = \"sim\"\nprofile = \"cx99\"\ncase = \"mkey.zero_create_flags\"\nreason = \"r\"\n",
                "profile `cx99` is no shipped profile",
            ),
        ] {
            let err = Divergences::parse(text, CASES).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }
}
