//! The provider: what libmlx5 does in user space, in the order it does it — flag masks,
//! rounding, capability parsing, mapping command status to errno, decoding `mkey_check`, the
//! work request builders and setters, and CQE handling. It reaches a device only through the
//! kernel and the device's command and doorbell interfaces.

use mlx5_dv::{
    AccessFlags, BackendId, BufHandle, ContextHandle, CqHandle, CryptoCaps, HandleTable, MkeyHandle, MrHandle,
    PdHandle, QpHandle, SigCaps, WqeRecord,
};

use crate::device::Device;
use crate::fabric::Fabric;
use crate::host::Host;
use crate::kernel::{DevxUid, Kernel};
use crate::profile::{DataPathSection, Profile};

mod context;
mod cq;
mod crypto;
mod devx;
mod dm;
mod dmabuf;
mod dr;
mod flow;
mod matcher;
mod memory;
mod mkey;
mod mw;
mod objects;
mod odp;
mod odp_rereg;
mod poll;
mod qp;
mod qp_sport;
mod reserved;
mod ring;
mod srq;
mod tm;
mod wq;
mod wr;
mod xrc;

pub use crypto::MkeyCrypto;
pub(crate) use dmabuf::DmabufReg;
pub use mkey::{BsfState, SigCtx, SigDomainType, StoredSigErr, decode_sig_err, round_max_entries, sigerr_syndrome};

/// The layers below the provider, borrowed for one call.
pub(crate) struct Lower<'a> {
    pub(crate) kernel: &'a mut Kernel,
    pub(crate) devices: &'a mut [Device],
    pub(crate) host: &'a mut Host,
    pub(crate) fabric: &'a Fabric,
    /// A free-running device's doorbell: the engine runs on the device's own thread, which
    /// this wakes; `None` runs it here, inside the call (stepped).
    pub(crate) wake: Option<&'a crate::wake::Wake>,
}

impl Lower<'_> {
    /// After a doorbell: a stepped device runs now and delivers the events it raised; a
    /// free-running one is woken and the call returns.
    fn run(&mut self) {
        if let Some(w) = self.wake {
            w.ring();
            return;
        }
        self.run_now();
    }

    /// Let the devices run, then deliver the events they raised.
    pub(crate) fn run_now(&mut self) {
        crate::device::run(self.devices, self.host, self.fabric);
        if self.fabric.is_simulated_time() {
            crate::device::settle_in_memory(self.devices, self.host, self.fabric);
        }
        if self.write_eqes() {
            self.kernel.deliver_events(self.devices);
        }
    }

    /// Let the devices write their pending EQEs, and signal the vectors they raise; true if
    /// a device then has events for the kernel.
    #[inline]
    fn write_eqes(&mut self) -> bool {
        // Most runs raise nothing: the check stays small and the writing out of line.
        if self.devices.iter().any(Device::eqes_pending) {
            self.write_pending_eqes();
        }
        self.devices.iter().any(Device::has_events)
    }

    /// Write every device's pending EQEs and signal the vectors they raise, in device order.
    #[cold]
    #[inline(never)]
    fn write_pending_eqes(&mut self) {
        for (dev, d) in self.devices.iter_mut().enumerate() {
            for v in d.write_eqes(self.host) {
                self.host.irqs.raise(dev, v);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CtxKind {
    Kernel { devx: DevxUid, update_tag: bool },
    Vfio,
    Other,
}

#[derive(Debug, Clone, Copy, Default)]
struct CtxCaps {
    sig: SigCaps,
    crypto: CryptoCaps,
    /// `general_obj_types_caps`.
    general_obj_types: u64,
    /// `entropy_caps.rts2rts_qp_udp_sport`.
    rts2rts_qp_udp_sport: bool,
    /// `hca_cap_2_caps.log_reserved_qpns_per_obj`.
    log_reserved_qpns_per_obj: u8,
    /// The CQ capabilities of the kernel's query response (`cqe_comp_caps`, the CQE flags).
    cq: crate::kernel::CqCaps,
    /// `entropy_caps.num_lag_ports`.
    num_lag_ports: u8,
    /// `dci_streams_caps` (mlx5_ib's `log_max_dci_stream_channels` and
    /// `log_max_dci_errored_streams`).
    dci_streams: mlx5_dv::DciStreamsCaps,
    /// `dc_odp_caps`, from the ODP page as libmlx5's `get_dc_odp_caps` reads it.
    dc_odp: u32,
    /// `cmd_hca_cap.qpc_extension`.
    qpc_extension: bool,
    /// The QoS page's `nic_qp_scheduling` and `nic_sq_scheduling` (`get_qos_caps`).
    nic_qp_scheduling: bool,
    nic_sq_scheduling: bool,
}

#[derive(Debug, Clone)]
struct Ctx {
    kind: CtxKind,
    caps: CtxCaps,
    /// Index of the device.
    dev: usize,
}

impl Ctx {
    fn is_kernel(&self) -> bool {
        matches!(self.kind, CtxKind::Kernel { .. })
    }

    /// The kernel reported mkey tag update for this context.
    fn update_tag(&self) -> bool {
        matches!(self.kind, CtxKind::Kernel { update_tag: true, .. })
    }
}

#[derive(Debug, Clone)]
struct Pd {
    ctx: ContextHandle,
    pdn: Option<u32>,
}

#[derive(Debug, Clone)]
struct MkeyObj {
    ctx: ContextHandle,
    pd: PdHandle,
    dev: usize,
    index: u32,
    sig: Option<SigCtx>,
    /// Zero-based length of the current layout (`mkey->length`).
    length: u64,
    /// `max_entries` rounded at creation (`mkey->num_desc`).
    num_desc: u16,
    /// Created with CRYPTO.
    crypto: bool,
    /// The crypto attributes of a CRYPTO mkey (`mkey->crypto`).
    crypto_ctx: Option<crypto::MkeyCrypto>,
}

/// A buffer of host memory handed to the application; its users are the MRs over it.
#[derive(Debug, Clone)]
struct BufObj {
    addr: u64,
    len: usize,
}

#[derive(Debug, Clone)]
struct MrObj {
    ctx: ContextHandle,
    pd: PdHandle,
    dev: usize,
    index: u32,
    /// The key (lkey and rkey alike).
    key: u32,
    /// The buffer the MR pins; `None` for an ODP MR, which pins nothing.
    buf: Option<BufHandle>,
    /// The dma-buf fd a dma-buf MR imports.
    dmabuf: Option<i32>,
    /// The range and rights it was registered with, which `ibv_rereg_mr` keeps unless told.
    addr: u64,
    length: u64,
    access: mlx5_dv::AccessFlags,
    /// Its umem is writable (`umem->writable`: `ib_access_writable` of the access it was
    /// registered with; a rereg of the access alone does not change it).
    writable: bool,
}

/// A CQ; its users are the QPs that complete into it.
#[derive(Debug, Clone)]
struct CqObj {
    ctx: ContextHandle,
    dev: usize,
    cqn: u32,
    ring: ring::CqRing,
    /// `arm_sn`: events read so far, the sequence number of the next arm (two bits of it).
    arm_sn: u32,
}

#[derive(Debug, Clone)]
struct QpObj {
    ctx: ContextHandle,
    dev: usize,
    pd: PdHandle,
    qpn: u32,
    cqs: [CqHandle; 2],
    /// Only RC QPs move data in the simulator.
    rc: bool,
    /// A DCI: its WQEs carry the DC address segment.
    dci: bool,
    /// `enum ibv_qp_type` (UC and UD move data too, through `ibv_post_send`).
    qp_type: u32,
    max_post: u32,
    /// `sq.max_gs`: the most SGEs a send WR may carry.
    max_gs: u32,
    rq_max_post: u32,
    rq_max_gs: u32,
    max_inline_data: i64,
    mkey_ops: bool,
    /// The mlx5dv send ops it was created with (`mlx5dv_wr_memcpy` and `mlx5dv_wr_raw_wqe`
    /// exist only with theirs).
    mlx5_ops: mlx5_dv::DvSendOpsFlags,
    wr_complete_real: bool,
    /// `fm_cache`: the next WQE carries the initiator small fence (after a UMR).
    fence_next: bool,
    /// The queues in host memory.
    rings: ring::QpRings,
    /// `rq.qp_state_max_gs`: the most SGEs a receive may carry in the QP's state as the
    /// provider last set it (-1 from creation and after RESET, `max_gs` from INIT).
    rq_state_max_gs: i64,
    /// `sq.qp_state_max_gs`: the same for `ibv_post_send` (-1 until RTS, `max_gs` from RTS).
    sq_state_max_gs: i64,
    /// `sq_signal_bits`: created with `sq_sig_all`, every send WQE asks for a CQE.
    sig_all: bool,
    /// Created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: the QP has the `ibv_wr_*` API.
    wr_api: bool,
    /// The SRQ its receives come from.
    srq: Option<mlx5_dv::SrqHandle>,
    /// `qp->atomics_enabled`: the context's `atomic_cap` is not NONE.
    atomics: bool,
    /// An XRC target QP's handle: the domain it was made or opened in (its PD and CQs are
    /// placeholders then).
    xrcd: Option<mlx5_dv::XrcdHandle>,
}

impl QpObj {
    /// A QP without queues of its own (an RSS QP, an XRC target's handle): no WQE or receive
    /// room, and CQs that are placeholders the handle tables do not know.
    fn queueless(ctx: ContextHandle, dev: usize, pd: PdHandle, qpn: u32, qp_type: u32, rings: ring::QpRings) -> Self {
        QpObj {
            ctx,
            dev,
            pd,
            qpn,
            cqs: [CqHandle::new(pd.backend(), u32::MAX); 2],
            rc: false,
            dci: false,
            qp_type,
            max_post: 0,
            max_gs: 0,
            rq_max_post: 0,
            rq_max_gs: 0,
            max_inline_data: 0,
            mkey_ops: false,
            mlx5_ops: mlx5_dv::DvSendOpsFlags::empty(),
            wr_complete_real: false,
            fence_next: false,
            rings,
            rq_state_max_gs: -1,
            sq_state_max_gs: -1,
            sig_all: false,
            wr_api: false,
            srq: None,
            atomics: false,
            xrcd: None,
        }
    }
}

/// The provider's objects, each behind a handle table.
#[derive(Debug, Clone)]
pub(crate) struct Provider {
    contexts: HandleTable<ContextHandle, Ctx>,
    pds: HandleTable<PdHandle, Pd>,
    mkeys: HandleTable<MkeyHandle, MkeyObj>,
    bufs: HandleTable<BufHandle, BufObj>,
    mrs: HandleTable<MrHandle, MrObj>,
    cqs: HandleTable<CqHandle, CqObj>,
    qps: HandleTable<QpHandle, QpObj>,
    srqs: HandleTable<mlx5_dv::SrqHandle, srq::SrqObj>,
    xrcds: HandleTable<mlx5_dv::XrcdHandle, xrc::XrcdObj>,
    /// Crypto logins and DEKs.
    crypto: crypto::CryptoObjects,
    reserved: reserved::ReservedQpns,
    /// DEVX objects, UARs, umems, and the VFIO contexts' vectors and EQs.
    devx: devx::DevxObjects,
    /// `num_comp_vectors` of kernel contexts.
    num_comp_vectors: u16,
    /// MSI-X vectors of the VFIO function.
    vfio_vectors: u16,
    limits: DataPathSection,
    /// The host's devices: the mlx5 kernel devices first, in device order.
    device_list: Vec<mlx5_dv::DeviceDesc>,
    /// Posted WQEs as the provider wrote them, when recording.
    wqe_log: Option<Vec<WqeRecord>>,
    /// `post_send`'s reused buffers, boxed so that lending them out per post moves a pointer.
    post: Option<Box<wr::PostScratch>>,
    /// Device memory (`ibv_alloc_dm`).
    dms: HandleTable<mlx5_dv::DmHandle, dm::DmObj>,
    /// Memory windows (`ibv_alloc_mw`).
    mws: HandleTable<mlx5_dv::MwHandle, mw::MwObj>,
    /// Receive work queues (`ibv_create_wq`).
    wqs: HandleTable<mlx5_dv::WqHandle, wq::WqObj>,
    /// Their indirection tables (`ibv_create_rwq_ind_table`).
    ind_tables: HandleTable<mlx5_dv::RwqIndTableHandle, wq::IndTableObj>,
    /// The RSS QPs and the table each spreads over.
    rss_qps: std::collections::BTreeMap<QpHandle, mlx5_dv::RwqIndTableHandle>,
    /// `mlx5dv_create_flow_matcher`'s matchers and the rules made from them.
    matchers: matcher::Matchers,
    /// Software steering's domains, tables, matchers, actions and rules.
    dr: dr::DrObjects,
    /// The devices have software-owned flow tables (`[hca_cap] sw_steering`, with DEVX).
    sw_steering: bool,
    /// The devices reformat packets (`[hca_cap] packet_reformat`).
    packet_reformat: bool,
}

impl Provider {
    /// The provider of a profile's host, issuing handles for `backend`.
    pub(crate) fn new(backend: BackendId, profile: &Profile) -> Self {
        Provider {
            contexts: HandleTable::new(backend),
            pds: HandleTable::new(backend),
            mkeys: HandleTable::new(backend),
            bufs: HandleTable::new(backend),
            mrs: HandleTable::new(backend),
            cqs: HandleTable::new(backend),
            qps: HandleTable::new(backend),
            srqs: HandleTable::new(backend),
            xrcds: HandleTable::new(backend),
            crypto: crypto::CryptoObjects::new(backend),
            reserved: Default::default(),
            devx: devx::DevxObjects::new(backend),
            num_comp_vectors: profile.device.num_comp_vectors,
            vfio_vectors: profile.device.vfio_msix_vectors,
            // Raw packet QPs need an Ethernet port.
            limits: DataPathSection {
                raw_packet: profile.datapath.raw_packet
                    && profile.device.link_layer == crate::profile::LinkLayer::Ethernet,
                ..profile.datapath.clone()
            },
            device_list: device_list(profile),
            wqe_log: None,
            post: None,
            dms: HandleTable::new(backend),
            mws: HandleTable::new(backend),
            wqs: HandleTable::new(backend),
            ind_tables: HandleTable::new(backend),
            rss_qps: Default::default(),
            matchers: matcher::Matchers::default(),
            dr: dr::DrObjects::default(),
            sw_steering: profile.hca_cap.sw_steering && profile.kernel.devx,
            packet_reformat: profile.hca_cap.packet_reformat,
        }
    }

    /// Start or stop recording the WQEs posted.
    pub(crate) fn record_wqes(&mut self, on: bool) {
        match (on, self.wqe_log.is_some()) {
            (true, false) => self.wqe_log = Some(Vec::new()),
            (false, true) => self.wqe_log = None,
            _ => {}
        }
    }

    /// The recorded WQEs, oldest first.
    pub(crate) fn take_wqes(&mut self) -> Vec<WqeRecord> {
        self.wqe_log.as_mut().map(std::mem::take).unwrap_or_default()
    }
}

/// `get_umr_mr_flags`: the mkey context's access byte is kept as verbs flags here.
const UMR_ACCESS: u32 = AccessFlags::LOCAL_WRITE.bits()
    | AccessFlags::REMOTE_WRITE.bits()
    | AccessFlags::REMOTE_READ.bits()
    | AccessFlags::REMOTE_ATOMIC.bits();

fn device_list(profile: &Profile) -> Vec<mlx5_dv::DeviceDesc> {
    use mlx5_dv::{DeviceDesc, DeviceKind};
    let d = &profile.device;
    let mut v: Vec<DeviceDesc> =
        profile.device_names().into_iter().map(|name| DeviceDesc { name, kind: DeviceKind::Mlx5 }).collect();
    if let Some(p) = &d.vfio_pci_name {
        v.push(DeviceDesc { name: p.clone(), kind: DeviceKind::Mlx5Vfio });
    }
    v.extend(d.other_devices.iter().map(|n| DeviceDesc { name: n.clone(), kind: DeviceKind::Other }));
    v
}
