//! The bodies of the fuzz targets. Each target in `fuzz/fuzz_targets/` hands libFuzzer's
//! input to one function here, and the corpus test (`tests/corpus.rs`) hands every committed
//! input (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`) to the same function on
//! stable Rust: what is fuzzed and what is replayed cannot drift apart.
//!
//! A body panics only where it found a bug: an assertion about the answer, or a panic
//! inside the code under test.

mod calls;
mod cm_mad;
mod cm_qp1;
mod datagram;
mod mailbox;
mod net_rx;
mod profile_toml;
mod trace_replay;

pub use calls::calls;
pub use cm_mad::cm_mad;
pub use cm_qp1::cm_qp1;
pub use datagram::datagram;
pub use mailbox::mailbox;
pub use net_rx::{FIX_ICRC, NET_RX_ADDRESS, PICK_MR, PICK_QP, STRANGER, net_rx, net_rx_seeds, net_rx_taken};
pub use profile_toml::profile_toml;
pub use trace_replay::{HOST_MEMORY, trace_replay};

/// A target's body: one input, no answer; a panic is a finding.
pub type Body = fn(&[u8]);

/// Every target: its name (also its corpus folder's) and its body.
pub const TARGETS: [(&str, Body); 8] = [
    ("calls", calls),
    ("cm_mad", cm_mad),
    ("cm_qp1", cm_qp1),
    ("datagram", datagram),
    ("mailbox", mailbox),
    ("net_rx", net_rx),
    ("profile_toml", profile_toml),
    ("trace_replay", trace_replay),
];
