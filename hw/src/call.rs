//! Helpers of every C call: the errno of a failure, a return code as a result, a function
//! the installed libmlx5 lacks. A leaf: it uses no other module of the crate.

use std::ffi::c_int;

use mlx5_dv::errno::{EIO, EOPNOTSUPP};
use mlx5_dv::{Error, Op, Result};
use rdma_sys::ibv_context;

/// The errno of the last failed C call; a call that failed without setting errno reads as EIO.
pub(crate) fn last_errno() -> i32 {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(0) | None => EIO,
        Some(e) => e,
    }
}

pub(crate) fn c_call(op: Op, rc: c_int, what: &str) -> Result<()> {
    match rc {
        0 => Ok(()),
        e if e > 0 => Err(Error::new(op, e, format!("{what} failed"))),
        _ => Err(Error::new(op, last_errno(), format!("{what} failed"))),
    }
}

pub(crate) fn missing(op: Op, name: &str) -> Error {
    Error::new(op, EOPNOTSUPP, format!("the installed libmlx5 has no {name}"))
}

/// Async events are read without blocking: the context's event fd is made non-blocking.
pub(crate) fn make_async_fd_nonblocking(ctx: *mut ibv_context) {
    // SAFETY: ctx is an open context; async_fd is a file descriptor it owns.
    unsafe {
        let fd = (*ctx).async_fd;
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}
