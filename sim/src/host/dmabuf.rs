//! A dma-buf exporter over host memory: an fd names a range of mapped bytes, and importers
//! (dma-buf MRs) hold references that keep the export open.

use std::collections::BTreeMap;

/// The first fd the exporter hands out; far above what a program's own files use, so a
/// stale or made-up small fd is never an export.
const FIRST_FD: i32 = 1000;

/// One exported range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Export {
    /// Host address of byte 0.
    pub addr: u64,
    /// Size in bytes (a whole number of pages, as a dma-buf's size is).
    pub len: u64,
    /// Importers holding it.
    pub users: u32,
}

/// The exports of one host, by fd.
#[derive(Debug, Clone)]
pub struct Exporter {
    next: i32,
    exports: BTreeMap<i32, Export>,
}

impl Default for Exporter {
    fn default() -> Self {
        Exporter { next: FIRST_FD, exports: BTreeMap::new() }
    }
}

impl Exporter {
    /// Export `[addr, addr + len)` under a fresh fd; `None` when fds run out.
    pub fn export(&mut self, addr: u64, len: u64) -> Option<i32> {
        let fd = self.next;
        self.next = fd.checked_add(1)?;
        self.exports.insert(fd, Export { addr, len, users: 0 });
        Some(fd)
    }

    /// The export behind `fd`.
    pub fn get(&self, fd: i32) -> Option<Export> {
        self.exports.get(&fd).copied()
    }

    /// An importer takes a reference; false for an unknown fd.
    pub fn acquire(&mut self, fd: i32) -> bool {
        match self.exports.get_mut(&fd) {
            Some(e) => {
                e.users = e.users.saturating_add(1);
                true
            }
            None => false,
        }
    }

    /// An importer drops its reference.
    pub fn release(&mut self, fd: i32) {
        if let Some(e) = self.exports.get_mut(&fd) {
            e.users = e.users.saturating_sub(1);
        }
    }

    /// Close `fd`: `Err(users)` while importers hold it, `Ok(None)` for an unknown fd.
    pub fn close(&mut self, fd: i32) -> Result<Option<Export>, u32> {
        match self.exports.get(&fd) {
            Some(e) if e.users > 0 => Err(e.users),
            Some(_) => Ok(self.exports.remove(&fd)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_are_referenced_by_importers() {
        let mut x = Exporter::default();
        let fd = x.export(0x1000, 4096);
        assert_eq!(fd, Some(FIRST_FD));
        let fd = fd.unwrap_or_default();
        assert!(x.acquire(fd));
        assert_eq!(x.close(fd), Err(1));
        x.release(fd);
        assert_eq!(x.close(fd), Ok(Some(Export { addr: 0x1000, len: 4096, users: 0 })));
        assert_eq!(x.close(fd), Ok(None));
        assert!(!x.acquire(fd));
    }
}
