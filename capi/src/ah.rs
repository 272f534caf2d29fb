//! Address handles: `ibv_create_ah` checks the attributes as mlx5 does; the simulator has no
//! UD traffic, so an AH is only held.

use std::ffi::c_int;

use mlx5_dv::link_layer;
use rdma_sys::*;

use crate::errno::null;
use crate::state::{key, with};

/// `ibv_create_ah`: EINVAL for a port other than 1, a RoCE path without a GRH, or a source
/// GID index past the table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { *attr };
    with(null, |s| {
        let Ok(ctx) = s.pd(pd).map(|p| p.c.context) else { return null(libc::EINVAL) };
        let Ok(port) = s.port(ctx, a.port_num) else { return null(libc::EINVAL) };
        let roce = port.link_layer == link_layer::ETHERNET;
        if roce && (a.is_global == 0 || a.grh.sgid_index >= 2) {
            return null(libc::EINVAL);
        }
        let mut c = Box::new(ibv_ah { context: ctx, pd, handle: 0 });
        let p: *mut ibv_ah = &mut *c;
        c.handle = u32::try_from(s.ahs.len()).unwrap_or(u32::MAX);
        s.ahs.insert(key(p), c);
        p
    })
}

/// `ibv_destroy_ah`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    with(|e| e, |s| if s.ahs.remove(&key(ah)).is_some() { 0 } else { libc::EINVAL })
}
