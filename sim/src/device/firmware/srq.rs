//! Shared receive queues: CREATE_SRQ / QUERY_SRQ / ARM_RQ / DESTROY_SRQ, and the device's side
//! of an SRQ's linked list of WQEs.
//!
//! An SRQ WQE starts with a 16-byte next segment whose `next_wqe_index` (BE16 at byte 2) names
//! the WQE after it; the device follows that list from WQE 0, taking one WQE per receive while
//! the doorbell record's counter is ahead of what it consumed. The provider links freed WQEs at
//! the list's tail before it posts into them, so the index the device reads is always set.

use std::collections::BTreeMap;

use mlx5_dv::prm::{self, queues::srq as f, status};

use super::{Firmware, Reject, syndrome};
use crate::device::contract::{QueueBuf, RecvWqe, decode_recv};
use crate::host::{Dma, Host};

const BAD: Reject = Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD);
const NO_SUCH: Reject = Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT);

/// Bytes of an SRQ WQE's next segment (`struct mlx5_wqe_srq_next_seg`).
const NEXT_SEG: usize = 16;

/// An SRQ as the device holds it.
#[derive(Debug, Clone)]
pub struct FwSrq {
    /// Its PD: an XRC target's RDMA and atomic requests are checked against it.
    pub(in crate::device) pdn: u32,
    /// The CQ an XRC SRQ's receives complete on (0 for a basic SRQ: its QP's CQ).
    pub(in crate::device) cqn: u32,
    /// The XRC domain of an XRC SRQ (0: a basic SRQ).
    pub(in crate::device) xrcd: u32,
    /// The WQEs in host memory.
    pub(in crate::device) buf: QueueBuf,
    /// The doorbell record: the counter of WQEs posted (BE32).
    pub(in crate::device) dbrec: u64,
    /// What the doorbell record last said.
    pub(in crate::device) pc: u16,
    /// WQEs consumed.
    pub(in crate::device) cc: u16,
    /// The WQE the device takes next.
    next: u16,
    /// The limit watermark; 0 when disarmed.
    lwm: u16,
    /// A tag-matching SRQ's list (`None` for other SRQs).
    pub(in crate::device) tm: Option<super::tm::TmList>,
}

impl FwSrq {
    /// WQEs posted and not yet consumed.
    pub(in crate::device) fn posted(&self) -> u16 {
        self.pc.wrapping_sub(self.cc)
    }

    /// Read the doorbell record's counter.
    pub(in crate::device) fn ring(&mut self, host: &Host) {
        if let Some(b) = host.read(self.dbrec, 4).and_then(|b| b.first_chunk::<4>().copied()) {
            self.pc = u32::from_be_bytes(b) as u16;
        }
    }

    /// Take the next posted WQE, following the list; `None` when none is posted. The second
    /// value is true when the take dropped the count below an armed limit (the limit then
    /// disarms: the event fires once per arming).
    pub(in crate::device) fn take(&mut self, host: &Host) -> Option<(RecvWqe, bool)> {
        if self.posted() == 0 || self.buf.is_empty() {
            return None;
        }
        let index = self.next;
        let bytes = host.read(self.buf.slot(u32::from(index)), self.buf.stride as usize).unwrap_or_default();
        let next = bytes.get(2..4).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
        self.next = next & (self.buf.wqe_cnt.saturating_sub(1) as u16);
        self.cc = self.cc.wrapping_add(1);
        let r = decode_recv(index, bytes.get(NEXT_SEG..).unwrap_or_default());
        let hit = self.lwm != 0 && self.posted() < self.lwm;
        if hit {
            self.lwm = 0;
        }
        Some((r, hit))
    }
}

/// The SRQs of a device, by number.
#[derive(Debug, Clone)]
pub(super) struct SrqTable {
    srqs: BTreeMap<u32, FwSrq>,
    next: u32,
    /// One past the largest number (`1 << log_max_srq`).
    limit: u32,
    /// `log_tag_matching_list_sz` when the device has `tag_matching`.
    tm_log: Option<u8>,
}

impl SrqTable {
    pub(super) fn new(log_max_srq: u8, tm_log: Option<u8>) -> Self {
        SrqTable { srqs: BTreeMap::new(), next: 1, limit: 1u32 << log_max_srq.min(24), tm_log }
    }
}

fn get32(field: mlx5_dv::prm::Field, input: &[u8]) -> Result<u32, Reject> {
    u32::try_from(field.get(input)?).map_err(|_| BAD)
}

impl Firmware {
    /// CREATE_SRQ: the buffer at `pas[0]` plus `page_offset`, `2^log_srq_size` WQEs of
    /// `16 << log_rq_stride` bytes, its PD, CQ and doorbell record.
    pub(super) fn create_srq(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        if input.len() < f::SIZE + 8 {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        let pdn = get32(f::PD, input)?;
        let cqn = get32(f::CQN, input)?;
        let xrcd = get32(f::XRCD, input)?;
        // A basic SRQ names no CQ (0) and no domain; an XRC SRQ both.
        if !self.has_pd(pdn) || (cqn != 0 && self.cq_mut(cqn).is_none()) || (xrcd != 0 && !self.has_xrcd(xrcd)) {
            return Err(NO_SUCH);
        }
        let log_size = f::LOG_SRQ_SIZE.get(input)?;
        let stride = 16u32 << f::LOG_RQ_STRIDE.get(input)?;
        let page = input.get(f::SIZE..f::SIZE + 8).map_or(0, |b| b.iter().fold(0u64, |v, x| v << 8 | u64::from(*x)));
        let addr = (page & !0xfff).checked_add(f::PAGE_OFFSET.get(input)? * 64).ok_or(BAD)?;
        let buf = QueueBuf { addr, wqe_cnt: 1 << log_size, stride };
        addr.checked_add(buf.len() as u64).ok_or(BAD)?;
        let t = &mut self.srqs;
        if t.srqs.len() as u32 >= t.limit.saturating_sub(1) {
            return Err(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS));
        }
        let mut n = t.next.clamp(1, t.limit - 1);
        while t.srqs.contains_key(&n) {
            n = if n + 1 >= t.limit { 1 } else { n + 1 };
        }
        t.next = n + 1;
        let lwm = f::LWM.get(input)? as u16;
        let srq = FwSrq { pdn, cqn, xrcd, buf, dbrec: f::DBR_ADDR.get(input)?, pc: 0, cc: 0, next: 0, lwm, tm: None };
        t.srqs.insert(n, srq);
        f::SRQN.set(out, u64::from(n))?;
        Ok(())
    }

    /// DESTROY_SRQ (as the other destroy commands, whoever made it).
    pub(super) fn destroy_srq(&mut self, input: &[u8]) -> Result<(), Reject> {
        let n = get32(f::SRQN, input)?;
        self.srqs.srqs.remove(&n).map(drop).ok_or(NO_SUCH)
    }

    /// QUERY_SRQ: the `srqc` with its limit watermark and the WQEs posted.
    pub(super) fn query_srq(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        if out.len() < f::SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let n = get32(f::SRQN, input)?;
        let s = self.srqs.srqs.get(&n).ok_or(NO_SUCH)?;
        let fields = [
            (f::LOG_SRQ_SIZE, u64::from(s.buf.wqe_cnt.max(1).trailing_zeros())),
            (f::LOG_RQ_STRIDE, u64::from((s.buf.stride / 16).max(1).trailing_zeros())),
            (f::CQN, u64::from(s.cqn)),
            (f::XRCD, u64::from(s.xrcd)),
            (f::PD, u64::from(s.pdn)),
            (f::LWM, u64::from(s.lwm)),
            (f::WQE_CNT, u64::from(s.posted())),
            (f::DBR_ADDR, s.dbrec),
        ];
        for (fl, v) in fields {
            fl.set(out, v)?;
        }
        Ok(())
    }

    /// ARM_RQ of an SRQ: the new limit watermark, armed.
    pub(super) fn arm_rq(&mut self, input: &[u8]) -> Result<(), Reject> {
        if prm::mbox_in::OP_MOD.get(input)? as u16 != f::ARM_RQ_OP_MOD_SRQ {
            return Err(BAD);
        }
        let n = get32(f::SRQN, input)?;
        let s = self.srqs.srqs.get_mut(&n).ok_or(NO_SUCH)?;
        let lwm = f::ARM_LWM.get(input)? as u16;
        if u32::from(lwm) >= s.buf.wqe_cnt {
            return Err(BAD);
        }
        s.lwm = lwm;
        Ok(())
    }

    /// `log_tag_matching_list_sz`, if the device has tag matching.
    pub(in crate::device) fn tm_log_list_size(&self) -> Option<u8> {
        self.srqs.tm_log
    }

    /// The SRQ with this number, mutably.
    pub(in crate::device) fn srq_mut(&mut self, srqn: u32) -> Option<&mut FwSrq> {
        self.srqs.srqs.get_mut(&srqn)
    }

    /// The SRQ with this number.
    pub(in crate::device) fn srq(&self, srqn: u32) -> Option<&FwSrq> {
        self.srqs.srqs.get(&srqn)
    }

    /// Every SRQ's number.
    pub(in crate::device) fn srq_numbers(&self) -> Vec<u32> {
        self.srqs.srqs.keys().copied().collect()
    }
}
