//! The data path at its limits: remote invalidation after placement (§12.84), the port's
//! largest message (§12.90), an interleaved stride that wraps to 0 (§12.91), a signature
//! mkey addressed far past its end (§12.92), and a QP connected to itself (§12.93).

use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, MkeyConfFlags, MkeyInitFlags as F, MrInterleaved, QpCap, SendFlags,
    Sge, SigBlockAttr, SigBlockAttrFlags, SigBlockDomain, SigT10dif, WrOp, dv_qp, sig, wc_flags, wc_opcode, wc_status,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "engine.send_with_inv_into_the_mkey_it_invalidates",
        covers: &[84],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: send_inv_into_own_mkey,
    },
    Case {
        name: "engine.message_above_max_msg_sz_is_a_length_error",
        covers: &[90],
        needs: &[Need::Mlx5Device],
        run: above_max_msg_sz,
    },
    Case {
        name: "engine.interleaved_stride_wrapping_to_zero",
        covers: &[91],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: stride_wraps,
    },
    Case {
        name: "engine.write_far_past_a_signature_mkey_is_refused",
        covers: &[92],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCaps],
        run: far_past_sig_mkey,
    },
    Case {
        name: "engine.self_connected_qp_completes_a_wr_once",
        covers: &[93],
        needs: &[Need::Mlx5Device],
        run: self_connected,
    },
];

/// The largest message an mlx5 port takes (`max_msg_sz`).
const MAX_MSG: u32 = 1 << 30;

fn send_inv_into_own_mkey(b: &mut dyn Backend, env: &Env) -> Check {
    for len in [0u32, 16] {
        let (a, s) = pair(b, env, false, dv_qp::CREATE_DISABLE_SCATTER_TO_CQE)?;
        let (buf, mr) = region(b, s.pd, 64, &pattern(64, 1), A::LOCAL_WRITE)?;
        let mkey = indirect_mkey(b, s.pd, F::INDIRECT | F::REMOTE_INVALIDATE, 4)?;
        configure_list(b, &s, &mkey, A::LOCAL_WRITE | A::REMOTE_WRITE, vec![sge(&mr, 0, 64)])?;
        let (_abuf, amr) = region(b, a.pd, 16, &pattern(16, 2), A::LOCAL_WRITE)?;
        recv(b, &s.qp, 5, vec![Sge { addr: 8, length: 16, lkey: mkey.lkey }])?;
        let payload = if len == 0 { vec![] } else { vec![sge(&amr, 0, len)] };
        let send = WrOp::SendInv { wr_id: 3, flags: SendFlags::SIGNALED, invalidate_rkey: mkey.rkey, sge: payload };
        expect_ok(&format!("SEND_WITH_INV of {len} bytes into the mkey it invalidates"), b.post_send(&a.qp, &[send]))?;
        ok_cqe(b, &a.cq, 3, wc_opcode::SEND)?;
        let rwc = ok_cqe(b, &s.cq, 5, wc_opcode::RECV)?;
        check_eq(
            "receive (byte_len, WITH_INV, invalidated rkey)",
            (rwc.byte_len, rwc.wc_flags & wc_flags::WITH_INV, rwc.imm_data),
            (len, wc_flags::WITH_INV, mkey.rkey),
        )?;
        let mut want = pattern(64, 1);
        want[8..8 + len as usize].copy_from_slice(&pattern(16, 2)[..len as usize]);
        check_eq("the payload placed through the mkey", contents(b, &buf)?, want)?;
        let again = write(6, mkey.rkey, 0, vec![sge(&amr, 0, 4)]);
        expect_ok("a WRITE through the invalidated mkey", b.post_send(&a.qp, &[again]))?;
        err_cqe(b, &a.cq, 6, wc_status::REM_ACCESS_ERR)?;
    }
    Ok(())
}

fn above_max_msg_sz(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_buf, mr) = region(b, a.pd, 64, &[], A::LOCAL_WRITE)?;
    let (_dst, dmr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let big = Sge { addr: mr.addr, length: MAX_MSG + 1, lkey: mr.lkey };
    expect_ok("RDMA WRITE of max_msg_sz + 1 bytes", b.post_send(&a.qp, &[write(1, dmr.rkey, dmr.addr, vec![big])]))?;
    err_cqe(b, &a.cq, 1, wc_status::LOC_LEN_ERR).map(drop)
}

/// An interleaved mkey over the first byte of `mr`: 1 byte taken, 0xffff skipped (a stride
/// of 0x10000, 0 in the WQE's 16 bits), u32::MAX repetitions.
fn still_mkey(b: &mut dyn Backend, side: &Side, mr: &mlx5_dv::Mr) -> Check<mlx5_dv::Mkey> {
    let mkey = indirect_mkey(b, side.pd, F::INDIRECT, 4)?;
    let op = WrOp::MrInterleaved {
        wr_id: 0xc0f,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        mkey,
        access: A::LOCAL_WRITE | A::REMOTE_WRITE,
        repeat_count: u32::MAX,
        entries: vec![MrInterleaved { addr: mr.addr, bytes_count: 1, bytes_skip: 0xffff, lkey: mr.lkey }],
    };
    expect_ok("mlx5dv_wr_mr_interleaved", b.post_send(&side.qp, &[op]))?;
    ok_cqe(b, &side.cq, 0xc0f, wc_opcode::DRIVER1)?;
    Ok(mkey)
}

fn stride_wraps(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_sbuf, smr) = region(b, a.pd, 64, &[0x5a; 64], A::LOCAL_WRITE)?;
    let (dbuf, dmr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE)?;
    let src = still_mkey(b, &a, &smr)?;
    let dst = still_mkey(b, &s, &dmr)?;
    // The largest message, read from one byte and written to one byte.
    let all = Sge { addr: 0, length: MAX_MSG, lkey: src.lkey };
    expect_ok("RDMA WRITE of max_msg_sz bytes", b.post_send(&a.qp, &[write(1, dst.rkey, 0, vec![all])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let got = contents(b, &dbuf)?;
    check_eq("every repetition lands on the first byte", (got[0], got[1]), (0x5a, 0))
}

fn far_past_sig_mkey(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let cq2 = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 512 };
    let flags = dv_qp::CREATE_DISABLE_SCATTER_TO_CQE;
    let qa = expect_ok("client QP", b.create_qp(&qp_attr(pd, &cq, flags, cap)))?;
    let qb = expect_ok("server QP", b.create_qp(&qp_attr(pd, &cq2, flags, cap)))?;
    connect(b, &qa, ctx, &qb)?;
    connect(b, &qb, ctx, &qa)?;
    // Memory: T10-DIF over 512-byte blocks (520 bytes each), no wire signature; 4 blocks.
    let len = 4 * 520;
    let (buf, mr) = region(b, pd, len, &vec![0xee; len], A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4)?;
    let mem = SigBlockDomain::t10dif(sig::BLOCK_512, SigT10dif::default());
    let attr = SigBlockAttr {
        mem: Some(mem),
        wire: None,
        flags: SigBlockAttrFlags::empty(),
        check_mask: 0xff,
        copy_mask: 0,
        comp_mask: 0,
    };
    let chain = [
        WrOp::MkeyConfigure {
            wr_id: 0x51,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey,
            num_setters: 3,
            conf_flags: MkeyConfFlags::empty(),
            comp_mask: 0,
        },
        WrOp::SetMkeyAccessFlags(A::LOCAL_WRITE | A::REMOTE_WRITE),
        WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, len as u32)]),
        WrOp::SetMkeySigBlock(attr),
    ];
    expect_ok("configure", b.post_send(&qb, &chain))?;
    ok_cqe(b, &cq2, 0x51, wc_opcode::DRIVER1)?;
    let (_src, smr) = region(b, pd, 512, &[1; 512], A::LOCAL_WRITE)?;
    // Wire block 35474507834056832: 520 times that wraps a 64-bit address to 1024.
    let far = 35_474_507_834_056_832u64 * 512;
    expect_ok("RDMA WRITE far past the mkey", b.post_send(&qa, &[write(1, mkey.rkey, far, vec![sge(&smr, 0, 512)])]))?;
    err_cqe(b, &cq, 1, wc_status::REM_ACCESS_ERR)?;
    check_eq("the responder's memory", contents(b, &buf)?, vec![0xee; len])
}

fn self_connected(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let qp = expect_ok("create the QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &qp, ctx, &qp)?;
    let (_buf, mr) = region(b, pd, 64, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let bad = write(1, mr.rkey ^ 0x100, mr.addr, vec![sge(&mr, 0, 16)]);
    let good = write(2, mr.rkey, mr.addr, vec![sge(&mr, 16, 16)]);
    expect_ok("a WRITE with a bad rkey, then a good one", b.post_send(&qp, &[bad, good]))?;
    let wcs = poll(b, &cq, 2)?;
    check_eq(
        "one completion per WR",
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, wc_status::REM_ACCESS_ERR), (2, wc_status::WR_FLUSH_ERR)],
    )?;
    no_cqe(b, &cq)
}
