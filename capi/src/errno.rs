//! How a C call reports failure: `errno` with NULL or -1, or the errno as the return value.

use std::ffi::c_int;
use std::ptr;

use mlx5_dv::Error;

/// Set the calling thread's `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// NULL with `errno` set: the failure of a call that returns an object.
pub(crate) fn null<T>(e: c_int) -> *mut T {
    set_errno(e);
    ptr::null_mut()
}

/// -1 with `errno` set: the failure of a call that returns a status.
pub(crate) fn minus_one(e: c_int) -> c_int {
    set_errno(e);
    -1
}

/// The errno of a trait call's error, also left in `errno` (some callers read both).
pub(crate) fn code(e: &Error) -> c_int {
    let n = e.errno();
    set_errno(n);
    n
}
