//! Accesses at the edges of what a key maps (§12.97): the last byte of an MR and of an
//! indirect mkey's entries, one byte past them, zero-length messages, and mkeys nested in
//! mkeys up to the depth limit; and every error CQE syndrome's completion status and vendor
//! syndrome (§12.98). Target buffers are compared whole, so a byte placed one off is caught.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::prm::wqe::opcode::RDMA_WRITE;
use mlx5_dv::{
    AccessFlags as A, Backend, Buf, DvQpCreateFlags, FaultRule, Mkey, MkeyInitFlags as F, Mr, PdHandle, QpModify,
    QpState, SendFlags, Sge, WrOp, wc_opcode, wc_status,
};

use super::ctl;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "boundary.mr_last_byte_but_not_one_past", covers: &[97], needs: &[Need::Mlx5Device], run: mr_edges },
    Case {
        name: "boundary.indirect_mkey_entry_edges",
        covers: &[30, 97],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: klm_edges,
    },
    Case {
        name: "boundary.nested_mkeys_to_the_depth_limit",
        covers: &[97],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: nesting,
    },
    Case {
        name: "boundary.error_syndromes_status_and_vendor_err",
        covers: &[98],
        needs: &[Need::Mlx5Device, Need::SimControl],
        run: syndromes,
    },
];

/// Both QPs of a pair back to RESET and connected again: an error completion leaves the
/// requester (and, for a remote error, the responder) in ERR.
fn reconnect(b: &mut dyn Backend, a: &Side, s: &Side) -> Check {
    for qp in [&a.qp, &s.qp] {
        expect_ok("modify to RESET", b.modify_qp(qp, &QpModify::to(QpState::Reset)))?;
    }
    connect(b, &a.qp, s.ctx, &s.qp)?;
    connect(b, &s.qp, a.ctx, &a.qp)
}

/// `op` of a repeat block (`struct mlx5_wqe_umr_repeat_block_seg`): it sits where a list
/// entry has its key, so a device cannot tell a list whose first entry names key 0x400 from a
/// repeat block. The simulated firmware never hands that key out; a card might.
const REPEAT_BLOCK_OP: u32 = 0x400;

/// A region for a list-layout entry: one whose key is not [`REPEAT_BLOCK_OP`] (a region
/// skipped for that stays registered, so its key is not handed out again).
fn entry_region(b: &mut dyn Backend, pd: PdHandle, len: usize, fill: &[u8]) -> Check<(Buf, Mr)> {
    let (buf, mr) = region(b, pd, len, fill, A::LOCAL_WRITE)?;
    if mr.lkey != REPEAT_BLOCK_OP {
        return Ok((buf, mr));
    }
    region(b, pd, len, fill, A::LOCAL_WRITE)
}

/// An indirect mkey for a list-layout entry, as [`entry_region`].
fn entry_mkey(b: &mut dyn Backend, pd: PdHandle) -> Check<Mkey> {
    let m = indirect_mkey(b, pd, F::INDIRECT, 4)?;
    if m.lkey != REPEAT_BLOCK_OP {
        return Ok(m);
    }
    indirect_mkey(b, pd, F::INDIRECT, 4)
}

/// Signalled RDMA READ of `sge` from `remote_addr`.
fn read(wr_id: u64, rkey: u32, remote_addr: u64, sge: Vec<Sge>) -> WrOp {
    WrOp::RdmaRead { wr_id, flags: SendFlags::SIGNALED, rkey, remote_addr, sge }
}

/// Post `op` from `a`; it must complete with `status`; then reconnect the pair.
fn fails_with(b: &mut dyn Backend, a: &Side, s: &Side, what: &str, op: WrOp, status: u32) -> Check {
    let wr_id = match &op {
        WrOp::RdmaWrite { wr_id, .. } | WrOp::RdmaRead { wr_id, .. } => *wr_id,
        _ => 0,
    };
    expect_ok(what, b.post_send(&a.qp, &[op]))?;
    let wc = poll(b, &a.cq, 1)?.remove(0);
    check_eq(what, (wc.wr_id, wc.status), (wr_id, status))?;
    reconnect(b, a, s)
}

/// Bytes of the MR regions in these cases.
const LEN: usize = 64;

fn mr_edges(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (sbuf, smr) = region(b, s.pd, LEN, &pattern(LEN, 1), A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ)?;
    let (abuf, amr) = region(b, a.pd, LEN, &pattern(LEN, 2), A::LOCAL_WRITE)?;
    let (mut swant, mut awant) = (pattern(LEN, 1), pattern(LEN, 2));
    let end = smr.addr + LEN as u64;
    // The last byte of both MRs.
    expect_ok("WRITE of the last byte", b.post_send(&a.qp, &[write(1, smr.rkey, end - 1, vec![sge(&amr, 63, 1)])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    swant[63] = awant[63];
    // Sixteen bytes ending exactly at the end.
    expect_ok("WRITE ending at the end", b.post_send(&a.qp, &[write(2, smr.rkey, end - 16, vec![sge(&amr, 0, 16)])]))?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_WRITE)?;
    swant[48..].copy_from_slice(&awant[..16]);
    // A message of no bytes at the end: the SGE is dropped (§12.87) and nothing moves.
    expect_ok("zero-length WRITE at the end", b.post_send(&a.qp, &[write(3, smr.rkey, end, vec![sge(&amr, 64, 0)])]))?;
    ok_cqe(b, &a.cq, 3, wc_opcode::RDMA_WRITE)?;
    // READ the remote last byte into the local last byte, and the whole MR into the whole MR.
    expect_ok("READ of the last byte", b.post_send(&a.qp, &[read(4, smr.rkey, end - 1, vec![sge(&amr, 63, 1)])]))?;
    let wc = ok_cqe(b, &a.cq, 4, wc_opcode::RDMA_READ)?;
    check_eq("READ byte_len", wc.byte_len, 1)?;
    awant[63] = swant[63];
    check_eq("server buffer", contents(b, &sbuf)?, swant.clone())?;
    check_eq("client buffer after READ of the last byte", contents(b, &abuf)?, awant)?;
    expect_ok("READ of the whole MR", b.post_send(&a.qp, &[read(5, smr.rkey, smr.addr, vec![sge(&amr, 0, 64)])]))?;
    check_eq("READ byte_len", ok_cqe(b, &a.cq, 5, wc_opcode::RDMA_READ)?.byte_len, 64)?;
    check_eq("client buffer after READ of the whole MR", contents(b, &abuf)?, swant.clone())?;
    // One byte past, a byte before, and a message straddling the end, on either side.
    let cases = [
        ("WRITE one byte past the end", write(6, smr.rkey, end, vec![sge(&amr, 0, 1)]), wc_status::REM_ACCESS_ERR),
        (
            "WRITE of the last byte and one past",
            write(7, smr.rkey, end - 1, vec![sge(&amr, 0, 2)]),
            wc_status::REM_ACCESS_ERR,
        ),
        (
            "WRITE one byte before the start",
            write(8, smr.rkey, smr.addr - 1, vec![sge(&amr, 0, 1)]),
            wc_status::REM_ACCESS_ERR,
        ),
        ("READ one byte past the end", read(9, smr.rkey, end, vec![sge(&amr, 0, 1)]), wc_status::REM_ACCESS_ERR),
        (
            "WRITE from one byte past the local MR",
            write(10, smr.rkey, smr.addr, vec![sge(&amr, 63, 2)]),
            wc_status::LOC_PROT_ERR,
        ),
        (
            "READ into one byte past the local MR",
            read(11, smr.rkey, smr.addr, vec![sge(&amr, 64, 1)]),
            wc_status::LOC_PROT_ERR,
        ),
    ];
    for (what, op, status) in cases {
        fails_with(b, &a, &s, what, op, status)?;
        check_eq(&format!("server buffer after {what}"), contents(b, &sbuf)?, swant.clone())?;
    }
    // The pair works again after every reconnect.
    expect_ok("WRITE after the errors", b.post_send(&a.qp, &[write(12, smr.rkey, smr.addr, vec![sge(&amr, 0, 1)])]))?;
    ok_cqe(b, &a.cq, 12, wc_opcode::RDMA_WRITE).map(drop)
}

/// An indirect mkey of three list entries over three MRs: [0, 16) is `m0[0..16]`, [16, 32)
/// is `m1[8..24]` and [32, 48) is `m2[0..16]`.
fn klm_edges(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let rw = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ;
    let (b0, m0) = entry_region(b, s.pd, 16, &pattern(16, 3))?;
    let (b1, m1) = entry_region(b, s.pd, 32, &pattern(32, 4))?;
    let (b2, m2) = entry_region(b, s.pd, 16, &pattern(16, 5))?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT, 4)?;
    configure_list(b, &s, &mkey, rw, vec![sge(&m0, 0, 16), sge(&m1, 8, 16), sge(&m2, 0, 16)])?;
    let (abuf, amr) = region(b, a.pd, LEN, &pattern(LEN, 6), A::LOCAL_WRITE)?;
    let src = pattern(LEN, 6);
    let (mut w0, mut w1, mut w2) = (pattern(16, 3), pattern(32, 4), pattern(16, 5));
    let put = |b: &mut dyn Backend, wr_id: u64, at: u64, from: u64, len: u32| -> Check {
        let what = format!("WRITE of {len} bytes at mkey offset {at}");
        expect_ok(&what, b.post_send(&a.qp, &[write(wr_id, mkey.rkey, at, vec![sge(&amr, from, len)])]))?;
        ok_cqe(b, &a.cq, wr_id, wc_opcode::RDMA_WRITE).map(drop)
    };
    put(b, 1, 47, 0, 1)?; // the last byte of the last entry
    w2[15] = src[0];
    put(b, 2, 15, 1, 2)?; // across the first entry boundary
    w0[15] = src[1];
    w1[8] = src[2];
    put(b, 3, 31, 3, 2)?; // across the second
    w1[23] = src[3];
    w2[0] = src[4];
    expect_ok("zero-length WRITE at the end", b.post_send(&a.qp, &[write(4, mkey.rkey, 48, vec![sge(&amr, 0, 0)])]))?;
    ok_cqe(b, &a.cq, 4, wc_opcode::RDMA_WRITE)?;
    let got = (contents(b, &b0)?, contents(b, &b1)?, contents(b, &b2)?);
    check_eq("the three MRs", got, (w0.clone(), w1.clone(), w2.clone()))?;
    // READ all 48 bytes back, in entry order.
    expect_ok("READ of the whole mkey", b.post_send(&a.qp, &[read(5, mkey.rkey, 0, vec![sge(&amr, 0, 48)])]))?;
    check_eq("READ byte_len", ok_cqe(b, &a.cq, 5, wc_opcode::RDMA_READ)?.byte_len, 48)?;
    let mut awant = src.clone();
    awant[..16].copy_from_slice(&w0);
    awant[16..32].copy_from_slice(&w1[8..24]);
    awant[32..48].copy_from_slice(&w2);
    check_eq("client buffer after READ", contents(b, &abuf)?, awant.clone())?;
    fails_with(
        b,
        &a,
        &s,
        "WRITE one byte past the last entry",
        write(6, mkey.rkey, 48, vec![sge(&amr, 0, 1)]),
        wc_status::REM_ACCESS_ERR,
    )?;
    fails_with(
        b,
        &a,
        &s,
        "READ of the last byte and one past",
        read(7, mkey.rkey, 47, vec![sge(&amr, 0, 2)]),
        wc_status::REM_ACCESS_ERR,
    )?;
    // Without the MRs of its neighbours an entry is still reachable edge to edge: an access
    // looks only at the entries it touches.
    expect_ok("ibv_dereg_mr of the first entry's MR", b.dereg_mr(&m0))?;
    expect_ok("ibv_dereg_mr of the last entry's MR", b.dereg_mr(&m2))?;
    // The READ left the client's first 48 bytes as the mkey's; the rest is still `src`.
    put(b, 8, 16, 48, 16)?; // exactly the middle entry
    w1[8..24].copy_from_slice(&src[48..64]);
    put(b, 9, 16, 63, 1)?; // its first byte
    w1[8] = src[63];
    put(b, 10, 31, 48, 1)?; // its last byte
    w1[23] = src[48];
    check_eq("the middle entry's MR", contents(b, &b1)?, w1.clone())?;
    fails_with(
        b,
        &a,
        &s,
        "WRITE of the byte before the middle entry",
        write(11, mkey.rkey, 15, vec![sge(&amr, 0, 2)]),
        wc_status::REM_ACCESS_ERR,
    )?;
    fails_with(
        b,
        &a,
        &s,
        "WRITE of the byte after the middle entry",
        write(12, mkey.rkey, 31, vec![sge(&amr, 0, 2)]),
        wc_status::REM_ACCESS_ERR,
    )?;
    check_eq("the middle entry's MR after the errors", contents(b, &b1)?, w1)?;
    check_eq("the other MRs' buffers", (contents(b, &b0)?, contents(b, &b2)?), (w0, w2))
}

/// Indirect mkeys nested `DEPTH + 1` deep over one MR: the MR at depth 4 below the key named
/// is reached, one level more is refused.
const DEPTH: usize = 4;

fn nesting(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (buf, mr) = entry_region(b, s.pd, 16, &pattern(16, 7))?;
    let rw = A::LOCAL_WRITE | A::REMOTE_WRITE;
    // keys[0] maps the MR; keys[i] maps all 16 bytes of keys[i - 1].
    let mut keys: Vec<Mkey> = Vec::new();
    for _ in 0..=DEPTH {
        let m = entry_mkey(b, s.pd)?;
        let entry = match keys.last() {
            None => sge(&mr, 0, 16),
            // §12.15: an mkey's lkey is its rkey; entries are zero-based (§12.30).
            Some(inner) => Sge { addr: 0, length: 16, lkey: inner.lkey },
        };
        configure_list(b, &s, &m, rw, vec![entry])?;
        keys.push(m);
    }
    let (_abuf, amr) = region(b, a.pd, 16, &pattern(16, 8), A::LOCAL_WRITE)?;
    let mut want = pattern(16, 7);
    for (i, m) in keys.iter().take(DEPTH).enumerate() {
        let at = i as u64 * 3;
        let what = format!("WRITE through {} nested mkeys", i + 1);
        expect_ok(&what, b.post_send(&a.qp, &[write(i as u64, m.rkey, at, vec![sge(&amr, at, 3)])]))?;
        ok_cqe(b, &a.cq, i as u64, wc_opcode::RDMA_WRITE)?;
        want[at as usize..at as usize + 3].copy_from_slice(&pattern(16, 8)[at as usize..at as usize + 3]);
    }
    check_eq("the MR under the nested mkeys", contents(b, &buf)?, want.clone())?;
    // How deep hardware nests is not published; the simulator stops below depth 4.
    if env.caps.sim_control {
        let over = keys.last().map_or(0, |m| m.rkey);
        let what = "WRITE through one nested mkey more than the limit";
        fails_with(b, &a, &s, what, write(9, over, 0, vec![sge(&amr, 0, 16)]), wc_status::REM_ACCESS_ERR)?;
        check_eq("the MR after the refused WRITE", contents(b, &buf)?, want)?;
    }
    Ok(())
}

/// Every status an error CQE reports, in `mlx5_handle_error_cqe` order; `GENERAL_ERR` is the
/// syndromes the provider does not name.
const STATUSES: [u32; 14] = [
    wc_status::LOC_LEN_ERR,
    wc_status::LOC_QP_OP_ERR,
    wc_status::LOC_PROT_ERR,
    wc_status::WR_FLUSH_ERR,
    wc_status::MW_BIND_ERR,
    wc_status::BAD_RESP_ERR,
    wc_status::LOC_ACCESS_ERR,
    wc_status::REM_INV_REQ_ERR,
    wc_status::REM_ACCESS_ERR,
    wc_status::REM_OP_ERR,
    wc_status::RETRY_EXC_ERR,
    wc_status::RNR_RETRY_EXC_ERR,
    wc_status::REM_ABORT_ERR,
    wc_status::GENERAL_ERR,
];

/// `ibv_wc_status` values no mlx5 error CQE reports (EE contexts, RDD, fatal, timeouts).
const NEVER_REPORTED: [u32; 7] = [3, 14, 15, 17, 18, 19, 20];

/// A completion fault on the next RDMA WRITE.
fn fault(status: u32, vendor_err: u32) -> FaultRule {
    FaultRule::Completion { wqe_opcode: RDMA_WRITE, status, vendor_err, skip: 0, times: 1 }
}

fn syndromes(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (sbuf, smr) = region(b, s.pd, 16, &pattern(16, 1), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let (_abuf, amr) = region(b, a.pd, 16, &pattern(16, 2), A::LOCAL_WRITE)?;
    // Each status with its own vendor syndrome, the 8-bit extremes among them.
    for (i, status) in STATUSES.into_iter().enumerate() {
        let vendor_err = match i {
            0 => 0,
            1 => 0xff,
            _ => 0x40 + i as u32,
        };
        expect_ok(&format!("a completion fault with status {status}"), ctl(b)?.add_fault(fault(status, vendor_err)))?;
        let wr_id = 100 + i as u64;
        expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(wr_id, smr.rkey, smr.addr, vec![sge(&amr, 0, 16)])]))?;
        let wc = poll(b, &a.cq, 1)?.remove(0);
        check_eq(
            &format!("(wr_id, status, vendor_err) of a CQE faulted with status {status}"),
            (wc.wr_id, wc.status, wc.vendor_err),
            (wr_id, status, vendor_err),
        )?;
        check_eq("requester state", expect_ok("ibv_query_qp", b.query_qp_state(&a.qp))?, QpState::Err)?;
        reconnect(b, &a, &s)?;
    }
    check_eq("the faulted WRITEs moved nothing", contents(b, &sbuf)?, pattern(16, 1))?;
    // Rules no error CQE can carry out.
    for status in NEVER_REPORTED.into_iter().chain([wc_status::SUCCESS]) {
        expect_errno(&format!("a completion fault with status {status}"), ctl(b)?.add_fault(fault(status, 1)), EINVAL)?;
    }
    expect_errno("a vendor_err wider than 8 bits", ctl(b)?.add_fault(fault(wc_status::REM_OP_ERR, 0x100)), EINVAL)?;
    // None of the refused rules acts: the next WRITE succeeds.
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(1, smr.rkey, smr.addr, vec![sge(&amr, 0, 16)])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    check_eq("server buffer", contents(b, &sbuf)?, pattern(16, 2))
}
