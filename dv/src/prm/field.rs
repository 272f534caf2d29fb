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

/// A mailbox was too short for the field, or the value does not fit it.
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
        }
    }
}

impl std::error::Error for FieldError {}

impl Field {
    /// Declare a field.
    pub const fn new(name: &'static str, bit_off: u32, width: u32) -> Self {
        Field { name, bit_off, width }
    }

    /// The same field inside an enclosing structure that holds this one at `base_bits`.
    pub const fn at(self, base_bits: u32) -> Self {
        Field { name: self.name, bit_off: self.bit_off + base_bits, width: self.width }
    }

    /// Byte offset of the dword that holds the field's first bit.
    pub const fn dword_byte(&self) -> usize {
        (self.bit_off / 32 * 4) as usize
    }

    /// Bit position of the field's least significant bit within its big-endian dword
    /// (31 = MSB), for fields of at most 32 bits.
    pub const fn low_bit(&self) -> u32 {
        31 - (self.bit_off % 32 + self.width - 1)
    }

    fn mask(&self) -> u64 {
        if self.width >= 64 { u64::MAX } else { (1u64 << self.width) - 1 }
    }

    fn check_bounds(&self, len: usize) -> Result<(), FieldError> {
        let end_bit = self.bit_off as usize + self.width as usize;
        if end_bit.div_ceil(8) > len {
            return Err(FieldError::OutOfBounds { field: self.name, len });
        }
        Ok(())
    }

    /// Read the field from `buf`.
    pub fn get(&self, buf: &[u8]) -> Result<u64, FieldError> {
        self.check_bounds(buf.len())?;
        let at = self.dword_byte();
        if self.width == 64 {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[at..at + 8]);
            return Ok(u64::from_be_bytes(b));
        }
        let mut b = [0u8; 4];
        b.copy_from_slice(&buf[at..at + 4]);
        let dw = u32::from_be_bytes(b) as u64;
        Ok((dw >> self.low_bit()) & self.mask())
    }

    /// Write `value` into the field of `buf`, leaving the other bits alone.
    pub fn set(&self, buf: &mut [u8], value: u64) -> Result<(), FieldError> {
        self.check_bounds(buf.len())?;
        if value & !self.mask() != 0 {
            return Err(FieldError::TooWide { field: self.name, value });
        }
        let at = self.dword_byte();
        if self.width == 64 {
            buf[at..at + 8].copy_from_slice(&value.to_be_bytes());
            return Ok(());
        }
        let mut b = [0u8; 4];
        b.copy_from_slice(&buf[at..at + 4]);
        let shift = self.low_bit();
        let mask = (self.mask() << shift) as u32;
        let dw = (u32::from_be_bytes(b) & !mask) | ((value << shift) as u32 & mask);
        buf[at..at + 4].copy_from_slice(&dw.to_be_bytes());
        Ok(())
    }
}
