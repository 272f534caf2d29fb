//! The `ibv_wr_start … ibv_wr_complete` chain: the builders ([`chain`]-level here), the mkey
//! configure WR and its setters ([`umr`]), the signature setter ([`sig`]); then the doorbell.
//! `ibv_post_send` ([`legacy`]), receives and `mlx5dv_qp_cancel_posted_send_wrs` too.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{Error, MkeyConfFlags, MkeyHandle, Op, Qp, QpHandle, QpState, RecvWr, Result, SendFlags, Sge, WrOp};

use super::{Lower, Provider, QpObj};
use crate::device::contract::{UmrWqe, WqeKind};
use crate::host::Host;

mod crypto;
mod encode;
mod legacy;
mod sig;
mod umr;

use umr::Layout;

/// An open `mlx5dv_wr_mkey_configure` whose setters have not all arrived.
struct OpenConfigure {
    qp: QpHandle,
    /// Translation bytes written by a layout setter in this WR.
    xlat_bytes: u32,
    mkey: MkeyHandle,
    umr: UmrWqe,
    wr_id: u64,
    signaled: bool,
    expected: u8,
    done: u8,
    num_desc: u16,
}

/// The provider's state during one `ibv_wr_start … ibv_wr_complete`.
// The vectors are the post's scratch, borrowed: a chain owns nothing to drop but `open`.
struct Chain<'s> {
    err: i32,
    nreq: u32,
    /// The QP's `sq.max_gs`.
    max_gs: u32,
    /// The QP's `max_inline_data`.
    max_inline: i64,
    /// The longest `mlx5dv_wr_memcpy` (`dma_mmo_caps.dma_max_size`).
    memcpy_max: u64,
    /// WQEs outstanding before the chain, and the queue's `max_post`.
    room: (u32, u32),
    wqes: &'s mut Vec<Pending>,
    /// The kinds of the chain's [`PendingKind::Built`] WQEs, by index.
    built: &'s mut Vec<WqeKind>,
    open: Option<OpenConfigure>,
}

/// A WQE the chain built, written into the ring at `ibv_wr_complete`.
#[derive(Debug, Clone)]
struct Pending {
    wr_id: u64,
    flags: SendFlags,
    /// The `ibv_wc_opcode` a UMR or SET_PSV completes with (`sq.wr_data`).
    wr_data: u32,
    kind: PendingKind,
}

/// What a pending WQE holds.
#[derive(Debug, Clone)]
enum PendingKind {
    /// The RDMA or SEND builder of the chain's work request at this index: encoded from the
    /// request itself, so its gather list is never copied; with the index of the inline data
    /// that replaces its gather list.
    Data(usize, Option<usize>),
    /// A WQE the builders and setters made (UMR, SET_PSV, LOCAL_INV), at this index of the
    /// chain's built kinds: kept apart, a large kind is not copied with every data WQE.
    Built(usize),
    /// The program's own WQE bytes, of the chain's `mlx5dv_wr_raw_wqe` at this index.
    Raw(usize),
}

/// The fence mode of a WQE with `flags`, after a WQE that asks the next to fence if
/// `after_fencing` (`mlx5_post_send`'s `fence` / `next_fence`).
fn fence_mode(flags: SendFlags, after_fencing: bool) -> u8 {
    use mlx5_dv::prm::wqe::ctrl::fence as fm;
    if flags.contains(SendFlags::FENCE) {
        fm::SMALL_AND_FENCE
    } else if after_fencing {
        fm::INITIATOR_SMALL
    } else {
        fm::NONE
    }
}

/// Whether WQE `n` of a chain is the UMR of a configure whose SET_PSVs follow: libmlx5
/// (`suppress_umr_completion`) clears its completion flag, even the one `sq_sig_all` sets.
fn umr_before_psv(wqes: &[Pending], built: &[WqeKind], n: usize) -> bool {
    let kind = |i: usize| match wqes.get(i).map(|p| &p.kind) {
        Some(PendingKind::Built(b)) => built.get(*b),
        _ => None,
    };
    matches!(kind(n), Some(WqeKind::Umr(_))) && matches!(kind(n + 1), Some(WqeKind::SetPsv { .. }))
}

/// `mlx5_wr_raw_wqe`: the first `ds` × 16 bytes of the program's WQE, with the control
/// segment's WQE index replaced by the queue's (its opmod, opcode and the rest are the
/// program's), appended to `out`.
fn raw_wqe(wqe: &[u8], wqe_index: u16, out: &mut Vec<u8>) {
    let ds = wqe.get(7).map_or(0, |b| usize::from(b & 0x3f));
    let at = out.len();
    out.extend_from_slice(wqe.get(..ds * 16).unwrap_or(wqe));
    if let Some(idx) = out.get_mut(at + 1..at + 3) {
        idx.copy_from_slice(&wqe_index.to_be_bytes());
    }
}

/// Buffers `post_send` reuses from call to call, so that a warm post allocates nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct PostScratch {
    wqes: Vec<Pending>,
    built: Vec<WqeKind>,
    /// The chain's WQE bytes, back to back, and where each WQE ends.
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// The data WQE of the chain's op `i`, with the inline data of op `inl` if it has some.
fn data_wqe(ops: &[WrOp], i: usize, inl: Option<usize>) -> Option<encode::DataWqe<'_>> {
    let (_, _, d) = ops.get(i).and_then(encode::DataWqe::of)?;
    match inl.map(|j| ops.get(j)) {
        None => Some(d),
        Some(Some(WrOp::InlineData(bytes))) => Some(d.with_inline(bytes)),
        Some(_) => None,
    }
}

impl Chain<'_> {
    fn fail(&mut self, e: i32) {
        if self.err == 0 {
            self.err = e;
        }
    }
}

impl Provider {
    /// `ibv_post_recv`: each WR becomes a receive WQE in the ring; the doorbell record then
    /// rings for the WRs posted before a failing one.
    pub(crate) fn post_recv(&mut self, low: &mut Lower<'_>, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        let op = Op::PostRecv;
        let q = self.qps.get_mut(qp.handle, op)?;
        q.rings.adopt_program_posts(low.host);
        let (dev, qpn, max_gs, max_post) = (q.dev, q.qpn, q.rq_state_max_gs, q.rq_max_post);
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))?;
        let mut failed = None;
        let mut posted = 0;
        for (n, wr) in wrs.iter().enumerate() {
            if q.rings.rq.outstanding() >= max_post {
                failed = Some(Error::new(op, ENOMEM, format!("receive WR {n}: the receive queue is full")));
                break;
            }
            // qp_state_max_gs: -1 from creation and after RESET, max_gs from INIT.
            if i64::try_from(wr.sge.len()).unwrap_or(i64::MAX) > max_gs {
                let why = format!("receive WR {n}: {} SGEs, at most {max_gs} in the QP's state", wr.sge.len());
                failed = Some(Error::new(op, EINVAL, why));
                break;
            }
            // Zero-length entries are skipped, never written into the WQE.
            let sge: Vec<Sge> = wr.sge.iter().filter(|s| s.length != 0).copied().collect();
            q.rings.rq.write(low.host, wr.wr_id, &sge).map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
            posted += 1;
        }
        if posted > 0 {
            q.rings.recv_doorbell(low.host);
            d.ring_rq(low.host, qpn);
        }
        low.run();
        failed.map_or(Ok(()), Err)
    }

    /// One `ibv_wr_start`, the builders and setters of `ops`, and `ibv_wr_complete`: the
    /// WQEs go into the send queue as bytes, then the doorbell record and the doorbell.
    pub(crate) fn post_send(&mut self, low: &mut Lower<'_>, qp: &Qp, ops: &[WrOp]) -> Result<()> {
        if let Ok(q) = self.qps.get_mut(qp.handle, Op::PostSend) {
            q.rings.adopt_program_posts(low.host);
        }
        if self.post_one_block_chain(low, qp, ops) {
            return Ok(());
        }
        let mut scratch = self.post.take().unwrap_or_default();
        let r = self.post_chain(low, qp, ops, &mut scratch);
        scratch.wqes.clear();
        scratch.built.clear();
        self.post = Some(scratch);
        r
    }

    fn post_chain(&mut self, low: &mut Lower<'_>, qp: &Qp, ops: &[WrOp], s: &mut PostScratch) -> Result<()> {
        let op = Op::PostSend;
        let q = self.qps.get(qp.handle, op)?;
        if !q.wr_api {
            return Err(Error::new(op, EOPNOTSUPP, "the QP was created without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS"));
        }
        // A UD WR's address comes through ibv_post_send's wr.ud (the C ABI's builders use it).
        // An XRC WR's SRQ number too (the C ABI's builders post XRC chains through it).
        if (!q.rc && q.qp_type != mlx5_dv::qp_type::UC) || q.qp_type == mlx5_dv::qp_type::XRC_SEND {
            return Err(Error::new(op, EOPNOTSUPP, "the WR builders are simulated on RC and UC QPs"));
        }
        let outstanding = q.rings.sq.outstanding();
        let (max_post, max_gs, mkey_ops, real) = (q.max_post, q.max_gs, q.mkey_ops, q.wr_complete_real);
        let dv_ops = q.mlx5_ops;
        let max_inline = q.max_inline_data;
        let update_tag = self.contexts.get(q.ctx, op).is_ok_and(|c| c.update_tag());
        let (wqes, built) = (&mut s.wqes, &mut s.built);
        let memcpy_max = self.limits.dma_max_size();
        let room = (outstanding, max_post);
        let mut ch = Chain { err: 0, nreq: 0, max_gs, max_inline, memcpy_max, room, wqes, built, open: None };
        for (i, w) in ops.iter().enumerate() {
            // libmlx5 leaves the op NULL on a QP created without it (a call faults).
            let missing = match w {
                WrOp::Memcpy { .. } => !dv_ops.contains(mlx5_dv::dv_qp::WITH_MEMCPY),
                WrOp::RawWqe { .. } => !dv_ops.contains(mlx5_dv::dv_qp::WITH_RAW_WQE),
                _ => !mkey_ops && w.is_mlx5dv_mkey_op(),
            };
            if missing {
                ch.fail(EOPNOTSUPP);
                continue;
            }
            self.apply_op(qp.handle, i, w, &mut ch, outstanding, max_post, update_tag);
        }
        let (err, nreq) = (ch.err, ch.nreq);
        drop(ch);
        if !real {
            return Err(Error::new(op, EINVAL, "the QP is not in RTS since it was created or reset"));
        }
        if err != 0 {
            return Err(Error::new(op, err, "a builder or setter failed; nothing was posted"));
        }
        let q = self.qps.get_mut(qp.handle, op)?;
        if s.wqes.iter().all(|p| matches!(p.kind, PendingKind::Data(..))) {
            // Data WQEs only: each is encoded and written in one step.
            let rollback = q.rings.sq.cur_post;
            for (n, p) in s.wqes.iter().enumerate() {
                let c = encode::CtrlFields {
                    wqe_index: q.rings.sq.cur_post as u16,
                    qpn: q.qpn,
                    signaled: p.flags.contains(SendFlags::SIGNALED) || q.sig_all,
                    solicited: p.flags.contains(SendFlags::SOLICITED),
                    fm: fence_mode(p.flags, n == 0 && q.fence_next),
                };
                s.bytes.clear();
                let encoded = match &p.kind {
                    PendingKind::Data(i, inl) => data_wqe(ops, *i, *inl),
                    PendingKind::Built(_) | PendingKind::Raw(_) => None,
                };
                let Some(d) = encoded else {
                    q.rings.sq.cur_post = rollback;
                    return Err(Error::new(op, EINVAL, "a data WQE lost its work request"));
                };
                if let Err(e) = encode::encode_data(&d, c, &mut s.bytes) {
                    // Nothing is posted: the WQEs written so far lie past the producer index.
                    q.rings.sq.cur_post = rollback;
                    return Err(Error::new(op, EINVAL, format!("WQE encoding: {e}")));
                }
                q.rings.sq.write(low.host, &s.bytes, p.wr_id, p.wr_data, n as u32);
                if let Some(log) = &mut self.wqe_log
                    && let Ok(r) = mlx5_dv::WqeRecord::decode(q.qpn, s.bytes.clone())
                {
                    log.push(r);
                }
            }
            if !s.wqes.is_empty() {
                q.fence_next = false;
            }
            Self::ring(low, q, nreq);
            return Ok(());
        }
        let mut fence = q.fence_next;
        let mut cur_post = q.rings.sq.cur_post;
        s.bytes.clear();
        s.ends.clear();
        for (n, p) in s.wqes.iter().enumerate() {
            let c = encode::CtrlFields {
                wqe_index: cur_post as u16,
                qpn: q.qpn,
                signaled: p.flags.contains(SendFlags::SIGNALED) || q.sig_all && !umr_before_psv(&s.wqes, &s.built, n),
                solicited: p.flags.contains(SendFlags::SOLICITED),
                fm: fence_mode(p.flags, fence),
            };
            let start = s.bytes.len();
            let encoded = match &p.kind {
                PendingKind::Data(i, inl) => match data_wqe(ops, *i, *inl) {
                    Some(d) => encode::encode_data(&d, c, &mut s.bytes),
                    None => return Err(Error::new(op, EINVAL, "a data WQE lost its work request")),
                },
                PendingKind::Built(i) => match s.built.get(*i) {
                    Some(kind) => encode::encode(kind, c).map(|b| s.bytes.extend_from_slice(&b)),
                    None => return Err(Error::new(op, EINVAL, "a built WQE was lost")),
                },
                PendingKind::Raw(i) => match ops.get(*i) {
                    Some(WrOp::RawWqe { wqe, .. }) => {
                        raw_wqe(wqe, c.wqe_index, &mut s.bytes);
                        Ok(())
                    }
                    _ => return Err(Error::new(op, EINVAL, "a raw WQE lost its bytes")),
                },
            };
            encoded.map_err(|e| Error::new(op, EINVAL, format!("WQE encoding: {e}")))?;
            fence = match p.kind {
                PendingKind::Built(i) => {
                    matches!(
                        s.built.get(i),
                        Some(WqeKind::Umr(_) | WqeKind::SetPsv { .. } | WqeKind::LocalInv { .. } | WqeKind::BindMw(_))
                    )
                }
                // raw_wqe_init clears fm_cache, and the program's control segment decides.
                PendingKind::Data(..) | PendingKind::Raw(_) => false,
            };
            cur_post = cur_post.wrapping_add((s.bytes.len() - start).div_ceil(64) as u32);
            s.ends.push(s.bytes.len());
        }
        q.fence_next = fence;
        let mut start = 0;
        for (n, (p, &end)) in s.wqes.iter().zip(&s.ends).enumerate() {
            let bytes = s.bytes.get(start..end).unwrap_or_default();
            start = end;
            q.rings.sq.write(low.host, bytes, p.wr_id, p.wr_data, n as u32);
            if let Some(log) = &mut self.wqe_log
                && let Ok(r) = mlx5_dv::WqeRecord::decode(q.qpn, bytes.to_vec())
            {
                log.push(r);
            }
        }
        Self::ring(low, q, nreq);
        Ok(())
    }

    /// [`Provider::post_blocks`] on an RC QP in RTS whose WQEs are not being recorded, and
    /// the doorbell: true if the chain is posted, false (nothing posted) for the general path.
    fn post_one_block_chain(&mut self, low: &mut Lower<'_>, qp: &Qp, ops: &[WrOp]) -> bool {
        if self.wqe_log.is_some() {
            return false;
        }
        let Ok(q) = self.qps.get_mut(qp.handle, Op::PostSend) else { return false };
        if !q.rc || !q.wr_complete_real || !q.wr_api {
            return false;
        }
        let room = (q.rings.sq.outstanding(), q.max_post, q.max_gs);
        if !Self::post_blocks(low.host, q, ops, room) {
            return false;
        }
        Self::ring(low, q, ops.len() as u32);
        true
    }

    /// A chain of data WQEs of one basic block each, with room for them all: each encoded
    /// straight into its slot. False for any other chain, with nothing posted (the slots past
    /// the producer index may have been written, as they may be at any time): the general
    /// path takes it, and reports what it finds. `room` is (outstanding, max_post, max_gs).
    fn post_blocks(
        host: &mut Host,
        q: &mut QpObj,
        ops: &[WrOp],
        (outstanding, max_post, max_gs): (u32, u32, u32),
    ) -> bool {
        if ops.is_empty() || u64::from(outstanding) + ops.len() as u64 > u64::from(max_post) {
            return false;
        }
        let Some(slots) = q.rings.sq.slots(host) else { return false };
        let rollback = q.rings.sq.cur_post;
        let (qpn, fence, sig_all) = (q.qpn, q.fence_next, q.sig_all);
        for (n, w) in ops.iter().enumerate() {
            let sq = &mut q.rings.sq;
            let posted = encode::DataWqe::of(w).is_some_and(|(wr_id, flags, d)| {
                let c = encode::CtrlFields {
                    wqe_index: sq.cur_post as u16,
                    qpn,
                    signaled: flags.contains(SendFlags::SIGNALED) || sig_all,
                    solicited: flags.contains(SendFlags::SOLICITED),
                    fm: fence_mode(flags, n == 0 && fence),
                };
                d.sge().len() as u64 <= u64::from(max_gs)
                    && sq.put_block(slots, wr_id, n as u32, |slot| encode::one_block_into(&d, c, slot))
            });
            if !posted {
                q.rings.sq.cur_post = rollback;
                return false;
            }
        }
        q.fence_next = false;
        true
    }

    /// The chain's `nreq` WQEs are in the ring: the doorbell, and the device runs.
    fn ring(low: &mut Lower<'_>, q: &mut QpObj, nreq: u32) {
        q.rings.sq.head = q.rings.sq.head.wrapping_add(nreq);
        q.rings.send_doorbell(low.host);
        if let Some(d) = low.devices.get_mut(q.dev) {
            d.ring_sq(low.host, q.qpn);
        }
        low.run();
    }

    /// `mlx5dv_qp_cancel_posted_send_wrs`: in SQD, turn the WQEs with `wr_id` that the device
    /// has not run into NOPs, in the ring.
    pub(crate) fn cancel_posted_send_wrs(&mut self, low: &mut Lower<'_>, qp: &Qp, wr_id: u64) -> Result<u32> {
        let op = Op::CancelPostedSendWrs;
        let q = self.qps.get_mut(qp.handle, op)?;
        let d = low.devices.get(q.dev).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))?;
        if d.qp_state(q.qpn) != Some(QpState::Sqd) {
            return Err(Error::new(op, EINVAL, "the QP is not in SQD"));
        }
        let from = d.sq_consumer(q.qpn).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))?;
        Ok(q.rings.sq.cancel(low.host, from, wr_id))
    }

    /// `_common_wqe_init`: room in the send queue for one more WQE of this chain.
    fn wqe_init(ch: &mut Chain, outstanding: u32, max_post: u32) -> bool {
        if u64::from(outstanding) + u64::from(ch.nreq) >= u64::from(max_post) {
            ch.fail(ENOMEM);
            return false;
        }
        true
    }

    /// `_mlx5_send_wr_set_sge_list`: more entries than `sq.max_gs` is ENOMEM (zero-length
    /// entries are skipped when the WQE is written).
    fn sge_list(ch: &mut Chain, sge: &[Sge]) {
        if sge.len() as u64 > u64::from(ch.max_gs) {
            ch.fail(ENOMEM);
        }
    }

    /// `_mlx5_send_wr_set_inline_data(_list)`: more than `max_inline_data` bytes is ENOMEM;
    /// the bytes become the open data WR's payload. Inline data with no data WR open is EINVAL.
    fn set_inline(ch: &mut Chain, index: usize, len: usize) {
        if i64::try_from(len).unwrap_or(i64::MAX) > ch.max_inline {
            ch.fail(ENOMEM);
            return;
        }
        let open = ch.open.is_none();
        match ch.wqes.last_mut() {
            Some(Pending { kind: PendingKind::Data(_, inl), .. }) if open => *inl = Some(index),
            _ => ch.fail(EINVAL),
        }
    }

    fn push(ch: &mut Chain, wr_id: u64, flags: SendFlags, opcode: u32, kind: WqeKind) {
        let wr_data = match kind {
            WqeKind::Umr(_)
            | WqeKind::SetPsv { .. }
            | WqeKind::LocalInv { .. }
            | WqeKind::BindMw(_)
            | WqeKind::Memcpy { .. } => opcode,
            _ => 0,
        };
        let i = ch.built.len();
        ch.built.push(kind);
        Self::push_pending(ch, Pending { wr_id, flags, wr_data, kind: PendingKind::Built(i) });
    }

    fn push_pending(ch: &mut Chain, p: Pending) {
        ch.nreq += 1;
        ch.wqes.push(p);
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_op(
        &mut self,
        qp: QpHandle,
        index: usize,
        w: &WrOp,
        ch: &mut Chain,
        outstanding: u32,
        max_post: u32,
        update_tag: bool,
    ) {
        use mlx5_dv::wc_opcode as wo;
        match w {
            WrOp::RdmaWrite { .. }
            | WrOp::RdmaWriteImm { .. }
            | WrOp::RdmaRead { .. }
            | WrOp::Send { .. }
            | WrOp::SendImm { .. }
            | WrOp::SendInv { .. } => {
                let Some((wr_id, flags, d)) = encode::DataWqe::of(w) else { return };
                // A builder after an unfinished configure starts a new WQE; the UMR is abandoned.
                ch.open = None;
                if Self::wqe_init(ch, outstanding, max_post) {
                    Self::sge_list(ch, d.sge());
                    Self::push_pending(ch, Pending { wr_id, flags, wr_data: 0, kind: PendingKind::Data(index, None) });
                }
            }
            WrOp::AtomicCmpSwp { wr_id, flags, rkey, remote_addr, sge, .. }
            | WrOp::AtomicFetchAdd { wr_id, flags, rkey, remote_addr, sge, .. } => {
                let (swap_add, compare) = match w {
                    WrOp::AtomicCmpSwp { compare, swap, .. } => (*swap, Some(*compare)),
                    WrOp::AtomicFetchAdd { add, .. } => (*add, None),
                    _ => return,
                };
                ch.open = None;
                if Self::wqe_init(ch, outstanding, max_post) {
                    // _mlx5_send_wr_set_sge: an empty entry writes no data segment.
                    let sge = sge.iter().filter(|s| s.length != 0).copied().collect();
                    let kind = WqeKind::Atomic { rkey: *rkey, raddr: *remote_addr, swap_add, compare, sge };
                    Self::push(ch, *wr_id, *flags, 0, kind);
                }
            }
            WrOp::InlineData(bytes) => Self::set_inline(ch, index, bytes.len()),
            WrOp::LocalInv { wr_id, flags, invalidate_rkey } => {
                // As a builder: a new WQE.
                ch.open = None;
                if Self::wqe_init(ch, outstanding, max_post) {
                    Self::push(ch, *wr_id, *flags, wo::LOCAL_INV, WqeKind::LocalInv { key: *invalidate_rkey });
                }
            }
            WrOp::BindMw { wr_id, flags, bind } => {
                // _build_umr_wqe: always a type-2 bind; set_bind_wr's error is kept unless
                // one came first.
                ch.open = None;
                if Self::wqe_init(ch, outstanding, max_post) {
                    match super::mw::bind_kind(bind, true) {
                        Ok(kind) => Self::push(ch, *wr_id, *flags, mlx5_dv::wc_opcode::BIND_MW, kind),
                        Err((e, _)) => ch.fail(e),
                    }
                }
            }
            WrOp::Memcpy { wr_id, flags, dest_lkey, dest_addr, src_lkey, src_addr, length } => {
                // mlx5_wr_memcpy: the length first (0, or past the device's longest, is
                // EINVAL), then room; 2 GiB is written as a byte count of 0.
                ch.open = None;
                if *length == 0 || *length > ch.memcpy_max {
                    ch.fail(EINVAL);
                    return;
                }
                if Self::wqe_init(ch, outstanding, max_post) {
                    let n = if *length == mlx5_dv::prm::wqe::mmo::DMA_MAX_SIZE { 0 } else { *length as u32 };
                    let src = Sge { addr: *src_addr, length: n, lkey: *src_lkey };
                    let dest = Sge { addr: *dest_addr, length: n, lkey: *dest_lkey };
                    // The metadata's scratch buffer, which libmlx5 registers on the PD, is not
                    // modelled: the copy never reads it.
                    Self::push(ch, *wr_id, *flags, wo::DRIVER3, WqeKind::Memcpy { src, dest, scratch: (0, 0) });
                }
            }
            WrOp::RawWqe { wr_id, .. } => {
                // raw_wqe_init: room, then the program's bytes as they are.
                ch.open = None;
                if Self::wqe_init(ch, outstanding, max_post) {
                    let p = Pending {
                        wr_id: *wr_id,
                        flags: SendFlags::empty(),
                        wr_data: wo::DRIVER2,
                        kind: PendingKind::Raw(index),
                    };
                    Self::push_pending(ch, p);
                }
            }
            WrOp::MkeyConfigure { wr_id, flags, mkey, num_setters, conf_flags, comp_mask } => self.configure(
                qp,
                ch,
                *wr_id,
                *flags,
                mkey,
                *num_setters,
                *conf_flags,
                *comp_mask,
                outstanding,
                max_post,
                update_tag,
            ),
            WrOp::SetMkeyAccessFlags(a) => self.set_access(ch, *a),
            WrOp::SetMkeySigBlock(attr) => self.set_sig(ch, attr),
            WrOp::SetMkeyCrypto(attr) => self.set_crypto(ch, attr),
            WrOp::SetMkeyLayoutList(sge) => self.set_layout(qp, ch, Layout::List(sge)),
            WrOp::SetMkeyLayoutInterleaved { repeat_count, entries } => {
                self.set_layout(qp, ch, Layout::Interleaved(*repeat_count, entries))
            }
            WrOp::MrList { wr_id, flags, mkey, access, sge } => {
                let room = (outstanding, max_post, update_tag);
                self.mr_layout(qp, ch, (*wr_id, *flags, mkey, *access), room, Layout::List(sge));
            }
            WrOp::MrInterleaved { wr_id, flags, mkey, access, repeat_count, entries } => {
                let room = (outstanding, max_post, update_tag);
                let layout = Layout::Interleaved(*repeat_count, entries);
                self.mr_layout(qp, ch, (*wr_id, *flags, mkey, *access), room, layout);
            }
        }
    }

    /// `mlx5dv_wr_mr_list` / `mlx5dv_wr_mr_interleaved`: a configure with two setters, the
    /// access flags then the layout. `room` is (outstanding, max_post, update_tag).
    fn mr_layout(
        &mut self,
        qp: QpHandle,
        ch: &mut Chain,
        (wr_id, flags, mkey, access): (u64, SendFlags, &mlx5_dv::Mkey, mlx5_dv::AccessFlags),
        (outstanding, max_post, update_tag): (u32, u32, bool),
        layout: Layout<'_>,
    ) {
        let none = MkeyConfFlags::empty();
        self.configure(qp, ch, wr_id, flags, mkey, 2, none, 0, outstanding, max_post, update_tag);
        self.set_access(ch, access);
        self.set_layout(qp, ch, layout);
    }
}
