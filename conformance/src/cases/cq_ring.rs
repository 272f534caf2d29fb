//! CQ rings as a program that polls them itself reads them: 128-byte CQEs (the `mlx5_cqe64`
//! in an entry's last 64 bytes) through resize and cleanup, CQs that ignore overrun, and
//! DEVX CQs of 128-byte entries.

use mlx5_dv::prm::cqe::{OWNER_MASK, opcode as cqe_op};
use mlx5_dv::prm::{self, opcode, queues::create_cq as c, status};
use mlx5_dv::{
    AccessFlags as A, Backend, Buf, ContextHandle, Cq, CqEntry, CqInitAttrEx, DvCqAttr, DvQpCreateFlags, Mr, PdHandle,
    Qp, cq_flags, dv_cq, event_type, wc_opcode, wc_status,
};

use super::devx::{cmd, devx_ctx, eqn_of, raw_pair_cq, raw_teardown, raw_write, wait_cqe};
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "cq_ring.entries_of_128_bytes_hold_the_cqe64_last",
        covers: &[326],
        needs: &[Need::Mlx5Device],
        run: entries_of_128,
    },
    Case {
        name: "cq_ring.resize_and_cleanup_keep_128_byte_entries",
        covers: &[327],
        needs: &[Need::Mlx5Device],
        run: resize_and_cleanup,
    },
    Case {
        name: "cq_ring.ignore_overrun_takes_one_more_than_capacity",
        covers: &[328],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: ignore_overrun,
    },
    Case {
        name: "cq_ring.devx_cq_of_128_byte_entries_and_oi",
        covers: &[329],
        needs: &[Need::VfioDevice, Need::Devx],
        run: devx_cq,
    },
];

/// Two connected RC QPs on one CQ, and a registered buffer (sources at 0, targets at 4096).
struct Rig {
    ctx: ContextHandle,
    pd: PdHandle,
    cq: Cq,
    a: Qp,
    b: Qp,
    buf: Buf,
    mr: Mr,
}

fn rig(b: &mut dyn Backend, env: &Env, attr: &CqInitAttrEx) -> Check<Rig> {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let cq = expect_ok("ibv_create_cq_ex / mlx5dv_create_cq", b.create_cq_ex(ctx, attr))?;
    let qa = expect_ok("create QP a", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let qb = expect_ok("create QP b", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &qa, ctx, &qb)?;
    connect(b, &qb, ctx, &qa)?;
    let (buf, mr) = region(b, pd, 8192, &pattern(4096, 9), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    Ok(Rig { ctx, pd, cq, a: qa, b: qb, buf, mr })
}

fn teardown(b: &mut dyn Backend, r: Rig) -> Check {
    for q in [&r.a, &r.b] {
        expect_ok("ibv_destroy_qp", b.destroy_qp(q))?;
    }
    expect_ok("ibv_dereg_mr", b.dereg_mr(&r.mr))?;
    expect_ok("ibv_destroy_cq", b.destroy_cq(&r.cq))?;
    expect_ok("ibv_dealloc_pd", b.dealloc_pd(r.pd))?;
    expect_ok("ibv_close_device", b.close_device(r.ctx))
}

fn wide(cqe: u32) -> CqInitAttrEx {
    let dv = DvCqAttr { comp_mask: dv_cq::MASK_CQE_SIZE, cqe_size: 128, ..DvCqAttr::default() };
    CqInitAttrEx { cqe, dv: Some(dv), ..CqInitAttrEx::default() }
}

/// A signalled 16-byte WRITE from `qp` into the target half.
fn write16(b: &mut dyn Backend, r: &Rig, qp: &Qp, wr_id: u64) -> Check {
    let op = write(wr_id, r.mr.rkey, r.mr.addr + 4096, vec![sge(&r.mr, 0, 16)]);
    expect_ok("RDMA WRITE", b.post_send(qp, &[op]))
}

/// Entry `n` of the ring, which must be software's (opcode not INVALID, ownership bit the
/// lap parity of `n`, both in the entry's last byte). Read after the completion was polled:
/// polling leaves the entry's bytes, whereas how many reads pass before a card's CQE shows is
/// timing, which a trace replayed elsewhere would not repeat.
fn owned(b: &mut dyn Backend, cq: &Cq, n: u32) -> Check<CqEntry> {
    let e = expect_ok("the ring entry (mlx5dv_init_obj's buf)", b.cq_entry(cq, n))?;
    let op_own = e.bytes.last().copied().unwrap_or(0xf0);
    let lap = u8::from(n & e.cqe_cnt != 0);
    if op_own >> 4 == cqe_op::INVALID || op_own & OWNER_MASK != lap {
        let got = format!("op_own 0x{op_own:02x}");
        return Err(Verdict::fail(format!("entry {n} of the ring"), "software-owned", got));
    }
    Ok(e)
}

/// The `mlx5_cqe64` of an entry: its last 64 bytes.
fn cqe64(e: &CqEntry) -> &[u8] {
    e.bytes.get(e.bytes.len().saturating_sub(64)..).unwrap_or_default()
}

fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).and_then(|x| x.try_into().ok()).map_or(0, u32::from_be_bytes)
}

/// A CQ of 128-byte CQEs: `mlx5dv_init_obj` reports `cqe_size` 128 and `cqe_cnt` the ring's
/// entries; a SEND's requester and responder CQEs sit in the last 64 bytes of entries 0 and
/// 1 (the responder's with `byte_cnt` and, scattered to the CQE, the message in the first
/// 64); `ibv_poll_cq` reads them; a few laps later each entry's ownership bit is its lap's
/// parity. A 64-byte CQ reports 64.
fn entries_of_128(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env, &wide(6))?;
    check_eq("the capacity of a CQ of 6", r.cq.cqe, 7)?;
    let e = expect_ok("entry 0 before any traffic", b.cq_entry(&r.cq, 0))?;
    check_eq("mlx5dv_init_obj's (cqe_size, cqe_cnt)", (e.cqe_size, e.cqe_cnt), (128, 8))?;
    check_eq("an entry's bytes", e.bytes.len(), 128)?;
    check_eq("a fresh entry's opcode", cqe64(&e).get(63).map(|x| x >> 4), Some(cqe_op::INVALID))?;
    let msg = pattern(48, 5);
    expect_ok("the message", b.write_buf(&r.buf, 0, &msg))?;
    recv(b, &r.b, 7, vec![sge(&r.mr, 4096, 64)])?;
    let send = mlx5_dv::WrOp::Send { wr_id: 8, flags: mlx5_dv::SendFlags::SIGNALED, sge: vec![sge(&r.mr, 0, 48)] };
    expect_ok("SEND of 48 bytes", b.post_send(&r.a, &[send]))?;
    let mut wcs = poll(b, &r.cq, 2)?;
    let (mut req, mut resp) = (false, false);
    for n in 0..2 {
        let e = owned(b, &r.cq, n)?;
        let c = cqe64(&e);
        let qpn = be32(c, 56) & 0xff_ffff;
        match c.get(63).map(|x| x >> 4) {
            Some(cqe_op::REQ) => {
                check_eq("the requester CQE's QP (sop_drop_qpn at 64 + 56)", qpn, r.a.qp_num)?;
                req = true;
            }
            op => {
                check_eq("the responder CQE's opcode", op, Some(cqe_op::RESP_SEND))?;
                check_eq("the responder CQE's QP", qpn, r.b.qp_num)?;
                check_eq("the responder CQE's byte_cnt (64 + 44)", be32(c, 44), 48)?;
                if c.get(63).is_some_and(|x| x & 0x8 != 0) {
                    check_eq("MLX5_INLINE_SCATTER_64: the message in the first 64 bytes", &e.bytes[..48], &msg[..])?;
                }
                resp = true;
            }
        }
    }
    check_eq("a requester and a responder CQE in entries 0 and 1", (req, resp), (true, true))?;
    wcs.sort_by_key(|w| w.wr_id);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    check_eq(
        "ibv_poll_cq of the two",
        got,
        vec![(7, wc_status::SUCCESS, wc_opcode::RECV), (8, wc_status::SUCCESS, wc_opcode::SEND)],
    )?;
    let landed = expect_ok("the receive buffer", b.read_buf(&r.buf, 4096, 48))?;
    check_eq("the SEND's bytes in the receive buffer", landed, msg)?;
    for n in 2..26u32 {
        write16(b, &r, &r.a, u64::from(n))?;
        ok_cqe(b, &r.cq, u64::from(n), wc_opcode::RDMA_WRITE)?;
        let e = owned(b, &r.cq, n)?;
        check_eq(&format!("entry {n}'s opcode"), cqe64(&e).get(63).map(|x| x >> 4), Some(cqe_op::REQ))?;
    }
    let narrow = DvCqAttr { comp_mask: dv_cq::MASK_CQE_SIZE, cqe_size: 64, ..DvCqAttr::default() };
    let cq64 = expect_ok("a CQ of 64-byte CQEs", b.create_dv_cq(r.ctx, 6, 0, &narrow))?;
    let e = expect_ok("its entry 0", b.cq_entry(&cq64, 0))?;
    check_eq("its (cqe_size, bytes)", (e.cqe_size, e.bytes.len()), (64, 64))?;
    expect_ok("ibv_destroy_cq", b.destroy_cq(&cq64))?;
    teardown(b, r)
}

/// `ibv_resize_cq` of a 128-byte CQ with two completions unread keeps 128-byte entries and
/// both completions; a QP destroyed with a completion unread leaves only the other QP's
/// (`mlx5_cq_clean` moves whole entries).
fn resize_and_cleanup(b: &mut dyn Backend, env: &Env) -> Check {
    let mut r = rig(b, env, &wide(6))?;
    write16(b, &r, &r.a, 1)?;
    write16(b, &r, &r.a, 2)?;
    r.cq = expect_ok("ibv_resize_cq(20)", b.resize_cq(&r.cq, 20))?;
    check_eq("the capacity after the resize", r.cq.cqe, 31)?;
    let e = expect_ok("an entry after the resize", b.cq_entry(&r.cq, 0))?;
    check_eq("(cqe_size, cqe_cnt) after the resize", (e.cqe_size, e.cqe_cnt), (128, 32))?;
    ok_cqe(b, &r.cq, 1, wc_opcode::RDMA_WRITE)?;
    ok_cqe(b, &r.cq, 2, wc_opcode::RDMA_WRITE)?;
    // Polling leaves the entries' bytes: the last of the two, in the new ring's size.
    let e = owned(b, &r.cq, 2)?;
    let seen = (e.bytes.len(), cqe64(&e).get(63).map(|x| x >> 4));
    check_eq("the entry the second completion was polled from", seen, (128, Some(cqe_op::REQ)))?;
    // A third QP, connected to itself, whose completion comes between the others' and is
    // taken out when it is destroyed.
    let qc = expect_ok("create QP c", b.create_qp(&qp_attr(r.pd, &r.cq, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &qc, r.ctx, &qc)?;
    write16(b, &r, &r.b, 3)?;
    write16(b, &r, &qc, 4)?;
    write16(b, &r, &r.a, 5)?;
    expect_ok("ibv_destroy_qp(c) with its completion unread", b.destroy_qp(&qc))?;
    let wcs = poll(b, &r.cq, 2)?;
    // Two QPs' completions: the device may run either first.
    let mut ids: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    ids.sort_unstable();
    check_eq("the completions left", ids, vec![(3, wc_status::SUCCESS), (5, wc_status::SUCCESS)])?;
    no_cqe(b, &r.cq)?;
    teardown(b, r)
}

/// The general capability page's `cq_oi`, through DEVX.
fn cq_oi(b: &mut dyn Backend, env: &Env) -> Check<bool> {
    let ctx = devx_ctx(b, env)?;
    let q = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, prm::query_hca_cap::OP_MOD_GENERAL_CUR);
    let out = expect_ok("QUERY_HCA_CAP (general)", b.devx_general_cmd(ctx, &q, prm::query_hca_cap::OUT_SIZE))?;
    let page = out.get(prm::query_hca_cap::CAPABILITY_BYTE..).unwrap_or_default();
    let on = prm::cmd_hca_cap::CQ_OI.get(page).map_err(|e| Verdict::fail("cq_oi", "readable", e))? != 0;
    expect_ok("ibv_close_device", b.close_device(ctx))?;
    Ok(on)
}

/// With `cq_oi`, a CQ made with `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN` takes four completions
/// with room for three, all polled in order, and raises no CQ error, where a plain CQ
/// overruns (`IBV_EVENT_CQ_ERR`); without `cq_oi` the firmware refuses it (EINVAL). An
/// unknown creation flag is EINVAL.
fn ignore_overrun(b: &mut dyn Backend, env: &Env) -> Check {
    let oi = cq_oi(b, env)?;
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    let bad = CqInitAttrEx { cqe: 3, comp_mask: cq_flags::MASK_FLAGS, flags: 1 << 2, ..CqInitAttrEx::default() };
    expect_errno("creation flag 0x4", b.create_cq_ex(ctx, &bad), mlx5_dv::errno::EINVAL)?;
    let ignoring = CqInitAttrEx { flags: cq_flags::IGNORE_OVERRUN, ..bad };
    if !oi {
        expect_errno("IGNORE_OVERRUN without cq_oi", b.create_cq_ex(ctx, &ignoring), mlx5_dv::errno::EINVAL)?;
        expect_ok("ibv_close_device", b.close_device(ctx))?;
        return Err(Verdict::skip("the device has no cq_oi: only its refusal was checked"));
    }
    expect_ok("ibv_close_device", b.close_device(ctx))?;
    for ignore in [false, true] {
        let attr = if ignore { ignoring } else { CqInitAttrEx { cqe: 3, ..CqInitAttrEx::default() } };
        let r = rig(b, env, &attr)?;
        check_eq("the capacity of a CQ of 3", r.cq.cqe, 3)?;
        for n in 0..4 {
            write16(b, &r, &r.a, n)?;
        }
        if ignore {
            for n in 0..4 {
                ok_cqe(b, &r.cq, n, wc_opcode::RDMA_WRITE)?;
            }
            let ev = expect_ok("ibv_get_async_event", b.get_async_event(r.ctx))?;
            check_eq("async events of a CQ that ignores overrun", ev, None)?;
        } else {
            let ev = next_async_event(b, r.ctx)?.map(|e| (e.event_type, e.cq));
            check_eq("the overrun's event", ev, Some((event_type::CQ_ERR, Some(r.cq.handle))))?;
        }
        teardown(b, r)?;
    }
    Ok(())
}

/// A DEVX CQ with `cqc.cqe_sz` 1 has 128-byte entries: a raw WRITE's CQE is the last 64
/// bytes of entry 0. `cqc.oi` is taken where `cq_oi` is set (QUERY_CQ shows it) and is
/// BAD_PARAM where it is not.
fn devx_cq(b: &mut dyn Backend, env: &Env) -> Check {
    let oi = cq_oi(b, env)?;
    let p = raw_pair_cq(b, env, 0, 128)?;
    raw_write(b, &p, p.mr.rkey)?;
    let e = wait_cqe(b, &p)?;
    check_eq("the entry's bytes", e.len(), 128)?;
    let cqe = &e[64..];
    check_eq("its opcode (byte 127)", cqe[63] >> 4, cqe_op::REQ)?;
    check_eq("its QP (sop_drop_qpn at 64 + 56)", be32(cqe, 56) & 0xff_ffff, p.qps[0].1)?;
    // A second CQ, with overrun ignore, of 16 entries in the pair's umem past the WRITE's
    // target.
    let fields = [
        (c::LOG_CQ_SIZE, 4),
        (c::OI, 1),
        (c::UAR_PAGE, u64::from(p.uar.page_id)),
        (c::C_EQN, u64::from(eqn_of(&p.eq))),
        (c::CQ_UMEM_VALID, 1),
        (c::CQ_UMEM_ID, u64::from(p.umem.umem_id)),
        (c::CQ_UMEM_OFFSET, 0x5800),
        (c::DBR_UMEM_VALID, 1),
        (c::DBR_UMEM_ID, u64::from(p.umem.umem_id)),
        (c::DB_RECORD_ADDR, 0x10c0),
    ];
    let input = cmd(opcode::CREATE_CQ, c::IN_SIZE, &fields);
    let r = b.devx_obj_create(p.ctx, &input, c::SIZE);
    let result = if oi {
        let cq = expect_ok("CREATE_CQ with cqc.oi", r)?;
        let cqn = c::CQN.get(&cq.out).unwrap_or(0);
        let q = cmd(opcode::QUERY_CQ, 16, &[(c::CQN, cqn)]);
        let out = expect_ok("QUERY_CQ", b.devx_obj_query(cq.handle, &q, c::IN_SIZE))?;
        let shown = c::OI.get(&out).ok();
        expect_ok("destroy the CQ", b.devx_obj_destroy(cq.handle))?;
        check_eq("QUERY_CQ's cqc.oi", shown, Some(1))
    } else {
        let st = r.as_ref().err().and_then(|e| e.cmd_status()).map(|s| s.status);
        expect_errno("CREATE_CQ with cqc.oi without cq_oi", r, mlx5_dv::errno::EREMOTEIO)?;
        check_eq("its status", st, Some(status::BAD_PARAM_ERR))
    };
    raw_teardown(b, p)?;
    result
}
