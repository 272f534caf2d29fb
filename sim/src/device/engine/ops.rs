//! The operations: RDMA WRITE, READ, SEND (±imm, ±invalidate), LOCAL_INV, UMR, SET_PSV, each
//! through the pipelines of the mkeys it names. The responder is the QP the requester's RTR
//! path named, found through the fabric when the path was set.

use mlx5_dv::prm::mkc;
use mlx5_dv::{AccessFlags, QpState, Sge, Wc, WcFlags, event_type, wc_flags, wc_opcode, wc_status};

use super::pipeline::{SigHit, block_size, strides};
use super::translate::{At, Need, field};
use super::{Engine, Step, syndrome};
use crate::device::Device;
use crate::device::firmware::QpPath;
use crate::device::wqe::{Cqe, InlineScatter, UmrWqe, Wqe, WqeKind};
use crate::host::Dma;
use crate::signature::Direction;

/// Scatter-to-CQE carries at most this many bytes in a 64-byte CQE.
const SCATTER_TO_CQE_MAX: usize = 32;

/// A corruption to apply on the wire: (offset, xor).
type Corrupt = Option<(u64, u8)>;

/// The responder side of an RDMA operation: the peer QP and the remote key and address.
#[derive(Debug, Clone, Copy)]
struct Remote {
    peer: QpPath,
    rkey: u32,
    raddr: u64,
}

fn flip(data: &mut [u8], c: Corrupt) {
    if let Some((off, xor)) = c
        && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
    {
        *b ^= xor;
    }
}

impl Engine<'_> {
    fn at(&self, q: QpPath) -> At {
        At { dev: q.dev, pdn: self.qp(q).map_or(0, |q| q.pdn) }
    }

    /// The peer QP, if it can take a request (RTR or RTS).
    fn peer(&self, qp: QpPath) -> Option<QpPath> {
        let r = self.qp(qp)?.remote?;
        matches!(self.qp(r)?.state, QpState::Rtr | QpState::Rts).then_some(r)
    }

    fn peer_allows(&self, peer: QpPath, a: AccessFlags) -> bool {
        self.qp(peer).is_some_and(|p| p.access.contains(a))
    }

    fn rq_empty(&self, peer: QpPath) -> bool {
        self.qp(peer).is_some_and(|p| p.rq.is_empty())
    }

    /// The responder detected an error: its QP goes to ERR (with an async event).
    fn responder_error(&mut self, peer: QpPath, ev: u32) {
        if let Some(d) = self.dev(peer.dev) {
            d.qp_event(peer.qpn, ev);
            d.flush_qp(peer.qpn);
        }
    }

    fn remote_fault(&mut self, peer: QpPath) -> Step {
        self.responder_error(peer, event_type::QP_ACCESS_ERR);
        Step::Failed(syndrome::REMOTE_ACCESS)
    }

    /// A requester-side signature error: report it; a SIG_PIPELINING QP drains to SQD.
    fn requester_sig(&mut self, qp: QpPath, hit: SigHit) -> bool {
        let Some((cq, drain)) = self.qp(qp).map(|q| (q.send_cqn, q.drain_sigerr)) else { return false };
        let Some(d) = self.dev(hit.dev) else { return false };
        if d.report_sig(hit.index, hit.err, hit.domain, cq, qp.qpn) && drain {
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
        if let (Some(h), Some(d)) = (hit, self.dev(peer.dev)) {
            d.report_sig(h.index, h.err, h.domain, cq, peer.qpn);
        }
    }

    pub(super) fn execute(&mut self, qp: QpPath, w: &Wqe, corrupt: Corrupt) -> Step {
        if self.qp(qp).is_none() {
            return Step::Failed(syndrome::LOCAL_QP_OP);
        }
        let at = self.at(qp);
        match &w.kind {
            WqeKind::Umr(u) => self.exec_umr(qp, w, u),
            WqeKind::Nop => Step::Done(Device::success(qp.qpn, w, 0)),
            WqeKind::SetPsv { index, .. } => {
                if let Some(sig) = self.dev(qp.dev).and_then(|d| d.fw.mkey_mut(*index)).and_then(|m| m.sig.as_mut()) {
                    sig.1 = true;
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
                if self.staged(qp, sge, *rkey) {
                    return match self.peer(qp) {
                        Some(peer) => {
                            let r = Remote { peer, rkey: *rkey, raddr: *raddr };
                            self.staged_write(qp, w, at, r, sge, *imm, corrupt)
                        }
                        None => Step::Failed(syndrome::TRANSPORT_RETRY),
                    };
                }
                self.write(qp, w, at, (*rkey, *raddr), sge, *imm, corrupt)
            }
            WqeKind::Read { rkey, raddr, sge } => {
                if self.staged(qp, sge, *rkey) {
                    return match self.peer(qp) {
                        Some(peer) => {
                            self.staged_read(qp, w, at, Remote { peer, rkey: *rkey, raddr: *raddr }, sge, corrupt)
                        }
                        None => Step::Failed(syndrome::TRANSPORT_RETRY),
                    };
                }
                self.read(qp, w, at, (*rkey, *raddr), sge, corrupt)
            }
            WqeKind::Send { sge, imm, inv } => {
                let Ok((mut data, hit)) = self.gather_view(at, sge) else {
                    return Step::Failed(syndrome::LOCAL_PROT);
                };
                let step = self.send_gathered(qp, w, &mut data, hit, (*imm, *inv), corrupt);
                self.give_scratch(qp.dev, data);
                step
            }
        }
    }

    /// True if the local SGEs or the remote key name an mkey with pipeline stages.
    fn staged(&self, qp: QpPath, sge: &[Sge], rkey: u32) -> bool {
        self.any_stages(qp.dev, sge) || self.peer(qp).is_some_and(|p| self.stages(p.dev, rkey).is_some())
    }

    /// RDMA WRITE between stage-less mkeys: one copy, host to host.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        qp: QpPath,
        w: &Wqe,
        at: At,
        (rkey, raddr): (u32, u64),
        sge: &[Sge],
        imm: Option<u32>,
        corrupt: Corrupt,
    ) -> Step {
        let Ok(local) = self.resolve_sges(at, sge, Need::LocalRead) else { return Step::Failed(syndrome::LOCAL_PROT) };
        let len: u64 = local.iter().map(|r| r.1).sum();
        let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
        if imm.is_some() && self.rq_empty(peer) {
            return Step::Blocked;
        }
        let pat = self.at(peer);
        let target = if self.peer_allows(peer, AccessFlags::REMOTE_WRITE) {
            self.resolve(pat, rkey, raddr, len, Need::RemoteWrite, 0).ok()
        } else {
            None
        };
        let Some(target) = target else { return self.remote_fault(peer) };
        if !self.carry(qp.dev, &local, &target, corrupt) {
            return Step::Failed(syndrome::LOCAL_PROT);
        }
        if let Some(imm) = imm {
            self.complete_recv(peer, len as u32, imm);
        }
        Step::Done(Device::success(qp.qpn, w, 0))
    }

    /// Move bytes across the wire from `src` to `dst`; a corruption rule flips one byte on
    /// the way.
    fn carry(&mut self, dev: usize, src: &[(u64, u64)], dst: &[(u64, u64)], corrupt: Corrupt) -> bool {
        if corrupt.is_none() {
            return self.host.transfer(src, dst);
        }
        let mut bytes = self.take_scratch(dev);
        let mut ok = true;
        for &(va, n) in src {
            match self.host.read(va, n as usize) {
                Some(b) => bytes.extend_from_slice(b),
                None => ok = false,
            }
        }
        flip(&mut bytes, corrupt);
        let mut cur = crate::host::RangeCursor::new(dst);
        let n = bytes.len().min(dst.iter().map(|r| r.1 as usize).sum());
        ok = ok && self.host.write_ranges(&mut cur, &bytes[..n]);
        self.give_scratch(dev, bytes);
        ok
    }

    /// RDMA READ between stage-less mkeys.
    fn read(&mut self, qp: QpPath, w: &Wqe, at: At, (rkey, raddr): (u32, u64), sge: &[Sge], corrupt: Corrupt) -> Step {
        let want: u64 = sge.iter().map(|s| u64::from(s.length)).sum();
        let Ok(local) = self.resolve_sges(at, sge, Need::LocalWrite) else { return Step::Failed(syndrome::LOCAL_PROT) };
        let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
        let pat = self.at(peer);
        let source = if self.peer_allows(peer, AccessFlags::REMOTE_READ) {
            self.resolve(pat, rkey, raddr, want, Need::RemoteRead, 0).ok()
        } else {
            None
        };
        let Some(source) = source.filter(|r| r.iter().all(|&(va, n)| self.host.is_mapped(va, n))) else {
            return self.remote_fault(peer);
        };
        if !self.carry(qp.dev, &source, &local, corrupt) {
            return Step::Failed(syndrome::LOCAL_PROT);
        }
        Step::Done(Device::success(qp.qpn, w, want as u32))
    }

    /// RDMA WRITE through at least one mkey with stages.
    #[allow(clippy::too_many_arguments)]
    fn staged_write(
        &mut self,
        qp: QpPath,
        w: &Wqe,
        at: At,
        r: Remote,
        sge: &[Sge],
        imm: Option<u32>,
        corrupt: Corrupt,
    ) -> Step {
        if corrupt.is_none()
            && let Some(step) = self.staged_write_streamed(qp, w, at, r, sge, imm)
        {
            return step;
        }
        let Ok((mut data, hit)) = self.gather_view(at, sge) else { return Step::Failed(syndrome::LOCAL_PROT) };
        let Remote { peer, rkey, raddr } = r;
        let step = 'step: {
            if imm.is_some() && self.rq_empty(peer) {
                break 'step Step::Blocked;
            }
            if let Some(h) = hit
                && self.requester_sig(qp, h)
            {
                break 'step Step::Held;
            }
            flip(&mut data, corrupt);
            let pat = self.at(peer);
            let written = if self.peer_allows(peer, AccessFlags::REMOTE_WRITE) {
                self.write_view(pat, rkey, raddr, &data, Need::RemoteWrite, false).ok()
            } else {
                None
            };
            let Some(rhit) = written else { break 'step self.remote_fault(peer) };
            self.responder_sig(peer, rhit);
            if let Some(imm) = imm {
                self.complete_recv(peer, data.len() as u32, imm);
            }
            Step::Done(Device::success(qp.qpn, w, 0))
        };
        self.give_scratch(qp.dev, data);
        step
    }

    /// The streaming form of a staged RDMA WRITE: stages on one side only, no immediate, no
    /// pipelining; data moves block by block, read once and written once. `None` if the WR
    /// does not have that shape.
    fn staged_write_streamed(
        &mut self,
        qp: QpPath,
        w: &Wqe,
        at: At,
        r: Remote,
        sge: &[Sge],
        imm: Option<u32>,
    ) -> Option<Step> {
        let Remote { peer, rkey, raddr } = r;
        if imm.is_some() || self.qp(qp).is_none_or(|q| q.drain_sigerr) {
            return None;
        }
        let pat = self.at(peer);
        let remote_ok = self.peer_allows(peer, AccessFlags::REMOTE_WRITE);
        let (local_stages, remote_stages) = (self.any_stages(at.dev, sge), self.stages(pat.dev, rkey));
        match (local_stages, remote_stages, sge) {
            (true, None, [s]) => {
                // memory → wire at the requester, into plain remote memory.
                let cfg = self.stages(at.dev, s.lkey)?;
                let bs = block_size(&cfg).ok()?;
                if !u64::from(s.length).is_multiple_of(bs) || !s.addr.is_multiple_of(bs) {
                    return None;
                }
                let (first, n) = (s.addr / bs, u64::from(s.length) / bs);
                let (mem, wire) = strides(&cfg, bs);
                let Ok(src) = self.resolve(at, s.lkey, first * mem, n * mem, Need::LocalRead, 0) else {
                    return Some(Step::Failed(syndrome::LOCAL_PROT));
                };
                let dst =
                    if remote_ok { self.resolve(pat, rkey, raddr, n * wire, Need::RemoteWrite, 0).ok() } else { None };
                let Some(dst) = dst else { return Some(self.remote_fault(peer)) };
                let Ok(err) = self.stream_blocks(at.dev, &cfg, Direction::Tx, first, &src, &dst) else {
                    return Some(Step::Failed(syndrome::LOCAL_PROT));
                };
                if let Some(err) = err {
                    self.requester_sig(qp, SigHit { dev: at.dev, index: s.lkey >> 8, err, domain: 1 });
                }
                Some(Step::Done(Device::success(qp.qpn, w, 0)))
            }
            (false, Some(cfg), _) => {
                // plain local memory → wire → memory at the responder.
                let bs = block_size(&cfg).ok()?;
                let (mem, wire) = strides(&cfg, bs);
                let Ok(src) = self.resolve_sges(at, sge, Need::LocalRead) else {
                    return Some(Step::Failed(syndrome::LOCAL_PROT));
                };
                let len: u64 = src.iter().map(|r| r.1).sum();
                if !raddr.is_multiple_of(wire) || !len.is_multiple_of(wire) {
                    return Some(self.remote_fault(peer));
                }
                let (first, n) = (raddr / wire, len / wire);
                let dst = if remote_ok {
                    self.resolve(pat, rkey, first * mem, n * mem, Need::RemoteWrite, 0).ok()
                } else {
                    None
                };
                let Some(dst) = dst else { return Some(self.remote_fault(peer)) };
                let Ok(err) = self.stream_blocks(pat.dev, &cfg, Direction::Rx, first, &src, &dst) else {
                    return Some(self.remote_fault(peer));
                };
                if let Some(err) = err {
                    self.responder_sig(peer, Some(SigHit { dev: pat.dev, index: rkey >> 8, err, domain: 0 }));
                }
                Some(Step::Done(Device::success(qp.qpn, w, 0)))
            }
            _ => None,
        }
    }

    /// RDMA READ through at least one mkey with stages.
    fn staged_read(&mut self, qp: QpPath, w: &Wqe, at: At, r: Remote, sge: &[Sge], corrupt: Corrupt) -> Step {
        let Remote { peer, rkey, raddr } = r;
        let want = self.wire_len(at.dev, sge);
        let pat = self.at(peer);
        let mut bytes = self.take_scratch(qp.dev);
        let source = if self.peer_allows(peer, AccessFlags::REMOTE_READ) {
            self.read_view(pat, rkey, raddr, want, Need::RemoteRead, false, &mut bytes).ok()
        } else {
            None
        };
        let Some(rhit) = source else {
            self.give_scratch(qp.dev, bytes);
            return self.remote_fault(peer);
        };
        self.responder_sig(peer, rhit);
        flip(&mut bytes, corrupt);
        let placed = self.scatter_view(at, sge, &bytes);
        self.give_scratch(qp.dev, bytes);
        let Ok(hit) = placed else { return Step::Failed(syndrome::LOCAL_PROT) };
        if let Some(h) = hit {
            self.requester_sig(qp, h);
        }
        let data_len: u64 = sge.iter().map(|s| u64::from(s.length)).sum();
        Step::Done(Device::success(qp.qpn, w, data_len as u32))
    }

    /// SEND, SEND with immediate or SEND with invalidate, once its bytes are gathered.
    fn send_gathered(
        &mut self,
        qp: QpPath,
        w: &Wqe,
        data: &mut [u8],
        hit: Option<SigHit>,
        (imm, inv): (Option<u32>, Option<u32>),
        corrupt: Corrupt,
    ) -> Step {
        let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
        if self.rq_empty(peer) {
            return Step::Blocked;
        }
        if let Some(h) = hit
            && self.requester_sig(qp, h)
        {
            return Step::Held;
        }
        if let Some(key) = inv
            && !self.remote_invalidate(peer, key)
        {
            self.responder_error(peer, event_type::QP_REQ_ERR);
            return Step::Failed(syndrome::REMOTE_INVAL_REQ);
        }
        flip(data, corrupt);
        let flags = if inv.is_some() { wc_flags::WITH_INV } else { WcFlags::empty() };
        match self.deliver(peer, data, imm, inv.or(imm), flags) {
            Ok(()) => Step::Done(Device::success(qp.qpn, w, 0)),
            Err(s) => Step::Failed(s),
        }
    }

    /// SEND_WITH_INV at the responder: the key must name an mkey of the responder's PD that
    /// allows remote invalidation.
    fn remote_invalidate(&mut self, peer: QpPath, key: u32) -> bool {
        let pdn = self.at(peer).pdn;
        let Some(m) = self.dev(peer.dev).and_then(|d| d.fw.mkey_mut(key >> 8)) else { return false };
        if field(m, mkc::EN_RINVAL) == 0
            || field(m, mkc::PD) != u64::from(pdn)
            || field(m, mkc::MKEY_7_0) != u64::from(key & 0xff)
        {
            return false;
        }
        let _ = mkc::FREE.set(&mut m.mkc, 1);
        true
    }

    /// Deliver a SEND into the peer's next receive WQE.
    fn deliver(
        &mut self,
        peer: QpPath,
        data: &[u8],
        imm: Option<u32>,
        imm_data: Option<u32>,
        flags: WcFlags,
    ) -> Result<(), u8> {
        let pat = self.at(peer);
        let Some(d) = self.dev(peer.dev) else { return Err(syndrome::TRANSPORT_RETRY) };
        let Some(p) = d.fw.qp_mut(peer.qpn) else { return Err(syndrome::TRANSPORT_RETRY) };
        let Some(r) = p.rq.pop_front() else { return Err(syndrome::TRANSPORT_RETRY) };
        let (rcq, scatter_to_cqe) = (p.recv_cqn, p.scatter_to_cqe);
        let room = self.wire_len(peer.dev, &r.sge);
        let fail = |e: &mut Self, s: u8| {
            if let Some(d) = e.dev(peer.dev) {
                let wc = d.error_wc(peer.qpn, r.wr_id, wc_opcode::RECV, s);
                d.push_cqe(rcq, Cqe::new(wc, peer.qpn, None));
                d.flush_qp(peer.qpn);
            }
        };
        if (data.len() as u64) > room {
            fail(self, syndrome::LOCAL_LENGTH);
            return Err(syndrome::REMOTE_INVAL_REQ);
        }
        let wc_flags = flags | if imm.is_some() { wc_flags::WITH_IMM } else { WcFlags::empty() };
        let wc = Wc {
            wr_id: r.wr_id,
            status: wc_status::SUCCESS,
            opcode: wc_opcode::RECV,
            byte_len: data.len() as u32,
            imm_data: imm_data.unwrap_or(0),
            qp_num: peer.qpn,
            wc_flags,
            ..Wc::default()
        };
        if scatter_to_cqe && data.len() <= SCATTER_TO_CQE_MAX {
            // The device puts small payloads in the CQE; the provider copies them at poll time.
            let mut cqe = Cqe::new(wc, peer.qpn, None);
            cqe.scatter = Some(InlineScatter { data: data.to_vec(), sge: r.sge.clone() });
            if let Some(d) = self.dev(peer.dev) {
                d.push_cqe(rcq, cqe);
            }
            return Ok(());
        }
        let Ok(hit) = self.scatter_view(pat, &r.sge, data) else {
            fail(self, syndrome::LOCAL_PROT);
            return Err(syndrome::REMOTE_OP);
        };
        if let Some(d) = self.dev(peer.dev) {
            if let Some(h) = hit {
                d.report_sig(h.index, h.err, h.domain, rcq, peer.qpn);
            }
            d.push_cqe(rcq, Cqe::new(wc, peer.qpn, None));
        }
        Ok(())
    }

    /// RDMA WRITE with immediate consumes a receive WQE without scattering into it.
    fn complete_recv(&mut self, peer: QpPath, len: u32, imm: u32) {
        let Some(d) = self.dev(peer.dev) else { return };
        let Some(p) = d.fw.qp_mut(peer.qpn) else { return };
        let Some(r) = p.rq.pop_front() else { return };
        let rcq = p.recv_cqn;
        let wc = Wc {
            wr_id: r.wr_id,
            status: wc_status::SUCCESS,
            opcode: wc_opcode::RECV_RDMA_WITH_IMM,
            byte_len: len,
            imm_data: imm,
            qp_num: peer.qpn,
            wc_flags: wc_flags::WITH_IMM,
            ..Wc::default()
        };
        d.push_cqe(rcq, Cqe::new(wc, peer.qpn, None));
    }

    /// Apply a UMR WQE to its mkey: valid, new tag, then the masked fields.
    fn exec_umr(&mut self, qp: QpPath, w: &Wqe, u: &UmrWqe) -> Step {
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
        if let Some(cfg) = u.sig_bsf {
            // Armed by the SET_PSV WQEs that follow.
            m.sig = Some((cfg, false));
        }
        Step::Done(Device::success(qp.qpn, w, 0))
    }
}
