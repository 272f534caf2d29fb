//! Host memory and memory regions: backend-owned buffers, `ibv_reg_mr`, `ibv_dereg_mr`, and
//! dma-buf memory: an exporter, `ibv_reg_dmabuf_mr`, `mlx5dv_reg_dmabuf_mr` and
//! `mlx5dv_get_data_direct_sysfs_path`; memory windows (`ibv_alloc_mw`, `ibv_dealloc_mw`).

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::handle::{BufHandle, ContextHandle, DmHandle, MrHandle, MwHandle, PdHandle};

/// A backend-owned, page-aligned buffer; `addr` is the virtual address SGEs and MRs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buf {
    /// The backend handle.
    pub handle: BufHandle,
    /// Virtual address of byte 0 (page-aligned).
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
}

bitflags! {
    /// `enum ibv_access_flags`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct AccessFlags: u32 {
        /// `IBV_ACCESS_LOCAL_WRITE`.
        const LOCAL_WRITE = 1 << 0;
        /// `IBV_ACCESS_REMOTE_WRITE`.
        const REMOTE_WRITE = 1 << 1;
        /// `IBV_ACCESS_REMOTE_READ`.
        const REMOTE_READ = 1 << 2;
        /// `IBV_ACCESS_REMOTE_ATOMIC`.
        const REMOTE_ATOMIC = 1 << 3;
        /// `IBV_ACCESS_MW_BIND`.
        const MW_BIND = 1 << 4;
        /// `IBV_ACCESS_ZERO_BASED`.
        const ZERO_BASED = 1 << 5;
        /// `IBV_ACCESS_ON_DEMAND`.
        const ON_DEMAND = 1 << 6;
        /// `IBV_ACCESS_HUGETLB`.
        const HUGETLB = 1 << 7;
        /// `IBV_ACCESS_RELAXED_ORDERING`.
        const RELAXED_ORDERING = 1 << 20;
    }
}

/// A registered memory region (`struct ibv_mr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mr {
    /// The backend handle.
    pub handle: MrHandle,
    /// `mr->lkey`.
    pub lkey: u32,
    /// `mr->rkey`.
    pub rkey: u32,
    /// `mr->addr`.
    pub addr: u64,
    /// `mr->length`.
    pub length: u64,
}

bitflags! {
    /// `enum ibv_rereg_mr_flags`: what [`Memory::rereg_mr`] changes.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct ReregFlags: u32 {
        /// `IBV_REREG_MR_CHANGE_TRANSLATION`: a new address and length.
        const CHANGE_TRANSLATION = 1 << 0;
        /// `IBV_REREG_MR_CHANGE_PD`: a new protection domain.
        const CHANGE_PD = 1 << 1;
        /// `IBV_REREG_MR_CHANGE_ACCESS`: new access flags.
        const CHANGE_ACCESS = 1 << 2;
    }
}

impl ReregFlags {
    /// libibverbs' own checks of `ibv_rereg_mr`'s arguments, made before the provider's call
    /// (a failure there is `IBV_REREG_MR_ERR_INPUT` with errno EINVAL): no unknown flag, an
    /// address and a length with `CHANGE_TRANSLATION`, no access bits without `CHANGE_ACCESS`.
    pub fn check_input(bits: u32, addr: u64, length: u64, access: AccessFlags) -> std::result::Result<Self, String> {
        let flags = ReregFlags::from_bits(bits).ok_or_else(|| format!("unknown rereg flags 0x{bits:x}"))?;
        if flags.contains(ReregFlags::CHANGE_TRANSLATION) && (addr == 0 || length == 0) {
            return Err("CHANGE_TRANSLATION needs an address and a length".into());
        }
        if !access.is_empty() && !flags.contains(ReregFlags::CHANGE_ACCESS) {
            return Err("access flags given without CHANGE_ACCESS".into());
        }
        Ok(flags)
    }
}

/// `MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT`: the MR is reached through the data-direct engine
/// bonded with the RDMA device.
pub const MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT: u32 = 1 << 0;

/// A dma-buf exported over host memory: the fd an importer is given, and the exporter's own
/// CPU mapping of the same bytes (`buf`, for [`Memory::write_buf`] / [`Memory::read_buf`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DmaBuf {
    /// The dma-buf file descriptor.
    pub fd: i32,
    /// The exporter's mapping: byte `i` of the dma-buf is byte `i` of this buffer.
    pub buf: Buf,
}

/// Device memory (`struct ibv_dm`): MEMIC bytes on the NIC, from [`Memory::alloc_dm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dm {
    /// The backend handle.
    pub handle: DmHandle,
    /// The length asked for (what `ibv_memcpy_*_dm` bounds check against).
    pub length: u64,
}

/// The access flags libmlx5 lets `ibv_reg_dm_mr` pass on (`MLX5_DM_ALLOWED_ACCESS`, with
/// `IBV_ACCESS_OPTIONAL_RANGE`); any other bit is EINVAL.
pub const DM_ALLOWED_ACCESS: u32 = AccessFlags::LOCAL_WRITE.bits()
    | AccessFlags::REMOTE_WRITE.bits()
    | AccessFlags::REMOTE_READ.bits()
    | AccessFlags::REMOTE_ATOMIC.bits()
    | AccessFlags::ZERO_BASED.bits()
    | 0x3ff0_0000;

/// `IBV_MW_TYPE_1`: bound with `ibv_bind_mw`, tied to its PD.
pub const MW_TYPE_1: u32 = 1;
/// `IBV_MW_TYPE_2`: bound by a send WR, tied to the QP that bound it.
pub const MW_TYPE_2: u32 = 2;

/// A memory window (`struct ibv_mw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mw {
    /// The backend handle.
    pub handle: MwHandle,
    /// `mw->rkey`: the key a bind changes the low byte of.
    pub rkey: u32,
    /// `mw->type` ([`MW_TYPE_1`] or [`MW_TYPE_2`]).
    pub mw_type: u32,
}

/// `struct ibv_mw_bind_info`: the part of an MR the window exposes, and its rights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MwBindInfo {
    /// `mr`: the region bound to (`None` is a NULL pointer).
    pub mr: Option<Mr>,
    /// `addr`: where the window starts, a virtual address of the MR.
    pub addr: u64,
    /// `length`: 0 unbinds the window.
    pub length: u64,
    /// `mw_access_flags`.
    pub access: AccessFlags,
}

/// `ibv_inc_rkey`: the key with its low byte (the tag) one more, wrapping.
pub fn inc_rkey(rkey: u32) -> u32 {
    let tag = ((rkey & 0xff) + 1) & 0xff;
    (rkey & 0xffff_ff00) | tag
}

/// Host memory the backend owns, and memory regions over it.
pub trait Memory {
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

    /// `ibv_advise_mr(pd, advice, flags, sg_list)`: prefetch the pages of ODP MRs
    /// ([`crate::advise`] values); the errno is the call's return value.
    fn advise_mr(&mut self, pd: PdHandle, advice: u32, flags: u32, sges: &[crate::Sge]) -> Result<()>;

    /// `ibv_rereg_mr(mr, flags, pd, addr, length, access)`: the MR as it is afterwards (the
    /// same handle; its keys may change). `pd` is read with [`ReregFlags::CHANGE_PD`] only,
    /// `addr` and `length` with `CHANGE_TRANSLATION`, `access` with `CHANGE_ACCESS`. Flags
    /// are `enum ibv_rereg_mr_flags` bits, checked as libibverbs does
    /// ([`ReregFlags::check_input`]).
    fn rereg_mr(
        &mut self,
        mr: &Mr,
        flags: u32,
        pd: Option<PdHandle>,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr>;

    /// Export `len` zeroed bytes of host memory as a dma-buf (on a real host a udmabuf over a
    /// memfd; EOPNOTSUPP without `/dev/udmabuf`).
    fn alloc_dmabuf(&mut self, len: usize) -> Result<DmaBuf>;

    /// Close an exported dma-buf and free its memory; EBUSY while an MR imports it.
    fn free_dmabuf(&mut self, dmabuf: &DmaBuf) -> Result<()>;

    /// `ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access)`: `length` bytes at `offset`
    /// of the dma-buf `fd`, addressed from `iova`. The MR's `addr` is `offset`.
    fn reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: AccessFlags,
    ) -> Result<Mr>;

    /// `mlx5dv_reg_dmabuf_mr`: as [`Memory::reg_dmabuf_mr`] plus the driver's `mlx5_access`
    /// ([`MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT`]); rdma-core 55 and later.
    #[allow(clippy::too_many_arguments)] // the C signature
    fn dv_reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: AccessFlags,
        mlx5_access: u32,
    ) -> Result<Mr>;

    /// `mlx5dv_get_data_direct_sysfs_path(ctx, buf, buf_len)`: the path (without `/sys/`) of
    /// the data-direct device; ENODEV without one, ENOSPC when `buf_len` cannot hold it and
    /// its NUL.
    fn get_data_direct_sysfs_path(&mut self, ctx: ContextHandle, buf_len: usize) -> Result<String>;

    /// `ibv_alloc_dm(ctx, {length, log_align_req})`: MEMIC device memory (libmlx5: EINVAL past
    /// `max_dm_size`; the kernel: EOPNOTSUPP without MEMIC, ENOMEM when it is full).
    fn alloc_dm(&mut self, ctx: ContextHandle, length: u64, log_align_req: u32) -> Result<Dm>;

    /// `ibv_free_dm`: EBUSY while an MR is registered over it.
    fn free_dm(&mut self, dm: &Dm) -> Result<()>;

    /// `ibv_memcpy_to_dm(dm, offset, data)`: EFAULT past the DM's length, then EINVAL when the
    /// offset or the length is not a multiple of 4.
    fn memcpy_to_dm(&mut self, dm: &Dm, offset: u64, data: &[u8]) -> Result<()>;

    /// `ibv_memcpy_from_dm(dm, offset, len)`: the bytes, with the errors of
    /// [`Memory::memcpy_to_dm`].
    fn memcpy_from_dm(&mut self, dm: &Dm, offset: u64, len: usize) -> Result<Vec<u8>>;

    /// `ibv_reg_dm_mr(pd, dm, offset, length, access)`: a zero-based MR over `length` bytes of
    /// the DM from `offset` (`access` must hold `IBV_ACCESS_ZERO_BASED`; its `addr` is 0).
    fn reg_dm_mr(&mut self, pd: PdHandle, dm: &Dm, offset: u64, length: u64, access: AccessFlags) -> Result<Mr>;

    /// `ibv_alloc_mw(pd, type)`: a window of type 1 or 2, unbound.
    fn alloc_mw(&mut self, pd: PdHandle, mw_type: u32) -> Result<Mw>;

    /// `ibv_dealloc_mw`.
    fn dealloc_mw(&mut self, mw: &Mw) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inc_rkey_wraps_the_tag_only() {
        assert_eq!(inc_rkey(0x1234_56fe), 0x1234_56ff);
        assert_eq!(inc_rkey(0x1234_56ff), 0x1234_5600);
    }
}
