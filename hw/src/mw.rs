//! Memory windows on a real host: `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw` are
//! inlines of `verbs.h` over the context's `ops`, called here as the header does (with
//! `ibv_bind_mw`'s own checks first); binds posted as WRs carry the library's `ibv_mw` and
//! `ibv_mr` pointers.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP, EPERM};
use mlx5_dv::{BindMw, Error, MW_TYPE_1, Mw, MwBind, Op, PdHandle, Qp, Result};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::last_errno;
use crate::objects::HwMw;

impl HwBackend {
    pub(crate) fn hw_alloc_mw(&mut self, pd: PdHandle, mw_type: u32) -> Result<Mw> {
        let op = Op::AllocMw;
        let pptr = self.objs.pds.get(pd, op)?.ptr;
        // SAFETY: a live PD of this backend and its context.
        let f = unsafe { (*(*pptr).context).ops.alloc_mw };
        let Some(f) = f else { return Err(Error::new(op, EOPNOTSUPP, "the context has no alloc_mw")) };
        // SAFETY: a live PD.
        let ptr = unsafe { f(pptr, mw_type) };
        if ptr.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_alloc_mw failed"));
        }
        // SAFETY: the window the library just made.
        let rkey = unsafe { (*ptr).rkey };
        let handle = self.objs.mws.insert(op, HwMw { ptr })?;
        Ok(Mw { handle, rkey, mw_type })
    }

    pub(crate) fn hw_dealloc_mw(&mut self, mw: &Mw) -> Result<()> {
        let op = Op::DeallocMw;
        let ptr = self.objs.mws.get(mw.handle, op)?.ptr;
        // SAFETY: a live window of this backend and its context.
        let f = unsafe { (*(*ptr).context).ops.dealloc_mw };
        let Some(f) = f else { return Err(Error::new(op, EOPNOTSUPP, "the context has no dealloc_mw")) };
        // SAFETY: a live window.
        let rc = unsafe { f(ptr) };
        if rc != 0 {
            return Err(Error::new(op, rc, "ibv_dealloc_mw failed"));
        }
        self.objs.mws.take(mw.handle, op)?;
        Ok(())
    }

    /// The library's `bind_mw.mw` and `bind_info` of a bind given by handles.
    pub(crate) fn c_bind(&self, b: &BindMw, op: Op) -> Result<(*mut ibv_mw, ibv_mw_bind_info)> {
        let mw = self.objs.mws.get(b.mw.handle, op)?.ptr;
        let mr = match b.bind_info.mr {
            Some(m) => self.objs.mrs.get(m.handle, op)?.ptr,
            None => std::ptr::null_mut(),
        };
        let info = ibv_mw_bind_info {
            mr,
            addr: b.bind_info.addr,
            length: b.bind_info.length,
            mw_access_flags: b.bind_info.access.bits(),
        };
        Ok((mw, info))
    }

    pub(crate) fn hw_bind_mw(&mut self, qp: &Qp, mw: &Mw, bind: &MwBind) -> Result<u32> {
        let op = Op::BindMw;
        let qptr = self.objs.qps.get(qp.handle, op)?.ptr;
        let b = BindMw { mw: *mw, rkey: 0, bind_info: bind.bind_info };
        let (mptr, bind_info) = self.c_bind(&b, op)?;
        let info = &bind.bind_info;
        // ibv_bind_mw's checks, before the provider's.
        // SAFETY: a live window.
        let (mw_type, mw_pd, ctx) = unsafe { ((*mptr).type_, (*mptr).pd, (*mptr).context) };
        if mw_type != MW_TYPE_1 {
            return Err(Error::new(op, EINVAL, "ibv_bind_mw binds type-1 windows only"));
        }
        if info.mr.is_none() && (info.addr != 0 || info.length != 0) {
            return Err(Error::new(op, EINVAL, "an address or length without an MR"));
        }
        // SAFETY: a live MR when not NULL.
        if !bind_info.mr.is_null() && unsafe { (*bind_info.mr).pd } != mw_pd {
            return Err(Error::new(op, EPERM, "the MR is not in the window's PD"));
        }
        // SAFETY: the window's live context.
        let Some(f) = (unsafe { (*ctx).ops.bind_mw }) else {
            return Err(Error::new(op, EOPNOTSUPP, "the context has no bind_mw"));
        };
        // The library reads and updates `mw->rkey`: start from the caller's.
        // SAFETY: a live window.
        unsafe { (*mptr).rkey = mw.rkey };
        let mut c = ibv_mw_bind { wr_id: bind.wr_id, send_flags: bind.send_flags.bits(), bind_info };
        // SAFETY: a live QP and window; the bind lives on the stack for the call.
        let rc = unsafe { f(qptr, mptr, &mut c) };
        if rc != 0 {
            return Err(Error::new(op, rc, "ibv_bind_mw failed"));
        }
        // SAFETY: a live window.
        Ok(unsafe { (*mptr).rkey })
    }
}
