//! The profile's `[hca_cap]` and `[crypto_cap]` sections: bits of the general and crypto
//! capability pages.

use serde::{Deserialize, Serialize};

use super::yes;

/// General object types a profile can list in `hca_cap.general_obj_types`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeneralObjType {
    /// DEK (0x000c).
    Dek,
    /// CRYPTO_LOGIN (0x001f).
    CryptoLogin,
    /// RESERVED_QPN (0x002c): blocks of QP numbers `mlx5dv_reserved_qpn_alloc` hands out.
    ReservedQpn,
    /// VIRTIO_NET_Q (0x000d): virtio-net emulation, which gives mlx5_ib its VAR objects
    /// (`mlx5dv_alloc_var`).
    VirtioNetQ,
    /// AV_QP_MAPPING (0x003a): `mlx5dv_map_ah_to_qp`'s address-vector-to-QP mappings.
    AvQpMapping,
}

impl GeneralObjType {
    /// The PRM object type number.
    pub fn number(self) -> u16 {
        match self {
            GeneralObjType::Dek => crate::prm::obj_type::DEK,
            GeneralObjType::CryptoLogin => crate::prm::obj_type::CRYPTO_LOGIN,
            GeneralObjType::ReservedQpn => crate::prm::obj_type::RESERVED_QPN,
            GeneralObjType::VirtioNetQ => 0x000d,
            GeneralObjType::AvQpMapping => crate::prm::obj_type::AV_QP_MAPPING,
        }
    }
}

/// `[hca_cap]`: bits of the general capability page, named as in the PRM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HcaCapSection {
    /// Signature handover.
    pub sho: bool,
    /// Signature errors report domain and type.
    pub sigerr_domain_and_sig_type: bool,
    /// 4048-byte signature blocks.
    pub sig_block_4048: bool,
    /// CRC32C block signatures.
    pub sig_crc32c: bool,
    /// CRC64_XP10 block signatures.
    pub sig_crc64_xp10: bool,
    /// Crypto offload.
    pub crypto: bool,
    /// AES-XTS single-block engine (little-endian tweak).
    pub aes_xts_single_block_le_tweak: bool,
    /// AES-XTS multi-block engine (big-endian tweak).
    pub aes_xts_multi_block_be_tweak: bool,
    /// AES-XTS multi-block engine (little-endian tweak).
    pub aes_xts_multi_block_le_tweak: bool,
    /// General object types the firmware supports.
    #[serde(default)]
    pub general_obj_types: Vec<GeneralObjType>,
    /// RTS2RTS sets a QP's RoCE v2 UDP source port (`rts2rts_qp_udp_sport`,
    /// `mlx5dv_modify_qp_udp_sport`); on unless a profile says otherwise.
    #[serde(default = "yes")]
    pub rts2rts_qp_udp_sport: bool,
    /// QP commands carry the context extension (`qpc_extension`), which
    /// `mlx5dv_dci_stream_id_reset` and `mlx5dv_modify_qp_sched_elem` need. Unverified
    /// default on.
    #[serde(default = "yes")]
    pub qpc_extension: bool,
    /// log2 of the number of mkeys.
    pub log_max_mkey: u8,
    /// log2 of the longest KLM list.
    pub log_max_klm_list_size: u8,
    /// `imaicl`: memory windows (mlx5_ib offers `ibv_alloc_mw` and advertises
    /// `IBV_DEVICE_MEM_WINDOW` and `_TYPE_2B` only with it).
    #[serde(default = "yes")]
    pub imaicl: bool,
    /// `cmd_hca_cap_2.log_reserved_qpn_granularity`: log2 of the QP numbers one RESERVED_QPN
    /// object holds (libmlx5 hands them out one by one). Unverified default 8: the value a
    /// ConnectX reports is not public.
    #[serde(default = "eight")]
    pub log_reserved_qpn_granularity: u8,
    /// `tag_matching`: tag-matching SRQs (`IBV_SRQT_TM`); ConnectX-5 and later have them.
    #[serde(default = "yes")]
    pub tag_matching: bool,
    /// `rndv_offload_rc`: the device performs a matched rendezvous's RDMA READ on RC
    /// (`IBV_TM_CAP_RC`, and `max_rndv_hdr_size` 64 in `tm_caps`).
    #[serde(default = "yes")]
    pub rndv_offload_rc: bool,
    /// `log_tag_matching_list_sz`: log2 of a matching list's entries (`tm_caps.max_num_tags`
    /// is this power of two less one). Unverified default 7 (127 tags), what `ibv_devinfo -v`
    /// shows on ConnectX-5 and ConnectX-6 hosts; each firmware reports its own.
    #[serde(default = "seven")]
    pub log_tag_matching_list_sz: u8,
    /// `cmd_hca_cap.qos` and the QoS page's `packet_pacing` and `packet_pacing_uid`: the
    /// packet pacing rate table user space allocates entries of (`mlx5dv_pp_alloc`). On unless
    /// a profile says otherwise.
    #[serde(default = "yes")]
    pub packet_pacing: bool,
    /// QoS page `packet_pacing_min_rate`, kbps. Unverified default 1: what a card reports is
    /// not public (mlx5_core logs it as 0 Mbps on ConnectX-5 and later).
    #[serde(default = "one")]
    pub packet_pacing_min_rate: u32,
    /// QoS page `packet_pacing_max_rate`, kbps. Unverified default 100000000 (100 Gb/s).
    #[serde(default = "hundred_gbps")]
    pub packet_pacing_max_rate: u32,
    /// QoS page `packet_pacing_rate_table_size`: entries of the rate table, entry 0 being the
    /// unlimited rate. Unverified default 128.
    #[serde(default = "rate_table")]
    pub packet_pacing_rate_table_size: u16,
    /// The QoS page's NIC scheduling (with `qos`): `nic_sq_scheduling`, `nic_qp_scheduling`,
    /// `nic_bw_share`, `nic_rate_limit`, TSAR and queue group elements, DWRR TSARs; what
    /// `mlx5dv_sched_node_create` and `mlx5dv_modify_qp_sched_elem` need. Unverified
    /// default on (which ConnectX reports which bits is not public).
    #[serde(default = "yes")]
    pub nic_scheduling: bool,
    /// The NIC's receive and transmit flow tables may be software-owned (the flow table
    /// pages' `sw_owner` / `sw_owner_v2`): `mlx5dv_dr` tables above the root. ConnectX-5 and
    /// later have it; on unless a profile says otherwise.
    #[serde(default = "yes")]
    pub sw_steering: bool,
    /// The NIC flow table page's packet reformat (`encap_general_header`,
    /// `log_max_packet_reformat_context`, and `reformat` in the receive and transmit table
    /// properties): L2 tunnel encapsulation on transmit and decapsulation on receive.
    /// Unverified default on (ConnectX-5 and later offload VXLAN).
    #[serde(default = "yes")]
    pub packet_reformat: bool,
    /// Doorbell pages of the virtio emulation BAR that mlx5_ib hands out as VARs (the
    /// emulation page's BAR size over its doorbell stride, one 4 KiB page each here).
    /// Unverified default 256.
    #[serde(default = "var_pages")]
    pub var_doorbell_pages: u32,
    /// `cqe_compression`: CQs of 64-byte CQEs may be compressed. On by default, as on
    /// ConnectX-4 and later.
    #[serde(default = "yes")]
    pub cqe_compression: bool,
    /// `cqe_compression_128b`: CQs of 128-byte CQEs may be compressed (`MLX5DV_CONTEXT_FLAGS_
    /// CQE_128B_COMP`). Unverified default on: whether a given firmware sets it is not public.
    #[serde(default = "yes")]
    pub cqe_compression_128b: bool,
    /// `cqe_compression_max_num`: the most CQEs one compressed session holds
    /// (`cqe_comp_caps.max_num`). Unverified default 64.
    #[serde(default = "sixty_four")]
    pub cqe_compression_max_num: u16,
    /// `mini_cqe_resp_stride_index`: mini-CQEs may carry the checksum and stride index
    /// (`MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`). Unverified default on.
    #[serde(default = "yes")]
    pub mini_cqe_resp_stride_index: bool,
    /// `cq_oi`: a CQ may be created with overrun ignore (`cqc.oi`, what
    /// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN` asks for). Unverified default on: the PRM names
    /// the bit, and which cards or firmware leave it clear is not public.
    #[serde(default = "yes")]
    pub cq_oi: bool,
    /// `max_flow_counter`: flow counters the firmware holds at once (ALLOC_FLOW_COUNTER); 0
    /// for none, when the firmware refuses the command. Unverified default 2^24: the value a
    /// ConnectX reports is not public.
    #[serde(default = "max_flow_counter")]
    pub max_flow_counter: u32,
    /// `flow_counter_bulk_alloc`: the one-bit `flow_counter_bulk` masks ALLOC_FLOW_COUNTER
    /// takes (bit n: 128 << n counters). Unverified default 0xff.
    #[serde(default = "all_bulk_masks")]
    pub flow_counter_bulk_alloc: u8,
    /// `log_max_flow_counter_bulk`: the largest `flow_counter_bulk_log_size`. Unverified
    /// default 23.
    #[serde(default = "log_max_flow_counter_bulk")]
    pub log_max_flow_counter_bulk: u8,
    /// `log_max_dci_stream_channels`: log2 of the concurrent streams a DCI may have
    /// (`dci_streams_caps.max_log_num_concurent`); 0: no DCI streams. Unverified: NVIDIA
    /// publishes no card's value; the default is 0, and the profiles of cards with DCI streams
    /// set their own.
    #[serde(default)]
    pub log_max_dci_stream_channels: u8,
    /// `log_max_dci_errored_streams`: log2 of the streams of a DCI that may be in error
    /// before the DCI itself is (`dci_streams_caps.max_log_num_errored`). Unverified, as
    /// `log_max_dci_stream_channels`.
    #[serde(default)]
    pub log_max_dci_errored_streams: u8,
}

fn sixty_four() -> u16 {
    64
}

fn one() -> u32 {
    1
}

fn hundred_gbps() -> u32 {
    100_000_000
}

fn rate_table() -> u16 {
    128
}

fn var_pages() -> u32 {
    256
}

fn max_flow_counter() -> u32 {
    1 << 24
}

fn all_bulk_masks() -> u8 {
    0xff
}

fn log_max_flow_counter_bulk() -> u8 {
    23
}

fn seven() -> u8 {
    7
}

fn eight() -> u8 {
    8
}

/// `[crypto_cap]`: the crypto capability page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CryptoCapSection {
    /// Wrapped-key (operational) mode.
    #[serde(default)]
    pub wrapped_crypto_operational: bool,
    /// The device is going to commissioning mode.
    #[serde(default)]
    pub wrapped_crypto_going_to_commissioning: bool,
    /// The raw `wrapped_import_method` byte (0x4 = AES-XTS key wrap).
    #[serde(default)]
    pub wrapped_import_method: u8,
    /// log2 of the number of DEKs.
    #[serde(default)]
    pub log_max_num_deks: u8,
    /// Failed self-test bitmask.
    #[serde(default)]
    pub failed_selftests: u16,
}
