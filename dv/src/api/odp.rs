//! On-demand paging: the `odp_caps` of `ibv_query_device_ex` and `ibv_advise_mr`'s advice.

use serde::{Deserialize, Serialize};

/// `enum ibv_odp_general_caps` bits.
pub mod odp_general {
    /// `IBV_ODP_SUPPORT`: MRs may be registered with `IBV_ACCESS_ON_DEMAND`.
    pub const SUPPORT: u32 = 1 << 0;
    /// `IBV_ODP_SUPPORT_IMPLICIT`: `ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND)` is allowed.
    pub const IMPLICIT: u32 = 1 << 1;
}

/// `enum ibv_odp_transport_cap_bits`: what a transport may do through an ODP MR.
pub mod odp_transport {
    /// `IBV_ODP_SUPPORT_SEND`.
    pub const SEND: u32 = 1 << 0;
    /// `IBV_ODP_SUPPORT_RECV`.
    pub const RECV: u32 = 1 << 1;
    /// `IBV_ODP_SUPPORT_WRITE`.
    pub const WRITE: u32 = 1 << 2;
    /// `IBV_ODP_SUPPORT_READ`.
    pub const READ: u32 = 1 << 3;
    /// `IBV_ODP_SUPPORT_ATOMIC`.
    pub const ATOMIC: u32 = 1 << 4;
    /// `IBV_ODP_SUPPORT_SRQ_RECV`.
    pub const SRQ_RECV: u32 = 1 << 5;
}

/// `struct ibv_odp_caps` with `ibv_device_attr_ex.xrc_odp_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OdpCaps {
    /// `general_caps` ([`odp_general`] bits).
    pub general_caps: u32,
    /// `per_transport_caps.rc_odp_caps` ([`odp_transport`] bits).
    pub rc: u32,
    /// `per_transport_caps.uc_odp_caps`.
    pub uc: u32,
    /// `per_transport_caps.ud_odp_caps`.
    pub ud: u32,
    /// `xrc_odp_caps`.
    pub xrc: u32,
}

impl OdpCaps {
    /// ODP MRs can be registered at all.
    pub fn supported(&self) -> bool {
        self.general_caps & odp_general::SUPPORT != 0
    }

    /// Implicit ODP MRs can be registered.
    pub fn implicit(&self) -> bool {
        self.supported() && self.general_caps & odp_general::IMPLICIT != 0
    }
}

/// `enum ibv_advise_mr_advice`.
pub mod advise {
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH`: fault the pages in for reading.
    pub const PREFETCH: u32 = 0;
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE`: fault the pages in writable (the MR needs
    /// LOCAL_WRITE).
    pub const PREFETCH_WRITE: u32 = 1;
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`: map what is already present, fault nothing.
    pub const PREFETCH_NO_FAULT: u32 = 2;
    /// `IBV_ADVISE_MR_FLAG_FLUSH`: the prefetch is done before the call returns.
    pub const FLAG_FLUSH: u32 = 1 << 0;
}
