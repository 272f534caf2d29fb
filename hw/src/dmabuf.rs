//! dma-buf memory on a real host: buffers exported through udmabuf (`udmabuf`), `ibv_reg_dmabuf_mr`,
//! `mlx5dv_reg_dmabuf_mr` and `mlx5dv_get_data_direct_sysfs_path`.

use std::ffi::{c_char, c_int};

use mlx5_dv::errno::{EBADF, EINVAL, ENOMEM};
use mlx5_dv::{AccessFlags, Buf, ContextHandle, DmaBuf, Error, Mr, Op, PdHandle, Result};

use crate::backend::HwBackend;
use crate::call::last_errno;
use crate::objects::{HwBuf, HwMr};
use crate::udmabuf::udmabuf;

const PAGE: usize = 4096;

impl HwBackend {
    pub(crate) fn hw_alloc_dmabuf(&mut self, len: usize) -> Result<DmaBuf> {
        let op = Op::AllocDmabuf;
        let size = len.checked_next_multiple_of(PAGE).filter(|s| *s > 0 && *s <= 1 << 30);
        let size = size.ok_or_else(|| Error::new(op, EINVAL, format!("dma-buf length {len} is outside 1..=1 GiB")))?;
        let (u, ptr) = udmabuf(op, size)?;
        let layout =
            std::alloc::Layout::from_size_align(size, PAGE).map_err(|e| Error::new(op, ENOMEM, e.to_string()))?;
        let handle =
            self.objs.bufs.insert(op, HwBuf { ptr, layout, dmabuf: Some(u), borrowed: false }).inspect_err(|_| {
                // SAFETY: mapped just above and in no table.
                unsafe { u.unmap(ptr, size) };
            })?;
        Ok(DmaBuf { fd: u.fd, buf: Buf { handle, addr: ptr as u64, len: size } })
    }

    pub(crate) fn hw_free_dmabuf(&mut self, d: &DmaBuf) -> Result<()> {
        let op = Op::FreeDmabuf;
        let b = self.objs.bufs.get(d.buf.handle, op)?;
        if b.dmabuf.is_none_or(|u| u.fd != d.fd) {
            return Err(Error::new(op, EBADF, "not a dma-buf of this backend"));
        }
        crate::objects::unused(&self.objs.bufs, d.buf.handle, op, |n| format!("{n} MR(s) import the dma-buf"))?;
        let b = self.objs.bufs.remove(d.buf.handle, op)?;
        if let Some(u) = b.dmabuf {
            // SAFETY: no MR imports it any more.
            unsafe { u.unmap(b.ptr, b.layout.size()) };
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)] // the C signature
    pub(crate) fn hw_reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        (offset, length, iova): (u64, u64, u64),
        fd: i32,
        access: AccessFlags,
        mlx5_access: Option<u32>,
    ) -> Result<Mr> {
        let op = if mlx5_access.is_some() { Op::DvRegDmabufMr } else { Op::RegDmabufMr };
        let (pd_ptr, ctx) = {
            let p = self.objs.pds.get(pd, op)?;
            (p.ptr, p.ctx)
        };
        // Only this backend's exports may be registered, so RDMA never reaches other memory.
        let buf = self
            .objs
            .bufs
            .iter()
            .find(|(_, b)| b.dmabuf.is_some_and(|u| u.fd == fd))
            .map(|(h, _)| h)
            .ok_or_else(|| Error::new(op, EBADF, format!("fd {fd} is not a dma-buf of this backend")))?;
        let len = usize::try_from(length).map_err(|_| Error::new(op, EINVAL, "length does not fit size_t"))?;
        let acc = access.bits() as c_int;
        let mr = match mlx5_access {
            None => {
                let f = self.lib().ibv_reg_dmabuf_mr.get(op, self.lib().rdma_core_version())?;
                // SAFETY: the PD is live and fd is a live export of this backend.
                unsafe { f(pd_ptr, offset, len, iova, fd, acc) }
            }
            Some(m) => {
                let f = self.lib().reg_dmabuf_mr.get(op, self.lib().rdma_core_version())?;
                // SAFETY: as above; mlx5_access is passed through as the C int it is.
                unsafe { f(pd_ptr, offset, len, iova, fd, acc, m as c_int) }
            }
        };
        if mr.is_null() {
            return Err(Error::new(op, last_errno(), format!("{} failed", op.c_name())));
        }
        // SAFETY: a non-NULL MR returned by the call.
        let (lkey, rkey, addr) = unsafe { ((*mr).lkey, (*mr).rkey, (*mr).addr as u64) };
        let handle = self.objs.add_mr(op, HwMr { ptr: mr, pd, ctx, buf: Some(buf) }).inspect_err(|_| {
            // SAFETY: the MR was just registered and is in no table.
            unsafe { rdma_sys::ibv_dereg_mr(mr) };
        })?;
        Ok(Mr { handle, lkey, rkey, addr, length })
    }

    pub(crate) fn hw_get_data_direct_sysfs_path(&mut self, ctx: ContextHandle, buf_len: usize) -> Result<String> {
        let op = Op::GetDataDirectSysfsPath;
        let c = self.ctx_ptr(ctx, op)?;
        let f = self.lib().get_data_direct_sysfs_path.get(op, self.lib().rdma_core_version())?;
        let mut buf = vec![0u8; buf_len];
        // SAFETY: c is an open context and buf holds buf_len bytes.
        let rc = unsafe { f(c, buf.as_mut_ptr().cast::<c_char>(), buf_len) };
        if rc != 0 {
            let errno = if rc > 0 { rc } else { last_errno() };
            return Err(Error::new(op, errno, "mlx5dv_get_data_direct_sysfs_path failed"));
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
}
