//! The message-rate loop allocates nothing per work request once warm: 64-byte RDMA WRITEs
//! over a loopback RC pair, posted one per chain and 32 per chain, then polled. Polled into
//! the caller's array (`Queues::poll_cq_into`, as `ibv_poll_cq` takes one) the loop makes no
//! heap allocation at all; `Queues::poll_cq` allocates only the `Vec<Wc>` its signature
//! returns, once per call that returns completions.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mlx5_dv::{AccessFlags as A, Backend, Cq, Qp, QpCap, QpDest, QpInitAttr, QpModify, SendFlags, Sge, Wc, WrOp};
use mlx5_sim::Simulator;

thread_local! {
    /// Allocations (and reallocations) made by this thread.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // During thread teardown the counter may be gone; nothing to count then.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

/// The system allocator, counting per thread (tests run on threads of their own).
struct Counting;

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; counting touches only a const-initialised thread-local `Cell`, which neither
// allocates nor unwinds.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `alloc` is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` and `layout` came from this allocator, that is from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

struct Loop {
    sim: Simulator,
    qp: Qp,
    cq: Cq,
    chain: Vec<WrOp>,
}

fn setup(per_chain: usize) -> Loop {
    let mut sim = Simulator::with_profile("cx6dx").expect("shipped profile");
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0").expect("open");
    let pd = b.alloc_pd(ctx).expect("pd");
    let cq = b.create_cq(ctx, 256).expect("cq");
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 0 };
    let attr = QpInitAttr::rc(pd, cq.handle, cap, None);
    let qa = b.create_qp(&attr).expect("qp");
    let qb = b.create_qp(&attr).expect("qp");
    for (q, peer) in [(&qa, &qb), (&qb, &qa)] {
        for step in QpModify::connect(ACCESS, QpDest::to(peer, &b.query_port(ctx, 1).expect("port"))) {
            b.modify_qp(q, &step).expect("connect");
        }
    }
    let len = per_chain * 64;
    let src = b.alloc_buf(len).expect("src");
    b.write_buf(&src, 0, &vec![0x5a; len]).expect("fill");
    let smr = b.reg_mr(pd, src.addr, len as u64, A::LOCAL_WRITE).expect("src mr");
    let dst = b.alloc_buf(len).expect("dst");
    let dmr = b.reg_mr(pd, dst.addr, len as u64, ACCESS).expect("dst mr");
    let chain = (0..per_chain as u64)
        .map(|i| WrOp::RdmaWrite {
            wr_id: i,
            flags: SendFlags::SIGNALED,
            rkey: dmr.rkey,
            remote_addr: dmr.addr + i * 64,
            sge: vec![Sge { addr: smr.addr + i * 64, length: 64, lkey: smr.lkey }],
        })
        .collect();
    Loop { sim, qp: qa, cq, chain }
}

/// How a round polls.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Poll {
    /// `poll_cq`, a `Vec<Wc>` per call.
    Vec,
    /// `poll_cq_into` a caller's array.
    Into,
}

/// What `rounds` post + poll rounds allocated: (in `post_send`, in polling, poll calls that
/// returned completions, messages).
fn measure(l: &mut Loop, rounds: usize, how: Poll) -> (u64, u64, u64, u64) {
    let (mut post, mut poll, mut nonempty, mut msgs) = (0, 0, 0, 0);
    let b: &mut dyn Backend = &mut l.sim;
    let mut array = [Wc::default(); 32];
    for _ in 0..rounds {
        let before = allocs();
        b.post_send(&l.qp, &l.chain).expect("post");
        post += allocs() - before;
        let mut left = l.chain.len();
        while left > 0 {
            let before = allocs();
            let wc = match how {
                Poll::Vec => b.poll_cq(&l.cq, left).expect("poll"),
                Poll::Into => {
                    let n = b.poll_cq_into(&l.cq, &mut array[..left.min(32)]).expect("poll");
                    poll += allocs() - before;
                    // Checked outside the count: the copy is the test's, not the poll's.
                    array[..n].to_vec()
                }
            };
            if how == Poll::Vec {
                poll += allocs() - before;
            }
            assert!(!wc.is_empty(), "a loopback WRITE completes before post_send returns");
            assert!(wc.iter().all(|w| w.status == 0), "{wc:?}");
            nonempty += 1;
            left -= wc.len();
            msgs += wc.len() as u64;
        }
    }
    (post, poll, nonempty, msgs)
}

#[test]
fn posting_and_polling_into_an_array_allocates_nothing() {
    for (per_chain, rounds) in [(1, 2000), (32, 100)] {
        let mut l = setup(per_chain);
        // Warm-up: queues, pools and maps reach their working sizes.
        measure(&mut l, 100, Poll::Into);
        let (post, poll, _, msgs) = measure(&mut l, rounds, Poll::Into);
        assert_eq!(msgs, (per_chain * rounds) as u64);
        assert_eq!(post, 0, "{per_chain} per chain: post_send allocated {post} times over {msgs} messages");
        assert_eq!(poll, 0, "{per_chain} per chain: poll_cq_into allocated {poll} times over {msgs} messages");
    }
}

#[test]
fn posting_and_polling_64_byte_writes_allocates_only_the_returned_wc_vector() {
    for (per_chain, rounds) in [(1, 2000), (32, 100)] {
        let mut l = setup(per_chain);
        measure(&mut l, 100, Poll::Vec);
        let (post, poll, nonempty, msgs) = measure(&mut l, rounds, Poll::Vec);
        assert_eq!(msgs, (per_chain * rounds) as u64);
        assert_eq!(post, 0, "{per_chain} per chain: post_send allocated {post} times over {msgs} messages");
        assert!(
            poll <= nonempty,
            "{per_chain} per chain: poll_cq allocated {poll} times in {nonempty} calls that returned completions \
             ({msgs} messages); at most the returned Vec each"
        );
    }
}

#[test]
fn polling_into_an_array_returns_what_poll_cq_returns() {
    let mut l = setup(32);
    let b: &mut dyn Backend = &mut l.sim;
    b.post_send(&l.qp, &l.chain).expect("post");
    let mut array = [Wc::default(); 5];
    assert_eq!(b.poll_cq_into(&l.cq, &mut array[..0]).expect("poll"), 0, "an empty array takes nothing");
    let n = b.poll_cq_into(&l.cq, &mut array).expect("poll");
    assert_eq!(n, 5, "as many as the array holds");
    let rest = b.poll_cq(&l.cq, 64).expect("poll");
    let ids: Vec<u64> = array.iter().chain(&rest).map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..32).collect::<Vec<u64>>(), "every completion once, oldest first");
    assert!(array.iter().chain(&rest).all(|w| w.status == 0 && w.opcode == mlx5_dv::wc_opcode::RDMA_WRITE));
    assert_eq!(b.poll_cq_into(&l.cq, &mut array).expect("poll"), 0, "nothing left");
}
