//! Running a shared-receive scenario ([`SrqOp`]) on a backend: a context of its own with a
//! PD, an SRQ, two responder RC QPs on it (each on a CQ of its own) connected to two
//! requester QPs (on one CQ) that retry RNR for ever, the buffers; the steps one at a time,
//! each waited for (a SEND that gets no completion for a tenth of a second waits for a WQE);
//! everything released afterwards.

use mlx5_dv::{
    AccessFlags as A, Backend, Cq, PdHandle, Qp, QpAttrExt, QpAttrMask, QpCap, QpDest, QpInitAttr, QpModify, QpState,
    RecvWr, SendFlags, Sge, Srq, SrqInitAttr, Wc, WrOp, qp_type,
};

use super::outcome::{NetCqe, Outcome};
use super::srq::{SECOND, SLOT, SLOTS, SrqOp, SrqStep};

fn say<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE);

fn rc_qp(b: &mut dyn Backend, pd: PdHandle, cq: &Cq, srq: Option<&Srq>) -> Result<Qp, String> {
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let attr = QpInitAttr { srq: srq.map(|s| s.handle), ..QpInitAttr::rc(pd, cq.handle, cap, None) };
    say("ibv_create_qp", b.create_qp(&attr))
}

/// Move `qp` to RTS towards `peer` (a QP of `ctx`), retrying RNR for ever.
fn connect(b: &mut dyn Backend, ctx: mlx5_dv::ContextHandle, qp: &Qp, peer: &Qp) -> Result<(), String> {
    let port = say("ibv_query_port", b.query_port(ctx, 1))?;
    let dest = QpDest::to(peer, &port);
    let ext = QpAttrExt { retry_cnt: 7, rnr_retry: 7, min_rnr_timer: 1, ..QpAttrExt::defaults() };
    let mut from = QpState::Reset;
    for to in [QpState::Init, QpState::Rtr, QpState::Rts] {
        let (required, _) = mlx5_dv::qp_transition(qp_type::RC, from, to).ok_or("no RC transition")?;
        let ext = QpAttrExt { mask: QpAttrMask::STATE | required, ..ext };
        let path = (to == QpState::Rtr).then_some(dest);
        say("ibv_modify_qp", b.modify_qp(qp, &QpModify::exact(to, ACCESS, path, ext)))?;
        from = to;
    }
    Ok(())
}

/// Poll `cq` until `n` completions came, or the wait deadline passed, or (`quiet`) none came
/// for a tenth of a second.
fn poll(b: &mut dyn Backend, cq: &Cq, n: usize, quiet: bool) -> Result<Vec<Wc>, String> {
    let deadline = crate::harness::deadline::wait_until();
    let start = std::time::Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        let w = say("ibv_poll_cq", b.poll_cq(cq, 16))?;
        let now = std::time::Instant::now();
        if w.is_empty() && (now >= deadline || (quiet && now.duration_since(start).as_millis() >= 100)) {
            break;
        }
        got.extend(w);
    }
    Ok(got)
}

/// Poll for the SEND of requester `j`: its completion and, on success, the receive's on the
/// responder's CQ. Whether the SEND completed.
fn completed(b: &mut dyn Backend, t: &Rig, wcs: &mut Vec<NetCqe>, j: usize, quiet: bool) -> Result<bool, String> {
    let got = poll(b, &t.acq, 1, quiet)?;
    let ok = got.first().is_some_and(|w| w.status == 0);
    wcs.extend(got.iter().map(|w| seen(w, false, 0)));
    if ok {
        let add = if j == 1 { SECOND } else { 0 };
        wcs.extend(poll(b, &t.rcqs[j], 1, false)?.iter().map(|w| seen(w, true, add)));
    }
    Ok(!got.is_empty())
}

fn seen(wc: &Wc, recv: bool, add: u64) -> NetCqe {
    let ok = wc.status == 0;
    NetCqe {
        recv,
        wr_id: wc.wr_id + add,
        status: wc.status,
        opcode: ok.then_some(wc.opcode),
        byte_len: (ok && recv).then_some(wc.byte_len),
        imm: None,
    }
}

struct Rig {
    reqs: [Qp; 2],
    resps: [Qp; 2],
    acq: Cq,
    rcqs: [Cq; 2],
    srq: Srq,
}

/// An [`SrqOp`] on device `name`.
pub(super) fn run_srq(b: &mut dyn Backend, name: &str, x: &SrqOp) -> Result<Outcome, String> {
    let ctx = say("ibv_open_device", b.open_ibv_device(name))?;
    let mut bufs = Vec::new();
    let r = (|| {
        let pd = say("ibv_alloc_pd", b.alloc_pd(ctx))?;
        let srq =
            say("ibv_create_srq", b.create_srq(&SrqInitAttr { pd, max_wr: 16, max_sge: 1, xrc: None, tm: None }))?;
        let acq = say("ibv_create_cq", b.create_cq(ctx, 16))?;
        let rcqs = [say("ibv_create_cq", b.create_cq(ctx, 16))?, say("ibv_create_cq", b.create_cq(ctx, 16))?];
        let reqs = [rc_qp(b, pd, &acq, None)?, rc_qp(b, pd, &acq, None)?];
        let resps = [rc_qp(b, pd, &rcqs[0], Some(&srq))?, rc_qp(b, pd, &rcqs[1], Some(&srq))?];
        for j in 0..2 {
            connect(b, ctx, &reqs[j], &resps[j])?;
            connect(b, ctx, &resps[j], &reqs[j])?;
        }
        let t = Rig { reqs, resps, acq, rcqs, srq };
        let mut region = |b: &mut dyn Backend, data: &[u8]| -> Result<(mlx5_dv::Buf, mlx5_dv::Mr), String> {
            let buf = say("alloc_buf", b.alloc_buf(data.len()))?;
            bufs.push(buf);
            say("write_buf", b.write_buf(&buf, 0, data))?;
            Ok((buf, say("ibv_reg_mr", b.reg_mr(pd, buf.addr, data.len() as u64, ACCESS))?))
        };
        let (_, smr) = region(b, &x.send_buf())?;
        let (rbuf, rmr) = region(b, &x.recv_bufs())?;
        let mut next = 0usize;
        let mut post_recv = |b: &mut dyn Backend| -> Result<(), String> {
            let sge = vec![Sge { addr: rmr.addr + (next * SLOT) as u64, length: SLOT as u32, lkey: rmr.lkey }];
            say("ibv_post_srq_recv", b.post_srq_recv(&t.srq, &[RecvWr { wr_id: next as u64, sge }]))?;
            next += 1;
            Ok(())
        };
        for _ in 0..x.receives() {
            post_recv(b)?;
        }
        let mut wcs = Vec::new();
        // The requester whose SEND got no completion yet.
        let mut waiting: Option<usize> = None;
        for (i, step) in x.posted().iter().enumerate() {
            match *step {
                SrqStep::Recv => {
                    post_recv(b)?;
                    if let Some(j) = waiting.take() {
                        completed(b, &t, &mut wcs, j, false)?;
                    }
                }
                SrqStep::ErrResp { which } => {
                    let q = &t.resps[usize::from(which & 1)];
                    say("ibv_modify_qp to ERR", b.modify_qp(q, &QpModify::to(QpState::Err)))?;
                }
                SrqStep::Send { from, len } => {
                    let j = usize::from(from & 1);
                    let sge = vec![Sge { addr: smr.addr + 8 * i as u64, length: u32::from(len), lkey: smr.lkey }];
                    let op = WrOp::Send { wr_id: i as u64, flags: SendFlags::SIGNALED, sge };
                    say("ibv_post_send", b.post_send(&t.reqs[j], &[op]))?;
                    if !completed(b, &t, &mut wcs, j, true)? {
                        waiting = Some(j);
                    }
                }
            }
        }
        // Nothing more on any CQ.
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&t.acq, 16))?.iter().map(|w| seen(w, false, 0)));
        for (j, cq) in t.rcqs.iter().enumerate() {
            let add = if j == 1 { SECOND } else { 0 };
            wcs.extend(say("ibv_poll_cq", b.poll_cq(cq, 16))?.iter().map(|w| seen(w, true, add)));
        }
        let bytes = vec![("receive", say("read_buf", b.read_buf(&rbuf, 0, SLOT * SLOTS))?)];
        let mut states = Vec::new();
        for q in t.reqs.iter().chain(&t.resps) {
            states.push(say("ibv_query_qp", b.query_qp_state(q))? as u32);
        }
        Ok(Outcome { wcs, bytes, states, ..Outcome::default() })
    })();
    let _ = b.close_device(ctx);
    for x in &bufs {
        let _ = b.free_buf(x);
    }
    r
}

/// Whether the first kernel mlx5 device of `b` makes an SRQ.
pub fn probe_srq(b: &mut dyn Backend) -> bool {
    super::udrig::on_first_mlx5(b, |b, ctx| {
        b.alloc_pd(ctx)
            .is_ok_and(|pd| b.create_srq(&SrqInitAttr { pd, max_wr: 16, max_sge: 1, xrc: None, tm: None }).is_ok())
    })
}
