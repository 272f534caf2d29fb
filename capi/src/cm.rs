//! librdmacm on the simulated network: the `rdma_*` calls of `librdmacm.so.1` (which
//! `make shim` links as jumps into this library), over a connection manager of this process
//! that speaks the IBTA's CM MADs to QP 1 of the peer's port (`mlx5_sim::wire::cm`).
//!
//! - [`state`]: event channels (a pipe each), CM IDs, the devices;
//! - [`addr`]: addresses, routes, `rdma_getaddrinfo`;
//! - [`proto`]: the MADs that come in, retries, the CM's thread;
//! - [`conn`]: QP attributes and the calls that send the handshake;
//! - [`qp`]: the QPs and CQs librdmacm makes for an ID;
//! - [`sidr`]: SIDR, which "connects" the UD IDs of the UDP port space;
//! - [`mcast`]: multicast groups (`rdma_join_multicast`, `rdma_leave_multicast`);
//! - [`fuzz`]: arbitrary bytes at QP 1 through the state machine, for the fuzz target.
//!
//! rsockets are `crate::rsocket`'s, over these calls. Not modelled yet (they fail with
//! EOPNOTSUPP, generated stubs): SRQs made through librdmacm, ECE. The IPoIB port
//! space takes no address of a RoCE port (EINVAL, as the kernel's rdma_cm).

use std::ffi::{c_char, c_int, c_void};
use std::net::{Ipv4Addr, SocketAddrV4};

use rdma_sys::rdma_cm_event_type::*;
use rdma_sys::*;

use crate::errno::{minus_one, null};

mod addr;
mod conn;
mod fuzz;
mod mcast;
mod proto;
pub(crate) mod qp;
mod sidr;
mod state;

pub use fuzz::qp1_input;
use state::{Chan, EventBox, Id, St, cm, devs};

/// Make an `rdma_cm_id` on channel `chan` and enter it in the table.
pub(crate) fn new_cm_id(
    c: &mut state::Cm,
    chan: usize,
    context: *mut c_void,
    ps: u32,
    qp_type: u32,
) -> *mut rdma_cm_id {
    // SAFETY: rdma_cm_id is plain data (pointers, integers, unions of addresses).
    let mut b: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
    b.channel = chan as *mut rdma_event_channel;
    b.context = context;
    b.ps = ps;
    b.qp_type = qp_type;
    let p = Box::into_raw(b);
    c.ids.insert(p as usize, Id::new(p, chan, false));
    p
}

/// A new channel: a semaphore eventfd (each read takes one event's count), blocking
/// unless the program makes it non-blocking, as the kernel's rdma_cm fd is.
fn new_channel(c: &mut state::Cm) -> Result<*mut rdma_event_channel, c_int> {
    // SAFETY: no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EMFILE));
    }
    let mut b = Box::new(rdma_event_channel { fd });
    let p: *mut rdma_event_channel = &mut *b;
    c.chans.insert(p as usize, Chan { c: b, queue: Default::default() });
    Ok(p)
}

/// `rdma_create_event_channel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    proto::start();
    new_channel(&mut cm()).unwrap_or_else(null)
}

/// `rdma_destroy_event_channel`: its fds closed, its unread events dropped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    if let Some(ch) = cm().chans.remove(&(channel as usize)) {
        for e in ch.queue {
            // SAFETY: events the channel owned, never handed out.
            drop(unsafe { Box::from_raw(e) });
        }
        // SAFETY: the channel's own fd.
        unsafe { libc::close(ch.c.fd) };
    }
}

/// `rdma_create_id`: on `channel`, or (NULL) in synchronous mode with a channel of its own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    let qp_type = match ps {
        rdma_port_space::RDMA_PS_TCP | rdma_port_space::RDMA_PS_IB => ibv_qp_type::IBV_QPT_RC,
        rdma_port_space::RDMA_PS_UDP | rdma_port_space::RDMA_PS_IPOIB => ibv_qp_type::IBV_QPT_UD,
        _ => return minus_one(libc::EINVAL),
    };
    if id.is_null() {
        return minus_one(libc::EINVAL);
    }
    proto::start();
    let mut c = cm();
    let (chan, sync) = if channel.is_null() {
        match new_channel(&mut c) {
            Ok(ch) => (ch, true),
            Err(e) => return minus_one(e),
        }
    } else if c.chans.contains_key(&(channel as usize)) {
        (channel, false)
    } else {
        return minus_one(libc::EINVAL);
    };
    let p = new_cm_id(&mut c, chan as usize, context, ps, qp_type);
    if let Some(i) = c.ids.get_mut(&(p as usize)) {
        i.sync = sync;
    }
    // SAFETY: the caller's out-parameter.
    unsafe { *id = p };
    0
}

/// Drop what the CM holds of ID `key`: its queued events and its box.
fn forget(c: &mut state::Cm, key: usize) {
    let Some(id) = c.ids.remove(&key) else { return };
    for ch in c.chans.values_mut() {
        ch.queue.retain(|&e| {
            // SAFETY: queued events are the CM's.
            let mine = unsafe { (*e).ev.id } as usize == key;
            if mine {
                // SAFETY: as above; removed from the queue here.
                drop(unsafe { Box::from_raw(e) });
            }
            !mine
        });
    }
    // SAFETY: the ID's box and its path record (calloc'ed), both the CM's.
    unsafe {
        libc::free((*id.c).route.path_rec.cast());
        if id.sync {
            let chan = (*id.c).channel as usize;
            if let Some(ch) = c.chans.remove(&chan) {
                libc::close(ch.c.fd);
            }
        }
        drop(Box::from_raw(id.c));
    }
}

/// `rdma_destroy_id`: a connection still up is ended (DREQ), a request not answered is
/// rejected, as the kernel does when the ID goes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    let key = id as usize;
    let st = match cm().ids.get(&key) {
        Some(i) => i.st,
        None => return minus_one(libc::EINVAL),
    };
    match st {
        St::Connected | St::RepSent | St::RepRcvd => {
            conn::disconnect(key);
        }
        St::ReqRcvd => {
            conn::reject(key, &[]);
        }
        _ => {}
    }
    forget(&mut cm(), key);
    0
}

/// `rdma_get_cm_event`: the next event, blocking unless the channel's fd is non-blocking
/// (then -1 with EAGAIN). A CONNECT_RESPONSE for an ID with a QP moves the QP to RTS and
/// sends the RTU first, and is ESTABLISHED (or CONNECT_ERROR), as librdmacm does it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int {
    if event.is_null() || channel.is_null() {
        return minus_one(libc::EINVAL);
    }
    let e = match state::next_event(channel) {
        Ok(e) => e,
        Err(err) => return minus_one(err),
    };
    // SAFETY: an event the CM made; now the program's until acked.
    let ev = unsafe { &mut (*e).ev };
    let key = ev.id as usize;
    let qp = cm().ids.get(&key).map_or(std::ptr::null_mut(), Id::qp);
    match ev.event {
        RDMA_CM_EVENT_CONNECT_RESPONSE if !qp.is_null() => {
            let states = [ibv_qp_state::IBV_QPS_INIT, ibv_qp_state::IBV_QPS_RTR, ibv_qp_state::IBV_QPS_RTS];
            let r = conn::move_qp(key, qp, &states);
            if r == 0 && conn::establish(key) == 0 {
                ev.event = RDMA_CM_EVENT_ESTABLISHED;
            } else {
                ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
                ev.status = -r.max(libc::EINVAL);
            }
        }
        RDMA_CM_EVENT_REJECTED => conn::qp_to_error(qp),
        RDMA_CM_EVENT_MULTICAST_JOIN => mcast::on_join_event(ev, qp),
        RDMA_CM_EVENT_CONNECT_REQUEST => {
            // rdma_create_ep's QP attributes make the new ID's QP (rdma_get_request).
            let ep = cm().ids.get(&key).and_then(|i| i.ep_qp);
            if let Some((pd, mut attr)) = ep {
                // SAFETY: the new ID, and the attributes rdma_create_ep copied.
                unsafe { qp::rdma_create_qp(ev.id, pd, &mut attr) };
            }
        }
        _ => {}
    }
    // SAFETY: the caller's out-parameter.
    unsafe { *event = ev };
    0
}

/// `rdma_ack_cm_event`: frees the event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    if event.is_null() {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: an event of rdma_get_cm_event: an EventBox whose first field it is.
    drop(unsafe { Box::from_raw(event.cast::<EventBox>()) });
    0
}

/// `rdma_event_str`.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_event_str(event: u32) -> *const c_char {
    let s: &'static [u8] = match event {
        RDMA_CM_EVENT_ADDR_RESOLVED => b"RDMA_CM_EVENT_ADDR_RESOLVED\0",
        RDMA_CM_EVENT_ADDR_ERROR => b"RDMA_CM_EVENT_ADDR_ERROR\0",
        RDMA_CM_EVENT_ROUTE_RESOLVED => b"RDMA_CM_EVENT_ROUTE_RESOLVED\0",
        RDMA_CM_EVENT_ROUTE_ERROR => b"RDMA_CM_EVENT_ROUTE_ERROR\0",
        RDMA_CM_EVENT_CONNECT_REQUEST => b"RDMA_CM_EVENT_CONNECT_REQUEST\0",
        RDMA_CM_EVENT_CONNECT_RESPONSE => b"RDMA_CM_EVENT_CONNECT_RESPONSE\0",
        RDMA_CM_EVENT_CONNECT_ERROR => b"RDMA_CM_EVENT_CONNECT_ERROR\0",
        RDMA_CM_EVENT_UNREACHABLE => b"RDMA_CM_EVENT_UNREACHABLE\0",
        RDMA_CM_EVENT_REJECTED => b"RDMA_CM_EVENT_REJECTED\0",
        RDMA_CM_EVENT_ESTABLISHED => b"RDMA_CM_EVENT_ESTABLISHED\0",
        RDMA_CM_EVENT_DISCONNECTED => b"RDMA_CM_EVENT_DISCONNECTED\0",
        RDMA_CM_EVENT_DEVICE_REMOVAL => b"RDMA_CM_EVENT_DEVICE_REMOVAL\0",
        RDMA_CM_EVENT_MULTICAST_JOIN => b"RDMA_CM_EVENT_MULTICAST_JOIN\0",
        RDMA_CM_EVENT_MULTICAST_ERROR => b"RDMA_CM_EVENT_MULTICAST_ERROR\0",
        RDMA_CM_EVENT_ADDR_CHANGE => b"RDMA_CM_EVENT_ADDR_CHANGE\0",
        RDMA_CM_EVENT_TIMEWAIT_EXIT => b"RDMA_CM_EVENT_TIMEWAIT_EXIT\0",
        16 => b"RDMA_CM_EVENT_ADDRINFO_RESOLVED\0",
        17 => b"RDMA_CM_EVENT_ADDRINFO_ERROR\0",
        _ => b"UNKNOWN EVENT\0",
    };
    s.as_ptr().cast()
}

/// In synchronous mode, wait for the ID's own event and fail as librdmacm's
/// `ucma_complete` fails (REJECTED is ECONNREFUSED, else the status). 0 otherwise.
pub(crate) fn complete(id: *mut rdma_cm_id) -> c_int {
    let (sync, chan) = match cm().ids.get(&(id as usize)) {
        Some(i) => (i.sync, i.chan),
        None => return minus_one(libc::EINVAL),
    };
    if !sync {
        return 0;
    }
    // SAFETY: the ID, owned by the CM; its previous event is the program's no more.
    unsafe {
        if !(*id).event.is_null() {
            rdma_ack_cm_event((*id).event);
            (*id).event = std::ptr::null_mut();
        }
        let mut ev = std::ptr::null_mut();
        if rdma_get_cm_event(chan as *mut rdma_event_channel, &mut ev) != 0 {
            return -1;
        }
        (*id).event = ev;
        let s = (*ev).status;
        if s == 0 {
            return 0;
        }
        minus_one(if (*ev).event == RDMA_CM_EVENT_REJECTED { libc::ECONNREFUSED } else { s.abs() })
    }
}

/// Bind ID `key` to `a`: its device (none for the wildcard address) and port (an
/// ephemeral one for 0).
fn bind(key: usize, a: SocketAddrV4) -> c_int {
    let ipoib = cm().ids.get(&key).is_some_and(|i| i.ps() == rdma_port_space::RDMA_PS_IPOIB);
    let dev = if addr::any_addr(*a.ip()) {
        None
    } else if ipoib {
        // The kernel's cma_acquire_dev_by_src_ip: IPoIB's port space on no RoCE port.
        return libc::EINVAL;
    } else {
        match devs().with_addr(*a.ip()) {
            Some(d) => Some(d),
            // The kernel's rdma_translate_ip finds the host's interface that has the address
            // (EADDRNOTAVAIL for none); cma_acquire_dev_by_src_ip then finds no RDMA port
            // with it (ENODEV).
            None if addr::host_has(*a.ip()) => return libc::ENODEV,
            None => return libc::EADDRNOTAVAIL,
        }
    };
    let mut c = cm();
    let ps = match c.ids.get(&key) {
        Some(i) if i.st == St::Idle && i.src.port() == 0 => i.ps(),
        Some(_) => return libc::EINVAL,
        None => return libc::EINVAL,
    };
    let taken = |c: &state::Cm, p: u16| {
        c.ids.values().any(|i| {
            i.bound
                && i.ps() == ps
                && i.src.port() == p
                && (addr::any_addr(*i.src.ip()) || addr::any_addr(*a.ip()) || i.src.ip() == a.ip())
        })
    };
    let port = if a.port() == 0 {
        let start = (std::process::id() % 28_000) as u16;
        match (0..28_232u16).map(|n| 32_768 + (start + n) % 28_232).find(|&p| !taken(&c, p)) {
            Some(p) => p,
            None => return libc::EADDRINUSE,
        }
    } else if taken(&c, a.port()) {
        return libc::EADDRINUSE;
    } else {
        a.port()
    };
    let Some(id) = c.ids.get_mut(&key) else { return libc::EINVAL };
    id.src = SocketAddrV4::new(*a.ip(), port);
    id.bound = true;
    if dev.is_some() {
        id.dev = dev;
    }
    addr::set_src(id.c, dev, id.src);
    0
}

/// `rdma_bind_addr`: an address one of the simulated ports has, or the wildcard or another
/// loopback address (no device); IPv4. ENODEV for another address of the host,
/// EADDRNOTAVAIL for one the host does not have.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    // SAFETY: the caller's sockaddr.
    let a = match unsafe { addr::sockaddr_v4(addr) } {
        Ok(a) => a,
        Err(e) => return minus_one(e),
    };
    match bind(id as usize, a) {
        0 => 0,
        e => minus_one(e),
    }
}

/// `rdma_resolve_addr`: the port the destination is reached from (ADDR_RESOLVED), or
/// ADDR_ERROR with -ENETUNREACH when no simulated port reaches it; 0.0.0.0/8 is this host.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src_addr: *mut libc::sockaddr,
    dst_addr: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    let key = id as usize;
    // SAFETY: the caller's sockaddrs.
    let dst = match unsafe { addr::sockaddr_v4(dst_addr) } {
        Ok(a) => a,
        Err(e) => return minus_one(e),
    };
    let (st, bound) = match cm().ids.get(&key) {
        Some(i) => (i.st, i.src),
        None => return minus_one(libc::EINVAL),
    };
    if st != St::Idle {
        return minus_one(libc::EINVAL);
    }
    if !src_addr.is_null() && bound.port() == 0 {
        // SAFETY: as above.
        let src = match unsafe { addr::sockaddr_v4(src_addr) } {
            Ok(a) => a,
            Err(e) => return minus_one(e),
        };
        let r = bind(key, src);
        if r != 0 {
            return minus_one(r);
        }
    }
    if addr::zero_net(*dst.ip()) && cm().ids.get(&key).is_some_and(|i| i.dev.is_none()) {
        return addr::resolve_loopback(id, dst);
    }
    let d = devs();
    let mut c = cm();
    let Some(i) = c.ids.get(&key) else { return minus_one(libc::EINVAL) };
    let dev = i.dev.or_else(|| d.route_to(*dst.ip())).filter(|&v| {
        // A group's address is reached through the bound device, as the kernel's
        // addr_resolve takes a multicast destination on the source's interface.
        let local = dst.ip().is_loopback() || dst.ip().is_multicast();
        d.addr.get(v).copied().flatten().is_some_and(|a| !a.is_loopback() || local)
    });
    // 0.0.0.0/8 from an ID already on a device: not simulated (the kernel resolves it).
    let Some(dev) = dev.filter(|_| !addr::zero_net(*dst.ip())) else {
        c.post_simple(key, RDMA_CM_EVENT_ADDR_ERROR, -libc::ENETUNREACH);
        drop(c);
        return complete(id);
    };
    if i.ps() == rdma_port_space::RDMA_PS_IPOIB {
        // As the kernel's addr_handler: no RoCE port takes the IPoIB port space.
        c.post_simple(key, RDMA_CM_EVENT_ADDR_ERROR, -libc::EINVAL);
        drop(c);
        return complete(id);
    }
    let here = d.addr[dev].unwrap_or(Ipv4Addr::UNSPECIFIED);
    let src_port = i.src.port();
    drop(c);
    if src_port == 0 {
        let r = bind(key, SocketAddrV4::new(here, 0));
        if r != 0 {
            return minus_one(r);
        }
    }
    let mut c = cm();
    let Some(i) = c.ids.get_mut(&key) else { return minus_one(libc::EINVAL) };
    i.dev = Some(dev);
    i.src = SocketAddrV4::new(here, i.src.port());
    i.dst = Some(dst);
    i.st = St::AddrResolved;
    addr::fill_route(id, dev, i.src, dst);
    c.post_simple(key, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    drop(c);
    complete(id)
}

/// `rdma_resolve_route`: one path (ROUTE_RESOLVED); EINVAL before the address is resolved.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, _timeout_ms: c_int) -> c_int {
    let key = id as usize;
    let mut c = cm();
    let Some(i) = c.ids.get_mut(&key) else { return minus_one(libc::EINVAL) };
    let (St::AddrResolved, Some(dev)) = (i.st, i.dev) else { return minus_one(libc::EINVAL) };
    // A loopback resolution's ID has no netdev: cma_resolve_iboe_route's ENODEV.
    if i.dst.is_some_and(|d| addr::zero_net(*d.ip())) {
        return minus_one(libc::ENODEV);
    }
    i.st = St::RouteResolved;
    addr::set_path(id, dev);
    c.post_simple(key, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    drop(c);
    complete(id)
}

/// `rdma_listen`: a bound ID (else bound to the wildcard address first) takes REQs for
/// its port.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, _backlog: c_int) -> c_int {
    let key = id as usize;
    let port = match cm().ids.get(&key) {
        Some(i) if i.st == St::Idle => i.src.port(),
        Some(i) if i.st == St::Listen => return 0,
        _ => return minus_one(libc::EINVAL),
    };
    if port == 0 {
        let r = bind(key, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        if r != 0 {
            return minus_one(r);
        }
    }
    if let Some(i) = cm().ids.get_mut(&key) {
        i.st = St::Listen;
    }
    0
}

/// `rdma_get_request`: the next connection request of a synchronous listener.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    if id.is_null() {
        return minus_one(libc::EINVAL);
    }
    let sync = cm().ids.get(&(listen as usize)).map(|i| i.sync);
    if sync != Some(true) {
        return minus_one(libc::EINVAL);
    }
    if complete(listen) != 0 {
        return -1;
    }
    // SAFETY: the listener's event, which complete() just took.
    unsafe {
        let ev = (*listen).event;
        if (*ev).event != RDMA_CM_EVENT_CONNECT_REQUEST {
            return minus_one(libc::EINVAL);
        }
        let new = (*ev).id;
        (*listen).event = std::ptr::null_mut();
        (*new).event = ev;
        *id = new;
    }
    0
}

/// The key of an ID the CM knows, else `Err(EINVAL)`.
pub(crate) fn known(id: *mut rdma_cm_id) -> Result<usize, c_int> {
    let k = id as usize;
    if cm().ids.contains_key(&k) { Ok(k) } else { Err(libc::EINVAL) }
}

/// `rdma_connect`: the REQ (to a route resolved); private data up to 56 bytes (the
/// REQ's 92 less rdma_cm's header), EINVAL over.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    let r = known(id).map_or_else(|e| e, |k| conn::connect(k, conn_param));
    if r != 0 {
        return minus_one(r);
    }
    complete(id)
}

/// `rdma_accept`: the QP to RTS and the REP; private data up to 196 bytes. A UD ID's: the
/// SIDR_REP (up to 136 bytes), and no event to wait for (librdmacm acks a synchronous ID's
/// request event and returns).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    let r = known(id).map_or_else(|e| e, |k| conn::accept(k, conn_param));
    if r != 0 {
        return minus_one(r);
    }
    if conn::is_ud(id as usize) {
        let sync = cm().ids.get(&(id as usize)).is_some_and(|i| i.sync);
        // SAFETY: the ID, owned by the CM; its request event is the program's no more.
        unsafe {
            if sync && !(*id).event.is_null() {
                rdma_ack_cm_event((*id).event);
                (*id).event = std::ptr::null_mut();
            }
        }
        return 0;
    }
    complete(id)
}

/// `rdma_reject`: a REJ (consumer-defined reason); private data up to 148 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_reject(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    let data = if private_data.is_null() || private_data_len == 0 {
        &[][..]
    } else {
        // SAFETY: the caller's bytes.
        unsafe { std::slice::from_raw_parts(private_data.cast::<u8>(), usize::from(private_data_len)) }
    };
    match known(id).map_or_else(|e| e, |k| conn::reject(k, data)) {
        0 => 0,
        e => minus_one(e),
    }
}

/// `rdma_establish`: the RTU, for an ID that took a CONNECT_RESPONSE without a QP.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    match known(id).map_or_else(|e| e, conn::establish) {
        0 => 0,
        e => minus_one(e),
    }
}

/// `rdma_disconnect`: the QP to the error state and a DREQ; DISCONNECTED comes with the
/// DREP (or when the DREQ's retries run out).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    match known(id).map_or_else(|e| e, conn::disconnect) {
        0 => 0,
        e => minus_one(e),
    }
}

/// `rdma_migrate_id`: the ID's events go to `channel` from now on (NULL: synchronous).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int {
    let Ok(key) = known(id) else { return minus_one(libc::EINVAL) };
    let mut c = cm();
    let (chan, sync) = if channel.is_null() {
        match new_channel(&mut c) {
            Ok(ch) => (ch, true),
            Err(e) => return minus_one(e),
        }
    } else if c.chans.contains_key(&(channel as usize)) {
        (channel, false)
    } else {
        return minus_one(libc::EINVAL);
    };
    if let Some(i) = c.ids.get_mut(&key) {
        i.chan = chan as usize;
        i.sync = sync;
    }
    // SAFETY: the ID, owned by the CM.
    unsafe { (*id).channel = chan };
    0
}

/// `rdma_set_option`: the ID options the kernel takes (TOS, REUSEADDR, AFONLY and the
/// others of level RDMA_OPTION_ID, IB_PATH): accepted and kept out of the simulation, but
/// ACK_TIMEOUT, which the ID's QP takes at RTS; another level or option is ENOSYS, a NULL or
/// short value EINVAL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    if known(id).is_err() || optval.is_null() || optlen == 0 {
        return minus_one(libc::EINVAL);
    }
    match (level, optname) {
        // RDMA_OPTION_ID_ACK_TIMEOUT: one byte, on an RC ID (the kernel's
        // rdma_set_ack_timeout); its QP takes it at RTS.
        (0, 3) => {
            let mut c = cm();
            let Some(i) = c.ids.get_mut(&(id as usize)) else { return minus_one(libc::EINVAL) };
            // SAFETY: the ID, owned by the CM.
            let rc = unsafe { (*id).qp_type } == ibv_qp_type::IBV_QPT_RC;
            if optlen != 1 || !rc {
                return minus_one(libc::EINVAL);
            }
            // SAFETY: the caller's one-byte value.
            i.ack_timeout = Some(unsafe { *optval.cast::<u8>() });
            0
        }
        // RDMA_OPTION_ID: TOS (u8), REUSEADDR, AFONLY (int).
        (0, 0) => 0,
        (0, 1) | (0, 2) if optlen >= std::mem::size_of::<c_int>() => 0,
        (0, 1) | (0, 2) => minus_one(libc::EINVAL),
        // RDMA_OPTION_IB_PATH.
        (1, 1) => 0,
        _ => minus_one(libc::ENOSYS),
    }
}

/// The port of an ID's source or destination, big-endian; 0 for another family.
fn port_of(id: *mut rdma_cm_id, dst: bool) -> u16 {
    if id.is_null() {
        return 0;
    }
    // SAFETY: the program's rdma_cm_id; its route's sockaddrs.
    unsafe {
        let r = &(*id).route.addr;
        let sa = if dst { &r.dst_addr_union.dst_sin } else { &r.src_addr_union.src_sin };
        match c_int::from(sa.sin_family) {
            libc::AF_INET | libc::AF_INET6 => sa.sin_port,
            _ => 0,
        }
    }
}

/// `rdma_get_src_port`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    port_of(id, false)
}

/// `rdma_get_dst_port`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    port_of(id, true)
}

/// `rdma_get_devices`: the simulated devices' contexts, NULL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    let d = devs();
    // SAFETY: a fresh zeroed array of n + 1 pointers.
    let list = unsafe { libc::calloc(d.ctx.len() + 1, std::mem::size_of::<usize>()) }.cast::<*mut ibv_context>();
    if list.is_null() {
        return null(libc::ENOMEM);
    }
    for (i, c) in d.ctx.iter().enumerate() {
        // SAFETY: within the array.
        unsafe { *list.add(i) = *c as *mut ibv_context };
    }
    if !num_devices.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *num_devices = c_int::try_from(d.ctx.len()).unwrap_or(0) };
    }
    list
}

/// `rdma_free_devices`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: an array of rdma_get_devices.
    unsafe { libc::free(list.cast()) };
}

/// `rdma_getaddrinfo`: IPv4 (numeric or by the resolver); -1 with errno on failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    if res.is_null() {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: the caller's strings and hints.
    match unsafe { addr::getaddrinfo(node, service, hints) } {
        Ok(ai) => {
            // SAFETY: the caller's out-parameter.
            unsafe { *res = ai };
            0
        }
        Err(e) => minus_one(e),
    }
}

/// `rdma_freeaddrinfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    // SAFETY: a list of rdma_getaddrinfo.
    unsafe { addr::freeaddrinfo(res) };
}

/// `rdma_create_ep`: a synchronous ID bound (passive) or connected up to its route
/// (active), with a QP when attributes are given (a passive one's requests get it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    if id.is_null() || res.is_null() {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: the caller's addrinfo and attributes; the calls above on the new ID.
    unsafe {
        let r = &*res;
        let mut new = std::ptr::null_mut();
        let ps = u32::try_from(r.ai_port_space).unwrap_or(rdma_port_space::RDMA_PS_TCP);
        if rdma_create_id(std::ptr::null_mut(), &mut new, std::ptr::null_mut(), ps) != 0 {
            return -1;
        }
        let failed = |new| {
            rdma_destroy_id(new);
            -1
        };
        if let Some(a) = qp_init_attr.as_mut() {
            a.qp_type = u32::try_from(r.ai_qp_type).unwrap_or(ibv_qp_type::IBV_QPT_RC);
        }
        if r.ai_flags & 1 != 0 {
            if rdma_bind_addr(new, r.ai_src_addr) != 0 {
                return failed(new);
            }
            if let (false, Some(i)) = (qp_init_attr.is_null(), cm().ids.get_mut(&(new as usize))) {
                i.ep_qp = Some((pd, *qp_init_attr));
            }
        } else {
            if rdma_resolve_addr(new, r.ai_src_addr, r.ai_dst_addr, 2000) != 0 || rdma_resolve_route(new, 2000) != 0 {
                return failed(new);
            }
            if !qp_init_attr.is_null() && qp::rdma_create_qp(new, pd, qp_init_attr) != 0 {
                return failed(new);
            }
        }
        *id = new;
    }
    0
}

/// `rdma_destroy_ep`: the ID's QP and the ID.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    // SAFETY: an ID of rdma_create_ep.
    unsafe {
        qp::rdma_destroy_qp(id);
        rdma_destroy_id(id);
    }
}
