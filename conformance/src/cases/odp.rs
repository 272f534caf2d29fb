//! On-demand paging (items 201–210): the ODP caps, `ibv_reg_mr` with `IBV_ACCESS_ON_DEMAND`
//! (explicit and implicit) and its checks, RC traffic through ODP MRs on both sides,
//! `ibv_advise_mr`'s checks and prefetches, and accesses to pages that are gone ending in
//! error completions.

use mlx5_dv::errno::{EFAULT, EINVAL, ENOENT, EOPNOTSUPP, EOVERFLOW};
use mlx5_dv::{
    AccessFlags as A, Backend, Buf, DvQpCreateFlags, Mr, OdpCaps, QpModify, QpState, SendFlags, Sge, WrOp, advise,
    odp_general, odp_transport, wc_opcode, wc_status,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

const DEV: &[Need] = &[Need::Mlx5Device];
/// Cases that free a buffer under an ODP MR and need its pages gone: the simulator unmaps a
/// freed buffer, while on hardware the allocator may keep its pages mapped (capi/tests/odp.c
/// unmaps pages with munmap there).
const FREED: &[Need] = &[Need::Mlx5Device, Need::SimControl];
/// The UD pair of the uc_ud cases, which first clears the simulator's network fault rules.
const UD: &[Need] = &[Need::Mlx5Device, Need::SimControl];

pub(super) const CASES: &[Case] = &[
    Case { name: "odp.caps_are_consistent_and_gate_on_demand", covers: &[201, 202], needs: DEV, run: caps_gate },
    Case { name: "odp.reg_checks_and_unmapped_range_accepted", covers: &[203], needs: DEV, run: reg_checks },
    Case { name: "odp.implicit_mr_reaches_any_buffer", covers: &[204], needs: DEV, run: implicit },
    Case { name: "odp.send_write_read_atomic_both_sides_odp", covers: &[205, 210], needs: DEV, run: traffic },
    Case { name: "odp.ud_send_gathers_from_an_odp_mr", covers: &[205], needs: UD, run: ud_send },
    Case { name: "odp.advise_mr_checks_and_errnos", covers: &[206], needs: DEV, run: advise_checks },
    Case { name: "odp.advise_mr_flush_faults_no_fault_skips", covers: &[207], needs: FREED, run: advise_faults },
    Case { name: "odp.gather_from_freed_pages_is_local_prot", covers: &[208], needs: FREED, run: gather_fault },
    Case { name: "odp.write_to_freed_pages_is_remote_access", covers: &[209], needs: FREED, run: target_fault },
];

/// Every right an ODP MR of these cases has.
const ALL: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ).union(A::REMOTE_ATOMIC).union(A::ON_DEMAND);

/// The backend's ODP caps, or a skip where it cannot tell.
pub(super) fn odp_caps(env: &Env) -> Check<OdpCaps> {
    env.caps.device.odp.ok_or_else(|| Verdict::skip("the backend does not report odp_caps"))
}

/// The ODP caps, or a skip unless RC may send, receive, write, read and do atomics through ODP
/// MRs.
pub(super) fn rc_odp(env: &Env) -> Check<OdpCaps> {
    let caps = odp_caps(env)?;
    let need = odp_transport::SEND | odp_transport::RECV | odp_transport::WRITE | odp_transport::READ;
    if !caps.supported() || caps.rc & need != need {
        return Err(Verdict::skip(format!(
            "no RC ODP for SEND|RECV|WRITE|READ (general {:#x}, rc {:#x})",
            caps.general_caps, caps.rc
        )));
    }
    Ok(caps)
}

/// A buffer of `len` bytes filled with `fill`, under an ODP MR with `access` (ON_DEMAND added).
pub(super) fn odp_region(
    b: &mut dyn Backend,
    pd: mlx5_dv::PdHandle,
    len: usize,
    fill: &[u8],
    access: A,
) -> Check<(Buf, Mr)> {
    let buf = expect_ok("alloc_buf", b.alloc_buf(len))?;
    if !fill.is_empty() {
        expect_ok("write_buf", b.write_buf(&buf, 0, fill))?;
    }
    let mr = expect_ok("ibv_reg_mr(ON_DEMAND)", b.reg_mr(pd, buf.addr, len as u64, access | A::ON_DEMAND))?;
    Ok((buf, mr))
}

/// Free a buffer an ODP MR still covers (ODP pins nothing), or skip where the backend pins it.
fn free_under_odp(b: &mut dyn Backend, buf: &Buf) -> Check {
    match b.free_buf(buf) {
        Err(e) if e.errno() == mlx5_dv::errno::EBUSY => Err(Verdict::skip("the backend keeps ODP-registered buffers")),
        r => expect_ok("free_buf under an ODP MR", r),
    }
}

/// Two connected RC QPs (on two devices when there are two) granting remote atomics too.
fn odp_pair(b: &mut dyn Backend, env: &Env) -> Check<(Side, Side)> {
    let two = env.peer_device.is_some();
    let (a, s) = pair(b, env, two, DvQpCreateFlags::empty())?;
    for (qp, peer_ctx, peer) in [(&a.qp, s.ctx, &s.qp), (&s.qp, a.ctx, &a.qp)] {
        let to = dest(b, peer_ctx, peer)?;
        // Back to RESET, then up again with REMOTE_ATOMIC and ON_DEMAND in qp_access_flags.
        expect_ok("modify to RESET", b.modify_qp(qp, &QpModify::to(QpState::Reset)))?;
        for step in QpModify::connect(QP_ACCESS | A::REMOTE_ATOMIC | A::ON_DEMAND, to) {
            expect_ok(&format!("modify to {:?}", step.state), b.modify_qp(qp, &step))?;
        }
    }
    Ok((a, s))
}

/// IMPLICIT only with SUPPORT; no transport bit past the eight known; no transport caps
/// without SUPPORT; then `ibv_reg_mr(ON_DEMAND)` is EOPNOTSUPP exactly when SUPPORT is off
/// (and the EINVAL rules of `ib_check_mr_access` still come first).
fn caps_gate(b: &mut dyn Backend, env: &Env) -> Check {
    let caps = odp_caps(env)?;
    let g = caps.general_caps;
    check("general_caps' bits", g & !(odp_general::SUPPORT | odp_general::IMPLICIT) == 0, "SUPPORT|IMPLICIT", g)?;
    check("IMPLICIT implies SUPPORT", g & odp_general::IMPLICIT == 0 || caps.supported(), "SUPPORT", g)?;
    for (what, bits) in [("rc", caps.rc), ("uc", caps.uc), ("ud", caps.ud), ("xrc", caps.xrc)] {
        check(&format!("{what}_odp_caps' bits"), bits & !0xff == 0, "known bits", bits)?;
        check(&format!("{what}_odp_caps without ODP"), caps.supported() || bits == 0, "0", bits)?;
    }
    let (_ctx, pd, _cq) = open(b, env.dev()?)?;
    let buf = expect_ok("alloc_buf", b.alloc_buf(4096))?;
    let rw_only = A::REMOTE_WRITE | A::ON_DEMAND;
    expect_errno("ON_DEMAND|REMOTE_WRITE without LOCAL_WRITE", b.reg_mr(pd, buf.addr, 4096, rw_only), EINVAL)?;
    let r = b.reg_mr(pd, buf.addr, 4096, A::LOCAL_WRITE | A::ON_DEMAND);
    if caps.supported() {
        let mr = expect_ok("ibv_reg_mr(ON_DEMAND) with ODP", r)?;
        expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))
    } else {
        expect_errno("ibv_reg_mr(ON_DEMAND) without ODP", r, EOPNOTSUPP).map(drop)
    }
}

/// An explicit ODP MR: a range whose end wraps is EOVERFLOW, 0 bytes EINVAL; a range nobody
/// mapped (nor freed memory) is registered all the same, and its keys work once memory is
/// there (here: never, so only the registration is checked).
fn reg_checks(b: &mut dyn Backend, env: &Env) -> Check {
    rc_odp(env)?;
    let (_ctx, pd, _cq) = open(b, env.dev()?)?;
    let lw = A::LOCAL_WRITE | A::ON_DEMAND;
    expect_errno("ODP MR whose end wraps", b.reg_mr(pd, u64::MAX - 4095, 8192, lw), EOVERFLOW)?;
    let buf = expect_ok("alloc_buf", b.alloc_buf(8192))?;
    expect_errno("ODP MR of 0 bytes", b.reg_mr(pd, buf.addr, 0, lw), EINVAL)?;
    // Past the buffer and beyond any mapping: accepted, nothing is pinned.
    let far = expect_ok("ODP MR over unmapped memory", b.reg_mr(pd, buf.addr + (1 << 40), 1 << 20, lw))?;
    check_eq("its (addr, length)", (far.addr, far.length), (buf.addr + (1 << 40), 1 << 20))?;
    let mr = expect_ok("ODP MR over a buffer", b.reg_mr(pd, buf.addr, 8192, lw))?;
    check("distinct keys", mr.lkey != far.lkey, "two keys", (mr.lkey, far.lkey))?;
    // An ODP MR pins nothing: the buffer may be freed under it.
    free_under_odp(b, &buf)?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&far))
}

/// `ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND)`: EINVAL without IMPLICIT; with it one key
/// reaches any buffer, registered or not, as an RDMA WRITE's source and target.
fn implicit(b: &mut dyn Backend, env: &Env) -> Check {
    let caps = rc_odp(env)?;
    let (a, s) = odp_pair(b, env)?;
    let r = b.reg_mr(s.pd, 0, u64::MAX, A::LOCAL_WRITE | A::REMOTE_WRITE | A::ON_DEMAND);
    if !caps.implicit() {
        return expect_errno("implicit ODP MR without IMPLICIT", r, EINVAL).map(drop);
    }
    let simr = expect_ok("implicit ODP MR (responder)", r)?;
    check_eq("its (addr, length)", (simr.addr, simr.length), (0, u64::MAX))?;
    let aimr = expect_ok("implicit ODP MR (requester)", b.reg_mr(a.pd, 0, u64::MAX, A::LOCAL_WRITE | A::ON_DEMAND))?;
    let from = expect_ok("alloc_buf", b.alloc_buf(4096))?;
    expect_ok("write_buf", b.write_buf(&from, 0, &pattern(4096, 9)))?;
    let to = expect_ok("alloc_buf", b.alloc_buf(4096))?;
    let g = Sge { addr: from.addr + 100, length: 1000, lkey: aimr.lkey };
    expect_ok("RDMA WRITE through implicit MRs", b.post_send(&a.qp, &[write(1, simr.rkey, to.addr + 200, vec![g])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let got = contents(b, &to)?;
    check_eq("the bytes placed", got[200..1200].to_vec(), pattern(4096, 9)[100..1100].to_vec())?;
    check_eq("around them", (got[..200].to_vec(), got[1200..].to_vec()), (vec![0; 200], vec![0; 2896]))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&aimr))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&simr))
}

/// SEND into a receive of an ODP MR, RDMA WRITE and READ, CAS and FETCH_ADD: every buffer
/// on both sides under ODP MRs, the QPs' access flags with ON_DEMAND.
fn traffic(b: &mut dyn Backend, env: &Env) -> Check {
    let caps = rc_odp(env)?;
    let (a, s) = odp_pair(b, env)?;
    let (abuf, amr) = odp_region(b, a.pd, 4096, &pattern(4096, 5), ALL)?;
    let (sbuf, smr) = odp_region(b, s.pd, 4096, &[], ALL)?;
    recv(b, &s.qp, 10, vec![sge(&smr, 0, 1024)])?;
    let send = WrOp::Send { wr_id: 1, flags: SendFlags::SIGNALED, sge: vec![sge(&amr, 0, 512)] };
    expect_ok("SEND", b.post_send(&a.qp, &[send]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &s.cq, 10, wc_opcode::RECV)?;
    check_eq("the receive's byte_len", wc.byte_len, 512)?;
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(2, smr.rkey, smr.addr + 1024, vec![sge(&amr, 512, 1024)])]))?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_WRITE)?;
    let got = contents(b, &sbuf)?;
    let want = pattern(4096, 5);
    check_eq("SEND's bytes", got[..512].to_vec(), want[..512].to_vec())?;
    check_eq("WRITE's bytes", got[1024..2048].to_vec(), want[512..1536].to_vec())?;
    let read = WrOp::RdmaRead {
        wr_id: 3,
        flags: SendFlags::SIGNALED,
        rkey: smr.rkey,
        remote_addr: smr.addr,
        sge: vec![sge(&amr, 2048, 512)],
    };
    expect_ok("RDMA READ", b.post_send(&a.qp, &[read]))?;
    ok_cqe(b, &a.cq, 3, wc_opcode::RDMA_READ)?;
    check_eq("READ's bytes", contents(b, &abuf)?[2048..2560].to_vec(), want[..512].to_vec())?;
    if caps.rc & odp_transport::ATOMIC == 0 {
        return Ok(());
    }
    expect_ok("write_buf", b.write_buf(&sbuf, 3072, &7u64.to_ne_bytes()))?;
    let (rkey, at) = (smr.rkey, smr.addr + 3072);
    let cas = WrOp::AtomicCmpSwp {
        wr_id: 4,
        flags: SendFlags::SIGNALED,
        rkey,
        remote_addr: at,
        compare: 7,
        swap: 40,
        sge: vec![sge(&amr, 3072, 8)],
    };
    let faa = WrOp::AtomicFetchAdd {
        wr_id: 5,
        flags: SendFlags::SIGNALED,
        rkey,
        remote_addr: at,
        add: 2,
        sge: vec![sge(&amr, 3080, 8)],
    };
    expect_ok("CAS then FETCH_ADD", b.post_send(&a.qp, &[cas, faa]))?;
    ok_cqe(b, &a.cq, 4, wc_opcode::COMP_SWAP)?;
    ok_cqe(b, &a.cq, 5, wc_opcode::FETCH_ADD)?;
    let word = |v: Vec<u8>, at: usize| v.get(at..at + 8).and_then(|w| w.try_into().ok()).map(u64::from_ne_bytes);
    check_eq("the target after CAS 7→40 and +2", word(contents(b, &sbuf)?, 3072), Some(42))?;
    let mine = contents(b, &abuf)?;
    check_eq("the values fetched", (word(mine.clone(), 3072), word(mine, 3080)), (Some(7), Some(40)))
}

/// A UD SEND gathering from an ODP MR (`ud_odp_caps` SEND) into a receive of a pinned MR:
/// the payload after the 40-byte GRH area.
fn ud_send(b: &mut dyn Backend, env: &Env) -> Check {
    let caps = odp_caps(env)?;
    if !caps.supported() || caps.ud & odp_transport::SEND == 0 {
        return Err(Verdict::skip(format!("no UD SEND through ODP MRs (ud_odp_caps {:#x})", caps.ud)));
    }
    let t = super::uc_ud::two(b, env, mlx5_dv::qp_type::UD)?;
    let (rbuf, rmr) = region(b, t.s.pd, 1024, &[], A::LOCAL_WRITE)?;
    let (_abuf, amr) = odp_region(b, t.a.pd, 1024, &pattern(1024, 4), A::LOCAL_WRITE)?;
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 1024)])?;
    let ud = Some(super::uc_ud::ud_to(b, &t.s, super::uc_ud::QKEY)?);
    let opcode = mlx5_dv::wr_opcode::SEND;
    let send = mlx5_dv::SendWr {
        wr_id: 1,
        opcode,
        send_flags: SendFlags::SIGNALED,
        sge: vec![sge(&amr, 0, 200)],
        ud,
        ..Default::default()
    };
    expect_ok("ibv_post_send (UD SEND)", b.post_send_wr(&t.a.qp, &[send]))?;
    ok_cqe(b, &t.a.cq, 1, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &t.s.cq, 100, wc_opcode::RECV)?;
    check_eq("byte_len: the payload and the GRH area", wc.byte_len, 200 + super::uc_ud::GRH)?;
    check_eq("the payload after the GRH area", contents(b, &rbuf)?[40..240].to_vec(), pattern(1024, 4)[..200].to_vec())
}

/// `ibv_advise_mr`'s checks in the kernel's order: an empty list EINVAL; an unknown flag
/// EINVAL; an unknown advice EOPNOTSUPP; a key that is no ODP MR of the PD (a wrong tag, a
/// plain MR, a read-only MR for PREFETCH_WRITE) ENOENT with FLUSH, EINVAL without; past the
/// MR EFAULT with FLUSH. A good prefetch is 0 either way.
fn advise_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let caps = odp_caps(env)?;
    let (_ctx, pd, _cq) = open(b, env.dev()?)?;
    let (_buf, plain) = region(b, pd, 4096, &[], A::LOCAL_WRITE)?;
    if !caps.supported() {
        let s = [sge(&plain, 0, 64)];
        return expect_errno("advise_mr without ODP", b.advise_mr(pd, advise::PREFETCH, 0, &s), EOPNOTSUPP);
    }
    let (_obuf, mr) = odp_region(b, pd, 8192, &[], A::LOCAL_WRITE)?;
    let (_rbuf, ro) = odp_region(b, pd, 4096, &[], A::empty())?;
    let (w, f) = (advise::PREFETCH_WRITE, advise::FLAG_FLUSH);
    let good = [sge(&mr, 0, 8192)];
    expect_ok("PREFETCH_WRITE with FLUSH", b.advise_mr(pd, w, f, &good))?;
    expect_ok("PREFETCH without FLUSH", b.advise_mr(pd, advise::PREFETCH, 0, &good))?;
    expect_ok("PREFETCH of a read-only ODP MR", b.advise_mr(pd, advise::PREFETCH, f, &[sge(&ro, 0, 64)]))?;
    expect_errno("an empty SGE list", b.advise_mr(pd, w, f, &[]), EINVAL)?;
    expect_errno("an unknown flag", b.advise_mr(pd, w, 2, &good), EINVAL)?;
    expect_errno("an unknown advice", b.advise_mr(pd, 3, f, &good), EOPNOTSUPP)?;
    let wrong_tag = Sge { lkey: mr.lkey ^ 1, ..good[0] };
    let bad: [(&str, u32, Sge); 3] = [
        ("a wrong key tag", w, wrong_tag),
        ("a plain (pinned) MR", advise::PREFETCH, sge(&plain, 0, 64)),
        ("PREFETCH_WRITE of a read-only MR", w, sge(&ro, 0, 64)),
    ];
    for (what, adv, s) in bad {
        expect_errno(&format!("{what}, FLUSH"), b.advise_mr(pd, adv, f, &[s]), ENOENT)?;
        expect_errno(&format!("{what}, no FLUSH"), b.advise_mr(pd, adv, 0, &[s]), EINVAL)?;
    }
    let past = [sge(&mr, 8192, 8)];
    expect_errno("past the MR, FLUSH", b.advise_mr(pd, w, f, &past), EFAULT)?;
    expect_ok("past the MR, no FLUSH (left to the device)", b.advise_mr(pd, w, 0, &past))
}

/// Over pages freed under the MR: PREFETCH and PREFETCH_WRITE with FLUSH are EFAULT;
/// PREFETCH_NO_FAULT faults nothing and is 0.
fn advise_faults(b: &mut dyn Backend, env: &Env) -> Check {
    rc_odp(env)?;
    let (_ctx, pd, _cq) = open(b, env.dev()?)?;
    let (buf, mr) = odp_region(b, pd, 4096, &[], A::LOCAL_WRITE)?;
    free_under_odp(b, &buf)?;
    let s = [sge(&mr, 0, 4096)];
    let f = advise::FLAG_FLUSH;
    expect_errno("PREFETCH over freed pages", b.advise_mr(pd, advise::PREFETCH, f, &s), EFAULT)?;
    expect_errno("PREFETCH_WRITE over freed pages", b.advise_mr(pd, advise::PREFETCH_WRITE, f, &s), EFAULT)?;
    expect_ok("PREFETCH_NO_FAULT over freed pages", b.advise_mr(pd, advise::PREFETCH_NO_FAULT, f, &s))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))
}

/// A SEND gathering from pages freed under its ODP MR: the fault fails, the WQE completes
/// with a local protection error and the QP goes to ERROR; nothing arrives.
fn gather_fault(b: &mut dyn Backend, env: &Env) -> Check {
    rc_odp(env)?;
    let (a, s) = odp_pair(b, env)?;
    let (abuf, amr) = odp_region(b, a.pd, 4096, &pattern(4096, 1), ALL)?;
    let (sbuf, smr) = region(b, s.pd, 4096, &[], QP_ACCESS)?;
    free_under_odp(b, &abuf)?;
    recv(b, &s.qp, 10, vec![sge(&smr, 0, 4096)])?;
    let send = WrOp::Send { wr_id: 1, flags: SendFlags::SIGNALED, sge: vec![sge(&amr, 0, 256)] };
    expect_ok("SEND from freed ODP pages", b.post_send(&a.qp, &[send]))?;
    err_cqe(b, &a.cq, 1, wc_status::LOC_PROT_ERR)?;
    check_eq("the requester QP", expect_ok("query", b.query_qp_state(&a.qp))?, QpState::Err)?;
    no_cqe(b, &s.cq)?;
    check_eq("the receive buffer", contents(b, &sbuf)?, vec![0; 4096])
}

/// An RDMA WRITE (and READ) whose target pages were freed under the responder's ODP MR: the
/// responder's fault fails and NAKs; the requester completes with a remote access error.
fn target_fault(b: &mut dyn Backend, env: &Env) -> Check {
    rc_odp(env)?;
    let (a, s) = odp_pair(b, env)?;
    let (_abuf, amr) = region(b, a.pd, 4096, &pattern(4096, 2), QP_ACCESS)?;
    let (sbuf, smr) = odp_region(b, s.pd, 4096, &[], ALL)?;
    free_under_odp(b, &sbuf)?;
    expect_ok(
        "RDMA WRITE to freed ODP pages",
        b.post_send(&a.qp, &[write(1, smr.rkey, smr.addr, vec![sge(&amr, 0, 64)])]),
    )?;
    err_cqe(b, &a.cq, 1, wc_status::REM_ACCESS_ERR)?;
    check_eq("the requester QP", expect_ok("query", b.query_qp_state(&a.qp))?, QpState::Err).map(drop)
}
