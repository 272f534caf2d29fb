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
fn field_sits_where_the_prm_says(#[case] f: Field, #[case] byte: usize, #[case] hi: u32, #[case] lo: u32) {
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

use super::test_util::{Case, check_cases, check_round_trip, check_short};
use cmd_hca_cap::CmdHcaCap;
use crypto_caps::CryptoCaps;
use general_obj_in::GeneralObjIn;
use general_obj_out::GeneralObjOut;
use mbox_in::MboxIn;
use mbox_out::MboxOut;
use mkc::Mkc;

#[test]
fn command_headers_sit_at_their_bytes() {
    let cases: &[Case] = &[
        (mbox_in::OPCODE, 0x1234, &[(0, 0x12), (1, 0x34)]),
        (mbox_in::UID, 0xabcd, &[(2, 0xab), (3, 0xcd)]),
        (mbox_in::OP_MOD, 0x0102, &[(6, 0x01), (7, 0x02)]),
    ];
    check_cases(16, mbox_in::ALL, cases);
    let cases: &[Case] = &[
        (mbox_out::STATUS, 0x51, &[(0, 0x51)]),
        (mbox_out::SYNDROME, 0x1122_3344, &[(4, 0x11), (5, 0x22), (6, 0x33), (7, 0x44)]),
    ];
    check_cases(16, mbox_out::ALL, cases);
    let cases: &[Case] = &[
        (general_obj_in::OPCODE, 0x0a00, &[(0, 0x0a)]),
        (general_obj_in::UID, 0xabcd, &[(2, 0xab), (3, 0xcd)]),
        (general_obj_in::OBJ_TYPE, 0x001f, &[(7, 0x1f)]),
        (general_obj_in::OBJ_ID, 0x1122_3344, &[(8, 0x11), (9, 0x22), (10, 0x33), (11, 0x44)]),
        (general_obj_in::LOG_OBJ_RANGE, 0x1f, &[(12, 0x1f)]),
    ];
    check_cases(16, general_obj_in::ALL, cases);
    let cases: &[Case] = &[
        (general_obj_out::STATUS, 0x03, &[(0, 0x03)]),
        (general_obj_out::SYNDROME, 0x1122_3344, &[(4, 0x11), (5, 0x22), (6, 0x33), (7, 0x44)]),
        (general_obj_out::OBJ_ID, 0x00ab_cdef, &[(9, 0xab), (10, 0xcd), (11, 0xef)]),
    ];
    check_cases(16, general_obj_out::ALL, cases);
}

#[test]
fn mkc_fields_sit_at_their_bytes() {
    let cases: &[Case] = &[
        (mkc::FREE, 1, &[(0, 0x40)]),
        (mkc::ACCESS_MODE_4_2, 7, &[(0, 0x1c)]),
        (mkc::UMR_EN, 1, &[(2, 0x80)]),
        (mkc::A, 1, &[(2, 0x40)]),
        (mkc::RW, 1, &[(2, 0x20)]),
        (mkc::RR, 1, &[(2, 0x10)]),
        (mkc::LW, 1, &[(2, 0x08)]),
        (mkc::LR, 1, &[(2, 0x04)]),
        (mkc::ACCESS_MODE_1_0, 2, &[(2, 0x02)]),
        (mkc::QPN, 0xff_ffff, &[(4, 0xff), (5, 0xff), (6, 0xff)]),
        (mkc::MKEY_7_0, 0x42, &[(7, 0x42)]),
        (mkc::LENGTH64, 1, &[(12, 0x80)]),
        (mkc::BSF_EN, 1, &[(12, 0x40)]),
        (mkc::SYNC_UMR, 1, &[(12, 0x20)]),
        (mkc::EXPECTED_SIGERR_COUNT, 1, &[(12, 0x04)]),
        (mkc::EN_RINVAL, 1, &[(12, 0x01)]),
        (mkc::PD, 0x12_3456, &[(13, 0x12), (14, 0x34), (15, 0x56)]),
        (
            mkc::START_ADDR,
            0x0102_0304_0506_0708,
            &[(16, 1), (17, 2), (18, 3), (19, 4), (20, 5), (21, 6), (22, 7), (23, 8)],
        ),
        (mkc::LEN, 0x1100_0000_0000_0022, &[(24, 0x11), (31, 0x22)]),
        (mkc::BSF_OCTWORD_SIZE, 4, &[(35, 4)]),
        (mkc::TRANSLATIONS_OCTWORD_SIZE, 0x0100_0008, &[(52, 1), (55, 8)]),
        (mkc::LOG_PAGE_SIZE, 0x1f, &[(59, 0x1f)]),
        (mkc::CRYPTO_EN, 1, &[(60, 0x08)]),
    ];
    check_cases(mkc::SIZE, mkc::ALL, cases);
}

#[test]
fn caps_fields_sit_at_their_bytes() {
    let cases: &[Case] = &[
        (cmd_hca_cap::HCA_CAP_2, 1, &[(0x04, 0x80)]),
        (cmd_hca_cap::LOG_MAX_MKEY, 0x3f, &[(0x1d, 0x3f)]),
        (cmd_hca_cap::LOG_MAX_KLM_LIST_SIZE, 0x3f, &[(0x23, 0x3f)]),
        (cmd_hca_cap::SIG_CRC64_XP10, 1, &[(0x28, 0x01)]),
        (cmd_hca_cap::SIG_CRC32C, 1, &[(0x29, 0x80)]),
        (cmd_hca_cap::RTS2RTS_QP_UDP_SPORT, 1, &[(0x2a, 0x40)]),
        (cmd_hca_cap::QPC_EXTENSION, 1, &[(0x24, 0x20)]),
        (cmd_hca_cap::SIG_BLOCK_4048, 1, &[(0x3e, 0x80)]),
        (cmd_hca_cap::UMR_INDIRECT_MKEY_DISABLED, 1, &[(0x41, 0x40)]),
        (cmd_hca_cap::DRAIN_SIGERR, 1, &[(0x41, 0x01)]),
        (cmd_hca_cap::SIGERR_CQE, 1, &[(0x42, 0x20)]),
        (cmd_hca_cap::SHO, 1, &[(0x42, 0x01)]),
        // rdma-core's mlx5_ifc.h: cq_oi at 0x220, then cq_resize.
        (cmd_hca_cap::CQ_OI, 1, &[(0x44, 0x80)]),
        (cmd_hca_cap::IMAICL, 1, &[(0x46, 0x40)]),
        (cmd_hca_cap::AES_XTS_SINGLE_BLOCK_LE_TWEAK, 1, &[(0x7e, 0x40)]),
        (cmd_hca_cap::AES_XTS_MULTI_BLOCK_BE_TWEAK, 1, &[(0x7e, 0x20)]),
        (cmd_hca_cap::GENERAL_OBJ_TYPES, 1 << 0x1f | 1 << 0xc, &[(0x84, 0x80), (0x86, 0x10)]),
        (cmd_hca_cap::AES_XTS_MULTI_BLOCK_LE_TWEAK, 1, &[(0x8d, 0x80)]),
        (cmd_hca_cap::CRYPTO, 1, &[(0x8d, 0x40)]),
        (cmd_hca_cap::SIGERR_DOMAIN_AND_SIG_TYPE, 1, &[(0x90, 0x80)]),
        // UCX's ib_mlx5_ifc.h: reserved_at_580[0xb], log_max_dci_stream_channels[0x5],
        // reserved_at_590[0x3], log_max_dci_errored_streams[0x5].
        (cmd_hca_cap::LOG_MAX_DCI_STREAM_CHANNELS, 0x1f, &[(0xb1, 0x1f)]),
        (cmd_hca_cap::LOG_MAX_DCI_ERRORED_STREAMS, 0x1f, &[(0xb2, 0x1f)]),
        // rdma-core's mlx5_ifc.h: reserved_at_5a0[0x1c], then four one-bit CQ fields.
        (cmd_hca_cap::MINI_CQE_RESP_STRIDE_INDEX, 1, &[(0xb7, 0x08)]),
        (cmd_hca_cap::CQE_128_ALWAYS, 1, &[(0xb7, 0x04)]),
        (cmd_hca_cap::CQE_COMPRESSION_128B, 1, &[(0xb7, 0x02)]),
        (cmd_hca_cap::CQE_COMPRESSION, 1, &[(0xb7, 0x01)]),
        (cmd_hca_cap::CQE_COMPRESSION_TIMEOUT, 0xabcd, &[(0xb8, 0xab), (0xb9, 0xcd)]),
        (cmd_hca_cap::CQE_COMPRESSION_MAX_NUM, 0x1234, &[(0xba, 0x12), (0xbb, 0x34)]),
    ];
    check_cases(query_hca_cap::CAPABILITY_SIZE, cmd_hca_cap::ALL, cases);
    let cases: &[Case] = &[(cmd_hca_cap_2::LOG_RESERVED_QPN_GRANULARITY, 0x1f, &[(0x12, 0x1f)])];
    check_cases(query_hca_cap::CAPABILITY_SIZE, cmd_hca_cap_2::ALL, cases);
    let cases: &[Case] = &[
        (crypto_caps::WRAPPED_CRYPTO_OPERATIONAL, 1, &[(0, 0x80)]),
        (crypto_caps::WRAPPED_CRYPTO_GOING_TO_COMMISSIONING, 1, &[(0, 0x40)]),
        (crypto_caps::WRAPPED_IMPORT_METHOD, 0x04, &[(3, 0x04)]),
        (crypto_caps::LOG_MAX_NUM_DEKS, 0x1f, &[(5, 0x1f)]),
        (crypto_caps::FAILED_SELFTESTS, 0xabcd, &[(8, 0xab), (9, 0xcd)]),
    ];
    check_cases(query_hca_cap::CAPABILITY_SIZE, crypto_caps::ALL, cases);
}

#[test]
fn layout_sizes() {
    assert_eq!(<MboxIn as Layout>::SIZE, 16);
    assert_eq!(<MboxOut as Layout>::SIZE, 16);
    assert_eq!(<GeneralObjIn as Layout>::SIZE, 16);
    assert_eq!(<GeneralObjOut as Layout>::SIZE, 16);
    assert_eq!(<Mkc as Layout>::SIZE, 64);
    assert_eq!(<CmdHcaCap as Layout>::SIZE, 4096);
    assert_eq!(<CryptoCaps as Layout>::SIZE, 4096);
}

#[test]
fn every_handwritten_table_is_readable_and_in_bounds() {
    let tables: &[(&[Field], usize)] = &[
        (&[create_mkey::PG_ACCESS, create_mkey::MKEY_UMEM_VALID, create_mkey::TRANSLATIONS_OCTWORD_ACTUAL_SIZE], 272),
        (&[create_mkey::OUT_MKEY_INDEX], create_mkey::OUT_SIZE),
        (&[mkc::PD.at(create_mkey::MKC_BIT), mkc::CRYPTO_EN.at(create_mkey::MKC_BIT)], create_mkey::IN_SIZE),
        (&[destroy_mkey::MKEY_INDEX], destroy_mkey::IN_SIZE),
        (&[create_psv::NUM_PSV, create_psv::PD], create_psv::IN_SIZE),
        (&create_psv::OUT_PSV_INDEX, create_psv::OUT_SIZE),
        (&[destroy_psv::PSVN], destroy_psv::IN_SIZE),
        (&[pd::PD], pd::SIZE),
    ];
    for (fields, size) in tables {
        for f in *fields {
            assert!(f.fits(*size), "{} in {size} bytes", f.name);
        }
    }
}

#[test]
fn views_check_the_length_once_then_read() -> Result<(), FieldError> {
    let mut buf = [0u8; 20];
    let mut w = ViewMut::<MboxIn>::new(&mut buf)?;
    w.set_opcode(opcode::CREATE_MKEY)?;
    w.set_uid(7)?;
    w.set_op_mod(1)?;
    let v = w.view();
    assert_eq!((v.opcode(), v.uid(), v.op_mod()), (0x200, 7, 1));
    assert_eq!(&buf[..8], &[0x02, 0x00, 0x00, 0x07, 0, 0, 0x00, 0x01]);
    let v = View::<MboxIn>::new(&buf)?;
    assert_eq!(v.bytes().len(), 16);
    assert_eq!(v.tail().len(), 4, "the command's own bytes stay reachable");
    assert_eq!(v.decode(), vec![("opcode", 0x200), ("uid", 7), ("op_mod", 1)]);
    assert_eq!(v.to_string(), "mbox_in { opcode: 0x200, uid: 0x7, op_mod: 0x1 }");
    let short = View::<MboxIn>::new(&buf[..15]);
    assert!(matches!(short, Err(FieldError::TooShort { layout: "mbox_in", need: 16, len: 15 })));
    assert!(ViewMut::<MboxOut>::new(&mut buf[..3]).is_err());
    Ok(())
}

#[test]
fn setters_refuse_values_wider_than_the_field() -> Result<(), FieldError> {
    let mut buf = [0u8; 64];
    let mut w = ViewMut::<Mkc>::new(&mut buf)?;
    assert!(matches!(w.set_pd(1 << 24), Err(FieldError::TooWide { field: "pd", .. })));
    assert!(matches!(w.set_access_mode_1_0(4), Err(FieldError::TooWide { .. })));
    assert_eq!(buf, [0u8; 64], "a refused write changes nothing");
    let m = Mkc { qpn: 1 << 24, ..Mkc::default() };
    let mut out = [0x5au8; 64];
    assert!(matches!(m.encode(&mut out), Err(FieldError::TooWide { field: "qpn", .. })));
    assert_eq!(out, [0x5au8; 64]);
    Ok(())
}

#[test]
fn mkc_view_reads_the_mkey_the_provider_builds() -> Result<(), FieldError> {
    let m = Mkc {
        free: true,
        umr_en: true,
        lr: true,
        access_mode_1_0: mkc::ACCESS_MODE_KLMS as u8,
        qpn: 0xff_ffff,
        pd: 5,
        bsf_en: true,
        bsf_octword_size: 4,
        translations_octword_size: 8,
        ..Mkc::default()
    };
    let mut input = [0u8; create_mkey::IN_SIZE];
    let at = create_mkey::MKC_BIT as usize / 8;
    m.encode(&mut input[at..])?;
    assert_eq!(mkc::BSF_EN.at(create_mkey::MKC_BIT).get(&input)?, 1);
    let v = View::<Mkc>::new(&input[at..])?;
    assert_eq!((v.pd(), v.access_mode_1_0(), v.translations_octword_size()), (5, 2, 8));
    assert_eq!(Mkc::decode(&input[at..])?, m);
    assert_eq!(m.access_mode(), 2);
    assert_eq!(Mkc { mkey_7_0: 0x42, ..m }.key(0x123), 0x12342);
    Ok(())
}

#[test]
fn short_buffers_are_refused() {
    check_short::<MboxIn>();
    check_short::<MboxOut>();
    check_short::<GeneralObjIn>();
    check_short::<GeneralObjOut>();
    check_short::<Mkc>();
    check_short::<CryptoCaps>();
}

#[test]
fn malformed_fields_are_errors_not_panics() {
    let buf = [0u8; 16];
    for f in [Field::new("x", 0, 0), Field::new("x", 4, 40), Field::new("x", 8, 64), Field::new("x", 30, 4)] {
        assert!(!f.is_well_formed());
        assert_eq!(f.get(&buf), Err(FieldError::Malformed { field: "x" }));
        assert_eq!(f.set(&mut [0u8; 16], 0), Err(FieldError::Malformed { field: "x" }));
    }
    let far = mkc::PD.at(0xffff_ff00);
    assert!(matches!(far.get(&buf), Err(FieldError::OutOfBounds { .. })));
    assert!(mkc::PD.at(u32::MAX).at(u32::MAX).get(&buf).is_err(), "a saturated offset is an error");
}

proptest::proptest! {
    #[test]
    fn command_layouts_round_trip(bytes in proptest::collection::vec(proptest::num::u8::ANY, 64)) {
        check_round_trip::<MboxIn>(&bytes, mbox_in::ALL);
        check_round_trip::<MboxOut>(&bytes, mbox_out::ALL);
        check_round_trip::<GeneralObjIn>(&bytes, general_obj_in::ALL);
        check_round_trip::<GeneralObjOut>(&bytes, general_obj_out::ALL);
        check_round_trip::<Mkc>(&bytes, mkc::ALL);
    }

    #[test]
    fn caps_pages_round_trip(head in proptest::collection::vec(proptest::num::u8::ANY, 0x100)) {
        let mut page = vec![0u8; query_hca_cap::CAPABILITY_SIZE];
        page[..0x100].copy_from_slice(&head);
        check_round_trip::<CmdHcaCap>(&page, cmd_hca_cap::ALL);
        check_round_trip::<CryptoCaps>(&page, crypto_caps::ALL);
    }

    #[test]
    fn views_never_panic_on_any_length(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
        let ok = bytes.len() >= 64;
        proptest::prop_assert_eq!(View::<Mkc>::new(&bytes).is_ok(), ok);
        proptest::prop_assert_eq!(Mkc::decode(&bytes).is_ok(), ok);
        proptest::prop_assert_eq!(MboxOut::decode(&bytes).is_ok(), bytes.len() >= 16);
    }
}

#[test]
fn header_helpers_write_and_read_through_the_views() {
    let input = new_input(8, opcode::DESTROY_MKEY, 0xffff, 3);
    assert_eq!(input.len(), 16, "never shorter than the header");
    assert_eq!(&input[..8], &[0x02, 0x02, 0xff, 0xff, 0, 0, 0, 3]);
    let mut short = [0x11u8; 15];
    write_header(&mut short, 1, 2, 3);
    assert_eq!(short, [0x11u8; 15], "a short buffer is left alone");
    let mut out = [0u8; 16];
    out[0] = status::LIM_ERR;
    out[4..8].copy_from_slice(&0x00ab_cdefu32.to_be_bytes());
    assert_eq!(read_status(&out), (status::LIM_ERR, 0x00ab_cdef));
    assert_eq!(read_status(&out[..15]), (status::BAD_OUTP_LEN_ERR, 0));
}
