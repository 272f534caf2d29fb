//! The engine: a device's data path. It executes posted WQEs in order, translates addresses
//! through MRs and indirect mkeys ([`translate`]), runs each mkey's data pipeline
//! ([`pipeline`]), and writes CQEs with the `ibv_wc_status`, opcode and vendor syndrome a
//! real device reports ([`completion`]).
//!
//! Execution is synchronous and deterministic: after every doorbell (post, receive, state
//! change) every QP runs its send queue as far as it can, in creation order. A SEND that
//! finds no receive WQE waits, as a QP with infinite RNR retry does.

use mlx5_dv::{QpState, Wc};

use super::firmware::{FwQp, QpPath};
use super::wqe::{Cqe, Wqe};
use super::{Device, WqeFault};
use crate::fabric::Fabric;
use crate::host::Host;

mod completion;
mod ops;
mod pipeline;
mod translate;

/// Error CQE syndromes (`syndrome` byte of `struct mlx5_err_cqe`).
pub mod syndrome {
    /// LOCAL_LENGTH_ERR.
    pub const LOCAL_LENGTH: u8 = 0x01;
    /// LOCAL_QP_OP_ERR.
    pub const LOCAL_QP_OP: u8 = 0x02;
    /// LOCAL_PROT_ERR.
    pub const LOCAL_PROT: u8 = 0x04;
    /// WR_FLUSH_ERR.
    pub const WR_FLUSH: u8 = 0x05;
    /// REMOTE_INVAL_REQ_ERR.
    pub const REMOTE_INVAL_REQ: u8 = 0x12;
    /// REMOTE_ACCESS_ERR.
    pub const REMOTE_ACCESS: u8 = 0x13;
    /// REMOTE_OP_ERR.
    pub const REMOTE_OP: u8 = 0x14;
    /// TRANSPORT_RETRY_EXC_ERR.
    pub const TRANSPORT_RETRY: u8 = 0x15;

    /// The `ibv_wc_status` the provider reports for a syndrome (`mlx5_handle_error_cqe`).
    pub fn to_status(s: u8) -> u32 {
        use mlx5_dv::wc_status::*;
        match s {
            0x01 => LOC_LEN_ERR,
            0x02 => LOC_QP_OP_ERR,
            0x04 => LOC_PROT_ERR,
            0x05 => WR_FLUSH_ERR,
            0x06 => MW_BIND_ERR,
            0x10 => BAD_RESP_ERR,
            0x11 => LOC_ACCESS_ERR,
            0x12 => REM_INV_REQ_ERR,
            0x13 => REM_ACCESS_ERR,
            0x14 => REM_OP_ERR,
            0x15 => RETRY_EXC_ERR,
            0x16 => RNR_RETRY_EXC_ERR,
            0x22 => REM_ABORT_ERR,
            _ => GENERAL_ERR,
        }
    }
}

/// The result of executing the head WQE of a QP.
enum Step {
    /// Executed; the requester CQE to write, if any.
    Done(Option<Wc>),
    /// Waiting for the peer (no receive WQE yet).
    Blocked,
    /// Failed with this syndrome at the requester.
    Failed(u8),
    /// A signature error on a SIG_PIPELINING QP: the QP drained to SQD with this WQE unsent.
    Held,
}

/// The engine over the devices of one host, for one run.
pub(super) struct Engine<'a> {
    devs: &'a mut [Device],
    host: &'a mut Host,
    fabric: &'a Fabric,
    /// Responder QPs that met an error in the current step, with the event to raise: they
    /// go to ERR after the requester completes its WR.
    pending: Vec<(QpPath, Option<u32>)>,
}

impl<'a> Engine<'a> {
    pub(super) fn new(devs: &'a mut [Device], host: &'a mut Host, fabric: &'a Fabric) -> Self {
        Engine { devs, host, fabric, pending: Vec::new() }
    }

    fn qp(&self, q: QpPath) -> Option<&FwQp> {
        self.devs.get(q.dev)?.fw.qp(q.qpn)
    }

    fn dev(&mut self, dev: usize) -> Option<&mut Device> {
        self.devs.get_mut(dev)
    }

    fn take_scratch(&mut self, dev: usize) -> Vec<u8> {
        self.dev(dev).map(Device::take_scratch).unwrap_or_default()
    }

    fn give_scratch(&mut self, dev: usize, v: Vec<u8>) {
        if let Some(d) = self.dev(dev) {
            d.give_scratch(v);
        }
    }

    /// Every QP in creation order, across devices.
    fn schedule(&self) -> Vec<QpPath> {
        let mut all: Vec<(u64, QpPath)> = self
            .devs
            .iter()
            .enumerate()
            .flat_map(|(dev, d)| d.fw.qps().map(move |(qpn, q)| (q.order, QpPath { dev, qpn })))
            .collect();
        all.sort_unstable();
        all.into_iter().map(|(_, q)| q).collect()
    }

    /// Run every QP's send queue as far as it goes.
    pub(super) fn progress(&mut self) {
        loop {
            let mut moved = false;
            for id in self.schedule() {
                while let Some(p) = self.qp(id).filter(|q| q.state == QpState::Rts).and_then(|q| q.sq.front().cloned())
                {
                    let w = &p.wqe;
                    let step = match p.fault {
                        Some(WqeFault::Completion { status, vendor_err }) if w.kind.opcode() != 0 => {
                            self.complete_in_error(id, w, status, vendor_err);
                            moved = true;
                            continue;
                        }
                        Some(WqeFault::Corrupt { offset, xor }) => self.execute(id, w, Some((offset, xor))),
                        _ => self.execute(id, w, None),
                    };
                    let blocked = matches!(step, Step::Blocked | Step::Held);
                    self.finish(id, w, step);
                    if blocked {
                        break;
                    }
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }

    /// Retire the head WQE as `step` says, then take the responders that failed to ERR.
    fn finish(&mut self, id: QpPath, w: &Wqe, step: Step) {
        if let Some(d) = self.devs.get_mut(id.dev) {
            match step {
                Step::Blocked | Step::Held => {}
                Step::Done(wc) => {
                    let cq = d.fw.qp_mut(id.qpn).map(|q| {
                        q.sq.pop_front();
                        q.send_cqn
                    });
                    if let (Some(wc), Some(cq)) = (wc, cq) {
                        d.push_cqe(cq, Cqe::new(wc, id.qpn, Some(w.seq)));
                    }
                }
                Step::Failed(s) => {
                    let wc = d.error_wc(id.qpn, w.wr_id, w.opcode, s);
                    d.fail_head(id.qpn, wc, w.seq);
                }
            }
        }
        for (peer, ev) in std::mem::take(&mut self.pending) {
            if let Some(d) = self.devs.get_mut(peer.dev) {
                if let Some(ev) = ev {
                    d.qp_event(peer.qpn, ev);
                }
                d.flush_qp(peer.qpn);
            }
        }
    }

    /// A Completion fault acts: the WQE completes with the rule's status, unexecuted.
    fn complete_in_error(&mut self, id: QpPath, w: &Wqe, status: u32, vendor_err: u32) {
        let wc = Wc { wr_id: w.wr_id, status, opcode: w.opcode, vendor_err, qp_num: id.qpn, ..Wc::default() };
        if let Some(d) = self.dev(id.dev) {
            d.fail_head(id.qpn, wc, w.seq);
        }
    }
}

impl Device {
    /// The head WQE failed with `wc`: retire it with that CQE and flush the QP.
    fn fail_head(&mut self, qpn: u32, wc: Wc, seq: u64) {
        let cq = self.fw.qp_mut(qpn).map(|q| {
            q.sq.pop_front();
            q.send_cqn
        });
        if let Some(cq) = cq {
            self.push_cqe(cq, Cqe::new(wc, qpn, Some(seq)));
        }
        self.flush_qp(qpn);
    }
}
