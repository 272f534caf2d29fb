//! Work requests: one `ibv_wr_start … ibv_wr_complete` chain as a list of [`WrOp`]s.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use super::crypto::CryptoAttr;
use super::memory::{AccessFlags, Mw, MwBindInfo};
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

/// `struct ibv_mw_bind`: what `ibv_bind_mw` takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MwBind {
    /// `wr_id` of the bind's completion.
    pub wr_id: u64,
    /// `send_flags`.
    pub send_flags: SendFlags,
    /// `bind_info`.
    pub bind_info: MwBindInfo,
}

/// `wr.bind_mw` of a send WR: the window, the rkey it is to answer to after the bind, and
/// the bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindMw {
    /// `bind_mw.mw`.
    pub mw: Mw,
    /// `bind_mw.rkey`: the new key (its low byte is what the bind writes).
    pub rkey: u32,
    /// `bind_mw.bind_info`.
    pub bind_info: MwBindInfo,
}

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
    /// `ibv_wr_atomic_cmp_swp` (+ `ibv_wr_set_sge`): 8 bytes at `remote_addr` become `swap`
    /// if they equal `compare`; the original value lands in the scatter entry.
    AtomicCmpSwp {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// Remote key.
        rkey: u32,
        /// Remote address (8-byte aligned, else the responder refuses it).
        remote_addr: u64,
        /// The value compared with.
        compare: u64,
        /// The value written on a match.
        swap: u64,
        /// Where the original value lands (8 bytes).
        sge: Vec<Sge>,
    },
    /// `ibv_wr_atomic_fetch_add` (+ `ibv_wr_set_sge`): `add` is added to the 8 bytes at
    /// `remote_addr`; the original value lands in the scatter entry.
    AtomicFetchAdd {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// Remote key.
        rkey: u32,
        /// Remote address (8-byte aligned, else the responder refuses it).
        remote_addr: u64,
        /// The addend.
        add: u64,
        /// Where the original value lands (8 bytes).
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
    /// `ibv_wr_bind_mw` (and `IBV_WR_BIND_MW` of `ibv_post_send`).
    BindMw {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The window, its new rkey and the bind.
        bind: BindMw,
    },
    /// `ibv_wr_set_inline_data` / `ibv_wr_set_inline_data_list` (and `IBV_SEND_INLINE` of
    /// `ibv_post_send`): the payload of the WR before it, copied into the WQE at post time in
    /// place of its gather list, so its memory need not be registered. More than the QP's
    /// `max_inline_data` fails the chain with ENOMEM. Kept as hex in traces.
    InlineData(#[serde(with = "super::crypto::hex_vec")] Vec<u8>),
    /// `mlx5dv_wr_memcpy`: the DMA engine copies `length` bytes from `src_addr` (through
    /// `src_lkey`, local read) to `dest_addr` (through `dest_lkey`, local write); the QP
    /// needs `MLX5DV_QP_EX_WITH_MEMCPY`. Completes with `IBV_WC_DRIVER3`.
    Memcpy {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// `qpx->wr_flags`.
        flags: SendFlags,
        /// The destination's local key.
        dest_lkey: u32,
        /// The destination address.
        dest_addr: u64,
        /// The source's local key.
        src_lkey: u32,
        /// The source address.
        src_addr: u64,
        /// Bytes to copy (`size_t`).
        length: u64,
    },
    /// `mlx5dv_wr_raw_wqe`: the program's own WQE, `ds` × 16 bytes as its control segment
    /// says, copied into the send queue with only the WQE index replaced; the QP needs
    /// `MLX5DV_QP_EX_WITH_RAW_WQE`. Completes with `IBV_WC_DRIVER2`. Hex in traces.
    RawWqe {
        /// `qpx->wr_id`.
        wr_id: u64,
        /// The WQE's bytes, from its control segment.
        #[serde(with = "super::crypto::hex_vec")]
        wqe: Vec<u8>,
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

/// `enum ibv_wr_opcode` values, as `ibv_post_send` takes them.
pub mod wr_opcode {
    /// `IBV_WR_RDMA_WRITE`.
    pub const RDMA_WRITE: u32 = 0;
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    /// `IBV_WR_SEND`.
    pub const SEND: u32 = 2;
    /// `IBV_WR_SEND_WITH_IMM`.
    pub const SEND_WITH_IMM: u32 = 3;
    /// `IBV_WR_RDMA_READ`.
    pub const RDMA_READ: u32 = 4;
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`.
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
    /// `IBV_WR_LOCAL_INV`.
    pub const LOCAL_INV: u32 = 7;
    /// `IBV_WR_BIND_MW`.
    pub const BIND_MW: u32 = 8;
    /// `IBV_WR_SEND_WITH_INV`.
    pub const SEND_WITH_INV: u32 = 9;
    /// `IBV_WR_TSO`.
    pub const TSO: u32 = 10;
    /// `IBV_WR_DRIVER1`.
    pub const DRIVER1: u32 = 11;
    /// `IBV_WR_ATOMIC_WRITE` (libmlx5's `ibv_post_send` has no entry for it).
    pub const ATOMIC_WRITE: u32 = 15;
}

/// `struct ibv_send_wr` as `ibv_post_send` takes it, for the opcodes whose fields this API
/// models; `opcode` is the caller's value, unchecked, so that a bad one can be posted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `opcode` ([`wr_opcode`]).
    pub opcode: u32,
    /// `send_flags`.
    pub send_flags: SendFlags,
    /// `sg_list`, `num_sge` entries.
    pub sge: Vec<Sge>,
    /// `imm_data`, of the `*_WITH_IMM` opcodes (a plain value, as in [`WrOp::SendImm`]).
    pub imm_data: u32,
    /// `invalidate_rkey`, of SEND_WITH_INV and LOCAL_INV (the C union's other member).
    pub invalidate_rkey: u32,
    /// `wr.rdma.remote_addr`.
    pub remote_addr: u64,
    /// `wr.rdma.rkey` (and `wr.atomic.rkey`).
    pub rkey: u32,
    /// `wr.atomic.compare_add`: the compare value of CMP_AND_SWP, the addend of FETCH_AND_ADD.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compare_add: u64,
    /// `wr.atomic.swap`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub swap: u64,
    /// With `IBV_SEND_INLINE`: the payload libmlx5 copies from the SGEs into the WQE at post
    /// time, given by a caller whose SGE memory the backend cannot read (a C program's);
    /// empty, the backend reads the SGEs itself. Hex in traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "super::crypto::hex_vec")]
    pub inline_data: Vec<u8>,
    /// `wr.bind_mw` of `IBV_WR_BIND_MW`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_mw: Option<BindMw>,
    /// `wr.ud` of a send on a UD QP: where the datagram goes (`None` on other QPs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ud: Option<UdDest>,
    /// `mlx5dv_wr_set_dc_addr` of a send on a DCI: the address handle's attributes and the
    /// remote DCT number (`remote_qpn`) in `av`, with the DC access key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dc: Option<DcDest>,
    /// `qp_type.xrc.remote_srqn` of a send on an XRC initiator QP: the SRQ at the target the
    /// message goes to (the XRC segment of the WQE, the XRCETH on the wire).
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub xrc_remote_srqn: u32,
}

/// `mlx5dv_wr_set_dc_addr`'s arguments: where a DCI's WQE goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcDest {
    /// The AH's attributes, with the remote DCT number as `remote_qpn` (`remote_qkey` unused).
    pub av: UdDest,
    /// `remote_dc_key`: the DCT's access key.
    pub access_key: u64,
    /// `mlx5dv_wr_set_dc_addr_stream`'s stream id, which the control segment carries
    /// (`dci_stream_channel_id`); 0 for `mlx5dv_wr_set_dc_addr`.
    #[serde(default, skip_serializing_if = "is_zero16")]
    pub stream_id: u16,
}

fn is_zero16(v: &u16) -> bool {
    *v == 0
}

fn is_zero32(v: &u32) -> bool {
    *v == 0
}

/// `wr.ud` (or `ibv_wr_set_ud_addr`): what a UD send's datagram segment carries, the address
/// handle's attributes (as `AhAttr` names them: [`UdDest::new`]), the remote QP number and the
/// Q_Key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdDest {
    /// `dlid`: the destination port's LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// `is_global`: a GRH is used (always on RoCE), with `dgid`.
    pub is_global: bool,
    /// `grh.dgid`.
    pub dgid: super::context::Gid,
    /// `grh.sgid_index`.
    pub sgid_index: u8,
    /// `grh.hop_limit`.
    pub hop_limit: u8,
    /// `remote_qpn`.
    pub remote_qpn: u32,
    /// `remote_qkey`: with its top bit set, the sending QP's own Q_Key is used (IBTA 10.2.5).
    pub remote_qkey: u32,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl SendWr {
    /// The WR of an `ibv_wr_*` builder that `ibv_post_send` also has (RDMA WRITE and READ,
    /// the two atomics, SEND and its immediate and invalidate forms, LOCAL_INV, BIND_MW); `None` for the mlx5dv ops.
    pub fn from_op(op: &WrOp) -> Option<SendWr> {
        let wr = |wr_id: u64, flags: SendFlags, opcode, sge: &[Sge]| SendWr {
            wr_id,
            opcode,
            send_flags: flags,
            sge: sge.to_vec(),
            ..SendWr::default()
        };
        Some(match op {
            WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge } => {
                SendWr { rkey: *rkey, remote_addr: *remote_addr, ..wr(*wr_id, *flags, wr_opcode::RDMA_WRITE, sge) }
            }
            WrOp::RdmaWriteImm { wr_id, flags, rkey, remote_addr, imm, sge } => SendWr {
                rkey: *rkey,
                remote_addr: *remote_addr,
                imm_data: *imm,
                ..wr(*wr_id, *flags, wr_opcode::RDMA_WRITE_WITH_IMM, sge)
            },
            WrOp::RdmaRead { wr_id, flags, rkey, remote_addr, sge } => {
                SendWr { rkey: *rkey, remote_addr: *remote_addr, ..wr(*wr_id, *flags, wr_opcode::RDMA_READ, sge) }
            }
            WrOp::AtomicCmpSwp { wr_id, flags, rkey, remote_addr, compare, swap, sge } => SendWr {
                rkey: *rkey,
                remote_addr: *remote_addr,
                compare_add: *compare,
                swap: *swap,
                ..wr(*wr_id, *flags, wr_opcode::ATOMIC_CMP_AND_SWP, sge)
            },
            WrOp::AtomicFetchAdd { wr_id, flags, rkey, remote_addr, add, sge } => SendWr {
                rkey: *rkey,
                remote_addr: *remote_addr,
                compare_add: *add,
                ..wr(*wr_id, *flags, wr_opcode::ATOMIC_FETCH_AND_ADD, sge)
            },
            WrOp::Send { wr_id, flags, sge } => wr(*wr_id, *flags, wr_opcode::SEND, sge),
            WrOp::SendImm { wr_id, flags, imm, sge } => {
                SendWr { imm_data: *imm, ..wr(*wr_id, *flags, wr_opcode::SEND_WITH_IMM, sge) }
            }
            WrOp::SendInv { wr_id, flags, invalidate_rkey, sge } => {
                SendWr { invalidate_rkey: *invalidate_rkey, ..wr(*wr_id, *flags, wr_opcode::SEND_WITH_INV, sge) }
            }
            WrOp::LocalInv { wr_id, flags, invalidate_rkey } => {
                SendWr { invalidate_rkey: *invalidate_rkey, ..wr(*wr_id, *flags, wr_opcode::LOCAL_INV, &[]) }
            }
            WrOp::BindMw { wr_id, flags, bind } => {
                SendWr { bind_mw: Some(*bind), ..wr(*wr_id, *flags, wr_opcode::BIND_MW, &[]) }
            }
            _ => return None,
        })
    }

    /// The `ibv_wr_*` builder with this WR's fields, for the opcodes [`SendWr::from_op`]
    /// makes; `None` for the others.
    pub fn to_op(&self) -> Option<WrOp> {
        let (wr_id, flags, sge) = (self.wr_id, self.send_flags, self.sge.clone());
        let (rkey, remote_addr) = (self.rkey, self.remote_addr);
        Some(match self.opcode {
            wr_opcode::RDMA_WRITE => WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge },
            wr_opcode::RDMA_WRITE_WITH_IMM => {
                WrOp::RdmaWriteImm { wr_id, flags, rkey, remote_addr, imm: self.imm_data, sge }
            }
            wr_opcode::RDMA_READ => WrOp::RdmaRead { wr_id, flags, rkey, remote_addr, sge },
            wr_opcode::ATOMIC_CMP_AND_SWP => {
                WrOp::AtomicCmpSwp { wr_id, flags, rkey, remote_addr, compare: self.compare_add, swap: self.swap, sge }
            }
            wr_opcode::ATOMIC_FETCH_AND_ADD => {
                WrOp::AtomicFetchAdd { wr_id, flags, rkey, remote_addr, add: self.compare_add, sge }
            }
            wr_opcode::SEND => WrOp::Send { wr_id, flags, sge },
            wr_opcode::SEND_WITH_IMM => WrOp::SendImm { wr_id, flags, imm: self.imm_data, sge },
            wr_opcode::SEND_WITH_INV => WrOp::SendInv { wr_id, flags, invalidate_rkey: self.invalidate_rkey, sge },
            wr_opcode::LOCAL_INV => WrOp::LocalInv { wr_id, flags, invalidate_rkey: self.invalidate_rkey },
            wr_opcode::BIND_MW => WrOp::BindMw { wr_id, flags, bind: self.bind_mw? },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_data_is_hex_in_json_and_reads_back() -> Result<(), serde_json::Error> {
        let op = WrOp::InlineData(b"hi\x00\xff".to_vec());
        let text = serde_json::to_string(&op)?;
        assert_eq!(text, r#"{"InlineData":"686900ff"}"#);
        assert_eq!(serde_json::from_str::<WrOp>(&text)?, op);
        assert!(serde_json::from_str::<WrOp>(r#"{"InlineData":"6"}"#).is_err(), "odd digits");
        Ok(())
    }
}
