//! Dynamically connected transport, between the devices of one process. A DCI's WQE carries
//! the DCT's address, number and access key in its datagram segment (as
//! `mlx5_send_wr_set_dc_addr` writes it); the device points the DCI's path at that DCT and
//! runs the rest of the WQE as an RC requester does. The DCT is an RC responder on its SRQ
//! that serves any DCI whose request carries its access key, and drops a request with another
//! key without an answer, so that the DCI's WQE ends in a transport retry error. How mlx5 puts
//! DC on the wire is not public: in one process DC requests are not captured, and the DCT
//! takes each request's PSN as the one it expects (a new connection per message); on the
//! wire (to a DCT of another process, or on the in-memory fabric) they go in the simulator's
//! own encoding ([`crate::packet::Dceth`]), answered as RC requests are, and the DCT checks
//! each against the PSN that DCI's connection is expected to send
//! ([`crate::device::firmware::DctStreams`]). A DCT keeps the atomics it
//! executed by the DCI that asked ([`crate::device::firmware::DcReplay`]), and answers one
//! that DCI sends again from there.

use mlx5_dv::QpDest;
use mlx5_dv::prm::{queues as q, wqe};

use super::responder::{Corrupt, Response};
use super::unreliable::{AV_LEN, parse_av};
use super::{Engine, Step, syndrome};
use crate::device::contract::{self, Wqe};
use crate::device::firmware::{Admit, DciId, FwQp};
use crate::fabric::QpPath;
use crate::packet::{Headers, opcode};

/// A DCI's WQE as the device reads it: the DCT's path, its access key from the first 8 bytes
/// of the datagram segment, and the WQE without the segment (`ds` three units less).
fn decode_dc(bytes: &[u8]) -> Option<(QpDest, u64, Wqe)> {
    let av = bytes.get(16..16 + AV_LEN)?;
    let dest = parse_av(av)?.dest;
    let key = u64::from_be_bytes(av.get(..8)?.try_into().ok()?);
    let ds = usize::from(bytes.get(7)? & 0x3f);
    let end = (ds * 16).clamp(16 + AV_LEN, bytes.len());
    let mut rest = bytes.get(..16)?.to_vec();
    rest[7] = (rest[7] & !0x3f) | (ds.saturating_sub(3) as u8);
    rest.extend_from_slice(bytes.get(16 + AV_LEN..end)?);
    rest.resize(rest.len().next_multiple_of(64), 0);
    Some((dest, key, contract::decode(&rest)))
}

impl Engine<'_> {
    /// Whether `qp` is a DCI.
    pub(super) fn is_dci(&self, qp: QpPath) -> bool {
        self.qp(qp).is_some_and(|q| q.st == q::st::DCI)
    }

    /// The bytes a DCI's WQE has before its data past an RC WQE's: the datagram segment,
    /// while one executes.
    pub(super) fn dc_shift(&self) -> u64 {
        if self.dc_key.is_some() { AV_LEN as u64 } else { 0 }
    }

    /// A data WQE on a DCI, executed towards the DCT its datagram segment names; `None` for
    /// a WQE on another QP, or one that moves no data (NOP, LOCAL_INV, UMR: the connected
    /// path runs it). A DCT no
    /// device of this process has is not reached: the WQE ends in a transport retry error.
    pub(super) fn dci(&mut self, qp: QpPath, w: &Wqe, corrupt: Corrupt) -> Option<Step> {
        if !self.is_dci(qp) || self.dc_key.is_some() {
            return None;
        }
        use wqe::opcode as o;
        let data = matches!(
            w.opcode,
            o::RDMA_WRITE
                | o::RDMA_WRITE_IMM
                | o::SEND
                | o::SEND_IMM
                | o::SEND_INVAL
                | o::RDMA_READ
                | o::ATOMIC_CS
                | o::ATOMIC_FA
        );
        if !data {
            return None;
        }
        let fq = self.qp(qp)?;
        let pos = self.cursor.map_or(fq.sq_cc, |(p, _)| p);
        // A WQE of a stream in error is flushed; the DCI and its other streams go on.
        if let (Some(s), Some(id)) = (&fq.dci_streams, self.stream_at(fq, pos))
            && s.errored.contains(&id)
        {
            return Some(Step::Failed(syndrome::WR_FLUSH));
        }
        let mtu = fq.remote.map_or(5, |r| r.path_mtu);
        let Some((dest, key, inner)) = self.wqe_bytes(fq, pos, w.bbs).and_then(|b| decode_dc(&b)) else {
            return Some(Step::Failed(syndrome::LOCAL_QP_OP));
        };
        let dest = QpDest { path_mtu: mtu, ..dest };
        // A DCT of another process: the request goes over the network, as an RC
        // requester's to its peer, the WQE waiting for its answer on the wire.
        let remote = self.fabric.deliver(&dest).is_none();
        if remote && self.fabric.remote(qp.dev, &dest.ah).is_none() {
            return Some(Step::Failed(syndrome::TRANSPORT_RETRY));
        }
        if let Some(q) = self.dev(qp.dev).and_then(|d| d.fw.qp_mut(qp.qpn)) {
            q.remote = Some(dest);
        }
        let cursor = self.cursor;
        if remote && cursor.is_none() {
            self.cursor = Some((pos, w.bbs));
        }
        self.dc_key = Some(key);
        let step = self.execute(qp, &inner, corrupt);
        self.dc_key = None;
        self.cursor = cursor;
        Some(step)
    }

    /// The stream id of the WQE at `pos` of a DCI with streams (its control segment's
    /// `dci_stream_channel_id`).
    fn stream_at(&self, q: &FwQp, pos: u32) -> Option<u16> {
        q.dci_streams.as_ref()?;
        let b = self.wqe_bytes(q, pos, 1)?;
        Some(u16::from_be_bytes([*b.get(9)?, *b.get(10)?]))
    }

    /// A DCI with streams whose head WQE failed with syndrome `s`: its stream goes to error
    /// (a flush leaves it as it is) and the WQE completes with `s`, the DCI staying in RTS;
    /// false (the DCI goes to ERR as any QP) for another QP, or once the streams in error
    /// reach 2^`log_num_errored` (`mlx5dv_dci_stream_id_reset(3)`).
    pub(super) fn stream_fails(&mut self, id: QpPath, w: &Wqe, s: u8, vendor_err: Option<u8>) -> bool {
        let Some(q) = self.qp(id) else { return false };
        let Some(stream) = self.stream_at(q, q.sq_cc) else { return false };
        let Some(streams) = self.dev(id.dev).and_then(|d| d.fw.qp_mut(id.qpn)).and_then(|q| q.dci_streams.as_mut())
        else {
            return false;
        };
        if s != syndrome::WR_FLUSH {
            streams.errored.insert(stream);
            if streams.errored.len() >= 1usize << streams.log_errored.min(16) {
                return false;
            }
        }
        let Some((cq, _)) = self.retire(id, w) else { return true };
        let Some(d) = self.devs.get_mut(id.dev) else { return true };
        let cqe = d.req_err(id.qpn, w, s, vendor_err);
        self.push_cqe(id.dev, cq, cqe);
        true
    }

    /// The DCI a request reaching DCT `at` came from (`from` in this process, else the one
    /// the network said); `None` when `at` is not a DCT.
    pub(super) fn dci_of(&self, at: QpPath, from: QpPath) -> Option<DciId> {
        self.qp(at).filter(|q| q.st == q::st::DCT)?;
        Some(self.dc_from.unwrap_or(DciId::Here { dev: from.dev, qpn: from.qpn }))
    }

    /// An atomic DCT `at` (in RTR) already executed for DCI `from` with this PSN and these
    /// operands: answered with the original value it kept, not executed again (counted as a
    /// duplicate request).
    pub(super) fn dct_replay(&mut self, at: QpPath, from: DciId, h: &Headers) -> Option<Response> {
        let cmp = match h.bth.opcode {
            opcode::COMPARE_SWAP => true,
            opcode::FETCH_ADD => false,
            _ => return None,
        };
        let q = self.qp(at).filter(|q| q.state == mlx5_dv::QpState::Rtr)?;
        let original = q.dct_replay.recall(from, h.bth.psn, cmp, &h.atomic?)?;
        if let Some(d) = self.dev(at.dev) {
            d.net.counters.duplicate_request += 1;
        }
        Some(Response::atomic_ack(original))
    }

    /// A request reaching a DCT: `Some(false)` to drop it (not a DC request, another access
    /// key, or a later request of a connection the DCT does not keep; counted with the
    /// network's drops), `Some(true)` once the DCT expects the PSN its DCI's connection
    /// expects (the request's own without a connection); `None` for a QP that is not a DCT.
    pub(super) fn dct_admits(&mut self, at: QpPath, h: &Headers) -> Option<bool> {
        let q = self.qp(at)?;
        if q.st != q::st::DCT {
            return None;
        }
        let ok = self.dc_key == Some(q.transport.dc_key);
        let stream = h.dc.filter(|d| d.conn != 0).zip(self.dc_from);
        let d = self.dev(at.dev)?;
        let admit = match stream {
            Some((dc, from)) if ok => {
                d.fw.qp_mut(at.qpn).map(|q| q.dct_streams.admit(from, dc.conn, dc.first, h.bth.psn))
            }
            _ => None,
        };
        if !ok || admit == Some(Admit::Drop) {
            d.net.dropped = d.net.dropped.saturating_add(1);
            return Some(false);
        }
        if let Some(t) = d.fw.transport_mut(at.qpn) {
            (t.rq_psn, t.nak_psn) = match admit {
                Some(Admit::Expect { expected, nak_psn }) => (expected, nak_psn),
                _ => (h.bth.psn, None),
            };
        }
        Some(true)
    }

    /// After DCT `at` took a request of a DCI's connection: keep the PSN it expects next
    /// from that DCI, and the last sequence error NAK's.
    pub(super) fn dct_keep(&mut self, at: QpPath, h: &Headers) {
        let (Some(dc), Some(from)) = (h.dc.filter(|d| d.conn != 0), self.dc_from) else { return };
        let Some(q) = self.dev(at.dev).and_then(|d| d.fw.qp_mut(at.qpn)).filter(|q| q.st == q::st::DCT) else {
            return;
        };
        let (expected, nak_psn) = (q.transport.rq_psn, q.transport.nak_psn);
        q.dct_streams.store(from, dc.conn, expected, nak_psn);
    }

    /// The DCT a DCI's WQE at `pos` names (its datagram segment's path).
    pub(super) fn dci_target(&self, q: &FwQp, pos: u32, bbs: u32) -> Option<QpDest> {
        self.wqe_bytes(q, pos, bbs).and_then(|b| decode_dc(&b)).map(|(dest, _, _)| dest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::contract::WqeKind;

    #[test]
    fn a_dci_wqe_reads_as_its_write_after_the_dc_datagram_segment() {
        // Control (ds 6: control, datagram ×3, remote address, one data segment), the
        // datagram segment with the key in its first 8 bytes and the DCT number, the remote
        // address segment, the data segment.
        let mut b = vec![0u8; 128];
        b[3] = wqe::opcode::RDMA_WRITE;
        b[7] = 6;
        b[16..24].copy_from_slice(&0x0123_4567_89ab_cdefu64.to_be_bytes());
        b[24..28].copy_from_slice(&(0x8000_0000u32 | 0x77).to_be_bytes());
        b[44..48].copy_from_slice(&(1u32 << 30).to_be_bytes());
        b[64..72].copy_from_slice(&0x9000u64.to_be_bytes());
        b[72..76].copy_from_slice(&0x55u32.to_be_bytes());
        b[80..84].copy_from_slice(&64u32.to_be_bytes());
        b[84..88].copy_from_slice(&9u32.to_be_bytes());
        b[88..96].copy_from_slice(&0x1000u64.to_be_bytes());
        let (dest, key, w) = decode_dc(&b).expect("a DCI WQE");
        assert_eq!((dest.dest_qp_num, key, dest.ah.is_global), (0x77, 0x0123_4567_89ab_cdef, true));
        match w.kind {
            Some(WqeKind::Write { rkey, raddr, sge, .. }) => {
                assert_eq!((rkey, raddr), (0x55, 0x9000));
                assert_eq!(sge.as_slice(), &[mlx5_dv::Sge { addr: 0x1000, length: 64, lkey: 9 }]);
            }
            k => panic!("{k:?}"),
        }
    }
}
