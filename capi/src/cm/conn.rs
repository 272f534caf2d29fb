//! Connecting: the QP attributes each step takes (`rdma_init_qp_attr`, and the automatic
//! transitions of a QP made by `rdma_create_qp`), and the calls that send the handshake's
//! MADs (`rdma_connect`, `rdma_accept`, `rdma_reject`, `rdma_establish`,
//! `rdma_disconnect`), with the limits the kernel's rdma_cm puts on their private data.

use std::ffi::{c_int, c_void};
use std::net::SocketAddrV4;

use mlx5_sim::wire::cm::{CmMsg, Mad, private_len, reason};
use rdma_sys::*;

use super::proto::{self, REQ_USER};
use super::state::{MAX_RETRIES, St, cm, devs};

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
        ud: i.ps() == rdma_port_space::RDMA_PS_UDP,
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
                a.qkey = RDMA_UDP_QKEY;
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
            a.min_rnr_timer = 12;
            a.ah_attr.is_global = 1;
            a.ah_attr.port_num = 1;
            a.ah_attr.grh.dgid.raw = dst.ip().to_ipv6_mapped().octets();
            a.ah_attr.grh.sgid_index = sgid_index(p.dev, p.src);
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
            a.timeout = 18;
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

/// rdma_cm's Q_Key of the UDP port space.
const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// The GID index of `src`'s IPv4-mapped RoCE v2 GID on device `dev` (3: after the
/// link-local GID as v1 and v2 and the mapped one as v1).
fn sgid_index(dev: usize, src: SocketAddrV4) -> u8 {
    let want = src.ip().to_ipv6_mapped().octets();
    crate::state::with(
        |_| 3,
        |s| {
            let t = s.sim.simulator().gid_table(dev);
            t.iter().position(|(g, ty)| g.0 == want && *ty == 2).and_then(|i| u8::try_from(i).ok()).unwrap_or(3)
        },
    )
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

/// A fresh starting PSN (24 bits), as the kernel draws one per connection.
fn fresh_psn() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: a 4-byte buffer of ours.
    unsafe { libc::getrandom(b.as_mut_ptr().cast::<c_void>(), 4, 0) };
    u32::from_ne_bytes(b) & 0xff_ffff
}

/// `rdma_connect`: send the REQ (0 or the errno).
pub(crate) fn connect(key: usize, param: *const rdma_conn_param) -> c_int {
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
    id.local_psn = fresh_psn();
    id.responder_resources = p.map_or(16, |p| p.responder_resources.min(16));
    id.initiator_depth = p.map_or(16, |p| p.initiator_depth.min(16));
    id.retry_count = p.map_or(7, |p| p.retry_count.min(7));
    id.rnr_retry_count = p.map_or(7, |p| p.rnr_retry_count.min(7));
    let srq = p.is_some_and(|p| p.srq != 0);
    id.st = St::ReqSent;
    let mad = proto::req_mad(id, tid, qpn, srq, &user);
    c.send(key, mad, MAX_RETRIES);
    drop(c);
    proto::flush();
    0
}

/// `rdma_accept`: the QP to RTS, then the REP (0 or the errno).
pub(crate) fn accept(key: usize, param: *const rdma_conn_param) -> c_int {
    // SAFETY: the caller's parameter, if any.
    let user = match unsafe { private(param, private_len::REP) } {
        Ok(u) => u,
        Err(e) => return e,
    };
    // SAFETY: as above.
    let p = unsafe { param.as_ref() };
    let qp = {
        let mut c = cm();
        let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
        if id.st != St::ReqRcvd {
            return libc::EINVAL;
        }
        if let Some(p) = p {
            id.responder_resources = p.responder_resources;
            id.initiator_depth = p.initiator_depth;
        }
        id.local_psn = fresh_psn();
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
    c.send(key, mad, MAX_RETRIES);
    drop(c);
    proto::flush();
    0
}

/// `rdma_reject`: a REJ with the consumer's reason (0 or the errno).
pub(crate) fn reject(key: usize, data: &[u8]) -> c_int {
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
    c.send(key, Mad { tid, msg }.encode().to_vec(), 0);
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
    c.send(key, mad, 0);
    drop(c);
    proto::flush();
    0
}

/// `rdma_disconnect`: the QP to the error state, then a DREQ (0 or the errno).
pub(crate) fn disconnect(key: usize) -> c_int {
    let qp = {
        let c = cm();
        let Some(id) = c.ids.get(&key) else { return libc::EINVAL };
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
    c.send(key, mad, MAX_RETRIES);
    drop(c);
    proto::flush();
    0
}
