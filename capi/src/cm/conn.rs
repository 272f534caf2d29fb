//! Connecting: the QP attributes each step takes (`rdma_init_qp_attr`, and the automatic
//! transitions of a QP made by `rdma_create_qp`), and the calls that send the handshake's
//! MADs (`rdma_connect`, `rdma_accept`, `rdma_reject`, `rdma_establish`,
//! `rdma_disconnect`), with the limits the kernel's rdma_cm puts on their private data.

use std::ffi::c_int;
use std::net::SocketAddrV4;

use mlx5_sim::wire::cm::{CmMsg, Mad, private_len, reason, sidr as status};
use rdma_sys::*;

use super::addr::{self, REQ_USER};
use super::proto;
use super::sidr;
use super::state::{Knobs, St, cm, devs, iba_ms};

/// What the QP of a connection needs to reach a state: its side's numbers.
#[derive(Clone, Copy)]
pub(crate) struct Path {
    pub(crate) dev: usize,
    pub(crate) src: SocketAddrV4,
    pub(crate) dst: Option<SocketAddrV4>,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_psn: u32,
    pub(crate) local_psn: u32,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) connected: bool,
    pub(crate) ud: bool,
    pub(crate) ack_timeout: Option<u8>,
}

/// The path of the ID at `key`, if it is on a device.
pub(crate) fn path(key: usize) -> Option<Path> {
    let c = cm();
    let i = c.ids.get(&key)?;
    Some(Path {
        dev: i.dev?,
        src: i.src,
        dst: i.dst,
        remote_qpn: i.remote_qpn,
        remote_psn: i.remote_psn,
        local_psn: i.local_psn,
        responder_resources: i.responder_resources,
        initiator_depth: i.initiator_depth,
        retry_count: i.retry_count,
        rnr_retry_count: i.rnr_retry_count,
        connected: matches!(i.st, St::ReqRcvd | St::RepSent | St::RepRcvd | St::Connected),
        ud: i.ud(),
        ack_timeout: i.ack_timeout,
    })
}

/// The attributes and mask that take a QP on `p` to `state` (`rdma_init_qp_attr`):
/// `Err(EINVAL)` for a state the connection is not ready for.
pub(crate) fn qp_attr(p: &Path, state: u32) -> Result<(ibv_qp_attr, c_int), c_int> {
    type M = ibv_qp_attr_mask;
    // SAFETY: plain data.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.qp_state = state;
    let m = |x: M| x.0 as c_int;
    let mask = match state {
        ibv_qp_state::IBV_QPS_INIT => {
            a.port_num = 1;
            a.pkey_index = 0;
            if p.ud {
                a.qkey = addr::RDMA_UDP_QKEY;
                m(M::IBV_QP_STATE) | m(M::IBV_QP_PKEY_INDEX) | m(M::IBV_QP_PORT) | m(M::IBV_QP_QKEY)
            } else {
                // Before the handshake no remote access; with it, what the REQ/REP allow.
                if p.connected {
                    a.qp_access_flags = ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
                    if p.responder_resources > 0 {
                        a.qp_access_flags |=
                            ibv_access_flags::IBV_ACCESS_REMOTE_READ.0 | ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0;
                    }
                }
                m(M::IBV_QP_STATE) | m(M::IBV_QP_PKEY_INDEX) | m(M::IBV_QP_PORT) | m(M::IBV_QP_ACCESS_FLAGS)
            }
        }
        ibv_qp_state::IBV_QPS_RTR if p.ud => m(M::IBV_QP_STATE),
        ibv_qp_state::IBV_QPS_RTR => {
            let dst = p.dst.filter(|_| p.connected).ok_or(libc::EINVAL)?;
            a.path_mtu = devs().mtu.get(p.dev).copied().unwrap_or(3);
            a.dest_qp_num = p.remote_qpn;
            a.rq_psn = p.remote_psn;
            a.max_dest_rd_atomic = p.responder_resources;
            // The kernel's cm_init_qp_rtr_attr: 0, the IBTA's longest RNR wait (655.36 ms).
            a.min_rnr_timer = 0;
            a.ah_attr.is_global = 1;
            a.ah_attr.port_num = 1;
            a.ah_attr.grh.dgid.raw = dst.ip().to_ipv6_mapped().octets();
            a.ah_attr.grh.sgid_index = addr::sgid_index(p.dev, p.src);
            a.ah_attr.grh.hop_limit = 64;
            m(M::IBV_QP_STATE)
                | m(M::IBV_QP_AV)
                | m(M::IBV_QP_PATH_MTU)
                | m(M::IBV_QP_DEST_QPN)
                | m(M::IBV_QP_RQ_PSN)
                | m(M::IBV_QP_MAX_DEST_RD_ATOMIC)
                | m(M::IBV_QP_MIN_RNR_TIMER)
        }
        ibv_qp_state::IBV_QPS_RTS if p.ud => {
            a.sq_psn = 0;
            m(M::IBV_QP_STATE) | m(M::IBV_QP_SQ_PSN)
        }
        ibv_qp_state::IBV_QPS_RTS => {
            if !p.connected {
                return Err(libc::EINVAL);
            }
            a.sq_psn = p.local_psn;
            // The kernel's rdma_init_qp_attr: the ID's ACK timeout once set, else the CM's.
            a.timeout = p.ack_timeout.unwrap_or(18);
            a.retry_cnt = p.retry_count;
            a.rnr_retry = p.rnr_retry_count;
            a.max_rd_atomic = p.initiator_depth;
            m(M::IBV_QP_STATE)
                | m(M::IBV_QP_SQ_PSN)
                | m(M::IBV_QP_TIMEOUT)
                | m(M::IBV_QP_RETRY_CNT)
                | m(M::IBV_QP_RNR_RETRY)
                | m(M::IBV_QP_MAX_QP_RD_ATOMIC)
        }
        _ => return Err(libc::EINVAL),
    };
    Ok((a, mask))
}

/// Move `qp` through `states` with the attributes of the ID at `key`: 0, or the errno.
pub(crate) fn move_qp(key: usize, qp: *mut ibv_qp, states: &[u32]) -> c_int {
    let Some(p) = path(key) else { return libc::EINVAL };
    for &s in states {
        let (mut a, mask) = match qp_attr(&p, s) {
            Ok(x) => x,
            Err(e) => return e,
        };
        // SAFETY: the ID's QP, made by the shim.
        let r = unsafe { crate::queue::ibv_modify_qp(qp, &mut a, mask) };
        if r != 0 {
            return r;
        }
    }
    0
}

/// Move `qp` to the error state (a rejected or disconnected connection).
pub(crate) fn qp_to_error(qp: *mut ibv_qp) {
    if qp.is_null() {
        return;
    }
    // SAFETY: plain data; the ID's QP.
    unsafe {
        let mut a: ibv_qp_attr = std::mem::zeroed();
        a.qp_state = ibv_qp_state::IBV_QPS_ERR;
        crate::queue::ibv_modify_qp(qp, &mut a, ibv_qp_attr_mask::IBV_QP_STATE.0 as c_int);
    }
}

/// The private data of a connection parameter, checked against `room`: `Err(EINVAL)` over.
///
/// # Safety
/// `param` is NULL or a readable `rdma_conn_param` whose data has its length.
pub(crate) unsafe fn private(param: *const rdma_conn_param, room: usize) -> Result<Vec<u8>, c_int> {
    // SAFETY: per the contract.
    let Some(p) = (unsafe { param.as_ref() }) else { return Ok(Vec::new()) };
    let n = usize::from(p.private_data_len);
    if n > room {
        return Err(libc::EINVAL);
    }
    if n == 0 || p.private_data.is_null() {
        return Ok(Vec::new());
    }
    // SAFETY: n readable bytes, per the contract.
    Ok(unsafe { std::slice::from_raw_parts(p.private_data.cast::<u8>(), n) }.to_vec())
}

/// Whether the ID at `key` is a UD one (SIDR connects it).
pub(crate) fn is_ud(key: usize) -> bool {
    cm().ids.get(&key).is_some_and(super::state::Id::ud)
}

/// `rdma_connect` of a UD ID: the SIDR_REQ, with up to 180 bytes of the program's data (the
/// kernel's CM takes 216 with rdma_cm's header), waiting as the kernel's rdma_cm waits
/// (`1 << (timeout - 8)` ms each try).
fn connect_ud(key: usize, param: *const rdma_conn_param) -> c_int {
    // SAFETY: the caller's parameter, if any.
    let user = match unsafe { private(param, sidr::SIDR_REQ_USER) } {
        Ok(u) => u,
        Err(e) => return e,
    };
    let mut c = cm();
    let (local, tid) = c.fresh_comm();
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    if id.st != St::RouteResolved {
        return libc::EINVAL;
    }
    id.local_comm = local;
    id.timeout = iba_ms(Knobs::get().response_timeout);
    id.st = St::SidrSent;
    let mad = sidr::req_mad(id, tid, &user);
    c.send(key, mad, true);
    drop(c);
    proto::flush();
    0
}

/// `rdma_accept` (`reject`: `rdma_reject`) of a UD ID's request: the SIDR_REP, success with
/// the QP's number (or the parameter's) or REJECT; up to 136 bytes of private data.
fn answer_ud(key: usize, qpn: Option<u32>, user: &[u8]) -> c_int {
    if user.len() > private_len::SIDR_REP {
        return libc::EINVAL;
    }
    let mut c = cm();
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    if id.st != St::ReqRcvd {
        return libc::EINVAL;
    }
    let qp = id.qp();
    // SAFETY: the ID's QP, if any.
    let own = (!qp.is_null()).then(|| unsafe { (*qp).qp_num });
    let (st, status) = if qpn.is_some() { (St::Connected, status::SUCCESS) } else { (St::Rejected, status::REJECT) };
    id.st = st;
    let mad = sidr::rep_mad(id, status, own.or(qpn).unwrap_or(0), user);
    c.send(key, mad, false);
    drop(c);
    proto::flush();
    0
}

/// `rdma_connect`: send the REQ (0 or the errno).
pub(crate) fn connect(key: usize, param: *const rdma_conn_param) -> c_int {
    if is_ud(key) {
        return connect_ud(key, param);
    }
    // SAFETY: the caller's parameter, if any.
    let user = match unsafe { private(param, REQ_USER) } {
        Ok(u) => u,
        Err(e) => return e,
    };
    // SAFETY: as above.
    let p = unsafe { param.as_ref() };
    let mut c = cm();
    let (local, tid) = c.fresh_comm();
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    if id.st != St::RouteResolved {
        return libc::EINVAL;
    }
    let qp = id.qp();
    // SAFETY: the ID's QP, if any.
    let qpn = if qp.is_null() { p.map_or(0, |p| p.qp_num) } else { unsafe { (*qp).qp_num } };
    id.local_comm = local;
    id.responder_resources = p.map_or(16, |p| p.responder_resources.min(16));
    id.initiator_depth = p.map_or(16, |p| p.initiator_depth.min(16));
    id.retry_count = p.map_or(7, |p| p.retry_count.min(7));
    id.rnr_retry_count = p.map_or(7, |p| p.rnr_retry_count.min(7));
    let srq = p.is_some_and(|p| p.srq != 0);
    id.st = St::ReqSent;
    let mad = proto::req_mad(id, tid, qpn, srq, &user);
    c.send(key, mad, true);
    drop(c);
    proto::flush();
    0
}

/// `rdma_accept`: the QP to RTS, then the REP (0 or the errno).
pub(crate) fn accept(key: usize, param: *const rdma_conn_param) -> c_int {
    let room = if is_ud(key) { usize::from(u8::MAX) } else { private_len::REP };
    // SAFETY: the caller's parameter, if any.
    let user = match unsafe { private(param, room) } {
        Ok(u) => u,
        Err(e) => return e,
    };
    // SAFETY: as above.
    let p = unsafe { param.as_ref() };
    if is_ud(key) {
        return answer_ud(key, Some(p.map_or(0, |p| p.qp_num)), &user);
    }
    // The device is asked without the CM's lock, which its thread takes for CM messages.
    let Some(cid) = cm().ids.get(&key).map(|i| i.c) else { return libc::EINVAL };
    let (max_init, max_resp) = rd_atom_limits(cid);
    let qp = {
        let mut c = cm();
        let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
        if id.st != St::ReqRcvd {
            return libc::EINVAL;
        }
        // librdmacm's ucma_valid_param, then RDMA_MAX_* (255) stands for the request's
        // value capped at the device's limit.
        let ps_tcp = id.ps() == rdma_port_space::RDMA_PS_TCP;
        let over = |p: &rdma_conn_param| {
            (p.responder_resources != u8::MAX && p.responder_resources > max_resp)
                || (p.initiator_depth != u8::MAX && p.initiator_depth > max_init)
        };
        if ps_tcp && p.is_some_and(over) {
            return libc::EINVAL;
        }
        id.initiator_depth = match p {
            Some(p) if p.initiator_depth != u8::MAX => p.initiator_depth,
            _ => id.initiator_depth.min(max_init),
        };
        id.responder_resources = match p {
            Some(p) if p.responder_resources != u8::MAX => p.responder_resources,
            _ => id.responder_resources.min(max_resp),
        };
        id.qp()
    };
    if !qp.is_null() {
        let states = [ibv_qp_state::IBV_QPS_INIT, ibv_qp_state::IBV_QPS_RTR, ibv_qp_state::IBV_QPS_RTS];
        let r = move_qp(key, qp, &states);
        if r != 0 {
            return r;
        }
    }
    let mut c = cm();
    let (_, tid) = c.fresh_comm();
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    // SAFETY: the ID's QP, if any.
    let qpn = if qp.is_null() { p.map_or(0, |p| p.qp_num) } else { unsafe { (*qp).qp_num } };
    id.st = St::RepSent;
    let mad = proto::rep_mad(id, tid, qpn, p.is_some_and(|p| p.srq != 0), &user);
    c.send(key, mad, true);
    drop(c);
    proto::flush();
    0
}

/// `rdma_reject`: a REJ with the consumer's reason (0 or the errno).
pub(crate) fn reject(key: usize, data: &[u8]) -> c_int {
    if is_ud(key) {
        return answer_ud(key, None, data);
    }
    if data.len() > private_len::REJ {
        return libc::EINVAL;
    }
    let mut c = cm();
    let (_, tid) = c.fresh_comm();
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    if id.st != St::ReqRcvd {
        return libc::EINVAL;
    }
    id.st = St::Rejected;
    let msg = CmMsg::Rej {
        local: id.local_comm,
        remote: id.remote_comm,
        rejected: 0,
        reason: reason::CONSUMER_REJECT,
        private_data: data.to_vec(),
    };
    c.send(key, Mad { tid, msg }.encode().to_vec(), false);
    drop(c);
    proto::flush();
    0
}

/// The RTU that ends the active side's handshake (the CONNECT_RESPONSE taken, or
/// `rdma_establish`): 0 or the errno.
pub(crate) fn establish(key: usize) -> c_int {
    let mut c = cm();
    let (_, tid) = c.fresh_comm();
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    if id.st != St::RepRcvd {
        return libc::EINVAL;
    }
    id.st = St::Connected;
    let mad = Mad { tid, msg: CmMsg::Rtu(id.local_comm, id.remote_comm, Vec::new()) }.encode().to_vec();
    c.send(key, mad, false);
    drop(c);
    proto::flush();
    0
}

/// `rdma_disconnect`: the QP to the error state, then a DREQ (0 or the errno). A UD ID
/// that took part in SIDR sends nothing (the kernel's CM has no connection to end).
pub(crate) fn disconnect(key: usize) -> c_int {
    let qp = {
        let c = cm();
        let Some(id) = c.ids.get(&key) else { return libc::EINVAL };
        if id.ud() {
            let sidr = matches!(id.st, St::SidrSent | St::ReqRcvd | St::Connected | St::Rejected);
            let qp = id.qp();
            drop(c);
            if !sidr {
                return libc::EINVAL;
            }
            qp_to_error(qp);
            return 0;
        }
        if !matches!(id.st, St::Connected | St::RepSent | St::RepRcvd | St::Disconnected) {
            return libc::EINVAL;
        }
        id.qp()
    };
    qp_to_error(qp);
    let mut c = cm();
    let (_, tid) = c.fresh_comm();
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    if id.st == St::Disconnected {
        return 0;
    }
    id.st = St::DreqSent;
    let mad = Mad { tid, msg: CmMsg::Dreq(id.local_comm, id.remote_comm, id.remote_qpn, Vec::new()) }.encode().to_vec();
    c.send(key, mad, true);
    drop(c);
    proto::flush();
    0
}

/// librdmacm's `cma_dev->max_initiator_depth` and `max_responder_resources`: the ID's
/// device's `max_qp_init_rd_atom` and `max_qp_rd_atom` as bytes (16 and 16 without one).
fn rd_atom_limits(id: *mut rdma_cm_id) -> (u8, u8) {
    // SAFETY: the CM's own ID; its context, if any, is open.
    let ctx = unsafe { (*id).verbs };
    if ctx.is_null() {
        return (16, 16);
    }
    // SAFETY: plain data; all-zero is valid.
    let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
    // SAFETY: an open context and room for the attributes.
    if unsafe { crate::device::ibv_query_device(ctx, &mut attr) } != 0 {
        return (16, 16);
    }
    (attr.max_qp_init_rd_atom as u8, attr.max_qp_rd_atom as u8)
}
