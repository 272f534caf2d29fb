//! Ports shared by the processes forked from one networked process.
//!
//! On a real host the processes that fork from one program share its NIC: two of them may both
//! bind the port's address, and the NIC tells their QPs apart by number (and the kernel's CM
//! tells their connections apart by service and communication IDs). A simulated port is a
//! UDP socket of one process, so after `fork` a child takes a socket of its own on the same
//! address (an ephemeral UDP port instead of 4791) and enters it in a table that the processes
//! forked from the same parent share (an anonymous shared mapping the parent made when it
//! joined the network). What such a child sends to a shared address goes to every process of
//! the table that shares it, itself included; each takes what is for its QPs (or its CM) and
//! drops the rest, as datagrams for no QP of theirs.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Processes (slots) the table holds.
const SLOTS: usize = 64;

/// One process's socket on a shared address: its process id (0: free), the address, the
/// UDP port.
#[repr(C)]
struct Slot {
    pid: AtomicU32,
    addr: AtomicU32,
    port: AtomicU32,
}

/// The table of the processes sharing addresses, in memory every process forked from its maker
/// sees (see the module's comment).
#[derive(Debug)]
pub struct Siblings {
    slots: *mut Slot,
}

// SAFETY: the mapping lives as long as the table and is only touched through atomics.
unsafe impl Send for Siblings {}
// SAFETY: as above.
unsafe impl Sync for Siblings {}

impl Siblings {
    /// A new, empty table; `None` when the system gives no shared mapping.
    pub fn new() -> Option<Siblings> {
        let len = SLOTS * std::mem::size_of::<Slot>();
        // SAFETY: an anonymous mapping of our own; no memory of ours is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        // A fresh anonymous mapping is zeroed: every slot free.
        (p != libc::MAP_FAILED).then(|| Siblings { slots: p.cast() })
    }

    fn slots(&self) -> &[Slot] {
        // SAFETY: SLOTS slots of atomics (any bit pattern is valid) in our mapping.
        unsafe { std::slice::from_raw_parts(self.slots, SLOTS) }
    }

    /// Enter this process's socket (`addr`, `port`); slots of processes gone, and slots of
    /// the same socket (a port the system gave again), are freed first. False when full.
    pub fn enter(&self, addr: Ipv4Addr, port: u16) -> bool {
        let me = std::process::id();
        let (a, p) = (u32::from(addr), u32::from(port));
        for s in self.slots() {
            let pid = s.pid.load(Ordering::Acquire);
            let stale = pid != 0 && pid != me && !alive(pid);
            let same = pid != 0 && s.addr.load(Ordering::Acquire) == a && s.port.load(Ordering::Acquire) == p;
            if stale || same {
                s.port.store(0, Ordering::Release);
                let _ = s.pid.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Acquire);
            }
        }
        for s in self.slots() {
            if s.pid.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                s.addr.store(a, Ordering::Release);
                s.port.store(p, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// The UDP ports of the processes sharing `addr` (each once).
    pub fn ports_of(&self, addr: Ipv4Addr) -> Vec<u16> {
        let a = u32::from(addr);
        let mut out: Vec<u16> = self
            .slots()
            .iter()
            .filter(|s| s.pid.load(Ordering::Acquire) != 0 && s.addr.load(Ordering::Acquire) == a)
            .filter_map(|s| u16::try_from(s.port.load(Ordering::Acquire)).ok())
            .filter(|&p| p != 0)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

impl Drop for Siblings {
    fn drop(&mut self) {
        // SAFETY: our mapping, of this length; nothing refers to it after the table goes.
        unsafe { libc::munmap(self.slots.cast(), SLOTS * std::mem::size_of::<Slot>()) };
    }
}

/// Whether process `pid` lives (a zombie counts: its parent has not reaped it yet).
fn alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(p, 0) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_entered_twice_is_listed_once() {
        let t = Siblings::new();
        assert!(t.is_some(), "an anonymous shared mapping");
        let Some(t) = t else { return };
        let a = Ipv4Addr::new(127, 0, 52, 1);
        assert!(t.enter(a, 40_000));
        assert!(t.enter(a, 40_000));
        assert!(t.enter(a, 40_001));
        assert_eq!(t.ports_of(a), vec![40_000, 40_001]);
        assert!(t.ports_of(Ipv4Addr::new(127, 0, 52, 2)).is_empty());
    }
}
