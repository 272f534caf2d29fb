//! Memory windows behind the trait: a device without them (`imaicl` off), a context's windows
//! at close, and the bind WQE's bytes as libmlx5 writes them.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags, BindMw, MW_TYPE_1, MW_TYPE_2, MwBindInfo, QpCap, QpDest, QpInitAttr, QpModify, SendFlags, SendWr,
    inc_rkey, wr_opcode,
};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn errno<T>(r: mlx5_dv::Result<T>) -> Option<i32> {
    r.err().map(|e| e.errno())
}

#[test]
fn without_imaicl_the_kernel_has_no_windows() -> TestResult {
    let p = Profile::load("extends = \"cx6dx\"\n[hca_cap]\nimaicl = false\n", "no-mw")?;
    let mut sim = Simulator::new(p)?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    assert_eq!(errno(sim.alloc_mw(pd, MW_TYPE_1)), Some(EOPNOTSUPP));
    assert_eq!(errno(sim.alloc_mw(pd, 7)), Some(EOPNOTSUPP), "no window verbs at all: before the type");
    Ok(())
}

#[test]
fn closing_a_context_destroys_its_windows() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let mw = sim.alloc_mw(pd, MW_TYPE_2)?;
    assert_eq!(errno(sim.alloc_mw(pd, 3)), Some(EINVAL));
    sim.close_device(ctx)?;
    assert_eq!(errno(sim.dealloc_mw(&mw)), Some(EINVAL), "the window went with its context");
    Ok(())
}

#[test]
fn a_type2_bind_is_libmlx5s_umr_wqe() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let cq = sim.create_cq(ctx, 16)?;
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, None))?;
    let buf = sim.alloc_buf(4096)?;
    let mr = sim.reg_mr(pd, buf.addr, 4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)?;
    let mw = sim.alloc_mw(pd, MW_TYPE_2)?;
    let info = MwBindInfo { mr: Some(mr), addr: buf.addr + 64, length: 128, access: AccessFlags::REMOTE_WRITE };
    let wr = SendWr {
        wr_id: 1,
        opcode: wr_opcode::BIND_MW,
        send_flags: SendFlags::SIGNALED,
        bind_mw: Some(BindMw { mw, rkey: inc_rkey(mw.rkey), bind_info: info }),
        ..SendWr::default()
    };
    sim.record_wqes(true);
    // Before RTS every WR is ENOMEM (qp_state_max_gs): connect the QP to itself first.
    let dest = QpDest::to(&qp, &sim.query_port(ctx, 1)?);
    for step in QpModify::connect(AccessFlags::LOCAL_WRITE, dest) {
        sim.modify_qp(&qp, &step)?;
    }
    sim.post_send_wr(&qp, &[wr])?;
    let w = sim.take_wqes().pop().ok_or("no WQE recorded")?;
    let b = &w.bytes;
    assert_eq!(b.len(), 192, "control, UMR control, mkey context, one KLM padded to 64 bytes");
    assert_eq!(b[7] & 0x3f, 12, "ds: 192 bytes in 16-byte units");
    assert_eq!(b[12..16], mw.rkey.to_be_bytes(), "the window's key in the immediate");
    assert_eq!(b[16], 0x80 | 0x20 | 0x10, "INLINE | CHECK_FREE | TRANSLATION_OFFSET");
    let mkc = &b[64..128];
    assert_eq!(mkc[4..8], (qp.qp_num << 8 | (inc_rkey(mw.rkey) & 0xff)).to_be_bytes(), "qpn_mkey");
    assert_eq!(mkc[16..24], (buf.addr + 64).to_be_bytes(), "start_addr");
    assert_eq!(mkc[24..32], 128u64.to_be_bytes(), "len");
    assert_eq!(b[128..132], 128u32.to_be_bytes(), "the KLM's byte count");
    assert_eq!(b[132..136], mr.lkey.to_be_bytes(), "the KLM's key: the MR's lkey");
    Ok(())
}
