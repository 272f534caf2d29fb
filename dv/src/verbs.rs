//! Data-path types: memory, MRs, CQs, QPs, work requests and completions, with the C values
//! of `verbs.h` and `mlx5dv.h`.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use crate::handle::{BufHandle, CqHandle, MrHandle, PdHandle, QpHandle};
use crate::types::Mkey;

/// A backend-owned, page-aligned buffer; `addr` is the virtual address SGEs and MRs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// `struct ibv_sge`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sge {
    /// Address: a virtual address for an MR, an offset for a zero-based (indirect) mkey.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The local key.
    pub lkey: u32,
}

/// `struct mlx5dv_mr_interleaved`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MrInterleaved {
    /// Start address of this entry's first repetition.
    pub addr: u64,
    /// Bytes taken per repetition.
    pub bytes_count: u32,
    /// Bytes skipped after each repetition.
    pub bytes_skip: u32,
    /// Key of the memory the entry points into.
    pub lkey: u32,
}

/// A completion queue (`struct ibv_cq`); `cqe` is the capacity the provider gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cq {
    /// The backend handle.
    pub handle: CqHandle,
    /// `cq->cqe`: the number of entries, rounded as the provider rounds it.
    pub cqe: u32,
}

/// `enum ibv_qp_type` values.
pub mod qp_type {
    /// `IBV_QPT_RC`.
    pub const RC: u32 = 2;
    /// `IBV_QPT_UC`.
    pub const UC: u32 = 3;
    /// `IBV_QPT_UD`.
    pub const UD: u32 = 4;
    /// `IBV_QPT_RAW_PACKET`.
    pub const RAW_PACKET: u32 = 8;
    /// `IBV_QPT_XRC_SEND`.
    pub const XRC_SEND: u32 = 9;
    /// `IBV_QPT_DRIVER`.
    pub const DRIVER: u32 = 0xff;
}

/// `enum ibv_qp_create_send_ops_flags` (`IBV_QP_EX_WITH_*`).
pub mod send_ops {
    /// `IBV_QP_EX_WITH_RDMA_WRITE`.
    pub const RDMA_WRITE: u64 = 1 << 0;
    /// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
    pub const RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
    /// `IBV_QP_EX_WITH_SEND`.
    pub const SEND: u64 = 1 << 2;
    /// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
    pub const SEND_WITH_IMM: u64 = 1 << 3;
    /// `IBV_QP_EX_WITH_RDMA_READ`.
    pub const RDMA_READ: u64 = 1 << 4;
    /// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
    pub const ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
    /// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
    pub const ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
    /// `IBV_QP_EX_WITH_LOCAL_INV`.
    pub const LOCAL_INV: u64 = 1 << 7;
    /// `IBV_QP_EX_WITH_BIND_MW`.
    pub const BIND_MW: u64 = 1 << 8;
    /// `IBV_QP_EX_WITH_SEND_WITH_INV`.
    pub const SEND_WITH_INV: u64 = 1 << 9;
    /// `IBV_QP_EX_WITH_TSO`.
    pub const TSO: u64 = 1 << 10;
    /// The operations this API posts on RC QPs.
    pub const RC_DEFAULT: u64 =
        RDMA_WRITE | RDMA_WRITE_WITH_IMM | SEND | SEND_WITH_IMM | RDMA_READ | LOCAL_INV | SEND_WITH_INV;
}

/// `mlx5dv_qp_init_attr` masks and flags.
pub mod dv_qp {
    /// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`.
    pub const MASK_QP_CREATE_FLAGS: u64 = 1 << 0;
    /// `MLX5DV_QP_INIT_ATTR_MASK_DC`.
    pub const MASK_DC: u64 = 1 << 1;
    /// `MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`.
    pub const MASK_SEND_OPS_FLAGS: u64 = 1 << 2;
    /// `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`.
    pub const MASK_DCI_STREAMS: u64 = 1 << 3;
    /// `MLX5DV_QP_CREATE_TUNNEL_OFFLOADS`.
    pub const CREATE_TUNNEL_OFFLOADS: u32 = 1 << 0;
    /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC`.
    pub const CREATE_TIR_ALLOW_SELF_LOOPBACK_UC: u32 = 1 << 1;
    /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC`.
    pub const CREATE_TIR_ALLOW_SELF_LOOPBACK_MC: u32 = 1 << 2;
    /// `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`.
    pub const CREATE_DISABLE_SCATTER_TO_CQE: u32 = 1 << 3;
    /// `MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE`.
    pub const CREATE_ALLOW_SCATTER_TO_CQE: u32 = 1 << 4;
    /// `MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE`.
    pub const CREATE_PACKET_BASED_CREDIT_MODE: u32 = 1 << 5;
    /// `MLX5DV_QP_CREATE_SIG_PIPELINING`.
    pub const CREATE_SIG_PIPELINING: u32 = 1 << 6;
    /// `MLX5DV_QP_EX_WITH_MR_INTERLEAVED`.
    pub const WITH_MR_INTERLEAVED: u64 = 1 << 0;
    /// `MLX5DV_QP_EX_WITH_MR_LIST`.
    pub const WITH_MR_LIST: u64 = 1 << 1;
    /// `MLX5DV_QP_EX_WITH_MKEY_CONFIGURE`.
    pub const WITH_MKEY_CONFIGURE: u64 = 1 << 2;
    /// `MLX5DV_QP_EX_WITH_RAW_WQE`.
    pub const WITH_RAW_WQE: u64 = 1 << 3;
    /// `MLX5DV_QP_EX_WITH_MEMCPY`.
    pub const WITH_MEMCPY: u64 = 1 << 4;
}

/// `struct ibv_qp_cap`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR (written back by the provider).
    pub max_inline_data: u32,
}

/// `struct mlx5dv_qp_init_attr` (DC attributes are not modelled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DvQpInitAttr {
    /// `MLX5DV_QP_INIT_ATTR_MASK_*`.
    pub comp_mask: u64,
    /// `MLX5DV_QP_CREATE_*`.
    pub create_flags: u32,
    /// `MLX5DV_QP_EX_WITH_*`.
    pub send_ops_flags: u64,
}

impl DvQpInitAttr {
    /// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | _SEND_OPS_FLAGS` with these values.
    pub fn new(create_flags: u32, send_ops_flags: u64) -> Self {
        DvQpInitAttr {
            comp_mask: dv_qp::MASK_QP_CREATE_FLAGS | dv_qp::MASK_SEND_OPS_FLAGS,
            create_flags,
            send_ops_flags,
        }
    }
}

/// The parts of `struct ibv_qp_init_attr_ex` and `mlx5dv_create_qp` this API models. The QP
/// is always created with `IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    /// The protection domain.
    pub pd: PdHandle,
    /// The send CQ.
    pub send_cq: CqHandle,
    /// The receive CQ.
    pub recv_cq: CqHandle,
    /// `enum ibv_qp_type` value ([`qp_type`]).
    pub qp_type: u32,
    /// Requested capacities.
    pub cap: QpCap,
    /// `IBV_QP_EX_WITH_*` ([`send_ops`]).
    pub send_ops_flags: u64,
    /// `mlx5dv_create_qp`'s attributes; `None` creates the QP with `ibv_create_qp_ex`.
    pub dv: Option<DvQpInitAttr>,
}

impl QpInitAttr {
    /// An RC QP with both queues on `cq` and the default RC send ops (`send_ops::RC_DEFAULT`).
    pub fn rc(pd: PdHandle, cq: CqHandle, cap: QpCap, dv: Option<DvQpInitAttr>) -> Self {
        QpInitAttr { pd, send_cq: cq, recv_cq: cq, qp_type: qp_type::RC, cap, send_ops_flags: send_ops::RC_DEFAULT, dv }
    }
}

/// A created QP: its number and the capacities the provider wrote back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qp {
    /// The backend handle.
    pub handle: QpHandle,
    /// `qp->qp_num`.
    pub qp_num: u32,
    /// `attr->cap` after creation (`max_inline_data` as the provider computed it).
    pub cap: QpCap,
}

/// `enum ibv_qp_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
pub enum QpState {
    /// `IBV_QPS_RESET`.
    Reset = 0,
    /// `IBV_QPS_INIT`.
    Init = 1,
    /// `IBV_QPS_RTR`.
    Rtr = 2,
    /// `IBV_QPS_RTS`.
    Rts = 3,
    /// `IBV_QPS_SQD`.
    Sqd = 4,
    /// `IBV_QPS_SQE`.
    Sqe = 5,
    /// `IBV_QPS_ERR`.
    Err = 6,
}

/// A state change (`ibv_modify_qp`); the backend fills the path, PSNs and timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpModify {
    /// The new state.
    pub state: QpState,
    /// For INIT: `qp_access_flags` of incoming RDMA.
    pub access: AccessFlags,
    /// For RTR: the peer QP (on this backend), whose device and number form the path.
    pub remote: Option<QpHandle>,
}

impl QpModify {
    /// Move to `state` with no further attributes.
    pub fn to(state: QpState) -> Self {
        QpModify { state, access: AccessFlags::empty(), remote: None }
    }

    /// The three transitions that connect a QP in RESET to `peer`: INIT granting `access` to
    /// incoming RDMA, RTR towards `peer`, then RTS.
    pub fn connect(access: AccessFlags, peer: QpHandle) -> [QpModify; 3] {
        [
            QpModify { state: QpState::Init, access, remote: None },
            QpModify { state: QpState::Rtr, access, remote: Some(peer) },
            QpModify::to(QpState::Rts),
        ]
    }
}

bitflags! {
    /// `enum ibv_send_flags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct SendFlags: u32 {
        /// `IBV_SEND_FENCE`.
        const FENCE = 1 << 0;
        /// `IBV_SEND_SIGNALED`.
        const SIGNALED = 1 << 1;
        /// `IBV_SEND_SOLICITED`.
        const SOLICITED = 1 << 2;
        /// `IBV_SEND_INLINE`.
        const INLINE = 1 << 3;
    }
}

/// `MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR`.
pub const MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR: u32 = 1 << 0;

/// One call inside an `ibv_wr_start … ibv_wr_complete` chain. Builders carry the `wr_id` and
/// `wr_flags` the application sets on the QP before calling them; setters do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WrOp {
    /// `ibv_wr_rdma_write` (+ `ibv_wr_set_sge_list`).
    RdmaWrite {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// Remote key.
        rkey: u32,
        /// Remote address.
        remote_addr: u64,
        /// Gather list.
        sge: Vec<Sge>,
    },
    /// `ibv_wr_rdma_write_imm`.
    RdmaWriteImm {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// Remote key.
        rkey: u32,
        /// Remote address.
        remote_addr: u64,
        /// Immediate data (network order in C; a plain value here).
        imm: u32,
        /// Gather list.
        sge: Vec<Sge>,
    },
    /// `ibv_wr_rdma_read`.
    RdmaRead {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// Remote key.
        rkey: u32,
        /// Remote address.
        remote_addr: u64,
        /// Scatter list.
        sge: Vec<Sge>,
    },
    /// `ibv_wr_send`.
    Send {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// Gather list.
        sge: Vec<Sge>,
    },
    /// `ibv_wr_send_imm`.
    SendImm {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// Immediate data.
        imm: u32,
        /// Gather list.
        sge: Vec<Sge>,
    },
    /// `ibv_wr_send_inv`.
    SendInv {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The peer's key to invalidate.
        invalidate_rkey: u32,
        /// Gather list.
        sge: Vec<Sge>,
    },
    /// `ibv_wr_local_inv`.
    LocalInv {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The key to invalidate.
        invalidate_rkey: u32,
    },
    /// `mlx5dv_wr_mkey_configure`.
    MkeyConfigure {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The mkey, with the lkey the application holds (its low byte is the new tag).
        mkey: Mkey,
        /// Setters that follow.
        num_setters: u8,
        /// `attr->conf_flags`.
        conf_flags: u32,
        /// `attr->comp_mask`.
        comp_mask: u64,
    },
    /// `mlx5dv_wr_set_mkey_access_flags`.
    SetMkeyAccessFlags(u32),
    /// `mlx5dv_wr_set_mkey_layout_list`.
    SetMkeyLayoutList(Vec<Sge>),
    /// `mlx5dv_wr_set_mkey_layout_interleaved`.
    SetMkeyLayoutInterleaved {
        /// Repetitions of the entry list.
        repeat_count: u32,
        /// The entries.
        entries: Vec<MrInterleaved>,
    },
    /// `mlx5dv_wr_set_mkey_sig_block`.
    SetMkeySigBlock(SigBlockAttr),
    /// `mlx5dv_wr_mr_list`: configure with two setters, access flags then the list.
    MrList {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The mkey.
        mkey: Mkey,
        /// Access flags.
        access: u32,
        /// The list.
        sge: Vec<Sge>,
    },
    /// `mlx5dv_wr_mr_interleaved`.
    MrInterleaved {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The mkey.
        mkey: Mkey,
        /// Access flags.
        access: u32,
        /// Repetitions.
        repeat_count: u32,
        /// The entries.
        entries: Vec<MrInterleaved>,
    },
}

impl WrOp {
    /// True for the mlx5dv mkey operations (configure, its setters, `mr_list`,
    /// `mr_interleaved`), which go through `mlx5dv_qp_ex` rather than `ibv_qp_ex`.
    pub fn is_mlx5dv_mkey_op(&self) -> bool {
        matches!(
            self,
            WrOp::MkeyConfigure { .. }
                | WrOp::SetMkeyAccessFlags(_)
                | WrOp::SetMkeySigBlock(_)
                | WrOp::SetMkeyLayoutList(_)
                | WrOp::SetMkeyLayoutInterleaved { .. }
                | WrOp::MrList { .. }
                | WrOp::MrInterleaved { .. }
        )
    }
}

/// `struct ibv_recv_wr` with its scatter list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// Scatter list.
    pub sge: Vec<Sge>,
}

/// `enum ibv_wc_status` values.
pub mod wc_status {
    /// `IBV_WC_SUCCESS`.
    pub const SUCCESS: u32 = 0;
    /// `IBV_WC_LOC_LEN_ERR`.
    pub const LOC_LEN_ERR: u32 = 1;
    /// `IBV_WC_LOC_QP_OP_ERR`.
    pub const LOC_QP_OP_ERR: u32 = 2;
    /// `IBV_WC_LOC_PROT_ERR`.
    pub const LOC_PROT_ERR: u32 = 4;
    /// `IBV_WC_WR_FLUSH_ERR`.
    pub const WR_FLUSH_ERR: u32 = 5;
    /// `IBV_WC_MW_BIND_ERR`.
    pub const MW_BIND_ERR: u32 = 6;
    /// `IBV_WC_BAD_RESP_ERR`.
    pub const BAD_RESP_ERR: u32 = 7;
    /// `IBV_WC_LOC_ACCESS_ERR`.
    pub const LOC_ACCESS_ERR: u32 = 8;
    /// `IBV_WC_REM_INV_REQ_ERR`.
    pub const REM_INV_REQ_ERR: u32 = 9;
    /// `IBV_WC_REM_ACCESS_ERR`.
    pub const REM_ACCESS_ERR: u32 = 10;
    /// `IBV_WC_REM_OP_ERR`.
    pub const REM_OP_ERR: u32 = 11;
    /// `IBV_WC_RETRY_EXC_ERR`.
    pub const RETRY_EXC_ERR: u32 = 12;
    /// `IBV_WC_RNR_RETRY_EXC_ERR`.
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
    /// `IBV_WC_REM_ABORT_ERR`.
    pub const REM_ABORT_ERR: u32 = 16;
    /// `IBV_WC_GENERAL_ERR`.
    pub const GENERAL_ERR: u32 = 21;
}

/// `enum ibv_wc_opcode` values.
pub mod wc_opcode {
    /// `IBV_WC_SEND`.
    pub const SEND: u32 = 0;
    /// `IBV_WC_RDMA_WRITE`.
    pub const RDMA_WRITE: u32 = 1;
    /// `IBV_WC_RDMA_READ`.
    pub const RDMA_READ: u32 = 2;
    /// `IBV_WC_LOCAL_INV`.
    pub const LOCAL_INV: u32 = 6;
    /// `IBV_WC_RECV`.
    pub const RECV: u32 = 1 << 7;
    /// `IBV_WC_RECV_RDMA_WITH_IMM`.
    pub const RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;
    /// `IBV_WC_DRIVER1`, alias `MLX5DV_WC_UMR`.
    pub const DRIVER1: u32 = 135;
}

/// `enum ibv_wc_flags` bits.
pub mod wc_flags {
    /// `IBV_WC_WITH_IMM`.
    pub const WITH_IMM: u32 = 1 << 1;
    /// `IBV_WC_WITH_INV`.
    pub const WITH_INV: u32 = 1 << 3;
}

/// `struct ibv_wc`, the fields this API models.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Wc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `status` ([`wc_status`]).
    pub status: u32,
    /// `opcode` ([`wc_opcode`]); valid for successful completions.
    pub opcode: u32,
    /// `vendor_err`.
    pub vendor_err: u32,
    /// `byte_len`: valid for receives and RDMA READ.
    pub byte_len: u32,
    /// `imm_data` (or the invalidated rkey with `WITH_INV`), host order.
    pub imm_data: u32,
    /// `qp_num` of the QP this completion belongs to.
    pub qp_num: u32,
    /// `wc_flags` ([`wc_flags`]).
    pub wc_flags: u32,
}

/// `enum ibv_event_type` values this API reports.
pub mod event_type {
    /// `IBV_EVENT_CQ_ERR`.
    pub const CQ_ERR: u32 = 0;
    /// `IBV_EVENT_QP_FATAL`.
    pub const QP_FATAL: u32 = 1;
    /// `IBV_EVENT_QP_REQ_ERR`.
    pub const QP_REQ_ERR: u32 = 2;
    /// `IBV_EVENT_QP_ACCESS_ERR`.
    pub const QP_ACCESS_ERR: u32 = 3;
    /// `IBV_EVENT_SQ_DRAINED`.
    pub const SQ_DRAINED: u32 = 5;
}

/// An asynchronous event (`struct ibv_async_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// `event_type` ([`event_type`]).
    pub event_type: u32,
    /// The QP number, for QP events.
    pub qp_num: Option<u32>,
    /// The CQ, for CQ events.
    pub cq: Option<CqHandle>,
}

/// Signature offload values of `mlx5dv.h`.
pub mod sig {
    /// `MLX5DV_SIG_TYPE_T10DIF`.
    pub const TYPE_T10DIF: u32 = 0;
    /// `MLX5DV_SIG_TYPE_CRC`.
    pub const TYPE_CRC: u32 = 1;
    /// `MLX5DV_SIG_T10DIF_CRC`: the guard is the T10-DIF CRC-16.
    pub const BG_CRC: u32 = 0;
    /// `MLX5DV_SIG_T10DIF_CSUM`: the guard is the IP checksum.
    pub const BG_CSUM: u32 = 1;
    /// `MLX5DV_SIG_T10DIF_FLAG_REF_REMAP`.
    pub const FLAG_REF_REMAP: u16 = 1 << 0;
    /// `MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE`.
    pub const FLAG_APP_ESCAPE: u16 = 1 << 1;
    /// `MLX5DV_SIG_T10DIF_FLAG_APP_REF_ESCAPE`.
    pub const FLAG_APP_REF_ESCAPE: u16 = 1 << 2;
    /// `MLX5DV_SIG_CRC_TYPE_CRC32`.
    pub const CRC32: u32 = 0;
    /// `MLX5DV_SIG_CRC_TYPE_CRC32C`.
    pub const CRC32C: u32 = 1;
    /// `MLX5DV_SIG_CRC_TYPE_CRC64_XP10`.
    pub const CRC64_XP10: u32 = 2;
    /// `MLX5DV_BLOCK_SIZE_512`.
    pub const BLOCK_512: u32 = 0;
    /// `MLX5DV_BLOCK_SIZE_520`.
    pub const BLOCK_520: u32 = 1;
    /// `MLX5DV_BLOCK_SIZE_4048`.
    pub const BLOCK_4048: u32 = 2;
    /// `MLX5DV_BLOCK_SIZE_4096`.
    pub const BLOCK_4096: u32 = 3;
    /// `MLX5DV_BLOCK_SIZE_4160`.
    pub const BLOCK_4160: u32 = 4;
    /// `MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK`.
    pub const ATTR_FLAG_COPY_MASK: u32 = 1 << 0;
    /// `MLX5DV_SIG_MASK_T10DIF_GUARD`.
    pub const MASK_T10DIF_GUARD: u8 = 0xc0;
    /// `MLX5DV_SIG_MASK_T10DIF_APPTAG`.
    pub const MASK_T10DIF_APPTAG: u8 = 0x30;
    /// `MLX5DV_SIG_MASK_T10DIF_REFTAG`.
    pub const MASK_T10DIF_REFTAG: u8 = 0x0f;
    /// `MLX5DV_SIG_MASK_CRC32` (and `_CRC32C`).
    pub const MASK_CRC32: u8 = 0xf0;
    /// `MLX5DV_SIG_MASK_CRC64_XP10`.
    pub const MASK_CRC64_XP10: u8 = 0xff;

    /// Data bytes of a block for a `mlx5dv_block_size` value.
    pub fn block_bytes(block_size: u32) -> Option<usize> {
        Some(match block_size {
            BLOCK_512 => 512,
            BLOCK_520 => 520,
            BLOCK_4048 => 4048,
            BLOCK_4096 => 4096,
            BLOCK_4160 => 4160,
            _ => return None,
        })
    }
}

/// `struct mlx5dv_sig_t10dif`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SigT10dif {
    /// `MLX5DV_SIG_T10DIF_CRC` or `_CSUM`.
    pub bg_type: u32,
    /// Guard seed: 0 or 0xffff.
    pub bg: u16,
    /// Application tag.
    pub app_tag: u16,
    /// Reference tag of the first block.
    pub ref_tag: u32,
    /// `MLX5DV_SIG_T10DIF_FLAG_*`.
    pub flags: u16,
}

/// `struct mlx5dv_sig_crc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SigCrc {
    /// `MLX5DV_SIG_CRC_TYPE_*`.
    pub crc_type: u32,
    /// Seed: 0 or all ones of the CRC's width.
    pub seed: u64,
}

/// `struct mlx5dv_sig_block_domain`. C has a union selected by `sig_type`; here both members
/// are present and `sig_type` says which one counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SigBlockDomain {
    /// `MLX5DV_SIG_TYPE_*`.
    pub sig_type: u32,
    /// The T10-DIF parameters, for `MLX5DV_SIG_TYPE_T10DIF`.
    pub dif: SigT10dif,
    /// The CRC parameters, for `MLX5DV_SIG_TYPE_CRC`.
    pub crc: SigCrc,
    /// `MLX5DV_BLOCK_SIZE_*`.
    pub block_size: u32,
    /// Extension mask (must be 0).
    pub comp_mask: u64,
}

impl SigBlockDomain {
    /// A T10-DIF domain.
    pub fn t10dif(block_size: u32, dif: SigT10dif) -> Self {
        SigBlockDomain { sig_type: sig::TYPE_T10DIF, dif, crc: SigCrc::default(), block_size, comp_mask: 0 }
    }

    /// A CRC domain.
    pub fn crc(block_size: u32, crc_type: u32, seed: u64) -> Self {
        SigBlockDomain {
            sig_type: sig::TYPE_CRC,
            dif: SigT10dif::default(),
            crc: SigCrc { crc_type, seed },
            block_size,
            comp_mask: 0,
        }
    }
}

/// `struct mlx5dv_sig_block_attr`; a `None` domain is a NULL pointer (no signature there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SigBlockAttr {
    /// The memory domain.
    pub mem: Option<SigBlockDomain>,
    /// The wire domain.
    pub wire: Option<SigBlockDomain>,
    /// `MLX5DV_SIG_BLOCK_ATTR_FLAG_*`.
    pub flags: u32,
    /// Which bytes of the input PI are checked (`MLX5DV_SIG_MASK_*`).
    pub check_mask: u8,
    /// Which bytes of the PI are copied from input to output, with `FLAG_COPY_MASK`.
    pub copy_mask: u8,
    /// Extension mask (must be 0).
    pub comp_mask: u64,
}
