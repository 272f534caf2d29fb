//! DEVX as libmlx5 offers it: raw commands and objects through the kernel on mlx5 contexts,
//! straight into the function's command interface on VFIO contexts (`mlx5_vfio.c`); UARs,
//! umems, and the VFIO provider's MSI-X vectors and EQs.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, eq as e, opcode};
use mlx5_dv::{
    AccessFlags, Buf, ContextHandle, DevxObj, DevxObjHandle, DevxUar, DevxUmem, Error, HandleTable, Op, Result,
    uar_offset,
};

use super::{CtxKind, Lower, Provider};
use crate::device::firmware::{cq_or_qp_input, named_input};
use crate::kernel::{self, DevxUid};

mod vfio;

/// A DEVX object: its context, device, and the command that destroys it.
#[derive(Debug, Clone)]
pub(super) struct ObjRec {
    ctx: ContextHandle,
    dev: usize,
    kernel: bool,
    /// Opcode and object id, for the kernel's check that a query or modify names it.
    create_opcode: u16,
    obj_id: u32,
    obj_type: u16,
    destroy: Vec<u8>,
}

#[derive(Debug, Clone)]
pub(super) struct UarRec {
    ctx: ContextHandle,
    dev: usize,
    page: u32,
    /// A dedicated page, freed with DEALLOC_UAR; shared pages stay with the context.
    dedicated: bool,
}

#[derive(Debug, Clone)]
pub(super) struct UmemRec {
    ctx: ContextHandle,
    dev: usize,
    id: u32,
    buf: mlx5_dv::BufHandle,
}

/// The DEVX objects of every context.
#[derive(Debug, Clone)]
pub(crate) struct DevxObjects {
    objs: HandleTable<DevxObjHandle, ObjRec>,
    uars: HandleTable<mlx5_dv::UarHandle, UarRec>,
    umems: HandleTable<mlx5_dv::UmemHandle, UmemRec>,
    vfio: vfio::VfioObjects,
}

impl DevxObjects {
    pub(crate) fn new(backend: mlx5_dv::BackendId) -> Self {
        DevxObjects {
            objs: HandleTable::new(backend),
            uars: HandleTable::new(backend),
            umems: HandleTable::new(backend),
            vfio: vfio::VfioObjects::new(backend),
        }
    }
}

/// How a context reaches the firmware.
#[derive(Debug, Clone, Copy)]
enum Path {
    Kernel(DevxUid),
    Vfio,
}

/// `devx_is_obj_create_cmd`: the commands `mlx5dv_devx_obj_create` accepts.
fn is_obj_create_cmd(input: &[u8]) -> bool {
    let op = prm::mbox_in::OPCODE.get(input).unwrap_or(0) as u16;
    match op {
        0xa00 | 0x200 | 0x400 | 0x800 | 0x816 | 0x90c | 0x904 | 0x908 | 0x916 | 0x900 | 0x912 | 0x771 | 0x930
        | 0x933 | 0x939 | 0x93d | 0x940 | 0x782 | 0x827 | 0x829 | 0x500 | 0x700 | 0x705 | 0x710 | 0x717 | 0x806
        | 0x80e => true,
        // SET_FLOW_TABLE_ENTRY creates only with op_mod 0; CREATE_PSV one PSV at a time.
        0x936 => prm::mbox_in::OP_MOD.get(input).unwrap_or(1) == 0,
        opcode::CREATE_PSV => prm::create_psv::NUM_PSV.get(input).unwrap_or(0) == 1,
        _ => false,
    }
}

/// The destroy command of what `input` created, given its output; `None` for objects this
/// firmware does not make (their create fails first). Also the object's id and type.
fn destroy_cmd(input: &[u8], out: &[u8]) -> Option<(Vec<u8>, u32, u16)> {
    let get = |f: prm::Field, b: &[u8]| f.get(b).ok().map(|v| v as u32);
    match prm::mbox_in::OPCODE.get(input).ok()? as u16 {
        opcode::CREATE_MKEY => {
            let index = get(prm::create_mkey::OUT_MKEY_INDEX, out)?;
            Some((named_input(opcode::DESTROY_MKEY, prm::destroy_mkey::MKEY_INDEX, index), index, 0))
        }
        opcode::ALLOC_PD => {
            let pdn = get(prm::pd::PD, out)?;
            Some((named_input(opcode::DEALLOC_PD, prm::pd::PD, pdn), pdn, 0))
        }
        opcode::CREATE_PSV => {
            let n = get(prm::create_psv::OUT_PSV_INDEX[0], out)?;
            Some((named_input(opcode::DESTROY_PSV, prm::destroy_psv::PSVN, n), n, 0))
        }
        op @ (opcode::CREATE_CQ | opcode::CREATE_QP) => {
            let n = get(prm::queues::qp::QPN, out)?;
            let destroy = if op == opcode::CREATE_CQ { opcode::DESTROY_CQ } else { opcode::DESTROY_QP };
            Some((cq_or_qp_input(destroy, n), n, 0))
        }
        opcode::CREATE_GENERAL_OBJECT => {
            let ty = prm::general_obj_in::OBJ_TYPE.get(input).ok()? as u16;
            let id = get(prm::general_obj_out::OBJ_ID, out)?;
            let mut d = prm::new_input(prm::general_obj_in::SIZE, opcode::DESTROY_GENERAL_OBJECT, 0, 0);
            prm::general_obj_in::OBJ_TYPE.set(&mut d, u64::from(ty)).ok()?;
            prm::general_obj_in::OBJ_ID.set(&mut d, u64::from(id)).ok()?;
            Some((d, id, ty))
        }
        _ => None,
    }
}

/// `devx_is_general_cmd`: the queries the kernel lets `mlx5dv_devx_general_cmd` run.
const GENERAL_CMDS: [u16; 11] = [0x100, 0x101, 0x10a, 0x750, 0x754, 0x760, 0x762, 0x764, 0x765, 0x770, 0x773];

fn check_lens(op: Op, input: &[u8], out_len: usize) -> Result<()> {
    // The ioctl's attributes have the command headers as their minimum size.
    if input.len() < prm::mbox_in::SIZE || out_len < prm::mbox_out::SIZE {
        return Err(Error::new(op, EINVAL, "in and out must hold at least the 16-byte command headers"));
    }
    if out_len > 1 << 20 {
        return Err(Error::new(op, EINVAL, format!("an output of {out_len} bytes is beyond any command's")));
    }
    Ok(())
}

impl Provider {
    fn devx_path(&self, ctx: ContextHandle, op: Op) -> Result<(Path, usize)> {
        let c = self.contexts.get(ctx, op)?;
        match c.kind {
            CtxKind::Kernel { devx, .. } => Ok((Path::Kernel(devx), c.dev)),
            CtxKind::Vfio => Ok((Path::Vfio, c.dev)),
            CtxKind::Other => Err(Error::new(op, EOPNOTSUPP, "not an mlx5 context")),
        }
    }

    /// Run `input` on the context's firmware; EREMOTEIO (with the status) on a bad status.
    fn run_cmd(low: &mut Lower<'_>, path: Path, dev: usize, input: &[u8], out_len: usize, op: Op) -> Result<Vec<u8>> {
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut input = input.to_vec();
        let mut out = vec![0u8; out_len];
        let r = match path {
            Path::Kernel(uid) => kernel::devx_cmd(d, uid, &mut input, &mut out),
            Path::Vfio => vfio::cmd_do(d, &input, &mut out),
        };
        low.write_eqes();
        match r {
            Ok(()) => Ok(out),
            Err(errno) => Err(kernel::cmd_error(
                op,
                errno,
                &out,
                opcode::name(prm::mbox_in::OPCODE.get(&input).unwrap_or(0) as u16),
            )),
        }
    }

    /// `mlx5dv_devx_general_cmd`.
    pub(crate) fn devx_general_cmd(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        input: &[u8],
        out_len: usize,
    ) -> Result<Vec<u8>> {
        let op = Op::DevxGeneralCmd;
        let (path, dev) = self.devx_path(ctx, op)?;
        check_lens(op, input, out_len)?;
        if let Path::Kernel(DevxUid::Uid(_)) = path {
            let code = prm::mbox_in::OPCODE.get(input).unwrap_or(0) as u16;
            if !GENERAL_CMDS.contains(&code) {
                let why =
                    format!("{} (0x{code:x}) is not a general command the kernel lets through", opcode::name(code));
                return Err(Error::new(op, EINVAL, why));
            }
        }
        Self::run_cmd(low, path, dev, input, out_len, op)
    }

    /// `mlx5dv_devx_obj_create`.
    pub(crate) fn devx_obj_create(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        input: &[u8],
        out_len: usize,
    ) -> Result<DevxObj> {
        let op = Op::DevxObjCreate;
        let (path, dev) = self.devx_path(ctx, op)?;
        check_lens(op, input, out_len)?;
        if !is_obj_create_cmd(input) {
            return Err(Error::new(op, EINVAL, "the command does not create an object"));
        }
        if let Path::Kernel(DevxUid::None { .. }) = path {
            return Err(Error::new(op, EINVAL, "the context has no DEVX uid"));
        }
        let out = Self::run_cmd(low, path, dev, input, out_len, op)?;
        let Some((destroy, obj_id, obj_type)) = destroy_cmd(input, &out) else {
            return Err(Error::new(op, EINVAL, "the output does not name the object made"));
        };
        let create_opcode = prm::mbox_in::OPCODE.get(input).unwrap_or(0) as u16;
        let kernel = matches!(path, Path::Kernel(_));
        let rec = ObjRec { ctx, dev, kernel, create_opcode, obj_id, obj_type, destroy };
        let handle = self.devx.objs.insert(op, rec)?;
        Ok(DevxObj { handle, out })
    }

    /// `mlx5dv_devx_obj_query` / `_modify`: on a kernel context the command must be a query
    /// (or modify) of this very object.
    pub(crate) fn devx_obj_cmd(
        &mut self,
        low: &mut Lower<'_>,
        obj: DevxObjHandle,
        input: &[u8],
        out_len: usize,
        modify: bool,
    ) -> Result<Vec<u8>> {
        let op = if modify { Op::DevxObjModify } else { Op::DevxObjQuery };
        let o = self.devx.objs.get(obj, op)?.clone();
        let (path, _) = self.devx_path(o.ctx, op)?;
        check_lens(op, input, out_len)?;
        if o.kernel && !names_object(&o, input, modify) {
            return Err(Error::new(op, EINVAL, "the command is not a query or modify of this object"));
        }
        Self::run_cmd(low, path, o.dev, input, out_len, op)
    }

    /// `mlx5dv_devx_obj_destroy`: the destroy command, its status mapped to an errno.
    pub(crate) fn devx_obj_destroy(&mut self, low: &mut Lower<'_>, obj: DevxObjHandle) -> Result<()> {
        let op = Op::DevxObjDestroy;
        let o = self.devx.objs.get(obj, op)?.clone();
        let d = low.devices.get_mut(o.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut out = [0u8; 16];
        if let Err(errno) = kernel::kernel_cmd(d, &o.destroy, &mut out) {
            return Err(kernel::cmd_error(op, errno, &out, "the destroy command"));
        }
        self.devx.objs.take(obj, op)?;
        Ok(())
    }

    /// `mlx5dv_init_obj(MLX5DV_OBJ_PD)`.
    pub(crate) fn pd_number(&self, pd: mlx5_dv::PdHandle) -> Result<u32> {
        let op = Op::InitObj;
        self.pds.get(pd, op)?.pdn.ok_or_else(|| Error::new(op, EOPNOTSUPP, "not an mlx5 PD"))
    }

    /// `mlx5dv_devx_query_eqn`: on VFIO only vector 0, the driver's async EQ; on a kernel
    /// context the kernel's EQ of a completion vector.
    pub(crate) fn devx_query_eqn(&mut self, low: &mut Lower<'_>, ctx: ContextHandle, vector: u32) -> Result<u32> {
        let op = Op::DevxQueryEqn;
        match self.devx_path(ctx, op)? {
            (Path::Vfio, _) => {
                if vector != 0 {
                    return Err(Error::new(op, EINVAL, "a VFIO context answers only vector 0"));
                }
                self.devx.vfio.async_eqn(ctx, op)
            }
            (Path::Kernel(_), dev) => {
                let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
                low.kernel.comp_eqn(d, dev, low.host, vector, self.num_comp_vectors)
            }
        }
    }

    /// `mlx5dv_devx_alloc_uar`.
    pub(crate) fn devx_alloc_uar(&mut self, low: &mut Lower<'_>, ctx: ContextHandle, flags: u32) -> Result<DevxUar> {
        use mlx5_dv::{MLX5DV_UAR_ALLOC_TYPE_NC, MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED};
        let op = Op::DevxAllocUar;
        let (path, dev) = self.devx_path(ctx, op)?;
        let (page, dedicated) = match path {
            Path::Vfio => {
                if flags != MLX5DV_UAR_ALLOC_TYPE_NC {
                    return Err(Error::new(op, EOPNOTSUPP, "a VFIO context has only its NC UAR"));
                }
                (self.devx.vfio.eqs_uar(ctx, op)?, false)
            }
            Path::Kernel(_) => {
                if flags & !(MLX5DV_UAR_ALLOC_TYPE_NC | MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED) != 0 {
                    return Err(Error::new(op, EOPNOTSUPP, format!("unknown UAR flags 0x{flags:x}")));
                }
                let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
                let mut out = [0u8; 16];
                let input = prm::new_input(16, opcode::ALLOC_UAR, 0, 0);
                if let Err(errno) = kernel::kernel_cmd(d, &input, &mut out) {
                    return Err(kernel::cmd_error(op, errno, &out, "ALLOC_UAR"));
                }
                (e::uar::UAR.get(&out).unwrap_or(0) as u32, true)
            }
        };
        let handle = self.devx.uars.insert(op, UarRec { ctx, dev, page, dedicated })?;
        Ok(DevxUar { handle, page_id: page, reg_offset: uar_offset::BF })
    }

    /// `mlx5dv_devx_free_uar`.
    pub(crate) fn devx_free_uar(&mut self, low: &mut Lower<'_>, uar: &DevxUar) -> Result<()> {
        let op = Op::DevxFreeUar;
        let u = self.devx.uars.take(uar.handle, op)?;
        if let (true, Some(d)) = (u.dedicated, low.devices.get_mut(u.dev)) {
            let mut out = [0u8; 16];
            let _ = kernel::kernel_cmd(d, &named_input(opcode::DEALLOC_UAR, e::uar::UAR, u.page), &mut out);
        }
        Ok(())
    }

    /// A store into a UAR page: EQ doorbells (arm and update); other registers are not
    /// modelled and are ignored, as a store to an unused register is.
    pub(crate) fn devx_uar_write(
        &mut self,
        low: &mut Lower<'_>,
        uar: &DevxUar,
        offset: u32,
        value: &[u8],
    ) -> Result<()> {
        let op = Op::DevxUarWrite;
        let u = self.devx.uars.get(uar.handle, op)?.clone();
        let ok_len = matches!(value.len(), 4 | 8);
        if !ok_len || !offset.is_multiple_of(value.len() as u32) || offset > 4096 - value.len() as u32 {
            return Err(Error::new(op, EINVAL, "a UAR store is 4 or 8 aligned bytes inside the 4 KiB page"));
        }
        let word = |i: usize| u32::from_be_bytes([value[i], value[i + 1], value[i + 2], value[i + 3]]);
        let Some(d) = low.devices.get_mut(u.dev) else { return Ok(()) };
        match (offset, value.len()) {
            (uar_offset::EQ_ARM | uar_offset::EQ_UPDATE, _) => {
                d.eq_doorbell(u.page, word(0), offset == uar_offset::EQ_ARM)
            }
            (uar_offset::CQ_DOORBELL, 8) => d.cq_doorbell(word(0), word(4)),
            // The first 8 bytes of the WQE's control segment: opmod_idx_opcode, qpn_ds.
            (uar_offset::BF, 8) => {
                let qpn = word(4) >> 8;
                d.ring_rq_all(low.host);
                d.ring_sq(low.host, qpn);
                low.run();
            }
            _ => {}
        }
        low.write_eqes();
        Ok(())
    }

    /// `mlx5dv_devx_umem_reg`: the range must lie in one buffer; CREATE_UMEM with one MTT
    /// entry per 4 KiB page.
    pub(crate) fn devx_umem_reg(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        addr: u64,
        size: u64,
        access: AccessFlags,
    ) -> Result<DevxUmem> {
        let op = Op::DevxUmemReg;
        let (path, dev) = self.devx_path(ctx, op)?;
        let supported = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
        match path {
            Path::Vfio if !supported.contains(access) => {
                return Err(Error::new(op, EOPNOTSUPP, "VFIO umems take LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ"));
            }
            _ if access.contains(AccessFlags::REMOTE_WRITE) && !access.contains(AccessFlags::LOCAL_WRITE) => {
                return Err(Error::new(op, EINVAL, "REMOTE_WRITE needs LOCAL_WRITE"));
            }
            _ => {}
        }
        let buf = self.buf_covering(addr, size, op)?;
        let first = addr & !0xfff;
        let end = addr.checked_add(size).and_then(|e| e.checked_add(0xfff)).map(|e| e & !0xfff);
        let pages = end.map(|e| (e - first) >> 12).filter(|p| *p > 0 && *p <= 1 << 18);
        let Some(pages) = pages else {
            return Err(Error::new(op, EINVAL, format!("a umem of {size} bytes")));
        };
        let mut input = prm::new_input(e::umem::IN_SIZE + 8 * pages as usize, opcode::CREATE_UMEM, 0, 0);
        let fields = [(e::umem::NUM_OF_MTT, pages), (e::umem::LOG_PAGE_SIZE, 0), (e::umem::PAGE_OFFSET, addr & 0xfff)];
        for (f, v) in fields {
            f.set(&mut input, v).map_err(|x| kernel::internal(op, x))?;
        }
        for p in 0..pages {
            let at = e::umem::MTT_BYTE + 8 * p as usize;
            input[at..at + 8].copy_from_slice(&((first + (p << 12)) | 0b11).to_be_bytes());
        }
        let uid = match path {
            Path::Kernel(DevxUid::Uid(u)) => u,
            _ => 0,
        };
        prm::mbox_in::UID.set(&mut input, u64::from(uid)).map_err(|x| kernel::internal(op, x))?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut out = [0u8; 16];
        if let Err(errno) = kernel::kernel_cmd(d, &input, &mut out) {
            return Err(kernel::cmd_error(op, errno, &out, "CREATE_UMEM"));
        }
        let id = e::umem::UMEM_ID.get(&out).unwrap_or(0) as u32;
        let handle = self.devx.umems.insert(op, UmemRec { ctx, dev, id, buf })?;
        self.bufs.acquire(buf, op)?;
        Ok(DevxUmem { handle, umem_id: id })
    }

    /// `mlx5dv_devx_umem_dereg`.
    pub(crate) fn devx_umem_dereg(&mut self, low: &mut Lower<'_>, umem: &DevxUmem) -> Result<()> {
        let op = Op::DevxUmemDereg;
        let u = self.devx.umems.get(umem.handle, op)?.clone();
        let d = low.devices.get_mut(u.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut out = [0u8; 16];
        if let Err(errno) = kernel::kernel_cmd(d, &named_input(opcode::DESTROY_UMEM, e::umem::UMEM_ID, u.id), &mut out)
        {
            return Err(kernel::cmd_error(op, errno, &out, "DESTROY_UMEM"));
        }
        self.devx.umems.take(umem.handle, op)?;
        self.bufs.release(u.buf);
        Ok(())
    }

    /// Forget a closed context's DEVX objects, UARs and umems, destroying them in firmware.
    pub(super) fn close_devx_of(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        let op = Op::CloseDevice;
        for h in self.devx.objs.handles_where(|o| o.ctx == ctx) {
            let _ = self.devx_obj_destroy(low, h);
            let _ = self.devx.objs.take(h, op);
        }
        for h in self.devx.umems.handles_where(|u| u.ctx == ctx) {
            if let Ok(u) = self.devx.umems.get(h, op).cloned() {
                let _ = self.devx_umem_dereg(low, &DevxUmem { handle: h, umem_id: u.id });
            }
            let _ = self.devx.umems.take(h, op);
        }
        for h in self.devx.uars.handles_where(|u| u.ctx == ctx) {
            let page = self.devx.uars.get(h, op).map_or(0, |u| u.page);
            let _ = self.devx_free_uar(low, &DevxUar { handle: h, page_id: page, reg_offset: uar_offset::BF });
        }
        self.close_vfio_of(low, ctx);
    }

    /// The buffer holding `[addr, addr + len)`.
    fn buf_covering(&self, addr: u64, len: u64, op: Op) -> Result<mlx5_dv::BufHandle> {
        let inside =
            |b: &super::BufObj| addr >= b.addr && addr.checked_add(len).is_some_and(|e| e <= b.addr + b.len as u64);
        self.bufs
            .handles_where(inside)
            .into_iter()
            .next()
            .ok_or_else(|| Error::new(op, EINVAL, format!("{len} bytes at 0x{addr:x} are not inside one buffer")))
    }

    /// A buffer of host memory the driver allocates (an EQ ring): held, so the application
    /// cannot free it.
    fn driver_buf(&mut self, low: &mut Lower<'_>, len: usize, op: Op) -> Result<Buf> {
        let b = self.alloc_buf(low, len).map_err(|e| Error::new(op, e.errno(), e.reason().to_string()))?;
        self.bufs.acquire(b.handle, op)?;
        Ok(b)
    }

    /// Free a driver buffer.
    fn free_driver_buf(&mut self, low: &mut Lower<'_>, buf: &Buf) {
        self.bufs.release(buf.handle);
        let _ = self.free_buf(low, buf);
    }
}

/// The kernel's `devx_is_valid_obj_id` for the objects this firmware makes: a query or
/// modify command of the object's kind that names its id.
fn names_object(o: &ObjRec, input: &[u8], modify: bool) -> bool {
    let code = prm::mbox_in::OPCODE.get(input).unwrap_or(0) as u16;
    match o.create_opcode {
        opcode::CREATE_GENERAL_OBJECT => {
            let want = if modify { opcode::MODIFY_GENERAL_OBJECT } else { opcode::QUERY_GENERAL_OBJECT };
            code == want
                && prm::general_obj_in::OBJ_TYPE.get(input).ok() == Some(u64::from(o.obj_type))
                && prm::general_obj_in::OBJ_ID.get(input).ok() == Some(u64::from(o.obj_id))
        }
        opcode::CREATE_MKEY => {
            !modify
                && code == opcode::QUERY_MKEY
                && prm::destroy_mkey::MKEY_INDEX.get(input).ok() == Some(u64::from(o.obj_id))
        }
        _ => false,
    }
}
