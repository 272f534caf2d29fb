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

mod gate;
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
    /// Counters of a flow counter bulk (`flow_counter_bulk_size`): a query may name any.
    bulk: u32,
    destroy: Vec<u8>,
}

#[derive(Debug, Clone)]
pub(super) struct UarRec {
    ctx: ContextHandle,
    dev: usize,
    page: u32,
    /// What freeing it does.
    kind: UarKind,
}

/// A UAR page and who owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UarKind {
    /// A page of its own, freed with DEALLOC_UAR.
    Dedicated,
    /// The kernel context's NC page (`mlx5_get_singleton_nc_uar`): every NC allocation
    /// answers it, freeing it does nothing, and it goes with the context.
    Singleton,
    /// The VFIO driver's EQ page: each allocation is its own handle on the shared page.
    Shared,
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
    /// The device and id of the flow counter (or first of the bulk) a DEVX object holds.
    pub(crate) fn flow_counter(&self, h: DevxObjHandle) -> Option<(usize, u32)> {
        let o = self.objs.get(h, Op::DevxObjDestroy).ok()?;
        (o.create_opcode == mlx5_dv::prm::flow_counter::ALLOC).then_some((o.dev, o.obj_id))
    }

    /// The device and number of the TIR a DEVX object holds.
    pub(crate) fn tir(&self, h: DevxObjHandle) -> Option<(usize, u32)> {
        let o = self.objs.get(h, Op::DevxObjDestroy).ok()?;
        (o.create_opcode == mlx5_dv::prm::tir::CREATE).then_some((o.dev, o.obj_id))
    }

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
        prm::queues::srq::CREATE_SRQ => {
            use prm::queues::srq as s;
            let n = get(s::SRQN, out)?;
            Some((named_input(s::DESTROY_SRQ, s::SRQN, n), n, 0))
        }
        prm::tir::CREATE => {
            use prm::tir;
            let n = get(tir::TIRN, out)?;
            Some((named_input(tir::DESTROY, tir::TIRN, n), n, 0))
        }
        prm::flow_counter::ALLOC => {
            use prm::flow_counter as fc;
            let id = get(fc::ID, out)?;
            Some((named_input(fc::DEALLOC, fc::ID, id), id, 0))
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

/// The largest attribute the ioctl carries: libibverbs refuses a longer mailbox with EINVAL
/// before the call (`fill_attr_in`, `fill_attr_out`, `execute_ioctl`).
const MAX_ATTR_LEN: usize = u16::MAX as usize;

/// The largest output mailbox the simulator allocates for a VFIO context (its own limit:
/// the VFIO provider has none).
const VFIO_MAX_OUT: usize = 1 << 20;

/// The mailbox lengths a DEVX method takes. On a kernel context both attributes are at least
/// the 16-byte command headers (the methods' minimum sizes) and at most 65535 bytes; on a
/// VFIO context the simulator asks for the headers and at most [`VFIO_MAX_OUT`] output bytes.
fn check_lens(op: Op, path: Path, input: &[u8], out_len: usize) -> Result<()> {
    let max_out = match path {
        Path::Kernel(_) => {
            if input.len() > MAX_ATTR_LEN || out_len > MAX_ATTR_LEN {
                let why = format!("an ioctl attribute of {} bytes is beyond 65535", input.len().max(out_len));
                return Err(Error::new(op, EINVAL, why));
            }
            MAX_ATTR_LEN
        }
        Path::Vfio => VFIO_MAX_OUT,
    };
    if input.len() < prm::mbox_in::SIZE || out_len < prm::mbox_out::SIZE {
        return Err(Error::new(op, EINVAL, "in and out must hold at least the 16-byte command headers"));
    }
    if out_len > max_out {
        return Err(Error::new(
            op,
            EINVAL,
            format!("an output of {out_len} bytes is beyond the simulator's {max_out}"),
        ));
    }
    Ok(())
}

/// The uid a kernel context's command runs under (`devx_get_uid`), or the errno.
fn kernel_uid(op: Op, uid: DevxUid, input: &[u8]) -> Result<u16> {
    kernel::devx_uid(uid, input).map_err(|e| {
        let why = match e {
            EOPNOTSUPP => "the device has no whitelist uid for a context without DEVX",
            _ => "the context has no DEVX uid, and the command is not on the kernel's whitelist",
        };
        Error::new(op, e, why)
    })
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

    /// Run `input` on the context's firmware (the kernel writing the uid in); EREMOTEIO
    /// (with the status) on a bad status. A change of the port's state the command made
    /// reaches EQs and kernel contexts.
    fn run_cmd(low: &mut Lower<'_>, path: Path, dev: usize, input: &[u8], out_len: usize, op: Op) -> Result<Vec<u8>> {
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut input = input.to_vec();
        let mut out = vec![0u8; out_len];
        let r = match path {
            Path::Kernel(uid) => kernel::devx_cmd(d, uid, &mut input, &mut out),
            Path::Vfio => vfio::cmd_do(d, &input, &mut out),
        };
        port_changes(low, dev);
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

    /// `mlx5dv_devx_general_cmd`: on a kernel context the uid gate, then the kernel's list
    /// of general commands.
    pub(crate) fn devx_general_cmd(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        input: &[u8],
        out_len: usize,
    ) -> Result<Vec<u8>> {
        let op = Op::DevxGeneralCmd;
        let (path, dev) = self.devx_path(ctx, op)?;
        check_lens(op, path, input, out_len)?;
        if let Path::Kernel(uid) = path {
            kernel_uid(op, uid, input)?;
            if !gate::is_general_cmd(input) {
                let code = prm::mbox_in::OPCODE.get(input).unwrap_or(0) as u16;
                let why =
                    format!("{} (0x{code:x}) is not a general command the kernel lets through", opcode::name(code));
                return Err(Error::new(op, EINVAL, why));
            }
        }
        Self::run_cmd(low, path, dev, input, out_len, op)
    }

    /// `mlx5dv_devx_obj_create`: on a kernel context in the order of `MLX5_IB_METHOD_DEVX_OBJ_CREATE`
    /// (no `vhca_tunnel_id`, the uid, a create command, an mkey context long enough to read)
    /// with the `*_umem_valid` bits forced; on a VFIO context a create command as given.
    pub(crate) fn devx_obj_create(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        input: &[u8],
        out_len: usize,
    ) -> Result<DevxObj> {
        let op = Op::DevxObjCreate;
        let (path, dev) = self.devx_path(ctx, op)?;
        check_lens(op, path, input, out_len)?;
        let mut input = input.to_vec();
        if let Path::Kernel(uid) = path {
            if gate::has_tunnel_id(&input) {
                return Err(Error::new(op, EINVAL, "a vhca_tunnel_id the kernel does not take"));
            }
            kernel_uid(op, uid, &input)?;
        }
        if !gate::is_obj_create_cmd(&input) {
            return Err(Error::new(op, EINVAL, "the command does not create an object"));
        }
        let code = prm::mbox_in::OPCODE.get(&input).unwrap_or(0) as u16;
        if let Path::Kernel(_) = path {
            if code == opcode::CREATE_MKEY && input.len() < gate::MKEY_MIN_IN {
                return Err(Error::new(op, EINVAL, "a CREATE_MKEY input without its whole mkey context"));
            }
            gate::force_umem_valid(&mut input);
        }
        let out = Self::run_cmd(low, path, dev, &input, out_len, op)?;
        let Some((mut destroy, obj_id, obj_type)) = destroy_cmd(&input, &out) else {
            return Err(Error::new(op, EINVAL, "the output does not name the object made"));
        };
        // The kernel destroys an object under the uid that made it (`devx_obj_build_destroy_cmd_in`).
        let uid = match path {
            Path::Kernel(DevxUid::Uid(u)) => u,
            _ => 0,
        };
        prm::mbox_in::UID.set(&mut destroy, u64::from(uid)).map_err(|x| kernel::internal(op, x))?;
        let kernel = matches!(path, Path::Kernel(_));
        let bulk = gate::flow_counter_bulk(&input);
        let rec = ObjRec { ctx, dev, kernel, create_opcode: code, obj_id, obj_type, bulk, destroy };
        let handle = self.devx.objs.insert(op, rec)?;
        Ok(DevxObj { handle, out })
    }

    /// `mlx5dv_devx_obj_query` / `_modify`: on a kernel context (`MLX5_IB_METHOD_DEVX_OBJ_QUERY`
    /// / `_MODIFY`) no `vhca_tunnel_id`, the uid, a query (modify) command, and one that names
    /// this very object (`devx_is_valid_obj_id`); a modify gets the forced umem bits.
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
        check_lens(op, path, input, out_len)?;
        let mut input = input.to_vec();
        if let (true, Path::Kernel(uid)) = (o.kernel, path) {
            if gate::has_tunnel_id(&input) {
                return Err(Error::new(op, EINVAL, "a vhca_tunnel_id the kernel does not take"));
            }
            kernel_uid(op, uid, &input)?;
            let kind_ok = if modify { gate::is_obj_modify_cmd(&input) } else { gate::is_obj_query_cmd(&input) };
            if !kind_ok {
                let what = if modify { "a modify" } else { "a query" };
                return Err(Error::new(op, EINVAL, format!("the command is not {what} command")));
            }
            let this = gate::ObjId { create: o.create_opcode, obj_type: o.obj_type, id: o.obj_id };
            if !gate::names(&input, this, o.bulk) {
                return Err(Error::new(op, EINVAL, "the command names another object"));
            }
            if modify {
                gate::force_umem_valid(&mut input);
            }
        }
        Self::run_cmd(low, path, o.dev, &input, out_len, op)
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

    /// `mlx5dv_devx_alloc_uar`. A kernel context answers `MLX5DV_UAR_ALLOC_TYPE_NC` with its
    /// one NC page (the same UAR every time) and gives any other allowed type a page of its
    /// own; `NC_DEDICATED` (rdma-core 45) is an NC page of its own. A VFIO context has only
    /// its driver's EQ page, for NC.
    pub(crate) fn devx_alloc_uar(&mut self, low: &mut Lower<'_>, ctx: ContextHandle, flags: u32) -> Result<DevxUar> {
        use mlx5_dv::{MLX5DV_UAR_ALLOC_TYPE_NC as NC, MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED as NC_DEDICATED};
        let op = Op::DevxAllocUar;
        let (path, dev) = self.devx_path(ctx, op)?;
        let (page, kind) = match path {
            Path::Vfio => {
                if flags != NC {
                    return Err(Error::new(op, EOPNOTSUPP, "a VFIO context has only its NC UAR"));
                }
                (self.devx.vfio.eqs_uar(ctx, op)?, UarKind::Shared)
            }
            Path::Kernel(_) => {
                let known = if self.limits.rdma_core_release >= 45 { NC | NC_DEDICATED } else { NC };
                if flags & !known != 0 {
                    return Err(Error::new(
                        op,
                        EOPNOTSUPP,
                        format!("UAR flags 0x{flags:x} this libmlx5 does not know"),
                    ));
                }
                if flags & NC != 0 {
                    let singleton = self.devx.uars.handles_where(|u| u.ctx == ctx && u.kind == UarKind::Singleton);
                    if let Some(h) = singleton.into_iter().next() {
                        let page = self.devx.uars.get(h, op)?.page;
                        return Ok(DevxUar { handle: h, page_id: page, reg_offset: uar_offset::BF });
                    }
                }
                let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
                let mut out = [0u8; 16];
                let input = prm::new_input(16, opcode::ALLOC_UAR, 0, 0);
                if let Err(errno) = kernel::kernel_cmd(d, &input, &mut out) {
                    return Err(kernel::cmd_error(op, errno, &out, "ALLOC_UAR"));
                }
                let kind = if flags & NC != 0 { UarKind::Singleton } else { UarKind::Dedicated };
                (e::uar::UAR.get(&out).unwrap_or(0) as u32, kind)
            }
        };
        let handle = self.devx.uars.insert(op, UarRec { ctx, dev, page, kind })?;
        Ok(DevxUar { handle, page_id: page, reg_offset: uar_offset::BF })
    }

    /// `mlx5dv_devx_free_uar`: nothing for the context's NC page, which lives as long as the
    /// context.
    pub(crate) fn devx_free_uar(&mut self, low: &mut Lower<'_>, uar: &DevxUar) -> Result<()> {
        let op = Op::DevxFreeUar;
        if self.devx.uars.get(uar.handle, op)?.kind == UarKind::Singleton {
            return Ok(());
        }
        let u = self.devx.uars.take(uar.handle, op)?;
        if u.kind == UarKind::Dedicated {
            dealloc_uar(low, u.dev, u.page);
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
            (uar_offset::CQ_DOORBELL, 8) => d.cq_doorbell(low.host, word(0), word(4)),
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
            Path::Kernel(DevxUid::None { .. }) => {
                return Err(Error::new(op, EINVAL, "the context has no DEVX uid"));
            }
            // MLX5_IB_METHOD_DEVX_UMEM_REG: uverbs_get_flags32 with these bits allowed.
            Path::Kernel(_) if !(supported | AccessFlags::RELAXED_ORDERING).contains(access) => {
                let why = format!(
                    "access 0x{:x} outside LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|RELAXED_ORDERING",
                    access.bits()
                );
                return Err(Error::new(op, EINVAL, why));
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
            if let Ok(u) = self.devx.uars.take(h, op)
                && u.kind != UarKind::Shared
            {
                dealloc_uar(low, u.dev, u.page);
            }
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

/// DEALLOC_UAR as the kernel issues it; a failure is not reported (as on a real close).
fn dealloc_uar(low: &mut Lower<'_>, dev: usize, page: u32) {
    if let Some(d) = low.devices.get_mut(dev) {
        let mut out = [0u8; 16];
        let _ = kernel::kernel_cmd(d, &named_input(opcode::DEALLOC_UAR, e::uar::UAR, page), &mut out);
    }
}

/// Apply the port state changes device `dev` made (a cable through [`mlx5_dv::SimControl`],
/// an ACCESS_REG of PAOS): the EQEs are written and every kernel context on the device gets
/// `IBV_EVENT_PORT_ACTIVE` or `IBV_EVENT_PORT_ERR`.
pub(super) fn port_changes(low: &mut Lower<'_>, dev: usize) {
    use mlx5_dv::event_type;
    let changes = low.devices.get_mut(dev).map(crate::device::Device::take_port_changes).unwrap_or_default();
    low.write_eqes();
    for up in changes {
        low.kernel.port_event(dev, if up { event_type::PORT_ACTIVE } else { event_type::PORT_ERR });
    }
}
