//! Options and fcntl of datagram rsockets: an option of a level other than SOL_RDMA goes to
//! the UDP socket first (its errno when the kernel refuses it), then to the rsocket's own
//! table, as rsocket.c does.

use std::ffi::{c_int, c_void};

use super::{Shared, lock};
use crate::rsocket::{RDMA_INLINE, RDMA_IOMAPSIZE, RDMA_ROUTE, RDMA_RQSIZE, RDMA_SQSIZE, SNDLOWAT, SOL_RDMA};

const MAX_QUEUE: usize = 0xfffe;

fn is_flag(level: c_int, name: c_int) -> bool {
    matches!(
        (level, name),
        (libc::SOL_SOCKET, libc::SO_REUSEADDR | libc::SO_KEEPALIVE | libc::SO_OOBINLINE | libc::SO_LINGER)
    )
}

/// The UDP socket's part of `rsetsockopt` (none for SOL_RDMA): Err(the kernel's errno).
///
/// # Safety
/// `optval` is NULL or `optlen` readable bytes.
pub(crate) unsafe fn kernel_setsockopt(
    s: &Shared,
    level: c_int,
    name: c_int,
    optval: *const c_void,
    optlen: libc::socklen_t,
) -> Result<(), c_int> {
    if level == SOL_RDMA {
        return Ok(());
    }
    let fd = lock(s).fd;
    // SAFETY: the caller's value, passed on.
    if unsafe { libc::setsockopt(fd, level, name, optval, optlen) } != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
    }
    Ok(())
}

/// The rsocket's part of `rsetsockopt`: EINVAL for SOL_RDMA once the socket is sized,
/// EOPNOTSUPP for an option it does not keep.
pub(crate) fn set_opt(s: &Shared, level: c_int, name: c_int, v: c_int) -> Result<(), c_int> {
    let mut g = lock(s);
    let n = v.max(0) as usize;
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            if !g.has_qps() {
                g.rcvbuf = n << 1;
            }
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            if !g.started() {
                g.sndbuf = n << 1;
            }
            if g.sndbuf < SNDLOWAT {
                g.sndbuf = SNDLOWAT << 1;
            }
        }
        (libc::IPPROTO_IP, libc::IP_TOS) => {
            g.flags.insert((level, name), v);
        }
        _ if is_flag(level, name) => {
            g.flags.insert((level, name), c_int::from(v != 0));
        }
        (SOL_RDMA, _) if g.started() => return Err(libc::EINVAL),
        (SOL_RDMA, RDMA_SQSIZE) => g.sq = n.min(MAX_QUEUE),
        (SOL_RDMA, RDMA_RQSIZE) => g.rq = n.min(MAX_QUEUE),
        (SOL_RDMA, RDMA_INLINE) => g.inline = n.min(MAX_QUEUE),
        // Stream-only settings rsocket.c takes and a datagram socket never uses.
        (SOL_RDMA, RDMA_IOMAPSIZE | RDMA_ROUTE) => {}
        _ => return Err(libc::EOPNOTSUPP),
    }
    Ok(())
}

/// An option's value (`rgetsockopt`): EOPNOTSUPP for one it does not keep.
pub(crate) fn get_opt(s: &Shared, level: c_int, name: c_int) -> Result<c_int, c_int> {
    let g = lock(s);
    let n = |x: usize| c_int::try_from(x).unwrap_or(c_int::MAX);
    Ok(match (level, name) {
        (libc::SOL_SOCKET, libc::SO_ERROR) => 0,
        (libc::SOL_SOCKET, libc::SO_TYPE) => libc::SOCK_DGRAM,
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => n(g.rcvbuf),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => n(g.sndbuf),
        (libc::SOL_SOCKET, libc::SO_LINGER) => g.flags.get(&(level, name)).copied().unwrap_or(1),
        (libc::IPPROTO_IP, libc::IP_TOS) => g.flags.get(&(level, name)).copied().unwrap_or(0),
        _ if is_flag(level, name) => g.flags.get(&(level, name)).copied().unwrap_or(0),
        (SOL_RDMA, RDMA_SQSIZE) => n(g.sq),
        (SOL_RDMA, RDMA_RQSIZE) => n(g.rq),
        (SOL_RDMA, RDMA_INLINE) => n(g.inline),
        (SOL_RDMA, RDMA_IOMAPSIZE) => 0,
        _ => return Err(libc::EOPNOTSUPP),
    })
}

/// Run `f` on the socket's F_SETFL and F_SETFD flags (`rfcntl`).
pub(crate) fn with_flags(s: &Shared, f: impl FnOnce(&mut c_int, &mut c_int) -> c_int) -> c_int {
    let mut g = lock(s);
    let g = &mut *g;
    f(&mut g.fs_flags, &mut g.fd_flags)
}
