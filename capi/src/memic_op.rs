//! `mlx5dv_dm_map_op_addr`: MEMIC atomic operation addresses. On a card, a load or store to
//! such a page is a PCI access the device turns into an operation on the DM's bytes: a store
//! to the increment page adds the stored value, a load from the test-and-set page returns the
//! byte and sets it to all ones. Here the page is mapped without access; the fault each load
//! or store raises is caught (SIGSEGV, installed when a program first maps such a page, any
//! other fault passed on to the handler before it), the instruction is decoded (x86-64 `mov`,
//! `movzx`, `movsx` with one memory operand) and carried out on the DM's bytes atomically, and
//! the thread goes on after it, as a VMM emulates MMIO.

use std::ffi::{c_int, c_void};
use std::sync::Once;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use rdma_sys::ibv_dm;

/// `MEMIC_OP_INCREMENT` / `MEMIC_OP_TEST_AND_SET` (the page's operation).
const OP_INCREMENT: u8 = 0;
const OP_TEST_AND_SET: u8 = 1;
/// Op pages mapped at once.
const SLOTS: usize = 64;
const PAGE: usize = 4096;

/// One mapped op page range: its start (0: free), length, the DM bytes' address and the op.
struct Slot {
    base: AtomicUsize,
    len: AtomicUsize,
    bytes: AtomicUsize,
    dm: AtomicUsize,
    op: AtomicU8,
}

#[allow(clippy::declare_interior_mutable_const)] // the array's initialiser, each slot its own
const FREE: Slot = Slot {
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    bytes: AtomicUsize::new(0),
    dm: AtomicUsize::new(0),
    op: AtomicU8::new(0),
};
static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
static INSTALL: Once = Once::new();
/// The SIGSEGV action before ours, as raw bytes of a `sigaction` (written once, under INSTALL).
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::zeroed();

/// The slot whose range holds `addr`.
fn slot_of(addr: usize) -> Option<&'static Slot> {
    TABLE.iter().find(|s| {
        let base = s.base.load(Ordering::Acquire);
        base != 0 && addr >= base && addr < base + s.len.load(Ordering::Acquire)
    })
}

/// Register a range; false when the table is full.
fn register(base: usize, len: usize, bytes: usize, dm: usize, op: u8) -> bool {
    for s in &TABLE {
        // A stale slot for the same address (the program unmapped it) is taken over.
        let cur = s.base.load(Ordering::Acquire);
        if (cur == 0 || cur == base)
            && s.base.compare_exchange(cur, usize::MAX, Ordering::AcqRel, Ordering::Acquire).is_ok()
        {
            s.len.store(len, Ordering::Release);
            s.bytes.store(bytes, Ordering::Release);
            s.dm.store(dm, Ordering::Release);
            s.op.store(op, Ordering::Release);
            s.base.store(base, Ordering::Release);
            return true;
        }
    }
    false
}

/// Forget the op pages of DM `dm` (it is freed).
pub(crate) fn forget_dm(dm: *const ibv_dm) {
    for s in &TABLE {
        if s.dm.load(Ordering::Acquire) == dm as usize {
            s.base.store(0, Ordering::Release);
        }
    }
}

/// The general register `r` names, its index in `gregs`, and the bit its value starts at.
fn greg(r: iced_x86::Register) -> Option<(usize, u32)> {
    use iced_x86::Register as R;
    let high = matches!(r, R::AH | R::CH | R::DH | R::BH);
    let full = match r {
        R::AH => R::RAX,
        R::CH => R::RCX,
        R::DH => R::RDX,
        R::BH => R::RBX,
        r => r.full_register(),
    };
    let i = match full {
        R::RAX => libc::REG_RAX,
        R::RBX => libc::REG_RBX,
        R::RCX => libc::REG_RCX,
        R::RDX => libc::REG_RDX,
        R::RSI => libc::REG_RSI,
        R::RDI => libc::REG_RDI,
        R::RBP => libc::REG_RBP,
        R::RSP => libc::REG_RSP,
        R::R8 => libc::REG_R8,
        R::R9 => libc::REG_R9,
        R::R10 => libc::REG_R10,
        R::R11 => libc::REG_R11,
        R::R12 => libc::REG_R12,
        R::R13 => libc::REG_R13,
        R::R14 => libc::REG_R14,
        R::R15 => libc::REG_R15,
        _ => return None,
    };
    Some((i as usize, if high { 8 } else { 0 }))
}

fn ones(bytes: usize) -> u64 {
    if bytes >= 8 { u64::MAX } else { (1u64 << (8 * bytes)) - 1 }
}

/// Carry out `n` bytes of the op at `at`: a store of `v` (`Some`) or a load (`None`, the
/// value read). Whole aligned accesses are atomic; others go byte by byte.
///
/// # Safety
/// `at` points at `n` bytes of the DM's window.
unsafe fn access(op: u8, at: usize, n: usize, store: Option<u64>) -> u64 {
    // SAFETY (each arm): `at` holds `n` live bytes, aligned for the atomic type where used.
    unsafe {
        match (op, store, n) {
            (OP_INCREMENT, Some(v), 1) => u64::from((*(at as *const AtomicU8)).fetch_add(v as u8, Ordering::AcqRel)),
            (OP_TEST_AND_SET, None, 1) => u64::from((*(at as *const AtomicU8)).swap(0xff, Ordering::AcqRel)),
            (_, Some(v), _) => {
                for i in 0..n {
                    let b = &*((at + i) as *const AtomicU8);
                    let x = (v >> (8 * i)) as u8;
                    if op == OP_INCREMENT {
                        b.fetch_add(x, Ordering::AcqRel)
                    } else {
                        b.swap(x, Ordering::AcqRel)
                    };
                }
                0
            }
            (_, None, _) => (0..n).fold(0u64, |acc, i| {
                let b = &*((at + i) as *const AtomicU8);
                let x = if op == OP_TEST_AND_SET { b.swap(0xff, Ordering::AcqRel) } else { b.load(Ordering::Acquire) };
                acc | u64::from(x) << (8 * i)
            }),
        }
    }
}

/// Emulate the faulting instruction; false when it is not one this module carries out.
///
/// # Safety
/// Called from the SIGSEGV handler with its context.
unsafe fn emulate(slot: &Slot, addr: usize, uctx: *mut c_void) -> bool {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
    // SAFETY: the kernel hands the handler a live ucontext.
    let gregs = unsafe { &mut (*uctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs };
    let rip = gregs[libc::REG_RIP as usize] as u64;
    // SAFETY: the faulting instruction's bytes are mapped (it was fetched); 15 is the longest.
    let code = unsafe { std::slice::from_raw_parts(rip as *const u8, 15) };
    let ins = Decoder::with_ip(64, code, rip, DecoderOptions::NONE).decode();
    let n = ins.memory_size().size();
    let off = addr - slot.base.load(Ordering::Acquire);
    if ins.is_invalid() || !matches!(n, 1 | 2 | 4 | 8) || off + n > slot.len.load(Ordering::Acquire) {
        return false;
    }
    let at = slot.bytes.load(Ordering::Acquire) + off;
    let op = slot.op.load(Ordering::Acquire);
    let (m, k0, k1) = (ins.mnemonic(), ins.op0_kind(), ins.op1_kind());
    if m == Mnemonic::Mov && k0 == OpKind::Memory {
        let v = match k1 {
            OpKind::Register => match greg(ins.op1_register()) {
                Some((i, shift)) => (gregs[i] as u64 >> shift) & ones(n),
                None => return false,
            },
            OpKind::Immediate8
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64 => ins.immediate(1) & ones(n),
            _ => return false,
        };
        // SAFETY: `at` is inside the DM's window (the slot's length bounds `off + n`).
        unsafe { access(op, at, n, Some(v)) };
    } else if matches!(m, Mnemonic::Mov | Mnemonic::Movzx | Mnemonic::Movsx | Mnemonic::Movsxd)
        && k0 == OpKind::Register
        && k1 == OpKind::Memory
    {
        let dst = ins.op0_register();
        let Some((i, shift)) = greg(dst) else { return false };
        // SAFETY: as above.
        let raw = unsafe { access(op, at, n, None) };
        let width = dst.size();
        let v = if m == Mnemonic::Mov || m == Mnemonic::Movzx {
            raw
        } else {
            let sh = 64 - 8 * n as u32;
            (((raw << sh) as i64) >> sh) as u64 & ones(width)
        };
        let old = gregs[i] as u64;
        gregs[i] = match width {
            // A 32-bit destination clears the register's top half.
            4 => (v & ones(4)) as i64,
            8 => v as i64,
            w => ((old & !(ones(w) << shift)) | ((v & ones(w)) << shift)) as i64,
        };
    } else {
        return false;
    }
    gregs[libc::REG_RIP as usize] = ins.next_ip() as i64;
    true
}

extern "C" fn on_segv(sig: c_int, info: *mut libc::siginfo_t, uctx: *mut c_void) {
    // SAFETY: the kernel's siginfo for SIGSEGV carries the address.
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: the handler's own context.
    if let Some(s) = slot_of(addr)
        && unsafe { emulate(s, addr, uctx) }
    {
        return;
    }
    // Not ours: the previous action. A default or ignored one is put back and the
    // instruction runs again, faulting as it would have.
    // SAFETY: PREVIOUS was written before this handler was installed.
    let prev = unsafe { (*std::ptr::addr_of!(PREVIOUS)).assume_init_ref() };
    match prev.sa_sigaction {
        libc::SIG_DFL | libc::SIG_IGN => {
            // SAFETY: restoring the saved action.
            unsafe { libc::sigaction(libc::SIGSEGV, prev, std::ptr::null_mut()) };
        }
        h if prev.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the previous handler was installed with SA_SIGINFO.
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = unsafe { std::mem::transmute(h) };
            f(sig, info, uctx);
        }
        h => {
            // SAFETY: a plain handler.
            let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
            f(sig);
        }
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction filled in; the previous action saved before any fault
        // can reach the new handler for one of our pages (none is mapped yet).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_segv as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            let mut prev: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, &act, &mut prev);
            (*std::ptr::addr_of_mut!(PREVIOUS)).write(prev);
        }
    });
}

/// A page range as long as the DM (`len` bytes at `bytes`) for `op`, without access, each
/// load or store to it carried out on the DM's bytes: its address, or the errno (EOPNOTSUPP
/// for an operation the device lacks, ENOMEM).
pub(crate) fn map(dm: *const ibv_dm, bytes: usize, len: usize, op: u8) -> Result<*mut c_void, c_int> {
    // The device's memic_operations: increment and test-and-set (the instruction decoder is
    // x86-64's).
    if !cfg!(target_arch = "x86_64") || op > OP_TEST_AND_SET {
        return Err(libc::EOPNOTSUPP);
    }
    let pages = len.max(1).div_ceil(PAGE) * PAGE;
    // SAFETY: a new anonymous mapping without access.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), pages, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(libc::ENOMEM);
    }
    install();
    if !register(p as usize, len, bytes, dm as usize, op) {
        // SAFETY: the mapping just made.
        unsafe { libc::munmap(p, pages) };
        return Err(libc::ENOMEM);
    }
    Ok(p)
}
