//! QUERY_HCA_CAP: the capability pages, by `op_mod` (`cap_type << 1 | current`).
//!
//! The simulated firmware has one value per capability, so the maximum (bit 0 clear) and the
//! current page (bit 0 set) are the same bytes. It answers the general page (0x0), the NIC
//! flow table page (0x7), the QoS page (0xc, `qos.rs`) and the device memory page (0xf) on
//! every profile, and the crypto
//! page (0x1a) where the profile has crypto; other types are BAD_PARAM. The flow table page
//! has the packet reformat bits of the profile and nothing else; the device memory page is MEMIC's (`memic.rs`), zero on a
//! profile without it. The answer fills as much of the 4 KiB page as the output mailbox holds after its
//! 16-byte header (rdma-core's own tests read the general page with a 0x810-byte output).

use mlx5_dv::prm::{self, Field, FieldError, status};

use super::{Firmware, Reject, syndrome};
use crate::profile::{LinkLayer, Profile};

/// A capability page.
pub(super) type Page = Box<[u8; prm::query_hca_cap::CAPABILITY_SIZE]>;

/// Capability types (`op_mod >> 1`) this firmware answers.
pub(super) mod cap_type {
    /// The general device capabilities (`cmd_hca_cap`).
    pub const GENERAL: u16 = 0x0;
    /// On-demand paging capabilities.
    pub const ODP: u16 = 0x2;
    /// NIC flow table capabilities.
    pub const NIC_FLOW_TABLE: u16 = 0x7;
    /// Device memory (MEMIC) capabilities.
    pub const DEVICE_MEMORY: u16 = 0xf;
    /// Crypto capabilities.
    pub const CRYPTO: u16 = 0x1a;
    /// QoS capabilities (packet pacing).
    pub const QOS: u16 = 0xc;
    /// The second general page (`cmd_hca_cap_2`).
    pub const GENERAL_2: u16 = 0x20;
}

/// General-page fields beyond the ones [`prm::cmd_hca_cap`] names (positions from
/// `mlx5_ifc.h`).
mod general {
    use mlx5_dv::prm::Field;
    pub const LOG_MAX_QP_SZ: Field = Field::new("log_max_qp_sz", 0x88, 8);
    /// log2 of the WQEs of an SRQ.
    pub const LOG_MAX_SRQ_SZ: Field = Field::new("log_max_srq_sz", 0x80, 8);
    /// log2 of the SRQs.
    pub const LOG_MAX_SRQ: Field = Field::new("log_max_srq", 0xab, 5);
    pub const LOG_MAX_CQ_SZ: Field = Field::new("log_max_cq_sz", 0xc8, 8);
    pub const LOG_MAX_EQ_SZ: Field = Field::new("log_max_eq_sz", 0xe0, 8);
    pub const LOG_MAX_EQ: Field = Field::new("log_max_eq", 0xfc, 4);
    pub const PORT_TYPE: Field = Field::new("port_type", 0x1b6, 2);
    pub const NUM_PORTS: Field = Field::new("num_ports", 0x1b8, 8);
    pub const LOG_MAX_MSG: Field = Field::new("log_max_msg", 0x1c3, 5);
    /// DC transport: DCIs and DCTs.
    pub const DCT: Field = Field::new("dct", 0x21a, 1);
    pub const ROCE: Field = Field::new("roce", 0x21d, 1);
    pub const ATOMIC: Field = Field::new("atomic", 0x21e, 1);
    /// MODIFY_CQ's resize (op_mod 1), which the simulated firmware runs.
    pub const CQ_RESIZE: Field = Field::new("cq_resize", 0x221, 1);
    pub const LOG_MAX_PD: Field = Field::new("log_max_pd", 0x32b, 5);
}

/// `cmd_hca_cap.port_type` of an Ethernet port.
const PORT_TYPE_ETH: u64 = 1;

/// The largest `log_eq_size` and `log_cq_size` the firmware takes (`log_max_eq_sz`).
pub(super) const LOG_MAX_EQ_SZ: u8 = 22;

/// EQ numbers run from 0 below 2^`LOG_MAX_EQ`.
pub(super) const LOG_MAX_EQ: u8 = 8;

fn set_flag(page: &mut [u8], f: Field, on: bool) -> Result<(), FieldError> {
    f.set(page, u64::from(on))
}

fn log2_floor(v: u32) -> u64 {
    u64::from(v.max(1).ilog2())
}

/// The general page of a profile.
pub(super) fn general_page(profile: &Profile) -> Result<Page, FieldError> {
    use prm::cmd_hca_cap as c;
    let h = &profile.hca_cap;
    let mut page = Box::new([0u8; prm::query_hca_cap::CAPABILITY_SIZE]);
    let g = &mut page[..];
    set_flag(g, c::HCA_CAP_2, true)?;
    set_flag(g, c::SHO, h.sho)?;
    set_flag(g, c::IMAICL, h.imaicl)?;
    set_flag(g, c::SIGERR_DOMAIN_AND_SIG_TYPE, h.sigerr_domain_and_sig_type)?;
    set_flag(g, c::SIGERR_CQE, h.sho)?;
    set_flag(g, c::DRAIN_SIGERR, h.sho && profile.kernel.sqd2rts)?;
    set_flag(g, c::SIG_BLOCK_4048, h.sig_block_4048)?;
    set_flag(g, c::SIG_CRC32C, h.sig_crc32c)?;
    set_flag(g, c::SIG_CRC64_XP10, h.sig_crc64_xp10)?;
    set_flag(g, c::CRYPTO, h.crypto)?;
    set_flag(g, c::RTS2RTS_QP_UDP_SPORT, h.rts2rts_qp_udp_sport)?;
    set_flag(g, c::QPC_EXTENSION, h.qpc_extension)?;
    set_flag(g, c::AES_XTS_SINGLE_BLOCK_LE_TWEAK, h.aes_xts_single_block_le_tweak)?;
    set_flag(g, c::AES_XTS_MULTI_BLOCK_BE_TWEAK, h.aes_xts_multi_block_be_tweak)?;
    set_flag(g, c::AES_XTS_MULTI_BLOCK_LE_TWEAK, h.aes_xts_multi_block_le_tweak)?;
    let obj_types = h.general_obj_types.iter().fold(0u64, |m, t| m | 1u64 << t.number());
    c::GENERAL_OBJ_TYPES.set(g, obj_types)?;
    c::LOG_MAX_MKEY.set(g, u64::from(h.log_max_mkey))?;
    set_flag(g, prm::qos_cap::QOS, h.packet_pacing || h.nic_scheduling)?;
    c::LOG_MAX_KLM_LIST_SIZE.set(g, u64::from(h.log_max_klm_list_size))?;
    // Every simulated CQ may be padded; compression as the profile says.
    set_flag(g, c::CQE_128_ALWAYS, true)?;
    set_flag(g, c::CQE_COMPRESSION, h.cqe_compression)?;
    set_flag(g, c::CQE_COMPRESSION_128B, h.cqe_compression_128b)?;
    set_flag(g, c::MINI_CQE_RESP_STRIDE_INDEX, h.mini_cqe_resp_stride_index)?;
    set_flag(g, c::CQ_OI, h.cq_oi)?;
    c::CQE_COMPRESSION_MAX_NUM.set(g, u64::from(h.cqe_compression_max_num))?;
    c::LOG_MAX_DCI_STREAM_CHANNELS.set(g, u64::from(h.log_max_dci_stream_channels))?;
    c::LOG_MAX_DCI_ERRORED_STREAMS.set(g, u64::from(h.log_max_dci_errored_streams))?;
    let d = &profile.datapath;
    let eth = profile.device.link_layer == LinkLayer::Ethernet;
    let fields = [
        (general::LOG_MAX_QP_SZ, log2_floor(d.max_qp_wr)),
        (general::LOG_MAX_SRQ_SZ, u64::from(d.log_max_srq_sz)),
        (general::LOG_MAX_SRQ, u64::from(d.log_max_srq)),
        (general::LOG_MAX_CQ_SZ, u64::from(d.log_max_cq_sz.min(LOG_MAX_EQ_SZ))),
        (general::LOG_MAX_EQ_SZ, u64::from(LOG_MAX_EQ_SZ)),
        (general::LOG_MAX_EQ, u64::from(LOG_MAX_EQ)),
        (general::PORT_TYPE, if eth { PORT_TYPE_ETH } else { 0 }),
        (general::NUM_PORTS, 1),
        (general::LOG_MAX_MSG, log2_floor(d.max_msg_sz)),
        (general::ROCE, u64::from(eth)),
        (general::ATOMIC, u64::from(d.atomic)),
        (general::DCT, u64::from(d.dc)),
        (general::CQ_RESIZE, 1),
        (general::LOG_MAX_PD, 24),
    ];
    for (f, v) in fields {
        f.set(g, v)?;
    }
    use prm::flow_counter as fc;
    let max = h.max_flow_counter;
    fc::CAP_MAX_31_16.set(g, u64::from(max >> 16))?;
    fc::CAP_MAX_15_0.set(g, u64::from(max & 0xffff))?;
    // Bulks only where there are counters at all.
    let (masks, log_bulk) = if max == 0 { (0, 0) } else { (h.flow_counter_bulk_alloc, h.log_max_flow_counter_bulk) };
    fc::CAP_BULK_ALLOC.set(g, u64::from(masks))?;
    fc::CAP_LOG_MAX_BULK.set(g, u64::from(log_bulk))?;
    Ok(page)
}

/// The crypto page of a profile with crypto.
pub(super) fn crypto_page(profile: &Profile) -> Result<Option<Page>, FieldError> {
    use prm::crypto_caps as k;
    if !profile.hca_cap.crypto {
        return Ok(None);
    }
    let cc = &profile.crypto_cap;
    let mut page = Box::new([0u8; prm::query_hca_cap::CAPABILITY_SIZE]);
    let p = &mut page[..];
    set_flag(p, k::WRAPPED_CRYPTO_OPERATIONAL, cc.wrapped_crypto_operational)?;
    set_flag(p, k::WRAPPED_CRYPTO_GOING_TO_COMMISSIONING, cc.wrapped_crypto_going_to_commissioning)?;
    k::WRAPPED_IMPORT_METHOD.set(p, u64::from(cc.wrapped_import_method))?;
    k::LOG_MAX_NUM_DEKS.set(p, u64::from(cc.log_max_num_deks))?;
    k::FAILED_SELFTESTS.set(p, u64::from(cc.failed_selftests))?;
    Ok(Some(page))
}

/// The ODP page of a profile: each transport's `[odp]` bits, none without ODP support (as
/// mlx5_ib reports none then).
pub(super) fn odp_page(profile: &Profile) -> Result<Page, FieldError> {
    use prm::odp_cap as o;
    let odp = &profile.odp;
    let mut page = Box::new([0u8; prm::query_hca_cap::CAPABILITY_SIZE]);
    if odp.general_caps & mlx5_dv::odp_general::SUPPORT == 0 {
        return Ok(page);
    }
    for (base, caps) in [(o::RC, odp.rc), (o::UC, odp.uc), (o::UD, odp.ud), (o::XRC, odp.xrc), (o::DC, odp.dc)] {
        for bit in 0..o::BITS {
            o::field(base, bit).set(&mut page[..], u64::from(caps >> bit & 1))?;
        }
    }
    Ok(page)
}

/// Fields of the NIC flow table page (`flow_table_nic_cap`), positions from `mlx5_ifc.h`.
mod nic_flow {
    use mlx5_dv::prm::Field;
    pub const ENCAP_GENERAL_HEADER: Field = Field::new("encap_general_header", 0x20, 1);
    pub const LOG_MAX_PACKET_REFORMAT_CONTEXT: Field = Field::new("log_max_packet_reformat_context", 0x2b, 5);
    /// `flow_table_properties_nic_receive.reformat`.
    pub const RX_REFORMAT: Field = Field::new("flow_table_properties_nic_receive.reformat", 0x200 + 7, 1);
    /// `flow_table_properties_nic_transmit.reformat`.
    pub const TX_REFORMAT: Field = Field::new("flow_table_properties_nic_transmit.reformat", 0x800 + 7, 1);
    /// log2 of the reformat contexts. Unverified: what a card reports is not public.
    pub const LOG_REFORMAT_CONTEXTS: u64 = 16;
}

/// The NIC flow table page of a profile: its packet reformat bits; the rest zero.
pub(super) fn nic_flow_table_page(profile: &Profile) -> Result<Page, FieldError> {
    let mut page = Box::new([0u8; prm::query_hca_cap::CAPABILITY_SIZE]);
    if profile.hca_cap.packet_reformat {
        nic_flow::ENCAP_GENERAL_HEADER.set(&mut page[..], 1)?;
        nic_flow::LOG_MAX_PACKET_REFORMAT_CONTEXT.set(&mut page[..], nic_flow::LOG_REFORMAT_CONTEXTS)?;
        nic_flow::RX_REFORMAT.set(&mut page[..], 1)?;
        nic_flow::TX_REFORMAT.set(&mut page[..], 1)?;
    }
    Ok(page)
}

impl Firmware {
    pub(super) fn query_hca_cap(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use prm::query_hca_cap as q;
        let op_mod = prm::mbox_in::OP_MOD.get(input)? as u16;
        let page: &[u8] = match op_mod >> 1 {
            cap_type::GENERAL => &self.general_caps[..],
            cap_type::NIC_FLOW_TABLE => &self.nic_flow_caps[..],
            cap_type::ODP => &self.odp_caps[..],
            cap_type::DEVICE_MEMORY => &self.memic_caps[..],
            cap_type::GENERAL_2 => &self.reserved.page[..],
            cap_type::QOS => &self.qos.page[..],
            cap_type::CRYPTO => match &self.crypto_caps {
                Some(p) => &p[..],
                None => return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD)),
            },
            _ => return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD)),
        };
        // The header is there (`run` checked); the page goes into what follows it.
        let room = out.len().saturating_sub(q::CAPABILITY_BYTE).min(page.len());
        if let (Some(dst), Some(src)) = (out.get_mut(q::CAPABILITY_BYTE..q::CAPABILITY_BYTE + room), page.get(..room)) {
            dst.copy_from_slice(src);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ShippedProfiles;

    fn query(fw: &mut Firmware, op_mod: u16, out_len: usize) -> (u8, Vec<u8>) {
        let input = prm::new_input(16, prm::opcode::QUERY_HCA_CAP, 0, op_mod);
        let mut out = vec![0u8; out_len];
        fw.exec(&input, &mut out);
        (out[0], out)
    }

    #[test]
    fn max_and_current_pages_and_short_outputs() -> Result<(), Box<dyn std::error::Error>> {
        let mut fw = Firmware::new(&Profile::builtin("cx6dx")?)?;
        let (st, cur) = query(&mut fw, 1, 0x1010);
        assert_eq!(st, status::OK);
        let (st, max) = query(&mut fw, 0, 0x1010);
        assert_eq!(st, status::OK, "the maximum page (op_mod bit 0 clear)");
        assert_eq!(cur, max);
        let (st, short) = query(&mut fw, 1, 0x810);
        assert_eq!(st, status::OK, "a 0x810-byte output, as mlx5_base.is_eth reads it");
        assert_eq!(short[..], cur[..0x810]);
        assert_eq!(general::PORT_TYPE.get(&short[16..])?, PORT_TYPE_ETH);
        assert_eq!(general::NUM_PORTS.get(&short[16..])?, 1);
        for t in [cap_type::NIC_FLOW_TABLE, cap_type::DEVICE_MEMORY, cap_type::CRYPTO, cap_type::ODP] {
            assert_eq!(query(&mut fw, t << 1 | 1, 0x1010).0, status::OK, "cap type {t:#x}");
        }
        assert_eq!(query(&mut fw, 0x7e << 1 | 1, 0x1010).0, status::BAD_PARAM_ERR);
        Ok(())
    }

    #[test]
    fn the_odp_page_holds_each_transports_bits() -> Result<(), Box<dyn std::error::Error>> {
        use prm::odp_cap as o;
        let mut fw = Firmware::new(&Profile::builtin("cx6dx")?)?;
        let (st, out) = query(&mut fw, prm::query_hca_cap::OP_MOD_ODP_CUR, 0x1010);
        assert_eq!(st, status::OK);
        let page = &out[16..];
        let caps = |base| (0..o::BITS).fold(0u32, |v, b| v | (o::field(base, b).get(page).unwrap_or(0) as u32) << b);
        let odp = Profile::builtin("cx6dx")?.odp;
        let want = [odp.rc, odp.uc, odp.ud, odp.xrc, odp.dc];
        assert_eq!([o::RC, o::UC, o::UD, o::XRC, o::DC].map(caps), want);
        // rc_odp_caps.send is bit 0x80: the first bit of byte 0x10.
        assert_eq!(page[0x10] & 0x80 != 0, odp.rc & 1 != 0);
        let mut none = Profile::builtin("cx6dx")?;
        none.odp.general_caps = 0;
        assert!(odp_page(&none)?.iter().all(|&b| b == 0), "no bits without ODP support");
        Ok(())
    }
}
