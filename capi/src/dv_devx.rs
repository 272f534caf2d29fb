//! DEVX: raw commands and objects, `mlx5dv_devx_query_eqn`, UARs, umems, and the VFIO
//! provider's MSI vectors and EQs.
//!
//! What the simulator does not expose: a UAR page and an EQ ring are the simulator's own
//! memory, reached only through [`mlx5_dv::Devx::devx_uar_write`] and
//! [`mlx5_dv::Memory::read_buf`]. The shim gives each UAR a real page of its own (so
//! `reg_addr` and `base_addr` are writable addresses), but stores into it are not seen by the
//! simulated device; an EQ's `vaddr` is a copy of the ring taken at creation, not the ring
//! the device writes. Raw DEVX programs that ring doorbells or poll EQEs through these
//! addresses therefore see no effect: the simulator would have to place UARs and EQ rings in
//! memory the program can address (as it does for memory a program registers).

use std::alloc::Layout;
use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::{AccessFlags, DevxEq, DevxObjHandle, DevxUar, DevxUmem, Error, MsiVector};
use mlx5_hw::sys::mlx5dv::{
    mlx5dv_devx_eq, mlx5dv_devx_msi_vector, mlx5dv_devx_obj, mlx5dv_devx_uar, mlx5dv_devx_umem, mlx5dv_devx_umem_in,
};
use rdma_sys::ibv_context;

use crate::errno::{code, null};
use crate::state::{Shim, key, with};

/// A page-aligned allocation of the shim's, zeroed, freed on drop.
pub(crate) struct Pages {
    ptr: *mut u8,
    layout: Layout,
}

impl Pages {
    /// `len` zeroed bytes (at least one page), page-aligned; None when out of memory.
    fn new(len: usize) -> Option<Pages> {
        let layout = Layout::from_size_align(len.max(PAGE), PAGE).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        (!ptr.is_null()).then_some(Pages { ptr, layout })
    }
}

impl Drop for Pages {
    /// Free the pages.
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

const PAGE: usize = 4096;

/// A DEVX object: the program holds the box's address (the C struct is opaque).
pub(crate) struct DevxObject {
    _c: Box<u64>,
    pub(crate) handle: DevxObjHandle,
}

/// A UAR: its C struct and the page its addresses point into.
pub(crate) struct Uar {
    _c: Box<mlx5dv_devx_uar>,
    _page: Pages,
    pub(crate) uar: DevxUar,
}

/// A umem, and the simulator's mapping of the program's pages when the shim made one for it.
pub(crate) struct Umem {
    _c: Box<mlx5dv_devx_umem>,
    pub(crate) umem: DevxUmem,
    /// The start of the program's memory region holding it.
    region: u64,
}

/// An MSI vector of a VFIO context.
pub(crate) struct Msi {
    _c: Box<mlx5dv_devx_msi_vector>,
    pub(crate) msi: MsiVector,
}

/// An EQ of a VFIO context, with the copy of its ring `vaddr` points at.
pub(crate) struct Eq {
    _c: Box<mlx5dv_devx_eq>,
    _ring: Pages,
    pub(crate) eq: DevxEq,
}

/// The caller's input mailbox; EINVAL for NULL with a length.
///
/// # Safety
///
/// `p` is NULL or valid for `len` bytes of reads.
unsafe fn input<'a>(p: *const c_void, len: usize) -> Result<&'a [u8], c_int> {
    match (p.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(libc::EINVAL),
        // SAFETY: the caller's contract.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }),
    }
}

/// Copy a command's output into the caller's mailbox of `len` bytes.
///
/// # Safety
///
/// `out` is NULL or valid for `len` bytes of writes.
unsafe fn output(out: *mut c_void, len: usize, data: &[u8]) {
    if out.is_null() {
        return;
    }
    let n = len.min(data.len());
    // SAFETY: the caller's contract; n <= len.
    unsafe { ptr::copy_nonoverlapping(data.as_ptr(), out.cast::<u8>(), n) };
}

/// A failed command's errno; for EREMOTEIO its status (byte 0) and syndrome (bytes 4–7, big
/// endian) go into the caller's output mailbox, the two fields the C API leaves valid.
///
/// # Safety
///
/// As [`output`].
unsafe fn failed(e: &Error, out: *mut c_void, len: usize) -> c_int {
    if let Some(st) = e.cmd_status() {
        let mut head = [0u8; 8];
        head[0] = st.status;
        head[4..].copy_from_slice(&st.syndrome.to_be_bytes());
        // SAFETY: the caller's contract.
        unsafe { output(out, len, &head) };
    }
    code(e)
}

/// An output mailbox must be there when it has a length.
fn check_out(out: *mut c_void, len: usize) -> Result<(), c_int> {
    if out.is_null() && len > 0 { Err(libc::EINVAL) } else { Ok(()) }
}

impl Shim {
    /// The DEVX object behind a program's `mlx5dv_devx_obj`.
    fn devx_obj(&self, obj: *const mlx5dv_devx_obj) -> Result<DevxObjHandle, c_int> {
        self.dv.devx_objs.get(&key(obj)).map(|o| o.handle).ok_or(libc::EINVAL)
    }

    /// `mlx5dv_devx_alloc_uar` with a page of the shim's behind the C struct.
    fn alloc_uar(&mut self, ctx: *mut ibv_context, flags: u32) -> Result<*mut mlx5dv_devx_uar, c_int> {
        let h = self.ctx_handle(ctx)?;
        let uar = self.sim.devx_alloc_uar(h, flags).map_err(|e| e.errno())?;
        let undo = |s: &mut Shim, e: c_int| {
            let _ = s.sim.devx_free_uar(&uar);
            e
        };
        let Some(page) = Pages::new(PAGE) else { return Err(undo(self, libc::ENOMEM)) };
        let reg = usize::try_from(uar.reg_offset).ok().filter(|o| *o < PAGE);
        let Some(reg) = reg else { return Err(undo(self, libc::EIO)) };
        let base = page.ptr.cast::<c_void>();
        // The kernel's mmap offset of a UAR page (unverified: the page index in pages, as
        // mlx5_ib's MLX5_IB_MMAP_OFFSET command encodes it, is not modelled).
        let mmap_off = libc::off_t::from(uar.page_id).saturating_mul(PAGE as libc::off_t);
        let mut c = Box::new(mlx5dv_devx_uar {
            // SAFETY: reg < PAGE: inside the page.
            reg_addr: unsafe { base.cast::<u8>().add(reg) }.cast(),
            base_addr: base,
            page_id: uar.page_id,
            mmap_off,
            comp_mask: 0,
        });
        let p: *mut mlx5dv_devx_uar = &mut *c;
        self.dv.uars.insert(key(p), Uar { _c: c, _page: page, uar });
        Ok(p)
    }

    /// `mlx5dv_devx_umem_reg` over the program's bytes.
    fn umem_reg(
        &mut self,
        ctx: *mut ibv_context,
        addr: *mut c_void,
        size: usize,
        access: u32,
    ) -> Result<*mut mlx5dv_devx_umem, c_int> {
        let h = self.ctx_handle(ctx)?;
        if addr.is_null() || size == 0 {
            return Err(libc::EINVAL);
        }
        let start = addr as u64;
        let end = start.checked_add(size as u64).ok_or(libc::EINVAL)?;
        // The program's bytes, shared with any registration that already holds them.
        let region = self.memory.map(&mut self.sim, start, end - start)?;
        let r = self.sim.devx_umem_reg(h, start, size as u64, AccessFlags::from_bits_retain(access));
        let umem = match r {
            Ok(u) => u,
            Err(e) => {
                self.memory.unmap(&mut self.sim, region);
                return Err(e.errno());
            }
        };
        let mut c = Box::new(mlx5dv_devx_umem { umem_id: umem.umem_id });
        let p: *mut mlx5dv_devx_umem = &mut *c;
        self.dv.umems.insert(key(p), Umem { _c: c, umem, region });
        Ok(p)
    }

    /// `mlx5dv_devx_umem_dereg`, releasing its hold on the program's memory region.
    fn umem_dereg(&mut self, umem: *mut mlx5dv_devx_umem) -> c_int {
        let Some(u) = self.dv.umems.get(&key(umem)) else { return libc::EINVAL };
        if let Err(e) = self.sim.devx_umem_dereg(&u.umem) {
            return code(&e);
        }
        if let Some(u) = self.dv.umems.remove(&key(umem)) {
            self.memory.unmap(&mut self.sim, u.region);
        }
        0
    }

    /// `mlx5dv_devx_create_eq` with a copy of the ring behind `vaddr`.
    fn create_eq(
        &mut self,
        ctx: *mut ibv_context,
        input: &[u8],
        out: *mut c_void,
        outlen: usize,
    ) -> Result<*mut mlx5dv_devx_eq, c_int> {
        let h = self.ctx_handle(ctx)?;
        let eq = match self.sim.devx_create_eq(h, input, outlen) {
            Ok(eq) => eq,
            // SAFETY: the caller's mailbox of outlen bytes.
            Err(e) => return Err(unsafe { failed(&e, out, outlen) }),
        };
        // SAFETY: as above.
        unsafe { output(out, outlen, &eq.out) };
        let ring = Pages::new(eq.ring.len);
        let copied = self.sim.read_buf(&eq.ring, 0, eq.ring.len).ok();
        let (Some(ring), Some(bytes)) = (ring, copied) else {
            let _ = self.sim.devx_destroy_eq(&eq);
            return Err(libc::ENOMEM);
        };
        let n = bytes.len().min(ring.layout.size());
        // SAFETY: the copy holds at least n bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), ring.ptr, n) };
        let mut c = Box::new(mlx5dv_devx_eq { vaddr: ring.ptr.cast() });
        let p: *mut mlx5dv_devx_eq = &mut *c;
        self.dv.eqs.insert(key(p), Eq { _c: c, _ring: ring, eq });
        Ok(p)
    }
}

/// `mlx5dv_devx_general_cmd`: 0, or the errno (EREMOTEIO with the status and syndrome in
/// `out`). The simulated kernel takes only its query commands here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_general_cmd(
    context: *mut ibv_context,
    r#in: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    mailbox_cmd(r#in, inlen, out, outlen, |s, i| {
        let h = s.ctx_handle(context)?;
        Ok(s.sim.devx_general_cmd(h, i, outlen))
    })
}

/// `mlx5dv_devx_obj_create`: the object, or NULL with errno (EREMOTEIO with the status and
/// syndrome in `out`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_obj_create(
    context: *mut ibv_context,
    r#in: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> *mut mlx5dv_devx_obj {
    // SAFETY: the caller's mailbox of inlen bytes.
    let Ok(i) = (unsafe { input(r#in, inlen) }) else { return null(libc::EINVAL) };
    if let Err(e) = check_out(out, outlen) {
        return null(e);
    }
    with(null, |s| {
        let Ok(h) = s.ctx_handle(context) else { return null(libc::EINVAL) };
        match s.sim.devx_obj_create(h, i, outlen) {
            Ok(o) => {
                // SAFETY: the caller's mailbox of outlen bytes.
                unsafe { output(out, outlen, &o.out) };
                let mut c = Box::new(0u64);
                let p: *mut mlx5dv_devx_obj = (&mut *c as *mut u64).cast();
                s.dv.devx_objs.insert(key(p), DevxObject { _c: c, handle: o.handle });
                p
            }
            // SAFETY: as above.
            Err(e) => null(unsafe { failed(&e, out, outlen) }),
        }
    })
}

/// A command answered in its output mailbox: 0, or the errno (EREMOTEIO with the status and
/// syndrome in `out`); `run` gives EINVAL for a handle the shim did not hand out.
fn mailbox_cmd(
    r#in: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
    run: impl FnOnce(&mut Shim, &[u8]) -> Result<Result<Vec<u8>, Error>, c_int>,
) -> c_int {
    // SAFETY: the caller's mailbox of inlen bytes.
    let Ok(i) = (unsafe { input(r#in, inlen) }) else { return libc::EINVAL };
    if let Err(e) = check_out(out, outlen) {
        return e;
    }
    with(
        |e| e,
        |s| match run(s, i) {
            // SAFETY: the caller's mailbox of outlen bytes.
            Ok(Ok(o)) => unsafe {
                output(out, outlen, &o);
                0
            },
            // SAFETY: as above.
            Ok(Err(e)) => unsafe { failed(&e, out, outlen) },
            Err(e) => e,
        },
    )
}

/// A query or modify command on an object.
fn obj_cmd(
    obj: *mut mlx5dv_devx_obj,
    r#in: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
    modify: bool,
) -> c_int {
    mailbox_cmd(r#in, inlen, out, outlen, |s, i| {
        let h = s.devx_obj(obj)?;
        Ok(if modify { s.sim.devx_obj_modify(h, i, outlen) } else { s.sim.devx_obj_query(h, i, outlen) })
    })
}

/// `mlx5dv_devx_obj_query`: 0 or the errno (EREMOTEIO as for the general command).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_obj_query(
    obj: *mut mlx5dv_devx_obj,
    r#in: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    obj_cmd(obj, r#in, inlen, out, outlen, false)
}

/// `mlx5dv_devx_obj_modify`: 0 or the errno (EREMOTEIO as for the general command).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_obj_modify(
    obj: *mut mlx5dv_devx_obj,
    r#in: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    obj_cmd(obj, r#in, inlen, out, outlen, true)
}

/// `mlx5dv_devx_obj_destroy`: the destroy command the create command implies.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_obj_destroy(obj: *mut mlx5dv_devx_obj) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.devx_obj(obj) else { return libc::EINVAL };
            match s.sim.devx_obj_destroy(h) {
                Ok(()) => {
                    s.dv.devx_objs.remove(&key(obj));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_devx_query_eqn`: the EQ number behind a completion vector.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_query_eqn(context: *mut ibv_context, vector: u32, eqn: *mut u32) -> c_int {
    if eqn.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let Ok(h) = s.ctx_handle(context) else { return libc::EINVAL };
            match s.sim.devx_query_eqn(h, vector) {
                Ok(n) => {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *eqn = n };
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_devx_alloc_uar`: `page_id` is the simulator's UAR number; `base_addr` and
/// `reg_addr` (at the register's offset, 0x800) point into a page of the shim's, whose stores
/// the simulated device does not see (module docs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_alloc_uar(context: *mut ibv_context, flags: u32) -> *mut mlx5dv_devx_uar {
    with(null, |s| s.alloc_uar(context, flags).unwrap_or_else(null))
}

/// `mlx5dv_devx_free_uar` (void: a pointer the shim did not hand out is ignored).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_free_uar(devx_uar: *mut mlx5dv_devx_uar) {
    with(
        |_| (),
        |s| {
            if let Some(u) = s.dv.uars.get(&key(devx_uar))
                && s.sim.devx_free_uar(&u.uar).is_ok()
            {
                s.dv.uars.remove(&key(devx_uar));
            }
        },
    )
}

/// `mlx5dv_devx_umem_reg`: the program's bytes as a umem (their pages are mapped into the
/// simulator unless an MR's mapping already holds them).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_umem_reg(
    context: *mut ibv_context,
    addr: *mut c_void,
    size: usize,
    access: u32,
) -> *mut mlx5dv_devx_umem {
    with(null, |s| s.umem_reg(context, addr, size, access).unwrap_or_else(null))
}

/// `mlx5dv_devx_umem_reg_ex`: as `mlx5dv_devx_umem_reg`; EOPNOTSUPP for an unknown
/// comp_mask bit; a dma-buf umem (`MLX5DV_UMEM_MASK_DMABUF`) is EBADF for fd -1, as in the
/// provider, and otherwise EOPNOTSUPP, the simulator having no importer of a program's
/// dma-buf. The page-size bitmap is not modelled.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_umem_reg_ex(
    context: *mut ibv_context,
    umem_in: *mut mlx5dv_devx_umem_in,
) -> *mut mlx5dv_devx_umem {
    if umem_in.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let u = unsafe { &*umem_in };
    const DMABUF: u64 = 1 << 0;
    if u.comp_mask & !DMABUF != 0 {
        return null(libc::EOPNOTSUPP);
    }
    if u.comp_mask & DMABUF != 0 {
        // The provider refuses fd -1 itself; any other fd would need a dma-buf importer.
        return null(if u.dmabuf_fd == -1 { libc::EBADF } else { libc::EOPNOTSUPP });
    }
    with(null, |s| s.umem_reg(context, u.addr, u.size, u.access).unwrap_or_else(null))
}

/// `mlx5dv_devx_umem_dereg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_umem_dereg(umem: *mut mlx5dv_devx_umem) -> c_int {
    with(|e| e, |s| s.umem_dereg(umem))
}

/// `mlx5dv_devx_alloc_msi_vector`: on a VFIO context the first free vector and a real
/// non-blocking eventfd; EOPNOTSUPP on a kernel context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_alloc_msi_vector(ibctx: *mut ibv_context) -> *mut mlx5dv_devx_msi_vector {
    with(null, |s| {
        let Ok(h) = s.ctx_handle(ibctx) else { return null(libc::EINVAL) };
        match s.sim.devx_alloc_msi_vector(h) {
            Ok(msi) => {
                let mut c = Box::new(mlx5dv_devx_msi_vector { vector: msi.vector, fd: msi.fd });
                let p: *mut mlx5dv_devx_msi_vector = &mut *c;
                s.dv.msis.insert(key(p), Msi { _c: c, msi });
                p
            }
            Err(e) => null(code(&e)),
        }
    })
}

/// `mlx5dv_devx_free_msi_vector`: the vector and fd as the struct holds them now (the
/// provider checks those, so a program that changed them gets EINVAL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_free_msi_vector(msi: *mut mlx5dv_devx_msi_vector) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(m) = s.dv.msis.get(&key(msi)) else { return libc::EINVAL };
            // SAFETY: a vector the shim handed out, still in its table.
            let (vector, fd) = unsafe { ((*msi).vector, (*msi).fd) };
            let asked = MsiVector { vector, fd, ..m.msi };
            match s.sim.devx_free_msi_vector(&asked) {
                Ok(()) => {
                    s.dv.msis.remove(&key(msi));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_devx_create_eq`: on a VFIO context the EQ, whose `vaddr` is a copy of the ring at
/// creation (module docs); EOPNOTSUPP on a kernel context; EREMOTEIO with the status and
/// syndrome in `out` when CREATE_EQ fails.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_create_eq(
    ibctx: *mut ibv_context,
    r#in: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> *mut mlx5dv_devx_eq {
    // SAFETY: the caller's mailbox of inlen bytes.
    let Ok(i) = (unsafe { input(r#in, inlen) }) else { return null(libc::EINVAL) };
    if let Err(e) = check_out(out, outlen) {
        return null(e);
    }
    with(null, |s| s.create_eq(ibctx, i, out, outlen).unwrap_or_else(null))
}

/// `mlx5dv_devx_destroy_eq`: a failing DESTROY_EQ is its status-mapped errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_devx_destroy_eq(eq: *mut mlx5dv_devx_eq) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(e) = s.dv.eqs.get(&key(eq)) else { return libc::EINVAL };
            match s.sim.devx_destroy_eq(&e.eq) {
                Ok(()) => {
                    s.dv.eqs.remove(&key(eq));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}
