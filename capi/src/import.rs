//! Sharing a context and its objects: `ibv_import_device` on a context's command fd (or a
//! `dup` of it), then `ibv_import_pd`, `ibv_import_mr` and `ibv_import_dm` by the objects'
//! handles, and their `unimport`s, which free only what the import made.
//!
//! The kernel shares a context between the fds of one open file; here the shim's contexts
//! are found by their command fds, within the process: an fd of another process's context
//! (passed over a Unix socket) has no simulator behind it in this one.

use std::ffi::c_int;
use std::ptr;

use rdma_sys::*;

use crate::errno::null;
use crate::objects::Pd;
use crate::state::{Shim, key, with};

/// `kcmp`'s `KCMP_FILE`: whether two fds are one open file.
const KCMP_FILE: libc::c_int = 0;

/// Whether fds `a` and `b` of this process are one open file (`a` a `dup` of `b`).
fn same_file(a: c_int, b: c_int) -> bool {
    if a == b {
        return true;
    }
    let pid = std::process::id();
    // SAFETY: kcmp only compares the two fds' files; it reads no memory of ours.
    unsafe { libc::syscall(libc::SYS_kcmp, pid, pid, KCMP_FILE, a, b) == 0 }
}

impl Shim {
    /// `ibv_import_device`: a new context on `cmd_fd` sharing the simulator's context whose
    /// command fd it is. An fd that is no device's: EINVAL (libibverbs' `S_ISCHR` check); a
    /// character device that is none of the simulated ones: ENODEV.
    fn import_device(&mut self, cmd_fd: c_int) -> Result<*mut ibv_context, c_int> {
        let found = self.contexts.values().find(|c| c.c.context.cmd_fd >= 0 && same_file(cmd_fd, c.c.context.cmd_fd));
        let Some(c) = found else {
            // SAFETY: an all-zero stat is valid; fstat writes it or fails.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let chr = unsafe { libc::fstat(cmd_fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFCHR;
            return Err(if chr { libc::ENODEV } else { libc::EINVAL });
        };
        let (dev, i, handle) = (c.c.context.device, c.device, c.handle);
        Ok(self.install_context(dev, i, handle, cmd_fd))
    }

    /// The context a program's `ibv_context` shares with others, as the simulator knows it.
    fn shared_handle(&self, ctx: *const ibv_context) -> Result<mlx5_dv::ContextHandle, c_int> {
        self.context(ctx).map(|c| c.handle)
    }

    /// Whether the program's context pointer `owner` is one of the contexts sharing `handle`.
    fn shares(&self, owner: *const ibv_context, handle: mlx5_dv::ContextHandle) -> bool {
        self.contexts.get(&key(owner)).is_some_and(|c| c.handle == handle)
    }

    /// `mlx5_import_pd`: the PD of that handle in the shared context (ENOENT, as the kernel's
    /// object lookup, for a handle it does not hold), as a new `ibv_pd` on `ctx`.
    fn import_pd(&mut self, ctx: *mut ibv_context, pd_handle: u32) -> Result<*mut ibv_pd, c_int> {
        let shared = self.shared_handle(ctx)?;
        let found = self.pds.values().find(|p| p.c.handle == pd_handle && self.shares(p.c.context, shared));
        let handle = found.ok_or(libc::ENOENT)?.handle;
        let mut c = Box::new(ibv_pd { context: ctx, handle: pd_handle });
        let p: *mut ibv_pd = &mut *c;
        self.pds.insert(key(p), Pd { c, handle });
        Ok(p)
    }

    /// `ibv_cmd_query_mr`: the MR of that handle in the shared context, with its keys and
    /// length and a NULL `addr`, as a new `ibv_mr` on `pd` (kept apart from the MRs the
    /// program registered: unimporting frees only it).
    fn import_mr(&mut self, pd: *mut ibv_pd, mr_handle: u32) -> Result<*mut ibv_mr, c_int> {
        let ctx = self.pd(pd)?.c.context;
        let shared = self.shared_handle(ctx)?;
        let found = self.mrs.values().find(|m| m._c.handle == mr_handle && self.shares(m._c.context, shared));
        let mr = &found.ok_or(libc::ENOENT)?._c;
        let c = ibv_mr {
            context: ctx,
            pd,
            addr: ptr::null_mut(),
            length: mr.length,
            handle: mr_handle,
            lkey: mr.lkey,
            rkey: mr.rkey,
        };
        let mut c = Box::new(c);
        let p: *mut ibv_mr = &mut *c;
        self.imported_mrs.insert(key(p), c);
        Ok(p)
    }
}

/// `ibv_import_device`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    with(null, |s| s.import_device(cmd_fd).unwrap_or_else(null))
}

/// `ibv_import_pd`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
    with(null, |s| s.import_pd(context, pd_handle).unwrap_or_else(null))
}

/// `ibv_unimport_pd`: frees the imported `ibv_pd` only; the PD stays.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    with(|_| (), |s| drop(s.pds.remove(&key(pd))));
}

/// `ibv_import_mr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
    with(null, |s| s.import_mr(pd, mr_handle).unwrap_or_else(null))
}

/// `ibv_unimport_mr`: frees the imported `ibv_mr` only; the MR stays.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    with(|_| (), |s| drop(s.imported_mrs.remove(&key(mr))));
}

/// `ibv_import_dm`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_dm(context: *mut ibv_context, dm_handle: u32) -> *mut ibv_dm {
    with(null, |s| {
        let shared = match s.shared_handle(context) {
            Ok(h) => h,
            Err(e) => return null(e),
        };
        crate::dm::import(context, dm_handle, |owner| s.shares(owner, shared)).unwrap_or_else(null)
    })
}

/// `ibv_unimport_dm`: frees the imported `ibv_dm` only; the DM stays.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_dm(dm: *mut ibv_dm) {
    crate::dm::unimport(dm);
}
