//! Capability pages returned by QUERY_HCA_CAP.

use super::Field;

/// `cmd_hca_cap`: the general capability page (the fields the provider reads).
pub mod cmd_hca_cap {
    use super::Field;
    /// log_max_mkey.
    pub const LOG_MAX_MKEY: Field = Field::new("log_max_mkey", 0xea, 6);
    /// log_max_klm_list_size.
    pub const LOG_MAX_KLM_LIST_SIZE: Field = Field::new("log_max_klm_list_size", 0x11a, 6);
    /// sig_crc64_xp10.
    pub const SIG_CRC64_XP10: Field = Field::new("sig_crc64_xp10", 0x147, 1);
    /// sig_crc32c.
    pub const SIG_CRC32C: Field = Field::new("sig_crc32c", 0x148, 1);
    /// sig_block_4048.
    pub const SIG_BLOCK_4048: Field = Field::new("sig_block_4048", 0x1f0, 1);
    /// umr_indirect_mkey_disabled.
    pub const UMR_INDIRECT_MKEY_DISABLED: Field = Field::new("umr_indirect_mkey_disabled", 0x209, 1);
    /// drain_sigerr.
    pub const DRAIN_SIGERR: Field = Field::new("drain_sigerr", 0x20f, 1);
    /// sigerr_cqe.
    pub const SIGERR_CQE: Field = Field::new("sigerr_cqe", 0x212, 1);
    /// sho (signature handover).
    pub const SHO: Field = Field::new("sho", 0x217, 1);
    /// aes_xts_single_block_le_tweak.
    pub const AES_XTS_SINGLE_BLOCK_LE_TWEAK: Field = Field::new("aes_xts_single_block_le_tweak", 0x3f1, 1);
    /// aes_xts_multi_block_be_tweak.
    pub const AES_XTS_MULTI_BLOCK_BE_TWEAK: Field = Field::new("aes_xts_multi_block_be_tweak", 0x3f2, 1);
    /// general_obj_types (bit n = object type n).
    pub const GENERAL_OBJ_TYPES: Field = Field::new("general_obj_types", 0x400, 64);
    /// aes_xts_multi_block_le_tweak.
    pub const AES_XTS_MULTI_BLOCK_LE_TWEAK: Field = Field::new("aes_xts_multi_block_le_tweak", 0x468, 1);
    /// crypto.
    pub const CRYPTO: Field = Field::new("crypto", 0x469, 1);
    /// sigerr_domain_and_sig_type.
    pub const SIGERR_DOMAIN_AND_SIG_TYPE: Field = Field::new("sigerr_domain_and_sig_type", 0x480, 1);

    /// Every field of this table.
    pub const ALL: &[Field] = &[
        LOG_MAX_MKEY,
        LOG_MAX_KLM_LIST_SIZE,
        SIG_CRC64_XP10,
        SIG_CRC32C,
        SIG_BLOCK_4048,
        UMR_INDIRECT_MKEY_DISABLED,
        DRAIN_SIGERR,
        SIGERR_CQE,
        SHO,
        AES_XTS_SINGLE_BLOCK_LE_TWEAK,
        AES_XTS_MULTI_BLOCK_BE_TWEAK,
        GENERAL_OBJ_TYPES,
        AES_XTS_MULTI_BLOCK_LE_TWEAK,
        CRYPTO,
        SIGERR_DOMAIN_AND_SIG_TYPE,
    ];
}

/// `crypto_caps`: the crypto capability page.
pub mod crypto_caps {
    use super::Field;
    /// wrapped_crypto_operational.
    pub const WRAPPED_CRYPTO_OPERATIONAL: Field = Field::new("wrapped_crypto_operational", 0x00, 1);
    /// wrapped_crypto_going_to_commissioning.
    pub const WRAPPED_CRYPTO_GOING_TO_COMMISSIONING: Field =
        Field::new("wrapped_crypto_going_to_commissioning", 0x01, 1);
    /// wrapped_import_method.
    pub const WRAPPED_IMPORT_METHOD: Field = Field::new("wrapped_import_method", 0x18, 8);
    /// log_max_num_deks.
    pub const LOG_MAX_NUM_DEKS: Field = Field::new("log_max_num_deks", 0x2b, 5);
    /// failed_selftests.
    pub const FAILED_SELFTESTS: Field = Field::new("failed_selftests", 0x40, 16);
    /// The `wrapped_import_method` bit that means AES-XTS key wrap.
    pub const WRAPPED_IMPORT_METHOD_AES: u64 = 0x4;

    /// Every field of this table.
    pub const ALL: &[Field] = &[
        WRAPPED_CRYPTO_OPERATIONAL,
        WRAPPED_CRYPTO_GOING_TO_COMMISSIONING,
        WRAPPED_IMPORT_METHOD,
        LOG_MAX_NUM_DEKS,
        FAILED_SELFTESTS,
    ];
}
