//! `Simulator::capture_to`: a WRITE, a SEND with immediate and a READ of several path MTUs
//! between two QPs, read back from the pcap file by the crate's own decoder and, when it is
//! installed, by tshark.

use std::path::{Path, PathBuf};
use std::process::Command;

use mlx5_dv::prelude::*;
use mlx5_dv::{AccessFlags as A, Buf, Mr, PdHandle, QpCap, QpDest, QpInitAttr, QpModify, RecvWr, SendFlags, Sge, WrOp};
use mlx5_dv::{profile::LinkLayer, wc_status};
use mlx5_sim::packet::opcode::*;
use mlx5_sim::wire::{Datagram, decode_ip};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);
/// `IBV_MTU_256`: small messages take several packets.
const MTU_256: u32 = 1;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("mlx5sim-{name}-{}.pcap", std::process::id()))
}

/// The frames of a classic pcap file (little-endian, as `PcapWriter` writes it).
fn frames(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
    let (mut at, mut out) = (24, Vec::new());
    while at < b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(b[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    out
}

struct World {
    sim: Simulator,
    pd: PdHandle,
    qp: mlx5_dv::Qp,
    peer: mlx5_dv::Qp,
    cq: mlx5_dv::Cq,
}

fn world(profile: Profile, capture: &Path) -> World {
    let mut sim = Simulator::new(profile).unwrap();
    sim.capture_to(capture).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 16).unwrap();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let attr = QpInitAttr::rc(pd, cq.handle, cap, None);
    let qp = sim.create_qp(&attr).unwrap();
    let peer = sim.create_qp(&attr).unwrap();
    let port = sim.query_port(ctx, 1).unwrap();
    for (q, p) in [(&qp, &peer), (&peer, &qp)] {
        let dest = QpDest { path_mtu: MTU_256, ..QpDest::to(p, &port) };
        for step in QpModify::connect(ACCESS, dest) {
            sim.modify_qp(q, &step).unwrap();
        }
    }
    World { sim, pd, qp, peer, cq }
}

fn buf(w: &mut World, data: &[u8]) -> (Buf, Mr) {
    let b = w.sim.alloc_buf(data.len()).unwrap();
    w.sim.write_buf(&b, 0, data).unwrap();
    let mr = w.sim.reg_mr(w.pd, b.addr, data.len() as u64, ACCESS).unwrap();
    (b, mr)
}

fn sge(mr: &Mr, len: usize) -> Vec<Sge> {
    vec![Sge { addr: mr.addr, length: len as u32, lkey: mr.lkey }]
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A WRITE of 700 bytes, a SEND with immediate of 300 and a READ of 1000, all successful.
fn exchange(w: &mut World) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (write, send, read) = (pattern(700, 1), pattern(300, 2), pattern(1000, 3));
    let (_, src) = buf(w, &write);
    let (_, dst) = buf(w, &[0; 700]);
    let (_, ssrc) = buf(w, &send);
    let (_, rdst) = buf(w, &[0; 300]);
    let (_, remote) = buf(w, &read);
    let (_, local) = buf(w, &[0; 1000]);
    w.sim.post_recv(&w.peer, &[RecvWr { wr_id: 9, sge: sge(&rdst, 300) }]).unwrap();
    let flags = SendFlags::SIGNALED;
    let ops = [
        WrOp::RdmaWrite { wr_id: 1, flags, rkey: dst.rkey, remote_addr: dst.addr, sge: sge(&src, 700) },
        WrOp::SendImm { wr_id: 2, flags, imm: 0xabcd, sge: sge(&ssrc, 300) },
        WrOp::RdmaRead { wr_id: 3, flags, rkey: remote.rkey, remote_addr: remote.addr, sge: sge(&local, 1000) },
    ];
    w.sim.post_send(&w.qp, &ops).unwrap();
    let wc = w.sim.poll_cq(&w.cq, 8).unwrap();
    assert_eq!(wc.len(), 4, "{wc:?}");
    assert!(wc.iter().all(|c| c.status == wc_status::SUCCESS), "{wc:?}");
    (write, send, read)
}

#[test]
fn a_capture_holds_each_message_as_its_path_mtu_packets_and_the_answers() {
    let path = temp("capture");
    let mut w = world(Profile::builtin("cx7").unwrap(), &path);
    let (write, send, read) = exchange(&mut w);
    let (qpn, peer) = (w.qp.qp_num, w.peer.qp_num);
    let got: Vec<Datagram> = frames(&path).iter().map(|f| decode_ip(&f[14..]).unwrap()).collect();
    let ops: Vec<u8> = got.iter().map(|d| d.headers.bth.opcode).collect();
    let want = [
        WRITE_FIRST,
        WRITE_MIDDLE,
        WRITE_LAST,
        ACKNOWLEDGE,
        SEND_FIRST,
        SEND_LAST_IMM,
        ACKNOWLEDGE,
        READ_REQUEST,
        READ_RESPONSE_FIRST,
        READ_RESPONSE_MIDDLE,
        READ_RESPONSE_MIDDLE,
        READ_RESPONSE_LAST,
    ];
    assert_eq!(ops, want);
    let p0 = got[0].headers.bth.psn;
    let psns: Vec<u32> = got.iter().map(|d| (d.headers.bth.psn.wrapping_sub(p0)) & 0xff_ffff).collect();
    assert_eq!(psns, [0, 1, 2, 2, 3, 4, 4, 5, 5, 6, 7, 8], "consecutive; an ACK names the last");
    let to: Vec<u32> = got.iter().map(|d| d.headers.bth.dest_qp).collect();
    let (q, p) = (qpn, peer);
    assert_eq!(to, [p, p, p, q, p, p, q, p, q, q, q, q]);
    let joined = |r: std::ops::Range<usize>| got[r].iter().flat_map(|d| d.payload.clone()).collect::<Vec<u8>>();
    assert_eq!(joined(0..3), write);
    assert_eq!(joined(4..6), send);
    assert_eq!(joined(8..12), read);
    assert_eq!(got[5].headers.imm, Some(0xabcd));
    assert_eq!(got[0].headers.reth.map(|r| r.dma_len), Some(700));
    assert!(got.iter().all(|d| d.payload.len() <= 256));
    tshark_agrees(&path, &ops, &psns.iter().map(|d| (p0 + d) & 0xff_ffff).collect::<Vec<_>>());
    std::fs::remove_file(&path).ok();
}

/// tshark (when on PATH) dissects every frame as RoCE v2 with our opcodes and PSNs and has no
/// expert note.
fn tshark_agrees(path: &Path, ops: &[u8], psns: &[u32]) {
    let file = path.display().to_string();
    // Wireshark hands some SENDs to its RPC-over-RDMA dissector; we carry no RPC (see
    // sim/src/wire/tshark_tests.rs).
    let base = ["-r", &file, "--disable-protocol", "rpcordma"];
    let fields = ["-T", "fields", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn", "-e", "_ws.col.Protocol"];
    let Ok(run) = Command::new("tshark").args(base).args(fields).output() else {
        println!("skip: tshark is not on PATH");
        return;
    };
    let text = String::from_utf8(run.stdout).unwrap();
    println!("{text}");
    let want: String = ops.iter().zip(psns).map(|(o, p)| format!("{o}\t{p}\tRRoCE\n")).collect();
    assert_eq!(text, want);
    let expert = Command::new("tshark").args(base).args(["-q", "-z", "expert"]).output().unwrap();
    let notes = String::from_utf8(expert.stdout).unwrap();
    assert!(notes.trim().is_empty() && !notes.contains("Malformed"), "{notes}");
}

#[test]
fn an_infiniband_fabric_has_no_ip_so_nothing_is_captured() {
    let path = temp("ib");
    let mut p = Profile::builtin("cx7").unwrap();
    p.device.link_layer = LinkLayer::Infiniband;
    let mut w = world(p, &path);
    exchange(&mut w);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 24, "the file header only");
    std::fs::remove_file(&path).ok();
}

/// The UDP source port of an Ethernet frame carrying IPv4 or IPv6.
fn udp_sport(frame: &[u8]) -> u16 {
    let ip = &frame[14..];
    let at = if ip[0] >> 4 == 4 { usize::from(ip[0] & 0xf) * 4 } else { 40 };
    u16::from_be_bytes([ip[at], ip[at + 1]])
}

/// `mlx5dv_modify_qp_udp_sport` on the responder: its packets (ACKs, READ responses) leave
/// from that port; the requester's keep their flow-entropy port. A QP not in RTS, and a UD
/// QP, are refused with EOPNOTSUPP, as is any QP on a device without the cap.
#[test]
fn a_qp_udp_source_port_is_the_one_its_packets_leave_from() {
    let path = temp("sport");
    let mut w = world(Profile::builtin("cx7").unwrap(), &path);
    w.sim.modify_qp_udp_sport(&w.peer, 55555).unwrap();
    exchange(&mut w);
    let (qpn, peer) = (w.qp.qp_num, w.peer.qp_num);
    let frames = frames(&path);
    let mut seen = (0, 0);
    for f in &frames {
        let d = decode_ip(&f[14..]).unwrap();
        let sport = udp_sport(f);
        if d.headers.bth.dest_qp == qpn {
            assert_eq!(sport, 55555, "a packet of the responder");
            seen.0 += 1;
        } else {
            assert_eq!(d.headers.bth.dest_qp, peer);
            assert_eq!(sport, mlx5_sim::wire::Endpoints::entropy_port(qpn, peer), "a packet of the requester");
            seen.1 += 1;
        }
    }
    assert_eq!(seen, (6, 6), "responder's and requester's packets");
    std::fs::remove_file(&path).ok();
    let e = w.sim.modify_qp_udp_sport(&w.peer, 1).err().map(|e| e.errno());
    assert_eq!(e, None, "again in RTS");
    let ctx = w.sim.open_ibv_device("mlx5_0").unwrap();
    let cq = w.sim.create_cq(ctx, 4).unwrap();
    let pd = w.sim.alloc_pd(ctx).unwrap();
    let cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let fresh = w.sim.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, None)).unwrap();
    let e = w.sim.modify_qp_udp_sport(&fresh, 4000).err().map(|e| e.errno());
    assert_eq!(e, Some(mlx5_dv::errno::EOPNOTSUPP), "a QP in RESET");

    let mut off = Profile::builtin("cx7").unwrap();
    off.hca_cap.rts2rts_qp_udp_sport = false;
    let path = temp("sport-off");
    let mut w = world(off, &path);
    let e = w.sim.modify_qp_udp_sport(&w.peer, 55555).err().map(|e| e.errno());
    assert_eq!(e, Some(mlx5_dv::errno::EOPNOTSUPP), "without rts2rts_qp_udp_sport");
    std::fs::remove_file(&path).ok();
}

/// An XRC SEND is captured on the XRC transport: its packets carry the XRC opcodes and an
/// XRCETH naming the SRQ the message is for, and the ACK comes back as an XRC ACK.
#[test]
fn an_xrc_send_is_captured_with_the_srq_it_names() {
    use mlx5_dv::{SendWr, SrqInitAttr, SrqXrc, XrcdInitAttr, qp_init_mask, qp_type, wr_opcode, xrcd_init_mask};
    let path = temp("xrc");
    let mut sim = Simulator::new(Profile::builtin("cx7").unwrap()).unwrap();
    sim.capture_to(&path).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let (cq, rcq) = (sim.create_cq(ctx, 16).unwrap(), sim.create_cq(ctx, 16).unwrap());
    let xa = XrcdInitAttr { ctx, comp_mask: xrcd_init_mask::FD | xrcd_init_mask::OFLAGS, fd: -1, oflags: 0 };
    let x = sim.open_xrcd(&xa).unwrap();
    let srq = sim
        .create_srq(&SrqInitAttr {
            pd,
            max_wr: 4,
            max_sge: 1,
            xrc: Some(SrqXrc { xrcd: x.handle, cq: rcq.handle }),
            tm: None,
        })
        .unwrap();
    let mut t = QpInitAttr::rc(pd, cq.handle, QpCap::default(), None);
    (t.qp_type, t.xrcd, t.comp_mask) = (qp_type::XRC_RECV, Some(x.handle), Some(qp_init_mask::XRCD));
    let tgt = sim.create_qp(&t).unwrap();
    let cap = QpCap { max_send_wr: 4, max_recv_wr: 0, max_send_sge: 1, max_recv_sge: 0, max_inline_data: 0 };
    let mut i = QpInitAttr::rc(pd, cq.handle, cap, None);
    (i.qp_type, i.comp_mask) = (qp_type::XRC_SEND, Some(qp_init_mask::PD));
    let ini = sim.create_qp(&i).unwrap();
    let port = sim.query_port(ctx, 1).unwrap();
    for (q, p) in [(&tgt, &ini), (&ini, &tgt)] {
        for step in QpModify::connect(ACCESS, QpDest { path_mtu: MTU_256, ..QpDest::to(p, &port) }) {
            sim.modify_qp(q, &step).unwrap();
        }
    }
    let (_dst, dmr) = {
        let b = sim.alloc_buf(512).unwrap();
        let mr = sim.reg_mr(pd, b.addr, 512, ACCESS).unwrap();
        (b, mr)
    };
    sim.post_srq_recv(&srq, &[RecvWr { wr_id: 7, sge: vec![Sge { addr: dmr.addr, length: 512, lkey: dmr.lkey }] }])
        .unwrap();
    let src = sim.alloc_buf(300).unwrap();
    sim.write_buf(&src, 0, &pattern(300, 4)).unwrap();
    let smr = sim.reg_mr(pd, src.addr, 300, ACCESS).unwrap();
    let wr = SendWr {
        wr_id: 1,
        opcode: wr_opcode::SEND,
        send_flags: SendFlags::SIGNALED,
        sge: vec![Sge { addr: smr.addr, length: 300, lkey: smr.lkey }],
        xrc_remote_srqn: srq.srq_num,
        ..SendWr::default()
    };
    sim.post_send_wr(&ini, &[wr]).unwrap();
    assert_eq!(sim.poll_cq(&cq, 4).unwrap().iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), [(1, 0)]);
    assert_eq!(sim.poll_cq(&rcq, 4).unwrap().iter().map(|w| (w.wr_id, w.byte_len)).collect::<Vec<_>>(), [(7, 300)]);
    let raw = frames(&path);
    std::fs::remove_file(&path).ok();
    // On the wire: the XRC opcodes (the RC ones plus 0xa0).
    let bth_at = |f: &[u8]| 14 + if f[14] >> 4 == 6 { 40 } else { 20 } + 8;
    let wire_ops: Vec<u8> = raw.iter().map(|f| f[bth_at(f)]).collect();
    assert_eq!(wire_ops, [XRC | SEND_FIRST, XRC | SEND_LAST, XRC | ACKNOWLEDGE]);
    // Decoded: the RC twins, the requests with the XRCETH's SRQ number.
    let got: Vec<Datagram> = raw.iter().map(|f| decode_ip(&f[14..]).unwrap()).collect();
    let seen: Vec<(u8, Option<u32>)> = got.iter().map(|d| (d.headers.bth.opcode, d.headers.xrc)).collect();
    let s = Some(srq.srq_num);
    assert_eq!(&seen[..2], [(SEND_FIRST, s), (SEND_LAST, s)]);
    assert_eq!(seen[2].0, ACKNOWLEDGE);
}
