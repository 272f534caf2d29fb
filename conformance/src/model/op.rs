//! The vocabulary of the model's sequences: the ops (calls on slots, WR chains, scenarios on
//! objects of their own), what their WRs and SGEs name, and what each call must answer.

use serde::{Deserialize, Serialize};

use super::{AtomicOp, CryptoOp, MwOp, NetOp, SigOp, SrqOp, UcOp, UdOp, XrcOp};

/// A memory key an SGE or a remote address names: an MR's, an mkey's, or a key no object has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Key {
    /// MR slot; addresses are `mr.addr + off`.
    Mr(usize),
    /// Mkey slot with this tag in the key's low byte; addresses are offsets (layouts are
    /// zero-based, item 30).
    Mkey(usize, u8),
    /// A key of no object (`0xdeadbe00`).
    Bogus,
}

/// `len` bytes at `off` of what `key` names.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loc {
    pub key: Key,
    pub off: u32,
    pub len: u32,
}

/// One entry of a list layout: `len` bytes at `off` of MR slot `mr`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ent {
    pub mr: usize,
    pub off: u32,
    pub len: u32,
}

/// One entry of an interleaved layout, at `off` of MR slot `mr`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IEnt {
    pub mr: usize,
    pub off: u32,
    pub count: u32,
    pub skip: u32,
}

/// One call of an `ibv_wr_start … ibv_wr_complete` chain.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wr {
    /// `ibv_wr_rdma_write` of `local` (and `more`) to `roff` of `remote` on the peer.
    Write { local: Loc, more: Option<Loc>, remote: Key, roff: u32, signaled: bool },
    /// `ibv_wr_rdma_read` into `local` (and `more`).
    Read { local: Loc, more: Option<Loc>, remote: Key, roff: u32, signaled: bool },
    /// `ibv_wr_send` of `local` (and `more`).
    Send { local: Loc, more: Option<Loc>, signaled: bool },
    /// `mlx5dv_wr_mkey_configure` of mkey slot `mkey`, `tag` in the low byte of its keys
    /// (item 24).
    Configure { mkey: usize, tag: u8, setters: u8, conf_flags: u32, inline: bool, signaled: bool },
    /// `mlx5dv_wr_set_mkey_access_flags`.
    Access(u32),
    /// `mlx5dv_wr_set_mkey_layout_list` of the first `n` entries.
    List { n: u8, e: [Ent; 4] },
    /// `mlx5dv_wr_set_mkey_layout_interleaved` of the first `n` entries.
    Interleaved { repeat: u32, n: u8, e: [IEnt; 3] },
    /// `ibv_wr_rdma_write_imm`: a write that also consumes a receive of the peer.
    WriteImm { local: Loc, remote: Key, roff: u32, imm: u32, signaled: bool },
    /// `ibv_wr_send_imm`.
    SendImm { local: Loc, imm: u32, signaled: bool },
    /// `ibv_wr_send_inv` naming the peer's mkey slot `mkey` with `tag` (items 73, 84).
    SendInv { local: Loc, mkey: usize, tag: u8, signaled: bool },
    /// `ibv_wr_local_inv` of mkey slot `mkey`'s key with `tag` (item 72).
    LocalInv { mkey: usize, tag: u8, signaled: bool },
    /// `ibv_wr_atomic_cmp_swp` (`cas`: swap `value` in where the 8 bytes equal `compare`) or
    /// `ibv_wr_atomic_fetch_add` (add `value`) at `roff` of `remote`, the original value
    /// scattered to `local` (items 121–126).
    Atomic { local: Loc, remote: Key, roff: u32, cas: bool, compare: u64, value: u64, signaled: bool },
    /// `mlx5dv_wr_mr_list`: a configure with two setters.
    MrList { mkey: usize, access: u32, n: u8, e: [Ent; 4], inline: bool, signaled: bool },
    /// `mlx5dv_wr_mr_interleaved`: a configure with two setters.
    MrInterleaved { mkey: usize, access: u32, repeat: u32, n: u8, e: [IEnt; 3], inline: bool, signaled: bool },
}

/// A state an `ibv_modify_qp` moves a QP to, with the attributes the move carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// RESET.
    Reset,
    /// INIT, granting LOCAL_WRITE, REMOTE_WRITE and REMOTE_READ.
    Init,
    /// RTR towards QP slot `peer`'s number and port address; `None`: without them.
    Rtr(Option<usize>),
    /// RTS.
    Rts,
    /// ERR.
    Err,
}

/// One step of a sequence; `ctx`, `pd`, `mkey`, `buf`, `mr`, `cq`, `qp` are slots, `dev` an
/// index into the device list.
#[allow(missing_docs)] // the fields are the C call's arguments
#[allow(clippy::large_enum_variant)] // plain Copy data; a sequence holds a few hundred at most
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `ibv_open_device` of device `dev` of the device list (modulo its length).
    OpenIbv { dev: usize },
    /// `mlx5dv_open_device(dev, {flags: DEVX})`.
    OpenDevx { dev: usize },
    /// `ibv_close_device` of context slot `ctx`.
    Close { ctx: usize },
    /// `mlx5dv_query_device(ctx, comp_mask)`.
    QueryDevice { ctx: usize, comp_mask: u64 },
    /// `ibv_alloc_pd`.
    AllocPd { ctx: usize },
    /// `ibv_dealloc_pd`.
    DeallocPd { pd: usize },
    /// `mlx5dv_create_mkey(pd, flags, max_entries)`.
    CreateMkey { pd: usize, flags: u32, max_entries: u16 },
    /// `mlx5dv_destroy_mkey`.
    DestroyMkey { mkey: usize },
    /// `ibv_create_cq(ctx, cqe)`.
    CreateCq { ctx: usize, cqe: u32 },
    /// `ibv_destroy_cq`.
    DestroyCq { cq: usize },
    /// Allocate a buffer of `len` bytes.
    AllocBuf { len: usize },
    /// Free buffer slot `buf`.
    FreeBuf { buf: usize },
    /// Fill buffer slot `buf` with a pattern that depends on `seed`.
    FillBuf { buf: usize, seed: u8 },
    /// `ibv_reg_mr(pd, buf.addr + off, len, access)`.
    RegMr { pd: usize, buf: usize, off: u32, len: u32, access: u32 },
    /// `ibv_dereg_mr`.
    DeregMr { mr: usize },
    /// `mlx5dv_create_qp`: an RC QP on `pd`, both queues on `cq`, the mkey send ops, `wr` send
    /// WRs of `sge` SGEs and `inline` inline bytes, 8 receive WRs of 2 SGEs.
    CreateQp { pd: usize, cq: usize, wr: u32, sge: u32, inline: u32 },
    /// `ibv_modify_qp` to `to`.
    ModifyQp { qp: usize, to: Target },
    /// INIT, RTR towards `peer`, RTS: three `ibv_modify_qp`, stopping at the first failure.
    Connect { qp: usize, peer: usize },
    /// `ibv_query_qp` of the state.
    QueryQp { qp: usize },
    /// `ibv_destroy_qp`.
    DestroyQp { qp: usize },
    /// `ibv_post_recv` of one WR with no SGE or with one.
    PostRecv { qp: usize, sge: Option<Loc> },
    /// One chain of the first `n` WRs, then `ibv_wr_complete`.
    Post { qp: usize, n: u8, wrs: [Wr; 3] },
    /// A signature scenario on objects of its own ([`SigOp`]).
    Sig(SigOp),
    /// A crypto scenario on objects of its own ([`CryptoOp`]).
    Crypto(CryptoOp),
    /// A network scenario on objects of its own: traffic between two devices under fault
    /// rules ([`NetOp`]).
    Net(NetOp),
    /// An atomics scenario on objects of its own ([`AtomicOp`]).
    Atomic(AtomicOp),
    /// A memory-window scenario on objects of its own ([`MwOp`]).
    Mw(MwOp),
    /// A datagram scenario on objects of its own ([`UdOp`]).
    Ud(UdOp),
    /// A shared-receive scenario on objects of its own ([`SrqOp`]).
    Srq(SrqOp),
    /// A UC scenario on objects of its own ([`UcOp`]).
    Uc(UcOp),
    /// An XRC scenario on objects of its own ([`XrcOp`]).
    Xrc(XrcOp),
}

/// What a call must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Success; for `CreateMkey` the written-back `max_entries`, for `QueryDevice` the output
    /// `comp_mask`, for `CreateCq` the CQ's `cqe`, for `CreateQp` `max_send_wr << 32 |
    /// max_inline_data << 8 | max_recv_sge`, for `QueryQp` the state.
    Ok(Option<u64>),
    /// Failure with this errno.
    Errno(i32),
    /// Neither docs/behaviour.md nor rdma-core decide; never generated.
    Unknown,
}
