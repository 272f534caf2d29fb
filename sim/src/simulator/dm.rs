//! Device memory facts a C ABI needs beyond the trait: `max_dm_size` and where a DM's bytes are.

use mlx5_dv::{ContextHandle, Dm, Result};

use super::Simulator;

impl Simulator {
    /// `ibv_device_attr_ex.max_dm_size` of a kernel context's device (0 without MEMIC).
    pub fn max_dm_size(&mut self, ctx: ContextHandle) -> Result<u64> {
        let (p, mut low) = self.split();
        p.max_dm_size(&mut low, ctx)
    }

    /// Where a DM's bytes are in host memory (`mlx5dv_init_obj`'s `dm.buf`; in process once
    /// [`Simulator::allocate_in_process`] ran before the device's first `alloc_dm`).
    pub fn dm_address(&self, dm: &Dm) -> Result<u64> {
        self.provider.dm_address(dm)
    }
}
