//! Hostile inputs and kernel limits: checked arithmetic in QP sizing, the host memory limit,
//! MR ranges that wrap, the CQ size limit, DEVX uids (docs/behaviour.md items 79 and 89).

use mlx5_dv::errno::{EAGAIN, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, ContextAttr, DvQpInitAttr, MkeyInitAttr, MkeyInitFlags, PdHandle, QpCap, QpInitAttr, dv_qp,
};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

fn sim_with(datapath: &str) -> Simulator {
    let text = format!("extends = \"cx6dx\"\nname = \"t\"\n[datapath]\n{datapath}\n");
    Simulator::new(Profile::load(&text, "t").unwrap()).unwrap()
}

fn rc(pd: PdHandle, cq: mlx5_dv::CqHandle, cap: QpCap) -> QpInitAttr {
    QpInitAttr::rc(pd, cq, cap, Some(DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE)))
}

#[test]
fn qp_sizes_near_the_integer_limits_are_einval_not_a_panic() {
    let mut sim = Simulator::with_profile("cx6dx").unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 16).unwrap();
    let base = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let hostile = [
        QpCap { max_inline_data: u32::MAX, ..base },
        QpCap { max_inline_data: u32::MAX - 3, ..base },
        QpCap { max_inline_data: u32::MAX - 20, ..base },
        QpCap { max_send_wr: u32::MAX, ..base },
        QpCap { max_send_wr: 0x7fff_ffff / 1024 + 1, ..base },
        QpCap { max_send_sge: u32::MAX, ..base },
        QpCap { max_recv_wr: u32::MAX, ..base },
        QpCap { max_recv_sge: u32::MAX, ..base },
        QpCap { max_recv_sge: u32::MAX / 16 + 1, ..base },
    ];
    for cap in hostile {
        let r = sim.create_qp(&rc(pd, cq.handle, cap));
        assert_eq!(r.map_err(|e| e.errno()).err(), Some(EINVAL), "{cap:?}");
    }
}

#[test]
fn the_send_queue_is_limited_in_wqebbs() {
    let mut sim = Simulator::with_profile("cx6dx").unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 16).unwrap();
    // 192 bytes of UMR overhead and four SGEs: a 256-byte WQE, four WQEBBs of 32768.
    let cap = QpCap { max_send_wr: 8192, max_recv_wr: 0, max_send_sge: 4, max_recv_sge: 0, max_inline_data: 0 };
    let qp = sim.create_qp(&rc(pd, cq.handle, cap)).unwrap();
    assert_eq!(qp.cap.max_send_wr, 8192);
    let r = sim.create_qp(&rc(pd, cq.handle, QpCap { max_send_wr: 8193, ..cap }));
    assert_eq!(r.map_err(|e| e.errno()).err(), Some(EINVAL));
}

#[test]
fn buffers_past_the_host_memory_limit_are_enomem() {
    let mut sim = sim_with("host_memory_limit = 4194304");
    let a = sim.alloc_buf(3 << 20).unwrap();
    assert_eq!(sim.alloc_buf(2 << 20).map_err(|e| e.errno()).err(), Some(ENOMEM));
    assert_eq!(sim.alloc_buf(1 << 30).map_err(|e| e.errno()).err(), Some(ENOMEM));
    sim.free_buf(&a).unwrap();
    sim.alloc_buf(4 << 20).unwrap();
    let e = Profile::load("extends = \"cx5\"\n[datapath]\nhost_memory_limit = 0\n", "x").unwrap_err();
    assert!(e.message.contains("host_memory_limit"), "{e}");
}

#[test]
fn an_mr_range_that_wraps_is_einval() {
    let mut sim = Simulator::with_profile("cx6dx").unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let buf = sim.alloc_buf(4096).unwrap();
    for (addr, len) in [(buf.addr, u64::MAX), (u64::MAX - 10, 100), (u64::MAX - 4096, 4096)] {
        let r = sim.reg_mr(pd, addr, len, A::LOCAL_WRITE);
        assert_eq!(r.map_err(|e| e.errno()).err(), Some(EINVAL), "[{addr:x}, +{len})");
    }
}

#[test]
fn cqs_are_limited_by_log_max_cq_sz() {
    let mut sim = sim_with("log_max_cq_sz = 10");
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    assert_eq!(sim.create_cq(ctx, 1023).unwrap().cqe, 1023);
    assert_eq!(sim.create_cq(ctx, 1024).map_err(|e| e.errno()).err(), Some(EINVAL));
    let mut sim = Simulator::with_profile("cx6dx").unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    assert_eq!(sim.create_cq(ctx, (1 << 22) - 1).unwrap().cqe, (1 << 22) - 1);
    assert_eq!(sim.create_cq(ctx, 1 << 22).map_err(|e| e.errno()).err(), Some(EINVAL));
    let e = Profile::load("extends = \"cx5\"\n[datapath]\nlog_max_cq_sz = 25\n", "x").unwrap_err();
    assert!(e.message.contains("log_max_cq_sz"), "{e}");
}

#[test]
fn devx_uids_are_never_shared_by_two_open_contexts() {
    let mut sim = Simulator::with_profile("cx6dx").unwrap();
    let devx = ContextAttr::devx();
    let first = sim.open_device("mlx5_0", Some(&devx)).unwrap();
    let pd = sim.alloc_pd(first).unwrap();
    let mkey = sim
        .create_mkey(&MkeyInitAttr {
            pd,
            create_flags: MkeyInitFlags::INDIRECT | MkeyInitFlags::BLOCK_SIGNATURE,
            max_entries: 4,
        })
        .unwrap();
    // Past 65534 opens the uids start over; closing a context must not touch the first one's objects.
    for _ in 0..65_600 {
        let c = sim.open_device("mlx5_0", Some(&devx)).unwrap();
        sim.close_device(c).unwrap();
    }
    sim.mkey_check(&mkey).unwrap();
    sim.destroy_mkey(&mkey).unwrap();
    // With every uid held, a DEVX context is refused.
    let mut open = Vec::new();
    for _ in 0..65_533 {
        open.push(sim.open_device("mlx5_0", Some(&devx)).unwrap());
    }
    assert_eq!(sim.open_device("mlx5_0", Some(&devx)).map_err(|e| e.errno()).err(), Some(EAGAIN));
    sim.close_device(open.remove(100)).unwrap();
    sim.open_device("mlx5_0", Some(&devx)).unwrap();
}

/// OOO_DP is an unknown flag for a library older than rdma-core 55, refused on a device
/// without out-of-order placement, and accepted on one with it.
#[test]
fn ooo_dp_follows_the_library_release_and_the_device() {
    use mlx5_dv::{DvQpInitAttr, DvSendOpsFlags, dv_qp};
    for (release, ooo, want) in [(44, true, Some(EINVAL)), (55, false, Some(EOPNOTSUPP)), (64, true, None)] {
        let text = format!("extends = \"cx7\"\n[datapath]\nrdma_core_release = {release}\nooo_dp = {ooo}\n");
        let mut sim = Simulator::new(Profile::load(&text, "ooo").unwrap()).unwrap();
        let ctx = sim.open_ibv_device("mlx5_0").unwrap();
        let pd = sim.alloc_pd(ctx).unwrap();
        let cq = sim.create_cq(ctx, 4).unwrap();
        let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let dv = DvQpInitAttr::new(dv_qp::CREATE_OOO_DP, DvSendOpsFlags::empty());
        let r = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, Some(dv)));
        assert_eq!(r.err().map(|e| e.errno()), want, "rdma-core {release}, ooo_dp {ooo}");
    }
}
