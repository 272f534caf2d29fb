//! The reliable transport across the network, for a path whose address is another process's
//! port: the requester sends a message as its path-MTU packets and waits for its answer while
//! its QP's other work goes on; the receiving device reassembles a message from its packets,
//! hands it to the same responder as in-process requests get, and sends the answer back.
//!
//! The requester keeps a window of messages on the wire per QP ([`requester`]). A packet
//! that fails its ICRC, is out of sequence within a message, or answers nothing on the wire
//! is dropped and counted.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use mlx5_dv::QpState;

use super::Engine;
use super::responder::{Payload, Pulled, Request, Response};
use crate::device::firmware::PSN_MASK;
use crate::fabric::{Link, QpPath};
use crate::packet::{Ack, Dceth, Headers, Packet, nak, opcode};
use crate::wire::{self, Endpoints, Message, MessageOp, packet_count, segments};

mod requester;

pub(super) use requester::Exchange;

/// The network side of a device: messages in flight and arriving, and what was dropped.
#[derive(Debug, Clone, Default)]
pub(in crate::device) struct NetState {
    /// Each requester QP's messages on the wire, by QP number.
    flights: BTreeMap<u32, requester::Flight>,
    /// Messages arriving packet by packet, by responder QP number.
    partial: BTreeMap<u32, Partial>,
    /// Datagrams dropped: bad ICRC or headers, out of sequence, for no waiting QP.
    pub(in crate::device) dropped: u64,
    /// What the requesters met.
    pub(in crate::device) counters: TransportCounters,
    /// ACKs held back, by responder QP: the newest acknowledges everything before it
    /// (coalescing), and they leave at the end of the device pass that made them
    /// ([`Engine::flush_acks`]).
    acks: BTreeMap<u32, HeldAck>,
    /// A deliberately broken responder (tests of the model only): a SEND or WRITE behind the
    /// expected PSN is executed again instead of acknowledged.
    pub(in crate::device) replay_duplicates: bool,
    /// The number the device gave its DCIs' latest connection ([`Dceth::conn`]).
    dc_conns: u32,
}

pub use mlx5_dv::TransportCounters;

/// An ACK a responder QP holds back: to whom, and its headers.
#[derive(Debug, Clone)]
struct HeldAck {
    peer: Ipv4Addr,
    dest_qp: u32,
    headers: Headers,
}

impl NetState {
    /// Keep only what belongs to the QPs `keep` names.
    pub(in crate::device) fn retain_qps(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.flights.retain(|q, _| keep(*q));
        self.partial.retain(|q, _| keep(*q));
        self.acks.retain(|q, _| keep(*q));
    }

    /// Whether a responder holds an ACK back.
    pub(in crate::device) fn holds_acks(&self) -> bool {
        !self.acks.is_empty()
    }

    /// When the next of the device's transport timers (ACK timeout, RNR wait) runs out.
    pub(in crate::device) fn next_timer(&self) -> Option<u64> {
        self.flights.values().filter_map(requester::Flight::timer).min()
    }
}

/// A message arriving at a responder QP.
#[derive(Debug, Clone)]
struct Partial {
    first: Headers,
    next_psn: u32,
    packets: u32,
    data: Vec<u8>,
}

/// The DCI a DC request from the port at `peer` names.
fn dci(peer: Ipv4Addr, dc: &Dceth) -> crate::device::firmware::DciId {
    crate::device::firmware::DciId::Peer { addr: peer, qpn: dc.src_qp }
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
        COMPARE_SWAP => COMPARE_SWAP,
        FETCH_ADD => FETCH_ADD,
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
        let q = self.qp(qp)?;
        // A DCI's path is its current WQE's: a network path only while one executes.
        if q.st == mlx5_dv::prm::queues::st::DCI && self.dc_key.is_none() {
            return None;
        }
        self.fabric.remote(qp.dev, &q.remote?.ah)
    }

    /// Send packets from device `dev`'s port, from the UDP source port a connection between
    /// QPs `src_qp` and `dst_qp` takes, to `peer`; each is also written to the capture.
    pub(super) fn send_packets(
        &self,
        dev: usize,
        (src_qp, dst_qp): (u32, u32),
        peer: Ipv4Addr,
        packets: &[(Headers, &[u8])],
    ) {
        let Some(port) = self.fabric.net_port(dev) else { return };
        let set = self.devs.get(dev).and_then(|d| d.fw.qp_udp_sport(src_qp));
        let sport = port.source_port(set.unwrap_or_else(|| Endpoints::entropy_port(src_qp, dst_qp)));
        let ep = Endpoints::new(IpAddr::V4(port.addr()), IpAddr::V4(peer), sport);
        let link = self.fabric.capture().map(|_| Link::ipv4(port.addr(), peer, sport));
        // An XRC QP's answers go out on the XRC transport too (with no XRCETH).
        let xrc = self.qp(QpPath { dev, qpn: src_qp }).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::XRC);
        for (h, payload) in packets {
            let h = &Headers { xrc: if xrc { h.xrc.or(Some(0)) } else { h.xrc }, ..*h };
            if let Ok(d) = wire::encode(h, payload, &ep) {
                port.send(sport, peer, &d, self.fabric.now_ns());
            }
            if let (Some(cap), Some(link)) = (self.fabric.capture(), &link) {
                cap.packet(link, h, payload);
            }
        }
        if let Some(cap) = self.fabric.capture() {
            cap.flush();
        }
    }

    /// Send message `m`, whose bytes `data` holds, as its path-MTU packets (on the XRC
    /// transport with `xrc`'s XRCETH, [`Headers::xrc`]; a DC request with `dc`'s DCETH).
    pub(super) fn send_message(
        &self,
        dev: usize,
        qps: (u32, u32),
        peer: Ipv4Addr,
        (m, xrc, dc): (&Message, Option<u32>, Option<Dceth>),
        data: &[u8],
    ) {
        let segs: Vec<_> = segments(m).collect();
        let packets: Vec<(Headers, &[u8])> =
            segs.iter().map(|s| (Headers { xrc, dc, ..s.headers }, data.get(s.range.clone()).unwrap_or(&[]))).collect();
        self.send_packets(dev, qps, peer, &packets);
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
                    // Written now: the last packet a program waits for is in the capture
                    // even when the program exits right after it.
                    cap.flush();
                }
                match d.headers.bth.opcode {
                    // QP 1 is the connection manager's, outside the device's QPs.
                    opcode::UD_SEND_ONLY if d.headers.bth.dest_qp == crate::wire::cm::GSI_QPN => {
                        d.headers.deth.is_some_and(|h| h.qkey == crate::wire::cm::GSI_QKEY)
                            && port.push_gsi(*from.ip(), d.payload)
                    }
                    opcode::UD_SEND_ONLY | opcode::UD_SEND_ONLY_IMM => self.rx_ud(dev, from, &d.headers, &d.payload),
                    // UC requests go through RC's reassembly under their RC opcodes.
                    op @ 0x20..=0x2b => {
                        let h = Headers {
                            bth: crate::packet::Bth { opcode: op - opcode::UC, ..d.headers.bth },
                            ..d.headers
                        };
                        self.rx_uc(dev, *from.ip(), &h, d.payload)
                    }
                    opcode::ACKNOWLEDGE | opcode::ATOMIC_ACKNOWLEDGE => self.rx_answer(dev, &d.headers, d.payload),
                    opcode::READ_RESPONSE_FIRST..=opcode::READ_RESPONSE_ONLY => {
                        self.rx_answer(dev, &d.headers, d.payload)
                    }
                    _ => self.rx_request(dev, *from.ip(), &d.headers, d.payload),
                }
            }
            // Perhaps a datagram to a multicast group the device's QPs joined.
            Err(_) => self.rx_multicast(dev, from, bytes),
        };
        if !taken && let Some(d) = self.dev(dev) {
            d.net.dropped = d.net.dropped.saturating_add(1);
        }
        taken
    }

    /// A request packet for a responder QP: reassembled into its message, which the
    /// responder takes whole once its last packet is in; the answer goes back to `peer`.
    fn rx_request(&mut self, dev: usize, peer: Ipv4Addr, h: &Headers, payload: Vec<u8>) -> bool {
        let qpn = h.bth.dest_qp;
        let op = h.bth.opcode;
        // A packet for no QP, or for one that takes no requests (a responder that failed is
        // in ERR for them at once), is dropped (and counted) before anything is kept for it.
        let takes = |q: &crate::device::firmware::FwQp| {
            matches!(q.state, QpState::Rtr | QpState::Rts) && q.responder_failed.is_none()
        };
        if !self.qp(QpPath { dev, qpn }).is_some_and(takes) {
            return false;
        }
        // A DC request is for a DCT alone (which takes nothing else: `dct_admits`).
        let dct = self.qp(QpPath { dev, qpn }).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::DCT);
        if h.dc.is_some() && !dct {
            return false;
        }
        let max_msg = self.max_msg(dev);
        let uc = self.qp(QpPath { dev, qpn }).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::UC);
        // A DCT expects each DCI's connection's next PSN (none: a connection it does not keep).
        let expected = match h.dc.filter(|d| d.conn != 0) {
            Some(dc) => self.qp(QpPath { dev, qpn }).and_then(|q| q.dct_streams.expected(dci(peer, &dc), dc.conn)),
            None => Some(self.qp(QpPath { dev, qpn }).map_or(0, |q| q.transport.rq_psn)),
        };
        let Some(d) = self.dev(dev) else { return false };
        let psn = h.bth.psn;
        let starts = matches!(op, opcode::SEND_FIRST | opcode::WRITE_FIRST) || only_of(op) == Some(op);
        // A packet the message being put together already has (the network duplicated it,
        // or the requester resent it) is ignored.
        if let Some(p) = d.net.partial.get(&qpn)
            && psn.wrapping_sub(p.first.bth.psn) & PSN_MASK < p.next_psn.wrapping_sub(p.first.bth.psn) & PSN_MASK
        {
            return true;
        }
        if starts {
            d.net.partial.insert(qpn, Partial { first: *h, next_psn: psn, packets: 0, data: Vec::new() });
        }
        let Some(p) = d.net.partial.get_mut(&qpn) else {
            // UC: a packet of a message whose start was lost.
            if uc {
                return false;
            }
            // A packet of a message already executed (behind the PSN expected): the last one
            // is acknowledged again, the others ignored.
            let Some(expected) = expected else { return false };
            if expected.wrapping_sub(psn) & PSN_MASK == 0 || expected.wrapping_sub(psn) & PSN_MASK > 1 << 23 {
                return false;
            }
            if only_of(op).is_some() {
                let ack = Headers {
                    bth: crate::packet::Bth { opcode: opcode::ACKNOWLEDGE, ..h.bth },
                    aeth: Some(crate::packet::Aeth::ack(0)),
                    ..Headers::default()
                };
                let resp = Response { packet: Some(Packet { headers: ack, payload: Vec::new() }), pulled: Pulled::No };
                self.answer(dev, peer, h, 1, resp);
            }
            return true;
        };
        // Out of sequence, or past the largest message the port takes: the message is lost.
        let too_long = (p.data.len() + payload.len()) as u64 > max_msg;
        if p.next_psn != h.bth.psn || !same_kind(p.first.bth.opcode, op) || too_long {
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
        // A DCT checks the request's access key as in process.
        let key = std::mem::replace(&mut self.dc_key, h.dc.map(|d| d.key));
        let from = std::mem::replace(&mut self.dc_from, h.dc.map(|d| dci(peer, &d)));
        let resp = self.receive(dev, &req);
        self.dct_keep(QpPath { dev, qpn }, &headers);
        (self.dc_key, self.dc_from) = (key, from);
        // In process a failed responder waits for the requester's completion; here it has
        // none to wait for, unless it is that requester: a QP connected to itself settles
        // when the NAK completes its own WQE, as in process. Until then it takes no more
        // requests, as in ERR: those it already sent behind the failed one are not executed.
        let answered = resp.packet.is_some();
        let own = |e: &Self, at: &QpPath| {
            let to_self = e.qp(*at).and_then(|q| q.remote).is_some_and(|r| r.dest_qp_num == at.qpn);
            answered && to_self && e.fabric.net_port(at.dev).is_some_and(|p| p.addr() == peer)
        };
        let (mine, others): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|(at, _)| own(self, at));
        self.pending = others;
        self.settle_responders();
        for (at, ev) in mine {
            if let Some(q) = self.dev(at.dev).and_then(|d| d.fw.qp_mut(at.qpn)) {
                q.responder_failed = Some(ev);
            }
        }
        self.answer(dev, peer, &headers, span, resp);
        true
    }

    /// A UC request packet (its opcode made RC's): for a UC QP, reassembled as RC's are
    /// (a gap drops the message up to the next FIRST or ONLY packet); dropped for any other.
    fn rx_uc(&mut self, dev: usize, peer: Ipv4Addr, h: &Headers, payload: Vec<u8>) -> bool {
        if self.qp(QpPath { dev, qpn: h.bth.dest_qp }).is_none_or(|q| q.st != mlx5_dv::prm::queues::st::UC) {
            return false;
        }
        self.rx_request(dev, peer, h, payload)
    }

    /// Send the ACKs device `dev`'s responders hold back.
    pub(in crate::device) fn flush_acks(&mut self, dev: usize) {
        let Some(d) = self.dev(dev) else { return };
        for (qpn, a) in std::mem::take(&mut d.net.acks) {
            self.send_packets(dev, (qpn, a.dest_qp), a.peer, &[(a.headers, &[])]);
        }
    }

    /// Send the responder's answer to a request back to its requester.
    fn answer(&mut self, dev: usize, peer: Ipv4Addr, req: &Headers, span: u32, resp: Response) {
        let Some(p) = resp.packet else { return };
        let at = QpPath { dev, qpn: req.bth.dest_qp };
        // A DCT answers the DCI its request named; another QP its connected peer.
        let dest_qp = match req.dc {
            Some(d) => Some(d.src_qp),
            None => self.qp(at).and_then(|q| q.remote).map(|r| r.dest_qp_num),
        };
        let Some(dest_qp) = dest_qp else { return };
        let mtu = usize::try_from(self.mtu_bytes(at)).unwrap_or(4096);
        if p.headers.bth.opcode == opcode::ATOMIC_ACKNOWLEDGE {
            // An atomic's answer leaves at once, like a READ response, and acknowledges what
            // came before it: an ACK held for an older PSN is not needed (one for a newer PSN,
            // held when this is a replayed duplicate, still is).
            let mut a = p.headers;
            (a.bth.dest_qp, a.bth.psn, a.bth.pkey) = (dest_qp, req.bth.psn, req.bth.pkey);
            let older = |h: &HeldAck| req.bth.psn.wrapping_sub(h.headers.bth.psn) & PSN_MASK < 1 << 23;
            if let Some(d) = self.dev(dev)
                && d.net.acks.get(&at.qpn).is_some_and(older)
            {
                d.net.acks.remove(&at.qpn);
            }
            self.send_packets(dev, (at.qpn, dest_qp), peer, &[(a, &[])]);
        } else if p.headers.bth.opcode == opcode::ACKNOWLEDGE {
            // An ACK names the request's last PSN; a sequence error NAK the PSN the responder
            // expects (the requester goes back to it); other NAKs the request's first.
            let kind = p.headers.aeth.map(|a| a.kind());
            let psn = match kind {
                Some(Ack::Ack(_)) => req.bth.psn.wrapping_add(span.max(1) - 1) & PSN_MASK,
                Some(Ack::Nak(nak::PSN_SEQUENCE)) => self.qp(at).map_or(req.bth.psn, |q| q.transport.rq_psn),
                _ => req.bth.psn,
            };
            let mut a = p.headers;
            (a.bth.dest_qp, a.bth.psn, a.bth.pkey) = (dest_qp, psn, req.bth.pkey);
            // A positive ACK by the wall clock is held back to the end of the device's pass:
            // one ACK per QP then answers every message the pass took. A NAK leaves now, and
            // acknowledges what came before it.
            // A DCT holds none back: its next request may come from another DCI.
            let hold = matches!(kind, Some(Ack::Ack(_))) && !self.fabric.is_simulated_time() && req.dc.is_none();
            let Some(d) = self.dev(dev) else { return };
            if hold {
                // The newest PSN answers for the older ones (a repeated old request's ACK does
                // not take its place).
                let newer = |h: &HeldAck| psn.wrapping_sub(h.headers.bth.psn) & PSN_MASK < 1 << 23;
                if d.net.acks.get(&at.qpn).is_none_or(newer) {
                    d.net.acks.insert(at.qpn, HeldAck { peer, dest_qp, headers: a });
                }
                return;
            }
            d.net.acks.remove(&at.qpn);
            self.send_packets(dev, (at.qpn, dest_qp), peer, &[(a, &[])]);
        } else {
            // A READ response acknowledges what came before it too.
            if let Some(d) = self.dev(dev) {
                d.net.acks.remove(&at.qpn);
            }
            let msn = p.headers.aeth.map_or(0, |a| a.msn);
            let m = Message {
                op: MessageOp::ReadResponse { msn },
                dest_qp,
                pkey: req.bth.pkey,
                psn: req.bth.psn,
                len: p.payload.len(),
                mtu,
            };
            self.send_message(dev, (at.qpn, dest_qp), peer, (&m, None, None), &p.payload);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_ends_at_its_last_or_only_packet() {
        assert_eq!(only_of(opcode::SEND_LAST_IMM), Some(opcode::SEND_ONLY_IMM));
        assert_eq!(only_of(opcode::WRITE_LAST), Some(opcode::WRITE_ONLY));
        assert_eq!(only_of(opcode::WRITE_MIDDLE), None);
        assert!(same_kind(opcode::SEND_FIRST, opcode::SEND_LAST_INV));
        assert!(!same_kind(opcode::SEND_FIRST, opcode::WRITE_MIDDLE));
    }
}
