//! RC atomics (items 121–127): compare-and-swap and fetch-and-add through `ibv_wr_atomic_*`
//! and `ibv_post_send`, their completions, the responder's checks (alignment, access) and its
//! replay of a duplicate request from its atomic replay cache.

use mlx5_dv::net_fault::opcode;
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, FaultRule, NetAction, NetFault, QpModify, QpState, SendFlags, SendWr,
    WrOp, event_type, link_layer, wc_opcode, wc_status,
};

use super::ctl;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_ok};

const DEV: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "atomics.cmp_swap_swaps_on_a_match_only", covers: &[121, 122], needs: DEV, run: cmp_swap },
    Case {
        name: "atomics.fetch_add_two_devices_and_wraps",
        covers: &[123],
        needs: &[Need::Mlx5Device, Need::TwoDevices],
        run: fetch_add,
    },
    Case { name: "atomics.misaligned_address_is_invalid_request", covers: &[124], needs: DEV, run: misaligned },
    Case { name: "atomics.need_remote_atomic_on_mr_and_qp", covers: &[125], needs: DEV, run: access },
    Case { name: "atomics.short_scatter_is_a_length_error", covers: &[126], needs: DEV, run: short_scatter },
    Case {
        name: "atomics.duplicate_request_is_replayed_once",
        covers: &[127],
        needs: &[Need::Mlx5Device, Need::SimControl],
        run: duplicate,
    },
];

/// What a connected QP grants here: the fixture's access and remote atomics.
const ATOMIC_QP: A = QP_ACCESS.union(A::REMOTE_ATOMIC);
/// An MR an atomic may target.
const ATOMIC_MR: A = A::LOCAL_WRITE.union(A::REMOTE_ATOMIC);

/// Two RC QPs, `a` on the first device and `s` on the second (or both on the first),
/// connected with `qp_access` on each side.
fn atomic_pair(b: &mut dyn Backend, env: &Env, two: bool, qp_access: A) -> Check<(Side, Side)> {
    let name_a = env.dev()?.to_string();
    let name_s = if two {
        env.peer_device.clone().ok_or_else(|| Verdict::skip("needs a second mlx5 device"))?
    } else {
        name_a.clone()
    };
    let mut sides = Vec::new();
    for (name, who) in [(&name_a, "requester"), (&name_s, "responder")] {
        let (ctx, pd, cq) = open(b, name)?;
        let attr = qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP);
        let qp = expect_ok(&format!("create the {who} QP"), b.create_qp(&attr))?;
        sides.push(Side { ctx, pd, cq, qp });
    }
    let (Some(s), Some(a)) = (sides.pop(), sides.pop()) else { return Err(Verdict::fail("two QPs", 2, 0)) };
    for (qp, peer_ctx, peer) in [(&a.qp, s.ctx, &s.qp), (&s.qp, a.ctx, &a.qp)] {
        let to = dest(b, peer_ctx, peer)?;
        for step in QpModify::connect(qp_access, to) {
            expect_ok(&format!("modify to {:?}", step.state), b.modify_qp(qp, &step))?;
        }
    }
    Ok((a, s))
}

/// An 8-byte target holding `value` (host byte order) at offset 8 of a 32-byte region
/// registered with `access`.
fn target(b: &mut dyn Backend, s: &Side, value: u64, access: A) -> Check<(mlx5_dv::Buf, mlx5_dv::Mr)> {
    let mut fill = pattern(32, 3);
    fill[8..16].copy_from_slice(&value.to_ne_bytes());
    region(b, s.pd, 32, &fill, access)
}

/// The u64 at byte `at` of a buffer, in host byte order.
fn word(b: &mut dyn Backend, buf: &mlx5_dv::Buf, at: usize) -> Check<u64> {
    let bytes = expect_ok("read_buf", b.read_buf(buf, at, 8))?;
    let arr: [u8; 8] = bytes.try_into().map_err(|b: Vec<u8>| Verdict::fail("8 bytes", 8, b.len()))?;
    Ok(u64::from_ne_bytes(arr))
}

fn cas(wr_id: u64, mr: &mlx5_dv::Mr, off: u64, compare: u64, swap: u64, sge: Vec<mlx5_dv::Sge>) -> WrOp {
    let (rkey, remote_addr) = (mr.rkey, mr.addr + off);
    WrOp::AtomicCmpSwp { wr_id, flags: SendFlags::SIGNALED, rkey, remote_addr, compare, swap, sge }
}

fn faa(wr_id: u64, mr: &mlx5_dv::Mr, off: u64, add: u64, sge: Vec<mlx5_dv::Sge>) -> WrOp {
    WrOp::AtomicFetchAdd { wr_id, flags: SendFlags::SIGNALED, rkey: mr.rkey, remote_addr: mr.addr + off, add, sge }
}

/// The `ibv_post_send` WR of the same atomic (`wr.atomic`).
fn legacy(op: WrOp) -> Check<SendWr> {
    SendWr::from_op(&op).ok_or_else(|| Verdict::fail("an ibv_send_wr for the atomic", "one", "none"))
}

/// A successful atomic completion: its opcode and its 8 bytes.
fn atomic_cqe(b: &mut dyn Backend, side: &Side, wr_id: u64, opcode: u32) -> Check {
    let wc = ok_cqe(b, &side.cq, wr_id, opcode)?;
    check_eq("the atomic's byte_len", wc.byte_len, 8)
}

fn cmp_swap(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = atomic_pair(b, env, false, ATOMIC_QP)?;
    let (sbuf, smr) = target(b, &s, 0x1111_2222_3333_4444, ATOMIC_MR)?;
    let (abuf, amr) = region(b, a.pd, 64, &[0xee; 64], A::LOCAL_WRITE)?;
    // No match (ibv_wr_atomic_cmp_swp): nothing written; the current value comes back.
    let miss = cas(1, &smr, 8, 0x1111_2222_3333_4445, 0x6666, vec![sge(&amr, 0, 8)]);
    expect_ok("ibv_wr_atomic_cmp_swp that does not match", b.post_send(&a.qp, &[miss]))?;
    atomic_cqe(b, &a, 1, wc_opcode::COMP_SWAP)?;
    check_eq("the value returned by a miss", word(b, &abuf, 0)?, 0x1111_2222_3333_4444)?;
    check_eq("the target after a miss", word(b, &sbuf, 8)?, 0x1111_2222_3333_4444)?;
    // A match (ibv_post_send): swapped; the original value lands in the scatter entry.
    let hit = legacy(cas(2, &smr, 8, 0x1111_2222_3333_4444, 0x5555, vec![sge(&amr, 16, 8)]))?;
    expect_ok("ibv_post_send IBV_WR_ATOMIC_CMP_AND_SWP that matches", b.post_send_wr(&a.qp, &[hit]))?;
    atomic_cqe(b, &a, 2, wc_opcode::COMP_SWAP)?;
    check_eq("the original value returned by a match", word(b, &abuf, 16)?, 0x1111_2222_3333_4444)?;
    let mut want = pattern(32, 3);
    want[8..16].copy_from_slice(&0x5555u64.to_ne_bytes());
    check_eq("the target region after a match (neighbours untouched)", contents(b, &sbuf)?, want)?;
    let mut awant = vec![0xee; 64];
    awant[..8].copy_from_slice(&0x1111_2222_3333_4444u64.to_ne_bytes());
    awant[16..24].copy_from_slice(&0x1111_2222_3333_4444u64.to_ne_bytes());
    check_eq("the requester's buffer: 8 bytes per atomic", contents(b, &abuf)?, awant)?;
    no_cqe(b, &s.cq)
}

fn fetch_add(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = atomic_pair(b, env, true, ATOMIC_QP)?;
    let (sbuf, smr) = target(b, &s, u64::MAX - 1, ATOMIC_MR)?;
    let (abuf, amr) = region(b, a.pd, 32, &[0; 32], A::LOCAL_WRITE)?;
    let wrs = [faa(1, &smr, 8, 5, vec![sge(&amr, 0, 8)]), faa(2, &smr, 8, 0x100, vec![sge(&amr, 8, 8)])];
    expect_ok("two ibv_wr_atomic_fetch_add", b.post_send(&a.qp, &wrs))?;
    atomic_cqe(b, &a, 1, wc_opcode::FETCH_ADD)?;
    atomic_cqe(b, &a, 2, wc_opcode::FETCH_ADD)?;
    check_eq("(first, second) original values", (word(b, &abuf, 0)?, word(b, &abuf, 8)?), (u64::MAX - 1, 3))?;
    check_eq("the sum, modulo 2^64", word(b, &sbuf, 8)?, 0x103)?;
    // ibv_post_send: the SGE's length is 8 whatever the WR says (set_data_ptr_seg_atomic).
    let wr = legacy(faa(3, &smr, 8, 1, vec![sge(&amr, 16, 16)]))?;
    expect_ok("ibv_post_send IBV_WR_ATOMIC_FETCH_AND_ADD", b.post_send_wr(&a.qp, &[wr]))?;
    atomic_cqe(b, &a, 3, wc_opcode::FETCH_ADD)?;
    check_eq("the third original value", word(b, &abuf, 16)?, 0x103)?;
    check_eq("the 8 bytes after it untouched", word(b, &abuf, 24)?, 0)?;
    check_eq("the target", word(b, &sbuf, 8)?, 0x104)
}

fn misaligned(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = atomic_pair(b, env, false, ATOMIC_QP)?;
    let (sbuf, smr) = target(b, &s, 7, ATOMIC_MR)?;
    let (_abuf, amr) = region(b, a.pd, 16, &[0; 16], A::LOCAL_WRITE)?;
    expect_ok(
        "fetch-and-add at an address 4 bytes off",
        b.post_send(&a.qp, &[faa(1, &smr, 4, 1, vec![sge(&amr, 0, 8)])]),
    )?;
    err_cqe(b, &a.cq, 1, wc_status::REM_INV_REQ_ERR)?;
    check_eq("the requester QP", expect_ok("query", b.query_qp_state(&a.qp))?, QpState::Err)?;
    check_eq("the responder QP", expect_ok("query", b.query_qp_state(&s.qp))?, QpState::Err)?;
    let ev = next_async_event(b, s.ctx)?.map(|e| (e.event_type, e.qp_num));
    check_eq("the responder's event", ev, Some((event_type::QP_REQ_ERR, Some(s.qp.qp_num))))?;
    let mut want = pattern(32, 3);
    want[8..16].copy_from_slice(&7u64.to_ne_bytes());
    check_eq("the target region untouched", contents(b, &sbuf)?, want)
}

fn access(b: &mut dyn Backend, env: &Env) -> Check {
    // The MR lacks REMOTE_ATOMIC (it has every other remote right).
    let (a, s) = atomic_pair(b, env, false, ATOMIC_QP)?;
    let (sbuf, smr) = target(b, &s, 9, A::LOCAL_WRITE | A::REMOTE_READ | A::REMOTE_WRITE)?;
    let (_abuf, amr) = region(b, a.pd, 16, &[0; 16], A::LOCAL_WRITE)?;
    expect_ok(
        "compare-and-swap into an MR without REMOTE_ATOMIC",
        b.post_send(&a.qp, &[cas(1, &smr, 8, 9, 1, vec![sge(&amr, 0, 8)])]),
    )?;
    err_cqe(b, &a.cq, 1, wc_status::REM_ACCESS_ERR)?;
    check_eq("the MR's target", word(b, &sbuf, 8)?, 9)?;
    // The QP lacks REMOTE_ATOMIC; the MR has it.
    let (a, s) = atomic_pair(b, env, false, QP_ACCESS)?;
    let (sbuf, smr) = target(b, &s, 9, ATOMIC_MR)?;
    let (_abuf, amr) = region(b, a.pd, 16, &[0; 16], A::LOCAL_WRITE)?;
    expect_ok(
        "fetch-and-add on a QP without REMOTE_ATOMIC",
        b.post_send(&a.qp, &[faa(1, &smr, 8, 1, vec![sge(&amr, 0, 8)])]),
    )?;
    err_cqe(b, &a.cq, 1, wc_status::REM_ACCESS_ERR)?;
    check_eq("the responder QP", expect_ok("query", b.query_qp_state(&s.qp))?, QpState::Err)?;
    check_eq("the QP's target", word(b, &sbuf, 8)?, 9)
}

fn short_scatter(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = atomic_pair(b, env, false, ATOMIC_QP)?;
    let (sbuf, smr) = target(b, &s, 40, ATOMIC_MR)?;
    let (_abuf, amr) = region(b, a.pd, 16, &[0; 16], A::LOCAL_WRITE)?;
    expect_ok("fetch-and-add into 4 bytes", b.post_send(&a.qp, &[faa(1, &smr, 8, 2, vec![sge(&amr, 0, 4)])]))?;
    err_cqe(b, &a.cq, 1, wc_status::LOC_LEN_ERR)?;
    check_eq("the target untouched", word(b, &sbuf, 8)?, 40)
}

/// Add rule `rule` to what device `device` sends.
pub(super) fn fault(b: &mut dyn Backend, device: &str, rule: NetFault) -> Check {
    let list = expect_ok("device_list", b.device_list())?;
    let i = list.iter().position(|d| d.name == device).ok_or_else(|| Verdict::fail("the device", device, list))?;
    let device = u32::try_from(i).unwrap_or(u32::MAX);
    expect_ok(&format!("add the network rule {rule:?}"), ctl(b)?.add_fault(FaultRule::Network { device, rule }))
}

fn duplicate(b: &mut dyn Backend, env: &Env) -> Check {
    ctl(b)?.clear_faults();
    let two = env.peer_device.is_some();
    let (a, s) = atomic_pair(b, env, two, ATOMIC_QP)?;
    if expect_ok("ibv_query_port", b.query_port(a.ctx, 1))?.link_layer != link_layer::ETHERNET {
        return Err(Verdict::skip("network fault rules act on RoCE packets; this port is InfiniBand"));
    }
    let dev_a = env.dev()?.to_string();
    let dev_s = if two { env.peer_device.clone().unwrap_or_default() } else { dev_a.clone() };
    // The first ATOMIC Acknowledge is lost: the requester times out and sends the request
    // again; every request the requester sends goes out twice.
    fault(b, &dev_s, NetFault::new(NetAction::Drop).opcode(opcode::ATOMIC_ACKNOWLEDGE))?;
    fault(b, &dev_a, NetFault::new(NetAction::Duplicate).opcode(opcode::FETCH_ADD).always())?;
    let (sbuf, smr) = target(b, &s, 1000, ATOMIC_MR)?;
    let (abuf, amr) = region(b, a.pd, 32, &[0; 32], A::LOCAL_WRITE)?;
    let wrs: Vec<_> = (0..3u64).map(|i| faa(i + 1, &smr, 8, 10, vec![sge(&amr, 8 * i, 8)])).collect();
    expect_ok("three fetch-and-adds of 10", b.post_send(&a.qp, &wrs))?;
    for i in 1..=3 {
        atomic_cqe(b, &a, i, wc_opcode::FETCH_ADD)?;
    }
    no_cqe(b, &a.cq)?;
    let got = (word(b, &abuf, 0)?, word(b, &abuf, 8)?, word(b, &abuf, 16)?);
    check_eq("the original values, each executed once", got, (1000, 1010, 1020))?;
    check_eq("the target: three additions, not more", word(b, &sbuf, 8)?, 1030)?;
    ctl(b)?.clear_faults();
    Ok(())
}
