//! The engine's data path on inputs at its limits: a QP connected to itself, messages above
//! `max_msg_sz`, an interleaved mkey whose stride wraps to 0, and signature-mkey address
//! arithmetic that overflows, a poll cut anywhere in a CQ of mixed completions. Allocation is
//! counted, so a translation that grows with the message's bytes rather than its entries
//! fails here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, DvQpInitAttr, Mkey, MkeyInitAttr, MkeyInitFlags as F, MrInterleaved, Qp, QpCap, QpDest,
    QpInitAttr, QpModify, SendFlags, Sge, SigBlockAttr, SigBlockDomain, SigT10dif, Wc, WrOp, dv_qp, sig, wc_status,
};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

/// Counts the largest single allocation made while armed.
struct Counting;

static ARMED: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);
/// Above this one allocation is refused, so a per-byte translation fails fast.
const REFUSE: usize = 1 << 30;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) != 0 {
            LARGEST.fetch_max(l.size(), Ordering::Relaxed);
            if l.size() > REFUSE {
                return std::ptr::null_mut();
            }
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` above, which is the system allocator's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) != 0 {
            LARGEST.fetch_max(new, Ordering::Relaxed);
            if new > REFUSE {
                return std::ptr::null_mut();
            }
        }
        // SAFETY: as for `alloc`; `p` and `l` describe a block it returned.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

struct Rig {
    sim: Simulator,
    pd: mlx5_dv::PdHandle,
    cq: mlx5_dv::Cq,
    client: Qp,
    server: Qp,
}

/// A client and a server QP on one device of `profile`; `self_loop` connects the client to
/// itself instead.
fn rig(profile: Profile, self_loop: bool) -> Rig {
    let mut sim = Simulator::new(profile).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 64).unwrap();
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 512 };
    let ops = dv_qp::WITH_MKEY_CONFIGURE | dv_qp::WITH_MR_INTERLEAVED;
    let attr = QpInitAttr::rc(pd, cq.handle, cap, Some(DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), ops)));
    let client = sim.create_qp(&attr).unwrap();
    let server = sim.create_qp(&attr).unwrap();
    let port = sim.query_port(ctx, 1).unwrap();
    let pairs = if self_loop { vec![(&client, &client)] } else { vec![(&client, &server), (&server, &client)] };
    for (q, p) in pairs {
        for step in QpModify::connect(ACCESS, QpDest::to(p, &port)) {
            sim.modify_qp(q, &step).unwrap();
        }
    }
    Rig { sim, pd, cq, client, server }
}

fn write(wr_id: u64, rkey: u32, remote_addr: u64, sge: Sge) -> WrOp {
    WrOp::RdmaWrite { wr_id, flags: SendFlags::SIGNALED, rkey, remote_addr, sge: vec![sge] }
}

fn statuses(wcs: &[Wc]) -> Vec<(u64, u32)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

#[test]
fn a_qp_connected_to_itself_completes_a_failed_wr_once() {
    let mut r = rig(Profile::builtin("cx6dx").unwrap(), true);
    let buf = r.sim.alloc_buf(64).unwrap();
    let mr = r.sim.reg_mr(r.pd, buf.addr, 64, ACCESS).unwrap();
    let sge = Sge { addr: mr.addr, length: 16, lkey: mr.lkey };
    let bad = write(1, mr.rkey ^ 0x100, mr.addr, sge);
    r.sim.post_send(&r.client, &[bad, write(2, mr.rkey, mr.addr, sge)]).unwrap();
    let wcs = r.sim.poll_cq(&r.cq, 8).unwrap();
    assert_eq!(statuses(&wcs), vec![(1, wc_status::REM_ACCESS_ERR), (2, wc_status::WR_FLUSH_ERR)]);
}

#[test]
fn a_message_above_max_msg_sz_is_a_local_length_error() {
    let mut p = Profile::builtin("cx6dx").unwrap();
    assert_eq!(p.datapath.max_msg_sz, 1 << 30, "mlx5 ports report 1 GiB");
    p.datapath.max_msg_sz = 4096;
    let mut r = rig(p, false);
    let buf = r.sim.alloc_buf(8192).unwrap();
    let mr = r.sim.reg_mr(r.pd, buf.addr, 8192, ACCESS).unwrap();
    let at = |length| Sge { addr: mr.addr, length, lkey: mr.lkey };
    let read = WrOp::RdmaRead {
        wr_id: 3,
        flags: SendFlags::SIGNALED,
        rkey: mr.rkey,
        remote_addr: mr.addr,
        sge: vec![at(4097)],
    };
    r.sim.post_send(&r.client, &[write(1, mr.rkey, mr.addr, at(4096))]).unwrap();
    r.sim.post_send(&r.client, &[write(2, mr.rkey, mr.addr, at(4097)), read]).unwrap();
    let wcs = r.sim.poll_cq(&r.cq, 8).unwrap();
    assert_eq!(
        statuses(&wcs),
        vec![(1, wc_status::SUCCESS), (2, wc_status::LOC_LEN_ERR), (3, wc_status::WR_FLUSH_ERR)]
    );
}

#[test]
fn the_default_max_msg_sz_refuses_a_gigabyte_and_one_before_translating() {
    let mut r = rig(Profile::builtin("cx6dx").unwrap(), false);
    let buf = r.sim.alloc_buf(64).unwrap();
    let mr = r.sim.reg_mr(r.pd, buf.addr, 64, ACCESS).unwrap();
    let big = Sge { addr: mr.addr, length: (1 << 30) + 1, lkey: mr.lkey };
    r.sim.post_send(&r.client, &[write(1, mr.rkey, mr.addr, big)]).unwrap();
    assert_eq!(statuses(&r.sim.poll_cq(&r.cq, 8).unwrap()), vec![(1, wc_status::LOC_LEN_ERR)]);
}

/// An interleaved mkey of one entry, 1 byte taken and 0xffff skipped (a 16-bit stride of
/// 0), repeated u32::MAX times over the first byte of `mr`.
fn still_mkey(r: &mut Rig, qp_is_server: bool, mr: &mlx5_dv::Mr) -> Mkey {
    let mkey = r.sim.create_mkey(&MkeyInitAttr { pd: r.pd, create_flags: F::INDIRECT, max_entries: 4 }).unwrap();
    let op = WrOp::MrInterleaved {
        wr_id: 7,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        mkey,
        access: ACCESS,
        repeat_count: u32::MAX,
        entries: vec![MrInterleaved { addr: mr.addr, bytes_count: 1, bytes_skip: 0xffff, lkey: mr.lkey }],
    };
    let qp = if qp_is_server { &r.server } else { &r.client };
    r.sim.post_send(qp, &[op]).unwrap();
    assert_eq!(statuses(&r.sim.poll_cq(&r.cq, 4).unwrap()), vec![(7, wc_status::SUCCESS)]);
    mkey
}

#[test]
fn a_wrapped_interleaved_stride_costs_per_entry_not_per_byte() {
    let mut p = Profile::builtin("cx6dx").unwrap();
    p.datapath.max_msg_sz = u32::MAX;
    let mut r = rig(p, false);
    let (sbuf, dbuf) = (r.sim.alloc_buf(64).unwrap(), r.sim.alloc_buf(64).unwrap());
    r.sim.write_buf(&sbuf, 0, &[0x5a]).unwrap();
    let smr = r.sim.reg_mr(r.pd, sbuf.addr, 64, ACCESS).unwrap();
    let dmr = r.sim.reg_mr(r.pd, dbuf.addr, 64, ACCESS).unwrap();
    let src = still_mkey(&mut r, false, &smr);
    let dst = still_mkey(&mut r, true, &dmr);
    // The largest data segment: bit 31 of byte_count would mark inline data.
    let all = Sge { addr: 0, length: i32::MAX as u32, lkey: src.lkey };
    ARMED.store(1, Ordering::Relaxed);
    r.sim.post_send(&r.client, &[write(1, dst.rkey, 0, all)]).unwrap();
    ARMED.store(0, Ordering::Relaxed);
    assert_eq!(statuses(&r.sim.poll_cq(&r.cq, 4).unwrap()), vec![(1, wc_status::SUCCESS)]);
    assert_eq!(r.sim.read_buf(&dbuf, 0, 2).unwrap(), vec![0x5a, 0], "every repetition lands on byte 0");
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest < 1 << 20, "translation allocated {largest} bytes at once for one entry");
}

#[test]
fn a_write_far_past_a_signature_mkey_is_a_remote_access_error() {
    let mut r = rig(Profile::builtin("cx7").unwrap(), false);
    // Memory: T10-DIF, 512-byte blocks (520 bytes each); wire: none. 4 blocks.
    let len = 4 * 520;
    let buf = r.sim.alloc_buf(len).unwrap();
    r.sim.write_buf(&buf, 0, &vec![0xee; len]).unwrap();
    let mr = r.sim.reg_mr(r.pd, buf.addr, len as u64, A::LOCAL_WRITE).unwrap();
    let mkey = r
        .sim
        .create_mkey(&MkeyInitAttr { pd: r.pd, create_flags: F::INDIRECT | F::BLOCK_SIGNATURE, max_entries: 4 })
        .unwrap();
    let mem = SigBlockDomain::t10dif(sig::BLOCK_512, SigT10dif::default());
    let attr = SigBlockAttr {
        mem: Some(mem),
        wire: None,
        flags: mlx5_dv::SigBlockAttrFlags::empty(),
        check_mask: 0xff,
        copy_mask: 0,
        comp_mask: 0,
    };
    let chain = [
        WrOp::MkeyConfigure {
            wr_id: 9,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey,
            num_setters: 3,
            conf_flags: mlx5_dv::MkeyConfFlags::empty(),
            comp_mask: 0,
        },
        WrOp::SetMkeyAccessFlags(A::LOCAL_WRITE | A::REMOTE_WRITE),
        WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: len as u32, lkey: mr.lkey }]),
        WrOp::SetMkeySigBlock(attr),
    ];
    r.sim.post_send(&r.server, &chain).unwrap();
    assert_eq!(statuses(&r.sim.poll_cq(&r.cq, 4).unwrap()), vec![(9, wc_status::SUCCESS)]);
    let src = r.sim.alloc_buf(512).unwrap();
    let smr = r.sim.reg_mr(r.pd, src.addr, 512, A::LOCAL_WRITE).unwrap();
    // Block 35474507834056832 of the wire: times 520 it wraps to memory offset 1024.
    let far = 35_474_507_834_056_832u64 * 512;
    r.sim
        .post_send(&r.client, &[write(1, mkey.rkey, far, Sge { addr: smr.addr, length: 512, lkey: smr.lkey })])
        .unwrap();
    assert_eq!(statuses(&r.sim.poll_cq(&r.cq, 4).unwrap()), vec![(1, wc_status::REM_ACCESS_ERR)]);
    assert_eq!(r.sim.read_buf(&buf, 0, len).unwrap(), vec![0xee; len], "the responder's memory is untouched");
}

/// What the direct path keeps of a QP and its keys between posts must not outlive a change
/// to them: after `change`, a WRITE completes as it does on a simulator that never ran one
/// before the change. Posted alone and as a chain of two (the two ways the engine runs plain
/// WRITEs); the statuses of the WRITEs after the change.
fn after_a_change(change: fn(&mut Rig, &mlx5_dv::Mr, &mlx5_dv::Mr)) -> Vec<Vec<(u64, u32)>> {
    let mut seen = Vec::new();
    for warm in [true, false] {
        for chain in [1u64, 2] {
            let mut r = rig(Profile::builtin("cx6dx").unwrap(), false);
            let (a, b) = (r.sim.alloc_buf(4096).unwrap(), r.sim.alloc_buf(4096).unwrap());
            let src = r.sim.reg_mr(r.pd, a.addr, 4096, ACCESS).unwrap();
            let dst = r.sim.reg_mr(r.pd, b.addr, 4096, ACCESS).unwrap();
            let ops = |base: u64| -> Vec<WrOp> {
                (0..chain)
                    .map(|i| {
                        write(base + i, dst.rkey, dst.addr + 64 * i, Sge { addr: src.addr, length: 64, lkey: src.lkey })
                    })
                    .collect()
            };
            if warm {
                r.sim.post_send(&r.client, &ops(10)).unwrap();
                let wcs = r.sim.poll_cq(&r.cq, 8).unwrap();
                assert!(wcs.iter().all(|w| w.status == wc_status::SUCCESS), "{wcs:?}");
            }
            change(&mut r, &src, &dst);
            r.sim.post_send(&r.client, &ops(20)).unwrap();
            seen.push(statuses(&r.sim.poll_cq(&r.cq, 8).unwrap()));
        }
    }
    let (warm, cold) = seen.split_at(2);
    assert_eq!(warm, cold, "a warm engine answers as a cold one");
    seen
}

#[test]
fn a_write_after_its_target_mr_is_gone_fails_however_warm_the_engine() {
    let seen = after_a_change(|r, _, dst| r.sim.dereg_mr(dst).unwrap());
    assert_eq!(seen[0], vec![(20, wc_status::REM_ACCESS_ERR)]);
    assert_eq!(seen[1], vec![(20, wc_status::REM_ACCESS_ERR), (21, wc_status::WR_FLUSH_ERR)]);
}

#[test]
fn a_write_after_its_source_mr_is_gone_fails_however_warm_the_engine() {
    let seen = after_a_change(|r, src, _| r.sim.dereg_mr(src).unwrap());
    assert_eq!(seen[0], vec![(20, wc_status::LOC_PROT_ERR)]);
}

#[test]
fn a_write_after_its_responder_left_rts_fails_however_warm_the_engine() {
    let seen = after_a_change(|r, _, _| {
        let server = r.server;
        r.sim.modify_qp(&server, &QpModify::to(mlx5_dv::QpState::Err)).unwrap();
    });
    assert!(seen[0].iter().all(|&(_, s)| s != wc_status::SUCCESS), "{seen:?}");
}

/// One CQ holding, in order, a WRITE's requester CQE, then each SEND's responder and
/// requester CQEs: polled `max` at a time (into an array, or as a `Vec` in one go), the
/// completions are the same, in the same order, however the poll is cut.
fn completions_polled_by(max: &[usize]) -> Vec<(u64, u32, u32)> {
    let mut r = rig(Profile::builtin("cx6dx").unwrap(), false);
    let buf = r.sim.alloc_buf(4096).unwrap();
    let mr = r.sim.reg_mr(r.pd, buf.addr, 4096, ACCESS).unwrap();
    let at = |off: u64| Sge { addr: mr.addr + off, length: 64, lkey: mr.lkey };
    let recvs: Vec<_> = (0..3).map(|i| mlx5_dv::RecvWr { wr_id: 100 + i, sge: vec![at(1024 + 64 * i)] }).collect();
    r.sim.post_recv(&r.server, &recvs).unwrap();
    let mut ops = vec![write(1, mr.rkey, mr.addr + 512, at(0))];
    ops.extend((0..3).map(|i| WrOp::Send { wr_id: 2 + i, flags: SendFlags::SIGNALED, sge: vec![at(64 * i)] }));
    r.sim.post_send(&r.client, &ops).unwrap();
    let mut got = Vec::new();
    let mut wc = [Wc::default(); 8];
    for &m in max {
        let n = if m == 0 {
            let v = r.sim.poll_cq(&r.cq, 8).unwrap();
            let n = v.len();
            wc[..n].copy_from_slice(&v);
            n
        } else {
            r.sim.poll_cq_into(&r.cq, &mut wc[..m]).unwrap()
        };
        assert!(n <= m.max(8), "a poll of {m} returned {n}");
        got.extend(wc[..n].iter().map(|w| (w.wr_id, w.status, w.opcode)));
    }
    assert_eq!(r.sim.poll_cq_into(&r.cq, &mut wc).unwrap(), 0, "the CQ is drained");
    got
}

#[test]
fn a_poll_cut_anywhere_among_requester_and_responder_cqes_returns_the_same_completions() {
    let whole = completions_polled_by(&[0]);
    assert_eq!(whole.len(), 7, "one WRITE and three SENDs, each completed at both ends but the WRITE: {whole:?}");
    assert!(whole.iter().all(|&(_, status, _)| status == wc_status::SUCCESS), "{whole:?}");
    let mut ids: Vec<u64> = whole.iter().map(|w| w.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3, 4, 100, 101, 102]);
    for cut in [&[1, 1, 1, 1, 1, 1, 1][..], &[2, 2, 2, 2], &[3, 1, 3], &[1, 2, 4], &[6, 1], &[7]] {
        assert_eq!(completions_polled_by(cut), whole, "polled {cut:?} at a time");
    }
}
