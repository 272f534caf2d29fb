//! The device's side of a tag-matching SRQ: its matching list of tagged buffers, the list
//! operations the SRQ's command QP carries (APPEND, REMOVE, NOP of `mlx5_wqe_tm_seg`), and
//! the phase counts that keep the device from matching while software has unexpected
//! messages it has not yet reported handled.
//!
//! APPEND fills the slot the device holds as the next free one and takes, from the operation,
//! the index of the slot after it: libmlx5 keeps the free list and tells the device its order.
//! An incoming tagged message matches the oldest entry whose tag equals the message's on the
//! entry's mask bits; while the device's count of unexpected messages differs from the count
//! software last reported (`sw_cnt`), nothing matches and every tagged message is unexpected
//! (the documented rule is "matching is disabled until SW and HW synchronize"; that no
//! entry matches in between, rather than only entries appended since, is unverified).

use mlx5_dv::Sge;

use crate::device::Device;
use crate::device::contract::Cqe;
use crate::device::contract::tm::{TmCqe, app_op};
use crate::host::Host;

/// `MLX5_TM_OPCODE_*` of a list operation.
pub mod list_opcode {
    /// `MLX5_TM_OPCODE_NOP`: only the count.
    pub const NOP: u8 = 0x00;
    /// `MLX5_TM_OPCODE_APPEND`.
    pub const APPEND: u8 = 0x01;
    /// `MLX5_TM_OPCODE_REMOVE`.
    pub const REMOVE: u8 = 0x02;
}

/// One list operation as the command QP's WQE carries it (`mlx5_wqe_tm_seg` and the tagged
/// buffer's data segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmListOp {
    /// [`list_opcode`].
    pub opcode: u8,
    /// `MLX5_SRQ_FLAG_TM_CQE_REQ`: a CQE when done.
    pub signaled: bool,
    /// `MLX5_SRQ_FLAG_TM_SW_CNT`: software's count of unexpected messages it handled.
    pub sw_cnt: Option<u16>,
    /// APPEND: the slot after the one filled; REMOVE: the slot to empty.
    pub index: u16,
    /// APPEND: the tag.
    pub tag: u64,
    /// APPEND: the mask.
    pub mask: u64,
    /// APPEND: the buffer (none for an empty one).
    pub sge: Option<Sge>,
}

/// A tagged buffer in the device's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmEntry {
    /// Its slot (`app_info` of its completions).
    pub index: u16,
    /// The tag.
    pub tag: u64,
    /// The mask.
    pub mask: u64,
    /// The buffer.
    pub sge: Option<Sge>,
}

/// A tag-matching SRQ's list.
#[derive(Debug, Clone, Default)]
pub struct TmList {
    /// Slots: `1 << log_size` of them.
    slots: Vec<Option<TmEntry>>,
    /// Filled slots, oldest first.
    order: Vec<u16>,
    /// The slot the next APPEND fills.
    next: u16,
    /// Unexpected messages the device reported (`hw_phase_cnt`).
    hw_cnt: u16,
    /// What software last said it handled.
    sw_cnt: u16,
    /// The command QP's number, which list completions name.
    pub(in crate::device) cmd_qpn: u32,
}

impl TmList {
    /// A list of `1 << log_size` slots.
    pub fn new(log_size: u8, cmd_qpn: u32) -> Self {
        TmList { slots: vec![None; 1usize << log_size.min(16)], cmd_qpn, ..TmList::default() }
    }

    /// Carry out `op`: whether it took effect.
    pub fn apply(&mut self, op: &TmListOp) -> bool {
        if let Some(c) = op.sw_cnt {
            self.sw_cnt = c;
        }
        match op.opcode {
            list_opcode::APPEND => {
                let at = self.next;
                let Some(slot) = self.slots.get_mut(usize::from(at)) else { return false };
                *slot = Some(TmEntry { index: at, tag: op.tag, mask: op.mask, sge: op.sge });
                self.order.push(at);
                self.next = op.index;
                true
            }
            list_opcode::REMOVE => match self.slots.get_mut(usize::from(op.index)) {
                Some(s @ Some(_)) => {
                    *s = None;
                    self.order.retain(|i| *i != op.index);
                    true
                }
                _ => false,
            },
            list_opcode::NOP => true,
            _ => false,
        }
    }

    /// The oldest entry a message tagged `tag` matches, taken off the list; none while the
    /// counts differ.
    pub fn take_match(&mut self, tag: u64) -> Option<TmEntry> {
        if self.hw_cnt != self.sw_cnt {
            return None;
        }
        let slots = &self.slots;
        let pos = self
            .order
            .iter()
            .position(|i| slots.get(usize::from(*i)).copied().flatten().is_some_and(|e| (e.tag ^ tag) & e.mask == 0))?;
        let at = self.order.remove(pos);
        self.slots.get_mut(usize::from(at)).and_then(Option::take)
    }

    /// A message the device deemed unexpected.
    pub fn count_unexpected(&mut self) {
        self.hw_cnt = self.hw_cnt.wrapping_add(1);
    }

    /// `hw_phase_cnt`.
    pub fn phase(&self) -> u16 {
        self.hw_cnt
    }
}

impl Device {
    /// `log_tag_matching_list_sz`, if the device has tag matching (`tag_matching`).
    pub fn tm_log_list_size(&self) -> Option<u8> {
        self.fw.tm_log_list_size()
    }

    /// Make SRQ `srqn` a tag-matching one with a list of `1 << log_size` slots, whose list
    /// operations complete on its CQ naming `cmd_qpn`.
    pub fn enable_tag_matching(&mut self, srqn: u32, log_size: u8, cmd_qpn: u32) {
        if let Some(s) = self.fw.srq_mut(srqn) {
            s.tm = Some(TmList::new(log_size, cmd_qpn));
        }
    }

    /// A list operation posted on SRQ `srqn`'s command QP: carried out, and completed on the
    /// SRQ's CQ if it asked. Nothing for an SRQ without a list.
    pub fn tm_list_op(&mut self, host: &mut Host, srqn: u32, op: &TmListOp) {
        let Some(s) = self.fw.srq_mut(srqn) else { return };
        let cqn = s.cqn;
        let Some(list) = s.tm.as_mut() else { return };
        let success = list.apply(op);
        if !op.signaled {
            return;
        }
        let app_op = match op.opcode {
            list_opcode::APPEND => app_op::APPEND,
            list_opcode::REMOVE => app_op::REMOVE,
            _ => app_op::NOOP,
        };
        let cqe = TmCqe::List { qpn: list.cmd_qpn, srqn, app_op, success, phase: list.phase() };
        self.write_tm_cqe(host, cqn, &Cqe::Tm(cqe));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(tag: u64, next: u16) -> TmListOp {
        TmListOp {
            opcode: list_opcode::APPEND,
            signaled: true,
            sw_cnt: None,
            index: next,
            tag,
            mask: 0xffff,
            sge: None,
        }
    }

    #[test]
    fn the_oldest_matching_entry_is_taken() {
        let mut l = TmList::new(3, 0);
        assert!(l.apply(&append(5, 1)));
        assert!(l.apply(&append(5, 2)));
        assert_eq!(l.take_match(0x1_0005).map(|e| e.index), Some(0));
        assert_eq!(l.take_match(5).map(|e| e.index), Some(1));
        assert_eq!(l.take_match(5), None);
    }

    #[test]
    fn nothing_matches_until_software_reports_the_unexpected_ones() {
        let mut l = TmList::new(3, 0);
        l.apply(&append(1, 1));
        l.count_unexpected();
        assert_eq!(l.take_match(1), None);
        l.apply(&TmListOp { opcode: list_opcode::NOP, sw_cnt: Some(1), ..append(0, 0) });
        assert_eq!(l.take_match(1).map(|e| e.index), Some(0));
    }

    #[test]
    fn removing_an_empty_slot_fails() {
        let mut l = TmList::new(2, 0);
        let rm = TmListOp { opcode: list_opcode::REMOVE, index: 0, ..append(0, 0) };
        assert!(!l.apply(&rm));
        l.apply(&append(3, 1));
        assert!(l.apply(&rm));
        assert!(!l.apply(&rm));
    }
}
