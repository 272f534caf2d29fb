//! Waiting on rsockets: `rpoll` and `rselect` (rsockets and ordinary fds together), and the
//! waits of blocking calls. A wait polls the socket's CM channel and CQ, spinning briefly
//! and then sleeping in growing steps (up to 1 ms): the CQs have no fd the kernel could wait
//! on for both sockets and channels at once.

use std::ffi::c_int;
use std::time::{Duration, Instant};

use super::Backoff;
use super::sock::{Shared, Sock, State, lock, lookup};
use crate::errno::minus_one;

/// How long rshutdown waits for a credit and for its sends.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Make progress on `s` until `cond` holds: Ok, or Err(EAGAIN) at once if the call may not
/// block (O_NONBLOCK or MSG_DONTWAIT in `flags`) and `cond` does not hold yet.
pub(crate) fn until(s: &Shared, flags: c_int, mut cond: impl FnMut(&mut Sock) -> bool) -> Result<(), c_int> {
    let mut b = Backoff::new();
    loop {
        {
            let mut g = lock(s);
            g.progress();
            if cond(&mut g) {
                return Ok(());
            }
            if !g.blocking(flags) {
                return Err(libc::EAGAIN);
            }
        }
        b.pause();
    }
}

/// As [`until`] for a blocking wait of at most [`SHUTDOWN_WAIT`]: whether `cond` came.
pub(crate) fn for_a_while(s: &Shared, mut cond: impl FnMut(&mut Sock) -> bool) -> bool {
    let end = Instant::now() + SHUTDOWN_WAIT;
    let mut b = Backoff::new();
    while Instant::now() < end {
        {
            let mut g = lock(s);
            g.progress();
            if cond(&mut g) {
                return true;
            }
        }
        b.pause();
    }
    false
}

/// The poll events of an rsocket now.
fn revents(g: &mut Sock) -> i16 {
    g.progress();
    let (mut r, c) = (0, g.conn.as_ref());
    match g.state {
        State::Listening if !g.backlog.is_empty() => r |= libc::POLLIN,
        State::Connected => {
            if let Some(c) = c {
                if c.readable() || !g.readable {
                    r |= libc::POLLIN;
                }
                if c.can_send() && g.writable {
                    r |= libc::POLLOUT;
                }
            }
        }
        // Bytes that came before the disconnect are read first: POLLHUP only once they are
        // gone (as TCP; rsocket.c says POLLHUP at once, which fails a poller that treats it
        // as an error before it reads the last bytes).
        State::Disconnected if c.is_some_and(|c| c.has_data()) => r |= libc::POLLIN,
        State::Disconnected => r |= libc::POLLIN | libc::POLLOUT | libc::POLLHUP,
        State::ConnectError => r |= libc::POLLOUT | libc::POLLERR,
        _ => {}
    }
    r
}

/// `rpoll`: rsockets and other fds in one array; `timeout` in ms (-1: none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rpoll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    if fds.is_null() && nfds > 0 {
        return minus_one(libc::EFAULT);
    }
    let fds = if nfds == 0 {
        &mut [][..]
    } else {
        // SAFETY: the caller's array of nfds entries.
        unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) }
    };
    let end = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    let mut b = Backoff::new();
    loop {
        let mut count = 0;
        for p in fds.iter_mut() {
            p.revents = 0;
            if p.fd < 0 {
                continue;
            }
            if let Some(s) = lookup(p.fd) {
                let all = revents(&mut lock(&s));
                p.revents = all & (p.events | libc::POLLERR | libc::POLLHUP);
            } else if let Some(d) = super::dgram::lookup(p.fd) {
                p.revents = super::dgram::revents(&d) & p.events;
            } else {
                // SAFETY: one pollfd of the caller's.
                if unsafe { libc::poll(p, 1, 0) } < 0 {
                    return -1;
                }
            }
            if p.revents != 0 {
                count += 1;
            }
        }
        if count > 0 || end.is_some_and(|e| Instant::now() >= e) {
            return count;
        }
        b.pause();
    }
}

/// `rselect`: `rpoll` over the fds of three sets.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rselect(
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    if !(0..=libc::FD_SETSIZE as c_int).contains(&nfds) {
        return minus_one(libc::EINVAL);
    }
    let sets = [(readfds, libc::POLLIN), (writefds, libc::POLLOUT), (exceptfds, libc::POLLPRI)];
    let mut polls: Vec<libc::pollfd> = Vec::new();
    for fd in 0..nfds {
        let mut events = 0;
        for (set, ev) in sets {
            // SAFETY: the caller's set, if any.
            if !set.is_null() && unsafe { libc::FD_ISSET(fd, set) } {
                events |= ev;
            }
        }
        if events != 0 {
            polls.push(libc::pollfd { fd, events, revents: 0 });
        }
    }
    let ms = if timeout.is_null() {
        -1
    } else {
        // SAFETY: the caller's timeval.
        let t = unsafe { *timeout };
        if t.tv_sec < 0 || t.tv_usec < 0 {
            return minus_one(libc::EINVAL);
        }
        c_int::try_from(t.tv_sec * 1000 + (t.tv_usec + 999) / 1000).unwrap_or(c_int::MAX)
    };
    // SAFETY: our array.
    let r = unsafe { rpoll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, ms) };
    if r < 0 {
        return r;
    }
    let mut count = 0;
    for (set, ev) in sets {
        if set.is_null() {
            continue;
        }
        for p in &polls {
            // SAFETY: the caller's set.
            unsafe {
                let hit = p.revents & (ev | libc::POLLERR | libc::POLLHUP) != 0 && p.events & ev != 0;
                if hit {
                    count += 1;
                } else {
                    libc::FD_CLR(p.fd, set);
                }
            }
        }
    }
    count
}
