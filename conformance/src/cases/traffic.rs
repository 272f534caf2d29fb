//! Traffic through MRs and indirect mkeys, and the error completions of the engine. The
//! target buffers are compared whole, gaps included, so a stray write is caught.

use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, MkeyInitFlags as F, SendFlags, Sge, WrOp, event_type, wc_flags,
    wc_opcode, wc_status,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "traffic.write_read_send_loopback", covers: &[], needs: &[Need::Mlx5Device], run: loopback },
    Case {
        name: "traffic.write_read_send_two_devices",
        covers: &[],
        needs: &[Need::Mlx5Device, Need::TwoDevices],
        run: two_devices,
    },
    Case {
        name: "traffic.remote_write_needs_remote_write_access",
        covers: &[],
        needs: &[Need::Mlx5Device],
        run: needs_rw,
    },
    Case {
        name: "traffic.bad_lkey_is_local_protection_then_flush",
        covers: &[],
        needs: &[Need::Mlx5Device],
        run: bad_lkey,
    },
    Case { name: "traffic.short_receive_is_a_length_error", covers: &[], needs: &[Need::Mlx5Device], run: short_recv },
    Case {
        name: "traffic.unconfigured_mkey_is_free",
        covers: &[],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: free_mkey,
    },
    Case { name: "traffic.cq_overrun_raises_cq_err", covers: &[], needs: &[Need::Mlx5Device], run: cq_overrun },
    Case {
        name: "traffic.reset_removes_unpolled_completions",
        covers: &[96],
        needs: &[Need::Mlx5Device],
        run: reset_cleans_cq,
    },
    Case {
        name: "traffic.zero_length_rdma_checks_no_rkey",
        covers: &[275],
        needs: &[Need::Mlx5Device],
        run: zero_length_rdma,
    },
    Case {
        name: "traffic.crypto_mkey_without_attributes_fails",
        covers: &[59],
        needs: &[Need::Mlx5Device, Need::Devx, Need::CryptoEngine],
        run: crypto_unconfigured,
    },
];

/// Write, read, send with immediate and write with immediate between `a` and `s`.
fn exchange(b: &mut dyn Backend, a: &Side, s: &Side) -> Check {
    let (sbuf, smr) = region(b, s.pd, 4096, &pattern(4096, 0), A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ)?;
    let (abuf, amr) = region(b, a.pd, 4096, &pattern(4096, 9), A::LOCAL_WRITE)?;
    // WRITE 1000 bytes from a[100..] to s[2000..].
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(1, smr.rkey, smr.addr + 2000, vec![sge(&amr, 100, 1000)])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(4096, 0);
    want[2000..3000].copy_from_slice(&pattern(4096, 9)[100..1100]);
    check_eq("server buffer after WRITE", contents(b, &sbuf)?, want.clone())?;
    // READ s[0..512] into a[3000..] and a[0..], two SGEs.
    let read = WrOp::RdmaRead {
        wr_id: 2,
        flags: SendFlags::SIGNALED,
        rkey: smr.rkey,
        remote_addr: smr.addr,
        sge: vec![sge(&amr, 3000, 256), sge(&amr, 0, 256)],
    };
    expect_ok("RDMA READ", b.post_send(&a.qp, &[read]))?;
    let wc = ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_READ)?;
    check_eq("READ byte_len", wc.byte_len, 512)?;
    let mut awant = pattern(4096, 9);
    awant[3000..3256].copy_from_slice(&want[..256]);
    awant[..256].copy_from_slice(&want[256..512]);
    check_eq("client buffer after READ", contents(b, &abuf)?, awant.clone())?;
    // SEND with immediate, 300 bytes into two receive SGEs.
    recv(b, &s.qp, 10, vec![sge(&smr, 3500, 100), sge(&smr, 3700, 300)])?;
    let send =
        WrOp::SendImm { wr_id: 3, flags: SendFlags::SIGNALED, imm: 0xdead_beef, sge: vec![sge(&amr, 1000, 300)] };
    expect_ok("SEND with immediate", b.post_send(&a.qp, &[send]))?;
    ok_cqe(b, &a.cq, 3, wc_opcode::SEND)?;
    let rwc = ok_cqe(b, &s.cq, 10, wc_opcode::RECV)?;
    check_eq(
        "receive (byte_len, imm, flags & WITH_IMM)",
        (rwc.byte_len, rwc.imm_data, rwc.wc_flags & wc_flags::WITH_IMM),
        (300, 0xdead_beef, wc_flags::WITH_IMM),
    )?;
    check_eq("receive qp_num", rwc.qp_num, s.qp.qp_num)?;
    want[3500..3600].copy_from_slice(&awant[1000..1100]);
    want[3700..3900].copy_from_slice(&awant[1100..1300]);
    check_eq("server buffer after SEND", contents(b, &sbuf)?, want.clone())?;
    // WRITE with immediate consumes a receive without scattering into it.
    recv(b, &s.qp, 11, vec![sge(&smr, 0, 8)])?;
    let wimm = WrOp::RdmaWriteImm {
        wr_id: 4,
        flags: SendFlags::SIGNALED,
        rkey: smr.rkey,
        remote_addr: smr.addr + 64,
        imm: 7,
        sge: vec![sge(&amr, 0, 64)],
    };
    expect_ok("WRITE with immediate", b.post_send(&a.qp, &[wimm]))?;
    ok_cqe(b, &a.cq, 4, wc_opcode::RDMA_WRITE)?;
    let rwc = ok_cqe(b, &s.cq, 11, wc_opcode::RECV_RDMA_WITH_IMM)?;
    check_eq("write-imm receive (byte_len, imm)", (rwc.byte_len, rwc.imm_data), (64, 7))?;
    want[64..128].copy_from_slice(&awant[..64]);
    check_eq("server buffer after WRITE with immediate", contents(b, &sbuf)?, want)
}

fn loopback(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    exchange(b, &a, &s)
}

fn two_devices(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, true, DvQpCreateFlags::empty())?;
    exchange(b, &a, &s)
}

fn needs_rw(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (sbuf, smr) = region(b, s.pd, 64, &pattern(64, 1), A::LOCAL_WRITE | A::REMOTE_READ)?;
    let (_abuf, amr) = region(b, a.pd, 64, &pattern(64, 2), A::LOCAL_WRITE)?;
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(1, smr.rkey, smr.addr, vec![sge(&amr, 0, 16)])]))?;
    let wc = err_cqe(b, &a.cq, 1, wc_status::REM_ACCESS_ERR)?;
    check("vendor_err", wc.vendor_err != 0, "a vendor syndrome", wc.vendor_err)?;
    check_eq("the region is untouched", contents(b, &sbuf)?, pattern(64, 1))?;
    check_eq("requester QP state", expect_ok("query", b.query_qp_state(&a.qp))?, mlx5_dv::QpState::Err)
}

fn bad_lkey(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (sbuf, smr) = region(b, s.pd, 64, &pattern(64, 1), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let (_abuf, amr) = region(b, a.pd, 64, &pattern(64, 2), A::LOCAL_WRITE)?;
    let bogus = Sge { addr: amr.addr, length: 16, lkey: amr.lkey ^ 0x0000_0f00 };
    let beyond = sge(&amr, 60, 16);
    let chain = [write(1, smr.rkey, smr.addr, vec![bogus]), write(2, smr.rkey, smr.addr, vec![sge(&amr, 0, 16)])];
    expect_ok("a write with a bad lkey, then a good one", b.post_send(&a.qp, &chain))?;
    let wcs = poll(b, &a.cq, 2)?;
    check_eq(
        "(wr_id, status) of both",
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, wc_status::LOC_PROT_ERR), (2, wc_status::WR_FLUSH_ERR)],
    )?;
    check_eq("the region is untouched", contents(b, &sbuf)?, pattern(64, 1))?;
    // A WR posted to a QP in ERR is flushed too, signalled or not.
    let late = WrOp::RdmaWrite {
        wr_id: 3,
        flags: SendFlags::empty(),
        rkey: smr.rkey,
        remote_addr: smr.addr,
        sge: vec![beyond],
    };
    expect_ok("post to a QP in ERR", b.post_send(&a.qp, &[late]))?;
    err_cqe(b, &a.cq, 3, wc_status::WR_FLUSH_ERR).map(drop)
}

fn short_recv(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_sbuf, smr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, a.pd, 128, &pattern(128, 2), A::LOCAL_WRITE)?;
    recv(b, &s.qp, 7, vec![sge(&smr, 0, 32)])?;
    expect_ok(
        "SEND of 64 bytes",
        b.post_send(&a.qp, &[WrOp::Send { wr_id: 1, flags: SendFlags::SIGNALED, sge: vec![sge(&amr, 0, 64)] }]),
    )?;
    err_cqe(b, &s.cq, 7, wc_status::LOC_LEN_ERR)?;
    err_cqe(b, &a.cq, 1, wc_status::REM_INV_REQ_ERR).map(drop)
}

fn free_mkey(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT, 4)?;
    let (_abuf, amr) = region(b, a.pd, 16, &pattern(16, 2), A::LOCAL_WRITE)?;
    expect_ok(
        "WRITE to a never-configured mkey",
        b.post_send(&a.qp, &[write(1, mkey.rkey, 0, vec![sge(&amr, 0, 16)])]),
    )?;
    err_cqe(b, &a.cq, 1, wc_status::REM_ACCESS_ERR).map(drop)
}

fn cq_overrun(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, _) = open(b, env.dev()?)?;
    let small = expect_ok("a CQ of 1 entry", b.create_cq(ctx, 1))?;
    let other = expect_ok("cq", b.create_cq(ctx, 16))?;
    let q = expect_ok("QP on the small CQ", b.create_qp(&qp_attr(pd, &small, DvQpCreateFlags::empty(), CAP)))?;
    let peer = expect_ok("peer", b.create_qp(&qp_attr(pd, &other, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &q, ctx, &peer)?;
    connect(b, &peer, ctx, &q)?;
    let (_buf, mr) = region(b, pd, 64, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let ws: Vec<_> = (0..3).map(|i| write(i, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 8)])).collect();
    expect_ok("three signalled writes", b.post_send(&q, &ws))?;
    let ev = next_async_event(b, ctx)?;
    let ev = ev.ok_or_else(|| crate::Verdict::fail("an async event", "IBV_EVENT_CQ_ERR", "none"))?;
    check_eq("event type", ev.event_type, event_type::CQ_ERR)?;
    check_eq("event CQ", ev.cq, Some(small.handle))
}

fn crypto_unconfigured(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (buf, mr) = region(b, s.pd, 64, &pattern(64, 1), A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT | F::CRYPTO, 4)?;
    configure_list(b, &s, &mkey, A::REMOTE_WRITE | A::LOCAL_WRITE, vec![sge(&mr, 0, 64)])?;
    let (_abuf, amr) = region(b, a.pd, 16, &pattern(16, 2), A::LOCAL_WRITE)?;
    expect_ok(
        "WRITE through a crypto mkey without crypto attributes",
        b.post_send(&a.qp, &[write(1, mkey.rkey, 0, vec![sge(&amr, 0, 16)])]),
    )?;
    let wc = poll(b, &a.cq, 1)?.remove(0);
    check("an error completion", wc.status != wc_status::SUCCESS, "a status other than SUCCESS", wc.status)?;
    check_eq("the region is untouched", contents(b, &buf)?, pattern(64, 1))
}

/// RESET takes the QP's unpolled completions out of its CQ (`mlx5_cq_clean`), and the
/// queue starts over: a WR posted after reconnecting completes with its own `wr_id`.
fn reset_cleans_cq(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_sbuf, smr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, a.pd, 64, &pattern(64, 2), A::LOCAL_WRITE)?;
    // The MR grants no REMOTE_WRITE: the first WRITE fails and the second is flushed.
    let ops =
        [write(1, smr.rkey, smr.addr, vec![sge(&amr, 0, 16)]), write(2, smr.rkey, smr.addr, vec![sge(&amr, 0, 16)])];
    expect_ok("two WRITEs that fail", b.post_send(&a.qp, &ops))?;
    let deadline = crate::harness::deadline::wait_until();
    while expect_ok("ibv_query_qp", b.query_qp_state(&a.qp))? != mlx5_dv::QpState::Err {
        if std::time::Instant::now() >= deadline {
            return check_eq(
                "requester state",
                expect_ok("ibv_query_qp", b.query_qp_state(&a.qp))?,
                mlx5_dv::QpState::Err,
            );
        }
        std::hint::spin_loop();
    }
    for qp in [&a.qp, &s.qp] {
        expect_ok("modify to RESET", b.modify_qp(qp, &mlx5_dv::QpModify::to(mlx5_dv::QpState::Reset)))?;
    }
    no_cqe(b, &a.cq)?;
    let (_tbuf, tmr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    connect(b, &a.qp, s.ctx, &s.qp)?;
    connect(b, &s.qp, a.ctx, &a.qp)?;
    expect_ok("a WRITE after the reset", b.post_send(&a.qp, &[write(3, tmr.rkey, tmr.addr, vec![sge(&amr, 0, 16)])]))?;
    ok_cqe(b, &a.cq, 3, wc_opcode::RDMA_WRITE)?;
    no_cqe(b, &a.cq)
}

/// A WRITE, a WRITE with immediate and a READ of no bytes with key 0 at address 0 (UCX's
/// flush): the responder checks no key, and both QPs stay in RTS; an immediate still
/// consumes a receive.
fn zero_length_rdma(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_sbuf, smr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE)?;
    recv(b, &s.qp, 50, vec![sge(&smr, 0, 64)])?;
    let sig = SendFlags::SIGNALED;
    let ops = [
        write(1, 0, 0, vec![]),
        WrOp::RdmaWriteImm { wr_id: 2, flags: sig, rkey: 0, remote_addr: 0, imm: 0x55, sge: vec![] },
        WrOp::RdmaRead { wr_id: 3, flags: sig, rkey: 0, remote_addr: 0, sge: vec![] },
    ];
    expect_ok("zero-length WRITE, WRITE with immediate and READ", b.post_send(&a.qp, &ops))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_WRITE)?;
    ok_cqe(b, &a.cq, 3, wc_opcode::RDMA_READ)?;
    let wc = ok_cqe(b, &s.cq, 50, wc_opcode::RECV_RDMA_WITH_IMM)?;
    check_eq("the immediate's receive (byte_len, imm)", (wc.byte_len, wc.imm_data), (0, 0x55))?;
    check_eq("requester QP state", expect_ok("query", b.query_qp_state(&a.qp))?, mlx5_dv::QpState::Rts)?;
    check_eq("responder QP state", expect_ok("query", b.query_qp_state(&s.qp))?, mlx5_dv::QpState::Rts)
}
