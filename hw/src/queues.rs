//! CQs and QPs over libibverbs: their lifetimes, polling, QP state changes, receive WRs
//! and async events. Send WRs are the chain's (`wr_chain`).

use std::ffi::c_int;
use std::ptr;

use mlx5_dv::errno::{EAGAIN, EINVAL, EOPNOTSUPP};
use mlx5_dv::{AsyncEvent, Cq, Error, Op, Qp, QpCap, QpInitAttr, QpModify, QpState, RecvWr, Result, Wc};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::{c_call, last_errno, missing};
use crate::objects::{HwCq, HwQp, unused};
use crate::sys::mlx5dv::{mlx5dv_cq_init_attr, mlx5dv_qp_init_attr};

pub(crate) fn to_c_sges(sge: &[mlx5_dv::Sge]) -> Vec<ibv_sge> {
    sge.iter().map(|s| ibv_sge { addr: s.addr, length: s.length, lkey: s.lkey }).collect()
}

impl HwBackend {
    pub(crate) fn hw_create_cq(&mut self, ctx: mlx5_dv::ContextHandle, cqe: u32, comp_vector: u32) -> Result<Cq> {
        let op = Op::CreateCq;
        let c = self.ctx_ptr(ctx, op)?;
        let n = c_int::try_from(cqe).map_err(|_| Error::new(op, EINVAL, "cqe does not fit an int"))?;
        // The C int carries the vector's bits; the kernel reads them unsigned.
        let vector = comp_vector as c_int;
        // SAFETY: c is an open context.
        let cq = unsafe { ibv_create_cq(c, n, ptr::null_mut(), ptr::null_mut(), vector) };
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

    /// `mlx5dv_create_cq` with the standard `wc_flags`; the extended CQ is polled as a plain
    /// one (`ibv_cq_ex_to_cq` is a cast).
    pub(crate) fn hw_create_dv_cq(
        &mut self,
        ctx: mlx5_dv::ContextHandle,
        cqe: u32,
        comp_vector: u32,
        attr: &mlx5_dv::DvCqAttr,
    ) -> Result<Cq> {
        let op = Op::CreateDvCq;
        let c = self.ctx_ptr(ctx, op)?;
        let f = self.lib().dv.mlx5dv_create_cq.as_ref().map_err(|_| missing(op, "mlx5dv_create_cq"))?;
        // SAFETY: plain data; zero is the C default.
        let mut cq_attr: ibv_cq_init_attr_ex = unsafe { std::mem::zeroed() };
        cq_attr.cqe = cqe;
        cq_attr.comp_vector = comp_vector;
        // IBV_WC_STANDARD_FLAGS.
        cq_attr.wc_flags = 0x7f;
        let mut dv = mlx5dv_cq_init_attr {
            comp_mask: attr.comp_mask,
            cqe_comp_res_format: attr.cqe_comp_res_format,
            flags: attr.flags,
            cqe_size: attr.cqe_size,
        };
        // SAFETY: c is an open context; both attributes are valid for the call.
        let ex = unsafe { f(c, &mut cq_attr, &mut dv) };
        if ex.is_null() {
            return Err(Error::new(op, last_errno(), "mlx5dv_create_cq failed"));
        }
        let cq = ex.cast::<ibv_cq>();
        // SAFETY: an ibv_cq_ex begins with the fields of an ibv_cq.
        let cap = unsafe { (*cq).cqe } as u32;
        let handle = self.objs.cqs.insert(op, HwCq { ptr: cq, ctx }).inspect_err(|_| {
            // SAFETY: the CQ was just created and no QP uses it.
            unsafe { ibv_destroy_cq(cq) };
        })?;
        Ok(Cq { handle, cqe: cap })
    }

    /// `ibv_create_cq_ex` through `mlx5dv_create_cq`, which is libmlx5's `create_cq_ex` op with
    /// the vendor attributes (NULL without them); the standard `wc_flags`.
    pub(crate) fn hw_create_cq_ex(&mut self, ctx: mlx5_dv::ContextHandle, attr: &mlx5_dv::CqInitAttrEx) -> Result<Cq> {
        let op = if attr.dv.is_some() { Op::CreateDvCq } else { Op::CreateCq };
        let c = self.ctx_ptr(ctx, op)?;
        let f = self.lib().dv.mlx5dv_create_cq.as_ref().map_err(|_| missing(op, "mlx5dv_create_cq"))?;
        // SAFETY: plain data; zero is the C default.
        let mut cq_attr: ibv_cq_init_attr_ex = unsafe { std::mem::zeroed() };
        cq_attr.cqe = attr.cqe;
        cq_attr.comp_vector = attr.comp_vector;
        cq_attr.comp_mask = attr.comp_mask;
        cq_attr.flags = attr.flags;
        // IBV_WC_STANDARD_FLAGS.
        cq_attr.wc_flags = 0x7f;
        let mut dv = attr.dv.map(|a| mlx5dv_cq_init_attr {
            comp_mask: a.comp_mask,
            cqe_comp_res_format: a.cqe_comp_res_format,
            flags: a.flags,
            cqe_size: a.cqe_size,
        });
        let dv_ptr = dv.as_mut().map_or(ptr::null_mut(), |d| d as *mut mlx5dv_cq_init_attr);
        // SAFETY: c is an open context; the attributes are valid for the call (or NULL).
        let ex = unsafe { f(c, &mut cq_attr, dv_ptr) };
        if ex.is_null() {
            return Err(Error::new(op, last_errno(), "mlx5dv_create_cq failed"));
        }
        let cq = ex.cast::<ibv_cq>();
        // SAFETY: an ibv_cq_ex begins with the fields of an ibv_cq.
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

    pub(crate) fn hw_resize_cq(&mut self, cq: &Cq, cqe: u32) -> Result<Cq> {
        let op = Op::ResizeCq;
        let ptr = self.objs.cqs.get(cq.handle, op)?.ptr;
        let n = c_int::try_from(cqe).map_err(|_| Error::new(op, EINVAL, "cqe does not fit an int"))?;
        // SAFETY: the CQ is live; ibv_resize_cq returns the errno.
        let rc = unsafe { ibv_resize_cq(ptr, n) };
        if rc != 0 {
            return Err(Error::new(op, rc, "ibv_resize_cq failed"));
        }
        // SAFETY: as above; the call set the new capacity.
        Ok(Cq { handle: cq.handle, cqe: unsafe { (*ptr).cqe } as u32 })
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
        Ok(wcs.iter().take(got as usize).map(crate::legacy::wc_of).collect())
    }

    pub(crate) fn hw_create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp> {
        let op = Op::CreateQp;
        let (pd_ptr, ctx) = {
            let p = self.objs.pds.get(attr.pd, op)?;
            (p.ptr, p.ctx)
        };
        if attr.ind_table.is_some() {
            // The backend has no WQs or indirection tables to name; a malformed RX_HASH
            // request without a table goes on to libmlx5's checks.
            return Err(Error::new(op, EOPNOTSUPP, "RSS QPs are not in the hw backend"));
        }
        let scq = self.objs.cqs.get(attr.send_cq, op)?.ptr;
        let rcq = self.objs.cqs.get(attr.recv_cq, op)?.ptr;
        let cptr = self.ctx_ptr(ctx, op)?;
        if attr.xrcd.is_some()
            || (attr.qp_type == mlx5_dv::qp_type::XRC_RECV && attr.mask() & mlx5_dv::qp_init_mask::XRCD != 0)
        {
            // libibverbs would follow the NULL XRC domain this backend would pass.
            return Err(Error::new(op, EOPNOTSUPP, "XRC domains are not in the hw backend"));
        }
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
        if let Some(s) = attr.srq {
            init.srq = self.objs.srqs.get(s, op)?.ptr;
        }
        init.comp_mask = attr.mask();
        init.send_ops_flags = attr.send_ops_flags.bits();
        init.sq_sig_all = c_int::from(attr.sq_sig_all);
        init.create_flags = attr.create_flags;
        // mlx5dv_create_qp with a NULL mlx5 attribute is what ibv_create_qp_ex runs on mlx5.
        let f = self.lib().dv.mlx5dv_create_qp.as_ref().map_err(|_| missing(op, "mlx5dv_create_qp"))?;
        // SAFETY: plain data; zero is the C default.
        let mut d: mlx5dv_qp_init_attr = unsafe { std::mem::zeroed() };
        let dptr = match attr.dv {
            Some(dv) => {
                d.comp_mask = dv.comp_mask.bits();
                d.create_flags = dv.create_flags.bits();
                d.send_ops_flags = dv.send_ops_flags.bits();
                crate::dc::fill_dc(&mut d, &dv);
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
            .is_some_and(|d| d.comp_mask.contains(mlx5_dv::dv_qp::MASK_SEND_OPS_FLAGS) && !d.send_ops_flags.is_empty())
            || crate::dc::is_dci(attr.dv);
        let mqpx = match (&self.lib().dv.mlx5dv_qp_ex_from_ibv_qp_ex, dv_ops && !qpx.is_null()) {
            // SAFETY: qpx is the extended QP of an mlx5 QP.
            (Ok(f), true) => unsafe { f(qpx) },
            _ => ptr::null_mut(),
        };
        let cqs = [attr.send_cq, attr.recv_cq];
        let handle = self
            .objs
            .add_qp(op, HwQp { ptr: qp, qpx, mqpx, ctx, pd: attr.pd, cqs, srq: attr.srq })
            .inspect_err(|_| {
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
        if let Some(ext) = &m.ext {
            exact_attr(&mut a, m, ext);
            // SAFETY: the QP is live; a is valid for the call.
            let rc = unsafe { ibv_modify_qp(ptr, &mut a, ext.mask.bits() as c_int) };
            return c_call(op, rc, "ibv_modify_qp");
        }
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

    pub(crate) fn hw_modify_qp_udp_sport(&mut self, qp: &Qp, udp_sport: u16) -> Result<()> {
        let op = Op::ModifyQpUdpSport;
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        let f =
            self.lib().dv.mlx5dv_modify_qp_udp_sport.as_ref().map_err(|_| missing(op, "mlx5dv_modify_qp_udp_sport"))?;
        // SAFETY: ptr is a live QP; the call returns the errno.
        let rc = unsafe { f(ptr, udp_sport) };
        if rc != 0 {
            return Err(Error::new(op, rc, "mlx5dv_modify_qp_udp_sport failed"));
        }
        Ok(())
    }

    pub(crate) fn hw_dci_stream_id_reset(&mut self, qp: &Qp, stream_id: u16) -> Result<()> {
        let op = Op::DciStreamIdReset;
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        let f =
            self.lib().dv.mlx5dv_dci_stream_id_reset.as_ref().map_err(|_| missing(op, "mlx5dv_dci_stream_id_reset"))?;
        // SAFETY: ptr is a live QP; the call returns the errno.
        let rc = unsafe { f(ptr, stream_id) };
        if rc != 0 {
            return Err(Error::new(op, rc, "mlx5dv_dci_stream_id_reset failed"));
        }
        Ok(())
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
        let mut out = AsyncEvent { event_type: ty, qp_num: None, cq: None, srq: None };
        // SAFETY: the union member follows the event type, as verbs.h documents.
        unsafe {
            match ty {
                0 => {
                    let cq = ev.element.cq;
                    out.cq = self.objs.cqs.iter().find(|(_, c)| c.ptr == cq).map(|(h, _)| h);
                }
                1..=7 | 16 => out.qp_num = Some((*ev.element.qp).qp_num),
                14 | 15 => {
                    let srq = ev.element.srq;
                    out.srq = self.objs.srqs.iter().find(|(_, s)| s.ptr == srq).map(|(h, _)| h);
                }
                _ => {}
            }
            ibv_ack_async_event(&mut ev);
        }
        Ok(Some(out))
    }
}

/// The `ibv_qp_attr` of an exact [`QpModify`]: every field its mask may name.
fn exact_attr(a: &mut ibv_qp_attr, m: &QpModify, ext: &mlx5_dv::QpAttrExt) {
    a.cur_qp_state = ext.cur_qp_state.map_or(0, |s| s as u32);
    a.qp_access_flags = m.access.bits();
    a.pkey_index = ext.pkey_index;
    a.port_num = ext.port_num;
    a.qkey = ext.qkey;
    a.rq_psn = ext.rq_psn;
    a.sq_psn = ext.sq_psn;
    a.timeout = ext.timeout;
    a.retry_cnt = ext.retry_cnt;
    a.rnr_retry = ext.rnr_retry;
    a.min_rnr_timer = ext.min_rnr_timer;
    a.max_rd_atomic = ext.max_rd_atomic;
    a.max_dest_rd_atomic = ext.max_dest_rd_atomic;
    a.path_mig_state = ext.path_mig_state;
    a.en_sqd_async_notify = ext.en_sqd_async_notify;
    a.rate_limit = ext.rate_limit;
    if let Some(dest) = m.dest {
        a.path_mtu = dest.path_mtu;
        a.dest_qp_num = dest.dest_qp_num;
        a.ah_attr.dlid = dest.ah.dlid;
        a.ah_attr.port_num = dest.ah.port_num;
        if dest.ah.is_global {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = dest.ah.dgid.0;
            a.ah_attr.grh.sgid_index = dest.ah.sgid_index;
            a.ah_attr.grh.hop_limit = dest.ah.hop_limit;
        }
    }
}
