//! Running a UC scenario ([`UcOp`]) on a backend: a context of its own with a PD, two UC QPs
//! (each on a CQ of its own) connected to each other, the receives and the messages, all
//! released afterwards.

use mlx5_dv::{
    AccessFlags as A, Backend, Cq, Qp, QpAttrExt, QpAttrMask, QpCap, QpDest, QpInitAttr, QpModify, QpState, RecvWr,
    SendFlags, SendWr, Sge, qp_type, send_ops, wr_opcode,
};

use super::outcome::Outcome;
use super::uc::{UC_RECV_LEN, UC_TARGET_LEN, UcKind, UcOp};
use super::udrig::{on_device, on_first_mlx5, poll, say, seen};

/// A UC QP on `cq`.
fn uc_qp(b: &mut dyn Backend, pd: mlx5_dv::PdHandle, cq: &Cq) -> Result<Qp, String> {
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let ops = send_ops::SEND | send_ops::SEND_WITH_IMM | send_ops::RDMA_WRITE | send_ops::RDMA_WRITE_WITH_IMM;
    let attr =
        QpInitAttr { qp_type: qp_type::UC, send_ops_flags: ops, dv: None, ..QpInitAttr::rc(pd, cq.handle, cap, None) };
    say("create a UC QP", b.create_qp(&attr))
}

/// Move UC QP `qp` through INIT and RTR (towards `dest`) to RTS, with remote writes allowed.
fn bring_up(b: &mut dyn Backend, qp: &Qp, dest: QpDest) -> Result<(), String> {
    let mut from = QpState::Reset;
    for to in [QpState::Init, QpState::Rtr, QpState::Rts] {
        let (required, _) = mlx5_dv::qp_transition(qp_type::UC, from, to).ok_or("no UC transition")?;
        let ext = QpAttrExt { mask: QpAttrMask::STATE | required, ..QpAttrExt::defaults() };
        let step = QpModify::exact(to, A::LOCAL_WRITE | A::REMOTE_WRITE, (to == QpState::Rtr).then_some(dest), ext);
        say(&format!("modify the UC QP to {to:?}"), b.modify_qp(qp, &step))?;
        from = to;
    }
    Ok(())
}

/// A [`UcOp`] on device `name`.
pub(super) fn run_uc(b: &mut dyn Backend, name: &str, x: &UcOp) -> Result<Outcome, String> {
    on_device(b, name, |b, sc| {
        let ctx = sc.ctx;
        let pd = say("ibv_alloc_pd", b.alloc_pd(ctx))?;
        let (scq, rcq) = (say("ibv_create_cq", b.create_cq(ctx, 16))?, say("ibv_create_cq", b.create_cq(ctx, 16))?);
        let (s, r) = (uc_qp(b, pd, &scq)?, uc_qp(b, pd, &rcq)?);
        let port = say("ibv_query_port", b.query_port(ctx, 1))?;
        bring_up(b, &s, QpDest::to(&r, &port))?;
        bring_up(b, &r, QpDest::to(&s, &port))?;
        let (_, smr) = sc.region(b, pd, &x.send_buf(), A::LOCAL_WRITE)?;
        let (rbuf, rmr) = sc.region(b, pd, &x.recv_bufs(), A::LOCAL_WRITE)?;
        let (tbuf, tmr) = sc.region(b, pd, &x.target(), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
        for i in 0..x.receives() {
            let sge =
                vec![Sge { addr: rmr.addr + (i * UC_RECV_LEN) as u64, length: UC_RECV_LEN as u32, lkey: rmr.lkey }];
            say("ibv_post_recv", b.post_recv(&r, &[RecvWr { wr_id: i as u64, sge }]))?;
        }
        let wrs: Vec<SendWr> = x
            .posted()
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let opcode = match m.kind {
                    UcKind::Send => wr_opcode::SEND,
                    UcKind::SendImm => wr_opcode::SEND_WITH_IMM,
                    UcKind::Write => wr_opcode::RDMA_WRITE,
                    UcKind::WriteImm => wr_opcode::RDMA_WRITE_WITH_IMM,
                    UcKind::Read => wr_opcode::RDMA_READ,
                };
                let imm = matches!(m.kind, UcKind::SendImm | UcKind::WriteImm);
                SendWr {
                    wr_id: i as u64,
                    opcode,
                    send_flags: SendFlags::SIGNALED,
                    imm_data: if imm { UcOp::imm(i) } else { 0 },
                    sge: vec![Sge { addr: smr.addr + 8 * i as u64, length: u32::from(m.len), lkey: smr.lkey }],
                    remote_addr: tmr.addr + 8 * u64::from(m.off),
                    rkey: if m.bad_rkey { tmr.rkey ^ 0x100 } else { tmr.rkey },
                    ..SendWr::default()
                }
            })
            .collect();
        say("ibv_post_send", b.post_send_wr(&s, &wrs))?;
        let mut wcs: Vec<_> = poll(b, &scq, wrs.len(), false)?.iter().map(|w| seen(w, false)).collect();
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&scq, 16))?.iter().map(|w| seen(w, false)));
        wcs.extend(poll(b, &rcq, x.receives(), true)?.iter().map(|w| seen(w, true)));
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&rcq, 16))?.iter().map(|w| seen(w, true)));
        let bytes = vec![
            ("receive", say("read_buf", b.read_buf(&rbuf, 0, UC_RECV_LEN * x.receives()))?),
            ("target", say("read_buf", b.read_buf(&tbuf, 0, UC_TARGET_LEN))?),
        ];
        let state = |b: &mut dyn Backend, q: &Qp| say("ibv_query_qp", b.query_qp_state(q)).map(|s| s as u32);
        let states = vec![state(b, &s)?, state(b, &r)?];
        Ok(Outcome { wcs, bytes, states, ..Outcome::default() })
    })
}

/// Whether the first kernel mlx5 device of `b` runs the UC scenarios: two UC QPs are made and
/// connected to each other.
pub fn probe_uc(b: &mut dyn Backend) -> bool {
    on_first_mlx5(b, |b, ctx| {
        let Ok(pd) = b.alloc_pd(ctx) else { return false };
        let Ok(cq) = b.create_cq(ctx, 4) else { return false };
        let Ok(port) = b.query_port(ctx, 1) else { return false };
        match (uc_qp(b, pd, &cq), uc_qp(b, pd, &cq)) {
            (Ok(s), Ok(r)) => {
                bring_up(b, &s, QpDest::to(&r, &port)).is_ok() && bring_up(b, &r, QpDest::to(&s, &port)).is_ok()
            }
            _ => false,
        }
    })
}
