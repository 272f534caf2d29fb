//! Events a program waits for on a file descriptor: completion channels (an armed CQ's
//! completion) and asynchronous events (the simulator's events of a context), each queued
//! behind an eventfd.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::event_type;
use rdma_sys::*;

use crate::errno::{minus_one, null};
use crate::objects::Channel;
use crate::state::{Shim, key, with};

impl Shim {
    /// Move the simulator's pending events of every context behind the contexts' fds.
    pub(crate) fn collect_events(&mut self) {
        let handles: Vec<(usize, mlx5_dv::ContextHandle)> = self.contexts.iter().map(|(k, c)| (*k, c.handle)).collect();
        for (k, h) in handles {
            while let Ok(Some(ev)) = self.sim.get_async_event(h) {
                // An object's events leave with it (the kernel drops them on destroy), so one
                // the shim no longer knows is not delivered: a program would read through a
                // null element.
                let element = match ev.event_type {
                    event_type::CQ_ERR => {
                        ev.cq.and_then(|cq| self.cqs.iter().find(|(_, c)| c.cq.handle == cq)).map(|(k, _)| *k as u64)
                    }
                    event_type::SRQ_LIMIT_REACHED | 14 => {
                        ev.srq.and_then(|h| self.srqs.iter().find(|(_, s)| s.srq.handle == h)).map(|(k, _)| *k as u64)
                    }
                    1..=7 | 16 => {
                        ev.qp_num.and_then(|n| self.qps.iter().find(|(_, q)| q.qp.qp_num == n)).map(|(k, _)| *k as u64)
                    }
                    // Port events name port 1, the simulated devices' only port.
                    _ => Some(1),
                };
                let Some(element) = element else { continue };
                if let Some(c) = self.contexts.get_mut(&k) {
                    c.events.push_back((ev.event_type, element));
                    let one: u64 = 1;
                    // SAFETY: the context's eventfd; an 8-byte write.
                    unsafe { libc::write(c.c.context.async_fd, ptr::from_ref(&one).cast(), 8) };
                }
            }
        }
    }
}

impl Shim {
    /// Forget the events of an object being destroyed that the program has not read (as
    /// `ib_uverbs_release_uevent`). Their eventfd counts stay: `ibv_get_async_event` reads
    /// past them.
    pub(crate) fn drop_events_of(&mut self, object: usize) {
        for c in self.contexts.values_mut() {
            c.events.retain(|(t, element)| {
                let names_an_object =
                    matches!(*t, event_type::CQ_ERR | event_type::SRQ_LIMIT_REACHED | 14 | 1..=7 | 16);
                !(names_an_object && *element == object as u64)
            });
        }
    }
}

/// `ibv_get_async_event`: waits on the context's fd (unless the program made it
/// non-blocking: then -1 with EAGAIN when no event waits).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(context: *mut ibv_context, event: *mut ibv_async_event) -> c_int {
    let fd = with(
        |_| -1,
        |s| {
            s.collect_events();
            s.contexts.get(&key(context)).map_or(-1, |c| c.c.context.async_fd)
        },
    );
    if fd < 0 || event.is_null() {
        return minus_one(libc::EINVAL);
    }
    crate::state::device_thread::stops_polling();
    loop {
        let mut v: u64 = 0;
        // SAFETY: an 8-byte read of the eventfd, outside the lock (it may block).
        if unsafe { libc::read(fd, ptr::from_mut(&mut v).cast(), 8) } != 8 {
            return -1;
        }
        let got = with(
            |e| Some(minus_one(e)),
            |s| {
                let (t, element) = s.contexts.get_mut(&key(context)).and_then(|c| c.events.pop_front())?;
                // SAFETY: the caller's event; the union is 8 bytes and event_type a C enum (u32).
                unsafe {
                    ptr::write_bytes(event, 0, 1);
                    ptr::addr_of_mut!((*event).element).cast::<u64>().write(element);
                    ptr::addr_of_mut!((*event).event_type).cast::<u32>().write(t);
                }
                Some(0)
            },
        );
        if let Some(rc) = got {
            return rc;
        }
        // The count was an event dropped with its object: a blocking fd waits for the next
        // one, a non-blocking one says none waits.
        // SAFETY: fcntl on the context's own fd.
        if unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0 {
            return minus_one(libc::EAGAIN);
        }
    }
}

/// `ibv_ack_async_event`: nothing to release.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

/// `ibv_create_comp_channel`: its fd is an eventfd, readable while events wait.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(context: *mut ibv_context) -> *mut ibv_comp_channel {
    with(null, |s| {
        if s.context(context).is_err() {
            return null(libc::EINVAL);
        }
        // SAFETY: eventfd has no memory preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if fd < 0 {
            return null(libc::EMFILE);
        }
        let mut c = Box::new(ibv_comp_channel { context, fd, refcnt: 0 });
        let p: *mut ibv_comp_channel = &mut *c;
        s.channels.insert(key(p), Channel { c, fired: VecDeque::new() });
        p
    })
}

/// `ibv_destroy_comp_channel`: 0, or EBUSY (a positive errno, as libibverbs returns it) while
/// a CQ uses it. A channel the shim does not know is EINVAL, where libibverbs would read
/// freed memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(ch) = s.channels.get(&key(channel)) else { return libc::EINVAL };
            if ch.c.refcnt > 0 {
                return libc::EBUSY;
            }
            if let Some(ch) = s.channels.remove(&key(channel)) {
                // SAFETY: the channel's own fd, closed once.
                unsafe { libc::close(ch.c.fd) };
            }
            0
        },
    )
}

/// `ibv_get_cq_event`: waits (unless the program made the fd non-blocking) for the next CQ
/// event of the channel.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    let fd = with(|_| -1, |s| s.channels.get(&key(channel)).map_or(-1, |c| c.c.fd));
    if fd < 0 || cq.is_null() || cq_context.is_null() {
        return minus_one(libc::EINVAL);
    }
    let mut v: u64 = 0;
    // SAFETY: an 8-byte read of the eventfd, outside the lock (it may block).
    if unsafe { libc::read(fd, ptr::from_mut(&mut v).cast(), 8) } != 8 {
        return -1;
    }
    with(minus_one, |s| {
        let Some(k) = s.channels.get_mut(&key(channel)).and_then(|c| c.fired.pop_front()) else {
            return minus_one(libc::EAGAIN);
        };
        let Some(c) = s.cqs.get_mut(&k) else { return minus_one(libc::EAGAIN) };
        // SAFETY: the caller's out-parameters.
        unsafe {
            *cq = ptr::from_mut(&mut *c.c).cast();
            *cq_context = c.c.cq_context;
        }
        // mlx5_cq_event: the next arm carries the next sequence number.
        let handle = c.cq;
        let _ = s.sim.simulator_mut().cq_event(&handle);
        0
    })
}

/// `ibv_ack_cq_events`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    with(
        |_| (),
        |s| {
            if let Some(c) = s.cqs.get_mut(&key(cq)) {
                c.c.comp_events_completed = c.c.comp_events_completed.wrapping_add(nevents);
            }
        },
    )
}
