//! The reliable transport recovering from a network's faults (items 115–120): loss,
//! duplication, reordering, delay and corruption of RoCE v2 packets, added as network fault
//! rules through the simulator's control interface; retries counted to the last one.

use mlx5_dv::net_fault::opcode;
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, FaultRule, NetAction, NetFault, Qp, QpAttrExt, QpDest, QpModify,
    QpState, SendFlags, WrOp, link_layer, qp_type, wc_opcode, wc_status,
};

use super::ctl;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device, Need::SimControl];

pub(super) const CASES: &[Case] = &[
    Case { name: "net.lost_packets_are_sent_again_once_in_order", covers: &[115], needs: NEEDS, run: lost },
    Case { name: "net.duplicated_packets_take_effect_once", covers: &[116], needs: NEEDS, run: duplicated },
    Case { name: "net.retry_cnt_counts_the_tries_after_the_first", covers: &[117], needs: NEEDS, run: retry_cnt },
    Case { name: "net.rnr_retry_counts_and_seven_waits", covers: &[118], needs: NEEDS, run: rnr },
    Case { name: "net.reordered_delayed_corrupted_recovered", covers: &[119], needs: NEEDS, run: reordered },
    Case { name: "net.lost_read_response_is_read_again", covers: &[120], needs: NEEDS, run: lost_read },
    Case {
        name: "net.lost_atomic_answer_is_asked_again_by_the_next",
        covers: &[128],
        needs: NEEDS,
        run: lost_atomic_answer,
    },
];

/// `IBV_MTU_256`: a message of a kilobyte takes four packets.
const MTU_256: u32 = 1;
/// The ACK timeout: 4.096 µs × 2^8, about 1 ms.
const TIMEOUT: u8 = 8;

/// The transport attributes of a connection.
#[derive(Clone, Copy)]
struct Retries {
    retry_cnt: u8,
    rnr_retry: u8,
    /// `max_rd_atomic` and `max_dest_rd_atomic`, with remote atomics granted; 0: neither
    /// (the defaults).
    rd_atomic: u8,
}

const PATIENT: Retries = Retries { retry_cnt: 7, rnr_retry: 7, rd_atomic: 0 };

/// Two RC QPs connected with a 256-byte path MTU, on two devices when the run has a second
/// one, else on one: `(requester, responder, index of each one's device)`.
struct Link {
    a: Side,
    s: Side,
    dev_a: u32,
    dev_s: u32,
}

pub(super) fn device_index(b: &mut dyn Backend, name: &str) -> Check<u32> {
    let list = expect_ok("device_list", b.device_list())?;
    let i = list.iter().position(|d| d.name == name).ok_or_else(|| Verdict::fail("the device listed", name, list))?;
    Ok(u32::try_from(i).unwrap_or(u32::MAX))
}

fn connect_with(b: &mut dyn Backend, qp: &Qp, mut dest: QpDest, r: Retries) -> Check {
    dest.path_mtu = MTU_256;
    let ext = QpAttrExt {
        timeout: TIMEOUT,
        retry_cnt: r.retry_cnt,
        rnr_retry: r.rnr_retry,
        min_rnr_timer: 1,
        ..QpAttrExt::defaults()
    };
    let (ext, access) = match r.rd_atomic {
        0 => (ext, QP_ACCESS),
        n => (QpAttrExt { max_rd_atomic: n, max_dest_rd_atomic: n, ..ext }, QP_ACCESS.union(A::REMOTE_ATOMIC)),
    };
    for (from, to) in [(QpState::Reset, QpState::Init), (QpState::Init, QpState::Rtr), (QpState::Rtr, QpState::Rts)] {
        let (required, _) = mlx5_dv::qp_transition(qp_type::RC, from, to)
            .ok_or_else(|| Verdict::fail("a transition of RC", format!("{from:?} -> {to:?}"), "none"))?;
        let ext = QpAttrExt { mask: mlx5_dv::QpAttrMask::STATE | required, ..ext };
        let path = (to == QpState::Rtr).then_some(dest);
        expect_ok(&format!("modify to {to:?}"), b.modify_qp(qp, &QpModify::exact(to, access, path, ext)))?;
    }
    Ok(())
}

fn link(b: &mut dyn Backend, env: &Env, r: Retries) -> Check<Link> {
    ctl(b)?.clear_faults();
    let name_a = env.dev()?.to_string();
    let (ctx, pd, cq) = open(b, &name_a)?;
    let port = expect_ok("ibv_query_port", b.query_port(ctx, 1))?;
    if port.link_layer != link_layer::ETHERNET {
        return Err(Verdict::skip("network fault rules act on RoCE packets; this port is InfiniBand"));
    }
    let qa = expect_ok("create the requester QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let a = Side { ctx, pd, cq, qp: qa };
    let name_s = env.peer_device.clone().unwrap_or_else(|| name_a.clone());
    let (ctx, pd, cq) = open(b, &name_s)?;
    let qs = expect_ok("create the responder QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let s = Side { ctx, pd, cq, qp: qs };
    let to_s = dest(b, s.ctx, &s.qp)?;
    let to_a = dest(b, a.ctx, &a.qp)?;
    connect_with(b, &a.qp, to_s, r)?;
    connect_with(b, &s.qp, to_a, r)?;
    let (dev_a, dev_s) = (device_index(b, &name_a)?, device_index(b, &name_s)?);
    Ok(Link { a, s, dev_a, dev_s })
}

/// Add rule `rule` to what device `device` sends.
pub(super) fn fault(b: &mut dyn Backend, device: u32, rule: NetFault) -> Check {
    expect_ok(&format!("add the network rule {rule:?}"), ctl(b)?.add_fault(FaultRule::Network { device, rule }))
}

/// A registered region of `len` bytes filled with `fill`'s pattern, with remote access.
fn target(b: &mut dyn Backend, side: &Side, len: usize, seed: u8) -> Check<(mlx5_dv::Buf, mlx5_dv::Mr)> {
    region(b, side.pd, len, &pattern(len, seed), QP_ACCESS)
}

/// Require `n` successful completions with wr_ids 1..=n, in order, and `opcode`.
fn in_order(b: &mut dyn Backend, cq: &mlx5_dv::Cq, n: u64, opcode: u32) -> Check {
    let wcs = poll(b, cq, n as usize)?;
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    let want: Vec<_> = (1..=n).map(|i| (i, wc_status::SUCCESS, opcode)).collect();
    check_eq("completions (wr_id, status, opcode), in order", got, want)?;
    no_cqe(b, cq)
}

/// WRITE four 1000-byte messages (four packets each) from `a` to `s`; check the completions
/// and that `s` holds exactly their bytes.
fn four_writes(b: &mut dyn Backend, l: &Link) -> Check {
    let (sbuf, smr) = target(b, &l.s, 8192, 0)?;
    let (_abuf, amr) = target(b, &l.a, 4096, 9)?;
    let wrs: Vec<_> =
        (0..4u64).map(|i| write(i + 1, smr.rkey, smr.addr + 2000 * i, vec![sge(&amr, 10 * i, 1000)])).collect();
    expect_ok("post four RDMA WRITEs", b.post_send(&l.a.qp, &wrs))?;
    in_order(b, &l.a.cq, 4, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(8192, 0);
    let from = pattern(4096, 9);
    for i in 0..4usize {
        want[2000 * i..2000 * i + 1000].copy_from_slice(&from[10 * i..10 * i + 1000]);
    }
    check_eq("the responder's memory", contents(b, &sbuf)?, want)
}

fn lost(b: &mut dyn Backend, env: &Env) -> Check {
    let l = link(b, env, PATIENT)?;
    // The second message's second packet, then the third message's first, lost once each.
    fault(b, l.dev_a, NetFault::new(NetAction::Drop).opcode(opcode::WRITE_MIDDLE).skip(2))?;
    fault(b, l.dev_a, NetFault::new(NetAction::Drop).opcode(opcode::WRITE_FIRST).skip(2))?;
    // An ACK lost on the way back.
    fault(b, l.dev_s, NetFault::new(NetAction::Drop).opcode(opcode::ACKNOWLEDGE))?;
    four_writes(b, &l)
}

fn duplicated(b: &mut dyn Backend, env: &Env) -> Check {
    let l = link(b, env, PATIENT)?;
    fault(b, l.dev_a, NetFault::new(NetAction::Duplicate).always())?;
    fault(b, l.dev_s, NetFault::new(NetAction::Duplicate).always())?;
    four_writes(b, &l)?;
    // Three SENDs of 600 bytes (three packets each), every packet sent twice, into four
    // receives: three receive completions, and the fourth receive still waits.
    let (rbuf, rmr) = target(b, &l.s, 4 * 1024, 0)?;
    let (_sbuf, smr) = target(b, &l.a, 4096, 5)?;
    for i in 0..4u64 {
        recv(b, &l.s.qp, 100 + i, vec![sge(&rmr, 1024 * i, 1024)])?;
    }
    let sends: Vec<_> = (0..3u64)
        .map(|i| WrOp::Send { wr_id: i + 1, flags: SendFlags::SIGNALED, sge: vec![sge(&smr, 100 * i, 600)] })
        .collect();
    expect_ok("post three SENDs", b.post_send(&l.a.qp, &sends))?;
    in_order(b, &l.a.cq, 3, wc_opcode::SEND)?;
    let got: Vec<_> = poll(b, &l.s.cq, 3)?.iter().map(|w| (w.wr_id, w.status, w.byte_len)).collect();
    check_eq("receive completions, one per SEND", got, (0..3).map(|i| (100 + i, wc_status::SUCCESS, 600)).collect())?;
    no_cqe(b, &l.s.cq)?;
    ctl(b)?.clear_faults();
    let last = WrOp::Send { wr_id: 4, flags: SendFlags::SIGNALED, sge: vec![sge(&smr, 0, 8)] };
    expect_ok("post a fourth SEND", b.post_send(&l.a.qp, &[last]))?;
    ok_cqe(b, &l.a.cq, 4, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &l.s.cq, 103, wc_opcode::RECV)?;
    check_eq("the fourth SEND's length", wc.byte_len, 8)?;
    let mut want = pattern(4096, 0);
    let from = pattern(4096, 5);
    for i in 0..3usize {
        want[1024 * i..1024 * i + 600].copy_from_slice(&from[100 * i..100 * i + 600]);
    }
    want[3072..3080].copy_from_slice(&from[..8]);
    check_eq("the receive buffers", contents(b, &rbuf)?, want)
}

/// A WRITE of 100 bytes whose request is lost `losses` times, on a QP with `retry_cnt` 3.
fn write_lost(b: &mut dyn Backend, env: &Env, losses: u32) -> Check<(Link, Vec<u8>, Vec<u8>)> {
    let l = link(b, env, Retries { retry_cnt: 3, rnr_retry: 0, rd_atomic: 0 })?;
    // The first WRITE's packet (its PSN is the QP's first): the second's goes through.
    let first = NetFault::new(NetAction::Drop).opcode(opcode::WRITE_ONLY).psn(QpAttrExt::defaults().sq_psn);
    fault(b, l.dev_a, first.times(losses))?;
    let (sbuf, smr) = target(b, &l.s, 256, 0)?;
    let (_abuf, amr) = target(b, &l.a, 256, 7)?;
    let wrs =
        [write(1, smr.rkey, smr.addr, vec![sge(&amr, 0, 100)]), write(2, smr.rkey, smr.addr, vec![sge(&amr, 0, 1)])];
    expect_ok("post two RDMA WRITEs", b.post_send(&l.a.qp, &wrs))?;
    let wcs: Vec<_> = poll(b, &l.a.cq, 2)?.iter().map(|w| (w.wr_id, w.status)).collect();
    let mem = contents(b, &sbuf)?;
    ctl(b)?.clear_faults();
    Ok((l, wcs.iter().flat_map(|(i, s)| [*i as u8, *s as u8]).collect(), mem))
}

fn retry_cnt(b: &mut dyn Backend, env: &Env) -> Check {
    // Lost three times: the third retry gets through.
    let (_, wcs, mem) = write_lost(b, env, 3)?;
    check_eq("(wr_id, status) after three losses", wcs, vec![1, 0, 2, 0])?;
    let mut want = pattern(256, 0);
    want[..100].copy_from_slice(&pattern(256, 7)[..100]);
    check_eq("the WRITE landed", mem, want)?;
    // Lost four times: RETRY_EXC_ERR, the next WR flushed, nothing written.
    let (l, wcs, mem) = write_lost(b, env, 4)?;
    let (exc, flush) = (wc_status::RETRY_EXC_ERR as u8, wc_status::WR_FLUSH_ERR as u8);
    check_eq("(wr_id, status) after four losses", wcs, vec![1, exc, 2, flush])?;
    check_eq("the responder's memory", mem, pattern(256, 0))?;
    check_eq("the requester QP", expect_ok("query", b.query_qp_state(&l.a.qp))?, QpState::Err)
}

fn rnr(b: &mut dyn Backend, env: &Env) -> Check {
    // rnr_retry 2, no receive posted: the first try and two retries meet RNR NAKs; one of the
    // NAKs lost on the way counts as an ACK timeout, not an RNR retry.
    let l = link(b, env, Retries { retry_cnt: 7, rnr_retry: 2, rd_atomic: 0 })?;
    fault(b, l.dev_s, NetFault::new(NetAction::Drop).opcode(opcode::ACKNOWLEDGE))?;
    let (_abuf, amr) = target(b, &l.a, 64, 3)?;
    let send = |id| WrOp::Send { wr_id: id, flags: SendFlags::SIGNALED, sge: vec![sge(&amr, 0, 16)] };
    expect_ok("post a SEND with no receive posted", b.post_send(&l.a.qp, &[send(1)]))?;
    err_cqe(b, &l.a.cq, 1, wc_status::RNR_RETRY_EXC_ERR)?;
    check_eq("the requester QP", expect_ok("query", b.query_qp_state(&l.a.qp))?, QpState::Err)?;
    no_cqe(b, &l.s.cq)?;
    ctl(b)?.clear_faults();
    // rnr_retry 7: the SEND waits for a receive, then lands in it.
    let l = link(b, env, PATIENT)?;
    fault(b, l.dev_a, NetFault::new(NetAction::Duplicate).opcode(opcode::SEND_ONLY))?;
    let (_abuf, amr) = target(b, &l.a, 64, 3)?;
    let (rbuf, rmr) = target(b, &l.s, 64, 0)?;
    let send = WrOp::Send { wr_id: 2, flags: SendFlags::SIGNALED, sge: vec![sge(&amr, 0, 16)] };
    expect_ok("post a SEND with no receive posted", b.post_send(&l.a.qp, &[send]))?;
    no_cqe(b, &l.a.cq)?;
    recv(b, &l.s.qp, 7, vec![sge(&rmr, 0, 64)])?;
    ok_cqe(b, &l.a.cq, 2, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &l.s.cq, 7, wc_opcode::RECV)?;
    check_eq("the SEND's length", wc.byte_len, 16)?;
    let mut want = pattern(64, 0);
    want[..16].copy_from_slice(&pattern(64, 3)[..16]);
    check_eq("the receive buffer", contents(b, &rbuf)?, want)
}

fn reordered(b: &mut dyn Backend, env: &Env) -> Check {
    let l = link(b, env, PATIENT)?;
    // The first message's first packet held behind its second; the second message's ACK (or
    // the first answer after it) held for three ACK timeouts; a packet of the third corrupted.
    fault(b, l.dev_a, NetFault::new(NetAction::Reorder).opcode(opcode::WRITE_FIRST))?;
    fault(b, l.dev_s, NetFault::new(NetAction::Delay { ns: 3_200_000 }).opcode(opcode::ACKNOWLEDGE).skip(1))?;
    fault(
        b,
        l.dev_a,
        NetFault::new(NetAction::Corrupt { offset: 40, xor: 0x5a }).opcode(opcode::WRITE_MIDDLE).skip(4),
    )?;
    four_writes(b, &l)
}

fn lost_read(b: &mut dyn Backend, env: &Env) -> Check {
    let l = link(b, env, PATIENT)?;
    // The responder's second READ response packet is lost, then its last one of the resend.
    fault(b, l.dev_s, NetFault::new(NetAction::Drop).opcode(opcode::READ_RESPONSE_MIDDLE))?;
    fault(b, l.dev_s, NetFault::new(NetAction::Drop).opcode(opcode::READ_RESPONSE_LAST).skip(1))?;
    let (_sbuf, smr) = target(b, &l.s, 2048, 4)?;
    let (abuf, amr) = region(b, l.a.pd, 2048, &[], A::LOCAL_WRITE)?;
    let read = WrOp::RdmaRead {
        wr_id: 1,
        flags: SendFlags::SIGNALED,
        rkey: smr.rkey,
        remote_addr: smr.addr + 24,
        sge: vec![sge(&amr, 0, 1000)],
    };
    expect_ok("post an RDMA READ of 1000 bytes", b.post_send(&l.a.qp, &[read]))?;
    let wc = ok_cqe(b, &l.a.cq, 1, wc_opcode::RDMA_READ)?;
    check_eq("the READ's length", wc.byte_len, 1000)?;
    let got = contents(b, &abuf)?;
    check_eq("the bytes read", got.get(..1000).map(<[u8]>::to_vec), Some(pattern(2048, 4)[24..1024].to_vec()))?;
    Ok(())
}

fn lost_atomic_answer(b: &mut dyn Backend, env: &Env) -> Check {
    // retry_cnt 1 and 16 atomics outstanding: the first one's answer is lost, then the
    // seventh request. The second answer shows the first lost: it is asked for again then,
    // not after the ACK timeout, and the sequence error from before that retry starts none.
    let l = link(b, env, Retries { retry_cnt: 1, rnr_retry: 0, rd_atomic: 16 })?;
    fault(b, l.dev_s, NetFault::new(NetAction::Drop).opcode(opcode::ATOMIC_ACKNOWLEDGE))?;
    fault(b, l.dev_a, NetFault::new(NetAction::Drop).opcode(opcode::FETCH_ADD).skip(6))?;
    let before = expect_ok("the transport counters", ctl(b)?.transport_counters(l.dev_a))?;
    let (sbuf, smr) = region(b, l.s.pd, 8, &[0; 8], A::LOCAL_WRITE.union(A::REMOTE_ATOMIC))?;
    let (abuf, amr) = region(b, l.a.pd, 16 * 8, &[0xee; 16 * 8], A::LOCAL_WRITE)?;
    let wrs: Vec<_> = (0..16u64)
        .map(|i| WrOp::AtomicFetchAdd {
            wr_id: i + 1,
            flags: SendFlags::SIGNALED,
            rkey: smr.rkey,
            remote_addr: smr.addr,
            add: 1,
            sge: vec![sge(&amr, 8 * i, 8)],
        })
        .collect();
    expect_ok("post 16 fetch-and-adds of 1", b.post_send(&l.a.qp, &wrs))?;
    in_order(b, &l.a.cq, 16, wc_opcode::FETCH_ADD)?;
    let got: Vec<u64> =
        contents(b, &abuf)?.chunks(8).map(|c| c.try_into().map_or(u64::MAX, u64::from_ne_bytes)).collect();
    check_eq("the values returned: each atomic executed once, in order", got, (0..16).collect::<Vec<u64>>())?;
    check_eq("the counter", contents(b, &sbuf)?, 16u64.to_ne_bytes().to_vec())?;
    let after = expect_ok("the transport counters", ctl(b)?.transport_counters(l.dev_a))?;
    let delta = |f: fn(&mlx5_dv::TransportCounters) -> u64| f(&after).saturating_sub(f(&before));
    check_eq(
        "(implied NAKs, ACK timeouts) of the requester's device",
        (delta(|c| c.implied_nak_seq_err), delta(|c| c.local_ack_timeout_err)),
        (1, 0),
    )?;
    ctl(b)?.clear_faults();
    Ok(())
}
