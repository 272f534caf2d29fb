//! One UD QP of a datagram rsocket: its CM ID (the UDP port space, bound to the socket's
//! address), CQ, send slots and receive slots, the address handle to itself, and the
//! address handles to peers that route resolution makes.

use std::ffi::c_int;
use std::net::{Ipv4Addr, SocketAddrV4};

use rdma_sys::*;

use crate::rsocket::data::{errno_or, post_recv};
use mlx5_sim::wire::rsocket_dgram::{DS_HDR_LEN, DsHdr, SLOT};

/// The GRH a UD receive begins with.
pub(crate) const GRH: usize = 40;
/// `wr_id` bit of send work requests (receives carry their slot).
const SEND_BIT: u64 = 1 << 63;
/// rdma_cm's Q_Key of the UDP port space.
const UDP_QKEY: u32 = 0x0123_4567;
/// How long a route resolution may take (ms; the shim's CM answers at once).
const RESOLVE_MS: c_int = 2000;

/// A received message: its slot, and the bytes after the GRH.
pub(crate) struct Rmsg {
    pub(crate) slot: usize,
    pub(crate) len: usize,
}

/// One UD QP and its buffers.
pub(crate) struct DsQp {
    id: *mut rdma_cm_id,
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
    /// The address the QP stands for (the socket's, with this host's IP).
    pub(crate) src: SocketAddrV4,
    pub(crate) qpn: u32,
    self_ah: *mut ibv_ah,
    rbuf: Box<[u8]>,
    rmr: *mut ibv_mr,
    sbuf: Box<[u8]>,
    smr: *mut ibv_mr,
    free: Vec<usize>,
    sq: usize,
    inline: usize,
    /// The most bytes one datagram carries after its header (the port's MTU, a slot).
    pub(crate) max_data: usize,
    /// A completion failed: the QP takes no more work.
    pub(crate) broken: bool,
}

// SAFETY: the raw verbs objects are the shim's; a datagram rsocket is used under its mutex.
unsafe impl Send for DsQp {}

/// A CM ID in synchronous mode in the UDP port space, destroyed when dropped.
struct TempId(*mut rdma_cm_id);

impl TempId {
    fn new() -> Result<TempId, c_int> {
        let mut id = std::ptr::null_mut();
        // SAFETY: the shim's own librdmacm; NULL channel: synchronous mode.
        let r = unsafe {
            crate::cm::rdma_create_id(std::ptr::null_mut(), &mut id, std::ptr::null_mut(), rdma_port_space::RDMA_PS_UDP)
        };
        if r != 0 || id.is_null() {
            return Err(errno_or(libc::ENOMEM));
        }
        Ok(TempId(id))
    }

    /// Resolve the address (from `src`, if any) and the route to `dst`.
    fn resolve(&self, src: Option<Ipv4Addr>, dst: SocketAddrV4, route: bool) -> Result<(), c_int> {
        let mut d = sockaddr(dst);
        let mut s = src.map(|ip| sockaddr(SocketAddrV4::new(ip, 0)));
        let sp = s.as_mut().map_or(std::ptr::null_mut(), |s| (s as *mut libc::sockaddr_in).cast());
        // SAFETY: our ID; the addresses live across the calls.
        unsafe {
            if crate::cm::rdma_resolve_addr(self.0, sp, (&mut d as *mut libc::sockaddr_in).cast(), RESOLVE_MS) != 0 {
                return Err(errno_or(libc::EHOSTUNREACH));
            }
            if route && crate::cm::rdma_resolve_route(self.0, RESOLVE_MS) != 0 {
                return Err(errno_or(libc::EHOSTUNREACH));
            }
        }
        Ok(())
    }
}

impl Drop for TempId {
    fn drop(&mut self) {
        // SAFETY: our ID.
        unsafe { crate::cm::rdma_destroy_id(self.0) };
    }
}

/// A `struct sockaddr_in` of `a`.
pub(crate) fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: plain data.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    s
}

/// The address of a `struct sockaddr_in`.
pub(crate) fn from_sockaddr(s: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)), u16::from_be(s.sin_port))
}

/// The IP this host's simulated port reaches `dst` from (the CM's address resolution, as
/// rsocket.c asks the kernel with a connected UDP socket).
pub(crate) fn source_ip(dst: SocketAddrV4) -> Result<Ipv4Addr, c_int> {
    let t = TempId::new()?;
    t.resolve(None, dst, false)?;
    // SAFETY: our ID, its route written by the resolution.
    let s = unsafe { (*t.0).route.addr.src_addr_union.src_sin };
    Ok(*from_sockaddr(&s).ip())
}

impl DsQp {
    /// A UD QP for `src` with `sq` send and `rq` receive slots, the receives posted.
    pub(crate) fn new(src: SocketAddrV4, sq: usize, rq: usize, inline: usize) -> Result<DsQp, c_int> {
        let mut id = std::ptr::null_mut();
        let mut s = sockaddr(src);
        // SAFETY: the shim's own librdmacm and verbs; every object made is kept in `q` and
        // freed by destroy() on failure.
        unsafe {
            if crate::cm::rdma_create_id(
                std::ptr::null_mut(),
                &mut id,
                std::ptr::null_mut(),
                rdma_port_space::RDMA_PS_UDP,
            ) != 0
            {
                return Err(errno_or(libc::ENOMEM));
            }
            let mut q = DsQp {
                id,
                cq: std::ptr::null_mut(),
                qp: std::ptr::null_mut(),
                src,
                qpn: 0,
                self_ah: std::ptr::null_mut(),
                rbuf: vec![0u8; rq * (GRH + SLOT)].into_boxed_slice(),
                rmr: std::ptr::null_mut(),
                sbuf: vec![0u8; sq * SLOT].into_boxed_slice(),
                smr: std::ptr::null_mut(),
                free: (0..sq).rev().collect(),
                sq,
                inline,
                max_data: SLOT - DS_HDR_LEN,
                broken: false,
            };
            if let Err(e) = q.build(&mut s, rq) {
                q.destroy();
                return Err(e);
            }
            Ok(q)
        }
    }

    /// # Safety
    /// `self.id` is a fresh ID of ours.
    unsafe fn build(&mut self, s: &mut libc::sockaddr_in, rq: usize) -> Result<(), c_int> {
        // SAFETY: as new().
        unsafe {
            if crate::cm::rdma_bind_addr(self.id, (s as *mut libc::sockaddr_in).cast()) != 0 {
                return Err(errno_or(libc::EADDRNOTAVAIL));
            }
            let ctx = (*self.id).verbs;
            if ctx.is_null() {
                return Err(libc::ENODEV);
            }
            let cqe = c_int::try_from(self.sq + rq).unwrap_or(c_int::MAX);
            self.cq = crate::queue::ibv_create_cq(ctx, cqe, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            if self.cq.is_null() {
                return Err(errno_or(libc::ENOMEM));
            }
            let mut a: ibv_qp_init_attr = std::mem::zeroed();
            a.send_cq = self.cq;
            a.recv_cq = self.cq;
            a.qp_type = ibv_qp_type::IBV_QPT_UD;
            a.sq_sig_all = 1;
            a.cap.max_send_wr = self.sq as u32;
            a.cap.max_recv_wr = rq as u32;
            a.cap.max_send_sge = 1;
            a.cap.max_recv_sge = 1;
            a.cap.max_inline_data = self.inline as u32;
            if crate::cm::qp::rdma_create_qp(self.id, std::ptr::null_mut(), &mut a) != 0 {
                return Err(errno_or(libc::ENOMEM));
            }
            self.qp = (*self.id).qp;
            self.qpn = (*self.qp).qp_num;
            self.inline = a.cap.max_inline_data as usize;
            let pd = (*self.id).pd;
            let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as c_int;
            self.rmr = crate::mr::ibv_reg_mr(pd, self.rbuf.as_mut_ptr().cast(), self.rbuf.len().max(1), access);
            self.smr = crate::mr::ibv_reg_mr(pd, self.sbuf.as_mut_ptr().cast(), self.sbuf.len().max(1), 0);
            if self.rmr.is_null() || self.smr.is_null() {
                return Err(errno_or(libc::ENOMEM));
            }
            let (ah, mtu) = self.ah_to(self.src)?;
            self.self_ah = ah;
            self.max_data = mtu.min(SLOT) - DS_HDR_LEN;
            for i in 0..rq {
                self.post_recv(i)?;
            }
        }
        Ok(())
    }

    /// An address handle from this QP's port to `dst` (route resolution, as rsocket.c's
    /// service thread makes one) and the path's MTU in bytes.
    pub(crate) fn ah_to(&self, dst: SocketAddrV4) -> Result<(*mut ibv_ah, usize), c_int> {
        let t = TempId::new()?;
        t.resolve(Some(*self.src.ip()), dst, true)?;
        // SAFETY: plain data; our ID's path record and this QP's device.
        unsafe {
            let p = (*t.0).route.path_rec.as_ref().ok_or(libc::EHOSTUNREACH)?;
            let mut a: ibv_ah_attr = std::mem::zeroed();
            a.is_global = 1;
            a.grh.dgid = p.dgid;
            a.grh.flow_label = u32::from_be(p.flow_label);
            a.grh.hop_limit = p.hop_limit;
            a.grh.traffic_class = p.traffic_class;
            a.grh.sgid_index = self.sgid_index(&p.sgid);
            a.sl = p.sl;
            a.port_num = (*self.id).port_num.max(1);
            let mtu = 128usize << p.mtu.clamp(1, 5);
            let ah = crate::ah::ibv_create_ah((*self.id).pd, &mut a);
            if ah.is_null() {
                return Err(errno_or(libc::ENOMEM));
            }
            Ok((ah, mtu))
        }
    }

    /// The index of the RoCE v2 entry of `gid` in this port's table (3, the first IPv4
    /// entry's, if none).
    fn sgid_index(&self, gid: &ibv_gid) -> u8 {
        // SAFETY: our ID's device; the GIDs are plain data.
        unsafe {
            let ctx = (*self.id).verbs;
            for i in 0..16u8 {
                let mut g: ibv_gid = std::mem::zeroed();
                let mut ty = 0u32;
                if crate::device::ibv_query_gid(ctx, 1, c_int::from(i), &mut g) == 0
                    && g.raw == gid.raw
                    && crate::device::ibv_query_gid_type(ctx, 1, u32::from(i), &mut ty) == 0
                    && ty == 2
                {
                    return i;
                }
            }
        }
        3
    }

    fn post_recv(&mut self, i: usize) -> Result<(), c_int> {
        let n = GRH + SLOT;
        // SAFETY: registered in build().
        let lkey = unsafe { (*self.rmr).lkey };
        let buf = self.rbuf.get_mut(i * n..(i + 1) * n).ok_or(libc::EINVAL)?;
        // SAFETY: our QP; the slot lives as long as the QP.
        unsafe { post_recv(self.qp, i as u64, buf, lkey) }
    }

    /// Give a received slot back to the QP.
    pub(crate) fn repost(&mut self, slot: usize) {
        if !self.broken && self.post_recv(slot).is_err() {
            self.broken = true;
        }
    }

    /// Whether a send slot is free.
    pub(crate) fn can_send(&self) -> bool {
        !self.free.is_empty()
    }

    /// Whether every send completed.
    pub(crate) fn sends_done(&self) -> bool {
        self.free.len() == self.sq || self.broken
    }

    /// SEND `hdr` then `data` to QP `qpn` through `ah` (None: this QP itself). Err(EAGAIN)
    /// with no free slot.
    pub(crate) fn send(&mut self, ah: Option<*mut ibv_ah>, qpn: u32, hdr: &DsHdr, data: &[u8]) -> Result<(), c_int> {
        if self.broken {
            return Err(libc::EIO);
        }
        let len = DS_HDR_LEN + data.len();
        if len > SLOT {
            return Err(libc::EMSGSIZE);
        }
        let slot = self.free.pop().ok_or(libc::EAGAIN)?;
        let at = slot * SLOT;
        self.sbuf[at..at + DS_HDR_LEN].copy_from_slice(&hdr.encode());
        self.sbuf[at + DS_HDR_LEN..at + len].copy_from_slice(data);
        let mut sge = ibv_sge {
            addr: self.sbuf[at..].as_ptr() as u64,
            length: len as u32,
            // SAFETY: registered in build().
            lkey: unsafe { (*self.smr).lkey },
        };
        // SAFETY: plain data.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = SEND_BIT | slot as u64;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
        if len <= self.inline {
            wr.send_flags |= ibv_send_flags::IBV_SEND_INLINE.0;
        }
        wr.wr.ud.ah = ah.unwrap_or(self.self_ah);
        wr.wr.ud.remote_qpn = qpn;
        wr.wr.ud.remote_qkey = UDP_QKEY;
        let mut bad = std::ptr::null_mut();
        // SAFETY: the shim's QP and its ops; `wr` and `sge` live across the call.
        let r = unsafe { (*(*self.qp).context).ops.post_send.map_or(libc::ENOSYS, |f| f(self.qp, &mut wr, &mut bad)) };
        if r != 0 {
            self.free.push(slot);
            return Err(r);
        }
        Ok(())
    }

    /// Poll the CQ: sends free their slots; valid receives (a GRH and a datagram header)
    /// are handed to `got`, the rest reposted.
    pub(crate) fn poll(&mut self, mut got: impl FnMut(Rmsg)) {
        // SAFETY: plain data.
        let mut wcs: [ibv_wc; 16] = unsafe { std::mem::zeroed() };
        for _ in 0..64 {
            // SAFETY: the shim's CQ and its ops; 16 entries.
            let n = unsafe { (*(*self.cq).context).ops.poll_cq.map_or(-1, |f| f(self.cq, 16, wcs.as_mut_ptr())) };
            if n <= 0 {
                return;
            }
            for wc in &wcs[..n as usize] {
                let ok = wc.status == ibv_wc_status::IBV_WC_SUCCESS;
                if wc.wr_id & SEND_BIT != 0 {
                    let slot = (wc.wr_id & !SEND_BIT) as usize;
                    if slot < self.sq && !self.free.contains(&slot) {
                        self.free.push(slot);
                    }
                    self.broken |= !ok;
                    continue;
                }
                let slot = wc.wr_id as usize;
                let len = wc.byte_len as usize;
                if slot >= self.rbuf.len() / (GRH + SLOT) {
                    continue;
                }
                let fits = (GRH + DS_HDR_LEN..=GRH + SLOT).contains(&len);
                if ok && fits && DsHdr::decode(self.data(slot, len)).is_some() {
                    got(Rmsg { slot, len: len - GRH });
                } else if ok {
                    self.repost(slot);
                } else {
                    self.broken = true;
                }
            }
        }
    }

    /// The bytes of a received slot after the GRH (`len` of them, header first).
    pub(crate) fn data(&self, slot: usize, len: usize) -> &[u8] {
        let at = slot * (GRH + SLOT) + GRH;
        self.rbuf.get(at..at + len.min(SLOT)).unwrap_or(&[])
    }

    /// Free the QP, its CQ, registrations and address handle, and its ID.
    pub(crate) fn destroy(&mut self) {
        // SAFETY: our own objects, freed once (the fields are cleared).
        unsafe {
            if !self.self_ah.is_null() {
                crate::ah::ibv_destroy_ah(self.self_ah);
                self.self_ah = std::ptr::null_mut();
            }
            if !self.id.is_null() {
                crate::cm::qp::rdma_destroy_qp(self.id);
            }
            for mr in [&mut self.rmr, &mut self.smr] {
                if !mr.is_null() {
                    crate::mr::ibv_dereg_mr(*mr);
                    *mr = std::ptr::null_mut();
                }
            }
            if !self.cq.is_null() {
                crate::queue::ibv_destroy_cq(self.cq);
                self.cq = std::ptr::null_mut();
            }
            if !self.id.is_null() {
                crate::cm::rdma_destroy_id(self.id);
                self.id = std::ptr::null_mut();
            }
        }
    }
}
