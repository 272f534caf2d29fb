//! The harness: running cases on a backend ([`run`]), the table of known divergences
//! ([`divergence`]), and the reports a run produces ([`report`]).

pub mod divergence;
pub mod report;
pub mod run;
