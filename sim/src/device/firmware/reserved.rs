//! RESERVED_QPN general objects (0x2c): a block of `1 << log_obj_range` QP numbers that no
//! QP takes while the object lives; its object id is the block's first number, aligned to the
//! block's size. libmlx5 (`mlx5dv_reserved_qpn_alloc`) asks for blocks of
//! `cmd_hca_cap_2.log_reserved_qpn_granularity` numbers and hands them out one by one.
//!
//! The firmware's own placement and its limits on `log_obj_range` are not public: the
//! simulator takes ranges up to the granularity (a larger one is BAD_PARAM) and places a block
//! at the first free aligned spot from where QP numbering has got to, then moves numbering
//! past it, so numbers keep going forward.

use std::collections::BTreeMap;

use mlx5_dv::prm::{self, cmd_hca_cap_2 as c2, status};

use super::caps::Page;
use super::{Firmware, Reject, syndrome};
use crate::profile::Profile;

/// The QP numbers the firmware gives out: 24 bits, from 0x100 (0 and 1 are special QPs).
pub(super) const FIRST_QPN: u32 = 0x100;
/// The last QP number.
pub(super) const LAST_QPN: u32 = 0xff_ffff;

/// The reserved blocks and the second general capability page.
#[derive(Debug, Clone)]
pub(super) struct ReservedQpns {
    /// `general_obj_types` has RESERVED_QPN.
    supported: bool,
    /// `log_reserved_qpn_granularity`.
    log_granularity: u8,
    /// First QP number -> (uid, count).
    blocks: BTreeMap<u32, (u16, u32)>,
    /// `cmd_hca_cap_2`.
    pub(super) page: Page,
}

impl ReservedQpns {
    pub(super) fn new(profile: &Profile) -> Result<Self, prm::FieldError> {
        let h = &profile.hca_cap;
        let mut page = Box::new([0u8; prm::query_hca_cap::CAPABILITY_SIZE]);
        c2::LOG_RESERVED_QPN_GRANULARITY.set(&mut page[..], u64::from(h.log_reserved_qpn_granularity))?;
        let supported = h.general_obj_types.contains(&crate::profile::GeneralObjType::ReservedQpn);
        Ok(ReservedQpns { supported, log_granularity: h.log_reserved_qpn_granularity, blocks: BTreeMap::new(), page })
    }

    /// `qpn` lies in a reserved block.
    pub(super) fn holds(&self, qpn: u32) -> bool {
        self.blocks.range(..=qpn).next_back().is_some_and(|(first, (_, n))| qpn - first < *n)
    }

    /// The blocks `uid` created, for the kernel's cleanup of a closed context.
    pub(super) fn of_uid(&self, uid: u16) -> impl Iterator<Item = u32> + '_ {
        self.blocks.iter().filter(move |(_, (u, _))| *u == uid).map(|(f, _)| *f)
    }

    /// Number of live blocks.
    pub(super) fn len(&self) -> usize {
        self.blocks.len()
    }
}

const fn bad(syn: u32) -> Reject {
    Reject(status::BAD_PARAM_ERR, syn)
}

impl Firmware {
    /// CREATE_GENERAL_OBJECT of a RESERVED_QPN: an aligned block free of QPs and of other
    /// blocks.
    pub(super) fn create_reserved_qpn(&mut self, uid: u16, input: &[u8]) -> Result<u32, Reject> {
        if !self.reserved.supported {
            return Err(bad(syndrome::BAD_FIELD));
        }
        let log = prm::general_obj_in::LOG_OBJ_RANGE.get(input)? as u8;
        if log > self.reserved.log_granularity {
            return Err(bad(syndrome::BAD_FIELD));
        }
        let n = 1u32 << log;
        let align_up = |q: u32| q.div_ceil(n).saturating_mul(n);
        let start = align_up(self.next_qpn.clamp(FIRST_QPN, LAST_QPN));
        // Two passes: from where numbering has got to, then from the bottom.
        for from in [start, align_up(FIRST_QPN)] {
            let mut first = from;
            while first.checked_add(n - 1).is_some_and(|last| last <= LAST_QPN) {
                if (first..first + n).all(|q| !self.qps.contains_key(q) && !self.reserved.holds(q)) {
                    self.reserved.blocks.insert(first, (uid, n));
                    self.next_qpn = if first + n > LAST_QPN { FIRST_QPN } else { first + n };
                    return Ok(first);
                }
                first += n;
            }
        }
        Err(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))
    }

    /// DESTROY_GENERAL_OBJECT of a RESERVED_QPN: the block of `uid` that starts at `id`.
    pub(super) fn destroy_reserved_qpn(&mut self, uid: u16, id: u32) -> Result<(), Reject> {
        match self.reserved.blocks.get(&id) {
            Some((u, _)) if *u == uid => {
                self.reserved.blocks.remove(&id);
                Ok(())
            }
            _ => Err(bad(syndrome::NO_SUCH_OBJECT)),
        }
    }

    /// The first QP number from `next_qpn` on (starting over at the bottom) that no QP and no
    /// reserved block has; `None` when every number is taken.
    pub(super) fn free_qpn(&self) -> Option<u32> {
        let mut qpn = self.next_qpn.clamp(FIRST_QPN, LAST_QPN);
        for _ in FIRST_QPN..=LAST_QPN {
            if !self.qps.contains_key(qpn) && !self.reserved.holds(qpn) {
                return Some(qpn);
            }
            qpn = if qpn >= LAST_QPN { FIRST_QPN } else { qpn + 1 };
        }
        None
    }

    /// Number of live RESERVED_QPN blocks.
    pub fn reserved_qpn_blocks(&self) -> usize {
        self.reserved.len()
    }
}

#[cfg(test)]
mod tests {
    use mlx5_dv::prm::{obj_type, opcode};

    use super::super::tests::{exec, fw, qp};
    use super::*;
    use crate::profile::ShippedProfiles;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn create(f: &mut Firmware, uid: u16, log: u8) -> Result<(u8, u32), Box<dyn std::error::Error>> {
        let mut input = prm::new_input(32, opcode::CREATE_GENERAL_OBJECT, 0, obj_type::RESERVED_QPN);
        prm::mbox_in::UID.set(&mut input, u64::from(uid))?;
        prm::general_obj_in::LOG_OBJ_RANGE.set(&mut input, u64::from(log))?;
        let (s, _, out) = exec(f, &input, 16);
        Ok((s, prm::general_obj_out::OBJ_ID.get(&out)? as u32))
    }

    fn destroy(f: &mut Firmware, uid: u16, id: u32) -> Result<u8, Box<dyn std::error::Error>> {
        let mut input = prm::new_input(16, opcode::DESTROY_GENERAL_OBJECT, 0, obj_type::RESERVED_QPN);
        prm::mbox_in::UID.set(&mut input, u64::from(uid))?;
        prm::general_obj_in::OBJ_ID.set(&mut input, u64::from(id))?;
        Ok(exec(f, &input, 16).0)
    }

    #[test]
    fn blocks_are_aligned_skipped_by_qps_and_owned_by_their_uid() -> TestResult {
        let mut f = fw()?;
        assert_eq!(f.create_qp(qp()), Some(0x100));
        let (s, first) = create(&mut f, 3, 8)?;
        assert_eq!((s, first), (status::OK, 0x200), "the next aligned block past QP 0x100");
        assert_eq!(f.create_qp(qp()), Some(0x300), "QP numbering moved past the block");
        f.next_qpn = 0x2ff;
        assert_eq!(f.create_qp(qp()), Some(0x301), "no QP takes a reserved number");
        assert_eq!(create(&mut f, 3, 9)?.0, status::BAD_PARAM_ERR, "a range past the granularity");
        assert_eq!(destroy(&mut f, 4, first)?, status::BAD_PARAM_ERR, "another uid's block");
        assert_eq!(f.general_objects_of_uid(3), [(obj_type::RESERVED_QPN, first)]);
        assert_eq!(destroy(&mut f, 3, first)?, status::OK);
        assert_eq!(destroy(&mut f, 3, first)?, status::BAD_PARAM_ERR, "destroyed already");
        f.next_qpn = 0x200;
        assert_eq!(f.create_qp(qp()), Some(0x200), "the numbers are free again");
        Ok(())
    }

    #[test]
    fn a_device_without_the_object_type_refuses_it() -> TestResult {
        let mut f = Firmware::new(&Profile::builtin("cx5")?)?;
        assert_eq!(create(&mut f, 3, 8)?.0, status::BAD_PARAM_ERR);
        Ok(())
    }
}
