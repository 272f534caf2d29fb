//! Tag-matching SRQs as libmlx5 keeps them (`mlx5_create_srq_ex`, `mlx5_post_srq_ops`,
//! `handle_tag_matching`): the tag list of `max_num_tags + 1` entries with its free list, the
//! ring of signaled list operations sized by the command QP's send queue, the unexpected
//! counts, and the reading of tag-matching CQEs.
//!
//! The command QP's send queue is sized as `create_cmd_qp` asks (`max_send_wr = max_ops`, one
//! SGE, an RC QP's WQE); its operations go to the device as list operations rather than as
//! WQEs in a ring of a QP of its own (the command QP takes no QP number here).

use mlx5_dv::errno::{EINVAL, ENOMEM};
use mlx5_dv::{
    CqHandle, DvSendOpsFlags, Error, Op, QpCap, Result, SrqOpKind, SrqOpWr, Wc, WcFlags, ops_flags, qp_type, wc_opcode,
    wc_status,
};

use super::{Lower, Provider};
use crate::device::contract::tm::{TMC_SUCCESS, app_op};
use crate::device::firmware::tm::{TmListOp, list_opcode};
use crate::host::Host;
use crate::profile::DataPathSection;

/// `MLX5_TM_MAX_SYNC_DIFF`.
const MAX_SYNC_DIFF: u32 = 0x3fff;

/// `struct mlx5_tag_entry`.
#[derive(Debug, Clone, Copy, Default)]
struct TagEntry {
    next: Option<u32>,
    wr_id: u64,
    phase_cnt: u32,
    size: u32,
    expect_cqe: i8,
}

/// `struct mlx5_srq_op`.
#[derive(Debug, Clone, Copy, Default)]
struct OpEntry {
    tag: Option<u32>,
    wr_id: u64,
    wqe_head: u32,
}

/// A tag-matching SRQ's provider state.
#[derive(Debug, Clone)]
pub(super) struct TmSw {
    list: Vec<TagEntry>,
    head: u32,
    tail: u32,
    ops: Vec<OpEntry>,
    op_head: u32,
    op_tail: u32,
    /// The command QP's send queue: WRs posted, WRs retired, most outstanding.
    sq_head: u32,
    sq_tail: u32,
    max_post: u32,
    unexp_in: u32,
    unexp_out: u32,
    /// The SRQ's CQ, which it holds.
    pub(super) cq: CqHandle,
}

impl TmSw {
    /// The state for `max_num_tags` tags and the command QP of `max_ops` operations; EINVAL
    /// when that QP's send queue is past the device's (`create_qp` refuses it).
    pub(super) fn new(lim: &DataPathSection, cq: CqHandle, max_num_tags: u32, max_ops: u32) -> Result<Self> {
        let op = Op::CreateSrq;
        let rc = qp_type::RC;
        let ops = super::qp::default_ops(rc).unwrap_or_default();
        let overhead = super::qp::sq_overhead(rc, ops, DvSendOpsFlags::empty());
        let cap = QpCap { max_send_wr: max_ops, max_send_sge: 1, ..QpCap::default() };
        let sizes = super::qp::size_queues(lim, &cap, overhead, true).map_err(|why| Error::new(op, EINVAL, why))?;
        let n = max_num_tags as usize;
        let mut list = Vec::new();
        list.try_reserve_exact(n + 1).map_err(|_| Error::new(op, ENOMEM, "no memory for the tag list"))?;
        list.extend((0..=n).map(|i| TagEntry { next: (i < n).then_some(i as u32 + 1), ..TagEntry::default() }));
        Ok(TmSw {
            list,
            head: 0,
            tail: max_num_tags,
            ops: vec![OpEntry::default(); sizes.sq_bbs as usize],
            op_head: 0,
            op_tail: 0,
            sq_head: 0,
            sq_tail: 0,
            max_post: sizes.max_post,
            unexp_in: 0,
            unexp_out: 0,
            cq,
        })
    }

    /// `mlx5_tm_release_tag`.
    fn release(&mut self, t: u32) {
        let Some(e) = self.list.get_mut(t as usize) else { return };
        // An int8_t in libmlx5: a misused handle may wrap it, never panic here.
        e.expect_cqe = e.expect_cqe.wrapping_sub(1);
        if e.expect_cqe == 0 {
            e.next = None;
            if let Some(tail) = self.list.get_mut(self.tail as usize) {
                tail.next = Some(t);
            }
            self.tail = t;
        }
    }

    /// `mlx5_tm_add_op`.
    fn add_op(&mut self, tag: Option<u32>, wr_id: u64, nreq: u32) {
        let mask = (self.ops.len() as u32).wrapping_sub(1);
        if let Some(o) = self.ops.get_mut((self.op_tail & mask) as usize) {
            *o = OpEntry { tag, wr_id, wqe_head: self.sq_head.wrapping_add(nreq) };
        }
        self.op_tail = self.op_tail.wrapping_add(1);
        if let Some(e) = tag.and_then(|t| self.list.get_mut(t as usize)) {
            e.expect_cqe = e.expect_cqe.wrapping_add(1);
        }
    }

    /// One WR of `mlx5_post_srq_ops`: its handle and the device's operation, or the errno.
    fn post(&mut self, wr: &SrqOpWr, nreq: u32) -> std::result::Result<(u32, TmListOp), (i32, &'static str)> {
        // mlx5_wq_overflow on the command QP's send queue.
        if self.sq_head.wrapping_sub(self.sq_tail).wrapping_add(nreq) >= self.max_post {
            return Err((ENOMEM, "the command QP's send queue is full (max_ops outstanding)"));
        }
        let signaled = wr.flags & ops_flags::SIGNALED != 0;
        let sw_cnt = (wr.flags & ops_flags::TM_SYNC != 0).then_some(wr.unexpected_cnt as u16);
        let mut dev = TmListOp { opcode: list_opcode::NOP, signaled, sw_cnt, index: 0, tag: 0, mask: 0, sge: None };
        match &wr.op {
            SrqOpKind::Add { recv_wr_id, sge, tag, mask } => {
                let t = self.head;
                let Some(next) = self.list.get(t as usize).and_then(|e| e.next) else {
                    return Err((ENOMEM, "the tag list is full"));
                };
                self.head = next;
                if wr.flags & ops_flags::TM_SYNC != 0 {
                    self.unexp_out = wr.unexpected_cnt;
                }
                let buf = sge.first().filter(|s| s.length != 0).copied();
                let unexp_out = self.unexp_out;
                if let Some(e) = self.list.get_mut(t as usize) {
                    *e = TagEntry {
                        next: None,
                        wr_id: *recv_wr_id,
                        phase_cnt: unexp_out,
                        size: buf.map_or(e.size, |s| s.length),
                        expect_cqe: e.expect_cqe.wrapping_add(1),
                    };
                }
                if signaled {
                    self.add_op(Some(t), wr.wr_id, nreq);
                }
                dev = TmListOp {
                    opcode: list_opcode::APPEND,
                    index: next as u16,
                    tag: *tag,
                    mask: *mask,
                    sge: buf,
                    ..dev
                };
                Ok((t, dev))
            }
            SrqOpKind::Del { handle } => {
                let t = *handle;
                if t as usize >= self.list.len() {
                    // libmlx5 would index past its list.
                    return Err((EINVAL, "a handle past the tag list"));
                }
                if signaled {
                    self.add_op(Some(t), wr.wr_id, nreq);
                } else {
                    self.release(t);
                }
                Ok((0, TmListOp { opcode: list_opcode::REMOVE, index: t as u16, ..dev }))
            }
            SrqOpKind::Sync => {
                if signaled {
                    self.add_op(None, wr.wr_id, nreq);
                }
                Ok((0, dev))
            }
        }
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).and_then(|s| s.first_chunk::<4>()).map_or(0, |a| u32::from_be_bytes(*a))
}

impl Provider {
    /// `mlx5_post_srq_ops`: each WR in turn, the WRs before a failing one posted; then the
    /// device carries out their list operations.
    pub(crate) fn post_srq_ops(
        &mut self,
        low: &mut Lower<'_>,
        srq: &mlx5_dv::Srq,
        wrs: &[SrqOpWr],
    ) -> Result<Vec<u32>> {
        let op = Op::PostSrqOps;
        let s = self.srqs.get_mut(srq.handle, op)?;
        let (dev, srqn) = (s.dev, s.srqn);
        let Some(tm) = s.tm.as_mut() else {
            return Err(Error::new(op, EINVAL, "not a tag-matching SRQ (no command QP)").with_bad_wr(0));
        };
        let mut handles = Vec::with_capacity(wrs.len());
        let mut list_ops = Vec::with_capacity(wrs.len());
        let mut failed = None;
        for (n, wr) in wrs.iter().enumerate() {
            match tm.post(wr, n as u32) {
                Ok((h, d)) => {
                    handles.push(h);
                    list_ops.push(d);
                }
                Err((e, why)) => {
                    failed = Some(Error::new(op, e, format!("ops WR {n}: {why}")).with_bad_wr(n as u32));
                    break;
                }
            }
        }
        tm.sq_head = tm.sq_head.wrapping_add(list_ops.len() as u32);
        if let Some(d) = low.devices.get_mut(dev) {
            for o in &list_ops {
                d.tm_list_op(low.host, srqn, o);
            }
        }
        low.run();
        failed.map_or(Ok(handles), Err)
    }

    /// A tag-matching CQE (`handle_tag_matching` and the `ibv_wc_read_*` of a lazy poll):
    /// `None` if it names no tag-matching SRQ of this provider.
    pub(super) fn parse_tm(&mut self, host: &mut Host, dev: usize, b: &[u8; 64]) -> Option<Wc> {
        let srqn = be32(b, 32) & 0xff_ffff;
        let s = self.srqs.iter_mut().map(|(_, s)| s).find(|s| s.dev == dev && s.srqn == srqn)?;
        let packet = b[63] >> 4 != mlx5_dv::prm::cqe::opcode::NO_PACKET;
        let (app, info, byte_cnt) = (b[41], u16::from_be_bytes([b[42], b[43]]), be32(b, 44));
        let flags_rqpn = be32(b, 24);
        let mut wc = Wc {
            qp_num: be32(b, 56) & 0xff_ffff,
            byte_len: byte_cnt,
            src_qp: flags_rqpn & 0xff_ffff,
            tm_tag: u64::from(be32(b, 8)) << 32 | u64::from(be32(b, 12)),
            tm_priv: be32(b, 4),
            ..Wc::default()
        };
        if packet && (flags_rqpn >> 28) & 3 != 0 {
            wc.wc_flags |= WcFlags::GRH;
        }
        let tm = s.tm.as_mut()?;
        match app {
            app_op::CONSUMED_MSG_SW_RDNV
            | app_op::CONSUMED_SW_RDNV
            | app_op::MSG_COMPLETION_CANCELED
            | app_op::CONSUMED_MSG
            | app_op::CONSUMED
            | app_op::EXPECTED => {
                if matches!(
                    app,
                    app_op::CONSUMED_MSG_SW_RDNV | app_op::CONSUMED_SW_RDNV | app_op::MSG_COMPLETION_CANCELED
                ) {
                    wc.status = wc_status::TM_RNDV_INCOMPLETE;
                }
                let Some(t) = tm.list.get(usize::from(info)).copied().filter(|t| t.expect_cqe != 0) else {
                    wc.status = wc_status::GENERAL_ERR;
                    return Some(wc);
                };
                wc.wr_id = t.wr_id;
                if !matches!(app, app_op::CONSUMED | app_op::CONSUMED_SW_RDNV) {
                    tm.release(u32::from(info));
                }
                wc.opcode = if packet && matches!(app, app_op::MSG_COMPLETION_CANCELED) {
                    wc_opcode::RECV
                } else {
                    wc_opcode::TM_RECV
                };
                wc.wc_flags |= match app {
                    app_op::CONSUMED_SW_RDNV | app_op::CONSUMED => WcFlags::TM_MATCH,
                    app_op::EXPECTED => WcFlags::TM_DATA_VALID,
                    _ => WcFlags::TM_MATCH | WcFlags::TM_DATA_VALID,
                };
            }
            app_op::REMOVE | app_op::APPEND | app_op::NOOP => {
                if app == app_op::REMOVE && be32(b, 0) & TMC_SUCCESS == 0 {
                    wc.status = wc_status::TM_ERR;
                }
                wc.opcode = match app {
                    app_op::REMOVE => wc_opcode::TM_DEL,
                    app_op::APPEND => wc_opcode::TM_ADD,
                    _ => wc_opcode::TM_SYNC,
                };
                if tm.op_head == tm.op_tail {
                    wc.status = wc_status::GENERAL_ERR;
                    return Some(wc);
                }
                let mask = (tm.ops.len() as u32).wrapping_sub(1);
                let o = tm.ops.get((tm.op_head & mask) as usize).copied().unwrap_or_default();
                tm.op_head = tm.op_head.wrapping_add(1);
                if let Some(t) = o.tag {
                    tm.release(t);
                    if app == app_op::REMOVE && wc.status == wc_status::SUCCESS {
                        tm.release(t);
                    }
                    let phase = u32::from(u16::from_be_bytes([b[4], b[5]]));
                    if tm.list.get(t as usize).is_some_and(|e| e.phase_cnt != phase) {
                        wc.wc_flags |= WcFlags::TM_SYNC_REQ;
                    }
                }
                tm.sq_tail = o.wqe_head.wrapping_add(1);
                wc.wr_id = o.wr_id;
            }
            app_op::UNEXPECTED | app_op::NO_TAG => {
                if app == app_op::UNEXPECTED {
                    tm.unexp_in = tm.unexp_in.wrapping_add(1);
                    if tm.unexp_in.wrapping_sub(tm.unexp_out) > MAX_SYNC_DIFF {
                        wc.wc_flags |= WcFlags::TM_SYNC_REQ;
                    }
                }
                wc.opcode = if app == app_op::UNEXPECTED { wc_opcode::TM_RECV } else { wc_opcode::TM_NO_TAG };
                wc.wr_id = s.ring.complete(host, u16::from_be_bytes([b[60], b[61]])).0;
            }
            _ => {}
        }
        Some(wc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lim() -> DataPathSection {
        DataPathSection::default()
    }

    fn cq() -> CqHandle {
        CqHandle::new(mlx5_dv::BackendId::NONE, 1)
    }

    #[test]
    fn a_full_list_holds_max_num_tags() {
        let mut t = TmSw::new(&lim(), cq(), 2, 8).expect("sizes");
        let add = |id| SrqOpWr {
            wr_id: id,
            flags: 0,
            unexpected_cnt: 0,
            op: SrqOpKind::Add { recv_wr_id: id, sge: vec![], tag: 0, mask: 0 },
        };
        assert_eq!(t.post(&add(1), 0).map(|r| r.0), Ok(0));
        assert_eq!(t.post(&add(2), 1).map(|r| r.0), Ok(1));
        assert_eq!(t.post(&add(3), 2).map(|r| r.0).map_err(|e| e.0), Err(ENOMEM));
    }

    proptest! {
        /// Any sequence of operations, handles and flags: errors, never a panic.
        #[test]
        fn any_ops_sequence_is_safe(ops in proptest::collection::vec((0u8..3, any::<u32>(), 0u32..4, any::<u32>()), 0..64)) {
            let mut t = TmSw::new(&lim(), cq(), 3, 2).expect("sizes");
            for (n, (kind, handle, flags, cnt)) in ops.into_iter().enumerate() {
                let op = match kind {
                    0 => SrqOpKind::Add { recv_wr_id: 1, sge: vec![], tag: 1, mask: 1 },
                    1 => SrqOpKind::Del { handle: handle % 8 },
                    _ => SrqOpKind::Sync,
                };
                let _ = t.post(&SrqOpWr { wr_id: n as u64, flags, unexpected_cnt: cnt, op }, 0);
                t.sq_head = t.sq_head.wrapping_add(1);
                if n % 3 == 0 {
                    t.sq_tail = t.sq_head;
                    if let Some(h) = handle.checked_rem(4) {
                        t.release(h);
                    }
                }
            }
        }
    }
}
