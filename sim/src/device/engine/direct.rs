//! The direct RDMA WRITE: between plain MRs (MTT keys without a page list, signature or
//! crypto), the general path of [`super::ops`] resolves each key to its own addresses and
//! copies the bytes. When every check of that path would pass, do just that, without
//! building endpoints; when any would fail, the general path runs and reports it. Debug
//! builds run the general translation beside it and compare. What those checks found of a
//! QP, its responder and its keys is kept on the device between runs, for as long as the
//! firmware's epoch (any change to a QP or an mkey) stays.

use mlx5_dv::prm::mkc;
use mlx5_dv::{AccessFlags, QpState, Sge};

use super::pipeline::stage_cfg;
use super::translate::field;
use super::{Engine, Step};
use crate::device::Device;
use crate::device::firmware::{FwMkey, FwQp, QpPath, Translation};
use crate::device::wqe::{self, Wqe};
use crate::host::Dma;
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

/// What the direct path found of one QP's WRITEs: the QP and its peer, and the plain MRs its
/// last WRITE gathered from and wrote to. All of it derives from QPs and mkeys of the two
/// devices, so it holds while their epochs stay ([`Kept`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DirectMemo {
    qp: Option<QpFacts>,
    /// The local key, and its MR's range, as [`plain_mr`] gives it for a local read.
    lkey: Option<(u32, (u64, u64))>,
    /// The remote key, and its MR's range, for a remote write.
    rkey: Option<(u32, (u64, u64))>,
    /// True if it holds more than the device kept.
    dirty: bool,
}

/// The [`DirectMemo`] a device keeps between runs, for the requester QP it names, at the
/// epochs of that QP's device and of its responder's.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::device) struct Kept {
    at: Option<(QpPath, u64, u64)>,
    memo: DirectMemo,
}

/// A WRITE's remote key and address, and its gather list.
pub(super) type Target<'a> = (u32, u64, &'a [Sge]);

/// A requester's PD, its responder and the responder's PD, and the largest message.
#[derive(Debug, Clone, Copy)]
struct QpFacts {
    pdn: u32,
    peer: QpPath,
    peer_pdn: u32,
    max_msg: u64,
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
    pub(super) fn direct_copy<const MEMO: bool>(&mut self, memo: &mut DirectMemo, qp: QpPath, w: Target) -> bool {
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
        let QpFacts { pdn, peer, peer_pdn, max_msg } = facts;
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
        let (range, known) = match memo.rkey {
            Some((key, range)) if MEMO && key == rkey => (range, true),
            _ => (plain_mr(self.mkey_of(peer.dev, rkey)?, rkey, peer_pdn, true)?, false),
        };
        if !within(range, raddr, total) {
            return None;
        }
        if MEMO && !known {
            (memo.rkey, memo.dirty) = (Some((rkey, range)), true);
        }
        let dst_range = [(raddr, total)];
        let dst = if total > 0 { &dst_range[..] } else { &[] };
        // One gather entry and the target in two regions (the common case): both are mapped
        // if the regions hold them, and the copy is one slice copy.
        if let ([s], [d]) = (sge, dst) {
            let one = (s.addr, d.1);
            #[cfg(debug_assertions)]
            self.check_direct(qp, peer, (rkey, raddr, sge), &[one], dst);
            if self.host.with_two(one, *d, |from, to| to.copy_from_slice(from)).is_some() {
                return Some(());
            }
        }
        let src: SmallVec<(u64, u64), 4> =
            sge.iter().filter(|s| s.length > 0).map(|s| (s.addr, u64::from(s.length))).collect();
        #[cfg(debug_assertions)]
        self.check_direct(qp, peer, (rkey, raddr, sge), &src, dst);
        if !src.iter().chain(dst).all(|&(va, n)| self.host.is_mapped(va, n)) {
            return None;
        }
        // Mapped, so the copy cannot fail; were it to, the general path would meet it too.
        self.host.transfer(&src, dst).then_some(())
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
            let Some(p) = self.host.read(sq.addr, sq.len()).and_then(|ring| wqe::plain_write_at(ring, at)) else {
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
        let epoch = |dev: usize| self.devs.get(dev).map(|d| d.fw.epoch());
        if let Some(k) = self.devs.get(qp.dev).map(|d| &d.direct)
            && let (Some((at, own, peer)), Some(f)) = (k.at, k.memo.qp)
            && at == qp
            && epoch(qp.dev) == Some(own)
            && epoch(f.peer.dev) == Some(peer)
        {
            return k.memo;
        }
        DirectMemo { qp: self.qp_facts_of(qp, q), dirty: true, ..DirectMemo::default() }
    }

    /// Keep `memo` on `qp`'s device for its next run.
    pub(super) fn keep(&mut self, qp: QpPath, mut memo: DirectMemo) {
        if !memo.dirty {
            return;
        }
        memo.dirty = false;
        let epoch = |dev: usize| self.devs.get(dev).map(|d| d.fw.epoch());
        let Some(f) = memo.qp else { return };
        let (Some(own), Some(peer)) = (epoch(qp.dev), epoch(f.peer.dev)) else { return };
        if let Some(d) = self.devs.get_mut(qp.dev) {
            d.direct = Kept { at: Some((qp, own, peer)), memo };
        }
    }

    /// `peer`, `at` and `peer_allows` of the general path, each QP looked up once: `None`
    /// unless the peer takes RDMA WRITEs.
    fn qp_facts(&self, qp: QpPath) -> Option<QpFacts> {
        self.qp_facts_of(qp, self.qp(qp)?)
    }

    /// [`Engine::qp_facts`] of a QP already looked up.
    fn qp_facts_of(&self, qp: QpPath, q: &FwQp) -> Option<QpFacts> {
        let (pdn, remote) = (q.pdn, q.remote?);
        let peer = self.fabric.deliver(&remote)?;
        let p = self.qp(peer)?;
        if !matches!(p.state, QpState::Rtr | QpState::Rts) || !p.access.contains(AccessFlags::REMOTE_WRITE) {
            return None;
        }
        Some(QpFacts { pdn, peer, peer_pdn: p.pdn, max_msg: self.max_msg(qp.dev) })
    }

    /// The general path translates the WRITE to the same single plain parts.
    #[cfg(debug_assertions)]
    fn check_direct(
        &self,
        qp: QpPath,
        peer: QpPath,
        (rkey, raddr, sge): (u32, u64, &[Sge]),
        src: &[(u64, u64)],
        dst: &[(u64, u64)],
    ) {
        use super::translate::Need;
        let at = self.at(qp);
        let total = dst.first().map_or(0, |d| d.1);
        assert!(self.wire_len(at.dev, sge) <= self.max_msg(at.dev));
        let local = self.local_endpoint(at, sge, Need::LocalRead, None);
        let remote = self.remote_endpoint(self.at(peer), rkey, raddr, total, Need::RemoteWrite);
        // One plain part per side, over the same ranges, and the same length.
        let plain = |ep: &super::pipeline::Endpoint, ranges: &[(u64, u64)]| match &ep.parts[..] {
            [p] => p.stage.is_none() && p.crypto.is_none() && p.mem.runs.is_empty() && p.mem.ranges[..] == *ranges,
            _ => false,
        };
        let agree = match (&local, &remote) {
            (Ok(l), Ok(r)) => l.wire_len() == Some(total) && plain(l, src) && plain(r, dst),
            _ => false,
        };
        debug_assert!(agree, "a direct WRITE the general path translates otherwise: {local:?} {remote:?}");
    }
}
