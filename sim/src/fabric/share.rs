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
/// The pid of a slot one process is freeing: only the process that moved it there writes its
/// port, so a slot another process claims in the meantime is never clobbered.
const FREEING: u32 = u32::MAX;

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
            if pid == 0 || pid == FREEING {
                continue;
            }
            let stale = pid != me && !alive(pid);
            let same = s.addr.load(Ordering::Acquire) == a && s.port.load(Ordering::Acquire) == p;
            // Siblings enter at once after a fork, and may both find the same stale slot:
            // one wins it, and the port is cleared only by the winner.
            if (stale || same) && s.pid.compare_exchange(pid, FREEING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                s.port.store(0, Ordering::Release);
                s.pid.store(0, Ordering::Release);
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
            .filter(|s| !matches!(s.pid.load(Ordering::Acquire), 0 | FREEING) && s.addr.load(Ordering::Acquire) == a)
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

    #[test]
    fn a_slot_another_process_is_freeing_is_left_to_it() {
        let t = Siblings::new();
        assert!(t.is_some(), "an anonymous shared mapping");
        let Some(t) = t else { return };
        let a = Ipv4Addr::new(127, 0, 52, 1);
        let first = &t.slots()[0];
        first.pid.store(FREEING, Ordering::Release);
        first.addr.store(u32::from(a), Ordering::Release);
        first.port.store(7, Ordering::Release);
        assert!(t.enter(a, 40_000));
        // Only the process that marked the slot writes it: its port and mark stay.
        assert_eq!(first.pid.load(Ordering::Acquire), FREEING);
        assert_eq!(first.port.load(Ordering::Acquire), 7);
        assert_eq!(t.ports_of(a), vec![40_000]);
    }

    #[test]
    fn a_dropped_table_gives_its_mapping_back() {
        let t = Siblings::new();
        assert!(t.is_some(), "an anonymous shared mapping");
        let Some(t) = t else { return };
        let (at, len) = (t.slots.cast::<libc::c_void>(), SLOTS * std::mem::size_of::<Slot>());
        // SAFETY: msync only asks the kernel about the range; ENOMEM when it is not mapped.
        assert_eq!(unsafe { libc::msync(at, len, libc::MS_ASYNC) }, 0);
        // Dropped and checked in a child: its one thread is the only one that could map the
        // freed range again, where the test harness's other threads map memory at any time.
        // SAFETY: the child only unmaps, asks msync and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            drop(t);
            // SAFETY: as above.
            let gone = unsafe { libc::msync(at, len, libc::MS_ASYNC) } == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOMEM);
            // SAFETY: ends the forked child without running the parent's destructors.
            unsafe { libc::_exit(i32::from(!gone)) };
        }
        assert!(pid > 0, "fork");
        let mut status = 0;
        // SAFETY: waits for a child of ours.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "the child exited");
        assert_eq!(libc::WEXITSTATUS(status), 0, "the range is unmapped after the drop");
    }

    /// The pid of a process that has exited and been reaped.
    fn dead_pid() -> u32 {
        let child = std::process::Command::new("true").spawn();
        let Ok(mut child) = child else { return u32::MAX - 1 };
        let id = child.id();
        let _ = child.wait();
        id
    }

    #[test]
    fn siblings_entering_at_once_over_stale_slots_both_stay_listed() -> Result<(), &'static str> {
        let a = Ipv4Addr::new(127, 0, 52, 1);
        for round in 0..40u16 {
            let t = Siblings::new().ok_or("an anonymous shared mapping")?;
            // Every slot held by a process gone, as after earlier children exited.
            let dead = dead_pid();
            for s in t.slots() {
                s.pid.store(dead, Ordering::Release);
                s.addr.store(u32::from(a), Ordering::Release);
                s.port.store(1, Ordering::Release);
            }
            // slots()[0].pid of `go`: 1 starts the children, 2 lets them leave; [1]: entered.
            let go = Siblings::new().ok_or("an anonymous shared mapping")?;
            let (flag, entered) = (&go.slots()[0].pid, &go.slots()[1].pid);
            let mut kids = Vec::new();
            for k in 0..2u16 {
                // SAFETY: the child touches only atomics in shared mappings, the process id
                // and the system calls of `enter`, then leaves with `_exit`.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    while flag.load(Ordering::Acquire) == 0 {
                        std::hint::spin_loop();
                    }
                    let ok = t.enter(a, 50_000 + round * 2 + k);
                    entered.fetch_add(1, Ordering::AcqRel);
                    // Alive until the parent has looked, as siblings are while they talk.
                    while flag.load(Ordering::Acquire) != 2 {
                        std::thread::yield_now();
                    }
                    // SAFETY: ends the forked child without running the parent's destructors.
                    unsafe { libc::_exit(i32::from(!ok)) };
                }
                assert!(pid > 0, "fork");
                kids.push(pid);
            }
            flag.store(1, Ordering::Release);
            while entered.load(Ordering::Acquire) < 2 {
                std::thread::yield_now();
            }
            let listed = t.ports_of(a);
            flag.store(2, Ordering::Release);
            for pid in kids {
                let mut status = 0;
                // SAFETY: waits for a child of ours.
                assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
                assert_eq!(status, 0, "the child entered its socket");
            }
            assert_eq!(listed, vec![50_000 + round * 2, 50_001 + round * 2], "round {round}");
        }
        Ok(())
    }
}
