//! `mkc`: the memory key context (64 bytes).

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
