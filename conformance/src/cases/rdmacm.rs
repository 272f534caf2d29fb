//! The RDMA connection manager's ground on the simulated network (items 231–232, 291): the CM
//! MADs at the IBTA's offsets (the MRA's too), and QP 1, where a UD SEND with the GSI's Q_Key is kept for the
//! connection manager of the C ABI's librdmacm and anything else is dropped. The rest of
//! librdmacm (events, the handshake between two processes, rping, ucmatose) is C behaviour,
//! checked by `capi/tests/two_processes_rdmacm.sh`. The cases build a simulator of their own:
//! they check the simulator's wire code, so they need one (skipped on hardware).

use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use mlx5_dv::Backend;
use mlx5_sim::packet::{Bth, Deth, Headers, opcode};
use mlx5_sim::profile::ShippedProfiles;
use mlx5_sim::wire::cm::{CmMsg, GSI_QKEY, GSI_QPN, MAD_LEN, Mad, Rep, Req, mraed, reason};
use mlx5_sim::wire::{Endpoints, encode};

use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq};

const NEEDS: &[Need] = &[Need::SimControl];

pub(super) const CASES: &[Case] = &[
    Case { name: "cm.mads_at_the_ibta_offsets", covers: &[231], needs: NEEDS, run: mad_offsets },
    Case { name: "cm.qp1_keeps_gsi_sends_for_the_cm", covers: &[232], needs: NEEDS, run: qp1 },
    Case { name: "cm.mra_at_the_ibta_offsets", covers: &[291], needs: NEEDS, run: mra_offsets },
];

/// The 32-bit big-endian word at byte `at` of the CM message (after the 24-byte MAD header).
fn word(b: &[u8; MAD_LEN], at: usize) -> u32 {
    let i = 24 + at;
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn mad_offsets(_b: &mut dyn Backend, _env: &Env) -> Check {
    let req = Req {
        local_comm_id: 0x0102_0304,
        service_id: 0x0000_0000_0106_1c06,
        local_qpn: 0x00ab_cdef,
        responder_resources: 1,
        initiator_depth: 2,
        starting_psn: 0x0012_3456,
        retry_count: 7,
        rnr_retry_count: 6,
        mtu: 5,
        private_data: vec![0xee; 92],
        ..Req::default()
    };
    let b = Mad { tid: 9, msg: CmMsg::Req(req) }.encode();
    check_eq("the MAD header: base version, class 0x07, version 2, Send", &b[..4], &[1, 7, 2, 3][..])?;
    check_eq("REQ's attribute ID", u16::from_be_bytes([b[16], b[17]]), 0x0010)?;
    check_eq("REQ: local communication ID at 0", word(&b, 0), 0x0102_0304)?;
    check_eq("REQ: service ID at 8", (u64::from(word(&b, 8)) << 32) | u64::from(word(&b, 12)), 0x0106_1c06)?;
    check_eq("REQ: local QPN and responder resources at 32", word(&b, 32), 0xabcd_ef01)?;
    check_eq("REQ: initiator depth at 39", b[24 + 39], 2)?;
    check_eq("REQ: starting PSN at 44 (24 bits)", word(&b, 44) >> 8, 0x12_3456)?;
    check_eq("REQ: retry count, the low 3 bits of 47", b[24 + 47] & 7, 7)?;
    check_eq("REQ: MTU and RNR retry count at 50", b[24 + 50], (5 << 4) | 6)?;
    check_eq("REQ: 92 bytes of private data at 140", &b[24 + 140..], &[0xee; 92][..])?;
    let rep = Rep { local_comm_id: 5, remote_comm_id: 6, local_qpn: 0x42, starting_psn: 0x77, ..Rep::default() };
    let b = Mad { tid: 9, msg: CmMsg::Rep(rep) }.encode();
    check_eq("REP's attribute ID", u16::from_be_bytes([b[16], b[17]]), 0x0013)?;
    check_eq("REP: the two communication IDs", (word(&b, 0), word(&b, 4)), (5, 6))?;
    check_eq("REP: local QPN at 12, starting PSN at 20", (word(&b, 12) >> 8, word(&b, 20) >> 8), (0x42, 0x77))?;
    let rej = CmMsg::Rej { local: 1, remote: 2, rejected: 0, reason: reason::INVALID_SERVICE_ID, private_data: vec![] };
    let b = Mad { tid: 9, msg: rej }.encode();
    check_eq(
        "REJ's attribute ID and reason at 10",
        (u16::from_be_bytes([b[16], b[17]]), word(&b, 8) & 0xffff),
        (0x0012, 8),
    )?;
    let b = Mad { tid: 9, msg: CmMsg::Dreq(3, 4, 0x99, vec![]) }.encode();
    check_eq(
        "DREQ: attribute 0x0015, remote QPN at 8",
        (u16::from_be_bytes([b[16], b[17]]), word(&b, 8) >> 8),
        (0x0015, 0x99),
    )?;
    let mut other = b;
    other[1] = 0x81;
    check("a MAD of another class is no CM MAD", Mad::decode(&other).is_none(), "None", "a CM message")
}

fn mra_offsets(_b: &mut dyn Backend, _env: &Env) -> Check {
    let mra = CmMsg::Mra {
        local: 0x0a0b_0c0d,
        remote: 0x0102_0304,
        mraed: mraed::REP,
        service_timeout: 24,
        private_data: vec![0x5a; 222],
    };
    let b = Mad { tid: 0x77, msg: mra.clone() }.encode();
    check_eq("MRA's attribute ID", u16::from_be_bytes([b[16], b[17]]), 0x0011)?;
    check_eq("MRA: the two communication IDs at 0 and 4", (word(&b, 0), word(&b, 4)), (0x0a0b_0c0d, 0x0102_0304))?;
    check_eq("MRA: the message MRAed in the top 2 bits of 8 (1: a REP)", b[24 + 8], 1 << 6)?;
    check_eq("MRA: the service timeout in the top 5 bits of 9", b[24 + 9], 24 << 3)?;
    check_eq("MRA: 222 bytes of private data at 10", &b[24 + 10..], &[0x5a; 222][..])?;
    check_eq("an MRA reads back", Mad::decode(&b), Some(Mad { tid: 0x77, msg: mra }))?;
    let mut lap = b;
    lap[16..18].copy_from_slice(&0x0019u16.to_be_bytes());
    check("a LAP (0x0019) is no message a RoCE CM handles", Mad::decode(&lap).is_none(), "None", "a CM message")
}

/// A RoCE v2 datagram from `from` to QP 1 of `to` with `qkey`, carrying `mad`.
fn to_qp1(from: Ipv4Addr, to: Ipv4Addr, qkey: u32, mad: &[u8]) -> Check<Vec<u8>> {
    let h = Headers {
        bth: Bth { opcode: opcode::UD_SEND_ONLY, pkey: 0xffff, dest_qp: GSI_QPN, ..Bth::default() },
        deth: Some(Deth { qkey, src_qp: GSI_QPN }),
        ..Headers::default()
    };
    let ep = Endpoints::new(IpAddr::V4(from), IpAddr::V4(to), 0xc000);
    encode(&h, mad, &ep).map_err(|e| Verdict::fail("encode a datagram to QP 1", "bytes", e))
}

fn qp1(_b: &mut dyn Backend, _env: &Env) -> Check {
    let profile = mlx5_dv::profile::Profile::builtin("cx6dx").map_err(|e| Verdict::fail("cx6dx", "a profile", e))?;
    let mut sim = mlx5_sim::Simulator::new(profile).map_err(|e| Verdict::fail("a simulator", "one", e))?;
    sim.carry_in_memory();
    let to = sim.fabric().net_port(0).map(|p| p.addr()).ok_or_else(|| Verdict::fail("port 0", "networked", "not"))?;
    let from = SocketAddrV4::new(Ipv4Addr::new(127, 0, 36, 2), 0xc000);
    let mad = Mad { tid: 1, msg: CmMsg::Rtu(1, 2, vec![]) }.encode();
    let drops = sim.network_drops();
    let good = to_qp1(*from.ip(), to, GSI_QKEY, &mad)?;
    check("a GSI SEND to QP 1 is taken", sim.receive_datagram(0, from, &good), "true", false)?;
    let kept = sim.fabric().take_gsi();
    check_eq("kept for the CM: the device, the sender, the MAD", kept, vec![(0, *from.ip(), mad.to_vec())])?;
    let bad = to_qp1(*from.ip(), to, 0x1234, &mad)?;
    check("a SEND to QP 1 with another Q_Key is refused", !sim.receive_datagram(0, from, &bad), "false", true)?;
    check_eq("nothing more for the CM", sim.fabric().take_gsi().len(), 0)?;
    let after = sim.network_drops();
    check_eq("the port counts one drop", after.first().copied().unwrap_or(0), drops.first().copied().unwrap_or(0) + 1)
}
