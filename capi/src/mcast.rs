//! UD multicast: `ibv_attach_mcast` and `ibv_detach_mcast`. The simulated device keeps each
//! group's QPs and delivers a datagram to QP 0xFFFFFF with the group's GID to them
//! (`mlx5_sim::device::engine::multicast`).

use std::ffi::c_int;

use rdma_sys::*;

use crate::state::with;

/// Attach or detach as the kernel's `ib_attach_mcast`/`ib_detach_mcast` check them: a
/// multicast GID and a UD QP (EINVAL otherwise; on RoCE the LID is not looked at). Detaching a
/// QP not attached is EINVAL, as mlx5's DETACH_FROM_MCG fails.
fn attach(qp: *mut ibv_qp, gid: *const ibv_gid, on: bool) -> c_int {
    if qp.is_null() || gid.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's GID, 16 bytes.
    let g = mlx5_dv::Gid(unsafe { (*gid).raw });
    with(
        |e| e,
        |s| {
            let (qpn, ctx) = match s.qp(qp) {
                // SAFETY: a QP the shim made: its public part is readable.
                Ok(q) => (q.qp.qp_num, unsafe { ((*qp).context, (*qp).qp_type) }),
                Err(e) => return e,
            };
            let (ctx, qp_type) = ctx;
            if !mlx5_sim::device::engine::multicast::is_multicast_gid(&g) || qp_type != ibv_qp_type::IBV_QPT_UD {
                return libc::EINVAL;
            }
            let Some(dev) = s.context(ctx).ok().and_then(|c| c.device) else { return libc::EINVAL };
            let sim = s.sim.simulator_mut();
            let done = if on { sim.attach_multicast(dev, qpn, g) } else { sim.detach_multicast(dev, qpn, g) };
            if done { 0 } else { libc::EINVAL }
        },
    )
}

/// `ibv_attach_mcast`: QP `qp` takes the datagrams sent to group `gid`.
///
/// # Safety
/// `qp` is a QP of the shim's; `gid` is NULL or a readable GID.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, _lid: u16) -> c_int {
    attach(qp, gid, true)
}

/// `ibv_detach_mcast`.
///
/// # Safety
/// As [`ibv_attach_mcast`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, _lid: u16) -> c_int {
    attach(qp, gid, false)
}
