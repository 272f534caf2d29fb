//! The backend's buffers: page-aligned, zeroed host memory that MRs, umems and EQ rings
//! cover; only these may be registered, so RDMA never reaches other memory.

use std::alloc::Layout;

use mlx5_dv::errno::{EINVAL, ENOMEM};
use mlx5_dv::{Buf, Error, Op, Result};

use crate::backend::HwBackend;
use crate::objects::{HwBuf, unused};

const PAGE: usize = 4096;

impl HwBackend {
    pub(crate) fn hw_alloc_buf(&mut self, len: usize) -> Result<Buf> {
        let op = Op::AllocBuf;
        if len == 0 || len > (1 << 30) {
            return Err(Error::new(op, EINVAL, format!("buffer length {len} is outside 1..=1 GiB")));
        }
        let layout = Layout::from_size_align(len.div_ceil(PAGE) * PAGE, PAGE)
            .map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::new(op, ENOMEM, "out of memory"));
        }
        let handle =
            self.objs.bufs.insert(op, HwBuf { ptr, layout, dmabuf: None, borrowed: false }).inspect_err(|_| {
                // SAFETY: allocated with this layout just above and in no table.
                unsafe { std::alloc::dealloc(ptr, layout) };
            })?;
        Ok(Buf { handle, addr: ptr as u64, len })
    }

    pub(crate) fn hw_free_buf(&mut self, buf: &Buf) -> Result<()> {
        let op = Op::FreeBuf;
        unused(&self.objs.bufs, buf.handle, op, |n| format!("{n} MR(s) or umem(s) still cover the buffer"))?;
        let b = self.objs.bufs.get(buf.handle, op)?;
        if b.dmabuf.is_some() {
            return Err(Error::new(op, mlx5_dv::errno::EBUSY, "the buffer is a dma-buf's: free_dmabuf frees it"));
        }
        if b.borrowed {
            return Err(Error::new(op, mlx5_dv::errno::EBUSY, "the buffer is an EQ ring: destroy_eq releases it"));
        }
        let b = self.objs.bufs.remove(buf.handle, op)?;
        // SAFETY: allocated with this layout in hw_alloc_buf; no MR covers it.
        unsafe { std::alloc::dealloc(b.ptr, b.layout) };
        Ok(())
    }

    pub(crate) fn free_all_bufs(&mut self) {
        for h in self.objs.bufs.handles_where(|_| true) {
            if let Ok(b) = self.objs.bufs.take(h, Op::FreeBuf)
                && !b.borrowed
            {
                match b.dmabuf {
                    // SAFETY: every MR was deregistered before this runs.
                    Some(d) => unsafe { d.unmap(b.ptr, b.layout.size()) },
                    // SAFETY: every MR was deregistered before this runs (Drop releases contexts first).
                    None => unsafe { std::alloc::dealloc(b.ptr, b.layout) },
                }
            }
        }
    }

    pub(crate) fn hw_buf_slice(&mut self, buf: &Buf, offset: usize, len: usize, op: Op) -> Result<&mut [u8]> {
        let b = self.objs.bufs.get(buf.handle, op)?;
        if offset.checked_add(len).is_none_or(|e| e > buf.len.min(b.layout.size())) {
            return Err(Error::new(op, EINVAL, format!("{len} bytes at {offset} pass the buffer's {} bytes", buf.len)));
        }
        // SAFETY: the range lies inside the live allocation; &mut self keeps it exclusive.
        Ok(unsafe { std::slice::from_raw_parts_mut(b.ptr.add(offset), len) })
    }
}
