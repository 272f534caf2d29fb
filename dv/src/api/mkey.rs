//! mkeys: `mlx5dv_create_mkey`, `mlx5dv_destroy_mkey`, `mlx5dv_mkey_check`.

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::handle::{MkeyHandle, PdHandle};

bitflags! {
    /// `mlx5dv_mkey_init_attr.create_flags` (`enum mlx5dv_mkey_init_attr_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MkeyInitAttr {
    /// The PD the mkey belongs to; it also names the context.
    pub pd: PdHandle,
    /// Create flags; unknown bits are kept so they can be rejected as the provider does.
    pub create_flags: MkeyInitFlags,
    /// Requested number of translation entries.
    pub max_entries: u16,
}

/// A created mkey: `struct mlx5dv_mkey` plus the written-back `max_entries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// The mlx5dv mkey calls.
pub trait Mkeys {
    /// `mlx5dv_create_mkey`.
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey>;

    /// `mlx5dv_destroy_mkey`.
    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()>;

    /// `mlx5dv_mkey_check`.
    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr>;
}
