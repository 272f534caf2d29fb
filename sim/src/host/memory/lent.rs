//! On-demand paging in a process: ranges of the program's address space the device may reach
//! without pinning them (ODP MRs), and the page fault that maps their pages at access time.
//!
//! The fault is `madvise(MADV_POPULATE_READ / MADV_POPULATE_WRITE)`, which does what the
//! kernel's ODP fault handler asks of `hmm_range_fault`: it faults the pages in (readable, or
//! writable) and fails, without a signal, where the range is not mapped or the mapping does not
//! allow the access. It was measured against `process_vm_readv` of a byte per page (slower, and
//! blind to writability without a racing write back) and `mincore` / `msync` (blind to
//! protections): docs/measured.md, "On-demand paging".

use super::PAGE;

/// `MADV_POPULATE_READ` (Linux 5.14).
const MADV_POPULATE_READ: i32 = 22;
/// `MADV_POPULATE_WRITE` (Linux 5.14).
const MADV_POPULATE_WRITE: i32 = 23;

/// Lent ranges as `[start, end]` (inclusive, so that an implicit ODP MR over the whole
/// address space fits) with how many MRs lend each.
#[derive(Debug, Clone, Default)]
pub(super) struct Lent {
    ranges: Vec<(u64, u64, u32)>,
}

impl Lent {
    /// True if nothing is lent.
    pub(super) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Lend `[va, va + len)` (`len` 0 lends nothing); a range lent again counts twice.
    pub(super) fn add(&mut self, va: u64, len: u64) {
        let Some(last) = len.checked_sub(1).and_then(|l| va.checked_add(l)) else { return };
        match self.ranges.iter_mut().find(|(s, e, _)| *s == va && *e == last) {
            Some(r) => r.2 += 1,
            None => self.ranges.push((va, last, 1)),
        }
    }

    /// Take back one lending of `[va, va + len)`.
    pub(super) fn remove(&mut self, va: u64, len: u64) {
        let Some(last) = len.checked_sub(1).and_then(|l| va.checked_add(l)) else { return };
        if let Some(i) = self.ranges.iter().position(|(s, e, _)| *s == va && *e == last) {
            self.ranges[i].2 -= 1;
            if self.ranges[i].2 == 0 {
                self.ranges.swap_remove(i);
            }
        }
    }

    /// True if one lent range holds all of `[va, va + len)`.
    pub(super) fn covers(&self, va: u64, len: u64) -> bool {
        let last = match len.checked_sub(1) {
            None => va,
            Some(l) => match va.checked_add(l) {
                Some(last) => last,
                None => return false,
            },
        };
        self.ranges.iter().any(|(s, e, _)| *s <= va && last <= *e)
    }
}

/// Fault in the pages of `[va, va + len)` of this process for reading (or writing); false,
/// with no signal raised, if a page is not mapped or its mapping refuses the access.
pub(super) fn fault_in(va: u64, len: u64, write: bool) -> bool {
    if len == 0 {
        return true;
    }
    let start = va & !(PAGE - 1);
    let Some(end) = va.checked_add(len).and_then(|e| e.checked_add(PAGE - 1)).map(|e| e & !(PAGE - 1)) else {
        return false;
    };
    let (Ok(addr), Ok(n)) = (usize::try_from(start), usize::try_from(end - start)) else { return false };
    let advice = if write { MADV_POPULATE_WRITE } else { MADV_POPULATE_READ };
    // SAFETY: MADV_POPULATE_* only faults pages in as an access would, without changing the
    // contents; on an unmapped or inaccessible page it fails with an error, not a signal.
    unsafe { libc::madvise(addr as *mut libc::c_void, n, advice) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_tell_mapped_readable_writable_and_unmapped_pages_apart() {
        let n = 4 * PAGE as usize;
        // SAFETY: a fresh anonymous mapping this test owns.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                n,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let va = p as u64;
        assert!(fault_in(va + 10, 3 * PAGE, true));
        // SAFETY: the third page of the mapping above.
        unsafe {
            assert_eq!(libc::mprotect((va + 2 * PAGE) as *mut libc::c_void, PAGE as usize, libc::PROT_READ), 0);
            assert_eq!(libc::munmap((va + 3 * PAGE) as *mut libc::c_void, PAGE as usize), 0);
        }
        assert!(fault_in(va + 2 * PAGE, PAGE, false));
        assert!(!fault_in(va + 2 * PAGE, PAGE, true));
        assert!(!fault_in(va + 3 * PAGE, 1, false));
        assert!(!fault_in(va, 4 * PAGE, false));
        // SAFETY: the three pages still mapped.
        unsafe { libc::munmap(p, 3 * PAGE as usize) };
    }

    #[test]
    fn lent_ranges_count_and_cover() {
        let mut l = Lent::default();
        l.add(0x1000, 0x2000);
        l.add(0x1000, 0x2000);
        l.add(0, u64::MAX);
        assert!(l.covers(0x1fff, 0x1001));
        l.remove(0, u64::MAX);
        assert!(!l.covers(0x1fff, 0x1002));
        l.remove(0x1000, 0x2000);
        assert!(l.covers(0x1000, 1));
        l.remove(0x1000, 0x2000);
        assert!(l.is_empty());
    }
}
