//! Arbitrary text as a device profile: an error, or a simulator that opens, allocates and
//! creates an mkey without a panic.

use mlx5_dv::prelude::*;
use mlx5_dv::{MkeyInitAttr, MkeyInitFlags};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

/// Load `data`, if it is UTF-8, as a profile; open each of its devices and use it a little.
pub fn profile_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(p) = Profile::load(text, "fuzz") else { return };
    let Ok(mut sim) = Simulator::new(p) else { return };
    let Ok(devices) = sim.device_list() else { return };
    for d in devices {
        let Ok(ctx) = sim.open_ibv_device(&d.name) else { continue };
        if let Ok(pd) = sim.alloc_pd(ctx) {
            let attr = MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT, max_entries: 5 };
            let _ = sim.create_mkey(&attr);
        }
        let _ = sim.query_device(ctx, u64::MAX);
        let _ = sim.close_device(ctx);
    }
}
