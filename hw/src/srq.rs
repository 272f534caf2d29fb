//! Shared receive queues on the real libraries: `ibv_create_srq`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_destroy_srq` and `ibv_post_srq_recv`.

use std::ffi::c_int;
use std::ptr;

use mlx5_dv::{Error, Op, RecvWr, Result, Srq, SrqAttr, SrqInitAttr};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::{c_call, last_errno};
use crate::objects::HwSrq;

impl HwBackend {
    pub(crate) fn hw_create_srq(&mut self, attr: &SrqInitAttr) -> Result<Srq> {
        let op = Op::CreateSrq;
        if attr.xrc.is_some() {
            // XRC domains are not in this backend (open_xrcd answers EOPNOTSUPP).
            return Err(Error::new(op, mlx5_dv::errno::EOPNOTSUPP, "XRC SRQs are not in the hw backend"));
        }
        if attr.tm.is_some() {
            // Tag-matching SRQs (and ibv_post_srq_ops) are not in this backend yet.
            return Err(Error::new(op, mlx5_dv::errno::EOPNOTSUPP, "tag-matching SRQs are not in the hw backend"));
        }
        let (pd, ctx) = {
            let p = self.objs.pds.get(attr.pd, op)?;
            (p.ptr, p.ctx)
        };
        // SAFETY: plain data; zero is the C default.
        let mut a: ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        a.attr.max_wr = attr.max_wr;
        a.attr.max_sge = attr.max_sge;
        // SAFETY: the PD is live; a outlives the call.
        let srq = unsafe { ibv_create_srq(pd, &mut a) };
        if srq.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_create_srq failed"));
        }
        let mut num = 0u32;
        // SAFETY: srq is live; num is valid for writes.
        c_call(op, unsafe { srq_num(srq, &mut num) }, "ibv_get_srq_num").inspect_err(|_| {
            // SAFETY: the SRQ was just created and is in no table.
            unsafe { ibv_destroy_srq(srq) };
        })?;
        let handle = self.objs.add_srq(op, HwSrq { ptr: srq, ctx, pd: attr.pd }).inspect_err(|_| {
            // SAFETY: as above.
            unsafe { ibv_destroy_srq(srq) };
        })?;
        Ok(Srq { handle, srq_num: num, max_wr: a.attr.max_wr, max_sge: a.attr.max_sge })
    }

    pub(crate) fn hw_modify_srq(&mut self, srq: &Srq, attr: &SrqAttr, mask: u32) -> Result<()> {
        let op = Op::ModifySrq;
        let ptr = self.objs.srqs.get(srq.handle, op)?.ptr;
        let mut a = ibv_srq_attr { max_wr: attr.max_wr, max_sge: attr.max_sge, srq_limit: attr.srq_limit };
        // SAFETY: the SRQ is live; a outlives the call.
        c_call(op, unsafe { ibv_modify_srq(ptr, &mut a, mask as c_int) }, "ibv_modify_srq")
    }

    pub(crate) fn hw_query_srq(&mut self, srq: &Srq) -> Result<SrqAttr> {
        let op = Op::QuerySrq;
        let ptr = self.objs.srqs.get(srq.handle, op)?.ptr;
        let mut a = ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: 0 };
        // SAFETY: the SRQ is live; a is valid for writes.
        c_call(op, unsafe { ibv_query_srq(ptr, &mut a) }, "ibv_query_srq")?;
        Ok(SrqAttr { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit })
    }

    pub(crate) fn hw_destroy_srq(&mut self, srq: &Srq) -> Result<()> {
        let op = Op::DestroySrq;
        let ptr = self.objs.srqs.get(srq.handle, op)?.ptr;
        // SAFETY: the SRQ is live.
        c_call(op, unsafe { ibv_destroy_srq(ptr) }, "ibv_destroy_srq")?;
        self.objs.take_srq(srq.handle, op)?;
        Ok(())
    }

    /// One WR per call, so a failure names its WR exactly.
    pub(crate) fn hw_post_srq_recv(&mut self, srq: &Srq, wrs: &[RecvWr]) -> Result<()> {
        let op = Op::PostSrqRecv;
        let ptr = self.objs.srqs.get(srq.handle, op)?.ptr;
        for (n, w) in wrs.iter().enumerate() {
            let mut sges = crate::queues::to_c_sges(&w.sge);
            let mut c = ibv_recv_wr {
                wr_id: w.wr_id,
                next: ptr::null_mut(),
                sg_list: sges.as_mut_ptr(),
                num_sge: sges.len() as c_int,
            };
            let mut bad = ptr::null_mut();
            // SAFETY: the SRQ is live; the WR and its SGEs outlive the call.
            let rc = unsafe { ibv_post_srq_recv(ptr, &mut c, &mut bad) };
            c_call(op, rc, "ibv_post_srq_recv").map_err(|e| e.with_bad_wr(n as u32))?;
        }
        Ok(())
    }
}

/// `ibv_get_srq_num` as verbs.h's inline function does it: the context's `get_srq_num` op, if
/// the context is an extended one. (rdma-sys compares `abi_compat` with a 32-bit all-ones
/// value, which a 64-bit library never holds.)
///
/// # Safety
/// `srq` is a live SRQ and `num` valid for writes.
unsafe fn srq_num(srq: *mut ibv_srq, num: *mut u32) -> c_int {
    // SAFETY: the caller's live SRQ names its live context.
    let ctx = unsafe { (*srq).context };
    // SAFETY: as above.
    if unsafe { (*ctx).abi_compat } as usize != usize::MAX {
        return libc::EOPNOTSUPP;
    }
    // SAFETY: an extended context is the `context` member of a `verbs_context`.
    let vctx = unsafe { ctx.byte_sub(std::mem::offset_of!(verbs_context, context)).cast::<verbs_context>() };
    // SAFETY: as above; the op is read only where the library's struct reaches.
    let covered = unsafe { (*vctx).sz }
        >= std::mem::size_of::<verbs_context>() - std::mem::offset_of!(verbs_context, get_srq_num);
    // SAFETY: as above.
    match unsafe { (*vctx).get_srq_num } {
        // SAFETY: the library's op, on its SRQ.
        Some(f) if covered => unsafe { f(srq, num) },
        _ => libc::EOPNOTSUPP,
    }
}
