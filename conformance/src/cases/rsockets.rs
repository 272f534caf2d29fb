//! The rsockets protocol of the C ABI's librdmacm (items 241–244, 320): the private data of
//! the connection, the immediate data of each message, the credits that bound a sender, the
//! IO map message of `riomap`, and the two headers of datagram rsockets. The sockets themselves (rstream, riostream, errnos) are C
//! behaviour, checked by `capi/tests/rsockets.c` and `two_processes_rsockets.sh`. The cases
//! check the simulator's protocol code, so they need the simulator (skipped on hardware).

use mlx5_dv::Backend;
use std::net::{Ipv4Addr, SocketAddrV4};

use mlx5_sim::wire::rsocket::{
    CONN_DATA_LEN, ConnData, ConnDataError, Credits, IOMAP_LEN, IoMap, MAX_RETURN, Op, VERSION, imm, parse_imm,
};
use mlx5_sim::wire::rsocket_dgram::{DS_HDR_LEN, DsHdr, OP_CTRL, OP_DATA, SLOT, UDP_HDR_LEN, UdpHdr};

use crate::case::{Case, Check, Env, Need, check, check_eq};

const NEEDS: &[Need] = &[Need::SimControl];

pub(super) const CASES: &[Case] = &[
    Case { name: "rsocket.private_data_layout", covers: &[241], needs: NEEDS, run: private_data },
    Case { name: "rsocket.immediate_data_op_and_credits", covers: &[242], needs: NEEDS, run: immediate },
    Case { name: "rsocket.credits_keep_the_last_for_returns", covers: &[243], needs: NEEDS, run: credits },
    Case { name: "rsocket.iomap_message_and_slots", covers: &[244], needs: NEEDS, run: iomap },
    Case { name: "rsocket.datagram_headers", covers: &[320], needs: NEEDS, run: datagram_headers },
];

fn private_data(_b: &mut dyn Backend, _env: &Env) -> Check {
    let d = ConnData { credits: 0x0140, iomap: 3, seg: 0x2000 };
    let p = d.encode();
    check_eq("the private data's length", p.len(), CONN_DATA_LEN)?;
    check_eq("version 1 first, then flags 0", (p[0], p[1]), (VERSION, 0))?;
    check_eq("credits big-endian at 2", (p[2], p[3]), (0x01, 0x40))?;
    check_eq("3 reserved bytes, the IO map count at 7", &p[4..8], &[0, 0, 0, 3][..])?;
    check_eq("the receive buffers' size big-endian at 8", &p[8..], &[0, 0, 0x20, 0][..])?;
    let mut padded = p.to_vec();
    padded.extend_from_slice(&[0; 40]);
    check_eq("read back (with the CM's padding after it)", ConnData::decode(&padded), Ok(d))?;
    let mut other = p;
    other[0] = 2;
    check_eq("another version is refused", ConnData::decode(&other), Err(ConnDataError::Version(2)))?;
    check_eq("short data is refused", ConnData::decode(&p[..CONN_DATA_LEN - 1]), Err(ConnDataError::Short))
}

fn immediate(_b: &mut dyn Backend, _env: &Env) -> Check {
    check_eq("data returning 5 credits", imm(Op::Data, 5), 0x0000_0005)?;
    check_eq("credits only, 64", imm(Op::Credit, 64), 0x1000_0040)?;
    check_eq("shutdown", imm(Op::Shutdown, 0), 0x2000_0000)?;
    check_eq("an IO map", imm(Op::IoMap, 1), 0x3000_0001)?;
    check_eq("credits past 28 bits are capped", imm(Op::Data, usize::MAX), MAX_RETURN as u32)?;
    for op in [Op::Data, Op::Credit, Op::Shutdown, Op::IoMap] {
        check_eq("parsed back", parse_imm(imm(op, 77)), (op, 77))?;
    }
    check_eq("an operation this version does not know", parse_imm(0x7000_0002), (Op::Unknown(7), 2))
}

/// Deliver `n` messages that return `returned` credits, the first, to `to`.
fn deliver(to: &mut Credits, returns: &[usize]) {
    for &r in returns {
        to.received(r);
    }
}

fn credits(_b: &mut dyn Backend, _env: &Env) -> Check {
    // One way: data stops with one credit left, which still returns credits.
    let (mut a, mut b) = (Credits::new(8, 8), Credits::new(8, 8));
    let mut sent = Vec::new();
    while a.can_send_data() {
        sent.push(a.spend().unwrap_or(usize::MAX));
    }
    check_eq("data spends all but the last credit", (sent.len(), a.credits), (7, 1))?;
    check("the last credit is for control messages", a.can_send_ctrl(), "a credit", a)?;
    deliver(&mut b, &sent);
    for _ in 0..7 {
        b.reposted();
    }
    check("7 of 8 receives owed: a credit message is due", b.credit_due(), "due", b)?;
    let back = b.spend();
    check_eq("the credit message returns all 7", back, Some(7))?;
    deliver(&mut a, &[7]);
    check_eq("the sender has 8 again", a.credits, 8)?;
    check_eq("nothing owed after", b.owed, 0)?;
    // Both ways at once: each fills the other, consumes all, and the last credits return them.
    let (mut a, mut b) = (Credits::new(4, 4), Credits::new(4, 4));
    let (mut to_b, mut to_a) = (Vec::new(), Vec::new());
    while a.can_send_data() {
        to_b.push(a.spend().unwrap_or(usize::MAX));
    }
    while b.can_send_data() {
        to_a.push(b.spend().unwrap_or(usize::MAX));
    }
    deliver(&mut a, &to_a);
    deliver(&mut b, &to_b);
    for _ in 0..to_a.len() {
        a.reposted();
    }
    for _ in 0..to_b.len() {
        b.reposted();
    }
    check("both out of data credits, both due to return", a.credit_due() && b.credit_due(), "due", (a, b))?;
    let (ra, rb) = (a.spend(), b.spend());
    check_eq("each returns with its last credit", (ra, rb), (Some(3), Some(3)))?;
    deliver(&mut a, &[rb.unwrap_or(0)]);
    deliver(&mut b, &[ra.unwrap_or(0)]);
    check("both may send data again", a.can_send_data() && b.can_send_data(), "both", (a, b))?;
    let mut empty = Credits::new(4, 0);
    check_eq("no credit: no message", empty.spend(), None)
}

fn iomap(_b: &mut dyn Backend, _env: &Env) -> Check {
    let m = IoMap { index: 2, offset: 0x1000, addr: 0x7f00_1234_5000, rkey: 0xabcd, len: 0x4000 };
    let b = m.encode();
    check_eq("the message's length", b.len(), IOMAP_LEN)?;
    check_eq("the offset at 0", &b[..8], &0x1000u64.to_be_bytes()[..])?;
    check_eq("the address at 8", &b[8..16], &0x7f00_1234_5000u64.to_be_bytes()[..])?;
    check_eq("the rkey at 16, the length at 20", &b[16..24], &[0, 0, 0xab, 0xcd, 0, 0, 0x40, 0][..])?;
    check_eq("the slot at 24", &b[24..28], &[0, 0, 0, 2][..])?;
    check_eq("read back", IoMap::decode(&b), Some(m))?;
    check_eq("a short message is none", IoMap::decode(&b[..IOMAP_LEN - 1]), None)?;
    check("the map holds its first offset", m.holds(0x1000), "holds", m)?;
    check("and its last", m.holds(0x4fff), "holds", m)?;
    check("not the offset after it", !m.holds(0x5000), "not", m)?;
    check("nor the one before", !m.holds(0xfff), "not", m)
}

fn datagram_headers(_b: &mut dyn Backend, _env: &Env) -> Check {
    let a = SocketAddrV4::new(Ipv4Addr::new(127, 0, 45, 1), 7174);
    let h = DsHdr(a).encode();
    check_eq("the QP message's header: 8 bytes", h.len(), DS_HDR_LEN)?;
    check_eq("version 4, length 8, the port, the address", h, [4, 8, 0x1c, 0x06, 127, 0, 45, 1])?;
    check_eq("read back", DsHdr::decode(&h), Some(DsHdr(a)))?;
    check_eq("an IPv6 header (version 6, 24 bytes) is none here", DsHdr::decode(&[6, 24, 0, 0, 0, 0, 0, 0]), None)?;
    check_eq("a version 4 header of another length is none", DsHdr::decode(&[4, 24, 0, 0, 0, 0, 0, 0]), None)?;
    check_eq("seven bytes are none", DsHdr::decode(&h[..7]), None)?;
    check_eq("a slot: 2048 bytes, the header's and the data's", SLOT, 2048)?;
    let u = UdpHdr { op: OP_DATA, qpn: 0x12_3456, ip: *a.ip() };
    let b = u.encode();
    check_eq("the UDP header: 16 bytes", b.len(), UDP_HDR_LEN)?;
    check_eq(
        "tag 0x55555555, version 4, DATA (0), length 16, reserved",
        &b[..8],
        &[0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0][..],
    )?;
    check_eq("the QP number in 24 of 32 bits, then the address", &b[8..], &[0, 0x12, 0x34, 0x56, 127, 0, 45, 1][..])?;
    check_eq("read back", UdpHdr::decode(&b), Some(u))?;
    let ctrl = UdpHdr { op: OP_CTRL, qpn: 0xff12_3456, ip: *a.ip() }.encode();
    check_eq(
        "CTRL is 7; a QP number's top 8 bits are not sent",
        (ctrl[5], &ctrl[8..12]),
        (7, &[0, 0x12, 0x34, 0x56][..]),
    )?;
    let mut other = b;
    other[3] = 0x54;
    check_eq("another tag is none", UdpHdr::decode(&other), None)?;
    check_eq("fifteen bytes are none", UdpHdr::decode(&b[..15]), None)
}
