//! The operations: RDMA WRITE, READ, SEND (±imm, ±invalidate), the two atomics, LOCAL_INV,
//! UMR, SET_PSV.
//!
//! Every data operation takes one path. The requester translates its own keys and checks the
//! message length before anything is sent (a local error), turns the WQE into a request
//! packet and hands it to the fabric ([`Engine::transmit`]), which delivers it to the device
//! its RTR path names. That device's responder ([`super::responder`]) answers with an ACK, a
//! READ response or a NAK, and the requester completes the WQE by the answer.

use mlx5_dv::prm::mkc;
use mlx5_dv::{AccessFlags, QpState, Sge, event_type};

use super::pipeline::{Endpoint, Part, SigHit};
use super::remote::Exchange;
use super::responder::{Corrupt, Payload, Pulled, Request, Response, syndrome_of_nak};
use super::translate::{At, Fault, Need, Xlat, field};
use super::{Engine, Step, syndrome};
use crate::device::Device;
use crate::device::contract::{UmrWqe, Wqe, WqeKind};
use crate::device::firmware::PSN_MASK;
use crate::fabric::QpPath;
use crate::host::Dma;
use crate::packet::{Ack, AtomicEth, Bth, Headers, Packet, Reth, nak, opcode};

/// Where a request goes.
#[derive(Clone, Copy)]
enum To {
    /// To a device of this process.
    Here(usize),
    /// To a peer on the network.
    Peer(std::net::Ipv4Addr),
}

/// Where a WRITE or SEND takes its payload from.
#[derive(Clone, Copy)]
enum Source<'w> {
    /// Its gather list, through the local keys.
    Gather(&'w [Sge]),
    /// Inline data: `len` bytes at byte `at` of the WQE in the send queue.
    Inline { at: u64, len: u64 },
}

/// Where inline data starts in a WQE: after the control segment, the remote address segment
/// of an RDMA WQE, and the inline segment's byte count.
fn inline_at(rdma: bool) -> u64 {
    16 + if rdma { 16 } else { 0 } + 4
}

impl Engine<'_> {
    pub(super) fn at(&self, q: QpPath) -> At {
        At { dev: q.dev, pdn: self.qp(q).map_or(0, |q| q.pdn), qpn: q.qpn }
    }

    /// Where the fabric delivers this QP's requests: the device its RTR path's address
    /// names, and the QP number there; `None` for an address no port has.
    pub(super) fn route(&self, qp: QpPath) -> Option<QpPath> {
        self.fabric.deliver(&self.qp(qp)?.remote?)
    }

    /// The packets a message of `len` bytes takes on `qp`'s path: one per path MTU, at least
    /// one (`enum ibv_mtu`: 1 = 256 bytes … 5 = 4096).
    pub(super) fn packets(&self, qp: QpPath, len: u64) -> u32 {
        let n = len.div_ceil(self.mtu_bytes(qp)).max(1);
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The bytes of `qp`'s path MTU (4096 without a path).
    pub(super) fn mtu_bytes(&self, qp: QpPath) -> u64 {
        128u64 << self.qp(qp).and_then(|q| q.remote).map_or(5, |r| r.path_mtu).clamp(1, 5)
    }

    /// The next PSN the requester `qp` sends.
    pub(super) fn sq_psn(&self, qp: QpPath) -> u32 {
        self.qp(qp).map_or(0, |q| q.transport.sq_psn)
    }

    /// A message of `n` packets left `qp` and was answered.
    pub(super) fn sent(&mut self, qp: QpPath, n: u32) {
        // On the network PSNs move as messages are sent.
        if self.in_flight(qp) {
            return;
        }
        if let Some(t) = self.dev(qp.dev).and_then(|d| d.fw.transport_mut(qp.qpn)) {
            t.sq_psn = t.sq_psn.wrapping_add(n) & PSN_MASK;
        }
    }

    /// The request packet for `qp`'s next message and where it goes: the device here the
    /// fabric routes it to, or the peer on the network; `None` if the path's address reaches
    /// no port.
    fn request<'p>(
        &self,
        qp: QpPath,
        h: Headers,
        payload: Payload<'p>,
        span: u32,
        corrupt: Corrupt,
    ) -> Option<(To, Request<'p>)> {
        let (to, dest_qp) = match self.route(qp) {
            Some(to) => (To::Here(to.dev), to.qpn),
            None => (To::Peer(self.remote_peer(qp)?), self.qp(qp)?.remote?.dest_qp_num),
        };
        let mut headers = h;
        headers.bth.dest_qp = dest_qp;
        headers.bth.psn = self.sq_psn(qp);
        headers.bth.ack_req = true;
        headers.bth.pkey = 0xffff;
        headers.xrc = self.xrc_srqn(qp);
        Some((to, Request { packet: Packet { headers, payload }, from: qp, span, corrupt }))
    }

    /// Send a request where it goes: the answer, or the step that ends the WQE for now (the
    /// QP waits on a peer's answer, or its retries are spent).
    fn send(&mut self, qp: QpPath, to: To, req: &Request<'_>) -> Result<Response, Step> {
        match to {
            To::Here(dev) => Ok(self.transmit(dev, req)),
            // UC: sent once, answered by nothing.
            To::Peer(peer) if self.is_unreliable(qp) => Ok(self.send_uc(qp, peer, req)),
            To::Peer(peer) => match self.exchange(qp, peer, req) {
                Exchange::Answer(r) => Ok(*r),
                Exchange::Waiting => Err(Step::Blocked),
                Exchange::Failed(s) => Err(Step::Failed(s)),
            },
        }
    }

    /// A requester's own translation fault: a crypto failure completes with the profile's
    /// crypto error CQE, others with their syndrome.
    fn local_fault(&self, dev: usize, f: Fault) -> Step {
        match self.devs.get(dev) {
            Some(d) if f.is_crypto() => Step::FailedWith(d.crypto_err.0, d.crypto_err.1),
            _ => Step::Failed(f.syndrome),
        }
    }

    pub(super) fn max_msg(&self, dev: usize) -> u64 {
        self.devs.get(dev).map_or(0, |d| u64::from(d.max_msg_sz))
    }

    /// A requester-side signature error: report it; a SIG_PIPELINING QP drains to SQD.
    fn requester_sig(&mut self, qp: QpPath, hit: SigHit) -> bool {
        let Some((cq, drain)) = self.qp(qp).map(|q| (q.send_cqn, q.drain_sigerr)) else { return false };
        if self.report_sig(hit.dev, hit.index, hit.err, hit.domain, cq, qp.qpn) && drain {
            let Some(d) = self.dev(hit.dev) else { return false };
            if let Some(q) = d.fw.qp_mut(qp.qpn) {
                q.state = QpState::Sqd;
            }
            d.qp_event(qp.qpn, event_type::SQ_DRAINED);
            return true;
        }
        false
    }

    /// Execute the head WQE `w` of `qp`, a QP the caller has just found in RTS.
    pub(super) fn execute(&mut self, qp: QpPath, w: &Wqe, corrupt: Corrupt) -> Step {
        let Some(kind) = &w.kind else {
            // A DCI's WQE may decode whole only without its datagram segment.
            return self.dci(qp, w, corrupt).unwrap_or(Step::Failed(syndrome::LOCAL_QP_OP));
        };
        if let Some(step) = self.unreliable(qp, w, corrupt) {
            return step;
        }
        match kind {
            WqeKind::Umr(u) => self.exec_umr(qp, w, u),
            WqeKind::BindMw(b) => self.exec_bind_mw(qp, w, b),
            WqeKind::Nop => Step::Done(Device::success(qp.qpn, w, 0)),
            WqeKind::Memcpy { src, dest, .. } => self.dma_copy(qp, w, *src, *dest),
            WqeKind::SetPsv { psv, .. } => {
                if let Some(p) = self.dev(qp.dev).and_then(|d| d.fw.psv_mut(*psv)) {
                    p.armed = true;
                }
                Step::Done(Device::success(qp.qpn, w, 0))
            }
            WqeKind::LocalInv { key } => {
                let ok =
                    self.dev(qp.dev).and_then(|d| d.fw.mkey_mut(key >> 8)).filter(|m| field(m, mkc::UMR_EN) != 0).map(
                        |m| {
                            let _ = mkc::FREE.set(&mut m.mkc, 1);
                            let _ = mkc::MKEY_7_0.set(&mut m.mkc, 0);
                        },
                    );
                match ok {
                    Some(()) => Step::Done(Device::success(qp.qpn, w, 0)),
                    None => Step::Failed(syndrome::LOCAL_PROT),
                }
            }
            WqeKind::Write { rkey, raddr, sge, imm, inline } => {
                let (rkey, raddr, imm) = (*rkey, *raddr, *imm);
                if imm.is_none()
                    && inline.is_none()
                    && corrupt.is_none()
                    && self.dc_key.is_none()
                    && let Some(step) = self.direct_write(qp, w, rkey, raddr, sge)
                {
                    return step;
                }
                let src = match inline {
                    Some(b) => {
                        Source::Inline { at: self.inline_start(qp, true) + self.dc_shift(), len: b.len() as u64 }
                    }
                    None => Source::Gather(sge),
                };
                let op = if imm.is_some() { opcode::WRITE_ONLY_IMM } else { opcode::WRITE_ONLY };
                let h = Headers {
                    bth: Bth { opcode: op, se: w.solicited, ..Bth::default() },
                    reth: Some(Reth { va: raddr, rkey, dma_len: 0 }),
                    imm,
                    ..Headers::default()
                };
                self.send_payload(qp, w, src, h, corrupt)
            }
            WqeKind::Send { sge, imm, inv, inline } => {
                let (imm, inv) = (*imm, *inv);
                let src = match inline {
                    Some(b) => {
                        Source::Inline { at: self.inline_start(qp, false) + self.dc_shift(), len: b.len() as u64 }
                    }
                    None => Source::Gather(sge),
                };
                let op = match (inv, imm) {
                    (Some(_), _) => opcode::SEND_ONLY_INV,
                    (None, Some(_)) => opcode::SEND_ONLY_IMM,
                    (None, None) => opcode::SEND_ONLY,
                };
                let h = Headers {
                    bth: Bth { opcode: op, se: w.solicited, ..Bth::default() },
                    imm: imm.filter(|_| inv.is_none()),
                    ieth: inv,
                    ..Headers::default()
                };
                self.send_payload(qp, w, src, h, corrupt)
            }
            // Inline data where the READ response should be scattered: nowhere to place it.
            WqeKind::Read { inline: Some(_), .. } => Step::Failed(syndrome::LOCAL_QP_OP),
            WqeKind::Read { rkey, raddr, sge, inline: None } => self.read(qp, w, (*rkey, *raddr), sge, corrupt),
            WqeKind::Atomic { rkey, raddr, swap_add, compare, sge } => {
                let a = AtomicEth { va: *raddr, rkey: *rkey, swap_add: *swap_add, compare: compare.unwrap_or(0) };
                self.atomic(qp, w, a, compare.is_some(), sge, corrupt)
            }
        }
    }

    /// An atomic: one CmpSwap or FetchAdd request; the ATOMIC Acknowledge's original value
    /// lands in the scatter list in host byte order (mlx5_core sets the device's 8-byte
    /// atomics to host endianness). A scatter list shorter than 8 bytes is a local length
    /// error.
    fn atomic(&mut self, qp: QpPath, w: &Wqe, a: AtomicEth, cmp: bool, sge: &[Sge], corrupt: Corrupt) -> Step {
        const LEN: u64 = 8;
        let at = self.at(qp);
        if self.wire_len(at.dev, sge) < LEN {
            return Step::Failed(syndrome::LOCAL_LENGTH);
        }
        let local = match self.local_endpoint(at, sge, Need::LocalWrite, Some(LEN)) {
            Ok(l) => l,
            Err(f) => return self.local_fault(at.dev, f),
        };
        let op = if cmp { opcode::COMPARE_SWAP } else { opcode::FETCH_ADD };
        let h = Headers { bth: Bth { opcode: op, ..Bth::default() }, atomic: Some(a), ..Headers::default() };
        let Some((to, req)) = self.request(qp, h, Payload::None, 1, None) else {
            return Step::Failed(syndrome::TRANSPORT_RETRY);
        };
        let resp = match self.send(qp, to, &req) {
            Ok(r) => r,
            Err(step) => return step,
        };
        let original = match (resp.ack_kind(), &resp.packet) {
            (Some(Ack::Ack(_)), Some(p)) if p.headers.bth.opcode == opcode::ATOMIC_ACKNOWLEDGE => {
                p.headers.atomic_ack.unwrap_or(0)
            }
            (Some(Ack::Nak(c)), _) if c != nak::PSN_SEQUENCE => {
                self.sent(qp, 1);
                return Step::Failed(syndrome_of_nak(c));
            }
            _ => return Step::Failed(syndrome::TRANSPORT_RETRY),
        };
        self.sent(qp, 1);
        let mut data = original.to_ne_bytes();
        if let Some((off, xor)) = corrupt
            && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
        {
            *b ^= xor;
        }
        match self.scatter(&data, &local) {
            Ok(hit) => {
                if let Some(h) = hit {
                    self.requester_sig(qp, h);
                }
                Step::Done(Device::success(qp.qpn, w, LEN as u32))
            }
            Err(_) => Step::Failed(syndrome::LOCAL_PROT),
        }
    }

    /// The bytes of the head WQE of `qp` from byte `at` on, in the send queue in host
    /// memory (across the ring's end): where the device reads inline data.
    fn inline_endpoint(&self, qp: QpPath, at: u64, len: u64) -> Option<Endpoint> {
        let q = self.qp(qp)?;
        let (ring, base) = (q.sq.len() as u64, q.sq.addr);
        if ring == 0 {
            return None;
        }
        let pos = self.cursor.map_or(q.sq_cc, |(pos, _)| pos);
        let head = u64::from(pos & q.sq.wqe_cnt.wrapping_sub(1)) * u64::from(q.sq.stride);
        let mut mem = Xlat::default();
        let (mut off, mut left) = ((head + at) % ring, len);
        while left > 0 {
            let n = left.min(ring - off);
            mem.ranges.push((base.wrapping_add(off), n));
            (off, left) = (0, left - n);
        }
        let mut ep = Endpoint { dev: qp.dev, parts: Default::default() };
        ep.parts.push(Part { mem, wire: len, ..Part::default() });
        Some(ep)
    }

    /// An XRC initiator's request names the SRQ its WQE's XRC segment holds (the first word
    /// after the control segment of the WQE being executed); `None` on other QPs.
    fn xrc_srqn(&self, qp: QpPath) -> Option<u32> {
        let q = self.qp(qp).filter(|q| q.st == mlx5_dv::prm::queues::st::XRC && q.xrcd == 0)?;
        let pos = self.cursor.map_or(q.sq_cc, |(pos, _)| pos);
        let b = self.host.read(q.sq.slot(pos).checked_add(16)?, 4)?;
        Some(u32::from_be_bytes(b.try_into().ok()?) & 0xff_ffff)
    }

    /// Where inline data starts in the WQE being executed: [`inline_at`], after the XRC
    /// segment on an XRC initiator.
    fn inline_start(&self, qp: QpPath, rdma: bool) -> u64 {
        let xrc = self.qp(qp).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::XRC);
        inline_at(rdma) + if xrc { 16 } else { 0 }
    }

    /// A WRITE or SEND: local checks, then the request through the fabric, completed by the
    /// answer.
    fn send_payload(&mut self, qp: QpPath, w: &Wqe, src: Source<'_>, h: Headers, corrupt: Corrupt) -> Step {
        let at = self.at(qp);
        let payload = match src {
            Source::Gather(sge) => {
                if self.wire_len(at.dev, sge) > self.max_msg(at.dev) {
                    return Step::Failed(syndrome::LOCAL_LENGTH);
                }
                match self.local_endpoint(at, sge, Need::LocalRead, None) {
                    Ok(p) => p,
                    // Item 84: the keys were checked and the data gathered when the request
                    // left; an mkey invalidated since (by this very SEND_WITH_INV at a QP
                    // connected to itself) does not fail the WQE collecting its answer.
                    Err(_) if self.already_sent(qp) => Endpoint { dev: at.dev, parts: Default::default() },
                    Err(f) => return self.local_fault(at.dev, f),
                }
            }
            Source::Inline { at: off, len } => match self.inline_endpoint(qp, off, len) {
                Some(p) => p,
                None => return Step::Failed(syndrome::LOCAL_QP_OP),
            },
        };
        // A SIG_PIPELINING QP learns of a bad source before the transfer; it reports it (and
        // drains to SQD) once the responder has taken the message, which still goes out.
        let mut early = None;
        if self.qp(qp).is_some_and(|q| q.drain_sigerr) && payload.parts.iter().any(|p| p.stage.is_some()) {
            match self.check_source(&payload) {
                Ok(h) => early = h,
                Err(f) => return Step::Failed(f.syndrome),
            }
        }
        let len = payload.wire_len();
        let n = self.packets(qp, len.unwrap_or(0));
        let mut h = h;
        if let Some(r) = &mut h.reth {
            r.dma_len = len.and_then(|l| u32::try_from(l).ok()).unwrap_or(u32::MAX);
        }
        let Some((to, req)) = self.request(qp, h, Payload::Dma(&payload), n, corrupt) else {
            return Step::Failed(syndrome::TRANSPORT_RETRY);
        };
        let resp = match self.send(qp, to, &req) {
            Ok(r) => r,
            Err(step) => return step,
        };
        if self.is_unreliable(qp) {
            // UC completes once its packets have left, whatever became of them.
            self.sent(qp, n);
            return match resp.pulled {
                Pulled::Failed => Step::Failed(syndrome::LOCAL_PROT),
                Pulled::Yes(hit) => {
                    if let Some(h) = hit.or(early) {
                        self.requester_sig(qp, h);
                    }
                    Step::Done(Device::success(qp.qpn, w, 0))
                }
                Pulled::No => Step::Done(Device::success(qp.qpn, w, 0)),
            };
        }
        let ack = resp.ack_kind();
        let taken = match (ack, resp.pulled) {
            (_, Pulled::Failed) => true,
            (None | Some(Ack::Nak(nak::PSN_SEQUENCE)), _) => return Step::Failed(syndrome::TRANSPORT_RETRY),
            (Some(Ack::Rnr(_)), _) => return Step::Blocked,
            // A duplicate: acknowledged again, not executed.
            (Some(Ack::Ack(_)), Pulled::No) => false,
            _ => true,
        };
        self.sent(qp, n);
        if !taken {
            return Step::Done(Device::success(qp.qpn, w, 0));
        }
        let reported = early.is_some();
        if let Some(hit) = early {
            self.requester_sig(qp, hit);
        }
        match (ack, resp.pulled) {
            (_, Pulled::Failed) => Step::Failed(syndrome::LOCAL_PROT),
            (Some(Ack::Nak(code)), _) => Step::Failed(syndrome_of_nak(code)),
            (_, Pulled::Yes(hit)) => {
                if let Some(h) = hit.filter(|_| !reported) {
                    self.requester_sig(qp, h);
                }
                Step::Done(Device::success(qp.qpn, w, 0))
            }
            _ => Step::Failed(syndrome::LOCAL_QP_OP),
        }
    }

    /// RDMA READ: a READ request; the READ response's data is placed through our pipelines.
    fn read(&mut self, qp: QpPath, w: &Wqe, (rkey, raddr): (u32, u64), sge: &[Sge], corrupt: Corrupt) -> Step {
        let at = self.at(qp);
        let want = self.wire_len(at.dev, sge);
        if want > self.max_msg(at.dev) {
            return Step::Failed(syndrome::LOCAL_LENGTH);
        }
        let local = match self.local_endpoint(at, sge, Need::LocalWrite, None) {
            Ok(l) => l,
            Err(f) => return self.local_fault(at.dev, f),
        };
        let n = self.packets(qp, want);
        let dma_len = u32::try_from(want).unwrap_or(u32::MAX);
        let h = Headers {
            bth: Bth { opcode: opcode::READ_REQUEST, ..Bth::default() },
            reth: Some(Reth { va: raddr, rkey, dma_len }),
            ..Headers::default()
        };
        let Some((to, req)) = self.request(qp, h, Payload::None, n, None) else {
            return Step::Failed(syndrome::TRANSPORT_RETRY);
        };
        let resp = match self.send(qp, to, &req) {
            Ok(r) => r,
            Err(step) => return step,
        };
        let (ack, packet) = (resp.ack_kind(), resp.packet);
        let mut data = match (ack, packet) {
            (Some(Ack::Ack(_)), Some(p)) => p.payload,
            (Some(Ack::Nak(c)), _) if c != nak::PSN_SEQUENCE => {
                self.sent(qp, n);
                return Step::Failed(syndrome_of_nak(c));
            }
            _ => return Step::Failed(syndrome::TRANSPORT_RETRY),
        };
        self.sent(qp, n);
        if let Some((off, xor)) = corrupt
            && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
        {
            *b ^= xor;
        }
        let placed = self.scatter(&data, &local);
        self.give_scratch(qp.dev, data);
        let Ok(hit) = placed else { return Step::Failed(syndrome::LOCAL_PROT) };
        if let Some(h) = hit {
            self.requester_sig(qp, h);
        }
        let data_len: u64 = sge.iter().map(|s| u64::from(s.length)).sum();
        Step::Done(Device::success(qp.qpn, w, u32::try_from(data_len).unwrap_or(u32::MAX)))
    }

    /// A DMA copy on this device: the source read and the destination written through keys
    /// of the QP's own PD, with local read and local write (a key of another PD, or without
    /// the access, is a local protection error). A byte count of 0 is 2 GiB.
    fn dma_copy(&mut self, qp: QpPath, w: &Wqe, src: Sge, dest: Sge) -> Step {
        let at = self.at(qp);
        let len = if src.length == 0 { 1 << 31 } else { src.length };
        let (src, dest) = (Sge { length: len, ..src }, Sge { length: len, ..dest });
        let from = match self.local_endpoint(at, &[src], Need::LocalRead, None) {
            Ok(e) => e,
            Err(f) => return self.local_fault(at.dev, f),
        };
        let to = match self.local_endpoint(at, &[dest], Need::LocalWrite, None) {
            Ok(e) => e,
            Err(f) => return self.local_fault(at.dev, f),
        };
        match self.stream(&from, &to, None) {
            Ok(_) => Step::Done(Device::success(qp.qpn, w, 0)),
            Err(_) => Step::Failed(syndrome::LOCAL_PROT),
        }
    }

    /// Apply a UMR WQE to its mkey: valid, new tag, then the masked fields.
    fn exec_umr(&mut self, qp: QpPath, w: &Wqe, u: &UmrWqe) -> Step {
        let multi_block = self.dev(qp.dev).is_some_and(|d| d.fw.crypto_multi_block());
        let Some(m) = self.dev(qp.dev).and_then(|d| d.fw.mkey_mut(u.index)) else {
            return Step::Failed(syndrome::LOCAL_PROT);
        };
        if field(m, mkc::UMR_EN) == 0 {
            return Step::Failed(syndrome::LOCAL_PROT);
        }
        let _ = mkc::FREE.set(&mut m.mkc, 0);
        let _ = mkc::MKEY_7_0.set(&mut m.mkc, u64::from(u.tag));
        if let Some(a) = u.access {
            let bit = |f: AccessFlags| u64::from(a & f.bits() != 0);
            let _ = mkc::LW.set(&mut m.mkc, bit(AccessFlags::LOCAL_WRITE));
            let _ = mkc::RW.set(&mut m.mkc, bit(AccessFlags::REMOTE_WRITE));
            let _ = mkc::RR.set(&mut m.mkc, bit(AccessFlags::REMOTE_READ));
            let _ = mkc::A.set(&mut m.mkc, bit(AccessFlags::REMOTE_ATOMIC));
        }
        if let Some((len, xlat)) = &u.layout {
            let _ = mkc::START_ADDR.set(&mut m.mkc, 0);
            let _ = mkc::LEN.set(&mut m.mkc, *len);
            m.xlat = xlat.clone();
        }
        if u.bsf_disable {
            let _ = mkc::BSF_EN.set(&mut m.mkc, 0);
            m.sig = None;
        }
        if let Some(c) = &u.crypto_bsf {
            let Some(cfg) = crate::device::contract::crypto_of_bsf(c, multi_block) else {
                return Step::Failed(syndrome::LOCAL_QP_OP);
            };
            let _ = mkc::BSF_EN.set(&mut m.mkc, 1);
            m.crypto = Some(cfg);
        }
        if let Some(bsf) = u.sig_bsf {
            let _ = mkc::BSF_EN.set(&mut m.mkc, 1);
            m.sig = Some(bsf);
            // Armed by the SET_PSV WQEs that follow.
            if let Some(d) = self.dev(qp.dev) {
                d.fw.set_sig_armed(u.index, false);
            }
        }
        Step::Done(Device::success(qp.qpn, w, 0))
    }
}
