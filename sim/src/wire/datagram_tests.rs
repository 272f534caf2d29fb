use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::packet::{Aeth, Bth, Reth};

fn v4() -> Endpoints {
    let a = |d| IpAddr::V4(Ipv4Addr::new(192, 168, 1, d));
    Endpoints::new(a(10), a(20), 0xc123)
}

fn v6() -> Endpoints {
    let a = |d| IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, d));
    Endpoints { flow_label: 0x12345, ..Endpoints::new(a(1), a(2), 0xd00d) }
}

fn write_only_imm() -> Headers {
    let bth = Bth {
        opcode: opcode::WRITE_ONLY_IMM,
        se: true,
        pkey: 0xffff,
        dest_qp: 0x12_3456,
        ack_req: true,
        psn: 0xab_cdef,
        ..Bth::default()
    };
    Headers {
        bth,
        reth: Some(Reth { va: 0x1122_3344_5566_7788, rkey: 0xdead_beef, dma_len: 5 }),
        imm: Some(0x0102_0304),
        ..Headers::default()
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_default()).collect()
}

/// The same packet as Scapy 2.5's `IP()/UDP()/BTH()` (scapy.contrib.roce computes its own
/// ICRC, least significant byte first) builds it: an independent check of every byte.
#[test]
fn the_ipv4_packet_is_byte_for_byte_what_scapy_builds() -> Result<(), Box<dyn std::error::Error>> {
    let scapy = hex(concat!(
        "45020048000040004011b734c0a8010ac0a80114c12312b70034475b",
        "0bb0ffff0012345680abcdef1122334455667788deadbeef0000000501020304",
        "68656c6c6f000000102bcb32"
    ));
    let ip = encode_ip(&write_only_imm(), b"hello", &v4())?;
    assert_eq!(ip, scapy);
    assert_eq!(encode(&write_only_imm(), b"hello", &v4())?, scapy[28..]);
    let d = decode_ip(&ip)?;
    assert_eq!(
        (d.headers.reth, d.headers.imm, &d.payload[..]),
        (write_only_imm().reth, Some(0x0102_0304), &b"hello"[..])
    );
    assert_eq!(decode(&scapy[28..], &v4())?, d);
    Ok(())
}

#[test]
fn the_icrc_is_crc32_of_the_masked_pseudo_packet_little_endian() -> Result<(), Box<dyn std::error::Error>> {
    for ep in [v4(), v6()] {
        let ip = encode_ip(&write_only_imm(), b"payload!", &ep)?;
        let hl = if ep.src.is_ipv4() { 20 } else { 40 };
        let mut pseudo = vec![0xff; 8];
        pseudo.extend_from_slice(&ip[..ip.len() - 4]);
        let masks: &[usize] = if hl == 20 { &[1, 8, 10, 11] } else { &[1, 2, 3, 7] };
        for &i in masks {
            pseudo[8 + i] = 0xff;
        }
        pseudo[8] |= 0x0f * u8::from(hl == 40);
        pseudo[8 + hl + 6] = 0xff;
        pseudo[8 + hl + 7] = 0xff;
        pseudo[8 + hl + 8 + 4] = 0xff;
        let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(&pseudo);
        assert_eq!(ip[ip.len() - 4..], crc.to_le_bytes());
    }
    Ok(())
}

#[test]
fn variant_fields_leave_the_icrc_alone_and_invariant_ones_do_not() -> Result<(), Box<dyn std::error::Error>> {
    for ep in [v4(), v6()] {
        let base = encode(&write_only_imm(), b"x", &ep)?;
        let mut h = write_only_imm();
        h.bth.fecn = true;
        h.bth.becn = true;
        let marked = Endpoints { tclass: 0x03, hop_limit: 1, flow_label: 0xabcde, ..ep };
        let other = encode(&h, b"x", &marked)?;
        assert_eq!(base[base.len() - 4..], other[other.len() - 4..], "{ep:?}");
        // Congestion marks on the way keep the packet good.
        assert!(decode(&other, &ep)?.headers.bth.fecn);
        let moved = encode(&write_only_imm(), b"x", &Endpoints { sport: 0xc124, ..ep })?;
        assert_ne!(base[base.len() - 4..], moved[moved.len() - 4..]);
    }
    Ok(())
}

#[test]
fn each_defect_has_its_error() -> Result<(), Box<dyn std::error::Error>> {
    let ep = v4();
    let good = encode(&write_only_imm(), b"hello", &ep)?;
    assert_eq!(decode(&good[..15], &ep), Err(WireError::Truncated));
    assert_eq!(decode(&good[..good.len() - 1], &ep), Err(WireError::BadPad));
    let mut flipped = good.clone();
    flipped[40] ^= 1;
    assert!(matches!(decode(&flipped, &ep), Err(WireError::BadIcrc { .. })));
    // A header defect under a correct ICRC: rewrite the ICRC after the change.
    let ip = encode_ip(&write_only_imm(), b"hello", &ep)?;
    let reseal = |mut b: Vec<u8>| {
        let n = b.len() - 4;
        let crc = icrc(&ip[..20], &ip[20..28], &b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        b
    };
    let mut h = write_only_imm();
    h.bth.tver = 1;
    assert_eq!(decode(&encode(&h, b"hello", &ep)?, &ep), Err(WireError::BadVersion(1)));
    let mut b = good.clone();
    // RD SEND Only: the RD transport is not simulated.
    b[0] = 0x44;
    assert_eq!(decode(&reseal(b), &ep), Err(WireError::UnsupportedOpcode(0x44)));
    let mut b = good.clone();
    b[0] = opcode::WRITE_ONLY;
    b[1] |= 0x30;
    let mut b = reseal(b);
    // WRITE Only without ImmDt: 4 more payload bytes, pad 3 over 12 is fine; an ACK is not.
    assert!(decode(&b, &ep).is_ok());
    b[0] = opcode::ACKNOWLEDGE;
    assert_eq!(decode(&reseal(b), &ep), Err(WireError::BadPad));
    let ip = encode_ip(&write_only_imm(), b"hello", &ep)?;
    let mut bad = ip.clone();
    bad[8] = 1;
    assert_eq!(decode_ip(&bad), Err(WireError::BadIpChecksum));
    let mut bad = ip.clone();
    bad[30] ^= 0x80;
    assert_eq!(decode_ip(&bad), Err(WireError::BadUdpChecksum));
    let mut bad = ip.clone();
    bad[24..26].copy_from_slice(&[0, 9]);
    assert_eq!(decode_ip(&bad), Err(WireError::BadLength));
    assert_eq!(decode_ip(&ip[..30]), Err(WireError::Truncated));
    assert_eq!(decode_ip(&[0x50; 40]), Err(WireError::NotIp(0x50)));
    let v6 = encode_ip(&write_only_imm(), b"hello", &v6())?;
    assert_eq!(decode_ip(&v6)?.payload, b"hello");
    let mut bad = v6.clone();
    bad[42..44].copy_from_slice(&53u16.to_be_bytes());
    assert_eq!(decode_ip(&bad), Err(WireError::WrongPort(53)));
    Ok(())
}

#[test]
fn entropy_ports_stay_in_the_roce_range_and_differ_by_connection() {
    let ports: std::collections::BTreeSet<u16> = (0..64).map(|q| Endpoints::entropy_port(q, 0x100 + q)).collect();
    assert!(ports.iter().all(|&p| p >= 0xc000));
    assert!(ports.len() > 32, "{ports:?}");
    assert_eq!(Endpoints::entropy_port(5, 9), Endpoints::entropy_port(5, 9));
}

fn any_headers() -> impl Strategy<Value = Headers> {
    let ops: Vec<u8> = (0..=opcode::FETCH_ADD).chain([opcode::SEND_LAST_INV, opcode::SEND_ONLY_INV]).collect();
    (prop::sample::select(ops), any::<(bool, bool, u16, u32, bool, u32)>(), any::<(u64, u32, u32, u8, u32, u32)>())
        .prop_map(|(op, (se, migreq, pkey, qp, ack_req, psn), (va, rkey, len, syn, msn, imm))| {
            let bth = Bth {
                opcode: op,
                se,
                migreq,
                pkey,
                dest_qp: qp & 0xff_ffff,
                ack_req,
                psn: psn & 0xff_ffff,
                ..Bth::default()
            };
            let all = Headers {
                bth,
                reth: Some(Reth { va, rkey, dma_len: len }),
                aeth: Some(Aeth { syndrome: syn, msn: msn & 0xff_ffff }),
                imm: Some(imm),
                ieth: Some(imm),
                atomic: Some(crate::packet::AtomicEth {
                    va,
                    rkey,
                    swap_add: va.rotate_left(7),
                    compare: u64::from(imm),
                }),
                atomic_ack: Some(va ^ u64::from(msn)),
                deth: None,
                xrc: None,
                dc: None,
            };
            // Keep only the extended headers the opcode carries.
            let mut b = Vec::new();
            all.encode(&mut b);
            Headers::decode(&b).map(|d| d.0).unwrap_or_default()
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), v6 in any::<bool>()) {
        let ep = if v6 { super::tests::v6() } else { v4() };
        let _ = decode(&bytes, &ep);
        let _ = decode_ip(&bytes);
        let _ = icrc(&bytes, &bytes, &bytes);
        let mut ip = bytes.clone();
        if let Some(b) = ip.first_mut() {
            *b = if v6 { 0x60 } else { 0x45 };
        }
        let _ = decode_ip(&ip);
    }

    #[test]
    fn encode_then_decode_gives_the_packet_back(h in any_headers(), payload in prop::collection::vec(any::<u8>(), 0..64), v6 in any::<bool>()) {
        let carries = !matches!(
            h.bth.opcode,
            opcode::READ_REQUEST
                | opcode::ACKNOWLEDGE
                | opcode::ATOMIC_ACKNOWLEDGE
                | opcode::COMPARE_SWAP
                | opcode::FETCH_ADD
        );
        let payload = if carries { payload } else { Vec::new() };
        let ep = if v6 { super::tests::v6() } else { v4() };
        let mut want = h;
        want.bth.pad = ((4 - payload.len() % 4) % 4) as u8;
        let fail = |e: WireError| TestCaseError::fail(e.to_string());
        let d = decode(&encode(&h, &payload, &ep).map_err(fail)?, &ep).map_err(fail)?;
        prop_assert_eq!(&d, &Datagram { headers: want, payload: payload.clone() });
        prop_assert_eq!(decode_ip(&encode_ip(&h, &payload, &ep).map_err(fail)?).map_err(fail)?, d);
    }
}
