//! dma-buf memory: the host's exporter, `ibv_reg_dmabuf_mr` / `mlx5dv_reg_dmabuf_mr` with the
//! kernel's checks, and `mlx5dv_get_data_direct_sysfs_path`.

use mlx5_dv::errno::{EBADF, EBUSY, EINVAL, ENODEV, ENOSPC, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, ContextHandle, DmaBuf, Error, MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT, Mr, Op, PdHandle, Result,
};

use super::{CtxKind, Lower, MrObj, Provider};
use crate::host::PAGE;

/// The access flags `UVERBS_METHOD_REG_DMABUF_MR` takes.
const DMABUF_ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::RELAXED_ORDERING);

/// The rdma-core release that added `mlx5dv_reg_dmabuf_mr` and the data-direct path.
const DMABUF_DV_RELEASE: u32 = 55;

/// What one dma-buf registration asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DmabufReg {
    pub(crate) pd: PdHandle,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) iova: u64,
    pub(crate) fd: i32,
    pub(crate) access: AccessFlags,
    /// The driver attribute: `Some` from `mlx5dv_reg_dmabuf_mr` (always sent, even 0).
    pub(crate) mlx5_access: Option<u32>,
}

impl Provider {
    /// EOPNOTSUPP when the simulated libmlx5 predates the function `name`.
    fn need_release(&self, op: Op, name: &str) -> Result<()> {
        let have = self.limits.rdma_core_release;
        if have < DMABUF_DV_RELEASE {
            let why = format!(
                "{name} needs rdma-core {DMABUF_DV_RELEASE} or later; the installed libmlx5 is from rdma-core {have}.0"
            );
            return Err(Error::new(op, EOPNOTSUPP, why));
        }
        Ok(())
    }

    /// Export `len` bytes (rounded up to whole pages) of fresh host memory as a dma-buf.
    pub(crate) fn alloc_dmabuf(&mut self, low: &mut Lower<'_>, len: usize) -> Result<DmaBuf> {
        let op = Op::AllocDmabuf;
        let size = u64::try_from(len).ok().and_then(|l| l.checked_next_multiple_of(PAGE));
        let size = size.and_then(|s| usize::try_from(s).ok()).filter(|s| *s > 0 && *s <= 1 << 30);
        let size = size.ok_or_else(|| Error::new(op, EINVAL, format!("dma-buf length {len} is outside 1..=1 GiB")))?;
        let buf = self.alloc_buf(low, size).map_err(|e| Error::new(op, e.errno(), e.reason()))?;
        let Some(fd) = low.host.dmabufs.export(buf.addr, size as u64) else {
            let _ = self.free_buf(low, &buf);
            return Err(Error::new(op, mlx5_dv::errno::ENOMEM, "no dma-buf fd left"));
        };
        // The export holds its memory: free_buf on it is EBUSY until free_dmabuf.
        self.bufs.acquire(buf.handle, op)?;
        Ok(DmaBuf { fd, buf })
    }

    /// Close an export and free its memory; EBUSY while an MR imports it.
    pub(crate) fn free_dmabuf(&mut self, low: &mut Lower<'_>, d: &DmaBuf) -> Result<()> {
        let op = Op::FreeDmabuf;
        let export = low.host.dmabufs.get(d.fd).ok_or_else(|| Error::new(op, EBADF, "not an exported dma-buf"))?;
        let b = self.bufs.get(d.buf.handle, op)?;
        if b.addr != export.addr {
            return Err(Error::new(op, EINVAL, "the buffer is not the dma-buf's memory"));
        }
        match low.host.dmabufs.close(d.fd) {
            Err(users) => return Err(Error::new(op, EBUSY, format!("{users} MR(s) import the dma-buf"))),
            Ok(None) => return Err(Error::new(op, EBADF, "not an exported dma-buf")),
            Ok(Some(_)) => {}
        }
        self.bufs.release(d.buf.handle);
        self.free_buf(low, &d.buf).map_err(|e| Error::new(op, e.errno(), e.reason()))
    }

    /// `ibv_reg_dmabuf_mr` and `mlx5dv_reg_dmabuf_mr`: the provider checks nothing but its
    /// own release; the kernel checks in the order uverbs and mlx5_ib do.
    pub(crate) fn reg_dmabuf_mr(&mut self, low: &mut Lower<'_>, r: &DmabufReg) -> Result<Mr> {
        let op = if r.mlx5_access.is_some() { Op::DvRegDmabufMr } else { Op::RegDmabufMr };
        let p = self.pds.get(r.pd, op)?;
        let (ctx, pdn) = (p.ctx, p.pdn);
        let c = self.contexts.get(ctx, op).map_err(|_| Error::new(op, EINVAL, "context closed"))?;
        let (kind, dev) = (c.kind, c.dev);
        if r.mlx5_access.is_some() {
            self.need_release(op, "mlx5dv_reg_dmabuf_mr")?;
        }
        let pdn = match (kind, pdn) {
            (CtxKind::Kernel { .. }, Some(pdn)) => pdn,
            _ => return Err(Error::new(op, EOPNOTSUPP, "dma-buf MRs need an mlx5 kernel context")),
        };
        // uverbs REG_DMABUF_MR: the offset and the iova sit at the same place in a page, and
        // the access flags are among the ones the method takes (ON_DEMAND is not).
        if r.offset % PAGE != r.iova % PAGE {
            let why = format!("offset 0x{:x} and iova 0x{:x} have different page offsets", r.offset, r.iova);
            return Err(Error::new(op, EINVAL, why));
        }
        if !DMABUF_ACCESS.contains(r.access) {
            let why = format!("access 0x{:x} outside LW|RR|RW|ATOMIC|RELAXED_ORDERING", r.access.bits());
            return Err(Error::new(op, EINVAL, why));
        }
        check_mr_access(op, r.access)?;
        // mlx5_ib_reg_user_mr_dmabuf: the driver attribute's flags; a data-direct MR
        // (reg_user_mr_dmabuf_by_data_direct) needs a page-aligned iova and no ON_DEMAND
        // (EOPNOTSUPP), then the data-direct device (EINVAL).
        if let Some(m) = r.mlx5_access {
            if m & !MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT != 0 {
                return Err(Error::new(op, EINVAL, format!("unknown mlx5_access bits 0x{m:x}")));
            }
            if m & MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT != 0 {
                if !r.iova.is_multiple_of(PAGE) || r.access.contains(AccessFlags::ON_DEMAND) {
                    let why =
                        format!("DATA_DIRECT (KSM) needs a page-aligned iova, not 0x{:x}, and no ON_DEMAND", r.iova);
                    return Err(Error::new(op, EOPNOTSUPP, why));
                }
                if low.kernel.data_direct.is_none() {
                    return Err(Error::new(op, EINVAL, "DATA_DIRECT without a data-direct device"));
                }
            }
        }
        // ib_umem_dmabuf_get: the fd, and the range inside the dma-buf.
        let export = low.host.dmabufs.get(r.fd).ok_or_else(|| Error::new(op, EBADF, "fd is not a dma-buf"))?;
        let end = r.offset.checked_add(r.length);
        if r.length == 0 || end.is_none_or(|e| e > export.len) {
            let why = format!("[{}, +{}) is not inside the {}-byte dma-buf", r.offset, r.length, export.len);
            return Err(Error::new(op, EINVAL, why));
        }
        let first = r.offset - r.offset % PAGE;
        let count = (r.offset % PAGE + r.length).div_ceil(PAGE);
        let pages: Vec<u64> = (0..count).map(|i| export.addr + first + i * PAGE).collect();
        let buf = self
            .bufs
            .iter()
            .find(|(_, b)| b.addr == export.addr)
            .map(|(h, _)| h)
            .ok_or_else(|| Error::new(op, EBADF, "the dma-buf's memory is gone"))?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let (index, variant) = low.kernel.reg_dmabuf_mr(d, dev, pdn, (r.iova, r.length), r.access, &pages, op)?;
        let handle = self.mrs.insert(
            op,
            MrObj {
                ctx,
                pd: r.pd,
                dev,
                index,
                key: index << 8 | u32::from(variant),
                buf: Some(buf),
                dmabuf: Some(r.fd),
                addr: r.iova,
                length: r.length,
                access: r.access,
                writable: super::odp::writable(r.access),
            },
        )?;
        self.bufs.acquire(buf, op)?;
        self.pds.acquire(r.pd, op)?;
        low.host.dmabufs.acquire(r.fd);
        let key = index << 8 | u32::from(variant);
        Ok(Mr { handle, lkey: key, rkey: key, addr: r.offset, length: r.length })
    }

    /// `mlx5dv_get_data_direct_sysfs_path`.
    pub(crate) fn get_data_direct_sysfs_path(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        buf_len: usize,
    ) -> Result<String> {
        let op = Op::GetDataDirectSysfsPath;
        let c = self.contexts.get(ctx, op)?;
        if !c.is_kernel() {
            return Err(Error::new(op, EOPNOTSUPP, "only mlx5 kernel contexts have a data-direct path"));
        }
        self.need_release(op, "mlx5dv_get_data_direct_sysfs_path")?;
        let path = low
            .kernel
            .data_direct
            .as_ref()
            .ok_or_else(|| Error::new(op, ENODEV, "no data-direct device is associated with the device"))?;
        if path.len() >= buf_len {
            let why = format!("{buf_len} bytes cannot hold the {}-byte path and its NUL", path.len());
            return Err(Error::new(op, ENOSPC, why));
        }
        Ok(path.clone())
    }
}

/// `ib_check_mr_access`: unknown bits, and remote write or atomic without local write.
pub(super) fn check_mr_access(op: Op, access: AccessFlags) -> Result<()> {
    let unknown = access.bits() & !AccessFlags::all().bits();
    if unknown != 0 {
        return Err(Error::new(op, EINVAL, format!("unknown access bits 0x{unknown:x}")));
    }
    if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
        && !access.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(Error::new(op, EINVAL, "REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE"));
    }
    Ok(())
}
