//! A message cut into the packets of its path MTU (IBTA 9.7.2): FIRST, MIDDLE…, LAST, or ONLY
//! when it fits one packet (a zero-length message is one ONLY packet), with consecutive PSNs
//! modulo 2^24. A WRITE's RETH rides on its first packet only; ImmDt, IETH and the AckReq bit
//! (and the SE bit of a SEND) on its last; a READ response carries an AETH on its first, last
//! and only packets.

use std::ops::Range;

use crate::packet::{Aeth, Bth, Headers, Reth, opcode};

/// What a message is, with what its opcodes need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageOp {
    /// A SEND.
    Send {
        /// Solicited event on the last packet.
        solicited: bool,
    },
    /// A SEND with immediate data.
    SendImm {
        /// Solicited event on the last packet.
        solicited: bool,
        /// The immediate data.
        imm: u32,
    },
    /// A SEND with Invalidate.
    SendInv {
        /// Solicited event on the last packet.
        solicited: bool,
        /// The key the responder invalidates.
        rkey: u32,
    },
    /// An RDMA WRITE.
    Write {
        /// The remote address.
        va: u64,
        /// The remote key.
        rkey: u32,
    },
    /// An RDMA WRITE with immediate data.
    WriteImm {
        /// The remote address.
        va: u64,
        /// The remote key.
        rkey: u32,
        /// The immediate data.
        imm: u32,
    },
    /// The response to an RDMA READ request.
    ReadResponse {
        /// The responder's MSN, for the AETHs.
        msn: u32,
    },
}

/// A message to cut into packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// What it is.
    pub op: MessageOp,
    /// The destination QP.
    pub dest_qp: u32,
    /// The partition key.
    pub pkey: u16,
    /// The first packet's PSN (a READ response starts at its request's PSN).
    pub psn: u32,
    /// The message's bytes.
    pub len: usize,
    /// The path MTU in bytes (256 to 4096; anything below 1 counts as 1).
    pub mtu: usize,
}

/// One packet of a message: its headers and which bytes of the message it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The transport headers (the pad count is left to the encoder).
    pub headers: Headers,
    /// The message's bytes this packet carries.
    pub range: Range<usize>,
}

/// How many packets a message of `len` bytes takes on a path MTU of `mtu` (at least one):
/// also how many PSNs a READ request consumes.
pub fn packet_count(len: usize, mtu: usize) -> usize {
    len.div_ceil(mtu.max(1)).max(1)
}

/// Where a packet stands in its message.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    First,
    Middle,
    Last,
    Only,
}

/// The opcode of a packet of `op` at `place`.
fn opcode_at(op: &MessageOp, place: Place) -> u8 {
    use opcode::*;
    // [FIRST, MIDDLE, LAST, ONLY] for each kind of message.
    let row = match op {
        MessageOp::Send { .. } => [SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY],
        MessageOp::SendImm { .. } => [SEND_FIRST, SEND_MIDDLE, SEND_LAST_IMM, SEND_ONLY_IMM],
        MessageOp::SendInv { .. } => [SEND_FIRST, SEND_MIDDLE, SEND_LAST_INV, SEND_ONLY_INV],
        MessageOp::Write { .. } => [WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY],
        MessageOp::WriteImm { .. } => [WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST_IMM, WRITE_ONLY_IMM],
        MessageOp::ReadResponse { .. } => {
            [READ_RESPONSE_FIRST, READ_RESPONSE_MIDDLE, READ_RESPONSE_LAST, READ_RESPONSE_ONLY]
        }
    };
    row[place as usize]
}

/// The packets of a message, in order.
pub fn segments(m: &Message) -> impl Iterator<Item = Segment> + '_ {
    let mtu = m.mtu.max(1);
    let n = packet_count(m.len, mtu);
    (0..n).map(move |i| {
        let place = match (i, n) {
            (_, 1) => Place::Only,
            (0, _) => Place::First,
            (i, n) if i + 1 == n => Place::Last,
            _ => Place::Middle,
        };
        let starts = matches!(place, Place::First | Place::Only);
        let ends = matches!(place, Place::Last | Place::Only);
        let response = matches!(m.op, MessageOp::ReadResponse { .. });
        let bth = Bth {
            opcode: opcode_at(&m.op, place),
            se: ends
                && matches!(
                    m.op,
                    MessageOp::Send { solicited: true }
                        | MessageOp::SendImm { solicited: true, .. }
                        | MessageOp::SendInv { solicited: true, .. }
                ),
            pkey: m.pkey,
            dest_qp: m.dest_qp & 0xff_ffff,
            ack_req: ends && !response,
            psn: (m.psn.wrapping_add(i as u32)) & 0xff_ffff,
            ..Bth::default()
        };
        let mut h = Headers { bth, ..Headers::default() };
        match m.op {
            MessageOp::Write { va, rkey } | MessageOp::WriteImm { va, rkey, .. } if starts => {
                h.reth = Some(Reth { va, rkey, dma_len: m.len as u32 });
            }
            MessageOp::ReadResponse { msn } if starts || ends => h.aeth = Some(Aeth::ack(msn)),
            _ => {}
        }
        match m.op {
            MessageOp::SendImm { imm, .. } | MessageOp::WriteImm { imm, .. } if ends => h.imm = Some(imm),
            MessageOp::SendInv { rkey, .. } if ends => h.ieth = Some(rkey),
            _ => {}
        }
        Segment { headers: h, range: i * mtu..((i + 1) * mtu).min(m.len) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opcode::*;

    fn msg(op: MessageOp, len: usize) -> Message {
        Message { op, dest_qp: 0x11, pkey: 0xffff, psn: 0xff_fffe, len, mtu: 1024 }
    }

    #[test]
    fn a_write_is_first_middle_last_with_consecutive_psns_that_wrap() {
        let m = msg(MessageOp::WriteImm { va: 0x1000, rkey: 7, imm: 9 }, 3000);
        let s: Vec<Segment> = segments(&m).collect();
        let ops: Vec<u8> = s.iter().map(|s| s.headers.bth.opcode).collect();
        assert_eq!(ops, [WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST_IMM]);
        let psns: Vec<u32> = s.iter().map(|s| s.headers.bth.psn).collect();
        assert_eq!(psns, [0xff_fffe, 0xff_ffff, 0]);
        assert_eq!(s[0].headers.reth, Some(Reth { va: 0x1000, rkey: 7, dma_len: 3000 }));
        assert!(s[1..].iter().all(|s| s.headers.reth.is_none()));
        assert_eq!(s.iter().map(|s| s.headers.imm).collect::<Vec<_>>(), [None, None, Some(9)]);
        assert_eq!(s.iter().map(|s| s.headers.bth.ack_req).collect::<Vec<_>>(), [false, false, true]);
        assert_eq!(s.iter().map(|s| s.range.clone()).collect::<Vec<_>>(), [0..1024, 1024..2048, 2048..3000]);
    }

    #[test]
    fn small_and_empty_messages_are_one_only_packet() {
        for len in [0, 1, 1024] {
            let s: Vec<Segment> = segments(&msg(MessageOp::SendInv { solicited: true, rkey: 5 }, len)).collect();
            assert_eq!(s.len(), 1);
            let h = s[0].headers;
            assert_eq!((h.bth.opcode, h.ieth, h.bth.se, h.bth.ack_req), (SEND_ONLY_INV, Some(5), true, true));
            assert_eq!(s[0].range, 0..len);
        }
        assert_eq!(packet_count(0, 4096), 1);
        assert_eq!(packet_count(4097, 4096), 2);
    }

    #[test]
    fn read_responses_carry_an_aeth_first_last_and_only() {
        let s: Vec<Segment> = segments(&msg(MessageOp::ReadResponse { msn: 3 }, 4096)).collect();
        let ops: Vec<u8> = s.iter().map(|s| s.headers.bth.opcode).collect();
        assert_eq!(ops, [READ_RESPONSE_FIRST, READ_RESPONSE_MIDDLE, READ_RESPONSE_MIDDLE, READ_RESPONSE_LAST]);
        let aeth: Vec<bool> = s.iter().map(|s| s.headers.aeth.is_some()).collect();
        assert_eq!(aeth, [true, false, false, true]);
        assert!(s.iter().all(|s| !s.headers.bth.ack_req));
        let one: Vec<Segment> = segments(&msg(MessageOp::ReadResponse { msn: 3 }, 8)).collect();
        assert_eq!((one[0].headers.bth.opcode, one[0].headers.aeth), (READ_RESPONSE_ONLY, Some(Aeth::ack(3))));
    }

    #[test]
    fn the_payloads_of_the_packets_make_the_message() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for mtu in [256, 512, 1024, 2048, 4096] {
            for len in [0, 1, 255, 256, 257, 4096, 9999, 10_000] {
                for op in [MessageOp::Send { solicited: false }, MessageOp::Write { va: 0, rkey: 1 }] {
                    let m = Message { mtu, len, ..msg(op, len) };
                    let mut joined = Vec::new();
                    for s in segments(&m) {
                        assert!(s.range.len() <= mtu);
                        joined.extend_from_slice(&data[s.range]);
                    }
                    assert_eq!(joined, data[..len], "mtu {mtu} len {len}");
                    assert_eq!(segments(&m).count(), packet_count(len, mtu));
                }
            }
        }
    }
}
