//! Raw CQ and QP commands on the firmware alone, and regression tests for mailboxes the
//! `mailbox` fuzz target found.

use super::*;
use crate::device::firmware::tests::{exec, fw};
use crate::profile::ShippedProfiles;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn cmd(op: u16, len: usize, fields: &[(Field, u64)]) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let mut input = prm::new_input(len, op, 0, 0);
    for (f, v) in fields {
        f.set(&mut input, *v)?;
    }
    Ok(input)
}

/// A PD, a UAR, an EQ and a PAS-addressed CQ of 64 entries: (pdn, cqn).
fn pd_and_cq(f: &mut Firmware) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    use prm::eq::create_eq as e;
    let (_, _, out) = exec(f, &prm::new_input(16, opcode::ALLOC_PD, 0, 0), 16);
    let pdn = prm::pd::PD.get(&out)?;
    let (_, _, out) = exec(f, &prm::new_input(16, opcode::ALLOC_UAR, 0, 0), 16);
    let uar = prm::eq::uar::UAR.get(&out)?;
    let mut eq = cmd(opcode::CREATE_EQ, e::IN_SIZE + 8, &[(e::LOG_EQ_SIZE, 6), (e::UAR_PAGE, uar), (e::INTR, 1)])?;
    eq[e::PAS_BYTE..].copy_from_slice(&0x10_0000u64.to_be_bytes());
    let (s, _, out) = exec(f, &eq, 16);
    assert_eq!(s, status::OK);
    let eqn = e::OUT_EQ_NUMBER.get(&out)?;
    let c = q::create_cq::IN_SIZE;
    let mut cq = cmd(opcode::CREATE_CQ, c + 8, &[(q::create_cq::LOG_CQ_SIZE, 6), (q::create_cq::C_EQN, eqn)])?;
    cq[c..].copy_from_slice(&0x20_0000u64.to_be_bytes());
    let (s, _, out) = exec(f, &cq, 16);
    assert_eq!(s, status::OK);
    Ok((pdn, q::create_cq::CQN.get(&out)?))
}

/// The `mailbox` fuzz target's first crash: a PAS address near 2^64 plus the receive queue's
/// bytes overflowed (`wq + rq_bytes`). Now BAD_PARAM with the out-of-range syndrome.
#[test]
fn create_qp_at_the_top_of_the_address_space_is_bad_param() -> TestResult {
    let mut f = fw()?;
    let (pdn, cqn) = pd_and_cq(&mut f)?;
    let fields = [(q::qp::PD, pdn), (q::qp::CQN_SND, cqn), (q::qp::CQN_RCV, cqn), (q::qp::LOG_RQ_SIZE, 15)];
    let mut input = cmd(opcode::CREATE_QP, q::qp::SIZE + 8, &fields)?;
    input[q::qp::SIZE..].copy_from_slice(&0xffff_ffff_ffff_f000u64.to_be_bytes());
    let (s, y, _) = exec(&mut f, &input, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, syndrome::OUT_OF_RANGE));
    // The same QP lower down is made.
    input[q::qp::SIZE..].copy_from_slice(&0x40_0000u64.to_be_bytes());
    assert_eq!(exec(&mut f, &input, 16).0, status::OK);
    Ok(())
}

#[test]
fn cq_and_eq_rings_and_umems_that_wrap_are_bad_param() -> TestResult {
    use prm::eq::{create_eq as e, umem as u};
    let mut f = fw()?;
    let (_, _, out) = exec(&mut f, &prm::new_input(16, opcode::ALLOC_UAR, 0, 0), 16);
    let uar = prm::eq::uar::UAR.get(&out)?;
    let mut eq =
        cmd(opcode::CREATE_EQ, e::IN_SIZE + 8, &[(e::LOG_EQ_SIZE, 8), (e::UAR_PAGE, uar), (e::LOG_PAGE_SIZE, 2)])?;
    eq[e::PAS_BYTE..].copy_from_slice(&u64::MAX.to_be_bytes());
    assert_eq!(exec(&mut f, &eq, 16).0, status::BAD_PARAM_ERR);
    let mut um = cmd(opcode::CREATE_UMEM, u::IN_SIZE + 8, &[(u::NUM_OF_MTT, 1)])?;
    um[u::MTT_BYTE..u::MTT_BYTE + 8].copy_from_slice(&(u64::MAX - 0xffc).to_be_bytes());
    let (s, y, _) = exec(&mut f, &um, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, syndrome::OUT_OF_RANGE));
    let (_, cqn) = pd_and_cq(&mut f)?;
    let c = q::create_cq::IN_SIZE;
    let mut cq = cmd(opcode::CREATE_CQ, c + 8, &[(q::create_cq::LOG_CQ_SIZE, 6)])?;
    cq[c..].copy_from_slice(&0xffff_ffff_ffff_f000u64.to_be_bytes());
    let (s, y, _) = exec(&mut f, &cq, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, syndrome::OUT_OF_RANGE), "CQ {cqn} exists; this one wraps");
    Ok(())
}

#[test]
fn query_and_modify_cq() -> TestResult {
    let mut f = fw()?;
    let (_, cqn) = pd_and_cq(&mut f)?;
    let query = cmd(opcode::QUERY_CQ, 16, &[(q::create_cq::CQN, cqn)])?;
    let (s, _, out) = exec(&mut f, &query, cqf::SIZE);
    assert_eq!(s, status::OK);
    assert_eq!(q::create_cq::LOG_CQ_SIZE.get(&out)?, 6);
    assert_eq!(exec(&mut f, &query, 16).0, status::BAD_OUTP_LEN_ERR);
    let fields = [
        (q::create_cq::CQN, cqn),
        (cqf::FIELD_SELECT, cqf::SELECT_PERIOD | cqf::SELECT_COUNT),
        (cqf::CQ_PERIOD, 16),
        (cqf::CQ_MAX_COUNT, 8),
    ];
    let modify = cmd(op::MODIFY_CQ, cqf::SIZE, &fields)?;
    assert_eq!(exec(&mut f, &modify, 16).0, status::OK);
    let (_, _, out) = exec(&mut f, &query, cqf::SIZE);
    assert_eq!((cqf::CQ_PERIOD.get(&out)?, cqf::CQ_MAX_COUNT.get(&out)?), (16, 8));
    let mut resize = modify.clone();
    prm::mbox_in::OP_MOD.set(&mut resize, 1)?;
    assert_eq!(exec(&mut f, &resize, 16).0, status::BAD_PARAM_ERR, "resizing is not simulated");
    let other = cmd(opcode::QUERY_CQ, 16, &[(q::create_cq::CQN, cqn + 100)])?;
    assert_eq!(exec(&mut f, &other, cqf::SIZE).1, syndrome::NO_SUCH_OBJECT);
    Ok(())
}

/// `cqc.cqe_sz` 1 and 2 make 128-byte entries, 3 and up are BAD_PARAM; `cqc.oi` is taken
/// on a device with `cq_oi` and is BAD_PARAM without it (item 329).
#[test]
fn cqe_size_and_overrun_ignore() -> TestResult {
    use q::create_cq as c;
    let create = |f: &mut Firmware, fields: &[(Field, u64)]| -> Result<(u8, u64), Box<dyn std::error::Error>> {
        let (_, _, out) = exec(f, &prm::new_input(16, opcode::ALLOC_UAR, 0, 0), 16);
        let _ = out;
        let mut input = cmd(opcode::CREATE_CQ, c::IN_SIZE + 8, fields)?;
        input[c::IN_SIZE..].copy_from_slice(&0x30_0000u64.to_be_bytes());
        let (s, _, out) = exec(f, &input, 16);
        Ok((s, c::CQN.get(&out)?))
    };
    let mut f = fw()?;
    let (_, cqn) = pd_and_cq(&mut f)?;
    let eqn = f.cq_mut(cqn as u32).and_then(|x| x.eqn).unwrap_or(0);
    let base = [(c::LOG_CQ_SIZE, 4), (c::C_EQN, u64::from(eqn))];
    for (sz, stride) in [(0, 64), (1, 128), (2, 128)] {
        let (s, n) = create(&mut f, &[base[0], base[1], (c::CQE_SZ, sz)])?;
        assert_eq!(s, status::OK, "cqe_sz {sz}");
        assert_eq!(f.cq_mut(n as u32).map(|x| x.ring.stride), Some(stride), "cqe_sz {sz}");
    }
    assert_eq!(create(&mut f, &[base[0], base[1], (c::CQE_SZ, 3)])?.0, status::BAD_PARAM_ERR);
    let (s, n) = create(&mut f, &[base[0], base[1], (c::OI, 1)])?;
    assert_eq!((s, f.cq_mut(n as u32).map(|x| x.oi)), (status::OK, Some(true)));
    let mut p = crate::profile::Profile::builtin("cx6dx")?;
    p.hca_cap.cq_oi = false;
    let mut off = Firmware::new(&p)?;
    let (_, cqn) = pd_and_cq(&mut off)?;
    let eqn = off.cq_mut(cqn as u32).and_then(|x| x.eqn).unwrap_or(0);
    let (s, _) = create(&mut off, &[(c::LOG_CQ_SIZE, 4), (c::C_EQN, u64::from(eqn)), (c::OI, 1)])?;
    assert_eq!(s, status::BAD_PARAM_ERR, "oi without cq_oi");
    Ok(())
}

#[test]
fn every_rc_transition_from_its_state_only() -> TestResult {
    let mut f = fw()?;
    let (pdn, cqn) = pd_and_cq(&mut f)?;
    let fields = [(q::qp::PD, pdn), (q::qp::CQN_SND, cqn), (q::qp::CQN_RCV, cqn), (q::qp::RQ_TYPE, 3)];
    let mut create = cmd(opcode::CREATE_QP, q::qp::SIZE + 8, &fields)?;
    create[q::qp::SIZE..].copy_from_slice(&0x40_0000u64.to_be_bytes());
    let (s, _, out) = exec(&mut f, &create, 16);
    assert_eq!(s, status::OK);
    let qpn = q::qp::QPN.get(&out)?;
    let step = |f: &mut Firmware, op: u16| -> Result<u8, Box<dyn std::error::Error>> {
        Ok(exec(f, &cmd(op, q::qp::SIZE, &[(q::qp::QPN, qpn)])?, 16).0)
    };
    let state = |f: &Firmware| f.qp(qpn as u32).map(|q| q.state);
    assert_eq!(step(&mut f, op::INIT2INIT_QP)?, status::BAD_QP_STATE_ERR, "INIT2INIT from RST");
    assert_eq!(step(&mut f, opcode::RST2INIT_QP)?, status::OK);
    assert_eq!(step(&mut f, op::INIT2INIT_QP)?, status::OK);
    assert_eq!(state(&f), Some(QpState::Init));
    assert_eq!(step(&mut f, op::SQERR2RTS_QP)?, status::BAD_QP_STATE_ERR, "SQERR2RTS from INIT");
    assert_eq!(step(&mut f, opcode::INIT2RTR_QP)?, status::OK);
    let remote = f.qp(qpn as u32).and_then(|q| q.remote).map(|d| d.ah.is_global);
    assert_eq!(remote, Some(true), "on Ethernet the path is by GID without grh");
    assert_eq!(step(&mut f, opcode::RTR2RTS_QP)?, status::OK);
    assert_eq!(step(&mut f, opcode::RTS2RTS_QP)?, status::OK);
    assert_eq!(step(&mut f, op::SQD_RTS_QP)?, status::BAD_QP_STATE_ERR, "SQD_RTS from RTS");
    if let Some(q) = f.qp_mut(qpn as u32) {
        q.state = QpState::Sqd;
    }
    assert_eq!(step(&mut f, op::SQD_RTS_QP)?, status::OK);
    assert_eq!(state(&f), Some(QpState::Rts));
    assert_eq!(step(&mut f, opcode::QP_2ERR)?, status::OK);
    assert_eq!(state(&f), Some(QpState::Err));
    assert_eq!(step(&mut f, opcode::QP_2RST)?, status::OK);
    assert_eq!(state(&f), Some(QpState::Reset));
    Ok(())
}

/// The PSNs, timers and retry counts of a QP come from the `qpc` of its transitions: what
/// each transition takes, and what `opt_param_mask` adds.
#[test]
fn transport_state_comes_from_the_transitions_qpc() -> TestResult {
    use q::{optpar as o, qp as f};
    let mut f = fw()?;
    let (pdn, cqn) = pd_and_cq(&mut f)?;
    let fields = [(f::PD, pdn), (f::CQN_SND, cqn), (f::CQN_RCV, cqn), (f::RQ_TYPE, 3)];
    let mut create = cmd(opcode::CREATE_QP, f::SIZE + 8, &fields)?;
    create[f::SIZE..].copy_from_slice(&0x40_0000u64.to_be_bytes());
    let qpn = f::QPN.get(&exec(&mut f, &create, 16).2)?;
    let step = |fw: &mut Firmware, op: u16, fields: &[(Field, u64)]| -> Result<u8, Box<dyn std::error::Error>> {
        let mut all = vec![(f::QPN, qpn)];
        all.extend_from_slice(fields);
        Ok(exec(fw, &cmd(op, f::SIZE, &all)?, 16).0)
    };
    let t = |fw: &Firmware| fw.qp(qpn as u32).map(|q| (q.transport, q.access));
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    assert_eq!(step(&mut f, opcode::RST2INIT_QP, &[(f::RWE, 1)])?, status::OK);
    let rtr = [(f::NEXT_RCV_PSN, 0x12_3456), (f::MIN_RNR_NAK, 12), (f::NEXT_SEND_PSN, 0x77)];
    assert_eq!(step(&mut f, opcode::INIT2RTR_QP, &rtr)?, status::OK);
    let want = QpTransport { rq_psn: 0x12_3456, min_rnr_timer: 12, ..QpTransport::default() };
    assert_eq!(t(&f), Some((want, rw)), "INIT2RTR takes the receive PSN and the RNR timer, not the send PSN");
    let rts = [(f::NEXT_SEND_PSN, 0xab_cdef), (f::ACK_TIMEOUT, 14), (f::RETRY_COUNT, 7), (f::RNR_RETRY, 6)];
    assert_eq!(step(&mut f, opcode::RTR2RTS_QP, &rts)?, status::OK);
    let want = QpTransport { sq_psn: 0xab_cdef, timeout: 14, retry_cnt: 7, rnr_retry: 6, ..want };
    assert_eq!(t(&f), Some((want, rw)));
    assert_eq!(step(&mut f, opcode::RTS2RTS_QP, &[(f::MIN_RNR_NAK, 3), (f::RRE, 1)])?, status::OK);
    assert_eq!(t(&f), Some((want, rw)), "without opt_param_mask RTS2RTS changes nothing");
    let opt = u64::from(o::RNR_TIMEOUT | o::RRE);
    let rts2rts = [(f::MIN_RNR_NAK, 3), (f::RRE, 1), (f::OPT_PARAM_MASK, opt)];
    assert_eq!(step(&mut f, opcode::RTS2RTS_QP, &rts2rts)?, status::OK);
    let want = QpTransport { min_rnr_timer: 3, ..want };
    assert_eq!(t(&f), Some((want, rw | AccessFlags::REMOTE_READ)), "the optional parameters it names");
    Ok(())
}

/// CREATE_QP takes RC, UC, UD and XRC (an XRC target's domain must exist), not st 4; INIT2RTR gives a UD QP no path and no receive PSN, and a
/// UC QP its path and receive PSN but no RNR timer (UC has no RNR NAKs).
#[test]
fn service_types_and_what_their_init2rtr_takes() -> TestResult {
    use q::qp as f;
    let mut fw = fw()?;
    let (pdn, cqn) = pd_and_cq(&mut fw)?;
    let create = |fw: &mut Firmware, st: u64| -> Result<(u8, u64), Box<dyn std::error::Error>> {
        let fields = [(f::ST, st), (f::PD, pdn), (f::CQN_SND, cqn), (f::CQN_RCV, cqn), (f::RQ_TYPE, 3)];
        let mut input = cmd(opcode::CREATE_QP, f::SIZE + 8, &fields)?;
        input[f::SIZE..].copy_from_slice(&0x40_0000u64.to_be_bytes());
        let (s, _, out) = exec(fw, &input, 16);
        Ok((s, f::QPN.get(&out)?))
    };
    assert_eq!(create(&mut fw, 4)?.0, status::BAD_PARAM_ERR, "st 4 is no service type the device takes");
    assert_eq!(create(&mut fw, 3)?.0, status::OK, "st 3: an XRC initiator");
    let target = cmd(opcode::CREATE_QP, f::SIZE + 8, &[(f::ST, 3), (f::XRCD, 7), (f::RQ_TYPE, 3)])?;
    assert_eq!(exec(&mut fw, &target, 16).0, status::BAD_PARAM_ERR, "an XRC target of a domain never allocated");
    let rtr = [(f::NEXT_RCV_PSN, 0x55), (f::MIN_RNR_NAK, 9), (f::REMOTE_QPN, 0x123)];
    for (st, path, want) in [
        (q::st::UC, true, QpTransport { rq_psn: 0x55, ..QpTransport::default() }),
        (q::st::UD, false, QpTransport::default()),
    ] {
        let (s, qpn) = create(&mut fw, u64::from(st))?;
        assert_eq!(s, status::OK);
        assert_eq!(exec(&mut fw, &cmd(opcode::RST2INIT_QP, f::SIZE, &[(f::QPN, qpn)])?, 16).0, status::OK);
        let mut fields = vec![(f::QPN, qpn)];
        fields.extend_from_slice(&rtr);
        assert_eq!(exec(&mut fw, &cmd(opcode::INIT2RTR_QP, f::SIZE, &fields)?, 16).0, status::OK);
        let q = fw.qp(qpn as u32).ok_or("no QP")?;
        assert_eq!((q.st, q.remote.is_some(), q.transport), (st, path, want), "st {st}");
    }
    Ok(())
}
