//! Raw Ethernet QPs: a SEND puts the WQE's bytes (after the Ethernet segment: inline data or
//! the gathered SGEs) on the port as one frame; each device of the process's fabric, the
//! sender's own among them (the NIC's loopback), hands the frame to the raw QPs its steering
//! rules pick (an RSS QP's hash picking one of its WQs); each takes it into its next receive
//! WQE and completes with the frame's length.

use mlx5_dv::prm::cqe;
use mlx5_dv::prm::wqe::{SEND_WQE_BB, SEND_WQE_DS};
use mlx5_dv::{QpState, Sge};

use super::translate::Need;
use super::{Engine, Step, syndrome};
use crate::device::Device;
use crate::device::contract::{self, Cqe, Sender, Wqe, WqeKind};
use crate::device::{dr, steering};
use crate::fabric::QpPath;

/// The largest frame a raw QP sends without TSO: a 9000-byte MTU and its Ethernet header and
/// VLAN tag. Unverified: the port's `max_mtu` decides on hardware.
const MAX_FRAME: u64 = 9000 + 14 + 4;

/// A raw WQE as the device reads it: the Ethernet segment after the control segment taken out
/// (`ds` one unit less). `None` for a WQE whose segment carries inline headers, which a device
/// with no minimum inline mode is never given by libmlx5.
fn decode_raw(bytes: &[u8]) -> Option<Wqe> {
    let eth = bytes.get(SEND_WQE_DS..2 * SEND_WQE_DS)?;
    if u16::from_be_bytes([eth[12], eth[13]]) != 0 {
        return None;
    }
    let ds = usize::from(bytes.get(7)? & 0x3f);
    let end = (ds * SEND_WQE_DS).clamp(2 * SEND_WQE_DS, bytes.len());
    let mut rest = bytes.get(..SEND_WQE_DS)?.to_vec();
    rest[7] = (rest[7] & !0x3f) | (ds.saturating_sub(1) as u8);
    rest.extend_from_slice(bytes.get(2 * SEND_WQE_DS..end)?);
    rest.resize(rest.len().next_multiple_of(SEND_WQE_BB), 0);
    Some(contract::decode(&rest))
}

impl Engine<'_> {
    /// A raw QP's SEND: the frame out, to every device's steering, complete once sent.
    pub(super) fn raw_send(&mut self, qp: QpPath, w: &Wqe) -> Step {
        let Some(fq) = self.qp(qp) else { return Step::Failed(syndrome::LOCAL_QP_OP) };
        let pos = self.cursor.map_or(fq.sq_cc, |(p, _)| p);
        let Some(raw) = self.wqe_bytes(fq, pos, w.bbs).and_then(|b| decode_raw(&b)) else {
            return Step::Failed(syndrome::LOCAL_QP_OP);
        };
        let Some(WqeKind::Send { sge, imm: None, inv: None, inline }) = &raw.kind else {
            return Step::Failed(syndrome::LOCAL_QP_OP);
        };
        let frame = match self.datagram_bytes(qp, sge, inline.as_deref(), MAX_FRAME) {
            Ok(f) => f,
            Err(s) => return Step::Failed(s),
        };
        // The sender's transmit steering first: what it lets out goes on the wire.
        let wire = match self.dev(qp.dev).and_then(|d| d.dr.process(dr::NIC_TX, &frame)) {
            Some(out) => {
                self.count_dr(qp.dev, &out.counted);
                out.wire
            }
            None => vec![frame],
        };
        for frame in &wire {
            for dev in 0..self.devs.len() {
                self.steer_received(dev, frame);
            }
        }
        self.settle_responders();
        Step::Done(Device::success(qp.qpn, w, 0))
    }

    /// Count frames on flow counters of device `dev`.
    fn count_dr(&mut self, dev: usize, counted: &[(u32, u64)]) {
        if let Some(d) = self.dev(dev) {
            for (id, bytes) in counted {
                d.count_flow(*id, *bytes);
            }
        }
    }

    /// A frame arriving at device `dev`: its receive steering (`mlx5dv_dr`) when a root rule
    /// takes it, else the verbs flow rules.
    fn steer_received(&mut self, dev: usize, frame: &[u8]) {
        if let Some(out) = self.dev(dev).and_then(|d| d.dr.process(dr::NIC_RX, frame)) {
            self.count_dr(dev, &out.counted);
            for (dest, bytes, tag) in out.delivered {
                let to = match dest {
                    dr::DrDest::Qp(q) => Some(q),
                    dr::DrDest::Tir(t) => self.devs.get(dev).and_then(|d| d.tir_rq(t)),
                };
                if let Some(qpn) = to {
                    self.receive_frame(QpPath { dev, qpn }, &bytes, tag.unwrap_or(0));
                }
            }
            return;
        }
        let (to, counters) = self.devs.get(dev).map(|d| steering::steer_counting(d.flows(), frame)).unwrap_or_default();
        if let Some(d) = self.dev(dev) {
            for id in counters {
                d.count_flow(id, frame.len() as u64);
            }
        }
        let to: Vec<_> = match self.devs.get(dev) {
            Some(d) => to.into_iter().map(|q| (d.rss_target(q, frame), d.flow_tag(q, frame))).collect(),
            None => Vec::new(),
        };
        for (qpn, tag) in to {
            self.receive_frame(QpPath { dev, qpn }, frame, tag);
        }
    }

    /// A raw QP in RTR or RTS takes a frame into its next receive WQE; with none posted, or
    /// in another state, the frame is dropped (and counted). A buffer too short is
    /// LOC_LEN_ERR.
    fn receive_frame(&mut self, at: QpPath, frame: &[u8], flow_tag: u32) {
        let ok = self
            .qp(at)
            .is_some_and(|q| q.st == mlx5_dv::prm::queues::st::RAW && matches!(q.state, QpState::Rtr | QpState::Rts));
        let Some(r) = ok.then(|| self.pop_recv(at)).flatten() else {
            if let Some(d) = self.dev(at.dev) {
                d.net.dropped = d.net.dropped.saturating_add(1);
            }
            return;
        };
        let pat = self.at(at);
        let len = frame.len();
        let sge: &[Sge] = &r.sge;
        let target = if (len as u64) <= self.wire_len(at.dev, sge) {
            self.local_endpoint(pat, sge, Need::LocalWrite, Some(len as u64)).map_err(|_| syndrome::LOCAL_PROT)
        } else {
            Err(syndrome::LOCAL_LENGTH)
        };
        if let Err(s) = target.and_then(|t| self.scatter(frame, &t).map_err(|_| syndrome::LOCAL_PROT)) {
            self.recv_error(at, r.index, s);
            self.pending.push((at, None));
            return;
        }
        let Some(rcq) = self.qp(at).map(|q| q.recv_cqn) else { return };
        let from = Sender { qpn: 0, slid: 0, flags: 0, srqn: 0, flow_tag };
        let byte_cnt = u32::try_from(len).unwrap_or(u32::MAX);
        let cqe = Cqe::Resp {
            qpn: at.qpn,
            wqe_counter: r.index,
            opcode: cqe::opcode::RESP_SEND,
            byte_cnt,
            imm: 0,
            inline: None,
            from,
            se: false,
        };
        self.push_cqe(at.dev, rcq, cqe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_wqe_reads_as_its_send_after_the_eth_segment() {
        let mut b = vec![0u8; 64];
        b[3] = mlx5_dv::prm::wqe::opcode::SEND;
        b[7] = 3; // control, Ethernet segment, one data segment
        b[32..36].copy_from_slice(&60u32.to_be_bytes());
        b[36..40].copy_from_slice(&7u32.to_be_bytes());
        b[40..48].copy_from_slice(&0x1000u64.to_be_bytes());
        match decode_raw(&b).expect("a raw WQE").kind {
            Some(WqeKind::Send { sge, inline: None, .. }) => {
                assert_eq!(sge.as_slice(), &[Sge { addr: 0x1000, length: 60, lkey: 7 }]);
            }
            k => panic!("{k:?}"),
        }
        b[29] = 18; // inline_hdr_sz
        assert!(decode_raw(&b).is_none(), "inline headers are not read");
    }
}
