//! udmabuf exports: a sealed memfd handed to `/dev/udmabuf`, the dma-buf the device imports.

use std::ffi::c_int;

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{Error, Op, Result};

use crate::call::last_errno;

/// `UDMABUF_CREATE`: `_IOW('u', 0x42, struct udmabuf_create)`.
const UDMABUF_CREATE: libc::c_ulong = 0x4018_7542;
/// `UDMABUF_FLAGS_CLOEXEC`.
const UDMABUF_FLAGS_CLOEXEC: u32 = 0x01;

/// `struct udmabuf_create`.
#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}

/// The two fds behind a udmabuf export.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Udmabuf {
    pub(crate) memfd: c_int,
    pub(crate) fd: c_int,
}

impl Udmabuf {
    /// Unmap the CPU mapping and close both fds.
    ///
    /// # Safety
    ///
    /// `ptr` is this export's mapping of `len` bytes and nothing uses it any more.
    pub(crate) unsafe fn unmap(self, ptr: *mut u8, len: usize) {
        // SAFETY: the caller's contract; the fds are this export's own.
        unsafe {
            libc::munmap(ptr.cast(), len);
            libc::close(self.fd);
            libc::close(self.memfd);
        }
    }
}

/// An errno error naming the step that failed.
fn os(op: Op, what: &str) -> Error {
    Error::new(op, last_errno(), format!("{what} failed"))
}

/// A sealed memfd of `size` bytes exported through `/dev/udmabuf`, and its mapping.
pub(crate) fn udmabuf(op: Op, size: usize) -> Result<(Udmabuf, *mut u8)> {
    let dev =
        std::fs::OpenOptions::new().read(true).write(true).open("/dev/udmabuf").map_err(|e| {
            Error::new(op, EOPNOTSUPP, format!("no dma-buf exporter: /dev/udmabuf cannot be opened ({e})"))
        })?;
    let len = libc::off_t::try_from(size).map_err(|_| Error::new(op, EINVAL, "size does not fit off_t"))?;
    // SAFETY: a static NUL-terminated name; the flags are memfd_create's.
    let memfd = unsafe { libc::memfd_create(c"mlx5-dmabuf".as_ptr(), libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC) };
    if memfd < 0 {
        return Err(os(op, "memfd_create"));
    }
    let fail = |what: &str| {
        let e = os(op, what);
        // SAFETY: the memfd was created above and nothing else holds it.
        unsafe { libc::close(memfd) };
        e
    };
    // SAFETY: memfd is an open memfd; udmabuf needs it sized and sealed against shrinking.
    if unsafe { libc::ftruncate(memfd, len) } != 0 {
        return Err(fail("ftruncate"));
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(memfd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } != 0 {
        return Err(fail("F_ADD_SEALS"));
    }
    let req = UdmabufCreate { memfd: memfd as u32, flags: UDMABUF_FLAGS_CLOEXEC, offset: 0, size: size as u64 };
    // SAFETY: UDMABUF_CREATE reads one struct udmabuf_create.
    let fd = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&dev), UDMABUF_CREATE, &req) };
    if fd < 0 {
        return Err(fail("UDMABUF_CREATE"));
    }
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: maps the whole memfd shared, so the CPU sees what the device writes.
    let ptr = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, libc::MAP_SHARED, memfd, 0) };
    if ptr == libc::MAP_FAILED {
        let e = os(op, "mmap");
        // SAFETY: both fds were created above.
        unsafe { (libc::close(fd), libc::close(memfd)) };
        return Err(e);
    }
    Ok((Udmabuf { memfd, fd }, ptr.cast()))
}
