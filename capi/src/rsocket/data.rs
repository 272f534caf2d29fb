//! The data path of a connected rsocket: one RC QP and one CQ, receive buffers the peer
//! SENDs into, send slots, credits, and the remote IO maps of `riomap`/`riowrite`.
//!
//! Every message is a SEND with immediate data (`mlx5_sim::wire::rsocket`: the operation
//! and the credits it returns), spending one credit (one receive of the peer's).

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};

use mlx5_sim::wire::rsocket::{ConnData, Credits, IoMap, Op, imm, parse_imm};
use rdma_sys::*;

/// The largest receive buffer a side makes and the most one message may carry.
pub(crate) const MAX_SEG: usize = 64 << 10;
/// `wr_id` bit of send work requests (receives carry their buffer's index).
const SEND_BIT: u64 = 1 << 63;
/// `wr_id` of a send without a slot (credits, shutdown).
const NO_SLOT: u64 = 0xffff_ffff;
/// A buffer this side mapped with `riomap`.
pub(crate) struct LocalMap {
    addr: usize,
    len: usize,
    /// The slot of the peer's table (remote maps).
    index: Option<u32>,
    mr: *mut ibv_mr,
}

/// The sizes a connection is made with (the rsocket's options at connect/accept time).
#[derive(Clone, Copy)]
pub(crate) struct Sizes {
    pub(crate) sq: usize,
    pub(crate) rq: usize,
    pub(crate) seg: usize,
}

/// The QP, CQ, buffers and counters of one connection.
pub(crate) struct Conn {
    qp: *mut ibv_qp,
    cq: *mut ibv_cq,
    rbuf: Box<[u8]>,
    rmr: *mut ibv_mr,
    sbuf: Box<[u8]>,
    smr: *mut ibv_mr,
    sizes: Sizes,
    peer_seg: usize,
    free_slots: Vec<usize>,
    sq_out: usize,
    credits: Credits,
    ready: VecDeque<(usize, usize, usize)>,
    /// The peer shut its writing side (end of stream once `ready` is empty).
    pub(crate) eof: bool,
    /// A completion failed: the connection is broken.
    pub(crate) broken: bool,
    /// IO maps this side holds for the peer, not yet sent.
    maps_to_send: VecDeque<IoMap>,
    /// Buffers mapped here (`riounmap` finds them by address and length).
    pub(crate) local_maps: Vec<LocalMap>,
    /// How many maps the peer takes of this side's (its `RDMA_IOMAPSIZE`).
    iomap_cap: usize,
    /// The peer's maps, by slot (as many slots as this side's `RDMA_IOMAPSIZE`).
    targets: Vec<Option<IoMap>>,
}

// SAFETY: the raw verbs objects are the shim's; an rsocket is used under its own mutex.
unsafe impl Send for Conn {}

impl Conn {
    /// A CQ and a QP for `id` (on its device), the buffers registered and the receives
    /// posted. Err(errno).
    ///
    /// # Safety
    /// `id` is a CM ID of the shim with its device resolved and no QP.
    pub(crate) unsafe fn new(id: *mut rdma_cm_id, sizes: Sizes) -> Result<Conn, c_int> {
        // SAFETY: the ID's device context; the shim's own verbs.
        unsafe {
            let ctx = (*id).verbs;
            if ctx.is_null() {
                return Err(libc::EINVAL);
            }
            let cqe = c_int::try_from(sizes.sq + sizes.rq).unwrap_or(c_int::MAX);
            let cq = crate::queue::ibv_create_cq(ctx, cqe, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            if cq.is_null() {
                return Err(errno_or(libc::ENOMEM));
            }
            let mut a: ibv_qp_init_attr = std::mem::zeroed();
            a.send_cq = cq;
            a.recv_cq = cq;
            a.qp_type = ibv_qp_type::IBV_QPT_RC;
            a.cap.max_send_wr = sizes.sq as u32;
            a.cap.max_recv_wr = sizes.rq as u32;
            a.cap.max_send_sge = 1;
            a.cap.max_recv_sge = 1;
            if crate::cm::qp::rdma_create_qp(id, std::ptr::null_mut(), &mut a) != 0 {
                let e = errno_or(libc::ENOMEM);
                crate::queue::ibv_destroy_cq(cq);
                return Err(e);
            }
            let mut c = Conn {
                qp: (*id).qp,
                cq,
                rbuf: vec![0u8; sizes.rq * sizes.seg].into_boxed_slice(),
                rmr: std::ptr::null_mut(),
                sbuf: Box::new([]),
                smr: std::ptr::null_mut(),
                sizes,
                peer_seg: 0,
                free_slots: Vec::new(),
                sq_out: 0,
                credits: Credits::new(sizes.rq, 0),
                ready: VecDeque::new(),
                eof: false,
                broken: false,
                maps_to_send: VecDeque::new(),
                local_maps: Vec::new(),
                iomap_cap: 0,
                targets: Vec::new(),
            };
            c.rmr = reg(&mut c.rbuf, (*id).pd, ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0);
            if c.rmr.is_null() {
                let e = errno_or(libc::ENOMEM);
                c.destroy(id);
                return Err(e);
            }
            for i in 0..sizes.rq {
                if let Err(e) = c.post_recv(i) {
                    c.destroy(id);
                    return Err(e);
                }
            }
            Ok(c)
        }
    }

    /// What the peer said at connection time: its receive count (the first credits), its
    /// receive buffers' size (the largest message) and how many IO maps it takes.
    ///
    /// # Safety
    /// `pd` is the connection's PD.
    pub(crate) unsafe fn peer(&mut self, pd: *mut ibv_pd, peer: ConnData, iomap: usize) -> Result<(), c_int> {
        self.credits = Credits::new(self.sizes.rq, usize::from(peer.credits));
        self.iomap_cap = usize::from(peer.iomap);
        self.targets = vec![None; iomap];
        // A peer's word is bounded by what this side would say itself.
        let seg = (peer.seg as usize).min(MAX_SEG);
        self.peer_seg = seg.max(64);
        self.sbuf = vec![0u8; self.sizes.sq * self.peer_seg].into_boxed_slice();
        // SAFETY: the connection's PD; the buffer lives as long as the connection.
        self.smr = unsafe { reg(&mut self.sbuf, pd, 0) };
        if self.smr.is_null() {
            return Err(errno_or(libc::ENOMEM));
        }
        self.free_slots = (0..self.sizes.sq).rev().collect();
        Ok(())
    }

    /// Free the QP (through the CM), the CQ and the registrations.
    ///
    /// # Safety
    /// `id` is the ID the connection was made on; nothing uses the connection after.
    pub(crate) unsafe fn destroy(&mut self, id: *mut rdma_cm_id) {
        // SAFETY: the connection's own objects.
        unsafe {
            crate::cm::qp::rdma_destroy_qp(id);
            for m in self.local_maps.drain(..) {
                crate::mr::ibv_dereg_mr(m.mr);
            }
            for mr in [self.rmr, self.smr] {
                if !mr.is_null() {
                    crate::mr::ibv_dereg_mr(mr);
                }
            }
            self.rmr = std::ptr::null_mut();
            self.smr = std::ptr::null_mut();
            if !self.cq.is_null() {
                crate::queue::ibv_destroy_cq(self.cq);
                self.cq = std::ptr::null_mut();
            }
        }
    }

    fn post_recv(&mut self, i: usize) -> Result<(), c_int> {
        let seg = self.sizes.seg;
        // SAFETY: registered in new().
        let lkey = unsafe { (*self.rmr).lkey };
        // SAFETY: our QP; the slot lives as long as the connection.
        unsafe { post_recv(self.qp, i as u64, &mut self.rbuf[i * seg..(i + 1) * seg], lkey) }
    }

    /// Post a SEND with immediate `op` carrying `payload` (through a send slot), returning
    /// the credits this side owes. Callers check [`Conn::can_post`] first.
    fn post_msg(&mut self, op: Op, payload: &[u8]) -> Result<(), c_int> {
        let (slot, sge) = if payload.is_empty() { (None, None) } else { self.fill_slot(payload) };
        let before = self.credits;
        let Some(ret) = self.credits.spend() else { return Err(libc::EAGAIN) };
        // SAFETY: plain data.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = SEND_BIT | slot.map_or(NO_SLOT, |s| s as u64);
        wr.opcode = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
        wr.imm_data_invalidated_rkey_union.imm_data = imm(op, ret).to_be();
        let mut sge = sge;
        if let Some(s) = sge.as_mut() {
            wr.sg_list = s;
            wr.num_sge = 1;
        }
        if let Err(e) = self.post_send(&mut wr, slot) {
            self.credits = before;
            return Err(e);
        }
        Ok(())
    }

    fn fill_slot(&mut self, payload: &[u8]) -> (Option<usize>, Option<ibv_sge>) {
        let Some(s) = self.free_slots.pop() else { return (None, None) };
        let at = s * self.peer_seg;
        self.sbuf[at..at + payload.len()].copy_from_slice(payload);
        let sge = ibv_sge {
            addr: self.sbuf[at..].as_ptr() as u64,
            length: payload.len() as u32,
            // SAFETY: registered in peer().
            lkey: unsafe { (*self.smr).lkey },
        };
        (Some(s), Some(sge))
    }

    fn post_send(&mut self, wr: &mut ibv_send_wr, slot: Option<usize>) -> Result<(), c_int> {
        let mut bad = std::ptr::null_mut();
        // SAFETY: the shim's QP and its ops; the WR and its SGE live across the call.
        let r = unsafe { (*(*self.qp).context).ops.post_send.map_or(libc::ENOSYS, |f| f(self.qp, wr, &mut bad)) };
        if r != 0 {
            if let Some(s) = slot {
                self.free_slots.push(s);
            }
            self.broken = true;
            return Err(libc::ECONNRESET);
        }
        self.sq_out += 1;
        Ok(())
    }

    /// Room for one more message: a send queue entry, a slot (with payload) and a credit
    /// (data keeps the last one back for returning credits).
    fn can_post(&self, payload: bool, data: bool) -> bool {
        let credit = if data { self.credits.can_send_data() } else { self.credits.can_send_ctrl() };
        !self.broken && self.sq_out < self.sizes.sq && (!payload || !self.free_slots.is_empty()) && credit
    }

    /// Whether a data message may go now.
    pub(crate) fn can_send(&self) -> bool {
        self.can_post(true, true)
    }

    /// Whether an RDMA WRITE may go now (a send queue entry and a slot; no credit).
    pub(crate) fn can_write(&self) -> bool {
        !self.broken && self.sq_out < self.sizes.sq && !self.free_slots.is_empty()
    }

    /// Whether received bytes wait to be read.
    pub(crate) fn has_data(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Whether bytes wait to be read (or the end of the stream).
    pub(crate) fn readable(&self) -> bool {
        !self.ready.is_empty() || self.eof || self.broken
    }

    /// Whether every posted send has completed.
    pub(crate) fn sends_done(&self) -> bool {
        self.sq_out == 0 || self.broken
    }

    /// Take what the CQ holds: received messages queued, receives of control messages
    /// posted again, send slots freed; then return credits if many are owed.
    pub(crate) fn progress(&mut self) {
        // SAFETY: plain data.
        let mut wcs: [ibv_wc; 16] = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: the shim's CQ and its ops; `wcs` has room for 16.
            let n = unsafe { (*(*self.cq).context).ops.poll_cq.map_or(-1, |f| f(self.cq, 16, wcs.as_mut_ptr())) };
            if n <= 0 {
                break;
            }
            for wc in &wcs[..n as usize] {
                self.completion(wc);
            }
        }
        self.return_credits();
    }

    fn completion(&mut self, wc: &ibv_wc) {
        if wc.wr_id & SEND_BIT != 0 {
            self.sq_out = self.sq_out.saturating_sub(1);
            let slot = wc.wr_id & !SEND_BIT;
            if slot != NO_SLOT {
                self.free_slots.push(slot as usize);
            }
            if wc.status != ibv_wc_status::IBV_WC_SUCCESS {
                self.broken = true;
            }
            return;
        }
        if wc.status != ibv_wc_status::IBV_WC_SUCCESS {
            self.broken = true;
            return;
        }
        let i = wc.wr_id as usize;
        // SAFETY: a receive with immediate data (every message has it).
        let (op, returned) = parse_imm(u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }));
        self.credits.received(returned);
        let len = wc.byte_len as usize;
        match op {
            Op::Data if len > 0 => {
                self.ready.push_back((i, 0, len));
                return;
            }
            Op::Shutdown => self.eof = true,
            Op::IoMap => {
                let at = i * self.sizes.seg;
                let m = IoMap::decode(&self.rbuf[at..at + len.min(self.sizes.seg)]);
                if let Some(slot) = m.and_then(|m| self.targets.get_mut(m.index as usize)) {
                    *slot = m;
                }
            }
            _ => {}
        }
        self.repost(i);
    }

    fn repost(&mut self, i: usize) {
        if self.post_recv(i).is_ok() {
            self.credits.reposted();
        } else {
            self.broken = true;
        }
    }

    /// Send the credits owed once half the receives are owed.
    fn return_credits(&mut self) {
        if self.credits.credit_due() && self.can_post(false, false) {
            let _ = self.post_msg(Op::Credit, &[]);
        }
    }

    /// Copy received bytes into `out` (leaving them with `peek`); the receives emptied go
    /// back to the QP. The count copied.
    pub(crate) fn read(&mut self, out: &mut [u8], peek: bool) -> usize {
        let mut n = 0;
        let seg = self.sizes.seg;
        let mut k = 0;
        while n < out.len() && k < self.ready.len() {
            let (i, off, len) = self.ready[k];
            let take = (len - off).min(out.len() - n);
            out[n..n + take].copy_from_slice(&self.rbuf[i * seg + off..i * seg + off + take]);
            n += take;
            if peek {
                k += 1;
            } else if off + take == len {
                self.ready.pop_front();
                self.repost(i);
            } else {
                self.ready[0].1 += take;
            }
        }
        if !peek {
            self.return_credits();
        }
        n
    }

    /// Send as much of `data` as credits and slots allow now: the count sent.
    pub(crate) fn write(&mut self, data: &[u8]) -> Result<usize, c_int> {
        let mut n = 0;
        while n < data.len() && self.can_send() {
            let take = (data.len() - n).min(self.peer_seg);
            self.post_msg(Op::Data, &data[n..n + take])?;
            n += take;
        }
        Ok(n)
    }

    /// Send the in-band end of stream, if a credit allows: whether it went.
    pub(crate) fn shutdown(&mut self) -> bool {
        self.can_post(false, false) && self.post_msg(Op::Shutdown, &[]).is_ok()
    }

    /// Send the IO maps made since the last message (before any data that follows them).
    /// False while one is left (no credit yet).
    pub(crate) fn send_maps(&mut self) -> Result<bool, c_int> {
        while let Some(m) = self.maps_to_send.front() {
            if !self.can_send() {
                return Ok(false);
            }
            let b = m.encode();
            self.post_msg(Op::IoMap, &b)?;
            self.maps_to_send.pop_front();
        }
        Ok(true)
    }

    /// Register `len` bytes at `addr` for the peer to write (`remote`) or for local use,
    /// and queue the map for the peer. Err(errno).
    ///
    /// # Safety
    /// `pd` is the connection's PD; the buffer is the program's.
    pub(crate) unsafe fn map(
        &mut self,
        pd: *mut ibv_pd,
        addr: usize,
        len: usize,
        remote: bool,
        offset: i64,
    ) -> Result<i64, c_int> {
        let len32 = u32::try_from(len).map_err(|_| libc::EINVAL)?;
        let index = if remote {
            let used: Vec<u32> = self.local_maps.iter().filter_map(|m| m.index).collect();
            let free = (0..self.iomap_cap as u32).find(|i| !used.contains(i));
            Some(free.ok_or(libc::ENOMEM)?)
        } else {
            None
        };
        let mut access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        if remote {
            access |= ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        }
        // SAFETY: the caller's buffer and the connection's PD.
        let mr = unsafe { crate::mr::ibv_reg_mr(pd, addr as *mut c_void, len, access as c_int) };
        if mr.is_null() {
            return Err(errno_or(libc::ENOMEM));
        }
        let offset = if offset == -1 { addr as i64 } else { offset };
        self.local_maps.push(LocalMap { addr, len, index, mr });
        if let Some(index) = index {
            // SAFETY: just registered.
            let rkey = unsafe { (*mr).rkey };
            self.maps_to_send.push_back(IoMap { index, offset: offset as u64, addr: addr as u64, rkey, len: len32 });
        }
        Ok(offset)
    }

    /// Undo [`Conn::map`] for the buffer at `addr` of `len` bytes: false if none.
    pub(crate) fn unmap(&mut self, addr: usize, len: usize) -> bool {
        let Some(k) = self.local_maps.iter().position(|m| m.addr == addr && m.len == len) else { return false };
        let m = self.local_maps.remove(k);
        self.maps_to_send.retain(|x| !(x.addr == addr as u64 && x.len as usize == len));
        // SAFETY: registered by map().
        unsafe { crate::mr::ibv_dereg_mr(m.mr) };
        true
    }

    /// RDMA WRITE as much of `data` as slots allow into the peer's map at `offset`:
    /// Ok(None) when no map of the peer's holds `offset`.
    pub(crate) fn iowrite(&mut self, data: &[u8], offset: u64) -> Result<Option<usize>, c_int> {
        let mut n = 0;
        while n < data.len() {
            let at = offset + n as u64;
            let Some(t) = self.targets.iter().flatten().copied().find(|t| t.holds(at)) else {
                return Ok(if n == 0 { None } else { Some(n) });
            };
            if self.broken || self.sq_out >= self.sizes.sq || self.free_slots.is_empty() {
                break;
            }
            let take = (data.len() - n).min(self.peer_seg).min((t.offset + u64::from(t.len) - at) as usize);
            let (slot, sge) = self.fill_slot(&data[n..n + take]);
            let Some(mut sge) = sge else { break };
            // SAFETY: plain data.
            let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
            wr.wr_id = SEND_BIT | slot.map_or(NO_SLOT, |s| s as u64);
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.wr.rdma.remote_addr = t.addr + (at - t.offset);
            wr.wr.rdma.rkey = t.rkey;
            self.post_send(&mut wr, slot)?;
            n += take;
        }
        Ok(Some(n))
    }
}

/// Register a buffer of the connection.
///
/// # Safety
/// `pd` is the connection's PD.
unsafe fn reg(buf: &mut [u8], pd: *mut ibv_pd, access: u32) -> *mut ibv_mr {
    let len = buf.len().max(1);
    // SAFETY: the caller's PD; the buffer outlives the registration (destroy() deregisters).
    unsafe { crate::mr::ibv_reg_mr(pd, buf.as_mut_ptr().cast(), len, access as c_int) }
}

/// Post one receive of `buf` (registered with `lkey`) on `qp`, with `wr_id`: Err(errno).
///
/// # Safety
/// `qp` is a QP of the shim; `buf` outlives the receive.
pub(crate) unsafe fn post_recv(qp: *mut ibv_qp, wr_id: u64, buf: &mut [u8], lkey: u32) -> Result<(), c_int> {
    let mut sge = ibv_sge { addr: buf.as_mut_ptr() as u64, length: buf.len() as u32, lkey };
    // SAFETY: plain data.
    let mut wr: ibv_recv_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    let mut bad = std::ptr::null_mut();
    // SAFETY: the caller's QP and its ops; `wr` and `sge` live across the call.
    let r = unsafe { (*(*qp).context).ops.post_recv.map_or(libc::ENOSYS, |f| f(qp, &mut wr, &mut bad)) };
    if r != 0 { Err(r) } else { Ok(()) }
}

/// The errno the last failed call left, else `dflt`.
pub(crate) fn errno_or(dflt: c_int) -> c_int {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(0) | None => dflt,
        Some(e) => e,
    }
}
