//! CQs, QPs, their state changes, posting and polling.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use self::cq_attr::DvCqAttr;
use self::qp_attr::QpAttrExt;
use super::context::{Gid, PortAttr, link_layer};
use super::memory::{AccessFlags, Mw};
use super::wr::{MwBind, RecvWr, SendWr, WrOp};
use crate::error::Result;
use crate::handle::{ContextHandle, CqHandle, PdHandle, QpHandle, RwqIndTableHandle, SrqHandle, XrcdHandle};

pub mod cq_attr;
pub mod flow;
pub mod qp_attr;

/// A completion queue (`struct ibv_cq`); `cqe` is the capacity the provider gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// `IBV_QPT_XRC_RECV`.
    pub const XRC_RECV: u32 = 10;
    /// `IBV_QPT_DRIVER`.
    pub const DRIVER: u32 = 0xff;
}

bitflags! {
    /// `enum ibv_qp_create_send_ops_flags` (`IBV_QP_EX_WITH_*`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct SendOpsFlags: u64 {
        /// `IBV_QP_EX_WITH_RDMA_WRITE`.
        const RDMA_WRITE = 1 << 0;
        /// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
        const RDMA_WRITE_WITH_IMM = 1 << 1;
        /// `IBV_QP_EX_WITH_SEND`.
        const SEND = 1 << 2;
        /// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
        const SEND_WITH_IMM = 1 << 3;
        /// `IBV_QP_EX_WITH_RDMA_READ`.
        const RDMA_READ = 1 << 4;
        /// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
        const ATOMIC_CMP_AND_SWP = 1 << 5;
        /// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
        const ATOMIC_FETCH_AND_ADD = 1 << 6;
        /// `IBV_QP_EX_WITH_LOCAL_INV`.
        const LOCAL_INV = 1 << 7;
        /// `IBV_QP_EX_WITH_BIND_MW`.
        const BIND_MW = 1 << 8;
        /// `IBV_QP_EX_WITH_SEND_WITH_INV`.
        const SEND_WITH_INV = 1 << 9;
        /// `IBV_QP_EX_WITH_TSO`.
        const TSO = 1 << 10;
    }
}

/// `IBV_QP_EX_WITH_*` by their C names, as [`SendOpsFlags`].
pub mod send_ops {
    use super::SendOpsFlags as F;

    /// `IBV_QP_EX_WITH_RDMA_WRITE`.
    pub const RDMA_WRITE: F = F::RDMA_WRITE;
    /// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
    pub const RDMA_WRITE_WITH_IMM: F = F::RDMA_WRITE_WITH_IMM;
    /// `IBV_QP_EX_WITH_SEND`.
    pub const SEND: F = F::SEND;
    /// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
    pub const SEND_WITH_IMM: F = F::SEND_WITH_IMM;
    /// `IBV_QP_EX_WITH_RDMA_READ`.
    pub const RDMA_READ: F = F::RDMA_READ;
    /// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
    pub const ATOMIC_CMP_AND_SWP: F = F::ATOMIC_CMP_AND_SWP;
    /// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
    pub const ATOMIC_FETCH_AND_ADD: F = F::ATOMIC_FETCH_AND_ADD;
    /// `IBV_QP_EX_WITH_LOCAL_INV`.
    pub const LOCAL_INV: F = F::LOCAL_INV;
    /// `IBV_QP_EX_WITH_BIND_MW`.
    pub const BIND_MW: F = F::BIND_MW;
    /// `IBV_QP_EX_WITH_SEND_WITH_INV`.
    pub const SEND_WITH_INV: F = F::SEND_WITH_INV;
    /// `IBV_QP_EX_WITH_TSO`.
    pub const TSO: F = F::TSO;
    /// The operations this API posts on RC QPs.
    pub const RC_DEFAULT: F = F::RDMA_WRITE
        .union(F::RDMA_WRITE_WITH_IMM)
        .union(F::SEND)
        .union(F::SEND_WITH_IMM)
        .union(F::RDMA_READ)
        .union(F::LOCAL_INV)
        .union(F::SEND_WITH_INV);
}

bitflags! {
    /// `mlx5dv_qp_init_attr.comp_mask` (`MLX5DV_QP_INIT_ATTR_MASK_*`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct DvQpInitMask: u64 {
        /// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`.
        const QP_CREATE_FLAGS = 1 << 0;
        /// `MLX5DV_QP_INIT_ATTR_MASK_DC`.
        const DC = 1 << 1;
        /// `MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`.
        const SEND_OPS_FLAGS = 1 << 2;
        /// `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`.
        const DCI_STREAMS = 1 << 3;
    }
}

bitflags! {
    /// `mlx5dv_qp_init_attr.create_flags` (`enum mlx5dv_qp_create_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct DvQpCreateFlags: u32 {
        /// `MLX5DV_QP_CREATE_TUNNEL_OFFLOADS`.
        const TUNNEL_OFFLOADS = 1 << 0;
        /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC`.
        const TIR_ALLOW_SELF_LOOPBACK_UC = 1 << 1;
        /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC`.
        const TIR_ALLOW_SELF_LOOPBACK_MC = 1 << 2;
        /// `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`.
        const DISABLE_SCATTER_TO_CQE = 1 << 3;
        /// `MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE`.
        const ALLOW_SCATTER_TO_CQE = 1 << 4;
        /// `MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE`.
        const PACKET_BASED_CREDIT_MODE = 1 << 5;
        /// `MLX5DV_QP_CREATE_SIG_PIPELINING`.
        const SIG_PIPELINING = 1 << 6;
        /// `MLX5DV_QP_CREATE_OOO_DP` (rdma-core 55): out-of-order data placement.
        const OOO_DP = 1 << 7;
    }
}

bitflags! {
    /// `mlx5dv_qp_init_attr.send_ops_flags` (`enum mlx5dv_qp_create_send_ops_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct DvSendOpsFlags: u64 {
        /// `MLX5DV_QP_EX_WITH_MR_INTERLEAVED`.
        const MR_INTERLEAVED = 1 << 0;
        /// `MLX5DV_QP_EX_WITH_MR_LIST`.
        const MR_LIST = 1 << 1;
        /// `MLX5DV_QP_EX_WITH_MKEY_CONFIGURE`.
        const MKEY_CONFIGURE = 1 << 2;
        /// `MLX5DV_QP_EX_WITH_RAW_WQE`.
        const RAW_WQE = 1 << 3;
        /// `MLX5DV_QP_EX_WITH_MEMCPY`.
        const MEMCPY = 1 << 4;
    }
}

/// The `mlx5dv_qp_init_attr` masks and flags by their C names.
pub mod dv_qp {
    use super::{DvQpCreateFlags as C, DvQpInitMask as M, DvSendOpsFlags as S};

    /// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`.
    pub const MASK_QP_CREATE_FLAGS: M = M::QP_CREATE_FLAGS;
    /// `MLX5DV_QP_INIT_ATTR_MASK_DC`.
    pub const MASK_DC: M = M::DC;
    /// `MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`.
    pub const MASK_SEND_OPS_FLAGS: M = M::SEND_OPS_FLAGS;
    /// `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`.
    pub const MASK_DCI_STREAMS: M = M::DCI_STREAMS;
    /// `MLX5DV_QP_CREATE_TUNNEL_OFFLOADS`.
    pub const CREATE_TUNNEL_OFFLOADS: C = C::TUNNEL_OFFLOADS;
    /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC`.
    pub const CREATE_TIR_ALLOW_SELF_LOOPBACK_UC: C = C::TIR_ALLOW_SELF_LOOPBACK_UC;
    /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC`.
    pub const CREATE_TIR_ALLOW_SELF_LOOPBACK_MC: C = C::TIR_ALLOW_SELF_LOOPBACK_MC;
    /// `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`.
    pub const CREATE_DISABLE_SCATTER_TO_CQE: C = C::DISABLE_SCATTER_TO_CQE;
    /// `MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE`.
    pub const CREATE_ALLOW_SCATTER_TO_CQE: C = C::ALLOW_SCATTER_TO_CQE;
    /// `MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE`.
    pub const CREATE_PACKET_BASED_CREDIT_MODE: C = C::PACKET_BASED_CREDIT_MODE;
    /// `MLX5DV_QP_CREATE_SIG_PIPELINING`.
    pub const CREATE_SIG_PIPELINING: C = C::SIG_PIPELINING;
    /// `MLX5DV_QP_CREATE_OOO_DP` (rdma-core 55).
    pub const CREATE_OOO_DP: C = C::OOO_DP;
    /// `MLX5DV_QP_EX_WITH_MR_INTERLEAVED`.
    pub const WITH_MR_INTERLEAVED: S = S::MR_INTERLEAVED;
    /// `MLX5DV_QP_EX_WITH_MR_LIST`.
    pub const WITH_MR_LIST: S = S::MR_LIST;
    /// `MLX5DV_QP_EX_WITH_MKEY_CONFIGURE`.
    pub const WITH_MKEY_CONFIGURE: S = S::MKEY_CONFIGURE;
    /// `MLX5DV_QP_EX_WITH_RAW_WQE`.
    pub const WITH_RAW_WQE: S = S::RAW_WQE;
    /// `MLX5DV_QP_EX_WITH_MEMCPY`.
    pub const WITH_MEMCPY: S = S::MEMCPY;
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

/// `struct mlx5dv_qp_init_attr`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvQpInitAttr {
    /// `MLX5DV_QP_INIT_ATTR_MASK_*`.
    pub comp_mask: DvQpInitMask,
    /// `MLX5DV_QP_CREATE_*`.
    pub create_flags: DvQpCreateFlags,
    /// `MLX5DV_QP_EX_WITH_*`.
    pub send_ops_flags: DvSendOpsFlags,
    /// `dc_init_attr`, read with `MLX5DV_QP_INIT_ATTR_MASK_DC`.
    #[serde(default, skip_serializing_if = "DcInitAttr::is_unset")]
    pub dc: DcInitAttr,
}

/// `struct mlx5dv_dc_init_attr`: the DC type and its union's member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcInitAttr {
    /// `dc_type` (`MLX5DV_DCTYPE_DCT` 1, `MLX5DV_DCTYPE_DCI` 2; other values as given).
    pub dc_type: u32,
    /// `dct_access_key` (a DCT's).
    pub dct_access_key: u64,
    /// `dci_streams.log_num_concurent` (a DCI's, with `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`).
    pub log_num_concurent: u8,
    /// `dci_streams.log_num_errored`.
    pub log_num_errored: u8,
}

impl DcInitAttr {
    /// `MLX5DV_DCTYPE_DCT`.
    pub const DCT: u32 = 1;
    /// `MLX5DV_DCTYPE_DCI`.
    pub const DCI: u32 = 2;

    /// A DCI's attributes (no streams).
    pub fn dci() -> Self {
        DcInitAttr { dc_type: Self::DCI, ..Self::default() }
    }

    /// A DCT's attributes with its access key.
    pub fn dct(access_key: u64) -> Self {
        DcInitAttr { dc_type: Self::DCT, dct_access_key: access_key, ..Self::default() }
    }

    fn is_unset(&self) -> bool {
        *self == Self::default()
    }
}

impl DvQpInitAttr {
    /// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | _SEND_OPS_FLAGS` with these values.
    pub fn new(create_flags: DvQpCreateFlags, send_ops_flags: DvSendOpsFlags) -> Self {
        DvQpInitAttr {
            comp_mask: dv_qp::MASK_QP_CREATE_FLAGS | dv_qp::MASK_SEND_OPS_FLAGS,
            create_flags,
            send_ops_flags,
            dc: DcInitAttr::default(),
        }
    }

    /// `mlx5dv_create_qp`'s attributes of a DC QP: `MLX5DV_QP_INIT_ATTR_MASK_DC` with `dc`.
    pub fn dc(dc: DcInitAttr) -> Self {
        DvQpInitAttr { comp_mask: dv_qp::MASK_DC, dc, ..Self::default() }
    }
}

/// `enum ibv_qp_init_attr_mask`: the fields of `struct ibv_qp_init_attr_ex` a call sets.
pub mod qp_init_mask {
    /// `IBV_QP_INIT_ATTR_PD`.
    pub const PD: u32 = 1 << 0;
    /// `IBV_QP_INIT_ATTR_XRCD`.
    pub const XRCD: u32 = 1 << 1;
    /// `IBV_QP_INIT_ATTR_CREATE_FLAGS`.
    pub const CREATE_FLAGS: u32 = 1 << 2;
    /// `IBV_QP_INIT_ATTR_MAX_TSO_HEADER`.
    pub const MAX_TSO_HEADER: u32 = 1 << 3;
    /// `IBV_QP_INIT_ATTR_IND_TABLE`.
    pub const IND_TABLE: u32 = 1 << 4;
    /// `IBV_QP_INIT_ATTR_RX_HASH`.
    pub const RX_HASH: u32 = 1 << 5;
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
    pub const SEND_OPS_FLAGS: u32 = 1 << 6;
    /// What this API creates with unless told otherwise: `PD | SEND_OPS_FLAGS`.
    pub const DEFAULT: u32 = PD | SEND_OPS_FLAGS;
}

/// `enum ibv_qp_create_flags` (`ibv_qp_init_attr_ex.create_flags`).
pub mod qp_create_flags {
    /// `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`.
    pub const BLOCK_SELF_MCAST_LB: u32 = 1 << 1;
    /// `IBV_QP_CREATE_SCATTER_FCS`.
    pub const SCATTER_FCS: u32 = 1 << 8;
    /// `IBV_QP_CREATE_CVLAN_STRIPPING`.
    pub const CVLAN_STRIPPING: u32 = 1 << 9;
    /// `IBV_QP_CREATE_SOURCE_QPN`.
    pub const SOURCE_QPN: u32 = 1 << 10;
    /// `IBV_QP_CREATE_PCI_WRITE_END_PADDING`.
    pub const PCI_WRITE_END_PADDING: u32 = 1 << 11;
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// The parts of `struct ibv_qp_init_attr_ex` and `mlx5dv_create_qp` this API models. The QP
/// is created with `IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` unless `comp_mask`
/// says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    pub send_ops_flags: SendOpsFlags,
    /// `mlx5dv_create_qp`'s attributes; `None` creates the QP with `ibv_create_qp_ex`.
    pub dv: Option<DvQpInitAttr>,
    /// `sq_sig_all`: every send WR completes with a CQE, `IBV_SEND_SIGNALED` or not.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sq_sig_all: bool,
    /// `comp_mask` ([`qp_init_mask`]) when it is not [`qp_init_mask::DEFAULT`]. Without
    /// `SEND_OPS_FLAGS` the QP has no `ibv_wr_*` API (`send_ops_flags` is ignored); the fields
    /// behind `XRCD`, `IND_TABLE` and `RX_HASH` are `xrcd`, `ind_table` and `rx_hash`, and
    /// `MAX_TSO_HEADER`'s is passed 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comp_mask: Option<u32>,
    /// `create_flags` ([`qp_create_flags`]), passed with `IBV_QP_INIT_ATTR_CREATE_FLAGS`.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub create_flags: u32,
    /// `srq`: the QP's receives come from this shared receive queue; the QP then has no
    /// receive queue of its own (`cap.max_recv_wr` and `max_recv_sge` come back 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srq: Option<SrqHandle>,
    /// `xrcd` (with `IBV_QP_INIT_ATTR_XRCD` in `comp_mask`): the domain of an
    /// `IBV_QPT_XRC_RECV` QP, which then has no PD, CQs or send queue of its own (`pd`,
    /// `send_cq` and `recv_cq` are not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xrcd: Option<XrcdHandle>,
    /// `rx_hash_conf`, passed with `IBV_QP_INIT_ATTR_RX_HASH` in `comp_mask` (zeros when
    /// `None`): an RSS QP's hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_hash: Option<super::wq::RxHashConf>,
    /// `rwq_ind_tbl`, passed with `IBV_QP_INIT_ATTR_IND_TABLE`: the WQs an RSS QP spreads
    /// over (an RSS QP has no CQs or queues of its own: `send_cq` and `recv_cq` are not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ind_table: Option<RwqIndTableHandle>,
}

impl QpInitAttr {
    /// An RC QP with both queues on `cq` and the default RC send ops (`send_ops::RC_DEFAULT`).
    pub fn rc(pd: PdHandle, cq: CqHandle, cap: QpCap, dv: Option<DvQpInitAttr>) -> Self {
        QpInitAttr {
            pd,
            send_cq: cq,
            recv_cq: cq,
            qp_type: qp_type::RC,
            cap,
            send_ops_flags: send_ops::RC_DEFAULT,
            dv,
            sq_sig_all: false,
            comp_mask: None,
            create_flags: 0,
            srq: None,
            xrcd: None,
            rx_hash: None,
            ind_table: None,
        }
    }

    /// The `comp_mask` the call passes.
    pub fn mask(&self) -> u32 {
        self.comp_mask.unwrap_or(qp_init_mask::DEFAULT)
    }
}

/// A created QP: its number and the capacities the provider wrote back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// `struct ibv_ah_attr` as an RC path needs it: where the responder is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AhAttr {
    /// `dlid`: the responder port's LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// `is_global`: a GRH is used (always on RoCE), with `dgid`.
    pub is_global: bool,
    /// `grh.dgid`: the responder port's GID.
    pub dgid: Gid,
    /// `grh.sgid_index`: which of the local port's GIDs is the source.
    pub sgid_index: u8,
    /// `grh.hop_limit`.
    pub hop_limit: u8,
    /// `port_num`: the local port.
    pub port_num: u8,
}

impl super::wr::UdDest {
    /// The datagram address of an AH with attributes `ah`, to QP `remote_qpn` with `remote_qkey`.
    pub fn new(ah: AhAttr, remote_qpn: u32, remote_qkey: u32) -> Self {
        let AhAttr { dlid, is_global, dgid, sgid_index, hop_limit, .. } = ah;
        super::wr::UdDest { dlid, is_global, dgid, sgid_index, hop_limit, remote_qpn, remote_qkey }
    }
}

/// The RTR attributes that name the responder (`IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QpDest {
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `ah_attr`.
    pub ah: AhAttr,
    /// `path_mtu` (`enum ibv_mtu`: 1 = 256 … 5 = 4096).
    pub path_mtu: u32,
}

impl QpDest {
    /// The path to `peer`, whose port is described by `port` (from `ibv_query_port` and GID 0
    /// of `ibv_query_gid` on the peer's context): by GID on RoCE, by LID on InfiniBand.
    pub fn to(peer: &Qp, port: &PortAttr) -> Self {
        let global = port.link_layer == link_layer::ETHERNET;
        QpDest {
            dest_qp_num: peer.qp_num,
            ah: AhAttr {
                dlid: port.lid,
                is_global: global,
                dgid: if global { port.gid } else { Gid::default() },
                sgid_index: 0,
                hop_limit: if global { 1 } else { 0 },
                port_num: 1,
            },
            path_mtu: port.active_mtu,
        }
    }
}

/// A state change (`ibv_modify_qp`).
///
/// Without `ext`, the backend supplies what the transition requires besides the state, the
/// access flags and the path, from [`QpAttrExt::defaults`] (PSNs 0, timers, port 1). With
/// `ext`, the call is `ibv_modify_qp` exactly: `ext.mask` says which attributes it carries
/// (`state` only with `STATE`, `access` only with `ACCESS_FLAGS`, `dest` with `AV`,
/// `DEST_QPN` and `PATH_MTU`), and the kernel checks the mask against the transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpModify {
    /// The new state.
    pub state: QpState,
    /// For INIT: `qp_access_flags` of incoming RDMA.
    pub access: AccessFlags,
    /// For RTR: the responder's QP number and address.
    pub dest: Option<QpDest>,
    /// Every other attribute, with the call's mask; `None`: the backend's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext: Option<QpAttrExt>,
}

impl QpModify {
    /// Move to `state` with no further attributes.
    pub fn to(state: QpState) -> Self {
        QpModify { state, access: AccessFlags::empty(), dest: None, ext: None }
    }

    /// `ibv_modify_qp(qp, attr, mask)`: the attributes `mask` names, as the C call passes them.
    pub fn exact(state: QpState, access: AccessFlags, dest: Option<QpDest>, ext: QpAttrExt) -> Self {
        QpModify { state, access, dest, ext: Some(ext) }
    }

    /// The attributes besides state, access and path: `ext`, or the backend's defaults.
    pub fn attrs(&self) -> QpAttrExt {
        self.ext.unwrap_or_else(QpAttrExt::defaults)
    }

    /// The three transitions that connect a QP in RESET to `dest`: INIT granting `access` to
    /// incoming RDMA, RTR towards `dest`, then RTS.
    pub fn connect(access: AccessFlags, dest: QpDest) -> [QpModify; 3] {
        [
            QpModify { state: QpState::Init, access, dest: None, ext: None },
            QpModify { state: QpState::Rtr, access, dest: Some(dest), ext: None },
            QpModify::to(QpState::Rts),
        ]
    }
}

/// `enum ibv_wc_status` values.
pub mod wc_status;

/// `enum ibv_wc_opcode` values.
pub mod wc_opcode;

bitflags! {
    /// `enum ibv_wc_flags`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct WcFlags: u32 {
        /// `IBV_WC_GRH`.
        const GRH = 1 << 0;
        /// `IBV_WC_WITH_IMM`.
        const WITH_IMM = 1 << 1;
        /// `IBV_WC_IP_CSUM_OK`.
        const IP_CSUM_OK = 1 << 2;
        /// `IBV_WC_WITH_INV`.
        const WITH_INV = 1 << 3;
        /// `IBV_WC_TM_SYNC_REQ`: software and the device must synchronise their counts.
        const TM_SYNC_REQ = 1 << 4;
        /// `IBV_WC_TM_MATCH`: the message matched a posted tag.
        const TM_MATCH = 1 << 5;
        /// `IBV_WC_TM_DATA_VALID`: the matched message's data is in the tag's buffer.
        const TM_DATA_VALID = 1 << 6;
    }
}

/// `IBV_WC_*` flags by their C names, as [`WcFlags`].
pub mod wc_flags;

fn is_zero_u16(v: &u16) -> bool {
    *v == 0
}

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
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
    /// `wc_flags`.
    pub wc_flags: WcFlags,
    /// `src_qp`: the sending QP (receive completions).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub src_qp: u32,
    /// The flow tag a steering rule gave a raw packet QP's receive (`ibv_wc_read_flow_tag`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub flow_tag: u32,
    /// `slid`: the sender's LID (receive completions; 0 on RoCE).
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub slid: u16,
    /// `sl`: the service level (receive completions).
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub sl: u8,
    /// `dlid_path_bits` (receive completions).
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub dlid_path_bits: u8,
    /// `pkey_index`: libmlx5 reads it from the CQE word that also holds the immediate data or
    /// the invalidated rkey, so a receive with either reports its low 16 bits.
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub pkey_index: u16,
    /// The CQE's completion timestamp in device clock ticks (`ibv_wc_read_completion_ts`):
    /// set by the simulator for a good completion on a CQ made with completion timestamps
    /// (its C ABI's `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`), 0 otherwise. Never in a trace:
    /// a free-running device's clock is the wall clock, which no replay repeats.
    #[serde(skip)]
    pub timestamp: u64,
    /// `ibv_wc_read_tm_info`'s `tag`: the TMH's tag of a tag-matching receive (0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub tm_tag: u64,
    /// `ibv_wc_read_tm_info`'s `priv`: the TMH's `app_ctx`.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub tm_priv: u32,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// CQs, QPs, posting and polling.
pub trait Queues {
    /// `ibv_create_cq(ctx, cqe, NULL, NULL, 0)`; the result carries the rounded capacity.
    fn create_cq(&mut self, ctx: ContextHandle, cqe: u32) -> Result<Cq> {
        self.create_cq_on_vector(ctx, cqe, 0)
    }

    /// `ibv_create_cq(ctx, cqe, NULL, NULL, comp_vector)`: EINVAL for a vector at or past the
    /// context's `num_comp_vectors` (the kernel's check).
    fn create_cq_on_vector(&mut self, ctx: ContextHandle, cqe: u32, comp_vector: u32) -> Result<Cq>;

    /// `mlx5dv_create_cq` with an `ibv_cq_init_attr_ex` of `cqe`, `comp_vector` and the
    /// standard `wc_flags`, and the vendor attributes `attr`: libmlx5's checks (unknown mask
    /// or flag bits, a CQE size other than 64 or 128, compression the device does not
    /// advertise, padding without 128-byte CQEs: EINVAL), then the kernel's (compression for
    /// a CQE size without it, or more than one mini-CQE format: EOPNOTSUPP or EINVAL).
    fn create_dv_cq(&mut self, ctx: ContextHandle, cqe: u32, comp_vector: u32, attr: &DvCqAttr) -> Result<Cq>;

    /// `ibv_create_cq_ex`, or `mlx5dv_create_cq` with `attr.dv`: libmlx5's checks as in
    /// [`Queues::create_dv_cq`], then `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN` as the kernel's
    /// `cqc.oi`, which the firmware refuses (EINVAL) on a device without `cq_oi`.
    fn create_cq_ex(&mut self, ctx: ContextHandle, attr: &cq_attr::CqInitAttrEx) -> Result<Cq>;

    /// Entry `index` (modulo the ring) of the CQ's ring, read as a program reads the buffer
    /// `mlx5dv_init_obj` reports (`cq.buf`, `cqe_size`, `cqe_cnt`), after the device ran.
    fn cq_entry(&mut self, cq: &Cq, index: u32) -> Result<cq_attr::CqEntry>;

    /// `ibv_destroy_cq`; EBUSY while a QP uses it.
    fn destroy_cq(&mut self, cq: &Cq) -> Result<()>;

    /// `ibv_resize_cq`: room for at least `cqe` entries (`cqe + 1` rounded up to a power of
    /// two, less one), keeping the completions not yet polled; the result carries the new
    /// capacity (the same CQ when the rounding lands on the current size). EINVAL past
    /// libmlx5's and the kernel's bounds or below the number of completions not yet polled.
    fn resize_cq(&mut self, cq: &Cq, cqe: u32) -> Result<Cq>;

    /// `ibv_poll_cq`: up to `max` completions, oldest first.
    fn poll_cq(&mut self, cq: &Cq, max: usize) -> Result<Vec<Wc>>;

    /// `ibv_poll_cq` into the caller's array, as the C call takes one: up to `wc.len()`
    /// completions, oldest first, and how many. A backend that can polls without
    /// allocating; the default goes through [`Queues::poll_cq`], so layers see one call.
    fn poll_cq_into(&mut self, cq: &Cq, wc: &mut [Wc]) -> Result<usize> {
        let got = self.poll_cq(cq, wc.len())?;
        let n = got.len().min(wc.len());
        wc[..n].copy_from_slice(&got[..n]);
        Ok(n)
    }

    /// `mlx5dv_create_qp` (or `ibv_create_qp_ex` when `attr.dv` is `None`).
    fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp>;

    /// `ibv_modify_qp` to a new state; the backend supplies path, PSNs and timers.
    fn modify_qp(&mut self, qp: &Qp, attr: &QpModify) -> Result<()>;

    /// `ibv_create_flow` on a raw packet QP: a steering rule sending the Ethernet frames
    /// its specs match to the QP (uverbs' and mlx5_ib's checks first).
    fn create_flow(&mut self, qp: &Qp, attr: &flow::FlowAttr) -> Result<flow::Flow>;

    /// `ibv_destroy_flow`.
    fn destroy_flow(&mut self, flow: &flow::Flow) -> Result<()>;

    /// `mlx5dv_create_flow_matcher` on the context: libmlx5's and mlx5_ib's checks of the
    /// attribute and its `fte_match_param` mask.
    fn create_flow_matcher(
        &mut self,
        ctx: crate::ContextHandle,
        attr: &flow::FlowMatcherAttr,
    ) -> Result<flow::FlowMatcher>;

    /// `mlx5dv_destroy_flow_matcher`: EBUSY while flows use it.
    fn destroy_flow_matcher(&mut self, matcher: &flow::FlowMatcher) -> Result<()>;

    /// `mlx5dv_create_flow`: a rule of the matcher with its match value and actions
    /// (destroyed with [`Queues::destroy_flow`]).
    fn create_matcher_flow(
        &mut self,
        matcher: &flow::FlowMatcher,
        value: &[u8],
        actions: &[flow::MatcherAction],
    ) -> Result<flow::Flow>;

    /// `mlx5dv_modify_qp_udp_sport`: the RoCE v2 UDP source port the QP's packets leave
    /// from. EOPNOTSUPP unless the QP is RC or UC, in RTS, on a device with
    /// `rts2rts_qp_udp_sport`; then RTS2RTS with the port.
    fn modify_qp_udp_sport(&mut self, qp: &Qp, udp_sport: u16) -> Result<()>;

    /// `mlx5dv_dci_stream_id_reset`: take a DCI's errored stream out of error. EOPNOTSUPP
    /// on a device without errored streams or a QP not in RTS, EINVAL for a QP that is not
    /// a DCI; then RTS2RTS with the stream id in the QP context extension.
    fn dci_stream_id_reset(&mut self, qp: &Qp, stream_id: u16) -> Result<()>;

    /// `mlx5dv_modify_qp_sched_elem`: the QP's requester and responder join the queue groups
    /// (scheduling elements made through DEVX) with these object ids, 0 for none. EINVAL
    /// for a responder group on a UC, UD or raw packet QP; EOPNOTSUPP for another QP type,
    /// an RC/UC/UD QP not in INIT or RTS or on a device without `qpc_extension` and
    /// `nic_qp_scheduling`, a raw packet QP not in RTS or without `nic_sq_scheduling`; then
    /// INIT2INIT or RTS2RTS with the ids in the QP context extension (MODIFY_SQ for a raw
    /// packet QP), a bad status being its errno.
    fn modify_qp_sched_elem(&mut self, qp: &Qp, requestor: u32, responder: u32) -> Result<()>;

    /// `mlx5dv_map_ah_to_qp`: map an address handle (its attributes, `remote_qpn` unused)
    /// to QP number `qp_num` with an AV_QP_MAPPING object. EOPNOTSUPP on a device without
    /// the object type or for an AH without a GRH.
    fn map_ah_to_qp(&mut self, ctx: ContextHandle, ah: &crate::UdDest, qp_num: u32) -> Result<()>;

    /// `ibv_query_qp` for the current state.
    fn query_qp_state(&mut self, qp: &Qp) -> Result<QpState>;

    /// `ibv_destroy_qp`.
    fn destroy_qp(&mut self, qp: &Qp) -> Result<()>;

    /// One `ibv_wr_start`, the calls of `ops` in order, then `ibv_wr_complete`, whose result
    /// this returns.
    fn post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()>;

    /// `ibv_post_send` of a list of WRs (libmlx5's `_mlx5_post_send`, not the `ibv_wr_*`
    /// chain): the WRs before a failing one are posted; the error names the failing WR's index
    /// ([`crate::Error::bad_wr`]).
    fn post_send_wr(&mut self, qp: &Qp, wrs: &[SendWr]) -> Result<()>;

    /// `ibv_bind_mw(qp, mw, bind)` of a type-1 window: the key the window answers to once
    /// the bind is posted (`mw->rkey` afterwards); the bind completes on the QP's send CQ.
    fn bind_mw(&mut self, qp: &Qp, mw: &Mw, bind: &MwBind) -> Result<u32>;

    /// `ibv_post_recv` of a list of receive WRs.
    fn post_recv(&mut self, qp: &Qp, wrs: &[RecvWr]) -> Result<()>;

    /// `mlx5dv_qp_cancel_posted_send_wrs`: turn the not-yet-executed WRs with `wr_id` of a QP
    /// in SQD into NOPs (they still complete); the number cancelled.
    fn cancel_posted_send_wrs(&mut self, qp: &Qp, wr_id: u64) -> Result<u32>;

    /// The send WQE that starts at basic block `index` (modulo the ring) of the QP's send
    /// queue, as the provider wrote it, followed across the ring's end: the buffer
    /// `mlx5dv_init_obj` reports as `sq.buf`. EINVAL for a QP without a send queue.
    fn sq_wqe(&mut self, qp: &Qp, index: u32) -> Result<Vec<u8>>;
}
