//! A capture of every RC opcode, read back by our own decoder and, when it is installed, by
//! tshark: an independent dissector of the Ethernet, IP, UDP and InfiniBand layers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;

use super::pcap::PcapWriter;
use super::*;
use crate::packet::{Aeth, AtomicEth, Bth, Headers, Reth, nak, opcode};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// One packet of the capture: its IP packet and what tshark should say of it.
struct Expect {
    ip: Vec<u8>,
    opcode: u8,
    psn: u32,
    payload: usize,
    syndrome: Option<u8>,
}

/// The packets of a conversation between QP 0x11 (at `a`) and QP 0x22 (at `b`): a SEND, a
/// WRITE, a READ and their answers, each kind with immediate data and with invalidate, on a
/// 256-byte path MTU.
fn conversation(a: IpAddr, b: IpAddr) -> Vec<Expect> {
    let req = Endpoints::new(a, b, Endpoints::entropy_port(0x11, 0x22));
    let resp = Endpoints::new(b, a, Endpoints::entropy_port(0x22, 0x11));
    let data: Vec<u8> = (0..700u32).map(|i| (i % 251) as u8).collect();
    let mut out = Vec::new();
    let mut push = |h: &Headers, payload: &[u8], ep: &Endpoints| {
        out.push(Expect {
            ip: encode_ip(h, payload, ep).unwrap_or_default(), // an empty packet fails the checks
            opcode: h.bth.opcode,
            psn: h.bth.psn,
            payload: payload.len(),
            syndrome: h.aeth.map(|a| a.syndrome),
        });
    };
    let mut psn = 0xff_fffd; // the PSNs wrap during the first message
    let message = |op, len, psn| Message { op, dest_qp: 0x22, pkey: 0xffff, psn, len, mtu: 256 };
    let ack = |psn, aeth| Headers {
        bth: Bth { opcode: opcode::ACKNOWLEDGE, pkey: 0xffff, dest_qp: 0x11, psn, ..Bth::default() },
        aeth: Some(aeth),
        ..Headers::default()
    };
    let ops = [
        (MessageOp::Send { solicited: true }, 700),
        (MessageOp::Send { solicited: false }, 40),
        (MessageOp::SendImm { solicited: false, imm: 0xcafe }, 600),
        (MessageOp::SendImm { solicited: false, imm: 0xbeef }, 3),
        (MessageOp::SendInv { solicited: false, rkey: 0x1234 }, 300),
        (MessageOp::SendInv { solicited: false, rkey: 0x1235 }, 0),
        (MessageOp::Write { va: 0x7f00_0000_1000, rkey: 0x99 }, 700),
        (MessageOp::Write { va: 0x7f00_0000_1000, rkey: 0x99 }, 64),
        (MessageOp::WriteImm { va: 0x7f00_0000_2000, rkey: 0x99, imm: 1 }, 513),
        (MessageOp::WriteImm { va: 0x7f00_0000_2000, rkey: 0x99, imm: 2 }, 8),
    ];
    for (msn, (op, len)) in ops.into_iter().enumerate() {
        let m = message(op, len, psn);
        for s in segments(&m) {
            push(&s.headers, &data[s.range], &req);
            psn = (s.headers.bth.psn + 1) & 0xff_ffff;
        }
        push(&ack((psn + 0xff_ffff) & 0xff_ffff, Aeth::ack(msn as u32 + 1)), &[], &resp);
    }
    for len in [700, 100] {
        let read = Headers {
            bth: Bth {
                opcode: opcode::READ_REQUEST,
                pkey: 0xffff,
                dest_qp: 0x22,
                ack_req: true,
                psn,
                ..Bth::default()
            },
            reth: Some(Reth { va: 0x7f00_0000_3000, rkey: 0x77, dma_len: len as u32 }),
            ..Headers::default()
        };
        push(&read, &[], &req);
        let m = Message { dest_qp: 0x11, ..message(MessageOp::ReadResponse { msn: 10 }, len, psn) };
        for s in segments(&m) {
            push(&s.headers, &data[s.range], &resp);
        }
        psn = (psn + packet_count(len, 256) as u32) & 0xff_ffff;
    }
    // An atomic of each kind and its ATOMIC Acknowledge.
    for (op, swap_add, compare) in [(opcode::COMPARE_SWAP, 0x5555, 0x1111), (opcode::FETCH_ADD, 7, 0)] {
        let bth = Bth { opcode: op, pkey: 0xffff, dest_qp: 0x22, ack_req: true, psn, ..Bth::default() };
        let atomic = Some(AtomicEth { va: 0x7f00_0000_4008, rkey: 0x66, swap_add, compare });
        push(&Headers { bth, atomic, ..Headers::default() }, &[], &req);
        let mut answer = ack(psn, Aeth::ack(11));
        answer.bth.opcode = opcode::ATOMIC_ACKNOWLEDGE;
        answer.atomic_ack = Some(0x1111);
        push(&answer, &[], &resp);
        psn = (psn + 1) & 0xff_ffff;
    }
    for aeth in [Aeth::nak(nak::PSN_SEQUENCE, 12), Aeth::nak(nak::REMOTE_ACCESS, 12), Aeth::rnr(0x0e, 12)] {
        push(&ack(psn, aeth), &[], &resp);
    }
    out
}

fn capture() -> Vec<Expect> {
    // Two simulated hosts on loopback, as the fabric gives them addresses.
    let v4 = |d| IpAddr::V4(Ipv4Addr::new(127, 0, d, 1));
    let v6 = |d| IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0x2, 0, 0, d));
    let mut all = conversation(v4(1), v4(2));
    all.extend(conversation(v6(1), v6(2)));
    all
}

fn every_rc_opcode() -> Vec<u8> {
    (0..=opcode::FETCH_ADD).chain([opcode::SEND_LAST_INV, opcode::SEND_ONLY_INV]).collect()
}

#[test]
fn the_capture_holds_every_opcode_and_decodes_back() -> Result<(), Box<dyn std::error::Error>> {
    let all = capture();
    let mut seen: Vec<u8> = all.iter().map(|e| e.opcode).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, every_rc_opcode());
    for e in &all {
        let d = decode_ip(&e.ip)?;
        assert_eq!((d.headers.bth.opcode, d.headers.bth.psn), (e.opcode, e.psn));
    }
    Ok(())
}

#[test]
fn tshark_dissects_the_capture_as_roce_v2_without_complaint() -> Result<(), Box<dyn std::error::Error>> {
    let all = capture();
    let path = std::env::temp_dir().join(format!("mlx5sim-wire-{}.pcap", std::process::id()));
    let mut w = PcapWriter::new(std::fs::File::create(&path)?)?;
    for (i, e) in all.iter().enumerate() {
        let (src, dst) = if i % 2 == 0 { (MAC_A, MAC_B) } else { (MAC_B, MAC_A) };
        w.write_ip(src, dst, &e.ip)?;
    }
    w.finish()?;
    let fields = [
        "frame.protocols",
        "infiniband.bth.opcode",
        "infiniband.bth.psn",
        "_ws.expert.severity",
        "infiniband.invariant.crc",
        "data.len",
        "_ws.col.Protocol",
        "infiniband.aeth.syndrome",
    ];
    // Wireshark 4.0 hands SENDs with Invalidate to its RPC-over-RDMA dissector, which calls an
    // empty one (valid InfiniBand) malformed: we carry no RPC.
    let mut args = vec!["-r".into(), path.display().to_string(), "--disable-protocol".into(), "rpcordma".into()];
    args.extend(["-T", "fields", "-E", "separator=|"].map(String::from));
    for f in fields {
        args.extend(["-e".to_string(), f.to_string()]);
    }
    let run = Command::new("tshark").args(&args).output();
    let Ok(run) = run else {
        println!("skip: tshark is not on PATH; the capture is only checked by our own decoder");
        std::fs::remove_file(&path).ok();
        return Ok(());
    };
    assert!(run.status.success(), "tshark: {}", String::from_utf8_lossy(&run.stderr));
    let text = String::from_utf8(run.stdout)?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), all.len(), "{text}");
    for (line, e) in lines.iter().zip(&all) {
        let cols: Vec<&str> = line.split('|').collect();
        let roce = cols[0].ends_with(":udp:infiniband") || cols[0].ends_with(":udp:infiniband:data");
        assert!(roce, "{line}");
        assert_eq!(cols[1], e.opcode.to_string(), "{line}");
        assert_eq!(cols[2], e.psn.to_string(), "{line}");
        assert_eq!(cols[3], "", "an expert note: {line}");
        // tshark 4.0 shows the ICRC (read big-endian) without checking it: it finds it where
        // we put it, after the payload and its pad (which it counts as data).
        let icrc = u32::from_be_bytes(e.ip[e.ip.len() - 4..].try_into()?);
        assert_eq!(cols[4], format!("{icrc:#010x}"), "{line}");
        let data = e.payload.next_multiple_of(4);
        assert_eq!(cols[5], if data == 0 { String::new() } else { data.to_string() }, "{line}");
        assert_eq!(cols[6], "RRoCE", "{line}");
        assert_eq!(cols[7], e.syndrome.map(|s| s.to_string()).unwrap_or_default(), "{line}");
    }
    // The checksums tshark can verify: IP header and UDP (it checks them when asked).
    let check = Command::new("tshark")
        .args([
            "-r",
            &path.display().to_string(),
            "--disable-protocol",
            "rpcordma",
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args(["-T", "fields", "-e", "ip.checksum.status", "-e", "udp.checksum.status", "-e", "_ws.malformed"])
        .output()?;
    let text = String::from_utf8(check.stdout)?;
    for (i, line) in text.lines().enumerate() {
        let ipv6 = i >= all.len() / 2;
        // 1 is "good" (0 "bad", 2 "unverified"); IPv6 has no header checksum.
        assert_eq!(line, if ipv6 { "\t1\t" } else { "1\t1\t" }, "frame {}: {text}", i + 1);
    }
    if std::env::var_os("MLX5SIM_KEEP_PCAP").is_none() {
        std::fs::remove_file(&path).ok();
    }
    Ok(())
}
