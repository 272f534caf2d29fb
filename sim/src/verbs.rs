//! The provider's data path: buffers, MRs, CQs, QPs, and the `ibv_wr_start … ibv_wr_complete`
//! chain with its builders and mkey setters, as libmlx5 runs them. The device side (executing
//! WQEs) is in [`crate::engine`].

use std::collections::{BTreeMap, VecDeque};

use mlx5_dv::errno::{EBUSY, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prm::{self, opcode};
use mlx5_dv::{
    AccessFlags, Buf, BufHandle, Cq, CqHandle, Error, Mkey, MrHandle, MrInterleaved, Op, Qp, QpHandle, QpInitAttr,
    QpModify, QpState, RecvWr, Result, SendFlags, Sge, SigBlockAttr, Wc, WrOp, dv_qp, qp_type, send_ops,
};

use crate::firmware::{Klm, RepeatEntry, Translation};
use crate::kernel;
use crate::memory::Memory;
use crate::profile::{DataPathSection, Profile};
use crate::provider::Simulator;

/// Bytes of a send WQE basic block.
const SEND_WQE_BB: u32 = 64;
/// `_sq_overhead`: the largest fixed part of a WQE the QP may post, plus its transport
/// segment. UMR or LOCAL_INV: ctrl + UMR ctrl + mkey context + 64 = 192 bytes.
fn sq_overhead(qp_type: u32, ops: u64, mlx5_ops: u64) -> u32 {
    let mut size = 16;
    if ops & (send_ops::RDMA_WRITE | send_ops::RDMA_WRITE_WITH_IMM | send_ops::RDMA_READ) != 0 {
        size = size.max(16 + 16);
    }
    if ops & (send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD) != 0 {
        size = size.max(16 + 16 + 16);
    }
    if ops & (send_ops::BIND_MW | send_ops::LOCAL_INV) != 0
        || mlx5_ops & (dv_qp::WITH_MR_INTERLEAVED | dv_qp::WITH_MR_LIST | dv_qp::WITH_MKEY_CONFIGURE) != 0
    {
        size = size.max(16 + 48 + 64 + 64);
    }
    match qp_type {
        qp_type::UD => size + 48,
        qp_type::XRC_SEND => size + 16,
        _ => size,
    }
}
/// `sizeof(struct mlx5_wqe_inl_data_seg)`.
const INL_SEG: i64 = 4;

/// A buffer of host memory handed to the application.
#[derive(Debug, Clone)]
pub(crate) struct BufObj {
    addr: u64,
    len: usize,
    mrs: u32,
}

/// A registered memory region.
#[derive(Debug, Clone)]
pub(crate) struct MrObj {
    ctx: u32,
    pd: u32,
    dev: usize,
    index: u32,
    buf: u32,
}

/// Data the device put in a CQE (scatter-to-CQE), which the provider copies out at poll time.
#[derive(Debug, Clone)]
pub(crate) struct InlineScatter {
    pub(crate) data: Vec<u8>,
    pub(crate) sge: Vec<Sge>,
}

/// A CQE as the device wrote it.
#[derive(Debug, Clone)]
pub(crate) struct CqEntry {
    pub(crate) wc: Wc,
    pub(crate) qp: u32,
    /// For send-side CQEs: the sequence number of the WQE it retires (with all before it).
    pub(crate) sq_seq: Option<u64>,
    pub(crate) scatter: Option<InlineScatter>,
    /// A SIG_ERR CQE: consumed by the provider, never returned (device, mkey index, error).
    pub(crate) sig_err: Option<(usize, u32, crate::provider::StoredSigErr)>,
}

/// A completion queue.
#[derive(Debug, Clone)]
pub(crate) struct CqObj {
    pub(crate) ctx: u32,
    pub(crate) cqe: u32,
    pub(crate) entries: VecDeque<CqEntry>,
    pub(crate) users: u32,
    pub(crate) overrun: bool,
}

/// What a UMR WQE writes into an mkey (the fields of its mkey context segment under the mask).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UmrWqe {
    /// The target mkey index (`imm >> 8`).
    pub(crate) index: u32,
    /// The new tag (`qpn_mkey & 0xff`).
    pub(crate) tag: u8,
    /// New access flags (LW|RR|RW|A), if the setter ran.
    pub(crate) access: Option<u32>,
    /// New length and translation, if a layout setter ran.
    pub(crate) layout: Option<(u64, Translation)>,
    /// BSF enable written as 0 (signature mkey without attributes).
    pub(crate) bsf_disable: bool,
    /// A new signature BSF.
    pub(crate) sig_bsf: Option<crate::signature::SigConfig>,
}

/// What a WQE asks the device to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WqeKind {
    Write {
        rkey: u32,
        raddr: u64,
        sge: Vec<Sge>,
        imm: Option<u32>,
    },
    Read {
        rkey: u32,
        raddr: u64,
        sge: Vec<Sge>,
    },
    Send {
        sge: Vec<Sge>,
        imm: Option<u32>,
        inv: Option<u32>,
    },
    LocalInv {
        key: u32,
    },
    Umr(UmrWqe),
    /// A WQE cancelled by `mlx5dv_qp_cancel_posted_send_wrs`: it completes and moves nothing.
    Nop,
    /// SET_PSV: re-initialise a PSV of the signature mkey with this index.
    SetPsv {
        index: u32,
        transient: u64,
    },
}

/// A posted send WQE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wqe {
    pub(crate) wr_id: u64,
    pub(crate) signaled: bool,
    pub(crate) opcode: u32,
    pub(crate) kind: WqeKind,
    pub(crate) seq: u64,
}

/// The mlx5 WQE opcode of a WQE kind (`MLX5_OPCODE_*`).
fn mlx5_opcode(k: &WqeKind) -> u8 {
    match k {
        WqeKind::Write { imm: None, .. } => 0x08,
        WqeKind::Write { imm: Some(_), .. } => 0x09,
        WqeKind::Read { .. } => 0x10,
        WqeKind::Send { inv: Some(_), .. } => 0x01,
        WqeKind::Send { imm: Some(_), .. } => 0x0b,
        WqeKind::Send { .. } => 0x0a,
        WqeKind::LocalInv { .. } | WqeKind::Umr(_) => 0x25,
        WqeKind::SetPsv { .. } => 0x20,
        WqeKind::Nop => 0x00,
    }
}

/// A queue pair.
#[derive(Debug, Clone)]
pub(crate) struct QpObj {
    pub(crate) ctx: u32,
    pub(crate) dev: usize,
    pub(crate) pd: u32,
    pub(crate) qp_num: u32,
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) state: QpState,
    /// Only RC QPs move data in the simulator.
    rc: bool,
    max_post: u32,
    rq_max_post: u32,
    rq_max_gs: u32,
    max_inline_data: i64,
    mkey_ops: bool,
    pub(crate) scatter_to_cqe: bool,
    pub(crate) access: AccessFlags,
    /// The responder the RTR path names, resolved through the fabric when the path was set.
    pub(crate) remote: Option<u32>,
    wr_complete_real: bool,
    /// `fm_cache`: the next WQE carries the initiator small fence (after a UMR).
    fence_next: bool,
    /// Created with SIG_PIPELINING: a signature error drains the send queue to SQD.
    pub(crate) drain_sigerr: bool,
    pub(crate) sq: VecDeque<Wqe>,
    sq_head: u64,
    sq_tail: u64,
    pub(crate) rq: VecDeque<RecvWr>,
}

/// The data-path state of the simulated host.
#[derive(Debug, Clone)]
pub(crate) struct DataPath {
    pub(crate) mem: Memory,
    pub(crate) bufs: BTreeMap<u32, BufObj>,
    pub(crate) mrs: BTreeMap<u32, MrObj>,
    pub(crate) cqs: BTreeMap<u32, CqObj>,
    pub(crate) qps: BTreeMap<u32, QpObj>,
    next_qpn: Vec<u32>,
    mr_variant: Vec<u8>,
    pub(crate) limits: DataPathSection,
    sqd2rts: bool,
    /// Posted WQEs as the device sees them, when recording.
    pub(crate) wqe_log: Option<Vec<mlx5_dv::WqeRecord>>,
    /// Reused transfer buffers: a fresh megabyte per transfer costs page faults.
    scratch: Vec<Vec<u8>>,
}

impl DataPath {
    /// An empty buffer from the pool.
    pub(crate) fn take_scratch(&mut self) -> Vec<u8> {
        self.scratch.pop().unwrap_or_default()
    }

    /// Return a buffer to the pool.
    pub(crate) fn give_scratch(&mut self, mut v: Vec<u8>) {
        if self.scratch.len() < 4 {
            v.clear();
            self.scratch.push(v);
        }
    }
}

impl DataPath {
    pub(crate) fn new(profile: &Profile, devices: usize) -> Self {
        DataPath {
            mem: Memory::default(),
            bufs: BTreeMap::new(),
            mrs: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            next_qpn: vec![0x100; devices],
            mr_variant: vec![0; devices],
            limits: profile.datapath.clone(),
            sqd2rts: profile.kernel.sqd2rts,
            wqe_log: None,
            scratch: Vec::new(),
        }
    }
}

/// An open `mlx5dv_wr_mkey_configure` whose setters have not all arrived.
struct OpenConfigure {
    qp: u32,
    /// Translation bytes written by a layout setter in this WR.
    xlat_bytes: u32,
    mkey_id: u32,
    umr: UmrWqe,
    wr_id: u64,
    signaled: bool,
    expected: u8,
    done: u8,
    num_desc: u16,
}

/// The provider's state during one `ibv_wr_start … ibv_wr_complete`.
struct Chain {
    err: i32,
    nreq: u32,
    wqes: Vec<(u64, bool, u32, WqeKind)>,
    open: Option<OpenConfigure>,
}

impl Chain {
    fn fail(&mut self, e: i32) {
        if self.err == 0 {
            self.err = e;
        }
    }
}

fn roundup_pow2(v: u64) -> u64 {
    v.max(1).next_power_of_two()
}

fn align(v: u32, a: u32) -> u32 {
    v.div_ceil(a) * a
}

/// `get_umr_mr_flags`: the mkey context's access byte is kept as verbs flags here.
const UMR_ACCESS: u32 = AccessFlags::LOCAL_WRITE.bits()
    | AccessFlags::REMOTE_WRITE.bits()
    | AccessFlags::REMOTE_READ.bits()
    | AccessFlags::REMOTE_ATOMIC.bits();

impl Simulator {
    fn buf_id(&self, h: BufHandle, op: Op) -> Result<u32> {
        let id = self.check(h.backend(), h.id(), op)?;
        if self.data.bufs.contains_key(&id) {
            Ok(id)
        } else {
            Err(Error::new(op, EINVAL, "buffer handle is stale (freed)"))
        }
    }

    pub(crate) fn dp_alloc_buf(&mut self, len: usize) -> Result<Buf> {
        let op = Op::AllocBuf;
        if len == 0 || len > (1 << 30) {
            return Err(Error::new(op, EINVAL, format!("buffer length {len} is outside 1..=1 GiB")));
        }
        let addr = self.data.mem.alloc(len).ok_or_else(|| Error::new(op, ENOMEM, "address space exhausted"))?;
        let id = self.fresh_id();
        self.data.bufs.insert(id, BufObj { addr, len, mrs: 0 });
        Ok(Buf { handle: BufHandle::new(self.id, id), addr, len })
    }

    pub(crate) fn dp_free_buf(&mut self, buf: &Buf) -> Result<()> {
        let op = Op::FreeBuf;
        let id = self.buf_id(buf.handle, op)?;
        if let Some(b) = self.data.bufs.get(&id) {
            if b.mrs > 0 {
                return Err(Error::new(op, EBUSY, format!("{} MR(s) still cover the buffer", b.mrs)));
            }
            self.data.mem.free(b.addr);
        }
        self.data.bufs.remove(&id);
        Ok(())
    }

    pub(crate) fn dp_write_buf(&mut self, buf: &Buf, offset: usize, data: &[u8]) -> Result<()> {
        let op = Op::WriteBuf;
        let id = self.buf_id(buf.handle, op)?;
        let b = self.data.bufs.get(&id).ok_or_else(|| Error::new(op, EINVAL, "stale buffer"))?;
        let end = offset.checked_add(data.len()).filter(|e| *e <= b.len);
        let Some(_) = end else {
            return Err(Error::new(
                op,
                EINVAL,
                format!("{} bytes at {offset} pass the buffer's {} bytes", data.len(), b.len),
            ));
        };
        let va = b.addr + offset as u64;
        if self.data.mem.write(va, data) { Ok(()) } else { Err(Error::new(op, EINVAL, "buffer not mapped")) }
    }

    pub(crate) fn dp_read_buf(&mut self, buf: &Buf, offset: usize, len: usize) -> Result<Vec<u8>> {
        let op = Op::ReadBuf;
        let id = self.buf_id(buf.handle, op)?;
        let b = self.data.bufs.get(&id).ok_or_else(|| Error::new(op, EINVAL, "stale buffer"))?;
        if offset.checked_add(len).is_none_or(|e| e > b.len) {
            return Err(Error::new(op, EINVAL, format!("{len} bytes at {offset} pass the buffer's {} bytes", b.len)));
        }
        self.data
            .mem
            .read(b.addr + offset as u64, len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::new(op, EINVAL, "buffer not mapped"))
    }

    /// `ibv_reg_mr`: the kernel pins the pages and creates an MTT mkey with the next key
    /// variant in its low byte.
    pub(crate) fn dp_reg_mr(
        &mut self,
        pd: mlx5_dv::PdHandle,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<mlx5_dv::Mr> {
        let op = Op::RegMr;
        let (pd_id, p) = self.pd(pd, op)?;
        let (ctx, pdn) = (p.ctx, p.pdn);
        let dev = self.contexts.get(&ctx).map(|c| c.dev).ok_or_else(|| Error::new(op, EINVAL, "context closed"))?;
        let pdn = pdn.ok_or_else(|| Error::new(op, EOPNOTSUPP, "MRs are simulated on mlx5 contexts only"))?;
        let known = AccessFlags::all().bits();
        if access.bits() & !known != 0 {
            return Err(Error::new(op, EINVAL, format!("unknown access bits 0x{:x}", access.bits() & !known)));
        }
        // ib_check_mr_access: remote write or atomic needs local write.
        if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
            && !access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(Error::new(op, EINVAL, "REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE"));
        }
        if length == 0 || !self.data.mem.is_mapped(addr, length) {
            return Err(Error::new(
                op,
                mlx5_dv::errno::EFAULT,
                format!("[0x{addr:x}, +{length}) is not mapped memory"),
            ));
        }
        let buf = self
            .data
            .bufs
            .iter()
            .find(|(_, b)| b.addr <= addr && addr - b.addr < b.len as u64)
            .map(|(id, _)| *id)
            .ok_or_else(|| Error::new(op, mlx5_dv::errno::EFAULT, "not a buffer of this backend"))?;
        let variant = self.data.mr_variant[dev];
        self.data.mr_variant[dev] = variant.wrapping_add(1);
        let index = self.kernel_create_mr(dev, pdn, addr, length, access, variant)?;
        let id = self.fresh_id();
        self.data.mrs.insert(id, MrObj { ctx, pd: pd_id, dev, index, buf });
        if let Some(b) = self.data.bufs.get_mut(&buf) {
            b.mrs += 1;
        }
        if let Some(p) = self.pds.get_mut(&pd_id) {
            p.users += 1;
        }
        let key = index << 8 | u32::from(variant);
        Ok(mlx5_dv::Mr { handle: MrHandle::new(self.id, id), lkey: key, rkey: key, addr, length })
    }

    fn kernel_create_mr(
        &mut self,
        dev: usize,
        pdn: u32,
        addr: u64,
        length: u64,
        access: AccessFlags,
        variant: u8,
    ) -> Result<u32> {
        use prm::mkc;
        let op = Op::RegMr;
        let mut input = [0u8; prm::create_mkey::IN_SIZE];
        prm::write_header(&mut input, opcode::CREATE_MKEY, 0, 0);
        let at = |f: prm::Field| f.at(prm::create_mkey::MKC_BIT);
        let fields = [
            (mkc::ACCESS_MODE_1_0, mkc::ACCESS_MODE_MTT),
            (mkc::LR, 1),
            (mkc::LW, u64::from(access.contains(AccessFlags::LOCAL_WRITE))),
            (mkc::RR, u64::from(access.contains(AccessFlags::REMOTE_READ))),
            (mkc::RW, u64::from(access.contains(AccessFlags::REMOTE_WRITE))),
            (mkc::A, u64::from(access.contains(AccessFlags::REMOTE_ATOMIC))),
            (mkc::PD, u64::from(pdn)),
            (mkc::QPN, 0xff_ffff),
            (mkc::MKEY_7_0, u64::from(variant)),
            (mkc::START_ADDR, addr),
            (mkc::LEN, length),
        ];
        for (f, v) in fields {
            at(f).set(&mut input, v).map_err(|e| Error::new(op, mlx5_dv::errno::EIO, e.to_string()))?;
        }
        let mut out = [0u8; prm::create_mkey::OUT_SIZE];
        kernel::kernel_cmd(&mut self.fws[dev], &input, &mut out)
            .map_err(|e| Error::new(op, e, "CREATE_MKEY for the MR failed"))?;
        prm::create_mkey::OUT_MKEY_INDEX
            .get(&out)
            .map(|v| v as u32)
            .map_err(|e| Error::new(op, mlx5_dv::errno::EIO, e.to_string()))
    }

    pub(crate) fn dp_dereg_mr(&mut self, mr: &mlx5_dv::Mr) -> Result<()> {
        let op = Op::DeregMr;
        let id = self.check(mr.handle.backend(), mr.handle.id(), op)?;
        let m = self.data.mrs.get(&id).cloned().ok_or_else(|| Error::new(op, EINVAL, "MR handle is stale"))?;
        self.destroy_fw_mkey(m.dev, m.index, op)?;
        self.data.mrs.remove(&id);
        if let Some(b) = self.data.bufs.get_mut(&m.buf) {
            b.mrs = b.mrs.saturating_sub(1);
        }
        if let Some(p) = self.pds.get_mut(&m.pd) {
            p.users = p.users.saturating_sub(1);
        }
        Ok(())
    }

    /// `mlx5_create_cq`: `cqe + 1` rounded up to a power of two, capacity one less.
    pub(crate) fn dp_create_cq(&mut self, ctx: mlx5_dv::ContextHandle, cqe: u32) -> Result<Cq> {
        let op = Op::CreateCq;
        let (cid, c) = self.ctx(ctx, op)?;
        if c.kind_is_other() {
            return Err(Error::new(op, EOPNOTSUPP, "CQs are simulated on mlx5 contexts only"));
        }
        if cqe == 0 {
            return Err(Error::new(op, EINVAL, "cqe is 0"));
        }
        let ncqe = roundup_pow2(u64::from(cqe) + 1);
        if ncqe > 1 << 24 {
            return Err(Error::new(op, EINVAL, format!("{cqe} entries round to {ncqe}, over 2^24")));
        }
        let id = self.fresh_id();
        let cap = (ncqe - 1) as u32;
        self.data.cqs.insert(id, CqObj { ctx: cid, cqe: cap, entries: VecDeque::new(), users: 0, overrun: false });
        Ok(Cq { handle: CqHandle::new(self.id, id), cqe: cap })
    }

    fn cq_id(&self, h: CqHandle, op: Op) -> Result<u32> {
        let id = self.check(h.backend(), h.id(), op)?;
        if self.data.cqs.contains_key(&id) { Ok(id) } else { Err(Error::new(op, EINVAL, "CQ handle is stale")) }
    }

    pub(crate) fn dp_destroy_cq(&mut self, cq: &Cq) -> Result<()> {
        let op = Op::DestroyCq;
        let id = self.cq_id(cq.handle, op)?;
        if self.data.cqs.get(&id).is_some_and(|c| c.users > 0) {
            return Err(Error::new(op, EBUSY, "a QP still uses the CQ"));
        }
        self.data.cqs.remove(&id);
        Ok(())
    }

    /// `mlx5_poll_cq`: hand out CQEs, copy scatter-to-CQE data to the receive SGE addresses
    /// (as virtual addresses), and retire send-queue entries.
    pub(crate) fn dp_poll_cq(&mut self, cq: &Cq, max: usize) -> Result<Vec<Wc>> {
        let op = Op::PollCq;
        let id = self.cq_id(cq.handle, op)?;
        let mut out = Vec::new();
        while out.len() < max {
            let Some(e) = self.data.cqs.get_mut(&id).and_then(|c| c.entries.pop_front()) else { break };
            if let Some((dev, index, err)) = e.sig_err {
                if !self.take_sig_err(dev, index, err) {
                    return Err(Error::new(
                        op,
                        EINVAL,
                        format!("a signature error names unknown mkey index 0x{index:x}"),
                    ));
                }
                continue;
            }
            if let Some(s) = &e.scatter {
                self.copy_to_scat(s);
            }
            if let (Some(seq), Some(q)) = (e.sq_seq, self.data.qps.get_mut(&e.qp)) {
                // A CQE from before a RESET retires nothing of the new queue.
                q.sq_tail = q.sq_tail.max(seq + 1).min(q.sq_head);
            }
            out.push(e.wc);
        }
        Ok(out)
    }

    /// `copy_to_scat`: the SGE address is taken as a process virtual address, whatever key the
    /// SGE names; a zero-based (indirect mkey) address therefore misses the mkey's memory.
    fn copy_to_scat(&mut self, s: &InlineScatter) {
        let mut rest = &s.data[..];
        for sge in &s.sge {
            if rest.is_empty() {
                break;
            }
            let n = rest.len().min(sge.length as usize);
            // An unmapped address would fault in the real provider; here the bytes are lost.
            let _ = self.data.mem.write(sge.addr, &rest[..n]);
            rest = &rest[n..];
        }
    }

    pub(crate) fn qp_id(&self, h: QpHandle, op: Op) -> Result<u32> {
        let id = self.check(h.backend(), h.id(), op)?;
        if self.data.qps.contains_key(&id) { Ok(id) } else { Err(Error::new(op, EINVAL, "QP handle is stale")) }
    }

    /// `mlx5_create_qp` in the provider's order of checks, then the send/receive queue sizing.
    pub(crate) fn dp_create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp> {
        let op = Op::CreateQp;
        let (pd_id, p) = self.pd(attr.pd, op)?;
        let ctx = p.ctx;
        let scq = self.cq_id(attr.send_cq, op)?;
        let rcq = self.cq_id(attr.recv_cq, op)?;
        let c = self.contexts.get(&ctx).ok_or_else(|| Error::new(op, EINVAL, "context closed"))?;
        if c.kind_is_other() || !c.kind_is_kernel() {
            return Err(Error::new(op, EOPNOTSUPP, "QPs are simulated on mlx5 kernel contexts only"));
        }
        let dev = c.dev;
        if [scq, rcq].iter().any(|q| self.data.cqs.get(q).is_none_or(|cq| cq.ctx != ctx)) {
            return Err(Error::new(op, EINVAL, "the CQs belong to another context"));
        }
        let mut scatter_to_cqe = true;
        let mut drain_sigerr = false;
        let mut mlx5_ops = 0u64;
        if let Some(dv) = attr.dv {
            let sup =
                dv_qp::MASK_QP_CREATE_FLAGS | dv_qp::MASK_DC | dv_qp::MASK_SEND_OPS_FLAGS | dv_qp::MASK_DCI_STREAMS;
            if dv.comp_mask & !sup != 0 {
                return Err(Error::new(op, EINVAL, format!("unsupported dv comp_mask 0x{:x}", dv.comp_mask & !sup)));
            }
            if dv.comp_mask & dv_qp::MASK_DC != 0 && attr.qp_type != qp_type::DRIVER {
                return Err(Error::new(op, EINVAL, "DC attributes need IBV_QPT_DRIVER"));
            }
            if dv.comp_mask & dv_qp::MASK_QP_CREATE_FLAGS != 0 {
                let sup = dv_qp::CREATE_TUNNEL_OFFLOADS
                    | dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_UC
                    | dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_MC
                    | dv_qp::CREATE_DISABLE_SCATTER_TO_CQE
                    | dv_qp::CREATE_ALLOW_SCATTER_TO_CQE
                    | dv_qp::CREATE_PACKET_BASED_CREDIT_MODE
                    | dv_qp::CREATE_SIG_PIPELINING;
                if dv.create_flags & !sup != 0 {
                    return Err(Error::new(
                        op,
                        EINVAL,
                        format!("unsupported create_flags 0x{:x}", dv.create_flags & !sup),
                    ));
                }
                if dv.create_flags & dv_qp::CREATE_DISABLE_SCATTER_TO_CQE != 0 {
                    if dv.create_flags & dv_qp::CREATE_ALLOW_SCATTER_TO_CQE != 0 {
                        return Err(Error::new(op, EINVAL, "DISABLE and ALLOW_SCATTER_TO_CQE together"));
                    }
                    scatter_to_cqe = false;
                }
                if dv.create_flags & dv_qp::CREATE_SIG_PIPELINING != 0 {
                    if !self.data.sqd2rts {
                        return Err(Error::new(op, EOPNOTSUPP, "SIG_PIPELINING needs the kernel's SQD2RTS support"));
                    }
                    drain_sigerr = true;
                }
            }
            if attr.qp_type == qp_type::DRIVER {
                return Err(Error::new(op, EOPNOTSUPP, "DC QPs are not simulated"));
            }
            if dv.comp_mask & dv_qp::MASK_SEND_OPS_FLAGS != 0 {
                mlx5_ops = dv.send_ops_flags;
            }
        } else if attr.qp_type == qp_type::DRIVER {
            return Err(Error::new(op, EINVAL, "IBV_QPT_DRIVER needs mlx5dv attributes"));
        }
        // mlx5_qp_fill_wr_pfns
        let ops = attr.send_ops_flags;
        let dv_all = dv_qp::WITH_MR_INTERLEAVED
            | dv_qp::WITH_MR_LIST
            | dv_qp::WITH_MKEY_CONFIGURE
            | dv_qp::WITH_RAW_WQE
            | dv_qp::WITH_MEMCPY;
        if mlx5_ops & !dv_all != 0 {
            return Err(Error::new(
                op,
                EOPNOTSUPP,
                format!("unknown mlx5dv send_ops_flags 0x{:x}", mlx5_ops & !dv_all),
            ));
        }
        if ops & (send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD) != 0 {
            return Err(Error::new(op, EOPNOTSUPP, "atomics are not simulated"));
        }
        let rc_ops =
            send_ops::RC_DEFAULT | send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD | send_ops::BIND_MW;
        let (allowed_ops, allowed_dv) = match attr.qp_type {
            qp_type::RC => (rc_ops, dv_all),
            qp_type::UC => (
                send_ops::SEND
                    | send_ops::SEND_WITH_INV
                    | send_ops::SEND_WITH_IMM
                    | send_ops::RDMA_WRITE
                    | send_ops::RDMA_WRITE_WITH_IMM
                    | send_ops::LOCAL_INV
                    | send_ops::BIND_MW,
                dv_qp::WITH_RAW_WQE,
            ),
            qp_type::UD => (send_ops::SEND | send_ops::SEND_WITH_IMM, dv_qp::WITH_RAW_WQE),
            qp_type::RAW_PACKET => (send_ops::SEND | send_ops::TSO, dv_qp::WITH_RAW_WQE),
            qp_type::XRC_SEND => (rc_ops, dv_qp::WITH_RAW_WQE),
            t => return Err(Error::new(op, EINVAL, format!("unknown qp_type {t}"))),
        };
        if ops & !allowed_ops != 0 || mlx5_ops & !allowed_dv != 0 {
            return Err(Error::new(op, EOPNOTSUPP, "send_ops_flags not supported by this QP type"));
        }
        if !matches!(attr.qp_type, qp_type::RC | qp_type::UC | qp_type::UD) {
            return Err(Error::new(op, EOPNOTSUPP, "only RC, UC and UD QPs are simulated"));
        }
        let overhead = sq_overhead(attr.qp_type, ops, mlx5_ops);
        let lim = self.data.limits.clone();
        let cap = attr.cap;
        if cap.max_send_wr > lim.max_qp_wr || cap.max_recv_wr > lim.max_qp_wr {
            return Err(Error::new(op, EINVAL, format!("more than max_qp_wr = {} WRs", lim.max_qp_wr)));
        }
        // mlx5_calc_send_wqe / mlx5_calc_sq_size (RC: the default ops include LOCAL_INV).
        let mut out_cap = cap;
        let (mut max_post, mut max_inline) = (0u32, i64::from(cap.max_inline_data));
        if cap.max_send_wr > 0 {
            let size = overhead;
            let inl_size = if cap.max_inline_data > 0 { size + align(4 + cap.max_inline_data, 16) } else { 0 };
            let max_gather = (lim.max_sq_desc_sz.saturating_sub(size)) / 16;
            if cap.max_send_sge > max_gather {
                return Err(Error::new(op, EINVAL, format!("max_send_sge {} > {max_gather}", cap.max_send_sge)));
            }
            let tot = (size + cap.max_send_sge * 16).max(inl_size);
            if tot > lim.max_sq_desc_sz {
                return Err(Error::new(
                    op,
                    EINVAL,
                    format!("a {tot}-byte send WQE exceeds max_sq_desc_sz {}", lim.max_sq_desc_sz),
                ));
            }
            let wqe_size = align(tot, SEND_WQE_BB);
            let wq_size = roundup_pow2(u64::from(cap.max_send_wr) * u64::from(wqe_size));
            max_post = (wq_size / u64::from(wqe_size)) as u32;
            max_inline = i64::from(wqe_size) - i64::from(overhead) - INL_SEG;
            out_cap.max_send_wr = max_post;
            out_cap.max_inline_data = max_inline as u32;
        }
        let (mut rq_max_post, mut rq_max_gs) = (0, 0);
        if cap.max_recv_wr > 0 {
            let wqe_size = roundup_pow2(16 * u64::from(cap.max_recv_sge.max(1)));
            if wqe_size > u64::from(lim.max_rq_desc_sz) {
                return Err(Error::new(
                    op,
                    EINVAL,
                    format!("max_recv_sge {} exceeds max_rq_desc_sz", cap.max_recv_sge),
                ));
            }
            let wq_size = (roundup_pow2(u64::from(cap.max_recv_wr)) * wqe_size).max(64);
            rq_max_post = (wq_size / wqe_size) as u32;
            rq_max_gs = (wqe_size / 16) as u32;
            out_cap.max_recv_wr = rq_max_post;
            out_cap.max_recv_sge = rq_max_gs;
        }
        let qp_num = self.data.next_qpn[dev];
        self.data.next_qpn[dev] = qp_num.wrapping_add(1) & 0xff_ffff;
        let id = self.fresh_id();
        self.data.qps.insert(
            id,
            QpObj {
                ctx,
                dev,
                pd: pd_id,
                qp_num,
                send_cq: scq,
                recv_cq: rcq,
                state: QpState::Reset,
                rc: attr.qp_type == qp_type::RC,
                max_post,
                rq_max_post,
                rq_max_gs,
                max_inline_data: max_inline,
                mkey_ops: mlx5_ops != 0,
                scatter_to_cqe,
                access: AccessFlags::empty(),
                remote: None,
                wr_complete_real: false,
                fence_next: false,
                drain_sigerr,
                sq: VecDeque::new(),
                sq_head: 0,
                sq_tail: 0,
                rq: VecDeque::new(),
            },
        );
        for cq in [scq, rcq] {
            if let Some(c) = self.data.cqs.get_mut(&cq) {
                c.users += 1;
            }
        }
        if let Some(p) = self.pds.get_mut(&pd_id) {
            p.users += 1;
        }
        Ok(Qp { handle: QpHandle::new(self.id, id), qp_num, cap: out_cap })
    }

    pub(crate) fn dp_destroy_qp(&mut self, qp: &Qp) -> Result<()> {
        let id = self.qp_id(qp.handle, Op::DestroyQp)?;
        self.remove_qp(id);
        Ok(())
    }

    fn remove_qp(&mut self, id: u32) {
        let Some(q) = self.data.qps.remove(&id) else { return };
        for cq in [q.send_cq, q.recv_cq] {
            if let Some(c) = self.data.cqs.get_mut(&cq) {
                c.users = c.users.saturating_sub(1);
            }
        }
        if let Some(p) = self.pds.get_mut(&q.pd) {
            p.users = p.users.saturating_sub(1);
        }
    }

    /// Drop everything a closing context owns on the data path.
    pub(crate) fn release_data_path_of(&mut self, ctx: u32) {
        let qps: Vec<u32> = self.data.qps.iter().filter(|(_, q)| q.ctx == ctx).map(|(k, _)| *k).collect();
        qps.into_iter().for_each(|q| self.remove_qp(q));
        let mrs: Vec<u32> = self.data.mrs.iter().filter(|(_, m)| m.ctx == ctx).map(|(k, _)| *k).collect();
        for id in mrs {
            if let Some(m) = self.data.mrs.remove(&id) {
                let _ = self.destroy_fw_mkey(m.dev, m.index, Op::CloseDevice);
                if let Some(b) = self.data.bufs.get_mut(&m.buf) {
                    b.mrs = b.mrs.saturating_sub(1);
                }
            }
        }
        self.data.cqs.retain(|_, c| c.ctx != ctx);
    }

    pub(crate) fn dp_query_qp_state(&mut self, qp: &Qp) -> Result<QpState> {
        let id = self.qp_id(qp.handle, Op::QueryQp)?;
        self.data.qps.get(&id).map(|q| q.state).ok_or_else(|| Error::new(Op::QueryQp, EINVAL, "stale QP"))
    }

    /// `ibv_modify_qp`: the transitions `ib_modify_qp_is_ok` allows for RC.
    pub(crate) fn dp_modify_qp(&mut self, qp: &Qp, m: &QpModify) -> Result<()> {
        use QpState::{Err as Error_, Init, Reset, Rtr, Rts, Sqd, Sqe};
        let op = Op::ModifyQp;
        let id = self.qp_id(qp.handle, op)?;
        let cur = self.data.qps.get(&id).map(|q| q.state).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))?;
        let ok = match (cur, m.state) {
            (_, Reset) | (_, Error_) => true,
            (Reset, Init) | (Init, Init) | (Init, Rtr) | (Rtr, Rts) | (Rts, Rts) | (Rts, Sqd) | (Sqd, Sqd) => true,
            (Sqd, Rts) => self.data.sqd2rts,
            (Sqe, Rts) => true,
            _ => false,
        };
        if !ok {
            return Err(Error::new(op, EINVAL, format!("{cur:?} -> {:?} is not a valid transition", m.state)));
        }
        let remote = match (m.state, m.dest) {
            (Rtr, None) => return Err(Error::new(op, EINVAL, "RTR needs the path (IBV_QP_AV, IBV_QP_DEST_QPN)")),
            // A path to no one is accepted; requests on it time out (RETRY_EXC_ERR).
            (Rtr, Some(dest)) => self.fabric.route(&dest.ah).and_then(|dev| {
                self.data.qps.iter().find(|(_, q)| q.dev == dev && q.qp_num == dest.dest_qp_num).map(|(id, _)| *id)
            }),
            _ => None,
        };
        if m.state == Init {
            let allowed = AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC;
            if !allowed.contains(m.access) {
                return Err(Error::new(op, EINVAL, "qp_access_flags outside LW|RW|RR|ATOMIC"));
            }
        }
        let mut flush = false;
        if let Some(q) = self.data.qps.get_mut(&id) {
            q.state = m.state;
            match m.state {
                Reset => {
                    q.sq.clear();
                    q.rq.clear();
                    q.sq_head = 0;
                    q.sq_tail = 0;
                    q.remote = None;
                    q.wr_complete_real = false;
                }
                Init => q.access = m.access,
                Rtr => q.remote = remote,
                Rts => q.wr_complete_real = true,
                Error_ => flush = true,
                _ => {}
            }
        }
        if flush {
            self.flush_qp(id);
        }
        self.progress();
        Ok(())
    }

    /// `mlx5dv_qp_cancel_posted_send_wrs`: in SQD, turn the held WQEs with `wr_id` into NOPs.
    pub(crate) fn dp_cancel_posted_send_wrs(&mut self, qp: &Qp, wr_id: u64) -> Result<u32> {
        let op = Op::CancelPostedSendWrs;
        let id = self.qp_id(qp.handle, op)?;
        let q = self.data.qps.get_mut(&id).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))?;
        if q.state != QpState::Sqd {
            return Err(Error::new(op, EINVAL, "the QP is not in SQD"));
        }
        let mut n = 0;
        for w in q.sq.iter_mut().filter(|w| w.wr_id == wr_id) {
            w.kind = WqeKind::Nop;
            n += 1;
        }
        Ok(n)
    }

    pub(crate) fn dp_post_recv(&mut self, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        let op = Op::PostRecv;
        let id = self.qp_id(qp.handle, op)?;
        let q = self.data.qps.get_mut(&id).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))?;
        for (n, wr) in wrs.iter().enumerate() {
            // In RESET the provider's max_gs is -1, so every receive is refused.
            if q.state == QpState::Reset || wr.sge.len() as u32 > q.rq_max_gs {
                return Err(Error::new(
                    op,
                    EINVAL,
                    format!("receive WR {n}: {} SGEs, QP in {:?}", wr.sge.len(), q.state),
                ));
            }
            if q.rq.len() as u32 >= q.rq_max_post {
                return Err(Error::new(op, ENOMEM, format!("receive WR {n}: the receive queue is full")));
            }
            q.rq.push_back(wr.clone());
        }
        if q.state == QpState::Err {
            self.flush_qp(id);
        }
        self.progress();
        Ok(())
    }

    /// One `ibv_wr_start`, the builders and setters of `ops`, and `ibv_wr_complete`.
    pub(crate) fn dp_post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()> {
        let op = Op::PostSend;
        let id = self.qp_id(qp.handle, op)?;
        let q = self.data.qps.get(&id).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))?;
        if !q.rc {
            return Err(Error::new(op, EOPNOTSUPP, "posting is simulated on RC QPs only"));
        }
        let (outstanding, max_post, mkey_ops, real) =
            (q.sq_head.saturating_sub(q.sq_tail) as u32, q.max_post, q.mkey_ops, q.wr_complete_real);
        let update_tag = self.ctx_update_tag(q.ctx);
        let mut ch = Chain { err: 0, nreq: 0, wqes: Vec::new(), open: None };
        for w in ops {
            if !mkey_ops && w.is_mlx5dv_mkey_op() {
                ch.fail(EOPNOTSUPP);
                continue;
            }
            self.apply_op(id, w, &mut ch, outstanding, max_post, update_tag);
        }
        if !real {
            return Err(Error::new(op, EINVAL, "the QP is not in RTS since it was created or reset"));
        }
        if ch.err != 0 {
            return Err(Error::new(op, ch.err, "a builder or setter failed; nothing was posted"));
        }
        if let Some(q) = self.data.qps.get_mut(&id) {
            for (wr_id, signaled, opcode, kind) in ch.wqes {
                let seq = q.sq_head;
                q.sq_head += 1;
                let fence =
                    std::mem::replace(&mut q.fence_next, matches!(kind, WqeKind::Umr(_) | WqeKind::SetPsv { .. }));
                if let Some(log) = &mut self.data.wqe_log {
                    let transient_signature = match &kind {
                        WqeKind::SetPsv { transient, .. } => Some(*transient),
                        _ => None,
                    };
                    log.push(mlx5_dv::WqeRecord {
                        qp_num: q.qp_num,
                        opcode: mlx5_opcode(&kind),
                        small_fence: fence,
                        signaled,
                        transient_signature,
                    });
                }
                q.sq.push_back(Wqe { wr_id, signaled, opcode, kind, seq });
            }
            if q.state == QpState::Err {
                self.flush_qp(id);
            }
        }
        self.progress();
        Ok(())
    }

    fn ctx_update_tag(&self, ctx: u32) -> bool {
        self.contexts.get(&ctx).is_some_and(|c| c.update_tag())
    }

    /// `_common_wqe_init`: room in the send queue for one more WQE of this chain.
    fn wqe_init(ch: &mut Chain, outstanding: u32, max_post: u32) -> bool {
        if outstanding + ch.nreq >= max_post {
            ch.fail(ENOMEM);
            return false;
        }
        true
    }

    fn push(ch: &mut Chain, wr_id: u64, flags: SendFlags, opcode: u32, kind: WqeKind) {
        ch.nreq += 1;
        ch.wqes.push((wr_id, flags.contains(SendFlags::SIGNALED), opcode, kind));
    }

    fn apply_op(&mut self, qp: u32, w: &WrOp, ch: &mut Chain, outstanding: u32, max_post: u32, update_tag: bool) {
        use mlx5_dv::wc_opcode as wo;
        let builder = |ch: &mut Chain, wr_id: u64, flags: SendFlags, opcode: u32, kind: WqeKind| {
            // A builder after an unfinished configure starts a new WQE; the UMR is abandoned.
            ch.open = None;
            if Self::wqe_init(ch, outstanding, max_post) {
                Self::push(ch, wr_id, flags, opcode, kind);
            }
        };
        match w {
            WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge } => builder(
                ch,
                *wr_id,
                *flags,
                wo::RDMA_WRITE,
                WqeKind::Write { rkey: *rkey, raddr: *remote_addr, sge: sge.clone(), imm: None },
            ),
            WrOp::RdmaWriteImm { wr_id, flags, rkey, remote_addr, imm, sge } => builder(
                ch,
                *wr_id,
                *flags,
                wo::RDMA_WRITE,
                WqeKind::Write { rkey: *rkey, raddr: *remote_addr, sge: sge.clone(), imm: Some(*imm) },
            ),
            WrOp::RdmaRead { wr_id, flags, rkey, remote_addr, sge } => builder(
                ch,
                *wr_id,
                *flags,
                wo::RDMA_READ,
                WqeKind::Read { rkey: *rkey, raddr: *remote_addr, sge: sge.clone() },
            ),
            WrOp::Send { wr_id, flags, sge } => {
                builder(ch, *wr_id, *flags, wo::SEND, WqeKind::Send { sge: sge.clone(), imm: None, inv: None })
            }
            WrOp::SendImm { wr_id, flags, imm, sge } => {
                builder(ch, *wr_id, *flags, wo::SEND, WqeKind::Send { sge: sge.clone(), imm: Some(*imm), inv: None })
            }
            WrOp::SendInv { wr_id, flags, invalidate_rkey, sge } => builder(
                ch,
                *wr_id,
                *flags,
                wo::SEND,
                WqeKind::Send { sge: sge.clone(), imm: None, inv: Some(*invalidate_rkey) },
            ),
            WrOp::LocalInv { wr_id, flags, invalidate_rkey } => {
                builder(ch, *wr_id, *flags, wo::LOCAL_INV, WqeKind::LocalInv { key: *invalidate_rkey })
            }
            WrOp::MkeyConfigure { wr_id, flags, mkey, num_setters, conf_flags, comp_mask } => self.configure(
                qp,
                ch,
                *wr_id,
                *flags,
                mkey,
                *num_setters,
                *conf_flags,
                *comp_mask,
                outstanding,
                max_post,
                update_tag,
            ),
            WrOp::SetMkeyAccessFlags(a) => self.set_access(ch, *a),
            WrOp::SetMkeySigBlock(attr) => self.set_sig(ch, attr),
            WrOp::SetMkeyLayoutList(sge) => self.set_layout(qp, ch, Layout::List(sge)),
            WrOp::SetMkeyLayoutInterleaved { repeat_count, entries } => {
                self.set_layout(qp, ch, Layout::Interleaved(*repeat_count, entries))
            }
            WrOp::MrList { wr_id, flags, mkey, access, sge } => {
                self.configure(qp, ch, *wr_id, *flags, mkey, 2, 0, 0, outstanding, max_post, update_tag);
                self.set_access(ch, *access);
                self.set_layout(qp, ch, Layout::List(sge));
            }
            WrOp::MrInterleaved { wr_id, flags, mkey, access, repeat_count, entries } => {
                self.configure(qp, ch, *wr_id, *flags, mkey, 2, 0, 0, outstanding, max_post, update_tag);
                self.set_access(ch, *access);
                self.set_layout(qp, ch, Layout::Interleaved(*repeat_count, entries));
            }
        }
    }

    /// `mlx5_send_wr_mkey_configure`. It does not look at an earlier error: its own checks
    /// overwrite it.
    #[allow(clippy::too_many_arguments)]
    fn configure(
        &mut self,
        qp: u32,
        ch: &mut Chain,
        wr_id: u64,
        flags: SendFlags,
        mkey: &Mkey,
        num_setters: u8,
        conf_flags: u32,
        comp_mask: u64,
        outstanding: u32,
        max_post: u32,
        update_tag: bool,
    ) {
        ch.open = None;
        if !flags.contains(SendFlags::INLINE) {
            ch.err = EOPNOTSUPP;
            return;
        }
        if conf_flags & !mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR != 0 || comp_mask != 0 {
            ch.err = EOPNOTSUPP;
            return;
        }
        if !Self::wqe_init(ch, outstanding, max_post) {
            return;
        }
        let Ok(mkey_id) = self.check(mkey.handle.backend(), mkey.handle.id(), Op::PostSend) else {
            ch.fail(EINVAL);
            return;
        };
        let qdev = self.data.qps.get(&qp).map(|q| q.dev);
        let Some(m) = self.mkeys.get_mut(&mkey_id).filter(|m| Some(m.dev) == qdev) else {
            ch.fail(EINVAL);
            return;
        };
        if mkey.lkey & 0xff != 0 && !update_tag {
            ch.err = EOPNOTSUPP;
            return;
        }
        if let Some(s) = &mut m.sig {
            s.on_configure(conf_flags & mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR != 0);
        }
        let num_desc = m.num_desc;
        let umr = UmrWqe {
            index: mkey.lkey >> 8,
            tag: (mkey.lkey & 0xff) as u8,
            access: None,
            layout: None,
            bsf_disable: false,
            sig_bsf: None,
        };
        ch.open = Some(OpenConfigure {
            qp,
            xlat_bytes: 0,
            mkey_id,
            umr,
            wr_id,
            signaled: flags.contains(SendFlags::SIGNALED),
            expected: num_setters,
            done: 0,
            num_desc,
        });
        if num_setters == 0 {
            self.finalize(ch);
        }
    }

    fn set_access(&mut self, ch: &mut Chain, access: u32) {
        if ch.err != 0 {
            return;
        }
        let Some(open) = &mut ch.open else {
            ch.err = EINVAL;
            return;
        };
        if access & !UMR_ACCESS != 0 || open.umr.access.is_some() {
            ch.err = EINVAL;
            return;
        }
        open.umr.access = Some(access);
        open.done += 1;
        if open.done == open.expected {
            self.finalize(ch);
        }
    }

    fn set_layout(&mut self, qp: u32, ch: &mut Chain, layout: Layout<'_>) {
        if ch.err != 0 {
            return;
        }
        let max_inline = self.data.qps.get(&qp).map_or(0, |q| q.max_inline_data);
        let Some(open) = &mut ch.open else {
            ch.err = EINVAL;
            return;
        };
        // size_t arithmetic, as the provider does it: a WQE with no inline room wraps.
        let room = (max_inline as u64).wrapping_add(INL_SEG as u64) / 16;
        let (n, limit) = match &layout {
            Layout::List(s) => (s.len(), room.min(u64::from(open.num_desc))),
            Layout::Interleaved(_, e) => (e.len(), room.wrapping_sub(1).min(u64::from(open.num_desc))),
        };
        // num_entries is a uint16_t in C.
        if (n as u16) as u64 > limit || n > usize::from(u16::MAX) {
            ch.err = ENOMEM;
            return;
        }
        let already = match &open.umr.layout {
            Some((_, Translation::Klm(k))) => !k.is_empty(),
            Some((_, Translation::Repeat { .. })) => true,
            _ => false,
        };
        if already {
            ch.err = EINVAL;
            return;
        }
        open.xlat_bytes = 16
            * match &layout {
                Layout::List(s) => s.len() as u32,
                Layout::Interleaved(_, e) => e.len() as u32 + 1,
            };
        let (len, xlat) = match layout {
            Layout::List(sge) => {
                let len = sge.iter().map(|s| u64::from(s.length)).sum();
                (
                    len,
                    Translation::Klm(
                        sge.iter().map(|s| Klm { byte_count: s.length, key: s.lkey, addr: s.addr }).collect(),
                    ),
                )
            }
            Layout::Interleaved(repeat, entries) => {
                let per: u64 = entries.iter().map(|e| u64::from(e.bytes_count)).sum();
                let entries = entries
                    .iter()
                    .map(|e| RepeatEntry {
                        stride: e.bytes_count.wrapping_add(e.bytes_skip) as u16,
                        byte_count: e.bytes_count as u16,
                        key: e.lkey,
                        addr: e.addr,
                    })
                    .collect();
                (per.wrapping_mul(u64::from(repeat)), Translation::Repeat { repeat_count: repeat, entries })
            }
        };
        open.umr.layout = Some((len, xlat));
        let mkey_id = open.mkey_id;
        open.done += 1;
        let finished = open.done == open.expected;
        if let Some(m) = self.mkeys.get_mut(&mkey_id) {
            m.length = len;
        }
        if finished {
            self.finalize(ch);
        }
    }

    /// `mlx5_send_wr_set_mkey_sig_block`: the checks of docs/behaviour.md items 33-34, in order,
    /// each EINVAL.
    fn set_sig(&mut self, ch: &mut Chain, attr: &SigBlockAttr) {
        if ch.err != 0 {
            return;
        }
        let Some(open) = &mut ch.open else {
            ch.err = EINVAL;
            return;
        };
        let Some(sig) = self.mkeys.get_mut(&open.mkey_id).and_then(|m| m.sig.as_mut()) else {
            ch.err = EINVAL;
            return;
        };
        if sig.state == crate::provider::BsfState::Updated
            || (attr.mem.is_none() && attr.wire.is_none())
            || attr.flags & !mlx5_dv::sig::ATTR_FLAG_COPY_MASK != 0
            || attr.comp_mask != 0
            || ![attr.mem, attr.wire].iter().flatten().all(valid_domain)
        {
            ch.err = EINVAL;
            return;
        }
        sig.set_attr(*attr);
        open.done += 1;
        if open.done == open.expected {
            self.finalize(ch);
        }
    }

    /// `umr_wqe_finalize`: close the UMR WQE. A signature mkey without attributes gets its
    /// BSF disabled; new attributes get a BSF and SET_PSVs; kept attributes get SET_PSVs when
    /// a signature error must be re-armed.
    fn finalize(&mut self, ch: &mut Chain) {
        use crate::provider::BsfState;
        let Some(mut open) = ch.open.take() else { return };
        let max_inline = self.data.qps.get(&open.qp).map_or(0, |q| q.max_inline_data);
        let mut psvs: Vec<u64> = Vec::new();
        if let Some(m) = self.mkeys.get_mut(&open.mkey_id) {
            let (length, crypto) = (m.length, m.crypto);
            if let Some(s) = &mut m.sig {
                if !s.has_attributes() && !crypto {
                    open.umr.bsf_disable = true;
                }
                let mut set_psv = false;
                if s.err_count_updated {
                    s.err_count_updated = false;
                    set_psv = s.state == BsfState::Set;
                }
                if s.state == BsfState::Updated {
                    let xlat = i64::from(align(open.xlat_bytes, 64));
                    if xlat + 64 > max_inline + INL_SEG {
                        ch.err = ENOMEM;
                        return;
                    }
                    if length > u64::from(u32::MAX) {
                        ch.err = EINVAL;
                        return;
                    }
                    match s.attr.as_ref().map(sig_config) {
                        Some(Ok(cfg)) => open.umr.sig_bsf = Some(cfg),
                        Some(Err(e)) => {
                            ch.err = e;
                            return;
                        }
                        None => {}
                    }
                    set_psv = true;
                }
                if set_psv {
                    psvs = s
                        .attr
                        .map(|a| [a.mem, a.wire].into_iter().flatten().map(|d| transient_signature(&d)).collect())
                        .unwrap_or_default();
                }
            }
        }
        let index = open.umr.index;
        let flags = |last: bool| if last && open.signaled { SendFlags::SIGNALED } else { SendFlags::empty() };
        Self::push(ch, open.wr_id, flags(psvs.is_empty()), mlx5_dv::wc_opcode::DRIVER1, WqeKind::Umr(open.umr.clone()));
        let n = psvs.len();
        for (i, transient) in psvs.into_iter().enumerate() {
            Self::push(
                ch,
                open.wr_id,
                flags(i + 1 == n),
                mlx5_dv::wc_opcode::DRIVER1,
                WqeKind::SetPsv { index, transient },
            );
        }
    }
}

/// `psv_transient_signature`: the PSV's initial value for a domain.
fn transient_signature(d: &mlx5_dv::SigBlockDomain) -> u64 {
    if d.sig_type == mlx5_dv::sig::TYPE_T10DIF {
        u64::from(d.dif.bg) << 48 | u64::from(d.dif.app_tag) << 32 | u64::from(d.dif.ref_tag)
    } else if d.crc.crc_type == mlx5_dv::sig::CRC64_XP10 {
        d.crc.seed
    } else {
        d.crc.seed << 32
    }
}

/// `mlx5_validate_sig_block_domain`: block size, comp_mask, type and its parameters. Not
/// checked against the device's signature caps.
fn valid_domain(d: &mlx5_dv::SigBlockDomain) -> bool {
    use mlx5_dv::sig;
    if d.block_size > sig::BLOCK_4160 || d.comp_mask != 0 {
        return false;
    }
    match d.sig_type {
        sig::TYPE_T10DIF => {
            (d.dif.bg == 0 || d.dif.bg == 0xffff)
                && (d.dif.bg_type == sig::BG_CRC || d.dif.bg_type == sig::BG_CSUM)
                && d.dif.flags & !0x7 == 0
        }
        sig::TYPE_CRC => match d.crc.crc_type {
            sig::CRC32 | sig::CRC32C => d.crc.seed == 0 || d.crc.seed == 0xffff_ffff,
            sig::CRC64_XP10 => d.crc.seed == 0 || d.crc.seed == u64::MAX,
            _ => false,
        },
        _ => false,
    }
}

/// `mlx5_umr_fill_sig_bsf`: the BSF's view of the attributes. With a wire signature, the same
/// block structure decides the copy mask; COPY_MASK without it is EINVAL.
fn sig_config(attr: &SigBlockAttr) -> std::result::Result<crate::signature::SigConfig, i32> {
    use crate::signature::{Domain, SigConfig, automatic_copy_mask, same_block_structure};
    let mem = attr.mem.as_ref().and_then(Domain::from_attr);
    let wire = attr.wire.as_ref().and_then(Domain::from_attr);
    let mut cfg = SigConfig { mem, wire, check_mask: attr.check_mask, copy_mask: 0, sbs: false };
    if let Some(w) = wire {
        cfg.sbs = mem.is_some_and(|m| same_block_structure(&m, &w));
        if attr.flags & mlx5_dv::sig::ATTR_FLAG_COPY_MASK != 0 {
            if !cfg.sbs {
                return Err(EINVAL);
            }
            cfg.copy_mask = attr.copy_mask;
        } else if let (true, Some(m)) = (cfg.sbs, mem) {
            cfg.copy_mask = automatic_copy_mask(&m, &w);
        }
    }
    Ok(cfg)
}

enum Layout<'a> {
    List(&'a [Sge]),
    Interleaved(u32, &'a [MrInterleaved]),
}
