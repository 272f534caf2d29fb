//! Host memory as the application sees it: buffers (the backend's own or registered external
//! memory) and `ibv_reg_mr` / `ibv_rereg_mr` / `ibv_dereg_mr`.

use mlx5_dv::errno::{EACCES, EFAULT, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{AccessFlags, Buf, Error, Mr, Op, PdHandle, ReregFlags, Result};

use super::{BufObj, Lower, MrObj, Provider};
use crate::host::Dma;
use crate::kernel;

/// `IBV_ACCESS_OPTIONAL_RANGE`: bits 20 to 29.
const ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

/// `MLX5_VFIO_SUPP_MR_ACCESS_FLAGS`.
const VFIO_MR_ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::RELAXED_ORDERING);

impl Provider {
    /// A page-aligned buffer of `len` zeroed bytes.
    pub(crate) fn alloc_buf(&mut self, low: &mut Lower<'_>, len: usize) -> Result<Buf> {
        let op = Op::AllocBuf;
        if len == 0 || len > (1 << 30) {
            return Err(Error::new(op, EINVAL, format!("buffer length {len} is outside 1..=1 GiB")));
        }
        let addr = low
            .host
            .alloc(len)
            .ok_or_else(|| Error::new(op, ENOMEM, format!("no host memory left for {len} bytes")))?;
        let handle = self.bufs.insert(op, BufObj { addr, len })?;
        Ok(Buf { handle, addr, len })
    }

    /// A buffer over an application's own `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// As [`crate::host::Host::register_external`]: valid and untouched until freed.
    pub(crate) unsafe fn register_buf(&mut self, low: &mut Lower<'_>, ptr: *mut u8, len: usize) -> Result<Buf> {
        let op = Op::AllocBuf;
        // SAFETY: the caller's contract.
        let addr = unsafe { low.host.register_external(ptr, len) }.ok_or_else(|| {
            Error::new(op, EINVAL, "the memory is empty, wraps, or overlaps the backend's own buffers")
        })?;
        let handle = self.bufs.insert(op, BufObj { addr, len })?;
        Ok(Buf { handle, addr, len })
    }

    /// Free a buffer; EBUSY while MRs cover it.
    pub(crate) fn free_buf(&mut self, low: &mut Lower<'_>, buf: &Buf) -> Result<()> {
        let op = Op::FreeBuf;
        let users = self.bufs.users(buf.handle, op)?;
        if users > 0 {
            return Err(Error::new(op, mlx5_dv::errno::EBUSY, format!("{users} MR(s) still cover the buffer")));
        }
        let b = self.bufs.take(buf.handle, op)?;
        low.host.unmap_buf(b.addr, b.len);
        Ok(())
    }

    /// Copy `data` into a buffer at `offset`.
    pub(crate) fn write_buf(&mut self, low: &mut Lower<'_>, buf: &Buf, offset: usize, data: &[u8]) -> Result<()> {
        let op = Op::WriteBuf;
        let b = self.bufs.get(buf.handle, op)?;
        if offset.checked_add(data.len()).is_none_or(|e| e > b.len) {
            let why = format!("{} bytes at {offset} pass the buffer's {} bytes", data.len(), b.len);
            return Err(Error::new(op, EINVAL, why));
        }
        let va = b.addr + offset as u64;
        if low.host.write(va, data) { Ok(()) } else { Err(Error::new(op, EINVAL, "buffer not mapped")) }
    }

    /// Read `len` bytes of a buffer at `offset`.
    pub(crate) fn read_buf(&mut self, low: &mut Lower<'_>, buf: &Buf, offset: usize, len: usize) -> Result<Vec<u8>> {
        let op = Op::ReadBuf;
        let b = self.bufs.get(buf.handle, op)?;
        if offset.checked_add(len).is_none_or(|e| e > b.len) {
            return Err(Error::new(op, EINVAL, format!("{len} bytes at {offset} pass the buffer's {} bytes", b.len)));
        }
        low.host
            .read(b.addr + offset as u64, len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::new(op, EINVAL, "buffer not mapped"))
    }

    /// `ibv_reg_mr`: the optional bits dropped, the checks of `ib_check_mr_access` (or of
    /// `mlx5_vfio_reg_mr` on a VFIO context), then an MTT mkey.
    pub(crate) fn reg_mr(
        &mut self,
        low: &mut Lower<'_>,
        pd: PdHandle,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::RegMr;
        let p = self.pds.get(pd, op)?;
        let (ctx, pdn) = (p.ctx, p.pdn);
        let (dev, kind) = self
            .contexts
            .get(ctx, op)
            .map(|c| (c.dev, c.kind))
            .map_err(|_| Error::new(op, EINVAL, "context closed"))?;
        let pdn = pdn.ok_or_else(|| Error::new(op, EOPNOTSUPP, "MRs are simulated on mlx5 contexts only"))?;
        // ibv_reg_mr_iova2: optional bits a device lacks are ignored, never refused (libibverbs
        // strips them unless the kernel takes them, and the kernel then ignores them).
        let access = AccessFlags::from_bits_retain(access.bits() & !ACCESS_OPTIONAL_RANGE);
        if kind == super::CtxKind::Vfio {
            // mlx5_vfio_reg_mr: its own short list, and no LOCAL_WRITE rule.
            let unsupported = access.bits() & !VFIO_MR_ACCESS.bits();
            if unsupported != 0 {
                return Err(Error::new(op, EOPNOTSUPP, format!("access bits 0x{unsupported:x} on a VFIO context")));
            }
        } else {
            super::dmabuf::check_mr_access(op, access)?;
        }
        if access.contains(AccessFlags::ON_DEMAND) {
            return self.reg_odp_mr(low, (ctx, pd), (dev, pdn), addr, length, access);
        }
        let (index, variant, buf) = self.new_mtt(low, op, dev, pdn, (addr, length), access)?;
        let key = index << 8 | u32::from(variant);
        let writable = super::odp::writable(access);
        let obj = MrObj { ctx, pd, dev, index, key, buf: Some(buf), dmabuf: None, addr, length, access, writable };
        let handle = self.mrs.insert(op, obj)?;
        self.bufs.acquire(buf, op)?;
        self.pds.acquire(pd, op)?;
        Ok(Mr { handle, lkey: key, rkey: key, addr, length })
    }

    /// Pin `[addr, +length)` of one of this backend's buffers and create an MTT mkey over it:
    /// the mkey's index and key variant, and the buffer.
    pub(super) fn new_mtt(
        &mut self,
        low: &mut Lower<'_>,
        op: Op,
        dev: usize,
        pdn: u32,
        range: (u64, u64),
        access: AccessFlags,
    ) -> Result<(u32, u8, mlx5_dv::BufHandle)> {
        let buf = self.buffer_of(low, op, range)?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let (index, variant) = low.kernel.reg_mr(d, dev, pdn, range, access)?;
        Ok((index, variant, buf))
    }

    /// The buffer of this backend that `[addr, +length)` starts in, after `ib_umem_get`'s
    /// checks of the range: EINVAL when it wraps, EFAULT when it is not mapped.
    fn buffer_of(&self, low: &Lower<'_>, op: Op, (addr, length): (u64, u64)) -> Result<mlx5_dv::BufHandle> {
        // ib_umem_get: a range whose end (or that end rounded up to a page) wraps is EINVAL.
        if addr.checked_add(length).and_then(|end| end.checked_add(crate::host::PAGE - 1)).is_none() {
            return Err(Error::new(op, EINVAL, format!("[0x{addr:x}, +{length}) wraps the address space")));
        }
        if length == 0 || !low.host.is_mapped(addr, length) {
            return Err(Error::new(op, EFAULT, format!("[0x{addr:x}, +{length}) is not mapped memory")));
        }
        // Registrations of the application's memory may overlap: the one that holds the whole
        // range, else one it starts in.
        let starts_in = |b: &BufObj| b.addr <= addr && addr - b.addr < b.len as u64;
        let holds = |b: &BufObj| starts_in(b) && addr - b.addr + length <= b.len as u64;
        self.bufs
            .iter()
            .find(|(_, b)| holds(b))
            .or_else(|| self.bufs.iter().find(|(_, b)| starts_in(b)))
            .map(|(h, _)| h)
            .ok_or_else(|| Error::new(op, EFAULT, "not a buffer of this backend"))
    }

    /// `ibv_rereg_mr`: libibverbs' checks of its arguments, then the kernel's
    /// (`ib_uverbs_rereg_mr`: some flag, a PD of the same context, `ib_check_mr_access`), then
    /// what the driver's UMR path does: the MR's mkey takes the new range, PD and rights and
    /// keeps its key (lkey and rkey do not change). An ODP MR (or a new translation that is
    /// one) follows the driver's ODP rules instead (`rereg_odp_mr`). On an error of the checks
    /// the MR is as it was.
    #[allow(clippy::too_many_arguments)] // the C signature
    pub(crate) fn rereg_mr(
        &mut self,
        low: &mut Lower<'_>,
        mr: &Mr,
        flags: u32,
        new_pd: Option<PdHandle>,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        let op = Op::ReregMr;
        let m = self.mrs.get(mr.handle, op)?.clone();
        // libibverbs: only plain MRs (a dma-buf MR is IBV_MR_TYPE_DMABUF_MR).
        if m.dmabuf.is_some() {
            return Err(Error::new(op, EINVAL, "a dma-buf MR cannot be re-registered"));
        }
        let flags = ReregFlags::check_input(flags, addr, length, access).map_err(|why| Error::new(op, EINVAL, why))?;
        let (dev, kind) = self
            .contexts
            .get(m.ctx, op)
            .map(|c| (c.dev, c.kind))
            .map_err(|_| Error::new(op, EINVAL, "context closed"))?;
        if kind == super::CtxKind::Vfio {
            // The VFIO provider has no rereg_mr: libibverbs' placeholder answers.
            return Err(Error::new(op, EOPNOTSUPP, "the VFIO provider has no rereg_mr"));
        }
        if flags.is_empty() {
            return Err(Error::new(op, EINVAL, "no IBV_REREG_MR_CHANGE_* flag"));
        }
        // ib_uverbs_rereg_mr: an MR over device memory is never re-registered.
        if m.buf.is_some_and(|b| self.is_dm_buf(b)) {
            return Err(Error::new(op, EINVAL, "a DM MR cannot be re-registered"));
        }
        let access = if flags.contains(ReregFlags::CHANGE_ACCESS) {
            let access = AccessFlags::from_bits_retain(access.bits() & !ACCESS_OPTIONAL_RANGE);
            super::dmabuf::check_mr_access(op, access)?;
            // ib_check_mr_access: ON_DEMAND on a device without ODP.
            let odp = low.devices.get(dev).is_some_and(|d| d.odp_caps().supported());
            if access.contains(AccessFlags::ON_DEMAND) && !odp {
                return Err(Error::new(op, EOPNOTSUPP, "IBV_ACCESS_ON_DEMAND on a device without ODP"));
            }
            access
        } else {
            m.access
        };
        let pd = match (flags.contains(ReregFlags::CHANGE_PD), new_pd) {
            (false, _) => m.pd,
            (true, Some(pd)) if self.pds.get(pd, op).is_ok_and(|p| p.ctx == m.ctx) => pd,
            (true, _) => return Err(Error::new(op, EINVAL, "CHANGE_PD without a PD of the MR's context")),
        };
        let pdn = self.pds.get(pd, op)?.pdn.ok_or_else(|| Error::new(op, EINVAL, "not an mlx5 PD"))?;
        let range = if flags.contains(ReregFlags::CHANGE_TRANSLATION) { (addr, length) } else { (m.addr, m.length) };
        // mlx5_ib_rereg_user_mr's first check (ib_umem_check_rereg): write rights, without a
        // new translation, on pages that were taken without write.
        let new_pages = flags.contains(ReregFlags::CHANGE_TRANSLATION);
        if flags.contains(ReregFlags::CHANGE_ACCESS) && !new_pages && super::odp::writable(access) && !m.writable {
            return Err(Error::new(op, EACCES, "write rights on an MR whose pages were not taken writable"));
        }
        // An ODP MR, or a new translation that is one: the driver's ODP rules.
        let to_odp = flags.contains(ReregFlags::CHANGE_TRANSLATION) && access.contains(AccessFlags::ON_DEMAND);
        if m.buf.is_none() || to_odp {
            return self.rereg_odp_mr(low, (mr.handle, &m), flags, (pd, pdn), range, access);
        }
        if access.contains(AccessFlags::ON_DEMAND) {
            // mlx5_ib re-creates the pinned MR with ON_DEMAND among its flags; not simulated.
            return Err(Error::new(op, EOPNOTSUPP, "making a pinned MR ODP in place is not simulated"));
        }
        let buf = self.buffer_of(low, op, range)?;
        let variant = (mr.lkey & 0xff) as u8;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let index = low.kernel.rereg_mr(d, (m.index, variant), pdn, range, access, op)?;
        self.bufs.acquire(buf, op)?;
        self.pds.acquire(pd, op)?;
        if let Some(b) = m.buf {
            self.bufs.release(b);
        }
        self.pds.release(m.pd);
        // A new translation is a new umem, writable by the new rights.
        let writable =
            if flags.contains(ReregFlags::CHANGE_TRANSLATION) { super::odp::writable(access) } else { m.writable };
        let obj = MrObj { pd, index, buf: Some(buf), addr: range.0, length: range.1, access, writable, ..m };
        *self.mrs.get_mut(mr.handle, op)? = obj;
        let key = index << 8 | u32::from(variant);
        Ok(Mr { handle: mr.handle, lkey: key, rkey: key, addr: range.0, length: range.1 })
    }

    /// `ibv_dereg_mr`.
    pub(crate) fn dereg_mr(&mut self, low: &mut Lower<'_>, mr: &Mr) -> Result<()> {
        let op = Op::DeregMr;
        let m = self.mrs.get(mr.handle, op)?.clone();
        let d = low.devices.get_mut(m.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        kernel::destroy_mkey(d, m.index, op)?;
        self.mrs.take(mr.handle, op)?;
        self.release_mr_memory(low, &m);
        self.pds.release(m.pd);
        if let Some(fd) = m.dmabuf {
            low.host.dmabufs.release(fd);
        }
        Ok(())
    }
}
