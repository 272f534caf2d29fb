//! Every committed input of every fuzz target, fed to the target's body on stable Rust: the
//! corpus (`fuzz/corpus/<target>/`) and the inputs that once failed
//! (`fuzz/regressions/<target>/`). A target fails at any input that panics, or that makes
//! its body hold more than [`PEAK`] bytes at once (libFuzzer stops at 2 GB, sanitizers
//! included).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use mlx5_fuzz_bodies::{Body, TARGETS};

/// The most one input may make its body hold at once. The simulator's host memory counts
/// whole even where untouched; its cap for the trace target is a quarter of this.
const PEAK: usize = 1 << 30;

thread_local! {
    /// Bytes this thread holds now and at most since [`held_at_most`] started counting.
    static HELD: Cell<(isize, isize)> = const { Cell::new((0, 0)) };
}

/// The system allocator, counting each thread's bytes held: each test runs one target on its
/// own thread.
struct Counting;

fn count(delta: isize) {
    let _ = HELD.try_with(|h| {
        let (now, peak) = h.get();
        let now = now.wrapping_add(delta);
        h.set((now, peak.max(now)));
    });
}

// SAFETY: every call goes to `System` as it came; the counting allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Both blocks may be held at once while the bytes move.
        count(new_size as isize);
        count(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most `f` held at once on this thread, in bytes, beyond what the thread held before.
fn held_at_most<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let (before, _) = HELD.with(Cell::get);
    HELD.with(|h| h.set((before, before)));
    let r = f();
    let (_, peak) = HELD.with(Cell::get);
    (r, usize::try_from(peak - before).unwrap_or(0))
}

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [fuzz.join("corpus").join(target), fuzz.join("regressions").join(target)] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        files.extend(entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()));
    }
    files.sort();
    files
}

/// Feed every input of `target` to its body; the failures, one line each.
fn replay(target: &str, body: Body) -> Vec<String> {
    let files = inputs(target);
    assert!(!files.is_empty(), "{target}: no corpus");
    let mut failed = Vec::new();
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let (r, peak) = held_at_most(|| catch_unwind(AssertUnwindSafe(|| body(&data))));
        if r.is_err() {
            failed.push(format!("{}: panicked (the message is above)", f.display()));
        } else if peak > PEAK {
            failed.push(format!("{}: held {peak} bytes at once, more than {PEAK}", f.display()));
        }
    }
    failed
}

fn check(target: &str) {
    let body = TARGETS.iter().find(|(t, _)| *t == target).map(|(_, b)| *b);
    let failed = replay(target, body.unwrap_or_else(|| panic!("no target {target}")));
    assert!(failed.is_empty(), "{target}:\n{}", failed.join("\n"));
}

#[test]
fn calls() {
    check("calls");
}

#[test]
fn datagram() {
    check("datagram");
}

#[test]
fn mailbox() {
    check("mailbox");
}

#[test]
fn net_rx() {
    check("net_rx");
}

/// The hand-made seeds are what `net_rx_seeds` makes (`FUZZ_WRITE_SEEDS=1` writes them), and
/// every one of their datagrams reaches the responder or requester (but the one for a QP in
/// INIT, which is dropped), the answers going to the peer device, which drops them.
#[test]
fn net_rx_seeds_are_committed_and_taken() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/net_rx");
    for (name, bytes) in mlx5_fuzz_bodies::net_rx_seeds() {
        let path = dir.join(name);
        if std::env::var_os("FUZZ_WRITE_SEEDS").is_some() {
            std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(committed == bytes, "{name}: not what net_rx_seeds makes (FUZZ_WRITE_SEEDS=1 writes it)");
        let taken = mlx5_fuzz_bodies::net_rx_taken(&bytes);
        // A request for a QP in INIT takes no request: dropped and counted, as a NIC drops it.
        let expected = name != "write-only-to-init-qp";
        assert!(!taken.is_empty() && taken.iter().all(|&t| t == expected), "{name}: {taken:?}");
        // Without the fix-ups the same bytes do the same: the seeds are valid as they stand.
        let mut bare = bytes.clone();
        bare[0] &= mlx5_fuzz_bodies::STRANGER;
        assert_eq!(mlx5_fuzz_bodies::net_rx_taken(&bare), taken, "{name} without fix-ups");
        // A flipped payload bit without the ICRC fixed up is dropped.
        let mut bad = bare;
        if let Some(b) = bad.last_mut() {
            *b ^= 1;
        }
        assert_eq!(mlx5_fuzz_bodies::net_rx_taken(&bad).last(), Some(&false), "{name} with a bad ICRC");
    }
}

/// A networked simulator of one port on `addr` and datagrams to it from 127.0.67.2, each as
/// the port's peer would send it; for the findings below, which need no QP.
fn lone_port(addr: std::net::Ipv4Addr) -> (mlx5_sim::Simulator, impl Fn(mlx5_sim::packet::Headers, &[u8]) -> Vec<u8>) {
    use mlx5_sim::wire::{Endpoints, encode};
    let mut p = <mlx5_sim::Profile as mlx5_sim::ShippedProfiles>::builtin("cx6dx").unwrap_or_else(|e| panic!("{e}"));
    (p.device.count, p.device.vfio_pci_name) = (1, None);
    let mut sim = mlx5_sim::Simulator::new(p).unwrap_or_else(|e| panic!("{e}"));
    sim.connect_network(addr).unwrap_or_else(|e| panic!("{e}"));
    let ep = Endpoints::new([127, 0, 67, 2].into(), addr.into(), 0xc123);
    (sim, move |h, payload: &[u8]| encode(&h, payload, &ep).unwrap_or_default())
}

/// Found reading remote.rs while writing `net_rx` (the fuzzer cannot see it: each input runs
/// on a fresh clone): a request packet for a QP number the device does not have is taken,
/// `receive_datagram` says true and nothing is counted, where a NIC drops it.
#[test]
fn net_rx_a_request_for_no_qp_is_dropped_and_counted() {
    use mlx5_sim::packet::{Bth, Headers, opcode};
    let from = std::net::SocketAddrV4::new([127, 0, 67, 2].into(), 0xc123);
    let (mut sim, datagram) = lone_port([127, 0, 67, 1].into());
    for (i, op) in [opcode::SEND_FIRST, opcode::SEND_ONLY].into_iter().enumerate() {
        let h = Headers { bth: Bth { opcode: op, dest_qp: 0xab_cdef, ..Bth::default() }, ..Headers::default() };
        assert!(!sim.receive_datagram(0, from, &datagram(h, &[7; 64])), "opcode {op:#x} for no QP is taken");
        assert_eq!(sim.network_drops(), [i as u64 + 1], "opcode {op:#x} for no QP is not counted");
    }
}

/// Found the same way: a FIRST packet starts a reassembly buffer that every MIDDLE packet
/// grows, for any QP number, without bound and for as long as the process lives: a peer (or
/// anyone who can reach the port) makes the process hold what it likes.
#[test]
fn net_rx_a_message_for_no_qp_holds_no_memory() {
    use mlx5_sim::packet::{Bth, Headers, opcode};
    let from = std::net::SocketAddrV4::new([127, 0, 67, 2].into(), 0xc123);
    let (mut sim, datagram) = lone_port([127, 0, 67, 3].into());
    let pkt =
        |op, psn| Headers { bth: Bth { opcode: op, dest_qp: 0xab_cdef, psn, ..Bth::default() }, ..Headers::default() };
    let packets: Vec<Vec<u8>> = std::iter::once(datagram(pkt(opcode::SEND_FIRST, 0), &[7; 4096]))
        .chain((1..=1024).map(|psn| datagram(pkt(opcode::SEND_MIDDLE, psn), &[7; 4096])))
        .collect();
    let ((), held) = held_at_most(|| {
        for p in &packets {
            sim.receive_datagram(0, from, p);
        }
    });
    assert!(held < 1 << 20, "a FIRST and 1024 MIDDLE packets of 4 KiB for no QP: {held} bytes held after them");
}

/// Found reading remote.rs while writing `net_rx`: a requester waiting on an RDMA READ takes
/// an ACK at the READ's last PSN, or a READ response shorter than the READ, as the whole
/// answer: the READ completes successfully with its full length, the destination never
/// written (the body cannot see completions, so the fuzzer did not report it).
#[test]
fn net_rx_an_ack_does_not_answer_a_read() {
    use mlx5_dv::prelude::*;
    use mlx5_dv::{AccessFlags as A, QpAttrExt, QpAttrMask as M, QpCap, QpDest, QpInitAttr, QpModify, QpState};
    use mlx5_sim::packet::{Aeth, Bth, Headers, opcode};
    let peer = std::net::Ipv4Addr::new(127, 0, 67, 2);
    let (mut sim, datagram) = lone_port([127, 0, 67, 5].into());
    let ok = |what: &str, r: mlx5_dv::Result<()>| r.unwrap_or_else(|e| panic!("{what}: {e}"));
    let ctx = sim.open_ibv_device("mlx5_0").unwrap_or_else(|e| panic!("{e}"));
    let pd = sim.alloc_pd(ctx).unwrap_or_else(|e| panic!("{e}"));
    let cq = sim.create_cq(ctx, 16).unwrap_or_else(|e| panic!("{e}"));
    let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, None)).unwrap_or_else(|e| panic!("{e}"));
    let mut dest = QpDest { dest_qp_num: 0x77, path_mtu: 1, ..QpDest::default() };
    (dest.ah.is_global, dest.ah.dgid, dest.ah.sgid_index) = (true, mlx5_dv::Gid(peer.to_ipv6_mapped().octets()), 3);
    (dest.ah.hop_limit, dest.ah.port_num) = (64, 1);
    let ext = QpAttrExt { timeout: 0, ..QpAttrExt::defaults() };
    let steps = [
        (QpState::Init, None, M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        (
            QpState::Rtr,
            Some(dest),
            M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
        ),
        (QpState::Rts, None, M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC),
    ];
    for (state, dest, mask) in steps {
        ok("modify", sim.modify_qp(&qp, &QpModify::exact(state, A::empty(), dest, QpAttrExt { mask, ..ext })));
    }
    let buf = sim.alloc_buf(600).unwrap_or_else(|e| panic!("{e}"));
    ok("fill", sim.write_buf(&buf, 0, &[0xee; 600]));
    let mr = sim.reg_mr(pd, buf.addr, 600, A::LOCAL_WRITE).unwrap_or_else(|e| panic!("{e}"));
    let sge = vec![mlx5_dv::Sge { addr: mr.addr, length: 600, lkey: mr.lkey }];
    let read = mlx5_dv::WrOp::RdmaRead { wr_id: 1, flags: mlx5_dv::SendFlags::SIGNALED, rkey: 1, remote_addr: 0, sge };
    ok("post", sim.post_send(&qp, &[read]));
    assert_eq!(sim.poll_cq(&cq, 4).map(|w| w.len()).ok(), Some(0), "the READ waits for its response");
    // Three response PSNs at a 256-byte MTU: an ACK at the last one.
    let bth = Bth { opcode: opcode::ACKNOWLEDGE, dest_qp: qp.qp_num, psn: 2, ..Bth::default() };
    let ack = datagram(Headers { bth, aeth: Some(Aeth::ack(1)), ..Headers::default() }, &[]);
    sim.receive_datagram(0, std::net::SocketAddrV4::new(peer, 0xc123), &ack);
    let wc = sim.poll_cq(&cq, 4).unwrap_or_default();
    let data = sim.read_buf(&buf, 0, 600).unwrap_or_default();
    assert!(
        wc.iter().all(|w| w.status != mlx5_dv::wc_status::SUCCESS) || data != [0xee; 600],
        "an ACK completed the READ: {wc:?}, the destination unwritten"
    );
}

#[test]
fn cm_mad() {
    check("cm_mad");
}

#[test]
fn cm_qp1() {
    check("cm_qp1");
}

#[test]
fn profile_toml() {
    check("profile_toml");
}

#[test]
fn trace_replay() {
    check("trace_replay");
}

#[test]
fn every_target_is_tested_here() {
    let names: Vec<&str> = TARGETS.iter().map(|(t, _)| *t).collect();
    assert_eq!(names, ["calls", "cm_mad", "cm_qp1", "datagram", "mailbox", "net_rx", "profile_toml", "trace_replay"]);
}

#[test]
fn the_count_sees_what_a_body_holds() {
    let ((), peak) = held_at_most(|| drop(std::hint::black_box(vec![1u8; 10 << 20])));
    assert!(peak >= 10 << 20, "{peak}");
}
