//! Receive work queues and RSS: `ibv_create_wq`, `ibv_modify_wq`, `ibv_destroy_wq`,
//! `ibv_post_wq_recv`, `ibv_create_rwq_ind_table` and `ibv_destroy_rwq_ind_table`; an RSS QP
//! is a raw packet QP created with [`crate::QpInitAttr::rx_hash`] over an indirection table.

use serde::{Deserialize, Serialize};

use crate::handle::{ContextHandle, CqHandle, PdHandle, RwqIndTableHandle, WqHandle};

/// `enum ibv_wq_type`: `IBV_WQT_RQ`, the only type.
pub const WQT_RQ: u32 = 0;

/// `enum ibv_wq_state`.
pub mod wq_state {
    /// `IBV_WQS_RESET`.
    pub const RESET: u32 = 0;
    /// `IBV_WQS_RDY`.
    pub const RDY: u32 = 1;
    /// `IBV_WQS_ERR`.
    pub const ERR: u32 = 2;
    /// `IBV_WQS_UNKNOWN`.
    pub const UNKNOWN: u32 = 3;
}

/// `enum ibv_wq_attr_mask`.
pub mod wq_attr_mask {
    /// `IBV_WQ_ATTR_STATE`.
    pub const STATE: u32 = 1 << 0;
    /// `IBV_WQ_ATTR_CURR_STATE`.
    pub const CURR_STATE: u32 = 1 << 1;
    /// `IBV_WQ_ATTR_FLAGS`.
    pub const FLAGS: u32 = 1 << 2;
    /// `IBV_WQ_ATTR_RESERVED`: this bit and above are unknown to libibverbs.
    pub const RESERVED: u32 = 1 << 3;
}

/// `enum ibv_wq_flags`.
pub mod wq_flags {
    /// `IBV_WQ_FLAGS_CVLAN_STRIPPING`.
    pub const CVLAN_STRIPPING: u32 = 1 << 0;
    /// `IBV_WQ_FLAGS_SCATTER_FCS`.
    pub const SCATTER_FCS: u32 = 1 << 1;
    /// `IBV_WQ_FLAGS_DELAY_DROP`.
    pub const DELAY_DROP: u32 = 1 << 2;
    /// `IBV_WQ_FLAGS_PCI_WRITE_END_PADDING`.
    pub const PCI_WRITE_END_PADDING: u32 = 1 << 3;
    /// `IBV_WQ_FLAGS_RESERVED`.
    pub const RESERVED: u32 = 1 << 4;
}

/// `enum ibv_wq_init_attr_mask`.
pub mod wq_init_mask {
    /// `IBV_WQ_INIT_ATTR_FLAGS`: `create_flags` is valid.
    pub const FLAGS: u32 = 1 << 0;
    /// `IBV_WQ_INIT_ATTR_RESERVED`.
    pub const RESERVED: u32 = 1 << 1;
}

/// `enum ibv_rx_hash_fields`.
pub mod rx_hash_fields {
    /// `IBV_RX_HASH_SRC_IPV4`.
    pub const SRC_IPV4: u64 = 1 << 0;
    /// `IBV_RX_HASH_DST_IPV4`.
    pub const DST_IPV4: u64 = 1 << 1;
    /// `IBV_RX_HASH_SRC_IPV6`.
    pub const SRC_IPV6: u64 = 1 << 2;
    /// `IBV_RX_HASH_DST_IPV6`.
    pub const DST_IPV6: u64 = 1 << 3;
    /// `IBV_RX_HASH_SRC_PORT_TCP`.
    pub const SRC_PORT_TCP: u64 = 1 << 4;
    /// `IBV_RX_HASH_DST_PORT_TCP`.
    pub const DST_PORT_TCP: u64 = 1 << 5;
    /// `IBV_RX_HASH_SRC_PORT_UDP`.
    pub const SRC_PORT_UDP: u64 = 1 << 6;
    /// `IBV_RX_HASH_DST_PORT_UDP`.
    pub const DST_PORT_UDP: u64 = 1 << 7;
    /// `IBV_RX_HASH_IPSEC_SPI`.
    pub const IPSEC_SPI: u64 = 1 << 8;
    /// `IBV_RX_HASH_INNER`: hash the inner headers of a tunnelled packet.
    pub const INNER: u64 = 1 << 31;
}

/// `IBV_RX_HASH_FUNC_TOEPLITZ`.
pub const RX_HASH_FUNC_TOEPLITZ: u8 = 1;

/// The length of the Toeplitz key mlx5 takes (the TIR's `rx_hash_toeplitz_key`).
pub const TOEPLITZ_KEY_LEN: usize = 40;

/// `struct ibv_wq_init_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WqInitAttr {
    /// `pd`.
    pub pd: PdHandle,
    /// `cq`: where the WQ's receives complete.
    pub cq: CqHandle,
    /// `wq_type` ([`WQT_RQ`]).
    pub wq_type: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `comp_mask` ([`wq_init_mask`]).
    pub comp_mask: u32,
    /// `create_flags` ([`wq_flags`]), read with [`wq_init_mask::FLAGS`].
    pub create_flags: u32,
}

impl WqInitAttr {
    /// A receive WQ of `max_wr` WRs of `max_sge` SGEs completing on `cq`, no flags.
    pub fn rq(pd: PdHandle, cq: CqHandle, max_wr: u32, max_sge: u32) -> Self {
        WqInitAttr { pd, cq, wq_type: WQT_RQ, max_wr, max_sge, comp_mask: 0, create_flags: 0 }
    }
}

/// A created WQ (`struct ibv_wq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wq {
    /// The backend handle.
    pub handle: WqHandle,
    /// `wq_num`.
    pub wq_num: u32,
    /// `max_wr` as the kernel wrote it back.
    pub max_wr: u32,
    /// `max_sge` as the kernel wrote it back.
    pub max_sge: u32,
}

/// `struct ibv_wq_attr` (`ibv_modify_wq`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WqAttr {
    /// `attr_mask` ([`wq_attr_mask`]).
    pub attr_mask: u32,
    /// `wq_state` ([`wq_state`]).
    pub wq_state: u32,
    /// `curr_wq_state`.
    pub curr_wq_state: u32,
    /// `flags`.
    pub flags: u32,
    /// `flags_mask`: which of `flags` change.
    pub flags_mask: u32,
}

impl WqAttr {
    /// A move to `state` (`IBV_WQ_ATTR_STATE` alone).
    pub fn to(state: u32) -> Self {
        WqAttr { attr_mask: wq_attr_mask::STATE, wq_state: state, ..WqAttr::default() }
    }
}

/// `struct ibv_rwq_ind_table_init_attr`; `wqs` holds the `1 << log_ind_tbl_size` entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RwqIndTableInitAttr {
    /// The context the table is made on.
    pub ctx: ContextHandle,
    /// `log_ind_tbl_size`.
    pub log_ind_tbl_size: u32,
    /// `ind_tbl`: the WQs, in table order.
    pub wqs: Vec<WqHandle>,
    /// `comp_mask` (must be 0).
    pub comp_mask: u32,
}

/// A created indirection table (`struct ibv_rwq_ind_table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RwqIndTable {
    /// The backend handle.
    pub handle: RwqIndTableHandle,
    /// `ind_tbl_num`.
    pub ind_tbl_num: u32,
}

/// `struct ibv_rx_hash_conf`: the key is kept in a fixed array, `key_len` bytes of it given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxHashConf {
    /// `rx_hash_function` ([`RX_HASH_FUNC_TOEPLITZ`]).
    pub function: u8,
    /// `rx_hash_key_len`.
    pub key_len: u32,
    /// `rx_hash_key`: its first `key_len` bytes (up to 40; a longer key is refused by its
    /// length alone).
    #[serde(with = "key_bytes")]
    pub key: [u8; TOEPLITZ_KEY_LEN],
    /// `rx_hash_fields_mask` ([`rx_hash_fields`]).
    pub fields_mask: u64,
}

impl RxHashConf {
    /// Toeplitz with a 40-byte `key` over `fields_mask`.
    pub fn toeplitz(key: [u8; TOEPLITZ_KEY_LEN], fields_mask: u64) -> Self {
        RxHashConf { function: RX_HASH_FUNC_TOEPLITZ, key_len: TOEPLITZ_KEY_LEN as u32, key, fields_mask }
    }
}

/// The key as a byte list (serde has no 40-element arrays).
mod key_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::TOEPLITZ_KEY_LEN;

    pub fn serialize<S: Serializer>(k: &[u8; TOEPLITZ_KEY_LEN], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(k)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; TOEPLITZ_KEY_LEN], D::Error> {
        let v = Vec::<u8>::deserialize(d)?;
        let mut k = [0u8; TOEPLITZ_KEY_LEN];
        let n = v.len().min(TOEPLITZ_KEY_LEN);
        k[..n].copy_from_slice(&v[..n]);
        Ok(k)
    }
}

/// `struct ibv_rss_caps` as `ibv_query_device_ex` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RssCaps {
    /// `supported_qpts`: `1 << IBV_QPT_RAW_PACKET`.
    pub supported_qpts: u32,
    /// `max_rwq_indirection_tables`.
    pub max_rwq_indirection_tables: u32,
    /// `max_rwq_indirection_table_size`.
    pub max_rwq_indirection_table_size: u32,
    /// `rx_hash_fields_mask`.
    pub rx_hash_fields_mask: u64,
    /// `rx_hash_function`.
    pub rx_hash_function: u8,
}
