//! Attributes, capabilities and results, mirroring the C structs field by field with the same
//! numeric flag and enum values.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use crate::handle::{MkeyHandle, PdHandle};

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
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct ContextFlags: u32 {
        /// `MLX5DV_CONTEXT_FLAGS_DEVX`: ask for a DEVX-capable context.
        const DEVX = 1 << 0;
    }
}

/// `MLX5DV_CONTEXT_ATTR_MASK_FD_ARRAY`, the one known `mlx5dv_context_attr.comp_mask` bit.
pub const MLX5DV_CONTEXT_ATTR_MASK_FD_ARRAY: u64 = 1 << 0;

/// `struct mlx5dv_context_attr` (the `fds` array is not modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// `struct mlx5dv_crypto_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoCaps {
    /// Bitmask of failed crypto self-tests.
    pub failed_selftests: u16,
    /// `MLX5DV_CRYPTO_ENGINES_CAP_*`.
    pub crypto_engines: u8,
    /// `MLX5DV_CRYPTO_WRAPPED_IMPORT_METHOD_CAP_*`.
    pub wrapped_import_method: u8,
    /// log2 of the maximum number of DEKs.
    pub log_max_num_deks: u8,
    /// `MLX5DV_CRYPTO_CAPS_*`.
    pub flags: u32,
}

/// Crypto capability bit values.
pub mod crypto_cap {
    /// `MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS` (deprecated; never set by the provider).
    pub const ENGINE_AES_XTS: u8 = 1 << 0;
    /// `MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK`.
    pub const ENGINE_AES_XTS_SINGLE_BLOCK: u8 = 1 << 1;
    /// `MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK`.
    pub const ENGINE_AES_XTS_MULTI_BLOCK: u8 = 1 << 2;
    /// `MLX5DV_CRYPTO_WRAPPED_IMPORT_METHOD_CAP_AES_XTS`.
    pub const WRAPPED_IMPORT_AES_XTS: u8 = 1 << 0;
    /// `MLX5DV_CRYPTO_CAPS_CRYPTO`.
    pub const FLAG_CRYPTO: u32 = 1 << 0;
    /// `MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL`.
    pub const FLAG_WRAPPED_CRYPTO_OPERATIONAL: u32 = 1 << 1;
    /// `MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING`.
    pub const FLAG_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING: u32 = 1 << 2;
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
}

bitflags! {
    /// `mlx5dv_mkey_init_attr.create_flags` (`enum mlx5dv_mkey_init_attr_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MkeyInitFlags: u32 {
        /// `MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT`.
        const INDIRECT = 1 << 0;
        /// `MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE`.
        const BLOCK_SIGNATURE = 1 << 1;
        /// `MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO`.
        const CRYPTO = 1 << 2;
        /// `MLX5DV_MKEY_INIT_ATTR_FLAGS_UPDATE_TAG`.
        const UPDATE_TAG = 1 << 3;
        /// `MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE`.
        const REMOTE_INVALIDATE = 1 << 4;
    }
}

/// `struct mlx5dv_mkey_init_attr`. `max_entries` is in/out in C: the rounded value comes back
/// in [`Mkey::max_entries`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MkeyInitAttr {
    /// The PD the mkey belongs to; it also names the context.
    pub pd: PdHandle,
    /// Create flags; unknown bits are kept so they can be rejected as the provider does.
    pub create_flags: MkeyInitFlags,
    /// Requested number of translation entries.
    pub max_entries: u16,
}

/// A created mkey: `struct mlx5dv_mkey` plus the written-back `max_entries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mkey {
    /// The backend handle.
    pub handle: MkeyHandle,
    /// `mkey->lkey`: `index << 8 | tag`.
    pub lkey: u32,
    /// `mkey->rkey`: equal to `lkey`.
    pub rkey: u32,
    /// `attr->max_entries` after the call: the request rounded up to a multiple of 4 (16-bit).
    pub max_entries: u16,
}

/// `enum mlx5dv_mkey_err_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
pub enum MkeyErrType {
    /// `MLX5DV_MKEY_NO_ERR`.
    NoErr = 0,
    /// `MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD`.
    SigBlockBadGuard = 1,
    /// `MLX5DV_MKEY_SIG_BLOCK_BAD_REFTAG`.
    SigBlockBadReftag = 2,
    /// `MLX5DV_MKEY_SIG_BLOCK_BAD_APPTAG`.
    SigBlockBadApptag = 3,
}

/// `struct mlx5dv_sig_err`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SigErr {
    /// The value the device computed or found.
    pub actual_value: u64,
    /// The value the configuration expected.
    pub expected_value: u64,
    /// Block-boundary offset of the bad block within the transfer.
    pub offset: u64,
}

/// `struct mlx5dv_mkey_err`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MkeyErr {
    /// Which check failed, or `NoErr`.
    pub err_type: MkeyErrType,
    /// The signature error details (all zero for `NoErr`).
    pub sig: SigErr,
}

impl MkeyErr {
    /// The "no error" answer.
    pub const NONE: MkeyErr =
        MkeyErr { err_type: MkeyErrType::NoErr, sig: SigErr { actual_value: 0, expected_value: 0, offset: 0 } };
}
