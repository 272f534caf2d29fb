//! The direct RDMA WRITE: between plain MRs (MTT keys without a page list, signature or
//! crypto), the general path of [`super::ops`] resolves each key to its own addresses and
//! copies the bytes. When every check of that path would pass, do just that, without
//! building endpoints; when any would fail, the general path runs and reports it. The
//! requester checks its side and sends a WRITE packet whose payload names its plain ranges;
//! the responder's [`Engine::rx_direct_write`] checks its side (QP, PSN, remote key) and
//! places the bytes, or refuses without effect. Debug builds run the general translation
//! beside each side and compare. What each side found of its QP and keys is kept on its own
//! device between runs, for as long as that device's firmware epoch (any change to a QP or
//! an mkey) stays.

use mlx5_dv::prm::mkc;
use mlx5_dv::{AccessFlags, QpState, Sge};

use super::pipeline::stage_cfg;
use super::responder::{Payload, Request};
#[cfg(debug_assertions)]
use super::translate::Need;
use super::translate::field;
use super::{Engine, Step};
use crate::device::Device;
use crate::device::contract::{self, Wqe};
use crate::device::firmware::{FwMkey, FwQp, PSN_MASK};
use crate::device::translation::Translation;
use crate::fabric::QpPath;
use crate::host::{Dma, Host};
use crate::packet::{Bth, Headers, Packet, Reth, opcode};
use crate::small::SmallVec;

/// The range `[start, start + len)` of the plain MR `m` when `key` names it in PD `pdn`,
/// granting remote write if `remote_write` (nothing for a local read): what translation
/// checks, for a key it maps to itself, but the bounds of the access.
#[inline]
fn plain_mr(m: &FwMkey, key: u32, pdn: u32, remote_write: bool) -> Option<(u64, u64)> {
    let plain = field(m, mkc::FREE) == 0
        && field(m, mkc::MKEY_7_0) == u64::from(key & 0xff)
        && field(m, mkc::PD) == u64::from(pdn)
        && field(m, mkc::CRYPTO_EN) == 0
        && m.crypto.is_none()
        && stage_cfg(Some(m)).is_none()
        && (!remote_write || field(m, mkc::RW) != 0)
        && matches!(m.xlat, Translation::Mtt)
        && m.pages.is_none();
    plain.then(|| (field(m, mkc::START_ADDR), field(m, mkc::LEN)))
}

/// True if `[addr, addr + len)` lies in the range `(start, mr_len)`.
fn within((start, mr_len): (u64, u64), addr: u64, len: u64) -> bool {
    addr.checked_sub(start).and_then(|off| off.checked_add(len)).is_some_and(|end| end <= mr_len)
}

/// What the requester's direct path found of one QP's WRITEs: the QP and the plain MR its
/// last WRITE gathered from. All of it derives from QPs and mkeys of its own device, so it
/// holds while that device's epoch stays ([`Kept`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DirectMemo {
    qp: Option<QpFacts>,
    /// The local key, and its MR's range, as [`plain_mr`] gives it for a local read.
    lkey: Option<(u32, (u64, u64))>,
    /// True if it holds more than the device kept.
    dirty: bool,
}

/// The [`DirectMemo`] a device keeps between runs, for the requester QP it names, at the
/// epoch of that QP's device.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::device) struct Kept {
    at: Option<(QpPath, u64)>,
    memo: DirectMemo,
}

/// What a responder's direct path found of the QP and remote key it last wrote through, at
/// (epoch, QP number, key): that the QP takes RDMA WRITEs, its PD, and the MR's range. Valid
/// while its device's epoch stays.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::device) struct RxKept {
    at: Option<(u64, u32, u32)>,
    range: (u64, u64),
}

/// A WRITE's remote key and address, and its gather list.
pub(super) type Target<'a> = (u32, u64, &'a [Sge]);

/// A requester's PD, where the fabric delivers its requests, the largest message, and the
/// path MTU (`enum ibv_mtu`, 1 to 5).
#[derive(Debug, Clone, Copy)]
struct QpFacts {
    pdn: u32,
    to: QpPath,
    max_msg: u64,
    mtu: u32,
}

impl Engine<'_> {
    /// An RDMA WRITE without immediate or corruption, gathered from plain MRs into a plain
    /// MR: the copy and its completion, or `None` for the general path.
    pub(super) fn direct_write(&mut self, qp: QpPath, w: &Wqe, rkey: u32, raddr: u64, sge: &[Sge]) -> Option<Step> {
        let copied = self.direct_copy::<false>(&mut DirectMemo::default(), qp, (rkey, raddr, sge));
        copied.then(|| Step::Done(Device::success(qp.qpn, w, 0)))
    }

    /// The copy of [`Engine::direct_write`]: false, with nothing copied, for the general
    /// path. With `MEMO`, what it finds is kept in `memo` and what `memo` holds is used.
    /// A capture sees every request go through [`Engine::transmit`]: none is direct then.
    pub(super) fn direct_copy<const MEMO: bool>(&mut self, memo: &mut DirectMemo, qp: QpPath, w: Target) -> bool {
        // A DCI's WQEs name their DCT themselves: they take the general path.
        if self.fabric.capture().is_some() || self.qp(qp).is_some_and(|q| q.st == mlx5_dv::prm::queues::st::DCI) {
            return false;
        }
        self.try_direct_copy::<MEMO>(memo, qp, w).is_some()
    }

    #[inline(always)]
    fn try_direct_copy<const MEMO: bool>(&mut self, memo: &mut DirectMemo, qp: QpPath, w: Target) -> Option<()> {
        let (rkey, raddr, sge) = w;
        let facts = match memo.qp {
            Some(f) => f,
            None if !MEMO => self.qp_facts(qp)?,
            None => {
                memo.dirty = true;
                *memo.qp.insert(self.qp_facts(qp)?)
            }
        };
        let QpFacts { pdn, to, max_msg, mtu } = facts;
        if sge.is_empty() {
            return None;
        }
        let mut total = 0u64;
        for s in sge {
            let len = u64::from(s.length);
            let (range, known) = match memo.lkey {
                Some((key, range)) if MEMO && key == s.lkey => (range, true),
                _ => (plain_mr(self.mkey_of(qp.dev, s.lkey)?, s.lkey, pdn, false)?, false),
            };
            if !within(range, s.addr, len) {
                return None;
            }
            if MEMO && !known {
                (memo.lkey, memo.dirty) = (Some((s.lkey, range)), true);
            }
            total = total.checked_add(len)?;
        }
        if total > max_msg {
            return None;
        }
        // One gather entry (the common case) needs no list.
        let one;
        let src: SmallVec<(u64, u64), 4>;
        let src: &[(u64, u64)] = match sge {
            [s] if s.length > 0 => {
                one = [(s.addr, total)];
                &one
            }
            _ => {
                src = sge.iter().filter(|s| s.length > 0).map(|s| (s.addr, u64::from(s.length))).collect();
                &src
            }
        };
        #[cfg(debug_assertions)]
        self.check_direct_local(qp, sge, src, total);
        let span = u32::try_from(total.div_ceil(128u64 << mtu).max(1)).unwrap_or(u32::MAX);
        // The PSN moves as the packet leaves; a refusal takes it back.
        let t = self.dev(qp.dev)?.fw.transport_mut(qp.qpn)?;
        let psn = t.sq_psn;
        t.sq_psn = psn.wrapping_add(span) & PSN_MASK;
        let headers = Headers {
            bth: Bth {
                opcode: opcode::WRITE_ONLY,
                dest_qp: to.qpn,
                psn,
                ack_req: true,
                pkey: 0xffff,
                ..Bth::default()
            },
            reth: Some(Reth { va: raddr, rkey, dma_len: u32::try_from(total).unwrap_or(u32::MAX) }),
            ..Headers::default()
        };
        let req = Request { packet: Packet { headers, payload: Payload::Plain(src) }, from: qp, span, corrupt: None };
        if !self.rx_direct_write(to.dev, &req) {
            if let Some(t) = self.dev(qp.dev).and_then(|d| d.fw.transport_mut(qp.qpn)) {
                t.sq_psn = psn;
            }
            return None;
        }
        Some(())
    }

    /// Device `dev`'s responder takes a plain WRITE packet from the direct path
    /// ([`Device::rx_plain_write`]). Debug builds check that the general path would have
    /// placed it the same way.
    #[inline]
    pub(super) fn rx_direct_write(&mut self, dev: usize, req: &Request<'_>) -> bool {
        #[cfg(debug_assertions)]
        let general = self.general_target(dev, req);
        let Some(d) = self.devs.get_mut(dev) else { return false };
        let placed = d.rx_plain_write(self.host, req).is_some();
        #[cfg(debug_assertions)]
        if placed {
            let r = req.packet.headers.reth.unwrap_or_default();
            let dst = [(r.va, u64::from(r.dma_len))];
            let dst = if r.dma_len > 0 { &dst[..] } else { &[] };
            debug_assert!(
                general.as_ref().is_some_and(|ep| plain_part(ep, dst)),
                "a direct WRITE the general path places otherwise: {general:?}"
            );
        }
        placed
    }

    /// Where the general path would place a WRITE packet on device `dev`.
    #[cfg(debug_assertions)]
    fn general_target(&self, dev: usize, req: &Request<'_>) -> Option<super::pipeline::Endpoint> {
        let h = &req.packet.headers;
        let (r, at) = (h.reth?, QpPath { dev, qpn: h.bth.dest_qp });
        self.remote_endpoint(self.at(at), r.rkey, r.va, u64::from(r.dma_len), Need::RemoteWrite).ok()
    }

    /// The plain one-block WRITEs at the head of `id`'s send queue, in RTS with no fault rule
    /// to meet, through the direct path one after another while it takes them: the general
    /// loop's steps for each, with the QP looked up once and its facts and keys remembered.
    /// How many ran.
    pub(super) fn direct_run(&mut self, id: QpPath) -> u32 {
        let Some(q) = self.qp(id) else { return 0 };
        if q.state != QpState::Rts || !q.faults.is_empty() || q.sq.is_empty() {
            return 0;
        }
        let (sq, pc, cqn) = (q.sq, q.sq_pc, q.send_cqn);
        let (mut cc, mut ran) = (q.sq_cc, 0);
        let mut memo = self.recall(id, q);
        while cc != pc {
            let at = (cc & (sq.wqe_cnt - 1)) as usize;
            let Some(p) = self.host.read(sq.addr, sq.len()).and_then(|ring| contract::plain_write_at(ring, at)) else {
                break;
            };
            if !self.direct_copy::<true>(&mut memo, id, (p.rkey, p.raddr, std::slice::from_ref(&p.sge))) {
                break;
            }
            cc = cc.wrapping_add(p.head.bbs);
            ran += 1;
            if let Some(cqe) = Device::success(id.qpn, &p.head, 0) {
                self.push_cqe(id.dev, cqn, cqe);
            }
        }
        if ran > 0 {
            if let Some(q) = self.devs.get_mut(id.dev).and_then(|d| d.fw.send_queue_mut(id.qpn)) {
                *q.sq_cc = cc;
            }
            self.keep(id, memo);
        }
        ran
    }

    /// Retire a WQE the direct path ran, with its completion if it asked for one: the
    /// `finish` of its `Step::Done`, where no responder can have failed.
    /// True if the QP holds more WQEs.
    pub(super) fn complete_direct(&mut self, id: QpPath, w: &Wqe) -> bool {
        debug_assert!(self.pending.is_empty(), "a direct WRITE leaves no responder to fail");
        let Some((cq, more)) = self.retire(id, w) else { return false };
        if let Some(cqe) = Device::success(id.qpn, w, 0) {
            self.push_cqe(id.dev, cq, cqe);
        }
        more
    }

    /// The memo `qp`'s device kept for it, if nothing it derives from has changed since;
    /// otherwise a fresh one with the facts of `q` (the QP, already looked up).
    pub(super) fn recall(&self, qp: QpPath, q: &FwQp) -> DirectMemo {
        if let Some(d) = self.devs.get(qp.dev)
            && let (Some((at, own)), Some(_)) = (d.direct.at, d.direct.memo.qp)
            && at == qp
            && d.fw.epoch() == own
        {
            return d.direct.memo;
        }
        DirectMemo { qp: self.qp_facts_of(qp, q), dirty: true, ..DirectMemo::default() }
    }

    /// Keep `memo` on `qp`'s device for its next run.
    pub(super) fn keep(&mut self, qp: QpPath, mut memo: DirectMemo) {
        if !memo.dirty || memo.qp.is_none() {
            return;
        }
        memo.dirty = false;
        if let Some(d) = self.devs.get_mut(qp.dev) {
            d.direct = Kept { at: Some((qp, d.fw.epoch())), memo };
        }
    }

    /// The requester's facts the general path looks up per WRITE: `None` for a QP without a
    /// path the fabric delivers.
    fn qp_facts(&self, qp: QpPath) -> Option<QpFacts> {
        self.qp_facts_of(qp, self.qp(qp)?)
    }

    /// [`Engine::qp_facts`] of a QP already looked up.
    fn qp_facts_of(&self, qp: QpPath, q: &FwQp) -> Option<QpFacts> {
        // XRC requests carry the XRCETH the general path writes and checks.
        if q.st == mlx5_dv::prm::queues::st::XRC {
            return None;
        }
        let remote = q.remote?;
        let to = self.fabric.deliver(&remote)?;
        Some(QpFacts { pdn: q.pdn, to, max_msg: self.max_msg(qp.dev), mtu: remote.path_mtu.clamp(1, 5) })
    }

    /// The general path translates the requester's side to the same single plain part.
    #[cfg(debug_assertions)]
    fn check_direct_local(&self, qp: QpPath, sge: &[Sge], src: &[(u64, u64)], total: u64) {
        let at = self.at(qp);
        assert!(self.wire_len(at.dev, sge) <= self.max_msg(at.dev));
        let local = self.local_endpoint(at, sge, Need::LocalRead, None);
        let agree = local.as_ref().is_ok_and(|l| l.wire_len() == Some(total) && plain_part(l, src));
        debug_assert!(agree, "a direct WRITE the general path translates otherwise: {local:?}");
    }
}

impl Device {
    /// This device's responder takes a plain WRITE packet from the direct path: its QP takes
    /// WRITEs at the packet's PSN, the remote key names a plain MR of its PD allowing remote
    /// write that holds the target, and the bytes are placed in its host memory. `None`, with
    /// nothing changed, for the general path. Its own tables only; what it found of its QP
    /// and key is kept for the next packet.
    #[inline(always)]
    pub(super) fn rx_plain_write(&mut self, host: &mut Host, req: &Request<'_>) -> Option<()> {
        let (h, Payload::Plain(src)) = (&req.packet.headers, &req.packet.payload) else { return None };
        #[cfg(debug_assertions)]
        super::responder::wire_check(h);
        let (r, qpn) = (h.reth?, h.bth.dest_qp);
        let key = (self.fw.epoch(), qpn, r.rkey);
        let range = match self.rx_direct {
            RxKept { at: Some(at), range } if at == key => range,
            _ => {
                let q = self.fw.qp(qpn)?;
                if !matches!(q.state, QpState::Rtr | QpState::Rts) || !q.access.contains(AccessFlags::REMOTE_WRITE) {
                    return None;
                }
                let range = plain_mr(self.fw.mkey(r.rkey >> 8)?, r.rkey, q.pdn, true)?;
                self.rx_direct = RxKept { at: Some(key), range };
                range
            }
        };
        let total = u64::from(r.dma_len);
        if !within(range, r.va, total) {
            return None;
        }
        // The expected PSN: checked and moved on; a refusal below takes it back.
        let t = self.fw.transport_mut(qpn)?;
        if t.rq_psn != h.bth.psn {
            return None;
        }
        t.rq_psn = t.rq_psn.wrapping_add(req.span) & PSN_MASK;
        let dst_range = [(r.va, total)];
        let dst = if total > 0 { &dst_range[..] } else { &[] };
        // One gather range and one target range in two regions (the common case): both are
        // mapped if the regions hold them, and the copy is one slice copy.
        let copied = match (&src[..], dst) {
            ([s], [d]) => host.with_two(*s, *d, |from, to| crate::host::place(to, from)).is_some(),
            _ => false,
        };
        // Otherwise every range must be mapped, and then the copy cannot fail (were it to,
        // the general path would meet it too).
        let placed = copied || (src.iter().chain(dst).all(|&(va, n)| host.is_mapped(va, n)) && host.transfer(src, dst));
        if !placed {
            if let Some(t) = self.fw.transport_mut(qpn) {
                t.rq_psn = h.bth.psn;
            }
            return None;
        }
        Some(())
    }
}

/// One plain part over exactly `ranges`.
#[cfg(debug_assertions)]
fn plain_part(ep: &super::pipeline::Endpoint, ranges: &[(u64, u64)]) -> bool {
    match &ep.parts[..] {
        [p] => p.stage.is_none() && p.crypto.is_none() && p.mem.runs.is_empty() && p.mem.ranges[..] == *ranges,
        _ => false,
    }
}
