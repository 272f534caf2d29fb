//! The connection manager's state: event channels (an eventfd each counting its events),
//! CM IDs with their connection's progress, and the devices the IDs sit on. One lock; it is
//! never held across a call into the verbs (which take the shim's lock), so that the
//! device thread, which holds the shim's lock, never waits for it.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rdma_sys::*;

/// `struct rdma_cm_event` followed by room for its private data, as librdmacm's
/// `struct cma_event` holds both: the program gets `&ev`.
#[repr(C)]
pub(crate) struct EventBox {
    pub(crate) ev: rdma_cm_event,
    pub(crate) data: [u8; 256],
}

impl EventBox {
    /// A zeroed event of `kind` for `id`, with `status`.
    pub(crate) fn new(id: *mut rdma_cm_id, kind: u32, status: c_int) -> Box<EventBox> {
        // SAFETY: rdma_cm_event is plain data (pointers, integers, unions of them): zero is
        // a valid value.
        let mut b: Box<EventBox> = Box::new(unsafe { std::mem::zeroed() });
        b.ev.id = id;
        b.ev.event = kind;
        b.ev.status = status;
        b
    }

    /// Set the connection parameters' private data to `data` (kept in the box) with the
    /// length the kernel reports for the message (`len`, the message's whole room).
    pub(crate) fn set_private(&mut self, data: &[u8], len: usize) {
        let n = data.len().min(self.data.len());
        self.data[..n].copy_from_slice(&data[..n]);
        self.ev.param.conn.private_data = self.data.as_ptr().cast();
        self.ev.param.conn.private_data_len = u8::try_from(len.min(n)).unwrap_or(u8::MAX);
    }
}

/// An event channel: `c.fd` is an eventfd counting the queued events.
pub(crate) struct Chan {
    pub(crate) c: Box<rdma_event_channel>,
    pub(crate) queue: VecDeque<*mut EventBox>,
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum St {
    Idle,
    AddrResolved,
    RouteResolved,
    Listen,
    /// Our REQ is out.
    ReqSent,
    /// Our SIDR_REQ is out (a UD ID's `rdma_connect`).
    SidrSent,
    /// A REQ came (the CONNECT_REQUEST's new ID).
    ReqRcvd,
    /// Our REP is out, no RTU yet.
    RepSent,
    /// A REP came; the RTU goes out when the program takes the event.
    RepRcvd,
    Connected,
    /// Our DREQ is out.
    DreqSent,
    Disconnected,
    Rejected,
}

/// A MAD sent again until answered.
pub(crate) struct Resend {
    pub(crate) mad: Vec<u8>,
    pub(crate) due: Instant,
    pub(crate) left: u32,
    /// How long each sending waits for the answer (the connection's timeout, or an MRA's).
    pub(crate) wait: Duration,
}

/// A CM ID.
pub(crate) struct Id {
    pub(crate) c: *mut rdma_cm_id,
    /// The channel's key (its address).
    pub(crate) chan: usize,
    /// Made without a channel: calls wait for their own events.
    pub(crate) sync: bool,
    pub(crate) st: St,
    pub(crate) dev: Option<usize>,
    pub(crate) src: SocketAddrV4,
    pub(crate) dst: Option<SocketAddrV4>,
    pub(crate) local_comm: u32,
    pub(crate) remote_comm: u32,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_psn: u32,
    pub(crate) local_psn: u32,
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) resend: Option<Resend>,
    /// How long a MAD of this connection waits for its answer before going again.
    pub(crate) timeout: Duration,
    /// How often a MAD of this connection goes again.
    pub(crate) max_retries: u32,
    /// The transaction ID of the peer's SIDR_REQ (its SIDR_REP carries it back).
    pub(crate) peer_tid: u64,
    /// When the connection's time-wait ends (TIMEWAIT_EXIT), once disconnected.
    pub(crate) timewait: Option<Instant>,
    /// The last MAD sent, to answer the peer's duplicate again.
    pub(crate) last: Option<Vec<u8>>,
    /// `rdma_create_ep`'s QP attributes for the IDs a passive endpoint's requests make.
    pub(crate) ep_qp: Option<(*mut ibv_pd, ibv_qp_init_attr)>,
    /// CQs made by `rdma_create_qp` (destroyed with the QP).
    pub(crate) own_cqs: bool,
    /// Bound by `rdma_bind_addr` or address resolution: it holds its port. An ID a connection
    /// request made shares its listener's port without holding it, as in the kernel's CM.
    pub(crate) bound: bool,
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the local ACK timeout its QP takes at RTS, in place
    /// of the CM's.
    pub(crate) ack_timeout: Option<u8>,
    /// The multicast groups it joined.
    pub(crate) mc: Vec<Joined>,
}

impl Id {
    pub(crate) fn new(c: *mut rdma_cm_id, chan: usize, sync: bool) -> Id {
        Id {
            c,
            chan,
            sync,
            st: St::Idle,
            dev: None,
            src: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            dst: None,
            local_comm: 0,
            remote_comm: 0,
            remote_qpn: 0,
            remote_psn: 0,
            // The kernel's __rdma_create_id draws the ID's starting PSN: a QP taken to RTS
            // before the REQ or REP goes (an external QP) starts where the message says.
            local_psn: fresh_psn(),
            responder_resources: 0,
            initiator_depth: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            resend: None,
            timeout: active_timeout(Knobs::get().response_timeout),
            max_retries: u32::from(Knobs::get().max_retries),
            peer_tid: 0,
            timewait: None,
            last: None,
            ep_qp: None,
            own_cqs: false,
            bound: false,
            ack_timeout: None,
            mc: Vec::new(),
        }
    }

    /// Disconnected (DREP in, DREQ answered or unanswered for good): time-wait begins.
    pub(crate) fn disconnected(&mut self) {
        self.st = St::Disconnected;
        self.resend = None;
        self.timewait = Some(Instant::now() + TIMEWAIT);
    }

    /// A UD ID (the UDP and IPoIB port spaces), which SIDR connects.
    pub(crate) fn ud(&self) -> bool {
        // SAFETY: an ID the CM owns, alive while in the table.
        unsafe { (*self.c).qp_type == ibv_qp_type::IBV_QPT_UD }
    }

    /// The port space (`rdma_cm_id.ps`).
    pub(crate) fn ps(&self) -> u32 {
        // SAFETY: an ID the CM owns, alive while in the table.
        unsafe { (*self.c).ps }
    }

    /// The ID's QP, NULL without one.
    pub(crate) fn qp(&self) -> *mut ibv_qp {
        // SAFETY: as for ps.
        unsafe { (*self.c).qp }
    }
}

/// A MAD to send: from device `dev`'s port to `to`.
pub(crate) struct Out {
    pub(crate) dev: usize,
    pub(crate) to: Ipv4Addr,
    pub(crate) mad: Vec<u8>,
}

/// Everything the CM holds.
pub(crate) struct Cm {
    pub(crate) chans: BTreeMap<usize, Chan>,
    pub(crate) ids: BTreeMap<usize, Id>,
    pub(crate) next_comm: u32,
    pub(crate) next_tid: u64,
    pub(crate) out: Vec<Out>,
    /// While the CM's thread handles MADs: the channels whose readers wake only once the
    /// answers are sent (a program that exits at an event must not take its DREP with it).
    pub(crate) deferred: Option<Vec<usize>>,
}

// SAFETY: the raw pointers are the CM's own boxes and the program's objects, touched only
// under the CM's lock (or by the program, as the C API allows).
unsafe impl Send for Cm {}

static CM: Mutex<Cm> = Mutex::new(Cm {
    chans: BTreeMap::new(),
    ids: BTreeMap::new(),
    next_comm: 0,
    next_tid: 0,
    out: Vec::new(),
    deferred: None,
});

/// The CM's lock.
pub(crate) fn cm() -> MutexGuard<'static, Cm> {
    CM.lock().unwrap_or_else(|p| p.into_inner())
}

impl Cm {
    /// Queue an event on its ID's channel and wake the channel's readers.
    pub(crate) fn post(&mut self, chan: usize, ev: Box<EventBox>) {
        let Some(c) = self.chans.get_mut(&chan) else { return };
        c.queue.push_back(Box::into_raw(ev));
        match self.deferred.as_mut() {
            Some(d) => d.push(chan),
            None => wake(c.c.fd),
        }
    }

    /// Wake the readers of the events [`Cm::post`] deferred (channels gone since are skipped).
    pub(crate) fn wake_deferred(&mut self) {
        for chan in self.deferred.take().unwrap_or_default() {
            if let Some(c) = self.chans.get(&chan) {
                wake(c.c.fd);
            }
        }
    }

    /// Post an event of `kind` with `status` for ID `key`.
    pub(crate) fn post_simple(&mut self, key: usize, kind: u32, status: c_int) {
        if let Some(id) = self.ids.get(&key) {
            let chan = id.chan;
            let ev = EventBox::new(id.c, kind, status);
            self.post(chan, ev);
        }
    }

    /// A fresh communication ID (never 0) and a transaction ID.
    pub(crate) fn fresh_comm(&mut self) -> (u32, u64) {
        if self.next_comm == 0 {
            // Apart in each process: the peer tells connections apart by them.
            self.next_comm = std::process::id().wrapping_mul(0x9e37_79b9) | 1;
            self.next_tid = u64::from(self.next_comm) << 32;
        }
        self.next_comm = self.next_comm.wrapping_add(1).max(1);
        self.next_tid = self.next_tid.wrapping_add(1);
        (self.next_comm, self.next_tid)
    }

    /// Send `mad` to the peer of `key` and keep it for a duplicate; with `retry`, again
    /// every timeout of the connection until answered, up to its retries.
    pub(crate) fn send(&mut self, key: usize, mad: Vec<u8>, retry: bool) {
        let Some(id) = self.ids.get_mut(&key) else { return };
        let (Some(dev), Some(dst)) = (id.dev, id.dst) else { return };
        id.resend = retry.then(|| Resend {
            mad: mad.clone(),
            due: Instant::now() + id.timeout,
            left: id.max_retries,
            wait: id.timeout,
        });
        id.last = Some(mad.clone());
        self.out.push(Out { dev, to: *dst.ip(), mad });
    }

    /// The ID whose local communication ID is `comm`.
    pub(crate) fn by_comm(&self, comm: u32) -> Option<usize> {
        self.ids.iter().find(|(_, i)| i.local_comm == comm && comm != 0).map(|(k, _)| *k)
    }
}

/// Count one event on a channel's eventfd: its reader wakes.
fn wake(fd: c_int) {
    let one = 1u64;
    // SAFETY: a channel's eventfd; an 8-byte write.
    unsafe { libc::write(fd, std::ptr::from_ref(&one).cast::<c_void>(), 8) };
}

/// The CM's timing, from the environment: `MLX5SIM_CM_RESPONSE_TIMEOUT` (the CM response
/// timeout a REQ asks for, 4.096 µs × 2^n, 0 to 31; the kernel's rdma_cm: 20, about 4 s) and
/// `MLX5SIM_CM_MAX_RETRIES` (how often an unanswered REQ, REP, DREQ or SIDR_REQ goes again,
/// 0 to 15; the kernel's: 15). A value that is no number in range leaves the default.
#[derive(Clone, Copy)]
pub(crate) struct Knobs {
    pub(crate) response_timeout: u8,
    pub(crate) max_retries: u8,
}

impl Knobs {
    /// The knobs, read once.
    pub(crate) fn get() -> Knobs {
        static K: OnceLock<Knobs> = OnceLock::new();
        *K.get_or_init(|| {
            let var = |name: &str, max: u8, default: u8| {
                std::env::var(name)
                    .ok()
                    .and_then(|v| v.trim().parse::<u8>().ok())
                    .filter(|v| *v <= max)
                    .unwrap_or(default)
            };
            Knobs {
                response_timeout: var("MLX5SIM_CM_RESPONSE_TIMEOUT", 31, 20),
                max_retries: var("MLX5SIM_CM_MAX_RETRIES", 15, 15),
            }
        })
    }
}

/// The IBTA's time encoding (4.096 µs × 2^t) in milliseconds, as the kernel's CM rounds it
/// (`cm_convert_to_ms`: 2^(t - 8)).
pub(crate) fn iba_ms(t: u8) -> Duration {
    Duration::from_millis(1 << t.saturating_sub(8).min(31))
}

/// RoCE's packet lifetime in a path (the kernel's `CMA_IBOE_PACKET_LIFETIME`).
pub(crate) const PACKET_LIFETIME: u8 = 16;

/// How long an active side's REQ (and its later DREQ) waits: twice the packet lifetime plus
/// the remote CM response timeout, as `ib_send_cm_req` computes it (4.608 s by default).
pub(crate) fn active_timeout(response_timeout: u8) -> Duration {
    iba_ms(PACKET_LIFETIME) * 2 + iba_ms(response_timeout)
}

/// How long a connection stays in time-wait after its disconnection: the kernel's CM waits
/// its ACK timeout (`cm_ack_timeout` of the device's CA ACK delay, 16, and the packet
/// lifetime: 18, about 1 s) before TIMEWAIT_EXIT.
pub(crate) const TIMEWAIT: Duration = Duration::from_millis(1 << (18 - 8));

/// The simulated devices as the CM uses them: an open context each, a default PD, the
/// port's IPv4 address on the network and its active MTU.
pub(crate) struct Devs {
    pub(crate) ctx: Vec<usize>,
    pub(crate) pd: Vec<usize>,
    pub(crate) addr: Vec<Option<Ipv4Addr>>,
    pub(crate) mtu: Vec<u32>,
    pub(crate) guid: Vec<u64>,
}

static DEVS: OnceLock<Devs> = OnceLock::new();

/// The devices, opened on first use (as librdmacm opens every device when it starts).
pub(crate) fn devs() -> &'static Devs {
    DEVS.get_or_init(|| {
        let mut d = Devs { ctx: Vec::new(), pd: Vec::new(), addr: Vec::new(), mtu: Vec::new(), guid: Vec::new() };
        let mut n = 0;
        // SAFETY: the shim's own verbs, called as a program would.
        unsafe {
            let list = crate::device::ibv_get_device_list(&mut n);
            if list.is_null() {
                return d;
            }
            for i in 0..usize::try_from(n).unwrap_or(0) {
                let dev = *list.add(i);
                let ctx = crate::device::ibv_open_device(dev);
                if ctx.is_null() {
                    break;
                }
                let pd = crate::mr::ibv_alloc_pd(ctx);
                let mut attr: ibv_port_attr = std::mem::zeroed();
                crate::device::ibv_query_port(ctx, 1, std::ptr::from_mut(&mut attr).cast());
                d.ctx.push(ctx as usize);
                d.pd.push(pd as usize);
                d.mtu.push(attr.active_mtu);
                d.guid.push(crate::device::ibv_get_device_guid(dev));
                d.addr.push(crate::state::with(
                    |_| None,
                    |s| s.sim.simulator().fabric().net_port(i).filter(|p| !p.is_in_memory()).map(|p| p.addr()),
                ));
            }
            crate::device::ibv_free_device_list(list);
        }
        d
    })
}

impl Devs {
    /// The device whose port has address `a`.
    pub(crate) fn with_addr(&self, a: Ipv4Addr) -> Option<usize> {
        self.addr.iter().position(|x| *x == Some(a))
    }

    /// The device a connection to `to` leaves from: the first networked port that may
    /// reach it (a loopback port reaches only 127.0.0.0/8).
    pub(crate) fn route_to(&self, to: Ipv4Addr) -> Option<usize> {
        if to.is_unspecified() || to.is_broadcast() || to.is_multicast() {
            return None;
        }
        self.addr.iter().position(|a| a.is_some_and(|a| !a.is_loopback() || to.is_loopback()))
    }
}

/// A group an ID joined: its address, GID and join flags.
#[derive(Clone, Copy)]
pub(crate) struct Joined {
    pub(crate) addr: SocketAddrV4,
    pub(crate) mgid: [u8; 16],
    pub(crate) flags: u32,
}

/// A fresh starting PSN (24 bits), as the kernel draws one per ID.
pub(crate) fn fresh_psn() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: a 4-byte buffer of ours.
    unsafe { libc::getrandom(b.as_mut_ptr().cast::<c_void>(), 4, 0) };
    u32::from_ne_bytes(b) & 0xff_ffff
}

/// Wait for the next event of a channel (a count of its eventfd), then take it. A count
/// whose event went with its ID (`rdma_destroy_id`) is passed over: the reader waits on (or
/// gets EAGAIN), as the kernel's does until an event is queued.
pub(crate) fn next_event(channel: *mut rdma_event_channel) -> Result<*mut EventBox, c_int> {
    let fd = match cm().chans.get(&(channel as usize)) {
        Some(ch) => ch.c.fd,
        None => return Err(libc::EINVAL),
    };
    let mut b = 0u64;
    loop {
        // SAFETY: the channel's eventfd; an 8-byte read into a u64 of ours.
        let n = unsafe { libc::read(fd, std::ptr::from_mut(&mut b).cast::<c_void>(), 8) };
        if n == 8 {
            match cm().chans.get_mut(&(channel as usize)) {
                Some(ch) => match ch.queue.pop_front() {
                    Some(e) => return Ok(e),
                    None => continue,
                },
                None => return Err(libc::EINVAL),
            }
        }
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        if n < 0 && e == libc::EINTR {
            continue;
        }
        return Err(if n == 0 { libc::ENODATA } else { e });
    }
}
