//! [`Caps`]: everything a backend knows about what its device, kernel and library can do.
//! The conformance harness decides which cases run from this alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::crypto::{CryptoCaps, crypto_cap};
use crate::api::signature::SigCaps;

/// What a backend can tell about the kernel side of the stack. `None` means "cannot tell":
/// conformance cases that depend on the answer are then skipped with that reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFacts {
    /// The kernel grants DEVX user contexts (`MLX5_IB_ALLOC_UCTX_DEVX`).
    pub devx: Option<bool>,
    /// The kernel reports `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG`.
    pub mkey_update_tag: Option<bool>,
    /// The kernel reports `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS`.
    pub sqd2rts: Option<bool>,
}

/// What the first mlx5 device reports through `mlx5dv_query_device` and its cap pages.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCaps {
    /// `mlx5dv_context.sig_caps` as an `ibv_open_device` context reads them.
    pub sig: SigCaps,
    /// `mlx5dv_context.crypto_caps`.
    pub crypto: CryptoCaps,
    /// `general_obj_types` of the HCA caps (bit per object type), where known.
    pub general_obj_types: Option<u64>,
    /// `log_max_cq_sz`, where known.
    pub log_max_cq_sz: Option<u8>,
    /// `ibv_device_attr.max_qp_wr`, where known.
    pub max_qp_wr: Option<u32>,
    /// The DMA engine behind `MLX5DV_QP_EX_WITH_MEMCPY` (`dma_mmo_qp`), where known.
    pub dma_mmo: Option<bool>,
    /// Out-of-order data placement on RC QPs (`MLX5DV_QP_CREATE_OOO_DP`), where known.
    pub ooo_dp: Option<bool>,
    /// `ibv_device_attr.max_srq_wr`, where known (0: no SRQs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_srq_wr: Option<u32>,
    /// `ibv_device_attr_ex.max_dm_size` (0: no device memory), where known.
    pub max_dm_size: Option<u64>,
    /// Raw packet QPs (`IBV_QPT_RAW_PACKET`) on the first port, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_packet: Option<bool>,
    /// `ibv_device_attr_ex.odp_caps` and `xrc_odp_caps`, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub odp: Option<crate::api::odp::OdpCaps>,
    /// `ibv_device_attr_ex.tm_caps`, where the backend has tag-matching SRQs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tm: Option<TmCaps>,
}

/// `struct ibv_tm_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmCaps {
    /// `max_rndv_hdr_size`: the longest rendezvous request (TMH, RVH and any more).
    pub max_rndv_hdr_size: u32,
    /// `max_num_tags`: tags a matching list holds.
    pub max_num_tags: u32,
    /// `flags` (`IBV_TM_CAP_RC`).
    pub flags: u32,
    /// `max_ops`: outstanding list operations.
    pub max_ops: u32,
    /// `max_sge`: SGEs of a tagged buffer.
    pub max_sge: u32,
}

/// `IBV_TM_CAP_RC`: tag matching (with rendezvous offload) on RC QPs.
pub const TM_CAP_RC: u32 = 1 << 0;

impl TmCaps {
    /// What mlx5_ib's query_device derives from the HCA caps: `tag_matching` gives
    /// `max_num_tags = 2^log_tag_matching_list_sz - 1`, `max_ops = 2^log_max_qp_sz` and one
    /// SGE; `rndv_offload_rc` adds `IBV_TM_CAP_RC` and `max_rndv_hdr_size` 64
    /// (`MLX5_TM_MAX_RNDV_MSG_SIZE`). `None` without `tag_matching`.
    pub fn of_hca(tag_matching: bool, rndv_offload_rc: bool, log_list_sz: u8, max_qp_wr: u32) -> Option<Self> {
        tag_matching.then(|| {
            let mut t = TmCaps {
                max_num_tags: (1u32 << log_list_sz.min(31)) - 1,
                max_ops: max_qp_wr,
                max_sge: 1,
                ..TmCaps::default()
            };
            if rndv_offload_rc {
                (t.flags, t.max_rndv_hdr_size) = (TM_CAP_RC, 64);
            }
            t
        })
    }
}

impl DeviceCaps {
    /// The device has an AES-XTS single- or multi-block engine.
    pub fn has_crypto_engine(&self) -> bool {
        let engines = crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK;
        self.crypto.crypto_engines & engines != 0
    }
}

/// What the user-space libraries offer.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryFacts {
    /// The rdma-core release of libmlx5 (`44.0`), where known.
    pub rdma_core: Option<String>,
    /// Optional libmlx5 symbols (added after rdma-core 44) and whether they are present.
    pub optional_symbols: BTreeMap<String, bool>,
    /// Receive completions report the flow tag ([`crate::Wc::flow_tag`]): `Some(true)` where
    /// the backend reads it, `None` where it polls without it (`ibv_poll_cq` has no tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wc_flow_tag: Option<bool>,
}

/// A backend's capabilities: device caps, kernel facts and library facts.
///
/// A capability is data, never the presence of a method: a call the device lacks still exists
/// and answers EOPNOTSUPP, which is itself behaviour under test.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    /// The first mlx5 device's caps.
    pub device: DeviceCaps,
    /// The kernel's features.
    pub kernel: KernelFacts,
    /// The libraries' features.
    pub library: LibraryFacts,
    /// The backend offers [`crate::SimControl`] (fault injection, command and WQE logs).
    pub sim_control: bool,
}
