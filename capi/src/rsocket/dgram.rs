//! Datagram rsockets (SOCK_DGRAM), as rsocket.c makes them: the rsocket's fd is a real UDP
//! socket, and each local address the socket sends from has a UD QP (in the CM's UDP port
//! space, bound to that address and the UDP socket's port). A destination gets an address
//! handle once its QP number is known; until then a message goes through the UDP socket
//! with a header naming the sender's QP, and the receiver answers with its own QP number
//! (a CTRL message), makes an address handle back, and hands the message to its program
//! through its own QP (a SEND to itself). Each message on a QP leads with the sender's
//! address, which `rrecvfrom` gives back.
//!
//! What rsocket.c's service thread does with the UDP socket happens here in the socket's
//! own calls (and `rpoll`): a program that never calls into a socket leaves its UDP
//! messages waiting. The UDP socket is bound to this host's simulated address (the CM's
//! answer for the destination) before its first message, where rsocket.c lets the kernel
//! pick the source: a simulated host's UDP traffic stays on its own 127.x address.

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rdma_sys::ibv_ah;

use crate::errno::minus_one;

mod opts;
mod qp;

use mlx5_sim::wire::rsocket_dgram::{DS_HDR_LEN, DsHdr, OP_CTRL, OP_DATA, SLOT, UDP_HDR_LEN, UdpHdr};
pub(crate) use opts::{get_opt, kernel_setsockopt, set_opt, with_flags};
use qp::{DsQp, Rmsg, from_sockaddr, sockaddr, source_ip};

/// rsocket.c's defaults: queue depths and buffer sizes (bytes) before they are fitted to
/// each other (a slot of [`SLOT`] bytes a message).
const DEFAULT_QUEUE: usize = 384;
const DEFAULT_MEM: usize = 1 << 17;
const MAX_QUEUE: usize = 0xfffe;
/// UDP messages taken in one step.
const UDP_BATCH: usize = 64;

/// A destination: the QP that sends to it, and its address handle and QP number once known.
struct Dest {
    qp: usize,
    ah: *mut ibv_ah,
    qpn: u32,
}

/// One datagram rsocket.
pub(crate) struct Ds {
    /// The UDP socket (also the rsocket's fd).
    pub(crate) fd: c_int,
    pub(crate) fs_flags: c_int,
    pub(crate) fd_flags: c_int,
    /// Bound, connected or sent from: readable and writable (rsocket.c's ds_init_ep).
    ready: bool,
    closed: bool,
    pub(crate) rcvbuf: usize,
    pub(crate) sndbuf: usize,
    pub(crate) sq: usize,
    pub(crate) rq: usize,
    pub(crate) inline: usize,
    /// On/off options kept as (level, name) -> value.
    pub(crate) flags: HashMap<(c_int, c_int), c_int>,
    qps: Vec<DsQp>,
    dests: HashMap<SocketAddrV4, Dest>,
    /// Where `rsend` goes: the connected address, or the last `rsendto`'s (as rsocket.c).
    cur: Option<SocketAddrV4>,
    recvd: VecDeque<(usize, Rmsg)>,
}

// SAFETY: the raw pointers are the shim's verbs objects; a Ds is used under its mutex.
unsafe impl Send for Ds {}

type Shared = Arc<Mutex<Ds>>;

fn table() -> MutexGuard<'static, HashMap<c_int, Shared>> {
    static T: OnceLock<Mutex<HashMap<c_int, Shared>>> = OnceLock::new();
    T.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// The datagram rsocket of `fd`, if it is one.
pub(crate) fn lookup(fd: c_int) -> Option<Shared> {
    table().get(&fd).cloned()
}

fn lock(s: &Shared) -> MutexGuard<'_, Ds> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Run `step` until it is not EAGAIN, making progress between tries while the call may
/// block (O_NONBLOCK or MSG_DONTWAIT say it may not).
fn retry<T>(s: &Shared, flags: c_int, mut step: impl FnMut(&mut Ds) -> Result<T, c_int>) -> Result<T, c_int> {
    let mut b = super::Backoff::new();
    loop {
        {
            let mut g = lock(s);
            if g.closed {
                return Err(libc::EBADF);
            }
            g.progress();
            match step(&mut g) {
                Err(libc::EAGAIN) if g.blocking(flags) => {}
                Err(libc::EAGAIN) => {
                    drop(g);
                    // A program that spins on EAGAIN leaves the core to the device thread
                    // for a moment: on a busy machine it would otherwise wait a time slice.
                    std::thread::yield_now();
                    return Err(libc::EAGAIN);
                }
                r => return r,
            }
        }
        b.pause();
    }
}

/// `rsocket(AF_INET, SOCK_DGRAM, ...)`: a UDP socket and the rsocket on it.
pub(crate) fn create(kind: c_int) -> c_int {
    let cloexec = if kind & libc::SOCK_CLOEXEC != 0 { libc::SOCK_CLOEXEC } else { 0 };
    // SAFETY: no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | cloexec, 0) };
    if fd < 0 {
        return -1;
    }
    let d = Ds {
        fd,
        fs_flags: if kind & libc::SOCK_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 },
        fd_flags: if cloexec != 0 { libc::FD_CLOEXEC } else { 0 },
        ready: false,
        closed: false,
        rcvbuf: DEFAULT_MEM,
        sndbuf: DEFAULT_MEM,
        sq: DEFAULT_QUEUE,
        rq: DEFAULT_QUEUE,
        inline: 64,
        flags: HashMap::new(),
        qps: Vec::new(),
        dests: HashMap::new(),
        cur: None,
        recvd: VecDeque::new(),
    };
    table().insert(fd, Arc::new(Mutex::new(d)));
    fd
}

impl Ds {
    fn blocking(&self, flags: c_int) -> bool {
        self.fs_flags & libc::O_NONBLOCK == 0 && flags & libc::MSG_DONTWAIT == 0
    }

    /// Fit the queue depths and buffer sizes to each other (rsocket.c's ds_set_qp_size),
    /// once: the socket becomes readable and writable.
    fn init(&mut self) {
        if self.ready {
            return;
        }
        self.sq = self.sq.min(MAX_QUEUE);
        self.rq = self.rq.min(MAX_QUEUE);
        if self.rq > self.rcvbuf / SLOT {
            self.rq = self.rcvbuf / SLOT;
        } else {
            self.rcvbuf = self.rq * SLOT;
        }
        if self.sq > self.sndbuf / SLOT {
            self.sq = self.sndbuf / SLOT;
        } else {
            self.sndbuf = self.sq * SLOT;
        }
        self.sq = self.sq.max(1);
        self.rq = self.rq.max(1);
        self.ready = true;
    }

    /// Whether the socket was bound, connected or sent from (its sizes are fixed).
    pub(crate) fn started(&self) -> bool {
        self.ready
    }

    /// Whether a QP exists (the receive buffer's size is fixed then).
    pub(crate) fn has_qps(&self) -> bool {
        !self.qps.is_empty()
    }

    fn local(&self) -> Result<SocketAddrV4, c_int> {
        // SAFETY: plain data; our socket.
        let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `a` holds `len` bytes.
        if unsafe { libc::getsockname(self.fd, (&mut a as *mut libc::sockaddr_in).cast(), &mut len) } != 0 {
            return Err(errno());
        }
        Ok(from_sockaddr(&a))
    }

    /// The address a QP sending to `dst` stands for: the UDP socket's, bound first to this
    /// host's address if it is not bound, with this host's IP if bound to the wildcard.
    fn source_for(&mut self, dst: SocketAddrV4) -> Result<SocketAddrV4, c_int> {
        let mut l = self.local()?;
        if l.port() == 0 {
            let a = sockaddr(SocketAddrV4::new(source_ip(dst)?, 0));
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            // SAFETY: our socket; `a` is a sockaddr_in.
            if unsafe { libc::bind(self.fd, (&a as *const libc::sockaddr_in).cast(), len) } != 0 {
                return Err(errno());
            }
            l = self.local()?;
        }
        if l.ip().is_unspecified() {
            l.set_ip(source_ip(dst)?);
        }
        Ok(l)
    }

    /// The destination `dst`, made with a QP for its source address if new
    /// (rsocket.c's ds_get_dest).
    fn dest(&mut self, dst: SocketAddrV4) -> Result<&mut Dest, c_int> {
        if !self.dests.contains_key(&dst) {
            let src = self.source_for(dst)?;
            let qp = match self.qps.iter().position(|q| q.src == src) {
                Some(i) => i,
                None => {
                    self.qps.push(DsQp::new(src, self.sq, self.rq, self.inline)?);
                    self.qps.len() - 1
                }
            };
            self.dests.insert(dst, Dest { qp, ah: std::ptr::null_mut(), qpn: 0 });
        }
        self.dests.get_mut(&dst).ok_or(libc::EINVAL)
    }

    /// Send `data` through the UDP socket to `dst` after a header naming QP `qp`: the
    /// data's length.
    fn send_udp(&self, dst: SocketAddrV4, qp: usize, op: u8, data: &[u8]) -> Result<usize, c_int> {
        let q = self.qps.get(qp).ok_or(libc::EINVAL)?;
        let hdr = UdpHdr { op, qpn: q.qpn, ip: *q.src.ip() }.encode();
        let mut iov = [
            libc::iovec { iov_base: hdr.as_ptr() as *mut c_void, iov_len: hdr.len() },
            libc::iovec { iov_base: data.as_ptr() as *mut c_void, iov_len: data.len() },
        ];
        let mut to = sockaddr(dst);
        // SAFETY: plain data.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_name = (&mut to as *mut libc::sockaddr_in).cast();
        m.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        m.msg_iov = iov.as_mut_ptr();
        m.msg_iovlen = 2;
        // SAFETY: our socket; the message's buffers live across the call.
        let n = unsafe { libc::sendmsg(self.fd, &m, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(errno());
        }
        Ok((n as usize).saturating_sub(UDP_HDR_LEN))
    }

    /// One try at sending `data` to `dst` (its destination made): through its QP when the
    /// address handle is known, else through the UDP socket. EMSGSIZE past a slot or the
    /// path's MTU; EAGAIN with no free send slot.
    fn send_to(&mut self, dst: SocketAddrV4, data: &[u8]) -> Result<usize, c_int> {
        let (qi, ah, qpn) = {
            let d = self.dest(dst)?;
            (d.qp, d.ah, d.qpn)
        };
        let q = self.qps.get_mut(qi).ok_or(libc::EINVAL)?;
        if data.len() > q.max_data {
            return Err(libc::EMSGSIZE);
        }
        if ah.is_null() {
            return self.send_udp(dst, qi, OP_DATA, data);
        }
        let hdr = DsHdr(q.src);
        q.send(Some(ah), qpn, &hdr, data)?;
        Ok(data.len())
    }

    /// Take in what came: UDP messages (answered, and their data passed through this side's
    /// QP), then each QP's completions.
    fn progress(&mut self) {
        if self.closed {
            return;
        }
        self.read_udp();
        self.poll_cqs();
    }

    fn poll_cqs(&mut self) {
        let recvd = &mut self.recvd;
        for (i, q) in self.qps.iter_mut().enumerate() {
            q.poll(|m| recvd.push_back((i, m)));
        }
    }

    fn read_udp(&mut self) {
        let mut buf = [0u8; UDP_HDR_LEN + SLOT];
        for _ in 0..UDP_BATCH {
            // SAFETY: plain data.
            let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            // SAFETY: our socket; `buf` and `from` hold the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_in).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return;
            }
            if c_int::from(from.sin_family) != libc::AF_INET {
                continue;
            }
            let Some(h) = UdpHdr::decode(&buf[..n as usize]) else { continue };
            self.on_udp(from_sockaddr(&from), h, &buf[UDP_HDR_LEN..n as usize]);
        }
    }

    /// A UDP message from `from`: answer a DATA with this side's QP number, make (or
    /// remake) the address handle to the sender's QP, and deliver the data through this
    /// side's QP to itself, with the sender's address as its header.
    fn on_udp(&mut self, from: SocketAddrV4, h: UdpHdr, data: &[u8]) {
        let Ok(d) = self.dest(from) else { return };
        let (qi, ah, qpn) = (d.qp, d.ah, d.qpn);
        if h.op == OP_DATA {
            let _ = self.send_udp(from, qi, OP_CTRL, &[]);
        }
        if ah.is_null() || qpn != h.qpn {
            let Some(q) = self.qps.get(qi) else { return };
            let made = q.ah_to(from).ok();
            if let Some(d) = self.dests.get_mut(&from) {
                if !d.ah.is_null() {
                    // SAFETY: our address handle, replaced.
                    unsafe { crate::ah::ibv_destroy_ah(d.ah) };
                    d.ah = std::ptr::null_mut();
                }
                if let Some((ah, _)) = made {
                    (d.ah, d.qpn) = (ah, h.qpn);
                }
            }
        }
        if h.op != OP_DATA {
            return;
        }
        if self.qps.get(qi).is_some_and(|q| !q.can_send()) {
            self.poll_cqs();
        }
        if let Some(q) = self.qps.get_mut(qi).filter(|q| data.len() <= q.max_data) {
            let own = q.qpn;
            // A datagram with no room is dropped, as rsocket.c's forward gives up.
            let _ = q.send(None, own, &DsHdr(from), data);
        }
    }

    /// Copy the next message (kept with MSG_PEEK) into `out`: its length there and its
    /// source. EAGAIN when none waits.
    fn take(&mut self, out: &mut [u8], peek: bool) -> Result<(usize, SocketAddrV4), c_int> {
        loop {
            let Some((qi, m)) = self.recvd.front() else { return Err(libc::EAGAIN) };
            let (qi, slot, len) = (*qi, m.slot, m.len);
            let Some(q) = self.qps.get_mut(qi) else {
                self.recvd.pop_front();
                continue;
            };
            let b = q.data(slot, len);
            // Checked when it came; a slot that no longer reads as one is dropped.
            let (Some(DsHdr(src)), Some(body)) = (DsHdr::decode(b), b.get(DS_HDR_LEN..)) else {
                q.repost(slot);
                self.recvd.pop_front();
                continue;
            };
            let n = body.len().min(out.len());
            out[..n].copy_from_slice(&body[..n]);
            if !peek {
                q.repost(slot);
                self.recvd.pop_front();
            }
            return Ok((n, src));
        }
    }

    /// Wait a little for the sends under way, then free everything.
    fn destroy(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        for d in self.dests.values_mut() {
            if !d.ah.is_null() {
                // SAFETY: our address handle.
                unsafe { crate::ah::ibv_destroy_ah(d.ah) };
                d.ah = std::ptr::null_mut();
            }
        }
        self.dests.clear();
        self.recvd.clear();
        for q in &mut self.qps {
            q.destroy();
        }
        self.qps.clear();
        // SAFETY: our socket.
        unsafe { libc::close(self.fd) };
        table().remove(&self.fd);
    }
}

/// The IPv4 address the caller gives: Err(EINVAL) for a short or NULL one,
/// Err(EAFNOSUPPORT) for another family.
///
/// # Safety
/// `addr` is NULL or `len` readable bytes.
unsafe fn addr_in(addr: *const libc::sockaddr, len: libc::socklen_t) -> Result<SocketAddrV4, c_int> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sockaddr_in>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's address of at least a sockaddr_in.
    let a: libc::sockaddr_in = unsafe { std::ptr::read_unaligned(addr.cast()) };
    if c_int::from(a.sin_family) != libc::AF_INET {
        return Err(libc::EAFNOSUPPORT);
    }
    Ok(from_sockaddr(&a))
}

/// `rbind`: the UDP socket bound (the kernel's answer: EADDRINUSE, EINVAL...).
///
/// # Safety
/// `addr` is NULL or `len` readable bytes.
pub(crate) unsafe fn bind(s: &Shared, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int {
    let mut g = lock(s);
    g.init();
    // SAFETY: the caller's address, passed on.
    unsafe { libc::bind(g.fd, addr, len) }
}

/// `rconnect`: the UDP socket connected, and the destination made for `rsend`.
///
/// # Safety
/// `addr` is NULL or `len` readable bytes.
pub(crate) unsafe fn connect(s: &Shared, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int {
    let mut g = lock(s);
    g.init();
    // SAFETY: as bind.
    let dst = match unsafe { addr_in(addr, len) } {
        Ok(d) => d,
        Err(e) => return minus_one(e),
    };
    // The source is bound first, so that the kernel does not pick one of its own.
    if let Err(e) = g.source_for(dst) {
        return minus_one(e);
    }
    // SAFETY: as above.
    if unsafe { libc::connect(g.fd, addr, len) } != 0 {
        return -1;
    }
    match g.dest(dst) {
        Ok(_) => {
            g.cur = Some(dst);
            0
        }
        Err(e) => minus_one(e),
    }
}

/// `rsend`/`rsendto`: one datagram to `dst` (else the current destination). EDESTADDRREQ
/// with none (rsocket.c dereferences NULL), EFAULT for a NULL buffer, EMSGSIZE past what one
/// message carries, EAGAIN with no free send slot on a call that may not block.
///
/// # Safety
/// `buf` is NULL or `len` readable bytes; `dst` as for [`addr_in`].
pub(crate) unsafe fn sendto(
    s: &Shared,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    dst: Option<(*const libc::sockaddr, libc::socklen_t)>,
) -> isize {
    let to = match dst {
        // SAFETY: the caller's address.
        Some((a, l)) => match unsafe { addr_in(a, l) } {
            Ok(d) => Some(d),
            Err(e) => return minus_one(e) as isize,
        },
        None => None,
    };
    let data = if len == 0 {
        &[][..]
    } else if buf.is_null() {
        return minus_one(libc::EFAULT) as isize;
    } else {
        // SAFETY: the caller's bytes; one more than a datagram carries is enough to refuse a
        // longer one (EMSGSIZE).
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len.min(SLOT + 1)) }
    };
    let r = retry(s, flags, |g| {
        let Some(dst) = to.or(g.cur) else { return Err(libc::EDESTADDRREQ) };
        g.init();
        // The destination becomes rsend's once it is made (rsocket.c's conn_dest).
        g.dest(dst)?;
        g.cur = Some(dst);
        g.send_to(dst, data)
    });
    match r {
        Ok(n) => n as isize,
        Err(e) => minus_one(e) as isize,
    }
}

/// `rrecv`/`rrecvfrom`: the next datagram (cut to `len`, as rsocket.c), its source written
/// as rsocket.c's ds_set_src does (at most `*addrlen` bytes, `*addrlen` the length kept).
/// EINVAL before the socket was bound, connected or sent from (rsocket.c's state check);
/// EAGAIN when none waits on a call that may not block.
///
/// # Safety
/// `buf` is NULL or `len` writable bytes; `src`/`srclen` NULL or the caller's.
pub(crate) unsafe fn recvfrom(
    s: &Shared,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    src: *mut libc::sockaddr,
    srclen: *mut libc::socklen_t,
) -> isize {
    if !lock(s).ready {
        return minus_one(libc::EINVAL) as isize;
    }
    let out = if len == 0 {
        &mut [][..]
    } else if buf.is_null() {
        return minus_one(libc::EFAULT) as isize;
    } else {
        // SAFETY: the caller's buffer (no datagram is longer than a slot).
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len.min(SLOT)) }
    };
    let peek = flags & libc::MSG_PEEK != 0;
    match retry(s, flags, |g| g.take(out, peek)) {
        Ok((n, from)) => {
            if !srclen.is_null() {
                let a = sockaddr(from);
                // SAFETY: the caller's length and buffer of that many bytes.
                unsafe {
                    let k = (*srclen as usize).min(std::mem::size_of::<libc::sockaddr_in>());
                    if !src.is_null() {
                        std::ptr::copy_nonoverlapping(
                            (&a as *const libc::sockaddr_in).cast::<u8>(),
                            src.cast::<u8>(),
                            k,
                        );
                    }
                    *srclen = k as libc::socklen_t;
                }
            }
            n as isize
        }
        Err(e) => minus_one(e) as isize,
    }
}

/// `rclose`: wait (1 s at most) for the sends under way, then free the QPs and the socket.
pub(crate) fn close(s: &Shared) -> c_int {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut b = super::Backoff::new();
    while std::time::Instant::now() < end {
        let mut g = lock(s);
        g.poll_cqs();
        if g.qps.iter().all(|q| q.sends_done()) {
            break;
        }
        drop(g);
        b.pause();
    }
    lock(s).destroy();
    0
}

/// `rgetsockname` (`peer` false) and `rgetpeername`: the UDP socket's (the kernel's
/// answers, ENOTCONN for the peer of a socket not connected).
///
/// # Safety
/// `addr`/`len` are the caller's.
pub(crate) unsafe fn name(s: &Shared, peer: bool, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int {
    let fd = lock(s).fd;
    // SAFETY: the caller's buffers, passed on.
    unsafe { if peer { libc::getpeername(fd, addr, len) } else { libc::getsockname(fd, addr, len) } }
}

/// The poll events of a datagram rsocket now: POLLIN with a message waiting, POLLOUT with
/// a send slot free once the socket is ready (rsocket.c's ds_can_send).
pub(crate) fn revents(s: &Shared) -> i16 {
    let mut g = lock(s);
    g.progress();
    let mut r = 0;
    if !g.recvd.is_empty() {
        r |= libc::POLLIN;
    }
    if g.ready && (g.qps.is_empty() || g.qps.iter().any(|q| q.can_send())) {
        r |= libc::POLLOUT;
    }
    r
}

/// The iovec's buffers, checked: Err(EINVAL) for a negative count or a NULL array.
///
/// # Safety
/// `iov` holds `iovcnt` of the caller's buffers.
unsafe fn iovecs<'a>(iov: *const libc::iovec, iovcnt: c_int) -> Result<&'a [libc::iovec], c_int> {
    match (usize::try_from(iovcnt), iov.is_null()) {
        (Ok(0), _) => Ok(&[]),
        (Ok(n), false) => Ok(unsafe { std::slice::from_raw_parts(iov, n) }),
        _ => Err(libc::EINVAL),
    }
}

/// `rsendmsg`/`rwritev`: the buffers gathered into one datagram (to `name` if given).
///
/// # Safety
/// `iov` holds `iovcnt` of the caller's buffers; `name` is NULL or `namelen` bytes.
pub(crate) unsafe fn sendv(
    s: &Shared,
    iov: *const libc::iovec,
    iovcnt: c_int,
    flags: c_int,
    name: *const libc::sockaddr,
    namelen: libc::socklen_t,
) -> isize {
    // SAFETY: the caller's iovec.
    let v = match unsafe { iovecs(iov, iovcnt) } {
        Ok(v) => v,
        Err(e) => return minus_one(e) as isize,
    };
    let mut all = Vec::new();
    for b in v.iter().filter(|b| b.iov_len > 0) {
        if b.iov_base.is_null() {
            return minus_one(libc::EFAULT) as isize;
        }
        if all.len().saturating_add(b.iov_len) > SLOT {
            return minus_one(libc::EMSGSIZE) as isize;
        }
        // SAFETY: the caller's buffer.
        all.extend_from_slice(unsafe { std::slice::from_raw_parts(b.iov_base.cast::<u8>(), b.iov_len) });
    }
    let dst = (!name.is_null()).then_some((name, namelen));
    // SAFETY: our buffer; the caller's address.
    unsafe { sendto(s, all.as_ptr().cast(), all.len(), flags, dst) }
}

/// `rrecvmsg`/`rreadv`: one datagram scattered over the buffers, its source in `name`.
///
/// # Safety
/// As [`sendv`]; `namelen` is NULL or the caller's.
pub(crate) unsafe fn recvv(
    s: &Shared,
    iov: *const libc::iovec,
    iovcnt: c_int,
    flags: c_int,
    name: *mut libc::sockaddr,
    namelen: *mut libc::socklen_t,
) -> isize {
    // SAFETY: the caller's iovec.
    let v = match unsafe { iovecs(iov, iovcnt) } {
        Ok(v) => v,
        Err(e) => return minus_one(e) as isize,
    };
    if v.iter().any(|b| b.iov_len > 0 && b.iov_base.is_null()) {
        return minus_one(libc::EFAULT) as isize;
    }
    let total = v.iter().fold(0usize, |t, b| t.saturating_add(b.iov_len)).min(SLOT);
    let mut tmp = vec![0u8; total];
    // SAFETY: our buffer; the caller's address buffers.
    let n = unsafe { recvfrom(s, tmp.as_mut_ptr().cast(), total, flags, name, namelen) };
    if n < 0 {
        return n;
    }
    let mut at = 0;
    for b in v {
        let k = b.iov_len.min(n as usize - at);
        if k > 0 {
            // SAFETY: the caller's buffer of iov_len bytes.
            unsafe { std::ptr::copy_nonoverlapping(tmp[at..].as_ptr(), b.iov_base.cast::<u8>(), k) };
        }
        at += k;
        if at == n as usize {
            break;
        }
    }
    n
}
