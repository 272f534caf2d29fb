//! Memory windows: the context ops behind the header's inline `ibv_alloc_mw`,
//! `ibv_dealloc_mw` and `ibv_bind_mw` (kernel contexts only, as libmlx5 sets them), and the
//! window and MR a bind WR names (`IBV_WR_BIND_MW`, `ibv_wr_bind_mw`) found by their
//! addresses.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::{Mutex, PoisonError};

use mlx5_dv::{AccessFlags, BindMw, MwBind, MwBindInfo, SendFlags};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::state::{Shim, key, with};

/// One `ibv_mw`, with the simulator's window behind it.
#[repr(C)]
struct ShimMw {
    c: ibv_mw,
    mw: mlx5_dv::Mw,
}

// SAFETY: the context and PD pointers inside are the program's, only compared and handed
// back; the table is reached under its lock.
unsafe impl Send for ShimMw {}

/// The windows the program holds, by the address of their `ibv_mw`.
static MWS: Mutex<BTreeMap<usize, Box<ShimMw>>> = Mutex::new(BTreeMap::new());

fn mws() -> std::sync::MutexGuard<'static, BTreeMap<usize, Box<ShimMw>>> {
    MWS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The simulator's window behind a program's `ibv_mw`, with the key the program holds.
fn mw_of(mw: *const ibv_mw) -> Result<mlx5_dv::Mw, c_int> {
    let t = mws();
    let m = t.get(&key(mw)).ok_or(libc::EINVAL)?;
    Ok(mlx5_dv::Mw { rkey: m.c.rkey, ..m.mw })
}

/// The memory window ops of a kernel context.
pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.context.ops.alloc_mw = Some(alloc_mw);
    c.context.ops.dealloc_mw = Some(dealloc_mw);
    c.context.ops.bind_mw = Some(bind_mw);
}

/// Drop the `ibv_mw`s of a closed context (the close destroyed their windows).
pub(crate) fn forget(ctx: *const ibv_context) {
    mws().retain(|_, m| !std::ptr::eq(m.c.context, ctx));
}

impl Shim {
    /// A bind's window and region from the program's pointers (EINVAL for ones the shim did
    /// not make).
    pub(crate) fn bind_of(&self, mw: *const ibv_mw, rkey: u32, info: &ibv_mw_bind_info) -> Result<BindMw, c_int> {
        let mw = mw_of(mw)?;
        let mr = if info.mr.is_null() { None } else { Some(self.mrs.get(&key(info.mr)).ok_or(libc::EINVAL)?.mr) };
        let bind_info = MwBindInfo {
            mr,
            addr: info.addr,
            length: info.length,
            access: AccessFlags::from_bits_retain(info.mw_access_flags),
        };
        Ok(BindMw { mw, rkey, bind_info })
    }

    fn alloc_mw(&mut self, pd: *mut ibv_pd, mw_type: u32) -> Result<*mut ibv_mw, c_int> {
        let p = self.pd(pd)?;
        let (ctx, handle) = (p.c.context, p.handle);
        let mw = self.sim.alloc_mw(handle, mw_type).map_err(|e| e.errno())?;
        let c = ibv_mw { context: ctx, pd, rkey: mw.rkey, handle: mw.handle.id(), type_: mw_type };
        let mut m = Box::new(ShimMw { c, mw });
        let p: *mut ibv_mw = &mut m.c;
        mws().insert(key(p), m);
        Ok(p)
    }

    fn dealloc_mw(&mut self, mw: *mut ibv_mw) -> c_int {
        let Ok(m) = mw_of(mw) else { return libc::EINVAL };
        if let Err(e) = self.sim.dealloc_mw(&m) {
            return code(&e);
        }
        mws().remove(&key(mw));
        0
    }

    /// `mlx5_bind_mw` (the header's `ibv_bind_mw` checked the window's type and the MR's PD
    /// first): the bind posted with the next key, which `mw->rkey` then holds.
    fn bind_mw(&mut self, qp: *mut ibv_qp, mw: *mut ibv_mw, bind: &ibv_mw_bind) -> c_int {
        let Ok(q) = self.qp(qp).map(|q| q.qp) else { return libc::EINVAL };
        let b = match self.bind_of(mw, 0, &bind.bind_info) {
            Ok(b) => b,
            Err(e) => return e,
        };
        let mb = MwBind {
            wr_id: bind.wr_id,
            send_flags: SendFlags::from_bits_retain(bind.send_flags),
            bind_info: b.bind_info,
        };
        match self.sim.bind_mw(&q, &b.mw, &mb) {
            Ok(rkey) => {
                if let Some(m) = mws().get_mut(&key(mw)) {
                    m.c.rkey = rkey;
                }
                0
            }
            Err(e) => code(&e),
        }
    }
}

unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, mw_type: u32) -> *mut ibv_mw {
    with(null, |s| s.alloc_mw(pd, mw_type).unwrap_or_else(null))
}

unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    with(|e| e, |s| s.dealloc_mw(mw))
}

unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    // SAFETY: the caller's bind, if any.
    let Some(b) = (unsafe { bind.as_ref() }) else { return libc::EINVAL };
    with(|e| e, |s| s.bind_mw(qp, mw, b))
}
