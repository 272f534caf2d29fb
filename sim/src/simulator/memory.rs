//! [`Memory`] on the simulator: buffers, MRs, device memory, dma-bufs and memory windows,
//! each handed to the provider.

use super::*;

impl Memory for Simulator {
    fn alloc_buf(&mut self, len: usize) -> Result<Buf> {
        down!(self.alloc_buf(len))
    }

    fn free_buf(&mut self, buf: &Buf) -> Result<()> {
        down!(self.free_buf(buf))
    }

    fn write_buf(&mut self, buf: &Buf, offset: usize, data: &[u8]) -> Result<()> {
        down!(self.write_buf(buf, offset, data))
    }

    fn read_buf(&mut self, buf: &Buf, offset: usize, len: usize) -> Result<Vec<u8>> {
        down!(self.read_buf(buf, offset, len))
    }

    fn reg_mr(&mut self, pd: PdHandle, addr: u64, length: u64, access: AccessFlags) -> Result<Mr> {
        down!(self.reg_mr(pd, addr, length, access))
    }

    fn dereg_mr(&mut self, mr: &Mr) -> Result<()> {
        down!(self.dereg_mr(mr))
    }

    fn advise_mr(&mut self, pd: PdHandle, advice: u32, flags: u32, sges: &[mlx5_dv::Sge]) -> Result<()> {
        down!(self.advise_mr(pd, advice, flags, sges))
    }

    fn rereg_mr(
        &mut self,
        mr: &Mr,
        flags: u32,
        pd: Option<PdHandle>,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        down!(self.rereg_mr(mr, flags, pd, addr, length, access))
    }

    fn alloc_dmabuf(&mut self, len: usize) -> Result<DmaBuf> {
        down!(self.alloc_dmabuf(len))
    }

    fn alloc_mw(&mut self, pd: PdHandle, mw_type: u32) -> Result<mlx5_dv::Mw> {
        down!(self.alloc_mw(pd, mw_type))
    }

    fn dealloc_mw(&mut self, mw: &mlx5_dv::Mw) -> Result<()> {
        down!(self.dealloc_mw(mw))
    }

    fn alloc_dm(&mut self, ctx: ContextHandle, length: u64, log_align_req: u32) -> Result<mlx5_dv::Dm> {
        down!(self.alloc_dm(ctx, length, log_align_req))
    }

    fn free_dm(&mut self, dm: &mlx5_dv::Dm) -> Result<()> {
        down!(self.free_dm(dm))
    }

    fn memcpy_to_dm(&mut self, dm: &mlx5_dv::Dm, offset: u64, data: &[u8]) -> Result<()> {
        down!(self.memcpy_to_dm(dm, offset, data))
    }

    fn memcpy_from_dm(&mut self, dm: &mlx5_dv::Dm, offset: u64, len: usize) -> Result<Vec<u8>> {
        down!(self.memcpy_from_dm(dm, offset, len))
    }

    fn reg_dm_mr(
        &mut self,
        pd: PdHandle,
        dm: &mlx5_dv::Dm,
        offset: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        down!(self.reg_dm_mr(pd, dm, offset, length, access))
    }

    fn free_dmabuf(&mut self, dmabuf: &DmaBuf) -> Result<()> {
        down!(self.free_dmabuf(dmabuf))
    }

    fn reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: AccessFlags,
    ) -> Result<Mr> {
        let r = DmabufReg { pd, offset, length, iova, fd, access, mlx5_access: None };
        down!(self.reg_dmabuf_mr(&r))
    }

    fn dv_reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: AccessFlags,
        mlx5_access: u32,
    ) -> Result<Mr> {
        let r = DmabufReg { pd, offset, length, iova, fd, access, mlx5_access: Some(mlx5_access) };
        down!(self.reg_dmabuf_mr(&r))
    }

    fn get_data_direct_sysfs_path(&mut self, ctx: ContextHandle, buf_len: usize) -> Result<String> {
        down!(self.get_data_direct_sysfs_path(ctx, buf_len))
    }
}
