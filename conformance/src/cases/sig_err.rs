//! Signature errors (items 45–50): the first bad block's first failing check with the type's
//! value width, one error per arm, and SIG_PIPELINING. Expected values are computed here with
//! the `crc` crate, independently of any backend.

use std::ops::Range;

use crc::{CRC_32_ISCSI, CRC_32_ISO_HDLC, CRC_64_NVME, Crc};
use mlx5_dv::{
    AccessFlags as A, Backend, MkeyErr, MkeyErrType, QpModify, QpState, SendFlags, Sge, SigBlockDomain as D, SigT10dif,
    T10difFlags, WrOp, dv_qp, event_type, sig, wc_opcode,
};

use super::fixture::*;
use super::sig::*;
use crate::case::{Case, Check, Env, Need, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "sig.t10dif_errors_first_error_first", covers: &[45, 47, 48, 49], needs: N, run: t10dif_errors },
    Case { name: "sig.t10dif_csum_guard_app_ref_errors", covers: &[45, 49], needs: N, run: csum_errors },
    Case { name: "sig.crc32_guard_error_is_32_bits_wide", covers: &[45, 49], needs: N, run: crc32_error },
    Case {
        name: "sig.crc32c_guard_error_is_32_bits_wide",
        covers: &[45, 49],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCrc32c],
        run: crc32c_error,
    },
    Case {
        name: "sig.crc64_guard_error_is_64_bits_wide",
        covers: &[45, 49],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCrc64],
        run: crc64_error,
    },
    Case { name: "sig.one_error_per_arm", covers: &[46], needs: N, run: latching },
    Case {
        name: "sig.pipelining_drains_to_sqd",
        covers: &[50],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCaps, Need::Sqd2Rts],
        run: pipelining,
    },
];

/// Receive 4 T10-DIF blocks with `corrupt` applied; return mkey_check's answer.
fn t10_rx_error(b: &mut dyn Backend, env: &Env, corrupt: impl Fn(&mut Vec<u8>)) -> Check<MkeyErr> {
    let (a, s) = sig_pair(b, env)?;
    let (_buf, mr, mkey) = sig_mkey(b, &s, DATA, &[])?;
    configure(
        b,
        &s,
        &mkey,
        &mr,
        Some(wire_only(D::t10dif(sig::BLOCK_512, dif(0x0a0a, 200, sig::FLAG_REF_REMAP)))),
        false,
    )?;
    let mut wire = with_t10(&pattern(DATA, 11), 0x0a0a, 200, true);
    corrupt(&mut wire);
    rx_into(b, &a, &s, &mkey, &wire)?;
    let e = expect_ok("mkey_check", b.mkey_check(&mkey))?;
    check_eq("reported once", expect_ok("mkey_check again", b.mkey_check(&mkey))?, MkeyErr::NONE)?;
    Ok(e)
}

fn t10dif_errors(b: &mut dyn Backend, env: &Env) -> Check {
    let data = pattern(DATA, 11);
    let guard = |i: usize| u64::from(t10_guard(&data[i * BLOCK..(i + 1) * BLOCK], 0));
    let pi = |i: usize| 520 * i + BLOCK;
    // Guard and app tag wrong in block 2: the guard is reported.
    let e = t10_rx_error(b, env, |w| {
        w[pi(2)] ^= 0x80;
        w[pi(2) + 3] ^= 1;
    })?;
    let want = MkeyErr {
        err_type: MkeyErrType::SigBlockBadGuard,
        sig: mlx5_dv::SigErr { expected_value: guard(2), actual_value: guard(2) ^ 0x8000, offset: 2 * 520 },
    };
    check_eq("guard first (16-bit values, offset in wire bytes)", e, want)?;
    // App and ref tag wrong in block 1: the app tag is reported.
    let e = t10_rx_error(b, env, |w| {
        w[pi(1) + 3] ^= 0x10;
        w[pi(1) + 7] ^= 1;
    })?;
    let want = MkeyErr {
        err_type: MkeyErrType::SigBlockBadApptag,
        sig: mlx5_dv::SigErr { expected_value: 0x0a0a, actual_value: 0x0a1a, offset: 520 },
    };
    check_eq("app tag before ref tag", e, want)?;
    // Ref tag wrong in block 1, guard wrong in block 3: block 1 is reported.
    let e = t10_rx_error(b, env, |w| {
        w[pi(1) + 7] ^= 2;
        w[pi(3)] ^= 1;
    })?;
    let want = MkeyErr {
        err_type: MkeyErrType::SigBlockBadReftag,
        sig: mlx5_dv::SigErr { expected_value: 201, actual_value: 203, offset: 520 },
    };
    check_eq("the first bad block wins", e, want)
}

/// Send 4 blocks through a sender mkey with wire domain `d` (so the device's own PI byte
/// order is used), XOR 0x11 into PI bytes `pi_bytes` of block 3, receive into a mkey with the
/// same domain; return the receiver's mkey_check.
fn corrupted_rx(b: &mut dyn Backend, env: &Env, d: D, pi_len: usize, pi_bytes: Range<usize>) -> Check<MkeyErr> {
    let (a, s) = sig_pair(b, env)?;
    let (_sb, smr, smkey) = sig_mkey(b, &a, DATA, &pattern(DATA, 12))?;
    configure(b, &a, &smkey, &smr, Some(wire_only(d)), false)?;
    let mut wire = tx_through(b, &a, &s, &smkey, DATA, (BLOCK + pi_len) * BLOCKS)?;
    let (_buf, mr, mkey) = sig_mkey(b, &s, DATA, &[])?;
    configure(b, &s, &mkey, &mr, Some(wire_only(d)), false)?;
    let pi = (BLOCK + pi_len) * 3 + BLOCK;
    for byte in &mut wire[pi + pi_bytes.start..pi + pi_bytes.end] {
        *byte ^= 0x11;
    }
    rx_into(b, &a, &s, &mkey, &wire)?;
    expect_ok("mkey_check", b.mkey_check(&mkey))
}

/// The error block 3 must report: `value` expected, `value` with each of its `width` bytes
/// XORed with 0x11 actual.
fn block3_error(err_type: MkeyErrType, value: u64, width: usize, pi_len: usize) -> MkeyErr {
    let flipped = 0x1111_1111_1111_1111u64 >> (64 - 8 * width);
    MkeyErr {
        err_type,
        sig: mlx5_dv::SigErr {
            expected_value: value,
            actual_value: value ^ flipped,
            offset: 3 * (BLOCK + pi_len) as u64,
        },
    }
}

/// Corrupt every guard byte of block 3: the guard error has values `guard_len` bytes wide.
fn guard_error(b: &mut dyn Backend, env: &Env, d: D, pi_len: usize, guard_len: usize, guard: u64) -> Check {
    let e = corrupted_rx(b, env, d, pi_len, 0..guard_len)?;
    let want = block3_error(MkeyErrType::SigBlockBadGuard, guard, guard_len, pi_len);
    check_eq(&format!("guard error ({guard_len}-byte values, offset in wire bytes)"), e, want)
}

fn last_block() -> Vec<u8> {
    pattern(DATA, 12)[3 * BLOCK..].to_vec()
}

fn crc32_error(b: &mut dyn Backend, env: &Env) -> Check {
    let crc = Crc::<u32>::new(&CRC_32_ISO_HDLC).checksum(&last_block());
    guard_error(b, env, D::crc(sig::BLOCK_512, sig::CRC32, 0xffff_ffff), 4, 4, u64::from(crc))
}

fn crc32c_error(b: &mut dyn Backend, env: &Env) -> Check {
    let crc = Crc::<u32>::new(&CRC_32_ISCSI).checksum(&last_block());
    guard_error(b, env, D::crc(sig::BLOCK_512, sig::CRC32C, 0xffff_ffff), 4, 4, u64::from(crc))
}

fn crc64_error(b: &mut dyn Backend, env: &Env) -> Check {
    let crc = Crc::<u64>::new(&CRC_64_NVME).checksum(&last_block());
    guard_error(b, env, D::crc(sig::BLOCK_512, sig::CRC64_XP10, u64::MAX), 8, 8, crc)
}

fn csum_errors(b: &mut dyn Backend, env: &Env) -> Check {
    let guard = u16::from_be_bytes(internet_checksum::checksum(&last_block()));
    let d = D::t10dif(sig::BLOCK_512, SigT10dif { bg_type: sig::BG_CSUM, ..dif(3, 4, T10difFlags::empty()) });
    guard_error(b, env, d, 8, 2, u64::from(guard))?;
    let e = corrupted_rx(b, env, d, 8, 2..4)?;
    check_eq("app tag error", e, block3_error(MkeyErrType::SigBlockBadApptag, 3, 2, 8))?;
    let e = corrupted_rx(b, env, d, 8, 4..8)?;
    check_eq("ref tag error", e, block3_error(MkeyErrType::SigBlockBadReftag, 4, 4, 8))
}

fn latching(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let (_buf, mr, mkey) = sig_mkey(b, &s, DATA, &[])?;
    let attr = Some(wire_only(D::t10dif(sig::BLOCK_512, dif(1, 0, T10difFlags::empty()))));
    configure(b, &s, &mkey, &mr, attr, false)?;
    let mut bad = with_t10(&pattern(DATA, 13), 1, 0, false);
    bad[BLOCK] ^= 1;
    rx_into(b, &a, &s, &mkey, &bad)?;
    check_eq("first error", expect_ok("mkey_check", b.mkey_check(&mkey))?.err_type, MkeyErrType::SigBlockBadGuard)?;
    rx_into(b, &a, &s, &mkey, &bad)?;
    check_eq(
        "a second bad transfer before re-arming reports nothing",
        expect_ok("mkey_check", b.mkey_check(&mkey))?,
        MkeyErr::NONE,
    )?;
    // A configure that keeps the attributes re-arms (UMR with the error count, SET_PSV).
    configure(b, &s, &mkey, &mr, None, false)?;
    rx_into(b, &a, &s, &mkey, &bad)?;
    check_eq(
        "after re-arming the error is reported again",
        expect_ok("mkey_check", b.mkey_check(&mkey))?.err_type,
        MkeyErrType::SigBlockBadGuard,
    )
}

fn pipelining(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let cq2 = expect_ok("cq", b.create_cq(ctx, 64))?;
    let flags = dv_qp::CREATE_DISABLE_SCATTER_TO_CQE | dv_qp::CREATE_SIG_PIPELINING;
    let qa = expect_ok("SIG_PIPELINING QP", b.create_qp(&qp_attr(pd, &cq, flags, SIG_CAP)))?;
    let qb = expect_ok("server QP", b.create_qp(&qp_attr(pd, &cq2, dv_qp::CREATE_DISABLE_SCATTER_TO_CQE, SIG_CAP)))?;
    connect(b, &qa, ctx, &qb)?;
    connect(b, &qb, ctx, &qa)?;
    let a = Side { ctx, pd, cq, qp: qa };
    let s = Side { ctx, pd, cq: cq2, qp: qb };
    // Memory CRC32 PI that is wrong: the send side finds it.
    let mut mem = [&pattern(BLOCK, 14)[..], &[0u8; 4]].concat();
    mem[BLOCK] = 0x5a;
    let (_buf, mr, mkey) = sig_mkey(b, &a, BLOCK + 4, &mem)?;
    configure(b, &a, &mkey, &mr, Some(mem_only(D::crc(sig::BLOCK_512, sig::CRC32, 0xffff_ffff))), false)?;
    let (dst, dmr) = region(b, s.pd, BLOCK, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let (_rb, rmr) = region(b, s.pd, 16, &[], A::LOCAL_WRITE)?;
    let (_sb, smr) = region(b, a.pd, 16, &pattern(16, 1), A::LOCAL_WRITE)?;
    recv(b, &s.qp, 0x90, vec![sge(&rmr, 0, 16)])?;
    // As rdma-core's test: an unsignalled data WR and a fenced response, under one wr_id.
    let data_wr = WrOp::RdmaWrite {
        wr_id: 0x92,
        flags: SendFlags::empty(),
        rkey: dmr.rkey,
        remote_addr: dmr.addr,
        sge: vec![Sge { addr: 0, length: BLOCK as u32, lkey: mkey.lkey }],
    };
    let resp = WrOp::Send { wr_id: 0x92, flags: SendFlags::SIGNALED | SendFlags::FENCE, sge: vec![sge(&smr, 0, 16)] };
    expect_ok("data WR", b.post_send(&a.qp, &[data_wr]))?;
    expect_ok("response WR", b.post_send(&a.qp, std::slice::from_ref(&resp)))?;
    let ev = next_async_event(b, a.ctx)?;
    check_eq("event", ev.map(|e| (e.event_type, e.qp_num)), Some((event_type::SQ_DRAINED, Some(a.qp.qp_num))))?;
    check_eq("QP state", expect_ok("query", b.query_qp_state(&a.qp))?, QpState::Sqd)?;
    no_cqe(b, &a.cq)?;
    no_cqe(b, &s.cq)?;
    check_eq("the failed transfer went out before the QP stopped", contents(b, &dst)?, pattern(BLOCK, 14))?;
    check_eq("mkey_check", expect_ok("mkey_check", b.mkey_check(&mkey))?.err_type, MkeyErrType::SigBlockBadGuard)?;
    check_eq(
        "cancelled WRs: the response only, not the transfer the QP stopped after",
        expect_ok("cancel", b.cancel_posted_send_wrs(&a.qp, 0x92))?,
        1,
    )?;
    expect_ok("repost the response", b.post_send(&a.qp, &[resp]))?;
    expect_ok("SQD -> RTS", b.modify_qp(&a.qp, &QpModify::to(QpState::Rts)))?;
    let wcs = poll(b, &a.cq, 2)?;
    let got: Vec<(u64, u32)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    check_eq("client completions: cancelled response (as NOP), reposted response", got, vec![(0x92, 0), (0x92, 0)])?;
    ok_cqe(b, &s.cq, 0x90, wc_opcode::RECV).map(|_| ())
}
