//! Memory regions over the backend's buffers (`ibv_reg_mr`, `ibv_rereg_mr`, `ibv_dereg_mr`).

use std::ffi::{c_int, c_void};

use mlx5_dv::errno::{EFAULT, EINVAL};
use mlx5_dv::{AccessFlags, Error, Mr, Op, ReregFlags, Result};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::{c_call, last_errno};
use crate::objects::HwMr;

impl HwBackend {
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
        // An ODP MR pins nothing and may cover memory of no buffer (implicit ODP: all of it);
        // the kernel checks its range itself.
        let buf = if access.contains(AccessFlags::ON_DEMAND) {
            None
        } else {
            // ib_umem_get refuses a range whose end wraps (EINVAL) before it looks at the pages.
            if addr.checked_add(length).is_none() {
                return Err(Error::new(op, EINVAL, format!("[0x{addr:x}, +{length}) wraps the address space")));
            }
            Some(self.buffer_holding(op, addr, length)?)
        };
        // SAFETY: the PD is live; the range lies inside a live buffer, or is an ODP MR, which
        // the kernel pages on demand and never lets the device reach unmapped memory.
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

    /// `ibv_rereg_mr`; a new range must lie inside one of this backend's buffers, as
    /// [`HwBackend::hw_reg_mr`]'s does.
    #[allow(clippy::too_many_arguments)] // the C signature
    pub(crate) fn hw_rereg_mr(
        &mut self,
        mr: &Mr,
        flags: u32,
        pd: Option<mlx5_dv::PdHandle>,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::ReregMr;
        let (ptr, old_pd, old_buf) = {
            let m = self.objs.mrs.get(mr.handle, op)?;
            (m.ptr, m.pd, m.buf)
        };
        let pd_ptr = match pd {
            Some(h) if flags & ReregFlags::CHANGE_PD.bits() != 0 => self.objs.pds.get(h, op)?.ptr,
            _ => std::ptr::null_mut(),
        };
        let buf = if flags & ReregFlags::CHANGE_TRANSLATION.bits() != 0 {
            Some(self.buffer_holding(op, addr, length)?)
        } else {
            old_buf
        };
        // SAFETY: the MR is live; the new PD (if any) is live; the new range lies in a live
        // buffer of this backend.
        let rc = unsafe {
            ibv_rereg_mr(ptr, flags as c_int, pd_ptr, addr as *mut c_void, length as usize, access.bits() as c_int)
        };
        if rc != 0 {
            return Err(Error::new(op, last_errno(), format!("ibv_rereg_mr returned {rc}")));
        }
        let new_pd = if pd_ptr.is_null() { old_pd } else { pd.unwrap_or(old_pd) };
        self.objs.move_mr(mr.handle, new_pd, buf, op)?;
        // SAFETY: the MR is live; libibverbs updated its fields.
        let (lkey, rkey, a, l) = unsafe { ((*ptr).lkey, (*ptr).rkey, (*ptr).addr as u64, (*ptr).length as u64) };
        Ok(Mr { handle: mr.handle, lkey, rkey, addr: a, length: l })
    }

    /// The buffer of this backend that holds all of `[addr, +length)`: only those may be
    /// registered, so RDMA never reaches other memory. EFAULT otherwise.
    fn buffer_holding(&self, op: Op, addr: u64, length: u64) -> Result<mlx5_dv::BufHandle> {
        self.objs
            .bufs
            .iter()
            .find(|(_, b)| {
                let start = b.ptr as u64;
                addr >= start && addr.checked_add(length).is_some_and(|e| e <= start + b.layout.size() as u64)
            })
            .map(|(h, _)| h)
            .ok_or_else(|| {
                Error::new(op, EFAULT, format!("[0x{addr:x}, +{length}) is not inside a buffer of this backend"))
            })
    }

    pub(crate) fn hw_dereg_mr(&mut self, mr: &Mr) -> Result<()> {
        let op = Op::DeregMr;
        let ptr = self.objs.mrs.get(mr.handle, op)?.ptr;
        // SAFETY: the MR is live.
        c_call(op, unsafe { ibv_dereg_mr(ptr) }, "ibv_dereg_mr")?;
        self.objs.take_mr(mr.handle, op)?;
        Ok(())
    }
}
