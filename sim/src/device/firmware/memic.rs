//! Device memory (MEMIC): the DEVICE_MEMORY capability page, ALLOC_MEMIC / DEALLOC_MEMIC, and
//! where the MEMIC bytes are.
//!
//! MEMIC addresses are offsets in the device's BAR 0, from `memic_bar_start_addr` for
//! `memic_bar_size` bytes. The engine reaches memory only through host addresses, so the
//! simulated BAR window is a region of host memory the simulator maps for the device
//! ([`Firmware::set_memic_window`]); a MEMIC mkey's bytes are that window's.

use mlx5_dv::prm::{self, Field, FieldError, status};

use super::{Firmware, Reject, syndrome};
use crate::profile::Profile;

/// `device_mem_cap` fields (positions from `mlx5_ifc.h`).
pub mod cap {
    use mlx5_dv::prm::Field;
    /// The device has MEMIC.
    pub const MEMIC: Field = Field::new("memic", 0x0, 1);
    /// Access sizes of the increment operation (bit 0: one byte).
    pub const INCREMENT_SIZE_SUP: Field = Field::new("increment_size_sup", 0x20, 8);
    /// Access sizes of the test-and-set operation (bit 0: one byte).
    pub const TEST_AND_SET_SIZE_SUP: Field = Field::new("test_and_set_size_sup", 0x30, 8);
    /// The MEMIC operations (bit 0 increment, bit 1 test-and-set).
    pub const MEMIC_OPERATIONS: Field = Field::new("memic_operations", 0x200, 32);
    /// log2 of the largest MEMIC alignment, in units of 64 bytes.
    pub const LOG_MAX_MEMIC_ADDR_ALIGNMENT: Field = Field::new("log_max_memic_addr_alignment", 0x38, 8);
    /// Where MEMIC starts in BAR 0.
    pub const MEMIC_BAR_START_ADDR: Field = Field::new("memic_bar_start_addr", 0x40, 64);
    /// Bytes of MEMIC in BAR 0.
    pub const MEMIC_BAR_SIZE: Field = Field::new("memic_bar_size", 0x80, 32);
    /// The largest allocation (`ibv_device_attr_ex.max_dm_size`).
    pub const MAX_MEMIC_SIZE: Field = Field::new("max_memic_size", 0xa0, 32);
}

/// `alloc_memic_in` / `alloc_memic_out` and `dealloc_memic_in` (positions from the kernel's
/// `mlx5_ifc.h`).
pub mod cmd {
    use mlx5_dv::prm::Field;
    /// ALLOC_MEMIC.
    pub const ALLOC_MEMIC: u16 = 0x205;
    /// DEALLOC_MEMIC.
    pub const DEALLOC_MEMIC: u16 = 0x206;
    /// Input bytes of both commands.
    pub const IN_SIZE: usize = 0x20;
    /// Output bytes of ALLOC_MEMIC.
    pub const ALLOC_OUT_SIZE: usize = 0x10;
    /// ALLOC_MEMIC: log2 of the alignment, in units of 64 bytes.
    pub const LOG_MEMIC_ADDR_ALIGNMENT: Field = Field::new("log_memic_addr_alignment", 0x78, 8);
    /// ALLOC_MEMIC: the range the allocation must lie in.
    pub const RANGE_START_ADDR: Field = Field::new("range_start_addr", 0x80, 64);
    /// ALLOC_MEMIC: bytes of that range.
    pub const RANGE_SIZE: Field = Field::new("range_size", 0xc0, 32);
    /// ALLOC_MEMIC: bytes asked for.
    pub const MEMIC_SIZE: Field = Field::new("memic_size", 0xe0, 32);
    /// ALLOC_MEMIC output: where the allocation starts.
    pub const OUT_MEMIC_START_ADDR: Field = Field::new("memic_start_addr", 0x40, 64);
    /// DEALLOC_MEMIC: where the allocation starts.
    pub const DEALLOC_START_ADDR: Field = Field::new("memic_start_addr", 0x80, 64);
    /// DEALLOC_MEMIC: its size.
    pub const DEALLOC_SIZE: Field = Field::new("memic_size", 0xc0, 32);
}

/// `memic_bar_start_addr`: where MEMIC starts in BAR 0 (unverified: each card has its own).
pub const MEMIC_BAR_START: u64 = 0x0100_0000;

/// `log_max_memic_addr_alignment` (unverified).
pub const LOG_MAX_ALIGNMENT: u8 = 12;

/// The MEMIC of one device: its allocations and its host window.
#[derive(Debug, Clone, Default)]
pub(crate) struct Memic {
    /// Bytes of MEMIC (0: none).
    size: u64,
    /// Allocations by start (a BAR offset): their sizes.
    allocs: std::collections::BTreeMap<u64, u64>,
    /// The host address of MEMIC byte 0, once mapped.
    window: Option<u64>,
}

impl Memic {
    pub(super) fn new(profile: &Profile) -> Self {
        Memic { size: u64::from(profile.device.max_dm_size), ..Memic::default() }
    }

    /// The DEVICE_MEMORY capability page.
    pub(super) fn page(&self) -> Result<super::caps::Page, FieldError> {
        let mut page = Box::new([0u8; prm::query_hca_cap::CAPABILITY_SIZE]);
        if self.size > 0 {
            let p = &mut page[..];
            let fields: [(Field, u64); 8] = [
                (cap::MEMIC, 1),
                // MEMIC atomic operations (increment, test-and-set) of one byte.
                (cap::INCREMENT_SIZE_SUP, 1),
                (cap::TEST_AND_SET_SIZE_SUP, 1),
                (cap::MEMIC_OPERATIONS, 0b11),
                (cap::LOG_MAX_MEMIC_ADDR_ALIGNMENT, u64::from(LOG_MAX_ALIGNMENT)),
                (cap::MEMIC_BAR_START_ADDR, MEMIC_BAR_START),
                (cap::MEMIC_BAR_SIZE, self.size),
                (cap::MAX_MEMIC_SIZE, self.size),
            ];
            for (f, v) in fields {
                f.set(p, v)?;
            }
        }
        Ok(page)
    }

    /// The host address of `len` bytes at BAR offset `addr`, inside one allocation.
    pub(crate) fn host_addr(&self, addr: u64, len: u64) -> Option<u64> {
        let (&start, &size) = self.allocs.range(..=addr).next_back()?;
        let end = addr.checked_add(len)?;
        if end > start + size {
            return None;
        }
        self.window?.checked_add(addr - MEMIC_BAR_START)
    }
}

impl Firmware {
    /// Bytes of MEMIC this device has (0: none).
    pub fn memic_size(&self) -> u64 {
        self.memic.size
    }

    /// Where the device's MEMIC window is in host memory, if mapped.
    pub fn memic_window(&self) -> Option<u64> {
        self.memic.window
    }

    /// Map the MEMIC window at host address `addr` (the simulator does it once, as the PCI
    /// core assigns a BAR).
    pub fn set_memic_window(&mut self, addr: u64) {
        self.memic.window = Some(addr);
    }

    /// The host address of `len` bytes at MEMIC address `addr`, if one allocation holds them.
    pub(crate) fn memic_host(&self, addr: u64, len: u64) -> Option<u64> {
        self.memic.host_addr(addr, len)
    }

    /// ALLOC_MEMIC: the first address of the range aligned as asked whose `memic_size` bytes
    /// fit in the range and overlap no allocation; NO_RES (the kernel's EAGAIN: try the
    /// next range) when there is none.
    pub(super) fn alloc_memic(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        if input.len() < cmd::IN_SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        if out.len() < cmd::ALLOC_OUT_SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let m = &self.memic;
        let log_align = cmd::LOG_MEMIC_ADDR_ALIGNMENT.get(input)?;
        let (start, range) = (cmd::RANGE_START_ADDR.get(input)?, cmd::RANGE_SIZE.get(input)?);
        let size = cmd::MEMIC_SIZE.get(input)?;
        let bar_end = MEMIC_BAR_START + m.size;
        let range_end = start.checked_add(range).ok_or(Reject(status::BAD_PARAM_ERR, syndrome::OUT_OF_RANGE))?;
        if m.size == 0 || size == 0 || log_align > u64::from(LOG_MAX_ALIGNMENT) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        if start < MEMIC_BAR_START || range_end > bar_end {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::OUT_OF_RANGE));
        }
        let align = 64u64 << log_align;
        let at = start.next_multiple_of(align);
        let fits = at.checked_add(size).is_some_and(|e| e <= range_end);
        let free = m.allocs.range(..at + size).next_back().is_none_or(|(&s, &n)| s + n <= at);
        if !fits || !free {
            return Err(Reject(status::NO_RES_ERR, syndrome::OUT_OF_OBJECTS));
        }
        self.memic.allocs.insert(at, size);
        cmd::OUT_MEMIC_START_ADDR.set(out, at)?;
        Ok(())
    }

    /// DEALLOC_MEMIC: an allocation, named by its start and size.
    pub(super) fn dealloc_memic(&mut self, input: &[u8]) -> Result<(), Reject> {
        if input.len() < cmd::IN_SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        let (start, size) = (cmd::DEALLOC_START_ADDR.get(input)?, cmd::DEALLOC_SIZE.get(input)?);
        if self.memic.allocs.get(&start) != Some(&size) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
        }
        self.memic.allocs.remove(&start);
        self.changed();
        Ok(())
    }
}

impl crate::device::Device {
    /// Map the device's MEMIC window at host address `addr` (see [`Firmware::set_memic_window`]).
    pub fn set_memic_window(&mut self, addr: u64) {
        self.fw.set_memic_window(addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ShippedProfiles;

    fn alloc(fw: &mut Firmware, (start, range, size, align): (u64, u64, u64, u64)) -> (u8, u64) {
        let mut input = prm::new_input(cmd::IN_SIZE, cmd::ALLOC_MEMIC, 0, 0);
        for (f, v) in [
            (cmd::RANGE_START_ADDR, start),
            (cmd::RANGE_SIZE, range),
            (cmd::MEMIC_SIZE, size),
            (cmd::LOG_MEMIC_ADDR_ALIGNMENT, align),
        ] {
            f.set(&mut input, v).expect("field");
        }
        let mut out = [0u8; cmd::ALLOC_OUT_SIZE];
        fw.exec(&input, &mut out);
        (out[0], cmd::OUT_MEMIC_START_ADDR.get(&out).expect("field"))
    }

    #[test]
    fn alloc_memic_fits_the_range_aligned_and_never_overlaps() -> Result<(), Box<dyn std::error::Error>> {
        let mut fw = Firmware::new(&Profile::builtin("cx6dx")?)?;
        let base = MEMIC_BAR_START;
        assert_eq!(alloc(&mut fw, (base, 4096, 128, 0)), (status::OK, base));
        assert_eq!(alloc(&mut fw, (base, 4096, 64, 0)).0, status::NO_RES_ERR, "overlaps the first");
        // Aligned to 64 << 7 = 8 KiB: a range at an odd page cannot hold it.
        assert_eq!(alloc(&mut fw, (base + 4096, 4096, 64, 7)).0, status::NO_RES_ERR);
        assert_eq!(alloc(&mut fw, (base + 8192, 4096, 64, 7)), (status::OK, base + 8192));
        assert_eq!(alloc(&mut fw, (base + 12288, 4096, 8192, 0)).0, status::NO_RES_ERR, "past its range");
        assert_eq!(alloc(&mut fw, (0, 4096, 64, 0)).0, status::BAD_PARAM_ERR, "outside MEMIC");
        assert_eq!(alloc(&mut fw, (base, 4096, 64, 13)).0, status::BAD_PARAM_ERR, "alignment past the cap");
        let mut input = prm::new_input(cmd::IN_SIZE, cmd::DEALLOC_MEMIC, 0, 0);
        cmd::DEALLOC_START_ADDR.set(&mut input, base)?;
        cmd::DEALLOC_SIZE.set(&mut input, 128)?;
        let mut out = [0u8; prm::mbox_out::SIZE];
        fw.exec(&input, &mut out);
        assert_eq!(out[0], status::OK);
        fw.exec(&input, &mut out);
        assert_eq!(out[0], status::BAD_PARAM_ERR, "twice");
        assert_eq!(alloc(&mut fw, (base, 4096, 64, 0)), (status::OK, base), "free again");
        Ok(())
    }

    #[test]
    fn the_caps_page_says_memic_only_where_the_profile_has_it() -> Result<(), Box<dyn std::error::Error>> {
        let mut p = Profile::builtin("cx6dx")?;
        let page = Memic::new(&p).page()?;
        assert_eq!(cap::MEMIC.get(&page[..])?, 1);
        assert_eq!(cap::MAX_MEMIC_SIZE.get(&page[..])?, u64::from(p.device.max_dm_size));
        p.device.max_dm_size = 0;
        assert!(Memic::new(&p).page()?.iter().all(|b| *b == 0));
        Ok(())
    }
}
