//! Arbitrary bytes as a sequence of API calls on the simulator (a byte picks the call, the
//! next bytes its arguments and which earlier object it names). Every call answers, and every
//! error is an errno the API returns.
//!
//! The body is [`mlx5_fuzz_bodies::calls`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::calls(data));
