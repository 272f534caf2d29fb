//! The completion writer: CQEs (success, error, flush, SIG_ERR) into a device's CQs, and the
//! events a CQ overrun or a QP error raises.

use mlx5_dv::{QpState, Wc, event_type, wc_opcode, wc_status};

use super::syndrome;
use crate::device::wqe::{Cqe, SigErrCqe, Wqe};
use crate::device::{Device, DeviceEvent};
use crate::signature::TransferError;

impl Device {
    /// The vendor syndrome the profile gives an error syndrome.
    fn vendor_err(&self, s: u8) -> u32 {
        let v = &self.vendor_err;
        u32::from(match s {
            syndrome::LOCAL_LENGTH => v.local_length,
            syndrome::LOCAL_QP_OP => v.local_qp_op,
            syndrome::LOCAL_PROT => v.local_protection,
            syndrome::WR_FLUSH => v.flush,
            syndrome::REMOTE_INVAL_REQ => v.remote_invalid_request,
            syndrome::REMOTE_ACCESS => v.remote_access,
            syndrome::REMOTE_OP => v.remote_operation,
            syndrome::TRANSPORT_RETRY => v.transport_retry,
            _ => v.rnr_retry,
        })
    }

    /// Write a CQE; a full CQ overruns: the CQE is lost and the device raises `CQ_ERR`.
    pub(in crate::device) fn push_cqe(&mut self, cqn: u32, cqe: Cqe) {
        let Some(c) = self.fw.cq_mut(cqn) else { return };
        if c.overrun {
            return;
        }
        if c.entries.len() as u32 >= c.cqe {
            c.overrun = true;
            self.events.push_back(DeviceEvent { event_type: event_type::CQ_ERR, qpn: None, cqn: Some(cqn) });
            return;
        }
        c.entries.push_back(cqe);
    }

    /// An error work completion with syndrome `s`.
    pub(in crate::device) fn error_wc(&self, qpn: u32, wr_id: u64, opcode: u32, s: u8) -> Wc {
        Wc {
            wr_id,
            status: syndrome::to_status(s),
            opcode,
            vendor_err: self.vendor_err(s),
            qp_num: qpn,
            ..Wc::default()
        }
    }

    /// A successful send completion, if the WQE asked for one.
    pub(in crate::device) fn success(qpn: u32, w: &Wqe, byte_len: u32) -> Option<Wc> {
        w.signaled.then_some(Wc {
            wr_id: w.wr_id,
            status: wc_status::SUCCESS,
            opcode: w.opcode,
            byte_len,
            qp_num: qpn,
            ..Wc::default()
        })
    }

    /// Move a QP to ERR and flush both its queues with `WR_FLUSH_ERR`.
    pub(in crate::device) fn flush_qp(&mut self, qpn: u32) {
        let Some(q) = self.fw.qp_mut(qpn) else { return };
        q.state = QpState::Err;
        let sq: Vec<_> = q.sq.drain(..).map(|p| p.wqe).collect();
        let rq: Vec<_> = q.rq.drain(..).collect();
        let (scq, rcq) = (q.send_cqn, q.recv_cqn);
        for w in sq {
            let wc = self.error_wc(qpn, w.wr_id, w.opcode, syndrome::WR_FLUSH);
            self.push_cqe(scq, Cqe::new(wc, qpn, Some(w.seq)));
        }
        for r in rq {
            let wc = self.error_wc(qpn, r.wr_id, wc_opcode::RECV, syndrome::WR_FLUSH);
            self.push_cqe(rcq, Cqe::new(wc, qpn, None));
        }
    }

    /// Raise a QP event.
    pub(in crate::device) fn qp_event(&mut self, qpn: u32, ty: u32) {
        if self.fw.qp(qpn).is_some() {
            self.events.push_back(DeviceEvent { event_type: ty, qpn: Some(qpn), cqn: None });
        }
    }

    /// Report a signature error if the mkey's PSV is armed: a SIG_ERR CQE on `cqn` (the
    /// provider consumes it at poll time); the PSV stays in error until the next SET_PSV.
    pub(in crate::device) fn report_sig(
        &mut self,
        index: u32,
        err: TransferError,
        domain: u8,
        cqn: u32,
        qpn: u32,
    ) -> bool {
        let armed = self.fw.mkey_mut(index).and_then(|m| m.sig.as_mut()).map(|s| std::mem::replace(&mut s.1, false));
        if armed != Some(true) {
            return false;
        }
        let b = err.block;
        let e = SigErrCqe {
            syndrome: b.syndrome,
            expected: b.expected,
            actual: b.actual,
            offset: err.offset,
            sig_type: 0,
            domain,
        };
        let mut cqe = Cqe::new(Wc::default(), qpn, None);
        cqe.sig_err = Some((index, e));
        self.push_cqe(cqn, cqe);
        true
    }
}
