//! Small device objects of libmlx5: reserved QP numbers (`mlx5dv_reserved_qpn_alloc` /
//! `_dealloc`), packet pacing entries (`mlx5dv_pp_alloc` / `_free`), VARs
//! (`mlx5dv_alloc_var` / `_free_var`) and a QP's LAG port. Each is a trait call; its errno is
//! the return value or errno, as libmlx5's.

use std::ffi::{c_int, c_void};

use mlx5_hw::sys::mlx5dv::{mlx5dv_pp, mlx5dv_var};
use rdma_sys::{ibv_context, ibv_qp};

use crate::errno::{code, null};
use crate::state::{key, with};

/// `mlx5dv_reserved_qpn_alloc`: a QP number no QP takes. A NULL `qpn` is EINVAL (libmlx5
/// would write through it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_reserved_qpn_alloc(ctx: *mut ibv_context, qpn: *mut u32) -> c_int {
    if qpn.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let Ok(h) = s.ctx_handle(ctx) else { return libc::EINVAL };
            match s.sim.reserved_qpn_alloc(h) {
                Ok(n) => {
                    // SAFETY: the caller's out-parameter, checked non-NULL.
                    unsafe { *qpn = n };
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_reserved_qpn_dealloc`: EINVAL for a number the context did not get.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_reserved_qpn_dealloc(ctx: *mut ibv_context, qpn: u32) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.ctx_handle(ctx) else { return libc::EINVAL };
            match s.sim.reserved_qpn_dealloc(h, qpn) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_pp_alloc`: a rate table entry for the `pp_context_sz` bytes at `pp_context`; NULL
/// with errno. A NULL context pointer with a size is EINVAL (the kernel could not copy it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_pp_alloc(
    ctx: *mut ibv_context,
    pp_context_sz: usize,
    pp_context: *const c_void,
    flags: u32,
) -> *mut mlx5dv_pp {
    if pp_context.is_null() && pp_context_sz != 0 {
        return null(libc::EINVAL);
    }
    // Past 48 bytes the kernel refuses the attribute anyway; do not read further.
    let len = pp_context_sz.min(64);
    let bytes = if len == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's buffer of pp_context_sz bytes, checked non-NULL; at most 64 read.
        unsafe { std::slice::from_raw_parts(pp_context.cast::<u8>(), len) }.to_vec()
    };
    // A longer context stands for itself by any length past 48, which the kernel refuses.
    let bytes = if pp_context_sz > len { vec![0u8; 49] } else { bytes };
    with(null, |s| {
        let Ok(h) = s.ctx_handle(ctx) else { return null(libc::EINVAL) };
        match s.sim.pp_alloc(h, &bytes, flags) {
            Ok(pp) => {
                let mut c = Box::new(mlx5dv_pp { index: pp.index });
                let p: *mut mlx5dv_pp = &mut *c;
                s.dv.pps.insert(key(p), (c, pp));
                p
            }
            Err(e) => null(code(&e)),
        }
    })
}

/// `mlx5dv_pp_free` (void): an entry this shim did not hand out is left alone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_pp_free(pp: *mut mlx5dv_pp) {
    with(
        |_| (),
        |s| {
            if let Some((_c, e)) = s.dv.pps.remove(&key(pp)) {
                let _ = s.sim.pp_free(&e);
            }
        },
    )
}

/// `mlx5dv_alloc_var`: a VAR whose `mmap_off` maps on the context's command fd; NULL with
/// errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_alloc_var(ctx: *mut ibv_context, flags: u32) -> *mut mlx5dv_var {
    with(null, |s| {
        let Ok(h) = s.ctx_handle(ctx) else { return null(libc::EINVAL) };
        match s.sim.alloc_var(h, flags) {
            Ok(v) => {
                let c = mlx5dv_var {
                    page_id: v.page_id,
                    length: v.length,
                    mmap_off: v.mmap_off as libc::off_t,
                    comp_mask: 0,
                };
                let mut c = Box::new(c);
                let p: *mut mlx5dv_var = &mut *c;
                s.dv.vars.insert(key(p), (c, v));
                p
            }
            Err(e) => null(code(&e)),
        }
    })
}

/// `mlx5dv_free_var` (void).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_free_var(var: *mut mlx5dv_var) {
    with(
        |_| (),
        |s| {
            if let Some((_c, v)) = s.dv.vars.remove(&key(var)) {
                let _ = s.sim.free_var(&v);
            }
        },
    )
}

/// `mlx5dv_query_qp_lag_port`: 0 with both ports written, or the errno (EOPNOTSUPP on a
/// device without LAG).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_query_qp_lag_port(
    qp: *mut ibv_qp,
    port_num: *mut u8,
    active_port_num: *mut u8,
) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(q) = s.qps.get(&key(qp)) else { return libc::EINVAL };
            let h = q.qp.handle;
            match s.sim.query_qp_lag_port(h) {
                Ok((p, a)) => {
                    if port_num.is_null() || active_port_num.is_null() {
                        return libc::EINVAL;
                    }
                    // SAFETY: the caller's out-parameters, checked non-NULL.
                    unsafe {
                        *port_num = p;
                        *active_port_num = a;
                    }
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_modify_qp_lag_port`: 0 or the errno (EOPNOTSUPP on a device without LAG).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_modify_qp_lag_port(qp: *mut ibv_qp, port_num: u8) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(q) = s.qps.get(&key(qp)) else { return libc::EINVAL };
            let h = q.qp.handle;
            match s.sim.modify_qp_lag_port(h, port_num) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}
