//! The responder: how a device takes the request packets the fabric delivers to one of its
//! QPs. It checks them against its own tables only — the QP's state, expected PSN, access
//! flags and receive queue, its mkeys — places the data in its host memory, writes its own
//! receive CQEs, raises its own QP events and takes its own QP to ERR, and answers with an
//! ACK, a NAK or a READ response ([`Response`]). Every method here touches only the device
//! the packet was delivered to.

use mlx5_dv::prm::{cqe, mkc};
use mlx5_dv::{AccessFlags, QpState, event_type};

use super::pipeline::{Endpoint, Failed, SigHit};
use super::translate::{Need, Why, field};
use super::{Engine, syndrome};
use crate::device::Device;
use crate::device::contract::tm::TmCqe;
use crate::device::contract::{Cqe, SCATTER_TO_CQE_MAX, Sender};
use crate::device::firmware::{DciId, PSN_MASK};
use crate::fabric::{Capture, Link, QpPath};
use crate::host::Dma;
use crate::packet::{Ack, Aeth, AtomicEth, Bth, Headers, Packet, nak, opcode};
use crate::wire::{Message, MessageOp};

mod tm;
pub(super) use tm::Rndv;

/// A corruption to apply on the wire: (offset, xor).
pub(super) type Corrupt = Option<(u64, u8)>;

/// Where a request's PSN falls for its responder (IBTA 9.7.5.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seq {
    /// The expected PSN: a new request.
    New,
    /// Within the 2^23 PSNs before it: a duplicate, acknowledged (or, for a READ, served)
    /// again without effect.
    Duplicate,
    /// Past it: a sequence error NAK, after which the requester's retries all time out.
    Ahead,
}

fn sequence(psn: u32, expected: u32) -> Seq {
    match expected.wrapping_sub(psn) & PSN_MASK {
        0 => Seq::New,
        b if b <= 1 << 23 => Seq::Duplicate,
        _ => Seq::Ahead,
    }
}

impl Device {
    /// The transport checks of this device's responder (IBTA 9.7.5.1), on its own QP: no
    /// answer unless the QP is in RTR or RTS; a NAK for a PSN ahead of the expected one; an
    /// ACK for a duplicate (a READ is served again); an RNR NAK for a message that needs a
    /// receive WQE when none is posted. A new request moves the expected PSN on by the PSNs
    /// it takes. `None` to execute it, or the answer that ends it here.
    fn rx_transport(&mut self, host: &crate::host::Host, h: &Headers, span: u32) -> Option<Response> {
        let Some(q) = self.fw.qp(h.bth.dest_qp) else { return Some(Response::silent()) };
        if !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return Some(Response::silent());
        }
        let op = h.bth.opcode;
        let seq = sequence(h.bth.psn, q.transport.rq_psn);
        if q.st == mlx5_dv::prm::queues::st::UC {
            // UC: a whole message starts anew whatever its PSN; one that needs a receive WQE
            // when none is posted is dropped, without an answer.
            let needs_recv = matches!(op, opcode::SEND_ONLY | opcode::SEND_ONLY_IMM) || op == opcode::WRITE_ONLY_IMM;
            if needs_recv && !self.has_recv(host, h.bth.dest_qp) {
                self.net.dropped = self.net.dropped.saturating_add(1);
                return Some(Response::silent());
            }
            if let Some(t) = self.fw.transport_mut(h.bth.dest_qp) {
                t.rq_psn = h.bth.psn.wrapping_add(span) & PSN_MASK;
            }
            return None;
        }
        let atomic = matches!(op, opcode::COMPARE_SWAP | opcode::FETCH_ADD);
        match seq {
            Seq::Ahead => {
                self.net.counters.out_of_sequence += 1;
                let expected = q.transport.rq_psn;
                if q.transport.nak_psn == Some(expected) {
                    return Some(Response::silent());
                }
                if let Some(t) = self.fw.transport_mut(h.bth.dest_qp) {
                    t.nak_psn = Some(expected);
                }
                return Some(Response::nak(nak::PSN_SEQUENCE));
            }
            // A duplicate atomic is answered from the replay cache, never executed again;
            // one older than the cache keeps gets no answer.
            Seq::Duplicate => self.net.counters.duplicate_request += 1,
            _ => {}
        }
        match seq {
            Seq::Duplicate if atomic => {
                return Some(q.transport.atomics.recall(h.bth.psn).map_or_else(Response::silent, Response::atomic_ack));
            }
            Seq::Duplicate if op != opcode::READ_REQUEST && !self.net.replay_duplicates => {
                return Some(Response::ack(Pulled::No));
            }
            _ => {}
        }
        let needs_recv = matches!(op, opcode::SEND_ONLY | opcode::SEND_ONLY_IMM | opcode::SEND_ONLY_INV)
            || op == opcode::WRITE_ONLY_IMM;
        let min_rnr_timer = q.transport.min_rnr_timer;
        if needs_recv && !self.has_recv(host, h.bth.dest_qp) {
            return Some(Response::answer(opcode::ACKNOWLEDGE, Aeth::rnr(min_rnr_timer, 0), Vec::new(), Pulled::No));
        }
        if seq == Seq::New
            && let Some(t) = self.fw.transport_mut(h.bth.dest_qp)
        {
            t.rq_psn = t.rq_psn.wrapping_add(span) & PSN_MASK;
        }
        None
    }
}

/// A request's payload.
pub(super) enum Payload<'p> {
    /// None: a READ request.
    None,
    /// The requester's side of the message, its pipelines over its memory: in one process
    /// the responder pulls the wire bytes through them as it places them, without a copy in
    /// between. A fabric that leaves the process gathers them into bytes first.
    Dma(&'p Endpoint),
    /// Plain gather ranges in host memory (the direct path's WRITEs), read the same way.
    Plain(&'p [(u64, u64)]),
    /// Bytes that came from another process, reassembled from their packets.
    Bytes(&'p [u8]),
}

impl Payload<'_> {
    /// The bytes the payload puts on the wire; `None` if they cannot be counted.
    fn wire_len(&self) -> Option<u64> {
        match self {
            Payload::None => Some(0),
            Payload::Dma(ep) => ep.wire_len(),
            Payload::Plain(r) => r.iter().try_fold(0u64, |n, &(_, l)| n.checked_add(l)),
            Payload::Bytes(b) => Some(b.len() as u64),
        }
    }
}

/// A request packet on its way to the responder.
pub(super) struct Request<'p> {
    pub(super) packet: Packet<Payload<'p>>,
    /// The requester's QP.
    pub(super) from: QpPath,
    /// The PSNs the message takes (one per path-MTU packet): in one process a message
    /// travels whole, as one packet.
    pub(super) span: u32,
    /// A fault rule's corruption of one wire byte.
    pub(super) corrupt: Corrupt,
}

/// What pulling a [`Payload::Dma`] met at the requester's side, reported back with the
/// answer (in one process, where the pull happens during the responder's placement).
#[derive(Debug, Clone, Copy)]
pub(super) enum Pulled {
    /// Not pulled: the request was refused or was a duplicate.
    No,
    /// Pulled, with the requester's first signature error.
    Yes(Option<SigHit>),
    /// The requester's own memory failed while the bytes were read.
    Failed,
}

/// The responder's answer: an ACK, NAK or READ response packet, or none at all.
pub(super) struct Response {
    /// `None` when no QP took the request: the requester's retries time out.
    pub(super) packet: Option<Packet<Vec<u8>>>,
    pub(super) pulled: Pulled,
}

impl Response {
    fn silent() -> Self {
        Response { packet: None, pulled: Pulled::No }
    }

    fn answer(op: u8, aeth: Aeth, data: Vec<u8>, pulled: Pulled) -> Self {
        let bth = Bth { opcode: op, ..Bth::default() };
        let headers = Headers { bth, aeth: Some(aeth), ..Headers::default() };
        Response { packet: Some(Packet { headers, payload: data }), pulled }
    }

    fn ack(pulled: Pulled) -> Self {
        Self::answer(opcode::ACKNOWLEDGE, Aeth::ack(0), Vec::new(), pulled)
    }

    /// An ATOMIC Acknowledge carrying the original value.
    pub(super) fn atomic_ack(original: u64) -> Self {
        let mut r = Self::answer(opcode::ATOMIC_ACKNOWLEDGE, Aeth::ack(0), Vec::new(), Pulled::No);
        if let Some(p) = &mut r.packet {
            p.headers.atomic_ack = Some(original);
        }
        r
    }

    fn nak(code: u8) -> Self {
        Self::answer(opcode::ACKNOWLEDGE, Aeth::nak(code, 0), Vec::new(), Pulled::No)
    }

    /// What the AETH says; `None` without an answer.
    pub(super) fn ack_kind(&self) -> Option<Ack> {
        self.packet.as_ref()?.headers.aeth.map(|a| a.kind())
    }
}

/// The responder's outcome of an operation, before it goes out as a [`Response`].
enum Reply {
    /// Done; the requester's signature error its payload met, if any.
    Ack(Option<SigHit>),
    /// READ response data.
    Data(Vec<u8>),
    /// An atomic's original value.
    Atomic(u64),
    /// Refused with this syndrome (the QP goes to ERR when it says so).
    Nak(u8),
    /// The requester's memory failed under the pull.
    Local,
}

/// What a request says survives the wire: its headers decode from their bytes as they were.
#[cfg(debug_assertions)]
pub(super) fn wire_check(h: &Headers) {
    let mut b = [0u8; Headers::MAX_LEN];
    let n = h.write(&mut b);
    debug_assert_eq!(Headers::decode(&b[..n]), Some((*h, n)), "a request the wire would not carry");
}

/// The message a request's ONLY opcode starts, to cut by path MTU; `None` for a READ
/// request (one packet whatever its length).
pub(super) fn message_op(h: &Headers) -> Option<MessageOp> {
    let (se, imm, r) = (h.bth.se, h.imm.unwrap_or(0), h.reth.unwrap_or_default());
    Some(match h.bth.opcode {
        opcode::SEND_ONLY => MessageOp::Send { solicited: se },
        opcode::SEND_ONLY_IMM => MessageOp::SendImm { solicited: se, imm },
        opcode::SEND_ONLY_INV => MessageOp::SendInv { solicited: se, rkey: h.ieth.unwrap_or(0) },
        opcode::WRITE_ONLY => MessageOp::Write { va: r.va, rkey: r.rkey },
        opcode::WRITE_ONLY_IMM => MessageOp::WriteImm { va: r.va, rkey: r.rkey, imm },
        _ => return None,
    })
}

/// The NAK code that makes the requester complete with `syndrome`.
fn nak_of(s: u8) -> Option<u8> {
    match s {
        syndrome::REMOTE_ACCESS => Some(nak::REMOTE_ACCESS),
        syndrome::REMOTE_INVAL_REQ => Some(nak::INVALID_REQUEST),
        syndrome::REMOTE_OP => Some(nak::REMOTE_OPERATIONAL),
        _ => None,
    }
}

/// The requester's error syndrome for a NAK code.
pub(super) fn syndrome_of_nak(code: u8) -> u8 {
    match code {
        nak::REMOTE_ACCESS => syndrome::REMOTE_ACCESS,
        nak::INVALID_REQUEST => syndrome::REMOTE_INVAL_REQ,
        nak::REMOTE_OPERATIONAL => syndrome::REMOTE_OP,
        _ => syndrome::TRANSPORT_RETRY,
    }
}

impl Engine<'_> {
    /// The fabric in one process: deliver `req` to device `dev` (where the fabric routed its
    /// destination address) and return the answer, immediately and deterministically.
    pub(super) fn transmit(&mut self, dev: usize, req: &Request<'_>) -> Response {
        #[cfg(debug_assertions)]
        self.wire_round_trip(req);
        let fabric = self.fabric;
        match fabric.capture() {
            // How mlx5 carries DC on the wire is not public: DC requests are not captured.
            _ if self.dc_key.is_some() => self.receive(dev, req),
            None => self.receive(dev, req),
            Some(cap) => self.receive_captured(cap, dev, req),
        }
    }

    /// [`Engine::receive`], the exchange written to a capture as its RoCE v2 packets. The
    /// payload is gathered first: the responder may overwrite it (a QP connected to itself).
    /// A payload the requester cannot read never goes out, so it is not written.
    fn receive_captured(&mut self, cap: &Capture, dev: usize, req: &Request<'_>) -> Response {
        let payload = self.wire_payload(req);
        let resp = self.receive(dev, req);
        let (from, h) = (req.from, &req.packet.headers);
        let fabric = self.fabric;
        let (Some(a), Some(b)) = (fabric.port(from.dev), fabric.port(dev)) else { return resp };
        let sport = |q: QpPath| self.devs.get(q.dev).and_then(|d| d.fw.qp_udp_sport(q.qpn));
        let (from_port, to_port) = (sport(from), sport(QpPath { dev, qpn: h.bth.dest_qp }));
        let (Some(there), Some(back)) = (
            Link::between(a, from.qpn, b, h.bth.dest_qp).map(|l| l.from_port(from_port)),
            Link::between(b, h.bth.dest_qp, a, from.qpn).map(|l| l.from_port(to_port)),
        ) else {
            return resp;
        };
        let mtu = usize::try_from(self.mtu_bytes(from)).unwrap_or(4096);
        let msg = |op, dest_qp, len| Message { op, dest_qp, pkey: h.bth.pkey, psn: h.bth.psn, len, mtu };
        let uc = self.is_unreliable(from);
        if let Some(data) = &payload {
            match message_op(h) {
                // UC's packets: the RC ones' opcodes plus 0x20, no ACK asked for.
                Some(op) if uc => {
                    for seg in crate::wire::segments(&msg(op, h.bth.dest_qp, data.len())) {
                        let mut p = seg.headers;
                        (p.bth.opcode, p.bth.ack_req) = (p.bth.opcode | opcode::UC, false);
                        cap.packet(&there, &p, data.get(seg.range.clone()).unwrap_or(&[]));
                    }
                }
                Some(op) => cap.message_on(&there, &msg(op, h.bth.dest_qp, data.len()), data, h.xrc),
                None => cap.packet(&there, h, data),
            }
        }
        if let Some(p) = &resp.packet {
            if matches!(p.headers.bth.opcode, opcode::ACKNOWLEDGE | opcode::ATOMIC_ACKNOWLEDGE) {
                // An ACK names the request's last PSN; a NAK its first.
                let ack = matches!(p.headers.aeth.map(|a| a.kind()), Some(Ack::Ack(_)));
                let psn = if ack { h.bth.psn.wrapping_add(req.span.max(1) - 1) & PSN_MASK } else { h.bth.psn };
                let mut a = p.headers;
                (a.bth.dest_qp, a.bth.psn, a.bth.pkey) = (from.qpn, psn, h.bth.pkey);
                a.xrc = h.xrc.map(|_| 0);
                cap.packet(&back, &a, &[]);
            } else {
                let msn = p.headers.aeth.map_or(0, |a| a.msn);
                let m = msg(MessageOp::ReadResponse { msn }, from.qpn, p.payload.len());
                cap.message_on(&back, &m, &p.payload, h.xrc.map(|_| 0));
            }
        }
        cap.flush();
        resp
    }

    /// The request as a fabric that leaves the process sends it: headers, then the payload
    /// gathered from the requester's memory through its pipelines (uncorrupted; without the
    /// pad and ICRC). `None` if the payload cannot be read. The seam a cross-process fabric
    /// sends through; in process only debug builds use it.
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub(super) fn wire_bytes(&mut self, req: &Request<'_>) -> Option<Vec<u8>> {
        let payload = self.wire_payload(req)?;
        let mut out = Vec::with_capacity(Headers::MAX_LEN + payload.len());
        req.packet.headers.encode(&mut out);
        out.extend_from_slice(&payload);
        Some(out)
    }

    /// The payload of [`Engine::wire_bytes`].
    pub(super) fn wire_payload(&mut self, req: &Request<'_>) -> Option<Vec<u8>> {
        Some(match req.packet.payload {
            Payload::None => Vec::new(),
            Payload::Dma(ep) => {
                let (data, _) = self.gather(ep).ok()?;
                data
            }
            Payload::Plain(ranges) => {
                let mut data = Vec::new();
                for &(va, n) in ranges {
                    data.extend_from_slice(self.host.read(va, usize::try_from(n).ok()?)?);
                }
                data
            }
            Payload::Bytes(b) => b.to_vec(),
        })
    }

    /// Debug builds: a small request survives the wire, its headers and payload decoding
    /// from its bytes as they were sent.
    #[cfg(debug_assertions)]
    fn wire_round_trip(&mut self, req: &Request<'_>) {
        wire_check(&req.packet.headers);
        let small = match req.packet.payload {
            Payload::Dma(ep) => ep.wire_len().is_some_and(|n| n <= 4096),
            _ => true,
        };
        if small && let Some(b) = self.wire_bytes(req) {
            let p = Packet::decode(&b);
            debug_assert_eq!(p.map(|p| p.headers), Some(req.packet.headers), "a request the wire would not carry");
        }
    }

    /// Device `dev`'s responder takes a request packet: the device's transport checks, then
    /// the operation through its pipelines, on its tables and memory only.
    pub(super) fn receive(&mut self, dev: usize, req: &Request<'_>) -> Response {
        let h = &req.packet.headers;
        let at = QpPath { dev, qpn: h.bth.dest_qp };
        // A raw Ethernet QP takes frames by steering rules, never RoCE requests.
        if self.qp(at).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::RAW) {
            return Response::silent();
        }
        if self.dct_admits(at, h) == Some(false) {
            return Response::silent();
        }
        let dci = self.dci_of(at, req.from);
        if let Some(answer) = dci.and_then(|from| self.dct_replay(at, from, h)) {
            return answer;
        }
        if let Some(answer) = self.xrc_target(at, h) {
            return answer;
        }
        let Some(d) = self.devs.get_mut(dev) else { return Response::silent() };
        if let Some(answer) = d.rx_transport(self.host, h, req.span) {
            return answer;
        }
        let op = h.bth.opcode;
        let p = &req.packet.payload;
        let data = matches!(p, Payload::Dma(_) | Payload::Bytes(_));
        let reply = match (op, h.reth) {
            (opcode::WRITE_ONLY | opcode::WRITE_ONLY_IMM, Some(r)) if data => {
                let imm = h.imm.map(|i| (i, h.bth.se));
                self.respond_write(at, (r.rkey, r.va), imm, p, req.corrupt)
            }
            (opcode::READ_REQUEST, Some(r)) => self.respond_read(at, r.rkey, r.va, u64::from(r.dma_len)),
            (opcode::SEND_ONLY, _) if data && self.tm_srq(at).is_some() => {
                let srq = self.tm_srq(at).unwrap_or_default();
                self.respond_tm(at, req.from, srq, p, req.corrupt)
            }
            (opcode::SEND_ONLY | opcode::SEND_ONLY_IMM | opcode::SEND_ONLY_INV, _) if data => {
                self.respond_send(at, (h.imm, h.ieth, h.bth.se), p, req.corrupt, None)
            }
            (opcode::COMPARE_SWAP | opcode::FETCH_ADD, _) => match h.atomic {
                Some(a) => self.respond_atomic(at, (op == opcode::COMPARE_SWAP, h.bth.psn, a), dci),
                None => Reply::Nak(syndrome::REMOTE_INVAL_REQ),
            },
            _ => Reply::Nak(syndrome::REMOTE_INVAL_REQ),
        };
        if self.qp(at).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::UC) {
            return self.uc_outcome(at, reply);
        }
        match reply {
            Reply::Ack(hit) => Response::ack(Pulled::Yes(hit)),
            Reply::Data(d) => Response::answer(opcode::READ_RESPONSE_ONLY, Aeth::ack(0), d, Pulled::No),
            Reply::Atomic(v) => Response::atomic_ack(v),
            Reply::Nak(s) => nak_of(s).map_or_else(Response::silent, Response::nak),
            Reply::Local => Response { packet: None, pulled: Pulled::Failed },
        }
    }

    /// An XRC target QP takes a request into the SRQ its XRCETH names, which must be an XRC
    /// SRQ of the QP's domain: else a NAK (invalid request) answers it and the QP goes to ERR
    /// (IBTA 9.7.5.1.x, the XRC responder's checks). The SRQ's CQ takes the completion. A
    /// request of the other transport (XRC to an RC or UC QP, RC to an XRC one) is dropped.
    /// `None` to go on with the request.
    fn xrc_target(&mut self, at: QpPath, h: &Headers) -> Option<Response> {
        let q = self.qp(at)?;
        if !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return None;
        }
        let (target, xrcd) = (q.st == mlx5_dv::prm::queues::st::XRC && q.xrcd != 0, q.xrcd);
        match (target, h.xrc) {
            (false, None) => None,
            (false, Some(_)) | (true, None) => Some(Response::silent()),
            (true, Some(srqn)) => {
                let d = self.dev(at.dev)?;
                match d.fw.srq(srqn).filter(|s| s.xrcd == xrcd && xrcd != 0).map(|s| (s.cqn, s.pdn)) {
                    Some((cqn, pdn)) => {
                        // The SRQ's PD is the one its keys are checked against.
                        let q = d.fw.qp_mut(at.qpn)?;
                        (q.srqn, q.recv_cqn, q.pdn) = (Some(srqn), cqn, pdn);
                        None
                    }
                    None => {
                        self.responder_error(at, Some(event_type::QP_REQ_ERR));
                        Some(Response::nak(nak::INVALID_REQUEST))
                    }
                }
            }
        }
    }

    /// A UC responder answers nothing: a message refused for its R_Key or access is dropped
    /// (counted) and leaves the QP as it was; an error of the receive WQE itself completes it
    /// in error and takes the QP to ERR, as on RC.
    fn uc_outcome(&mut self, at: QpPath, reply: Reply) -> Response {
        let pulled = match reply {
            Reply::Ack(hit) => Pulled::Yes(hit),
            Reply::Local => Pulled::Failed,
            Reply::Data(_) | Reply::Atomic(_) => Pulled::No,
            Reply::Nak(s) => {
                if s == syndrome::REMOTE_ACCESS {
                    self.pending.retain(|(p, _)| *p != at);
                }
                if let Some(d) = self.dev(at.dev) {
                    d.net.dropped = d.net.dropped.saturating_add(1);
                }
                Pulled::No
            }
        };
        Response { packet: None, pulled }
    }

    /// Place a request's payload at `target`: streamed through the requester's pipelines
    /// when it is in this process, scattered when its bytes came over the network (a
    /// corruption rule has acted on them before they left). The two sides' signature errors.
    fn place(
        &mut self,
        payload: &Payload<'_>,
        target: &Endpoint,
        corrupt: Corrupt,
    ) -> Result<(Option<SigHit>, Option<SigHit>), Failed> {
        match payload {
            Payload::Dma(src) => self.stream(src, target, corrupt),
            Payload::Bytes(b) => {
                self.scatter(b, target).map(|rhit| (None, rhit)).map_err(|why| Failed { why, at_dst: true })
            }
            _ => Err(Failed { why: Why::Unmapped, at_dst: false }),
        }
    }

    /// The responder detected an error: its QP goes to ERR (with an async event) once the
    /// requester has completed the WR, so a QP connected to itself completes it once.
    /// A DCT serves many DCIs: it stays as it is (the NAK goes to the one DCI; unverified).
    fn responder_error(&mut self, at: QpPath, ev: Option<u32>) {
        if self.qp(at).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::DCT) {
            return;
        }
        self.pending.push((at, ev));
    }

    /// NAK a request with a remote access error.
    fn remote_fault(&mut self, at: QpPath) -> Reply {
        self.responder_error(at, Some(event_type::QP_ACCESS_ERR));
        Reply::Nak(syndrome::REMOTE_ACCESS)
    }

    fn responder_sig(&mut self, at: QpPath, hit: Option<SigHit>) {
        let Some(cq) = self.qp(at).map(|p| p.recv_cqn) else { return };
        if let Some(h) = hit {
            self.report_sig(at.dev, h.index, h.err, h.domain, cq, at.qpn);
        }
    }

    fn allows(&self, at: QpPath, a: AccessFlags) -> bool {
        self.qp(at).is_some_and(|p| p.access.contains(a))
    }

    /// An RDMA WRITE.
    fn respond_write(
        &mut self,
        at: QpPath,
        (rkey, raddr): (u32, u64),
        imm: Option<(u32, bool)>,
        payload: &Payload<'_>,
        corrupt: Corrupt,
    ) -> Reply {
        let pat = self.at(at);
        let Some(len) = payload.wire_len() else { return self.remote_fault(at) };
        if !self.allows(at, AccessFlags::REMOTE_WRITE) {
            return self.remote_fault(at);
        }
        // IBTA C9-88: a zero-length WRITE need not carry a valid R_Key or address.
        if len == 0 {
            if let Some(imm) = imm {
                self.complete_recv(at, 0, imm);
            }
            return Reply::Ack(None);
        }
        let Ok(target) = self.remote_endpoint(pat, rkey, raddr, len, Need::RemoteWrite) else {
            return self.remote_fault(at);
        };
        let (hit, rhit) = match self.place(payload, &target, corrupt) {
            Ok(h) => h,
            Err(f) if f.at_dst => return self.remote_fault(at),
            Err(_) => return Reply::Local,
        };
        self.responder_sig(at, rhit);
        if let Some(imm) = imm {
            self.complete_recv(at, u32::try_from(len).unwrap_or(u32::MAX), imm);
        }
        Reply::Ack(hit)
    }

    /// An RDMA READ: access checked, the data read through the responder's pipelines.
    fn respond_read(&mut self, at: QpPath, rkey: u32, raddr: u64, len: u64) -> Reply {
        let pat = self.at(at);
        if !self.allows(at, AccessFlags::REMOTE_READ) {
            return self.remote_fault(at);
        }
        // IBTA C9-88, as for a WRITE: nothing to read, no key to check.
        if len == 0 {
            return Reply::Data(Vec::new());
        }
        let source = match self.remote_endpoint(pat, rkey, raddr, len, Need::RemoteRead) {
            Ok(ep) if self.mapped(&ep) => ep,
            _ => return self.remote_fault(at),
        };
        match self.gather(&source) {
            Ok((data, rhit)) => {
                self.responder_sig(at, rhit);
                Reply::Data(data)
            }
            Err(_) => self.remote_fault(at),
        }
    }

    /// An atomic on 8 bytes of host memory, in host byte order: the QP must allow remote
    /// atomics and the key must (a remote access error otherwise); an address that is not
    /// 8-byte aligned is an invalid request (IBTA: misaligned atomic). The device runs one
    /// request at a time, so no other atomic comes between the read and the write. The
    /// original value is kept for a duplicate of this request.
    /// A compare-and-swap (`cmp`) or fetch-and-add of request `psn`; a DCT keeps its answer
    /// by the DCI `dci` that asked.
    fn respond_atomic(&mut self, at: QpPath, (cmp, psn, a): (bool, u32, AtomicEth), dci: Option<DciId>) -> Reply {
        if !self.allows(at, AccessFlags::REMOTE_ATOMIC) {
            return self.remote_fault(at);
        }
        let target = match self.remote_endpoint(self.at(at), a.rkey, a.va, 8, Need::RemoteAtomic) {
            Ok(ep) if self.mapped(&ep) => ep,
            _ => return self.remote_fault(at),
        };
        if !a.va.is_multiple_of(8) {
            self.responder_error(at, Some(event_type::QP_REQ_ERR));
            return Reply::Nak(syndrome::REMOTE_INVAL_REQ);
        }
        let Ok((bytes, _)) = self.gather(&target) else { return self.remote_fault(at) };
        let original = bytes.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes);
        self.give_scratch(at.dev, bytes);
        let Some(original) = original else { return self.remote_fault(at) };
        let new = match cmp {
            true => (original == a.compare).then_some(a.swap_add),
            false => Some(original.wrapping_add(a.swap_add)),
        };
        if let Some(v) = new
            && self.scatter(&v.to_ne_bytes(), &target).is_err()
        {
            return self.remote_fault(at);
        }
        match dci {
            Some(from) => {
                if let Some(q) = self.dev(at.dev).and_then(|d| d.fw.qp_mut(at.qpn)) {
                    q.dct_replay.remember(from, psn, cmp, a, original);
                }
            }
            None => {
                if let Some(t) = self.dev(at.dev).and_then(|d| d.fw.transport_mut(at.qpn)) {
                    t.atomics.remember(psn, original);
                }
            }
        }
        Reply::Atomic(original)
    }

    /// SEND_WITH_INV: the key must name an mkey of the responder's PD that allows remote
    /// invalidation.
    fn may_invalidate(&self, at: QpPath, key: u32) -> bool {
        let pdn = self.at(at).pdn;
        let Some(m) = self.devs.get(at.dev).and_then(|d| d.fw.mkey(key >> 8)) else { return false };
        field(m, mkc::EN_RINVAL) != 0
            && field(m, mkc::PD) == u64::from(pdn)
            && field(m, mkc::MKEY_7_0) == u64::from(key & 0xff)
    }

    /// A SEND: the next receive WQE takes the message; an invalidation takes effect once the
    /// data is placed. An unexpected or untagged message of a tag-matching SRQ (`tm`) is
    /// never scattered to its CQE and completes with a tag-matching CQE on the SRQ's CQ.
    fn respond_send(
        &mut self,
        at: QpPath,
        (imm, inv, se): (Option<u32>, Option<u32>, bool),
        payload: &Payload<'_>,
        corrupt: Corrupt,
        tm: Option<tm::TmDelivery>,
    ) -> Reply {
        if let Some(key) = inv
            && !self.may_invalidate(at, key)
        {
            self.responder_error(at, Some(event_type::QP_REQ_ERR));
            return Reply::Nak(syndrome::REMOTE_INVAL_REQ);
        }
        let pat = self.at(at);
        let Some((rcq, scatter_to_cqe)) = self.qp(at).map(|p| (p.recv_cqn, p.scatter_to_cqe)) else {
            return Reply::Nak(syndrome::TRANSPORT_RETRY);
        };
        // The CQE takes what `cs_res` allows and its entry holds: 64 bytes only in a
        // 128-byte entry.
        let wide = self.devs.get_mut(at.dev).and_then(|d| d.cq_entry_size(rcq)) == Some(128);
        let scatter_max =
            if wide { usize::from(scatter_to_cqe) } else { usize::from(scatter_to_cqe).min(SCATTER_TO_CQE_MAX) };
        let Some(r) = self.pop_recv(at) else { return Reply::Nak(syndrome::TRANSPORT_RETRY) };
        let fail = |e: &mut Self, s: u8| {
            e.recv_error(at, r.index, s);
            e.responder_error(at, None);
        };
        let Some(len) = payload.wire_len() else {
            fail(self, syndrome::LOCAL_LENGTH);
            return Reply::Nak(syndrome::REMOTE_INVAL_REQ);
        };
        if len > self.wire_len(at.dev, &r.sge) {
            fail(self, syndrome::LOCAL_LENGTH);
            return Reply::Nak(syndrome::REMOTE_INVAL_REQ);
        }
        let (opcode, imm) = match (inv, imm) {
            (Some(key), _) => (cqe::opcode::RESP_SEND_INV, key),
            (None, Some(imm)) => (cqe::opcode::RESP_SEND_IMM, imm),
            (None, None) => (cqe::opcode::RESP_SEND, 0),
        };
        let byte_cnt = u32::try_from(len).unwrap_or(u32::MAX);
        let mut inline = None;
        let (hit, rhit) = if scatter_max > 0 && tm.is_none() && len <= scatter_max as u64 {
            // The device puts small payloads in the CQE; the provider copies them at poll time.
            let gathered = match payload {
                Payload::Dma(ep) => self.gather(ep),
                Payload::Bytes(b) => Ok((b.to_vec(), None)),
                _ => return Reply::Local,
            };
            let Ok((mut data, hit)) = gathered else { return Reply::Local };
            if let Some((off, xor)) = corrupt
                && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
            {
                *b ^= xor;
            }
            inline = Some(data.clone());
            self.give_scratch(at.dev, data);
            (hit, None)
        } else {
            // A receive through a signature mkey takes one SGE.
            let staged = r.sge.len() > 1 && r.sge.iter().any(|s| self.has_stages(at.dev, s.lkey));
            let target = if staged { None } else { self.local_endpoint(pat, &r.sge, Need::LocalWrite, Some(len)).ok() };
            let Some(target) = target else {
                fail(self, syndrome::LOCAL_PROT);
                return Reply::Nak(syndrome::REMOTE_OP);
            };
            match self.place(payload, &target, corrupt) {
                Ok(h) => h,
                Err(f) if f.at_dst => {
                    fail(self, syndrome::LOCAL_PROT);
                    return Reply::Nak(syndrome::REMOTE_OP);
                }
                Err(_) => return Reply::Local,
            }
        };
        if let Some(key) = inv
            && let Some(m) = self.dev(at.dev).and_then(|d| d.fw.mkey_mut(key >> 8))
        {
            let _ = mkc::FREE.set(&mut m.mkc, 1);
        }
        if let Some(h) = rhit {
            self.report_sig(at.dev, h.index, h.err, h.domain, rcq, at.qpn);
        }
        let from = self.sender(at);
        if let Some(t) = tm {
            let (srqn, app_op, tmh) = (t.srqn, t.app_op, t.tmh);
            let c = TmCqe::Recv { qpn: at.qpn, srqn, wqe_counter: r.index, app_op, app_info: 0, byte_cnt, tmh, from };
            self.push_cqe(at.dev, t.cqn, Cqe::Tm(c));
            return Reply::Ack(hit);
        }
        let cqe = Cqe::Resp { qpn: at.qpn, wqe_counter: r.index, opcode, byte_cnt, imm, inline, from, se };
        self.push_cqe(at.dev, rcq, cqe);
        Reply::Ack(hit)
    }

    /// Who sent what the QP received: on an RC QP the QP its path names, from the LID that
    /// path names (0 on RoCE).
    fn sender(&self, at: QpPath) -> Sender {
        let remote = self.qp(at).and_then(|p| p.remote);
        let srqn = self.qp(at).filter(|q| q.xrcd != 0).and_then(|q| q.srqn).unwrap_or(0);
        remote.map_or_else(Sender::default, |d| Sender {
            qpn: d.dest_qp_num,
            slid: d.ah.dlid,
            flags: 0,
            srqn,
            flow_tag: 0,
        })
    }

    /// RDMA WRITE with immediate consumes a receive WQE without scattering into it.
    fn complete_recv(&mut self, at: QpPath, len: u32, (imm, se): (u32, bool)) {
        let Some(rcq) = self.qp(at).map(|p| p.recv_cqn) else { return };
        let Some(r) = self.pop_recv(at) else { return };
        let from = self.sender(at);
        let cqe = Cqe::Resp {
            qpn: at.qpn,
            wqe_counter: r.index,
            opcode: cqe::opcode::RESP_WR_IMM,
            byte_cnt: len,
            imm,
            inline: None,
            from,
            se,
        };
        self.push_cqe(at.dev, rcq, cqe);
    }
}
