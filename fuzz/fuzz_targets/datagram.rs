//! Arbitrary bytes as what arrives at a simulated port's RoCE v2 UDP socket (or a whole IP
//! packet): a typed error, or a packet that encodes and decodes to itself; never a panic.
//!
//! The body is [`mlx5_fuzz_bodies::datagram`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::datagram(data));
