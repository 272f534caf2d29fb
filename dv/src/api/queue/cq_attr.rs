//! `mlx5dv_create_cq`'s vendor attributes.

use serde::{Deserialize, Serialize};

/// `struct mlx5dv_cq_init_attr`: the vendor attributes of `mlx5dv_create_cq`, as the program
/// gave them (`comp_mask` says which fields count; unknown bits are kept for the provider to
/// refuse).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvCqAttr {
    /// `MLX5DV_CQ_INIT_ATTR_MASK_*` ([`dv_cq`]).
    pub comp_mask: u64,
    /// `enum mlx5dv_cqe_comp_res_format` bits, with `COMPRESSED_CQE` in the mask.
    pub cqe_comp_res_format: u8,
    /// `MLX5DV_CQ_INIT_ATTR_FLAGS_*`, with `FLAGS` in the mask.
    pub flags: u32,
    /// 64 or 128, with `CQE_SIZE` in the mask.
    pub cqe_size: u16,
}

/// The constants of `struct mlx5dv_cq_init_attr` and of CQE compression.
pub mod dv_cq {
    /// `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`.
    pub const MASK_COMPRESSED_CQE: u64 = 1 << 0;
    /// `MLX5DV_CQ_INIT_ATTR_MASK_FLAGS`.
    pub const MASK_FLAGS: u64 = 1 << 1;
    /// `MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE`.
    pub const MASK_CQE_SIZE: u64 = 1 << 2;
    /// `MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`.
    pub const FLAGS_CQE_PAD: u32 = 1 << 0;
    /// `MLX5DV_CQ_INIT_ATTR_FLAGS_RESERVED`: this bit and those above are unknown.
    pub const FLAGS_RESERVED: u32 = 1 << 1;
    /// `MLX5DV_CQE_RES_FORMAT_HASH`: mini-CQEs carry the RSS hash.
    pub const FORMAT_HASH: u8 = 1 << 0;
    /// `MLX5DV_CQE_RES_FORMAT_CSUM`: mini-CQEs carry the checksum.
    pub const FORMAT_CSUM: u8 = 1 << 1;
    /// `MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`: the checksum and the stride index.
    pub const FORMAT_CSUM_STRIDX: u8 = 1 << 2;
}

/// `struct ibv_cq_init_attr_ex` as [`crate::Queues::create_cq_ex`] takes it, with the vendor
/// attributes of `mlx5dv_create_cq` when `dv` is set. `wc_flags` are the standard ones
/// (`IBV_WC_STANDARD_FLAGS`), no completion channel, no parent domain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CqInitAttrEx {
    /// `cqe`: the entries asked for.
    pub cqe: u32,
    /// `comp_vector`.
    pub comp_vector: u32,
    /// `IBV_CQ_INIT_ATTR_MASK_*` ([`cq_flags::MASK_FLAGS`] says `flags` counts).
    pub comp_mask: u32,
    /// `IBV_CREATE_CQ_ATTR_*` ([`cq_flags`]).
    pub flags: u32,
    /// `mlx5dv_create_cq`'s vendor attributes; `None`: `ibv_create_cq_ex`.
    pub dv: Option<DvCqAttr>,
}

/// The constants of `struct ibv_cq_init_attr_ex`'s `comp_mask` and `flags`.
pub mod cq_flags {
    /// `IBV_CQ_INIT_ATTR_MASK_FLAGS`.
    pub const MASK_FLAGS: u32 = 1 << 0;
    /// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`.
    pub const SINGLE_THREADED: u32 = 1 << 0;
    /// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`: the device writes on when the CQ is full
    /// (`cqc.oi`), raising no CQ error.
    pub const IGNORE_OVERRUN: u32 = 1 << 1;
}

/// One entry of a CQ's ring as `mlx5dv_init_obj(MLX5DV_OBJ_CQ)` shows it to a program that
/// parses the ring itself ([`crate::Queues::cq_entry`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CqEntry {
    /// `mlx5dv_cq.cqe_size`: 64 or 128; a 128-byte entry holds its `mlx5_cqe64` in its last
    /// 64 bytes.
    pub cqe_size: u32,
    /// `mlx5dv_cq.cqe_cnt`: entries in the ring.
    pub cqe_cnt: u32,
    /// The entry's `cqe_size` bytes.
    pub bytes: Vec<u8>,
}
