//! Signature offload: `struct mlx5dv_sig_block_attr` and its domains, the signature caps, and
//! the `mlx5dv.h` values.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

bitflags! {
    /// `mlx5dv_sig_t10dif.flags` (`enum mlx5dv_sig_t10dif_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct T10difFlags: u16 {
        /// `MLX5DV_SIG_T10DIF_FLAG_REF_REMAP`: the reference tag counts up per block.
        const REF_REMAP = 1 << 0;
        /// `MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE`: an app tag of 0xffff skips the checks.
        const APP_ESCAPE = 1 << 1;
        /// `MLX5DV_SIG_T10DIF_FLAG_APP_REF_ESCAPE`: app 0xffff and ref 0xffffffff skip them.
        const APP_REF_ESCAPE = 1 << 2;
    }
}

bitflags! {
    /// `mlx5dv_sig_block_attr.flags` (`enum mlx5dv_sig_block_attr_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct SigBlockAttrFlags: u32 {
        /// `MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK`: `copy_mask` is the user's.
        const COPY_MASK = 1 << 0;
    }
}

/// `struct mlx5dv_sig_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigCaps {
    /// Bit `1 << mlx5dv_block_size` per supported block size (`MLX5DV_BLOCK_SIZE_CAP_*`).
    pub block_size: u64,
    /// `MLX5DV_SIG_PROT_CAP_T10DIF` (1) | `MLX5DV_SIG_PROT_CAP_CRC` (2).
    pub block_prot: u32,
    /// `MLX5DV_SIG_T10DIF_BG_CAP_CRC` (1) | `MLX5DV_SIG_T10DIF_BG_CAP_CSUM` (2).
    pub t10dif_bg: u16,
    /// `MLX5DV_SIG_CRC_TYPE_CAP_CRC32` (1) | `_CRC32C` (2) | `_CRC64_XP10` (4).
    pub crc_type: u16,
}

/// Signature capability bit values (`MLX5DV_*_CAP_*`).
pub mod sig_cap {
    /// `MLX5DV_SIG_PROT_CAP_T10DIF`.
    pub const PROT_T10DIF: u32 = 1 << 0;
    /// `MLX5DV_SIG_PROT_CAP_CRC`.
    pub const PROT_CRC: u32 = 1 << 1;
    /// `MLX5DV_SIG_T10DIF_BG_CAP_CRC`.
    pub const BG_CRC: u16 = 1 << 0;
    /// `MLX5DV_SIG_T10DIF_BG_CAP_CSUM`.
    pub const BG_CSUM: u16 = 1 << 1;
    /// `MLX5DV_SIG_CRC_TYPE_CAP_CRC32`.
    pub const CRC32: u16 = 1 << 0;
    /// `MLX5DV_SIG_CRC_TYPE_CAP_CRC32C`.
    pub const CRC32C: u16 = 1 << 1;
    /// `MLX5DV_SIG_CRC_TYPE_CAP_CRC64_XP10`.
    pub const CRC64_XP10: u16 = 1 << 2;
    /// `MLX5DV_BLOCK_SIZE_CAP_512`.
    pub const BLOCK_512: u64 = 1 << 0;
    /// `MLX5DV_BLOCK_SIZE_CAP_520`.
    pub const BLOCK_520: u64 = 1 << 1;
    /// `MLX5DV_BLOCK_SIZE_CAP_4048`.
    pub const BLOCK_4048: u64 = 1 << 2;
    /// `MLX5DV_BLOCK_SIZE_CAP_4096`.
    pub const BLOCK_4096: u64 = 1 << 3;
    /// `MLX5DV_BLOCK_SIZE_CAP_4160`.
    pub const BLOCK_4160: u64 = 1 << 4;
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
    pub const FLAG_REF_REMAP: super::T10difFlags = super::T10difFlags::REF_REMAP;
    /// `MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE`.
    pub const FLAG_APP_ESCAPE: super::T10difFlags = super::T10difFlags::APP_ESCAPE;
    /// `MLX5DV_SIG_T10DIF_FLAG_APP_REF_ESCAPE`.
    pub const FLAG_APP_REF_ESCAPE: super::T10difFlags = super::T10difFlags::APP_REF_ESCAPE;
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
    pub const ATTR_FLAG_COPY_MASK: super::SigBlockAttrFlags = super::SigBlockAttrFlags::COPY_MASK;
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
    pub flags: T10difFlags,
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
    pub flags: SigBlockAttrFlags,
    /// Which bytes of the input PI are checked (`MLX5DV_SIG_MASK_*`).
    pub check_mask: u8,
    /// Which bytes of the PI are copied from input to output, with `FLAG_COPY_MASK`.
    pub copy_mask: u8,
    /// Extension mask (must be 0).
    pub comp_mask: u64,
}
