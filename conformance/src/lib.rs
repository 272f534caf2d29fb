//! # mlx5-conformance: one suite, every backend
//!
//! Cases ([`Case`]) are written once against `&mut dyn mlx5_dv::Backend`. Each names the
//! items of the behaviour checklist (`docs/behaviour.md`, cited as §12.N) it covers and the
//! capabilities it needs. The harness ([`run_target`]) runs every case on a fresh backend
//! instance and reports pass, fail (with expected and actual) or skip (with the reason); a skip
//! is never counted as a pass. A table of known divergences ([`Divergences`]) turns a listed
//! failure into an expected failure, and a listed pass into a failure.
//!
//! ## Layout
//!
//! - [`case`]: what a case is, what it needs, and the checks cases are written with;
//!   [`cases`]: the cases, by family.
//! - [`harness`]: running cases on a backend ([`harness::run`]), the known-divergence table
//!   ([`harness::divergence`]), and the table, JSON and JUnit reports ([`harness::report`]).
//!   Their main items are re-exported here.
//! - [`spec`]: the §12 checklist's titles, for reports and coverage.
//! - [`trace`]: recording and replaying traces, the `mlx5-trace` crate re-exported.
//! - `main.rs`: the `mlx5-conformance` command line.
#![deny(missing_docs)]

pub mod case;
pub mod cases;
pub mod harness;
#[cfg(feature = "model")]
pub mod model;
#[cfg(not(feature = "model"))]
#[allow(dead_code, unused_imports)]
mod model;
pub mod spec;
/// Traces: recording any backend, the format, replay (the `mlx5-trace` crate).
pub use mlx5_trace as trace;

pub use case::{Case, Check, Env, Need, Verdict};
pub use harness::divergence::{Divergence, Divergences};
pub use harness::meta::Meta;
pub use harness::report::{CaseReport, Outcome, Report, RunReport, Summary};
pub use harness::run::{Runner, Sink, Target, run_case, run_case_within, run_target, skip_reason};
/// The state-machine proptest on any backend (the CLI's `discover`); the model and its
/// strategies are public with the `model` feature.
pub use model::{
    Failure, NetFailure, NetMode, discover, discover_across, discover_with, run_across, run_net_in_memory,
};

/// Every case of the suite, in the order reports list them.
pub fn suite() -> Vec<Case> {
    cases::all()
}

/// For each §12 item, the cases that cover it.
pub fn coverage(cases: &[Case]) -> Vec<(u16, &'static str, Vec<&'static str>)> {
    spec::ITEMS
        .iter()
        .map(|(n, title)| (*n, *title, cases.iter().filter(|c| c.covers.contains(n)).map(|c| c.name).collect()))
        .collect()
}
