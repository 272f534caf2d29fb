//! Arbitrary bytes as a MAD at QP 1: no CM message, or one that encodes back to itself;
//! never a panic.
//!
//! The body is [`mlx5_fuzz_bodies::cm_mad`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::cm_mad(data));
