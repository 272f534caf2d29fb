//! The data path over libibverbs: buffers, MRs, CQs, QPs, the `ibv_wr_*` chain with the
//! ported mlx5dv setters, completions and async events.

use std::alloc::Layout;
use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::errno::{EAGAIN, EFAULT, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, AsyncEvent, Buf, Cq, Error, Mr, Op, Qp, QpCap, QpInitAttr, QpModify, QpState, RecvWr, Result, Wc,
    WrOp, wc_flags,
};
use rdma_sys::*;

use crate::backend::{HwBackend, c_call, last_errno, missing};
use crate::inline;
use crate::objects::{HwBuf, HwCq, HwMr, HwQp, unused};
use crate::sys::mlx5dv::{
    mlx5dv_mkey_conf_attr, mlx5dv_mr_interleaved, mlx5dv_qp_init_attr, mlx5dv_sig_block_attr, mlx5dv_sig_block_domain,
    mlx5dv_sig_block_domain__bindgen_ty_1, mlx5dv_sig_crc, mlx5dv_sig_t10dif,
};

const PAGE: usize = 4096;

/// Async events are read without blocking: the context's event fd is made non-blocking.
pub(crate) fn make_async_fd_nonblocking(ctx: *mut ibv_context) {
    // SAFETY: ctx is an open context; async_fd is a file descriptor it owns.
    unsafe {
        let fd = (*ctx).async_fd;
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

fn to_c_sges(sge: &[mlx5_dv::Sge]) -> Vec<ibv_sge> {
    sge.iter().map(|s| ibv_sge { addr: s.addr, length: s.length, lkey: s.lkey }).collect()
}

impl HwBackend {
    pub(crate) fn hw_alloc_buf(&mut self, len: usize) -> Result<Buf> {
        let op = Op::AllocBuf;
        if len == 0 || len > (1 << 30) {
            return Err(Error::new(op, EINVAL, format!("buffer length {len} is outside 1..=1 GiB")));
        }
        let layout = Layout::from_size_align(len.div_ceil(PAGE) * PAGE, PAGE)
            .map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::new(op, ENOMEM, "out of memory"));
        }
        let handle =
            self.objs.bufs.insert(op, HwBuf { ptr, layout, dmabuf: None, borrowed: false }).inspect_err(|_| {
                // SAFETY: allocated with this layout just above and in no table.
                unsafe { std::alloc::dealloc(ptr, layout) };
            })?;
        Ok(Buf { handle, addr: ptr as u64, len })
    }

    pub(crate) fn hw_free_buf(&mut self, buf: &Buf) -> Result<()> {
        let op = Op::FreeBuf;
        unused(&self.objs.bufs, buf.handle, op, |n| format!("{n} MR(s) or umem(s) still cover the buffer"))?;
        let b = self.objs.bufs.get(buf.handle, op)?;
        if b.dmabuf.is_some() {
            return Err(Error::new(op, mlx5_dv::errno::EBUSY, "the buffer is a dma-buf's: free_dmabuf frees it"));
        }
        if b.borrowed {
            return Err(Error::new(op, mlx5_dv::errno::EBUSY, "the buffer is an EQ ring: destroy_eq releases it"));
        }
        let b = self.objs.bufs.remove(buf.handle, op)?;
        // SAFETY: allocated with this layout in hw_alloc_buf; no MR covers it.
        unsafe { std::alloc::dealloc(b.ptr, b.layout) };
        Ok(())
    }

    pub(crate) fn free_all_bufs(&mut self) {
        for h in self.objs.bufs.handles_where(|_| true) {
            if let Ok(b) = self.objs.bufs.take(h, Op::FreeBuf)
                && !b.borrowed
            {
                match b.dmabuf {
                    // SAFETY: every MR was deregistered before this runs.
                    Some(d) => unsafe { d.unmap(b.ptr, b.layout.size()) },
                    // SAFETY: every MR was deregistered before this runs (Drop releases contexts first).
                    None => unsafe { std::alloc::dealloc(b.ptr, b.layout) },
                }
            }
        }
    }

    pub(crate) fn hw_buf_slice(&mut self, buf: &Buf, offset: usize, len: usize, op: Op) -> Result<&mut [u8]> {
        let b = self.objs.bufs.get(buf.handle, op)?;
        if offset.checked_add(len).is_none_or(|e| e > buf.len.min(b.layout.size())) {
            return Err(Error::new(op, EINVAL, format!("{len} bytes at {offset} pass the buffer's {} bytes", buf.len)));
        }
        // SAFETY: the range lies inside the live allocation; &mut self keeps it exclusive.
        Ok(unsafe { std::slice::from_raw_parts_mut(b.ptr.add(offset), len) })
    }

    pub(crate) fn hw_reg_mr(
        &mut self,
        pd: mlx5_dv::PdHandle,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::RegMr;
        let (pd_ptr, ctx) = {
            let p = self.objs.pds.get(pd, op)?;
            (p.ptr, p.ctx)
        };
        // ib_umem_get refuses a range whose end wraps (EINVAL) before it looks at the pages.
        if addr.checked_add(length).is_none() {
            return Err(Error::new(op, EINVAL, format!("[0x{addr:x}, +{length}) wraps the address space")));
        }
        // Only this backend's buffers may be registered, so RDMA never reaches other memory.
        let buf = self
            .objs
            .bufs
            .iter()
            .find(|(_, b)| {
                let start = b.ptr as u64;
                addr >= start && addr.checked_add(length).is_some_and(|e| e <= start + b.layout.size() as u64)
            })
            .map(|(h, _)| h)
            .ok_or_else(|| {
                Error::new(op, EFAULT, format!("[0x{addr:x}, +{length}) is not inside a buffer of this backend"))
            })?;
        // SAFETY: the PD is live and the range lies inside a live buffer.
        let mr = unsafe { ibv_reg_mr(pd_ptr, addr as *mut c_void, length as usize, access.bits() as c_int) };
        if mr.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_reg_mr failed"));
        }
        // SAFETY: a non-NULL MR returned by ibv_reg_mr.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        let handle = self.objs.add_mr(op, HwMr { ptr: mr, pd, ctx, buf }).inspect_err(|_| {
            // SAFETY: the MR was just registered and is in no table.
            unsafe { ibv_dereg_mr(mr) };
        })?;
        Ok(Mr { handle, lkey, rkey, addr, length })
    }

    pub(crate) fn hw_dereg_mr(&mut self, mr: &Mr) -> Result<()> {
        let op = Op::DeregMr;
        let ptr = self.objs.mrs.get(mr.handle, op)?.ptr;
        // SAFETY: the MR is live.
        c_call(op, unsafe { ibv_dereg_mr(ptr) }, "ibv_dereg_mr")?;
        self.objs.take_mr(mr.handle, op)?;
        Ok(())
    }

    pub(crate) fn hw_create_cq(&mut self, ctx: mlx5_dv::ContextHandle, cqe: u32) -> Result<Cq> {
        let op = Op::CreateCq;
        let c = self.ctx_ptr(ctx, op)?;
        let n = c_int::try_from(cqe).map_err(|_| Error::new(op, EINVAL, "cqe does not fit an int"))?;
        // SAFETY: c is an open context.
        let cq = unsafe { ibv_create_cq(c, n, ptr::null_mut(), ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_create_cq failed"));
        }
        // SAFETY: a non-NULL CQ returned by ibv_create_cq.
        let cap = unsafe { (*cq).cqe } as u32;
        let handle = self.objs.cqs.insert(op, HwCq { ptr: cq, ctx }).inspect_err(|_| {
            // SAFETY: the CQ was just created and no QP uses it.
            unsafe { ibv_destroy_cq(cq) };
        })?;
        Ok(Cq { handle, cqe: cap })
    }

    pub(crate) fn hw_destroy_cq(&mut self, cq: &Cq) -> Result<()> {
        let op = Op::DestroyCq;
        let ptr = unused(&self.objs.cqs, cq.handle, op, |_| "a QP still uses the CQ".into())?.ptr;
        // SAFETY: the CQ is live and no QP uses it.
        c_call(op, unsafe { ibv_destroy_cq(ptr) }, "ibv_destroy_cq")?;
        self.objs.cqs.remove(cq.handle, op)?;
        Ok(())
    }

    pub(crate) fn hw_poll_cq(&mut self, cq: &Cq, max: usize) -> Result<Vec<Wc>> {
        let op = Op::PollCq;
        let ptr = self.objs.cqs.get(cq.handle, op)?.ptr;
        let n = max.min(64);
        // SAFETY: ibv_wc is plain data; zero is a valid value.
        let mut wcs: Vec<ibv_wc> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: the CQ is live; wcs has room for n entries.
        let got = unsafe { ibv_poll_cq(ptr, n as c_int, wcs.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::new(op, EINVAL, format!("ibv_poll_cq returned {got}")));
        }
        Ok(wcs
            .iter()
            .take(got as usize)
            .map(|w| {
                // SAFETY: the union member is chosen by wc_flags, as verbs.h documents.
                let imm = unsafe {
                    if w.wc_flags & wc_flags::WITH_INV.bits() != 0 {
                        w.imm_data_invalidated_rkey_union.invalidated_rkey
                    } else {
                        u32::from_be(w.imm_data_invalidated_rkey_union.imm_data)
                    }
                };
                Wc {
                    wr_id: w.wr_id,
                    status: w.status,
                    opcode: w.opcode,
                    vendor_err: w.vendor_err,
                    byte_len: w.byte_len,
                    imm_data: if w.wc_flags & (wc_flags::WITH_IMM | wc_flags::WITH_INV).bits() != 0 { imm } else { 0 },
                    qp_num: w.qp_num,
                    wc_flags: mlx5_dv::WcFlags::from_bits_retain(w.wc_flags),
                }
            })
            .collect())
    }

    pub(crate) fn hw_create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp> {
        let op = Op::CreateQp;
        let (pd_ptr, ctx) = {
            let p = self.objs.pds.get(attr.pd, op)?;
            (p.ptr, p.ctx)
        };
        let scq = self.objs.cqs.get(attr.send_cq, op)?.ptr;
        let rcq = self.objs.cqs.get(attr.recv_cq, op)?.ptr;
        let cptr = self.ctx_ptr(ctx, op)?;
        // SAFETY: plain data; zero is the C default.
        let mut init: ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
        init.qp_type = attr.qp_type;
        init.send_cq = scq;
        init.recv_cq = rcq;
        init.cap = ibv_qp_cap {
            max_send_wr: attr.cap.max_send_wr,
            max_recv_wr: attr.cap.max_recv_wr,
            max_send_sge: attr.cap.max_send_sge,
            max_recv_sge: attr.cap.max_recv_sge,
            max_inline_data: attr.cap.max_inline_data,
        };
        init.pd = pd_ptr;
        init.comp_mask =
            (ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD | ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS).0;
        init.send_ops_flags = attr.send_ops_flags.bits();
        // mlx5dv_create_qp with a NULL mlx5 attribute is what ibv_create_qp_ex runs on mlx5.
        let f = self.lib().dv.mlx5dv_create_qp.as_ref().map_err(|_| missing(op, "mlx5dv_create_qp"))?;
        // SAFETY: plain data; zero is the C default.
        let mut d: mlx5dv_qp_init_attr = unsafe { std::mem::zeroed() };
        let dptr = match attr.dv {
            Some(dv) => {
                d.comp_mask = dv.comp_mask.bits();
                d.create_flags = dv.create_flags.bits();
                d.send_ops_flags = dv.send_ops_flags.bits();
                &mut d as *mut mlx5dv_qp_init_attr
            }
            None => ptr::null_mut(),
        };
        // Some failures return NULL without setting errno (an IBV_QPT_DRIVER QP without mlx5dv
        // attributes): clear it first, so such a failure reads as EIO, not a stale errno.
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: the context, PD and CQs are live; both attrs outlive the call.
        let qp = unsafe { f(cptr, &mut init, dptr) };
        if qp.is_null() {
            return Err(Error::new(op, last_errno(), "QP creation failed"));
        }
        // SAFETY: qp is live and was created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.
        let qpx = unsafe { ibv_qp_to_qp_ex(qp) };
        let dv_ops = attr
            .dv
            .is_some_and(|d| d.comp_mask.contains(mlx5_dv::dv_qp::MASK_SEND_OPS_FLAGS) && !d.send_ops_flags.is_empty());
        let mqpx = match (&self.lib().dv.mlx5dv_qp_ex_from_ibv_qp_ex, dv_ops && !qpx.is_null()) {
            // SAFETY: qpx is the extended QP of an mlx5 QP.
            (Ok(f), true) => unsafe { f(qpx) },
            _ => ptr::null_mut(),
        };
        let cqs = [attr.send_cq, attr.recv_cq];
        let handle = self.objs.add_qp(op, HwQp { ptr: qp, qpx, mqpx, ctx, pd: attr.pd, cqs }).inspect_err(|_| {
            // SAFETY: the QP was just created and is in no table.
            unsafe { ibv_destroy_qp(qp) };
        })?;
        let cap = QpCap {
            max_send_wr: init.cap.max_send_wr,
            max_recv_wr: init.cap.max_recv_wr,
            max_send_sge: init.cap.max_send_sge,
            max_recv_sge: init.cap.max_recv_sge,
            max_inline_data: init.cap.max_inline_data,
        };
        // SAFETY: qp is live.
        let qp_num = unsafe { (*qp).qp_num };
        Ok(Qp { handle, qp_num, cap })
    }

    pub(crate) fn hw_destroy_qp(&mut self, qp: &Qp) -> Result<()> {
        let op = Op::DestroyQp;
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        // SAFETY: the QP is live.
        c_call(op, unsafe { ibv_destroy_qp(ptr) }, "ibv_destroy_qp")?;
        self.objs.take_qp(qp.handle, op)?;
        Ok(())
    }

    pub(crate) fn hw_query_qp_state(&mut self, qp: &Qp) -> Result<QpState> {
        let op = Op::QueryQp;
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        // SAFETY: plain data.
        let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: plain data.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the QP is live; both outputs are valid for writes.
        let rc = unsafe { ibv_query_qp(ptr, &mut attr, ibv_qp_attr_mask::IBV_QP_STATE.0 as c_int, &mut init) };
        c_call(op, rc, "ibv_query_qp")?;
        Ok(match attr.qp_state {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            _ => QpState::Err,
        })
    }

    /// `ibv_modify_qp` with the attributes a connected RC QP on port 1 needs; the path to the
    /// peer comes from the peer context's port and GID 0.
    pub(crate) fn hw_modify_qp(&mut self, qp: &Qp, m: &QpModify) -> Result<()> {
        use ibv_qp_attr_mask as M;
        let op = Op::ModifyQp;
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        // SAFETY: plain data; zero is the C default.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = m.state as u32;
        let mut mask = M::IBV_QP_STATE;
        match m.state {
            QpState::Init => {
                a.pkey_index = 0;
                a.port_num = 1;
                a.qp_access_flags = m.access.bits();
                mask = mask | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS;
            }
            QpState::Rtr => {
                let dest =
                    m.dest.ok_or_else(|| Error::new(op, EINVAL, "RTR needs the path (IBV_QP_AV, IBV_QP_DEST_QPN)"))?;
                a.path_mtu = dest.path_mtu;
                a.dest_qp_num = dest.dest_qp_num;
                a.rq_psn = 0;
                a.max_dest_rd_atomic = 1;
                a.min_rnr_timer = 12;
                a.ah_attr.dlid = dest.ah.dlid;
                a.ah_attr.port_num = dest.ah.port_num;
                if dest.ah.is_global {
                    a.ah_attr.is_global = 1;
                    a.ah_attr.grh.dgid.raw = dest.ah.dgid.0;
                    a.ah_attr.grh.sgid_index = dest.ah.sgid_index;
                    a.ah_attr.grh.hop_limit = dest.ah.hop_limit;
                }
                mask = mask
                    | M::IBV_QP_AV
                    | M::IBV_QP_PATH_MTU
                    | M::IBV_QP_DEST_QPN
                    | M::IBV_QP_RQ_PSN
                    | M::IBV_QP_MAX_DEST_RD_ATOMIC
                    | M::IBV_QP_MIN_RNR_TIMER;
            }
            QpState::Rts => {
                // SAFETY: the QP is live.
                let from = unsafe { (*ptr).state };
                if from == 2 {
                    a.sq_psn = 0;
                    a.timeout = 14;
                    a.retry_cnt = 7;
                    a.rnr_retry = 7;
                    a.max_rd_atomic = 1;
                    mask = mask
                        | M::IBV_QP_SQ_PSN
                        | M::IBV_QP_TIMEOUT
                        | M::IBV_QP_RETRY_CNT
                        | M::IBV_QP_RNR_RETRY
                        | M::IBV_QP_MAX_QP_RD_ATOMIC;
                }
            }
            _ => {}
        }
        // SAFETY: the QP is live; a is valid for the call.
        c_call(op, unsafe { ibv_modify_qp(ptr, &mut a, mask.0 as c_int) }, "ibv_modify_qp")
    }

    pub(crate) fn hw_post_recv(&mut self, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        let op = Op::PostRecv;
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        if wrs.is_empty() {
            return Ok(());
        }
        let mut sges: Vec<Vec<ibv_sge>> = wrs.iter().map(|w| to_c_sges(&w.sge)).collect();
        let mut c: Vec<ibv_recv_wr> = wrs
            .iter()
            .zip(sges.iter_mut())
            .map(|(w, s)| ibv_recv_wr {
                wr_id: w.wr_id,
                next: ptr::null_mut(),
                sg_list: s.as_mut_ptr(),
                num_sge: s.len() as c_int,
            })
            .collect();
        for i in 1..c.len() {
            let next: *mut ibv_recv_wr = &mut c[i];
            c[i - 1].next = next;
        }
        let mut bad = ptr::null_mut();
        // SAFETY: the QP is live; the WR list and its SGEs outlive the call.
        let rc = unsafe { ibv_post_recv(ptr, c.as_mut_ptr(), &mut bad) };
        c_call(op, rc, "ibv_post_recv")
    }

    /// One `ibv_wr_start`, the builders and setters in order, then `ibv_wr_complete`.
    pub(crate) fn hw_post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()> {
        let op = Op::PostSend;
        let (qpx, mqpx) = {
            let q = self.objs.qps.get(qp.handle, op)?;
            (q.qpx, q.mqpx)
        };
        if qpx.is_null() {
            return Err(Error::new(op, EOPNOTSUPP, "the QP has no extended send API"));
        }
        // Resolve every mkey before the chain starts: a stale handle never reaches libmlx5.
        let mut mkeys = Vec::new();
        let mut deks = Vec::new();
        for w in ops {
            if let WrOp::SetMkeyCrypto(a) = w {
                // libmlx5 follows the DEK pointer when it finalizes the UMR: NULL would crash.
                let d = a.dek.ok_or_else(|| Error::new(op, EINVAL, "the crypto setter names no DEK (NULL)"))?;
                deks.push(self.objs.deks.get(d, op)?.ptr);
            }
            if let WrOp::MkeyConfigure { mkey, .. } | WrOp::MrList { mkey, .. } | WrOp::MrInterleaved { mkey, .. } = w {
                let p = self.objs.mkeys.get(mkey.handle, op)?.ptr;
                mkeys.push((p, mkey.lkey, mkey.rkey));
            }
            if w.is_mlx5dv_mkey_op() && mqpx.is_null() {
                return Err(Error::new(op, EOPNOTSUPP, "the QP was created without mlx5dv send ops"));
            }
            // The C setters take a 16-bit count; a longer list exceeds every entry limit.
            if layout_len(w).is_some_and(|n| u16::try_from(n).is_err()) {
                return Err(Error::new(op, ENOMEM, "a layout of more than 65535 entries exceeds the mkey's entries"));
            }
        }
        let mut mkeys = mkeys.into_iter();
        let mut deks = deks.into_iter();
        // SAFETY (whole chain): qpx and mqpx belong to a live QP; every pointer passed below
        // points into vectors that outlive ibv_wr_complete.
        unsafe {
            ibv_wr_start(qpx);
            // The first setter whose op the QP lacks (a NULL pointer in mlx5dv_qp_ex).
            let mut missing_op: Option<c_int> = None;
            let mut keep: Vec<Vec<ibv_sge>> = Vec::new();
            let mut keep_il: Vec<Vec<mlx5dv_mr_interleaved>> = Vec::new();
            for w in ops {
                if let Some((wr_id, flags)) = wr_id_flags(w) {
                    (*qpx).wr_id = wr_id;
                    (*qpx).wr_flags = flags;
                }
                let mut set_sges = |qpx: *mut ibv_qp_ex, s: &[mlx5_dv::Sge]| {
                    keep.push(to_c_sges(s));
                    if let Some(v) = keep.last() {
                        ibv_wr_set_sge_list(qpx, v.len(), v.as_ptr());
                    }
                };
                match w {
                    WrOp::RdmaWrite { rkey, remote_addr, sge, .. } => {
                        ibv_wr_rdma_write(qpx, *rkey, *remote_addr);
                        set_sges(qpx, sge);
                    }
                    WrOp::RdmaWriteImm { rkey, remote_addr, imm, sge, .. } => {
                        ibv_wr_rdma_write_imm(qpx, *rkey, *remote_addr, imm.to_be());
                        set_sges(qpx, sge);
                    }
                    WrOp::RdmaRead { rkey, remote_addr, sge, .. } => {
                        ibv_wr_rdma_read(qpx, *rkey, *remote_addr);
                        set_sges(qpx, sge);
                    }
                    WrOp::Send { sge, .. } => {
                        ibv_wr_send(qpx);
                        set_sges(qpx, sge);
                    }
                    WrOp::SendImm { imm, sge, .. } => {
                        ibv_wr_send_imm(qpx, imm.to_be());
                        set_sges(qpx, sge);
                    }
                    WrOp::SendInv { invalidate_rkey, sge, .. } => {
                        ibv_wr_send_inv(qpx, *invalidate_rkey);
                        set_sges(qpx, sge);
                    }
                    WrOp::LocalInv { invalidate_rkey, .. } => ibv_wr_local_inv(qpx, *invalidate_rkey),
                    WrOp::MkeyConfigure { num_setters, conf_flags, comp_mask, .. } => {
                        let mut attr = mlx5dv_mkey_conf_attr { conf_flags: conf_flags.bits(), comp_mask: *comp_mask };
                        let m = next_mkey(&mut mkeys);
                        note(&mut missing_op, inline::wr_mkey_configure(mqpx, m, *num_setters, &mut attr));
                    }
                    WrOp::SetMkeyAccessFlags(a) => {
                        note(&mut missing_op, inline::wr_set_mkey_access_flags(mqpx, a.bits()));
                    }
                    WrOp::SetMkeySigBlock(attr) => {
                        let c = CSigAttr::new(attr);
                        note(&mut missing_op, inline::wr_set_mkey_sig_block(mqpx, c.attr()));
                    }
                    WrOp::SetMkeyCrypto(a) => {
                        let c = crate::crypto::c_crypto_attr(a, deks.next().unwrap_or(ptr::null_mut()));
                        note(&mut missing_op, inline::wr_set_mkey_crypto(mqpx, &c));
                    }
                    WrOp::SetMkeyLayoutList(sge) => {
                        keep.push(to_c_sges(sge));
                        if let Some(v) = keep.last() {
                            note(&mut missing_op, inline::wr_set_mkey_layout_list(mqpx, count16(v.len()), v.as_ptr()));
                        }
                    }
                    WrOp::SetMkeyLayoutInterleaved { repeat_count, entries } => {
                        keep_il.push(to_c_interleaved(entries));
                        if let Some(v) = keep_il.last() {
                            let r = inline::wr_set_mkey_layout_interleaved(
                                mqpx,
                                *repeat_count,
                                count16(v.len()),
                                v.as_ptr(),
                            );
                            note(&mut missing_op, r);
                        }
                    }
                    WrOp::MrList { access, sge, .. } => {
                        let m = next_mkey(&mut mkeys);
                        keep.push(to_c_sges(sge));
                        if let Some(v) = keep.last_mut() {
                            note(
                                &mut missing_op,
                                inline::wr_mr_list(mqpx, m, access.bits(), count16(v.len()), v.as_mut_ptr()),
                            );
                        }
                    }
                    WrOp::MrInterleaved { access, repeat_count, entries, .. } => {
                        let m = next_mkey(&mut mkeys);
                        keep_il.push(to_c_interleaved(entries));
                        if let Some(v) = keep_il.last_mut() {
                            let r = inline::wr_mr_interleaved(
                                mqpx,
                                m,
                                access.bits(),
                                *repeat_count,
                                count16(v.len()),
                                v.as_mut_ptr(),
                            );
                            note(&mut missing_op, r);
                        }
                    }
                }
            }
            if let Some(e) = missing_op {
                ibv_wr_abort(qpx);
                return Err(Error::new(op, e, "a setter of the chain is missing from the QP's mlx5dv ops"));
            }
            let rc = ibv_wr_complete(qpx);
            c_call(op, rc, "ibv_wr_complete")
        }
    }

    pub(crate) fn hw_cancel_posted_send_wrs(&mut self, qp: &Qp, wr_id: u64) -> Result<u32> {
        let op = Op::CancelPostedSendWrs;
        let mqpx = self.objs.qps.get(qp.handle, op)?.mqpx;
        if mqpx.is_null() {
            return Err(Error::new(op, EOPNOTSUPP, "the QP was created without mlx5dv send ops"));
        }
        let f = self
            .lib()
            .dv
            .mlx5dv_qp_cancel_posted_send_wrs
            .as_ref()
            .map_err(|_| missing(op, "mlx5dv_qp_cancel_posted_send_wrs"))?;
        // SAFETY: mqpx belongs to a live QP.
        let rc = unsafe { f(mqpx, wr_id) };
        if rc < 0 {
            return Err(Error::new(op, -rc, "mlx5dv_qp_cancel_posted_send_wrs failed"));
        }
        Ok(rc as u32)
    }

    pub(crate) fn hw_get_async_event(&mut self, ctx: mlx5_dv::ContextHandle) -> Result<Option<AsyncEvent>> {
        let op = Op::GetAsyncEvent;
        let c = self.ctx_ptr(ctx, op)?;
        // SAFETY: plain data.
        let mut ev: ibv_async_event = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open and its event fd non-blocking.
        if unsafe { ibv_get_async_event(c, &mut ev) } != 0 {
            return match last_errno() {
                EAGAIN => Ok(None),
                e => Err(Error::new(op, e, "ibv_get_async_event failed")),
            };
        }
        let ty = ev.event_type as u32;
        let mut out = AsyncEvent { event_type: ty, qp_num: None, cq: None };
        // SAFETY: the union member follows the event type, as verbs.h documents.
        unsafe {
            match ty {
                0 => {
                    let cq = ev.element.cq;
                    out.cq = self.objs.cqs.iter().find(|(_, c)| c.ptr == cq).map(|(h, _)| h);
                }
                1..=7 | 16 => out.qp_num = Some((*ev.element.qp).qp_num),
                _ => {}
            }
            ibv_ack_async_event(&mut ev);
        }
        Ok(Some(out))
    }
}

fn to_c_interleaved(e: &[mlx5_dv::MrInterleaved]) -> Vec<mlx5dv_mr_interleaved> {
    e.iter()
        .map(|x| mlx5dv_mr_interleaved {
            addr: x.addr,
            bytes_count: x.bytes_count,
            bytes_skip: x.bytes_skip,
            lkey: x.lkey,
        })
        .collect()
}

/// Write the application's key (with its tag byte) into the provider's mkey and return it.
///
/// # Safety
/// The pointers must be live mkeys of this backend.
unsafe fn next_mkey(
    it: &mut impl Iterator<Item = (*mut crate::sys::mlx5dv::mlx5dv_mkey, u32, u32)>,
) -> *mut crate::sys::mlx5dv::mlx5dv_mkey {
    match it.next() {
        Some((p, lkey, rkey)) => {
            // SAFETY: the caller guarantees p is a live mkey.
            unsafe {
                (*p).lkey = lkey;
                (*p).rkey = rkey;
            }
            p
        }
        None => ptr::null_mut(),
    }
}

fn wr_id_flags(w: &WrOp) -> Option<(u64, u32)> {
    match w {
        WrOp::RdmaWrite { wr_id, flags, .. }
        | WrOp::RdmaWriteImm { wr_id, flags, .. }
        | WrOp::RdmaRead { wr_id, flags, .. }
        | WrOp::Send { wr_id, flags, .. }
        | WrOp::SendImm { wr_id, flags, .. }
        | WrOp::SendInv { wr_id, flags, .. }
        | WrOp::LocalInv { wr_id, flags, .. }
        | WrOp::MkeyConfigure { wr_id, flags, .. }
        | WrOp::MrList { wr_id, flags, .. }
        | WrOp::MrInterleaved { wr_id, flags, .. } => Some((*wr_id, flags.bits())),
        _ => None,
    }
}

/// `struct mlx5dv_sig_block_attr` with the domains and their parameters it points to, kept
/// together so the pointers stay valid while the setter runs.
struct CSigAttr {
    difs: Box<[mlx5dv_sig_t10dif; 2]>,
    crcs: Box<[mlx5dv_sig_crc; 2]>,
    domains: Box<[mlx5dv_sig_block_domain; 2]>,
    present: [bool; 2],
    attr: mlx5dv_sig_block_attr,
}

impl CSigAttr {
    fn new(a: &mlx5_dv::SigBlockAttr) -> Box<Self> {
        let dif = |d: &mlx5_dv::SigBlockDomain| mlx5dv_sig_t10dif {
            bg_type: d.dif.bg_type,
            bg: d.dif.bg,
            app_tag: d.dif.app_tag,
            ref_tag: d.dif.ref_tag,
            flags: d.dif.flags.bits(),
        };
        let crc = |d: &mlx5_dv::SigBlockDomain| mlx5dv_sig_crc { type_: d.crc.crc_type, seed: d.crc.seed };
        let doms = [a.mem, a.wire];
        let zero = mlx5_dv::SigBlockDomain::default();
        let mut c = Box::new(CSigAttr {
            difs: Box::new([dif(doms[0].as_ref().unwrap_or(&zero)), dif(doms[1].as_ref().unwrap_or(&zero))]),
            crcs: Box::new([crc(doms[0].as_ref().unwrap_or(&zero)), crc(doms[1].as_ref().unwrap_or(&zero))]),
            // SAFETY: plain data; every field is set below before use.
            domains: Box::new(unsafe { std::mem::zeroed() }),
            present: [doms[0].is_some(), doms[1].is_some()],
            // SAFETY: plain data.
            attr: unsafe { std::mem::zeroed() },
        });
        for (i, d) in doms.iter().enumerate() {
            let d = d.unwrap_or_default();
            let sig = if d.sig_type == mlx5_dv::sig::TYPE_T10DIF {
                mlx5dv_sig_block_domain__bindgen_ty_1 { dif: &c.difs[i] }
            } else {
                mlx5dv_sig_block_domain__bindgen_ty_1 { crc: &c.crcs[i] }
            };
            c.domains[i] =
                mlx5dv_sig_block_domain { sig_type: d.sig_type, sig, block_size: d.block_size, comp_mask: d.comp_mask };
        }
        let ptr = |i: usize, c: &CSigAttr| if c.present[i] { &c.domains[i] as *const _ } else { ptr::null() };
        c.attr = mlx5dv_sig_block_attr {
            mem: ptr(0, &c),
            wire: ptr(1, &c),
            flags: a.flags.bits(),
            check_mask: a.check_mask,
            copy_mask: a.copy_mask,
            comp_mask: a.comp_mask,
        };
        c
    }

    fn attr(&self) -> *const mlx5dv_sig_block_attr {
        &self.attr
    }
}

/// Keep the first missing-op error of a chain.
fn note(first: &mut Option<c_int>, r: std::result::Result<(), c_int>) {
    if let (None, Err(e)) = (&first, r) {
        *first = Some(e);
    }
}

/// A list length as the C setters take it; lengths over 65535 were refused before the chain.
fn count16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// The number of entries a layout op passes, if it is one.
fn layout_len(w: &WrOp) -> Option<usize> {
    match w {
        WrOp::SetMkeyLayoutList(v) | WrOp::MrList { sge: v, .. } => Some(v.len()),
        WrOp::SetMkeyLayoutInterleaved { entries, .. } | WrOp::MrInterleaved { entries, .. } => Some(entries.len()),
        _ => None,
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[test]
    fn the_first_missing_op_is_kept() {
        let mut first = None;
        note(&mut first, Ok(()));
        note(&mut first, Err(EOPNOTSUPP));
        note(&mut first, Err(EINVAL));
        assert_eq!(first, Some(EOPNOTSUPP));
    }

    #[test]
    fn long_layouts_are_recognised_before_any_narrowing() {
        let long = WrOp::SetMkeyLayoutList(vec![mlx5_dv::Sge::default(); 65536]);
        assert_eq!(layout_len(&long), Some(65536));
        assert!(u16::try_from(65536usize).is_err());
        assert_eq!(count16(65535), 65535);
        assert_eq!(layout_len(&WrOp::SetMkeyAccessFlags(AccessFlags::empty())), None);
    }
}
