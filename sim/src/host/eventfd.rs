//! Interrupt lines: the eventfds VFIO binds to a function's MSI-X vectors. Each is a real
//! non-blocking eventfd of this process, so a program can poll or read it; the device
//! signals it by adding 1 to its counter.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// One eventfd; clones of a simulator share it.
#[derive(Debug, Clone)]
pub struct EventFd(Arc<OwnedFd>);

impl EventFd {
    /// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`; the errno when the process has no fds left.
    pub fn new() -> Result<Self, i32> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a fresh fd we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EMFILE));
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        Ok(EventFd(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// The fd number.
    pub fn raw(&self) -> i32 {
        self.0.as_raw_fd()
    }

    /// Add 1 to the counter (an interrupt).
    pub fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local buffer to an fd we own. A full counter
        // (EAGAIN) loses the interrupt, as a coalesced one would be.
        let _ = unsafe { libc::write(self.raw(), one.as_ptr().cast(), one.len()) };
    }

    /// Read and reset the counter; the errno (EAGAIN when it is 0).
    pub fn read(&self) -> Result<u64, i32> {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local buffer from an fd we own.
        let n = unsafe { libc::read(self.raw(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 8 {
            Ok(u64::from_ne_bytes(buf))
        } else {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
        }
    }
}

/// The eventfds bound to each device's MSI-X vectors.
#[derive(Debug, Clone, Default)]
pub struct Irqs {
    lines: BTreeMap<(usize, u16), EventFd>,
}

impl Irqs {
    /// Bind `fd` to vector `vector` of device `dev` (VFIO_DEVICE_SET_IRQS).
    pub fn bind(&mut self, dev: usize, vector: u16, fd: EventFd) {
        self.lines.insert((dev, vector), fd);
    }

    /// Unbind the vector.
    pub fn unbind(&mut self, dev: usize, vector: u16) {
        self.lines.remove(&(dev, vector));
    }

    /// The device raised `vector`: signal its eventfd, if one is bound.
    pub fn raise(&self, dev: usize, vector: u16) {
        if let Some(fd) = self.lines.get(&(dev, vector)) {
            fd.signal();
        }
    }
}
