//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_destroy_srq` and `ibv_post_srq_recv`; the family also holds the receive work queues
//! and their indirection tables (module `wq`). A QP created with [`crate::QpInitAttr::srq`]
//! takes its receive WQEs from the SRQ instead of a receive queue of its own.

use serde::{Deserialize, Serialize};

use super::queue::Qp;
use super::wq::{RwqIndTable, RwqIndTableInitAttr, Wq, WqAttr, WqInitAttr};
use super::wr::RecvWr;
use super::xrc::{QpOpenAttr, SrqXrc, Xrcd, XrcdInitAttr};
use crate::Sge;
use crate::errno::EOPNOTSUPP;
use crate::error::{Error, Op, Result};
use crate::handle::{CqHandle, PdHandle, SrqHandle};

/// `struct ibv_srq_init_attr` of a basic SRQ (`srq_limit` is ignored at creation, as the man
/// page says, so it is not modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqInitAttr {
    /// The protection domain.
    pub pd: PdHandle,
    /// `attr.max_wr`: receive WRs the SRQ must hold.
    pub max_wr: u32,
    /// `attr.max_sge`: SGEs per receive WR.
    pub max_sge: u32,
    /// `IBV_SRQT_XRC` (with `ibv_create_srq_ex`): the XRC domain and CQ; `None` for a basic
    /// SRQ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xrc: Option<SrqXrc>,
    /// `IBV_SRQT_TM` (with `ibv_create_srq_ex`): the CQ and `tm_cap`; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tm: Option<SrqTm>,
}

/// A tag-matching SRQ's part of `struct ibv_srq_init_attr_ex`: its CQ (`IBV_SRQ_INIT_ATTR_CQ`)
/// and `tm_cap` (`IBV_SRQ_INIT_ATTR_TM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqTm {
    /// The CQ the SRQ's tag-matching completions go to.
    pub cq: CqHandle,
    /// `tm_cap.max_num_tags`: the tags the matching list holds.
    pub max_num_tags: u32,
    /// `tm_cap.max_ops`: outstanding list operations.
    pub max_ops: u32,
}

/// `enum ibv_ops_flags`.
pub mod ops_flags {
    /// `IBV_OPS_SIGNALED`: the operation completes on the SRQ's CQ.
    pub const SIGNALED: u32 = 1 << 0;
    /// `IBV_OPS_TM_SYNC`: `unexpected_cnt` is the count of unexpected messages software
    /// handled.
    pub const TM_SYNC: u32 = 1 << 1;
}

/// What one `struct ibv_ops_wr` asks (its `opcode` and the fields that opcode reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SrqOpKind {
    /// `IBV_WR_TAG_ADD`: a tagged buffer; a message matches when `(tag ^ msg_tag) & mask` is 0.
    Add {
        /// `tm.add.recv_wr_id`: the `wr_id` of the buffer's receive completions.
        recv_wr_id: u64,
        /// `tm.add.sg_list` (at most one entry on mlx5).
        sge: Vec<Sge>,
        /// `tm.add.tag`.
        tag: u64,
        /// `tm.add.mask`.
        mask: u64,
    },
    /// `IBV_WR_TAG_DEL` of the entry `tm.handle` names.
    Del {
        /// `tm.handle` an ADD returned.
        handle: u32,
    },
    /// `IBV_WR_TAG_SYNC`: only the unexpected count.
    Sync,
}

/// `struct ibv_ops_wr`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqOpWr {
    /// `wr_id` of the operation's own completion.
    pub wr_id: u64,
    /// `flags` ([`ops_flags`]).
    pub flags: u32,
    /// `tm.unexpected_cnt`, read with [`ops_flags::TM_SYNC`].
    pub unexpected_cnt: u32,
    /// The opcode and its fields.
    pub op: SrqOpKind,
}

/// A created SRQ, with `attr` as the provider wrote it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Srq {
    /// The backend handle.
    pub handle: SrqHandle,
    /// The SRQ number (`ibv_get_srq_num`).
    pub srq_num: u32,
    /// `attr.max_wr` after creation: the WRs libmlx5 lets the program post.
    pub max_wr: u32,
    /// `attr.max_sge` after creation: the SGEs a WQE of the rounded stride holds.
    pub max_sge: u32,
}

/// `struct ibv_srq_attr`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqAttr {
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`: the low watermark that arms `IBV_EVENT_SRQ_LIMIT_REACHED` (0: disarmed).
    pub srq_limit: u32,
}

/// `enum ibv_srq_attr_mask`.
pub mod srq_attr_mask {
    /// `IBV_SRQ_MAX_WR`: resize (mlx5 refuses it).
    pub const MAX_WR: u32 = 1 << 0;
    /// `IBV_SRQ_LIMIT`: arm the limit event.
    pub const LIMIT: u32 = 1 << 1;
}

fn unsupported<T>(op: Op) -> Result<T> {
    Err(Error::new(op, EOPNOTSUPP, "this backend has no SRQs"))
}

/// Shared receive queues. Every method defaults to EOPNOTSUPP, for backends without them.
pub trait Srqs {
    /// `ibv_create_srq(pd, attr)`: `max_wr` and `max_sge` rounded as libmlx5 rounds them.
    fn create_srq(&mut self, attr: &SrqInitAttr) -> Result<Srq> {
        let _ = attr;
        unsupported(Op::CreateSrq)
    }

    /// `ibv_modify_srq(srq, attr, mask)` ([`srq_attr_mask`]).
    fn modify_srq(&mut self, srq: &Srq, attr: &SrqAttr, mask: u32) -> Result<()> {
        let _ = (srq, attr, mask);
        unsupported(Op::ModifySrq)
    }

    /// `ibv_query_srq`.
    fn query_srq(&mut self, srq: &Srq) -> Result<SrqAttr> {
        let _ = srq;
        unsupported(Op::QuerySrq)
    }

    /// `ibv_destroy_srq`: EBUSY while a QP uses it.
    fn destroy_srq(&mut self, srq: &Srq) -> Result<()> {
        let _ = srq;
        unsupported(Op::DestroySrq)
    }

    /// `ibv_post_srq_recv` of a list of receive WRs: the WRs before a failing one are posted;
    /// the error names the failing WR's index ([`crate::Error::bad_wr`]).
    fn post_srq_recv(&mut self, srq: &Srq, wrs: &[RecvWr]) -> Result<()> {
        let _ = (srq, wrs);
        unsupported(Op::PostSrqRecv)
    }

    /// `ibv_post_srq_ops` on a tag-matching SRQ: the `tm.handle` of each WR (its entry for an
    /// ADD, 0 otherwise). The WRs before a failing one are posted; the error names the
    /// failing WR's index ([`crate::Error::bad_wr`]).
    fn post_srq_ops(&mut self, srq: &Srq, ops: &[SrqOpWr]) -> Result<Vec<u32>> {
        let _ = (srq, ops);
        unsupported(Op::PostSrqOps)
    }

    /// `ibv_open_xrcd`: the domain of `attr.fd`'s inode (created with `O_CREAT`), or one of
    /// its own for fd -1.
    fn open_xrcd(&mut self, attr: &XrcdInitAttr) -> Result<Xrcd> {
        let _ = attr;
        unsupported(Op::OpenXrcd)
    }

    /// `ibv_close_xrcd`: EBUSY while an XRC SRQ or QP of this opening uses it.
    fn close_xrcd(&mut self, xrcd: &Xrcd) -> Result<()> {
        let _ = xrcd;
        unsupported(Op::CloseXrcd)
    }

    /// `ibv_open_qp`: a handle on a target QP of the domain; the QP lives while any handle
    /// on it does.
    fn open_qp(&mut self, attr: &QpOpenAttr) -> Result<Qp> {
        let _ = attr;
        unsupported(Op::OpenQp)
    }

    /// `ibv_create_wq`: a receive work queue in RESET (libmlx5's sizing, uverbs' and
    /// mlx5_ib's checks).
    fn create_wq(&mut self, attr: &WqInitAttr) -> Result<Wq> {
        let _ = attr;
        unsupported(Op::CreateWq)
    }

    /// `ibv_modify_wq`: a state change (RESET to RDY, RDY to ERR or RESET, ERR to RESET) and
    /// the CVLAN stripping flag.
    fn modify_wq(&mut self, wq: &Wq, attr: &WqAttr) -> Result<()> {
        let _ = (wq, attr);
        unsupported(Op::ModifyWq)
    }

    /// `ibv_destroy_wq`; EBUSY while an indirection table holds the WQ.
    fn destroy_wq(&mut self, wq: &Wq) -> Result<()> {
        let _ = wq;
        unsupported(Op::DestroyWq)
    }

    /// `ibv_post_wq_recv` of a list of receive WRs.
    fn post_wq_recv(&mut self, wq: &Wq, wrs: &[RecvWr]) -> Result<()> {
        let _ = (wq, wrs);
        unsupported(Op::PostWqRecv)
    }

    /// `ibv_create_rwq_ind_table`: `1 << log_ind_tbl_size` WQs an RSS QP spreads over.
    fn create_rwq_ind_table(&mut self, attr: &RwqIndTableInitAttr) -> Result<RwqIndTable> {
        let _ = attr;
        unsupported(Op::CreateRwqIndTable)
    }

    /// `ibv_destroy_rwq_ind_table`; EBUSY while an RSS QP uses the table.
    fn destroy_rwq_ind_table(&mut self, table: &RwqIndTable) -> Result<()> {
        let _ = table;
        unsupported(Op::DestroyRwqIndTable)
    }
}
