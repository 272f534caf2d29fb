//! Arbitrary text as a trace file into replay: a reading error, a match or a divergence;
//! never a panic.

use mlx5_sim::{Profile, ShippedProfiles, Simulator};

/// Bytes of host memory the replaying simulator may give buffers and rings together: the
/// shipped profile's 4 GiB would let one input hold more than libFuzzer's 2 GB limit
/// (replay's own bounds are the defaults of [`mlx5_trace::Limits`], as the CLI's).
pub const HOST_MEMORY: u64 = 256 << 20;

thread_local! {
    /// The profile, parsed once: parsing it was most of a short input's time.
    static PROFILE: Option<Profile> = Profile::builtin("cx6dx").ok().map(|mut p| {
        p.datapath.host_memory_limit = HOST_MEMORY;
        p
    });
}

/// Replay `data`, if it is UTF-8, on a cx6dx simulator with [`HOST_MEMORY`].
pub fn trace_replay(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some(p) = PROFILE.with(Clone::clone) else { return };
    let Ok(mut sim) = Simulator::new(p) else { return };
    let _ = mlx5_trace::replay(text, &mut sim);
}
