//! QPs, CQs and the WR chain: §12.18–20 and §12.23, the state machine, CQ sizing.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, Backend, DvQpCreateFlags, DvQpInitAttr, DvQpInitMask, DvSendOpsFlags, MkeyConfFlags, QpCap,
    QpInitAttr, QpModify, QpState, SendFlags, SendOpsFlags, WrOp, dv_qp, qp_type, send_ops, wc_opcode,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "cq.capacity_rounds_to_power_of_two_minus_one",
        covers: &[],
        needs: &[Need::Mlx5Device],
        run: cq_rounding,
    },
    Case { name: "qp.mkey_ops_only_on_rc", covers: &[18], needs: &[Need::Mlx5Device], run: mkey_ops_only_on_rc },
    Case {
        name: "qp.any_dv_send_op_installs_mkey_ops",
        covers: &[18],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: any_dv_op_installs,
    },
    Case { name: "qp.create_flag_checks", covers: &[18], needs: &[Need::Mlx5Device], run: create_flag_checks },
    Case {
        name: "qp.umr_overhead_and_max_inline_written_back",
        covers: &[19],
        needs: &[Need::Mlx5Device],
        run: umr_overhead,
    },
    Case { name: "qp.state_machine", covers: &[], needs: &[Need::Mlx5Device], run: state_machine },
    Case { name: "wr.complete_einval_until_rts", covers: &[20], needs: &[Need::Mlx5Device], run: einval_until_rts },
    Case {
        name: "wr.first_error_posts_nothing",
        covers: &[20],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: first_error_posts_nothing,
    },
    Case { name: "wr.send_queue_full_is_enomem", covers: &[23], needs: &[Need::Mlx5Device], run: sq_full },
    Case {
        name: "qp.cq_of_another_context_is_einval",
        covers: &[336],
        needs: &[Need::Mlx5Device],
        run: cq_of_another_context,
    },
];

fn cq_rounding(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    for (asked, got) in [(1, 1), (2, 3), (3, 3), (4, 7), (16, 31), (31, 31), (32, 63), (1000, 1023)] {
        let cq = expect_ok(&format!("ibv_create_cq({asked})"), b.create_cq(ctx, asked))?;
        check_eq(&format!("cq->cqe for {asked}"), cq.cqe, got)?;
        expect_ok("ibv_destroy_cq", b.destroy_cq(&cq))?;
    }
    expect_errno("ibv_create_cq(0)", b.create_cq(ctx, 0), EINVAL)?;
    expect_errno("ibv_create_cq(2^24)", b.create_cq(ctx, 1 << 24), EINVAL)
}

fn attr(pd: mlx5_dv::PdHandle, cq: &mlx5_dv::Cq, ty: u32, ops: SendOpsFlags, dv: Option<DvQpInitAttr>) -> QpInitAttr {
    QpInitAttr { qp_type: ty, send_ops_flags: ops, ..QpInitAttr::rc(pd, cq.handle, CAP, dv) }
}

fn dv_ops(flags: DvSendOpsFlags) -> Option<DvQpInitAttr> {
    Some(DvQpInitAttr {
        comp_mask: dv_qp::MASK_SEND_OPS_FLAGS,
        create_flags: DvQpCreateFlags::empty(),
        send_ops_flags: flags,
        dc: Default::default(),
    })
}

fn mkey_ops_only_on_rc(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let rc = expect_ok(
        "RC with MKEY_CONFIGURE",
        b.create_qp(&attr(pd, &cq, qp_type::RC, send_ops::RC_DEFAULT, dv_ops(dv_qp::WITH_MKEY_CONFIGURE))),
    )?;
    expect_ok("destroy", b.destroy_qp(&rc))?;
    for (name, ty, ops) in [("UC", qp_type::UC, send_ops::SEND), ("UD", qp_type::UD, send_ops::SEND)] {
        for flag in [dv_qp::WITH_MKEY_CONFIGURE, dv_qp::WITH_MR_LIST, dv_qp::WITH_MR_INTERLEAVED, dv_qp::WITH_MEMCPY] {
            let r = b.create_qp(&attr(pd, &cq, ty, ops, dv_ops(flag)));
            expect_errno(&format!("{name} QP with mlx5dv send op 0x{flag:x}"), r, EOPNOTSUPP)?;
        }
        let q = expect_ok(
            &format!("{name} QP with RAW_WQE only"),
            b.create_qp(&attr(pd, &cq, ty, ops, dv_ops(dv_qp::WITH_RAW_WQE))),
        )?;
        expect_ok("destroy", b.destroy_qp(&q))?;
    }
    expect_errno(
        "RC QP with an unknown mlx5dv send op",
        b.create_qp(&attr(
            pd,
            &cq,
            qp_type::RC,
            send_ops::RC_DEFAULT,
            dv_ops(DvSendOpsFlags::from_bits_retain(1 << 5)),
        )),
        EOPNOTSUPP,
    )?;
    expect_errno(
        "UD QP with RDMA_WRITE",
        b.create_qp(&attr(pd, &cq, qp_type::UD, send_ops::SEND | send_ops::RDMA_WRITE, None)),
        EOPNOTSUPP,
    )
}

fn any_dv_op_installs(b: &mut dyn Backend, env: &Env) -> Check {
    // RAW_WQE alone still installs every mkey builder on an RC QP.
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let qp = expect_ok(
        "RC QP with RAW_WQE only",
        b.create_qp(&attr(pd, &cq, qp_type::RC, send_ops::RC_DEFAULT, dv_ops(dv_qp::WITH_RAW_WQE))),
    )?;
    let peer = expect_ok("peer QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &qp, ctx, &peer)?;
    connect(b, &peer, ctx, &qp)?;
    let mkey = indirect_mkey(b, pd, mlx5_dv::MkeyInitFlags::INDIRECT, 4)?;
    let op = WrOp::MkeyConfigure {
        wr_id: 5,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        mkey,
        num_setters: 0,
        conf_flags: MkeyConfFlags::empty(),
        comp_mask: 0,
    };
    expect_ok("mkey configure on an RC QP created with RAW_WQE", b.post_send(&qp, &[op]))?;
    ok_cqe(b, &cq, 5, wc_opcode::DRIVER1).map(drop)
}

fn create_flag_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let with = |create_flags: DvQpCreateFlags, comp_mask: DvQpInitMask| {
        attr(
            pd,
            &cq,
            qp_type::RC,
            send_ops::RC_DEFAULT,
            Some(DvQpInitAttr {
                comp_mask,
                create_flags,
                send_ops_flags: DvSendOpsFlags::empty(),
                dc: Default::default(),
            }),
        )
    };
    let both = dv_qp::CREATE_DISABLE_SCATTER_TO_CQE | dv_qp::CREATE_ALLOW_SCATTER_TO_CQE;
    expect_errno(
        "DISABLE and ALLOW_SCATTER_TO_CQE together",
        b.create_qp(&with(both, dv_qp::MASK_QP_CREATE_FLAGS)),
        EINVAL,
    )?;
    expect_errno(
        "unknown create flag 1<<20",
        b.create_qp(&with(DvQpCreateFlags::from_bits_retain(1 << 20), dv_qp::MASK_QP_CREATE_FLAGS)),
        EINVAL,
    )?;
    expect_errno(
        "unknown dv comp_mask 1<<9",
        b.create_qp(&with(DvQpCreateFlags::empty(), DvQpInitMask::from_bits_retain(1 << 9))),
        EINVAL,
    )?;
    expect_errno("DC mask on an RC QP", b.create_qp(&with(DvQpCreateFlags::empty(), dv_qp::MASK_DC)), EINVAL)?;
    let q = expect_ok(
        "DISABLE_SCATTER_TO_CQE",
        b.create_qp(&with(dv_qp::CREATE_DISABLE_SCATTER_TO_CQE, dv_qp::MASK_QP_CREATE_FLAGS)),
    )?;
    expect_ok("destroy", b.destroy_qp(&q))?;
    let sig = b.create_qp(&with(dv_qp::CREATE_SIG_PIPELINING, dv_qp::MASK_QP_CREATE_FLAGS));
    match env.caps.kernel.sqd2rts {
        Some(true) => expect_ok("SIG_PIPELINING on a kernel with SQD2RTS", sig)
            .and_then(|q| expect_ok("destroy", b.destroy_qp(&q))),
        Some(false) => expect_errno("SIG_PIPELINING without SQD2RTS", sig, EOPNOTSUPP),
        None => Ok(()),
    }
}

fn umr_overhead(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    // (send ops, mlx5 ops, max_send_sge, inline asked, max_inline_data back, max_send_wr asked, back):
    // WQE = align64(max(overhead + 16 * sge, overhead + align16(4 + inline))); overhead 192 with
    // LOCAL_INV or mkey ops, 32 with RDMA only, 16 for SEND; max_post = pow2(wr * WQE) / WQE.
    let table: [(SendOpsFlags, DvSendOpsFlags, u32, u32, u32, u32, u32); 6] = [
        (send_ops::RC_DEFAULT, dv_qp::WITH_MKEY_CONFIGURE, 1, 0, 60, 16, 16),
        (send_ops::RC_DEFAULT, dv_qp::WITH_MKEY_CONFIGURE, 4, 0, 60, 10, 16),
        (send_ops::RC_DEFAULT, dv_qp::WITH_MKEY_CONFIGURE, 1, 512, 572, 16, 21),
        (send_ops::RC_DEFAULT, DvSendOpsFlags::empty(), 1, 0, 60, 16, 16),
        (send_ops::SEND | send_ops::RDMA_WRITE, DvSendOpsFlags::empty(), 1, 0, 28, 16, 16),
        (send_ops::SEND, DvSendOpsFlags::empty(), 1, 0, 44, 3, 4),
    ];
    for (ops, mops, sge, inl, want, wr, wr_out) in table {
        let cap = QpCap { max_send_wr: wr, max_recv_wr: 4, max_send_sge: sge, max_recv_sge: 1, max_inline_data: inl };
        let a = QpInitAttr { cap, ..attr(pd, &cq, qp_type::RC, ops, dv_ops(mops)) };
        let q = expect_ok("create_qp", b.create_qp(&a))?;
        let what = format!("ops 0x{ops:x}/0x{mops:x}, {sge} SGE, inline {inl}");
        check_eq(&format!("{what}: max_inline_data"), q.cap.max_inline_data, want)?;
        check_eq(&format!("{what}: max_send_wr"), q.cap.max_send_wr, wr_out)?;
        expect_ok("destroy", b.destroy_qp(&q))?;
    }
    Ok(())
}

fn state_machine(b: &mut dyn Backend, env: &Env) -> Check {
    use QpState::*;
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let q = expect_ok("create", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let peer = expect_ok("create peer", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let to_peer = dest(b, ctx, &peer)?;
    check_eq("a new QP", expect_ok("query", b.query_qp_state(&q))?, Reset)?;
    for bad in [Rtr, Rts, Sqd] {
        expect_errno(&format!("RESET -> {bad:?}"), b.modify_qp(&q, &QpModify::to(bad)), EINVAL)?;
    }
    expect_ok("RESET -> INIT", b.modify_qp(&q, &QpModify { state: Init, access: QP_ACCESS, dest: None, ext: None }))?;
    expect_errno("INIT -> RTS", b.modify_qp(&q, &QpModify::to(Rts)), EINVAL)?;
    expect_errno("INIT -> RTR without the remote QP", b.modify_qp(&q, &QpModify::to(Rtr)), EINVAL)?;
    expect_ok(
        "INIT -> RTR",
        b.modify_qp(&q, &QpModify { state: Rtr, access: QP_ACCESS, dest: Some(to_peer), ext: None }),
    )?;
    expect_errno(
        "RTR -> INIT",
        b.modify_qp(&q, &QpModify { state: Init, access: QP_ACCESS, dest: None, ext: None }),
        EINVAL,
    )?;
    expect_ok("RTR -> RTS", b.modify_qp(&q, &QpModify::to(Rts)))?;
    check_eq("after RTS", expect_ok("query", b.query_qp_state(&q))?, Rts)?;
    expect_ok("RTS -> ERR", b.modify_qp(&q, &QpModify::to(Err)))?;
    expect_errno("ERR -> RTS", b.modify_qp(&q, &QpModify::to(Rts)), EINVAL)?;
    expect_ok("ERR -> RESET", b.modify_qp(&q, &QpModify::to(Reset)))?;
    check_eq("after RESET", expect_ok("query", b.query_qp_state(&q))?, Reset)?;
    let bad = QpModify { state: Init, access: AccessFlags::MW_BIND, dest: None, ext: None };
    expect_errno("INIT with qp_access_flags MW_BIND", b.modify_qp(&q, &bad), EINVAL)
}

fn einval_until_rts(b: &mut dyn Backend, env: &Env) -> Check {
    use QpState::*;
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let q = expect_ok("create", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let peer = expect_ok("create peer", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let to_peer = dest(b, ctx, &peer)?;
    let (buf, mr) = region(b, pd, 64, &pattern(64, 1), QP_ACCESS)?;
    let w = || write(1, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 8)]);
    expect_errno("post in RESET", b.post_send(&q, &[w()]), EINVAL)?;
    expect_ok("INIT", b.modify_qp(&q, &QpModify { state: Init, access: QP_ACCESS, dest: None, ext: None }))?;
    expect_errno("post in INIT", b.post_send(&q, &[w()]), EINVAL)?;
    expect_ok("RTR", b.modify_qp(&q, &QpModify { state: Rtr, access: QP_ACCESS, dest: Some(to_peer), ext: None }))?;
    expect_errno("post in RTR", b.post_send(&q, &[w()]), EINVAL)?;
    connect(b, &peer, ctx, &q)?;
    expect_ok("RTS", b.modify_qp(&q, &QpModify::to(Rts)))?;
    expect_ok("post in RTS", b.post_send(&q, &[w()]))?;
    ok_cqe(b, &cq, 1, wc_opcode::RDMA_WRITE)?;
    expect_ok("RESET", b.modify_qp(&q, &QpModify::to(Reset)))?;
    expect_ok("INIT", b.modify_qp(&q, &QpModify { state: Init, access: QP_ACCESS, dest: None, ext: None }))?;
    expect_ok("RTR", b.modify_qp(&q, &QpModify { state: Rtr, access: QP_ACCESS, dest: Some(to_peer), ext: None }))?;
    expect_errno("post after RESET, before RTS again", b.post_send(&q, &[w()]), EINVAL)?;
    expect_ok("RTS", b.modify_qp(&q, &QpModify::to(Rts)))?;
    expect_ok("post in RTS again", b.post_send(&q, &[w()]))?;
    ok_cqe(b, &cq, 1, wc_opcode::RDMA_WRITE)?;
    let got = contents(b, &buf)?;
    let mut want = pattern(64, 1);
    want.copy_within(0..8, 32);
    check_eq("the buffer after two writes", got, want)
}

fn first_error_posts_nothing(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, _s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (buf, mr) = region(b, a.pd, 64, &pattern(64, 2), QP_ACCESS)?;
    let before = contents(b, &buf)?;
    let mkey = indirect_mkey(b, a.pd, mlx5_dv::MkeyInitFlags::INDIRECT, 4)?;
    // A setter outside a configure records EINVAL; the valid write before it is not posted.
    let chain = [
        write(1, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 8)]),
        WrOp::SetMkeyAccessFlags(AccessFlags::empty()),
        write(2, mr.rkey, mr.addr + 40, vec![sge(&mr, 8, 8)]),
    ];
    expect_errno("chain with a stray setter", b.post_send(&a.qp, &chain), EINVAL)?;
    // An unsupported configure records EOPNOTSUPP.
    let bad = WrOp::MkeyConfigure {
        wr_id: 3,
        flags: SendFlags::SIGNALED,
        mkey,
        num_setters: 0,
        conf_flags: MkeyConfFlags::empty(),
        comp_mask: 0,
    };
    expect_errno(
        "chain with a configure lacking IBV_SEND_INLINE",
        b.post_send(&a.qp, &[write(4, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 8)]), bad]),
        EOPNOTSUPP,
    )?;
    no_cqe(b, &a.cq)?;
    check_eq("the target buffer is untouched", contents(b, &buf)?, before)
}

fn sq_full(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let cap = QpCap { max_send_wr: 1, ..CAP };
    let q = expect_ok("create", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), cap)))?;
    let cq2 = expect_ok("cq", b.create_cq(ctx, 64))?;
    let peer = expect_ok("peer", b.create_qp(&qp_attr(pd, &cq2, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &q, ctx, &peer)?;
    connect(b, &peer, ctx, &q)?;
    let (_buf, mr) = region(b, pd, 64, &[], QP_ACCESS)?;
    let n = q.cap.max_send_wr as usize;
    let unsignaled = |i: u64| WrOp::RdmaWrite {
        wr_id: i,
        flags: SendFlags::empty(),
        rkey: mr.rkey,
        remote_addr: mr.addr,
        sge: vec![sge(&mr, 32, 4)],
    };
    let too_many: Vec<_> = (0..=n as u64).map(unsignaled).collect();
    expect_errno(&format!("{} WRs in one chain on a {n}-deep send queue", n + 1), b.post_send(&q, &too_many), ENOMEM)?;
    let exactly: Vec<_> = (0..n as u64).map(unsignaled).collect();
    expect_ok(&format!("{n} unsignalled WRs"), b.post_send(&q, &exactly))?;
    // Unsignalled WQEs are retired only by a later completion; the queue is full.
    expect_errno("one more", b.post_send(&q, &[unsignaled(99)]), ENOMEM)?;
    no_cqe(b, &cq)
}

fn cq_of_another_context(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let other = expect_ok("a second ibv_open_device", b.open_ibv_device(env.dev()?))?;
    // The kernel looks a CQ's handle up among the QP's own context's objects. Several CQs in
    // the other context make the foreign handle one this context has not given out (it has a
    // PD and a CQ), so real hardware refuses it too instead of finding a CQ of its own.
    let mut foreign = Vec::new();
    for _ in 0..8 {
        foreign.push(expect_ok("ibv_create_cq in the second context", b.create_cq(other, 16))?);
    }
    let theirs = foreign.last().map(|c| c.handle).ok_or_else(|| Verdict::fail("CQs made", 8, 0))?;
    let mut send_foreign = QpInitAttr::rc(pd, cq.handle, CAP, None);
    send_foreign.send_cq = theirs;
    expect_errno("ibv_create_qp with the send CQ of another context", b.create_qp(&send_foreign), EINVAL)?;
    let mut recv_foreign = QpInitAttr::rc(pd, cq.handle, CAP, None);
    recv_foreign.recv_cq = theirs;
    expect_errno("ibv_create_qp with the receive CQ of another context", b.create_qp(&recv_foreign), EINVAL)?;
    let own = expect_ok("ibv_create_qp with both CQs its own", b.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)))?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&own))?;
    for c in &foreign {
        expect_ok("ibv_destroy_cq", b.destroy_cq(c))?;
    }
    expect_ok("ibv_close_device of the second context", b.close_device(other))
}
