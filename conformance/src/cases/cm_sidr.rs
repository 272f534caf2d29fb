//! The connection manager's UD handshake and robustness on the wire (items 233–235): the
//! SIDR_REQ and SIDR_REP MADs at the IBTA's offsets, the CM response timeout and retry count a
//! REQ carries, and arbitrary bytes at QP 1, which are no CM message and break nothing. What
//! librdmacm does with them (udaddy, SIDR's events, vanishing peers, TIMEWAIT_EXIT) is C
//! behaviour, checked by `capi/tests/two_processes_cm_ud.sh`. The cases check the simulator's
//! wire code, so they need one (skipped on hardware).

use std::net::{Ipv4Addr, SocketAddrV4};

use mlx5_dv::Backend;
use mlx5_sim::profile::ShippedProfiles;
use mlx5_sim::wire::cm::{CmMsg, MAD_LEN, Mad, Req, SidrRep, SidrReq, sidr};

use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq};

const NEEDS: &[Need] = &[Need::SimControl];

pub(super) const CASES: &[Case] = &[
    Case { name: "cm.sidr_mads_at_the_ibta_offsets", covers: &[233], needs: NEEDS, run: sidr_offsets },
    Case { name: "cm.req_carries_cm_timeout_and_retries", covers: &[234], needs: NEEDS, run: req_timing },
    Case { name: "cm.garbage_at_qp1_is_no_cm_message", covers: &[235], needs: NEEDS, run: garbage },
];

/// The 32-bit big-endian word at byte `at` of the CM message (after the 24-byte MAD header).
fn word(b: &[u8; MAD_LEN], at: usize) -> u32 {
    let i = 24 + at;
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn attr(b: &[u8; MAD_LEN]) -> u16 {
    u16::from_be_bytes([b[16], b[17]])
}

fn sidr_offsets(_b: &mut dyn Backend, _env: &Env) -> Check {
    let req = SidrReq { request_id: 0x0102_0304, pkey: 0xffff, service_id: 0x0111_1c06, private_data: vec![0xaa; 216] };
    let b = Mad { tid: 7, msg: CmMsg::SidrReq(req.clone()) }.encode();
    check_eq("SIDR_REQ's attribute ID", attr(&b), 0x0017)?;
    check_eq("SIDR_REQ: request ID at 0, P_Key at 4", (word(&b, 0), word(&b, 4) >> 16), (0x0102_0304, 0xffff))?;
    check_eq("SIDR_REQ: service ID at 8", (u64::from(word(&b, 8)) << 32) | u64::from(word(&b, 12)), 0x0111_1c06)?;
    check_eq("SIDR_REQ: 216 bytes of private data at 16", &b[24 + 16..], &[0xaa; 216][..])?;
    check_eq("SIDR_REQ reads back", Mad::decode(&b), Some(Mad { tid: 7, msg: CmMsg::SidrReq(req) }))?;
    let rep = SidrRep {
        request_id: 0x0102_0304,
        status: sidr::SUCCESS,
        qpn: 0x00ab_cdef,
        service_id: 0x0111_1c06,
        qkey: 0x0123_4567,
        private_data: vec![0xbb; 136],
    };
    let b = Mad { tid: 7, msg: CmMsg::SidrRep(rep) }.encode();
    check_eq("SIDR_REP's attribute ID", attr(&b), 0x0018)?;
    check_eq("SIDR_REP: request ID at 0, status at 4", (word(&b, 0), b[24 + 4]), (0x0102_0304, 0))?;
    check_eq("SIDR_REP: QPN at 8 (24 bits)", word(&b, 8) >> 8, 0xab_cdef)?;
    check_eq("SIDR_REP: service ID at 12", (u64::from(word(&b, 12)) << 32) | u64::from(word(&b, 16)), 0x0111_1c06)?;
    check_eq("SIDR_REP: Q_Key at 20", word(&b, 20), 0x0123_4567)?;
    check(
        "SIDR_REP: 72 bytes of ClassPortInfo at 24, zero",
        b[24 + 24..24 + 96].iter().all(|&x| x == 0),
        "zero",
        "set",
    )?;
    check_eq("SIDR_REP: 136 bytes of private data at 96", &b[24 + 96..], &[0xbb; 136][..])?;
    let no = SidrRep { request_id: 1, status: sidr::REJECT, ..SidrRep::default() };
    let b = Mad { tid: 7, msg: CmMsg::SidrRep(no) }.encode();
    check_eq("a rejection: status 2 (REJECT), no QPN or Q_Key", (b[24 + 4], word(&b, 8), word(&b, 20)), (2, 0, 0))
}

fn req_timing(_b: &mut dyn Backend, _env: &Env) -> Check {
    for (t, n) in [(20u8, 15u8), (12, 2), (31, 0)] {
        let req = Req {
            local_comm_id: 1,
            cm_response_timeout: t,
            max_cm_retries: n,
            srq: true,
            private_data: vec![0; 92],
            ..Req::default()
        };
        let b = Mad { tid: 1, msg: CmMsg::Req(req.clone()) }.encode();
        check_eq(
            "REQ: remote CM response timeout in 43's high 5 bits, RC (0) and flow control (1) below",
            b[24 + 43],
            (t << 3) | 1,
        )?;
        check_eq("REQ: local CM response timeout in 47's high 5 bits", b[24 + 47] >> 3, t)?;
        check_eq("REQ: max CM retries in 51's high 4 bits, SRQ at bit 3", b[24 + 51], (n << 4) | 0x08)?;
        check_eq("the REQ reads back", Mad::decode(&b).map(|m| m.msg), Some(CmMsg::Req(req)))?;
    }
    Ok(())
}

/// A xorshift generator: the same bytes on every run.
fn bytes(seed: &mut u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

fn garbage(_b: &mut dyn Backend, _env: &Env) -> Check {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for n in [0, 1, 23, 24, 255] {
        check("fewer than 256 bytes are no CM MAD", Mad::decode(&bytes(&mut seed, n)).is_none(), "None", "a message")?;
    }
    // Noise with a CM header: each attribute decodes or is refused, and what decodes is
    // written back to the same message.
    for i in 0..2000u32 {
        let mut b = bytes(&mut seed, MAD_LEN + (i % 3) as usize);
        b[..4].copy_from_slice(&[1, 7, 2, 3]);
        b[16..18].copy_from_slice(&(0x0010 + (i % 10) as u16).to_be_bytes());
        let attr = u16::from_be_bytes([b[16], b[17]]);
        match Mad::decode(&b) {
            Some(m) => check_eq("a decoded MAD reads back after encoding", Mad::decode(&m.encode()), Some(m))?,
            None => check("only LAP (0x19), APR (0x1a) and others are refused", attr > 0x18, "refused", attr)?,
        }
    }
    // At the port: noise to QP 1 with the GSI Q_Key is kept for the CM (which drops what
    // does not decode); the port stays up.
    let profile = mlx5_dv::profile::Profile::builtin("cx6dx").map_err(|e| Verdict::fail("cx6dx", "a profile", e))?;
    let mut sim = mlx5_sim::Simulator::new(profile).map_err(|e| Verdict::fail("a simulator", "one", e))?;
    sim.carry_in_memory();
    let to = sim.fabric().net_port(0).map(|p| p.addr()).ok_or_else(|| Verdict::fail("port 0", "networked", "not"))?;
    let from = SocketAddrV4::new(Ipv4Addr::new(127, 0, 40, 9), 0xc000);
    for n in [0usize, 7, 256, 300] {
        let mut d = bytes(&mut seed, n);
        let _ = sim.receive_datagram(0, from, &d);
        d.truncate(n / 2);
        let _ = sim.receive_datagram(0, from, &d);
    }
    let _ = sim.fabric().take_gsi();
    check("the port still has its address", sim.fabric().net_port(0).map(|p| p.addr()) == Some(to), "yes", "no")
}
