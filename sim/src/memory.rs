//! Host memory: page-aligned buffers at simulated virtual addresses.

use std::collections::BTreeMap;

/// The page size of the simulated host.
pub const PAGE: u64 = 4096;
/// Where the first buffer is placed; every buffer is followed by an unmapped guard page.
const FIRST_VA: u64 = 0x7f00_0000_0000;

/// The simulated host's memory: buffers keyed by their start address.
#[derive(Debug, Clone)]
pub struct Memory {
    bufs: BTreeMap<u64, Vec<u8>>,
    next_va: u64,
}

impl Default for Memory {
    fn default() -> Self {
        Memory { bufs: BTreeMap::new(), next_va: FIRST_VA }
    }
}

impl Memory {
    /// Map `len` zeroed bytes at a fresh page-aligned address; `None` if the address space
    /// is exhausted.
    pub fn alloc(&mut self, len: usize) -> Option<u64> {
        let va = self.next_va;
        let pages = (len as u64).div_ceil(PAGE).max(1) + 1;
        self.next_va = va.checked_add(pages.checked_mul(PAGE)?)?;
        self.bufs.insert(va, vec![0; len]);
        Some(va)
    }

    /// Unmap the buffer at `va`.
    pub fn free(&mut self, va: u64) -> bool {
        self.bufs.remove(&va).is_some()
    }

    /// The buffer holding `[va, va + len)`, and the offset of `va` in it.
    fn locate(&self, va: u64, len: u64) -> Option<(u64, usize)> {
        let (&base, buf) = self.bufs.range(..=va).next_back()?;
        let off = va - base;
        let end = off.checked_add(len)?;
        (end <= buf.len() as u64).then_some((base, off as usize))
    }

    /// True if `[va, va + len)` is mapped, inside one buffer.
    pub fn is_mapped(&self, va: u64, len: u64) -> bool {
        self.locate(va, len).is_some()
    }

    /// The bytes at `[va, va + len)`.
    pub fn read(&self, va: u64, len: usize) -> Option<&[u8]> {
        let (base, off) = self.locate(va, len as u64)?;
        self.bufs.get(&base).map(|b| &b[off..off + len])
    }

    /// Copy `data` to `va`; false if the range is not mapped.
    pub fn write(&mut self, va: u64, data: &[u8]) -> bool {
        let Some((base, off)) = self.locate(va, data.len() as u64) else { return false };
        match self.bufs.get_mut(&base) {
            Some(b) => {
                b[off..off + data.len()].copy_from_slice(data);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
