//! On-demand paging: `ibv_reg_mr` with `IBV_ACCESS_ON_DEMAND` (explicit and implicit ODP MRs)
//! and `ibv_advise_mr`, with the kernel's checks (`create_user_odp_mr`, `ib_umem_odp_get`,
//! `ib_uverbs_advise_mr`, `mlx5_ib_advise_mr_prefetch`).
//!
//! An ODP MR pins nothing: its mkey maps virtual addresses one to one, and the memory behind
//! them is looked up when the device touches it. In process (the C ABI) the range is lent to
//! the host ([`crate::host::Host::lend`]), whose accesses fault pages in and fail, as unmapped
//! memory, where the process has no readable (or writable) mapping; on the simulator's own
//! numbered addresses an ODP MR reaches whatever buffers are mapped at access time.

use mlx5_dv::errno::{EFAULT, EINVAL, ENOENT, EOPNOTSUPP, EOVERFLOW};
use mlx5_dv::{AccessFlags, Error, Mr, Op, PdHandle, Result, Sge, advise};

use super::{Lower, MrObj, Provider};
use crate::host::PAGE;

/// An implicit ODP MR: `ibv_reg_mr(pd, NULL, SIZE_MAX, …)` reaches the kernel as start 0 and
/// length `U64_MAX`.
pub(super) fn is_implicit(addr: u64, length: u64) -> bool {
    addr == 0 && length == u64::MAX
}

/// `ib_access_writable`: the rights that make an ODP umem writable (and allow
/// `PREFETCH_WRITE`).
pub(super) fn writable(access: AccessFlags) -> bool {
    access.intersects(
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC | AccessFlags::MW_BIND,
    )
}

/// The end of an explicit ODP umem: the MR's end rounded up to a page (`ib_umem_end`).
fn umem_end(addr: u64, length: u64) -> Option<u64> {
    addr.checked_add(length)?.checked_add(PAGE - 1).map(|e| e & !(PAGE - 1))
}

/// `create_user_odp_mr`'s and `ib_umem_odp_get`'s checks of a new ODP MR's range on device
/// `d`: EOPNOTSUPP without ODP; an implicit MR needs `IBV_ODP_SUPPORT_IMPLICIT` (EINVAL); an
/// explicit one a range whose end, rounded up to a page, does not wrap (EOVERFLOW) and at
/// least one byte (EINVAL).
pub(super) fn odp_checks(d: &crate::device::Device, op: Op, (addr, length): (u64, u64)) -> Result<()> {
    let caps = d.odp_caps();
    if !caps.supported() {
        return Err(Error::new(op, EOPNOTSUPP, "the device has no ODP (odp_caps.general_caps is 0)"));
    }
    if is_implicit(addr, length) {
        if !caps.implicit() {
            return Err(Error::new(op, EINVAL, "implicit ODP needs IBV_ODP_SUPPORT_IMPLICIT"));
        }
        return Ok(());
    }
    if umem_end(addr, length).is_none_or(|end| end < PAGE) {
        return Err(Error::new(op, EOVERFLOW, format!("[0x{addr:x}, +{length}) wraps the address space")));
    }
    if length == 0 {
        return Err(Error::new(op, EINVAL, "an ODP MR of 0 bytes covers no page"));
    }
    Ok(())
}

impl Provider {
    /// The ODP half of `ibv_reg_mr`, after `ib_check_mr_access`'s EINVAL checks:
    /// `IBK_ON_DEMAND_PAGING` missing is EOPNOTSUPP; an implicit MR needs `iova` 0 and
    /// `IBV_ODP_SUPPORT_IMPLICIT` (EINVAL); an explicit one a range whose end, rounded up to
    /// a page, does not wrap (EOVERFLOW) and at least one page (EINVAL). The pages need not be
    /// mapped.
    #[allow(clippy::too_many_arguments)] // the MR's context, PD, device, range and rights
    pub(super) fn reg_odp_mr(
        &mut self,
        low: &mut Lower<'_>,
        (ctx, pd): (mlx5_dv::ContextHandle, PdHandle),
        (dev, pdn): (usize, u32),
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::RegMr;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        odp_checks(d, op, (addr, length))?;
        let (index, variant) = low.kernel.reg_mr(d, dev, pdn, (addr, length), access)?;
        let key = index << 8 | u32::from(variant);
        let writable = writable(access);
        let obj = MrObj { ctx, pd, dev, index, key, buf: None, dmabuf: None, addr, length, access, writable };
        let handle = self.mrs.insert(op, obj)?;
        self.pds.acquire(pd, op)?;
        if low.host.in_process() {
            low.host.lend(addr, length);
        }
        Ok(Mr { handle, lkey: key, rkey: key, addr, length })
    }

    /// What an MR held of host memory, given back with the MR: the buffer it pins, or the
    /// range an ODP MR lent.
    pub(super) fn release_mr_memory(&mut self, low: &mut Lower<'_>, m: &MrObj) {
        match m.buf {
            Some(b) => self.bufs.release(b),
            None if m.access.contains(AccessFlags::ON_DEMAND) && low.host.in_process() => {
                low.host.unlend(m.addr, m.length);
            }
            None => {}
        }
    }

    /// `ibv_advise_mr`: the uverbs checks (an empty SGE list is EINVAL; a device without ODP
    /// has no `advise_mr`, EOPNOTSUPP; an unknown flag is EINVAL), the driver's (an unknown
    /// advice is EOPNOTSUPP), then each SGE's MR: an ODP MR of this PD with that exact lkey,
    /// writable for `PREFETCH_WRITE`. With `IBV_ADVISE_MR_FLAG_FLUSH` the pages are faulted
    /// in before the call returns: a bad lkey is ENOENT and a range outside the MR, or pages
    /// that cannot be faulted in, EFAULT (`PREFETCH_NO_FAULT` faults nothing, so never the
    /// latter). Without it the MRs are checked (EINVAL) and the prefetch is left to the
    /// device, whose faults nobody sees.
    pub(crate) fn advise_mr(
        &mut self,
        low: &mut Lower<'_>,
        pd: PdHandle,
        advice: u32,
        flags: u32,
        sges: &[Sge],
    ) -> Result<()> {
        let op = Op::AdviseMr;
        let p = self.pds.get(pd, op)?;
        let ctx = p.ctx;
        let (dev, kind) = self
            .contexts
            .get(ctx, op)
            .map(|c| (c.dev, c.kind))
            .map_err(|_| Error::new(op, EINVAL, "context closed"))?;
        if kind == super::CtxKind::Vfio {
            return Err(Error::new(op, EOPNOTSUPP, "the VFIO provider has no advise_mr"));
        }
        if sges.is_empty() {
            return Err(Error::new(op, EINVAL, "the SGE list is empty"));
        }
        let caps = low.devices.get(dev).map(|d| d.odp_caps()).unwrap_or_default();
        if !caps.supported() {
            return Err(Error::new(op, EOPNOTSUPP, "a device without ODP has no advise_mr"));
        }
        if flags & !advise::FLAG_FLUSH != 0 {
            return Err(Error::new(op, EINVAL, format!("unknown advise_mr flags 0x{flags:x}")));
        }
        if !matches!(advice, advise::PREFETCH | advise::PREFETCH_WRITE | advise::PREFETCH_NO_FAULT) {
            return Err(Error::new(op, EOPNOTSUPP, format!("unknown advice {advice}")));
        }
        let flush = flags & advise::FLAG_FLUSH != 0;
        for s in sges {
            let Some(m) = self.prefetchable(pd, advice, s.lkey) else {
                let errno = if flush { ENOENT } else { EINVAL };
                return Err(Error::new(op, errno, format!("lkey 0x{:x} is no prefetchable ODP MR of the PD", s.lkey)));
            };
            if !flush {
                continue;
            }
            let len = u64::from(s.length);
            let inside = if is_implicit(m.addr, m.length) {
                s.addr.checked_add(len).is_some()
            } else {
                s.addr >= m.addr && umem_end(m.addr, m.length).is_some_and(|e| e - s.addr.min(e) >= len && s.addr < e)
            };
            if !inside {
                return Err(Error::new(op, EFAULT, format!("[0x{:x}, +{len}) is outside the MR", s.addr)));
            }
            if advice != advise::PREFETCH_NO_FAULT && !low.host.fault_in(s.addr, len, advice == advise::PREFETCH_WRITE)
            {
                return Err(Error::new(op, EFAULT, format!("[0x{:x}, +{len}) cannot be faulted in", s.addr)));
            }
        }
        Ok(())
    }

    /// `get_prefetchable_mr`: the ODP MR whose key is exactly `lkey`, of `pd`, writable for
    /// `PREFETCH_WRITE`.
    fn prefetchable(&self, pd: PdHandle, advice: u32, lkey: u32) -> Option<MrObj> {
        let m = self.mrs.iter().map(|(_, m)| m).find(|m| m.pd == pd && m.key == lkey)?;
        let ok = m.access.contains(AccessFlags::ON_DEMAND)
            && m.access.contains(AccessFlags::ON_DEMAND)
            && (advice != advise::PREFETCH_WRITE || writable(m.access));
        ok.then(|| m.clone())
    }
}
