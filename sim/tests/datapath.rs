//! Device state behind the data path that the trait does not show: the mkey context after a
//! UMR and after LOCAL_INV.

use mlx5_dv::prelude::*;
use mlx5_dv::prm::mkc;
use mlx5_dv::{
    AccessFlags as A, DvQpInitAttr, Mkey, MkeyInitAttr, MkeyInitFlags as F, Qp, QpCap, QpDest, QpInitAttr, QpModify,
    QpState, SendFlags, Sge, WrOp, dv_qp,
};
use mlx5_sim::Simulator;

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

fn setup(flags: F) -> (Simulator, Qp, Mkey, mlx5_dv::Mr, mlx5_dv::Cq) {
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
    let buf = sim.alloc_buf(64).unwrap();
    let mr = sim.reg_mr(pd, buf.addr, 64, A::LOCAL_WRITE).unwrap();
    let mkey = sim.create_mkey(&MkeyInitAttr { pd, create_flags: flags, max_entries: 4 }).unwrap();
    (sim, qp, mkey, mr, cq)
}

fn mkc_field(sim: &Simulator, key: u32, f: mlx5_dv::prm::Field) -> u64 {
    f.get(&mlx5_sim::inspect::mkc(sim, 0, key >> 8).unwrap()).unwrap()
}

#[test]
fn local_inv_frees_the_mkey_and_resets_its_tag() {
    let (mut sim, qp, mut mkey, mr, cq) = setup(F::INDIRECT | F::UPDATE_TAG);
    mkey.lkey |= 0x33;
    let conf = WrOp::MrList {
        wr_id: 1,
        flags: SendFlags::INLINE,
        mkey,
        access: ACCESS,
        sge: vec![Sge { addr: mr.addr, length: 64, lkey: mr.lkey }],
    };
    sim.post_send(&qp, &[conf]).unwrap();
    assert_eq!((mkc_field(&sim, mkey.lkey, mkc::FREE), mkc_field(&sim, mkey.lkey, mkc::MKEY_7_0)), (0, 0x33));
    assert_eq!(mkc_field(&sim, mkey.lkey, mkc::LEN), 64);
    assert_eq!(mkc_field(&sim, mkey.lkey, mkc::RW), 1);
    sim.post_send(&qp, &[WrOp::LocalInv { wr_id: 2, flags: SendFlags::SIGNALED, invalidate_rkey: mkey.lkey }]).unwrap();
    assert_eq!((mkc_field(&sim, mkey.lkey, mkc::FREE), mkc_field(&sim, mkey.lkey, mkc::MKEY_7_0)), (1, 0));
    assert_eq!(sim.poll_cq(&cq, 4).unwrap().len(), 1);
}

#[test]
fn a_signature_mkey_without_attributes_gets_its_bsf_disabled() {
    let (mut sim, qp, mkey, mr, _cq) = setup(F::INDIRECT | F::BLOCK_SIGNATURE);
    assert_eq!(mkc_field(&sim, mkey.lkey, mkc::BSF_EN), 1, "created with a BSF");
    let conf = WrOp::MrList {
        wr_id: 1,
        flags: SendFlags::INLINE,
        mkey,
        access: mlx5_dv::AccessFlags::empty(),
        sge: vec![Sge { addr: mr.addr, length: 64, lkey: mr.lkey }],
    };
    sim.post_send(&qp, &[conf]).unwrap();
    assert_eq!(mkc_field(&sim, mkey.lkey, mkc::BSF_EN), 0);
}

#[test]
fn the_same_calls_give_the_same_keys_and_queue_numbers() {
    let run = || {
        let (sim, qp, mkey, mr, _cq) = setup(F::INDIRECT);
        drop(sim);
        (qp.qp_num, mkey.lkey, mr.lkey, mr.addr)
    };
    assert_eq!(run(), run());
}

#[test]
fn a_reset_takes_the_qps_completions_out_of_its_cq() {
    let (mut sim, qp, _mkey, mr, cq) = setup(F::INDIRECT);
    let w = |id| WrOp::RdmaWrite {
        wr_id: id,
        flags: SendFlags::SIGNALED,
        rkey: mr.rkey,
        remote_addr: mr.addr,
        sge: vec![Sge { addr: mr.addr + 32, length: 4, lkey: mr.lkey }],
    };
    // The MR has no REMOTE_WRITE: the first write fails, the rest are flushed.
    let ops: Vec<_> = (0..4).map(w).collect();
    sim.post_send(&qp, &ops).unwrap();
    assert_eq!(sim.query_qp_state(&qp).unwrap(), QpState::Err);
    sim.modify_qp(&qp, &QpModify::to(QpState::Reset)).unwrap();
    sim.modify_qp(&qp, &QpModify { state: QpState::Init, access: ACCESS, dest: None, ext: None }).unwrap();
    // mlx5_cq_clean: the four CQEs are gone with the reset.
    assert_eq!(sim.poll_cq(&cq, 16).unwrap(), vec![]);
    // Posting is refused until RTS.
    assert_eq!(sim.post_send(&qp, &[w(9)]).unwrap_err().errno(), mlx5_dv::errno::EINVAL);
}
