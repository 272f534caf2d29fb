//! The smaller verbs: `ibv_resize_cq` (its rounding and bounds, and the completions a resize
//! keeps), `mlx5dv_modify_qp_udp_sport`, and the asynchronous events a destroy takes along.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{AccessFlags as A, Backend, DvQpCreateFlags, event_type, wc_opcode, wc_status};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "verbs_misc.resize_cq_rounds_and_bounds",
        covers: &[211],
        needs: &[Need::Mlx5Device],
        run: resize_sizes,
    },
    Case {
        name: "verbs_misc.resize_cq_keeps_unread_completions",
        covers: &[212],
        needs: &[Need::Mlx5Device],
        run: resize_keeps,
    },
    Case {
        name: "verbs_misc.udp_sport_in_rts_only",
        covers: &[213],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: udp_sport,
    },
    Case {
        name: "verbs_misc.a_destroyed_qps_unread_event_goes_with_it",
        covers: &[230],
        needs: &[Need::Mlx5Device],
        run: events_leave_with_their_qp,
    },
];

/// `cqe + 1` rounded up to a power of two, less one, both ways; the same size again changes
/// nothing; 0 and a size whose 64-byte CQEs pass `INT_MAX` are EINVAL, and the CQ keeps its
/// size after them.
fn resize_sizes(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _pd, _cq) = open(b, env.dev()?)?;
    let cq = expect_ok("ibv_create_cq(3)", b.create_cq(ctx, 3))?;
    check_eq("the capacity of ibv_create_cq(3)", cq.cqe, 3)?;
    let mut now = cq;
    for (ask, want) in [(1, 1), (7, 7), (8, 15), (15, 15), (100, 127), (2, 3)] {
        now = expect_ok(&format!("ibv_resize_cq({ask})"), b.resize_cq(&now, ask))?;
        check_eq(&format!("the capacity after ibv_resize_cq({ask})"), now.cqe, want)?;
    }
    expect_errno("ibv_resize_cq(0)", b.resize_cq(&now, 0), EINVAL)?;
    expect_errno("ibv_resize_cq(2^25)", b.resize_cq(&now, 1 << 25), EINVAL)?;
    let same = expect_ok("ibv_resize_cq(3) after the refusals", b.resize_cq(&now, 3))?;
    check_eq("the capacity after the refusals", same.cqe, 3)?;
    expect_ok("ibv_destroy_cq", b.destroy_cq(&same))
}

/// Completions not yet polled survive a resize up and are polled in order with the ones
/// after it; a resize below their number is EINVAL and loses none; with none unread the CQ
/// shrinks and works on.
fn resize_keeps(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_sbuf, smr) = region(b, s.pd, 256, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let (_abuf, amr) = region(b, a.pd, 256, &pattern(256, 3), A::LOCAL_WRITE)?;
    let post = |b: &mut dyn Backend, ids: std::ops::Range<u64>| -> Check {
        for id in ids {
            let w = write(id, smr.rkey, smr.addr + 8 * id, vec![sge(&amr, 8 * id, 8)]);
            expect_ok(&format!("RDMA WRITE {id}"), b.post_send(&a.qp, &[w]))?;
        }
        Ok(())
    };
    post(b, 1..7)?;
    // The device writes the CQEs on its own time on hardware: give it that.
    std::thread::sleep(std::time::Duration::from_millis(200));
    expect_errno("ibv_resize_cq(1) below 6 unread completions", b.resize_cq(&a.cq, 1), EINVAL)?;
    let big = expect_ok("ibv_resize_cq(200)", b.resize_cq(&a.cq, 200))?;
    check_eq("the capacity after ibv_resize_cq(200)", big.cqe, 255)?;
    post(b, 7..9)?;
    let got: Vec<(u64, u32)> = poll(b, &big, 8)?.iter().map(|w| (w.wr_id, w.status)).collect();
    let want: Vec<(u64, u32)> = (1..9).map(|id| (id, wc_status::SUCCESS)).collect();
    check_eq("the (wr_id, status) polled after the resize", got, want)?;
    let small = expect_ok("ibv_resize_cq(3) with nothing unread", b.resize_cq(&big, 3))?;
    check_eq("the capacity after ibv_resize_cq(3)", small.cqe, 3)?;
    for id in [9, 10, 11, 12, 13] {
        post(b, id..id + 1)?;
        ok_cqe(b, &small, id, wc_opcode::RDMA_WRITE)?;
    }
    no_cqe(b, &small)
}

/// `mlx5dv_modify_qp_udp_sport`: EOPNOTSUPP for an RC QP not yet in RTS; in RTS it takes the
/// port, and traffic goes on both ways.
fn udp_sport(b: &mut dyn Backend, env: &Env) -> Check {
    let (_ctx, pd, cq) = open(b, env.dev()?)?;
    let fresh = expect_ok("create an RC QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    expect_errno("mlx5dv_modify_qp_udp_sport in RESET", b.modify_qp_udp_sport(&fresh, 55555), EOPNOTSUPP)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&fresh))?;
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    expect_ok("mlx5dv_modify_qp_udp_sport(55555) in RTS", b.modify_qp_udp_sport(&s.qp, 55555))?;
    expect_ok("mlx5dv_modify_qp_udp_sport(49152) in RTS", b.modify_qp_udp_sport(&a.qp, 49152))?;
    let (_sbuf, smr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ)?;
    let (abuf, amr) = region(b, a.pd, 64, &pattern(64, 5), A::LOCAL_WRITE)?;
    let w = write(1, smr.rkey, smr.addr, vec![sge(&amr, 0, 32)]);
    expect_ok("RDMA WRITE after the port changed", b.post_send(&a.qp, &[w]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let r = mlx5_dv::WrOp::RdmaRead {
        wr_id: 2,
        flags: mlx5_dv::SendFlags::SIGNALED,
        rkey: smr.rkey,
        remote_addr: smr.addr,
        sge: vec![sge(&amr, 32, 32)],
    };
    expect_ok("RDMA READ after the port changed", b.post_send(&a.qp, &[r]))?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_READ)?;
    let got = expect_ok("read_buf", b.read_buf(&abuf, 32, 32))?;
    check_eq("the bytes read back", got, pattern(64, 5)[..32].to_vec())
}

/// Two loopback pairs whose requester writes to a bad rkey: the responder's QP_ACCESS_ERR is
/// queued. The first responder is destroyed before its event is read, and its context then has
/// no event; the second stays, and its event names it.
fn events_leave_with_their_qp(b: &mut dyn Backend, env: &Env) -> Check {
    let mut responders = Vec::new();
    for round in 1..=2 {
        let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
        let (_sbuf, smr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
        let (_abuf, amr) = region(b, a.pd, 64, &pattern(64, round), A::LOCAL_WRITE)?;
        let w = write(1, smr.rkey ^ 0x100, smr.addr, vec![sge(&amr, 0, 8)]);
        expect_ok("RDMA WRITE to a bad rkey", b.post_send(&a.qp, &[w]))?;
        err_cqe(b, &a.cq, 1, wc_status::REM_ACCESS_ERR)?;
        responders.push(s);
    }
    let [gone, kept] = <[Side; 2]>::try_from(responders).map_err(|r| Verdict::fail("two responders", 2, r.len()))?;
    // A card queues the responder's event on its own time: give it that.
    std::thread::sleep(std::time::Duration::from_millis(100));
    expect_ok("ibv_destroy_qp of the first responder", b.destroy_qp(&gone.qp))?;
    let left = expect_ok("ibv_get_async_event", b.get_async_event(gone.ctx))?;
    check_eq("the destroyed responder's context's event", left.map(|e| (e.event_type, e.qp_num)), None)?;
    let ev = next_async_event(b, kept.ctx)?.map(|e| (e.event_type, e.qp_num));
    check_eq("the kept responder's event", ev, Some((event_type::QP_ACCESS_ERR, Some(kept.qp.qp_num))))
}
