//! Arbitrary bytes as a sequence of firmware command mailboxes, through a VFIO context and a
//! DEVX kernel context, as general commands and as objects created, queried, modified and
//! destroyed. The answer is the output, EREMOTEIO with a status, or EINVAL; never a panic.
//!
//! The body is [`mlx5_fuzz_bodies::mailbox`], which the corpus test also runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mlx5_fuzz_bodies::mailbox(data));
