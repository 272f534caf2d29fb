//! Arbitrary text as a trace file into replay: a reading error, a match or a divergence;
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mlx5_sim::Simulator;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut sim) = Simulator::with_profile("cx6dx") else { return };
    let _ = mlx5_conformance::trace::replay(text, &mut sim);
});
