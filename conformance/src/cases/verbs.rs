//! The plain verbs around the mlx5dv surface, as libibverbs, libmlx5 and the kernel answer them:
//! `sq_sig_all`, `ibv_post_send` (items 103–104), `ibv_create_qp_ex`'s masks (105), the CQ's
//! completion vector (106), what a receive completion says of its sender (107), and the MR
//! access bits libibverbs drops or the VFIO provider refuses (108).

use mlx5_dv::errno::{EINVAL, EIO, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, QpInitAttr, QpModify, QpState, Result as DvResult, SendFlags, SendWr,
    WrOp, link_layer, qp_create_flags, qp_init_mask as M, wc_opcode, wc_status, wr_opcode,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "qp.sq_sig_all_signals_every_wr", covers: &[103], needs: &[Need::Mlx5Device], run: sq_sig_all },
    Case {
        name: "wr.post_send_has_no_state_check_but_max_gs",
        covers: &[104],
        needs: &[Need::Mlx5Device],
        run: post_send_states,
    },
    Case {
        name: "wr.post_send_stops_at_the_failing_wr",
        covers: &[104],
        needs: &[Need::Mlx5Device],
        run: post_send_list,
    },
    Case { name: "qp.create_qp_ex_comp_mask", covers: &[105], needs: &[Need::Mlx5Device], run: create_masks },
    Case {
        name: "cq.comp_vector_past_the_last_is_einval",
        covers: &[106],
        needs: &[Need::Mlx5Device],
        run: comp_vector,
    },
    Case {
        name: "traffic.recv_completion_names_the_sender",
        covers: &[107],
        needs: &[Need::Mlx5Device],
        run: recv_sender,
    },
    Case { name: "mr.optional_access_bits_are_ignored", covers: &[108], needs: &[Need::Mlx5Device], run: optional },
    Case { name: "mr.vfio_access_bits", covers: &[108], needs: &[Need::VfioDevice], run: vfio_access },
];

/// Require a failed list post with `errno` that names WR `index`.
fn expect_bad_wr(what: &str, r: DvResult<()>, errno: i32, index: u32) -> Check {
    expect_errno(what, r.clone(), errno)?;
    check_eq(&format!("{what}: the failing WR"), r.err().and_then(|e| e.bad_wr()), Some(index))
}

/// An RDMA WRITE as `ibv_post_send` takes it.
fn write_wr(wr_id: u64, flags: SendFlags, rkey: u32, remote_addr: u64, sge: Vec<mlx5_dv::Sge>) -> SendWr {
    SendWr { wr_id, opcode: wr_opcode::RDMA_WRITE, send_flags: flags, sge, remote_addr, rkey, ..SendWr::default() }
}

/// A QP created with `sq_sig_all` completes every WR, through the `ibv_wr_*` chain and through
/// `ibv_post_send`; one created without it completes only the signalled ones.
fn sq_sig_all(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let cq2 = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let all = QpInitAttr { sq_sig_all: true, ..qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP) };
    let qp = expect_ok("create a QP with sq_sig_all", b.create_qp(&all))?;
    let legacy = QpInitAttr { comp_mask: Some(M::PD), sq_sig_all: true, ..QpInitAttr::rc(pd, cq.handle, CAP, None) };
    let old = expect_ok("ibv_create_qp with sq_sig_all", b.create_qp(&legacy))?;
    let plain = expect_ok("create a QP without it", b.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)))?;
    let peer = expect_ok("create the peer", b.create_qp(&qp_attr(pd, &cq2, DvQpCreateFlags::empty(), CAP)))?;
    for q in [&qp, &old, &plain] {
        connect(b, q, ctx, &peer)?;
    }
    connect(b, &peer, ctx, &qp)?;
    let (_buf, mr) = region(b, pd, 64, &pattern(64, 3), QP_ACCESS)?;
    let unsignaled = |wr_id| WrOp::RdmaWrite {
        wr_id,
        flags: SendFlags::empty(),
        rkey: mr.rkey,
        remote_addr: mr.addr + 32,
        sge: vec![sge(&mr, 0, 8)],
    };
    expect_ok("an unsignalled WRITE through the chain", b.post_send(&qp, &[unsignaled(1)]))?;
    ok_cqe(b, &cq, 1, wc_opcode::RDMA_WRITE)?;
    let wr = |wr_id| write_wr(wr_id, SendFlags::empty(), mr.rkey, mr.addr + 40, vec![sge(&mr, 8, 8)]);
    expect_ok("an unsignalled WRITE through ibv_post_send", b.post_send_wr(&qp, &[wr(2)]))?;
    ok_cqe(b, &cq, 2, wc_opcode::RDMA_WRITE)?;
    expect_ok("an unsignalled WRITE on the ibv_create_qp QP", b.post_send_wr(&old, &[wr(3)]))?;
    ok_cqe(b, &cq, 3, wc_opcode::RDMA_WRITE)?;
    expect_ok("an unsignalled WRITE without sq_sig_all", b.post_send(&plain, &[unsignaled(4)]))?;
    no_cqe(b, &cq)
}

/// `ibv_post_send` looks at no QP state: only at `qp_state_max_gs`, -1 until the first RTS (so
/// even a WR without SGEs is ENOMEM), the SGE limit from then on, also in ERR, where the WR is
/// flushed; -1 again after RESET.
fn post_send_states(b: &mut dyn Backend, env: &Env) -> Check {
    use QpState::*;
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let cq2 = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let q = expect_ok("create", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let peer = expect_ok("create the peer", b.create_qp(&qp_attr(pd, &cq2, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &peer, ctx, &q)?;
    let (buf, mr) = region(b, pd, 64, &pattern(64, 5), QP_ACCESS)?;
    let none = |wr_id| write_wr(wr_id, SendFlags::SIGNALED, mr.rkey, mr.addr + 32, vec![]);
    let one = |wr_id| write_wr(wr_id, SendFlags::SIGNALED, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 8)]);
    expect_bad_wr("a WR without SGEs on a new QP", b.post_send_wr(&q, &[none(1)]), ENOMEM, 0)?;
    let [init, rtr, rts] = QpModify::connect(QP_ACCESS, dest(b, ctx, &peer)?);
    expect_ok("INIT", b.modify_qp(&q, &init))?;
    expect_bad_wr("a WR without SGEs in INIT", b.post_send_wr(&q, &[none(2)]), ENOMEM, 0)?;
    expect_ok("RTR", b.modify_qp(&q, &rtr))?;
    expect_bad_wr("a WR with one SGE in RTR", b.post_send_wr(&q, &[one(3)]), ENOMEM, 0)?;
    no_cqe(b, &cq)?;
    expect_ok("RTS", b.modify_qp(&q, &rts))?;
    expect_ok("a WR with one SGE in RTS", b.post_send_wr(&q, &[one(4)]))?;
    ok_cqe(b, &cq, 4, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(64, 5);
    want.copy_within(0..8, 32);
    check_eq("the bytes written", contents(b, &buf)?, want)?;
    expect_ok("ERR", b.modify_qp(&q, &QpModify::to(Err)))?;
    expect_ok("a WR in ERR is posted", b.post_send_wr(&q, &[one(5)]))?;
    let wc = err_cqe(b, &cq, 5, wc_status::WR_FLUSH_ERR)?;
    check_eq("the flushed WR's QP", wc.qp_num, q.qp_num)?;
    expect_ok("RESET", b.modify_qp(&q, &QpModify::to(Reset)))?;
    expect_bad_wr("a WR without SGEs after RESET", b.post_send_wr(&q, &[none(6)]), ENOMEM, 0)
}

/// `ibv_post_send` checks each WR in turn — the opcode (EINVAL past libmlx5's table), room in
/// the send queue, the SGE count (both ENOMEM) — and stops at the first that fails, after
/// posting the ones before it.
fn post_send_list(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, _s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_buf, mr) = region(b, a.pd, 64, &pattern(64, 9), QP_ACCESS)?;
    let good = |wr_id| write_wr(wr_id, SendFlags::SIGNALED, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 4)]);
    for bad in [12, wr_opcode::ATOMIC_WRITE, u32::MAX] {
        let wr = SendWr { opcode: bad, ..good(1) };
        expect_bad_wr(&format!("opcode {bad}"), b.post_send_wr(&a.qp, &[wr]), EINVAL, 0)?;
    }
    let max = usize::try_from(a.qp.cap.max_send_sge).unwrap_or(usize::MAX).min(64);
    let too_many = write_wr(11, SendFlags::SIGNALED, mr.rkey, mr.addr, vec![sge(&mr, 0, 1); max + 1]);
    let list = [good(10), too_many, good(12)];
    expect_bad_wr("a list whose second WR has too many SGEs", b.post_send_wr(&a.qp, &list), ENOMEM, 1)?;
    ok_cqe(b, &a.cq, 10, wc_opcode::RDMA_WRITE)?;
    no_cqe(b, &a.cq)?;
    let bad_opcode = SendWr { opcode: 99, ..good(21) };
    expect_bad_wr(
        "a list whose second WR has a bad opcode",
        b.post_send_wr(&a.qp, &[good(20), bad_opcode]),
        EINVAL,
        1,
    )?;
    ok_cqe(b, &a.cq, 20, wc_opcode::RDMA_WRITE)?;
    let depth = a.qp.cap.max_send_wr;
    let unsignaled: Vec<_> = (0..=u64::from(depth))
        .map(|i| write_wr(100 + i, SendFlags::empty(), mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 4)]))
        .collect();
    expect_bad_wr(
        &format!("{} WRs on a {depth}-deep send queue", depth + 1),
        b.post_send_wr(&a.qp, &unsignaled),
        ENOMEM,
        depth,
    )?;
    no_cqe(b, &a.cq)
}

/// `ibv_create_qp_ex`'s `comp_mask` and `create_flags`, in the order libmlx5 and libibverbs
/// look at them.
fn create_masks(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let base = QpInitAttr::rc(pd, cq.handle, CAP, None);
    let with = |mask: u32, create_flags: u32| QpInitAttr { comp_mask: Some(mask), create_flags, ..base };
    let created = |b: &mut dyn Backend, what: &str, a: QpInitAttr| {
        let q = expect_ok(what, b.create_qp(&a))?;
        expect_ok("destroy", b.destroy_qp(&q))
    };
    created(b, "CREATE_FLAGS with create_flags 0", with(M::DEFAULT | M::CREATE_FLAGS, 0))?;
    created(b, "XRCD on an RC QP (the field is not read)", with(M::DEFAULT | M::XRCD, 0))?;
    expect_errno(
        "a comp_mask bit libmlx5 does not know (NULL, errno not set)",
        b.create_qp(&with(M::DEFAULT | 1 << 7, 0)),
        EIO,
    )?;
    expect_errno(
        "MAX_TSO_HEADER on an RC QP (NULL, errno not set)",
        b.create_qp(&with(M::DEFAULT | M::MAX_TSO_HEADER, 0)),
        EIO,
    )?;
    expect_errno("SEND_OPS_FLAGS with RX_HASH", b.create_qp(&with(M::DEFAULT | M::RX_HASH, 0)), EINVAL)?;
    let source_qpn = with(M::DEFAULT | M::CREATE_FLAGS, qp_create_flags::SOURCE_QPN);
    expect_errno("IBV_QP_CREATE_SOURCE_QPN on an RC QP", b.create_qp(&source_qpn), EINVAL)?;
    expect_errno(
        "a create flag libibverbs does not know",
        b.create_qp(&with(M::DEFAULT | M::CREATE_FLAGS, 1 << 20)),
        EINVAL,
    )?;
    expect_errno("IND_TABLE beside a receive CQ", b.create_qp(&with(M::DEFAULT | M::IND_TABLE, 0)), EINVAL)?;
    expect_errno("SEND_OPS_FLAGS without PD", b.create_qp(&with(M::SEND_OPS_FLAGS, 0)), EINVAL)?;
    // PD alone is ibv_create_qp: a QP without the ibv_wr_* API.
    let q = expect_ok("PD alone", b.create_qp(&with(M::PD, 0)))?;
    let (_buf, mr) = region(b, pd, 64, &[], QP_ACCESS)?;
    expect_errno(
        "an ibv_wr_* chain on it",
        b.post_send(&q, &[write(1, mr.rkey, mr.addr, vec![sge(&mr, 0, 4)])]),
        EOPNOTSUPP,
    )?;
    expect_ok("destroy", b.destroy_qp(&q))
}

/// The kernel refuses a completion vector at or past the context's `num_comp_vectors`
/// (a negative C int among them) with EINVAL.
fn comp_vector(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    let cq = expect_ok("ibv_create_cq on vector 0", b.create_cq_on_vector(ctx, 16, 0))?;
    expect_ok("ibv_destroy_cq", b.destroy_cq(&cq))?;
    for v in [1 << 20, u32::MAX] {
        expect_errno(&format!("ibv_create_cq on vector {}", v as i32), b.create_cq_on_vector(ctx, 16, v), EINVAL)?;
    }
    Ok(())
}

/// A receive completion of an RC QP names the sending QP and the sender's LID; its P_Key
/// index is read from the word that holds the immediate data.
fn recv_sender(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let port = expect_ok("ibv_query_port", b.query_port(a.ctx, 1))?;
    // 64 bytes: more than a CQE holds, so no payload lies over the sender's fields.
    let (_sb, smr) = region(b, a.pd, 64, &pattern(64, 4), A::LOCAL_WRITE)?;
    let (_rb, rmr) = region(b, s.pd, 128, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    recv(b, &s.qp, 7, vec![sge(&rmr, 0, 64)])?;
    let imm = 0x1234_5678;
    let send = WrOp::SendImm { wr_id: 1, flags: SendFlags::SIGNALED, imm, sge: vec![sge(&smr, 0, 64)] };
    expect_ok("SEND with immediate", b.post_send(&a.qp, &[send]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &s.cq, 7, wc_opcode::RECV)?;
    check_eq("src_qp", wc.src_qp, a.qp.qp_num)?;
    check_eq("slid: the sender's port LID", wc.slid, port.lid)?;
    check_eq("dlid_path_bits", wc.dlid_path_bits, 0)?;
    check_eq("pkey_index: the immediate's low 16 bits", wc.pkey_index, (imm & 0xffff) as u16)?;
    if port.link_layer != link_layer::ETHERNET {
        // On RoCE the same bits carry the packet's L3 header type.
        check_eq("sl", wc.sl, 0)?;
    }
    recv(b, &s.qp, 8, vec![sge(&rmr, 64, 64)])?;
    let w = WrOp::RdmaWriteImm {
        wr_id: 2,
        flags: SendFlags::SIGNALED,
        rkey: rmr.rkey,
        remote_addr: rmr.addr,
        imm: 0xabcd,
        sge: vec![sge(&smr, 0, 64)],
    };
    expect_ok("RDMA WRITE with immediate", b.post_send(&a.qp, &[w]))?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_WRITE)?;
    let wc = ok_cqe(b, &s.cq, 8, wc_opcode::RECV_RDMA_WITH_IMM)?;
    check_eq("src_qp of a WRITE with immediate", wc.src_qp, a.qp.qp_num)?;
    check_eq("its pkey_index", wc.pkey_index, 0xabcd)
}

/// Bits 20 to 29 of the access flags are optional: a device without the feature ignores
/// them. Bit 30 is no flag at all: EINVAL.
fn optional(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, _) = open(b, env.dev()?)?;
    let buf = expect_ok("alloc_buf", b.alloc_buf(4096))?;
    for bit in [20, 21, 25, 29] {
        let access = A::LOCAL_WRITE | A::from_bits_retain(1 << bit);
        let mr = expect_ok(&format!("ibv_reg_mr with optional bit {bit}"), b.reg_mr(pd, buf.addr, 4096, access))?;
        expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))?;
    }
    let r = b.reg_mr(pd, buf.addr, 4096, A::LOCAL_WRITE | A::from_bits_retain(1 << 30));
    expect_errno("ibv_reg_mr with bit 30", r, EINVAL)
}

/// `mlx5_vfio_reg_mr` takes local write, remote write, read and atomic (the optional bits never
/// reach it), refuses any other bit with EOPNOTSUPP, and does not ask for local write beside
/// remote write.
fn vfio_access(b: &mut dyn Backend, env: &Env) -> Check {
    let dev = env.vfio_device.as_deref().ok_or_else(|| Verdict::skip("no VFIO device"))?;
    let vctx = expect_ok("ibv_open_device(VFIO)", b.open_ibv_device(dev))?;
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(vctx))?;
    let buf = expect_ok("alloc_buf", b.alloc_buf(4096))?;
    let ok = [A::REMOTE_WRITE, A::REMOTE_ATOMIC | A::REMOTE_READ, A::LOCAL_WRITE | A::from_bits_retain(1 << 22)];
    for access in ok {
        let mr = expect_ok(&format!("VFIO ibv_reg_mr with {access:?}"), b.reg_mr(pd, buf.addr, 4096, access))?;
        expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))?;
    }
    for access in [A::MW_BIND, A::ZERO_BASED, A::LOCAL_WRITE | A::from_bits_retain(1 << 30)] {
        let r = b.reg_mr(pd, buf.addr, 4096, access);
        expect_errno(&format!("VFIO ibv_reg_mr with {access:?}"), r, EOPNOTSUPP)?;
    }
    Ok(())
}
