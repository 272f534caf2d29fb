//! Completion timestamps on a stepped simulator: a CQ made with them
//! (`Simulator::enable_cq_timestamps`, what `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` does)
//! carries the device clock in its good CQEs, which polling reads into `Wc::timestamp`; the
//! stepped clock advances one tick per CQE the device writes, so the same run gives the same
//! timestamps; a CQ made without them reads 0 and leaves the CQE's field zero.

mod common;

use mlx5_dv::{Backend, RecvWr, SendFlags, Sge, Wc, WrOp};
use mlx5_sim::Simulator;

/// Sends and RDMA writes over a loopback RC pair, the send CQ with timestamps and the
/// receive CQ without unless `both`: the completions of each CQ, and the device clock
/// before and after.
fn run(both: bool) -> (Vec<Wc>, Vec<Wc>, u64, u64) {
    let common::Loopback { mut sim, ctx, tx, rx, scq, rcq, mr } = common::loopback(64, 32, 8192);
    sim.enable_cq_timestamps(&scq).expect("timestamps on the send CQ");
    if both {
        sim.enable_cq_timestamps(&rcq).expect("timestamps on the receive CQ");
    }
    let before = sim.device_clock(ctx).expect("clock");
    let b: &mut dyn Backend = &mut sim;
    let sge = vec![Sge { addr: mr.addr, length: 64, lkey: mr.lkey }];
    let wrs: Vec<RecvWr> = (0..8).map(|i| RecvWr { wr_id: i, sge: sge.clone() }).collect();
    b.post_recv(&rx, &wrs).expect("post_recv");
    for i in 0..8u64 {
        let sge = vec![Sge { addr: mr.addr + 4096, length: 32, lkey: mr.lkey }];
        let wr = if i % 2 == 0 {
            WrOp::Send { wr_id: i, flags: SendFlags::SIGNALED, sge }
        } else {
            WrOp::RdmaWrite { wr_id: i, flags: SendFlags::SIGNALED, rkey: mr.rkey, remote_addr: mr.addr + 2048, sge }
        };
        b.post_send(&tx, &[wr]).expect("post_send");
    }
    let sent = b.poll_cq(&scq, 64).expect("poll send");
    let got = b.poll_cq(&rcq, 64).expect("poll recv");
    let after = sim.device_clock(ctx).expect("clock");
    (sent, got, before, after)
}

#[test]
fn timestamps_are_present_monotonic_and_within_the_clock_readings() {
    let (sent, got, before, after) = run(true);
    assert_eq!((sent.len(), got.len()), (8, 4));
    for cq in [&sent, &got] {
        let ts: Vec<u64> = cq.iter().map(|w| w.timestamp).collect();
        assert!(ts.iter().all(|&t| t > before && t <= after), "{ts:?} within ({before}, {after}]");
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?} increasing: one tick per CQE");
    }
}

#[test]
fn the_same_stepped_run_gives_the_same_timestamps() {
    let one = run(true);
    let two = run(true);
    assert_eq!(one, two);
    assert!(one.0.iter().all(|w| w.timestamp != 0));
}

#[test]
fn a_cq_without_timestamps_reads_zero() {
    let (sent, got, ..) = run(false);
    assert!(sent.iter().all(|w| w.timestamp != 0));
    assert!(got.iter().all(|w| w.timestamp == 0), "{got:?}");
}

#[test]
fn a_vfio_context_has_no_clock_to_read() {
    let mut sim = Simulator::with_profile("cx6dx").expect("shipped profile");
    let name = sim.profile().device.vfio_pci_name.clone().expect("the profile has a VFIO function");
    let ctx = (&mut sim as &mut dyn Backend).open_ibv_device(&name).expect("open the VFIO function");
    assert_eq!(sim.device_clock(ctx).map_err(|e| e.errno()), Err(mlx5_dv::errno::EOPNOTSUPP));
}
