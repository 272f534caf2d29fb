//! Addresses: the program's `struct sockaddr`s, the route an ID's `rdma_cm_id` shows
//! (its source and destination, the GIDs they make, one path record), and
//! `rdma_getaddrinfo`'s answers.

use std::ffi::{CStr, c_char, c_int};
use std::net::{Ipv4Addr, SocketAddrV4};

use rdma_sys::*;

use mlx5_sim::wire::cm::private_len;

use crate::errno::minus_one;

use super::state::devs;

/// An IPv4 address and port from a `struct sockaddr`: `Err(errno)` for another family
/// (`EAFNOSUPPORT`) or NULL (`EINVAL`).
///
/// # Safety
/// `sa` is NULL or a readable `struct sockaddr` of its family's length.
pub(crate) unsafe fn sockaddr_v4(sa: *const libc::sockaddr) -> Result<SocketAddrV4, c_int> {
    if sa.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's sockaddr; its family says how long it is.
    unsafe {
        if c_int::from((*sa).sa_family) != libc::AF_INET {
            return Err(libc::EAFNOSUPPORT);
        }
        let sin = &*sa.cast::<libc::sockaddr_in>();
        Ok(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), u16::from_be(sin.sin_port)))
    }
}

/// True if an interface of this host has `ip` (`rdma_translate_ip`'s question), read from
/// the interface list: no socket is bound to it.
pub(crate) fn host_has(ip: Ipv4Addr) -> bool {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, which is freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return false;
    }
    let mut found = false;
    let mut p = list;
    while !p.is_null() {
        // SAFETY: a node of the list getifaddrs made; an AF_INET address is a sockaddr_in.
        unsafe {
            let a = (*p).ifa_addr;
            if !a.is_null() && i32::from((*a).sa_family) == libc::AF_INET {
                let sin = &*a.cast::<libc::sockaddr_in>();
                found |= u32::from_be(sin.sin_addr.s_addr) == u32::from(ip);
            }
            p = (*p).ifa_next;
        }
    }
    // SAFETY: the list getifaddrs made, freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// A `struct sockaddr_in` of `a`.
pub(crate) fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    s
}

/// Write the source (and destination) of ID `id` into its `rdma_cm_id`: the addresses,
/// the GIDs (IPv4-mapped, RoCE v2's), device `dev`'s context and port 1.
pub(crate) fn fill_route(id: *mut rdma_cm_id, dev: usize, src: SocketAddrV4, dst: SocketAddrV4) {
    set_src(id, Some(dev), src);
    // SAFETY: an rdma_cm_id the CM owns; plain writes into its route.
    unsafe {
        let r = &mut (*id).route.addr;
        r.dst_addr_union.dst_sin = sockaddr_in(dst);
        r.addr.ibaddr.dgid.raw = dst.ip().to_ipv6_mapped().octets();
    }
}

/// Write the source of ID `id` (and, when bound to a device, its context, port and PD).
pub(crate) fn set_src(id: *mut rdma_cm_id, dev: Option<usize>, src: SocketAddrV4) {
    // SAFETY: as for fill_route.
    unsafe {
        let r = &mut (*id).route.addr;
        r.src_addr_union.src_sin = sockaddr_in(src);
        r.addr.ibaddr.sgid.raw = src.ip().to_ipv6_mapped().octets();
        r.addr.ibaddr.pkey = 0xffffu16.to_be();
        if let Some(d) = dev {
            (*id).verbs = devs().ctx.get(d).copied().unwrap_or(0) as *mut ibv_context;
            (*id).port_num = 1;
            // librdmacm's ucma_get_device: the device's own PD until a QP names another.
            if (*id).pd.is_null() {
                (*id).pd = devs().pd.get(d).copied().unwrap_or(0) as *mut ibv_pd;
            }
        }
    }
}

/// The kernel's `cma_any_addr`: the wildcard or a loopback address, which binds to no device
/// and listens on every port. Here a loopback address a simulated port has is that port's.
pub(crate) fn any_addr(ip: Ipv4Addr) -> bool {
    ip.is_unspecified() || (ip.is_loopback() && devs().with_addr(ip).is_none())
}

/// The kernel's `cma_zero_addr`: a destination in 0.0.0.0/8 is this host.
pub(crate) fn zero_net(ip: Ipv4Addr) -> bool {
    ip.octets()[0] == 0
}

/// `rdma_resolve_addr` of a destination in 0.0.0.0/8 for an ID on no device, as the kernel's
/// `cma_resolve_loopback` and `cma_bind_loopback` do it: the ID takes the first device (every
/// simulated port is active) and its port 1, holds a port of its own (an ephemeral one when
/// unbound, as `cma_bind_addr` binds the wildcard), its source becomes 127.0.0.1, and
/// ADDR_RESOLVED follows; ENODEV when there is no device. Such an ID is on no netdev, so on
/// RoCE its route does not resolve (`rdma_resolve_route`).
pub(crate) fn resolve_loopback(id: *mut rdma_cm_id, dst: SocketAddrV4) -> c_int {
    let key = id as usize;
    if devs().ctx.is_empty() {
        return minus_one(libc::ENODEV);
    }
    if super::cm().ids.get(&key).is_some_and(|i| i.src.port() == 0) {
        let r = super::bind(key, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        if r != 0 {
            return minus_one(r);
        }
    }
    let mut c = super::cm();
    let Some(i) = c.ids.get_mut(&key) else { return minus_one(libc::EINVAL) };
    i.dev = Some(0);
    i.src = SocketAddrV4::new(Ipv4Addr::LOCALHOST, i.src.port());
    i.dst = Some(dst);
    i.st = super::St::AddrResolved;
    fill_route(id, 0, i.src, dst);
    c.post_simple(key, rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    drop(c);
    super::complete(id)
}

/// Give ID `id` one path record (ROUTE_RESOLVED): the GIDs, RoCE's permissive LIDs, the
/// port's MTU.
pub(crate) fn set_path(id: *mut rdma_cm_id, dev: usize) {
    // SAFETY: a zeroed ibv_sa_path_rec from calloc (plain data), owned by the ID until
    // rdma_destroy_id frees it.
    unsafe {
        if !(*id).route.path_rec.is_null() {
            return;
        }
        let p = libc::calloc(1, std::mem::size_of::<ibv_sa_path_rec>()).cast::<ibv_sa_path_rec>();
        if p.is_null() {
            return;
        }
        let ib = &(*id).route.addr.addr.ibaddr;
        (*p).sgid = ib.sgid;
        (*p).dgid = ib.dgid;
        (*p).dlid = 0xffff;
        (*p).slid = 0xffff;
        (*p).pkey = 0xffffu16.to_be();
        (*p).hop_limit = 64;
        (*p).reversible = 1;
        (*p).numb_path = 1;
        (*p).mtu_selector = 2;
        (*p).mtu = u8::try_from(devs().mtu.get(dev).copied().unwrap_or(3)).unwrap_or(3);
        (*p).rate_selector = 2;
        (*p).packet_life_time_selector = 2;
        (*id).route.path_rec = p;
        (*id).route.num_paths = 1;
    }
}

/// The length of `struct cma_hdr`, which leads a REQ's (and a SIDR_REQ's) private data.
pub(crate) const CMA_HDR: usize = 36;
/// The program's private data a REQ carries after the header.
pub(crate) const REQ_USER: usize = private_len::REQ - CMA_HDR;

/// The `struct cma_hdr` of a connection from `src` to `dst`.
pub(crate) fn cma_hdr(src: SocketAddrV4, dst: SocketAddrV4) -> [u8; CMA_HDR] {
    let mut h = [0u8; CMA_HDR];
    h[1] = 4 << 4; // IPv4
    h[2..4].copy_from_slice(&src.port().to_be_bytes());
    h[16..20].copy_from_slice(&src.ip().octets());
    h[32..36].copy_from_slice(&dst.ip().octets());
    h
}

/// The requester's address and port from a REQ's `cma_hdr`, if it names IPv4 ones.
pub(crate) fn peer_of(hdr: &[u8]) -> Option<SocketAddrV4> {
    if hdr.len() < CMA_HDR || hdr[0] != 0 || hdr[1] >> 4 != 4 {
        return None;
    }
    let ip = Ipv4Addr::new(hdr[16], hdr[17], hdr[18], hdr[19]);
    Some(SocketAddrV4::new(ip, u16::from_be_bytes([hdr[2], hdr[3]])))
}

/// The service ID of port `port` of port space `ps` (rdma_cm's IP service IDs).
pub(crate) fn service_id(ps: u32, port: u16) -> u64 {
    (u64::from(ps & 0xffff) << 16) | u64::from(port)
}

/// rdma_cm's Q_Key of the UDP port space (`RDMA_UDP_QKEY`).
pub(crate) const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// The GID index of `src`'s IPv4-mapped RoCE v2 GID on device `dev` (3: after the
/// link-local GID as v1 and v2 and the mapped one as v1).
pub(crate) fn sgid_index(dev: usize, src: SocketAddrV4) -> u8 {
    let want = src.ip().to_ipv6_mapped().octets();
    crate::state::with(
        |_| 3,
        |s| {
            let t = s.sim.simulator().gid_table(dev);
            t.iter().position(|(g, ty)| g.0 == want && *ty == 2).and_then(|i| u8::try_from(i).ok()).unwrap_or(3)
        },
    )
}

/// `rdma_getaddrinfo`'s flag: the address is the local one to listen on.
const RAI_PASSIVE: c_int = 1;
/// `rdma_getaddrinfo`'s flag: the node is a numeric address.
const RAI_NUMERICHOST: c_int = 2;

/// `rdma_getaddrinfo` for IPv4: one `rdma_addrinfo` (malloc'ed, with its addresses) or an
/// errno-style failure (`Err(errno)`). As librdmacm: without node and service the hints'
/// destination is the answer's, and the hints' source is the answer's when it has none.
///
/// # Safety
/// `node` and `service` are NULL or C strings; `hints` is NULL or an `rdma_addrinfo`.
pub(crate) unsafe fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
) -> Result<*mut rdma_addrinfo, c_int> {
    // SAFETY: the caller's hints, if any.
    let h = unsafe { hints.as_ref() };
    if node.is_null() && service.is_null() && h.is_none() {
        return Err(libc::EINVAL);
    }
    let flags = h.map_or(0, |h| h.ai_flags);
    if h.is_some_and(|h| h.ai_family != 0 && h.ai_family != libc::AF_INET) {
        return Err(libc::EAFNOSUPPORT);
    }
    // SAFETY: C strings per the contract.
    let text = |p: *const c_char| (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
    // Neither node nor service: the hints' destination, as librdmacm copies it.
    let hinted = |p: *mut libc::sockaddr| (!p.is_null()).then(|| unsafe { sockaddr_v4(p) }).transpose();
    let from_hints = node.is_null() && service.is_null();
    let port = match text(service) {
        Some(s) => s.parse::<u16>().map_err(|_| libc::EINVAL)?,
        None => 0,
    };
    let hint_dst = if from_hints { hinted(h.map_or(std::ptr::null_mut(), |h| h.ai_dst_addr))? } else { None };
    let port = hint_dst.map_or(port, |a| a.port());
    let ip = match text(node) {
        None if from_hints => hint_dst.map_or(Ipv4Addr::UNSPECIFIED, |a| *a.ip()),
        None => Ipv4Addr::UNSPECIFIED,
        Some(n) => match n.parse::<Ipv4Addr>() {
            Ok(a) => a,
            Err(_) if flags & RAI_NUMERICHOST != 0 => return Err(libc::EINVAL),
            Err(_) => resolve(&n).ok_or(libc::EADDRNOTAVAIL)?,
        },
    };
    let passive = flags & RAI_PASSIVE != 0;
    // SAFETY: fresh zeroed allocations, filled with plain data; rdma_freeaddrinfo frees them.
    unsafe {
        let ai = libc::calloc(1, std::mem::size_of::<rdma_addrinfo>()).cast::<rdma_addrinfo>();
        let sa = libc::calloc(1, std::mem::size_of::<libc::sockaddr_in>()).cast::<libc::sockaddr_in>();
        if ai.is_null() || sa.is_null() {
            libc::free(ai.cast());
            libc::free(sa.cast());
            return Err(libc::ENOMEM);
        }
        *sa = sockaddr_in(SocketAddrV4::new(ip, port));
        let a = &mut *ai;
        a.ai_flags = flags;
        a.ai_family = libc::AF_INET;
        a.ai_qp_type = h.map_or(0, |h| h.ai_qp_type);
        a.ai_port_space = h.map_or(0, |h| h.ai_port_space);
        if a.ai_qp_type == 0 {
            a.ai_qp_type = ibv_qp_type::IBV_QPT_RC as c_int;
        }
        if a.ai_port_space == 0 {
            a.ai_port_space = if a.ai_qp_type == ibv_qp_type::IBV_QPT_UD as c_int {
                rdma_port_space::RDMA_PS_UDP as c_int
            } else {
                rdma_port_space::RDMA_PS_TCP as c_int
            };
        }
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if passive {
            a.ai_src_addr = sa.cast();
            a.ai_src_len = len;
        } else if !from_hints || hint_dst.is_some() {
            a.ai_dst_addr = sa.cast();
            a.ai_dst_len = len;
        } else {
            libc::free(sa.cast());
        }
        // librdmacm: the hints' source when the answer has none.
        if a.ai_src_len == 0
            && let Ok(Some(src)) = hinted(h.map_or(std::ptr::null_mut(), |h| h.ai_src_addr))
        {
            let s = libc::calloc(1, std::mem::size_of::<libc::sockaddr_in>()).cast::<libc::sockaddr_in>();
            if s.is_null() {
                freeaddrinfo(ai);
                return Err(libc::ENOMEM);
            }
            *s = sockaddr_in(src);
            a.ai_src_addr = s.cast();
            a.ai_src_len = len;
        }
        Ok(ai)
    }
}

/// A host name's first IPv4 address, by the system's resolver.
fn resolve(name: &str) -> Option<Ipv4Addr> {
    use std::net::ToSocketAddrs;
    (name, 0).to_socket_addrs().ok()?.find_map(|a| match a {
        std::net::SocketAddr::V4(v) => Some(*v.ip()),
        std::net::SocketAddr::V6(_) => None,
    })
}

/// `rdma_freeaddrinfo`: each entry with its addresses and names.
///
/// # Safety
/// `res` is NULL or a list from [`getaddrinfo`].
pub(crate) unsafe fn freeaddrinfo(mut res: *mut rdma_addrinfo) {
    while !res.is_null() {
        // SAFETY: an entry getaddrinfo allocated, with its own allocations.
        unsafe {
            let next = (*res).ai_next;
            for p in [
                (*res).ai_src_addr.cast::<libc::c_void>(),
                (*res).ai_dst_addr.cast(),
                (*res).ai_src_canonname.cast(),
                (*res).ai_dst_canonname.cast(),
                (*res).ai_route,
                (*res).ai_connect,
            ] {
                libc::free(p);
            }
            libc::free(res.cast());
            res = next;
        }
    }
}
