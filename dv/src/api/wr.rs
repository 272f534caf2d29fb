//! Work requests: one `ibv_wr_start … ibv_wr_complete` chain as a list of [`WrOp`]s.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use super::crypto::CryptoAttr;
use super::memory::AccessFlags;
use super::mkey::Mkey;
use super::signature::SigBlockAttr;

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

bitflags! {
    /// `enum ibv_send_flags`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

bitflags! {
    /// `mlx5dv_mkey_conf_attr.conf_flags` (`enum mlx5dv_mkey_conf_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct MkeyConfFlags: u32 {
        /// `MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR`.
        const RESET_SIG_ATTR = 1 << 0;
    }
}

/// `MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR`.
pub const MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR: MkeyConfFlags = MkeyConfFlags::RESET_SIG_ATTR;

/// One call inside an `ibv_wr_start … ibv_wr_complete` chain. Builders carry the `wr_id` and
/// `wr_flags` the application sets on the QP before calling them; setters do not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        conf_flags: MkeyConfFlags,
        /// `attr->comp_mask`.
        comp_mask: u64,
    },
    /// `mlx5dv_wr_set_mkey_access_flags`.
    SetMkeyAccessFlags(AccessFlags),
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
    /// `mlx5dv_wr_set_mkey_crypto`.
    SetMkeyCrypto(CryptoAttr),
    /// `mlx5dv_wr_mr_list`: configure with two setters, access flags then the list.
    MrList {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The mkey.
        mkey: Mkey,
        /// Access flags.
        access: AccessFlags,
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
        access: AccessFlags,
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
                | WrOp::SetMkeyCrypto(_)
                | WrOp::SetMkeyLayoutList(_)
                | WrOp::SetMkeyLayoutInterleaved { .. }
                | WrOp::MrList { .. }
                | WrOp::MrInterleaved { .. }
        )
    }
}

/// `struct ibv_recv_wr` with its scatter list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecvWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// Scatter list.
    pub sge: Vec<Sge>,
}
