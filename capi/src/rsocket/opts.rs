//! Socket options and fcntl of rsockets, with rsocket.c's levels and answers: ENOTSUP
//! (EOPNOTSUPP) for an option it does not know, EINVAL for the SOL_RDMA ones once
//! connecting began; SO_RCVBUF/SO_SNDBUF doubled as Linux does.

use std::ffi::{c_int, c_long, c_void};

use super::sock::{QUEUE_RANGE, Sock, State, lock, lookup};
use super::{RDMA_INLINE, RDMA_IOMAPSIZE, RDMA_ROUTE, RDMA_RQSIZE, RDMA_SQSIZE, SNDLOWAT, SOL_RDMA};
use crate::errno::minus_one;

/// The kept on/off options of each level.
fn is_flag(level: c_int, name: c_int) -> bool {
    matches!(
        (level, name),
        (libc::SOL_SOCKET, libc::SO_REUSEADDR | libc::SO_KEEPALIVE | libc::SO_OOBINLINE | libc::SO_LINGER)
            | (libc::IPPROTO_TCP, libc::TCP_NODELAY)
            | (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)
    )
}

/// Set an option on a locked socket: Err(errno).
fn set(g: &mut Sock, level: c_int, name: c_int, v: c_int) -> Result<(), c_int> {
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            if g.conn.is_none() {
                g.rcvbuf = (v.max(0) as usize) << 1;
            }
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            if g.conn.is_none() {
                g.sndbuf = ((v.max(0) as usize) << 1).max(SNDLOWAT << 1);
            }
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => {
            if v <= 0 {
                return Err(libc::EINVAL);
            }
            g.keepidle = v;
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL | libc::TCP_MAXSEG | libc::TCP_CONGESTION) => {}
        _ if is_flag(level, name) => {
            g.flags.insert((level, name), c_int::from(v != 0));
        }
        (SOL_RDMA, _) if g.state != State::Init && g.state != State::Bound && g.state != State::Listening => {
            return Err(libc::EINVAL);
        }
        (SOL_RDMA, RDMA_SQSIZE) => g.sq = (v.max(0) as usize).clamp(QUEUE_RANGE.0, QUEUE_RANGE.1),
        (SOL_RDMA, RDMA_RQSIZE) => g.rq = (v.max(0) as usize).clamp(QUEUE_RANGE.0, QUEUE_RANGE.1),
        (SOL_RDMA, RDMA_INLINE) => g.inline = v.max(0) as usize,
        (SOL_RDMA, RDMA_IOMAPSIZE) => g.iomap = (v.max(0) as usize).min(255),
        (SOL_RDMA, RDMA_ROUTE) => {}
        _ => return Err(libc::EOPNOTSUPP),
    }
    Ok(())
}

/// `rsetsockopt`: EBADF, EFAULT for no value, EINVAL for a value shorter than an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rsetsockopt(
    socket: c_int,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: libc::socklen_t,
) -> c_int {
    let dgram = super::dgram::lookup(socket);
    let stream = lookup(socket);
    if dgram.is_none() && stream.is_none() {
        return minus_one(libc::EBADF);
    }
    if let Some(d) = &dgram {
        // SAFETY: the caller's value, for the UDP socket.
        if let Err(e) = unsafe { super::dgram::kernel_setsockopt(d, level, optname, optval, optlen) } {
            return minus_one(e);
        }
    }
    if optval.is_null() {
        return minus_one(libc::EFAULT);
    }
    if (optlen as usize) < std::mem::size_of::<c_int>() {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: the caller's value of optlen bytes (at least an int; SO_LINGER's l_onoff).
    let v = unsafe { std::ptr::read_unaligned(optval.cast::<c_int>()) };
    let r = match (dgram, stream) {
        (Some(d), _) => super::dgram::set_opt(&d, level, optname, v),
        (None, Some(s)) => set(&mut lock(&s), level, optname, v),
        (None, None) => Err(libc::EBADF),
    };
    match r {
        Ok(()) => 0,
        Err(e) => minus_one(e),
    }
}

/// An option's value on a locked socket (SO_ERROR taken): Err(errno).
fn get(g: &mut Sock, level: c_int, name: c_int) -> Result<c_int, c_int> {
    let n = |x: usize| c_int::try_from(x).unwrap_or(c_int::MAX);
    Ok(match (level, name) {
        (libc::SOL_SOCKET, libc::SO_ERROR) => std::mem::take(&mut g.err),
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => n(g.rcvbuf),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => n(g.sndbuf),
        (libc::SOL_SOCKET, libc::SO_TYPE) => libc::SOCK_STREAM,
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => g.keepidle,
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => 2048,
        // rsocket.c reads an unset SO_LINGER as on (with no time).
        (libc::SOL_SOCKET, libc::SO_LINGER) => g.flags.get(&(level, name)).copied().unwrap_or(1),
        _ if is_flag(level, name) => g.flags.get(&(level, name)).copied().unwrap_or(0),
        (SOL_RDMA, RDMA_SQSIZE) => n(g.sq),
        (SOL_RDMA, RDMA_RQSIZE) => n(g.rq),
        (SOL_RDMA, RDMA_INLINE) => n(g.inline),
        (SOL_RDMA, RDMA_IOMAPSIZE) => n(g.iomap),
        _ => return Err(libc::EOPNOTSUPP),
    })
}

/// `rgetsockopt`: an int for each option it knows (SO_LINGER a `struct linger`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rgetsockopt(
    socket: c_int,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut libc::socklen_t,
) -> c_int {
    let dgram = super::dgram::lookup(socket);
    let stream = lookup(socket);
    if dgram.is_none() && stream.is_none() {
        return minus_one(libc::EBADF);
    }
    if optval.is_null() || optlen.is_null() {
        return minus_one(libc::EFAULT);
    }
    let v = match (dgram, stream) {
        (Some(d), _) => super::dgram::get_opt(&d, level, optname),
        (None, Some(s)) => get(&mut lock(&s), level, optname),
        (None, None) => Err(libc::EBADF),
    };
    let v = match v {
        Ok(v) => v,
        Err(e) => return minus_one(e),
    };
    // SAFETY: the caller's buffer of *optlen bytes.
    unsafe {
        if (level, optname) == (libc::SOL_SOCKET, libc::SO_LINGER) {
            if (*optlen as usize) < std::mem::size_of::<libc::linger>() {
                return minus_one(libc::EINVAL);
            }
            std::ptr::write_unaligned(optval.cast(), libc::linger { l_onoff: v, l_linger: 0 });
            *optlen = std::mem::size_of::<libc::linger>() as libc::socklen_t;
            return 0;
        }
        if (*optlen as usize) < std::mem::size_of::<c_int>() {
            return minus_one(libc::EINVAL);
        }
        std::ptr::write_unaligned(optval.cast::<c_int>(), v);
        *optlen = std::mem::size_of::<c_int>() as libc::socklen_t;
    }
    0
}

/// `rfcntl`: F_GETFL/F_SETFL (O_NONBLOCK makes the socket's calls non-blocking) and
/// F_GETFD/F_SETFD; EOPNOTSUPP for other commands. (Variadic in C: the one int argument
/// comes where the third parameter's register is, on the x86-64 and AArch64 ABIs.)
#[unsafe(no_mangle)]
pub extern "C" fn rfcntl(socket: c_int, cmd: c_int, arg: c_long) -> c_int {
    if let Some(d) = super::dgram::lookup(socket) {
        return super::dgram::with_flags(&d, |fs, fd| fcntl_on(fs, fd, cmd, arg));
    }
    let Some(s) = lookup(socket) else { return minus_one(libc::EBADF) };
    let mut g = lock(&s);
    let g = &mut *g;
    fcntl_on(&mut g.fs_flags, &mut g.fd_flags, cmd, arg)
}

/// One fcntl command on a socket's F_SETFL and F_SETFD flags.
fn fcntl_on(fs_flags: &mut c_int, fd_flags: &mut c_int, cmd: c_int, arg: c_long) -> c_int {
    match cmd {
        libc::F_GETFL => *fs_flags,
        libc::F_SETFL => {
            *fs_flags = arg as c_int;
            0
        }
        libc::F_GETFD => *fd_flags,
        libc::F_SETFD => {
            *fd_flags = arg as c_int;
            0
        }
        _ => minus_one(libc::EOPNOTSUPP),
    }
}
