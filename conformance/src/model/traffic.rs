//! Work-request chains (items 20–30) and the traffic they carry: which bytes land where, and
//! which completions each CQ gets.

use std::sync::Arc;

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{AccessFlags, MkeyInitFlags, wc_opcode, wc_status};

use super::{Ent, Expect, IEnt, Key, Layout, Loc, Model, St, Wr, wr_id};

mod transfer;

/// A completion the model expects: the QP slot it belongs to, its `wr_id` and status, and for
/// a success its opcode, (receives and READs) its `byte_len`, whether it has
/// `IBV_WC_WITH_IMM` and (receives) the immediate, whether it has `IBV_WC_WITH_INV`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpCqe {
    pub qp: usize,
    pub wr_id: u64,
    pub status: u32,
    pub opcode: Option<u32>,
    pub byte_len: Option<u32>,
    pub with_imm: bool,
    pub imm: Option<u32>,
    pub with_inv: bool,
}

/// What the last step expects besides its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// The completions each CQ slot gets, in order per QP and queue.
    pub cqes: Vec<(usize, ExpCqe)>,
    /// Buffer slots whose contents must be as the model has them.
    pub watch: Vec<usize>,
    /// Completions a QP whose state became unknown may add, per CQ slot.
    pub possible: Vec<(usize, usize)>,
    /// What a signature or crypto scenario leaves.
    pub outcome: Option<super::outcome::Outcome>,
}

/// What an access needs: local or remote, read or write; a remote atomic needs
/// `REMOTE_ATOMIC` (and writes).
#[derive(Debug, Clone, Copy)]
pub(super) struct Need {
    pub(super) remote: bool,
    pub(super) write: bool,
    pub(super) atomic: bool,
}

/// Why an address does not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    /// A protection fault: the status the side reports.
    Prot,
    /// The model cannot say.
    Unknown,
}

/// Runs of `(buffer slot, offset, length)`.
pub(super) type Runs = Vec<(usize, usize, usize)>;

/// A WRITE or SEND about to leave: its length and source runs, and the responder's QP slot,
/// device and PD.
struct Outgoing {
    len: u32,
    src: Runs,
    p: usize,
    pdev: usize,
    ppd: usize,
}

/// A configure open in this chain: the mkey, the setters announced and run, what they set.
struct Open {
    mkey: usize,
    tag: u8,
    want: u8,
    done: u8,
    access: Option<AccessFlags>,
    layout: Option<Layout>,
    /// `klm_octowords` is non-zero: a layout was written (item 29).
    laid: bool,
    id: u64,
    signaled: bool,
}

/// A finalized WR of a chain.
enum Posted {
    Data { wr: Wr, id: u64 },
    Umr { mkey: usize, tag: u8, access: Option<AccessFlags>, layout: Option<Layout>, id: u64, signaled: bool },
}

fn list_layout(n: u8, e: &[Ent; 4]) -> Layout {
    let n = usize::from(n).min(e.len());
    Layout { runs: e[..n].iter().map(|x| (x.mr, u64::from(x.off), u64::from(x.len))).collect() }
}

/// Repetition r of entry i maps `count` bytes at `off + r * stride`, in (r, i) order; count and
/// stride are 16-bit (item 30).
fn interleaved_layout(repeat: u32, n: u8, e: &[IEnt; 3]) -> Layout {
    let n = usize::from(n).min(e.len());
    let mut runs = Vec::new();
    for r in 0..u64::from(repeat) {
        for x in &e[..n] {
            let count = u64::from(x.count & 0xffff);
            let stride = u64::from(x.count.wrapping_add(x.skip) & 0xffff);
            runs.push((x.mr, u64::from(x.off) + r * stride, count));
        }
    }
    Layout { runs }
}

pub(super) fn overlaps(a: &Runs, b: &Runs) -> bool {
    a.iter().any(|x| b.iter().any(|y| x.0 == y.0 && x.1 < y.1.saturating_add(y.2) && y.1 < x.1.saturating_add(x.2)))
}

impl Model {
    /// Record a completion on the CQ of QP slot `qp`.
    pub(super) fn cqe(&mut self, qp: usize, wr_id: u64, status: u32, opcode: Option<u32>, byte_len: Option<u32>) {
        let Some(q) = self.qps.get(qp).and_then(|q| q.as_ref()) else { return };
        self.effects
            .cqes
            .push((q.cq, ExpCqe { qp, wr_id, status, opcode, byte_len, with_imm: false, imm: None, with_inv: false }));
    }

    /// Whether no CQ gets more completions than it holds (an overrun is CQ_ERR, not modelled).
    pub(super) fn cqs_hold(&self) -> bool {
        self.cqs.iter().enumerate().all(|(i, c)| {
            let n = self.effects.cqes.iter().filter(|e| e.0 == i).count()
                + self.effects.possible.iter().filter(|e| e.0 == i).map(|e| e.1).sum::<usize>();
            c.is_none_or(|c| n <= c.cap as usize)
        })
    }

    /// One chain on QP slot `qp`: the builders' stored error (items 20–29), then what the
    /// device does with the posted WRs.
    pub(super) fn post(&mut self, qp: usize, wrs: &[Wr], seq: u64) -> Expect {
        let Some(q) = self.qps.get(qp).and_then(|q| q.as_ref()) else { return Expect::Errno(EINVAL) };
        if q.unknown {
            return Expect::Unknown;
        }
        let (sq_used, max_post, max_inline, qpd, max_gs) = (q.sq_used, q.max_post, q.max_inline, q.pd, q.max_gs);
        let mut dangling = q.dangling;
        let mut err: Option<i32> = None;
        let mut nreq: u32 = 0;
        let mut open: Option<Open> = None;
        let mut posted: Vec<Posted> = Vec::new();
        // Item 23: a builder finds room while outstanding + this chain's WRs < max_post.
        let room = |nreq: u32| sq_used.saturating_add(nreq) < max_post;
        // Expand mr_list into a configure with two setters (item 28).
        let mut calls: Vec<(usize, Wr)> = Vec::new();
        for (k, w) in wrs.iter().enumerate() {
            match *w {
                Wr::MrList { mkey, access, n, e, inline, signaled } => {
                    calls.push((k, Wr::Configure { mkey, tag: 0, setters: 2, conf_flags: 0, inline, signaled }));
                    calls.push((k, Wr::Access(access)));
                    calls.push((k, Wr::List { n, e }));
                }
                Wr::MrInterleaved { mkey, access, repeat, n, e, inline, signaled } => {
                    calls.push((k, Wr::Configure { mkey, tag: 0, setters: 2, conf_flags: 0, inline, signaled }));
                    calls.push((k, Wr::Access(access)));
                    calls.push((k, Wr::Interleaved { repeat, n, e }));
                }
                w => calls.push((k, w)),
            }
        }
        for (k, w) in calls {
            let id = wr_id(seq, k, false);
            match w {
                Wr::Write { .. }
                | Wr::Read { .. }
                | Wr::Send { .. }
                | Wr::WriteImm { .. }
                | Wr::SendImm { .. }
                | Wr::SendInv { .. }
                | Wr::Atomic { .. }
                | Wr::LocalInv { .. } => {
                    // A data WQE written over an open configure: not modelled.
                    if open.is_some() {
                        return Expect::Unknown;
                    }
                    if !room(nreq) {
                        err.get_or_insert(ENOMEM);
                        continue;
                    }
                    nreq += 1;
                    // Item 87: more SGEs than max_send_sge store ENOMEM.
                    if sges(&w).len() as u64 > u64::from(max_gs) {
                        err.get_or_insert(ENOMEM);
                    }
                    posted.push(Posted::Data { wr: w, id });
                }
                Wr::Configure { mkey, tag, setters, conf_flags, inline, signaled } => {
                    if open.is_some() {
                        return Expect::Unknown;
                    }
                    // Items 21 and 22 replace any stored error and start no WQE.
                    if !inline || conf_flags & !1 != 0 {
                        err = Some(EOPNOTSUPP);
                        continue;
                    }
                    let Some(m) = self.mkeys.get(mkey).and_then(|m| m.as_ref()) else { return Expect::Unknown };
                    let plain = !m.flags.intersects(MkeyInitFlags::BLOCK_SIGNATURE | MkeyInitFlags::CRYPTO);
                    if m.pd != qpd || !plain {
                        return Expect::Unknown;
                    }
                    // Items 20 and 94: a full queue stores ENOMEM and the configure goes on.
                    if !room(nreq) {
                        err.get_or_insert(ENOMEM);
                    }
                    // Item 24: a new tag byte needs the kernel's tag update; it replaces ENOMEM
                    // (item 94) and the configure stops there, after libmlx5 made the mkey
                    // current: a later chain's setter would find it (item 26's difference).
                    if tag != 0 && !self.update_tag {
                        err = Some(EOPNOTSUPP);
                        dangling = true;
                        continue;
                    }
                    dangling = false;
                    if setters == 0 {
                        nreq += 1;
                        posted.push(Posted::Umr { mkey, tag, access: None, layout: None, id, signaled });
                    } else {
                        let o = Open {
                            mkey,
                            tag,
                            want: setters,
                            done: 0,
                            access: None,
                            layout: None,
                            laid: false,
                            id,
                            signaled,
                        };
                        open = Some(o);
                    }
                }
                Wr::Access(_) | Wr::List { .. } | Wr::Interleaved { .. } => {
                    if err.is_some() {
                        continue;
                    }
                    let Some(o) = open.as_mut() else {
                        // Item 26's known difference: a configure left open by an earlier chain.
                        if dangling {
                            return Expect::Unknown;
                        }
                        err = Some(EINVAL);
                        continue;
                    };
                    let Some(m) = self.mkeys.get(o.mkey).and_then(|m| m.as_ref()) else { return Expect::Unknown };
                    let room16 = (u64::from(max_inline) + 4) / 16;
                    match w {
                        Wr::Access(a) => {
                            // Item 28.
                            if a & !0xf != 0 || o.access.is_some() {
                                err = Some(EINVAL);
                                continue;
                            }
                            o.access = Some(AccessFlags::from_bits_retain(a));
                        }
                        Wr::List { n, e } => {
                            // Item 29.
                            if u64::from(n) > room16.min(u64::from(m.num_desc)) {
                                err = Some(ENOMEM);
                                continue;
                            }
                            if o.laid {
                                err = Some(EINVAL);
                                continue;
                            }
                            o.laid = n > 0;
                            o.layout = Some(list_layout(n, &e));
                        }
                        Wr::Interleaved { repeat, n, e } => {
                            // The model keeps one run per repetition and entry.
                            if u64::from(repeat) * u64::from(n) > 4096 {
                                return Expect::Unknown;
                            }
                            if u64::from(n) > room16.wrapping_sub(1).min(u64::from(m.num_desc)) {
                                err = Some(ENOMEM);
                                continue;
                            }
                            if o.laid {
                                err = Some(EINVAL);
                                continue;
                            }
                            o.laid = true;
                            o.layout = Some(interleaved_layout(repeat, n, &e));
                        }
                        _ => {}
                    }
                    o.done = o.done.saturating_add(1);
                    if o.done == o.want
                        && let Some(o) = open.take()
                    {
                        nreq += 1;
                        let Open { mkey, tag, access, layout, id, signaled, .. } = o;
                        posted.push(Posted::Umr { mkey, tag, access, layout, id, signaled });
                    }
                }
                Wr::MrList { .. } | Wr::MrInterleaved { .. } => return Expect::Unknown,
            }
        }
        let enabled = match self.qps.get_mut(qp).and_then(|q| q.as_mut()) {
            Some(q) => {
                // Item 26: libmlx5 keeps a configure left open.
                q.dangling = dangling || open.is_some();
                q.enabled
            }
            None => return Expect::Unknown,
        };
        // Item 20: the stub until RTS, else the stored error; nothing is posted.
        if !enabled {
            return Expect::Errno(EINVAL);
        }
        if let Some(e) = err {
            return Expect::Errno(e);
        }
        if invalidates_a_landing(&posted) {
            return Expect::Unknown;
        }
        let r = self.execute(qp, posted);
        self.land_pending();
        r
    }

    /// The device runs the posted WRs in order; the first error moves the QP to ERR and
    /// flushes the rest.
    fn execute(&mut self, qp: usize, posted: Vec<Posted>) -> Expect {
        let Some(st) = self.qps.get(qp).and_then(|q| q.as_ref()).map(|q| q.st) else { return Expect::Unknown };
        let n = posted.len();
        let mut failed = st == St::Err;
        let mut last_cqe: Option<usize> = None;
        for (i, p) in posted.into_iter().enumerate() {
            let (id, signaled) = match &p {
                Posted::Data { wr, id } => (*id, signaled_of(wr)),
                Posted::Umr { id, signaled, .. } => (*id, *signaled),
            };
            if failed {
                // A WR completed in error always completes, signalled or not.
                self.cqe(qp, id, wc_status::WR_FLUSH_ERR, None, None);
                last_cqe = Some(i);
                continue;
            }
            match p {
                Posted::Umr { mkey, tag, access, layout, .. } => {
                    // A layout entry outside a live MR of the mkey's PD: the docs do not say
                    // whether the UMR or a later access fails (the simulator fails the UMR).
                    if let Some(l) = &layout
                        && !self.entries_inside(mkey, l)
                    {
                        return Expect::Unknown;
                    }
                    let Some(m) = self.mkeys.get_mut(mkey).and_then(|m| m.as_mut()) else { return Expect::Unknown };
                    // Items 24, 25, 28, 30: valid, the tag of the key; what was not set stays.
                    m.valid = true;
                    m.tag = tag;
                    if let Some(a) = access {
                        m.access = a;
                    }
                    if let Some(l) = layout {
                        m.layout = l;
                    }
                    if signaled {
                        self.cqe(qp, id, wc_status::SUCCESS, Some(wc_opcode::DRIVER1), None);
                        last_cqe = Some(i);
                    }
                }
                Posted::Data { wr, id } => match self.transfer(qp, &wr) {
                    None => return Expect::Unknown,
                    Some(None) => {
                        if signaled {
                            let (op, len) = match wr {
                                Wr::Read { .. } => (wc_opcode::RDMA_READ, u32::try_from(total(&wr)).ok()),
                                Wr::Send { .. } | Wr::SendImm { .. } | Wr::SendInv { .. } => (wc_opcode::SEND, None),
                                Wr::LocalInv { .. } => (wc_opcode::LOCAL_INV, None),
                                // Item 121.
                                Wr::Atomic { cas: true, .. } => (wc_opcode::COMP_SWAP, Some(8)),
                                Wr::Atomic { .. } => (wc_opcode::FETCH_ADD, Some(8)),
                                _ => (wc_opcode::RDMA_WRITE, None),
                            };
                            self.cqe(qp, id, wc_status::SUCCESS, Some(op), len);
                            // mlx5_poll_one's handle_good_req flags the requester's side too.
                            if matches!(wr, Wr::WriteImm { .. } | Wr::SendImm { .. })
                                && let Some(c) = self.effects.cqes.last_mut()
                            {
                                c.1.with_imm = true;
                            }
                            last_cqe = Some(i);
                        }
                    }
                    Some(Some(status)) => {
                        self.cqe(qp, id, status, None, None);
                        last_cqe = Some(i);
                        failed = true;
                        self.enter_err(qp);
                    }
                },
            }
        }
        if let Some(q) = self.qps.get_mut(qp).and_then(|q| q.as_mut()) {
            // A polled completion retires its WQE and every one before it.
            q.sq_used = match last_cqe {
                Some(i) => u32::try_from(n - 1 - i).unwrap_or(u32::MAX),
                None => q.sq_used.saturating_add(u32::try_from(n).unwrap_or(u32::MAX)),
            };
        }
        Expect::Ok(None)
    }

    /// Every run of `l` lies in a live MR of mkey slot `mkey`'s PD.
    fn entries_inside(&self, mkey: usize, l: &Layout) -> bool {
        let Some(k) = self.mkeys.get(mkey).and_then(|m| m.as_ref()) else { return false };
        l.runs.iter().all(|&(mr, off, len)| {
            self.mrs.get(mr).and_then(|m| m.as_ref()).is_some_and(|m| m.pd == k.pd && off + len <= m.len)
        })
    }

    /// The device of QP slot `qp`.
    pub(super) fn qp_dev(&self, qp: usize) -> Option<usize> {
        let q = self.qps.get(qp)?.as_ref()?;
        let ctx = self.pd_ctx(q.pd)?;
        self.ctx_dev.get(ctx).copied()
    }

    /// The peer of a QP in RTS whose PSNs are in step with it, ready to receive.
    pub(super) fn linked_peer(&self, qp: usize) -> Option<usize> {
        let q = self.qps.get(qp)?.as_ref()?;
        let p = q.peer?;
        let r = self.qps.get(p)?.as_ref()?;
        let ok = q.st == St::Rts
            && !r.unknown
            && matches!(r.st, St::Rtr | St::Rts)
            && r.peer == Some(qp)
            && q.bound == Some(r.rx_gen);
        ok.then_some(p)
    }

    /// The buffers a key's memory lies in (to check that a failed access left them alone).
    pub(super) fn key_bufs(&self, key: Key) -> Vec<usize> {
        match key {
            Key::Mr(s) => self.mrs.get(s).and_then(|m| m.as_ref()).map(|m| vec![m.buf]).unwrap_or_default(),
            Key::Mkey(s, _) => self
                .mkeys
                .get(s)
                .and_then(|m| m.as_ref())
                .map(|m| {
                    let mrs = m.layout.runs.iter().filter_map(|r| self.mrs.get(r.0).and_then(|x| x.as_ref()));
                    mrs.map(|x| x.buf).collect()
                })
                .unwrap_or_default(),
            Key::Bogus => Vec::new(),
        }
    }

    /// The memory `len` bytes at `off` through `key` cover, seen from device `dev` and PD `pd`.
    pub(super) fn map(&self, key: Key, off: u32, len: u32, dev: usize, pd: usize, need: Need) -> Result<Runs, Fault> {
        let key_dev = |p: usize| self.pd_ctx(p).and_then(|c| self.ctx_dev.get(c).copied());
        let (off, len) = (u64::from(off), u64::from(len));
        let allowed = |a: AccessFlags| match (need.remote, need.write) {
            (true, _) if need.atomic => a.contains(AccessFlags::REMOTE_ATOMIC),
            (true, true) => a.contains(AccessFlags::REMOTE_WRITE),
            (true, false) => a.contains(AccessFlags::REMOTE_READ),
            (false, true) => a.contains(AccessFlags::LOCAL_WRITE),
            (false, false) => true,
        };
        match key {
            Key::Bogus => Err(Fault::Prot),
            Key::Mr(s) => {
                // A stale key may name a new object: not modelled; another device's key space
                // neither.
                let m = self.mrs.get(s).and_then(|m| m.as_ref()).ok_or(Fault::Unknown)?;
                if key_dev(m.pd) != Some(dev) {
                    return Err(Fault::Unknown);
                }
                if m.pd != pd || !allowed(m.access) || off + len > m.len {
                    return Err(Fault::Prot);
                }
                let start = usize::try_from(m.off + off).map_err(|_| Fault::Unknown)?;
                Ok(vec![(m.buf, start, usize::try_from(len).map_err(|_| Fault::Unknown)?)])
            }
            Key::Mkey(s, tag) => {
                let k = self.mkeys.get(s).and_then(|m| m.as_ref()).ok_or(Fault::Unknown)?;
                if key_dev(k.pd) != Some(dev)
                    || k.flags.intersects(MkeyInitFlags::BLOCK_SIGNATURE | MkeyInitFlags::CRYPTO)
                {
                    return Err(Fault::Unknown);
                }
                let total: u64 = k.layout.runs.iter().map(|r| r.2).sum();
                if k.pd != pd || !k.valid || k.tag != tag || !allowed(k.access) || off + len > total {
                    return Err(Fault::Prot);
                }
                let mut out = Runs::new();
                let (mut at, end) = (0u64, off + len);
                for &(mr, moff, rlen) in &k.layout.runs {
                    let (lo, hi) = (at.max(off), (at + rlen).min(end));
                    at += rlen;
                    if lo >= hi {
                        continue;
                    }
                    // Entries must name live MRs of the mkey's PD, in range, writable for a
                    // write: the device's answer otherwise is not published.
                    let m = self.mrs.get(mr).and_then(|m| m.as_ref()).ok_or(Fault::Unknown)?;
                    let w = !need.write || m.access.contains(AccessFlags::LOCAL_WRITE);
                    if m.pd != k.pd || !w || moff + rlen > m.len {
                        return Err(Fault::Unknown);
                    }
                    let start = m.off + moff + (lo - (at - rlen));
                    let start = usize::try_from(start).map_err(|_| Fault::Unknown)?;
                    out.push((m.buf, start, usize::try_from(hi - lo).map_err(|_| Fault::Unknown)?));
                }
                Ok(out)
            }
        }
    }

    pub(super) fn gather(&self, src: &Runs) -> Vec<u8> {
        let mut bytes = Vec::new();
        for &(b, o, l) in src {
            if let Some(d) = self.bufs.get(b).and_then(|x| x.as_ref()) {
                bytes.extend_from_slice(o.checked_add(l).and_then(|e| d.data.get(o..e)).unwrap_or_default());
            }
        }
        bytes
    }

    /// The runs of a scatter/gather list, in order; a protection fault at any SGE.
    fn map_list(&self, locs: &[Loc], dev: usize, pd: usize, need: Need) -> Result<Runs, Fault> {
        let mut out = Runs::new();
        let mut fault = None;
        for l in locs.iter().filter(|l| l.len > 0) {
            match self.map(l.key, l.off, l.len, dev, pd, need) {
                Ok(r) => out.extend(r),
                Err(Fault::Unknown) => return Err(Fault::Unknown),
                Err(Fault::Prot) => fault = Some(Fault::Prot),
            }
        }
        match fault {
            Some(f) => Err(f),
            None => Ok(out),
        }
    }

    /// Copy the bytes of `src` into `dst` (the same total length).
    fn copy(&mut self, src: &Runs, dst: &Runs) {
        let bytes = self.gather(src);
        self.scatter(&bytes, dst);
    }

    /// Whether `runs` touch bytes a scatter-to-CQE receive of this op has not written yet, or
    /// that a READ or atomic before them in the op lands in.
    pub(super) fn touches_pending(&self, runs: &Runs) -> bool {
        self.pending.iter().any(|(dst, _)| overlaps(dst, runs)) || overlaps(&self.landing, runs)
    }

    /// Item 74: the provider copies a small received payload from the CQE when it is polled,
    /// after every WR of the op.
    pub(super) fn land_pending(&mut self) {
        for (dst, bytes) in std::mem::take(&mut self.pending) {
            self.scatter(&bytes, &dst);
        }
    }

    pub(super) fn scatter(&mut self, bytes: &[u8], dst: &Runs) {
        let mut at: usize = 0;
        for &(b, o, l) in dst {
            if let Some(d) = self.bufs.get_mut(b).and_then(|x| x.as_mut()) {
                let data = Arc::make_mut(&mut d.data);
                let to = o.checked_add(l).and_then(|e| data.get_mut(o..e));
                let from = at.checked_add(l).and_then(|e| bytes.get(at..e));
                if let (Some(to), Some(from)) = (to, from) {
                    to.copy_from_slice(from);
                }
            }
            at = at.saturating_add(l);
        }
    }
}

/// A chain whose LOCAL_INV or SEND_WITH_INV names an mkey that a READ or atomic before it
/// scatters its answer through. Without `IBV_SEND_FENCE` the invalidation may run before the
/// answer lands (on the simulator's fabric a SEND_WITH_INV to a QP connected to itself does,
/// and the READ completes with LOC_PROT_ERR): left open, not generated. A WRITE or SEND
/// gathers its data as its request leaves, so one through the mkey is generated (item 84).
fn invalidates_a_landing(posted: &[Posted]) -> bool {
    let mut landing: Vec<usize> = Vec::new();
    for p in posted {
        let Posted::Data { wr, .. } = p else { continue };
        if let Wr::Read { .. } | Wr::Atomic { .. } = *wr {
            landing.extend(sges(wr).iter().filter_map(|l| if let Key::Mkey(s, _) = l.key { Some(s) } else { None }));
        }
        if let Wr::SendInv { mkey, .. } | Wr::LocalInv { mkey, .. } = *wr
            && landing.contains(&mkey)
        {
            return true;
        }
    }
    false
}

/// The SGEs a data WR's list holds (item 87: the count includes empty ones).
fn sges(wr: &Wr) -> Vec<Loc> {
    match *wr {
        Wr::Write { local, more, .. } | Wr::Read { local, more, .. } | Wr::Send { local, more, .. } => {
            std::iter::once(local).chain(more).collect()
        }
        Wr::WriteImm { local, .. } | Wr::SendImm { local, .. } | Wr::SendInv { local, .. } => vec![local],
        Wr::Atomic { local, .. } => vec![local],
        _ => Vec::new(),
    }
}

/// The bytes a data WR moves: empty SGEs are dropped and never looked up (item 87).
fn total(wr: &Wr) -> u64 {
    sges(wr).iter().map(|l| u64::from(l.len)).sum()
}

fn signaled_of(wr: &Wr) -> bool {
    match *wr {
        Wr::Write { signaled, .. }
        | Wr::Read { signaled, .. }
        | Wr::Send { signaled, .. }
        | Wr::WriteImm { signaled, .. }
        | Wr::SendImm { signaled, .. }
        | Wr::SendInv { signaled, .. }
        | Wr::Atomic { signaled, .. }
        | Wr::LocalInv { signaled, .. } => signaled,
        _ => false,
    }
}
