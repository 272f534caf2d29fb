//! PRM command layouts as declarative field tables.
//!
//! The PRM numbers bits from the most significant bit of byte 0: a structure is a run of
//! big-endian 32-bit dwords, and a field at bit offset `N` of width `W` ends at bit `N + W - 1`.
//! Each structure below is one table of [`Field`]s; the simulator's firmware, its provider and
//! the conformance cases all read and write mailboxes through these tables.

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

/// Command opcodes.
pub mod opcode {
    /// QUERY_HCA_CAP.
    pub const QUERY_HCA_CAP: u16 = 0x100;
    /// CREATE_MKEY.
    pub const CREATE_MKEY: u16 = 0x200;
    /// QUERY_MKEY.
    pub const QUERY_MKEY: u16 = 0x201;
    /// DESTROY_MKEY.
    pub const DESTROY_MKEY: u16 = 0x202;
    /// CREATE_EQ.
    pub const CREATE_EQ: u16 = 0x301;
    /// DESTROY_EQ.
    pub const DESTROY_EQ: u16 = 0x302;
    /// CREATE_PSV.
    pub const CREATE_PSV: u16 = 0x600;
    /// DESTROY_PSV.
    pub const DESTROY_PSV: u16 = 0x601;
    /// ALLOC_PD.
    pub const ALLOC_PD: u16 = 0x800;
    /// DEALLOC_PD.
    pub const DEALLOC_PD: u16 = 0x801;
    /// CREATE_GENERAL_OBJECT.
    pub const CREATE_GENERAL_OBJECT: u16 = 0xa00;
    /// DESTROY_GENERAL_OBJECT.
    pub const DESTROY_GENERAL_OBJECT: u16 = 0xa03;

    /// The PRM name of an opcode, for reports.
    pub fn name(op: u16) -> &'static str {
        match op {
            QUERY_HCA_CAP => "QUERY_HCA_CAP",
            CREATE_MKEY => "CREATE_MKEY",
            QUERY_MKEY => "QUERY_MKEY",
            DESTROY_MKEY => "DESTROY_MKEY",
            CREATE_EQ => "CREATE_EQ",
            DESTROY_EQ => "DESTROY_EQ",
            CREATE_PSV => "CREATE_PSV",
            DESTROY_PSV => "DESTROY_PSV",
            ALLOC_PD => "ALLOC_PD",
            DEALLOC_PD => "DEALLOC_PD",
            CREATE_GENERAL_OBJECT => "CREATE_GENERAL_OBJECT",
            DESTROY_GENERAL_OBJECT => "DESTROY_GENERAL_OBJECT",
            _ => "UNKNOWN",
        }
    }
}

/// Command status codes (`out.status`).
pub mod status {
    /// OK.
    pub const OK: u8 = 0x00;
    /// INT_ERR.
    pub const INT_ERR: u8 = 0x01;
    /// BAD_OP_ERR.
    pub const BAD_OP_ERR: u8 = 0x02;
    /// BAD_PARAM_ERR.
    pub const BAD_PARAM_ERR: u8 = 0x03;
    /// BAD_SYS_STATE_ERR.
    pub const BAD_SYS_STATE_ERR: u8 = 0x04;
    /// BAD_RES_ERR.
    pub const BAD_RES_ERR: u8 = 0x05;
    /// RES_BUSY.
    pub const RES_BUSY: u8 = 0x06;
    /// LIM_ERR.
    pub const LIM_ERR: u8 = 0x08;
    /// BAD_RES_STATE_ERR.
    pub const BAD_RES_STATE_ERR: u8 = 0x09;
    /// IX_ERR.
    pub const IX_ERR: u8 = 0x0a;
    /// NO_RES_ERR.
    pub const NO_RES_ERR: u8 = 0x0f;
    /// BAD_QP_STATE_ERR.
    pub const BAD_QP_STATE_ERR: u8 = 0x10;
    /// BAD_PKT_ERR.
    pub const BAD_PKT_ERR: u8 = 0x30;
    /// BAD_SIZE_OUTS_CQES_ERR.
    pub const BAD_SIZE_OUTS_CQES_ERR: u8 = 0x40;
    /// BAD_INP_LEN_ERR.
    pub const BAD_INP_LEN_ERR: u8 = 0x50;
    /// BAD_OUTP_LEN_ERR.
    pub const BAD_OUTP_LEN_ERR: u8 = 0x51;

    /// The errno the provider reports for a command status (`mlx5_cmd_status_to_err`).
    pub fn to_errno(status: u8) -> i32 {
        use crate::errno::*;
        match status {
            OK => 0,
            BAD_OP_ERR
            | BAD_PARAM_ERR
            | BAD_RES_ERR
            | BAD_RES_STATE_ERR
            | IX_ERR
            | BAD_QP_STATE_ERR
            | BAD_PKT_ERR
            | BAD_SIZE_OUTS_CQES_ERR => EINVAL,
            RES_BUSY => EBUSY,
            LIM_ERR => ENOMEM,
            NO_RES_ERR => EAGAIN,
            _ => EIO,
        }
    }
}

/// `mbox_in`: the header every input mailbox starts with.
pub mod mbox_in {
    use super::Field;
    /// opcode.
    pub const OPCODE: Field = Field::new("opcode", 0x00, 16);
    /// uid.
    pub const UID: Field = Field::new("uid", 0x10, 16);
    /// op_mod.
    pub const OP_MOD: Field = Field::new("op_mod", 0x30, 16);
    /// Header size in bytes.
    pub const SIZE: usize = 16;
}

/// `mbox_out`: the header every output mailbox starts with.
pub mod mbox_out {
    use super::Field;
    /// status.
    pub const STATUS: Field = Field::new("status", 0x00, 8);
    /// syndrome.
    pub const SYNDROME: Field = Field::new("syndrome", 0x20, 32);
    /// Header size in bytes.
    pub const SIZE: usize = 16;
}

/// `query_hca_cap_in` / `query_hca_cap_out`.
pub mod query_hca_cap {
    /// op_mod for the current general capabilities: `GENERAL(0) << 1 | GET_CUR(1)`.
    #[allow(clippy::identity_op)] // spelled out to mirror the PRM encoding
    pub const OP_MOD_GENERAL_CUR: u16 = 0x0 << 1 | 1;
    /// op_mod for the current crypto capabilities: `CRYPTO(0x1a) << 1 | GET_CUR(1)`.
    pub const OP_MOD_CRYPTO_CUR: u16 = 0x1a << 1 | 1;
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
    /// Byte offset of the capability page in the output.
    pub const CAPABILITY_BYTE: usize = 16;
    /// Capability page size in bytes.
    pub const CAPABILITY_SIZE: usize = 4096;
    /// Output size in bytes.
    pub const OUT_SIZE: usize = CAPABILITY_BYTE + CAPABILITY_SIZE;
}

/// `cmd_hca_cap`: the general capability page (the fields the provider reads).
pub mod cmd_hca_cap {
    use super::Field;
    /// log_max_mkey.
    pub const LOG_MAX_MKEY: Field = Field::new("log_max_mkey", 0xea, 6);
    /// log_max_klm_list_size.
    pub const LOG_MAX_KLM_LIST_SIZE: Field = Field::new("log_max_klm_list_size", 0x11a, 6);
    /// sig_crc64_xp10.
    pub const SIG_CRC64_XP10: Field = Field::new("sig_crc64_xp10", 0x147, 1);
    /// sig_crc32c.
    pub const SIG_CRC32C: Field = Field::new("sig_crc32c", 0x148, 1);
    /// sig_block_4048.
    pub const SIG_BLOCK_4048: Field = Field::new("sig_block_4048", 0x1f0, 1);
    /// umr_indirect_mkey_disabled.
    pub const UMR_INDIRECT_MKEY_DISABLED: Field = Field::new("umr_indirect_mkey_disabled", 0x209, 1);
    /// drain_sigerr.
    pub const DRAIN_SIGERR: Field = Field::new("drain_sigerr", 0x20f, 1);
    /// sigerr_cqe.
    pub const SIGERR_CQE: Field = Field::new("sigerr_cqe", 0x212, 1);
    /// sho (signature handover).
    pub const SHO: Field = Field::new("sho", 0x217, 1);
    /// aes_xts_single_block_le_tweak.
    pub const AES_XTS_SINGLE_BLOCK_LE_TWEAK: Field = Field::new("aes_xts_single_block_le_tweak", 0x3f1, 1);
    /// aes_xts_multi_block_be_tweak.
    pub const AES_XTS_MULTI_BLOCK_BE_TWEAK: Field = Field::new("aes_xts_multi_block_be_tweak", 0x3f2, 1);
    /// general_obj_types (bit n = object type n).
    pub const GENERAL_OBJ_TYPES: Field = Field::new("general_obj_types", 0x400, 64);
    /// aes_xts_multi_block_le_tweak.
    pub const AES_XTS_MULTI_BLOCK_LE_TWEAK: Field = Field::new("aes_xts_multi_block_le_tweak", 0x468, 1);
    /// crypto.
    pub const CRYPTO: Field = Field::new("crypto", 0x469, 1);
    /// sigerr_domain_and_sig_type.
    pub const SIGERR_DOMAIN_AND_SIG_TYPE: Field = Field::new("sigerr_domain_and_sig_type", 0x480, 1);

    /// Every field of this table.
    pub const ALL: &[Field] = &[
        LOG_MAX_MKEY,
        LOG_MAX_KLM_LIST_SIZE,
        SIG_CRC64_XP10,
        SIG_CRC32C,
        SIG_BLOCK_4048,
        UMR_INDIRECT_MKEY_DISABLED,
        DRAIN_SIGERR,
        SIGERR_CQE,
        SHO,
        AES_XTS_SINGLE_BLOCK_LE_TWEAK,
        AES_XTS_MULTI_BLOCK_BE_TWEAK,
        GENERAL_OBJ_TYPES,
        AES_XTS_MULTI_BLOCK_LE_TWEAK,
        CRYPTO,
        SIGERR_DOMAIN_AND_SIG_TYPE,
    ];
}

/// General object type numbers (bit positions in `general_obj_types`).
pub mod obj_type {
    /// DEK (data encryption key).
    pub const DEK: u16 = 0x000c;
    /// CRYPTO_LOGIN.
    pub const CRYPTO_LOGIN: u16 = 0x001f;
}

/// `crypto_caps`: the crypto capability page.
pub mod crypto_caps {
    use super::Field;
    /// wrapped_crypto_operational.
    pub const WRAPPED_CRYPTO_OPERATIONAL: Field = Field::new("wrapped_crypto_operational", 0x00, 1);
    /// wrapped_crypto_going_to_commissioning.
    pub const WRAPPED_CRYPTO_GOING_TO_COMMISSIONING: Field =
        Field::new("wrapped_crypto_going_to_commissioning", 0x01, 1);
    /// wrapped_import_method.
    pub const WRAPPED_IMPORT_METHOD: Field = Field::new("wrapped_import_method", 0x18, 8);
    /// log_max_num_deks.
    pub const LOG_MAX_NUM_DEKS: Field = Field::new("log_max_num_deks", 0x2b, 5);
    /// failed_selftests.
    pub const FAILED_SELFTESTS: Field = Field::new("failed_selftests", 0x40, 16);
    /// The `wrapped_import_method` bit that means AES-XTS key wrap.
    pub const WRAPPED_IMPORT_METHOD_AES: u64 = 0x4;

    /// Every field of this table.
    pub const ALL: &[Field] = &[
        WRAPPED_CRYPTO_OPERATIONAL,
        WRAPPED_CRYPTO_GOING_TO_COMMISSIONING,
        WRAPPED_IMPORT_METHOD,
        LOG_MAX_NUM_DEKS,
        FAILED_SELFTESTS,
    ];
}

/// `mkc`: the memory key context (64 bytes).
pub mod mkc {
    use super::Field;
    /// free: the mkey is invalid until a UMR makes it valid.
    pub const FREE: Field = Field::new("free", 0x01, 1);
    /// access_mode_4_2.
    pub const ACCESS_MODE_4_2: Field = Field::new("access_mode_4_2", 0x03, 3);
    /// umr_en.
    pub const UMR_EN: Field = Field::new("umr_en", 0x10, 1);
    /// a (remote atomic).
    pub const A: Field = Field::new("a", 0x11, 1);
    /// rw (remote write).
    pub const RW: Field = Field::new("rw", 0x12, 1);
    /// rr (remote read).
    pub const RR: Field = Field::new("rr", 0x13, 1);
    /// lw (local write).
    pub const LW: Field = Field::new("lw", 0x14, 1);
    /// lr (local read).
    pub const LR: Field = Field::new("lr", 0x15, 1);
    /// access_mode_1_0.
    pub const ACCESS_MODE_1_0: Field = Field::new("access_mode_1_0", 0x16, 2);
    /// qpn.
    pub const QPN: Field = Field::new("qpn", 0x20, 24);
    /// mkey_7_0: the tag byte of the key.
    pub const MKEY_7_0: Field = Field::new("mkey_7_0", 0x38, 8);
    /// length64.
    pub const LENGTH64: Field = Field::new("length64", 0x60, 1);
    /// bsf_en.
    pub const BSF_EN: Field = Field::new("bsf_en", 0x61, 1);
    /// sync_umr.
    pub const SYNC_UMR: Field = Field::new("sync_umr", 0x62, 1);
    /// expected_sigerr_count.
    pub const EXPECTED_SIGERR_COUNT: Field = Field::new("expected_sigerr_count", 0x65, 1);
    /// en_rinval: the mkey may be invalidated remotely.
    pub const EN_RINVAL: Field = Field::new("en_rinval", 0x67, 1);
    /// pd.
    pub const PD: Field = Field::new("pd", 0x68, 24);
    /// start_addr.
    pub const START_ADDR: Field = Field::new("start_addr", 0x80, 64);
    /// len.
    pub const LEN: Field = Field::new("len", 0xc0, 64);
    /// bsf_octword_size.
    pub const BSF_OCTWORD_SIZE: Field = Field::new("bsf_octword_size", 0x100, 32);
    /// translations_octword_size.
    pub const TRANSLATIONS_OCTWORD_SIZE: Field = Field::new("translations_octword_size", 0x1a0, 32);
    /// log_page_size.
    pub const LOG_PAGE_SIZE: Field = Field::new("log_page_size", 0x1db, 5);
    /// crypto_en.
    pub const CRYPTO_EN: Field = Field::new("crypto_en", 0x1e3, 2);
    /// Size in bytes.
    pub const SIZE: usize = 64;
    /// `access_mode` value for MTT translation (registered regions).
    pub const ACCESS_MODE_MTT: u64 = 1;
    /// `access_mode` value for KLM translation.
    pub const ACCESS_MODE_KLMS: u64 = 2;

    /// Every field of this table.
    pub const ALL: &[Field] = &[
        FREE,
        ACCESS_MODE_4_2,
        UMR_EN,
        A,
        RW,
        RR,
        LW,
        LR,
        ACCESS_MODE_1_0,
        QPN,
        MKEY_7_0,
        LENGTH64,
        BSF_EN,
        SYNC_UMR,
        EXPECTED_SIGERR_COUNT,
        EN_RINVAL,
        PD,
        START_ADDR,
        LEN,
        BSF_OCTWORD_SIZE,
        TRANSLATIONS_OCTWORD_SIZE,
        LOG_PAGE_SIZE,
        CRYPTO_EN,
    ];
}

/// `create_mkey_in` / `create_mkey_out`.
pub mod create_mkey {
    use super::Field;
    /// Bit offset of the `mkc` inside `create_mkey_in`.
    pub const MKC_BIT: u32 = 0x80;
    /// pg_access.
    pub const PG_ACCESS: Field = Field::new("pg_access", 0x60, 1);
    /// mkey_umem_valid.
    pub const MKEY_UMEM_VALID: Field = Field::new("mkey_umem_valid", 0x61, 1);
    /// translations_octword_actual_size.
    pub const TRANSLATIONS_OCTWORD_ACTUAL_SIZE: Field = Field::new("translations_octword_actual_size", 0x300, 32);
    /// Input size in bytes, without translation entries.
    pub const IN_SIZE: usize = 272;
    /// `create_mkey_out.mkey_index`.
    pub const OUT_MKEY_INDEX: Field = Field::new("mkey_index", 0x48, 24);
    /// Output size in bytes.
    pub const OUT_SIZE: usize = 16;
}

/// `destroy_mkey_in` (the output is a bare `mbox_out`).
pub mod destroy_mkey {
    use super::Field;
    /// mkey_index.
    pub const MKEY_INDEX: Field = Field::new("mkey_index", 0x48, 24);
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
}

/// `create_psv_in` / `create_psv_out`.
pub mod create_psv {
    use super::Field;
    /// num_psv.
    pub const NUM_PSV: Field = Field::new("num_psv", 0x40, 4);
    /// pd.
    pub const PD: Field = Field::new("pd", 0x48, 24);
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
    /// `create_psv_out.psv0_index`..`psv3_index`.
    pub const OUT_PSV_INDEX: [Field; 4] = [
        Field::new("psv0_index", 0x88, 24),
        Field::new("psv1_index", 0xa8, 24),
        Field::new("psv2_index", 0xc8, 24),
        Field::new("psv3_index", 0xe8, 24),
    ];
    /// Output size in bytes.
    pub const OUT_SIZE: usize = 32;
}

/// `destroy_psv_in` (the output is a bare `mbox_out`).
pub mod destroy_psv {
    use super::Field;
    /// psvn.
    pub const PSVN: Field = Field::new("psvn", 0x48, 24);
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
}

/// `alloc_pd_out` and `dealloc_pd_in` (the other halves are bare headers).
pub mod pd {
    use super::Field;
    /// `alloc_pd_out.pd` and `dealloc_pd_in.pd`.
    pub const PD: Field = Field::new("pd", 0x48, 24);
    /// Size of each mailbox in bytes.
    pub const SIZE: usize = 16;
}

/// Build an input mailbox of `len` bytes with `opcode`, `uid` and `op_mod` set.
pub fn new_input(len: usize, opcode: u16, uid: u16, op_mod: u16) -> Vec<u8> {
    let mut buf = vec![0u8; len.max(mbox_in::SIZE)];
    write_header(&mut buf, opcode, uid, op_mod);
    buf
}

/// Write the `mbox_in` header into `buf` (at least 16 bytes).
pub fn write_header(buf: &mut [u8], opcode: u16, uid: u16, op_mod: u16) {
    if buf.len() >= mbox_in::SIZE {
        buf[0..2].copy_from_slice(&opcode.to_be_bytes());
        buf[2..4].copy_from_slice(&uid.to_be_bytes());
        buf[6..8].copy_from_slice(&op_mod.to_be_bytes());
    }
}

/// Read `(status, syndrome)` from an output mailbox; a mailbox shorter than the header reads
/// as BAD_OUTP_LEN_ERR.
pub fn read_status(out: &[u8]) -> (u8, u32) {
    if out.len() < mbox_out::SIZE {
        return (status::BAD_OUTP_LEN_ERR, 0);
    }
    (out[0], u32::from_be_bytes([out[4], out[5], out[6], out[7]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// (field, byte offset of its dword, high bit, low bit), as appendix A of
    /// `docs/behaviour.md` lists them ("dwN[h:l]" at byte 4N). Transcribed from the document,
    /// not computed from the table.
    #[rstest]
    #[case(mkc::FREE, 0x00, 30, 30)]
    #[case(mkc::ACCESS_MODE_4_2, 0x00, 28, 26)]
    #[case(mkc::UMR_EN, 0x00, 15, 15)]
    #[case(mkc::A, 0x00, 14, 14)]
    #[case(mkc::LR, 0x00, 10, 10)]
    #[case(mkc::ACCESS_MODE_1_0, 0x00, 9, 8)]
    #[case(mkc::QPN, 0x04, 31, 8)]
    #[case(mkc::MKEY_7_0, 0x04, 7, 0)]
    #[case(mkc::LENGTH64, 0x0c, 31, 31)]
    #[case(mkc::BSF_EN, 0x0c, 30, 30)]
    #[case(mkc::SYNC_UMR, 0x0c, 29, 29)]
    #[case(mkc::EXPECTED_SIGERR_COUNT, 0x0c, 26, 26)]
    #[case(mkc::EN_RINVAL, 0x0c, 24, 24)]
    #[case(mkc::PD, 0x0c, 23, 0)]
    #[case(mkc::BSF_OCTWORD_SIZE, 0x20, 31, 0)]
    #[case(mkc::TRANSLATIONS_OCTWORD_SIZE, 0x34, 31, 0)]
    #[case(mkc::LOG_PAGE_SIZE, 0x38, 4, 0)]
    #[case(mkc::CRYPTO_EN, 0x3c, 28, 27)]
    #[case(mkc::BSF_EN.at(create_mkey::MKC_BIT), 0x1c, 30, 30)]
    #[case(mkc::MKEY_7_0.at(create_mkey::MKC_BIT), 0x14, 7, 0)]
    #[case(mkc::CRYPTO_EN.at(create_mkey::MKC_BIT), 0x4c, 28, 27)]
    #[case(mkc::TRANSLATIONS_OCTWORD_SIZE.at(create_mkey::MKC_BIT), 0x44, 31, 0)]
    #[case(create_mkey::TRANSLATIONS_OCTWORD_ACTUAL_SIZE, 0x60, 31, 0)]
    #[case(create_mkey::OUT_MKEY_INDEX, 0x08, 23, 0)]
    #[case(create_psv::NUM_PSV, 0x08, 31, 28)]
    #[case(create_psv::PD, 0x08, 23, 0)]
    #[case(create_psv::OUT_PSV_INDEX[0], 0x10, 23, 0)]
    #[case(create_psv::OUT_PSV_INDEX[3], 0x1c, 23, 0)]
    #[case(cmd_hca_cap::SHO, 0x40, 8, 8)]
    #[case(cmd_hca_cap::SIGERR_DOMAIN_AND_SIG_TYPE, 0x90, 31, 31)]
    #[case(cmd_hca_cap::SIG_BLOCK_4048, 0x3c, 15, 15)]
    #[case(cmd_hca_cap::SIG_CRC32C, 0x28, 23, 23)]
    #[case(cmd_hca_cap::SIG_CRC64_XP10, 0x28, 24, 24)]
    #[case(cmd_hca_cap::SIGERR_CQE, 0x40, 13, 13)]
    #[case(cmd_hca_cap::DRAIN_SIGERR, 0x40, 16, 16)]
    #[case(cmd_hca_cap::UMR_INDIRECT_MKEY_DISABLED, 0x40, 22, 22)]
    #[case(cmd_hca_cap::LOG_MAX_KLM_LIST_SIZE, 0x20, 5, 0)]
    #[case(cmd_hca_cap::CRYPTO, 0x8c, 22, 22)]
    #[case(cmd_hca_cap::AES_XTS_SINGLE_BLOCK_LE_TWEAK, 0x7c, 14, 14)]
    #[case(cmd_hca_cap::AES_XTS_MULTI_BLOCK_BE_TWEAK, 0x7c, 13, 13)]
    #[case(cmd_hca_cap::AES_XTS_MULTI_BLOCK_LE_TWEAK, 0x8c, 23, 23)]
    #[case(crypto_caps::WRAPPED_CRYPTO_OPERATIONAL, 0x00, 31, 31)]
    #[case(crypto_caps::WRAPPED_CRYPTO_GOING_TO_COMMISSIONING, 0x00, 30, 30)]
    #[case(crypto_caps::WRAPPED_IMPORT_METHOD, 0x00, 7, 0)]
    #[case(crypto_caps::LOG_MAX_NUM_DEKS, 0x04, 20, 16)]
    #[case(crypto_caps::FAILED_SELFTESTS, 0x08, 31, 16)]
    fn field_sits_where_device_facts_says(#[case] f: Field, #[case] byte: usize, #[case] hi: u32, #[case] lo: u32) {
        assert_eq!(f.dword_byte(), byte, "{} dword", f.name);
        assert_eq!(f.low_bit(), lo, "{} low bit", f.name);
        assert_eq!(f.low_bit() + f.width - 1, hi, "{} high bit", f.name);
    }

    #[rstest]
    #[case(mkc::START_ADDR, 0x10)]
    #[case(mkc::LEN, 0x18)]
    #[case(cmd_hca_cap::GENERAL_OBJ_TYPES, 0x80)]
    fn wide_fields_sit_at_their_byte(#[case] f: Field, #[case] byte: usize) {
        assert_eq!(f.width, 64);
        assert_eq!(f.dword_byte(), byte);
    }

    #[test]
    fn set_then_get_touches_only_the_field() -> Result<(), FieldError> {
        let mut buf = [0xffu8; 64];
        mkc::PD.set(&mut buf, 0x123456)?;
        assert_eq!(mkc::PD.get(&buf)?, 0x123456);
        assert_eq!(mkc::EN_RINVAL.get(&buf)?, 1, "neighbour bit kept");
        assert_eq!(&buf[12..16], &[0xff, 0x12, 0x34, 0x56]);
        mkc::LEN.set(&mut buf, 0x0102_0304_0506_0708)?;
        assert_eq!(&buf[0x18..0x20], &[1, 2, 3, 4, 5, 6, 7, 8]);
        Ok(())
    }

    #[test]
    fn short_buffers_and_wide_values_are_errors() {
        let buf = [0u8; 8];
        assert!(matches!(mkc::PD.get(&buf), Err(FieldError::OutOfBounds { .. })));
        let mut big = [0u8; 64];
        assert!(matches!(mkc::MKEY_7_0.set(&mut big, 0x100), Err(FieldError::TooWide { .. })));
    }

    #[test]
    fn status_table_matches_the_provider() {
        use crate::errno::*;
        let table = [
            (0x00, 0),
            (0x01, EIO),
            (0x02, EINVAL),
            (0x03, EINVAL),
            (0x04, EIO),
            (0x05, EINVAL),
            (0x06, EBUSY),
            (0x07, EIO),
            (0x08, ENOMEM),
            (0x09, EINVAL),
            (0x0a, EINVAL),
            (0x0f, EAGAIN),
            (0x10, EINVAL),
            (0x30, EINVAL),
            (0x40, EINVAL),
            (0x50, EIO),
            (0x51, EIO),
            (0x77, EIO),
        ];
        for (s, e) in table {
            assert_eq!(status::to_errno(s), e, "status 0x{s:02x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_field_round_trips(idx in 0usize..mkc::ALL.len(), v in proptest::num::u64::ANY) {
            let f = mkc::ALL[idx];
            let v = if f.width == 64 { v } else { v & ((1 << f.width) - 1) };
            let mut buf = [0u8; mkc::SIZE];
            let fail = |e: FieldError| proptest::test_runner::TestCaseError::fail(e.to_string());
            f.set(&mut buf, v).map_err(fail)?;
            proptest::prop_assert_eq!(f.get(&buf).map_err(fail)?, v);
            let ones = buf.iter().map(|b| b.count_ones()).sum::<u32>();
            proptest::prop_assert_eq!(ones, v.count_ones());
        }
    }
}
