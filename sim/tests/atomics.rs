//! Atomics on a device that does not do them (a profile with `atomic = false`): libmlx5 leaves
//! `atomics_enabled` off, so both ways of posting one are refused before anything is written;
//! and on one that does, a loopback fetch-and-add lands in host byte order, and a capture
//! holds it as a FetchAdd packet and an ATOMIC Acknowledge, big-endian.

use mlx5_dv::errno::EOPNOTSUPP;
use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, Backend, QpCap, QpDest, QpInitAttr, QpModify, SendFlags, SendWr, Sge, WrOp, send_ops, wc_opcode,
    wc_status, wr_opcode,
};
use mlx5_sim::packet::opcode;
use mlx5_sim::wire::decode_ip;
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_ATOMIC);
const CAP: QpCap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };

/// A loopback pair on `mlx5_0` of a cx6dx whose `[datapath] atomic` is `atomic`: the QP, its
/// CQ and an MR of 16 bytes (holding 40 at offset 8) both may use.
fn rig(
    atomic: bool,
    pcap: Option<&std::path::Path>,
) -> (Simulator, mlx5_dv::Qp, mlx5_dv::Cq, mlx5_dv::Buf, mlx5_dv::Mr) {
    let mut p = Profile::builtin("cx6dx").expect("shipped profile");
    p.datapath.atomic = atomic;
    let mut sim = Simulator::new(p).expect("simulator");
    if let Some(path) = pcap {
        sim.capture_to(path).expect("capture");
    }
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0").expect("open");
    let pd = b.alloc_pd(ctx).expect("pd");
    let cq = b.create_cq(ctx, 8).expect("cq");
    let tx = b.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)).expect("tx");
    let rx = b.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)).expect("rx");
    let port = b.query_port(ctx, 1).expect("port");
    for (q, peer) in [(&tx, &rx), (&rx, &tx)] {
        for step in QpModify::connect(ACCESS, QpDest::to(peer, &port)) {
            b.modify_qp(q, &step).expect("connect");
        }
    }
    let buf = b.alloc_buf(16).expect("buf");
    b.write_buf(&buf, 8, &40u64.to_ne_bytes()).expect("write");
    let mr = b.reg_mr(pd, buf.addr, 16, ACCESS).expect("mr");
    // The QP with the atomic send ops, on its own.
    let mut attr = QpInitAttr::rc(pd, cq.handle, CAP, None);
    attr.send_ops_flags = send_ops::RC_DEFAULT | send_ops::ATOMIC_FETCH_AND_ADD;
    let with_ops = b.create_qp(&attr);
    assert_eq!(with_ops.as_ref().err().map(|e| e.errno()), (!atomic).then_some(EOPNOTSUPP), "{with_ops:?}");
    (sim, tx, cq, buf, mr)
}

fn faa(mr: &mlx5_dv::Mr) -> SendWr {
    let op = WrOp::AtomicFetchAdd {
        wr_id: 1,
        flags: SendFlags::SIGNALED,
        rkey: mr.rkey,
        remote_addr: mr.addr + 8,
        add: 2,
        sge: vec![Sge { addr: mr.addr, length: 8, lkey: mr.lkey }],
    };
    SendWr::from_op(&op).expect("an ibv_send_wr")
}

#[test]
fn without_atomic_cap_posting_an_atomic_is_eopnotsupp() {
    let (mut sim, tx, cq, buf, mr) = rig(false, None);
    let wr = faa(&mr);
    assert_eq!(wr.opcode, wr_opcode::ATOMIC_FETCH_AND_ADD);
    let e = sim.post_send_wr(&tx, &[wr]).expect_err("refused");
    assert_eq!((e.errno(), e.bad_wr()), (EOPNOTSUPP, Some(0)), "{e}");
    assert!(sim.poll_cq(&cq, 4).expect("poll").is_empty(), "nothing posted");
    assert_eq!(sim.read_buf(&buf, 8, 8).expect("read"), 40u64.to_ne_bytes(), "nothing done");
}

#[test]
fn with_atomic_cap_a_fetch_and_add_lands_in_host_order() {
    let pcap = std::env::temp_dir().join(format!("mlx5sim-atomics-{}.pcap", std::process::id()));
    let (mut sim, tx, cq, buf, mr) = rig(true, Some(&pcap));
    sim.post_send_wr(&tx, &[faa(&mr)]).expect("posted");
    let wcs = sim.poll_cq(&cq, 4).expect("poll");
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode, w.byte_len)).collect();
    assert_eq!(got, [(1, wc_status::SUCCESS, wc_opcode::FETCH_ADD, 8)]);
    let mem = sim.read_buf(&buf, 0, 16).expect("read");
    assert_eq!(mem[..8], 40u64.to_ne_bytes(), "the original value, in host order");
    assert_eq!(mem[8..], 42u64.to_ne_bytes(), "the sum");
    // The capture: the request and its answer (Ethernet frames of a classic pcap).
    let b = std::fs::read(&pcap).expect("the capture");
    let _ = std::fs::remove_file(&pcap);
    let (mut at, mut got) = (24, Vec::new());
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]) as usize;
        let frame = b.get(at + 16 + 14..at + 16 + len).expect("a whole frame");
        let d = decode_ip(frame).expect("a RoCE v2 packet");
        got.push((d.headers.bth.opcode, d.headers.atomic.map(|a| (a.va, a.swap_add)), d.headers.atomic_ack));
        at += 16 + len;
    }
    let want = vec![(opcode::FETCH_ADD, Some((mr.addr + 8, 2)), None), (opcode::ATOMIC_ACKNOWLEDGE, None, Some(40))];
    assert_eq!(got, want);
}
