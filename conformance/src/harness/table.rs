//! The report as text for people: at most [`WIDTH`] columns, the failures again at the end.

use std::fmt::Write as _;

use crate::harness::report::{Outcome, Report, covers};

/// The table's width, in characters.
pub const WIDTH: usize = 100;

/// Where wrapped details start.
const DETAIL_INDENT: &str = "          ";

fn wrap(out: &mut String, text: &str, first: &str, rest: &str) {
    if first.chars().count() + text.chars().count() <= WIDTH && !text.contains('\n') {
        let _ = writeln!(out, "{first}{text}");
        return;
    }
    let opts = textwrap::Options::new(WIDTH).initial_indent(first).subsequent_indent(rest).break_words(true);
    for line in textwrap::wrap(text, opts) {
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

impl Report {
    /// The report as an aligned text table, at most [`WIDTH`] columns wide.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let m = &self.meta;
        wrap(&mut out, &format!("{}, on {}, {}", m.build_line(), m.host, m.timestamp), "", "  ");
        out.push('\n');
        let cases = || self.runs.iter().flat_map(|r| &r.cases);
        let name_w = cases().map(|c| c.name.chars().count()).max().unwrap_or(0);
        let cov_w = cases().map(|c| covers(&c.covers).chars().count()).max().unwrap_or(0);
        // A name column too wide for the covers column moves the covers to the detail line.
        let inline_covers = 3 + 7 + name_w + 2 + cov_w <= WIDTH;
        for run in &self.runs {
            let facts: Vec<String> =
                ["device", "fw_ver"].iter().filter_map(|k| run.facts.get(*k).map(|v| format!("{k} {v}"))).collect();
            wrap(&mut out, &format!("== {} == {}", run.label(), facts.join(", ")), "", "   ");
            if let Some(why) = &run.unavailable {
                wrap(&mut out, &format!("backend unavailable: {why}"), "   ", "   ");
            }
            for c in &run.cases {
                let tag = c.outcome.tag();
                let cov = covers(&c.covers);
                let line = if inline_covers {
                    format!("   {tag:<5}  {:name_w$}  {cov}", c.name)
                } else {
                    format!("   {tag:<5}  {} {cov}", c.name)
                };
                wrap(&mut out, line.trim_end(), "", DETAIL_INDENT);
                if !c.detail.is_empty() {
                    wrap(&mut out, &c.detail, DETAIL_INDENT, DETAIL_INDENT);
                }
            }
            if let Some(why) = &run.stopped {
                wrap(&mut out, why, "   ", "   ");
            }
            let _ = writeln!(out, "   {}\n", run.summary.line());
        }
        let failed: Vec<_> = self
            .runs
            .iter()
            .flat_map(|r| r.cases.iter().map(move |c| (r, c)))
            .filter(|(_, c)| c.outcome == Outcome::Fail)
            .collect();
        if !failed.is_empty() {
            let _ = writeln!(out, "failures ({}):", failed.len());
            for (run, c) in failed {
                wrap(&mut out, &format!("{}  {}", run.label(), c.name), "   ", DETAIL_INDENT);
                wrap(&mut out, &c.detail, DETAIL_INDENT, DETAIL_INDENT);
            }
            out.push('\n');
        }
        let _ = writeln!(out, "total: {}", self.summary().line());
        out
    }
}
