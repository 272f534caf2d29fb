//! Fixtures for data-path cases: connected RC QPs, registered buffers, polling.

use mlx5_dv::{
    AccessFlags, AsyncEvent, Backend, Buf, ContextHandle, Cq, DvQpCreateFlags, DvQpInitAttr, DvSendOpsFlags, Mkey,
    MkeyInitAttr, MkeyInitFlags, Mr, PdHandle, Qp, QpCap, QpDest, QpInitAttr, QpModify, RecvWr, SendFlags, Sge, Wc,
    WrOp, dv_qp, wc_status,
};

use crate::case::{Check, Env, Verdict, check_eq, expect_ok};

/// One end of a connection.
pub(super) struct Side {
    pub ctx: ContextHandle,
    pub pd: PdHandle,
    pub cq: Cq,
    pub qp: Qp,
}

/// The mkey operations a QP is created with in these cases.
pub(super) const MKEY_OPS: DvSendOpsFlags =
    dv_qp::WITH_MKEY_CONFIGURE.union(dv_qp::WITH_MR_LIST).union(dv_qp::WITH_MR_INTERLEAVED);

/// 16 WRs, 4 SGEs each way, no inline data requested.
pub(super) const CAP: QpCap =
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 0 };

/// Access a connected QP grants to incoming RDMA.
pub(super) const QP_ACCESS: AccessFlags =
    AccessFlags::LOCAL_WRITE.union(AccessFlags::REMOTE_WRITE).union(AccessFlags::REMOTE_READ);

/// RC QP attributes with the mkey send ops and the given mlx5dv create flags.
pub(super) fn qp_attr(pd: PdHandle, cq: &Cq, create_flags: DvQpCreateFlags, cap: QpCap) -> QpInitAttr {
    QpInitAttr::rc(pd, cq.handle, cap, Some(DvQpInitAttr::new(create_flags, MKEY_OPS)))
}

/// Open `dev`, allocate a PD and a 64-entry CQ.
pub(super) fn open(b: &mut dyn Backend, dev: &str) -> Check<(ContextHandle, PdHandle, Cq)> {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(dev))?;
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let cq = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    Ok((ctx, pd, cq))
}

/// The RTR path to `peer`, a QP of context `peer_ctx`: its number and its port's address.
pub(super) fn dest(b: &mut dyn Backend, peer_ctx: ContextHandle, peer: &Qp) -> Check<QpDest> {
    let port = expect_ok("ibv_query_port of the peer's port 1", b.query_port(peer_ctx, 1))?;
    Ok(QpDest::to(peer, &port))
}

/// Move `qp` through INIT and RTR (towards `peer`, a QP of `peer_ctx`) to RTS.
pub(super) fn connect(b: &mut dyn Backend, qp: &Qp, peer_ctx: ContextHandle, peer: &Qp) -> Check {
    let dest = dest(b, peer_ctx, peer)?;
    for step in QpModify::connect(QP_ACCESS, dest) {
        let state = format!("{:?}", step.state).to_uppercase();
        expect_ok(&format!("modify to {state}"), b.modify_qp(qp, &step))?;
    }
    Ok(())
}

/// Two connected RC QPs: on one device (loopback), or `a` on the first device and `b` on the
/// second. `server_flags` are the mlx5dv create flags of the server side.
pub(super) fn pair(
    b: &mut dyn Backend,
    env: &Env,
    two_devices: bool,
    server_flags: DvQpCreateFlags,
) -> Check<(Side, Side)> {
    let dev_a = env.dev()?.to_string();
    let (ctx, pd, cq) = open(b, &dev_a)?;
    let qa = expect_ok("create the client QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let a = Side { ctx, pd, cq, qp: qa };
    let s = if two_devices {
        let dev_b = env.peer_device.clone().ok_or_else(|| Verdict::skip("needs a second mlx5 device"))?;
        let (ctx, pd, cq) = open(b, &dev_b)?;
        let qb = expect_ok("create the server QP", b.create_qp(&qp_attr(pd, &cq, server_flags, CAP)))?;
        Side { ctx, pd, cq, qp: qb }
    } else {
        let cq2 = expect_ok("ibv_create_cq", b.create_cq(a.ctx, 64))?;
        let qb = expect_ok("create the server QP", b.create_qp(&qp_attr(a.pd, &cq2, server_flags, CAP)))?;
        Side { ctx: a.ctx, pd: a.pd, cq: cq2, qp: qb }
    };
    connect(b, &a.qp, s.ctx, &s.qp)?;
    connect(b, &s.qp, a.ctx, &a.qp)?;
    Ok((a, s))
}

/// A pattern of `len` bytes that differs per `seed`.
pub(super) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1).collect()
}

/// A buffer of `len` bytes filled with `fill`, registered with `access`.
pub(super) fn region(
    b: &mut dyn Backend,
    pd: PdHandle,
    len: usize,
    fill: &[u8],
    access: AccessFlags,
) -> Check<(Buf, Mr)> {
    let buf = expect_ok("alloc_buf", b.alloc_buf(len))?;
    if !fill.is_empty() {
        expect_ok("write_buf", b.write_buf(&buf, 0, fill))?;
    }
    let mr = expect_ok("ibv_reg_mr", b.reg_mr(pd, buf.addr, len as u64, access))?;
    Ok((buf, mr))
}

/// Read a whole buffer.
pub(super) fn contents(b: &mut dyn Backend, buf: &Buf) -> Check<Vec<u8>> {
    expect_ok("read_buf", b.read_buf(buf, 0, buf.len))
}

/// Poll until `n` completions arrived, or the harness's wait deadline passed.
pub(super) fn poll(b: &mut dyn Backend, cq: &Cq, n: usize) -> Check<Vec<Wc>> {
    let deadline = crate::harness::deadline::wait_until();
    let mut got = Vec::new();
    loop {
        got.extend(expect_ok("ibv_poll_cq", b.poll_cq(cq, n - got.len()))?);
        if got.len() == n {
            return Ok(got);
        }
        if std::time::Instant::now() >= deadline {
            return Err(Verdict::fail("completions", n, got));
        }
        std::hint::spin_loop();
    }
}

/// The next asynchronous event of `ctx`, waiting for it until the harness's deadline.
pub(super) fn next_async_event(b: &mut dyn Backend, ctx: ContextHandle) -> Check<Option<AsyncEvent>> {
    let deadline = crate::harness::deadline::wait_until();
    loop {
        let ev = expect_ok("ibv_get_async_event", b.get_async_event(ctx))?;
        if ev.is_some() || std::time::Instant::now() >= deadline {
            return Ok(ev);
        }
        std::hint::spin_loop();
    }
}

/// Require that no completion is waiting.
pub(super) fn no_cqe(b: &mut dyn Backend, cq: &Cq) -> Check {
    check_eq("no completion", expect_ok("ibv_poll_cq", b.poll_cq(cq, 16))?, vec![])
}

/// Require one successful completion with `opcode` and `wr_id`; return it.
pub(super) fn ok_cqe(b: &mut dyn Backend, cq: &Cq, wr_id: u64, opcode: u32) -> Check<Wc> {
    let wc = poll(b, cq, 1)?.remove(0);
    check_eq(
        "completion (wr_id, status, opcode)",
        (wc.wr_id, wc.status, wc.opcode),
        (wr_id, wc_status::SUCCESS, opcode),
    )?;
    Ok(wc)
}

/// Require one error completion with `status` for `wr_id`.
pub(super) fn err_cqe(b: &mut dyn Backend, cq: &Cq, wr_id: u64, status: u32) -> Check<Wc> {
    let wc = poll(b, cq, 1)?.remove(0);
    check_eq("error completion (wr_id, status)", (wc.wr_id, wc.status), (wr_id, status))?;
    Ok(wc)
}

/// An SGE over `[off, off + len)` of a registered region.
pub(super) fn sge(mr: &Mr, off: u64, len: u32) -> Sge {
    Sge { addr: mr.addr + off, length: len, lkey: mr.lkey }
}

/// Signalled RDMA WRITE.
pub(super) fn write(wr_id: u64, rkey: u32, remote_addr: u64, sge: Vec<Sge>) -> WrOp {
    WrOp::RdmaWrite { wr_id, flags: SendFlags::SIGNALED, rkey, remote_addr, sge }
}

/// An indirect mkey with room for `max_entries` entries.
pub(super) fn indirect_mkey(b: &mut dyn Backend, pd: PdHandle, flags: MkeyInitFlags, max_entries: u16) -> Check<Mkey> {
    expect_ok("mlx5dv_create_mkey", b.create_mkey(&MkeyInitAttr { pd, create_flags: flags, max_entries }))
}

/// `mlx5dv_wr_mr_list`, signalled and inline, as one chain; wait for its completion.
pub(super) fn configure_list(
    b: &mut dyn Backend,
    side: &Side,
    mkey: &Mkey,
    access: AccessFlags,
    sge: Vec<Sge>,
) -> Check {
    let op = WrOp::MrList { wr_id: 0xc0f, flags: SendFlags::SIGNALED | SendFlags::INLINE, mkey: *mkey, access, sge };
    expect_ok("mlx5dv_wr_mr_list", b.post_send(&side.qp, &[op]))?;
    ok_cqe(b, &side.cq, 0xc0f, mlx5_dv::wc_opcode::DRIVER1).map(drop)
}

/// Post one receive of `sge`.
pub(super) fn recv(b: &mut dyn Backend, qp: &Qp, wr_id: u64, sge: Vec<Sge>) -> Check {
    expect_ok("ibv_post_recv", b.post_recv(qp, &[RecvWr { wr_id, sge }]))
}
