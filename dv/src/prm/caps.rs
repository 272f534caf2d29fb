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
        /// qpc_extension: QP commands carry `qpc_data_ext` (DCI stream ids, queue groups).
        QPC_EXTENSION => qpc_extension / set_qpc_extension: bool = (0x122, 1);
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
        /// cq_oi: a CQ may ignore overrun (`cqc.oi`).
        CQ_OI => cq_oi / set_cq_oi: bool = (0x220, 1);
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
        /// mini_cqe_resp_stride_index: mini-CQEs may carry the stride index.
        MINI_CQE_RESP_STRIDE_INDEX => mini_cqe_resp_stride_index / set_mini_cqe_resp_stride_index: bool = (0x5bc, 1);
        /// cqe_128_always: 128-byte CQEs may be padded.
        CQE_128_ALWAYS => cqe_128_always / set_cqe_128_always: bool = (0x5bd, 1);
        /// cqe_compression_128b: CQ compression of 128-byte CQEs.
        CQE_COMPRESSION_128B => cqe_compression_128b / set_cqe_compression_128b: bool = (0x5be, 1);
        /// cqe_compression: CQ compression of 64-byte CQEs.
        CQE_COMPRESSION => cqe_compression / set_cqe_compression: bool = (0x5bf, 1);
        /// cqe_compression_timeout.
        CQE_COMPRESSION_TIMEOUT => cqe_compression_timeout / set_cqe_compression_timeout: u16 = (0x5c0, 16);
        /// cqe_compression_max_num: the most CQEs one compressed session holds.
        CQE_COMPRESSION_MAX_NUM => cqe_compression_max_num / set_cqe_compression_max_num: u16 = (0x5d0, 16);
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

/// The ODP capability page (`odp_cap`): per transport, which operations may fault on ODP
/// pages; positions from the kernel's `mlx5_ifc.h`.
pub mod odp_cap {
    use crate::prm::Field;

    /// Bit offset of `rc_odp_caps`.
    pub const RC: u32 = 0x80;
    /// Bit offset of `uc_odp_caps`.
    pub const UC: u32 = 0xa0;
    /// Bit offset of `ud_odp_caps`.
    pub const UD: u32 = 0xc0;
    /// Bit offset of `xrc_odp_caps`.
    pub const XRC: u32 = 0xe0;
    /// Bit offset of `dc_odp_caps`.
    pub const DC: u32 = 0x100;
    /// Bits of one `odp_per_transport_service_cap` in the order of `enum
    /// ibv_odp_transport_cap_bits` (bit `i` of the verbs value is the `i`-th field): send,
    /// receive, write, read, atomic, srq_receive.
    pub const BITS: u32 = 6;

    /// The field of verbs bit `bit` (0 to 5) of the transport at `base`.
    pub const fn field(base: u32, bit: u32) -> Field {
        Field::new("odp_per_transport_service_cap", base + bit, 1)
    }
}

/// The QoS capability page (`qos_cap`) and the general page's bits about it; positions from
/// the kernel's `mlx5_ifc.h`.
pub mod qos_cap {
    use crate::prm::Field;

    /// `cmd_hca_cap.qos`: the device has a QoS page.
    pub const QOS: Field = Field::new("qos", 0x21b, 1);
    /// `cmd_hca_cap.num_lag_ports`: ports a LAG may bond (0 or 1 on a device without LAG).
    pub const NUM_LAG_PORTS: Field = Field::new("num_lag_ports", 0x27c, 4);
    /// `cmd_hca_cap.lag_tx_port_affinity`.
    pub const LAG_TX_PORT_AFFINITY: Field = Field::new("lag_tx_port_affinity", 0x278, 1);
    /// `packet_pacing`: the packet pacing rate table.
    pub const PACKET_PACING: Field = Field::new("packet_pacing", 0x0, 1);
    /// `nic_sq_scheduling`: send queues (raw packet QPs) join queue groups.
    pub const NIC_SQ_SCHEDULING: Field = Field::new("nic_sq_scheduling", 0x8, 1);
    /// `nic_bw_share`: scheduling elements take a bandwidth share.
    pub const NIC_BW_SHARE: Field = Field::new("nic_bw_share", 0x9, 1);
    /// `nic_rate_limit`: scheduling elements take a maximum average bandwidth.
    pub const NIC_RATE_LIMIT: Field = Field::new("nic_rate_limit", 0xa, 1);
    /// `nic_qp_scheduling`: QPs join queue groups (through `qpc_data_ext`).
    pub const NIC_QP_SCHEDULING: Field = Field::new("nic_qp_scheduling", 0x21, 1);
    /// `nic_element_type`: the element types of the NIC hierarchy (bit per type:
    /// [`sched::ELEMENT_TSAR_CAP`], [`sched::ELEMENT_QUEUE_GROUP_CAP`]).
    pub const NIC_ELEMENT_TYPE: Field = Field::new("nic_element_type", 0x100, 16);
    /// `nic_tsar_type`: the TSAR types of the NIC hierarchy ([`sched::TSAR_DWRR_CAP`]).
    pub const NIC_TSAR_TYPE: Field = Field::new("nic_tsar_type", 0x110, 16);

    /// Scheduling elements: `sched_elem` in CREATE, MODIFY and QUERY_GENERAL_OBJECT of
    /// [`obj_type::SCHEDULING_ELEMENT`](crate::prm::obj_type::SCHEDULING_ELEMENT), at its bit
    /// positions in the whole mailbox (after the 16-byte header).
    pub mod sched {
        use crate::prm::Field;

        /// Bytes of the input of CREATE and MODIFY, and of QUERY's output.
        pub const SIZE: usize = 0x90;
        /// `modify_field_select`: which of `bw_share` ([`SELECT_BW_SHARE`]) and
        /// `max_average_bw` ([`SELECT_MAX_AVERAGE_BW`]) the command sets.
        pub const MODIFY_FIELD_SELECT: Field = Field::new("modify_field_select", 0x80, 64);
        /// `scheduling_hierarchy` ([`HIERARCHY_NIC`]).
        pub const SCHEDULING_HIERARCHY: Field = Field::new("scheduling_hierarchy", 0xc0, 8);
        /// `sched_context.element_type` ([`ELEMENT_TSAR`], [`ELEMENT_QUEUE_GROUP`]).
        pub const ELEMENT_TYPE: Field = Field::new("element_type", 0x180, 8);
        /// `sched_context.sched_elem_attr.tsar.tsar_type` ([`TSAR_DWRR`]).
        pub const TSAR_TYPE: Field = Field::new("tsar_type", 0x1a8, 8);
        /// `sched_context.parent_element_id` (0: the hierarchy's root).
        pub const PARENT_ELEMENT_ID: Field = Field::new("parent_element_id", 0x1c0, 32);
        /// `sched_context.bw_share`.
        pub const BW_SHARE: Field = Field::new("bw_share", 0x220, 32);
        /// `sched_context.max_average_bw`.
        pub const MAX_AVERAGE_BW: Field = Field::new("max_average_bw", 0x240, 32);
        /// `modify_field_select` bit of `bw_share` (libmlx5 passes its
        /// `MLX5DV_SCHED_ELEM_ATTR_FLAGS_BW_SHARE`).
        pub const SELECT_BW_SHARE: u64 = 1 << 0;
        /// `modify_field_select` bit of `max_average_bw` (`MLX5DV_SCHED_ELEM_ATTR_FLAGS_MAX_AVG_BW`).
        pub const SELECT_MAX_AVERAGE_BW: u64 = 1 << 1;
        /// `MLX5_SCHED_HIERARCHY_NIC`.
        pub const HIERARCHY_NIC: u64 = 3;
        /// `MLX5_SCHED_ELEM_TYPE_TSAR`: an inner node.
        pub const ELEMENT_TSAR: u64 = 0;
        /// `MLX5_SCHED_ELEM_TYPE_QUEUE_GROUP`: a leaf QPs join.
        pub const ELEMENT_QUEUE_GROUP: u64 = 4;
        /// `MLX5_SCHED_TSAR_TYPE_DWRR`.
        pub const TSAR_DWRR: u64 = 0;
        /// `nic_element_type` bit of TSARs.
        pub const ELEMENT_TSAR_CAP: u64 = 1 << 0;
        /// `nic_element_type` bit of queue groups.
        pub const ELEMENT_QUEUE_GROUP_CAP: u64 = 1 << 4;
        /// `nic_tsar_type` bit of DWRR.
        pub const TSAR_DWRR_CAP: u64 = 1 << 0;
    }
    /// `packet_pacing_uid`: rate table entries carry the uid that set them.
    pub const PACKET_PACING_UID: Field = Field::new("packet_pacing_uid", 0xb, 1);
    /// `packet_pacing_max_rate`, kbps.
    pub const PACKET_PACING_MAX_RATE: Field = Field::new("packet_pacing_max_rate", 0x40, 32);
    /// `packet_pacing_min_rate`, kbps.
    pub const PACKET_PACING_MIN_RATE: Field = Field::new("packet_pacing_min_rate", 0x60, 32);
    /// `packet_pacing_rate_table_size`: entries, entry 0 being the unlimited rate.
    pub const PACKET_PACING_RATE_TABLE_SIZE: Field = Field::new("packet_pacing_rate_table_size", 0x90, 16);
}

/// SET_PP_RATE_LIMIT (0x780) and its `set_pp_rate_limit_context`.
pub mod pp {
    use crate::prm::Field;

    /// The opcode.
    pub const SET_PP_RATE_LIMIT: u16 = 0x780;
    /// `rate_limit_index` of the input.
    pub const RATE_LIMIT_INDEX: Field = Field::new("rate_limit_index", 0x50, 16);
    /// Where the context starts in the input (bytes).
    pub const CONTEXT_BYTE: usize = 0x10;
    /// `sizeof(set_pp_rate_limit_context)`.
    pub const CONTEXT_SIZE: usize = 48;
    /// The input's size: header, index and context.
    pub const IN_SIZE: usize = CONTEXT_BYTE + CONTEXT_SIZE;
    /// `rate_limit` of the context, kbps.
    pub const RATE_LIMIT: Field = Field::new("rate_limit", 0x0, 32);
    /// `MLX5_SHARED_RESOURCE_UID`: the uid of an entry any context may share.
    pub const SHARED_RESOURCE_UID: u16 = 0xffff;
}
