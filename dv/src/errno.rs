//! Linux errno values used by the mlx5dv API, and their symbolic names.
//!
//! The values come from `libc`, so they are the target's own; mlx5dv exists only on Linux.

pub use libc::{
    EACCES, EAGAIN, EBADF, EBUSY, EEXIST, EFAULT, EINVAL, EIO, ENODEV, ENOENT, ENOMEM, ENOSPC, ENOSYS, EOPNOTSUPP,
    EOVERFLOW, EPERM, EPROTONOSUPPORT, ERANGE, EREMOTEIO,
};

/// Return the symbolic name of an errno value (`"EINVAL"`), or `None` for one this crate does
/// not use.
pub fn name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        0 => "OK",
        EACCES => "EACCES",
        EAGAIN => "EAGAIN",
        EBADF => "EBADF",
        EBUSY => "EBUSY",
        EEXIST => "EEXIST",
        EFAULT => "EFAULT",
        EINVAL => "EINVAL",
        EIO => "EIO",
        ENODEV => "ENODEV",
        ENOENT => "ENOENT",
        ENOMEM => "ENOMEM",
        ENOSPC => "ENOSPC",
        ENOSYS => "ENOSYS",
        EOPNOTSUPP => "EOPNOTSUPP",
        EOVERFLOW => "EOVERFLOW",
        EPERM => "EPERM",
        EPROTONOSUPPORT => "EPROTONOSUPPORT",
        ERANGE => "ERANGE",
        EREMOTEIO => "EREMOTEIO",
        _ => return None,
    })
}

/// Format an errno as `EINVAL (22)`, or `errno 1234` for an unknown value.
pub fn display(errno: i32) -> String {
    match name(errno) {
        Some(n) => format!("{n} ({errno})"),
        None => format!("errno {errno}"),
    }
}
