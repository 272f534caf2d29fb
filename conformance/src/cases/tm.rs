//! Tag-matching SRQs (items 281–290): `tm_caps`, creating an `IBV_SRQT_TM` SRQ, the list
//! operations of `ibv_post_srq_ops` and their completions, and how a tag-matching SRQ takes
//! eager, unexpected, untagged and rendezvous messages.

use mlx5_dv::errno::{EBUSY, EINVAL, ENOMEM};
use mlx5_dv::{
    AccessFlags, Backend, Buf, Cq, DvQpCreateFlags, Mr, PdHandle, Qp, QpInitAttr, RecvWr, SendFlags, Sge, Srq,
    SrqInitAttr, SrqOpKind, SrqOpWr, SrqTm, TmCaps, Wc, WcFlags, WrOp, ops_flags, wc_opcode, wc_status,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device, Need::TagMatching];

pub(super) const CASES: &[Case] = &[
    Case { name: "tm.caps_from_the_hca_caps", covers: &[281], needs: NEEDS, run: caps },
    Case { name: "tm.create_limits_and_the_srq_holds_its_cq", covers: &[282], needs: NEEDS, run: create_limits },
    Case { name: "tm.add_takes_the_free_list_full_is_enomem", covers: &[283], needs: NEEDS, run: add_free_list },
    Case { name: "tm.ops_past_max_ops_enomem_until_completed", covers: &[284], needs: NEEDS, run: ops_overflow },
    Case { name: "tm.del_completes_or_tm_err_for_a_consumed_tag", covers: &[285], needs: NEEDS, run: del },
    Case { name: "tm.eager_match_lands_after_the_tmh", covers: &[286], needs: NEEDS, run: eager },
    Case { name: "tm.unexpected_suspends_matching_until_sync", covers: &[287], needs: NEEDS, run: unexpected },
    Case { name: "tm.no_tag_goes_to_an_srq_wqe_uncounted", covers: &[288], needs: NEEDS, run: no_tag },
    Case { name: "tm.rendezvous_reads_sends_fin_completes_twice", covers: &[289], needs: NEEDS, run: rendezvous },
    Case { name: "tm.sync_req_when_the_phase_differs", covers: &[290], needs: NEEDS, run: sync_req },
];

/// `enum ibv_tmh_op`.
const NO_TAG: u8 = 0;
const RNDV: u8 = 1;
const FIN: u8 = 2;
const EAGER: u8 = 3;

fn tm_caps(b: &mut dyn Backend) -> Check<TmCaps> {
    b.caps().device.tm.ok_or_else(|| Verdict::skip("the backend reports no tm_caps"))
}

/// A 16-byte TMH (big-endian fields).
fn tmh(op: u8, app_ctx: u32, tag: u64) -> Vec<u8> {
    let mut h = vec![op, 0, 0, 0];
    h.extend_from_slice(&app_ctx.to_be_bytes());
    h.extend_from_slice(&tag.to_be_bytes());
    h
}

fn make(b: &mut dyn Backend, pd: PdHandle, cq: &Cq, max_num_tags: u32, max_ops: u32) -> mlx5_dv::Result<Srq> {
    let tm = Some(SrqTm { cq: cq.handle, max_num_tags, max_ops });
    b.create_srq(&SrqInitAttr { pd, max_wr: 64, max_sge: 1, xrc: None, tm })
}

fn add(wr_id: u64, flags: u32, tag: u64, sge: Vec<Sge>) -> SrqOpWr {
    let op = SrqOpKind::Add { recv_wr_id: wr_id + 1000, sge, tag, mask: 0xffff };
    SrqOpWr { wr_id, flags, unexpected_cnt: 0, op }
}

fn sync(wr_id: u64, count: u32) -> SrqOpWr {
    SrqOpWr { wr_id, flags: ops_flags::SIGNALED | ops_flags::TM_SYNC, unexpected_cnt: count, op: SrqOpKind::Sync }
}

/// A client RC QP connected to a server QP on a tag-matching SRQ (whose CQ is `scq`), with
/// a client buffer (remotely readable) and a server buffer.
struct Rig {
    ccq: Cq,
    scq: Cq,
    client: Qp,
    srq: Srq,
    cbuf: Buf,
    cmr: Mr,
    sbuf: Buf,
    smr: Mr,
}

fn rig(b: &mut dyn Backend, env: &Env, max_num_tags: u32) -> Check<Rig> {
    let (ctx, pd, ccq) = open(b, env.dev()?)?;
    let scq = expect_ok("ibv_create_cq for the SRQ", b.create_cq(ctx, 64))?;
    let srq = expect_ok("ibv_create_srq_ex IBV_SRQT_TM", make(b, pd, &scq, max_num_tags, 16))?;
    let client = expect_ok("client QP", b.create_qp(&qp_attr(pd, &ccq, DvQpCreateFlags::empty(), CAP)))?;
    let on_srq = QpInitAttr { srq: Some(srq.handle), ..qp_attr(pd, &scq, DvQpCreateFlags::empty(), CAP) };
    let server = expect_ok("server QP on the SRQ", b.create_qp(&on_srq))?;
    connect(b, &client, ctx, &server)?;
    connect(b, &server, ctx, &client)?;
    let (cbuf, cmr) = region(b, pd, 4096, &[], QP_ACCESS)?;
    let (sbuf, smr) = region(b, pd, 4096, &[0; 4096], AccessFlags::LOCAL_WRITE)?;
    // Ordinary WQEs at 2048.. for unexpected messages, 256 bytes each.
    let wrs: Vec<RecvWr> =
        (0..4).map(|i| RecvWr { wr_id: 500 + i, sge: vec![sge(&smr, 2048 + i * 256, 256)] }).collect();
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&srq, &wrs))?;
    Ok(Rig { ccq, scq, client, srq, cbuf, cmr, sbuf, smr })
}

impl Rig {
    /// Send `msg` from the client's buffer start; wait for its completion.
    fn send(&self, b: &mut dyn Backend, wr_id: u64, msg: &[u8]) -> Check {
        expect_ok("write_buf", b.write_buf(&self.cbuf, 0, msg))?;
        let op = WrOp::Send { wr_id, flags: SendFlags::SIGNALED, sge: vec![sge(&self.cmr, 0, msg.len() as u32)] };
        expect_ok("ibv_post_send", b.post_send(&self.client, &[op]))?;
        ok_cqe(b, &self.ccq, wr_id, wc_opcode::SEND).map(drop)
    }

    fn ops(&self, b: &mut dyn Backend, ops: &[SrqOpWr]) -> Check<Vec<u32>> {
        expect_ok("ibv_post_srq_ops", b.post_srq_ops(&self.srq, ops))
    }

    /// The server buffer's bytes at `at`.
    fn server_bytes(&self, b: &mut dyn Backend, at: usize, len: usize) -> Check<Vec<u8>> {
        expect_ok("read_buf", b.read_buf(&self.sbuf, at, len))
    }
}

/// One completion of the SRQ's CQ: (wr_id, status, opcode, wc_flags, byte_len, tag).
fn tm_wc(b: &mut dyn Backend, cq: &Cq) -> Check<(u64, u32, u32, WcFlags, u32, u64)> {
    let w: Wc = poll(b, cq, 1)?.remove(0);
    Ok((w.wr_id, w.status, w.opcode, w.wc_flags, w.byte_len, w.tm_tag))
}

const NONE: WcFlags = WcFlags::empty();
const MATCHED: WcFlags = WcFlags::TM_MATCH.union(WcFlags::TM_DATA_VALID);

fn caps(b: &mut dyn Backend, _env: &Env) -> Check {
    let t = tm_caps(b)?;
    let max_qp_wr = b.caps().device.max_qp_wr.ok_or_else(|| Verdict::skip("the backend reports no max_qp_wr"))?;
    // mlx5_ib: one SGE, max_ops the largest queue, a list of a power of two less one, and
    // with rendezvous offload 64-byte rendezvous headers.
    check_eq("max_sge", t.max_sge, 1)?;
    check_eq("max_ops", t.max_ops, max_qp_wr)?;
    check_eq("max_num_tags + 1 is a power of two", (t.max_num_tags + 1).is_power_of_two(), true)?;
    check_eq("max_rndv_hdr_size with IBV_TM_CAP_RC", t.max_rndv_hdr_size, 64)
}

fn create_limits(b: &mut dyn Backend, env: &Env) -> Check {
    let t = tm_caps(b)?;
    let max_qp_wr = b.caps().device.max_qp_wr.unwrap_or(t.max_ops);
    let (_, pd, cq) = open(b, env.dev()?)?;
    // The kernel's list is 2^(ilog2(max_num_tags) + 1) entries, within the device's.
    let s = expect_ok("max_num_tags = tm_caps.max_num_tags", make(b, pd, &cq, t.max_num_tags, 8))?;
    expect_ok("ibv_destroy_srq", b.destroy_srq(&s))?;
    let past = t.max_num_tags + 1;
    expect_errno("max_num_tags past the device's list", make(b, pd, &cq, past, 8), EINVAL)?;
    // The command QP: max_ops RC WQEs of 256 bytes must fit max_qp_wr basic blocks.
    let most = max_qp_wr / 4;
    let s = expect_ok("max_ops = max_qp_wr / 4", make(b, pd, &cq, 8, most))?;
    expect_errno("max_ops one past", make(b, pd, &cq, 8, most + 1), EINVAL)?;
    expect_errno("ibv_destroy_cq of the SRQ's CQ", b.destroy_cq(&cq), EBUSY)?;
    expect_ok("ibv_destroy_srq", b.destroy_srq(&s))?;
    expect_ok("ibv_destroy_cq once the SRQ is gone", b.destroy_cq(&cq))
}

fn add_free_list(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, 3)?;
    let buf = |i: u64| vec![sge(&r.smr, i * 128, 128)];
    // max_num_tags 3: libmlx5's list of 4 entries lends entries 0, 1, 2; the fourth is the
    // sentinel a full list keeps.
    let h = r.ops(b, &[add(1, ops_flags::SIGNALED, 10, buf(0)), add(2, 0, 11, buf(1)), add(3, 0, 12, buf(2))])?;
    check_eq("handles", h, vec![0, 1, 2])?;
    let e = b.post_srq_ops(&r.srq, &[add(4, ops_flags::SIGNALED, 13, buf(3))]);
    check_eq("bad_wr of the full list", e.as_ref().err().and_then(|e| e.bad_wr()), Some(0))?;
    expect_errno("a fourth TAG_ADD", e, ENOMEM)?;
    // Only the signaled ADD completes.
    check_eq("the signaled ADD", tm_wc(b, &r.scq)?, (1, 0, wc_opcode::TM_ADD, NONE, 0, 0))?;
    no_cqe(b, &r.scq)?;
    // A message consumes tag 11 (entry 1); once its completion is read the entry goes to the
    // free list's tail, behind the sentinel (entry 3), which the next ADD takes.
    let mut msg = tmh(EAGER, 0, 11);
    msg.extend_from_slice(b"payload");
    r.send(b, 7, &msg)?;
    check_eq("the match", tm_wc(b, &r.scq)?, (1002, 0, wc_opcode::TM_RECV, MATCHED, 7, 11))?;
    check_eq("the next ADD's handle", r.ops(b, &[add(5, 0, 14, buf(3))])?, vec![3])?;
    let e = b.post_srq_ops(&r.srq, &[add(6, 0, 15, buf(3))]);
    expect_errno("full again: entry 1 is the sentinel now", e, ENOMEM)
}

fn ops_overflow(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let srq = expect_ok("ibv_create_srq_ex max_ops 1", make(b, pd, &cq, 8, 1))?;
    // max_ops 1: the command QP's send queue holds one WR outstanding.
    expect_ok("a signaled TAG_SYNC", b.post_srq_ops(&srq, &[sync(1, 0)]))?;
    expect_errno("a second operation while it is outstanding", b.post_srq_ops(&srq, &[sync(2, 0)]), ENOMEM)?;
    check_eq("its completion", tm_wc(b, &cq)?, (1, 0, wc_opcode::TM_SYNC, NONE, 0, 0))?;
    expect_ok("once completed, another", b.post_srq_ops(&srq, &[sync(3, 0)]))?;
    check_eq("its completion", tm_wc(b, &cq)?, (3, 0, wc_opcode::TM_SYNC, NONE, 0, 0))?;
    // Unsignaled operations never complete: one fills the queue for good.
    let quiet = SrqOpWr { flags: 0, ..sync(4, 0) };
    expect_ok("an unsignaled TAG_SYNC", b.post_srq_ops(&srq, std::slice::from_ref(&quiet)))?;
    expect_errno("anything after it", b.post_srq_ops(&srq, &[sync(5, 0)]), ENOMEM)
}

fn del(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, 7)?;
    let s = ops_flags::SIGNALED;
    let h = r.ops(b, &[add(1, s, 20, vec![sge(&r.smr, 0, 128)]), add(2, s, 21, vec![sge(&r.smr, 128, 128)])])?;
    for wr_id in [1, 2] {
        check_eq("ADD", tm_wc(b, &r.scq)?, (wr_id, 0, wc_opcode::TM_ADD, NONE, 0, 0))?;
    }
    let del = |wr_id, handle| SrqOpWr { wr_id, flags: s, unexpected_cnt: 0, op: SrqOpKind::Del { handle } };
    // A live tag goes: success, and a message with its tag is unexpected.
    r.ops(b, &[del(3, h[0])])?;
    check_eq("DEL of a live tag", tm_wc(b, &r.scq)?, (3, 0, wc_opcode::TM_DEL, NONE, 0, 0))?;
    r.send(b, 8, &tmh(EAGER, 0, 20))?;
    check_eq("the message of the deleted tag", tm_wc(b, &r.scq)?, (500, 0, wc_opcode::TM_RECV, NONE, 16, 0))?;
    r.ops(b, &[sync(4, 1)])?;
    check_eq("TAG_SYNC", tm_wc(b, &r.scq)?, (4, 0, wc_opcode::TM_SYNC, NONE, 0, 0))?;
    // A consumed tag: the device refuses, IBV_WC_TM_ERR.
    r.send(b, 9, &tmh(EAGER, 0, 21))?;
    check_eq("the match of tag 21", tm_wc(b, &r.scq)?, (1002, 0, wc_opcode::TM_RECV, MATCHED, 0, 21))?;
    r.ops(b, &[del(5, h[1])])?;
    let wc = tm_wc(b, &r.scq)?;
    check_eq(
        "DEL of a consumed tag (wr_id, status, opcode)",
        (wc.0, wc.1, wc.2),
        (5, wc_status::TM_ERR, wc_opcode::TM_DEL),
    )
}

fn eager(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, 7)?;
    // Two tags match 0x5_0042 on the mask 0xffff; the older one takes it.
    r.ops(b, &[add(1, 0, 0x42, vec![sge(&r.smr, 0, 64)]), add(2, 0, 0x42, vec![sge(&r.smr, 512, 64)])])?;
    let body = pattern(40, 3);
    let mut msg = tmh(EAGER, 0xabcd_0123, 0x5_0042);
    msg.extend_from_slice(&body);
    r.send(b, 1, &msg)?;
    let w = poll(b, &r.scq, 1)?.remove(0);
    check_eq(
        "completion (wr_id, status, opcode, flags, byte_len, tag, priv)",
        (w.wr_id, w.status, w.opcode, w.wc_flags, w.byte_len, w.tm_tag, w.tm_priv),
        (1001, 0, wc_opcode::TM_RECV, MATCHED, 40, 0x5_0042, 0xabcd_0123),
    )?;
    check_eq("the tag's buffer: the data after the TMH", r.server_bytes(b, 0, 40)?, body.clone())?;
    check_eq("the younger tag's buffer, untouched", r.server_bytes(b, 512, 40)?, vec![0; 40])?;
    // A message longer than the buffer: matched but not delivered (unverified on hardware).
    let mut long = tmh(EAGER, 0, 0x42);
    long.extend_from_slice(&pattern(100, 5));
    r.send(b, 2, &long)?;
    let wc = tm_wc(b, &r.scq)?;
    check_eq("too long (wr_id, status)", (wc.0, wc.1), (1002, wc_status::TM_RNDV_INCOMPLETE))?;
    check_eq("the short buffer, untouched", r.server_bytes(b, 512, 64)?, vec![0; 64])
}

fn unexpected(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, 7)?;
    r.ops(b, &[add(1, 0, 7, vec![sge(&r.smr, 0, 64)])])?;
    let mut msg = tmh(EAGER, 9, 8);
    msg.extend_from_slice(b"unexpected");
    r.send(b, 1, &msg)?;
    // Whole, TMH included, into the first ordinary WQE; no tag in the completion.
    check_eq("the unexpected message", tm_wc(b, &r.scq)?, (500, 0, wc_opcode::TM_RECV, NONE, 26, 0))?;
    check_eq("the ordinary WQE's bytes", r.server_bytes(b, 2048, 26)?, msg)?;
    // The device is one unexpected message ahead: tag 7 is not matched yet.
    r.send(b, 2, &tmh(EAGER, 0, 7))?;
    check_eq("tag 7 before the sync", tm_wc(b, &r.scq)?, (501, 0, wc_opcode::TM_RECV, NONE, 16, 0))?;
    r.ops(b, &[sync(2, 2)])?;
    check_eq("TAG_SYNC of 2", tm_wc(b, &r.scq)?, (2, 0, wc_opcode::TM_SYNC, NONE, 0, 0))?;
    r.send(b, 3, &tmh(EAGER, 0, 7))?;
    check_eq("tag 7 after the sync", tm_wc(b, &r.scq)?, (1001, 0, wc_opcode::TM_RECV, MATCHED, 0, 7))
}

fn no_tag(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, 7)?;
    r.ops(b, &[add(1, 0, 7, vec![sge(&r.smr, 0, 64)])])?;
    let mut msg = tmh(NO_TAG, 0, 7);
    msg.extend_from_slice(b"untagged");
    r.send(b, 1, &msg)?;
    check_eq("the untagged message", tm_wc(b, &r.scq)?, (500, 0, wc_opcode::TM_NO_TAG, NONE, 24, 0))?;
    check_eq("the ordinary WQE's bytes", r.server_bytes(b, 2048, 24)?, msg)?;
    // Not unexpected: tag 7 still matches without a sync.
    r.send(b, 2, &tmh(EAGER, 0, 7))?;
    check_eq("tag 7", tm_wc(b, &r.scq)?, (1001, 0, wc_opcode::TM_RECV, MATCHED, 0, 7))
}

fn rendezvous(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, 7)?;
    let (src, len) = (1024u64, 300u32);
    let data = pattern(len as usize, 9);
    expect_ok("write_buf", b.write_buf(&r.cbuf, src as usize, &data))?;
    // The FIN comes into the client's receive queue.
    recv(b, &r.client, 77, vec![sge(&r.cmr, 3072, 64)])?;
    r.ops(b, &[add(1, 0, 5, vec![sge(&r.smr, 0, 512)]), add(2, 0, 6, vec![sge(&r.smr, 1024, 16)])])?;
    let rvh = |len: u32| {
        let mut v = (r.cmr.addr + src).to_be_bytes().to_vec();
        v.extend_from_slice(&r.cmr.rkey.to_be_bytes());
        v.extend_from_slice(&len.to_be_bytes());
        v
    };
    let mut req = tmh(RNDV, 0x11, 5);
    req.extend_from_slice(&rvh(len));
    r.send(b, 1, &req)?;
    check_eq("first completion: matched", tm_wc(b, &r.scq)?, (1001, 0, wc_opcode::TM_RECV, WcFlags::TM_MATCH, 0, 5))?;
    let fin = ok_cqe(b, &r.ccq, 77, wc_opcode::RECV)?;
    check_eq("the FIN's length", fin.byte_len, 32)?;
    let mut want_fin = tmh(FIN, 0x11, 5);
    want_fin.extend_from_slice(&rvh(len));
    check_eq("the FIN: the TMH as FIN, then the RVH", expect_ok("read_buf", b.read_buf(&r.cbuf, 3072, 32))?, want_fin)?;
    let second = (1001, 0, wc_opcode::TM_RECV, WcFlags::TM_DATA_VALID, len, 0);
    check_eq("second completion: data valid", tm_wc(b, &r.scq)?, second)?;
    check_eq("the tag's buffer: the sender's data", r.server_bytes(b, 0, len as usize)?, data)?;
    // A buffer smaller than the transfer: left to software, the headers in the buffer.
    let mut big = tmh(RNDV, 0, 6);
    big.extend_from_slice(&rvh(len));
    r.send(b, 2, &big)?;
    let wc = tm_wc(b, &r.scq)?;
    check_eq("too small (wr_id, status, flags)", (wc.0, wc.1, wc.3), (1002, wc_status::TM_RNDV_INCOMPLETE, MATCHED))?;
    check_eq("the headers, as much as fits", r.server_bytes(b, 1024, 16)?, big[..16].to_vec())?;
    no_cqe(b, &r.ccq)
}

fn sync_req(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, 7)?;
    r.send(b, 1, &tmh(EAGER, 0, 1))?;
    check_eq("unexpected", tm_wc(b, &r.scq)?, (500, 0, wc_opcode::TM_RECV, NONE, 16, 0))?;
    // An ADD made without the count (phase 0) while the device counts 1.
    r.ops(b, &[add(2, ops_flags::SIGNALED, 1, vec![sge(&r.smr, 0, 64)])])?;
    let wc = tm_wc(b, &r.scq)?;
    check_eq("ADD behind the device (opcode, flags)", (wc.2, wc.3), (wc_opcode::TM_ADD, WcFlags::TM_SYNC_REQ))?;
    // With IBV_OPS_TM_SYNC and the count, in step.
    let synced = SrqOpWr { flags: ops_flags::SIGNALED | ops_flags::TM_SYNC, unexpected_cnt: 1, ..add(3, 0, 2, vec![]) };
    r.ops(b, &[synced])?;
    let wc = tm_wc(b, &r.scq)?;
    check_eq("ADD in step (opcode, flags)", (wc.2, wc.3), (wc_opcode::TM_ADD, NONE))?;
    r.send(b, 2, &tmh(EAGER, 0, 1))?;
    let wc = tm_wc(b, &r.scq)?;
    check_eq("matching again (wr_id, flags)", (wc.0, wc.3), (1002, MATCHED))?;
    Ok(())
}
