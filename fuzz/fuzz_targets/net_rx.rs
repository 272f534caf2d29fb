//! Arbitrary bytes as datagrams arriving at a networked simulated port (ICRC check,
//! reassembly, the responder and waiting requesters): each is taken or dropped and counted,
//! and nothing lands outside a registered region with the right access; never a panic.
//!
//! The body is [`mlx5_fuzz_bodies::net_rx`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::net_rx(data));
