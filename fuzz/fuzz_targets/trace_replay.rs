//! Arbitrary text as a trace file into replay: a reading error, a match or a divergence;
//! never a panic.
//!
//! The body is [`mlx5_fuzz_bodies::trace_replay`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::trace_replay(data));
