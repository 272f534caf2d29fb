//! UC and UD QPs on a stepped simulator whose devices deliver in process (no network): a UD
//! datagram to the device's own port, and UC SENDs that find no receive posted.

use mlx5_dv::{
    AccessFlags as A, Backend, QpAttrExt, QpAttrMask, QpCap, QpDest, QpInitAttr, QpModify, QpState, RecvWr, SendFlags,
    SendWr, Sge, UdDest, WcFlags, qp_type, send_ops, wc_status, wr_opcode,
};
use mlx5_sim::Simulator;

type R = Result<(), Box<dyn std::error::Error>>;

/// Bring `qp` of `ty` up with the kernel table's required attributes, Q_Key 7 for UD.
fn bring_up(b: &mut dyn Backend, ty: u32, qp: &mlx5_dv::Qp, dest: Option<QpDest>) -> R {
    for (from, to) in [(QpState::Reset, QpState::Init), (QpState::Init, QpState::Rtr), (QpState::Rtr, QpState::Rts)] {
        let (required, _) = mlx5_dv::qp_transition(ty, from, to).ok_or("no such transition")?;
        let ext = QpAttrExt { mask: QpAttrMask::STATE | required, qkey: 7, ..QpAttrExt::defaults() };
        let path = dest.filter(|_| to == QpState::Rtr);
        b.modify_qp(qp, &QpModify::exact(to, A::LOCAL_WRITE | A::REMOTE_WRITE, path, ext))?;
    }
    Ok(())
}

fn wr(wr_id: u64, opcode: u32, sge: Sge, ud: Option<UdDest>) -> SendWr {
    SendWr { wr_id, opcode, send_flags: SendFlags::SIGNALED, sge: vec![sge], ud, ..SendWr::default() }
}

/// The packets of a classic pcap file (little-endian), past their Ethernet header.
fn packets(path: &std::path::Path) -> Vec<mlx5_sim::wire::Datagram> {
    let b = std::fs::read(path).unwrap_or_default();
    let (mut at, mut out) = (24, Vec::new());
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]) as usize;
        out.extend(b.get(at + 16 + 14..at + 16 + len).and_then(|f| mlx5_sim::wire::decode_ip(f).ok()));
        at += 16 + len;
    }
    out
}

#[test]
fn ud_and_uc_in_process() -> R {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let path = std::env::temp_dir().join(format!("mlx5sim-uc-ud-{}.pcap", std::process::id()));
    sim.capture_to(&path)?;
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0")?;
    let pd = b.alloc_pd(ctx)?;
    let cq = b.create_cq(ctx, 64)?;
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let attr = |ty, ops| QpInitAttr { qp_type: ty, send_ops_flags: ops, ..QpInitAttr::rc(pd, cq.handle, cap, None) };
    let ud_ops = send_ops::SEND | send_ops::SEND_WITH_IMM;
    let (ua, ub) = (b.create_qp(&attr(qp_type::UD, ud_ops))?, b.create_qp(&attr(qp_type::UD, ud_ops))?);
    let port = b.query_port(ctx, 1)?;
    for q in [&ua, &ub] {
        bring_up(b, qp_type::UD, q, None)?;
    }
    let buf = b.alloc_buf(4096)?;
    b.write_buf(&buf, 0, &[0x5a; 100])?;
    let mr = b.reg_mr(pd, buf.addr, 4096, A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let at = |off: u64, len: u32| Sge { addr: buf.addr + off, length: len, lkey: mr.lkey };
    b.post_recv(&ub, &[RecvWr { wr_id: 10, sge: vec![at(1024, 1024)] }])?;
    let to = UdDest::new(QpDest::to(&ub, &port).ah, ub.qp_num, 7);
    let imm = SendWr { imm_data: 0x99, ..wr(1, wr_opcode::SEND_WITH_IMM, at(0, 100), Some(to)) };
    b.post_send_wr(&ua, &[imm])?;
    // In process the receiver completes inside the send: both CQEs, in either order.
    let mut wcs = b.poll_cq(&cq, 4)?;
    wcs.sort_by_key(|w| w.wr_id);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.byte_len, w.src_qp, w.imm_data)).collect();
    assert_eq!(got, [(1, wc_status::SUCCESS, 0, 0, 0), (10, wc_status::SUCCESS, 140, ua.qp_num, 0x99)]);
    assert!(wcs[1].wc_flags.contains(WcFlags::GRH | WcFlags::WITH_IMM), "{:?}", wcs[1].wc_flags);
    let mem = b.read_buf(&buf, 1024, 140)?;
    assert_eq!(mem[40..], [0x5a; 100], "the payload after the GRH area");
    // A wrong Q_Key: the send completes, the datagram is dropped and counted.
    b.post_recv(&ub, &[RecvWr { wr_id: 12, sge: vec![at(1024, 1024)] }])?;
    let bad = UdDest { remote_qkey: 8, ..to };
    b.post_send_wr(&ua, &[wr(4, wr_opcode::SEND, at(0, 10), Some(bad))])?;
    let got: Vec<_> = b.poll_cq(&cq, 4)?.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(4, wc_status::SUCCESS)]);
    assert_eq!(sim.network_drops()[0], 1, "the wrong Q_Key's datagram");
    let b: &mut dyn Backend = &mut sim;

    // UC to itself: a SEND with no receive posted is dropped; the QP stays in RTS.
    let uc_ops = send_ops::SEND | send_ops::RDMA_WRITE;
    let uc = b.create_qp(&attr(qp_type::UC, uc_ops))?;
    bring_up(b, qp_type::UC, &uc, Some(QpDest::to(&uc, &port)))?;
    b.post_send_wr(&uc, &[wr(2, wr_opcode::SEND, at(0, 8), None)])?;
    let got: Vec<_> = b.poll_cq(&cq, 4)?.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(2, wc_status::SUCCESS)]);
    assert_eq!(b.query_qp_state(&uc)?, QpState::Rts);
    assert_eq!(sim.network_drops()[0], 2, "the UC SEND with no receive");
    let b: &mut dyn Backend = &mut sim;
    b.post_recv(&uc, &[RecvWr { wr_id: 11, sge: vec![at(2048, 64)] }])?;
    b.post_send_wr(&uc, &[wr(3, wr_opcode::SEND, at(0, 8), None)])?;
    let mut got: Vec<_> = b.poll_cq(&cq, 4)?.iter().map(|w| (w.wr_id, w.status, w.byte_len)).collect();
    got.sort_unstable();
    assert_eq!(got, [(3, wc_status::SUCCESS, 0), (11, wc_status::SUCCESS, 8)]);
    drop(sim);
    // On the wire: the UD SEND Only with immediate and its DETH, the one with the wrong Q_Key,
    // then UC SEND Only twice (the dropped one went out too), and no ACK.
    let got: Vec<_> = packets(&path).iter().map(|d| (d.headers.bth.opcode, d.headers.deth.map(|d| d.src_qp))).collect();
    let _ = std::fs::remove_file(&path);
    assert_eq!(got, [(0x65, Some(ua.qp_num)), (0x64, Some(ua.qp_num)), (0x24, None), (0x24, None)]);
    Ok(())
}
