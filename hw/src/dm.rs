//! Device memory on a real host: `ibv_alloc_dm`, `ibv_free_dm` and `ibv_reg_dm_mr` are inlines
//! of `verbs.h` over `verbs_context` ops, called here as the header does (`verbs_get_ctx_op`);
//! the copies go through the `ibv_dm`'s own function pointers.

use std::ffi::{c_int, c_uint};

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{AccessFlags, ContextHandle, Dm, Error, Mr, Op, PdHandle, Result};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::last_errno;
use crate::objects::{HwBuf, HwDm, HwMr};

/// `verbs_get_ctx`: the `verbs_context` around `ctx`, if it is an extended one.
///
/// # Safety
///
/// `ctx` is a live context of the library.
pub(crate) unsafe fn verbs_ctx(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: the caller's live context.
    if unsafe { (*ctx).abi_compat } as usize != usize::MAX {
        return None;
    }
    let at = std::mem::offset_of!(verbs_context, context);
    // SAFETY: an extended context is the last member of its verbs_context.
    let v = unsafe { ctx.cast::<u8>().sub(at) }.cast::<verbs_context>();
    Some(v)
}

/// `verbs_get_ctx_op`: the op if the context's `sz` reaches it and it is set.
macro_rules! ctx_op {
    ($ctx:expr, $op:ident) => {{
        // SAFETY: the context is live (the caller's handle).
        match unsafe { verbs_ctx($ctx) } {
            Some(v) => {
                let need = std::mem::size_of::<verbs_context>() - std::mem::offset_of!(verbs_context, $op);
                // SAFETY: a live verbs_context; `sz` says how much of it precedes `context`.
                if unsafe { (*v).sz } >= need { unsafe { (*v).$op } } else { None }
            }
            None => None,
        }
    }};
}
pub(crate) use ctx_op;

impl HwBackend {
    pub(crate) fn hw_alloc_dm(&mut self, ctx: ContextHandle, length: u64, log_align_req: u32) -> Result<Dm> {
        let op = Op::AllocDm;
        let cptr = self.objs.contexts.get(ctx, op)?.ptr;
        let Some(f) = ctx_op!(cptr, alloc_dm) else {
            return Err(Error::new(op, EOPNOTSUPP, "the context has no alloc_dm"));
        };
        let mut attr =
            ibv_alloc_dm_attr { length: usize::try_from(length).unwrap_or(usize::MAX), log_align_req, comp_mask: 0 };
        // SAFETY: a live context and attributes on the stack.
        let ptr = unsafe { f(cptr, &mut attr) };
        if ptr.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_alloc_dm failed"));
        }
        let layout = std::alloc::Layout::new::<u8>();
        let stand_in = HwBuf { ptr: std::ptr::null_mut(), layout, dmabuf: None, borrowed: true };
        let buf = self.objs.bufs.insert(op, stand_in)?;
        let handle = self.objs.dms.insert(op, HwDm { ptr, ctx, buf })?;
        Ok(Dm { handle, length })
    }

    pub(crate) fn hw_free_dm(&mut self, dm: &Dm) -> Result<()> {
        let op = Op::FreeDm;
        let (ptr, ctx, buf) = {
            let d = self.objs.dms.get(dm.handle, op)?;
            (d.ptr, d.ctx, d.buf)
        };
        let cptr = self.objs.contexts.get(ctx, op)?.ptr;
        let Some(f) = ctx_op!(cptr, free_dm) else {
            return Err(Error::new(op, EOPNOTSUPP, "the context has no free_dm"));
        };
        // SAFETY: a live DM of this backend.
        let rc = unsafe { f(ptr) };
        if rc != 0 {
            return Err(Error::new(op, rc, "ibv_free_dm failed"));
        }
        self.objs.dms.take(dm.handle, op)?;
        self.objs.bufs.take(buf, op)?;
        Ok(())
    }

    /// The DM's copy function's return value: 0 or the error.
    fn dm_copy(&mut self, op: Op, dm: &Dm, copy: impl FnOnce(*mut ibv_dm) -> c_int) -> Result<()> {
        let ptr = self.objs.dms.get(dm.handle, op)?.ptr;
        match copy(ptr) {
            0 => Ok(()),
            e => Err(Error::new(op, e, "the DM copy failed")),
        }
    }

    pub(crate) fn hw_memcpy_to_dm(&mut self, dm: &Dm, offset: u64, data: &[u8]) -> Result<()> {
        self.dm_copy(Op::MemcpyToDm, dm, |p| {
            // SAFETY: a live DM; the function is the library's.
            match unsafe { (*p).memcpy_to_dm } {
                // SAFETY: `data` holds `len` bytes.
                Some(f) => unsafe { f(p, offset, data.as_ptr().cast(), data.len()) },
                None => EOPNOTSUPP,
            }
        })
    }

    pub(crate) fn hw_memcpy_from_dm(&mut self, dm: &Dm, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        self.dm_copy(Op::MemcpyFromDm, dm, |p| {
            // SAFETY: a live DM; the function is the library's.
            match unsafe { (*p).memcpy_from_dm } {
                // SAFETY: `out` holds `len` bytes.
                Some(f) => unsafe { f(out.as_mut_ptr().cast(), p, offset, len) },
                None => EOPNOTSUPP,
            }
        })?;
        Ok(out)
    }

    pub(crate) fn hw_reg_dm_mr(
        &mut self,
        pd: PdHandle,
        dm: &Dm,
        offset: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::RegDmMr;
        let (pd_ptr, ctx) = {
            let p = self.objs.pds.get(pd, op)?;
            (p.ptr, p.ctx)
        };
        let (dm_ptr, buf) = {
            let d = self.objs.dms.get(dm.handle, op)?;
            (d.ptr, d.buf)
        };
        let cptr = self.objs.contexts.get(ctx, op)?.ptr;
        let Some(f) = ctx_op!(cptr, reg_dm_mr) else {
            return Err(Error::new(op, EOPNOTSUPP, "the context has no reg_dm_mr"));
        };
        let len = usize::try_from(length).map_err(|_| Error::new(op, EINVAL, "length past usize"))?;
        // SAFETY: a live PD and DM.
        let mr = unsafe { f(pd_ptr, dm_ptr, offset, len, access.bits() as c_uint) };
        if mr.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_reg_dm_mr failed"));
        }
        // SAFETY: a non-NULL MR the library returned.
        let (lkey, rkey, addr) = unsafe { ((*mr).lkey, (*mr).rkey, (*mr).addr as u64) };
        let handle = self.objs.add_mr(op, HwMr { ptr: mr, pd, ctx, buf: Some(buf) }).inspect_err(|_| {
            // SAFETY: the MR was just registered and is in no table.
            unsafe { ibv_dereg_mr(mr) };
        })?;
        Ok(Mr { handle, lkey, rkey, addr, length })
    }
}

impl HwBackend {
    /// `ibv_query_device_ex(ctx)`'s `max_dm_size` and ODP caps, through the context's op as
    /// the header's inline calls it; `None` without one.
    ///
    /// # Safety
    ///
    /// `ctx` is a live context of the library.
    pub(crate) unsafe fn hw_device_attr_ex(&self, ctx: *mut ibv_context) -> Option<(u64, mlx5_dv::OdpCaps)> {
        let f = ctx_op!(ctx, query_device_ex)?;
        // SAFETY: plain data; zero is the C default.
        let mut attr: ibv_device_attr_ex = unsafe { std::mem::zeroed() };
        // SAFETY: a live context and an attribute struct of the size given.
        let rc = unsafe { f(ctx, std::ptr::null(), &mut attr, std::mem::size_of::<ibv_device_attr_ex>()) };
        let t = &attr.odp_caps.per_transport_caps;
        let odp = mlx5_dv::OdpCaps {
            general_caps: attr.odp_caps.general_caps as u32,
            rc: t.rc_odp_caps,
            uc: t.uc_odp_caps,
            ud: t.ud_odp_caps,
            xrc: attr.xrc_odp_caps,
        };
        (rc == 0).then_some((attr.max_dm_size as u64, odp))
    }

    /// `ibv_advise_mr`: the context's `advise_mr` op, as the header's inline calls it
    /// (EOPNOTSUPP without one); the errno is its return value.
    pub(crate) fn hw_advise_mr(
        &mut self,
        pd: mlx5_dv::PdHandle,
        advice: u32,
        flags: u32,
        sges: &[mlx5_dv::Sge],
    ) -> Result<()> {
        let op = Op::AdviseMr;
        let (pd_ptr, ctx) = {
            let p = self.objs.pds.get(pd, op)?;
            (p.ptr, p.ctx)
        };
        let cptr = self.objs.contexts.get(ctx, op)?.ptr;
        let Some(f) = ctx_op!(cptr, advise_mr) else {
            return Err(Error::new(op, EOPNOTSUPP, "the context has no advise_mr"));
        };
        let mut list: Vec<ibv_sge> =
            sges.iter().map(|s| ibv_sge { addr: s.addr, length: s.length, lkey: s.lkey }).collect();
        let n = u32::try_from(list.len()).map_err(|_| Error::new(op, EINVAL, "too many SGEs"))?;
        // SAFETY: a live PD and `n` SGEs.
        let rc = unsafe { f(pd_ptr, advice, flags, list.as_mut_ptr(), n) };
        if rc == 0 { Ok(()) } else { Err(Error::new(op, rc, "ibv_advise_mr failed")) }
    }
}
