//! Arbitrary bytes at QP 1 through the C ABI's connection manager (its state machine, and a
//! program's answers to what it posts); never a panic or a hang.
//!
//! The body is [`mlx5_fuzz_bodies::cm_qp1`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::cm_qp1(data));
