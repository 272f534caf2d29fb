//! Device memory: the `verbs_context` ops behind the header's `ibv_alloc_dm`, `ibv_free_dm`
//! and `ibv_reg_dm_mr` inlines (kernel contexts only, as libmlx5 sets them), the `ibv_dm`
//! copy functions, `mlx5dv_alloc_dm`, and `mlx5dv_init_obj`'s DM part.
//!
//! A DM's bytes are the simulated device's MEMIC window, in the process's memory:
//! `mlx5dv_init_obj` hands out their address as libmlx5 hands out its mapping.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Mutex, PoisonError};

use mlx5_dv::AccessFlags;
use mlx5_hw::sys::mlx5dv::{mlx5dv_alloc_dm_attr, mlx5dv_dm};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::objects::Mr;
use crate::state::{Shim, key, with};

/// `IBV_DM_MASK_HANDLE`.
const DM_MASK_HANDLE: u32 = 1 << 0;
/// `MLX5DV_DM_TYPE_MEMIC`.
const DM_TYPE_MEMIC: u32 = 0;
/// The last `enum mlx5dv_alloc_dm_type` (`MLX5DV_DM_TYPE_ENCAP_SW_ICM`).
const DM_TYPE_LAST: u32 = 4;

/// One `ibv_dm`, with what the shim keeps of it behind (libmlx5's `struct mlx5_dm`).
#[repr(C)]
struct ShimDm {
    c: ibv_dm,
    dm: mlx5_dv::Dm,
}

// SAFETY: the context pointer inside is the program's, only compared and handed back; the
// table is reached under its lock.
unsafe impl Send for ShimDm {}

/// The DMs the program holds, by the address of their `ibv_dm`.
static DMS: Mutex<BTreeMap<usize, Box<ShimDm>>> = Mutex::new(BTreeMap::new());

fn dms() -> std::sync::MutexGuard<'static, BTreeMap<usize, Box<ShimDm>>> {
    DMS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The simulator's DM behind a program's `ibv_dm`.
fn dm_of(dm: *const ibv_dm) -> Result<mlx5_dv::Dm, c_int> {
    dms().get(&key(dm)).map(|d| d.dm).ok_or(libc::EINVAL)
}

/// The device memory ops of a kernel context.
pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.alloc_dm = Some(alloc_dm);
    c.free_dm = Some(free_dm);
    c.reg_dm_mr = Some(reg_dm_mr);
}

/// `mlx5_import_dm`: the DM of that handle among those whose context `shared` accepts
/// (ENOENT, as the kernel's object lookup, otherwise), as a new `ibv_dm` on `ctx` with the
/// same bytes.
pub(crate) fn import(
    ctx: *mut ibv_context,
    dm_handle: u32,
    shared: impl Fn(*const ibv_context) -> bool,
) -> Result<*mut ibv_dm, c_int> {
    let mut table = dms();
    let found = table.values().find(|d| d.c.handle == dm_handle && shared(d.c.context));
    let (c, dm) = found.map(|d| (ibv_dm { context: ctx, ..d.c }, d.dm)).ok_or(libc::ENOENT)?;
    let mut d = Box::new(ShimDm { c, dm });
    let p: *mut ibv_dm = &mut d.c;
    table.insert(key(p), d);
    Ok(p)
}

/// `mlx5_unimport_dm`: forget an imported `ibv_dm`; the DM stays with its owner.
pub(crate) fn unimport(dm: *mut ibv_dm) {
    dms().remove(&key(dm));
}

/// Drop the `ibv_dm`s of a closed context (the close freed their MEMIC).
pub(crate) fn forget(ctx: *const ibv_context) {
    dms().retain(|_, d| !std::ptr::eq(d.c.context, ctx));
}

impl Shim {
    /// `_mlx5dv_alloc_dm` for MEMIC: the `comp_mask` checks, then the simulator's
    /// `alloc_dm` (libmlx5's `max_dm_size` check and the kernel's).
    fn alloc_dm(
        &mut self,
        ctx: *mut ibv_context,
        attr: &ibv_alloc_dm_attr,
        dv_mask: u64,
    ) -> Result<*mut ibv_dm, c_int> {
        if attr.comp_mask != 0 || dv_mask != 0 {
            return Err(libc::EINVAL);
        }
        let h = self.context(ctx)?.handle;
        let dm = self.sim.alloc_dm(h, attr.length as u64, attr.log_align_req).map_err(|e| e.errno())?;
        let c = ibv_dm {
            context: ctx,
            memcpy_to_dm: Some(memcpy_to_dm),
            memcpy_from_dm: Some(memcpy_from_dm),
            comp_mask: DM_MASK_HANDLE,
            handle: dm.handle.id(),
        };
        let mut d = Box::new(ShimDm { c, dm });
        let p: *mut ibv_dm = &mut d.c;
        dms().insert(key(p), d);
        Ok(p)
    }

    fn free_dm(&mut self, dm: *mut ibv_dm) -> c_int {
        let Ok(h) = dm_of(dm) else { return libc::EINVAL };
        if let Err(e) = self.sim.free_dm(&h) {
            return code(&e);
        }
        crate::memic_op::forget_dm(dm);
        dms().remove(&key(dm));
        0
    }

    /// `mlx5_reg_dm_mr`: the MR's `addr` is NULL (zero-based), its length the one asked for.
    fn reg_dm_mr(
        &mut self,
        pd: *mut ibv_pd,
        dm: *mut ibv_dm,
        (offset, length): (u64, usize),
        access: c_uint,
    ) -> Result<*mut ibv_mr, c_int> {
        let p = self.pd(pd)?;
        let (ctx, handle) = (p.c.context, p.handle);
        let d = dm_of(dm)?;
        let access = AccessFlags::from_bits_retain(access);
        let mr = self.sim.reg_dm_mr(handle, &d, offset, length as u64, access).map_err(|e| e.errno())?;
        let c = ibv_mr {
            context: ctx,
            pd,
            addr: std::ptr::null_mut(),
            length,
            handle: mr.handle.id(),
            lkey: mr.lkey,
            rkey: mr.rkey,
        };
        let mut c = Box::new(c);
        let p: *mut ibv_mr = &mut *c;
        // No external region holds it: ibv_dereg_mr has no memory to give back.
        self.mrs.insert(key(p), Mr { _c: c, mr, region: crate::objects::NO_REGION });
        Ok(p)
    }

    /// `mlx5dv_get_dm`: the bytes' address and the DM's length; `remote_va` only for SW ICM,
    /// which is not simulated, so `comp_mask` comes back 0.
    pub(crate) fn init_dm(&mut self, dm: *mut c_void, out: *mut mlx5dv_dm) -> c_int {
        let Ok(d) = dm_of(dm.cast()) else { return libc::EINVAL };
        // SAFETY: the caller's output struct, if any.
        let Some(out) = (unsafe { out.as_mut() }) else { return libc::EINVAL };
        match self.sim.simulator().dm_address(&d) {
            Ok(addr) => {
                out.buf = addr as *mut c_void;
                out.length = d.length;
                out.comp_mask = 0;
                0
            }
            Err(e) => e.errno(),
        }
    }
}

/// `mlx5dv_dm_map_op_addr`: the address of `op`'s page over the DM (as long as the DM), or
/// NULL with errno: EOPNOTSUPP for an operation the device lacks, EINVAL for a DM it does
/// not know (`memic_op.rs` carries out the loads and stores).
///
/// # Safety
/// `dm` came from `ibv_alloc_dm` of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dm_map_op_addr(dm: *mut ibv_dm, op: u8) -> *mut c_void {
    with(null, |s| {
        let window = dm_of(dm).and_then(|d| match s.sim.simulator().dm_address(&d) {
            Ok(addr) => Ok((d, addr as usize)),
            Err(_) => Err(libc::EINVAL),
        });
        match window {
            Ok((d, bytes)) => crate::memic_op::map(dm, bytes, d.length as usize, op).unwrap_or_else(null),
            Err(e) => null(e),
        }
    })
}

unsafe extern "C" fn alloc_dm(context: *mut ibv_context, attr: *mut ibv_alloc_dm_attr) -> *mut ibv_dm {
    // SAFETY: the caller's attributes.
    let Some(a) = (unsafe { attr.as_ref() }) else { return null(libc::EINVAL) };
    with(null, |s| s.alloc_dm(context, a, 0).unwrap_or_else(null))
}

unsafe extern "C" fn free_dm(dm: *mut ibv_dm) -> c_int {
    with(|e| e, |s| s.free_dm(dm))
}

unsafe extern "C" fn reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    dm_offset: u64,
    length: usize,
    access: c_uint,
) -> *mut ibv_mr {
    with(null, |s| s.reg_dm_mr(pd, dm, (dm_offset, length), access).unwrap_or_else(null))
}

/// `mlx5_memcpy_to_dm`: 0, or the error (EFAULT past the end, EINVAL unaligned) as the return
/// value, errno untouched.
unsafe extern "C" fn memcpy_to_dm(dm: *mut ibv_dm, dm_offset: u64, host_addr: *const c_void, length: usize) -> c_int {
    let Ok(d) = dm_of(dm) else { return libc::EINVAL };
    let data = if length == 0 || host_addr.is_null() {
        &[][..]
    } else {
        // SAFETY: the caller's `length` bytes at `host_addr`.
        unsafe { std::slice::from_raw_parts(host_addr.cast::<u8>(), length) }
    };
    if data.len() != length {
        return libc::EFAULT;
    }
    with(|e| e, |s| s.sim.memcpy_to_dm(&d, dm_offset, data).map_or_else(|e| e.errno(), |()| 0))
}

/// `mlx5_memcpy_from_dm`, as [`memcpy_to_dm`] the other way.
unsafe extern "C" fn memcpy_from_dm(host_addr: *mut c_void, dm: *mut ibv_dm, dm_offset: u64, length: usize) -> c_int {
    let Ok(d) = dm_of(dm) else { return libc::EINVAL };
    let got = with(Err, |s| s.sim.memcpy_from_dm(&d, dm_offset, length).map_err(|e| e.errno()));
    match got {
        Ok(bytes) if bytes.is_empty() => 0,
        Ok(_) if host_addr.is_null() => libc::EFAULT,
        Ok(bytes) => {
            // SAFETY: the caller's buffer of `length` bytes; `bytes` has exactly that many.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), host_addr.cast::<u8>(), bytes.len()) };
            0
        }
        Err(e) => e,
    }
}

/// `mlx5dv_alloc_dm`: MEMIC; an unknown type is EOPNOTSUPP (libmlx5), and so are the SW ICM
/// types, as on a device without steering memory of its own; a `comp_mask` is EINVAL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_alloc_dm(
    context: *mut ibv_context,
    dm_attr: *mut ibv_alloc_dm_attr,
    mlx5_dm_attr: *mut mlx5dv_alloc_dm_attr,
) -> *mut ibv_dm {
    // SAFETY: the caller's attributes.
    let (Some(a), Some(m)) = (unsafe { dm_attr.as_ref() }, unsafe { mlx5_dm_attr.as_ref() }) else {
        return null(libc::EINVAL);
    };
    if m.type_ > DM_TYPE_LAST {
        return null(libc::EOPNOTSUPP);
    }
    if a.comp_mask != 0 || m.comp_mask != 0 {
        return null(libc::EINVAL);
    }
    if m.type_ != DM_TYPE_MEMIC {
        return null(libc::EOPNOTSUPP);
    }
    with(null, |s| s.alloc_dm(context, a, m.comp_mask).unwrap_or_else(null))
}
