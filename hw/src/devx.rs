//! The [`Devx`] family over libmlx5: DEVX commands and objects, `mlx5dv_devx_query_eqn`,
//! UARs and their doorbells, umems, and the VFIO provider's MSI vectors and EQs.
//!
//! Handles are resolved before any C call. Both mailboxes handed to libmlx5 are at least
//! [`MBOX_MIN`] bytes long (the lengths passed are the caller's), because libmlx5 reads
//! header fields of both (opcode, status, object ids) without checking the lengths.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{Ordering, fence};

use mlx5_dv::errno::{EAGAIN, EBADF, EINVAL, EIO, ENOMEM, EREMOTEIO};
use mlx5_dv::prm::eq::{create_eq, eqe};
use mlx5_dv::{
    AccessFlags, Buf, CmdStatus, ContextHandle, Devx, DevxEq, DevxObj, DevxObjHandle, DevxUar, DevxUmem, Error,
    MsiVector, Op, Result,
};

use crate::OptionalFn;
use crate::backend::HwBackend;
use crate::call::{last_errno, missing};
use crate::objects::{HwBuf, HwDevxObj, HwEq, HwMsi, HwUar, HwUmem, Obj, unused};

/// The smallest mailbox libmlx5 is given: its header reads stay below byte 0x40.
const MBOX_MIN: usize = 64;
/// The UAR page the doorbell stores must stay in.
const UAR_PAGE: usize = 4096;
/// The smallest EQ ring libmlx5 allocates (`MLX5_ADAPTER_PAGE_SIZE`).
const RING_MIN: u64 = 4096;
/// The rdma-core release of MSI vectors and EQs (`MLX5_1.23`).
const VFIO_SINCE: &str = "40";

/// A function of the rdma-core 44 bindings, or EOPNOTSUPP.
macro_rules! dv_fn {
    ($self:ident, $op:expr, $name:ident) => {
        *$self.lib().dv.$name.as_ref().map_err(|_| missing($op, stringify!($name)))?
    };
}

/// A function of rdma-core 40, or EOPNOTSUPP naming that release.
macro_rules! vfio_fn {
    ($self:ident, $op:expr, $name:ident) => {
        OptionalFn::bound(stringify!($name), VFIO_SINCE, &$self.lib().dv.$name)
            .get($op, $self.lib().rdma_core_version())?
    };
}

/// `out[0]` and the big-endian `out[4..8]`; zero where the mailbox is shorter.
fn cmd_status(out: &[u8]) -> CmdStatus {
    let status = out.first().copied().unwrap_or(0);
    let syndrome = out.get(4..8).and_then(|s| <[u8; 4]>::try_from(s).ok()).map_or(0, u32::from_be_bytes);
    CmdStatus { status, syndrome }
}

/// A failed command: EREMOTEIO carries the output mailbox's status and syndrome.
fn cmd_error(op: Op, errno: i32, out: &[u8]) -> Error {
    let e = Error::new(op, errno, format!("{} failed", op.c_name()));
    if errno == EREMOTEIO { e.with_cmd_status(cmd_status(out)) } else { e }
}

/// The errno of a C return code: positive is the errno, negative left it in `errno`.
fn rc_errno(rc: c_int) -> Option<i32> {
    match rc {
        0 => None,
        e if e > 0 => Some(e),
        _ => Some(last_errno()),
    }
}

/// `len` zero bytes, at least [`MBOX_MIN`]; ENOMEM rather than an abort for a huge length.
fn zeroed(op: Op, len: usize) -> Result<Vec<u8>> {
    let n = len.max(MBOX_MIN);
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::new(op, ENOMEM, format!("cannot allocate a {len}-byte mailbox")))?;
    v.resize(n, 0);
    Ok(v)
}

/// Padded copies of the input and a zeroed output for a command.
fn mailboxes(op: Op, input: &[u8], out_len: usize) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut inb = zeroed(op, input.len())?;
    inb[..input.len()].copy_from_slice(input);
    Ok((inb, zeroed(op, out_len)?))
}

/// Run `call(in, inlen, out, outlen)` (a C command returning an errno) on padded mailboxes.
fn command(
    op: Op,
    input: &[u8],
    out_len: usize,
    call: impl FnOnce(*const c_void, usize, *mut c_void, usize) -> c_int,
) -> Result<Vec<u8>> {
    let (inb, mut out) = mailboxes(op, input, out_len)?;
    let rc = call(inb.as_ptr().cast(), input.len(), out.as_mut_ptr().cast(), out_len);
    out.truncate(out_len);
    match rc_errno(rc) {
        None => Ok(out),
        Some(e) => Err(cmd_error(op, e, &out)),
    }
}

/// The bytes libmlx5 allocates for an EQ of `create_eq_in`'s `log_eq_size`:
/// `max(roundup_pow_of_two(2^log_eq_size * 64), 4096)`.
fn ring_size(op: Op, input: &[u8]) -> Result<usize> {
    let log = create_eq::LOG_EQ_SIZE.get(input).map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
    let bytes = u32::try_from(log)
        .ok()
        .and_then(|l| 2u64.checked_pow(l))
        .and_then(|n| n.checked_mul(eqe::SIZE as u64))
        .and_then(u64::checked_next_power_of_two)
        .map(|n| n.max(RING_MIN));
    bytes
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| Error::new(op, EINVAL, format!("an EQ of 2^{log} entries does not fit memory")))
}

/// The checked byte offset of a 4- or 8-byte doorbell store into a UAR page.
fn uar_offset(op: Op, offset: u32, len: usize) -> Result<usize> {
    if len != 4 && len != 8 {
        return Err(Error::new(op, EINVAL, format!("a UAR store is 4 or 8 bytes, not {len}")));
    }
    let off = usize::try_from(offset).map_err(|_| Error::new(op, EINVAL, "offset does not fit usize"))?;
    if off.checked_add(len).is_none_or(|end| end > UAR_PAGE) {
        return Err(Error::new(op, EINVAL, format!("{len} bytes at 0x{off:x} pass the {UAR_PAGE}-byte UAR page")));
    }
    // MMIO stores are naturally aligned; a misaligned one is undefined behaviour here.
    if off % len != 0 {
        return Err(Error::new(op, EINVAL, format!("offset 0x{off:x} is not aligned to {len} bytes")));
    }
    Ok(off)
}

impl HwBackend {
    /// Destroy one DEVX-family object of a closing context; it leaves the table even if C fails.
    pub(crate) fn release_devx(&mut self, obj: Obj) {
        let op = Op::CloseDevice;
        let dv = &self.lib().dv;
        let destroy_obj = dv.mlx5dv_devx_obj_destroy.as_ref().ok().copied();
        let dereg = dv.mlx5dv_devx_umem_dereg.as_ref().ok().copied();
        let destroy_eq = dv.mlx5dv_devx_destroy_eq.as_ref().ok().copied();
        let free_uar = dv.mlx5dv_devx_free_uar.as_ref().ok().copied();
        let free_msi = dv.mlx5dv_devx_free_msi_vector.as_ref().ok().copied();
        match obj {
            Obj::Devx(h) => {
                if let (Ok(o), Some(f)) = (self.objs.devx_objs.take(h, op), destroy_obj) {
                    // SAFETY: the object is live and removed from the table first.
                    unsafe { f(o.ptr) };
                }
            }
            Obj::Umem(h) => {
                if let (Ok(u), Some(f)) = (self.objs.take_umem(h, op), dereg) {
                    // SAFETY: the umem is live and removed from the table first.
                    unsafe { f(u.ptr) };
                }
            }
            Obj::Eq(h) => {
                let Ok(e) = self.objs.eqs.take(h, op) else { return };
                // An MR or umem of another context still covering the ring keeps the EQ (and
                // its memory) alive, leaked; otherwise the ring leaves the table with the EQ.
                if self.objs.bufs.users(e.ring, op).is_ok_and(|n| n > 0) {
                    return;
                }
                let _ = self.objs.bufs.take(e.ring, op);
                if let Some(f) = destroy_eq {
                    // SAFETY: the EQ is live and nothing covers its ring.
                    unsafe { f(e.ptr) };
                }
            }
            Obj::Uar(h) => {
                if let (Ok(u), Some(f)) = (self.objs.uars.take(h, op), free_uar) {
                    // SAFETY: the UAR is live and removed from the table first.
                    unsafe { f(u.ptr) };
                }
            }
            Obj::Msi(h) => {
                if let (Ok(m), Some(f)) = (self.objs.msis.take(h, op), free_msi) {
                    // SAFETY: the vector is live and holds libmlx5's own vector and fd.
                    unsafe { f(m.ptr) };
                }
            }
            _ => {}
        }
    }

    /// The buffer of this backend that holds `[addr, addr + size)`.
    fn buf_covering(&self, addr: u64, size: u64, op: Op) -> Result<mlx5_dv::BufHandle> {
        let end = addr.checked_add(size);
        self.objs
            .bufs
            .iter()
            .find(|(_, b)| {
                let start = b.ptr as u64;
                let limit = start.checked_add(b.layout.size() as u64);
                addr >= start && end.zip(limit).is_some_and(|(e, l)| e <= l)
            })
            .map(|(h, _)| h)
            .ok_or_else(|| {
                Error::new(op, EINVAL, format!("[0x{addr:x}, +{size}) is not inside a buffer of this backend"))
            })
    }
}

impl Devx for HwBackend {
    fn devx_general_cmd(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        let op = Op::DevxGeneralCmd;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = dv_fn!(self, op, mlx5dv_devx_general_cmd);
        // SAFETY: ptr is an open context; both mailboxes hold at least the lengths passed.
        command(op, input, out_len, |i, il, o, ol| unsafe { f(ptr, i, il, o, ol) })
    }

    fn devx_obj_create(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxObj> {
        let op = Op::DevxObjCreate;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = dv_fn!(self, op, mlx5dv_devx_obj_create);
        let destroy = self.lib().dv.mlx5dv_devx_obj_destroy.as_ref().ok().copied();
        let (inb, mut out) = mailboxes(op, input, out_len)?;
        // SAFETY: as in devx_general_cmd.
        let obj = unsafe { f(ptr, inb.as_ptr().cast(), input.len(), out.as_mut_ptr().cast(), out_len) };
        let errno = obj.is_null().then(last_errno);
        out.truncate(out_len);
        if let Some(e) = errno {
            return Err(cmd_error(op, e, &out));
        }
        let handle = self.objs.devx_objs.insert(op, HwDevxObj { ptr: obj, ctx }).inspect_err(|_| {
            if let Some(d) = destroy {
                // SAFETY: the object was just created and is in no table.
                unsafe { d(obj) };
            }
        })?;
        Ok(DevxObj { handle, out })
    }

    fn devx_obj_query(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        let op = Op::DevxObjQuery;
        let ptr = self.objs.devx_objs.get(obj, op)?.ptr;
        let f = dv_fn!(self, op, mlx5dv_devx_obj_query);
        // SAFETY: the object is live; both mailboxes hold at least the lengths passed.
        command(op, input, out_len, |i, il, o, ol| unsafe { f(ptr, i, il, o, ol) })
    }

    fn devx_obj_modify(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        let op = Op::DevxObjModify;
        let ptr = self.objs.devx_objs.get(obj, op)?.ptr;
        let f = dv_fn!(self, op, mlx5dv_devx_obj_modify);
        // SAFETY: the object is live; both mailboxes hold at least the lengths passed.
        command(op, input, out_len, |i, il, o, ol| unsafe { f(ptr, i, il, o, ol) })
    }

    fn devx_obj_destroy(&mut self, obj: DevxObjHandle) -> Result<()> {
        let op = Op::DevxObjDestroy;
        let ptr = self.objs.devx_objs.get(obj, op)?.ptr;
        let f = dv_fn!(self, op, mlx5dv_devx_obj_destroy);
        // SAFETY: the object is live; on failure libmlx5 keeps it and so does the table.
        if let Some(e) = rc_errno(unsafe { f(ptr) }) {
            // The destroy mailbox is libmlx5's own: no status is visible.
            return Err(Error::new(op, e, "mlx5dv_devx_obj_destroy failed"));
        }
        self.objs.devx_objs.take(obj, op)?;
        Ok(())
    }

    fn devx_pd_number(&mut self, pd: mlx5_dv::PdHandle) -> Result<u32> {
        self.pd_number(pd)
    }

    fn devx_query_eqn(&mut self, ctx: ContextHandle, vector: u32) -> Result<u32> {
        let op = Op::DevxQueryEqn;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = dv_fn!(self, op, mlx5dv_devx_query_eqn);
        let mut eqn = 0u32;
        // SAFETY: ptr is an open context; eqn is valid for writes.
        match rc_errno(unsafe { f(ptr, vector, &mut eqn) }) {
            None => Ok(eqn),
            Some(e) => Err(Error::new(op, e, format!("mlx5dv_devx_query_eqn({vector}) failed"))),
        }
    }

    fn reserved_qpn_alloc(&mut self, ctx: ContextHandle) -> Result<u32> {
        let op = Op::ReservedQpnAlloc;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = dv_fn!(self, op, mlx5dv_reserved_qpn_alloc);
        let mut qpn = 0u32;
        // SAFETY: ptr is an open context; qpn is valid for writes.
        match rc_errno(unsafe { f(ptr, &mut qpn) }) {
            None => Ok(qpn),
            Some(e) => Err(Error::new(op, e, "mlx5dv_reserved_qpn_alloc failed")),
        }
    }

    fn reserved_qpn_dealloc(&mut self, ctx: ContextHandle, qpn: u32) -> Result<()> {
        let op = Op::ReservedQpnDealloc;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = dv_fn!(self, op, mlx5dv_reserved_qpn_dealloc);
        // SAFETY: ptr is an open context.
        match rc_errno(unsafe { f(ptr, qpn) }) {
            None => Ok(()),
            Some(e) => Err(Error::new(op, e, format!("mlx5dv_reserved_qpn_dealloc(0x{qpn:x}) failed"))),
        }
    }

    // Not forwarded yet: the card's answer needs the rdma-core objects (`struct mlx5dv_pp`,
    // `struct mlx5dv_var`) kept per handle, which this backend does not have.
    fn pp_alloc(&mut self, _ctx: ContextHandle, _pp_context: &[u8], _flags: u32) -> Result<mlx5_dv::PpEntry> {
        Err(Error::new(Op::PpAlloc, mlx5_dv::errno::EOPNOTSUPP, "not forwarded by the hardware backend"))
    }
    fn pp_free(&mut self, _pp: &mlx5_dv::PpEntry) -> Result<()> {
        Err(Error::new(Op::PpFree, mlx5_dv::errno::EOPNOTSUPP, "not forwarded by the hardware backend"))
    }
    fn alloc_var(&mut self, _ctx: ContextHandle, _flags: u32) -> Result<mlx5_dv::Var> {
        Err(Error::new(Op::AllocVar, mlx5_dv::errno::EOPNOTSUPP, "not forwarded by the hardware backend"))
    }
    fn free_var(&mut self, _var: &mlx5_dv::Var) -> Result<()> {
        Err(Error::new(Op::FreeVar, mlx5_dv::errno::EOPNOTSUPP, "not forwarded by the hardware backend"))
    }
    fn query_qp_lag_port(&mut self, _qp: mlx5_dv::QpHandle) -> Result<(u8, u8)> {
        Err(Error::new(Op::QueryQpLagPort, mlx5_dv::errno::EOPNOTSUPP, "not forwarded by the hardware backend"))
    }
    fn modify_qp_lag_port(&mut self, _qp: mlx5_dv::QpHandle, _port: u8) -> Result<()> {
        Err(Error::new(Op::ModifyQpLagPort, mlx5_dv::errno::EOPNOTSUPP, "not forwarded by the hardware backend"))
    }

    fn devx_alloc_uar(&mut self, ctx: ContextHandle, flags: u32) -> Result<DevxUar> {
        let op = Op::DevxAllocUar;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = dv_fn!(self, op, mlx5dv_devx_alloc_uar);
        let free = self.lib().dv.mlx5dv_devx_free_uar.as_ref().ok().copied();
        // SAFETY: ptr is an open context.
        let uar = unsafe { f(ptr, flags) };
        if uar.is_null() {
            return Err(Error::new(op, last_errno(), format!("mlx5dv_devx_alloc_uar(0x{flags:x}) failed")));
        }
        let undo = || {
            if let Some(d) = free {
                // SAFETY: the UAR was just allocated and is in no table.
                unsafe { d(uar) };
            }
        };
        // SAFETY: a non-NULL UAR returned by the call.
        let (reg, base, page_id) = unsafe { ((*uar).reg_addr as usize, (*uar).base_addr as usize, (*uar).page_id) };
        let reg_offset = reg.checked_sub(base).filter(|o| *o < UAR_PAGE).and_then(|o| u32::try_from(o).ok());
        let Some(reg_offset) = reg_offset.filter(|_| base != 0) else {
            undo();
            return Err(Error::new(op, EIO, "libmlx5 returned a UAR whose register is outside its page"));
        };
        let handle = self.objs.uars.insert(op, HwUar { ptr: uar, ctx }).inspect_err(|_| undo())?;
        Ok(DevxUar { handle, page_id, reg_offset })
    }

    fn devx_free_uar(&mut self, uar: &DevxUar) -> Result<()> {
        let op = Op::DevxFreeUar;
        self.objs.uars.get(uar.handle, op)?;
        let f = dv_fn!(self, op, mlx5dv_devx_free_uar);
        let u = self.objs.uars.take(uar.handle, op)?;
        // SAFETY: the UAR is live and out of the table; the call cannot fail.
        unsafe { f(u.ptr) };
        Ok(())
    }

    fn devx_uar_write(&mut self, uar: &DevxUar, offset: u32, value: &[u8]) -> Result<()> {
        let op = Op::DevxUarWrite;
        let ptr = self.objs.uars.get(uar.handle, op)?.ptr;
        let off = uar_offset(op, offset, value.len())?;
        // SAFETY: a live UAR; base_addr maps its page, checked non-NULL at allocation.
        let at = unsafe { (*ptr).base_addr.cast::<u8>().add(off) };
        // The buffers a doorbell announces are written before it (udma_to_device_barrier).
        fence(Ordering::SeqCst);
        if let Ok(v) = <[u8; 4]>::try_from(value) {
            // SAFETY: 4 aligned bytes inside the mapped UAR page.
            unsafe { at.cast::<u32>().write_volatile(u32::from_ne_bytes(v)) };
        } else if let Ok(v) = <[u8; 8]>::try_from(value) {
            // SAFETY: 8 aligned bytes inside the mapped UAR page.
            unsafe { at.cast::<u64>().write_volatile(u64::from_ne_bytes(v)) };
        }
        Ok(())
    }

    fn devx_umem_reg(&mut self, ctx: ContextHandle, addr: u64, size: u64, access: AccessFlags) -> Result<DevxUmem> {
        let op = Op::DevxUmemReg;
        let ptr = self.ctx_ptr(ctx, op)?;
        // Only this backend's buffers may be registered, so the device never reaches other memory.
        let buf = self.buf_covering(addr, size, op)?;
        let len = usize::try_from(size).map_err(|_| Error::new(op, EINVAL, "size does not fit size_t"))?;
        let f = dv_fn!(self, op, mlx5dv_devx_umem_reg);
        let dereg = self.lib().dv.mlx5dv_devx_umem_dereg.as_ref().ok().copied();
        // SAFETY: ptr is an open context and the range lies inside a live buffer.
        let umem = unsafe { f(ptr, addr as *mut c_void, len, access.bits()) };
        if umem.is_null() {
            return Err(Error::new(op, last_errno(), "mlx5dv_devx_umem_reg failed"));
        }
        // SAFETY: a non-NULL umem returned by the call.
        let umem_id = unsafe { (*umem).umem_id };
        let handle = self.objs.add_umem(op, HwUmem { ptr: umem, ctx, buf }).inspect_err(|_| {
            if let Some(d) = dereg {
                // SAFETY: the umem was just registered and is in no table.
                unsafe { d(umem) };
            }
        })?;
        Ok(DevxUmem { handle, umem_id })
    }

    fn devx_umem_dereg(&mut self, umem: &DevxUmem) -> Result<()> {
        let op = Op::DevxUmemDereg;
        let ptr = self.objs.umems.get(umem.handle, op)?.ptr;
        let f = dv_fn!(self, op, mlx5dv_devx_umem_dereg);
        // SAFETY: the umem is live; on failure it stays registered and in the table.
        if let Some(e) = rc_errno(unsafe { f(ptr) }) {
            return Err(Error::new(op, e, "mlx5dv_devx_umem_dereg failed"));
        }
        self.objs.take_umem(umem.handle, op)?;
        Ok(())
    }

    fn devx_alloc_msi_vector(&mut self, ctx: ContextHandle) -> Result<MsiVector> {
        let op = Op::DevxAllocMsiVector;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = vfio_fn!(self, op, mlx5dv_devx_alloc_msi_vector);
        let free = self.lib().dv.mlx5dv_devx_free_msi_vector.as_ref().ok().copied();
        // SAFETY: ptr is an open context.
        let msi = unsafe { f(ptr) };
        if msi.is_null() {
            return Err(Error::new(op, last_errno(), "mlx5dv_devx_alloc_msi_vector failed"));
        }
        // SAFETY: a non-NULL vector returned by the call.
        let (vector, fd) = unsafe { ((*msi).vector, (*msi).fd) };
        let handle = self.objs.msis.insert(op, HwMsi { ptr: msi, ctx }).inspect_err(|_| {
            if let Some(d) = free {
                // SAFETY: the vector was just allocated, unchanged, and is in no table.
                unsafe { d(msi) };
            }
        })?;
        Ok(MsiVector { handle, vector, fd })
    }

    fn devx_free_msi_vector(&mut self, msi: &MsiVector) -> Result<()> {
        let op = Op::DevxFreeMsiVector;
        let ptr = self.objs.msis.get(msi.handle, op)?.ptr;
        // libmlx5 indexes its fd table with `vector` after checking only the upper bound.
        if msi.vector < 0 {
            return Err(Error::new(op, EINVAL, format!("vector {} is negative", msi.vector)));
        }
        // Another handle's vector and fd would pass libmlx5's check and free the wrong one.
        let theirs = self.objs.msis.iter().any(|(h, m)| {
            // SAFETY: every vector in the table is live.
            h != msi.handle && unsafe { ((*m.ptr).vector, (*m.ptr).fd) } == (msi.vector, msi.fd)
        });
        if theirs {
            return Err(Error::new(op, EINVAL, format!("vector {} belongs to another handle", msi.vector)));
        }
        let f = vfio_fn!(self, op, mlx5dv_devx_free_msi_vector);
        // SAFETY: the vector is live; libmlx5 checks the caller's vector and fd, so they go in.
        let kept = unsafe {
            std::mem::replace(&mut *ptr, crate::sys::mlx5dv::mlx5dv_devx_msi_vector { vector: msi.vector, fd: msi.fd })
        };
        // SAFETY: as above.
        if let Some(e) = rc_errno(unsafe { f(ptr) }) {
            // SAFETY: on failure the vector stays live; it keeps libmlx5's own values.
            unsafe { *ptr = kept };
            return Err(Error::new(op, e, "mlx5dv_devx_free_msi_vector failed"));
        }
        self.objs.msis.take(msi.handle, op)?;
        Ok(())
    }

    fn devx_msi_vector_read(&mut self, msi: &MsiVector) -> Result<u64> {
        let op = Op::DevxMsiVectorRead;
        let ptr = self.objs.msis.get(msi.handle, op)?.ptr;
        // SAFETY: the vector is live.
        let fd = unsafe { (*ptr).fd };
        // Only the vector's own eventfd is read, never another descriptor of the process.
        if msi.fd != fd {
            return Err(Error::new(op, EBADF, format!("fd {} is not the vector's eventfd", msi.fd)));
        }
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; a zero timeout never blocks.
        let ready = unsafe { libc::poll(&mut p, 1, 0) };
        if ready < 0 {
            return Err(Error::new(op, last_errno(), "poll on the MSI eventfd failed"));
        }
        if ready == 0 {
            return Err(Error::new(op, EAGAIN, "no interrupt since the last read"));
        }
        let mut counter = 0u64;
        // SAFETY: fd is libmlx5's non-blocking eventfd; counter holds the 8 bytes read.
        let n = unsafe { libc::read(fd, (&mut counter as *mut u64).cast(), 8) };
        match n {
            8 => Ok(counter),
            n if n < 0 => Err(Error::new(op, last_errno(), "read on the MSI eventfd failed")),
            n => Err(Error::new(op, EIO, format!("the MSI eventfd gave {n} bytes, not 8"))),
        }
    }

    fn devx_create_eq(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxEq> {
        let op = Op::DevxCreateEq;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = vfio_fn!(self, op, mlx5dv_devx_create_eq);
        let destroy = self.lib().dv.mlx5dv_devx_destroy_eq.as_ref().ok().copied();
        let (inb, mut out) = mailboxes(op, input, out_len)?;
        // SAFETY: ptr is an open context; both mailboxes hold at least the lengths passed.
        let eq = unsafe { f(ptr, inb.as_ptr().cast(), input.len(), out.as_mut_ptr().cast(), out_len) };
        let errno = eq.is_null().then(last_errno);
        out.truncate(out_len);
        if let Some(e) = errno {
            return Err(cmd_error(op, e, &out));
        }
        let undo = || {
            if let Some(d) = destroy {
                // SAFETY: the EQ was just created and is in no table.
                unsafe { d(eq) };
            }
        };
        // SAFETY: a non-NULL EQ returned by the call.
        let vaddr = unsafe { (*eq).vaddr }.cast::<u8>();
        // libmlx5 checked the input is a whole create_eq_in, so the size reads.
        let layout = ring_size(op, input).and_then(|size| {
            std::alloc::Layout::from_size_align(size, RING_MIN as usize)
                .map_err(|e| Error::new(op, EINVAL, e.to_string()))
        });
        let layout = match layout {
            Ok(l) if !vaddr.is_null() => l,
            other => {
                undo();
                return Err(other
                    .err()
                    .unwrap_or_else(|| Error::new(op, EIO, "libmlx5 returned an EQ without a ring")));
            }
        };
        let ring = HwBuf { ptr: vaddr, layout, dmabuf: None, borrowed: true };
        let ring = self.objs.bufs.insert(op, ring).inspect_err(|_| undo())?;
        let handle = self.objs.eqs.insert(op, HwEq { ptr: eq, ctx, ring }).inspect_err(|_| {
            let _ = self.objs.bufs.take(ring, op);
            undo();
        })?;
        Ok(DevxEq { handle, ring: Buf { handle: ring, addr: vaddr as u64, len: layout.size() }, out })
    }

    fn devx_destroy_eq(&mut self, eq: &DevxEq) -> Result<()> {
        let op = Op::DevxDestroyEq;
        let (ptr, ring) = {
            let e = self.objs.eqs.get(eq.handle, op)?;
            (e.ptr, e.ring)
        };
        // The driver frees the ring: nothing may still cover it.
        unused(&self.objs.bufs, ring, op, |n| format!("{n} MR(s) or umem(s) cover the EQ ring"))?;
        let f = vfio_fn!(self, op, mlx5dv_devx_destroy_eq);
        // SAFETY: the EQ is live; on failure it stays live and in the table.
        if let Some(e) = rc_errno(unsafe { f(ptr) }) {
            return Err(Error::new(op, e, "mlx5dv_devx_destroy_eq failed"));
        }
        self.objs.eqs.take(eq.handle, op)?;
        self.objs.bufs.take(ring, op)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use mlx5_dv::Memory;
    use mlx5_dv::errno::EBUSY;

    use super::*;
    use crate::HwConfig;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn the_status_is_byte_0_and_the_syndrome_bytes_4_to_8() {
        let out = [0x05, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(cmd_status(&out), CmdStatus { status: 5, syndrome: 0x1234_5678 });
        assert_eq!(cmd_status(&out[..3]), CmdStatus { status: 5, syndrome: 0 });
        assert_eq!(cmd_status(&[]), CmdStatus { status: 0, syndrome: 0 });
        assert_eq!(cmd_error(Op::DevxGeneralCmd, EREMOTEIO, &out).cmd_status().map(|c| c.syndrome), Some(0x1234_5678));
        assert_eq!(cmd_error(Op::DevxGeneralCmd, EINVAL, &out).cmd_status(), None, "only EREMOTEIO carries it");
    }

    #[test]
    fn the_ring_is_what_libmlx5_allocates() -> TestResult {
        let mut input = vec![0u8; create_eq::IN_SIZE];
        for (log, want) in [(0, 4096), (6, 4096), (7, 8192), (10, 65536), (31, 1usize << 37)] {
            create_eq::LOG_EQ_SIZE.set(&mut input, log)?;
            assert_eq!(ring_size(Op::DevxCreateEq, &input)?, want, "log_eq_size {log}");
        }
        assert_eq!(ring_size(Op::DevxCreateEq, &input[..8]).map_err(|e| e.errno()), Err(EINVAL), "short input");
        Ok(())
    }

    #[test]
    fn doorbell_stores_are_4_or_8_aligned_bytes_inside_the_page() {
        let op = Op::DevxUarWrite;
        assert_eq!(uar_offset(op, 0x40, 4).ok(), Some(0x40));
        assert_eq!(uar_offset(op, 0x20, 8).ok(), Some(0x20));
        assert_eq!(uar_offset(op, 4092, 4).ok(), Some(4092));
        assert_eq!(uar_offset(op, 4088, 8).ok(), Some(4088));
        for (off, len) in [(0, 2), (0, 16), (4093, 4), (4092, 8), (4096, 4), (u32::MAX, 8), (0x44, 8), (2, 4)] {
            assert_eq!(uar_offset(op, off, len).map_err(|e| e.errno()), Err(EINVAL), "{len} bytes at {off}");
        }
    }

    #[test]
    fn mailboxes_are_padded_and_huge_ones_are_enomem() -> TestResult {
        let (i, o) = mailboxes(Op::DevxGeneralCmd, &[1, 2, 3], 8)?;
        assert_eq!((i.len(), &i[..4], o.len()), (MBOX_MIN, &[1, 2, 3, 0][..], MBOX_MIN));
        let (i, o) = mailboxes(Op::DevxGeneralCmd, &[7; 300], 200)?;
        assert_eq!((i.len(), o.len()), (300, 200));
        assert_eq!(zeroed(Op::DevxGeneralCmd, usize::MAX).map_err(|e| e.errno()), Err(ENOMEM));
        Ok(())
    }

    #[test]
    fn a_missing_vfio_function_is_eopnotsupp_naming_rdma_core_40() {
        let absent: std::result::Result<unsafe extern "C" fn(), libloading::Error> =
            Err(libloading::Error::DlSymUnknown);
        let e = OptionalFn::bound("mlx5dv_devx_create_eq", VFIO_SINCE, &absent).get(Op::DevxCreateEq, "39.0");
        let e = e.err().map(|e| (e.errno(), e.reason().to_string()));
        let (errno, reason) = e.unwrap_or_default();
        assert_eq!(errno, mlx5_dv::errno::EOPNOTSUPP);
        assert!(reason.contains("mlx5dv_devx_create_eq") && reason.contains("rdma-core 40"), "{reason}");
    }

    fn fake_ctx() -> ContextHandle {
        ContextHandle::new(mlx5_dv::BackendId::NONE, 0)
    }

    // Doorbells and eventfds need no device: a page and an eventfd of our own stand in.
    #[test]
    fn doorbells_land_as_given_and_eventfds_read_without_blocking() -> TestResult {
        use crate::sys::mlx5dv::{mlx5dv_devx_msi_vector, mlx5dv_devx_uar};
        let mut b = HwBackend::open(HwConfig::default())?;
        let mut page = vec![0u64; UAR_PAGE / 8];
        let base = page.as_mut_ptr().cast::<c_void>();
        let mut c_uar = mlx5dv_devx_uar { base_addr: base, ..Default::default() };
        let handle = b.objs.uars.insert(Op::DevxAllocUar, HwUar { ptr: &mut c_uar, ctx: fake_ctx() })?;
        let uar = DevxUar { handle, page_id: 0, reg_offset: 0x800 };
        b.devx_uar_write(&uar, 0x40, &[1, 2, 3, 4])?;
        b.devx_uar_write(&uar, 0x20, &[9, 8, 7, 6, 5, 4, 3, 2])?;
        assert_eq!(page[0x40 / 8].to_ne_bytes()[..4], [1, 2, 3, 4]);
        assert_eq!(page[0x20 / 8].to_ne_bytes(), [9, 8, 7, 6, 5, 4, 3, 2]);
        assert_eq!(b.devx_uar_write(&uar, 4094, &[0; 4]).map_err(|e| e.errno()), Err(EINVAL));
        b.objs.uars.take(handle, Op::DevxFreeUar)?;

        // SAFETY: a fresh non-blocking eventfd, closed below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(fd >= 0);
        let mut mine = mlx5dv_devx_msi_vector { vector: 1, fd };
        let mut other = mlx5dv_devx_msi_vector { vector: 2, fd: fd + 1000 };
        let h = b.objs.msis.insert(Op::DevxAllocMsiVector, HwMsi { ptr: &mut mine, ctx: fake_ctx() })?;
        let h2 = b.objs.msis.insert(Op::DevxAllocMsiVector, HwMsi { ptr: &mut other, ctx: fake_ctx() })?;
        let msi = MsiVector { handle: h, vector: 1, fd };
        assert_eq!(b.devx_msi_vector_read(&msi).map_err(|e| e.errno()), Err(EAGAIN));
        // SAFETY: 8 bytes of a live u64 to our own eventfd.
        assert_eq!(unsafe { libc::write(fd, (&3u64 as *const u64).cast(), 8) }, 8);
        assert_eq!(b.devx_msi_vector_read(&msi)?, 3);
        assert_eq!(b.devx_msi_vector_read(&msi).map_err(|e| e.errno()), Err(EAGAIN), "the read resets it");
        let wrong_fd = MsiVector { fd: fd + 1, ..msi };
        assert_eq!(b.devx_msi_vector_read(&wrong_fd).map_err(|e| e.errno()), Err(EBADF));
        // Refused before libmlx5 could index its fd table or free another handle's vector.
        for bad in [MsiVector { vector: -1, ..msi }, MsiVector { vector: 2, fd: fd + 1000, ..msi }] {
            assert_eq!(b.devx_free_msi_vector(&bad).map_err(|e| e.errno()), Err(EINVAL), "{bad:?}");
        }
        assert_eq!((mine.vector, mine.fd), (1, fd), "libmlx5's values are untouched");
        b.objs.msis.take(h, Op::DevxFreeMsiVector)?;
        b.objs.msis.take(h2, Op::DevxFreeMsiVector)?;
        // SAFETY: our own eventfd, out of every table.
        unsafe { libc::close(fd) };
        Ok(())
    }

    // A borrowed ring is read and written like any buffer but never freed here.
    #[test]
    fn a_borrowed_ring_is_readable_and_never_freed() -> TestResult {
        let mut memory = vec![0u8; 4096];
        let mut b = HwBackend::open(HwConfig::default())?;
        let layout = std::alloc::Layout::from_size_align(4096, 4096)?;
        let handle = b
            .objs
            .bufs
            .insert(Op::DevxCreateEq, HwBuf { ptr: memory.as_mut_ptr(), layout, dmabuf: None, borrowed: true })?;
        let ring = Buf { handle, addr: memory.as_ptr() as u64, len: 4096 };
        b.write_buf(&ring, eqe::OWNER, &[1])?;
        assert_eq!(b.read_buf(&ring, eqe::OWNER, 1)?, [1]);
        assert_eq!(b.free_buf(&ring).map_err(|e| e.errno()), Err(EBUSY));
        // A umem on it holds the ring: a destroy would be refused first.
        let umem =
            HwUmem { ptr: std::ptr::null_mut(), ctx: ContextHandle::new(mlx5_dv::BackendId::NONE, 0), buf: handle };
        let u = b.objs.add_umem(Op::DevxUmemReg, umem)?;
        assert!(unused(&b.objs.bufs, handle, Op::DevxDestroyEq, |n| n.to_string()).is_err());
        b.objs.take_umem(u, Op::DevxUmemDereg)?;
        assert_eq!(b.buf_covering(ring.addr + 8, 64, Op::DevxUmemReg)?, handle);
        assert_eq!(b.buf_covering(ring.addr + 8, 4096, Op::DevxUmemReg).map_err(|e| e.errno()), Err(EINVAL));
        assert_eq!(b.buf_covering(u64::MAX, 2, Op::DevxUmemReg).map_err(|e| e.errno()), Err(EINVAL));
        drop(b); // Drop leaves the borrowed memory alone.
        assert_eq!(memory[eqe::OWNER], 1);
        Ok(())
    }
}
