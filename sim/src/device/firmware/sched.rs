//! Scheduling elements (general object type 0x26) of the NIC hierarchy: TSARs (inner nodes,
//! DWRR) and queue groups (leaves QPs join), with their bandwidth share and maximum average
//! bandwidth. The simulator keeps the tree and the QPs' group ids; it shapes no traffic.
//!
//! The firmware's own rules (not public; the simulator's, unverified): ids count from 1; an
//! element type or TSAR type the QoS page does not offer, a hierarchy other than the NIC's, a
//! parent that is not a TSAR (0, the root, is one for a TSAR only), or a field the page's
//! `nic_bw_share` / `nic_rate_limit` do not offer is BAD_PARAM; a modify names the element's
//! type and sets only the fields `modify_field_select` selects; an element goes whatever
//! hangs below it (its children keep their parent's number).

use std::collections::BTreeMap;

use mlx5_dv::prm::qos_cap::{self as qc, sched as s};
use mlx5_dv::prm::{self, status};

use super::{Firmware, Reject, syndrome};

/// One element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Elem {
    uid: u16,
    queue_group: bool,
    parent: u32,
    bw_share: u32,
    max_average_bw: u32,
}

/// The scheduling elements of a device, by id.
#[derive(Debug, Clone, Default)]
pub(super) struct SchedElems {
    elems: BTreeMap<u32, Elem>,
}

fn bad() -> Reject {
    Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD)
}

fn no_such() -> Reject {
    Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT)
}

impl SchedElems {
    /// The lowest id no element holds.
    fn free_id(&self) -> Option<u32> {
        let mut n = 1u32;
        for &k in self.elems.keys() {
            if k != n {
                break;
            }
            n = n.checked_add(1)?;
        }
        Some(n)
    }

    /// Whether `id` is 0 (none) or a queue group: what a QP's group id may name.
    pub(super) fn is_queue_group_or_none(&self, id: u32) -> bool {
        id == 0 || self.elems.get(&id).is_some_and(|e| e.queue_group)
    }

    /// The ids of the elements made under `uid`, children before parents (newest first).
    pub(super) fn of_uid(&self, uid: u16) -> impl Iterator<Item = u32> + '_ {
        self.elems.iter().rev().filter(move |(_, e)| e.uid == uid).map(|(k, _)| *k)
    }
}

impl Firmware {
    /// What the QoS page offers: (element type bits, TSAR type bits, bw_share, rate limit).
    fn sched_caps(&self) -> (u64, u64, bool, bool) {
        let p = &self.qos.page[..];
        let get = |f: prm::Field| f.get(p).unwrap_or(0);
        (get(qc::NIC_ELEMENT_TYPE), get(qc::NIC_TSAR_TYPE), get(qc::NIC_BW_SHARE) != 0, get(qc::NIC_RATE_LIMIT) != 0)
    }

    /// The element type, checked against the page; the fields `select` sets, checked too.
    fn sched_fields(&self, input: &[u8]) -> Result<(bool, u64, u32, u32), Reject> {
        if input.len() < s::SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        let (types, tsars, bw_share, rate_limit) = self.sched_caps();
        if s::SCHEDULING_HIERARCHY.get(input)? != s::HIERARCHY_NIC {
            return Err(bad());
        }
        let queue_group = match s::ELEMENT_TYPE.get(input)? {
            s::ELEMENT_TSAR if types & s::ELEMENT_TSAR_CAP != 0 => {
                let dwrr = s::TSAR_TYPE.get(input)? == s::TSAR_DWRR && tsars & s::TSAR_DWRR_CAP != 0;
                if !dwrr {
                    return Err(bad());
                }
                false
            }
            s::ELEMENT_QUEUE_GROUP if types & s::ELEMENT_QUEUE_GROUP_CAP != 0 => true,
            _ => return Err(bad()),
        };
        let select = s::MODIFY_FIELD_SELECT.get(input)?;
        if select & !(s::SELECT_BW_SHARE | s::SELECT_MAX_AVERAGE_BW) != 0
            || (select & s::SELECT_BW_SHARE != 0 && !bw_share)
            || (select & s::SELECT_MAX_AVERAGE_BW != 0 && !rate_limit)
        {
            return Err(bad());
        }
        Ok((queue_group, select, s::BW_SHARE.get(input)? as u32, s::MAX_AVERAGE_BW.get(input)? as u32))
    }

    /// CREATE_GENERAL_OBJECT of a scheduling element: its id.
    pub(super) fn create_sched_elem(&mut self, uid: u16, input: &[u8]) -> Result<u32, Reject> {
        let (queue_group, select, bw, max) = self.sched_fields(input)?;
        let parent = s::PARENT_ELEMENT_ID.get(input)? as u32;
        let parent_ok = match self.sched.elems.get(&parent) {
            Some(p) => !p.queue_group,
            None => parent == 0 && !queue_group,
        };
        if !parent_ok {
            return Err(bad());
        }
        let id = self.sched.free_id().ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        let e = Elem {
            uid,
            queue_group,
            parent,
            bw_share: if select & s::SELECT_BW_SHARE != 0 { bw } else { 0 },
            max_average_bw: if select & s::SELECT_MAX_AVERAGE_BW != 0 { max } else { 0 },
        };
        self.sched.elems.insert(id, e);
        Ok(id)
    }

    /// MODIFY_GENERAL_OBJECT of a scheduling element: the selected fields.
    pub(super) fn modify_sched_elem(&mut self, uid: u16, id: u32, input: &[u8]) -> Result<(), Reject> {
        let (queue_group, select, bw, max) = self.sched_fields(input)?;
        let e = self.sched.elems.get_mut(&id).filter(|e| e.uid == uid).ok_or_else(no_such)?;
        if e.queue_group != queue_group {
            return Err(bad());
        }
        if select & s::SELECT_BW_SHARE != 0 {
            e.bw_share = bw;
        }
        if select & s::SELECT_MAX_AVERAGE_BW != 0 {
            e.max_average_bw = max;
        }
        Ok(())
    }

    /// QUERY_GENERAL_OBJECT of a scheduling element: its `sched_elem` after the header.
    pub(super) fn query_sched_elem(&self, uid: u16, id: u32, out: &mut [u8]) -> Result<(), Reject> {
        let e = self.sched.elems.get(&id).filter(|e| e.uid == uid).ok_or_else(no_such)?;
        if out.len() < s::SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        s::SCHEDULING_HIERARCHY.set(out, s::HIERARCHY_NIC)?;
        let ty = if e.queue_group { s::ELEMENT_QUEUE_GROUP } else { s::ELEMENT_TSAR };
        s::ELEMENT_TYPE.set(out, ty)?;
        s::PARENT_ELEMENT_ID.set(out, u64::from(e.parent))?;
        s::BW_SHARE.set(out, u64::from(e.bw_share))?;
        s::MAX_AVERAGE_BW.set(out, u64::from(e.max_average_bw))?;
        Ok(())
    }

    /// DESTROY_GENERAL_OBJECT of a scheduling element.
    pub(super) fn destroy_sched_elem(&mut self, uid: u16, id: u32) -> Result<(), Reject> {
        match self.sched.elems.get(&id) {
            Some(e) if e.uid == uid => {
                self.sched.elems.remove(&id);
                Ok(())
            }
            _ => Err(no_such()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_lowest_free_and_cleanup_takes_children_first() {
        let mut t = SchedElems::default();
        assert_eq!(t.free_id(), Some(1));
        let e = Elem { uid: 5, queue_group: false, parent: 0, bw_share: 0, max_average_bw: 0 };
        t.elems.extend([(1, e), (2, Elem { parent: 1, queue_group: true, ..e }), (4, e)]);
        assert_eq!(t.free_id(), Some(3));
        assert_eq!(t.of_uid(5).collect::<Vec<_>>(), [4, 2, 1]);
        assert!(t.is_queue_group_or_none(0) && t.is_queue_group_or_none(2));
        assert!(!t.is_queue_group_or_none(1) && !t.is_queue_group_or_none(3));
    }
}
