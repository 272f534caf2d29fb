//! Capability pages returned by QUERY_HCA_CAP (4096 bytes each; only the fields the
//! provider reads are named).

/// `cmd_hca_cap`: the general capability page (the fields the provider reads).
pub mod cmd_hca_cap {
    use crate::prm::query_hca_cap::CAPABILITY_SIZE;
    use crate::prm::view::layout;

    layout! {
        /// The general capability page, one member per named field.
        struct CmdHcaCap = "cmd_hca_cap", CAPABILITY_SIZE;
        /// hca_cap_2: the device answers the second general page (`cmd_hca_cap_2`).
        HCA_CAP_2 => hca_cap_2 / set_hca_cap_2: bool = (0x20, 1);
        /// log_max_mkey.
        LOG_MAX_MKEY => log_max_mkey / set_log_max_mkey: u8 = (0xea, 6);
        /// log_max_klm_list_size.
        LOG_MAX_KLM_LIST_SIZE => log_max_klm_list_size / set_log_max_klm_list_size: u8 = (0x11a, 6);
        /// rts2rts_qp_udp_sport: RTS2RTS sets a QP's UDP source port.
        RTS2RTS_QP_UDP_SPORT => rts2rts_qp_udp_sport / set_rts2rts_qp_udp_sport: bool = (0x151, 1);
        /// sig_crc64_xp10.
        SIG_CRC64_XP10 => sig_crc64_xp10 / set_sig_crc64_xp10: bool = (0x147, 1);
        /// sig_crc32c.
        SIG_CRC32C => sig_crc32c / set_sig_crc32c: bool = (0x148, 1);
        /// sig_block_4048.
        SIG_BLOCK_4048 => sig_block_4048 / set_sig_block_4048: bool = (0x1f0, 1);
        /// umr_indirect_mkey_disabled.
        UMR_INDIRECT_MKEY_DISABLED => umr_indirect_mkey_disabled / set_umr_indirect_mkey_disabled: bool = (0x209, 1);
        /// drain_sigerr.
        DRAIN_SIGERR => drain_sigerr / set_drain_sigerr: bool = (0x20f, 1);
        /// sigerr_cqe.
        SIGERR_CQE => sigerr_cqe / set_sigerr_cqe: bool = (0x212, 1);
        /// sho (signature handover).
        SHO => sho / set_sho: bool = (0x217, 1);
        /// imaicl: memory windows.
        IMAICL => imaicl / set_imaicl: bool = (0x231, 1);
        /// aes_xts_single_block_le_tweak.
        AES_XTS_SINGLE_BLOCK_LE_TWEAK => aes_xts_single_block_le_tweak / set_aes_xts_single_block_le_tweak: bool = (0x3f1, 1);
        /// aes_xts_multi_block_be_tweak.
        AES_XTS_MULTI_BLOCK_BE_TWEAK => aes_xts_multi_block_be_tweak / set_aes_xts_multi_block_be_tweak: bool = (0x3f2, 1);
        /// log_max_dci_stream_channels: log2 of a DCI's concurrent streams.
        LOG_MAX_DCI_STREAM_CHANNELS => log_max_dci_stream_channels / set_log_max_dci_stream_channels: u8 = (0x58b, 5);
        /// log_max_dci_errored_streams: log2 of a DCI's streams in error before the DCI is.
        LOG_MAX_DCI_ERRORED_STREAMS => log_max_dci_errored_streams / set_log_max_dci_errored_streams: u8 = (0x593, 5);
        /// general_obj_types (bit n = object type n).
        GENERAL_OBJ_TYPES => general_obj_types / set_general_obj_types: u64 = (0x400, 64);
        /// aes_xts_multi_block_le_tweak.
        AES_XTS_MULTI_BLOCK_LE_TWEAK => aes_xts_multi_block_le_tweak / set_aes_xts_multi_block_le_tweak: bool = (0x468, 1);
        /// crypto.
        CRYPTO => crypto / set_crypto: bool = (0x469, 1);
        /// sigerr_domain_and_sig_type.
        SIGERR_DOMAIN_AND_SIG_TYPE => sigerr_domain_and_sig_type / set_sigerr_domain_and_sig_type: bool = (0x480, 1);
    }
}

/// `crypto_caps`: the crypto capability page.
pub mod crypto_caps {
    use crate::prm::query_hca_cap::CAPABILITY_SIZE;
    use crate::prm::view::layout;

    /// The `wrapped_import_method` bit that means AES-XTS key wrap.
    pub const WRAPPED_IMPORT_METHOD_AES: u64 = 0x4;

    layout! {
        /// The crypto capability page, one member per named field.
        struct CryptoCaps = "crypto_caps", CAPABILITY_SIZE;
        /// wrapped_crypto_operational.
        WRAPPED_CRYPTO_OPERATIONAL => wrapped_crypto_operational / set_wrapped_crypto_operational: bool = (0x00, 1);
        /// wrapped_crypto_going_to_commissioning.
        WRAPPED_CRYPTO_GOING_TO_COMMISSIONING => wrapped_crypto_going_to_commissioning / set_wrapped_crypto_going_to_commissioning: bool = (0x01, 1);
        /// wrapped_import_method.
        WRAPPED_IMPORT_METHOD => wrapped_import_method / set_wrapped_import_method: u8 = (0x18, 8);
        /// log_max_num_deks.
        LOG_MAX_NUM_DEKS => log_max_num_deks / set_log_max_num_deks: u8 = (0x2b, 5);
        /// failed_selftests.
        FAILED_SELFTESTS => failed_selftests / set_failed_selftests: u16 = (0x40, 16);
    }
}

/// `cmd_hca_cap_2`: the second general capability page.
pub mod cmd_hca_cap_2 {
    use crate::prm::query_hca_cap::CAPABILITY_SIZE;
    use crate::prm::view::layout;

    layout! {
        /// The second general capability page.
        struct CmdHcaCap2 = "cmd_hca_cap_2", CAPABILITY_SIZE;
        /// log2 of the QP numbers one RESERVED_QPN object holds.
        LOG_RESERVED_QPN_GRANULARITY => log_reserved_qpn_granularity / set_log_reserved_qpn_granularity: u8 = (0x93, 5);
    }
}
