//! The completion writer: CQEs (success, error, flush, SIG_ERR) as bytes into a CQ's ring in
//! host memory with the ownership-bit protocol, and the events a CQ overrun or a QP error
//! raises.

use mlx5_dv::prm::cqe;
use mlx5_dv::{QpState, event_type};

use super::{Engine, syndrome};
use crate::device::contract::{self, Cqe, SigErrInfo, Wqe};
use crate::device::{Device, DeviceEvent};
use crate::fabric::QpPath;
use crate::host::{Dma, Host};
use crate::signature::TransferError;

impl Device {
    /// The vendor syndrome the profile gives an error syndrome.
    pub(in crate::device) fn vendor_err(&self, s: u8) -> u8 {
        let v = &self.vendor_err;
        match s {
            syndrome::LOCAL_LENGTH => v.local_length,
            syndrome::LOCAL_QP_OP => v.local_qp_op,
            syndrome::LOCAL_PROT => v.local_protection,
            syndrome::WR_FLUSH => v.flush,
            syndrome::REMOTE_INVAL_REQ => v.remote_invalid_request,
            syndrome::REMOTE_ACCESS => v.remote_access,
            syndrome::REMOTE_OP => v.remote_operation,
            syndrome::TRANSPORT_RETRY => v.transport_retry,
            _ => v.rnr_retry,
        }
    }

    /// Write a CQE at the CQ's producer index. When the CQ already holds as many entries as
    /// it has room for (the consumer index is read from its doorbell record) it overruns:
    /// the CQE is lost, as are all later ones, and the device raises `CQ_ERR`. A CQ with
    /// `cqc.oi` never overruns: the CQE goes to the producer index whatever software has
    /// read, over an entry not yet polled when the ring is full. In a 128-byte entry the
    /// `mlx5_cqe64` is the last 64 bytes; the first hold a small receive scattered to the
    /// CQE (`MLX5_INLINE_SCATTER_64`), zeroes otherwise.
    fn write_cqe(&mut self, host: &mut Host, cqn: u32, cqe: &Cqe) {
        let Some(c) = self.fw.cq_mut(cqn) else { return };
        // The clock moves with every CQE (module `clock`), whichever CQ it is for.
        let now = self.clock.stamp();
        if c.overrun {
            return;
        }
        if !c.oi {
            let ci =
                host.read(c.dbrec, 4).and_then(|b| b.first_chunk()).map_or(0, |b| u32::from_be_bytes(*b) & 0xff_ffff);
            let outstanding = c.pi.wrapping_sub(ci) & 0xff_ffff;
            if outstanding >= c.cqe {
                c.overrun = true;
                self.raise(DeviceEvent { event_type: event_type::CQ_ERR, qpn: None, cqn: Some(cqn), srqn: None });
                return;
            }
        }
        let wide = c.ring.stride as usize == 2 * cqe::SIZE;
        let mut head = [0u8; cqe::SIZE];
        // A small receive goes to the first half; the mlx5_cqe64 is written as without it.
        let stripped;
        let (cqe, scattered_64) = match cqe {
            Cqe::Resp { inline: Some(data), .. } if wide => {
                let n = data.len().min(cqe::SIZE);
                head[..n].copy_from_slice(&data[..n]);
                let mut plain = cqe.clone();
                if let Cqe::Resp { inline, .. } = &mut plain {
                    *inline = None;
                }
                stripped = plain;
                (&stripped, true)
            }
            _ => (cqe, false),
        };
        let owner = c.pi & c.ring.wqe_cnt != 0;
        // Encoded aside and published with its ownership byte last: the program may be
        // polling this slot, and a half-written CQE must never look like its own. Nothing is
        // written if a field overflows or the slot is unmapped.
        let mut b = [0u8; cqe::SIZE];
        if cqe.encode_into(owner, &mut b).is_err() {
            return;
        }
        if scattered_64 {
            b[cqe::SIZE - 1] |= contract::INLINE_SCATTER_64;
        }
        // mlx5_cqe64.timestamp (bytes 48..56, big-endian), which libmlx5's
        // mlx5_cq_read_wc_completion_ts reads; an error CQE has its syndromes there.
        if c.timestamps && matches!(cqe, Cqe::Req { .. } | Cqe::Resp { .. } | Cqe::Tm(_)) {
            b[cqe::TIMESTAMP_AT..cqe::TIMESTAMP_AT + 8].copy_from_slice(&now.to_be_bytes());
        }
        let published = if wide {
            let mut entry = [0u8; 2 * cqe::SIZE];
            entry[..cqe::SIZE].copy_from_slice(&head);
            entry[cqe::SIZE..].copy_from_slice(&b);
            host.publish(c.ring.slot(c.pi), &entry)
        } else {
            host.publish(c.ring.slot(c.pi), &b)
        };
        if published {
            let solicited = crate::device::contract::cqe_wakes_solicited(b[cqe::SIZE - 1]);
            c.pi = c.pi.wrapping_add(1);
            self.fw.cqe_written(cqn, solicited);
        }
    }

    /// Write a tag-matching CQE (of a list operation, outside the engine's run).
    pub(in crate::device) fn write_tm_cqe(&mut self, host: &mut Host, cqn: u32, cqe: &Cqe) {
        self.write_cqe(host, cqn, cqe);
    }

    /// The QP goes to ERR; the engine flushes it.
    pub(in crate::device) fn enter_err(&mut self, qpn: u32) {
        if let Some(q) = self.fw.qp_mut(qpn) {
            q.state = QpState::Err;
        }
    }

    /// Raise a QP event.
    pub(in crate::device) fn qp_event(&mut self, qpn: u32, ty: u32) {
        if self.fw.qp(qpn).is_some() {
            self.raise(DeviceEvent { event_type: ty, qpn: Some(qpn), cqn: None, srqn: None });
        }
    }

    /// A requester error CQE for `w` with syndrome `s`, and the profile's vendor syndrome
    /// unless one is given.
    pub(in crate::device) fn req_err(&self, qpn: u32, w: &Wqe, s: u8, vendor_err: Option<u8>) -> Cqe {
        Cqe::Err {
            qpn,
            wqe_counter: w.index,
            requester: true,
            wqe_opcode: w.opcode,
            syndrome: s,
            vendor_err: vendor_err.unwrap_or_else(|| self.vendor_err(s)),
            srqn: 0,
        }
    }

    /// A successful requester CQE for `w`, if it asked for one.
    pub(in crate::device) fn success(qpn: u32, w: &Wqe, byte_cnt: u32) -> Option<Cqe> {
        w.signaled.then_some(Cqe::Req { qpn, wqe_counter: w.index, wqe_opcode: w.opcode, byte_cnt })
    }
}

impl Engine<'_> {
    /// Write a CQE into a CQ of device `dev`.
    pub(super) fn push_cqe(&mut self, dev: usize, cqn: u32, cqe: Cqe) {
        if let Some(d) = self.devs.get_mut(dev) {
            d.write_cqe(self.host, cqn, &cqe);
        }
    }

    /// A responder error CQE for the receive WQE `index` of `qp`, on its own device.
    pub(super) fn recv_error(&mut self, qp: QpPath, index: u16, s: u8) {
        let Some(d) = self.devs.get_mut(qp.dev) else { return };
        let Some((rcq, srqn)) =
            d.fw.qp(qp.qpn).map(|q| (q.recv_cqn, if q.xrcd != 0 { q.srqn.unwrap_or(0) } else { 0 }))
        else {
            return;
        };
        let cqe = Cqe::Err {
            srqn,
            qpn: qp.qpn,
            wqe_counter: index,
            requester: false,
            wqe_opcode: 0,
            syndrome: s,
            vendor_err: d.vendor_err(s),
        };
        d.write_cqe(self.host, rcq, &cqe);
    }

    /// Flush a QP in ERR: every send WQE and receive WQE it holds completes with
    /// `WR_FLUSH_ERR`, oldest first, and its queues are empty.
    pub(super) fn flush(&mut self, id: QpPath) {
        while let Some((w, _)) = self.head(id) {
            let Some((scq, _)) = self.retire(id, &w) else { return };
            let Some(cqe) = self.devs.get(id.dev).map(|d| d.req_err(id.qpn, &w, syndrome::WR_FLUSH, None)) else {
                return;
            };
            self.push_cqe(id.dev, scq, cqe);
        }
        // An SRQ's WQEs belong to no QP: a QP in error leaves them to the others, and says
        // once that it takes no more (the last-WQE event).
        if let Some(d) = self.devs.get_mut(id.dev)
            && let Some(q) = d.fw.qp_mut(id.qpn)
            && q.srqn.is_some()
        {
            if !std::mem::replace(&mut q.last_wqe, true) {
                d.qp_event(id.qpn, event_type::QP_LAST_WQE_REACHED);
            }
            return;
        }
        while let Some(r) = self.pop_recv(id) {
            self.recv_error(id, r.index, syndrome::WR_FLUSH);
        }
    }

    /// Take the receive WQE at the device's consumer counter, read from the ring.
    pub(super) fn pop_recv(&mut self, id: QpPath) -> Option<contract::RecvWqe> {
        let d = self.devs.get_mut(id.dev)?;
        if let Some(srqn) = d.fw.qp(id.qpn)?.srqn {
            return d.take_srq(self.host, srqn);
        }
        let q = d.fw.qp_mut(id.qpn)?;
        if q.rq_cc == q.rq_pc || q.rq.is_empty() {
            return None;
        }
        let index = q.rq_cc as u16;
        let r =
            contract::decode_recv(index, self.host.read(q.rq.slot(q.rq_cc), q.rq.stride as usize).unwrap_or_default());
        q.rq_cc = q.rq_cc.wrapping_add(1);
        Some(r)
    }

    /// Report a signature error if the mkey's PSVs are armed: a SIG_ERR CQE on `cqn` (the
    /// provider consumes it at poll time); the PSVs stay in error until the next SET_PSV.
    pub(super) fn report_sig(
        &mut self,
        dev: usize,
        index: u32,
        err: TransferError,
        domain: u8,
        cqn: u32,
        qpn: u32,
    ) -> bool {
        let Some(d) = self.devs.get_mut(dev) else { return false };
        let Some(tag) = d.fw.mkey(index).and_then(|m| mlx5_dv::prm::mkc::MKEY_7_0.get(&m.mkc).ok()) else {
            return false;
        };
        if d.fw.sig_armed(index) != Some(true) {
            return false;
        }
        d.fw.set_sig_armed(index, false);
        let b = err.block;
        let info = SigErrInfo {
            syndrome: b.syndrome,
            expected: b.expected,
            actual: b.actual,
            offset: err.offset,
            sig_type: 0,
            domain,
        };
        let cqe = Cqe::SigErr { qpn, mkey: index << 8 | tag as u32, info };
        d.write_cqe(self.host, cqn, &cqe);
        true
    }
}
