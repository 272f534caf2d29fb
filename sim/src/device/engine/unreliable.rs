//! The unreliable transports. UC is RC's requester and responder without the answers: a
//! message goes out once, as its UC opcodes, and completes when its packets have left; the
//! responder sends nothing back, drops a message it cannot take (no receive WQE, a bad R_Key)
//! without a NAK, and drops a message one of whose packets was lost, from the gap up to the
//! next FIRST or ONLY packet. READ and atomics are the device's to refuse (libmlx5 posts
//! them): the WQE completes in LOC_QP_OP_ERR.
//!
//! UD sends each WQE as one SEND ONLY datagram (BTH, DETH with the Q_Key and the source QP)
//! to the address vector its datagram segment carries; a message longer than the port's MTU
//! completes in LOC_LEN_ERR. The receiver takes a datagram whose Q_Key is the QP's, puts the
//! 40-byte GRH area at the head of the receive buffer and reports the source QP in the CQE.

use std::net::{IpAddr, Ipv4Addr};

use mlx5_dv::prm::{cqe, queues as q};
use mlx5_dv::{AhAttr, Gid, QpDest, QpState, Sge};

use super::responder::{Payload, Pulled, Request, Response, message_op};
use super::translate::Need;
use super::{Engine, Step, syndrome};
use crate::device::Device;
use crate::device::contract::{self, Cqe, Sender, Wqe, WqeKind};
use crate::device::firmware::{FwQp, PSN_MASK};
use crate::fabric::QpPath;
use crate::host::Dma;
use crate::packet::{Bth, Deth, Headers, opcode};
use crate::wire::{self, Endpoints, Message};

/// The bytes of the GRH area at the head of a UD receive buffer.
pub(super) const GRH_LEN: usize = 40;
/// The datagram segment of a UD send WQE (`struct mlx5_wqe_datagram_seg`).
pub(super) const AV_LEN: usize = 48;
/// `flags_rqpn`'s top byte with the L3 header type of a datagram that came with a GRH
/// (`MLX5_CQE_L3_HDR_TYPE_GRH`) or in IPv4 (`MLX5_CQE_L3_HDR_TYPE_IPV4`), bits 29:28.
const L3_GRH: u8 = 1 << 4;
const L3_IPV4: u8 = 2 << 4;
/// On RoCE the service-level nibble below carries the packet type (mlx5_ib's
/// `handle_responder` reads its L3 header type, bits 1:0: 0 GRH, 1 IPv6, 2 IPv4; bit 3 says
/// the frame had a UDP header, as UCX's `uct_ud_iface_check_grh` quotes the PRM).
const ROCE_V2_IPV4: u8 = 0x8 | 0x2;
/// A Q_Key with its top bit set in a WR stands for the sending QP's own (IBTA 10.2.5).
const CONTROLLED_QKEY: u32 = 0x8000_0000;

/// The UC opcode of an RC request opcode (SEND and RDMA WRITE: 0x00–0x0b).
pub(super) fn uc_opcode(rc: u8) -> u8 {
    rc | opcode::UC
}

/// Where a UD datagram goes, from a WQE's datagram segment.
pub(super) struct Datagram {
    pub(super) dest: QpDest,
    qkey: u32,
}

/// The address vector of a datagram segment (`struct mlx5_wqe_av`).
pub(super) fn parse_av(av: &[u8]) -> Option<Datagram> {
    let be32 = |at: usize| av.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let grh_gid_fl = be32(28)?;
    let mut dgid = [0u8; 16];
    dgid.copy_from_slice(av.get(32..48)?);
    let ah = AhAttr {
        dlid: u16::from_be_bytes([*av.get(14)?, *av.get(15)?]),
        is_global: grh_gid_fl & 1 << 30 != 0,
        dgid: Gid(dgid),
        sgid_index: (grh_gid_fl >> 20) as u8,
        hop_limit: *av.get(27)?,
        port_num: 1,
    };
    Some(Datagram { dest: QpDest { dest_qp_num: be32(8)? & 0xff_ffff, ah, path_mtu: 0 }, qkey: be32(0)? })
}

/// A UD WQE as the device reads it: the datagram segment after the control segment, and the
/// WQE decoded without it (the control segment's `ds` three units less).
fn decode_ud(bytes: &[u8]) -> Option<(Datagram, Wqe)> {
    let av = parse_av(bytes.get(16..16 + AV_LEN)?)?;
    let ds = usize::from(bytes.get(7)? & 0x3f);
    let end = (ds * 16).clamp(16 + AV_LEN, bytes.len());
    let mut rest = bytes.get(..16)?.to_vec();
    rest[7] = (rest[7] & !0x3f) | (ds.saturating_sub(3) as u8);
    rest.extend_from_slice(bytes.get(16 + AV_LEN..end)?);
    rest.resize(rest.len().next_multiple_of(64), 0);
    Some((av, contract::decode(&rest)))
}

/// The GRH area of a datagram between two GIDs: for RoCE v2 over IPv4 the IPv4 header the
/// packet travelled in, in its last 20 bytes (the first 20 zero), as mlx5 writes it;
/// otherwise an IPv6-format GRH (version 6, payload length, next header 0x1b, hop limit,
/// source and destination GIDs). With the top byte of the CQE's `flags_rqpn`: the L3 header type and, for IPv4, the RoCE packet type.
pub(super) fn grh_area(src: &Gid, dst: &Gid, h: &Headers, payload: &[u8], sport: u16) -> ([u8; GRH_LEN], u8) {
    let mut grh = [0u8; GRH_LEN];
    let v4 = |g: &Gid| std::net::Ipv6Addr::from(g.0).to_ipv4_mapped();
    if let (Some(s), Some(d)) = (v4(src), v4(dst)) {
        let ep = Endpoints::new(IpAddr::V4(s), IpAddr::V4(d), sport);
        if let Ok(ip) = wire::encode_ip(h, payload, &ep)
            && let Some(hdr) = ip.get(..20)
        {
            grh[20..].copy_from_slice(hdr);
        }
        return (grh, L3_IPV4 | ROCE_V2_IPV4);
    }
    let mut bth = Vec::new();
    h.encode(&mut bth);
    let paylen = bth.len() + payload.len().next_multiple_of(4) + 4;
    grh[0] = 0x60;
    grh[4..6].copy_from_slice(&(paylen as u16).to_be_bytes());
    grh[6] = 0x1b;
    grh[7] = 64;
    grh[8..24].copy_from_slice(&src.0);
    grh[24..40].copy_from_slice(&dst.0);
    (grh, L3_GRH)
}

impl Engine<'_> {
    /// UC and UD: the WQEs the device refuses on them (LOC_QP_OP_ERR), and UD's sends, done
    /// here; a DCI's data WQEs ([`Engine::dci`]); `None` for a WQE the connected path executes
    /// (RC, and UC's WRITEs and SENDs).
    pub(super) fn unreliable(&mut self, qp: QpPath, w: &Wqe, corrupt: super::responder::Corrupt) -> Option<Step> {
        let st = self.qp(qp)?.st;
        let connected = matches!(
            w.kind,
            Some(
                WqeKind::Nop | WqeKind::LocalInv { .. } | WqeKind::Umr(_) | WqeKind::BindMw(_) | WqeKind::SetPsv { .. }
            )
        );
        match st {
            q::st::UC => match &w.kind {
                Some(WqeKind::Write { .. } | WqeKind::Send { inv: None, .. }) => None,
                _ if connected => None,
                _ => Some(Step::Failed(syndrome::LOCAL_QP_OP)),
            },
            q::st::UD => match w.opcode {
                mlx5_dv::prm::wqe::opcode::SEND | mlx5_dv::prm::wqe::opcode::SEND_IMM => {
                    Some(self.ud_send(qp, w, corrupt))
                }
                _ if connected => None,
                _ => Some(Step::Failed(syndrome::LOCAL_QP_OP)),
            },
            q::st::DCI => self.dci(qp, w, corrupt),
            q::st::RAW => match w.opcode {
                mlx5_dv::prm::wqe::opcode::SEND => Some(self.raw_send(qp, w)),
                _ if connected => None,
                _ => Some(Step::Failed(syndrome::LOCAL_QP_OP)),
            },
            _ => None,
        }
    }

    /// A UC message to a peer on the network: its packets, with the UC opcodes, sent once;
    /// no answer will come. The response says whether the payload could be read.
    pub(super) fn send_uc(&mut self, qp: QpPath, peer: Ipv4Addr, req: &Request<'_>) -> Response {
        let failed = Response { packet: None, pulled: Pulled::Failed };
        let (mut data, hit) = match req.packet.payload {
            Payload::Dma(ep) => match self.gather(ep) {
                Ok(g) => g,
                Err(_) => return failed,
            },
            _ => match self.wire_payload(req) {
                Some(b) => (b, None),
                None => return failed,
            },
        };
        if let Some((off, xor)) = req.corrupt
            && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
        {
            *b ^= xor;
        }
        let h = req.packet.headers;
        let mtu = usize::try_from(self.mtu_bytes(qp)).unwrap_or(4096);
        if let Some(op) = message_op(&h) {
            let m = Message { op, dest_qp: h.bth.dest_qp, pkey: h.bth.pkey, psn: h.bth.psn, len: data.len(), mtu };
            let segs: Vec<_> = wire::segments(&m).collect();
            let packets: Vec<(Headers, &[u8])> = segs
                .iter()
                .map(|s| {
                    let mut p = s.headers;
                    (p.bth.opcode, p.bth.ack_req) = (uc_opcode(p.bth.opcode), false);
                    (p, data.get(s.range.clone()).unwrap_or(&[]))
                })
                .collect();
            self.send_packets(qp.dev, (qp.qpn, h.bth.dest_qp), peer, &packets);
        }
        self.give_scratch(qp.dev, data);
        Response { packet: None, pulled: Pulled::Yes(hit) }
    }

    /// Whether `qp` is a UC or UD QP: no answers, no retransmission.
    pub(super) fn is_unreliable(&self, qp: QpPath) -> bool {
        self.qp(qp).is_some_and(|q| matches!(q.st, q::st::UC | q::st::UD))
    }

    /// The bytes of the WQE at send-queue counter `pos` of `q`, across the ring's end.
    pub(super) fn wqe_bytes(&self, q: &FwQp, pos: u32, bbs: u32) -> Option<Vec<u8>> {
        let ring = self.host.read(q.sq.addr, q.sq.len())?;
        let cnt = q.sq.wqe_cnt;
        let mut out = Vec::with_capacity(bbs as usize * 64);
        for i in 0..bbs.max(1) {
            let at = (pos.wrapping_add(i) & cnt.wrapping_sub(1)) as usize * 64;
            out.extend_from_slice(ring.get(at..at + 64)?);
        }
        Some(out)
    }

    /// The bytes of the port MTU of device `dev` (a UD message's limit).
    fn port_mtu(&self, dev: usize) -> usize {
        let mtu = self.fabric.port(dev).map_or(5, |p| p.active_mtu).clamp(1, 5);
        128 << mtu
    }

    /// A UD SEND: one datagram to the WQE's address vector, complete once sent.
    fn ud_send(&mut self, qp: QpPath, w: &Wqe, corrupt: super::responder::Corrupt) -> Step {
        let Some(fq) = self.qp(qp) else { return Step::Failed(syndrome::LOCAL_QP_OP) };
        let (own_qkey, psn) = (fq.transport.qkey, fq.transport.sq_psn);
        let pos = self.cursor.map_or(fq.sq_cc, |(p, _)| p);
        let Some((dg, ud)) = self.wqe_bytes(fq, pos, w.bbs).and_then(|b| decode_ud(&b)) else {
            return Step::Failed(syndrome::LOCAL_QP_OP);
        };
        let Some(WqeKind::Send { sge, imm, inv: None, inline }) = &ud.kind else {
            return Step::Failed(syndrome::LOCAL_QP_OP);
        };
        let mtu = self.port_mtu(qp.dev);
        let mut data = match self.datagram_bytes(qp, sge, inline.as_deref(), mtu as u64) {
            Ok(d) => d,
            Err(s) => return Step::Failed(s),
        };
        if data.len() > mtu {
            return Step::Failed(syndrome::LOCAL_LENGTH);
        }
        if let Some((off, xor)) = corrupt
            && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
        {
            *b ^= xor;
        }
        let qkey = if dg.qkey & CONTROLLED_QKEY != 0 { own_qkey } else { dg.qkey };
        let dest_qp = dg.dest.dest_qp_num;
        let h = Headers {
            bth: Bth {
                opcode: if imm.is_some() { opcode::UD_SEND_ONLY_IMM } else { opcode::UD_SEND_ONLY },
                se: w.solicited,
                pkey: 0xffff,
                dest_qp,
                psn,
                ..Bth::default()
            },
            imm: *imm,
            deth: Some(Deth { qkey, src_qp: qp.qpn }),
            ..Headers::default()
        };
        if let Some(t) = self.dev(qp.dev).and_then(|d| d.fw.transport_mut(qp.qpn)) {
            t.sq_psn = t.sq_psn.wrapping_add(1) & PSN_MASK;
        }
        if self.to_a_group(&dg.dest) {
            let sgid = self.gid_at(qp.dev, dg.dest.ah.sgid_index);
            self.send_multicast(qp, &sgid, &dg.dest.ah.dgid, &h, &data);
        } else if let Some(to) = self.fabric.deliver(&dg.dest) {
            let sgid = self.gid_at(qp.dev, dg.dest.ah.sgid_index);
            let (grh, l3) = grh_area(&sgid, &dg.dest.ah.dgid, &h, &data, Endpoints::entropy_port(qp.qpn, dest_qp));
            self.capture_ud(qp, to, &h, &data);
            self.receive_ud(to, &h, &data, (grh, l3));
            self.settle_responders();
        } else if let Some(peer) = self.fabric.remote(qp.dev, &dg.dest.ah) {
            self.send_packets(qp.dev, (qp.qpn, dest_qp), peer, &[(h, &data)]);
        }
        // A datagram to an address no port has is lost: UD has no answer to wait for.
        self.give_scratch(qp.dev, data);
        Step::Done(Device::success(qp.qpn, w, 0))
    }

    /// A datagram's bytes: the inline data, or what the SGEs gather (past `max` bytes
    /// LOC_LEN_ERR, a bad key or address its syndrome).
    pub(super) fn datagram_bytes(
        &mut self,
        qp: QpPath,
        sge: &[Sge],
        inline: Option<&[u8]>,
        max: u64,
    ) -> Result<Vec<u8>, u8> {
        if let Some(b) = inline {
            return Ok(b.to_vec());
        }
        let at = self.at(qp);
        if self.wire_len(at.dev, sge) > max {
            return Err(syndrome::LOCAL_LENGTH);
        }
        let ep = self.local_endpoint(at, sge, Need::LocalRead, None).map_err(|f| f.syndrome)?;
        self.gather(&ep).map(|(d, _)| d).map_err(|_| syndrome::LOCAL_PROT)
    }

    /// GID `index` of device `dev`'s port (GID 0's when there is no such entry).
    fn gid_at(&self, dev: usize, index: u8) -> Gid {
        let table = self.fabric.gid_table(dev);
        table.get(usize::from(index)).or(table.first()).map(|(g, _)| *g).unwrap_or_default()
    }

    /// A datagram delivered in this process, written to the capture as its packet.
    fn capture_ud(&self, from: QpPath, to: QpPath, h: &Headers, data: &[u8]) {
        let Some(cap) = self.fabric.capture() else { return };
        let (Some(a), Some(b)) = (self.fabric.port(from.dev), self.fabric.port(to.dev)) else { return };
        if let Some(link) = crate::fabric::Link::between(a, from.qpn, b, to.qpn) {
            cap.packet(&link, h, data);
            cap.flush();
        }
    }

    /// A UD datagram arrived at device `dev`'s port from `from` over the network: taken as
    /// [`Engine::receive_ud`] takes it, with the IPv4 header it came in. False if dropped.
    pub(super) fn rx_ud(&mut self, dev: usize, from: std::net::SocketAddrV4, h: &Headers, payload: &[u8]) -> bool {
        let Some(port) = self.fabric.net_port(dev) else { return false };
        let (src, dst): (Ipv4Addr, Ipv4Addr) = (*from.ip(), port.addr());
        let map = |a: Ipv4Addr| Gid(a.to_ipv6_mapped().octets());
        let grh = grh_area(&map(src), &map(dst), h, payload, from.port());
        let taken = self.receive_ud(QpPath { dev, qpn: h.bth.dest_qp }, h, payload, grh);
        self.settle_responders();
        taken
    }

    /// The responder of a UD QP takes a datagram: in RTR or RTS, with the QP's Q_Key, into
    /// the next receive WQE, the GRH area first. A receive buffer too short for the GRH and
    /// the payload completes in LOC_LEN_ERR (and the QP goes to ERR). False if dropped
    /// (counted with the network's drops).
    pub(super) fn receive_ud(&mut self, at: QpPath, h: &Headers, data: &[u8], (grh, l3): ([u8; GRH_LEN], u8)) -> bool {
        let ok = self.qp(at).is_some_and(|q| {
            q.st == q::st::UD
                && matches!(q.state, QpState::Rtr | QpState::Rts)
                && h.deth.is_some_and(|d| d.qkey == q.transport.qkey)
        });
        let r = if ok { self.pop_recv(at) } else { None };
        let (Some(r), Some(deth)) = (r, h.deth) else {
            if let Some(d) = self.dev(at.dev) {
                d.net.dropped = d.net.dropped.saturating_add(1);
            }
            return false;
        };
        let len = data.len() + GRH_LEN;
        let pat = self.at(at);
        let target = if (len as u64) <= self.wire_len(at.dev, &r.sge) {
            self.local_endpoint(pat, &r.sge, Need::LocalWrite, Some(len as u64)).map_err(|_| syndrome::LOCAL_PROT)
        } else {
            Err(syndrome::LOCAL_LENGTH)
        };
        let placed = target.and_then(|t| {
            let mut buf = Vec::with_capacity(len);
            buf.extend_from_slice(&grh);
            buf.extend_from_slice(data);
            self.scatter(&buf, &t).map_err(|_| syndrome::LOCAL_PROT)
        });
        if let Err(s) = placed {
            self.recv_error(at, r.index, s);
            self.pending.push((at, None));
            return true;
        }
        let Some(rcq) = self.qp(at).map(|q| q.recv_cqn) else { return true };
        let (opcode, imm) = match h.imm {
            Some(i) => (cqe::opcode::RESP_SEND_IMM, i),
            None => (cqe::opcode::RESP_SEND, 0),
        };
        let from = Sender { qpn: deth.src_qp, slid: 0, flags: l3, srqn: 0, flow_tag: 0 };
        let byte_cnt = u32::try_from(len).unwrap_or(u32::MAX);
        let cqe =
            Cqe::Resp { qpn: at.qpn, wqe_counter: r.index, opcode, byte_cnt, imm, inline: None, from, se: h.bth.se };
        self.push_cqe(at.dev, rcq, cqe);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ud_wqe_reads_as_its_send_after_the_datagram_segment() {
        let mut b = vec![0u8; 128];
        b[3] = mlx5_dv::prm::wqe::opcode::SEND;
        b[7] = 5; // control, datagram (3), one data segment
        b[16..20].copy_from_slice(&0x1111_2222u32.to_be_bytes());
        b[24..28].copy_from_slice(&(0x8000_0000u32 | 0x42).to_be_bytes());
        b[44..48].copy_from_slice(&(1u32 << 30 | 3 << 20).to_be_bytes());
        b[64..68].copy_from_slice(&100u32.to_be_bytes());
        b[68..72].copy_from_slice(&7u32.to_be_bytes());
        b[72..80].copy_from_slice(&0x1000u64.to_be_bytes());
        let (dg, w) = decode_ud(&b).expect("a UD WQE");
        assert_eq!(
            (dg.qkey, dg.dest.dest_qp_num, dg.dest.ah.sgid_index, dg.dest.ah.is_global),
            (0x1111_2222, 0x42, 3, true)
        );
        match w.kind {
            Some(WqeKind::Send { sge, imm: None, inv: None, inline: None }) => {
                assert_eq!(sge.as_slice(), &[mlx5_dv::Sge { addr: 0x1000, length: 100, lkey: 7 }]);
            }
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn the_grh_area_of_roce_v2_over_ipv4_holds_the_ip_header_last() {
        let g = |a: [u8; 4]| Gid(Ipv4Addr::from(a).to_ipv6_mapped().octets());
        let h = Headers {
            bth: Bth { opcode: opcode::UD_SEND_ONLY, ..Bth::default() },
            deth: Some(Deth::default()),
            ..Headers::default()
        };
        let (grh, l3) = grh_area(&g([127, 0, 0, 1]), &g([127, 0, 0, 2]), &h, &[0; 10], 0xc000);
        assert_eq!(l3, L3_IPV4 | 0xa, "IPv4 and the packet type RoCE v2 over IPv4");
        assert_eq!(grh[..20], [0; 20]);
        assert_eq!(grh[20], 0x45, "IPv4, five words");
        assert_eq!(u16::from_be_bytes([grh[22], grh[23]]), 20 + 8 + 12 + 8 + 12 + 4, "IP total length");
        assert_eq!(grh[32..40], [127, 0, 0, 1, 127, 0, 0, 2]);
        let ll = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let (grh, l3) = grh_area(&ll, &ll, &h, &[0; 10], 0xc000);
        assert_eq!((l3, grh[0], grh[6]), (L3_GRH, 0x60, 0x1b));
    }
}
