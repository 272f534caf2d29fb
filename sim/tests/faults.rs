//! Data-path fault rules (`FaultRule::Completion`, `FaultRule::Corrupt`) and application
//! memory registered with `Simulator::register_memory`.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, Buf, Cq, DvQpInitAttr, FaultRule, Mr, PdHandle, Qp, QpCap, QpDest, QpInitAttr, QpModify, QpState,
    SendFlags, Sge, WrOp, dv_qp, wc_status,
};
use mlx5_sim::{ShippedProfiles, Simulator};

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);
const RDMA_WRITE: u8 = 0x08;

struct Pair {
    sim: Simulator,
    pd: PdHandle,
    qp: Qp,
    cq: Cq,
}

fn pair() -> Pair {
    let mut sim = Simulator::with_profile("cx7").unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 16).unwrap();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 0 };
    let attr = QpInitAttr::rc(
        pd,
        cq.handle,
        cap,
        Some(DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE)),
    );
    let qp = sim.create_qp(&attr).unwrap();
    let peer = sim.create_qp(&attr).unwrap();
    for (q, p) in [(&qp, &peer), (&peer, &qp)] {
        for step in QpModify::connect(ACCESS, QpDest::to(p, &sim.query_port(ctx, 1).unwrap())) {
            sim.modify_qp(q, &step).unwrap();
        }
    }
    Pair { sim, pd, qp, cq }
}

fn buf(p: &mut Pair, data: &[u8]) -> (Buf, Mr) {
    let b = p.sim.alloc_buf(data.len()).unwrap();
    p.sim.write_buf(&b, 0, data).unwrap();
    let mr = p.sim.reg_mr(p.pd, b.addr, data.len() as u64, ACCESS).unwrap();
    (b, mr)
}

fn write(src: &Mr, dst: &Mr, len: u32) -> WrOp {
    WrOp::RdmaWrite {
        wr_id: 7,
        flags: SendFlags::SIGNALED,
        rkey: dst.rkey,
        remote_addr: dst.addr,
        sge: vec![Sge { addr: src.addr, length: len, lkey: src.lkey }],
    }
}

#[test]
fn a_completion_rule_fails_the_matched_wqe_after_its_skips() {
    let mut p = pair();
    let (_, src) = buf(&mut p, &[1; 64]);
    let (dst_buf, dst) = buf(&mut p, &[0; 64]);
    let rule = FaultRule::Completion {
        wqe_opcode: RDMA_WRITE,
        status: wc_status::REM_ACCESS_ERR,
        vendor_err: 0x99,
        skip: 1,
        times: 1,
    };
    p.sim.add_fault(rule).unwrap();
    p.sim.post_send(&p.qp, &[write(&src, &dst, 64)]).unwrap();
    let wc = p.sim.poll_cq(&p.cq, 4).unwrap();
    assert_eq!(wc.len(), 1);
    assert_eq!(wc[0].status, wc_status::SUCCESS, "the first match is skipped");
    p.sim.write_buf(&dst_buf, 0, &[0; 64]).unwrap();
    p.sim.post_send(&p.qp, &[write(&src, &dst, 64)]).unwrap();
    let wc = p.sim.poll_cq(&p.cq, 4).unwrap();
    assert_eq!((wc[0].wr_id, wc[0].status, wc[0].vendor_err), (7, wc_status::REM_ACCESS_ERR, 0x99));
    assert_eq!(p.sim.query_qp_state(&p.qp).unwrap(), QpState::Err);
    assert_eq!(p.sim.read_buf(&dst_buf, 0, 64).unwrap(), vec![0; 64], "the failed WQE moved nothing");
}

#[test]
fn a_corrupt_rule_flips_one_byte_on_the_wire() {
    let mut p = pair();
    let (_, src) = buf(&mut p, &[0x11; 64]);
    let (dst_buf, dst) = buf(&mut p, &[0; 64]);
    p.sim.add_fault(FaultRule::Corrupt { wqe_opcode: RDMA_WRITE, offset: 5, xor: 0xf0, skip: 0, times: 1 }).unwrap();
    p.sim.post_send(&p.qp, &[write(&src, &dst, 64)]).unwrap();
    assert_eq!(p.sim.poll_cq(&p.cq, 4).unwrap()[0].status, wc_status::SUCCESS);
    let mut want = vec![0x11; 64];
    want[5] ^= 0xf0;
    assert_eq!(p.sim.read_buf(&dst_buf, 0, 64).unwrap(), want);
    p.sim.post_send(&p.qp, &[write(&src, &dst, 64)]).unwrap();
    assert_eq!(p.sim.read_buf(&dst_buf, 0, 64).unwrap(), vec![0x11; 64], "spent after one act");
}

#[test]
fn rules_that_can_never_act_are_einval() {
    let mut p = pair();
    let c = FaultRule::Completion { wqe_opcode: RDMA_WRITE, status: 0, vendor_err: 0, skip: 0, times: 1 };
    assert_eq!(p.sim.add_fault(c).map_err(|e| e.errno()), Err(EINVAL));
    let x = FaultRule::Corrupt { wqe_opcode: RDMA_WRITE, offset: 0, xor: 0, skip: 0, times: 1 };
    assert_eq!(p.sim.add_fault(x).map_err(|e| e.errno()), Err(EINVAL));
}

#[test]
fn registered_application_memory_moves_by_rdma_write() {
    let mut p = pair();
    let mut src: Vec<u8> = (0..100u8).collect();
    let mut dst = vec![0u8; 100];
    // SAFETY: both vectors outlive their registrations and are not touched until freed.
    let (sb, db) = unsafe {
        (
            p.sim.register_memory(src.as_mut_ptr(), src.len()).unwrap(),
            p.sim.register_memory(dst.as_mut_ptr(), dst.len()).unwrap(),
        )
    };
    assert_eq!(sb.addr, src.as_ptr() as u64, "registered memory keeps its own address");
    // SAFETY: the same bytes again (as an MR over part of another is); `src` outlives it.
    let again = unsafe { p.sim.register_memory(src.as_mut_ptr().wrapping_add(10), 10) }.unwrap();
    let own = p.sim.alloc_buf(64).unwrap();
    // SAFETY: a range over the backend's own buffer is refused before anything is mapped.
    let over_own = unsafe { p.sim.register_memory(own.addr as *mut u8, 8) };
    assert_eq!(over_own.map_err(|e| e.errno()).err(), Some(EINVAL));
    let smr = p.sim.reg_mr(p.pd, sb.addr, 100, ACCESS).unwrap();
    let dmr = p.sim.reg_mr(p.pd, db.addr, 100, ACCESS).unwrap();
    p.sim.post_send(&p.qp, &[write(&smr, &dmr, 100)]).unwrap();
    assert_eq!(p.sim.poll_cq(&p.cq, 4).unwrap()[0].status, wc_status::SUCCESS);
    p.sim.dereg_mr(&smr).unwrap();
    p.sim.dereg_mr(&dmr).unwrap();
    p.sim.free_buf(&sb).unwrap();
    p.sim.free_buf(&db).unwrap();
    p.sim.free_buf(&again).unwrap();
    p.sim.free_buf(&own).unwrap();
    assert_eq!(dst, src);
}

/// Two QPs of one context connected to each other, each with its own CQ, on a simulator of
/// `profile`.
struct World {
    sim: Simulator,
    pd: PdHandle,
    a: Qp,
    acq: Cq,
    s: Qp,
    scq: Cq,
}

fn world(profile: mlx5_sim::Profile) -> World {
    let mut sim = Simulator::new(profile).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let (acq, scq) = (sim.create_cq(ctx, 16).unwrap(), sim.create_cq(ctx, 16).unwrap());
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 0 };
    let a = sim.create_qp(&QpInitAttr::rc(pd, acq.handle, cap, None)).unwrap();
    let s = sim.create_qp(&QpInitAttr::rc(pd, scq.handle, cap, None)).unwrap();
    let port = sim.query_port(ctx, 1).unwrap();
    for (q, p) in [(&a, &s), (&s, &a)] {
        for step in QpModify::connect(ACCESS, QpDest::to(p, &port)) {
            sim.modify_qp(q, &step).unwrap();
        }
    }
    World { sim, pd, a, acq, s, scq }
}

/// A profile whose vendor syndromes all differ from each other and from the defaults.
fn distinct_vendor_errs(max_msg_sz: u32) -> mlx5_sim::Profile {
    let mut p = mlx5_sim::Profile::builtin("cx7").unwrap();
    let v = &mut p.datapath.vendor_err;
    (v.local_length, v.local_qp_op, v.local_protection, v.flush) = (0x11, 0x12, 0x13, 0x14);
    (v.remote_invalid_request, v.remote_access, v.remote_operation) = (0x15, 0x16, 0x17);
    (v.transport_retry, v.rnr_retry) = (0x18, 0x19);
    p.datapath.max_msg_sz = max_msg_sz;
    p
}

fn wcs(w: &mut World, on_a: bool) -> Vec<(u64, u32, u32)> {
    let cq = if on_a { w.acq } else { w.scq };
    w.sim.poll_cq(&cq, 8).unwrap().iter().map(|c| (c.wr_id, c.status, c.vendor_err)).collect()
}

fn mr(w: &mut World, len: usize) -> Mr {
    let b = w.sim.alloc_buf(len).unwrap();
    w.sim.reg_mr(w.pd, b.addr, len as u64, ACCESS).unwrap()
}

fn sge_of(m: &Mr, len: u32) -> Sge {
    Sge { addr: m.addr, length: len, lkey: m.lkey }
}

#[test]
fn each_natural_error_syndrome_reports_the_profiles_vendor_syndrome() {
    let v = distinct_vendor_errs(1 << 30).datapath.vendor_err;
    let (prot, flush, access) = (v.local_protection.into(), v.flush.into(), v.remote_access.into());
    // A bad lkey, and the WR after it flushed.
    let mut w = world(distinct_vendor_errs(1 << 30));
    let m = mr(&mut w, 64);
    let bad = Sge { lkey: m.lkey ^ 0x100, ..sge_of(&m, 8) };
    let ops = [
        WrOp::RdmaWrite { wr_id: 1, flags: SendFlags::SIGNALED, rkey: m.rkey, remote_addr: m.addr, sge: vec![bad] },
        WrOp::RdmaWrite {
            wr_id: 2,
            flags: SendFlags::SIGNALED,
            rkey: m.rkey,
            remote_addr: m.addr,
            sge: vec![sge_of(&m, 8)],
        },
    ];
    w.sim.post_send(&w.a, &ops).unwrap();
    assert_eq!(wcs(&mut w, true), [(1, wc_status::LOC_PROT_ERR, prot), (2, wc_status::WR_FLUSH_ERR, flush)]);
    // A bad rkey.
    let mut w = world(distinct_vendor_errs(1 << 30));
    let m = mr(&mut w, 64);
    let op = WrOp::RdmaWrite {
        wr_id: 3,
        flags: SendFlags::SIGNALED,
        rkey: m.rkey ^ 0x100,
        remote_addr: m.addr,
        sge: vec![sge_of(&m, 8)],
    };
    w.sim.post_send(&w.a, &[op]).unwrap();
    assert_eq!(wcs(&mut w, true), [(3, wc_status::REM_ACCESS_ERR, access)]);
    // A message over max_msg_sz.
    let mut w = world(distinct_vendor_errs(1 << 30));
    let m = mr(&mut w, 64);
    let op = WrOp::RdmaWrite {
        wr_id: 4,
        flags: SendFlags::SIGNALED,
        rkey: m.rkey,
        remote_addr: m.addr,
        sge: vec![sge_of(&m, (1 << 30) + 1)],
    };
    w.sim.post_send(&w.a, &[op]).unwrap();
    assert_eq!(wcs(&mut w, true), [(4, wc_status::LOC_LEN_ERR, v.local_length.into())]);
    // A SEND longer than the receive: the responder's length error, the requester's invalid request.
    let mut w = world(distinct_vendor_errs(1 << 30));
    let m = mr(&mut w, 64);
    w.sim.post_recv(&w.s, &[mlx5_dv::RecvWr { wr_id: 5, sge: vec![sge_of(&m, 32)] }]).unwrap();
    w.sim.post_send(&w.a, &[WrOp::Send { wr_id: 6, flags: SendFlags::SIGNALED, sge: vec![sge_of(&m, 64)] }]).unwrap();
    assert_eq!(wcs(&mut w, false), [(5, wc_status::LOC_LEN_ERR, v.local_length.into())]);
    assert_eq!(wcs(&mut w, true), [(6, wc_status::REM_INV_REQ_ERR, v.remote_invalid_request.into())]);
    // A receive through a bad lkey: the responder's protection error, the requester's remote
    // operation error (64 bytes: more than scatter-to-CQE takes).
    let mut w = world(distinct_vendor_errs(1 << 30));
    let m = mr(&mut w, 64);
    let bad = Sge { lkey: m.lkey ^ 0x100, ..sge_of(&m, 64) };
    w.sim.post_recv(&w.s, &[mlx5_dv::RecvWr { wr_id: 7, sge: vec![bad] }]).unwrap();
    w.sim.post_send(&w.a, &[WrOp::Send { wr_id: 8, flags: SendFlags::SIGNALED, sge: vec![sge_of(&m, 64)] }]).unwrap();
    assert_eq!(wcs(&mut w, false), [(7, wc_status::LOC_PROT_ERR, prot)]);
    assert_eq!(wcs(&mut w, true), [(8, wc_status::REM_OP_ERR, v.remote_operation.into())]);
    // The responder QP gone: the requester's retries run out.
    let mut w = world(distinct_vendor_errs(1 << 30));
    let m = mr(&mut w, 64);
    w.sim.destroy_qp(&w.s).unwrap();
    let op = WrOp::RdmaWrite {
        wr_id: 9,
        flags: SendFlags::SIGNALED,
        rkey: m.rkey,
        remote_addr: m.addr,
        sge: vec![sge_of(&m, 8)],
    };
    w.sim.post_send(&w.a, &[op]).unwrap();
    assert_eq!(wcs(&mut w, true), [(9, wc_status::RETRY_EXC_ERR, v.transport_retry.into())]);
    // One SGE over 2 GiB has no data segment (its length's top bit marks inline data, here
    // more of it than the WQE holds): a malformed WQE, a local QP operation error, once
    // max_msg_sz lets it through.
    let mut w = world(distinct_vendor_errs(u32::MAX));
    let m = mr(&mut w, 64);
    let op = WrOp::RdmaWrite {
        wr_id: 10,
        flags: SendFlags::SIGNALED,
        rkey: m.rkey,
        remote_addr: m.addr,
        sge: vec![sge_of(&m, (1 << 31) + 64)],
    };
    w.sim.post_send(&w.a, &[op]).unwrap();
    assert_eq!(wcs(&mut w, true), [(10, wc_status::LOC_QP_OP_ERR, v.local_qp_op.into())]);
    // Exactly 2 GiB is an empty inline segment: the WRITE completes and moves nothing.
    let mut w = world(distinct_vendor_errs(u32::MAX));
    let buf = w.sim.alloc_buf(64).unwrap();
    w.sim.write_buf(&buf, 0, &[0x5a; 32]).unwrap();
    let m = w.sim.reg_mr(w.pd, buf.addr, 64, ACCESS).unwrap();
    let before = w.sim.read_buf(&buf, 0, 64).unwrap();
    let op = WrOp::RdmaWrite {
        wr_id: 11,
        flags: SendFlags::SIGNALED,
        rkey: m.rkey,
        remote_addr: m.addr + 32,
        sge: vec![sge_of(&m, 1 << 31)],
    };
    w.sim.post_send(&w.a, &[op]).unwrap();
    assert_eq!(wcs(&mut w, true), [(11, wc_status::SUCCESS, 0)]);
    assert_eq!(w.sim.read_buf(&buf, 0, 64).unwrap(), before, "nothing moved");
}
