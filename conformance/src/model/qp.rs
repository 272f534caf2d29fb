//! MRs and RC QPs: registration, creation and sizing (items 19, 75, 78), the state machine,
//! receives (item 88).

use std::collections::VecDeque;

use mlx5_dv::errno::{EINVAL, ENOMEM};
use mlx5_dv::{AccessFlags, QpState, wc_status};

use super::{Ctx, Expect, Key, Loc, Model, Mr, QpM, RECV_SGE, RECV_WR, Recv, St, Target, wr_id};

/// The fixed part of a send WQE of an RC QP with LOCAL_INV or mkey ops (item 19).
const SQ_OVERHEAD: u64 = 192;
/// `max_sq_desc_sz`: the documented default (item 19); the caps do not carry it.
const MAX_SQ_DESC_SZ: u64 = 1024;

/// `(max_post, max_inline_data)` of a send queue of `wr` WRs, or the errno (items 19, 75).
pub(super) fn sq_size(wr: u32, sge: u32, inline: u32, max_qp_wr: Option<u32>) -> Result<(u32, u32), Option<i32>> {
    let align = |v: u64, a: u64| v.div_ceil(a) * a;
    let max_gather = (MAX_SQ_DESC_SZ - SQ_OVERHEAD) / 16;
    if u64::from(sge) > max_gather {
        return Err(Some(EINVAL));
    }
    let size = SQ_OVERHEAD + 16 * u64::from(sge);
    let inl = if inline > 0 { SQ_OVERHEAD + align(4 + u64::from(inline), 16) } else { 0 };
    let tot = size.max(inl);
    if tot > MAX_SQ_DESC_SZ {
        return Err(Some(EINVAL));
    }
    let wqe = align(tot, 64);
    if u64::from(wr) > 0x7fff_ffff / MAX_SQ_DESC_SZ {
        return Err(Some(EINVAL));
    }
    let wq = (u64::from(wr) * wqe).next_power_of_two();
    // The kernel's max_send_wqebb; a backend that cannot tell leaves large queues undecided.
    let limit = max_qp_wr.ok_or(None)?;
    if wq / 64 > u64::from(limit) {
        return Err(Some(EINVAL));
    }
    let max_post = u32::try_from(wq / wqe).map_err(|_| None)?;
    let max_inline = u32::try_from(wqe - SQ_OVERHEAD - 4).map_err(|_| None)?;
    Ok((max_post, max_inline))
}

impl Model {
    pub(super) fn reg_mr(&mut self, pd: usize, buf: usize, off: u32, len: u32, access: u32) -> Expect {
        let Some(ctx) = self.pd_ctx(pd) else { return Expect::Errno(EINVAL) };
        // VFIO and other providers register memory their own way; not modelled.
        if !matches!(self.live_ctx(ctx), Some(Ctx::Kernel { .. })) {
            return Expect::Unknown;
        }
        let Some(b) = self.bufs.get(buf).and_then(|b| b.as_ref()) else { return Expect::Unknown };
        let end = u64::from(off) + u64::from(len);
        if len == 0 || end > b.len as u64 {
            return Expect::Unknown;
        }
        let a = AccessFlags::from_bits_retain(access);
        let known = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        if !known.contains(a) {
            return Expect::Unknown;
        }
        // The kernel's ib_check_mr_access: remote write or atomic need local write.
        let remote = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
        if a.intersects(remote) && !a.contains(AccessFlags::LOCAL_WRITE) {
            return Expect::Errno(EINVAL);
        }
        self.mrs.push(Some(Mr { pd, buf, off: u64::from(off), len: u64::from(len), access: a }));
        Expect::Ok(None)
    }

    pub(super) fn dereg_mr(&mut self, mr: usize) -> Expect {
        match self.mrs.get_mut(mr) {
            Some(m @ Some(_)) => {
                *m = None;
                Expect::Ok(None)
            }
            _ => Expect::Errno(EINVAL),
        }
    }

    pub(super) fn create_qp(&mut self, pd: usize, cq: usize, wr: u32, sge: u32, inline: u32) -> Expect {
        let Some(ctx) = self.pd_ctx(pd) else { return Expect::Errno(EINVAL) };
        let Some(c) = self.cqs.get(cq).copied().flatten() else { return Expect::Errno(EINVAL) };
        if !matches!(self.live_ctx(ctx), Some(Ctx::Kernel { .. })) || c.ctx != ctx || wr == 0 || sge == 0 {
            return Expect::Unknown;
        }
        let (max_post, max_inline) = match sq_size(wr, sge, inline, self.max_qp_wr) {
            Ok(v) => v,
            Err(Some(e)) => return Expect::Errno(e),
            Err(None) => return Expect::Unknown,
        };
        self.qps.push(Some(QpM {
            pd,
            cq,
            st: St::Reset,
            unknown: false,
            enabled: false,
            // Item 88: -1 on a new QP (create_qp ends by setting the RESET state).
            rq_gs: -1,
            max_post,
            max_inline,
            max_gs: sge,
            sq_used: 0,
            recvs: VecDeque::new(),
            peer: None,
            rx_gen: 0,
            rx_fresh: false,
            tx_sent: false,
            bound: None,
            dangling: false,
        }));
        // Item 78: 2 SGEs fit the 32-byte receive WQE.
        Expect::Ok(Some(u64::from(max_post) << 32 | u64::from(max_inline) << 8 | u64::from(RECV_SGE)))
    }

    /// Flush the QP's receives with WR_FLUSH_ERR (a QP entering ERR).
    pub(super) fn flush_recvs(&mut self, qp: usize) {
        let Some(q) = self.qps.get_mut(qp).and_then(|q| q.as_mut()) else { return };
        let recvs: Vec<Recv> = q.recvs.drain(..).collect();
        for r in recvs {
            self.cqe(qp, r.wr_id, wc_status::WR_FLUSH_ERR, None, None);
        }
    }

    /// The QP enters ERR: its receives are flushed.
    pub(super) fn enter_err(&mut self, qp: usize) {
        self.flush_recvs(qp);
        if let Some(q) = self.qps.get_mut(qp).and_then(|q| q.as_mut()) {
            q.st = St::Err;
            q.unknown = false;
        }
    }

    /// `ibv_modify_qp`: the RC transitions of `ib_modify_qp_is_ok`, the attributes RTR needs
    /// (item 86) and the provider's state-driven stubs (items 20, 88).
    pub(super) fn modify(&mut self, qp: usize, to: Target) -> Expect {
        let Some(q) = self.qps.get(qp).and_then(|q| q.as_ref()) else { return Expect::Errno(EINVAL) };
        let (st, unknown) = (q.st, q.unknown);
        // An error at the peer may have flushed the receives already: only RESET is sure.
        if unknown && !(to == Target::Reset || to == Target::Err && q.recvs.is_empty()) {
            return Expect::Unknown;
        }
        let ok = match to {
            // ib_modify_qp_is_ok: out of RESET only INIT (and RESET again).
            Target::Reset => true,
            Target::Err => st != St::Reset,
            Target::Init => matches!(st, St::Reset | St::Init),
            Target::Rtr(None) => false,
            Target::Rtr(Some(p)) => {
                if p >= self.qps.len() {
                    return Expect::Unknown;
                }
                st == St::Init
            }
            Target::Rts => matches!(st, St::Rtr | St::Rts),
        };
        if !ok {
            return Expect::Errno(EINVAL);
        }
        match to {
            Target::Reset => {
                if let Some(q) = self.qps[qp].as_mut() {
                    // Item 96: the queues start over and nothing from before is polled.
                    q.st = St::Reset;
                    q.unknown = false;
                    q.enabled = false;
                    q.rq_gs = -1;
                    q.recvs.clear();
                    q.sq_used = 0;
                    q.peer = None;
                    q.bound = None;
                    q.tx_sent = false;
                }
            }
            Target::Err => self.enter_err(qp),
            Target::Init => {
                if let Some(q) = self.qps[qp].as_mut() {
                    q.st = St::Init;
                    q.rq_gs = RECV_SGE as i32;
                }
            }
            Target::Rtr(p) => {
                let Some(p) = p else { return Expect::Errno(EINVAL) };
                let gen_now = match self.qps[qp].as_mut() {
                    Some(q) => {
                        q.st = St::Rtr;
                        q.peer = Some(p);
                        q.rx_gen = q.rx_gen.wrapping_add(1);
                        q.rx_fresh = true;
                        q.rx_gen
                    }
                    None => return Expect::Unknown,
                };
                // A peer already in RTS towards this QP that sent nothing is in step again.
                if let Some(Some(a)) = self.qps.get_mut(p)
                    && p != qp
                    && a.st == St::Rts
                    && a.peer == Some(qp)
                    && !a.tx_sent
                    && !a.unknown
                {
                    a.bound = Some(gen_now);
                }
            }
            Target::Rts => {
                if st == St::Rts {
                    return Expect::Ok(None);
                }
                let peer = self.qps[qp].as_ref().and_then(|q| q.peer);
                let bound = peer.and_then(|p| {
                    let r = self.qps.get(p)?.as_ref()?;
                    let ready = !r.unknown && matches!(r.st, St::Rtr | St::Rts) && r.peer == Some(qp) && r.rx_fresh;
                    ready.then_some(r.rx_gen)
                });
                if let Some(q) = self.qps[qp].as_mut() {
                    q.st = St::Rts;
                    q.enabled = true;
                    q.tx_sent = false;
                    q.bound = bound;
                }
            }
        }
        Expect::Ok(None)
    }

    pub(super) fn connect(&mut self, qp: usize, peer: usize) -> Expect {
        for to in [Target::Init, Target::Rtr(Some(peer)), Target::Rts] {
            let r = self.modify(qp, to);
            if r != Expect::Ok(None) {
                return r;
            }
        }
        Expect::Ok(None)
    }

    pub(super) fn query_qp(&self, qp: usize) -> Expect {
        let Some(q) = self.qps.get(qp).and_then(|q| q.as_ref()) else { return Expect::Errno(EINVAL) };
        if q.unknown {
            return Expect::Unknown;
        }
        let s = match q.st {
            St::Reset => QpState::Reset,
            St::Init => QpState::Init,
            St::Rtr => QpState::Rtr,
            St::Rts => QpState::Rts,
            St::Err => QpState::Err,
        };
        Expect::Ok(Some(s as u64))
    }

    pub(super) fn destroy_qp(&mut self, qp: usize) -> Expect {
        match self.qps.get_mut(qp) {
            Some(q @ Some(_)) => {
                *q = None;
                Expect::Ok(None)
            }
            _ => Expect::Errno(EINVAL),
        }
    }

    /// Item 88: room first (ENOMEM), then the SGE count against the state-driven limit.
    pub(super) fn post_recv(&mut self, qp: usize, sge: Option<Loc>, seq: u64) -> Expect {
        let Some(q) = self.qps.get(qp).and_then(|q| q.as_ref()) else { return Expect::Errno(EINVAL) };
        if q.unknown {
            return Expect::Unknown;
        }
        if q.recvs.len() >= RECV_WR as usize {
            return Expect::Errno(ENOMEM);
        }
        if i32::from(sge.is_some()) > q.rq_gs {
            return Expect::Errno(EINVAL);
        }
        // A receive posted in RESET, and one through an mkey (scatter-to-CQE, item 74).
        if q.st == St::Reset || sge.is_some_and(|s| !matches!(s.key, Key::Mr(_))) {
            return Expect::Unknown;
        }
        let id = wr_id(seq, 0, true);
        if q.st == St::Err {
            self.cqe(qp, id, wc_status::WR_FLUSH_ERR, None, None);
            return Expect::Ok(None);
        }
        if let Some(q) = self.qps[qp].as_mut() {
            q.recvs.push_back(Recv { wr_id: id, sge });
        }
        Expect::Ok(None)
    }
}
