//! DEVX and VFIO: raw firmware commands (`mlx5dv_devx_general_cmd`), DEVX objects
//! (`mlx5dv_devx_obj_create/query/modify/destroy`), `mlx5dv_devx_query_eqn`, UARs, umems,
//! MSI vectors and event queues (`mlx5dv_devx_create_eq` / `destroy_eq`), with the doorbell
//! writes and eventfd reads a program does around them.
//!
//! A command's bytes are the PRM mailbox ([`crate::prm`]). When the firmware answers with a
//! bad status the call fails with EREMOTEIO and the error carries the output's `status` and
//! `syndrome` ([`crate::Error::cmd_status`]), the two fields the C API leaves valid.

use serde::{Deserialize, Serialize};

use super::memory::{AccessFlags, Buf};
use crate::error::Result;
use crate::handle::{
    ContextHandle, DevxObjHandle, EqHandle, MsiVectorHandle, PdHandle, QpHandle, UarHandle, UmemHandle,
};

/// `MLX5DV_UAR_ALLOC_TYPE_BF`: a UAR page with a BlueFlame register.
pub const MLX5DV_UAR_ALLOC_TYPE_BF: u32 = 0x0;
/// `MLX5DV_UAR_ALLOC_TYPE_NC`: the context's shared non-cached UAR page.
pub const MLX5DV_UAR_ALLOC_TYPE_NC: u32 = 0x1;
/// `MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED`: a non-cached UAR page of its own.
pub const MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED: u32 = 1 << 31;

/// `MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX`: a packet pacing entry of its own, never shared.
pub const MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX: u32 = 1 << 0;
/// `MLX5DV_VAR_ALLOC_FLAG_TLP`: a VAR of the TLP device emulation manager.
pub const MLX5DV_VAR_ALLOC_FLAG_TLP: u32 = 1 << 0;

/// A packet pacing entry (`struct mlx5dv_pp`): its index in the device's rate table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PpEntry {
    /// The context that allocated it.
    pub ctx: ContextHandle,
    /// The kernel object's handle.
    pub handle: u32,
    /// `index`: the rate table entry (from 1; 0 is the unlimited rate).
    pub index: u16,
}

/// A virtio access region (`struct mlx5dv_var`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Var {
    /// The context that allocated it.
    pub ctx: ContextHandle,
    /// The kernel object's handle.
    pub handle: u32,
    /// `page_id`: the doorbell page's index.
    pub page_id: u32,
    /// `length`: bytes to map.
    pub length: u32,
    /// `mmap_off`: the offset to map on the context's command fd.
    pub mmap_off: u64,
}

/// Offsets inside a UAR page.
pub mod uar_offset {
    /// CQ doorbell (`MLX5_CQ_DOORBELL`): a 64-bit write of `sn << 28 | cmd | ci` and the CQN.
    pub const CQ_DOORBELL: u32 = 0x20;
    /// EQ doorbell, arm (`MLX5_EQ_DOORBEL_OFFSET`): a BE32 `ci & 0xffffff | eqn << 24`.
    pub const EQ_ARM: u32 = 0x40;
    /// EQ doorbell, update the consumer index without arming.
    pub const EQ_UPDATE: u32 = 0x48;
    /// The BlueFlame / send doorbell register (`MLX5_BF_OFFSET`), `reg_addr`.
    pub const BF: u32 = 0x800;
}

/// An object made by `mlx5dv_devx_obj_create`, with the output mailbox of its command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevxObj {
    /// The backend handle (`struct mlx5dv_devx_obj *`).
    pub handle: DevxObjHandle,
    /// The create command's output mailbox.
    pub out: Vec<u8>,
}

/// A UAR page (`struct mlx5dv_devx_uar`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevxUar {
    /// The backend handle.
    pub handle: UarHandle,
    /// `page_id`: the UAR number commands name (`uar_page` of an EQ or CQ context).
    pub page_id: u32,
    /// `reg_addr - base_addr`: where the send doorbell register sits in the page (0x800).
    pub reg_offset: u32,
}

/// A registered user memory (`struct mlx5dv_devx_umem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevxUmem {
    /// The backend handle.
    pub handle: UmemHandle,
    /// `umem_id`: what commands name the memory by.
    pub umem_id: u32,
}

/// An MSI-X vector of a VFIO context (`struct mlx5dv_devx_msi_vector`). `vector` and `fd`
/// are what `mlx5dv_devx_free_msi_vector` checks; a caller may change them before freeing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsiVector {
    /// The backend handle.
    pub handle: MsiVectorHandle,
    /// `vector`: the MSI-X vector, the `eqc.intr` of an EQ that signals it.
    pub vector: i32,
    /// `fd`: the eventfd the vector signals (non-blocking).
    pub fd: i32,
}

/// An event queue made by `mlx5dv_devx_create_eq` (`struct mlx5dv_devx_eq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevxEq {
    /// The backend handle.
    pub handle: EqHandle,
    /// `vaddr`: the EQ ring the driver allocated, readable and writable through
    /// [`crate::Memory::read_buf`] / [`crate::Memory::write_buf`]. It is not initialised: the
    /// caller sets each EQE's owner bit before arming.
    pub ring: Buf,
    /// The CREATE_EQ output mailbox (`eq_number` at bits 0x58/8).
    pub out: Vec<u8>,
}

/// DEVX commands and objects, UARs, umems, and the VFIO provider's MSI vectors and EQs.
///
/// Kernel contexts answer the VFIO-only calls (`alloc_msi_vector`, `free_msi_vector`,
/// `create_eq`, `destroy_eq`) with EOPNOTSUPP; a context of another provider answers every
/// call so.
pub trait Devx {
    /// `mlx5dv_devx_general_cmd(ctx, in, inlen, out, outlen)`: the output mailbox of
    /// `out_len` bytes.
    fn devx_general_cmd(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>>;

    /// `mlx5dv_devx_obj_create`: run a create command and keep the object it made, to be
    /// destroyed with the matching destroy command.
    fn devx_obj_create(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxObj>;

    /// `mlx5dv_devx_obj_query`: a query command about the object.
    fn devx_obj_query(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>>;

    /// `mlx5dv_devx_obj_modify`: a modify command on the object.
    fn devx_obj_modify(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>>;

    /// `mlx5dv_devx_obj_destroy`: the destroy command the create command implies.
    fn devx_obj_destroy(&mut self, obj: DevxObjHandle) -> Result<()>;

    /// `mlx5dv_init_obj(MLX5DV_OBJ_PD)`: the PD number (`pdn`) raw commands name a verbs PD by.
    fn devx_pd_number(&mut self, pd: PdHandle) -> Result<u32>;

    /// `mlx5dv_devx_query_eqn(ctx, vector, &eqn)`: the EQ number behind a completion vector.
    fn devx_query_eqn(&mut self, ctx: ContextHandle, vector: u32) -> Result<u32>;

    /// `mlx5dv_reserved_qpn_alloc(ctx, &qpn)`: a QP number no QP takes, from a RESERVED_QPN
    /// general object (libmlx5 makes one per `log_reserved_qpn_granularity` numbers).
    fn reserved_qpn_alloc(&mut self, ctx: ContextHandle) -> Result<u32>;

    /// `mlx5dv_reserved_qpn_dealloc(ctx, qpn)`: give a reserved number back; EINVAL for one
    /// not handed out (or given back already).
    fn reserved_qpn_dealloc(&mut self, ctx: ContextHandle, qpn: u32) -> Result<()>;

    /// `mlx5dv_pp_alloc(ctx, len, pp_context, flags)`: an entry of the device's packet pacing
    /// rate table for the `set_pp_rate_limit_context` bytes `pp_context`.
    fn pp_alloc(&mut self, ctx: ContextHandle, pp_context: &[u8], flags: u32) -> Result<PpEntry>;

    /// `mlx5dv_pp_free` (void in C; only a stale entry fails, with EINVAL).
    fn pp_free(&mut self, pp: &PpEntry) -> Result<()>;

    /// `mlx5dv_alloc_var(ctx, flags)`: a doorbell page of the virtio emulation BAR.
    fn alloc_var(&mut self, ctx: ContextHandle, flags: u32) -> Result<Var>;

    /// `mlx5dv_free_var` (void in C; only a stale VAR fails, with EINVAL).
    fn free_var(&mut self, var: &Var) -> Result<()>;

    /// `mlx5dv_query_qp_lag_port(qp, &port, &active)`: the QP's configured and active LAG
    /// ports.
    fn query_qp_lag_port(&mut self, qp: QpHandle) -> Result<(u8, u8)>;

    /// `mlx5dv_modify_qp_lag_port(qp, port)`.
    fn modify_qp_lag_port(&mut self, qp: QpHandle, port: u8) -> Result<()>;

    /// `mlx5dv_devx_alloc_uar(ctx, flags)` ([`MLX5DV_UAR_ALLOC_TYPE_BF`], `_NC`,
    /// `_NC_DEDICATED`).
    fn devx_alloc_uar(&mut self, ctx: ContextHandle, flags: u32) -> Result<DevxUar>;

    /// `mlx5dv_devx_free_uar` (void in C; only a stale handle fails, with EINVAL).
    fn devx_free_uar(&mut self, uar: &DevxUar) -> Result<()>;

    /// A 4- or 8-byte store into the UAR page at `offset` (`mmio_write32_be` /
    /// `mmio_write64_be` of `value`'s bytes as given): EQ, CQ and send doorbells.
    fn devx_uar_write(&mut self, uar: &DevxUar, offset: u32, value: &[u8]) -> Result<()>;

    /// `mlx5dv_devx_umem_reg(ctx, addr, size, access)`: `[addr, addr + size)` must lie in one
    /// backend buffer.
    fn devx_umem_reg(&mut self, ctx: ContextHandle, addr: u64, size: u64, access: AccessFlags) -> Result<DevxUmem>;

    /// `mlx5dv_devx_umem_dereg`.
    fn devx_umem_dereg(&mut self, umem: &DevxUmem) -> Result<()>;

    /// `mlx5dv_devx_alloc_msi_vector(ctx)`: the first free vector from 1 up (vector 0 is the
    /// driver's command EQ), with a fresh eventfd; ENOSPC when every vector is taken.
    fn devx_alloc_msi_vector(&mut self, ctx: ContextHandle) -> Result<MsiVector>;

    /// `mlx5dv_devx_free_msi_vector`: EINVAL when `vector` is out of range or 0, or `fd` is
    /// not the vector's eventfd.
    fn devx_free_msi_vector(&mut self, msi: &MsiVector) -> Result<()>;

    /// `read(msi.fd, &counter, 8)` on the vector's eventfd: the number of interrupts since the
    /// last read, which the read resets; EAGAIN when there were none.
    fn devx_msi_vector_read(&mut self, msi: &MsiVector) -> Result<u64>;

    /// `mlx5dv_devx_create_eq(ctx, in, inlen, out, outlen)`: the driver adds the page size and
    /// the ring's one PAS entry to `input` and runs CREATE_EQ.
    fn devx_create_eq(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxEq>;

    /// `mlx5dv_devx_destroy_eq`: a bad DESTROY_EQ status is the mapped errno, not EREMOTEIO.
    fn devx_destroy_eq(&mut self, eq: &DevxEq) -> Result<()>;
}
