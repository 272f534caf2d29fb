//! Profile capture: write a real device's caps and its kernel's features in the simulator's
//! profile format, so `run --backend sim --profile FILE` imitates that card.
//!
//! The HCA capability bits are read with QUERY_HCA_CAP through DEVX, the same command and
//! fields the simulator's firmware serves. The kernel's features are probed through the
//! provider: DEVX by opening a DEVX context, tag update by creating an `UPDATE_TAG` mkey, and
//! SQD→RTS by creating a `SIG_PIPELINING` QP.

use mlx5_dv::prelude::*;
use mlx5_dv::prm::{
    Field, cmd_hca_cap as c, cmd_hca_cap_2 as c2, crypto_caps as k, flow_counter as fc, query_hca_cap as q,
};
use mlx5_dv::profile::Profile;
use mlx5_dv::profile::{
    CryptoCapSection, DeviceSection, GeneralObjType, HcaCapSection, KernelSection, LinkLayer, OdpSection,
};
use mlx5_dv::{Backend, ContextAttr, DeviceKind, Error, Op, Result};

use crate::backend::{HwBackend, devx_query};

/// Capture the profile of the backend's mlx5 device (the configured one, or the first).
pub fn capture(b: &mut HwBackend) -> Result<Profile> {
    let op = Op::Backend;
    let devices = b.device_list()?;
    let dev = devices
        .iter()
        .find(|d| d.kind == DeviceKind::Mlx5)
        .ok_or_else(|| Error::new(op, mlx5_dv::errno::ENODEV, "no mlx5 device found"))?
        .name
        .clone();
    let facts = b.info().facts;
    let devx_ctx = b.open_device(&dev, Some(&ContextAttr::devx())).ok();
    let (hca, crypto) = match devx_ctx {
        Some(ctx) => read_caps(b, ctx)?,
        None => {
            return Err(Error::new(
                op,
                mlx5_dv::errno::EOPNOTSUPP,
                "capture needs a DEVX context to read the HCA caps",
            ));
        }
    };
    let port = devx_ctx.and_then(|ctx| b.query_port(ctx, 1).ok());
    // ENODEV (no data-direct device) and EOPNOTSUPP (rdma-core < 55) both mean none to model.
    let data_direct = devx_ctx.and_then(|ctx| b.get_data_direct_sysfs_path(ctx, 4096).ok());
    let mkey_update_tag = mlx5_dv::probe::mkey_update_tag(b, &dev).unwrap_or(false);
    let sqd2rts = mlx5_dv::probe::sqd2rts(b, &dev).unwrap_or(false);
    // SAFETY: the pointer is the open DEVX context's.
    let odp = devx_ctx.and_then(|ctx| b.raw_context(ctx).ok()).and_then(|p| unsafe { b.hw_device_attr_ex(p) });
    // DC's bits as libmlx5 reads them (0 where the query fails, as there).
    let dc = devx_ctx
        .and_then(|ctx| b.query_device(ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_DC_ODP_CAPS).ok())
        .map_or(0, |q| q.dc_odp_caps);
    let odp = odp.map_or_else(OdpSection::default, |(_, o)| OdpSection {
        general_caps: o.general_caps,
        rc: o.rc,
        uc: o.uc,
        ud: o.ud,
        xrc: o.xrc,
        dc,
    });
    if let Some(ctx) = devx_ctx {
        let _ = b.close_device(ctx);
    }
    let vfio = devices.iter().find(|d| d.kind == DeviceKind::Mlx5Vfio).map(|d| d.name.clone());
    let others = devices.iter().filter(|d| d.kind == DeviceKind::Other).map(|d| d.name.clone()).collect();
    let fact = |k: &str| facts.get(k).cloned().unwrap_or_default();
    Ok(Profile {
        name: format!("captured-{dev}"),
        summary: format!(
            "captured from {dev} (board {}, fw {}, rdma-core {}, kernel {})",
            fact("board_id"),
            fact("fw_ver"),
            fact("rdma_core"),
            fact("kernel")
        ),
        device: DeviceSection {
            name: dev,
            fw_ver: fact("fw_ver"),
            board_id: fact("board_id"),
            vendor_part_id: fact("vendor_part_id").parse().unwrap_or(0),
            vfio_pci_name: vfio,
            data_direct_sysfs_path: data_direct,
            // Not captured yet: the profile's defaults.
            num_comp_vectors: 8,
            vfio_msix_vectors: 8,
            other_devices: others,
            count: devices.iter().filter(|d| d.kind == DeviceKind::Mlx5).count().clamp(1, 8) as u8,
            // A RoCE port's GID 0 is fe80::/64 + the EUI-64 the simulator derives it from.
            node_guid: port
                .filter(|p| p.link_layer == mlx5_dv::link_layer::ETHERNET)
                .and_then(|p| p.gid.0[8..].try_into().ok().map(u64::from_be_bytes))
                .unwrap_or(0),
            link_layer: match port.map(|p| p.link_layer) {
                Some(mlx5_dv::link_layer::INFINIBAND) => LinkLayer::Infiniband,
                _ => LinkLayer::Ethernet,
            },
            active_mtu: port.map_or(5, |p| p.active_mtu),
            // Not captured yet: the profile's defaults.
            hca_core_clock_khz: 1_000_000,
            completion_timestamp_mask: 0x7fff_ffff_ffff_ffff,
            // Not captured yet: the profile's default.
            max_dm_size: 128 * 1024,
        },
        kernel: KernelSection { devx: true, devx_whitelist_uid: true, mkey_update_tag, sqd2rts },
        hca_cap: hca,
        crypto_cap: crypto,
        datapath: Default::default(),
        signature: Default::default(),
        // The device's stored credentials and KEKs cannot be read: the simulator's test values.
        crypto: Default::default(),
        odp,
    })
}

fn read_caps(b: &mut HwBackend, ctx: mlx5_dv::ContextHandle) -> Result<(HcaCapSection, CryptoCapSection)> {
    let ptr = b.raw_context(ctx)?;
    let page = devx_query(b, ptr, q::OP_MOD_GENERAL_CUR)?;
    let get = |p: &[u8], f: Field| f.get(p).unwrap_or(0);
    let bit = |p: &[u8], f: Field| get(p, f) != 0;
    let obj_types = get(&page, c::GENERAL_OBJ_TYPES);
    let mut general_obj_types = Vec::new();
    for t in [
        GeneralObjType::Dek,
        GeneralObjType::CryptoLogin,
        GeneralObjType::ReservedQpn,
        GeneralObjType::VirtioNetQ,
        GeneralObjType::AvQpMapping,
    ] {
        if obj_types & (1u64 << t.number()) != 0 {
            general_obj_types.push(t);
        }
    }
    let qos = if bit(&page, mlx5_dv::prm::qos_cap::QOS) { Some(devx_query(b, ptr, q::OP_MOD_QOS_CUR)?) } else { None };
    let qos_get = |f: Field| qos.as_deref().map_or(0, |p| get(p, f));
    let hca = HcaCapSection {
        packet_pacing: qos_get(mlx5_dv::prm::qos_cap::PACKET_PACING) != 0
            && qos_get(mlx5_dv::prm::qos_cap::PACKET_PACING_UID) != 0,
        packet_pacing_min_rate: qos_get(mlx5_dv::prm::qos_cap::PACKET_PACING_MIN_RATE) as u32,
        packet_pacing_max_rate: qos_get(mlx5_dv::prm::qos_cap::PACKET_PACING_MAX_RATE) as u32,
        packet_pacing_rate_table_size: qos_get(mlx5_dv::prm::qos_cap::PACKET_PACING_RATE_TABLE_SIZE) as u16,
        // All of the NIC scheduling bits, or none: the simulator models them together.
        nic_scheduling: {
            use mlx5_dv::prm::qos_cap::{self as qc, sched};
            let types = sched::ELEMENT_TSAR_CAP | sched::ELEMENT_QUEUE_GROUP_CAP;
            [qc::NIC_SQ_SCHEDULING, qc::NIC_QP_SCHEDULING, qc::NIC_BW_SHARE, qc::NIC_RATE_LIMIT]
                .iter()
                .all(|f| qos_get(*f) != 0)
                && qos_get(qc::NIC_ELEMENT_TYPE) & types == types
                && qos_get(qc::NIC_TSAR_TYPE) & sched::TSAR_DWRR_CAP != 0
        },
        // The doorbell pages are in the virtio emulation page, which is not read: the default.
        var_doorbell_pages: 256,
        // The NIC flow table page's sw_owner bits are not read: the default (ConnectX-5 and
        // later own their NIC tables in software).
        sw_steering: true,
        // Nor its reformat bits: the default.
        packet_reformat: true,
        rts2rts_qp_udp_sport: bit(&page, c::RTS2RTS_QP_UDP_SPORT),
        qpc_extension: bit(&page, c::QPC_EXTENSION),
        sho: bit(&page, c::SHO),
        sigerr_domain_and_sig_type: bit(&page, c::SIGERR_DOMAIN_AND_SIG_TYPE),
        sig_block_4048: bit(&page, c::SIG_BLOCK_4048),
        sig_crc32c: bit(&page, c::SIG_CRC32C),
        sig_crc64_xp10: bit(&page, c::SIG_CRC64_XP10),
        crypto: bit(&page, c::CRYPTO),
        aes_xts_single_block_le_tweak: bit(&page, c::AES_XTS_SINGLE_BLOCK_LE_TWEAK),
        aes_xts_multi_block_be_tweak: bit(&page, c::AES_XTS_MULTI_BLOCK_BE_TWEAK),
        aes_xts_multi_block_le_tweak: bit(&page, c::AES_XTS_MULTI_BLOCK_LE_TWEAK),
        general_obj_types,
        log_max_mkey: get(&page, c::LOG_MAX_MKEY) as u8,
        log_max_klm_list_size: get(&page, c::LOG_MAX_KLM_LIST_SIZE) as u8,
        imaicl: bit(&page, c::IMAICL),
        log_reserved_qpn_granularity: if bit(&page, c::HCA_CAP_2) {
            let p2 = devx_query(b, ptr, q::OP_MOD_GENERAL_2_CUR)?;
            get(&p2, c2::LOG_RESERVED_QPN_GRANULARITY) as u8
        } else {
            0
        },
        // Not read from the page (the PRM tables do not name these bits yet): the defaults.
        tag_matching: true,
        rndv_offload_rc: true,
        log_tag_matching_list_sz: 7,
        cqe_compression: bit(&page, c::CQE_COMPRESSION),
        cqe_compression_128b: bit(&page, c::CQE_COMPRESSION_128B),
        cqe_compression_max_num: get(&page, c::CQE_COMPRESSION_MAX_NUM) as u16,
        mini_cqe_resp_stride_index: bit(&page, c::MINI_CQE_RESP_STRIDE_INDEX),
        cq_oi: bit(&page, c::CQ_OI),
        max_flow_counter: (get(&page, fc::CAP_MAX_31_16) << 16 | get(&page, fc::CAP_MAX_15_0)) as u32,
        flow_counter_bulk_alloc: get(&page, fc::CAP_BULK_ALLOC) as u8,
        log_max_flow_counter_bulk: get(&page, fc::CAP_LOG_MAX_BULK) as u8,
        log_max_dci_stream_channels: get(&page, c::LOG_MAX_DCI_STREAM_CHANNELS) as u8,
        log_max_dci_errored_streams: get(&page, c::LOG_MAX_DCI_ERRORED_STREAMS) as u8,
    };
    let crypto = if hca.crypto {
        let p = devx_query(b, ptr, q::OP_MOD_CRYPTO_CUR)?;
        CryptoCapSection {
            wrapped_crypto_operational: bit(&p, k::WRAPPED_CRYPTO_OPERATIONAL),
            wrapped_crypto_going_to_commissioning: bit(&p, k::WRAPPED_CRYPTO_GOING_TO_COMMISSIONING),
            wrapped_import_method: get(&p, k::WRAPPED_IMPORT_METHOD) as u8,
            log_max_num_deks: get(&p, k::LOG_MAX_NUM_DEKS) as u8,
            failed_selftests: get(&p, k::FAILED_SELFTESTS) as u16,
        }
    } else {
        CryptoCapSection::default()
    };
    Ok((hca, crypto))
}
