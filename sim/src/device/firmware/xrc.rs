//! XRC domains: ALLOC_XRCD and DEALLOC_XRCD, and the numbers the XRC objects name. An XRC SRQ
//! (CREATE_SRQ with `srqc.xrcd`) and an XRC target QP (CREATE_QP of service type XRC with
//! `qpc.xrcd`) belong to the domain they name; a target QP takes a request into the SRQ its
//! XRCETH names only when that SRQ is of its domain.

use std::collections::BTreeSet;

use mlx5_dv::prm::{self, status};

use super::{Firmware, Reject, syndrome};

/// `MLX5_CMD_OP_ALLOC_XRCD`.
pub const ALLOC_XRCD: u16 = 0x80e;
/// `MLX5_CMD_OP_DEALLOC_XRCD`.
pub const DEALLOC_XRCD: u16 = 0x80f;
/// `alloc_xrcd_out.xrcd` and `dealloc_xrcd_in.xrcd` (where a PD's number is).
const XRCD: prm::Field = prm::Field::new("xrcd", 0x48, 24);

/// The XRC domains of a device.
#[derive(Debug, Clone, Default)]
pub(super) struct XrcdTable {
    live: BTreeSet<u32>,
    next: u32,
}

impl Firmware {
    /// ALLOC_XRCD: the next free domain number (from 1; 24 bits).
    pub(super) fn alloc_xrcd(&mut self, out: &mut [u8]) -> Result<(), Reject> {
        let t = &mut self.xrcds;
        if t.live.len() >= 0xff_fffe {
            return Err(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS));
        }
        let mut n = t.next.clamp(1, 0xff_ffff);
        while t.live.contains(&n) {
            n = if n >= 0xff_ffff { 1 } else { n + 1 };
        }
        t.next = n + 1;
        t.live.insert(n);
        XRCD.set(out, u64::from(n))?;
        Ok(())
    }

    /// DEALLOC_XRCD.
    pub(super) fn dealloc_xrcd(&mut self, input: &[u8]) -> Result<(), Reject> {
        let n = XRCD.get(input)? as u32;
        if self.xrcds.live.remove(&n) { Ok(()) } else { Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT)) }
    }

    /// Whether domain `n` is allocated.
    pub(in crate::device) fn has_xrcd(&self, n: u32) -> bool {
        self.xrcds.live.contains(&n)
    }
}

/// The number a kernel command names its domain by.
pub fn xrcd_field() -> prm::Field {
    XRCD
}
