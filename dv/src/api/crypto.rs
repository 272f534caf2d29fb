//! Crypto offload: the crypto caps of `mlx5dv_query_device`.

use serde::{Deserialize, Serialize};

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
