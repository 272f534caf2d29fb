//! Memory windows: `ibv_alloc_mw` / `ibv_dealloc_mw`, type-1 binds (`ibv_bind_mw`) and
//! unbinds, type-2 binds (`IBV_WR_BIND_MW`, `ibv_wr_bind_mw`), the device's bind errors,
//! and invalidation (LOCAL_INV, SEND_WITH_INV, dealloc).

use mlx5_dv::errno::{EBUSY, EINVAL, EOPNOTSUPP, EPERM};
use mlx5_dv::{
    AccessFlags as A, Backend, BindMw, DvQpCreateFlags, MW_TYPE_1, MW_TYPE_2, Mr, Mw, MwBind, MwBindInfo, PdHandle,
    SendFlags, SendWr, WrOp, inc_rkey, send_ops, wc_flags, wc_opcode, wc_status, wr_opcode,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "mw.alloc_types_einval_dealloc_pd_ebusy", covers: &[171], needs: &[Need::Mlx5Device], run: alloc },
    Case { name: "mw.bind_mw_checks_errno", covers: &[172], needs: &[Need::Mlx5Device], run: bind1_checks },
    Case { name: "mw.type1_bind_write_read_old_key_refused", covers: &[173], needs: &[Need::Mlx5Device], run: bind1 },
    Case { name: "mw.type1_zero_length_bind_unbinds", covers: &[174], needs: &[Need::Mlx5Device], run: unbind1 },
    Case { name: "mw.type2_post_send_and_wr_bind_mw", covers: &[175], needs: &[Need::Mlx5Device], run: bind2 },
    Case { name: "mw.type2_tied_to_its_qp_rebind_is_bind_err", covers: &[176], needs: &[Need::Mlx5Device], run: tied },
    Case { name: "mw.bind_errors_are_mw_bind_err", covers: &[177], needs: &[Need::Mlx5Device], run: bind_errors },
    Case { name: "mw.local_inv_frees_a_type2_window", covers: &[178], needs: &[Need::Mlx5Device], run: local_inv },
    Case { name: "mw.send_with_inv_of_windows", covers: &[179], needs: &[Need::Mlx5Device], run: remote_inv },
    Case { name: "mw.dealloc_of_a_bound_window", covers: &[180], needs: &[Need::Mlx5Device], run: dealloc_bound },
];

/// The rights the windows here grant.
const RW: A = A::REMOTE_WRITE.union(A::REMOTE_READ);

/// A window, or a skip where the device has none.
fn alloc_mw(b: &mut dyn Backend, pd: PdHandle, mw_type: u32) -> Check<Mw> {
    match b.alloc_mw(pd, mw_type) {
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip("ibv_alloc_mw: EOPNOTSUPP (no memory windows)")),
        r => expect_ok(&format!("ibv_alloc_mw(type {mw_type})"), r),
    }
}

/// A connected pair, a 64-byte server region registered for binding, and a client region.
fn setup(b: &mut dyn Backend, env: &Env) -> Check<(Side, Side, mlx5_dv::Buf, Mr, Mr)> {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (buf, mr) = region(b, s.pd, 64, &pattern(64, 1), A::LOCAL_WRITE | A::MW_BIND)?;
    let (_abuf, amr) = region(b, a.pd, 64, &pattern(64, 2), A::LOCAL_WRITE)?;
    Ok((a, s, buf, mr, amr))
}

/// Bind info over `[16, 48)` of `mr`.
fn middle(mr: &Mr, access: A) -> MwBindInfo {
    MwBindInfo { mr: Some(*mr), addr: mr.addr + 16, length: 32, access }
}

/// A signalled `IBV_WR_BIND_MW` of `mw` to the next key.
fn bind_wr(wr_id: u64, mw: &Mw, info: MwBindInfo) -> SendWr {
    SendWr {
        wr_id,
        opcode: wr_opcode::BIND_MW,
        send_flags: SendFlags::SIGNALED,
        bind_mw: Some(BindMw { mw: *mw, rkey: inc_rkey(mw.rkey), bind_info: info }),
        ..SendWr::default()
    }
}

/// Post a type-2 bind with `ibv_post_send` and wait for its completion; the new key.
fn post_bind(b: &mut dyn Backend, side: &Side, mw: &Mw, wr_id: u64, info: MwBindInfo) -> Check<u32> {
    let rkey = inc_rkey(mw.rkey);
    let wr = bind_wr(wr_id, mw, info);
    expect_ok("ibv_post_send(IBV_WR_BIND_MW)", b.post_send_wr(&side.qp, &[wr]))?;
    let wc = ok_cqe(b, &side.cq, wr_id, wc_opcode::BIND_MW)?;
    check_eq("IBV_WC_BIND_MW", wc.opcode, 5)?;
    Ok(rkey)
}

/// The client writes 8 bytes through `rkey` at `addr`: the completion's status.
fn write_status(b: &mut dyn Backend, a: &Side, amr: &Mr, wr_id: u64, rkey: u32, addr: u64) -> Check<u32> {
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(wr_id, rkey, addr, vec![sge(amr, 0, 8)])]))?;
    Ok(poll(b, &a.cq, 1)?.remove(0).status)
}

fn alloc(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, _cq) = open(b, env.dev()?)?;
    let m1 = alloc_mw(b, pd, MW_TYPE_1)?;
    let m2 = alloc_mw(b, pd, MW_TYPE_2)?;
    check_eq("the windows' types", (m1.mw_type, m2.mw_type), (MW_TYPE_1, MW_TYPE_2))?;
    if m1.rkey >> 8 == m2.rkey >> 8 {
        return Err(Verdict::fail("two windows' mkey indexes", "distinct", (m1.rkey, m2.rkey)));
    }
    expect_errno("ibv_alloc_mw(type 3)", b.alloc_mw(pd, 3), EINVAL)?;
    expect_errno("ibv_alloc_mw(type 0)", b.alloc_mw(pd, 0), EINVAL)?;
    expect_errno("ibv_dealloc_pd with windows", b.dealloc_pd(pd), EBUSY)?;
    expect_ok("ibv_dealloc_mw (type 1)", b.dealloc_mw(&m1))?;
    expect_ok("ibv_dealloc_mw (type 2)", b.dealloc_mw(&m2))?;
    expect_ok("ibv_dealloc_pd", b.dealloc_pd(pd))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn bind1_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mr, amr) = setup(b, env)?;
    let m1 = alloc_mw(b, s.pd, MW_TYPE_1)?;
    let m2 = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let bind = |info| MwBind { wr_id: 1, send_flags: SendFlags::SIGNALED, bind_info: info };
    expect_errno("ibv_bind_mw of a type-2 window", b.bind_mw(&s.qp, &m2, &bind(middle(&mr, RW))), EINVAL)?;
    let no_mr = MwBindInfo { mr: None, addr: mr.addr, length: 8, access: RW };
    expect_errno("ibv_bind_mw with a length and no MR", b.bind_mw(&s.qp, &m1, &bind(no_mr)), EINVAL)?;
    expect_errno("ibv_bind_mw with ZERO_BASED", b.bind_mw(&s.qp, &m1, &bind(middle(&mr, RW | A::ZERO_BASED))), EINVAL)?;
    // The client's MR is in its own PD only on two devices; here both sides share one, so
    // an MR of a second PD stands in.
    let pd2 = expect_ok("ibv_alloc_pd", b.alloc_pd(s.ctx))?;
    let (_b2, mr2) = region(b, pd2, 64, &[], A::LOCAL_WRITE | A::MW_BIND)?;
    expect_errno("ibv_bind_mw with an MR of another PD", b.bind_mw(&s.qp, &m1, &bind(middle(&mr2, RW))), EPERM)?;
    no_cqe(b, &s.cq)?;
    let _ = (a, amr);
    Ok(())
}

fn bind1(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, buf, mr, amr) = setup(b, env)?;
    let m1 = alloc_mw(b, s.pd, MW_TYPE_1)?;
    let mb = MwBind { wr_id: 7, send_flags: SendFlags::SIGNALED, bind_info: middle(&mr, RW) };
    let rkey = expect_ok("ibv_bind_mw", b.bind_mw(&s.qp, &m1, &mb))?;
    check_eq("the new key: ibv_inc_rkey of the window's", rkey, inc_rkey(m1.rkey))?;
    ok_cqe(b, &s.cq, 7, wc_opcode::BIND_MW)?;
    // A WRITE and a READ inside the window, through its key.
    expect_ok(
        "RDMA WRITE through the window",
        b.post_send(&a.qp, &[write(1, rkey, mr.addr + 24, vec![sge(&amr, 0, 8)])]),
    )?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(64, 1);
    want[24..32].copy_from_slice(&pattern(64, 2)[..8]);
    check_eq("the region after the WRITE", contents(b, &buf)?, want)?;
    let read = WrOp::RdmaRead {
        wr_id: 2,
        flags: SendFlags::SIGNALED,
        rkey,
        remote_addr: mr.addr + 40,
        sge: vec![sge(&amr, 32, 8)],
    };
    expect_ok("RDMA READ through the window", b.post_send(&a.qp, &[read]))?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_READ)?;
    // Outside the window (still inside the MR): the peer's access error.
    check_eq("WRITE past the window", write_status(b, &a, &amr, 3, rkey, mr.addr + 48)?, wc_status::REM_ACCESS_ERR)
}

fn unbind1(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mr, amr) = setup(b, env)?;
    let m1 = alloc_mw(b, s.pd, MW_TYPE_1)?;
    let mb = MwBind { wr_id: 7, send_flags: SendFlags::SIGNALED, bind_info: middle(&mr, RW) };
    let rkey = expect_ok("ibv_bind_mw", b.bind_mw(&s.qp, &m1, &mb))?;
    ok_cqe(b, &s.cq, 7, wc_opcode::BIND_MW)?;
    check_eq("WRITE through the bound key", write_status(b, &a, &amr, 1, rkey, mr.addr + 16)?, wc_status::SUCCESS)?;
    let held = Mw { rkey, ..m1 };
    let zero = MwBind {
        wr_id: 8,
        send_flags: SendFlags::SIGNALED,
        bind_info: MwBindInfo { mr: Some(mr), addr: mr.addr, length: 0, access: A::empty() },
    };
    let next = expect_ok("ibv_bind_mw of length 0", b.bind_mw(&s.qp, &held, &zero))?;
    check_eq("the key moves on", next, inc_rkey(rkey))?;
    ok_cqe(b, &s.cq, 8, wc_opcode::BIND_MW)?;
    check_eq("WRITE through the old key", write_status(b, &a, &amr, 2, rkey, mr.addr + 16)?, wc_status::REM_ACCESS_ERR)
}

fn bind2(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mr, amr) = setup(b, env)?;
    let m2 = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let rkey = post_bind(b, &s, &m2, 5, middle(&mr, RW))?;
    check_eq("WRITE inside the window", write_status(b, &a, &amr, 1, rkey, mr.addr + 16)?, wc_status::SUCCESS)?;
    // ibv_wr_bind_mw on a QP with IBV_QP_EX_WITH_BIND_MW: a window without remote write.
    let cq = expect_ok("ibv_create_cq", b.create_cq(s.ctx, 16))?;
    let mut attr = qp_attr(s.pd, &cq, DvQpCreateFlags::empty(), CAP);
    attr.send_ops_flags |= send_ops::BIND_MW;
    let (sq, cq2) = (
        expect_ok("create a QP with BIND_MW", b.create_qp(&attr))?,
        expect_ok("ibv_create_cq", b.create_cq(a.ctx, 16))?,
    );
    let aq = expect_ok("create its peer", b.create_qp(&qp_attr(a.pd, &cq2, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &sq, a.ctx, &aq)?;
    connect(b, &aq, s.ctx, &sq)?;
    let m = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let key = inc_rkey(m.rkey);
    let bind = BindMw { mw: m, rkey: key, bind_info: middle(&mr, A::LOCAL_WRITE) };
    let op = WrOp::BindMw { wr_id: 6, flags: SendFlags::SIGNALED, bind };
    expect_ok("ibv_wr_bind_mw", b.post_send(&sq, &[op]))?;
    ok_cqe(b, &cq, 6, wc_opcode::BIND_MW)?;
    expect_ok("WRITE through it", b.post_send(&aq, &[write(2, key, mr.addr + 16, vec![sge(&amr, 0, 8)])]))?;
    err_cqe(b, &cq2, 2, wc_status::REM_ACCESS_ERR).map(drop)
}

fn tied(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mr, amr) = setup(b, env)?;
    let m2 = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let rkey = post_bind(b, &s, &m2, 5, middle(&mr, RW))?;
    // A second connection into the same PD: the window answers on the QP that bound it only.
    let (cq1, cq2) =
        (expect_ok("ibv_create_cq", b.create_cq(s.ctx, 16))?, expect_ok("ibv_create_cq", b.create_cq(a.ctx, 16))?);
    let s2 = expect_ok("create a second server QP", b.create_qp(&qp_attr(s.pd, &cq1, DvQpCreateFlags::empty(), CAP)))?;
    let a2 = expect_ok("create a second client QP", b.create_qp(&qp_attr(a.pd, &cq2, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &s2, a.ctx, &a2)?;
    connect(b, &a2, s.ctx, &s2)?;
    expect_ok("WRITE through another QP", b.post_send(&a2, &[write(1, rkey, mr.addr + 16, vec![sge(&amr, 0, 8)])]))?;
    err_cqe(b, &cq2, 1, wc_status::REM_ACCESS_ERR)?;
    check_eq("WRITE through the binding QP", write_status(b, &a, &amr, 2, rkey, mr.addr + 16)?, wc_status::SUCCESS)?;
    // Bound, the window is not free: binding it again fails on the device.
    let wr = bind_wr(9, &Mw { rkey, ..m2 }, middle(&mr, RW));
    expect_ok("ibv_post_send(IBV_WR_BIND_MW) of a bound window", b.post_send_wr(&s.qp, &[wr]))?;
    err_cqe(b, &s.cq, 9, wc_status::MW_BIND_ERR).map(drop)
}

/// One bind on a fresh pair: the completion's status.
fn bind_status(b: &mut dyn Backend, env: &Env, mr_access: A, info: impl Fn(&Mr) -> MwBindInfo) -> Check<u32> {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_buf, mr) = region(b, s.pd, 64, &[], mr_access)?;
    let m = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let wr = bind_wr(4, &m, info(&mr));
    expect_ok("ibv_post_send(IBV_WR_BIND_MW)", b.post_send_wr(&s.qp, &[wr]))?;
    let _ = a;
    Ok(poll(b, &s.cq, 1)?.remove(0).status)
}

fn bind_errors(b: &mut dyn Backend, env: &Env) -> Check {
    let lw = A::LOCAL_WRITE | A::MW_BIND;
    let past = |mr: &Mr| MwBindInfo { mr: Some(*mr), addr: mr.addr + 32, length: 64, access: RW };
    check_eq("a bind past the MR", bind_status(b, env, lw, past)?, wc_status::MW_BIND_ERR)?;
    let write = |mr: &Mr| middle(mr, A::REMOTE_WRITE);
    check_eq(
        "remote write over an MR without local write",
        bind_status(b, env, A::MW_BIND, write)?,
        wc_status::MW_BIND_ERR,
    )?;
    let read = |mr: &Mr| middle(mr, A::REMOTE_READ);
    check_eq("remote read over an MR without local write", bind_status(b, env, A::MW_BIND, read)?, wc_status::SUCCESS)?;
    // Past a KLM's 2 GiB, libmlx5 refuses the WR itself.
    let (_a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_buf, mr) = region(b, s.pd, 64, &[], lw)?;
    let m = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let info = MwBindInfo { mr: Some(mr), addr: mr.addr, length: (1 << 31) + 1, access: RW };
    let wr = bind_wr(4, &m, info);
    expect_errno("a bind of 2 GiB + 1", b.post_send_wr(&s.qp, &[wr]), EOPNOTSUPP)?;
    no_cqe(b, &s.cq)
}

fn local_inv(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mr, amr) = setup(b, env)?;
    let m2 = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let rkey = post_bind(b, &s, &m2, 5, middle(&mr, RW))?;
    let inv = WrOp::LocalInv { wr_id: 9, flags: SendFlags::SIGNALED, invalidate_rkey: rkey };
    expect_ok("LOCAL_INV of the window's key", b.post_send(&s.qp, &[inv]))?;
    ok_cqe(b, &s.cq, 9, wc_opcode::LOCAL_INV)?;
    check_eq("WRITE after LOCAL_INV", write_status(b, &a, &amr, 1, rkey, mr.addr + 16)?, wc_status::REM_ACCESS_ERR)?;
    // Free again, the window binds again (the client QP went to error: a new pair).
    let (a2, s2) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_b2, mr2) = region(b, s2.pd, 64, &[], A::LOCAL_WRITE | A::MW_BIND)?;
    let (_b3, amr2) = region(b, a2.pd, 64, &[], A::LOCAL_WRITE)?;
    let m = alloc_mw(b, s2.pd, MW_TYPE_2)?;
    let k1 = post_bind(b, &s2, &m, 5, middle(&mr2, RW))?;
    let inv = WrOp::LocalInv { wr_id: 9, flags: SendFlags::SIGNALED, invalidate_rkey: k1 };
    expect_ok("LOCAL_INV", b.post_send(&s2.qp, &[inv]))?;
    ok_cqe(b, &s2.cq, 9, wc_opcode::LOCAL_INV)?;
    let k2 = post_bind(b, &s2, &Mw { rkey: k1, ..m }, 6, middle(&mr2, RW))?;
    check_eq("WRITE through the rebound window", write_status(b, &a2, &amr2, 2, k2, mr2.addr + 16)?, wc_status::SUCCESS)
}

fn remote_inv(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mr, amr) = setup(b, env)?;
    let m2 = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let rkey = post_bind(b, &s, &m2, 5, middle(&mr, RW))?;
    let (_rbuf, rmr) = region(b, s.pd, 16, &[], A::LOCAL_WRITE)?;
    recv(b, &s.qp, 6, vec![sge(&rmr, 0, 16)])?;
    let send =
        WrOp::SendInv { wr_id: 3, flags: SendFlags::SIGNALED, invalidate_rkey: rkey, sge: vec![sge(&amr, 0, 4)] };
    expect_ok("SEND_WITH_INV of the window's key", b.post_send(&a.qp, &[send]))?;
    ok_cqe(b, &a.cq, 3, wc_opcode::SEND)?;
    let rwc = ok_cqe(b, &s.cq, 6, wc_opcode::RECV)?;
    check_eq(
        "receive (WITH_INV, the key)",
        (rwc.wc_flags & wc_flags::WITH_INV, rwc.imm_data),
        (wc_flags::WITH_INV, rkey),
    )?;
    check_eq(
        "WRITE after the invalidation",
        write_status(b, &a, &amr, 1, rkey, mr.addr + 16)?,
        wc_status::REM_ACCESS_ERR,
    )?;
    // A type-1 window is not remotely invalidated.
    let (a2, s2, _b2, mr2, amr2) = setup(b, env)?;
    let m1 = alloc_mw(b, s2.pd, MW_TYPE_1)?;
    let mb = MwBind { wr_id: 7, send_flags: SendFlags::SIGNALED, bind_info: middle(&mr2, RW) };
    let k1 = expect_ok("ibv_bind_mw", b.bind_mw(&s2.qp, &m1, &mb))?;
    ok_cqe(b, &s2.cq, 7, wc_opcode::BIND_MW)?;
    let (_rb2, rmr2) = region(b, s2.pd, 16, &[], A::LOCAL_WRITE)?;
    recv(b, &s2.qp, 6, vec![sge(&rmr2, 0, 16)])?;
    let send = WrOp::SendInv { wr_id: 4, flags: SendFlags::SIGNALED, invalidate_rkey: k1, sge: vec![sge(&amr2, 0, 4)] };
    expect_ok("SEND_WITH_INV of a type-1 window's key", b.post_send(&a2.qp, &[send]))?;
    err_cqe(b, &a2.cq, 4, wc_status::REM_INV_REQ_ERR).map(drop)
}

fn dealloc_bound(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, _buf, mr, amr) = setup(b, env)?;
    let m2 = alloc_mw(b, s.pd, MW_TYPE_2)?;
    let rkey = post_bind(b, &s, &m2, 5, middle(&mr, RW))?;
    check_eq("WRITE while bound", write_status(b, &a, &amr, 1, rkey, mr.addr + 16)?, wc_status::SUCCESS)?;
    expect_ok("ibv_dealloc_mw of a bound window", b.dealloc_mw(&m2))?;
    check_eq("WRITE after the dealloc", write_status(b, &a, &amr, 2, rkey, mr.addr + 16)?, wc_status::REM_ACCESS_ERR)
}
