//! The provider's side of the queues in host memory, kept as libmlx5 keeps them: the send
//! queue's `cur_post` (basic blocks), `head`/`tail` (work requests) and the per-slot `wrid`,
//! `wqe_head` and `wr_data`; the receive queue's `head`/`tail` and `wrid`; the CQ's
//! `cons_index`; and the doorbell records the device reads.

use mlx5_dv::prm::FieldError;
use mlx5_dv::prm::cqe;
use mlx5_dv::prm::wqe::{DataSeg, INVALID_LKEY, SEND_WQE_BB, SEND_WQE_DS};
use mlx5_dv::{Error, Op, Result, Sge};

use crate::device::contract::{QueueBuf, RCV_DBR, SND_DBR};
use crate::host::{Dma, Host, QueueBuffer};

/// Bytes of a doorbell record page.
const DBREC_BYTES: usize = 64;

fn enomem(op: Op, what: &str) -> Error {
    Error::new(op, mlx5_dv::errno::ENOMEM, format!("no host memory for the {what}"))
}

fn write_be32(host: &mut Host, addr: u64, v: u32) {
    // The provider's own pages: mapped while the queue lives.
    let _ = host.write(addr, &v.to_be_bytes());
}

/// A send queue.
#[derive(Debug, Clone, Default)]
pub(super) struct SendQueue {
    pub(super) buf: QueueBuf,
    /// Next basic block to write.
    pub(super) cur_post: u32,
    /// Work requests posted and retired.
    pub(super) head: u32,
    pub(super) tail: u32,
    wrid: Vec<u64>,
    wqe_head: Vec<u32>,
    /// The `ibv_wc_opcode` a UMR, SET_PSV or cancelled WQE completes with.
    wr_data: Vec<u32>,
}

impl SendQueue {
    fn new(buf: QueueBuf) -> Self {
        let n = buf.wqe_cnt as usize;
        SendQueue { buf, wrid: vec![0; n], wqe_head: vec![0; n], wr_data: vec![0; n], ..SendQueue::default() }
    }

    fn idx(&self, counter: u32) -> usize {
        (counter & self.buf.wqe_cnt.saturating_sub(1)) as usize
    }

    /// Work requests posted and not yet completed.
    pub(super) fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// Write a WQE's bytes at `cur_post` (across the ring's end), with its bookkeeping; `nreq`
    /// is its position in the chain. Returns the basic block it starts at.
    pub(super) fn write(&mut self, host: &mut Host, bytes: &[u8], wr_id: u64, wr_data: u32, nreq: u32) -> u32 {
        let at = self.cur_post;
        let i = self.idx(at);
        if let (Some(w), Some(h), Some(d)) = (self.wrid.get_mut(i), self.wqe_head.get_mut(i), self.wr_data.get_mut(i)) {
            (*w, *h, *d) = (wr_id, self.head.wrapping_add(nreq), wr_data);
        }
        let blocks = bytes.len().div_ceil(SEND_WQE_BB);
        let to_end = (self.buf.wqe_cnt as usize).saturating_sub(i);
        if blocks <= self.buf.wqe_cnt as usize {
            // The slots are contiguous up to the ring's end: at most two writes.
            let (head, tail) = bytes.split_at(bytes.len().min(to_end * SEND_WQE_BB));
            let _ = host.write(self.buf.slot(at), head);
            if !tail.is_empty() {
                let _ = host.write(self.buf.addr, tail);
            }
        } else {
            // Longer than the ring: block by block, each overwriting the one a lap before.
            for (n, block) in bytes.chunks(SEND_WQE_BB).enumerate() {
                let _ = host.write(self.buf.slot(at.wrapping_add(n as u32)), block);
            }
        }
        self.cur_post = at.wrapping_add(bytes.len().div_ceil(SEND_WQE_BB) as u32);
        at
    }

    /// The ring's slots, to write one-block WQEs into with [`SendQueue::put_block`]; `None`
    /// if the queue's pages are not mapped (or its slots are not basic blocks).
    pub(super) fn slots<'h>(&self, host: &'h mut Host) -> Option<&'h mut [u8]> {
        if self.buf.stride as usize != SEND_WQE_BB {
            return None;
        }
        host.bytes_mut(self.buf.addr, self.buf.len())
    }

    /// [`SendQueue::write`] of a one-block WQE that `fill` writes into its slot of `slots`,
    /// the ring's bytes; false (nothing advanced) if `fill` does.
    #[inline]
    pub(super) fn put_block(
        &mut self,
        slots: &mut [u8],
        wr_id: u64,
        nreq: u32,
        fill: impl FnOnce(&mut [u8; SEND_WQE_BB]) -> bool,
    ) -> bool {
        let at = self.cur_post;
        let i = self.idx(at);
        let slot = slots.get_mut(i * SEND_WQE_BB..(i + 1) * SEND_WQE_BB).and_then(|s| s.try_into().ok());
        if !slot.is_some_and(fill) {
            return false;
        }
        if let (Some(w), Some(h), Some(d)) = (self.wrid.get_mut(i), self.wqe_head.get_mut(i), self.wr_data.get_mut(i)) {
            (*w, *h, *d) = (wr_id, self.head.wrapping_add(nreq), 0);
        }
        self.cur_post = at.wrapping_add(1);
        true
    }

    /// A completion for the WQE with `wqe_counter`: its `wrid` and `wr_data`; everything up to
    /// it is retired.
    pub(super) fn complete(&mut self, wqe_counter: u16) -> (u64, u32) {
        let i = self.idx(u32::from(wqe_counter));
        let (wr_id, data) = (self.wrid.get(i).copied().unwrap_or(0), self.wr_data.get(i).copied().unwrap_or(0));
        if let Some(h) = self.wqe_head.get(i) {
            self.tail = h.wrapping_add(1);
        }
        (wr_id, data)
    }

    /// `mlx5dv_qp_cancel_wr` over the WQEs from basic block `from` (where the device
    /// stopped) to `cur_post`: each with `wr_id` becomes a NOP, its `wr_data` keeping the
    /// opcode its completion reports. How many.
    pub(super) fn cancel(&mut self, host: &mut Host, from: u32, wr_id: u64) -> u32 {
        use mlx5_dv::prm::wqe::{ctrl::CtrlSeg, opcode};
        let mut n = 0;
        let (mut at, mut left) = (from, self.cur_post.wrapping_sub(from));
        while left > 0 {
            let slot = self.buf.slot(at);
            let Some(c) = host.read(slot, SEND_WQE_BB).and_then(|b| CtrlSeg::decode(b).ok()) else { break };
            let i = self.idx(at);
            if self.wrid.get(i) == Some(&wr_id) {
                let wc = match c.opcode {
                    opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM => Some(mlx5_dv::wc_opcode::RDMA_WRITE),
                    opcode::SEND | opcode::SEND_IMM | opcode::SEND_INVAL => Some(mlx5_dv::wc_opcode::SEND),
                    opcode::RDMA_READ => Some(mlx5_dv::wc_opcode::RDMA_READ),
                    _ => None,
                };
                if let (Some(wc), Some(d)) = (wc, self.wr_data.get_mut(i)) {
                    *d = wc;
                }
                let nop = CtrlSeg { opmod: 0, opcode: opcode::NOP, ..c };
                let mut block = [0u8; mlx5_dv::prm::wqe::ctrl::SIZE];
                if nop.encode(&mut block).is_ok() {
                    let _ = host.write(slot, &block);
                }
                n += 1;
            }
            let step = u32::try_from(c.wqebbs()).unwrap_or(u32::MAX).clamp(1, left);
            (at, left) = (at.wrapping_add(step), left - step);
        }
        n
    }

    /// Start over at counter 0 (`mlx5_init_qp_indices`).
    pub(super) fn reset(&mut self) {
        (self.cur_post, self.head, self.tail) = (0, 0, 0);
    }
}

/// A receive queue.
#[derive(Debug, Clone, Default)]
pub(super) struct RecvQueue {
    pub(super) buf: QueueBuf,
    pub(super) head: u32,
    pub(super) tail: u32,
    wrid: Vec<u64>,
}

impl RecvQueue {
    fn new(buf: QueueBuf) -> Self {
        RecvQueue { buf, wrid: vec![0; buf.wqe_cnt as usize], ..RecvQueue::default() }
    }

    /// Work requests posted and not yet completed.
    pub(super) fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// Write a receive WQE at `head`: the SGEs, then a terminating entry with
    /// `MLX5_INVALID_LKEY` when there is room for one.
    pub(super) fn write(&mut self, host: &mut Host, wr_id: u64, sge: &[Sge]) -> std::result::Result<(), FieldError> {
        let slots = self.buf.stride as usize / SEND_WQE_DS;
        let mut bytes = vec![0u8; self.buf.stride as usize];
        let segs = sge.iter().map(|s| DataSeg { byte_count: s.length, lkey: s.lkey, addr: s.addr });
        let end = (sge.len() < slots).then_some(DataSeg { byte_count: 0, lkey: INVALID_LKEY, addr: 0 });
        for (d, out) in segs.chain(end).zip(bytes.chunks_exact_mut(SEND_WQE_DS)) {
            d.encode(out)?;
        }
        let i = (self.head & self.buf.wqe_cnt.saturating_sub(1)) as usize;
        if let Some(w) = self.wrid.get_mut(i) {
            *w = wr_id;
        }
        let _ = host.write(self.buf.slot(self.head), &bytes);
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// A completion for the receive WQE with `wqe_counter`: its `wrid` and its scatter list.
    pub(super) fn complete(&mut self, host: &Host, wqe_counter: u16) -> (u64, Vec<Sge>) {
        let i = (u32::from(wqe_counter) & self.buf.wqe_cnt.saturating_sub(1)) as usize;
        self.tail = self.tail.wrapping_add(1);
        let bytes = host.read(self.buf.slot(u32::from(wqe_counter)), self.buf.stride as usize).unwrap_or_default();
        let r = crate::device::contract::decode_recv(wqe_counter, bytes);
        (self.wrid.get(i).copied().unwrap_or(0), r.sge)
    }

    /// Start over at counter 0.
    pub(super) fn reset(&mut self) {
        (self.head, self.tail) = (0, 0);
    }
}

/// A QP's queues and doorbell record in host memory (`mlx5_alloc_qp_buf`: the receive queue
/// first, then the send queue).
#[derive(Debug, Clone, Default)]
pub(super) struct QpRings {
    pub(super) sq: SendQueue,
    pub(super) rq: RecvQueue,
    pub(super) dbrec: u64,
    buf: Option<u64>,
}

impl QpRings {
    /// Map the queues: `sq_bbs` send basic blocks, `rq_cnt` receive WQEs of `rq_stride`
    /// bytes. ENOMEM when host memory runs out.
    pub(super) fn alloc(host: &mut Host, sq_bbs: u32, rq_cnt: u32, rq_stride: u32, op: Op) -> Result<Self> {
        let rq_bytes = u64::from(rq_cnt) * u64::from(rq_stride);
        let total = rq_bytes + u64::from(sq_bbs) * SEND_WQE_BB as u64;
        let total = usize::try_from(total).map_err(|_| enomem(op, "QP buffer"))?;
        let buf = if total > 0 {
            let stride = rq_stride.max(SEND_WQE_BB as u32);
            Some(host.alloc_queue(total, QueueBuffer::Qp { stride }).ok_or_else(|| enomem(op, "QP buffer"))?)
        } else {
            None
        };
        let Some(dbrec) = host.alloc_queue(DBREC_BYTES, QueueBuffer::Dbr) else {
            if let Some(b) = buf {
                host.unmap(b);
            }
            return Err(enomem(op, "doorbell record"));
        };
        let base = buf.unwrap_or(0);
        let rq = QueueBuf { addr: base, wqe_cnt: rq_cnt, stride: rq_stride };
        let sq = QueueBuf { addr: base.wrapping_add(rq_bytes), wqe_cnt: sq_bbs, stride: SEND_WQE_BB as u32 };
        Ok(QpRings { sq: SendQueue::new(sq), rq: RecvQueue::new(rq), dbrec, buf })
    }

    /// Take up where a program that writes WQEs itself (through `mlx5dv_init_obj`'s pointers)
    /// left the queues: a doorbell record ahead of the provider's counters names WQEs the
    /// program posted, which the provider's next WQE follows. They count as posted and
    /// retired, since their completions are the program's. Only memory a program can reach
    /// (the C ABI's) can move this way.
    pub(super) fn adopt_program_posts(&mut self, host: &Host) {
        if !host.in_process() {
            return;
        }
        let read = |at: u64| host.read(at, 4).and_then(|b| b.first_chunk::<4>().copied()).map(u32::from_be_bytes);
        if let Some(db) = read(self.dbrec + SND_DBR) {
            let ahead = db.wrapping_sub(self.sq.cur_post) & 0xffff;
            if ahead != 0 && ahead <= self.sq.buf.wqe_cnt {
                self.sq.cur_post = self.sq.cur_post.wrapping_add(ahead);
                self.sq.head = self.sq.head.wrapping_add(ahead);
                self.sq.tail = self.sq.tail.wrapping_add(ahead);
            }
        }
        if let Some(db) = read(self.dbrec + RCV_DBR) {
            let ahead = db.wrapping_sub(self.rq.head) & 0xffff;
            if ahead != 0 && ahead <= self.rq.buf.wqe_cnt {
                self.rq.head = self.rq.head.wrapping_add(ahead);
                self.rq.tail = self.rq.tail.wrapping_add(ahead);
            }
        }
    }

    /// Tell the device how far the send queue goes (`MLX5_SND_DBR`).
    pub(super) fn send_doorbell(&self, host: &mut Host) {
        write_be32(host, self.dbrec + SND_DBR, self.sq.cur_post & 0xffff);
    }

    /// Tell the device how far the receive queue goes (`MLX5_RCV_DBR`).
    pub(super) fn recv_doorbell(&self, host: &mut Host) {
        write_be32(host, self.dbrec + RCV_DBR, self.rq.head & 0xffff);
    }

    /// RESET: both queues start over and the doorbell record is cleared.
    pub(super) fn reset(&mut self, host: &mut Host) {
        self.sq.reset();
        self.rq.reset();
        write_be32(host, self.dbrec + RCV_DBR, 0);
        write_be32(host, self.dbrec + SND_DBR, 0);
    }

    /// Unmap the queues.
    pub(super) fn free(&self, host: &mut Host) {
        if let Some(b) = self.buf {
            host.unmap(b);
        }
        host.unmap(self.dbrec);
    }
}

/// `cqe::sw_owned` read from the `op_own` byte alone: written (opcode not INVALID), with the
/// ownership bit equal to the wrap parity of `index` in a ring of `cqe_cnt` entries.
fn sw_owned(op_own: u8, index: u32, cqe_cnt: u32) -> bool {
    op_own >> 4 != cqe::opcode::INVALID && (op_own & cqe::OWNER_MASK != 0) == (index & cqe_cnt != 0)
}

/// A CQ's ring and doorbell record, and the consumer index. Entries are 64 or 128 bytes
/// (`ring.stride`); a 128-byte entry holds its `mlx5_cqe64` in its last 64 bytes, as
/// libmlx5's `get_sw_cqe` reads it, so the ownership byte is an entry's last either way.
#[derive(Debug, Clone, Default)]
pub(super) struct CqRing {
    pub(super) ring: QueueBuf,
    pub(super) dbrec: u64,
    pub(super) cons_index: u32,
}

impl CqRing {
    /// Map a ring of `ncqe` entries, each marked invalid (`MLX5_CQE_INVALID`, owner 0).
    #[cfg(test)]
    pub(super) fn alloc(host: &mut Host, ncqe: u32, op: Op) -> Result<Self> {
        let r = Self::map(host, ncqe, cqe::SIZE as u32, op)?;
        r.mark_invalid(host);
        Ok(r)
    }

    /// Map a ring of `ncqe` zeroed entries of `cqe_size` bytes and its doorbell record;
    /// ENOMEM when host memory runs out. [`CqRing::mark_invalid`] makes it ready.
    pub(super) fn map(host: &mut Host, ncqe: u32, cqe_size: u32, op: Op) -> Result<Self> {
        let bytes = usize::try_from(u64::from(ncqe) * u64::from(cqe_size)).map_err(|_| enomem(op, "CQ buffer"))?;
        let addr = host.alloc_queue(bytes, QueueBuffer::Cq).ok_or_else(|| enomem(op, "CQ buffer"))?;
        let Some(dbrec) = host.alloc_queue(DBREC_BYTES, QueueBuffer::Dbr) else {
            host.unmap(addr);
            return Err(enomem(op, "doorbell record"));
        };
        let ring = QueueBuf { addr, wqe_cnt: ncqe, stride: cqe_size };
        Ok(CqRing { ring, dbrec, cons_index: 0 })
    }

    /// Where entry `index`'s `mlx5_cqe64` starts: the entry's last 64 bytes.
    fn cqe64_at(&self, index: u32) -> u64 {
        self.ring.slot(index).wrapping_add(u64::from(self.ring.stride.saturating_sub(cqe::SIZE as u32)))
    }

    /// The first 64 bytes of the 128-byte entry at the consumer index (where the device puts
    /// a small receive with `MLX5_INLINE_SCATTER_64`); `None` for 64-byte entries.
    pub(super) fn scatter_64(&self, host: &Host) -> Option<[u8; cqe::SIZE]> {
        if self.ring.stride as usize != 2 * cqe::SIZE {
            return None;
        }
        host.read(self.ring.slot(self.cons_index), cqe::SIZE)?.first_chunk().copied()
    }

    /// Mark every entry invalid (`MLX5_CQE_INVALID`, owner 0), in one pass over the ring.
    pub(super) fn mark_invalid(&self, host: &mut Host) {
        let invalid = cqe::op_own(cqe::opcode::INVALID, 0, false, false);
        let stride = self.ring.stride as usize;
        if let Some(bytes) = host.bytes_mut(self.ring.addr, self.ring.len()) {
            for e in bytes.chunks_exact_mut(stride.max(1)) {
                if let Some(last) = e.last_mut() {
                    *last = invalid;
                }
            }
        }
    }

    fn owned(&self, host: &Host, index: u32) -> Option<[u8; cqe::SIZE]> {
        let b: &[u8; cqe::SIZE] = host.read(self.cqe64_at(index), cqe::SIZE)?.try_into().ok()?;
        sw_owned(b[cqe::SIZE - 1], index, self.ring.wqe_cnt).then_some(*b)
    }

    /// Entry `index` whole (`stride` bytes), if software owns it.
    fn owned_entry(&self, host: &Host, index: u32) -> Option<Vec<u8>> {
        self.owned(host, index)?;
        host.read(self.ring.slot(index), self.ring.stride as usize).map(<[u8]>::to_vec)
    }

    /// The ring's bytes, to read CQEs from with [`CqRing::peek_in`] while nothing writes it.
    pub(super) fn bytes<'h>(&self, host: &'h Host) -> Option<&'h [u8]> {
        host.read(self.ring.addr, self.ring.len())
    }

    /// [`CqRing::peek`] in the ring's `bytes`, without a copy.
    pub(super) fn peek_in<'b>(&self, bytes: &'b [u8]) -> Option<&'b [u8; cqe::SIZE]> {
        let at = self.cqe64_at(self.cons_index).checked_sub(self.ring.addr)?;
        let b: &[u8; cqe::SIZE] = bytes.get(usize::try_from(at).ok()?..)?.first_chunk()?;
        sw_owned(b[cqe::SIZE - 1], self.cons_index, self.ring.wqe_cnt).then_some(b)
    }

    /// The CQE at the consumer index, if software owns it.
    pub(super) fn peek(&self, host: &Host) -> Option<[u8; cqe::SIZE]> {
        self.owned(host, self.cons_index)
    }

    /// Consume the CQE at the consumer index.
    pub(super) fn advance(&mut self) {
        self.cons_index = self.cons_index.wrapping_add(1);
    }

    /// Tell the device how far software has read (`update_cons_index`).
    pub(super) fn update_cons_index(&self, host: &mut Host) {
        write_be32(host, self.dbrec, self.cons_index & 0xff_ffff);
    }

    /// `__mlx5_cq_clean`: remove the CQEs of QP `qpn` that software has not read, moving the
    /// later ones up so the ring stays contiguous (each slot keeps its ownership bit).
    pub(super) fn clean(&mut self, host: &mut Host, qpn: u32) {
        let mut prod = self.cons_index;
        while self.owned(host, prod).is_some()
            && prod.wrapping_sub(self.cons_index) < self.ring.wqe_cnt.saturating_sub(1)
        {
            prod = prod.wrapping_add(1);
        }
        let mut freed = 0u32;
        let mut i = prod;
        while i != self.cons_index {
            i = i.wrapping_sub(1);
            let Some(e) = self.owned(host, i) else { continue };
            let op = cqe::peek_opcode(&e).unwrap_or(cqe::opcode::INVALID);
            let owner_qpn = u32::from_be_bytes([e[56], e[57], e[58], e[59]]) & 0xff_ffff;
            if op != cqe::opcode::SIG_ERR && owner_qpn == qpn {
                freed += 1;
            } else if freed > 0 {
                // The whole entry moves (a 128-byte one with its scattered data); the
                // destination keeps its ownership bit.
                let Some(mut moved) = self.owned_entry(host, i) else { continue };
                let dest = self.ring.slot(i.wrapping_add(freed));
                let owner = host
                    .read(self.cqe64_at(i.wrapping_add(freed)), cqe::SIZE)
                    .map_or(0, |d| d[cqe::SIZE - 1] & cqe::OWNER_MASK);
                if let Some(last) = moved.last_mut() {
                    *last = (*last & !cqe::OWNER_MASK) | owner;
                }
                let _ = host.write(dest, &moved);
            }
        }
        if freed > 0 {
            self.cons_index = self.cons_index.wrapping_add(freed);
            self.update_cons_index(host);
        }
    }

    /// A ring of `ncqe` entries of `cqe_size` bytes alone (a resize keeps the doorbell
    /// record and the CQE size), each marked invalid as `mlx5_alloc_cq_buf` leaves them;
    /// ENOMEM when host memory runs out.
    pub(super) fn map_ring(host: &mut Host, ncqe: u32, cqe_size: u32, op: Op) -> Result<QueueBuf> {
        let bytes = usize::try_from(u64::from(ncqe) * u64::from(cqe_size)).map_err(|_| enomem(op, "CQ buffer"))?;
        let addr = host.alloc(bytes).ok_or_else(|| enomem(op, "CQ buffer"))?;
        let r = CqRing { ring: QueueBuf { addr, wqe_cnt: ncqe, stride: cqe_size }, dbrec: 0, cons_index: 0 };
        r.mark_invalid(host);
        Ok(r.ring)
    }

    /// `mlx5_cq_resize_copy_cqes` after the device took `new` as the ring: the CQEs from
    /// the consumer index up to the device's RESIZE_CQ CQE move to `new`, each one index on
    /// (the RESIZE_CQ CQE used an index) with the ownership bit of its new place; the
    /// consumer index steps past the RESIZE_CQ CQE, and the old ring is unmapped. False
    /// (nothing copied, as libmlx5 gives up) if an entry on the way is not software's or no
    /// RESIZE_CQ CQE comes within the old ring.
    pub(super) fn resize_into(&mut self, host: &mut Host, new: QueueBuf) -> bool {
        let mut copies = Vec::new();
        let mut i = self.cons_index;
        let found = loop {
            let Some(e) = self.owned(host, i) else { break false };
            if e[cqe::SIZE - 1] >> 4 == cqe::opcode::RESIZE_CQ {
                break true;
            }
            if i.wrapping_sub(self.cons_index) >= self.ring.wqe_cnt {
                break false;
            }
            // The whole entry: libmlx5 copies cqe_sz bytes.
            let Some(whole) = self.owned_entry(host, i) else { break false };
            copies.push((i.wrapping_add(1), whole));
            i = i.wrapping_add(1);
        };
        for (at, mut e) in copies.into_iter().filter(|_| found) {
            let owner = u8::from(at & new.wqe_cnt != 0);
            if let Some(last) = e.last_mut() {
                *last = (*last & !cqe::OWNER_MASK) | owner;
            }
            let _ = host.write(new.slot(at), &e);
        }
        host.unmap(self.ring.addr);
        self.ring = new;
        self.cons_index = self.cons_index.wrapping_add(1);
        found
    }

    /// Unmap the ring.
    pub(super) fn free(&self, host: &mut Host) {
        host.unmap(self.ring.addr);
        host.unmap(self.dbrec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::contract::Cqe;

    proptest::proptest! {
        #[test]
        fn ownership_read_from_op_own_is_the_codecs(
            mut bytes in proptest::prelude::any::<[u8; 32]>(),
            op_own in proptest::prelude::any::<u8>(),
            index in proptest::prelude::any::<u32>(),
            log_cnt in 0u32..24,
        ) {
            let mut cqe = [0u8; cqe::SIZE];
            cqe[..32].copy_from_slice(&bytes);
            bytes.reverse();
            cqe[32..].copy_from_slice(&bytes);
            cqe[cqe::SIZE - 1] = op_own;
            let cnt = 1 << log_cnt;
            proptest::prop_assert_eq!(Ok(sw_owned(op_own, index, cnt)), cqe::sw_owned(&cqe, index, cnt));
            proptest::prop_assert_eq!(Ok(op_own >> 4), cqe::peek_opcode(&cqe));
        }
    }

    fn req(qpn: u32, wqe_counter: u16) -> Cqe {
        Cqe::Req { qpn, wqe_counter, wqe_opcode: mlx5_dv::prm::wqe::opcode::RDMA_WRITE, byte_cnt: 0 }
    }

    /// Write CQEs as the device does: at the producer index, owner bit = wrap parity.
    fn produce(host: &mut Host, cq: &CqRing, from: u32, cqes: &[Cqe]) -> std::result::Result<(), FieldError> {
        for (i, c) in cqes.iter().enumerate() {
            let pi = from + i as u32;
            let bytes = c.encode(pi & cq.ring.wqe_cnt != 0)?;
            assert!(host.write(cq.ring.slot(pi), &bytes));
        }
        Ok(())
    }

    fn qpn(bytes: &[u8; cqe::SIZE]) -> u32 {
        u32::from_be_bytes([bytes[56], bytes[57], bytes[58], bytes[59]]) & 0xff_ffff
    }

    #[test]
    fn cleaning_a_cq_drops_one_qps_entries_and_keeps_the_rest_in_order() -> Result<()> {
        let mut host = Host::with_memory_limit(1 << 20);
        let mut cq = CqRing::alloc(&mut host, 4, Op::CreateCq)?;
        // Consume two entries first so that the live ones wrap the ring's end.
        produce(&mut host, &cq, 0, &[req(9, 0), req(9, 1)])
            .map_err(|e| Error::new(Op::PollCq, mlx5_dv::errno::EINVAL, e.to_string()))?;
        cq.advance();
        cq.advance();
        produce(&mut host, &cq, 2, &[req(1, 0), req(2, 0), req(1, 1)])
            .map_err(|e| Error::new(Op::PollCq, mlx5_dv::errno::EINVAL, e.to_string()))?;
        cq.clean(&mut host, 1);
        let mut seen = Vec::new();
        while let Some(e) = cq.peek(&host) {
            seen.push((qpn(&e), u16::from_be_bytes([e[60], e[61]])));
            cq.advance();
        }
        assert_eq!(seen, vec![(2, 0)], "only the other QP's completion is left");
        let ci = host.read(cq.dbrec, 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        assert_eq!(ci, Some(4), "the doorbell record moved past the two dropped entries");
        Ok(())
    }

    #[test]
    fn a_fresh_cq_has_nothing_to_poll() -> Result<()> {
        let mut host = Host::with_memory_limit(1 << 20);
        let cq = CqRing::alloc(&mut host, 8, Op::CreateCq)?;
        assert!(cq.peek(&host).is_none());
        Ok(())
    }
}
