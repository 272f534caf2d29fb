//! Devices, contexts, device queries and asynchronous events: `ibv_get_device_list`,
//! `mlx5dv_open_device`, `ibv_open_device`, `mlx5dv_query_device`, PDs, `ibv_get_async_event`.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use super::crypto::CryptoCaps;
use super::signature::SigCaps;
use crate::error::Result;
use crate::handle::{ContextHandle, CqHandle, PdHandle};

/// What kind of device a list entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// An mlx5 device driven by the kernel (mlx5_ib); `ibv_get_device_list`.
    Mlx5,
    /// An mlx5 PCI function bound to vfio-pci; `mlx5dv_get_vfio_device_list`.
    Mlx5Vfio,
    /// A device of another provider (rxe, siw, …): every mlx5dv call answers EOPNOTSUPP.
    Other,
}

/// One entry of the device list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceDesc {
    /// `ibv_get_device_name`, or the PCI name of a VFIO device.
    pub name: String,
    /// Which provider drives it.
    pub kind: DeviceKind,
}

bitflags! {
    /// `mlx5dv_context_attr.flags` (`enum mlx5dv_context_attr_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct ContextFlags: u32 {
        /// `MLX5DV_CONTEXT_FLAGS_DEVX`: ask for a DEVX-capable context.
        const DEVX = 1 << 0;
    }
}

/// `MLX5DV_CONTEXT_ATTR_MASK_FD_ARRAY`, the one known `mlx5dv_context_attr.comp_mask` bit.
pub const MLX5DV_CONTEXT_ATTR_MASK_FD_ARRAY: u64 = 1 << 0;

/// `struct mlx5dv_context_attr` (the `fds` array is not modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextAttr {
    /// Context flags; unknown bits are kept so they can be rejected as the provider does.
    pub flags: ContextFlags,
    /// Extension mask.
    pub comp_mask: u64,
}

impl ContextAttr {
    /// Attributes asking for a DEVX context.
    pub fn devx() -> Self {
        ContextAttr { flags: ContextFlags::DEVX, comp_mask: 0 }
    }
}

/// `MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD`: fill `sig_caps`.
pub const MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD: u64 = 1 << 10;
/// `MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD`: fill `crypto_caps`.
pub const MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD: u64 = 1 << 13;
/// `MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH`: fill `max_wr_memcpy_length`.
pub const MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH: u64 = 1 << 12;

/// `MLX5DV_CONTEXT_MASK_CQE_COMPRESION`: fill `cqe_comp_caps`.
pub const MLX5DV_CONTEXT_MASK_CQE_COMPRESION: u64 = 1 << 0;

/// `MLX5DV_CONTEXT_FLAGS_*` bits of `mlx5dv_context.flags`.
pub mod dv_context_flags {
    /// `MLX5DV_CONTEXT_FLAGS_CQE_V1`.
    pub const CQE_V1: u64 = 1 << 0;
    /// `MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP`: 128-byte CQEs may be compressed.
    pub const CQE_128B_COMP: u64 = 1 << 4;
    /// `MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD`: 128-byte CQEs may be padded.
    pub const CQE_128B_PAD: u64 = 1 << 5;
    /// `MLX5DV_CONTEXT_FLAGS_BLUEFLAME` (rdma-core 58 and later).
    pub const BLUEFLAME: u64 = 1 << 8;
}

/// `struct mlx5dv_cqe_comp_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CqeCompCaps {
    /// The most CQEs one compressed block holds; 0 without compression.
    pub max_num: u32,
    /// `enum mlx5dv_cqe_comp_res_format` bits the device offers.
    pub supported_format: u32,
}

impl CqeCompCaps {
    fn is_zero(&self) -> bool {
        *self == CqeCompCaps::default()
    }
}

/// `MLX5DV_CONTEXT_MASK_DC_ODP_CAPS`: fill `dc_odp_caps` (from the ODP capability page).
pub const MLX5DV_CONTEXT_MASK_DC_ODP_CAPS: u64 = 1 << 7;

/// `MLX5DV_CONTEXT_MASK_DCI_STREAMS`: fill `dci_streams_caps`.
pub const MLX5DV_CONTEXT_MASK_DCI_STREAMS: u64 = 1 << 11;

/// `struct mlx5dv_dci_streams_caps`: the largest `log_num_concurent` and `log_num_errored` a
/// DCI takes (HCA caps `log_max_dci_stream_channels` and `log_max_dci_errored_streams`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DciStreamsCaps {
    /// `max_log_num_concurent`.
    pub max_log_num_concurent: u8,
    /// `max_log_num_errored`.
    pub max_log_num_errored: u8,
}

/// The parts of `struct mlx5dv_context` this API models.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvContext {
    /// Output mask: which of the requested parts were filled.
    pub comp_mask: u64,
    /// Filled when `MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD` was requested.
    pub sig_caps: SigCaps,
    /// Filled when `MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD` was requested.
    pub crypto_caps: CryptoCaps,
    /// Filled when `MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH` was requested: the longest
    /// `mlx5dv_wr_memcpy`, 0 on a device without the DMA engine.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub max_wr_memcpy_length: u64,
    /// `flags` ([`dv_context_flags`]), always filled.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub flags: u64,
    /// Filled when `MLX5DV_CONTEXT_MASK_CQE_COMPRESION` was requested.
    #[serde(default, skip_serializing_if = "CqeCompCaps::is_zero")]
    pub cqe_comp_caps: CqeCompCaps,
    /// Filled when `MLX5DV_CONTEXT_MASK_DCI_STREAMS` was requested.
    #[serde(default)]
    pub dci_streams_caps: DciStreamsCaps,
    /// Filled when `MLX5DV_CONTEXT_MASK_DC_ODP_CAPS` was requested: `enum
    /// ibv_odp_transport_cap_bits` of DC (libmlx5 reads the ODP page through DEVX; 0 when
    /// that fails).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub dc_odp_caps: u32,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
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
    /// `IBV_EVENT_PORT_ACTIVE`.
    pub const PORT_ACTIVE: u32 = 9;
    /// `IBV_EVENT_PORT_ERR`.
    pub const PORT_ERR: u32 = 10;
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    pub const SRQ_LIMIT_REACHED: u32 = 15;
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    pub const QP_LAST_WQE_REACHED: u32 = 16;
}

/// An asynchronous event (`struct ibv_async_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsyncEvent {
    /// `event_type` ([`event_type`]).
    pub event_type: u32,
    /// The QP number, for QP events.
    pub qp_num: Option<u32>,
    /// The CQ, for CQ events.
    pub cq: Option<CqHandle>,
    /// The SRQ, for SRQ events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srq: Option<crate::handle::SrqHandle>,
}

/// A GID (`union ibv_gid`), 16 bytes in network order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The link-local GID a RoCE port derives from its EUI-64 (`fe80::/64` + the GUID).
    pub fn link_local(guid: u64) -> Self {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..].copy_from_slice(&guid.to_be_bytes());
        Gid(g)
    }
}

/// `ibv_port_attr.link_layer` values.
pub mod link_layer {
    /// `IBV_LINK_LAYER_INFINIBAND`.
    pub const INFINIBAND: u8 = 1;
    /// `IBV_LINK_LAYER_ETHERNET` (RoCE).
    pub const ETHERNET: u8 = 2;
}

/// `enum ibv_port_state` values.
pub mod port_state {
    /// `IBV_PORT_DOWN`.
    pub const DOWN: u32 = 1;
    /// `IBV_PORT_ACTIVE`.
    pub const ACTIVE: u32 = 4;
}

/// The parts of `struct ibv_port_attr` a path needs, and the port's GID at index 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PortAttr {
    /// `state` ([`port_state`]).
    pub state: u32,
    /// `active_mtu` (`enum ibv_mtu`).
    pub active_mtu: u32,
    /// `lid` (0 on RoCE).
    pub lid: u16,
    /// `link_layer` ([`link_layer`]).
    pub link_layer: u8,
    /// GID index 0 (`ibv_query_gid(ctx, port, 0)`).
    pub gid: Gid,
}

/// Devices, contexts, device queries, PDs and asynchronous events.
pub trait Contexts {
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

    /// `ibv_query_port(ctx, port_num)` with the port's GID at index 0; EINVAL for a port the
    /// device does not have.
    fn query_port(&mut self, ctx: ContextHandle, port_num: u8) -> Result<PortAttr>;

    /// `ibv_alloc_pd`.
    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle>;

    /// `ibv_dealloc_pd`; EBUSY while an mkey, MR or QP uses it.
    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()>;

    /// The next asynchronous event of the context, without blocking.
    fn get_async_event(&mut self, ctx: ContextHandle) -> Result<Option<AsyncEvent>>;
}
