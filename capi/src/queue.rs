//! CQs and their completion channels, RC QPs, `ibv_modify_qp`, and the context ops the
//! header's inline `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq`
//! jump through.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::{
    AccessFlags, AhAttr, DvQpInitAttr, Gid, QpCap, QpDest, QpInitAttr, QpModify, QpState, RecvWr, SendOpsFlags, Sge,
    Wc, qp_type, send_ops,
};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::qpx::QpC;
use crate::state::{Shim, key, with};

/// A CQ: completions the shim already took from the simulator (for a completion channel)
/// are handed out first.
pub(crate) struct Cq {
    pub(crate) c: Box<ibv_cq>,
    pub(crate) cq: mlx5_dv::Cq,
    pub(crate) armed: bool,
    pub(crate) taken: VecDeque<Wc>,
}

/// An RC QP; the program holds `&c.ex.qp_base`.
pub(crate) struct Qp {
    pub(crate) c: Box<QpC>,
    pub(crate) qp: mlx5_dv::Qp,
    /// What the last successful `ibv_modify_qp` set, for `ibv_query_qp`.
    pub(crate) attr: ibv_qp_attr,
    /// The `ibv_wr_*` chain being built, and the first error a setter raised in it.
    pub(crate) chain: Vec<mlx5_dv::WrOp>,
    pub(crate) chain_err: c_int,
}

/// Install the ops a program's inline calls use.
pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.context.ops.poll_cq = Some(poll_cq);
    c.context.ops.req_notify_cq = Some(req_notify_cq);
    c.context.ops.post_send = Some(post_send);
    c.context.ops.post_recv = Some(post_recv);
    c.create_qp_ex = Some(create_qp_ex);
}

fn sges(list: *const ibv_sge, n: c_int) -> Result<Vec<Sge>, c_int> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's array of `n` SGEs.
    let s = unsafe { std::slice::from_raw_parts(list, n) };
    Ok(s.iter().map(|g| Sge { addr: g.addr, length: g.length, lkey: g.lkey }).collect())
}

/// The `ibv_send_wr` as the trait's operation.
fn send_op(wr: &ibv_send_wr) -> Result<mlx5_dv::WrOp, c_int> {
    use mlx5_dv::WrOp;
    let flags = mlx5_dv::SendFlags::from_bits_retain(wr.send_flags);
    let sge = sges(wr.sg_list, wr.num_sge)?;
    // SAFETY: the union member the opcode selects.
    let rdma = unsafe { wr.wr.rdma };
    // SAFETY: as above; a plain u32 either way.
    let imm = unsafe { wr.imm_data_invalidated_rkey_union.imm_data };
    let wr_id = wr.wr_id;
    Ok(match wr.opcode {
        ibv_wr_opcode::IBV_WR_RDMA_WRITE => {
            WrOp::RdmaWrite { wr_id, flags, rkey: rdma.rkey, remote_addr: rdma.remote_addr, sge }
        }
        ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM => {
            WrOp::RdmaWriteImm { wr_id, flags, rkey: rdma.rkey, remote_addr: rdma.remote_addr, imm, sge }
        }
        ibv_wr_opcode::IBV_WR_RDMA_READ => {
            WrOp::RdmaRead { wr_id, flags, rkey: rdma.rkey, remote_addr: rdma.remote_addr, sge }
        }
        ibv_wr_opcode::IBV_WR_SEND => WrOp::Send { wr_id, flags, sge },
        ibv_wr_opcode::IBV_WR_SEND_WITH_IMM => WrOp::SendImm { wr_id, flags, imm, sge },
        ibv_wr_opcode::IBV_WR_SEND_WITH_INV => WrOp::SendInv { wr_id, flags, invalidate_rkey: imm, sge },
        ibv_wr_opcode::IBV_WR_LOCAL_INV => WrOp::LocalInv { wr_id, flags, invalidate_rkey: imm },
        // Atomics, memory windows, TSO and driver opcodes are not simulated.
        _ => return Err(libc::EOPNOTSUPP),
    })
}

fn write_wc(w: &Wc, out: &mut ibv_wc) {
    // SAFETY: plain data.
    *out = unsafe { std::mem::zeroed() };
    out.wr_id = w.wr_id;
    out.status = w.status;
    out.opcode = w.opcode;
    out.vendor_err = w.vendor_err;
    out.byte_len = w.byte_len;
    out.imm_data_invalidated_rkey_union.imm_data = w.imm_data;
    out.qp_num = w.qp_num;
    out.wc_flags = w.wc_flags.bits();
}

/// The kernel's required attributes of an RC transition (`ib_modify_qp_is_ok`).
fn rc_required(from: QpState, to: QpState) -> Option<c_int> {
    type M = ibv_qp_attr_mask;
    let m = |v: ibv_qp_attr_mask| v.0 as c_int;
    Some(match (from, to) {
        (QpState::Reset, QpState::Init) => {
            m(M::IBV_QP_STATE) | m(M::IBV_QP_PKEY_INDEX) | m(M::IBV_QP_PORT) | m(M::IBV_QP_ACCESS_FLAGS)
        }
        (QpState::Init, QpState::Rtr) => {
            m(M::IBV_QP_STATE)
                | m(M::IBV_QP_AV)
                | m(M::IBV_QP_PATH_MTU)
                | m(M::IBV_QP_DEST_QPN)
                | m(M::IBV_QP_RQ_PSN)
                | m(M::IBV_QP_MAX_DEST_RD_ATOMIC)
                | m(M::IBV_QP_MIN_RNR_TIMER)
        }
        (QpState::Rtr, QpState::Rts) => {
            m(M::IBV_QP_STATE)
                | m(M::IBV_QP_SQ_PSN)
                | m(M::IBV_QP_TIMEOUT)
                | m(M::IBV_QP_RETRY_CNT)
                | m(M::IBV_QP_RNR_RETRY)
                | m(M::IBV_QP_MAX_QP_RD_ATOMIC)
        }
        _ => return None,
    })
}

fn state_of(s: u32) -> Option<QpState> {
    Some(match s {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqd,
        5 => QpState::Sqe,
        6 => QpState::Err,
        _ => return None,
    })
}

impl Shim {
    fn cq(&self, cq: *const ibv_cq) -> Result<&Cq, c_int> {
        self.cqs.get(&key(cq)).ok_or(libc::EINVAL)
    }

    pub(crate) fn qp(&mut self, qp: *const ibv_qp) -> Result<&mut Qp, c_int> {
        self.qps.get_mut(&key(qp)).ok_or(libc::EINVAL)
    }

    fn create_cq(
        &mut self,
        ctx: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
    ) -> Result<*mut ibv_cq, c_int> {
        let h = self.context(ctx)?.handle;
        if !channel.is_null() && !self.channels.contains_key(&key(channel)) {
            return Err(libc::EINVAL);
        }
        let n = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
        let cq = self.sim.create_cq(h, n).map_err(|e| e.errno())?;
        // SAFETY: plain data (a zeroed mutex and cond are their static initialisers on glibc).
        let mut c: Box<ibv_cq> = Box::new(unsafe { std::mem::zeroed() });
        c.context = ctx;
        c.channel = channel;
        c.cq_context = cq_context;
        c.handle = cq.handle.id();
        c.cqe = c_int::try_from(cq.cqe).unwrap_or(c_int::MAX);
        let p: *mut ibv_cq = &mut *c;
        self.cqs.insert(key(p), Cq { c, cq, armed: false, taken: VecDeque::new() });
        Ok(p)
    }

    fn destroy_cq(&mut self, cq: *mut ibv_cq) -> c_int {
        let Ok(c) = self.cq(cq).map(|c| c.cq) else { return libc::EINVAL };
        match self.sim.destroy_cq(&c) {
            Ok(()) => {
                self.cqs.remove(&key(cq));
                0
            }
            Err(e) => code(&e),
        }
    }

    fn poll(&mut self, cq: *mut ibv_cq, num: c_int, wc: *mut ibv_wc) -> c_int {
        let Some(c) = self.cqs.get_mut(&key(cq)) else { return -1 };
        let Ok(max) = usize::try_from(num) else { return -1 };
        if max > 0 && wc.is_null() {
            return -1;
        }
        let mut n = 0;
        while n < max {
            let Some(w) = c.taken.pop_front() else { break };
            // SAFETY: the caller's array of `num` entries; n < num.
            write_wc(&w, unsafe { &mut *wc.add(n) });
            n += 1;
        }
        let mut errors = false;
        if n < max {
            // A poll never returns more than the ring holds (`cqe + 1` entries).
            let want = (max - n).min(c.cq.cqe as usize + 1);
            let buf = &mut self.wc_scratch;
            if buf.len() < want {
                buf.resize(want, mlx5_dv::Wc::default());
            }
            match self.sim.poll_cq_into(&c.cq, &mut buf[..want]) {
                Ok(got) => {
                    for w in &buf[..got] {
                        errors |= w.status != 0;
                        // SAFETY: as above; the simulator returns at most `want <= max - n`.
                        write_wc(w, unsafe { &mut *wc.add(n) });
                        n += 1;
                    }
                }
                Err(_) => {
                    self.collect_events();
                    if n == 0 {
                        return -1;
                    }
                }
            }
        }
        if errors {
            self.collect_events();
        }
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }

    /// After work that may complete: an armed CQ with completions fires its channel once.
    /// (Asynchronous events are collected where they can arise without a cheap sign: state
    /// changes, error completions, failed posts, and `ibv_get_async_event` itself.)
    pub(crate) fn notify(&mut self) {
        for c in self.cqs.values_mut().filter(|c| c.armed) {
            if let Ok(v) = self.sim.poll_cq(&c.cq, usize::MAX) {
                c.taken.extend(v);
            }
            if c.taken.is_empty() {
                continue;
            }
            c.armed = false;
            let cq_key = key(&*c.c);
            if let Some(ch) = self.channels.get_mut(&key(c.c.channel)) {
                ch.fired.push_back(cq_key);
                let one: u64 = 1;
                // SAFETY: the channel's eventfd; an 8-byte write.
                unsafe { libc::write(ch.c.fd, ptr::from_ref(&one).cast(), 8) };
            }
        }
    }

    pub(crate) fn create_qp(
        &mut self,
        ctx: *mut ibv_context,
        attr: &mut ibv_qp_init_attr_ex,
        dv: Option<DvQpInitAttr>,
    ) -> Result<*mut ibv_qp, c_int> {
        const PD: u32 = 1 << 0;
        const SEND_OPS_FLAGS: u32 = 1 << 6;
        if attr.comp_mask & PD == 0 {
            return Err(libc::EINVAL);
        }
        let pd = self.pd(attr.pd)?.handle;
        let send_cq = self.cq(attr.send_cq)?.cq.handle;
        let recv_cq = self.cq(attr.recv_cq)?.cq.handle;
        if attr.comp_mask & !(PD | SEND_OPS_FLAGS) != 0 || !attr.srq.is_null() {
            return Err(libc::EOPNOTSUPP);
        }
        let qp_type = match attr.qp_type {
            ibv_qp_type::IBV_QPT_RC => qp_type::RC,
            ibv_qp_type::IBV_QPT_UC => qp_type::UC,
            ibv_qp_type::IBV_QPT_UD => qp_type::UD,
            t => t,
        };
        let extended = attr.comp_mask & SEND_OPS_FLAGS != 0;
        let cap = QpCap {
            max_send_wr: attr.cap.max_send_wr,
            max_recv_wr: attr.cap.max_recv_wr,
            max_send_sge: attr.cap.max_send_sge,
            max_recv_sge: attr.cap.max_recv_sge,
            max_inline_data: attr.cap.max_inline_data,
        };
        let send_ops_flags =
            if extended { SendOpsFlags::from_bits_retain(attr.send_ops_flags) } else { send_ops::RC_DEFAULT };
        let init = QpInitAttr { pd, send_cq, recv_cq, qp_type, cap, send_ops_flags, dv };
        let qp = self.sim.create_qp(&init).map_err(|e| e.errno())?;
        attr.cap.max_send_wr = qp.cap.max_send_wr;
        attr.cap.max_recv_wr = qp.cap.max_recv_wr;
        attr.cap.max_send_sge = qp.cap.max_send_sge;
        attr.cap.max_recv_sge = qp.cap.max_recv_sge;
        attr.cap.max_inline_data = qp.cap.max_inline_data;
        let mut c = QpC::new(extended);
        let base = &mut c.ex.qp_base;
        base.context = ctx;
        base.qp_context = attr.qp_context;
        base.pd = attr.pd;
        base.send_cq = attr.send_cq;
        base.recv_cq = attr.recv_cq;
        base.handle = qp.handle.id();
        base.qp_num = qp.qp_num;
        base.state = ibv_qp_state::IBV_QPS_RESET;
        base.qp_type = attr.qp_type;
        let p: *mut ibv_qp = base;
        // SAFETY: plain data.
        let mut last: ibv_qp_attr = unsafe { std::mem::zeroed() };
        last.cap = attr.cap;
        self.qps.insert(key(p), Qp { c, qp, attr: last, chain: Vec::new(), chain_err: 0 });
        Ok(p)
    }

    fn modify_qp(&mut self, qp: *mut ibv_qp, attr: &ibv_qp_attr, mask: c_int) -> c_int {
        let Ok(q) = self.qp(qp) else { return libc::EINVAL };
        let handle = q.qp;
        let Some(from) = state_of(q.c.ex.qp_base.state) else { return libc::EINVAL };
        let state_bit = ibv_qp_attr_mask::IBV_QP_STATE.0 as c_int;
        if mask & state_bit == 0 {
            // Attributes without a state change are kept for ibv_query_qp; the simulator's
            // QPs have no timers or PSNs to change.
            merge_attr(&mut q.attr, attr, mask);
            return 0;
        }
        let Some(to) = state_of(attr.qp_state) else { return libc::EINVAL };
        if q.c.ex.qp_base.qp_type == ibv_qp_type::IBV_QPT_RC
            && let Some(req) = rc_required(from, to)
            && mask & req != req
        {
            return libc::EINVAL;
        }
        let access_bit = ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0 as c_int;
        let access = if mask & access_bit != 0 {
            AccessFlags::from_bits_retain(attr.qp_access_flags)
        } else {
            AccessFlags::from_bits_retain(q.attr.qp_access_flags)
        };
        let dest = (to == QpState::Rtr).then(|| QpDest {
            dest_qp_num: attr.dest_qp_num,
            ah: ah(&attr.ah_attr),
            path_mtu: attr.path_mtu,
        });
        match self.sim.modify_qp(&handle, &QpModify { state: to, access, dest }) {
            Ok(()) => {
                if let Ok(q) = self.qp(qp) {
                    merge_attr(&mut q.attr, attr, mask);
                    q.c.ex.qp_base.state = attr.qp_state;
                }
                self.collect_events();
                self.notify();
                0
            }
            Err(e) => code(&e),
        }
    }

    fn post_send(&mut self, qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
        self.post_each(
            qp,
            wr,
            bad,
            |w| w.next,
            |s, h, w| {
                let op = send_op(w)?;
                s.sim.post_send(h, &[op]).map_err(|e| e.errno())
            },
        )
    }

    fn post_recv(&mut self, qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
        self.post_each(
            qp,
            wr,
            bad,
            |w| w.next,
            |s, h, w| {
                let sge = sges(w.sg_list, w.num_sge)?;
                s.sim.post_recv(h, &[RecvWr { wr_id: w.wr_id, sge }]).map_err(|e| e.errno())
            },
        )
    }

    /// Post a program's WR list one WR at a time, so a failure names its WR in `bad` exactly;
    /// 0, or the first failure's errno.
    fn post_each<W>(
        &mut self,
        qp: *mut ibv_qp,
        mut wr: *mut W,
        bad: *mut *mut W,
        next: fn(&W) -> *mut W,
        mut post: impl FnMut(&mut Shim, &mlx5_dv::Qp, &W) -> Result<(), c_int>,
    ) -> c_int {
        let Ok(handle) = self.qp(qp).map(|q| q.qp) else { return libc::EINVAL };
        let mut ret = 0;
        while !wr.is_null() {
            // SAFETY: the caller's WR list.
            let w = unsafe { &*wr };
            if let Err(e) = post(self, &handle, w) {
                if !bad.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *bad = wr };
                }
                ret = e;
                self.collect_events();
                break;
            }
            wr = next(w);
        }
        self.notify();
        ret
    }
}

fn ah(a: &ibv_ah_attr) -> AhAttr {
    // SAFETY: ibv_gid is 16 bytes either way.
    let raw = unsafe { a.grh.dgid.raw };
    AhAttr {
        dlid: a.dlid,
        is_global: a.is_global != 0,
        dgid: Gid(raw),
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        port_num: a.port_num,
    }
}

/// Keep the attributes `mask` names.
fn merge_attr(last: &mut ibv_qp_attr, a: &ibv_qp_attr, mask: c_int) {
    type M = ibv_qp_attr_mask;
    let has = |m: ibv_qp_attr_mask| mask & m.0 as c_int != 0;
    if has(M::IBV_QP_STATE) {
        last.qp_state = a.qp_state;
    }
    if has(M::IBV_QP_ACCESS_FLAGS) {
        last.qp_access_flags = a.qp_access_flags;
    }
    if has(M::IBV_QP_PKEY_INDEX) {
        last.pkey_index = a.pkey_index;
    }
    if has(M::IBV_QP_PORT) {
        last.port_num = a.port_num;
    }
    if has(M::IBV_QP_AV) {
        last.ah_attr = a.ah_attr;
    }
    if has(M::IBV_QP_PATH_MTU) {
        last.path_mtu = a.path_mtu;
    }
    if has(M::IBV_QP_DEST_QPN) {
        last.dest_qp_num = a.dest_qp_num;
    }
    if has(M::IBV_QP_RQ_PSN) {
        last.rq_psn = a.rq_psn;
    }
    if has(M::IBV_QP_SQ_PSN) {
        last.sq_psn = a.sq_psn;
    }
    if has(M::IBV_QP_TIMEOUT) {
        last.timeout = a.timeout;
    }
    if has(M::IBV_QP_RETRY_CNT) {
        last.retry_cnt = a.retry_cnt;
    }
    if has(M::IBV_QP_RNR_RETRY) {
        last.rnr_retry = a.rnr_retry;
    }
    if has(M::IBV_QP_MAX_QP_RD_ATOMIC) {
        last.max_rd_atomic = a.max_rd_atomic;
    }
    if has(M::IBV_QP_MAX_DEST_RD_ATOMIC) {
        last.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if has(M::IBV_QP_MIN_RNR_TIMER) {
        last.min_rnr_timer = a.min_rnr_timer;
    }
}

unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num: c_int, wc: *mut ibv_wc) -> c_int {
    with(|_| -1, |s| s.poll(cq, num, wc))
}

unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    with(
        |e| e,
        |s| match s.cqs.get_mut(&key(cq)) {
            Some(c) if !c.c.channel.is_null() => {
                c.armed = true;
                s.notify();
                0
            }
            Some(_) => libc::EINVAL,
            None => libc::EINVAL,
        },
    )
}

unsafe extern "C" fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    with(|e| e, |s| s.post_send(qp, wr, bad))
}

unsafe extern "C" fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    with(|e| e, |s| s.post_recv(qp, wr, bad))
}

unsafe extern "C" fn create_qp_ex(context: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    with(null, |s| s.create_qp(context, unsafe { &mut *attr }, None).unwrap_or_else(null))
}

/// `ibv_create_cq`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> *mut ibv_cq {
    with(null, |s| s.create_cq(context, cqe, cq_context, channel).unwrap_or_else(null))
}

/// `ibv_destroy_cq`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    with(|e| e, |s| s.destroy_cq(cq))
}

/// `ibv_create_qp`: writes back the QP's actual capabilities.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    if attr.is_null() || pd.is_null() {
        return null(libc::EINVAL);
    }
    with(null, |s| {
        let Ok(p) = s.pd(pd) else { return null(libc::EINVAL) };
        let ctx = p.c.context;
        // SAFETY: the caller's attributes; ibv_qp_init_attr is ibv_qp_init_attr_ex's prefix.
        let a = unsafe { &mut *attr };
        // SAFETY: plain data.
        let mut ex: ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
        ex.qp_context = a.qp_context;
        ex.send_cq = a.send_cq;
        ex.recv_cq = a.recv_cq;
        ex.srq = a.srq;
        ex.cap = a.cap;
        ex.qp_type = a.qp_type;
        ex.sq_sig_all = a.sq_sig_all;
        ex.comp_mask = 1;
        ex.pd = pd;
        match s.create_qp(ctx, &mut ex, None) {
            Ok(q) => {
                a.cap = ex.cap;
                q
            }
            Err(e) => null(e),
        }
    })
}

/// `ibv_modify_qp`: the kernel's required attributes per transition, then the simulator's
/// state machine.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attributes.
    with(|e| e, |s| s.modify_qp(qp, unsafe { &*attr }, attr_mask))
}

/// `ibv_query_qp`: the state from the simulator, the rest as last set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let Ok(q) = s.qp(qp) else { return libc::EINVAL };
            let handle = q.qp;
            // SAFETY: ibv_qp_attr is plain data; a bitwise copy.
            let mut last: ibv_qp_attr = unsafe { std::ptr::read(&q.attr) };
            let base = &q.c.ex.qp_base;
            let (send_cq, recv_cq, ctx, qp_type) = (base.send_cq, base.recv_cq, base.qp_context, base.qp_type);
            let state = match s.sim.query_qp_state(&handle) {
                Ok(st) => st as u32,
                Err(e) => return code(&e),
            };
            last.qp_state = state;
            last.cur_qp_state = state;
            // SAFETY: the caller's out-parameters.
            unsafe {
                *attr = last;
                if !init_attr.is_null() {
                    ptr::write_bytes(init_attr, 0, 1);
                    (*init_attr).qp_context = ctx;
                    (*init_attr).send_cq = send_cq;
                    (*init_attr).recv_cq = recv_cq;
                    (*init_attr).cap = (*attr).cap;
                    (*init_attr).qp_type = qp_type;
                }
            }
            if let Ok(q) = s.qp(qp) {
                q.c.ex.qp_base.state = state;
            }
            0
        },
    )
}

/// `ibv_destroy_qp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(q) = s.qp(qp) else { return libc::EINVAL };
            let h = q.qp;
            match s.sim.destroy_qp(&h) {
                Ok(()) => {
                    s.qps.remove(&key(qp));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}
