//! Flow counters: ALLOC_FLOW_COUNTER (one counter, or a bulk), DEALLOC_FLOW_COUNTER and
//! QUERY_FLOW_COUNTER.
//!
//! A bulk is `1 << flow_counter_bulk_log_size` counters, or `128 * flow_counter_bulk` (a
//! one-bit mask the `flow_counter_bulk_alloc` capability lists); its ids are consecutive from
//! the id ALLOC answers, which is a multiple of the bulk's size. DEALLOC takes that first id
//! and frees the whole bulk. QUERY reads `num_of_counters` (0: one) counters from an id, all
//! of one allocation, into the output after its 16-byte header, and with `clear` zeroes them.
//! The firmware's own choices (not public): ids count from 1; a command that gives both bulk
//! forms, names a counter (`flow_counter_by_name` is 0) or asks for `dump_to_memory` is
//! BAD_PARAM.

use std::collections::BTreeMap;

use mlx5_dv::prm::{flow_counter as fc, status};

use super::{Firmware, Reject, syndrome};
use crate::profile::Profile;

/// The lowest id handed out.
const FIRST_ID: u32 = 1;
/// Ids stay below this (31 bits).
const ID_LIMIT: u64 = 1 << 31;

/// The counters of a device.
#[derive(Debug, Clone, Default)]
pub(super) struct FlowCounters {
    /// `max_flow_counter`: 0 when the firmware has none.
    max: u32,
    /// `flow_counter_bulk_alloc`.
    bulk_masks: u8,
    /// `log_max_flow_counter_bulk`.
    log_max_bulk: u8,
    /// Live allocations: first id → counters.
    blocks: BTreeMap<u32, u32>,
    /// Counters live, all allocations together.
    live: u64,
    /// Packets and bytes of the counters that have counted any, by id.
    values: BTreeMap<u32, (u64, u64)>,
}

impl FlowCounters {
    pub(super) fn new(profile: &Profile) -> Self {
        let h = &profile.hca_cap;
        FlowCounters {
            max: h.max_flow_counter,
            bulk_masks: h.flow_counter_bulk_alloc,
            log_max_bulk: h.log_max_flow_counter_bulk,
            ..Default::default()
        }
    }

    /// The allocation holding `id`: its first id and size.
    fn block_of(&self, id: u32) -> Option<(u32, u32)> {
        let (&first, &n) = self.blocks.range(..=id).next_back()?;
        (u64::from(id) < u64::from(first) + u64::from(n)).then_some((first, n))
    }

    /// The lowest free run of `n` ids that starts at a multiple of `n`.
    fn free_run(&self, n: u32) -> Option<u32> {
        let align = u64::from(n.max(1));
        let up = |v: u64| v.div_ceil(align) * align;
        let mut at = up(u64::from(FIRST_ID));
        for (&first, &size) in &self.blocks {
            if at + u64::from(n) <= u64::from(first) {
                break;
            }
            at = at.max(up(u64::from(first) + u64::from(size)));
        }
        (at + u64::from(n) <= ID_LIMIT).then_some(at as u32)
    }
}

fn bad_field() -> Reject {
    Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD)
}

impl Firmware {
    /// ALLOC_FLOW_COUNTER.
    pub(super) fn alloc_flow_counter(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        let c = &mut self.counters;
        if c.max == 0 {
            return Err(Reject(status::BAD_OP_ERR, syndrome::UNKNOWN_OPCODE));
        }
        if input.len() < fc::ALLOC_SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        if out.len() < fc::ALLOC_SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let log = fc::BULK_LOG_SIZE.get(input)?;
        let mask = fc::BULK.get(input)?;
        if fc::ID.get(input)? != 0 || (log != 0 && mask != 0) {
            return Err(bad_field());
        }
        let n: u32 = if log != 0 {
            if log > u64::from(c.log_max_bulk) {
                return Err(bad_field());
            }
            1 << log
        } else if mask != 0 {
            if mask.count_ones() != 1 || mask & u64::from(c.bulk_masks) == 0 {
                return Err(bad_field());
            }
            128 * mask as u32
        } else {
            1
        };
        if c.live + u64::from(n) > u64::from(c.max) {
            return Err(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS));
        }
        let first = c.free_run(n).ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        c.blocks.insert(first, n);
        c.live += u64::from(n);
        fc::ID.set(out, u64::from(first))?;
        Ok(())
    }

    /// DEALLOC_FLOW_COUNTER: the first id of an allocation frees all of it.
    pub(super) fn dealloc_flow_counter(&mut self, input: &[u8]) -> Result<(), Reject> {
        let c = &mut self.counters;
        if c.max == 0 {
            return Err(Reject(status::BAD_OP_ERR, syndrome::UNKNOWN_OPCODE));
        }
        let id = fc::ID.get(input)? as u32;
        let n = c.blocks.remove(&id).ok_or(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT))?;
        c.live -= u64::from(n);
        let end = u64::from(id) + u64::from(n);
        c.values.retain(|k, _| u64::from(*k) < u64::from(id) || u64::from(*k) >= end);
        Ok(())
    }

    /// QUERY_FLOW_COUNTER.
    pub(super) fn query_flow_counter(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        let c = &mut self.counters;
        if c.max == 0 {
            return Err(Reject(status::BAD_OP_ERR, syndrome::UNKNOWN_OPCODE));
        }
        if input.len() < fc::QUERY_IN_SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        if fc::QUERY_DUMP_TO_MEMORY.get(input)? != 0 {
            return Err(bad_field());
        }
        let id = fc::QUERY_ID.get(input)? as u32;
        let num = fc::QUERY_NUM.get(input)?.max(1);
        let (first, n) = c.block_of(id).ok_or(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT))?;
        if u64::from(id) + num > u64::from(first) + u64::from(n) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
        }
        let need = (num as usize).saturating_mul(fc::STATS_SIZE).saturating_add(fc::STATS_BYTE);
        if out.len() < need {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let clear = fc::QUERY_CLEAR.get(input)? != 0;
        for (i, k) in (id..).take(num as usize).enumerate() {
            let (packets, octets) = c.values.get(&k).copied().unwrap_or_default();
            let at = fc::STATS_BYTE + i * fc::STATS_SIZE;
            let stats = &mut out[at..at + fc::STATS_SIZE];
            fc::PACKETS.set(stats, packets)?;
            fc::OCTETS.set(stats, octets)?;
        }
        if clear {
            let end = u64::from(id) + num;
            c.values.retain(|k, _| u64::from(*k) < u64::from(id) || u64::from(*k) >= end);
        }
        Ok(())
    }

    /// Whether flow counter `id` is allocated.
    fn has_flow_counter(&self, id: u32) -> bool {
        self.counters.block_of(id).is_some()
    }

    /// Count one packet of `bytes` on flow counter `id`, if it is allocated (what a rule's
    /// count action does).
    pub(crate) fn count_flow(&mut self, id: u32, bytes: u64) {
        if self.has_flow_counter(id) {
            let v = self.counters.values.entry(id).or_default();
            v.0 = v.0.wrapping_add(1);
            v.1 = v.1.wrapping_add(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use mlx5_dv::prm::{self, read_status};

    use super::super::tests::{exec, fw};
    use super::*;
    use crate::profile::ShippedProfiles;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn alloc(f: &mut Firmware, log: u64, mask: u64) -> Result<(u8, u32), Box<dyn std::error::Error>> {
        let mut i = prm::new_input(fc::ALLOC_SIZE, fc::ALLOC, 0, 0);
        fc::BULK_LOG_SIZE.set(&mut i, log)?;
        fc::BULK.set(&mut i, mask)?;
        let (s, _, out) = exec(f, &i, fc::ALLOC_SIZE);
        Ok((s, fc::ID.get(&out)? as u32))
    }

    fn query(f: &mut Firmware, id: u32, num: u64, clear: bool) -> Result<(u8, Vec<u8>), Box<dyn std::error::Error>> {
        let mut i = prm::new_input(fc::QUERY_IN_SIZE, fc::QUERY, 0, 0);
        fc::QUERY_ID.set(&mut i, u64::from(id))?;
        fc::QUERY_NUM.set(&mut i, num)?;
        fc::QUERY_CLEAR.set(&mut i, u64::from(clear))?;
        let (s, _, out) = exec(f, &i, fc::STATS_BYTE + fc::STATS_SIZE * num.max(1) as usize);
        Ok((s, out))
    }

    #[test]
    fn single_and_bulk_allocations_count_and_clear() -> TestResult {
        let mut f = fw()?;
        let (s, one) = alloc(&mut f, 0, 0)?;
        assert_eq!((s, one), (status::OK, 1));
        let (s, bulk) = alloc(&mut f, 0, 2)?;
        assert_eq!((s, bulk), (status::OK, 256), "256 counters, aligned to 256");
        let (s, logb) = alloc(&mut f, 3, 0)?;
        assert_eq!((s, logb), (status::OK, 8), "8 counters fit between 1 and 256");
        f.count_flow(bulk + 5, 100);
        f.count_flow(bulk + 5, 60);
        let (s, out) = query(&mut f, bulk + 4, 2, true)?;
        assert_eq!(s, status::OK);
        assert_eq!(fc::PACKETS.get(&out[fc::STATS_BYTE..])?, 0);
        assert_eq!(fc::PACKETS.get(&out[fc::STATS_BYTE + 16..])?, 2);
        assert_eq!(fc::OCTETS.get(&out[fc::STATS_BYTE + 16..])?, 160);
        let (_, out) = query(&mut f, bulk + 5, 0, false)?;
        assert_eq!(fc::PACKETS.get(&out[fc::STATS_BYTE..])?, 0, "cleared");
        assert_eq!(query(&mut f, bulk + 255, 2, false)?.0, status::BAD_PARAM_ERR, "past the bulk");
        assert_eq!(query(&mut f, 2, 0, false)?.0, status::BAD_PARAM_ERR, "not allocated");
        let mut d = prm::new_input(fc::ALLOC_SIZE, fc::DEALLOC, 0, 0);
        fc::ID.set(&mut d, u64::from(bulk + 1))?;
        assert_eq!(exec(&mut f, &d, 16).0, status::BAD_PARAM_ERR, "not a first id");
        fc::ID.set(&mut d, u64::from(bulk))?;
        assert_eq!(read_status(&exec(&mut f, &d, 16).2).0, status::OK);
        assert!(!f.has_flow_counter(bulk + 5));
        Ok(())
    }

    #[test]
    fn bad_bulks_and_no_counters() -> TestResult {
        let mut f = fw()?;
        assert_eq!(alloc(&mut f, 1, 1)?.0, status::BAD_PARAM_ERR, "both forms");
        assert_eq!(alloc(&mut f, 0, 3)?.0, status::BAD_PARAM_ERR, "two bits");
        assert_eq!(alloc(&mut f, 24, 0)?.0, status::BAD_PARAM_ERR, "past log_max_flow_counter_bulk");
        let mut p = Profile::builtin("cx6dx")?;
        p.hca_cap.max_flow_counter = 0;
        let mut none = Firmware::new(&p)?;
        assert_eq!(alloc(&mut none, 0, 0)?.0, status::BAD_OP_ERR);
        p.hca_cap.max_flow_counter = 2;
        let mut two = Firmware::new(&p)?;
        assert_eq!(alloc(&mut two, 1, 0)?.0, status::OK);
        assert_eq!(alloc(&mut two, 0, 0)?.0, status::LIM_ERR);
        Ok(())
    }
}
