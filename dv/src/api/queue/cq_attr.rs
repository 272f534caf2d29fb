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
