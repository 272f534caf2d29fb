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
        s.avs.insert(key(p), Box::new(address_vector(&a, roce)));
        p
    })
}

/// `ibv_destroy_ah`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    with(
        |e| e,
        |s| {
            s.avs.remove(&key(ah));
            if s.ahs.remove(&key(ah)).is_some() { 0 } else { libc::EINVAL }
        },
    )
}

/// The address vector `mlx5_create_ah` builds (what `mlx5dv_init_obj` hands out): the path's
/// LID and service level, and with a GRH its GID, hop limit, traffic class and flow label
/// under the GRH flag (bit 30); on RoCE the MAC a link-local GID names (its EUI-64).
fn address_vector(a: &ibv_ah_attr, roce: bool) -> mlx5_hw::sys::mlx5dv::mlx5_wqe_av {
    // SAFETY: plain data; all-zero is valid.
    let mut av: mlx5_hw::sys::mlx5dv::mlx5_wqe_av = unsafe { std::mem::zeroed() };
    av.stat_rate_sl = (a.sl & 0xf) << if roce { 1 } else { 0 };
    av.fl_mlid = a.src_path_bits & 0x7f;
    av.rlid = a.dlid.to_be();
    if a.is_global != 0 {
        // SAFETY: ibv_gid is 16 bytes either way.
        let gid = unsafe { a.grh.dgid.raw };
        av.grh_gid_fl = (1u32 << 30 | u32::from(a.grh.sgid_index) << 20 | a.grh.flow_label & 0xf_ffff).to_be();
        av.hop_limit = a.grh.hop_limit;
        av.tclass = a.grh.traffic_class;
        av.rgid = gid;
        if roce && gid[0] == 0xfe && gid[1] == 0x80 {
            av.rmac = [gid[8] ^ 2, gid[9], gid[10], gid[13], gid[14], gid[15]];
        }
    }
    av
}
