//! SRQs as libmlx5 keeps them (`srq.c`, `mlx5_create_srq`): the WQE buffer sized with room
//! for a wait queue, the linked list of WQEs through their next segments, the bitmap of WQEs
//! the program's polls returned, `head`/`tail`, and the doorbell record's counter.

use mlx5_dv::errno::{EBUSY, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prm::wqe::{DataSeg, INVALID_LKEY, SEND_WQE_DS};
use mlx5_dv::{Error, Op, RecvWr, Result, Sge, Srq, SrqAttr, SrqHandle, SrqInitAttr};

use super::{CtxKind, Lower, Provider};
use crate::device::contract::QueueBuf;
use crate::host::{Dma, Host, QueueBuffer};
use crate::kernel::SrqRequest;

/// `sizeof(struct mlx5_wqe_srq_next_seg)`.
const NEXT_SEG: u32 = 16;

/// An SRQ's buffer and the provider's bookkeeping of it.
#[derive(Debug, Clone, Default)]
pub(super) struct SrqRing {
    pub(super) buf: QueueBuf,
    pub(super) dbrec: u64,
    /// `max_gs`: SGEs a WQE holds.
    max_gs: u32,
    /// `nwqes`: the WQEs of the main list (the rest are the wait queue).
    nwqes: u32,
    pub(super) head: u32,
    pub(super) tail: u32,
    counter: u32,
    wrid: Vec<u64>,
    /// `free_wqe_bitmap`: WQEs whose completions were polled, not yet back in the list.
    free: Vec<bool>,
}

impl SrqRing {
    fn wqe(&self, n: u32) -> u64 {
        self.buf.addr.wrapping_add(u64::from(n) * u64::from(self.buf.stride))
    }

    fn set_next(&self, host: &mut Host, n: u32, next: u32) {
        let _ = host.write(self.wqe(n) + 2, &(next as u16).to_be_bytes());
    }

    fn next_of(&self, host: &Host, n: u32) -> u32 {
        host.read(self.wqe(n) + 2, 2).map_or(0, |b| u32::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn is_free(&self, n: u32) -> bool {
        self.free.get(n as usize).copied().unwrap_or(false)
    }

    fn set_free(&mut self, n: u32, v: bool) {
        if let Some(b) = self.free.get_mut(n as usize) {
            *b = v;
        }
    }

    /// `set_next_tail`.
    fn set_next_tail(&mut self, host: &mut Host, next_tail: u32) {
        self.set_next(host, self.tail, next_tail);
        self.tail = next_tail;
        self.set_free(next_tail, false);
    }

    /// `get_next_contig_wqes`: the first run of free WQEs in `first..last`, as (start, length).
    fn next_contig(&self, first: u32, last: u32) -> (u32, u32) {
        let mut count = 0;
        let mut i = first;
        while i < last {
            if self.is_free(i) {
                count += 1;
            } else if count > 0 {
                break;
            }
            i += 1;
        }
        (i - count, count)
    }

    /// `set_next_contig_wqes`: link the free run closest after `head` (or from 0) at the tail.
    fn link_contig(&mut self, host: &mut Host) -> bool {
        let (mut at, mut count) = self.next_contig(self.head + 1, self.nwqes);
        if count == 0 {
            (at, count) = self.next_contig(0, self.head);
            if count == 0 {
                return false;
            }
        }
        self.set_next(host, self.tail, at);
        self.tail = at + count - 1;
        self.set_free(self.tail, false);
        for i in at..self.tail {
            self.set_next(host, i, i + 1);
            self.set_free(i, false);
        }
        true
    }

    /// One WR into the WQE at `head` (`mlx5_post_srq_recv`'s loop body).
    fn post(&mut self, host: &mut Host, wr: &RecvWr) -> std::result::Result<(), i32> {
        if wr.sge.len() > self.max_gs as usize {
            return Err(EINVAL);
        }
        if self.head == self.tail {
            let next_tail = (self.tail + 1) % self.nwqes.max(1);
            if self.is_free(next_tail) {
                self.set_next_tail(host, next_tail);
            } else if !self.link_contig(host) {
                return Err(ENOMEM);
            }
        }
        let at = self.head;
        if let Some(w) = self.wrid.get_mut(at as usize) {
            *w = wr.wr_id;
        }
        self.head = self.next_of(host, at);
        let mut bytes = Vec::with_capacity((wr.sge.len() + 1) * SEND_WQE_DS);
        let segs = wr.sge.iter().map(|s| DataSeg { byte_count: s.length, lkey: s.lkey, addr: s.addr });
        let end =
            (wr.sge.len() < self.max_gs as usize).then_some(DataSeg { byte_count: 0, lkey: INVALID_LKEY, addr: 0 });
        for d in segs.chain(end) {
            let mut b = [0u8; SEND_WQE_DS];
            d.encode(&mut b).map_err(|_| EINVAL)?;
            bytes.extend_from_slice(&b);
        }
        let _ = host.write(self.wqe(at) + u64::from(NEXT_SEG), &bytes);
        Ok(())
    }

    /// A completion for WQE `index`: its `wrid` and scatter list; the WQE is free again.
    pub(super) fn complete(&mut self, host: &Host, index: u16) -> (u64, Vec<Sge>) {
        let n = u32::from(index) & self.buf.wqe_cnt.saturating_sub(1);
        self.set_free(n, true);
        let len = self.buf.stride.saturating_sub(NEXT_SEG) as usize;
        let bytes = host.read(self.wqe(n) + u64::from(NEXT_SEG), len).unwrap_or_default();
        let r = crate::device::contract::decode_recv(index, bytes);
        (self.wrid.get(n as usize).copied().unwrap_or(0), r.sge)
    }

    fn free_memory(&self, host: &mut Host) {
        host.unmap(self.buf.addr);
        host.unmap(self.dbrec);
    }
}

/// An SRQ of the provider.
#[derive(Debug, Clone)]
pub(super) struct SrqObj {
    ctx: mlx5_dv::ContextHandle,
    pub(super) dev: usize,
    pd: mlx5_dv::PdHandle,
    pub(super) srqn: u32,
    pub(super) ring: SrqRing,
    /// An XRC SRQ's domain and CQ, which it holds.
    pub(super) xrc: Option<mlx5_dv::SrqXrc>,
    /// A tag-matching SRQ's tags and list operations.
    pub(super) tm: Option<Box<super::tm::TmSw>>,
}

/// The sizes `mlx5_alloc_srq_buf` picks: (WQEs in the buffer, WQE bytes, `max_gs`, `nwqes`,
/// wait queue or not), or EINVAL.
fn size_srq(max_wr: u32, max_sge: u32, max_srq_recv_wr: u64, max_recv_wr: u32) -> Option<(u64, u64, u32, u64, bool)> {
    let want = u64::from(max_wr) * 2 + 1;
    let (wr, wq) = if want > max_srq_recv_wr { (u64::from(max_wr) + 1, false) } else { (want, true) };
    let size = (16 + 16 * u64::from(max_sge)).max(32).next_power_of_two();
    if size > u64::from(max_recv_wr) {
        return None;
    }
    let max_gs = u32::try_from((size - 16) / 16).ok()?;
    let nwqes = (u64::from(max_wr) + 1).next_power_of_two();
    Some((wr.next_power_of_two(), size, max_gs, nwqes, wq))
}

impl Provider {
    /// `mlx5_create_srq`: `max_wr` past `2^log_max_srq_sz` or `max_sge` past
    /// `max_rq_desc_sz / 16` is EINVAL; the buffer has room for twice the WRs (a wait queue)
    /// when the device allows; the kernel is told one less than its WQEs; the program gets
    /// `max_wr` = the main list's WQEs less one and `max_sge` = what the WQE holds.
    pub(crate) fn create_srq(&mut self, low: &mut Lower<'_>, attr: &SrqInitAttr) -> Result<Srq> {
        let op = Op::CreateSrq;
        let p = self.pds.get(attr.pd, op)?;
        let (ctx, pdn) = (p.ctx, p.pdn.unwrap_or(0));
        let c = self.contexts.get(ctx, op).map_err(|_| Error::new(op, EINVAL, "context closed"))?;
        let CtxKind::Kernel { .. } = c.kind else {
            return Err(Error::new(op, EOPNOTSUPP, "SRQs are simulated on mlx5 kernel contexts only"));
        };
        let dev = c.dev;
        // ibv_icmd_create_srq takes the domain and CQ handles of an XRC SRQ.
        let xrc = match attr.xrc {
            Some(x) => {
                let (_, xdev, xrcdn) = self.xrcd_of(x.xrcd, op)?;
                let cq = self.cqs.get(x.cq, op)?;
                if xdev != dev || cq.dev != dev {
                    return Err(Error::new(op, EINVAL, "the domain or CQ is another device's"));
                }
                (xrcdn, cq.cqn)
            }
            None => (0, 0),
        };
        // ibv_icmd_create_srq takes a tag-matching SRQ's CQ too.
        let xrc = match attr.tm {
            Some(t) => {
                let cq = self.cqs.get(t.cq, op)?;
                if cq.dev != dev {
                    return Err(Error::new(op, EINVAL, "the CQ is another device's"));
                }
                (0, cq.cqn)
            }
            None => xrc,
        };
        let max_srq_recv_wr = 1u64 << self.limits.log_max_srq_sz;
        if u64::from(attr.max_wr) > max_srq_recv_wr {
            return Err(Error::new(op, EINVAL, format!("max_wr {} > max_srq_recv_wr {max_srq_recv_wr}", attr.max_wr)));
        }
        if attr.max_sge > self.limits.max_rq_desc_sz / 16 {
            return Err(Error::new(op, EINVAL, format!("max_sge {} past max_rq_desc_sz / 16", attr.max_sge)));
        }
        let (max, size, max_gs, nwqes, wq) =
            size_srq(attr.max_wr, attr.max_sge, max_srq_recv_wr, self.limits.max_qp_wr)
                .ok_or_else(|| Error::new(op, EINVAL, "the SRQ WQE is larger than max_recv_wr"))?;
        let bytes = usize::try_from(max * size).map_err(|_| Error::new(op, ENOMEM, "SRQ buffer too large"))?;
        let buf = low
            .host
            .alloc_queue(bytes, QueueBuffer::Srq)
            .ok_or_else(|| Error::new(op, ENOMEM, "no host memory for the SRQ"))?;
        let Some(dbrec) = low.host.alloc_queue(64, QueueBuffer::Dbr) else {
            low.host.unmap(buf);
            return Err(Error::new(op, ENOMEM, "no host memory for the doorbell record"));
        };
        let ring = SrqRing {
            buf: QueueBuf { addr: buf, wqe_cnt: max as u32, stride: size as u32 },
            dbrec,
            max_gs,
            nwqes: nwqes as u32,
            head: 0,
            tail: nwqes as u32 - 1,
            counter: 0,
            wrid: vec![0; max as usize],
            free: vec![false; max as usize],
        };
        let _ = low.host.write(buf, &vec![0u8; bytes]);
        let _ = low.host.write(dbrec, &[0u8; 4]);
        for i in 0..ring.tail {
            ring.set_next(low.host, i, i + 1);
        }
        if wq {
            for i in ring.tail + 1..max as u32 - 1 {
                ring.set_next(low.host, i, i + 1);
            }
        }
        let tags = attr.tm.map(|t| t.max_num_tags);
        let req =
            SrqRequest { ctx: ctx.id(), dev, pdn, max_wr: max as u32 - 1, max_sge: max_gs, buf, dbrec, xrc, tm: tags };
        let srqn = match low.kernel.create_srq(low.devices, &req) {
            Ok(n) => n,
            Err(e) => {
                ring.free_memory(low.host);
                return Err(e);
            }
        };
        // create_cmd_qp, after the kernel made the SRQ.
        let tm = match attr.tm.map(|t| super::tm::TmSw::new(&self.limits, t.cq, t.max_num_tags, t.max_ops)) {
            Some(Err(e)) => {
                let _ = low.kernel.destroy_srq(low.devices, dev, srqn);
                ring.free_memory(low.host);
                return Err(e);
            }
            Some(Ok(t)) => Some(Box::new(t)),
            None => None,
        };
        let max_wr = ring.tail;
        let obj = SrqObj { ctx, dev, pd: attr.pd, srqn, ring, xrc: attr.xrc, tm };
        let handle = match self.srqs.insert(op, obj) {
            Ok(h) => h,
            Err(e) => {
                let _ = low.kernel.destroy_srq(low.devices, dev, srqn);
                return Err(e);
            }
        };
        low.kernel.set_srq_handle(dev, srqn, handle);
        self.pds.acquire(attr.pd, op)?;
        if let Some(x) = attr.xrc {
            self.xrcds.acquire(x.xrcd, op)?;
            self.cqs.acquire(x.cq, op)?;
        }
        if let Some(t) = attr.tm {
            self.cqs.acquire(t.cq, op)?;
        }
        Ok(Srq { handle, srq_num: srqn, max_wr, max_sge: max_gs })
    }

    /// `ibv_modify_srq`: the kernel's checks and ARM_RQ.
    pub(crate) fn modify_srq(&mut self, low: &mut Lower<'_>, srq: &Srq, attr: &SrqAttr, mask: u32) -> Result<()> {
        let s = self.srqs.get(srq.handle, Op::ModifySrq)?;
        low.kernel.modify_srq(low.devices, s.dev, s.srqn, attr, mask)
    }

    /// `ibv_query_srq`: QUERY_SRQ through the kernel.
    pub(crate) fn query_srq(&mut self, low: &mut Lower<'_>, srq: &Srq) -> Result<SrqAttr> {
        let s = self.srqs.get(srq.handle, Op::QuerySrq)?;
        low.kernel.query_srq(low.devices, s.dev, s.srqn)
    }

    /// `ibv_destroy_srq`: EBUSY while a QP uses it (the core's use count), then DESTROY_SRQ.
    pub(crate) fn destroy_srq(&mut self, low: &mut Lower<'_>, srq: &Srq) -> Result<()> {
        let op = Op::DestroySrq;
        if self.srqs.users(srq.handle, op)? > 0 {
            return Err(Error::new(op, EBUSY, "a QP still uses the SRQ"));
        }
        let s = self.srqs.get(srq.handle, op)?;
        low.kernel.destroy_srq(low.devices, s.dev, s.srqn)?;
        self.remove_srq(low, srq.handle);
        Ok(())
    }

    fn remove_srq(&mut self, low: &mut Lower<'_>, h: SrqHandle) {
        if let Ok(s) = self.srqs.take(h, Op::DestroySrq) {
            s.ring.free_memory(low.host);
            self.pds.release(s.pd);
            if let Some(x) = s.xrc {
                self.xrcds.release(x.xrcd);
                self.cqs.release(x.cq);
            }
            if let Some(t) = &s.tm {
                self.cqs.release(t.cq);
            }
        }
    }

    /// A closing context's SRQs (after its QPs).
    pub(super) fn release_srqs_of(&mut self, low: &mut Lower<'_>, ctx: mlx5_dv::ContextHandle) {
        for h in self.srqs.handles_where(|s| s.ctx == ctx) {
            if let Ok(s) = self.srqs.get(h, Op::DestroySrq) {
                let _ = low.kernel.destroy_srq(low.devices, s.dev, s.srqn);
            }
            self.remove_srq(low, h);
        }
    }

    /// `mlx5_post_srq_recv`: each WR into the WQE at `head`; a WR with more SGEs than the WQE
    /// holds is EINVAL, a full SRQ ENOMEM, both naming that WR; the doorbell record then
    /// counts the WRs posted before it.
    pub(crate) fn post_srq_recv(&mut self, low: &mut Lower<'_>, srq: &Srq, wrs: &[RecvWr]) -> Result<()> {
        let op = Op::PostSrqRecv;
        let s = self.srqs.get_mut(srq.handle, op)?;
        let mut failed = None;
        let mut posted = 0u32;
        for (n, wr) in wrs.iter().enumerate() {
            if let Err(e) = s.ring.post(low.host, wr) {
                let why = if e == ENOMEM { "the SRQ is full" } else { "more SGEs than the SRQ's max_sge" };
                failed = Some(Error::new(op, e, format!("receive WR {n}: {why}")).with_bad_wr(n as u32));
                break;
            }
            posted += 1;
        }
        if posted > 0 {
            s.ring.counter = s.ring.counter.wrapping_add(posted);
            let _ = low.host.write(s.ring.dbrec, &s.ring.counter.to_be_bytes());
            if let Some(d) = low.devices.get_mut(s.dev) {
                d.ring_srq(low.host, s.srqn);
            }
        }
        low.run();
        failed.map_or(Ok(()), Err)
    }

    /// Where the SRQ's buffer and doorbell record are, as `mlx5dv_init_obj` reports them:
    pub(crate) fn srq_memory(&self, srq: &Srq) -> Result<crate::SrqMemory> {
        let s = self.srqs.get(srq.handle, Op::InitObj)?;
        let r = &s.ring;
        Ok(crate::SrqMemory {
            buf: r.buf.addr,
            dbrec: r.dbrec,
            stride: r.buf.stride,
            head: r.head,
            tail: r.tail,
            srqn: s.srqn,
        })
    }
}
