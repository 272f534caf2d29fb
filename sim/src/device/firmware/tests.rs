//! The firmware's command tests.

use super::*;
use crate::profile::ShippedProfiles;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The firmware of the cx6dx profile.
pub(super) fn fw() -> Result<Firmware, Box<dyn std::error::Error>> {
    Ok(Firmware::new(&Profile::builtin("cx6dx")?)?)
}

/// Run one command with an output of `out_len` bytes: status, syndrome, output.
pub(super) fn exec(fw: &mut Firmware, input: &[u8], out_len: usize) -> (u8, u32, Vec<u8>) {
    let mut out = vec![0u8; out_len];
    fw.exec(input, &mut out);
    let (s, y) = prm::read_status(&out);
    (s, y, out)
}

pub(super) fn qp() -> QpCreate {
    QpCreate {
        order: 0,
        pdn: 1,
        st: 0,
        send_cqn: 1,
        recv_cqn: 1,
        scatter_to_cqe: 0,
        drain_sigerr: false,
        sq: Default::default(),
        rq: Default::default(),
        srqn: None,
        xrcd: 0,
        dbrec: 0,
        dci_streams: None,
    }
}

#[test]
fn qp_numbers_start_over_at_0x100_and_skip_live_qps() -> TestResult {
    let mut f = fw()?;
    assert_eq!(f.create_qp(qp()), Some(0x100));
    assert_eq!(f.create_qp(qp()), Some(0x101));
    f.next_qpn = 0xff_ffff;
    assert_eq!(f.create_qp(qp()), Some(0xff_ffff));
    assert_eq!(f.create_qp(qp()), Some(0x102), "0, 1 and the live 0x100, 0x101 are skipped");
    assert!(f.destroy_qp(0x100));
    f.next_qpn = 0xff_ffff;
    assert_eq!(f.create_qp(qp()), Some(0x100));
    Ok(())
}

#[test]
fn unknown_opcode_and_short_mailboxes_are_rejected() -> TestResult {
    let mut f = fw()?;
    let (s, _, _) = exec(&mut f, &prm::new_input(16, 0x7ff, 0, 0), 16);
    assert_eq!(s, status::BAD_OP_ERR);
    let (s, _, _) = exec(&mut f, &[0u8; 4], 16);
    assert_eq!(s, status::BAD_INP_LEN_ERR);
    let (s, _, _) = exec(&mut f, &prm::new_input(16, opcode::CREATE_PSV, 0, 0), 16);
    assert_eq!(s, status::BAD_OUTP_LEN_ERR);
    let (s, _, _) = exec(&mut f, &prm::new_input(16, opcode::CREATE_MKEY, 0, 0), 16);
    assert_eq!(s, status::BAD_INP_LEN_ERR);
    Ok(())
}

#[test]
fn psv_and_mkey_need_a_live_pd() -> TestResult {
    let mut f = fw()?;
    let mut psv = prm::new_input(16, opcode::CREATE_PSV, 0, 0);
    prm::create_psv::NUM_PSV.set(&mut psv, 1)?;
    prm::create_psv::PD.set(&mut psv, 77)?;
    let (s, y, _) = exec(&mut f, &psv, 32);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
    let (s, _, out) = exec(&mut f, &prm::new_input(16, opcode::ALLOC_PD, 0, 0), 16);
    assert_eq!(s, status::OK);
    let pdn = prm::pd::PD.get(&out)?;
    prm::create_psv::PD.set(&mut psv, pdn)?;
    prm::create_psv::NUM_PSV.set(&mut psv, 2)?;
    let (s, _, out) = exec(&mut f, &psv, 32);
    assert_eq!(s, status::OK);
    let a = prm::create_psv::OUT_PSV_INDEX[0].get(&out)?;
    let b = prm::create_psv::OUT_PSV_INDEX[1].get(&out)?;
    assert_ne!(a, b);
    assert_eq!(f.object_counts(), (0, 2, 1));
    Ok(())
}

#[test]
fn fault_rules_skip_then_act_then_expire() -> TestResult {
    let mut f = fw()?;
    f.add_fault(CommandFault {
        opcode: opcode::ALLOC_PD,
        skip: 1,
        times: 2,
        status: status::LIM_ERR,
        syndrome: 9,
        object_state: None,
    });
    let alloc = prm::new_input(16, opcode::ALLOC_PD, 0, 0);
    let got: Vec<u8> = (0..4).map(|_| exec(&mut f, &alloc, 16).0).collect();
    assert_eq!(got, [status::OK, status::LIM_ERR, status::LIM_ERR, status::OK]);
    Ok(())
}
