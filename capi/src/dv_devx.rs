//! DEVX: raw commands and objects, `mlx5dv_devx_query_eqn`, UARs, umems, and the VFIO
//! provider's MSI vectors and EQs.
//!
//! The shim gives each UAR a real page of its own (so `reg_addr` and `base_addr` are
//! writable addresses), and a thread of the shim watches the doorbell registers in every such
//! page while one exists (see [`watch`]): a program's store to the send doorbell (UAR +
//! 0x800 or 0x900), the CQ doorbell (+ 0x20) or the EQ doorbells (+ 0x40, + 0x48) reaches the
//! simulated device as [`mlx5_dv::Devx::devx_uar_write`] does, so raw DEVX QPs whose queues
//! are in the program's umems run when the program rings them. An EQ's `vaddr` is the ring the
//! device writes, in the process's memory.

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use mlx5_dv::{AccessFlags, DevxObjHandle, Error, MsiVector};
use mlx5_hw::sys::mlx5dv::{
    mlx5dv_devx_eq, mlx5dv_devx_msi_vector, mlx5dv_devx_obj, mlx5dv_devx_uar, mlx5dv_devx_umem, mlx5dv_devx_umem_in,
};
use rdma_sys::ibv_context;

use crate::errno::{code, null};
use crate::objects::{DevxObject, Eq, Msi, PAGE, Pages, Uar, Umem};
use crate::state::{Shim, device_thread, key, shim, with};

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

/// A failed command's errno; for EREMOTEIO the whole output mailbox comes back, as the
/// kernel copies its zeroed buffer after the firmware wrote into it (and the VFIO provider
/// its output message): the status (byte 0) and syndrome (bytes 4–7, big endian), and zeros
/// elsewhere, which is all the firmware writes for a failed command.
///
/// # Safety
///
/// As [`output`].
unsafe fn failed(e: &Error, out: *mut c_void, len: usize) -> c_int {
    if let Some(st) = e.cmd_status() {
        let mut mailbox = vec![0u8; len];
        if let Some(head) = mailbox.get_mut(..8) {
            head[0] = st.status;
            head[4..].copy_from_slice(&st.syndrome.to_be_bytes());
        }
        // SAFETY: the caller's contract.
        unsafe { output(out, len, &mailbox) };
    }
    code(e)
}

/// An output mailbox must be there when it has a length.
fn check_out(out: *mut c_void, len: usize) -> Result<(), c_int> {
    if out.is_null() && len > 0 { Err(libc::EINVAL) } else { Ok(()) }
}

impl Shim {
    /// The DEVX object behind a program's `mlx5dv_devx_obj`.
    pub(crate) fn devx_obj(&self, obj: *const mlx5dv_devx_obj) -> Result<DevxObjHandle, c_int> {
        self.dv.devx_objs.get(&key(obj)).map(|o| o.handle).ok_or(libc::EINVAL)
    }

    /// `mlx5dv_devx_alloc_uar` with a page of the shim's behind the C struct; a kernel
    /// context's NC page is the same struct every time.
    fn alloc_uar(&mut self, ctx: *mut ibv_context, flags: u32) -> Result<*mut mlx5dv_devx_uar, c_int> {
        let h = self.ctx_handle(ctx)?;
        let uar = self.sim.devx_alloc_uar(h, flags).map_err(|e| e.errno())?;
        if let Some((p, _)) = self.dv.uars.iter().find(|(_, u)| u.uar.handle == uar.handle) {
            return Ok(*p as *mut mlx5dv_devx_uar);
        }
        let vfio = self.context(ctx).map(|c| c.device.is_none())?;
        let singleton = flags & mlx5_dv::MLX5DV_UAR_ALLOC_TYPE_NC != 0 && !vfio;
        let undo = |s: &mut Shim, e: c_int| {
            let _ = s.sim.devx_free_uar(&uar);
            e
        };
        let Some(page) = Pages::new(PAGE) else { return Err(undo(self, libc::ENOMEM)) };
        let reg = usize::try_from(uar.reg_offset).ok().filter(|o| *o < PAGE);
        let Some(reg) = reg else { return Err(undo(self, libc::EIO)) };
        let base = page.ptr().cast::<c_void>();
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
        self.dv.uars.insert(key(p), Uar { _c: c, page, uar, singleton });
        if self.free_running() {
            device_thread::start(self);
        } else {
            watch::start();
        }
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
        device_thread::forget();
        if let Err(e) = self.sim.devx_umem_dereg(&u.umem) {
            return code(&e);
        }
        if let Some(u) = self.dv.umems.remove(&key(umem)) {
            self.memory.unmap(&mut self.sim, u.region);
        }
        0
    }

    /// `mlx5dv_devx_create_eq`: `vaddr` is the ring the device writes.
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
        // The ring is in the process's memory, where the device writes its EQEs.
        let mut c = Box::new(mlx5dv_devx_eq { vaddr: eq.ring.addr as *mut c_void });
        let p: *mut mlx5dv_devx_eq = &mut *c;
        self.dv.eqs.insert(key(p), Eq { _c: c, eq });
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
        watch::flush(s);
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
        |s| {
            watch::flush(s);
            match run(s, i) {
                // SAFETY: the caller's mailbox of outlen bytes.
                Ok(Ok(o)) => unsafe {
                    output(out, outlen, &o);
                    0
                },
                // SAFETY: as above.
                Ok(Err(e)) => unsafe { failed(&e, out, outlen) },
                Err(e) => e,
            }
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
            watch::flush(s);
            let Ok(h) = s.devx_obj(obj) else { return libc::EINVAL };
            device_thread::forget();
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
/// `reg_addr` (at the register's offset, 0x800) point into a page of the shim's whose
/// doorbell registers the shim watches (module docs).
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
            device_thread::forget();
            if let Some(u) = s.dv.uars.get(&key(devx_uar))
                && !u.singleton
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
    with(null, |s| {
        watch::flush(s);
        s.create_eq(ibctx, i, out, outlen).unwrap_or_else(null)
    })
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

/// What the device thread does with the UAR pages under the shim's lock (`watch`).
impl Shim {
    /// Ring the stores waiting in the UAR pages ([`watch::flush`]).
    pub(crate) fn flush_uar_stores(&mut self) -> bool {
        watch::flush(self)
    }

    /// The UAR registers to look at without the lock ([`watch::registers`]).
    pub(crate) fn watched_registers(&self) -> Vec<(usize, usize)> {
        watch::registers(self)
    }
}

/// The thread that watches the doorbell registers of the UAR pages the shim handed out, and
/// hands each store it finds to the simulated device.
///
/// A program rings a doorbell with a plain store into the page; the thread takes each
/// register's value and leaves zero behind (an atomic swap, so a store that lands meanwhile
/// is seen on the next look rather than lost), so a register written twice with the same
/// value rings twice. A store of zero is not seen: no doorbell the device acts on is all
/// zeros. The thread looks every 20 µs after a doorbell, backing off to every 2 ms when the
/// pages are quiet, and ends when the last UAR is freed. A DEVX command the program issues
/// first rings what waits ([`flush`]), so a store made before the command reaches the device
/// before it, as on hardware.
pub(crate) mod watch {
    use super::*;

    /// The registers looked at: offset in the page and width in bytes.
    const REGISTERS: [(usize, usize); 5] = [(CQ_DOORBELL, 8), (0x40, 4), (0x48, 4), (0x800, 8), (0x900, 8)];
    /// `MLX5_CQ_DOORBELL`'s offset in a UAR page.
    const CQ_DOORBELL: usize = 0x20;
    const FAST: Duration = Duration::from_micros(20);
    const SLOW: Duration = Duration::from_millis(2);

    /// A watcher runs (set and cleared under the shim's lock).
    static RUNNING: AtomicBool = AtomicBool::new(false);

    /// Start the watcher unless it runs. Called with the shim locked.
    pub(super) fn start() {
        if RUNNING.swap(true, Ordering::SeqCst) {
            return;
        }
        let spawned = std::thread::Builder::new().name("mlx5sim-doorbells".into()).spawn(run);
        if spawned.is_err() {
            RUNNING.store(false, Ordering::SeqCst);
        }
    }

    /// Take the register of `width` bytes at `at`, leaving zero: its bytes in memory order,
    /// or `None` when it holds zero.
    ///
    /// # Safety
    ///
    /// `at` is inside a live page of the shim's, aligned to `width`.
    unsafe fn take(at: *mut u8, width: usize) -> Option<Vec<u8>> {
        if width == 8 {
            // SAFETY: the caller's contract; the page is 4096-aligned and the offset 8-aligned.
            let v = unsafe { AtomicU64::from_ptr(at.cast()) }.swap(0, Ordering::SeqCst);
            (v != 0).then(|| v.to_ne_bytes().to_vec())
        } else {
            // SAFETY: as above, 4-aligned.
            let v = unsafe { AtomicU32::from_ptr(at.cast()) }.swap(0, Ordering::SeqCst);
            (v != 0).then(|| v.to_ne_bytes().to_vec())
        }
    }

    /// One look at every page: the stores found are rung; whether there were any. `None` when
    /// no UAR is left (the watcher then ends).
    fn look(s: &mut Shim) -> Option<bool> {
        if s.dv.uars.is_empty() {
            RUNNING.store(false, Ordering::SeqCst);
            return None;
        }
        Some(flush(s))
    }

    /// The registers of every UAR page the shim handed out: (address, width in bytes). Of a
    /// context's own page (`mlx5dv_init_obj`), the CQ doorbell: its QPs' doorbells are seen
    /// through their doorbell records.
    pub(crate) fn registers(s: &Shim) -> Vec<(usize, usize)> {
        let pages = s.dv.uars.values().map(|u| u.page.ptr() as usize);
        let mut r: Vec<(usize, usize)> =
            pages.flat_map(|p| REGISTERS.iter().map(move |&(off, w)| (p + off, w))).collect();
        for c in s.contexts.values() {
            if let Some(page) = &c.uar {
                r.push((page.ptr() as usize + CQ_DOORBELL, 8));
            }
        }
        r
    }

    /// Ring the stores that wait in the UAR pages now, before a command the program issues
    /// after them (as its stores reach a device before its later commands): whether there were
    /// any.
    pub(crate) fn flush(s: &mut Shim) -> bool {
        let mut stores = Vec::new();
        for u in s.dv.uars.values() {
            for (offset, width) in REGISTERS {
                // SAFETY: the page is the Uar's own, alive while it is in the table (the lock
                // is held), and every register lies inside it.
                if let Some(bytes) = unsafe { take(u.page.ptr().add(offset), width) } {
                    stores.push((u.uar, offset as u32, bytes));
                }
            }
        }
        let mut arms = Vec::new();
        for c in s.contexts.values() {
            // SAFETY: the context's page, alive while the context is in the table.
            if let Some(page) = &c.uar
                && let Some(b) = unsafe { take(page.ptr().add(CQ_DOORBELL), 8) }
            {
                let word = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
                arms.push((c.handle, word(0), word(4)));
            }
        }
        let (rang, armed) = (!stores.is_empty() || !arms.is_empty(), !arms.is_empty());
        for (uar, offset, bytes) in stores {
            // A UAR of a closed context is refused; the store is dropped, as hardware would.
            let _ = s.sim.devx_uar_write(&uar, offset, &bytes);
        }
        for (ctx, hi, cqn) in arms {
            // A program's own `mlx5_arm_cq`: `sn << 28 | cmd | ci`, then the CQ's number.
            s.sim.simulator_mut().cq_doorbell(ctx, hi, cqn);
        }
        if armed {
            // An arm with a completion waiting fires at once.
            s.notify();
        }
        rang
    }

    fn run() {
        let mut pause = FAST;
        loop {
            let rang = match shim() {
                Ok(mut s) => look(&mut s),
                Err(_) => {
                    RUNNING.store(false, Ordering::SeqCst);
                    None
                }
            };
            match rang {
                None => return,
                Some(true) => pause = FAST,
                Some(false) => pause = (pause * 2).min(SLOW),
            }
            std::thread::sleep(pause);
        }
    }
}
