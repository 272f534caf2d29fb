//! `mkc`: the memory key context (64 bytes), as CREATE_MKEY carries it and as the UMR WQE's
//! mkey context segment carries it (the two share one layout).

use super::view::layout;

/// Size in bytes.
pub const SIZE: usize = 64;
/// `access_mode` value for MTT translation (registered regions).
pub const ACCESS_MODE_MTT: u64 = 1;
/// `access_mode` value for KLM translation.
pub const ACCESS_MODE_KLMS: u64 = 2;

layout! {
    /// The memory key context, one member per field.
    struct Mkc = "mkc", SIZE;
    /// free: the mkey is invalid until a UMR makes it valid.
    FREE => free / set_free: bool = (0x01, 1);
    /// access_mode_4_2.
    ACCESS_MODE_4_2 => access_mode_4_2 / set_access_mode_4_2: u8 = (0x03, 3);
    /// umr_en.
    UMR_EN => umr_en / set_umr_en: bool = (0x10, 1);
    /// a (remote atomic).
    A => a / set_a: bool = (0x11, 1);
    /// rw (remote write).
    RW => rw / set_rw: bool = (0x12, 1);
    /// rr (remote read).
    RR => rr / set_rr: bool = (0x13, 1);
    /// lw (local write).
    LW => lw / set_lw: bool = (0x14, 1);
    /// lr (local read).
    LR => lr / set_lr: bool = (0x15, 1);
    /// access_mode_1_0.
    ACCESS_MODE_1_0 => access_mode_1_0 / set_access_mode_1_0: u8 = (0x16, 2);
    /// qpn.
    QPN => qpn / set_qpn: u32 = (0x20, 24);
    /// mkey_7_0: the tag byte of the key.
    MKEY_7_0 => mkey_7_0 / set_mkey_7_0: u8 = (0x38, 8);
    /// length64.
    LENGTH64 => length64 / set_length64: bool = (0x60, 1);
    /// bsf_en.
    BSF_EN => bsf_en / set_bsf_en: bool = (0x61, 1);
    /// sync_umr.
    SYNC_UMR => sync_umr / set_sync_umr: bool = (0x62, 1);
    /// expected_sigerr_count.
    EXPECTED_SIGERR_COUNT => expected_sigerr_count / set_expected_sigerr_count: bool = (0x65, 1);
    /// en_rinval: the mkey may be invalidated remotely.
    EN_RINVAL => en_rinval / set_en_rinval: bool = (0x67, 1);
    /// pd.
    PD => pd / set_pd: u32 = (0x68, 24);
    /// start_addr.
    START_ADDR => start_addr / set_start_addr: u64 = (0x80, 64);
    /// len.
    LEN => len / set_len: u64 = (0xc0, 64);
    /// bsf_octword_size.
    BSF_OCTWORD_SIZE => bsf_octword_size / set_bsf_octword_size: u32 = (0x100, 32);
    /// translations_octword_size.
    TRANSLATIONS_OCTWORD_SIZE => translations_octword_size / set_translations_octword_size: u32 = (0x1a0, 32);
    /// log_page_size.
    LOG_PAGE_SIZE => log_page_size / set_log_page_size: u8 = (0x1db, 5);
    /// crypto_en.
    CRYPTO_EN => crypto_en / set_crypto_en: u8 = (0x1e3, 2);
}

impl Mkc {
    /// The whole access mode: `access_mode_4_2 << 2 | access_mode_1_0`.
    pub fn access_mode(&self) -> u8 {
        self.access_mode_4_2 << 2 | self.access_mode_1_0
    }

    /// The key the mkey answers to for index `index`: `index << 8 | mkey_7_0` (the index is 24 bits).
    pub fn key(&self, index: u32) -> u32 {
        (index & 0xff_ffff) << 8 | u32::from(self.mkey_7_0)
    }
}
