//! The connection handshake on the wire: what each CM MAD that comes to QP 1 does to the
//! IDs (and which events it posts), the retries of unanswered MADs, and the thread that
//! runs both. The MADs are `mlx5_sim::wire::cm`'s; rdma_cm's own header (`struct cma_hdr`:
//! the addresses and the requester's port) leads a REQ's private data, as the kernel's
//! rdma_cm puts it there.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use mlx5_sim::wire::cm::{CmMsg, Mad, Rep, Req, mraed, private_len, reason};
use rdma_sys::rdma_cm_event_type::*;

use super::addr::{self, CMA_HDR, REQ_USER, cma_hdr, peer_of, service_id};
use super::state::{Cm, EventBox, Id, Knobs, PACKET_LIFETIME, St, cm, devs, iba_ms};

/// The service timeout of the CM's MRAs: 4.096 µs × 2^24, about 69 s (the kernel's CM).
pub(crate) const MRA_SERVICE_TIMEOUT: u8 = 24;

impl Cm {
    /// One MAD from `from` at device `dev`'s port.
    pub(crate) fn receive(&mut self, dev: usize, from: Ipv4Addr, bytes: &[u8]) {
        let Some(mad) = Mad::decode(bytes) else { return };
        match mad.msg {
            CmMsg::Req(r) => self.on_req(dev, from, mad.tid, r),
            CmMsg::Rep(r) => self.on_rep(dev, from, mad.tid, r),
            CmMsg::Mra { remote, mraed, service_timeout, .. } => self.on_mra(remote, mraed, service_timeout),
            CmMsg::Rtu(_, remote, _) => {
                if let Some(k) = self.by_comm(remote).filter(|k| self.ids[k].st == St::RepSent) {
                    let id = self.ids.get_mut(&k).map(|i| {
                        i.st = St::Connected;
                        i.resend = None;
                    });
                    if id.is_some() {
                        self.post_simple(k, RDMA_CM_EVENT_ESTABLISHED, 0);
                    }
                }
            }
            CmMsg::Rej { remote, reason, private_data, .. } => self.on_rej(remote, reason, &private_data),
            CmMsg::Dreq(local, remote, _, _) => self.on_dreq(dev, from, mad.tid, local, remote),
            CmMsg::SidrReq(r) => self.on_sidr_req(dev, from, mad.tid, r),
            CmMsg::SidrRep(r) => self.on_sidr_rep(r),
            CmMsg::Drep(_, remote, _) => {
                if let Some(k) = self.by_comm(remote).filter(|k| self.ids[k].st == St::DreqSent) {
                    if let Some(i) = self.ids.get_mut(&k) {
                        i.disconnected();
                    }
                    self.post_simple(k, RDMA_CM_EVENT_DISCONNECTED, 0);
                }
            }
        }
    }

    fn on_req(&mut self, dev: usize, from: Ipv4Addr, tid: u64, r: Req) {
        // A REQ sent again. Not yet accepted: the program is slow, so an MRA asks the
        // requester to wait (the kernel's CM marks a request MRA-pending once rdma_cm has
        // handed it up, and sends the MRA at the first duplicate). Accepted: the REP goes
        // again on its own timer, so the duplicate is dropped.
        let dup =
            self.ids.iter().find(|(_, i)| i.remote_comm == r.local_comm_id && i.dst.is_some_and(|d| *d.ip() == from));
        if let Some((_, i)) = dup {
            if i.st == St::ReqRcvd && !i.ud() {
                let mad = mra(i, tid, mraed::REQ);
                self.out.push(super::state::Out { dev, to: from, mad });
            }
            return;
        }
        let peer = peer_of(&r.private_data).unwrap_or(SocketAddrV4::new(from, 0));
        let Some((lk, ck)) = self.spawn(dev, r.service_id, peer) else {
            if crate::state::shared_ports() {
                // Perhaps a sibling's listener: it answers.
                return;
            }
            let (local, _) = self.fresh_comm();
            let rej = CmMsg::Rej {
                local,
                remote: r.local_comm_id,
                rejected: 0,
                reason: reason::INVALID_SERVICE_ID,
                private_data: Vec::new(),
            };
            self.out.push(super::state::Out { dev, to: from, mad: Mad { tid, msg: rej }.encode().to_vec() });
            return;
        };
        let child = ck as *mut rdma_sys::rdma_cm_id;
        let Some(id) = self.ids.get_mut(&ck) else { return };
        let chan = id.chan;
        // The passive side waits as the REQ asks.
        id.timeout = iba_ms(r.cm_response_timeout);
        id.max_retries = u32::from(r.max_cm_retries);
        id.remote_comm = r.local_comm_id;
        id.remote_qpn = r.local_qpn;
        id.remote_psn = r.starting_psn;
        // The responder's view: its resources are what the requester initiates.
        id.responder_resources = r.initiator_depth;
        id.initiator_depth = r.responder_resources;
        id.retry_count = r.retry_count;
        id.rnr_retry_count = r.rnr_retry_count;
        let mut ev = EventBox::new(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
        ev.ev.listen_id = self.ids[&lk].c;
        ev.set_private(r.private_data.get(CMA_HDR..).unwrap_or(&[]), REQ_USER);
        // SAFETY: the conn member of the event's union.
        unsafe {
            let c = &mut ev.ev.param.conn;
            c.responder_resources = r.initiator_depth;
            c.initiator_depth = r.responder_resources;
            c.flow_control = 1;
            c.retry_count = r.retry_count;
            c.rnr_retry_count = r.rnr_retry_count;
            c.srq = u8::from(r.srq);
            c.qp_num = r.local_qpn;
        }
        self.post(chan, ev);
    }

    /// The listener of device `dev`'s port for `service_id` (its port space and port) and
    /// the port's address.
    pub(crate) fn listener(&self, dev: usize, service_id: u64) -> Option<(usize, Ipv4Addr)> {
        let ps = ((service_id >> 16) & 0xffff) as u32;
        let port = (service_id & 0xffff) as u16;
        let here = devs().addr.get(dev).copied().flatten()?;
        let found = self.ids.iter().find(|(_, i)| {
            i.st == St::Listen
                && i.ps() == ps
                && i.src.port() == port
                && (super::addr::any_addr(*i.src.ip()) || *i.src.ip() == here)
        });
        found.map(|(k, _)| (*k, here))
    }

    /// A request for `service_id` from `peer` at device `dev`: a new ID of its listener's
    /// (channel, context, port space, QP type; on the request's port, its route filled), in
    /// state ReqRcvd. (listener, new ID), or None when nobody listens.
    pub(crate) fn spawn(&mut self, dev: usize, service_id: u64, peer: SocketAddrV4) -> Option<(usize, usize)> {
        let (lk, here) = self.listener(dev, service_id)?;
        let l = &self.ids[&lk];
        // SAFETY: the listener's rdma_cm_id, owned by the CM.
        let (context, qp_type) = unsafe { ((*l.c).context, (*l.c).qp_type) };
        let (chan, sync, ep_qp, ps) = (l.chan, l.sync, l.ep_qp, l.ps());
        let child = super::new_cm_id(self, chan, context, ps, qp_type);
        let (local, _) = self.fresh_comm();
        let id = self.ids.get_mut(&(child as usize))?;
        id.sync = sync;
        id.st = St::ReqRcvd;
        id.dev = Some(dev);
        id.src = SocketAddrV4::new(here, (service_id & 0xffff) as u16);
        id.dst = Some(peer);
        id.local_comm = local;
        id.ep_qp = ep_qp;
        addr::fill_route(child, dev, id.src, peer);
        Some((lk, child as usize))
    }

    fn on_rep(&mut self, dev: usize, from: Ipv4Addr, tid: u64, r: Rep) {
        let Some(k) = self.by_comm(r.remote_comm_id) else { return };
        let Some(id) = self.ids.get_mut(&k) else { return };
        if id.st != St::ReqSent {
            if id.remote_comm != r.local_comm_id {
                return;
            }
            // A REP sent again. Once we are connected the RTU goes again; while the program
            // has not taken the CONNECT_RESPONSE (no RTU yet), an MRA asks for patience.
            let answer = match id.st {
                St::Connected => id.last.clone(),
                St::RepRcvd => Some(mra(id, tid, mraed::REP)),
                _ => None,
            };
            if let Some(mad) = answer {
                self.out.push(super::state::Out { dev, to: from, mad });
            }
            return;
        }
        id.st = St::RepRcvd;
        id.resend = None;
        id.remote_comm = r.local_comm_id;
        id.remote_qpn = r.local_qpn;
        id.remote_psn = r.starting_psn;
        id.rnr_retry_count = r.rnr_retry_count;
        let (c, chan) = (id.c, id.chan);
        let mut ev = EventBox::new(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
        ev.set_private(&r.private_data, private_len::REP);
        // SAFETY: the conn member of the event's union.
        unsafe {
            let p = &mut ev.ev.param.conn;
            p.responder_resources = r.initiator_depth;
            p.initiator_depth = r.responder_resources;
            p.flow_control = 1;
            p.rnr_retry_count = r.rnr_retry_count;
            p.srq = u8::from(r.srq);
            p.qp_num = r.local_qpn;
        }
        self.post(chan, ev);
    }

    /// An MRA for our REQ or REP: its answer may take the MRA's service timeout plus the
    /// packet lifetime, so the message waits that long before it goes again (the rest of
    /// its retries too). One MRA per message counts; later ones change nothing.
    fn on_mra(&mut self, remote: u32, what: u8, service_timeout: u8) {
        let Some(k) = self.by_comm(remote) else { return };
        let Some(id) = self.ids.get_mut(&k) else { return };
        let acked = matches!((id.st, what), (St::ReqSent, mraed::REQ) | (St::RepSent, mraed::REP));
        let wait = iba_ms(service_timeout) + iba_ms(PACKET_LIFETIME);
        let Some(r) = id.resend.as_mut().filter(|r| acked && r.wait != wait) else { return };
        r.wait = wait;
        r.due = Instant::now() + wait;
    }

    fn on_rej(&mut self, remote: u32, why: u16, private_data: &[u8]) {
        let Some(k) = self.by_comm(remote) else { return };
        let Some(id) = self.ids.get_mut(&k) else { return };
        if !matches!(id.st, St::ReqSent | St::RepSent | St::RepRcvd) {
            return;
        }
        id.st = St::Rejected;
        id.resend = None;
        let (c, chan) = (id.c, id.chan);
        let mut ev = EventBox::new(c, RDMA_CM_EVENT_REJECTED, c_int_of(why));
        ev.set_private(private_data, private_len::REJ);
        self.post(chan, ev);
    }

    fn on_dreq(&mut self, dev: usize, from: Ipv4Addr, tid: u64, local: u32, remote: u32) {
        let Some(id) = self.by_comm(remote).and_then(|k| self.ids.get_mut(&k).map(|i| (k, i))) else {
            if crate::state::shared_ports() {
                return;
            }
            // No such connection (its ID is gone): answered all the same, as the kernel's
            // CM answers it, so the peer's DREQ ends at once.
            let drep = Mad { tid, msg: CmMsg::Drep(remote, local, Vec::new()) }.encode().to_vec();
            self.out.push(super::state::Out { dev, to: from, mad: drep });
            return;
        };
        let (k, id) = id;
        let drep = Mad { tid, msg: CmMsg::Drep(id.local_comm, local, Vec::new()) }.encode().to_vec();
        self.out.push(super::state::Out { dev, to: from, mad: drep });
        match id.st {
            // The DREQs crossed: ours is answered too.
            St::Connected | St::RepSent | St::DreqSent => {
                id.disconnected();
                self.post_simple(k, RDMA_CM_EVENT_DISCONNECTED, 0);
            }
            _ => {}
        }
    }

    /// Send again what is unanswered and due; what ran out of retries fails its ID.
    pub(crate) fn timers(&mut self, now: Instant) {
        let mut failed = Vec::new();
        for (k, id) in self.ids.iter_mut() {
            let Some(r) = id.resend.as_mut() else { continue };
            if r.due > now {
                continue;
            }
            if r.left == 0 {
                id.resend = None;
                failed.push((*k, id.st));
                continue;
            }
            r.left -= 1;
            r.due = now + r.wait;
            if let (Some(dev), Some(dst)) = (id.dev, id.dst) {
                self.out.push(super::state::Out { dev, to: *dst.ip(), mad: r.mad.clone() });
            }
        }
        for (k, st) in failed {
            let Some(id) = self.ids.get_mut(&k) else { continue };
            let kind = if st == St::DreqSent {
                id.disconnected();
                RDMA_CM_EVENT_DISCONNECTED
            } else {
                id.st = St::Idle;
                RDMA_CM_EVENT_UNREACHABLE
            };
            self.post_simple(k, kind, -libc::ETIMEDOUT);
        }
        // Time-wait over: the IDs still there hear of it.
        let over: Vec<usize> =
            self.ids.iter().filter(|(_, i)| i.timewait.is_some_and(|t| t <= now)).map(|(k, _)| *k).collect();
        for k in over {
            if let Some(id) = self.ids.get_mut(&k) {
                id.timewait = None;
            }
            self.post_simple(k, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
        }
    }
}

fn c_int_of(v: u16) -> std::ffi::c_int {
    std::ffi::c_int::from(v)
}

/// Send the MADs the CM queued, through the fabric (outside the CM's lock).
pub(crate) fn flush() {
    let out = std::mem::take(&mut cm().out);
    if out.is_empty() {
        return;
    }
    crate::state::with(
        |_| (),
        |s| {
            let f = s.sim.simulator().fabric();
            for (n, o) in out.iter().enumerate() {
                f.send_gsi(o.dev, o.to, &o.mad, u32::try_from(n).unwrap_or(0));
            }
        },
    );
}

/// One pass: the MADs that came, the timers, and what they send.
pub(crate) fn service() {
    let mads = crate::state::with(|_| Vec::new(), |s| s.sim.simulator().fabric().take_gsi());
    {
        let mut c = cm();
        c.deferred = Some(Vec::new());
        for (dev, from, m) in mads {
            c.receive(dev, from, &m);
        }
        c.timers(Instant::now());
    }
    flush();
    // The answers are out: now the programs may see the events (and exit).
    cm().wake_deferred();
}

/// Start the CM's thread once: it serves QP 1 every millisecond.
pub(crate) fn start() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        devs();
        let _ = std::thread::Builder::new().name("mlx5sim-cm".into()).spawn(|| {
            loop {
                service();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    });
}

/// The REQ of ID `id` (about to connect): the MAD.
pub(crate) fn req_mad(id: &Id, tid: u64, qpn: u32, srq: bool, user: &[u8]) -> Vec<u8> {
    let d = devs();
    let dev = id.dev.unwrap_or(0);
    let dst = id.dst.unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    let mut private_data = cma_hdr(id.src, dst).to_vec();
    private_data.extend_from_slice(user);
    let req = Req {
        local_comm_id: id.local_comm,
        service_id: service_id(id.ps(), dst.port()),
        local_ca_guid: u64::from_be(d.guid.get(dev).copied().unwrap_or(0)),
        local_qpn: qpn,
        responder_resources: id.responder_resources,
        initiator_depth: id.initiator_depth,
        starting_psn: id.local_psn,
        retry_count: id.retry_count,
        rnr_retry_count: id.rnr_retry_count,
        mtu: u8::try_from(d.mtu.get(dev).copied().unwrap_or(3)).unwrap_or(3),
        srq,
        cm_response_timeout: Knobs::get().response_timeout,
        max_cm_retries: Knobs::get().max_retries,
        local_gid: id.src.ip().to_ipv6_mapped().octets(),
        remote_gid: dst.ip().to_ipv6_mapped().octets(),
        private_data,
    };
    Mad { tid, msg: CmMsg::Req(req) }.encode().to_vec()
}

/// An MRA from ID `id` for the message `what` of transaction `tid`.
fn mra(id: &Id, tid: u64, what: u8) -> Vec<u8> {
    let msg = CmMsg::Mra {
        local: id.local_comm,
        remote: id.remote_comm,
        mraed: what,
        service_timeout: MRA_SERVICE_TIMEOUT,
        private_data: Vec::new(),
    };
    Mad { tid, msg }.encode().to_vec()
}

/// The REP of ID `id`: the MAD.
pub(crate) fn rep_mad(id: &Id, tid: u64, qpn: u32, srq: bool, user: &[u8]) -> Vec<u8> {
    let d = devs();
    let rep = Rep {
        local_comm_id: id.local_comm,
        remote_comm_id: id.remote_comm,
        local_qpn: qpn,
        starting_psn: id.local_psn,
        responder_resources: id.responder_resources,
        initiator_depth: id.initiator_depth,
        rnr_retry_count: id.rnr_retry_count,
        srq,
        local_ca_guid: u64::from_be(d.guid.get(id.dev.unwrap_or(0)).copied().unwrap_or(0)),
        private_data: user.to_vec(),
    };
    Mad { tid, msg: CmMsg::Rep(rep) }.encode().to_vec()
}
