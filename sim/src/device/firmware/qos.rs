//! The QoS capability page (0xc) and the packet pacing rate table behind SET_PP_RATE_LIMIT
//! (0x780): entry `rate_limit_index` takes the context's bytes, or is cleared by a context
//! whose rate is 0. Entry 0 is the unlimited rate and cannot be set.
//!
//! The firmware's own checks on the context are not public: the simulator takes a rate of
//! 0 (clear) or one in `[packet_pacing_min_rate, packet_pacing_max_rate]` and an index
//! from 1 below `packet_pacing_rate_table_size`, and answers BAD_PARAM otherwise.

use mlx5_dv::prm::{self, FieldError, pp, qos_cap as qc, status};

use super::caps::Page;
use super::{Firmware, Reject, syndrome};
use crate::profile::Profile;

/// The rate table and the QoS page.
#[derive(Debug, Clone)]
pub(super) struct Qos {
    /// `qos_cap`.
    pub(super) page: Page,
    /// The context and uid of each entry set; index 0 unused.
    entries: Vec<Option<(u16, [u8; pp::CONTEXT_SIZE])>>,
    min_rate: u32,
    max_rate: u32,
}

impl Qos {
    pub(super) fn new(profile: &Profile) -> Result<Self, FieldError> {
        let h = &profile.hca_cap;
        let mut page = Box::new([0u8; prm::query_hca_cap::CAPABILITY_SIZE]);
        let p = &mut page[..];
        qc::PACKET_PACING.set(p, u64::from(h.packet_pacing))?;
        qc::PACKET_PACING_UID.set(p, u64::from(h.packet_pacing))?;
        qc::PACKET_PACING_MAX_RATE.set(p, u64::from(h.packet_pacing_max_rate))?;
        qc::PACKET_PACING_MIN_RATE.set(p, u64::from(h.packet_pacing_min_rate))?;
        qc::PACKET_PACING_RATE_TABLE_SIZE.set(p, u64::from(h.packet_pacing_rate_table_size))?;
        if h.nic_scheduling {
            use qc::sched;
            for f in [qc::NIC_SQ_SCHEDULING, qc::NIC_QP_SCHEDULING, qc::NIC_BW_SHARE, qc::NIC_RATE_LIMIT] {
                f.set(p, 1)?;
            }
            qc::NIC_ELEMENT_TYPE.set(p, sched::ELEMENT_TSAR_CAP | sched::ELEMENT_QUEUE_GROUP_CAP)?;
            qc::NIC_TSAR_TYPE.set(p, sched::TSAR_DWRR_CAP)?;
        }
        let size = if h.packet_pacing { usize::from(h.packet_pacing_rate_table_size) } else { 0 };
        Ok(Qos {
            page,
            entries: vec![None; size],
            min_rate: h.packet_pacing_min_rate,
            max_rate: h.packet_pacing_max_rate,
        })
    }
}

impl Firmware {
    /// SET_PP_RATE_LIMIT: set or clear one entry of the rate table.
    pub(super) fn set_pp_rate_limit(&mut self, uid: u16, input: &[u8]) -> Result<(), Reject> {
        let bad = Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD);
        if input.len() < pp::IN_SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        let index = pp::RATE_LIMIT_INDEX.get(input)? as usize;
        let ctx = &input[pp::CONTEXT_BYTE..pp::IN_SIZE];
        let rate = pp::RATE_LIMIT.get(ctx)? as u32;
        if index == 0 || index >= self.qos.entries.len() {
            return Err(bad);
        }
        if rate != 0 && !(self.qos.min_rate..=self.qos.max_rate).contains(&rate) {
            return Err(bad);
        }
        self.qos.entries[index] = if rate == 0 {
            None
        } else {
            let mut c = [0u8; pp::CONTEXT_SIZE];
            c.copy_from_slice(ctx);
            Some((uid, c))
        };
        Ok(())
    }

    /// The rate (kbps) and uid of rate table entry `index`, if set.
    pub fn pp_entry(&self, index: u16) -> Option<(u32, u16)> {
        let (uid, c) = self.qos.entries.get(usize::from(index))?.as_ref()?;
        Some((pp::RATE_LIMIT.get(c).ok()? as u32, *uid))
    }

    /// VAR doorbell pages of the virtio emulation BAR (0 without VIRTIO_NET_Q objects).
    pub fn var_doorbell_pages(&self) -> u32 {
        self.var_pages
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{exec, fw};
    use super::*;

    fn set(f: &mut Firmware, index: u16, rate: u32) -> Result<u8, Box<dyn std::error::Error>> {
        let mut input = prm::new_input(pp::IN_SIZE, pp::SET_PP_RATE_LIMIT, 0, 0);
        pp::RATE_LIMIT_INDEX.set(&mut input, u64::from(index))?;
        pp::RATE_LIMIT.set(&mut input[pp::CONTEXT_BYTE..], u64::from(rate))?;
        Ok(exec(f, &input, 16).0)
    }

    #[test]
    fn entries_from_one_in_range_and_cleared_by_rate_zero() -> Result<(), Box<dyn std::error::Error>> {
        let mut f = fw()?;
        assert_eq!(set(&mut f, 0, 100)?, status::BAD_PARAM_ERR, "entry 0 is the unlimited rate");
        assert_eq!(set(&mut f, 128, 100)?, status::BAD_PARAM_ERR, "past the table");
        assert_eq!(set(&mut f, 1, 100_000_001)?, status::BAD_PARAM_ERR, "past the maximum rate");
        assert_eq!(set(&mut f, 1, 100)?, status::OK);
        assert_eq!(f.pp_entry(1), Some((100, 0)));
        assert_eq!(set(&mut f, 1, 0)?, status::OK);
        assert_eq!(f.pp_entry(1), None);
        Ok(())
    }
}
