//! Send WQE segment layouts: each field's bytes, segment sizes, codecs and short buffers.
//! The expected bytes are written from the C structures (`mlx5dv.h`, `wqe.h`), not computed
//! from the tables.

use super::*;
use crate::prm::test_util::{Case, check_cases, check_round_trip, check_short};
use crate::prm::{Codec, Field, FieldError, Layout, View, ViewMut};

const B8: &[(usize, u8)] = &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8)];
const B8_AT_8: &[(usize, u8)] = &[(8, 1), (9, 2), (10, 3), (11, 4), (12, 5), (13, 6), (14, 7), (15, 8)];
const W64: u64 = 0x0102_0304_0506_0708;

#[test]
fn segment_sizes() {
    assert_eq!(<CtrlSeg as Layout>::SIZE, 16);
    assert_eq!(<RaddrSeg as Layout>::SIZE, 16);
    assert_eq!(<DataSeg as Layout>::SIZE, 16);
    assert_eq!(<InlineSeg as Layout>::SIZE, 4);
    assert_eq!(<UmrCtrlSeg as Layout>::SIZE, 48);
    assert_eq!(<MkeyContextSeg as Layout>::SIZE, 64);
    assert_eq!(<KlmSeg as Layout>::SIZE, 16);
    assert_eq!(<RepeatBlockSeg as Layout>::SIZE, 16);
    assert_eq!(<RepeatEntSeg as Layout>::SIZE, 16);
    assert_eq!(<SetPsvSeg as Layout>::SIZE, 16);
    assert_eq!(<BsfBasic as Layout>::SIZE, 16);
    assert_eq!(<BsfExt as Layout>::SIZE, 16);
    assert_eq!(<BsfInl as Layout>::SIZE, 16);
    assert_eq!(<Bsf as Codec>::SIZE, 64);
    assert_eq!((SEND_WQE_BB, SEND_WQE_DS, 1 << SEND_WQE_SHIFT), (64, 16, 64));
}

#[test]
fn ctrl_segment_bytes() {
    let cases: &[Case] = &[
        (ctrl::OPMOD, 0xab, &[(0, 0xab)]),
        (ctrl::WQE_INDEX, 0x1234, &[(1, 0x12), (2, 0x34)]),
        (ctrl::OPCODE, 0x25, &[(3, 0x25)]),
        (ctrl::QPN, 0xab_cdef, &[(4, 0xab), (5, 0xcd), (6, 0xef)]),
        (ctrl::DS, 0x3f, &[(7, 0x3f)]),
        (ctrl::SIGNATURE, 0x5a, &[(8, 0x5a)]),
        (ctrl::DCI_STREAM_CHANNEL_ID, 0x1234, &[(9, 0x12), (10, 0x34)]),
        (ctrl::FM, 4, &[(11, 0x80)]),
        (ctrl::FM, 1, &[(11, 0x20)]),
        (ctrl::CE, 2, &[(11, 0x08)]),
        (ctrl::SE, 1, &[(11, 0x02)]),
        (ctrl::IMM, 0x1122_3344, &[(12, 0x11), (13, 0x22), (14, 0x33), (15, 0x44)]),
    ];
    check_cases(ctrl::SIZE, ctrl::ALL, cases);
}

#[test]
fn ctrl_flags_are_the_fm_ce_se_bits() -> Result<(), FieldError> {
    let mut c = CtrlSeg::default();
    c.set_fm_ce_se(ctrl::CQ_UPDATE | ctrl::SOLICITED | ctrl::INITIATOR_SMALL_FENCE);
    assert_eq!((c.fm, c.ce, c.se), (ctrl::fence::INITIATOR_SMALL, ctrl::CE_CQ_UPDATE, true));
    assert!(c.cqe_requested());
    assert_eq!(c.to_bytes()?[11], 0x2a);
    assert_eq!(c.fm_ce_se(), 0x2a);
    c.set_fm_ce_se(ctrl::FENCE);
    assert_eq!((c.fm, c.ce, c.se), (ctrl::fence::SMALL_AND_FENCE, 0, false));
    assert!(!c.cqe_requested());
    assert_eq!(c.to_bytes()?[11], ctrl::FENCE);
    Ok(())
}

#[test]
fn ctrl_segment_of_a_umr_as_the_provider_writes_it() -> Result<(), FieldError> {
    // opmod_idx_opcode = idx << 8 | UMR, qpn_ds = qpn << 8 | ds, fm_ce_se = CQ_UPDATE,
    // imm = the mkey: what mlx5dv_set_ctrl_seg would produce.
    let c = CtrlSeg {
        wqe_index: 0x0102,
        opcode: opcode::UMR,
        qpn: 0x00_0abc,
        ds: 12,
        ce: ctrl::CE_CQ_UPDATE,
        imm: 0x0000_1200,
        ..CtrlSeg::default()
    };
    let b = c.to_bytes()?;
    assert_eq!(b, [0x00, 0x01, 0x02, 0x25, 0x00, 0x0a, 0xbc, 12, 0, 0, 0, 0x08, 0x00, 0x00, 0x12, 0x00]);
    assert_eq!(c.wqebbs(), 3);
    assert_eq!(CtrlSeg::decode(&b)?, c);
    assert!(matches!(CtrlSeg { ds: 64, ..c }.to_bytes(), Err(FieldError::TooWide { field: "ds", .. })));
    Ok(())
}

#[test]
fn pointer_segments_bytes() {
    let raddr: &[Case] =
        &[(raddr::RADDR, W64, B8), (raddr::RKEY, 0x1122_3344, &[(8, 0x11), (9, 0x22), (10, 0x33), (11, 0x44)])];
    check_cases(raddr::SIZE, raddr::ALL, raddr);
    let data: &[Case] = &[
        (data::BYTE_COUNT, 0x1122_3344, &[(0, 0x11), (1, 0x22), (2, 0x33), (3, 0x44)]),
        (data::LKEY, 0x5566_7788, &[(4, 0x55), (5, 0x66), (6, 0x77), (7, 0x88)]),
        (data::ADDR, W64, B8_AT_8),
    ];
    check_cases(data::SIZE, data::ALL, data);
    let inline: &[Case] = &[
        (inline::INLINE, 1, &[(0, 0x80)]),
        (inline::BYTE_COUNT, 0x7fff_ffff, &[(0, 0x7f), (1, 0xff), (2, 0xff), (3, 0xff)]),
        (inline::BYTE_COUNT, 0x123, &[(2, 0x01), (3, 0x23)]),
    ];
    check_cases(inline::SIZE, inline::ALL, inline);
}

#[test]
fn inline_header_carries_the_inline_bit() -> Result<(), FieldError> {
    let h = InlineSeg::new(13);
    let b = h.to_bytes()?;
    assert_eq!(u32::from_be_bytes(b), INLINE_SEG | 13);
    assert_eq!(h.padded_len(), Some(32), "4 header bytes + 13 data bytes, padded to 16");
    assert_eq!(InlineSeg::new(12).padded_len(), Some(16));
    assert!(!InlineSeg::decode(&DataSeg { byte_count: 8, ..DataSeg::default() }.to_bytes()?)?.inline);
    assert!(matches!(InlineSeg::new(1 << 31).to_bytes(), Err(FieldError::TooWide { .. })));
    Ok(())
}

#[test]
fn set_psv_segment_bytes() {
    let cases: &[Case] = &[
        (set_psv::PSV_INDEX, 0xab_cdef, &[(1, 0xab), (2, 0xcd), (3, 0xef)]),
        (set_psv::SYNDROME, 0x1234, &[(4, 0x12), (5, 0x34)]),
        (set_psv::TRANSIENT_SIGNATURE, W64, B8_AT_8),
    ];
    check_cases(set_psv::SIZE, set_psv::ALL, cases);
    assert_eq!(set_psv::transient_t10dif(0xffff, 0x1234, 0x0a0b_0c0d), 0xffff_1234_0a0b_0c0d);
    assert_eq!(set_psv::transient_crc32(0xffff_ffff), 0xffff_ffff_0000_0000);
    assert_eq!(set_psv::transient_crc64(7), 7);
}

#[test]
fn umr_ctrl_segment_bytes() {
    let cases: &[Case] = &[
        (umr_ctrl::FLAGS, umr_ctrl::flags::INLINE.into(), &[(0, 0x80)]),
        (umr_ctrl::KLM_OCTOWORDS, 0x1234, &[(4, 0x12), (5, 0x34)]),
        (umr_ctrl::BSF_OCTOWORDS, 4, &[(7, 4)]),
        (umr_ctrl::MKEY_MASK, umr_ctrl::mkey_mask::FREE, &[(12, 0x20)]),
        (umr_ctrl::MKEY_MASK, umr_ctrl::mkey_mask::LEN | umr_ctrl::mkey_mask::MKEY, &[(14, 0x20), (15, 0x01)]),
        (umr_ctrl::MKEY_MASK, W64, B8_AT_8),
    ];
    check_cases(umr_ctrl::SIZE, umr_ctrl::ALL, cases);
    let u = UmrCtrlSeg { flags: umr_ctrl::flags::INLINE, klm_octowords: 8, bsf_octowords: 4, mkey_mask: 0 };
    assert!(u.is_inline());
    assert_eq!((u.translation_bytes(), u.bsf_bytes()), (128, 64));
}

#[test]
fn mkey_context_segment_is_the_mkc_and_its_flag_bytes_agree() -> Result<(), FieldError> {
    let free = MkeyContextSeg { free: true, ..MkeyContextSeg::default() }.to_bytes()?;
    assert_eq!(free[0], mkey_context::FREE);
    let access = MkeyContextSeg { a: true, rw: true, rr: true, lw: true, lr: true, ..MkeyContextSeg::default() };
    use mkey_context::access_flags as af;
    let want = af::ATOMIC | af::REMOTE_WRITE | af::REMOTE_READ | af::LOCAL_WRITE | af::LOCAL_READ;
    assert_eq!(access.to_bytes()?[2], want);
    let tagged = MkeyContextSeg { qpn: 0xff_ffff, mkey_7_0: 0x42, ..MkeyContextSeg::default() }.to_bytes()?;
    assert_eq!(&tagged[4..8], &(0xffff_ff00u32 | 0x42).to_be_bytes(), "qpn_mkey = 0xffffff00 | tag");
    let flags = MkeyContextSeg { bsf_en: true, expected_sigerr_count: true, pd: 3, ..MkeyContextSeg::default() };
    let flags_pd =
        mkey_context::FLAGS_BSF_ENABLE | mkey_context::SIG_ERR_CNT_MASK << mkey_context::SIG_ERR_CNT_SHIFT | 3;
    assert_eq!(&flags.to_bytes()?[12..16], &flags_pd.to_be_bytes());
    Ok(())
}

#[test]
fn translation_entries_bytes() {
    let klm: &[Case] = &[
        (klm::BYTE_COUNT, 0x1122_3344, &[(0, 0x11), (1, 0x22), (2, 0x33), (3, 0x44)]),
        (klm::MKEY, 0x5566_7788, &[(4, 0x55), (5, 0x66), (6, 0x77), (7, 0x88)]),
        (klm::ADDRESS, W64, B8_AT_8),
    ];
    check_cases(klm::SIZE, klm::ALL, klm);
    let rb: &[Case] = &[
        (repeat_block::BYTE_COUNT, 0x1122_3344, &[(0, 0x11), (1, 0x22), (2, 0x33), (3, 0x44)]),
        (repeat_block::OP, repeat_block::OP_REPEAT_BLOCK.into(), &[(6, 0x04)]),
        (repeat_block::REPEAT_COUNT, 0x0102_0304, &[(8, 1), (9, 2), (10, 3), (11, 4)]),
        (repeat_block::NUM_ENT, 0x1234, &[(14, 0x12), (15, 0x34)]),
    ];
    check_cases(repeat_block::SIZE, repeat_block::ALL, rb);
    let re: &[Case] = &[
        (repeat_ent::STRIDE, 0x1234, &[(0, 0x12), (1, 0x34)]),
        (repeat_ent::BYTE_COUNT, 0x5678, &[(2, 0x56), (3, 0x78)]),
        (repeat_ent::MEMKEY, 0x1122_3344, &[(4, 0x11), (5, 0x22), (6, 0x33), (7, 0x44)]),
        (repeat_ent::VA, W64, B8_AT_8),
    ];
    check_cases(repeat_ent::SIZE, repeat_ent::ALL, re);
}

#[test]
fn klm_lists_and_repeat_blocks_decode_with_their_entries() -> Result<(), FieldError> {
    let entries: Vec<KlmSeg> =
        (0..3).map(|i| KlmSeg { byte_count: 512 * (i + 1), mkey: 0x100 + i, address: 0x1000 * u64::from(i) }).collect();
    let mut buf = [0u8; 64];
    assert_eq!(klm::encode_list(&entries, &mut buf)?, 48);
    assert_eq!(&buf[16..20], &1024u32.to_be_bytes());
    assert_eq!(klm::decode_list(&buf, 3)?, entries);
    assert!(matches!(klm::decode_list(&buf, 5), Err(FieldError::TooShort { need: 80, len: 64, .. })));
    assert!(matches!(klm::decode_list(&buf, usize::MAX), Err(FieldError::TooShort { .. })));
    assert!(klm::encode_list(&entries, &mut buf[..40]).is_err());

    let header = RepeatBlockSeg { byte_count: 520, op: repeat_block::OP_REPEAT_BLOCK, repeat_count: 4, num_ent: 2 };
    let ents = [
        RepeatEntSeg { stride: 520, byte_count: 512, memkey: 0x200, va: 0x1_0000 },
        RepeatEntSeg { stride: 520, byte_count: 8, memkey: 0x300, va: 0x2_0000 },
    ];
    let mut wqe = [0u8; 64];
    header.encode(&mut wqe)?;
    crate::prm::encode_array(&ents, &mut wqe[16..], "entries")?;
    let (h, e) = RepeatBlockSeg::decode_with_entries(&wqe)?;
    assert_eq!((h, e.as_slice()), (header, &ents[..]));
    assert!(RepeatBlockSeg::decode_with_entries(&wqe[..40]).is_err(), "num_ent beyond the buffer");
    Ok(())
}

#[test]
fn bsf_parts_bytes() {
    let basic: &[Case] = &[
        (bsf::basic::BSF_SIZE, bsf::bsf_size::WITH_INLINE.into(), &[(0, 0x80)]),
        (bsf::basic::BSF_SIZE, bsf::bsf_size::SIG_AND_CRYPTO.into(), &[(0, 0xc0)]),
        (bsf::basic::SBS, 1, &[(0, 0x10)]),
        (bsf::basic::CHECK_BYTE_MASK, 0xc0, &[(1, 0xc0)]),
        (bsf::basic::WIRE, 0x3f, &[(2, 0x3f)]),
        (bsf::basic::MEM_BS_SELECTOR, 3, &[(3, 3)]),
        (bsf::basic::RAW_DATA_SIZE, 0xffff_ffff, &[(4, 0xff), (5, 0xff), (6, 0xff), (7, 0xff)]),
        (bsf::basic::W_BFS, 0x42, &[(8, 0x42)]),
        (bsf::basic::W_PSV, 0xab_cdef, &[(9, 0xab), (10, 0xcd), (11, 0xef)]),
        (bsf::basic::M_BFS, 0x23, &[(12, 0x23)]),
        (bsf::basic::M_PSV, 0x12_3456, &[(13, 0x12), (14, 0x34), (15, 0x56)]),
    ];
    check_cases(bsf::basic::SIZE, bsf::basic::ALL, basic);
    let ext: &[Case] = &[
        (bsf::ext::T_INIT_GEN_PRO_SIZE, 0x1122_3344, &[(0, 0x11), (1, 0x22), (2, 0x33), (3, 0x44)]),
        (bsf::ext::W_TFS, 0x40, &[(8, 0x40)]),
        (bsf::ext::W_TFS_PSV, 0xab_cdef, &[(9, 0xab), (10, 0xcd), (11, 0xef)]),
        (bsf::ext::M_TFS, 0x41, &[(12, 0x41)]),
        (bsf::ext::M_TFS_PSV, 0x12_3456, &[(13, 0x12), (14, 0x34), (15, 0x56)]),
    ];
    check_cases(bsf::ext::SIZE, bsf::ext::ALL, ext);
    let inl: &[Case] = &[
        (bsf::inl::VLD, 1, &[(0, 0x80)]),
        (bsf::inl::REFRESH, 1, &[(0, 0x40)]),
        (bsf::inl::DIF_APPTAG, 0x1234, &[(2, 0x12), (3, 0x34)]),
        (bsf::inl::DIF_REFTAG, 0x1122_3344, &[(4, 0x11), (5, 0x22), (6, 0x33), (7, 0x44)]),
        (bsf::inl::SIG_TYPE, bsf::t10dif::IPCS.into(), &[(8, 0x02)]),
        (bsf::inl::REPEAT_BLOCK, 1, &[(9, 0x80)]),
        (bsf::inl::SEED, 1, &[(9, 0x08)]),
        (bsf::inl::INC_REFTAG, 1, &[(13, 0x40)]),
        (bsf::inl::APPREF_ESCAPE, 1, &[(13, 0x02)]),
        (bsf::inl::APPTAG_ESCAPE, 1, &[(13, 0x01)]),
        (bsf::inl::DIF_APP_BITMASK_CHECK, 0xffff, &[(14, 0xff), (15, 0xff)]),
    ];
    check_cases(bsf::inl::SIZE, bsf::inl::ALL, inl);
}

/// A T10-DIF memory domain over a CRC32C wire domain, block 512 on both sides, built the way
/// `mlx5_umr_fill_sig_bsf` builds it; every byte written out by hand.
#[test]
fn signature_bsf_of_a_t10dif_memory_and_crc32c_wire_domain() -> Result<(), FieldError> {
    let b = Bsf {
        basic: BsfBasic {
            bsf_size: bsf::bsf_size::WITH_INLINE,
            check_byte_mask: 0xff,
            wire: bsf::BS_SELECTOR[0],
            mem_bs_selector: bsf::BS_SELECTOR[0],
            raw_data_size: bsf::RAW_DATA_SIZE_ANY,
            w_bfs: bsf::bfs::CRC32C_BASE | bsf::bfs::CRC_REPEAT_BIT,
            w_psv: 0x000102,
            m_psv: 0x000101,
            ..BsfBasic::default()
        },
        m_inl: BsfInl {
            vld: true,
            refresh: true,
            dif_apptag: 0x1234,
            dif_reftag: 7,
            sig_type: bsf::t10dif::CRC,
            repeat_block: true,
            seed: true,
            inc_reftag: true,
            dif_app_bitmask_check: 0xffff,
            ..BsfInl::default()
        },
        ..Bsf::default()
    };
    let bytes = b.to_bytes()?;
    let mut want = [0u8; 64];
    want[..16].copy_from_slice(&[0x80, 0xff, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x42, 0, 1, 2, 0, 0, 1, 1]);
    want[48..].copy_from_slice(&[0xc0, 0, 0x12, 0x34, 0, 0, 0, 7, 1, 0x88, 0, 0, 0, 0x40, 0xff, 0xff]);
    assert_eq!(bytes, want);
    assert_eq!(Bsf::decode(&bytes)?, b);
    let described = Bsf::describe(&bytes)?;
    assert!(described.contains(&("m_inl", "dif_apptag", 0x1234)));
    assert!(described.contains(&("w_inl", "vld", 0)));
    assert_eq!(bsf::bs_selector(2), Some(6), "4048-byte blocks");
    assert_eq!(bsf::bs_selector(5), None);
    Ok(())
}

#[test]
fn short_buffers_are_refused() {
    check_short::<CtrlSeg>();
    check_short::<RaddrSeg>();
    check_short::<DataSeg>();
    check_short::<InlineSeg>();
    check_short::<UmrCtrlSeg>();
    check_short::<MkeyContextSeg>();
    check_short::<KlmSeg>();
    check_short::<RepeatBlockSeg>();
    check_short::<RepeatEntSeg>();
    check_short::<SetPsvSeg>();
    check_short::<BsfBasic>();
    check_short::<BsfExt>();
    check_short::<BsfInl>();
    check_short::<Bsf>();
    assert!(matches!(Bsf::describe(&[0u8; 63]), Err(FieldError::TooShort { .. })));
}

#[test]
fn views_read_segments_in_place() -> Result<(), FieldError> {
    // A SET_PSV WQE: ctrl then the PSV segment, read through views without copying.
    let mut wqe = [0u8; 32];
    CtrlSeg { opcode: opcode::SET_PSV, ds: 2, ..CtrlSeg::default() }.encode(&mut wqe)?;
    let mut psv = ViewMut::<SetPsvSeg>::new(&mut wqe[ctrl::SIZE..])?;
    psv.set_psv_index(0x11)?;
    psv.set_transient_signature(set_psv::transient_crc32(0xffff_ffff))?;
    let c = View::<CtrlSeg>::new(&wqe)?;
    assert_eq!((c.opcode(), c.ds()), (opcode::SET_PSV, 2));
    let p = View::<SetPsvSeg>::new(c.tail())?;
    assert_eq!((p.psv_index(), p.transient_signature()), (0x11, 0xffff_ffff_0000_0000));
    assert_eq!(opcode::name(c.opcode()), "SET_PSV");
    Ok(())
}

/// `fields` of the BSF's parts, moved to their byte offsets.
fn bsf_fields() -> Vec<Field> {
    let at = |fs: &[Field], byte: u32| fs.iter().map(move |f| f.at(byte * 8)).collect::<Vec<_>>();
    [at(bsf::basic::ALL, 0), at(bsf::ext::ALL, 16), at(bsf::inl::ALL, 32), at(bsf::inl::ALL, 48)].concat()
}

proptest::proptest! {
    #[test]
    fn segments_round_trip(bytes in proptest::collection::vec(proptest::num::u8::ANY, 64)) {
        check_round_trip::<CtrlSeg>(&bytes, ctrl::ALL);
        check_round_trip::<RaddrSeg>(&bytes, raddr::ALL);
        check_round_trip::<DataSeg>(&bytes, data::ALL);
        check_round_trip::<InlineSeg>(&bytes, inline::ALL);
        check_round_trip::<UmrCtrlSeg>(&bytes, umr_ctrl::ALL);
        check_round_trip::<MkeyContextSeg>(&bytes, crate::prm::mkc::ALL);
        check_round_trip::<KlmSeg>(&bytes, klm::ALL);
        check_round_trip::<RepeatBlockSeg>(&bytes, repeat_block::ALL);
        check_round_trip::<RepeatEntSeg>(&bytes, repeat_ent::ALL);
        check_round_trip::<SetPsvSeg>(&bytes, set_psv::ALL);
        check_round_trip::<Bsf>(&bytes, &bsf_fields());
    }

    #[test]
    fn ctrl_fm_ce_se_byte_round_trips(byte in proptest::num::u8::ANY) {
        let mut c = CtrlSeg::default();
        c.set_fm_ce_se(byte);
        proptest::prop_assert_eq!(c.fm_ce_se(), byte & 0xee, "bits 4 and 0 are reserved");
    }

    #[test]
    fn lists_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..100), n in 0usize..10) {
        let ok = n * klm::SIZE <= bytes.len();
        proptest::prop_assert_eq!(klm::decode_list(&bytes, n).is_ok(), ok);
        let _ = RepeatBlockSeg::decode_with_entries(&bytes);
        let _ = Bsf::decode(&bytes);
    }
}
