//! Raw WQEs (`mlx5dv_wr_raw_wqe`): item 273 of docs/behaviour.md.

use mlx5_dv::errno::EOPNOTSUPP;
use mlx5_dv::prm::wqe::compose::{Payload, SendWqe, WqeBody};
use mlx5_dv::prm::wqe::{CtrlSeg, DataSeg, ctrl, opcode};
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, DvQpInitAttr, QpInitAttr, SendFlags, Sge, WrOp, dv_qp, wc_opcode,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] =
    &[Case { name: "wr.raw_wqe_runs_as_written", covers: &[273], needs: &[Need::Mlx5Device], run: raw_send }];

const LEN: usize = 256;

/// A SEND WQE as a program writes it: its control segment (with a WQE index of 0xffff, which
/// the provider replaces) and one data segment per SGE.
fn send_wqe(qpn: u32, signaled: bool, sge: &[Sge]) -> Check<Vec<u8>> {
    let c = CtrlSeg {
        opcode: opcode::SEND,
        wqe_index: 0xffff,
        qpn,
        ce: if signaled { ctrl::CE_CQ_UPDATE } else { 0 },
        ..CtrlSeg::default()
    };
    let segs = sge.iter().map(|s| DataSeg { byte_count: s.length, lkey: s.lkey, addr: s.addr }).collect();
    SendWqe { ctrl: c, body: WqeBody::Send(Payload::Gather(segs)) }
        .encode()
        .map_err(|e| Verdict::fail("the raw WQE's bytes", "encoded", e))
}

/// A raw SEND WQE of two data segments moves the message and completes with
/// MLX5DV_WC_RAW_WQE; one without CQ_UPDATE in its control segment completes nothing
/// (`wr_flags` play no part); a QP created without the RAW_WQE op has no builder for it.
fn raw_send(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let rcq = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let dv = DvQpInitAttr::new(DvQpCreateFlags::empty(), dv_qp::WITH_RAW_WQE);
    let tx = expect_ok("an RC QP with RAW_WQE", b.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, Some(dv))))?;
    let rx = expect_ok("the receiving QP", b.create_qp(&QpInitAttr::rc(pd, rcq.handle, CAP, None)))?;
    connect(b, &tx, ctx, &rx)?;
    connect(b, &rx, ctx, &tx)?;
    let data = pattern(LEN, 0x21);
    let (_, smr) = region(b, pd, LEN, &data, A::LOCAL_WRITE)?;
    let (rbuf, rmr) = region(b, pd, LEN, &[], A::LOCAL_WRITE)?;
    let half = LEN as u32 / 2;
    let gather = [sge(&smr, 0, half), sge(&smr, u64::from(half), half)];

    recv(b, &rx, 9, vec![sge(&rmr, 0, LEN as u32)])?;
    let wqe = send_wqe(tx.qp_num, true, &gather)?;
    expect_ok("mlx5dv_wr_raw_wqe (SEND, CQ_UPDATE)", b.post_send(&tx, &[WrOp::RawWqe { wr_id: 5, wqe }]))?;
    ok_cqe(b, &cq, 5, wc_opcode::DRIVER2)?;
    let wc = ok_cqe(b, &rcq, 9, wc_opcode::RECV)?;
    check_eq("the received length", wc.byte_len, LEN as u32)?;
    check_eq("the received bytes", contents(b, &rbuf)?, data)?;

    // Unsignalled by its control segment: only the SEND after it completes.
    recv(b, &rx, 10, vec![sge(&rmr, 0, LEN as u32)])?;
    recv(b, &rx, 11, vec![sge(&rmr, 0, LEN as u32)])?;
    let quiet = send_wqe(tx.qp_num, false, &gather)?;
    let send = WrOp::Send { wr_id: 7, flags: SendFlags::SIGNALED, sge: vec![sge(&smr, 0, 8)] };
    expect_ok(
        "a raw WQE without CQ_UPDATE, then a SEND",
        b.post_send(&tx, &[WrOp::RawWqe { wr_id: 6, wqe: quiet }, send]),
    )?;
    ok_cqe(b, &cq, 7, wc_opcode::SEND)?;
    check_eq("receives completed", poll(b, &rcq, 2)?.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![10, 11])?;
    no_cqe(b, &cq)?;

    let plain = expect_ok("an RC QP without RAW_WQE", b.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)))?;
    connect(b, &plain, ctx, &rx)?;
    let wqe = send_wqe(plain.qp_num, true, &gather)?;
    let r = b.post_send(&plain, &[WrOp::RawWqe { wr_id: 8, wqe }]);
    expect_errno("mlx5dv_wr_raw_wqe on a QP without the RAW_WQE op", r, EOPNOTSUPP)?;
    no_cqe(b, &cq)
}
