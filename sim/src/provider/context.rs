//! Contexts and PDs: `mlx5_alloc_context` with its DEVX choice and capability query,
//! `mlx5dv_query_device`, ports, PDs, async events, and closing a context.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, opcode};
use mlx5_dv::{
    AsyncEvent, ContextAttr, ContextFlags, ContextHandle, DeviceDesc, DeviceKind, DvContext, Error, Op, PdHandle,
    PortAttr, Result, crypto_cap, sig_cap,
};

use super::{Ctx, CtxCaps, CtxKind, Lower, Pd, Provider};
use crate::device::Device;
use crate::kernel::{self, DevxUid};

impl Provider {
    /// `ibv_get_device_list`.
    pub(crate) fn device_list(&self) -> Vec<DeviceDesc> {
        self.device_list.clone()
    }

    /// The kind of the device named `name` and, for an mlx5 kernel device, its index.
    /// The VFIO function is the device after the kernel's mlx5 devices.
    fn find_device(&self, name: &str, op: Op) -> Result<(DeviceKind, usize)> {
        let mut mlx5 = 0;
        for d in &self.device_list {
            if d.name == name {
                return Ok((d.kind, if d.kind == DeviceKind::Other { 0 } else { mlx5 }));
            }
            mlx5 += usize::from(d.kind == DeviceKind::Mlx5);
        }
        Err(Error::new(op, mlx5_dv::errno::ENODEV, format!("no device named {name}")))
    }

    pub(super) fn ctx(&self, h: ContextHandle, op: Op) -> Result<&Ctx> {
        self.contexts.get(h, op)
    }

    fn add_context(
        &mut self,
        low: &mut Lower<'_>,
        kind: CtxKind,
        caps: CtxCaps,
        dev: usize,
        op: Op,
    ) -> Result<ContextHandle> {
        let h = self.contexts.insert(op, Ctx { kind, caps, dev })?;
        low.kernel.track_context(h.id());
        Ok(h)
    }

    /// `mlx5dv_open_device`.
    pub(crate) fn open_device(
        &mut self,
        low: &mut Lower<'_>,
        device: &str,
        attr: Option<&ContextAttr>,
    ) -> Result<ContextHandle> {
        let op = Op::OpenDevice;
        let dev = match self.find_device(device, op)? {
            (DeviceKind::Mlx5, dev) => dev,
            (DeviceKind::Mlx5Vfio | DeviceKind::Other, _) => {
                return Err(Error::new(op, EOPNOTSUPP, format!("{device} is not an mlx5 kernel device")));
            }
        };
        let (flags, comp_mask) = attr.map_or((0, 0), |a| (a.flags.bits(), a.comp_mask));
        if comp_mask & !mlx5_dv::MLX5DV_CONTEXT_ATTR_MASK_FD_ARRAY != 0 {
            return Err(Error::new(op, EINVAL, format!("unknown comp_mask bits 0x{comp_mask:x}")));
        }
        if flags & !ContextFlags::DEVX.bits() != 0 {
            return Err(Error::new(op, EINVAL, format!("unknown context flags 0x{flags:x}")));
        }
        self.open_kernel_context(low, dev, flags == 0, op)
    }

    /// `ibv_open_device`.
    pub(crate) fn open_ibv_device(&mut self, low: &mut Lower<'_>, device: &str) -> Result<ContextHandle> {
        let op = Op::IbvOpenDevice;
        match self.find_device(device, op)? {
            (DeviceKind::Mlx5, dev) => self.open_kernel_context(low, dev, true, op),
            (DeviceKind::Mlx5Vfio, dev) => {
                let h = self.add_context(low, CtxKind::Vfio, CtxCaps::default(), dev, op)?;
                if let Err(e) = self.init_vfio(low, h, dev, self.vfio_vectors) {
                    let _ = self.close_device(low, h);
                    return Err(e);
                }
                Ok(h)
            }
            // Other providers need no firmware.
            (DeviceKind::Other, _) => self.add_context(low, CtxKind::Other, CtxCaps::default(), 0, op),
        }
    }

    /// `mlx5_alloc_context` for a kernel mlx5 device: DEVX as asked, kernel flags, then the
    /// capability query.
    fn open_kernel_context(
        &mut self,
        low: &mut Lower<'_>,
        dev: usize,
        fallback: bool,
        op: Op,
    ) -> Result<ContextHandle> {
        let h = self.contexts.insert(op, Ctx { kind: CtxKind::Other, caps: CtxCaps::default(), dev })?;
        let devx = match low.kernel.open_context(h.id(), true, fallback) {
            Ok(d) => d,
            Err(e) => {
                let _ = self.contexts.take(h, op);
                return Err(Error::new(op, e, "the kernel refused a DEVX context"));
            }
        };
        low.kernel.set_context_device(h.id(), dev);
        let mut caps = low.devices.get_mut(dev).map(|d| query_caps(d, devx)).unwrap_or_default();
        // mlx5_query_device_ex at context creation: the kernel's response keeps cqe_comp_caps
        // and the CQE flags; a failed query leaves them 0.
        caps.cq = low.devices.get_mut(dev).and_then(|d| kernel::cq_caps(d, op).ok()).unwrap_or_default();
        let update_tag = low.kernel.facts().mkey_update_tag;
        if let Ok(c) = self.contexts.get_mut(h, op) {
            *c = Ctx { kind: CtxKind::Kernel { devx, update_tag }, caps, dev };
        }
        Ok(h)
    }

    /// `ibv_close_device`: the provider forgets the context's objects; the kernel destroys
    /// its QPs, CQs and MRs, what its DEVX uid still owns in firmware, and its PDs.
    pub(crate) fn close_device(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) -> Result<()> {
        let op = Op::CloseDevice;
        let c = self.ctx(ctx, op)?.clone();
        self.forget_matchers_of(low, ctx);
        self.dr_forget_context(low, ctx);
        self.release_queues_of(low, ctx);
        self.release_dms_of(low, ctx);
        self.release_mws_of(low, ctx);
        for h in self.mkeys.handles_where(|m| m.ctx == ctx) {
            let _ = self.mkeys.take(h, op);
        }
        self.crypto.forget_context(ctx);
        self.reserved.forget_context(ctx);
        low.kernel.close_qos_objects(low.devices, ctx.id());
        self.close_devx_of(low, ctx);
        if let (CtxKind::Kernel { devx, .. }, Some(d)) = (c.kind, low.devices.get_mut(c.dev)) {
            low.kernel.close_devx_objects(d, devx);
        }
        for h in self.pds.handles_where(|p| p.ctx == ctx) {
            if let (Ok(p), Some(d)) = (self.pds.take(h, op), low.devices.get_mut(c.dev))
                && let Some(pdn) = p.pdn
            {
                let _ = kernel::dealloc_pd(d, pdn, op);
            }
        }
        low.kernel.forget_context(ctx.id());
        let _ = self.contexts.take(ctx, op);
        Ok(())
    }

    /// `mlx5dv_query_device` with the caps found at open.
    pub(crate) fn query_device(&self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext> {
        let op = Op::QueryDevice;
        let c = self.ctx(ctx, op)?;
        if !c.is_kernel() {
            return Err(Error::new(op, EOPNOTSUPP, "this context has no query_device op (VFIO or non-mlx5)"));
        }
        let mut out = DvContext::default();
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD;
            out.sig_caps = c.caps.sig;
        }
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD;
            out.crypto_caps = c.caps.crypto;
        }
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH;
            out.max_wr_memcpy_length = self.limits.dma_max_size();
        }
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_CQE_COMPRESION != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_CQE_COMPRESION;
            out.cqe_comp_caps = c.caps.cq.comp_caps();
        }
        // CQE version 1 (the kernel's cqe_version), the CQ flags of the kernel's response,
        // and BlueFlame registers in the UARs from rdma-core 58 on.
        out.flags = mlx5_dv::dv_context_flags::CQE_V1 | c.caps.cq.context_flags();
        if self.limits.rdma_core_release >= 58 {
            out.flags |= mlx5_dv::dv_context_flags::BLUEFLAME;
        }
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_DCI_STREAMS != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_DCI_STREAMS;
            out.dci_streams_caps = c.caps.dci_streams;
        }
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_DC_ODP_CAPS != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
            out.dc_odp_caps = c.caps.dc_odp;
        }
        Ok(out)
    }

    /// `ibv_query_port`.
    pub(crate) fn query_port(&self, low: &Lower<'_>, ctx: ContextHandle, port_num: u8) -> Result<PortAttr> {
        let op = Op::QueryPort;
        let c = self.ctx(ctx, op)?;
        if !c.is_kernel() {
            return Err(Error::new(op, EOPNOTSUPP, "only a kernel mlx5 context has verbs ports here"));
        }
        match (port_num, low.fabric.port(c.dev)) {
            // The address from the fabric, the state from the device (cable and PAOS).
            (1, Some(p)) => {
                let active = low.devices.get(c.dev).is_none_or(crate::device::Device::port_active);
                let state = if active { mlx5_dv::port_state::ACTIVE } else { mlx5_dv::port_state::DOWN };
                Ok(PortAttr { state, ..*p })
            }
            _ => Err(Error::new(op, EINVAL, format!("the device has no port {port_num}"))),
        }
    }

    /// `ibv_alloc_pd`: ALLOC_PD through the kernel on mlx5 contexts.
    pub(crate) fn alloc_pd(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) -> Result<PdHandle> {
        let op = Op::AllocPd;
        let c = self.ctx(ctx, op)?;
        let pdn = match (c.kind, low.devices.get_mut(c.dev)) {
            (CtxKind::Other, _) => None,
            (_, Some(d)) => Some(kernel::alloc_pd(d, op)?),
            (_, None) => return Err(Error::new(op, EINVAL, "no such device")),
        };
        self.pds.insert(op, Pd { ctx, pdn })
    }

    /// `ibv_dealloc_pd`: EBUSY while mkeys, MRs or QPs use it.
    pub(crate) fn dealloc_pd(&mut self, low: &mut Lower<'_>, pd: PdHandle) -> Result<()> {
        let op = Op::DeallocPd;
        let users = self.pds.users(pd, op)?;
        if users > 0 {
            return Err(Error::new(
                op,
                mlx5_dv::errno::EBUSY,
                format!("the PD still has {users} mkey(s), MR(s) or QP(s)"),
            ));
        }
        let p = self.pds.get(pd, op)?;
        let dev = self.contexts.get(p.ctx, op).map_or(0, |c| c.dev);
        if let (Some(pdn), Some(d)) = (p.pdn, low.devices.get_mut(dev)) {
            kernel::dealloc_pd(d, pdn, op)?;
        }
        self.pds.take(pd, op)?;
        Ok(())
    }

    /// The link of a port of the device named `device` goes to `state` (DOWN or ACTIVE), as
    /// a cable would: with the port administratively up, queries show it, kernel contexts get
    /// the verbs event and EQs the PORT_STATE_CHANGE EQE. The device's index.
    pub(crate) fn set_port_state(&mut self, low: &mut Lower<'_>, device: &str, port: u8, state: u32) -> Result<usize> {
        use mlx5_dv::port_state;
        let op = Op::Backend;
        let (kind, dev) = self.find_device(device, op)?;
        if kind == DeviceKind::Other || port != 1 {
            return Err(Error::new(op, EINVAL, format!("{device} has no mlx5 port {port}")));
        }
        if state != port_state::ACTIVE && state != port_state::DOWN {
            return Err(Error::new(op, EINVAL, format!("port state {state} is neither DOWN (1) nor ACTIVE (4)")));
        }
        if let Some(d) = low.devices.get_mut(dev) {
            d.port_changed(port, state == port_state::ACTIVE);
        }
        super::devx::port_changes(low, dev);
        Ok(dev)
    }

    /// `ibv_get_async_event`, non-blocking.
    pub(crate) fn get_async_event(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) -> Result<Option<AsyncEvent>> {
        self.ctx(ctx, Op::GetAsyncEvent)?;
        Ok(low.kernel.get_async_event(ctx.id()))
    }
}

/// `get_dc_odp_caps`: DC's bits of the ODP page (`enum ibv_odp_transport_cap_bits`), 0 when
/// the query fails.
fn dc_odp_caps(dev: &mut Device, uid: DevxUid) -> u32 {
    use prm::{odp_cap as o, query_hca_cap as q};
    let mut input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_ODP_CUR);
    let mut out = vec![0u8; q::OUT_SIZE];
    if kernel::devx_cmd(dev, uid, &mut input, &mut out).is_err() {
        return 0;
    }
    let page = &out[q::CAPABILITY_BYTE..];
    (0..o::BITS).fold(0, |v, b| v | u32::from(o::field(o::DC, b).get(page).unwrap_or(0) != 0) << b)
}

/// `mlx5_query_device_ctx`: read the HCA caps through DEVX; a failed query leaves caps 0.
fn query_caps(dev: &mut Device, uid: DevxUid) -> CtxCaps {
    use prm::{cmd_hca_cap as c, crypto_caps as k, query_hca_cap as q};
    let mut caps = CtxCaps::default();
    let mut input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_GENERAL_CUR);
    let mut out = vec![0u8; q::OUT_SIZE];
    if kernel::devx_cmd(dev, uid, &mut input, &mut out).is_err() {
        return caps;
    }
    let page = &out[q::CAPABILITY_BYTE..];
    let bit = |f: Field| f.get(page).unwrap_or(0) != 0;
    if bit(c::SHO) && bit(c::SIGERR_DOMAIN_AND_SIG_TYPE) {
        caps.sig.block_prot = sig_cap::PROT_T10DIF | sig_cap::PROT_CRC;
        caps.sig.block_size = sig_cap::BLOCK_512 | sig_cap::BLOCK_520 | sig_cap::BLOCK_4096 | sig_cap::BLOCK_4160;
        caps.sig.t10dif_bg = sig_cap::BG_CRC | sig_cap::BG_CSUM;
        caps.sig.crc_type = sig_cap::CRC32;
        if bit(c::SIG_BLOCK_4048) {
            caps.sig.block_size |= sig_cap::BLOCK_4048;
        }
        if bit(c::SIG_CRC32C) {
            caps.sig.crc_type |= sig_cap::CRC32C;
        }
        if bit(c::SIG_CRC64_XP10) {
            caps.sig.crc_type |= sig_cap::CRC64_XP10;
        }
    }
    caps.general_obj_types = c::GENERAL_OBJ_TYPES.get(page).unwrap_or(0);
    let has_cap_2 = bit(c::HCA_CAP_2);
    caps.rts2rts_qp_udp_sport = bit(c::RTS2RTS_QP_UDP_SPORT);
    caps.num_lag_ports = prm::qos_cap::NUM_LAG_PORTS.get(page).unwrap_or(0) as u8;
    caps.dc_odp = dc_odp_caps(dev, uid);
    caps.qpc_extension = bit(c::QPC_EXTENSION);
    if bit(prm::qos_cap::QOS) {
        let mut input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_QOS_CUR);
        let mut qos = vec![0u8; q::OUT_SIZE];
        if kernel::devx_cmd(dev, uid, &mut input, &mut qos).is_ok() {
            let p = &qos[q::CAPABILITY_BYTE..];
            let on = |f: Field| f.get(p).unwrap_or(0) != 0;
            caps.nic_qp_scheduling = on(prm::qos_cap::NIC_QP_SCHEDULING);
            caps.nic_sq_scheduling = on(prm::qos_cap::NIC_SQ_SCHEDULING);
        }
    }
    caps.dci_streams = mlx5_dv::DciStreamsCaps {
        max_log_num_concurent: c::LOG_MAX_DCI_STREAM_CHANNELS.get(page).unwrap_or(0) as u8,
        max_log_num_errored: c::LOG_MAX_DCI_ERRORED_STREAMS.get(page).unwrap_or(0) as u8,
    };
    if bit(c::AES_XTS_SINGLE_BLOCK_LE_TWEAK) {
        caps.crypto.crypto_engines |= crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK;
    }
    if bit(c::AES_XTS_MULTI_BLOCK_BE_TWEAK) {
        caps.crypto.crypto_engines |= crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK;
    }
    let crypto = bit(c::CRYPTO);
    if has_cap_2 {
        let mut input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_GENERAL_2_CUR);
        if kernel::devx_cmd(dev, uid, &mut input, &mut out).is_ok() {
            let p2 = &out[q::CAPABILITY_BYTE..];
            caps.log_reserved_qpns_per_obj =
                prm::cmd_hca_cap_2::LOG_RESERVED_QPN_GRANULARITY.get(p2).unwrap_or(0) as u8;
        }
    }
    if !crypto {
        return caps;
    }
    caps.crypto.flags |= crypto_cap::FLAG_CRYPTO;
    let mut input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_CRYPTO_CUR);
    if kernel::devx_cmd(dev, uid, &mut input, &mut out).is_err() {
        return caps;
    }
    let page = &out[q::CAPABILITY_BYTE..];
    let get = |f: Field| f.get(page).unwrap_or(0);
    if get(k::WRAPPED_CRYPTO_OPERATIONAL) != 0 {
        caps.crypto.flags |= crypto_cap::FLAG_WRAPPED_CRYPTO_OPERATIONAL;
    }
    if get(k::WRAPPED_CRYPTO_GOING_TO_COMMISSIONING) != 0 {
        caps.crypto.flags |= crypto_cap::FLAG_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING;
    }
    if get(k::WRAPPED_IMPORT_METHOD) & k::WRAPPED_IMPORT_METHOD_AES != 0 {
        caps.crypto.wrapped_import_method |= crypto_cap::WRAPPED_IMPORT_AES_XTS;
    }
    caps.crypto.log_max_num_deks = get(k::LOG_MAX_NUM_DEKS) as u8;
    caps.crypto.failed_selftests = get(k::FAILED_SELFTESTS) as u16;
    caps
}
