//! The engine: a device's data path. It executes posted WQEs in order, translates addresses
//! through MRs and indirect mkeys ([`translate`]), runs each mkey's data pipeline
//! ([`pipeline`]), and writes CQEs with the `ibv_wc_status`, opcode and vendor syndrome a
//! real device reports ([`completion`]). A data operation goes out as a request packet to the
//! device the fabric routes it to, whose [`responder`] executes it against its own tables
//! and answers ([`ops`]).
//!
//! Execution is synchronous and deterministic: after every doorbell (post, receive, state
//! change) every QP runs its send queue as far as it can, in creation order. A SEND that
//! finds no receive WQE waits, as a QP with infinite RNR retry does.

use mlx5_dv::QpState;

use super::contract::{self, Cqe, Wqe};
use super::firmware::FwQp;
use super::{Device, WqeFault};
use crate::fabric::{Fabric, QpPath};
use crate::host::{Dma, Host};

mod cipher;
mod completion;
mod dc;
mod direct;
pub mod multicast;
mod mw;
mod ops;
mod pipeline;
mod raw_eth;
mod remote;
mod responder;
mod translate;
mod unreliable;

pub use remote::TransportCounters;

pub(super) use direct::{Kept, RxKept};
pub(super) use remote::NetState;

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

/// The `MLX5_CQE_SYNDROME_*` whose `ibv_wc_status` is `status` (`mlx5_handle_error_cqe`
/// read backwards); `None` for a status no error CQE reports. `GENERAL_ERR` is any syndrome
/// the provider does not know; 0xff stands for them.
pub fn syndrome_of_status(status: u32) -> Option<u8> {
    const KNOWN: [u8; 13] = [0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x22];
    if status == mlx5_dv::wc_status::GENERAL_ERR {
        return Some(0xff);
    }
    KNOWN.into_iter().find(|&s| syndrome::to_status(s) == status)
}

/// The fault rule the doorbell of a QP's head WQE matched.
fn fault_at_head(q: &FwQp) -> Option<WqeFault> {
    q.faults.front().filter(|(at, _)| *at == q.sq_cc).map(|(_, f)| *f)
}

/// The result of executing the head WQE of a QP.
enum Step {
    /// Executed; the requester CQE to write, if any.
    Done(Option<Cqe>),
    /// Waiting: the responder answered with an RNR NAK (no receive WQE yet).
    Blocked,
    /// Failed with this syndrome at the requester.
    Failed(u8),
    /// Failed with this syndrome and vendor syndrome at the requester.
    FailedWith(u8, u8),
}

/// The engine over the devices of one host, for one run.
pub(super) struct Engine<'a> {
    devs: &'a mut [Device],
    host: &'a mut Host,
    fabric: &'a Fabric,
    /// Responder QPs that met an error in the current step, with the event to raise: each
    /// responder queues its own, and they go to ERR after the requester completes its WR.
    pending: Vec<(QpPath, Option<u32>)>,
    /// Rendezvous transfers a tag-matching SRQ matched in the current step, run once the
    /// requester has completed its WR (they follow the request's acknowledgement).
    rndv: Vec<responder::Rndv>,
    /// The send-queue counter and basic blocks of the WQE being executed, when it goes over
    /// the network (it may be behind the head: the window).
    cursor: Option<(u32, u32)>,
    /// The access key of the DCI WQE being executed: its requests carry it to the DCT.
    dc_key: Option<u64>,
    /// The DCI a DC request taken from the network came from (its port and QP number).
    dc_from: Option<crate::device::firmware::DciId>,
}

impl<'a> Engine<'a> {
    pub(super) fn new(devs: &'a mut [Device], host: &'a mut Host, fabric: &'a Fabric) -> Self {
        Engine { devs, host, fabric, pending: Vec::new(), rndv: Vec::new(), cursor: None, dc_key: None, dc_from: None }
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

    /// The QPs a run can move, in creation order across devices, as (order, device, QP
    /// number): those in ERR (to flush) and those in RTS with WQEs posted. A run changes no
    /// other QP into either: a QP it takes to ERR it flushes on the spot, and only a
    /// doorbell adds WQEs. Most runs move one QP, kept in `first` without a list.
    fn schedule(&self, first: &mut Option<(u64, usize, u32)>, more: &mut Vec<(u64, usize, u32)>) {
        for (dev, d) in self.devs.iter().enumerate() {
            for (qpn, q) in d.fw.qps() {
                if q.state == QpState::Err || (q.state == QpState::Rts && q.sq_cc != q.sq_pc) {
                    match first {
                        None => *first = Some((q.order, dev, qpn)),
                        Some(_) => more.push((q.order, dev, qpn)),
                    }
                }
            }
        }
        if !more.is_empty() {
            more.extend(first.take());
            more.sort_unstable();
        }
    }

    /// The send WQE at the device's consumer counter, read from the ring in host memory, and
    /// the fault rule its doorbell matched.
    fn head(&self, id: QpPath) -> Option<(Wqe, Option<WqeFault>)> {
        let q = self.qp(id)?;
        Some((self.head_of(q)?, fault_at_head(q)))
    }

    /// The WQE at send-queue counter `pos` of a QP, clamped to the producer counter.
    fn wqe_at(&self, q: &FwQp, pos: u32) -> Option<Wqe> {
        if pos == q.sq_pc || q.sq.is_empty() {
            return None;
        }
        let ring = self.host.read(q.sq.addr, q.sq.len())?;
        let mut w = Self::decode_for(q, ring, (pos & (q.sq.wqe_cnt - 1)) as usize)?;
        w.bbs = w.bbs.clamp(1, q.sq_pc.wrapping_sub(pos));
        Some(w)
    }

    /// The head WQE of a QP already looked up, without its fault rule: returned alone, the
    /// large `Wqe` is not moved again into a tuple.
    fn head_of(&self, q: &FwQp) -> Option<Wqe> {
        let (ring, at) = self.sq_ring(q)?;
        Self::clamped(q, Self::decode_for(q, ring, at)?)
    }

    /// The WQE at basic block `at` of a QP's ring, as its service type lays it out (an XRC
    /// initiator's carries an XRC segment).
    fn decode_for(q: &FwQp, ring: &[u8], at: usize) -> Option<Wqe> {
        if q.st == mlx5_dv::prm::queues::st::XRC {
            contract::decode_xrc_at(ring, at)
        } else {
            contract::decode_at(ring, at)
        }
    }

    /// A QP's send ring in host memory and its head's basic block, if it holds WQEs.
    fn sq_ring(&self, q: &FwQp) -> Option<(&[u8], usize)> {
        if q.sq_cc == q.sq_pc || q.sq.is_empty() {
            return None;
        }
        Some((self.host.read(q.sq.addr, q.sq.len())?, (q.sq_cc & (q.sq.wqe_cnt - 1)) as usize))
    }

    /// A WQE never reaches past the producer counter, whatever its ds says.
    fn clamped(q: &FwQp, mut w: Wqe) -> Option<Wqe> {
        w.bbs = w.bbs.clamp(1, q.sq_pc.wrapping_sub(q.sq_cc));
        Some(w)
    }

    /// Run every QP's send queue as far as it goes; a QP in ERR flushes what it holds.
    pub(super) fn progress(&mut self) {
        // Running creates and destroys no QP: one schedule serves every pass.
        let (mut first, mut more) = (None, Vec::new());
        self.schedule(&mut first, &mut more);
        let schedule = if more.is_empty() { first.as_slice() } else { &more[..] };
        loop {
            let mut moved = false;
            // A lone QP that ran dry or was flushed has nothing for another pass.
            let mut settled = schedule.len() == 1;
            for &(_, dev, qpn) in schedule.iter() {
                let id = QpPath { dev, qpn };
                // A path to another process: a window of messages on the network.
                if self.in_flight(id) || self.remote_peer(id).is_some() {
                    moved |= self.progress_remote(id);
                    settled = false;
                    continue;
                }
                let mut first = true;
                // One lookup per WQE: the QP's state (ERR is checked once, before its WQEs),
                // then its head.
                while let Some(q) = self.qp(id) {
                    if std::mem::take(&mut first) && q.state == QpState::Err {
                        self.flush(id);
                        break;
                    }
                    if q.state != QpState::Rts {
                        break;
                    }
                    // A run of plain WRITEs goes through the direct path together.
                    let q = if q.faults.is_empty() && q.sq_pc.wrapping_sub(q.sq_cc) > 1 {
                        if self.direct_run(id) > 0 {
                            moved = true;
                            continue;
                        }
                        match self.qp(id) {
                            Some(q) => q,
                            None => break,
                        }
                    } else {
                        q
                    };
                    let fault = fault_at_head(q);
                    let Some((ring, at)) = self.sq_ring(q) else { break };
                    // The most common WQE, a plain one-block WRITE, runs without decoding its
                    // kind when the direct path takes it; anything else decodes in full.
                    let xrc = q.st == mlx5_dv::prm::queues::st::XRC;
                    let plain = if fault.is_none() && !xrc { contract::plain_write_at(ring, at) } else { None };
                    let w = match plain {
                        None => Self::decode_for(q, ring, at).and_then(|w| Self::clamped(q, w)),
                        Some(p) => {
                            let sge = std::slice::from_ref(&p.sge);
                            let mut memo = self.recall(id, q);
                            if self.direct_copy::<true>(&mut memo, id, (p.rkey, p.raddr, sge)) {
                                self.keep(id, memo);
                                moved = true;
                                if self.complete_direct(id, &p.head) {
                                    continue;
                                }
                                break;
                            }
                            self.qp(id).and_then(|q| self.head_of(q))
                        }
                    };
                    let Some(w) = w else { break };
                    let step = match (fault, &w.kind) {
                        (Some(WqeFault::Completion { syndrome, vendor_err }), Some(k)) if k.opcode() != 0 => {
                            self.complete_in_error(id, &w, syndrome, vendor_err);
                            moved = true;
                            continue;
                        }
                        (Some(WqeFault::Corrupt { offset, xor }), _) => self.execute(id, &w, Some((offset, xor))),
                        _ => self.execute(id, &w, None),
                    };
                    let blocked = matches!(step, Step::Blocked);
                    self.finish(id, &w, step);
                    if blocked {
                        settled = false;
                        break;
                    }
                    moved = true;
                }
            }
            if !moved || settled {
                break;
            }
        }
    }

    /// Retire the head WQE as `step` says, then take the responders that failed to ERR.
    fn finish(&mut self, id: QpPath, w: &Wqe, step: Step) {
        match step {
            Step::Blocked => {}
            Step::Done(cqe) => {
                let cq = self.retire(id, w).map(|(cq, _)| cq);
                if let (Some(cqe), Some(cq)) = (cqe, cq) {
                    self.push_cqe(id.dev, cq, cqe);
                }
            }
            Step::Failed(s) => self.fail_head(id, w, s, None),
            Step::FailedWith(s, v) => self.fail_head(id, w, s, Some(v)),
        }
        if !self.rndv.is_empty() {
            self.run_rndv();
        }
        // Almost always empty: skip taking (and dropping) the vector then.
        if self.pending.is_empty() {
            return;
        }
        self.settle_responders();
    }

    /// The responders that failed go to ERR (with their events), each on its own device as
    /// that device queued it, and are flushed.
    fn settle_responders(&mut self) {
        for (at, ev) in std::mem::take(&mut self.pending) {
            if let Some(d) = self.devs.get_mut(at.dev) {
                if let Some(ev) = ev {
                    d.qp_event(at.qpn, ev);
                }
                d.enter_err(at.qpn);
            }
            self.flush(at);
        }
    }

    /// Move the consumer counter past the head WQE; the send CQ's number, and true if the QP
    /// holds more WQEs.
    fn retire(&mut self, id: QpPath, w: &Wqe) -> Option<(u32, bool)> {
        let q = self.devs.get_mut(id.dev)?.fw.send_queue_mut(id.qpn)?;
        if q.faults.front().is_some_and(|(at, _)| at == q.sq_cc) {
            q.faults.pop_front();
        }
        *q.sq_cc = q.sq_cc.wrapping_add(w.bbs);
        Some((q.send_cqn, q.sq_cc != q.sq_pc))
    }

    /// The head WQE failed with syndrome `s` (and this vendor syndrome, or the profile's):
    /// retire it with that CQE and flush the QP.
    fn fail_head(&mut self, id: QpPath, w: &Wqe, s: u8, vendor_err: Option<u8>) {
        if self.stream_fails(id, w, s, vendor_err) {
            return;
        }
        let Some((cq, _)) = self.retire(id, w) else { return };
        let Some(d) = self.devs.get_mut(id.dev) else { return };
        let cqe = d.req_err(id.qpn, w, s, vendor_err);
        d.enter_err(id.qpn);
        self.push_cqe(id.dev, cq, cqe);
        self.flush(id);
    }

    /// A Completion fault acts: the WQE completes with the rule's syndrome, unexecuted.
    fn complete_in_error(&mut self, id: QpPath, w: &Wqe, syndrome: u8, vendor_err: u8) {
        self.fail_head(id, w, syndrome, Some(vendor_err));
    }
}
