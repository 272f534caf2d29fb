//! Arbitrary text as a device profile: an error, or a simulator that opens, allocates and
//! creates an mkey without a panic.
//!
//! The body is [`mlx5_fuzz_bodies::profile_toml`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::profile_toml(data));
