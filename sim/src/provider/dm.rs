//! Device memory as libmlx5 and libibverbs handle it: `mlx5_alloc_dm` / `_mlx5dv_alloc_dm`
//! (MEMIC), `mlx5_free_dm`, `mlx5_access_dm` behind `ibv_memcpy_to_dm` / `ibv_memcpy_from_dm`,
//! and `mlx5_reg_dm_mr` with libibverbs' and uverbs' checks.
//!
//! A DM's bytes are the device's MEMIC window in host memory; the provider keeps them as a
//! buffer (no memory of its own), so that its MRs count as the buffer's users, which makes
//! `ibv_free_dm` EBUSY while one is registered, as uverbs' use count does.

use mlx5_dv::errno::{EBUSY, EFAULT, EINVAL, EOPNOTSUPP};
use mlx5_dv::{AccessFlags, ContextHandle, DM_ALLOWED_ACCESS, Dm, Error, Mr, Op, PdHandle, Result};

use super::{BufObj, CtxKind, Lower, MrObj, Provider};
use crate::host::Dma;
use crate::kernel::{Kernel, MemicAlloc};

/// `IBV_ACCESS_OPTIONAL_RANGE`.
const ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

/// One `struct mlx5_dm`.
#[derive(Debug, Clone)]
pub(super) struct DmObj {
    ctx: ContextHandle,
    dev: usize,
    alloc: MemicAlloc,
    /// The length asked for.
    length: u64,
    buf: mlx5_dv::BufHandle,
}

impl Provider {
    /// The device of a kernel context, for device memory (EOPNOTSUPP on others: their
    /// `verbs_context` has no `alloc_dm`).
    fn dm_device(&self, ctx: ContextHandle, op: Op) -> Result<usize> {
        let c = self.contexts.get(ctx, op)?;
        match c.kind {
            CtxKind::Kernel { .. } => Ok(c.dev),
            _ => Err(Error::new(op, EOPNOTSUPP, "device memory needs an mlx5 kernel context")),
        }
    }

    /// `ibv_device_attr_ex.max_dm_size` of a kernel context's device.
    pub(crate) fn max_dm_size(&self, low: &mut Lower<'_>, ctx: ContextHandle) -> Result<u64> {
        let op = Op::AllocDm;
        let dev = self.dm_device(ctx, op)?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        Kernel::max_dm_size(d, op)
    }

    /// `ibv_alloc_dm`: libmlx5's EINVAL past `max_dm_size`, then the kernel's MEMIC allocation.
    pub(crate) fn alloc_dm(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        length: u64,
        log_align_req: u32,
    ) -> Result<Dm> {
        let op = Op::AllocDm;
        let dev = self.dm_device(ctx, op)?;
        let max = self.max_dm_size(low, ctx)?;
        if length > max {
            return Err(Error::new(op, EINVAL, format!("{length} bytes pass max_dm_size {max}")));
        }
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let alloc = low.kernel.alloc_memic(d, dev, low.host, (length, log_align_req))?;
        let window = d.firmware().memic_window().ok_or_else(|| Error::new(op, EINVAL, "no MEMIC window"))?;
        let addr = window + (alloc.addr - crate::device::firmware::MEMIC_BAR_START);
        let len = usize::try_from(alloc.size).map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
        // Fresh device memory reads as zeros here (the hardware promises nothing).
        if !low.host.write(addr, &vec![0u8; len]) {
            return Err(Error::new(op, EFAULT, "the MEMIC window is not mapped"));
        }
        let buf = self.bufs.insert(op, BufObj { addr, len })?;
        let handle = self.dms.insert(op, DmObj { ctx, dev, alloc, length, buf })?;
        Ok(Dm { handle, length })
    }

    /// `ibv_free_dm`: EBUSY while an MR is registered over it.
    pub(crate) fn free_dm(&mut self, low: &mut Lower<'_>, dm: &Dm) -> Result<()> {
        let op = Op::FreeDm;
        let o = self.dms.get(dm.handle, op)?.clone();
        let users = self.bufs.users(o.buf, op)?;
        if users > 0 {
            return Err(Error::new(op, EBUSY, format!("{users} MR(s) are registered over the DM")));
        }
        let d = low.devices.get_mut(o.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        low.kernel.dealloc_memic(d, o.dev, o.alloc)?;
        self.dms.take(dm.handle, op)?;
        self.bufs.take(o.buf, op)?;
        Ok(())
    }

    /// `mlx5_access_dm`'s checks: EFAULT past the DM's length, then EINVAL for an offset or a
    /// length that is not a multiple of 4; the host address of the bytes.
    fn dm_bytes(&self, op: Op, dm: &Dm, offset: u64, len: usize) -> Result<u64> {
        let o = self.dms.get(dm.handle, op)?;
        let len = len as u64;
        if offset.checked_add(len).is_none_or(|e| e > o.length) {
            return Err(Error::new(op, EFAULT, format!("{len} bytes at {offset} pass the DM's {}", o.length)));
        }
        if len & 3 != 0 || offset & 3 != 0 {
            return Err(Error::new(op, EINVAL, "DM access needs a 4-byte aligned offset and length"));
        }
        Ok(self.bufs.get(o.buf, op)?.addr + offset)
    }

    /// `ibv_memcpy_to_dm`.
    pub(crate) fn memcpy_to_dm(&mut self, low: &mut Lower<'_>, dm: &Dm, offset: u64, data: &[u8]) -> Result<()> {
        let op = Op::MemcpyToDm;
        let at = self.dm_bytes(op, dm, offset, data.len())?;
        if low.host.write(at, data) { Ok(()) } else { Err(Error::new(op, EFAULT, "the MEMIC window is not mapped")) }
    }

    /// `ibv_memcpy_from_dm`.
    pub(crate) fn memcpy_from_dm(&mut self, low: &mut Lower<'_>, dm: &Dm, offset: u64, len: usize) -> Result<Vec<u8>> {
        let op = Op::MemcpyFromDm;
        let at = self.dm_bytes(op, dm, offset, len)?;
        low.host
            .read(at, len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::new(op, EFAULT, "the MEMIC window is not mapped"))
    }

    /// The host address of a DM's byte 0 (`mlx5dv_init_obj`'s `dm.buf` in process).
    pub(crate) fn dm_address(&self, dm: &Dm) -> Result<u64> {
        let o = self.dms.get(dm.handle, Op::AllocDm)?;
        Ok(self.bufs.get(o.buf, Op::AllocDm)?.addr)
    }

    /// `ibv_reg_dm_mr`: libmlx5's access mask, libibverbs' ZERO_BASED rule, uverbs' flag
    /// checks (all EINVAL), then the kernel's range check and MEMIC mkey. The MR's `addr` is 0.
    pub(crate) fn reg_dm_mr(
        &mut self,
        low: &mut Lower<'_>,
        pd: PdHandle,
        dm: &Dm,
        offset: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::RegDmMr;
        let p = self.pds.get(pd, op)?;
        let (ctx, pdn) = (p.ctx, p.pdn);
        let o = self.dms.get(dm.handle, op)?.clone();
        if o.ctx != ctx {
            return Err(Error::new(op, EINVAL, "the PD and the DM are of different contexts"));
        }
        let unknown = access.bits() & !DM_ALLOWED_ACCESS;
        if unknown != 0 {
            return Err(Error::new(op, EINVAL, format!("access bits 0x{unknown:x} are not allowed on DM")));
        }
        if !access.contains(AccessFlags::ZERO_BASED) {
            return Err(Error::new(op, EINVAL, "a DM MR must be IBV_ACCESS_ZERO_BASED"));
        }
        let access = AccessFlags::from_bits_retain(access.bits() & !ACCESS_OPTIONAL_RANGE);
        super::dmabuf::check_mr_access(op, access)?;
        let pdn = pdn.ok_or_else(|| Error::new(op, EOPNOTSUPP, "MRs are simulated on mlx5 contexts only"))?;
        let d = low.devices.get_mut(o.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let (index, variant) = low.kernel.reg_dm_mr(d, o.dev, pdn, (o.alloc, o.length), (offset, length), access)?;
        let key = index << 8 | u32::from(variant);
        let writable = super::odp::writable(access);
        let obj = MrObj {
            ctx,
            pd,
            dev: o.dev,
            index,
            key,
            buf: Some(o.buf),
            dmabuf: None,
            addr: 0,
            length,
            access,
            writable,
        };
        let handle = self.mrs.insert(op, obj)?;
        self.bufs.acquire(o.buf, op)?;
        self.pds.acquire(pd, op)?;
        Ok(Mr { handle, lkey: key, rkey: key, addr: 0, length })
    }

    /// A closing context's DMs (after its MRs): uverbs' cleanup frees their MEMIC.
    pub(super) fn release_dms_of(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        let op = Op::CloseDevice;
        for h in self.dms.handles_where(|d| d.ctx == ctx) {
            if let Ok(o) = self.dms.take(h, op) {
                if let Some(d) = low.devices.get_mut(o.dev) {
                    let _ = low.kernel.dealloc_memic(d, o.dev, o.alloc);
                }
                let _ = self.bufs.take(o.buf, op);
            }
        }
    }

    /// Whether `buf` stands for a DM (its MRs are DM MRs).
    pub(super) fn is_dm_buf(&self, buf: mlx5_dv::BufHandle) -> bool {
        self.dms.iter().any(|(_, d)| d.buf == buf)
    }
}
