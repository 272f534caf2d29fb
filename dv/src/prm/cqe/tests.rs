//! CQE layouts: each field's bytes, the op_own byte, ownership and the signature-error
//! values. The expected bytes are written from the C structures (`mlx5dv.h`, `cq.c`).

use super::*;
use crate::prm::test_util::{Case, check_cases, check_round_trip, check_short};
use crate::prm::{Field, FieldError, Layout, View};

/// The op_own cases every CQE kind shares (byte 63).
fn op_own_cases(opcode: Field, format: Field, se: Field, owner: Field) -> Vec<Case> {
    vec![
        (opcode, 0xd, &[(63, 0xd0)]),
        (opcode, 0xf, &[(63, 0xf0)]),
        (format, 3, &[(63, 0x0c)]),
        (se, 1, &[(63, 0x02)]),
        (owner, 1, &[(63, 0x01)]),
    ]
}

#[test]
fn cqe64_bytes() {
    let mut cases: Vec<Case> = vec![
        (cqe64::WQE_ID, 0x1234, &[(2, 0x12), (3, 0x34)]),
        (cqe64::ML_PATH, 0x7f, &[(17, 0x7f)]),
        (cqe64::SLID, 0x1234, &[(22, 0x12), (23, 0x34)]),
        (cqe64::FLAGS, 0x30, &[(24, 0x30)]),
        (cqe64::RQPN, 0xab_cdef, &[(25, 0xab), (26, 0xcd), (27, 0xef)]),
        (cqe64::HDS_IP_EXT, 0x5a, &[(28, 0x5a)]),
        (cqe64::L4_HDR_TYPE_ETC, 0xa5, &[(29, 0xa5)]),
        (cqe64::VLAN_INFO, 0x1234, &[(30, 0x12), (31, 0x34)]),
        (cqe64::SRQN_UIDX, 0x1122_3344, &[(32, 0x11), (33, 0x22), (34, 0x33), (35, 0x44)]),
        (cqe64::IMM_INVAL_PKEY, 0x1122_3344, &[(36, 0x11), (37, 0x22), (38, 0x33), (39, 0x44)]),
        (cqe64::APP, 1, &[(40, 1)]),
        (cqe64::APP_OP, 2, &[(41, 2)]),
        (cqe64::APP_INFO, 0x1234, &[(42, 0x12), (43, 0x34)]),
        (cqe64::BYTE_CNT, 0x1122_3344, &[(44, 0x11), (45, 0x22), (46, 0x33), (47, 0x44)]),
        (
            cqe64::TIMESTAMP,
            0x0102_0304_0506_0708,
            &[(48, 1), (49, 2), (50, 3), (51, 4), (52, 5), (53, 6), (54, 7), (55, 8)],
        ),
        (cqe64::SOP_DROP, 0x80, &[(56, 0x80)]),
        (cqe64::QPN, 0xab_cdef, &[(57, 0xab), (58, 0xcd), (59, 0xef)]),
        (cqe64::WQE_COUNTER, 0x1234, &[(60, 0x12), (61, 0x34)]),
        (cqe64::SIGNATURE, 0x99, &[(62, 0x99)]),
    ];
    cases.extend(op_own_cases(cqe64::OPCODE, cqe64::FORMAT, cqe64::SE, cqe64::OWNER));
    check_cases(SIZE, cqe64::ALL, &cases);
}

#[test]
fn err_cqe_bytes() {
    let mut cases: Vec<Case> = vec![
        (err::SRQN, 0x1122_3344, &[(32, 0x11), (33, 0x22), (34, 0x33), (35, 0x44)]),
        (err::VENDOR_ERR_SYND, 0x93, &[(54, 0x93)]),
        (err::SYNDROME, syndrome::REMOTE_ACCESS_ERR.into(), &[(55, 0x13)]),
        (err::S_WQE_OPCODE, 0x25, &[(56, 0x25)]),
        (err::QPN, 0xab_cdef, &[(57, 0xab), (58, 0xcd), (59, 0xef)]),
        (err::WQE_COUNTER, 0x1234, &[(60, 0x12), (61, 0x34)]),
        (err::SIGNATURE, 0x99, &[(62, 0x99)]),
    ];
    cases.extend(op_own_cases(err::OPCODE, err::FORMAT, err::SE, err::OWNER));
    check_cases(SIZE, err::ALL, &cases);
}

#[test]
fn sigerr_cqe_bytes() {
    let mut cases: Vec<Case> = vec![
        (sigerr::EXPECTED_TRANS_SIG, 0x1122_3344, &[(16, 0x11), (17, 0x22), (18, 0x33), (19, 0x44)]),
        (sigerr::ACTUAL_TRANS_SIG, 0x1122_3344, &[(20, 0x11), (21, 0x22), (22, 0x33), (23, 0x44)]),
        (sigerr::EXPECTED_REF_TAG, 0x1122_3344, &[(24, 0x11), (25, 0x22), (26, 0x33), (27, 0x44)]),
        (sigerr::ACTUAL_REF_TAG, 0x1122_3344, &[(28, 0x11), (29, 0x22), (30, 0x33), (31, 0x44)]),
        (sigerr::SYNDROME, sigerr::SYNDROME_GUARD.into(), &[(32, 0x20)]),
        (sigerr::SYNDROME, sigerr::SYNDROME_REFTAG.into(), &[(32, 0x08)]),
        (sigerr::SIG_TYPE, 7, &[(34, 7)]),
        (sigerr::DOMAIN, sigerr::DOMAIN_MEMORY.into(), &[(35, 1)]),
        (sigerr::MKEY, 0x1122_3344, &[(36, 0x11), (37, 0x22), (38, 0x33), (39, 0x44)]),
        (
            sigerr::SIG_ERR_OFFSET,
            0x0102_0304_0506_0708,
            &[(40, 1), (41, 2), (42, 3), (43, 4), (44, 5), (45, 6), (46, 7), (47, 8)],
        ),
        (sigerr::SIGNATURE, 0x99, &[(62, 0x99)]),
    ];
    cases.extend(op_own_cases(sigerr::OPCODE, sigerr::FORMAT, sigerr::SE, sigerr::OWNER));
    check_cases(SIZE, sigerr::ALL, &cases);
}

#[test]
fn sizes_and_the_op_own_byte() -> Result<(), FieldError> {
    assert_eq!(<Cqe64 as Layout>::SIZE, 64);
    assert_eq!(<ErrCqe as Layout>::SIZE, 64);
    assert_eq!(<SigErrCqe as Layout>::SIZE, 64);
    let c = Cqe64 { opcode: opcode::RESP_SEND, owner: true, se: true, ..Cqe64::default() };
    assert_eq!(c.op_own(), 0x23);
    assert_eq!(c.to_bytes()?[63], 0x23);
    assert_eq!(op_own(opcode::REQ_ERR, 0, false, true) & OWNER_MASK, 1);
    assert_eq!(op_own(0xff, 0xff, false, false), 0xfc, "parts are masked to their widths");
    Ok(())
}

#[test]
fn ownership_follows_the_wrap_parity() -> Result<(), FieldError> {
    let cqe = |opcode, owner| Cqe64 { opcode, owner, ..Cqe64::default() }.to_bytes();
    // A CQ of 4 entries: the first pass (index 0..4) is software's when owner = 0.
    assert!(sw_owned(&cqe(opcode::REQ, false)?, 1, 4)?);
    assert!(!sw_owned(&cqe(opcode::REQ, true)?, 1, 4)?);
    assert!(sw_owned(&cqe(opcode::REQ, true)?, 5, 4)?, "second pass");
    assert!(!sw_owned(&cqe(opcode::INVALID, false)?, 0, 4)?, "never written");
    assert_eq!(peek_opcode(&cqe(opcode::SIG_ERR, false)?)?, opcode::SIG_ERR);
    assert!(matches!(peek_opcode(&[0u8; 63]), Err(FieldError::TooShort { .. })));
    assert!(sw_owned(&[0u8; 10], 0, 4).is_err());
    Ok(())
}

#[test]
fn error_cqe_as_the_provider_reads_it() -> Result<(), FieldError> {
    let e = ErrCqe {
        vendor_err_synd: 0x88,
        syndrome: syndrome::LOCAL_PROT_ERR,
        s_wqe_opcode: crate::prm::wqe::opcode::RDMA_WRITE,
        qpn: 0x123,
        wqe_counter: 9,
        opcode: opcode::REQ_ERR,
        ..ErrCqe::default()
    };
    let b = e.to_bytes()?;
    assert_eq!(&b[52..64], &[0, 0, 0x88, 0x04, 0x08, 0x00, 0x01, 0x23, 0x00, 0x09, 0x00, 0xd0]);
    let v = View::<ErrCqe>::new(&b)?;
    assert_eq!((v.syndrome(), v.vendor_err_synd(), v.wqe_counter()), (4, 0x88, 9));
    assert_eq!(opcode::name(v.opcode()), "REQ_ERR");
    Ok(())
}

#[test]
fn sigerr_values_are_split_across_trans_sig_and_ref_tag() -> Result<(), FieldError> {
    let mut s = SigErrCqe { opcode: opcode::SIG_ERR, mkey: 0x0004_2a00, ..SigErrCqe::default() };
    s.set_expected(0xabcd_1234_0000_0007);
    s.set_actual(0x9999_1234_0000_0007);
    s.syndrome = sigerr::SYNDROME_GUARD;
    s.domain = sigerr::DOMAIN_WIRE;
    s.sig_err_offset = 512;
    let b = s.to_bytes()?;
    assert_eq!(&b[16..24], &[0xab, 0xcd, 0x12, 0x34, 0x99, 0x99, 0x12, 0x34]);
    assert_eq!(&b[24..32], &[0, 0, 0, 7, 0, 0, 0, 7]);
    let back = SigErrCqe::decode(&b)?;
    assert_eq!((back.expected(), back.actual()), (0xabcd_1234_0000_0007, 0x9999_1234_0000_0007));
    assert_eq!(back.mkey >> 8, 0x42a);
    assert_eq!(back, s);
    let mut raw = [0u8; 64];
    (raw[34], raw[35]) = (0xf9, 0xfa);
    let masked = SigErrCqe::decode(&raw)?;
    assert_eq!((masked.sig_type, masked.domain), (1, 2), "only the low 3 bits count, as rdma-core reads them");
    Ok(())
}

#[test]
fn short_buffers_are_refused() {
    check_short::<Cqe64>();
    check_short::<ErrCqe>();
    check_short::<SigErrCqe>();
}

proptest::proptest! {
    #[test]
    fn cqes_round_trip(bytes in proptest::collection::vec(proptest::num::u8::ANY, 64)) {
        check_round_trip::<Cqe64>(&bytes, cqe64::ALL);
        check_round_trip::<ErrCqe>(&bytes, err::ALL);
        check_round_trip::<SigErrCqe>(&bytes, sigerr::ALL);
        proptest::prop_assert_eq!(peek_opcode(&bytes), Ok(bytes[63] >> 4));
    }

    #[test]
    fn sigerr_64_bit_values_round_trip(expected in proptest::num::u64::ANY, actual in proptest::num::u64::ANY) {
        let mut s = SigErrCqe::default();
        s.set_expected(expected);
        s.set_actual(actual);
        let back = SigErrCqe::decode(&s.to_bytes().map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?)
            .map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        proptest::prop_assert_eq!((back.expected(), back.actual()), (expected, actual));
    }

    #[test]
    fn any_length_is_safe(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..70)) {
        let ok = bytes.len() >= SIZE;
        proptest::prop_assert_eq!(Cqe64::decode(&bytes).is_ok(), ok);
        proptest::prop_assert_eq!(ErrCqe::decode(&bytes).is_ok(), ok);
        proptest::prop_assert_eq!(SigErrCqe::decode(&bytes).is_ok(), ok);
    }
}
