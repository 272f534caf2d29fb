//! Atomics on DC (items 330–331): compare-and-swap and fetch-and-add from a DCI land on the
//! DCT's MR with the RC responder's checks, and a DC atomic sent again after its answer was
//! lost is answered from the DCT's replay cache of that DCI, not executed twice.

use mlx5_dv::net_fault::opcode;
use mlx5_dv::{
    AccessFlags as A, Backend, Buf, DcInitAttr, Mr, NetAction, NetFault, QpAttrExt, QpAttrMask as M, QpDest, QpModify,
    QpState, SendFlags, SendWr, link_layer, wc_opcode, wc_status, wr_opcode,
};

use super::atomics::fault;
use super::ctl;
use super::dc::{Dc, KEY, another_dci, bring_up, dc_attr, dc_dest, make};
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "dc.atomics_land_at_the_dct_with_rc_checks",
        covers: &[330],
        needs: &[Need::Mlx5Device],
        run: at_the_dct,
    },
    Case {
        name: "dc.resent_atomic_is_replayed_per_dci",
        covers: &[331],
        needs: &[Need::Mlx5Device, Need::SimControl],
        run: replayed,
    },
];

/// An atomic WR from a DCI towards `to`, its original value landing at `into`.
fn atomic(wr_id: u64, cas: Option<u64>, operand: u64, target: (&Mr, u64), into: &Mr, to: &QpDest) -> SendWr {
    let (opcode, compare_add, swap) = match cas {
        Some(compare) => (wr_opcode::ATOMIC_CMP_AND_SWP, compare, operand),
        None => (wr_opcode::ATOMIC_FETCH_AND_ADD, operand, 0),
    };
    SendWr {
        wr_id,
        opcode,
        send_flags: SendFlags::SIGNALED,
        sge: vec![sge(into, 8 * wr_id, 8)],
        remote_addr: target.0.addr + target.1,
        rkey: target.0.rkey,
        compare_add,
        swap,
        dc: Some(dc_dest(to, KEY)),
        ..SendWr::default()
    }
}

/// The u64 at byte `at` of a buffer, in host byte order.
fn word(b: &mut dyn Backend, buf: &Buf, at: usize) -> Check<u64> {
    let bytes = expect_ok("read_buf", b.read_buf(buf, at, 8))?;
    let arr: [u8; 8] = bytes.try_into().map_err(|b: Vec<u8>| Verdict::fail("8 bytes", 8, b.len()))?;
    Ok(u64::from_ne_bytes(arr))
}

/// A 64-byte region on the DCT's side holding `value` at offset 8.
fn target(b: &mut dyn Backend, d: &Dc, value: u64, access: A) -> Check<(Buf, Mr)> {
    let mut fill = pattern(64, 3);
    fill[8..16].copy_from_slice(&value.to_ne_bytes());
    region(b, d.pd, 64, &fill, access)
}

const ATOMIC_MR: A = A::LOCAL_WRITE.union(A::REMOTE_ATOMIC);

fn at_the_dct(b: &mut dyn Backend, env: &Env) -> Check {
    let d = make(b, env)?;
    let to = bring_up(b, &d)?;
    let (tbuf, tmr) = target(b, &d, 7, ATOMIC_MR)?;
    let (abuf, amr) = region(b, d.pd, 64, &[0; 64], A::LOCAL_WRITE)?;
    // A compare-and-swap that misses, one that matches, a fetch-and-add: in order.
    let wrs = [
        atomic(1, Some(6), 100, (&tmr, 8), &amr, &to),
        atomic(2, Some(7), 100, (&tmr, 8), &amr, &to),
        atomic(3, None, 5, (&tmr, 8), &amr, &to),
    ];
    expect_ok("two compare-and-swaps and a fetch-and-add on the DCI", b.post_send_wr(&d.dci, &wrs))?;
    for (i, op) in [(1, wc_opcode::COMP_SWAP), (2, wc_opcode::COMP_SWAP), (3, wc_opcode::FETCH_ADD)] {
        let wc = ok_cqe(b, &d.cq, i, op)?;
        check_eq("the atomic's byte_len", wc.byte_len, 8)?;
    }
    let got = (word(b, &abuf, 8)?, word(b, &abuf, 16)?, word(b, &abuf, 24)?);
    check_eq("the original values at the DCI side", got, (7, 7, 100))?;
    let mut want = pattern(64, 3);
    want[8..16].copy_from_slice(&105u64.to_ne_bytes());
    check_eq("the DCT side's region: the target 105, the rest untouched", contents(b, &tbuf)?, want.clone())?;
    // Misaligned: an invalid request for that DCI; the DCT stays in RTR.
    expect_ok("a fetch-and-add 4 bytes off", b.post_send_wr(&d.dci, &[atomic(4, None, 1, (&tmr, 12), &amr, &to)]))?;
    err_cqe(b, &d.cq, 4, wc_status::REM_INV_REQ_ERR)?;
    check_eq("the DCI", expect_ok("ibv_query_qp", b.query_qp_state(&d.dci))?, QpState::Err)?;
    check_eq("the DCT", expect_ok("ibv_query_qp", b.query_qp_state(&d.dct))?, QpState::Rtr)?;
    // An MR without REMOTE_ATOMIC: a remote access error.
    let (rbuf, rmr) = target(b, &d, 9, A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ)?;
    let dci = another_dci(b, &d, to)?;
    expect_ok("a compare-and-swap into an MR without REMOTE_ATOMIC", {
        b.post_send_wr(&dci, &[atomic(5, Some(9), 1, (&rmr, 8), &amr, &to)])
    })?;
    err_cqe(b, &d.cq, 5, wc_status::REM_ACCESS_ERR)?;
    check_eq("that MR's target", word(b, &rbuf, 8)?, 9)?;
    check_eq("the first target after the refusals", contents(b, &tbuf)?, want)?;
    // A DCT whose access lacks REMOTE_ATOMIC: a remote access error too.
    let srq = &d.srq;
    let dct = expect_ok("a DCT", b.create_qp(&dc_attr(d.pd, &d.cq, Some(srq), DcInitAttr::dct(KEY))))?;
    let dct_to = dest(b, d.ctx, &dct)?;
    let no_atomic = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ;
    let exact = |mask| QpAttrExt { mask: M::STATE | mask, ..QpAttrExt::defaults() };
    let init = QpModify::exact(QpState::Init, no_atomic, None, exact(M::ACCESS_FLAGS | M::PKEY_INDEX | M::PORT));
    expect_ok("the DCT to INIT without REMOTE_ATOMIC", b.modify_qp(&dct, &init))?;
    let rtr = QpModify::exact(QpState::Rtr, no_atomic, Some(dct_to), exact(M::MIN_RNR_TIMER | M::AV | M::PATH_MTU));
    expect_ok("the DCT to RTR", b.modify_qp(&dct, &rtr))?;
    let dci = another_dci(b, &d, dct_to)?;
    let wr = atomic(6, None, 1, (&tmr, 8), &amr, &dct_to);
    expect_ok("a fetch-and-add to a DCT without REMOTE_ATOMIC", b.post_send_wr(&dci, &[wr]))?;
    err_cqe(b, &d.cq, 6, wc_status::REM_ACCESS_ERR)?;
    check_eq("the DCT without REMOTE_ATOMIC", expect_ok("ibv_query_qp", b.query_qp_state(&dct))?, QpState::Rtr)?;
    check_eq("the target", word(b, &tbuf, 8)?, 105)
}

fn replayed(b: &mut dyn Backend, env: &Env) -> Check {
    ctl(b)?.clear_faults();
    let d = make(b, env)?;
    if expect_ok("ibv_query_port", b.query_port(d.ctx, 1))?.link_layer != link_layer::ETHERNET {
        return Err(Verdict::skip("network fault rules act on RoCE packets; this port is InfiniBand"));
    }
    let to = bring_up(b, &d)?;
    let dev = env.dev()?.to_string();
    // The first ATOMIC Acknowledge is lost, and every fetch-and-add goes out twice: each
    // comes again from its DCI with its PSN after the DCT executed it.
    fault(b, &dev, NetFault::new(NetAction::Drop).opcode(opcode::ATOMIC_ACKNOWLEDGE))?;
    fault(b, &dev, NetFault::new(NetAction::Duplicate).opcode(opcode::FETCH_ADD).always())?;
    let (tbuf, tmr) = target(b, &d, 1000, ATOMIC_MR)?;
    let (abuf, amr) = region(b, d.pd, 64, &[0; 64], A::LOCAL_WRITE)?;
    let wrs: Vec<_> = (1..=3u64).map(|i| atomic(i, None, 10, (&tmr, 8), &amr, &to)).collect();
    expect_ok("three fetch-and-adds of 10 from one DCI", b.post_send_wr(&d.dci, &wrs))?;
    for i in 1..=3 {
        ok_cqe(b, &d.cq, i, wc_opcode::FETCH_ADD)?;
    }
    let got = (word(b, &abuf, 8)?, word(b, &abuf, 16)?, word(b, &abuf, 24)?);
    check_eq("the original values, each executed once", got, (1000, 1010, 1020))?;
    check_eq("the target: three additions, not more", word(b, &tbuf, 8)?, 1030)?;
    // A second DCI sends the same request, with the same PSN (both start at 0): another
    // DCI's, so it is executed, not answered from the first one's cache.
    let second = another_dci(b, &d, to)?;
    expect_ok(
        "the same fetch-and-add from a second DCI",
        b.post_send_wr(&second, &[atomic(4, None, 10, (&tmr, 8), &amr, &to)]),
    )?;
    ok_cqe(b, &d.cq, 4, wc_opcode::FETCH_ADD)?;
    no_cqe(b, &d.cq)?;
    check_eq("the second DCI's original value", word(b, &abuf, 32)?, 1030)?;
    check_eq("the target: four additions", word(b, &tbuf, 8)?, 1040)?;
    ctl(b)?.clear_faults();
    Ok(())
}
