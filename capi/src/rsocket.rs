//! rsockets (`rdma/rsocket.h`) over the shim's own librdmacm and verbs: sockets whose calls
//! are `rsocket`, `rconnect`, `rsend`, `rpoll`... Each stream rsocket is an RC QP connected
//! through the CM (its private data says the receive queue's depth and buffers' size),
//! carrying SENDs with immediate data under credits, and RDMA WRITEs for `riowrite`; each
//! datagram rsocket a UDP socket beside UD QPs.
//!
//! - [`sock`]: the stream socket, its CM ID and the events that connect and disconnect it;
//! - [`data`]: the QP's buffers, credits and IO maps;
//! - [`opts`]: `rsetsockopt`, `rgetsockopt`, `rfcntl`;
//! - [`wait`]: `rpoll`, `rselect` and the waits of blocking calls;
//! - [`dgram`]: datagram rsockets (SOCK_DGRAM).
//!
//! IPv4 only (the CM's addresses); `repoll_*` stays unsupported (EOPNOTSUPP).

use std::ffi::{c_int, c_void};

use crate::errno::minus_one;

mod data;
mod dgram;
mod opts;
mod sock;
mod wait;

use sock::{Shared, Sock, State, lock, lookup};

pub use opts::{rfcntl, rgetsockopt, rsetsockopt};
pub use wait::{rpoll, rselect};

/// `SOL_RDMA` and its options (rsocket.h).
pub(crate) const SOL_RDMA: c_int = 0x10000;
pub(crate) const RDMA_SQSIZE: c_int = 0;
pub(crate) const RDMA_RQSIZE: c_int = 1;
pub(crate) const RDMA_INLINE: c_int = 2;
pub(crate) const RDMA_IOMAPSIZE: c_int = 3;
pub(crate) const RDMA_ROUTE: c_int = 4;
/// rsocket.c's RS_SNDLOWAT: the least send buffer (doubled), a datagram's slot.
pub(crate) const SNDLOWAT: usize = 2048;

/// Spins before the first sleep, and the longest sleep.
const SPINS: u32 = 200;
const MAX_SLEEP: std::time::Duration = std::time::Duration::from_millis(1);

/// Growing pauses between looks.
pub(crate) struct Backoff {
    n: u32,
    sleep: std::time::Duration,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff { n: 0, sleep: std::time::Duration::from_micros(10) }
    }

    pub(crate) fn pause(&mut self) {
        self.n += 1;
        if self.n < SPINS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.sleep);
            self.sleep = (self.sleep * 2).min(MAX_SLEEP);
        }
    }
}

/// The stream rsocket of `fd`, else Err(EBADF) (EOPNOTSUPP for a datagram rsocket: the
/// calls that reach here are the stream's alone, such as `riomap`).
fn get(fd: c_int) -> Result<Shared, c_int> {
    if dgram::lookup(fd).is_some() {
        return Err(libc::EOPNOTSUPP);
    }
    lookup(fd).ok_or(libc::EBADF)
}

/// `rsocket`: AF_INET/AF_INET6/AF_IB and SOCK_STREAM (TCP or 0), AF_INET and SOCK_DGRAM
/// (UDP or 0), as rsocket.c checks them; EOPNOTSUPP for the rest (an IPv6 or AF_IB
/// datagram socket too: the simulated ports have IPv4 addresses only).
#[unsafe(no_mangle)]
pub extern "C" fn rsocket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    let t = kind & !(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK);
    let family_ok = matches!(domain, libc::AF_INET | libc::AF_INET6 | libc::AF_IB);
    let stream = t == libc::SOCK_STREAM && (protocol == 0 || protocol == libc::IPPROTO_TCP);
    let datagram = t == libc::SOCK_DGRAM && (protocol == 0 || protocol == libc::IPPROTO_UDP);
    if family_ok && datagram && domain == libc::AF_INET {
        return dgram::create(kind);
    }
    if !family_ok || !stream {
        return minus_one(libc::EOPNOTSUPP);
    }
    match Sock::create(None, None) {
        Ok(s) => {
            let mut g = lock(&s);
            if kind & libc::SOCK_NONBLOCK != 0 {
                g.fs_flags |= libc::O_NONBLOCK;
            }
            if kind & libc::SOCK_CLOEXEC != 0 {
                g.fd_flags = libc::FD_CLOEXEC;
            }
            g.fd
        }
        Err(e) => minus_one(e),
    }
}

/// `rbind`: the CM ID bound (rdma_bind_addr's errors: EADDRINUSE, EINVAL...).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rbind(socket: c_int, addr: *const libc::sockaddr, addrlen: libc::socklen_t) -> c_int {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's address.
        return unsafe { dgram::bind(&d, addr, addrlen) };
    }
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return minus_one(e),
    };
    let mut g = lock(&s);
    if addr.is_null() || (addrlen as usize) < std::mem::size_of::<libc::sockaddr_in>() {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: our ID; the caller's address (rdma_bind_addr only reads it).
    let r = unsafe { crate::cm::rdma_bind_addr(g.id, addr.cast_mut()) };
    if r == 0 {
        g.state = State::Bound;
    }
    r
}

/// `rlisten`: the ID listens; its requests wait for `raccept`.
#[unsafe(no_mangle)]
pub extern "C" fn rlisten(socket: c_int, backlog: c_int) -> c_int {
    if dgram::lookup(socket).is_some() {
        return minus_one(libc::EOPNOTSUPP);
    }
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return minus_one(e),
    };
    let mut g = lock(&s);
    if g.state == State::Listening {
        return 0;
    }
    if !matches!(g.state, State::Init | State::Bound) {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: our ID.
    let r = unsafe { crate::cm::rdma_listen(g.id, backlog) };
    if r == 0 {
        g.state = State::Listening;
    }
    r
}

/// Write `addr` (an IPv4 socket address) to the caller's buffer as getsockname does: at
/// most `*len` bytes, and the full length back.
///
/// # Safety
/// `out`/`len` are the caller's (either may be NULL).
unsafe fn copy_addr(out: *mut libc::sockaddr, len: *mut libc::socklen_t, addr: &libc::sockaddr_in) {
    if out.is_null() || len.is_null() {
        return;
    }
    let full = std::mem::size_of::<libc::sockaddr_in>();
    // SAFETY: the caller's buffer of *len bytes.
    unsafe {
        let n = (*len as usize).min(full);
        std::ptr::copy_nonoverlapping((addr as *const libc::sockaddr_in).cast::<u8>(), out.cast::<u8>(), n);
        *len = full as libc::socklen_t;
    }
}

/// The local (`peer` false) or remote address of an rsocket's ID.
fn addr_of(g: &Sock, peer: bool) -> libc::sockaddr_in {
    if g.state == State::Closed {
        // SAFETY: plain data (a socket another thread closed has no ID left).
        return unsafe { std::mem::zeroed() };
    }
    // SAFETY: our ID; the CM writes IPv4 addresses into its route.
    unsafe {
        let a = &(*g.id).route.addr;
        if peer {
            std::mem::transmute_copy(&a.dst_addr_union.dst_sin)
        } else {
            std::mem::transmute_copy(&a.src_addr_union.src_sin)
        }
    }
}

/// `raccept`: the next connection request, accepted on a new rsocket (the listener's
/// options); EBADF on a socket that does not listen (as rsocket.c), EAGAIN for none yet
/// on a non-blocking listener.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn raccept(socket: c_int, addr: *mut libc::sockaddr, addrlen: *mut libc::socklen_t) -> c_int {
    if dgram::lookup(socket).is_some() {
        return minus_one(libc::EOPNOTSUPP);
    }
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return minus_one(e),
    };
    let r = wait::until(&s, 0, |g| g.state != State::Listening || !g.backlog.is_empty());
    let mut g = lock(&s);
    if g.state != State::Listening {
        return minus_one(libc::EBADF);
    }
    if let Err(e) = r {
        return minus_one(e);
    }
    let Some((id, pdata)) = g.backlog.pop_front() else { return minus_one(libc::EAGAIN) };
    let new = match Sock::create(Some(id), Some(&g)) {
        Ok(n) => n,
        Err(e) => {
            // SAFETY: the request's ID, never handed out.
            unsafe {
                crate::cm::rdma_reject(id, std::ptr::null(), 0);
                crate::cm::rdma_destroy_id(id);
            }
            return minus_one(e);
        }
    };
    drop(g);
    let mut n = lock(&new);
    if let Err(e) = n.accept(&pdata) {
        // SAFETY: as above.
        unsafe { crate::cm::rdma_reject(n.id, std::ptr::null(), 0) };
        n.destroy();
        return minus_one(e);
    }
    // SAFETY: the caller's buffers.
    unsafe { copy_addr(addr, addrlen, &addr_of(&n, true)) };
    n.fd
}

/// `rconnect`: resolve, connect and (blocking) wait for the connection; a non-blocking
/// socket answers EINPROGRESS and connects while it is polled. 0 on a connected socket
/// (as rsocket.c), ENOTCONN after a failed attempt, EINVAL on a listener.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rconnect(socket: c_int, addr: *const libc::sockaddr, addrlen: libc::socklen_t) -> c_int {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's address.
        return unsafe { dgram::connect(&d, addr, addrlen) };
    }
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return minus_one(e),
    };
    {
        let mut g = lock(&s);
        match g.state {
            State::Init | State::Bound => {
                if addr.is_null() || (addrlen as usize) < std::mem::size_of::<libc::sockaddr_in>() {
                    return minus_one(libc::EINVAL);
                }
                // SAFETY: the caller's address, of at least a sockaddr_in.
                let mut dst: libc::sockaddr_in = unsafe { std::ptr::read_unaligned(addr.cast()) };
                if i32::from(dst.sin_family) != libc::AF_INET {
                    return minus_one(libc::EAFNOSUPPORT);
                }
                if let Err(e) = g.start_connect(&mut dst) {
                    return minus_one(e);
                }
            }
            State::Connected => return 0,
            State::Listening => return minus_one(libc::EINVAL),
            State::ConnectError | State::Disconnected => return minus_one(libc::ENOTCONN),
            _ => {}
        }
    }
    finish_connect(&s, 0)
}

/// Drive a connection under way: 0 once up, EINPROGRESS (non-blocking) while not, the
/// failure's errno (taken from SO_ERROR) if it failed.
fn finish_connect(s: &Shared, flags: c_int) -> c_int {
    let r = wait::until(s, flags, |g| !g.opening());
    let mut g = lock(s);
    match (r, g.state) {
        (_, State::Connected) => 0,
        (_, State::ConnectError) => {
            let e = std::mem::take(&mut g.err);
            minus_one(if e == 0 { libc::ENOTCONN } else { e })
        }
        (Err(_), _) => minus_one(libc::EINPROGRESS),
        _ => minus_one(libc::ENOTCONN),
    }
}

/// Before a data call: a connection under way is driven on (EAGAIN while not up, as
/// rsocket.c turns EINPROGRESS); a socket never connected is ENOTCONN.
fn ready(s: &Shared, flags: c_int) -> Result<(), c_int> {
    if lock(s).opening() {
        let r = finish_connect(s, flags);
        if r != 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOTCONN);
            return Err(if e == libc::EINPROGRESS { libc::EAGAIN } else { e });
        }
    }
    if lock(s).connected() { Ok(()) } else { Err(libc::ENOTCONN) }
}

/// The checks before moving bytes: the socket (EBADF), its connection (driven on if under
/// way: [`ready`]), a buffer (EFAULT). Ok(None) when there are no bytes to move.
fn io_start(socket: c_int, flags: c_int, len: usize, null: bool) -> Result<Option<Shared>, c_int> {
    let s = get(socket)?;
    ready(&s, flags)?;
    if len == 0 {
        return Ok(None);
    }
    if null {
        return Err(libc::EFAULT);
    }
    Ok(Some(s))
}

/// `rrecv`: the bytes received (MSG_PEEK leaves them; MSG_WAITALL waits for all on a
/// blocking call), 0 at the end of the stream, EAGAIN when none wait and the call may
/// not block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rrecv(socket: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's buffer.
        return unsafe { dgram::recvfrom(&d, buf, len, flags, std::ptr::null_mut(), std::ptr::null_mut()) };
    }
    let s = match io_start(socket, flags, len, buf.is_null()) {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(e) => return minus_one(e) as isize,
    };
    // SAFETY: the caller's buffer of `len` bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
    let peek = flags & libc::MSG_PEEK != 0;
    let all = flags & libc::MSG_WAITALL != 0 && !peek;
    let mut n = 0;
    loop {
        let r = wait::until(&s, flags, |g| !g.readable || g.conn.as_ref().is_none_or(|c| c.readable()));
        let mut g = lock(&s);
        if !g.readable {
            return n as isize;
        }
        let Some(c) = g.conn.as_mut() else { return n as isize };
        n += c.read(&mut out[n..], peek);
        let end = c.eof || c.broken;
        if n == len || (n > 0 && !all) || end {
            return n as isize;
        }
        if r.is_err() {
            return if n > 0 { n as isize } else { minus_one(libc::EAGAIN) as isize };
        }
    }
}

/// `rsend`: the bytes sent (all of them on a blocking call), EAGAIN when no credit
/// allows a byte and the call may not block, ECONNRESET once the connection is gone or
/// this side shut its writing (as rsocket.c).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsend(socket: c_int, buf: *const c_void, len: usize, flags: c_int) -> isize {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's bytes.
        return unsafe { dgram::sendto(&d, buf, len, flags, None) };
    }
    let s = match io_start(socket, flags, len, buf.is_null()) {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(e) => return minus_one(e) as isize,
    };
    // SAFETY: the caller's bytes.
    let data = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
    let mut n = 0;
    loop {
        let r = wait::until(&s, flags, |g| sendable(g) != Some(false));
        let mut g = lock(&s);
        if sendable(&g).is_none() {
            return if n > 0 { n as isize } else { minus_one(libc::ECONNRESET) as isize };
        }
        let Some(c) = g.conn.as_mut() else { return minus_one(libc::ENOTCONN) as isize };
        match c.send_maps().and_then(|_| c.write(&data[n..])) {
            Ok(k) => n += k,
            Err(e) => return if n > 0 { n as isize } else { minus_one(e) as isize },
        }
        if n == len {
            return n as isize;
        }
        if r.is_err() {
            return if n > 0 { n as isize } else { minus_one(libc::EAGAIN) as isize };
        }
    }
}

/// Some(whether a data message may go now), None when the socket can send no more.
fn sendable(g: &Sock) -> Option<bool> {
    let c = g.conn.as_ref()?;
    if !g.writable || g.state != State::Connected || c.broken {
        return None;
    }
    Some(c.can_send())
}

/// `rshutdown`: SHUT_WR sends the end of stream in order after the data; SHUT_RDWR (or
/// the second half) also waits for the sends to complete and disconnects. 0 on a socket
/// that is not connected (as rsocket.c); EINVAL for another `how`.
#[unsafe(no_mangle)]
pub extern "C" fn rshutdown(socket: c_int, how: c_int) -> c_int {
    let known = matches!(how, libc::SHUT_RD | libc::SHUT_WR | libc::SHUT_RDWR);
    if dgram::lookup(socket).is_some() {
        // A datagram socket is never connected in rsocket.c's sense: nothing to shut.
        return if known { 0 } else { minus_one(libc::EINVAL) };
    }
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return minus_one(e),
    };
    if !known {
        return minus_one(libc::EINVAL);
    }
    shutdown(&s, how);
    0
}

fn shutdown(s: &Shared, how: c_int) {
    let disconnect = {
        let mut g = lock(s);
        if g.state != State::Connected {
            return;
        }
        let was_writable = g.writable;
        if how != libc::SHUT_WR {
            g.readable = false;
        }
        if how != libc::SHUT_RD {
            g.writable = false;
        }
        if how == libc::SHUT_RD && g.writable {
            return;
        }
        if was_writable {
            drop(g);
            // The end of stream needs a credit: wait a little for one.
            let _ = wait::for_a_while(s, |g| g.conn.as_mut().is_none_or(|c| c.shutdown()));
            g = lock(s);
        }
        !g.readable && !g.writable
    };
    if disconnect {
        let _ = wait::for_a_while(s, |g| g.conn.as_ref().is_none_or(|c| c.sends_done()) || g.state != State::Connected);
        let mut g = lock(s);
        if g.state == State::Connected {
            // SAFETY: our ID.
            unsafe { crate::cm::rdma_disconnect(g.id) };
            g.state = State::Disconnected;
        }
    }
}

/// `rclose`: shut down (both ways) if connected, then free the socket and its fd.
#[unsafe(no_mangle)]
pub extern "C" fn rclose(socket: c_int) -> c_int {
    if let Some(d) = dgram::lookup(socket) {
        return dgram::close(&d);
    }
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return minus_one(e),
    };
    shutdown(&s, libc::SHUT_RDWR);
    lock(&s).destroy();
    0
}

/// `rrecvfrom`: a datagram and its source; on a stream socket `rrecv`, and the peer's
/// address when bytes came (as rsocket.c).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rrecvfrom(
    socket: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    src_addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) -> isize {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's buffers.
        return unsafe { dgram::recvfrom(&d, buf, len, flags, src_addr, addrlen) };
    }
    // SAFETY: the caller's arguments, passed on.
    let n = unsafe { rrecv(socket, buf, len, flags) };
    if n > 0 && !src_addr.is_null() {
        // SAFETY: the caller's buffers.
        unsafe { rgetpeername(socket, src_addr, addrlen) };
    }
    n
}

/// `rsendto`: a datagram to `dest_addr`; on a stream socket `rsend`, EISCONN if an address
/// is given (as rsocket.c, connected or not).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsendto(
    socket: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    dest_addr: *const libc::sockaddr,
    addrlen: libc::socklen_t,
) -> isize {
    if let Some(d) = dgram::lookup(socket) {
        let dst = (!dest_addr.is_null()).then_some((dest_addr, addrlen));
        // SAFETY: the caller's bytes and address.
        return unsafe { dgram::sendto(&d, buf, len, flags, dst) };
    }
    if !dest_addr.is_null() || addrlen != 0 {
        return minus_one(if lookup(socket).is_some() { libc::EISCONN } else { libc::EBADF }) as isize;
    }
    // SAFETY: as above.
    unsafe { rsend(socket, buf, len, flags) }
}

/// `rread`: `rrecv` without flags.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rread(socket: c_int, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: as above.
    unsafe { rrecv(socket, buf, count, 0) }
}

/// `rwrite`: `rsend` without flags.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rwrite(socket: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: as above.
    unsafe { rsend(socket, buf, count, 0) }
}

/// Run `one` over each buffer of an iovec until one comes back short: the total.
///
/// # Safety
/// `iov` holds `iovcnt` of the caller's buffers.
unsafe fn vectored(iov: *const libc::iovec, iovcnt: c_int, mut one: impl FnMut(*mut c_void, usize) -> isize) -> isize {
    if iovcnt < 0 || (iov.is_null() && iovcnt > 0) {
        return minus_one(libc::EINVAL) as isize;
    }
    let mut total = 0isize;
    for k in 0..iovcnt as usize {
        // SAFETY: the caller's array.
        let v = unsafe { *iov.add(k) };
        if v.iov_len == 0 {
            continue;
        }
        let r = one(v.iov_base, v.iov_len);
        if r < 0 {
            return if total > 0 { total } else { r };
        }
        total += r;
        if (r as usize) < v.iov_len {
            break;
        }
    }
    total
}

/// `rreadv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rreadv(socket: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's buffers.
        return unsafe { dgram::recvv(&d, iov, iovcnt, 0, std::ptr::null_mut(), std::ptr::null_mut()) };
    }
    // SAFETY: the caller's buffers.
    unsafe { vectored(iov, iovcnt, |b, l| rrecv(socket, b, l, 0)) }
}

/// `rwritev`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rwritev(socket: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's buffers.
        return unsafe { dgram::sendv(&d, iov, iovcnt, 0, std::ptr::null(), 0) };
    }
    // SAFETY: the caller's buffers.
    unsafe { vectored(iov, iovcnt, |b, l| rsend(socket, b, l, 0)) }
}

/// `rrecvmsg`: into the message's iovec (no control data, no address).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rrecvmsg(socket: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
    if msg.is_null() {
        return minus_one(libc::EINVAL) as isize;
    }
    // SAFETY: the caller's message.
    unsafe {
        (*msg).msg_controllen = 0;
        (*msg).msg_flags = 0;
        let n = (*msg).msg_iovlen as c_int;
        if let Some(d) = dgram::lookup(socket) {
            let m = &mut *msg;
            let name = m.msg_name.cast::<libc::sockaddr>();
            let len = if name.is_null() { std::ptr::null_mut() } else { &raw mut m.msg_namelen };
            return dgram::recvv(&d, m.msg_iov, n, flags, name, len);
        }
        vectored((*msg).msg_iov, n, |b, l| rrecv(socket, b, l, flags))
    }
}

/// `rsendmsg`: the message's iovec (control data is refused: EOPNOTSUPP).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsendmsg(socket: c_int, msg: *const libc::msghdr, flags: c_int) -> isize {
    if msg.is_null() {
        return minus_one(libc::EINVAL) as isize;
    }
    // SAFETY: the caller's message.
    unsafe {
        if (*msg).msg_controllen != 0 {
            return minus_one(libc::EOPNOTSUPP) as isize;
        }
        let n = (*msg).msg_iovlen as c_int;
        if let Some(d) = dgram::lookup(socket) {
            let m = &*msg;
            return dgram::sendv(&d, m.msg_iov, n, flags, m.msg_name.cast(), m.msg_namelen);
        }
        vectored((*msg).msg_iov, n, |b, l| rsend(socket, b, l, flags))
    }
}

/// `rgetsockname`: the ID's local address.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rgetsockname(
    socket: c_int,
    addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) -> c_int {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's buffers.
        return unsafe { dgram::name(&d, false, addr, addrlen) };
    }
    match get(socket) {
        // SAFETY: the caller's buffers.
        Ok(s) => unsafe { copy_addr(addr, addrlen, &addr_of(&lock(&s), false)) },
        Err(e) => return minus_one(e),
    }
    0
}

/// `rgetpeername`: the ID's remote address (zero before a connection, as rsocket.c gives
/// what the ID holds).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rgetpeername(
    socket: c_int,
    addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) -> c_int {
    if let Some(d) = dgram::lookup(socket) {
        // SAFETY: the caller's buffers.
        return unsafe { dgram::name(&d, true, addr, addrlen) };
    }
    match get(socket) {
        // SAFETY: the caller's buffers.
        Ok(s) => unsafe { copy_addr(addr, addrlen, &addr_of(&lock(&s), true)) },
        Err(e) => return minus_one(e),
    }
    0
}

/// `riomap`: register `len` bytes at `buf` for the peer to write at `offset` (PROT_WRITE;
/// -1 picks the address as offset), or for local use (PROT_NONE). EINVAL before a
/// connection or for other `prot` bits, ENOMEM past RDMA_IOMAPSIZE maps.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn riomap(
    socket: c_int,
    buf: *mut c_void,
    len: usize,
    prot: c_int,
    _flags: c_int,
    offset: i64,
) -> i64 {
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return i64::from(minus_one(e)),
    };
    let mut g = lock(&s);
    if g.state == State::Closed {
        return i64::from(minus_one(libc::EBADF));
    }
    // SAFETY: our ID.
    let pd = unsafe { (*g.id).pd };
    if prot & !(libc::PROT_WRITE | libc::PROT_NONE) != 0 {
        return i64::from(minus_one(libc::EINVAL));
    }
    let Some(c) = g.conn.as_mut().filter(|_| !pd.is_null()) else { return i64::from(minus_one(libc::EINVAL)) };
    // SAFETY: the connection's PD and the caller's buffer.
    match unsafe { c.map(pd, buf as usize, len, prot & libc::PROT_WRITE != 0, offset) } {
        Ok(o) => o,
        Err(e) => i64::from(minus_one(e)),
    }
}

/// `riounmap`: EINVAL for a buffer not mapped with this address and length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn riounmap(socket: c_int, buf: *mut c_void, len: usize) -> c_int {
    let s = match get(socket) {
        Ok(s) => s,
        Err(e) => return minus_one(e),
    };
    let mut g = lock(&s);
    if g.conn.as_mut().is_some_and(|c| c.unmap(buf as usize, len)) { 0 } else { minus_one(libc::EINVAL) }
}

/// `riowrite`: RDMA WRITE `count` bytes into the peer's map at `offset`, after the maps
/// and data sent before: the count written (0 when the peer maps nothing there, as
/// rsocket.c).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn riowrite(socket: c_int, buf: *const c_void, count: usize, offset: i64, flags: c_int) -> usize {
    let s = match io_start(socket, flags, count, buf.is_null()) {
        Ok(Some(s)) => s,
        Ok(None) => return 0,
        Err(e) => return minus_one(e) as usize,
    };
    // SAFETY: the caller's bytes.
    let data = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count) };
    let mut n = 0;
    loop {
        let r = wait::until(&s, flags, |g| sendable(g).is_none() || g.conn.as_ref().is_some_and(|c| c.can_write()));
        let mut g = lock(&s);
        if sendable(&g).is_none() {
            return if n > 0 { n } else { minus_one(libc::ECONNRESET) as usize };
        }
        let Some(c) = g.conn.as_mut() else { return minus_one(libc::ENOTCONN) as usize };
        match c.send_maps().and_then(|_| c.iowrite(&data[n..], (offset as u64).wrapping_add(n as u64))) {
            Ok(Some(k)) => n += k,
            Ok(None) => return n,
            Err(e) => return if n > 0 { n } else { minus_one(e) as usize },
        }
        if n == count {
            return n;
        }
        if r.is_err() {
            return if n > 0 { n } else { minus_one(libc::EAGAIN) as usize };
        }
    }
}
