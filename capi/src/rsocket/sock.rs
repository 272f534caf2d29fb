//! An rsocket: its fd (an eventfd that only names it), its CM ID on an event channel of its
//! own, its state and options, and the CM events that move it (address and route
//! resolution, the connection's private data, accept, disconnect).

use std::collections::{HashMap, VecDeque};
use std::ffi::c_int;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rdma_sys::rdma_cm_event_type::*;
use rdma_sys::*;

use mlx5_sim::wire::rsocket::{CONN_DATA_LEN, ConnData};

use super::data::{Conn, MAX_SEG, Sizes, errno_or};

/// Where an rsocket is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    Init,
    Bound,
    Listening,
    ResolvingAddr,
    ResolvingRoute,
    Connecting,
    Accepting,
    Connected,
    /// The connection failed (the error is in `err` until SO_ERROR takes it).
    ConnectError,
    /// The peer or this side disconnected.
    Disconnected,
    /// rclose freed it (a call still waiting on it in another thread returns).
    Closed,
}

/// Default receive and send queue depths (messages).
pub(crate) const DEFAULT_QUEUE: usize = 64;
/// Default SO_RCVBUF/SO_SNDBUF (rsocket.c's default memory).
pub(crate) const DEFAULT_MEM: usize = 1 << 17;
/// Bounds of the queue depths the options take.
pub(crate) const QUEUE_RANGE: (usize, usize) = (4, 1024);

/// One rsocket.
pub(crate) struct Sock {
    pub(crate) fd: c_int,
    pub(crate) id: *mut rdma_cm_id,
    pub(crate) chan: *mut rdma_event_channel,
    pub(crate) state: State,
    /// O_NONBLOCK and the other F_SETFL flags.
    pub(crate) fs_flags: c_int,
    pub(crate) fd_flags: c_int,
    /// The pending SO_ERROR.
    pub(crate) err: c_int,
    pub(crate) rcvbuf: usize,
    pub(crate) sndbuf: usize,
    pub(crate) sq: usize,
    pub(crate) rq: usize,
    pub(crate) inline: usize,
    pub(crate) iomap: usize,
    /// SOL_SOCKET/IPPROTO_TCP/IPPROTO_IPV6 flags kept as (level, name) -> value.
    pub(crate) flags: HashMap<(c_int, c_int), c_int>,
    pub(crate) keepidle: c_int,
    /// Whether this side may still read and write (rshutdown clears them).
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    /// Connection requests of a listener: the new ID and the peer's private data.
    pub(crate) backlog: VecDeque<(*mut rdma_cm_id, Vec<u8>)>,
    pub(crate) conn: Option<Conn>,
}

// SAFETY: the raw pointers are the shim's CM objects; a Sock is used under its mutex.
unsafe impl Send for Sock {}

/// A shared rsocket.
pub(crate) type Shared = Arc<Mutex<Sock>>;

fn table() -> MutexGuard<'static, HashMap<c_int, Shared>> {
    static T: OnceLock<Mutex<HashMap<c_int, Shared>>> = OnceLock::new();
    T.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// The rsocket of `fd`, if it is one.
pub(crate) fn lookup(fd: c_int) -> Option<Shared> {
    table().get(&fd).cloned()
}

/// Lock an rsocket (a panicked holder leaves it usable).
pub(crate) fn lock(s: &Shared) -> MutexGuard<'_, Sock> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sock {
    /// A new rsocket with an fd, an event channel and a TCP-space CM ID; Err(errno).
    /// `from` is the listener an accepted socket inherits its options from.
    pub(crate) fn create(id: Option<*mut rdma_cm_id>, from: Option<&Sock>) -> Result<Shared, c_int> {
        // SAFETY: no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(errno_or(libc::EMFILE));
        }
        // SAFETY: the shim's own librdmacm calls.
        let chan = unsafe { crate::cm::rdma_create_event_channel() };
        if chan.is_null() {
            let e = errno_or(libc::ENOMEM);
            // SAFETY: our fd.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let id = match id {
            // SAFETY: an ID the CM gave with a connection request.
            Some(id) => unsafe { crate::cm::rdma_migrate_id(id, chan) }.eq(&0).then_some(id),
            None => {
                let mut id = std::ptr::null_mut();
                // SAFETY: as above.
                let r = unsafe {
                    crate::cm::rdma_create_id(chan, &mut id, std::ptr::null_mut(), rdma_port_space::RDMA_PS_TCP)
                };
                (r == 0).then_some(id)
            }
        };
        let Some(id) = id else {
            let e = errno_or(libc::ENOMEM);
            // SAFETY: ours.
            unsafe {
                crate::cm::rdma_destroy_event_channel(chan);
                libc::close(fd);
            }
            return Err(e);
        };
        let mut s = Sock {
            fd,
            id,
            chan,
            state: State::Init,
            fs_flags: libc::O_RDWR,
            fd_flags: 0,
            err: 0,
            rcvbuf: DEFAULT_MEM,
            sndbuf: DEFAULT_MEM,
            sq: DEFAULT_QUEUE,
            rq: DEFAULT_QUEUE,
            inline: 64,
            iomap: 0,
            flags: HashMap::new(),
            keepidle: 7200,
            readable: true,
            writable: true,
            backlog: VecDeque::new(),
            conn: None,
        };
        if let Some(l) = from {
            s.fs_flags = l.fs_flags;
            s.rcvbuf = l.rcvbuf;
            s.sndbuf = l.sndbuf;
            (s.sq, s.rq, s.inline, s.iomap) = (l.sq, l.rq, l.inline, l.iomap);
            s.flags = l.flags.clone();
        }
        let shared = Arc::new(Mutex::new(s));
        table().insert(fd, shared.clone());
        Ok(shared)
    }

    /// Whether calls on this socket may wait (`flags` of the call: MSG_DONTWAIT).
    pub(crate) fn blocking(&self, flags: c_int) -> bool {
        self.fs_flags & libc::O_NONBLOCK == 0 && flags & libc::MSG_DONTWAIT == 0
    }

    fn sizes(&self) -> Sizes {
        let seg = (self.rcvbuf / self.rq).clamp(1024, MAX_SEG) & !1023;
        Sizes { sq: self.sq, rq: self.rq, seg }
    }

    fn private_data(&self) -> [u8; CONN_DATA_LEN] {
        let seg = self.sizes().seg as u32;
        ConnData { credits: self.rq as u16, iomap: self.iomap.min(255) as u8, seg }.encode()
    }

    /// Take the peer's private data: Err(EOPNOTSUPP) for another version or too few bytes
    /// (rsocket.c's answer to a peer it does not understand).
    fn take_peer(&mut self, p: &[u8]) -> Result<(), c_int> {
        let peer = ConnData::decode(p).map_err(|_| libc::EOPNOTSUPP)?;
        // SAFETY: our ID.
        let pd = unsafe { self.id.as_ref() }.map_or(std::ptr::null_mut(), |i| i.pd);
        let iomap = self.iomap;
        let c = self.conn.as_mut().ok_or(libc::EINVAL)?;
        // SAFETY: the connection's PD.
        unsafe { c.peer(pd, peer, iomap) }
    }

    /// Begin connecting to `dst` (rconnect): address resolution; the rest follows events.
    pub(crate) fn start_connect(&mut self, dst: &mut libc::sockaddr_in) -> Result<(), c_int> {
        // SAFETY: our ID; the caller's address.
        let r = unsafe {
            crate::cm::rdma_resolve_addr(self.id, std::ptr::null_mut(), (dst as *mut libc::sockaddr_in).cast(), 2000)
        };
        if r != 0 {
            return Err(errno_or(libc::EINVAL));
        }
        self.state = State::ResolvingAddr;
        Ok(())
    }

    /// Accept the connection request this socket was made for (raccept): QP, receives,
    /// the REP with this side's private data.
    pub(crate) fn accept(&mut self, peer: &[u8]) -> Result<(), c_int> {
        // SAFETY: our ID, on its device since the request.
        self.conn = Some(unsafe { Conn::new(self.id, self.sizes()) }?);
        self.take_peer(peer)?;
        self.handshake(true)?;
        self.state = State::Accepting;
        Ok(())
    }

    /// Send the REQ (`accept` false) or the REP with this side's private data.
    fn handshake(&mut self, accept: bool) -> Result<(), c_int> {
        let p = self.private_data();
        // SAFETY: plain data.
        let mut param: rdma_conn_param = unsafe { std::mem::zeroed() };
        param.private_data = p.as_ptr().cast();
        param.private_data_len = CONN_DATA_LEN as u8;
        param.responder_resources = 1;
        param.initiator_depth = 1;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        // SAFETY: our ID; `param` and `p` live across the call.
        let r = unsafe {
            if accept {
                crate::cm::rdma_accept(self.id, &mut param)
            } else {
                crate::cm::rdma_connect(self.id, &mut param)
            }
        };
        if r != 0 {
            return Err(errno_or(libc::ECONNREFUSED));
        }
        Ok(())
    }

    /// Move on with what the CM says (non-blocking): the next step of connecting, a
    /// listener's requests, a disconnect; and what the CQ holds.
    pub(crate) fn progress(&mut self) {
        if self.state == State::Closed {
            return;
        }
        while let Some((ev, pdata, new_id)) = self.next_event() {
            self.on_event(ev, &pdata, new_id);
        }
        if let Some(c) = self.conn.as_mut() {
            c.progress();
            if c.broken && self.state == State::Connected {
                // A failed completion: SO_ERROR says EIO, as rsocket.c's rs_error.
                self.state = State::Disconnected;
                self.err = libc::EIO;
            }
        }
    }

    fn next_event(&mut self) -> Option<(u32, Vec<u8>, *mut rdma_cm_id)> {
        // SAFETY: our channel.
        let fd = unsafe { (*self.chan).fd };
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd.
        if unsafe { libc::poll(&mut p, 1, 0) } != 1 {
            return None;
        }
        let mut ev = std::ptr::null_mut();
        // SAFETY: the channel has an event (poll said so).
        if unsafe { crate::cm::rdma_get_cm_event(self.chan, &mut ev) } != 0 {
            return None;
        }
        // SAFETY: the event the CM just gave; acked after copying what we need.
        unsafe {
            let e = &*ev;
            let c = &e.param.conn;
            let pdata = if c.private_data.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(c.private_data.cast::<u8>(), usize::from(c.private_data_len)).to_vec()
            };
            let out = (e.event, pdata, e.id);
            crate::cm::rdma_ack_cm_event(ev);
            Some(out)
        }
    }

    fn on_event(&mut self, ev: u32, pdata: &[u8], new_id: *mut rdma_cm_id) {
        let fail = |s: &mut Sock, e: c_int| {
            s.state = State::ConnectError;
            s.err = e;
        };
        match (self.state, ev) {
            (State::Listening, RDMA_CM_EVENT_CONNECT_REQUEST) => self.backlog.push_back((new_id, pdata.to_vec())),
            (State::ResolvingAddr, RDMA_CM_EVENT_ADDR_RESOLVED) => {
                // SAFETY: our ID.
                if unsafe { crate::cm::rdma_resolve_route(self.id, 2000) } == 0 {
                    self.state = State::ResolvingRoute;
                } else {
                    fail(self, errno_or(libc::EHOSTUNREACH));
                }
            }
            (State::ResolvingRoute, RDMA_CM_EVENT_ROUTE_RESOLVED) => {
                if let Err(e) = self.send_req() {
                    fail(self, e);
                }
            }
            (State::Connecting, RDMA_CM_EVENT_ESTABLISHED) => match self.take_peer(pdata) {
                Ok(()) => self.state = State::Connected,
                Err(e) => fail(self, e),
            },
            (State::Accepting, RDMA_CM_EVENT_ESTABLISHED) => self.state = State::Connected,
            (_, RDMA_CM_EVENT_REJECTED) => fail(self, libc::ECONNREFUSED),
            (_, RDMA_CM_EVENT_ADDR_ERROR | RDMA_CM_EVENT_ROUTE_ERROR) => fail(self, libc::EHOSTUNREACH),
            (_, RDMA_CM_EVENT_UNREACHABLE | RDMA_CM_EVENT_CONNECT_ERROR) => fail(self, libc::ETIMEDOUT),
            (State::Accepting | State::Connected, RDMA_CM_EVENT_DISCONNECTED) => {
                // What came before the disconnect is still read.
                if let Some(c) = self.conn.as_mut() {
                    c.progress();
                    c.eof = true;
                }
                self.state = State::Disconnected;
            }
            _ => {}
        }
    }

    fn send_req(&mut self) -> Result<(), c_int> {
        // SAFETY: our ID, its route resolved.
        self.conn = Some(unsafe { Conn::new(self.id, self.sizes()) }?);
        self.handshake(false)?;
        self.state = State::Connecting;
        Ok(())
    }

    /// Whether the connection is up (or was, and may still hold bytes to read).
    pub(crate) fn connected(&self) -> bool {
        matches!(self.state, State::Connected | State::Disconnected) && self.conn.is_some()
    }

    /// Whether connecting is under way.
    pub(crate) fn opening(&self) -> bool {
        matches!(self.state, State::ResolvingAddr | State::ResolvingRoute | State::Connecting | State::Accepting)
    }

    /// Free everything (rclose, after rshutdown): the requests a listener never accepted are
    /// refused.
    pub(crate) fn destroy(&mut self) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        // SAFETY: our CM objects and fd; nothing uses the socket after.
        unsafe {
            for (id, _) in self.backlog.drain(..) {
                crate::cm::rdma_reject(id, std::ptr::null(), 0);
                crate::cm::rdma_destroy_id(id);
            }
            if let Some(mut c) = self.conn.take() {
                c.destroy(self.id);
            }
            crate::cm::rdma_destroy_id(self.id);
            crate::cm::rdma_destroy_event_channel(self.chan);
            libc::close(self.fd);
        }
        table().remove(&self.fd);
    }
}
