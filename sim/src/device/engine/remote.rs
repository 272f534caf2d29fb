//! The reliable transport across the network, for a path whose address is another process's
//! port: the requester sends a message as its path-MTU packets and waits for its answer while
//! its QP's other work goes on; the receiving device reassembles a message from its packets,
//! hands it to the same responder as in-process requests get, and sends the answer back.
//!
//! A requester has one message in flight per QP (the head WQE): it is resent whole when no
//! answer comes within the QP's ACK timeout (4.096 µs × 2^timeout), up to `retry_cnt` times
//! (then `RETRY_EXC_ERR`); after an RNR NAK it is resent once the responder's RNR timer has
//! passed, up to `rnr_retry` times (7: without end; then `RNR_RETRY_EXC_ERR`). A packet that
//! fails its ICRC, is out of sequence within a message, or names no waiting QP is dropped
//! and counted.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use super::pipeline::SigHit;
use super::responder::{Payload, Pulled, Request, Response, message_op};
use super::{Engine, syndrome};
use crate::device::firmware::PSN_MASK;
use crate::fabric::{Link, QpPath};
use crate::packet::{Ack, Aeth, Headers, Packet, opcode};
use crate::wire::{self, Endpoints, Message, MessageOp, packet_count, segments};

/// The network side of a device: messages in flight and arriving, and what was dropped.
#[derive(Debug, Clone, Default)]
pub(in crate::device) struct NetState {
    /// The message each requester QP waits on, by QP number.
    inflight: BTreeMap<u32, Inflight>,
    /// Messages arriving packet by packet, by responder QP number.
    partial: BTreeMap<u32, Partial>,
    /// Datagrams dropped: bad ICRC or headers, out of sequence, for no waiting QP.
    pub(in crate::device) dropped: u64,
}

/// A requester's message on the wire.
#[derive(Debug, Clone)]
struct Inflight {
    /// Its first PSN and how many it takes.
    psn: u32,
    span: u32,
    /// When it is sent again (transport clock, ns); `u64::MAX`: never.
    deadline: u64,
    /// Timeouts so far, and RNR NAKs so far.
    retries: u8,
    rnr: u8,
    /// The deadline is an RNR NAK's timer: it ends with a resend that counts no retry.
    rnr_wait: bool,
    /// The requester's own signature error met gathering its payload.
    hit: Option<SigHit>,
    /// READ response data received so far, and the PSN of the next response packet.
    read: Vec<u8>,
    read_next: u32,
    /// The answer, once whole.
    answer: Option<Packet<Vec<u8>>>,
}

/// A message arriving at a responder QP.
#[derive(Debug, Clone)]
struct Partial {
    first: Headers,
    next_psn: u32,
    packets: u32,
    data: Vec<u8>,
}

/// What became of a requester's message to a remote peer.
pub(super) enum Exchange {
    /// The answer came.
    Answer(Response),
    /// Still on its way: the QP waits.
    Waiting,
    /// It ends here with this syndrome (retries exhausted, the payload unreadable).
    Failed(u8),
}

/// The ACK timeout of `timeout` (4.096 µs × 2^timeout; 0: none), in ns.
fn ack_timeout_ns(timeout: u8) -> u64 {
    if timeout == 0 { u64::MAX } else { 4096u64 << timeout.min(31) }
}

/// The RNR NAK timer of a code (IBTA table 45), in ns.
fn rnr_delay_ns(code: u8) -> u64 {
    const US: [u64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840, 5120, 7680, 10_240,
        15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
    ];
    US[usize::from(code & 31)] * 1000
}

/// The opcode that ends a message whose last packet is `op`, as its ONLY form; `None` for a
/// packet that does not end a request message.
fn only_of(op: u8) -> Option<u8> {
    use opcode::*;
    Some(match op {
        SEND_LAST | SEND_ONLY => SEND_ONLY,
        SEND_LAST_IMM | SEND_ONLY_IMM => SEND_ONLY_IMM,
        SEND_LAST_INV | SEND_ONLY_INV => SEND_ONLY_INV,
        WRITE_LAST | WRITE_ONLY => WRITE_ONLY,
        WRITE_LAST_IMM | WRITE_ONLY_IMM => WRITE_ONLY_IMM,
        READ_REQUEST => READ_REQUEST,
        _ => return None,
    })
}

/// Whether two packets' opcodes belong to the same kind of message (SEND or WRITE).
fn same_kind(a: u8, b: u8) -> bool {
    let send = |o: u8| o <= opcode::SEND_ONLY_IMM || matches!(o, opcode::SEND_LAST_INV | opcode::SEND_ONLY_INV);
    send(a) == send(b)
}

impl Engine<'_> {
    /// The address of the peer `qp`'s path names, when it is another process's port.
    pub(super) fn remote_peer(&self, qp: QpPath) -> Option<Ipv4Addr> {
        let remote = self.qp(qp)?.remote?;
        self.fabric.remote(qp.dev, &remote.ah)
    }

    /// Send packets from device `dev`'s port, from the UDP source port a connection between
    /// QPs `src_qp` and `dst_qp` takes, to `peer`; each is also written to the capture.
    fn send_packets(&self, dev: usize, (src_qp, dst_qp): (u32, u32), peer: Ipv4Addr, packets: &[(Headers, &[u8])]) {
        let Some(port) = self.fabric.net_port(dev) else { return };
        let sport = port.source_port(Endpoints::entropy_port(src_qp, dst_qp));
        let ep = Endpoints::new(IpAddr::V4(port.addr()), IpAddr::V4(peer), sport);
        let link = self.fabric.capture().map(|_| Link::ipv4(port.addr(), peer, sport));
        for (h, payload) in packets {
            if let Ok(d) = wire::encode(h, payload, &ep) {
                port.send(sport, peer, &d);
            }
            if let (Some(cap), Some(link)) = (self.fabric.capture(), &link) {
                cap.packet(link, h, payload);
            }
        }
        if let Some(cap) = self.fabric.capture() {
            cap.flush();
        }
    }

    /// The requester's side of the head message of `qp` to `peer`: its answer once it came;
    /// otherwise (re)sent as its timers say, and the QP waits.
    pub(super) fn exchange(&mut self, qp: QpPath, peer: Ipv4Addr, req: &Request<'_>) -> Exchange {
        let now = self.fabric.now_ns();
        let Some(t) = self.qp(qp).map(|q| q.transport) else { return Exchange::Failed(syndrome::LOCAL_QP_OP) };
        let psn = req.packet.headers.bth.psn;
        let Some(d) = self.dev(qp.dev) else { return Exchange::Failed(syndrome::LOCAL_QP_OP) };
        let mut resend = None;
        if let Some(f) = d.net.inflight.get_mut(&qp.qpn).filter(|f| f.psn == psn) {
            if let Some(answer) = f.answer.take() {
                if let Some(Ack::Rnr(code)) = answer.headers.aeth.map(|a| a.kind()) {
                    if t.rnr_retry != 7 && f.rnr >= t.rnr_retry {
                        d.net.inflight.remove(&qp.qpn);
                        return Exchange::Failed(0x16);
                    }
                    f.rnr = f.rnr.saturating_add(1);
                    f.rnr_wait = true;
                    f.deadline = now.saturating_add(rnr_delay_ns(code));
                    return Exchange::Waiting;
                }
                let hit = f.hit;
                d.net.inflight.remove(&qp.qpn);
                let pulled = match answer.headers.aeth.map(|a| a.kind()) {
                    Some(Ack::Ack(_)) => Pulled::Yes(hit),
                    _ => Pulled::No,
                };
                return Exchange::Answer(Response { packet: Some(answer), pulled });
            }
            if now < f.deadline {
                return Exchange::Waiting;
            }
            // An RNR wait ends without a retry counted; a timeout counts one.
            if !std::mem::take(&mut f.rnr_wait) {
                if f.retries >= t.retry_cnt {
                    d.net.inflight.remove(&qp.qpn);
                    return Exchange::Failed(syndrome::TRANSPORT_RETRY);
                }
                f.retries += 1;
            }
            resend = Some((f.retries, f.rnr));
        }
        // Gathered for each transmission: the WQE stays where it is until answered.
        let (data, hit) = match req.packet.payload {
            Payload::None => (Vec::new(), None),
            Payload::Dma(ep) => match self.gather(ep) {
                Ok(g) => g,
                Err(_) => return Exchange::Failed(syndrome::LOCAL_PROT),
            },
            Payload::Plain(_) | Payload::Bytes(_) => match self.wire_payload(req) {
                Some(b) => (b, None),
                None => return Exchange::Failed(syndrome::LOCAL_PROT),
            },
        };
        let mut data = data;
        if let Some((off, xor)) = req.corrupt
            && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
        {
            *b ^= xor;
        }
        let h = &req.packet.headers;
        let mtu = usize::try_from(self.mtu_bytes(qp)).unwrap_or(4096);
        let dst_qp = h.bth.dest_qp;
        match message_op(h) {
            Some(op) => {
                let m = Message { op, dest_qp: dst_qp, pkey: h.bth.pkey, psn, len: data.len(), mtu };
                let segs: Vec<_> = segments(&m).collect();
                let packets: Vec<(Headers, &[u8])> =
                    segs.iter().map(|s| (s.headers, data.get(s.range.clone()).unwrap_or(&[]))).collect();
                self.send_packets(qp.dev, (qp.qpn, dst_qp), peer, &packets);
            }
            None => self.send_packets(qp.dev, (qp.qpn, dst_qp), peer, &[(*h, &[])]),
        }
        let (retries, rnr) = resend.unwrap_or((0, 0));
        let f = Inflight {
            psn,
            span: req.span.max(1),
            deadline: now.saturating_add(ack_timeout_ns(t.timeout)),
            retries,
            rnr,
            rnr_wait: false,
            hit,
            read: Vec::new(),
            read_next: psn,
            answer: None,
        };
        self.give_scratch(qp.dev, data);
        if let Some(d) = self.dev(qp.dev) {
            d.net.inflight.insert(qp.qpn, f);
        }
        Exchange::Waiting
    }

    /// A datagram arrived at device `dev`'s port from `from`: checked, then taken by the
    /// responder (a request) or the requester waiting on it (an answer). False if dropped.
    pub(in crate::device) fn rx_datagram(&mut self, dev: usize, from: SocketAddrV4, bytes: &[u8]) -> bool {
        let Some(port) = self.fabric.net_port(dev) else { return false };
        let ep = Endpoints::new(IpAddr::V4(*from.ip()), IpAddr::V4(port.addr()), from.port());
        let link = self.fabric.capture().map(|_| Link::ipv4(*from.ip(), port.addr(), from.port()));
        let taken = match wire::decode(bytes, &ep) {
            Ok(d) => {
                if let (Some(cap), Some(link)) = (self.fabric.capture(), &link) {
                    cap.packet(link, &d.headers, &d.payload);
                }
                match d.headers.bth.opcode {
                    opcode::ACKNOWLEDGE..=opcode::ACKNOWLEDGE => self.rx_answer(dev, &d.headers, d.payload),
                    opcode::READ_RESPONSE_FIRST..=opcode::READ_RESPONSE_ONLY => {
                        self.rx_answer(dev, &d.headers, d.payload)
                    }
                    _ => self.rx_request(dev, *from.ip(), &d.headers, d.payload),
                }
            }
            Err(_) => false,
        };
        if !taken && let Some(d) = self.dev(dev) {
            d.net.dropped = d.net.dropped.saturating_add(1);
        }
        taken
    }

    /// An ACK, NAK or READ response for a requester QP: kept as its message's answer when it
    /// answers the message in flight.
    fn rx_answer(&mut self, dev: usize, h: &Headers, payload: Vec<u8>) -> bool {
        let Some(d) = self.dev(dev) else { return false };
        let Some(f) = d.net.inflight.get_mut(&h.bth.dest_qp) else { return false };
        let off = h.bth.psn.wrapping_sub(f.psn) & PSN_MASK;
        if f.answer.is_some() || off >= f.span {
            return false;
        }
        let op = h.bth.opcode;
        if op == opcode::ACKNOWLEDGE {
            let ack = matches!(h.aeth.map(|a| a.kind()), Some(Ack::Ack(_)));
            // An ACK acknowledges the whole message only at its last PSN.
            if ack && off + 1 != f.span {
                return true;
            }
            f.answer = Some(Packet { headers: *h, payload: Vec::new() });
            return true;
        }
        if h.bth.psn != f.read_next {
            return false;
        }
        f.read.extend_from_slice(&payload);
        f.read_next = (f.read_next + 1) & PSN_MASK;
        if matches!(op, opcode::READ_RESPONSE_LAST | opcode::READ_RESPONSE_ONLY) {
            let mut headers = *h;
            headers.bth.opcode = opcode::READ_RESPONSE_ONLY;
            headers.aeth = Some(h.aeth.unwrap_or(Aeth::ack(0)));
            f.answer = Some(Packet { headers, payload: std::mem::take(&mut f.read) });
        }
        true
    }

    /// A request packet for a responder QP: reassembled into its message, which the
    /// responder takes whole once its last packet is in; the answer goes back to `peer`.
    fn rx_request(&mut self, dev: usize, peer: Ipv4Addr, h: &Headers, payload: Vec<u8>) -> bool {
        let qpn = h.bth.dest_qp;
        let op = h.bth.opcode;
        let Some(d) = self.dev(dev) else { return false };
        let starts = matches!(op, opcode::SEND_FIRST | opcode::WRITE_FIRST) || only_of(op) == Some(op);
        if starts {
            d.net.partial.insert(qpn, Partial { first: *h, next_psn: h.bth.psn, packets: 0, data: Vec::new() });
        }
        let Some(p) = d.net.partial.get_mut(&qpn) else { return false };
        if p.next_psn != h.bth.psn || !same_kind(p.first.bth.opcode, op) {
            d.net.partial.remove(&qpn);
            return false;
        }
        p.data.extend_from_slice(&payload);
        p.packets += 1;
        p.next_psn = (p.next_psn + 1) & PSN_MASK;
        let Some(only) = only_of(op) else { return true };
        let Some(p) = d.net.partial.remove(&qpn) else { return false };
        let mut headers = *h;
        headers.bth.opcode = only;
        headers.bth.psn = p.first.bth.psn;
        headers.reth = p.first.reth;
        let mtu = usize::try_from(self.mtu_bytes(QpPath { dev, qpn })).unwrap_or(4096);
        let span = match (only, headers.reth) {
            (opcode::READ_REQUEST, Some(r)) => packet_count(r.dma_len as usize, mtu) as u32,
            _ => p.packets,
        };
        let req = Request {
            packet: Packet { headers, payload: Payload::Bytes(&p.data) },
            from: QpPath { dev: usize::MAX, qpn: 0 },
            span,
            corrupt: None,
        };
        let resp = self.receive(dev, &req);
        // In process a failed responder waits for the requester's completion; here it has
        // none to wait for.
        self.settle_responders();
        self.answer(dev, peer, &headers, span, resp);
        true
    }

    /// Send the responder's answer to a request back to its requester.
    fn answer(&mut self, dev: usize, peer: Ipv4Addr, req: &Headers, span: u32, resp: Response) {
        let Some(p) = resp.packet else { return };
        let at = QpPath { dev, qpn: req.bth.dest_qp };
        let Some(dest_qp) = self.qp(at).and_then(|q| q.remote).map(|r| r.dest_qp_num) else { return };
        let mtu = usize::try_from(self.mtu_bytes(at)).unwrap_or(4096);
        if p.headers.bth.opcode == opcode::ACKNOWLEDGE {
            // An ACK names the request's last PSN; a NAK its first.
            let ack = matches!(p.headers.aeth.map(|a| a.kind()), Some(Ack::Ack(_)));
            let psn = if ack { req.bth.psn.wrapping_add(span.max(1) - 1) & PSN_MASK } else { req.bth.psn };
            let mut a = p.headers;
            (a.bth.dest_qp, a.bth.psn, a.bth.pkey) = (dest_qp, psn, req.bth.pkey);
            self.send_packets(dev, (at.qpn, dest_qp), peer, &[(a, &[])]);
        } else {
            let msn = p.headers.aeth.map_or(0, |a| a.msn);
            let m = Message {
                op: MessageOp::ReadResponse { msn },
                dest_qp,
                pkey: req.bth.pkey,
                psn: req.bth.psn,
                len: p.payload.len(),
                mtu,
            };
            let segs: Vec<_> = segments(&m).collect();
            let packets: Vec<(Headers, &[u8])> =
                segs.iter().map(|s| (s.headers, p.payload.get(s.range.clone()).unwrap_or(&[]))).collect();
            self.send_packets(dev, (at.qpn, dest_qp), peer, &packets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_follow_the_ibta() {
        assert_eq!(ack_timeout_ns(14), 4096 << 14);
        assert_eq!(ack_timeout_ns(0), u64::MAX);
        assert_eq!(rnr_delay_ns(12), 640_000);
        assert_eq!(rnr_delay_ns(0), 655_360_000);
        assert_eq!(rnr_delay_ns(31), 491_520_000);
    }

    #[test]
    fn a_message_ends_at_its_last_or_only_packet() {
        assert_eq!(only_of(opcode::SEND_LAST_IMM), Some(opcode::SEND_ONLY_IMM));
        assert_eq!(only_of(opcode::WRITE_LAST), Some(opcode::WRITE_ONLY));
        assert_eq!(only_of(opcode::WRITE_MIDDLE), None);
        assert!(same_kind(opcode::SEND_FIRST, opcode::SEND_LAST_INV));
        assert!(!same_kind(opcode::SEND_FIRST, opcode::WRITE_MIDDLE));
    }
}
