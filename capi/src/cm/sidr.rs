//! SIDR, service ID resolution: how a UD ID (the UDP and IPoIB port spaces) "connects". Its
//! `rdma_connect` sends a SIDR_REQ (rdma_cm's header and the program's data), the listener's
//! side gets CONNECT_REQUEST, and `rdma_accept` answers a SIDR_REP with its QP number and
//! Q_Key (`rdma_reject`: a SIDR_REP with status REJECT). The requester gets ESTABLISHED with
//! `param.ud` (the peer's QPN and Q_Key, an address handle's attributes from its path), or
//! UNREACHABLE with the SIDR status, as the kernel's `cma_sidr_rep_handler` reports them.

use std::net::{Ipv4Addr, SocketAddrV4};

use mlx5_sim::wire::cm::{CmMsg, Mad, SidrRep, SidrReq, private_len, sidr};
use rdma_sys::rdma_cm_event_type::*;
use rdma_sys::*;

use super::addr::{self, CMA_HDR, RDMA_UDP_QKEY, cma_hdr, peer_of, service_id};
use super::state::{Cm, EventBox, Id, Out, St};

/// The program's private data a SIDR_REQ carries after rdma_cm's header (180 bytes).
pub(crate) const SIDR_REQ_USER: usize = private_len::SIDR_REQ - CMA_HDR;

impl Cm {
    /// A SIDR_REQ from `from` at device `dev`'s port.
    pub(crate) fn on_sidr_req(&mut self, dev: usize, from: Ipv4Addr, tid: u64, r: SidrReq) {
        // Sent again while the program has not answered: dropped, as the kernel's CM drops
        // it (a SIDR_REP is never sent twice).
        let pending = self.ids.values().any(|i| {
            i.st == St::ReqRcvd && i.ud() && i.remote_comm == r.request_id && i.dst.is_some_and(|d| *d.ip() == from)
        });
        if pending {
            return;
        }
        let refuse = |status| {
            let rep = SidrRep { request_id: r.request_id, status, service_id: r.service_id, ..SidrRep::default() };
            Out { dev, to: from, mad: Mad { tid, msg: CmMsg::SidrRep(rep) }.encode().to_vec() }
        };
        // Nobody listens: UNSUPPORTED (the kernel's CM finds no listener for the service ID);
        // a listener of another QP type: REJECT (rdma_cm refuses it and the CM rejects).
        match self.listener(dev, r.service_id) {
            // Perhaps a sibling process's listener (a shared address): it answers.
            None if crate::state::shared_ports() => return,
            None => return self.out.push(refuse(sidr::UNSUPPORTED)),
            Some((lk, _)) if !self.ids[&lk].ud() => return self.out.push(refuse(sidr::REJECT)),
            Some(_) => {}
        }
        let peer = peer_of(&r.private_data).unwrap_or(SocketAddrV4::new(from, 0));
        let Some((lk, ck)) = self.spawn(dev, r.service_id, peer) else { return };
        let listen = self.ids[&lk].c;
        let Some(id) = self.ids.get_mut(&ck) else { return };
        id.remote_comm = r.request_id;
        id.peer_tid = tid;
        let mut ev = EventBox::new(id.c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
        ev.ev.listen_id = listen;
        ev.set_private(r.private_data.get(CMA_HDR..).unwrap_or(&[]), SIDR_REQ_USER);
        let chan = id.chan;
        self.post(chan, ev);
    }

    /// A SIDR_REP: the answer to our SIDR_REQ (the request ID names it).
    pub(crate) fn on_sidr_rep(&mut self, r: SidrRep) {
        let Some(k) = self.by_comm(r.request_id).filter(|k| self.ids[k].st == St::SidrSent) else { return };
        let Some(id) = self.ids.get_mut(&k) else { return };
        id.resend = None;
        let mut ev = EventBox::new(id.c, RDMA_CM_EVENT_ESTABLISHED, 0);
        ev.set_private(&r.private_data, private_len::SIDR_REP);
        if r.status != sidr::SUCCESS {
            id.st = St::Idle;
            ev.ev.event = RDMA_CM_EVENT_UNREACHABLE;
            ev.ev.status = std::ffi::c_int::from(r.status);
        } else if r.qkey == 0 || (!id.qp().is_null() && r.qkey != RDMA_UDP_QKEY) {
            // The kernel's cma_set_qkey: no Q_Key, or another than the one its QP took.
            id.st = St::Idle;
            ev.ev.event = RDMA_CM_EVENT_ADDR_ERROR;
            ev.ev.status = -libc::EINVAL;
        } else {
            id.st = St::Connected;
            id.remote_qpn = r.qpn;
            // SAFETY: the ud member of the event's union; the ID's path record, if any.
            unsafe {
                let u = &mut ev.ev.param.ud;
                u.qp_num = r.qpn;
                u.qkey = r.qkey;
                u.ah_attr = ah_attr(id);
            }
        }
        let chan = id.chan;
        self.post(chan, ev);
    }
}

/// The address handle's attributes that reach the peer of ID `id`, from its path record as
/// the kernel's `ib_init_ah_attr_from_path` makes them for RoCE: global, the path's GIDs,
/// hop limit, traffic class, flow label and SL, no LID.
fn ah_attr(id: &Id) -> ibv_ah_attr {
    // SAFETY: plain data; zero is a valid value.
    let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
    a.is_global = 1;
    a.port_num = 1;
    // SAFETY: the ID's path record (calloc'ed by rdma_resolve_route) or NULL.
    if let Some(p) = unsafe { (*id.c).route.path_rec.as_ref() } {
        a.grh.dgid = p.dgid;
        a.grh.flow_label = u32::from_be(p.flow_label);
        a.grh.hop_limit = p.hop_limit;
        a.grh.traffic_class = p.traffic_class;
        a.sl = p.sl;
    } else if let Some(d) = id.dst {
        a.grh.dgid.raw = d.ip().to_ipv6_mapped().octets();
        a.grh.hop_limit = 64;
    }
    a.grh.sgid_index = addr::sgid_index(id.dev.unwrap_or(0), id.src);
    a
}

/// The SIDR_REQ of UD ID `id`: rdma_cm's header, then `user`.
pub(crate) fn req_mad(id: &Id, tid: u64, user: &[u8]) -> Vec<u8> {
    let dst = id.dst.unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    let mut private_data = cma_hdr(id.src, dst).to_vec();
    private_data.extend_from_slice(user);
    let req =
        SidrReq { request_id: id.local_comm, pkey: 0xffff, service_id: service_id(id.ps(), dst.port()), private_data };
    Mad { tid, msg: CmMsg::SidrReq(req) }.encode().to_vec()
}

/// The SIDR_REP that answers ID `id`'s request: success with `qpn` and rdma_cm's UDP Q_Key,
/// or `status` without them; the request's transaction ID.
pub(crate) fn rep_mad(id: &Id, status: u8, qpn: u32, user: &[u8]) -> Vec<u8> {
    let ok = status == sidr::SUCCESS;
    let rep = SidrRep {
        request_id: id.remote_comm,
        status,
        qpn: if ok { qpn } else { 0 },
        service_id: service_id(id.ps(), id.src.port()),
        qkey: if ok { RDMA_UDP_QKEY } else { 0 },
        private_data: user.to_vec(),
    };
    Mad { tid: id.peer_tid, msg: CmMsg::SidrRep(rep) }.encode().to_vec()
}
