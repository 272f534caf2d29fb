//! The device thread of a free-running simulator (the C ABI's default): it runs the simulated
//! devices while the program's threads only ring and return.
//!
//! It wakes on a doorbell rung through the API (the simulator's [`mlx5_sim::Wake`] writes an
//! eventfd), and looks on its own for doorbells a program rang with stores of its own: the
//! doorbell record of every QP, and the registers of the DEVX UAR pages. Looking takes no
//! lock: the thread reads those words where they are, from a list it rebuilds under the
//! shim's lock, and takes the lock to run the devices only when a word moved or the eventfd
//! fired. A call that frees such memory first empties the list ([`forget`]), under a write
//! lock the looking holds for reading, so the thread never reads memory that is gone. After
//! work it keeps looking without pause for a while, then every 20 µs, backing off to every
//! 10 ms while nothing moves. It ends when the last context closes; a new context starts it
//! again.

use std::ffi::c_int;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Shim, shim, try_shim};

/// How long the thread waits after work, before backing off.
const FAST: Duration = Duration::from_micros(20);
/// Busy-wait iterations before a thread yields its core to the other.
const SPINS: u32 = 100;
/// The longest wait while quiet.
const SLOW: Duration = Duration::from_millis(10);
/// How long after a program's empty poll on the network the program counts as polling: the
/// thread then leaves the ports' sockets to its polls (a datagram waking both costs each half
/// round trip a context switch, on a small machine a preempted poller).
const POLLING: Duration = Duration::from_micros(50);
/// How long after the program's last store of its own the thread stays eager.
const STORES_LAST: Duration = Duration::from_millis(50);
/// How long the thread keeps looking without pause after work.
const EAGER: Duration = Duration::from_micros(200);

/// The thread runs (set and cleared under the shim's lock).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// The eventfd the thread waits on; -1 until made.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// The thread waits for the shim's lock.
static WANTED: AtomicBool = AtomicBool::new(false);
/// A doorbell was rung through the API since the thread last looked.
static RUNG: AtomicBool = AtomicBool::new(false);
/// The thread has work: from a doorbell seen until a pass finds the devices still.
static BUSY: AtomicBool = AtomicBool::new(false);
/// The thread sleeps on the eventfd: a doorbell must write it.
static ASLEEP: AtomicBool = AtomicBool::new(false);
/// The words the thread looks at without the shim's lock.
static WATCHED: RwLock<Vec<Word>> = RwLock::new(Vec::new());
/// The networked ports' sockets, which the thread waits on with the eventfd.
static SOCKETS: RwLock<Vec<c_int>> = RwLock::new(Vec::new());
/// The process talks to another over the network (a datagram went out or came in).
static TALKING: AtomicBool = AtomicBool::new(false);
/// When a program's thread last polled an empty CQ on the network (nanoseconds after
/// [`epoch`]; 0: not since it last armed a CQ or waited for an event).
static POLLED_AT: AtomicU64 = AtomicU64::new(0);
/// A responder holds an ACK back for the next pass (see `Simulator::tick`).
static ACKS_HELD: AtomicBool = AtomicBool::new(false);

/// The clock [`POLLED_AT`] counts from.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since [`epoch`], at least 1.
fn now_ns() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// How much longer a program's thread counts as polling on the network (`None`: it does not):
/// it then runs the passes that take datagrams and send what it posts, and the thread leaves
/// the sockets to it.
fn polling_left() -> Option<Duration> {
    let at = POLLED_AT.load(Ordering::Relaxed);
    let since = now_ns().saturating_sub(at);
    let window = POLLING.as_nanos() as u64;
    (at != 0 && since < window).then(|| Duration::from_nanos(window - since))
}

/// Whether a program's thread polls on the network now (see [`polling_left`]).
fn program_polls() -> bool {
    polling_left().is_some()
}

/// A word of the program's memory a doorbell moves.
#[derive(Debug, Clone, Copy)]
struct Word {
    addr: usize,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A doorbell record's counter: a change is a doorbell.
    Counter,
    /// A UAR register the watcher clears: not zero is a store waiting.
    Register32,
    /// As `Register32`, eight bytes.
    Register64,
}

/// What the simulator calls after a doorbell rung through the API: note it for the thread,
/// and write the wake eventfd if it sleeps (a looking thread sees the note; the system call
/// would cost each post a microsecond).
pub(crate) fn ring() {
    RUNG.store(true, Ordering::SeqCst);
    // A program that polls runs the pass itself; the thread looks at the note when its wait
    // ends, within the polling window.
    if !ASLEEP.load(Ordering::SeqCst) || program_polls() {
        return;
    }
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: an eventfd of ours; an 8-byte write that fails only when the counter is
        // saturated, which still leaves it readable.
        unsafe { libc::write(fd, std::ptr::from_ref(&one).cast(), 8) };
    }
}

/// Called before a post through the API writes its doorbell record: noted as a doorbell
/// first, so that the thread, which looks at the record before the note, never takes the
/// library's own store for one the program made itself (and spins for it).
pub(crate) fn posting() {
    if TALKING.load(Ordering::Acquire) {
        RUNG.store(true, Ordering::SeqCst);
    }
}

/// Called by a program's thread that found nothing to do (an empty poll) and holds no lock:
/// while the device has work (a doorbell not yet seen, a pass wanted or under way), step
/// aside, so that a program spinning on a CQ cannot starve the device that would fill it,
/// for the lock or, on a machine with fewer free cores than threads, for the processor.
pub(crate) fn let_it_run() {
    let waiting = || WANTED.load(Ordering::Acquire) || BUSY.load(Ordering::Acquire) || RUNG.load(Ordering::Acquire);
    // Spin first: with a core of its own the device is done in a microsecond or two, sooner
    // than a yield returns; then yield, in case it shares this thread's core.
    for i in 0..SPINS + 1000 {
        if !waiting() {
            return;
        }
        if i < SPINS {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Called by a program's thread whose poll found its CQ empty, holding no lock. On the
/// network it takes a device pass itself when the lock is free: what waits at the ports is
/// taken and answered now, rather than when the device thread wakes (tens of microseconds
/// per hop on a busy machine, four hops per round trip). Otherwise, and when the lock is
/// taken, it steps aside as [`let_it_run`] says.
pub(crate) fn empty_poll() {
    if TALKING.load(Ordering::Acquire) {
        POLLED_AT.store(now_ns(), Ordering::Relaxed);
        if let Some(mut s) = try_shim() {
            if s.free_running() {
                s.flush_uar_stores();
                s.tick();
                ACKS_HELD.store(s.sim.simulator().holds_acks(), Ordering::Release);
            }
            return;
        }
    }
    let_it_run();
}

/// Called when a program arms a CQ or waits for a CQ event: it stops polling, so the thread
/// takes the sockets back at once (woken if it sleeps).
pub(crate) fn stops_polling() {
    if POLLED_AT.swap(0, Ordering::Relaxed) != 0 {
        ring();
    }
}

type ForkGuards = (std::sync::RwLockWriteGuard<'static, Vec<Word>>, std::sync::RwLockWriteGuard<'static, Vec<c_int>>);

thread_local! {
    /// The thread's lists, held by a forking thread (see [`before_fork`]).
    static FORK_GUARDS: std::cell::RefCell<Option<ForkGuards>> = const { std::cell::RefCell::new(None) };
}

/// Before `fork`, with the shim's lock held: take the thread's lists too, which the thread
/// reads without that lock, so that the child does not inherit them read-locked.
pub(crate) fn before_fork() {
    let w = WATCHED.write().unwrap_or_else(|p| p.into_inner());
    let s = SOCKETS.write().unwrap_or_else(|p| p.into_inner());
    FORK_GUARDS.with(|g| *g.borrow_mut() = Some((w, s)));
}

/// After `fork`, on both sides: the lists are free again.
pub(crate) fn after_fork() {
    FORK_GUARDS.with(|g| drop(g.borrow_mut().take()));
}

/// Called in a child after `fork`: the child has no device thread (only the forking thread
/// goes on), so the next context it opens starts one.
pub(crate) fn forked() {
    RUNNING.store(false, Ordering::SeqCst);
}

/// Called, with the shim locked, before a call frees memory the thread may be looking at (a
/// QP's doorbell record, a UAR page, a umem): the thread stops looking until its next pass
/// under the lock rebuilds the list from what still lives.
pub(crate) fn forget() {
    match WATCHED.write() {
        Ok(mut w) => w.clear(),
        Err(poisoned) => poisoned.into_inner().clear(),
    }
}

/// The wake eventfd, made once for the process.
fn wake_fd() -> c_int {
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd >= 0 {
        return fd;
    }
    // SAFETY: eventfd has no memory preconditions.
    let new = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    match WAKE_FD.compare_exchange(-1, new, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => new,
        Err(other) => {
            // SAFETY: ours, never shared.
            unsafe { libc::close(new) };
            other
        }
    }
}

/// Start the thread unless it runs. Called with the shim locked, when a context opens.
pub(crate) fn start(s: &Shim) {
    if !s.free_running() || RUNNING.swap(true, Ordering::SeqCst) {
        return;
    }
    if wake_fd() < 0 || std::thread::Builder::new().name("mlx5sim-device".into()).spawn(run).is_err() {
        RUNNING.store(false, Ordering::SeqCst);
    }
}

/// One pass under the lock: the devices run, and the list of watched words is rebuilt.
/// Whether the devices moved (work may follow from work: a packet answered, a CQE to write);
/// `None` when no context is left (the thread then ends).
fn pass(s: &mut Shim) -> Option<bool> {
    if s.contexts.is_empty() && s.dv.uars.is_empty() {
        RUNNING.store(false, Ordering::SeqCst);
        forget();
        return None;
    }
    s.flush_uar_stores();
    let moved = s.tick();
    ACKS_HELD.store(s.sim.simulator().holds_acks(), Ordering::Release);
    let mut words: Vec<Word> = Vec::new();
    for rec in s.sim.simulator().doorbell_records() {
        for off in [0, 4] {
            words.push(Word { addr: rec as usize + off, kind: Kind::Counter });
        }
    }
    for (addr, width) in s.watched_registers() {
        let kind = if width == 8 { Kind::Register64 } else { Kind::Register32 };
        words.push(Word { addr, kind });
    }
    match WATCHED.write() {
        Ok(mut w) => *w = words,
        Err(poisoned) => *poisoned.into_inner() = words,
    }
    TALKING.store(s.sim.simulator().network_used(), Ordering::Release);
    let fds = s.sim.simulator().network_fds();
    match SOCKETS.write() {
        Ok(mut w) => *w = fds,
        Err(poisoned) => *poisoned.into_inner() = fds,
    }
    Some(moved)
}

/// Whether a watched word moved since `last` (which it updates), without the shim's lock.
fn moved(last: &mut Vec<u64>) -> bool {
    let Ok(words) = WATCHED.read() else { return true };
    if last.len() != words.len() {
        last.clear();
        last.resize(words.len(), u64::MAX);
    }
    let mut any = false;
    for (w, seen) in words.iter().zip(last.iter_mut()) {
        // SAFETY: every address in the list is live memory of the shim or the program while
        // the read lock is held (`forget` empties the list before it is freed), and aligned
        // (doorbell records are 8-byte aligned, UAR registers at their width).
        let v = unsafe {
            match w.kind {
                Kind::Counter | Kind::Register32 => {
                    u64::from(AtomicU32::from_ptr(w.addr as *mut u32).load(Ordering::Acquire))
                }
                Kind::Register64 => AtomicU64::from_ptr(w.addr as *mut u64).load(Ordering::Acquire),
            }
        };
        let hit = match w.kind {
            Kind::Counter => v != *seen,
            Kind::Register32 | Kind::Register64 => v != 0,
        };
        *seen = v;
        any |= hit;
    }
    any
}

/// Whether a doorbell was rung through the API since the last look (the note is taken).
fn rung() -> bool {
    RUNG.swap(false, Ordering::SeqCst)
}

/// Wait up to `pause` for the wake eventfd or (unless the program polls) a datagram at a
/// networked port (`None`: only look): whether either is ready. The eventfd is read empty.
fn poll_fds(pause: Option<Duration>) -> bool {
    let fd = WAKE_FD.load(Ordering::Acquire);
    let mut fds = vec![libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
    let polling = polling_left();
    if polling.is_none()
        && let Ok(socks) = SOCKETS.read()
    {
        fds.extend(socks.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }));
    }
    if pause.is_none() && fds.len() == 1 {
        return false;
    }
    // Not longer than the program counts as polling: then the sockets are ours again.
    let pause = pause.unwrap_or_default();
    let pause = polling.map_or(pause, |left| pause.min(left));
    let ts = libc::timespec { tv_sec: pause.as_secs() as libc::time_t, tv_nsec: pause.subsec_nanos() as libc::c_long };
    // SAFETY: pollfds of ours in a vector that outlives the call, and a timespec on the stack.
    let n = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if fds.first().is_some_and(|p| p.revents != 0) {
        let mut v: u64 = 0;
        // SAFETY: an 8-byte read from our non-blocking eventfd.
        unsafe { libc::read(fd, std::ptr::from_mut(&mut v).cast(), 8) };
    }
    n > 0
}

/// Sleep on the wake eventfd and the ports' sockets for at most `pause`: whether a doorbell
/// was rung through the API or a datagram came.
fn wait(pause: Duration) -> bool {
    // Told asleep first, then the note checked: a ring between the two writes the eventfd.
    ASLEEP.store(true, Ordering::SeqCst);
    if rung() {
        ASLEEP.store(false, Ordering::SeqCst);
        return true;
    }
    // A held ACK goes out within the shortest pause, by the program's next poll or ours.
    let held = ACKS_HELD.load(Ordering::Acquire);
    let ready = poll_fds(Some(if held { pause.min(FAST) } else { pause }));
    ASLEEP.store(false, Ordering::SeqCst);
    rung() || ready || ACKS_HELD.load(Ordering::Acquire)
}

/// Take the shim's lock for a pass. While a program's thread spins on an empty CQ it steps
/// aside when it sees [`WANTED`] (see [`let_it_run`]); trying for a while first keeps the
/// thread from sleeping in the lock, whose wake-up costs tens of microseconds.
fn lock_for_pass() -> Option<std::sync::MutexGuard<'static, Shim>> {
    WANTED.store(true, Ordering::Release);
    let mut got = None;
    for _ in 0..200 {
        match try_shim() {
            Some(g) => {
                got = Some(g);
                break;
            }
            None => std::thread::yield_now(),
        }
    }
    let got = match got {
        Some(g) => Some(g),
        None => shim().ok(),
    };
    WANTED.store(false, Ordering::Release);
    got
}

fn run() {
    let mut last = Vec::new();
    let mut pause = FAST;
    let mut hot_until = Instant::now();
    let mut due = true;
    let mut spins = 0u32;
    // The pass to come was asked for (a doorbell, a moved word), not a timer's.
    let mut woken = true;
    // The program has rung with stores of its own: only those are worth looking for without
    // pause (a doorbell rung through the API and a datagram wake the thread where it sleeps,
    // and on a busy machine a thread that spins takes the core from the program).
    // (A store seen in the moment between an API post's doorbell record and its ring looks
    // like one: the thread stays eager for a while after the last, not for good.)
    let mut stores: Option<Instant> = None;
    loop {
        if due {
            let busy = match lock_for_pass() {
                Some(mut s) => match pass(&mut s) {
                    Some(busy) => busy,
                    None => return,
                },
                None => {
                    RUNNING.store(false, Ordering::SeqCst);
                    return;
                }
            };
            // What the pass wrote (a doorbell record reset) is the new baseline.
            moved(&mut last);
            if busy || woken {
                pause = FAST;
                // Eager after work unless the process talks on the network, where the
                // program's own empty polls run the device and a spinning thread would take
                // their core; then only after the program's own stores.
                if !TALKING.load(Ordering::Acquire) || stores.is_some_and(|t| t.elapsed() < STORES_LAST) {
                    hot_until = Instant::now() + EAGER;
                }
            }
            BUSY.store(busy, Ordering::Release);
            if busy {
                continue;
            }
        }
        // The record first, then the note: a post through the API notes before it writes.
        let words = moved(&mut last);
        let api = rung();
        let by_store = words && !api;
        if by_store {
            stores = Some(Instant::now());
        }
        // The sockets are looked at (a system call) only by a thread that talks, and not on
        // every spin.
        due = api
            || by_store
            || (TALKING.load(Ordering::Acquire) && spins.is_multiple_of(64) && !program_polls() && poll_fds(None));
        if due {
            woken = true;
            BUSY.store(true, Ordering::Release);
            continue;
        }
        // Hot: look again at once, yielding the core now and then (and reading the clock only
        // then: it costs as much as a look).
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        if Instant::now() < hot_until {
            std::thread::yield_now();
            continue;
        }
        let signalled = wait(pause);
        let by_store = moved(&mut last);
        if by_store && !signalled {
            stores = Some(Instant::now());
        }
        due = signalled || by_store;
        woken = due;
        BUSY.store(due, Ordering::Release);
        // Now and then a pass anyway: a timer may be due, a store may repeat a value.
        if !due {
            pause = (pause * 2).min(SLOW);
            due = pause == SLOW;
        }
    }
}
