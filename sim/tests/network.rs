//! Two simulators in one process, each on the network at an address of its own, with RC QPs
//! connected to each other by GID: WRITE, SEND and READ carried as RoCE v2 over UDP, with and
//! without network fault rules (`Simulator::add_network_fault`) on what either sends.
//!
//! Each test takes addresses of its own (127.0.N.1, N from 77 up) so that tests running in
//! parallel never share a socket; both simulators are driven by `tick()` in a loop bounded by
//! iterations and by a wall-clock deadline.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, Buf, Cq, Mr, PdHandle, Qp, QpAttrExt, QpAttrMask as M, QpCap, QpDest, QpInitAttr, QpModify,
    QpState, RecvWr, SendFlags, Sge, Wc, WrOp, wc_opcode, wc_status,
};
use mlx5_sim::fabric::{NetAction, NetFault};
use mlx5_sim::packet::opcode;
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ).union(A::REMOTE_ATOMIC);
/// `IBV_MTU_256`: a message of a few hundred bytes takes several packets.
const MTU_256: u32 = 1;
/// `IBV_MTU_4096`: the largest packets a port sends.
const MTU_4096: u32 = 5;
/// The ACK timeout: 4.096 µs × 2^8, about 1 ms.
const TIMEOUT: u8 = 8;
/// How long any exchange may take before the test fails rather than hang.
const DEADLINE: Duration = Duration::from_secs(10);

/// One simulated host on the network: its simulator, a PD, a CQ and an RC QP.
struct Side {
    sim: Simulator,
    ctx: mlx5_dv::ContextHandle,
    pd: PdHandle,
    cq: Cq,
    qp: Qp,
}

/// Two hosts whose QPs are connected to each other: `a` at 127.0.`n`.1, `b` at 127.0.`n+1`.1.
struct Pair {
    a: Side,
    b: Side,
}

fn side(host: u32, addr: Ipv4Addr) -> Side {
    let mut sim = Simulator::with_host(Profile::builtin("cx6dx").unwrap(), host).unwrap();
    sim.connect_network(addr).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 1024).unwrap();
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, None)).unwrap();
    Side { sim, ctx, pd, cq, qp }
}

/// Connect `s.qp` to `peer` (on the other simulator, whose GID 3 is the IPv4-mapped RoCE v2
/// GID of its address) with a short ACK timeout and `retry_cnt` retries.
fn connect(s: &mut Side, peer: &Qp, peer_gid: mlx5_dv::Gid, retry_cnt: u8, rd_atomic: u8, mtu: u32) {
    let mut dest = QpDest::to(peer, &s.sim.query_port(s.ctx, 1).unwrap());
    dest.ah.dgid = peer_gid;
    dest.ah.sgid_index = 3;
    dest.ah.hop_limit = 64;
    dest.path_mtu = mtu;
    let ext = QpAttrExt {
        timeout: TIMEOUT,
        retry_cnt,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: rd_atomic,
        max_dest_rd_atomic: rd_atomic,
        ..QpAttrExt::defaults()
    };
    for (from, to, dest) in [
        (QpState::Reset, QpState::Init, None),
        (QpState::Init, QpState::Rtr, Some(dest)),
        (QpState::Rtr, QpState::Rts, None),
    ] {
        // What the kernel requires of the transition, and nothing else.
        let (required, _) = mlx5_dv::qp_transition(mlx5_dv::qp_type::RC, from, to).unwrap();
        let ext = QpAttrExt { mask: M::STATE | required, ..ext };
        s.sim.modify_qp(&s.qp, &QpModify::exact(to, ACCESS, dest, ext)).unwrap();
    }
}

fn pair(n: u8, retry_cnt: u8) -> Pair {
    pair_with(n, retry_cnt, 1)
}

/// Two hosts whose QPs allow `rd_atomic` outstanding READs and atomics each way.
fn pair_with(n: u8, retry_cnt: u8, rd_atomic: u8) -> Pair {
    pair_mtu(n, retry_cnt, rd_atomic, MTU_256)
}

/// [`pair_with`] with path MTU `mtu` (`enum ibv_mtu`).
fn pair_mtu(n: u8, retry_cnt: u8, rd_atomic: u8, mtu: u32) -> Pair {
    let (mut a, mut b) =
        (side(u32::from(n), Ipv4Addr::new(127, 0, n, 1)), side(u32::from(n) + 1, Ipv4Addr::new(127, 0, n + 1, 1)));
    let (ga, gb) = (a.sim.gid_table(0)[3].0, b.sim.gid_table(0)[3].0);
    let (qa, qb) = (a.qp, b.qp);
    connect(&mut a, &qb, gb, retry_cnt, rd_atomic, mtu);
    connect(&mut b, &qa, ga, retry_cnt, rd_atomic, mtu);
    Pair { a, b }
}

/// A buffer and its MR.
struct Region {
    buf: Buf,
    mr: Mr,
}

/// A registered buffer holding `data`.
fn region(s: &mut Side, data: &[u8]) -> Region {
    let buf = s.sim.alloc_buf(data.len()).unwrap();
    s.sim.write_buf(&buf, 0, data).unwrap();
    let mr = s.sim.reg_mr(s.pd, buf.addr, data.len() as u64, ACCESS).unwrap();
    Region { buf, mr }
}

fn read(s: &mut Side, r: &Region, len: usize) -> Vec<u8> {
    s.sim.read_buf(&r.buf, 0, len).unwrap()
}

fn sge(r: &Region, off: u64, len: usize) -> Vec<Sge> {
    vec![Sge { addr: r.mr.addr + off, length: len as u32, lkey: r.mr.lkey }]
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Tick both simulators until `a` has `want_a` completions and `b` `want_b` (or the deadline
/// passes): the completions each polled, in order.
fn drive(p: &mut Pair, want_a: usize, want_b: usize) -> (Vec<Wc>, Vec<Wc>) {
    let start = Instant::now();
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    for _ in 0..50_000_000u64 {
        let moved = p.a.sim.tick() | p.b.sim.tick();
        ca.extend(p.a.sim.poll_cq(&p.a.cq, 64).unwrap());
        cb.extend(p.b.sim.poll_cq(&p.b.cq, 64).unwrap());
        if (ca.len() >= want_a && cb.len() >= want_b) || start.elapsed() > DEADLINE {
            break;
        }
        if !moved {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    // A little longer: a completion too many would show.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(5) {
        p.a.sim.tick();
        p.b.sim.tick();
        ca.extend(p.a.sim.poll_cq(&p.a.cq, 64).unwrap());
        cb.extend(p.b.sim.poll_cq(&p.b.cq, 64).unwrap());
    }
    (ca, cb)
}

fn ok(wc: &[Wc], ids: &[u64]) {
    assert!(wc.iter().all(|c| c.status == wc_status::SUCCESS), "{wc:?}");
    assert_eq!(wc.iter().map(|c| c.wr_id).collect::<Vec<_>>(), ids, "one completion per WR, in order: {wc:?}");
}

/// A WRITE of 700 bytes (3 packets), a SEND of 300 (2) and a READ of 1000 (4 responses) from
/// `a` to `b`, checked byte for byte, one completion each, in order.
fn exchange(p: &mut Pair) {
    let (write, send, readback) = (pattern(700, 1), pattern(300, 2), pattern(1000, 3));
    let src = region(&mut p.a, &write);
    let dst = region(&mut p.b, &[0; 700]);
    let ssrc = region(&mut p.a, &send);
    let rdst = region(&mut p.b, &[0; 300]);
    let remote = region(&mut p.b, &readback);
    let local = region(&mut p.a, &[0; 1000]);
    p.b.sim.post_recv(&p.b.qp, &[RecvWr { wr_id: 9, sge: sge(&rdst, 0, 300) }]).unwrap();
    let flags = SendFlags::SIGNALED;
    let ops = [
        WrOp::RdmaWrite { wr_id: 1, flags, rkey: dst.mr.rkey, remote_addr: dst.mr.addr, sge: sge(&src, 0, 700) },
        WrOp::Send { wr_id: 2, flags, sge: sge(&ssrc, 0, 300) },
        WrOp::RdmaRead {
            wr_id: 3,
            flags,
            rkey: remote.mr.rkey,
            remote_addr: remote.mr.addr,
            sge: sge(&local, 0, 1000),
        },
    ];
    p.a.sim.post_send(&p.a.qp, &ops).unwrap();
    let (ca, cb) = drive(p, 3, 1);
    ok(&ca, &[1, 2, 3]);
    ok(&cb, &[9]);
    assert_eq!(cb[0].opcode, wc_opcode::RECV);
    assert_eq!(cb[0].byte_len, 300);
    assert_eq!(read(&mut p.b, &dst, 700), write);
    assert_eq!(read(&mut p.b, &rdst, 300), send);
    assert_eq!(read(&mut p.a, &local, 1000), readback);
}

#[test]
fn write_send_and_read_cross_the_network_without_faults() {
    let mut p = pair(77, 7);
    // Connected QPs alone send nothing: the ports have not been used yet.
    assert!(!p.a.sim.network_used() && !p.b.sim.network_used());
    exchange(&mut p);
    assert!(p.a.sim.network_used() && p.b.sim.network_used(), "both ports carried the exchange");
    assert_eq!(p.a.sim.network_drops()[0], 0);
    assert_eq!(p.b.sim.network_drops()[0], 0);
}

/// Packets of a 4096-byte path MTU cross the network whole: a datagram with every header
/// fits what a port receives, and none is dropped.
#[test]
fn full_4096_byte_packets_cross_the_network() {
    let mut p = pair_mtu(152, 7, 1, MTU_4096);
    let data = pattern(3 * 4096 + 100, 9);
    let src = region(&mut p.a, &data);
    let dst = region(&mut p.b, &vec![0; data.len()]);
    let flags = SendFlags::SIGNALED;
    let w =
        WrOp::RdmaWrite { wr_id: 1, flags, rkey: dst.mr.rkey, remote_addr: dst.mr.addr, sge: sge(&src, 0, data.len()) };
    p.a.sim.post_send(&p.a.qp, &[w]).unwrap();
    let (ca, _) = drive(&mut p, 1, 0);
    ok(&ca, &[1]);
    assert_eq!(read(&mut p.b, &dst, data.len()), data);
    assert_eq!((p.a.sim.network_drops()[0], p.b.sim.network_drops()[0]), (0, 0));
}

/// The exchange on a pair at 127.0.`n`.1 and 127.0.`n+1`.1, with `to_b` rules on what `a`
/// sends to `b`'s QP and `to_a` on what `b` sends back to `a`'s: each rule acts as many times
/// as it says, and the transport recovers (the data right, one completion per WR, in order).
fn exchange_with_faults(n: u8, to_b: &[NetFault], to_a: &[NetFault]) -> Pair {
    let mut p = pair(n, 7);
    let (qa, qb) = (p.a.qp.qp_num, p.b.qp.qp_num);
    for r in to_b {
        p.a.sim.add_network_fault(0, r.qp(qb)).unwrap();
    }
    for r in to_a {
        p.b.sim.add_network_fault(0, r.qp(qa)).unwrap();
    }
    exchange(&mut p);
    let times = |rules: &[NetFault]| rules.iter().map(|r| r.times).collect::<Vec<_>>();
    assert_eq!(p.a.sim.network_faults_acted(0), times(to_b), "rules on the requests");
    assert_eq!(p.b.sim.network_faults_acted(0), times(to_a), "rules on the answers");
    p
}

fn on(action: NetAction, op: u8) -> NetFault {
    NetFault::new(action).opcode(op)
}

#[test]
fn a_dropped_first_packet_is_resent_after_the_ack_timeout() {
    use opcode::*;
    let d = NetAction::Drop;
    exchange_with_faults(
        79,
        &[on(d, WRITE_FIRST), on(d, SEND_FIRST), on(d, READ_REQUEST)],
        &[on(d, READ_RESPONSE_FIRST)],
    );
}

#[test]
fn packets_picked_by_psn_and_lost_again_on_resend_are_recovered() {
    // PSNs from 0: the WRITE takes 0 to 2, the SEND 3 and 4, the READ 5 and its responses 5 to 8.
    let middle = NetFault::new(NetAction::Drop).psn(1);
    // The SEND's first packet, sent and resent: lost both times.
    let twice = NetFault::new(NetAction::Drop).psn(3).times(2);
    // The READ response's third packet, the first time it is seen.
    let response = NetFault::new(NetAction::Drop).psn(7);
    let p = exchange_with_faults(99, &[middle, twice], &[response]);
    // After a lost packet the rest of its message is out of sequence.
    assert!(p.b.sim.network_drops()[0] >= 2, "{:?}", p.b.sim.network_drops());
    assert!(p.a.sim.network_drops()[0] >= 1, "{:?}", p.a.sim.network_drops());
}

#[test]
fn duplicated_packets_take_effect_once() {
    use opcode::*;
    let dup = NetAction::Duplicate;
    // Every request packet of the first two messages twice, the READ request twice (it is
    // served twice), and a READ response packet twice. (A responder sends one ACK per QP for
    // what a device pass took, and a READ response acknowledges what came before it: how
    // many ACKs go out depends on how the packets fall into passes, so no rule counts them.)
    let every = NetFault::new(dup).times(5);
    let mut p = exchange_with_faults(81, &[every, on(dup, READ_REQUEST)], &[on(dup, READ_RESPONSE_MIDDLE)]);
    assert!(p.a.sim.network_drops()[0] >= 1, "the second copy of a READ response packet is out of sequence");
    // The duplicated SEND consumed one receive WQE: a second SEND lands in the next.
    let qb = p.b.qp.qp_num;
    let second = pattern(64, 7);
    let src = region(&mut p.a, &second);
    let dst = region(&mut p.b, &[0; 64]);
    p.a.sim.add_network_fault(0, on(dup, SEND_ONLY).qp(qb)).unwrap();
    p.b.sim.post_recv(&p.b.qp, &[RecvWr { wr_id: 10, sge: sge(&dst, 0, 64) }]).unwrap();
    p.b.sim.post_recv(&p.b.qp, &[RecvWr { wr_id: 11, sge: sge(&dst, 0, 64) }]).unwrap();
    let flags = SendFlags::SIGNALED;
    p.a.sim.post_send(&p.a.qp, &[WrOp::Send { wr_id: 4, flags, sge: sge(&src, 0, 64) }]).unwrap();
    let (ca, cb) = drive(&mut p, 1, 1);
    ok(&ca, &[4]);
    ok(&cb, &[10]);
    assert_eq!(read(&mut p.b, &dst, 64), second);
}

#[test]
fn reordered_packets_are_recovered() {
    use opcode::*;
    let r = NetAction::Reorder;
    exchange_with_faults(83, &[on(r, WRITE_FIRST), on(r, SEND_FIRST)], &[on(r, READ_RESPONSE_FIRST)]);
}

#[test]
fn delayed_packets_are_recovered() {
    use opcode::*;
    // Shorter than the ACK timeout (the message completes late, not resent) and longer
    // (the resend overtakes it; the late copy is a duplicate).
    let (short, long) = (NetAction::Delay { ns: 200_000 }, NetAction::Delay { ns: 3_000_000 });
    exchange_with_faults(85, &[on(short, WRITE_FIRST), on(long, SEND_LAST)], &[on(long, ACKNOWLEDGE)]);
}

#[test]
fn a_corrupted_packet_fails_its_icrc_is_counted_and_resent() {
    use opcode::*;
    // A payload byte of the WRITE's middle packet, the PSN of the SEND's first, a byte of a
    // READ response.
    let payload = on(NetAction::Corrupt { offset: 40, xor: 0x5a }, WRITE_MIDDLE);
    let psn = on(NetAction::Corrupt { offset: 11, xor: 1 }, SEND_FIRST);
    let response = on(NetAction::Corrupt { offset: 30, xor: 0xff }, READ_RESPONSE_MIDDLE);
    let p = exchange_with_faults(87, &[payload, psn], &[response]);
    assert!(p.b.sim.network_drops()[0] >= 2, "{:?}", p.b.sim.network_drops());
    assert!(p.a.sim.network_drops()[0] >= 1, "{:?}", p.a.sim.network_drops());
}

/// Two WRITEs of 64 bytes to `dst` (on a peer) that never arrive: the first ends in
/// `RETRY_EXC_ERR` after `retry_cnt` resends, the second is flushed, and the QP is in error.
fn write_fails(a: &mut Side, dst: &Region) {
    let src = region(a, &pattern(64, 5));
    let flags = SendFlags::SIGNALED;
    let ops = [
        WrOp::RdmaWrite { wr_id: 1, flags, rkey: dst.mr.rkey, remote_addr: dst.mr.addr, sge: sge(&src, 0, 64) },
        WrOp::RdmaWrite { wr_id: 2, flags, rkey: dst.mr.rkey, remote_addr: dst.mr.addr, sge: sge(&src, 0, 64) },
    ];
    a.sim.post_send(&a.qp, &ops).unwrap();
    let start = Instant::now();
    let mut wc = Vec::new();
    for _ in 0..1_000_000 {
        if wc.len() >= 2 || start.elapsed() > DEADLINE {
            break;
        }
        a.sim.tick();
        wc.extend(a.sim.poll_cq(&a.cq, 8).unwrap());
        std::thread::sleep(Duration::from_micros(50));
    }
    assert_eq!(wc.first().map(|c| (c.wr_id, c.status)), Some((1, wc_status::RETRY_EXC_ERR)), "{wc:?}");
    assert_eq!(wc.get(1).map(|c| (c.wr_id, c.status)), Some((2, wc_status::WR_FLUSH_ERR)), "{wc:?}");
    assert_eq!(a.sim.query_qp_state(&a.qp).unwrap(), QpState::Err);
}

#[test]
fn a_rule_dropping_everything_ends_in_retry_exc_err() {
    let mut p = pair(89, 2);
    p.a.sim.add_network_fault(0, NetFault::new(NetAction::Drop).always()).unwrap();
    let dst = region(&mut p.b, &[0; 64]);
    let start = Instant::now();
    write_fails(&mut p.a, &dst);
    // Each WRITE on the wire is sent once and resent twice (both at once when the transport
    // keeps more than one message on the wire).
    let acted = p.a.sim.network_faults_acted(0);
    assert!(acted[0] == 3 || acted[0] == 6, "the first send and two resends: {acted:?}");
    assert!(start.elapsed() >= Duration::from_millis(3), "three ACK timeouts of about 1 ms");
    // B never heard a thing.
    assert_eq!(p.b.sim.network_drops()[0], 0);
    assert!(!p.b.sim.tick());
}

#[test]
fn a_peer_that_went_away_ends_in_retry_exc_err() {
    let mut p = pair(91, 2);
    let dst = region(&mut p.b, &[0; 64]);
    let Pair { mut a, b } = p;
    // Its sockets close with it.
    drop(b);
    write_fails(&mut a, &dst);
}

#[test]
fn five_percent_loss_both_ways_still_delivers_every_write_once_in_order() {
    let mut p = pair(95, 7);
    p.a.sim.add_network_fault(0, NetFault::new(NetAction::Drop).random(0.05, 0x5eed)).unwrap();
    p.b.sim.add_network_fault(0, NetFault::new(NetAction::Drop).random(0.05, 0xfeed)).unwrap();
    const N: usize = 300;
    const LEN: usize = 96;
    let data = pattern(N * LEN, 11);
    let src = region(&mut p.a, &data);
    let dst = region(&mut p.b, &vec![0; N * LEN]);
    let flags = SendFlags::SIGNALED;
    let mut done: Vec<Wc> = Vec::new();
    let start = Instant::now();
    for batch in (0..N).collect::<Vec<_>>().chunks(32) {
        let ops: Vec<WrOp> = batch
            .iter()
            .map(|&i| {
                let off = (i * LEN) as u64;
                WrOp::RdmaWrite {
                    wr_id: i as u64,
                    flags,
                    rkey: dst.mr.rkey,
                    remote_addr: dst.mr.addr + off,
                    sge: sge(&src, off, LEN),
                }
            })
            .collect();
        p.a.sim.post_send(&p.a.qp, &ops).unwrap();
        let (ca, cb) = drive(&mut p, batch.len(), 0);
        assert!(cb.is_empty(), "{cb:?}");
        done.extend(ca);
        assert!(start.elapsed() < 2 * DEADLINE, "too slow: {} of {N} after {:?}", done.len(), start.elapsed());
    }
    ok(&done, &(0..N as u64).collect::<Vec<_>>());
    assert_eq!(read(&mut p.b, &dst, N * LEN), data);
    let (da, db) = (p.a.sim.network_faults_acted(0), p.b.sim.network_faults_acted(0));
    println!("dropped {da:?} requests, {db:?} ACKs in {:?}", start.elapsed());
    assert!(da[0] > 0 && db[0] > 0, "both directions lost packets: {da:?} {db:?}");
}

/// FETCH_ADDs of 1 to one counter, `n` of them in batches of 32 with 16 outstanding, with
/// `to_b` on the requests and `to_a` on the answers: each returns the counter's value before
/// it, so exactly-once, in-order execution and completion show as 0, 1, 2, … in the results.
fn atomics_with_faults(p: &mut Pair, n: usize, to_b: NetFault, to_a: NetFault) {
    let (qa, qb) = (p.a.qp.qp_num, p.b.qp.qp_num);
    p.a.sim.add_network_fault(0, to_b.qp(qb)).unwrap();
    p.b.sim.add_network_fault(0, to_a.qp(qa)).unwrap();
    let counter = region(&mut p.b, &[0; 8]);
    let results = region(&mut p.a, &vec![0xff; n * 8]);
    let flags = SendFlags::SIGNALED;
    let mut done: Vec<Wc> = Vec::new();
    for batch in (0..n).collect::<Vec<_>>().chunks(32) {
        let ops: Vec<WrOp> = batch
            .iter()
            .map(|&i| WrOp::AtomicFetchAdd {
                wr_id: i as u64,
                flags,
                rkey: counter.mr.rkey,
                remote_addr: counter.mr.addr,
                add: 1,
                sge: sge(&results, (i * 8) as u64, 8),
            })
            .collect();
        p.a.sim.post_send(&p.a.qp, &ops).unwrap();
        let (ca, cb) = drive(p, batch.len(), 0);
        assert!(cb.is_empty(), "{cb:?}");
        done.extend(ca);
    }
    ok(&done, &(0..n as u64).collect::<Vec<_>>());
    let got: Vec<u64> =
        read(&mut p.a, &results, n * 8).chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, (0..n as u64).collect::<Vec<_>>(), "each atomic saw every one before it, once");
    assert_eq!(read(&mut p.b, &counter, 8), (n as u64).to_le_bytes());
}

#[test]
fn lost_atomic_responses_behind_a_sequence_error_are_asked_again() {
    // The first atomic's response is lost, then the seventh request: the responder's NAK
    // (sequence error at the seventh's PSN) tells the requester the first arrived, so the
    // first is sent again at once, answered from the responder's replay cache.
    let mut p = pair_with(140, 1, 16);
    let drop = NetFault::new(NetAction::Drop);
    atomics_with_faults(&mut p, 16, drop.opcode(opcode::FETCH_ADD).skip(6), drop.opcode(opcode::ATOMIC_ACKNOWLEDGE));
    assert_eq!(p.a.sim.network_faults_acted(0), [1]);
    assert_eq!(p.b.sim.network_faults_acted(0), [1]);
    // Asked again on the first later answer (an implied NAK), not after the ACK timeout; the
    // sequence error, from before that retry, starts no other.
    let c = p.a.sim.transport_counters()[0];
    assert_eq!((c.implied_nak_seq_err, c.local_ack_timeout_err), (1, 0), "{c:?}");
    assert!(c.packet_seq_err <= 1, "{c:?}");
}

#[test]
fn three_percent_loss_both_ways_still_answers_every_atomic_once_in_order() {
    let mut p = pair_with(142, 7, 16);
    let drop = NetFault::new(NetAction::Drop);
    atomics_with_faults(&mut p, 1000, drop.random(0.03, 0xa70), drop.random(0.03, 0x70a));
    let (da, db) = (p.a.sim.network_faults_acted(0), p.b.sim.network_faults_acted(0));
    assert!(da[0] > 0 && db[0] > 0, "both directions lost packets: {da:?} {db:?}");
    let c = p.a.sim.transport_counters()[0];
    println!("dropped {da:?} requests, {db:?} answers; {c:?}");
    assert!(c.implied_nak_seq_err > 0, "lost answers found by later ones: {c:?}");
}

#[test]
fn bad_rules_are_refused_and_a_simulator_off_the_network_carries_packets_in_memory() {
    let drop = NetFault::new(NetAction::Drop);
    let mut off = Simulator::with_host(Profile::builtin("cx6dx").unwrap(), 5).unwrap();
    off.add_network_fault(0, drop).unwrap();
    assert_eq!(off.network_faults_acted(0), [0]);
    assert!(off.network_fds().is_empty(), "in memory: no socket");
    let e = off.connect_network(Ipv4Addr::new(127, 0, 96, 1)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    let mut s = Simulator::with_host(Profile::builtin("cx6dx").unwrap(), 5).unwrap();
    s.connect_network(Ipv4Addr::new(127, 0, 97, 1)).unwrap();
    s.add_network_fault(0, drop).unwrap();
    for bad in [drop.times(0), drop.random(-0.1, 1), NetFault::new(NetAction::Corrupt { offset: 3, xor: 0 })] {
        assert_eq!(s.add_network_fault(0, bad).unwrap_err().errno(), mlx5_dv::errno::EINVAL, "{bad:?}");
    }
    assert_eq!(s.network_faults_acted(0), [0]);
    // Each port has rules of its own.
    s.add_network_fault(1, drop.always()).unwrap();
    assert_eq!(s.network_faults_acted(1), [0]);
    assert_eq!(s.add_network_fault(9, drop).unwrap_err().errno(), mlx5_dv::errno::EINVAL, "no such port");
    s.clear_network_faults(0);
    assert!(s.network_faults_acted(0).is_empty());
    assert_eq!(s.network_faults_acted(1), [0]);
}

/// The opcodes of the RoCE v2 packets in a capture file (Ethernet frames of a classic pcap).
fn captured_opcodes(path: &std::path::Path) -> Vec<u8> {
    let b = std::fs::read(path).expect("the capture");
    let (mut at, mut ops) = (24, Vec::new());
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]) as usize;
        let frame = b.get(at + 16 + 14..at + 16 + len).expect("a whole frame");
        ops.push(mlx5_sim::wire::decode_ip(frame).expect("a RoCE v2 packet").headers.bth.opcode);
        at += 16 + len;
    }
    ops
}

/// An RNR NAK holds the requester for the responder's `min_rnr_timer`, sending nothing
/// meanwhile however often its device runs: with 0 (655.36 ms, what the RDMA CM gives) the
/// SEND is on the wire once in the first 200 ms, then lands once a receive is posted.
#[test]
fn an_rnr_nak_holds_the_send_for_the_responders_timer() {
    let mut p = pair(144, 7);
    let ext = QpAttrExt { mask: M::STATE | M::MIN_RNR_TIMER, min_rnr_timer: 0, ..QpAttrExt::defaults() };
    p.b.sim.modify_qp(&p.b.qp, &QpModify::exact(QpState::Rts, ACCESS, None, ext)).unwrap();
    let pcap = std::env::temp_dir().join(format!("mlx5sim-rnr-hold-{}.pcap", std::process::id()));
    p.a.sim.capture_to(&pcap).unwrap();
    let data = pattern(64, 9);
    let src = region(&mut p.a, &data);
    let dst = region(&mut p.b, &[0; 64]);
    let send = WrOp::Send { wr_id: 5, flags: SendFlags::SIGNALED, sge: sge(&src, 0, 64) };
    p.a.sim.post_send(&p.a.qp, &[send]).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(200) {
        let moved = p.a.sim.tick() | p.b.sim.tick();
        assert!(p.a.sim.poll_cq(&p.a.cq, 4).unwrap().is_empty(), "no completion while the receiver is not ready");
        if !moved {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    let sends = captured_opcodes(&pcap).iter().filter(|&&o| o == opcode::SEND_ONLY).count();
    assert_eq!(sends, 1, "the SEND went out once before the RNR timer ran out");
    let recv = RecvWr { wr_id: 6, sge: sge(&dst, 0, 64) };
    p.b.sim.post_recv(&p.b.qp, &[recv]).unwrap();
    let (wa, wb) = drive(&mut p, 1, 1);
    let _ = std::fs::remove_file(&pcap);
    ok(&wa, &[5]);
    ok(&wb, &[6]);
    assert_eq!(read(&mut p.b, &dst, 64), data);
    let timeouts: u64 = p.a.sim.transport_counters().iter().map(|c| c.local_ack_timeout_err).sum();
    assert_eq!(timeouts, 0, "the wait was the RNR timer's, not an ACK timeout");
}

/// Tick `sim` until MADs come to QP 1 of its ports (or the deadline passes): what came.
fn gsi_arrivals(sim: &mut Simulator) -> Vec<(usize, Ipv4Addr, Vec<u8>)> {
    let start = Instant::now();
    for _ in 0..1_000_000u32 {
        sim.tick();
        let got = sim.fabric().take_gsi();
        if !got.is_empty() || start.elapsed() > DEADLINE {
            return got;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    Vec::new()
}

/// A MAD from QP 1 of one host reaches QP 1 of the other as a UD SEND with the GSI's headers
/// (and none goes where the port may not send):
/// the receiver hands it to its connection manager (`take_gsi`) with the sender's address,
/// and its capture shows opcode UD SEND only, P_Key 0xffff, QP 1, the PSN given (24 bits) and
/// a DETH with the GSI's Q_Key from QP 1.
#[test]
fn a_mad_from_qp1_reaches_qp1_of_the_other_host_with_the_gsi_headers() {
    let (a_addr, b_addr) = (Ipv4Addr::new(127, 0, 148, 1), Ipv4Addr::new(127, 0, 149, 1));
    let mut a = Simulator::with_host(Profile::builtin("cx6dx").unwrap(), 148).unwrap();
    let mut b = Simulator::with_host(Profile::builtin("cx6dx").unwrap(), 149).unwrap();
    a.connect_network(a_addr).unwrap();
    b.connect_network(b_addr).unwrap();
    let capture = std::env::temp_dir().join(format!("mlx5sim-gsi-{}.pcap", std::process::id()));
    b.capture_to(&capture).unwrap();
    let mad: Vec<u8> = pattern(256, 9);
    // A loopback port reaches loopback addresses only, and a device without a port sends none.
    assert!(!a.fabric().send_gsi(0, Ipv4Addr::new(192, 0, 2, 1), &mad, 0), "a loopback port sends off the host");
    assert!(!a.fabric().send_gsi(7, b_addr, &mad, 0), "device 7 is not networked");
    assert!(a.fabric().send_gsi(0, b_addr, &mad, 0x7f12_3456));
    assert_eq!(gsi_arrivals(&mut b), vec![(0, a_addr, mad.clone())]);
    let file = std::fs::read(&capture).unwrap();
    let _ = std::fs::remove_file(&capture);
    // One record after the 24-byte file header: Ethernet, IPv4 and UDP (42 bytes), then the BTH.
    let frame = &file[24 + 16..];
    let bth = &frame[42..54];
    assert_eq!(bth[0], opcode::UD_SEND_ONLY, "opcode");
    assert_eq!(u16::from_be_bytes([bth[2], bth[3]]), 0xffff, "P_Key");
    assert_eq!(u32::from_be_bytes([0, bth[5], bth[6], bth[7]]), 1, "destination QP");
    assert_eq!(u32::from_be_bytes([0, bth[9], bth[10], bth[11]]), 0x12_3456, "PSN");
    let deth = &frame[54..62];
    assert_eq!(u32::from_be_bytes([deth[0], deth[1], deth[2], deth[3]]), 0x8001_0000, "Q_Key");
    assert_eq!(u32::from_be_bytes([0, deth[5], deth[6], deth[7]]), 1, "source QP");
    assert_eq!(&frame[62..62 + mad.len()], &mad[..], "the MAD follows the DETH");
}

/// A MAD to another port of the same host is handed over at once, without the network: the
/// connection manager finds it before any tick.
#[test]
fn a_mad_to_a_port_of_the_same_host_is_there_at_once() {
    let first = Ipv4Addr::new(127, 0, 150, 1);
    let mut sim = Simulator::with_host(Profile::builtin("cx6dx").unwrap(), 150).unwrap();
    sim.connect_network(first).unwrap();
    let second = Ipv4Addr::new(127, 0, 150, 2);
    assert_eq!(sim.fabric().port_with_address(second), Some(1));
    let mad = pattern(256, 3);
    assert!(sim.fabric().send_gsi(0, second, &mad, 1));
    assert_eq!(sim.fabric().take_gsi(), vec![(1, first, mad)]);
}

/// After a fork the ports share their addresses: a MAD to another port of the same host then
/// goes over the network, to every process sharing that address, and comes in through the
/// socket (here the only sharer is this process).
#[test]
fn a_mad_to_a_shared_port_of_the_same_host_goes_over_the_network() {
    let first = Ipv4Addr::new(127, 0, 151, 1);
    let mut sim = Simulator::with_host(Profile::builtin("cx6dx").unwrap(), 151).unwrap();
    sim.connect_network(first).unwrap();
    assert!(sim.share_after_fork(151).unwrap(), "the ports are shared");
    let second = Ipv4Addr::new(127, 0, 151, 2);
    let mad = pattern(256, 4);
    assert!(sim.fabric().send_gsi(0, second, &mad, 1));
    assert!(sim.fabric().take_gsi().is_empty(), "not handed over directly");
    assert_eq!(gsi_arrivals(&mut sim), vec![(1, first, mad)]);
}
