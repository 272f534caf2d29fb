//! The harness: running cases on a backend ([`run`]) within deadlines ([`deadline`]), the
//! table of known divergences ([`divergence`]), and the reports a run produces ([`report`],
//! as a [`table`], [`junit`] or [`html`]) with where and when they were made ([`meta`]).

pub mod deadline;
pub mod divergence;
pub mod html;
pub mod isolate;
pub mod journal;
pub mod junit;
pub mod meta;
pub mod report;
pub mod run;
pub mod table;
