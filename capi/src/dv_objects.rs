//! Small device objects of libmlx5: reserved QP numbers (`mlx5dv_reserved_qpn_alloc` /
//! `_dealloc`). Each is a trait call; its errno is the return value, as libmlx5's.

use std::ffi::c_int;

use rdma_sys::ibv_context;

use crate::errno::code;
use crate::state::with;

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
