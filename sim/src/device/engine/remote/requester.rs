//! The requester's side of the transport across the network: a window of messages on the
//! wire per QP, completed in order as cumulative ACKs, READ responses and NAKs come, and sent
//! again go-back-N from the oldest unanswered one after an ACK timeout, a sequence error NAK
//! or an RNR NAK's timer.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use mlx5_dv::QpState;

use super::super::pipeline::SigHit;
use super::super::responder::{Payload, Pulled, Request, Response, message_op};
use super::super::{Engine, Step, syndrome};
use crate::device::WqeFault;
use crate::device::contract::WqeKind;
use crate::device::firmware::{PSN_MASK, QpTransport};
use crate::fabric::QpPath;
use crate::packet::{Ack, Aeth, Headers, Packet, nak, opcode};
use crate::wire::Message;

/// Messages a QP keeps on the wire at most.
const WINDOW_MESSAGES: usize = 64;
/// Packets a QP keeps on the wire at most: with a few QPs, what a peer's socket buffer holds.
const WINDOW_PACKETS: u32 = 256;
/// `RNR_RETRY_EXC_ERR`.
const RNR_RETRY_EXCEEDED: u8 = 0x16;
/// `BAD_RESP_ERR`: a READ response of the wrong length.
const BAD_RESPONSE: u8 = 0x10;

/// A requester QP's messages on the wire, oldest (its head WQE) first.
#[derive(Debug, Clone, Default)]
pub(in crate::device) struct Flight {
    msgs: VecDeque<Sent>,
    /// When the oldest unanswered message is sent again (transport clock, ns).
    deadline: u64,
    /// Timeouts and sequence errors since the last progress; RNR NAKs since then.
    retries: u8,
    rnr: u8,
    /// The deadline is an RNR NAK's timer: it ends in a resend that counts no retry.
    rnr_wait: bool,
    /// The QP's `sq_psn` once the newest message took its PSNs: another value means the QP
    /// was modified (reset, or given a new PSN) and what is kept here is stale.
    next_psn: u32,
    /// A retry is under way (since a timeout, a sequence error or an implied NAK, until the
    /// oldest message makes progress): the answers and NAKs still on their way from before it
    /// start no other.
    retrying: bool,
    /// A DCI's connection: the DCT its messages go to, while it has any.
    dc: Option<DcConn>,
}

/// A run of a DCI's messages to one DCT (the simulator's DC connection, named in each
/// request's DCETH): the DCT, the number the device gave the run, and its first PSN.
#[derive(Debug, Clone, Copy)]
struct DcConn {
    dct: (u32, mlx5_dv::AhAttr),
    number: u32,
    first_psn: u32,
}

/// One message: the WQE it is and what came back.
#[derive(Debug, Clone)]
struct Sent {
    /// The WQE's send-queue counter and basic blocks.
    pos: u32,
    bbs: u32,
    /// Its first PSN and how many it takes.
    psn: u32,
    span: u32,
    /// On the wire since last (re)sent; false: to send again.
    sent: bool,
    read: bool,
    /// The bytes a READ asked for: a response of another length is a bad response.
    want: u64,
    /// The requester's own signature error met gathering the payload.
    hit: Option<SigHit>,
    /// READ response data so far, and the PSN of the next response packet.
    data: Vec<u8>,
    read_next: u32,
    /// The answer once whole, or the syndrome the WQE ends with.
    answer: Option<Packet<Vec<u8>>>,
    failed: Option<u8>,
}

impl Sent {
    fn last_psn(&self) -> u32 {
        self.psn.wrapping_add(self.span.max(1) - 1) & PSN_MASK
    }

    fn holds(&self, psn: u32) -> bool {
        psn.wrapping_sub(self.psn) & PSN_MASK < self.span.max(1)
    }

    fn settled(&self) -> bool {
        self.answer.is_some() || self.failed.is_some()
    }
}

/// Whether PSN `a` is at or before `b` (within half the PSN space).
fn at_or_before(a: u32, b: u32) -> bool {
    b.wrapping_sub(a) & PSN_MASK < 1 << 23
}

/// Whether PSN `a` is before `b`.
fn before(a: u32, b: u32) -> bool {
    a != b && at_or_before(a, b)
}

/// What became of a requester's message to a remote peer.
pub(in crate::device::engine) enum Exchange {
    /// The answer came (boxed: a response with its headers is large, and rare here).
    Answer(Box<Response>),
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

impl Flight {
    /// When this flight's timer runs out, if a message waits on it (`None` with no timeout).
    pub(in crate::device) fn timer(&self) -> Option<u64> {
        (self.deadline != u64::MAX && self.msgs.iter().any(|m| !m.settled())).then_some(self.deadline)
    }

    /// Everything from message `i` on goes out again (a READ's partial response is dropped).
    fn rewind(&mut self, i: usize) {
        for m in self.msgs.iter_mut().skip(i) {
            if !m.settled() {
                m.sent = false;
                m.data.clear();
                m.read_next = m.psn;
            }
        }
    }

    /// A retry from message `i` on (a sequence error, an implied NAK): counted, and the last
    /// one `retry_cnt` allows ends message `i` in RETRY_EXC_ERR instead.
    fn retry_from(&mut self, i: usize, t: &QpTransport, now: u64) {
        if self.retries >= t.retry_cnt {
            if let Some(m) = self.msgs.get_mut(i) {
                m.failed = Some(syndrome::TRANSPORT_RETRY);
            }
            return;
        }
        self.retries += 1;
        self.retrying = true;
        self.rnr_wait = false;
        self.rewind(i);
        self.deadline = now.saturating_add(ack_timeout_ns(t.timeout));
    }

    /// The oldest READ or atomic on the wire whose request went before PSN `psn` and whose
    /// answer has not come. A responder answers in PSN order, so an answer for `psn` (or a
    /// NAK naming it) means that one's answer was lost: the IBTA's implied NAK.
    fn lost_answer_before(&self, psn: u32) -> Option<usize> {
        self.msgs.iter().position(|m| m.read && m.sent && !m.settled() && before(m.last_psn(), psn))
    }

    /// The oldest message not answered yet.
    fn oldest(&self) -> Option<usize> {
        self.msgs.iter().position(|m| !m.settled())
    }

    /// The oldest message moved (answered, or a READ response packet of it came): the
    /// retries start again from none, and so does its timer.
    fn progress(&mut self, t: &QpTransport, now: u64) {
        self.retries = 0;
        self.rnr = 0;
        self.retrying = false;
        self.rnr_wait = false;
        self.deadline = now.saturating_add(ack_timeout_ns(t.timeout));
    }

    /// Messages before `i` that are not READs are answered by what answered `i` (IBTA: a
    /// later response acknowledges the requests before it).
    fn implied_acks(&mut self, i: usize, ack: &Headers) {
        for m in self.msgs.iter_mut().take(i) {
            if !m.read && !m.settled() {
                m.answer = Some(Packet { headers: *ack, payload: Vec::new() });
            }
        }
    }
}

impl Engine<'_> {
    /// Run a QP whose path leads to `peer`: complete its head WQE once answered, then keep
    /// its window of messages on the wire. True if a WQE completed.
    pub(in crate::device::engine) fn progress_remote(&mut self, id: QpPath) -> bool {
        self.check_timer(id);
        let mut moved = false;
        while let Some(q) = self.qp(id) {
            if q.state == QpState::Err {
                // A responder that failed on a request of its own raises its event now, after
                // its requester's completion, as in process.
                if let Some(d) = self.dev(id.dev)
                    && let Some(ev) = d.fw.qp_mut(id.qpn).and_then(|q| q.responder_failed.take())
                    && let Some(ev) = ev
                {
                    d.qp_event(id.qpn, ev);
                }
                // Flushed as in process: once, and not counted as a move (the QP stays in
                // this run's schedule).
                self.forget_flight(id);
                self.flush(id);
                return moved;
            }
            if q.state != QpState::Rts || q.sq_cc == q.sq_pc {
                if q.sq_cc == q.sq_pc {
                    self.forget_flight(id);
                }
                break;
            }
            let cc = q.sq_cc;
            // A flight whose head is not the QP's head, or whose PSNs are not the QP's, is
            // stale (the QP was reset or modified).
            let psn = q.transport.sq_psn;
            if self.flight(id).is_some_and(|f| f.next_psn != psn || f.msgs.front().is_some_and(|m| m.pos != cc)) {
                self.forget_flight(id);
            }
            let Some((w, fault)) = self.head(id) else { break };
            self.cursor = Some((cc, w.bbs));
            let step = match (fault, &w.kind) {
                (Some(WqeFault::Completion { syndrome, vendor_err }), Some(k)) if k.opcode() != 0 => {
                    self.cursor = None;
                    self.complete_in_error(id, &w, syndrome, vendor_err);
                    moved = true;
                    continue;
                }
                (Some(WqeFault::Corrupt { offset, xor }), _) => self.execute(id, &w, Some((offset, xor))),
                _ => self.execute(id, &w, None),
            };
            self.cursor = None;
            let blocked = matches!(step, Step::Blocked);
            self.finish(id, &w, step);
            if blocked {
                self.fill_window(id);
                break;
            }
            moved = true;
        }
        moved
    }

    fn flight(&self, id: QpPath) -> Option<&Flight> {
        self.devs.get(id.dev)?.net.flights.get(&id.qpn)
    }

    fn flight_mut(&mut self, id: QpPath) -> Option<&mut Flight> {
        self.devs.get_mut(id.dev)?.net.flights.get_mut(&id.qpn)
    }

    fn forget_flight(&mut self, id: QpPath) {
        if let Some(d) = self.devs.get_mut(id.dev) {
            d.net.flights.remove(&id.qpn);
        }
    }

    /// Whether the WQE at the engine's cursor is a message already on the wire or answered:
    /// running it again only collects its answer, its payload having been gathered when it
    /// was sent.
    pub(in crate::device::engine) fn already_sent(&self, id: QpPath) -> bool {
        let Some(pos) = self.cursor.map(|(pos, _)| pos).or_else(|| self.qp(id).map(|q| q.sq_cc)) else {
            return false;
        };
        self.flight(id).is_some_and(|f| f.msgs.iter().any(|m| m.pos == pos && (m.sent || m.settled())))
    }

    /// Whether the QP's messages go over the network (its PSNs then move as they are sent).
    pub(in crate::device::engine) fn in_flight(&self, id: QpPath) -> bool {
        self.flight(id).is_some()
    }

    /// The oldest unanswered message's timer ran out: after an RNR NAK its wait is over;
    /// otherwise a retry is counted (the last ends the head WQE in RETRY_EXC_ERR). Either way
    /// everything unanswered goes out again.
    fn check_timer(&mut self, id: QpPath) {
        let now = self.fabric.now_ns();
        let Some(t) = self.qp(id).map(|q| q.transport) else { return };
        let Some(net) = self.devs.get_mut(id.dev).map(|d| &mut d.net) else { return };
        let Some(f) = net.flights.get_mut(&id.qpn) else { return };
        let Some(i) = f.msgs.iter().position(|m| !m.settled()) else { return };
        if now < f.deadline {
            return;
        }
        if std::mem::take(&mut f.rnr_wait) {
            // An RNR NAK's wait is over: the resend counts no retry.
            f.rewind(i);
            f.deadline = now.saturating_add(ack_timeout_ns(t.timeout));
        } else {
            net.counters.local_ack_timeout_err += 1;
            f.retry_from(i, &t, now);
        }
    }

    /// Send the WQEs behind the head that are not on the wire yet (again, after a rewind, or
    /// for the first time), up to the window, stopping at one that does not go on the wire.
    fn fill_window(&mut self, id: QpPath) {
        let Some(q) = self.qp(id) else { return };
        let (mut pos, pc) = (q.sq_cc, q.sq_pc);
        let mut i = 0;
        loop {
            let Some(f) = self.flight(id) else { return };
            let packets: u32 = f.msgs.iter().filter(|m| !m.settled()).map(|m| m.span).sum();
            let known = f.msgs.get(i).map(|m| (m.sent, m.bbs));
            if pos == pc || (known.is_none() && (f.msgs.len() >= WINDOW_MESSAGES || packets >= WINDOW_PACKETS)) {
                return;
            }
            if let Some((true, bbs)) = known {
                (pos, i) = (pos.wrapping_add(bbs), i + 1);
                continue;
            }
            let Some(q) = self.qp(id) else { return };
            let Some(w) = self.wqe_at(q, pos) else { return };
            let on_wire = matches!(
                w.kind,
                Some(WqeKind::Write { .. } | WqeKind::Send { .. } | WqeKind::Read { .. } | WqeKind::Atomic { .. })
            );
            if !on_wire || q.faults.iter().any(|(at, _)| *at == pos) {
                return;
            }
            // max_rd_atomic: a new READ or atomic waits while as many are outstanding, counted
            // from the oldest WQE not completed (answered ones behind it included): the
            // responder can then replay any of them from its 16 latest.
            // A DCI sends to one DCT at a time: a WQE to another waits until every message
            // on the wire is answered (its connection then starts anew).
            if known.is_none() && self.dci_switch_waits(id, q, pos, w.bbs) {
                return;
            }
            let responds = matches!(w.kind, Some(WqeKind::Read { .. } | WqeKind::Atomic { .. }));
            let reads = f.msgs.iter().filter(|m| m.read).count();
            if known.is_none() && responds && reads >= 1usize << q.transport.log_sra_max.min(7) {
                return;
            }
            self.cursor = Some((pos, w.bbs));
            let step = self.execute(id, &w, None);
            self.cursor = None;
            // A local failure: the WQE fails when it reaches the head.
            if !matches!(step, Step::Blocked) {
                return;
            }
            (pos, i) = (pos.wrapping_add(w.bbs), i + 1);
        }
    }

    /// The requester's side of a message to `peer`, for the WQE at the engine's cursor: its
    /// answer once it came (the head only); otherwise it is sent (again) if it is not on the
    /// wire, and the QP waits.
    pub(in crate::device::engine) fn exchange(&mut self, qp: QpPath, peer: Ipv4Addr, req: &Request<'_>) -> Exchange {
        let now = self.fabric.now_ns();
        let Some(q) = self.qp(qp) else { return Exchange::Failed(syndrome::LOCAL_QP_OP) };
        let (t, cc) = (q.transport, q.sq_cc);
        let (pos, bbs) = self.cursor.unwrap_or((cc, 1));
        let Some(d) = self.dev(qp.dev) else { return Exchange::Failed(syndrome::LOCAL_QP_OP) };
        let f = d.net.flights.entry(qp.qpn).or_default();
        // After an RNR NAK nothing goes out until its timer runs out: the
        // responder had no receive WQE, and a resend at once would spend the retries.
        let holding = f.rnr_wait && now < f.deadline;
        let psn = match f.msgs.iter().position(|m| m.pos == pos) {
            Some(i) => {
                let Some(m) = f.msgs.get_mut(i) else { return Exchange::Waiting };
                if pos == cc && i == 0 {
                    if let Some(s) = m.failed {
                        f.msgs.pop_front();
                        return Exchange::Failed(s);
                    }
                    if let Some(answer) = m.answer.take() {
                        let pulled = match answer.headers.aeth.map(|a| a.kind()) {
                            Some(Ack::Ack(_)) => Pulled::Yes(m.hit),
                            _ => Pulled::No,
                        };
                        f.msgs.pop_front();
                        return Exchange::Answer(Box::new(Response { packet: Some(answer), pulled }));
                    }
                }
                if m.sent || holding {
                    return Exchange::Waiting;
                }
                m.psn
            }
            None => {
                // A new message takes the next PSNs now; its WQE completes later.
                let psn = t.sq_psn;
                let span = req.span.max(1);
                if f.msgs.iter().all(Sent::settled) {
                    f.rnr_wait = false;
                    f.deadline = now.saturating_add(ack_timeout_ns(t.timeout));
                }
                f.msgs.push_back(Sent {
                    pos,
                    bbs,
                    psn,
                    span,
                    sent: false,
                    // An atomic waits for its own answer, as a READ does: a later ACK does
                    // not carry its original value.
                    read: matches!(
                        req.packet.headers.bth.opcode,
                        opcode::READ_REQUEST | opcode::COMPARE_SWAP | opcode::FETCH_ADD
                    ),
                    want: req.packet.headers.reth.map_or(0, |r| u64::from(r.dma_len)),
                    hit: None,
                    data: Vec::new(),
                    read_next: psn,
                    answer: None,
                    failed: None,
                });
                f.next_psn = t.sq_psn.wrapping_add(span) & PSN_MASK;
                let next = f.next_psn;
                if let Some(tr) = d.fw.transport_mut(qp.qpn) {
                    tr.sq_psn = next;
                }
                if holding {
                    return Exchange::Waiting;
                }
                psn
            }
        };
        // Gathered for each transmission: the WQE stays in the ring until answered.
        let (mut data, hit) = match req.packet.payload {
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
        if let Some((off, xor)) = req.corrupt
            && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
        {
            *b ^= xor;
        }
        let mut h = req.packet.headers;
        h.bth.psn = psn;
        // A DCI's request carries the DCT's key, the DCI's number (the DCT answers it) and its
        // connection.
        h.dc = self.dc_key.map(|key| self.dc_conn(qp, key, psn));
        let mtu = usize::try_from(self.mtu_bytes(qp)).unwrap_or(4096);
        let dst_qp = h.bth.dest_qp;
        match message_op(&h) {
            Some(op) => {
                let m = Message { op, dest_qp: dst_qp, pkey: h.bth.pkey, psn, len: data.len(), mtu };
                self.send_message(qp.dev, (qp.qpn, dst_qp), peer, (&m, h.xrc, h.dc), &data);
            }
            None => self.send_packets(qp.dev, (qp.qpn, dst_qp), peer, &[(h, &[])]),
        }
        self.give_scratch(qp.dev, data);
        if let Some(m) = self.flight_mut(qp).and_then(|f| f.msgs.iter_mut().find(|m| m.pos == pos)) {
            m.sent = true;
            m.hit = hit;
        }
        Exchange::Waiting
    }

    /// The DCETH of DCI `qp`'s request `psn` towards the DCT its path names: in the DCI's
    /// connection to that DCT, or a new one (the device's next number) when it had none.
    fn dc_conn(&mut self, qp: QpPath, key: u64, psn: u32) -> crate::packet::Dceth {
        let mut dc = crate::packet::Dceth { key, src_qp: qp.qpn, ..Default::default() };
        let Some(dct) = self.qp(qp).and_then(|q| q.remote).map(|r| (r.dest_qp_num, r.ah)) else { return dc };
        let Some(net) = self.devs.get_mut(qp.dev).map(|d| &mut d.net) else { return dc };
        let Some(f) = net.flights.get_mut(&qp.qpn) else { return dc };
        let c = match f.dc.filter(|c| c.dct == dct) {
            Some(c) => c,
            None => {
                net.dc_conns = net.dc_conns.wrapping_add(1).max(1);
                let c = DcConn { dct, number: net.dc_conns, first_psn: psn };
                f.dc = Some(c);
                c
            }
        };
        (dc.conn, dc.first) = (c.number, psn == c.first_psn);
        dc
    }

    /// Whether DCI `id`'s WQE at `pos` names another DCT than its messages on the wire go to.
    fn dci_switch_waits(&self, id: QpPath, q: &crate::device::firmware::FwQp, pos: u32, bbs: u32) -> bool {
        let Some(c) = self.flight(id).filter(|f| f.msgs.iter().any(|m| !m.settled())).and_then(|f| f.dc) else {
            return false;
        };
        self.dci_target(q, pos, bbs).is_some_and(|d| (d.dest_qp_num, d.ah) != c.dct)
    }

    /// An ACK, NAK or READ response for requester QP `h.bth.dest_qp` of device `dev`. False
    /// if it answers nothing on the wire.
    pub(in crate::device::engine) fn rx_answer(&mut self, dev: usize, h: &Headers, payload: Vec<u8>) -> bool {
        let id = QpPath { dev, qpn: h.bth.dest_qp };
        let now = self.fabric.now_ns();
        let Some(t) = self.qp(id).map(|q| q.transport) else { return false };
        let Some(net) = self.devs.get_mut(dev).map(|d| &mut d.net) else { return false };
        let Some(f) = net.flights.get_mut(&id.qpn) else { return false };
        let psn = h.bth.psn;
        let op = h.bth.opcode;
        let oldest = f.oldest();
        let moved = if op == opcode::ATOMIC_ACKNOWLEDGE {
            // An atomic's answer: for the atomic of its PSN still waiting.
            let Some(i) = f.msgs.iter().position(|m| m.read && !m.settled() && m.psn == psn) else { return false };
            let ack = Headers { aeth: Some(Aeth::ack(0)), atomic_ack: None, ..*h };
            f.implied_acks(i, &Headers { bth: crate::packet::Bth { opcode: opcode::ACKNOWLEDGE, ..h.bth }, ..ack });
            if let Some(m) = f.msgs.get_mut(i) {
                m.answer = Some(Packet { headers: *h, payload: Vec::new() });
            }
            oldest == Some(i) || f.oldest() != oldest
        } else if op != opcode::ACKNOWLEDGE {
            // A READ response packet: in order, for a READ on the wire.
            let Some(i) = f.msgs.iter().position(|m| m.read && !m.settled() && m.holds(psn)) else { return false };
            let ack = Headers { aeth: Some(h.aeth.unwrap_or(Aeth::ack(0))), ..*h };
            f.implied_acks(i, &ack);
            let Some(m) = f.msgs.get_mut(i) else { return false };
            if psn != m.read_next {
                return false;
            }
            m.data.extend_from_slice(&payload);
            m.read_next = (m.read_next + 1) & PSN_MASK;
            if matches!(op, opcode::READ_RESPONSE_LAST | opcode::READ_RESPONSE_ONLY) {
                if m.data.len() as u64 != m.want {
                    m.failed = Some(BAD_RESPONSE);
                } else {
                    let mut headers = ack;
                    headers.bth.opcode = opcode::READ_RESPONSE_ONLY;
                    m.answer = Some(Packet { headers, payload: std::mem::take(&mut m.data) });
                }
            }
            oldest == Some(i) || f.oldest() != oldest
        } else {
            match h.aeth.map(|a| a.kind()) {
                Some(Ack::Ack(_)) => {
                    for m in f.msgs.iter_mut().filter(|m| !m.read && !m.settled()) {
                        if at_or_before(m.last_psn(), psn) && at_or_before(m.psn, psn) {
                            m.answer = Some(Packet { headers: *h, payload: Vec::new() });
                        }
                    }
                    f.oldest() != oldest
                }
                Some(Ack::Rnr(code)) => {
                    let Some(i) = f.msgs.iter().position(|m| !m.settled() && m.holds(psn)) else { return false };
                    f.implied_acks(i, &Headers { aeth: Some(Aeth::ack(0)), ..*h });
                    if t.rnr_retry != 7 && f.rnr >= t.rnr_retry {
                        if let Some(m) = f.msgs.get_mut(i) {
                            m.failed = Some(RNR_RETRY_EXCEEDED);
                        }
                        return true;
                    }
                    f.rnr = f.rnr.saturating_add(1);
                    f.rnr_wait = true;
                    f.deadline = now.saturating_add(rnr_delay_ns(code));
                    f.rewind(i);
                    return true;
                }
                Some(Ack::Nak(code)) => {
                    // A sequence error names the PSN the responder expects: everything before
                    // it arrived, everything from it goes again, and from a READ or atomic
                    // before it whose answer never came.
                    let Some(i) =
                        f.msgs.iter().position(|m| !m.settled() && (m.holds(psn) || at_or_before(psn, m.psn)))
                    else {
                        return false;
                    };
                    f.implied_acks(i, &Headers { aeth: Some(Aeth::ack(0)), ..*h });
                    if code != nak::PSN_SEQUENCE {
                        if let Some(m) = f.msgs.get_mut(i) {
                            m.answer = Some(Packet { headers: *h, payload: Vec::new() });
                        }
                        return true;
                    }
                    net.counters.packet_seq_err += 1;
                    if f.oldest() != oldest {
                        f.progress(&t, now);
                    }
                    // One retry at a time: a NAK for what was sent before it starts none.
                    if f.retrying {
                        return true;
                    }
                    let lost = f.lost_answer_before(psn);
                    if lost.is_some() {
                        net.counters.implied_nak_seq_err += 1;
                    }
                    f.retry_from(lost.unwrap_or(i), &t, now);
                    return true;
                }
                None => return false,
            }
        };
        if moved {
            f.progress(&t, now);
        }
        if !f.retrying
            && let Some(j) = f.lost_answer_before(psn)
        {
            net.counters.implied_nak_seq_err += 1;
            f.retry_from(j, &t, now);
        }
        true
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
    fn psns_compare_across_the_wrap() {
        assert!(at_or_before(5, 5));
        assert!(at_or_before(PSN_MASK, 2));
        assert!(!at_or_before(2, PSN_MASK));
        let m = Sent {
            pos: 0,
            bbs: 1,
            psn: PSN_MASK,
            span: 3,
            sent: true,
            read: false,
            want: 0,
            hit: None,
            data: Vec::new(),
            read_next: PSN_MASK,
            answer: None,
            failed: None,
        };
        assert_eq!(m.last_psn(), 1);
        assert!(m.holds(0) && m.holds(1) && !m.holds(2));
    }
}
