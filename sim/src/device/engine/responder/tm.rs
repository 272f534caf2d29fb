//! A message arriving at a QP whose SRQ is a tag-matching one (the format of
//! `Documentation/tag_matching.md`: a 16-byte TMH — opcode, reserved, `app_ctx`, tag, all
//! big-endian — then, for a rendezvous request, a 16-byte RVH of address, rkey and length).
//!
//! - `IBV_TMH_NO_TAG`: into an ordinary SRQ WQE whole, a NO_TAG CQE.
//! - `IBV_TMH_EAGER` matching a posted tag: the data after the TMH into the tag's buffer, one
//!   CONSUMED_MSG CQE (matched, data valid); a message longer than the buffer is not
//!   delivered and completes MSG_COMPLETION_CANCELED (unverified on hardware).
//! - `IBV_TMH_RNDV` matching: a CONSUMED CQE (matched) at once; once the requester has its
//!   acknowledgement, the device reads `len` bytes at the RVH's address and key from the
//!   sender into the tag's buffer, sends the sender a FIN (the TMH with opcode
//!   `IBV_TMH_FIN`, then the RVH) into its receive queue, and writes an EXPECTED CQE (data
//!   valid). A buffer smaller than `len` gets the TMH and RVH instead, with a
//!   CONSUMED_MSG_SW_RDNV CQE (`IBV_WC_TM_RNDV_INCOMPLETE`); a READ the sender refuses ends
//!   with MSG_COMPLETION_CANCELED (unverified). The READ and the FIN take no PSNs of the QP's
//!   own (the QP's send queue belongs to the SRQ on mlx5) and run in one process only.
//! - Any other tagged message (no match, matching suspended, a rendezvous without a whole
//!   RVH, a message shorter than the TMH, another opcode): unexpected, whole into an ordinary
//!   SRQ WQE, an UNEXPECTED CQE, and the device's unexpected count moves on.
//!
//! Every CQE goes to the SRQ's CQ; the TMH is scattered into the CQE of a match only (its
//! first completion), which is where `ibv_wc_read_tm_info` finds the tag.

use super::{Corrupt, Payload, Reply};
use crate::device::contract::Cqe;
use crate::device::contract::tm::{TmCqe, app_op};
use crate::device::engine::Engine;
use crate::device::engine::translate::Need;
use crate::device::firmware::tm::TmEntry;
use crate::fabric::QpPath;

/// `enum ibv_tmh_op`.
mod tmh_op {
    pub(super) const NO_TAG: u8 = 0;
    pub(super) const RNDV: u8 = 1;
    pub(super) const FIN: u8 = 2;
    pub(super) const EAGER: u8 = 3;
}

/// `sizeof(struct ibv_tmh)`, `sizeof(struct ibv_rvh)`.
const TMH: usize = 16;
const RVH: usize = 16;

/// Where a tag-matching receive completes: the SRQ, its CQ, what the CQE says.
#[derive(Debug, Clone, Copy)]
pub(super) struct TmDelivery {
    pub(super) srqn: u32,
    pub(super) cqn: u32,
    pub(super) app_op: u8,
    pub(super) tmh: [u8; TMH],
}

/// A matched rendezvous, carried out after the request's acknowledgement.
#[derive(Debug, Clone)]
pub(in crate::device::engine) struct Rndv {
    at: QpPath,
    from: QpPath,
    srqn: u32,
    cqn: u32,
    entry: TmEntry,
    tmh: [u8; TMH],
    rvh: [u8; RVH],
}

fn be64(b: &[u8]) -> u64 {
    b.first_chunk::<8>().map_or(0, |a| u64::from_be_bytes(*a))
}

fn be32(b: &[u8]) -> u32 {
    b.first_chunk::<4>().map_or(0, |a| u32::from_be_bytes(*a))
}

impl Engine<'_> {
    /// The tag-matching SRQ the QP at `at` receives from, and its CQ.
    pub(super) fn tm_srq(&self, at: QpPath) -> Option<(u32, u32)> {
        let srqn = self.qp(at)?.srqn?;
        let s = self.devs.get(at.dev)?.fw.srq(srqn)?;
        s.tm.as_ref().map(|_| (srqn, s.cqn))
    }

    /// A SEND on a QP of a tag-matching SRQ (`from` sent it).
    pub(super) fn respond_tm(
        &mut self,
        at: QpPath,
        from: QpPath,
        (srqn, cqn): (u32, u32),
        payload: &Payload<'_>,
        corrupt: Corrupt,
    ) -> Reply {
        let gathered = match payload {
            Payload::Dma(ep) => self.gather(ep).map(|(d, _)| d).ok(),
            Payload::Bytes(b) => Some(b.to_vec()),
            _ => None,
        };
        let Some(mut data) = gathered else { return Reply::Local };
        if let Some((off, xor)) = corrupt
            && let Some(b) = usize::try_from(off).ok().and_then(|o| data.get_mut(o))
        {
            *b ^= xor;
        }
        let mut tmh = [0u8; TMH];
        let n = data.len().min(TMH);
        tmh[..n].copy_from_slice(&data[..n]);
        // Only a match scatters the TMH to the CQE; the others leave those bytes as a plain
        // receive's (zero here).
        let deliver =
            |app_op| TmDelivery { srqn, cqn, app_op, tmh: if app_op == app_op::CONSUMED_MSG { tmh } else { [0; TMH] } };
        let tagged = data.len() >= TMH
            && match tmh[0] {
                tmh_op::EAGER => true,
                tmh_op::RNDV => data.len() >= TMH + RVH,
                tmh_op::NO_TAG => {
                    return self.respond_send(at, (None, None, false), payload, corrupt, Some(deliver(app_op::NO_TAG)));
                }
                _ => false,
            };
        let matched = if tagged { self.take_tag(at.dev, srqn, be64(&tmh[8..])) } else { None };
        let Some(entry) = matched else {
            if let Some(l) = self.devs.get_mut(at.dev).and_then(|d| d.fw.srq_mut(srqn)).and_then(|s| s.tm.as_mut()) {
                l.count_unexpected();
            }
            return self.respond_send(at, (None, None, false), payload, corrupt, Some(deliver(app_op::UNEXPECTED)));
        };
        if tmh[0] == tmh_op::RNDV {
            let mut rvh = [0u8; RVH];
            rvh.copy_from_slice(&data[TMH..TMH + RVH]);
            self.tm_rndv_match(Rndv { at, from, srqn, cqn, entry, tmh, rvh });
        } else {
            self.tm_eager(at, deliver(app_op::CONSUMED_MSG), entry, &data[TMH..]);
        }
        self.give_scratch(at.dev, data);
        Reply::Ack(None)
    }

    fn take_tag(&mut self, dev: usize, srqn: u32, tag: u64) -> Option<TmEntry> {
        self.devs.get_mut(dev)?.fw.srq_mut(srqn)?.tm.as_mut()?.take_match(tag)
    }

    /// Write `bytes` into the tag's buffer: false if its memory refuses them.
    fn tm_place(&mut self, at: QpPath, entry: &TmEntry, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return true;
        }
        let Some(sge) = entry.sge else { return false };
        let Ok(target) = self.local_endpoint(self.at(at), &[sge], Need::LocalWrite, Some(bytes.len() as u64)) else {
            return false;
        };
        self.place(&Payload::Bytes(bytes), &target, None).is_ok()
    }

    fn tm_cqe(&mut self, at: QpPath, d: TmDelivery, entry: &TmEntry, byte_cnt: usize) {
        let from = self.sender(at);
        let byte_cnt = u32::try_from(byte_cnt).unwrap_or(u32::MAX);
        let (srqn, app_op, tmh, app_info) = (d.srqn, d.app_op, d.tmh, entry.index);
        let cqe = TmCqe::Recv { qpn: at.qpn, srqn, wqe_counter: 0, app_op, app_info, byte_cnt, tmh, from };
        self.push_cqe(at.dev, d.cqn, Cqe::Tm(cqe));
    }

    fn tm_eager(&mut self, at: QpPath, d: TmDelivery, entry: TmEntry, body: &[u8]) {
        let room = entry.sge.map_or(0, |s| s.length as usize);
        if body.len() > room || !self.tm_place(at, &entry, body) {
            self.tm_cqe(at, TmDelivery { app_op: app_op::MSG_COMPLETION_CANCELED, ..d }, &entry, 0);
            return;
        }
        self.tm_cqe(at, d, &entry, body.len());
    }

    fn tm_rndv_match(&mut self, r: Rndv) {
        let d = TmDelivery { srqn: r.srqn, cqn: r.cqn, app_op: app_op::CONSUMED, tmh: r.tmh };
        let len = be32(&r.rvh[12..]) as usize;
        if len > r.entry.sge.map_or(0, |s| s.length as usize) {
            // Left to software: the headers go to the buffer, as much as it holds.
            let mut hdrs = r.tmh.to_vec();
            hdrs.extend_from_slice(&r.rvh);
            hdrs.truncate(r.entry.sge.map_or(0, |s| s.length as usize));
            let ok = self.tm_place(r.at, &r.entry, &hdrs);
            let op = if ok { app_op::CONSUMED_MSG_SW_RDNV } else { app_op::MSG_COMPLETION_CANCELED };
            self.tm_cqe(r.at, TmDelivery { app_op: op, ..d }, &r.entry, hdrs.len());
            return;
        }
        self.tm_cqe(r.at, d, &r.entry, 0);
        self.rndv.push(r);
    }

    /// The rendezvous transfers matched in this step, after their requests' acknowledgements.
    pub(in crate::device::engine) fn run_rndv(&mut self) {
        for r in std::mem::take(&mut self.rndv) {
            let (va, rkey, len) = (be64(&r.rvh), be32(&r.rvh[8..]), be32(&r.rvh[12..]));
            let d = TmDelivery { srqn: r.srqn, cqn: r.cqn, app_op: app_op::EXPECTED, tmh: [0; TMH] };
            let data = match self.respond_read(r.from, rkey, va, u64::from(len)) {
                Reply::Data(data) => data,
                _ => {
                    self.tm_cqe(r.at, TmDelivery { app_op: app_op::MSG_COMPLETION_CANCELED, ..d }, &r.entry, 0);
                    continue;
                }
            };
            if !self.tm_place(r.at, &r.entry, &data) {
                self.tm_cqe(r.at, TmDelivery { app_op: app_op::MSG_COMPLETION_CANCELED, ..d }, &r.entry, 0);
                continue;
            }
            let mut fin = r.tmh.to_vec();
            fin[0] = tmh_op::FIN;
            fin.extend_from_slice(&r.rvh);
            let _ = self.respond_send(r.from, (None, None, false), &Payload::Bytes(&fin), None, None);
            self.tm_cqe(r.at, d, &r.entry, data.len());
        }
    }
}
