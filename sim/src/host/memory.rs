//! The regions of host memory: buffers the backend owns and memory an application lent it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

mod lent;

/// The page size of the simulated host.
pub const PAGE: u64 = 4096;
/// Where the first backend buffer is placed; every buffer is followed by an unmapped guard page.
const FIRST_VA: u64 = 0x7f00_0000_0000;

/// One mapped region.
#[derive(Debug)]
enum Region {
    /// Bytes the backend allocated.
    Owned(Vec<u8>),
    /// An application's bytes at their own address; valid while registered (see
    /// [`Memory::register_external`]).
    External { ptr: ExternalPtr, len: usize },
    /// Bytes the backend allocated in the process, at their own address (the C ABI's rings,
    /// doorbell records and UAR pages, which a program reaches with the pointers it is given).
    Process(ProcessBuf),
}

/// Zeroed, page-aligned bytes from the process's allocator, freed on drop.
#[derive(Debug)]
struct ProcessBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    len: usize,
}

impl ProcessBuf {
    fn new(len: usize) -> Option<Self> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), PAGE as usize).ok()?;
        // SAFETY: the layout's size is not zero.
        let ptr = std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
        Some(ProcessBuf { ptr, layout, len })
    }
}

impl Drop for ProcessBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

// SAFETY: the buffer is this `Memory`'s alone; it moves with it.
unsafe impl Send for ProcessBuf {}
// SAFETY: through `&Memory` the bytes are only read.
unsafe impl Sync for ProcessBuf {}

/// The address of an application's bytes lent to the simulator.
#[derive(Debug, Clone, Copy)]
struct ExternalPtr(*mut u8);

// SAFETY: `register_external`'s contract gives the memory to this `Memory` alone until it is
// unmapped, so the simulator that holds it may move to, and be read from, another thread.
unsafe impl Send for ExternalPtr {}
// SAFETY: as above; through `&Memory` the bytes are only read.
unsafe impl Sync for ExternalPtr {}

impl Clone for Region {
    /// A copy of process memory keeps its address as a key but not the memory: a clone of a
    /// simulator is a snapshot, which no program holds pointers into.
    fn clone(&self) -> Self {
        match self {
            Region::Owned(v) => Region::Owned(v.clone()),
            Region::External { ptr, len } => Region::External { ptr: *ptr, len: *len },
            Region::Process(_) => Region::Owned(self.bytes().to_vec()),
        }
    }
}

impl Region {
    fn len(&self) -> usize {
        match self {
            Region::Owned(v) => v.len(),
            Region::External { len, .. } => *len,
            Region::Process(b) => b.len,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Region::Owned(v) => v,
            // SAFETY: the registration contract keeps (ptr, len) valid and unaliased while the
            // region is mapped.
            Region::External { ptr, len } => unsafe { std::slice::from_raw_parts(ptr.0, *len) },
            // SAFETY: the buffer holds `len` initialised bytes while the region exists.
            Region::Process(b) => unsafe { std::slice::from_raw_parts(b.ptr.as_ptr(), b.len) },
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Region::Owned(v) => v,
            // SAFETY: as in `bytes`.
            Region::External { ptr, len } => unsafe { std::slice::from_raw_parts_mut(ptr.0, *len) },
            // SAFETY: as in `bytes`.
            Region::Process(b) => unsafe { std::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.len) },
        }
    }
}

/// `len` zero bytes, or `None` when the process has no memory for them. Allocated zeroed, so
/// that a large buffer's pages are not touched until used (a CQ ring may be half a gigabyte).
fn zeroed(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).ok()?;
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `len` bytes, all of
    // them initialised (zero); length and capacity are `len`.
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// Page classes of [`Memory`]'s lookup hints.
const HINTS: usize = 64;

/// The region index [`Memory::locate`] gives for lent process memory (no region: the offset
/// is the address itself).
const RAW: usize = usize::MAX;

/// The simulated host's memory: regions sorted by their start address. A sorted `Vec` rather
/// than a map: every DMA access looks a region up, and a binary search over a few contiguous
/// entries is the cheapest lookup; mapping and unmapping are rare.
#[derive(Debug)]
pub struct Memory {
    regions: Vec<(u64, Region)>,
    /// The region a lookup last found for an address of each page class: the data path
    /// touches a few rings, records and buffers over and over. Only a hint: a lookup checks
    /// that the region holds the address, so a stale one costs a search, never a wrong answer.
    hints: [AtomicUsize; HINTS],
    next_va: u64,
    /// Bytes the owned regions may hold together.
    limit: u64,
    /// Bytes the owned regions hold.
    used: u64,
    /// `alloc` takes memory from the process, at its own address, rather than numbering
    /// addresses of its own.
    process: bool,
    /// Process memory lent to the device without a region (ODP MRs), reached at access time.
    lent: lent::Lent,
    /// An application's registrations, (start, length) → how many: the external regions are
    /// their union, so registrations that overlap share one region.
    external: BTreeMap<(u64, usize), usize>,
}

impl Clone for Memory {
    fn clone(&self) -> Self {
        Memory {
            regions: self.regions.clone(),
            hints: std::array::from_fn(|i| AtomicUsize::new(self.hints[i].load(Ordering::Relaxed))),
            next_va: self.next_va,
            limit: self.limit,
            used: self.used,
            process: self.process,
            lent: self.lent.clone(),
            external: self.external.clone(),
        }
    }
}

impl Default for Memory {
    fn default() -> Self {
        Memory::with_limit(u64::MAX)
    }
}

impl Memory {
    /// Memory whose owned regions may hold `limit` bytes together.
    pub fn with_limit(limit: u64) -> Self {
        Memory {
            regions: Vec::new(),
            hints: [const { AtomicUsize::new(0) }; HINTS],
            next_va: FIRST_VA,
            limit,
            used: 0,
            process: false,
            lent: lent::Lent::default(),
            external: BTreeMap::new(),
        }
    }

    /// Where a region starting at `va` is, or would be inserted.
    fn position(&self, va: u64) -> Result<usize, usize> {
        self.regions.binary_search_by_key(&va, |(b, _)| *b)
    }

    fn insert(&mut self, va: u64, r: Region) {
        match self.position(va) {
            Ok(i) => self.regions[i].1 = r,
            Err(i) => self.regions.insert(i, (va, r)),
        }
    }

    /// Map `len` zeroed bytes at a fresh page-aligned address; `None` if the address space
    /// is exhausted, the limit would be passed, or the process has no memory for them.
    pub fn alloc(&mut self, len: usize) -> Option<u64> {
        if self.process {
            return self.alloc_in_process(len);
        }
        let va = self.next_va;
        let size = u64::try_from(len).ok()?;
        let used = self.used.checked_add(size).filter(|&u| u <= self.limit)?;
        let pages = size.div_ceil(PAGE).max(1).checked_add(1)?;
        let next = va.checked_add(pages.checked_mul(PAGE)?)?;
        let bytes = zeroed(len)?;
        self.regions.try_reserve(1).ok()?;
        self.next_va = next;
        self.used = used;
        self.insert(va, Region::Owned(bytes));
        Some(va)
    }

    /// From now on [`Memory::alloc`] takes zeroed, page-aligned memory from the process, at
    /// its own address (what a program is handed as ring and doorbell pointers).
    pub fn allocate_in_process(&mut self) {
        self.process = true;
    }

    /// True if [`Memory::alloc`] takes memory from the process.
    pub fn in_process(&self) -> bool {
        self.process
    }

    fn alloc_in_process(&mut self, len: usize) -> Option<u64> {
        let size = u64::try_from(len).ok()?;
        let used = self.used.checked_add(size).filter(|&u| u <= self.limit)?;
        self.regions.try_reserve(1).ok()?;
        let buf = ProcessBuf::new(len)?;
        let va = buf.ptr.as_ptr() as u64;
        self.used = used;
        self.insert(va, Region::Process(buf));
        Some(va)
    }

    /// Map an application's `len` bytes at `ptr`, at their own address. `None` for a null or
    /// empty range, one that wraps the address space, or one that overlaps memory that is not
    /// the application's (the backend's own buffers and their address range). A range that
    /// overlaps earlier registrations joins their region: they are the same bytes of the
    /// application, as an MR over part of another MR is in a process.
    ///
    /// # Safety
    ///
    /// `[ptr, ptr + len)` must be valid for reads and writes, and nothing else may read or
    /// write it, until [`Memory::free_external`] of this registration.
    pub unsafe fn register_external(&mut self, ptr: *mut u8, len: usize) -> Option<u64> {
        let va = ptr as u64;
        let end = va.checked_add(len as u64)?;
        if ptr.is_null() || len == 0 || (va < self.next_va && end > FIRST_VA) {
            return None;
        }
        // Regions are disjoint and sorted, so their ends are sorted too.
        let first = self.regions.partition_point(|(b, r)| b + r.len() as u64 <= va);
        let last = self.regions.partition_point(|(b, _)| *b < end);
        let hit = self.regions.get(first..last)?;
        if hit.iter().any(|(_, r)| !matches!(r, Region::External { .. })) {
            return None;
        }
        let lo = hit.first().map_or(va, |(b, _)| (*b).min(va));
        let hi = hit.last().map_or(end, |(b, r)| (b + r.len() as u64).max(end));
        self.regions.try_reserve(1).ok()?;
        self.regions.drain(first..last);
        self.insert_external(lo, hi);
        *self.external.entry((va, len)).or_insert(0) += 1;
        Some(va)
    }

    /// The external region `[lo, hi)`: registered bytes, at their own address.
    fn insert_external(&mut self, lo: u64, hi: u64) {
        let len = usize::try_from(hi - lo).unwrap_or(usize::MAX);
        self.insert(lo, Region::External { ptr: ExternalPtr(lo as *mut u8), len });
    }

    /// End one registration of `[va, va + len)`: its region shrinks to the union of the
    /// registrations left in it (it may split, or go). False if there is none.
    pub fn free_external(&mut self, va: u64, len: usize) -> bool {
        let Some(n) = self.external.get_mut(&(va, len)) else { return false };
        *n -= 1;
        if *n == 0 {
            self.external.remove(&(va, len));
        }
        let Some(i) = self.regions.partition_point(|(b, _)| *b <= va).checked_sub(1) else { return false };
        let (base, r) = self.regions.remove(i);
        let span = base + r.len() as u64;
        let mut parts: Vec<(u64, u64)> = Vec::new();
        for &(s, l) in self.external.range((base, 0)..(span, 0)).map(|(k, _)| k) {
            let e = s + l as u64;
            match parts.last_mut() {
                Some(p) if s <= p.1 => p.1 = p.1.max(e),
                _ => parts.push((s, e)),
            }
        }
        for (lo, hi) in parts {
            self.insert_external(lo, hi);
        }
        true
    }

    /// Unmap the region at `va` (the backend's own; external memory is
    /// [`Memory::free_external`]'s).
    pub fn free(&mut self, va: u64) -> bool {
        let Ok(i) = self.position(va) else { return false };
        if matches!(self.regions[i].1, Region::External { .. }) {
            return false;
        }
        match self.regions.remove(i).1 {
            Region::Owned(v) => {
                self.used = self.used.saturating_sub(v.len() as u64);
                true
            }
            Region::External { .. } => true,
            Region::Process(b) => {
                self.used = self.used.saturating_sub(b.len as u64);
                true
            }
        }
    }

    /// The index of the region holding `[va, va + len)`, and the offset of `va` in it; for
    /// lent process memory whose pages fault in for reading, [`RAW`] and the address.
    #[inline]
    fn locate(&self, va: u64, len: u64) -> Option<(usize, usize)> {
        self.locate_region(va, len).or_else(|| self.lent_at(va, len, false))
    }

    /// As [`Memory::locate`], with lent pages faulted in for writing.
    #[inline]
    fn locate_mut(&self, va: u64, len: u64) -> Option<(usize, usize)> {
        self.locate_region(va, len).or_else(|| self.lent_at(va, len, true))
    }

    #[inline]
    fn locate_region(&self, va: u64, len: u64) -> Option<(usize, usize)> {
        let hint = &self.hints[(va / PAGE) as usize % HINTS];
        let h = hint.load(Ordering::Relaxed);
        let i = match self.regions.get(h) {
            // Regions never overlap: one that holds `va` is the one a search would find.
            Some((base, r)) if va >= *base && va - base < r.len() as u64 => h,
            _ => {
                let i = self.regions.partition_point(|(b, _)| *b <= va).checked_sub(1)?;
                hint.store(i, Ordering::Relaxed);
                i
            }
        };
        let (base, r) = self.regions.get(i)?;
        let off = va - base;
        let end = off.checked_add(len)?;
        (end <= r.len() as u64).then_some((i, off as usize))
    }

    /// `[va, va + len)` as lent process memory: inside a lent range, clear of every region,
    /// and its pages faulted in for the access (the ODP page fault; module [`lent`]).
    #[cold]
    fn lent_at(&self, va: u64, len: u64, write: bool) -> Option<(usize, usize)> {
        if !self.process || self.lent.is_empty() || !self.lent.covers(va, len) {
            return None;
        }
        let end = va.checked_add(len)?;
        let below = self.regions.partition_point(|(b, _)| *b < end.max(va.saturating_add(1)));
        let overlaps =
            below.checked_sub(1).and_then(|i| self.regions.get(i)).is_some_and(|(b, r)| b + r.len() as u64 > va);
        if overlaps || !lent::fault_in(va, len, write) {
            return None;
        }
        Some((RAW, usize::try_from(va).ok()?))
    }

    /// Let the device reach the process's `[va, va + len)` without a region (an ODP MR): each
    /// access faults the pages in, and one the process has not mapped fails as unmapped.
    /// Only in process (after [`Memory::allocate_in_process`]); a range lent twice counts
    /// twice.
    pub fn lend(&mut self, va: u64, len: u64) {
        self.lent.add(va, len);
    }

    /// Take back one [`Memory::lend`] of `[va, va + len)`.
    pub fn unlend(&mut self, va: u64, len: u64) {
        self.lent.remove(va, len);
    }

    /// Fault in `[va, va + len)` for reading (or writing), as an ODP prefetch does: lent
    /// process memory is faulted in page by page; elsewhere the range must be mapped.
    pub fn fault_in(&self, va: u64, len: u64, write: bool) -> bool {
        if self.process && self.lent.covers(va, len) && self.locate_region(va, len).is_none() {
            return lent::fault_in(va, len, write);
        }
        self.is_mapped(va, len)
    }

    /// A pointer to the byte at `off` of region `i` ([`RAW`]: the address `off`).
    fn ptr_at(&mut self, i: usize, off: usize) -> Option<*mut u8> {
        if i == RAW {
            return Some(off as *mut u8);
        }
        let r = &mut self.regions.get_mut(i)?.1;
        Some(r.bytes_mut().get_mut(off..)?.as_mut_ptr())
    }

    /// True if `[va, va + len)` is mapped, inside one region.
    pub fn is_mapped(&self, va: u64, len: u64) -> bool {
        self.locate(va, len).is_some()
    }

    /// The bytes at `[va, va + len)`.
    #[inline]
    pub fn read(&self, va: u64, len: usize) -> Option<&[u8]> {
        let (i, off) = self.locate(va, len as u64)?;
        if i == RAW {
            // SAFETY: lent process memory, its pages just faulted in readable; the program
            // keeps it mapped while an ODP MR covers it (unmapping it under a DMA is a race
            // on hardware too).
            return Some(unsafe { std::slice::from_raw_parts(off as *const u8, len) });
        }
        self.regions.get(i)?.1.bytes().get(off..off + len)
    }

    /// Copy `data` to `va` so that a thread that sees its last byte (with an acquire load)
    /// sees all of it: the rest is stored first, the last byte last, with a release store.
    /// CQEs and EQEs hand a slot to software in their last byte, and a program polls the ring
    /// while the device thread writes it. False if the range is not mapped.
    pub fn publish(&mut self, va: u64, data: &[u8]) -> bool {
        let Some((&last, rest)) = data.split_last() else { return true };
        let Some((i, off)) = self.locate_region(va, data.len() as u64) else { return false };
        let Some(to) = self.regions.get_mut(i).and_then(|(_, r)| r.bytes_mut().get_mut(off..off + data.len())) else {
            return false;
        };
        let Some((slot, head)) = to.split_last_mut() else { return false };
        head.copy_from_slice(rest);
        // SAFETY: `slot` is a valid, aligned byte this thread holds exclusively in Rust; the
        // only other accesses are the program's loads of the same ring slot.
        unsafe { AtomicU8::from_ptr(slot) }.store(last, Ordering::Release);
        true
    }

    /// Copy `data` to `va`; false if the range is not mapped.
    #[inline]
    pub fn write(&mut self, va: u64, data: &[u8]) -> bool {
        let Some((i, off)) = self.locate_mut(va, data.len() as u64) else { return false };
        if i == RAW {
            // SAFETY: lent process memory, its pages just faulted in writable (as in `read`).
            place(unsafe { std::slice::from_raw_parts_mut(off as *mut u8, data.len()) }, data);
            return true;
        }
        match self.regions.get_mut(i).and_then(|(_, r)| r.bytes_mut().get_mut(off..off + data.len())) {
            Some(to) => {
                place(to, data);
                true
            }
            None => false,
        }
    }

    /// The bytes at `[va, va + len)`, to change in place.
    pub fn bytes_mut(&mut self, va: u64, len: usize) -> Option<&mut [u8]> {
        let (i, off) = self.locate_mut(va, len as u64)?;
        if i == RAW {
            // SAFETY: lent process memory, its pages just faulted in writable (as in `read`).
            return Some(unsafe { std::slice::from_raw_parts_mut(off as *mut u8, len) });
        }
        self.regions.get_mut(i)?.1.bytes_mut().get_mut(off..off + len)
    }

    /// Copy from the `src` ranges to the `dst` ranges, in order, as many bytes as both hold;
    /// false if a range is not mapped.
    pub fn transfer(&mut self, src: &[(u64, u64)], dst: &[(u64, u64)]) -> bool {
        let (mut si, mut so, mut di, mut doff) = (0, 0u64, 0, 0u64);
        while si < src.len() && di < dst.len() {
            let n = (src[si].1 - so).min(dst[di].1 - doff);
            if n > 0 && !self.copy(src[si].0 + so, dst[di].0 + doff, n as usize) {
                return false;
            }
            so += n;
            doff += n;
            if so == src[si].1 {
                si += 1;
                so = 0;
            }
            if doff == dst[di].1 {
                di += 1;
                doff = 0;
            }
        }
        true
    }

    /// Copy `n` bytes from `from` to `to` (the ranges may be in one region and may overlap).
    fn copy(&mut self, from: u64, to: u64, n: usize) -> bool {
        let (Some((si, so)), Some((di, dof))) = (self.locate(from, n as u64), self.locate_mut(to, n as u64)) else {
            return false;
        };
        if si == RAW || di == RAW {
            let (Some(s), Some(d)) = (self.ptr_at(si, so), self.ptr_at(di, dof)) else { return false };
            let apart = (s as usize).abs_diff(d as usize) >= n;
            // SAFETY: both ranges were located (`n` bytes each) and their pages faulted in;
            // `place` takes them when they do not overlap, `copy` when they do.
            unsafe {
                if apart {
                    place(std::slice::from_raw_parts_mut(d, n), std::slice::from_raw_parts(s, n));
                } else {
                    std::ptr::copy(s, d, n);
                }
            }
            return true;
        }
        if si == di {
            return match self.regions.get_mut(si) {
                Some((_, r)) => {
                    r.bytes_mut().copy_within(so..so + n, dof);
                    true
                }
                None => false,
            };
        }
        self.with_two_regions(si, di, |s, d| place(&mut d[dof..dof + n], &s[so..so + n])).is_some()
    }

    /// Run `f` on the regions at indices `si` and `di` (different) together.
    fn with_two_regions<R>(&mut self, si: usize, di: usize, f: impl FnOnce(&[u8], &mut [u8]) -> R) -> Option<R> {
        if si == di || si.max(di) >= self.regions.len() {
            return None;
        }
        // Split between the two so that source and target can be borrowed together.
        let (low, high) = self.regions.split_at_mut(si.max(di));
        let (a, b) = (&mut low[si.min(di)].1, &mut high[0].1);
        Some(if si < di { f(a.bytes(), b.bytes_mut()) } else { f(b.bytes(), a.bytes_mut()) })
    }

    /// Run `f` on `[src, src + src_len)` and `[dst, dst + dst_len)` when they lie in two
    /// different regions; `None` otherwise.
    pub fn with_two<R>(
        &mut self,
        src: u64,
        src_len: u64,
        dst: u64,
        dst_len: u64,
        f: impl FnOnce(&[u8], &mut [u8]) -> R,
    ) -> Option<R> {
        let (si, so) = self.locate(src, src_len)?;
        let (di, dof) = self.locate_mut(dst, dst_len)?;
        if si == di {
            return None;
        }
        if si == RAW || di == RAW {
            let (s, d) = (self.ptr_at(si, so)?, self.ptr_at(di, dof)?);
            // SAFETY: two located ranges in different places (one lent, one a region, which
            // never overlap), their pages faulted in.
            let (s, d) = unsafe {
                (std::slice::from_raw_parts(s, src_len as usize), std::slice::from_raw_parts_mut(d, dst_len as usize))
            };
            return Some(f(s, d));
        }
        self.with_two_regions(si, di, |s, d| f(&s[so..so + src_len as usize], &mut d[dof..dof + dst_len as usize]))
    }

    /// Fill `out` from the cursor's ranges; false if they end first or are not mapped.
    pub fn read_ranges(&self, cur: &mut RangeCursor<'_>, out: &mut [u8]) -> bool {
        let mut done = 0;
        while done < out.len() {
            let Some((va, n)) = cur.next((out.len() - done) as u64) else { return false };
            let Some(src) = self.read(va, n as usize) else { return false };
            out[done..done + n as usize].copy_from_slice(src);
            done += n as usize;
        }
        true
    }

    /// Write `data` to the cursor's ranges; false if they end first or are not mapped.
    pub fn write_ranges(&mut self, cur: &mut RangeCursor<'_>, data: &[u8]) -> bool {
        let mut done = 0;
        while done < data.len() {
            let Some((va, n)) = cur.next((data.len() - done) as u64) else { return false };
            if !self.write(va, &data[done..done + n as usize]) {
                return false;
            }
            done += n as usize;
        }
        true
    }
}

/// A position in a list of address ranges, for reading or writing them in order.
#[derive(Debug, Clone)]
pub struct RangeCursor<'r> {
    ranges: &'r [(u64, u64)],
    i: usize,
    off: u64,
}

impl<'r> RangeCursor<'r> {
    /// A cursor at the start of `ranges`.
    pub fn new(ranges: &'r [(u64, u64)]) -> Self {
        RangeCursor { ranges, i: 0, off: 0 }
    }

    /// The next piece of at most `want` bytes: its address and length; advances.
    fn next(&mut self, want: u64) -> Option<(u64, u64)> {
        while let Some(&(va, len)) = self.ranges.get(self.i) {
            if self.off < len {
                let n = want.min(len - self.off);
                let at = va + self.off;
                self.off += n;
                return Some((at, n));
            }
            self.i += 1;
            self.off = 0;
        }
        None
    }
}

/// The bytes [`place`] stores last, in one store.
const TAIL: usize = 8;

/// Copy `from` into `to` (as many bytes as both hold) as a DMA write lands on a device:
/// every byte stored once, the last eight last. `copy_from_slice` (memcpy) may store bytes
/// twice: its vector paths store a head and a tail that overlap, for 64 bytes the same 64
/// twice. A program that polls the last byte of a buffer and then writes it (riostream's
/// latency loop) sees the first store and loses its own write to the second.
#[inline]
pub fn place(to: &mut [u8], from: &[u8]) {
    let n = from.len().min(to.len());
    let (to, from) = (&mut to[..n], &from[..n]);
    if n <= TAIL {
        for (t, &f) in to.iter_mut().zip(from) {
            // SAFETY: a valid byte this thread holds exclusively in Rust; a program's thread
            // may only read or write it concurrently, as it would under a device's DMA.
            unsafe { AtomicU8::from_ptr(t) }.store(f, Ordering::Release);
        }
        return;
    }
    let split = n - TAIL;
    to[..split].copy_from_slice(&from[..split]);
    // The head lands before the tail (the fence also keeps the compiler from moving the
    // tail's store ahead of the copy).
    std::sync::atomic::fence(Ordering::Release);
    let mut tail = [0u8; TAIL];
    tail.copy_from_slice(&from[split..]);
    // SAFETY: `to` holds `split + TAIL` bytes; an unaligned 8-byte store of plain data.
    unsafe { std::ptr::write_unaligned(to.as_mut_ptr().add(split).cast::<u64>(), u64::from_ne_bytes(tail)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_copies_every_length_whole() {
        let from: Vec<u8> = (0..80u8).map(|b| b.wrapping_mul(7) ^ 0x5a).collect();
        for n in 0..=from.len() {
            let mut to = vec![0xeeu8; n + 3];
            place(&mut to[..n], &from[..n]);
            assert_eq!(&to[..n], &from[..n], "{n} bytes");
            assert_eq!(&to[n..], &[0xee; 3], "nothing past {n} bytes");
        }
        // Lengths that differ: the shorter decides.
        let mut short = [0u8; 5];
        place(&mut short, &from);
        assert_eq!(short[..], from[..5]);
    }

    #[test]
    fn buffers_are_page_aligned_and_separated_by_a_guard_page() {
        let mut m = Memory::default();
        let a = m.alloc(10).unwrap_or(0);
        let b = m.alloc(PAGE as usize).unwrap_or(0);
        assert_eq!(a % PAGE, 0);
        assert_eq!(b, a + 2 * PAGE);
        assert!(m.is_mapped(a, 10));
        assert!(!m.is_mapped(a, 11), "past the end");
        assert!(!m.is_mapped(a + PAGE, 1), "guard page");
        assert!(m.write(b + 4090, &[1, 2, 3, 4, 5, 6]));
        assert_eq!(m.read(b + 4092, 4), Some(&[3, 4, 5, 6][..]));
        assert!(!m.write(b + 4095, &[1, 2]));
        assert!(m.free(a));
        assert!(!m.is_mapped(a, 1));
    }

    #[test]
    fn lookup_hints_left_by_freed_regions_never_answer_for_another() {
        let mut m = Memory::default();
        let a = m.alloc(16).unwrap_or(0);
        let b = m.alloc(16).unwrap_or(0);
        assert!(m.write(a, &[1]) && m.write(b, &[2]), "hints now name both regions");
        assert!(m.free(a), "b moves down to a's index");
        assert_eq!(m.read(b, 1), Some(&[2][..]));
        assert_eq!(m.read(a, 1), None, "a's hint now names b, which does not hold a");
        let c = m.alloc(16).unwrap_or(0);
        assert!(m.write(c, &[3]));
        assert_eq!((m.read(b, 1), m.read(c, 1)), (Some(&[2][..]), Some(&[3][..])));
        assert!(!m.is_mapped(b + 15, 2), "a hit still checks the length");
    }

    #[test]
    fn owned_memory_stops_at_the_limit_and_comes_back_when_freed() {
        let mut m = Memory::with_limit(3 * PAGE);
        let a = m.alloc(2 * PAGE as usize);
        assert!(a.is_some());
        assert_eq!(m.alloc(2 * PAGE as usize), None, "past the limit");
        assert!(m.alloc(PAGE as usize).is_some(), "up to the limit");
        assert!(m.free(a.unwrap_or(0)));
        assert!(m.alloc(2 * PAGE as usize).is_some(), "freed bytes count again");
        assert_eq!(Memory::default().alloc(usize::MAX), None, "more than the process can have");
    }

    #[test]
    fn cursors_read_and_write_across_ranges() {
        let mut m = Memory::default();
        let a = m.alloc(16).unwrap_or(0);
        assert!(m.write(a, &(0..16).collect::<Vec<u8>>()));
        let ranges = [(a + 2, 3), (a + 10, 4)];
        let mut c = RangeCursor::new(&ranges);
        let mut out = [0u8; 5];
        assert!(m.read_ranges(&mut c, &mut out));
        assert_eq!(out, [2, 3, 4, 10, 11]);
        assert!(!m.read_ranges(&mut c, &mut [0u8; 3]), "only 2 bytes left");
        let mut w = RangeCursor::new(&ranges);
        assert!(m.write_ranges(&mut w, &[9, 9, 9, 9]));
        assert_eq!(m.read(a, 16), Some(&[0, 1, 9, 9, 9, 5, 6, 7, 8, 9, 9, 11, 12, 13, 14, 15][..]));
    }

    #[test]
    fn transfer_walks_both_range_lists() {
        let mut m = Memory::default();
        let a = m.alloc(16).unwrap_or(0);
        let b = m.alloc(16).unwrap_or(0);
        assert!(m.write(a, &(1..=16).collect::<Vec<u8>>()));
        assert!(m.transfer(&[(a, 3), (a + 10, 4)], &[(b + 1, 2), (b + 8, 5)]));
        assert_eq!(m.read(b, 16), Some(&[0, 1, 2, 0, 0, 0, 0, 0, 3, 11, 12, 13, 14, 0, 0, 0][..]));
        assert!(m.transfer(&[(a, 4)], &[(a + 2, 4)]), "overlap within one buffer");
        assert_eq!(m.read(a, 6), Some(&[1, 2, 1, 2, 3, 4][..]));
        assert!(!m.transfer(&[(a, 4)], &[(a + 4096, 4)]), "unmapped target");
    }

    #[test]
    fn external_memory_is_bounds_checked_at_registration() {
        let mut m = Memory::default();
        let mut v = vec![1u8, 2, 3, 4];
        // SAFETY: `v` outlives the registration and is untouched until `free_external`.
        let va = unsafe { m.register_external(v.as_mut_ptr(), v.len()) };
        assert_eq!(va, Some(v.as_ptr() as u64));
        let va = va.unwrap_or(0);
        // SAFETY: empty registrations are refused before any access.
        assert_eq!(unsafe { m.register_external(std::ptr::null_mut(), 4) }, None, "null");
        assert_eq!(unsafe { m.register_external(v.as_mut_ptr(), 0) }, None, "empty");
        assert!(m.write(va + 1, &[9]));
        assert!(!m.write(va + 3, &[9, 9]), "past the end");
        assert!(!m.free(va), "external memory is not the backend's to free");
        assert!(m.free_external(va, 4));
        assert!(!m.is_mapped(va, 1));
        assert!(!m.free_external(va, 4), "freed once");
        assert_eq!(v, [1, 9, 3, 4]);
        let own = m.alloc(64).unwrap_or(0);
        // SAFETY: refused before any access (the backend's own address range).
        assert_eq!(unsafe { m.register_external(own as *mut u8, 8) }, None, "over the backend's buffers");
    }

    #[test]
    fn overlapping_registrations_share_a_region_until_the_last_goes() {
        let mut m = Memory::default();
        let mut v = vec![0u8; 300];
        let p = v.as_mut_ptr();
        let base = p as u64;
        // SAFETY: `v` outlives every registration and is touched only through `m` meanwhile.
        let (a, b, c) = unsafe {
            (
                m.register_external(p, 100),
                m.register_external(p.wrapping_add(200), 100),
                m.register_external(p.wrapping_add(50), 200),
            )
        };
        assert_eq!((a, b, c), (Some(base), Some(base + 200), Some(base + 50)));
        assert!(m.is_mapped(base, 300), "the three are one region");
        assert!(m.write(base + 90, &[7; 20]), "a write across the first two registrations' bytes");
        // SAFETY: as above; the same range twice counts twice.
        assert_eq!(unsafe { m.register_external(p.wrapping_add(50), 200) }, Some(base + 50));
        assert!(m.free_external(base + 50, 200));
        assert!(m.is_mapped(base, 300), "the bridge is still registered once");
        assert!(m.free_external(base + 50, 200));
        assert!(m.is_mapped(base, 100) && m.is_mapped(base + 200, 100));
        assert!(!m.is_mapped(base + 100, 1), "without the bridge the gap is unmapped");
        assert!(!m.is_mapped(base + 50, 200));
        assert!(m.free_external(base, 100));
        assert!(!m.is_mapped(base, 1));
        assert!(m.read(base + 250, 10).is_some());
        assert!(m.free_external(base + 200, 100));
        assert!(!m.is_mapped(base + 200, 1));
        assert_eq!(v[95], 7);
        assert_eq!(v[109], 7);
    }
}
