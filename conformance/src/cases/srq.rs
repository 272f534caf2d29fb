//! Shared receive queues (items 131–137): creation limits and rounding, query and modify,
//! posting, QPs that share one SRQ, the limit event, RNR on an empty SRQ, and SRQ WQEs that
//! outlive a QP's error.

use mlx5_dv::errno::{EBUSY, EINVAL, ENOMEM};
use mlx5_dv::{
    AccessFlags, Backend, ContextHandle, Cq, PdHandle, Qp, QpCap, QpInitAttr, QpModify, QpState, RecvWr, SendFlags,
    Srq, SrqAttr, SrqInitAttr, WrOp, event_type, srq_attr_mask, wc_opcode,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "srq.create_limits_and_rounding", covers: &[131], needs: NEEDS, run: create_limits },
    Case { name: "srq.query_modify_limit_and_no_resize", covers: &[132], needs: NEEDS, run: query_modify },
    Case { name: "srq.post_too_many_sges_einval_full_enomem", covers: &[133], needs: NEEDS, run: post_errors },
    Case { name: "srq.qp_on_srq_has_no_rq_and_pins_the_srq", covers: &[134], needs: NEEDS, run: qp_on_srq },
    Case { name: "srq.two_qps_take_wqes_in_posted_order", covers: &[135], needs: NEEDS, run: shared_order },
    Case { name: "srq.limit_event_fires_once_and_disarms", covers: &[136], needs: NEEDS, run: limit_event },
    Case { name: "srq.empty_srq_rnr_and_qp_error_keeps_wqes", covers: &[137], needs: NEEDS, run: rnr_and_error },
];

fn make(b: &mut dyn Backend, pd: PdHandle, max_wr: u32, max_sge: u32) -> mlx5_dv::Result<Srq> {
    b.create_srq(&SrqInitAttr { pd, max_wr, max_sge, xrc: None, tm: None })
}

/// The device's SRQ depth: `max_srq_wr + 1` (`2^log_max_srq_sz`).
fn srq_depth(b: &mut dyn Backend) -> Check<u32> {
    let wr = b.caps().device.max_srq_wr.ok_or_else(|| Verdict::skip("the backend does not report max_srq_wr"))?;
    Ok(wr.saturating_add(1))
}

fn create_limits(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, _) = open(b, env.dev()?)?;
    let depth = srq_depth(b)?;
    // (max_wr, max_sge) -> (max_wr, max_sge) written back: the main list is max_wr + 1 rounded
    // up to a power of two, one WQE of it always the list's tail; a WQE is the next segment and
    // the SGEs, at least 32 bytes, rounded up to a power of two.
    for ((wr, sge), want) in [
        ((1, 1), (1, 1)),
        ((100, 1), (127, 1)),
        ((128, 2), (255, 3)),
        ((4, 4), (7, 7)),
        ((0, 0), (0, 1)),
        ((depth / 2, 31), (depth - 1, 31)),
    ] {
        let s = expect_ok(&format!("ibv_create_srq max_wr {wr} max_sge {sge}"), make(b, pd, wr, sge))?;
        check_eq(&format!("max_wr, max_sge written back for ({wr}, {sge})"), (s.max_wr, s.max_sge), want)?;
        expect_ok("ibv_destroy_srq", b.destroy_srq(&s))?;
    }
    // libmlx5 refuses max_wr past 2^log_max_srq_sz; at it, the kernel refuses the doubled
    // depth libmlx5 asks for. max_sge past max_rq_desc_sz / 16 is libmlx5's EINVAL; at 32 the
    // rounded WQE holds 63, past the kernel's limit.
    for (wr, sge) in [(depth + 1, 1), (depth, 1), (16, 33), (16, 32)] {
        expect_errno(&format!("ibv_create_srq max_wr {wr} max_sge {sge}"), make(b, pd, wr, sge), EINVAL)?;
    }
    Ok(())
}

fn query_modify(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, _) = open(b, env.dev()?)?;
    let s = expect_ok("ibv_create_srq", make(b, pd, 100, 1))?;
    // The kernel's max_wr counts the wait queue too: 2 * 100 + 1 rounded up, less one.
    let q = expect_ok("ibv_query_srq", b.query_srq(&s))?;
    check_eq("query after create", q, SrqAttr { max_wr: 255, max_sge: 1, srq_limit: 0 })?;
    let limit = |l| SrqAttr { srq_limit: l, ..SrqAttr::default() };
    expect_ok("ibv_modify_srq IBV_SRQ_LIMIT 10", b.modify_srq(&s, &limit(10), srq_attr_mask::LIMIT))?;
    check_eq("srq_limit after arming", expect_ok("ibv_query_srq", b.query_srq(&s))?.srq_limit, 10)?;
    expect_errno("IBV_SRQ_LIMIT at the SRQ's WQEs", b.modify_srq(&s, &limit(256), srq_attr_mask::LIMIT), EINVAL)?;
    let resize = SrqAttr { max_wr: 200, ..SrqAttr::default() };
    expect_errno("IBV_SRQ_MAX_WR (resize)", b.modify_srq(&s, &resize, srq_attr_mask::MAX_WR), EINVAL)?;
    check_eq("srq_limit after the refusals", expect_ok("ibv_query_srq", b.query_srq(&s))?.srq_limit, 10)?;
    expect_ok("ibv_destroy_srq", b.destroy_srq(&s))?;
    expect_errno("ibv_query_srq of a destroyed SRQ", b.query_srq(&s), EINVAL)
}

fn post_errors(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, _) = open(b, env.dev()?)?;
    let (_, mr) = region(b, pd, 4096, &[], AccessFlags::LOCAL_WRITE)?;
    let s = expect_ok("ibv_create_srq", make(b, pd, 4, 1))?;
    let wr = |id, n: usize| RecvWr { wr_id: id, sge: vec![sge(&mr, 0, 64); n] };
    let r = b.post_srq_recv(&s, &[wr(1, 1), wr(2, 2), wr(3, 1)]);
    expect_errno("a WR with more SGEs than max_sge", r.clone(), EINVAL)?;
    check_eq("bad_wr of the SGE error", r.err().and_then(|e| e.bad_wr()), Some(1))?;
    // One WR went in; max_wr (7) in all fit, the eighth finds the SRQ full.
    let more: Vec<RecvWr> = (10..17).map(|i| wr(i, 1)).collect();
    let r = b.post_srq_recv(&s, &more);
    expect_errno("the eighth WR of an SRQ of max_wr 7", r.clone(), ENOMEM)?;
    check_eq("bad_wr of the full SRQ", r.err().and_then(|e| e.bad_wr()), Some(6))?;
    expect_errno("one more", b.post_srq_recv(&s, &[wr(20, 1)]), ENOMEM)
}

/// An RC QP on `cq` receiving from `srq`.
fn qp_on(b: &mut dyn Backend, pd: PdHandle, cq: &Cq, srq: &Srq) -> mlx5_dv::Result<Qp> {
    let cap = QpCap { max_recv_wr: 16, max_recv_sge: 4, ..CAP };
    b.create_qp(&QpInitAttr { srq: Some(srq.handle), ..qp_attr(pd, cq, mlx5_dv::DvQpCreateFlags::empty(), cap) })
}

fn qp_on_srq(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let (_, mr) = region(b, pd, 4096, &[], AccessFlags::LOCAL_WRITE)?;
    let s = expect_ok("ibv_create_srq", make(b, pd, 16, 1))?;
    let qp = expect_ok("ibv_create_qp with an SRQ", qp_on(b, pd, &cq, &s))?;
    check_eq("max_recv_wr, max_recv_sge written back", (qp.cap.max_recv_wr, qp.cap.max_recv_sge), (0, 0))?;
    let dest = dest(b, ctx, &qp)?;
    expect_ok("INIT", b.modify_qp(&qp, &QpModify::connect(QP_ACCESS, dest)[0]))?;
    // libmlx5's receive queue of a QP on an SRQ holds nothing: its overflow check says full.
    let r = b.post_recv(&qp, &[RecvWr { wr_id: 1, sge: vec![sge(&mr, 0, 8)] }]);
    expect_errno("ibv_post_recv on a QP with an SRQ", r, ENOMEM)?;
    expect_errno("ibv_destroy_srq while a QP uses it", b.destroy_srq(&s), EBUSY)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))?;
    expect_ok("ibv_destroy_srq once the QP is gone", b.destroy_srq(&s))
}

/// A client QP on `a` and two server QPs on `s` that share one SRQ, all connected; the
/// server's registered region.
struct Shared {
    ctx: ContextHandle,
    a1: Qp,
    a2: Qp,
    s1: Qp,
    s2: Qp,
    acq: Cq,
    scq: Cq,
    srq: Srq,
    smr: mlx5_dv::Mr,
    sbuf: mlx5_dv::Buf,
    amr: mlx5_dv::Mr,
}

fn shared(b: &mut dyn Backend, env: &Env, max_wr: u32) -> Check<Shared> {
    let (ctx, pd, acq) = open(b, env.dev()?)?;
    let scq = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let srq = expect_ok("ibv_create_srq", make(b, pd, max_wr, 1))?;
    let plain = |b: &mut dyn Backend| b.create_qp(&qp_attr(pd, &acq, mlx5_dv::DvQpCreateFlags::empty(), CAP));
    let a1 = expect_ok("client QP 1", plain(b))?;
    let a2 = expect_ok("client QP 2", plain(b))?;
    let s1 = expect_ok("server QP 1 on the SRQ", qp_on(b, pd, &scq, &srq))?;
    let s2 = expect_ok("server QP 2 on the SRQ", qp_on(b, pd, &scq, &srq))?;
    for (x, y) in [(&a1, &s1), (&s1, &a1), (&a2, &s2), (&s2, &a2)] {
        connect(b, x, ctx, y)?;
    }
    let (sbuf, smr) = region(b, pd, 4096, &[], AccessFlags::LOCAL_WRITE)?;
    let (_, amr) = region(b, pd, 4096, &pattern(4096, 7), AccessFlags::LOCAL_WRITE)?;
    Ok(Shared { ctx, a1, a2, s1, s2, acq, scq, srq, smr, sbuf, amr })
}

fn send(b: &mut dyn Backend, qp: &Qp, mr: &mlx5_dv::Mr, wr_id: u64, off: u64, len: u32) -> Check {
    let op = WrOp::Send { wr_id, flags: SendFlags::SIGNALED, sge: vec![sge(mr, off, len)] };
    expect_ok("ibv_post_send", b.post_send(qp, &[op]))
}

fn shared_order(b: &mut dyn Backend, env: &Env) -> Check {
    let t = shared(b, env, 8)?;
    let wrs: Vec<RecvWr> = (0..4).map(|i| RecvWr { wr_id: 100 + i, sge: vec![sge(&t.smr, i * 64, 64)] }).collect();
    expect_ok("ibv_post_srq_recv of 4 WRs", b.post_srq_recv(&t.srq, &wrs))?;
    // QP 2 sends first, then QP 1, then QP 2 twice: the SRQ's WQEs go in posted order.
    for (i, qp) in [&t.a2, &t.a1, &t.a2, &t.a2].into_iter().enumerate() {
        send(b, qp, &t.amr, i as u64, i as u64 * 16, 16 + i as u32)?;
        ok_cqe(b, &t.acq, i as u64, wc_opcode::SEND)?;
    }
    let wcs = poll(b, &t.scq, 4)?;
    let got: Vec<(u64, u32, u32, u32)> = wcs.iter().map(|w| (w.wr_id, w.qp_num, w.status, w.byte_len)).collect();
    let (q1, q2) = (t.s1.qp_num, t.s2.qp_num);
    let want = vec![(100, q2, 0, 16), (101, q1, 0, 17), (102, q2, 0, 18), (103, q2, 0, 19)];
    check_eq("receive completions (wr_id, qp_num, status, byte_len)", got, want)?;
    let data = contents(b, &t.sbuf)?;
    let sent = pattern(4096, 7);
    for i in 0..4usize {
        let (at, len) = (i * 64, 16 + i);
        check_eq(&format!("bytes of message {i}"), &data[at..at + len], &sent[i * 16..i * 16 + len])?;
    }
    Ok(())
}

fn limit_event(b: &mut dyn Backend, env: &Env) -> Check {
    let t = shared(b, env, 8)?;
    let wrs: Vec<RecvWr> = (0..5).map(|i| RecvWr { wr_id: i, sge: vec![sge(&t.smr, i * 64, 64)] }).collect();
    expect_ok("ibv_post_srq_recv of 5 WRs", b.post_srq_recv(&t.srq, &wrs))?;
    let limit = SrqAttr { srq_limit: 3, ..SrqAttr::default() };
    expect_ok("ibv_modify_srq IBV_SRQ_LIMIT 3", b.modify_srq(&t.srq, &limit, srq_attr_mask::LIMIT))?;
    let sctx = t.ctx;
    // 5 -> 4 -> 3: not below the limit yet.
    for i in 0..2 {
        send(b, &t.a1, &t.amr, i, 0, 8)?;
        ok_cqe(b, &t.acq, i, wc_opcode::SEND)?;
    }
    poll(b, &t.scq, 2)?;
    check_eq(
        "events before the count drops below 3",
        expect_ok("ibv_get_async_event", b.get_async_event(sctx))?,
        None,
    )?;
    // 3 -> 2: below; the event fires and the limit disarms.
    send(b, &t.a1, &t.amr, 2, 0, 8)?;
    ok_cqe(b, &t.acq, 2, wc_opcode::SEND)?;
    poll(b, &t.scq, 1)?;
    let ev = next_async_event(b, sctx)?.ok_or_else(|| Verdict::fail("an async event", "SRQ_LIMIT_REACHED", "none"))?;
    check_eq("event (type, srq)", (ev.event_type, ev.srq), (event_type::SRQ_LIMIT_REACHED, Some(t.srq.handle)))?;
    check_eq("srq_limit after the event", expect_ok("ibv_query_srq", b.query_srq(&t.srq))?.srq_limit, 0)?;
    // 2 -> 1: disarmed, nothing more.
    send(b, &t.a2, &t.amr, 3, 0, 8)?;
    ok_cqe(b, &t.acq, 3, wc_opcode::SEND)?;
    poll(b, &t.scq, 1)?;
    check_eq("events once disarmed", expect_ok("ibv_get_async_event", b.get_async_event(sctx))?, None)
}

fn rnr_and_error(b: &mut dyn Backend, env: &Env) -> Check {
    let t = shared(b, env, 8)?;
    // Server QP 2 goes to ERR: it flushes its own queues, not the SRQ.
    expect_ok("modify server QP 2 to ERR", b.modify_qp(&t.s2, &QpModify::to(QpState::Err)))?;
    // Nothing posted: the responder answers RNR, and the SEND (rnr_retry 7) waits.
    send(b, &t.a1, &t.amr, 1, 0, 8)?;
    no_cqe(b, &t.acq)?;
    let ev =
        next_async_event(b, t.ctx)?.ok_or_else(|| Verdict::fail("an async event", "QP_LAST_WQE_REACHED", "none"))?;
    check_eq(
        "QP 2's event (type, qp_num)",
        (ev.event_type, ev.qp_num),
        (event_type::QP_LAST_WQE_REACHED, Some(t.s2.qp_num)),
    )?;
    let wrs: Vec<RecvWr> = (0..2).map(|i| RecvWr { wr_id: 50 + i, sge: vec![sge(&t.smr, i * 64, 64)] }).collect();
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&t.srq, &wrs))?;
    ok_cqe(b, &t.acq, 1, wc_opcode::SEND)?;
    let wc = poll(b, &t.scq, 1)?.remove(0);
    check_eq(
        "the waiting SEND's receive (wr_id, qp_num, status)",
        (wc.wr_id, wc.qp_num, wc.status),
        (50, t.s1.qp_num, 0),
    )?;
    // The other WQE was not flushed by QP 2's error: the next SEND takes it.
    no_cqe(b, &t.scq)?;
    send(b, &t.a1, &t.amr, 2, 0, 8)?;
    ok_cqe(b, &t.acq, 2, wc_opcode::SEND)?;
    let wc = poll(b, &t.scq, 1)?.remove(0);
    check_eq("the next receive (wr_id, qp_num, status)", (wc.wr_id, wc.qp_num, wc.status), (51, t.s1.qp_num, 0))
}
