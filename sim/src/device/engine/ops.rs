//! The operations: RDMA WRITE, READ, SEND (±imm, ±invalidate), LOCAL_INV, UMR, SET_PSV.
//!
//! Every data operation takes one path. The requester translates its own keys and checks the
//! message length before anything is sent (a local error), then hands a [`Request`] to the
//! fabric ([`Engine::transmit`]), which delivers it to the responder QP its RTR path named.
//! The responder translates the remote key through its pipeline and places the data, and the
//! reply comes back the same way: an ACK, a READ response (the responder's side of the
//! message), or a NAK with its syndrome, with which the requester completes.

use mlx5_dv::prm::{cqe, mkc};
use mlx5_dv::{AccessFlags, QpState, Sge, event_type};

use super::pipeline::{Endpoint, SigHit};
use super::translate::{At, Fault, Need, field};
use super::{Engine, Step, syndrome};
use crate::device::Device;
use crate::device::firmware::QpPath;
use crate::device::wqe::{Cqe, SCATTER_TO_CQE_MAX, UmrWqe, Wqe, WqeKind};

/// A corruption to apply on the wire: (offset, xor).
type Corrupt = Option<(u64, u8)>;

/// A request as the requester hands it to the fabric. The payload is the requester's side of
/// the message, which the responder's pipeline reads as the bytes arrive.
enum Request<'p> {
    Write { rkey: u32, raddr: u64, imm: Option<u32>, payload: &'p Endpoint, corrupt: Corrupt },
    Read { rkey: u32, raddr: u64, len: u64 },
    Send { imm: Option<u32>, inv: Option<u32>, payload: &'p Endpoint, corrupt: Corrupt },
}

/// The responder's answer.
// Returned once per request; boxing the READ response would allocate per READ.
#[allow(clippy::large_enum_variant)]
enum Reply {
    /// Done; the signature error the payload met leaving the requester, if any.
    Ack(Option<SigHit>),
    /// A READ response: the responder's side of the message.
    ReadResponse(Endpoint),
    /// Refused with this syndrome (the responder's QP has gone to ERR).
    Nak(u8),
    /// The requester's own memory failed while the payload was read: a local error.
    Local(u8),
}

impl Engine<'_> {
    pub(super) fn at(&self, q: QpPath) -> At {
        At { dev: q.dev, pdn: self.qp(q).map_or(0, |q| q.pdn) }
    }

    /// The responder the fabric delivers this QP's requests to, if it can take one (RTR or
    /// RTS); `None` is a path that reaches no QP, where requests time out.
    pub(super) fn peer(&self, qp: QpPath) -> Option<QpPath> {
        let r = self.fabric.deliver(&self.qp(qp)?.remote?)?;
        matches!(self.qp(r)?.state, QpState::Rtr | QpState::Rts).then_some(r)
    }

    pub(super) fn peer_allows(&self, peer: QpPath, a: AccessFlags) -> bool {
        self.qp(peer).is_some_and(|p| p.access.contains(a))
    }

    fn rq_empty(&self, peer: QpPath) -> bool {
        self.qp(peer).is_some_and(|p| p.rq_cc == p.rq_pc)
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

    /// The responder detected an error: its QP goes to ERR (with an async event) once the
    /// requester has completed the WR, so a QP connected to itself completes it once.
    fn responder_error(&mut self, peer: QpPath, ev: Option<u32>) {
        self.pending.push((peer, ev));
    }

    /// NAK a request with a remote access error.
    fn remote_fault(&mut self, peer: QpPath) -> Reply {
        self.responder_error(peer, Some(event_type::QP_ACCESS_ERR));
        Reply::Nak(syndrome::REMOTE_ACCESS)
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

    fn responder_sig(&mut self, peer: QpPath, hit: Option<SigHit>) {
        let Some(cq) = self.qp(peer).map(|p| p.recv_cqn) else { return };
        if let Some(h) = hit {
            self.report_sig(peer.dev, h.index, h.err, h.domain, cq, peer.qpn);
        }
    }

    /// Execute the head WQE `w` of `qp`, a QP the caller has just found in RTS.
    pub(super) fn execute(&mut self, qp: QpPath, w: &Wqe, corrupt: Corrupt) -> Step {
        let Some(kind) = &w.kind else {
            return Step::Failed(syndrome::LOCAL_QP_OP);
        };
        match kind {
            WqeKind::Umr(u) => self.exec_umr(qp, w, u),
            WqeKind::Nop => Step::Done(Device::success(qp.qpn, w, 0)),
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
            WqeKind::Write { rkey, raddr, sge, imm } => {
                let (rkey, raddr, imm) = (*rkey, *raddr, *imm);
                if imm.is_none()
                    && corrupt.is_none()
                    && let Some(step) = self.direct_write(qp, w, rkey, raddr, sge)
                {
                    return step;
                }
                self.send_payload(qp, w, sge, imm.is_some(), |payload| Request::Write {
                    rkey,
                    raddr,
                    imm,
                    payload,
                    corrupt,
                })
            }
            WqeKind::Send { sge, imm, inv } => {
                let (imm, inv) = (*imm, *inv);
                self.send_payload(qp, w, sge, true, |payload| Request::Send { imm, inv, payload, corrupt })
            }
            WqeKind::Read { rkey, raddr, sge } => self.read(qp, w, (*rkey, *raddr), sge, corrupt),
        }
    }

    /// A WRITE or SEND: local checks, then the request through the fabric.
    fn send_payload(
        &mut self,
        qp: QpPath,
        w: &Wqe,
        sge: &[Sge],
        needs_recv: bool,
        request: impl FnOnce(&Endpoint) -> Request<'_>,
    ) -> Step {
        let at = self.at(qp);
        if self.wire_len(at.dev, sge) > self.max_msg(at.dev) {
            return Step::Failed(syndrome::LOCAL_LENGTH);
        }
        let payload = match self.local_endpoint(at, sge, Need::LocalRead, None) {
            Ok(p) => p,
            Err(f) => return self.local_fault(at.dev, f),
        };
        let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
        if needs_recv && self.rq_empty(peer) {
            return Step::Blocked;
        }
        if self.qp(qp).is_some_and(|q| q.drain_sigerr) && payload.parts.iter().any(|p| p.stage.is_some()) {
            match self.check_source(&payload) {
                Ok(Some(h)) if self.requester_sig(qp, h) => return Step::Held,
                Ok(_) => {}
                Err(f) => return Step::Failed(f.syndrome),
            }
        }
        match self.transmit(peer, request(&payload)) {
            Reply::Ack(hit) => {
                if let Some(h) = hit {
                    self.requester_sig(qp, h);
                }
                Step::Done(Device::success(qp.qpn, w, 0))
            }
            Reply::Nak(s) | Reply::Local(s) => Step::Failed(s),
            Reply::ReadResponse(_) => Step::Failed(syndrome::LOCAL_QP_OP),
        }
    }

    /// RDMA READ: the READ response streams from the responder's pipeline into ours.
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
        let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
        let source = match self.transmit(peer, Request::Read { rkey, raddr, len: want }) {
            Reply::ReadResponse(ep) => ep,
            Reply::Nak(s) | Reply::Local(s) => return Step::Failed(s),
            Reply::Ack(_) => return Step::Failed(syndrome::LOCAL_QP_OP),
        };
        let (rhit, hit) = match self.stream(&source, &local, corrupt) {
            Ok(h) => h,
            Err(f) if f.at_dst => return Step::Failed(syndrome::LOCAL_PROT),
            Err(_) => {
                self.responder_error(peer, Some(event_type::QP_ACCESS_ERR));
                return Step::Failed(syndrome::REMOTE_ACCESS);
            }
        };
        self.responder_sig(peer, rhit);
        if let Some(h) = hit {
            self.requester_sig(qp, h);
        }
        let data_len: u64 = sge.iter().map(|s| u64::from(s.length)).sum();
        Step::Done(Device::success(qp.qpn, w, u32::try_from(data_len).unwrap_or(u32::MAX)))
    }

    /// The fabric: deliver a request to the responder QP and return its reply. In one process
    /// this is immediate and deterministic; a cross-process fabric goes here.
    fn transmit(&mut self, peer: QpPath, req: Request<'_>) -> Reply {
        match req {
            Request::Write { rkey, raddr, imm, payload, corrupt } => {
                self.respond_write(peer, (rkey, raddr), imm, payload, corrupt)
            }
            Request::Read { rkey, raddr, len } => self.respond_read(peer, rkey, raddr, len),
            Request::Send { imm, inv, payload, corrupt } => self.respond_send(peer, imm, inv, payload, corrupt),
        }
    }

    /// The responder's side of an RDMA WRITE.
    fn respond_write(
        &mut self,
        peer: QpPath,
        (rkey, raddr): (u32, u64),
        imm: Option<u32>,
        payload: &Endpoint,
        corrupt: Corrupt,
    ) -> Reply {
        let pat = self.at(peer);
        let Some(len) = payload.wire_len() else { return self.remote_fault(peer) };
        if !self.peer_allows(peer, AccessFlags::REMOTE_WRITE) {
            return self.remote_fault(peer);
        }
        let Ok(target) = self.remote_endpoint(pat, rkey, raddr, len, Need::RemoteWrite) else {
            return self.remote_fault(peer);
        };
        let (hit, rhit) = match self.stream(payload, &target, corrupt) {
            Ok(h) => h,
            Err(f) if f.at_dst => return self.remote_fault(peer),
            Err(_) => return Reply::Local(syndrome::LOCAL_PROT),
        };
        self.responder_sig(peer, rhit);
        if let Some(imm) = imm {
            self.complete_recv(peer, u32::try_from(len).unwrap_or(u32::MAX), imm);
        }
        Reply::Ack(hit)
    }

    /// The responder's side of an RDMA READ: access checked, its side of the message.
    fn respond_read(&mut self, peer: QpPath, rkey: u32, raddr: u64, len: u64) -> Reply {
        let pat = self.at(peer);
        if !self.peer_allows(peer, AccessFlags::REMOTE_READ) {
            return self.remote_fault(peer);
        }
        match self.remote_endpoint(pat, rkey, raddr, len, Need::RemoteRead) {
            Ok(ep) if self.mapped(&ep) => Reply::ReadResponse(ep),
            _ => self.remote_fault(peer),
        }
    }

    /// SEND_WITH_INV at the responder: the key must name an mkey of the responder's PD that
    /// allows remote invalidation.
    fn may_invalidate(&self, peer: QpPath, key: u32) -> bool {
        let pdn = self.at(peer).pdn;
        let Some(m) = self.devs.get(peer.dev).and_then(|d| d.fw.mkey(key >> 8)) else { return false };
        field(m, mkc::EN_RINVAL) != 0
            && field(m, mkc::PD) == u64::from(pdn)
            && field(m, mkc::MKEY_7_0) == u64::from(key & 0xff)
    }

    /// The responder's side of a SEND: the next receive WQE takes the message; an
    /// invalidation takes effect once the data is placed.
    fn respond_send(
        &mut self,
        peer: QpPath,
        imm: Option<u32>,
        inv: Option<u32>,
        payload: &Endpoint,
        corrupt: Corrupt,
    ) -> Reply {
        if let Some(key) = inv
            && !self.may_invalidate(peer, key)
        {
            self.responder_error(peer, Some(event_type::QP_REQ_ERR));
            return Reply::Nak(syndrome::REMOTE_INVAL_REQ);
        }
        let pat = self.at(peer);
        let Some((rcq, scatter_to_cqe)) = self.qp(peer).map(|p| (p.recv_cqn, p.scatter_to_cqe)) else {
            return Reply::Nak(syndrome::TRANSPORT_RETRY);
        };
        let Some(r) = self.pop_recv(peer) else { return Reply::Nak(syndrome::TRANSPORT_RETRY) };
        let fail = |e: &mut Self, s: u8| {
            e.recv_error(peer, r.index, s);
            e.responder_error(peer, None);
        };
        let Some(len) = payload.wire_len() else {
            fail(self, syndrome::LOCAL_LENGTH);
            return Reply::Nak(syndrome::REMOTE_INVAL_REQ);
        };
        if len > self.wire_len(peer.dev, &r.sge) {
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
        let (hit, rhit) = if scatter_to_cqe && len <= SCATTER_TO_CQE_MAX as u64 {
            // The device puts small payloads in the CQE; the provider copies them at poll time.
            let Ok((mut data, hit)) = self.gather(payload) else { return Reply::Local(syndrome::LOCAL_PROT) };
            if let Some((off, xor)) = corrupt
                && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
            {
                *b ^= xor;
            }
            inline = Some(data.clone());
            self.give_scratch(payload.dev, data);
            (hit, None)
        } else {
            // A receive through a signature mkey takes one SGE.
            let staged = r.sge.len() > 1 && r.sge.iter().any(|s| self.has_stages(peer.dev, s.lkey));
            let target = if staged { None } else { self.local_endpoint(pat, &r.sge, Need::LocalWrite, Some(len)).ok() };
            let Some(target) = target else {
                fail(self, syndrome::LOCAL_PROT);
                return Reply::Nak(syndrome::REMOTE_OP);
            };
            match self.stream(payload, &target, corrupt) {
                Ok(h) => h,
                Err(f) if f.at_dst => {
                    fail(self, syndrome::LOCAL_PROT);
                    return Reply::Nak(syndrome::REMOTE_OP);
                }
                Err(_) => return Reply::Local(syndrome::LOCAL_PROT),
            }
        };
        if let Some(key) = inv
            && let Some(m) = self.dev(peer.dev).and_then(|d| d.fw.mkey_mut(key >> 8))
        {
            let _ = mkc::FREE.set(&mut m.mkc, 1);
        }
        if let Some(h) = rhit {
            self.report_sig(peer.dev, h.index, h.err, h.domain, rcq, peer.qpn);
        }
        let cqe = Cqe::Resp { qpn: peer.qpn, wqe_counter: r.index, opcode, byte_cnt, imm, inline };
        self.push_cqe(peer.dev, rcq, cqe);
        Reply::Ack(hit)
    }

    /// RDMA WRITE with immediate consumes a receive WQE without scattering into it.
    fn complete_recv(&mut self, peer: QpPath, len: u32, imm: u32) {
        let Some(rcq) = self.qp(peer).map(|p| p.recv_cqn) else { return };
        let Some(r) = self.pop_recv(peer) else { return };
        let cqe = Cqe::Resp {
            qpn: peer.qpn,
            wqe_counter: r.index,
            opcode: cqe::opcode::RESP_WR_IMM,
            byte_cnt: len,
            imm,
            inline: None,
        };
        self.push_cqe(peer.dev, rcq, cqe);
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
            let Some(cfg) = crate::device::wqe::crypto_of_bsf(c, multi_block) else {
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
