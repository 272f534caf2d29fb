//! Running an atomics or window scenario on a backend: a context of its own with a PD, a
//! requester QP and a responder QP (each on a CQ of its own) connected to each other, the
//! scenario's buffers and window, all released afterwards.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::{
    AccessFlags as A, Backend, BindMw, Buf, ContextHandle, Cq, Mr, Mw, MwBind, MwBindInfo, PdHandle, Qp, QpCap, QpDest,
    QpInitAttr, QpModify, RecvWr, SendFlags, SendOpsFlags, SendWr, Sge, Wc, WrOp, inc_rkey, send_ops, wc_flags,
    wc_opcode, wr_opcode,
};

use super::atomic::{AtomicOp, REGION};
use super::mw::{MwOp, MwStep, RECV_LEN, SEND_LEN, step_id};
use super::outcome::{NetCqe, Outcome};

const QP_ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

fn say<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// A requester QP `a` connected to a responder QP `s`, each on its CQ.
struct Pair {
    a: Qp,
    acq: Cq,
    s: Qp,
    scq: Cq,
}

struct Rig {
    ctx: ContextHandle,
    pd: PdHandle,
    bufs: Vec<Buf>,
}

impl Rig {
    /// A pair whose responder grants `access` and whose QPs may post `ops`.
    fn pair(&self, b: &mut dyn Backend, access: A, ops: SendOpsFlags) -> Result<Pair, String> {
        let cap = QpCap { max_send_wr: 8, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let acq = say("ibv_create_cq", b.create_cq(self.ctx, 16))?;
        let scq = say("ibv_create_cq", b.create_cq(self.ctx, 16))?;
        let attr = |cq: &Cq| QpInitAttr { send_ops_flags: ops, ..QpInitAttr::rc(self.pd, cq.handle, cap, None) };
        let a = say("create the requester QP", b.create_qp(&attr(&acq)))?;
        let s = say("create the responder QP", b.create_qp(&attr(&scq)))?;
        let port = say("ibv_query_port", b.query_port(self.ctx, 1))?;
        for (q, peer) in [(&a, &s), (&s, &a)] {
            for step in QpModify::connect(access, QpDest::to(peer, &port)) {
                say("connect", b.modify_qp(q, &step))?;
            }
        }
        Ok(Pair { a, acq, s, scq })
    }

    /// A buffer of `data` with an MR over it of `access`.
    fn region(&mut self, b: &mut dyn Backend, data: &[u8], access: A) -> Result<(Buf, Mr), String> {
        let buf = say("alloc_buf", b.alloc_buf(data.len()))?;
        self.bufs.push(buf);
        say("write_buf", b.write_buf(&buf, 0, data))?;
        if buf.addr % 8 != 0 {
            return Err("alloc_buf gave a buffer that is not 8-byte aligned".into());
        }
        let mr = say("ibv_reg_mr", b.reg_mr(self.pd, buf.addr, data.len() as u64, access))?;
        Ok((buf, mr))
    }
}

/// Run `f` on a context of device `name`, released whatever `f` answers.
fn with_rig<T>(
    b: &mut dyn Backend,
    name: &str,
    f: impl FnOnce(&mut dyn Backend, &mut Rig) -> Result<T, String>,
) -> Result<T, String> {
    let ctx = say("ibv_open_device", b.open_ibv_device(name))?;
    let r = match b.alloc_pd(ctx) {
        Ok(pd) => {
            let mut rig = Rig { ctx, pd, bufs: Vec::new() };
            let r = f(b, &mut rig);
            let _ = b.close_device(ctx);
            for x in &rig.bufs {
                let _ = b.free_buf(x);
            }
            return r;
        }
        Err(e) => Err(format!("ibv_alloc_pd: {e}")),
    };
    let _ = b.close_device(ctx);
    r
}

/// Poll `cq` until `n` completions came or the wait deadline passed.
fn poll(b: &mut dyn Backend, cq: &Cq, n: usize) -> Result<Vec<Wc>, String> {
    let deadline = crate::harness::deadline::wait_until();
    let mut got = Vec::new();
    while got.len() < n {
        let w = say("ibv_poll_cq", b.poll_cq(cq, 16))?;
        if w.is_empty() && std::time::Instant::now() >= deadline {
            break;
        }
        got.extend(w);
    }
    Ok(got)
}

/// A completion as the model writes it: the opcode for a success, `byte_len` for a
/// successful receive, READ or atomic; for a receive with `IBV_WC_WITH_INV` 1 when it names
/// `key`, else 0.
fn seen(wc: &Wc, recv: bool, key: u32) -> NetCqe {
    let ok = wc.status == 0;
    let sized =
        matches!(wc.opcode, wc_opcode::RECV | wc_opcode::RDMA_READ | wc_opcode::COMP_SWAP | wc_opcode::FETCH_ADD);
    let inv = wc.wc_flags.contains(wc_flags::WITH_INV);
    NetCqe {
        recv,
        wr_id: wc.wr_id,
        status: wc.status,
        opcode: ok.then_some(wc.opcode),
        byte_len: (ok && sized).then_some(wc.byte_len),
        imm: (ok && recv && inv).then_some(u32::from(wc.imm_data == key)),
    }
}

fn state(b: &mut dyn Backend, qp: &Qp) -> Result<u32, String> {
    say("ibv_query_qp", b.query_qp_state(qp)).map(|s| s as u32)
}

/// An [`AtomicOp`] on device `name`.
pub(super) fn run_atomic(b: &mut dyn Backend, name: &str, x: &AtomicOp) -> Result<Outcome, String> {
    with_rig(b, name, |b, rig| {
        let access = if x.qp_atomic { QP_ACCESS | A::REMOTE_ATOMIC } else { QP_ACCESS };
        let ops = send_ops::RC_DEFAULT | send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD;
        let p = rig.pair(b, access, ops)?;
        let mr_access = if x.mr_atomic { A::LOCAL_WRITE | A::REMOTE_ATOMIC } else { QP_ACCESS };
        let (tbuf, tmr) = rig.region(b, &x.target(), mr_access)?;
        let (lbuf, lmr) = rig.region(b, &x.local(), A::LOCAL_WRITE)?;
        let ops: Vec<WrOp> = x
            .posted()
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let sge = vec![Sge {
                    addr: lmr.addr + u64::from(w.local),
                    length: if w.short { 4 } else { 8 },
                    lkey: lmr.lkey,
                }];
                let (wr_id, flags, rkey, remote_addr) =
                    (i as u64, SendFlags::SIGNALED, tmr.rkey, tmr.addr + u64::from(w.off));
                if w.cas {
                    WrOp::AtomicCmpSwp { wr_id, flags, rkey, remote_addr, compare: w.compare, swap: w.value, sge }
                } else {
                    WrOp::AtomicFetchAdd { wr_id, flags, rkey, remote_addr, add: w.value, sge }
                }
            })
            .collect();
        if x.legacy {
            let wrs: Vec<SendWr> = ops.iter().filter_map(SendWr::from_op).collect();
            say("ibv_post_send", b.post_send_wr(&p.a, &wrs))?;
        } else {
            say("the ibv_wr_atomic_* chain", b.post_send(&p.a, &ops))?;
        }
        let mut wcs: Vec<NetCqe> = poll(b, &p.acq, ops.len())?.iter().map(|w| seen(w, false, 0)).collect();
        // Nothing more on either side.
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&p.acq, 16))?.iter().map(|w| seen(w, false, 0)));
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&p.scq, 16))?.iter().map(|w| seen(w, true, 0)));
        let bytes = vec![
            ("target", say("read_buf", b.read_buf(&tbuf, 0, REGION))?),
            ("requester", say("read_buf", b.read_buf(&lbuf, 0, REGION))?),
        ];
        let states = vec![state(b, &p.a)?, state(b, &p.s)?];
        Ok(Outcome { wcs, bytes, states, ..Outcome::default() })
    })
}

/// What a [`MwOp`] step posts through: the rig's objects.
struct Win {
    p: Pair,
    mw: Mw,
    mr: Mr,
    lmr: Mr,
    rmr: Mr,
    /// The key the next type-2 bind starts from, and the key last bound.
    last: u32,
    held: u32,
    dealloc: bool,
}

impl Win {
    /// Step `i`: its completions, in the order the model writes them; a bind adds its record
    /// to `binds` (1: the next key, 0: another key, 0xff: EINVAL, 0xfe: another failure).
    fn step(
        &mut self,
        b: &mut dyn Backend,
        rig: &mut Rig,
        m: &MwOp,
        i: usize,
        step: MwStep,
        binds: &mut Vec<u8>,
    ) -> Result<Vec<NetCqe>, String> {
        let id = step_id(i);
        let flags = SendFlags::SIGNALED;
        let one = |b: &mut dyn Backend, cq: &Cq, recv: bool, key: u32| -> Result<Vec<NetCqe>, String> {
            Ok(poll(b, cq, 1)?.iter().map(|w| seen(w, recv, key)).collect())
        };
        match step {
            MwStep::Bind { lo, len, rights, wr } => {
                let info = MwBindInfo {
                    mr: Some(self.mr),
                    addr: self.mr.addr + u64::from(lo),
                    length: u64::from(len),
                    access: A::from_bits_retain(rights),
                };
                if !m.type2 {
                    let mb = MwBind { wr_id: id, send_flags: flags, bind_info: info };
                    match b.bind_mw(&self.p.s, &self.mw, &mb) {
                        Ok(key) => {
                            binds.push(u8::from(key == inc_rkey(self.mw.rkey)));
                            self.mw.rkey = key;
                            if len > 0 {
                                self.held = key;
                            }
                        }
                        Err(e) => {
                            binds.push(if e.errno() == EINVAL { 0xff } else { 0xfe });
                            return Ok(Vec::new());
                        }
                    }
                } else {
                    let bind = BindMw { mw: self.mw, rkey: inc_rkey(self.last), bind_info: info };
                    let r = if wr {
                        b.post_send(&self.p.s, &[WrOp::BindMw { wr_id: id, flags, bind }])
                    } else {
                        let wr = SendWr {
                            wr_id: id,
                            opcode: wr_opcode::BIND_MW,
                            send_flags: flags,
                            bind_mw: Some(bind),
                            ..SendWr::default()
                        };
                        b.post_send_wr(&self.p.s, &[wr])
                    };
                    binds.push(if r.is_ok() { 1 } else { 0xfe });
                    r.map_err(|e| format!("the type-2 bind: {e}"))?;
                    self.last = bind.rkey;
                    self.held = bind.rkey;
                }
                one(b, &self.p.scq, false, 0)
            }
            MwStep::Write { off, len } | MwStep::Read { off, len } => {
                let (rkey, remote_addr) = (self.held, self.mr.addr + u64::from(off));
                let sge = vec![Sge { addr: self.lmr.addr, length: u32::from(len), lkey: self.lmr.lkey }];
                let op = if matches!(step, MwStep::Write { .. }) {
                    WrOp::RdmaWrite { wr_id: id, flags, rkey, remote_addr, sge }
                } else {
                    WrOp::RdmaRead { wr_id: id, flags, rkey, remote_addr, sge }
                };
                say("the RDMA WRITE or READ through the window", b.post_send(&self.p.a, &[op]))?;
                one(b, &self.p.acq, false, 0)
            }
            MwStep::LocalInv => {
                let op = WrOp::LocalInv { wr_id: id, flags, invalidate_rkey: self.held };
                say("LOCAL_INV of the window's key", b.post_send(&self.p.s, &[op]))?;
                one(b, &self.p.scq, false, 0)
            }
            MwStep::SendInv => {
                let rsge = vec![Sge { addr: self.rmr.addr, length: RECV_LEN as u32, lkey: self.rmr.lkey }];
                say("ibv_post_recv", b.post_recv(&self.p.s, &[RecvWr { wr_id: id | 1 << 63, sge: rsge }]))?;
                let sge = vec![Sge { addr: self.lmr.addr, length: SEND_LEN as u32, lkey: self.lmr.lkey }];
                let op = WrOp::SendInv { wr_id: id, flags, invalidate_rkey: self.held, sge };
                say("SEND_WITH_INV of the window's key", b.post_send(&self.p.a, &[op]))?;
                let mut v = one(b, &self.p.acq, false, 0)?;
                if v.iter().all(|c| c.status == 0) {
                    v.extend(one(b, &self.p.scq, true, self.held)?);
                }
                Ok(v)
            }
            MwStep::OtherQp { off } => {
                let q = rig.pair(b, QP_ACCESS, send_ops::RC_DEFAULT)?;
                let sge = vec![Sge { addr: self.lmr.addr, length: 8, lkey: self.lmr.lkey }];
                let (wr_id, rkey, remote_addr) = (id | 1 << 62, self.held, self.mr.addr + u64::from(off));
                let op = WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge };
                say("the RDMA WRITE from another QP", b.post_send(&q.a, &[op]))?;
                one(b, &q.acq, false, 0)
            }
            MwStep::Dealloc => {
                say("ibv_dealloc_mw", b.dealloc_mw(&self.mw))?;
                self.dealloc = true;
                Ok(Vec::new())
            }
        }
    }
}

/// A [`MwOp`] on device `name`.
pub(super) fn run_mw(b: &mut dyn Backend, name: &str, m: &MwOp) -> Result<Outcome, String> {
    with_rig(b, name, |b, rig| {
        let p = rig.pair(b, QP_ACCESS, send_ops::RC_DEFAULT | send_ops::BIND_MW)?;
        let (mbuf, mr) = rig.region(b, &super::fill_pattern(REGION, m.seed), m.mr_access())?;
        let (lbuf, lmr) = rig.region(b, &super::fill_pattern(REGION, m.seed ^ 0x5a), A::LOCAL_WRITE)?;
        let (rbuf, rmr) = rig.region(b, &[0; RECV_LEN], A::LOCAL_WRITE)?;
        let mw = say("ibv_alloc_mw", b.alloc_mw(rig.pd, if m.type2 { 2 } else { 1 }))?;
        let mut w = Win { p, mw, mr, lmr, rmr, last: mw.rkey, held: mw.rkey, dealloc: false };
        let mut wcs = Vec::new();
        let mut binds = Vec::new();
        let mut remote_error = false;
        for (i, step) in m.posted().iter().enumerate() {
            let got = w.step(b, rig, m, i, *step, &mut binds)?;
            let failed = got.iter().any(|c| c.status != 0);
            // The responder is not looked at after an error it answered to the requester.
            remote_error |= got.iter().any(|c| {
                c.wr_id >> 62 == 0
                    && matches!(c.status, mlx5_dv::wc_status::REM_ACCESS_ERR | mlx5_dv::wc_status::REM_INV_REQ_ERR)
            });
            wcs.extend(got);
            if failed && !matches!(step, MwStep::OtherQp { .. }) {
                break;
            }
        }
        // Nothing more on the requester's side, nor on the responder's unless it is not looked at.
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&w.p.acq, 16))?.iter().map(|c| seen(c, false, 0)));
        if !remote_error {
            wcs.extend(say("ibv_poll_cq", b.poll_cq(&w.p.scq, 16))?.iter().map(|c| seen(c, true, w.held)));
        }
        let bytes = vec![
            ("window's MR", say("read_buf", b.read_buf(&mbuf, 0, REGION))?),
            ("requester", say("read_buf", b.read_buf(&lbuf, 0, REGION))?),
            ("receive", say("read_buf", b.read_buf(&rbuf, 0, RECV_LEN))?),
            ("binds", binds),
        ];
        let mut states = vec![state(b, &w.p.a)?];
        if !remote_error {
            states.push(state(b, &w.p.s)?);
        }
        if !w.dealloc {
            let _ = b.dealloc_mw(&w.mw);
        }
        Ok(Outcome { wcs, bytes, states, ..Outcome::default() })
    })
}

/// Whether the first kernel mlx5 device of `b` does RC atomics and has memory windows,
/// from calls whose answers the docs fix: a QP with the atomic send ops is EOPNOTSUPP
/// without atomics (item 121), `ibv_alloc_mw` EOPNOTSUPP without windows (the memory-window
/// checklist). Any other failure counts as no: the model then generates neither.
pub fn probe_remote(b: &mut dyn mlx5_dv::Backend) -> (bool, bool) {
    use mlx5_dv::{QpCap, QpInitAttr, send_ops};
    let Some(dev) = b.device_list().ok().into_iter().flatten().find(|d| d.kind == mlx5_dv::DeviceKind::Mlx5) else {
        return (false, false);
    };
    let Ok(ctx) = b.open_ibv_device(&dev.name) else { return (false, false) };
    let mut found = (false, false);
    if let Ok(pd) = b.alloc_pd(ctx) {
        if let Ok(cq) = b.create_cq(ctx, 4) {
            let cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
            let ops = send_ops::RC_DEFAULT | send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD;
            let attr = QpInitAttr { send_ops_flags: ops, ..QpInitAttr::rc(pd, cq.handle, cap, None) };
            found.0 = b.create_qp(&attr).is_ok();
        }
        if let Ok(mw) = b.alloc_mw(pd, mlx5_dv::MW_TYPE_2) {
            found.1 = true;
            let _ = b.dealloc_mw(&mw);
        }
    }
    let _ = b.close_device(ctx);
    found
}
