//! Running an XRC scenario ([`XrcOp`]) on a backend: a context of its own with two PDs, two
//! domains (the target's with two XRC SRQs, one per PD; another with one), an initiator
//! connected to a target QP, the receives and the messages, all released afterwards.

use mlx5_dv::{
    AccessFlags as A, Backend, Cq, PdHandle, Qp, QpCap, QpDest, QpInitAttr, QpModify, RecvWr, SendFlags, SendWr, Sge,
    Srq, SrqInitAttr, SrqXrc, Xrcd, XrcdInitAttr, qp_init_mask, qp_type, wr_opcode, xrcd_init_mask,
};

use super::outcome::Outcome;
use super::udrig::{on_device, on_first_mlx5, poll, say, seen};
use super::xrc::{XRC_LEN, XRC_TARGET_LEN, XrcKind, XrcOp};

/// What the target QP lets peers do.
const TARGET_ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

/// A domain of this process alone.
fn open_xrcd(b: &mut dyn Backend, ctx: mlx5_dv::ContextHandle) -> Result<Xrcd, String> {
    let a = XrcdInitAttr { ctx, comp_mask: xrcd_init_mask::FD | xrcd_init_mask::OFLAGS, fd: -1, oflags: 0 };
    say("ibv_open_xrcd", b.open_xrcd(&a))
}

/// An XRC SRQ of `pd` in `xrcd`, completing on `cq`.
fn xsrq(b: &mut dyn Backend, pd: PdHandle, xrcd: &Xrcd, cq: &Cq) -> Result<Srq, String> {
    let xrc = Some(SrqXrc { xrcd: xrcd.handle, cq: cq.handle });
    say("ibv_create_srq_ex (XRC)", b.create_srq(&SrqInitAttr { pd, max_wr: 8, max_sge: 1, xrc, tm: None }))
}

/// A connected initiator (of `pd`, on `cq`) and target QP of `xrcd`.
fn xrc_pair(
    b: &mut dyn Backend,
    ctx: mlx5_dv::ContextHandle,
    pd: PdHandle,
    cq: &Cq,
    xrcd: &Xrcd,
) -> Result<(Qp, Qp), String> {
    let mut t = QpInitAttr::rc(pd, cq.handle, QpCap::default(), None);
    (t.qp_type, t.xrcd, t.comp_mask) = (qp_type::XRC_RECV, Some(xrcd.handle), Some(qp_init_mask::XRCD));
    let tgt = say("create an XRC target QP", b.create_qp(&t))?;
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 0, max_send_sge: 1, max_recv_sge: 0, max_inline_data: 0 };
    let mut i = QpInitAttr::rc(pd, cq.handle, cap, None);
    (i.qp_type, i.comp_mask) = (qp_type::XRC_SEND, Some(qp_init_mask::PD));
    let ini = say("create an XRC initiator", b.create_qp(&i))?;
    let port = say("ibv_query_port", b.query_port(ctx, 1))?;
    for (q, peer) in [(&tgt, &ini), (&ini, &tgt)] {
        for step in QpModify::connect(TARGET_ACCESS, QpDest::to(peer, &port)) {
            say(&format!("modify an XRC QP to {:?}", step.state), b.modify_qp(q, &step))?;
        }
    }
    Ok((ini, tgt))
}

/// An [`XrcOp`] on device `name`.
pub(super) fn run_xrc(b: &mut dyn Backend, name: &str, x: &XrcOp) -> Result<Outcome, String> {
    on_device(b, name, |b, sc| {
        let ctx = sc.ctx;
        let pds = [say("ibv_alloc_pd", b.alloc_pd(ctx))?, say("ibv_alloc_pd", b.alloc_pd(ctx))?];
        let cq = say("ibv_create_cq", b.create_cq(ctx, 16))?;
        let (mine, other) = (open_xrcd(b, ctx)?, open_xrcd(b, ctx)?);
        let mut rcqs = Vec::new();
        let mut srqs = Vec::new();
        for (pd, xrcd) in [(pds[0], &mine), (pds[1], &mine), (pds[0], &other)] {
            let rcq = say("ibv_create_cq", b.create_cq(ctx, 16))?;
            srqs.push(xsrq(b, pd, xrcd, &rcq)?);
            rcqs.push(rcq);
        }
        let (ini, tgt) = xrc_pair(b, ctx, pds[0], &cq, &mine)?;
        let remote = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ;
        let (_, src) = sc.region(b, pds[0], &x.src(), A::LOCAL_WRITE)?;
        let (sink_buf, sink) = sc.region(b, pds[0], &x.sink(), A::LOCAL_WRITE)?;
        let mut targets = Vec::new();
        for (k, pd) in pds.iter().enumerate() {
            targets.push(sc.region(b, *pd, &x.target(k), remote)?);
        }
        let mut recv_bufs = Vec::new();
        for (k, srq) in srqs.iter().enumerate() {
            let pd = pds[usize::from(k == 1)];
            let (buf, mr) = sc.region(b, pd, &x.recv_buf(k), A::LOCAL_WRITE)?;
            for r in 0..x.receives(k) {
                let sge = vec![Sge { addr: mr.addr + (r * XRC_LEN) as u64, length: XRC_LEN as u32, lkey: mr.lkey }];
                say("ibv_post_srq_recv", b.post_srq_recv(srq, &[RecvWr { wr_id: (10 * k + r) as u64, sge }]))?;
            }
            recv_bufs.push(buf);
        }
        let wrs: Vec<SendWr> = x
            .posted()
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let (_, t) = &targets[usize::from(m.key_b)];
                let srq = srqs.get(usize::from(m.srq)).map_or(0, |s| s.srq_num);
                let (opcode, sge) = match m.kind {
                    XrcKind::Send => (wr_opcode::SEND, (src.addr + 64 * i as u64, src.lkey)),
                    XrcKind::Write => (wr_opcode::RDMA_WRITE, (src.addr + 64 * i as u64, src.lkey)),
                    XrcKind::Read => (wr_opcode::RDMA_READ, (sink.addr + 64 * i as u64, sink.lkey)),
                };
                SendWr {
                    wr_id: i as u64,
                    opcode,
                    send_flags: SendFlags::SIGNALED,
                    sge: vec![Sge { addr: sge.0, length: u32::from(m.len), lkey: sge.1 }],
                    remote_addr: t.addr + 8 * u64::from(m.off),
                    rkey: t.rkey,
                    xrc_remote_srqn: srq,
                    ..SendWr::default()
                }
            })
            .collect();
        say("ibv_post_send", b.post_send_wr(&ini, &wrs))?;
        let mut wcs: Vec<_> = poll(b, &cq, wrs.len(), false)?.iter().map(|w| seen(w, false)).collect();
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&cq, 16))?.iter().map(|w| seen(w, false)));
        for (k, rcq) in rcqs.iter().enumerate() {
            wcs.extend(poll(b, rcq, x.receives(k), true)?.iter().map(|w| seen(w, true)));
            wcs.extend(say("ibv_poll_cq", b.poll_cq(rcq, 16))?.iter().map(|w| seen(w, true)));
        }
        let read = |b: &mut dyn Backend, what: &'static str, buf: &mlx5_dv::Buf, len: usize| {
            say("read_buf", b.read_buf(buf, 0, len)).map(|v| (what, v))
        };
        let bytes = vec![
            read(b, "srq 0", &recv_bufs[0], 4 * XRC_LEN)?,
            read(b, "srq 1", &recv_bufs[1], 4 * XRC_LEN)?,
            read(b, "foreign srq", &recv_bufs[2], 4 * XRC_LEN)?,
            read(b, "target A", &targets[0].0, XRC_TARGET_LEN)?,
            read(b, "target B", &targets[1].0, XRC_TARGET_LEN)?,
            read(b, "sink", &sink_buf, x.sink().len())?,
        ];
        let state = |b: &mut dyn Backend, q: &Qp| say("ibv_query_qp", b.query_qp_state(q)).map(|s| s as u32);
        let states = vec![state(b, &ini)?, state(b, &tgt)?];
        Ok(Outcome { wcs, bytes, states, ..Outcome::default() })
    })
}

/// Whether the first kernel mlx5 device of `b` runs the XRC scenarios: it opens a domain and
/// makes an XRC SRQ and a connected initiator and target in it.
pub fn probe_xrc(b: &mut dyn Backend) -> bool {
    on_first_mlx5(b, |b, ctx| {
        let Ok(pd) = b.alloc_pd(ctx) else { return false };
        let Ok(cq) = b.create_cq(ctx, 4) else { return false };
        let Ok(xrcd) = open_xrcd(b, ctx) else { return false };
        xsrq(b, pd, &xrcd, &cq).is_ok() && xrc_pair(b, ctx, pd, &cq, &xrcd).is_ok()
    })
}
