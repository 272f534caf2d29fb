//! `ibv_rereg_mr` of an ODP MR, as the current kernel's `mlx5_ib_rereg_user_mr` takes it
//! after uverbs' checks and `ib_umem_check_rereg` (the caller's, for every MR): an implicit MR without a new
//! translation is made anew over the whole address space (EOPNOTSUPP if the new rights drop
//! ON_DEMAND); a change of PD or of the rights a UMR may change (local and remote write,
//! remote read, remote atomic, relaxed ordering) is done in place and keeps the keys; other
//! rights changes are EOPNOTSUPP; a new translation is a new MR (ODP or pinned, as the new
//! rights say) with new keys, the old one destroyed once it exists.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{AccessFlags, Error, Mr, MrHandle, Op, PdHandle, ReregFlags, Result};

use super::odp::{is_implicit, odp_checks, writable};
use super::{Lower, MrObj, Provider};
use crate::kernel;

/// The rights `can_use_umr_rereg_access` lets a UMR change. The profiles' devices set
/// neither `umr_modify_atomic_disabled` nor the relaxed ordering caps, so
/// `mlx5r_umr_can_reconfig` allows each of them.
const UMR_ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::RELAXED_ORDERING);

impl Provider {
    /// The driver's half of `ibv_rereg_mr` for the ODP MR `m` (or a pinned one whose new
    /// translation is ODP), after the libibverbs and uverbs checks: `pd`/`pdn` and `access`
    /// are the MR's own where `flags` do not change them, `range` the new translation's.
    pub(super) fn rereg_odp_mr(
        &mut self,
        low: &mut Lower<'_>,
        (handle, m): (MrHandle, &MrObj),
        flags: ReregFlags,
        (pd, pdn): (PdHandle, u32),
        range: (u64, u64),
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::ReregMr;
        let mut translate = flags.contains(ReregFlags::CHANGE_TRANSLATION);
        let mut range = range;
        if m.buf.is_none() && is_implicit(m.addr, m.length) && !translate {
            if !access.contains(AccessFlags::ON_DEMAND) {
                return Err(Error::new(op, EOPNOTSUPP, "an implicit ODP MR keeps IBV_ACCESS_ON_DEMAND"));
            }
            // Its child mkeys cannot change in place: a new implicit MR.
            (translate, range) = (true, (0, u64::MAX));
        }
        if !translate {
            let diffs = AccessFlags::from_bits_retain(m.access.bits() ^ access.bits());
            if !UMR_ACCESS.contains(diffs) {
                return Err(Error::new(op, EOPNOTSUPP, format!("rights {diffs:?} of an ODP MR change by no UMR")));
            }
            return self.rereg_in_place(low, (handle, m), (pd, pdn), access);
        }
        self.recreate_mr(low, (handle, m), (pd, pdn), range, access)
    }

    /// `mlx5r_umr_rereg_pd_access`: the mkey takes the new PD and rights; range and keys stay.
    fn rereg_in_place(
        &mut self,
        low: &mut Lower<'_>,
        (handle, m): (MrHandle, &MrObj),
        (pd, pdn): (PdHandle, u32),
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::ReregMr;
        let variant = (m.key & 0xff) as u8;
        let d = low.devices.get_mut(m.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let index = low.kernel.rereg_mr(d, (m.index, variant), pdn, (m.addr, m.length), access, op)?;
        self.pds.acquire(pd, op)?;
        self.pds.release(m.pd);
        let key = index << 8 | u32::from(variant);
        *self.mrs.get_mut(handle, op)? = MrObj { pd, index, key, access, ..m.clone() };
        Ok(Mr { handle, lkey: key, rkey: key, addr: m.addr, length: m.length })
    }

    /// `mlx5_ib_reg_user_mr` of the new translation (an ODP MR with ON_DEMAND, else a pinned
    /// one), which takes the old MR's place under the same handle (uverbs swaps the objects
    /// and destroys the old one): new keys. On an error the old MR is as it was.
    fn recreate_mr(
        &mut self,
        low: &mut Lower<'_>,
        (handle, m): (MrHandle, &MrObj),
        (pd, pdn): (PdHandle, u32),
        range: (u64, u64),
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::ReregMr;
        let odp = access.contains(AccessFlags::ON_DEMAND);
        let (index, variant, buf) = if odp {
            let d = low.devices.get_mut(m.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
            odp_checks(d, op, range)?;
            let (index, variant) = low.kernel.reg_mr(d, m.dev, pdn, range, access)?;
            (index, variant, None)
        } else {
            let (index, variant, buf) = self.new_mtt(low, op, m.dev, pdn, range, access)?;
            (index, variant, Some(buf))
        };
        let d = low.devices.get_mut(m.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        if let Err(e) = kernel::destroy_mkey(d, m.index, op) {
            let _ = kernel::destroy_mkey(d, index, op);
            return Err(e);
        }
        if let Some(b) = buf {
            self.bufs.acquire(b, op)?;
        }
        self.pds.acquire(pd, op)?;
        self.release_mr_memory(low, m);
        self.pds.release(m.pd);
        if odp && low.host.in_process() {
            low.host.lend(range.0, range.1);
        }
        let key = index << 8 | u32::from(variant);
        let (addr, length) = range;
        let obj = MrObj { pd, index, key, buf, addr, length, access, writable: writable(access), ..m.clone() };
        *self.mrs.get_mut(handle, op)? = obj;
        Ok(Mr { handle, lkey: key, rkey: key, addr, length })
    }
}
