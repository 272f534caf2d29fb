//! The kernel (uverbs and mlx5_ib) between the provider and the devices: the DEVX uid gate,
//! MR registration, QP and CQ objects with the QP transition rules, cleanup when a context
//! closes, and the delivery of device events to the context that owns their object. VFIO
//! contexts bypass it.

use std::collections::{BTreeMap, VecDeque};

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP, EREMOTEIO};
use mlx5_dv::prm::{self, opcode, status};
use mlx5_dv::profile::KernelSection;
use mlx5_dv::{AccessFlags, AsyncEvent, CqHandle, Error, Op, Result};

use crate::device::Device;
use crate::device::firmware::named_input;

mod cq_caps;
mod dm;
mod mw;
mod qos;
mod srq;
mod verbs;
mod xrc;

pub use cq_caps::{CqCaps, cq_caps};
pub use dm::MemicAlloc;
pub use srq::SrqRequest;
pub use verbs::CqRequest;

/// The largest DEVX uid the kernel hands out.
const MAX_UID: u16 = 0xfffe;

/// The uid under which a DEVX command runs, as the kernel picks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevxUid {
    /// The context has a DEVX user context with this uid.
    Uid(u16),
    /// The context has none; only whitelisted commands pass, and only if the device has a
    /// whitelist uid.
    None {
        /// The device has a whitelist uid.
        whitelist: bool,
    },
}

/// `devx_is_whitelist_cmd`: QUERY_HCA_CAP, QUERY_HCA_VPORT_CONTEXT, QUERY_ESW_VPORT_CONTEXT.
const WHITELIST: [u16; 3] = [opcode::QUERY_HCA_CAP, 0x762, 0x752];

/// `devx_get_uid`: a whitelisted command runs under the context's uid, or without one under
/// the device's whitelist uid (EOPNOTSUPP when the device has none); any other command needs
/// the context's uid (EINVAL without one).
pub fn devx_uid(uid: DevxUid, input: &[u8]) -> std::result::Result<u16, i32> {
    let op = prm::mbox_in::OPCODE.get(input).map_err(|_| EINVAL)? as u16;
    match uid {
        DevxUid::Uid(u) => Ok(u),
        DevxUid::None { whitelist: true } if WHITELIST.contains(&op) => Ok(0),
        DevxUid::None { whitelist: false } if WHITELIST.contains(&op) => Err(EOPNOTSUPP),
        DevxUid::None { .. } => Err(EINVAL),
    }
}

/// Run a command on behalf of user space through DEVX (`mlx5dv_devx_general_cmd`,
/// `mlx5dv_devx_obj_create`/`destroy`). The kernel writes the uid into the mailbox.
///
/// Returns the errno of the ioctl: EREMOTEIO when the firmware answered with a bad status (the
/// output mailbox then holds it), and the errors of [`devx_uid`].
pub fn devx_cmd(dev: &mut Device, uid: DevxUid, input: &mut [u8], out: &mut [u8]) -> std::result::Result<(), i32> {
    let uid = devx_uid(uid, input)?;
    prm::mbox_in::UID.set(input, u64::from(uid)).map_err(|_| EINVAL)?;
    dev.exec(input, out);
    match prm::read_status(out).0 {
        status::OK => Ok(()),
        _ => Err(EREMOTEIO),
    }
}

/// Run a command the kernel issues itself (PD allocation, object destruction): a bad status
/// comes back as the mapped errno, not EREMOTEIO.
pub fn kernel_cmd(dev: &mut Device, input: &[u8], out: &mut [u8]) -> std::result::Result<(), i32> {
    dev.exec(input, out);
    match status::to_errno(prm::read_status(out).0) {
        0 => Ok(()),
        e => Err(e),
    }
}

/// `mlx5_get_cmd_status_err`: the provider replaces EREMOTEIO by the errno of the status in
/// the output mailbox and keeps any other errno.
pub fn cmd_status_err(err: i32, out: &[u8]) -> i32 {
    if err == EREMOTEIO { status::to_errno(prm::read_status(out).0) } else { err }
}

/// The device limits the kernel checks QP attributes against.
#[derive(Debug, Clone, Copy)]
pub struct QpLimits {
    /// log2 of the most CQ entries.
    pub log_max_cq_sz: u8,
    /// log2 of the most outstanding READs and atomics as requester.
    pub log_max_ra_res_qp: u8,
    /// log2 of the most outstanding READs and atomics as responder.
    pub log_max_ra_req_qp: u8,
    /// Entries of the P_Key table.
    pub pkey_table_len: u16,
    /// Physical ports of each device.
    pub ports: u8,
    /// log2 of the most WQEs of an SRQ.
    pub log_max_srq_sz: u8,
    /// The largest receive WQE in bytes.
    pub max_rq_desc_sz: u32,
}

impl QpLimits {
    /// The limits a profile's data path gives, on devices of one port.
    pub fn of(d: &mlx5_dv::profile::DataPathSection) -> Self {
        QpLimits {
            log_max_cq_sz: d.log_max_cq_sz,
            log_max_ra_res_qp: d.log_max_ra_res_qp,
            log_max_ra_req_qp: d.log_max_ra_req_qp,
            pkey_table_len: d.pkey_table_len,
            ports: 1,
            log_max_srq_sz: d.log_max_srq_sz,
            max_rq_desc_sz: d.max_rq_desc_sz,
        }
    }
}

/// What `ibv_create_qp` hands the kernel once the provider has checked and sized it.
#[derive(Debug, Clone, Copy)]
pub struct QpRequest {
    /// The owning context.
    pub ctx: u32,
    /// Its device.
    pub dev: usize,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    /// The PD number.
    pub pdn: u32,
    /// Send and receive CQ numbers.
    pub cqns: (u32, u32),
    /// Scatter-to-CQE for small receives.
    pub scatter_to_cqe: bool,
    /// SIG_PIPELINING.
    pub drain_sigerr: bool,
    /// The send queue in host memory.
    pub sq: crate::device::contract::QueueBuf,
    /// The receive queue in host memory.
    pub rq: crate::device::contract::QueueBuf,
    /// The doorbell record.
    pub dbrec: u64,
    /// The SRQ its receives come from.
    pub srqn: Option<u32>,
    /// A DC QP (`IBV_QPT_DRIVER`): its role, and a DCT's access key.
    pub dc: Option<DcRole>,
    /// The XRC domain of an XRC target QP (0: none).
    pub xrcd: u32,
}

/// What a DC QP is: an initiator (a send-only QP) or a target with its access key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DcRole {
    /// `MLX5DV_DCTYPE_DCI`, with its streams (`log_num_concurent`, `log_num_errored`) when
    /// made with `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`.
    Dci(Option<(u8, u8)>),
    /// `MLX5DV_DCTYPE_DCT` with `dct_access_key`.
    Dct(u64),
}

/// The kernel's state: uids, MR key variants, who owns which QP and CQ, and each context's
/// queue of asynchronous events.
#[derive(Debug, Clone)]
pub struct Kernel {
    facts: KernelSection,
    /// The devices' limits on CQs and QP attributes.
    limits: QpLimits,
    next_uid: u16,
    /// The DEVX uid of each open context that has one.
    uids: BTreeMap<u32, u16>,
    /// The uids open contexts hold.
    held_uids: std::collections::BTreeSet<u16>,
    mr_variant: Vec<u8>,
    /// The engine order the next verbs QP takes.
    next_qp_order: u64,
    /// What the kernel keeps of each verbs QP, by device and QP number.
    qps: BTreeMap<(usize, u32), verbs::KernelQp>,
    cqs: BTreeMap<(usize, u32), (u32, Option<CqHandle>)>,
    /// What the kernel keeps of each verbs SRQ, by device and SRQ number.
    srqs: BTreeMap<(usize, u32), srq::KernelSrq>,
    /// Verbs CQs whose completion event came, for their channels.
    cq_events: VecDeque<CqHandle>,
    events: BTreeMap<u32, VecDeque<AsyncEvent>>,
    /// The device of each kernel context, for port events.
    ctx_dev: BTreeMap<u32, usize>,
    /// The completion EQs of each device, by vector, made when first asked for.
    comp_eqns: BTreeMap<usize, Vec<u32>>,
    /// The sysfs path (without `/sys/`) of the data-direct device, if one is bonded.
    pub data_direct: Option<String>,
    /// The MEMIC pages in use on each device (`mlx5_dm.memic_alloc_pages`).
    memic_pages: BTreeMap<usize, Vec<bool>>,
    /// XRC domains and target QPs.
    xrc: xrc::KernelXrc,
    /// Packet pacing and VAR objects.
    qos: qos::KernelQos,
}

impl Kernel {
    /// A kernel with the profile's features, over `devices` devices with these limits.
    pub fn new(facts: &KernelSection, limits: QpLimits, devices: usize) -> Self {
        Kernel {
            facts: facts.clone(),
            limits,
            next_uid: 1,
            uids: BTreeMap::new(),
            held_uids: std::collections::BTreeSet::new(),
            mr_variant: vec![0; devices],
            next_qp_order: 0,
            qps: BTreeMap::new(),
            cqs: BTreeMap::new(),
            srqs: BTreeMap::new(),
            cq_events: VecDeque::new(),
            events: BTreeMap::new(),
            ctx_dev: BTreeMap::new(),
            comp_eqns: BTreeMap::new(),
            data_direct: None,
            memic_pages: BTreeMap::new(),
            xrc: xrc::KernelXrc::default(),
            qos: qos::KernelQos::default(),
        }
    }

    /// The kernel's features.
    pub fn facts(&self) -> &KernelSection {
        &self.facts
    }

    /// `mlx5_ib_alloc_ucontext`: a DEVX uid if asked for and the kernel can give one; without
    /// one, `fallback` decides between a context without DEVX and EINVAL. Uids are 1..=65534,
    /// each held by one open context; when all are held, CREATE_UCTX fails with the status
    /// `NO_RES_ERR` (EAGAIN), or the context has no DEVX under `fallback`.
    pub fn open_context(&mut self, ctx: u32, want_devx: bool, fallback: bool) -> std::result::Result<DevxUid, i32> {
        let uid = match (want_devx && self.facts.devx, fallback) {
            (true, _) => match self.free_uid() {
                Some(uid) => {
                    self.next_uid = if uid >= MAX_UID { 1 } else { uid + 1 };
                    self.uids.insert(ctx, uid);
                    self.held_uids.insert(uid);
                    DevxUid::Uid(uid)
                }
                None if fallback => DevxUid::None { whitelist: self.facts.devx_whitelist_uid },
                None => return Err(status::to_errno(status::NO_RES_ERR)),
            },
            // mlx5_ib_devx_create: a device without user contexts (log_max_uctx == 0) -> EINVAL.
            (false, false) => return Err(EINVAL),
            (false, true) => DevxUid::None { whitelist: self.facts.devx_whitelist_uid },
        };
        self.events.insert(ctx, VecDeque::new());
        Ok(uid)
    }

    /// The first uid from `next_uid` on that no open context holds.
    fn free_uid(&self) -> Option<u16> {
        let start = self.next_uid.clamp(1, MAX_UID);
        (start..=MAX_UID).chain(1..start).find(|u| !self.held_uids.contains(u))
    }

    /// Port events of device `dev` go to the kernel context `ctx`.
    pub fn set_context_device(&mut self, ctx: u32, dev: usize) {
        self.ctx_dev.insert(ctx, dev);
    }

    /// A port of device `dev` changed state: every kernel context on it gets the event
    /// (`IBV_EVENT_PORT_ACTIVE` or `IBV_EVENT_PORT_ERR`).
    pub fn port_event(&mut self, dev: usize, event_type: u32) {
        for (ctx, _) in self.ctx_dev.iter().filter(|(_, d)| **d == dev) {
            if let Some(q) = self.events.get_mut(ctx) {
                q.push_back(AsyncEvent { event_type, qp_num: None, cq: None, srq: None });
            }
        }
    }

    /// `MLX5_IB_METHOD_DEVX_QUERY_EQN`: the EQ of completion vector `vector` of device
    /// `dev_index`. The driver's completion EQs (256 entries, overrun ignored, no async
    /// events) are made on the first query.
    pub fn comp_eqn(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        host: &mut crate::host::Host,
        vector: u32,
        vectors: u16,
    ) -> Result<u32> {
        let op = Op::DevxQueryEqn;
        if vector >= u32::from(vectors) {
            return Err(Error::new(op, EINVAL, format!("vector {vector} is beyond num_comp_vectors {vectors}")));
        }
        if let std::collections::btree_map::Entry::Vacant(slot) = self.comp_eqns.entry(dev_index) {
            slot.insert(make_comp_eqs(dev, host, vectors)?);
        }
        let eqns = self.comp_eqns.get(&dev_index).map(Vec::as_slice).unwrap_or_default();
        eqns.get(vector as usize).copied().ok_or_else(|| Error::new(op, EINVAL, "no such completion EQ"))
    }

    /// A context the kernel only tracks for events (VFIO and other providers have none).
    pub fn track_context(&mut self, ctx: u32) {
        self.events.insert(ctx, VecDeque::new());
    }

    /// `ibv_reg_mr`: pin the pages and create an MTT mkey with the next key variant in its
    /// low byte; the mkey index and the variant.
    pub fn reg_mr(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        pdn: u32,
        (addr, length): (u64, u64),
        access: AccessFlags,
    ) -> Result<(u32, u8)> {
        self.reg_mtt(dev, dev_index, pdn, (addr, length), access, &[], Op::RegMr)
    }

    /// A dma-buf MR (`mlx5_ib_reg_user_mr_dmabuf`): an MTT mkey from `iova` whose 4 KiB pages
    /// are the exporter's `pages`.
    #[allow(clippy::too_many_arguments)] // the MR's device, PD, range, rights and pages
    pub fn reg_dmabuf_mr(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        pdn: u32,
        (iova, length): (u64, u64),
        access: AccessFlags,
        pages: &[u64],
        op: Op,
    ) -> Result<(u32, u8)> {
        self.reg_mtt(dev, dev_index, pdn, (iova, length), access, pages, op)
    }

    /// `ibv_rereg_mr` as the driver's UMR path leaves it: the MR's mkey (index `index`, key
    /// variant `variant`) describes the new range, PD and rights and keeps its key. The
    /// simulator does it as a destroy and a create, which give back the same index (the
    /// firmware hands out the index freed last first); the mkey index it ends with.
    #[allow(clippy::too_many_arguments)] // the MR's device, mkey, PD, range and rights
    pub fn rereg_mr(
        &mut self,
        dev: &mut Device,
        (index, variant): (u32, u8),
        pdn: u32,
        (addr, length): (u64, u64),
        access: AccessFlags,
        op: Op,
    ) -> Result<u32> {
        destroy_mkey(dev, index, op)?;
        self.create_mtt(dev, variant, pdn, (addr, length), access, &[], op)
    }

    #[allow(clippy::too_many_arguments)]
    fn reg_mtt(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        pdn: u32,
        range: (u64, u64),
        access: AccessFlags,
        pages: &[u64],
        op: Op,
    ) -> Result<(u32, u8)> {
        let slot = self.mr_variant.get_mut(dev_index).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let variant = *slot;
        *slot = variant.wrapping_add(1);
        Ok((self.create_mtt(dev, variant, pdn, range, access, pages, op)?, variant))
    }

    /// CREATE_MKEY of an MTT mkey with key variant `variant`; its index.
    #[allow(clippy::too_many_arguments)]
    fn create_mtt(
        &mut self,
        dev: &mut Device,
        variant: u8,
        pdn: u32,
        (addr, length): (u64, u64),
        access: AccessFlags,
        pages: &[u64],
        op: Op,
    ) -> Result<u32> {
        use prm::mkc;
        // Page addresses come two to an octword.
        let octwords = pages.len().div_ceil(2);
        let mut input = vec![0u8; prm::create_mkey::IN_SIZE + octwords * 16];
        prm::write_header(&mut input, opcode::CREATE_MKEY, 0, 0);
        for (i, p) in pages.iter().enumerate() {
            let at = prm::create_mkey::IN_SIZE + i * 8;
            input[at..at + 8].copy_from_slice(&p.to_be_bytes());
        }
        let octwords = u64::try_from(octwords).map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
        let log_page = if pages.is_empty() { 0 } else { 12 };
        let at = |f: prm::Field| f.at(prm::create_mkey::MKC_BIT);
        let fields = [
            (mkc::ACCESS_MODE_1_0, mkc::ACCESS_MODE_MTT),
            (mkc::START_ADDR, addr),
            (mkc::LEN, length),
            (mkc::TRANSLATIONS_OCTWORD_SIZE, octwords),
            (mkc::LOG_PAGE_SIZE, log_page),
        ];
        for (f, v) in fields.into_iter().chain(mkc_rights(access, pdn, variant)) {
            at(f).set(&mut input, v).map_err(|e| Error::new(op, mlx5_dv::errno::EIO, e.to_string()))?;
        }
        prm::create_mkey::TRANSLATIONS_OCTWORD_ACTUAL_SIZE
            .set(&mut input, octwords)
            .map_err(|e| Error::new(op, mlx5_dv::errno::EIO, e.to_string()))?;
        let mut out = [0u8; prm::create_mkey::OUT_SIZE];
        kernel_cmd(dev, &input, &mut out).map_err(|e| Error::new(op, e, "CREATE_MKEY for the MR failed"))?;
        let index = prm::create_mkey::OUT_MKEY_INDEX
            .get(&out)
            .map(|v| v as u32)
            .map_err(|e| Error::new(op, mlx5_dv::errno::EIO, e.to_string()))?;
        Ok(index)
    }

    /// CREATE_MKEY of an mkey without a translation payload whose context is `fields`, with
    /// the device's next key variant (written last, as `mkey_7_0`); its index and variant.
    fn create_plain_mkey(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        fields: &[(prm::Field, u64)],
        (op, what): (Op, &str),
    ) -> Result<(u32, u8)> {
        let slot = self.mr_variant.get_mut(dev_index).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let variant = *slot;
        *slot = variant.wrapping_add(1);
        let mut input = vec![0u8; prm::create_mkey::IN_SIZE];
        prm::write_header(&mut input, opcode::CREATE_MKEY, 0, 0);
        let at = |f: prm::Field| f.at(prm::create_mkey::MKC_BIT);
        for &(f, v) in fields.iter().chain(&[(prm::mkc::MKEY_7_0, u64::from(variant))]) {
            at(f).set(&mut input, v).map_err(|e| internal(op, e))?;
        }
        let mut out = [0u8; prm::create_mkey::OUT_SIZE];
        kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, what))?;
        let index = prm::create_mkey::OUT_MKEY_INDEX.get(&out).map_err(|e| internal(op, e))? as u32;
        Ok((index, variant))
    }

    /// The handle CQ events carry back to user space (`ibv_cq`'s user handle).
    pub fn set_cq_handle(&mut self, dev: usize, cqn: u32, handle: CqHandle) {
        if let Some(o) = self.cqs.get_mut(&(dev, cqn)) {
            o.1 = Some(handle);
        }
    }

    /// Close a context: destroy what its DEVX uid still owns in firmware (PSVs, then mkeys,
    /// then DEKs and crypto logins, including objects a failed unwind left behind). Cleanup
    /// failures are not reported, as for a real close.
    pub fn close_devx_objects(&mut self, dev: &mut Device, uid: DevxUid) {
        let DevxUid::Uid(uid) = uid else { return };
        let general = dev.firmware().general_objects_of_uid(uid);
        let (mkeys, psvs) = dev.firmware().objects_of_uid(uid);
        for p in psvs {
            let _ = destroy_psv(dev, p, Op::CloseDevice);
        }
        for m in mkeys {
            let _ = destroy_mkey(dev, m, Op::CloseDevice);
        }
        for (ty, id) in general {
            let _ = destroy_general_obj(dev, uid, ty, id, Op::CloseDevice);
        }
        let (_, uars, umems) = dev.firmware().eq_objects_of_uid(uid);
        let mut out = [0u8; 16];
        for id in umems {
            let _ = kernel_cmd(dev, &named_input(opcode::DESTROY_UMEM, prm::eq::umem::UMEM_ID, id), &mut out);
        }
        for n in uars {
            let _ = kernel_cmd(dev, &named_input(opcode::DEALLOC_UAR, prm::eq::uar::UAR, n), &mut out);
        }
    }

    /// Forget a closed context and the events it did not read.
    pub fn forget_context(&mut self, ctx: u32) {
        self.events.remove(&ctx);
        self.ctx_dev.remove(&ctx);
        if let Some(uid) = self.uids.remove(&ctx) {
            self.held_uids.remove(&uid);
        }
    }

    /// Route every device's events to the context owning their QP or CQ, and the completion
    /// events of verbs CQs to their completion channels.
    pub fn deliver_events(&mut self, devices: &mut [Device]) {
        for (dev, d) in devices.iter_mut().enumerate() {
            for cqn in d.take_cq_events() {
                if let Some(&(_, Some(h))) = self.cqs.get(&(dev, cqn)) {
                    self.cq_events.push_back(h);
                }
            }
            for e in d.take_events() {
                let srq = e.srqn.and_then(|n| self.srqs.get(&(dev, n)));
                let (ctx, cq) = match (e.qpn, e.cqn) {
                    _ if srq.is_some() => (srq.map(|k| k.ctx), None),
                    (Some(qpn), _) => (self.qps.get(&(dev, qpn)).map(|o| o.ctx), None),
                    (None, Some(cqn)) => match self.cqs.get(&(dev, cqn)) {
                        Some(&(ctx, h)) => (Some(ctx), h),
                        None => (None, None),
                    },
                    (None, None) => (None, None),
                };
                if let Some(q) = ctx.and_then(|c| self.events.get_mut(&c)) {
                    let srq = srq.and_then(|k| k.handle);
                    q.push_back(AsyncEvent { event_type: e.event_type, qp_num: e.qpn, cq, srq });
                }
            }
        }
    }

    /// The CQs whose completion events were delivered since the last call, oldest first.
    pub fn take_cq_events(&mut self) -> Vec<CqHandle> {
        self.cq_events.drain(..).collect()
    }

    /// As `ib_uverbs_release_uevent`: a destroyed object's events the program has not read
    /// go with it, so no event ever names an object that is gone.
    fn drop_events(&mut self, ctx: u32, of: impl Fn(&AsyncEvent) -> bool) {
        if let Some(q) = self.events.get_mut(&ctx) {
            q.retain(|e| !of(e));
        }
    }

    /// The oldest unread event of a context.
    pub fn get_async_event(&mut self, ctx: u32) -> Option<AsyncEvent> {
        self.events.get_mut(&ctx).and_then(VecDeque::pop_front)
    }
}

/// The driver's completion EQs of a device, one per vector: 256 entries, overrun ignored, no
/// async events.
fn make_comp_eqs(dev: &mut Device, host: &mut crate::host::Host, vectors: u16) -> Result<Vec<u32>> {
    use prm::eq::create_eq as c;
    let op = Op::DevxQueryEqn;
    let mut out = [0u8; 16];
    kernel_cmd(dev, &prm::new_input(16, opcode::ALLOC_UAR, 0, 0), &mut out)
        .map_err(|e| cmd_error(op, e, &out, "ALLOC_UAR"))?;
    let uar = prm::eq::uar::UAR.get(&out).unwrap_or(0);
    let mut eqns = Vec::new();
    for v in 0..vectors {
        let ring = host.alloc(256 * 64).ok_or_else(|| Error::new(op, mlx5_dv::errno::ENOMEM, "no host memory"))?;
        let mut input = prm::new_input(c::IN_SIZE + 8, opcode::CREATE_EQ, 0, 0);
        for (f, x) in
            [(c::LOG_EQ_SIZE, 8), (c::UAR_PAGE, uar), (c::INTR, u64::from(v) + 1), (c::OI, 1), (c::LOG_PAGE_SIZE, 2)]
        {
            f.set(&mut input, x).map_err(|e| internal(op, e))?;
        }
        input[c::PAS_BYTE..].copy_from_slice(&ring.to_be_bytes());
        kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "CREATE_EQ"))?;
        eqns.push(c::OUT_EQ_NUMBER.get(&out).unwrap_or(0) as u32);
    }
    Ok(eqns)
}

/// The mkey context fields an MR's mkey takes from its rights, PD and key variant (local
/// read always; no QP bound).
fn mkc_rights(access: AccessFlags, pdn: u32, variant: u8) -> [(prm::Field, u64); 8] {
    use prm::mkc;
    [
        (mkc::LR, 1),
        (mkc::LW, u64::from(access.contains(AccessFlags::LOCAL_WRITE))),
        (mkc::RR, u64::from(access.contains(AccessFlags::REMOTE_READ))),
        (mkc::RW, u64::from(access.contains(AccessFlags::REMOTE_WRITE))),
        (mkc::A, u64::from(access.contains(AccessFlags::REMOTE_ATOMIC))),
        (mkc::PD, u64::from(pdn)),
        (mkc::QPN, 0xff_ffff),
        (mkc::MKEY_7_0, u64::from(variant)),
    ]
}

/// DESTROY_PSV as the kernel issues it.
pub fn destroy_psv(dev: &mut Device, psv: u32, op: Op) -> Result<()> {
    let mut input = [0u8; prm::destroy_psv::IN_SIZE];
    prm::write_header(&mut input, opcode::DESTROY_PSV, 0, 0);
    prm::destroy_psv::PSVN.set(&mut input, u64::from(psv)).map_err(|e| internal(op, e))?;
    let mut out = [0u8; prm::mbox_out::SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DESTROY_PSV"))
}

/// DESTROY_GENERAL_OBJECT as the kernel issues it for a DEVX object (`mlx5dv_devx_obj_destroy`
/// and context cleanup): under the object's uid, a bad status as the mapped errno.
pub fn destroy_general_obj(dev: &mut Device, uid: u16, obj_type: u16, obj_id: u32, op: Op) -> Result<()> {
    let mut input = [0u8; prm::general_obj_in::SIZE];
    prm::write_header(&mut input, opcode::DESTROY_GENERAL_OBJECT, uid, 0);
    let fields =
        [(prm::general_obj_in::OBJ_TYPE, u64::from(obj_type)), (prm::general_obj_in::OBJ_ID, u64::from(obj_id))];
    for (f, v) in fields {
        f.set(&mut input, v).map_err(|e| internal(op, e))?;
    }
    let mut out = [0u8; prm::general_obj_out::SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DESTROY_GENERAL_OBJECT"))
}

/// DESTROY_MKEY as the kernel issues it.
pub fn destroy_mkey(dev: &mut Device, index: u32, op: Op) -> Result<()> {
    let mut input = [0u8; prm::destroy_mkey::IN_SIZE];
    prm::write_header(&mut input, opcode::DESTROY_MKEY, 0, 0);
    prm::destroy_mkey::MKEY_INDEX.set(&mut input, u64::from(index)).map_err(|e| internal(op, e))?;
    let mut out = [0u8; prm::mbox_out::SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DESTROY_MKEY"))
}

/// ALLOC_PD as the kernel issues it.
pub fn alloc_pd(dev: &mut Device, op: Op) -> Result<u32> {
    let input = prm::new_input(prm::pd::SIZE, opcode::ALLOC_PD, 0, 0);
    let mut out = [0u8; prm::pd::SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "ALLOC_PD"))?;
    Ok(prm::pd::PD.get(&out).map_err(|e| internal(op, e))? as u32)
}

/// DEALLOC_PD as the kernel issues it.
pub fn dealloc_pd(dev: &mut Device, pdn: u32, op: Op) -> Result<()> {
    let mut input = prm::new_input(prm::pd::SIZE, opcode::DEALLOC_PD, 0, 0);
    prm::pd::PD.set(&mut input, u64::from(pdn)).map_err(|e| internal(op, e))?;
    let mut out = [0u8; prm::pd::SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DEALLOC_PD"))
}

/// A simulator-internal mailbox error.
pub fn internal(op: Op, e: impl std::fmt::Display) -> Error {
    Error::new(op, mlx5_dv::errno::EIO, format!("simulator mailbox error: {e}"))
}

/// The error of a failed command, with its status and syndrome when the firmware gave one.
pub fn cmd_error(op: Op, errno: i32, out: &[u8], what: &str) -> Error {
    let (status, syndrome) = prm::read_status(out);
    let err = Error::new(op, errno, format!("{what} failed"));
    if status != prm::status::OK { err.with_cmd_status(mlx5_dv::CmdStatus { status, syndrome }) } else { err }
}
