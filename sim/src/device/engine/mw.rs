//! Memory window binds as the device runs them: the window's mkey must take UMRs (and, for
//! type 2, be free); the region named by the bind's KLM must be a valid key of the window's
//! PD that holds the whole range, with local write behind remote write or atomic rights.
//! Any failure is a MW_BIND_ERR completion. An empty bind frees the window (type 1's unbind).

use mlx5_dv::AccessFlags;
use mlx5_dv::prm::{Field, mkc};

use super::translate::field;
use super::{Engine, Step, syndrome};
use crate::device::Device;
use crate::device::contract::{BindMwWqe, MwRange, NO_QPN, Wqe};
use crate::device::translation::{Klm, Translation};
use crate::fabric::QpPath;

/// MW_BIND_ERR.
const MW_BIND: u8 = 0x06;

impl Engine<'_> {
    /// Apply a bind `b` posted on `qp` to its window.
    pub(super) fn exec_bind_mw(&mut self, qp: QpPath, w: &Wqe, b: &BindMwWqe) -> Step {
        let qp_pdn = self.qp(qp).map(|q| q.pdn);
        let Some(d) = self.dev(qp.dev) else { return Step::Failed(syndrome::LOCAL_PROT) };
        let Some(win) = d.fw.mkey(b.key >> 8) else { return Step::Failed(MW_BIND) };
        let pdn = field(win, mkc::PD);
        if field(win, mkc::UMR_EN) == 0 || (b.type2 && b.range.is_some() && field(win, mkc::FREE) == 0) {
            return Step::Failed(MW_BIND);
        }
        if b.type2 && qp_pdn.map(u64::from) != Some(pdn) {
            return Step::Failed(MW_BIND);
        }
        if let Some(r) = &b.range
            && !region_allows(d, pdn, r)
        {
            return Step::Failed(MW_BIND);
        }
        let Some(win) = d.fw.mkey_mut(b.key >> 8) else { return Step::Failed(MW_BIND) };
        let set = |m: &mut [u8; mkc::SIZE], f: Field, v: u64| {
            let _ = f.set(m, v);
        };
        set(&mut win.mkc, mkc::MKEY_7_0, u64::from(b.tag));
        match &b.range {
            None => set(&mut win.mkc, mkc::FREE, 1),
            Some(r) => {
                let bit = |f: AccessFlags| u64::from(r.access & f.bits() != 0);
                set(&mut win.mkc, mkc::FREE, 0);
                set(&mut win.mkc, mkc::QPN, if b.type2 { u64::from(qp.qpn) } else { u64::from(NO_QPN) });
                set(&mut win.mkc, mkc::LW, bit(AccessFlags::LOCAL_WRITE));
                set(&mut win.mkc, mkc::RW, bit(AccessFlags::REMOTE_WRITE));
                set(&mut win.mkc, mkc::RR, bit(AccessFlags::REMOTE_READ));
                set(&mut win.mkc, mkc::A, bit(AccessFlags::REMOTE_ATOMIC));
                set(&mut win.mkc, mkc::START_ADDR, r.start_addr);
                set(&mut win.mkc, mkc::LEN, r.len);
                win.xlat = Translation::Klm(vec![r.klm]);
            }
        }
        Step::Done(Device::success(qp.qpn, w, 0))
    }
}

/// The region a bind names: a valid key (tag included) of the window's PD, not a window
/// itself, covering the whole range, and with local write when the window grants remote
/// write or atomics. `IBV_ACCESS_MW_BIND` has no bit in the mkey context: it is not checked.
fn region_allows(d: &Device, pdn: u64, r: &MwRange) -> bool {
    let Klm { byte_count, key, addr } = r.klm;
    let Some(m) = d.fw.mkey(key >> 8) else { return false };
    let valid = field(m, mkc::FREE) == 0
        && field(m, mkc::MKEY_7_0) == u64::from(key & 0xff)
        && field(m, mkc::PD) == pdn
        && matches!(m.xlat, Translation::Mtt);
    let (start, len) = (field(m, mkc::START_ADDR), field(m, mkc::LEN));
    let inside = addr >= start
        && addr.checked_add(u64::from(byte_count)).zip(start.checked_add(len)).is_some_and(|(e, me)| e <= me);
    let writes = AccessFlags::REMOTE_WRITE.bits() | AccessFlags::REMOTE_ATOMIC.bits();
    let rights = r.access & writes == 0 || field(m, mkc::LW) != 0;
    valid && inside && rights
}
