//! How an mkey turns its addresses into memory: the translation a UMR WQE or a CREATE_MKEY
//! mailbox gives it (an MTT range, a KLM list, a repeat block), shared by the firmware that
//! holds mkeys and the WQE decoder that reads UMRs.

/// One entry of a KLM list: `byte_count` bytes at `addr` of the memory `key` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Klm {
    /// Bytes this entry maps.
    pub byte_count: u32,
    /// Key of the memory it points into.
    pub key: u32,
    /// Address in that memory.
    pub addr: u64,
}

/// One entry of a repeat block: each repetition `r` maps `byte_count` bytes at
/// `addr + r * stride` of the memory `key` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatEntry {
    /// Distance between repetitions (16-bit in the WQE).
    pub stride: u16,
    /// Bytes per repetition (16-bit in the WQE).
    pub byte_count: u16,
    /// Key of the memory it points into.
    pub key: u32,
    /// Address of the first repetition.
    pub addr: u64,
}

/// How an mkey turns its addresses into memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Translation {
    /// Nothing yet: an indirect mkey no UMR has given a layout.
    None,
    /// A registered region: addresses are host virtual addresses within `[start, start+len)`.
    Mtt,
    /// A KLM list (layout list): zero-based, entries back to back.
    Klm(Vec<Klm>),
    /// A repeat block (interleaved layout): zero-based, repetitions of the entries in turn.
    Repeat {
        /// How many times the entry list repeats.
        repeat_count: u32,
        /// The entries.
        entries: Vec<RepeatEntry>,
    },
    /// Device memory (MEMIC access mode): zero-based addresses from the mkey's `start_addr`,
    /// a MEMIC address, into the device's MEMIC.
    Memic,
}
