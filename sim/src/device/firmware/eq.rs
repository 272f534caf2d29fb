//! Event queues, UAR pages and umems: CREATE_EQ / DESTROY_EQ / QUERY_EQ / GEN_EQE,
//! ALLOC_UAR / DEALLOC_UAR, CREATE_UMEM / DESTROY_UMEM, and the device side of EQs: events
//! become 64-byte EQEs at the producer index with the ownership bit, and an armed EQ raises
//! its MSI-X vector once.
//!
//! Overrun: with `eqc.oi` clear, an event that finds the ring full (producer − consumer =
//! entries) is not written; the EQ's status becomes [`EQ_STATUS_WRITE_FAILURE`] and it takes
//! no more events. With `oi` set the device writes over the oldest entry.

use std::collections::{BTreeMap, VecDeque};

use mlx5_dv::prm::{self, eq as e, status};

use super::objects::Numbers;
use super::{Firmware, Reject, syndrome};
use crate::host::Host;

/// The `eqc.status` of an EQ that overran with `oi` clear (unverified: the PRM's
/// EQ_WRITE_FAILURE).
pub const EQ_STATUS_WRITE_FAILURE: u8 = 0xa;

/// One EQ as the firmware holds it.
#[derive(Debug, Clone)]
pub(crate) struct FwEq {
    uid: u16,
    /// `pas[0]`: the ring's address (one page holds the whole ring).
    ring: u64,
    log_size: u8,
    uar: u32,
    intr: u16,
    bitmask: [u64; 4],
    oi: bool,
    /// Producer counter: EQEs written.
    pc: u32,
    /// Consumer counter, as the last doorbell wrote it.
    cc: u32,
    armed: bool,
    status: u8,
    input: Vec<u8>,
}

impl FwEq {
    fn wants(&self, event_type: u8) -> bool {
        let (word, bit) = (usize::from(event_type / 64), event_type % 64);
        self.bitmask.get(word).is_some_and(|w| w >> bit & 1 == 1)
    }
}

/// An event waiting to be written: type, sub-type, the 28 data bytes, and the one EQ it
/// goes to (a completion event names its CQ's EQ).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event {
    pub(crate) event_type: u8,
    pub(crate) sub_type: u8,
    pub(crate) data: [u8; 28],
    pub(crate) eqn: Option<u32>,
}

impl Event {
    /// A completion event of CQ `cqn` for its EQ `eqn`.
    pub(crate) fn completion(cqn: u32, eqn: u32) -> Self {
        let mut data = [0u8; 28];
        let at = e::eqe::COMP_CQN - e::eqe::DATA;
        data[at..at + 4].copy_from_slice(&(cqn & 0xff_ffff).to_be_bytes());
        Event { event_type: e::event::COMP, sub_type: 0, data, eqn: Some(eqn) }
    }
}

/// Registered memory a umem id names: raw CQs and QPs place their rings in it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FwUmem {
    uid: u16,
    /// Address of the first byte (page address plus page offset).
    pub(crate) addr: u64,
    /// Bytes from `addr` to the end of the last page.
    pub(crate) len: u64,
}

/// The EQ, UAR and umem tables of one device.
#[derive(Debug, Clone)]
pub(super) struct EqTables {
    eq_numbers: Numbers,
    eqs: BTreeMap<u32, FwEq>,
    uar_numbers: Numbers,
    uars: BTreeMap<u32, u16>,
    umem_numbers: Numbers,
    umems: BTreeMap<u32, FwUmem>,
    pending: VecDeque<Event>,
    interrupts: Vec<u16>,
}

impl EqTables {
    /// EQEs written to every EQ so far.
    pub(super) fn written(&self) -> u64 {
        self.eqs.values().fold(0u64, |n, q| n.wrapping_add(u64::from(q.pc)))
    }

    pub(super) fn new() -> Self {
        EqTables {
            eq_numbers: Numbers::new(0, 256),
            eqs: BTreeMap::new(),
            uar_numbers: Numbers::new(1, 1 << 24),
            uars: BTreeMap::new(),
            umem_numbers: Numbers::new(1, 1 << 24),
            umems: BTreeMap::new(),
            pending: VecDeque::new(),
            interrupts: Vec::new(),
        }
    }
}

fn be64(b: &[u8]) -> u64 {
    b.iter().take(8).fold(0u64, |v, x| v << 8 | u64::from(*x))
}

const BAD: Reject = Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD);
const NO_SUCH: Reject = Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT);
const FULL: Reject = Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS);
const RANGE: Reject = Reject(status::BAD_PARAM_ERR, syndrome::OUT_OF_RANGE);

impl Firmware {
    pub(super) fn create_eq(&mut self, uid: u16, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use e::create_eq as c;
        let Some(pas) = input.get(c::PAS_BYTE..c::PAS_BYTE + 8) else {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        };
        let log_size = c::LOG_EQ_SIZE.get(input)? as u8;
        let log_page = c::LOG_PAGE_SIZE.get(input)?;
        // One page must hold the ring: 2^(log_page + 12) >= 64 * 2^log_size.
        if log_size > super::caps::LOG_MAX_EQ_SZ || log_page + 12 < u64::from(log_size) + 6 {
            return Err(BAD);
        }
        let ring = be64(pas) & !0xfff;
        if ring.checked_add(e::eqe::SIZE as u64 * (1u64 << log_size)).is_none() {
            return Err(RANGE);
        }
        let uar = c::UAR_PAGE.get(input)? as u32;
        if !self.eq.uars.contains_key(&uar) {
            return Err(NO_SUCH);
        }
        let mut bitmask = [0u64; 4];
        for (i, w) in bitmask.iter_mut().enumerate() {
            let at = c::EVENT_BITMASK_BYTE + 8 * i;
            *w = be64(&input[at..at + 8]);
        }
        let eqn = self.eq.eq_numbers.take().ok_or(FULL)?;
        let eq = FwEq {
            uid,
            ring,
            log_size,
            uar,
            intr: c::INTR.get(input)? as u16,
            bitmask,
            oi: c::OI.get(input)? != 0,
            pc: 0,
            cc: 0,
            armed: false,
            status: 0,
            input: input[..c::IN_SIZE].to_vec(),
        };
        self.eq.eqs.insert(eqn, eq);
        c::OUT_EQ_NUMBER.set(out, u64::from(eqn))?;
        Ok(())
    }

    pub(super) fn destroy_eq(&mut self, input: &[u8]) -> Result<(), Reject> {
        let eqn = e::destroy_eq::EQ_NUMBER.get(input)? as u32;
        self.eq.eqs.remove(&eqn).ok_or(NO_SUCH)?;
        self.eq.eq_numbers.give_back(eqn);
        Ok(())
    }

    pub(super) fn query_eq(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use e::create_eq as c;
        if out.len() < e::query_eq::OUT_SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let eqn = e::destroy_eq::EQ_NUMBER.get(input)? as u32;
        let q = self.eq.eqs.get(&eqn).ok_or(NO_SUCH)?;
        out[0x10..0x50].copy_from_slice(&q.input[0x10..0x50]);
        c::STATUS.set(out, u64::from(q.status))?;
        c::ST.set(out, if q.armed { 0x9 } else { 0xa })?;
        c::CONSUMER_COUNTER.set(out, u64::from(q.cc & 0xff_ffff))?;
        c::PRODUCER_COUNTER.set(out, u64::from(q.pc & 0xff_ffff))?;
        out[0x58..0x60].copy_from_slice(&q.bitmask[0].to_be_bytes());
        Ok(())
    }

    pub(super) fn gen_eqe(&mut self, input: &[u8]) -> Result<(), Reject> {
        use e::gen_eqe as g;
        let Some(raw) = input.get(g::EQE_BYTE..g::EQE_BYTE + e::eqe::SIZE) else {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        };
        let eqn = e::destroy_eq::EQ_NUMBER.get(input)? as u32;
        if !self.eq.eqs.contains_key(&eqn) {
            return Err(NO_SUCH);
        }
        let mut data = [0u8; 28];
        data.copy_from_slice(&raw[e::eqe::DATA..e::eqe::DATA + 28]);
        let ev = Event { event_type: raw[e::eqe::TYPE], sub_type: raw[e::eqe::SUB_TYPE], data, eqn: Some(eqn) };
        self.eq.pending.push_back(ev);
        Ok(())
    }

    pub(super) fn alloc_uar(&mut self, uid: u16, out: &mut [u8]) -> Result<(), Reject> {
        let n = self.eq.uar_numbers.take().ok_or(FULL)?;
        self.eq.uars.insert(n, uid);
        e::uar::UAR.set(out, u64::from(n))?;
        Ok(())
    }

    pub(super) fn dealloc_uar(&mut self, input: &[u8]) -> Result<(), Reject> {
        let n = e::uar::UAR.get(input)? as u32;
        self.eq.uars.remove(&n).ok_or(NO_SUCH)?;
        self.eq.uar_numbers.give_back(n);
        Ok(())
    }

    pub(super) fn create_umem(&mut self, uid: u16, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use e::umem as u;
        let n_mtt = u::NUM_OF_MTT.get(input)?;
        let shift = u::LOG_PAGE_SIZE.get(input)? + 12;
        let offset = u::PAGE_OFFSET.get(input)?;
        let first = input.get(u::MTT_BYTE..u::MTT_BYTE + 8);
        let end = usize::try_from(n_mtt).ok().and_then(|n| n.checked_mul(8)).and_then(|b| b.checked_add(u::MTT_BYTE));
        let (Some(first), Some(true)) = (first, end.map(|e| e <= input.len())) else {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        };
        let len = 1u64.checked_shl(shift as u32).and_then(|p| p.checked_mul(n_mtt)).ok_or(BAD)?;
        if n_mtt == 0 || offset >= len {
            return Err(BAD);
        }
        if be64(first) & 0b11 == 0 {
            return Err(BAD); // a page neither readable nor writable
        }
        let base = be64(first) & !0xfff;
        if base.checked_add(len).is_none() {
            return Err(RANGE);
        }
        let id = self.eq.umem_numbers.take().ok_or(FULL)?;
        let addr = base + offset;
        self.eq.umems.insert(id, FwUmem { uid, addr, len: len - offset });
        u::UMEM_ID.set(out, u64::from(id))?;
        Ok(())
    }

    pub(super) fn destroy_umem(&mut self, input: &[u8]) -> Result<(), Reject> {
        let id = e::umem::UMEM_ID.get(input)? as u32;
        self.eq.umems.remove(&id).ok_or(NO_SUCH)?;
        self.eq.umem_numbers.give_back(id);
        Ok(())
    }

    /// The umem with this id.
    pub(crate) fn umem(&self, id: u32) -> Option<FwUmem> {
        self.eq.umems.get(&id).copied()
    }

    /// Whether EQ `eqn` exists.
    pub(crate) fn has_eq(&self, eqn: u32) -> bool {
        self.eq.eqs.contains_key(&eqn)
    }

    /// Raise an event: it goes to every EQ whose `event_bitmask` has its type (a completion
    /// event only to the EQ it names) when the device next writes EQEs.
    pub(crate) fn post_event(&mut self, ev: Event) {
        if !self.eq.eqs.is_empty() {
            self.eq.pending.push_back(ev);
        }
    }

    /// A write to an EQ doorbell of UAR page `uar`: `value` is `ci & 0xffffff | eqn << 24`;
    /// `arm` asks for one interrupt at the next EQE. A doorbell of another UAR is ignored.
    pub(crate) fn eq_doorbell(&mut self, uar: u32, value: u32, arm: bool) {
        let eqn = value >> 24;
        let Some(q) = self.eq.eqs.get_mut(&eqn).filter(|q| q.uar == uar) else { return };
        // The doorbell carries 24 bits of the consumer counter: the nearest one at or
        // behind the producer.
        let behind = q.pc.wrapping_sub(value) & 0xff_ffff;
        q.cc = q.pc.wrapping_sub(behind);
        q.armed = arm;
        // An EQ armed while it holds EQEs past the consumer index fires at once.
        if arm && q.pc != q.cc {
            q.armed = false;
            self.eq.interrupts.push(q.intr);
        }
    }

    /// Write the pending events into their EQs' rings and raise the vectors of armed EQs.
    pub(crate) fn write_eqes(&mut self, host: &mut Host) {
        while let Some(ev) = self.eq.pending.pop_front() {
            let t = &mut self.eq;
            for (n, q) in t.eqs.iter_mut() {
                let wanted = match ev.eqn {
                    Some(eqn) => eqn == *n,
                    None => q.wants(ev.event_type),
                };
                if !wanted || q.status != 0 {
                    continue;
                }
                let nent = 1u32 << q.log_size;
                if q.pc.wrapping_sub(q.cc) >= nent && !q.oi {
                    q.status = EQ_STATUS_WRITE_FAILURE;
                    continue;
                }
                let mut eqe = [0u8; e::eqe::SIZE];
                eqe[e::eqe::TYPE] = ev.event_type;
                eqe[e::eqe::SUB_TYPE] = ev.sub_type;
                eqe[e::eqe::DATA..e::eqe::DATA + 28].copy_from_slice(&ev.data);
                eqe[e::eqe::OWNER] = u8::from(q.pc & nent != 0);
                let slot = u64::from(q.pc & (nent - 1)) * e::eqe::SIZE as u64;
                if !host.publish(q.ring.wrapping_add(slot), &eqe) {
                    q.status = EQ_STATUS_WRITE_FAILURE;
                    continue;
                }
                q.pc = q.pc.wrapping_add(1);
                if q.armed {
                    q.armed = false;
                    t.interrupts.push(q.intr);
                }
            }
        }
    }

    /// Whether EQEs wait to be written or vectors to be raised.
    pub(crate) fn eqes_pending(&self) -> bool {
        !self.eq.pending.is_empty() || !self.eq.interrupts.is_empty()
    }

    /// The MSI-X vectors raised since the last call, in order.
    pub(crate) fn take_interrupts(&mut self) -> Vec<u16> {
        std::mem::take(&mut self.eq.interrupts)
    }

    /// The EQs, UARs and umems created under `uid`, for a closed context's cleanup.
    pub(crate) fn eq_objects_of_uid(&self, uid: u16) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let eqs = self.eq.eqs.iter().filter(|(_, q)| q.uid == uid).map(|(n, _)| *n).collect();
        let uars = self.eq.uars.iter().filter(|(_, u)| **u == uid).map(|(n, _)| *n).collect();
        let umems = self.eq.umems.iter().filter(|(_, u)| u.uid == uid).map(|(n, _)| *n).collect();
        (eqs, uars, umems)
    }
}

/// Build the input of a command that names one object by a 24-bit (or 8-bit) field.
pub(crate) fn named_input(opcode: u16, field: prm::Field, n: u32) -> Vec<u8> {
    let mut input = prm::new_input(16, opcode, 0, 0);
    let _ = field.set(&mut input, u64::from(n));
    input
}
