//! The packets of the reliable connected transport, as IBTA vol. 1 ch. 9 lays out their
//! headers: the base transport header (BTH) and the extended headers a request or response
//! carries (RETH, AETH, ImmDt, IETH, AtomicETH, AtomicAckETH; DETH for UD, whose opcodes and
//! UC's [`Headers`] also reads and writes; XRC's, whose requests carry an XRCETH after the
//! BTH, as [`Headers::xrc`]). A requester turns a WQE into request packets, the
//! fabric carries them to the responder, and the responder answers with ACKs, NAKs and READ
//! responses. [`Headers::encode`] and [`Headers::decode`] give the RoCE v2 byte layout
//! (big-endian; the UDP/IP headers and ICRC around it are the fabric's).

pub use mlx5_dv::net_fault::opcode;

/// NAK codes of an AETH whose syndrome says NAK (IBTA table 44).
pub mod nak {
    /// PSN sequence error.
    pub const PSN_SEQUENCE: u8 = 0;
    /// Invalid request.
    pub const INVALID_REQUEST: u8 = 1;
    /// Remote access error.
    pub const REMOTE_ACCESS: u8 = 2;
    /// Remote operational error.
    pub const REMOTE_OPERATIONAL: u8 = 3;
}

/// The base transport header: 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bth {
    /// The opcode ([`opcode`]).
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// Migration request.
    pub migreq: bool,
    /// Pad count: bytes added to align the payload to 4.
    pub pad: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

/// The RDMA extended transport header: 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length: the bytes of the whole message.
    pub dma_len: u32,
}

/// The atomic extended transport header of a CmpSwap or FetchAdd request: 28 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// Virtual address (8-byte aligned, or the responder refuses it).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// The swap value (CmpSwap) or the addend (FetchAdd).
    pub swap_add: u64,
    /// The compare value (CmpSwap; FetchAdd ignores it).
    pub compare: u64,
}

/// What an AETH says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// ACK, with its credit count.
    Ack(u8),
    /// RNR NAK, with its timer code.
    Rnr(u8),
    /// NAK with a [`nak`] code.
    Nak(u8),
}

/// The ACK extended transport header: 4 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    /// Syndrome: bits 6:5 say ACK (00), RNR NAK (01) or NAK (11); bits 4:0 the value.
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Aeth {
    /// An ACK (with no credit count: 0x1f, "invalid", as for a QP without end-to-end credits).
    pub fn ack(msn: u32) -> Self {
        Aeth { syndrome: 0x1f, msn }
    }

    /// A NAK with a [`nak`] code.
    pub fn nak(code: u8, msn: u32) -> Self {
        Aeth { syndrome: 0x60 | (code & 0x1f), msn }
    }

    /// An RNR NAK with a timer code.
    pub fn rnr(timer: u8, msn: u32) -> Self {
        Aeth { syndrome: 0x20 | (timer & 0x1f), msn }
    }

    /// What the syndrome says (the reserved 10 reads as a NAK with its value).
    pub fn kind(&self) -> Ack {
        let v = self.syndrome & 0x1f;
        match (self.syndrome >> 5) & 3 {
            0 => Ack::Ack(v),
            1 => Ack::Rnr(v),
            _ => Ack::Nak(v),
        }
    }
}

/// A packet's transport headers: the BTH and the extended headers its opcode carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Headers {
    /// Base transport header.
    pub bth: Bth,
    /// RDMA extended header (WRITE First/Only, READ Request).
    pub reth: Option<Reth>,
    /// ACK extended header (Acknowledge, READ Response First/Last/Only).
    pub aeth: Option<Aeth>,
    /// Immediate data (the `_IMM` opcodes).
    pub imm: Option<u32>,
    /// Invalidate extended header: the key to invalidate (SEND with Invalidate).
    pub ieth: Option<u32>,
    /// Atomic extended header (CmpSwap, FetchAdd).
    pub atomic: Option<AtomicEth>,
    /// Atomic acknowledge extended header: the original value at the remote address
    /// (ATOMIC Acknowledge).
    pub atomic_ack: Option<u64>,
    /// Datagram extended header (the UD opcodes).
    pub deth: Option<Deth>,
    /// The XRC transport: `bth.opcode` holds the RC twin of the opcode on the wire (which is
    /// it plus [`opcode::XRC`]), and a request carries this SRQ number in an XRCETH (4 bytes,
    /// 24 bits used) right after the BTH. A response carries none: decoding one gives 0.
    pub xrc: Option<u32>,
    /// A DC request between processes, in the simulator's own encoding ([`Dceth`]):
    /// `bth.opcode` holds the RC twin of the opcode on the wire (which is it plus
    /// [`DC_OPCODES`]), and the DCETH follows the BTH. Answers are plain RC packets.
    pub dc: Option<Dceth>,
}

/// The first of the opcodes the simulator's DC requests take on the wire: RC's plus this,
/// in the range IBTA leaves to manufacturers (0xc0 to 0xff). How mlx5 puts DC on the wire
/// is not public; this encoding is the simulator's own (unverified against hardware, and no
/// dissector decodes it).
pub const DC_OPCODES: u8 = 0xc0;

/// The simulator's DC extended header, 16 bytes after the BTH of a DC request: the DCT's
/// access key (8 bytes), a byte whose top bit marks a connection's first request, the
/// requesting DCI's QP number (24 bits; the DCT answers it) and the DCI's connection number
/// (4 bytes). The DCT's number is the BTH's destination QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dceth {
    /// The DC access key the DCI's WQE named.
    pub key: u64,
    /// The DCI's QP number.
    pub src_qp: u32,
    /// The connection the request belongs to: a number the DCI's device gives each run of a
    /// DCI's requests to one DCT (never 0 from a DCI; 0: none, the request stands alone).
    pub conn: u32,
    /// The request is its connection's first (its PSN starts the connection's stream).
    pub first: bool,
}

impl Dceth {
    /// Its bytes on the wire.
    pub const LEN: usize = 16;
}

/// Whether an RC opcode is a request (an XRC one carries an XRCETH): every one but the READ
/// responses and the two acknowledges.
fn is_request(op: u8) -> bool {
    !(opcode::READ_RESPONSE_FIRST..=opcode::ATOMIC_ACKNOWLEDGE).contains(&op)
}

/// The datagram extended transport header: 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qp: u32,
}

/// Which extended headers an opcode carries, with the UC and UD opcodes: a UC opcode
/// carries what its RC twin does; the UD ones a DETH (and ImmDt with immediate).
fn extended_any(op: u8) -> (bool, bool, bool, bool, bool) {
    match op {
        opcode::UD_SEND_ONLY => (false, false, false, false, true),
        opcode::UD_SEND_ONLY_IMM => (false, false, true, false, true),
        0x20..=0x2b => {
            let (reth, aeth, imm, ieth) = extended(op - opcode::UC);
            (reth, aeth, imm, ieth, false)
        }
        _ => {
            let (reth, aeth, imm, ieth) = extended(op);
            (reth, aeth, imm, ieth, false)
        }
    }
}

/// Which extended headers an opcode carries: (RETH, AETH, ImmDt, IETH). AtomicETH and
/// AtomicAckETH are [`atomic_ext`]'s.
fn extended(op: u8) -> (bool, bool, bool, bool) {
    use opcode::*;
    let reth = matches!(op, WRITE_FIRST | WRITE_ONLY | WRITE_ONLY_IMM | READ_REQUEST);
    let aeth =
        matches!(op, READ_RESPONSE_FIRST | READ_RESPONSE_LAST | READ_RESPONSE_ONLY | ACKNOWLEDGE | ATOMIC_ACKNOWLEDGE);
    let imm = matches!(op, SEND_LAST_IMM | SEND_ONLY_IMM | WRITE_LAST_IMM | WRITE_ONLY_IMM);
    let ieth = matches!(op, SEND_LAST_INV | SEND_ONLY_INV);
    (reth, aeth, imm, ieth)
}

/// Whether an opcode carries an AtomicETH (after the BTH) and an AtomicAckETH (after the
/// AETH).
fn atomic_ext(op: u8) -> (bool, bool) {
    (matches!(op, opcode::COMPARE_SWAP | opcode::FETCH_ADD), op == opcode::ATOMIC_ACKNOWLEDGE)
}

impl Headers {
    /// The most bytes the headers of one packet take (BTH, RETH, ImmDt and more never meet;
    /// BTH and AtomicETH are 40 too, and an XRCETH adds 4 or a DCETH 16).
    pub const MAX_LEN: usize = 56;

    /// Append the headers as on the wire. The extended headers written are those the opcode
    /// carries, whatever the fields hold (an absent one is written as zeros).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut b = [0u8; Self::MAX_LEN];
        let n = self.write(&mut b);
        out.extend_from_slice(&b[..n]);
    }

    /// Write the headers as on the wire into `out`, without allocating: how many bytes.
    pub fn write(&self, out: &mut [u8; Self::MAX_LEN]) -> usize {
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        let b = &self.bth;
        let dc = self.dc.filter(|_| is_request(b.opcode));
        let wire_op = if self.xrc.is_some() {
            b.opcode | opcode::XRC
        } else if dc.is_some() {
            b.opcode | DC_OPCODES
        } else {
            b.opcode
        };
        put(&[wire_op, u8::from(b.se) << 7 | u8::from(b.migreq) << 6 | (b.pad & 3) << 4 | (b.tver & 0xf)]);
        put(&b.pkey.to_be_bytes());
        put(&[u8::from(b.fecn) << 7 | u8::from(b.becn) << 6]);
        put(&(b.dest_qp & 0xff_ffff).to_be_bytes()[1..]);
        put(&[u8::from(b.ack_req) << 7]);
        put(&(b.psn & 0xff_ffff).to_be_bytes()[1..]);
        let (reth, aeth, imm, ieth, deth) = extended_any(b.opcode);
        let (atomic, atomic_ack) = atomic_ext(b.opcode);
        if let Some(srqn) = self.xrc.filter(|_| is_request(b.opcode)) {
            put(&(srqn & 0xff_ffff).to_be_bytes());
        } else if let Some(d) = dc {
            put(&d.key.to_be_bytes());
            put(&(d.src_qp & 0xff_ffff | u32::from(d.first) << 31).to_be_bytes());
            put(&d.conn.to_be_bytes());
        }
        if deth {
            let d = self.deth.unwrap_or_default();
            put(&d.qkey.to_be_bytes());
            put(&(d.src_qp & 0xff_ffff).to_be_bytes());
        }
        if reth {
            let r = self.reth.unwrap_or_default();
            put(&r.va.to_be_bytes());
            put(&r.rkey.to_be_bytes());
            put(&r.dma_len.to_be_bytes());
        }
        if atomic {
            let a = self.atomic.unwrap_or_default();
            put(&a.va.to_be_bytes());
            put(&a.rkey.to_be_bytes());
            put(&a.swap_add.to_be_bytes());
            put(&a.compare.to_be_bytes());
        }
        if aeth {
            let a = self.aeth.unwrap_or_default();
            put(&[a.syndrome]);
            put(&(a.msn & 0xff_ffff).to_be_bytes()[1..]);
        }
        if atomic_ack {
            put(&self.atomic_ack.unwrap_or(0).to_be_bytes());
        }
        if imm {
            put(&self.imm.unwrap_or(0).to_be_bytes());
        }
        if ieth {
            put(&self.ieth.unwrap_or(0).to_be_bytes());
        }
        at
    }

    /// The headers at the start of `b` and their length; `None` if `b` is too short.
    pub fn decode(b: &[u8]) -> Option<(Headers, usize)> {
        let be24 = |s: &[u8]| u32::from_be_bytes([0, s[0], s[1], s[2]]);
        let be32 = |s: &[u8]| u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
        let bth = b.get(..12)?;
        // An XRC opcode reads as its RC twin, with the XRCETH of a request.
        let xrc = (opcode::XRC..=opcode::XRC | opcode::SEND_ONLY_INV).contains(&bth[0]);
        // A DC opcode reads as its RC twin, with the DCETH (requests only).
        let dc =
            (DC_OPCODES..=DC_OPCODES | opcode::SEND_ONLY_INV).contains(&bth[0]) && is_request(bth[0] & !DC_OPCODES);
        let bth = Bth {
            opcode: if xrc {
                bth[0] & !opcode::XRC
            } else if dc {
                bth[0] & !DC_OPCODES
            } else {
                bth[0]
            },
            se: bth[1] & 0x80 != 0,
            migreq: bth[1] & 0x40 != 0,
            pad: (bth[1] >> 4) & 3,
            tver: bth[1] & 0xf,
            pkey: u16::from_be_bytes([bth[2], bth[3]]),
            fecn: bth[4] & 0x80 != 0,
            becn: bth[4] & 0x40 != 0,
            dest_qp: be24(&bth[5..8]),
            ack_req: bth[8] & 0x80 != 0,
            psn: be24(&bth[9..12]),
        };
        let mut h = Headers { bth, ..Headers::default() };
        let mut at = 12;
        if xrc {
            h.xrc = Some(0);
            if is_request(bth.opcode) {
                h.xrc = Some(be24(&b.get(at + 1..at + 4)?[..3]));
                at += 4;
            }
        } else if dc {
            let d = b.get(at..at + Dceth::LEN)?;
            h.dc = Some(Dceth {
                key: u64::from_be_bytes(d[..8].try_into().ok()?),
                src_qp: be24(&d[9..12]),
                conn: be32(&d[12..16]),
                first: d[8] & 0x80 != 0,
            });
            at += Dceth::LEN;
        }
        let (reth, aeth, imm, ieth, deth) = extended_any(bth.opcode);
        let (atomic, atomic_ack) = atomic_ext(bth.opcode);
        let be64 = |s: &[u8]| s.try_into().ok().map(u64::from_be_bytes);
        if deth {
            let d = b.get(at..at + 8)?;
            h.deth = Some(Deth { qkey: be32(&d[..4]), src_qp: be24(&d[5..8]) });
            at += 8;
        }
        if reth {
            let r = b.get(at..at + 16)?;
            let va = u64::from_be_bytes(r[..8].try_into().ok()?);
            h.reth = Some(Reth { va, rkey: be32(&r[8..12]), dma_len: be32(&r[12..16]) });
            at += 16;
        }
        if atomic {
            let a = b.get(at..at + 28)?;
            h.atomic = Some(AtomicEth {
                va: be64(&a[..8])?,
                rkey: be32(&a[8..12]),
                swap_add: be64(&a[12..20])?,
                compare: be64(&a[20..28])?,
            });
            at += 28;
        }
        if aeth {
            let a = b.get(at..at + 4)?;
            h.aeth = Some(Aeth { syndrome: a[0], msn: be24(&a[1..4]) });
            at += 4;
        }
        if atomic_ack {
            h.atomic_ack = Some(be64(b.get(at..at + 8)?)?);
            at += 8;
        }
        if imm {
            h.imm = Some(be32(b.get(at..at + 4)?));
            at += 4;
        }
        if ieth {
            h.ieth = Some(be32(b.get(at..at + 4)?));
            at += 4;
        }
        Some((h, at))
    }
}

/// A packet: its headers and its payload (`&[u8]` or `Vec<u8>` as bytes go on the wire; the
/// engine's in-process form names the sender's memory to read as it goes out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<P> {
    /// The transport headers.
    pub headers: Headers,
    /// The payload.
    pub payload: P,
}

impl Packet<&[u8]> {
    /// The packet as on the wire (headers, payload and pad to a multiple of 4; no ICRC).
    pub fn encode(&self) -> Vec<u8> {
        let mut h = self.headers;
        h.bth.pad = ((4 - self.payload.len() % 4) % 4) as u8;
        let mut out = Vec::with_capacity(40 + self.payload.len());
        h.encode(&mut out);
        out.extend_from_slice(self.payload);
        out.resize(out.len() + usize::from(h.bth.pad), 0);
        out
    }
}

impl Packet<Vec<u8>> {
    /// A packet from its wire bytes (as [`Packet::encode`] makes them).
    pub fn decode(b: &[u8]) -> Option<Self> {
        let (headers, at) = Headers::decode(b)?;
        let end = b.len().checked_sub(usize::from(headers.bth.pad))?;
        Some(Packet { headers, payload: b.get(at..end)?.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_in_the_ibta_layout() {
        let bth = Bth {
            opcode: opcode::WRITE_ONLY_IMM,
            se: true,
            pkey: 0xffff,
            dest_qp: 0x12_3456,
            ack_req: true,
            psn: 0xab_cdef,
            ..Bth::default()
        };
        let h = Headers {
            bth,
            reth: Some(Reth { va: 0x1122_3344_5566_7788, rkey: 0xdead_beef, dma_len: 5 }),
            imm: Some(0x0102_0304),
            ..Headers::default()
        };
        let p = Packet { headers: h, payload: &b"hello"[..] };
        let wire = p.encode();
        assert_eq!(&wire[..12], &[0x0b, 0xb0, 0xff, 0xff, 0, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef], "BTH, pad 3");
        assert_eq!(&wire[12..20], &0x1122_3344_5566_7788u64.to_be_bytes(), "RETH VA");
        assert_eq!(&wire[20..28], &[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 5], "R_Key, DMA length");
        assert_eq!(&wire[28..32], &[1, 2, 3, 4], "ImmDt");
        assert_eq!(wire.len(), 32 + 8);
        let back = Packet::decode(&wire).map(|p| (p.headers.reth, p.headers.imm, p.payload));
        assert_eq!(back, Some((h.reth, h.imm, b"hello".to_vec())));
    }

    #[test]
    fn dc_requests_carry_the_simulators_dceth_after_the_bth() {
        let h = Headers {
            bth: Bth { opcode: opcode::COMPARE_SWAP, dest_qp: 0x77, ..Bth::default() },
            atomic: Some(AtomicEth::default()),
            dc: Some(Dceth { key: 0x0102_0304_0506_0708, src_qp: 0x12_3456, conn: 0x0a0b_0c0d, first: true }),
            ..Headers::default()
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        assert_eq!((b[0], b.len()), (0xd3, Headers::MAX_LEN), "DC CmpSwap: BTH, DCETH, AtomicETH");
        assert_eq!(&b[12..20], &[1, 2, 3, 4, 5, 6, 7, 8], "access key");
        assert_eq!(&b[20..28], &[0x80, 0x12, 0x34, 0x56, 0x0a, 0x0b, 0x0c, 0x0d], "first, DCI number, connection");
        assert_eq!(Headers::decode(&b), Some((h, Headers::MAX_LEN)));
        // An answer to a DC request is a plain RC one.
        let ack =
            Headers { bth: Bth { opcode: opcode::ACKNOWLEDGE, ..Bth::default() }, dc: h.dc, ..Headers::default() };
        let mut b = Vec::new();
        ack.encode(&mut b);
        assert_eq!((b[0], b.len()), (opcode::ACKNOWLEDGE, 16));
    }

    #[test]
    fn atomic_headers_are_28_and_8_bytes_big_endian() {
        let a = AtomicEth { va: 0x1000, rkey: 0xabcd, swap_add: 0x0102_0304_0506_0708, compare: 9 };
        let h = Headers {
            bth: Bth { opcode: opcode::COMPARE_SWAP, ..Bth::default() },
            atomic: Some(a),
            ..Headers::default()
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        assert_eq!(b.len(), 12 + 28);
        assert_eq!(&b[12..20], &0x1000u64.to_be_bytes(), "VA");
        assert_eq!(&b[24..32], &[1, 2, 3, 4, 5, 6, 7, 8], "swap/add data");
        assert_eq!(Headers::decode(&b), Some((h, 40)));
        let ack = Headers {
            bth: Bth { opcode: opcode::ATOMIC_ACKNOWLEDGE, ..Bth::default() },
            aeth: Some(Aeth::ack(3)),
            atomic_ack: Some(0x1122_3344_5566_7788),
            ..Headers::default()
        };
        b.clear();
        ack.encode(&mut b);
        assert_eq!(b.len(), 12 + 4 + 8);
        assert_eq!(&b[16..], &0x1122_3344_5566_7788u64.to_be_bytes(), "original data");
        assert_eq!(Headers::decode(&b), Some((ack, 24)));
        assert_eq!(Headers::decode(&b[..20]), None, "a short AtomicAckETH");
    }

    #[test]
    fn xrc_requests_carry_an_xrceth_after_the_bth_and_answers_none() {
        let h = Headers {
            bth: Bth { opcode: opcode::WRITE_ONLY, psn: 7, ..Bth::default() },
            reth: Some(Reth { va: 0x1000, rkey: 0x42, dma_len: 8 }),
            xrc: Some(0x12_3456),
            ..Headers::default()
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        assert_eq!(b[0], 0xaa, "XRC RDMA WRITE Only");
        assert_eq!(&b[12..16], &[0, 0x12, 0x34, 0x56], "XRCETH");
        assert_eq!(&b[16..24], &0x1000u64.to_be_bytes(), "the RETH after it");
        assert_eq!(Headers::decode(&b), Some((h, 12 + 4 + 16)));
        let ack = Headers {
            bth: Bth { opcode: opcode::ACKNOWLEDGE, ..Bth::default() },
            aeth: Some(Aeth::ack(1)),
            xrc: Some(0),
            ..Headers::default()
        };
        b.clear();
        ack.encode(&mut b);
        assert_eq!((b[0], b.len()), (0xb1, 16), "XRC Acknowledge: BTH and AETH only");
        assert_eq!(Headers::decode(&b), Some((ack, 16)));
        let cas =
            Headers { bth: Bth { opcode: opcode::COMPARE_SWAP, ..Bth::default() }, xrc: Some(5), ..Headers::default() };
        b.clear();
        cas.encode(&mut b);
        assert_eq!(b.len(), 44, "BTH, XRCETH and AtomicETH");
    }

    #[test]
    fn aeth_says_ack_rnr_or_nak() {
        assert_eq!(Aeth::ack(7).kind(), Ack::Ack(0x1f));
        assert_eq!(Aeth::rnr(0x12, 0).kind(), Ack::Rnr(0x12));
        assert_eq!(Aeth::nak(nak::REMOTE_ACCESS, 0).kind(), Ack::Nak(nak::REMOTE_ACCESS));
        let h = Headers {
            bth: Bth { opcode: opcode::ACKNOWLEDGE, ..Bth::default() },
            aeth: Some(Aeth::nak(3, 0x10203)),
            ..Headers::default()
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        assert_eq!(b.len(), 16);
        assert_eq!(Headers::decode(&b), Some((h, 16)));
        let inv = Headers {
            bth: Bth { opcode: opcode::SEND_ONLY_INV, ..Bth::default() },
            ieth: Some(0x4242),
            ..Headers::default()
        };
        b.clear();
        inv.encode(&mut b);
        assert_eq!(Headers::decode(&b), Some((inv, 16)));
    }
}
