//! The field type every PRM table is made of, and its error.

use std::fmt;

/// A field of a PRM structure: bit offset from the structure's start, and width in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The PRM name of the field.
    pub name: &'static str,
    /// Bit offset, counted from the MSB of byte 0.
    pub bit_off: u32,
    /// Width in bits: 1..=32 within one dword, or 64 on a dword boundary.
    pub width: u32,
}

/// A buffer was too short for a field or a structure, or a value does not fit its field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    /// The buffer ends before the field does.
    OutOfBounds {
        /// The field.
        field: &'static str,
        /// The buffer length in bytes.
        len: usize,
    },
    /// The value has bits beyond the field's width.
    TooWide {
        /// The field.
        field: &'static str,
        /// The value given.
        value: u64,
    },
    /// The buffer is shorter than the whole structure a view or codec needs.
    TooShort {
        /// The structure's PRM name.
        layout: &'static str,
        /// Bytes the structure needs.
        need: usize,
        /// The buffer length in bytes.
        len: usize,
    },
    /// The field's own shape cannot be read: it crosses a dword, or is 64 bits off a dword
    /// boundary, or is empty.
    Malformed {
        /// The field.
        field: &'static str,
    },
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::OutOfBounds { field, len } => {
                write!(f, "field {field} lies beyond a {len}-byte mailbox")
            }
            FieldError::TooWide { field, value } => {
                write!(f, "value 0x{value:x} does not fit field {field}")
            }
            FieldError::TooShort { layout, need, len } => {
                write!(f, "{layout} needs {need} bytes, the buffer has {len}")
            }
            FieldError::Malformed { field } => write!(f, "field {field} has a shape no dword access can read"),
        }
    }
}

impl std::error::Error for FieldError {}

impl Field {
    /// Declare a field.
    #[inline]
    pub const fn new(name: &'static str, bit_off: u32, width: u32) -> Self {
        Field { name, bit_off, width }
    }

    /// The same field inside an enclosing structure that holds this one at `base_bits`.
    #[inline]
    pub const fn at(self, base_bits: u32) -> Self {
        // Saturating: an absurd base leaves a field that every buffer is too short for.
        Field { name: self.name, bit_off: self.bit_off.saturating_add(base_bits), width: self.width }
    }

    /// Byte offset of the dword that holds the field's first bit.
    #[inline]
    pub const fn dword_byte(&self) -> usize {
        (self.bit_off / 32 * 4) as usize
    }

    /// Byte offset of the byte that holds the field's first bit (for comparing with C
    /// `offsetof` of byte-sized members).
    #[inline]
    pub const fn byte_off(&self) -> usize {
        (self.bit_off / 8) as usize
    }

    /// Bit position of the field's least significant bit within its big-endian dword
    /// (31 = MSB), for fields of at most 32 bits.
    #[inline]
    pub const fn low_bit(&self) -> u32 {
        31u32.saturating_sub((self.bit_off % 32 + self.width).saturating_sub(1))
    }

    /// True when one dword access (or one aligned 64-bit access) can read the field.
    #[inline]
    pub const fn is_well_formed(&self) -> bool {
        match self.width {
            64 => self.bit_off.is_multiple_of(32),
            1..=32 => self.bit_off % 32 + self.width <= 32,
            _ => false,
        }
    }

    /// True when the field is well formed and ends within a structure of `size` bytes.
    #[inline]
    pub const fn fits(&self, size: usize) -> bool {
        self.is_well_formed() && (self.bit_off as usize + self.width as usize).div_ceil(8) <= size
    }

    /// The bytes holding the field: its dword, or its two dwords when 64 bits wide.
    #[inline]
    const fn span(&self) -> usize {
        if self.width == 64 { 8 } else { 4 }
    }

    #[inline]
    fn mask(&self) -> u64 {
        if self.width >= 64 { u64::MAX } else { (1u64 << self.width) - 1 }
    }

    #[inline]
    fn check(&self, len: usize) -> Result<(), FieldError> {
        if !self.is_well_formed() {
            return Err(FieldError::Malformed { field: self.name });
        }
        if !self.fits(len) {
            return Err(FieldError::OutOfBounds { field: self.name, len });
        }
        Ok(())
    }

    /// Read the field from `buf`.
    // Always inlined: with a constant field and a fixed-size buffer the checks fold away,
    // and mailboxes are encoded a field at a time.
    #[inline(always)]
    pub fn get(&self, buf: &[u8]) -> Result<u64, FieldError> {
        self.check(buf.len())?;
        let at = self.dword_byte();
        let oob = FieldError::OutOfBounds { field: self.name, len: buf.len() };
        let bytes = buf.get(at..at + self.span()).ok_or(oob)?;
        let word = bytes.iter().fold(0u64, |w, b| w << 8 | u64::from(*b));
        if self.width == 64 {
            return Ok(word);
        }
        Ok((word >> self.low_bit()) & self.mask())
    }

    /// Write `value` into the field of `buf`, leaving the other bits alone.
    #[inline(always)]
    pub fn set(&self, buf: &mut [u8], value: u64) -> Result<(), FieldError> {
        self.check(buf.len())?;
        if value & !self.mask() != 0 {
            return Err(FieldError::TooWide { field: self.name, value });
        }
        let at = self.dword_byte();
        let oob = FieldError::OutOfBounds { field: self.name, len: buf.len() };
        let bytes = buf.get_mut(at..at + self.span()).ok_or(oob)?;
        if self.width == 64 {
            bytes.copy_from_slice(&value.to_be_bytes());
            return Ok(());
        }
        let mut b = [0u8; 4];
        b.copy_from_slice(bytes);
        let shift = self.low_bit();
        let mask = (self.mask() << shift) as u32;
        let dw = (u32::from_be_bytes(b) & !mask) | ((value << shift) as u32 & mask);
        bytes.copy_from_slice(&dw.to_be_bytes());
        Ok(())
    }
}
