//! The [`Backend`] trait: the mlx5dv API, one method per C call.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::handle::{ContextHandle, PdHandle};
use crate::types::{ContextAttr, DeviceDesc, DvContext, Mkey, MkeyErr, MkeyInitAttr};
use crate::verbs::{AccessFlags, AsyncEvent, Buf, Cq, Mr, Qp, QpInitAttr, QpModify, QpState, RecvWr, Wc, WrOp};

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

/// One send WQE as the provider wrote it (simulator only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WqeRecord {
    /// The QP it was posted on.
    pub qp_num: u32,
    /// `MLX5_OPCODE_*` (0x08 RDMA_WRITE, 0x0a SEND, 0x10 RDMA_READ, 0x25 UMR, …).
    pub opcode: u8,
    /// The ctrl segment carries `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE`.
    pub small_fence: bool,
    /// The ctrl segment asks for a CQE.
    pub signaled: bool,
    /// For SET_PSV: the transient signature written into the PSV.
    pub transient_signature: Option<u64>,
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

/// Device-level access that only a simulator offers: fault injection, the command log, and
/// a view of the WQEs the provider builds.
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
    /// Start or stop recording the send WQEs the provider posts.
    fn record_wqes(&mut self, on: bool);
    /// Return the recorded WQEs, oldest first, and forget them.
    fn take_wqes(&mut self) -> Vec<WqeRecord>;
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

    /// Allocate a zeroed, page-aligned buffer of host memory owned by the backend.
    fn alloc_buf(&mut self, len: usize) -> Result<Buf>;

    /// Free a buffer; EBUSY while an MR still covers it.
    fn free_buf(&mut self, buf: &Buf) -> Result<()>;

    /// Copy `data` into the buffer at `offset`; EINVAL past its end.
    fn write_buf(&mut self, buf: &Buf, offset: usize, data: &[u8]) -> Result<()>;

    /// Read `len` bytes of the buffer at `offset`; EINVAL past its end.
    fn read_buf(&mut self, buf: &Buf, offset: usize, len: usize) -> Result<Vec<u8>>;

    /// `ibv_reg_mr(pd, addr, length, access)`; the range must lie inside one buffer.
    fn reg_mr(&mut self, pd: PdHandle, addr: u64, length: u64, access: AccessFlags) -> Result<Mr>;

    /// `ibv_dereg_mr`.
    fn dereg_mr(&mut self, mr: &Mr) -> Result<()>;

    /// `ibv_create_cq(ctx, cqe, …)`; the result carries the rounded capacity.
    fn create_cq(&mut self, ctx: ContextHandle, cqe: u32) -> Result<Cq>;

    /// `ibv_destroy_cq`; EBUSY while a QP uses it.
    fn destroy_cq(&mut self, cq: &Cq) -> Result<()>;

    /// `ibv_poll_cq`: up to `max` completions, oldest first.
    fn poll_cq(&mut self, cq: &Cq, max: usize) -> Result<Vec<Wc>>;

    /// `mlx5dv_create_qp` (or `ibv_create_qp_ex` when `attr.dv` is `None`).
    fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp>;

    /// `ibv_modify_qp` to a new state; the backend supplies path, PSNs and timers.
    fn modify_qp(&mut self, qp: &Qp, attr: &QpModify) -> Result<()>;

    /// `ibv_query_qp` for the current state.
    fn query_qp_state(&mut self, qp: &Qp) -> Result<QpState>;

    /// `ibv_destroy_qp`.
    fn destroy_qp(&mut self, qp: &Qp) -> Result<()>;

    /// One `ibv_wr_start`, the calls of `ops` in order, then `ibv_wr_complete`, whose result
    /// this returns.
    fn post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()>;

    /// `ibv_post_recv` of a list of receive WRs.
    fn post_recv(&mut self, qp: &Qp, wrs: &[RecvWr]) -> Result<()>;

    /// `mlx5dv_qp_cancel_posted_send_wrs`: turn the not-yet-executed WRs with `wr_id` of a QP
    /// in SQD into NOPs (they still complete); the number cancelled.
    fn cancel_posted_send_wrs(&mut self, qp: &Qp, wr_id: u64) -> Result<u32>;

    /// The next asynchronous event of the context, without blocking.
    fn get_async_event(&mut self, ctx: ContextHandle) -> Result<Option<AsyncEvent>>;

    /// Simulator-only control, or `None` on hardware.
    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        None
    }
}
