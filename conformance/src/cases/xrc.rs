//! XRC (items 181–190): domains opened by file and shared by inode, the use counts that keep
//! them, XRC SRQs, the initiator and target QPs, `ibv_open_qp`, and traffic that lands in the
//! SRQ each message names (or is refused when that SRQ is not of the target's domain), from
//! and into ODP MRs where `xrc_odp_caps` offers them (item 303).

use std::os::fd::AsRawFd;

use mlx5_dv::errno::{EAGAIN, EBADF, EBUSY, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::xrcd_oflags::{O_CREAT, O_EXCL};
use mlx5_dv::{
    AccessFlags, Backend, ContextHandle, Cq, PdHandle, Qp, QpCap, QpInitAttr, QpModify, QpOpenAttr, QpState, RecvWr,
    SendFlags, SendWr, Srq, SrqInitAttr, SrqXrc, Xrcd, XrcdInitAttr, qp_init_mask, qp_type, wc_opcode, wc_status,
    wr_opcode, xrcd_init_mask as m,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "xrc.open_xrcd_fd_oflags_and_inode_sharing", covers: &[181], needs: NEEDS, run: open_rules },
    Case { name: "xrc.close_xrcd_busy_while_srq_or_qp_uses_it", covers: &[182], needs: NEEDS, run: close_busy },
    Case { name: "xrc.srq_sizes_as_basic_and_pins_its_cq", covers: &[183], needs: NEEDS, run: srq_sizes },
    Case { name: "xrc.recv_qp_needs_xrcd_and_has_no_queues", covers: &[184], needs: NEEDS, run: recv_qp },
    Case { name: "xrc.send_qp_has_no_receive_side", covers: &[185], needs: NEEDS, run: send_qp },
    Case { name: "xrc.open_qp_shares_the_target_to_its_last_handle", covers: &[186], needs: NEEDS, run: open_qp },
    Case { name: "xrc.send_lands_in_the_named_srq_and_its_cq", covers: &[187], needs: NEEDS, run: traffic },
    Case { name: "xrc.srq_of_another_domain_naks_invalid_request", covers: &[188], needs: NEEDS, run: bad_srqn },
    Case { name: "xrc.rdma_checked_against_the_srq_pd", covers: &[189], needs: NEEDS, run: rdma },
    Case { name: "xrc.wqe_carries_the_xrc_segment", covers: &[190], needs: NEEDS, run: wqe_layout },
    Case { name: "xrc.send_through_odp_mrs_on_both_sides", covers: &[303], needs: NEEDS, run: odp_traffic },
];

/// A file of its own for a domain to be keyed by.
fn domain_file(tag: &str) -> Check<std::fs::File> {
    let path = std::env::temp_dir().join(format!("mlx5sim-xrcd-{}-{tag}", std::process::id()));
    let f = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path);
    let _ = std::fs::remove_file(&path);
    f.map_err(|e| Verdict::skip(format!("no temporary file for the domain: {e}")))
}

fn attr(ctx: ContextHandle, fd: i32, oflags: i32) -> XrcdInitAttr {
    XrcdInitAttr { ctx, comp_mask: m::FD | m::OFLAGS, fd, oflags }
}

/// `ibv_open_xrcd`, skipping the case on a backend without XRC.
fn open_xrcd(b: &mut dyn Backend, a: &XrcdInitAttr) -> Check<Xrcd> {
    match b.open_xrcd(a) {
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip("the backend has no XRC domains")),
        r => expect_ok("ibv_open_xrcd", r),
    }
}

fn xsrq(b: &mut dyn Backend, pd: PdHandle, xrcd: &Xrcd, cq: &Cq, max_wr: u32) -> mlx5_dv::Result<Srq> {
    let xrc = Some(SrqXrc { xrcd: xrcd.handle, cq: cq.handle });
    b.create_srq(&SrqInitAttr { pd, max_wr, max_sge: 1, xrc, tm: None })
}

fn target(b: &mut dyn Backend, pd: PdHandle, cq: &Cq, xrcd: &Xrcd) -> mlx5_dv::Result<Qp> {
    let mut a = QpInitAttr::rc(pd, cq.handle, QpCap::default(), None);
    (a.qp_type, a.xrcd, a.comp_mask) = (qp_type::XRC_RECV, Some(xrcd.handle), Some(qp_init_mask::XRCD));
    b.create_qp(&a)
}

fn initiator(b: &mut dyn Backend, pd: PdHandle, cq: &Cq, cap: QpCap) -> mlx5_dv::Result<Qp> {
    let mut a = QpInitAttr::rc(pd, cq.handle, cap, None);
    (a.qp_type, a.comp_mask) = (qp_type::XRC_SEND, Some(qp_init_mask::PD));
    b.create_qp(&a)
}

fn open_rules(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _, _) = open(b, env.dev()?)?;
    let f = domain_file("open")?;
    let fd = f.as_raw_fd();
    let own = open_xrcd(b, &attr(ctx, -1, 0))?;
    let bad = |mask| XrcdInitAttr { comp_mask: mask, ..attr(ctx, fd, O_CREAT) };
    expect_errno("a comp_mask bit past RESERVED", b.open_xrcd(&bad(m::RESERVED | m::FD | m::OFLAGS)), EOPNOTSUPP)?;
    expect_errno("comp_mask without OFLAGS", b.open_xrcd(&bad(m::FD)), EINVAL)?;
    expect_errno("a file with no domain, without O_CREAT", b.open_xrcd(&attr(ctx, fd, 0)), EAGAIN)?;
    expect_errno("an fd that is not open", b.open_xrcd(&attr(ctx, 1 << 30, O_CREAT)), EBADF)?;
    let first = open_xrcd(b, &attr(ctx, fd, O_CREAT))?;
    let second = open_xrcd(b, &attr(ctx, fd, 0))?;
    let excl = b.open_xrcd(&attr(ctx, fd, O_CREAT | O_EXCL));
    expect_errno("O_EXCL on a file that has a domain", excl, EINVAL)?;
    // Both openings reach one domain: a target QP made through one opens through the other.
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let cq = expect_ok("ibv_create_cq", b.create_cq(ctx, 16))?;
    let t = expect_ok("an XRC target QP", target(b, pd, &cq, &first))?;
    let o = QpOpenAttr { xrcd: second.handle, qp_num: t.qp_num, qp_type: qp_type::XRC_RECV };
    let opened = expect_ok("ibv_open_qp through the second opening", b.open_qp(&o))?;
    let other = QpOpenAttr { xrcd: own.handle, ..o };
    expect_errno("ibv_open_qp through a domain of its own (fd -1)", b.open_qp(&other), EINVAL)?;
    for q in [&opened, &t] {
        expect_ok("ibv_destroy_qp", b.destroy_qp(q))?;
    }
    for x in [&first, &second, &own] {
        expect_ok("ibv_close_xrcd", b.close_xrcd(x))?;
    }
    // The last opening closed: the file has no domain any more.
    expect_errno("the file after its domain's last close", b.open_xrcd(&attr(ctx, fd, 0)), EAGAIN)
}

fn close_busy(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let x = open_xrcd(b, &attr(ctx, -1, 0))?;
    let s = expect_ok("an XRC SRQ", xsrq(b, pd, &x, &cq, 4))?;
    expect_errno("ibv_close_xrcd with an XRC SRQ", b.close_xrcd(&x), EBUSY)?;
    expect_ok("ibv_destroy_srq", b.destroy_srq(&s))?;
    let t = expect_ok("an XRC target QP", target(b, pd, &cq, &x))?;
    expect_errno("ibv_close_xrcd with a target QP", b.close_xrcd(&x), EBUSY)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&t))?;
    expect_ok("ibv_close_xrcd once unused", b.close_xrcd(&x))?;
    expect_errno("ibv_close_xrcd again", b.close_xrcd(&x), EINVAL)
}

fn srq_sizes(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let x = open_xrcd(b, &attr(ctx, -1, 0))?;
    let s = expect_ok("an XRC SRQ of max_wr 100", xsrq(b, pd, &x, &cq, 100))?;
    check_eq("max_wr, max_sge written back", (s.max_wr, s.max_sge), (127, 1))?;
    let q = expect_ok("ibv_query_srq", b.query_srq(&s))?;
    check_eq("ibv_query_srq's max_wr (with the wait queue)", q.max_wr, 255)?;
    let basic =
        expect_ok("a basic SRQ", b.create_srq(&SrqInitAttr { pd, max_wr: 4, max_sge: 1, xrc: None, tm: None }))?;
    check_eq("the SRQ numbers differ", s.srq_num != basic.srq_num, true)?;
    expect_errno("ibv_destroy_cq of the XRC SRQ's CQ", b.destroy_cq(&cq), EBUSY)?;
    expect_ok("ibv_destroy_srq", b.destroy_srq(&s))?;
    expect_ok("ibv_destroy_srq (basic)", b.destroy_srq(&basic))?;
    expect_ok("ibv_destroy_cq once the SRQ is gone", b.destroy_cq(&cq))
}

fn recv_qp(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let x = open_xrcd(b, &attr(ctx, -1, 0))?;
    let mut no_mask = QpInitAttr::rc(pd, cq.handle, QpCap::default(), None);
    (no_mask.qp_type, no_mask.xrcd, no_mask.comp_mask) = (qp_type::XRC_RECV, Some(x.handle), Some(qp_init_mask::PD));
    expect_errno("XRC_RECV without IBV_QP_INIT_ATTR_XRCD", b.create_qp(&no_mask), EINVAL)?;
    let t = expect_ok("an XRC target QP", target(b, pd, &cq, &x))?;
    check_eq("its capacities", t.cap, QpCap::default())?;
    let ini = expect_ok("an XRC initiator", initiator(b, pd, &cq, CAP))?;
    for (q, peer) in [(&t, &ini), (&ini, &t)] {
        connect(b, q, ctx, peer)?;
    }
    check_eq("the target's state", expect_ok("ibv_query_qp", b.query_qp_state(&t))?, QpState::Rts)?;
    expect_ok("modify the target to RESET", b.modify_qp(&t, &QpModify::to(QpState::Reset)))?;
    check_eq("the target's state", expect_ok("ibv_query_qp", b.query_qp_state(&t))?, QpState::Reset)
}

fn send_qp(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let ini = expect_ok("an XRC initiator asking for receives", initiator(b, pd, &cq, CAP))?;
    check_eq("max_recv_wr, max_recv_sge", (ini.cap.max_recv_wr, ini.cap.max_recv_sge), (0, 0))?;
    check_eq("max_send_wr", ini.cap.max_send_wr >= CAP.max_send_wr, true)?;
    let (_, mr) = region(b, pd, 64, &[], AccessFlags::LOCAL_WRITE)?;
    let r = b.post_recv(&ini, &[RecvWr { wr_id: 1, sge: vec![sge(&mr, 0, 8)] }]);
    expect_errno("ibv_post_recv on an XRC initiator", r, ENOMEM)
}

fn open_qp(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let x = open_xrcd(b, &attr(ctx, -1, 0))?;
    let t = expect_ok("an XRC target QP", target(b, pd, &cq, &x))?;
    let ini = expect_ok("an XRC initiator", initiator(b, pd, &cq, CAP))?;
    let o = QpOpenAttr { xrcd: x.handle, qp_num: t.qp_num, qp_type: qp_type::XRC_RECV };
    expect_errno("ibv_open_qp of type RC", b.open_qp(&QpOpenAttr { qp_type: qp_type::RC, ..o }), EINVAL)?;
    let not_target = QpOpenAttr { qp_num: ini.qp_num, ..o };
    expect_errno("ibv_open_qp of an initiator's number", b.open_qp(&not_target), EINVAL)?;
    let h = expect_ok("ibv_open_qp", b.open_qp(&o))?;
    check_eq("the opened QP's number", h.qp_num, t.qp_num)?;
    expect_ok("destroy the creator's handle", b.destroy_qp(&t))?;
    // The opened handle keeps the QP: it still moves through its states.
    let init = QpModify::connect(QP_ACCESS, dest(b, ctx, &ini)?)[0];
    expect_ok("INIT through the opened handle", b.modify_qp(&h, &init))?;
    check_eq("its state", expect_ok("ibv_query_qp", b.query_qp_state(&h))?, QpState::Init)?;
    expect_ok("destroy the last handle", b.destroy_qp(&h))?;
    expect_errno("ibv_open_qp once the QP is gone", b.open_qp(&o), EINVAL)
}

/// A connected initiator and target in one domain, an XRC SRQ on its own CQ, and regions.
struct Pair {
    ini: Qp,
    tgt: Qp,
    cq: Cq,
    rcq: Cq,
    srq: Srq,
    pd: PdHandle,
    smr: mlx5_dv::Mr,
    sbuf: mlx5_dv::Buf,
    amr: mlx5_dv::Mr,
    x: Xrcd,
    ctx: ContextHandle,
}

fn pair(b: &mut dyn Backend, env: &Env) -> Check<Pair> {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let rcq = expect_ok("ibv_create_cq (the SRQ's)", b.create_cq(ctx, 16))?;
    let x = open_xrcd(b, &attr(ctx, -1, 0))?;
    let srq = expect_ok("an XRC SRQ", xsrq(b, pd, &x, &rcq, 8))?;
    let tgt = expect_ok("an XRC target QP", target(b, pd, &cq, &x))?;
    let ini = expect_ok("an XRC initiator", initiator(b, pd, &cq, CAP))?;
    for (q, peer) in [(&tgt, &ini), (&ini, &tgt)] {
        connect(b, q, ctx, peer)?;
    }
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let (sbuf, smr) = region(b, pd, 4096, &[], access)?;
    let (_, amr) = region(b, pd, 4096, &pattern(4096, 3), AccessFlags::LOCAL_WRITE)?;
    Ok(Pair { ini, tgt, cq, rcq, srq, pd, smr, sbuf, amr, x, ctx })
}

fn xrc_wr(wr_id: u64, opcode: u32, srqn: u32, sge: Vec<mlx5_dv::Sge>) -> SendWr {
    SendWr { wr_id, opcode, send_flags: SendFlags::SIGNALED, sge, xrc_remote_srqn: srqn, ..SendWr::default() }
}

fn traffic(b: &mut dyn Backend, env: &Env) -> Check {
    let p = pair(b, env)?;
    let wrs: Vec<RecvWr> = (0..2).map(|i| RecvWr { wr_id: 40 + i, sge: vec![sge(&p.smr, i * 512, 512)] }).collect();
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&p.srq, &wrs))?;
    for (i, len) in [(0u64, 100u32), (1, 300)] {
        let wr = xrc_wr(i, wr_opcode::SEND, p.srq.srq_num, vec![sge(&p.amr, i * 100, len)]);
        expect_ok("ibv_post_send with remote_srqn", b.post_send_wr(&p.ini, &[wr]))?;
        ok_cqe(b, &p.cq, i, wc_opcode::SEND)?;
        let wc = ok_cqe(b, &p.rcq, 40 + i, wc_opcode::RECV)?;
        check_eq(
            "the receive's (qp_num, src_qp, byte_len)",
            (wc.qp_num, wc.src_qp, wc.byte_len),
            (p.tgt.qp_num, p.ini.qp_num, len),
        )?;
    }
    let data = contents(b, &p.sbuf)?;
    let sent = pattern(4096, 3);
    check_eq("the first message's bytes", &data[..100], &sent[..100])?;
    check_eq("the second message's bytes", &data[512..812], &sent[100..400])?;
    no_cqe(b, &p.cq)
}

fn bad_srqn(b: &mut dyn Backend, env: &Env) -> Check {
    let p = pair(b, env)?;
    // An XRC SRQ of another domain, with a WQE posted: the target may not take it.
    let other = open_xrcd(b, &attr(p.ctx, -1, 0))?;
    let foreign = expect_ok("an XRC SRQ of another domain", xsrq(b, p.pd, &other, &p.rcq, 4))?;
    let r = RecvWr { wr_id: 9, sge: vec![sge(&p.smr, 0, 64)] };
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&foreign, &[r]))?;
    let wr = xrc_wr(1, wr_opcode::SEND, foreign.srq_num, vec![sge(&p.amr, 0, 16)]);
    expect_ok("ibv_post_send naming the foreign SRQ", b.post_send_wr(&p.ini, &[wr]))?;
    err_cqe(b, &p.cq, 1, wc_status::REM_INV_REQ_ERR)?;
    no_cqe(b, &p.rcq)?;
    check_eq("the target's state", expect_ok("ibv_query_qp", b.query_qp_state(&p.tgt))?, QpState::Err)?;
    let _ = p.x;
    Ok(())
}

fn rdma(b: &mut dyn Backend, env: &Env) -> Check {
    let p = pair(b, env)?;
    let (rkey, raddr) = (p.smr.rkey, p.smr.addr);
    let mut w = xrc_wr(1, wr_opcode::RDMA_WRITE, p.srq.srq_num, vec![sge(&p.amr, 0, 64)]);
    (w.rkey, w.remote_addr) = (rkey, raddr + 1024);
    expect_ok("RDMA WRITE over XRC", b.post_send_wr(&p.ini, &[w]))?;
    ok_cqe(b, &p.cq, 1, wc_opcode::RDMA_WRITE)?;
    check_eq("the written bytes", &contents(b, &p.sbuf)?[1024..1088], &pattern(4096, 3)[..64])?;
    no_cqe(b, &p.rcq)?;
    let mut r = xrc_wr(2, wr_opcode::RDMA_READ, p.srq.srq_num, vec![sge(&p.amr, 2048, 64)]);
    (r.rkey, r.remote_addr) = (rkey, raddr + 1024);
    expect_ok("RDMA READ over XRC", b.post_send_wr(&p.ini, &[r]))?;
    ok_cqe(b, &p.cq, 2, wc_opcode::RDMA_READ)?;
    // A key of another PD than the SRQ's: a remote access error.
    let pd2 = expect_ok("ibv_alloc_pd", b.alloc_pd(p.ctx))?;
    let (_, other) = region(b, pd2, 64, &[], AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
    let mut w = xrc_wr(3, wr_opcode::RDMA_WRITE, p.srq.srq_num, vec![sge(&p.amr, 0, 8)]);
    (w.rkey, w.remote_addr) = (other.rkey, other.addr);
    expect_ok("RDMA WRITE with a key of another PD", b.post_send_wr(&p.ini, &[w]))?;
    err_cqe(b, &p.cq, 3, wc_status::REM_ACCESS_ERR)?;
    check_eq("the initiator's state", expect_ok("ibv_query_qp", b.query_qp_state(&p.ini))?, QpState::Err)?;
    check_eq("the target's state", expect_ok("ibv_query_qp", b.query_qp_state(&p.tgt))?, QpState::Err)
}

fn wqe_layout(b: &mut dyn Backend, env: &Env) -> Check {
    let p = pair(b, env)?;
    let r = RecvWr { wr_id: 1, sge: vec![sge(&p.smr, 0, 64)] };
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&p.srq, &[r]))?;
    let wr = xrc_wr(7, wr_opcode::SEND, p.srq.srq_num, vec![sge(&p.amr, 0, 32)]);
    expect_ok("ibv_post_send", b.post_send_wr(&p.ini, &[wr]))?;
    let w = expect_ok("the send queue's WQE 0", b.sq_wqe(&p.ini, 0))?;
    let at = |i: usize| u32::from_be_bytes([w[i], w[i + 1], w[i + 2], w[i + 3]]);
    // Control, XRC and one data segment: ds 3; the SRQ number first in the XRC segment, the
    // data segment after it.
    check_eq("ds", w[7] & 0x3f, 3)?;
    check_eq("the XRC segment's SRQ number", at(16), p.srq.srq_num)?;
    check_eq("the data segment's byte count", at(32), 32)?;
    ok_cqe(b, &p.cq, 7, wc_opcode::SEND).map(drop)
}

/// A SEND gathered from an ODP MR lands in an XRC SRQ receive whose buffer is under an ODP MR.
fn odp_traffic(b: &mut dyn Backend, env: &Env) -> Check {
    use mlx5_dv::odp_transport as t;
    let caps = super::odp::odp_caps(env)?;
    let need = t::SEND | t::SRQ_RECV;
    if !caps.supported() || caps.xrc & need != need {
        let why = format!("no XRC ODP for SEND|SRQ_RECV (general {:#x}, xrc {:#x})", caps.general_caps, caps.xrc);
        return Err(Verdict::skip(why));
    }
    let p = pair(b, env)?;
    let sent = pattern(512, 7);
    let (_, src) = super::odp::odp_region(b, p.pd, 4096, &sent, AccessFlags::LOCAL_WRITE)?;
    let (dbuf, dst) = super::odp::odp_region(b, p.pd, 4096, &[], AccessFlags::LOCAL_WRITE)?;
    let wr = RecvWr { wr_id: 70, sge: vec![sge(&dst, 1024, 512)] };
    expect_ok("ibv_post_srq_recv into an ODP MR", b.post_srq_recv(&p.srq, &[wr]))?;
    let send = xrc_wr(9, wr_opcode::SEND, p.srq.srq_num, vec![sge(&src, 0, 512)]);
    expect_ok("ibv_post_send from an ODP MR", b.post_send_wr(&p.ini, &[send]))?;
    ok_cqe(b, &p.cq, 9, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &p.rcq, 70, wc_opcode::RECV)?;
    check_eq("the receive's byte_len", wc.byte_len, 512)?;
    let got = contents(b, &dbuf)?;
    check_eq("the bytes in the ODP receive buffer", &got[1024..1536], &sent[..])?;
    no_cqe(b, &p.cq)
}
