//! Multicast on rdma_cm: `rdma_join_multicast(_ex)` and `rdma_leave_multicast`. As the
//! kernel's rdma_cm joins on RoCE (`cma_iboe_join_multicast`), a join needs no answer from
//! the network: the group's GID is the IPv4-mapped address (RoCE v2), and the
//! MULTICAST_JOIN event follows at once with the address handle to send to it (QP 0xFFFFFF,
//! the ID's Q_Key). Taking the event attaches the ID's QP to the group, and leaving detaches
//! it, as librdmacm does (a send-only member is never attached).

use rdma_sys::rdma_cm_event_type::*;
use rdma_sys::*;
use std::ffi::{c_int, c_void};

use super::addr::{self, RDMA_UDP_QKEY};
use super::state::{EventBox, Joined, St, cm};
use crate::errno::minus_one;

/// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`.
const SENDONLY_FULLMEMBER: u32 = 1;
/// `RDMA_MC_JOIN_FLAG_RESERVED`: the first flag value that is not one.
const JOIN_FLAG_RESERVED: u32 = 2;
/// `RDMA_CM_JOIN_MC_ATTR_ADDRESS`, `_JOIN_FLAGS`, `_RESERVED`.
const ATTR_ADDRESS: u32 = 1;
const ATTR_JOIN_FLAGS: u32 = 2;
const ATTR_RESERVED: u32 = 4;
/// The QP number a multicast datagram goes to.
const MULTICAST_QPN: u32 = 0xff_ffff;

/// Join `id` to the group at `addr` with `flags`: the kernel's checks (a UD ID on a device,
/// address bound or resolved; not the zero address), then the MULTICAST_JOIN event.
fn join(id: *mut rdma_cm_id, addr: *const libc::sockaddr, flags: u32, context: *mut c_void) -> c_int {
    // SAFETY: the caller's sockaddr, NULL checked.
    let a = match unsafe { addr::sockaddr_v4(addr) } {
        Ok(a) => a,
        Err(e) => return minus_one(e),
    };
    let key = id as usize;
    let mut c = cm();
    let Some(i) = c.ids.get_mut(&key) else { return minus_one(libc::EINVAL) };
    let bound = (i.st == St::Idle && i.bound) || i.st == St::AddrResolved;
    let Some(dev) = i.dev.filter(|_| bound && i.ud() && !a.ip().is_unspecified()) else {
        return minus_one(libc::EINVAL);
    };
    let mgid = a.ip().to_ipv6_mapped().octets();
    i.mc.push(Joined { addr: a, mgid, flags });
    let (chan, src) = (i.chan, i.src);
    let mut ev = EventBox::new(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
    // SAFETY: the ud member of the event's union, plain data.
    unsafe {
        let u = &mut ev.ev.param.ud;
        u.private_data = context;
        u.qp_num = MULTICAST_QPN;
        u.qkey = RDMA_UDP_QKEY;
        u.ah_attr.is_global = 1;
        u.ah_attr.port_num = 1;
        u.ah_attr.grh.dgid.raw = mgid;
        u.ah_attr.grh.sgid_index = addr::sgid_index(dev, src);
        // The kernel's RoCE v2 IPv4 join: IPV6_DEFAULT_HOPLIMIT.
        u.ah_attr.grh.hop_limit = 64;
    }
    c.post(chan, ev);
    drop(c);
    super::complete(id)
}

/// Taking a MULTICAST_JOIN event: librdmacm's `ucma_process_join` attaches the ID's QP (but
/// a send-only member's). The event's status: 0, or -1 (and MULTICAST_ERROR) when the
/// attach fails, as librdmacm sets it.
pub(crate) fn on_join_event(ev: &mut rdma_cm_event, qp: *mut ibv_qp) {
    // SAFETY: the ud member, which a MULTICAST_JOIN event fills.
    let mgid = unsafe { ev.param.ud.ah_attr.grh.dgid };
    let flags = cm()
        .ids
        .get(&(ev.id as usize))
        .and_then(|i| i.mc.iter().rev().find(|m| m.mgid == unsafe { mgid.raw }).map(|m| m.flags));
    if qp.is_null() || flags == Some(SENDONLY_FULLMEMBER) {
        return;
    }
    // SAFETY: the ID's QP and a GID on our stack.
    let r = unsafe { crate::mcast::ibv_attach_mcast(qp, &mgid, 0) };
    if r != 0 {
        crate::errno::set_errno(r);
        ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
        ev.status = -1;
    }
}

/// `rdma_join_multicast`: as a full member.
///
/// # Safety
/// `id` is an ID of the CM's; `addr` is NULL or a readable sockaddr of its family.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_join_multicast(
    id: *mut rdma_cm_id,
    addr: *mut libc::sockaddr,
    context: *mut c_void,
) -> c_int {
    join(id, addr, 0, context)
}

/// `rdma_join_multicast_ex`: librdmacm's checks of the attributes (a mask past the known
/// bits ENOTSUP; no address or no join flags, or a reserved flag, EINVAL).
///
/// # Safety
/// `id` as for [`rdma_join_multicast`]; `attr` is NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut rdma_cm_id,
    attr: *mut rdma_cm_join_mc_attr_ex,
    context: *mut c_void,
) -> c_int {
    // SAFETY: the caller's attributes, if any.
    let Some(a) = (unsafe { attr.as_ref() }) else { return minus_one(libc::EINVAL) };
    if a.comp_mask >= ATTR_RESERVED {
        return minus_one(libc::ENOTSUP);
    }
    if a.comp_mask & ATTR_ADDRESS == 0 || a.comp_mask & ATTR_JOIN_FLAGS == 0 || a.join_flags >= JOIN_FLAG_RESERVED {
        return minus_one(libc::EINVAL);
    }
    join(id, a.addr, a.join_flags, context)
}

/// `rdma_leave_multicast`: EADDRNOTAVAIL for a group the ID did not join; the ID's QP is
/// detached (a send-only member's never was).
///
/// # Safety
/// As [`rdma_join_multicast`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    // SAFETY: as in join.
    let a = match unsafe { addr::sockaddr_v4(addr) } {
        Ok(a) => a,
        Err(e) => return minus_one(e),
    };
    let key = id as usize;
    let (left, qp) = {
        let mut c = cm();
        let Some(i) = c.ids.get_mut(&key) else { return minus_one(libc::EINVAL) };
        let Some(pos) = i.mc.iter().position(|m| m.addr == a) else { return minus_one(libc::EADDRNOTAVAIL) };
        (i.mc.remove(pos), i.qp())
    };
    if !qp.is_null() && left.flags != SENDONLY_FULLMEMBER {
        let g = ibv_gid { raw: left.mgid };
        // SAFETY: the ID's QP and a GID on our stack.
        unsafe { crate::mcast::ibv_detach_mcast(qp, &g, 0) };
    }
    0
}
