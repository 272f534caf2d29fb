//! The [`Backend`] trait: the mlx5dv API, one method per C call.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::handle::{ContextHandle, PdHandle};
use crate::types::{ContextAttr, DeviceDesc, DvContext, Mkey, MkeyErr, MkeyInitAttr};

/// What a backend can tell about the kernel side of the stack. `None` means "cannot tell":
/// conformance cases that depend on the answer are then skipped with that reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelFacts {
    /// The kernel grants DEVX user contexts (`MLX5_IB_ALLOC_UCTX_DEVX`).
    pub devx: Option<bool>,
    /// The kernel reports `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG`.
    pub mkey_update_tag: Option<bool>,
    /// The kernel reports `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS`.
    pub sqd2rts: Option<bool>,
}

/// A description of a backend instance, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendInfo {
    /// `"sim"` or `"hw"`.
    pub backend: String,
    /// The simulator profile, if any.
    pub profile: Option<String>,
    /// Facts about the device and the software stack (name, firmware, versions), ordered.
    pub facts: BTreeMap<String, String>,
}

/// One device command as the simulated firmware saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRecord {
    /// `mbox_in.opcode`.
    pub opcode: u16,
    /// `mbox_in.op_mod`.
    pub op_mod: u16,
    /// `mbox_in.uid`.
    pub uid: u16,
    /// The whole input mailbox.
    pub input: Vec<u8>,
    /// `mbox_out.status`.
    pub status: u8,
    /// `mbox_out.syndrome`.
    pub syndrome: u32,
    /// The whole output mailbox.
    pub output: Vec<u8>,
}

/// A rule that makes the firmware fail matching commands with a chosen status and syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRule {
    /// The opcode to match.
    pub opcode: u16,
    /// How many matching commands to let through before the rule acts.
    pub skip: u32,
    /// How many times the rule acts before it is spent.
    pub times: u32,
    /// The status to answer with (non-zero).
    pub status: u8,
    /// The syndrome to answer with.
    pub syndrome: u32,
}

impl FaultRule {
    /// Fail the next command with `opcode`, once.
    pub fn fail_next(opcode: u16, status: u8, syndrome: u32) -> Self {
        FaultRule { opcode, skip: 0, times: 1, status, syndrome }
    }

    /// Let `n` matching commands through first.
    pub fn after(mut self, n: u32) -> Self {
        self.skip = n;
        self
    }
}

/// Device-level access that only a simulator offers: fault injection and the command log.
/// Conformance cases that need it are skipped on hardware with that reason.
pub trait SimControl {
    /// Install a fault rule; rules are checked in install order and the first that matches acts.
    fn add_fault(&mut self, rule: FaultRule);
    /// Remove every fault rule.
    fn clear_faults(&mut self);
    /// Start or stop recording firmware commands.
    fn record_commands(&mut self, on: bool);
    /// Return the recorded commands, oldest first, and forget them.
    fn take_commands(&mut self) -> Vec<CommandRecord>;
}

/// The mlx5dv API as one object-safe trait.
///
/// Every method corresponds to a C call and returns what that call returns: the same values,
/// and on failure an [`crate::Error`] with the same errno. Handles are checked: a handle that
/// was destroyed, or that another backend instance issued, gives `EINVAL`; a PD that still has
/// mkeys gives `EBUSY` on `dealloc_pd`. No input makes a backend panic.
pub trait Backend {
    /// Describe this backend for reports.
    fn info(&self) -> BackendInfo;

    /// What this backend knows about the kernel's features.
    fn kernel_facts(&self) -> KernelFacts;

    /// List the devices: `ibv_get_device_list` followed by `mlx5dv_get_vfio_device_list`.
    fn device_list(&mut self) -> Result<Vec<DeviceDesc>>;

    /// `mlx5dv_open_device(device, attr)`; `attr = None` passes NULL.
    fn open_device(&mut self, device: &str, attr: Option<&ContextAttr>) -> Result<ContextHandle>;

    /// `ibv_open_device(device)`: for an mlx5 device the provider asks for DEVX and silently
    /// falls back; for a VFIO device this opens a VFIO context.
    fn open_ibv_device(&mut self, device: &str) -> Result<ContextHandle>;

    /// `ibv_close_device`: every object still open on the context is destroyed with it.
    fn close_device(&mut self, ctx: ContextHandle) -> Result<()>;

    /// `mlx5dv_query_device` with `attrs_out->comp_mask = comp_mask`.
    fn query_device(&mut self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext>;

    /// `ibv_alloc_pd`.
    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle>;

    /// `ibv_dealloc_pd`.
    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()>;

    /// `mlx5dv_create_mkey`.
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey>;

    /// `mlx5dv_destroy_mkey`.
    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()>;

    /// `mlx5dv_mkey_check`.
    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr>;

    /// Simulator-only control, or `None` on hardware.
    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        None
    }
}
