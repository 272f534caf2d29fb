//! Field positions of the command tables, and the views over them.

use super::*;
use rstest::rstest;

/// (field, byte offset of its dword, high bit, low bit), as the PRM lists them ("dwN[h:l]" at
/// byte 4N). Transcribed from the PRM structure definitions, not computed from the table.
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
