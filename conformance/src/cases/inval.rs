//! Invalidation and scatter-to-CQE: §12.72–74.

use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, MkeyInitFlags as F, SendFlags, Sge, WrOp, dv_qp, wc_flags, wc_opcode,
    wc_status,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "inval.local_inv_frees_the_mkey",
        covers: &[72],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: local_inv,
    },
    Case {
        name: "inval.send_with_inv_frees_a_remote_invalidate_mkey",
        covers: &[73],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: remote_inv,
    },
    Case {
        name: "inval.send_with_inv_needs_remote_invalidate",
        covers: &[73],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: remote_inv_refused,
    },
    Case {
        name: "scatter.disabled_scatter_to_cqe_delivers_through_mkey",
        covers: &[74],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: scatter_disabled,
    },
    // On hardware the provider would memcpy to the SGE offset as a pointer and crash the
    // process, so the failing half runs on the simulator only.
    Case {
        name: "scatter.scatter_to_cqe_misses_the_mkey",
        covers: &[74],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SimControl],
        run: scatter_default,
    },
];

/// A configured indirect mkey over a 64-byte server region; the client writes through it once.
fn configured(
    b: &mut dyn Backend,
    env: &Env,
    flags: F,
) -> Check<(Side, Side, mlx5_dv::Buf, mlx5_dv::Mkey, mlx5_dv::Mr)> {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (buf, mr) = region(b, s.pd, 64, &pattern(64, 1), A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, flags, 4)?;
    configure_list(b, &s, &mkey, A::REMOTE_WRITE | A::LOCAL_WRITE, vec![sge(&mr, 0, 64)])?;
    let (_abuf, amr) = region(b, a.pd, 16, &pattern(16, 2), A::LOCAL_WRITE)?;
    expect_ok("WRITE through the mkey", b.post_send(&a.qp, &[write(1, mkey.rkey, 8, vec![sge(&amr, 0, 16)])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(64, 1);
    want[8..24].copy_from_slice(&pattern(16, 2));
    check_eq("region after the first write", contents(b, &buf)?, want)?;
    Ok((a, s, buf, mkey, amr))
}

/// The same write again must now fail: the mkey is free.
fn write_again_fails(b: &mut dyn Backend, a: &Side, mkey: &mlx5_dv::Mkey, amr: &mlx5_dv::Mr) -> Check {
    expect_ok("the same WRITE again", b.post_send(&a.qp, &[write(2, mkey.rkey, 8, vec![sge(amr, 0, 16)])]))?;
    err_cqe(b, &a.cq, 2, wc_status::REM_ACCESS_ERR).map(drop)
}

fn local_inv(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mkey, amr) = configured(b, env, F::INDIRECT)?;
    let inv = WrOp::LocalInv { wr_id: 9, flags: SendFlags::SIGNALED, invalidate_rkey: mkey.lkey };
    expect_ok("LOCAL_INV", b.post_send(&s.qp, &[inv]))?;
    let wc = ok_cqe(b, &s.cq, 9, wc_opcode::LOCAL_INV)?;
    check_eq("IBV_WC_LOCAL_INV", wc.opcode, 6)?;
    write_again_fails(b, &a, &mkey, &amr)
}

fn remote_inv(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mkey, amr) = configured(b, env, F::INDIRECT | F::REMOTE_INVALIDATE)?;
    let (_rbuf, rmr) = region(b, s.pd, 16, &[], A::LOCAL_WRITE)?;
    recv(b, &s.qp, 5, vec![sge(&rmr, 0, 16)])?;
    let send =
        WrOp::SendInv { wr_id: 3, flags: SendFlags::SIGNALED, invalidate_rkey: mkey.rkey, sge: vec![sge(&amr, 0, 4)] };
    expect_ok("SEND_WITH_INV", b.post_send(&a.qp, &[send]))?;
    ok_cqe(b, &a.cq, 3, wc_opcode::SEND)?;
    let rwc = ok_cqe(b, &s.cq, 5, wc_opcode::RECV)?;
    check_eq(
        "receive (WITH_INV, invalidated rkey)",
        (rwc.wc_flags & wc_flags::WITH_INV, rwc.imm_data),
        (wc_flags::WITH_INV, mkey.rkey),
    )?;
    write_again_fails(b, &a, &mkey, &amr)
}

fn remote_inv_refused(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mkey, amr) = configured(b, env, F::INDIRECT)?;
    let (_rbuf, rmr) = region(b, s.pd, 16, &[], A::LOCAL_WRITE)?;
    recv(b, &s.qp, 5, vec![sge(&rmr, 0, 16)])?;
    let send =
        WrOp::SendInv { wr_id: 3, flags: SendFlags::SIGNALED, invalidate_rkey: mkey.rkey, sge: vec![sge(&amr, 0, 4)] };
    expect_ok("SEND_WITH_INV of an mkey without REMOTE_INVALIDATE", b.post_send(&a.qp, &[send]))?;
    err_cqe(b, &a.cq, 3, wc_status::REM_INV_REQ_ERR).map(drop)
}

/// The server receives a 16-byte SEND through an indirect mkey (zero-based SGE at offset 8).
fn receive_through_mkey(b: &mut dyn Backend, env: &Env, server_flags: DvQpCreateFlags) -> Check<(Vec<u8>, Vec<u8>)> {
    let (a, s) = pair(b, env, false, server_flags)?;
    let (buf, mr) = region(b, s.pd, 64, &pattern(64, 1), A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT, 4)?;
    configure_list(b, &s, &mkey, A::LOCAL_WRITE, vec![sge(&mr, 0, 64)])?;
    let (_abuf, amr) = region(b, a.pd, 16, &pattern(16, 2), A::LOCAL_WRITE)?;
    recv(b, &s.qp, 5, vec![Sge { addr: 8, length: 16, lkey: mkey.lkey }])?;
    expect_ok(
        "SEND of 16 bytes",
        b.post_send(&a.qp, &[WrOp::Send { wr_id: 3, flags: SendFlags::SIGNALED, sge: vec![sge(&amr, 0, 16)] }]),
    )?;
    ok_cqe(b, &a.cq, 3, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &s.cq, 5, wc_opcode::RECV)?;
    check_eq("byte_len", wc.byte_len, 16)?;
    let mut delivered = pattern(64, 1);
    delivered[8..24].copy_from_slice(&pattern(16, 2));
    Ok((contents(b, &buf)?, delivered))
}

fn scatter_disabled(b: &mut dyn Backend, env: &Env) -> Check {
    let (got, delivered) = receive_through_mkey(b, env, dv_qp::CREATE_DISABLE_SCATTER_TO_CQE)?;
    check_eq("with DISABLE_SCATTER_TO_CQE the bytes reach the mkey's memory", got, delivered)
}

fn scatter_default(b: &mut dyn Backend, env: &Env) -> Check {
    let (got, _) = receive_through_mkey(b, env, DvQpCreateFlags::empty())?;
    check_eq(
        "with scatter-to-CQE the provider copies to the SGE offset as an address: the region is untouched",
        got,
        pattern(64, 1),
    )
}
