//! A QP connected to itself whose traffic the simulator carries as packets on its in-memory
//! fabric (`Simulator::carry_in_memory`, as after a network fault rule): the requester
//! collects each answer by running its WQE again, and the responder is the same QP.

use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, Cq, DvQpInitAttr, Mkey, MkeyInitAttr, MkeyInitFlags as F, Mr, PdHandle, Qp, QpCap, QpDest,
    QpInitAttr, QpModify, QpState, RecvWr, SendFlags, Sge, Wc, WrOp, dv_qp, event_type, wc_flags, wc_opcode, wc_status,
};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ).union(A::REMOTE_ATOMIC);

struct Rig {
    sim: Simulator,
    ctx: mlx5_dv::ContextHandle,
    pd: PdHandle,
    cq: Cq,
    qp: Qp,
}

/// One RC QP of `profile` connected to itself, its traffic on the in-memory fabric (or, for
/// comparison, handed to the responder directly).
fn rig(profile: &str, fabric: bool) -> Rig {
    let mut sim = Simulator::new(Profile::builtin(profile).unwrap()).unwrap();
    if fabric {
        sim.carry_in_memory();
    }
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 64).unwrap();
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 0 };
    let attr = QpInitAttr::rc(
        pd,
        cq.handle,
        cap,
        Some(DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE)),
    );
    let qp = sim.create_qp(&attr).unwrap();
    let port = sim.query_port(ctx, 1).unwrap();
    for step in QpModify::connect(ACCESS, QpDest::to(&qp, &port)) {
        sim.modify_qp(&qp, &step).unwrap();
    }
    Rig { sim, ctx, pd, cq, qp }
}

fn mr(r: &mut Rig, len: usize, fill: u8) -> Mr {
    let b = r.sim.alloc_buf(len).unwrap();
    r.sim.write_buf(&b, 0, &vec![fill; len]).unwrap();
    r.sim.reg_mr(r.pd, b.addr, len as u64, ACCESS).unwrap()
}

fn sge(m: &Mr, off: u64, len: u32) -> Sge {
    Sge { addr: m.addr + off, length: len, lkey: m.lkey }
}

/// Poll until `n` completions came (bounded).
fn poll(r: &mut Rig, n: usize) -> Vec<Wc> {
    let mut got = Vec::new();
    for _ in 0..1000 {
        got.extend(r.sim.poll_cq(&r.cq, 16).unwrap());
        if got.len() >= n {
            break;
        }
    }
    got
}

fn statuses(wcs: &[Wc]) -> Vec<(u64, u32)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// An indirect mkey with remote invalidation, configured over two MRs.
fn mkey_over_two(r: &mut Rig, a: &Mr, b: &Mr) -> Mkey {
    let attr = MkeyInitAttr { pd: r.pd, create_flags: F::INDIRECT | F::REMOTE_INVALIDATE, max_entries: 4 };
    let mkey = r.sim.create_mkey(&attr).unwrap();
    let op = WrOp::MrList {
        wr_id: 0xc0f,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        mkey,
        access: ACCESS,
        sge: vec![sge(a, 0, 128), sge(b, 0, 128)],
    };
    r.sim.post_send(&r.qp, &[op]).unwrap();
    assert_eq!(statuses(&poll(r, 1)), vec![(0xc0f, wc_status::SUCCESS)]);
    mkey
}

/// Item 84 on the fabric: the SEND_WITH_INV's own gather list goes through the mkey it
/// invalidates; the data was gathered when the request left, so collecting the ACK after the
/// responder invalidated the mkey still completes the SEND successfully, as in process.
#[rstest::rstest]
fn a_send_with_inv_gathering_through_the_mkey_it_invalidates_succeeds(#[values(true, false)] fabric: bool) {
    let mut r = rig("cx7", fabric);
    let (a, b) = (mr(&mut r, 128, 0x11), mr(&mut r, 128, 0x22));
    let dst = mr(&mut r, 64, 0);
    r.sim.post_recv(&r.qp, &[RecvWr { wr_id: 5, sge: vec![sge(&dst, 0, 64)] }]).unwrap();
    let mkey = mkey_over_two(&mut r, &a, &b);
    // 13 bytes from offset 140: inside the second MR.
    let local = Sge { addr: 140, length: 13, lkey: mkey.lkey };
    let send = WrOp::SendInv { wr_id: 3, flags: SendFlags::SIGNALED, invalidate_rkey: mkey.rkey, sge: vec![local] };
    r.sim.post_send(&r.qp, &[send]).unwrap();
    let wcs = poll(&mut r, 2);
    let mut got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    got.sort_unstable();
    assert_eq!(got, vec![(3, wc_status::SUCCESS, wc_opcode::SEND), (5, wc_status::SUCCESS, wc_opcode::RECV)]);
    let recv = wcs.iter().find(|w| w.wr_id == 5).unwrap();
    assert_eq!((recv.byte_len, recv.wc_flags & wc_flags::WITH_INV, recv.imm_data), (13, wc_flags::WITH_INV, mkey.rkey));
    // The mkey is invalid afterwards: a SEND gathering through it is a local protection error.
    r.sim.post_recv(&r.qp, &[RecvWr { wr_id: 6, sge: vec![sge(&dst, 0, 64)] }]).unwrap();
    let again = WrOp::Send { wr_id: 7, flags: SendFlags::SIGNALED, sge: vec![local] };
    r.sim.post_send(&r.qp, &[again]).unwrap();
    let wcs = poll(&mut r, 2);
    assert_eq!(wcs.first().map(|w| (w.wr_id, w.status)), Some((7, wc_status::LOC_PROT_ERR)), "{wcs:?}");
}

/// Items 93 and 124 and the remote access errors: the responder goes to ERR on the error it
/// reports, so a SEND (or WRITE with immediate) the requester had already sent behind the
/// failing WR is not executed and takes no receive: the failing WR completes in error, the one
/// behind it and the receive are flushed,
/// and the responder's event follows, on the fabric as in process.
#[rstest::rstest]
#[case::write_to_a_bad_rkey("cx6dx", Fail::Write, wc_status::REM_ACCESS_ERR)]
#[case::read_of_a_bad_rkey("cx7", Fail::Read, wc_status::REM_ACCESS_ERR)]
#[case::atomic_of_a_bad_rkey("cx6dx", Fail::Atomic, wc_status::REM_ACCESS_ERR)]
#[case::misaligned_atomic("cx7", Fail::MisalignedAtomic, wc_status::REM_INV_REQ_ERR)]
fn a_send_behind_a_remote_error_is_flushed_not_executed(
    #[case] profile: &str,
    #[case] fail: Fail,
    #[case] want: u32,
    #[values(true, false)] fabric: bool,
    #[values(false, true)] write_imm: bool,
) {
    let mut r = rig(profile, fabric);
    let (src, dst) = (mr(&mut r, 64, 0x11), mr(&mut r, 64, 0));
    r.sim.post_recv(&r.qp, &[RecvWr { wr_id: 5, sge: vec![sge(&dst, 0, 64)] }]).unwrap();
    let bad = dst.rkey ^ 0x100;
    let first = match fail {
        Fail::Write => WrOp::RdmaWrite {
            wr_id: 1,
            flags: SendFlags::SIGNALED,
            rkey: bad,
            remote_addr: dst.addr,
            sge: vec![sge(&src, 0, 8)],
        },
        Fail::Read => WrOp::RdmaRead {
            wr_id: 1,
            flags: SendFlags::SIGNALED,
            rkey: bad,
            remote_addr: dst.addr,
            sge: vec![sge(&src, 0, 8)],
        },
        Fail::Atomic | Fail::MisalignedAtomic => WrOp::AtomicFetchAdd {
            wr_id: 1,
            flags: SendFlags::SIGNALED,
            rkey: if fail == Fail::Atomic { bad } else { dst.rkey },
            remote_addr: dst.addr + if fail == Fail::Atomic { 0 } else { 4 },
            add: 1,
            sge: vec![sge(&src, 0, 8)],
        },
    };
    let send = if write_imm {
        let (rkey, remote_addr) = (dst.rkey, dst.addr);
        WrOp::RdmaWriteImm {
            wr_id: 2,
            flags: SendFlags::SIGNALED,
            rkey,
            remote_addr,
            imm: 9,
            sge: vec![sge(&src, 0, 16)],
        }
    } else {
        WrOp::Send { wr_id: 2, flags: SendFlags::SIGNALED, sge: vec![sge(&src, 0, 16)] }
    };
    r.sim.post_send(&r.qp, &[first, send]).unwrap();
    let wcs = poll(&mut r, 3);
    assert_eq!(statuses(&wcs), vec![(1, want), (2, wc_status::WR_FLUSH_ERR), (5, wc_status::WR_FLUSH_ERR)]);
    assert_eq!(r.sim.query_qp_state(&r.qp).unwrap(), QpState::Err);
    let ev = if want == wc_status::REM_ACCESS_ERR { event_type::QP_ACCESS_ERR } else { event_type::QP_REQ_ERR };
    let got = r.sim.get_async_event(r.ctx).unwrap().map(|e| (e.event_type, e.qp_num));
    assert_eq!(got, Some((ev, Some(r.qp.qp_num))), "the responder's event");
}

/// An RDMA WRITE with id `wr_id` to a bad rkey: REM_ACCESS_ERR, and the responder's
/// QP_ACCESS_ERR queued.
fn bad_write(r: &mut Rig, wr_id: u64) {
    let (src, dst) = (mr(r, 64, 0x11), mr(r, 64, 0));
    let flags = SendFlags::SIGNALED;
    let bad =
        WrOp::RdmaWrite { wr_id, flags, rkey: dst.rkey ^ 0x100, remote_addr: dst.addr, sge: vec![sge(&src, 0, 8)] };
    r.sim.post_send(&r.qp, &[bad]).unwrap();
    assert_eq!(statuses(&poll(r, 1)), vec![(wr_id, wc_status::REM_ACCESS_ERR)]);
}

/// A destroyed QP's event the program has not read goes with it (as uverbs drops an
/// object's events on destroy), so no event names a QP that is gone; a QP that stays
/// reports its event.
#[rstest::rstest]
fn an_unread_event_of_a_destroyed_qp_is_not_delivered(#[values(true, false)] fabric: bool) {
    let mut r = rig("cx6dx", fabric);
    bad_write(&mut r, 1);
    r.sim.destroy_qp(&r.qp).unwrap();
    assert_eq!(r.sim.get_async_event(r.ctx).unwrap(), None, "the destroyed QP's QP_ACCESS_ERR");
    // The same failure on a QP that stays reports its event.
    let mut r = rig("cx6dx", fabric);
    bad_write(&mut r, 2);
    let got = r.sim.get_async_event(r.ctx).unwrap().map(|e| (e.event_type, e.qp_num));
    assert_eq!(got, Some((event_type::QP_ACCESS_ERR, Some(r.qp.qp_num))));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    Write,
    Read,
    Atomic,
    MisalignedAtomic,
}
