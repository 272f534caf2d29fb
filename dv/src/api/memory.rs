//! Host memory and memory regions: backend-owned buffers, `ibv_reg_mr`, `ibv_dereg_mr`.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::handle::{BufHandle, MrHandle, PdHandle};

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
}
