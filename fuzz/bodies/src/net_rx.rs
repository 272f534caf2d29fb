//! Arbitrary bytes arriving at a networked port as RoCE v2 UDP payloads
//! (`Simulator::receive_datagram`): each datagram is taken or dropped and counted, and nothing
//! lands outside a registered region with the right access.
//!
//! One simulator of two devices serves the process, its fabric in memory
//! (`Simulator::carry_in_memory`, no socket): device 0 is the port under test, device 1 its
//! peer, whose QPs device 0's are connected to, so answers travel to device 1 in simulated
//! time. Built once, it is the template each input's clone starts from, so inputs do not see
//! each other's PSNs, reassembly or posted work (the in-memory queues the clones share are
//! empty again when each call returns).

use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::sync::{Mutex, OnceLock};

use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, AhAttr, Buf, Gid, Mr, Qp, QpAttrExt, QpAttrMask as M, QpCap, QpDest, QpInitAttr, QpModify,
    QpState, RecvWr, SendFlags, Sge, WrOp,
};
use mlx5_sim::fabric::net::default_address;
use mlx5_sim::packet::{Aeth, Bth, Headers, Reth, opcode as op};
use mlx5_sim::wire::{self, Endpoints, WireError};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

/// Mode bit: each datagram's ICRC is computed afresh, after the other fix-ups.
pub const FIX_ICRC: u8 = 1;
/// Mode bit: each datagram's BTH names the QP its selector byte picks (its low 3 bits).
pub const PICK_QP: u8 = 2;
/// Mode bit: datagrams come from a host the QPs are not connected to.
pub const STRANGER: u8 = 4;
/// Mode bit: a RETH names the MR the selector's bits 3 to 5 pick, at the VA's low 12 bits.
pub const PICK_MR: u8 = 8;

/// The address of the rig's port, device 0 (the seeds' ICRCs cover it).
pub const NET_RX_ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 0, 66, 1);
/// The host number whose first address is [`NET_RX_ADDRESS`] (`default_address`).
const HOST: u32 = 4224;
/// The peer's address, device 1's: the QPs are connected to its QPs, answers go there.
const PEER: Ipv4Addr = Ipv4Addr::new(127, 0, 66, 2);
/// An address no port of the rig has: answers to it are lost.
const STRANGER_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 66, 3);
/// The UDP source port datagrams come from.
const SPORT: u16 = 0xc123;
/// At most this many datagrams per input; each at most what a port's socket reads.
const MAX_DATAGRAMS: usize = 64;
const MAX_DATAGRAM: usize = 4096 + 128;
/// Each buffer: an unregistered edge, the registered middle, an unregistered edge.
const BUF: usize = 6144;
const EDGE: usize = 1024;
const MID: usize = BUF - 2 * EDGE;
/// Each QP's receive WQE: its own slice of the receive MR.
const RECV_SLICE: usize = 768;
/// The READ the reading QP waits on: its length (three packets at a 256-byte MTU).
const READ_LEN: usize = 600;

/// Who may change a watched range of host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// Nothing from the network: unregistered, or registered without remote write.
    Nobody,
    /// A WRITE to a QP whose access flags allow remote writes.
    RemoteWrite,
    /// A SEND to QP `i` (its receive WQE).
    SendTo(usize),
    /// A READ response to QP `i` (the READ it waits on).
    ReadResponseTo(usize),
}

/// Watched ranges of a buffer: (offset, length, who may change it).
type Ranges = Vec<(usize, usize, Who)>;

/// A QP of the rig and what it lets in.
struct RigQp {
    qp: Qp,
    /// Remote writes allowed by its access flags (and it is in RTR or RTS).
    remote_write: bool,
    /// In RTR or RTS: it takes requests.
    ready: bool,
}

/// The template simulator and what was made on it.
struct Rig {
    sim: Simulator,
    /// Device 0's QPs (those under test).
    qps: Vec<RigQp>,
    /// The MRs a RETH may be pointed at: remote write and read, remote read only, local only,
    /// the receive MR, the READ's destination.
    mrs: Vec<Mr>,
    /// Each buffer and its watched ranges.
    bufs: Vec<(Buf, Ranges)>,
}

/// The rig's QPs: (access, state, path MTU as `enum ibv_mtu`).
const QPS: [(A, QpState, u32); 5] = [
    // 0: remote write and read; waits for the ACK of a WRITE it sent.
    (A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ), QpState::Rts, 1),
    // 1: remote read only; waits for the response to a READ it sent.
    (A::REMOTE_READ, QpState::Rts, 1),
    // 2: no remote access.
    (A::empty(), QpState::Rts, 5),
    // 3: remote write, receive side only.
    (A::LOCAL_WRITE.union(A::REMOTE_WRITE), QpState::Rtr, 3),
    // 4: not ready (INIT): takes nothing.
    (A::LOCAL_WRITE.union(A::REMOTE_WRITE), QpState::Init, 3),
];

fn err(what: &str) -> impl Fn(mlx5_dv::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Move `qp` from RESET to `to` towards QP `peer_qpn` of the port whose GID is `dgid`, PSNs 0,
/// no ACK timeout (a WQE waits for its answer without resending: the clock must not matter).
fn connect(
    sim: &mut Simulator,
    qp: &Qp,
    access: A,
    to: QpState,
    mtu: u32,
    dgid: Gid,
    peer_qpn: u32,
) -> Result<(), String> {
    let ext = QpAttrExt { timeout: 0, ..QpAttrExt::defaults() };
    // GID index 1: GID 0 as RoCE v2 (a fabric in memory keeps the ports' GIDs).
    let ah = AhAttr { dlid: 0, is_global: true, dgid, sgid_index: 1, hop_limit: 64, port_num: 1 };
    let dest = QpDest { dest_qp_num: peer_qpn, ah, path_mtu: mtu };
    let init = M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
    let rtr = M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER;
    let rts = M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC;
    let steps = [(QpState::Init, None, init), (QpState::Rtr, Some(dest), rtr), (QpState::Rts, None, rts)];
    for (state, dest, mask) in steps {
        sim.modify_qp(qp, &QpModify::exact(state, access, dest, QpAttrExt { mask, ..ext })).map_err(err("modify"))?;
        if state == to {
            break;
        }
    }
    Ok(())
}

/// The bytes each buffer starts with: distinct per buffer, no zeros.
fn pattern(i: usize) -> Vec<u8> {
    (0..BUF).map(|j| ((i * 37 + j * 7) % 251 + 1) as u8).collect()
}

impl Rig {
    /// Make the two devices' QPs, and device 0's MRs and buffers, on a fabric in memory.
    fn build() -> Result<Rig, String> {
        let mut profile = Profile::builtin("cx6dx").map_err(|e| e.to_string())?;
        // Two ports (no VFIO function: a third would take the stranger's address).
        profile.device.count = 2;
        profile.device.vfio_pci_name = None;
        let names = profile.device_names();
        let (Some(name0), Some(name1)) = (names.first(), names.get(1)) else { return Err("two devices".into()) };
        if default_address(HOST) != NET_RX_ADDRESS || u32::from(NET_RX_ADDRESS) + 1 != u32::from(PEER) {
            return Err(format!("host {HOST} is at {}, not at {NET_RX_ADDRESS}", default_address(HOST)));
        }
        let mut sim = Simulator::with_host(profile, HOST).map_err(err("simulator"))?;
        sim.carry_in_memory();
        let ctx = sim.open_ibv_device(name0).map_err(err("open"))?;
        let pd = sim.alloc_pd(ctx).map_err(err("pd"))?;
        let cq = sim.create_cq(ctx, 64).map_err(err("cq"))?;
        // The peer: a QP for each of device 0's, with no remote access and nothing posted.
        let peer_ctx = sim.open_ibv_device(name1).map_err(err("open the peer"))?;
        let peer_pd = sim.alloc_pd(peer_ctx).map_err(err("peer pd"))?;
        let peer_cq = sim.create_cq(peer_ctx, 64).map_err(err("peer cq"))?;
        let gid = |sim: &mut Simulator, ctx| sim.query_port(ctx, 1).map(|p| p.gid).map_err(err("query_port"));
        let (gid0, gid1) = (gid(&mut sim, ctx)?, gid(&mut sim, peer_ctx)?);
        let mut bufs = Vec::new();
        // rw, ro, local, recv, read destination: each a buffer with an MR over its middle.
        let access = [A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ, A::REMOTE_READ, A::LOCAL_WRITE];
        let access = [access[0], access[1], access[2], A::LOCAL_WRITE, A::LOCAL_WRITE];
        let mut mrs = Vec::new();
        for (i, a) in access.into_iter().enumerate() {
            let buf = sim.alloc_buf(BUF).map_err(err("buffer"))?;
            sim.write_buf(&buf, 0, &pattern(i)).map_err(err("fill"))?;
            mrs.push(sim.reg_mr(pd, buf.addr + EDGE as u64, MID as u64, a).map_err(err("mr"))?);
            let mid: Ranges = match i {
                0 => vec![(EDGE, MID, Who::RemoteWrite)],
                3 => (0..QPS.len()).map(|q| (EDGE + q * RECV_SLICE, RECV_SLICE, Who::SendTo(q))).collect(),
                4 => vec![(EDGE, READ_LEN, Who::ReadResponseTo(1))],
                _ => vec![],
            };
            let mut ranges = vec![(0, BUF, Who::Nobody)];
            ranges.extend(mid);
            bufs.push((buf, ranges));
        }
        // The canary: host memory never registered.
        let canary = sim.alloc_buf(BUF).map_err(err("canary"))?;
        sim.write_buf(&canary, 0, &pattern(9)).map_err(err("fill"))?;
        bufs.push((canary, vec![(0, BUF, Who::Nobody)]));
        let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let peers = (0..QPS.len())
            .map(|_| sim.create_qp(&QpInitAttr::rc(peer_pd, peer_cq.handle, cap, None)).map_err(err("peer qp")))
            .collect::<Result<Vec<Qp>, String>>()?;
        let mut qps = Vec::new();
        for (i, ((access, state, mtu), peer)) in QPS.into_iter().zip(&peers).enumerate() {
            let qp = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, None)).map_err(err("qp"))?;
            connect(&mut sim, &qp, access, state, mtu, gid1, peer.qp_num)?;
            let slice = mrs[3].addr + (i * RECV_SLICE) as u64;
            let sge = vec![Sge { addr: slice, length: RECV_SLICE as u32, lkey: mrs[3].lkey }];
            sim.post_recv(&qp, &[RecvWr { wr_id: i as u64, sge }]).map_err(err("post_recv"))?;
            let ready = state != QpState::Init;
            qps.push(RigQp { qp, remote_write: ready && access.contains(A::REMOTE_WRITE), ready });
        }
        let (local, dst) = (&mrs[2], &mrs[4]);
        let write = WrOp::RdmaWrite {
            wr_id: 100,
            flags: SendFlags::SIGNALED,
            rkey: 0x1234,
            remote_addr: 0x10_0000,
            sge: vec![Sge { addr: local.addr, length: 16, lkey: local.lkey }],
        };
        sim.post_send(&qps[0].qp, &[write]).map_err(err("post write"))?;
        let read = WrOp::RdmaRead {
            wr_id: 101,
            flags: SendFlags::SIGNALED,
            rkey: 0x5678,
            remote_addr: 0x20_0000,
            sge: vec![Sge { addr: dst.addr, length: READ_LEN as u32, lkey: dst.lkey }],
        };
        sim.post_send(&qps[1].qp, &[read]).map_err(err("post read"))?;
        // The WRITE and the READ reached the peer's QPs in RESET, which dropped them: with no
        // ACK timeout they wait for an answer without end. Only now are the peer's QPs ready
        // (they answer a request sent again, and drop the answers they wait for none of).
        for ((_, _, mtu), (peer, rig)) in QPS.into_iter().zip(peers.iter().zip(&qps)) {
            connect(&mut sim, peer, A::empty(), QpState::Rts, mtu, gid0, rig.qp.qp_num)?;
        }
        if sim.poll_cq(&cq, 4).map_err(err("poll"))?.len() + sim.poll_cq(&peer_cq, 4).map_err(err("poll"))?.len() != 0 {
            return Err("the WRITE and the READ do not wait".into());
        }
        if sim.network_drops() != [0, 2] {
            return Err(format!("the peer did not drop the WRITE and the READ alone: {:?}", sim.network_drops()));
        }
        Ok(Rig { sim, qps, mrs, bufs })
    }

    /// The rig of this process, built on first use.
    fn get() -> &'static Mutex<Rig> {
        static RIG: OnceLock<Result<Mutex<Rig>, String>> = OnceLock::new();
        match RIG.get_or_init(|| Rig::build().map(Mutex::new)) {
            Ok(r) => r,
            Err(e) => panic!("the net_rx rig could not be built: {e}"),
        }
    }
}

/// What the port rebuilds from a datagram's source for its ICRC.
fn endpoints(from: SocketAddrV4) -> Endpoints {
    Endpoints::new(IpAddr::V4(*from.ip()), IpAddr::V4(NET_RX_ADDRESS), from.port())
}

/// Put the ICRC the port expects at the end of `d`: the wire module's over the IPv4 and UDP
/// headers `ep` gives (the fields the ICRC masks left zero) and the rest of the datagram.
fn fix_icrc(d: &mut [u8], ep: &Endpoints) {
    let Some(body) = d.len().checked_sub(4) else { return };
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (ep.src, ep.dst) else { return };
    let total = (20 + 8 + d.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let mut udp = [0u8; 8];
    udp[0..2].copy_from_slice(&ep.sport.to_be_bytes());
    udp[2..4].copy_from_slice(&ep.dport.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + d.len()) as u16).to_be_bytes());
    let crc = wire::icrc(&ip, &udp, &d[..body]);
    d[body..].copy_from_slice(&crc.to_le_bytes());
}

/// Apply the mode's fix-ups to one datagram.
fn fix_up(rig: &Rig, mode: u8, sel: u8, d: &mut [u8], ep: &Endpoints) {
    if mode & PICK_QP != 0
        && let Some(qpn) = d.get_mut(5..8)
    {
        let q = &rig.qps[usize::from(sel & 7) % rig.qps.len()].qp;
        qpn.copy_from_slice(&q.qp_num.to_be_bytes()[1..]);
    }
    let has_reth =
        matches!(d.first(), Some(&(op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM | op::READ_REQUEST)));
    if mode & PICK_MR != 0
        && has_reth
        && let Some(reth) = d.get_mut(12..24)
    {
        let mr = &rig.mrs[usize::from(sel >> 3 & 7) % rig.mrs.len()];
        let low = u64::from(u16::from_be_bytes([reth[6], reth[7]]) & 0xfff);
        reth[..8].copy_from_slice(&(mr.addr + low).to_be_bytes());
        reth[8..12].copy_from_slice(&mr.rkey.to_be_bytes());
    }
    if mode & FIX_ICRC != 0 {
        fix_icrc(d, ep);
    }
}

/// Whether `who` may change memory for a datagram that decoded to `h`.
fn may_change(rig: &Rig, who: Who, h: Option<&Headers>) -> bool {
    let Some(h) = h else { return false };
    let Some(i) = rig.qps.iter().position(|q| q.qp.qp_num == h.bth.dest_qp) else { return false };
    let o = h.bth.opcode;
    match who {
        Who::Nobody => false,
        Who::RemoteWrite => rig.qps[i].remote_write && (op::WRITE_FIRST..=op::WRITE_ONLY_IMM).contains(&o),
        Who::SendTo(q) => {
            let send = o <= op::SEND_ONLY_IMM || matches!(o, op::SEND_LAST_INV | op::SEND_ONLY_INV);
            q == i && rig.qps[i].ready && send
        }
        Who::ReadResponseTo(q) => q == i && (op::READ_RESPONSE_FIRST..=op::READ_RESPONSE_ONLY).contains(&o),
    }
}

/// Datagrams the rig's port dropped so far.
fn dropped(sim: &Simulator) -> u64 {
    sim.network_drops().first().copied().unwrap_or(0)
}

/// The watched buffers' bytes.
fn snapshot(sim: &mut Simulator, rig: &Rig) -> Vec<Vec<u8>> {
    rig.bufs.iter().map(|(b, _)| sim.read_buf(b, 0, BUF).unwrap_or_default()).collect()
}

/// Feed the input's datagrams to a fresh clone of the rig; for each, whether it was taken.
fn run(data: &[u8]) -> Vec<bool> {
    let Some((&mode, mut rest)) = data.split_first() else { return Vec::new() };
    let rig = Rig::get().lock().unwrap_or_else(|p| p.into_inner());
    let mut sim = rig.sim.clone();
    let from = SocketAddrV4::new(if mode & STRANGER != 0 { STRANGER_ADDR } else { PEER }, SPORT);
    let ep = endpoints(from);
    let mut before = snapshot(&mut sim, &rig);
    let mut taken = Vec::new();
    while taken.len() < MAX_DATAGRAMS && rest.len() >= 3 {
        let (len, sel) = (usize::from(u16::from_le_bytes([rest[0], rest[1]])), rest[2]);
        let (d, r) = rest[3..].split_at(len.min(rest.len() - 3).min(MAX_DATAGRAM));
        rest = r;
        let mut d = d.to_vec();
        fix_up(&rig, mode, sel, &mut d, &ep);
        let decoded = wire::decode(&d, &ep);
        if mode & FIX_ICRC != 0 && d.len() >= 16 && d.len().is_multiple_of(4) {
            assert!(!matches!(decoded, Err(WireError::BadIcrc { .. })), "the fixed-up ICRC is the port's");
        }
        let drops = dropped(&sim);
        let ok = sim.receive_datagram(0, from, &d);
        let counted = dropped(&sim).wrapping_sub(drops);
        assert_eq!(counted, u64::from(!ok), "datagram {}: taken {ok}, yet {counted} drops counted", taken.len());
        assert!(decoded.is_ok() || !ok, "datagram {}: taken though it does not decode: {decoded:?}", taken.len());
        let after = snapshot(&mut sim, &rig);
        let h = decoded.as_ref().ok().map(|d| &d.headers);
        for (((buf, ranges), old), new) in rig.bufs.iter().zip(&before).zip(&after) {
            if old == new {
                continue;
            }
            // A byte may change when a range over it lets this datagram change it.
            let wrong = (0..BUF).find(|&j| {
                old.get(j) != new.get(j)
                    && !ranges.iter().any(|&(a, l, who)| (a..a + l).contains(&j) && may_change(&rig, who, h))
            });
            if let Some(j) = wrong {
                panic!("datagram {} ({h:?}) changed byte {j} of the buffer at {:#x}", taken.len(), buf.addr);
            }
        }
        before = after;
        taken.push(ok);
    }
    taken
}

/// The input's bytes as datagrams (see [`net_rx_seeds`] for the format) reaching a clone of
/// the process's networked rig; a panic is a finding.
pub fn net_rx(data: &[u8]) {
    run(data);
}

/// Whether each datagram of an input was taken (not dropped), for the seeds' test.
pub fn net_rx_taken(data: &[u8]) -> Vec<bool> {
    run(data)
}

/// The hand-made seeds of `fuzz/corpus/net_rx`, by name: valid packets to the rig's QPs and
/// MRs. An input is a mode byte ([`FIX_ICRC`], [`PICK_QP`], [`STRANGER`], [`PICK_MR`]), then
/// datagrams, each a little-endian `u16` length, a selector byte (bits 0 to 2: the QP; 3 to
/// 5: the MR) and the UDP payload (a length past the input's end takes the rest).
pub fn net_rx_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let rig = Rig::get().lock().unwrap_or_else(|p| p.into_inner());
    let ep = endpoints(SocketAddrV4::new(PEER, SPORT));
    let bth = |opcode, qp: usize, psn| Bth { opcode, dest_qp: rig.qps[qp].qp.qp_num, psn, ..Bth::default() };
    let reth =
        |mr: usize, off: u64, dma_len| Some(Reth { va: rig.mrs[mr].addr + off, rkey: rig.mrs[mr].rkey, dma_len });
    // (headers, payload length, QP index, MR index)
    type Pkt = (Headers, usize, usize, usize);
    let pkt = |bth: Bth, reth: Option<Reth>, aeth: Option<Aeth>, imm: Option<u32>, len, qp, mr| -> Pkt {
        (Headers { bth, reth, aeth, imm, ieth: None, deth: None }, len, qp, mr)
    };
    let write = |qp, mr| vec![pkt(bth(op::WRITE_ONLY, qp, 0), reth(mr, 16, 32), None, None, 32, qp, mr)];
    let seeds: Vec<(&'static str, u8, Vec<Pkt>)> = vec![
        ("write-only-to-rw-mr", 0, write(0, 0)),
        ("write-only-to-ro-mr-nak", 0, write(0, 1)),
        ("write-only-on-qp-without-access-nak", 0, write(2, 0)),
        (
            "write-only-imm-on-rtr-qp",
            0,
            vec![pkt(bth(op::WRITE_ONLY_IMM, 3, 0), reth(0, 0, 8), None, Some(7), 8, 3, 0)],
        ),
        ("write-only-to-init-qp", 0, write(4, 0)),
        ("send-only", 0, vec![pkt(bth(op::SEND_ONLY, 0, 0), None, None, None, 24, 0, 0)]),
        (
            "send-only-imm-from-stranger",
            STRANGER,
            vec![pkt(bth(op::SEND_ONLY_IMM, 2, 0), None, None, Some(9), 5, 2, 0)],
        ),
        ("read-request", 0, vec![pkt(bth(op::READ_REQUEST, 0, 0), reth(1, 0, 300), None, None, 0, 0, 1)]),
        (
            "write-first-middle-last",
            0,
            vec![
                pkt(bth(op::WRITE_FIRST, 0, 0), reth(0, 0, 576), None, None, 256, 0, 0),
                pkt(bth(op::WRITE_MIDDLE, 0, 1), None, None, None, 256, 0, 0),
                pkt(bth(op::WRITE_LAST, 0, 2), None, None, None, 64, 0, 0),
            ],
        ),
        (
            "send-first-middle-last",
            0,
            vec![
                pkt(bth(op::SEND_FIRST, 0, 0), None, None, None, 256, 0, 0),
                pkt(bth(op::SEND_MIDDLE, 0, 1), None, None, None, 256, 0, 0),
                pkt(bth(op::SEND_LAST, 0, 2), None, None, None, 100, 0, 0),
            ],
        ),
        ("ack-of-the-write", 0, vec![pkt(bth(op::ACKNOWLEDGE, 0, 0), None, Some(Aeth::ack(1)), None, 0, 0, 0)]),
        (
            "read-response-first-middle-last",
            0,
            vec![
                pkt(bth(op::READ_RESPONSE_FIRST, 1, 0), None, Some(Aeth::ack(0)), None, 256, 1, 0),
                pkt(bth(op::READ_RESPONSE_MIDDLE, 1, 1), None, None, None, 256, 1, 0),
                pkt(bth(op::READ_RESPONSE_LAST, 1, 2), None, Some(Aeth::ack(1)), None, 88, 1, 0),
            ],
        ),
    ];
    seeds
        .into_iter()
        .map(|(name, extra, pkts)| {
            let mut input = vec![FIX_ICRC | PICK_QP | PICK_MR | extra];
            let from = SocketAddrV4::new(if extra & STRANGER != 0 { STRANGER_ADDR } else { PEER }, SPORT);
            let ep = if extra & STRANGER != 0 { endpoints(from) } else { ep };
            for (i, (h, len, qp, mr)) in pkts.into_iter().enumerate() {
                let payload: Vec<u8> = (0..len).map(|j| (j as u8).wrapping_mul(13).wrapping_add(i as u8)).collect();
                let d = wire::encode(&h, &payload, &ep).unwrap_or_default();
                input.extend_from_slice(&(d.len() as u16).to_le_bytes());
                input.push(qp as u8 | (mr as u8) << 3);
                input.extend_from_slice(&d);
            }
            (name, input)
        })
        .collect()
}
